/*
 * stats.c - what STATS, STATUS and METRICS report: one table of names.
 *
 * STATS_MAP is the one source of truth for the daemon-wide figures: their
 * dotted name (STATS), their Prometheus name (dots become underscores,
 * prefixed "ringfeed_"), type and help text (METRICS).  Per-worker and
 * per-client lines follow with the worker's or client's number in the name
 * (workers.<i>.<field>, clients.<id>.<field>).  The controller's words
 * (workers.mode, .budget_source, .auto_state, .auto_reason) and each
 * client's wait_share and bound over its window (autoscale.c's verdict)
 * are STATS lines only, after the rest, as are augment.<op>_ns, _images and
 * _ns_per_image for each augmentation op in this build (augment_lines).
 *
 * METRICS is the Prometheus text exposition format (version 0.0.4): per
 * family one "# HELP" and one "# TYPE" line, then its samples, families
 * never interleaved.  Names match [a-zA-Z_:][a-zA-Z0-9_:]*; every counter
 * ends in _total (a STATS name's leading "total." is dropped so it does
 * not say total twice: total.batches is ringfeed_batches_total).  Workers
 * and clients are labelled samples of shared families:
 *     ringfeed_worker_jobs_total{worker="0"} 812
 *     ringfeed_client_batches_total{dataset="fmnist",name="",rank="0",world="1"} 120
 * Label values are escaped as the format says (\\, \", \n); HELP text
 * too (\\, \n).
 *
 * Client series are labelled by what stays the same across a reconnect
 * (dataset, name, rank, world), never by the attach id, which only
 * ringfeed_client_info carries (one sample per attach).  Attaches that
 * share all four labels are one series, their figures added up (ring_locked
 * the least, failed the most of them); client_metrics sorts them so.
 * Two histograms, daemon-wide (stream.c WAITS, hist.h buckets), follow:
 * ringfeed_client_wait_seconds and ringfeed_batch_production_seconds.  Per
 * client histograms would be 23 series each, 23552 of the reply's 32768
 * lines at 1024 clients; per client there are the sums and counts instead
 * (waited_seconds_total / waits_total, production_seconds_total /
 * batches_total).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "revision.h"
#include "config.h"
#include "ahead.h"
#include "augment.h"
#include "daemon.h"
#include "log.h"

static double uptime_s(struct daemon *d) { return (double)(clock_mono_ns() - d->start_ns) / 1e9; }

static struct wire_counters totals(struct daemon *d)
{
    struct wire_counters c;

    pool_totals(d, &c);
    return c;
}

/* Jobs handed to workers whose DONE has not come back yet. */
static uint64_t jobs_running(const struct daemon *d)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < POOL_MAX; i++)
        n += d->pool.w[i].ninflight;
    return n;
}

static double bad_total(struct daemon *d)
{
    struct wire_counters c = totals(d);
    double n = 0;

    for (int i = 0; i < BAD_KIND_COUNT; i++)
        n += (double)c.bad[i];
    return n;
}

static struct ahead_counts ahead(const struct daemon *d)
{
    struct ahead_counts c;

    ahead_counts(d, &c);
    return c;
}

static struct remote_counts remote(const struct daemon *d)
{
    struct remote_counts c;

    remote_counts(d, &c);
    return c;
}

