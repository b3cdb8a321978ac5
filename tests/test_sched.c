/*
 * test_sched.c - the scheduler (daemon/sched.c and its modules: stream.c,
 * fairq.c, share.c, plan.c) alone, driven by synthetic
 * events: no worker processes, no sockets.  The test plays the pool (it
 * takes jobs off the queue itself), the workers (it writes each job's
 * samples the way daemon/worker/worker.c plans them, sets the chunk bit and
 * publishes) and the client (it checks each published batch and releases
 * it through the ring's `released` word and the eventfd).
 *
 * Checked: every published batch holds exactly the sampler's samples, in
 * order, once; released <= published <= next_g <= released + depth after
 * every event (ring.h M1, daemon.h I1) and the queues' count (I2); two
 * streams take turns by work (deficit round robin, fairq.c FAIRNESS); a job
 * orphaned by a dead worker runs again at the front of its stream's queue,
 * carefully, unless its chunk was already written (then the batch is
 * published, not rerun); a careful run that dies twice on the same sample quarantines
 * exactly that sample; a detach with jobs in flight frees everything;
 * the share groups' join, hold and split rules (share.c SHARING, HOLD);
 * weights, and the cap the config puts on them (fairq.c WEIGHTS).
 *
 * Time is the test's own (fake_now, the scheduler's clock in its
 * sched_ops): the timing rules are checked by moving it, never by
 * sleeping or measuring.
 *
 * The pool, the server and the catalogue are fakes below, given to the
 * scheduler as its struct sched_ops, recording what it asked of them.  The
 * scheduler runs on a loop of its own here (its tick stopped), which the
 * test turns when a kick is due: the server watches each stream's eventfd
 * and calls sched_released, and a kick reaches the server only on the
 * loop's next turn.  The loop also lets libuv's thread pool make and
 * free rings (stream.c MAKING).  sched_check() aborts on a broken invariant
 * in builds with RINGFEED_CHECKS (the ASan build), and this test checks the
 * same figures itself in every build.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon.h"
#include "dataset_writer.h"
#include "ring.h"
#include "sampler.h"
#include "tap.h"

#define N 4000

/* ---- fakes: what the scheduler calls in the pool, server and catalogue
 * (struct sched_ops) */

static uint64_t g_quarantined[8];
static unsigned g_nquarantined;
static char g_kicked[256];
static void (*g_kick_hook)(void); /* set: the kick also detaches, as the server's does */

static void fake_dispatch(struct daemon *d)
{
    (void)d; /* the test takes jobs off the queue itself */
}

static void fake_forget_ring(struct daemon *d, struct stream *st)
{
    (void)d;
    (void)st;
}

static void fake_quarantine(struct daemon *d, uint32_t dataset_id, uint64_t index)
{
    (void)d;
    (void)dataset_id;
    if (g_nquarantined < 8)
        g_quarantined[g_nquarantined++] = index;
}

static void fake_kick(void *conn, const char *why)
{
    (void)conn;
    snprintf(g_kicked, sizeof(g_kicked), "%s", why);
    if (g_kick_hook)
        g_kick_hook();
}

static int fake_find_dataset(const struct daemon *d, const char *name)
{
    for (uint32_t i = 0; i < d->ncat; i++)
        if (strcmp(d->cat[i].name, name) == 0)
            return (int)i;
    return -ENOENT;
}

static void fake_dataset_names(const struct daemon *d, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", d->ncat ? d->cat[0].name : "");
}

static char g_failed[256]; /* what the dataset_failed op was told last */

/* what the scheduler told the server when a ring was made, or not */
static unsigned g_made_calls;
static struct stream *g_made;
static int g_made_rc;
static char g_made_msg[512];

static void fake_attach_made(void *conn, struct stream *st, int rc, const struct rf_err *err)
{
    (void)conn;
    g_made_calls++;
    g_made = st;
    g_made_rc = rc;
    snprintf(g_made_msg, sizeof(g_made_msg), "%s", rc < 0 ? err->msg : "");
}

static void fake_dataset_failed(struct daemon *d, uint32_t i, const char *why)
{
    snprintf(g_failed, sizeof(g_failed), "%s", why);
    sched_fail_dataset(d, i, why);
}

static const char *fake_failed_reason(const struct daemon *d, const char *name)
{
    (void)d;
    (void)name;
    return g_failed[0] ? g_failed : NULL;
}

/* The scheduler's clock (sched_ops.now): time moves only when a test says
 * so, so the share hold's and the join wait's timing rules are checked to
 * the nanosecond, whatever the machine's load. */
static uint64_t g_now = 1000000000ull;

static uint64_t fake_now(void)
{
    return g_now;
}

#define MS 1000000ull

/* An on-demand dataset's shards (ahead.h), played: jobs hold a fake pack,
 * a lost shard is counted, and whether the held shards are back is what
 * the test says (g_held_ready, g_held_why). */
static char g_fake_pack;
static unsigned g_lost_calls;
static int g_held_ready;
static const char *g_held_why = "";

static void fake_shards_release(struct daemon *d, struct ahead_hold *h)
{
    (void)d;
    *h = (struct ahead_hold){0};
}

static void fake_shards_lost(struct daemon *d, const struct ahead_hold *h)
{
    (void)d;
    if (h->pack == (struct apack *)&g_fake_pack)
        g_lost_calls++;
}

static int fake_shards_held_ready(struct daemon *d, const struct ahead_hold *h,
                                  struct rf_err *err)
{
    (void)d;
    (void)h;
    return g_held_ready < 0 && g_held_ready != -EAGAIN
               ? rf_err_set(err, g_held_ready, "%s", g_held_why) : g_held_ready;
}

static const struct sched_ops g_ops = {
    .dispatch = fake_dispatch,
    .forget_ring = fake_forget_ring,
    .quarantine = fake_quarantine,
    .dataset_failed = fake_dataset_failed,
    .kick = fake_kick,
    .attach_made = fake_attach_made,
    .find_dataset = fake_find_dataset,
    .failed_reason = fake_failed_reason,
    .dataset_names = fake_dataset_names,
    .now = fake_now,
    .shards_release = fake_shards_release,
    .shards_lost = fake_shards_lost,
    .shards_held_ready = fake_shards_held_ready,
};

/* ---- the pieces the test plays */

struct client {
    struct stream *st;
    struct ctl_attach a;
    struct sched_info si;
    uint8_t *mem;
    uint64_t consumed;   /* batches checked and released */
    int bad;             /* batches that differ from the sampler's */
};

static struct daemon g_d;
static uv_loop_t g_loop;
static struct catalog_entry g_cat[1];
static struct client *g_clients[16]; /* attached, by the ring ids of their streams */
static unsigned g_nclients;

static struct client *client_of_ring(uint32_t id)
{
    for (unsigned i = 0; i < g_nclients; i++)
        if (g_clients[i]->si.id == id)
            return g_clients[i];
    return NULL;
}

