/*
 * fairq.c - the scheduler's fair queue: each stream's jobs wait in its own
 * queue, in order, and pool.c's workers take them through sched_dequeue,
 * which takes turns between the streams.
 *
 * FAIRNESS: deficit round robin over the streams, by work.
 *
 * A client must not keep the workers from the others: one that attaches
 * with a deep ring of large batches queues seconds of work at once, and
 * one that re-attaches queues it again each time.  So every stream has its
 * own queue, and the streams with queued jobs stand on a circular list
 * (d->sched.fq.active points at the one whose turn it is).  A job's work is
 * count * the stream's cost per sample (MEASURED below).  sched_dequeue:
 *
 *   - hands out the first job of the stream whose turn it is while that
 *     stream's deficit is above 0, and charges it the job's work (so the
 *     deficit goes below 0 by less than one job's work at most);
 *   - a stream at 0 or below has had its turn: it is given
 *     SCHED_QUANTUM_NS for its next one, and the turn moves on;
 *   - a stream whose queue empties leaves the list, giving up its credit
 *     but keeping its debt (a stream that queues one big job at a time
 *     pays for each all the same); one that joins goes last in the round,
 *     with a quantum added.
 *
 * WEIGHTS: a stream's quantum is SCHED_QUANTUM_NS times its weight (the
 * ATTACH's weight=, else the config's rule for its name or uid, else 1;
 * lowered to the most the config allows the client, stream.c's
 * grant_weight: a client cannot give itself the workers), so while streams wait for the workers each gets work in proportion to
 * its weight; a shared batch (SHARING) is charged to its home, the member
 * that planned it, at the home's weight.  Worker time (the worker's CPU
 * time in the job, so a worker waiting for a core charges nobody) is
 * credited the same way (sched_job_done), and STATS shows, per client, its share of the
 * worker time over the last SHARE_WINDOW_NS against its weight's share of
 * the streams that had a turn in that window.
 *
 * So while others wait, a stream is handed at most its quantum plus one
 * job's work a round, and streams with queued jobs share the workers
 * equally by work whatever their depth, batch or job size; a stream with
 * the workers to itself gets them all.  The quantum is one well-sized job
 * (scheduler.h).  Round robin rather than fair queueing by virtual finish
 * times (a heap) because a dequeue is O(1): one step, plus one visit
 * without a job for each quantum of a stream's debt, i.e. amortized at
 * most one such visit per quantum of work handed out.  It is not a scan of
 * the streams.  A job run again after its worker died goes to the front of
 * its own stream's queue: next for that stream, but no other stream's turn
 * is taken.
 *
 * The queues' invariants (sched_check):
 *   Q1. queued is the sum of the streams' nqueued, and a stream's queue
 *       holds nqueued jobs, all its own, none with a worker;
 *   Q2. a stream is on the active list iff it has queued jobs; nactive
 *       counts the list; a failed or detached stream has none;
 *   Q3. -max_work < deficit <= quantum (SCHED_QUANTUM_NS * weight), where
 *       max_work is the largest job's work charged to the stream, and
 *       deficit <= 0 off the list.
 *
 * MEASURED: a job's work is what the stream's jobs really cost.  A
 * transform's cost_ns is a figure for a typical sample (a 224-pixel crop of
 * an ImageNet-sized photo); a dataset of 20-megapixel photos costs many
 * times that, and charged by the figure its stream would be handed many
 * times its share of the workers' time (a cheap stream beside it fell to a
 * tenth of its solo rate).  So each DONE reports the worker's CPU time in
 * the job (pool.c) and fq_measured moves the stream's cost per sample a
 * quarter of the way (FQ_COST_EWMA) to what the job took, bounded to
 * FQ_COST_SPAN times either side of the transform's figure.  The round
 * robin then charges by it, and pool.c holds back a worker's next job
 * while the jobs it holds are worth WORKER_AHEAD_NS by it.  Jobs are still
 * cut by the transform's figure (plan.c), so a batch's jobs, and what they
 * make, do not depend on timing.
 */
#define FQ_COST_EWMA 4
#define FQ_COST_SPAN 4096
#include <stdlib.h>

#include "config.h"
#include "daemon.h"
#include "log.h"
#include "stream.h"

static int64_t job_work(const struct job *j)
{
    return (int64_t)j->count * (int64_t)j->st->fq.cost_ns;
}

int64_t sched_job_work(const struct job *j)
{
    return job_work(j);
}