/* X(dotted name, counter|gauge, help, value expression over d) */
#define STATS_MAP(X)                                                                     \
    X("uptime_seconds", "gauge", "Seconds since the daemon started", uptime_s(d))         \
    X("workers.target", "gauge", "Workers asked for", d->pool.target)                    \
    X("workers.alive", "gauge", "Worker processes running", d->pool.alive)               \
    X("workers.spawned", "counter", "Worker processes started", d->pool.spawned)         \
    X("workers.deaths", "counter", "Workers that died unasked", d->pool.deaths)          \
    X("workers.retired", "counter", "Workers retired on request", d->pool.retired)       \
    X("workers.respawn_loop", "gauge", "1 while workers keep dying young (respawn loop)",  \
      d->pool.respawn_loop)                                                              \
    X("workers.respawn_loops", "counter", "Respawn loops reported", d->pool.respawn_loops) \
    X("workers.watchdog_kills", "counter", "Workers killed for a job past watchdog-sec",  \
      d->pool.watchdog_kills)                                                            \
    X("workers.auto", "gauge", "1 while the daemon sizes the pool itself (workers auto)", \
      d->autoscale.mode == AS_AUTO)                                                      \
    X("workers.budget", "gauge", "CPUs the worker pool may use (cpu-budget, or derived)", \
      d->autoscale.budget)                                                               \
    X("workers.auto_changes", "counter", "Pool size changes made by workers auto",        \
      d->autoscale.changes)                                                              \
    X("clients.attached", "gauge", "Clients attached now", d->sched.nstreams)                  \
    X("clients.attaches", "counter", "Attaches accepted", d->attaches)                   \
    X("clients.detaches", "counter", "Clients detached", d->detaches)                    \
    X("clients.refused", "counter", "Attaches refused", d->attach_refused)               \
    X("streams.failed", "counter", "Client streams failed (the ring says why: a dataset "     \
      "failed, bad samples in a row, a field over its capacity)", d->sched.streams_failed)   \
    X("clients.kicked", "counter", "Clients disconnected for bad ring writes",          \
      d->clients_killed)                                                                 \
    X("connections.open", "gauge", "Control connections open", d->conn_open)             \
    X("connections.refused", "counter", "Connections refused over max-connections",          \
      d->conn_refused)                                                                      \
    X("connections.idle_closed", "counter", "Connections closed after idle-sec",            \
      d->conn_idle_closed)                                                                  \
    X("connections.total", "counter", "Control connections accepted", d->conn_total)     \
    X("connections.denied", "counter", "Control connections refused by the access rule", \
      d->conn_denied)                                                                    \
    X("reloads", "counter", "Configuration reloads (SIGHUP)", d->reloads)               \
    X("reloads.failed", "counter", "Reloads refused, the running config kept",          \
      d->reload_failures)                                                                \
    X("datasets", "gauge", "Datasets offered to clients", catalog_offered(d))           \
    X("datasets.failed", "counter", "Datasets failed: at start, or their files changed while " \
      "served", d->datasets_failed)                                                        \
    X("datasets.failing", "gauge", "Configured datasets not served now (failed), until a "   \
      "reload opens them again", catalog_failing(d))                                       \
    X("cache.bytes", "gauge", "Bytes in the node's cache folder for remote datasets "         \
      "(fetches in flight included)", remote(d).cache_bytes)                                 \
    X("cache.limit_bytes", "gauge", "The cache folder's budget (cache-size)",                \
      remote(d).cache_limit)                                                                 \
    X("fetch.bytes", "counter", "Bytes received from remote datasets' servers",              \
      remote(d).fetch_bytes)                                                                 \
    X("fetch.objects", "counter", "Remote files fetched into the cache", remote(d).fetch_objects) \
    X("fetch.retries", "counter", "Remote requests repeated after a retried failure",        \
      remote(d).fetch_retries)                                                               \
    X("fetch.failures", "counter", "Remote files that could not be fetched",                 \
      remote(d).fetch_failures)                                                              \
    X("fetch.in_flight", "gauge", "Remote shards being fetched now", ahead(d).fetching)      \
    X("cache.shards", "gauge", "Shards of served remote datasets in the cache",             \
      ahead(d).present)                                                                      \
    X("cache.hits", "counter", "Remote shards found in the cache when a batch was planned",  \
      ahead(d).hits)                                                                         \
    X("cache.misses", "counter", "Remote shards fetched for a stream's next batch (late)",   \
      ahead(d).misses)                                                                       \
    X("cache.prefetched", "counter", "Remote shards fetched ahead of the batch needing them", \
      ahead(d).prefetched)                                                                   \
    X("cache.evictions", "counter", "Remote shards evicted to make room (cache-evict)",      \
      ahead(d).evictions)                                                                    \
    X("cache.evicted_bytes", "counter", "Bytes of the shards evicted", ahead(d).evicted_bytes) \
    X("clients.network_waiting", "gauge", "Clients whose next batch waits for a remote "     \
      "shard now", sched_network_waiting(d))                                                 \
    X("requests.errors", "counter", "Requests answered with ERR", d->bad_requests)       \
    X("jobs.queued", "gauge", "Jobs waiting for a worker", d->sched.fq.queued)                    \
    X("jobs.running", "gauge", "Jobs sent to workers, their DONE not back yet",         \
      jobs_running(d))                                                                   \
    X("total.batches", "counter", "Batches published", d->batches)                       \
    X("total.samples", "counter", "Samples published", d->samples)                       \
    X("total.jobs", "counter", "Jobs run by workers", totals(d).jobs)                    \
    X("total.samples_made", "counter", "Samples the workers made (a shared batch's once)",  \
      totals(d).samples)                                                                 \
    X("total.bytes_read", "counter", "Bytes read from shards", totals(d).bytes_read)     \
    X("total.jpeg_tiled", "counter",                                                     \
      "JPEG samples decoded from the restart-interval tiles under the crop", totals(d).tiled) \
    X("time.busy_seconds", "counter", "Worker time spent on jobs",                      \
      (double)totals(d).busy_ns / 1e9)                                                   \
    X("time.cpu_seconds", "counter", "Worker CPU time spent on jobs (busy less waits for a CPU)", \
      (double)totals(d).cpu_ns / 1e9)                                                    \
    X("time.io_seconds", "counter", "Worker time reading records",                      \
      (double)totals(d).io_ns / 1e9)                                                     \
    X("time.decode_seconds", "counter", "Worker time decompressing records",            \
      (double)totals(d).decode_ns / 1e9)                                                 \
    X("time.transform_seconds", "counter", "Worker time transforming samples",          \
      (double)totals(d).transform_ns / 1e9)                                              \
    X("time.image_decode_seconds", "counter", "Worker time decoding JPEGs (in transform)",  \
      (double)totals(d).image_ns / 1e9)                                                  \
    X("time.resize_seconds", "counter", "Worker time resampling images (in transform)",  \
      (double)totals(d).resize_ns / 1e9)                                                 \
    X("time.write_seconds", "counter", "Worker time writing samples to slots (in transform)", \
      (double)totals(d).write_ns / 1e9)                                                  \
    X("errors.bad_samples", "counter", "Bad samples (all reasons)", bad_total(d))        \
    X("errors.bad.read", "counter", "Bad samples: read failed", totals(d).bad[BAD_READ]) \
    X("errors.bad.checksum", "counter", "Bad samples: checksum mismatch",               \
      totals(d).bad[BAD_CHECKSUM])                                                       \
    X("errors.bad.decode", "counter", "Bad samples: could not decode",                  \
      totals(d).bad[BAD_DECODE])                                                         \
    X("errors.bad.shape", "counter", "Bad samples: wrong size or shape",                \
      totals(d).bad[BAD_SHAPE])                                                          \
    X("errors.bad.too_large", "counter", "Bad samples: over a size cap",                \
      totals(d).bad[BAD_TOO_LARGE])                                                      \
    X("errors.bad.quarantined", "counter", "Bad samples: quarantined",                  \
      totals(d).bad[BAD_QUARANTINED])                                                    \
    X("errors.substituted", "counter", "Samples replaced by the next good one",          \
      totals(d).substituted)                                                             \
    X("total.boxes_dropped", "counter", "Boxes whose centre left their image's crop",     \
      totals(d).boxes_dropped)                                                           \
    X("errors.quarantined", "counter", "Samples quarantined for killing workers",        \
      d->quarantine.total)                                                                    \
    X("sharing.groups", "gauge", "Groups of 2+ clients whose batches are decoded once",     \
      sched_share_count(d, false))                                                             \
    X("sharing.members", "gauge", "Clients in those groups", sched_share_count(d, true))         \
    X("sharing.batches", "counter", "Batches decoded once for 2+ clients",               \
      d->sched.share.shared_batches)                                                           \
    X("sharing.copies", "counter", "Ring writes of shared batches past the first (decodes " \
      "saved)", d->sched.share.shared_writes)                                                   \
    X("sharing.joins", "counter", "Clients that joined a group", d->sched.share.share_joins)     \
    X("sharing.splits", "counter", "Members split off a group for holding it back",       \
      d->sched.share.share_splits)                                                             \
    X("memory.rings_bytes", "gauge", "Bytes of client rings", d->sched.mem_used)               \
    X("memory.locked_bytes", "gauge", "Bytes of rings locked in RAM", d->sched.mem_locked)     \
    X("memory.budget_bytes", "gauge", "The memory budget for rings", d->cf.memory_budget)

