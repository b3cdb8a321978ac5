/*
 * remote.c - remote.h's opening of a remote dataset: a uv_queue_work job per
 * remote dataset that reads its MANIFEST and fetches its small files into
 * the node cache, and the completion on the loop that hands the cache's
 * folder to ahead.h and the catalogue.
 */
#include "remote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ahead.h"
#include "daemon.h"
#include "log.h"

#ifdef RINGFEED_REMOTE

#include <stdatomic.h>

#include "cache.h"
#include "crc32c.h"
#include "fetch.h"
#include "manifest.h"
#include "s3.h"
#include "url.h"

extern char **environ;

_Static_assert(CONF_FETCH_RETRIES_MAX == FETCH_RETRIES_MAX, "fetch-retries' bound");
_Static_assert(CONF_DEFAULT_FETCH_RETRIES == FETCH_RETRIES_DEFAULT, "fetch-retries' default");
_Static_assert(CONF_S3_REGION_MAX == S3_REGION_MAX, "s3-region's bound");
_Static_assert(CONF_PATH_MAX == CACHE_DIR_MAX, "cache-dir's bound");

/* One dataset being fetched; owned by the module's list until its
 * completion frees it.  The strings are copies: a reload may change the
 * config while the job runs. */
struct fetch_job {
    uv_work_t req;
    struct remote *r;
    uint32_t slot;
    char name[CTL_DATASET_NAME_MAX + 1];
    char url[CONF_PATH_MAX];
    char s3_endpoint[CONF_ENDPOINT_MAX + 1], s3_region[CONF_S3_REGION_MAX + 1];
    _Atomic uint32_t done, total;         /* files; total 0: the MANIFEST is not read */
    int rc;
    struct rf_err err;
    char folder[CACHE_DIR_MAX + 64];       /* the pack's folder in the cache */
    bool running;                          /* queued on the thread pool */
    struct fetch_job *next;
};

/* The module's state (d->remote). */
struct remote {
    struct cache *cache;
    char cache_dir[CONF_PATH_MAX];         /* the folder it opened */
    struct fetch_client *fc;
    _Atomic uint64_t fetch_bytes, fetch_objects, fetch_retries, fetch_failures;
    struct fetch_job *jobs;                /* in order: the running one, then the
                                              waiting (REMOTE_RUNNING_MAX at once) */
};

/* Fetches on the thread pool at once: one, so a long fetch holds one of
 * libuv's threads (4 by default) and never starves the ring work that
 * ATTACH queues there (stream.c); the others wait their turn in order. */
#define REMOTE_RUNNING_MAX 1

bool remote_built(void)
{
    return true;
}

/* Makes d->remote (the cache and the client) on the first fetch. */
static int remote_ensure(struct daemon *d, const struct conf *cf, struct rf_err *err)
{
    struct remote *r;
    struct fetch_opts o;
    int rc;

    if (d->remote)
        return 0;
    r = calloc(1, sizeof(*r));
    if (!r)
        return rf_err_set(err, -ENOMEM, "out of memory for the remote fetch state");
    rc = cache_open(cf->cache_dir, cf->cache_size, &r->cache, err);
    if (rc < 0) {
        rf_err_prefix(err, "cache-dir");
        free(r);
        return rc;
    }
    fetch_opts_default(&o);
    o.retries = cf->fetch_retries;
    rc = fetch_client_new(&o, &r->fc, err);
    if (rc < 0) {
        cache_close(r->cache);
        free(r);
        return rc;
    }
    rc = ahead_init(d, r->cache, r->fc, cf->cache_evict == CONF_EVICT_LRU ? AHEAD_LRU
                                                                         : AHEAD_BELADY);
    if (rc < 0) {
        fetch_client_free(r->fc);
        cache_close(r->cache);
        free(r);
        return rf_err_set(err, rc, "out of memory for the remote fetch state");
    }
    snprintf(r->cache_dir, sizeof(r->cache_dir), "%s", cf->cache_dir);
    d->remote = r;
    log_info("cache folder %s: %llu of %llu bytes used (cache-size); fetch-retries %u; "
             "cache-evict %s", cf->cache_dir, (unsigned long long)cache_used(r->cache),
             (unsigned long long)cache_budget(r->cache), cf->fetch_retries,
             conf_cache_evict_name(cf->cache_evict));
    return 0;
}

