/*
 * ringmake.c - a client's ring memory, made and unmade on libuv's thread
 * pool (ringmake.h says why and who owns what).
 *
 * The pages are locked, or allocated, RINGMAKE_STEP bytes at a time, and
 * cancel is looked at between steps, so a client that leaves while its
 * large ring is being made, or a daemon that stops, waits for one step at
 * most (tens of ms) rather than for the whole ring.  Locking and unmapping
 * hold the process's mmap lock, which the main loop needs too (its own
 * mmap, munmap and brk, through malloc): steps keep each hold short.
 */
#include "ringmake.h"

#include "affinity.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif

#define RINGMAKE_STEP (64ull << 20)
#define RINGMAKE_WAIT_US 2000 /* the ringwait fault's poll of cancel */

static bool cancelled(struct ring_make *mk)
{
    return atomic_load_explicit(&mk->cancel, memory_order_relaxed);
}

/* Locks [0, size) step by step.  Returns 1 locked, 0 not (the limit: the
 * part locked is unlocked again), -ECANCELED. */
static int lock_pages(struct ring_make *mk)
{
    uint64_t size = mk->geom.total_size, off;

    for (off = 0; off < size; off += RINGMAKE_STEP) {
        uint64_t n = size - off < RINGMAKE_STEP ? size - off : RINGMAKE_STEP;

        if (cancelled(mk))
            return -ECANCELED;
        if (mlock((char *)mk->mem + off, n) == -1) {
            mk->lock_errno = errno;
            if (off)
                munlock(mk->mem, off);
            return 0;
        }
    }
    return 1;
}

/* Allocates the memfd's pages step by step (best effort: without it they
 * come on first touch).  Returns 0 or -ECANCELED. */
static int alloc_pages(struct ring_make *mk)
{
    uint64_t size = mk->geom.total_size;

    for (uint64_t off = 0; off < size; off += RINGMAKE_STEP) {
        uint64_t n = size - off < RINGMAKE_STEP ? size - off : RINGMAKE_STEP;

        if (cancelled(mk))
            return -ECANCELED;
        if (fallocate(mk->memfd, 0, (off_t)off, (off_t)n) == -1)
            return 0;
    }
    return 0;
}

static int fail(struct ring_make *mk, int rc, const char *what)
{
    ring_make_undo(mk->mem, mk->geom.total_size, mk->memfd, mk->efd);
    mk->mem = NULL;
    mk->memfd = mk->efd = -1;
    mk->locked = false;
    if (rc == -ECANCELED)
        rf_err_set(&mk->err, rc, "the ring's making was cancelled: the client left or the "
                   "daemon stops");
    else
        rf_err_set(&mk->err, rc, "%s: %s", what, strerror(-rc));
    mk->rc = rc;
    return rc;
}

int ring_make_run(struct ring_make *mk)
{
    int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    int rc;

    mk->memfd = mk->efd = -1;
    mk->mem = NULL;
    mk->locked = false;
    mk->rc = 0;
    mk->place_errno = 0;
    if (mk->fail_memfd)
        return fail(mk, -EMFILE, "memfd_create");
    mk->memfd = memfd_create("ringfeed-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_NOEXEC_SEAL);
    if (mk->memfd == -1 && errno == EINVAL) /* kernels before 6.3 */
        mk->memfd = memfd_create("ringfeed-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mk->memfd == -1)
        return fail(mk, -errno, "memfd_create");
    if (ftruncate(mk->memfd, (off_t)mk->geom.total_size) == -1) {
        rc = -errno;
        fail(mk, rc, "ftruncate");
        return rf_err_set(&mk->err, rc, "ftruncate ring to %llu bytes: %s",
                          (unsigned long long)mk->geom.total_size, strerror(-rc));
    }
    mk->mem = mk->fail_mmap ? (errno = ENOMEM, MAP_FAILED)
                            : mmap(NULL, mk->geom.total_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                                   mk->memfd, 0);
    if (mk->mem == MAP_FAILED) {
        mk->mem = NULL;
        return fail(mk, -errno, "mmap ring");
    }
    if (fcntl(mk->memfd, F_ADD_SEALS, seals) == -1)
        return fail(mk, -errno, "sealing the ring");
    while (mk->wait && !cancelled(mk))
        usleep(RINGMAKE_WAIT_US);
    {
        /* numa-node: the pages this thread allocates below come from the
         * node the ring was asked for (the pool's threads keep the policy
         * they started with, which a reload may have changed since), and
         * the ring's own policy places the pages a worker or the client
         * faults first.  Best effort: a ring off its node is slower, not
         * wrong. */
        rc = affinity_memory(mk->numa_node, NULL);
        if (rc == 0)
            rc = affinity_place(mk->mem, mk->geom.total_size, mk->numa_node);
        if (rc < 0)
            mk->place_errno = -rc;
    }
    /* Pages are allocated (and zeroed) now, before ATTACH's reply, not by
     * the first batch's writes: mlock does it where the limit allows, and
     * fallocate where it does not (a 154 MB ring of 224-pixel crops costs
     * some 90 ms of allocation, which otherwise lands on the first batch). */
    rc = lock_pages(mk);
    if (rc == 0)
        rc = alloc_pages(mk);
    else if (rc == 1)
        mk->locked = true, rc = 0;
    if (rc < 0)
        return fail(mk, rc, "making the ring");
    mk->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (mk->efd == -1)
        return fail(mk, -errno, "eventfd");
    return 0;
}

void ring_make_undo(void *mem, uint64_t size, int memfd, int efd)
{
    /* step by step too: munmap holds the process's mmap lock, which the
     * main loop's own mmap, munmap and brk (malloc) wait for */
    for (uint64_t off = 0; mem && off < size; off += RINGMAKE_STEP)
        munmap((char *)mem + off, size - off < RINGMAKE_STEP ? size - off : RINGMAKE_STEP);
    if (memfd >= 0)
        close(memfd);
    if (efd >= 0)
        close(efd);
}
