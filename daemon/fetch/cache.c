/*
 * cache.c - cache.h's folder: the lock, the scan at open, the index of
 * present files (an array under a mutex: a node caches thousands of
 * shards, not millions), and fetch = GET into a part file, fsync, verify,
 * rename.
 */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "fileio.h"
#include "manifest.h"
#include "shard.h"

#define PACKS "packs"
#define PART_PREFIX ".part-"

struct entry {
    uint64_t pack;
    char name[CACHE_NAME_MAX + 1];
    uint64_t bytes;
    bool verified;               /* since this open */
};

struct cache {
    char dir[CACHE_DIR_MAX];
    int lock_fd;
    uint64_t budget;
    pthread_mutex_t mu;          /* guards what follows */
    uint64_t used;
    struct entry *e;
    size_t n, cap;
};

static atomic_uint part_seq;

uint64_t cache_budget(const struct cache *c)
{
    return c->budget;
}

uint64_t cache_used(struct cache *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t u = c->used;
    pthread_mutex_unlock(&c->mu);
    return u;
}

/* The entry for (pack, name) or NULL; under mu. */
static struct entry *find(struct cache *c, uint64_t pack, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->e[i].pack == pack && strcmp(c->e[i].name, name) == 0)
            return &c->e[i];
    return NULL;
}

/* Adds an entry; under mu.  0 or -ENOMEM. */
static int add(struct cache *c, uint64_t pack, const char *name, uint64_t bytes, bool verified)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        struct entry *e = realloc(c->e, cap * sizeof(*e));
        if (!e)
            return -ENOMEM;
        c->e = e;
        c->cap = cap;
    }
    struct entry *e = &c->e[c->n++];
    e->pack = pack;
    snprintf(e->name, sizeof(e->name), "%s", name);
    e->bytes = bytes;
    e->verified = verified;
    return 0;
}

/* Removes the entry at e (from find); under mu. */
static void drop(struct cache *c, struct entry *e)
{
    c->used -= e->bytes;
    *e = c->e[--c->n];
}

int cache_path(const struct cache *c, const struct cache_key *key, char *out, size_t cap,
               struct rf_err *err)
{
    if (!manifest_valid_file_name(key->name, strlen(key->name)))
        return rf_err_set(err, -EINVAL, "cache: '%s' is not a pack file name", key->name);
    int n = snprintf(out, cap, "%s/" PACKS "/%016" PRIx64 "/%s", c->dir, key->pack, key->name);
    if (n < 0 || (size_t)n >= cap)
        return rf_err_set(err, -ENAMETOOLONG, "cache: the path of %s is too long", key->name);
    return 0;
}

int cache_verify_fd(int fd, const struct cache_key *key, struct rf_err *err)
{
    struct stat st;
    uint8_t buf[1 << 16];
    uint64_t from = 0, to;
    uint32_t crc = 0;

    if (fstat(fd, &st) == -1)
        return rf_err_set(err, -errno, "%s: %s", key->name, strerror(errno));
    if ((uint64_t)st.st_size != key->bytes)
        return rf_err_set(err, -EBADMSG, "%s: %llu bytes, the MANIFEST says %llu", key->name,
                          (unsigned long long)st.st_size, (unsigned long long)key->bytes);
    to = key->bytes;
    if (key->check == CACHE_CHECK_SHARD) {
        struct shard_header h;
        ssize_t got = fio_pread_full(fd, buf, SHARD_HEADER_SIZE, 0);
        if (got < 0)
            return rf_err_set(err, (int)got, "%s: %s", key->name, strerror((int)-got));
        int r = shard_header_decode(buf, (size_t)got, key->bytes, key->name, &h, err);
        if (r < 0)
            return -EBADMSG;
        if (h.index_crc != key->crc)
            return rf_err_set(err, -EBADMSG, "%s: index CRC %08x, the MANIFEST says %08x",
                              key->name, h.index_crc, key->crc);
        from = h.index_off;
        to = h.index_off + h.index_len;
    }
    for (uint64_t at = from; at < to;) {
        size_t want = to - at < sizeof(buf) ? (size_t)(to - at) : sizeof(buf);
        ssize_t got = fio_pread_full(fd, buf, want, at);
        if (got < 0)
            return rf_err_set(err, (int)got, "%s: %s", key->name, strerror((int)-got));
        if ((size_t)got != want)
            return rf_err_set(err, -EBADMSG, "%s: shorter than it was a moment ago", key->name);
        crc = crc32c(crc, buf, want);
        at += want;
    }
    if (crc != key->crc)
        return rf_err_set(err, -EBADMSG, "%s: %s CRC-32C %08x, the MANIFEST says %08x",
                          key->name, key->check == CACHE_CHECK_SHARD ? "index" : "file", crc,
                          key->crc);
    return 0;
}

