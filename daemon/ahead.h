/*
 * ahead.h - the shards of remote datasets in the node cache: fetched ahead
 * of the streams' schedules, held while a job reads them, evicted by next
 * use (ahead.c).  docs/design/remote.md, "Fetch ahead and eviction".
 *
 * A remote dataset is opened on demand (dataset.h DATASET_OPEN_ON_DEMAND):
 * its MANIFEST and small files are in the cache, its shards come and go.
 * This module keeps, per such dataset, each shard's state:
 *
 *     ABSENT --fetch--> FETCHING --verified--> PRESENT --evict--> ABSENT
 *                          \--failed (tries spent)--> ABSENT, failure kept
 *
 * The scheduler asks before it plans a batch (ahead_ready): a batch is
 * planned only when every shard its samples lie in is PRESENT, and each of
 * its jobs then holds those shards (ahead_hold) until it is freed, so a
 * shard a worker may read is never evicted.  A batch that must wait makes
 * its shards wanted at once, at distance 0.
 *
 * THE SCHEDULE.  Every stream's order is a pure function (sampler.h), so
 * the future is known: ahead_plan walks each stream from its next batch to
 * plan (plan_walk_ahead), sample by sample, and gives each shard its next
 * use, the key (samples ahead, stream's place in the list) of its first
 * sample; a walk stops once the shards it has met fill cache-size (or at
 * AHEAD_WALK_MAX samples).  A shard no stream meets has no next use.
 *
 * FETCHING.  Up to AHEAD_FETCHES shards are fetched at once (libuv's
 * thread pool, sized for them in main.c), the wanted ABSENT ones in order
 * of next use.  Each needs room: cache_used + its bytes <= cache-size.
 *
 * EVICTION (cache-evict):
 *   belady  the PRESENT, unheld shard with the furthest next use (none at
 *           all first, then the oldest use), and only one whose next use is
 *           later than the shard to fetch: a fetch never pushes out what is
 *           needed sooner, so a cache smaller than the window fetches each
 *           shard once per use (Belady's MIN);
 *   lru     the PRESENT, unheld shard used longest ago, whatever its next
 *           use, except those a waiting batch needs (else two waiting
 *           batches could take turns evicting each other's shards).
 * Files of packs no served dataset names (an older pack, a dataset a
 * reload removed) go first, whole, when room is needed.
 *
 * FAILURES.  A shard whose fetch failed after its tries (fetch.h) fails the
 * streams whose next batch needs it, with the URL and the status, when they
 * come to plan it (ahead_ready returns the error once per waiting batch,
 * then the shard is ABSENT again, so a later stream fetches it anew); other
 * datasets are not touched.  A PRESENT shard whose file is gone (the cache
 * folder removed under the daemon) is found when a batch asks for it (a
 * stat at most every AHEAD_RECHECK_NS) and fetched again; one that goes
 * after its batch was planned is found by the worker that cannot open it:
 * its job waits, parked, until the shard is fetched again (ahead_lost,
 * plan.c's parked jobs).
 *
 * Every function runs on the loop thread.
 */
#ifndef RINGFEED_DAEMON_AHEAD_H
#define RINGFEED_DAEMON_AHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hist.h"

struct daemon;
struct dataset;
struct rf_err;
struct cache;
struct fetch_client;

#define AHEAD_FETCHES 4                 /* shards fetched at once */
#define AHEAD_FETCHES_POOL 8            /* libuv's threads: its default 4 and those
                                           (main.c sets UV_THREADPOOL_SIZE) */
_Static_assert(AHEAD_FETCHES_POOL == 4 + AHEAD_FETCHES, "the pool holds both");
#define AHEAD_WALK_MAX (1u << 18)       /* samples one stream's walk looks at */
#define AHEAD_RECHECK_NS 1000000000ull  /* a PRESENT shard's file is stat'ed at most this often */
#define AHEAD_TICK_MS 50                /* the walk again while streams read */

