/*
 * test_client_handoff.c - libringfeed's CUDA hand-off (handoff.c) over a
 * fake GPU runtime (pin_fake.c) and the fake daemon: no GPU needed, so the
 * logic runs in every build.
 *
 * Checks: nothing is registered until asked; rf_cuda_register pins the
 * whole live mapping; a batch given to rf_cuda_copy_release keeps its slot
 * until its copy completes, and slots go back strictly in stream order
 * whatever order the copies finish in, plain rf_release included; rf_next
 * at the held-batch limit waits for the oldest copy (-ETIMEDOUT with a
 * timeout, the batch without); a copy that fails on the device is
 * reported and its slot released; without a device the calls fail and
 * change nothing; a refused registration still copies, from pageable
 * memory; a reconnect registers the new mapping and unregisters the old
 * when its last held batch is released; rf_close waits for every copy and
 * leaves nothing registered and no event alive.  The converting copy
 * (rf_cuda_convert_release) holds the slot the same way, delivers the
 * normalized floats, refuses bad requests leaving the batch held, and
 * stages in one buffer freed at rf_close.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_daemon.h"
#include "pin_fake.h"
#include "ringfeed.h"
#include "tap.h"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define DEPTH 4
#define BATCH 8
#define SAMPLE 4096
#define BPE 5


static struct fake_fleet g_fleet = {
    .depth = DEPTH, .batch = BATCH, .sample = SAMPLE, .bpe = BPE, .seals = SEALS,
    .per_ring = 1000, /* batches each ring's publisher makes */
};

static int handler(struct fake *f, int conn, const char *line)
{
    (void)f;
    return fake_fleet_attach(&g_fleet, conn, line);
}

static void stop_all(struct fake *f)
{
    fake_fleet_stop(&g_fleet, f);
}

static struct rf_client *open_client(struct fake *f)
{
    struct rf_options o;
    struct rf_client *c = NULL;
    int rc;

    if (fake_start(f, NULL, handler, NULL) < 0) {
        tap_ok(0, "fake daemon starts");
        return NULL;
    }
    rf_options_init(&o);
    o.socket = f->path;
    o.dataset = "fm";
    o.batch = BATCH;
    o.rank = 0;
    o.world = 1;
    o.reconnect_ms = 5000;
    rc = rf_open(&o, &c);
    if (!tap_ok(rc == 0, "rf_open attaches"))
        tap_diag("  %d: %s", rc, rf_last_error(c));
    return c;
}

static uint64_t released(int ring)
{
    return atomic_load(&g_fleet.rings[ring].hdr->released);
}

/* The bytes a batch's copy must deliver: the pixels as published. */
static int copied_ok(const uint8_t *dst, const struct rf_batch *b)
{
    for (uint32_t i = 0; i < b->count; i++)
        for (uint64_t j = 0; j < SAMPLE; j++)
            if (dst[i * SAMPLE + j] != fake_pixel(b->epoch, b->seq, i, j))
                return 0;
    return 1;
}

static uint8_t g_dev[8][BATCH * SAMPLE]; /* the fake's "device memory" */

