/*
 * cuda_backend.c - the CUDA backend's ops table, the thin C side over the
 * CUDA runtime and cuBLAS: device choice and its report, device memory,
 * asynchronous copies, streams (created non-blocking, or the caller's
 * cudaStream_t wrapped), events (cudaEventRecord / cudaEventSynchronize /
 * cudaEventElapsedTime), and normalize's launch.  The device code is in
 * normalize.cu and mlp.cu; the model's calls are in cuda_mlp.c.
 *
 * What it needs at run time: the CUDA runtime is linked in statically
 * (libcudart_static.a) and opens the NVIDIA driver, libcuda.so.1, itself;
 * cuBLAS is opened with dlopen once a device has answered (cu_blas.c).  No
 * CUDA library is linked, so the trainer starts on any node.
 *
 * kn_open fails with -ENODEV, and a one-line reason that AUTO copies into
 * the CPU context's note, when cudaGetDeviceCount fails or finds no device
 * (no driver at all, or one older than this build's runtime, are told
 * apart), when the device asked for is not there, when the device cannot
 * run this build's kernels (e.g. an older SM than the one compiled for),
 * or when cuBLAS cannot be loaded or cannot create a handle.
 *
 * The device chosen at kn_open is made current on the calling thread then;
 * a program that drives several devices from one thread must make the
 * right one current before each call (cudaSetDevice).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cu_backend.h"
#include "cuda_kernels.h"

_Static_assert(KN_MAX_CHANNELS <= 4, "struct kn_cu_norm holds 4 channels");

int kn_cu_check(struct kn_ctx *ctx, const char *what, int e)
{
    cudaError_t err = (cudaError_t)e;

    if (err == cudaSuccess)
        return 0;
    return kn_set_err(ctx, -EIO, "%s: %s: %s", what, cudaGetErrorName(err),
                      cudaGetErrorString(err));
}

int kn_cu_blas_check(struct kn_ctx *ctx, const char *what, cublasStatus_t st)
{
    const struct cu_blas *api = cu_of(ctx)->api;

    if (st == CUBLAS_STATUS_SUCCESS)
        return 0;
    return kn_set_err(ctx, -EIO, "%s: %s: %s", what, api->status_name(st),
                      api->status_string(st));
}

int kn_cu_device_count(void)
{
    int count = 0;

    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return count;
}

/* Why cudaGetDeviceCount failed, in words: a missing driver and one too
 * old for the runtime linked in both read "insufficient driver". */
