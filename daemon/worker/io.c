/* io.c - chooses the worker's read backend (io.h) and says why. */
#include "io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "memlimit.h"

static int try_backend(struct io *io, const struct io_ops *ops, unsigned entries)
{
    int rc = ops->init(io, entries);

    if (rc == 0)
        io->ops = ops;
    return rc;
}

void io_open(struct io *io, unsigned entries, uint64_t data_bytes)
{
    const char *env = getenv("RINGFEED_IO");
    char where[256];
    /* the memory this process may really use: a container's or unit's
     * cgroup limit, not the host's RAM (a mapped dataset larger than the
     * limit thrashes on page faults) */
    uint64_t ram = memlimit_usable(where, sizeof(where));
    int rc;

    memset(io, 0, sizeof(*io));
    if (env && strcmp(env, "mmap") == 0) {
        snprintf(io->reason, sizeof(io->reason), "RINGFEED_IO=mmap");
        if (try_backend(io, &io_mmap_ops, entries) == 0)
            return;
    } else if (!(env && strcmp(env, "io_uring") == 0) && !(env && strcmp(env, "pread") == 0) &&
               ram && data_bytes <= ram / 4) {
        /* short: HELLO carries it (the main process logs the limit's file) */
        if (snprintf(io->reason, sizeof(io->reason),
                     "datasets (%llu MB) fit in a quarter of the %llu MB usable (%s)",
                     (unsigned long long)(data_bytes >> 20), (unsigned long long)(ram >> 20),
                     strcmp(where, "RAM") == 0 ? "RAM" : "cgroup limit") >=
            (int)sizeof(io->reason))
            io->reason[sizeof(io->reason) - 1] = '\0';
        if (try_backend(io, &io_mmap_ops, entries) == 0)
            return;
    }
    if (env && strcmp(env, "pread") == 0) {
        snprintf(io->reason, sizeof(io->reason), "RINGFEED_IO=pread");
    } else if (!RINGFEED_HAVE_IO_URING) {
        snprintf(io->reason, sizeof(io->reason), "built without liburing");
    } else {
        rc = try_backend(io, &io_uring_ops, entries);
        if (rc == 0) {
            io->reason[0] = '\0';
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
