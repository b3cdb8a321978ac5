/*
 * sched.c - streams and the scheduler: one stream per attached client, its
 * ring, and the plan that turns its batches into jobs.
 *
 * A stream delivers batches g = 0, 1, 2, ... since the attach; batch g is
 * (epoch, seq) = the g-th batch after the client's start point, and its
 * samples are the sampler's answer for (dataset size, seed, epoch, rank,
 * world, batch, seq).  Nothing else decides what goes in a batch, so the
 * stream is the same for any worker count and after any crash.
 *
 * Batch g is cut into chunks (at most RING_MAX_CHUNKS, at most WIRE_JOB_MAX
 * samples each), one job per chunk.  Each stream's jobs wait in its own
 * queue, in order; pool.c hands them to workers through sched_dequeue,
 * which takes turns between the streams by deficit round robin, so no
 * client can keep the workers from the others (FAIRNESS below).  The
 * stream's state (ring.h, daemon.h invariants I1-I3):
 *
 *      released <= published <= next_g <= released + depth
 *
 *   released   what the client has handed back (validated from the ring)
 *   published  batches whose every chunk is written and `ready` is set,
 *              counted in order
 *   next_g     the next batch to plan
 *
 * A client's stream ends when its connection closes (sched_detach), when it
 * writes nonsense into the ring, or when its data is too damaged to go on
 * (the ring says RING_FAILED and why).  A detached stream's jobs still in
 * flight keep its struct alive until their DONE or their worker's death.
 *
 * MAKING: an ATTACH that passes the checks reserves its ring's bytes
 * (mem_used) and its place under max-clients, and its stream waits on
 * sched.making while libuv's thread pool makes the ring (ringmake.h); the
 * main loop serves everyone meanwhile.  When the ring is made the stream
 * joins sched.streams and the server answers the ATTACH
 * (server_attach_made).  A client that leaves meanwhile (sched_detach), or
 * a daemon that stops, cancels the making; the stream stays on
 * sched.making, dead, until the thread returns, and its bytes stay counted
 * until then.  A stream being made has no ring, no jobs, no group and no
 * turn: nothing but the making and sched_detach looks at it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "fault.h"
#include "log.h"
#include "ring.h"
#include "ringmake.h"

#define NO_BATCH UINT64_MAX
#define SCHED_EPOCH_MAX UINT32_MAX /* the sampler and RNG key an epoch by 32 bits */
_Static_assert(CONF_MAX_CLIENTS_MAX <= WIRE_MAX_RINGS, "a worker maps every attached ring");
/*
 * Jobs are sized by work: a job should hold at least JOB_WORK_NS of work
 * (by the transform's measured cost per sample), since each one costs a
 * JOB and a DONE message and a wake-up or two, some 10-20 us.  So a batch
 * of small samples is one job (raw Fashion-MNIST: up to 555 samples), and
 * an expensive batch is cut as finely as the 64-bit chunk mask allows
 * (JPEG crops: 256 samples in 64 jobs of 4), so every worker shares it and
 * the first batch comes soonest.
 */
#define JOB_WORK_NS 500000

struct stream {
    struct stream *next;
    struct daemon *d;
    uint32_t id;
    void *conn;                     /* the server's connection */
    bool dead;                      /* detached, waiting for its jobs */
    bool failed;                    /* stream failed; no more scheduling */
    uint32_t jobs_live;

    /* its queue and its place in the round robin (FAIRNESS) */
    struct job *q_head, *q_tail;    /* queued jobs, the next one first */
    uint32_t nqueued;
    struct stream *rr_prev, *rr_next; /* on the active list; NULL when off it */
    int64_t deficit;                /* work (ns) it may still be handed */

    uint32_t dataset_id;
    struct ctl_attach a;
    uint32_t xform_id;
    uint64_t cost_ns;               /* the transform's cost per sample */
    struct xform_out out;
    struct wire_xform xp;
    struct ring_geom geom;
    uint64_t n;                     /* dataset samples */
    uint64_t bpe;                   /* batches per epoch for this rank */
    uint64_t start_epoch, start_seq;

    int memfd, efd;
    void *mem;
    bool locked;
    struct ring_job *making;        /* MAKING: its ring is being made; NULL after */
    uint32_t uid;                   /* the client's (memory-per-uid) */
    uint32_t version;               /* the ring layout the client speaks */
    bool want_release;              /* what the ring's want_release says (M4) */

    uint64_t next_g, published, released;
    uint64_t slot_g[RING_MAX_DEPTH];
    uint32_t slot_count[RING_MAX_DEPTH];
    uint64_t slot_plan_ns[RING_MAX_DEPTH]; /* when its batch was planned (WAITS) */
    uint8_t knows[POOL_MAX / 8];

    /* WEIGHTS */
    uint32_t weight;                /* 1..CTL_ATTACH_WEIGHT_MAX */
    uint64_t worker_ns;             /* worker time of the jobs it was home of */
    uint64_t win_worker_ns;         /* worker_ns when the share window began */
    bool win_active;                /* had its turn in the window */
    double worker_share, weight_share; /* over the last window; -1 before one */

    /* SHARING */
    bool can_share;                 /* share=1 and its position fits 64 bits */
    uint64_t start_k;               /* the place of batch 0: start_epoch * bpe + start_seq */
    struct share_group *grp;        /* its group (a group of one when alone), or NULL */
    struct stream *g_next;          /* the next member of grp */
    bool ever_shared;               /* was in a group of 2+: others' jobs may target it */
    uint64_t join_wait_since;       /* waiting for a group to reach its place (ns) */
    bool join_waited;               /* it waited SHARE_HOLD_NS once: no more waits */
    uint64_t shared_batches;        /* its batches planned for 2+ rings */

    /* stats */
    uint64_t batches, samples;
    uint64_t attach_ns;
    uint64_t starved_since;         /* client caught up and waits; 0 if not (WAITS) */
    uint64_t starved_ns;            /* time the client waited on the daemon, ended waits */
    uint64_t waits;                 /* waits ended (observed into wait_hist) */
    uint64_t production_ns;         /* plan to publication, its published batches */
};


/* MAKING: a ring being made on the thread pool for st. */
struct ring_job {
    uv_work_t req;
    struct stream *st;
    struct ring_make mk;
};

/* A ring's end on the thread pool (unmake_ring). */
struct ring_free {
    uv_work_t req;
    void *mem;
    uint64_t size;
    int memfd, efd;
};

/* SHARING: streams that are the same function at the same place. */
struct share_group {
    struct share_group *next;       /* on d->sched.groups */
    uint32_t id;
    uint32_t refs;                  /* members, and jobs whose grp it is */
    struct stream *members;         /* by g_next, the first planned in its home */
    uint32_t n;                     /* members, 0..WIRE_TARGETS_MAX */
    uint64_t pos;                   /* place of the batch it plans next: every
                                     * member's start_k + next_g (G1) */
    uint64_t unstarted;             /* no job of a batch at or past it was dispatched */
    uint64_t held_since;            /* a member's full ring began holding a waiting
                                     * member (ns), 0 when not */
    bool closed;                    /* made by a split: nobody joins it, and its
                                     * member joins nobody */
};

uint32_t sched_ring_id(const struct stream *st)
{
    return st->id;
}

int sched_ring_fd(const struct stream *st)
{
    return st->memfd;
}

bool sched_worker_knows(const struct stream *st, int32_t w)
{
    return (st->knows[w / 8] >> (w % 8)) & 1;
}

void sched_worker_learns(struct stream *st, int32_t w, bool knows)
{
    if (knows)
        st->knows[w / 8] |= (uint8_t)(1u << (w % 8));
    else
        st->knows[w / 8] &= (uint8_t)~(1u << (w % 8));
}

void sched_worker_gone(struct daemon *d, int32_t w)
{
    for (struct stream *st = d->sched.streams; st; st = st->next)
        sched_worker_learns(st, w, false);
}

void sched_ring_message(const struct stream *st, struct wire_ring_add *m)
{
    memset(m, 0, sizeof(*m));
    m->type = WIRE_RING_ADD;
    m->ring_id = st->id;
    m->total_size = st->geom.total_size;
    m->seed = st->a.seed;
    m->dataset_samples = st->n;
    m->dataset_id = st->dataset_id;
    m->dataset_identity = dataset_identity(st->d->cat[st->dataset_id].ds);
    m->rank = st->a.rank;
    m->world = st->a.world;
    m->batch = st->a.batch;
    m->shuffle = st->a.shuffle;
    m->drop_last = st->a.drop_last;
    m->drop_last_batch = st->a.drop_last_batch;
    m->wake_always = st->version < 2;
    m->max_bad = st->d->cf.max_bad_samples > UINT32_MAX ? UINT32_MAX
                                                        : (uint32_t)st->d->cf.max_bad_samples;
    m->xform = st->xp;
}

/* Slot i of the stream's ring, placed by the daemon's own geometry: the
 * header's copy of it lives in memory the client can write (ring.h M3), so
 * ring_slot(), which reads hdr_size and slot_stride from there, is not used
 * on this side. */
static struct ring_slot *stream_slot(const struct stream *st, uint32_t i)
{
    return (struct ring_slot *)((char *)st->mem + RING_HDR_SIZE +
                                (uint64_t)i * st->geom.slot_stride);
}

/* (epoch, seq) of stream batch g. */
static void batch_pos(const struct stream *st, uint64_t g, uint64_t *epoch, uint64_t *seq)
{
    uint64_t k = st->start_seq + g;

    *epoch = st->start_epoch + k / st->bpe;
    *seq = k % st->bpe;
}

static int make_sampler(const struct stream *st, uint64_t epoch, struct sampler *s)
{
    struct sampler_params p = {
        .n = st->n,
        .seed = st->a.seed,
        .epoch = (uint32_t)epoch,
        .rank = st->a.rank,
        .world = st->a.world,
        .batch = st->a.batch,
        .shuffle = st->a.shuffle,
        .drop_last = st->a.drop_last,
        .drop_last_batch = st->a.drop_last_batch,
    };

    return sampler_init(s, &p, NULL);
}

