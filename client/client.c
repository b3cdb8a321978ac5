/*
 * client.c - the rf_ API of libringfeed (ringfeed.h): open, next, release,
 * stats, close, and the connection state machine behind them.
 *
 * The state machine (struct rf_client.state), driven only by next():
 *
 *     rf_open ──ok──▶ ATTACHED ──daemon gone──▶ RECONNECTING ──attach ok──┐
 *        │               ▲  │                      │                      │
 *        │               └──┼──────────────────────┼──────────────────────┘
 *        │                  │ ring failed/closed   │ reconnect_ms passed
 *        └──failed──────────┴──────────────────────┴──────▶ DEAD (sticky error)
 *
 * rf_detach (the caller's, at any state) also enters DEAD, -ENOTCONN, with
 * the connection closed and held batches kept as a reconnect keeps them.
 *
 * "Daemon gone" is EOF or a reset on the control connection, or the ring
 * CLOSED with -ESHUTDOWN (the daemon is stopping).  Reconnecting re-attaches
 * with the same options from the batch after the last one delivered, so the
 * caller's stream goes on without a gap or a repeat; attempts back off from
 * BACKOFF_MIN_MS doubling to BACKOFF_MAX_MS and stop reconnect_ms after the
 * loss.  A caller's timeout bounds each rf_next() call, not the reconnect:
 * an rf_next(c, b, 100) that times out while reconnecting returns
 * -ETIMEDOUT and the next call carries on.
 *
 * Held batches across a reconnect: batches delivered but not yet released
 * when the daemon went away stay valid.  Their ring is retired into c->old
 * (its mapping kept; nobody writes it any more) and unmapped when the last
 * of them is released.  That is why the resume point is the batch after the
 * last *delivered*, not the last released: the caller still has the held
 * ones and must not see them twice.
 *
 * Handing back.  rf_release and rf_cuda_copy_release take the oldest batch
 * not yet handed back, released + ho.n_pend; while copies are pending
 * (handoff.c) releases queue behind them and go to the daemon in order.
 *
 * Invariants (client_check(), run in debug builds after every transition):
 *   released <= delivered; delivered - released <= RING_MAX_DEPTH;
 *   ATTACHED => conn mapped and conn.first <= delivered;
 *   retired rings are ordered, each holds at least one unreleased batch,
 *   and together with the live ring they cover [released, delivered);
 *   the hand-off queue holds batches released .. released + n_pend - 1.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "clock.h"
#include "dataset_types.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

_Static_assert(sizeof(struct rf_sample) == sizeof(struct ring_sample), "sample records");
_Static_assert(offsetof(struct rf_sample, index) == offsetof(struct ring_sample, index) &&
               offsetof(struct rf_sample, label) == offsetof(struct ring_sample, label) &&
               offsetof(struct rf_sample, flags) == offsetof(struct ring_sample, flags),
               "rf_sample is ring_sample: batches point into the ring");
_Static_assert(RF_SAMPLE_PADDING == RING_SAMPLE_PADDING &&
               RF_SAMPLE_SUBSTITUTED == RING_SAMPLE_SUBSTITUTED, "sample flags");
_Static_assert(RF_LAYOUT_CHW == RING_CHW && RF_LAYOUT_HWC == RING_HWC &&
               RF_LAYOUT_FLAT == RING_FLAT, "layouts");
_Static_assert(RF_DTYPE_U8 == RING_U8 && RF_DTYPE_I8 == RING_I8 && RF_DTYPE_I16 == RING_I16 &&
               RF_DTYPE_I32 == RING_I32 && RF_DTYPE_F32 == RING_F32 &&
               RF_DTYPE_F64 == RING_F64 && RF_DTYPE_I64 == RING_I64 &&
               RF_DTYPE_F16 == RING_F16 && RF_DTYPE_BF16 == RING_BF16 &&
               RF_DTYPE_U16 == RING_U16, "dtypes");
#if UINTPTR_MAX == UINT64_MAX
/* 0.4 added dtype in the tail padding of rf_batch and in rf_info's pad_:
 * both keep their 0.3 size, so programs built against 0.3 still work */
