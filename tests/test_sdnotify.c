/*
 * test_sdnotify.c - daemon/sdnotify.c: the $NOTIFY_SOCKET address parser
 * (pathname, abstract, the length rules, vsock refused), the watchdog and
 * listen-fds variables (pid matching, malformed values), the listening
 * socket check against real sockets of every wrong kind, a notification
 * received on a pathname and on an abstract datagram socket, and the
 * environment taken and cleared (sdn_open_env, sdn_take_listen_fd on fd 3).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sdnotify.h"
#include "tap.h"

static char dir[64];

static socklen_t base(void)
{
    return (socklen_t)offsetof(struct sockaddr_un, sun_path);
}

static void test_notify_addr(void)
{
    struct sockaddr_un sa;
    socklen_t len = 0;
    char s[200];

    TAP_IS_INT(sdn_parse_notify_addr("/run/systemd/notify", &sa, &len), 0, "a pathname");
    TAP_IS_STR(sa.sun_path, "/run/systemd/notify", "path copied");
    TAP_IS_INT(len, base() + strlen("/run/systemd/notify") + 1, "length counts the NUL");
    TAP_OK(sa.sun_family == AF_UNIX, "AF_UNIX");
    TAP_IS_INT(sdn_parse_notify_addr("@ringfeed/x", &sa, &len), 0, "an abstract name");
    TAP_OK(sa.sun_path[0] == '\0' && memcmp(sa.sun_path + 1, "ringfeed/x", 10) == 0,
           "'@' becomes the leading NUL");
    TAP_IS_INT(len, base() + 11, "abstract length: exactly the name, no NUL after");
    TAP_IS_INT(sdn_parse_notify_addr(NULL, &sa, &len), -EINVAL, "NULL");
    TAP_IS_INT(sdn_parse_notify_addr("", &sa, &len), -EINVAL, "empty");
    TAP_IS_INT(sdn_parse_notify_addr("@", &sa, &len), -EINVAL, "'@' alone");
    TAP_IS_INT(sdn_parse_notify_addr("run/notify", &sa, &len), -EINVAL, "a relative path");
    TAP_IS_INT(sdn_parse_notify_addr("vsock:2:1234", &sa, &len), -EAFNOSUPPORT, "vsock");
    memset(s, 'a', sizeof(s));
    s[0] = '/';
    s[107] = '\0';
    TAP_IS_INT(sdn_parse_notify_addr(s, &sa, &len), 0, "a 107-byte path fits sun_path");
    s[107] = 'a';
    s[108] = '\0';
    TAP_IS_INT(sdn_parse_notify_addr(s, &sa, &len), -ENAMETOOLONG, "108 bytes do not");
    s[0] = '@';
    TAP_IS_INT(sdn_parse_notify_addr(s, &sa, &len), 0, "an abstract name fills all 108");
    s[108] = 'a';
    s[109] = '\0';
    TAP_IS_INT(sdn_parse_notify_addr(s, &sa, &len), -ENAMETOOLONG, "109 do not");
}

static void test_watchdog(void)
{
    uint64_t u = 7;

    TAP_IS_INT(sdn_parse_watchdog(NULL, NULL, 100, &u), 0, "unset: off");
    TAP_IS_INT(u, 7, "untouched when off");
    TAP_IS_INT(sdn_parse_watchdog("200000", NULL, 100, &u), 1, "usec without pid: on");
    TAP_IS_INT(u, 200000, "usec");
    TAP_IS_INT(sdn_parse_watchdog("30000000", "100", 100, &u), 1, "our pid: on");
    TAP_IS_INT(u, 30000000, "usec again");
    u = 7;
    TAP_IS_INT(sdn_parse_watchdog("200000", "101", 100, &u), 0, "another pid: off");
    TAP_IS_INT(u, 7, "untouched for another pid");
    TAP_IS_INT(sdn_parse_watchdog("0", NULL, 100, &u), -EINVAL, "zero usec");
    TAP_IS_INT(sdn_parse_watchdog("", NULL, 100, &u), -EINVAL, "empty usec");
    TAP_IS_INT(sdn_parse_watchdog("-5", NULL, 100, &u), -EINVAL, "signed usec");
    TAP_IS_INT(sdn_parse_watchdog("12x", NULL, 100, &u), -EINVAL, "trailing junk");
    TAP_IS_INT(sdn_parse_watchdog(" 12", NULL, 100, &u), -EINVAL, "leading blank");
    TAP_IS_INT(sdn_parse_watchdog("18446744073709551616", NULL, 100, &u), -EINVAL,
               "past 2^64 - 1");
    TAP_IS_INT(sdn_parse_watchdog("18446744073709551615", NULL, 100, &u), 1, "2^64 - 1");
    TAP_IS_INT(sdn_parse_watchdog("100", "abc", 100, &u), -EINVAL, "malformed pid");
    TAP_IS_INT(sdn_parse_watchdog("100", "0", 100, &u), -EINVAL, "pid 0");
}

static void test_listen_fds(void)
{
    TAP_IS_INT(sdn_parse_listen_fds(NULL, NULL, 42), 0, "unset: none");
    TAP_IS_INT(sdn_parse_listen_fds("42", NULL, 42), 0, "no count: none");
    TAP_IS_INT(sdn_parse_listen_fds(NULL, "1", 42), 0, "no pid: none");
    TAP_IS_INT(sdn_parse_listen_fds("42", "1", 42), 1, "one for us");
    TAP_IS_INT(sdn_parse_listen_fds("42", "3", 42), 3, "three for us");
    TAP_IS_INT(sdn_parse_listen_fds("43", "1", 42), 0, "for another pid: none");
    TAP_IS_INT(sdn_parse_listen_fds("42", "0", 42), 0, "zero fds");
    TAP_IS_INT(sdn_parse_listen_fds("42", "one", 42), -EINVAL, "malformed count");
    TAP_IS_INT(sdn_parse_listen_fds("x42", "1", 42), -EINVAL, "malformed pid");
    TAP_IS_INT(sdn_parse_listen_fds("0", "1", 42), -EINVAL, "pid 0");
    TAP_IS_INT(sdn_parse_listen_fds("42", "100000", 42), -EINVAL, "an absurd count");
}

static int unix_socket(int type, const char *path, bool abstract, bool listening)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    socklen_t len;
    int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);

    if (fd == -1)
        return -1;
    if (path) {
        snprintf(sa.sun_path + (abstract ? 1 : 0), sizeof(sa.sun_path) - 1, "%s", path);
        len = (socklen_t)(base() + strlen(path) + (abstract ? 1 : 1));
        if (bind(fd, (struct sockaddr *)&sa, len) == -1) {
            close(fd);
            return -1;
        }
    }
    if (listening && listen(fd, 4) == -1) {
        close(fd);
        return -1;
    }
    return fd;
}

static void test_check_listen_fd(void)
{
    char path[200], got[200];
    int fd, p[2];

    snprintf(path, sizeof(path), "%s/listen.sock", dir);
    fd = unix_socket(SOCK_STREAM, path, false, true);
    TAP_IS_INT(sdn_check_listen_fd(fd, got, sizeof(got)), 0, "a listening pathname socket");
    TAP_IS_STR(got, path, "its path");
    TAP_IS_INT(sdn_check_listen_fd(fd, got, 8), -ENAMETOOLONG, "path past the buffer");
    close(fd);
    unlink(path);

    fd = unix_socket(SOCK_STREAM, path, false, false);
    TAP_IS_INT(sdn_check_listen_fd(fd, got, sizeof(got)), -EINVAL, "bound, not listening");
    close(fd);
    unlink(path);

    fd = unix_socket(SOCK_DGRAM, path, false, false);
    TAP_IS_INT(sdn_check_listen_fd(fd, got, sizeof(got)), -EPROTOTYPE, "a datagram socket");
    close(fd);
    unlink(path);

    fd = unix_socket(SOCK_SEQPACKET, path, false, true);
    TAP_IS_INT(sdn_check_listen_fd(fd, got, sizeof(got)), -EPROTOTYPE, "a seqpacket socket");
    close(fd);
    unlink(path);

    fd = unix_socket(SOCK_STREAM, "ringfeed-test-abstract", true, true);
    TAP_IS_INT(sdn_check_listen_fd(fd, got, sizeof(got)), -EADDRNOTAVAIL, "an abstract socket");
    close(fd);

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        struct sockaddr_in in = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

        /* loopback always exists here: a failure to listen is a failure */
        TAP_OK(bind(fd, (struct sockaddr *)&in, sizeof(in)) == 0 && listen(fd, 1) == 0,
               "listen on loopback");
        TAP_IS_INT(sdn_check_listen_fd(fd, got, sizeof(got)), -EAFNOSUPPORT,
                   "a listening TCP socket");
        close(fd);
    }

    if (pipe(p) == 0) {
        TAP_IS_INT(sdn_check_listen_fd(p[0], got, sizeof(got)), -ENOTSOCK, "a pipe");
        close(p[0]);
        close(p[1]);
    }
    TAP_IS_INT(sdn_check_listen_fd(1000, got, sizeof(got)), -EBADF, "a closed fd");
}

