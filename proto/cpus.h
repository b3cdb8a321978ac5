/*
 * cpus.h - how many CPUs this process may use: the CPUs its affinity mask
 * allows, lowered to the tightest cgroup v2 cpu.max quota on the way from
 * its cgroup up to the root (a container's or a systemd unit's CPUQuota=),
 * rounded up.  ringfeedd's worker budget (daemon/autoscale.c) and
 * ringfeed-pack's default --jobs take their figure from here, so both
 * count a container's quota the same way.
 *
 * cgroup v1 hierarchies are not read (Debian 12 and systemd 252 mount v2
 * only): there, and where no file is readable or no quota is set, the
 * quota is 0, "none".  The parsers are pure functions over buffers
 * (fuzzed: tests/fuzz/fuzz_cpus.c); the readers read /proc/self/cgroup and
 * the cpu.max files below CPUS_CGROUP_ROOT.
 *
 * A CPU list ("0-15,32-47", as taskset -c takes it and the kernel's
 * cpulist files write it) is read and written here too, once for both of
 * its readers: ringfeedd.conf's cpu-list (conf.c) and a NUMA node's CPUs
 * (numa.c).  A set of CPUs is a bitmap of uint64_t words, CPU i bit i % 64
 * of word i / 64.
 */
#ifndef RINGFEED_PROTO_CPUS_H
#define RINGFEED_PROTO_CPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CPUS_CGROUP_ROOT "/sys/fs/cgroup"
#define CPUS_LIST_BITS_MAX 4096 /* the largest bitmap the list functions take */

/*
 * A CPU list buf[0..len): comma-separated CPU numbers and ranges A-B
 * (A <= B), blanks (space, tab) around each number allowed, every number
 * below nbits (a multiple of 64, at most CPUS_LIST_BITS_MAX).  Returns 0
 * with set (nbits / 64 words) replaced by those CPUs; -EINVAL for anything
 * else (an empty list or item, a number too large, A > B), set unchanged.
 */
int cpus_parse_list(const char *buf, size_t len, uint64_t *set, unsigned nbits);

/*
 * Writes set (nbits bits) as the shortest list cpus_parse_list reads back
 * to the same set ("0-15,32-47"; "" for an empty set) into buf, cap bytes
 * with the NUL (cap > 0).  Returns its length, or -ENOSPC when it does not
 * fit (buf then holds a cut list, NUL-terminated).
 */
int cpus_format_list(const uint64_t *set, unsigned nbits, char *buf, size_t cap);

/* The number of CPUs in set (nbits bits). */
unsigned cpus_count(const uint64_t *set, unsigned nbits);

/*
 * /proc/self/cgroup's text: the cgroup v2 path (the "0::PATH" line) into
 * path (cap bytes).  Returns 0, or -ENOENT without such a line (cgroup v1
 * only), -ENAMETOOLONG when it does not fit.
 */
int cpus_parse_cgroup(const char *buf, size_t len, char *path, size_t cap);

/*
 * A cpu.max file's text ("max 100000" or "150000 100000").  Returns 0 with
 * *quota 0 for no quota ("max") or the quota and *period in microseconds;
 * -EINVAL for anything else (a zero period included).
 */
int cpus_parse_cpu_max(const char *buf, size_t len, uint64_t *quota, uint64_t *period);

/*
 * A cgroup path (NUL-terminated, in dir) cut to its parent's: "/a/b" ->
 * "/a", "/a" -> "/", "/a/" -> "/a".  Returns false at the root or for a
 * path without a slash (dir unchanged): the walk up a hierarchy is done.
 * Shared by the quota walk here and memlimit.c's.
 */
bool cpus_cgroup_parent(char *dir);

/* The CPUs this process may run on (sched_getaffinity, as nproc(1) counts
 * them; the online CPUs if that fails), at least 1. */
uint32_t cpus_affinity(void);

/*
 * The tightest cpu.max quota of the cgroup at path (a cgroup v2 path, "/"
 * for the root) and each of its parents up to the root, under the
 * hierarchy mounted at root, in CPUs rounded up (a quota of 1.5 CPUs gives
 * 2); 0 when none is set or readable.  where (cap bytes, may be 0) names
 * the file and its figures: "cpu.max 150000 100000 in /sys/fs/cgroup/x/cpu.max".
 */
uint32_t cpus_quota_at(const char *root, const char *path, char *where, size_t cap);

/* cpus_quota_at for this process's own cgroup under CPUS_CGROUP_ROOT. */
uint32_t cpus_quota(char *where, size_t cap);

/* min(cpus_affinity(), cpus_quota()) (the quota only where set). */
uint32_t cpus_usable(void);

#endif
