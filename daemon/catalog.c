/*
 * catalog.c - the datasets this daemon serves, by name.
 *
 * Clients name datasets, never paths: the daemon opens only what its config
 * (or --dataset flags) lists.  The main process opens each dataset once at
 * start-up to validate it and learn its size and shape; it never decodes a
 * record.  Workers open the same folders themselves.
 *
 * Streams and workers name a dataset by its index in the catalogue, so an
 * index never changes meaning while anything may still use it.  A reload
 * (catalog_reload) therefore never moves an entry:
 *   - an added dataset takes a free slot (a hole) or the next index, and
 *     the pool restarts its workers so they know it;
 *   - a removed one is "retired": no longer offered to ATTACH or listed by
 *     DATASETS, but still open for the clients attached to it;
 *   - once no client uses a retired entry (catalog_sweep, after every
 *     detach) it is closed and becomes a hole: workers are started with
 *     "-=" in its place (an empty slot) until a later dataset takes it.
 * A dataset whose folder changes is a removal plus an addition.
 *
 * A dataset that does not open at start-up (missing, truncated, not a
 * pack) fails on its own: its slot is a hole that keeps the name and the
 * reason, ATTACH to it is refused with that reason, the daemon serves the
 * rest, and a reload that opens it places it as an addition.  Only running
 * out of memory stops the start.
 *
 * A remote dataset (dataset.NAME = URL, remote.h) starts as a "fetching"
 * hole: not offered, not failing, its slot kept for it; ATTACH to it is
 * refused with its progress.  remote.c's completion places it
 * (catalog_fetched: the folder is the pack's in the cache, url keeps the
 * config's value, which a reload compares) or fails it alone
 * (catalog_fetch_failed); a reload that names a failed one fetches again.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ahead.h"
#include "daemon.h"
#include "log.h"
#include "stream.h"

/* The config value entry e was opened from: its URL, or its folder. */
static const char *source(const struct catalog_entry *e)
{
    return e->url[0] ? e->url : e->dir;
}

/* Makes entry e a hole kept for name's fetch of url. */
static void mark_fetching(struct catalog_entry *e, const char *name, const char *url)
{
    memset(e, 0, sizeof(*e));
    snprintf(e->name, sizeof(e->name), "-"); /* workers read "-=" */
    snprintf(e->failed_name, sizeof(e->failed_name), "%s", name);
    snprintf(e->url, sizeof(e->url), "%s", url);
    e->fetching = true;
}

/* A slot no dataset and no fetch holds, or -ENOSPC. */
static int free_slot(const struct daemon *d)
{
    uint32_t slot = 0;

    while (slot < d->ncat && (d->cat[slot].ds || d->cat[slot].fetching))
        slot++;
    return slot < CONF_DATASETS_MAX ? (int)slot : -ENOSPC;
}

/* Forgets the failures recorded under name (it is opened or fetched anew). */
static void forget_failure(struct daemon *d, const char *name)
{
    for (uint32_t j = 0; j < CONF_DATASETS_MAX; j++)
        if (!d->cat[j].ds && !d->cat[j].fetching && strcmp(d->cat[j].failed_name, name) == 0)
            d->cat[j].failed[0] = d->cat[j].failed_name[0] = '\0';
}

/* Starts slot's fetch; one that cannot start fails the slot alone. */
static void start_fetch(struct daemon *d, const struct conf *cf, uint32_t slot)
{
    struct catalog_entry *e = &d->cat[slot];
    char name[sizeof(e->failed_name)], url[sizeof(e->url)];
    struct rf_err err;

    memcpy(name, e->failed_name, sizeof(name));
    memcpy(url, e->url, sizeof(url));
    if (remote_fetch(d, cf, slot, name, url, &err) < 0)
        catalog_fetch_failed(d, slot, name, url, err.msg);
}

void catalog_start_fetches(struct daemon *d)
{
    for (uint32_t i = 0; i < d->ncat; i++)
        if (d->cat[i].fetching)
            start_fetch(d, &d->cf, i);
}

int catalog_fetched(struct daemon *d, uint32_t slot, const char *name, const char *url,
                    const char *dir, struct dataset *ds)
{
    struct catalog_entry *e = &d->cat[slot];
    const struct dataset_info *info;

    if (!e->fetching || strcmp(e->failed_name, name) != 0 || strcmp(e->url, url) != 0) {
        dataset_close(ds); /* a reload dropped it while it was fetched */
        return -ESTALE;
    }
    e->fetching = false;
    e->failed_name[0] = '\0';
    snprintf(e->name, sizeof(e->name), "%s", name);
    snprintf(e->dir, sizeof(e->dir), "%s", dir);
    e->ds = ds;
    if (slot >= d->ncat)
        d->ncat = slot + 1;
    info = dataset_info(ds);
    log_info("dataset %s: %s, %llu samples of %s, %u classes (fetched from %s)", e->name,
             e->dir, (unsigned long long)info->samples, dataset_kind_name(info->kind),
             info->classes, url);
    pool_roll(d); /* the workers learn it */
    return 0;
}

