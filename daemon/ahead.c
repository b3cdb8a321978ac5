/*
 * ahead.c - ahead.h: each remote dataset's shards in the node cache, the
 * walk of the streams' schedules, the fetches and the eviction.
 */
#include "ahead.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "clock.h"
#include "daemon.h"
#include "dataset.h"
#include "log.h"
#include "sampler.h"
#include "scheduler.h"

#ifdef RINGFEED_REMOTE

#include "cache.h"
#include "fetch.h"
#include "s3.h"
#include "url.h"

extern char **environ;

enum { SH_ABSENT, SH_FETCHING, SH_PRESENT };

#define NO_USE UINT64_MAX
/* A wait walks at once, but not more often than this: a batch that waits
 * for room is asked about at every job's DONE */
#define AHEAD_RUN_GAP_NS 5000000ull

struct ashard {
    uint8_t state;
    bool demand;            /* a waiting batch asked for it (a miss when fetched) */
    uint32_t holds;         /* jobs holding it */
    uint64_t key;           /* next use from the last walk; NO_USE: none met */
    uint64_t last_use;      /* the module's use clock when last held or fetched */
    uint64_t checked_ns;    /* the file last found in place */
    uint32_t stamp;         /* dedupe in one pass (struct ahead.stamp) */
    char *failed;           /* the last fetch's failure, until streams were told */
    char *name;             /* the MANIFEST's name for its file */
    uint64_t bytes;
    uint32_t index_crc;
};

/* One pack's shards, shared by every dataset of that pack (two datasets of
 * one MANIFEST read one set of files), by the jobs holding its shards and
 * by its fetches in flight: freed by the last of them (refs). */
struct apack {
    struct apack *next;
    uint64_t pack;          /* dataset_identity */
    uint32_t refs;
    uint32_t n;
    struct ashard *sh;
};

/* A registered dataset; slot is its catalogue slot. */
struct ads {
    bool used;
    uint32_t slot, gen;
    const struct dataset *ds;
    struct apack *p;
    char url[CONF_PATH_MAX];
    char s3_endpoint[CONF_ENDPOINT_MAX + 1], s3_region[CONF_S3_REGION_MAX + 1];
    uint64_t walk_bytes;    /* during a walk: bytes of the shards one stream met */
    uint32_t walk_met;      /* and how many */
};

struct ahead {
    struct cache *c;
    struct fetch_client *fc;
    enum ahead_policy policy;
    struct ads *ds;
    uint32_t nds;           /* slots in ds[] */
    struct apack *packs;
    uint32_t gen;
    uint64_t clock;         /* the use clock */
    uint32_t stamp;
    uint32_t fetching;
    uint64_t run_ns;        /* the last walk */
    uint32_t *scratch;      /* distinct(): a batch's shards */
    uint32_t scratch_cap;
    uv_timer_t timer;
    bool timer_open;
    struct ahead_counts cnt;
};

/* One shard's fetch on the thread pool. */
struct afetch {
    uv_work_t req;
    struct ahead *a;
    struct apack *p;        /* holds a reference */
    uint32_t shard;
    char url[CONF_PATH_MAX];
    char s3_endpoint[CONF_ENDPOINT_MAX + 1], s3_region[CONF_S3_REGION_MAX + 1];
    char name[CACHE_NAME_MAX + 1];
    struct cache_key key;
    struct fetch_result res;
    uint64_t t0;
    int rc;
    struct rf_err err;
};

const char *ahead_policy_name(enum ahead_policy p)
{
    return p == AHEAD_LRU ? "lru" : "belady";
}

static struct ads *find_ds(struct ahead *a, uint32_t slot)
{
    return a && slot < a->nds && a->ds[slot].used ? &a->ds[slot] : NULL;
}

bool ahead_serves(const struct daemon *d, uint32_t slot)
{
    return find_ds(d->ahead, slot) != NULL;
}

static void on_timer(uv_timer_t *t);

int ahead_init(struct daemon *d, struct cache *c, struct fetch_client *fc,
               enum ahead_policy policy)
{
    struct ahead *a;