static void cu_no_device(cudaError_t e, char *why, size_t whylen)
{
    int drv = 0;

    if (e == cudaErrorInsufficientDriver &&
        cudaDriverGetVersion(&drv) == cudaSuccess && drv == 0) {
        snprintf(why, whylen, "CUDA built, no device: cudaGetDeviceCount: "
                 "no NVIDIA driver here (libcuda.so.1 not found) (%s)",
                 cudaGetErrorName(e));
        return;
    }
    if (e == cudaErrorInsufficientDriver && drv > 0) {
        snprintf(why, whylen, "CUDA built, no device: cudaGetDeviceCount: "
                 "the NVIDIA driver runs CUDA %d.%d, this build's runtime "
                 "needs %d.%d (%s)", drv / 1000, drv % 1000 / 10,
                 CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10,
                 cudaGetErrorName(e));
        return;
    }
    snprintf(why, whylen, "CUDA built, no device: cudaGetDeviceCount: "
             "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}

static int cu_open(struct kn_ctx *ctx, const struct kn_open_opts *o,
                   char *why, size_t whylen)
{
    struct cudaDeviceProp prop;
    const struct cu_blas *api;
    char blas_why[KN_MSG_MAX];
    struct cu_ctx *c;
    cublasStatus_t bst;
    cudaError_t e;
    int count = 0, rc = -ENODEV;

    e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cu_no_device(e, why, whylen);
        cudaGetLastError();
        goto fail;
    }
    if (count == 0) {
        snprintf(why, whylen, "CUDA built, no device: cudaGetDeviceCount: "
                 "0 devices");
        goto fail;
    }
    if (o->device >= count) {
        snprintf(why, whylen, "CUDA device %d asked for, %d present",
                 o->device, count);
        goto fail;
    }
    e = cudaSetDevice(o->device);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&prop, o->device);
    if (e != cudaSuccess) {
        snprintf(why, whylen, "CUDA device %d: %s (%s)", o->device,
                 cudaGetErrorString(e), cudaGetErrorName(e));
        goto fail;
    }
    e = (cudaError_t)kn_cu_probe();
    if (e != cudaSuccess) {
        snprintf(why, whylen, "CUDA device %d (%s, sm_%d%d) cannot run "
                 "these kernels: %s (%s)", o->device, prop.name, prop.major,
                 prop.minor, cudaGetErrorString(e), cudaGetErrorName(e));
        goto fail;
    }
    /* loaded only where a device answered: a CPU node maps none of it */
    api = kn_cu_blas(blas_why, sizeof blas_why);
    if (!api) {
        snprintf(why, whylen, "CUDA device %d (%s): %s", o->device, prop.name,
                 blas_why);
        goto fail;
    }

    rc = -ENOMEM;
    c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, whylen, "kn_open: out of memory");
        goto fail;
    }
    c->device = o->device;
    c->api = api;
    bst = api->create(&c->blas);
    if (bst != CUBLAS_STATUS_SUCCESS) {
        rc = -ENODEV;
        snprintf(why, whylen, "CUDA device %d: cublasCreate (%s): %s",
                 o->device, api->path, api->status_string(bst));
        goto fail_ctx;
    }
    /* fp32 GEMMs in full fp32: the default math mode uses no TF32. */
    bst = api->set_math_mode(c->blas, CUBLAS_DEFAULT_MATH);
    if (bst != CUBLAS_STATUS_SUCCESS) {
        rc = -ENODEV;
        snprintf(why, whylen, "cublasSetMathMode: %s",
                 api->status_string(bst));
        goto fail_blas;
    }
    ctx->impl = c;
    snprintf(ctx->note, sizeof ctx->note, "cuda device %d of %d: %.100s, "
             "sm_%d%d, %.1f GiB; cuBLAS %d.%d.%d from %.150s", o->device,
             count, prop.name, prop.major, prop.minor,
             (double)prop.totalGlobalMem / (1 << 30), api->major, api->minor,
             api->patch, api->path);
    return 0;

fail_blas:
    api->destroy(c->blas);
fail_ctx:
    free(c);
fail:
    return rc;
}

static void cu_close(struct kn_ctx *ctx)
{
    struct cu_ctx *c = cu_of(ctx);

    if (!c)
        return;
    c->api->destroy(c->blas);
    free(c);
    ctx->impl = NULL;
}

static int cu_sync(struct kn_ctx *ctx)
{
    return kn_cu_check(ctx, "cudaDeviceSynchronize",
                       cudaDeviceSynchronize());
}

static int cu_alloc(struct kn_ctx *ctx, size_t bytes, void **out)
{
    cudaError_t e = cudaMalloc(out, bytes);

    if (e != cudaSuccess) {
        *out = NULL;
        return kn_set_err(ctx, -ENOMEM, "kn_buf_alloc: cudaMalloc of %zu "
                          "bytes: %s", bytes, cudaGetErrorString(e));
    }
    return 0;
}

static void cu_free(struct kn_ctx *ctx, void *p)
{
    (void)ctx;
    cudaFree(p);
}

static int cu_copy(struct kn_ctx *ctx, struct kn_stream *s, void *dst,
                   const void *src, size_t bytes, enum kn_copy_dir dir)
{
    static const enum cudaMemcpyKind kind[] = {
        [KN_H2D] = cudaMemcpyHostToDevice,
        [KN_D2H] = cudaMemcpyDeviceToHost,
        [KN_D2D] = cudaMemcpyDeviceToDevice,
    };

    return kn_cu_check(ctx, "kn_copy: cudaMemcpyAsync",
                       cudaMemcpyAsync(dst, src, bytes, kind[dir],
                                       cu_stream(s)));
}

static int cu_dev_mem(struct kn_ctx *ctx, size_t *used, size_t *total)
{
    size_t fr = 0, tot = 0;
    int rc = kn_cu_check(ctx, "cudaMemGetInfo", cudaMemGetInfo(&fr, &tot));

    if (rc < 0)
        return rc;
    *used = tot - fr;
    *total = tot;
    return 0;
}

static int cu_stream_init(struct kn_ctx *ctx, struct kn_stream *s,
                          void *external)
{
    cudaStream_t st;

    if (external) {
        s->handle = external;
        s->owned = 0;
        return 0;
    }
    if (kn_cu_check(ctx, "cudaStreamCreateWithFlags",
                    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)))
        return -EIO;
    s->handle = st;
    s->owned = 1;
    return 0;
}

