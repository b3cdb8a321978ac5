/*
 * autoscale.h - `workers auto` (autoscale.c): the controller that sizes the
 * worker pool under a CPU budget.  Its state, struct autoscale, lives in
 * struct daemon (only autoscale.c changes it; stats.c reads it).  The
 * decision is a pure function of a snapshot (autoscale_decide), so
 * tests/test_autoscale.c drives it with synthetic figures.  The rules and
 * the reasons for the constants below are at the top of
 * autoscale_decide.c; the budget, the samples and the invariants at the
 * top of autoscale.c.
 */
#ifndef RINGFEED_DAEMON_AUTOSCALE_H
#define RINGFEED_DAEMON_AUTOSCALE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "conf.h"
#include "err.h"

struct daemon;

/* The defaults (autoscale_params_default); autoscale.c says why. */
#define AS_TICK_MS 1000          /* a sample (and a decision) a second */
#define AS_TICK_MS_MIN 50        /* RINGFEED_AUTOSCALE_TICK_MS's range (tests) */
#define AS_TICK_MS_MAX 10000
#define AS_WINDOW_TICKS 5        /* decisions over the last 5 ticks */
#define AS_WINDOW_MAX 8          /* ring size bound for window_ticks */
#define AS_COOLDOWN_TICKS 5      /* after any change: a whole window of the new size */
#define AS_REVERSE_TICKS 15      /* no shrink this soon after a grow, unless idle */
#define AS_FLOOR_WINDOWS 12      /* a shrink undone at once: no shrink below for 12 windows */
#define AS_FLOOR_WINDOWS_MAX 96  /* ... doubling each time, at most 96 */
#define AS_INPUT_SHARE 0.10      /* waited more than 10% of the window: input-bound */
#define AS_COMPUTE_SHARE 0.02    /* waited at most 2%, or ... */
#define AS_FULL_SHARE 0.5        /* ... its ring full at half the samples: compute-bound */
#define AS_BUSY_GROW 0.5         /* grow only while the workers are at least half busy */
#define AS_BUSY_SHRINK 0.6       /* shrink when the work fits in n - 1 at 60% */
#define AS_BUSY_IDLE 0.2         /* "clearly idle": it would fit in n - 1 at 20% */
#define AS_START_WORKERS 1       /* the pool's size when workers = auto starts */
#define AS_CLIENTS_MAX CONF_MAX_CLIENTS_MAX
#define AS_REASON_MAX 192
#define AS_SOURCE_MAX 320

enum as_mode { AS_FIXED, AS_AUTO };

/* What the controller is doing (STATS workers.auto_state). */
enum as_state {
    AS_STEADY,         /* the count is right, or nothing tells it otherwise */
    AS_GROWING,        /* a client is input-bound: adding (or cooling down after adding) */
    AS_SHRINKING,      /* the work fits in fewer: retiring (or cooling down first) */
    AS_BUDGET_LIMITED, /* a client is input-bound but the budget allows no more */
    AS_IDLE,           /* no client attached and one worker left */
    AS_STATE_COUNT
};

/* A client's verdict over the window (STATS clients.N.bound). */
enum as_bound {
    AS_BOUND_NONE,     /* "-": too new to judge, failed, or in between */
    AS_BOUND_INPUT,    /* "input": it waited on the daemon more than input_share */
    AS_BOUND_COMPUTE,  /* "compute": it hardly waited, or its ring stayed full */
    AS_BOUND_NETWORK,  /* "network": input-bound, while its next batch waited for a
                          remote shard at least half as long (ahead.h): more
                          workers would not help, the link or the cache would */
    AS_BOUND_COUNT
};

struct as_params {
    uint64_t tick_ns;
    uint32_t window_ticks;       /* 2..AS_WINDOW_MAX */
    uint32_t cooldown_ticks, reverse_ticks;
    uint32_t floor_windows, floor_windows_max;
    double input_share, compute_share, full_share;
    double busy_grow, busy_shrink, busy_idle;
};

/* One attached client over the window, as the tick samples saw it. */
struct as_client_obs {
    uint32_t id;
    uint64_t span_ns;            /* of the window it was followed (first to last sample) */
    uint64_t waited_ns;          /* its wait (sched_client.waited_ns) over span_ns */
    uint64_t net_waited_ns;      /* its stream's network wait (sched_client.net_waited_ns) */
    uint32_t samples;            /* samples in that span, both ends included */
    uint32_t full;               /* of them, with its ring full (ready >= depth) */
    bool failed;                 /* its stream failed: it needs no workers */
};

