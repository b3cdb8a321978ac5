/*
 * server.c - the control socket: accepts connections and answers one line
 * with one reply (proto/ctl.h), in order.
 *
 * A connection is a small state machine driven by conn_drive():
 *
 *     READING --line--> (handle) --reply queued--> WRITING --flushed--> READING
 *        \--too long--> SKIPPING (drop through the next LF) --> READING
 *        \--ATTACH--> ATTACHING --ring made--> (reply sent) READING
 *     any state --EOF, error, kick--> CLOSING
 *
 * ATTACHING: the scheduler makes the ring off the loop (stream.c MAKING)
 * and calls server_attach_made; meanwhile no line is parsed, but reading
 * goes on (into the bounded input buffer), so a client that hangs up is
 * seen and its ring's making cancelled.
 *
 * One reply is in flight per connection at a time: the next line is not
 * parsed until the previous reply is flushed.  So a client that never reads
 * its replies holds at most one reply and CTL_LINE_MAX bytes of input in
 * the daemon (reading stops while the input buffer is full), however much
 * it sends: memory stays bounded.
 *
 * ATTACH's reply carries the ring memfd and the eventfd (SCM_RIGHTS), so it
 * goes out with sendmsg() on the socket itself, which is safe because
 * nothing else is queued then.  After ATTACH the connection stays open and
 * its end is the client's detach.
 *
 * The socket is a pathname socket, never abstract (the file's mode and
 * group are then a first fence).  It is either passed by systemd (socket
 * activation, sdnotify.h: fd 3, kept, never unlinked by us) or created
 * here with socket-mode and socket-group (and unlinked at exit).  Every
 * accepted peer is then checked with SO_PEERCRED/SO_PEERGROUPS: root, the
 * daemon's own uid, and allow-uid/allow-gid (or, when neither is set, the
 * socket file's group) may talk.
 *
 * A peer that is not let in (denied by that rule, over max-connections, or
 * arriving while the daemon stops) is answered by conn_refuse() as it is
 * accepted: one ERR line, written without waiting, and the descriptor
 * closed in the same turn of the loop.  Such a peer is never counted in
 * conn_open and holds nothing once on_connection() returns, so no number
 * of refused peers can take an allowed one's place.  The peer still reads
 * why: the line is in its receive queue before the close (then EOF, or
 * ECONNRESET if it had written something), and a request it writes after
 * the close fails with EPIPE with the line still there to read
 * (tools/ctlconn.c does).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cpus.h"
#include "daemon.h"
#include "fault.h"
#include "fileio.h"
#include "log.h"
#include "meta.h"
#include "mix.h"
#include "ring.h"
#include "sdnotify.h"

#define INBUF (CTL_LINE_MAX * 2)
#define REPLY_MAX CTL_REPLY_MAX


enum conn_state { C_READING, C_WRITING, C_SKIPPING, C_ATTACHING, C_CLOSING };

struct conn {
    uv_pipe_t pipe;
    struct daemon *d;
    enum conn_state state;
    bool skip_after_write;  /* the line was too long: skip once written */
    bool eof_pending;       /* ATTACHING: the peer shut its writing side only */
    bool reading;
    char in[INBUF];
    size_t inlen;
    char *out;              /* the reply being written */
    uv_write_t wreq;
    struct stream *st;      /* attached stream, or NULL */
    uv_poll_t epoll;        /* its eventfd: the client released batches */
    bool epoll_open;
    int closing;            /* handles (pipe, epoll) whose close is pending */
    char kick_reason[200];
    uint64_t last_ns;       /* last bytes read (idle-sec) */
    uint32_t uid;           /* the peer's (SO_PEERCRED): the config's weight rules */
    uint32_t pid;           /* the peer's process when it connected */
};

static uv_pipe_t listener;
static bool listener_open;
static char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static bool created_socket;
static bool activated;      /* the socket came from systemd (LISTEN_FDS) */
static gid_t socket_gid = (gid_t)-1; /* the socket file's group */
static uv_timer_t idle_timer;   /* closes silent unattached connections */
static bool idle_timer_open;
static bool over_logged;        /* max-connections reached: logged this episode */
static bool emfile_logged;      /* accept ran out of descriptors: logged this episode */

static void conn_drive(struct conn *c);

static void on_conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;

    if (--c->closing > 0)
        return;
    free(c->out);
    free(c);
}

/* The client wrote its eventfd: it released batches. */
static void on_eventfd(uv_poll_t *h, int status, int events)
{
    struct conn *c = h->data;

    (void)events;
    if (status < 0 || !c->st)
        return;
    sched_released(c->d, c->st);
}

/*
 * Closes the connection; an attached client's ring says why, with code
 * (ring_hdr.error): -ESHUTDOWN (the daemon stops: reconnect later),
 * -ECONNRESET (this connection failed: reconnect), -EPROTO (the client
 * broke the rules: do not come back the same way).
 */
