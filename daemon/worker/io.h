/*
 * io.h - batched positional reads for a worker, behind a small interface.
 *
 * A worker reads all the records of a job in one go: it fills an array of
 * io_req and calls io_read_all(), which returns when every request has its
 * bytes (at req.data) or its error.  Three backends, chosen when the worker
 * starts:
 *   io_uring  one submission for the whole batch (liburing): the default
 *             for datasets larger than the page cache can be counted on
 *   mmap      shards mapped read-only; req.data points into the page cache,
 *             no copy and no system call per record.  Chosen when the
 *             worker's datasets fit in a quarter of physical memory (as
 *             FFCV's os_cache mode does for data that fits in RAM)
 *   pread     one system call per record, the fallback when io_uring is
 *             missing at build time or refused at run time (seccomp,
 *             io_uring_disabled, old kernel)
 * RINGFEED_IO=io_uring|mmap|pread in the environment forces one.  The
 * reason for the choice is reported (STATS io.backend, io.reason).
 * io_uring and pread handle short reads by reading the rest, and
 * EINTR/EAGAIN by retrying.
 */
#ifndef RINGFEED_DAEMON_IO_H
#define RINGFEED_DAEMON_IO_H

#include <stdint.h>

struct io_req {
    int fd;
    uint64_t off;
    uint32_t len;
    void *buf;
    int result;   /* out: 0, or a negative errno (-EIO past end of file) */
    const void *data; /* out: the bytes (buf, or the mapping for mmap) */
    uint32_t done; /* private: bytes read so far */
};

struct io;

struct io_ops {
    const char *name;
    int (*init)(struct io *io, unsigned entries);
    void (*read_all)(struct io *io, struct io_req *reqs, unsigned n);
    void (*forget)(struct io *io); /* may be NULL: nothing kept per file */
    void (*fini)(struct io *io);
};

struct io {
    const struct io_ops *ops;
    void *state;
    char reason[96]; /* why the fallback was taken, "" otherwise */
};

/* Picks a backend as above; never fails (pread is always there).
 * data_bytes is the size of the datasets this worker reads. */
void io_open(struct io *io, unsigned entries, uint64_t data_bytes);
void io_close(struct io *io);

static inline void io_read_all(struct io *io, struct io_req *reqs, unsigned n)
{
    io->ops->read_all(io, reqs, n);
}

/* Drops whatever the backend keeps per file descriptor (the mmap backend's
 * maps): call before closing files it has read. */
static inline void io_forget(struct io *io)
{
    if (io->ops->forget)
        io->ops->forget(io);
}

extern const struct io_ops io_pread_ops;
extern const struct io_ops io_uring_ops;
extern const struct io_ops io_mmap_ops;

#endif
