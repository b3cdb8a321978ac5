/*
 * cache.h - the node's folder of downloaded pack files (cache-dir): each
 * object fetched into a temporary name, verified against what the MANIFEST
 * says of it, then renamed into place, so a file under its own name is
 * always a whole, verified copy; a byte budget; and a lock that keeps a
 * second daemon out of the folder.
 *
 *     cache-dir/
 *       lock                       flock(LOCK_EX) while a daemon holds the
 *                                  folder; holds its pid in decimal
 *       packs/
 *         0123456789abcdef/        one folder per pack identity (16 hex
 *                                  digits: dataset_identity_of the MANIFEST)
 *           MANIFEST               verified files under their own names
 *           shard-00000.rfs
 *           .part-NAME-PID-N       a fetch in progress (removed at open)
 *
 * Verification (struct cache_key says which): a shard is its size and the
 * MANIFEST's index CRC, checked as the reader checks it at open (the
 * header, then the CRC-32C of the whole index), which catches a truncated,
 * swapped or rewritten shard for the price of reading its index; any
 * other file (MANIFEST, dict, sources, subsets: small) its size and the
 * CRC-32C of all its bytes.
 *
 * The index of what is present is the folder itself: cache_open scans it
 * (sizes, for cache_used) and removes what a crash left half-written; a
 * file is re-verified the first time cache_lookup asks for it after open
 * (the same cheap check), so a file changed or damaged while no daemon
 * ran is found and removed, not served.
 *
 * The budget: cache_fetch refuses (-ENOBUFS, naming used, budget and the
 * object) an object that would take used bytes past it; the caller's
 * eviction policy (not here) frees room with cache_evict and tries again.
 * Bytes of fetches in flight count as used from their start.
 *
 * Errors are per object: a folder removed under the daemon, a full disk
 * (ENOSPC) or a bad download fail that cache_fetch with a message naming
 * the object, leave no file under its name, and the cache goes on.
 *
 * Thread safety: every call may run on any thread at once (the index is
 * under one mutex, held only for bookkeeping, never over I/O).
 */
#ifndef RINGFEED_FETCH_CACHE_H
#define RINGFEED_FETCH_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "fetch.h"

#define CACHE_NAME_MAX 255u      /* = MANIFEST_NAME_MAX */
#define CACHE_DIR_MAX 1024 /* cache-dir, NUL included (= CONF_PATH_MAX) */

enum cache_check {
    CACHE_CHECK_SHARD,           /* size + header + index CRC == crc */
    CACHE_CHECK_CRC,             /* size + CRC-32C of every byte == crc */
};

/* One object of one pack and what verifies it (from its MANIFEST). */
struct cache_key {
    uint64_t pack;               /* the pack's identity */
    const char *name;            /* the MANIFEST's file name */
    uint64_t bytes;
    uint32_t crc;
    enum cache_check check;
    bool reserved;               /* cache_fetch: the caller reserved bytes (cache_reserve) */
};

struct cache;

/*
 * Opens (creating it and packs/ when missing, mode 0750) the cache folder
 * dir with a budget of budget bytes, takes its lock, removes leftover
 * partial files and counts what is there.  Returns 0, or -EBUSY with
 * "cache folder DIR is in use by another ringfeedd (pid N)", or the errno
 * of what failed, naming the folder.
 */
int cache_open(const char *dir, uint64_t budget, struct cache **out, struct rf_err *err);

/* Releases the lock and frees c (NULL accepted); no call may be running. */
void cache_close(struct cache *c);

/* Bytes of the files present plus those of fetches in flight. */
uint64_t cache_used(struct cache *c);
uint64_t cache_budget(const struct cache *c);

/* The path of key's file, cache-dir/packs/ID/NAME, into out; 0 or
 * -ENAMETOOLONG / -EINVAL (a name the MANIFEST rule refuses). */
int cache_path(const struct cache *c, const struct cache_key *key, char *out, size_t cap,
               struct rf_err *err);

/*
 * Is key present and verified?  1: yes (verified now if not since open);
 * 0: absent, or present but failing verification (then removed, and err
 * says why); negative: an I/O error other than absence, named.
 */
int cache_lookup(struct cache *c, const struct cache_key *key, struct rf_err *err);

/*
 * Fetches req into key's place: present and verified already: 0 at once;
 * else a GET into cache-dir/packs/ID/.part-NAME-PID-N, fsync, verify,
 * rename over NAME.  Returns 0, -ENOBUFS over the budget, -EBADMSG when
 * the download does not verify (the part file is removed), or fetch_get's
 * and the file system's errors; each naming the object.  res (NULL
 * accepted) is fetch_get's result when a GET was made (tries 0: none).
 */
int cache_fetch(struct cache *c, struct fetch_client *fc, const struct fetch_req *req,
                const struct cache_key *key, struct fetch_result *res, struct rf_err *err);

/*
 * Counts key->bytes as used now, for a fetch to come (cache_fetch with
 * key->reserved set takes the reservation over: it ends with the fetch,
 * kept as the file's bytes or given back).  0, or -ENOBUFS as cache_fetch
 * says it.  cache_unreserve gives a reservation back unused.
 */
int cache_reserve(struct cache *c, const struct cache_key *key, struct rf_err *err);
void cache_unreserve(struct cache *c, const struct cache_key *key);
/* Removes every file of a pack not among keep[nkeep] (packs no served
 * dataset names); returns the bytes freed. */
uint64_t cache_drop_packs(struct cache *c, const uint64_t *keep, size_t nkeep);
/* Removes key's file (absent: 0) and its bytes from used. */
int cache_evict(struct cache *c, const struct cache_key *key, struct rf_err *err);

/* Checks the open file fd (named name for messages) against key: 0 or
 * -EBADMSG saying what differs, or -errno of a read. */
int cache_verify_fd(int fd, const struct cache_key *key, struct rf_err *err);

#endif