/* Takes dir/lock; 0 or -EBUSY naming the holder. */
static int take_lock(struct cache *c, struct rf_err *err)
{
    char p[sizeof(c->dir) + 8], pid[32];
    snprintf(p, sizeof(p), "%s/lock", c->dir);
    c->lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (c->lock_fd == -1)
        return rf_err_set(err, -errno, "cache folder %s: %s: %s", c->dir, p, strerror(errno));
    if (flock(c->lock_fd, LOCK_EX | LOCK_NB) == -1) {
        int e = errno;
        ssize_t n = e == EWOULDBLOCK ? fio_pread_full(c->lock_fd, pid, sizeof(pid) - 1, 0) : -1;
        pid[n > 0 ? (size_t)n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        if (e == EWOULDBLOCK)
            return rf_err_set(err, -EBUSY, "cache folder %s is in use by another ringfeedd "
                              "(pid %s)", c->dir, pid[0] ? pid : "unknown");
        return rf_err_set(err, -e, "cache folder %s: locking %s: %s", c->dir, p, strerror(e));
    }
    int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(c->lock_fd, 0) == -1 || fio_pwrite_full(c->lock_fd, pid, (size_t)n, 0) < 0)
        return rf_err_set(err, -errno, "cache folder %s: writing %s: %s", c->dir, p,
                          strerror(errno));
    return 0;
}

/* Counts packs/ * / *, removing part files; 0 or an error naming the folder. */
static int scan(struct cache *c, struct rf_err *err)
{
    char p[sizeof(c->dir) + 32];
    snprintf(p, sizeof(p), "%s/" PACKS, c->dir);
    DIR *top = opendir(p);
    struct dirent *d;
    int r = 0;

    if (!top)
        return rf_err_set(err, -errno, "cache folder %s: %s: %s", c->dir, p, strerror(errno));
    while (r == 0 && (d = readdir(top))) {
        char *end;
        if (strlen(d->d_name) != 16 || strspn(d->d_name, "0123456789abcdef") != 16)
            continue;     /* not a pack's folder: not ours, left alone */
        uint64_t pack = strtoull(d->d_name, &end, 16);
        int pfd = openat(dirfd(top), d->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pfd == -1)
            continue;
        DIR *sub = fdopendir(pfd);
        if (!sub) {
            close(pfd);
            continue;
        }
        struct dirent *f;
        while (r == 0 && (f = readdir(sub))) {
            struct stat st;
            if (strncmp(f->d_name, PART_PREFIX, strlen(PART_PREFIX)) == 0) {
                unlinkat(dirfd(sub), f->d_name, 0);
                continue;
            }
            if (!manifest_valid_file_name(f->d_name, strlen(f->d_name)) ||
                fstatat(dirfd(sub), f->d_name, &st, AT_SYMLINK_NOFOLLOW) == -1 ||
                !S_ISREG(st.st_mode))
                continue;
            if (add(c, pack, f->d_name, (uint64_t)st.st_size, false) < 0)
                r = rf_err_set(err, -ENOMEM, "cache folder %s: out of memory", c->dir);
            else
                c->used += (uint64_t)st.st_size;
        }
        closedir(sub);
    }
    closedir(top);
    return r;
}