static void ordering(void)
{
    struct rf_batch b[DEPTH], x;
    struct rf_client *c;
    struct rf_stats st;
    struct fake f;
    size_t size;
    void *base;
    int ev[DEPTH];

    pin_fake_reset();
    c = open_client(&f);
    if (!c)
        return stop_all(&f);
    rf_get_stats(c, &st);
    TAP_IS_INT(st.pinned, 0, "nothing pinned before it is asked for");
    TAP_OK(strstr(st.pin_note, "not registered"), "  and pin_note says so");
    TAP_IS_INT(pin_fake.probes, 0, "  no runtime call at rf_open");

    TAP_IS_INT(rf_cuda_register(c), 0, "rf_cuda_register");
    base = rf_ring_base(c, &size);
    TAP_OK(pin_fake.n_regs == 1 && pin_fake.regs[0] == base && pin_fake.reg_size[0] == size,
           "  registers the whole mapping, from its page-aligned base");
    TAP_IS_INT(rf_cuda_register(c), 0, "  a second call changes nothing");
    TAP_IS_INT(pin_fake.registers, 1, "  (one registration)");
    rf_get_stats(c, &st);
    TAP_IS_INT(st.pinned, 1, "stats: pinned");
    TAP_OK(strstr(st.pin_note, "cudaHostRegister"), "  pin_note names the registration");

    /* one copy: the slot stays the caller's until the copy completes */
    TAP_IS_INT(rf_next(c, &b[0], 5000), 0, "batch 0");
    TAP_IS_INT(rf_cuda_copy_release(c, &b[0], g_dev[0], (void *)0x5), 0,
               "rf_cuda_copy_release(batch 0)");
    ev[0] = pin_fake.last_copy;
    TAP_OK(pin_fake.ev[ev[0]].stream == (void *)0x5 &&
               pin_fake.ev[ev[0]].bytes == (size_t)b[0].count * SAMPLE &&
               pin_fake.ev[ev[0]].src == b[0].data,
           "  copies count*sample_bytes from the slot on the caller's stream");
    TAP_IS_INT(rf_poll(c), 1, "rf_poll: one copy pending");
    TAP_IS_INT(released(0), 0, "  the slot is not released while the copy runs");
    rf_get_stats(c, &st);
    TAP_IS_INT(st.copies_pending, 1, "  stats: copies_pending");
    TAP_IS_INT(rf_release(c, &b[0]), -EINVAL, "rf_release of a batch handed over: -EINVAL");
    pin_fake_complete(ev[0]);
    TAP_OK(copied_ok(g_dev[0], &b[0]), "the copy delivered the batch's pixels");
    TAP_IS_INT(rf_poll(c), 0, "rf_poll after the copy completed: none pending");
    TAP_IS_INT(released(0), 1, "  and the slot went back");

    /* copies finishing out of order release in order */
    for (int i = 1; i <= 2; i++) {
        rf_next(c, &b[i], 5000);
        TAP_IS_INT(rf_cuda_copy_release(c, &b[i], g_dev[i], NULL), 0, "copy batch 1 / 2");
        ev[i] = pin_fake.last_copy;
    }
    pin_fake_complete(ev[2]);
    TAP_IS_INT(rf_poll(c), 2, "batch 2's copy done first: both still pending");
    TAP_IS_INT(released(0), 1, "  nothing released out of order");
    pin_fake_complete(ev[1]);
    TAP_IS_INT(rf_poll(c), 0, "batch 1's copy done: both released");
    TAP_IS_INT(released(0), 3, "  in order");
    TAP_OK(copied_ok(g_dev[1], &b[1]) && copied_ok(g_dev[2], &b[2]), "  both copies intact");

    /* a plain release queued behind a copy */
    rf_next(c, &b[0], 5000);
    rf_next(c, &b[1], 5000);
    TAP_IS_INT(rf_cuda_copy_release(c, &b[1], g_dev[0], NULL), -EINVAL,
               "copying the newer of two held batches first: -EINVAL");
    TAP_OK(strstr(rf_last_error(c), "out of order"), "  out of order");
    TAP_IS_INT(rf_cuda_copy_release(c, &b[0], g_dev[0], NULL), 0, "copy batch 3");
    ev[0] = pin_fake.last_copy;
    TAP_IS_INT(rf_release(c, &b[1]), 0, "rf_release(batch 4) while batch 3 copies");
    TAP_IS_INT(released(0), 3, "  waits behind the copy");
    pin_fake_complete(ev[0]);
    TAP_IS_INT(rf_poll(c), 0, "after the copy");
    TAP_IS_INT(released(0), 5, "  both released");

    /* at the held limit rf_next waits for the oldest copy */
    for (int i = 0; i < DEPTH - 1; i++) {
        rf_next(c, &b[i], 5000);
        rf_cuda_copy_release(c, &b[i], g_dev[i], NULL);
    }
    TAP_IS_INT(rf_next(c, &x, 20), -ETIMEDOUT,
               "depth-1 copies pending, none done: rf_next(20 ms) times out");
    TAP_IS_INT(released(0), 5, "  nothing released");
    TAP_IS_INT(rf_next(c, &x, -1), 0, "rf_next(-1) waits for the oldest copy");
    TAP_OK(pin_fake.waits >= 1 && released(0) >= 6, "  which went back first");
    TAP_IS_INT(x.stream_seq, 8, "  and delivers the next batch");
    TAP_IS_INT(rf_cuda_copy_release(c, &x, g_dev[3], NULL), 0, "copy it too");

    /* a copy failing on the device */
    ev[0] = pin_fake.last_copy;
    for (int i = 0; i < pin_fake.n_ev; i++)
        if (pin_fake.ev[i].recorded)
            pin_fake_complete(i);
    TAP_IS_INT(rf_poll(c), 0, "all copies done: none pending");
    rf_next(c, &x, 5000);
    rf_cuda_copy_release(c, &x, g_dev[0], NULL);
    ev[0] = pin_fake.last_copy;
    pin_fake.ev[ev[0]].fail = 1;
    pin_fake_complete(ev[0]);
    TAP_IS_INT(rf_poll(c), -EIO, "a copy failed on the device: rf_poll says -EIO");
    TAP_OK(strstr(rf_last_error(c), "failed"), "  with the runtime's message");
    TAP_IS_INT(released(0), 10, "  and its slot went back");
    rf_get_stats(c, &st);
    TAP_IS_INT(st.cuda_copies, 9, "stats: cuda_copies counts every copy");

    /* close with copies in flight */
    rf_next(c, &x, 5000);
    rf_cuda_copy_release(c, &x, g_dev[0], NULL);
    ev[0] = pin_fake.last_copy;
    rf_close(c);
    TAP_OK(!pin_fake.ev[ev[0]].recorded && copied_ok(g_dev[0], &x) == 1,
           "rf_close waits for a copy in flight before unmapping");
    TAP_IS_INT(pin_fake.n_regs, 0, "  unregisters the ring");
    TAP_IS_INT(pin_fake_live_events(), 0, "  and frees every event");
    stop_all(&f);
}