_Static_assert(sizeof(struct rf_batch) == 80 && offsetof(struct rf_batch, dtype) == 76,
               "rf_batch keeps its 0.3 size");
_Static_assert(sizeof(struct rf_info) == 80 && offsetof(struct rf_info, dtype) == 60,
               "rf_info keeps its 0.3 size");
#endif

int64_t client_now_ns(void)
{
    return (int64_t)clock_mono_ns();
}

static void client_check(const struct rf_client *c)
{
#ifndef NDEBUG
    uint64_t at = c->released;

    assert(c->released <= c->delivered);
    assert(c->delivered - c->released <= RING_MAX_DEPTH);
    assert(c->n_old <= RING_MAX_DEPTH);
    assert(c->state != CLIENT_ATTACHED || (c->conn.hdr && c->first <= c->delivered));
    for (unsigned i = 0; i < c->n_old; i++) {
        assert(c->old[i].hdr);
        assert(c->old[i].first <= at && at < c->old[i].end);
        at = c->old[i].end;
    }
    assert(at <= c->delivered);
    assert(c->n_old == 0 || !c->conn.hdr || c->first >= at);
    assert(c->ho.n_pend <= c->delivered - c->released);
    for (unsigned i = 0; i < c->ho.n_pend; i++)
        assert(c->ho.pend[i].n == c->released + i);
#else
    (void)c;
#endif
}

void rf_options_init(struct rf_options *o)
{
    *o = (struct rf_options){
        .batch = 256,
        .rank = -1,
        .world = -1,
        .transform = "raw",
        .shuffle = 1,
        .reconnect_ms = 30000,
    };
}

/* Copies the options with every string into one block owned by c. */
static int copy_options(struct rf_client *c, const struct rf_options *o)
{
    const char **strs[] = {&c->opt.socket, &c->opt.dataset, &c->opt.transform,
                           &c->opt.params, &c->opt.name};
    size_t total = 0;
    char *p;

    c->opt = *o;
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
        if (*strs[i])
            total += strlen(*strs[i]) + 1;
    p = c->strings = malloc(total ? total : 1);
    if (!p)
        return rf_err_set(&c->err, -ENOMEM, "out of memory copying the options");
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        size_t n;

        if (!*strs[i])
            continue;
        n = strlen(*strs[i]) + 1;
        memcpy(p, *strs[i], n);
        *strs[i] = p;
        p += n;
    }
    return 0;
}

/* The checks the ATTACH line's formatter cannot make; it makes the rest
 * (client_format_attach) before anything is sent. */
static int check_options(struct rf_client *c)
{
    if (!c->opt.dataset)
        return rf_err_set(&c->err, -EINVAL,
                          "option dataset is required: name a dataset from the "
                          "daemon's catalogue (ringfeedctl datasets lists them), or "
                          "give its folder");
    if (c->opt.reconnect_ms < 0)
        return rf_err_set(&c->err, -EINVAL,
                          "option reconnect_ms=%d: use 0 (never reconnect) or more",
                          c->opt.reconnect_ms);
    return 0;
}

static struct client_attach_args attach_args(const struct rf_client *c)
{
    return (struct client_attach_args){
        .opt = &c->opt,
        .path = c->path,
        .dataset = c->folder ? c->dsname : c->opt.dataset,
        .rank = c->rank,
        .world = c->world,
        .epoch = c->next_epoch,
        .seq = c->next_seq,
    };
}

