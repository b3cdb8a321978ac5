/*
 * scheduler.h - the scheduler: streams, their rings and batches, and the
 * job queues; what the rest of the main process calls.  It is five
 * modules, each owning its state:
 *
 *   stream.c  a client's stream and its ring: attach, releases, failure,
 *             kicks, detach, the figures STATS and METRICS read
 *   fairq.c   the job queues and the deficit round robin over them
 *             (FAIRNESS, WEIGHTS)
 *   share.c   decode-once share groups (SHARING)
 *   plan.c    batches planned into jobs, and the jobs' completion
 *   sched.c   the state below, the tick, deferred kicks, sched_check
 *
 * The scheduler calls out only through struct sched_ops (the pool, the
 * server, the catalogue), given to sched_init.  Invariants I1-I3 are in
 * daemon.h's comment, the modules' own in their files; sched_check()
 * holds them after every transition in checking builds.  (Not named
 * sched.h: on the include path that would shadow the system's <sched.h>,
 * which <pthread.h> includes.)
 */
#ifndef RINGFEED_DAEMON_SCHEDULER_H
#define RINGFEED_DAEMON_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ahead.h"
#include "fairq.h"
#include "hist.h"
#include "share.h"
#include "wire.h"

struct daemon;
struct stream;
struct share_group;
struct ctl_attach;
struct rf_err;

/* A ring a job writes: the stream, the slot, and the batch's number in
 * that stream (its g).  A solo batch has one; a shared one (SHARING in
 * share.c) one per member of its group. */
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
    uint64_t k;                /* the batch's place in the stream function (share.c) */
    uint64_t job_id;
    uint32_t ntargets;         /* 1..WIRE_TARGETS_MAX */
    struct job_target t[WIRE_TARGETS_MAX];
    uint32_t chunk, first, count;
    uint32_t crashes;          /* workers that died running it */
    int32_t worker;            /* pool index running it, -1 when queued */
    int32_t progress;          /* last WIRE_PROGRESS sample, -1 none */
    int32_t suspect;           /* sample a careful run died on, -1 none */
    struct ahead_hold hold;    /* an on-demand dataset's shards it reads (ahead.h) */
    uint32_t lost;             /* times a worker found a held shard gone (PARKED) */
};


/*
 * The work, in ns of a job's work (fairq.c), one turn of the round robin
 * adds to a stream's deficit (fairq.c): one job of the size plan_batch
 * aims for (JOB_WORK_NS), so streams of well-sized jobs take turns job by
 * job and a stream of small jobs takes several in its turn.
 */
#define SCHED_QUANTUM_NS 500000

/*
 * What the scheduler asks of the rest of the main process: every call out
 * of it goes through these (main.c gives the daemon's; tests/test_sched.c
 * its fakes).  None is called while a scheduler structure is half changed;
 * kick only from sched_run_kicks, outside any other scheduler call, since
 * the server's kick detaches the stream (re-entering the scheduler).
 */
struct sched_ops {
    /* hand queued jobs to idle workers (pool_dispatch) */
    void (*dispatch)(struct daemon *d);
    /* a detaching stream's ring: RING_DEL to the workers that map it */
    void (*forget_ring)(struct daemon *d, struct stream *st);
    /* a sample killed workers twice at the same point */
    void (*quarantine)(struct daemon *d, uint32_t dataset_id, uint64_t index);
    /* the dataset's files changed under it: fail it (catalog_fail) */
    void (*dataset_failed)(struct daemon *d, uint32_t dataset_id, const char *why);
    /* close the client's connection, which detaches its stream */
    void (*kick)(void *conn, const char *why);
    /* a ring made off the loop (stream.c MAKING): answer the ATTACH on conn
     * with st attached (rc 0), or with the error (st NULL); called from the
     * loop's work callback, never inside another scheduler call */
    void (*attach_made)(void *conn, struct stream *st, int rc, const struct rf_err *err);
    /* the catalogue: a dataset's index by name or -ENOENT; why a failed
     * one is not served, or NULL; the names served, for messages */
    int (*find_dataset)(const struct daemon *d, const char *name);
    const char *(*failed_reason)(const struct daemon *d, const char *name);
    void (*dataset_names)(const struct daemon *d, char *buf, size_t cap);
    /* on-demand datasets (ahead.h; NULL: none): is the dataset one; can a
     * batch of these samples be planned now; hold and release a job's
     * shards */
    bool (*on_demand)(const struct daemon *d, uint32_t dataset_id);
    int (*shards_ready)(struct daemon *d, uint32_t dataset_id, const uint64_t *samples,
                        uint32_t n, struct rf_err *err);
    int (*shards_hold)(struct daemon *d, uint32_t dataset_id, const uint64_t *samples,
                       uint32_t n, struct ahead_hold *h);
    void (*shards_release)(struct daemon *d, struct ahead_hold *h);
    /* a worker could not open a shard h holds: look again, fetch it anew;
     * are h's shards all there again (0, -EAGAIN, or -EIO with err) */
    void (*shards_lost)(struct daemon *d, const struct ahead_hold *h);
    int (*shards_held_ready)(struct daemon *d, const struct ahead_hold *h, struct rf_err *err);
    /* the clock (ns) the scheduler times holds, waits and windows by; NULL:
     * CLOCK_MONOTONIC (clock_mono_ns).  Tests give their own to play time */
    uint64_t (*now)(void);
};

/* The scheduler's state inside struct daemon (only the scheduler's modules
 * change it; pool.c takes jobs through sched_dequeue, stats.c reads the
 * figures). */
