/*
 * plan.c - planning and completion: a stream's (or a share group's) next
 * batches cut into jobs and queued, and what a worker's DONE, or its
 * death, means for them.
 *
 * A stream delivers batches g = 0, 1, 2, ... since the attach; batch g is
 * (epoch, seq) = the g-th batch after the client's start point, and its
 * samples are the sampler's answer for (dataset size, seed, epoch, rank,
 * world, batch, seq).  Nothing else decides what goes in a batch, so the
 * stream is the same for any worker count and after any crash.
 *
 * Batch g is cut into chunks (at most RING_MAX_CHUNKS, at most WIRE_JOB_MAX
 * samples each; one chunk when the ring has a ragged column), one job per chunk, queued in its stream's queue
 * (fairq.c).  A job names every ring it writes (job.t[]: one, or a share
 * group's members, share.c) and holds each of those streams (jobs_live)
 * until it is freed: a detached stream's struct lives on until its last
 * job's DONE or its worker's death.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "daemon.h"
#include "fault.h"
#include "log.h"
#include "plan.h"
#include "stream.h"

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

size_t sched_job_message(const struct job *j, struct wire_job *m)
{
    const struct stream *st = j->t[0].st;
    uint64_t epoch, seq;

    stream_batch_pos(st, j->t[0].g, &epoch, &seq);
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

/* Frees a job: each target stream lets go of it (a detached one is freed
 * with its last job), and so does its group. */
void plan_job_free(struct daemon *d, struct job *j)
{
    if (j->hold.pack)
        d->sched.ops->shards_release(d, &j->hold);
    for (uint32_t i = 0; i < j->ntargets; i++) {
        struct stream *st = j->t[i].st;

        if (--st->jobs_live == 0 && st->dead)
            stream_free(st);
    }
    if (j->grp)
        share_unref(d, j->grp);
    free(j);
}

/* Takes target i out of j (its stream lets go of the job); the home is
 * then the new t[0]. */
void plan_job_untarget(struct job *j, uint32_t i)
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

/* fq_take_if's test for plan_untarget_queued: takes the jobs whose home
 * st is; leaves the others, with st taken out of them. */
static bool homed_at(struct job *j, void *arg)
{
    int32_t i = target_of(j, arg);

    if (i > 0)          /* stays where it is, one ring fewer */
        plan_job_untarget(j, (uint32_t)i);
    return i == 0;
}

/*
 * Takes st out of every queued job that would write its ring: a job left
 * with no ring is freed, one whose home st was moves to the back of its
 * new home's queue.  A stream never in a group of 2+ is a target only of
 * its own jobs (the old drop of its queue); one that was may be a target
 * of jobs in any member's queue, so every queue is searched (rare: a
 * detach or a failure).
 */
void plan_untarget_queued(struct daemon *d, struct stream *st)
{
    struct job *taken = NULL, **tail = &taken;

    /* st first (a detaching one is off the list already), then the rest */
    fq_take_if(d, st, homed_at, st, &tail);
    if (st->sh.ever_shared)
        for (struct stream *q = d->sched.streams; q; q = q->next)
            if (q != st)
                fq_take_if(d, q, homed_at, st, &tail);
    while (taken) {
        struct job *j = taken;

        taken = fq_next(j);
        if (j->ntargets == 1) {
            plan_job_free(d, j); /* st is still held by the caller: never freed here */
            continue;
        }
        plan_job_untarget(j, 0); /* a new home */
        sched_enqueue(d, j, false);
    }
    /* the parked (PARKED): st leaves each; one left without a target goes */
    for (struct job **pp = &d->sched.parked; *pp;) {
        struct job *j = *pp;

        for (uint32_t i = 0; i < j->ntargets;)
            if (j->t[i].st == st && j->ntargets > 1)
                plan_job_untarget(j, i);
            else
                i++;
        if (j->t[0].st == st) {
            *pp = j->next;
            plan_job_free(d, j); /* st is still held by the caller */
        } else {
            pp = &j->next;
        }
    }
}

/* Ends the network waits of m[] (NET_WAITS in stream.h), if any. */
static void net_wait_end(struct daemon *d, struct stream *const *m, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (!m[i]->net_wait_since)
            continue;
        m[i]->net_wait_ns += sched_now(d) - m[i]->net_wait_since;
        m[i]->net_waits++;
        m[i]->net_wait_since = 0;
    }
}

/*
 * An on-demand dataset's batch (ahead.h): its samples into a new *out,
 * then is every shard they lie in in the node cache?  0: yes (the caller
 * holds them per job and frees *out); -EAGAIN: not yet, the streams wait
 * on the network (their wait begins now, if it had not); -ECANCELED: the
 * shards cannot be had, and the streams failed with why; -ENOMEM.
 */
