/*
 * test_user_daemon.c - the user daemon's folder and its starter, in C:
 * userdir.c's paths and its refusals (a folder of another uid, of another
 * mode, a link), OPEN's line (ctl_format_open, ctl_parse) round-tripping
 * awkward folders, the starter's search (RINGFEED_DAEMON), and spawn.c
 * against the real ringfeedd: four processes starting at once get one
 * daemon (one pid in its lock), a stale socket is replaced, and the
 * daemon, started with --idle-exit 1, exits by itself.  The daemons run in
 * a temporary XDG_RUNTIME_DIR and are killed at the end whatever happens.
 *
 *     test_user_daemon PATH-TO-ringfeedd
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "spawn.h"
#include "tap.h"
#include "userdir.h"

static char root[64];

static void test_paths(void)
{
    struct userdir ud;
    struct rf_err err;
    char longdir[200];

    setenv("XDG_RUNTIME_DIR", "/run/user/1000", 1);
    TAP_IS_INT(userdir_paths(&ud, 1000, &err), 0, "paths under XDG_RUNTIME_DIR");
    TAP_IS_STR(ud.socket, "/run/user/1000/ringfeed/ringfeed.sock", "its socket");
    TAP_IS_STR(ud.log, "/run/user/1000/ringfeed/ringfeedd.log", "its log");
    unsetenv("XDG_RUNTIME_DIR");
    TAP_IS_INT(userdir_paths(&ud, 1234, &err), 0, "paths without XDG_RUNTIME_DIR");
    TAP_IS_STR(ud.dir, "/tmp/ringfeed-1234", "the /tmp fallback, by uid");
    memset(longdir, 'x', sizeof(longdir) - 1);
    longdir[0] = '/';
    longdir[sizeof(longdir) - 1] = '\0';
    setenv("XDG_RUNTIME_DIR", longdir, 1);
    TAP_IS_INT(userdir_paths(&ud, 0, &err), -ENAMETOOLONG, "a socket path too long");
    TAP_OK(strstr(err.msg, "XDG_RUNTIME_DIR") != NULL, "... says what to change");
}

static void test_make(void)
{
    struct userdir ud;
    struct rf_err err;
    char link[128];

    setenv("XDG_RUNTIME_DIR", root, 1);
    userdir_paths(&ud, geteuid(), &err);
    TAP_IS_INT(userdir_make(&ud, geteuid(), &err), 0, "makes the folder");
    TAP_IS_INT(userdir_make(&ud, geteuid(), &err), 0, "and takes it again");
    chmod(ud.dir, 0755);
    TAP_IS_INT(userdir_make(&ud, geteuid(), &err), -EPERM, "mode 0755 refused");
    TAP_OK(strstr(err.msg, "0755") && strstr(err.msg, ud.dir), "... naming folder and mode");
    chmod(ud.dir, 0700);
    TAP_IS_INT(userdir_make(&ud, geteuid() + 1, &err), -EPERM, "another uid's folder refused");
    TAP_OK(strstr(err.msg, "belongs to uid") != NULL, "... saying whose it is");
    /* a link where the folder should be */
    snprintf(link, sizeof(link), "%s/l", root);
    mkdir(link, 0700);
    snprintf(ud.dir, sizeof(ud.dir), "%s/l/ringfeed", root);
    if (symlink(root, ud.dir) == 0) {
        TAP_IS_INT(userdir_make(&ud, geteuid(), &err), -ENOTDIR, "a link refused");
        unlink(ud.dir);
    }
    rmdir(link);
}

static void test_open_line(void)
{
    static const char *const folders[] = {
        "/data/packs/fmnist", "/data/my packs/a\tb", "/back\\slash/x", "/nl\nin/it",
        "/caf\xc3\xa9/\xff",
    };
    char line[CTL_LINE_MAX + 1];
    char big[CTL_PATH_MAX + 2];
    struct ctl_req req;
    size_t used;
    int n;

    for (size_t i = 0; i < sizeof(folders) / sizeof(folders[0]); i++) {
        n = ctl_format_open(folders[i], strlen(folders[i]), line, sizeof(line));
        tap_ok(n > 0 && ctl_parse(line, (size_t)n, &req, &used) == CTL_DONE &&
                   req.err == CTL_E_NONE && req.verb == CTL_VERB_OPEN &&
                   strcmp(req.path, folders[i]) == 0 && used == (size_t)n,
               "OPEN round trip %zu", i);
    }
    TAP_IS_INT(ctl_format_open("rel/x", 5, line, sizeof(line)), -EINVAL, "relative refused");
    memset(big, 'a', sizeof(big) - 1);
    big[0] = '/';
    big[sizeof(big) - 1] = '\0';
    TAP_IS_INT(ctl_format_open(big, strlen(big), line, sizeof(line)), -ENAMETOOLONG,
               "over CTL_PATH_MAX refused");
    n = snprintf(line, sizeof(line), "OPEN relative/x\n");
    ctl_parse(line, (size_t)n, &req, &used);
    TAP_IS_INT(req.err, CTL_E_BAD_ARG, "the daemon's parser refuses a relative folder");
    n = snprintf(line, sizeof(line), "OPEN /a\\x00b\n");
    ctl_parse(line, (size_t)n, &req, &used);
    TAP_IS_INT(req.err, CTL_E_BAD_ARG, "... and a NUL inside");
    n = snprintf(line, sizeof(line), "OPEN /a\\q\n");
    ctl_parse(line, (size_t)n, &req, &used);
    TAP_OK(req.err == CTL_E_BAD_ARG && strstr(req.msg, "escape"), "... and a bad escape");
}

