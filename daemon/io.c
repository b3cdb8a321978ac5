/* io.c - chooses the worker's read backend (io.h) and says why. */
#include "io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

void io_open(struct io *io, unsigned entries, int force_pread)
{
    const char *env = getenv("RINGFEED_IO");
    int rc;

    memset(io, 0, sizeof(*io));
    if (env && strcmp(env, "pread") == 0)
        force_pread = 1;
    if (force_pread) {
        snprintf(io->reason, sizeof(io->reason), "pread requested");
    } else if (!RINGFEED_HAVE_IO_URING) {
        snprintf(io->reason, sizeof(io->reason), "built without liburing");
    } else {
        rc = io_uring_ops.init(io, entries);
        if (rc == 0) {
            io->ops = &io_uring_ops;
            return;
        }
        snprintf(io->reason, sizeof(io->reason), "io_uring_queue_init: %s",
                 strerror(-rc));
    }
    io->ops = &io_pread_ops;
    io->ops->init(io, entries);
}

void io_close(struct io *io)
{
    if (io->ops)
        io->ops->fini(io);
    io->ops = NULL;
}
