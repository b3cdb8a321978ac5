/*
 * top_calc.h - the figures of `ringfeedctl top` (ctl_top.c): a STATS
 * reply (and STATUS's line) parsed into a snapshot, and two snapshots
 * turned into one frame of rates and shares.  Pure functions of their
 * arguments: no I/O, no heap, no clock; the caller owns every struct.
 *
 * Rates are the difference of two snapshots over the interval between
 * them.  The interval is the daemon's own: the difference of the two
 * uptime_seconds (both read by the daemon when it wrote the counters), or
 * the caller's wall-clock interval when a snapshot lacks uptime_seconds.
 * A figure that cannot be had is NAN: every rate of a frame without an
 * earlier snapshot, or after the daemon restarted (its uptime or a total
 * counter went backwards), and every figure STATS did not carry.
 *
 * A worker slot whose pid changed, or a client id new since the earlier
 * snapshot, started within the interval: its counters all grew within it,
 * so its deltas are taken from zero.
 */
#ifndef RINGFEED_TOOLS_TOP_CALC_H
#define RINGFEED_TOOLS_TOP_CALC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl.h"

#define TOP_WORKERS_MAX CTL_WORKERS_MAX /* worker rows kept; more are counted */
#define TOP_CLIENTS_MAX 256             /* client rows kept; more are counted */
#define TOP_STATE_MAX 16                /* a worker's state word, NUL included */
#define TOP_WORD_MAX 48                 /* io.backend, the version, workers auto's words */
#define TOP_REASON_MAX 192              /* workers.auto_reason, NUL included */
#define TOP_AUG_MAX 32                  /* augmentation ops kept; more are skipped */
#define TOP_AUG_NAME_MAX 32             /* an op's STATS name, NUL included */

/* A client waiting on the daemon for more than this share of the interval
 * (in %) is "input-bound": the loader, not its compute, holds it back. */
#define TOP_INPUT_BOUND_PCT 10.0

/* One workers.<idx>.* group of STATS. */
struct top_worker_snap {
    uint32_t idx;
    double pid, jobs, samples, busy_s, io_s, decode_s, transform_s;
    char state[TOP_STATE_MAX];
};

/* A client's dataset column: "fm", or with a subset "fm[val]",
 * "fm[0:5000]" (STATS clients.<id>.subset). */
#define TOP_DATASET_MAX (CTL_DATASET_NAME_MAX + 48)

/* One clients.<id>.* group of STATS. */
struct top_client_snap {
    uint32_t id;
    char dataset[TOP_DATASET_MAX + 1];
    char name[CTL_LABEL_MAX + 1];    /* "" when the client gave none */
    double rank, world, batch, depth, batches, samples, waited_s, ready, inflight,
        ring_bytes, locked, failed;
    double uid;                      /* NAN from a daemon that does not say */
    bool network;                    /* clients.<id>.bound says network: its next
                                        batch waited mostly for a remote shard */
};

/* One augmentation op's counters: STATS augment.<name>_ns and
 * augment.<name>_images (the workers' time in it and the images it ran
 * on), NAN when absent. */
struct top_aug_snap {
    char name[TOP_AUG_NAME_MAX];
    double ns, images;
};

/* One STATS reply (and, when given, STATUS's line). */
struct top_snap {
    /* daemon-wide figures, NAN when absent */
    double uptime_s, workers_target, workers_alive, workers_deaths, clients_attached,
        datasets, datasets_failed, jobs_queued, batches, samples, jobs, busy_s, io_s,
        decode_s, transform_s, image_s, resize_s, write_s, bad, substituted, rings_bytes,
        locked_bytes, budget_bytes, workers_auto, workers_budget, auto_changes;
    /* remote datasets (daemon/ahead.h): the node cache and its fetches */
    double cache_bytes, cache_limit, cache_shards, cache_hits, cache_misses, cache_evictions,
        fetch_bytes, fetch_in_flight, network_waiting;
    char io_backend[TOP_WORD_MAX]; /* "" when absent */
    char version[TOP_WORD_MAX];    /* from STATUS; "" when not parsed */
    /* workers auto (daemon/autoscale.c): "" when absent; the budget's
     * source is its first word (config, cpus, cgroup) */
    char workers_mode[TOP_WORD_MAX], auto_state[TOP_WORD_MAX], budget_source[TOP_WORD_MAX];
    char auto_reason[TOP_REASON_MAX];
    bool stopping;                 /* STATUS said so */
    uint32_t nworkers, nclients, naug;
    uint32_t dropped;              /* worker and client rows past the caps */
    uint32_t bad_lines;            /* lines with no value, or a known key whose value is no number */
    struct top_worker_snap w[TOP_WORKERS_MAX];
    struct top_client_snap c[TOP_CLIENTS_MAX];
    struct top_aug_snap aug[TOP_AUG_MAX]; /* in STATS order (the daemon's table) */
};

