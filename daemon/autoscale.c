/*
 * autoscale.c - `workers auto`: samples the clients and the pool once a
 * tick, derives the CPU budget, asks autoscale_decide() (autoscale_decide.c,
 * which states the rules) and resizes the pool with pool_resize().
 *
 * MODE
 *   auto: config `workers = auto`, flag `--workers auto` or `WORKERS auto`.
 *   fixed: `workers = N`, `WORKERS n`, or no workers setting at all (one
 *   per CPU).  A WORKERS n switches the controller off at once; a reload
 *   applies the file's choice when it changed (reload.c).  Switching to
 *   auto keeps the pool's size and counts as a change: the first decision
 *   comes a cool-down later.  The ticks run in both modes, so STATS shows
 *   the budget and each client's wait share and bound either way; only in
 *   auto do they change the pool.
 *
 * THE BUDGET (each tick, and at once when a client attaches)
 *   - cpu-budget set: used as given (1..256), source "config";
 *   - else the CPUs the daemon may run on (sched_getaffinity), lowered to
 *     the tightest cgroup v2 cpu.max quota on the way from the daemon's
 *     cgroup (/proc/self/cgroup's "0::" line) up to the root, rounded up
 *     (a quota of 1.5 CPUs allows 2 workers), less one per attached client
 *     (a trainer needs a CPU of its own), at least 1; source "cpus" or
 *     "cgroup", with the figures.
 *   In auto mode the pool's target never exceeds the budget: a budget that
 *   falls (an attach) cuts the target at once, and a grow needs the
 *   processes alive, retiring ones included, below the budget.  A worker
 *   asked to retire finishes the jobs it holds (at most WORKER_INFLIGHT)
 *   before it exits, and a reload's restart (pool_roll) overlaps old and
 *   new workers for as long; the main process is not counted.
 *
 * SAMPLES
 *   Each tick records the clock, the pool's busy time (pool_totals: live
 *   and gone workers) and, per attached client (sched_client_next), its
 *   waited_ns, whether its ring is full (ready >= depth) and whether it
 *   failed, into a ring of AS_HIST ticks; clients are followed by attach
 *   id from the tick they were first seen.  A decision looks at the last
 *   window_ticks ticks.
 *
 * Invariants, checked by autoscale_check() after every tick and every
 * mode change in checking builds (RINGFEED_CHECKS), where a broken one
 * aborts:
 *   A1. budget >= 1 and <= POOL_MAX; in auto mode, after a tick, the
 *       pool's target is in 1..budget;
 *   A2. the followed clients are at most AS_CLIENTS_MAX, with distinct ids,
 *       none first seen after the last tick;
 *   A3. the samples' clocks strictly increase and the pool's busy time
 *       never falls;
 *   A4. a change's reason is set once there was a change; idle only with
 *       no client attached that has not failed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "cpus.h"
#include "daemon.h"
#include "log.h"
#include "strnum.h"

static struct daemon *daemon_of(uv_handle_t *h)
{
    return h->loop->data;
}

/* The budget as d->cf and the machine give it now. */
static void budget_refresh(struct daemon *d)
{
    struct autoscale *as = &d->autoscale;
    uint32_t clients = 0, cpus, quota, usable;
    char where[2400];
    const struct stream *st = NULL;
    struct sched_client c;

    if (d->cf.cpu_budget) {
        as->budget = d->cf.cpu_budget;
        snprintf(as->budget_source, sizeof(as->budget_source), "config (cpu-budget = %u)",
                 d->cf.cpu_budget);
        return;
    }
    while ((st = sched_client_next(d, st, &c)))
        clients += !c.failed;
    cpus = cpus_affinity();
    quota = cpus_quota(where, sizeof(where));
    usable = quota && quota < cpus ? quota : cpus;
    as->budget = usable > clients ? usable - clients : 1;
    if (as->budget > POOL_MAX)
        as->budget = POOL_MAX;
    if (quota && quota < cpus)
        snprintf(as->budget_source, sizeof(as->budget_source),
                 "cgroup (%.200s: %u of the %u CPUs the daemon may run on; %u client(s) "
                 "attached: %u)", where, quota, cpus, clients, as->budget);
    else
        snprintf(as->budget_source, sizeof(as->budget_source),
                 "cpus (%u the daemon may run on, %s; %u client(s) attached: %u)", cpus,
                 quota ? "a cgroup cpu.max quota no lower" : "no cgroup cpu.max quota",
                 clients, as->budget);
}

