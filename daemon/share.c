/*
 * share.c - decode once for identical streams: share groups, joins and
 * splits.
 *
 * SHARING: decode once for identical streams.
 *
 * Two clients whose streams are the same function (same_function: the
 * dataset as opened, seed, transform and every parameter of it, batch,
 * rank, world, shuffle and its block, drop_last, drop_last_batch, and the same ring
 * layout: version and field table, fields.h) deliver the same bytes
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
 * Joining: a stream alone joins a group of its function (share_try_join) when
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
 * it goes at its slowest member's pace within the ring depth.
 *
 * HOLD: a member lags when its ring is full and holds batches published
 * to it that it has not read; it holds the group back when it lags while
 * another member waits (that one has read everything published to it and
 * has room).  The hold is timed from the moment the group first had to
 * wait on it, not from its last release: its releases let the group plan
 * one batch at a time and do not end the hold.  What ends it is the
 * holder catching up (at a look, it has read everything published to
 * it: it keeps the pace) or leaving the group.  Once a hold has lasted
 * SHARE_HOLD_NS, the next look judges it by the others' waits since it
 * began (each member's waited time, WAITS, counted from the hold's start):
 *
 *   - the member that waited most waited at least half of the hold: every
 *     member that lags, the holder among them, is split off into a group
 *     of its own and the others go on at their own pace;
 *   - less: the holder costs the others under half their pace (a reader a
 *     little slower than the rest, two equal readers one ring apart, each
 *     wait a decode long), sharing still pays, and a new window begins.
 *
 * STALLED: a Python loop keeps its last batch alive while it asks for the
 * next, so it never has every batch published to it read, and its waits
 * (WAITS) are not seen.  A member with room that holds at most the batch
 * in its hand and has released nothing for SHARE_HOLD_NS is stalled: it
 * is not reading its batch slowly, it has none to read.  It counts as
 * waiting for a hold to begin, and a hold of SHARE_HOLD_NS with a stalled
 * member splits the laggers off whatever the waits say (else a member
 * that stopped reading beside a Python loop held it for good).
 *
 * Looks come with every release of any member (plan_fill_group) and with
 * the once-a-second tick while a hold lasts, so a member that keeps the
 * others waiting (one that stops reading, or reads a batch a second while
 * they read twenty) is split off within SHARE_HOLD_NS + 1 s of when it
 * began to hold the group, however often it releases.  Nothing planned
 * changes: the batches already planned for it are still written into its
 * ring, and it plans its own from the same place on, alone for good (its
 * group is closed: it would otherwise join the others again at once).
 * A member that detaches or fails
 * is taken out of every queued job (plan_untarget_queued); a job in flight
 * still writes its ring, which the worker keeps mapped until the RING_DEL
 * that follows the job on the same socket.
 *
 * So each member's bytes are its solo run's: the same function at the same
 * place, whoever decoded it.  Invariants (sched_check):
 *   G1. every member of a group has start_k + next_g == pos, and its grp is
 *       that group; a group holds 0..WIRE_TARGETS_MAX members;
 *   G2. a job's targets are distinct streams, t[0] is its home (j->st),
 *       and a queued job's targets are neither detached nor failed;
 *   G3. a group's holder (HOLD), when it has one, is one of its members,
 *       and held_since is set exactly then.
 */
#define SHARE_HOLD_NS (1000ull * 1000000ull)
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "daemon.h"
#include "fault.h"
#include "log.h"
#include "plan.h"
#include "stream.h"

static bool same_function(const struct stream *a, const struct stream *b)
{
    const struct daemon *d = a->d;

    return a->dataset_id == b->dataset_id && d->cat[a->dataset_id].ds == d->cat[b->dataset_id].ds &&
           a->wsub.kind == b->wsub.kind && a->wsub.start == b->wsub.start &&
           a->wsub.stop == b->wsub.stop && a->wsub.crc == b->wsub.crc &&
           a->wsub.count == b->wsub.count && strcmp(a->wsub.file, b->wsub.file) == 0 &&
           a->a.seed == b->a.seed && a->a.batch == b->a.batch && a->a.rank == b->a.rank &&
           a->a.world == b->a.world && a->a.shuffle == b->a.shuffle && a->block == b->block &&
           a->a.drop_last == b->a.drop_last && a->a.drop_last_batch == b->a.drop_last_batch &&
           a->xform_id == b->xform_id && memcmp(&a->xp, &b->xp, sizeof(a->xp)) == 0 &&
           a->bpe == b->bpe && a->geom.slot_stride == b->geom.slot_stride &&
           a->geom.meta_size == b->geom.meta_size && a->out.sample_bytes == b->out.sample_bytes &&
           xform_fields_equal(&a->fx, &b->fx); /* the same columns (version 3) */
}