static int put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *len)
        return -1;
    *len += (size_t)n;
    return 0;
}

static void fmt_value(char *out, size_t cap, double v)
{
    if (v == (double)(uint64_t)v && v < 1e15)
        snprintf(out, cap, "%llu", (unsigned long long)v);
    else
        snprintf(out, cap, "%.6f", v);
}

static const char *const worker_fields[] = {
    "pid", "state", "jobs", "samples", "busy_s", "io_s", "decode_s", "transform_s",
};

static int worker_lines(struct daemon *d, char *buf, size_t cap, size_t *len)
{
    static const char *const states[] = { "empty", "starting", "ready", "retiring" };
    int lines = 0;

    for (unsigned i = 0; i < POOL_MAX; i++) {
        const struct worker *w = &d->pool.w[i];
        char v[8][40];

        if (w->state == W_EMPTY)
            continue;
        snprintf(v[0], 40, "%d", (int)w->pid);
        snprintf(v[1], 40, "%s", states[w->state]);
        snprintf(v[2], 40, "%llu", (unsigned long long)w->c.jobs);
        snprintf(v[3], 40, "%llu", (unsigned long long)w->c.samples);
        snprintf(v[4], 40, "%.3f", (double)w->c.busy_ns / 1e9);
        snprintf(v[5], 40, "%.3f", (double)w->c.io_ns / 1e9);
        snprintf(v[6], 40, "%.3f", (double)w->c.decode_ns / 1e9);
        snprintf(v[7], 40, "%.3f", (double)w->c.transform_ns / 1e9);
        for (unsigned f = 0; f < 8; f++) {
            if (put(buf, cap, len, "workers.%u.%s %s\n", i, worker_fields[f], v[f]) < 0)
                return -1;
            lines++;
        }
    }
    return lines;
}

