/*
 * attach.c - the ATTACH handshake: connect to the control socket, send the
 * ATTACH line, receive the reply and the descriptors it carries, check them,
 * and map the ring.
 *
 * The daemon answers with one sendmsg: the line
 *     OK attach id=<n> size=<bytes> depth=<d> batches=<per epoch>
 * carrying exactly two descriptors by SCM_RIGHTS, [ring memfd, eventfd], or
 * the line `ERR <code> <message>` carrying none.  Nothing the daemon sends is
 * taken on faith: the client receives with room for more descriptors than
 * expected and closes any extra, and before it touches the ring it checks
 *   - the memfd carries F_SEAL_SHRINK, F_SEAL_GROW and F_SEAL_SEAL, so the
 *     daemon can never shrink it under the mapping (no SIGBUS),
 *   - its size is the size= of the reply and the header's total_size,
 *   - a private copy of the header (taken once: the mapping is
 *     client-writable and every later check and offset must see the same
 *     bytes) passes ring_check() (magic, version 2 or 3, geometry, the
 *     field table of version 3), its state
 *     is RING_LIVE, and it describes what was asked for (batch, resume
 *     point) with a known element type and a sample shape that matches
 *     the sample size,
 *   - the second descriptor is an eventfd.
 * On every failure path each descriptor received is closed and the mapping
 * undone, so a refused attach leaks nothing.  The request and reply lines
 * themselves are attach_line.c's.
 *
 * Versions.  The client asks for RING_VERSION (3: fields).  A daemon that
 * predates it answers ERR version (-EPROTONOSUPPORT); the client then asks
 * once more, on a new connection, for version 2, whose rings carry one data
 * block and no field table (the field calls of ringfeed.h say -ENOTSUP).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"
#include "dataset_types.h"

/* Connects a blocking stream socket to path.  Returns the fd or -errno. */
static int connect_socket(const char *path, struct rf_err *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct pollfd pfd;
    socklen_t sl;
    int fd, e, rc;

    if (strlen(path) >= sizeof(sa.sun_path))
        return rf_err_set(err, -ENAMETOOLONG, "control socket path %s is too long", path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd == -1)
        return rf_err_set(err, -errno, "socket(AF_UNIX): %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1) {
        e = errno;
        if (e != EINTR && e != EINPROGRESS)
            goto fail;
        /* interrupted: the connection goes on asynchronously; wait for it */
        pfd = (struct pollfd){.fd = fd, .events = POLLOUT};
        do
            rc = poll(&pfd, 1, CLIENT_REPLY_TIMEOUT_MS);
        while (rc == -1 && errno == EINTR);
        if (rc == -1) {
            e = errno;
            goto fail;
        }
        if (rc == 0) {
            e = ETIMEDOUT;
            goto fail;
        }
        sl = sizeof(e);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) == -1)
            e = errno;
        if (e)
            goto fail;
    }
    return fd;
fail:
    close(fd);
    if (e == ENOENT || e == ECONNREFUSED)
        return rf_err_set(err, -e,
                          "cannot connect to the ringfeed daemon at %s: %s: is "
                          "ringfeedd running? (start it, or point RINGFEED_SOCKET "
                          "at its socket)",
                          path, strerror(e));
    return rf_err_set(err, -e, "cannot connect to the ringfeed daemon at %s: %s", path,
                      strerror(e));
}

/* Sends all len bytes of buf on a stream socket (short writes, EINTR,
 * EAGAIN handled).  Returns 0 or -errno. */
static int send_all(int fd, const char *buf, size_t len)
{
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    ssize_t n;

    while (len > 0) {
        n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n == -1) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (poll(&pfd, 1, CLIENT_REPLY_TIMEOUT_MS) == 0)
                    return -ETIMEDOUT;
                continue;
            }
            return -errno;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Appends the descriptors of every SCM_RIGHTS message in msg to fds
 * (cap entries); closes those that do not fit.  Returns the new count,
 * which may exceed cap (the excess was closed). */
static size_t take_fds(struct msghdr *msg, int *fds, size_t nfds, size_t cap)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
        size_t n;
        int fd;

        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
            cm->cmsg_len < CMSG_LEN(0))
            continue;
        n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (nfds < cap)
                fds[nfds] = fd;
            else
                close(fd);
            nfds++;
        }
    }
    return nfds;
}

/*
 * Receives the reply line and every descriptor sent with it.  Returns its
 * length up to and including the first LF, with *nfds set (the first
 * min(*nfds, CLIENT_FDS_MAX) are open in fds and owned by the caller), or
 * -errno with no descriptor left open.
 */