void catalog_fetch_failed(struct daemon *d, uint32_t slot, const char *name, const char *url,
                          const char *why)
{
    struct catalog_entry *e = &d->cat[slot];

    if (!e->fetching || strcmp(e->failed_name, name) != 0 || strcmp(e->url, url) != 0)
        return;
    e->fetching = false;
    snprintf(e->failed, sizeof(e->failed), "%.255s", why);
    d->datasets_failed++;
    log_error("dataset %s (%s) is not served: %s; the daemon serves the rest, attaches to it "
              "are refused with this reason until a reload (SIGHUP) fetches it again",
              name, url, why);
}

int catalog_open(struct daemon *d)
{
    /* room for every slot a reload may use, so entries never move */
    d->cat = calloc(CONF_DATASETS_MAX, sizeof(*d->cat));
    if (!d->cat)
        return -ENOMEM;
    for (uint32_t i = 0; i < d->cf.n_datasets; i++) {
        struct catalog_entry *e = &d->cat[i];
        const struct dataset_info *info;
        struct rf_err err;
        int rc;

        d->ncat = i + 1;
        if (conf_dataset_remote(d->cf.datasets[i].dir)) {
            /* fetched once the loop runs (catalog_start_fetches) */
            mark_fetching(e, d->cf.datasets[i].name, d->cf.datasets[i].dir);
            continue;
        }
        snprintf(e->name, sizeof(e->name), "%s", d->cf.datasets[i].name);
        snprintf(e->dir, sizeof(e->dir), "%s", d->cf.datasets[i].dir);
        rc = dataset_open(e->dir, &e->ds, &err);
        if (rc == -ENOMEM) {
            log_error("dataset %s: %s", e->name, err.msg);
            return rc;
        }
        if (rc < 0) {
            /* failed on its own: a hole that ATTACH names it by, the rest
             * is served, and a reload (SIGHUP) opens it again */
            log_error("dataset %s (%s) is not served: %s; the daemon serves the rest, "
                      "attaches to it are refused with this reason until a reload (SIGHUP) "
                      "opens it", e->name, e->dir, err.msg);
            snprintf(e->failed, sizeof(e->failed), "%.255s", err.msg);
            snprintf(e->failed_name, sizeof(e->failed_name), "%s", e->name);
            snprintf(e->name, sizeof(e->name), "-"); /* workers read "-=" */
            e->dir[0] = '\0';
            e->ds = NULL;
            d->datasets_failed++;
            continue;
        }
        info = dataset_info(e->ds);
        log_info("dataset %s: %s, %llu samples of %s, %u classes", e->name, e->dir,
                 (unsigned long long)info->samples, dataset_kind_name(info->kind),
                 info->classes);
    }
    return 0;
}

void catalog_close(struct daemon *d)
{
    for (uint32_t i = 0; i < d->ncat; i++)
        dataset_close(d->cat[i].ds);
    free(d->cat);
    d->cat = NULL;
    d->ncat = 0;
    free(d->quarantine.items);
    d->quarantine.items = NULL;
    d->quarantine.n = 0;
}

static uint32_t entry_users(const struct daemon *d, uint32_t i);

int catalog_quarantine_add(struct daemon *d, uint32_t dataset_id, uint64_t index)
{
    struct wire_quarantine *q;

    d->quarantine.total++;
    q = realloc(d->quarantine.items, (d->quarantine.n + 1) * sizeof(*q));
    if (!q)
        return -ENOMEM;
    d->quarantine.items = q;
    q[d->quarantine.n++] = (struct wire_quarantine){
        .type = WIRE_QUARANTINE, .dataset_id = dataset_id, .index = index,
    };
    return 0;
}

bool catalog_offers(const struct daemon *d, uint32_t i)
{
    return i < d->ncat && d->cat[i].ds && !d->cat[i].retired && !d->cat[i].failed[0];
}