struct sched_state {
    const struct sched_ops *ops;
    struct stream *streams;    /* list of attached clients */
    uint32_t nstreams;
    struct stream *making;     /* clients whose ring is being made (stream.c MAKING),
                                * and those that left meanwhile (dead) */
    uint32_t nmaking;          /* of them, not dead: they count under max-clients */
    uint32_t next_stream_id;
    uint64_t next_job_id;
    struct job *parked;        /* jobs waiting for a lost shard (plan.c PARKED) */
    struct fq_state fq;        /* fairq.c's: the queues and the round robin */
    struct share_state share;  /* share.c's: the groups */
    uint64_t mem_used;         /* bytes of rings (I3), those being made included */
    uint64_t mem_locked;       /* of them, mlocked */
    uint64_t streams_failed;   /* streams failed (stream_fail) since start */
    struct hist wait_hist;     /* clients' waits, all clients (stream.c, WAITS) */
    struct hist prod_hist;     /* batches' production times, all clients */
    /* the tick: holds that outlast SHARE_HOLD_NS, the share windows (WEIGHTS) */
    uv_timer_t tick;
    bool tick_open;
    /* kicks waiting for the loop's next turn (stream_kick, sched_run_kicks) */
    uv_idle_t kick_idle;
    bool kick_open;
    uint32_t kicks_pending;
};

/* Starts and stops the scheduler's timers (main.c); ops stays the caller's. */
void sched_init(struct daemon *d, const struct sched_ops *ops);
/* The scheduler's clock: ops->now, else CLOCK_MONOTONIC, in ns. */
uint64_t sched_now(const struct daemon *d);
void sched_close(struct daemon *d);
/* Tells the server to disconnect each stream kicked since the last call;
 * the loop runs it on its next turn after a kick (tests call it). */
void sched_run_kicks(struct daemon *d);

/*
 * Checks an ATTACH and starts making its ring off the loop (stream.c
 * MAKING).  uid: the client's, for the config's weight rules and
 * memory-per-uid; conn: the server's connection, handed back to
 * ops->attach_made when the ring is made or could not be.  Returns 0
 * with *out, a stream that is not yet attached (only sched_detach may be
 * called on it until then), or a negative errno with err.
 */
int sched_attach(struct daemon *d, const struct ctl_attach *a, uint32_t uid, void *conn,
                 struct stream **out, struct rf_err *err);
/* Who the attached client is, for STATS, METRICS, top and the log: its
 * process (SO_PEERCRED) and its systemd unit or cgroup (NULL or "": "-"). */
void sched_set_peer(struct stream *st, uint32_t pid, const char *unit);
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
/*
 * For ahead.c's walk: calls use(arg, sample, ahead, order, next) for the
 * samples of every live stream of dataset, in the order they will be
 * planned, from its next batch to plan on: ahead counts that stream's
 * samples from 0, order is the stream's place in the list, next says the
 * sample is in its next batch.  A stream's walk ends when use returns
 * false, after max samples, or at the last epoch.
 */
void sched_walk_ahead(struct daemon *d, uint32_t dataset, uint64_t max,
                      bool (*use)(void *arg, uint64_t sample, uint64_t ahead, uint32_t order,
                                  bool next),
                      void *arg);
/* Queues j at the back of its stream's queue, or with front (a job run
 * again after its worker died) at the front of it; the queue owns j until
 * sched_dequeue hands it out. */
void sched_enqueue(struct daemon *d, struct job *j, bool front);
/* The next job by deficit round robin over the streams with queued jobs,
 * owned by the caller (a worker's in-flight list) from then on; NULL when
 * nothing is queued. */
struct job *sched_dequeue(struct daemon *d);
/* A job's work in ns by its stream's measured cost per sample (fairq.c
 * MEASURED: the fair queue's measure). */
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
/* Streams whose next batch waits for a remote shard now (NET_WAITS). */
uint32_t sched_network_waiting(const struct daemon *d);
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
/* A mixture stream's sources and where each one's samples begin in its
 * indices ("web:0,books:60000"), for the ATTACH reply; "" for another. */
void sched_sources_text(const struct stream *st, char *buf, size_t cap);
/* What METRICS and the catalogue read of one attached client. */
struct sched_client {
    uint32_t id, dataset_id;
    const char *dataset, *name;    /* name: "" when the client gave none */
    uint32_t rank, world, batch, depth;
    uint64_t batches, samples, waited_ns, ready, inflight, ring_bytes;
    uint64_t net_waited_ns;        /* NET_WAITS (stream.h): its next batch waited for a
                                    * remote shard, the wait going on included */
    uint64_t net_waits;            /* those waits ended */
    uint64_t waits;                /* waits ended (stream.c WAITS); waited_ns adds
                                    * the one going on, if any */
    uint64_t production_ns;        /* plan to publication, its batches together */
    uint32_t queued;               /* its jobs waiting for a worker */
    uint32_t weight;               /* WEIGHTS */
    uint64_t worker_ns;            /* worker time of the jobs it was home of */
    double worker_share, weight_share; /* over the last share window, -1 none yet */
    uint32_t group, group_members; /* its share group's id and size; 0, 0 alone */
    uint64_t shared_batches;       /* its batches that other rings shared */
    bool locked, failed;
    uint32_t uid, pid;             /* who: SO_PEERCRED at the connection */
    const char *unit;              /* its unit or cgroup, "-" when unknown */
    uint32_t weight_asked;         /* its ATTACH's weight=, 0 none; weight is what
                                    * the config allows of it (WEIGHTS) */
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