static ssize_t recv_reply(int fd, const char *path, const char *verb, char *line, size_t cap,
                          int *fds, size_t *nfds, struct rf_err *err)
{
    union {
        char buf[CMSG_SPACE(CLIENT_FDS_MAX * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int64_t deadline = client_now_ns() + (int64_t)CLIENT_REPLY_TIMEOUT_MS * 1000000;
    size_t len = 0, got = 0;
    int truncated = 0, rc;

    *nfds = 0;
    for (;;) {
        struct iovec iov = {.iov_base = line + len, .iov_len = cap - 1 - len};
        struct msghdr msg = {
            .msg_iov = &iov,
            .msg_iovlen = 1,
            .msg_control = ctl.buf,
            .msg_controllen = sizeof(ctl.buf),
        };
        int64_t left = deadline - client_now_ns();
        ssize_t n;

        if (left <= 0) {
            rc = rf_err_set(err, -ETIMEDOUT,
                            "the daemon at %s sent no reply to %s within %d ms",
                            path, verb, CLIENT_REPLY_TIMEOUT_MS);
            goto fail;
        }
        rc = poll(&pfd, 1, (int)(left / 1000000) + 1);
        if (rc == -1 && errno != EINTR) {
            rc = rf_err_set(err, -errno, "poll on the control socket %s: %s", path,
                            strerror(errno));
            goto fail;
        }
        if (rc <= 0)
            continue;
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n == -1) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            rc = rf_err_set(err, -errno, "reading the %s reply from %s: %s", verb, path,
                            strerror(errno));
            goto fail;
        }
        got = take_fds(&msg, fds, got, CLIENT_FDS_MAX);
        if (msg.msg_flags & MSG_CTRUNC)
            truncated = 1;
        if (n == 0) {
            rc = rf_err_set(err, -ECONNRESET,
                            "the daemon at %s closed the connection without "
                            "answering %s",
                            path, verb);
            goto fail;
        }
        len += (size_t)n;
        line[len] = '\0';
        if (memchr(line + len - (size_t)n, '\n', (size_t)n)) {
            len = (size_t)(strchr(line, '\n') - line) + 1;
            break;
        }
        if (len == cap - 1) {
            rc = rf_err_set(err, -EPROTO,
                            "the daemon's reply to %s is longer than %zu bytes",
                            verb, cap - 1);
            goto fail;
        }
    }
    if (truncated || got > CLIENT_FDS_MAX) {
        rc = rf_err_set(err, -EPROTO,
                        "the daemon at %s sent more descriptors with its ATTACH "
                        "reply than the %d a reply may carry (expected 2): refused",
                        path, CLIENT_FDS_MAX);
        goto fail;
    }
    *nfds = got;
    return (ssize_t)len;
fail:
    for (size_t i = 0; i < got && i < CLIENT_FDS_MAX; i++)
        close(fds[i]);
    return rc;
}

/* Checks that fd is a memfd sealed against resizing, of the announced size,
 * and maps it shared read-write.  Returns 0 with *mem set, or -errno. */
static int map_memfd(int fd, uint64_t size, void **mem, struct rf_err *err)
{
    const int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
    struct stat st;
    int seals;
    void *p;

    seals = fcntl(fd, F_GET_SEALS);
    if (seals == -1)
        return rf_err_set(err, -EPROTO,
                          "the ring descriptor is not a sealable memfd (F_GET_SEALS: "
                          "%s): refused",
                          strerror(errno));
    if ((seals & need) != need)
        return rf_err_set(err, -EPROTO,
                          "the ring memfd lacks seals:%s%s%s; the daemon must seal it "
                          "so it can never shrink under the mapping: refused",
                          seals & F_SEAL_SHRINK ? "" : " F_SEAL_SHRINK",
                          seals & F_SEAL_GROW ? "" : " F_SEAL_GROW",
                          seals & F_SEAL_SEAL ? "" : " F_SEAL_SEAL");
    if (fstat(fd, &st) == -1)
        return rf_err_set(err, -errno, "fstat on the ring memfd: %s", strerror(errno));
    if (!S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t)st.st_size != size)
        return rf_err_set(err, -EPROTO,
                          "the ring memfd is %lld bytes but the reply says size=%" PRIu64
                          ": refused",
                          (long long)st.st_size, size);
    if (size < RING_HDR_SIZE || size > SIZE_MAX)
        return rf_err_set(err, -EPROTO, "ring size %" PRIu64 " is out of range", size);
    /* MAP_POPULATE: the page tables are built inside rf_open, not by
     * faults on the training loop's first touch of each batch */
    p = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
        return rf_err_set(err, -errno,
                          "mapping the %" PRIu64 "-byte ring read-write: %s%s", size,
                          strerror(errno),
                          errno == EPERM ? " (is it sealed against writes?)" : "");
    *mem = p;
    return 0;
}

