/*
 * handoff.c - the CUDA hand-off of libringfeed: ring mappings registered
 * with cudaHostRegister, batches copied to the device on the caller's
 * stream, and their slots released to the daemon once the copy is done
 * (rf_cuda_register, rf_cuda_copy_release, rf_poll); or converted on the
 * way, uint8 images to normalized floats (rf_cuda_convert_release: the
 * batch staged in a device buffer of the client's, then a kernel on the
 * same stream, the slot released once the kernel is done).  The GPU runtime
 * itself is behind pin.h.
 *
 * The pending queue.  A batch is "handed back" when the caller gives it up
 * (rf_cuda_copy_release or rf_release) and "released" when the daemon is
 * told (C3 in ring.h).  Releases must reach the daemon in stream order, so
 * batches handed back while earlier copies are still running wait in
 * c->ho.pend, oldest first, each with its copy's event (or none, for a
 * plain rf_release queued behind copies).  Draining releases the head
 * while its event has completed.  Invariants:
 *   handed back = released + n_pend <= delivered;
 *   pend[i].n == released + i;
 *   a mapping stays mapped (and registered) while a pending batch lives in
 *   it: pending batches are unreleased, so a reconnect retires their ring
 *   rather than unmapping it (client.c, lose), and rf_close waits for
 *   every copy before it unregisters and unmaps.
 *
 * Pinning is asked for, never automatic: the first rf_cuda_register (or
 * rf_cuda_copy_release) probes for a device and registers the live
 * mapping; every mapping adopted after a reconnect is registered at once,
 * and each is unregistered just before it is unmapped.  A program that
 * only reads batches on the CPU never creates a CUDA context.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "pin.h"
#include "u8norm.h"

#define POLL_NS 20000 /* between event queries when waiting with a deadline */

static void note(struct rf_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct rf_client *c, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->ho.note, sizeof(c->ho.note), fmt, ap);
    va_end(ap);
}

static int pin_index(const struct rf_client *c, const void *base)
{
    for (unsigned i = 0; i < c->ho.n_pins; i++)
        if (c->ho.pins[i].base == base)
            return (int)i;
    return -1;
}

static struct client_pin *pin_of(struct rf_client *c, const void *base)
{
    int i = pin_index(c, base);

    return i < 0 ? NULL : &c->ho.pins[i];
}

/* Probes once per client; returns 0 or the probe's negative errno. */
static int probe(struct rf_client *c)
{
    char why[CLIENT_NOTE_MAX];
    int rc;

    if (c->ho.probe == 0) {
        rc = client_pin_probe(why, sizeof(why));
        c->ho.probe = rc == 0 ? 1 : rc;
        if (rc < 0)
            note(c, "%s: nothing is pinned; read batches on the CPU", why);
    }
    return c->ho.probe == 1 ? 0 : c->ho.probe;
}

/* Registers the live mapping (once).  Returns 0 when it is pinned. */
static int pin_live(struct rf_client *c)
{
    struct client_pin *p;
    char why[CLIENT_NOTE_MAX];
    int rc;

    if (!c->conn.hdr)
        return 0; /* reconnecting: the next mapping is pinned on adoption */
    if (pin_of(c, c->conn.hdr))
        return 0;
    if (c->ho.n_pins >= sizeof(c->ho.pins) / sizeof(c->ho.pins[0]))
        return -ENOSPC; /* cannot happen: one live ring plus the retired */
    rc = client_pin_register(c->conn.hdr, c->conn.size, why, sizeof(why));
    if (rc < 0 && rc != -EEXIST) {
        note(c, "%s on the %zu-byte ring: copies are from pageable memory", why,
             c->conn.size);
        return rc;
    }
    p = &c->ho.pins[c->ho.n_pins++];
    *p = (struct client_pin){.base = c->conn.hdr, .size = c->conn.size, .ours = rc == 0};
    if (rc == 0)
        note(c, "ring registered with cudaHostRegister (%zu bytes, page aligned): "
                "copies are DMA", c->conn.size);
    else
        note(c, "ring registered by the caller: copies are DMA");
    return 0;
}

