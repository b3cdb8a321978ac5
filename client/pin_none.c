/*
 * pin_none.c - pin.h for a libringfeed built without CUDA: there is no
 * device to copy to, so every call says so (-ENOTSUP) and the caller reads
 * slots on the CPU.
 */
#include <errno.h>
#include <stdio.h>

#include "pin.h"

#define NOT_BUILT "libringfeed was built without CUDA (meson found no nvcc " \
                  "or -Dcuda=disabled)"

int client_pin_probe(char *why, size_t len)
{
    snprintf(why, len, NOT_BUILT);
    return -ENOTSUP;
}

int client_pin_register(void *base, size_t size, char *why, size_t len)
{
    (void)base;
    (void)size;
    snprintf(why, len, NOT_BUILT);
    return -ENOTSUP;
}

void client_pin_unregister(void *base)
{
    (void)base;
}

int client_pin_event_new(void **ev, char *why, size_t len)
{
    *ev = NULL;
    snprintf(why, len, NOT_BUILT);
    return -ENOTSUP;
}

void client_pin_event_free(void *ev)
{
    (void)ev;
}

int client_pin_copy(void *dst, const void *src, size_t bytes, void *stream,
                    void *ev, char *why, size_t len)
{
    (void)dst;
    (void)src;
    (void)bytes;
    (void)stream;
    (void)ev;
    snprintf(why, len, NOT_BUILT);
    return -ENOTSUP;
}

int client_pin_query(void *ev, char *why, size_t len)
{
    (void)ev;
    (void)why;
    (void)len;
    return 1;
}

int client_pin_wait(void *ev, char *why, size_t len)
{
    (void)ev;
    (void)why;
    (void)len;
    return 0;
}

int client_pin_stage_new(size_t bytes, void **stage, char *why, size_t len)
{
    (void)bytes;
    *stage = NULL;
    snprintf(why, len, NOT_BUILT);
    return -ENOTSUP;
}

void client_pin_stage_free(void *stage)
{
    (void)stage;
}

size_t client_pin_stage_size(const void *stage)
{
    (void)stage;
    return 0;
}

int client_pin_convert(void *dst, void *stage, const void *src, size_t bytes,
                       const struct client_conv *cv, void *stream, void *ev, char *why,
                       size_t len)
{
    (void)dst;
    (void)stage;
    (void)src;
    (void)bytes;
    (void)cv;
    (void)stream;
    (void)ev;
    snprintf(why, len, NOT_BUILT);
    return -ENOTSUP;
}
