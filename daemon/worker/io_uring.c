/*
 * io_uring.c - the io_uring backend of the worker's read interface (io.h).
 *
 * read_all() queues one read per request (up to the ring's size at a time),
 * submits them with one io_uring_submit_and_wait(), and reaps completions.
 * A short completion is queued again for the rest of its bytes; -EAGAIN and
 * -EINTR are queued again as they are; a read of 0 bytes means the file
 * ends early (-EIO).  user_data carries the request's index.
 */
#include "io.h"

#include <errno.h>
#include <stdlib.h>

#include "config.h"

#if RINGFEED_HAVE_IO_URING
#include <liburing.h>

struct uring_state {
    struct io_uring ring;
    unsigned entries;
};

static int uring_init(struct io *io, unsigned entries)
{
    struct uring_state *st = calloc(1, sizeof(*st));
    int rc;

    if (!st)
        return -ENOMEM;
    rc = io_uring_queue_init(entries, &st->ring, 0);
    if (rc < 0) {
        free(st);
        return rc;
    }
    st->entries = entries;
    io->state = st;
    return 0;
}

static void queue_read(struct io_uring *ring, struct io_req *r, unsigned idx)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

    /* callers keep in-flight requests <= entries, so an SQE is free */
    io_uring_prep_read(sqe, r->fd, (char *)r->buf + r->done, r->len - r->done,
                       r->off + r->done);
    io_uring_sqe_set_data64(sqe, idx);
}

static void uring_read_all(struct io *io, struct io_req *reqs, unsigned n)
{
    struct uring_state *st = io->state;
    unsigned next = 0, inflight = 0, *retry = NULL, nretry = 0;

    retry = malloc(sizeof(*retry) * st->entries);
    if (!retry) {
        io_pread_ops.read_all(io, reqs, n);
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        reqs[i].done = 0;
        reqs[i].result = 0;
        reqs[i].data = reqs[i].buf;
    }
    while (next < n || inflight > 0 || nretry > 0) {
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        int rc;

        while (nretry > 0 && inflight < st->entries) {
            unsigned idx = retry[--nretry];

            queue_read(&st->ring, &reqs[idx], idx);
            inflight++;
        }
        while (next < n && inflight < st->entries) {
            if (reqs[next].len == 0) {
                next++;
                continue;
            }
            queue_read(&st->ring, &reqs[next], next);
            next++;
            inflight++;
        }
        if (inflight == 0)
            continue;
        rc = io_uring_submit_and_wait(&st->ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN) {
            /* the ring itself failed: finish what is left with pread */
            io_uring_for_each_cqe(&st->ring, head, cqe) seen++;
            io_uring_cq_advance(&st->ring, seen);
            for (unsigned i = 0; i < n; i++)
                if (reqs[i].result == 0 && reqs[i].done < reqs[i].len)
                    io_pread_ops.read_all(io, &reqs[i], 1);
            break;
        }
        io_uring_for_each_cqe(&st->ring, head, cqe) {
            unsigned idx = (unsigned)io_uring_cqe_get_data64(cqe);
            struct io_req *r = &reqs[idx];
            int res = cqe->res;

            seen++;
            inflight--;
            if (res == -EAGAIN || res == -EINTR) {
                retry[nretry++] = idx;
            } else if (res < 0) {
                r->result = res;
            } else if (res == 0) {
                r->result = -EIO;
            } else {
                r->done += (uint32_t)res;
                if (r->done < r->len)
                    retry[nretry++] = idx;
            }
        }
        io_uring_cq_advance(&st->ring, seen);
    }
    free(retry);
}

static void uring_fini(struct io *io)
{
    struct uring_state *st = io->state;

    if (!st)
        return;
    io_uring_queue_exit(&st->ring);
    free(st);
    io->state = NULL;
}

const struct io_ops io_uring_ops = {
    .name = "io_uring",
    .init = uring_init,
    .read_all = uring_read_all,
    .fini = uring_fini,
};

#else

static int uring_unavailable(struct io *io, unsigned entries)
{
    (void)io;
    (void)entries;
    return -ENOSYS;
}

const struct io_ops io_uring_ops = {
    .name = "io_uring",
    .init = uring_unavailable,
    .read_all = NULL,
    .fini = NULL,
};

#endif