/*
 * augment.<op>_ns, augment.<op>_images and augment.<op>_ns_per_image for
 * every augmentation op in this build (worker/augment.h): the workers'
 * time in the op, the images it ran on (drawn to apply or not), and their
 * ratio (0 before the first).
 */
static int augment_lines(struct daemon *d, char *buf, size_t cap, size_t *len)
{
    struct wire_counters t = totals(d);
    int lines = 0;

    for (uint32_t i = 0; i < AUG_OP_COUNT; i++) {
        const char *name = aug_op_stat_name(i);

        if (!augment_available(i))
            continue;
        if (put(buf, cap, len, "augment.%s_ns %llu\n", name,
                (unsigned long long)t.aug_ns[i]) < 0 ||
            put(buf, cap, len, "augment.%s_images %llu\n", name,
                (unsigned long long)t.aug_images[i]) < 0 ||
            put(buf, cap, len, "augment.%s_ns_per_image %.1f\n", name,
                t.aug_images[i] ? (double)t.aug_ns[i] / (double)t.aug_images[i] : 0.0) < 0)
            return -1;
        lines += 3;
    }
    return lines;
}

/*
 * workers auto's words, then clients.<id>.wait_share (0..1 over the
 * controller's window, "-" while it is too new to judge) and
 * clients.<id>.bound (input, compute or -) for every attached client.
 */
static int autoscale_lines(struct daemon *d, char *buf, size_t cap, size_t *len)
{
    const struct autoscale *as = &d->autoscale;
    const struct stream *st = NULL;
    struct sched_client c;
    int lines = 4;

    if (put(buf, cap, len, "workers.mode %s\n", as->mode == AS_AUTO ? "auto" : "fixed") < 0 ||
        put(buf, cap, len, "workers.budget_source %s\n", as->budget_source) < 0 ||
        put(buf, cap, len, "workers.auto_state %s\n",
            as->mode == AS_AUTO ? autoscale_state_name(as->state) : "-") < 0 ||
        put(buf, cap, len, "workers.auto_reason %s\n", as->reason[0] ? as->reason : "-") < 0)
        return -1;
    while ((st = sched_client_next(d, st, &c))) {
        double share;
        enum as_bound b = autoscale_client(d, c.id, &share);
        char v[40];

        if (share < 0)
            snprintf(v, sizeof(v), "-");
        else
            snprintf(v, sizeof(v), "%.3f", share);
        if (put(buf, cap, len, "clients.%u.wait_share %s\n", c.id, v) < 0 ||
            put(buf, cap, len, "clients.%u.bound %s\n", c.id, autoscale_bound_name(b)) < 0)
            return -1;
        lines += 2;
    }
    return lines;
}

