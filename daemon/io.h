/*
 * io.h - batched positional reads for a worker, behind a small interface.
 *
 * A worker reads all the records of a job in one go: it fills an array of
 * io_req and calls io_read_all(), which returns when every request has its
 * bytes or its error.  Two backends, chosen when the worker starts:
 *   io_uring  one submission for the whole batch (liburing)
 *   pread     one system call per record, the fallback when io_uring is
 *             missing at build time or refused at run time (seccomp,
 *             io_uring_disabled, old kernel); the reason is reported.
 * Both handle short reads by reading the rest, and EINTR/EAGAIN by retrying.
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
    uint32_t done; /* private: bytes read so far */
};

struct io;

struct io_ops {
    const char *name;
    int (*init)(struct io *io, unsigned entries);
    void (*read_all)(struct io *io, struct io_req *reqs, unsigned n);
    void (*fini)(struct io *io);
};

struct io {
    const struct io_ops *ops;
    void *state;
    char reason[96]; /* why the fallback was taken, "" otherwise */
};

/* Picks io_uring when it works, else pread; never fails.  force_pread skips
 * io_uring (RINGFEED_IO=pread in the environment does the same). */
void io_open(struct io *io, unsigned entries, int force_pread);
void io_close(struct io *io);

static inline void io_read_all(struct io *io, struct io_req *reqs, unsigned n)
{
    io->ops->read_all(io, reqs, n);
}

extern const struct io_ops io_pread_ops;
extern const struct io_ops io_uring_ops;

#endif