static void no_device(void)
{
    struct rf_batch b;
    struct rf_client *c;
    struct rf_stats st;
    struct fake f;

    pin_fake_reset();
    pin_fake.probe_rc = -ENODEV;
    c = open_client(&f);
    if (!c)
        return stop_all(&f);
    TAP_IS_INT(rf_cuda_register(c), -ENODEV, "no device: rf_cuda_register -ENODEV");
    rf_next(c, &b, 5000);
    TAP_IS_INT(rf_cuda_copy_release(c, &b, g_dev[0], NULL), -ENODEV,
               "  rf_cuda_copy_release -ENODEV");
    TAP_OK(strstr(rf_last_error(c), "no CUDA device"), "  saying why");
    TAP_IS_INT(pin_fake.copies, 0, "  nothing copied");
    TAP_IS_INT(rf_release(c, &b), 0, "  the batch is still held: rf_release works");
    TAP_IS_INT(released(0), 1, "  and releases it");
    rf_get_stats(c, &st);
    TAP_OK(st.pinned == 0 && strstr(st.pin_note, "no CUDA device") &&
               strstr(st.pin_note, "CPU"),
           "stats: not pinned, and pin_note says why");
    rf_close(c);
    stop_all(&f);
}

static void refused_registration(void)
{
    struct rf_batch b;
    struct rf_client *c;
    struct rf_stats st;
    struct fake f;

    pin_fake_reset();
    pin_fake.register_rc = -EIO;
    c = open_client(&f);
    if (!c)
        return stop_all(&f);
    rf_next(c, &b, 5000);
    TAP_IS_INT(rf_cuda_copy_release(c, &b, g_dev[0], NULL), 0,
               "registration refused: rf_cuda_copy_release still copies");
    rf_get_stats(c, &st);
    TAP_OK(st.pinned == 0 && strstr(st.pin_note, "pageable"),
           "  stats: not pinned, copies from pageable memory");
    TAP_IS_INT(rf_cuda_register(c), -EIO, "  rf_cuda_register says -EIO");
    pin_fake_complete(pin_fake.last_copy);
    TAP_IS_INT(rf_poll(c), 0, "  the copy completes");
    TAP_IS_INT(released(0), 1, "  and the slot goes back");
    rf_close(c);
    stop_all(&f);
}

static void reconnect(void)
{
    struct rf_batch held, b;
    struct rf_client *c;
    struct fake f;
    void *old_base, *new_base;
    int ev;

    pin_fake_reset();
    g_fleet.per_ring = 1; /* so the batch after the drop comes from the new ring */
    c = open_client(&f);
    if (!c)
        return stop_all(&f);
    rf_cuda_register(c);
    old_base = rf_ring_base(c, NULL);
    rf_next(c, &held, 5000);
    TAP_IS_INT(rf_cuda_copy_release(c, &held, g_dev[0], NULL), 0,
               "a copy in flight when the daemon goes away");
    ev = pin_fake.last_copy;
    fake_drop(&f, 0);
    TAP_IS_INT(rf_next(c, &b, 5000), 0, "rf_next reconnects");
    new_base = rf_ring_base(c, NULL);
    TAP_OK(new_base != old_base && pin_fake_registered(new_base),
           "  and registers the new mapping");
    TAP_OK(pin_fake_registered(old_base), "  the old one stays registered while its copy runs");
    pin_fake_complete(ev);
    TAP_OK(copied_ok(g_dev[0], &held), "  the copy from the old mapping is intact");
    TAP_IS_INT(rf_release(c, &b), 0, "rf_release of the new ring's batch, behind the old copy");
    TAP_IS_INT(rf_poll(c), 0, "  both go back");
    TAP_OK(!pin_fake_registered(old_base), "  the old mapping is unregistered");
    TAP_IS_INT(pin_fake.n_regs, 1, "  only the live one stays");
    TAP_IS_INT(released(1), 1, "  the new ring got its release");
    rf_close(c);
    TAP_IS_INT(pin_fake.n_regs, 0, "rf_close unregisters it");
    TAP_IS_INT(pin_fake_live_events(), 0, "  and frees every event");
    stop_all(&f);
    g_fleet.per_ring = 1000;
}