/* The time st has waited on the daemon since its attach (WAITS): its
 * ended waits and the one going on. */
static uint64_t waited_ns(const struct stream *st, uint64_t now)
{
    return st->starved_ns + (st->starved_since ? now - st->starved_since : 0);
}

uint64_t share_pos(const struct stream *st)
{
    return st->sh.start_k + st->next_g;
}

struct share_group *share_group_new(struct daemon *d, struct stream *st)
{
    struct share_group *g = fault_calloc(1, sizeof(*g));

    if (!g)
        return NULL;
    g->id = ++d->sched.share.next_group_id;
    g->refs = 1;
    g->members = st;
    g->n = 1;
    g->pos = g->unstarted = share_pos(st);
    g->next = d->sched.share.groups;
    d->sched.share.groups = g;
    st->sh.grp = g;
    st->sh.g_next = NULL;
    return g;
}

/* Takes st out of its group (the group lives on while a job holds it). */
void share_leave(struct daemon *d, struct stream *st)
{
    struct share_group *g = st->sh.grp;

    if (!g)
        return;
    for (struct stream **pp = &g->members; *pp; pp = &(*pp)->sh.g_next)
        if (*pp == st) {
            *pp = st->sh.g_next;
            break;
        }
    g->n--;
    if (g->holder == st) {
        g->holder = NULL;
        g->held_since = 0;
    }
    st->sh.grp = NULL;
    st->sh.g_next = NULL;
    share_unref(d, g);
}

/* Puts st (alone in its group) into g, last; p: the place it joins at. */
static void group_enter(struct daemon *d, struct share_group *g, struct stream *st, uint64_t p)
{
    struct stream **pp = &g->members;

    share_leave(d, st);
    while (*pp)
        pp = &(*pp)->sh.g_next;
    *pp = st;
    st->sh.g_next = NULL;
    st->sh.grp = g;
    st->sh.hold_w0 = waited_ns(st, sched_now(d));
    g->n++;
    g->refs++;
    for (struct stream *m = g->members; m; m = m->sh.g_next)
        m->sh.ever_shared = true;
    d->sched.share.share_joins++;
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

    /* each batch as the daemon planned it for the member that has it (its
     * own record: the member's ring is client-writable, ring.h T1) */
    for (uint64_t q = p; q < g->pos; q++) {
        uint64_t sg = q - src->sh.start_k;

        if (src->slot_g[sg % src->geom.depth] != sg)
            return false;
        want += src->slot_chunks[sg % src->geom.depth];
    }
    for (const struct stream *q = d->sched.streams; q; q = q->next)
        for (const struct job *j = q->fq.q_head; j; j = j->next)
            if (j->grp == g && j->k >= p && j->k < g->pos) {
                if (j->ntargets >= WIRE_TARGETS_MAX)
                    return false;
                found++;
            }
    if (found != want)
        return false;
    for (uint64_t q = p; q < g->pos; q++) {
        uint64_t sg = q - src->sh.start_k, g_new = st->next_g + (q - p), epoch, seq;
        uint32_t si = (uint32_t)(g_new % st->geom.depth);
        uint32_t sj = (uint32_t)(sg % src->geom.depth);
        struct ring_slot *slot = stream_slot(st, si);

        /* the same stream function: src's batch sg is st's batch g_new */
        stream_batch_pos(src, sg, &epoch, &seq);
        slot->count = src->slot_count[sj];
        slot->stream_seq = g_new;
        slot->epoch = epoch;
        slot->seq = seq;
        slot->chunks = src->slot_chunks[sj];
        slot->substituted = 0;
        slot->dropped = 0;
        atomic_store_explicit(&slot->chunks_done, 0, memory_order_release);
        atomic_store_explicit(&slot->ready, 0, memory_order_release);
        st->slot_g[si] = g_new;
        st->slot_count[si] = src->slot_count[sj];
        st->slot_chunks[si] = src->slot_chunks[sj];
        st->slot_done[si] = 0;
        st->slot_plan_ns[si] = sched_now(d);
        st->sh.shared_batches++;
    }
    for (struct stream *q = d->sched.streams; q; q = q->next)
        for (struct job *j = q->fq.q_head; j; j = j->next)
            if (j->grp == g && j->k >= p && j->k < g->pos) {
                uint64_t g_new = st->next_g + (j->k - p);

                j->t[j->ntargets++] = (struct job_target){
                    .st = st, .slot = (uint32_t)(g_new % st->geom.depth), .g = g_new };
                st->jobs_live++;
            }
    /* the batches' writes past the first (and, when they were planned for
     * one ring, that they are shared now) */
    d->sched.share.shared_writes += nb;
    if (g->n == 1) {
        d->sched.share.shared_batches += nb;
        g->members->sh.shared_batches += nb;
    }
    st->next_g += nb;
    return true;
}

