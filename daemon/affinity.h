/*
 * affinity.h - cpu-list (ringfeedd.conf): the CPUs the daemon and its
 * workers run on, applied with sched_setaffinity.  Workers inherit the
 * main process's affinity when they start; a reload applies a new list to
 * every worker too.
 */
#ifndef RINGFEED_DAEMON_AFFINITY_H
#define RINGFEED_DAEMON_AFFINITY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf.h"
#include "err.h"

/* True when the list names no CPU (cpu-list not set). */
bool affinity_none(const uint64_t list[CONF_CPUS_MAX / 64]);

/*
 * Binds process pid (0: this one) to the CPUs of list.  Returns 0; or
 * -EINVAL when none of them is one the process may use (offline, or outside
 * its cgroup's cpuset), or another negative errno, err naming the list.
 */
int affinity_apply(pid_t pid, const uint64_t list[CONF_CPUS_MAX / 64], struct rf_err *err);

#endif