static int shards_gate(struct daemon *d, struct stream *const *m, uint32_t n,
                       const struct sampler *s, uint64_t seq, uint32_t count, uint64_t **out)
{
    struct stream *st = m[0];
    uint64_t *samples = malloc((count ? count : 1) * sizeof(*samples));
    struct rf_err err;
    int rc;

    *out = NULL;
    if (!samples)
        return -ENOMEM;
    sampler_batch(s, seq, samples); /* count of them: block mode keeps a block's
                                       permutation across the batch */
    for (uint32_t j = 0; j < count; j++)
        samples[j] = stream_index(st, samples[j]);
    rc = d->sched.ops->shards_ready(d, st->dataset_id, samples, count, &err);
    if (rc == 0) {
        net_wait_end(d, m, n);
        *out = samples;
        return 0;
    }
    free(samples);
    if (rc == -EAGAIN) {
        for (uint32_t i = 0; i < n; i++)
            if (!m[i]->net_wait_since)
                m[i]->net_wait_since = sched_now(d) | 1;
        return -EAGAIN;
    }
    net_wait_end(d, m, n);
    for (uint32_t i = 0; i < n; i++)
        stream_fail(d, m[i], rc, err.msg);
    return -ECANCELED;
}

int plan_batch(struct daemon *d, struct stream *const *m, uint32_t n,
                      struct share_group *grp)
{
    struct stream *st = m[0];
    uint64_t epoch, seq;
    struct sampler s;
    uint32_t count, per, chunks;
    struct job *jobs[RING_MAX_CHUNKS];
    uint64_t *samples = NULL;       /* an on-demand dataset's: the batch's samples */

