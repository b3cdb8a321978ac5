/*
 * main.c - ringfeedd: command line, configuration, and the main loop.
 *
 *   ringfeedd [--config FILE] [--socket PATH] [--dataset NAME=DIR]...
 *             [--workers N|auto] [--cpu-budget N] [--memory-budget SIZE]
 *             [--log-level LEVEL] [--user [--idle-exit SECONDS]]
 *
 * Flags override the config file (proto/conf.h documents its format).
 * The socket, when neither names it: $RINGFEED_SOCKET, else
 * $XDG_RUNTIME_DIR/ringfeed.sock, else /run/ringfeed/ringfeed.sock.
 * Workers, when neither sets them: one per CPU.  "auto": the controller
 * sizes the pool under the CPU budget (autoscale.c), from one worker.
 * Memory budget for rings: a quarter of physical memory.
 *
 * Runs in the foreground and logs to stderr.  SIGINT and SIGTERM stop it:
 * clients are told through their rings, workers are ended (SIGKILLed
 * after a few seconds if they linger, service.c), the socket file it
 * created is removed.  SIGHUP reloads the --config file, flags still
 * overriding it (reload.c).  Under systemd it speaks sd_notify (READY,
 * RELOADING, STOPPING, STATUS, WATCHDOG) and takes a socket-activated
 * listener (service.c, sdnotify.h, systemd/ringfeedd.service).
 *
 * --user: a user's own daemon (userd.c): its socket in the user's
 * private folder, its own uid only, dataset folders opened as clients ask
 * (OPEN), and an exit after --idle-exit seconds with no client.
 * libringfeed starts it when a program names a folder (client/spawn.c).
 *
 * The same binary is the worker: "ringfeedd --worker ..." (worker.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "affinity.h"
#include "ahead.h"
#include "buildid.h"
#include "checkconf.h"
#include "confload.h"
#include "cpus.h"
#include "config.h"
#include "daemon.h"
#include "fault.h"
#include "fileio.h"
#include "log.h"
#include "mapguard.h"
#include "memlimit.h"
#include "numa.h"
#include "revision.h"
#include "strnum.h"
#include "userd.h"
#include "worker.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ringfeedd [--config FILE] [--socket PATH] [--dataset NAME=DIR]...\n"
            "                 [--workers N|auto] [--cpu-budget N] [--memory-budget SIZE]\n"
            "                 [--log-level LEVEL] [--name NAME] [--user [--idle-exit SECONDS]]\n"
            "       ringfeedd --check-config [--config FILE] [flags]\n"
            "\n"
            "  --config FILE         read settings from FILE (key = value lines)\n"
            "  --socket PATH         control socket (default $RINGFEED_SOCKET,\n"
            "                        $XDG_RUNTIME_DIR/ringfeed.sock, /run/ringfeed/ringfeed.sock)\n"
            "  --dataset NAME=DIR    serve the packed dataset in DIR as NAME (repeatable)\n"
            "  --workers N|auto      worker processes, 1..256 (default: one per CPU), or auto:\n"
            "                        the daemon sizes the pool under the CPU budget\n"
            "  --cpu-budget N        CPUs the pool may use with --workers auto, 1..256\n"
            "                        (default: the CPUs allowed, cgroup quota included,\n"
            "                        less one per attached client)\n"
            "  --memory-budget SIZE  bytes for client rings, e.g. 2G (default: a quarter of\n"
            "                        the RAM, or of the cgroup's memory limit when lower)\n"
            "  --log-level LEVEL     error, warn, info (default) or debug\n"
            "  --name NAME           this daemon's name among a node's (METRICS labels\n"
            "                        every sample daemon=\"NAME\"; ringfeedd@NAME.service)\n"
            "  --user                your own daemon: socket in $XDG_RUNTIME_DIR/ringfeed/\n"
            "                        (else /tmp/ringfeed-UID/), your uid only, dataset\n"
            "                        folders opened as clients ask\n"
            "  --idle-exit SECONDS   with --user: exit after this long with no client\n"
            "                        (default %u; 0: never)\n"
            "  --check-config        check the config (with --config FILE) and the flags\n"
            "                        as the daemon would load them, naming every problem\n"
            "                        with its file and line; start nothing; exit 0 or 1\n"
            "  --version             print the version\n"
            "  --help                print this help\n", USERD_IDLE_EXIT_DEFAULT);
}

/* Reads the config file whole (at most 1 MiB); the message names the file. */
static int read_file(const char *path, char **buf, size_t *len, struct rf_err *err)
{
    int rc = fio_read_file(AT_FDCWD, path, 1u << 20, buf, len);

    if (rc == -EFBIG)
        return rf_err_set(err, rc, "%s: larger than 1 MiB", path);
    if (rc == -EINVAL)
        return rf_err_set(err, rc, "%s: not a regular file", path);
    if (rc < 0)
        return rf_err_set(err, rc, "%s: %s", path, strerror(-rc));
    return 0;
}

