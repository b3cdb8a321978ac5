/*
 * spawn.c - starting a user's own daemon, `ringfeedd --user`, when a
 * program names a dataset folder that no running daemon serves (folder.c
 * decides when).  As gpg-agent and sccache are: the first program to need
 * it starts it, every later one finds it, and it exits by itself once no
 * program has used it for a while (daemon/userd.c).
 *
 * Which ringfeedd (spawn_find_daemon), in order:
 *   $RINGFEED_DAEMON           an explicit path (must be executable)
 *   beside libringfeed         dladdr() names the file holding this code:
 *     DIR/ringfeedd              a program with the client linked in (the
 *                                wheel's ringfeed-read in bin/)
 *     DIR/../daemon/ringfeedd    the build tree (build/client/)
 *     DIR/../../../../bin/ringfeedd  a wheel: the extension's copy of the
 *                                library in PREFIX/lib/pythonX.Y/
 *                                site-packages/ringfeed/, ringfeedd in
 *                                PREFIX/bin (pyproject.toml's scripts)
 *     DIR/../sbin/ringfeedd,     an install: PREFIX/lib or
 *     DIR/../../sbin/ringfeedd   PREFIX/lib/<multiarch>, ringfeedd in sbin
 *   $PATH, /usr/local/sbin, /usr/sbin
 *
 * Starting (spawn_user_daemon): one starter at a time holds start.lock
 * (flock), and checks again under it whether a daemon answers, so two
 * programs starting at once start one daemon.  The daemon is started by a
 * double fork: the middle child exits at once (reaped here), the daemon
 * calls setsid() and so outlives the program, in no process group of its,
 * with stdin /dev/null, stdout and stderr the log file in the folder
 * (truncated: the log of the daemon now running), working folder /,
 * every signal unblocked and at its default, no descriptor of the
 * program's, and the program's environment less what belongs to the
 * program's own service manager (NOTIFY_SOCKET, LISTEN_*, WATCHDOG_*:
 * otherwise the daemon would speak for the program to systemd).  The child
 * reports its pid, or exec's errno, through a close-on-exec pipe.
 *
 * A stale socket (a daemon that died: connect refused, its lock free) is
 * left for the new daemon, which replaces it once it holds the lock
 * (daemon/server.c), so no starter ever removes a live daemon's socket.
 * Between fork and exec only async-signal-safe calls are made: everything
 * (paths, argv, envp) is built before the fork.
 */
#include "spawn.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "strnum.h"

extern char **environ;

/* Where ringfeedd lies relative to the folder of the file holding this code. */
static const char *const beside[] = {
    "ringfeedd",
    "../daemon/ringfeedd",
    "../../../../bin/ringfeedd",
    "../sbin/ringfeedd",
    "../../sbin/ringfeedd",
};

/* The program's service manager's variables, never the daemon's. */
static const char *const dropped_env[] = {
    "NOTIFY_SOCKET=", "LISTEN_FDS=", "LISTEN_PID=", "LISTEN_FDNAMES=",
    "WATCHDOG_USEC=", "WATCHDOG_PID=",
};

static int executable(const char *path)
{
    struct stat sb;

    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && access(path, X_OK) == 0;
}

int spawn_find_daemon(char *out, size_t cap, struct rf_err *err)
{
    const char *env = getenv("RINGFEED_DAEMON"), *path = getenv("PATH");
    char dir[PATH_MAX] = "", buf[PATH_MAX];
    Dl_info info;

    if (env && env[0]) {
        if (!executable(env))
            return rf_err_set(err, -ENOENT,
                              "RINGFEED_DAEMON=%s is not an executable file: point it at "
                              "ringfeedd or unset it", env);
        /* absolute: the daemon is started in / */
        if (!realpath(env, buf) || strlen(buf) >= cap)
            return rf_err_set(err, -ENAMETOOLONG, "RINGFEED_DAEMON=%s: %s", env,
                              strerror(errno));
        snprintf(out, cap, "%s", buf);
        return 0;
    }
    if (dladdr((void *)spawn_find_daemon, &info) && info.dli_fname &&
        realpath(info.dli_fname, dir)) {
        char *slash = strrchr(dir, '/');

        if (slash)
            *slash = '\0';
        for (size_t i = 0; i < sizeof(beside) / sizeof(beside[0]); i++) {
            int n = snprintf(buf, sizeof(buf), "%s/%s", dir, beside[i]);

            if (n > 0 && (size_t)n < sizeof(buf) && executable(buf) &&
                realpath(buf, out) && strlen(out) < cap)
                return 0;
        }
    }
    for (const char *p = path ? path : ""; *p || p == path;) {
        size_t len = strcspn(p, ":");
        int n = snprintf(buf, sizeof(buf), "%.*s/ringfeedd", (int)len, p);

        if (len > 0 && n > 0 && (size_t)n < sizeof(buf) && executable(buf)) {
            snprintf(out, cap, "%s", buf);
            return 0;
        }
        p += len;
        if (*p == ':')
            p++;
        else
            break;
    }
    for (const char *const *s = (const char *const[]){"/usr/local/sbin/ringfeedd",
                                                      "/usr/sbin/ringfeedd", NULL};
         *s; s++) {
        if (executable(*s)) {
            snprintf(out, cap, "%s", *s);
            return 0;
        }
    }
    return rf_err_set(err, -ENOENT,
                      "cannot find ringfeedd to serve a dataset folder: looked beside %s, "
                      "on PATH, in /usr/local/sbin and /usr/sbin; set RINGFEED_DAEMON to "
                      "its path", dir[0] ? dir : "libringfeed");
}