/* Takes a fresh connection: its ring batch 0 is the next batch. */
static void adopt(struct rf_client *c, const struct client_conn *cn)
{
    const struct ring_hdr *h = cn->priv;

    c->conn = *cn;
    c->first = c->delivered;
    c->depth = h->depth;
    c->batches_per_epoch = h->batches_per_epoch;
    /* the position as the daemon normalized it (a start seq past the
     * epoch's end names a later epoch's batch; check_header checked it) */
    c->next_epoch = h->start_epoch;
    c->next_seq = h->start_seq;
    c->info = (struct rf_info){
        .batch = h->batch,
        .depth = h->depth,
        .dataset_samples = h->dataset_samples,
        .batches_per_epoch = h->batches_per_epoch,
        .sample_bytes = h->sample_bytes,
        .layout = h->layout,
        .shape = {h->shape[0], h->shape[1], h->shape[2]},
        .classes = h->classes,
        .dtype = h->dtype,
    };
    if (!c->attached_once) { /* the fields are the first ring's (same_fields) */
        c->version = h->version;
        c->meta_size = h->meta_size;
        c->nfields = h->version >= RING_VERSION_FIELDS ? h->nfields : 0;
        c->primary = h->primary;
        memcpy(c->fields, h->fields, sizeof(c->fields));
    }
    c->attached_once = 1;
    c->said = 0;
    c->state = CLIENT_ATTACHED;
    client_handoff_mapped(c);
}

/*
 * 1 when the ring whose checked header copy is h can go on the stream of
 * the rings attached before, whose fields the caller was told of (and may
 * hold batches of): the same field table, offsets included, and the same
 * slot header size.  A first ring without a table (version 2, an older
 * daemon) may be followed by a version-3 one whose primary column is where
 * version 2's data block was (the daemon was upgraded): the client goes on
 * describing no fields, so held and new batches read alike.  A ring without
 * a table after one with is refused: the caller was told of columns it
 * does not have.
 */
static int same_fields(const struct rf_client *c, const struct ring_hdr *h)
{
    uint32_t n = h->version >= RING_VERSION_FIELDS ? h->nfields : 0;

    if (h->meta_size != c->meta_size)
        return 0;
    if (c->nfields == 0)
        return n == 0 || h->fields[h->primary].offset == c->meta_size;
    if (n != c->nfields || h->primary != c->primary)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        const struct ring_field *a = &c->fields[i], *b = &h->fields[i];

        if (memcmp(a->name, b->name, sizeof(a->name)) || a->kind != b->kind ||
            a->dtype != b->dtype || a->layout != b->layout || a->ndim != b->ndim ||
            memcmp(a->shape, b->shape, sizeof(a->shape)) || a->role != b->role ||
            a->of != b->of || a->item_bytes != b->item_bytes ||
            a->capacity != b->capacity || a->offset != b->offset ||
            a->offsets_at != b->offsets_at)
            return 0;
    }
    return 1;
}

/* Enters CLIENT_DEAD with code; the message is already in c->err. */
static int die(struct rf_client *c, int code)
{
    c->state = CLIENT_DEAD;
    c->dead_err = code;
    return code;
}

/* Closes the connection: the live ring is retired into c->old while it
 * holds a batch not yet released (its mapping kept for those, which stay
 * valid: no job writes a slot not released, M1 in ring.h), else unmapped. */
static void retire(struct rf_client *c)
{
    uint64_t held_from = c->released > c->first ? c->released : c->first;

    if (c->conn.hdr && held_from < c->delivered) {
        c->old[c->n_old++] = (struct client_ring){
            .hdr = c->conn.hdr,
            .size = c->conn.size,
            .first = c->first,
            .end = c->delivered,
            .depth = c->conn.priv->depth,
            .stride = c->conn.priv->slot_stride,
        };
        c->conn.hdr = NULL; /* the retired ring owns the mapping now */
    }
    if (c->conn.hdr)
        client_handoff_unmapping(c, c->conn.hdr);
    client_conn_close(&c->conn);
}

/* The daemon went away: retire or unmap the ring, start reconnecting. */
static void lose(struct rf_client *c)
{
    retire(c);
    c->lost = c->err;
    rf_err_set(&c->attempt, -ECONNREFUSED, "none yet");
    c->state = CLIENT_RECONNECTING;
    c->lost_ns = client_now_ns();
    c->next_try_ns = c->lost_ns;
    c->backoff_ms = BACKOFF_MIN_MS;
    c->last_err = -ECONNREFUSED;
}

