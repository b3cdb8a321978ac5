/*
 * stream.c - one stream per attached client: its ring, made at ATTACH and
 * unmade at the detach; the client's releases, read from the ring and
 * checked; its failure or its kick; and the figures STATS and METRICS
 * read.  What goes in its batches is plan.c's; its turn at the workers
 * fairq.c's; its share group share.c's.
 *
 * A client's stream ends when its connection closes (sched_detach), when it
 * writes nonsense into the ring (stream_kick: the connection is closed on
 * the loop's next turn), or when its data is too damaged to go on (the
 * ring says RING_FAILED and why).  A detached stream's jobs still in
 * flight keep its struct alive until their DONE or their worker's death.
 *
 * MAKING: an ATTACH that passes the checks reserves its ring's bytes
 * (mem_used) and its place under max-clients, and its stream waits on
 * sched.making while libuv's thread pool makes the ring (ringmake.h); the
 * main loop serves everyone meanwhile.  When the ring is made the stream
 * joins sched.streams and the server answers the ATTACH (ops->attach_made).
 * A client that leaves meanwhile (sched_detach), or a daemon that stops,
 * cancels the making; the stream stays on sched.making, dead, until the
 * thread returns, and its bytes stay counted until then.  A stream being
 * made has no ring, no jobs, no group and no turn: nothing but the making
 * and sched_detach looks at it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "augment.h"
#include "daemon.h"
#include "fault.h"
#include "log.h"
#include "plan.h"
#include "ring.h"
#include "ringmake.h"
#include "stream.h"
#include "token_index.h"

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

_Static_assert(CONF_MAX_CLIENTS_MAX <= WIRE_MAX_RINGS, "a worker maps every attached ring");

/* MAKING: a ring being made on the thread pool for st. */
struct ring_job {
    uv_work_t req;
    struct stream *st;
    struct ring_make mk;
    struct mix_plan *walk;          /* a mixture's plan to walk, or NULL */
    int walk_rc;
    struct rf_err walk_err;
};

/* A ring's end on the thread pool (unmake_ring). */
struct ring_free {
    uv_work_t req;
    void *mem;
    uint64_t size;
    int memfd, efd;
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
    m->dataset_identity = dataset_identity(stream_dataset(st));
    m->rank = st->a.rank;
    m->world = st->a.world;
    m->batch = st->a.batch;
    m->shuffle = (uint8_t)st->a.shuffle;
    m->shuffle_block = st->block;
    m->drop_last = st->a.drop_last;
    m->drop_last_batch = st->a.drop_last_batch;
    m->wake_always = st->version < 2;
    m->ring_version = st->version;
    m->max_bad = st->d->cf.max_bad_samples > UINT32_MAX ? UINT32_MAX
                                                        : (uint32_t)st->d->cf.max_bad_samples;
    m->xform = st->xp;
    m->subset = st->wsub;
    m->geom = st->geom;
    m->fields_digest = xform_fields_digest(&st->fx);
    if (st->mix) {
        const struct mix_plan *pl = &st->mix->plan;

        m->nsources = pl->m.n;
        for (uint32_t k = 0; k < pl->m.n; k++) {
            m->sources[k] = st->mix->ids[k];
            m->shares[k] = pl->m.s[k].share;
        }
        m->epoch_of = pl->p.epoch_of;
        m->no_repeat = pl->p.no_repeat;
        m->per_stream = pl->p.per_stream;
        m->mix_units = pl->units;
        for (uint32_t k = 0; k < pl->m.n; k++)
            m->mix_ends[k] = pl->per_epoch[k] / pl->unit;
    }
}


struct ring_slot *stream_slot(const struct stream *st, uint32_t i)
{
    return (struct ring_slot *)((char *)st->mem + RING_HDR_SIZE +
                                (uint64_t)i * st->geom.slot_stride);
}

/* (epoch, seq) of stream batch g. */
void stream_batch_pos(const struct stream *st, uint64_t g, uint64_t *epoch, uint64_t *seq)
{
    uint64_t k = st->start_seq + g;

    *epoch = st->start_epoch + k / st->bpe;
    *seq = k % st->bpe;
}

int stream_sampler(const struct stream *st, uint64_t epoch, struct sampler *s)
{
    struct sampler_params p = {
        .n = st->n,
        .seed = st->a.seed,
        .epoch = (uint32_t)epoch,
        .rank = st->a.rank,
        .world = st->a.world,
        .batch = st->a.batch,
        .shuffle = st->a.shuffle,
        .block = st->block,
        .drop_last = st->a.drop_last,
        .drop_last_batch = st->a.drop_last_batch,
        .mix = st->mix ? &st->mix->plan : NULL,
    };

    return sampler_init(s, &p, NULL);
}

const struct dataset *stream_dataset(const struct stream *st)
{
    return st->mix ? st->mix->view : st->d->cat[st->dataset_id].ds;
}

bool stream_reads(const struct stream *st, uint32_t i)
{
    if (!st->mix)
        return st->dataset_id == i;
    for (uint32_t k = 0; k < st->mix->plan.m.n; k++)
        if (st->mix->ids[k] == i)
            return true;
    return false;
}

/* Each source's count at stream batch g (its first sample's place). */
static void mix_counts_at(const struct stream *st, uint64_t g, uint64_t *out)
{
    const struct mix_plan *pl = &st->mix->plan;
    uint64_t epoch, seq;

    stream_batch_pos(st, g, &epoch, &seq);
    mix_plan_counts(pl, epoch, pl->p.per_stream ? seq : seq * pl->p.batch, out);
}

void sched_sources_text(const struct stream *st, char *buf, size_t cap)
{
    size_t used = 0;

    buf[0] = '\0';
    for (uint32_t k = 0; st->mix && k < st->mix->plan.m.n && used < cap; k++) {
        int n = snprintf(buf + used, cap - used, "%s%s:%llu", k ? "," : "",
                         st->mix->plan.m.s[k].name,
                         (unsigned long long)st->mix->plan.base[k]);

        if (n < 0)
            break;
        used += (size_t)n;
    }
}

