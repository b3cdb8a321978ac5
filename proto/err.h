/*
 * err.h - the human half of ringfeed's errors.
 *
 * Library functions return 0 (or a count) on success and a negative errno on
 * failure; that number is what code branches on.  Where a person will read
 * the failure, the function also fills a struct rf_err with one line naming
 * the file, record, byte offset, verb or argument, and what to do.  Callers
 * that do not want the message pass NULL.
 */
#ifndef RINGFEED_PROTO_ERR_H
#define RINGFEED_PROTO_ERR_H

#include <stddef.h>

#define RF_ERR_MSG_MAX 512

struct rf_err {
    char msg[RF_ERR_MSG_MAX];
};

/*
 * Formats a message into err (when err is not NULL) and returns code, which
 * must be a negative errno, so a failing path can read
 *     return rf_err_set(err, -EBADMSG, "%s: record %llu ...", ...);
 */
__attribute__((format(printf, 3, 4)))
int rf_err_set(struct rf_err *err, int code, const char *fmt, ...);

/* Prefixes the message already in err with "prefix: " (for context). */
__attribute__((format(printf, 2, 3)))
void rf_err_prefix(struct rf_err *err, const char *fmt, ...);

#endif
