/* top_calc.c - STATS snapshots and the rates between two (top_calc.h). */
#include "top_calc.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "strnum.h"

/* ---- the tables: a STATS name, where its value goes ---- */

static const struct {
    const char *key;
    size_t off;
} scalar_keys[] = {
#define K(name, field) {name, offsetof(struct top_snap, field)}
    K("uptime_seconds", uptime_s),
    K("workers.target", workers_target),
    K("workers.alive", workers_alive),
    K("workers.deaths", workers_deaths),
    K("clients.attached", clients_attached),
    K("datasets", datasets),
    K("datasets.failed", datasets_failed),
    K("jobs.queued", jobs_queued),
    K("total.batches", batches),
    K("total.samples", samples),
    K("total.jobs", jobs),
    K("time.busy_seconds", busy_s),
    K("time.io_seconds", io_s),
    K("time.decode_seconds", decode_s),
    K("time.transform_seconds", transform_s),
    K("time.image_decode_seconds", image_s),
    K("time.resize_seconds", resize_s),
    K("time.write_seconds", write_s),
    K("errors.bad_samples", bad),
    K("errors.substituted", substituted),
    K("memory.rings_bytes", rings_bytes),
    K("memory.locked_bytes", locked_bytes),
    K("memory.budget_bytes", budget_bytes),
    K("workers.auto", workers_auto),
    K("workers.budget", workers_budget),
    K("workers.auto_changes", auto_changes),
    K("cache.bytes", cache_bytes),
    K("cache.limit_bytes", cache_limit),
    K("cache.shards", cache_shards),
    K("cache.hits", cache_hits),
    K("cache.misses", cache_misses),
    K("cache.evictions", cache_evictions),
    K("fetch.bytes", fetch_bytes),
    K("fetch.in_flight", fetch_in_flight),
    K("clients.network_waiting", network_waiting),
#undef K
};

static const struct {
    const char *key;
    size_t off;
} worker_keys[] = {
#define K(name, field) {name, offsetof(struct top_worker_snap, field)}
    K("pid", pid),         K("jobs", jobs),   K("samples", samples),
    K("busy_s", busy_s),   K("io_s", io_s),   K("decode_s", decode_s),
    K("transform_s", transform_s),
#undef K
};