static int make_dataset(const char *dir)
{
    static const char *const names[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
    struct dataset_writer_opts o = {
        .kind = DATASET_TENSOR, .dtype = DATASET_DTYPE_U8, .ndim = 2, .shape = {4, 4},
        .codec = 0, .classes = 10, .class_names = names,
    };
    struct dataset_writer *w;
    struct rf_err e;
    uint8_t rec[16];

    if (dataset_writer_create(dir, &o, &w, &e) < 0) {
        tap_diag("create: %s", e.msg);
        return -1;
    }
    for (uint32_t i = 0; i < N; i++) {
        memset(rec, (int)(i & 0xff), sizeof(rec));
        if (dataset_writer_add(w, rec, sizeof(rec), i % 10, &e) < 0) {
            dataset_writer_abort(w);
            return -1;
        }
    }
    return dataset_writer_finish(w, NULL, &e);
}

static struct ring_slot *slot_of(const struct client *c, uint64_t g)
{
    uint64_t stride = ((const struct ring_hdr *)c->mem)->slot_stride;

    return (struct ring_slot *)(c->mem + RING_HDR_SIZE + (g % c->si.depth) * stride);
}

static void sampler_of(const struct client *c, uint64_t epoch, struct sampler *s)
{
    struct sampler_params p = {
        .n = N, .seed = c->a.seed, .epoch = (uint32_t)epoch, .rank = c->a.rank,
        .world = c->a.world, .batch = c->a.batch, .shuffle = c->a.shuffle,
        .drop_last = c->a.drop_last, .drop_last_batch = c->a.drop_last_batch,
    };

    sampler_init(s, &p, NULL);
}

static uint32_t g_next_weight, g_next_epoch, g_next_seq, g_next_seed = 77;
static bool g_next_noshare;
static uint32_t g_next_uid;

static int attach(struct client *c, uint32_t batch, uint32_t depth, uint32_t rank,
                  uint32_t world)
{
    struct rf_err err;

    memset(c, 0, sizeof(*c));
    ctl_attach_defaults(&c->a);
    strcpy(c->a.dataset, "t");
    c->a.batch = batch;
    c->a.depth = depth;
    c->a.rank = rank;
    c->a.world = world;
    c->a.seed = g_next_seed;
    c->a.weight = g_next_weight;
    c->a.epoch = g_next_epoch;
    c->a.seq = g_next_seq;
    c->a.share = !g_next_noshare;
    g_next_weight = g_next_epoch = 0;
    g_next_seq = 0;
    g_next_seed = 77;
    g_next_noshare = false;
    if (sched_attach(&g_d, &c->a, g_next_uid, c, &c->st, &err) < 0) {
        tap_diag("attach: %s", err.msg);
        return -1;
    }
    /* the ring is made on the thread pool: the loop hands it back */
    g_made_calls = 0;
    uv_run(&g_loop, UV_RUN_DEFAULT);
    if (g_made_calls != 1 || g_made != c->st) {
        tap_diag("attach: the ring was not made: %s", g_made_msg);
        return -1;
    }
    sched_info(c->st, &c->si);
    c->mem = mmap(NULL, c->si.size, PROT_READ | PROT_WRITE, MAP_SHARED, c->si.memfd, 0);
    if (c->mem == MAP_FAILED)
        return -1;
    g_clients[g_nclients++] = c;
    c->consumed = 0;
    sched_start(&g_d, c->st, c);
    return 0;
}

/* The invariants, from what the scheduler exposes: the streams' queues
 * add up to the queue's count (I2, fairq.c Q1), an active list exactly
 * when jobs are queued (Q2), and for the client released == what it
 * consumed, released <= published <= next_g <= released + depth (I1,
 * ring.h M1). */
static int g_broken;

static void check_invariants(const struct client *c)
{
    struct sched_client sc;
    uint32_t queued = 0;

    for (const struct stream *st = sched_client_next(&g_d, NULL, &sc); st;
         st = sched_client_next(&g_d, st, &sc))
        queued += sc.queued;
    if (queued != g_d.sched.fq.queued || (g_d.sched.fq.active != NULL) != (queued > 0))
        g_broken++;
    for (const struct stream *st = sched_client_next(&g_d, NULL, &sc); st;
         st = sched_client_next(&g_d, st, &sc)) {
        if (st != c->st)
            continue;
        /* ready = published - released, inflight = next_g - published */
        if (sc.ready + sc.inflight > c->si.depth)
            g_broken++;
    }
}

/* Plays a worker: writes job j's samples as worker.c plans them, sets its
 * chunk bit, publishes when the mask completes.  Returns whether it
 * published; with report, tells the scheduler it is done. */
static int work(struct client *c, struct job *j, int report)
{
    struct wire_job m;
    struct wire_done done = {.type = WIRE_DONE};
    struct ring_slot *s;
    struct ring_sample *rs;
    struct sampler smp;
    uint64_t bit, old, all;

    sched_job_message(j, &m);
    s = slot_of(c, m.stream_seq);
    rs = ring_samples(s);
    sampler_of(c, m.epoch, &smp);
    for (uint32_t k = 0; k < m.count; k++) {
        rs[m.first + k].index = sampler_sample(&smp, m.seq, m.first + k);
        rs[m.first + k].label = (int32_t)(rs[m.first + k].index % 10);
    }
    bit = 1ull << m.chunk;
    old = atomic_fetch_or(&s->chunks_done, bit);
    all = s->chunks >= 64 ? ~0ull : (1ull << s->chunks) - 1;
    done.published = (old | bit) == all && old != all;
    if (done.published)
        atomic_store(&s->ready, ring_ready_word(m.stream_seq));
    done.job_id = m.job_id;
    if (report)
        sched_job_done(&g_d, j, &done, 0);
    return done.published;
}

/* A client asleep on a slot's ready word (ring_futex_wait, 10 s at most). */
struct waiter {
    _Atomic uint32_t *word;
    uint32_t seen;
    _Atomic int asleep;
    int rc;
};

static void *sleeper(void *arg)
{
    struct waiter *w = arg;

    atomic_store(&w->asleep, 1);
    w->rc = ring_futex_wait(w->word, w->seen, 10000000000ll);
    return NULL;
}

/* Plays a worker that publishes job j's batch and dies before its wake:
 * writes the chunk, sets the bit and ready, and wakes nobody. */
static void work_no_wake(struct client *c, struct job *j)
{
    struct wire_job m;
    struct ring_slot *s;
    struct sampler smp;

    sched_job_message(j, &m);
    s = slot_of(c, m.stream_seq);
    sampler_of(c, m.epoch, &smp);
    for (uint32_t k = 0; k < m.count; k++) {
        ring_samples(s)[m.first + k].index = sampler_sample(&smp, m.seq, m.first + k);
        ring_samples(s)[m.first + k].label = (int32_t)(ring_samples(s)[m.first + k].index % 10);
    }
    atomic_fetch_or(&s->chunks_done, 1ull << m.chunk);
    atomic_store(&s->ready, ring_ready_word(m.stream_seq));
}

/* Plays the client: checks the published batches it has not consumed, in
 * order, against the sampler, and releases them, `most` at most. */
static void consume_some(struct client *c, uint64_t most)
{
    struct ring_hdr *h = (struct ring_hdr *)c->mem;

    for (uint64_t n = 0; n < most; n++) {
        struct ring_slot *s = slot_of(c, c->consumed);
        struct sampler smp;
        uint64_t want[2048], one = 1;
        uint32_t count;

        if (atomic_load(&s->ready) != ring_ready_word(c->consumed))
            return;
        sampler_of(c, s->epoch, &smp);
        count = sampler_batch(&smp, s->seq, want);
        if (s->stream_seq != c->consumed || s->count != count)
            c->bad++;
        for (uint32_t k = 0; k < s->count && k < count; k++)
            if (ring_samples(s)[k].index != want[k])
                c->bad++;
        c->consumed++;
        atomic_store(&h->released, c->consumed);
        if (write(c->si.efd, &one, sizeof(one)) != sizeof(one))
            c->bad++;
        sched_released(&g_d, c->st);
        check_invariants(c);
    }
}

static void consume(struct client *c)
{
    consume_some(c, UINT64_MAX);
}

/* Runs the queue dry, consuming as batches appear, for `batches` batches. */
static void run(struct client *c, uint64_t batches)
{
    struct job *j;

    while (c->consumed < batches && (j = sched_dequeue(&g_d))) {
        j->worker = 0;
        work(c, j, 1);
        check_invariants(c);
        consume(c);
    }
}

/* Ends the queued jobs of streams already detached: sched_job_orphaned
 * frees a job no live ring is left for. */
static void drop_all(void)
{
    struct job *j;

    while ((j = sched_dequeue(&g_d)))
        sched_job_orphaned(&g_d, j);
}

static void forget(struct client *c)
{
    for (unsigned i = 0; i < g_nclients; i++)
        if (g_clients[i] == c) {
            g_clients[i] = g_clients[--g_nclients];
            break;
        }
}

static void detach(struct client *c)
{
    forget(c);
    sched_detach(&g_d, c->st, "test done", 0);
    munmap(c->mem, c->si.size);
    uv_run(&g_loop, UV_RUN_DEFAULT); /* the ring's end, on the thread pool */
}

/* The last epoch there is (the sampler keys epochs by 32 bits): a stream
 * started at its last batch gets that batch, and the ring stays live until
 * the client has released it; only then does the stream end, by name.  It
 * used to fail as soon as the batch was published: a client that attached
 * there could find its new ring failed before it had read anything. */
static void last_epoch(void)
{
    struct client c;
    struct ring_hdr *h;
    struct job *j;

    g_next_epoch = UINT32_MAX;
    g_next_seq = 62; /* 4000 samples in batches of 64: its last batch */
    if (attach(&c, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    h = (struct ring_hdr *)c.mem;
    TAP_IS_INT(g_d.sched.fq.queued, 1, "the last epoch's last batch: one batch planned, no more");
    while ((j = sched_dequeue(&g_d))) {
        j->worker = 0;
        work(&c, j, 1);
    }
    sched_fill(&g_d); /* as another client's start, or the tick, plans for every stream */
    TAP_IS_INT(atomic_load(&h->state), RING_LIVE, "  published, not yet read: the ring is live");
    consume(&c);
    TAP_IS_INT(c.consumed, 1, "  the client reads it");
    TAP_IS_INT(atomic_load(&h->state), RING_FAILED, "  once it is released the stream ends");
    tap_ok(strstr(h->reason, "epoch 4294967296") != NULL, "  saying why (%s)", h->reason);
    detach(&c);
}

static void straight(void)
{
    struct client c;

    if (attach(&c, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    TAP_IS_INT(c.si.bpe, (N + 63) / 64, "batches per epoch");
    TAP_IS_INT(g_d.sched.fq.queued, 4, "depth 4: four batches planned at once (raw: a job each)");
    run(&c, 3 * c.si.bpe);
    TAP_IS_INT(c.consumed, 3 * c.si.bpe, "three epochs published and released");
    TAP_IS_INT(c.bad, 0, "every batch holds exactly the sampler's samples");
    TAP_IS_INT(g_broken, 0, "invariants hold after every event");
    detach(&c);
    TAP_IS_INT(g_d.sched.nstreams, 0, "detached");
}

static void ranks_and_chunks(void)
{
    struct client c;

    /* raw jobs hold >= 500 us of work at 0.9 us a sample (plan.c
     * JOB_WORK_NS): 555, 555 and 390 samples for a batch of 1500; rank 1 of 3 */
    if (attach(&c, 1500, 3, 1, 3) < 0)
        return (void)tap_ok(0, "attach");
    TAP_IS_INT(g_d.sched.fq.queued, 3 * 3, "a 1500-sample raw batch is three jobs");
    {
        struct job *j = sched_dequeue(&g_d);

        TAP_IS_INT(j->count, 555, "  of 555 samples first");
        sched_enqueue(&g_d, j, true); /* back where it was */
    }
    run(&c, 2 * c.si.bpe);
    TAP_IS_INT(c.bad, 0, "rank 1 of 3, two chunks a batch: the sampler's samples");
    detach(&c);
}

static void crashes(void)
{
    struct client c;
    struct job *j, *k;

    if (attach(&c, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    /* a worker dies holding a job: it runs again first, carefully */
    j = sched_dequeue(&g_d);
    j->worker = 0;
    sched_job_orphaned(&g_d, j);
    TAP_OK(j->crashes == 1 && j->worker == -1, "orphaned job queued again");
    k = sched_dequeue(&g_d);
    TAP_OK(k == j, "  at the front");
    sched_enqueue(&g_d, k, true);
    {
        struct wire_job m;

        sched_job_message(j, &m);
        TAP_IS_INT(m.careful, 1, "  and runs carefully");
    }
    /* a worker dies after writing its chunk: published, not run again */
    j = sched_dequeue(&g_d);
    j->worker = 0;
    TAP_OK(work(&c, j, 0), "chunk written and published before the death");
    {
        uint32_t before = g_d.sched.fq.queued;

        sched_job_orphaned(&g_d, j);
        TAP_IS_INT(g_d.sched.fq.queued, before, "a written chunk is not queued again");
    }
    consume(&c);
    TAP_IS_INT(c.consumed, 1, "  its batch reaches the client once");

    /* a worker dies between storing ready and its FUTEX_WAKE, the client
     * asleep on the slot: the orphan's handling wakes it (a kill storm left
     * a reader asleep for good with its batch ready) */
    {
        struct waiter wt = { .word = &slot_of(&c, c.consumed)->ready };
        pthread_t th;

        j = sched_dequeue(&g_d);
        j->worker = 0;
        wt.seen = atomic_load(wt.word);
        pthread_create(&th, NULL, sleeper, &wt);
        while (!atomic_load(&wt.asleep))
            usleep(1000);
        usleep(20000); /* in FUTEX_WAIT by now */
        work_no_wake(&c, j);
        sched_job_orphaned(&g_d, j);
        pthread_join(th, NULL);
        tap_ok(wt.rc == 0, "a worker dead between ready and its wake: the client is woken "
               "(futex wait returned %d)", wt.rc);
        consume(&c);
        TAP_IS_INT(c.consumed, 2, "  and its batch reaches it");
    }

    /* the same sample kills a careful run twice: quarantined, that sample */
    j = sched_dequeue(&g_d);
    j->worker = 0;
    j->progress = -1;
    sched_job_orphaned(&g_d, j);          /* first death: now careful */
    j = sched_dequeue(&g_d);
    j->worker = 0;
    j->progress = 5;
    sched_job_orphaned(&g_d, j);          /* careful run dies at sample 5 */
    j = sched_dequeue(&g_d);
    j->worker = 0;
    j->progress = 5;
    g_nquarantined = 0;
    sched_job_orphaned(&g_d, j);          /* and again at sample 5 */
    {
        struct sampler smp;
        struct wire_job m;

        sched_job_message(j, &m);
        sampler_of(&c, m.epoch, &smp);
        TAP_OK(g_nquarantined == 1 &&
                   g_quarantined[0] == sampler_sample(&smp, m.seq, m.first + 5),
               "twice at one sample: exactly that sample quarantined");
    }
    run(&c, 2 * c.si.bpe);
    TAP_IS_INT(c.bad, 0, "after the crashes every batch is still the sampler's");
    TAP_IS_INT(g_broken, 0, "  and the invariants held throughout");

    /* detach with jobs in flight: they are freed when they come back */
    j = sched_dequeue(&g_d);
    k = sched_dequeue(&g_d);
    j->worker = k->worker = 0;
    forget(&c);
    sched_detach(&g_d, c.st, "gone", 0);
    work(&c, j, 1);
    sched_job_orphaned(&g_d, k);
    TAP_IS_INT(g_d.sched.fq.queued, 0, "a detached stream's jobs leave the queue");
    munmap(c.mem, c.si.size);
    TAP_IS_INT(g_d.sched.nstreams, 0, "detached with jobs in flight");
}

/* Both slots' jobs of a 2-deep ring published by workers that died before
 * their DONE: with no job of the stream left, the daemon must ask for the
 * client's eventfd (ring.h M4), or nothing brings it back to the client's
 * releases (a kill storm left a reader waiting for good). */
static void orphans_want_release(void)
{
    struct client c;
    struct ring_hdr *h;
    struct job *j1, *j2;

    if (attach(&c, 64, 2, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    h = (struct ring_hdr *)c.mem;
    j1 = sched_dequeue(&g_d);
    j2 = sched_dequeue(&g_d);
    j1->worker = j2->worker = 0;
    work(&c, j1, 0);
    work(&c, j2, 0);
    sched_job_orphaned(&g_d, j1);
    sched_job_orphaned(&g_d, j2);
    TAP_IS_INT(atomic_load(&h->want_release), 1,
               "both batches published by dead workers, no job left: the eventfd is asked for");
    consume(&c);
    TAP_IS_INT(c.consumed, 2, "  the client reads both");
    TAP_IS_INT(g_d.sched.fq.queued, 2, "  and its releases plan the next two");
    detach(&c);
}

/* Writes the client's eventfd with a valid release counter: a kicked
 * stream must not read it (nothing is planned for it). */
static bool stream_take_release_refused(struct client *c)
{
    uint32_t before = g_d.sched.fq.queued;

    atomic_store(&((struct ring_hdr *)c->mem)->released, 0);
    sched_released(&g_d, c->st);
    return g_d.sched.fq.queued == before;
}

static void hostile_release(void)
{
    struct client c;
    struct ring_hdr *h;
    uint64_t one = 1;

    if (attach(&c, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    h = (struct ring_hdr *)c.mem;
    g_kicked[0] = '\0';
    atomic_store(&h->released, 1000); /* more than was ever published */
    if (write(c.si.efd, &one, sizeof(one)) != sizeof(one))
        tap_diag("eventfd write failed");
    sched_released(&g_d, c.st);
    TAP_OK(g_kicked[0] == '\0', "a forged release counter's kick waits for the loop's next turn");
    TAP_IS_INT(g_d.sched.fq.queued, 0, "  and nothing stays queued for the client meanwhile");
    TAP_OK(stream_take_release_refused(&c), "  nor is its counter read again");
    uv_run(g_d.loop, UV_RUN_NOWAIT);
    TAP_OK(strstr(g_kicked, "release counter 1000") != NULL,
           "  the loop's next turn kicks the client, saying why");
    detach(&c);
}

/* The server's kick closes the connection, whose detach frees a stream no
 * job holds.  Called inside sched_job_done it freed the stream under the
 * scheduler's feet (a use after free under ASan in test_daemon's hostile
 * client, a fresh-clone CI run); the kick now waits for the loop's next
 * turn, outside any scheduler call, and detaches there. */
static struct client *g_kick_client;

static void kick_detaches(void)
{
    struct client *c = g_kick_client;

    g_kick_client = NULL;
    g_kick_hook = NULL;
    forget(c);
    sched_detach(&g_d, c->st, "kicked", -EPROTO);
    munmap(c->mem, c->si.size);
    c->st = NULL;
}

static void kicked_in_job_done(void)
{
    struct client c;
    struct job *j;

    if (attach(&c, 64, 2, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    j = sched_dequeue(&g_d);
    j->worker = 0;
    g_kicked[0] = '\0';
    /* the client forges its release counter while the job runs */
    atomic_store(&((struct ring_hdr *)c.mem)->released, 1000);
    g_kick_client = &c;
    g_kick_hook = kick_detaches;
    work(&c, j, 1); /* DONE: the release check reads 1000 and kicks */
    TAP_OK(g_kicked[0] == '\0' && c.st != NULL,
           "a kick from the release check in a job's DONE is not made inside the DONE");
    uv_run(g_d.loop, UV_RUN_NOWAIT);
    TAP_OK(strstr(g_kicked, "release counter 1000") != NULL && c.st == NULL,
           "  the loop's next turn kicks and detaches the client, and the scheduler goes on "
           "without its stream");
    while ((j = sched_dequeue(&g_d)))
        sched_job_orphaned(&g_d, j); /* its other job: the stream is gone */
    TAP_IS_INT(g_d.sched.nstreams, 0, "  no stream left");
}

/* A worker found a shard of the job's on-demand dataset gone from the node
 * cache (WIRE_SHARD_LOST): the job is parked, nothing of it counted, until
 * the shard is back; then it runs first and its batch arrives whole.  A
 * fetch that fails fails the stream with its error; a stream that detaches
 * takes its parked job with it; a job that loses its shards again and again
 * fails its stream with the worker's reason (PLAN_LOST_MAX).  A CI run
 * failed a stream when the cache folder was removed under the daemon. */
static struct job *lose(struct job *j, const char *why)
{
    struct wire_done done = {.type = WIRE_DONE, .status = WIRE_SHARD_LOST};

    j->hold.pack = (struct apack *)&g_fake_pack;
    j->hold.n = 1;
    done.job_id = j->job_id;
    snprintf(done.reason, sizeof(done.reason), "%s", why);
    sched_job_done(&g_d, j, &done, 0);
    return j;
}

static void lost_shards(void)
{
    struct client c, c2;
    struct job *j, *k;
    uint32_t queued;

    if (attach(&c, 64, 2, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    g_lost_calls = 0;
    g_held_ready = -EAGAIN;
    j = sched_dequeue(&g_d);
    j->worker = 0;
    queued = g_d.sched.fq.queued;
    lose(j, "shard-00001.rfs: cannot open");
    TAP_OK(g_d.sched.parked == j && g_lost_calls == 1 && g_d.sched.fq.queued == queued &&
           !((struct ring_hdr *)c.mem)->reason[0],
           "a job whose shard left the cache is parked, the shard looked for again");
    sched_fill(&g_d);
    TAP_OK(g_d.sched.parked == j, "  and stays parked while the shard is away");
    g_held_ready = 0;
    sched_fill(&g_d);
    k = sched_dequeue(&g_d);
    TAP_OK(g_d.sched.parked == NULL && k == j, "  once it is back, the job runs first");
    k->worker = 0;
    work(&c, k, 1);
    run(&c, 4);
    TAP_IS_INT(c.bad + g_broken, 0, "  and every batch arrives in order, whole");
    tap_ok(c.consumed >= 4, "  (%llu batches)", (unsigned long long)c.consumed);

    /* the fetch fails: the stream fails with its error */
    g_held_ready = -EAGAIN;
    j = sched_dequeue(&g_d);
    j->worker = 0;
    lose(j, "shard-00002.rfs: cannot open");
    g_held_ready = -EIO;
    g_held_why = "http://127.0.0.1/fm/shard-00002.rfs: 404 (no such object)";
    sched_fill(&g_d);
    tap_ok(g_d.sched.parked == NULL &&
           strstr(((struct ring_hdr *)c.mem)->reason, "404 (no such object)") != NULL,
           "a parked job whose shard cannot be fetched fails its stream with the fetch's "
           "error: %s", ((struct ring_hdr *)c.mem)->reason);
    sched_run_kicks(&g_d);
    detach(&c);
    drop_all();

    /* a stream detaches while its job is parked: the job goes with it */
    if (attach(&c2, 64, 2, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    g_held_ready = -EAGAIN;
    j = sched_dequeue(&g_d);
    j->worker = 0;
    lose(j, "shard-00003.rfs: cannot open");
    detach(&c2);
    drop_all();
    TAP_OK(g_d.sched.parked == NULL && g_d.sched.nstreams == 0,
           "a client that detaches while its job is parked takes the job with it");

    /* a cache that loses the shard every time: the stream fails, named */
    if (attach(&c, 64, 2, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    g_held_ready = 0;
    j = sched_dequeue(&g_d);
    for (unsigned n = 0; n < 9 && j; n++) {
        j->worker = 0;
        lose(j, "shard-00004.rfs: cannot open: No such file or directory");
        sched_fill(&g_d);
        j = sched_dequeue(&g_d);
    }
    tap_ok(strstr(((struct ring_hdr *)c.mem)->reason, "shard-00004.rfs: cannot open") != NULL,
           "a job that loses its shard %d times fails its stream with the worker's reason",
           9);
    if (j)
        sched_enqueue(&g_d, j, true);
    sched_run_kicks(&g_d);
    detach(&c);
    drop_all();
    g_held_ready = 0;
}

/*
 * Two streams with jobs queued take turns by work (fairq.c, FAIRNESS):
 * big jobs (1500-sample raw batches: 555, 555 and 390 samples, some 500 us
 * each by cost_ns; an epoch's last batch of 1000 is 555 and 445) against
 * small ones (64-sample batches, 58 us), the big stream attached and queued
 * first.  While both have jobs queued, the work handed to each (a job
 * handed out twice counts twice) never differs by a quantum and the
 * largest job; each stream's jobs come out in its own order, and a job put
 * back at the front (its worker died) comes next for its stream without
 * reordering either.  A single FIFO fails this: the big stream's 22 jobs
 * would all go first.
 */
#define FAIR_MAX_JOBS 128
#define FAIR_BIG_JOBS 22 /* depth 8 of batches 1500, 1500, 1000, ...: 3 + 3 + 2 + 3 + ... */
#define FAIR_BIG_NS (11000 * 900) /* their samples, by raw's cost */

static int64_t job_ns(const struct job *j)
{
    return (int64_t)j->count * 900; /* raw's cost_ns (daemon/worker/transform.c) */
}

static void fair_turns(void)
{
    struct client big, small;
    struct job *held[FAIR_MAX_JOBS];
    uint64_t last_id[2] = {0, 0};
    int64_t work[2] = {0, 0}, gap = 0, bound = SCHED_QUANTUM_NS + 555 * 900;
    unsigned nheld = 0, turns = 0, out_of_order = 0, small_before_big_done = 0;
    int prev = -1, requeued = 0, requeue_next = 0;
    struct job *again = NULL;

    if (attach(&big, 1500, 8, 0, 1) < 0 || attach(&small, 64, 64, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    TAP_IS_INT(g_d.sched.fq.queued, FAIR_BIG_JOBS + 64, "two streams queued: 22 big jobs, 64 small");
    TAP_IS_INT(g_d.sched.fq.nactive, 2, "  both on the active list");
    while (nheld < FAIR_MAX_JOBS) {
        struct job *j = sched_dequeue(&g_d);
        int who;

        if (!j)
            break;
        who = j->st == small.st;
        held[nheld++] = j;
        check_invariants(&big);
        if (again && who == 0) {
            /* the put-back job must come next for its stream */
            requeue_next = j == again;
            out_of_order += j != again;
            again = NULL;
        } else if (j->job_id <= last_id[who]) {
            out_of_order++;
        }
        if (j->job_id > last_id[who])
            last_id[who] = j->job_id;
        if (who != prev)
            turns++;
        prev = who;
        work[who] += job_ns(j);
        if (who == 1 && work[0] < FAIR_BIG_NS)
            small_before_big_done++;
        /* both still queued: the shares stay within a quantum and a job */
        if (g_d.sched.fq.nactive == 2) {
            int64_t d = work[0] - work[1];

            if ((d < 0 ? -d : d) > gap)
                gap = d < 0 ? -d : d;
        }
        /* halfway, a worker "dies" with the big stream's latest job */
        if (!requeued && who == 0 && work[0] > FAIR_BIG_NS / 2) {
            nheld--;
            j->worker = 0;
            sched_job_orphaned(&g_d, j);
            again = j;
            requeued = 1;
        }
    }
    TAP_IS_INT(nheld, FAIR_BIG_JOBS + 64, "every job handed out, the put-back one twice");
    tap_ok(gap < bound, "while both wait, their work differs by less than a quantum and a "
           "job (largest gap %lld ns, bound %lld)", (long long)gap, (long long)bound);
    tap_ok(small_before_big_done > 0 && turns > 8,
           "  the small stream is served before the big one's queue is done (%u turns)", turns);
    TAP_OK(requeued && requeue_next, "a job put back at the front comes next for its stream");
    TAP_IS_INT(out_of_order, 0, "  and each stream's jobs come out in its own order");
    TAP_IS_INT(g_d.sched.fq.nactive, 0, "queues drained: no stream on the active list");
    TAP_IS_INT(g_broken, 0, "invariants hold throughout");
    /* detach with every job in flight; they are freed as they come back */
    detach(&big);
    detach(&small);
    for (unsigned i = 0; i < nheld; i++)
        sched_job_orphaned(&g_d, held[i]);
    TAP_IS_INT(g_d.sched.nstreams, 0, "both detached, their jobs freed");
}


/* Plays a worker on a job that may name several rings (share.c SHARING):
 * writes the chunk into each ring whose client is still attached, or only
 * into target `only` when it is >= 0; sets each chunk bit and publishes
 * the slots it completes.  With report, tells the scheduler it is done. */
/* The ring whose jobs report g_cost_factor times the worker time of the
 * others (MEASURED in fairq.c); 0: none. */
static uint32_t g_cost_ring;
static uint64_t g_cost_factor = 1;

static void work_multi(struct job *j, int only, int report)
{
    struct wire_job m;
    struct wire_done done = {.type = WIRE_DONE};

    sched_job_message(j, &m);
    for (uint32_t t = 0; t < m.ntargets; t++) {
        uint32_t id = t ? m.more[t - 1].ring_id : m.ring_id;
        uint64_t g = t ? m.more[t - 1].stream_seq : m.stream_seq;
        struct client *c = client_of_ring(id);
        struct ring_slot *s;
        struct sampler smp;
        uint64_t bit, old, all;

        if (!c || (only >= 0 && (uint32_t)only != t))
            continue;
        s = slot_of(c, g);
        sampler_of(c, m.epoch, &smp);
        for (uint32_t k = 0; k < m.count; k++) {
            ring_samples(s)[m.first + k].index = sampler_sample(&smp, m.seq, m.first + k);
            ring_samples(s)[m.first + k].label =
                (int32_t)(ring_samples(s)[m.first + k].index % 10);
        }
        bit = 1ull << m.chunk;
        old = atomic_fetch_or(&s->chunks_done, bit);
        all = s->chunks >= 64 ? ~0ull : (1ull << s->chunks) - 1;
        if ((old | bit) == all && old != all) {
            atomic_store(&s->ready, ring_ready_word(g));
            done.published = 1;
        }
    }
    done.job_id = m.job_id;
    if (report)
        sched_job_done(&g_d, j, &done, (uint64_t)m.count * 1000 *
                                       (m.ring_id == g_cost_ring ? g_cost_factor : 1));
}

/* Runs jobs, consuming the clients in cs[] (the others do not read), until
 * the queue is dry or `jobs` jobs ran; returns the jobs run. */
static unsigned run_multi(struct client *const *cs, unsigned n, unsigned jobs)
{
    unsigned ran = 0;
    struct job *j;

    while (ran < jobs && (j = sched_dequeue(&g_d))) {
        j->worker = 0;
        work_multi(j, -1, 1);
        ran++;
        for (unsigned i = 0; i < n; i++) {
            check_invariants(cs[i]);
            consume(cs[i]);
        }
    }
    return ran;
}

static void client_figures(const struct client *c, struct sched_client *out)
{
    memset(out, 0, sizeof(*out));
    for (const struct stream *st = sched_client_next(&g_d, NULL, out); st;
         st = sched_client_next(&g_d, st, out))
        if (st == c->st)
            return;
    memset(out, 0, sizeof(*out));
}

/*
 * SHARING (share.c): identical streams share one producer and each still
 * gets exactly its solo stream: consume() checks every batch against the
 * sampler.  Covered: two attached together (the second joins the first's
 * planned batches), a third joining at the group's place mid-epoch, a
 * worker dying after writing one ring of two, a member detaching with
 * jobs queued and in flight, a member that stops reading (split off after
 * SHARE_HOLD_NS, the others go on), share=0, and another seed (no group).
 */
static void shared(void)
{
    struct client a, b, c, x;
    struct client *ab[] = {&a, &b}, *abc[] = {&a, &b, &c}, *ac[] = {&a, &c}, *aa[] = {&a};
    struct sched_client fa, fb, fc;
    struct job *j;
    uint64_t shared0 = g_d.sched.share.shared_batches, c_start;

    if (attach(&a, 64, 4, 0, 1) < 0 || attach(&b, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    TAP_IS_INT(g_d.sched.fq.queued, 4, "a second identical stream joins the first's 4 planned "
               "batches: 4 jobs queued, not 8");
    j = sched_dequeue(&g_d);
    TAP_IS_INT(j ? j->ntargets : 0, 2, "  each job names both rings");
    sched_enqueue(&g_d, j, true);
    run_multi(ab, 2, 3 * (unsigned)a.si.bpe / 2);
    tap_ok(a.consumed > a.si.bpe && b.consumed == a.consumed,
           "both read past an epoch at one pace (%llu, %llu batches)",
           (unsigned long long)a.consumed, (unsigned long long)b.consumed);
    TAP_IS_INT(a.bad + b.bad, 0, "  every batch of both is the sampler's");
    client_figures(&b, &fb);
    tap_ok(fb.group != 0 && fb.group_members == 2 && fb.shared_batches >= b.consumed,
           "  STATS: one group of 2, every batch shared (%llu)",
           (unsigned long long)fb.shared_batches);
    tap_ok(g_d.sched.share.shared_batches - shared0 >= b.consumed, "  the daemon counts them");

    /* a third asks for the group's next place: it joins there */
    c_start = a.consumed + 4; /* a's ring is full: the group plans a.consumed + 4 next */
    g_next_epoch = (uint32_t)(c_start / a.si.bpe);
    g_next_seq = c_start % a.si.bpe;
    if (attach(&c, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    client_figures(&c, &fc);
    TAP_IS_INT(fc.group_members, 3, "a client asking for the group's next place joins it");
    run_multi(abc, 3, 40);
    TAP_IS_INT(a.bad + b.bad + c.bad, 0, "  three members, every batch the sampler's");

    /* a worker dies having written one ring of three: the job runs again
     * for the other two only, from its new home */
    j = sched_dequeue(&g_d);
    j->worker = 0;
    work_multi(j, 0, 0);
    sched_job_orphaned(&g_d, j);
    tap_ok(j->ntargets == 2 && j->st != a.st,
           "a job whose worker died after one ring runs again for the others (%u rings)",
           j->ntargets);
    run_multi(abc, 3, 40);
    TAP_IS_INT(a.bad + b.bad + c.bad, 0, "  and no batch is written twice or missed");

    /* b leaves with jobs queued and one in flight */
    j = sched_dequeue(&g_d);
    j->worker = 0;
    detach(&b);
    work_multi(j, -1, 1);
    tap_ok(g_d.sched.fq.queued > 0, "a member detaches with jobs queued");
    run_multi(ac, 2, 40);
    TAP_IS_INT(a.bad + c.bad, 0, "  the others go on, their batches the sampler's");
    client_figures(&a, &fa);
    TAP_IS_INT(fa.group_members, 2, "  a group of the two left");
    TAP_IS_INT(g_broken, 0, "  invariants held");

    /* c stops reading: once its full ring has held a for SHARE_HOLD_NS, it
     * is split off and a goes on alone */
    run_multi(aa, 1, 200);
    tap_ok(a.consumed <= c_start + c.consumed + 4, "a member that stops reading holds the "
           "group within its depth (places %llu and %llu)", (unsigned long long)a.consumed,
           (unsigned long long)(c_start + c.consumed));
    sched_fill(&g_d);
    g_now += 1100 * MS; /* the tick's look, 1.1 s on */
    sched_fill(&g_d);
    client_figures(&c, &fc);
    TAP_IS_INT(fc.group, 0, "  after 1.1 s it is split off");
    {
        uint64_t before = a.consumed;

        run_multi(aa, 1, 100);
        tap_ok(a.consumed > before + 20, "  and the other reads on (%llu more batches)",
               (unsigned long long)(a.consumed - before));
    }
    run_multi(ac, 2, 300);
    TAP_IS_INT(a.bad + c.bad, 0, "  both still get exactly their streams");
    TAP_IS_INT(g_d.sched.share.share_splits, 1, "  one split counted");
    detach(&c);

    /* a client asking for a place two batches ahead of the group waits for
     * it (planning nothing), then joins */
    {
        struct client y;
        struct client *ay[] = {&a, &y};
        uint32_t queued = g_d.sched.fq.queued;
        uint64_t y_start;

        client_figures(&a, &fa);
        y_start = a.consumed + fa.ready + fa.inflight + 2;
        g_next_epoch = (uint32_t)(y_start / a.si.bpe);
        g_next_seq = y_start % a.si.bpe;
        if (attach(&y, 64, 4, 0, 1) < 0)
            return (void)tap_ok(0, "attach");
        TAP_IS_INT(g_d.sched.fq.queued, queued, "a client ahead of the group plans nothing yet");
        run_multi(ay, 2, 40);
        client_figures(&y, &fc);
        tap_ok(fc.group_members == 2 && y.consumed > 10,
               "  it joins when the group gets there (%u members, %llu batches)",
               fc.group_members, (unsigned long long)y.consumed);
        TAP_IS_INT(a.bad + y.bad, 0, "  both exactly their streams");
        detach(&y);
    }

    /* share=0, and a different seed: never grouped */
    g_next_noshare = true;
    if (attach(&x, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    client_figures(&x, &fc);
    TAP_IS_INT(fc.group_members, 0, "share=0 decodes its own");
    detach(&x);
    g_next_seed = 78;
    if (attach(&x, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    client_figures(&x, &fc);
    TAP_IS_INT(fc.group_members, 0, "another seed is another stream: no group");
    detach(&x);
    detach(&a);
    while ((j = sched_dequeue(&g_d)))
        sched_job_orphaned(&g_d, j);
    TAP_IS_INT(g_d.sched.nstreams, 0, "all detached");
    tap_ok(g_d.sched.share.groups == NULL, "  no group left");
}

/*
 * SHARING's catch-up: a second identical stream attaching once the first's
 * planned batches are all begun decodes those alone, at once, and shares
 * from the group's next place; both get exactly their streams.
 */
static void catch_up(void)
{
    struct client a, b;
    struct client *ab[] = {&a, &b};
    struct job *held[8];
    struct sched_client fb;
    unsigned n = 0;
    uint32_t queued;

    if (attach(&a, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    while (n < 4 && (held[n] = sched_dequeue(&g_d)))   /* every planned batch begun */
        held[n++]->worker = 0;
    queued = g_d.sched.fq.queued;
    if (attach(&b, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    client_figures(&b, &fb);
    tap_ok(fb.group_members == 2 && g_d.sched.fq.queued == queued + 4,
           "a stream behind by 4 begun batches plans them alone and joins (%u members, %u "
           "jobs queued)", fb.group_members, g_d.sched.fq.queued);
    for (unsigned i = 0; i < n; i++)
        work_multi(held[i], -1, 1);
    run_multi(ab, 2, 200);
    tap_ok(a.consumed > 20 && b.consumed > 20 && a.bad + b.bad == 0,
           "  both read on, exactly their streams (%llu, %llu batches)",
           (unsigned long long)a.consumed, (unsigned long long)b.consumed);
    client_figures(&b, &fb);
    tap_ok(fb.shared_batches + 4 >= b.consumed, "  every batch after the first 4 shared");
    detach(&a);
    detach(&b);
    drop_all();
}

/* Drains the queue: every job run and its batch published, nobody reads. */
static void run_all(void)
{
    struct job *j;

    while ((j = sched_dequeue(&g_d))) {
        j->worker = 0;
        work_multi(j, -1, 1);
    }
}

/*
 * HOLD (share.c SHARING): a member that reads one batch every 0.9 s while
 * the other reads as fast as batches come holds the group back from the
 * moment the group first waits on it; its releases, each letting the
 * group plan one batch, do not restart that, so it is split off at the
 * first look SHARE_HOLD_NS (1 s) or more after, here its second release
 * (1.8 s), and the other reads on alone.  (The rule that timed the hold
 * from the last release never split it: every release began it again.)
 */
static void hold_slow_member(void)
{
    struct client a, s;
    struct client *aa[] = {&a}, *as[] = {&a, &s};
    struct sched_client fs;
    uint64_t t0, split_at = 0, splits0 = g_d.sched.share.share_splits;

    if (attach(&a, 64, 4, 0, 1) < 0 || attach(&s, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    client_figures(&s, &fs);
    TAP_IS_INT(fs.group_members, 2, "a fast and a slow reader share a group");
    run_multi(aa, 1, 100); /* a reads its ring; s reads nothing: the group waits on s */
    t0 = g_now;
    for (int round = 1; round <= 30 && !split_at; round++) {
        g_now += 900 * MS;
        consume_some(&s, 1);   /* its one batch of the 0.9 s */
        run_multi(aa, 1, 100); /* the batch that let the group plan; a reads it at once */
        client_figures(&s, &fs);
        if (fs.group == 0)
            split_at = g_now;
    }
    tap_ok(split_at && split_at - t0 <= 2000 * MS,
           "a member reading a batch every 0.9 s is split off within 2 s of holding the "
           "group (%s %.1f s)", split_at ? "after" : "not split in",
           (double)((split_at ? split_at : g_now) - t0) / 1e9);
    TAP_IS_INT(g_d.sched.share.share_splits - splits0, split_at ? 1 : 0, "  one split counted");
    {
        uint64_t before = a.consumed;

        run_multi(aa, 1, 200);
        tap_ok(a.consumed > before + 50, "  the fast one reads on at its own pace (%llu more)",
               (unsigned long long)(a.consumed - before));
    }
    run_multi(as, 2, 200);
    TAP_IS_INT(a.bad + s.bad, 0, "  both get exactly their streams");
    TAP_IS_INT(g_broken, 0, "  invariants held");
    detach(&a);
    detach(&s);
    drop_all();
}

/*
 * HOLD's other side: members are not split for costing the others little.
 * (a) Two readers at one pace, a ring apart: the ahead one waits a decode
 * (10 ms) for each batch the behind one's release lets the group plan,
 * 10% of its time, for 10 s: the group stays whole.  (b) A member that
 * stops for 0.8 s, five times, and then reads everything it was given:
 * each catch-up ends its hold, so the pauses never add up to a split.
 */
static void hold_spares_the_pace(void)
{
    struct client a, b;
    struct client *aa[] = {&a}, *ab[] = {&a, &b};
    struct sched_client fb;
    uint64_t splits0 = g_d.sched.share.share_splits;

    if (attach(&a, 64, 4, 0, 1) < 0 || attach(&b, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    run_multi(aa, 1, 100); /* a is a ring ahead: the group waits on b */
    for (int round = 0; round < 100; round++) {
        consume(&a);           /* a's step done: it has read all it was given */
        consume_some(&b, 1);   /* b's step done: one release, one batch planned */
        g_now += 10 * MS;
        run_all();             /* decoded 10 ms later: a's wait ends */
        g_now += 90 * MS;
    }
    client_figures(&b, &fb);
    tap_ok(fb.group_members == 2 && g_d.sched.share.share_splits == splits0,
           "(a) equal readers a ring apart, the ahead one waiting 10%% of 10 s: still one "
           "group (%u members, %llu splits)", fb.group_members,
           (unsigned long long)(g_d.sched.share.share_splits - splits0));
    consume(&a);
    consume(&b);
    for (int pause = 0; pause < 5; pause++) {
        run_multi(ab, 2, 40);  /* both read */
        run_multi(aa, 1, 100); /* b stops: a reads its ring, the group waits on b */
        g_now += 800 * MS;
        sched_fill(&g_d);      /* the tick's look */
        consume(&b);           /* b reads everything it was given */
        g_now += 10 * MS;
    }
    client_figures(&b, &fb);
    tap_ok(fb.group_members == 2 && g_d.sched.share.share_splits == splits0,
           "(b) five 0.8 s pauses, each caught up: still one group (%u members, %llu splits)",
           fb.group_members, (unsigned long long)(g_d.sched.share.share_splits - splits0));
    run_multi(ab, 2, 100);
    TAP_IS_INT(a.bad + b.bad, 0, "  both exactly their streams");
    detach(&a);
    detach(&b);
    drop_all();
}

/*
 * STALLED (share.c): a Python loop keeps its last batch alive while it asks
 * for the next, so it never has every batch published to it read and its
 * waits are not seen.  Beside a member that stopped reading (its ring
 * full), such a member holding one batch and releasing nothing used to be
 * held for good: no hold began, nothing looked again.  The tick now looks
 * at a group with a lagging member; after SHARE_HOLD_NS without a release
 * the holding member counts as waiting, and a hold of SHARE_HOLD_NS with it
 * stalled splits the stopped member off, so the other reads on.
 */
static void stalled_beside_a_stopped_member(void)
{
    struct client a, b;
    struct client *ab[] = {&a, &b}, *ob[] = {&b};
    struct sched_client fb;
    uint64_t splits0 = g_d.sched.share.share_splits;

    if (attach(&a, 64, 4, 0, 1) < 0 || attach(&b, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    run_multi(ab, 2, 8);       /* both read */
    run_all();                 /* a stops: both rings fill */
    consume_some(&b, 3);       /* b reads all but the batch in its hand */
    run_all();
    TAP_OK(share_waits(&g_d), "a group with a lagging member is looked at by the tick");
    for (int tick = 0; tick < 3; tick++) {
        g_now += 1100 * MS;
        sched_fill(&g_d);      /* the tick's look */
    }
    client_figures(&b, &fb);
    tap_ok(g_d.sched.share.share_splits == splits0 + 1,
           "a member holding one batch and stalled 3 s beside a stopped one: the stopped "
           "one is split off (%llu splits)",
           (unsigned long long)(g_d.sched.share.share_splits - splits0));
    consume(&b);
    run_multi(ob, 1, 60);
    TAP_IS_INT(b.bad, 0, "  and the other reads on, exactly its stream");
    tap_ok(b.consumed > 20, "  (%llu batches)", (unsigned long long)b.consumed);
    detach(&a);
    detach(&b);
    drop_all();
}

/*
 * The join rules' wait: a client asking for a place ahead of its group by
 * less than its depth plans nothing while the group gets there, for
 * SHARE_HOLD_NS at most: at 0.9 s it still waits, at 1.1 s it plans alone,
 * and never waits again.
 */
static void join_wait_times_out(void)
{
    struct client a, y;
    struct sched_client fa, fy;
    uint32_t queued;
    uint64_t y_start;

    if (attach(&a, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    client_figures(&a, &fa);
    y_start = fa.ready + fa.inflight + 2; /* two past the group's next place */
    g_next_epoch = (uint32_t)(y_start / a.si.bpe);
    g_next_seq = y_start % a.si.bpe;
    queued = g_d.sched.fq.queued;
    if (attach(&y, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    TAP_IS_INT(g_d.sched.fq.queued, queued, "a client two places ahead of the group waits");
    g_now += 900 * MS;
    sched_fill(&g_d);
    TAP_IS_INT(g_d.sched.fq.queued, queued, "  still at 0.9 s");
    g_now += 200 * MS;
    sched_fill(&g_d);
    client_figures(&y, &fy);
    tap_ok(g_d.sched.fq.queued == queued + 4 && fy.group_members == 0,
           "  at 1.1 s it plans its ring alone (%u jobs queued, group of %u)",
           g_d.sched.fq.queued, fy.group_members);
    detach(&a);
    detach(&y);
    drop_all();
}

/*
 * WEIGHTS' cap: a client's weight= is lowered to what the config allows it
 * (conf_weight_max), not refused, and STATS shows both.  By default
 * (max-weight 1) a client asking for 1000 beside one asking for nothing
 * gets weight 1, and the two get worker time 1:1; a uid rule with /MAX
 * caps its user there; max-weight raises the cap for the others.
 */
static void weight_caps(void)
{
    struct client hog, v;
    struct client *hv[] = {&hog, &v};
    struct sched_client fh, fv;
    struct rf_err err;
    double ratio;

    g_next_weight = 1000;
    if (attach(&hog, 64, 16, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    g_next_seed = 5;
    if (attach(&v, 64, 16, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    client_figures(&hog, &fh);
    client_figures(&v, &fv);
    tap_ok(fh.weight == 1 && fh.weight_asked == 1000 && fv.weight == 1 && fv.weight_asked == 0,
           "by default weight=1000 is given 1 (asked %u, weight %u; the other %u, %u)",
           fh.weight_asked, fh.weight, fv.weight_asked, fv.weight);
    run_multi(hv, 2, 2000);
    client_figures(&hog, &fh);
    client_figures(&v, &fv);
    ratio = fv.worker_ns ? (double)fh.worker_ns / (double)fv.worker_ns : 0;
    tap_ok(ratio > 0.9 && ratio < 1.1, "  worker time 1:1 within 10%% (%.2f)", ratio);
    detach(&hog);
    detach(&v);
    drop_all();

    if (conf_set(&g_d.cf, "weight", "uid:0=2/4", &err) < 0 ||
        conf_set(&g_d.cf, "max-weight", "8", &err) < 0)
        return (void)tap_ok(0, "conf_set: %s", err.msg);
    {
        static const uint32_t ask[] = {0, 3, 1000};
        static const uint32_t want[] = {2, 3, 4};

        for (unsigned i = 0; i < 3; i++) {
            g_next_weight = ask[i];
            if (attach(&v, 64, 4, 0, 1) < 0)
                return (void)tap_ok(0, "attach");
            client_figures(&v, &fv);
            tap_ok(fv.weight == want[i] && fv.weight_asked == ask[i],
                   "rule uid:0=2/4: asking %u gives %u (got %u)", ask[i], want[i], fv.weight);
            detach(&v);
            drop_all();
        }
    }
    g_d.cf.n_weights = 0;
    g_next_weight = 1000;
    if (attach(&v, 64, 4, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    client_figures(&v, &fv);
    TAP_IS_INT(fv.weight, 8, "no rule, max-weight 8: asking 1000 gives 8");
    detach(&v);
    drop_all();
    conf_defaults(&g_d.cf);
    g_d.cf.memory_budget = 1ull << 30;
}

/*
 * WEIGHTS (fairq.c): two streams that always have jobs queued, weights 1
 * and 3 (max-weight 3 allows them), are handed work 1:3 (within 10%), and the worker time the pool
 * reports is credited to each the same way.
 */
static void weights(void)
{
    struct client l, h;
    struct client *lh[] = {&l, &h};
    struct sched_client fl, fh;
    double ratio;

    g_d.cf.max_weight = 3;
    g_next_weight = 1;
    if (attach(&l, 64, 16, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    g_next_weight = 3;
    g_next_seed = 5;
    if (attach(&h, 64, 16, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    run_multi(lh, 2, 3000);
    client_figures(&l, &fl);
    client_figures(&h, &fh);
    tap_ok(fl.weight == 1 && fh.weight == 3, "weights 1 and 3 as attached");
    ratio = fl.worker_ns ? (double)fh.worker_ns / (double)fl.worker_ns : 0;
    tap_ok(ratio > 2.7 && ratio < 3.3, "worker time 1:3 within 10%% (%.2f)", ratio);
    TAP_IS_INT(l.bad + h.bad, 0, "  each stream exactly its own");
    g_d.cf.max_weight = 1;
    detach(&l);
    detach(&h);
    drop_all();
}

/*
 * MEASURED (fairq.c): two streams of the same transform whose samples
 * cost 1 us and 50 us of worker time (a dataset of photos far larger than
 * the transform's figure assumes) share the workers' time evenly: the
 * costly one is charged what its jobs really took.  Charged by the
 * transform's figure alone, each would be handed as many jobs, and the
 * costly one would take 50 times the other's worker time.
 */
static void measured_cost(void)
{
    struct client a, b;
    struct client *ab[] = {&a, &b};
    struct sched_client fa, fb;
    double ratio;

    if (attach(&a, 64, 16, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    g_next_seed = 9;
    if (attach(&b, 64, 16, 0, 1) < 0)
        return (void)tap_ok(0, "attach");
    g_cost_ring = b.si.id;
    g_cost_factor = 50;
    run_multi(ab, 2, 3000);
    g_cost_ring = 0;
    g_cost_factor = 1;
    client_figures(&a, &fa);
    client_figures(&b, &fb);
    ratio = fa.worker_ns ? (double)fb.worker_ns / (double)fa.worker_ns : 0;
    tap_ok(ratio > 0.7 && ratio < 1.4,
           "a stream whose samples cost 50x the other's gets the same worker time, not 50x "
           "(%.2f)", ratio);
    TAP_IS_INT(a.bad + b.bad, 0, "  each stream exactly its own");
    detach(&a);
    detach(&b);
    drop_all();
}

/*
 * MAKING (stream.c): ATTACH returns before the ring exists; the stream is
 * attached only when the loop hands the made ring back, and a client that
 * leaves meanwhile is never answered and leaves nothing behind.
 */
static void making(void)
{
    struct ctl_attach a;
    struct stream *st;
    struct rf_err err;
    struct sched_info si;
    int rc;

    ctl_attach_defaults(&a);
    strcpy(a.dataset, "t");
    a.batch = 64;
    a.depth = 4;
    g_made_calls = 0;
    rc = sched_attach(&g_d, &a, 0, NULL, &st, &err);
    TAP_IS_INT(rc, 0, "making: ATTACH accepted");
    if (rc < 0)
        return;
    sched_info(st, &si);
    tap_ok(si.memfd == -1 && g_made_calls == 0 && g_d.sched.nstreams == 0,
           "making: sched_attach returns before the ring is made (no memfd, not attached)");
    TAP_IS_INT(g_d.sched.nmaking, 1, "making: one ring being made");
    tap_ok(g_d.sched.mem_used == si.size, "making: its bytes are reserved at once");
    uv_run(&g_loop, UV_RUN_DEFAULT);
    tap_ok(g_made_calls == 1 && g_made == st && g_made_rc == 0,
           "making: the loop hands the made ring to the server");
    sched_info(st, &si);
    tap_ok(si.memfd >= 0 && g_d.sched.nstreams == 1 && g_d.sched.nmaking == 0,
           "making: then the stream is attached with its ring");
    sched_detach(&g_d, st, "test done", 0);
    uv_run(&g_loop, UV_RUN_DEFAULT);

    /* a client that leaves while its ring is made */
    g_made_calls = 0;
    rc = sched_attach(&g_d, &a, 0, NULL, &st, &err);
    TAP_IS_INT(rc, 0, "making: a second ATTACH accepted");
    if (rc < 0)
        return;
    sched_detach(&g_d, st, "client left", -ECONNRESET);
    TAP_IS_INT(g_d.sched.nmaking, 0, "making: left at once: no longer counted as attaching");
    uv_run(&g_loop, UV_RUN_DEFAULT);
    tap_ok(g_made_calls == 0, "making: a client that left is never answered");
    tap_ok(g_d.sched.mem_used == 0 && g_d.sched.nstreams == 0 && !g_d.sched.making,
           "making: and its bytes and stream are gone once the thread returns");
}

/* memory-per-client and memory-per-uid (conf.h): refused with the figures;
 * rings being made count. */
static void caps(void)
{
    struct ctl_attach a;
    struct stream *st[3];
    struct rf_err err;
    char want[256];
    uint64_t ring;
    struct sched_info si;
    int rc;

    ctl_attach_defaults(&a);
    strcpy(a.dataset, "t");
    a.batch = 64;
    a.depth = 4;
    if (sched_attach(&g_d, &a, 7, NULL, &st[0], &err) < 0)
        return (void)tap_ok(0, "caps: attach: %s", err.msg);
    sched_info(st[0], &si);
    ring = si.size;
    sched_detach(&g_d, st[0], "test done", 0);
    uv_run(&g_loop, UV_RUN_DEFAULT);
    g_d.cf.memory_per_client = (struct conf_cap){ .bytes = ring - 1 };
    rc = sched_attach(&g_d, &a, 7, NULL, &st[0], &err);
    TAP_IS_INT(rc, -ENOMEM, "caps: a ring over memory-per-client is refused");
    snprintf(want, sizeof(want), "attach needs %llu bytes; memory-per-client is %llu bytes, 0 in "
             "use", (unsigned long long)ring, (unsigned long long)ring - 1);
    tap_ok(rc < 0 && strstr(err.msg, want), "caps:   naming asked, cap and in use: %s",
           rc < 0 ? err.msg : "");
    g_d.cf.memory_per_client = (struct conf_cap){ .percent = 100 };
    g_d.cf.memory_per_uid = (struct conf_cap){ .bytes = 2 * ring };
    g_made_calls = 0;
    tap_ok(sched_attach(&g_d, &a, 7, NULL, &st[0], &err) == 0 &&
           sched_attach(&g_d, &a, 7, NULL, &st[1], &err) == 0,
           "caps: two rings of uid 7 fit its memory-per-uid");
    rc = sched_attach(&g_d, &a, 7, NULL, &st[2], &err);
    TAP_IS_INT(rc, -ENOMEM, "caps: a third, while the two are still being made, is refused");
    snprintf(want, sizeof(want), "attach needs %llu bytes; memory-per-uid is %llu bytes, %llu in "
             "use by uid 7's 2 client(s)", (unsigned long long)ring,
             (unsigned long long)2 * ring, (unsigned long long)2 * ring);
    tap_ok(rc < 0 && strstr(err.msg, want), "caps:   naming asked, cap and in use: %s",
           rc < 0 ? err.msg : "");
    rc = sched_attach(&g_d, &a, 8, NULL, &st[2], &err);
    TAP_IS_INT(rc, 0, "caps: another uid's ring fits");
    uv_run(&g_loop, UV_RUN_DEFAULT);
    TAP_IS_INT(g_made_calls, 3, "caps: the three rings are made");
    for (int i = 0; i < 3; i++)
        sched_detach(&g_d, st[i], "test done", 0);
    uv_run(&g_loop, UV_RUN_DEFAULT);
    TAP_IS_INT(g_d.sched.mem_used, 0, "caps: every ring's bytes are given back");
    conf_defaults(&g_d.cf);
    g_d.cf.memory_budget = 1ull << 30;
}

int main(void)
{
    char dir[] = "/tmp/rf-test-sched-XXXXXX", path[64];
    struct rf_err err;

    if (!mkdtemp(dir))
        tap_bail("cannot create a temporary folder");
    snprintf(path, sizeof(path), "%s/ds", dir);
    if (make_dataset(path) < 0 || dataset_open(path, &g_cat[0].ds, &err) < 0)
        tap_bail("cannot make the test dataset in %s", path);
    strcpy(g_cat[0].name, "t");
    if (uv_loop_init(&g_loop) != 0)
        tap_bail("uv_loop_init failed");
    g_loop.data = &g_d;
    g_d.loop = &g_loop;
    sched_init(&g_d, &g_ops);
    uv_timer_stop(&g_d.sched.tick); /* the test plans when it says so */
    conf_defaults(&g_d.cf);
    g_d.cf.memory_budget = 1ull << 30; /* the daemon derives it from RAM at start */
    g_d.cat = g_cat;
    g_d.ncat = 1;
    making();
    caps();
    straight();
    ranks_and_chunks();
    crashes();
    orphans_want_release();
    kicked_in_job_done();
    lost_shards();
    hostile_release();
    fair_turns();
    shared();
    catch_up();
    hold_slow_member();
    hold_spares_the_pace();
    stalled_beside_a_stopped_member();
    join_wait_times_out();
    weights();
    weight_caps();
    measured_cost();
    last_epoch();
    dataset_close(g_cat[0].ds);
    sched_close(&g_d);
    uv_run(&g_loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&g_loop) != 0)
        tap_diag("the loop still holds handles");
    {
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
            tap_diag("could not remove %s", dir);
    }
    return tap_done();
}
