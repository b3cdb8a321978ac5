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

static inline uint64_t clock_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