static const struct {
    const char *key;
    size_t off;
} client_keys[] = {
#define K(name, field) {name, offsetof(struct top_client_snap, field)}
    K("rank", rank),           K("world", world),       K("batch", batch),
    K("depth", depth),         K("batches", batches),   K("samples", samples),
    K("waited_s", waited_s),   K("ready", ready),       K("inflight", inflight),
    K("ring_bytes", ring_bytes), K("locked", locked),   K("failed", failed),
    K("uid", uid),
#undef K
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static bool span_is(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(s, word, n) == 0;
}

/* Copies s[0..n) into out (cap bytes), cut to fit, NUL-terminated. */
static void copy_word(char *out, size_t cap, const char *s, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

/* A value that must be a number: sets *out, or counts a bad line. */
static bool number(struct top_snap *s, const char *v, size_t vn, double *out)
{
    if (strnum_double(v, vn, out) == 0)
        return true;
    s->bad_lines++;
    return false;
}

/*
 * "<group>.<digits>.<field>": the number and the field, or false for a
 * name of another shape (workers.target).
 */
static bool indexed(const char *k, size_t kn, const char *group, uint32_t *idx,
                    const char **field, size_t *fn)
{
    size_t g = strlen(group), i;
    uint64_t v;

    if (kn <= g + 1 || memcmp(k, group, g) != 0 || k[g] != '.')
        return false;
    for (i = g + 1; i < kn && k[i] >= '0' && k[i] <= '9'; i++)
        ;
    if (i == g + 1 || i >= kn - 1 || k[i] != '.')
        return false;
    if (strnum_u64(k + g + 1, i - g - 1, &v) < 0 || v > UINT32_MAX)
        return false;
    *idx = (uint32_t)v;
    *field = k + i + 1;
    *fn = kn - i - 1;
    return true;
}

/* The row for worker idx, added when new; NULL past the cap. */
static struct top_worker_snap *worker_row(struct top_snap *s, uint32_t idx)
{
    struct top_worker_snap *w;

    /* a worker's lines come together: its row is almost always the last */
    for (uint32_t i = s->nworkers; i-- > 0;)
        if (s->w[i].idx == idx)
            return &s->w[i];
    if (s->nworkers == TOP_WORKERS_MAX) {
        s->dropped++;
        return NULL;
    }
    w = &s->w[s->nworkers++];
    *w = (struct top_worker_snap){.idx = idx};
    w->pid = w->jobs = w->samples = w->busy_s = w->io_s = w->decode_s = w->transform_s = NAN;
    return w;
}

static struct top_client_snap *client_row(struct top_snap *s, uint32_t id)
{
    struct top_client_snap *c;

    for (uint32_t i = s->nclients; i-- > 0;)
        if (s->c[i].id == id)
            return &s->c[i];
    if (s->nclients == TOP_CLIENTS_MAX) {
        s->dropped++;
        return NULL;
    }
    c = &s->c[s->nclients++];
    *c = (struct top_client_snap){.id = id};
    for (size_t k = 0; k < COUNT(client_keys); k++)
        *(double *)((char *)c + client_keys[k].off) = NAN;
    return c;
}

static bool worker_line(struct top_snap *s, const char *k, size_t kn, const char *v, size_t vn)
{
    struct top_worker_snap *w;
    const char *f;
    size_t fn;
    uint32_t idx;

    if (!indexed(k, kn, "workers", &idx, &f, &fn))
        return false;
    w = worker_row(s, idx);
    if (!w)
        return true;
    if (span_is(f, fn, "state")) {
        copy_word(w->state, sizeof(w->state), v, vn);
        return true;
    }
    for (size_t i = 0; i < COUNT(worker_keys); i++)
        if (span_is(f, fn, worker_keys[i].key))
            return number(s, v, vn, (double *)((char *)w + worker_keys[i].off));
    return true; /* a field of a newer daemon: the row is still this worker's */
}

static bool client_line(struct top_snap *s, const char *k, size_t kn, const char *v, size_t vn)
{
    struct top_client_snap *c;
    const char *f;
    size_t fn;
    uint32_t id;

    if (!indexed(k, kn, "clients", &id, &f, &fn))
        return false;
    c = client_row(s, id);
    if (!c)
        return true;
    if (span_is(f, fn, "dataset")) {
        copy_word(c->dataset, sizeof(c->dataset), v, vn);
        return true;
    }
    if (span_is(f, fn, "subset")) {
        size_t at = strlen(c->dataset);

        /* after dataset in STATS; "-": the whole dataset */
        if (!span_is(v, vn, "-") && at + vn + 3 <= sizeof(c->dataset)) {
            c->dataset[at] = '[';
            memcpy(c->dataset + at + 1, v, vn);
            c->dataset[at + 1 + vn] = ']';
            c->dataset[at + 2 + vn] = '\0';
        }
        return true;
    }
    if (span_is(f, fn, "bound")) {
        c->network = span_is(v, vn, "network");
        return true;
    }
    if (span_is(f, fn, "name")) {
        /* the daemon writes "-" for a client without a name */
        copy_word(c->name, sizeof(c->name), v, span_is(v, vn, "-") ? 0 : vn);
        return true;
    }
    for (size_t i = 0; i < COUNT(client_keys); i++)
        if (span_is(f, fn, client_keys[i].key))
            return number(s, v, vn, (double *)((char *)c + client_keys[i].off));
    return true;
}

/* "augment.<name>_ns" or "augment.<name>_images": the op's row, added
 * when new (skipped past TOP_AUG_MAX or for a name too long). */
static bool aug_line(struct top_snap *s, const char *k, size_t kn, const char *v, size_t vn)
{
    static const char pre[] = "augment.";
    static const struct {
        const char *suffix;
        size_t off;
    } fields[] = {
        {"_ns", offsetof(struct top_aug_snap, ns)},
        {"_images", offsetof(struct top_aug_snap, images)},
    };
    size_t pn = sizeof(pre) - 1;

    if (kn <= pn || memcmp(k, pre, pn) != 0)
        return false;
    for (size_t i = 0; i < COUNT(fields); i++) {
        size_t sn = strlen(fields[i].suffix), nn = kn - pn - sn;
        struct top_aug_snap *a = NULL;

        if (kn <= pn + sn || memcmp(k + kn - sn, fields[i].suffix, sn) != 0)
            continue;
        if (nn >= TOP_AUG_NAME_MAX)
            return false;
        for (uint32_t j = 0; j < s->naug && !a; j++)
            if (span_is(k + pn, nn, s->aug[j].name))
                a = &s->aug[j];
        if (!a) {
            if (s->naug >= TOP_AUG_MAX)
                return false;
            a = &s->aug[s->naug++];
            copy_word(a->name, sizeof(a->name), k + pn, nn);
            a->ns = a->images = NAN;
        }
        return number(s, v, vn, (double *)((char *)a + fields[i].off));
    }
    return false; /* augment.<name>_ns_per_image: computed here instead */
}

/* One "key value" line; true when it was used. */
static bool stats_line(struct top_snap *s, const char *l, size_t n)
{
    size_t kn = 0, v;

    while (kn < n && l[kn] != ' ' && l[kn] != '\t')
        kn++;
    for (v = kn; v < n && (l[v] == ' ' || l[v] == '\t'); v++)
        ;
    while (n > v && (l[n - 1] == ' ' || l[n - 1] == '\t'))
        n--;
    if (kn == 0 || v == n) {
        s->bad_lines++;
        return false;
    }
    if (span_is(l, kn, "io.backend")) {
        copy_word(s->io_backend, sizeof(s->io_backend), l + v, n - v);
        return true;
    }
    if (span_is(l, kn, "workers.mode")) {
        copy_word(s->workers_mode, sizeof(s->workers_mode), l + v, n - v);
        return true;
    }
    if (span_is(l, kn, "workers.auto_state")) {
        copy_word(s->auto_state, sizeof(s->auto_state), l + v, n - v);
        return true;
    }
    if (span_is(l, kn, "workers.budget_source")) {
        size_t w = v;

        while (w < n && l[w] != ' ' && l[w] != '\t')
            w++;
        copy_word(s->budget_source, sizeof(s->budget_source), l + v, w - v);
        return true;
    }
    if (span_is(l, kn, "workers.auto_reason")) {
        copy_word(s->auto_reason, sizeof(s->auto_reason), l + v, n - v);
        return true;
    }
    for (size_t i = 0; i < COUNT(scalar_keys); i++)
        if (span_is(l, kn, scalar_keys[i].key))
            return number(s, l + v, n - v, (double *)((char *)s + scalar_keys[i].off));
    return worker_line(s, l, kn, l + v, n - v) || client_line(s, l, kn, l + v, n - v) ||
           aug_line(s, l, kn, l + v, n - v);
}

void top_snap_init(struct top_snap *s)
{
    s->nworkers = s->nclients = s->naug = s->dropped = s->bad_lines = 0;
    s->io_backend[0] = s->version[0] = '\0';
    s->workers_mode[0] = s->auto_state[0] = s->budget_source[0] = s->auto_reason[0] = '\0';
    s->stopping = false;
    for (size_t i = 0; i < COUNT(scalar_keys); i++)
        *(double *)((char *)s + scalar_keys[i].off) = NAN;
}

size_t top_snap_parse_stats(struct top_snap *s, const char *buf, size_t len)
{
    size_t used = 0, off = 0;

    while (off < len) {
        const char *lf = memchr(buf + off, '\n', len - off);
        size_t n = lf ? (size_t)(lf - (buf + off)) : len - off;
        size_t end = off + n + (lf != NULL);

        if (n > 0 && buf[off + n - 1] == '\r')
            n--;
        if (n > 0 && stats_line(s, buf + off, n))
            used++;
        off = end;
    }
    return used;
}

int top_snap_parse_status(struct top_snap *s, const char *text, size_t len)
{
    static const char head[] = "ringfeedd ";
    size_t hn = sizeof(head) - 1, i;

    if (len <= hn || memcmp(text, head, hn) != 0)
        return -EINVAL;
    for (i = hn; i < len && text[i] != ':' && text[i] != ' '; i++)
        ;
    if (i == hn || i == len || text[i] != ':')
        return -EINVAL;
    copy_word(s->version, sizeof(s->version), text + hn, i - hn);
    s->stopping = false;
    /* "stopping" is a bare word: any token equal to it */
    for (size_t j = i; j < len;) {
        size_t k;

        while (j < len && text[j] == ' ')
            j++;
        for (k = j; k < len && text[k] != ' '; k++)
            ;
        if (span_is(text + j, k - j, "stopping"))
            s->stopping = true;
        j = k;
    }
    return 0;
}

const char *top_verdict_name(enum top_verdict v)
{
    static const char *const names[TOP_VERDICT_COUNT] = {
        [TOP_VERDICT_NONE] = "-",
        [TOP_VERDICT_COMPUTE_BOUND] = "compute-bound",
        [TOP_VERDICT_INPUT_BOUND] = "input-bound",
        [TOP_VERDICT_FAILED] = "failed",
        [TOP_VERDICT_NETWORK_BOUND] = "network-bound",
    };

    return (unsigned)v < TOP_VERDICT_COUNT ? names[v] : "?";
}

/* ---- the rates ---- */

/* b - a per second (a NAN or absent counts as 0: a row new in the
 * interval); NAN without an interval, never below 0. */
static double rate(double a, double b, double dt)
{
    double d;

    if (isnan(dt) || isnan(b))
        return NAN;
    d = b - (isnan(a) ? 0 : a);
    return d > 0 ? d / dt : 0;
}

static double pct_of(double part, double whole)
{
    if (isnan(part) || isnan(whole) || whole <= 0)
        return NAN;
    part = part / whole * 100;
    return part < 0 ? 0 : part > 100 ? 100 : part;
}

static double delta(double a, double b)
{
    double d;

    if (isnan(b))
        return NAN;
    d = b - (isnan(a) ? 0 : a);
    return d > 0 ? d : 0;
}

/* The daemon restarted between a and b: its clock or a total went back. */
static bool restarted(const struct top_snap *a, const struct top_snap *b)
{
    return b->uptime_s < a->uptime_s || b->samples < a->samples ||
           b->batches < a->batches || b->jobs < a->jobs;
}

/* The same process in a worker slot (a slot without a pid line is taken
 * to be the same). */
static bool same_pid(double a, double b)
{
    return a == b || (isnan(a) && isnan(b));
}

static void worker_rows(const struct top_snap *a, const struct top_snap *b, double dt,
                        struct top_frame *f)
{
    static const struct top_worker_snap none = {
        .pid = NAN, .jobs = NAN, .samples = NAN, .busy_s = NAN,
        .io_s = NAN, .decode_s = NAN, .transform_s = NAN,
    };

    f->nworkers = b->nworkers;
    for (uint32_t i = 0; i < b->nworkers; i++) {
        const struct top_worker_snap *cw = &b->w[i], *pw = &none;
        struct top_worker_row *r = &f->w[i];
        double busy;

        for (uint32_t j = 0; a && j < a->nworkers; j++)
            if (a->w[j].idx == cw->idx && same_pid(a->w[j].pid, cw->pid))
                pw = &a->w[j];
        *r = (struct top_worker_row){.idx = cw->idx, .pid = cw->pid};
        memcpy(r->state, cw->state, sizeof(r->state));
        busy = isnan(dt) ? NAN : delta(pw->busy_s, cw->busy_s);
        r->busy_pct = pct_of(busy, dt);
        r->jobs_per_s = rate(pw->jobs, cw->jobs, dt);
        r->samples_per_s = rate(pw->samples, cw->samples, dt);
        r->io_pct = pct_of(delta(pw->io_s, cw->io_s), busy);
        r->decode_pct = pct_of(delta(pw->decode_s, cw->decode_s), busy);
        r->transform_pct = pct_of(delta(pw->transform_s, cw->transform_s), busy);
    }
}

static void client_rows(const struct top_snap *a, const struct top_snap *b, double dt,
                        struct top_frame *f)
{
    static const struct top_client_snap none = {
        .batches = NAN, .samples = NAN, .waited_s = NAN,
    };

    f->nclients = b->nclients;
    for (uint32_t i = 0; i < b->nclients; i++) {
        const struct top_client_snap *cc = &b->c[i], *pc = &none;
        struct top_client_row *r = &f->c[i];

        for (uint32_t j = 0; a && j < a->nclients; j++)
            if (a->c[j].id == cc->id)
                pc = &a->c[j];
        *r = (struct top_client_row){
            .id = cc->id, .rank = cc->rank, .world = cc->world, .depth = cc->depth,
            .ready = cc->ready, .inflight = cc->inflight, .uid = cc->uid,
        };
        memcpy(r->dataset, cc->dataset, sizeof(r->dataset));
        memcpy(r->name, cc->name, sizeof(r->name));
        r->batches_per_s = rate(pc->batches, cc->batches, dt);
        r->samples_per_s = rate(pc->samples, cc->samples, dt);
        r->wait_pct = isnan(dt) ? NAN : pct_of(delta(pc->waited_s, cc->waited_s), dt);
        if (cc->failed > 0)
            r->verdict = TOP_VERDICT_FAILED;
        else if (isnan(r->wait_pct))
            r->verdict = TOP_VERDICT_NONE;
        else
            r->verdict = r->wait_pct <= TOP_INPUT_BOUND_PCT ? TOP_VERDICT_COMPUTE_BOUND
                         : cc->network                    ? TOP_VERDICT_NETWORK_BOUND
                                                          : TOP_VERDICT_INPUT_BOUND;
    }
}

/* The ops that ran on images between a and b (none without a). */
static void aug_rows(const struct top_snap *a, const struct top_snap *b, struct top_frame *f)
{
    f->naug = 0;
    f->aug_us_per_image = NAN;
    for (uint32_t i = 0; a && i < b->naug; i++) {
        const struct top_aug_snap *cb = &b->aug[i];
        double ns, images, pa_ns = NAN, pa_images = NAN;

        for (uint32_t j = 0; j < a->naug; j++)
            if (strcmp(a->aug[j].name, cb->name) == 0)
                pa_ns = a->aug[j].ns, pa_images = a->aug[j].images;
        ns = delta(pa_ns, cb->ns);
        images = delta(pa_images, cb->images);
        if (isnan(ns) || !(images > 0))
            continue;
        memcpy(f->aug[f->naug].name, cb->name, sizeof(cb->name));
        f->aug[f->naug].us_per_image = ns / images / 1e3;
        f->aug_us_per_image = (f->naug ? f->aug_us_per_image : 0) + ns / images / 1e3;
        f->naug++;
    }
}

void top_compute(const struct top_snap *prev, const struct top_snap *cur, double wall_s,
                 struct top_frame *f)
{
    double dt = NAN, busy;

    f->restarted = prev && restarted(prev, cur);
    if (f->restarted)
        prev = NULL;
    if (prev) {
        dt = cur->uptime_s - prev->uptime_s;
        if (isnan(dt))
            dt = wall_s;
        if (!(dt > 0))
            dt = NAN;
    }
    f->interval_s = dt;
    f->uptime_s = cur->uptime_s;
    f->workers_alive = cur->workers_alive;
    f->workers_target = cur->workers_target;
    f->clients_attached = cur->clients_attached;
    f->datasets = cur->datasets;
    f->datasets_failed = cur->datasets_failed;
    f->jobs_queued = cur->jobs_queued;
    f->rings_bytes = cur->rings_bytes;
    f->budget_bytes = cur->budget_bytes;
    f->locked_bytes = cur->locked_bytes;
    f->bad = cur->bad;
    memcpy(f->io_backend, cur->io_backend, sizeof(f->io_backend));
    memcpy(f->version, cur->version, sizeof(f->version));
    f->workers_budget = cur->workers_budget;
    f->auto_changes = cur->auto_changes;
    memcpy(f->workers_mode, cur->workers_mode, sizeof(f->workers_mode));
    memcpy(f->auto_state, cur->auto_state, sizeof(f->auto_state));
    memcpy(f->budget_source, cur->budget_source, sizeof(f->budget_source));
    memcpy(f->auto_reason, cur->auto_reason, sizeof(f->auto_reason));
    f->stopping = cur->stopping;
    f->dropped = cur->dropped;
    /* the remote line only once something was fetched (a daemon without
     * remote datasets shows 0 there) */
    f->cache_bytes = cur->fetch_bytes > 0 ? cur->cache_bytes : NAN;
    f->cache_limit = cur->cache_limit;
    f->cache_shards = cur->cache_shards;
    f->fetch_in_flight = cur->fetch_in_flight;
    f->network_waiting = cur->network_waiting;

    if (prev) {
        f->samples_per_s = rate(prev->samples, cur->samples, dt);
        f->batches_per_s = rate(prev->batches, cur->batches, dt);
        f->jobs_per_s = rate(prev->jobs, cur->jobs, dt);
        f->bad_per_s = rate(prev->bad, cur->bad, dt);
        f->fetch_bytes_per_s = rate(prev->fetch_bytes, cur->fetch_bytes, dt);
        f->hits_per_s = rate(prev->cache_hits, cur->cache_hits, dt);
        f->misses_per_s = rate(prev->cache_misses, cur->cache_misses, dt);
        f->evictions_per_s = rate(prev->cache_evictions, cur->cache_evictions, dt);
        busy = isnan(dt) ? NAN : delta(prev->busy_s, cur->busy_s);
        f->busy_pct = cur->workers_alive > 0 ? pct_of(busy, dt * cur->workers_alive) : NAN;
        f->io_pct = pct_of(delta(prev->io_s, cur->io_s), busy);
        f->decode_pct = pct_of(delta(prev->decode_s, cur->decode_s), busy);
        f->transform_pct = pct_of(delta(prev->transform_s, cur->transform_s), busy);
    } else {
        f->samples_per_s = f->batches_per_s = f->jobs_per_s = f->bad_per_s = NAN;
        f->fetch_bytes_per_s = f->hits_per_s = f->misses_per_s = f->evictions_per_s = NAN;
        f->busy_pct = f->io_pct = f->decode_pct = f->transform_pct = NAN;
    }
    worker_rows(prev, cur, dt, f);
    client_rows(prev, cur, dt, f);
    aug_rows(prev, cur, f);
}