int remote_object_url(const char *base, const struct url *u, const struct s3_target *t,
                      const char *name, char *out, size_t cap, struct rf_err *err)
{
    int n;

    if (u->scheme == URL_S3)
        return s3_object_url(t, base, u, name, out, cap, err);
    n = snprintf(out, cap, "%s%s%s", base, u->dir ? "" : "/", name);
    if (n < 0 || (size_t)n >= cap)
        return rf_err_set(err, -ENAMETOOLONG, "%s: the URL of %s is longer than %zu bytes",
                          base, name, cap - 1);
    return 0;
}

static int object_url(const struct fetch_job *j, const struct url *u, const struct s3_target *t,
                      const char *name, char *out, size_t cap, struct rf_err *err)
{
    return remote_object_url(j->url, u, t, name, out, cap, err);
}

static void count(struct remote *r, const struct fetch_result *res, int rc, bool object);

void remote_count(struct daemon *d, const struct fetch_result *res, int rc)
{
    if (d->remote)
        count(d->remote, res, rc, true);
}

/* Counts one GET's result into the module's counters. */
static void count(struct remote *r, const struct fetch_result *res, int rc, bool object)
{
    atomic_fetch_add(&r->fetch_bytes, res->bytes);
    if (res->tries > 1)
        atomic_fetch_add(&r->fetch_retries, res->tries - 1);
    if (rc < 0)
        atomic_fetch_add(&r->fetch_failures, 1);
    else if (object && res->tries > 0)
        atomic_fetch_add(&r->fetch_objects, 1);
}

/* The files the MANIFEST names but the shards (dict, sources, subsets,
 * and the MANIFEST itself), as cache keys; returns how many (at most cap).
 * The shards are fetched when the streams need them (ahead.h). */
static uint32_t pack_keys(const struct manifest *m, uint64_t id, const char *text, size_t len,
                          struct cache_key *keys, uint32_t cap)
{
    uint32_t n = 0;

    if (m->has_dict && n < cap)
        keys[n++] = (struct cache_key){id, manifest_dict_name(m), m->dict_size, m->dict_crc,
                                       CACHE_CHECK_CRC};
    if (m->has_sources && n < cap)
        keys[n++] = (struct cache_key){id, manifest_sources_name(m), m->sources_size,
                                       m->sources_crc, CACHE_CHECK_CRC};
    for (uint32_t i = 0; i < m->nsubsets && n < cap; i++)
        keys[n++] = (struct cache_key){id, manifest_subset_file(m, i), m->subsets[i].bytes,
                                       m->subsets[i].crc, CACHE_CHECK_CRC};
    /* last: a folder with its MANIFEST has every file (dataset_open reads it first) */
    if (n < cap)
        keys[n++] = (struct cache_key){id, "MANIFEST", len, crc32c(0, text, len),
                                       CACHE_CHECK_CRC};
    return n;
}