void client_handoff_mapped(struct rf_client *c)
{
    if (c->ho.want && c->ho.probe == 1)
        pin_live(c);
}

void client_handoff_unmapping(struct rf_client *c, void *base)
{
    struct client_pin *p = pin_of(c, base);

    if (!p)
        return;
    if (p->ours)
        client_pin_unregister(base);
    *p = c->ho.pins[--c->ho.n_pins];
}

int rf_cuda_register(struct rf_client *c)
{
    int rc;

    if (!c)
        return -EINVAL;
    c->ho.want = 1;
    rc = probe(c);
    if (rc < 0)
        return rf_err_set(&c->err, rc, "rf_cuda_register: %s", c->ho.note);
    rc = pin_live(c);
    if (rc < 0)
        return rf_err_set(&c->err, rc == -ENOSPC ? rc : -EIO, "rf_cuda_register: %s",
                          c->ho.note);
    return 0;
}

/* Hands an event back for reuse (or frees it when the pool is full). */
static void spare(struct rf_client *c, void *ev)
{
    if (!ev)
        return;
    if (c->ho.n_spare < sizeof(c->ho.spare) / sizeof(c->ho.spare[0]))
        c->ho.spare[c->ho.n_spare++] = ev;
    else
        client_pin_event_free(ev);
}

int client_handoff_queue(struct rf_client *c, void *ev)
{
    if (c->ho.n_pend >= sizeof(c->ho.pend) / sizeof(c->ho.pend[0]))
        return rf_err_set(&c->err, -ENOBUFS, "the hand-off queue is full (%u batches)",
                          c->ho.n_pend);
    c->ho.pend[c->ho.n_pend] = (struct client_pending){
        .n = c->released + c->ho.n_pend,
        .ev = ev,
    };
    c->ho.n_pend++;
    return 0;
}

/* Releases the head of the queue. */
static int pop(struct rf_client *c)
{
    void *ev = c->ho.pend[0].ev;
    int rc;

    c->ho.n_pend--;
    memmove(&c->ho.pend[0], &c->ho.pend[1], c->ho.n_pend * sizeof(c->ho.pend[0]));
    spare(c, ev);
    rc = client_release_oldest(c);
    return rc;
}

static void nap(void)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = POLL_NS};

    nanosleep(&ts, NULL);
}

int client_handoff_drain(struct rf_client *c, int wait, int64_t deadline_ns)
{
    char why[CLIENT_NOTE_MAX];
    int rc = 0, done, failed = 0;

    while (c->ho.n_pend) {
        void *ev = c->ho.pend[0].ev;

        done = ev ? client_pin_query(ev, why, sizeof(why)) : 1;
        if (done == 0 && wait) {
            if (deadline_ns < 0) {
                done = client_pin_wait(ev, why, sizeof(why));
                done = done == 0 ? 1 : done;
            } else {
                while (done == 0 && client_now_ns() < deadline_ns) {
                    nap();
                    done = client_pin_query(ev, why, sizeof(why));
                }
                if (done == 0)
                    return rf_err_set(&c->err, -ETIMEDOUT,
                                      "rf_next: the copy of batch %" PRIu64
                                      " has not completed in time (call again)",
                                      c->ho.pend[0].n);
            }
        }
        if (done == 0)
            break;
        if (done < 0 && !failed) {
            /* a failed copy is not in flight: its slot may go back */
            failed = rf_err_set(&c->err, -EIO, "the copy of batch %" PRIu64 " to the device "
                                "failed: %s", c->ho.pend[0].n, why);
        }
        wait = 0;
        rc = pop(c);
        if (rc < 0)
            return rc;
    }
    return failed ? failed : rc;
}

/* What rf_cuda_copy_release and rf_cuda_convert_release share: the checks
 * of the caller and the batch, the device probe, an event, and once the
 * enqueue succeeded the batch queued behind it.  enqueue runs the copy (or
 * the converting copy) with the event; on its failure the event goes back
 * and the batch stays held. */