/* What the controller remembers between decisions. */
struct as_history {
    uint64_t last_change_ns;     /* the last change (or the switch to auto); 0 none */
    int last_step;               /* +1 grew, -1 shrank, 0 neither (a budget cut, a switch) */
    uint32_t floor;              /* no shrink below this ... */
    uint64_t floor_until_ns;     /* ... before then, while a client is attached */
    uint32_t floor_windows;      /* the next floor's length in windows; 0: floor_windows */
};

/* The input of one decision. */
struct as_snapshot {
    uint64_t now_ns;
    uint64_t span_ns;            /* the window covered; 0 while none is complete */
    uint64_t busy_ns;            /* the pool's busy time over span_ns, all workers */
    uint32_t target;             /* the pool's target now */
    uint32_t alive;              /* worker processes running, retiring ones included */
    uint32_t budget;             /* >= 1 */
    uint32_t nclients;
    const struct as_client_obs *clients;
    struct as_history h;
};

struct as_decision {
    uint32_t target;             /* what the pool's target should be */
    enum as_state state;
    char reason[AS_REASON_MAX];  /* one line when target changes, else "" */
    struct as_history h;         /* the history to keep */
};

/* Fills p with the defaults above, for a tick of tick_ns. */
void autoscale_params_default(struct as_params *p, uint64_t tick_ns);

/* The verdict on one client; *share (may be NULL) gets its wait share of
 * the span, 0..1, or -1 when it was followed for too short a time. */
enum as_bound autoscale_classify(const struct as_params *p, const struct as_client_obs *c,
                                 double *share);

/*
 * The decision: a pure function of p and s (no clock, no I/O).  out->target
 * is never above s->budget, never below 1, and differs from s->target by at
 * most one unless the budget fell below it; out->reason names why it
 * changed.  out->h is s->h moved on.
 */
void autoscale_decide(const struct as_params *p, const struct as_snapshot *s,
                      struct as_decision *out);

/* "steady", "growing", ...; "input", "compute", "-"; "?" out of range. */
const char *autoscale_state_name(enum as_state s);
const char *autoscale_bound_name(enum as_bound b);

/* ---- the running controller (autoscale.c) ---- */

#define AS_HIST (AS_WINDOW_MAX + 1)

/* One attached client as the ticks follow it. */
struct as_track {
    uint32_t id;
    uint64_t since;              /* the tick it was first seen */
    uint64_t waited[AS_HIST];    /* its waited_ns at each tick, by tick % AS_HIST */
    uint64_t net_waited[AS_HIST]; /* its net_waited_ns likewise */
    bool full[AS_HIST];          /* its ring full at each tick */
    bool failed;
    enum as_bound bound;         /* the last tick's verdict */
    double share;                /* and its wait share, -1 unknown */
};

struct autoscale {
    enum as_mode mode;
    struct as_params p;
    uv_timer_t timer;
    bool timer_open;
    uint64_t ticks;              /* samples taken */
    uint64_t t[AS_HIST];         /* each sample's clock */
    uint64_t busy[AS_HIST];      /* the pool's busy time so far at each sample */
    struct as_track tracks[2][AS_CLIENTS_MAX]; /* this tick's and the last (double buffer) */
    uint32_t ntracks, cur;       /* tracks[cur][0..ntracks) */
    struct as_client_obs obs[AS_CLIENTS_MAX];  /* the last snapshot's clients */
    struct as_history h;
    enum as_state state;
    uint32_t budget;             /* CPUs the pool may use, >= 1 */
    char budget_source[AS_SOURCE_MAX]; /* "config ...", "cpus ...", "cgroup ..." */
    char reason[AS_REASON_MAX];  /* the last change's, "" before the first */
    uint64_t changes;            /* pool size changes the controller made */
};

/*
 * Reads RINGFEED_AUTOSCALE_TICK_MS (tests shorten the tick with it; the
 * window and cool-downs are counted in ticks) and sets the mode from
 * d->cf.  Returns 0, or -EINVAL with the variable and its range in err.
 * Before pool_start.
 */
int autoscale_init(struct daemon *d, struct rf_err *err);
/* Starts the tick (after pool_start). */
void autoscale_start(struct daemon *d);
/* Closes the tick's timer (the daemon stops). */
void autoscale_stop(struct daemon *d);
/* WORKERS auto (on true) or WORKERS n / workers = N (false): the mode. */
void autoscale_set_auto(struct daemon *d, bool on, const char *why);
/* The clients or cpu-budget changed: the budget again, and a pool over it
 * cut at once (an attach lowers the default budget). */
void autoscale_budget_changed(struct daemon *d);
/* The last verdict on client id: its bound, and *share (-1 unknown). */
enum as_bound autoscale_client(const struct daemon *d, uint32_t id, double *share);
/* The invariants (autoscale.c); aborts on a broken one with RINGFEED_CHECKS. */
void autoscale_check(const struct daemon *d);

#endif
