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
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "fault.h"
#include "log.h"
#include "ring.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

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
    uint32_t version;               /* the ring layout the client speaks */
    bool want_release;              /* what the ring's want_release says (M4) */

    uint64_t next_g, published, released;
    uint64_t slot_g[RING_MAX_DEPTH];
    uint32_t slot_count[RING_MAX_DEPTH];
    uint64_t slot_plan_ns[RING_MAX_DEPTH]; /* when its batch was planned (WAITS) */
    uint8_t knows[POOL_MAX / 8];

    /* stats */
    uint64_t batches, samples;
    uint64_t attach_ns;
    uint64_t starved_since;         /* client caught up and waits; 0 if not (WAITS) */
    uint64_t starved_ns;            /* time the client waited on the daemon, ended waits */
    uint64_t waits;                 /* waits ended (observed into wait_hist) */
    uint64_t production_ns;         /* plan to publication, its published batches */
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
    const struct stream *st = j->st;
    uint64_t epoch, seq;

    batch_pos(st, j->g, &epoch, &seq);
    *m = (struct wire_job){
        .type = WIRE_JOB,
        .ring_id = st->id,
        .job_id = j->job_id,
        .stream_seq = j->g,
        .epoch = epoch,
        .seq = seq,
        .slot = j->slot,
        .chunk = j->chunk,
        .first = j->first,
        .count = j->count,
        .careful = j->crashes > 0,
    };
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
 * So while others wait, a stream is handed at most SCHED_QUANTUM_NS plus
 * one job's work a round, and streams with queued jobs share the workers
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
 *   Q3. -WIRE_JOB_MAX * cost_ns < deficit <= SCHED_QUANTUM_NS, and
 *       deficit <= 0 off the list.
 */
static int64_t job_work(const struct job *j)
{
    return (int64_t)j->count * (int64_t)j->st->cost_ns;
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
    st->deficit += SCHED_QUANTUM_NS;
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
        st->deficit += SCHED_QUANTUM_NS;
        d->sched.active = st->rr_next;
    }
    if (!st)
        return NULL;
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
    sched_check(d);
    return j;
}

/* Takes every queued job of st out of its queue and frees it. */
static void drop_queued(struct daemon *d, struct stream *st)
{
    while (st->q_head) {
        struct job *j = st->q_head;

        st->q_head = j->next;
        d->sched.queued--;
        st->jobs_live--;
        free(j);
    }
    st->q_tail = NULL;
    if (st->nqueued) {
        st->nqueued = 0;
        active_leave(d, st);
    }
}

static void stream_free(struct stream *st)
{
    free(st);
}

static void job_free(struct job *j)
{
    struct stream *st = j->st;

    free(j);
    st->jobs_live--;
    if (st->dead && st->jobs_live == 0)
        stream_free(st);
}

/* Plans batch g: writes the slot header (ring.h M2) and queues its jobs. */
static int plan_batch(struct daemon *d, struct stream *st, uint64_t g)
{
    uint32_t slot_i = (uint32_t)(g % st->geom.depth);
    struct ring_slot *slot = stream_slot(st, slot_i);
    uint64_t epoch, seq;
    struct sampler s;
    uint32_t count, per, chunks;
    struct job *jobs[RING_MAX_CHUNKS];

    batch_pos(st, g, &epoch, &seq);
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

    slot->count = count;
    slot->stream_seq = g;
    slot->epoch = epoch;
    slot->seq = seq;
    slot->chunks = chunks;
    slot->substituted = 0;
    atomic_store_explicit(&slot->chunks_done, 0, memory_order_release);
    atomic_store_explicit(&slot->ready, 0, memory_order_release);
    st->slot_g[slot_i] = g;
    st->slot_count[slot_i] = count;
    st->slot_plan_ns[slot_i] = clock_mono_ns();

    for (uint32_t c = 0; c < chunks; c++) {
        struct job *j = jobs[c];

        j->st = st;
        j->job_id = ++d->sched.next_job_id;
        j->g = g;
        j->slot = slot_i;
        j->chunk = c;
        j->first = c * per;
        j->count = count - j->first < per ? count - j->first : per;
        j->progress = -1;
        j->suspect = -1;
        st->jobs_live++;
        sched_enqueue(d, j, false);
    }
    return 0;
}

static void stream_fail(struct daemon *d, struct stream *st, int code, const char *why);

