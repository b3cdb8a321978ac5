/* ctlconn.c - one request and its reply over the control socket (ctlconn.h). */
#include "ctlconn.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "client.h" /* client_socket_path(): the same defaults as libringfeed */

int ctlconn_open(struct ctlconn *cc, const char *socket_path, struct rf_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int rc, e;

    *cc = (struct ctlconn){.fd = -1, .timeout_ms = CTLCONN_TIMEOUT_MS};
    rc = client_socket_path(socket_path, cc->path, sizeof(cc->path), err);
    if (rc < 0)
        return rc;
    memcpy(sa.sun_path, cc->path, strlen(cc->path) + 1);
    cc->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (cc->fd == -1)
        return rf_err_set(err, -errno, "socket(AF_UNIX): %s", strerror(errno));
    while (connect(cc->fd, (struct sockaddr *)&sa, sizeof(sa)) == -1) {
        e = errno;
        if (e == EINTR)
            continue; /* a Unix socket connects at once or not at all */
        if (e == EISCONN)
            break;
        return rf_err_set(err, -e,
                          "cannot connect to the ringfeed daemon at %s: %s%s", cc->path,
                          strerror(e),
                          e == ENOENT || e == ECONNREFUSED
                              ? ": is ringfeedd running? (start it, or give --socket "
                                "or RINGFEED_SOCKET)"
                              : "");
    }
    return 0;
}

static int timeout_of(const struct ctlconn *cc)
{
    return cc->timeout_ms > 0 ? cc->timeout_ms : CTLCONN_TIMEOUT_MS;
}

static int send_line(struct ctlconn *cc, const char *line, struct rf_err *err)
{
    size_t len = strlen(line), off = 0;
    struct pollfd pfd = {.fd = cc->fd, .events = POLLOUT};

    while (off < len) {
        ssize_t n = send(cc->fd, line + off, len - off, MSG_NOSIGNAL);

        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            poll(&pfd, 1, timeout_of(cc));
            continue;
        }
        if (n == -1)
            return rf_err_set(err, -errno, "sending to the daemon at %s: %s", cc->path,
                              strerror(errno));
        off += (size_t)n;
    }
    return 0;
}

/*
 * Reads one whole reply into cc->buf and parses it into *rep.  Returns 0,
 * or -errno with err set: the connection failed or ended first (-ECONNRESET
 * for an end), the reply timed out, or it broke the protocol (-EPROTO).
 */
static int read_reply(struct ctlconn *cc, struct ctl_reply *rep, struct rf_err *err)
{
    struct pollfd pfd = {.fd = cc->fd, .events = POLLIN};
    int64_t deadline = ((int64_t)clock_mono_ns()) + (int64_t)timeout_of(cc) * 1000000;
    size_t used;
    int rc;

    cc->len = 0;
    for (;;) {
        int64_t left = deadline - ((int64_t)clock_mono_ns());
        ssize_t n;

        if (cc->len > 0) {
            enum ctl_status st = ctl_parse_reply(cc->buf, cc->len, rep, &used);

            if (st == CTL_DONE)
                return 0;
            if (st == CTL_BAD)
                return rf_err_set(err, -EPROTO,
                                  "the daemon at %s broke the protocol: %s", cc->path,
                                  rep->why ? rep->why : "bad reply");
        }
        if (left <= 0)
            return rf_err_set(err, -ETIMEDOUT, "the daemon at %s did not reply within %.1f s",
                              cc->path, timeout_of(cc) / 1000.0);
        if (cc->cap - cc->len < 4096) {
            size_t cap = cc->cap ? cc->cap * 2 : 8192;
            char *p;

            if (cap > 2 * (size_t)CTL_REPLY_MAX)
                return rf_err_set(err, -EPROTO, "the daemon's reply is over %u bytes",
                                  CTL_REPLY_MAX);
            p = realloc(cc->buf, cap);
            if (!p)
                return rf_err_set(err, -ENOMEM, "out of memory reading the reply");
            cc->buf = p;
            cc->cap = cap;
        }
        rc = poll(&pfd, 1, (int)(left / 1000000) + 1);
        if (rc == -1 && errno != EINTR)
            return rf_err_set(err, -errno, "poll: %s", strerror(errno));
        if (rc <= 0)
            continue;
        n = read(cc->fd, cc->buf + cc->len, cc->cap - cc->len);
        if (n == -1) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return rf_err_set(err, -errno, "reading from the daemon at %s: %s", cc->path,
                              strerror(errno));
        }
        if (n == 0)
            return rf_err_set(err, -ECONNRESET,
                              "the daemon at %s closed the connection before it replied",
                              cc->path);
        cc->len += (size_t)n;
    }
}

int ctlconn_request(struct ctlconn *cc, const char *line, struct ctl_reply *rep,
                    struct rf_err *err)
{
    struct rf_err rerr;
    int rc;

    rc = send_line(cc, line, err);
    if (rc == -EPIPE || rc == -ECONNRESET) {
        /* the daemon closed the connection before it took the request: a
         * refused peer (denied, over max-connections, the daemon stopping)
         * is answered with one ERR line and closed at once, and that line
         * is still there to read */
        if (read_reply(cc, rep, &rerr) == 0)
            return 0;
        return rf_err_set(err, rc,
                          "the daemon at %s closed the connection before it took the "
                          "request, and sent no reply (%s)", cc->path, strerror(-rc));
    }
    if (rc < 0)
        return rc;
    return read_reply(cc, rep, err);
}

void ctlconn_close(struct ctlconn *cc)
{
    if (cc->fd >= 0)
        close(cc->fd);
    free(cc->buf);
    *cc = (struct ctlconn){.fd = -1};
}