void stream_mix_text(const struct stream *st, char *buf, size_t cap)
{
    uint64_t now[MIX_SOURCES_MAX];
    size_t used = 0;

    buf[0] = '\0';
    if (!st->mix)
        return;
    mix_counts_at(st, st->published, now);
    for (uint32_t k = 0; k < st->mix->plan.m.n && used < cap; k++) {
        int n = snprintf(buf + used, cap - used, "%s%s:%llu", k ? "," : "",
                         st->mix->plan.m.s[k].name,
                         (unsigned long long)(now[k] - st->mix->start[k]));

        if (n < 0)
            break;
        used += (size_t)n;
    }
}

static void mix_free(struct stream_mix *mx)
{
    if (!mx)
        return;
    mix_plan_free(&mx->plan);
    dataset_close(mx->view);
    free(mx);
}

void stream_free(struct stream *st)
{
    if (!st)
        return;
    mix_free(st->mix);
    subset_free(&st->sub);
    free(st);
}

/* The stream cannot go on: tell the client through the ring and stop. */
void stream_fail(struct daemon *d, struct stream *st, int code, const char *why)
{
    struct ring_hdr *h = st->mem;

    if (st->failed)
        return;
    st->failed = true;
    d->sched.streams_failed++;
    log_error("client %u (%s): stream failed: %s", st->id, st->a.name[0] ? st->a.name : "-", why);
    h->error = code;
    snprintf(h->reason, sizeof(h->reason), "%s", why);
    atomic_store_explicit(&h->state, RING_FAILED, memory_order_release);
    for (uint32_t i = 0; i < st->geom.depth; i++)
        ring_futex_wake(&stream_slot(st, i)->ready);
    plan_untarget_queued(d, st);
    share_leave(d, st);
}

/*
 * WAITS: what the two histograms of METRICS observe (sched_state).
 *
 *   prod_hist  per batch, its production time: from plan_batch (the slot
 *              header written, its jobs queued) to plan_advance_published
 *              counting it, i.e. queueing behind earlier batches and other
 *              streams' jobs, the workers' time, and the DONE's way back.
 *   wait_hist  per wait, a client's wait: it starts when the main process
 *              sees that the client has released every batch published so
 *              far (starved_since: stream_take_release, or the attach, for the
 *              first batch), or that it sleeps for its next batch while it
 *              holds one (a Python loop keeps its last batch alive while it
 *              asks for the next; the client writes the eventfd as it goes
 *              to sleep, ring.h C4), and ends when it sees the next batch
 *              published (plan_advance_published).  The client is counted as waiting
 *              whether or not it is inside rf_next: one that releases its
 *              last batch and computes before asking for the next waits
 *              only for part of the time counted.  The start is seen at
 *              once when the client writes its eventfd, which stream_take_release
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
 * sched_check: S1. starved_since != 0 only while no batch was published
 * since the wait began (starved_pub) and the client holds at most one;
 * H1. a histogram's count is the sum of its buckets.
 */


void stream_kick(struct daemon *d, struct stream *st, const char *why)
{
    if (st->kicked || st->dead)
        return;
    st->kicked = true;
    snprintf(st->kick_why, sizeof(st->kick_why), "%s", why);
    d->clients_killed++;
    /* it holds no job and no group back from here on */
    plan_untarget_queued(d, st);
    share_leave(d, st);
    d->sched.kicks_pending++;
    sched_defer_kicks(d);
}

/*
 * Reads and checks the client's release counter (ring.h M3), plans what it
 * makes room for, and says through want_release whether the client must
 * write the eventfd after its next release (M4): when no job of the
 * stream is queued or in flight (otherwise each job's DONE brings us back
 * here), and when at most one batch is ready (WAITS).
 * Returns false when the client is kicked (a bad counter, now or before);
 * st is still there: its connection closes on the loop's next turn.
 */