size_t sched_job_message(const struct job *j, struct wire_job *m)
{
    const struct stream *st = j->t[0].st;
    uint64_t epoch, seq;

    batch_pos(st, j->t[0].g, &epoch, &seq);
    *m = (struct wire_job){
        .type = WIRE_JOB,
        .ring_id = st->id,
        .job_id = j->job_id,
        .stream_seq = j->t[0].g,
        .epoch = epoch,
        .seq = seq,
        .slot = j->t[0].slot,
        .chunk = j->chunk,
        .first = j->first,
        .count = j->count,
        .careful = j->crashes > 0,
        .ntargets = j->ntargets,
    };
    for (uint32_t i = 1; i < j->ntargets; i++)
        m->more[i - 1] = (struct wire_target){ .ring_id = j->t[i].st->id,
                                               .slot = j->t[i].slot,
                                               .stream_seq = j->t[i].g };
    return sizeof(*m);
}

/*
 * FAIRNESS: deficit round robin over the streams, by work.
 *
 * A client must not keep the workers from the others: one that attaches
 * with a deep ring of large batches queues seconds of work at once, and
 * one that re-attaches queues it again each time.  So every stream has its
 * own queue, and the streams with queued jobs stand on a circular list
 * (sched.active points at the one whose turn it is).  A job's work is
 * count * cost_ns, the transform's measured cost per sample, the measure
 * that sizes jobs (JOB_WORK_NS).  sched_dequeue:
 *
 *   - hands out the first job of the stream whose turn it is while that
 *     stream's deficit is above 0, and charges it the job's work (so the
 *     deficit goes below 0 by less than one job's work at most);
 *   - a stream at 0 or below has had its turn: it is given
 *     SCHED_QUANTUM_NS for its next one, and the turn moves on;
 *   - a stream whose queue empties leaves the list, giving up its credit
 *     but keeping its debt (a stream that queues one big job at a time
 *     pays for each all the same); one that joins goes last in the round,
 *     with a quantum added.
 *
 * WEIGHTS: a stream's quantum is SCHED_QUANTUM_NS times its weight (the
 * ATTACH's weight=, else the config's rule for its name or uid, else 1),
 * so while streams wait for the workers each gets work in proportion to
 * its weight; a shared batch (SHARING) is charged to its home, the member
 * that planned it, at the home's weight.  Worker time (the worker's CPU
 * time in the job, so a worker waiting for a core charges nobody) is
 * credited the same way (sched_job_done), and STATS shows, per client, its share of the
 * worker time over the last SHARE_WINDOW_NS against its weight's share of
 * the streams that had a turn in that window.
 *
 * So while others wait, a stream is handed at most its quantum plus one
 * job's work a round, and streams with queued jobs share the workers
 * equally by work whatever their depth, batch or job size; a stream with
 * the workers to itself gets them all.  The quantum is one well-sized job
 * (scheduler.h).  Round robin rather than fair queueing by virtual finish
 * times (a heap) because a dequeue is O(1): one step, plus one visit
 * without a job for each quantum of a stream's debt, i.e. amortized at
 * most one such visit per quantum of work handed out.  It is not a scan of
 * the streams.  A job run again after its worker died goes to the front of
 * its own stream's queue: next for that stream, but no other stream's turn
 * is taken.
 *
 * The queues' invariants (sched_check):
 *   Q1. queued is the sum of the streams' nqueued, and a stream's queue
 *       holds nqueued jobs, all its own, none with a worker;
 *   Q2. a stream is on the active list iff it has queued jobs; nactive
 *       counts the list; a failed or detached stream has none;
 *   Q3. -WIRE_JOB_MAX * cost_ns < deficit <= quantum (SCHED_QUANTUM_NS *
 *       weight), and deficit <= 0 off the list.
 */
static int64_t job_work(const struct job *j)
{
    return (int64_t)j->count * (int64_t)j->st->cost_ns;
}

int64_t sched_job_work(const struct job *j)
{
    return job_work(j);
}

static int64_t quantum(const struct stream *st)
{
    return (int64_t)SCHED_QUANTUM_NS * st->weight;
}

/* Puts st on the active list, last in the round (just before the stream
 * whose turn it is), with a quantum for its turn. */
static void active_join(struct daemon *d, struct stream *st)
{
    struct stream *turn = d->sched.active;

    if (turn) {
        st->rr_next = turn;
        st->rr_prev = turn->rr_prev;
        turn->rr_prev->rr_next = st;
        turn->rr_prev = st;
    } else {
        st->rr_next = st->rr_prev = st;
        d->sched.active = st;
    }
    d->sched.nactive++;
    st->deficit += quantum(st);
}

/* Takes st off the active list (its queue is empty); the turn, if it was
 * st's, passes to the next stream.  Credit is given up, debt kept. */
static void active_leave(struct daemon *d, struct stream *st)
{
    if (st->rr_next == st) {
        d->sched.active = NULL;
    } else {
        st->rr_prev->rr_next = st->rr_next;
        st->rr_next->rr_prev = st->rr_prev;
        if (d->sched.active == st)
            d->sched.active = st->rr_next;
    }
    st->rr_next = st->rr_prev = NULL;
    d->sched.nactive--;
    if (st->deficit > 0)
        st->deficit = 0;
}

void sched_enqueue(struct daemon *d, struct job *j, bool front)
{
    struct stream *st = j->st;

    j->worker = -1;
    if (front) {
        j->next = st->q_head;
        st->q_head = j;
        if (!st->q_tail)
            st->q_tail = j;
    } else {
        j->next = NULL;
        if (st->q_tail)
            st->q_tail->next = j;
        else
            st->q_head = j;
        st->q_tail = j;
    }
    if (st->nqueued++ == 0)
        active_join(d, st);
    d->sched.queued++;
}

struct job *sched_dequeue(struct daemon *d)
{
    struct stream *st;
    struct job *j;

    /* a stream at 0 or below has had its turn: credit for the next one,
     * and the turn moves on (ends: every visit adds a quantum) */
    while ((st = d->sched.active) && st->deficit <= 0) {
        st->deficit += quantum(st);
        d->sched.active = st->rr_next;
    }
    if (!st)
        return NULL;
    st->win_active = true;
    j = st->q_head;
    st->q_head = j->next;
    if (!st->q_head)
        st->q_tail = NULL;
    j->next = NULL;
    st->deficit -= job_work(j);
    st->nqueued--;
    d->sched.queued--;
    if (st->nqueued == 0)
        active_leave(d, st);
    if (j->grp && j->k >= j->grp->unstarted)
        j->grp->unstarted = j->k + 1; /* its batch has begun (SHARING) */
    sched_check(d);
    return j;
}

static void stream_free(struct stream *st)
{
    free(st);
}

