/*
 * numa.h - a NUMA node as the kernel shows it under /sys/devices/system/node:
 * whether it exists, its CPUs (nodeN/cpulist) and whether it has memory
 * (the has_memory list).  ringfeedd's numa-node key (daemon/affinity.h)
 * and --check-config read a node through here; the lists are read with
 * cpus.h's parser.  The root is a parameter so that tests can lay out a
 * machine of their own in a temporary folder.
 */
#ifndef RINGFEED_PROTO_NUMA_H
#define RINGFEED_PROTO_NUMA_H

#include <stdint.h>

#include "err.h"

#define NUMA_SYSFS_ROOT "/sys/devices/system/node"
#define NUMA_NODES_MAX 1024 /* nodes 0..1023: the kernel's MAX_NUMNODES at most */

/*
 * Node `node` of the machine whose node folder is root (NUMA_SYSFS_ROOT):
 * its CPUs into cpus (nbits bits, a multiple of 64; cpus.h's bitmap).
 * Returns 0; -ENOENT when the node does not exist (err lists the online
 * nodes, or says the kernel shows none); -ENODEV when it has no CPU or no
 * memory; -EINVAL when a file does not read as a list (err names it, and
 * the largest CPU nbits allows); another negative errno when a file cannot
 * be read.  Every message starts "NUMA node N".  cpus is written on
 * success only.
 */
int numa_node_cpus(const char *root, unsigned node, uint64_t *cpus, unsigned nbits,
                   struct rf_err *err);

#endif
