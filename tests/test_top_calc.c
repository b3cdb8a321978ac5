/*
 * test_top_calc.c - ringfeedctl top's arithmetic (tools/top_calc.c): STATS
 * bodies parsed into snapshots (unknown keys, bad values, CR LF, the
 * row caps) and STATUS's version, then frames from two snapshots: rates
 * over the daemon's own interval, busy and stage shares, wait shares and
 * the verdict, rows new in the interval, a restarted daemon, a STATS
 * without uptime_seconds; the augmentation's time per image per op over
 * the interval, shown only for ops that ran in it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "top_calc.h"

#define NEAR(got, want, name)                                                       \
    do {                                                                            \
        double g_ = (got), w_ = (want);                                             \
        if (!tap_ok(fabs(g_ - w_) < 1e-9, "%s", name))                              \
            tap_diag("  %s:%d: got %.12g, want %.12g (%s)", __FILE__, __LINE__, g_, \
                     w_, #got);                                                     \
    } while (0)

static const char body_a[] =
    "uptime_seconds 10.000000\n"
    "workers.target 2\n"
    "workers.alive 2\n"
    "clients.attached 3\n"
    "datasets 1\n"
    "datasets.failed 0\n"
    "jobs.queued 4\n"
    "total.batches 100\n"
    "total.samples 1000\n"
    "total.jobs 50\n"
    "time.busy_seconds 2.000000\n"
    "time.io_seconds 0.400000\n"
    "time.decode_seconds 1.000000\n"
    "time.transform_seconds 0.600000\n"
    "errors.bad_samples 1\n"
    "memory.rings_bytes 1048576\n"
    "memory.locked_bytes 0\n"
    "memory.budget_bytes 4194304\n"
    "io.backend io_uring\n"
    "io.reason -\n"
    "some.new_figure 7\n"
    "workers.0.pid 100\n"
    "workers.0.state ready\n"
    "workers.0.jobs 20\n"
    "workers.0.samples 400\n"
    "workers.0.busy_s 1.000\n"
    "workers.0.io_s 0.200\n"
    "workers.0.decode_s 0.500\n"
    "workers.0.transform_s 0.300\n"
    "workers.1.pid 101\n"
    "workers.1.state ready\n"
    "workers.1.jobs 30\n"
    "workers.1.busy_s 1.000\n"
    "clients.1.dataset fmnist\n"
    "clients.1.name trainer\n"
    "clients.1.rank 0\n"
    "clients.1.world 2\n"
    "clients.1.depth 4\n"
    "clients.1.batches 60\n"
    "clients.1.samples 600\n"
    "clients.1.waited_s 0.100\n"
    "clients.1.ready 3\n"
    "clients.1.inflight 1\n"
    "clients.1.failed 0\n"
    "clients.2.dataset fmnist\n"
    "clients.2.name -\n"
    "clients.2.rank 1\n"
    "clients.2.world 2\n"
    "clients.2.batches 40\n"
    "clients.2.samples 400\n"
    "clients.2.waited_s 0.100\n"
    "clients.2.failed 0\n";

/* two seconds later (daemon time): worker 1 respawned (pid 201), client 2
 * gone, client 3 new, client 1 waited 0.4 s of the 2 */
static const char body_b[] =
    "uptime_seconds 12.000000\r\n"
    "workers.target 2\r\n"
    "workers.alive 2\n"
    "clients.attached 2\n"
    "total.batches 300\n"
    "total.samples 3000\n"
    "total.jobs 150\n"
    "time.busy_seconds 5.000000\n"
    "time.io_seconds 1.000000\n"
    "time.decode_seconds 2.500000\n"
    "time.transform_seconds 1.500000\n"
    "errors.bad_samples 5\n"
    "io.backend io_uring\n"
    "workers.0.pid 100\n"
    "workers.0.state ready\n"
    "workers.0.jobs 60\n"
    "workers.0.samples 1200\n"
    "workers.0.busy_s 2.500\n"
    "workers.0.io_s 0.500\n"
    "workers.0.decode_s 1.250\n"
    "workers.0.transform_s 0.750\n"
    "workers.1.pid 201\n"
    "workers.1.state starting\n"
    "workers.1.jobs 10\n"
    "workers.1.busy_s 0.500\n"
    "clients.1.dataset fmnist\n"
    "clients.1.name trainer\n"
    "clients.1.rank 0\n"
    "clients.1.world 2\n"
    "clients.1.depth 4\n"
    "clients.1.batches 260\n"
    "clients.1.samples 2600\n"
    "clients.1.waited_s 0.500\n"
    "clients.1.ready 0\n"
    "clients.1.inflight 4\n"
    "clients.1.failed 0\n"
    "clients.3.dataset fmnist\n"
    "clients.3.batches 20\n"
    "clients.3.waited_s 0.100\n"
    "clients.3.failed 1\n";