static void group_unref(struct daemon *d, struct share_group *g)
{
    if (--g->refs > 0)
        return;
    for (struct share_group **pp = &d->sched.groups; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    free(g);
}

/* Frees a job: each target stream lets go of it (a detached one is freed
 * with its last job), and so does its group. */
static void job_free(struct daemon *d, struct job *j)
{
    for (uint32_t i = 0; i < j->ntargets; i++) {
        struct stream *st = j->t[i].st;

        if (--st->jobs_live == 0 && st->dead)
            stream_free(st);
    }
    if (j->grp)
        group_unref(d, j->grp);
    free(j);
}

/* Takes target i out of j (its stream lets go of the job); the home is
 * then the new t[0]. */
static void job_untarget(struct job *j, uint32_t i)
{
    struct stream *st = j->t[i].st;

    memmove(&j->t[i], &j->t[i + 1], (j->ntargets - i - 1) * sizeof(j->t[0]));
    j->ntargets--;
    st->jobs_live--; /* never the last here: the caller still holds st */
    if (j->ntargets)
        j->st = j->t[0].st;
}

static int32_t target_of(const struct job *j, const struct stream *st)
{
    for (uint32_t i = 0; i < j->ntargets; i++)
        if (j->t[i].st == st)
            return (int32_t)i;
    return -1;
}

/* untarget_queued's work in q's queue: the jobs that need a new home go
 * on *moved. */
static void untarget_in(struct daemon *d, struct stream *q, struct stream *st,
                        struct job ***moved_tail)
{
    struct job **pp = &q->q_head, *last = NULL;
    uint32_t before = q->nqueued;

    while (*pp) {
        struct job *j = *pp;
        int32_t i = target_of(j, st);

        if (i < 0) {
            last = j;
            pp = &j->next;
            continue;
        }
        if (i > 0) {        /* stays where it is, one ring fewer */
            job_untarget(j, (uint32_t)i);
            last = j;
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        q->nqueued--;
        d->sched.queued--;
        if (j->ntargets == 1) {
            job_free(d, j); /* st is still held by the caller: never freed here */
            continue;
        }
        job_untarget(j, 0); /* a new home */
        j->next = NULL;
        **moved_tail = j;
        *moved_tail = &j->next;
    }
    q->q_tail = last;
    if (before && q->nqueued == 0)
        active_leave(d, q);
}

/*
 * Takes st out of every queued job that would write its ring: a job left
 * with no ring is freed, one whose home st was moves to the back of its
 * new home's queue.  A stream never in a group of 2+ is a target only of
 * its own jobs (the old drop of its queue); one that was may be a target
 * of jobs in any member's queue, so every queue is searched (rare: a
 * detach or a failure).
 */
static void untarget_queued(struct daemon *d, struct stream *st)
{
    struct job *moved = NULL, **moved_tail = &moved;

    /* st first (a detaching one is off the list already), then the rest */
    untarget_in(d, st, st, &moved_tail);
    if (st->ever_shared)
        for (struct stream *q = d->sched.streams; q; q = q->next)
            if (q != st)
                untarget_in(d, q, st, &moved_tail);
    while (moved) {
        struct job *j = moved;

        moved = j->next;
        sched_enqueue(d, j, false);
    }
}

/*
 * SHARING: decode once for identical streams.
 *
 * Two clients whose streams are the same function (same_function: the
 * dataset as opened, seed, transform and every parameter of it, batch,
 * rank, world, shuffle, drop_last, drop_last_batch) deliver the same bytes
 * at the same place k = epoch * B + seq (B the batches per epoch).  A
 * stream that may share (ATTACH share=1, the default) always stands in a
 * share group, alone at first; a group plans each of its batches once, for
 * every member: each member's slot header is written (its own g), and the
 * batch's jobs each name every member's ring (job.t[]).  The worker
 * decodes a chunk into the first ring and copies it into the others (a
 * memcpy of the chunk, far cheaper than its decode), setting each ring's
 * chunk bit.  The jobs stand in the queue of their home, the member that
 * planned them, which the round robin charges.
 *
 * Joining: a stream alone joins a group of its function (try_join) when
 * it is about to plan the place p and either the group plans p next, or
 * the group has planned p but not yet handed a job of it or of any later
 * batch to a worker (unstarted <= p): it then writes its slots of those
 * batches and is added to their queued jobs, if its ring has room for all
 * of them; or the group has begun them and the stream's ring has room up
 * to the group's place: it plans those batches alone at once and joins at
 * the group's place.  So clients started together share from their first
 * batches on whatever their start-up skew within a ring's depth of
 * batches (the first one's first batches are with the workers when the
 * second attaches), and a client attaching later joins when it asks for
 * a place the group has not produced yet: planned and not begun, or ahead
 * of the group by at most its ring depth, in which case it waits
 * (planning nothing) until the group gets there, for SHARE_HOLD_NS at
 * most, once.
 *
 * Pace: a group plans a batch only when every member's ring has room, so
 * it goes at its slowest member's pace within the ring depth.  When a
 * member whose ring is full holds back a member that waits (it released
 * everything published) for SHARE_HOLD_NS, the full one is split off into
 * a group of its own and the others go on: a member that stops reading
 * holds the others for at most that long.  Nothing planned changes: the
 * batches already planned for it are still written into its ring, and it
 * plans its own from the same place on, alone for good (its group is
 * closed: it would otherwise join the others again at once).  A member
 * that detaches or fails
 * is taken out of every queued job (untarget_queued); a job in flight
 * still writes its ring, which the worker keeps mapped until the RING_DEL
 * that follows the job on the same socket.
 *
 * So each member's bytes are its solo run's: the same function at the same
 * place, whoever decoded it.  Invariants (sched_check):
 *   G1. every member of a group has start_k + next_g == pos, and its grp is
 *       that group; a group holds 0..WIRE_TARGETS_MAX members;
 *   G2. a job's targets are distinct streams, t[0] is its home (j->st),
 *       and a queued job's targets are neither detached nor failed.
 */
#define SHARE_HOLD_NS (1000ull * 1000000ull)
#define SHARE_WINDOW_NS (5000ull * 1000000ull) /* WEIGHTS: the share window */

static bool same_function(const struct stream *a, const struct stream *b)
{
    const struct daemon *d = a->d;

    return a->dataset_id == b->dataset_id && d->cat[a->dataset_id].ds == d->cat[b->dataset_id].ds &&
           a->a.seed == b->a.seed && a->a.batch == b->a.batch && a->a.rank == b->a.rank &&
           a->a.world == b->a.world && a->a.shuffle == b->a.shuffle &&
           a->a.drop_last == b->a.drop_last && a->a.drop_last_batch == b->a.drop_last_batch &&
           a->xform_id == b->xform_id && memcmp(&a->xp, &b->xp, sizeof(a->xp)) == 0 &&
           a->bpe == b->bpe && a->geom.slot_stride == b->geom.slot_stride &&
           a->geom.meta_size == b->geom.meta_size && a->out.sample_bytes == b->out.sample_bytes;
}

static uint64_t next_pos(const struct stream *st)
{
    return st->start_k + st->next_g;
}

static bool has_room(const struct stream *st, uint64_t n)
{
    return st->next_g + n <= st->released + st->geom.depth;
}

static struct share_group *group_new(struct daemon *d, struct stream *st)
{
    struct share_group *g = fault_calloc(1, sizeof(*g));

    if (!g)
        return NULL;
    g->id = ++d->sched.next_group_id;
    g->refs = 1;
    g->members = st;
    g->n = 1;
    g->pos = g->unstarted = next_pos(st);
    g->next = d->sched.groups;
    d->sched.groups = g;
    st->grp = g;
    st->g_next = NULL;
    return g;
}

/* Takes st out of its group (the group lives on while a job holds it). */
static void group_leave(struct daemon *d, struct stream *st)
{
    struct share_group *g = st->grp;

    if (!g)
        return;
    for (struct stream **pp = &g->members; *pp; pp = &(*pp)->g_next)
        if (*pp == st) {
            *pp = st->g_next;
            break;
        }
    g->n--;
    g->held_since = 0;
    st->grp = NULL;
    st->g_next = NULL;
    group_unref(d, g);
}

/* Puts st (alone in its group) into g, last; p: the place it joins at. */
static void group_enter(struct daemon *d, struct share_group *g, struct stream *st, uint64_t p)
{
    struct stream **pp = &g->members;

    group_leave(d, st);
    while (*pp)
        pp = &(*pp)->g_next;
    *pp = st;
    st->g_next = NULL;
    st->grp = g;
    g->n++;
    g->refs++;
    for (struct stream *m = g->members; m; m = m->g_next)
        m->ever_shared = true;
    d->sched.share_joins++;
    log_info("client %u shares the producer of client %u (group %u, %u members, from "
             "epoch %llu batch %llu)", st->id, g->members->id, g->id, g->n,
             (unsigned long long)(p / st->bpe), (unsigned long long)(p % st->bpe));
}

/* Adds st as a target of every queued job of g's batches at places
 * p .. g->pos - 1 (all queued: p >= g->unstarted), writing its slots of
 * them first.  False when a job is missing (nothing changed then). */
static bool join_planned(struct daemon *d, struct share_group *g, struct stream *st, uint64_t p)
{
    uint64_t nb = g->pos - p;
    uint32_t found = 0, want = 0;
    const struct stream *src = g->members;

    /* each batch's slot, as the member that has it says */
    for (uint64_t q = p; q < g->pos; q++) {
        uint64_t sg = q - src->start_k;
        const struct ring_slot *from = stream_slot(src, (uint32_t)(sg % src->geom.depth));

        if (src->slot_g[sg % src->geom.depth] != sg)
            return false;
        want += from->chunks;
    }
    for (const struct stream *q = d->sched.streams; q; q = q->next)
        for (const struct job *j = q->q_head; j; j = j->next)
            if (j->grp == g && j->k >= p && j->k < g->pos) {
                if (j->ntargets >= WIRE_TARGETS_MAX)
                    return false;
                found++;
            }
    if (found != want)
        return false;
    for (uint64_t q = p; q < g->pos; q++) {
        uint64_t sg = q - src->start_k, g_new = st->next_g + (q - p);
        uint32_t si = (uint32_t)(g_new % st->geom.depth);
        const struct ring_slot *from = stream_slot(src, (uint32_t)(sg % src->geom.depth));
        struct ring_slot *slot = stream_slot(st, si);

        slot->count = from->count;
        slot->stream_seq = g_new;
        slot->epoch = from->epoch;
        slot->seq = from->seq;
        slot->chunks = from->chunks;
        slot->substituted = 0;
        atomic_store_explicit(&slot->chunks_done, 0, memory_order_release);
        atomic_store_explicit(&slot->ready, 0, memory_order_release);
        st->slot_g[si] = g_new;
        st->slot_count[si] = from->count;
        st->slot_plan_ns[si] = clock_mono_ns();
        st->shared_batches++;
    }
    for (struct stream *q = d->sched.streams; q; q = q->next)
        for (struct job *j = q->q_head; j; j = j->next)
            if (j->grp == g && j->k >= p && j->k < g->pos) {
                uint64_t g_new = st->next_g + (j->k - p);

                j->t[j->ntargets++] = (struct job_target){
                    .st = st, .slot = (uint32_t)(g_new % st->geom.depth), .g = g_new };
                st->jobs_live++;
            }
    /* the batches' writes past the first (and, when they were planned for
     * one ring, that they are shared now) */
    d->sched.shared_writes += nb;
    if (g->n == 1) {
        d->sched.shared_batches += nb;
        g->members->shared_batches += nb;
    }
    st->next_g += nb;
    return true;
}

static int plan_batch(struct daemon *d, struct stream *const *m, uint32_t n,
                      struct share_group *grp);
static void plan_failed(struct daemon *d, struct stream *const *m, uint32_t n, int rc);

/* What try_join did. */
enum join { JOIN_NONE, JOIN_DONE, JOIN_WAIT, JOIN_STOP /* st failed while catching up */ };

/* st, alone in its group, about to plan its next place p: joins a group of
 * its function that plans p next, or has p planned and not yet begun; or,
 * when a group is short of p by at most st's depth, waits for it to get
 * there (JOIN_WAIT: st plans nothing meanwhile), for SHARE_HOLD_NS at most
 * (join_wait_since). */
static enum join try_join(struct daemon *d, struct stream *st)
{
    uint64_t p = next_pos(st), now;
    bool ahead = false;

    for (struct share_group *g = d->sched.groups; g; g = g->next) {
        if (g == st->grp || g->n == 0 || g->n >= WIRE_TARGETS_MAX || g->closed ||
            !same_function(g->members, st))
            continue;
        if (g->pos == p) {
            group_enter(d, g, st, p);
            st->join_wait_since = 0;
            return JOIN_DONE;
        }
        if (g->unstarted <= p && p < g->pos && has_room(st, g->pos - p) &&
            join_planned(d, g, st, p)) {
            group_enter(d, g, st, p);
            st->join_wait_since = 0;
            return JOIN_DONE;
        }
        if (p < g->pos && has_room(st, g->pos - p) && st->grp) {
            /* the group has begun the batches up to its place: st decodes
             * those alone, at once, and shares from the group's place on */
            while (next_pos(st) < g->pos) {
                int rc = plan_batch(d, &st, 1, st->grp);

                if (rc < 0) {
                    plan_failed(d, &st, 1, rc);
                    return JOIN_STOP;
                }
            }
            group_enter(d, g, st, g->pos);
            st->join_wait_since = 0;
            return JOIN_DONE;
        }
        if (g->pos < p && p - g->pos <= st->geom.depth)
            ahead = true;
    }
    if (!ahead || st->join_waited) {
        st->join_wait_since = 0;
        return JOIN_NONE;
    }
    now = clock_mono_ns();
    if (!st->join_wait_since)
        st->join_wait_since = now;
    if (now - st->join_wait_since < SHARE_HOLD_NS)
        return JOIN_WAIT;
    st->join_waited = true; /* waited long enough: it goes alone */
    st->join_wait_since = 0;
    return JOIN_NONE;
}

/* Splits the members whose full rings hold back a waiting member, when
 * that has gone on for SHARE_HOLD_NS; arms the tick to look again. */
static void check_hold(struct daemon *d, struct share_group *g)
{
    bool waiting = false;
    uint64_t now;

    for (const struct stream *m = g->members; m; m = m->g_next)
        if (has_room(m, 1) && m->released == m->published)
            waiting = true;
    if (!waiting) {
        g->held_since = 0;
        return;
    }
    now = clock_mono_ns();
    if (!g->held_since) {
        g->held_since = now;
        return;
    }
    if (now - g->held_since < SHARE_HOLD_NS)
        return;
    for (struct stream *m = g->members, *next; m; m = next) {
        next = m->g_next;
        if (has_room(m, 1))
            continue;
        log_info("client %u is split off group %u: its ring has been full for %.1f s while "
                 "another member waited; it decodes its own batches from epoch %llu batch "
                 "%llu on", m->id, g->id, (double)(now - g->held_since) / 1e9,
                 (unsigned long long)(next_pos(m) / m->bpe),
                 (unsigned long long)(next_pos(m) % m->bpe));
        group_leave(d, m);
        if (group_new(d, m))
            m->grp->closed = true;
        else
            m->can_share = false; /* out of memory: it plans alone, with no group */
        d->sched.share_splits++;
    }
    g->held_since = 0;
}

/*
 * Plans the next batch of the n streams m[] (one stream, or a group's
 * members, all at the same place): writes each one's slot header (ring.h
 * M2), queues the batch's jobs in m[0]'s queue, each naming every ring,
 * and advances every next_g.
 */
static int plan_batch(struct daemon *d, struct stream *const *m, uint32_t n,
                      struct share_group *grp)
{
    struct stream *st = m[0];
    uint64_t epoch, seq;
    struct sampler s;
    uint32_t count, per, chunks;
    struct job *jobs[RING_MAX_CHUNKS];

    batch_pos(st, st->next_g, &epoch, &seq);
    if (epoch > SCHED_EPOCH_MAX)
        return -EOVERFLOW;
    if (make_sampler(st, epoch, &s) < 0)
        return -EINVAL;
    /* how many samples; which ones, the workers work out (wire.h) */
    count = sampler_batch_count(&s, seq);
    per = (count + RING_MAX_CHUNKS - 1) / RING_MAX_CHUNKS;
    if (per < JOB_WORK_NS / st->cost_ns)
        per = (uint32_t)(JOB_WORK_NS / st->cost_ns);
    if (per > WIRE_JOB_MAX)
        per = WIRE_JOB_MAX;
    chunks = (count + per - 1) / per;
    /* every job first: a batch is planned whole or not at all */
    for (uint32_t c = 0; c < chunks; c++) {
        jobs[c] = fault_calloc(1, sizeof(*jobs[c]));
        if (!jobs[c]) {
            while (c > 0)
                free(jobs[--c]);
            return -ENOMEM;
        }
    }

    for (uint32_t i = 0; i < n; i++) {
        uint64_t g = m[i]->next_g;
        uint32_t slot_i = (uint32_t)(g % m[i]->geom.depth);
        struct ring_slot *slot = stream_slot(m[i], slot_i);

        slot->count = count;
        slot->stream_seq = g;
        slot->epoch = epoch;
        slot->seq = seq;
        slot->chunks = chunks;
        slot->substituted = 0;
        atomic_store_explicit(&slot->chunks_done, 0, memory_order_release);
        atomic_store_explicit(&slot->ready, 0, memory_order_release);
        m[i]->slot_g[slot_i] = g;
        m[i]->slot_count[slot_i] = count;
        m[i]->slot_plan_ns[slot_i] = clock_mono_ns();
        if (n > 1)
            m[i]->shared_batches++;
    }
    if (n > 1) {
        d->sched.shared_batches++;
        d->sched.shared_writes += n - 1;
    }

    for (uint32_t c = 0; c < chunks; c++) {
        struct job *j = jobs[c];

        j->st = st;
        j->grp = grp;
        if (grp)
            grp->refs++;
        j->k = grp ? grp->pos : 0;
        j->job_id = ++d->sched.next_job_id;
        j->ntargets = n;
        for (uint32_t i = 0; i < n; i++) {
            j->t[i] = (struct job_target){
                .st = m[i], .slot = (uint32_t)(m[i]->next_g % m[i]->geom.depth),
                .g = m[i]->next_g };
            m[i]->jobs_live++;
        }
        j->chunk = c;
        j->first = c * per;
        j->count = count - j->first < per ? count - j->first : per;
        j->progress = -1;
        j->suspect = -1;
        sched_enqueue(d, j, false);
    }
    for (uint32_t i = 0; i < n; i++)
        m[i]->next_g++;
    if (grp)
        grp->pos++;
    return 0;
}

static void stream_fail(struct daemon *d, struct stream *st, int code, const char *why);

/* What a plan that failed with rc means for the streams m[] (all at the
 * same place); false when nothing more may be planned now. */
static void plan_failed(struct daemon *d, struct stream *const *m, uint32_t n, int rc)
{
    for (uint32_t i = 0; i < n; i++) {
        struct stream *st = m[i];

        if (rc == -EOVERFLOW) {
            /* never wrap to epoch 0's stream: end with a reason instead */
            if (st->published == st->next_g)
                stream_fail(d, st, -EOVERFLOW, "the stream reached epoch 4294967296: epochs "
                            "are numbered 0..4294967295 (the sampler's key)");
        } else if (rc == -ENOMEM) {
            /* nothing of the batch was queued: the client gets an error
             * rather than a wait that never ends */
            stream_fail(d, st, -ENOMEM, "the daemon is out of memory: it could not plan the "
                        "next batch");
        } else {
            log_error("client %u: cannot plan batch %llu", st->id,
                      (unsigned long long)st->next_g);
        }
    }
}

/* Plans every batch a group's rings all have room for (M1). */
static void fill_group(struct daemon *d, struct share_group *g)
{
    for (;;) {
        struct stream *m[WIRE_TARGETS_MAX];
        uint32_t n = 0;
        bool room = true;
        int rc;

        for (struct stream *x = g->members; x; x = x->g_next) {
            m[n++] = x;
            room = room && has_room(x, 1);
        }
        if (n == 0 || d->stopping)
            return;
        if (!room) {
            if (n > 1)
                check_hold(d, g);
            if (g->n == n) /* nobody split off: wait for a release */
                return;
            continue;
        }
        g->held_since = 0;
        if (n == 1 && !g->closed) {
            enum join jn = try_join(d, m[0]);

            if (jn == JOIN_WAIT || jn == JOIN_STOP)
                return; /* the tick looks again; or st cannot plan now */
            if (jn == JOIN_DONE) {
                fill_group(d, m[0]->grp); /* a group of 2+: no join again */
                return;
            }
        }
        rc = plan_batch(d, m, n, g);
        if (rc < 0) {
            plan_failed(d, m, n, rc);
            return;
        }
    }
}

/* Plans every batch the stream's ring has room for (M1). */
static void fill_stream(struct daemon *d, struct stream *st)
{
    if (st->failed || d->stopping)
        return;
    if (st->grp) {
        fill_group(d, st->grp);
        return;
    }
    while (has_room(st, 1)) {
        int rc = plan_batch(d, &st, 1, NULL);

        if (rc < 0) {
            plan_failed(d, &st, 1, rc);
            break;
        }
    }
}

void sched_fill(struct daemon *d)
{
    for (struct stream *st = d->sched.streams; st; st = st->next)
        fill_stream(d, st);
    sched_check(d);
}

static bool take_release(struct daemon *d, struct stream *st);

/* The stream cannot go on: tell the client through the ring and stop. */
static void stream_fail(struct daemon *d, struct stream *st, int code, const char *why)
{
    struct ring_hdr *h = st->mem;

    if (st->failed)
        return;
    st->failed = true;
    log_error("client %u (%s): stream failed: %s", st->id, st->a.name[0] ? st->a.name : "-", why);
    h->error = code;
    snprintf(h->reason, sizeof(h->reason), "%s", why);
    atomic_store_explicit(&h->state, RING_FAILED, memory_order_release);
    for (uint32_t i = 0; i < st->geom.depth; i++)
        ring_futex_wake(&stream_slot(st, i)->ready);
    untarget_queued(d, st);
    group_leave(d, st);
}

/*
 * WAITS: what the two histograms of METRICS observe (sched_state).
 *
 *   prod_hist  per batch, its production time: from plan_batch (the slot
 *              header written, its jobs queued) to advance_published
 *              counting it, i.e. queueing behind earlier batches and other
 *              streams' jobs, the workers' time, and the DONE's way back.
 *   wait_hist  per wait, a client's wait: it starts when the main process
 *              sees that the client has released every batch published so
 *              far (starved_since: take_release, or the attach, for the
 *              first batch) and ends when it sees the next batch published
 *              (advance_published).  The client is counted as waiting
 *              whether or not it is inside rf_next: one that releases its
 *              last batch and computes before asking for the next waits
 *              only for part of the time counted.  The start is seen at
 *              once when the client writes its eventfd, which take_release
 *              asks for (want_release, ring.h M4) while nothing of the
 *              stream is in production or at most one batch is ready; a
 *              client that releases two or more ready batches with no
 *              DONE of its jobs in between is seen caught up at the next
 *              DONE, and when that DONE publishes the batch it waited for,
 *              the wait is not counted.
 *
 * Observing is two clock reads and a few comparisons (hist.h), nothing
 * allocated.  The per-stream sums (starved_ns, waits, production_ns) go to
 * METRICS per client; the histograms outlive the streams.  Checked by
 * sched_check: S1. starved_since != 0 only while released == published;
 * H1. a histogram's count is the sum of its buckets.
 */

/*
 * Counts, in order, the batches whose slot says they are published (ring.h
 * W2): a worker may publish before its DONE reaches us, and the client may
 * release such a batch at once.  The ready word lives in memory the client
 * can write: a client that forges it only garbles its own stream.
 */
static void advance_published(struct daemon *d, struct stream *st)
{
    uint64_t now = 0;

    while (st->published < st->next_g) {
        uint64_t g = st->published;
        uint32_t i = (uint32_t)(g % st->geom.depth);
        struct ring_slot *slot = stream_slot(st, i);

        if (st->slot_g[i] != g ||
            atomic_load_explicit(&slot->ready, memory_order_acquire) != ring_ready_word(g))
            break;
        if (!now)
            now = clock_mono_ns();
        hist_observe(&d->sched.prod_hist, now - st->slot_plan_ns[i]);
        st->production_ns += now - st->slot_plan_ns[i];
        st->batches++;
        st->samples += st->slot_count[i];
        d->batches++;
        d->samples += st->slot_count[i];
        st->published++;
    }
    if (st->starved_since && st->published > st->released) {
        uint64_t wait = (now ? now : clock_mono_ns()) - st->starved_since;

        hist_observe(&d->sched.wait_hist, wait);
        st->starved_ns += wait;
        st->waits++;
        st->starved_since = 0;
    }
}

/* Is the job's chunk already written (its bit set)?  Publishes the batch if
 * the job's worker died between completing the mask and setting ready, and
 * wakes the client if it died before its wake.
 *
 * A slot that no longer holds the job's batch means the batch was
 * published and released, and the slot planned again for batch g + depth
 * (its mask reset): the chunk was written.  This happens when the worker
 * died after its fetch_or but before its DONE, and the release reached the
 * loop before the worker's exit did.  Running the job again would write
 * batch g's samples into batch g + depth and set that batch's bit. */
static bool chunk_written(const struct job *j, const struct job_target *t, bool *published)
{
    struct stream *st = t->st;
    struct ring_slot *slot = stream_slot(st, t->slot);
    uint64_t mask = atomic_load_explicit(&slot->chunks_done, memory_order_acquire);
    uint64_t all = slot->chunks >= 64 ? ~0ull : (1ull << slot->chunks) - 1;

    *published = false;
    if (st->slot_g[t->slot] != t->g)
        return true;
    if (!(mask & (1ull << j->chunk)))
        return false;
    if (mask == all) {
        if (atomic_load_explicit(&slot->ready, memory_order_acquire) != ring_ready_word(t->g))
            atomic_store_explicit(&slot->ready, ring_ready_word(t->g), memory_order_release);
        /* always: the worker may have died between storing ready and its
         * FUTEX_WAKE (ring.h W2), with the client asleep on the slot (a
         * kill storm left a reader asleep for good with its batch ready) */
        ring_futex_wake(&slot->ready);
        *published = true;
    }
    return true;
}

void sched_job_done(struct daemon *d, struct job *j, const struct wire_done *m, uint64_t busy_ns)
{
    struct stream *live[WIRE_TARGETS_MAX];
    uint32_t nlive = 0;
    bool dataset_failed = false;

    j->st->worker_ns += busy_ns; /* the home pays (WEIGHTS) */
    for (uint32_t i = 0; i < j->ntargets; i++) {
        struct stream *st = j->t[i].st;

        if (st->dead || st->failed)
            continue;
        switch (m->status) {
        case WIRE_OK:
            advance_published(d, st);
            break;
        case WIRE_STREAM_FAILED:
            stream_fail(d, st, -EIO, m->reason);
            break;
        case WIRE_DATASET_FAILED:
            dataset_failed = true;
            break;
        default:
            stream_fail(d, st, -EIO, m->reason[0] ? m->reason : "a worker could not run a job");
            break;
        }
        live[nlive++] = st;
    }
    /* the files changed under the dataset: every stream of it fails, and
     * the catalogue stops offering it (catalog.c) */
    if (dataset_failed)
        catalog_fail(d, j->t[0].st->dataset_id, m->reason);
    /* the job holds its streams until here: take_release may free none */
    for (uint32_t i = 0; i < nlive; i++)
        live[i]->jobs_live++;
    job_free(d, j);
    for (uint32_t i = 0; i < nlive; i++) {
        struct stream *st = live[i];

        st->jobs_live--;
        if (!st->dead)
            take_release(d, st); /* st may be gone after this: a client kicked for
                                  * its release counter detaches (server_kick) */
        else if (st->jobs_live == 0)
            stream_free(st);
    }
}

void sched_fail_dataset(struct daemon *d, uint32_t dataset_id, const char *why)
{
    for (struct stream *st = d->sched.streams; st; st = st->next)
        if (st->dataset_id == dataset_id)
            stream_fail(d, st, -EIO, why);
    sched_check(d);
}

static void quarantine(struct daemon *d, struct stream *st, uint64_t index)
{
    log_error("dataset %s: sample %llu killed workers twice at the same point; "
              "quarantined as bad",
              d->cat[st->dataset_id].name, (unsigned long long)index);
    pool_quarantine(d, st->dataset_id, index);
}

void sched_job_orphaned(struct daemon *d, struct job *j)
{
    struct stream *held[WIRE_TARGETS_MAX];
    uint32_t nheld = 0;

    /* every ring it names is held until the end (take_release may kick) */
    for (uint32_t i = 0; i < j->ntargets; i++) {
        held[nheld++] = j->t[i].st;
        j->t[i].st->jobs_live++;
    }
    /* the rings it still has to write: not those gone or failed, nor those
     * whose chunk is written (chunk_written publishes a batch whose worker
     * died between the mask and ready) */
    for (uint32_t i = 0; i < j->ntargets;) {
        struct job_target *t = &j->t[i];
        bool published;

        if (t->st->dead || t->st->failed || chunk_written(j, t, &published))
            job_untarget(j, i);
        else
            i++;
    }
    if (j->ntargets == 0) {
        job_free(d, j);
    } else if (j->crashes >= 8) {
        for (uint32_t i = 0; i < j->ntargets; i++)
            stream_fail(d, j->t[i].st, -EIO, "a job keeps killing workers; see the daemon's log");
        job_free(d, j);
    } else {
        struct stream *st = j->st;

        /* Run it again, carefully (reporting each sample).  A careful run
         * that dies twice on the same sample quarantines that sample:
         * random kills (an operator, the OOM killer) do not land twice on
         * one sample. */
        if (j->crashes > 0 && j->progress >= 0 && j->progress == j->suspect) {
            uint64_t epoch, seq;
            struct sampler s;

            batch_pos(st, j->t[0].g, &epoch, &seq);
            if (make_sampler(st, epoch, &s) == 0)
                quarantine(d, st, sampler_sample(&s, seq, j->first + (uint32_t)j->progress));
            j->suspect = -1;
        } else if (j->progress >= 0) {
            j->suspect = j->progress;
        }
        j->crashes++;
        sched_enqueue(d, j, true);
    }
    /* the hold ends before take_release: it asks for the eventfd when no
     * job of the stream is left (M4), and with the hold counted it would
     * not, and nothing would bring us back (a storm left a reader waiting
     * for good with both slots of its ring ready and nothing queued) */
    for (uint32_t i = 0; i < nheld; i++) {
        struct stream *st = held[i];

        st->jobs_live--;
        if (!st->dead && !st->failed) {
            advance_published(d, st);
            take_release(d, st); /* st may be gone after this */
        } else if (st->jobs_live == 0 && st->dead) {
            stream_free(st);
        }
    }
    sched_check(d);
}

/*
 * Reads and checks the client's release counter (ring.h M3), plans what it
 * makes room for, and says through want_release whether the client must
 * write the eventfd after its next release (M4): when no job of the
 * stream is queued or in flight (otherwise each job's DONE brings us back
 * here), and when at most one batch is ready (WAITS).
 * Returns false when the client was disconnected for a bad counter (st may
 * be gone then).
 */
static bool take_release(struct daemon *d, struct stream *st)
{
    struct ring_hdr *h = st->mem;

    for (;;) {
        uint64_t r = atomic_load_explicit(&h->released, memory_order_acquire);
        bool want;

        if (r != st->released) {
            if (r > st->published)
                advance_published(d, st);
            if (r < st->released || r > st->published) {
                char why[200];

                snprintf(why, sizeof(why),
                         "client wrote release counter %llu into its ring; valid now: %llu..%llu",
                         (unsigned long long)r, (unsigned long long)st->released,
                         (unsigned long long)st->published);
                d->clients_killed++;
                server_kick(st->conn, why);
                return false;
            }
            st->released = r;
            if (r == st->published && !st->starved_since)
                st->starved_since = clock_mono_ns();
            fill_stream(d, st);
        }
        /* also while at most one batch is ready, so that the release that
         * leaves the client waiting is seen at once (WAITS) */
        want = (st->jobs_live == 0 || st->published - st->released <= 1) && !st->failed &&
               !d->stopping;
        if (want != st->want_release) {
            st->want_release = want;
            atomic_store_explicit(&h->want_release, want, memory_order_relaxed);
        }
        if (!want)
            break;
        /* a release that raced the store: seen now, or its eventfd comes */
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&h->released, memory_order_acquire) == st->released)
            break;
    }
    sched_check(d);
    return true;
}

