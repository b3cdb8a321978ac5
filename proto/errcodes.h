/*
 * errcodes.h - the one table of the control protocol's wire error codes.
 *
 * A failed request is answered with the line
 *     ERR <name> <message>
 * where <name> is a short stable token from this table.  Each code has:
 *   - a number, used inside the programs (enum ctl_errcode), never on the
 *     wire, and never renumbered;
 *   - its wire name: once shipped, a name never changes meaning and is
 *     never reused; new failures get new rows, appended;
 *   - the negative errno a client library returns for it (so rf_attach can
 *     return -ENOENT for a dataset the daemon does not serve);
 *   - a default message, used when the sender has nothing more specific.
 *
 * Everything else (the enum, lookups by name and by number, the start-up
 * check) is generated from CTL_ERRCODE_MAP, after libuv's UV_ERRNO_MAP.
 * A reply naming a code this build does not know (a newer daemon) reads as
 * CTL_E_NONE with errno -EPROTO; the client still has the name to print.
 */
#ifndef RINGFEED_PROTO_ERRCODES_H
#define RINGFEED_PROTO_ERRCODES_H

#include <errno.h>
#include <stddef.h>

#include "err.h"

/* X(ENUM_SUFFIX, number, wire name, client errno, default message) */
#define CTL_ERRCODE_MAP(X)                                                     \
    X(BAD_VERB, 1, "bad-verb", -EOPNOTSUPP, "unknown verb")                    \
    X(BAD_ARG, 2, "bad-arg", -EINVAL, "bad argument")                          \
    X(TOO_LONG, 3, "too-long", -EMSGSIZE, "line too long")                     \
    X(BAD_LINE, 4, "bad-line", -EPROTO,                                        \
      "line is not UTF-8 text free of control characters")                     \
    X(NO_DATASET, 5, "no-dataset", -ENOENT,                                    \
      "no such dataset in the daemon's catalogue")                             \
    X(OVER_BUDGET, 6, "over-budget", -ENOMEM,                                  \
      "the daemon's memory budget would be exceeded")                          \
    X(VERSION, 7, "version", -EPROTONOSUPPORT,                                 \
      "ring layout version not supported by this daemon")                      \
    X(DENIED, 8, "denied", -EACCES, "permission denied")                       \
    X(BUSY, 9, "busy", -EBUSY, "busy, try again later")                        \
    X(INTERNAL, 10, "internal", -EIO, "internal error in the daemon")          \
    X(CLOSING, 11, "closing", -ESHUTDOWN, "the daemon is shutting down")       \
    X(TOO_MANY, 12, "too-many", -EUSERS,                                       \
      "too many clients attached to the daemon")                               \
    X(BAD_DATASET, 13, "bad-dataset", -EBADMSG,                                \
      "the dataset on disk failed validation")                                \
    X(CATALOGUE_ONLY, 14, "catalogue-only", -EREMOTE,                          \
      "this daemon serves only the datasets its config names")                 \
    X(RELOAD_REFUSED, 15, "reload-refused", -ECANCELED,                        \
      "the reload was refused; the running config stays")

enum ctl_errcode {
    CTL_E_NONE = 0, /* no error, or a name this build does not know */
#define CTL_ERRCODE_ENUM_(sym, num, name, err, msg) CTL_E_##sym = num,
    CTL_ERRCODE_MAP(CTL_ERRCODE_ENUM_)
#undef CTL_ERRCODE_ENUM_
};

/* Longest wire name, for buffers that hold one. */
#define CTL_ERRCODE_NAME_MAX 31

/* The code whose wire name is the span name[0..len); CTL_E_NONE if none. */
enum ctl_errcode ctl_errcode_from_name(const char *name, size_t len);

/* The wire name of code; NULL for CTL_E_NONE or a number not in the table. */
const char *ctl_errcode_name(enum ctl_errcode code);

/* The negative errno for code; -EPROTO for CTL_E_NONE or an unknown number. */
int ctl_errcode_errno(enum ctl_errcode code);

/* The default message of code; NULL for CTL_E_NONE or an unknown number. */
const char *ctl_errcode_message(enum ctl_errcode code);

/*
 * The start-up check: every number unique and positive, every name unique,
 * 1..CTL_ERRCODE_NAME_MAX bytes of [a-z0-9-], every errno negative, every
 * message non-empty.  Returns 0, or -EINVAL with the offending row in err.
 */
int ctl_errcode_check(struct rf_err *err);

#endif