/* Checks that fd is an eventfd.  Returns 0 or -EPROTO. */
static int check_eventfd(int fd, struct rf_err *err)
{
    char link[64], target[64];
    struct stat st;
    ssize_t n;

    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, target, sizeof(target) - 1);
    if (n >= 0) {
        target[n] = '\0';
        if (strcmp(target, "anon_inode:[eventfd]") == 0)
            return 0;
        return rf_err_set(err, -EPROTO,
                          "the second descriptor of the ATTACH reply is \"%s\", not an "
                          "eventfd: refused",
                          target);
    }
    /* no /proc: an eventfd is an anonymous inode, none of the named kinds */
    if (fstat(fd, &st) == -1)
        return rf_err_set(err, -errno, "fstat on the eventfd: %s", strerror(errno));
    if ((st.st_mode & S_IFMT) != 0)
        return rf_err_set(err, -EPROTO,
                          "the second descriptor of the ATTACH reply is not an "
                          "eventfd (mode %o): refused",
                          (unsigned)st.st_mode);
    return 0;
}

/* Checks that the mapped, ring_check()ed header is live and describes
 * the stream asked for.  Returns 0 or -EPROTO / the ring's error. */
static int check_header(const struct ring_hdr *h, const struct client_attach_args *a,
                        const struct client_reply *r, struct rf_err *err)
{
    uint32_t state = atomic_load_explicit(&h->state, memory_order_acquire);
    uint64_t bytes, elem;
    int dtype;

    if (state != RING_LIVE)
        return rf_err_set(err, h->error < 0 ? h->error : -EPROTO,
                          "the ring arrived in state %u, not live: %.*s", state,
                          (int)sizeof(h->reason), h->reason);
    if (h->attach_id != r->id || h->depth != r->depth ||
        h->batches_per_epoch != r->batches)
        return rf_err_set(err, -EPROTO,
                          "the ring header (id %" PRIu64 ", depth %u, %" PRIu64
                          " batches per epoch) disagrees with the reply (id %" PRIu64
                          ", depth %" PRIu64 ", %" PRIu64 " batches)",
                          h->attach_id, h->depth, h->batches_per_epoch, r->id, r->depth,
                          r->batches);
    /* a start past the epoch's end is a later epoch's batch (proto/ctl.h):
     * the daemon writes the position as it will deliver it */
    if (h->batch != a->opt->batch || h->batches_per_epoch == 0 ||
        h->start_seq >= h->batches_per_epoch ||
        h->start_epoch - a->epoch != a->seq / h->batches_per_epoch ||
        h->start_seq != a->seq % h->batches_per_epoch)
        return rf_err_set(err, -EPROTO,
                          "the ring carries batches of %u from epoch %" PRIu64
                          " batch %" PRIu64 ", but batches of %u from epoch %" PRIu64
                          " batch %" PRIu64 " were asked for",
                          h->batch, h->start_epoch, h->start_seq, a->opt->batch,
                          a->epoch, a->seq);
    dtype = dataset_dtype_from_ring(h->dtype);
    if (dtype < 0 || h->layout < RING_CHW || h->layout > RING_FLAT)
        return rf_err_set(err, -EPROTO, "the ring's sample type %u / layout %u is unknown",
                          h->dtype, h->layout);
    if (h->version >= RING_VERSION_FIELDS &&
        (h->fields[h->primary].dtype != h->dtype || h->fields[h->primary].layout != h->layout))
        return rf_err_set(err, -EPROTO,
                          "the ring's primary field %.*s (type %u, layout %u) is not the "
                          "sample type %u / layout %u of its header",
                          (int)RING_FIELD_NAME, h->fields[h->primary].name,
                          h->fields[h->primary].dtype, h->fields[h->primary].layout,
                          h->dtype, h->layout);
    elem = dataset_dtype_size((enum dataset_dtype)dtype);
    if (__builtin_mul_overflow((uint64_t)h->shape[0] * h->shape[1], h->shape[2], &bytes) ||
        __builtin_mul_overflow(bytes, elem, &bytes) || bytes != h->sample_bytes)
        return rf_err_set(err, -EPROTO,
                          "the ring's sample shape %ux%ux%u of %s is not its %" PRIu64
                          " bytes per sample",
                          h->shape[0], h->shape[1], h->shape[2],
                          dataset_dtype_name((enum dataset_dtype)dtype), h->sample_bytes);
    return 0;
}

/*
 * Connects to a->path, attaches from (a->epoch, a->seq) and maps the ring.
 * Returns 0 with *out filled (the caller owns it: client_conn_close), or a
 * negative errno with err saying what failed and nothing left open; then
 * *refused is 1 when the daemon answered with ERR (the errno is its code's),
 * 0 when no answer came.
 */
