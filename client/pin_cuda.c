/*
 * pin_cuda.c - pin.h over the CUDA runtime: device probe, cudaHostRegister
 * of ring mappings, and the copy-then-record-an-event that lets the
 * hand-off release a slot once its DMA is done.
 *
 * Errors the runtime reports are not sticky here (a refused registration,
 * a bad stream), so each failure path clears the runtime's last-error
 * state: the trainer checks cudaGetLastError() after its own kernel
 * launches and must not see ours.  cudaErrorNotReady from cudaEventQuery is
 * cleared the same way (as PyTorch's CUDAStream::query does).
 */
#include <errno.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "pin.h"

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
