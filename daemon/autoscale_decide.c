/*
 * autoscale_decide.c - `workers auto`'s decision (autoscale.h): pure
 * functions of a snapshot, no clock, no I/O, so tests/test_autoscale.c
 * runs them on synthetic figures.  autoscale.c takes the samples and
 * applies the decisions.
 *
 * THE INPUTS, over the window (the last window_ticks ticks, 5 s by default)
 *   - per client: its wait share, the growth of sched_client.waited_ns (the
 *     time it had released every published batch and waited for the next,
 *     stream.c WAITS) over the span it was followed; and how many of the
 *     tick samples found its ring full (ready >= depth);
 *   - the pool: its busy time (the workers' busy_ns, gone workers'
 *     included) over the span, against the target n;
 *   - the budget (>= 1), the pool's target and the processes alive
 *     (retiring ones included), and the history below.
 *
 * A CLIENT'S VERDICT (autoscale_classify)
 *   - followed for less than half the window (samples - 1 < (W + 1) / 2),
 *     or failed: "-", it counts for nothing;
 *   - input-bound: it waited more than input_share (10%) of the span;
 *   - network-bound: input-bound, and its stream's next batch waited for
 *     a remote shard (sched_client.net_waited_ns) at least half as long as
 *     it waited: it counts as neither input- nor compute-bound, so it
 *     neither grows the pool (workers would not fetch faster) nor lets it
 *     shrink;
 *   - compute-bound: it waited at most compute_share (2%), or its ring was
 *     full at full_share (half) of the samples or more;
 *   - else "-": in between, it neither asks for a worker nor gives one up.
 *   The gap between 2% and 10% is the first hysteresis: no count of
 *   workers is both too few and too many for the same client.
 *
 * THE RULES (autoscale_decide), first match wins:
 *   B. the budget is a ceiling at once: a target above it is cut to it
 *      (budget-limited), whatever the cool-down says;
 *   W. no complete window yet: hold;
 *   G. some client is input-bound:
 *        - target or processes alive at the budget: hold, budget-limited;
 *        - the workers less than busy_grow (half) busy: hold, steady (the
 *          client waits on something more workers would not fix);
 *        - within cooldown of the last change: hold, growing;
 *        - else grow by one: "client 3 input-bound 41% over 5 s: 2 -> 3".
 *          A grow within reverse of a shrink undoes it: the count before
 *          the shrink becomes a floor for floor_windows windows (doubling
 *          each time, to floor_windows_max), so a load that sits at the
 *          edge cannot make the pool saw.
 *   S. every client judged compute-bound (failed ones aside), or none
 *      attached, and target > 1:
 *        - the busy time would not fit in n - 1 workers at busy_shrink
 *          (60%) of the span: hold, steady;
 *        - within cooldown of the last change, or within reverse of a
 *          grow unless clearly idle (no client, or it would fit in n - 1
 *          at busy_idle, 20%), or below a floor still in force while a
 *          client is attached: hold, shrinking (steady for the floor);
 *        - else shrink by one: "every client compute-bound, workers busy
 *          0.42 of 3 over 5 s: 3 -> 2".
 *   I. otherwise hold: idle with no client attached, else steady.
 * One step a decision, never below 1, and the cool-down (a whole window)
 * means the next decision looks only at time spent at the new count.
 *
 * WHY THESE CONSTANTS (autoscale.h)
 *   A second a tick, five a window: a batch of JPEG train crops takes tens
 *   of ms, so a window holds many batches, and a worker started takes well
 *   under a second to say hello.  10% for input-bound is the trainers'
 *   and `ringfeedctl top`'s threshold.  60% of n - 1 keeps room for a
 *   burst after a shrink; 50% busy to grow keeps the pool from growing for
 *   a client held back by something else (its depth, the disk).  Not
 *   tuned by a benchmark: the rules, not the figures, are what the tests
 *   check.
 */
#include "autoscale.h"

#include <stdio.h>

void autoscale_params_default(struct as_params *p, uint64_t tick_ns)
{
    *p = (struct as_params){
        .tick_ns = tick_ns,
        .window_ticks = AS_WINDOW_TICKS,
        .cooldown_ticks = AS_COOLDOWN_TICKS,
        .reverse_ticks = AS_REVERSE_TICKS,
        .floor_windows = AS_FLOOR_WINDOWS,
        .floor_windows_max = AS_FLOOR_WINDOWS_MAX,
        .input_share = AS_INPUT_SHARE,
        .compute_share = AS_COMPUTE_SHARE,
        .full_share = AS_FULL_SHARE,
        .busy_grow = AS_BUSY_GROW,
        .busy_shrink = AS_BUSY_SHRINK,
        .busy_idle = AS_BUSY_IDLE,
    };
}

const char *autoscale_state_name(enum as_state s)
{
    static const char *const names[AS_STATE_COUNT] = {
        [AS_STEADY] = "steady",
        [AS_GROWING] = "growing",
        [AS_SHRINKING] = "shrinking",
        [AS_BUDGET_LIMITED] = "budget-limited",
        [AS_IDLE] = "idle",
    };

    return (unsigned)s < AS_STATE_COUNT ? names[s] : "?";
}

const char *autoscale_bound_name(enum as_bound b)
{
    static const char *const names[AS_BOUND_COUNT] = {
        [AS_BOUND_NONE] = "-",
        [AS_BOUND_INPUT] = "input",
        [AS_BOUND_COMPUTE] = "compute",
        [AS_BOUND_NETWORK] = "network",
    };

    return (unsigned)b < AS_BOUND_COUNT ? names[b] : "?";
}

