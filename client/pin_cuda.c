/*
 * pin_cuda.c - pin.h over the CUDA runtime: device probe, cudaHostRegister
 * of ring mappings, and the copy-then-record-an-event that lets the
 * hand-off release a slot once its DMA is done; and the converting copy:
 * the batch staged on the device, then kernels/cuda/normalize.cu's
 * kn_cu_u8_affine (compiled into libringfeed, client/meson.build) writes
 * the floats, on the same stream.
 *
 * Errors the runtime reports are not sticky here (a refused registration,
 * a bad stream), so each failure path clears the runtime's last-error
 * state: the trainer checks cudaGetLastError() after its own kernel
 * launches and must not see ours.  cudaErrorNotReady from cudaEventQuery is
 * cleared the same way (as PyTorch's CUDAStream::query does).
 */
#include <errno.h>
#include <stdio.h>

#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "cuda_kernels.h" /* kn_cu_u8_affine: kernels/cuda/normalize.cu, built in */
#include "pin.h"
#include "ringfeed.h"

static int fail(const char *what, cudaError_t e, char *why, size_t len)
{
    snprintf(why, len, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    (void)cudaGetLastError();
    return -EIO;
}

int client_pin_probe(char *why, size_t len)
{
    cudaError_t e;
    int n = 0;

    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, len, "no CUDA device: cudaGetDeviceCount: %s (%s)",
                 cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError();
        return -ENODEV;
    }
    if (n == 0) {
        snprintf(why, len, "no CUDA device: cudaGetDeviceCount found 0");
        return -ENODEV;
    }
    return 0;
}

int client_pin_register(void *base, size_t size, char *why, size_t len)
{
    cudaError_t e = cudaHostRegister(base, size, cudaHostRegisterPortable);

    if (e == cudaErrorHostMemoryAlreadyRegistered) {
        (void)cudaGetLastError();
        snprintf(why, len, "the ring was registered already (by the caller)");
        return -EEXIST;
    }
    if (e != cudaSuccess)
        return fail("cudaHostRegister", e, why, len);
    return 0;
}

void client_pin_unregister(void *base)
{
    if (cudaHostUnregister(base) != cudaSuccess)
        (void)cudaGetLastError();
}

int client_pin_event_new(void **ev, char *why, size_t len)
{
    cudaEvent_t e;
    cudaError_t rc = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);

    if (rc != cudaSuccess) {
        *ev = NULL;
        return fail("cudaEventCreateWithFlags", rc, why, len);
    }
    *ev = e;
    return 0;
}

void client_pin_event_free(void *ev)
{
    if (ev && cudaEventDestroy((cudaEvent_t)ev) != cudaSuccess)
        (void)cudaGetLastError();
}

int client_pin_copy(void *dst, const void *src, size_t bytes, void *stream,
                    void *ev, char *why, size_t len)
{
    cudaError_t e;

    e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream);
    if (e != cudaSuccess)
        return fail("cudaMemcpyAsync", e, why, len);
    e = cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)stream);
    if (e != cudaSuccess) {
        /* the copy is enqueued: wait for it so the slot is not released
         * under a DMA still reading it */
        (void)cudaStreamSynchronize((cudaStream_t)stream);
        return fail("cudaEventRecord", e, why, len);
    }
    return 0;
}

int client_pin_query(void *ev, char *why, size_t len)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);

    if (e == cudaSuccess)
        return 1;
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();
        return 0;
    }
    return fail("cudaEventQuery", e, why, len);
}

int client_pin_wait(void *ev, char *why, size_t len)
{
    cudaError_t e = cudaEventSynchronize((cudaEvent_t)ev);

    if (e != cudaSuccess)
        return fail("cudaEventSynchronize", e, why, len);
    return 0;
}

struct stage {
    void *dev;          /* device memory: bytes */
    size_t bytes;
    cudaEvent_t used;   /* recorded after each conversion reading dev */
    int recorded;       /* used was recorded at least once */
};

int client_pin_stage_new(size_t bytes, void **out, char *why, size_t len)
{
    struct stage *st = calloc(1, sizeof(*st));
    cudaError_t e;

    *out = NULL;
    if (!st) {
        snprintf(why, len, "out of memory");
        return -ENOMEM;
    }
    st->bytes = bytes;
    e = cudaMalloc(&st->dev, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        free(st);
        return fail("cudaMalloc (the converting copy's staging buffer)", e, why, len);
    }
    e = cudaEventCreateWithFlags(&st->used, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        cudaFree(st->dev);
        free(st);
        return fail("cudaEventCreateWithFlags", e, why, len);
    }
    *out = st;
    return 0;
}

void client_pin_stage_free(void *p)
{
    struct stage *st = p;

    if (!st)
        return;
    /* every conversion reading it is done: the hand-off waited for them */
    if (cudaEventDestroy(st->used) != cudaSuccess || cudaFree(st->dev) != cudaSuccess)
        (void)cudaGetLastError();
    free(st);
}

size_t client_pin_stage_size(const void *p)
{
    return p ? ((const struct stage *)p)->bytes : 0;
}

int client_pin_convert(void *dst, void *p, const void *src, size_t bytes,
                       const struct client_conv *cv, void *stream, void *ev, char *why,
                       size_t len)
{
    struct stage *st = p;
    cudaStream_t s = (cudaStream_t)stream;
    struct kn_cu_affine k = {
        .count = bytes,
        .c = cv->c,
        .plane = cv->plane,
        .out = cv->out == RF_DTYPE_F16    ? KN_CU_OUT_F16
               : cv->out == RF_DTYPE_BF16 ? KN_CU_OUT_BF16
                                          : KN_CU_OUT_F32,
    };
    cudaError_t e;

    for (uint32_t i = 0; i < cv->c && i < 4; i++) {
        k.a[i] = cv->a[i];
        k.b[i] = cv->b[i];
    }
    if (bytes > st->bytes) {
        snprintf(why, len, "the batch's %zu bytes exceed the %zu-byte staging buffer", bytes,
                 st->bytes);
        return -EIO;
    }
    if (st->recorded) {
        e = cudaStreamWaitEvent(s, st->used, 0);
        if (e != cudaSuccess)
            return fail("cudaStreamWaitEvent", e, why, len);
    }
    e = cudaMemcpyAsync(st->dev, src, bytes, cudaMemcpyHostToDevice, s);
    if (e != cudaSuccess)
        return fail("cudaMemcpyAsync", e, why, len);
    e = (cudaError_t)kn_cu_u8_affine(s, &k, st->dev, dst);
    if (e == cudaSuccess)
        e = cudaEventRecord(st->used, s);
    if (e == cudaSuccess)
        st->recorded = 1;
    if (e == cudaSuccess)
        e = cudaEventRecord((cudaEvent_t)ev, s);
    if (e != cudaSuccess) {
        /* the copy is enqueued: wait for it so the slot is not released
         * under a DMA still reading it */
        (void)cudaStreamSynchronize(s);
        return fail("the conversion (kn_cu_u8_affine) or its event", e, why, len);
    }
    return 0;
}
