/*
 * service.c - ringfeedd as a systemd service (Type=notify): what it tells
 * the service manager and when, and the stop sequence's deadline.
 *
 *   READY=1 + STATUS=    once the catalogue is open and every worker the
 *                        pool wants has said HELLO; again after a reload,
 *                        once the reloaded pool is up (or at once when the
 *                        reload did not restart workers, or failed)
 *   RELOADING=1 + MONOTONIC_USEC=   when SIGHUP arrives, before anything
 *                        is re-read (systemd's notify-reload contract)
 *   STATUS=              every STATUS_MS, stats_status_line()
 *   WATCHDOG=1           every WATCHDOG_USEC / 2 from a loop timer, so a
 *                        wedged loop stops the pings and systemd restarts
 *                        the service (WatchdogSec=)
 *   STOPPING=1           on SIGTERM/SIGINT
 *
 * Without $NOTIFY_SOCKET (a terminal, a test) nothing is sent and no timer
 * but the stop deadline runs.  The protocol itself is sdnotify.c.
 *
 * The stop deadline: once stopping, workers were sent SIGTERM
 * (pool_stop); every STOP_POLL_MS the daemon looks whether they are gone,
 * and at STOP_KILL_MS it SIGKILLs the stragglers, so the loop ends (and
 * the process exits) within a few seconds with no worker left behind.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "daemon.h"
#include "log.h"
#include "sdnotify.h"

#define STATUS_MS 5000
#define STOP_POLL_MS 50
#define STOP_KILL_MS 3000

static struct {
    struct sdn n;
    uv_timer_t watchdog, status, stop;
    bool timers_open;
    bool stop_open;
    bool ready_pending;     /* READY=1 is due once the pool is up */
    uint64_t stop_started;
    bool killed;
} svc = { .n = { .fd = -1 } };

static void notify(const char *msg)
{
    int rc = sdn_send(&svc.n, msg);

    if (rc < 0)
        log_debug("sd_notify: %s", strerror(-rc));
}

/* "<head>STATUS=<status line>" as one datagram. */
static void notify_with_status(struct daemon *d, const char *head)
{
    char line[512], msg[SDN_MESSAGE_MAX];

    stats_status_line(d, line, sizeof(line));
    snprintf(msg, sizeof(msg), "%sSTATUS=%s", head, line);
    notify(msg);
}

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    notify("WATCHDOG=1");
}

static void on_status(uv_timer_t *t)
{
    notify_with_status(t->loop->data, "");
}

void service_init(struct daemon *d)
{
    bool bad_wd;
    int rc = sdn_open_env(&svc.n, &bad_wd);

    if (rc < 0)
        log_warn("NOTIFY_SOCKET is set but unusable (%s): not notifying systemd",
                 strerror(-rc));
    if (bad_wd)
        log_warn("WATCHDOG_USEC/WATCHDOG_PID are malformed: no watchdog pings");
    svc.ready_pending = true;
    if (svc.n.fd < 0)
        return;
    uv_timer_init(d->loop, &svc.watchdog);
    uv_timer_init(d->loop, &svc.status);
    svc.timers_open = true;
    if (svc.n.watchdog_usec) {
        uint64_t ms = svc.n.watchdog_usec / 2000;

        if (ms == 0)
            ms = 1;
        uv_timer_start(&svc.watchdog, on_watchdog, ms, ms);
        log_info("systemd watchdog: every %llu us, pinging every %llu ms",
                 (unsigned long long)svc.n.watchdog_usec, (unsigned long long)ms);
    }
    uv_timer_start(&svc.status, on_status, STATUS_MS, STATUS_MS);
}

/* Workers that are up: said HELLO and not retiring. */
static uint32_t workers_ready(const struct daemon *d)
{
    uint32_t n = 0;

    for (unsigned i = 0; i < POOL_MAX; i++)
        if (d->pool.w[i].state == W_READY && !d->pool.w[i].exited)
            n++;
    return n;
}

void service_pool_changed(struct daemon *d)
{
    if (!svc.ready_pending || d->stopping || workers_ready(d) < d->pool.target)
        return;
    svc.ready_pending = false;
    log_info("ready: %u worker(s) up, %u dataset(s)", workers_ready(d), catalog_offered(d));
    notify_with_status(d, "READY=1\n");
}

void service_reloading(struct daemon *d)
{
    char head[128];

    (void)d;
    snprintf(head, sizeof(head), "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
             (unsigned long long)(clock_mono_ns() / 1000));
    notify(head);
    svc.ready_pending = true;
}

void service_reload_failed(struct daemon *d, const char *why)
{
    char msg[SDN_MESSAGE_MAX];

    svc.ready_pending = false;
    snprintf(msg, sizeof(msg), "READY=1\nSTATUS=reload failed, running the old config: %.900s",
             why);
    notify(msg);
    (void)d;
}

static void on_closed_quiet(uv_handle_t *h)
{
    (void)h;
}

static void on_stop_tick(uv_timer_t *t)
{
    struct daemon *d = t->loop->data;
    uint64_t waited = (clock_mono_ns() - svc.stop_started) / 1000000ull;

    if (d->pool.alive > 0 && waited < STOP_KILL_MS)
        return;
    if (d->pool.alive > 0 && !svc.killed) {
        log_warn("stopping: %u worker(s) still running after %u ms; killing them",
                 d->pool.alive, STOP_KILL_MS);
        pool_signal_all(d, SIGKILL);
        svc.killed = true;
        return;
    }
    if (d->pool.alive > 0)
        return; /* killed: their exit is on its way */
    uv_close((uv_handle_t *)&svc.stop, on_closed_quiet);
    svc.stop_open = false;
    if (svc.timers_open) {
        uv_close((uv_handle_t *)&svc.watchdog, on_closed_quiet);
        uv_close((uv_handle_t *)&svc.status, on_closed_quiet);
        svc.timers_open = false;
    }
    log_info("stopping: every worker has exited");
}

void service_stopping(struct daemon *d)
{
    notify_with_status(d, "STOPPING=1\n");
    svc.ready_pending = false;
    if (svc.timers_open)
        uv_timer_stop(&svc.status);
    svc.stop_started = clock_mono_ns();
    uv_timer_init(d->loop, &svc.stop);
    svc.stop_open = true;
    uv_timer_start(&svc.stop, on_stop_tick, 0, STOP_POLL_MS);
}

void service_exit(void)
{
    sdn_close(&svc.n);
}