static void recv_check(int rx, const char *want, const char *name)
{
    char buf[256];
    ssize_t n = recv(rx, buf, sizeof(buf) - 1, MSG_DONTWAIT);

    buf[n > 0 ? n : 0] = '\0';
    if (!tap_ok(n == (ssize_t)strlen(want) && strcmp(buf, want) == 0, "%s", name))
        tap_diag("  got %zd bytes \"%s\"", n, buf);
}

static void test_send(void)
{
    char path[200], abs_name[64];
    struct sdn n = { .fd = -1 };
    bool bad;
    int rx;

    TAP_IS_INT(sdn_send(&n, "READY=1"), 0, "sending while off is a no-op");

    snprintf(path, sizeof(path), "%s/notify.sock", dir);
    rx = unix_socket(SOCK_DGRAM, path, false, false);
    setenv("NOTIFY_SOCKET", path, 1);
    setenv("WATCHDOG_USEC", "200000", 1);
    unsetenv("WATCHDOG_PID");
    TAP_IS_INT(sdn_open_env(&n, &bad), 0, "open from the environment");
    TAP_OK(n.fd >= 0 && !bad, "notifications on");
    TAP_IS_INT(n.watchdog_usec, 200000, "watchdog asked for");
    TAP_OK(!getenv("NOTIFY_SOCKET") && !getenv("WATCHDOG_USEC"),
           "the variables are gone, so workers do not inherit them");
    TAP_OK((fcntl(n.fd, F_GETFD) & FD_CLOEXEC) != 0, "the notify socket is close-on-exec");
    TAP_IS_INT(sdn_send(&n, "READY=1\nSTATUS=up"), 0, "send");
    recv_check(rx, "READY=1\nSTATUS=up", "one datagram, as sent");
    TAP_IS_INT(sdn_send(&n, "WATCHDOG=1"), 0, "send a ping");
    recv_check(rx, "WATCHDOG=1", "the ping");
    sdn_close(&n);
    close(rx);
    unlink(path);
    TAP_IS_INT(sdn_send(&n, "READY=1"), 0, "closed: a no-op");

    snprintf(abs_name, sizeof(abs_name), "ringfeed-test-notify-%d", (int)getpid());
    rx = unix_socket(SOCK_DGRAM, abs_name, true, false);
    snprintf(path, sizeof(path), "@%s", abs_name);
    setenv("NOTIFY_SOCKET", path, 1);
    setenv("WATCHDOG_USEC", "200000", 1);
    setenv("WATCHDOG_PID", "1", 1);
    TAP_IS_INT(sdn_open_env(&n, &bad), 0, "an abstract notify socket");
    TAP_IS_INT(n.watchdog_usec, 0, "a watchdog for another pid is not ours");
    TAP_IS_INT(sdn_send(&n, "STOPPING=1"), 0, "send to the abstract socket");
    recv_check(rx, "STOPPING=1", "received on the abstract socket");
    sdn_close(&n);
    close(rx);

    setenv("NOTIFY_SOCKET", "relative", 1);
    setenv("WATCHDOG_USEC", "soon", 1);
    TAP_IS_INT(sdn_open_env(&n, &bad), -EINVAL, "a malformed NOTIFY_SOCKET is reported");
    TAP_OK(n.fd == -1 && bad && n.watchdog_usec == 0, "off, and the bad watchdog said");
    unsetenv("NOTIFY_SOCKET");
    TAP_IS_INT(sdn_open_env(&n, &bad), 0, "no NOTIFY_SOCKET");
    TAP_OK(n.fd == -1 && n.watchdog_usec == 0, "notifications off");
}

