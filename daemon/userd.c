/*
 * userd.c - ringfeedd --user: one user's own daemon, which libringfeed
 * starts when a program names a dataset folder (client/spawn.c) and which
 * exits when no program has used it for --idle-exit seconds.
 *
 * What differs from the system daemon:
 *   - its socket is ringfeed.sock in the user's private folder
 *     (proto/userdir.h), mode 0600, and it holds ringfeedd.lock there for
 *     its whole life, so there is one per user;
 *   - only its own uid may talk to it (SO_PEERCRED, server.c asks
 *     userd_peer_ok): not root, not the allow lists; another uid reads
 *     whose daemon it is;
 *   - OPEN <folder> opens a packed dataset by path, with the user's rights,
 *     as clients ask (the system daemon answers OPEN only for folders its
 *     config names).  The folder's realpath is the key: every program of
 *     the user naming that folder, by any path, gets the same catalogue
 *     entry, so identical streams still share their producer and the
 *     workers are shared by all of them;
 *   - it exits after idle_exit seconds with no control connection open
 *     (an attached program holds its connection), saying in the log when
 *     the countdown starts and when it exits.
 *
 * Learning a dataset.  Workers learn the catalogue on their command line;
 * a folder opened on demand takes the path a reload's added dataset takes
 * (catalog_add, then pool_roll): each worker finishes the jobs it holds
 * and exits, new ones start with the new catalogue, jobs wait in the queue
 * meanwhile, and every attached stream goes on byte for byte.  That costs
 * a worker restart per new folder (tens of milliseconds of work on each
 * worker, paid once per folder per daemon), and keeps one way for a worker
 * to learn a dataset; a message that told running workers to open one more
 * would save the restart at the price of a second way, not worth it while
 * new folders arrive at the pace of programs starting.
 *
 * Slots.  The catalogue has CONF_DATASETS_MAX slots.  Folders stay open
 * while the daemon runs; when a new one finds no slot, the folders no
 * client reads are closed first (catalog_retire_unused).
 */
#include "userd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "userdir.h"

static bool active;
static uint32_t idle_exit_s;
static struct userdir ud;
static int lock_fd = -1;
static uv_timer_t idle_timer;
static bool timer_open, counting;

/* Takes ud.lock for the daemon's life and writes our pid in it. */
static int take_lock(struct rf_err *err)
{
    char pid[32];
    int fd = open(ud.lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    ssize_t n;

    if (fd == -1)
        return rf_err_set(err, -errno, "%s: %s", ud.lock, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) == -1) {
        int e = errno;

        n = pread(fd, pid, sizeof(pid) - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        if (e == EWOULDBLOCK)
            return rf_err_set(err, -EADDRINUSE,
                              "another ringfeedd --user (pid %s) already serves uid %u from %s",
                              pid[0] ? pid : "?", (unsigned)geteuid(), ud.dir);
        return rf_err_set(err, -e, "flock %s: %s", ud.lock, strerror(e));
    }
    n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) == -1 || pwrite(fd, pid, (size_t)n, 0) != n)
        log_warn("%s: cannot write my pid: %s", ud.lock, strerror(errno));
    lock_fd = fd;
    return 0;
}

int userd_configure(uint32_t idle_exit, char *socket, size_t cap, struct rf_err *err)
{
    int rc = userdir_paths(&ud, geteuid(), err);

    if (rc == 0)
        rc = userdir_make(&ud, geteuid(), err);
    if (rc == 0)
        rc = take_lock(err);
    if (rc < 0)
        return rc;
    snprintf(socket, cap, "%s", ud.socket);
    idle_exit_s = idle_exit;
    active = true;
    return 0;
}

bool userd_active(void)
{
    return active;
}

static void on_idle(uv_timer_t *t)
{
    struct daemon *d = t->loop->data;

    counting = false;
    if (d->conn_open > 0 || d->stopping)
        return;
    log_info("no client for %u s (--idle-exit): exiting", idle_exit_s);
    daemon_stop(d, "idle");
}