/* Plans every batch the stream's ring has room for (M1). */
static void fill_stream(struct daemon *d, struct stream *st)
{
    if (st->failed || d->stopping)
        return;
    while (st->next_g < st->released + st->geom.depth) {
        int rc = plan_batch(d, st, st->next_g);

        if (rc == -EOVERFLOW) {
            /* never wrap to epoch 0's stream: end with a reason instead */
            if (st->published == st->next_g)
                stream_fail(d, st, -EOVERFLOW, "the stream reached epoch 4294967296: epochs "
                            "are numbered 0..4294967295 (the sampler's key)");
            break;
        }
        if (rc == -ENOMEM) {
            /* nothing of the batch was queued: the client gets an error
             * rather than a wait that never ends */
            stream_fail(d, st, -ENOMEM, "the daemon is out of memory: it could not plan the "
                        "next batch");
            break;
        }
        if (rc < 0) {
            log_error("client %u: cannot plan batch %llu", st->id,
                      (unsigned long long)st->next_g);
            break;
        }
        st->next_g++;
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
    drop_queued(d, st);
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
 * the job's worker died between completing the mask and setting ready.
 *
 * A slot that no longer holds the job's batch means the batch was
 * published and released, and the slot planned again for batch g + depth
 * (its mask reset): the chunk was written.  This happens when the worker
 * died after its fetch_or but before its DONE, and the release reached the
 * loop before the worker's exit did.  Running the job again would write
 * batch g's samples into batch g + depth and set that batch's bit. */
static bool chunk_written(struct stream *st, const struct job *j, bool *published)
{
    struct ring_slot *slot = stream_slot(st, j->slot);
    uint64_t mask = atomic_load_explicit(&slot->chunks_done, memory_order_acquire);
    uint64_t all = slot->chunks >= 64 ? ~0ull : (1ull << slot->chunks) - 1;

    *published = false;
    if (st->slot_g[j->slot] != j->g)
        return true;
    if (!(mask & (1ull << j->chunk)))
        return false;
    if (mask == all) {
        if (atomic_load_explicit(&slot->ready, memory_order_acquire) != ring_ready_word(j->g)) {
            atomic_store_explicit(&slot->ready, ring_ready_word(j->g), memory_order_release);
            ring_futex_wake(&slot->ready);
        }
        *published = true;
    }
    return true;
}

void sched_job_done(struct daemon *d, struct job *j, const struct wire_done *m)
{
    struct stream *st = j->st;

    if (st->dead || st->failed) {
        job_free(j);
        return;
    }
    switch (m->status) {
    case WIRE_OK:
        if (m->published)
            advance_published(d, st);
        break;
    case WIRE_STREAM_FAILED:
        stream_fail(d, st, -EIO, m->reason);
        break;
    case WIRE_DATASET_FAILED:
        /* the files changed under the dataset: every stream of it fails,
         * and the catalogue stops offering it (catalog.c) */
        catalog_fail(d, st->dataset_id, m->reason);
        break;
    default:
        stream_fail(d, st, -EIO, m->reason[0] ? m->reason : "a worker could not run a job");
        break;
    }
    job_free(j);
    take_release(d, st);
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
    struct stream *st = j->st;
    bool published;

    if (st->dead || st->failed) {
        job_free(j);
        return;
    }
    if (chunk_written(st, j, &published)) {
        if (published)
            advance_published(d, st);
        job_free(j);
        take_release(d, st);
        return;
    }
    /* Run it again, carefully (reporting each sample).  A careful run that
     * dies twice on the same sample quarantines that sample: random kills
     * (an operator, the OOM killer) do not land twice on one sample. */
    if (j->crashes > 0 && j->progress >= 0 && j->progress == j->suspect) {
        uint64_t epoch, seq;
        struct sampler s;

        batch_pos(st, j->g, &epoch, &seq);
        if (make_sampler(st, epoch, &s) == 0)
            quarantine(d, st, sampler_sample(&s, seq, j->first + (uint32_t)j->progress));
        j->suspect = -1;
    } else if (j->progress >= 0) {
        j->suspect = j->progress;
    }
    j->crashes++;
    if (j->crashes > 8) {
        stream_fail(d, st, -EIO, "a job keeps killing workers; see the daemon's log");
        job_free(j);
        sched_check(d);
        return;
    }
    sched_enqueue(d, j, true);
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

static int make_ring(struct daemon *d, struct stream *st, struct rf_err *err)
{
    struct ring_hdr *h;
    int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

    if (fault_hit(FAULT_MEMFD))
        return rf_err_set(err, -EMFILE, "memfd_create: %s", strerror(EMFILE));
    st->memfd = memfd_create("ringfeed-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
    if (st->memfd == -1 && errno == EINVAL) /* kernels before 6.3 */
        st->memfd = memfd_create("ringfeed-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (st->memfd == -1)
        return rf_err_set(err, -errno, "memfd_create: %s", strerror(errno));
    if (ftruncate(st->memfd, (off_t)st->geom.total_size) == -1)
        return rf_err_set(err, -errno, "ftruncate ring to %llu bytes: %s",
                          (unsigned long long)st->geom.total_size, strerror(errno));
    st->mem = fault_hit(FAULT_MMAP) ? (errno = ENOMEM, MAP_FAILED)
                                    : mmap(NULL, st->geom.total_size, PROT_READ | PROT_WRITE,
                                           MAP_SHARED, st->memfd, 0);
    if (st->mem == MAP_FAILED) {
        st->mem = NULL;
        return rf_err_set(err, -errno, "mmap ring: %s", strerror(errno));
    }
    if (fcntl(st->memfd, F_ADD_SEALS, seals) == -1)
        return rf_err_set(err, -errno, "sealing the ring: %s", strerror(errno));
    /* Pages are allocated (and zeroed) now, before ATTACH's reply, not by
     * the first batch's writes: mlock does it where the limit allows, and
     * fallocate where it does not (a 154 MB ring of 224-pixel crops costs
     * some 90 ms of allocation, which otherwise lands on the first batch). */
    st->locked = mlock(st->mem, st->geom.total_size) == 0;
    if (st->locked)
        d->sched.mem_locked += st->geom.total_size;
    else if (fallocate(st->memfd, 0, 0, (off_t)st->geom.total_size) == -1)
        log_debug("client %u: fallocate of the ring: %s (pages come on first touch)", st->id,
                  strerror(errno));

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

    st->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (st->efd == -1)
        return rf_err_set(err, -errno, "eventfd: %s", strerror(errno));
    return 0;
}

static void unmake_ring(struct daemon *d, struct stream *st)
{
    if (st->mem) {
        if (st->locked)
            d->sched.mem_locked -= st->geom.total_size;
        munmap(st->mem, st->geom.total_size);
        st->mem = NULL;
    }
    if (st->memfd >= 0)
        close(st->memfd);
    if (st->efd >= 0)
        close(st->efd);
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

int sched_attach(struct daemon *d, const struct ctl_attach *a, struct stream **out,
                 struct rf_err *err)
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
    if (d->sched.nstreams >= d->cf.max_clients)
        return rf_err_set(err, -EUSERS,
                          "%u clients attached, the daemon's max-clients; try again when one "
                          "detaches, or raise max-clients (at most %u)",
                          d->sched.nstreams, CONF_MAX_CLIENTS_MAX);
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
                        (unsigned long long)d->sched.mem_used, d->sched.nstreams);
        goto fail;
    }
    st->id = ++d->sched.next_stream_id;
    rc = make_ring(d, st, err);
    if (rc < 0)
        goto fail_ring;
    for (uint32_t i = 0; i < RING_MAX_DEPTH; i++)
        st->slot_g[i] = NO_BATCH;
    d->sched.mem_used += st->geom.total_size;
    st->attach_ns = clock_mono_ns();
    st->starved_since = st->attach_ns; /* the client waits for its first batch from here */
    st->next = d->sched.streams;
    d->sched.streams = st;
    d->sched.nstreams++;
    d->attaches++;
    log_info("client %u attached: dataset %s batch %u rank %u/%u depth %u, ring %llu bytes%s",
             st->id, a->dataset, a->batch, a->rank, a->world, st->geom.depth,
             (unsigned long long)st->geom.total_size, st->locked ? " (locked)" : "");
    *out = st;
    return 0;

fail_ring:
    unmake_ring(d, st);
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

    for (struct stream **pp = &d->sched.streams; *pp; pp = &(*pp)->next) {
        if (*pp == st) {
            *pp = st->next;
            break;
        }
    }
    d->sched.nstreams--;
    d->detaches++;
    log_info("client %u detached: %s", st->id, why);
    drop_queued(d, st);
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

int sched_stats_lines(struct daemon *d, char *buf, size_t cap, size_t *len)
{
    int lines = 0;
    uint64_t now = clock_mono_ns();

    for (struct stream *st = d->sched.streams; st; st = st->next) {
        uint64_t starved = st->starved_ns + (st->starved_since ? now - st->starved_since : 0);
        const char *names[] = {
            "dataset", "name", "rank", "world", "batch", "depth", "batches", "samples",
            "waited_s", "ready", "inflight", "ring_bytes", "locked", "failed",
        };
        char vals[14][80];

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
        for (unsigned i = 0; i < 14; i++) {
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
            st->deficit > (st->rr_next ? SCHED_QUANTUM_NS : 0))
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
        .locked = st->locked,
        .failed = st->failed,
    };
    return st;
}
