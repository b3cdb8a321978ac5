/*
 * daemon.h - the state of ringfeedd's main process, shared by its modules.
 *
 * The main process is one libuv loop (docs/design.md).  It owns:
 *   - the catalogue: the datasets its config names, opened to learn their
 *     shape and size (the main process never decodes a record);
 *   - the pool: worker processes, each with a SOCK_SEQPACKET socketpair;
 *   - the streams: one per attached client, each with its ring (memfd),
 *     its eventfd, its sampler parameters and its batches in flight;
 *   - the job queue: chunks of batches waiting for a worker;
 *   - the control server: the listening socket and its connections.
 *
 * Invariants kept by the scheduler (sched.c), checked by sched_check()
 * after every scheduler transition in debug and sanitizer builds
 * (RINGFEED_CHECKS), where a broken one aborts:
 *   I1. A stream's batches are scheduled in order: next_g only grows, and
 *       next_g <= released + depth (ring.h M1).
 *   I2. Every job is in exactly one place: the queue, or one worker's
 *       in-flight list.  A job whose chunk bit is set in its slot is done
 *       and is in neither.
 *   I3. A stream's memory is counted in mem_used from ATTACH until its
 *       ring is unmapped.
 */
#ifndef RINGFEED_DAEMON_DAEMON_H
#define RINGFEED_DAEMON_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "clock.h"

#include "conf.h"
#include "ctl.h"
#include "dataset.h"
#include "sampler.h"
#include "transform.h"
#include "wire.h"

#define POOL_MAX 256
#define WORKER_INFLIGHT 8 /* jobs sent to one worker ahead of its DONE: hides the
                            * round trip through the main loop (measured: 2 -> 8
                            * took bench/loader-fmnist from ~0.8M to ~1.5M samples/s) */

struct stream;

/* One chunk of one batch, waiting or in flight. */
struct job {
    struct job *next;          /* queue link */
    struct stream *st;
    uint64_t job_id;
    uint64_t g;
    uint32_t slot, chunk, first, count;
    uint32_t crashes;          /* workers that died running it */
    int32_t worker;            /* pool index running it, -1 when queued */
    int32_t progress;          /* last WIRE_PROGRESS sample, -1 none */
    int32_t suspect;           /* sample a careful run died on, -1 none */
};

struct catalog_entry {
    char name[65];
    char dir[4096];
    struct dataset *ds;        /* NULL: a hole (catalog.c) */
    bool retired;              /* a reload removed it; clients still read it */
};

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
    bool respawn_due;          /* the backoff timer fired */
    uv_timer_t respawn_timer;
    uv_timer_t watchdog_timer; /* kills workers stuck on one job */
    uint64_t watchdog_kills;
    struct wire_counters gone; /* counters of workers no longer running */
    char io_backend[32];
    char io_reason[96];
};

struct daemon {
    uv_loop_t *loop;
    struct conf cf;
    char exe[4096];
    struct catalog_entry *cat;
    uint32_t ncat;

    struct pool pool;

    struct stream *streams;    /* list of attached clients */
    uint32_t nstreams;
    uint32_t next_stream_id;
    uint64_t next_job_id;
    struct job *queue_head, *queue_tail;
    uint32_t queued;

    uint64_t mem_used;         /* bytes of rings (I3) */
    uint64_t mem_locked;       /* of them, mlocked */
    uint64_t start_ns;

    /* totals that outlive streams and workers */
    uint64_t attaches, detaches, attach_refused, clients_killed;
    uint64_t batches, samples;
    uint64_t quarantined;
    struct wire_quarantine *quarantine; /* every sample quarantined */
    uint32_t nquarantine;
    uint64_t conn_total, conn_open, bad_requests;
    uint64_t conn_denied;      /* peers refused by the access rule (server.c) */
    uint64_t reloads, reload_failures;

    bool stopping;
};

/* catalog.c */
int catalog_open(struct daemon *d);
void catalog_close(struct daemon *d);
int catalog_find(const struct daemon *d, const char *name);
/* The names, space separated, for error messages. */
void catalog_names(const struct daemon *d, char *buf, size_t cap);
/* Is entry i offered to ATTACH (open, not removed by a reload)? */
bool catalog_offers(const struct daemon *d, uint32_t i);
uint32_t catalog_offered(const struct daemon *d);
/* Applies a reloaded config's datasets (see catalog.c); *added says the
 * workers must restart to learn new ones.  On error nothing changed. */