    if (d->ahead)
        return 0;
    a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->c = c;
    a->fc = fc;
    a->policy = policy;
    uv_timer_init(d->loop, &a->timer);
    a->timer.data = d;
    a->timer_open = true;
    uv_timer_start(&a->timer, on_timer, AHEAD_TICK_MS, AHEAD_TICK_MS);
    d->ahead = a;
    return 0;
}

static void pack_unref(struct ahead *a, struct apack *p)
{
    struct apack **pp;

    if (!p || --p->refs > 0)
        return;
    for (pp = &a->packs; *pp && *pp != p; pp = &(*pp)->next)
        ;
    if (*pp)
        *pp = p->next;
    for (uint32_t i = 0; i < p->n; i++) {
        free(p->sh[i].failed);
        free(p->sh[i].name);
    }
    free(p->sh);
    free(p);
}

/* The shards of ds's pack: the entry another dataset of it made, or a new
 * one (shards already in the cache and verified PRESENT).  NULL: out of
 * memory. */
static struct apack *pack_ref(struct ahead *a, const struct dataset *ds)
{
    uint64_t id = dataset_identity(ds);
    uint32_t n = dataset_info(ds)->shards;
    struct apack *p;

    for (p = a->packs; p; p = p->next)
        if (p->pack == id) {
            p->refs++;
            return p;
        }
    p = calloc(1, sizeof(*p));
    if (!p || !(p->sh = calloc(n ? n : 1, sizeof(*p->sh)))) {
        free(p);
        return NULL;
    }
    p->pack = id;
    p->n = n;
    p->refs = 1;
    p->next = a->packs;
    a->packs = p;
    for (uint32_t i = 0; i < n; i++) {
        struct dataset_shard_info si;
        struct ashard *s = &p->sh[i];
        struct cache_key k;
        struct rf_err e;

        s->key = NO_USE;
        dataset_shard_info(ds, i, &si);
        s->name = strdup(si.file);
        s->bytes = si.file_size;
        s->index_crc = si.index_crc;
        if (!s->name) {
            p->n = i;
            pack_unref(a, p);
            return NULL;
        }
        /* verified by the open's job (remote.c) off the loop: a lookup
         * here answers from the index */
        k = (struct cache_key){id, s->name, s->bytes, s->index_crc, CACHE_CHECK_SHARD, false};
        if (cache_lookup(a->c, &k, &e) == 1) {
            s->state = SH_PRESENT;
            s->checked_ns = clock_mono_ns();
        }
    }
    return p;
}

static void free_ds(struct ahead *a, struct ads *x)
{
    pack_unref(a, x->p);
    memset(x, 0, sizeof(*x));
}

void ahead_close(struct daemon *d)
{
    struct ahead *a = d->ahead;

    if (!a)
        return;
    for (uint32_t i = 0; i < a->nds; i++)
        free_ds(a, &a->ds[i]);
    while (a->packs) { /* held by jobs no longer running */
        a->packs->refs = 1;
        pack_unref(a, a->packs);
    }
    free(a->ds);
    free(a->scratch);
    free(a); /* ahead_stop closed the timer before the loop ended */
    d->ahead = NULL;
}

void ahead_stop(struct daemon *d)
{
    if (d->ahead && d->ahead->timer_open) {
        uv_timer_stop(&d->ahead->timer);
        uv_close((uv_handle_t *)&d->ahead->timer, NULL);
        d->ahead->timer_open = false;
    }
}

/* The cache key of shard i of p. */
static struct cache_key shard_key(const struct apack *p, uint32_t i)
{
    const struct ashard *s = &p->sh[i];

    return (struct cache_key){p->pack, s->name, s->bytes, s->index_crc, CACHE_CHECK_SHARD,
                              false};
}