/* Sleeps until CLOCK_MONOTONIC reaches until_ns. */
static void sleep_until(int64_t until_ns)
{
    struct timespec ts = {.tv_sec = until_ns / 1000000000, .tv_nsec = until_ns % 1000000000};

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/*
 * CLIENT_RECONNECTING: attempts attaches with backoff until one succeeds
 * (0, ATTACHED), the caller's deadline passes (-ETIMEDOUT, still
 * RECONNECTING), or reconnect_ms since the loss passes (DEAD, its error).
 */
static int reconnect(struct rf_client *c, int64_t deadline_ns)
{
    int64_t give_up = c->lost_ns + (int64_t)c->opt.reconnect_ms * 1000000;
    struct client_attach_args a = attach_args(c);
    struct client_conn cn;
    int64_t now, wake;
    int rc, refused;

    if (c->opt.reconnect_ms == 0) /* never: not even one attempt */
        return die(c, rf_err_set(&c->err, c->last_err,
                                 "%s; not reconnecting (reconnect_ms=0; to resume at epoch "
                                 "%" PRIu64 " batch %" PRIu64 ")", c->lost.msg, c->next_epoch,
                                 c->next_seq));
    for (;;) {
        now = client_now_ns();
        if (now >= c->next_try_ns && now < give_up) {
            refused = 0;
            /* a folder: ask again who serves it (a user daemon that went
             * away is started anew) */
            rc = c->folder ? client_folder_open(c, &c->attempt) : 0;
            a = attach_args(c);
            if (rc == 0)
                rc = client_attach(&a, &cn, &refused, &c->attempt);
            if (rc == 0 && !same_fields(c, cn.priv)) {
                client_conn_close(&cn);
                return die(c, rf_err_set(&c->err, -EPROTO,
                                         "%s; the daemon reconnected to describes the "
                                         "sample's fields otherwise than the ring this "
                                         "stream began with (another dataset, or an older "
                                         "daemon): not resuming at epoch %" PRIu64
                                         " batch %" PRIu64, c->lost.msg, c->next_epoch,
                                         c->next_seq));
            }
            if (rc == 0) {
                adopt(c, &cn);
                c->st.reconnects++;
                c->err.msg[0] = '\0';
                return 0;
            }
            c->last_err = refused ? rc : -ECONNREFUSED;
            now = client_now_ns();
            c->next_try_ns = now + c->backoff_ms * 1000000;
            c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                               : c->backoff_ms * 2;
        }
        if (now >= give_up)
            return die(c, rf_err_set(&c->err, c->last_err,
                                     "%s; gave up reconnecting after reconnect_ms=%d "
                                     "(to resume at epoch %" PRIu64 " batch %" PRIu64
                                     "): last attempt: %s",
                                     c->lost.msg, c->opt.reconnect_ms, c->next_epoch,
                                     c->next_seq, c->attempt.msg));
        wake = c->next_try_ns < give_up ? c->next_try_ns : give_up;
        if (deadline_ns >= 0 && deadline_ns < wake) {
            sleep_until(deadline_ns);
            return -ETIMEDOUT;
        }
        sleep_until(wake);
    }
}

/* Where rf_batch.data is within a slot: the primary field's column (ring.h:
 * the one the header's sample size and shape describe), the data block at
 * meta_size in a version-2 ring. */
static uint64_t primary_offset(const struct rf_client *c)
{
    return c->nfields ? c->fields[c->primary].offset : c->meta_size;
}

/* The live ring's slot for the next batch is published: checks it and
 * hands it to the caller. */
static int deliver(struct rf_client *c, struct rf_batch *b)
{
    const struct ring_hdr *h = c->conn.priv;
    uint64_t g = c->delivered - c->first;
    uint32_t slot = (uint32_t)(g % h->depth);
    struct ring_slot *s = client_slot(c->conn.hdr, h->slot_stride, slot);

    if (s->stream_seq != g || s->epoch != c->next_epoch || s->seq != c->next_seq ||
        s->count < 1 || s->count > h->batch || s->substituted > s->count)
        return die(c, rf_err_set(&c->err, -EBADMSG,
                                 "ring slot %u published batch %" PRIu64 " (epoch %" PRIu64
                                 " batch %" PRIu64 ", %u samples, %u substituted) where "
                                 "batch %" PRIu64 " (epoch %" PRIu64 " batch %" PRIu64
                                 ", 1..%u samples) was due: the daemon broke the ring "
                                 "protocol",
                                 slot, s->stream_seq, s->epoch, s->seq, s->count,
                                 s->substituted, g, c->next_epoch, c->next_seq, h->batch));
    *b = (struct rf_batch){
        .data = (const uint8_t *)s + primary_offset(c),
        .samples = (const struct rf_sample *)ring_samples(s),
        .count = s->count,
        .substituted = s->substituted,
        .sample_bytes = (size_t)h->sample_bytes,
        .layout = h->layout,
        .shape = {h->shape[0], h->shape[1], h->shape[2]},
        .epoch = s->epoch,
        .seq = s->seq,
        .stream_seq = c->delivered,
        .slot = slot,
        .dtype = h->dtype,
    };
    c->delivered++;
    if (s->seq + 1 >= c->batches_per_epoch) {
        c->next_epoch = s->epoch + 1;
        c->next_seq = 0;
    } else {
        c->next_seq = s->seq + 1;
    }
    c->st.batches++;
    c->st.samples += s->count;
    return 0;
}

int rf_open(const struct rf_options *o, struct rf_client **out)
{
    struct client_attach_args a;
    struct client_conn cn;
    struct rf_client *c;
    int rc, refused;

    c = calloc(1, sizeof(*c));
    if (out)
        *out = c;
    if (!c)
        return -ENOMEM;
    c->pid = getpid();
    c->conn = (struct client_conn){.sock = -1, .efd = -1};
    c->state = CLIENT_DEAD;
    c->dead_err = -ENOTCONN;
    if (!out || !o)
        return die(c, rf_err_set(&c->err, -EINVAL, "rf_open: options and out are required"));
    rc = copy_options(c, o);
    if (rc == 0)
        rc = check_options(c);
    if (rc == 0)
        rc = client_socket_path(c->opt.socket, c->path, sizeof(c->path), &c->err);
    if (rc == 0)
        rc = client_rank_world(c->opt.rank, c->opt.world, &c->rank, &c->world, &c->err);
    if (rc == 0 && client_is_folder(c->opt.dataset)) {
        rc = client_folder_init(c);
        if (rc == 0)
            rc = client_folder_open(c, &c->err);
    }
    if (rc < 0)
        return die(c, rc);
    c->next_epoch = c->opt.start_epoch;
    c->next_seq = c->opt.start_seq;
    a = attach_args(c);
    rc = client_attach(&a, &cn, &refused, &c->err);
    if (rc < 0)
        return die(c, rc);
    adopt(c, &cn);
    client_check(c);
    return 0;
}

static int next(struct rf_client *c, struct rf_batch *b, int timeout_ms, int64_t t0)
{
    int64_t deadline = timeout_ms < 0 ? -1 : t0 + (int64_t)timeout_ms * 1000000;
    int rc;

    /* batches whose copies are done go back first (handoff.c); at the
     * limit of held batches, wait for the oldest copy rather than fail */
    if (c->ho.n_pend) {
        rc = client_handoff_drain(c, 0, -1);
        if (rc == 0 && c->depth && c->delivered - c->released >= c->depth - 1)
            rc = client_handoff_drain(c, 1, deadline);
        if (rc < 0)
            return rc;
    }
    if (c->state == CLIENT_DEAD)
        return c->dead_err;
    if (c->depth && c->delivered - c->released >= c->depth - 1)
        return rf_err_set(&c->err, -ENOBUFS,
                          "rf_next: %" PRIu64 " batches are held and the ring has %u "
                          "slots: release one first (at most depth-1 may be held)",
                          c->delivered - c->released, c->depth);
    for (;;) {
        switch (c->state) {
        case CLIENT_DEAD:
            return c->dead_err;
        case CLIENT_RECONNECTING:
            rc = reconnect(c, deadline);
            client_check(c);
            if (rc == -ETIMEDOUT)
                return rf_err_set(&c->err, -ETIMEDOUT,
                                  "rf_next: no batch within %d ms: still reconnecting "
                                  "(%s; last attempt: %s)",
                                  timeout_ms, c->lost.msg, c->attempt.msg);
            if (rc < 0)
                return rc;
            break;
        case CLIENT_ATTACHED:
            rc = client_wait(c, deadline);
            if (rc == 0) {
                rc = deliver(c, b);
                client_check(c);
                return rc;
            }
            if (rc == CLIENT_GONE) {
                lose(c);
                client_check(c);
                break;
            }
            if (rc == -ETIMEDOUT)
                return rf_err_set(&c->err, -ETIMEDOUT,
                                  "rf_next: no batch within %d ms (call again)",
                                  timeout_ms);
            return die(c, rc);
        }
    }
}

int client_check_owner(struct rf_client *c, const char *what)
{
    pid_t self = getpid();

    if (self == c->pid)
        return 0;
    return rf_err_set(&c->err, -EPERM,
                      "%s: this client was opened by process %d and process %d is a fork of "
                      "it (a data-loader worker, a multiprocessing child): it cannot take or "
                      "hand back the parent's batches; open a client in this process",
                      what, (int)c->pid, (int)self);
}

int rf_next(struct rf_client *c, struct rf_batch *b, int timeout_ms)
{
    int64_t t0, t1;
    int rc;

    if (!c || !b)
        return -EINVAL;
    rc = client_check_owner(c, "rf_next");
    if (rc < 0)
        return rc;
    t0 = client_now_ns();
    if (c->last_return_ns)
        c->st.between_seconds += (double)(t0 - c->last_return_ns) * 1e-9;
    rc = next(c, b, timeout_ms, t0);
    t1 = client_now_ns();
    c->st.wait_seconds += (double)(t1 - t0) * 1e-9;
    c->last_return_ns = t1;
    return rc;
}

/* Tells the daemon that ring batch g of the live ring is free (C3). */
static int release_live(struct rf_client *c, uint64_t g)
{
    uint64_t one = 1;
    ssize_t n;

    atomic_store_explicit(&c->conn.hdr->released, g + 1, memory_order_release);
    /* the daemon reads `released` by itself unless it asked (ring.h C3, M4) */
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&c->conn.hdr->want_release, memory_order_relaxed))
        return 0;
    for (;;) {
        n = write(c->conn.efd, &one, sizeof(one));
        if (n == (ssize_t)sizeof(one))
            return 0;
        if (n == -1 && errno == EINTR)
            continue;
        /* EAGAIN: the counter is saturated with wake-ups the daemon has not
         * read yet; it reads `released` when it does, so nothing is lost */
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return rf_err_set(&c->err, n == -1 ? -errno : -EIO,
                          "rf_release: notifying the daemon through the eventfd: %s",
                          n == -1 ? strerror(errno) : "short write");
    }
}