static void test_parse(struct top_snap *s)
{
    static const char bad[] = "uptime_seconds 1.5\nworkers.alive two\nlonely\n"
                              "workers.x.pid 3\nclients.4.\n";
    static const char stopping[] = "ringfeedd 0.1.0: workers=2/2 clients=1 io=mmap "
                                   "uptime=3s stopping";
    static const char running[] = "ringfeedd 0.2.0: workers=2/2";
    size_t used;

    top_snap_init(s);
    TAP_OK(isnan(s->uptime_s) && isnan(s->samples) && s->nworkers == 0,
           "init: every figure NAN, no rows");
    used = top_snap_parse_stats(s, body_a, sizeof(body_a) - 1);
    TAP_IS_INT(used, 50, "parse: every line but the two unknown ones (io.reason, a new figure) used");
    NEAR(s->uptime_s, 10, "parse: uptime_seconds");
    NEAR(s->samples, 1000, "parse: total.samples");
    NEAR(s->budget_bytes, 4194304, "parse: memory.budget_bytes");
    TAP_IS_STR(s->io_backend, "io_uring", "parse: io.backend");
    TAP_IS_INT(s->nworkers, 2, "parse: two worker rows");
    TAP_IS_INT(s->w[1].idx, 1, "parse: worker index");
    TAP_IS_STR(s->w[0].state, "ready", "parse: worker state");
    NEAR(s->w[0].transform_s, 0.3, "parse: workers.0.transform_s");
    TAP_OK(isnan(s->w[1].samples), "parse: a worker figure not sent is NAN");
    TAP_IS_INT(s->nclients, 2, "parse: two client rows");
    TAP_IS_STR(s->c[0].name, "trainer", "parse: client name");
    TAP_IS_STR(s->c[1].name, "", "parse: \"-\" is no name");
    TAP_IS_STR(s->c[1].dataset, "fmnist", "parse: client dataset");
    NEAR(s->c[0].waited_s, 0.1, "parse: clients.1.waited_s");
    TAP_IS_INT(s->bad_lines, 0, "parse: no bad line in a good body");

    top_snap_init(s);
    used = top_snap_parse_stats(s, bad, sizeof(bad) - 1);
    TAP_IS_INT(used, 1, "parse: only the good line of a bad body used");
    NEAR(s->uptime_s, 1.5, "parse: the good line's value");
    TAP_OK(isnan(s->workers_alive), "parse: a value that is no number leaves NAN");
    TAP_IS_INT(s->bad_lines, 3, "parse: no number and no value (twice) are bad lines");
    TAP_IS_INT(s->nworkers + s->nclients, 0, "parse: malformed row names make no row");

    top_snap_init(s);
    TAP_IS_INT(top_snap_parse_status(s, stopping, strlen(stopping)), 0, "status: parsed");
    TAP_IS_STR(s->version, "0.1.0", "status: the version");
    TAP_OK(s->stopping, "status: stopping");
    TAP_IS_INT(top_snap_parse_status(s, running, strlen(running)), 0,
               "status: parsed again");
    TAP_OK(!s->stopping, "status: not stopping");
    TAP_IS_INT(top_snap_parse_status(s, "pong", 4), -EINVAL, "status: not STATUS's line");
    TAP_IS_STR(s->version, "0.2.0", "status: a refused line changes nothing");
}

static void test_caps(struct top_snap *s)
{
    char line[64];

    top_snap_init(s);
    for (unsigned i = 0; i < TOP_CLIENTS_MAX + 10; i++) {
        int n = snprintf(line, sizeof(line), "clients.%u.batches 1\n", i + 1);

        top_snap_parse_stats(s, line, (size_t)n);
    }
    TAP_IS_INT(s->nclients, TOP_CLIENTS_MAX, "caps: clients kept up to the cap");
    TAP_IS_INT(s->dropped, 10, "caps: the rest counted");
}

