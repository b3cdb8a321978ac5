/*
 * test_pack_jobs.c - tools/pack_jobs.c, the threads behind `ringfeed-pack
 * imagefolder --jobs N`: every item runs exactly once, in slot
 * index % window, on a thread below the count, with the stop signals
 * blocked; the caller gets the items strictly in order, each in the slot
 * it ran in; never more than the window is in flight; one thread runs the
 * items in the caller's thread; pack_stop ends it after at most a window
 * more items, and everything joins; bad thread counts are refused.
 *
 * The items take uneven times (a few hundred microseconds, varying by
 * index) so that they finish out of order; nothing is timed.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "cpus.h"
#include "pack.h"
#include "pack_jobs.h"
#include "tap.h"

volatile sig_atomic_t pack_stop;   /* pack.c's, which is not linked */

struct slot_rec {
    size_t index;
    unsigned thread;
};

struct ctx {
    size_t window;
    unsigned threads;
    pthread_t caller;
    struct slot_rec *slots;
    atomic_uint *runs;             /* per index: times run */
    atomic_long in_flight;         /* started, not yet handed back */
    atomic_long max_in_flight;
    atomic_int bad_slot, bad_thread, unblocked, off_caller, in_caller;
};

static void item_run(void *arg, unsigned thread, size_t slot, size_t index)
{
    struct ctx *c = arg;
    long n = atomic_fetch_add(&c->in_flight, 1) + 1;
    long m = atomic_load(&c->max_in_flight);
    struct timespec ts = {0, (long)((index * 7919u) % 7u) * 60000l};
    sigset_t mask;

    while (n > m && !atomic_compare_exchange_weak(&c->max_in_flight, &m, n))
        ;
    if (slot >= c->window || slot != index % c->window)
        atomic_store(&c->bad_slot, 1);
    if (thread >= c->threads)
        atomic_store(&c->bad_thread, 1);
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    if (pthread_equal(pthread_self(), c->caller))
        atomic_store(&c->in_caller, 1);
    else {
        atomic_store(&c->off_caller, 1);
        if (!sigismember(&mask, SIGINT) || !sigismember(&mask, SIGTERM) ||
            !sigismember(&mask, SIGHUP))
            atomic_store(&c->unblocked, 1);
    }
    nanosleep(&ts, NULL);
    c->slots[slot] = (struct slot_rec){index, thread};
    atomic_fetch_add(&c->runs[index], 1);
}

/* A ctx for threads and total; free it with ctx_free. */
static struct ctx *ctx_new(unsigned threads, size_t total)
{
    struct pack_jobs_opts o = {.threads = threads, .total = total};
    struct ctx *c = calloc(1, sizeof(*c));

    if (!c)
        tap_bail("out of memory");
    c->threads = threads;
    c->window = pack_jobs_window(&o);
    c->caller = pthread_self();
    c->slots = calloc(c->window, sizeof(*c->slots));
    c->runs = calloc(total ? total : 1, sizeof(*c->runs));
    if (!c->slots || !c->runs)
        tap_bail("out of memory");
    return c;
}

static void ctx_free(struct ctx *c)
{
    free(c->slots);
    free(c->runs);
    free(c);
}

/*
 * Runs total items on threads threads, taking them all (stop_after: set
 * pack_stop once that many are taken, or never for (size_t)-1).  Checks
 * what the caller sees; returns the items taken.
 */
static size_t run_all(unsigned threads, size_t total, size_t stop_after,
                      struct ctx **out)
{
    struct ctx *c = ctx_new(threads, total);
    struct pack_jobs_opts o = {.threads = threads, .total = total,
                               .run = item_run, .ctx = c};
    struct pack_jobs *j;
    int in_order = 1;
    size_t taken = 0;
    long slot;
    int r = pack_jobs_start(&o, &j);

    if (r < 0)
        tap_bail("pack_jobs_start(%u threads, %zu items): %d", threads,
                 total, r);
    while ((slot = pack_jobs_next(j)) >= 0) {
        if ((size_t)slot >= c->window || c->slots[slot].index != taken)
            in_order = 0;
        taken++;
        if (taken % 5 == 0) {     /* a slow caller: the threads run ahead */
            struct timespec ts = {0, 300000};

            nanosleep(&ts, NULL);
        }
        atomic_fetch_sub(&c->in_flight, 1);
        pack_jobs_done(j);
        if (taken == stop_after)
            pack_stop = SIGINT;
    }
    pack_jobs_free(j);
    tap_ok(in_order, "%u threads, %zu items: taken in order, each from the "
           "slot it ran in", threads, total);
    *out = c;
    return taken;
}