static void conn_close_code(struct conn *c, const char *why, int code)
{
    if (c->state == C_CLOSING)
        return;
    c->state = C_CLOSING;
    /* its place is free now: uv_close closes the descriptor at once, and
     * the peer sees EOF before on_conn_closed runs (a peer that connects
     * in between must not find max-connections still reached) */
    c->d->conn_open--;
    userd_clients_changed(c->d);
    if (c->epoll_open) {
        /* no more release callbacks: the stream and its eventfd go next */
        uv_poll_stop(&c->epoll);
        c->closing++;
        uv_close((uv_handle_t *)&c->epoll, on_conn_closed);
        c->epoll_open = false;
    }
    if (c->st) {
        sched_detach(c->d, c->st, why, code);
        c->st = NULL;
        catalog_sweep(c->d); /* a dataset a reload removed may be unused now */
    }
    c->closing++;
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

static void conn_close(struct conn *c, const char *why)
{
    conn_close_code(c, why, c->d->stopping ? -ESHUTDOWN : -ECONNRESET);
}

void server_kick(void *conn, const char *why)
{
    struct conn *c = conn;

    if (!c)
        return;
    log_warn("closing a client connection: %s", why);
    conn_close_code(c, why, -EPROTO);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = h->data;

    (void)suggested;
    buf->base = c->in + c->inlen;
    buf->len = INBUF - c->inlen;
}

/* Has the peer closed both ways (not just shut its writing side down)? */
static bool peer_gone(struct conn *c)
{
    struct pollfd p = { .events = POLLOUT };
    int fd;

    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0)
        return true;
    p.fd = fd;
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct conn *c = s->data;

    (void)buf;
    if (n == UV_EOF && c->state == C_ATTACHING && !peer_gone(c)) {
        /* a request then shutdown(SHUT_WR): it still reads the answer */
        c->eof_pending = true;
        return;
    }
    if (n < 0) {
        conn_close(c, n == UV_EOF ? "connection closed" : uv_strerror((int)n));
        return;
    }
    c->inlen += (size_t)n;
    c->last_ns = clock_mono_ns();
    conn_drive(c);
}

static void set_reading(struct conn *c, bool on)
{
    if (on == c->reading || c->state == C_CLOSING)
        return;
    if (on)
        uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
    else
        uv_read_stop((uv_stream_t *)&c->pipe);
    c->reading = on;
}

static void on_written(uv_write_t *req, int status)
{
    struct conn *c = req->data;

    free(c->out);
    c->out = NULL;
    if (c->state == C_CLOSING)
        return;
    if (status < 0) {
        conn_close(c, uv_strerror(status));
        return;
    }
    if (c->eof_pending) { /* the ATTACH's refusal to a peer that shut its writing side */
        conn_close(c, "connection closed");
        return;
    }
    c->state = c->skip_after_write ? C_SKIPPING : C_READING;
    c->skip_after_write = false;
    conn_drive(c);
}

/* Queues reply (ownership passes to the connection). */
static void conn_send(struct conn *c, char *reply, size_t len)
{
    uv_buf_t b = uv_buf_init(reply, (unsigned)len);
    int rc;

    c->out = reply;
    c->state = C_WRITING;
    c->wreq.data = c;
    rc = fault_hit(FAULT_SEND) ? UV_EPIPE
                               : uv_write(&c->wreq, (uv_stream_t *)&c->pipe, &b, 1, on_written);
    if (rc < 0) {
        free(c->out);
        c->out = NULL;
        conn_close(c, uv_strerror(rc));
    }
}