int client_check_handback(struct rf_client *c, const struct rf_batch *b, const char *what)
{
    uint64_t n = c->released + c->ho.n_pend; /* the oldest not handed back */

    if (n == c->delivered)
        return rf_err_set(&c->err, -EINVAL,
                          "%s: batch %" PRIu64 " released but no batch is held", what,
                          b->stream_seq);
    if (b->stream_seq != n)
        return rf_err_set(&c->err, -EINVAL,
                          "%s: batch %" PRIu64 " released out of order: the "
                          "oldest held batch is %" PRIu64 "; release batches in the "
                          "order rf_next returned them",
                          what, b->stream_seq, n);
    return client_batch_slot(c, b, what) ? 0 : -EINVAL;
}

struct ring_slot *client_batch_slot(struct rf_client *c, const struct rf_batch *b,
                                    const char *what)
{
    uint64_t n = b->stream_seq, first = 0, stride = 0;
    struct ring_hdr *hdr = NULL;
    uint32_t depth = 0;

    if (n < c->released + c->ho.n_pend || n >= c->delivered) {
        rf_err_set(&c->err, -EINVAL,
                   "%s: batch %" PRIu64 " is not held (batches %" PRIu64 " to %" PRIu64
                   " are): pass a batch rf_next returned and not yet released",
                   what, n, c->released + c->ho.n_pend, c->delivered);
        return NULL;
    }
    if (c->conn.hdr && n >= c->first) {
        hdr = c->conn.hdr;
        first = c->first;
        depth = c->conn.priv->depth;
        stride = c->conn.priv->slot_stride;
    }
    for (unsigned i = 0; !hdr && i < c->n_old; i++)
        if (c->old[i].first <= n && n < c->old[i].end) {
            hdr = c->old[i].hdr;
            first = c->old[i].first;
            depth = c->old[i].depth;
            stride = c->old[i].stride;
        }
    if (!hdr || b->slot != (n - first) % depth ||
        b->data != (const uint8_t *)client_slot(hdr, stride, b->slot) + primary_offset(c)) {
        rf_err_set(&c->err, -EINVAL, "%s: batch %" PRIu64 " is not the one this client "
                   "delivered (slot %u)", what, n, b->slot);
        return NULL;
    }
    return client_slot(hdr, stride, b->slot);
}

