/*
 * pack_jobs.h - a packer's per-item work on several threads, the results
 * taken one at a time in item order: `ringfeed-pack imagefolder --jobs N`
 * re-encodes N files at once and still writes sample i from file i.
 *
 * The caller owns a window of slots (an array of its own result structs)
 * and per-thread state (one JPEG re-encoder per thread); pack_jobs owns
 * the threads and says which item goes in which slot on which thread:
 *
 *   items     0 1 2 ... w     ... t        ...  w + window - 1 ... total
 *             done, handed    running or       queued (taken by the next
 *             back            done             free thread, lowest first)
 *
 * Item i runs in slot i % window, and only while the caller has handed
 * back item i - window: so at most window items are in flight (running,
 * done and not yet taken, or held by the caller), whatever the threads'
 * speed, and memory is bounded by the window, not by the total.
 *
 * With one thread no thread is started: pack_jobs_next runs the item in
 * the caller, in a window of one slot, so --jobs 1 is the packer as it was
 * before threads.
 *
 * Stopping: pack_jobs_next returns -1 once pack_stop is set (SIGINT,
 * SIGTERM, SIGHUP), after at most the item the caller waits for has
 * finished; pack_jobs_free then lets every thread finish the item it runs
 * (one item each) and joins them.  The threads block those signals, so
 * they are delivered to the caller's thread, as without threads.
 *
 * Concurrency: one mutex guards the counters and the slots' states.  A
 * thread runs an item without it, writing only that item's slot and its
 * own state; the caller reads a slot only once its state is DONE, and the
 * mutex orders the thread's writes before that.  The run function must not
 * touch what other items or the caller's thread use (pack_warn included:
 * messages belong to the caller, in item order).
 */
#ifndef RINGFEED_TOOLS_PACK_JOBS_H
#define RINGFEED_TOOLS_PACK_JOBS_H

#include <stddef.h>

/* --jobs' largest value: threads at once, each with its own JPEG state. */
#define PACK_JOBS_MAX 1024u
/* Items in flight per thread (the window is threads * this): enough that a
 * slow item at the window's head leaves the other threads work. */
#define PACK_JOBS_WINDOW_PER_THREAD 4u

struct pack_jobs;

/*
 * --jobs' default: cpus_usable() (proto/cpus.h), at most PACK_JOBS_MAX:
 * the CPUs this process may run on (its affinity mask, as nproc(1) counts
 * them), lowered to the tightest cgroup v2 cpu.max quota above it, rounded
 * up, as ringfeedd's worker budget counts them.  A container limited to 4
 * CPUs' time on a 64-CPU host gets 4 threads, not 64 threads throttled.
 */
unsigned pack_jobs_cpus(void);

/* Runs item index in slot (0..window-1) on thread (0..threads-1). */
typedef void pack_job_fn(void *ctx, unsigned thread, size_t slot,
                         size_t index);

struct pack_jobs_opts {
    unsigned threads;         /* 1..PACK_JOBS_MAX */
    size_t total;             /* items 0..total-1 */
    pack_job_fn *run;
    void *ctx;
};

/*
 * The slots the caller must provide for o: 1 for one thread, else
 * threads * PACK_JOBS_WINDOW_PER_THREAD (never more than total, at least 1).
 */
size_t pack_jobs_window(const struct pack_jobs_opts *o);

/*
 * Starts o->threads threads (none for one), which start on the first
 * items at once.  Returns 0 with *out, or a negative errno (-EINVAL for a
 * thread count out of range, -ENOMEM, or pthread_create's error), with
 * nothing started.
 */
int pack_jobs_start(const struct pack_jobs_opts *o, struct pack_jobs **out);

/*
 * Waits until the next item in order (0 first, then each after the one
 * last handed back) is done, and returns its slot, which the caller then
 * holds until pack_jobs_done.  Returns -1 when every item has been taken,
 * or once pack_stop is set.
 */
long pack_jobs_next(struct pack_jobs *j);

/* Hands back the slot pack_jobs_next returned: item index + window may
 * now run in it. */
void pack_jobs_done(struct pack_jobs *j);

/* Stops taking items, waits for those running and joins the threads;
 * the slots are then the caller's again.  Accepts NULL. */
void pack_jobs_free(struct pack_jobs *j);

#endif
