/*
 * mapguard.c - SIGBUS on a shrunk file mapping turned into zero pages and a
 * count (mapguard.h).
 *
 * The table: MAPGUARD_MAX slots of (start, end), start 0 meaning free.  Add
 * writes end, then start (release); remove clears start first.  The
 * handler loads start (acquire), then end, so it never sees a region with
 * a stale end.  Only mmap, sigaction and atomics are used in the handler.
 */
#include "mapguard.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct region {
    _Atomic uintptr_t start;
    _Atomic uintptr_t end;
};

static struct region regions[MAPGUARD_MAX];
static _Atomic uint64_t faults;
static _Atomic int installed;
static uintptr_t page_mask;

static int guarded(uintptr_t a)
{
    for (unsigned i = 0; i < MAPGUARD_MAX; i++) {
        uintptr_t s = atomic_load_explicit(&regions[i].start, memory_order_acquire);

        if (s && a >= s && a < atomic_load_explicit(&regions[i].end, memory_order_relaxed))
            return 1;
    }
    return 0;
}

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    int saved = errno;

    (void)uctx;
    if (si->si_code == BUS_ADRERR && guarded(a)) {
        void *page = (void *)(a & page_mask);

        if (mmap(page, ~page_mask + 1, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                 0) != MAP_FAILED) {
            atomic_fetch_add_explicit(&faults, 1, memory_order_relaxed);
            errno = saved;
            return;
        }
    }
    /* not ours (or no memory for the page): die of it as before */
    signal(sig, SIG_DFL);
    errno = saved;
}

int mapguard_install(void)
{
    struct sigaction sa;

    if (atomic_load(&installed))
        return 0;
    page_mask = ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, NULL) == -1)
        return -errno;
    atomic_store(&installed, 1);
    return 0;
}

int mapguard_add(const void *addr, size_t len)
{
    uintptr_t s = (uintptr_t)addr;

    if (!addr || !len)
        return 0;
    for (unsigned i = 0; i < MAPGUARD_MAX; i++) {
        if (atomic_load_explicit(&regions[i].start, memory_order_relaxed))
            continue;
        atomic_store_explicit(&regions[i].end, s + len, memory_order_relaxed);
        atomic_store_explicit(&regions[i].start, s, memory_order_release);
        return 0;
    }
    return -ENOSPC;
}

void mapguard_remove(const void *addr)
{
    uintptr_t s = (uintptr_t)addr;

    if (!addr)
        return;
    for (unsigned i = 0; i < MAPGUARD_MAX; i++)
        if (atomic_load_explicit(&regions[i].start, memory_order_relaxed) == s) {
            atomic_store_explicit(&regions[i].start, 0, memory_order_release);
            return;
        }
}

uint64_t mapguard_faults(void)
{
    return atomic_load_explicit(&faults, memory_order_relaxed);
}