/* st, alone in its group, about to plan its next place p: joins a group of
 * its function that plans p next, or has p planned and not yet begun; or,
 * when a group is short of p by at most st's depth, waits for it to get
 * there (SHARE_JOIN_WAIT: st plans nothing meanwhile), for SHARE_HOLD_NS at most
 * (join_wait_since). */
enum share_join share_try_join(struct daemon *d, struct stream *st)
{
    uint64_t p = share_pos(st), now;
    bool ahead = false;

    for (struct share_group *g = d->sched.share.groups; g; g = g->next) {
        if (g == st->sh.grp || g->n == 0 || g->n >= WIRE_TARGETS_MAX || g->closed ||
            !same_function(g->members, st))
            continue;
        if (g->pos == p) {
            group_enter(d, g, st, p);
            st->sh.join_wait_since = 0;
            return SHARE_JOIN_DONE;
        }
        if (g->unstarted <= p && p < g->pos && stream_has_room(st, g->pos - p) &&
            join_planned(d, g, st, p)) {
            group_enter(d, g, st, p);
            st->sh.join_wait_since = 0;
            return SHARE_JOIN_DONE;
        }
        if (p < g->pos && stream_has_room(st, g->pos - p) && st->sh.grp) {
            /* the group has begun the batches up to its place: st decodes
             * those alone, at once, and shares from the group's place on */
            while (share_pos(st) < g->pos) {
                int rc = plan_batch(d, &st, 1, st->sh.grp);

                if (rc < 0) {
                    plan_failed(d, &st, 1, rc);
                    return SHARE_JOIN_STOP;
                }
            }
            group_enter(d, g, st, g->pos);
            st->sh.join_wait_since = 0;
            return SHARE_JOIN_DONE;
        }
        if (g->pos < p && p - g->pos <= st->geom.depth)
            ahead = true;
    }
    if (!ahead || st->sh.join_waited) {
        st->sh.join_wait_since = 0;
        return SHARE_JOIN_NONE;
    }
    now = sched_now(d);
    if (!st->sh.join_wait_since)
        st->sh.join_wait_since = now;
    if (now - st->sh.join_wait_since < SHARE_HOLD_NS)
        return SHARE_JOIN_WAIT;
    st->sh.join_waited = true; /* waited long enough: it goes alone */
    st->sh.join_wait_since = 0;
    return SHARE_JOIN_NONE;
}

/* STALLED: st has room, holds at most the batch in its hand, and has
 * released nothing for SHARE_HOLD_NS. */
static bool stalled(const struct stream *st, uint64_t now)
{
    return stream_has_room(st, 1) && st->published - st->released <= 1 &&
           now - st->sh.last_release_ns >= SHARE_HOLD_NS;
}

void share_released(struct stream *st, uint64_t now)
{
    st->sh.last_release_ns = now;
}

/* A member that lags: its ring is full (the group cannot plan) and holds
 * batches published to it that it has not read. */
static bool lags(const struct stream *m)
{
    return !stream_has_room(m, 1) && m->published > m->released;
}

/* Starts a hold window of g with h as its holder: the others' waits are
 * counted from now. */
static void hold_begin(struct share_group *g, struct stream *h, uint64_t now)
{
    g->holder = h;
    g->held_since = now;
    for (struct stream *m = g->members; m; m = m->sh.g_next)
        m->sh.hold_w0 = waited_ns(m, now);
}

/* HOLD: called when a member's full ring stops g planning.  Begins a hold
 * when a lagging member keeps a waiting one waiting, ends it when the
 * holder has caught up, and once a hold has lasted SHARE_HOLD_NS with the
 * others waiting for at least half of it, splits off every member that
 * lags (the holder among them) into a closed group of its own; otherwise
 * starts the holder's next window.  The tick looks again while a hold
 * lasts (share_waits). */
