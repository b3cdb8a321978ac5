/*
 * affinity.c - cpu-list and numa-node applied (affinity.h).
 */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "affinity.h"
#include "cpus.h"
#include "numa.h"
#include "strnum.h"

/* linux/mempolicy.h's modes (its header is not needed for two numbers) */
#define AFF_MPOL_DEFAULT 0
#define AFF_MPOL_PREFERRED 1

/* A node mask as set_mempolicy and mbind take it, and its size in bits
 * (the kernel reads maxnode - 1 bits). */
struct node_mask {
    unsigned long bits[NUMA_NODES_MAX / (8 * sizeof(unsigned long))];
};
#define NODE_MASK_MAXNODE (NUMA_NODES_MAX + 1)

static void node_mask_of(int node, struct node_mask *m)
{
    const unsigned w = 8 * sizeof(unsigned long);

    memset(m, 0, sizeof(*m));
    m->bits[(unsigned)node / w] = 1ul << ((unsigned)node % w);
}

bool affinity_none(const uint64_t list[CONF_CPUS_MAX / 64])
{
    for (unsigned i = 0; i < CONF_CPUS_MAX / 64; i++)
        if (list[i])
            return false;
    return true;
}

int affinity_plan(const struct conf *c, const char *sysfs_root, struct affinity_plan *p,
                  struct rf_err *err)
{
    bool listed = !affinity_none(c->cpu_list);
    uint64_t node_cpus[CONF_CPUS_MAX / 64];
    char a[128], b[128];
    int rc;

    memset(p, 0, sizeof(*p));
    p->node = conf_numa_node(c);
    p->listed = listed;
    if (p->node < 0) {
        p->bound = listed;
        memcpy(p->cpus, c->cpu_list, sizeof(p->cpus));
        return 0;
    }
    rc = numa_node_cpus(sysfs_root, (unsigned)p->node, node_cpus, CONF_CPUS_MAX, err);
    if (rc < 0) {
        if (err)
            rf_err_prefix(err, "numa-node = %d", p->node);
        return rc;
    }
    p->bound = true;
    for (unsigned i = 0; i < CONF_CPUS_MAX / 64; i++)
        p->cpus[i] = node_cpus[i] & (listed ? c->cpu_list[i] : ~0ull);
    if (!affinity_none(p->cpus))
        return 0;
    if (cpus_format_list(node_cpus, CONF_CPUS_MAX, a, sizeof(a)) < 0)
        snprintf(a + sizeof(a) - 4, 4, "...");
    if (cpus_format_list(c->cpu_list, CONF_CPUS_MAX, b, sizeof(b)) < 0)
        snprintf(b + sizeof(b) - 4, 4, "...");
    return rf_err_set(err, -EINVAL, "cpu-list = %s and numa-node = %d (CPUs %s) have no CPU in "
                      "common: name CPUs of the node in cpu-list, or drop one key", b, p->node,
                      a);
}

bool affinity_same_cpus(const struct affinity_plan *a, const struct affinity_plan *b)
{
    return a->bound == b->bound && (!a->bound || memcmp(a->cpus, b->cpus, sizeof(a->cpus)) == 0);
}

/* "cpu-list", "numa-node = N" or both: where a plan's CPUs came from. */
static void keys_of(const struct affinity_plan *p, char *buf, size_t cap)
{
    if (p->node < 0)
        snprintf(buf, cap, "cpu-list");
    else
        snprintf(buf, cap, "%snuma-node = %d", p->listed ? "cpu-list and " : "", p->node);
}

/* sched_setaffinity for every thread of this process (the main one and
 * libuv's pool, which a reload would otherwise leave behind).  Returns 0,
 * or the negative errno of the first thread refused for another reason
 * than having ended meanwhile. */
static int set_all_threads(size_t size, const cpu_set_t *set)
{
    DIR *dir = opendir("/proc/self/task");
    struct dirent *e;
    int rc = 0;

    if (!dir)
        return sched_setaffinity(0, size, set) == -1 ? -errno : 0;
    while ((e = readdir(dir)) != NULL) {
        uint64_t tid;

        if (strnum_u64(e->d_name, strlen(e->d_name), &tid) < 0 || tid == 0 || tid > INT32_MAX)
            continue;
        if (sched_setaffinity((pid_t)tid, size, set) == -1 && errno != ESRCH && rc == 0)
            rc = -errno;
    }
    closedir(dir);
    return rc;
}

int affinity_apply(pid_t pid, const struct affinity_plan *p, struct rf_err *err)
{
    cpu_set_t *set = CPU_ALLOC(CONF_CPUS_MAX);
    size_t size = CPU_ALLOC_SIZE(CONF_CPUS_MAX);
    char keys[64];
    int rc = 0;

    keys_of(p, keys, sizeof(keys));
    if (!set)
        return rf_err_set(err, -ENOMEM, "%s: out of memory", keys);
    CPU_ZERO_S(size, set);
    for (unsigned i = 0; i < CONF_CPUS_MAX; i++)
        if (!p->bound || ((p->cpus[i / 64] >> (i % 64)) & 1))
            CPU_SET_S(i, size, set);
    rc = pid == 0 ? set_all_threads(size, set)
                  : sched_setaffinity(pid, size, set) == -1 ? -errno : 0;
    if (rc < 0) {
        char list[128];

        if (cpus_format_list(p->cpus, CONF_CPUS_MAX, list, sizeof(list)) < 0)
            snprintf(list + sizeof(list) - 4, 4, "...");
        rc = rc == -EINVAL
                 ? rf_err_set(err, -EINVAL, "%s: none of its CPUs (%s) is one the daemon may "
                              "use (online, and in its cgroup's cpuset)", keys, list)
                 : rf_err_set(err, rc, "%s: sched_setaffinity: %s", keys, strerror(-rc));
    }
    CPU_FREE(set);
    return rc;
}

int affinity_memory(int node, struct rf_err *err)
{
    struct node_mask m;
    long r;

    if (node < 0) {
        r = syscall(SYS_set_mempolicy, AFF_MPOL_DEFAULT, NULL, 0ul);
    } else {
        node_mask_of(node, &m);
        r = syscall(SYS_set_mempolicy, AFF_MPOL_PREFERRED, m.bits,
                    (unsigned long)NODE_MASK_MAXNODE);
    }
    if (r == -1 && node < 0 && errno == ENOSYS)
        return 0; /* no NUMA in this kernel: every allocation is "default" already */
    if (r == -1)
        return rf_err_set(err, -errno, "numa-node = %d: set_mempolicy: %s%s", node,
                          strerror(errno),
                          errno == EINVAL  ? " (the node is outside this cgroup's cpuset.mems)"
                          : errno == EPERM ? " (a seccomp filter forbids it: a container "
                                             "needs CAP_SYS_NICE for memory policies)"
                          : errno == ENOSYS ? " (this kernel has no NUMA support)"
                                            : "");
    return 0;
}

int affinity_place(void *mem, size_t len, int node)
{
    struct node_mask m;

    if (node < 0)
        return 0;
    node_mask_of(node, &m);
    if (syscall(SYS_mbind, mem, (unsigned long)len, AFF_MPOL_PREFERRED, m.bits,
                (unsigned long)NODE_MASK_MAXNODE, 0u) == -1)
        return -errno;
    return 0;
}