static void default_socket(char *out, size_t cap)
{
    const char *env = getenv("RINGFEED_SOCKET");
    const char *xdg = getenv("XDG_RUNTIME_DIR");

    if (env && env[0])
        snprintf(out, cap, "%s", env);
    else if (xdg && xdg[0])
        snprintf(out, cap, "%s/ringfeed.sock", xdg);
    else
        snprintf(out, cap, "/run/ringfeed/ringfeed.sock");
}

/* The command line, kept for reloads: the --config file and the flags. */
static const char *config_file;
static struct conf flag_conf;

const char *daemon_config_path(void)
{
    return config_file;
}

/* One config file parsed into out (first reset to the defaults); the
 * message names the file. */
static int parse_file(const char *path, struct conf *out, struct rf_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    int rc = read_file(path, &buf, &len, err);

    if (rc == 0) {
        rc = conf_parse(buf, len, out, err);
        if (rc < 0)
            rf_err_prefix(err, "%s", path);
    }
    free(buf);
    return rc;
}

static void note_override(void *arg, const char *what, const char *winner)
{
    (void)arg;
    log_info("config: %s is set again in %s, which wins over the files before it", what,
             winner);
}

int daemon_load_config(struct conf *out, struct rf_err *err)
{
    int rc;

    conf_defaults(out);
    if (config_file) {
        /* the file, then its drop-in folder's *.conf in name order (confload.h) */
        static char names[CONFLOAD_DROPINS_MAX][4096];
        static struct conf layer; /* large: off the stack */
        int n;

        rc = parse_file(config_file, out, err);
        if (rc < 0)
            return rc;
        n = confload_dropins(config_file, names, CONFLOAD_DROPINS_MAX, err);
        if (n < 0)
            return n;
        for (int i = 0; i < n; i++) {
            rc = parse_file(names[i], &layer, err);
            if (rc == 0)
                rc = confload_layer(out, &layer, names[i], note_override, NULL, err);
            if (rc < 0)
                return rc;
        }
    }
    rc = conf_merge(out, &flag_conf, err);
    if (rc < 0)
        return rc;
    rc = conf_check_mixtures(out, err);
    if (rc < 0)
        return rc;
    if (!conf_is_set(out, CONF_SOCKET))
        default_socket(out->socket, sizeof(out->socket));
    if (out->workers_auto) {
        out->workers = AS_START_WORKERS; /* the controller takes it from here */
    } else if (!out->workers) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        out->workers = n < 1 ? 1 : n > POOL_MAX ? POOL_MAX : (uint32_t)n;
    }
    if (!out->memory_budget) {
        /* a quarter of what this process may use: a cgroup's limit if set */
        uint64_t usable = memlimit_usable(NULL, 0);

        out->memory_budget = usable ? usable / 4 : (1ull << 30);
    }
    return 0;
}

/* Parses flags and the config file into d->cf; returns 0, 1 (exit 0), -1 (bad
 * usage, exit 2) or -2 (--user could not take its folder, or --check-config
 * found a problem: exit 1). */