static int64_t quantum(const struct stream *st)
{
    return (int64_t)SCHED_QUANTUM_NS * st->fq.weight;
}

/* Puts st on the active list, last in the round (just before the stream
 * whose turn it is), with a quantum for its turn. */
static void active_join(struct daemon *d, struct stream *st)
{
    struct stream *turn = d->sched.fq.active;

    if (turn) {
        st->fq.rr_next = turn;
        st->fq.rr_prev = turn->fq.rr_prev;
        turn->fq.rr_prev->fq.rr_next = st;
        turn->fq.rr_prev = st;
    } else {
        st->fq.rr_next = st->fq.rr_prev = st;
        d->sched.fq.active = st;
    }
    d->sched.fq.nactive++;
    st->fq.deficit += quantum(st);
}

/* Takes st off the active list (its queue is empty); the turn, if it was
 * st's, passes to the next stream.  Credit is given up, debt kept. */
static void active_leave(struct daemon *d, struct stream *st)
{
    if (st->fq.rr_next == st) {
        d->sched.fq.active = NULL;
    } else {
        st->fq.rr_prev->fq.rr_next = st->fq.rr_next;
        st->fq.rr_next->fq.rr_prev = st->fq.rr_prev;
        if (d->sched.fq.active == st)
            d->sched.fq.active = st->fq.rr_next;
    }
    st->fq.rr_next = st->fq.rr_prev = NULL;
    d->sched.fq.nactive--;
    if (st->fq.deficit > 0)
        st->fq.deficit = 0;
}

void sched_enqueue(struct daemon *d, struct job *j, bool front)
{
    struct stream *st = j->st;

    j->worker = -1;
    if (front) {
        j->next = st->fq.q_head;
        st->fq.q_head = j;
        if (!st->fq.q_tail)
            st->fq.q_tail = j;
    } else {
        j->next = NULL;
        if (st->fq.q_tail)
            st->fq.q_tail->next = j;
        else
            st->fq.q_head = j;
        st->fq.q_tail = j;
    }
    if (st->fq.nqueued++ == 0)
        active_join(d, st);
    d->sched.fq.queued++;
}

struct job *sched_dequeue(struct daemon *d)
{
    struct stream *st;
    struct job *j;

    /* a stream at 0 or below has had its turn: credit for the next one,
     * and the turn moves on (ends: every visit adds a quantum) */
    while ((st = d->sched.fq.active) && st->fq.deficit <= 0) {
        st->fq.deficit += quantum(st);
        d->sched.fq.active = st->fq.rr_next;
    }
    if (!st)
        return NULL;
    st->fq.win_active = true;
    j = st->fq.q_head;
    st->fq.q_head = j->next;
    if (!st->fq.q_head)
        st->fq.q_tail = NULL;
    j->next = NULL;
    st->fq.deficit -= job_work(j);
    if (job_work(j) > st->fq.max_work)
        st->fq.max_work = job_work(j);
    st->fq.nqueued--;
    d->sched.fq.queued--;
    if (st->fq.nqueued == 0)
        active_leave(d, st);
    if (j->grp)
        share_started(j->grp, j->k); /* its batch has begun (SHARING) */
    sched_check(d);
    return j;
}

void fq_member_init(struct fq_member *m, uint32_t weight, uint64_t cost_ns)
{
    *m = (struct fq_member){ .weight = weight, .cost_ns = cost_ns ? cost_ns : 1,
                             .worker_share = -1, .weight_share = -1 };
}

void fq_measured(struct stream *st, uint64_t busy_ns, uint32_t count)
{
    uint64_t per, lo = st->cost_ns / FQ_COST_SPAN, hi = st->cost_ns * FQ_COST_SPAN;

    if (!busy_ns || !count)
        return;
    per = busy_ns / count;
    per = per < lo ? lo : per > hi ? hi : per;
    if (per < 1)
        per = 1;
    st->fq.cost_ns = (st->fq.cost_ns * (FQ_COST_EWMA - 1) + per) / FQ_COST_EWMA;
    if (st->fq.cost_ns < 1)
        st->fq.cost_ns = 1;
}

struct job *fq_first(const struct stream *st)
{
    return st->fq.q_head;
}

struct job *fq_next(const struct job *j)
{
    return j->next;
}

