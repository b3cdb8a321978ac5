/*
 * test_autoscale.c - `workers auto`'s decision (daemon/autoscale_decide.c)
 * on synthetic snapshots: no daemon, no clock, no processes.  Each case
 * builds the window's figures by hand; the plant at the end plays a
 * client and a pool over many ticks of synthetic time.
 *
 * Checked: a client's verdict (too new, input-bound, compute-bound by its
 * wait or by a full ring, in between, failed); grow one step with its
 * reason; hold while cooling down; budget-limited (target or processes
 * alive at the budget); the budget as a ceiling at once; shrink one step
 * when the work fits in n - 1 with margin, hold when it does not; no
 * client: shrink to 1, then idle; never below 1; no grow for a client the
 * workers are not busy for; no shrink soon after a grow unless clearly
 * idle; over long runs of a plant, one worker per step at most, a steady
 * count for steady demand, and a load at the edge that cannot make the
 * pool saw (the floor).  Times here are the snapshot's synthetic
 * nanoseconds: nothing is timed or printed.
 */
#include <stdio.h>
#include <string.h>

#include "autoscale.h"
#include "tap.h"

#define S 1000000000ull /* a synthetic second */

static struct as_params p;

/* One client over a full 5 s window (6 samples). */
static struct as_client_obs client(uint32_t id, double share, uint32_t full)
{
    return (struct as_client_obs){
        .id = id, .span_ns = 5 * S, .waited_ns = (uint64_t)(share * 5 * S),
        .samples = 6, .full = full,
    };
}

/* A snapshot at t = 100 s with the window complete, nothing changed for long. */
static struct as_snapshot snap(uint32_t target, uint32_t alive, uint32_t budget, double busy,
                               const struct as_client_obs *c, uint32_t n)
{
    return (struct as_snapshot){
        .now_ns = 100 * S, .span_ns = 5 * S, .busy_ns = (uint64_t)(busy * 5 * S),
        .target = target, .alive = alive, .budget = budget, .nclients = n, .clients = c,
        .h = { .last_change_ns = 10 * S },
    };
}

static void test_classify(void)
{
    struct as_client_obs c = client(1, 0.41, 0);
    double share;

    TAP_IS_STR(autoscale_state_name(AS_BUDGET_LIMITED), "budget-limited", "state names");
    TAP_IS_STR(autoscale_state_name(AS_STATE_COUNT), "?", "state name out of range");
    TAP_IS_STR(autoscale_bound_name(AS_BOUND_INPUT), "input", "bound names");
    TAP_IS_STR(autoscale_bound_name(AS_BOUND_NONE), "-", "no verdict is -");

    TAP_IS_INT(autoscale_classify(&p, &c, &share), AS_BOUND_INPUT, "41% waiting: input-bound");
    TAP_OK(share > 0.409 && share < 0.411, "its share is 0.41");
    TAP_IS_STR(autoscale_bound_name(AS_BOUND_NETWORK), "network", "network's name");
    c.net_waited_ns = (c.waited_ns + 1) / 2;
    TAP_IS_INT(autoscale_classify(&p, &c, NULL), AS_BOUND_NETWORK,
               "41% waiting, half of it on a remote shard: network-bound");
    c.net_waited_ns = (c.waited_ns + 1) / 2 - 1;
    TAP_IS_INT(autoscale_classify(&p, &c, NULL), AS_BOUND_INPUT,
               "under half of it on the network: input-bound");
    c = client(1, 0.05, 1);
    c.net_waited_ns = c.waited_ns;
    TAP_IS_INT(autoscale_classify(&p, &c, NULL), AS_BOUND_NONE,
               "5% waiting, all on the network: not input-bound, so not network-bound");
    c = client(1, 0.0, 0);
    TAP_IS_INT(autoscale_classify(&p, &c, NULL), AS_BOUND_COMPUTE, "no wait: compute-bound");
    c = client(1, 0.05, 4);
    TAP_IS_INT(autoscale_classify(&p, &c, NULL), AS_BOUND_COMPUTE,
               "5% waiting but the ring full at 4 of 6 samples: compute-bound");
    c = client(1, 0.05, 1);
    TAP_IS_INT(autoscale_classify(&p, &c, NULL), AS_BOUND_NONE,
               "5% waiting, ring seldom full: in between, no verdict");
    c = client(1, 0.10, 0);
    TAP_IS_INT(autoscale_classify(&p, &c, NULL), AS_BOUND_NONE, "exactly 10%: not input-bound");
    c = client(1, 0.9, 0);
    c.samples = 3;
    c.span_ns = 2 * S;
    TAP_IS_INT(autoscale_classify(&p, &c, &share), AS_BOUND_NONE,
               "followed for 2 of 5 s: too new to judge");
    TAP_OK(share < 0, "and no share");
    c = client(1, 0.9, 0);
    c.failed = true;
    TAP_IS_INT(autoscale_classify(&p, &c, NULL), AS_BOUND_NONE, "a failed stream: no verdict");
    c = client(1, 0, 0);
    c.waited_ns = 6 * S;
    autoscale_classify(&p, &c, &share);
    TAP_OK(share == 1.0, "a wait past the span counts as 1");
}