static void cu_stream_fini(struct kn_stream *s)
{
    if (s && s->owned)
        cudaStreamDestroy(cu_stream(s));
}

static int cu_stream_sync(struct kn_stream *s)
{
    return kn_cu_check(s->ctx, "cudaStreamSynchronize",
                       cudaStreamSynchronize(cu_stream(s)));
}

static int cu_stream_wait(struct kn_stream *s, struct kn_event *ev)
{
    return kn_cu_check(s->ctx, "cudaStreamWaitEvent",
                       cudaStreamWaitEvent(cu_stream(s),
                                           (cudaEvent_t)ev->handle, 0));
}

static int cu_event_init(struct kn_ctx *ctx, struct kn_event *ev)
{
    cudaEvent_t e;

    if (kn_cu_check(ctx, "cudaEventCreate", cudaEventCreate(&e)))
        return -EIO;
    ev->handle = e;
    return 0;
}

static void cu_event_fini(struct kn_event *ev)
{
    cudaEventDestroy((cudaEvent_t)ev->handle);
}

static int cu_event_record(struct kn_event *ev, struct kn_stream *s)
{
    return kn_cu_check(ev->ctx, "cudaEventRecord",
                       cudaEventRecord((cudaEvent_t)ev->handle,
                                       cu_stream(s)));
}

static int cu_event_sync(struct kn_event *ev)
{
    return kn_cu_check(ev->ctx, "cudaEventSynchronize",
                       cudaEventSynchronize((cudaEvent_t)ev->handle));
}

static int cu_event_query(struct kn_event *ev)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev->handle);

    if (e == cudaErrorNotReady) {
        cudaGetLastError();     /* not sticky: clear it */
        return 0;
    }
    return kn_cu_check(ev->ctx, "cudaEventQuery", e) < 0 ? -EIO : 1;
}

static int cu_event_elapsed(struct kn_event *a, struct kn_event *b,
                            float *ms)
{
    cudaError_t e = cudaEventElapsedTime(ms, (cudaEvent_t)a->handle,
                                         (cudaEvent_t)b->handle);

    if (e == cudaErrorNotReady) {
        cudaGetLastError();     /* not sticky: clear it */
        return kn_set_err(a->ctx, -EAGAIN, "kn_event_elapsed_ms: an event "
                          "has not completed (sync the later one first)");
    }
    return kn_cu_check(a->ctx, "cudaEventElapsedTime", e);
}

static int cu_normalize(struct kn_ctx *ctx, struct kn_stream *s,
                        const struct kn_norm *p, const uint8_t *src,
                        void *dst)
{
    struct kn_cu_norm q = { .n = p->n, .c = p->c, .h = p->h, .w = p->w,
                            .chw = p->layout == KN_CHW,
                            .bf16 = p->out == KN_BF16 };

    for (uint32_t c = 0; c < p->c; c++) {
        q.mean[c] = p->mean[c];
        q.inv_std[c] = 1.0f / p->std[c];    /* as the CPU twin rounds it */
    }
    return kn_cu_check(ctx, "kn_normalize: launch",
                       kn_cu_normalize(cu_stream(s), &q, src, dst));
}

const struct kn_ops kn_cuda_ops = {
    .name = "cuda",
    .open = cu_open,
    .close = cu_close,
    .sync = cu_sync,
    .alloc = cu_alloc,
    .free = cu_free,
    .copy = cu_copy,
    .dev_mem = cu_dev_mem,
    .stream_init = cu_stream_init,
    .stream_fini = cu_stream_fini,
    .stream_sync = cu_stream_sync,
    .stream_wait = cu_stream_wait,
    .event_init = cu_event_init,
    .event_fini = cu_event_fini,
    .event_record = cu_event_record,
    .event_sync = cu_event_sync,
    .event_query = cu_event_query,
    .event_elapsed = cu_event_elapsed,
    .normalize = cu_normalize,
    .model_init = kn_cu_model_init,
    .model_fini = kn_cu_model_fini,
    .param_read = kn_cu_param_read,
    .param_write = kn_cu_param_write,
    .forward = kn_cu_forward,
    .step = kn_cu_step,
    .apply = kn_cu_apply,
    .metrics = kn_cu_metrics,
    .grad_buf = kn_cu_grad_buf,
};