void fq_take_if(struct daemon *d, struct stream *st, bool (*take)(struct job *j, void *arg),
                void *arg, struct job ***out_tail)
{
    struct job **pp = &st->fq.q_head, *last = NULL;
    uint32_t before = st->fq.nqueued;

    while (*pp) {
        struct job *j = *pp;

        if (!take(j, arg)) {
            last = j;
            pp = &j->next;
            continue;
        }
        *pp = j->next;
        st->fq.nqueued--;
        d->sched.fq.queued--;
        j->next = NULL;
        **out_tail = j;
        *out_tail = &j->next;
    }
    st->fq.q_tail = last;
    if (before && st->fq.nqueued == 0)
        active_leave(d, st);
}

/* Ends a share window (WEIGHTS): each stream's share of the worker time
 * spent in it, against its weight's share of the streams that had a turn. */
void fq_window(struct daemon *d, uint64_t now)
{
    uint64_t total = 0, weights = 0;

    for (struct stream *st = d->sched.streams; st; st = st->next) {
        total += st->fq.worker_ns - st->fq.win_worker_ns;
        if (st->fq.win_active)
            weights += st->fq.weight;
    }
    for (struct stream *st = d->sched.streams; st; st = st->next) {
        struct fq_member *m = &st->fq;

        m->worker_share = total ? (double)(m->worker_ns - m->win_worker_ns) / (double)total : 0;
        m->weight_share = m->win_active && weights ? (double)m->weight / (double)weights : 0;
        m->win_worker_ns = m->worker_ns;
        m->win_active = m->nqueued > 0;
    }
    d->sched.fq.win_start_ns = now;
}

void fq_check(const struct daemon *d)
{
#if RINGFEED_CHECKS
    uint32_t queued = 0, with_jobs = 0, on_list = 0;
    const struct stream *turn = d->sched.fq.active;

#define CHECK_FAIL(...) do { log_error("sched_check: " __VA_ARGS__); abort(); } while (0)
    for (const struct stream *st = d->sched.streams; st; st = st->next) {
        const struct job *last = NULL;
        uint32_t n = 0;

        for (const struct job *j = st->fq.q_head; j; j = j->next) {   /* Q1 */
            if (j->st != st)
                CHECK_FAIL("client %u's queue holds job %llu of another stream", st->id,
                           (unsigned long long)j->job_id);
            if (j->worker != -1)
                CHECK_FAIL("queued job %llu has a worker", (unsigned long long)j->job_id);
            last = j;
            n++;
        }
        if (n != st->fq.nqueued || last != st->fq.q_tail)
            CHECK_FAIL("client %u's queue holds %u jobs, its counter says %u%s", st->id, n,
                       st->fq.nqueued,
                       last != st->fq.q_tail ? ", and its tail is not the last" : "");
        if (n && stream_ended(st))
            CHECK_FAIL("client %u has %u jobs queued after its end", st->id, n);
        if ((st->fq.rr_next != NULL) != (n > 0))                      /* Q2 */
            CHECK_FAIL("client %u has %u jobs queued and is %s the active list", st->id, n,
                       st->fq.rr_next ? "on" : "off");
        if ((st->fq.deficit < 0 && st->fq.deficit <= -st->fq.max_work) ||  /* Q3 */
            st->fq.deficit > (st->fq.rr_next ? quantum(st) : 0))
            CHECK_FAIL("client %u's deficit %lld is out of bounds (%s the active list)",
                       st->id, (long long)st->fq.deficit, st->fq.rr_next ? "on" : "off");
        queued += n;
        with_jobs += n > 0;
    }
    if (queued != d->sched.fq.queued)
        CHECK_FAIL("queues hold %u jobs, counter says %u", queued, d->sched.fq.queued);
    if (turn) {
        const struct stream *st = turn;

        do {
            if (!st->fq.rr_next || st->fq.rr_next->fq.rr_prev != st)
                CHECK_FAIL("client %u's links on the active list are broken", st->id);
            if (st->dead || st->fq.nqueued == 0)
                CHECK_FAIL("client %u is on the active list %s", st->id,
                           st->dead ? "after its detach" : "with no job queued");
            on_list++;
            st = st->fq.rr_next;
        } while (st != turn && on_list <= d->sched.nstreams);
    }
    if (on_list != with_jobs || on_list != d->sched.fq.nactive)
        CHECK_FAIL("the active list holds %u streams, %u have jobs queued, nactive says %u",
                   on_list, with_jobs, d->sched.fq.nactive);
#undef CHECK_FAIL
#else
    (void)d;
#endif
}
