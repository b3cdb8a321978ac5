/*
 * pin_fake.c - client/pin.h without a GPU, for the hand-off test (see
 * pin_fake.h).  An event handle is 1 + its index in pin_fake.ev, so a
 * stale or foreign handle is caught by the range check.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"

#include "pin.h"
#include "pin_fake.h"

struct pin_fake pin_fake;

void pin_fake_reset(void)
{
    memset(&pin_fake, 0, sizeof(pin_fake));
    pin_fake.last_copy = -1;
}

static struct pin_fake_event *event(void *ev)
{
    uintptr_t i = (uintptr_t)ev;

    if (i < 1 || i > (uintptr_t)pin_fake.n_ev || !pin_fake.ev[i - 1].live) {
        fprintf(stderr, "pin_fake: bad event handle %p\n", ev);
        return NULL;
    }
    return &pin_fake.ev[i - 1];
}

/* The converting copy's arithmetic, written from its definition (x * a + b
 * rounded to float32, or x / 255; then to the output type, to nearest,
 * ties to even) rather than shared with the library. */
static void convert(const struct pin_fake_event *e)
{
    const uint8_t *s = e->src;

    for (size_t i = 0; i < e->bytes; i++) {
        uint32_t ch = (uint32_t)((i / e->cv.plane) % e->cv.c);
        float a = e->cv.a[ch], b = e->cv.b[ch];
        volatile float prod = (float)s[i] * a; /* no fused multiply-add */
        float x = a < 0 ? (float)s[i] / 255.0f : prod + b;
        uint32_t u;

        if (e->cv.out == RF_DTYPE_F32) {
            memcpy((char *)e->dst + i * 4, &x, 4);
        } else if (e->cv.out == RF_DTYPE_F16) {
            _Float16 h = (_Float16)x;
            memcpy((char *)e->dst + i * 2, &h, 2);
        } else {
            uint16_t h;

            memcpy(&u, &x, 4);
            h = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
            memcpy((char *)e->dst + i * 2, &h, 2);
        }
    }
}

void pin_fake_complete(int i)
{
    struct pin_fake_event *e = &pin_fake.ev[i];

    if (e->recorded && !e->fail) {
        if (e->conv)
            convert(e);
        else
            memcpy(e->dst, e->src, e->bytes);
    }
    e->recorded = 0;
}

int pin_fake_live_events(void)
{
    int n = 0;

    for (int i = 0; i < pin_fake.n_ev; i++)
        n += pin_fake.ev[i].live;
    return n;
}

int pin_fake_registered(const void *base)
{
    for (int i = 0; i < pin_fake.n_regs; i++)
        if (pin_fake.regs[i] == base)
            return 1;
    return 0;
}

int client_pin_probe(char *why, size_t len)
{
    pin_fake.probes++;
    if (pin_fake.probe_rc)
        snprintf(why, len, "no CUDA device: the fake says so");
    return pin_fake.probe_rc;
}

int client_pin_register(void *base, size_t size, char *why, size_t len)
{
    pin_fake.registers++;
    if (pin_fake.register_rc) {
        snprintf(why, len, "cudaHostRegister: the fake refuses");
        return pin_fake.register_rc;
    }
    if (pin_fake_registered(base)) {
        snprintf(why, len, "registered already");
        return -EEXIST;
    }
    pin_fake.regs[pin_fake.n_regs] = base;
    pin_fake.reg_size[pin_fake.n_regs++] = size;
    return 0;
}

void client_pin_unregister(void *base)
{
    pin_fake.unregisters++;
    for (int i = 0; i < pin_fake.n_regs; i++)
        if (pin_fake.regs[i] == base) {
            pin_fake.regs[i] = pin_fake.regs[--pin_fake.n_regs];
            pin_fake.reg_size[i] = pin_fake.reg_size[pin_fake.n_regs];
            return;
        }
    fprintf(stderr, "pin_fake: unregistering %p, which is not registered\n", base);
}

int client_pin_event_new(void **ev, char *why, size_t len)
{
    if (pin_fake.n_ev >= PIN_FAKE_MAX) {
        snprintf(why, len, "pin_fake: out of events");
        return -ENOMEM;
    }
    pin_fake.ev[pin_fake.n_ev] = (struct pin_fake_event){.live = 1};
    *ev = (void *)(uintptr_t)(++pin_fake.n_ev);
    return 0;
}

void client_pin_event_free(void *ev)
{
    struct pin_fake_event *e = event(ev);

    if (e)
        e->live = 0;
}

int client_pin_copy(void *dst, const void *src, size_t bytes, void *stream,
                    void *ev, char *why, size_t len)
{
    struct pin_fake_event *e = event(ev);

    if (!e) {
        snprintf(why, len, "pin_fake: bad event");
        return -EIO;
    }
    pin_fake.copies++;
    e->recorded = 1;
    e->fail = 0;
    e->dst = dst;
    e->src = src;
    e->bytes = bytes;
    e->stream = stream;
    e->conv = 0;
    pin_fake.last_copy = (int)((uintptr_t)ev - 1);
    return 0;
}

int client_pin_stage_new(size_t bytes, void **stage, char *why, size_t len)
{
    size_t *p = malloc(sizeof(size_t));

    if (!p) {
        snprintf(why, len, "pin_fake: out of memory");
        return -ENOMEM;
    }
    *p = bytes;
    *stage = p;
    pin_fake.stages++;
    pin_fake.stage_bytes = bytes;
    return 0;
}

void client_pin_stage_free(void *stage)
{
    if (stage)
        pin_fake.stages_freed++;
    free(stage);
}

size_t client_pin_stage_size(const void *stage)
{
    return stage ? *(const size_t *)stage : 0;
}

int client_pin_convert(void *dst, void *stage, const void *src, size_t bytes,
                       const struct client_conv *cv, void *stream, void *ev, char *why,
                       size_t len)
{
    int rc;

    if (bytes > client_pin_stage_size(stage)) {
        snprintf(why, len, "pin_fake: %zu bytes into a %zu-byte stage", bytes,
                 client_pin_stage_size(stage));
        return -EIO;
    }
    rc = client_pin_copy(dst, src, bytes, stream, ev, why, len);
    if (rc < 0)
        return rc;
    pin_fake.copies--; /* counted as a conversion, not a plain copy */
    pin_fake.converts++;
    pin_fake.ev[pin_fake.last_copy].conv = 1;
    pin_fake.ev[pin_fake.last_copy].cv = *cv;
    return 0;
}

int client_pin_query(void *ev, char *why, size_t len)
{
    struct pin_fake_event *e = event(ev);

    if (!e)
        return -EIO;
    if (e->recorded)
        return 0;
    if (e->fail) {
        snprintf(why, len, "cudaEventQuery: the fake's copy failed");
        return -EIO;
    }
    return 1;
}

int client_pin_wait(void *ev, char *why, size_t len)
{
    struct pin_fake_event *e = event(ev);

    pin_fake.waits++;
    if (!e)
        return -EIO;
    pin_fake_complete((int)((uintptr_t)ev - 1)); /* the DMA runs to its end */
    if (e->fail) {
        snprintf(why, len, "cudaEventSynchronize: the fake's copy failed");
        return -EIO;
    }
    return 0;
}
