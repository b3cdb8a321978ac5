/*
 * share.h - decode once for identical streams (share.c, SHARING there):
 * share groups, who joins them and when, and who is split off.
 *
 * share.c owns struct share_member (one in each stream), struct
 * share_group and struct share_state (one in the scheduler's state); the
 * other scheduler modules read them and change them only through the
 * functions below, except the group's place (pos), which plan.c moves as
 * it plans the group's batches, and unstarted, which the fair queue moves
 * as it hands out their jobs (share_started).
 */
#ifndef RINGFEED_DAEMON_SHARE_H
#define RINGFEED_DAEMON_SHARE_H

#include <stdbool.h>
#include <stdint.h>

struct daemon;
struct stream;

/* A stream's part in sharing. */
struct share_member {
    bool can_share;                 /* share=1 and its position fits 64 bits */
    uint64_t start_k;               /* the place of batch 0: start_epoch * bpe + start_seq */
    struct share_group *grp;        /* its group (a group of one when alone), or NULL */
    struct stream *g_next;          /* the next member of grp */
    bool ever_shared;               /* was in a group of 2+: others' jobs may target it */
    uint64_t join_wait_since;       /* waiting for a group to reach its place (ns) */
    bool join_waited;               /* it waited SHARE_HOLD_NS once: no more waits */
    uint64_t hold_w0;               /* its waited time (WAITS) when its group's hold
                                     * began, or when it joined during one (HOLD) */
    uint64_t shared_batches;        /* its batches planned for 2+ rings */
    uint64_t last_release_ns;       /* when its release counter last moved, or
                                     * it attached (STALLED) */
};

/* Streams that are the same function at the same place. */
struct share_group {
    struct share_group *next;       /* on d->sched.share.groups */
    uint32_t id;
    uint32_t refs;                  /* members, and jobs whose grp it is */
    struct stream *members;         /* by g_next, the first planned in its home */
    uint32_t n;                     /* members, 0..WIRE_TARGETS_MAX */
    uint64_t pos;                   /* place of the batch it plans next: every
                                     * member's start_k + next_g (G1) */
    uint64_t unstarted;             /* no job of a batch at or past it was dispatched */
    struct stream *holder;          /* the member holding the others back (HOLD),
                                     * NULL when none */
    uint64_t held_since;            /* when the holder began to (or its window
                                     * began), 0 when no holder */
    bool closed;                    /* made by a split: nobody joins it, and its
                                     * member joins nobody */
};

/* Sharing's state in the scheduler's (scheduler.h). */
struct share_state {
    struct share_group *groups;
    uint32_t next_group_id;
    uint64_t shared_batches;   /* batches planned once for 2+ rings */
    uint64_t shared_writes;    /* rings those batches went to beyond the first */
    uint64_t share_joins, share_splits;
};

/* The place st plans next: start_k + next_g. */
uint64_t share_pos(const struct stream *st);

/* A group of one for st (st->sh.grp); NULL when out of memory. */
struct share_group *share_group_new(struct daemon *d, struct stream *st);
/* Takes st out of its group (the group lives on while a job holds it). */
void share_leave(struct daemon *d, struct stream *st);
/* Lets go of a reference to g (a member's or a job's); frees it with the last. */
void share_unref(struct daemon *d, struct share_group *g);
/* A job of g's batch at place k went to a worker: g's batches up to k have begun. */
void share_started(struct share_group *g, uint64_t k);

/* What share_try_join did. */
enum share_join {
    SHARE_JOIN_NONE,  /* no group to join: plan alone */
    SHARE_JOIN_DONE,  /* joined a group (st->sh.grp) */
    SHARE_JOIN_WAIT,  /* a group comes to st's place soon: plan nothing now */
    SHARE_JOIN_STOP,  /* st failed while catching up */
};
/* st, alone in its group, is about to plan its next place: joins a group
 * of its function, or waits for one (share.c has the rules). */
enum share_join share_try_join(struct daemon *d, struct stream *st);

/* g cannot plan its next batch (a member's ring is full): begins or ends
 * a hold, and splits off the members that hold the others back past the
 * bound (share.c, HOLD). */
void share_check_hold(struct daemon *d, struct share_group *g);

/* Does a group wait on the clock (a hold, a join wait)?  The tick then
 * plans again. */
bool share_waits(const struct daemon *d);

/* G1-G3 (share.c); aborts on a broken one in checking builds. */
void share_check(const struct daemon *d);

/* st's release counter moved (or it attached) at now (share.c STALLED). */
void share_released(struct stream *st, uint64_t now);

#endif