void share_check_hold(struct daemon *d, struct share_group *g)
{
    struct stream *lagging = NULL;
    bool waiting = false, stuck = false;
    uint64_t now = sched_now(d), waited = 0, held;

    if (g->holder && g->holder->released == g->holder->published) {
        g->holder = NULL; /* it read all it was given: it keeps the pace */
        g->held_since = 0;
    }
    for (struct stream *m = g->members; m; m = m->sh.g_next) {
        if (lags(m) && !lagging)
            lagging = m;
        if (stream_has_room(m, 1) && m->released == m->published)
            waiting = true;
        if (stalled(m, now))
            waiting = stuck = true;
    }
    if (!g->holder) {
        if (lagging && waiting)
            hold_begin(g, lagging, now);
        return;
    }
    held = now - g->held_since;
    if (held < SHARE_HOLD_NS || !lags(g->holder))
        return;
    for (const struct stream *m = g->members; m; m = m->sh.g_next)
        if (m != g->holder && waited_ns(m, now) - m->sh.hold_w0 > waited)
            waited = waited_ns(m, now) - m->sh.hold_w0;
    if (waited < held / 2 && !stuck) {
        hold_begin(g, g->holder, now); /* it costs the others little: a new window */
        return;
    }
    for (struct stream *m = g->members, *next; m; m = next) {
        next = m->sh.g_next;
        if (!lags(m))
            continue;
        log_info("client %u is split off group %u: it held the group back for %.1f s, the "
                 "others waiting %.1f s of it; it decodes its own batches from epoch %llu "
                 "batch %llu on", m->id, g->id, (double)held / 1e9, (double)waited / 1e9,
                 (unsigned long long)(share_pos(m) / m->bpe),
                 (unsigned long long)(share_pos(m) % m->bpe));
        share_leave(d, m);
        if (share_group_new(d, m))
            m->sh.grp->closed = true;
        else
            m->sh.can_share = false; /* out of memory: it plans alone, with no group */
        d->sched.share.share_splits++;
    }
    g->holder = NULL;
    g->held_since = 0;
}


void share_unref(struct daemon *d, struct share_group *g)
{
    if (--g->refs > 0)
        return;
    for (struct share_group **pp = &d->sched.share.groups; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    free(g);
}


void share_started(struct share_group *g, uint64_t k)
{
    if (k >= g->unstarted)
        g->unstarted = k + 1;
}

bool share_waits(const struct daemon *d)
{
    /* a member that lags in a group of two or more: the others may stall
     * beside it with no release to bring a look (STALLED) */
    for (const struct stream *st = d->sched.streams; st; st = st->next)
        if ((st->sh.grp && st->sh.grp->holder) || st->sh.join_wait_since ||
            (st->sh.grp && st->sh.grp->n > 1 && lags(st)))
            return true;
    return false;
}

uint32_t sched_share_count(const struct daemon *d, bool members)
{
    uint32_t n = 0;

    for (const struct share_group *g = d->sched.share.groups; g; g = g->next)
        if (g->n > 1)
            n += members ? g->n : 1;
    return n;
}

void share_check(const struct daemon *d)
{
#if RINGFEED_CHECKS
#define CHECK_FAIL(...) do { log_error("sched_check: " __VA_ARGS__); abort(); } while (0)
    for (const struct share_group *g = d->sched.share.groups; g; g = g->next) {   /* G1 */
        uint32_t n = 0;
        bool holder_in = false;

        for (const struct stream *m = g->members; m; m = m->sh.g_next) {
            holder_in = holder_in || m == g->holder;
            if (m->sh.grp != g || share_pos(m) != g->pos || stream_ended(m))
                CHECK_FAIL("client %u in group %u: %s", m->id, g->id,
                           m->sh.grp != g ? "its group is another" :
                           stream_ended(m) ? "detached, failed or kicked" : "at another place");
            n++;
        }
        if (n != g->n || n > WIRE_TARGETS_MAX || g->refs < n || g->unstarted > g->pos + 1)
            CHECK_FAIL("group %u holds %u members, says %u (refs %u, unstarted %llu, pos %llu)",
                       g->id, n, g->n, g->refs, (unsigned long long)g->unstarted,
                       (unsigned long long)g->pos);
        if ((g->holder && !holder_in) || (g->holder != NULL) != (g->held_since != 0)) /* G3 */
            CHECK_FAIL("group %u's holder is %s, held since %llu", g->id,
                       g->holder && !holder_in ? "not a member" : g->holder ? "set" : "none",
                       (unsigned long long)g->held_since);
    }
    for (const struct stream *st = d->sched.streams; st; st = st->next)        /* G2 */
        for (const struct job *j = fq_first(st); j; j = fq_next(j)) {
            if (j->ntargets < 1 || j->ntargets > WIRE_TARGETS_MAX || j->t[0].st != j->st)
                CHECK_FAIL("queued job %llu names %u rings, its home %s its first",
                           (unsigned long long)j->job_id, j->ntargets,
                           j->ntargets && j->t[0].st == j->st ? "is" : "is not");
            for (uint32_t a = 0; a < j->ntargets; a++) {
                if (stream_ended(j->t[a].st))
                    CHECK_FAIL("queued job %llu names client %u, %s",
                               (unsigned long long)j->job_id, j->t[a].st->id,
                               j->t[a].st->dead ? "detached" : "failed or kicked");
                for (uint32_t b = 0; b < a; b++)
                    if (j->t[a].st == j->t[b].st)
                        CHECK_FAIL("queued job %llu names client %u twice",
                                   (unsigned long long)j->job_id, j->t[a].st->id);
            }
        }
#undef CHECK_FAIL
#else
    (void)d;
#endif
}