static void test_compute(struct top_snap *a, struct top_snap *b, struct top_frame *f)
{
    top_snap_init(a);
    top_snap_parse_stats(a, body_a, sizeof(body_a) - 1);
    top_snap_init(b);
    top_snap_parse_stats(b, body_b, sizeof(body_b) - 1);

    top_compute(NULL, a, 0, f);
    TAP_OK(isnan(f->interval_s) && isnan(f->samples_per_s) && isnan(f->w[0].busy_pct),
           "one snapshot: no rates");
    TAP_IS_INT(f->c[0].verdict, TOP_VERDICT_NONE, "one snapshot: no verdict");
    NEAR(f->rings_bytes, 1048576, "one snapshot: gauges shown");

    top_compute(a, b, 5.0, f);
    NEAR(f->interval_s, 2, "interval: the daemon's uptime difference, not the wall clock");
    TAP_OK(!f->restarted, "not restarted");
    NEAR(f->samples_per_s, 1000, "samples/s");
    NEAR(f->batches_per_s, 100, "batches/s");
    NEAR(f->jobs_per_s, 50, "jobs/s");
    NEAR(f->bad, 5, "bad samples: total");
    NEAR(f->bad_per_s, 2, "bad samples: rate");
    NEAR(f->busy_pct, 75, "pool busy: 3 s of 2 s x 2 workers");
    NEAR(f->io_pct, 20, "pool io share of busy time");
    NEAR(f->decode_pct, 50, "pool decode share");
    NEAR(f->transform_pct, 30, "pool transform share");
    TAP_OK(isnan(f->datasets), "a figure the later STATS lacks is NAN");

    TAP_IS_INT(f->nworkers, 2, "worker rows");
    NEAR(f->w[0].busy_pct, 75, "worker 0: busy 1.5 s of 2");
    NEAR(f->w[0].jobs_per_s, 20, "worker 0: jobs/s");
    NEAR(f->w[0].samples_per_s, 400, "worker 0: samples/s");
    NEAR(f->w[0].io_pct, 20, "worker 0: io share");
    NEAR(f->w[0].decode_pct, 50, "worker 0: decode share");
    NEAR(f->w[0].transform_pct, 30, "worker 0: transform share");
    NEAR(f->w[1].busy_pct, 25, "worker 1 respawned: busy from zero");
    NEAR(f->w[1].jobs_per_s, 5, "worker 1 respawned: jobs from zero");
    TAP_IS_STR(f->w[1].state, "starting", "worker 1: its state now");
    TAP_OK(isnan(f->w[1].io_pct), "worker 1: no io figure, no io share");

    TAP_IS_INT(f->nclients, 2, "client rows: the later snapshot's");
    TAP_IS_INT(f->c[0].id, 1, "client 1 first");
    NEAR(f->c[0].batches_per_s, 100, "client 1: batches/s");
    NEAR(f->c[0].samples_per_s, 1000, "client 1: samples/s");
    NEAR(f->c[0].wait_pct, 20, "client 1: waited 0.4 s of 2");
    TAP_IS_INT(f->c[0].verdict, TOP_VERDICT_INPUT_BOUND, "client 1: input-bound");
    NEAR(f->c[0].ready, 0, "client 1: ready");
    NEAR(f->c[0].inflight, 4, "client 1: inflight");
    NEAR(f->c[0].depth, 4, "client 1: depth");
    TAP_IS_INT(f->c[1].id, 3, "client 3: new in the interval");
    NEAR(f->c[1].batches_per_s, 10, "client 3: batches from zero");
    NEAR(f->c[1].wait_pct, 5, "client 3: wait from zero");
    TAP_IS_INT(f->c[1].verdict, TOP_VERDICT_FAILED, "client 3: failed wins over the wait");
    TAP_IS_STR(top_verdict_name(TOP_VERDICT_INPUT_BOUND), "input-bound", "verdict name");
    TAP_IS_STR(top_verdict_name(TOP_VERDICT_COMPUTE_BOUND), "compute-bound", "verdict name");
    TAP_IS_STR(top_verdict_name(TOP_VERDICT_NETWORK_BOUND), "network-bound", "verdict name");
    TAP_OK(isnan(f->cache_bytes), "nothing fetched: no remote line");

    /* a daemon serving a remote dataset: its cache and fetches */
    {
        static const char ra[] = "fetch.bytes 1000\ncache.hits 10\ncache.misses 2\n"
                                 "cache.evictions 0\n";
        static const char rb[] = "fetch.bytes 5000\ncache.hits 30\ncache.misses 4\n"
                                 "cache.evictions 6\ncache.bytes 4096\ncache.limit_bytes 8192\n"
                                 "cache.shards 3\nfetch.in_flight 2\n"
                                 "clients.network_waiting 1\n";

        top_snap_parse_stats(a, ra, sizeof(ra) - 1);
        top_snap_parse_stats(b, rb, sizeof(rb) - 1);
        top_compute(a, b, 5.0, f);
        NEAR(f->cache_bytes, 4096, "remote: cache bytes");
        NEAR(f->cache_limit, 8192, "remote: its limit");
        NEAR(f->cache_shards, 3, "remote: shards in it");
        NEAR(f->fetch_in_flight, 2, "remote: fetches in flight");
        NEAR(f->network_waiting, 1, "remote: clients waiting on the network");
        NEAR(f->fetch_bytes_per_s, 2000, "remote: 4000 bytes fetched over 2 s");
        NEAR(f->hits_per_s, 10, "remote: hits/s");
        NEAR(f->misses_per_s, 1, "remote: misses/s");
        NEAR(f->evictions_per_s, 3, "remote: evictions/s");
    }

    /* client 1 input-bound, and the daemon says its waits were the network's */
    top_snap_parse_stats(b, "clients.1.bound network\n", 24);
    top_compute(a, b, 5.0, f);
    TAP_IS_INT(f->c[0].verdict, TOP_VERDICT_NETWORK_BOUND, "client 1: network-bound");
    top_snap_parse_stats(b, "clients.1.bound input\n", 22);
    top_compute(a, b, 5.0, f);
    TAP_IS_INT(f->c[0].verdict, TOP_VERDICT_INPUT_BOUND, "client 1: input-bound again");

    /* client 1 waiting less: compute-bound */
    b->c[0].waited_s = 0.2;
    top_compute(a, b, 5.0, f);
    NEAR(f->c[0].wait_pct, 5, "client 1: waited 0.1 s of 2");
    TAP_IS_INT(f->c[0].verdict, TOP_VERDICT_COMPUTE_BOUND, "client 1: compute-bound");

    /* the daemon restarted: its uptime went back */
    top_compute(b, a, 2.0, f);
    TAP_OK(f->restarted, "restart: noticed");
    TAP_OK(isnan(f->samples_per_s) && isnan(f->w[0].busy_pct) && isnan(f->c[0].wait_pct),
           "restart: no rates");
    NEAR(f->uptime_s, 10, "restart: the new daemon's figures");

    /* a STATS without uptime_seconds: the wall clock */
    a->uptime_s = b->uptime_s = NAN;
    top_compute(a, b, 4.0, f);
    NEAR(f->interval_s, 4, "no uptime: the caller's interval");
    NEAR(f->samples_per_s, 500, "no uptime: rates over it");
}

