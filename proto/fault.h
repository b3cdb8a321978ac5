/*
 * fault.h - named fault injection points, for tests of the paths that
 * handle failures (in the manner of SQLite's test VFS and its fault tests).
 *
 * A debug or sanitizer build (RINGFEED_FAULTS, config.h) reads
 * RINGFEED_FAULT from the environment once (fault_init) and makes the
 * chosen calls fail as the real call would:
 *
 *     RINGFEED_FAULT = RULE[,RULE...]
 *     RULE           = POINT:N          the Nth call at POINT fails, once
 *                    | POINT:every-N    every Nth call at POINT fails
 *     POINT          = read | alloc | memfd | mmap | send | accept | ringwait
 *
 *   read    a worker's record read comes back with EIO (daemon/worker)
 *   alloc   the main process's allocations for a connection, a stream and
 *           a job return NULL (daemon/server.c, daemon/stream.c, daemon/plan.c)
 *   memfd   memfd_create for a ring fails with EMFILE (daemon/stream.c)
 *   mmap    mapping a ring fails with ENOMEM (daemon/stream.c)
 *   send    a reply, or the ring's fds, cannot be sent: EPIPE
 *           (daemon/server.c)
 *   accept  accepting a control connection fails with EMFILE: the peer is
 *           dropped (daemon/server.c)
 *   ringwait making a ring (off the main loop) waits until its client
 *           leaves or the daemon stops, then fails with ECANCELED: the
 *           control socket must answer meanwhile (daemon/ringmake.c)
 *
 * Counts are per process: each worker counts its own reads.  In other
 * builds fault_hit() is a constant false and the variable is ignored (the
 * daemon says so once, at start).  tests/integration/test_faults.py runs an
 * epoch with each point failing once.
 */
#ifndef RINGFEED_PROTO_FAULT_H
#define RINGFEED_PROTO_FAULT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "config.h"
#include "err.h"

enum fault_point {
    FAULT_READ,
    FAULT_ALLOC,
    FAULT_MEMFD,
    FAULT_MMAP,
    FAULT_SEND,
    FAULT_ACCEPT,
    FAULT_RINGWAIT,
    FAULT_POINTS,
};

/* What fails at one point: nothing (n == 0), the nth call, or every nth. */
struct fault_rule {
    uint64_t n;
    bool every;
};

/*
 * Parses a RINGFEED_FAULT value into rules[FAULT_POINTS] (all cleared
 * first).  A pure function of the string.  Returns 0, or -EINVAL with err
 * naming the rule that is wrong and what is allowed.
 */
int fault_parse(const char *spec, struct fault_rule rules[FAULT_POINTS], struct rf_err *err);

/* The point's name ("read"), or NULL. */
const char *fault_point_name(enum fault_point p);

#if RINGFEED_FAULTS
/* Reads RINGFEED_FAULT (unset: no faults).  Returns 0, 1 when faults are
 * armed (err says which, for the log), or -EINVAL with err. */
int fault_init(struct rf_err *err);
/* Counts a call at p; true when this one must fail. */
bool fault_hit(enum fault_point p);
#else
static inline int fault_init(struct rf_err *err)
{
    (void)err;
    return getenv("RINGFEED_FAULT") ? 2 : 0; /* 2: set, but not in this build */
}
static inline bool fault_hit(enum fault_point p)
{
    (void)p;
    return false;
}
#endif

/* calloc that fails where the alloc point says so. */
static inline void *fault_calloc(size_t n, size_t size)
{
    return fault_hit(FAULT_ALLOC) ? NULL : calloc(n, size);
}

#endif