/* The thread pool's part: MANIFEST, budget check, every file. */
static void fetch_work(uv_work_t *req)
{
    struct fetch_job *j = req->data;
    struct remote *r = j->r;
    struct s3_target t;
    struct url u;
    struct manifest m = {0};
    struct fetch_result res = {0};
    struct cache_key *keys = NULL;
    char *text = NULL, url[URL_MAX + CACHE_NAME_MAX + 2];
    uint64_t total = 0;
    uint32_t n = 0;
    struct s3_settings set = {j->s3_endpoint[0] ? j->s3_endpoint : NULL,
                              j->s3_region[0] ? j->s3_region : NULL};
    struct fetch_sink sink = {.fd = -1, .cap = DATASET_MANIFEST_MAX};
    struct fetch_req get = {.url = url};
    int rc;

    memset(&t, 0, sizeof(t));
    rc = url_parse(j->url, strlen(j->url), &u, &j->err);
    if (rc == 0 && u.scheme == URL_S3) {
        rc = s3_resolve(&set, environ, &t, &j->err);
        get.s3 = &t;
    }
    if (rc == 0)
        rc = object_url(j, &u, &t, "MANIFEST", url, sizeof(url), &j->err);
    if (rc == 0 && !(text = malloc(DATASET_MANIFEST_MAX)))
        rc = rf_err_set(&j->err, -ENOMEM, "out of memory for the MANIFEST");
    if (rc == 0) {
        sink.buf = text;
        rc = fetch_get(r->fc, &get, &sink, &res, &j->err);
        count(r, &res, rc, false);
    }
    if (rc == 0 && (rc = manifest_parse(text, res.bytes, &m, &j->err)) < 0)
        rf_err_prefix(&j->err, "%s", url);
    if (rc == 0) {
        uint32_t cap = m.nshards + m.nsubsets + 3;

        keys = calloc(cap, sizeof(*keys));
        if (!keys)
            rc = rf_err_set(&j->err, -ENOMEM, "out of memory for %u file names", cap);
        else
            n = pack_keys(&m, dataset_identity_of(text, res.bytes), text, res.bytes, keys, cap);
    }
    /* the small files stay while the dataset is served; each shard must
     * fit beside them (a batch's shards together: ahead_ready) */
    for (uint32_t i = 0; rc == 0 && i < n; i++)
        total += keys[i].bytes;
    for (uint32_t s = 0; rc == 0 && s < m.nshards; s++)
        if (total + m.shards[s].bytes > cache_budget(r->cache))
            rc = rf_err_set(&j->err, -EFBIG,
                            "%s: shard %s is %llu bytes and the pack's other files %llu, but "
                            "cache-size is %llu: raise cache-size", j->url,
                            manifest_shard_name(&m, s), (unsigned long long)m.shards[s].bytes,
                            (unsigned long long)total,
                            (unsigned long long)cache_budget(r->cache));
    if (rc == 0)
        atomic_store(&j->total, n);
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        rc = object_url(j, &u, &t, keys[i].name, url, sizeof(url), &j->err);
        if (rc == 0) {
            rc = cache_fetch(r->cache, r->fc, &get, &keys[i], &res, &j->err);
            count(r, &res, rc, true);
        }
        if (rc == 0)
            atomic_fetch_add(&j->done, 1);
    }
    if (rc == 0 && (rc = cache_path(r->cache, &keys[n - 1], j->folder, sizeof(j->folder),
                                    &j->err)) == 0)
        *strrchr(j->folder, '/') = '\0'; /* .../packs/ID/MANIFEST -> .../packs/ID */
    /* the shards a run before left in the cache, verified here off the
     * loop (once per file after the cache's open), so ahead_add finds them */
    for (uint32_t s = 0; rc == 0 && s < m.nshards; s++) {
        struct cache_key k = {keys[n - 1].pack, manifest_shard_name(&m, s),
                              m.shards[s].bytes, m.shards[s].index_crc, CACHE_CHECK_SHARD,
                              false};
        struct rf_err e;

        if (cache_lookup(r->cache, &k, &e) < 0)
            log_warn("%s", e.msg);
    }
    if (rc < 0 && !strstr(j->err.msg, j->url)) /* an s3 object's https URL, a cache error */
        rf_err_prefix(&j->err, "%s", j->url);
    j->rc = rc;
    free(keys);
    manifest_free(&m);
    free(text);
}

static void fetch_done(uv_work_t *req, int status);

/* Removes j from the list. */
static void unlink_job(struct remote *r, struct fetch_job *j)
{
    struct fetch_job **p;

    for (p = &r->jobs; *p && *p != j; p = &(*p)->next)
        ;
    if (*p)
        *p = j->next;
}

/* Starts waiting jobs while fewer than REMOTE_RUNNING_MAX run; one that
 * cannot be queued fails its slot. */
static void start_waiting(struct daemon *d)
{
    unsigned running = 0;

    for (struct fetch_job *j = d->remote->jobs; j; j = j->next)
        running += j->running;
    while (running < REMOTE_RUNNING_MAX && !d->stopping) {
        struct fetch_job *j = d->remote->jobs;
        int rc;

        while (j && j->running)
            j = j->next;
        if (!j)
            return;
        rc = uv_queue_work(d->loop, &j->req, fetch_work, fetch_done);
        if (rc == 0) {
            j->running = true;
            running++;
            log_info("dataset %s: fetching %s into the cache folder %s", j->name, j->url,
                     d->remote->cache_dir);
            continue;
        }
        unlink_job(d->remote, j);
        rf_err_set(&j->err, -EIO, "%s: cannot queue the fetch: %s", j->url, uv_strerror(rc));
        catalog_fetch_failed(d, j->slot, j->name, j->url, j->err.msg);
        free(j);
    }
}

/* The loop's part: place or fail the slot, forget the job, start the next. */
static void fetch_done(uv_work_t *req, int status)
{
    struct fetch_job *j = req->data;
    struct daemon *d = req->loop->data;

    unlink_job(j->r, j);
    if (status == UV_ECANCELED || d->stopping) {
        free(j);
        return;
    }
    start_waiting(d);
    if (j->rc == 0) {
        struct dataset *ds;
        int rc = dataset_open_flags(j->folder, DATASET_OPEN_ON_DEMAND, &ds, &j->err);

        /* the shards' states first: the slot takes ATTACHes once placed */
        if (rc == 0 && (rc = ahead_add(d, j->slot, ds, j->url, j->s3_endpoint, j->s3_region,
                                       &j->err)) < 0)
            dataset_close(ds);
        if (rc == 0) {
            if (catalog_fetched(d, j->slot, j->name, j->url, j->folder, ds) < 0)
                ahead_forget(d, j->slot);
            free(j);
            return;
        }
        rf_err_prefix(&j->err, "%s (cached in %s)", j->url, j->folder);
    }
    catalog_fetch_failed(d, j->slot, j->name, j->url, j->err.msg);
    free(j);
}

