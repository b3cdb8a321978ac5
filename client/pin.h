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

/* 1 when the work before ev is done, 0 when not yet, -EIO when it failed. */
int client_pin_query(void *ev, char *why, size_t len);

/* Blocks until the work before ev is done; 0 or -EIO. */
int client_pin_wait(void *ev, char *why, size_t len);

#endif