static void check_complete(unsigned threads, size_t total)
{
    struct ctx *c;
    size_t taken = run_all(threads, total, (size_t)-1, &c);
    int once = 1;

    for (size_t i = 0; i < total; i++)
        once &= atomic_load(&c->runs[i]) == 1;
    tap_ok(taken == total && once, "%u threads, %zu items: every item run "
           "once and taken", threads, total);
    tap_ok(!atomic_load(&c->bad_slot) && !atomic_load(&c->bad_thread),
           "%u threads, %zu items: slot index %% %zu, thread below %u",
           threads, total, c->window, threads);
    tap_ok(atomic_load(&c->max_in_flight) <= (long)c->window,
           "%u threads, %zu items: at most the window (%zu) in flight, saw "
           "%ld", threads, total, c->window, atomic_load(&c->max_in_flight));
    if (threads == 1)
        tap_ok(!atomic_load(&c->off_caller) && (total == 0 ||
                                                atomic_load(&c->in_caller)),
               "1 thread: items run in the caller's thread");
    else
        tap_ok(!atomic_load(&c->in_caller) && !atomic_load(&c->unblocked),
               "%u threads: items run off the caller's thread, SIGINT, "
               "SIGTERM and SIGHUP blocked there", threads);
    ctx_free(c);
}

static void check_stop(unsigned threads)
{
    struct ctx *c;
    size_t total = 500, ran = 0;
    size_t taken = run_all(threads, total, 10, &c);
    int once = 1;

    for (size_t i = 0; i < total; i++) {
        ran += atomic_load(&c->runs[i]);
        once &= atomic_load(&c->runs[i]) <= 1;
    }
    tap_ok(taken == 10, "%u threads: pack_stop after 10 items: no more "
           "taken (got %zu)", threads, taken);
    tap_ok(once && ran >= 10 && ran <= 10 + c->window, "%u threads: at "
           "most the window (%zu) run past the stop (ran %zu)", threads,
           c->window, ran);
    pack_stop = 0;
    ctx_free(c);
}

int main(void)
{
    static const struct {
        unsigned threads, total;
    } runs[] = {
        {1, 0}, {1, 1}, {1, 40}, {2, 0}, {2, 1}, {2, 3}, {2, 200},
        {3, 200}, {5, 7}, {8, 300}, {64, 100},
    };
    struct pack_jobs_opts o = {.run = item_run};
    struct pack_jobs *j = NULL;

    for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++)
        check_complete(runs[k].threads, runs[k].total);
    check_stop(1);
    check_stop(4);

    o.total = 100;
    o.threads = 1;
    TAP_IS_INT(pack_jobs_window(&o), 1, "window: 1 for one thread");
    o.threads = 4;
    TAP_IS_INT(pack_jobs_window(&o), 4 * PACK_JOBS_WINDOW_PER_THREAD,
               "window: threads * PACK_JOBS_WINDOW_PER_THREAD");
    o.total = 5;
    TAP_IS_INT(pack_jobs_window(&o), 5, "window: no more than the items");
    o.total = 0;
    TAP_IS_INT(pack_jobs_window(&o), 1, "window: 1 for no item");
    o.threads = 0;
    TAP_IS_INT(pack_jobs_start(&o, &j), -EINVAL, "0 threads refused");
    TAP_OK(j == NULL, "nothing made for 0 threads");
    o.threads = PACK_JOBS_MAX + 1;
    TAP_IS_INT(pack_jobs_start(&o, &j), -EINVAL,
               "PACK_JOBS_MAX + 1 threads refused");
    pack_jobs_free(NULL);

    TAP_IS_INT(pack_jobs_cpus(), cpus_usable() < PACK_JOBS_MAX ? (int)cpus_usable()
                                                               : (int)PACK_JOBS_MAX,
               "pack_jobs_cpus: the CPUs usable (affinity, cgroup quota), at most "
               "PACK_JOBS_MAX");
    return tap_done();
}
