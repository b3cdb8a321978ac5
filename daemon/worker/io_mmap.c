/*
 * io_mmap.c - the mmap backend of the worker's read interface (io.h).
 *
 * Each shard a worker reads is mapped read-only once (MAP_SHARED: every
 * worker shares the page cache's copy) and a "read" is a bounds check that
 * points req.data into the mapping: no copy, no system call per record.
 * For datasets that fit in memory, where the kernel's read path per small
 * record costs more than the record's decode.
 *
 * A shard is mapped at its size when first read; a record past that size
 * fails with -EIO like a short read.  The maps are registered with the
 * mapping guard (proto/mapguard.h): a shard truncated while in use reads
 * zeros past its new end, which fail the record's checksum, instead of
 * raising SIGBUS.  Maps are found by fd, so io_forget drops them all when
 * the worker closes a dataset (its fd numbers may come back for another
 * file).
 */
#include "io.h"
#include "mapguard.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define MAX_MAPS 4096

struct map {
    int fd;
    const uint8_t *addr;
    uint64_t size;
};

struct mmap_state {
    struct map maps[MAX_MAPS];
    unsigned n;
};

static int mm_init(struct io *io, unsigned entries)
{
    (void)entries;
    io->state = calloc(1, sizeof(struct mmap_state));
    return io->state ? 0 : -ENOMEM;
}

static const struct map *find_map(struct mmap_state *st, int fd)
{
    struct stat sb;
    void *addr;

    for (unsigned i = 0; i < st->n; i++)
        if (st->maps[i].fd == fd)
            return &st->maps[i];
    if (st->n == MAX_MAPS || fstat(fd, &sb) == -1 || sb.st_size <= 0)
        return NULL;
    addr = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED)
        return NULL;
    mapguard_add(addr, (size_t)sb.st_size);
    st->maps[st->n] = (struct map){ .fd = fd, .addr = addr, .size = (uint64_t)sb.st_size };
    return &st->maps[st->n++];
}

static void mm_read_all(struct io *io, struct io_req *reqs, unsigned n)
{
    struct mmap_state *st = io->state;

    for (unsigned i = 0; i < n; i++) {
        struct io_req *r = &reqs[i];
        const struct map *m = find_map(st, r->fd);

        r->result = 0;
        r->done = 0;
        r->data = NULL;
        if (!m) {
            /* cannot map it: read it the plain way */
            io_pread_ops.read_all(io, r, 1);
            continue;
        }
        if (r->off > m->size || r->len > m->size - r->off) {
            r->result = -EIO;
            continue;
        }
        r->data = m->addr + r->off;
        r->done = r->len;
    }
}

static void mm_forget(struct io *io)
{
    struct mmap_state *st = io->state;

    for (unsigned i = 0; st && i < st->n; i++) {
        mapguard_remove(st->maps[i].addr);
        munmap((void *)st->maps[i].addr, st->maps[i].size);
    }
    if (st)
        st->n = 0;
}

static void mm_fini(struct io *io)
{
    mm_forget(io);
    free(io->state);
    io->state = NULL;
}

const struct io_ops io_mmap_ops = {
    .name = "mmap",
    .init = mm_init,
    .read_all = mm_read_all,
    .forget = mm_forget,
    .fini = mm_fini,
};
