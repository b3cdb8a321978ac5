/*
 * pin.h - the GPU runtime under libringfeed's CUDA hand-off (handoff.c),
 * behind a small interface chosen at build time: pin_cuda.c over the CUDA
 * runtime when meson found CUDA, pin_none.c (every call -ENOTSUP) when it
 * did not, and tests/pin_fake.c in the hand-off's unit test, whose "copies"
 * complete when the test says so.
 *
 * Events are opaque handles (cudaEvent_t).  Every function returns 0 (or
 * the answer noted) or a negative errno with one line in why; none of them
 * leaves a CUDA error pending for the caller's next cudaGetLastError().
 */
#ifndef RINGFEED_CLIENT_PIN_H
#define RINGFEED_CLIENT_PIN_H

#include <stddef.h>
#include <stdint.h>

/* 0 when a device answers; -ENOTSUP (not built with CUDA) or -ENODEV. */
int client_pin_probe(char *why, size_t len);

/* cudaHostRegister(base, size, portable).  -EEXIST when the range is
 * registered already (by the caller); -EIO when the runtime refused. */
int client_pin_register(void *base, size_t size, char *why, size_t len);
void client_pin_unregister(void *base);

/* A new event for marking copies (no timing), and its release. */
int client_pin_event_new(void **ev, char *why, size_t len);
void client_pin_event_free(void *ev);

/* Enqueues the host-to-device copy of bytes from src on stream, then
 * records ev there.  -EIO when the runtime refused either. */
int client_pin_copy(void *dst, const void *src, size_t bytes, void *stream,
                    void *ev, char *why, size_t len);

/* The converting copy's parameters (rf_cuda_convert_release): uint8
 * values to float32, float16 or bfloat16, proto/u8norm.h's rule, value i
 * in channel (i / plane) % c. */
struct client_conv {
    uint32_t out;           /* RF_DTYPE_F32, RF_DTYPE_F16 or RF_DTYPE_BF16 */
    uint32_t c, plane;
    float a[4], b[4];       /* u8norm_coeffs' */
};

/* A device buffer the converting copy stages uint8 batches in, on the
 * device current when it was made, with an event marking its last use. */
int client_pin_stage_new(size_t bytes, void **stage, char *why, size_t len);
void client_pin_stage_free(void *stage);
size_t client_pin_stage_size(const void *stage);

/* Enqueues on stream, in order: a wait for stage's last use (a kernel on
 * another stream may still read it), the copy of bytes from src into
 * stage, the conversion of those bytes into dst, stage's last-use mark,
 * then ev.  -EIO when the runtime refused any of it (nothing enqueued is
 * left reading src: the caller may release it once ev completes or fails). */
int client_pin_convert(void *dst, void *stage, const void *src, size_t bytes,
                       const struct client_conv *cv, void *stream, void *ev, char *why,
                       size_t len);

/* 1 when the work before ev is done, 0 when not yet, -EIO when it failed. */
int client_pin_query(void *ev, char *why, size_t len);

/* Blocks until the work before ev is done; 0 or -EIO. */
int client_pin_wait(void *ev, char *why, size_t len);

#endif