int stats_format(struct daemon *d, char *buf, size_t cap, size_t *len)
{
    int lines = 0, n;
    char v[40];

#define STATS_LINE(name, type, help, expr)                                              \
    fmt_value(v, sizeof(v), (double)(expr));                                            \
    if (put(buf, cap, len, "%s %s\n", name, v) < 0)                                     \
        return -1;                                                                      \
    lines++;
    STATS_MAP(STATS_LINE)
#undef STATS_LINE
    if (put(buf, cap, len, "io.backend %s\n", d->pool.io_backend) < 0)
        return -1;
    lines++;
    if (put(buf, cap, len, "io.reason %s\n",
            d->pool.io_reason[0] ? d->pool.io_reason : "-") < 0)
        return -1;
    lines++;
    n = worker_lines(d, buf, cap, len);
    if (n < 0)
        return -1;
    lines += n;
    n = augment_lines(d, buf, cap, len);
    if (n < 0)
        return -1;
    lines += n;
    n = sched_stats_lines(d, buf, cap, len);
    if (n < 0)
        return -1;
    lines += n;
    n = autoscale_lines(d, buf, cap, len);
    if (n < 0)
        return -1;
    return lines + n;
}

/* ringfeed_<dotted name, '.' as '_'>, counters ending in _total. */
static void prom_name(char *out, size_t cap, const char *dotted, bool counter)
{
    size_t n;

    if (counter && strncmp(dotted, "total.", 6) == 0)
        dotted += 6;
    snprintf(out, cap, "ringfeed_%s", dotted);
    for (char *p = out; *p; p++)
        if (*p == '.')
            *p = '_';
    n = strlen(out);
    if (counter && (n < 6 || strcmp(out + n - 6, "_total") != 0))
        snprintf(out + n, cap - n, "_total");
}

