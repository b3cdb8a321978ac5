/*
 * wait.c - waiting for the next batch's slot to be published (ring.h, C1
 * and C2), and noticing on the way that the daemon failed the stream,
 * detached this client, or went away.
 *
 * The fast path is one acquire load of the slot's `ready` word: a batch
 * already published costs no system call.  rf_ready() is that load alone.  Otherwise the client spins for
 * SPIN_NS with a pause instruction (a batch finishing within microseconds
 * is common when workers keep ahead), then sleeps on the shared futex in
 * rounds of at most NAP_NS.  Between rounds it reads the ring's state and
 * polls the control socket (a non-blocking recv), so a daemon that died
 * without waking the futex is noticed within one round.
 *
 * A batch published before the daemon failed, closed or died is still
 * delivered: `ready` is read before the state and once more before a
 * non-live answer is returned.
 *
 * What the ring's state means here: RING_FAILED is final (-EIO with the
 * ring's reason).  RING_CLOSED with error 0, -ESHUTDOWN or -ECONNRESET means
 * the daemon is stopping: reconnect, like EOF on the socket.  RING_CLOSED
 * with any other error is the daemon detaching this client for good
 * (-EPIPE with the reason).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"

#define SPIN_NS 10000         /* 10 us of spinning before the first sleep */
#define NAP_NS 50000000       /* 50 ms futex rounds between liveness checks */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Reads the ring's state: 0 while live, CLIENT_GONE when the daemon is
 * stopping, or the final error (message in c->err). */
static int check_state(struct rf_client *c)
{
    const struct ring_hdr *h = c->conn.hdr;
    uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);
    char reason[sizeof(h->reason)];
    int code = h->error;

    if (st == RING_LIVE)
        return 0;
    memcpy(reason, h->reason, sizeof(reason));
    reason[sizeof(reason) - 1] = '\0';
    /* CLOSED without an error code, or with -ESHUTDOWN: the daemon closed
     * the stream because it is stopping (or restarting); any other code
     * says why it detached this client for good */
    if (st == RING_CLOSED && (code == 0 || code == -ESHUTDOWN || code == -ECONNRESET)) {
        rf_err_set(&c->err, -ECONNRESET, "the daemon at %s is stopping: %s", c->path,
                   reason[0] ? reason : "no reason given");
        return CLIENT_GONE;
    }
    if (st == RING_CLOSED)
        return rf_err_set(&c->err, -EPIPE,
                          "the daemon at %s detached this client (%s): %s", c->path,
                          code < 0 ? strerror(-code) : "no error code",
                          reason[0] ? reason : "no reason given");
    return rf_err_set(&c->err, -EIO, "the daemon at %s failed the stream (%s): %s",
                      c->path, code < 0 ? strerror(-code) : "no error code",
                      reason[0] ? reason : "no reason given");
}

/* Polls the control connection without blocking: 0 while it is open,
 * CLIENT_GONE after EOF or a reset.  A line the daemon sent unasked (an
 * ERR before it hangs up) becomes the message. */
static int check_socket(struct rf_client *c)
{
    char buf[512];
    ssize_t n;

    for (;;) {
        n = recv(c->conn.sock, buf, sizeof(buf) - 1, MSG_DONTWAIT);
        if (n > 0) {
            buf[n] = '\0';
            buf[strcspn(buf, "\n")] = '\0';
            rf_err_set(&c->err, -ECONNRESET, "the daemon at %s said: %s", c->path, buf);
            c->said = 1;
            continue;
        }
        if (n == 0) {
            if (!c->said)
                rf_err_set(&c->err, -ECONNRESET,
                           "the daemon at %s closed the control connection", c->path);
            return CLIENT_GONE;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        rf_err_set(&c->err, -errno, "the control connection to %s failed: %s", c->path,
                   strerror(errno));
        return CLIENT_GONE;
    }
}

int rf_ready(const struct rf_client *c)
{
    const struct ring_hdr *h;
    const struct ring_slot *s;
    uint64_t g;

    if (!c || c->state != CLIENT_ATTACHED || !c->conn.hdr || c->ho.n_pend ||
        (c->depth && c->delivered - c->released >= c->depth - 1))
        return 0;
    h = c->conn.priv;
    g = c->delivered - c->first;
    s = client_slot(c->conn.hdr, h->slot_stride, (uint32_t)(g % h->depth));
    return atomic_load_explicit(&s->ready, memory_order_acquire) == ring_ready_word(g);
}

/* ring.h C4: the eventfd, if the daemon wants it, as a wait goes to sleep.
 * A failed write loses only the wait's count: the batch still comes. */
static void tell_sleeping(struct rf_client *c)
{
    uint64_t one = 1;

    if (!atomic_load_explicit(&c->conn.hdr->want_release, memory_order_relaxed))
        return;
    while (write(c->conn.efd, &one, sizeof(one)) == -1 && errno == EINTR)
        ;
}

/*
 * Waits for ring batch c->delivered - c->first of the attached ring until
 * deadline_ns (CLOCK_MONOTONIC; -1: no deadline).  Returns 0 when it is
 * published (its slot's stores are visible), -ETIMEDOUT, CLIENT_GONE when
 * the daemon went away or is stopping, or -EIO / -EPIPE when the daemon
 * failed the stream or detached this client (message in c->err).
 */
int client_wait(struct rf_client *c, int64_t deadline_ns)
{
    const struct ring_hdr *h = c->conn.priv;
    uint64_t g = c->delivered - c->first;
    struct ring_slot *s = client_slot(c->conn.hdr, h->slot_stride, (uint32_t)(g % h->depth));
    uint32_t want = ring_ready_word(g), seen;
    int64_t now, nap;
    bool told = false;
    int rc;

    if (atomic_load_explicit(&s->ready, memory_order_acquire) == want)
        return 0;
    now = client_now_ns();
    if (deadline_ns < 0 || deadline_ns > now) {
        int64_t spin_end = now + SPIN_NS;

        for (unsigned i = 1;; i++) {
            cpu_relax();
            if (atomic_load_explicit(&s->ready, memory_order_acquire) == want)
                return 0;
            if (i % 64 == 0 && client_now_ns() >= spin_end)
                break;
        }
    }
    for (;;) {
        seen = atomic_load_explicit(&s->ready, memory_order_acquire);
        if (seen == want)
            return 0;
        rc = check_state(c);
        if (rc == 0)
            rc = check_socket(c);
        if (rc != 0) {
            if (atomic_load_explicit(&s->ready, memory_order_acquire) == want)
                return 0;
            return rc;
        }
        now = client_now_ns();
        if (deadline_ns >= 0 && now >= deadline_ns)
            return -ETIMEDOUT;
        nap = deadline_ns < 0 || deadline_ns - now > NAP_NS ? NAP_NS : deadline_ns - now;
        /* announce the sleep, then look once more (ring.h C2) */
        atomic_store_explicit(&c->conn.hdr->sleeping, 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
        seen = atomic_load_explicit(&s->ready, memory_order_acquire);
        if (seen != want && !told) {
            /* the wait begins: the daemon counts it (ring.h C4) */
            told = true;
            tell_sleeping(c);
        }
        if (seen != want)
            ring_futex_wait(&s->ready, seen, nap);
        atomic_store_explicit(&c->conn.hdr->sleeping, 0, memory_order_relaxed);
    }
}