int ahead_add(struct daemon *d, uint32_t slot, const struct dataset *ds, const char *url,
              const char *s3_endpoint, const char *s3_region, struct rf_err *err)
{
    struct ahead *a = d->ahead;
    struct ads *x;

    if (slot >= a->nds) {
        struct ads *m = realloc(a->ds, (slot + 1) * sizeof(*m));

        if (!m)
            return rf_err_set(err, -ENOMEM, "out of memory for the shards of %s", url);
        memset(m + a->nds, 0, (slot + 1 - a->nds) * sizeof(*m));
        a->ds = m;
        a->nds = slot + 1;
    }
    x = &a->ds[slot];
    free_ds(a, x);
    x->p = pack_ref(a, ds);
    if (!x->p)
        return rf_err_set(err, -ENOMEM, "out of memory for the shards of %s", url);
    x->used = true;
    x->slot = slot;
    x->gen = ++a->gen;
    x->ds = ds;
    snprintf(x->url, sizeof(x->url), "%s", url);
    snprintf(x->s3_endpoint, sizeof(x->s3_endpoint), "%s", s3_endpoint);
    snprintf(x->s3_region, sizeof(x->s3_region), "%s", s3_region);
    return 0;
}

void ahead_forget(struct daemon *d, uint32_t slot)
{
    struct ads *x = find_ds(d->ahead, slot);

    if (x)
        free_ds(d->ahead, x);
}

/* Is the file of PRESENT shard i of p still there?  Looked at no more
 * often than AHEAD_RECHECK_NS unless forced; a missing one becomes ABSENT. */
static void recheck(struct ahead *a, struct apack *p, uint32_t i, uint64_t now, bool force)
{
    struct ashard *s = &p->sh[i];
    struct cache_key k = shard_key(p, i);
    struct rf_err e;
    char path[CACHE_DIR_MAX + 300];

    if ((!force && now - s->checked_ns < AHEAD_RECHECK_NS) ||
        cache_path(a->c, &k, path, sizeof(path), &e) < 0)
        return;
    s->checked_ns = now;
    if (access(path, F_OK) == 0)
        return;
    log_warn("%s left the cache folder under the daemon: fetching it again", path);
    cache_evict(a->c, &k, &e); /* its bytes leave the count */
    s->state = SH_ABSENT;
}

static void run(struct daemon *d);

/*
 * A batch whose shards together exceed cache-size: the error, with what
 * would fit.  A block of K samples spans at most ceil(K / r) + 1 shards (r:
 * the fewest records a shard but the last holds), and a batch of B samples
 * at most ceil(B / K) + 1 blocks (of one rank: ranks interleave, so with W
 * ranks it is B * W positions, which this bound does not see); the largest
 * K of 1 to 4 shards whose worst case fits is offered, else the largest
 * batch that fits with 1-shard blocks, else a larger cache.  Not made the
 * default: the order must not depend on a node's cache-size, or ranks on
 * nodes configured apart would split an epoch differently.
 */
static int too_big(struct ahead *a, const struct ads *x, uint32_t distinct, uint64_t bytes,
                   uint32_t batch, struct rf_err *err)
{
    uint64_t most = 0, r = UINT64_MAX, total, budget = cache_budget(a->c);
    char what[160];

    for (uint32_t i = 0; i < x->p->n; i++) {
        struct dataset_shard_info si;

        if (x->p->sh[i].bytes > most)
            most = x->p->sh[i].bytes;
        if (i + 1 < x->p->n && dataset_shard_info(x->ds, i, &si) == 0 && si.records &&
            si.records < r)
            r = si.records;
    }
    if (r == UINT64_MAX) /* one shard */
        r = dataset_info(x->ds)->samples ? dataset_info(x->ds)->samples : 1;
    total = most ? budget / most : 0;
    snprintf(what, sizeof(what), "a larger cache-size");
    for (uint64_t f = SAMPLER_BLOCK_SHARDS; f >= 1; f--) {
        uint64_t k = f * r, blocks = (batch + k - 1) / k + 1;

        if (blocks * (f + 1) <= total) {
            snprintf(what, sizeof(what), "shuffle=block with block=%llu or less (%llu "
                     "shard%s of %llu samples), a smaller batch, or a larger cache-size",
                     (unsigned long long)k, (unsigned long long)f, f == 1 ? "" : "s",
                     (unsigned long long)r);
            break;
        }
        if (f == 1 && total / 2 >= 2)
            snprintf(what, sizeof(what), "shuffle=block with block=%llu and a batch of at "
                     "most %llu, or a larger cache-size", (unsigned long long)r,
                     (unsigned long long)((total / 2 - 1) * r));
    }
    return rf_err_set(err, -EFBIG, "%s: a batch needs %u shards (%llu bytes) in the cache at "
                      "once, but cache-size is %llu: use %s", x->url, distinct,
                      (unsigned long long)bytes, (unsigned long long)budget, what);
}