uint64_t catalog_data_bytes(const struct daemon *d)
{
    uint64_t total = 0;

    for (uint32_t i = 0; i < d->ncat; i++) {
        const struct dataset_info *info = d->cat[i].ds ? dataset_info(d->cat[i].ds) : NULL;

        for (uint32_t k = 0; info && k < info->shards; k++) {
            struct dataset_shard_info si;

            if (dataset_shard_info(d->cat[i].ds, k, &si) == 0)
                total += si.file_size;
        }
    }
    return total;
}

void catalog_fail(struct daemon *d, uint32_t i, const char *why)
{
    struct catalog_entry *e = &d->cat[i];

    if (i >= d->ncat || !e->ds)
        return;
    if (!e->failed[0]) {
        snprintf(e->failed, sizeof(e->failed), "%s", why);
        snprintf(e->failed_name, sizeof(e->failed_name), "%s", e->name);
        d->datasets_failed++;
        log_error("dataset %s (%s) failed: %s; its %u client(s) get this error, new attaches "
                  "are refused until a reload (SIGHUP) opens it again",
                  e->name, e->dir, why, entry_users(d, i));
    }
    sched_fail_dataset(d, i, e->failed);
}

/* A failed dataset's reopen failed too: its reason becomes why. */
static void fail_again(struct daemon *d, const char *name, const char *why)
{
    for (uint32_t i = 0; i < CONF_DATASETS_MAX; i++)
        if (d->cat[i].failed[0] && strcmp(d->cat[i].failed_name, name) == 0)
            snprintf(d->cat[i].failed, sizeof(d->cat[i].failed), "%.255s", why);
}

const char *catalog_failed_reason(const struct daemon *d, const char *name)
{
    for (uint32_t i = 0; i < CONF_DATASETS_MAX; i++) { /* holes past ncat too */
        struct catalog_entry *e = &d->cat[i];
        char progress[1280];

        if (e->fetching && strcmp(e->failed_name, name) == 0) {
            if (remote_progress(d, i, progress, sizeof(progress)) < 0)
                snprintf(progress, sizeof(progress), "%s", e->url);
            snprintf(e->why, sizeof(e->why), CATALOG_FETCHING "%s; attaches are refused until "
                     "every file is in the node's cache, then it is served", progress);
            return e->why;
        }
        if (e->failed[0] && strcmp(e->failed_name, name) == 0)
            return e->failed;
    }
    return NULL;
}

uint32_t catalog_failing(const struct daemon *d)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < CONF_DATASETS_MAX; i++) /* holes past ncat too */
        n += d->cat[i].failed[0] != '\0';
    return n;
}

const char *catalog_failing_name(const struct daemon *d, uint32_t k)
{
    for (uint32_t i = 0; i < CONF_DATASETS_MAX; i++)
        if (d->cat[i].failed[0] && k-- == 0)
            return d->cat[i].failed_name;
    return NULL;
}

uint32_t catalog_offered(const struct daemon *d)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < d->ncat; i++)
        n += catalog_offers(d, i);
    return n;
}

int catalog_find(const struct daemon *d, const char *name)
{
    for (uint32_t i = 0; i < d->ncat; i++)
        if (catalog_offers(d, i) && strcmp(d->cat[i].name, name) == 0)
            return (int)i;
    return -ENOENT;
}