static int configure(struct daemon *d, int argc, char **argv)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "socket", required_argument, NULL, 's' },
        { "dataset", required_argument, NULL, 'd' },
        { "workers", required_argument, NULL, 'w' },
        { "cpu-budget", required_argument, NULL, 'b' },
        { "memory-budget", required_argument, NULL, 'm' },
        { "log-level", required_argument, NULL, 'l' },
        { "name", required_argument, NULL, 'n' },
        { "user", no_argument, NULL, 'u' },
        { "idle-exit", required_argument, NULL, 'i' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { "check-config", no_argument, NULL, 'C' },
        { NULL, 0, NULL, 0 },
    };
    struct conf *flags = &flag_conf;
    const char *config = NULL;
    struct rf_err err;
    bool user = false, check = false;
    uint32_t idle_exit = USERD_IDLE_EXIT_DEFAULT;
    const char *idle_arg = NULL;
    int opt;

    conf_defaults(flags);
    conf_defaults(&d->cf);
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        const char *key = NULL;
        char dkey[128], dpath[PATH_MAX];
        const char *value = optarg;

        switch (opt) {
        case 'c': config = optarg; continue;
        case 's': key = "socket"; break;
        case 'w': key = "workers"; break;
        case 'b': key = "cpu-budget"; break;
        case 'm': key = "memory-budget"; break;
        case 'l': key = "log-level"; break;
        case 'n': key = "name"; break;
        case 'u': user = true; continue;
        case 'C': check = true; continue;
        case 'i': {
            uint64_t v;

            if (strnum_u64(optarg, strlen(optarg), &v) < 0 || v > USERD_IDLE_EXIT_MAX) {
                fprintf(stderr, "ringfeedd: --idle-exit %s: seconds, 0..%u (0: never)\n",
                        optarg, USERD_IDLE_EXIT_MAX);
                return -1;
            }
            idle_exit = (uint32_t)v;
            idle_arg = optarg;
            continue;
        }
        case 'd': {
            const char *eq = strchr(optarg, '=');

            if (!eq || eq == optarg) {
                fprintf(stderr, "ringfeedd: --dataset %s: expected NAME=DIR\n", optarg);
                return -1;
            }
            snprintf(dkey, sizeof(dkey), "dataset.%.*s", (int)(eq - optarg), optarg);
            key = dkey;
            value = eq + 1;
            /* a relative folder on the command line is relative to here;
             * the config file takes absolute paths only */
            if (value[0] != '/' && realpath(value, dpath))
                value = dpath;
            break;
        }
        case 'h': usage(stdout); return 1;
        case 'V': printf("ringfeedd %s (commit %s)\n", RINGFEED_VERSION, RINGFEED_REVISION); return 1;
        default: usage(stderr); return -1;
        }
        if (conf_set(flags, key, value, &err) < 0) {
            fprintf(stderr, "ringfeedd: --%s %s: %s\n", opt == 'd' ? "dataset" : key, optarg,
                    err.msg);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ringfeedd: unexpected argument %s\n", argv[optind]);
        usage(stderr);
        return -1;
    }
    if (check) /* nothing starts: exit 0 (good) or 1 */
        return checkconf_run(config, flags, stdout, stderr) == 0 ? 1 : -2;
    if (idle_arg && !user) {
        fprintf(stderr, "ringfeedd: --idle-exit is for a user daemon: add --user\n");
        return -1;
    }
    if (user) {
        char sock[sizeof(d->cf.socket)];

        if (conf_is_set(flags, CONF_SOCKET)) {
            fprintf(stderr, "ringfeedd: --user listens in the user's own folder; leave out "
                            "--socket (or drop --user)\n");
            return -1;
        }
        if (userd_configure(idle_exit, sock, sizeof(sock), &err) < 0 ||
            conf_set(flags, "socket", sock, &err) < 0 ||
            conf_set(flags, "socket-mode", "0600", &err) < 0) {
            fprintf(stderr, "ringfeedd: --user: %s\n", err.msg);
            return -2; /* a start-up failure, not bad usage: exit 1 */
        }
    }
    config_file = config;
    if (daemon_load_config(&d->cf, &err) < 0) {
        fprintf(stderr, "ringfeedd: %s\n", err.msg);
        return -1;
    }
    log_threshold = (enum log_level)d->cf.log_level;
    if (d->cf.n_datasets == 0 && !user)
        log_warn("no datasets configured: give --dataset NAME=DIR or dataset.NAME in the config");
    return 0;
}