/* The distinct shards samples[n] of x lie in, in order of first sample,
 * into a's scratch; returns how many, or -ENOMEM. */
static int distinct(struct ahead *a, const struct ads *x, const uint64_t *samples, uint32_t n)
{
    uint32_t stamp = ++a->stamp, k = 0;

    if (n > a->scratch_cap) {
        uint32_t *m = realloc(a->scratch, n * sizeof(*m));

        if (!m)
            return -ENOMEM;
        a->scratch = m;
        a->scratch_cap = n;
    }
    for (uint32_t j = 0; j < n; j++) {
        uint32_t i = dataset_shard_of(x->ds, samples[j]);

        if (x->p->sh[i].stamp != stamp) {
            x->p->sh[i].stamp = stamp;
            a->scratch[k++] = i;
        }
    }
    return (int)k;
}

int ahead_ready(struct daemon *d, uint32_t slot, const uint64_t *samples, uint32_t n,
                struct rf_err *err)
{
    struct ahead *a = d->ahead;
    struct ads *x = find_ds(a, slot);
    uint64_t bytes = 0, now = clock_mono_ns(), hits = 0;
    bool missing = false, fresh = false;
    int k;

    if (!x)
        return 0;
    if ((k = distinct(a, x, samples, n)) < 0)
        return rf_err_set(err, -ENOMEM, "out of memory for a batch's shards");
    for (int j = 0; j < k; j++) {
        uint32_t i = a->scratch[j];
        struct ashard *s = &x->p->sh[i];

        if (s->failed) {
            rf_err_set(err, -EIO, "%s", s->failed);
            return -EIO;
        }
        bytes += s->bytes;
        if (s->state == SH_PRESENT)
            recheck(a, x->p, i, now, false);
        if (s->state == SH_PRESENT) {
            hits++;
            continue;
        }
        missing = true;
        fresh |= s->state == SH_ABSENT;
    }
    if (bytes > cache_budget(a->c))
        return too_big(a, x, (uint32_t)k, bytes, n, err);
    if (missing) {
        if (fresh && now - a->run_ns >= AHEAD_RUN_GAP_NS)
            run(d); /* a shard not asked for yet: now rather than at the next tick */
        return -EAGAIN;
    }
    a->cnt.hits += hits;
    return 0;
}

int ahead_hold(struct daemon *d, uint32_t slot, const uint64_t *samples, uint32_t n,
               struct ahead_hold *h)
{
    struct ahead *a = d->ahead;
    struct ads *x = find_ds(a, slot);
    int k;

    *h = (struct ahead_hold){0};
    if (!x)
        return 0;
    if ((k = distinct(a, x, samples, n)) < 0 ||
        !(h->shards = malloc((k ? (size_t)k : 1) * sizeof(*h->shards))))
        return -ENOMEM;
    a->clock++;
    for (int j = 0; j < k; j++) {
        struct ashard *s = &x->p->sh[a->scratch[j]];

        s->holds++;
        s->last_use = a->clock;
        h->shards[j] = a->scratch[j];
    }
    h->pack = x->p;
    x->p->refs++;
    h->n = (uint32_t)k;
    return 0;
}

void ahead_release(struct daemon *d, struct ahead_hold *h)
{
    struct apack *p = h->pack;

    for (uint32_t k = 0; p && k < h->n; k++)
        if (p->sh[h->shards[k]].holds > 0)
            p->sh[h->shards[k]].holds--;
    if (p)
        pack_unref(d->ahead, p);
    free(h->shards);
    *h = (struct ahead_hold){0};
}

/* The walk's callback: sample of the stream walked, `ahead` samples after
 * its next batch's first, order its place among the streams, next: the
 * sample is in that next batch. */
void ahead_lost(struct daemon *d, const struct ahead_hold *h)
{
    struct ahead *a = d->ahead;
    uint64_t now = clock_mono_ns();

    for (uint32_t k = 0; a && h->pack && k < h->n; k++)
        if (h->pack->sh[h->shards[k]].state == SH_PRESENT)
            recheck(a, h->pack, h->shards[k], now, true);
    run(d);
}

