/*
 * reload.c - SIGHUP: read the configuration again and apply what changed,
 * without dropping an attached client.
 *
 * The new config is the --config file read afresh with the command-line
 * flags over it (daemon_load_config), exactly as at start-up.  It is
 * checked whole before anything changes: a file that does not parse, or a
 * new dataset that does not open, is refused with the reason in the log
 * (and in systemd's STATUS=), and the running config stays.  Otherwise:
 *
 *   socket            cannot change (clients know the path): the running
 *                     one stays and the log says so
 *   socket-mode/-group applied to the socket file the daemon created
 *   cache-dir,        read when the first remote dataset is fetched (with
 *   cache-size,       the config of that start or reload); once the cache
 *   fetch-retries     is open, a change applies at the next start (logged)
 *   s3-endpoint/      the next fetch (remote.h)
 *   -region
 *   dataset.*         catalog_reload: added ones opened and offered,
 *                     removed ones no longer offered (attached clients
 *                     read on until they detach)
 *   workers           applied when the file's value changed, a number or
 *                     auto (a WORKERS request since the last load is
 *                     otherwise kept, auto or not); to auto: the
 *                     controller starts from the pool's size now
 *   cpu-budget        the controller's next decision; a pool over the
 *                     new budget is cut at once
 *   memory-budget     applies to the next ATTACH; rings in use stay
 *   memory-per-client,
 *   memory-per-uid    the same
 *   log-level         the main process at once, workers by the restart
 *   max-bad-samples,  reach workers with the rings they map, so the
 *   pixel-cap         workers restart
 *   watchdog-sec      the job watchdog at once
 *   allow-uid/-gid    the next connection
 *   recipe.*          the next ATTACH (an attached stream keeps its spec)
 *   mixture.*         the next ATTACH (an attached stream keeps its sources
 *                     and weights)
 *   plugin.*          each file loaded and checked first (one that fails
 *                     refuses the reload); a change restarts the workers
 *                     (an attached stream's Plugin ops then run the new
 *                     file) and applies to the next ATTACH's check
 *   cpu-list,         the CPUs (affinity.h): the main process first (a set
 *   numa-node         with no usable CPU, or a node that does not exist or
 *                     has no CPU or memory, refuses the reload and puts it
 *                     back), then every worker; a new node is also the
 *                     main process's memory policy at once, the next
 *                     rings', and the workers' by their restart (a
 *                     process's policy is its own to set); removing a key
 *                     frees the daemon of it
 *
 * New datasets, log-level, max-bad-samples, pixel-cap and numa-node
 * restart the workers gracefully (pool_roll): each old worker finishes the
 * jobs it holds and exits, new ones start with the new catalogue on their
 * command line, and jobs wait in the queue meanwhile, so every attached stream
 * goes on byte for byte (its batches are a pure function of its plan).
 *
 * systemd: RELOADING=1 (with MONOTONIC_USEC) first; READY=1 once the new
 * workers are all up, or at once when none had to start or the reload
 * was refused.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "affinity.h"
#include "daemon.h"
#include "log.h"
#include "numa.h"

static uv_signal_t sighup;
static bool sighup_open;

/* Appends ", what" to a change list. */
static void note(char *buf, size_t cap, const char *what)
{
    size_t len = strlen(buf);

    snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", what);
}

static bool datasets_changed(const struct conf *a, const struct conf *b)
{
    if (a->n_datasets != b->n_datasets)
        return true;
    for (unsigned i = 0; i < a->n_datasets; i++) {
        const struct conf_dataset *o = conf_find_dataset(b, a->datasets[i].name);

        if (!o || strcmp(o->dir, a->datasets[i].dir) != 0)
            return true;
    }
    return false;
}

/* Applies nc (already checked, datasets already applied; the main process
 * already where next puts it). */