static int self_exe(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);

    if (n == -1)
        return -errno;
    out[n] = '\0';
    return 0;
}

static uv_signal_t sigint_h, sigterm_h;

void daemon_stop(struct daemon *d, const char *why)
{
    if (d->stopping)
        return;
    log_info("%s: stopping", why);
    d->stopping = true;
    userd_close();
    service_stopping(d);
    server_stop(d);
    server_close_all(d);
    autoscale_stop(d);
    remote_stop(d);
    pool_stop(d);
    sched_close(d);
    reload_close(d);
    uv_close((uv_handle_t *)&sigint_h, NULL);
    uv_close((uv_handle_t *)&sigterm_h, NULL);
}

static void on_stop_signal(uv_signal_t *h, int signum)
{
    char why[32];

    snprintf(why, sizeof(why), "signal %d", signum);
    daemon_stop(h->loop->data, why);
}

static int table_checks(void)
{
    struct rf_err err;

    if (ctl_check_tables(&err) < 0 || conf_check_table(&err) < 0) {
        log_error("start-up table check failed: %s", err.msg);
        return -1;
    }
    if (xform_table_check() < 0) {
        log_error("start-up table check failed: transform table");
        return -1;
    }
    return 0;
}

/* What the scheduler asks of the pool, the server and the catalogue. */
static const struct sched_ops sched_ops = {
    .dispatch = pool_dispatch,
    .forget_ring = pool_forget_ring,
    .quarantine = pool_quarantine,
    .dataset_failed = catalog_fail,
    .kick = server_kick,
    .attach_made = server_attach_made,
    .find_dataset = catalog_find,
    .failed_reason = catalog_failed_reason,
    .dataset_names = catalog_names,
    .on_demand = ahead_serves,
    .shards_ready = ahead_ready,
    .shards_hold = ahead_hold,
    .shards_release = ahead_release,
    .shards_lost = ahead_lost,
    .shards_held_ready = ahead_held_ready,
};

