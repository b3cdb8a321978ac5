/*
 * plan.h - planning and completion (plan.c): batches cut into jobs, the
 * jobs' lives (targets, re-runs, completion), and the count of published
 * batches.  plan.c changes a stream's next_g, published and slot_*
 * (stream.h) and a group's place; jobs are its own.
 */
#ifndef RINGFEED_DAEMON_PLAN_H
#define RINGFEED_DAEMON_PLAN_H

#include <stdint.h>

struct daemon;
struct job;
struct share_group;
struct stream;

/*
 * Plans the next batch of the n streams m[] (one stream, or a group's
 * members, all at the same place): writes each one's slot header (ring.h
 * M2), queues the batch's jobs in m[0]'s queue, each naming every ring,
 * and advances every next_g (and grp's place).  Returns 0, -EOVERFLOW (past
 * the last epoch), -EINVAL (no sampler) or -ENOMEM; nothing is planned
 * then.
 */
int plan_batch(struct daemon *d, struct stream *const *m, uint32_t n, struct share_group *grp);
/* What a plan that failed with rc means for the streams m[]. */
void plan_failed(struct daemon *d, struct stream *const *m, uint32_t n, int rc);
/* Plans every batch the stream's ring (its group's rings) has room for. */
void plan_fill_stream(struct daemon *d, struct stream *st);
/* Counts, in order, the batches whose slot says they are published. */
void plan_advance_published(struct daemon *d, struct stream *st);

/* Frees a job: each target stream lets go of it (a detached one is freed
 * with its last job), and so does its group. */
void plan_job_free(struct daemon *d, struct job *j);
/* Takes target i out of j (its stream lets go of the job); the home is
 * then the new t[0]. */
void plan_job_untarget(struct job *j, uint32_t i);
/* Takes st out of every queued job that would write its ring. */
void plan_untarget_queued(struct daemon *d, struct stream *st);
/* The parked jobs (PARKED in plan.c) whose shards are back go to their
 * queues; those that cannot have them fail their streams (sched_fill). */
void plan_parked(struct daemon *d);

#endif