__attribute__((format(printf, 3, 4)))
static void send_err(struct conn *c, enum ctl_errcode code, const char *fmt, ...)
{
    char msg[CTL_ERR_MSG_MAX + 1];
    char *out = malloc(CTL_LINE_MAX + 1);
    va_list ap;
    int n;

    if (!out) {
        conn_close(c, "out of memory");
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    n = ctl_reply_err(out, CTL_LINE_MAX + 1, code, "%s", msg);
    if (n < 0)
        n = ctl_reply_err(out, CTL_LINE_MAX + 1, CTL_E_INTERNAL, NULL);
    c->d->bad_requests++;
    conn_send(c, out, (size_t)n);
}

/* ---- verbs ---------------------------------------------------------- */

typedef void verb_fn(struct conn *c, const struct ctl_req *req);

static void do_ping(struct conn *c, const struct ctl_req *req)
{
    char *out = malloc(64);

    (void)req;
    if (!out)
        return conn_close(c, "out of memory");
    conn_send(c, out, (size_t)ctl_reply_ok(out, 64, "pong"));
}

static void do_status(struct conn *c, const struct ctl_req *req)
{
    char line[CTL_LINE_MAX - 8];
    char *out = malloc(CTL_LINE_MAX + 1);

    (void)req;
    if (!out)
        return conn_close(c, "out of memory");
    stats_status_line(c->d, line, sizeof(line));
    conn_send(c, out, (size_t)ctl_reply_ok(out, CTL_LINE_MAX + 1, "%s", line));
}

/* Sends a multi-line reply built by fill() (lines end in LF), or an ERR
 * when it does not fit the protocol's bounds (CTL_REPLY_MAX bytes,
 * CTL_REPLY_LINES_MAX lines): never a truncated reply, never a crash. */
static void send_multi(struct conn *c, const char *what,
                       int (*fill)(struct daemon *, char *, size_t, size_t *))
{
    char *body = malloc(REPLY_MAX), *out;
    size_t len = 0;
    int lines, hdr;

    if (!body)
        return conn_close(c, "out of memory");
    lines = fill(c->d, body, REPLY_MAX - 64, &len);
    if (lines < 0 || (unsigned)lines > CTL_REPLY_LINES_MAX) {
        free(body);
        log_warn("%s: the reply is over the protocol's %u lines or %u bytes (%u clients "
                 "attached); refused", what, CTL_REPLY_LINES_MAX, CTL_REPLY_MAX,
                 c->d->sched.nstreams);
        return send_err(c, CTL_E_INTERNAL,
                        "%s reply would be over %u lines or %u bytes (%u clients attached): "
                        "lower max-clients, or read METRICS", what, CTL_REPLY_LINES_MAX,
                        CTL_REPLY_MAX, c->d->sched.nstreams);
    }
    out = malloc(len + 64);
    if (!out) {
        free(body);
        return conn_close(c, "out of memory");
    }
    hdr = ctl_reply_multi(out, 64, (unsigned)lines, NULL);
    if (hdr < 0) { /* cannot happen after the check above; never an offset */
        free(out);
        free(body);
        return send_err(c, CTL_E_INTERNAL, "%s reply header: %s", what, strerror(-hdr));
    }
    memcpy(out + hdr, body, len);
    free(body);
    conn_send(c, out, (size_t)hdr + len);
}

static void do_stats(struct conn *c, const struct ctl_req *req)
{
    (void)req;
    send_multi(c, "STATS", stats_format);
}

static void do_metrics(struct conn *c, const struct ctl_req *req)
{
    (void)req;
    send_multi(c, "METRICS", stats_metrics);
}

static int datasets_fill(struct daemon *d, char *buf, size_t cap, size_t *len)
{
    int lines = 0;

    for (uint32_t i = 0; i < d->ncat; i++) {
        const struct dataset_info *info;
        char shape[128] = "-";
        size_t sl = 0;
        int n;

        if (!catalog_offers(d, i)) /* a hole, or removed by a reload */
            continue;
        info = dataset_info(d->cat[i].ds);
        for (unsigned k = 0; k < info->ndim && sl < sizeof(shape) - 24; k++)
            sl += (size_t)snprintf(shape + sl, sizeof(shape) - sl, "%s%llu", k ? "x" : "",
                                   (unsigned long long)info->shape[k]);
        n = snprintf(buf + *len, cap - *len, "%s samples=%llu kind=%s shape=%s classes=%u\n",
                     d->cat[i].name, (unsigned long long)info->samples,
                     dataset_kind_name(info->kind), shape, info->classes);

        if (n < 0 || (size_t)n >= cap - *len)
            return -ENOSPC;
        *len += (size_t)n;
        lines++;
    }
    return lines;
}

static void do_datasets(struct conn *c, const struct ctl_req *req)
{
    (void)req;
    send_multi(c, "DATASETS", datasets_fill);
}

static void do_workers(struct conn *c, const struct ctl_req *req)
{
    char *out;

    if (req->workers_auto) {
        autoscale_set_auto(c->d, true, "WORKERS auto over the control socket");
    } else {
        if (pool_resize(c->d, req->workers) < 0)
            return send_err(c, CTL_E_BAD_ARG, "WORKERS %u: out of range", req->workers);
        autoscale_set_auto(c->d, false, "WORKERS n over the control socket");
        log_info("workers: %u (asked over the control socket)", req->workers);
    }
    out = malloc(64);
    if (!out)
        return conn_close(c, "out of memory");
    if (req->workers_auto)
        conn_send(c, out, (size_t)ctl_reply_ok(out, 64, "workers auto"));
    else
        conn_send(c, out, (size_t)ctl_reply_ok(out, 64, "workers %u", req->workers));
}

/* RELOAD: reload.c's reload, answered once applied or refused. */
static void do_reload(struct conn *c, const struct ctl_req *req)
{
    char changes[512];
    struct rf_err err;
    char *out;

    (void)req;
    if (reload_now(c->d, "RELOAD over the control socket", changes, sizeof(changes), &err) < 0)
        return send_err(c, CTL_E_RELOAD_REFUSED, "%s", err.msg);
    out = malloc(600);
    if (!out)
        return conn_close(c, "out of memory");
    conn_send(c, out, (size_t)ctl_reply_ok(out, 600, "reloaded: %s", changes));
}

/* CLASSES, SOURCES and SUBSETS: replies built by meta.c. */
static void do_meta(struct conn *c, const struct ctl_req *req)
{
    enum ctl_errcode code = CTL_E_INTERNAL;
    char msg[CTL_ERR_MSG_MAX + 1];
    char *out = NULL;
    size_t len = 0;

    if (meta_reply(c->d, req, &out, &len, &code, msg, sizeof(msg)) < 0)
        return send_err(c, code, "%s", msg);
    conn_send(c, out, len);
}

static enum ctl_errcode attach_code(int rc)
{
    switch (rc) {
    case -ENOENT: return CTL_E_NO_DATASET;
    case -ENOMEM: return CTL_E_OVER_BUDGET;
    case -EPROTO: return CTL_E_VERSION;
    case -EUSERS: return CTL_E_TOO_MANY;
    case -EBADMSG: return CTL_E_BAD_DATASET;     /* failed while served (catalog_fail) */
    case -EAGAIN: return CTL_E_BUSY;             /* out of memory for the stream */
    case -EINVAL: return CTL_E_BAD_ARG;
    default: return CTL_E_INTERNAL;
    }
}

/* Sends "OK attach ..." with the ring's memfd and eventfd in one sendmsg. */
static int send_attach_reply(struct conn *c, struct stream *st)
{
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } u;
    char line[256 + MIX_SOURCES_MAX * (MIX_NAME_MAX + 22)];
    char sources[MIX_SOURCES_MAX * (MIX_NAME_MAX + 22) + 1];
    int fds[2], n, fd;
    struct sched_info si;
    struct iovec iov;
    struct msghdr mh = { 0 };
    struct cmsghdr *cm;
    ssize_t sent;

    sched_info(st, &si);
    fds[0] = si.memfd;
    fds[1] = si.efd;
    /* a mixture's sources=NAME:FIRST,... (docs/design/mixtures.md): clients
     * that do not know the key skip it */
    sched_sources_text(st, sources, sizeof(sources));
    n = ctl_reply_ok(line, sizeof(line), "attach id=%u size=%llu depth=%u batches=%llu%s%s",
                     si.id, (unsigned long long)si.size, si.depth, (unsigned long long)si.bpe,
                     sources[0] ? " sources=" : "", sources);
    if (n < 0)
        return -EINVAL;
    iov.iov_base = line;
    iov.iov_len = (size_t)n;
    memset(&u, 0, sizeof(u));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = u.buf;
    mh.msg_controllen = sizeof(u.buf);
    cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, sizeof(fds));
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0)
        return -EBADF;
    if (fault_hit(FAULT_SEND))
        return -EPIPE;
    do {
        sent = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (sent == -1 && errno == EINTR);
    if (sent == -1)
        return -errno;
    if (sent != n) /* the fds went with the first byte; the rest is lost */
        return -EAGAIN;
    return 0;
}

