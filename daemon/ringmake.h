/*
 * ringmake.h - makes and unmakes a client's ring memory off the main loop.
 *
 * Making a ring is memfd_create, ftruncate, mmap, sealing, placing it on
 * numa-node's node (affinity.h: the thread's policy and the ring's own)
 * and then the pages: mlock where RLIMIT_MEMLOCK allows, else fallocate,
 * so the first batch does not pay for them.  For a large ring that last step takes
 * seconds (3.4 GB: some 3 s), and unmapping and closing it a good part of
 * that again, so neither runs on the main loop: stream.c hands them to
 * libuv's thread pool (uv_queue_work) and answers ATTACH when the ring is
 * made.  ring_make_run() is the thread's part: it touches nothing but its
 * struct ring_make, and stops early (ECANCELED) when the main loop sets
 * cancel (the client left, or the daemon stops).
 *
 * Ownership: the main loop fills the inputs, then the thread owns the
 * struct until the after-work callback, which takes the outputs (memfd,
 * efd, mem) and must close or pass them on; on failure ring_make_run has
 * released everything it made itself.
 */
#ifndef RINGFEED_DAEMON_RINGMAKE_H
#define RINGFEED_DAEMON_RINGMAKE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "ring.h"

struct ring_make {
    /* in: set on the main loop before the work is queued */
    struct ring_geom geom;
    bool fail_memfd, fail_mmap;    /* fault injection (fault.h), drawn on the loop */
    bool wait;                     /* fault.h ringwait: wait for cancel, then fail */
    int numa_node;                 /* numa-node's node, -1 none (affinity.h) */
    /* set by the main loop at any time; read by the thread */
    atomic_bool cancel;
    /* out: valid after ring_make_run, read by the after-work callback */
    int rc;                        /* 0, or a negative errno with err */
    struct rf_err err;
    int memfd, efd;                /* -1 when not made */
    void *mem;                     /* the mapping, total_size bytes, or NULL */
    bool locked;                   /* mlocked, all of it */
    int lock_errno;                /* why not (mlock's errno), 0 when locked */
    int place_errno;               /* mbind's or set_mempolicy's errno when the
                                      ring could not be given numa_node, else 0
                                      (the ring is made all the same) */
};

/* Makes the ring mk->geom asks for (thread-safe; blocking).  On success the
 * memfd is sealed, the mapping's pages exist (locked when mk->locked) and
 * hold zeros; the header is left to ring_init on the loop.  Returns mk->rc. */
int ring_make_run(struct ring_make *mk);

/* Unmaps mem (size bytes; NULL: none) and closes the descriptors that are
 * not -1: the blocking part of a ring's end (thread-safe). */
void ring_make_undo(void *mem, uint64_t size, int memfd, int efd);

#endif
