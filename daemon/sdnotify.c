/* sdnotify.c - sd_notify, the watchdog variables and socket activation,
 * spoken directly (see sdnotify.h for the protocols). */
#include "sdnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A plain decimal of 1..20 digits without sign or blanks, no overflow. */
static int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    size_t i;

    if (!s || !s[0])
        return -EINVAL;
    for (i = 0; s[i]; i++) {
        unsigned dgt;

        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        dgt = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - dgt) / 10)
            return -EINVAL;
        v = v * 10 + dgt;
    }
    *out = v;
    return 0;
}

int sdn_parse_notify_addr(const char *s, struct sockaddr_un *sa, socklen_t *len)
{
    size_t n;

    if (!s || !s[0])
        return -EINVAL;
    if (strncmp(s, "vsock:", 6) == 0)
        return -EAFNOSUPPORT;
    if (s[0] != '/' && s[0] != '@')
        return -EINVAL;
    n = strlen(s);
    if (n > sizeof(sa->sun_path) - (s[0] == '/' ? 1 : 0))
        return -ENAMETOOLONG;
    if (s[0] == '@' && n < 2)
        return -EINVAL;
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, s, n);
    if (s[0] == '@') {
        sa->sun_path[0] = '\0';
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    }
    return 0;
}

int sdn_parse_watchdog(const char *usec, const char *pid, pid_t self, uint64_t *usec_out)
{
    uint64_t u, p;

    if (!usec)
        return 0;
    if (parse_u64(usec, &u) < 0 || u == 0)
        return -EINVAL;
    if (pid) {
        if (parse_u64(pid, &p) < 0 || p == 0)
            return -EINVAL;
        if (p != (uint64_t)self)
            return 0;
    }
    *usec_out = u;
    return 1;
}

int sdn_parse_listen_fds(const char *pid, const char *fds, pid_t self)
{
    uint64_t p, n;

    if (!pid || !fds)
        return 0;
    if (parse_u64(pid, &p) < 0 || p == 0 || parse_u64(fds, &n) < 0)
        return -EINVAL;
    if (p != (uint64_t)self)
        return 0;
    if (n > 4096)
        return -EINVAL;
    return (int)n;
}

int sdn_check_listen_fd(int fd, char *path, size_t cap)
{
    struct sockaddr_un sa;
    socklen_t len = sizeof(int), salen = sizeof(sa);
    int type = 0, acc = 0;
    size_t plen;

    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == -1)
        return -errno;
    len = sizeof(int);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) == -1)
        return -errno;
    memset(&sa, 0, sizeof(sa));
    if (getsockname(fd, (struct sockaddr *)&sa, &salen) == -1)
        return -errno;
    if (sa.sun_family != AF_UNIX)
        return -EAFNOSUPPORT;
    if (type != SOCK_STREAM)
        return -EPROTOTYPE;
    if (!acc)
        return -EINVAL;
    if (salen <= offsetof(struct sockaddr_un, sun_path) || sa.sun_path[0] == '\0')
        return -EADDRNOTAVAIL;
    plen = strnlen(sa.sun_path, salen - offsetof(struct sockaddr_un, sun_path));
    if (plen >= cap)
        return -ENAMETOOLONG;
    memcpy(path, sa.sun_path, plen);
    path[plen] = '\0';
    return 0;
}

int sdn_open_env(struct sdn *n, bool *bad_watchdog)
{
    const char *ns = getenv("NOTIFY_SOCKET");
    int rc;

    n->fd = -1;
    n->watchdog_usec = 0;
    *bad_watchdog = false;
    rc = sdn_parse_watchdog(getenv("WATCHDOG_USEC"), getenv("WATCHDOG_PID"), getpid(),
                            &n->watchdog_usec);
    if (rc < 0)
        *bad_watchdog = true;
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    if (!ns) {
        n->watchdog_usec = 0; /* nobody to ping */
        return 0;
    }
    rc = sdn_parse_notify_addr(ns, &n->addr, &n->addr_len);
    unsetenv("NOTIFY_SOCKET");
    if (rc < 0) {
        n->watchdog_usec = 0;
        return rc;
    }
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (n->fd == -1) {
        n->watchdog_usec = 0;
        return -errno;
    }
    return 0;
}

int sdn_send(const struct sdn *n, const char *msg)
{
    size_t len = strlen(msg);
    ssize_t sent;

    if (n->fd < 0)
        return 0;
    if (len > SDN_MESSAGE_MAX)
        return -EMSGSIZE;
    do {
        sent = sendto(n->fd, msg, len, MSG_NOSIGNAL, (const struct sockaddr *)&n->addr,
                      n->addr_len);
    } while (sent == -1 && errno == EINTR);
    if (sent == -1)
        return -errno;
    return (size_t)sent == len ? 0 : -EMSGSIZE; /* a datagram goes whole or not at all */
}

void sdn_close(struct sdn *n)
{
    if (n->fd >= 0)
        close(n->fd);
    n->fd = -1;
}

int sdn_take_listen_fd(char *path, size_t cap)
{
    int n = sdn_parse_listen_fds(getenv("LISTEN_PID"), getenv("LISTEN_FDS"), getpid());
    int rc, flags;

    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    if (n == 0)
        return -1;
    if (n < 0)
        return n;
    if (n != 1) {
        for (int i = 0; i < n; i++)
            close(SDN_LISTEN_FDS_START + i);
        return -E2BIG;
    }
    rc = sdn_check_listen_fd(SDN_LISTEN_FDS_START, path, cap);
    if (rc == 0) {
        flags = fcntl(SDN_LISTEN_FDS_START, F_GETFD);
        if (flags == -1 || fcntl(SDN_LISTEN_FDS_START, F_SETFD, flags | FD_CLOEXEC) == -1)
            rc = -errno;
    }
    if (rc < 0) {
        close(SDN_LISTEN_FDS_START);
        return rc;
    }
    return SDN_LISTEN_FDS_START;
}