/*
 * The systemd unit (or the cgroup's last part) of process pid, from
 * /proc/PID/cgroup: "trainer.service", "session-3.scope", "docker-ID.scope".
 * Bytes outside [A-Za-z0-9._@:-] become '_' (it goes into STATS lines and
 * metric labels).  Returns out, or NULL where /proc does not say (the
 * process is gone, or hidden: the unit's ProtectProc=invisible hides other
 * users' processes).
 */
static const char *peer_unit(uint32_t pid, char *out, size_t cap)
{
    char path[64], text[4096], cg[2048];
    const char *last;
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
    n = fio_read_small(path, text, sizeof(text));
    if (n <= 0)
        return NULL;
    if (cpus_parse_cgroup(text, (size_t)n, cg, sizeof(cg)) < 0 || strcmp(cg, "/") == 0) {
        /* cgroup v1: systemd's own hierarchy names the unit */
        const char *s = strstr(text, ":name=systemd:");
        const char *e;

        if (!s)
            return NULL;
        s += strlen(":name=systemd:");
        e = strchr(s, '\n');
        snprintf(cg, sizeof(cg), "%.*s", (int)(e ? e - s : (long)strlen(s)), s);
    }
    last = strrchr(cg, '/');
    last = last ? last + 1 : cg;
    if (!*last)
        return NULL;
    if (snprintf(out, cap, "%s", last) >= (int)cap)
        out[cap - 1] = '\0'; /* a long name, cut */
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '@' || *p == ':' || *p == '-'))
            *p = '_';
    return out;
}

static void do_attach(struct conn *c, const struct ctl_req *req)
{
    struct rf_err err;
    struct stream *st;
    int rc;

    if (c->st)
        return send_err(c, CTL_E_BUSY, "this connection is already attached; open another");
    if (c->d->stopping)
        return send_err(c, CTL_E_CLOSING, "the daemon is shutting down");
    rc = sched_attach(c->d, &req->attach, c->uid, c, &st, &err);
    if (rc < 0) {
        /* every refusal counts: version, dataset, transform, fit, budget */
        c->d->attach_refused++;
        log_info("ATTACH refused: %s", err.msg);
        return send_err(c, attach_code(rc), "%s", err.msg);
    }
    {
        char unit[64];

        sched_set_peer(st, c->pid, peer_unit(c->pid, unit, sizeof(unit)));
    }
    c->st = st;
    c->state = C_ATTACHING; /* server_attach_made goes on */
}