/* Does a daemon accept connections at path?  0, or -errno of the connect. */
static int probe(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd, rc = 0;

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd == -1)
        return -errno;
    /* EAGAIN: its backlog is full, so it is up */
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 && errno != EAGAIN)
        rc = -errno;
    close(fd);
    return rc;
}

/* The last line of the log, for an error message. */
static void log_tail(const char *path, char *out, size_t cap)
{
    char buf[1024];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    off_t size;
    ssize_t n;
    char *end, *start;

    out[0] = '\0';
    if (fd == -1)
        return;
    size = lseek(fd, 0, SEEK_END);
    n = size < 0 ? -1 : pread(fd, buf, sizeof(buf) - 1, size > (off_t)sizeof(buf) - 1
                                                         ? size - (off_t)sizeof(buf) + 1 : 0);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    end = buf + n;
    while (end > buf && (end[-1] == '\n' || end[-1] == '\r'))
        *--end = '\0';
    start = strrchr(buf, '\n');
    start = start ? start + 1 : buf;
    if (cap > 8 && strlen(start) > cap - 8)
        start += strlen(start) - (cap - 8); /* its end says most */
    snprintf(out, cap, ": \"%.*s\"", (int)(cap > 8 ? cap - 8 : 0), start);
}

/* Does a running daemon hold lock (daemon/userd.c takes it for life)? */
static int lock_held(const char *lock)
{
    int fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), held;

    if (fd == -1)
        return 0;
    held = flock(fd, LOCK_SH | LOCK_NB) == -1 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/* Builds the daemon's environment: environ less dropped_env.  NULL: no memory. */
static char **daemon_env(void)
{
    size_t n = 0, k = 0;
    char **env;

    while (environ && environ[n])
        n++;
    env = calloc(n + 1, sizeof(*env));
    if (!env)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        int drop = 0;

        for (size_t j = 0; j < sizeof(dropped_env) / sizeof(dropped_env[0]); j++)
            drop |= strncmp(environ[i], dropped_env[j], strlen(dropped_env[j])) == 0;
        if (!drop)
            env[k++] = environ[i];
    }
    return env;
}

/* The double fork (file-top comment).  Returns the daemon's pid, or -errno
 * with err. */
static pid_t start(const char *exe, char *const argv[], char *const envp[], int logfd,
                   struct rf_err *err)
{
    int pfd[2], nullfd, st;
    pid_t mid, pid = -1;
    int child_errno = 0;
    ssize_t n;

    nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nullfd == -1)
        return rf_err_set(err, -errno, "/dev/null: %s", strerror(errno));
    if (pipe2(pfd, O_CLOEXEC) == -1) {
        close(nullfd);
        return rf_err_set(err, -errno, "pipe: %s", strerror(errno));
    }
    mid = fork();
    if (mid == 0) {
        sigset_t none;
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        pid_t me;

        if (fork() != 0)
            _exit(0); /* the middle child: done (or the fork failed: the pipe says) */
        setsid();
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (int s = 1; s < NSIG; s++)
            if (s != SIGKILL && s != SIGSTOP)
                sigaction(s, &dfl, NULL);
        if (dup2(nullfd, 0) == -1 || dup2(logfd, 1) == -1 || dup2(logfd, 2) == -1 ||
            chdir("/") == -1) {
            child_errno = errno;
            (void)!write(pfd[1], &child_errno, sizeof(child_errno));
            _exit(127);
        }
        umask(077);
        /* every other descriptor of the program closes at exec */
        close_range(3, ~0u, CLOSE_RANGE_CLOEXEC);
        me = getpid();
        (void)!write(pfd[1], &me, sizeof(me));
        execve(exe, argv, envp);
        child_errno = errno;
        (void)!write(pfd[1], &child_errno, sizeof(child_errno));
        _exit(127);
    }
    close(pfd[1]);
    close(nullfd);
    if (mid == -1) {
        close(pfd[0]);
        return rf_err_set(err, -errno, "fork: %s", strerror(errno));
    }
    while (waitpid(mid, &st, 0) == -1 && errno == EINTR)
        ;
    do
        n = read(pfd[0], &pid, sizeof(pid));
    while (n == -1 && errno == EINTR);
    if (n != sizeof(pid)) {
        close(pfd[0]);
        return rf_err_set(err, -ECHILD, "cannot start %s: the child did not report (fork "
                          "failed?)", exe);
    }
    do
        n = read(pfd[0], &child_errno, sizeof(child_errno));
    while (n == -1 && errno == EINTR);
    close(pfd[0]);
    if (n == sizeof(child_errno))
        return rf_err_set(err, -child_errno, "cannot run %s: %s", exe, strerror(child_errno));
    return pid;
}

