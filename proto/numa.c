/*
 * numa.c - a NUMA node's CPUs and memory, read from sysfs (numa.h).
 */
#include "numa.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpus.h"
#include "fileio.h"

#define NUMA_FILE_MAX (64u << 10) /* sysfs files say 4096 bytes; a test's may be anything */

/*
 * Reads root/name, a list file, into set (nbits bits); an empty file (a
 * newline only) is the empty set.  Returns 0, or a negative errno with err
 * naming the file for node `node`.
 */
static int read_list(const char *root, const char *name, unsigned node, uint64_t *set,
                     unsigned nbits, struct rf_err *err)
{
    char path[4096];
    char *text = NULL;
    size_t len = 0;
    int rc;

    snprintf(path, sizeof(path), "%s/%s", root, name);
    rc = fio_read_file(AT_FDCWD, path, NUMA_FILE_MAX, &text, &len);
    if (rc < 0)
        return rf_err_set(err, rc, "NUMA node %u: cannot read %s: %s", node, path,
                          strerror(-rc));
    while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
        len--;
    if (len == 0)
        memset(set, 0, nbits / 8);
    else if (cpus_parse_list(text, len, set, nbits) < 0)
        rc = rf_err_set(err, -EINVAL, "NUMA node %u: %s does not read as a list of "
                        "numbers 0..%u: \"%.64s\"", node, path, nbits - 1, text);
    free(text);
    return rc;
}

static bool has(const uint64_t *set, unsigned i)
{
    return (set[i / 64] >> (i % 64)) & 1;
}

int numa_node_cpus(const char *root, unsigned node, uint64_t *cpus, unsigned nbits,
                   struct rf_err *err)
{
    uint64_t nodes[NUMA_NODES_MAX / 64], set[CPUS_LIST_BITS_MAX / 64];
    char name[64], list[256];
    int rc;

    if (nbits == 0 || nbits % 64 || nbits > CPUS_LIST_BITS_MAX)
        return rf_err_set(err, -EINVAL, "NUMA node %u: a bitmap of %u CPUs", node, nbits);
    if (node >= NUMA_NODES_MAX)
        return rf_err_set(err, -ENOENT, "NUMA node %u: past the kernel's largest, %u", node,
                          NUMA_NODES_MAX - 1);
    snprintf(name, sizeof(name), "node%u/cpulist", node);
    rc = read_list(root, name, node, set, nbits, err);
    if (rc == -ENOENT) {
        /* which nodes there are, for the message */
        struct rf_err e2;

        if (read_list(root, "online", node, nodes, NUMA_NODES_MAX, &e2) < 0)
            return rf_err_set(err, -ENOENT, "NUMA node %u: this kernel shows no NUMA nodes "
                              "(no %s/online)", node, root);
        if (cpus_format_list(nodes, NUMA_NODES_MAX, list, sizeof(list)) < 0)
            snprintf(list + sizeof(list) - 4, 4, "...");
        return rf_err_set(err, -ENOENT, "NUMA node %u does not exist on this machine "
                          "(its nodes: %s)", node, list[0] ? list : "none");
    }
    if (rc < 0)
        return rc;
    if (cpus_count(set, nbits) == 0)
        return rf_err_set(err, -ENODEV, "NUMA node %u has no CPUs (a memory-only node): "
                          "nothing to run on", node);
    rc = read_list(root, "has_memory", node, nodes, NUMA_NODES_MAX, err);
    if (rc < 0)
        return rc;
    if (!has(nodes, node))
        return rf_err_set(err, -ENODEV, "NUMA node %u has no memory (%s/has_memory: not "
                          "listed): rings cannot be placed on it", node, root);
    memcpy(cpus, set, nbits / 8);
    return 0;
}