int main(int argc, char **argv)
{
    static struct daemon d; /* large (the pool): keep it off the stack */
    uv_loop_t loop;
    int rc;

    if (argc >= 3 && strcmp(argv[1], "--worker") == 0)
        worker_main(argc, argv);
    rc = configure(&d, argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : rc == -2 ? 1 : 2;
    if (table_checks() < 0)
        return 1;
    signal(SIGPIPE, SIG_IGN);
    if (self_exe(d.exe, sizeof(d.exe)) < 0) {
        log_error("cannot find my own binary in /proc/self/exe: %s", strerror(errno));
        return 1;
    }
    /* kept open for the daemon's life: workers start from this file, not
     * from the path, which an upgrade may have replaced (buildid.h) */
    {
        /* at 10 or above: a worker's spawn puts its own descriptors at 0..3
         * before it execs this one (pool.c) */
        int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

        d.exe_fd = fd == -1 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 10);
        if (fd != -1)
            close(fd);
    }
    if (d.exe_fd == -1 || buildid_of_fd(d.exe_fd, d.build) < 0) {
        log_error("cannot read my own binary through /proc/self/exe: %s", strerror(errno));
        return 1;
    }
    snprintf(d.exe_run, sizeof(d.exe_run), "/proc/self/fd/%d", d.exe_fd);
    d.start_ns = clock_mono_ns();
    {
        struct rf_err ferr;

        switch (fault_init(&ferr)) {
        case 0:
            break;
        case 1:
            log_warn("fault injection armed (RINGFEED_FAULT): %s", ferr.msg);
            break;
        case 2:
            log_warn("RINGFEED_FAULT is set, but this build has no fault injection (debug and "
                     "sanitizer builds only); ignored");
            break;
        default:
            log_error("%s", ferr.msg);
            return 2;
        }
    }
    /* a shard truncated under a mapping reads zeros, not SIGBUS (the
     * catalogue maps every index; reloads open datasets too) */
    if (mapguard_install() < 0) {
        log_error("cannot install the SIGBUS guard: %s", strerror(errno));
        return 1;
    }
    {
        struct rf_err perr;

        if (catalog_load_plugins(&d.cf, &d.plugins, &perr) < 0) {
            log_error("%s", perr.msg);
            return 1;
        }
        /* cpu-list and numa-node: before any worker or thread starts (they
         * inherit the CPUs and the memory policy) and before the
         * autoscaler counts the CPUs it may use */
        if (affinity_plan(&d.cf, NUMA_SYSFS_ROOT, &d.place, &perr) < 0 ||
            (d.place.bound && affinity_apply(0, &d.place, &perr) < 0) ||
            (d.place.node >= 0 && affinity_memory(d.place.node, &perr) < 0)) {
            log_error("%s", perr.msg);
            return 1;
        }
        if (d.place.node >= 0) {
            char cpus[256];

            if (cpus_format_list(d.place.cpus, CONF_CPUS_MAX, cpus, sizeof(cpus)) < 0)
                snprintf(cpus + sizeof(cpus) - 4, 4, "...");
            log_info("numa-node = %d: running on CPUs %s, memory preferred from node %d",
                     d.place.node, cpus, d.place.node);
        }
    }
    if (catalog_open(&d) < 0)
        return 1;
    /* libuv's pool runs ring work (stream.c) and fetches of remote shards
     * (ahead.h): room for AHEAD_FETCHES beside its default 4, unless the
     * environment sizes it */
    {
        char n[16];

        snprintf(n, sizeof(n), "%d", AHEAD_FETCHES_POOL);
        setenv("UV_THREADPOOL_SIZE", n, 0);
    }
    uv_loop_init(&loop);
    loop.data = &d;
    d.loop = &loop;
    /* reads (and unsets) NOTIFY_SOCKET and WATCHDOG_*; server_start takes
     * LISTEN_FDS: both before pool_start, so no worker inherits them */
    service_init(&d);
    {
        struct rf_err aerr;

        if (autoscale_init(&d, &aerr) < 0) {
            log_error("%s", aerr.msg);
            catalog_close(&d);
            uv_loop_close(&loop);
            return 2;
        }
    }
    if (server_start(&d) < 0) {
        catalog_close(&d);
        uv_loop_close(&loop);
        return 1;
    }
    if (pool_start(&d) < 0) {
        server_stop(&d);
        catalog_close(&d);
        return 1;
    }
    autoscale_start(&d);
    uv_signal_init(&loop, &sigint_h);
    uv_signal_start(&sigint_h, on_stop_signal, SIGINT);
    uv_signal_init(&loop, &sigterm_h);
    uv_signal_start(&sigterm_h, on_stop_signal, SIGTERM);
    reload_init(&d);
    sched_init(&d, &sched_ops);
    userd_start(&d);
    catalog_start_fetches(&d); /* remote datasets: on the thread pool (remote.h) */
    if (d.cf.workers_auto)
        log_info("ringfeedd %s: workers auto from %u, cpu budget %u: %s; %u dataset(s), ring "
                 "budget %llu bytes", RINGFEED_VERSION, d.cf.workers, d.autoscale.budget,
                 d.autoscale.budget_source, d.ncat, (unsigned long long)d.cf.memory_budget);
    else
        log_info("ringfeedd %s: %u worker(s), %u dataset(s), ring budget %llu bytes",
                 RINGFEED_VERSION, d.cf.workers, d.ncat, (unsigned long long)d.cf.memory_budget);
    {
        /* what the default budget and the workers' read backend go by */
        char where[512];
        uint64_t usable = memlimit_usable(where, sizeof(where));

        log_info("memory this daemon may use: %llu MB (%s)", (unsigned long long)(usable >> 20),
                 where);
    }

    uv_run(&loop, UV_RUN_DEFAULT);

    rc = uv_loop_close(&loop);
    if (rc < 0)
        log_debug("loop closed with handles open: %s", uv_strerror(rc));
    remote_close(&d);
    catalog_close(&d);
    service_exit();
    log_info("stopped");
    return 0;
}
