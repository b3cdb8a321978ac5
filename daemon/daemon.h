/*
 * daemon.h - ringfeedd's main process: struct daemon, which composes the
 * state of its modules (each in its own header: catalog.h, pool.h,
 * sched.h, server.h, service.h, reload.h, stats.h, autoscale.h, affinity.h; every field has the one
 * module that changes it), and main.c's config functions.
 *
 * The main process is one libuv loop (docs/design/processes.md).  It owns:
 *   - the catalogue: the datasets its config names, opened to learn their
 *     shape and size (the main process never decodes a record);
 *   - the pool: worker processes, each with a SOCK_SEQPACKET socketpair;
 *   - the streams: one per attached client, each with its ring (memfd),
 *     its eventfd, its sampler parameters and its batches in flight;
 *   - the job queue: chunks of batches waiting for a worker;
 *   - the control server: the listening socket and its connections.
 *
 * Invariants kept by the scheduler (scheduler.h lists its modules), checked by sched_check()
 * after every scheduler transition in debug and sanitizer builds
 * (RINGFEED_CHECKS), where a broken one aborts:
 *   I1. A stream's batches are scheduled in order: next_g only grows, and
 *       next_g <= released + depth (ring.h M1).
 *   I2. Every job is in exactly one place: the queue, or one worker's
 *       in-flight list.  A job whose chunk bit is set in its slot is done
 *       and is in neither.
 *   I3. A stream's memory is counted in mem_used from ATTACH until its
 *       ring is unmapped.
 */
#ifndef RINGFEED_DAEMON_DAEMON_H
#define RINGFEED_DAEMON_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "clock.h"

#include "affinity.h"
#include "autoscale.h"
#include "catalog.h"
#include "conf.h"
#include "ctl.h"
#include "dataset.h"
#include "plugin.h"
#include "pool.h"
#include "reload.h"
#include "remote.h"
#include "sampler.h"
#include "scheduler.h"
#include "server.h"
#include "service.h"
#include "stats.h"
#include "transform.h"
#include "userd.h"
#include "wire.h"

struct daemon {
    uv_loop_t *loop;
    struct conf cf;
    char exe[4096];            /* its path when it started (workers' argv[0]) */
    char exe_run[32];          /* /proc/self/fd/N of exe_fd: workers are
                                  started from it, so an upgrade that
                                  replaces the file never mixes builds */
    int exe_fd;
    char build[64];            /* buildid.h's line for this executable */
    struct catalog_entry *cat; /* catalog.c's */
    struct plugin_set plugins; /* the config's plugin.NAME lines, loaded
                                  (catalog_load_plugins; main.c, reload.c) */
    uint32_t ncat;

    struct pool pool;          /* pool.c's */
    struct autoscale autoscale; /* autoscale.c's: workers auto, the CPU budget */
    struct affinity_plan place; /* where cpu-list and numa-node put the daemon
                                  now (affinity.h): set at start (main.c) and
                                  by a reload (reload.c) */

    struct sched_state sched;  /* the scheduler's: streams, the job queues, ring memory */
    uint64_t start_ns;

    /* totals that outlive streams and workers */
    uint64_t attaches, detaches, attach_refused, clients_killed;
    uint64_t datasets_failed;  /* catalogue entries failed (catalog_fail) */
    struct ahead *ahead;       /* ahead.c's: remote datasets' shards, NULL until the
                                  first remote dataset is fetched */
    struct remote *remote;     /* remote.c's: the cache and fetch client, NULL until the
                                  first remote dataset is fetched */
    uint64_t batches, samples;
    struct quarantine quarantine; /* catalog.c's: samples that killed workers */
    uint64_t conn_total, conn_open, bad_requests;
    uint64_t conn_refused;          /* over max-connections */
    uint64_t conn_idle_closed;      /* closed after idle-sec */
    uint64_t conn_denied;      /* peers refused by the access rule (server.c) */
    uint64_t reloads, reload_failures;

    bool stopping;
};

/* main.c: the config as the command line and --config file give it now
 * (flags over file, defaults filled in).  Returns 0 or -errno with err. */
int daemon_load_config(struct conf *out, struct rf_err *err);
/* The --config file, or NULL. */
const char *daemon_config_path(void);
/* Stops the daemon as SIGTERM does (main.c); why goes to the log. */
void daemon_stop(struct daemon *d, const char *why);

#endif