void catalog_names(const struct daemon *d, char *buf, size_t cap)
{
    size_t len = 0;

    buf[0] = '\0';
    for (uint32_t i = 0; i < d->ncat && len < cap; i++) {
        int n;

        if (!catalog_offers(d, i))
            continue;
        n = snprintf(buf + len, cap - len, "%s%s", len ? " " : "", d->cat[i].name);
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

/* Clients attached to entry i now, or attaching (their ring being made). */
static uint32_t entry_users(const struct daemon *d, uint32_t i)
{
    struct sched_client c;
    uint32_t n = 0;

    for (const struct stream *st = sched_client_next(d, NULL, &c); st;
         st = sched_client_next(d, st, &c))
        n += stream_reads(st, i);
    return n + sched_making_users(d, i);
}

/* Turns entry i into a hole: closed, its quarantined samples forgotten.  A
 * failed entry's name and reason stay (ATTACH says why) until a reload
 * places a dataset in the slot. */
static void make_hole(struct daemon *d, uint32_t i)
{
    char failed[sizeof(d->cat[i].failed)], failed_name[sizeof(d->cat[i].failed_name)];
    uint32_t kept = 0;

    ahead_forget(d, i); /* a remote dataset's shard states */
    dataset_close(d->cat[i].ds);
    for (uint32_t q = 0; q < d->quarantine.n; q++)
        if (d->quarantine.items[q].dataset_id != i)
            d->quarantine.items[kept++] = d->quarantine.items[q];
    d->quarantine.n = kept;
    memcpy(failed, d->cat[i].failed, sizeof(failed));
    memcpy(failed_name, d->cat[i].failed_name, sizeof(failed_name));
    memset(&d->cat[i], 0, sizeof(d->cat[i]));
    snprintf(d->cat[i].name, sizeof(d->cat[i].name), "-"); /* workers read "-=" */
    memcpy(d->cat[i].failed, failed, sizeof(failed));
    memcpy(d->cat[i].failed_name, failed_name, sizeof(failed_name));
}

void catalog_sweep(struct daemon *d)
{
    for (uint32_t i = 0; i < d->ncat; i++) {
        if (!d->cat[i].ds || (!d->cat[i].retired && !d->cat[i].failed[0]) ||
            entry_users(d, i) > 0)
            continue;
        log_info("dataset %s (%s): %s and no client reads it now; closed", d->cat[i].name,
                 d->cat[i].dir, d->cat[i].failed[0] ? "failed"
                                : d->cat[i].on_demand ? "retired to make room for another folder"
                                                      : "removed by a reload");
        make_hole(d, i);
    }
    while (d->ncat > 0 && !d->cat[d->ncat - 1].ds && !d->cat[d->ncat - 1].fetching)
        d->ncat--;
}

/* The live (offered) entry called name, or -1. */
static int find_live(const struct daemon *d, const char *name)
{
    int i = catalog_find(d, name);

    return i < 0 ? -1 : i;
}

int catalog_add(struct daemon *d, const char *name, const char *dir, struct dataset *ds,
                bool on_demand, const char *how)
{
    const struct dataset_info *info;
    struct catalog_entry *e;
    int slot = free_slot(d);

    if (slot < 0)
        return slot;
    e = &d->cat[slot];
    memset(e, 0, sizeof(*e));
    forget_failure(d, name); /* opened again */
    snprintf(e->name, sizeof(e->name), "%s", name);
    snprintf(e->dir, sizeof(e->dir), "%s", dir);
    e->ds = ds;
    e->on_demand = on_demand;
    if ((uint32_t)slot == d->ncat)
        d->ncat++;
    info = dataset_info(e->ds);
    log_info("dataset %s: %s, %llu samples of %s, %u classes (%s)", e->name, e->dir,
             (unsigned long long)info->samples, dataset_kind_name(info->kind), info->classes,
             how);
    return (int)slot;
}

int catalog_find_dir(const struct daemon *d, const char *dir)
{
    char real[PATH_MAX];

    for (uint32_t i = 0; i < d->ncat; i++) {
        if (!catalog_offers(d, i))
            continue;
        if (strcmp(d->cat[i].dir, dir) == 0 ||
            (realpath(d->cat[i].dir, real) && strcmp(real, dir) == 0))
            return (int)i;
    }
    return -ENOENT;
}

uint32_t catalog_retire_unused(struct daemon *d)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < d->ncat; i++) {
        if (!catalog_offers(d, i) || !d->cat[i].on_demand || entry_users(d, i) > 0)
            continue;
        d->cat[i].retired = true;
        n++;
    }
    catalog_sweep(d);
    return n;
}

/* The slot fetching cd (same name, same URL), or -1. */
static int fetching_slot(const struct daemon *d, const struct conf_dataset *cd)
{
    for (uint32_t j = 0; j < d->ncat; j++)
        if (d->cat[j].fetching && strcmp(d->cat[j].failed_name, cd->name) == 0 &&
            strcmp(d->cat[j].url, cd->dir) == 0)
            return (int)j;
    return -1;
}

