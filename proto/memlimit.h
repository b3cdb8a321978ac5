/*
 * memlimit.h - how much memory this process may use: the machine's RAM,
 * lowered to the tightest cgroup memory limit on the way from its cgroup
 * up to the root (a container's or a systemd unit's MemoryMax=):
 *   - cgroup v2: memory.max, and memory.high (above it the kernel throttles
 *     and reclaims, which is where page-cache reads start to thrash);
 *   - cgroup v1 (the memory controller's own hierarchy, as Docker on an
 *     older host, or a hybrid systemd mounts it): memory.limit_in_bytes.
 * ringfeedd's read backend (daemon/worker/io.c: mmap only while the
 * datasets fit in a quarter of it) and its default memory budget (a
 * quarter) take their figure from here, so a daemon under a 256 MiB limit
 * no longer maps 1.2 GB of shards because the host has 24 GiB.
 *
 * The parsers are pure functions over buffers (fuzzed:
 * tests/fuzz/fuzz_memlimit.c); the readers read /proc/self/cgroup and the
 * limit files below MEMLIMIT_CGROUP_ROOT.
 */
#ifndef RINGFEED_PROTO_MEMLIMIT_H
#define RINGFEED_PROTO_MEMLIMIT_H

#include <stddef.h>
#include <stdint.h>

#define MEMLIMIT_CGROUP_ROOT "/sys/fs/cgroup"

/*
 * A limit file's text: "max" (v2's none) or a byte count, one line.
 * Returns 0 with *bytes (0 for none: "max", or a v1 count of 2^62 or more,
 * its "unlimited"), or -EINVAL for anything else.
 */
int memlimit_parse(const char *buf, size_t len, uint64_t *bytes);

/*
 * /proc/self/cgroup's text: the path of the cgroup v1 hierarchy whose
 * controllers include "memory" (a line "N:...,memory,...:PATH") into path
 * (cap bytes).  Returns 0, -ENOENT without such a line, -ENAMETOOLONG when
 * it does not fit.
 */
int memlimit_parse_v1_path(const char *buf, size_t len, char *path, size_t cap);

/*
 * The tightest limit among the files named (a NULL-ended list, e.g.
 * {"memory.max", "memory.high", NULL}) in the cgroup at path and each of
 * its parents up to the root of the hierarchy mounted at root; 0 when none
 * is set or readable.  where (cap bytes, may be 0) names the file and the
 * figure: "memory.max 268435456 in /sys/fs/cgroup/x/memory.max".
 */
uint64_t memlimit_at(const char *root, const char *path, const char *const *files,
                     char *where, size_t cap);

/* The machine's RAM in bytes (0 if unknown). */
uint64_t memlimit_ram(void);

/*
 * min(the RAM, this process's v2 and v1 limits) (the limits only where
 * set); where (cap bytes, may be 0) says what set it: "RAM" or the file as
 * memlimit_at names it.
 */
uint64_t memlimit_usable(char *where, size_t cap);

#endif