int ahead_held_ready(struct daemon *d, const struct ahead_hold *h, struct rf_err *err)
{
    bool missing = false;

    if (!d->ahead)
        return 0;
    for (uint32_t k = 0; h->pack && k < h->n; k++) {
        const struct ashard *s = &h->pack->sh[h->shards[k]];

        if (s->failed)
            return rf_err_set(err, -EIO, "%s", s->failed);
        missing |= s->state != SH_PRESENT;
    }
    return missing ? -EAGAIN : 0;
}

static bool walk_use(void *arg, uint64_t sample, uint64_t ahead, uint32_t order, bool next)
{
    struct ahead *a = ((struct daemon *)((void **)arg)[0])->ahead;
    struct ads *x = ((void **)arg)[1];
    uint32_t i = dataset_shard_of(x->ds, sample);
    struct ashard *s = &x->p->sh[i];
    uint64_t key = (ahead << 8) | (order < 255 ? order : 255);

    if (ahead == 0) { /* a new stream's walk */
        a->stamp++;
        x->walk_bytes = 0;
        x->walk_met = 0;
    }
    if (key < s->key)
        s->key = key;
    s->demand |= next;
    if (s->stamp != a->stamp) {
        s->stamp = a->stamp;
        x->walk_bytes += s->bytes;
        x->walk_met++;
    }
    /* further on, no shard gets a sooner use: every one was met, or as
     * many as the cache holds */
    return x->walk_bytes < cache_budget(a->c) && x->walk_met < x->p->n;
}

/* The shard to evict for a fetch of a shard with next use `key`, or false. */
static bool victim(struct ahead *a, uint64_t key, struct apack **vp, uint32_t *vi)
{
    bool found = false;
    uint64_t best_key = 0, best_use = UINT64_MAX;

    for (struct apack *p = a->packs; p; p = p->next) {
        for (uint32_t i = 0; i < p->n; i++) {
            struct ashard *s = &p->sh[i];
            bool better;

            if (s->state != SH_PRESENT || s->holds > 0 || s->demand)
                continue;   /* read now, or by some stream's next batch */
            if (a->policy == AHEAD_BELADY) {
                if (s->key <= key)
                    continue;   /* needed no later than the fetch: keep */
                better = !found || s->key > best_key ||
                         (s->key == best_key && s->last_use < best_use);
            } else {
                better = !found || s->last_use < best_use;
            }
            if (better) {
                found = true;
                best_key = s->key;
                best_use = s->last_use;
                *vp = p;
                *vi = i;
            }
        }
    }
    return found;
}

/* Frees room for bytes in the cache for a shard with next use key:
 * unserved packs first, then victims.  True when there is room. */
static bool make_room(struct ahead *a, uint64_t bytes, uint64_t key)
{
    uint64_t budget = cache_budget(a->c);
    bool dropped = false;

    while (cache_used(a->c) + bytes > budget) {
        struct apack *p;
        uint32_t i;
        struct cache_key k;
        struct rf_err e;

        if (!dropped) {
            uint64_t keep[64], freed;
            size_t n = 0;

            dropped = true;
            for (p = a->packs; p && n < 64; p = p->next)
                keep[n++] = p->pack;
            freed = cache_drop_packs(a->c, keep, n);
            if (freed) {
                log_info("cache: %llu bytes of packs no dataset serves removed for room",
                         (unsigned long long)freed);
                continue;
            }
        }
        if (!victim(a, key, &p, &i))
            return false;
        k = shard_key(p, i);
        if (cache_evict(a->c, &k, &e) < 0) {
            log_warn("%s", e.msg);
            return false;
        }
        p->sh[i].state = SH_ABSENT;
        a->cnt.evictions++;
        a->cnt.evicted_bytes += k.bytes;
    }
    return true;
}