int catalog_reload(struct daemon *d, const struct conf *nc, bool *added, struct rf_err *err);
/* Closes removed datasets no client reads any more. */
void catalog_sweep(struct daemon *d);

/* pool.c */
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

/* sched.c */
int sched_attach(struct daemon *d, const struct ctl_attach *a, struct stream **out,
                 struct rf_err *err);
/* Ends a client's stream; the ring says why and gives code (negative errno,
 * see server.c) so the client knows whether to reconnect. */
void sched_detach(struct daemon *d, struct stream *st, const char *why, int code);
/* The eventfd said the client released batches. */
void sched_released(struct daemon *d, struct stream *st);
/* Schedules every batch the rings have room for. */
void sched_fill(struct daemon *d);
void sched_enqueue(struct daemon *d, struct job *j, bool front);
struct job *sched_dequeue(struct daemon *d);
/* A worker reported a job done. */
void sched_job_done(struct daemon *d, struct job *j, const struct wire_done *m);
/* A worker died with these jobs: run them again (or quarantine). */
void sched_job_orphaned(struct daemon *d, struct job *j);
/* Builds the worker message for a job. */
size_t sched_job_message(const struct job *j, struct wire_job *m);
/* Fills the RING_ADD message for a stream (the memfd goes alongside). */
void sched_ring_message(const struct stream *st, struct wire_ring_add *m);
int sched_ring_fd(const struct stream *st);
uint32_t sched_ring_id(const struct stream *st);
bool sched_worker_knows(const struct stream *st, int32_t worker);
void sched_worker_learns(struct stream *st, int32_t worker, bool knows);
/* A worker exited: no stream's ring is mapped there any more. */
void sched_worker_gone(struct daemon *d, int32_t worker);
void sched_check(const struct daemon *d);
/* Starts producing once the client has the ring's fds. */
void sched_start(struct daemon *d, struct stream *st, void *conn);
struct sched_info {
    int memfd, efd;
    uint64_t size, bpe;
    uint32_t id, depth;
};
void sched_info(const struct stream *st, struct sched_info *si);
/* What METRICS and the catalogue read of one attached client. */
struct sched_client {
    uint32_t id, dataset_id;
    const char *dataset, *name;    /* name: "" when the client gave none */
    uint32_t rank, world, batch, depth;
    uint64_t batches, samples, waited_ns, ready, inflight, ring_bytes;
    bool locked, failed;
};
/* The attached clients in turn: prev NULL gives the first; returns NULL
 * past the last.  *out describes the one returned. */
const struct stream *sched_client_next(const struct daemon *d, const struct stream *prev,
                                       struct sched_client *out);

/* server.c */
int server_start(struct daemon *d);
void server_stop(struct daemon *d);
void server_close_all(struct daemon *d);
/* Closes a client's connection (and so detaches its stream). */
void server_kick(void *conn, const char *why);
/* Applies socket-mode and socket-group again (a reload). */
void server_reconfigure(struct daemon *d);

/* service.c: systemd notifications (sdnotify.h) and the stop deadline */
void service_init(struct daemon *d);
/* The pool changed (a worker said HELLO): READY=1 once all are up. */
void service_pool_changed(struct daemon *d);
void service_reloading(struct daemon *d);
void service_reload_failed(struct daemon *d, const char *why);
/* STOPPING=1; SIGKILLs workers left after a deadline; closes its timers. */
void service_stopping(struct daemon *d);
void service_exit(void);

/* reload.c: SIGHUP */
void reload_init(struct daemon *d);
void reload_close(struct daemon *d);

/* main.c: the config as the command line and --config file give it now
 * (flags over file, defaults filled in).  Returns 0 or -errno with err. */
int daemon_load_config(struct conf *out, struct rf_err *err);
/* The --config file, or NULL. */
const char *daemon_config_path(void);

/* stats.c: the STATS lines; returns the number of lines written to buf. */
int stats_format(struct daemon *d, char *buf, size_t cap, size_t *len);
int stats_status_line(struct daemon *d, char *buf, size_t cap);
int stats_metrics(struct daemon *d, char *buf, size_t cap, size_t *len);
/* per-stream lines, called by stats.c; defined in sched.c */
int sched_stats_lines(struct daemon *d, char *buf, size_t cap, size_t *len);

#endif