void server_attach_made(void *conn, struct stream *st, int rc, const struct rf_err *err)
{
    struct conn *c = conn;
    struct sched_info si;

    if (c->state != C_ATTACHING) /* cannot be: a closed connection cancels the making */
        return;
    c->state = C_READING;
    if (rc < 0) {
        c->st = NULL;
        c->d->attach_refused++;
        log_info("ATTACH refused: %s", err->msg);
        send_err(c, attach_code(rc), "%s", err->msg); /* on_written closes if eof_pending */
        conn_drive(c);
        return;
    }
    c->st = st;
    rc = send_attach_reply(c, st);
    if (rc < 0) {
        conn_close(c, "could not send the ring to the client");
        return;
    }
    sched_info(st, &si);
    if (uv_poll_init(c->d->loop, &c->epoll, si.efd) != 0) {
        conn_close(c, "cannot watch the ring's eventfd");
        return;
    }
    c->epoll.data = c;
    c->epoll_open = true;
    uv_poll_start(&c->epoll, UV_READABLE, on_eventfd);
    sched_start(c->d, st, c);
    autoscale_budget_changed(c->d); /* the default budget leaves the new client a CPU */
    if (c->eof_pending)
        conn_close(c, "connection closed");
    else
        conn_drive(c); /* lines that came while the ring was made */
}

/* OPEN <folder>: the name it is served under.  A user daemon opens it
 * (userd.c); this daemon otherwise answers only for a folder its config
 * names, and says how to serve any other. */
static void do_open(struct conn *c, const struct ctl_req *req)
{
    char name[CTL_DATASET_NAME_MAX + 1], *out;
    enum ctl_errcode code;
    struct rf_err err;
    int i;

    if (c->d->stopping)
        return send_err(c, CTL_E_CLOSING, "the daemon is shutting down");
    if (userd_active()) {
        if (userd_open(c->d, req->path, name, &code, &err) < 0)
            return send_err(c, code, "%s", err.msg);
    } else {
        i = catalog_find_dir(c->d, req->path);
        if (i < 0) {
            log_info("OPEN %s refused: not in the catalogue", req->path);
            return send_err(c, CTL_E_CATALOGUE_ONLY,
                            "dataset folder %s: this daemon serves only the datasets its "
                            "config names; serve the folder with your own daemon, ringfeedd "
                            "--user (libringfeed starts it for a folder), or name it in "
                            "ringfeedd.conf: dataset.NAME = %s, then reload (SIGHUP)",
                            req->path, req->path);
        }
        snprintf(name, sizeof(name), "%s", c->d->cat[i].name);
    }
    out = malloc(CTL_LINE_MAX + 1);
    if (!out)
        return conn_close(c, "out of memory");
    conn_send(c, out, (size_t)ctl_reply_ok(out, CTL_LINE_MAX + 1, "dataset=%s", name));
}

static verb_fn *const verbs[CTL_VERB_COUNT] = {
    [CTL_VERB_PING] = do_ping,
    [CTL_VERB_STATUS] = do_status,
    [CTL_VERB_STATS] = do_stats,
    [CTL_VERB_METRICS] = do_metrics,
    [CTL_VERB_WORKERS] = do_workers,
    [CTL_VERB_DATASETS] = do_datasets,
    [CTL_VERB_ATTACH] = do_attach,
    [CTL_VERB_CLASSES] = do_meta,
    [CTL_VERB_SOURCES] = do_meta,
    [CTL_VERB_OPEN] = do_open,
    [CTL_VERB_SUBSETS] = do_meta,
    [CTL_VERB_RELOAD] = do_reload,
};

/* ---- the state machine ---------------------------------------------- */

static void consume(struct conn *c, size_t n)
{
    memmove(c->in, c->in + n, c->inlen - n);
    c->inlen -= n;
}

static void conn_drive(struct conn *c)
{
    while (c->state == C_READING || c->state == C_SKIPPING) {
        struct ctl_req req;
        size_t used = 0;
        enum ctl_status s;

        if (c->state == C_SKIPPING) {
            bool found = ctl_skip_line(c->in, c->inlen, &used);

            consume(c, used);
            if (!found)
                break;
            c->state = C_READING;
            continue;
        }
        s = ctl_parse(c->in, c->inlen, &req, &used);
        if (s == CTL_NEED_MORE)
            break;
        if (s == CTL_TOO_LONG) {
            c->skip_after_write = true;
            send_err(c, req.err, "%s", req.msg);
            break;
        }
        consume(c, used);
        if (ctl_req_is_blank(&req))
            continue;
        if (req.err != CTL_E_NONE) {
            send_err(c, req.err, "%s", req.msg);
            break;
        }
        if (req.verb <= CTL_VERB_NONE || req.verb >= CTL_VERB_COUNT || !verbs[req.verb]) {
            send_err(c, CTL_E_BAD_VERB, "verb not served");
            break;
        }
        verbs[req.verb](c, &req);
    }
    if (c->state == C_CLOSING)
        return;
    /* read while there is room and we are not waiting on a write */
    set_reading(c, c->state != C_WRITING && c->inlen < INBUF);
}

static bool id_in(uint32_t id, const uint32_t *list, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (list[i] == id)
            return true;
    return false;
}