void userd_clients_changed(struct daemon *d)
{
    if (!active || !timer_open || d->stopping || idle_exit_s == 0)
        return;
    if (d->conn_open > 0 && counting) {
        uv_timer_stop(&idle_timer);
        counting = false;
        log_debug("a client connected: idle countdown stopped");
    } else if (d->conn_open == 0 && !counting) {
        uv_timer_start(&idle_timer, on_idle, (uint64_t)idle_exit_s * 1000, 0);
        counting = true;
        log_info("no clients: exiting in %u s unless one connects (--idle-exit)", idle_exit_s);
    }
}

void userd_start(struct daemon *d)
{
    if (!active)
        return;
    uv_timer_init(d->loop, &idle_timer);
    timer_open = true;
    log_info("user daemon of uid %u: folder %s, %s", (unsigned)geteuid(), ud.dir,
             idle_exit_s ? "exits when idle" : "never exits when idle (--idle-exit 0)");
    userd_clients_changed(d);
}

void userd_close(void)
{
    if (timer_open && !uv_is_closing((uv_handle_t *)&idle_timer))
        uv_close((uv_handle_t *)&idle_timer, NULL);
    counting = false;
}

bool userd_peer_ok(uid_t uid, char *msg, size_t cap)
{
    struct passwd pw, *res = NULL;
    char buf[1024];

    if (uid == geteuid())
        return true;
    if (getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &res) != 0)
        res = NULL;
    snprintf(msg, cap,
             "this is the ringfeedd --user of uid %u%s%s%s: it serves that user only, not "
             "uid %d; start your own (ringfeedd --user, which libringfeed starts for a "
             "dataset folder, in your own XDG_RUNTIME_DIR) or use the system daemon",
             (unsigned)geteuid(), res ? " (" : "", res ? res->pw_name : "", res ? ")" : "",
             (int)uid);
    return false;
}

/* The catalogue name for the folder real: its last component in
 * [A-Za-z0-9._-] (others become _), then '-' and 16 hex digits of a
 * hash of the whole path, so two folders of one name differ. */
static void make_name(const char *real, char *name)
{
    const char *base = strrchr(real, '/');
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    size_t n = 0;

    for (const char *p = real; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    base = base && base[1] ? base + 1 : "root";
    for (; *base && n < CTL_DATASET_NAME_MAX - 17; base++) {
        char c = *base;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || (c == '-' && n > 0);

        name[n++] = ok ? c : '_';
    }
    snprintf(name + n, CTL_DATASET_NAME_MAX + 1 - n, "-%016llx", (unsigned long long)h);
}

int userd_open(struct daemon *d, const char *path, char *name, enum ctl_errcode *code,
               struct rf_err *err)
{
    char real[PATH_MAX];
    struct dataset *ds = NULL;
    int i, rc;

    *code = CTL_E_NO_DATASET;
    if (!realpath(path, real))
        return rf_err_set(err, -errno, "dataset folder %s: %s", path, strerror(errno));
    i = catalog_find_dir(d, real);
    if (i >= 0) {
        snprintf(name, CTL_DATASET_NAME_MAX + 1, "%s", d->cat[i].name);
        return 0;
    }
    rc = dataset_open(real, &ds, err);
    if (rc < 0) {
        *code = rc == -ENOENT ? CTL_E_NO_DATASET : CTL_E_BAD_DATASET;
        rf_err_prefix(err, "dataset folder %s", real);
        log_warn("OPEN refused: %s", err->msg);
        return rc;
    }
    make_name(real, name);
    i = catalog_find(d, name);
    if (i >= 0) { /* the config named a dataset so: the folders' hashes collide */
        dataset_close(ds);
        *code = CTL_E_BUSY;
        return rf_err_set(err, -EEXIST, "dataset folder %s: its name %s is taken by %s", real,
                          name, d->cat[i].dir);
    }
    i = catalog_add(d, name, real, ds, true, "opened on demand");
    if (i == -ENOSPC && catalog_retire_unused(d) > 0)
        i = catalog_add(d, name, real, ds, true, "opened on demand");
    if (i < 0) {
        dataset_close(ds);
        *code = CTL_E_BUSY;
        return rf_err_set(err, -ENOSPC,
                          "dataset folder %s: all %u catalogue slots hold datasets that "
                          "clients read; try again once one detaches", real,
                          (unsigned)CONF_DATASETS_MAX);
    }
    pool_roll(d);
    return 0;
}