/* The followed client with id in the last tick's tracks, hint first. */
static struct as_track *find_track(struct autoscale *as, uint32_t set, uint32_t n, uint32_t id,
                                   uint32_t *hint)
{
    struct as_track *t = as->tracks[set];

    if (*hint < n && t[*hint].id == id)
        return &t[(*hint)++];
    for (uint32_t i = 0; i < n; i++)
        if (t[i].id == id) {
            *hint = i + 1;
            return &t[i];
        }
    return NULL;
}

/* One tick's samples: the pool's and every attached client's. */
static void take_samples(struct daemon *d, uint64_t now)
{
    struct autoscale *as = &d->autoscale;
    uint32_t old = as->cur, nold = as->ntracks, nnew = 0, hint = 0;
    uint64_t tick = ++as->ticks;
    unsigned k = (unsigned)(tick % AS_HIST);
    struct as_track *fresh = as->tracks[old ^ 1];
    const struct stream *st = NULL;
    struct wire_counters tot;
    struct sched_client c;

    pool_totals(d, &tot);
    as->t[k] = now;
    as->busy[k] = tot.busy_ns;
    while (nnew < AS_CLIENTS_MAX && (st = sched_client_next(d, st, &c))) {
        struct as_track *prev = find_track(as, old, nold, c.id, &hint);
        struct as_track *t = &fresh[nnew++];

        if (prev) {
            *t = *prev;
        } else {
            memset(t, 0, sizeof(*t));
            t->id = c.id;
            t->since = tick;
            t->share = -1;
        }
        t->waited[k] = c.waited_ns;
        t->net_waited[k] = c.net_waited_ns;
        t->full[k] = c.depth && c.ready >= c.depth;
        t->failed = c.failed;
    }
    as->cur = old ^ 1;
    as->ntracks = nnew;
}

/* The snapshot over the window that ends at the last tick. */
static void make_snapshot(struct daemon *d, struct as_snapshot *s)
{
    struct autoscale *as = &d->autoscale;
    uint64_t tick = as->ticks, w = as->p.window_ticks;
    unsigned k = (unsigned)(tick % AS_HIST);

    memset(s, 0, sizeof(*s));
    s->now_ns = as->t[k];
    if (tick > w) {
        unsigned k0 = (unsigned)((tick - w) % AS_HIST);

        s->span_ns = as->t[k] - as->t[k0];
        s->busy_ns = as->busy[k] - as->busy[k0];
    }
    s->target = d->pool.target;
    s->alive = d->pool.alive;
    s->budget = as->budget;
    for (uint32_t i = 0; i < as->ntracks; i++) {
        const struct as_track *t = &as->tracks[as->cur][i];
        uint64_t start = tick > w ? tick - w : 1, from = t->since > start ? t->since : start;
        unsigned f = (unsigned)(from % AS_HIST);
        struct as_client_obs *o = &as->obs[i];

        *o = (struct as_client_obs){
            .id = t->id,
            .span_ns = as->t[k] - as->t[f],
            .waited_ns = t->waited[k] >= t->waited[f] ? t->waited[k] - t->waited[f] : 0,
            .net_waited_ns = t->net_waited[k] >= t->net_waited[f]
                             ? t->net_waited[k] - t->net_waited[f] : 0,
            .samples = (uint32_t)(tick - from + 1),
            .failed = t->failed,
        };
        for (uint64_t j = from; j <= tick; j++)
            o->full += t->full[j % AS_HIST];
    }
    s->nclients = as->ntracks;
    s->clients = as->obs;
    s->h = as->h;
}

