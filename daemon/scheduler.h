/*
 * scheduler.h - the scheduler (sched.c): streams, their rings and
 * batches, and the job queues (one per stream, served by deficit round
 * robin; sched.c's comment has the rules).  Invariants I1-I3 are in
 * daemon.h's comment, the queues' own in sched.c's; sched_check() holds
 * them after every transition in checking builds.  (Not named sched.h:
 * on the include path that would shadow the system's <sched.h>, which
 * <pthread.h> includes.)
 */
#ifndef RINGFEED_DAEMON_SCHEDULER_H
#define RINGFEED_DAEMON_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "hist.h"
#include "wire.h"

struct daemon;
struct stream;
struct share_group;
struct ctl_attach;
struct rf_err;

/* A ring a job writes: the stream, the slot, and the batch's number in
 * that stream (its g).  A solo batch has one; a shared one (SHARING in
 * sched.c) one per member of its group. */
struct job_target {
    struct stream *st;
    uint32_t slot;
    uint64_t g;
};

/* One chunk of one batch, waiting or in flight. */
struct job {
    struct job *next;          /* link in its home stream's queue */
    struct stream *st;         /* its home: t[0].st, whose queue holds it and whose
                                * turn of the round robin pays for it */
    struct share_group *grp;   /* the group that planned it (holds a reference), or NULL */
    uint64_t k;                /* the batch's place in the stream function (sched.c) */
    uint64_t job_id;
    uint32_t ntargets;         /* 1..WIRE_TARGETS_MAX */
    struct job_target t[WIRE_TARGETS_MAX];
    uint32_t chunk, first, count;
    uint32_t crashes;          /* workers that died running it */
    int32_t worker;            /* pool index running it, -1 when queued */
    int32_t progress;          /* last WIRE_PROGRESS sample, -1 none */
    int32_t suspect;           /* sample a careful run died on, -1 none */
};


/*
 * The work, in ns by the transform's cost_ns, one turn of the round robin
 * adds to a stream's deficit (sched.c): one job of the size plan_batch
 * aims for (JOB_WORK_NS), so streams of well-sized jobs take turns job by
 * job and a stream of small jobs takes several in its turn.
 */
#define SCHED_QUANTUM_NS 500000

/* The scheduler's state inside struct daemon (only sched.c changes it;
 * pool.c takes jobs through sched_dequeue, stats.c reads the figures). */
struct sched_state {
    struct stream *streams;    /* list of attached clients */
    uint32_t nstreams;
    struct stream *making;     /* clients whose ring is being made (sched.c MAKING),
                                * and those that left meanwhile (dead) */
    uint32_t nmaking;          /* of them, not dead: they count under max-clients */
    uint32_t next_stream_id;
    uint64_t next_job_id;
    struct stream *active;     /* streams with queued jobs, a circular list:
                                * the one whose turn it is, NULL when none */
    uint32_t nactive;          /* streams on that list */
    uint32_t queued;           /* jobs queued, all streams together */
    uint64_t mem_used;         /* bytes of rings (I3), those being made included */
    uint64_t mem_locked;       /* of them, mlocked */
    struct hist wait_hist;     /* clients' waits, all clients (sched.c, WAITS) */
    struct hist prod_hist;     /* batches' production times, all clients */
    /* SHARING (sched.c) */
    struct share_group *groups;
    uint32_t next_group_id;
    uint64_t shared_batches;   /* batches planned once for 2+ rings */
    uint64_t shared_writes;    /* rings those batches went to beyond the first */
    uint64_t share_joins, share_splits;
    /* the tick: holds that outlast SHARE_HOLD_NS, the share windows (WEIGHTS) */
    uv_timer_t tick;
    bool tick_open;
    uint64_t win_start_ns;
};

/* Starts and stops the scheduler's timer (main.c). */
void sched_init(struct daemon *d);
void sched_close(struct daemon *d);

/*
 * Checks an ATTACH and starts making its ring off the loop (sched.c
 * MAKING).  uid: the client's, for the config's weight rules and
 * memory-per-uid; conn: the server's connection, handed back to
 * server_attach_made when the ring is made or could not be.  Returns 0
 * with *out, a stream that is not yet attached (only sched_detach may be
 * called on it until then), or a negative errno with err.
 */
int sched_attach(struct daemon *d, const struct ctl_attach *a, uint32_t uid, void *conn,
                 struct stream **out, struct rf_err *err);
/* Clients whose ring is being made that read catalogue entry i. */
uint32_t sched_making_users(const struct daemon *d, uint32_t i);
/* Ends a client's stream; the ring says why and gives code (negative errno,
 * see server.c) so the client knows whether to reconnect.  On a stream
 * whose ring is being made it cancels the making (no answer is sent). */
void sched_detach(struct daemon *d, struct stream *st, const char *why, int code);
/* The eventfd said the client released batches. */
void sched_released(struct daemon *d, struct stream *st);
/* Schedules every batch the rings have room for. */
void sched_fill(struct daemon *d);
/* Queues j at the back of its stream's queue, or with front (a job run
 * again after its worker died) at the front of it; the queue owns j until
 * sched_dequeue hands it out. */
void sched_enqueue(struct daemon *d, struct job *j, bool front);
/* The next job by deficit round robin over the streams with queued jobs,
 * owned by the caller (a worker's in-flight list) from then on; NULL when
 * nothing is queued. */
struct job *sched_dequeue(struct daemon *d);
/* A job's work in ns by its transform's cost_ns (the fair queue's measure). */
int64_t sched_job_work(const struct job *j);
/* A worker reported a job done, having spent busy_ns on it. */
void sched_job_done(struct daemon *d, struct job *j, const struct wire_done *m, uint64_t busy_ns);
/* Fails every attached stream of a dataset, with why (catalog_fail). */
void sched_fail_dataset(struct daemon *d, uint32_t dataset_id, const char *why);
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
    uint64_t waits;                /* waits ended (sched.c WAITS); waited_ns adds
                                    * the one going on, if any */
    uint64_t production_ns;        /* plan to publication, its batches together */
    uint32_t queued;               /* its jobs waiting for a worker */
    uint32_t weight;               /* WEIGHTS */
    uint64_t worker_ns;            /* worker time of the jobs it was home of */
    double worker_share, weight_share; /* over the last share window, -1 none yet */
    uint32_t group, group_members; /* its share group's id and size; 0, 0 alone */
    uint64_t shared_batches;       /* its batches that other rings shared */
    bool locked, failed;
};
/* The attached clients in turn: prev NULL gives the first; returns NULL
 * past the last.  *out describes the one returned. */
const struct stream *sched_client_next(const struct daemon *d, const struct stream *prev,
                                       struct sched_client *out);


/* Share groups of 2+ clients, or (members) the clients in them. */
uint32_t sched_share_count(const struct daemon *d, bool members);

/* per-stream lines, called by stats.c */
int sched_stats_lines(struct daemon *d, char *buf, size_t cap, size_t *len);

#endif