/* workers auto's lines (daemon/autoscale.c) reach the frame's header */
static void test_autoscale(struct top_snap *a, struct top_frame *f)
{
    static const char body[] =
        "uptime_seconds 3\n"
        "workers.auto 1\n"
        "workers.budget 2\n"
        "workers.auto_changes 3\n"
        "workers.mode auto\n"
        "workers.budget_source cgroup (cpu.max 150000 100000 in /sys/fs/cgroup/x/cpu.max)\n"
        "workers.auto_state budget-limited\n"
        "workers.auto_reason client 3 input-bound 41% over 5 s: 1 -> 2\n"
        "clients.3.dataset photos\n"
        "clients.3.wait_share 0.412\n"
        "clients.3.bound input\n";

    top_snap_init(a);
    TAP_OK(isnan(a->workers_budget) && !a->workers_mode[0], "auto: nothing before a parse");
    TAP_IS_INT(top_snap_parse_stats(a, body, sizeof(body) - 1), 11, "auto: every line used");
    TAP_IS_INT(a->bad_lines, 0, "auto: no bad line");
    TAP_IS_STR(a->workers_mode, "auto", "auto: workers.mode");
    TAP_IS_STR(a->auto_state, "budget-limited", "auto: workers.auto_state");
    TAP_IS_STR(a->budget_source, "cgroup", "auto: the budget source's first word");
    TAP_IS_STR(a->auto_reason, "client 3 input-bound 41% over 5 s: 1 -> 2",
               "auto: the reason, whole");
    NEAR(a->workers_budget, 2, "auto: workers.budget");
    NEAR(a->auto_changes, 3, "auto: workers.auto_changes");
    TAP_IS_INT(a->nclients, 1, "auto: a client's wait_share and bound make no extra row");
    top_compute(NULL, a, 0, f);
    TAP_OK(strcmp(f->workers_mode, "auto") == 0 && strcmp(f->budget_source, "cgroup") == 0 &&
               strcmp(f->auto_state, "budget-limited") == 0 && f->workers_budget == 2 &&
               f->auto_changes == 3 && strstr(f->auto_reason, "1 -> 2"),
           "auto: the frame carries mode, budget, source, state, changes and reason");
}