static void test_grow(void)
{
    struct as_client_obs c[2] = { client(3, 0.41, 0), client(4, 0.0, 6) };
    struct as_snapshot s = snap(2, 2, 4, 1.9, c, 2);
    struct as_decision d;

    autoscale_decide(&p, &s, &d);
    TAP_IS_INT(d.target, 3, "a client input-bound, room in the budget: 2 -> 3");
    TAP_IS_INT(d.state, AS_GROWING, "growing");
    TAP_IS_STR(d.reason, "client 3 input-bound 41% over 5 s: 2 -> 3", "the reason names it");
    TAP_OK(d.h.last_change_ns == s.now_ns && d.h.last_step == 1, "the history records a grow");

    s.h.last_change_ns = s.now_ns - 2 * S;
    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 2 && d.state == AS_GROWING && !d.reason[0],
           "2 s after a change (cool-down 5 s): hold, growing");

    s = snap(2, 2, 4, 0.6, c, 2);
    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 2 && d.state == AS_STEADY,
           "input-bound but the workers 30% busy: no grow (steady)");

    s = snap(4, 4, 4, 3.9, c, 2);
    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 4 && d.state == AS_BUDGET_LIMITED && !d.reason[0],
           "at the budget: hold, budget-limited");
    s = snap(3, 4, 4, 2.9, c, 2);
    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 3 && d.state == AS_BUDGET_LIMITED,
           "a retiring worker still alive fills the budget: no grow");

    s = snap(4, 4, 2, 3.9, c, 2);
    s.h.last_change_ns = s.now_ns - 1 * S;
    autoscale_decide(&p, &s, &d);
    TAP_IS_INT(d.target, 2, "the budget fell to 2 under 4 workers: cut at once, cool-down or not");
    TAP_OK(d.state == AS_BUDGET_LIMITED && strstr(d.reason, "cpu budget of 2: 4 -> 2"),
           "budget-limited, and the reason says so");

    s = snap(2, 2, 4, 1.9, c, 2);
    s.span_ns = 0;
    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 2 && d.state == AS_STEADY, "no complete window yet: hold");
}

static void test_shrink(void)
{
    struct as_client_obs c[2] = { client(1, 0.0, 6), client(2, 0.01, 2) };
    struct as_snapshot s = snap(3, 3, 8, 0.5, c, 2);
    struct as_decision d;

    autoscale_decide(&p, &s, &d);
    TAP_IS_INT(d.target, 2, "every client compute-bound, busy 0.5 of 3: 3 -> 2");
    TAP_IS_STR(d.reason, "every client compute-bound, workers busy 0.50 of 3 over 5 s: 3 -> 2",
               "the reason gives the figures");
    TAP_OK(d.state == AS_SHRINKING && d.h.last_step == -1, "shrinking, recorded");

    s = snap(3, 3, 8, 1.3, c, 2);
    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 3 && d.state == AS_STEADY,
           "busy 1.3 of 3 would not fit in 2 at 60%: hold, steady");

    s = snap(1, 1, 8, 0.05, c, 2);
    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 1 && d.state == AS_STEADY, "never below one worker");

    c[1] = client(2, 0.05, 0);
    s = snap(3, 3, 8, 0.5, c, 2);
    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 3 && d.state == AS_STEADY,
           "one client in between (5%, ring not full): no shrink");

    s = snap(2, 2, 8, 0.0, c, 0);
    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 1 && strstr(d.reason, "no client attached"),
           "no client attached: 2 -> 1");
    s = snap(1, 1, 8, 0.0, c, 0);
    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 1 && d.state == AS_IDLE && !d.reason[0], "no client, one worker: idle");

    /* no shrink soon after a grow, unless clearly idle */
    c[1] = client(2, 0.0, 6);
    s = snap(3, 3, 8, 0.5, c, 2);
    s.h.last_change_ns = s.now_ns - 6 * S;
    s.h.last_step = 1;
    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 3 && d.state == AS_SHRINKING,
           "6 s after a grow (past the cool-down, within 15 s): hold, shrinking");
    s.busy_ns = (uint64_t)(0.3 * 5 * S);
    autoscale_decide(&p, &s, &d);
    TAP_IS_INT(d.target, 2, "... unless clearly idle (busy 0.3 < 20% of 2)");
    s = snap(3, 3, 8, 0.5, c, 0);
    s.h.last_change_ns = s.now_ns - 6 * S;
    s.h.last_step = 1;
    autoscale_decide(&p, &s, &d);
    TAP_IS_INT(d.target, 2, "... or no client attached");
}