static void apply(struct daemon *d, struct conf *nc, const struct affinity_plan *next, bool roll,
                  char *changes, size_t cap)
{
    struct conf *old = &d->cf;
    bool workers_changed = nc->workers != old->workers || nc->workers_auto != old->workers_auto;
    bool budget_changed = nc->cpu_budget != old->cpu_budget;

    if (strcmp(nc->socket, old->socket) != 0) {
        log_warn("reload: the socket cannot change while running: staying on %s "
                 "(restart ringfeedd to move it to %s)",
                 old->socket, nc->socket);
        snprintf(nc->socket, sizeof(nc->socket), "%s", old->socket);
    }
    if (d->remote && (strcmp(nc->cache_dir, old->cache_dir) != 0 ||
                      nc->cache_size != old->cache_size ||
                      nc->fetch_retries != old->fetch_retries ||
                      nc->cache_evict != old->cache_evict)) {
        log_warn("reload: cache-dir, cache-size, cache-evict and fetch-retries apply at the next "
                 "start: the cache folder %s (cache-size %llu, cache-evict %s, fetch-retries %u) "
                 "is open and stays", old->cache_dir, (unsigned long long)old->cache_size,
                 conf_cache_evict_name(old->cache_evict), old->fetch_retries);
        snprintf(nc->cache_dir, sizeof(nc->cache_dir), "%s", old->cache_dir);
        nc->cache_size = old->cache_size;
        nc->fetch_retries = old->fetch_retries;
        nc->cache_evict = old->cache_evict;
    }
    if (strcmp(nc->s3_endpoint, old->s3_endpoint) != 0 ||
        strcmp(nc->s3_region, old->s3_region) != 0)
        note(changes, cap, "s3-endpoint/-region");
    if (nc->log_level != old->log_level) {
        note(changes, cap, "log-level");
        roll = true;
    }
    if (nc->max_bad_samples != old->max_bad_samples) {
        note(changes, cap, "max-bad-samples");
        roll = true;
    }
    if (nc->pixel_cap != old->pixel_cap) {
        note(changes, cap, "pixel-cap");
        roll = true;
    }
    if (nc->memory_budget != old->memory_budget) {
        note(changes, cap, "memory-budget");
        if (d->sched.mem_used > nc->memory_budget)
            log_warn("reload: rings in use (%llu bytes) exceed the new memory-budget %llu: "
                     "attached clients keep their rings; an attach that does not fit is "
                     "refused (over-budget) until rings are freed",
                     (unsigned long long)d->sched.mem_used, (unsigned long long)nc->memory_budget);
    }
    if (nc->memory_per_client.bytes != old->memory_per_client.bytes ||
        nc->memory_per_client.percent != old->memory_per_client.percent ||
        nc->memory_per_uid.bytes != old->memory_per_uid.bytes ||
        nc->memory_per_uid.percent != old->memory_per_uid.percent)
        note(changes, cap, "memory-per-client/-uid");
    if (nc->watchdog_sec != old->watchdog_sec)
        note(changes, cap, "watchdog-sec");
    if (nc->max_clients != old->max_clients)
        note(changes, cap, "max-clients");
    if (nc->max_connections != old->max_connections)
        note(changes, cap, "max-connections");
    if (nc->idle_sec != old->idle_sec)
        note(changes, cap, "idle-sec");
    if (nc->socket_mode != old->socket_mode || strcmp(nc->socket_group, old->socket_group))
        note(changes, cap, "socket permissions");
    if (nc->n_allow_uid != old->n_allow_uid || nc->n_allow_gid != old->n_allow_gid ||
        memcmp(nc->allow_uid, old->allow_uid, nc->n_allow_uid * sizeof(uint32_t)) ||
        memcmp(nc->allow_gid, old->allow_gid, nc->n_allow_gid * sizeof(uint32_t)))
        note(changes, cap, "allow lists");
    if (nc->n_recipes != old->n_recipes ||
        memcmp(nc->recipes, old->recipes, nc->n_recipes * sizeof(nc->recipes[0])))
        note(changes, cap, "recipes");
    if (nc->n_mixtures != old->n_mixtures ||
        memcmp(nc->mixtures, old->mixtures, nc->n_mixtures * sizeof(nc->mixtures[0])))
        note(changes, cap, "mixtures");
    if (workers_changed)
        note(changes, cap, "workers");
    if (budget_changed)
        note(changes, cap, "cpu-budget");
    if (memcmp(nc->cpu_list, old->cpu_list, sizeof(nc->cpu_list)) != 0)
        note(changes, cap, "cpu-list");
    if (next->node != d->place.node) {
        /* the main process took the policy in reload_now; workers only
         * take one themselves: new ones inherit it */
        note(changes, cap, "numa-node");
        roll = true;
    }
    if (!affinity_same_cpus(next, &d->place)) {
        /* the main process took them in reload_now; now each worker (the
         * old ones too, for the jobs they finish) */
        for (unsigned i = 0; i < POOL_MAX; i++) {
            const struct worker *w = &d->pool.w[i];
            struct rf_err err;

            if (w->state != W_EMPTY && !w->exited && w->pid > 0 &&
                affinity_apply(w->pid, next, &err) < 0)
                log_warn("reload: worker %u (pid %d): %s", i, (int)w->pid, err.msg);
        }
    }
    d->place = *next;

    *old = *nc;
    log_threshold = (enum log_level)d->cf.log_level;
    server_reconfigure(d);
    pool_reconfigure(d);
    if (workers_changed && d->cf.workers_auto) {
        autoscale_set_auto(d, true, "workers = auto by a reload");
    } else if (workers_changed) {
        autoscale_set_auto(d, false, "workers = N by a reload");
        pool_resize(d, d->cf.workers);
    }
    if (budget_changed)
        autoscale_budget_changed(d);
    if (roll)
        pool_roll(d);
}