static void fetch_work(uv_work_t *req)
{
    struct afetch *f = req->data;
    struct s3_target t;
    struct url u;
    struct s3_settings set = {f->s3_endpoint[0] ? f->s3_endpoint : NULL,
                              f->s3_region[0] ? f->s3_region : NULL};
    char url[URL_MAX + CACHE_NAME_MAX + 2];
    struct fetch_req get = {.url = url};
    int rc;

    memset(&t, 0, sizeof(t));
    rc = url_parse(f->url, strlen(f->url), &u, &f->err);
    if (rc == 0 && u.scheme == URL_S3) {
        rc = s3_resolve(&set, environ, &t, &f->err);
        get.s3 = &t;
    }
    if (rc == 0)
        rc = remote_object_url(f->url, &u, &t, f->name, url, sizeof(url), &f->err);
    if (rc == 0)
        rc = cache_fetch(f->a->c, f->a->fc, &get, &f->key, &f->res, &f->err);
    else
        cache_unreserve(f->a->c, &f->key);
    if (rc < 0 && !strstr(f->err.msg, f->url))
        rf_err_prefix(&f->err, "%s", f->url);
    f->rc = rc;
}

static void fetch_done(uv_work_t *req, int status)
{
    struct afetch *f = req->data;
    struct daemon *d = req->loop->data;
    struct ahead *a = d->ahead;
    struct ashard *s = &f->p->sh[f->shard];

    a->fetching--;
    a->cnt.fetching = a->fetching;
    remote_count(d, &f->res, f->rc);
    s->last_use = ++a->clock;
    s->state = f->rc == 0 ? SH_PRESENT : SH_ABSENT;
    if (status == UV_ECANCELED || d->stopping) {
        pack_unref(a, f->p);
        free(f);
        return;
    }
    hist_observe(&a->cnt.latency, clock_mono_ns() - f->t0);
    if (f->rc == 0) {
        s->checked_ns = clock_mono_ns();
    } else {
        free(s->failed);
        s->failed = strdup(f->err.msg);
        log_error("%s", f->err.msg);
    }
    sched_fill(d); /* waiting batches plan now, or fail with the shard's error */
    d->sched.ops->dispatch(d);
    if (s->failed) { /* told: a later stream tries again */
        free(s->failed);
        s->failed = NULL;
    }
    pack_unref(a, f->p);
    free(f);
    run(d);
}

/* Starts the fetch of shard i of x's pack (room made).  0 or -errno. */
static int start_fetch(struct daemon *d, struct ads *x, uint32_t i)
{
    struct ahead *a = d->ahead;
    struct afetch *f = calloc(1, sizeof(*f));
    struct ashard *s = &x->p->sh[i];
    struct rf_err e;
    int rc;

    if (!f)
        return -ENOMEM;
    f->a = a;
    f->p = x->p;
    f->shard = i;
    snprintf(f->url, sizeof(f->url), "%s", x->url);
    snprintf(f->s3_endpoint, sizeof(f->s3_endpoint), "%s", x->s3_endpoint);
    snprintf(f->s3_region, sizeof(f->s3_region), "%s", x->s3_region);
    snprintf(f->name, sizeof(f->name), "%s", s->name);
    f->key = shard_key(x->p, i);
    f->key.name = f->name;
    if (cache_reserve(a->c, &f->key, &e) < 0) {
        free(f);
        return -ENOBUFS;
    }
    f->key.reserved = true;
    f->t0 = clock_mono_ns();
    f->req.data = f;
    rc = uv_queue_work(d->loop, &f->req, fetch_work, fetch_done);
    if (rc < 0) {
        cache_unreserve(a->c, &f->key);
        free(f);
        return -EIO;
    }
    x->p->refs++;
    s->state = SH_FETCHING;
    if (s->demand)
        a->cnt.misses++;
    else
        a->cnt.prefetched++;
    a->fetching++;
    a->cnt.fetching = a->fetching;
    return 0;
}