bool stream_take_release(struct daemon *d, struct stream *st)
{
    struct ring_hdr *h = st->mem;

    if (st->kicked || st->dead)
        return false;
    for (;;) {
        uint64_t r = atomic_load_explicit(&h->released, memory_order_acquire);
        bool want;

        if (r != st->released) {
            if (r > st->published)
                plan_advance_published(d, st);
            if (r < st->released || r > st->published) {
                char why[200];

                snprintf(why, sizeof(why),
                         "client wrote release counter %llu into its ring; valid now: %llu..%llu",
                         (unsigned long long)r, (unsigned long long)st->released,
                         (unsigned long long)st->published);
                stream_kick(d, st, why);
                sched_check(d);
                return false;
            }
            st->released = r;
            share_released(st, sched_now(d));
            if (r == st->published && !st->starved_since) {
                st->starved_since = sched_now(d);
                st->starved_pub = st->published;
            }
            plan_fill_stream(d, st);
        }
        /* asleep for its next batch with the one it holds (a Python loop
         * keeps its last batch alive while it asks for the next): a wait
         * too; the client writes the eventfd as it goes to sleep (ring.h
         * C4).  `sleeping` is the client's word: a false one only makes
         * its own waits longer */
        if (!st->starved_since && st->version >= 2 && st->published - st->released <= 1 &&
            atomic_load_explicit(&h->sleeping, memory_order_relaxed)) {
            st->starved_since = sched_now(d);
            st->starved_pub = st->published;
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
    if (stream_take_release(d, st))
        d->sched.ops->dispatch(d);
}

/* The ring's header, once ring_make_run has made the memory (MAKING). */
static void ring_header(struct daemon *d, struct stream *st)
{
    struct ring_hdr *h;

    (void)d;
    ring_init(st->mem, &st->geom, st->version >= RING_VERSION_FIELDS ? RING_VERSION_FIELDS : 2);
    h = st->mem;
    h->version = st->version;
    xform_fields_put(&st->fx, h);
    h->dtype = st->out.dtype;
    h->layout = st->out.layout;
    memcpy(h->shape, st->out.shape, sizeof(h->shape));
    h->classes = dataset_info(stream_dataset(st))->classes;
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

static uint32_t auto_depth(const struct daemon *d, const struct stream *st, uint32_t batch)
{
    struct xform_fields fx;
    struct rf_err err;
    uint64_t n;

    (void)d;
    if (xform_fields_build(dataset_info(stream_dataset(st)), &st->xp, &st->out,
                           st->version, AUTO_DEPTH_MIN, batch, &fx, &err) < 0)
        return AUTO_DEPTH_MIN; /* the build says why with the real depth */
    n = AUTO_RING_BYTES / fx.g.slot_stride;
    return n < AUTO_DEPTH_MIN ? AUTO_DEPTH_MIN : n > AUTO_DEPTH_MAX ? AUTO_DEPTH_MAX : (uint32_t)n;
}

/* WEIGHTS (fairq.c): the weight a client attaching with a (of user uid)
 * gets: its weight=, else its config rule's, lowered to the most the
 * config allows it (conf_weight_max), so a client cannot give itself the
 * workers: the operator decides.  A larger ask is capped, not refused. */
static uint32_t grant_weight(const struct daemon *d, const struct ctl_attach *a, uint32_t uid)
{
    uint32_t max = conf_weight_max(&d->cf, a->name, uid);
    uint32_t w = a->weight ? a->weight : conf_weight_for(&d->cf, a->name, uid);

    if (w <= max)
        return w;
    if (a->weight)
        log_info("a client of uid %u%s%s asks for weight %u; the config allows it %u "
                 "(max-weight, or its weight rule's /MAX)", uid, a->name[0] ? ", name " : "",
                 a->name, a->weight, max);
    return max;
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
        n += !st->dead && stream_reads(st, i);
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

    /* a mixture's epoch walked here, off the loop (mix.h): nothing on the
     * loop reads the plan's epoch figures until making_done */
    if (rj->walk)
        rj->walk_rc = mix_plan_walk(rj->walk, &rj->walk_err);
    ring_make_run(&rj->mk);
}

/* A ring mlock refused (RLIMIT_MEMLOCK: LimitMEMLOCK= in the unit, ulimit
 * -l by hand): said in the log the first time and every 100th after, so an
 * operator sees that rings may be paged out (STATS has each client's). */
static void unlocked_note(struct daemon *d, const struct stream *st, int err)
{
    static uint64_t unlocked;
    struct rlimit rl;
    char lim[48] = "unknown";

    (void)d;
    if (unlocked++ % 100 != 0)
        return;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur == RLIM_INFINITY)
        snprintf(lim, sizeof(lim), "unlimited");
    else if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0)
        snprintf(lim, sizeof(lim), "%llu bytes", (unsigned long long)rl.rlim_cur);
    log_warn("client %u: its ring (%llu bytes) is not locked in RAM (mlock: %s; the memlock "
             "limit is %s: LimitMEMLOCK= in the unit, ulimit -l by hand); it may be paged out "
             "under memory pressure (%llu ring(s) so far)", st->id,
             (unsigned long long)st->geom.total_size, strerror(err ? err : ENOMEM), lim,
             (unsigned long long)unlocked);
}

/*
 * The stream's batches per epoch (st->bpe) and its start normalized: a
 * start sequence past the epoch's end starts in a later epoch; one past
 * the last epoch (the sampler keys epochs by 32 bits) is refused, never
 * wrapped.  Then a mixture's counts at its start (STATS).  0 or -EINVAL
 * with err.
 */
static int stream_start(struct stream *st, struct rf_err *err)
{
    const struct ctl_attach *a = &st->a;
    struct sampler s;
    int rc = stream_sampler(st, (uint32_t)st->start_epoch, &s);

    if (rc < 0)
        return rf_err_set(err, rc, "rank=%u world=%u batch=%u do not fit %s%s of %llu samples",
                          a->rank, a->world, a->batch, st->wsub.kind ? "the subset of dataset "
                          : "dataset ", a->dataset, (unsigned long long)st->n);
    st->bpe = sampler_batches(&s);
    if (st->bpe == 0)
        return rf_err_set(err, -EINVAL, "this rank would get no batches");
    if (st->start_seq / st->bpe > SCHED_EPOCH_MAX - st->start_epoch)
        return rf_err_set(err, -EINVAL,
                          "epoch=%u seq=%llu starts past epoch %llu; epochs are numbered 0..%u "
                          "(%llu batches each for this rank)", a->epoch,
                          (unsigned long long)a->seq, (unsigned long long)SCHED_EPOCH_MAX,
                          (unsigned)SCHED_EPOCH_MAX, (unsigned long long)st->bpe);
    st->start_epoch += st->start_seq / st->bpe;
    st->start_seq %= st->bpe;
    if (st->mix)
        mix_counts_at(st, 0, st->mix->start);
    return 0;
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
    char sub[160], shuf[40];
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
    else if (rc == 0 && !st->dead)
        unlocked_note(d, st, mk->lock_errno);
    if (rc == 0 && !st->dead && mk->place_errno)
        log_warn("client %u: its ring (%llu bytes) is not placed on numa-node %d (%s): its "
                 "pages come from any node", st->id, (unsigned long long)st->geom.total_size,
                 mk->numa_node, strerror(mk->place_errno));
    if (!st->dead)
        d->sched.nmaking--;
    for (uint32_t k = 0; rc == 0 && !st->dead && k < (st->mix ? st->mix->plan.m.n : 1); k++) {
        uint32_t i = st->mix ? st->mix->ids[k] : st->dataset_id;

        if (d->cat[i].failed[0])
            rc = rf_err_set(&err, -EBADMSG, "dataset %s failed while the ring was made: %s",
                            d->cat[i].name, d->cat[i].failed);
    }
    if (rc == 0 && !st->dead && rj->walk && rj->walk_rc < 0) {
        err = rj->walk_err;
        rc = rj->walk_rc;
    } else if (rc == 0 && !st->dead && rj->walk) {
        rc = stream_start(st, &err);
    }
    if (rc == 0 && !st->dead && st->sh.can_share && !share_group_new(d, st))
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
        stream_free(st);
        if (conn)
            d->sched.ops->attach_made(conn, NULL, rc, &err);
        sched_check(d);
        return;
    }
    ring_header(d, st);
    for (uint32_t i = 0; i < RING_MAX_DEPTH; i++)
        st->slot_g[i] = STREAM_NO_BATCH;
    st->attach_ns = sched_now(d);
    st->starved_since = st->attach_ns; /* the client waits for its first batch from here */
    share_released(st, st->attach_ns);
    st->next = d->sched.streams;
    d->sched.streams = st;
    d->sched.nstreams++;
    d->attaches++;
    /* " subset NAME (N samples)" only for a stream drawing from one */
    if (st->wsub.kind == WIRE_SUBSET_RANGE || st->wsub.kind == WIRE_SUBSET_NAMED) {
        char name[80];

        stream_subset_text(st, name, sizeof(name));
        snprintf(sub, sizeof(sub), " subset %s (%llu samples)", name,
                 (unsigned long long)st->n);
    } else {
        sub[0] = '\0';
    }
    if (st->a.shuffle == SAMPLER_SHUFFLE_BLOCK)
        snprintf(shuf, sizeof(shuf), "block of %llu", (unsigned long long)st->block);
    else
        snprintf(shuf, sizeof(shuf), "%s", ctl_shuffle_name(st->a.shuffle));
    log_info("client %u attached (uid %u pid %u unit %s): dataset %s%s batch %u rank %u/%u "
             "shuffle %s depth %u weight %u, ring %llu bytes%s", st->id, st->uid, st->pid,
             st->unit[0] ? st->unit : "-", st->a.dataset, sub, st->a.batch, st->a.rank,
             st->a.world, shuf, st->geom.depth, st->fq.weight,
             (unsigned long long)st->geom.total_size, st->locked ? " (locked)" : "");
    sched_check(d);
    d->sched.ops->attach_made(st->conn, st, 0, NULL);
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
    rj->mk.numa_node = conf_numa_node(&d->cf);
    rj->walk = st->mix ? &st->mix->plan : NULL;
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

void stream_subset_text(const struct stream *st, char *buf, size_t cap)
{
    if (st->wsub.kind == WIRE_SUBSET_RANGE)
        snprintf(buf, cap, "%llu:%llu", (unsigned long long)st->wsub.start,
                 (unsigned long long)st->wsub.stop);
    else if (st->wsub.kind == WIRE_SUBSET_NAMED)
        snprintf(buf, cap, "%s", st->wsub.name);
    else
        snprintf(buf, cap, "-");
}

/*
 * ATTACH subset=: the samples st draws from (st->sub, st->wsub, st->n).  A
 * range is checked against the dataset; a named set is looked up in the
 * pack's MANIFEST as it is now (a split made while the daemon runs is
 * offered at once: dataset.h) and its file read and checked, on the loop:
 * a few milliseconds for ImageNet's 1.28 M-sample set.  Returns 0, -EINVAL
 * (a range out of bounds, a name the pack does not have: err lists its
 * sets), -EBADMSG (a set's file that fails its checks: err names it), or
 * the read's error.
 */
static int stream_subset(struct stream *st, const struct dataset *ds, const struct ctl_attach *a,
                         struct rf_err *err)
{
    uint64_t samples = dataset_info(ds)->samples;
    const struct ctl_subset *sb = &a->subset;
    struct dataset_subset_ref ref;
    int rc;

    st->n = samples;
    st->wsub = (struct wire_subset){ .kind = WIRE_SUBSET_NONE };
    if (sb->range) {
        uint64_t stop = sb->stop == UINT64_MAX ? samples : sb->stop;

        if (sb->start >= samples || stop > samples || sb->start >= stop)
            return rf_err_set(err, -EINVAL, "subset=%llu:%llu is outside dataset %s's %llu "
                              "samples (indices 0..%llu; STOP is one past the last)",
                              (unsigned long long)sb->start, (unsigned long long)stop,
                              a->dataset, (unsigned long long)samples,
                              (unsigned long long)(samples ? samples - 1 : 0));
        if (subset_range(&st->sub, sb->start, stop) < 0)
            return rf_err_set(err, -EAGAIN, "the daemon is out of memory; try again");
        st->wsub = (struct wire_subset){ .kind = WIRE_SUBSET_RANGE, .start = sb->start,
                                         .stop = stop };
    } else if (sb->name[0]) {
        rc = dataset_subset_find(ds, sb->name, &ref, err);
        if (rc == -ENOENT)
            return -EINVAL; /* a name this pack does not have: err lists its sets */
        if (rc == 0)
            rc = dataset_subset_read(ds, &ref, &st->sub, err);
        if (rc < 0)
            return rc == -ENOMEM ? -EAGAIN : rc == -ESTALE ? -EBADMSG : rc;
        st->wsub = (struct wire_subset){ .kind = WIRE_SUBSET_NAMED, .crc = ref.crc,
                                         .count = ref.count, .bytes = ref.bytes };
        snprintf(st->wsub.name, sizeof(st->wsub.name), "%s", ref.name);
        snprintf(st->wsub.file, sizeof(st->wsub.file), "%s", ref.file);
    } else {
        return 0;
    }
    st->n = st->sub.n;
    return 0;
}

/*
 * shuffle=block's block size for st (st->block): the ATTACH's block=, else
 * SAMPLER_BLOCK_SHARDS of the dataset's largest shard, scaled to the
 * stream's n when it draws from a subset (sampler_block_default).  With
 * shards of one record count (the last maybe short) a block of the whole
 * dataset then starts on a shard boundary.  0 with the other shuffles.
 */
static void stream_block(struct stream *st, const struct dataset *ds, const struct ctl_attach *a)
{
    const struct dataset_info *info = dataset_info(ds);
    struct dataset_shard_info si;
    uint64_t most = 0;

    st->block = 0;
    if (a->shuffle != SAMPLER_SHUFFLE_BLOCK)
        return;
    if (a->block) {
        st->block = a->block;
        return;
    }
    for (uint32_t i = 0; i < info->shards; i++)
        if (dataset_shard_info(ds, i, &si) == 0 && si.records > most)
            most = si.records;
    st->block = sampler_block_default(SAMPLER_BLOCK_SHARDS, most, st->n, info->samples);
}

/*
 * A window transform's n (transform tokens, window.h): the windows of
 * context + 1 tokens at a stride of context over the dataset's documents,
 * counted from a token index built here, on the loop, and freed (8 bytes
 * a document while it lives; the shard indexes alone are read).  subset=
 * is refused: a set of documents is not a set of windows.  Returns 0,
 * -EINVAL (a subset, no whole window) or tokidx_build's error, err saying
 * which.
 */
static int stream_windows(struct stream *st, const struct dataset *ds,
                          const struct ctl_attach *a, struct rf_err *err)
{
    struct tok_index ti;
    int rc;

    if (a->subset.range || a->subset.name[0])
        return rf_err_set(err, -EINVAL, "subset= with transform tokens: its samples are "
                          "windows of the whole token stream, not records; pack the "
                          "documents wanted into their own dataset");
    rc = tokidx_build(ds, &ti, err);
    if (rc < 0) {
        rf_err_prefix(err, "dataset %s, transform tokens", a->dataset);
        return rc == -ENOMEM ? -EAGAIN : rc;
    }
    st->n = tokidx_windows(&ti, a->context);
    if (st->n == 0)
        rc = rf_err_set(err, -EINVAL, "dataset %s holds %llu tokens: no whole window of "
                        "context=%u (%u tokens) fits; lower context", a->dataset,
                        (unsigned long long)tokidx_tokens(&ti), a->context, a->context + 1);
    tokidx_free(&ti);
    return rc;
}

/*
 * ATTACH augment=: the spec, or the config's recipe it names (@NAME),
 * parsed into the stream's transform parameters (st->xp.aug, which share
 * groups compare and WIRE_RING_ADD carries), then checked against the
 * stream's samples (worker/augment.h: uint8 images, every op in this
 * build).  Returns 0 or -EINVAL with err saying what to do.
 */
static int stream_augment(struct daemon *d, struct stream *st, const struct ctl_attach *a,
                          struct rf_err *err)
{
    const char *text = a->augment;
    const struct conf_recipe *r = NULL;
    char names[CONF_RECIPES_MAX * (CONF_RECIPE_NAME_MAX + 1) + 8];

    if (text[0] == '@') {
        r = conf_find_recipe(&d->cf, text + 1, strlen(text + 1));
        if (!r) {
            conf_recipe_names(&d->cf, names, sizeof(names));
            return rf_err_set(err, -EINVAL, "augment=%s: no such recipe; this daemon's config "
                              "names: %s", text, names);
        }
        text = r->spec;
    }
    if (aug_spec_parse(text, strlen(text), &st->xp.aug, err) < 0) {
        if (r)
            rf_err_prefix(err, "recipe %s", r->name);
        return -EINVAL;
    }
    if (st->fx.kind_fields && st->xp.field == WIRE_NO_FIELD) {
        /* the bound image field is augmented (in the worker's make_fields),
         * its boxes and masks following the geometric ops (aug_run.h) */
        memset(&st->xp.aug, 0, sizeof(st->xp.aug));
        return rf_err_set(err, -EINVAL, "augment= with transform raw on dataset %s, whose "
                          "samples have fields: use transform none, train or eval, which "
                          "bind its image field (field=)", a->dataset);
    }
    if (st->fx.kind_fields) {
        /* a plugin's geometry is its own: boxes and masks cannot follow it */
        const struct schema *sc = &dataset_info(stream_dataset(st))->schema;

        for (uint32_t i = 0; i < st->xp.aug.n; i++)
            for (uint32_t k = 0; k < sc->n && st->xp.aug.op[i].id == AUG_PLUGIN; k++)
                if ((sc->f[k].role == SCHEMA_ROLE_BOXES || sc->f[k].role == SCHEMA_ROLE_MASK) &&
                    sc->f[k].of == st->xp.field) {
                    memset(&st->xp.aug, 0, sizeof(st->xp.aug));
                    return rf_err_set(err, -EINVAL, "augment: a Plugin op may move pixels, and "
                                      "field %s (%s of image %s) could not follow it; leave the "
                                      "plugin out on this dataset", sc->f[k].name,
                                      sc->f[k].role == SCHEMA_ROLE_BOXES ? "boxes" : "a mask",
                                      sc->f[st->xp.field].name);
                }
    }
    if (augment_check(&st->xp.aug, &st->out, &d->plugins, err) < 0) {
        memset(&st->xp.aug, 0, sizeof(st->xp.aug));
        if (r)
            rf_err_prefix(err, "recipe %s", r->name);
        rf_err_prefix(err, "dataset %s, transform %s", a->dataset,
                      ctl_transform_name(a->transform));
        return -EINVAL;
    }
    return 0;
}

/*
 * A mixture (mix.h, docs/design/mixtures.md): ATTACH mix=, or dataset=NAME
 * naming the config's mixture.NAME.  Its sources are found in the
 * catalogue (local datasets, served, of one schema) and read through a
 * view of them.  Returns 1 with *out made, 0 when the ATTACH names no
 * mixture (then repeat=, epoch_of= and per_stream= are refused), or a
 * negative errno with err.
 */
static int mix_resolve(struct daemon *d, const struct ctl_attach *a, struct stream_mix **out,
                       struct rf_err *err)
{
    const struct conf_mixture *cm = a->mix[0] ? NULL : conf_find_mixture(&d->cf, a->dataset);
    const char *text = a->mix[0] ? a->mix : cm ? cm->mix : NULL;
    const char *what = cm ? cm->name : "mix=";
    struct dataset *parts[MIX_SOURCES_MAX];
    const char *names[MIX_SOURCES_MAX];
    struct stream_mix *mx;
    struct mix m;
    int rc;

    *out = NULL;
    if (!text) {
        static const char *const only[] = {"repeat", "epoch_of", "per_stream"};

        for (size_t k = 0; k < sizeof(only) / sizeof(only[0]); k++)
            if (ctl_attach_given(a, only[k]))
                return rf_err_set(err, -EINVAL, "%s= is for mixtures (mix=, or a mixture.NAME "
                                  "of the config); dataset %s is not one", only[k], a->dataset);
        return 0;
    }
    if (mix_parse(text, strlen(text), &m, err) < 0) { /* checked when read: never here */
        rf_err_prefix(err, "%s", what);
        return -EINVAL;
    }
    for (uint32_t k = 0; k < m.n; k++) {
        int id = d->sched.ops->find_dataset(d, m.s[k].name);
        const char *why = id < 0 ? d->sched.ops->failed_reason(d, m.s[k].name) : NULL;

        if (id < 0 && why)
            return rf_err_set(err, -EBADMSG, "mixture %s: source %s is not served: %s", what,
                              m.s[k].name, why);
        if (id < 0) {
            char list[1024];

            d->sched.ops->dataset_names(d, list, sizeof(list));
            return rf_err_set(err, -ENOENT, "mixture %s: no dataset \"%s\"; this daemon serves: "
                              "%s", what, m.s[k].name, list[0] ? list : "(none)");
        }
        if (d->sched.ops->on_demand && d->sched.ops->on_demand(d, (uint32_t)id))
            return rf_err_set(err, -EINVAL, "mixture %s: source %s is a remote dataset; a "
                              "mixture's sources are local folders", what, m.s[k].name);
        parts[k] = d->cat[id].ds;
        names[k] = m.s[k].name;
    }
    mx = calloc(1, sizeof(*mx));
    if (!mx)
        return rf_err_set(err, -EAGAIN, "the daemon is out of memory; try again");
    rc = dataset_view_new(parts, names, m.n, &mx->view, err);
    if (rc < 0) {
        free(mx);
        rf_err_prefix(err, "mixture %s", what);
        return rc == -ENOMEM ? -EAGAIN : rc;
    }
    for (uint32_t k = 0; k < m.n; k++)
        mx->ids[k] = (uint32_t)d->sched.ops->find_dataset(d, m.s[k].name);
    mx->plan.m = m; /* the plan proper once the transform says what a sample is */
    *out = mx;
    return 1;
}

/*
 * The mixture's plan (st->mix->plan), started: each source's samples
 * (records, or a window transform's windows), the ATTACH's sampler
 * parameters; the epoch's walk, which may take a second, runs with the
 * ring's making, off the loop (making_work).  subset= and shuffle=block
 * are refused: a source is drawn whole, each by its own shuffle.  Returns
 * 0 or a negative errno with err.
 */
static int mix_plan_stream(struct daemon *d, struct stream *st, const struct ctl_attach *a,
                           bool windows, struct rf_err *err)
{
    struct stream_mix *mx = st->mix;
    struct mix m = mx->plan.m;
    struct mix_plan_params p = {
        .m = &m, .seed = a->seed, .rank = a->rank, .world = a->world, .batch = a->batch,
        .shuffle = a->shuffle, .epoch_of = -1, .drop_last = a->drop_last,
        .drop_last_batch = a->drop_last_batch, .no_repeat = !a->repeat,
        .per_stream = a->per_stream,
    };
    int rc;

    if (a->subset.range || a->subset.name[0])
        return rf_err_set(err, -EINVAL, "subset= with a mixture: its sources are drawn whole; "
                          "name a set's own dataset in the mixture instead");
    if (a->shuffle == SAMPLER_SHUFFLE_BLOCK)
        return rf_err_set(err, -EINVAL, "shuffle=block with a mixture: each source is "
                          "shuffled by its own sampler (shuffle=0 or 1); block is for remote "
                          "datasets, which a mixture does not take");
    if (a->epoch_of[0]) {
        for (uint32_t k = 0; k < m.n; k++)
            if (strcmp(m.s[k].name, a->epoch_of) == 0)
                p.epoch_of = (int32_t)k;
        if (p.epoch_of < 0)
            return rf_err_set(err, -EINVAL, "epoch_of=%s is not one of the mixture's sources",
                              a->epoch_of);
    }
    for (uint32_t k = 0; k < m.n; k++) {
        const struct dataset *part = d->cat[mx->ids[k]].ds;

        p.n[k] = dataset_info(part)->samples;
        if (windows) {
            struct tok_index ti;

            rc = tokidx_build(part, &ti, err);
            if (rc < 0) {
                rf_err_prefix(err, "mixture source %s, transform tokens", m.s[k].name);
                return rc == -ENOMEM ? -EAGAIN : rc;
            }
            p.n[k] = tokidx_windows(&ti, a->context);
            tokidx_free(&ti);
            if (p.n[k] == 0)
                return rf_err_set(err, -EINVAL, "mixture source %s holds no whole window of "
                                  "context=%u; lower context", m.s[k].name, a->context);
        }
    }
    rc = mix_plan_init(&mx->plan, &p, err); /* the epoch's walk: making_work */
    if (rc < 0)
        return rc;
    st->n = mx->plan.base[m.n];
    return 0;
}

int sched_attach(struct daemon *d, const struct ctl_attach *a, uint32_t uid, void *conn,
                 struct stream **out, struct rf_err *err)
{
    struct stream *st;
    const struct xform_def *xf;
    const char *tname = ctl_transform_name(a->transform);
    const struct dataset *sds;
    struct stream_mix *mx;
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
    rc = mix_resolve(d, a, &mx, err);
    if (rc < 0)
        return rc;
    ds = mx ? (int)mx->ids[0] : d->sched.ops->find_dataset(d, a->dataset);
    if (ds < 0 && d->sched.ops->failed_reason(d, a->dataset)) {
        const char *why = d->sched.ops->failed_reason(d, a->dataset);

        if (strncmp(why, CATALOG_FETCHING, strlen(CATALOG_FETCHING)) == 0)
            return rf_err_set(err, -EBADMSG, "dataset %s is not served yet, %s", a->dataset,
                              why);
        return rf_err_set(err, -EBADMSG, "dataset %s failed and is not served until a reload: %s",
                          a->dataset, why);
    }
    if (ds < 0) {
        char names[1024];

        d->sched.ops->dataset_names(d, names, sizeof(names));
        return rf_err_set(err, -ENOENT, "no dataset \"%s\"; this daemon serves: %s",
                          a->dataset, names[0] ? names : "(none)");
    }
    xi = tname ? xform_find(tname) : -ENOENT;
    if (xi < 0) {
        mix_free(mx);
        return rf_err_set(err, -EINVAL, "transform=%s is not available; this daemon has: %s",
                          tname ? tname : "?", xform_names());
    }
    st = fault_calloc(1, sizeof(*st));
    if (!st) {
        mix_free(mx);
        return rf_err_set(err, -EAGAIN, "the daemon is out of memory; try again");
    }
    st->mix = mx;
    st->d = d;
    st->memfd = st->efd = -1;
    st->a = *a;
    if (a->mix[0]) /* STATS and the log name an ATTACH's own mixture so */
        snprintf(st->a.dataset, sizeof(st->a.dataset), "mix");
    st->version = a->version ? a->version : RING_VERSION;
    st->dataset_id = (uint32_t)ds;
    st->xform_id = (uint32_t)xi;
    sds = stream_dataset(st);
    rc = mx ? 0 : stream_subset(st, sds, a, err);
    if (rc < 0)
        goto fail;
    st->xp = (struct wire_xform){
        .id = (uint32_t)xi, .size = a->size,
        .layout = a->layout == CTL_LAYOUT_HWC ? RING_HWC : RING_CHW,
        .scale_lo = a->scale[0], .scale_hi = a->scale[1],
        .ratio_lo = a->ratio[0], .ratio_hi = a->ratio[1],
        .flip = a->flip, .crop = a->crop,
        .context = a->context, .doc_ids = a->doc_ids,
        .pixel_cap = d->cf.pixel_cap,
    };
    xf = xform_get((uint32_t)xi);
    st->cost_ns = xf->cost_ns ? xf->cost_ns : 1;
    st->out = (struct xform_out){ 0 };
    /* field=: the image field the transform is bound to (fields.h); a
     * window transform reads the dataset's one field */
    if (xf->windows && a->field[0]) {
        rc = rf_err_set(err, -EINVAL, "field=%s: transform %s reads the dataset's one token "
                        "field; leave field= out", a->field, xf->name);
        goto fail;
    }
    st->xp.field = WIRE_NO_FIELD;
    rc = xf->windows ? 0 : xform_bind_field(dataset_info(sds),
                                            strcmp(xf->name, "raw") == 0, a->field,
                                            &st->xp.field, err);
    if (rc < 0)
        goto fail;
    rc = xf->geometry(sds, &st->xp, &st->out, err);
    if (rc < 0)
        goto fail;
    /* a parameter the transform does not use is refused, never ignored
     * (after geometry: a transform that does not fit the dataset says so
     * first) */
    rc = xform_check_params((uint32_t)xi, a, err);
    if (rc < 0)
        goto fail;
    if (mx) {
        rc = mix_plan_stream(d, st, a, xf->windows, err);
        if (rc < 0)
            goto fail;
    } else if (xf->windows) {
        rc = stream_windows(st, sds, a, err);
        if (rc < 0)
            goto fail;
    }
    if (!mx)
        stream_block(st, sds, a);
    /* a transform that names no element type would give a ring every
     * client refuses: a bug here, said here */
    if (dataset_dtype_from_ring(st->out.dtype) < 0) {
        rc = rf_err_set(err, -EINVAL, "transform %s gave no element type (dtype %u): a "
                        "ringfeedd bug", xf->name, st->out.dtype);
        goto fail;
    }
    st->start_epoch = a->epoch;
    st->start_seq = a->seq;
    if (!mx) { /* a mixture's, once its epoch is walked (making_done) */
        rc = stream_start(st, err);
        if (rc < 0)
            goto fail;
    }
    /* the ring's layout: version 2's, or version 3's field table (fields.h);
     * a version-2 client is refused what it cannot read */
    rc = xform_fields_build(dataset_info(sds), &st->xp, &st->out, st->version,
                            a->depth ? a->depth : auto_depth(d, st, a->batch), a->batch,
                            &st->fx, err);
    if (rc < 0)
        goto fail;
    st->geom = st->fx.g;
    if (a->augment[0]) {
        rc = stream_augment(d, st, a, err);
        if (rc < 0)
            goto fail;
    }
    /* a ragged column is written by one worker per batch (plan.c), and a
     * job holds at most WIRE_JOB_MAX samples */
    if (st->fx.ragged && a->batch > WIRE_JOB_MAX) {
        rc = rf_err_set(err, -EINVAL, "batch=%u: dataset %s has variable-length (ragged or "
                        "bytes) fields, whose batches are made whole by one worker: give "
                        "batch <= %u", a->batch, a->dataset, WIRE_JOB_MAX);
        goto fail;
    }
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
    st->weight_asked = a->weight;
    fq_member_init(&st->fq, grant_weight(d, a, uid), st->cost_ns);
    st->sh.can_share = a->share && !mx && /* share.c compares one dataset's streams */
                    !__builtin_mul_overflow(st->start_epoch, st->bpe, &st->sh.start_k) &&
                    !__builtin_add_overflow(st->sh.start_k, st->start_seq, &st->sh.start_k) &&
                    st->sh.start_k <= UINT64_MAX / 2; /* room for next_g */
    st->id = ++d->sched.next_stream_id;
    st->uid = uid;
    st->conn = conn;
    rc = making_start(d, st, err);
    if (rc < 0)
        goto fail;
    *out = st;
    return 0;

fail:
    stream_free(st);
    return rc;
}

/* Starts producing: called once the client has the ring's fds. */
void sched_start(struct daemon *d, struct stream *st, void *conn)
{
    st->conn = conn;
    sched_fill(d);
    d->sched.ops->dispatch(d);
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
    plan_untarget_queued(d, st);
    share_leave(d, st);
    d->sched.ops->forget_ring(d, st);
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
    /* the struct lives on while a job of it is in flight (plan_job_free frees
     * it with the last); the caller stopped watching its eventfd first */
    st->dead = true;
    if (st->jobs_live == 0)
        stream_free(st);
    /* the group it left (now, or at its kick) planned only when its ring
     * had room too: the others, which may be waiting on that full ring with
     * nothing of theirs queued to bring a release or a DONE, plan now */
    sched_fill(d);
    d->sched.ops->dispatch(d);
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
    uint64_t now = sched_now(d);

    for (struct stream *st = d->sched.streams; st; st = st->next) {
        uint64_t starved = st->starved_ns + (st->starved_since ? now - st->starved_since : 0);
        const char *names[] = {
            "dataset", "name", "rank", "world", "batch", "depth", "batches", "samples",
            "waited_s", "ready", "inflight", "ring_bytes", "locked", "failed",
            "weight", "worker_s", "worker_share", "weight_share", "group", "group_members",
            "shared_batches", "weight_asked", "boxes_dropped", "subset", "subset_samples",
            "uid", "pid", "unit", "shuffle",
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
        snprintf(vals[14], 80, "%u", st->fq.weight);
        snprintf(vals[15], 80, "%.3f", (double)st->fq.worker_ns / 1e9);
        share_text(st->fq.worker_share, vals[16], 80);
        share_text(st->fq.weight_share, vals[17], 80);
        snprintf(vals[18], 80, "%u", st->sh.grp && st->sh.grp->n > 1 ? st->sh.grp->id : 0);
        snprintf(vals[19], 80, "%u", st->sh.grp ? st->sh.grp->n : 1);
        snprintf(vals[20], 80, "%llu", (unsigned long long)st->sh.shared_batches);
        snprintf(vals[21], 80, "%u", st->weight_asked);
        snprintf(vals[22], 80, "%llu", (unsigned long long)st->boxes_dropped);
        stream_subset_text(st, vals[23], 80);
        snprintf(vals[24], 80, "%llu", (unsigned long long)st->n);
        snprintf(vals[25], 80, "%u", st->uid);
        snprintf(vals[26], 80, "%u", st->pid);
        snprintf(vals[27], 80, "%s", st->unit[0] ? st->unit : "-");
        /* one line, "0", "1" or "block:K" (K samples a block): a client's
         * lines must fit CTL_REPLY_LINES_MAX at max-clients */
        if (st->block)
            snprintf(vals[28], 80, "%s:%llu", ctl_shuffle_name(st->a.shuffle),
                     (unsigned long long)st->block);
        else
            snprintf(vals[28], 80, "%s", ctl_shuffle_name(st->a.shuffle));
        for (unsigned i = 0; i < NV; i++) {
            int n = snprintf(buf + *len, cap - *len, "clients.%u.%s %s\n", st->id, names[i],
                             vals[i]);

            if (n < 0 || (size_t)n >= cap - *len)
                return -ENOSPC;
            *len += (size_t)n;
            lines++;
        }
        /* a mixture's samples per source (one line: a client's lines must
         * fit CTL_REPLY_LINES_MAX at max-clients) */
        if (st->mix) {
            char mixed[MIX_SOURCES_MAX * (MIX_NAME_MAX + 22) + 1];
            int n;

            stream_mix_text(st, mixed, sizeof(mixed));
            n = snprintf(buf + *len, cap - *len, "clients.%u.mix %s\n", st->id, mixed);
            if (n < 0 || (size_t)n >= cap - *len)
                return -ENOSPC;
            *len += (size_t)n;
            lines++;
        }
        /* rows delivered per variable-length field (version-3 rings) */
        for (uint32_t k = 0; k < st->fx.n && k < WIRE_FIELDS_MAX; k++) {
            int n;

            if (st->fx.f[k].kind != RING_FIELD_RAGGED)
                continue;
            n = snprintf(buf + *len, cap - *len, "clients.%u.fields.%.*s.rows %llu\n", st->id,
                         (int)RING_FIELD_NAME, st->fx.f[k].name,
                         (unsigned long long)st->rows[k]);
            if (n < 0 || (size_t)n >= cap - *len)
                return -ENOSPC;
            *len += (size_t)n;
            lines++;
        }
    }
    return lines;
}

void stream_check(const struct daemon *d)
{
#if RINGFEED_CHECKS
#define CHECK_FAIL(...) do { log_error("sched_check: " __VA_ARGS__); abort(); } while (0)
    for (const struct stream *st = d->sched.streams; st; st = st->next) {
        if (!(st->released <= st->published && st->published <= st->next_g &&
              st->next_g <= st->released + st->geom.depth))
            CHECK_FAIL("client %u breaks released %llu <= published %llu <= next_g %llu <= "
                       "released + depth %u", st->id, (unsigned long long)st->released,
                       (unsigned long long)st->published, (unsigned long long)st->next_g,
                       st->geom.depth);
        if (st->starved_since && (st->published != st->starved_pub ||   /* S1 (WAITS) */
                                  st->published - st->released > 1))
            CHECK_FAIL("client %u counted as waiting with %llu batches ready", st->id,
                       (unsigned long long)(st->published - st->released));
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
#undef CHECK_FAIL
#else
    (void)d;
#endif
}

const struct stream *sched_client_next(const struct daemon *d, const struct stream *prev,
                                       struct sched_client *out)
{
    const struct stream *st = prev ? prev->next : d->sched.streams;
    uint64_t now = sched_now(d);

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
        .net_waited_ns = st->net_wait_ns + (st->net_wait_since ? now - st->net_wait_since : 0),
        .net_waits = st->net_waits,
        .production_ns = st->production_ns,
        .ready = st->published - st->released,
        .inflight = st->next_g - st->published,
        .ring_bytes = st->geom.total_size,
        .queued = st->fq.nqueued,
        .weight = st->fq.weight,
        .weight_asked = st->weight_asked,
        .worker_ns = st->fq.worker_ns,
        .worker_share = st->fq.worker_share,
        .weight_share = st->fq.weight_share,
        .group = st->sh.grp && st->sh.grp->n > 1 ? st->sh.grp->id : 0,
        .group_members = st->sh.grp && st->sh.grp->n > 1 ? st->sh.grp->n : 0,
        .shared_batches = st->sh.shared_batches,
        .locked = st->locked,
        .failed = st->failed,
        .uid = st->uid,
        .pid = st->pid,
        .unit = st->unit[0] ? st->unit : "-",
    };
    return st;
}

uint32_t sched_network_waiting(const struct daemon *d)
{
    uint32_t n = 0;

    for (const struct stream *st = d->sched.streams; st; st = st->next)
        n += st->net_wait_since != 0 && !stream_ended(st);
    return n;
}

void sched_set_peer(struct stream *st, uint32_t pid, const char *unit)
{
    st->pid = pid;
    snprintf(st->unit, sizeof(st->unit), "%s", unit && unit[0] ? unit : "-");
}