int client_release_oldest(struct rf_client *c)
{
    uint64_t n = c->released;
    struct client_ring r;
    int rc = 0;

    if (c->conn.hdr && n >= c->first) {
        rc = release_live(c, n - c->first);
    } else if (c->n_old) {
        r = c->old[0]; /* releases go in order: the oldest retired ring */
        if (n + 1 == r.end) {
            client_handoff_unmapping(c, r.hdr);
            munmap(r.hdr, r.size);
            c->n_old--;
            memmove(&c->old[0], &c->old[1], c->n_old * sizeof(c->old[0]));
        }
    } else {
        return rf_err_set(&c->err, -EINVAL, "rf_release: batch %" PRIu64 " has no ring", n);
    }
    c->released++;
    client_check(c);
    return rc;
}

int rf_release(struct rf_client *c, const struct rf_batch *b)
{
    int rc;

    if (!c || !b)
        return -EINVAL;
    rc = client_check_owner(c, "rf_release");
    if (rc < 0)
        return rc;
    rc = client_check_handback(c, b, "rf_release");
    if (rc < 0)
        return rc;
    if (c->ho.n_pend == 0)
        return client_release_oldest(c);
    rc = client_handoff_queue(c, NULL); /* behind the copies still running */
    if (rc == 0)
        rc = client_handoff_drain(c, 0, -1);
    return rc;
}