int catalog_reload(struct daemon *d, const struct conf *nc, bool *added, struct rf_err *err)
{
    struct dataset *opened[CONF_DATASETS_MAX] = { 0 };
    int revive[CONF_DATASETS_MAX];
    uint32_t free_slots = 0, need = 0;
    int rc = 0;

    *added = false;
    /* 1. what each configured dataset needs: nothing, a revival, or opening */
    for (unsigned k = 0; k < nc->n_datasets; k++) {
        const struct conf_dataset *cd = &nc->datasets[k];
        int i = find_live(d, cd->name);

        revive[k] = -1;
        if (i >= 0 && strcmp(source(&d->cat[i]), cd->dir) == 0)
            continue;
        if (fetching_slot(d, cd) >= 0)
            continue;
        for (uint32_t j = 0; j < d->ncat && i < 0; j++)
            if (d->cat[j].ds && d->cat[j].retired && !d->cat[j].failed[0] &&
                strcmp(d->cat[j].name, cd->name) == 0 &&
                strcmp(source(&d->cat[j]), cd->dir) == 0)
                revive[k] = (int)j;
        if (revive[k] >= 0)
            continue;
        need++;
    }
    for (uint32_t j = 0; j < CONF_DATASETS_MAX; j++)
        free_slots += j >= d->ncat || (!d->cat[j].ds && !d->cat[j].fetching);
    if (need > free_slots)
        return rf_err_set(err, -E2BIG,
                          "%u new dataset(s) but only %u free catalogue slot(s): datasets a "
                          "reload removed stay until their clients detach",
                          need, free_slots);
    /* 2. open the new ones; any failure leaves the catalogue as it was */
    for (unsigned k = 0; k < nc->n_datasets; k++) {
        const struct conf_dataset *cd = &nc->datasets[k];
        int i = find_live(d, cd->name);

        if ((i >= 0 && strcmp(source(&d->cat[i]), cd->dir) == 0) || revive[k] >= 0 ||
            conf_dataset_remote(cd->dir)) /* fetched in step 3 */
            continue;
        rc = dataset_open(cd->dir, &opened[k], err);
        if (rc < 0 && catalog_failed_reason(d, cd->name)) {
            /* failed while served and still broken: it stays failed (with
             * the new reason), and the rest of the reload goes through */
            log_warn("dataset %s: still not served: %s", cd->name, err->msg);
            fail_again(d, cd->name, err->msg);
            opened[k] = NULL;
            rc = 0;
            continue;
        }
        if (rc < 0) {
            rf_err_prefix(err, "dataset.%s", cd->name);
            for (unsigned j = 0; j < k; j++)
                dataset_close(opened[j]);
            return rc;
        }
    }
    /* 3. commit: drop fetches the config no longer names (their results are
     * dropped on completion), retire what is gone (or moved), revive,
     * place the new */
    for (uint32_t i = 0; i < d->ncat; i++) {
        const struct conf_dataset *cd;

        if (!d->cat[i].fetching)
            continue;
        cd = conf_find_dataset(nc, d->cat[i].failed_name);
        if (cd && strcmp(cd->dir, d->cat[i].url) == 0)
            continue;
        log_info("dataset %s (%s): removed by the reload while it was fetched; what the fetch "
                 "brings stays in the cache and is not served", d->cat[i].failed_name,
                 d->cat[i].url);
        memset(&d->cat[i], 0, sizeof(d->cat[i]));
        snprintf(d->cat[i].name, sizeof(d->cat[i].name), "-");
    }
    for (uint32_t i = 0; i < d->ncat; i++) {
        const struct conf_dataset *cd;

        if (!catalog_offers(d, i) || d->cat[i].on_demand)
            continue;
        cd = conf_find_dataset(nc, d->cat[i].name);
        if (cd && strcmp(cd->dir, source(&d->cat[i])) == 0)
            continue;
        d->cat[i].retired = true;
        log_info("dataset %s (%s): removed by the reload; %u attached client(s) keep reading "
                 "it until they detach",
                 d->cat[i].name, d->cat[i].dir, entry_users(d, i));
    }
    for (unsigned k = 0; k < nc->n_datasets; k++) {
        const struct conf_dataset *cd = &nc->datasets[k];

        if (revive[k] >= 0) {
            d->cat[revive[k]].retired = false;
            log_info("dataset %s: offered again", cd->name);
            continue;
        }
        if (conf_dataset_remote(cd->dir) && find_live(d, cd->name) < 0 &&
            fetching_slot(d, cd) < 0) {
            /* step 1 counted the free slots: this cannot fail */
            int slot = free_slot(d);

            if (slot < 0)
                continue;
            forget_failure(d, cd->name);
            mark_fetching(&d->cat[slot], cd->name, cd->dir);
            if ((uint32_t)slot >= d->ncat)
                d->ncat = (uint32_t)slot + 1;
            start_fetch(d, nc, (uint32_t)slot);
            continue;
        }
        if (!opened[k])
            continue;
        /* step 1 counted the free slots: this cannot fail */
        if (catalog_add(d, cd->name, cd->dir, opened[k], false, "added by the reload") >= 0)
            *added = true;
    }
    catalog_sweep(d);
    return 0;
}

int catalog_load_plugins(const struct conf *cf, struct plugin_set *out, struct rf_err *err)
{
    for (unsigned i = 0; i < cf->n_plugins; i++) {
        int rc = plugin_set_add(out, cf->plugins[i].name, cf->plugins[i].path, err);

        if (rc < 0) {
            plugin_set_free(out);
            return rc;
        }
    }
    return 0;
}