int cache_open(const char *dir, uint64_t budget, struct cache **out, struct rf_err *err)
{
    struct cache *c;
    char p[CACHE_DIR_MAX + 16];
    int r;

    *out = NULL;
    if (dir[0] != '/' || strlen(dir) >= CACHE_DIR_MAX - 300)
        return rf_err_set(err, -EINVAL, "cache folder '%s': an absolute path of at most %d "
                          "bytes", dir, CACHE_DIR_MAX - 301);
    c = calloc(1, sizeof(*c));
    if (!c)
        return rf_err_set(err, -ENOMEM, "cache folder %s: out of memory", dir);
    snprintf(c->dir, sizeof(c->dir), "%s", dir);
    c->budget = budget;
    c->lock_fd = -1;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return rf_err_set(err, -ENOMEM, "cache folder %s: out of memory", dir);
    }
    snprintf(p, sizeof(p), "%s/" PACKS, c->dir);
    if ((mkdir(c->dir, 0750) == -1 && errno != EEXIST) ||
        (mkdir(p, 0750) == -1 && errno != EEXIST)) {
        r = rf_err_set(err, -errno, "cache folder %s: cannot create %s: %s", dir,
                       errno == ENOENT ? dir : p, strerror(errno));
        goto fail;
    }
    if ((r = take_lock(c, err)) < 0 || (r = scan(c, err)) < 0)
        goto fail;
    *out = c;
    return 0;
fail:
    cache_close(c);
    return r;
}

void cache_close(struct cache *c)
{
    if (!c)
        return;
    if (c->lock_fd >= 0)
        close(c->lock_fd);     /* releases the flock */
    pthread_mutex_destroy(&c->mu);
    free(c->e);
    free(c);
}

int cache_lookup(struct cache *c, const struct cache_key *key, struct rf_err *err)
{
    char p[CACHE_DIR_MAX + 300];
    struct entry *e;
    int r, fd;

    if ((r = cache_path(c, key, p, sizeof(p), err)) < 0)
        return r;
    pthread_mutex_lock(&c->mu);
    e = find(c, key->pack, key->name);
    bool present = e != NULL, verified = e && e->verified;
    pthread_mutex_unlock(&c->mu);
    if (!present)
        return 0;
    if (verified)
        return 1;
    fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd == -1 && errno != ENOENT)
        return rf_err_set(err, -errno, "cache: %s: %s", p, strerror(errno));
    r = fd == -1 ? rf_err_set(err, -ENOENT, "cache: %s is gone", p) : cache_verify_fd(fd, key, err);
    if (fd >= 0)
        close(fd);
    if (r < 0 && r != -EBADMSG && r != -ENOENT)
        return r;
    pthread_mutex_lock(&c->mu);
    e = find(c, key->pack, key->name);
    if (e && r == 0)
        e->verified = true;
    else if (e)
        drop(c, e);
    pthread_mutex_unlock(&c->mu);
    if (r < 0) {
        unlink(p);
        rf_err_prefix(err, "cache: removed");
        return 0;
    }
    return 1;
}

int cache_reserve(struct cache *c, const struct cache_key *key, struct rf_err *err)
{
    pthread_mutex_lock(&c->mu);
    if (key->bytes > c->budget || c->used > c->budget - key->bytes) {
        uint64_t used = c->used;
        pthread_mutex_unlock(&c->mu);
        return rf_err_set(err, -ENOBUFS, "cache folder %s: %s needs %llu bytes; %llu of the "
                          "budget of %llu are used (evict first)", c->dir, key->name,
                          (unsigned long long)key->bytes, (unsigned long long)used,
                          (unsigned long long)c->budget);
    }
    c->used += key->bytes;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

void cache_unreserve(struct cache *c, const struct cache_key *key)
{
    pthread_mutex_lock(&c->mu);
    c->used -= key->bytes;
    pthread_mutex_unlock(&c->mu);
}

uint64_t cache_drop_packs(struct cache *c, const uint64_t *keep, size_t nkeep)
{
    uint64_t freed = 0;

    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n;) {
        struct entry *e = &c->e[i];
        char p[CACHE_DIR_MAX + 300];
        bool kept = false;

        for (size_t k = 0; k < nkeep && !kept; k++)
            kept = keep[k] == e->pack;
        if (kept) {
            i++;
            continue;
        }
        snprintf(p, sizeof(p), "%s/" PACKS "/%016" PRIx64 "/%s", c->dir, e->pack, e->name);
        unlink(p);
        freed += e->bytes;
        drop(c, e); /* the last entry moves to i */
    }
    pthread_mutex_unlock(&c->mu);
    return freed;
}

