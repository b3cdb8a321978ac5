/*
 * fairq.h - the scheduler's fair queue (fairq.c): each stream's own queue
 * of jobs, and the deficit round robin over the streams with queued jobs
 * that pool.c's workers take them from (FAIRNESS and WEIGHTS in fairq.c).
 *
 * fairq.c owns struct fq_member (one in each stream) and struct fq_state
 * (one in the scheduler's state); the other scheduler modules read them
 * and walk a queue with fq_first/fq_next, and change them only through
 * the functions below.
 */
#ifndef RINGFEED_DAEMON_FAIRQ_H
#define RINGFEED_DAEMON_FAIRQ_H

#include <stdbool.h>
#include <stdint.h>

struct daemon;
struct job;
struct stream;

/* A stream's place in the fair queue. */
struct fq_member {
    struct job *q_head, *q_tail;    /* queued jobs, the next one first */
    uint32_t nqueued;
    struct stream *rr_prev, *rr_next; /* on the active list; NULL when off it */
    int64_t deficit;                /* work (ns) it may still be handed */
    uint64_t cost_ns;               /* a sample's work: the worker time its jobs
                                     * took per sample, measured (fq_measured);
                                     * the transform's figure until one reports */
    int64_t max_work;               /* the largest job's work charged (Q3) */
    /* WEIGHTS */
    uint32_t weight;                /* 1..CTL_ATTACH_WEIGHT_MAX */
    uint64_t worker_ns;             /* worker time of the jobs it was home of */
    uint64_t win_worker_ns;         /* worker_ns when the share window began */
    bool win_active;                /* had its turn in the window */
    double worker_share, weight_share; /* over the last window; -1 before one */
};

/* The fair queue's state in the scheduler's (scheduler.h). */
struct fq_state {
    struct stream *active;     /* streams with queued jobs, a circular list:
                                * the one whose turn it is, NULL when none */
    uint32_t nactive;          /* streams on that list */
    uint32_t queued;           /* jobs queued, all streams together */
    uint64_t win_start_ns;     /* the share window's start (WEIGHTS) */
};

/* A new stream's member: weight 1.. (WEIGHTS), a sample's work cost_ns
 * (the transform's figure) until its jobs are measured, no share figures
 * yet. */
void fq_member_init(struct fq_member *m, uint32_t weight, uint64_t cost_ns);

/* A job of st's made count samples in busy_ns of worker time: the round
 * robin charges st's next jobs by what its jobs really cost (MEASURED in
 * fairq.c).  A report of no time or no sample changes nothing. */
void fq_measured(struct stream *st, uint64_t busy_ns, uint32_t count);

/* The first job of st's queue, and the one after j in its queue (NULL at
 * the end): for reading and for changing a job's targets in place. */
struct job *fq_first(const struct stream *st);
struct job *fq_next(const struct job *j);

/*
 * Takes out of st's queue every job for which take(j, arg) says true, in
 * order, and appends them to *out_tail (a NULL-terminated list through
 * j->next; the caller owns them from then on).  take may change a job it
 * leaves in the queue, but not its home.
 */
void fq_take_if(struct daemon *d, struct stream *st, bool (*take)(struct job *j, void *arg),
                void *arg, struct job ***out_tail);

/* Ends a share window: each stream's share of the worker time spent in it
 * against its weight's share (WEIGHTS); the scheduler's tick calls it. */
void fq_window(struct daemon *d, uint64_t now);
#define FQ_WINDOW_NS (5000ull * 1000000ull)

/* Q1-Q3 (fairq.c); aborts on a broken one in checking builds. */
void fq_check(const struct daemon *d);

#endif
