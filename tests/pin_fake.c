/*
 * pin_fake.c - client/pin.h without a GPU, for the hand-off test (see
 * pin_fake.h).  An event handle is 1 + its index in pin_fake.ev, so a
 * stale or foreign handle is caught by the range check.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

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

void pin_fake_complete(int i)
{
    struct pin_fake_event *e = &pin_fake.ev[i];

    if (e->recorded && !e->fail)
        memcpy(e->dst, e->src, e->bytes);
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
    pin_fake.last_copy = (int)((uintptr_t)ev - 1);
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