/* The controller's verdict on each client, kept for STATS. */
static void keep_verdicts(struct autoscale *as, const struct as_snapshot *s)
{
    for (uint32_t i = 0; i < as->ntracks; i++) {
        struct as_track *t = &as->tracks[as->cur][i];

        t->bound = autoscale_classify(&as->p, &s->clients[i], &t->share);
    }
}

/* Applies a decision: the pool's new target, the reason, the counters. */
static void apply(struct daemon *d, const struct as_decision *dec)
{
    struct autoscale *as = &d->autoscale;

    as->state = dec->state;
    as->h = dec->h;
    if (dec->target == d->pool.target)
        return;
#if RINGFEED_CHECKS
    if (dec->target > d->pool.target && d->pool.alive >= as->budget) {
        log_error("autoscale_check: a grow to %u with %u workers alive and a budget of %u",
                  dec->target, d->pool.alive, as->budget);
        abort();
    }
#endif
    if (pool_resize(d, dec->target) < 0) {
        log_error("workers auto: cannot resize the pool to %u (%s)", dec->target, dec->reason);
        return;
    }
    as->changes++;
    snprintf(as->reason, sizeof(as->reason), "%s", dec->reason);
    log_info("workers auto: %s", dec->reason);
}

static void decide_now(struct daemon *d)
{
    struct autoscale *as = &d->autoscale;
    struct as_snapshot s;
    struct as_decision dec;

    make_snapshot(d, &s);
    keep_verdicts(as, &s);
    if (as->mode != AS_AUTO || d->stopping)
        return;
    autoscale_decide(&as->p, &s, &dec);
    apply(d, &dec);
}

static void on_tick(uv_timer_t *t)
{
    struct daemon *d = daemon_of((uv_handle_t *)t);
    uint64_t now = clock_mono_ns();

    if (now <= d->autoscale.t[d->autoscale.ticks % AS_HIST])
        now = d->autoscale.t[d->autoscale.ticks % AS_HIST] + 1; /* A3 */
    budget_refresh(d);
    take_samples(d, now);
    decide_now(d);
    autoscale_check(d);
}

int autoscale_init(struct daemon *d, struct rf_err *err)
{
    struct autoscale *as = &d->autoscale;
    const char *env = getenv("RINGFEED_AUTOSCALE_TICK_MS");
    uint64_t ms = AS_TICK_MS;

    if (env && env[0]) {
        if (strnum_u64(env, strlen(env), &ms) < 0 || ms < AS_TICK_MS_MIN || ms > AS_TICK_MS_MAX)
            return rf_err_set(err, -EINVAL,
                              "RINGFEED_AUTOSCALE_TICK_MS=%.32s: expected milliseconds in "
                              "%d..%d (a test setting; unset it for the default %d)",
                              env, AS_TICK_MS_MIN, AS_TICK_MS_MAX, AS_TICK_MS);
        log_info("workers auto: a tick of %llu ms (RINGFEED_AUTOSCALE_TICK_MS), window %d ticks",
                 (unsigned long long)ms, AS_WINDOW_TICKS);
    }
    autoscale_params_default(&as->p, ms * 1000000ull);
    as->mode = d->cf.workers_auto ? AS_AUTO : AS_FIXED;
    as->state = AS_STEADY;
    as->budget = 1;
    budget_refresh(d);
    return 0;
}

void autoscale_start(struct daemon *d)
{
    struct autoscale *as = &d->autoscale;
    uint64_t ms = as->p.tick_ns / 1000000ull;

    as->h.last_change_ns = clock_mono_ns();
    uv_timer_init(d->loop, &as->timer);
    as->timer_open = true;
    uv_timer_start(&as->timer, on_tick, ms, ms);
    on_tick(&as->timer); /* the first sample now */
}

void autoscale_stop(struct daemon *d)
{
    if (!d->autoscale.timer_open)
        return;
    d->autoscale.timer_open = false;
    uv_close((uv_handle_t *)&d->autoscale.timer, NULL);
}