/* Writes s with each byte in esc escaped: '\\' -> \\\\, '"' -> \\", LF -> \\n. */
static int put_escaped(char *buf, size_t cap, size_t *len, const char *s, const char *esc)
{
    for (; *s; s++) {
        int rc;

        if (*s == '\n')
            rc = put(buf, cap, len, "\\n");
        else if (strchr(esc, *s))
            rc = put(buf, cap, len, "\\%c", *s);
        else
            rc = put(buf, cap, len, "%c", *s);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int family(char *buf, size_t cap, size_t *len, const char *name, const char *type,
                  const char *help)
{
    if (put(buf, cap, len, "# HELP %s ", name) < 0 || put_escaped(buf, cap, len, help, "\\") < 0)
        return -1;
    return put(buf, cap, len, "\n# TYPE %s %s\n", name, type);
}

/* name{k1="v1",k2="v2",...} value; labels are NULL-terminated key, value pairs. */
/* The config's name = (daemon="NAME" on every sample), "" for none: set by
 * stats_metrics for the reply it writes. */
static const char *daemon_label = "";

static int sample(char *buf, size_t cap, size_t *len, const char *name, double value,
                  const char *const *labels)
{
    bool any = daemon_label[0] != '\0';
    char v[40];

    if (put(buf, cap, len, "%s", name) < 0)
        return -1;
    if (any && (put(buf, cap, len, "{daemon=\"") < 0 ||
                put_escaped(buf, cap, len, daemon_label, "\\\"") < 0 ||
                put(buf, cap, len, "\"") < 0))
        return -1;
    for (unsigned i = 0; labels && labels[i]; i += 2) {
        if (put(buf, cap, len, "%s%s=\"", i || any ? "," : "{", labels[i]) < 0 ||
            put_escaped(buf, cap, len, labels[i + 1], "\\\"") < 0 || put(buf, cap, len, "\"") < 0)
            return -1;
        any = true;
    }
    fmt_value(v, sizeof(v), value);
    return put(buf, cap, len, "%s %s\n", any ? "}" : "", v);
}

/* Per-worker families: one sample per worker slot in use. */
static int worker_metrics(struct daemon *d, char *buf, size_t cap, size_t *len)
{
    static const char *const states[] = { "empty", "starting", "ready", "retiring" };
    static const struct {
        const char *name, *help;
    } fams[] = {
        { "ringfeed_worker_info", "A worker process: its pid, state and I/O backend (value 1)" },
        { "ringfeed_worker_jobs_total", "Jobs this worker process ran" },
        { "ringfeed_worker_samples_total", "Samples this worker process wrote" },
        { "ringfeed_worker_bytes_read_total", "Bytes this worker process read from shards" },
        { "ringfeed_worker_busy_seconds_total", "Time this worker process spent on jobs" },
        { "ringfeed_worker_io_seconds_total", "Time this worker process spent reading" },
        { "ringfeed_worker_decode_seconds_total", "Time this worker process spent decompressing" },
        { "ringfeed_worker_transform_seconds_total", "Time this worker process spent transforming" },
    };

    for (unsigned f = 0; f < sizeof(fams) / sizeof(fams[0]); f++) {
        if (family(buf, cap, len, fams[f].name, f == 0 ? "gauge" : "counter", fams[f].help) < 0)
            return -1;
        for (unsigned i = 0; i < POOL_MAX; i++) {
            const struct worker *w = &d->pool.w[i];
            char idx[16], pid[16];
            const char *info[] = { "worker", idx, "pid", pid, "state", states[w->state],
                                   "io", w->io_backend[0] ? w->io_backend : "unknown", NULL };
            const char *plain[] = { "worker", idx, NULL };
            double v[] = { 1, (double)w->c.jobs, (double)w->c.samples, (double)w->c.bytes_read,
                           (double)w->c.busy_ns / 1e9, (double)w->c.io_ns / 1e9,
                           (double)w->c.decode_ns / 1e9, (double)w->c.transform_ns / 1e9 };

            if (w->state == W_EMPTY)
                continue;
            snprintf(idx, sizeof(idx), "%u", i);
            snprintf(pid, sizeof(pid), "%d", (int)w->pid);
            if (sample(buf, cap, len, fams[f].name, v[f], f == 0 ? info : plain) < 0)
                return -1;
        }
    }
    return 0;
}

/* Orders attaches by their series' labels, then by id (the attach order). */
static int client_cmp(const void *a, const void *b)
{
    const struct sched_client *x = a, *y = b;
    int c = strcmp(x->dataset, y->dataset);

    if (!c)
        c = strcmp(x->name, y->name);
    if (!c)
        c = x->rank != y->rank ? (x->rank < y->rank ? -1 : 1) : 0;
    if (!c)
        c = x->world != y->world ? (x->world < y->world ? -1 : 1) : 0;
    if (!c)
        c = x->uid != y->uid ? (x->uid < y->uid ? -1 : 1) : 0;
    if (!c)
        c = x->id < y->id ? -1 : x->id > y->id;
    return c;
}

static bool same_series(const struct sched_client *x, const struct sched_client *y)
{
    return strcmp(x->dataset, y->dataset) == 0 && strcmp(x->name, y->name) == 0 &&
           x->rank == y->rank && x->world == y->world && x->uid == y->uid;
}

/* Field f of one attach, as client_metrics' table numbers them. */
static double client_value(const struct sched_client *c, unsigned f)
{
    const double v[] = { (double)c->batches, (double)c->samples, (double)c->waited_ns / 1e9,
                         (double)c->waits, (double)c->production_ns / 1e9, (double)c->ready,
                         (double)c->inflight, (double)c->ring_bytes, c->locked, c->failed,
                         (double)c->weight, (double)c->worker_ns / 1e9,
                         (double)c->shared_batches, (double)c->net_waited_ns / 1e9 };

    return v[f];
}

/* Per-client families: ringfeed_client_info one sample per attach, the
 * others one per series (dataset, name, rank, world, uid), summed over its
 * attaches.  Returns 0, or -1 when buf is full. */
static int client_metrics(struct daemon *d, char *buf, size_t cap, size_t *len)
{
    enum { SUM, MIN, MAX };
    static const struct {
        const char *name, *type, *help;
        int agg;
    } fams[] = {
        { "ringfeed_client_batches_total", "counter", "Batches published to this client", SUM },
        { "ringfeed_client_samples_total", "counter", "Samples published to this client", SUM },
        { "ringfeed_client_waited_seconds_total", "counter",
          "Time this client had released every published batch and waited for the next, "
          "the wait going on included", SUM },
        { "ringfeed_client_waits_total", "counter",
          "Waits of this client for its next batch that ended", SUM },
        { "ringfeed_client_production_seconds_total", "counter",
          "Plan-to-publication time of the batches published to this client, added up", SUM },
        { "ringfeed_client_ready_batches", "gauge", "Batches ready in the ring, not yet released",
          SUM },
        { "ringfeed_client_inflight_batches", "gauge", "Batches being produced for this client",
          SUM },
        { "ringfeed_client_ring_bytes", "gauge", "Size of this client's ring", SUM },
        { "ringfeed_client_ring_locked", "gauge", "1 when this client's ring is locked in RAM",
          MIN },
        { "ringfeed_client_failed", "gauge", "1 when this client's stream has failed", MAX },
        { "ringfeed_client_weight", "gauge", "This client's weight for the workers' time", MAX },
        { "ringfeed_client_worker_seconds_total", "counter",
          "Worker CPU time spent on this client's jobs (a shared batch's on the member that "
          "planned it)", SUM },
        { "ringfeed_client_shared_batches_total", "counter",
          "Batches of this client decoded once for it and other clients", SUM },
        { "ringfeed_client_network_wait_seconds_total", "counter",
          "Time this client's next batch waited for a remote shard to reach the node cache, "
          "the wait going on included", SUM },
    };
    /* the loop is single-threaded and nstreams <= max-clients */
    static struct sched_client all[CONF_MAX_CLIENTS_MAX];
    const struct stream *st = NULL;
    uint32_t n = 0;

    while (n < CONF_MAX_CLIENTS_MAX && (st = sched_client_next(d, st, &all[n])))
        n++;
    qsort(all, n, sizeof(all[0]), client_cmp);

    if (family(buf, cap, len, "ringfeed_client_info", "gauge",
               "An attached client: its attach id, labels and geometry (value 1)") < 0)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        char id[16], rank[16], world[16], batch[16], depth[16], uid[16], pid[16];
        const char *labels[] = { "id", id, "dataset", all[i].dataset, "name", all[i].name,
                                 "rank", rank, "world", world, "batch", batch, "depth", depth,
                                 "uid", uid, "pid", pid, "unit", all[i].unit, NULL };

        snprintf(uid, sizeof(uid), "%u", all[i].uid);
        snprintf(pid, sizeof(pid), "%u", all[i].pid);
        snprintf(id, sizeof(id), "%u", all[i].id);
        snprintf(rank, sizeof(rank), "%u", all[i].rank);
        snprintf(world, sizeof(world), "%u", all[i].world);
        snprintf(batch, sizeof(batch), "%u", all[i].batch);
        snprintf(depth, sizeof(depth), "%u", all[i].depth);
        if (sample(buf, cap, len, "ringfeed_client_info", 1, labels) < 0)
            return -1;
    }
    for (unsigned f = 0; f < sizeof(fams) / sizeof(fams[0]); f++) {
        if (family(buf, cap, len, fams[f].name, fams[f].type, fams[f].help) < 0)
            return -1;
        for (uint32_t i = 0, j; i < n; i = j) {
            char rank[16], world[16], uid[16];
            const char *labels[] = { "dataset", all[i].dataset, "name", all[i].name,
                                     "rank", rank, "world", world, "uid", uid, NULL };
            double v = client_value(&all[i], f);

            for (j = i + 1; j < n && same_series(&all[i], &all[j]); j++) {
                double w = client_value(&all[j], f);

                v = fams[f].agg == SUM ? v + w : fams[f].agg == MIN ? (w < v ? w : v)
                                                                   : (w > v ? w : v);
            }
            snprintf(rank, sizeof(rank), "%u", all[i].rank);
            snprintf(world, sizeof(world), "%u", all[i].world);
            snprintf(uid, sizeof(uid), "%u", all[i].uid);
            if (sample(buf, cap, len, fams[f].name, v, labels) < 0)
                return -1;
        }
    }
    return 0;
}

/* One histogram family (hist.h): cumulative _bucket{le=...} series, _sum
 * in seconds and _count.  Returns 0, or -1 when buf is full. */
static int hist_metrics(char *buf, size_t cap, size_t *len, const char *name, const char *help,
                        const struct hist *h)
{
    char series[128], le[32];
    uint64_t cum = 0;

    if (family(buf, cap, len, name, "histogram", help) < 0)
        return -1;
    snprintf(series, sizeof(series), "%s_bucket", name);
    for (unsigned i = 0; i <= HIST_FINITE; i++) {
        const char *labels[] = { "le", le, NULL };

        cum += h->bucket[i];
        if (i < HIST_FINITE)
            snprintf(le, sizeof(le), "%g", (double)HIST_LE_NS[i] / 1e9);
        else
            snprintf(le, sizeof(le), "+Inf");
        if (sample(buf, cap, len, series, (double)cum, labels) < 0)
            return -1;
    }
    snprintf(series, sizeof(series), "%s_sum", name);
    if (sample(buf, cap, len, series, (double)h->sum_ns / 1e9, NULL) < 0)
        return -1;
    snprintf(series, sizeof(series), "%s_count", name);
    return sample(buf, cap, len, series, (double)h->count, NULL);
}

int stats_metrics(struct daemon *d, char *buf, size_t cap, size_t *len)
{
    struct ahead_counts ac;

    size_t start = *len;
    char prom[128];
    int lines = 0;

    daemon_label = d->cf.name;

    {
        const char *labels[] = { "version", RINGFEED_VERSION, "revision", RINGFEED_REVISION,
                                 "io_backend", d->pool.io_backend, NULL };

        if (family(buf, cap, len, "ringfeed_build_info", "gauge",
                   "The daemon's version, commit and I/O backend (value 1)") < 0 ||
            sample(buf, cap, len, "ringfeed_build_info", 1, labels) < 0)
            return -1;
    }
    if (family(buf, cap, len, "ringfeed_dataset_failing", "gauge",
               "A configured dataset not served now, by name (value 1), until a reload "
               "opens it again") < 0)
        return -1;
    for (uint32_t k = 0, n = catalog_failing(d); k < n; k++) {
        const char *name = catalog_failing_name(d, k);
        const char *labels[] = { "dataset", name ? name : "-", NULL };

        if (sample(buf, cap, len, "ringfeed_dataset_failing", 1, labels) < 0)
            return -1;
    }
#define METRIC_LINES(name, type, help, expr)                                            \
    prom_name(prom, sizeof(prom), name, strcmp(type, "counter") == 0);                  \
    if (family(buf, cap, len, prom, type, help) < 0 ||                                  \
        sample(buf, cap, len, prom, (double)(expr), NULL) < 0)                          \
        return -1;
    STATS_MAP(METRIC_LINES)
#undef METRIC_LINES
    ahead_counts(d, &ac);
    if (worker_metrics(d, buf, cap, len) < 0 || client_metrics(d, buf, cap, len) < 0 ||
        hist_metrics(buf, cap, len, "ringfeed_client_wait_seconds",
                     "Waits of a client, all clients: from the daemon seeing every published "
                     "batch released to its next publication",
                     &d->sched.wait_hist) < 0 ||
        hist_metrics(buf, cap, len, "ringfeed_batch_production_seconds",
                     "Production time of a batch, all clients: from planning it to its "
                     "publication", &d->sched.prod_hist) < 0 ||
        hist_metrics(buf, cap, len, "ringfeed_fetch_seconds",
                     "Fetch time of one remote shard into the node cache: from its start to "
                     "its file verified (or failed), retries included",
                     &ac.latency) < 0)
        return -1;
    for (size_t i = start; i < *len; i++)
        lines += buf[i] == '\n';
    return lines;
}

int stats_status_line(struct daemon *d, char *buf, size_t cap)
{
    return snprintf(buf, cap,
                    "ringfeedd %s: workers=%u/%u clients=%u datasets=%u batches=%llu "
                    "rings=%llu io=%s uptime=%.0fs%s",
                    RINGFEED_VERSION, d->pool.alive, d->pool.target, d->sched.nstreams,
                    catalog_offered(d),
                    (unsigned long long)d->batches, (unsigned long long)d->sched.mem_used,
                    d->pool.io_backend, uptime_s(d), d->stopping ? " stopping" : "");
}