int reload_now(struct daemon *d, const char *how, char *changes, size_t cap,
               struct rf_err *err)
{
    struct conf *nc = malloc(sizeof(*nc));
    struct plugin_set *np = calloc(1, sizeof(*np));
    struct affinity_plan next;
    bool added = false, moved = false, placed = false;
    int rc;

    changes[0] = '\0';
    service_reloading(d);
    d->reloads++;
    log_info("%s: reloading %s", how, daemon_config_path() ? daemon_config_path()
                                                          : "(no --config file: flags only)");
    if (!nc || !np) {
        rc = rf_err_set(err, -ENOMEM, "out of memory");
        goto refused;
    }
    rc = daemon_load_config(nc, err);
    if (rc == 0) /* a node that is not there refuses the reload */
        rc = affinity_plan(nc, NUMA_SYSFS_ROOT, &next, err);
    if (rc == 0 && !affinity_same_cpus(&next, &d->place)) {
        /* a set with no usable CPU refuses the reload; none: every CPU */
        rc = affinity_apply(0, &next, err);
        moved = rc == 0;
    }
    if (rc == 0 && next.node != d->place.node) {
        rc = affinity_memory(next.node, err);
        placed = rc == 0;
    }
    if (rc == 0)
        rc = catalog_load_plugins(nc, np, err);
    if (rc == 0)
        rc = catalog_reload(d, nc, &added, err);
    if (rc < 0)
        goto refused;
    if (datasets_changed(&d->cf, nc))
        note(changes, cap, "datasets");
    if (!plugin_set_same(&d->plugins, np)) {
        /* the new files for the next ATTACH, and new workers load them */
        note(changes, cap, "plugins");
        plugin_set_free(&d->plugins);
        d->plugins = *np;
        memset(np, 0, sizeof(*np));
        added = true;
    }
    apply(d, nc, &next, added, changes, cap);
    plugin_set_free(np);
    free(np);
    free(nc);
    if (!changes[0])
        snprintf(changes, cap, "nothing changed");
    log_info("reload done: %s; %u dataset(s) offered, %u worker(s)%s", changes,
             catalog_offered(d), d->pool.target, d->autoscale.mode == AS_AUTO ? " (auto)" : "");
    service_pool_changed(d); /* READY=1 now, or once the new workers are up */
    return 0;

refused:
    if (moved || placed) { /* back where the running config put it */
        struct rf_err e2;

        if (moved && affinity_apply(0, &d->place, &e2) < 0)
            log_warn("reload refused, and the daemon's CPUs cannot be put back: %s", e2.msg);
        if (placed && affinity_memory(d->place.node, &e2) < 0)
            log_warn("reload refused, and the daemon's memory policy cannot be put back: %s",
                     e2.msg);
    }
    if (np)
        plugin_set_free(np);
    free(np);
    free(nc);
    d->reload_failures++;
    log_error("reload refused, the running config stays: %s", err->msg);
    service_reload_failed(d, err->msg);
    return rc;
}

static void on_sighup(uv_signal_t *h, int signum)
{
    struct daemon *d = h->loop->data;

    (void)signum;
    if (!d->stopping) {
        char changes[512];
        struct rf_err err;

        (void)reload_now(d, "SIGHUP", changes, sizeof(changes), &err); /* logged there */
    }
}

void reload_init(struct daemon *d)
{
    uv_signal_init(d->loop, &sighup);
    uv_signal_start(&sighup, on_sighup, SIGHUP);
    sighup_open = true;
}

void reload_close(struct daemon *d)
{
    (void)d;
    if (sighup_open)
        uv_close((uv_handle_t *)&sighup, NULL);
    sighup_open = false;
}