/* Is gid the peer's primary group or one of its supplementary groups? */
static bool peer_has_gid(gid_t gid, const struct ucred *cr, const gid_t *groups, unsigned ng)
{
    if (gid == (gid_t)-1)
        return false;
    if (cr->gid == gid)
        return true;
    for (unsigned i = 0; i < ng; i++)
        if (groups[i] == gid)
            return true;
    return false;
}

/*
 * The access rule (file-top comment) for the peer on fd.  Returns true to
 * let it in; false with its uid and gid in *cr (all -1 when the kernel
 * would not say) to refuse it.
 */
static bool peer_allowed(const struct daemon *d, int fd, struct ucred *cr)
{
    gid_t small[64], *groups = small;
    socklen_t len = sizeof(*cr), glen = sizeof(small);
    unsigned ng = 0;
    bool ok = false;

    memset(cr, 0xff, sizeof(*cr));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cr, &len) == -1)
        return false;
    if (userd_active()) /* its own uid only (userd.c) */
        return cr->uid == geteuid();
    if (cr->uid == 0 || cr->uid == geteuid())
        return true;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, small, &glen) == 0) {
        ng = glen / sizeof(gid_t);
    } else if (errno == ERANGE && glen > sizeof(small)) {
        groups = malloc(glen);
        if (groups && getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0)
            ng = glen / sizeof(gid_t);
    }
    if (d->cf.n_allow_uid || d->cf.n_allow_gid) {
        ok = id_in(cr->uid, d->cf.allow_uid, d->cf.n_allow_uid);
        for (unsigned i = 0; i < d->cf.n_allow_gid && !ok; i++)
            ok = peer_has_gid(d->cf.allow_gid[i], cr, groups, ng);
    } else {
        ok = peer_has_gid(socket_gid, cr, groups, ng);
    }
    if (groups != small)
        free(groups);
    return ok;
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

/* An injected accept failure (fault.h): the peer is taken off the backlog
 * and dropped, as libuv does for a real EMFILE.  Returns 0 when it was. */
static int drop_peer(uv_stream_t *server)
{
    uv_pipe_t *p = malloc(sizeof(*p));
    int rc;

    if (!p)
        return -ENOMEM;
    uv_pipe_init(server->loop, p, 0);
    rc = uv_accept(server, (uv_stream_t *)p);
    uv_close((uv_handle_t *)p, free_handle);
    return rc;
}

/*
 * Answers a peer that is not let in with one ERR line (code, and the
 * message fmt makes) and closes it at once.  c is accepted and was never
 * counted in conn_open; the line goes out with one non-blocking write,
 * never queued (a fresh socket's buffer is empty, so it fits; if the write
 * fails the peer gets the close alone), and uv_close() closes the
 * descriptor before this returns.  c is freed by the close callback.
 */
__attribute__((format(printf, 3, 4)))
static void conn_refuse(struct conn *c, enum ctl_errcode code, const char *fmt, ...)
{
    char msg[CTL_ERR_MSG_MAX + 1], line[CTL_LINE_MAX + 1];
    uv_buf_t b;
    va_list ap;
    int n;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    n = ctl_reply_err(line, sizeof(line), code, "%s", msg);
    if (n < 0)
        n = ctl_reply_err(line, sizeof(line), CTL_E_INTERNAL, NULL);
    c->d->bad_requests++;
    if (n > 0) {
        b = uv_buf_init(line, (unsigned)n);
        uv_try_write((uv_stream_t *)&c->pipe, &b, 1);
    }
    c->state = C_CLOSING;
    c->closing = 1;
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct daemon *d = server->loop->data;
    struct ucred cr;
    struct conn *c;
    int fd;

    if (status == 0 && fault_hit(FAULT_ACCEPT) && drop_peer(server) == 0)
        status = UV_EMFILE;
    if (status < 0) {
        /* EMFILE/ENFILE repeat for every waiting peer: once per episode */
        if ((status != UV_EMFILE && status != UV_ENFILE) || !emfile_logged)
            log_error("accept: %s, with %llu control connections and %u clients open; "
                      "peers are reset until descriptors free up (raise LimitNOFILE, or "
                      "lower max-connections or max-clients)", uv_strerror(status),
                      (unsigned long long)d->conn_open, d->sched.nstreams);
        if (status == UV_EMFILE || status == UV_ENFILE)
            emfile_logged = true;
        return;
    }
    emfile_logged = false;
    c = fault_calloc(1, sizeof(*c));
    if (!c) {
        /* the peer must still leave the backlog: libuv stops accepting
         * while one waits unaccepted */
        log_error("accept: out of memory; the peer is dropped");
        drop_peer(server);
        return;
    }
    c->d = d;
    uv_pipe_init(d->loop, &c->pipe, 0);
    c->pipe.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
        c->closing = 1; /* never counted open */
        uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
        return;
    }
    d->conn_total++;
    if (d->stopping)
        return conn_refuse(c, CTL_E_CLOSING, "the daemon is shutting down");
    memset(&cr, 0xff, sizeof(cr));
    /* the access rule before the count: a denied peer never holds a place,
     * and learns that it is denied rather than that the daemon is full */
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0 || !peer_allowed(d, fd, &cr)) {
        char why[CTL_ERR_MSG_MAX];

        d->conn_denied++;
        log_warn("denied a control connection from pid %d uid %d gid %d", (int)cr.pid,
                 (int)cr.uid, (int)cr.gid);
        if (userd_active() && !userd_peer_ok(cr.uid, why, sizeof(why)))
            return conn_refuse(c, CTL_E_DENIED, "%s", why);
        return conn_refuse(c, CTL_E_DENIED,
                           "uid %d gid %d may not use this socket: allowed are root, uid %u "
                           "(the daemon's user) and %s; see allow-uid and allow-gid in "
                           "ringfeedd.conf", (int)cr.uid, (int)cr.gid, (unsigned)geteuid(),
                           d->cf.n_allow_uid || d->cf.n_allow_gid
                               ? "the allow-uid/allow-gid lists"
                               : "the socket file's group");
    }
    if (d->conn_open >= d->cf.max_connections) {
        d->conn_refused++;
        if (!over_logged)
            log_warn("a control connection over max-connections %u (%llu open): refusing "
                     "new ones until some close (silent ones close after idle-sec %u)",
                     d->cf.max_connections, (unsigned long long)d->conn_open,
                     d->cf.idle_sec);
        over_logged = true;
        return conn_refuse(c, CTL_E_TOO_MANY,
                           "%u control connections open, the daemon's max-connections: try "
                           "again later", d->cf.max_connections);
    }
    d->conn_open++;
    userd_clients_changed(d);
    if (d->conn_open * 2 <= d->cf.max_connections)
        over_logged = false;
    c->uid = (uint32_t)cr.uid;
    c->pid = (uint32_t)cr.pid;
    c->last_ns = clock_mono_ns();
    c->state = C_READING;
    conn_drive(c);
}

