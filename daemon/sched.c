/*
 * sched.c - the scheduler's own state (scheduler.h): its once-a-second
 * tick, the kicks it defers to the loop's next turn, and sched_check,
 * which holds every module's invariants after each transition.
 *
 * The scheduler is five modules (scheduler.h lists them).  Calls go down:
 * stream.c's lifecycle calls plan.c, share.c and fairq.c; plan.c calls
 * share.c and fairq.c; share.c calls plan.c to catch a joining stream up.
 * Nothing in them calls out of the scheduler except through struct
 * sched_ops, and the one call out that re-enters it, the server's kick
 * (which detaches the stream), is never made from inside a scheduler
 * call: stream_kick marks the stream and sched_run_kicks, run by the loop
 * on its next turn, tells the server.
 */
#include <stdlib.h>

#include "config.h"
#include "daemon.h"
#include "log.h"
#include "stream.h"

uint64_t sched_now(const struct daemon *d)
{
    return d->sched.ops && d->sched.ops->now ? d->sched.ops->now() : clock_mono_ns();
}

/* Once a second: the share windows (WEIGHTS), and groups held by a full
 * ring or streams waiting to join one (share.c looks again as it plans). */
static void on_tick(uv_timer_t *t)
{
    struct daemon *d = t->loop->data;
    uint64_t now = sched_now(d);

    if (now - d->sched.fq.win_start_ns >= FQ_WINDOW_NS)
        fq_window(d, now);
    if (share_waits(d)) {
        sched_fill(d);
        d->sched.ops->dispatch(d);
    }
}

static void on_kick_idle(uv_idle_t *h)
{
    struct daemon *d = h->loop->data;

    uv_idle_stop(h);
    sched_run_kicks(d);
}

void sched_defer_kicks(struct daemon *d)
{
    if (d->sched.kick_open)
        uv_idle_start(&d->sched.kick_idle, on_kick_idle);
}

void sched_run_kicks(struct daemon *d)
{
    /* each kick detaches its stream, which changes the list: start over */
    while (d->sched.kicks_pending > 0) {
        struct stream *st = d->sched.streams;

        while (st && !(st->kicked && !st->kick_sent))
            st = st->next;
        if (!st) {
            d->sched.kicks_pending = 0; /* detached before its turn came */
            break;
        }
        st->kick_sent = true;
        d->sched.kicks_pending--;
        d->sched.ops->kick(st->conn, st->kick_why); /* st may be gone after this */
    }
}

void sched_init(struct daemon *d, const struct sched_ops *ops)
{
    d->sched.ops = ops;
    d->sched.fq.win_start_ns = sched_now(d);
    uv_timer_init(d->loop, &d->sched.tick);
    d->sched.tick_open = true;
    uv_timer_start(&d->sched.tick, on_tick, 1000, 1000);
    uv_unref((uv_handle_t *)&d->sched.tick);
    uv_idle_init(d->loop, &d->sched.kick_idle);
    d->sched.kick_open = true;
}

void sched_close(struct daemon *d)
{
    if (d->sched.tick_open)
        uv_close((uv_handle_t *)&d->sched.tick, NULL);
    d->sched.tick_open = false;
    if (d->sched.kick_open)
        uv_close((uv_handle_t *)&d->sched.kick_idle, NULL);
    d->sched.kick_open = false;
}

void sched_check(const struct daemon *d)
{
#if RINGFEED_CHECKS
    uint32_t kicks = 0;

    fq_check(d);
    share_check(d);
    stream_check(d);
    for (const struct job *j = d->sched.parked; j; j = j->next)
        for (uint32_t i = 0; i < j->ntargets; i++)
            if (j->worker != -1 || j->t[i].st->dead || !j->hold.pack) {
                log_error("sched_check: parked job %llu %s",
                          (unsigned long long)j->job_id,
                          j->worker != -1 ? "has a worker" : j->t[i].st->dead
                              ? "targets a detached client" : "holds no shards");
                abort();
            }
    for (const struct stream *st = d->sched.streams; st; st = st->next)
        kicks += st->kicked && !st->kick_sent;
    if (kicks > d->sched.kicks_pending) {
        log_error("sched_check: %u streams wait for their kick, %u counted", kicks,
                  d->sched.kicks_pending);
        abort();
    }
    for (int k = 0; k < 2; k++) {                                       /* H1 (WAITS) */
        const struct hist *h = k ? &d->sched.prod_hist : &d->sched.wait_hist;
        uint64_t sum = 0;

        for (unsigned i = 0; i <= HIST_FINITE; i++)
            sum += h->bucket[i];
        if (sum != h->count) {
            log_error("sched_check: the %s histogram's buckets hold %llu observations, its "
                      "count says %llu", k ? "production" : "wait", (unsigned long long)sum,
                      (unsigned long long)h->count);
            abort();
        }
    }
#else
    (void)d;
#endif
}