/* The client wrote its eventfd: read and check its release counter. */
void sched_released(struct daemon *d, struct stream *st)
{
    uint64_t value;
    ssize_t n;

    do {
        n = read(st->efd, &value, sizeof(value));
    } while (n == -1 && errno == EINTR);
    if (take_release(d, st))
        pool_dispatch(d);
}

/* The ring's header, once ring_make_run has made the memory (MAKING). */
static void ring_header(struct daemon *d, struct stream *st)
{
    struct ring_hdr *h;

    ring_init(st->mem, &st->geom);
    h = st->mem;
    h->version = st->version;
    h->dtype = RING_U8;
    h->layout = st->out.layout;
    memcpy(h->shape, st->out.shape, sizeof(h->shape));
    h->classes = dataset_info(d->cat[st->dataset_id].ds)->classes;
    h->dataset_samples = st->n;
    h->batches_per_epoch = st->bpe;
    h->start_epoch = st->start_epoch;
    h->start_seq = st->start_seq;
    h->attach_id = st->id;
}

static void ring_free_work(uv_work_t *req)
{
    struct ring_free *f = req->data;

    ring_make_undo(f->mem, f->size, f->memfd, f->efd);
}

static void ring_free_done(uv_work_t *req, int status)
{
    (void)status;
    free(req->data);
}