typedef int (*enqueue_fn)(struct rf_client *c, const struct rf_batch *b, void *dst,
                          void *stream, void *ev, const void *arg, char *why, size_t len);

static int hand_off(struct rf_client *c, const struct rf_batch *b, void *dst_device,
                    void *cuda_stream, const char *fn, enqueue_fn enqueue, const void *arg)
{
    char why[CLIENT_NOTE_MAX];
    void *ev;
    int rc;

    if (!c || !b)
        return -EINVAL;
    if (!dst_device)
        return rf_err_set(&c->err, -EINVAL, "%s: NULL destination", fn);
    rc = client_check_owner(c, fn);
    if (rc < 0)
        return rc;
    rc = client_check_handback(c, b, fn);
    if (rc < 0)
        return rc;
    if (!c->ho.want)
        (void)rf_cuda_register(c); /* failing to pin still copies */
    if (c->ho.probe != 1)
        return rf_err_set(&c->err, c->ho.probe < 0 ? c->ho.probe : -ENODEV, "%s: %s", fn,
                          c->ho.note);
    if (c->ho.n_spare) {
        ev = c->ho.spare[--c->ho.n_spare];
    } else {
        rc = client_pin_event_new(&ev, why, sizeof(why));
        if (rc < 0)
            return rf_err_set(&c->err, rc, "%s: %s", fn, why);
    }
    rc = enqueue(c, b, dst_device, cuda_stream, ev, arg, why, sizeof(why));
    if (rc < 0) {
        spare(c, ev);
        return rf_err_set(&c->err, rc, "%s: batch %" PRIu64 ": %s", fn, b->stream_seq, why);
    }
    rc = client_handoff_queue(c, ev);
    if (rc < 0) { /* cannot happen: at most depth-1 batches are held */
        client_pin_wait(ev, why, sizeof(why));
        spare(c, ev);
        return rc;
    }
    c->ho.copies++;
    return 0;
}

static int enqueue_copy(struct rf_client *c, const struct rf_batch *b, void *dst, void *stream,
                        void *ev, const void *arg, char *why, size_t len)
{
    (void)c;
    (void)arg;
    return client_pin_copy(dst, b->data, (size_t)b->count * b->sample_bytes, stream, ev, why,
                           len);
}

int rf_cuda_copy_release(struct rf_client *c, const struct rf_batch *b, void *dst_device,
                         void *cuda_stream)
{
    return hand_off(c, b, dst_device, cuda_stream, "rf_cuda_copy_release", enqueue_copy, NULL);
}

/* The staging buffer holds one slot's data (every batch of the stream
 * fits); made on first use, on the device current then, and again when a
 * reconnect brought a larger slot. */
static int enqueue_convert(struct rf_client *c, const struct rf_batch *b, void *dst,
                           void *stream, void *ev, const void *arg, char *why, size_t len)
{
    size_t bytes = (size_t)b->count * b->sample_bytes;
    size_t need = (size_t)c->opt.batch * b->sample_bytes;
    int rc;

    if (need < bytes)
        need = bytes;
    if (c->ho.stage && client_pin_stage_size(c->ho.stage) < need) {
        /* conversions still queued read the old buffer: let them finish */
        rc = client_handoff_drain(c, 1, -1);
        if (rc < 0) {
            snprintf(why, len, "%s", rf_last_error(c));
            return rc;
        }
        client_pin_stage_free(c->ho.stage);
        c->ho.stage = NULL;
    }
    if (!c->ho.stage) {
        rc = client_pin_stage_new(need, &c->ho.stage, why, len);
        if (rc < 0)
            return rc;
    }
    return client_pin_convert(dst, c->ho.stage, b->data, bytes, arg, stream, ev, why, len);
}

