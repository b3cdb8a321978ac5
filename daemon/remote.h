/*
 * remote.h - remote datasets (dataset.NAME = http://, https://, s3://):
 * each is opened from the node's cache (daemon/fetch/cache.h) on demand,
 * its shards then fetched by ahead.h as the streams need them, so workers
 * read local files only.
 *
 *   - at start, and when a reload names a remote dataset not served now,
 *     the catalogue marks its slot "fetching" (catalog.c) and calls
 *     remote_fetch; ATTACH to it is refused with "still fetching: reading
 *     the MANIFEST" until it is placed;
 *   - the job (libuv's pool) GETs the MANIFEST into memory, parses it as a
 *     local one is parsed, refuses a pack with a shard that cannot fit in
 *     cache-size beside the small files, fetches those small files (dict,
 *     sources, subsets; the MANIFEST last) into the cache, and verifies
 *     the shards a run before left there;
 *   - its completion, on the loop, opens the folder on demand
 *     (DATASET_OPEN_ON_DEMAND), registers it with ahead.h and places it in
 *     its slot (the workers restart gracefully to learn it), or fails the
 *     slot alone with the URL and the status; a reload retries it.
 * Two datasets of one pack (the same MANIFEST) share the cache's files.
 * One MANIFEST job runs at a time, the others wait in order; shards are
 * fetched up to AHEAD_FETCHES at once.
 *
 * The cache and the fetch client are made when the first remote dataset
 * is fetched, with cache-dir, cache-size, cache-evict and fetch-retries as
 * they are then; a reload that changes those keys is logged as applying at
 * the next start (reload.c).  s3-endpoint and s3-region are read by every
 * job.
 */
#ifndef RINGFEED_DAEMON_REMOTE_H
#define RINGFEED_DAEMON_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct conf;
struct daemon;
struct rf_err;

/* What STATS and METRICS show (all 0 when no remote dataset was fetched). */
struct remote_counts {
    uint64_t cache_bytes;       /* files in the cache folder, fetches in flight */
    uint64_t cache_limit;       /* cache-size of the open cache, else the config's */
    uint64_t fetch_bytes;       /* body bytes received (MANIFEST reads included) */
    uint64_t fetch_objects;     /* files fetched into the cache */
    uint64_t fetch_retries;     /* requests repeated after a retried failure */
    uint64_t fetch_failures;    /* files (or MANIFESTs) that could not be fetched */
};

/* 1 when this build can fetch (libcurl was found, -Dremote). */
bool remote_built(void);

/*
 * Starts fetching the dataset url (a value conf_set accepted) for catalogue
 * slot slot, which the caller has marked fetching with name, under the
 * config cf (the running one, or a reload's: its s3 keys, and the cache
 * keys when this is the first fetch).  Completion
 * runs on d->loop.  Returns 0, or a negative errno with err saying why no
 * fetch started (the caller fails the slot with it).
 */
int remote_fetch(struct daemon *d, const struct conf *cf, uint32_t slot, const char *name,
                 const char *url, struct rf_err *err);

/* The progress of slot's fetch: "N of M files" into buf, or "the MANIFEST"
 * before it is read.  0, or -ENOENT when no fetch runs for slot. */
int remote_progress(const struct daemon *d, uint32_t slot, char *buf, size_t cap);

struct url;
struct s3_target;
struct fetch_result;
/* The URL of file name of the pack at base (u its parse; t, for s3, what
 * s3_resolve filled) into out: base/name, or the object's URL.  0 or
 * -ENAMETOOLONG with err. */
int remote_object_url(const char *base, const struct url *u, const struct s3_target *t,
                      const char *name, char *out, size_t cap, struct rf_err *err);
/* Counts one file's fetch (fetch.h's result, its rc) into the counters. */
void remote_count(struct daemon *d, const struct fetch_result *res, int rc);

/* Counters for STATS and METRICS. */
void remote_counts(const struct daemon *d, struct remote_counts *out);

/* The daemon stops: running fetches end (-ECANCELED) at their next tick. */
void remote_stop(struct daemon *d);

/* After the loop ended (no job running): closes the cache, frees the client. */
void remote_close(struct daemon *d);

#endif