/* Unmaps and closes a ring's memory on the thread pool (a large locked
 * ring takes hundreds of ms), or here when it cannot be queued. */
static void ring_free(struct daemon *d, void *mem, uint64_t size, int memfd, int efd)
{
    struct ring_free *f = malloc(sizeof(*f));

    if (f) {
        *f = (struct ring_free){ .mem = mem, .size = size, .memfd = memfd, .efd = efd };
        f->req.data = f;
        if (d->loop && uv_queue_work(d->loop, &f->req, ring_free_work, ring_free_done) == 0)
            return;
        free(f);
    }
    ring_make_undo(mem, size, memfd, efd);
}

static void unmake_ring(struct daemon *d, struct stream *st)
{
    if (st->mem && st->locked)
        d->sched.mem_locked -= st->geom.total_size;
    ring_free(d, st->mem, st->geom.total_size, st->memfd, st->efd);
    st->mem = NULL;
    st->memfd = st->efd = -1;
}

/*
 * The depth a client gets when it names none: AUTO_DEPTH_MIN slots, and more
 * (up to AUTO_DEPTH_MAX) while the ring stays within AUTO_RING_BYTES.  Small
 * batches need the deeper ring: each batch is one job of some 50 us, and
 * with 4 slots the workers wait on the round trip through the client
 * (bench/loader-fmnist raw, batch 256: depth 4 -> 16 took 1.4-1.7 to
 * 1.8-2.4 M samples/s), while a ring of large crops (38 MB a slot at
 * 224 x 224 x 256) stays at 4, as deep as its decode needs.
 */
