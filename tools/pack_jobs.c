/*
 * pack_jobs.c - the threads behind pack_jobs.h: items run on any thread,
 * handed to the caller in item order, at most a window of them in flight.
 *
 * State, under mu (one driver each: the threads take and finish items,
 * the caller holds and hands back the next one):
 *   next       the item the caller gets next (or holds, when held);
 *   taken      items threads have taken: 0..taken-1;
 *   state[s]   FREE, RUNNING (a thread runs its item), DONE (finished, not
 *              yet given to the caller) or HELD (the caller has it).
 * Invariants (jobs_check, after every transition; the walk over the slots
 * in RINGFEED_CHECKS builds):
 *   next <= taken <= min(total, next + window);
 *   the item in slot s is the one of [next, taken) that is s mod window,
 *   and the slot is FREE exactly when there is none: for i in
 *   [next, taken), state[i % window] is RUNNING or DONE, HELD for i = next
 *   when held; every other slot is FREE;
 *   held => next < taken and state[next % window] is HELD.
 * A thread takes item taken when taken < min(total, next + window): slot
 * taken % window is then FREE, since item taken - window has been handed
 * back.  Items are taken in order, so while the caller waits for item next
 * it is running (or done) and its end wakes the caller.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "config.h"
#include "cpus.h"
#include "pack.h"
#include "pack_jobs.h"

enum slot_state { SLOT_FREE, SLOT_RUNNING, SLOT_DONE, SLOT_HELD };

struct jobs_thread {
    struct pack_jobs *j;
    unsigned id;
    pthread_t tid;
};

struct pack_jobs {
    struct pack_jobs_opts o;
    size_t window;
    pthread_mutex_t mu;
    pthread_cond_t work;      /* threads wait here: an item to take, quit */
    pthread_cond_t done;      /* the caller waits here: item next done */
    size_t next, taken;
    int held;
    int quit;
    unsigned started;         /* threads running jobs_thread */
    unsigned char *state;     /* window: enum slot_state */
    struct jobs_thread *threads;
};

unsigned pack_jobs_cpus(void)
{
    uint32_t n = cpus_usable();

    return n > PACK_JOBS_MAX ? PACK_JOBS_MAX : (unsigned)n;
}

size_t pack_jobs_window(const struct pack_jobs_opts *o)
{
    size_t w;

    if (o->threads <= 1)
        return 1;
    w = (size_t)o->threads * PACK_JOBS_WINDOW_PER_THREAD;
    if (w > o->total)
        w = o->total;
    return w ? w : 1;
}

/* Items a thread may have taken: the window past next, within total. */
static size_t jobs_limit(const struct pack_jobs *j)
{
    size_t lim = j->next + j->window;

    return lim < j->o.total ? lim : j->o.total;
}

static void jobs_check(const struct pack_jobs *j)
{
#ifndef NDEBUG
    assert(j->next <= j->taken && j->taken <= jobs_limit(j));
    assert(!j->held || j->next < j->taken);
#if RINGFEED_CHECKS
    for (size_t s = 0; s < j->window; s++) {
        /* the item of [next, taken) in slot s, if any */
        size_t i = j->next + (s + j->window - j->next % j->window) % j->window;

        if (i >= j->taken)
            assert(j->state[s] == SLOT_FREE);
        else if (i == j->next && j->held)
            assert(j->state[s] == SLOT_HELD);
        else
            assert(j->state[s] == SLOT_RUNNING || j->state[s] == SLOT_DONE);
    }
#endif
#else
    (void)j;
#endif
}

static void *jobs_thread(void *arg)
{
    struct jobs_thread *t = arg;
    struct pack_jobs *j = t->j;

    pthread_mutex_lock(&j->mu);
    for (;;) {
        size_t i, slot;

        while (!j->quit && j->taken == jobs_limit(j))
            pthread_cond_wait(&j->work, &j->mu);
        if (j->quit)
            break;
        i = j->taken++;
        slot = i % j->window;
        j->state[slot] = SLOT_RUNNING;
        jobs_check(j);
        pthread_mutex_unlock(&j->mu);
        j->o.run(j->o.ctx, t->id, slot, i);
        pthread_mutex_lock(&j->mu);
        j->state[slot] = SLOT_DONE;
        jobs_check(j);
        if (i == j->next)
            pthread_cond_signal(&j->done);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

int pack_jobs_start(const struct pack_jobs_opts *o, struct pack_jobs **out)
{
    struct pack_jobs *j;
    sigset_t stops, old;
    int rc = 0;

    *out = NULL;
    if (o->threads < 1 || o->threads > PACK_JOBS_MAX || !o->run)
        return -EINVAL;
    j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    j->o = *o;
    j->window = pack_jobs_window(o);
    j->state = calloc(j->window, 1);
    if (!j->state) {
        free(j);
        return -ENOMEM;
    }
    if (o->threads == 1) {
        *out = j;
        return 0;
    }
    j->threads = calloc(o->threads, sizeof(*j->threads));
    if (!j->threads) {
        free(j->state);
        free(j);
        return -ENOMEM;
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->work, NULL);
    pthread_cond_init(&j->done, NULL);
    /* the stop signals go to the caller's thread, which checks pack_stop */
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stops, &old);
    for (unsigned t = 0; t < o->threads; t++) {
        j->threads[t] = (struct jobs_thread){.j = j, .id = t};
        rc = -pthread_create(&j->threads[t].tid, NULL, jobs_thread,
                             &j->threads[t]);
        if (rc)
            break;
        j->started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        pack_jobs_free(j);
        return rc;
    }
    *out = j;
    return 0;
}

long pack_jobs_next(struct pack_jobs *j)
{
    size_t slot;

    if (j->o.threads == 1) {
        assert(!j->held);
        if (pack_stop || j->next >= j->o.total)
            return -1;
        j->o.run(j->o.ctx, 0, 0, j->next);
        j->held = 1;
        return 0;
    }
    pthread_mutex_lock(&j->mu);
    assert(!j->held);
    if (j->next >= j->o.total) {
        pthread_mutex_unlock(&j->mu);
        return -1;
    }
    slot = j->next % j->window;
    while (j->state[slot] != SLOT_DONE && !pack_stop)
        pthread_cond_wait(&j->done, &j->mu);
    if (pack_stop) {
        pthread_mutex_unlock(&j->mu);
        return -1;
    }
    j->state[slot] = SLOT_HELD;
    j->held = 1;
    jobs_check(j);
    pthread_mutex_unlock(&j->mu);
    return (long)slot;
}

void pack_jobs_done(struct pack_jobs *j)
{
    if (j->o.threads == 1) {
        assert(j->held);
        j->held = 0;
        j->next++;
        return;
    }
    pthread_mutex_lock(&j->mu);
    assert(j->held);
    j->state[j->next % j->window] = SLOT_FREE;
    j->held = 0;
    j->next++;
    jobs_check(j);
    /* the window moved by one: one more item to take */
    pthread_cond_signal(&j->work);
    pthread_mutex_unlock(&j->mu);
}

void pack_jobs_free(struct pack_jobs *j)
{
    if (!j)
        return;
    if (j->threads) {
        pthread_mutex_lock(&j->mu);
        j->quit = 1;
        pthread_cond_broadcast(&j->work);
        pthread_mutex_unlock(&j->mu);
        for (unsigned t = 0; t < j->started; t++)
            pthread_join(j->threads[t].tid, NULL);
        pthread_cond_destroy(&j->done);
        pthread_cond_destroy(&j->work);
        pthread_mutex_destroy(&j->mu);
        free(j->threads);
    }
    free(j->state);
    free(j);
}
