/* err.c - formatting of ringfeed's human-readable error messages. */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int rf_err_set(struct rf_err *err, int code, const char *fmt, ...)
{
    va_list ap;

    if (err) {
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
    }
    return code;
}

void rf_err_prefix(struct rf_err *err, const char *fmt, ...)
{
    char prefix[RF_ERR_MSG_MAX], old[RF_ERR_MSG_MAX];
    va_list ap;

    if (!err)
        return;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    /* truncation is fine: the message stays a terminated line */
    if (snprintf(err->msg, sizeof(err->msg), "%.*s: %.*s", RF_ERR_MSG_MAX / 2,
                 prefix, RF_ERR_MSG_MAX / 2, old) < 0)
        err->msg[0] = '\0';
}
