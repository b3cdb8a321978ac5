/*
 * clock.h - the one monotonic clock every ringfeed process reads for
 * durations and deadlines: CLOCK_MONOTONIC in nanoseconds (the vDSO: no
 * system call).  Inline, so hot loops pay one clock_gettime and nothing
 * else.
 */
#ifndef RINGFEED_PROTO_CLOCK_H
#define RINGFEED_PROTO_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CPU time of the calling thread (not advanced while it waits for a CPU). */
static inline uint64_t clock_thread_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t clock_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
