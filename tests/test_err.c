/* test_err.c - rf_err formats messages, returns the code, tolerates NULL. */
#include <errno.h>
#include <string.h>

#include "err.h"
#include "tap.h"

int main(void)
{
    struct rf_err e;
    char long_arg[2 * RF_ERR_MSG_MAX];

    TAP_IS_INT(rf_err_set(&e, -EBADMSG, "%s: record %d", "a.rfs", 7), -EBADMSG,
               "rf_err_set returns its code");
    TAP_IS_STR(e.msg, "a.rfs: record 7", "message formatted");
    rf_err_prefix(&e, "dataset %s", "fmnist");
    TAP_IS_STR(e.msg, "dataset fmnist: a.rfs: record 7", "prefix prepended");
    TAP_IS_INT(rf_err_set(NULL, -EIO, "ignored"), -EIO, "NULL err is allowed");
    rf_err_prefix(NULL, "x");

    memset(long_arg, 'x', sizeof(long_arg) - 1);
    long_arg[sizeof(long_arg) - 1] = '\0';
    rf_err_set(&e, -E2BIG, "%s", long_arg);
    TAP_IS_INT(strlen(e.msg), RF_ERR_MSG_MAX - 1, "long message truncated, terminated");
    return tap_done();
}