/* The converting copy: the batch's uint8 values arrive as normalized
 * floats once the copy completes, the slot held until then; bad requests
 * are refused with the batch still the caller's; one staging buffer,
 * freed at rf_close. */
static float g_fdev[BATCH * SAMPLE];

static int converted_ok(const struct rf_batch *b, double mean, double std, double tol)
{
    for (uint32_t i = 0; i < b->count; i++)
        for (uint64_t j = 0; j < SAMPLE; j++) {
            uint8_t x = fake_pixel(b->epoch, b->seq, i, j);
            double want = tol == 0 ? (double)((float)x / 255.0f) : (x / 255.0 - mean) / std;
            double got = g_fdev[i * SAMPLE + j];

            if (got < want - tol || got > want + tol) {
                tap_diag("  sample %u value %llu: %.9g, want %.9g", i, (unsigned long long)j,
                         got, want);
                return 0;
            }
        }
    return 1;
}

static void converting(void)
{
    struct rf_convert cv = {.dtype = RF_DTYPE_F32, .channels = 1, .mean = {0.5f},
                            .std = {0.25f}};
    struct rf_batch b;
    struct rf_client *c;
    struct fake f;
    uint64_t rel;
    int rc;

    pin_fake_reset();
    c = open_client(&f);
    if (!c)
        return stop_all(&f);
    TAP_IS_INT(rf_next(c, &b, 5000), 0, "convert: batch 0");
    rel = released(0);
    TAP_IS_INT(rf_cuda_convert_release(c, &b, g_fdev, (void *)0x7, &cv), 0,
               "rf_cuda_convert_release(float32, mean 0.5, std 0.25)");
    TAP_OK(pin_fake.converts == 1 && pin_fake.copies == 0, "  one converting copy");
    TAP_OK(pin_fake.stages == 1 && pin_fake.stage_bytes == (size_t)BATCH * SAMPLE,
           "  stages in one device buffer of a batch's bytes");
    TAP_OK(pin_fake.ev[pin_fake.last_copy].cv.c == 1 &&
               pin_fake.ev[pin_fake.last_copy].cv.plane == SAMPLE &&
               pin_fake.ev[pin_fake.last_copy].stream == (void *)0x7,
           "  one channel of H*W values, on the caller's stream");
    TAP_OK(released(0) == rel && rf_poll(c) == 1, "  the slot is held until it completes");
    pin_fake_complete(pin_fake.last_copy);
    TAP_IS_INT(rf_poll(c), 0, "  then released");
    TAP_OK(converted_ok(&b, 0.5, 0.25, 1e-5), "  (x / 255 - 0.5) / 0.25, within float32");

    TAP_IS_INT(rf_next(c, &b, 5000), 0, "convert: batch 1");
    cv.channels = 0;
    TAP_IS_INT(rf_cuda_convert_release(c, &b, g_fdev, NULL, &cv), 0, "  channels 0: x / 255");
    pin_fake_complete(pin_fake.last_copy);
    rf_poll(c);
    TAP_OK(converted_ok(&b, 0.0, 1.0, 0.0), "  exactly x / 255");
    TAP_IS_INT(pin_fake.stages, 1, "  the staging buffer is reused");

    TAP_IS_INT(rf_next(c, &b, 5000), 0, "convert: batch 2");
    cv = (struct rf_convert){.dtype = RF_DTYPE_F32, .channels = 3, .mean = {0, 0, 0},
                             .std = {1, 1, 1}};
    rc = rf_cuda_convert_release(c, &b, g_fdev, NULL, &cv);
    TAP_OK(rc == -EINVAL && strstr(rf_last_error(c), "3 means and stds for images of 1"),
           "  three channels' means for one-channel images: refused, saying so");
    cv = (struct rf_convert){.dtype = RF_DTYPE_F32, .channels = 1, .std = {0}};
    rc = rf_cuda_convert_release(c, &b, g_fdev, NULL, &cv);
    TAP_OK(rc == -EINVAL && strstr(rf_last_error(c), "std is finite and > 0"),
           "  std 0: refused, saying so");
    cv = (struct rf_convert){.dtype = RF_DTYPE_U8};
    rc = rf_cuda_convert_release(c, &b, g_fdev, NULL, &cv);
    TAP_OK(rc == -EINVAL && strstr(rf_last_error(c), "RF_DTYPE_F32"), "  dtype u8: refused");
    TAP_IS_INT(pin_fake.converts, 2, "  nothing enqueued for the refusals");
    TAP_IS_INT(rf_release(c, &b), 0, "  the batch is still the caller's to release");

    rf_close(c);
    TAP_IS_INT(pin_fake.stages_freed, 1, "rf_close frees the staging buffer");
    TAP_IS_INT(pin_fake_live_events(), 0, "  and every event");
    stop_all(&f);
}

int main(void)
{
    ordering();
    no_device();
    refused_registration();
    reconnect();
    converting();
    return tap_done();
}