int rf_cuda_convert_release(struct rf_client *c, const struct rf_batch *b, void *dst_device,
                            void *cuda_stream, const struct rf_convert *cv)
{
    static const char fn[] = "rf_cuda_convert_release";
    struct client_conv conv = {0};
    char why[CLIENT_NOTE_MAX];
    float mean[U8NORM_MAX_CHANNELS], std[U8NORM_MAX_CHANNELS];
    uint32_t ch;

    if (!c || !b || !cv)
        return -EINVAL;
    if (cv->dtype != RF_DTYPE_F32 && cv->dtype != RF_DTYPE_F16 && cv->dtype != RF_DTYPE_BF16)
        return rf_err_set(&c->err, -EINVAL, "%s: dtype %u: RF_DTYPE_F32, RF_DTYPE_F16 or "
                          "RF_DTYPE_BF16", fn, cv->dtype);
    if (b->dtype != RF_DTYPE_U8 || (b->layout != RF_LAYOUT_CHW && b->layout != RF_LAYOUT_HWC))
        return rf_err_set(&c->err, -EINVAL, "%s: the batch is %s %s; the converting copy "
                          "takes uint8 images (CHW or HWC: the train, eval and none "
                          "transforms)", fn, rf_dtype_name(b->dtype) ? rf_dtype_name(b->dtype)
                                                                   : "of an unknown type",
                          b->layout == RF_LAYOUT_FLAT ? "samples" : "images");
    ch = b->layout == RF_LAYOUT_CHW ? b->shape[0] : b->shape[2];
    if (cv->channels != 0 && cv->channels != ch)
        return rf_err_set(&c->err, -EINVAL, "%s: %u means and stds for images of %u channels",
                          fn, cv->channels, ch);
    for (uint32_t i = 0; i < U8NORM_MAX_CHANNELS; i++) {
        mean[i] = cv->channels ? cv->mean[i] : 0.0f;
        std[i] = cv->channels ? cv->std[i] : 1.0f;
    }
    if (u8norm_coeffs(mean, std, ch, conv.a, conv.b, why, sizeof(why)) < 0)
        return rf_err_set(&c->err, -EINVAL, "%s: %s", fn, why);
    conv.out = cv->dtype;
    conv.c = ch;
    conv.plane = b->layout == RF_LAYOUT_CHW ? b->shape[1] * b->shape[2] : 1;
    return hand_off(c, b, dst_device, cuda_stream, fn, enqueue_convert, &conv);
}

int rf_poll(struct rf_client *c)
{
    int rc;

    if (!c)
        return -EINVAL;
    rc = client_check_owner(c, "rf_poll");
    if (rc < 0)
        return rc;
    rc = client_handoff_drain(c, 0, -1);
    return rc < 0 ? rc : (int)c->ho.n_pend;
}

void client_handoff_close(struct rf_client *c)
{
    char why[CLIENT_NOTE_MAX];

    /* the DMAs must be done before their memory is unregistered and unmapped */
    for (unsigned i = 0; i < c->ho.n_pend; i++)
        if (c->ho.pend[i].ev) {
            client_pin_wait(c->ho.pend[i].ev, why, sizeof(why));
            client_pin_event_free(c->ho.pend[i].ev);
        }
    c->ho.n_pend = 0;
    for (unsigned i = 0; i < c->ho.n_spare; i++)
        client_pin_event_free(c->ho.spare[i]);
    c->ho.n_spare = 0;
    client_pin_stage_free(c->ho.stage); /* every conversion reading it is done */
    c->ho.stage = NULL;
    while (c->ho.n_pins)
        client_handoff_unmapping(c, c->ho.pins[0].base);
}

void client_handoff_stats(const struct rf_client *c, struct rf_stats *s)
{
    s->pinned = c->conn.hdr && pin_index(c, c->conn.hdr) >= 0;
    s->copies_pending = c->ho.n_pend;
    s->cuda_copies = c->ho.copies;
    snprintf(s->pin_note, sizeof(s->pin_note), "%s",
             c->ho.note[0] ? c->ho.note
                           : "not registered: no rf_cuda_register or rf_cuda_copy_release "
                             "call yet");
}