#define AUTO_DEPTH_MIN 4u
#define AUTO_DEPTH_MAX 16u
#define AUTO_RING_BYTES (16ull << 20)

static uint32_t auto_depth(uint32_t batch, uint64_t sample_bytes)
{
    struct ring_geom g;
    struct rf_err err;
    uint64_t n;

    if (ring_geometry(AUTO_DEPTH_MIN, batch, sample_bytes, &g, &err) < 0)
        return AUTO_DEPTH_MIN; /* ring_geometry says why with the real depth */
    n = AUTO_RING_BYTES / g.slot_stride;
    return n < AUTO_DEPTH_MIN ? AUTO_DEPTH_MIN : n > AUTO_DEPTH_MAX ? AUTO_DEPTH_MAX : (uint32_t)n;
}

/* Ring bytes held by uid's clients: attached, and being made (MAKING). */
static uint64_t uid_bytes(const struct daemon *d, uint32_t uid, uint32_t *rings)
{
    uint64_t sum = 0;

    *rings = 0;
    for (int k = 0; k < 2; k++)
        for (const struct stream *st = k ? d->sched.making : d->sched.streams; st; st = st->next)
            if (st->uid == uid) {
                sum += st->geom.total_size;
                ++*rings;
            }
    return sum;
}

/* memory-per-client and memory-per-uid (conf.h) for a ring of need bytes
 * asked by uid.  Returns 0, or -ENOMEM with the figures in err. */
static int over_cap(const struct daemon *d, uint64_t need, uint32_t uid, struct rf_err *err)
{
    uint64_t cap = conf_cap_bytes(&d->cf.memory_per_client, d->cf.memory_budget), used;
    uint32_t rings;

    if (need > cap)
        return rf_err_set(err, -ENOMEM,
                          "attach needs %llu bytes; memory-per-client is %llu bytes, %llu in use "
                          "by this client: lower depth or batch, or raise memory-per-client",
                          (unsigned long long)need, (unsigned long long)cap, 0ull);
    cap = conf_cap_bytes(&d->cf.memory_per_uid, d->cf.memory_budget);
    used = uid_bytes(d, uid, &rings);
    if (need > cap || used > cap - need)
        return rf_err_set(err, -ENOMEM,
                          "attach needs %llu bytes; memory-per-uid is %llu bytes, %llu in use by "
                          "uid %u's %u client(s): detach one, lower depth or batch, or raise "
                          "memory-per-uid", (unsigned long long)need, (unsigned long long)cap,
                          (unsigned long long)used, uid, rings);
    return 0;
}

/* Attached clients, and clients whose ring is being made, that read
 * catalogue entry i (catalog.c keeps such an entry open). */
uint32_t sched_making_users(const struct daemon *d, uint32_t i)
{
    uint32_t n = 0;

    for (const struct stream *st = d->sched.making; st; st = st->next)
        n += !st->dead && st->dataset_id == i;
    return n;
}

static void making_unlink(struct daemon *d, struct stream *st)
{
    for (struct stream **pp = &d->sched.making; *pp; pp = &(*pp)->next)
        if (*pp == st) {
            *pp = st->next;
            break;
        }
    st->next = NULL;
}

static void making_work(uv_work_t *req)
{
    struct ring_job *rj = req->data;

    ring_make_run(&rj->mk);
}

/* The ring is made, or not (MAKING): the stream joins the others and the
 * server answers the ATTACH, or the stream ends. */
static void making_done(uv_work_t *req, int status)
{
    struct ring_job *rj = req->data;
    struct stream *st = rj->st;
    struct daemon *d = st->d;
    struct ring_make *mk = &rj->mk;
    struct rf_err err = mk->err;
    int rc = status < 0 ? rf_err_set(&err, -ECANCELED, "the ring's making was cancelled")
                        : mk->rc;

    making_unlink(d, st);
    st->making = NULL;
    st->memfd = mk->memfd;
    st->efd = mk->efd;
    st->mem = mk->mem;
    st->locked = mk->locked;
    if (st->locked)
        d->sched.mem_locked += st->geom.total_size;
    if (!st->dead)
        d->sched.nmaking--;
    if (rc == 0 && !st->dead && d->cat[st->dataset_id].failed[0])
        rc = rf_err_set(&err, -EBADMSG, "dataset %s failed while the ring was made: %s",
                        st->a.dataset, d->cat[st->dataset_id].failed);
    if (rc == 0 && !st->dead && st->can_share && !group_new(d, st))
        rc = rf_err_set(&err, -EAGAIN, "the daemon is out of memory; try again");
    free(rj);
    if (rc < 0 || st->dead) {
        void *conn = st->dead ? NULL : st->conn;

        d->sched.mem_used -= st->geom.total_size;
        unmake_ring(d, st);
        if (st->dead)
            log_debug("client %u: its ring is released (it left while the ring was made)",
                      st->id);
        else
            log_info("client %u: ATTACH failed: %s", st->id, err.msg);
        free(st);
        if (conn)
            server_attach_made(conn, NULL, rc, &err);
        sched_check(d);
        return;
    }
    ring_header(d, st);
    for (uint32_t i = 0; i < RING_MAX_DEPTH; i++)
        st->slot_g[i] = NO_BATCH;
    st->attach_ns = clock_mono_ns();
    st->starved_since = st->attach_ns; /* the client waits for its first batch from here */
    st->next = d->sched.streams;
    d->sched.streams = st;
    d->sched.nstreams++;
    d->attaches++;
    log_info("client %u attached: dataset %s batch %u rank %u/%u depth %u weight %u, ring %llu "
             "bytes%s", st->id, st->a.dataset, st->a.batch, st->a.rank, st->a.world,
             st->geom.depth, st->weight, (unsigned long long)st->geom.total_size,
             st->locked ? " (locked)" : "");
    sched_check(d);
    server_attach_made(st->conn, st, 0, NULL);
}

/* Reserves st's ring bytes and queues its making (MAKING).  Returns 0, or
 * a negative errno with err (nothing reserved). */
static int making_start(struct daemon *d, struct stream *st, struct rf_err *err)
{
    struct ring_job *rj = fault_calloc(1, sizeof(*rj));
    int rc;

    if (!rj)
        return rf_err_set(err, -EAGAIN, "the daemon is out of memory; try again");
    rj->st = st;
    rj->req.data = rj;
    rj->mk.geom = st->geom;
    rj->mk.fail_memfd = fault_hit(FAULT_MEMFD);
    rj->mk.fail_mmap = fault_hit(FAULT_MMAP);
    rj->mk.wait = fault_hit(FAULT_RINGWAIT);
    atomic_init(&rj->mk.cancel, false);
    rc = uv_queue_work(d->loop, &rj->req, making_work, making_done);
    if (rc < 0) {
        free(rj);
        return rf_err_set(err, -EAGAIN, "cannot queue the ring's making: %s; try again",
                          uv_strerror(rc));
    }
    st->making = rj;
    st->next = d->sched.making;
    d->sched.making = st;
    d->sched.nmaking++;
    d->sched.mem_used += st->geom.total_size;
    return 0;
}

/* The client left while its ring was being made: the making stops at its
 * next step, and making_done frees the stream and the bytes. */
static void making_cancel(struct daemon *d, struct stream *st, const char *why)
{
    if (st->dead)
        return;
    log_info("client %u left while its ring was being made: %s", st->id, why);
    atomic_store_explicit(&st->making->mk.cancel, true, memory_order_relaxed);
    st->dead = true;
    st->conn = NULL;
    d->sched.nmaking--;
    sched_check(d);
}

int sched_attach(struct daemon *d, const struct ctl_attach *a, uint32_t uid, void *conn,
                 struct stream **out, struct rf_err *err)
{
    struct stream *st;
    struct sampler s;
    const struct xform_def *xf;
    const char *tname = ctl_transform_name(a->transform);
    int ds, xi, rc;