/* Is something answering on path?  Then another daemon owns it. */
static bool socket_alive(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool alive;

    if (fd == -1)
        return false;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    alive = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return alive;
}

/* The gid socket-group names (a number or a group name); -ENOENT. */
static int resolve_group(const char *name, gid_t *out)
{
    struct group gr, *res = NULL;
    char buf[4096];
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(name, &end, 10);
    if (name[0] >= '0' && name[0] <= '9' && *end == '\0' && errno == 0 && v < UINT32_MAX) {
        *out = (gid_t)v;
        return 0;
    }
    if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || !res)
        return -ENOENT;
    *out = res->gr_gid;
    return 0;
}

/* Gives the socket file we created its mode and group; learns its group
 * (for the access rule) whoever created it. */
static void socket_perms(const struct daemon *d)
{
    struct stat sb;

    if (created_socket) {
        if (chmod(socket_path, (mode_t)d->cf.socket_mode) == -1)
            log_warn("chmod %s %04o: %s", socket_path, d->cf.socket_mode, strerror(errno));
        if (d->cf.socket_group[0]) {
            gid_t gid;

            if (resolve_group(d->cf.socket_group, &gid) < 0)
                log_warn("socket-group %s: no such group; %s keeps its group",
                         d->cf.socket_group, socket_path);
            else if (chown(socket_path, (uid_t)-1, gid) == -1)
                log_warn("chown %s to group %s: %s", socket_path, d->cf.socket_group,
                         strerror(errno));
        }
    }
    socket_gid = stat(socket_path, &sb) == 0 ? sb.st_gid : (gid_t)-1;
}

void server_reconfigure(struct daemon *d)
{
    if (activated && (d->cf.socket_mode != CONF_DEFAULT_SOCKET_MODE || d->cf.socket_group[0]))
        log_info("socket-mode and socket-group do not apply to a socket systemd passed "
                 "(SocketMode=, SocketGroup= in ringfeedd.socket)");
    socket_perms(d);
}

/* Takes the listening socket systemd passed; 1 when there was one. */
static int adopt_activated(struct daemon *d)
{
    char path[sizeof(socket_path)];
    int fd = sdn_take_listen_fd(path, sizeof(path)), rc;

    if (fd == -1)
        return 0;
    if (fd < 0) {
        log_error("socket activation: the socket systemd passed cannot be used: %s "
                  "(ringfeedd takes one listening AF_UNIX stream socket on a path)",
                  strerror(-fd));
        return fd;
    }
    uv_pipe_init(d->loop, &listener, 0);
    listener_open = true;
    rc = uv_pipe_open(&listener, fd);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&listener, 128, on_connection);
    if (rc < 0) {
        log_error("socket activation: cannot listen on fd %d (%s): %s", fd, path,
                  uv_strerror(rc));
        return rc;
    }
    snprintf(socket_path, sizeof(socket_path), "%s", path);
    activated = true;
    socket_perms(d);
    if (strcmp(path, d->cf.socket) != 0 && conf_is_set(&d->cf, CONF_SOCKET))
        log_warn("socket-activated on %s; the configured socket %s is not used", path,
                 d->cf.socket);
    log_info("listening on %s (socket-activated)", path);
    return 1;
}