static void test_mixed(void)
{
    struct as_client_obs c[3] = { client(1, 0.0, 6), client(2, 0.35, 0), client(5, 0.6, 0) };
    struct as_snapshot s = snap(2, 2, 4, 1.8, c, 3);
    struct as_decision d;

    autoscale_decide(&p, &s, &d);
    TAP_OK(d.target == 3 && strstr(d.reason, "client 5 input-bound 60%"),
           "an input-bound client outweighs a compute-bound one; the reason names the worst");
    c[2].failed = true;
    c[1].failed = true;
    s = snap(2, 2, 4, 0.2, c, 3);
    autoscale_decide(&p, &s, &d);
    TAP_IS_INT(d.target, 1, "failed clients ask for nothing: the compute-bound one lets it shrink");
}

/*
 * The plant: one client that would use `demand` workers' worth of time,
 * and `edge` extra wait when a single worker serves it (a client whose
 * batches come too late from one worker however idle it is).  A tick is
 * one synthetic second; decisions look at the last 5 as the daemon does.
 */
struct plant {
    double demand, edge;
    uint32_t budget;
};

struct run {
    uint32_t target, changes, min, max, last_changes_at[64];
    uint32_t changes_second_half;
    bool bad_step, bad_spacing, over_budget;
    enum as_state state;
};

static void run_plant(const struct plant *pl, uint32_t ticks, uint32_t start, struct run *r)
{
    struct as_history h = { .last_change_ns = 0 };
    uint64_t t_at_change = 0;
    bool changed_once = false;

    memset(r, 0, sizeof(*r));
    r->target = r->min = r->max = start;
    for (uint32_t k = 6; k < ticks; k++) {
        uint32_t n = r->target;
        double busy = pl->demand < n ? pl->demand : n;
        double wait = pl->demand > n ? (pl->demand - n) / pl->demand : 0;
        struct as_client_obs c;
        struct as_snapshot s;
        struct as_decision d;

        if (n == 1)
            wait += pl->edge;
        c = client(7, wait > 1 ? 1 : wait, wait > 0 ? 0 : 6);
        s = snap(n, n, pl->budget, busy, &c, 1);
        s.now_ns = (uint64_t)k * S;
        s.h = h;
        /* the window only counts time at the current size (cool-down = window) */
        autoscale_decide(&p, &s, &d);
        h = d.h;
        r->state = d.state;
        if (d.target != n) {
            if (d.target + 1 != n && d.target != n + 1)
                r->bad_step = true;
            if (changed_once && s.now_ns - t_at_change < p.cooldown_ticks * p.tick_ns)
                r->bad_spacing = true;
            changed_once = true;
            t_at_change = s.now_ns;
            r->changes++;
            if (k >= ticks / 2)
                r->changes_second_half++;
            r->target = d.target;
        }
        if (r->target > pl->budget)
            r->over_budget = true;
        r->min = r->target < r->min ? r->target : r->min;
        r->max = r->target > r->max ? r->target : r->max;
    }
}

static void test_plant(void)
{
    struct plant pl = { .demand = 1.7, .budget = 8 };
    struct run r;

    run_plant(&pl, 600, 1, &r);
    TAP_OK(r.target == 2 && r.changes == 1 && r.state == AS_STEADY,
           "demand 1.7 workers: 1 -> 2 once, then steady for 10 minutes");

    pl = (struct plant){ .demand = 3.5, .budget = 8 };
    run_plant(&pl, 600, 1, &r);
    TAP_OK(r.target == 4 && r.changes == 3 && !r.bad_step && !r.bad_spacing,
           "demand 3.5: 1 -> 4 one worker a step, a cool-down apart, then holds");

    pl = (struct plant){ .demand = 6, .budget = 3 };
    run_plant(&pl, 600, 1, &r);
    TAP_OK(r.target == 3 && r.max == 3 && !r.over_budget && r.state == AS_BUDGET_LIMITED,
           "demand 6 under a budget of 3: 3 workers, budget-limited, never over");

    pl = (struct plant){ .demand = 0.3, .budget = 8 };
    run_plant(&pl, 600, 6, &r);
    TAP_OK(r.target == 1 && r.changes == 5 && !r.bad_step && !r.bad_spacing,
           "demand 0.3 from 6 workers: down to 1, one a step");

    /* at the edge: one worker is too few (it waits 15%), two are idle enough to shrink */
    pl = (struct plant){ .demand = 0.55, .edge = 0.15, .budget = 8 };
    run_plant(&pl, 1200, 1, &r);
    TAP_OK(!r.bad_step && !r.bad_spacing && r.max == 2 && r.min == 1,
           "a load at the edge: between 1 and 2 only, one a step");
    /* grow, then shrink-and-grow back after 15 s, 60 s, 120 s, 240 s, 480 s, 480 s ... */
    TAP_OK(r.changes <= 11 && r.changes_second_half <= 2,
           "... and the floor, doubling, spaces the tries: few changes, fewer later");
    TAP_IS_INT(r.target, 2, "... ending on the count that does not starve it");
}

int main(void)
{
    autoscale_params_default(&p, S);
    test_classify();
    test_grow();
    test_shrink();
    test_mixed();
    test_plant();
    return tap_done();
}
