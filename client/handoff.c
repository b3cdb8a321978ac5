/*
 * handoff.c - the CUDA hand-off of libringfeed: ring mappings registered
 * with cudaHostRegister, batches copied to the device on the caller's
 * stream, and their slots released to the daemon once the copy is done
 * (rf_cuda_register, rf_cuda_copy_release, rf_poll).  The GPU runtime
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

int rf_cuda_copy_release(struct rf_client *c, const struct rf_batch *b, void *dst_device,
                         void *cuda_stream)
{
    char why[CLIENT_NOTE_MAX];
    void *ev;
    int rc;

    if (!c || !b)
        return -EINVAL;
    if (!dst_device)
        return rf_err_set(&c->err, -EINVAL, "rf_cuda_copy_release: NULL destination");
    rc = client_check_owner(c, "rf_cuda_copy_release");
    if (rc < 0)
        return rc;
    rc = client_check_handback(c, b, "rf_cuda_copy_release");
    if (rc < 0)
        return rc;
    if (!c->ho.want)
        (void)rf_cuda_register(c); /* failing to pin still copies */
    if (c->ho.probe != 1)
        return rf_err_set(&c->err, c->ho.probe < 0 ? c->ho.probe : -ENODEV,
                          "rf_cuda_copy_release: %s", c->ho.note);
    if (c->ho.n_spare) {
        ev = c->ho.spare[--c->ho.n_spare];
    } else {
        rc = client_pin_event_new(&ev, why, sizeof(why));
        if (rc < 0)
            return rf_err_set(&c->err, rc, "rf_cuda_copy_release: %s", why);
    }
    rc = client_pin_copy(dst_device, b->data, (size_t)b->count * b->sample_bytes, cuda_stream,
                         ev, why, sizeof(why));
    if (rc < 0) {
        spare(c, ev);
        return rf_err_set(&c->err, rc, "rf_cuda_copy_release: batch %" PRIu64 ": %s",
                          b->stream_seq, why);
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