/* Under start.lock, with no daemon answering: starts one and waits. */
static int start_and_wait(const struct userdir *ud, struct rf_err *err)
{
    char exe[PATH_MAX], idle[32], tail[400];
    char *argv[5] = {exe, "--user", NULL, NULL, NULL};
    const char *ie = getenv("RINGFEED_IDLE_EXIT");
    char **envp;
    int64_t deadline;
    int logfd, rc;
    pid_t pid;

    rc = spawn_find_daemon(exe, sizeof(exe), err);
    if (rc < 0)
        return rc;
    if (ie && ie[0]) {
        uint64_t v;

        if (strnum_u64(ie, strlen(ie), &v) < 0 || v > 31536000)
            return rf_err_set(err, -EINVAL, "RINGFEED_IDLE_EXIT=\"%.40s\": seconds, 0..31536000 "
                              "(0: the user daemon never exits when idle)", ie);
        snprintf(idle, sizeof(idle), "%llu", (unsigned long long)v);
        argv[2] = "--idle-exit";
        argv[3] = idle;
    }
    envp = daemon_env();
    if (!envp)
        return rf_err_set(err, -ENOMEM, "out of memory starting ringfeedd --user");
    logfd = open(ud->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (logfd == -1) {
        free(envp);
        return rf_err_set(err, -errno, "%s: %s", ud->log, strerror(errno));
    }
    pid = start(exe, argv, envp, logfd, err);
    close(logfd);
    free(envp);
    if (pid < 0)
        return (int)pid;
    deadline = client_now_ns() + (int64_t)SPAWN_TIMEOUT_MS * 1000000;
    for (;;) {
        if (probe(ud->socket) == 0)
            return 0;
        if (kill(pid, 0) == -1 && errno == ESRCH && !lock_held(ud->lock)) {
            /* gone, and no other daemon holds the folder's lock either */
            if (probe(ud->socket) == 0)
                return 0;
            log_tail(ud->log, tail, sizeof(tail));
            return rf_err_set(err, -ECONNREFUSED,
                              "ringfeedd --user (%s, pid %d) exited before it answered on %s; "
                              "its log is %s%s", exe, (int)pid, ud->socket, ud->log, tail);
        }
        if (client_now_ns() > deadline) {
            log_tail(ud->log, tail, sizeof(tail));
            return rf_err_set(err, -ETIMEDOUT,
                              "ringfeedd --user (%s, pid %d) did not answer on %s within %d "
                              "s; its log is %s%s", exe, (int)pid, ud->socket,
                              SPAWN_TIMEOUT_MS / 1000, ud->log, tail);
        }
        sleep_ms(10);
    }
}

int spawn_user_daemon(const struct userdir *ud, struct rf_err *err)
{
    int fd, rc;

    rc = userdir_make(ud, geteuid(), err);
    if (rc < 0)
        return rc;
    if (probe(ud->socket) == 0)
        return 0;
    fd = open(ud->start_lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd == -1)
        return rf_err_set(err, -errno, "%s: %s", ud->start_lock, strerror(errno));
    while ((rc = flock(fd, LOCK_EX)) == -1 && errno == EINTR)
        ;
    if (rc == -1) {
        rc = rf_err_set(err, -errno, "flock %s: %s", ud->start_lock, strerror(errno));
        close(fd);
        return rc;
    }
    /* under the lock: another starter may have finished meanwhile */
    rc = probe(ud->socket) == 0 ? 0 : start_and_wait(ud, err);
    close(fd); /* and the lock with it */
    return rc;
}
