/*
 * test_client_stream.c - libringfeed delivers a ring's batches in order and
 * intact while a publisher thread plays the daemon's workers (ring.h M1,
 * M2, W1, W2), releases them per C3 (the `released` word and one eventfd
 * count per release), and keeps its promises around the edges: -ETIMEDOUT,
 * -ENOBUFS past depth-1 held batches, -EINVAL for out-of-order or foreign
 * releases, -EIO with the daemon's reason when the stream fails, an
 * invisible reconnect when the daemon goes away or stops (held batches
 * survive, the stream resumes after the last delivered batch), and a clear
 * failure once the reconnect deadline passes.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "fake_daemon.h"
#include "ringfeed.h"
#include "tap.h"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define DEPTH 4
#define BATCH 8
#define SAMPLE 16
#define BPE 5

/* Every ATTACH gets a fresh ring starting where the line asks and a
 * publisher for g_fleet.per_ring batches of it. */

static struct fake_fleet g_fleet = {
    .depth = DEPTH, .batch = BATCH, .sample = SAMPLE, .bpe = BPE, .seals = SEALS,
};

static int handler(struct fake *f, int conn, const char *line)
{
    (void)f;
    return fake_fleet_attach(&g_fleet, conn, line);
}

static void stop_all(struct fake *f)
{
    fake_fleet_stop(&g_fleet, f);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Checks one delivered batch against what fake_publish wrote for
 * (epoch, seq); returns 1 when all of it matches. */
static int batch_ok(const struct rf_batch *b, uint64_t epoch, uint64_t seq,
                    uint64_t stream_seq)
{
    uint32_t count = seq % 3 == 2 ? BATCH - 1 : BATCH;

    if (b->epoch != epoch || b->seq != seq || b->stream_seq != stream_seq ||
        b->count != count || b->sample_bytes != SAMPLE || b->layout != RF_LAYOUT_CHW ||
        b->shape[0] != 1 || b->shape[2] != SAMPLE || b->substituted != 1 ||
        ((uintptr_t)b->data & 4095) != 0) {
        tap_diag("  batch %llu: epoch %llu seq %llu count %u (want %llu %llu %u)",
                 (unsigned long long)b->stream_seq, (unsigned long long)b->epoch,
                 (unsigned long long)b->seq, b->count, (unsigned long long)epoch,
                 (unsigned long long)seq, count);
        return 0;
    }
    for (uint32_t i = 0; i < b->count; i++) {
        if (b->samples[i].index != fake_index(epoch, seq, i) ||
            b->samples[i].label != (int32_t)(i % 10) ||
            b->samples[i].flags != (i == 0 ? RF_SAMPLE_SUBSTITUTED : 0u))
            return 0;
        for (uint64_t j = 0; j < SAMPLE; j++)
            if (b->data[i * SAMPLE + j] != fake_pixel(epoch, seq, i, j))
                return 0;
    }
    return 1;
}

static struct rf_client *open_client(struct fake *f, int reconnect_ms)
{
    struct rf_options o;
    struct rf_client *c = NULL;
    int rc;

    rf_options_init(&o);
    o.socket = f->path;
    o.dataset = "fm";
    o.batch = BATCH;
    o.start_epoch = 2;
    o.start_seq = 3;
    o.rank = 1;
    o.world = 2;
    o.reconnect_ms = reconnect_ms;
    rc = rf_open(&o, &c);
    if (!tap_ok(rc == 0, "rf_open attaches"))
        tap_diag("  %d: %s", rc, rf_last_error(c));
    return c;
}

/* Order, contents, release accounting, timeout, holding, failure. */
static void stream(void)
{
    const uint64_t n = 23;
    struct rf_batch b, held[DEPTH];
    struct rf_client *c;
    struct rf_stats st;
    struct fake f;
    uint64_t epoch = 2, seq = 3, samples = 0;
    int before = fake_count_fds(), all_ok = 1, rc;
    double t;

    g_fleet.per_ring = n;
    if (fake_start(&f, NULL, handler, NULL) < 0)
        return (void)tap_ok(0, "fake daemon starts");
    c = open_client(&f, 0);
    if (!c || rf_ring_base(c, NULL) == NULL)
        return stop_all(&f);
    TAP_OK(strstr(f.lines[0], " rank=1") && strstr(f.lines[0], " world=2") &&
               strstr(f.lines[0], " epoch=2") && strstr(f.lines[0], " seq=3"),
           "ATTACH carries rank, world and the resume point");
    {
        struct rf_info in;

        rc = rf_get_info(c, &in);
        TAP_OK(rc == 0 && in.rank == 1 && in.world == 2 && in.batch == BATCH &&
                   in.depth == DEPTH && in.batches_per_epoch == BPE &&
                   in.sample_bytes == SAMPLE && in.layout == RF_LAYOUT_CHW &&
                   in.shape[0] == 1 && in.shape[2] == SAMPLE,
               "rf_get_info before any batch: rank, world, geometry, shape");
        TAP_OK(in.next_epoch == 2 && in.next_seq == 3, "  and the resume point asked for");
        TAP_IS_INT(rf_get_info(c, NULL), -EINVAL, "rf_get_info(c, NULL) refused");
    }

    /* waits see want_release 0 (no eventfd as they sleep, ring.h C4) but
     * for the one timed out below */
    atomic_store(&g_fleet.rings[0].hdr->want_release, 0);
    for (uint64_t g = 0; g < n; g++) {
        rc = rf_next(c, &b, 5000);
        if (rc != 0) {
            tap_diag("  rf_next %llu: %d %s", (unsigned long long)g, rc, rf_last_error(c));
            all_ok = 0;
            break;
        }
        all_ok &= batch_ok(&b, epoch, seq, g);
        all_ok &= b.slot == g % DEPTH;
        samples += b.count;
        /* batches 5-7 released while the daemon reads `released` by itself
         * (ring.h M4): no eventfd write for them */
        atomic_store(&g_fleet.rings[0].hdr->want_release, g < 5 || g > 7);
        all_ok &= rf_release(c, &b) == 0;
        atomic_store(&g_fleet.rings[0].hdr->want_release, 0);
        all_ok &= atomic_load(&g_fleet.rings[0].hdr->released) == g + 1;
        if (++seq == BPE)
            epoch++, seq = 0;
    }
    TAP_OK(all_ok, "23 batches across 5 epochs arrive in order, intact, and are released");
    {
        struct rf_info in;

        TAP_OK(rf_get_info(c, &in) == 0 && in.next_epoch == epoch && in.next_seq == seq,
               "rf_get_info: the position after the last delivered batch");
    }
    rf_get_stats(c, &st);
    TAP_IS_INT(st.batches, n, "stats: batches");
    TAP_IS_INT(st.samples, samples, "stats: samples");
    TAP_IS_INT(st.depth, DEPTH, "stats: depth");
    TAP_IS_INT(st.batches_per_epoch, BPE, "stats: batches per epoch");
    TAP_OK(st.wait_seconds > 0 && st.between_seconds > 0, "stats: wait and between time");

    /* the daemon asks for the eventfd: a wait that sleeps writes it once,
     * however many naps it takes (ring.h C4) */
    atomic_store(&g_fleet.rings[0].hdr->want_release, 1);
    t = now_s();
    rc = rf_next(c, &b, 100);
    t = now_s() - t;
    TAP_IS_INT(rc, -ETIMEDOUT, "nothing published: rf_next(100 ms) times out");
    TAP_OK(t >= 0.095 && t < 2.0, "  after about 100 ms");
    TAP_IS_INT(rf_next(c, &b, 0), -ETIMEDOUT, "rf_next(0) polls");

    TAP_IS_INT(rf_ready(c), 0, "rf_ready: 0 while the next batch is not published");
    TAP_IS_INT(rf_ready(NULL), 0, "rf_ready(NULL): 0");
    /* hold depth-1 batches */
    for (uint64_t g = n; g < n + DEPTH - 1; g++)
        fake_publish(g_fleet.rings[0].hdr, g);
    TAP_IS_INT(rf_ready(c), 1, "rf_ready: 1 once it is");
    all_ok = 1;
    for (int i = 0; i < DEPTH - 1; i++) {
        all_ok &= rf_next(c, &held[i], 1000) == 0;
        all_ok &= batch_ok(&held[i], epoch, seq, n + (uint64_t)i);
        if (++seq == BPE)
            epoch++, seq = 0;
    }
    TAP_OK(all_ok, "three batches held at once");
    fake_publish(g_fleet.rings[0].hdr, n + DEPTH - 1); /* ready, but may not be taken */
    TAP_IS_INT(rf_ready(c), 0, "rf_ready: 0 at the limit of held batches");
    TAP_IS_INT(rf_next(c, &b, 1000), -ENOBUFS, "a fourth with depth 4: -ENOBUFS");
    TAP_OK(strstr(rf_last_error(c), "release one first"), "  message says what to do");
    TAP_IS_INT(rf_release(c, &held[1]), -EINVAL, "releasing the second first: -EINVAL");
    TAP_OK(strstr(rf_last_error(c), "out of order"), "  message says out of order");
    b = held[0];
    b.data += 4096;
    TAP_IS_INT(rf_release(c, &b), -EINVAL, "releasing a forged batch: -EINVAL");
    TAP_IS_INT(atomic_load(&g_fleet.rings[0].hdr->released), n, "  nothing released");
    TAP_IS_INT(rf_release(c, &held[0]), 0, "releasing the oldest");
    TAP_IS_INT(rf_release(c, &held[0]), -EINVAL, "releasing it twice: -EINVAL");
    TAP_IS_INT(rf_release(c, &held[1]), 0, "releasing the next");
    TAP_IS_INT(rf_release(c, &held[2]), 0, "releasing the last held");
    TAP_IS_INT(rf_release(c, &held[2]), -EINVAL, "releasing with none held: -EINVAL");
    TAP_IS_INT(atomic_load(&g_fleet.rings[0].hdr->released), n + DEPTH - 1,
               "released counts every release");

    /* the batch published before the failure still comes, then -EIO */
    TAP_IS_INT(rf_next(c, &b, 1000), 0, "batch published before the failure arrives");
    TAP_IS_INT(rf_release(c, &b), 0, "  and is released");
    g_fleet.rings[0].hdr->error = -EBADMSG;
    snprintf(g_fleet.rings[0].hdr->reason, sizeof(g_fleet.rings[0].hdr->reason),
             "too many bad samples: shard 3 record 17 fails its checksum");
    atomic_store_explicit(&g_fleet.rings[0].hdr->state, RING_FAILED, memory_order_release);
    rc = rf_next(c, &b, 5000);
    TAP_IS_INT(rc, -EIO, "failed stream: -EIO");
    TAP_OK(strstr(rf_last_error(c), "shard 3 record 17"), "  with the daemon's reason");
    TAP_IS_INT(rf_next(c, &b, 0), -EIO, "  and it sticks");

    rf_close(c);
    fake_pub_stop(&g_fleet.pubs[0]);
    TAP_IS_INT(atomic_load(&g_fleet.pubs[0].efd_total), n - 3 + DEPTH + 1,
               "one eventfd count per release the daemon asked for, and one for the wait "
               "that slept while it asked (C4), none otherwise");
    stop_all(&f);
    TAP_IS_INT(fake_count_fds(), before, "no descriptor leaked");
}

/* The daemon goes away with a batch held; the client reconnects. */
static void reconnect(void)
{
    struct rf_batch b, kept;
    struct rf_client *c;
    struct rf_stats st;
    struct fake f;
    char v[32];
    uint64_t epoch = 2, seq = 3, g = 0;
    int before = fake_count_fds(), all_ok = 1, rc;

    g_fleet.per_ring = 7;
    if (fake_start(&f, NULL, handler, NULL) < 0)
        return (void)tap_ok(0, "fake daemon starts");
    c = open_client(&f, 5000);
    if (!c || rf_ring_base(c, NULL) == NULL)
        return stop_all(&f);
    for (; g < 7; g++) {
        all_ok &= rf_next(c, &b, 5000) == 0 && batch_ok(&b, epoch, seq, g);
        if (++seq == BPE)
            epoch++, seq = 0;
        if (g < 6)
            all_ok &= rf_release(c, &b) == 0;
    }
    kept = b;
    TAP_OK(all_ok, "seven batches from the first ring, the last held");

    fake_drop(&f, 0); /* the daemon dies */
    rc = rf_next(c, &b, 5000);
    TAP_IS_INT(rc, 0, "after the daemon went away rf_next goes on");
    /* batch 6 was epoch 3 batch 4, the last of its epoch; seq=0 is the
     * protocol's default and left out of the line */
    TAP_OK(fake_wait_lines(&f, 2) == 0 && fake_line_value(f.lines[1], "epoch", v, sizeof(v)) == 0 &&
               strtoull(v, NULL, 10) == 4 && fake_line_value(f.lines[1], "seq", v, sizeof(v)) < 0,
           "re-ATTACH resumes after the last delivered batch (epoch 4 batch 0)");
    tap_diag("re-ATTACH: %.*s", (int)strcspn(f.lines[1], "\n"), f.lines[1]);
    TAP_OK(rc == 0 && batch_ok(&b, epoch, seq, g), "the next batch follows without a gap");
    TAP_OK(batch_ok(&kept, 3, 4, 6), "the held batch from the old ring is intact");
    TAP_IS_INT(rf_release(c, &b), -EINVAL, "releasing the new one first: -EINVAL");
    TAP_IS_INT(rf_release(c, &kept), 0, "releasing the held one from the old ring");
    TAP_IS_INT(rf_release(c, &b), 0, "then the new one");
    TAP_IS_INT(atomic_load(&g_fleet.rings[1].hdr->released), 1, "new ring counts from 0");
    g++;
    if (++seq == BPE)
        epoch++, seq = 0;
    rf_get_stats(c, &st);
    TAP_IS_INT(st.reconnects, 1, "stats: one reconnect");

    /* the daemon says it is stopping through the ring */
    for (all_ok = 1; g < 10; g++) {
        all_ok &= rf_next(c, &b, 5000) == 0 && batch_ok(&b, epoch, seq, g) &&
                  rf_release(c, &b) == 0;
        if (++seq == BPE)
            epoch++, seq = 0;
    }
    TAP_OK(all_ok, "the second ring goes on");
    g_fleet.rings[1].hdr->error = -ESHUTDOWN;
    snprintf(g_fleet.rings[1].hdr->reason, sizeof(g_fleet.rings[1].hdr->reason), "daemon is stopping");
    atomic_store_explicit(&g_fleet.rings[1].hdr->state, RING_CLOSED, memory_order_release);
    /* batches published before the close still come, then the third ring's */
    all_ok = 1;
    for (int i = 0; i < 2 * DEPTH && st.reconnects < 2; i++, g++) {
        all_ok &= rf_next(c, &b, 5000) == 0 && batch_ok(&b, epoch, seq, g) &&
                  rf_release(c, &b) == 0;
        if (++seq == BPE)
            epoch++, seq = 0;
        rf_get_stats(c, &st);
    }
    TAP_OK(all_ok, "ring closed for shutdown: the stream goes on without a gap");
    TAP_IS_INT(st.reconnects, 2, "stats: two reconnects");
    TAP_OK(fake_wait_lines(&f, 3) == 0, "  from a third ATTACH");

    /* detached for good: the published batches, then -EPIPE and no retry */
    g_fleet.rings[2].hdr->error = -EPROTO;
    snprintf(g_fleet.rings[2].hdr->reason, sizeof(g_fleet.rings[2].hdr->reason),
             "released went backwards");
    atomic_store_explicit(&g_fleet.rings[2].hdr->state, RING_CLOSED, memory_order_release);
    for (int i = 0; i < 2 * DEPTH && (rc = rf_next(c, &b, 5000)) == 0; i++)
        rf_release(c, &b);
    TAP_IS_INT(rc, -EPIPE, "ring closed with an error: -EPIPE");
    TAP_OK(strstr(rf_last_error(c), "detached this client") &&
               strstr(rf_last_error(c), "released went backwards"),
           "  with the daemon's reason");
    rf_get_stats(c, &st);
    TAP_IS_INT(st.reconnects, 2, "  and no reconnect");

    rf_close(c);
    stop_all(&f);
    TAP_IS_INT(fake_count_fds(), before, "no descriptor leaked across reconnects");
}

/* The daemon goes away for good: -ETIMEDOUT while retrying, then the end. */
static void give_up(void)
{
    struct rf_batch b;
    struct rf_client *c;
    struct fake f;
    int before = fake_count_fds(), rc;
    double t;

    g_fleet.per_ring = 0;
    if (fake_start(&f, NULL, handler, NULL) < 0)
        return (void)tap_ok(0, "fake daemon starts");
    c = open_client(&f, 400);
    stop_all(&f);
    t = now_s();
    rc = rf_next(c, &b, 50);
    TAP_IS_INT(rc, -ETIMEDOUT, "daemon gone: rf_next(50 ms) times out while retrying");
    TAP_OK(strstr(rf_last_error(c), "still reconnecting"), "  and says so");
    rc = rf_next(c, &b, -1);
    t = now_s() - t;
    TAP_IS_INT(rc, -ECONNREFUSED, "after reconnect_ms: -ECONNREFUSED");
    TAP_OK(t >= 0.39 && t < 3.0, "  after about 400 ms");
    TAP_OK(strstr(rf_last_error(c), "gave up reconnecting after reconnect_ms=400") &&
               strstr(rf_last_error(c), "closed the control connection"),
           "  message says why and for how long");
    tap_diag("%s", rf_last_error(c));
    TAP_IS_INT(rf_next(c, &b, -1), -ECONNREFUSED, "  and it sticks");
    rf_close(c);
    TAP_IS_INT(fake_count_fds(), before, "no descriptor leaked");
}

/* reconnect_ms = 0 means never: a lost daemon ends the stream at once, with
 * no attach attempt (one used to go out, and behind a listening socket unit
 * it started the service an operator had just stopped). */
static void never_reconnect(void)
{
    struct rf_batch b;
    struct rf_client *c;
    struct fake f;
    int lines, rc;

    g_fleet.per_ring = 0;
    if (fake_start(&f, NULL, handler, NULL) < 0)
        return (void)tap_ok(0, "fake daemon starts");
    c = open_client(&f, 0);
    if (!c)
        return stop_all(&f);
    lines = atomic_load(&f.nlines);
    fake_drop(&f, 0); /* the connection goes; the daemon still listens */
    rc = rf_next(c, &b, -1);
    TAP_OK(rc < 0 && rc != -ETIMEDOUT, "reconnect_ms=0: the stream ends when the daemon goes");
    TAP_OK(strstr(rf_last_error(c), "not reconnecting (reconnect_ms=0"), "  and says so");
    tap_diag("%s", rf_last_error(c));
    usleep(100 * 1000);
    TAP_IS_INT(atomic_load(&f.nlines), lines, "  no attach was attempted");
    rf_close(c);
    stop_all(&f);
}

/* Publishes batch 0 once the client says it sleeps (ring.h C2), or after
 * two seconds if it never does. */
static void *publish_when_asleep(void *arg)
{
    struct ring_hdr *h = arg;

    for (int i = 0; i < 2000 && !atomic_load(&h->sleeping); i++)
        usleep(1000);
    fake_publish(h, 0);
    return NULL;
}

/* A sleeping client is woken by the publication itself: rf_next with a
 * deadline shorter than a nap gets the batch (a client that slept without
 * announcing it would not be woken and would time out). */
static void sleep_wake(void)
{
    struct rf_batch b;
    struct rf_client *c;
    struct fake f;
    pthread_t t;
    int rc;

    g_fleet.per_ring = 0;
    if (fake_start(&f, NULL, handler, NULL) < 0)
        return (void)tap_ok(0, "fake daemon starts");
    c = open_client(&f, 0);
    if (!c || rf_ring_base(c, NULL) == NULL)
        return stop_all(&f);
    TAP_IS_INT(atomic_load(&g_fleet.rings[0].hdr->sleeping), 0, "awake: sleeping is 0");
    pthread_create(&t, NULL, publish_when_asleep, g_fleet.rings[0].hdr);
    rc = rf_next(c, &b, 40);
    pthread_join(t, NULL);
    TAP_IS_INT(rc, 0, "a client asleep in rf_next(40 ms) is woken by the publication");
    TAP_IS_INT(atomic_load(&g_fleet.rings[0].hdr->sleeping), 0, "  and says it is awake again");
    if (rc == 0)
        TAP_IS_INT(rf_release(c, &b), 0, "  and releases the batch");
    rf_close(c);
    stop_all(&f);
}

/* A forked child (a data-loader worker) must neither take nor hand back the
 * parent's batches: its rf_release, rf_next and rf_poll fail with -EPERM
 * and touch nothing shared, its rf_close frees only its own copies, and the
 * parent's held batch stays held (its slot is not given back to the daemon
 * behind its back) and is released by the parent as usual. */
static void forked_child(void)
{
    struct rf_batch b;
    struct rf_client *c;
    struct ring_hdr *h;
    struct fake f;
    int status = 0;
    pid_t pid;

    g_fleet.per_ring = 0;
    if (fake_start(&f, NULL, handler, NULL) < 0)
        return (void)tap_ok(0, "fake daemon starts");
    c = open_client(&f, 0);
    if (!c || rf_ring_base(c, NULL) == NULL)
        return stop_all(&f);
    h = g_fleet.rings[0].hdr;
    fake_publish(h, 0);
    fake_publish(h, 1);
    if (!tap_ok(rf_next(c, &b, 1000) == 0, "the parent takes batch 0")) {
        rf_close(c);
        return stop_all(&f);
    }
    pid = fork();
    if (pid == 0) {
        struct rf_batch b2;
        int bad = 0;

        bad |= rf_release(c, &b) != -EPERM;
        bad |= (strstr(rf_last_error(c), "fork") == NULL) << 1;
        bad |= (rf_next(c, &b2, 0) != -EPERM) << 2;
        bad |= (rf_poll(c) != -EPERM) << 3;
        rf_close(c);
        bad |= (atomic_load(&h->released) != 0) << 4;
        _exit(bad);
    }
    if (pid > 0)
        waitpid(pid, &status, 0);
    if (!tap_ok(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "a forked child's rf_release, rf_next and rf_poll fail with EPERM, saying "
                "why, and its rf_close hands nothing back"))
        tap_diag("  child status %#x (bits: release, message, next, poll, released)", status);
    TAP_IS_INT(atomic_load(&h->released), 0, "  the parent's batch is still held after the "
               "child exits");
    TAP_OK(batch_ok(&b, 2, 3, 0), "  and its bytes are unchanged");
    TAP_IS_INT(rf_release(c, &b), 0, "  the parent releases it");
    TAP_IS_INT(atomic_load(&h->released), 1, "  and the ring says so");
    rf_close(c);
    stop_all(&f);
}

int main(void)
{
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    stream();
    sleep_wake();
    forked_child();
    reconnect();
    give_up();
    never_reconnect();
    return tap_done();
}