enum top_verdict {
    TOP_VERDICT_NONE,          /* no interval to judge by */
    TOP_VERDICT_COMPUTE_BOUND, /* waited at most TOP_INPUT_BOUND_PCT */
    TOP_VERDICT_INPUT_BOUND,   /* waited more */
    TOP_VERDICT_FAILED,        /* its stream failed */
    TOP_VERDICT_NETWORK_BOUND, /* waited more, and the daemon judges the wait the
                                  network's (clients.<id>.bound network) */
    TOP_VERDICT_COUNT
};

/* "-", "compute-bound", "input-bound", "failed", "network-bound"; "?" out
 * of range. */
const char *top_verdict_name(enum top_verdict v);

struct top_worker_row {
    uint32_t idx;
    double pid;
    char state[TOP_STATE_MAX];
    double busy_pct;                          /* of the interval, 0..100 */
    double jobs_per_s, samples_per_s;
    double io_pct, decode_pct, transform_pct; /* of its busy time; NAN when it was idle */
};

struct top_client_row {
    uint32_t id;
    char dataset[TOP_DATASET_MAX + 1];
    char name[CTL_LABEL_MAX + 1];
    double rank, world, depth, ready, inflight;
    double uid; /* NAN when not known */
    double batches_per_s, samples_per_s;
    double wait_pct; /* of the interval, 0..100 */
    enum top_verdict verdict;
};

/* An augmentation op that ran within the interval: its workers' time per
 * image it ran on (drawn to apply or not), in microseconds. */
struct top_aug_row {
    char name[TOP_AUG_NAME_MAX];
    double us_per_image;
};

/* What one refresh shows. */
struct top_frame {
    double interval_s;   /* the interval the rates are over; NAN without one */
    bool restarted;      /* the daemon restarted between the snapshots */
    /* the header: counts and gauges from the later snapshot ... */
    double uptime_s, workers_alive, workers_target, clients_attached, datasets,
        datasets_failed, jobs_queued, rings_bytes, budget_bytes, locked_bytes, bad;
    char io_backend[TOP_WORD_MAX], version[TOP_WORD_MAX];
    /* workers auto: mode "" when the daemon does not say (an older one) */
    double workers_budget, auto_changes;
    char workers_mode[TOP_WORD_MAX], auto_state[TOP_WORD_MAX], budget_source[TOP_WORD_MAX];
    char auto_reason[TOP_REASON_MAX];
    bool stopping;
    /* ... and rates over the interval */
    double samples_per_s, batches_per_s, jobs_per_s, bad_per_s;
    /* remote datasets: gauges from the later snapshot, NAN (no line) from a
     * daemon that serves none; and rates over the interval */
    double cache_bytes, cache_limit, cache_shards, fetch_in_flight, network_waiting;
    double fetch_bytes_per_s, hits_per_s, misses_per_s, evictions_per_s;
    double busy_pct;     /* the pool's busy time over (interval x alive workers) */
    double io_pct, decode_pct, transform_pct; /* of the pool's busy time (time.*) */
    uint32_t nworkers, nclients, dropped;
    struct top_worker_row w[TOP_WORKERS_MAX];
    struct top_client_row c[TOP_CLIENTS_MAX];
    /* the augmentation ops whose image count grew within the interval, in
     * STATS order (none without an interval: a stream augments only while
     * its ops run), and the sum of their times per image (NAN when none):
     * what the whole augmentation costs an image when every stream runs
     * every op shown */
    uint32_t naug;
    struct top_aug_row aug[TOP_AUG_MAX];
    double aug_us_per_image;
};

/* Empties s: every figure NAN, no rows, no words. */
void top_snap_init(struct top_snap *s);

/*
 * Adds the lines of a STATS reply body, buf[0..len) ("key value" lines,
 * each ending in LF, a CR before it allowed) to s (top_snap_init it
 * first).  Unknown keys are skipped, so a newer daemon's lines do no harm;
 * a line without a value, or a known key whose value is not a number, is
 * skipped and counted in s->bad_lines.  Returns the number of lines it
 * used; s holds only copies, nothing points into buf.
 */
size_t top_snap_parse_stats(struct top_snap *s, const char *buf, size_t len);

/*
 * Takes the version and the "stopping" word from STATUS's line
 * ("ringfeedd 0.1.0: workers=2/2 ... [stopping]"), text[0..len) without
 * its "OK ".  Returns 0, or -EINVAL when the line does not start
 * "ringfeedd VERSION:" (s is then unchanged).
 */
int top_snap_parse_status(struct top_snap *s, const char *text, size_t len);

/*
 * Fills f from cur and, when prev is not NULL, the rates over the interval
 * since prev (wall_s: the caller's seconds between the two, used only when
 * a snapshot lacks uptime_seconds).  Rows follow cur's order.
 */
void top_compute(const struct top_snap *prev, const struct top_snap *cur, double wall_s,
                 struct top_frame *f);

#endif