    *out = NULL;
    if (a->version != 0 && (a->version < RING_VERSION_MIN || a->version > RING_VERSION))
        return rf_err_set(err, -EPROTO,
                          "client speaks ring layout version %u, this daemon versions %u to %u",
                          a->version, RING_VERSION_MIN, RING_VERSION);
    if (d->sched.nstreams + d->sched.nmaking >= d->cf.max_clients)
        return rf_err_set(err, -EUSERS,
                          "%u clients attached, the daemon's max-clients; try again when one "
                          "detaches, or raise max-clients (at most %u)",
                          d->sched.nstreams + d->sched.nmaking, CONF_MAX_CLIENTS_MAX);
    ds = catalog_find(d, a->dataset);
    if (ds < 0 && catalog_failed_reason(d, a->dataset))
        return rf_err_set(err, -EBADMSG, "dataset %s failed and is not served until a reload: %s",
                          a->dataset, catalog_failed_reason(d, a->dataset));
    if (ds < 0) {
        char names[1024];

        catalog_names(d, names, sizeof(names));
        return rf_err_set(err, -ENOENT, "no dataset \"%s\"; this daemon serves: %s",
                          a->dataset, names[0] ? names : "(none)");
    }
    xi = tname ? xform_find(tname) : -ENOENT;
    if (xi < 0)
        return rf_err_set(err, -EINVAL, "transform=%s is not available; this daemon has: %s",
                          tname ? tname : "?", xform_names());
    st = fault_calloc(1, sizeof(*st));
    if (!st)
        return rf_err_set(err, -EAGAIN, "the daemon is out of memory; try again");
    st->d = d;
    st->memfd = st->efd = -1;
    st->a = *a;
    st->version = a->version ? a->version : RING_VERSION;
    st->dataset_id = (uint32_t)ds;
    st->xform_id = (uint32_t)xi;
    st->n = dataset_info(d->cat[ds].ds)->samples;
    st->xp = (struct wire_xform){
        .id = (uint32_t)xi, .size = a->size,
        .layout = a->layout == CTL_LAYOUT_HWC ? RING_HWC : RING_CHW,
        .scale_lo = a->scale[0], .scale_hi = a->scale[1],
        .ratio_lo = a->ratio[0], .ratio_hi = a->ratio[1],
        .flip = a->flip, .crop = a->crop,
        .pixel_cap = d->cf.pixel_cap,
    };
    xf = xform_get((uint32_t)xi);
    st->cost_ns = xf->cost_ns ? xf->cost_ns : 1;
    rc = xf->geometry(d->cat[ds].ds, &st->xp, &st->out, err);
    if (rc < 0)
        goto fail;
    st->start_epoch = a->epoch;
    st->start_seq = a->seq;
    rc = make_sampler(st, a->epoch, &s);
    if (rc < 0) {
        rf_err_set(err, rc, "rank=%u world=%u batch=%u do not fit dataset %s of %llu samples",
                   a->rank, a->world, a->batch, a->dataset, (unsigned long long)st->n);
        goto fail;
    }
    st->bpe = sampler_batches(&s);
    if (st->bpe == 0) {
        rc = rf_err_set(err, -EINVAL, "this rank would get no batches");
        goto fail;
    }
    /* a start sequence past the epoch's end starts in a later epoch; one
     * past the last epoch (the sampler keys epochs by 32 bits) is refused,
     * never wrapped */
    if (st->start_seq / st->bpe > SCHED_EPOCH_MAX - st->start_epoch) {
        rc = rf_err_set(err, -EINVAL,
                        "epoch=%u seq=%llu starts past epoch %llu; epochs are numbered 0..%u "
                        "(%llu batches each for this rank)", a->epoch,
                        (unsigned long long)a->seq, (unsigned long long)SCHED_EPOCH_MAX,
                        (unsigned)SCHED_EPOCH_MAX, (unsigned long long)st->bpe);
        goto fail;
    }
    st->start_epoch += st->start_seq / st->bpe;
    st->start_seq %= st->bpe;
    rc = ring_geometry(a->depth ? a->depth : auto_depth(a->batch, st->out.sample_bytes),
                       a->batch, st->out.sample_bytes, &st->geom, err);
    if (rc < 0)
        goto fail;
    if (d->sched.mem_used + st->geom.total_size > d->cf.memory_budget) {
        rc = rf_err_set(err, -ENOMEM,
                        "attach needs %llu bytes (depth %u x %llu-byte slots + header); "
                        "budget %llu, in use %llu by %u client(s): lower depth or batch, "
                        "or raise memory-budget",
                        (unsigned long long)st->geom.total_size, st->geom.depth,
                        (unsigned long long)st->geom.slot_stride,
                        (unsigned long long)d->cf.memory_budget,
                        (unsigned long long)d->sched.mem_used,
                        d->sched.nstreams + d->sched.nmaking);
        goto fail;
    }
    rc = over_cap(d, st->geom.total_size, uid, err);
    if (rc < 0)
        goto fail;
    st->weight = a->weight ? a->weight : conf_weight_for(&d->cf, a->name, uid);
    st->worker_share = st->weight_share = -1;
    st->can_share = a->share &&
                    !__builtin_mul_overflow(st->start_epoch, st->bpe, &st->start_k) &&
                    !__builtin_add_overflow(st->start_k, st->start_seq, &st->start_k) &&
                    st->start_k <= UINT64_MAX / 2; /* room for next_g */
    st->id = ++d->sched.next_stream_id;
    st->uid = uid;
    st->conn = conn;
    rc = making_start(d, st, err);
    if (rc < 0)
        goto fail;
    *out = st;
    return 0;

fail:
    free(st);
    return rc;
}

/* Starts producing: called once the client has the ring's fds. */
void sched_start(struct daemon *d, struct stream *st, void *conn)
{
    st->conn = conn;
    sched_fill(d);
    pool_dispatch(d);
}

void sched_info(const struct stream *st, struct sched_info *si)
{
    si->memfd = st->memfd;
    si->efd = st->efd;
    si->size = st->geom.total_size;
    si->bpe = st->bpe;
    si->id = st->id;
    si->depth = st->geom.depth;
}

void sched_detach(struct daemon *d, struct stream *st, const char *why, int code)
{
    struct ring_hdr *h = st->mem;

    if (st->making) {
        making_cancel(d, st, why);
        return;
    }
    for (struct stream **pp = &d->sched.streams; *pp; pp = &(*pp)->next) {
        if (*pp == st) {
            *pp = st->next;
            break;
        }
    }
    d->sched.nstreams--;
    d->detaches++;
    log_info("client %u detached: %s", st->id, why);
    untarget_queued(d, st);
    group_leave(d, st);
    pool_forget_ring(d, st);
    if (h) {
        if (atomic_load_explicit(&h->state, memory_order_relaxed) == RING_LIVE) {
            h->error = code;
            snprintf(h->reason, sizeof(h->reason), "%s", why);
            atomic_store_explicit(&h->state, RING_CLOSED, memory_order_release);
        }
        for (uint32_t i = 0; i < st->geom.depth; i++)
            ring_futex_wake(&stream_slot(st, i)->ready);
    }
    d->sched.mem_used -= st->geom.total_size;
    unmake_ring(d, st);
    st->conn = NULL;
    /* the struct lives on while a job of it is in flight (job_free frees
     * it with the last); the caller stopped watching its eventfd first */
    st->dead = true;
    if (st->jobs_live == 0)
        stream_free(st);
    sched_check(d);
}

static const char *share_text(double v, char *buf, size_t cap)
{
    if (v < 0)
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%.3f", v);
    return buf;
}

int sched_stats_lines(struct daemon *d, char *buf, size_t cap, size_t *len)
{
    int lines = 0;
    uint64_t now = clock_mono_ns();

    for (struct stream *st = d->sched.streams; st; st = st->next) {
        uint64_t starved = st->starved_ns + (st->starved_since ? now - st->starved_since : 0);
        const char *names[] = {
            "dataset", "name", "rank", "world", "batch", "depth", "batches", "samples",
            "waited_s", "ready", "inflight", "ring_bytes", "locked", "failed",
            "weight", "worker_s", "worker_share", "weight_share", "group", "group_members",
            "shared_batches",
        };
        enum { NV = sizeof(names) / sizeof(names[0]) };
        char vals[NV][80];

        snprintf(vals[0], 80, "%s", st->a.dataset);
        snprintf(vals[1], 80, "%s", st->a.name[0] ? st->a.name : "-");
        snprintf(vals[2], 80, "%u", st->a.rank);
        snprintf(vals[3], 80, "%u", st->a.world);
        snprintf(vals[4], 80, "%u", st->a.batch);
        snprintf(vals[5], 80, "%u", st->geom.depth);
        snprintf(vals[6], 80, "%llu", (unsigned long long)st->batches);
        snprintf(vals[7], 80, "%llu", (unsigned long long)st->samples);
        snprintf(vals[8], 80, "%.3f", (double)starved / 1e9);
        snprintf(vals[9], 80, "%llu", (unsigned long long)(st->published - st->released));
        snprintf(vals[10], 80, "%llu", (unsigned long long)(st->next_g - st->published));
        snprintf(vals[11], 80, "%llu", (unsigned long long)st->geom.total_size);
        snprintf(vals[12], 80, "%d", st->locked);
        snprintf(vals[13], 80, "%d", st->failed);
        snprintf(vals[14], 80, "%u", st->weight);
        snprintf(vals[15], 80, "%.3f", (double)st->worker_ns / 1e9);
        share_text(st->worker_share, vals[16], 80);
        share_text(st->weight_share, vals[17], 80);
        snprintf(vals[18], 80, "%u", st->grp && st->grp->n > 1 ? st->grp->id : 0);
        snprintf(vals[19], 80, "%u", st->grp ? st->grp->n : 1);
        snprintf(vals[20], 80, "%llu", (unsigned long long)st->shared_batches);
        for (unsigned i = 0; i < NV; i++) {
            int n = snprintf(buf + *len, cap - *len, "clients.%u.%s %s\n", st->id, names[i],
                             vals[i]);

            if (n < 0 || (size_t)n >= cap - *len)
                return -ENOSPC;
            *len += (size_t)n;
            lines++;
        }
    }
    return lines;
}