enum as_bound autoscale_classify(const struct as_params *p, const struct as_client_obs *c,
                                 double *share)
{
    double s;

    if (share)
        *share = -1;
    if (c->samples < 2 || c->samples - 1 < (p->window_ticks + 1) / 2 || c->span_ns == 0)
        return AS_BOUND_NONE;
    s = (double)c->waited_ns / (double)c->span_ns;
    if (s > 1)
        s = 1; /* the wait going on is counted up to now, the span to the sample */
    if (share)
        *share = s;
    if (c->failed)
        return AS_BOUND_NONE;
    if (s > p->input_share)
        return c->net_waited_ns * 2 >= c->waited_ns ? AS_BOUND_NETWORK : AS_BOUND_INPUT;
    if (s <= p->compute_share || (double)c->full >= p->full_share * (double)c->samples)
        return AS_BOUND_COMPUTE;
    return AS_BOUND_NONE;
}

/* "5", "1.2": a span in seconds for a reason line (two digits: 5.01 s is "5"). */
static void fmt_secs(char *b, size_t cap, uint64_t ns)
{
    snprintf(b, cap, "%.2g", (double)ns / 1e9);
}

void autoscale_decide(const struct as_params *p, const struct as_snapshot *s,
                      struct as_decision *out)
{
    uint64_t window_ns = p->tick_ns * p->window_ticks;
    uint64_t cooldown_ns = p->tick_ns * p->cooldown_ticks;
    uint64_t reverse_ns = p->tick_ns * p->reverse_ticks;
    uint32_t n = s->target < 1 ? 1 : s->target, budget = s->budget < 1 ? 1 : s->budget;
    uint32_t active = 0, compute = 0, worst = 0;
    double worst_share = -1, busy = 0;
    bool cooling;
    char secs[16];

    out->target = n;
    out->reason[0] = '\0';
    out->h = s->h;
    if (!out->h.floor_windows)
        out->h.floor_windows = p->floor_windows;

    /* B: the budget is a ceiling at once */
    if (n > budget) {
        out->target = budget;
        out->state = AS_BUDGET_LIMITED;
        snprintf(out->reason, sizeof(out->reason), "over the cpu budget of %u: %u -> %u",
                 budget, n, budget);
        out->h.last_change_ns = s->now_ns;
        out->h.last_step = 0;
        return;
    }

    for (uint32_t i = 0; i < s->nclients; i++) {
        const struct as_client_obs *c = &s->clients[i];
        double share;
        enum as_bound b = autoscale_classify(p, c, &share);

        if (c->failed)
            continue;
        active++;
        if (b == AS_BOUND_COMPUTE)
            compute++;
        if (b == AS_BOUND_INPUT && share > worst_share) {
            worst_share = share;
            worst = i;
        }
    }
    if (active == 0)
        out->h.floor_windows = p->floor_windows; /* a new load starts afresh */

    /* W: no complete window yet */
    if (s->span_ns == 0 || s->span_ns + p->tick_ns / 2 < window_ns) {
        out->state = active ? AS_STEADY : AS_IDLE;
        return;
    }
    busy = (double)s->busy_ns / (double)s->span_ns; /* workers' worth of busy time */
    cooling = s->h.last_change_ns && s->now_ns - s->h.last_change_ns < cooldown_ns;
    fmt_secs(secs, sizeof(secs), s->span_ns);

    /* G: someone waits on the loader */
    if (worst_share >= 0) {
        if (n >= budget || s->alive >= budget) {
            out->state = AS_BUDGET_LIMITED;
            return;
        }
        if (busy < p->busy_grow * n) {
            out->state = AS_STEADY;
            return;
        }
        if (cooling) {
            out->state = AS_GROWING;
            return;
        }
        out->target = n + 1;
        out->state = AS_GROWING;
        snprintf(out->reason, sizeof(out->reason), "client %u input-bound %.0f%% over %s s: "
                 "%u -> %u", s->clients[worst].id, worst_share * 100, secs, n, n + 1);
        if (s->h.last_step < 0 && s->now_ns - s->h.last_change_ns < reverse_ns) {
            /* the last shrink was a mistake: not below this again for a while */
            out->h.floor = n + 1;
            out->h.floor_until_ns = s->now_ns + out->h.floor_windows * window_ns;
            out->h.floor_windows = out->h.floor_windows * 2 > p->floor_windows_max
                                       ? p->floor_windows_max
                                       : out->h.floor_windows * 2;
        }
        out->h.last_change_ns = s->now_ns;
        out->h.last_step = +1;
        return;
    }

    /* S: the work fits in fewer */
    if (compute == active && n > 1) {
        bool idle = active == 0 || busy < p->busy_idle * (n - 1);
        bool reversing = s->h.last_step > 0 && s->now_ns - s->h.last_change_ns < reverse_ns;
        bool floored = active > 0 && n - 1 < s->h.floor && s->now_ns < s->h.floor_until_ns;

        if (busy >= p->busy_shrink * (n - 1)) {
            out->state = AS_STEADY;
            return;
        }
        if (floored) {
            out->state = AS_STEADY;
            return;
        }
        if (cooling || (reversing && !idle)) {
            out->state = AS_SHRINKING;
            return;
        }
        out->target = n - 1;
        out->state = AS_SHRINKING;
        snprintf(out->reason, sizeof(out->reason), "%s, workers busy %.2f of %u over %s s: "
                 "%u -> %u", active ? "every client compute-bound" : "no client attached",
                 busy, n, secs, n, n - 1);
        out->h.last_change_ns = s->now_ns;
        out->h.last_step = -1;
        return;
    }

    /* I: nothing to do */
    out->state = active ? AS_STEADY : AS_IDLE;
}