/* Puts fd on fd 3 as systemd would and sets the variables for count fds. */
static void pass_on_3(int fd, int count)
{
    char pid[32], n[16];

    if (fd != 3) {
        dup2(fd, 3);
        close(fd);
    }
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    snprintf(n, sizeof(n), "%d", count);
    setenv("LISTEN_PID", pid, 1);
    setenv("LISTEN_FDS", n, 1);
    setenv("LISTEN_FDNAMES", "ringfeedd.socket", 1);
}

static void test_take_listen_fd(void)
{
    char path[200], got[200];
    int fd, rc;

    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    TAP_IS_INT(sdn_take_listen_fd(got, sizeof(got)), -1, "nothing passed");

    snprintf(path, sizeof(path), "%s/activated.sock", dir);
    fd = unix_socket(SOCK_STREAM, path, false, true);
    fcntl(fd, F_SETFD, 0);
    pass_on_3(fd, 1);
    rc = sdn_take_listen_fd(got, sizeof(got));
    TAP_IS_INT(rc, 3, "the passed socket on fd 3");
    TAP_IS_STR(got, path, "its path");
    TAP_OK((fcntl(3, F_GETFD) & FD_CLOEXEC) != 0, "made close-on-exec: workers never get it");
    TAP_OK(!getenv("LISTEN_PID") && !getenv("LISTEN_FDS") && !getenv("LISTEN_FDNAMES"),
           "the variables are gone");
    close(3);
    unlink(path);

    fd = unix_socket(SOCK_DGRAM, path, false, false);
    pass_on_3(fd, 1);
    TAP_IS_INT(sdn_take_listen_fd(got, sizeof(got)), -EPROTOTYPE, "a datagram socket refused");
    TAP_OK(fcntl(3, F_GETFD) == -1 && errno == EBADF, "and closed");
    unlink(path);

    fd = unix_socket(SOCK_STREAM, path, false, true);
    pass_on_3(fd, 2);
    dup2(3, 4);
    TAP_IS_INT(sdn_take_listen_fd(got, sizeof(got)), -E2BIG, "two sockets refused");
    TAP_OK(fcntl(3, F_GETFD) == -1 && fcntl(4, F_GETFD) == -1, "both closed");
    unlink(path);

    fd = unix_socket(SOCK_STREAM, path, false, true);
    pass_on_3(fd, 1);
    setenv("LISTEN_PID", "1", 1);
    TAP_IS_INT(sdn_take_listen_fd(got, sizeof(got)), -1, "another process's sockets: none");
    TAP_OK(fcntl(3, F_GETFD) != -1, "and left alone");
    close(3);
    unlink(path);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/rf-sdn-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_notify_addr();
    test_watchdog();
    test_listen_fds();
    test_check_listen_fd();
    test_send();
    test_take_listen_fd();
    rmdir(dir);
    return tap_done();
}
