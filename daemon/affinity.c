/*
 * affinity.c - cpu-list applied (affinity.h).
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "affinity.h"

bool affinity_none(const uint64_t list[CONF_CPUS_MAX / 64])
{
    for (unsigned i = 0; i < CONF_CPUS_MAX / 64; i++)
        if (list[i])
            return false;
    return true;
}

int affinity_apply(pid_t pid, const uint64_t list[CONF_CPUS_MAX / 64], struct rf_err *err)
{
    cpu_set_t *set = CPU_ALLOC(CONF_CPUS_MAX);
    size_t size = CPU_ALLOC_SIZE(CONF_CPUS_MAX);
    int rc = 0;

    if (!set)
        return rf_err_set(err, -ENOMEM, "cpu-list: out of memory");
    CPU_ZERO_S(size, set);
    for (unsigned i = 0; i < CONF_CPUS_MAX; i++)
        if ((list[i / 64] >> (i % 64)) & 1)
            CPU_SET_S(i, size, set);
    if (sched_setaffinity(pid, size, set) == -1)
        rc = errno == EINVAL
                 ? rf_err_set(err, -EINVAL, "cpu-list: none of its CPUs is one the daemon may "
                              "use (online, and in its cgroup's cpuset)")
                 : rf_err_set(err, -errno, "cpu-list: sched_setaffinity: %s", strerror(errno));
    CPU_FREE(set);
    return rc;
}