void autoscale_set_auto(struct daemon *d, bool on, const char *why)
{
    struct autoscale *as = &d->autoscale;
    enum as_mode m = on ? AS_AUTO : AS_FIXED;

    if (as->mode == m)
        return;
    as->mode = m;
    as->state = AS_STEADY;
    as->h = (struct as_history){.last_change_ns = clock_mono_ns()};
    log_info("workers %s (%s)", on ? "auto: the daemon sizes the pool" : "fixed", why);
    if (on)
        autoscale_budget_changed(d);
    autoscale_check(d);
}

void autoscale_budget_changed(struct daemon *d)
{
    struct autoscale *as = &d->autoscale;
    struct as_decision dec;
    struct as_snapshot s;

    budget_refresh(d);
    if (as->mode != AS_AUTO || d->stopping || d->pool.target <= as->budget)
        return;
    /* rule B alone: the ceiling at once, whatever the window says */
    memset(&s, 0, sizeof(s));
    s.now_ns = clock_mono_ns();
    s.target = d->pool.target;
    s.alive = d->pool.alive;
    s.budget = as->budget;
    s.h = as->h;
    autoscale_decide(&as->p, &s, &dec);
    apply(d, &dec);
    autoscale_check(d);
}

enum as_bound autoscale_client(const struct daemon *d, uint32_t id, double *share)
{
    const struct autoscale *as = &d->autoscale;

    for (uint32_t i = 0; i < as->ntracks; i++) {
        const struct as_track *t = &as->tracks[as->cur][i];

        if (t->id == id) {
            *share = t->share;
            return t->bound;
        }
    }
    *share = -1;
    return AS_BOUND_NONE;
}

void autoscale_check(const struct daemon *d)
{
#if RINGFEED_CHECKS
    const struct autoscale *as = &d->autoscale;
    uint32_t active = 0;

#define CHECK_FAIL(...) do { log_error("autoscale_check: " __VA_ARGS__); abort(); } while (0)
    if (as->budget < 1 || as->budget > POOL_MAX)                               /* A1 */
        CHECK_FAIL("budget %u outside 1..%d", as->budget, POOL_MAX);
    if (as->mode == AS_AUTO && !d->stopping && as->ticks &&
        (d->pool.target < 1 || d->pool.target > as->budget))
        CHECK_FAIL("workers auto with a target of %u and a budget of %u", d->pool.target,
                   as->budget);
    if (as->ntracks > AS_CLIENTS_MAX)                                          /* A2 */
        CHECK_FAIL("%u clients followed", as->ntracks);
    for (uint32_t i = 0; i < as->ntracks; i++) {
        const struct as_track *t = &as->tracks[as->cur][i];

        if (t->since > as->ticks || t->since == 0)
            CHECK_FAIL("client %u first seen at tick %llu of %llu", t->id,
                       (unsigned long long)t->since, (unsigned long long)as->ticks);
        for (uint32_t j = i + 1; j < as->ntracks; j++)
            if (as->tracks[as->cur][j].id == t->id)
                CHECK_FAIL("client %u followed twice", t->id);
        active += !t->failed;
    }
    for (uint64_t j = as->ticks > AS_HIST ? as->ticks - AS_HIST + 2 : 2; j <= as->ticks; j++) {
        unsigned a = (unsigned)((j - 1) % AS_HIST), b = (unsigned)(j % AS_HIST); /* A3 */

        if (as->t[b] <= as->t[a] || as->busy[b] < as->busy[a])
            CHECK_FAIL("samples %llu and %llu: clock %llu -> %llu, busy %llu -> %llu",
                       (unsigned long long)j - 1, (unsigned long long)j,
                       (unsigned long long)as->t[a], (unsigned long long)as->t[b],
                       (unsigned long long)as->busy[a], (unsigned long long)as->busy[b]);
    }
    if (as->changes && !as->reason[0])                                         /* A4 */
        CHECK_FAIL("%llu changes and no reason", (unsigned long long)as->changes);
    if (as->mode == AS_AUTO && as->state == AS_IDLE && active)
        CHECK_FAIL("idle with %u clients attached", active);
#undef CHECK_FAIL
#else
    (void)d;
#endif
}