/* Closes connections that have not attached and have said nothing for
 * idle-sec (attached clients' connections are quiet by design). */
static void idle_walk(uv_handle_t *h, void *arg)
{
    struct conn *c;
    uint64_t *closed = arg, limit;

    if (h->type != UV_NAMED_PIPE || h == (uv_handle_t *)&listener || !h->data ||
        uv_is_closing(h))
        return;
    c = h->data;
    limit = (uint64_t)c->d->cf.idle_sec * 1000000000ull;
    if (c->st || c->state != C_READING || !limit || clock_mono_ns() - c->last_ns < limit)
        return;
    conn_close(c, "idle");
    (*closed)++;
}

static void on_idle_timer(uv_timer_t *t)
{
    struct daemon *d = t->loop->data;
    uint64_t closed = 0;

    uv_walk(d->loop, idle_walk, &closed);
    if (closed) {
        d->conn_idle_closed += closed;
        log_info("closed %llu control connection(s) that had not attached and were silent "
                 "for idle-sec (%u s)", (unsigned long long)closed, d->cf.idle_sec);
    }
}

/* Raises the descriptor limit to its hard limit, and says when it is still
 * below what max-connections and max-clients may need (a connection is one
 * descriptor, an attached client three: socket, memfd, eventfd). */
static void raise_nofile(const struct daemon *d)
{
    struct rlimit rl;
    uint64_t need = (uint64_t)d->cf.max_connections + 2ull * d->cf.max_clients + 2ull * POOL_MAX + 64;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need)
        log_warn("the descriptor limit is %llu; max-connections %u and max-clients %u may "
                 "need %llu: raise LimitNOFILE (ulimit -n) or lower them",
                 (unsigned long long)rl.rlim_cur, d->cf.max_connections, d->cf.max_clients,
                 (unsigned long long)need);
}

static void idle_timer_start(struct daemon *d)
{
    if (!idle_timer_open) {
        uv_timer_init(d->loop, &idle_timer);
        idle_timer_open = true;
    }
    /* a tick a second: idle-sec is whole seconds, and a reload may change it */
    uv_timer_start(&idle_timer, on_idle_timer, 1000, 1000);
}

int server_start(struct daemon *d)
{
    const char *path = d->cf.socket;
    struct stat sb;
    mode_t old_mask;
    int rc;

    raise_nofile(d);
    idle_timer_start(d);
    rc = adopt_activated(d);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    if (strlen(path) >= sizeof(socket_path)) {
        log_error("socket path %s is longer than %zu bytes", path, sizeof(socket_path) - 1);
        return -ENAMETOOLONG;
    }
    snprintf(socket_path, sizeof(socket_path), "%s", path);
    if (lstat(path, &sb) == 0) {
        if (!S_ISSOCK(sb.st_mode)) {
            log_error("%s exists and is not a socket; remove it or choose --socket", path);
            return -EEXIST;
        }
        if (socket_alive(path)) {
            log_error("another ringfeedd is listening on %s", path);
            return -EADDRINUSE;
        }
        unlink(path); /* stale, from a daemon that died */
    }
    uv_pipe_init(d->loop, &listener, 0);
    listener_open = true;
    /* never wider than socket-mode, not even before the chmod */
    old_mask = umask((mode_t)(~d->cf.socket_mode & 0777));
    rc = uv_pipe_bind(&listener, path);
    umask(old_mask);
    if (rc < 0) {
        if ((rc == UV_EACCES || rc == UV_ENOENT || rc == UV_EPERM) && geteuid() != 0 &&
            !userd_active())
            log_error("cannot listen on %s: %s: that is the system daemon's place; as a "
                      "user, run ringfeedd --user (your own daemon, in $XDG_RUNTIME_DIR/"
                      "ringfeed/) or give --socket PATH in a folder of yours", path,
                      uv_strerror(rc));
        else
            log_error("cannot listen on %s: %s", path, uv_strerror(rc));
        return rc;
    }
    created_socket = true;
    socket_perms(d);
    rc = uv_listen((uv_stream_t *)&listener, 128, on_connection);
    if (rc < 0) {
        log_error("cannot listen on %s: %s", path, uv_strerror(rc));
        return rc;
    }
    log_info("listening on %s", path);
    return 0;
}

void server_stop(struct daemon *d)
{
    (void)d;
    if (idle_timer_open && !uv_is_closing((uv_handle_t *)&idle_timer))
        uv_close((uv_handle_t *)&idle_timer, NULL);
    if (listener_open && !uv_is_closing((uv_handle_t *)&listener))
        uv_close((uv_handle_t *)&listener, NULL);
    if (created_socket) {
        unlink(socket_path);
        created_socket = false;
    }
}

/* Closes every client connection (shutdown). */
static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (h->type == UV_NAMED_PIPE && h != (uv_handle_t *)&listener && h->data &&
        !uv_is_closing(h))
        conn_close(h->data, "the daemon is shutting down");
}

void server_close_all(struct daemon *d)
{
    uv_walk(d->loop, walk_close, NULL);
}