static int attach_one(const struct client_attach_args *a, struct client_conn *out,
                      int *refused, struct rf_err *err)
{
    char line[CTL_LINE_MAX + 1];
    int fds[CLIENT_FDS_MAX];
    struct client_reply r;
    size_t nfds = 0;
    struct ring_hdr *priv = NULL;
    void *mem = NULL;
    ssize_t n;
    int sock, rc;

    *refused = 0;
    rc = client_format_attach(a, line, sizeof(line), err);
    if (rc < 0)
        return rc;
    sock = connect_socket(a->path, err);
    if (sock < 0)
        return sock;
    rc = send_all(sock, line, (size_t)rc);
    if (rc < 0) {
        rf_err_set(err, rc, "sending ATTACH to the daemon at %s: %s", a->path,
                   strerror(-rc));
        goto close_sock;
    }
    n = recv_reply(sock, a->path, "ATTACH", line, sizeof(line), fds, &nfds, err);
    if (n < 0) {
        rc = (int)n;
        goto close_sock;
    }
    rc = client_parse_reply(line, (size_t)n, a->path, &r, refused, err);
    if (rc < 0)
        goto close_fds;
    if (nfds != 2) {
        rc = rf_err_set(err, -EPROTO,
                        "the daemon at %s sent %zu descriptors with its ATTACH reply, "
                        "expected 2 (ring memfd, eventfd): refused",
                        a->path, nfds);
        goto close_fds;
    }
    rc = check_eventfd(fds[1], err);
    if (rc < 0)
        goto close_fds;
    rc = map_memfd(fds[0], r.size, &mem, err);
    if (rc < 0)
        goto close_fds;
    /* ring.h: the checks run on a private copy, which is what the client
     * reads its geometry and field table from from now on */
    /* struct ring_hdr is _Alignas(1024) (its field table): malloc's
     * alignment is not enough */
    priv = aligned_alloc(RING_PAGE, RING_HDR_SIZE);
    if (!priv) {
        rc = rf_err_set(err, -ENOMEM, "out of memory copying the ring header");
        goto unmap;
    }
    memcpy(priv, mem, RING_HDR_SIZE);
    rc = ring_check(priv, r.size, err);
    if (rc < 0)
        goto unmap;
    rc = check_header(priv, a, &r, err);
    if (rc < 0)
        goto unmap;
    /* an older layout than asked for is one the daemon speaks and the
     * client reads (ring_check took it); a newer one it never asked for */
    if (priv->version > a->version)
        rc = rf_err_set(err, -EPROTO, "asked for ring layout version %u, the daemon sent "
                        "version %u", a->version, priv->version);
    if (rc < 0)
        goto unmap;
    close(fds[0]); /* the mapping keeps the memory */
    *out = (struct client_conn){
        .sock = sock,
        .efd = fds[1],
        .hdr = mem,
        .priv = priv,
        .size = (size_t)r.size,
        .id = r.id,
    };
    memcpy(out->sources, r.sources, sizeof(out->sources));
    return 0;

unmap:
    free(priv);
    munmap(mem, (size_t)r.size);
close_fds:
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
close_sock:
    close(sock);
    return rc;
}

ssize_t client_ask(const char *path, const char *verb, const char *line, size_t len,
                   char *reply, size_t cap, struct rf_err *err)
{
    int fds[CLIENT_FDS_MAX];
    size_t nfds = 0;
    ssize_t n;
    int sock = connect_socket(path, err), rc;

    if (sock < 0)
        return sock;
    rc = send_all(sock, line, len);
    if (rc < 0) {
        close(sock);
        return rf_err_set(err, rc, "sending %s to the daemon at %s: %s", verb, path,
                          strerror(-rc));
    }
    n = recv_reply(sock, path, verb, reply, cap, fds, &nfds, err);
    for (size_t i = 0; n >= 0 && i < nfds && i < CLIENT_FDS_MAX; i++)
        close(fds[i]);
    close(sock);
    return n;
}

int client_attach(const struct client_attach_args *a, struct client_conn *out,
                  int *refused, struct rf_err *err)
{
    struct client_attach_args v = *a;
    int rc;

    v.version = RING_VERSION;
    rc = attach_one(&v, out, refused, err);
    if (rc != -EPROTONOSUPPORT || !*refused)
        return rc;
    /* an older daemon: the version-2 layout, one data block, no fields */
    v.version = 2;
    return attach_one(&v, out, refused, err);
}

/* Detaches (closing the socket) and unmaps.  Leaves cn empty. */
void client_conn_close(struct client_conn *cn)
{
    free(cn->priv);
    if (cn->hdr)
        munmap(cn->hdr, cn->size);
    if (cn->efd >= 0)
        close(cn->efd);
    if (cn->sock >= 0)
        close(cn->sock);
    *cn = (struct client_conn){.sock = -1, .efd = -1};
}