    stream_batch_pos(st, st->next_g, &epoch, &seq);
    if (epoch > SCHED_EPOCH_MAX)
        return -EOVERFLOW;
    if (stream_sampler(st, epoch, &s) < 0)
        return -EINVAL;
    /* how many samples; which ones, the workers work out (wire.h) */
    count = sampler_batch_count(&s, seq);
    if (d->sched.ops->shards_ready && d->sched.ops->on_demand &&
        d->sched.ops->on_demand(d, st->dataset_id)) {
        int rc = shards_gate(d, m, n, &s, seq, count, &samples);

        if (rc < 0)
            return rc;
    }
    per = (count + RING_MAX_CHUNKS - 1) / RING_MAX_CHUNKS;
    if (per < JOB_WORK_NS / st->cost_ns)
        per = (uint32_t)(JOB_WORK_NS / st->cost_ns);
    if (per > WIRE_JOB_MAX)
        per = WIRE_JOB_MAX;
    /* a ragged column's values and offsets are written in order by one
     * worker, which never reads the ring back (ring.h T2, T3): one job per
     * batch (sched_attach holds such a batch to WIRE_JOB_MAX) */
    if (st->fx.ragged)
        per = count ? count : 1;
    chunks = (count + per - 1) / per;
    /* every job first: a batch is planned whole or not at all */
    for (uint32_t c = 0; c < chunks; c++) {
        jobs[c] = fault_calloc(1, sizeof(*jobs[c]));
        if (jobs[c] && samples) {
            uint32_t first = c * per, cnt = count - first < per ? count - first : per;

            if (d->sched.ops->shards_hold(d, st->dataset_id, samples + first, cnt,
                                          &jobs[c]->hold) < 0) {
                free(jobs[c]);
                jobs[c] = NULL;
            }
        }
        if (!jobs[c]) {
            while (c > 0) {
                c--;
                if (samples)
                    d->sched.ops->shards_release(d, &jobs[c]->hold);
                free(jobs[c]);
            }
            free(samples);
            return -ENOMEM;
        }
    }
    free(samples);

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
        slot->dropped = 0;
        atomic_store_explicit(&slot->chunks_done, 0, memory_order_release);
        atomic_store_explicit(&slot->ready, 0, memory_order_release);
        m[i]->slot_g[slot_i] = g;
        m[i]->slot_count[slot_i] = count;
        m[i]->slot_chunks[slot_i] = chunks;
        m[i]->slot_done[slot_i] = 0;
        m[i]->slot_plan_ns[slot_i] = sched_now(d);
        if (n > 1)
            m[i]->sh.shared_batches++;
    }
    if (n > 1) {
        d->sched.share.shared_batches++;
        d->sched.share.shared_writes += n - 1;
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

/* What a plan that failed with rc means for the streams m[] (all at the
 * same place); false when nothing more may be planned now. */
void plan_failed(struct daemon *d, struct stream *const *m, uint32_t n, int rc)
{
    for (uint32_t i = 0; i < n; i++) {
        struct stream *st = m[i];

        if (rc == -EOVERFLOW) {
            /* never wrap to epoch 0's stream: end with a reason instead,
             * once the client has released every batch there is (failing
             * when the last one is published, not released, reached a
             * client that attached at the last batch before its ATTACH's
             * check of the ring, which refused it) */
            if (st->released == st->next_g)
                stream_fail(d, st, -EOVERFLOW, "the stream reached epoch 4294967296: epochs "
                            "are numbered 0..4294967295 (the sampler's key)");
        } else if (rc == -EAGAIN || rc == -ECANCELED) {
            /* waits for a shard (ahead.h), or failed already */
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
static void plan_fill_group(struct daemon *d, struct share_group *g)
{
    for (;;) {
        struct stream *m[WIRE_TARGETS_MAX];
        uint32_t n = 0;
        bool room = true;
        int rc;

        for (struct stream *x = g->members; x; x = x->sh.g_next) {
            m[n++] = x;
            room = room && stream_has_room(x, 1);
        }
        if (n == 0 || d->stopping)
            return;
        if (!room) {
            if (n > 1)
                share_check_hold(d, g);
            if (g->n == n) /* nobody split off: wait for a release */
                return;
            continue;
        }
        if (n == 1 && !g->closed) {
            enum share_join jn = share_try_join(d, m[0]);

            if (jn == SHARE_JOIN_WAIT || jn == SHARE_JOIN_STOP)
                return; /* the tick looks again; or st cannot plan now */
            if (jn == SHARE_JOIN_DONE) {
                plan_fill_group(d, m[0]->sh.grp); /* a group of 2+: no join again */
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
void plan_fill_stream(struct daemon *d, struct stream *st)
{
    if (stream_ended(st) || d->stopping)
        return;
    if (st->sh.grp) {
        plan_fill_group(d, st->sh.grp);
        return;
    }
    while (stream_has_room(st, 1)) {
        int rc = plan_batch(d, &st, 1, NULL);

        if (rc < 0) {
            plan_failed(d, &st, 1, rc);
            break;
        }
    }
}

void sched_walk_ahead(struct daemon *d, uint32_t dataset, uint64_t max,
                      bool (*use)(void *arg, uint64_t sample, uint64_t ahead, uint32_t order,
                                  bool next),
                      void *arg)
{
    uint32_t order = 0;
    uint64_t *batch = NULL;
    uint32_t cap = 0;

    for (struct stream *st = d->sched.streams; st; st = st->next) {
        uint64_t ahead = 0, have_epoch = UINT64_MAX;
        struct sampler s;
        bool go = true;

        if (st->dataset_id != dataset || stream_ended(st))
            continue;
        if (st->a.batch > cap) {
            uint64_t *b = realloc(batch, st->a.batch * sizeof(*b));

            if (!b)
                break; /* the walk is advice: none this time */
            batch = b;
            cap = st->a.batch;
        }
        for (uint64_t g = st->next_g; go && ahead < max; g++) {
            uint64_t epoch, seq;
            uint32_t count;

            stream_batch_pos(st, g, &epoch, &seq);
            if (epoch > SCHED_EPOCH_MAX)
                break;
            if (epoch != have_epoch && stream_sampler(st, epoch, &s) < 0)
                break;
            have_epoch = epoch;
            count = sampler_batch(&s, seq, batch);
            for (uint32_t j = 0; go && j < count; j++, ahead++)
                go = use(arg, stream_index(st, batch[j]), ahead, order, g == st->next_g);
            if (count == 0)
                break;
        }
        order++;
    }
    free(batch);
}

void sched_fill(struct daemon *d)
{
    plan_parked(d);
    for (struct stream *st = d->sched.streams; st; st = st->next)
        plan_fill_stream(d, st);
    sched_check(d);
}

/*
 * Counts, in order, the batches whose slot says they are published (ring.h
 * W2): a worker may publish before its DONE reaches us, and the client may
 * release such a batch at once.  The ready word lives in memory the client
 * can write: a client that forges it only garbles its own stream.
 */
void plan_advance_published(struct daemon *d, struct stream *st)
{
    uint64_t now = 0;

    while (st->published < st->next_g) {
        uint64_t g = st->published;
        uint32_t i = (uint32_t)(g % st->geom.depth);
        struct ring_slot *slot = stream_slot(st, i);

        /* published: its ready word says so (a worker may publish before
         * its DONE reaches us), or every chunk is known written */
        if (st->slot_g[i] != g ||
            (st->slot_done[i] < st->slot_chunks[i] &&
             atomic_load_explicit(&slot->ready, memory_order_acquire) != ring_ready_word(g)))
            break;
        if (!now)
            now = sched_now(d);
        hist_observe(&d->sched.prod_hist, now - st->slot_plan_ns[i]);
        st->production_ns += now - st->slot_plan_ns[i];
        st->batches++;
        st->samples += st->slot_count[i];
        d->batches++;
        d->samples += st->slot_count[i];
        st->published++;
    }
    if (st->starved_since && st->published > st->starved_pub) {
        uint64_t wait = (now ? now : sched_now(d)) - st->starved_since;

        hist_observe(&d->sched.wait_hist, wait);
        st->starved_ns += wait;
        st->waits++;
        st->starved_since = 0;
    }
}

/*
 * Counts one more chunk of target t's batch as written and, when that is
 * all of them by the daemon's own count (slot_done, slot_chunks), makes
 * sure the batch is published: its ready word stored (the worker that
 * completed the mask normally has) and the client woken.  So publication
 * never depends on words the client can write (chunks, chunks_done): a
 * client that forges them cannot keep its batches unpublished, which
 * would hide that it holds back a share group (share.c HOLD) and stall
 * the others (ring.h T3).
 */
static void chunk_counted(struct stream *st, const struct job_target *t)
{
    struct ring_slot *slot;

    if (st->slot_g[t->slot] != t->g || st->slot_done[t->slot] >= st->slot_chunks[t->slot])
        return;
    if (++st->slot_done[t->slot] < st->slot_chunks[t->slot])
        return;
    slot = stream_slot(st, t->slot);
    if (atomic_load_explicit(&slot->ready, memory_order_acquire) != ring_ready_word(t->g)) {
        atomic_store_explicit(&slot->ready, ring_ready_word(t->g), memory_order_release);
        ring_futex_wake(&slot->ready);
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
    uint32_t chunks = st->slot_chunks[t->slot]; /* as planned, not the ring's */
    uint64_t all = chunks >= 64 ? ~0ull : (1ull << chunks) - 1;

    *published = false;
    if (st->slot_g[t->slot] != t->g)
        return true;
    if (!(mask & (1ull << j->chunk)))
        return false;
    chunk_counted(st, t); /* no DONE will come for it */
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

/*
 * PARKED.  A job of an on-demand dataset holds its shards in the node
 * cache (ahead.h), but a shard's file can still go between the plan and
 * the worker's open (the cache folder removed under the daemon).  The
 * worker then writes nothing and says WIRE_SHARD_LOST: the job leaves the
 * queues for d->sched.parked, its shards are looked at and fetched anew
 * (ops->shards_lost), and sched_fill puts it back at the head of its
 * home's queue once they are all there (plan_parked), or fails its
 * streams with the fetch's error.  Its targets keep their slots and their
 * hold on the streams meanwhile; a stream that detaches lets go of it
 * (plan_untarget_queued).  Past PLAN_LOST_MAX times for one job, the
 * worker's reason fails the streams: a cache that loses what it just
 * fetched is not waited on for ever.
 */
#define PLAN_LOST_MAX 8

static bool park(struct daemon *d, struct job *j, const char *why)
{
    if (!d->sched.ops->shards_lost || ++j->lost > PLAN_LOST_MAX)
        return false;
    log_warn("client %u: %s; the batch waits for it", j->st->id, why);
    j->worker = -1;
    j->next = d->sched.parked;
    d->sched.parked = j;
    d->sched.ops->shards_lost(d, &j->hold);
    return true;
}

void plan_parked(struct daemon *d)
{
    struct job **pp = &d->sched.parked;

    while (*pp) {
        struct job *j = *pp;
        struct rf_err err;
        int rc;

        /* a failed stream stays attached until its kick: it lets go here */
        for (uint32_t i = 0; i < j->ntargets;)
            if (stream_ended(j->t[i].st) && j->ntargets > 1)
                plan_job_untarget(j, i);
            else
                i++;
        if (stream_ended(j->t[0].st)) {
            *pp = j->next;
            plan_job_free(d, j);
            continue;
        }
        rc = d->sched.ops->shards_held_ready(d, &j->hold, &err);
        if (rc == -EAGAIN) {
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        if (rc == 0) {
            sched_enqueue(d, j, true);
            continue;
        }
        for (uint32_t i = 0; i < j->ntargets; i++)
            stream_fail(d, j->t[i].st, rc, err.msg);
        plan_job_free(d, j);
    }
}

void sched_job_done(struct daemon *d, struct job *j, const struct wire_done *m, uint64_t busy_ns)
{
    struct stream *live[WIRE_TARGETS_MAX];
    uint32_t nlive = 0;
    bool dataset_failed = false;

    j->st->fq.worker_ns += busy_ns; /* the home pays (WEIGHTS) */
    fq_measured(j->st, busy_ns, j->count);
    if (m->status == WIRE_SHARD_LOST && park(d, j, m->reason))
        return;
    for (uint32_t i = 0; i < j->ntargets; i++) {
        struct stream *st = j->t[i].st;

        if (stream_ended(st))
            continue;
        switch (m->status) {
        case WIRE_OK:
            chunk_counted(st, &j->t[i]);
            st->boxes_dropped += m->dropped;
            for (uint32_t k = 0; k < WIRE_FIELDS_MAX && k < st->fx.n; k++)
                st->rows[k] += m->rows[k];
            plan_advance_published(d, st);
            break;
        case WIRE_STREAM_FAILED:
        case WIRE_SHARD_LOST: /* only past PLAN_LOST_MAX, or without ops */
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
        d->sched.ops->dataset_failed(d, j->t[0].st->dataset_id, m->reason);
    /* frees no stream of live[]: none is detached, and nothing here
     * detaches one (a kick waits for the loop's next turn, stream_kick) */
    plan_job_free(d, j);
    for (uint32_t i = 0; i < nlive; i++)
        stream_take_release(d, live[i]);
}

void sched_fail_dataset(struct daemon *d, uint32_t dataset_id, const char *why)
{
    for (struct stream *st = d->sched.streams; st; st = st->next)
        if (stream_reads(st, dataset_id))
            stream_fail(d, st, -EIO, why);
    sched_check(d);
}

static void quarantine(struct daemon *d, struct stream *st, uint64_t index)
{
    uint32_t id = st->dataset_id;

    if (st->mix) { /* a mixture index: its source's own */
        uint32_t s = mix_plan_source(&st->mix->plan, index);

        id = st->mix->ids[s];
        index -= st->mix->plan.base[s];
    }
    log_error("dataset %s: sample %llu killed workers twice at the same point; "
              "quarantined as bad",
              d->cat[id].name, (unsigned long long)index);
    d->sched.ops->quarantine(d, id, index);
}

void sched_job_orphaned(struct daemon *d, struct job *j)
{
    struct stream *held[WIRE_TARGETS_MAX];
    uint32_t nheld = 0;

    /* every ring it names is held until the end: a detached one is freed
     * there, with its last job */
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

        if (stream_ended(t->st) || chunk_written(j, t, &published))
            plan_job_untarget(j, i);
        else
            i++;
    }
    if (j->ntargets == 0) {
        plan_job_free(d, j);
    } else if (j->crashes >= 8) {
        for (uint32_t i = 0; i < j->ntargets; i++)
            stream_fail(d, j->t[i].st, -EIO, "a job keeps killing workers; see the daemon's log");
        plan_job_free(d, j);
    } else {
        struct stream *st = j->st;

        /* Run it again, carefully (reporting each sample).  A careful run
         * that dies twice on the same sample quarantines that sample:
         * random kills (an operator, the OOM killer) do not land twice on
         * one sample. */
        if (j->crashes > 0 && j->progress >= 0 && j->progress == j->suspect) {
            uint64_t epoch, seq;
            struct sampler s;

            stream_batch_pos(st, j->t[0].g, &epoch, &seq);
            if (stream_sampler(st, epoch, &s) == 0)
                quarantine(d, st, stream_index(st, sampler_sample(&s, seq,
                                                                  j->first + (uint32_t)j->progress)));
            j->suspect = -1;
        } else if (j->progress >= 0) {
            j->suspect = j->progress;
        }
        j->crashes++;
        sched_enqueue(d, j, true);
    }
    /* the hold ends before stream_take_release: it asks for the eventfd when no
     * job of the stream is left (M4), and with the hold counted it would
     * not, and nothing would bring us back (a storm left a reader waiting
     * for good with both slots of its ring ready and nothing queued) */
    for (uint32_t i = 0; i < nheld; i++) {
        struct stream *st = held[i];

        st->jobs_live--;
        if (!stream_ended(st)) {
            plan_advance_published(d, st);
            stream_take_release(d, st);
        } else if (st->jobs_live == 0 && st->dead) {
            stream_free(st);
        }
    }
    sched_check(d);
}