uint32_t sched_share_count(const struct daemon *d, bool members)
{
    uint32_t n = 0;

    for (const struct share_group *g = d->sched.groups; g; g = g->next)
        if (g->n > 1)
            n += members ? g->n : 1;
    return n;
}

/* Ends a share window (WEIGHTS): each stream's share of the worker time
 * spent in it, against its weight's share of the streams that had a turn. */
static void share_window(struct daemon *d, uint64_t now)
{
    uint64_t total = 0, weights = 0;

    for (struct stream *st = d->sched.streams; st; st = st->next) {
        total += st->worker_ns - st->win_worker_ns;
        if (st->win_active)
            weights += st->weight;
    }
    for (struct stream *st = d->sched.streams; st; st = st->next) {
        st->worker_share = total ? (double)(st->worker_ns - st->win_worker_ns) / (double)total
                                 : 0;
        st->weight_share = st->win_active && weights ? (double)st->weight / (double)weights : 0;
        st->win_worker_ns = st->worker_ns;
        st->win_active = st->nqueued > 0;
    }
    d->sched.win_start_ns = now;
}

/* Once a second: the share windows, and groups held by a full ring
 * (check_hold looks again when fill_group runs). */
static void on_tick(uv_timer_t *t)
{
    struct daemon *d = t->loop->data;
    uint64_t now = clock_mono_ns();

    if (now - d->sched.win_start_ns >= SHARE_WINDOW_NS)
        share_window(d, now);
    for (const struct stream *st = d->sched.streams; st; st = st->next)
        if ((st->grp && st->grp->held_since) || st->join_wait_since) {
            sched_fill(d);
            pool_dispatch(d);
            break;
        }
}

void sched_init(struct daemon *d)
{
    d->sched.win_start_ns = clock_mono_ns();
    uv_timer_init(d->loop, &d->sched.tick);
    d->sched.tick_open = true;
    uv_timer_start(&d->sched.tick, on_tick, 1000, 1000);
    uv_unref((uv_handle_t *)&d->sched.tick);
}

void sched_close(struct daemon *d)
{
    if (d->sched.tick_open)
        uv_close((uv_handle_t *)&d->sched.tick, NULL);
    d->sched.tick_open = false;
}

void sched_check(const struct daemon *d)
{
#if RINGFEED_CHECKS
    uint32_t queued = 0, with_jobs = 0, on_list = 0;
    const struct stream *turn = d->sched.active;

#define CHECK_FAIL(...) do { log_error("sched_check: " __VA_ARGS__); abort(); } while (0)
    for (const struct stream *st = d->sched.streams; st; st = st->next) {
        const struct job *last = NULL;
        int64_t debt_max = (int64_t)WIRE_JOB_MAX * (int64_t)st->cost_ns;
        uint32_t n = 0;

        for (const struct job *j = st->q_head; j; j = j->next) {   /* Q1 */
            if (j->st != st)
                CHECK_FAIL("client %u's queue holds job %llu of another stream", st->id,
                           (unsigned long long)j->job_id);
            if (j->worker != -1)
                CHECK_FAIL("queued job %llu has a worker", (unsigned long long)j->job_id);
            last = j;
            n++;
        }
        if (n != st->nqueued || last != st->q_tail)
            CHECK_FAIL("client %u's queue holds %u jobs, its counter says %u%s", st->id, n,
                       st->nqueued, last != st->q_tail ? ", and its tail is not the last" : "");
        if (n && st->failed)
            CHECK_FAIL("failed client %u has %u jobs queued", st->id, n);
        if ((st->rr_next != NULL) != (n > 0))                      /* Q2 */
            CHECK_FAIL("client %u has %u jobs queued and is %s the active list", st->id, n,
                       st->rr_next ? "on" : "off");
        if (st->deficit <= -debt_max ||                            /* Q3 */
            st->deficit > (st->rr_next ? quantum(st) : 0))
            CHECK_FAIL("client %u's deficit %lld is out of bounds (%s the active list)",
                       st->id, (long long)st->deficit, st->rr_next ? "on" : "off");
        queued += n;
        with_jobs += n > 0;
    }
    if (queued != d->sched.queued)
        CHECK_FAIL("queues hold %u jobs, counter says %u", queued, d->sched.queued);
    if (turn) {
        const struct stream *st = turn;

        do {
            if (!st->rr_next || st->rr_next->rr_prev != st)
                CHECK_FAIL("client %u's links on the active list are broken", st->id);
            if (st->dead || st->nqueued == 0)
                CHECK_FAIL("client %u is on the active list %s", st->id,
                           st->dead ? "after its detach" : "with no job queued");
            on_list++;
            st = st->rr_next;
        } while (st != turn && on_list <= d->sched.nstreams);
    }
    if (on_list != with_jobs || on_list != d->sched.nactive)
        CHECK_FAIL("the active list holds %u streams, %u have jobs queued, nactive says %u",
                   on_list, with_jobs, d->sched.nactive);
    for (const struct stream *st = d->sched.streams; st; st = st->next) {
        if (!(st->released <= st->published && st->published <= st->next_g &&
              st->next_g <= st->released + st->geom.depth))
            CHECK_FAIL("client %u breaks released %llu <= published %llu <= next_g %llu <= "
                       "released + depth %u", st->id, (unsigned long long)st->released,
                       (unsigned long long)st->published, (unsigned long long)st->next_g,
                       st->geom.depth);
        if (st->starved_since && st->released != st->published)         /* S1 (WAITS) */
            CHECK_FAIL("client %u counted as waiting with %llu batches ready", st->id,
                       (unsigned long long)(st->published - st->released));
    }
    for (const struct share_group *g = d->sched.groups; g; g = g->next) {   /* G1 */
        uint32_t n = 0;

        for (const struct stream *m = g->members; m; m = m->g_next) {
            if (m->grp != g || next_pos(m) != g->pos || m->dead || m->failed)
                CHECK_FAIL("client %u in group %u: %s", m->id, g->id,
                           m->grp != g ? "its group is another" :
                           m->dead || m->failed ? "detached or failed" : "at another place");
            n++;
        }
        if (n != g->n || n > WIRE_TARGETS_MAX || g->refs < n || g->unstarted > g->pos + 1)
            CHECK_FAIL("group %u holds %u members, says %u (refs %u, unstarted %llu, pos %llu)",
                       g->id, n, g->n, g->refs, (unsigned long long)g->unstarted,
                       (unsigned long long)g->pos);
    }
    for (const struct stream *st = d->sched.streams; st; st = st->next)        /* G2 */
        for (const struct job *j = st->q_head; j; j = j->next) {
            if (j->ntargets < 1 || j->ntargets > WIRE_TARGETS_MAX || j->t[0].st != j->st)
                CHECK_FAIL("queued job %llu names %u rings, its home %s its first",
                           (unsigned long long)j->job_id, j->ntargets,
                           j->ntargets && j->t[0].st == j->st ? "is" : "is not");
            for (uint32_t a = 0; a < j->ntargets; a++) {
                if (j->t[a].st->dead || j->t[a].st->failed)
                    CHECK_FAIL("queued job %llu names client %u, %s",
                               (unsigned long long)j->job_id, j->t[a].st->id,
                               j->t[a].st->dead ? "detached" : "failed");
                for (uint32_t b = 0; b < a; b++)
                    if (j->t[a].st == j->t[b].st)
                        CHECK_FAIL("queued job %llu names client %u twice",
                                   (unsigned long long)j->job_id, j->t[a].st->id);
            }
        }
    {                                                                   /* I3, MAKING */
        uint64_t bytes = 0;
        uint32_t live = 0;

        for (int k = 0; k < 2; k++)
            for (const struct stream *st = k ? d->sched.making : d->sched.streams; st;
                 st = st->next) {
                bytes += st->geom.total_size;
                if (k && (!st->making || st->mem))
                    CHECK_FAIL("client %u on the making list %s", st->id,
                               st->mem ? "has a ring" : "is not being made");
                live += k && !st->dead;
            }
        if (bytes != d->sched.mem_used || live != d->sched.nmaking)
            CHECK_FAIL("rings hold %llu bytes, mem_used says %llu; %u being made, nmaking "
                       "says %u", (unsigned long long)bytes,
                       (unsigned long long)d->sched.mem_used, live, d->sched.nmaking);
    }
    for (int k = 0; k < 2; k++) {                                       /* H1 (WAITS) */
        const struct hist *h = k ? &d->sched.prod_hist : &d->sched.wait_hist;
        uint64_t sum = 0;

        for (unsigned i = 0; i <= HIST_FINITE; i++)
            sum += h->bucket[i];
        if (sum != h->count)
            CHECK_FAIL("the %s histogram's buckets hold %llu observations, its count says %llu",
                       k ? "production" : "wait", (unsigned long long)sum,
                       (unsigned long long)h->count);
    }
#undef CHECK_FAIL
#else
    (void)d;
#endif
}

const struct stream *sched_client_next(const struct daemon *d, const struct stream *prev,
                                       struct sched_client *out)
{
    const struct stream *st = prev ? prev->next : d->sched.streams;
    uint64_t now = clock_mono_ns();

    if (!st)
        return NULL;
    *out = (struct sched_client){
        .id = st->id,
        .dataset_id = st->dataset_id,
        .dataset = st->a.dataset,
        .name = st->a.name,
        .rank = st->a.rank,
        .world = st->a.world,
        .batch = st->a.batch,
        .depth = st->geom.depth,
        .batches = st->batches,
        .samples = st->samples,
        .waited_ns = st->starved_ns + (st->starved_since ? now - st->starved_since : 0),
        .waits = st->waits,
        .production_ns = st->production_ns,
        .ready = st->published - st->released,
        .inflight = st->next_g - st->published,
        .ring_bytes = st->geom.total_size,
        .queued = st->nqueued,
        .weight = st->weight,
        .worker_ns = st->worker_ns,
        .worker_share = st->worker_share,
        .weight_share = st->weight_share,
        .group = st->grp && st->grp->n > 1 ? st->grp->id : 0,
        .group_members = st->grp && st->grp->n > 1 ? st->grp->n : 0,
        .shared_batches = st->shared_batches,
        .locked = st->locked,
        .failed = st->failed,
    };
    return st;
}
