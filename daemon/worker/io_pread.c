/* io_pread.c - the pread fallback of the worker's read interface (io.h). */
#include "io.h"

#include <errno.h>
#include <unistd.h>

static int pread_init(struct io *io, unsigned entries)
{
    (void)entries;
    io->state = NULL;
    return 0;
}

static void pread_read_all(struct io *io, struct io_req *reqs, unsigned n)
{
    (void)io;
    for (unsigned i = 0; i < n; i++) {
        struct io_req *r = &reqs[i];

        r->done = 0;
        r->result = 0;
        while (r->done < r->len) {
            ssize_t got = pread(r->fd, (char *)r->buf + r->done, r->len - r->done,
                                (off_t)(r->off + r->done));
            if (got == -1) {
                if (errno == EINTR || errno == EAGAIN)
                    continue;
                r->result = -errno;
                break;
            }
            if (got == 0) { /* the file ends before the record does */
                r->result = -EIO;
                break;
            }
            r->done += (uint32_t)got;
        }
        r->data = r->buf;
    }
}

static void pread_fini(struct io *io)
{
    (void)io;
}

const struct io_ops io_pread_ops = {
    .name = "pread",
    .init = pread_init,
    .read_all = pread_read_all,
    .fini = pread_fini,
};
