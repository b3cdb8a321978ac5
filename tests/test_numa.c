/*
 * test_numa.c - proto/numa.c: a NUMA node read from a machine laid out
 * here in a temporary folder as the kernel lays out /sys/devices/system/
 * node: a node with CPUs and memory, one that does not exist (the message
 * lists the nodes there are), a memory-only node, a CPU-only node, a
 * cpulist that does not read, and a kernel that shows no nodes at all;
 * then this machine's node 0 against sched_getaffinity where it has one.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpus.h"
#include "numa.h"
#include "tap.h"

/* root/rel holding text; every folder on the way made. */
static void put(const char *root, const char *rel, const char *text)
{
    char p[512];
    FILE *f;

    snprintf(p, sizeof(p), "%s/%s", root, rel);
    for (char *s = p + strlen(root) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            tap_bail("mkdir %s", p);
        *s = '/';
    }
    f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        tap_bail("write %s", p);
}

static void test_layout(void)
{
    char root[] = "/tmp/ringfeed-numa-XXXXXX", cmd[600];
    uint64_t cpus[16];
    struct rf_err e;

    if (!mkdtemp(root))
        tap_bail("mkdtemp");
    /* node 0: CPUs 0-3 and 8; node 1: CPUs 4-7, no memory; node 2: memory
     * only; node 3's cpulist garbled */
    put(root, "online", "0-3\n");
    put(root, "has_memory", "0,2-3\n");
    put(root, "node0/cpulist", "0-3,8\n");
    put(root, "node1/cpulist", "4-7\n");
    put(root, "node2/cpulist", "\n");
    put(root, "node3/cpulist", "0-3 zero\n");

    memset(cpus, 0xee, sizeof(cpus));
    TAP_IS_INT(numa_node_cpus(root, 0, cpus, 1024, &e), 0, "node 0 is there");
    TAP_OK(cpus[0] == 0x10f && cpus[1] == 0 && cpus[15] == 0, "  CPUs 0-3 and 8, nothing else");

    memset(cpus, 0xee, sizeof(cpus));
    TAP_IS_INT(numa_node_cpus(root, 7, cpus, 1024, &e), -ENOENT, "node 7 does not exist");
    TAP_OK(strstr(e.msg, "NUMA node 7 does not exist") && strstr(e.msg, "its nodes: 0-3"),
           "  the message names the node and the nodes there are");
    tap_diag("  %s", e.msg);
    TAP_OK(cpus[0] == 0xeeeeeeeeeeeeeeeeull, "  cpus untouched");

    TAP_IS_INT(numa_node_cpus(root, 1, cpus, 1024, &e), -ENODEV, "node 1 has no memory");
    TAP_OK(strstr(e.msg, "NUMA node 1 has no memory") != NULL, "  said so");
    TAP_IS_INT(numa_node_cpus(root, 2, cpus, 1024, &e), -ENODEV, "node 2 has no CPUs");
    TAP_OK(strstr(e.msg, "NUMA node 2 has no CPUs") != NULL, "  said so");
    TAP_IS_INT(numa_node_cpus(root, 3, cpus, 1024, &e), -EINVAL, "node 3's cpulist is garbled");
    TAP_OK(strstr(e.msg, "node3/cpulist") && strstr(e.msg, "0-3 zero"),
           "  the message names the file and its text");
    TAP_IS_INT(numa_node_cpus(root, 1024, cpus, 1024, &e), -ENOENT, "node 1024: past the largest");
    TAP_IS_INT(numa_node_cpus(root, 0, cpus, 100, &e), -EINVAL, "a bitmap not of whole words");

    put(root, "node0/cpulist", "0-3,1100\n");
    TAP_IS_INT(numa_node_cpus(root, 0, cpus, 1024, &e), -EINVAL,
               "a CPU past the bitmap is a refusal, not a CPU dropped");
    TAP_OK(strstr(e.msg, "0..1023") != NULL, "  the message says the range");

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        tap_bail("rm -rf %s", root);

    /* a kernel without NUMA: no node folder at all */
    TAP_IS_INT(numa_node_cpus(root, 0, cpus, 1024, &e), -ENOENT, "no node folder");
    TAP_OK(strstr(e.msg, "this kernel shows no NUMA nodes") != NULL, "  said so");
}

/* This machine's node 0, where it shows one: its CPUs include some this
 * process may run on (a test run is not bound off node 0 here). */
static void test_machine(void)
{
    uint64_t cpus[16];
    struct rf_err e;
    struct stat st;
    cpu_set_t set;
    unsigned both = 0;

    if (stat(NUMA_SYSFS_ROOT "/node0", &st) != 0) {
        tap_ok(1, "# SKIP this machine shows no NUMA node 0");
        return;
    }
    TAP_IS_INT(numa_node_cpus(NUMA_SYSFS_ROOT, 0, cpus, 1024, &e), 0, "this machine's node 0");
    TAP_OK(cpus_count(cpus, 1024) >= 1, "  has CPUs");
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        for (unsigned i = 0; i < CPU_SETSIZE && i < 1024; i++)
            both += CPU_ISSET(i, &set) && ((cpus[i / 64] >> (i % 64)) & 1);
    tap_diag("  node 0 and this process share %u CPU(s)", both);
}

int main(void)
{
    test_layout();
    test_machine();
    return tap_done();
}
