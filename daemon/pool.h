/*
 * pool.h - the worker pool (pool.c): worker processes, their sockets, their jobs
 * in flight, respawn and the job watchdog.
 */
#ifndef RINGFEED_DAEMON_POOL_H
#define RINGFEED_DAEMON_POOL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>
#include "wire.h"

struct daemon;
struct stream;
struct job;

#define POOL_MAX 256
#define WORKER_INFLIGHT 8 /* jobs sent to one worker ahead of its DONE: hides the
                            * round trip through the main loop (measured: 2 -> 8
                            * took bench/loader-fmnist from ~0.8M to ~1.5M samples/s) */
/* ... but a worker holding this much work (by its streams' measured cost per
 * sample, fairq.c MEASURED) is
 * sent no more: a job queued in a worker's socket waits for every job ahead
 * of it there, whatever the fair queue says, so a stream of expensive jobs
 * must not fill the workers' sockets (at most two 4-sample JPEG crop jobs,
 * while eight small raw jobs still go ahead). */
#define WORKER_AHEAD_NS 4000000

/* A pool position's worker.  The moves (pool.c, worker_to): EMPTY ->
 * STARTING (spawned) -> READY (said hello) -> RETIRING (asked to finish,
 * or being killed) -> EMPTY (both handles closed, every job given back);
 * STARTING and READY may also go straight to EMPTY when the process dies. */
enum worker_state { W_EMPTY = 0, W_STARTING, W_READY, W_RETIRING, W_STATES };

struct worker {
    int32_t index;             /* position in the pool's array */
    uint32_t generation;       /* bumped each spawn in this position */
    enum worker_state state;   /* changed only by pool.c's worker_to() */
    uv_process_t proc;
    uv_poll_t poll;
    int fd;                    /* main's end of the socketpair */
    bool proc_open, poll_open, exited;
    pid_t pid;
    struct job *inflight[WORKER_INFLIGHT];
    unsigned ninflight;
    struct wire_counters c;    /* last cumulative counters it reported */
    char io_backend[32];
    char io_reason[96];
    uint64_t started_ns;
    uint64_t busy_since;       /* when its current job began (watchdog) */
};

struct pool {
    struct worker w[POOL_MAX];
    uint32_t target;           /* what WORKERS asked for */
    uint32_t alive;            /* spawned and not exited */
    uint64_t deaths;           /* workers that died unasked */
    uint64_t spawned;
    uint64_t retired;
    uint32_t backoff_ms;       /* respawn delay, doubling on quick deaths */
    uint32_t young_in_row;     /* young deaths since a worker last stayed up */
    bool respawn_loop;         /* young_in_row reached LOOP_YOUNG (pool.c) */
    uint64_t respawn_loops;    /* episodes reported since start */
    bool respawn_due;          /* the backoff timer fired */
    uv_timer_t respawn_timer;
    uv_timer_t watchdog_timer; /* kills workers stuck on one job */
    uv_timer_t loop_timer;     /* is a new worker staying up? (respawn loop) */
    uint64_t watchdog_kills;
    struct wire_counters gone; /* counters of workers no longer running */
    char io_backend[32];
    char io_reason[96];
};

int pool_start(struct daemon *d);
int pool_resize(struct daemon *d, uint32_t n);
void pool_stop(struct daemon *d);
/* Hands queued jobs to workers with room. */
void pool_dispatch(struct daemon *d);
/* Tells every worker that knows it to unmap ring id. */
void pool_forget_ring(struct daemon *d, struct stream *st);
/* Marks a sample bad for every worker, now and later. */
void pool_quarantine(struct daemon *d, uint32_t dataset_id, uint64_t index);
/* Sums the counters of live and gone workers. */
void pool_totals(const struct daemon *d, struct wire_counters *out);
/* Retires every worker after its current jobs and starts new ones (with
 * the catalogue and settings as they are now): a reload's restart. */
void pool_roll(struct daemon *d);
/* Applies watchdog-sec as d->cf says now. */
void pool_reconfigure(struct daemon *d);
/* Sends sig to every worker process still running. */
void pool_signal_all(struct daemon *d, int sig);

#endif
