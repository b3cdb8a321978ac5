/*
 * affinity.h - cpu-list and numa-node (ringfeedd.conf): the CPUs the daemon
 * and its workers run on, and the NUMA node their memory and the rings
 * come from.
 *
 * CPUs.  The set is cpu-list's, the node's (the kernel's nodeN/cpulist), or,
 * with both keys, the CPUs in both; both keys with no CPU in common are
 * refused rather than one key winning: an operator who names both means
 * both, and a slip in either would otherwise move the daemon off its node
 * without a word.  The main process is bound with sched_setaffinity at
 * start, before any worker or thread starts (they inherit it); a reload
 * applies a new set to every thread of the main process and to every
 * worker.
 *
 * Memory.  numa-node sets the policy MPOL_PREFERRED for the node, not
 * MPOL_BIND: a node that fills up spills a ring's pages to the next node
 * (slower to read across the interconnect) where BIND would have the
 * kernel OOM-kill a process on a page fault -- a trainer or a worker dying
 * is worse than a slower batch.  The policy is set with set_mempolicy(2)
 * on the main thread at start, before libuv's thread pool and any worker
 * start: threads inherit it, and a worker keeps it across fork and exec.
 * A memory policy is the thread's own: no other process can change a
 * running worker's, and the thread pool keeps the one it started with.
 * So a reload that changes the node restarts the workers (pool_roll: new
 * ones inherit the new policy, streams go on byte for byte), and each
 * ring is placed by itself: ring_make_run sets its thread's policy to the
 * node the ring was asked for (affinity_memory) and mbind()s the ring's
 * mapping (affinity_place), a policy of the memfd's own that holds in
 * every process that maps it, whoever faults a page first.  Pages already
 * faulted stay where they are: a reload moves no memory, and a ring made
 * before it keeps its node until its client detaches.
 *
 * No libnuma: the two system calls are made directly.
 */
#ifndef RINGFEED_DAEMON_AFFINITY_H
#define RINGFEED_DAEMON_AFFINITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf.h"
#include "err.h"

/* Where a config puts the daemon: affinity_plan's answer. */
struct affinity_plan {
    bool bound;                        /* false: neither key, every CPU */
    bool listed;                       /* cpu-list is set (for messages) */
    uint64_t cpus[CONF_CPUS_MAX / 64]; /* when bound: the CPUs, bit i CPU i */
    int node;                          /* numa-node, -1 none */
};

/* True when the list names no CPU (cpu-list not set). */
bool affinity_none(const uint64_t list[CONF_CPUS_MAX / 64]);

/*
 * The CPUs and node config c asks for, the node read from sysfs_root
 * (NUMA_SYSFS_ROOT; numa.h).  Returns 0 with *p filled; or a negative
 * errno with err starting "numa-node = N: " (a node that does not exist,
 * or has no CPU or no memory; numa.h) or naming both keys (no CPU in
 * common).  Reads files only: changes nothing.
 */
int affinity_plan(const struct conf *c, const char *sysfs_root, struct affinity_plan *p,
                  struct rf_err *err);

/* Two plans that bind the same CPUs (or both none) / take the same node. */
bool affinity_same_cpus(const struct affinity_plan *a, const struct affinity_plan *b);

/*
 * Binds process pid (0: every thread of this one) to the plan's CPUs, or to every CPU
 * when it binds none.  Returns 0; or -EINVAL when none of them is one the
 * process may use (offline, or outside its cgroup's cpuset), or another
 * negative errno, err naming the key(s) the set came from.
 */
int affinity_apply(pid_t pid, const struct affinity_plan *p, struct rf_err *err);

/*
 * Sets this thread's memory policy: preferred node `node`, or the
 * default (local allocation) for -1.  Returns 0, or a negative errno with
 * err naming numa-node (-EINVAL: the node is outside the cgroup's
 * cpuset.mems; -EPERM: a seccomp filter forbids it, as container runtimes'
 * default one does without CAP_SYS_NICE; -ENOSYS: a kernel without NUMA).
 */
int affinity_memory(int node, struct rf_err *err);

/*
 * Gives the mapping [mem, mem + len) (page-aligned; a memfd's) the
 * preferred node `node` (-1: nothing done).  Returns 0, or the negative
 * errno of mbind(2).
 */
int affinity_place(void *mem, size_t len, int node);

#endif
