/*
 * pin_fake.h - a stand-in GPU runtime under libringfeed's hand-off
 * (client/pin.h), for tests/test_client_handoff.c.  It has no device:
 * "device memory" is host memory, a copy is recorded when enqueued and its
 * bytes move only when the test completes its event (as a DMA that has not
 * run yet), and every call is counted, so the test can see what the
 * library registered, copied, waited for and freed.
 */
#ifndef RINGFEED_TESTS_PIN_FAKE_H
#define RINGFEED_TESTS_PIN_FAKE_H

#include <stddef.h>
#include <stdint.h>

#include "pin.h"

#define PIN_FAKE_MAX 256

struct pin_fake_event {
    int live;            /* created and not freed */
    int recorded;        /* a copy was recorded on it and not completed */
    int fail;            /* completing it reports a device error */
    void *dst;
    const void *src;
    size_t bytes;
    void *stream;
    int conv;            /* a converting copy: completing it converts */
    struct client_conv cv;
};

struct pin_fake {
    int probe_rc;        /* what client_pin_probe returns (0: a device) */
    int register_rc;     /* what client_pin_register returns */
    int probes, registers, unregisters, copies, waits;
    void *regs[PIN_FAKE_MAX]; /* bases registered now */
    size_t reg_size[PIN_FAKE_MAX];
    int n_regs;
    struct pin_fake_event ev[PIN_FAKE_MAX];
    int n_ev;            /* events ever made */
    int last_copy;       /* index of the event of the last copy, -1 none */
    int converts;        /* client_pin_convert calls */
    int stages, stages_freed; /* staging buffers made and freed */
    size_t stage_bytes;  /* the last one's size */
};

extern struct pin_fake pin_fake;

/* Resets every counter and setting (probe and register succeed). */
void pin_fake_reset(void);
/* Completes the copy recorded on event i: moves its bytes. */
void pin_fake_complete(int i);
/* Events alive now. */
int pin_fake_live_events(void);
/* 1 when base is registered now. */
int pin_fake_registered(const void *base);

#endif