/*
 * rf_get_stats has two versions (the glibc way): programs built against
 * 0.1 pass the 0.1 struct, which ends at `depth`, and get that much
 * (rf_get_stats_v01, bound to rf_get_stats@RINGFEED_0.1); programs built
 * against 0.2 get the whole struct (rf_get_stats_v02, the default
 * rf_get_stats@@RINGFEED_0.2).  Both names stay local (ringfeed.map).
 */
struct rf_stats_v01 {
    uint64_t batches;
    uint64_t samples;
    double wait_seconds;
    double between_seconds;
    uint64_t reconnects;
    uint64_t batches_per_epoch;
    uint32_t depth;
};
_Static_assert(offsetof(struct rf_stats, depth) == offsetof(struct rf_stats_v01, depth),
               "rf_stats grows at its end only");

void rf_get_stats_v02(const struct rf_client *c, struct rf_stats *s);
__attribute__((symver("rf_get_stats@@RINGFEED_0.2")))
void rf_get_stats_v02(const struct rf_client *c, struct rf_stats *s)
{
    if (!c) {
        memset(s, 0, sizeof(*s));
        return;
    }
    *s = c->st;
    s->batches_per_epoch = c->batches_per_epoch;
    s->depth = c->depth;
    client_handoff_stats(c, s);
}