int remote_fetch(struct daemon *d, const struct conf *cf, uint32_t slot, const char *name,
                 const char *url, struct rf_err *err)
{
    struct fetch_job *j, **p;
    int rc = remote_ensure(d, cf, err);

    if (rc < 0)
        return rc;
    j = calloc(1, sizeof(*j));
    if (!j)
        return rf_err_set(err, -ENOMEM, "out of memory for a fetch");
    j->r = d->remote;
    j->slot = slot;
    snprintf(j->name, sizeof(j->name), "%s", name);
    snprintf(j->url, sizeof(j->url), "%s", url);
    snprintf(j->s3_endpoint, sizeof(j->s3_endpoint), "%s", cf->s3_endpoint);
    snprintf(j->s3_region, sizeof(j->s3_region), "%s", cf->s3_region);
    j->req.data = j;
    for (p = &d->remote->jobs; *p; p = &(*p)->next) /* at the end: in order */
        ;
    *p = j;
    start_waiting(d);
    return 0;
}

int remote_progress(const struct daemon *d, uint32_t slot, char *buf, size_t cap)
{
    for (const struct fetch_job *j = d->remote ? d->remote->jobs : NULL; j; j = j->next) {
        uint32_t total = atomic_load(&((struct fetch_job *)j)->total);

        if (j->slot != slot)
            continue;
        if (!j->running)
            snprintf(buf, cap, "%s waits for the fetch before it", j->url);
        else if (total == 0)
            snprintf(buf, cap, "reading the MANIFEST of %s", j->url);
        else
            snprintf(buf, cap, "%u of %u files of %s are in the cache",
                     atomic_load(&((struct fetch_job *)j)->done), total, j->url);
        return 0;
    }
    return -ENOENT;
}

void remote_counts(const struct daemon *d, struct remote_counts *out)
{
    struct remote *r = d->remote;

    memset(out, 0, sizeof(*out));
    out->cache_limit = d->cf.cache_size;
    if (!r)
        return;
    out->cache_bytes = cache_used(r->cache);
    out->cache_limit = cache_budget(r->cache);
    out->fetch_bytes = atomic_load(&r->fetch_bytes);
    out->fetch_objects = atomic_load(&r->fetch_objects);
    out->fetch_retries = atomic_load(&r->fetch_retries);
    out->fetch_failures = atomic_load(&r->fetch_failures);
}

void remote_stop(struct daemon *d)
{
    ahead_stop(d);
    if (d->remote)
        fetch_client_cancel(d->remote->fc);
}

void remote_close(struct daemon *d)
{
    if (!d->remote)
        return;
    while (d->remote->jobs) { /* waiting ones: never queued */
        struct fetch_job *j = d->remote->jobs;

        d->remote->jobs = j->next;
        free(j);
    }
    ahead_close(d);
    fetch_client_free(d->remote->fc);
    cache_close(d->remote->cache);
    free(d->remote);
    d->remote = NULL;
}

#else /* built without libcurl: a remote dataset fails alone, saying so */

bool remote_built(void)
{
    return false;
}

int remote_fetch(struct daemon *d, const struct conf *cf, uint32_t slot, const char *name,
                 const char *url, struct rf_err *err)
{
    (void)d, (void)cf, (void)slot, (void)name;
    return rf_err_set(err, -ENOTSUP, "%s: this ringfeedd was built without remote datasets "
                      "(libcurl >= 7.88 was not found at build time, -Dremote)", url);
}

int remote_progress(const struct daemon *d, uint32_t slot, char *buf, size_t cap)
{
    (void)d, (void)slot, (void)buf, (void)cap;
    return -ENOENT;
}

void remote_counts(const struct daemon *d, struct remote_counts *out)
{
    memset(out, 0, sizeof(*out));
    out->cache_limit = d->cf.cache_size;
}

void remote_stop(struct daemon *d)
{
    (void)d;
}

void remote_close(struct daemon *d)
{
    (void)d;
}

#endif
