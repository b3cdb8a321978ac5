/*
 * stats.c - what STATS, STATUS and METRICS report: one table of names.
 *
 * STATS_MAP is the one source of truth for the daemon-wide figures: their
 * dotted name (STATS), their Prometheus name (dots become underscores,
 * prefixed "ringfeed_"), type and help text (METRICS).  Per-worker and
 * per-client lines follow with the worker's or client's number in the name
 * (workers.<i>.<field>, clients.<id>.<field>).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "daemon.h"
#include "log.h"

static double uptime_s(struct daemon *d) { return (double)(now_ns() - d->start_ns) / 1e9; }

static struct wire_counters totals(struct daemon *d)
{
    struct wire_counters c;

    pool_totals(d, &c);
    return c;
}

static double bad_total(struct daemon *d)
{
    struct wire_counters c = totals(d);
    double n = 0;

    for (int i = 0; i < BAD_KIND_COUNT; i++)
        n += (double)c.bad[i];
    return n;
}

/* X(dotted name, counter|gauge, help, value expression over d) */
#define STATS_MAP(X)                                                                     \
    X("uptime_seconds", "gauge", "Seconds since the daemon started", uptime_s(d))         \
    X("workers.target", "gauge", "Workers asked for", d->pool.target)                    \
    X("workers.alive", "gauge", "Worker processes running", d->pool.alive)               \
    X("workers.spawned", "counter", "Worker processes started", d->pool.spawned)         \
    X("workers.deaths", "counter", "Workers that died unasked", d->pool.deaths)          \
    X("workers.retired", "counter", "Workers retired on request", d->pool.retired)       \
    X("workers.watchdog_kills", "counter", "Workers killed for a job past watchdog-sec",  \
      d->pool.watchdog_kills)                                                            \
    X("clients.attached", "gauge", "Clients attached now", d->nstreams)                  \
    X("clients.attaches", "counter", "Attaches accepted", d->attaches)                   \
    X("clients.detaches", "counter", "Clients detached", d->detaches)                    \
    X("clients.refused", "counter", "Attaches refused", d->attach_refused)               \
    X("clients.kicked", "counter", "Clients disconnected for bad ring writes",          \
      d->clients_killed)                                                                 \
    X("connections.open", "gauge", "Control connections open", d->conn_open)             \
    X("connections.total", "counter", "Control connections accepted", d->conn_total)     \
    X("requests.errors", "counter", "Requests answered with ERR", d->bad_requests)       \
    X("jobs.queued", "gauge", "Jobs waiting for a worker", d->queued)                    \
    X("total.batches", "counter", "Batches published", d->batches)                       \
    X("total.samples", "counter", "Samples published", d->samples)                       \
    X("total.jobs", "counter", "Jobs run by workers", totals(d).jobs)                    \
    X("total.bytes_read", "counter", "Bytes read from shards", totals(d).bytes_read)     \
    X("time.busy_seconds", "counter", "Worker time spent on jobs",                      \
      (double)totals(d).busy_ns / 1e9)                                                   \
    X("time.io_seconds", "counter", "Worker time reading records",                      \
      (double)totals(d).io_ns / 1e9)                                                     \
    X("time.decode_seconds", "counter", "Worker time decompressing records",            \
      (double)totals(d).decode_ns / 1e9)                                                 \
    X("time.transform_seconds", "counter", "Worker time transforming samples",          \
      (double)totals(d).transform_ns / 1e9)                                              \
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
    X("errors.quarantined", "counter", "Samples quarantined for killing workers",        \
      d->quarantined)                                                                    \
    X("memory.rings_bytes", "gauge", "Bytes of client rings", d->mem_used)               \
    X("memory.locked_bytes", "gauge", "Bytes of rings locked in RAM", d->mem_locked)     \
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
    n = sched_stats_lines(d, buf, cap, len);
    if (n < 0)
        return -1;
    return lines + n;
}

int stats_metrics(struct daemon *d, char *buf, size_t cap, size_t *len)
{
    int lines = 0;
    char v[40], prom[96];

#define METRIC_LINES(name, type, help, expr)                                            \
    snprintf(prom, sizeof(prom), "ringfeed_%s", name);                                  \
    for (char *p = prom; *p; p++)                                                       \
        if (*p == '.')                                                                  \
            *p = '_';                                                                   \
    if (strcmp(type, "counter") == 0 && !strstr(prom, "_total"))                        \
        strcat(prom, "_total");                                                         \
    fmt_value(v, sizeof(v), (double)(expr));                                            \
    if (put(buf, cap, len, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", prom, help, prom,     \
            type, prom, v) < 0)                                                         \
        return -1;                                                                      \
    lines += 3;
    STATS_MAP(METRIC_LINES)
#undef METRIC_LINES
    return lines;
}

int stats_status_line(struct daemon *d, char *buf, size_t cap)
{
    return snprintf(buf, cap,
                    "ringfeedd %s: workers=%u/%u clients=%u datasets=%u batches=%llu "
                    "rings=%llu io=%s uptime=%.0fs%s",
                    RINGFEED_VERSION, d->pool.alive, d->pool.target, d->nstreams, d->ncat,
                    (unsigned long long)d->batches, (unsigned long long)d->mem_used,
                    d->pool.io_backend, uptime_s(d), d->stopping ? " stopping" : "");
}
