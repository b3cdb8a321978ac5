/*
 * hist.h - a fixed-bucket latency histogram for METRICS: counts per bucket
 * and a sum, no allocation, one observation a few comparisons.
 *
 * The buckets are Prometheus's "le" (less or equal) bounds from 10 us to
 * 10 s in 1-2.5-5 steps, plus +Inf:
 *
 *     1e-05 2.5e-05 5e-05 0.0001 ... 1 2.5 5 10 +Inf      (seconds)
 *
 * bucket[i] counts the observations in (HIST_LE_NS[i-1], HIST_LE_NS[i]]
 * (bucket[HIST_FINITE] those over 10 s); stats.c adds them up into the
 * cumulative _bucket series when it writes METRICS.  A histogram belongs to
 * the module that observes into it (the scheduler's two live in sched_state);
 * stats.c only reads it.
 */
#ifndef RINGFEED_DAEMON_HIST_H
#define RINGFEED_DAEMON_HIST_H

#include <stdint.h>

#define HIST_FINITE 19u              /* finite bounds; one bucket more for +Inf */

static const uint64_t HIST_LE_NS[HIST_FINITE] = {
    10000,      25000,      50000,                   /* 10 us .. 50 us */
    100000,     250000,     500000,                  /* 100 us .. 500 us */
    1000000,    2500000,    5000000,                 /* 1 ms .. 5 ms */
    10000000,   25000000,   50000000,                /* 10 ms .. 50 ms */
    100000000,  250000000,  500000000,               /* 100 ms .. 500 ms */
    1000000000, 2500000000, 5000000000, 10000000000, /* 1 s .. 10 s */
};

struct hist {
    uint64_t bucket[HIST_FINITE + 1]; /* not cumulative; the last is over 10 s */
    uint64_t count;                   /* observations: the buckets' sum */
    uint64_t sum_ns;                  /* their total */
};

/* Counts one observation of ns nanoseconds. */
static inline void hist_observe(struct hist *h, uint64_t ns)
{
    unsigned i = 0;

    while (i < HIST_FINITE && ns > HIST_LE_NS[i])
        i++;
    h->bucket[i]++;
    h->count++;
    h->sum_ns += ns;
}

#endif