/* The walk, then fetches while slots are free and there is room. */
static void run(struct daemon *d)
{
    struct ahead *a = d->ahead;

    bool absent = false;

    if (!a || d->stopping)
        return;
    a->run_ns = clock_mono_ns();
    /* next uses matter to what is fetched and what makes room for it: with
     * every shard in the cache or on its way, nothing is to decide */
    for (struct apack *p = a->packs; p && !absent; p = p->next)
        for (uint32_t i = 0; i < p->n && !absent; i++)
            absent = p->sh[i].state == SH_ABSENT;
    if (!absent)
        return;
    /* a held ABSENT shard: a job read it and lost it (ahead_lost), and
     * waits for it now */
    for (struct apack *p = a->packs; p; p = p->next)
        for (uint32_t i = 0; i < p->n; i++) {
            p->sh[i].demand = p->sh[i].holds > 0;
            p->sh[i].key = p->sh[i].demand ? 0 : NO_USE;
        }
    for (uint32_t k = 0; k < a->nds; k++) {
        struct ads *x = &a->ds[k];
        void *arg[2] = {d, x};

        if (x->used)
            sched_walk_ahead(d, x->slot, AHEAD_WALK_MAX, walk_use, arg);
    }
    while (a->fetching < AHEAD_FETCHES) {
        struct ads *bx = NULL;
        uint32_t bi = 0;
        uint64_t bkey = NO_USE;

        /* by dataset, so the fetch has a URL (any dataset of the pack) */
        for (uint32_t k = 0; k < a->nds; k++) {
            struct ads *x = &a->ds[k];

            for (uint32_t i = 0; x->used && i < x->p->n; i++) {
                struct ashard *s = &x->p->sh[i];

                if (s->state == SH_ABSENT && !s->failed && s->key < bkey) {
                    bkey = s->key;
                    bx = x;
                    bi = i;
                }
            }
        }
        if (!bx || !make_room(a, bx->p->sh[bi].bytes, bkey))
            return;
        if (start_fetch(d, bx, bi) < 0)
            return;
    }
}

void ahead_kick(struct daemon *d)
{
    run(d);
}

static void on_timer(uv_timer_t *t)
{
    run(t->data);
}

void ahead_counts(const struct daemon *d, struct ahead_counts *out)
{
    const struct ahead *a = d->ahead;

    memset(out, 0, sizeof(*out));
    if (!a)
        return;
    *out = a->cnt;
    for (const struct apack *p = a->packs; p; p = p->next)
        for (uint32_t i = 0; i < p->n; i++)
            out->present += p->sh[i].state == SH_PRESENT;
}

#else /* built without libcurl: no remote dataset is ever registered */

const char *ahead_policy_name(enum ahead_policy p)
{
    return p == AHEAD_LRU ? "lru" : "belady";
}

int ahead_init(struct daemon *d, struct cache *c, struct fetch_client *fc,
               enum ahead_policy policy)
{
    (void)d, (void)c, (void)fc, (void)policy;
    return -ENOTSUP;
}

void ahead_close(struct daemon *d)
{
    (void)d;
}

void ahead_stop(struct daemon *d)
{
    (void)d;
}

int ahead_add(struct daemon *d, uint32_t slot, const struct dataset *ds, const char *url,
              const char *s3_endpoint, const char *s3_region, struct rf_err *err)
{
    (void)d, (void)slot, (void)ds, (void)s3_endpoint, (void)s3_region;
    return rf_err_set(err, -ENOTSUP, "%s: built without remote datasets", url);
}

void ahead_forget(struct daemon *d, uint32_t slot)
{
    (void)d, (void)slot;
}

bool ahead_serves(const struct daemon *d, uint32_t slot)
{
    (void)d, (void)slot;
    return false;
}

int ahead_ready(struct daemon *d, uint32_t slot, const uint64_t *samples, uint32_t n,
                struct rf_err *err)
{
    (void)d, (void)slot, (void)samples, (void)n, (void)err;
    return 0;
}

int ahead_hold(struct daemon *d, uint32_t slot, const uint64_t *samples, uint32_t n,
               struct ahead_hold *h)
{
    (void)d, (void)slot, (void)samples, (void)n;
    *h = (struct ahead_hold){0};
    return 0;
}

void ahead_release(struct daemon *d, struct ahead_hold *h)
{
    (void)d;
    *h = (struct ahead_hold){0};
}

void ahead_lost(struct daemon *d, const struct ahead_hold *h)
{
    (void)d, (void)h;
}

int ahead_held_ready(struct daemon *d, const struct ahead_hold *h, struct rf_err *err)
{
    (void)d, (void)h, (void)err;
    return 0;
}

void ahead_kick(struct daemon *d)
{
    (void)d;
}

void ahead_counts(const struct daemon *d, struct ahead_counts *out)
{
    (void)d;
    memset(out, 0, sizeof(*out));
}

#endif