static void test_find(const char *daemon)
{
    char out[4096];
    struct rf_err err;

    setenv("RINGFEED_DAEMON", "/nonexistent/ringfeedd", 1);
    TAP_IS_INT(spawn_find_daemon(out, sizeof(out), &err), -ENOENT,
               "RINGFEED_DAEMON not executable");
    TAP_OK(strstr(err.msg, "RINGFEED_DAEMON=/nonexistent/ringfeedd") != NULL,
           "... named in the message");
    setenv("RINGFEED_DAEMON", daemon, 1);
    TAP_IS_INT(spawn_find_daemon(out, sizeof(out), &err), 0, "RINGFEED_DAEMON taken");
    TAP_OK(out[0] == '/' && strstr(out, "ringfeedd"), "... made absolute (started in /)");
}

static pid_t lock_pid(const struct userdir *ud)
{
    char buf[32] = "";
    int fd = open(ud->lock, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return (pid_t)atoi(buf);
}

/* Alive and not a zombie. */
static int alive(pid_t pid)
{
    char path[64], buf[512];
    FILE *f;
    char *p;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    p = fgets(buf, sizeof(buf), f);
    fclose(f);
    p = p ? strrchr(buf, ')') : NULL;
    return p && p[1] == ' ' && p[2] != 'Z';
}

static void stop(pid_t pid)
{
    for (int i = 0; pid > 0 && alive(pid) && i < 2000; i++) {
        kill(pid, i < 1000 ? SIGTERM : SIGKILL);
        usleep(10000);
    }
}

static int count_in_log(const struct userdir *ud, const char *what)
{
    char buf[65536];
    int fd = open(ud->log, O_RDONLY), n = 0;
    ssize_t len = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

    if (fd >= 0)
        close(fd);
    buf[len > 0 ? len : 0] = '\0';
    for (char *p = buf; (p = strstr(p, what)); p++)
        n++;
    return n;
}

static void test_spawn(void)
{
    struct userdir ud;
    struct rf_err err;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    pid_t kids[4], pid, pid2;
    int ok = 0, st, fd;

    snprintf(root + strlen(root), sizeof(root) - strlen(root), "/s");
    mkdir(root, 0700);
    setenv("XDG_RUNTIME_DIR", root, 1);
    setenv("RINGFEED_IDLE_EXIT", "1", 1);
    userdir_paths(&ud, geteuid(), &err);
    for (int i = 0; i < 4; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            struct rf_err e;
            int rc = spawn_user_daemon(&ud, &e);

            if (rc < 0)
                fprintf(stderr, "starter %d: %s\n", i, e.msg);
            _exit(rc < 0);
        }
    }
    for (int i = 0; i < 4; i++)
        ok += waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    TAP_IS_INT(ok, 4, "four starters at once all find a daemon");
    pid = lock_pid(&ud);
    tap_ok(pid > 0 && alive(pid), "its pid is in the lock (%d)", (int)pid);
    TAP_IS_INT(count_in_log(&ud, "listening on"), 1, "one daemon started, not several");
    TAP_IS_INT(count_in_log(&ud, "already serves"), 0, "none refused for a lock held");
    TAP_IS_INT(spawn_user_daemon(&ud, &err), 0, "a later starter finds it at once");
    TAP_IS_INT(lock_pid(&ud), pid, "... the same daemon");
    /* idle: with --idle-exit 1 and nobody connected it exits by itself */
    for (int i = 0; i < 3000 && alive(pid); i++)
        usleep(10000);
    TAP_OK(!alive(pid), "it exits when idle (--idle-exit 1)");
    TAP_IS_INT(count_in_log(&ud, "(--idle-exit): exiting"), 1, "... and says so");
    stop(pid);

    /* a stale socket: a bound, never-listening socket file (ECONNREFUSED) */
    unlink(ud.socket);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ud.socket);
    TAP_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "a stale socket in place");
    close(fd);
    TAP_IS_INT(spawn_user_daemon(&ud, &err), 0, "a new daemon replaces the stale socket");
    if (err.msg[0])
        tap_diag("%s", err.msg);
    pid2 = lock_pid(&ud);
    tap_ok(pid2 > 0 && pid2 != pid && alive(pid2), "... a new daemon (%d)", (int)pid2);
    stop(pid2);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH-TO-ringfeedd\n", argv[0]);
        return 2;
    }
    snprintf(root, sizeof(root), "/tmp/rfud-XXXXXX");
    if (!mkdtemp(root))
        tap_bail("mkdtemp");
    test_paths();
    test_make();
    test_open_line();
    test_find(argv[1]);
    test_spawn();
    return tap_done();
}