void rf_get_stats_v01(const struct rf_client *c, struct rf_stats_v01 *s);
__attribute__((symver("rf_get_stats@RINGFEED_0.1")))
void rf_get_stats_v01(const struct rf_client *c, struct rf_stats_v01 *s)
{
    struct rf_stats all;

    rf_get_stats_v02(c, &all);
    memcpy(s, &all, sizeof(*s));
}

int rf_get_info(const struct rf_client *c, struct rf_info *info)
{
    if (!info)
        return -EINVAL;
    memset(info, 0, sizeof(*info));
    if (!c)
        return -EINVAL;
    if (!c->attached_once)
        return -ENOTCONN;
    *info = c->info;
    info->rank = c->rank;
    info->world = c->world;
    info->next_epoch = c->next_epoch;
    info->next_seq = c->next_seq;
    return 0;
}

int rf_detach(struct rf_client *c)
{
    int rc;

    if (!c)
        return -EINVAL;
    rc = client_check_owner(c, "rf_detach");
    if (rc < 0)
        return rc;
    retire(c); /* nothing to close when the daemon went away before */
    if (c->state != CLIENT_DEAD) /* a final error stays the one rf_next returns */
        die(c, rf_err_set(&c->err, -ENOTCONN, "rf_next: this client was detached "
                          "(rf_detach): it takes no more batches; open a new one"));
    client_check(c);
    return 0;
}

void rf_close(struct rf_client *c)
{
    if (!c)
        return;
    /* a forked child's copies are its own to close and unmap, but the
     * pinned memory and the pending copies belong to the parent's device
     * context: a child leaves them alone */
    if (getpid() == c->pid)
        client_handoff_close(c);
    client_conn_close(&c->conn);
    for (unsigned i = 0; i < c->n_old; i++)
        munmap(c->old[i].hdr, c->old[i].size);
    free(c->strings);
    free(c->folder);
    free(c);
}

const char *rf_strerror(int err)
{
    const char *name;

    if (err == 0)
        return "OK";
    name = strerrorname_np(err < 0 ? -err : err);
    return name ? name : "EUNKNOWN";
}

/* RF_DTYPE_* are ring_dtype numbers: dataset_types.c's table names them */
const char *rf_dtype_name(uint32_t dtype)
{
    int d = dataset_dtype_from_ring(dtype);

    return d < 0 ? NULL : dataset_dtype_name((enum dataset_dtype)d);
}

size_t rf_dtype_size(uint32_t dtype)
{
    int d = dataset_dtype_from_ring(dtype);

    return d < 0 ? 0 : dataset_dtype_size((enum dataset_dtype)d);
}

const char *rf_socket_path(const struct rf_client *c)
{
    return c ? c->path : "";
}

const char *rf_sources(const struct rf_client *c)
{
    return c ? c->conn.sources : "";
}

const char *rf_dataset_name(const struct rf_client *c)
{
    if (!c)
        return "";
    return c->folder ? c->dsname : c->opt.dataset ? c->opt.dataset : "";
}

const char *rf_last_error(const struct rf_client *c)
{
    if (!c)
        return "out of memory: could not allocate the ringfeed client";
    return c->err.msg;
}

void *rf_ring_base(const struct rf_client *c, size_t *size)
{
    if (!c || !c->conn.hdr) {
        if (size)
            *size = 0;
        return NULL;
    }
    if (size)
        *size = c->conn.size;
    return c->conn.hdr;
}