/* augment.<op>_ns / _images: each op's us per image over the interval,
 * only the ops that ran in it; none without an interval or after a restart */
static void test_augment(struct top_snap *a, struct top_snap *b, struct top_frame *f)
{
    static const char first[] =
        "uptime_seconds 10\n"
        "total.samples 100\n"
        "augment.hflip_ns 80000\n"
        "augment.hflip_images 10\n"
        "augment.hflip_ns_per_image 8000.0\n"
        "augment.affine_ns 4000000\n"
        "augment.affine_images 10\n"
        "augment.invert_ns 0\n"
        "augment.invert_images 0\n";
    static const char later[] =
        "uptime_seconds 12\n"
        "total.samples 200\n"
        "augment.hflip_ns 880000\n"
        "augment.hflip_images 110\n"
        "augment.hflip_ns_per_image 8000.0\n"
        "augment.affine_ns 44000000\n"
        "augment.affine_images 110\n"
        "augment.invert_ns 0\n"
        "augment.invert_images 0\n"
        "augment.trivialaugment_ns 5000000\n" /* new in the interval: from zero */
        "augment.trivialaugment_images 50\n"
        "augment.a_name_far_too_long_for_a_row_of_top_ns 1\n"
        "augment.bad_ns x\n";

    top_snap_init(a);
    top_snap_init(b);
    TAP_IS_INT(top_snap_parse_stats(a, first, sizeof(first) - 1), 8,
               "augment: _ns and _images used, _ns_per_image left");
    TAP_IS_INT(a->naug, 3, "augment: three ops");
    TAP_IS_STR(a->aug[1].name, "affine", "augment: in STATS order");
    top_snap_parse_stats(b, later, sizeof(later) - 1);
    TAP_IS_INT(b->naug, 5, "augment: a new op and a bad value's row; the long name skipped");
    TAP_IS_INT(b->bad_lines, 1, "augment: a value that is no number is a bad line");
    top_compute(NULL, a, 0, f);
    TAP_IS_INT(f->naug, 0, "augment: nothing without an interval");
    TAP_OK(isnan(f->aug_us_per_image), "augment: no total without an interval");
    top_compute(a, b, 0, f);
    TAP_IS_INT(f->naug, 3, "augment: the ops that ran in the interval (invert did not)");
    TAP_IS_STR(f->aug[0].name, "hflip", "augment: hflip first");
    NEAR(f->aug[0].us_per_image, 8, "augment: hflip 800000 ns over 100 images");
    TAP_IS_STR(f->aug[1].name, "affine", "augment: then affine");
    NEAR(f->aug[1].us_per_image, 400, "augment: affine 40 ms over 100 images");
    TAP_IS_STR(f->aug[2].name, "trivialaugment", "augment: a new op from zero");
    NEAR(f->aug[2].us_per_image, 100, "augment: trivialaugment 5 ms over 50 images");
    NEAR(f->aug_us_per_image, 508, "augment: the sum per image");
    top_compute(b, a, 0, f); /* uptime went back: a restart */
    TAP_IS_INT(f->naug, 0, "augment: nothing after a restart");
}

int main(void)
{
    struct top_snap *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    struct top_frame *f = malloc(sizeof(*f));

    if (!a || !b || !f)
        tap_bail("out of memory");
    test_parse(a);
    test_caps(a);
    test_compute(a, b, f);
    test_autoscale(a, f);
    test_augment(a, b, f);
    free(a);
    free(b);
    free(f);
    return tap_done();
}