int cache_fetch(struct cache *c, struct fetch_client *fc, const struct fetch_req *req,
                const struct cache_key *key, struct fetch_result *res, struct rf_err *err)
{
    char p[CACHE_DIR_MAX + 300], part[CACHE_DIR_MAX + 400], pack_dir[CACHE_DIR_MAX + 32];
    struct fetch_sink sink = {.fd = -1};
    int r, fd = -1;

    if (res)
        memset(res, 0, sizeof(*res));
    r = cache_lookup(c, key, err);
    if (r == 0)
        r = cache_path(c, key, p, sizeof(p), err);
    if (r != 0) { /* present already, or an error: the reservation goes */
        if (key->reserved)
            cache_unreserve(c, key);
        return r < 0 ? r : 0;
    }
    if (!key->reserved && (r = cache_reserve(c, key, err)) < 0)
        return r;               /* reserved while in flight */

    /* the folders again, should they have been removed under the daemon */
    snprintf(pack_dir, sizeof(pack_dir), "%s/" PACKS, c->dir);
    if (mkdir(c->dir, 0750) == -1 && errno != EEXIST) {
        r = rf_err_set(err, -errno, "cache: %s for %s: %s", c->dir, key->name, strerror(errno));
        goto unreserve;
    }
    if (mkdir(pack_dir, 0750) == -1 && errno != EEXIST) {
        r = rf_err_set(err, -errno, "cache: %s for %s: %s", pack_dir, key->name, strerror(errno));
        goto unreserve;
    }
    snprintf(pack_dir, sizeof(pack_dir), "%s/" PACKS "/%016" PRIx64, c->dir, key->pack);
    if (mkdir(pack_dir, 0750) == -1 && errno != EEXIST) {
        r = rf_err_set(err, -errno, "cache: %s for %s: %s", pack_dir, key->name, strerror(errno));
        goto unreserve;
    }
    snprintf(part, sizeof(part), "%s/" PART_PREFIX "%s-%ld-%u", pack_dir, key->name,
             (long)getpid(), atomic_fetch_add(&part_seq, 1));
    fd = open(part, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd == -1) {
        r = rf_err_set(err, -errno, "cache: %s for %s: %s", part, key->name, strerror(errno));
        goto unreserve;
    }
    sink.fd = fd;
    r = fetch_get(fc, req, &sink, res, err);
    if (r < 0)
        goto unlink_part;
    if (fsync(fd) == -1) {
        r = rf_err_set(err, -errno, "cache: %s: fsync: %s", part, strerror(errno));
        goto unlink_part;
    }
    r = cache_verify_fd(fd, key, err);
    if (r < 0) {
        rf_err_prefix(err, "cache: %s from %s does not verify", key->name, req->url);
        goto unlink_part;
    }
    if (rename(part, p) == -1) {
        r = rf_err_set(err, -errno, "cache: renaming %s to %s: %s", part, p, strerror(errno));
        goto unlink_part;
    }
    close(fd);
    pthread_mutex_lock(&c->mu);
    struct entry *e = find(c, key->pack, key->name);
    if (e) {
        c->used -= key->bytes;   /* a concurrent fetch of the same file won */
        e->verified = true;
    } else if (add(c, key->pack, key->name, key->bytes, true) < 0) {
        pthread_mutex_unlock(&c->mu);
        unlink(p);
        r = rf_err_set(err, -ENOMEM, "cache: out of memory for %s", key->name);
        goto unreserve;
    }
    pthread_mutex_unlock(&c->mu);
    return 0;

unlink_part:
    close(fd);
    unlink(part);
unreserve:
    pthread_mutex_lock(&c->mu);
    c->used -= key->bytes;
    pthread_mutex_unlock(&c->mu);
    return r;
}

int cache_evict(struct cache *c, const struct cache_key *key, struct rf_err *err)
{
    char p[CACHE_DIR_MAX + 300];
    int r = cache_path(c, key, p, sizeof(p), err);
    if (r < 0)
        return r;
    if (unlink(p) == -1 && errno != ENOENT)
        return rf_err_set(err, -errno, "cache: evicting %s: %s", p, strerror(errno));
    pthread_mutex_lock(&c->mu);
    struct entry *e = find(c, key->pack, key->name);
    if (e)
        drop(c, e);
    pthread_mutex_unlock(&c->mu);
    return 0;
}