/* What a job holds: the distinct shards its samples lie in. */
struct apack;
struct ahead_hold {
    struct apack *pack;                 /* the pack's shards (a reference) */
    uint32_t n;
    uint32_t *shards;                   /* n of them; NULL when n is 0 */
};

/* STATS and METRICS (ahead's own figures; remote.h has the fetch layer's). */
struct ahead_counts {
    uint64_t hits;        /* shards found in the cache when a batch was planned */
    uint64_t misses;      /* shards fetched for a stream's next batch (late) */
    uint64_t prefetched;  /* shards fetched for a later batch (ahead) */
    uint64_t evictions, evicted_bytes;
    uint64_t fetching;    /* shards being fetched now */
    uint64_t present;     /* shards of served datasets in the cache */
    struct hist latency;  /* one shard's fetch, start to verified */
};

enum ahead_policy { AHEAD_BELADY, AHEAD_LRU };

/* Makes the module's state on the first remote dataset (remote.c): the
 * cache and the client stay remote.c's.  0 or -ENOMEM. */
int ahead_init(struct daemon *d, struct cache *c, struct fetch_client *fc,
               enum ahead_policy policy);
/* The daemon stops: the timer is closed (before the loop's last run). */
void ahead_stop(struct daemon *d);
/* After the loop ended (no fetch running): frees everything. */
void ahead_close(struct daemon *d);

/*
 * Registers catalogue slot slot's dataset ds (opened on demand from the
 * cache) fetched from url with the s3 settings (copied).  Shards already
 * in the cache and verified count as PRESENT.  0 or -ENOMEM (err set).
 */
int ahead_add(struct daemon *d, uint32_t slot, const struct dataset *ds, const char *url,
              const char *s3_endpoint, const char *s3_region, struct rf_err *err);
/* The catalogue closes slot's dataset: it is forgotten (fetches in flight
 * finish into the cache; jobs' holds on it are let go of as nothing). */
void ahead_forget(struct daemon *d, uint32_t slot);
/* Is slot a dataset this module serves (registered)? */
bool ahead_serves(const struct daemon *d, uint32_t slot);

/*
 * Can a batch of dataset slot's samples[n] be planned now?  0: every shard
 * is PRESENT; -EAGAIN: not yet (the missing ones are wanted now, and
 * sched_fill runs when one arrives); another negative errno: a shard's
 * fetch failed, or the batch needs more bytes of shards at once than
 * cache-size holds, with err saying which and what to do.
 */
int ahead_ready(struct daemon *d, uint32_t slot, const uint64_t *samples, uint32_t n,
                struct rf_err *err);
/* Holds the shards of samples[n] (ahead_ready said 0 for a superset).
 * 0, or -ENOMEM with h empty. */
int ahead_hold(struct daemon *d, uint32_t slot, const uint64_t *samples, uint32_t n,
               struct ahead_hold *h);
/* Lets go of h (empty after; an empty h accepted). */
void ahead_release(struct daemon *d, struct ahead_hold *h);
/* A worker could not open a shard h holds (its file left the cache folder
 * after the batch was planned): each held PRESENT shard's file is looked
 * for now, a missing one becomes ABSENT and is fetched again at once. */
void ahead_lost(struct daemon *d, const struct ahead_hold *h);
/* Are h's shards all PRESENT again?  0: yes; -EAGAIN: not yet (sched_fill
 * runs when a fetch ends); -EIO: a fetch failed, err says which. */
int ahead_held_ready(struct daemon *d, const struct ahead_hold *h, struct rf_err *err);

/* The walk and the fetches again now (after a wait began, a batch was
 * published, a stream attached). */
void ahead_kick(struct daemon *d);

void ahead_counts(const struct daemon *d, struct ahead_counts *out);
/* The policy's name ("belady", "lru"), for the log and STATS. */
const char *ahead_policy_name(enum ahead_policy p);

#endif
