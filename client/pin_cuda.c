/*
 * pin_cuda.c - pin.h over the CUDA driver, loaded at run time: device probe,
 * page-locking of ring mappings (cuMemHostRegister), the copy-then-record-
 * an-event that lets the hand-off release a slot once its DMA is done, and
 * the converting copy: the batch staged on the device, then
 * kernels/cuda/normalize.cu's kn_u8_affine_kernel writes the floats, on the
 * same stream.
 *
 * Nothing of CUDA is linked: libcuda.so.1 (the driver's library, present
 * wherever an NVIDIA driver is, whatever CUDA toolkit the trainer brought)
 * is opened with dlopen on first use, as a trainer loads NCCL, and the
 * kernel comes as a fat binary built into libringfeed (cubin for the
 * build's architecture and PTX the driver compiles for newer ones), loaded
 * with cuModuleLoadData into the context in use.  So libringfeed and
 * `import ringfeed` load on a CPU node and under any CUDA major; there the
 * probe says why there is no device and the hand-off stays on the CPU.
 *
 * The driver works on the calling thread's current context: the one the
 * trainer's CUDA runtime made current (PyTorch's device), or, when none
 * is, the primary context of device 0, retained and made current as the
 * runtime itself would.  Streams and events are the runtime's handles too
 * (a cudaStream_t is a CUstream), so the trainer's streams are used as
 * they are.  The driver keeps no "last error" the runtime reports, so no
 * failure here is seen by the trainer's next cudaGetLastError().
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "cuda_kernels.h" /* struct kn_cu_affine: the kernel's parameters */
#include "pin.h"
#include "ringfeed.h"

/* kernels/cuda/normalize.cu as a fat binary (client/meson.build) */
extern const unsigned char rf_cuda_fatbin[];
extern const size_t rf_cuda_fatbin_size;

#define KERNEL_NAME "kn_u8_affine_kernel"
#define MODULES_MAX 16 /* contexts whose module is kept (one per device, usually) */

static struct {
    pthread_once_t once;
    int ok;             /* 1 loaded and initialized; 0 not (why says) */
    char why[200];
    void *lib;
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*GetErrorString)(CUresult, const char **);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*CtxGetCurrent)(CUcontext *);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*MemHostRegister)(void *, size_t, unsigned);
    CUresult (*MemHostUnregister)(void *);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventQuery)(CUevent);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
    pthread_mutex_t lock; /* modules[] */
    struct {
        CUcontext ctx;
        CUfunction fn;
    } modules[MODULES_MAX];
    unsigned nmodules;
} cu = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

/* The driver's words for e: "name: text". */
static void describe(CUresult e, char *buf, size_t cap)
{
    const char *name = NULL, *text = NULL;

    if (cu.GetErrorName)
        cu.GetErrorName(e, &name);
    if (cu.GetErrorString)
        cu.GetErrorString(e, &text);
    snprintf(buf, cap, "%s (%s)", text ? text : "unknown error", name ? name : "?");
}

static int fail(const char *what, CUresult e, char *why, size_t len)
{
    char d[160];

    describe(e, d, sizeof(d));
    snprintf(why, len, "%s: %s", what, d);
    return -EIO;
}

static void load(void)
{
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
#define S(field, name) {name, offsetof(__typeof__(cu), field)}
        S(Init, "cuInit"),
        S(DeviceGetCount, "cuDeviceGetCount"),
        S(DeviceGet, "cuDeviceGet"),
        S(GetErrorString, "cuGetErrorString"),
        S(GetErrorName, "cuGetErrorName"),
        S(CtxGetCurrent, "cuCtxGetCurrent"),
        S(CtxSetCurrent, "cuCtxSetCurrent"),
        S(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
        S(MemHostRegister, "cuMemHostRegister_v2"),
        S(MemHostUnregister, "cuMemHostUnregister"),
        S(EventCreate, "cuEventCreate"),
        S(EventDestroy, "cuEventDestroy_v2"),
        S(EventRecord, "cuEventRecord"),
        S(EventQuery, "cuEventQuery"),
        S(EventSynchronize, "cuEventSynchronize"),
        S(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
        S(StreamSynchronize, "cuStreamSynchronize"),
        S(StreamWaitEvent, "cuStreamWaitEvent"),
        S(MemAlloc, "cuMemAlloc_v2"),
        S(MemFree, "cuMemFree_v2"),
        S(ModuleLoadData, "cuModuleLoadData"),
        S(ModuleGetFunction, "cuModuleGetFunction"),
        S(LaunchKernel, "cuLaunchKernel"),
#undef S
    };
    CUresult e;

    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) {
        snprintf(cu.why, sizeof(cu.why), "no CUDA device: no CUDA driver here (%s)", dlerror());
        return;
    }
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        void *p = dlsym(cu.lib, syms[i].name);

        if (!p) {
            snprintf(cu.why, sizeof(cu.why), "no CUDA device: libcuda.so.1 has no %s (a "
                     "driver older than CUDA 11)", syms[i].name);
            return;
        }
        memcpy((char *)&cu + syms[i].off, &p, sizeof(p));
    }
    e = cu.Init(0);
    if (e != CUDA_SUCCESS) {
        char d[160];

        describe(e, d, sizeof(d));
        snprintf(cu.why, sizeof(cu.why), "no CUDA device: cuInit: %s", d);
        return;
    }
    cu.ok = 1;
}

/* The driver loaded, and a context current on this thread (the trainer's,
 * else device 0's primary one).  0 or -ENODEV. */
static int ready(char *why, size_t len)
{
    CUcontext ctx = NULL;
    CUdevice dev;
    CUresult e;

    pthread_once(&cu.once, load);
    if (!cu.ok) {
        snprintf(why, len, "%s", cu.why);
        return -ENODEV;
    }
    if (cu.CtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx)
        return 0;
    e = cu.DeviceGet(&dev, 0);
    if (e == CUDA_SUCCESS)
        e = cu.DevicePrimaryCtxRetain(&ctx, dev);
    if (e == CUDA_SUCCESS)
        e = cu.CtxSetCurrent(ctx);
    if (e != CUDA_SUCCESS) {
        fail("no CUDA context (device 0's primary one)", e, why, len);
        return -ENODEV;
    }
    return 0;
}

int client_pin_probe(char *why, size_t len)
{
    int n = 0, rc = ready(why, len);
    CUresult e;

    if (rc < 0)
        return rc;
    e = cu.DeviceGetCount(&n);
    if (e != CUDA_SUCCESS) {
        fail("no CUDA device: cuDeviceGetCount", e, why, len);
        return -ENODEV;
    }
    if (n == 0) {
        snprintf(why, len, "no CUDA device: cuDeviceGetCount found 0");
        return -ENODEV;
    }
    return 0;
}

int client_pin_register(void *base, size_t size, char *why, size_t len)
{
    int rc = ready(why, len);
    CUresult e;

    if (rc < 0)
        return -EIO;
    e = cu.MemHostRegister(base, size, CU_MEMHOSTREGISTER_PORTABLE);
    if (e == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
        snprintf(why, len, "the ring was registered already (by the caller)");
        return -EEXIST;
    }
    if (e != CUDA_SUCCESS)
        return fail("cuMemHostRegister", e, why, len);
    return 0;
}

void client_pin_unregister(void *base)
{
    char why[8];

    if (ready(why, sizeof(why)) == 0)
        (void)cu.MemHostUnregister(base);
}

int client_pin_event_new(void **ev, char *why, size_t len)
{
    CUevent e = NULL;
    CUresult rc;

    *ev = NULL;
    if (ready(why, len) < 0)
        return -EIO;
    rc = cu.EventCreate(&e, CU_EVENT_DISABLE_TIMING);
    if (rc != CUDA_SUCCESS)
        return fail("cuEventCreate", rc, why, len);
    *ev = e;
    return 0;
}

void client_pin_event_free(void *ev)
{
    char why[8];

    if (ev && ready(why, sizeof(why)) == 0)
        (void)cu.EventDestroy((CUevent)ev);
}

int client_pin_copy(void *dst, const void *src, size_t bytes, void *stream,
                    void *ev, char *why, size_t len)
{
    CUresult e;

    if (ready(why, len) < 0)
        return -EIO;
    e = cu.MemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, bytes, (CUstream)stream);
    if (e != CUDA_SUCCESS)
        return fail("cuMemcpyHtoDAsync", e, why, len);
    e = cu.EventRecord((CUevent)ev, (CUstream)stream);
    if (e != CUDA_SUCCESS) {
        /* the copy is enqueued: wait for it so the slot is not released
         * under a DMA still reading it */
        (void)cu.StreamSynchronize((CUstream)stream);
        return fail("cuEventRecord", e, why, len);
    }
    return 0;
}

int client_pin_query(void *ev, char *why, size_t len)
{
    CUresult e;

    if (ready(why, len) < 0)
        return -EIO;
    e = cu.EventQuery((CUevent)ev);
    if (e == CUDA_SUCCESS)
        return 1;
    if (e == CUDA_ERROR_NOT_READY)
        return 0;
    return fail("cuEventQuery", e, why, len);
}

int client_pin_wait(void *ev, char *why, size_t len)
{
    CUresult e;

    if (ready(why, len) < 0)
        return -EIO;
    e = cu.EventSynchronize((CUevent)ev);
    if (e != CUDA_SUCCESS)
        return fail("cuEventSynchronize", e, why, len);
    return 0;
}

/* The converting kernel in the current context: its module loaded from the
 * fat binary the first time the context asks.  0 or -EIO. */
static int kernel(CUfunction *fn, char *why, size_t len)
{
    CUcontext ctx = NULL;
    CUmodule mod;
    CUresult e;
    int rc = 0;

    (void)cu.CtxGetCurrent(&ctx);
    pthread_mutex_lock(&cu.lock);
    for (unsigned i = 0; i < cu.nmodules; i++)
        if (cu.modules[i].ctx == ctx) {
            *fn = cu.modules[i].fn;
            goto out;
        }
    if (cu.nmodules == MODULES_MAX) {
        snprintf(why, len, "the converting copy's kernel is loaded in %u contexts already",
                 MODULES_MAX);
        rc = -EIO;
        goto out;
    }
    e = cu.ModuleLoadData(&mod, rf_cuda_fatbin);
    if (e == CUDA_SUCCESS)
        e = cu.ModuleGetFunction(fn, mod, KERNEL_NAME);
    if (e != CUDA_SUCCESS) {
        rc = fail("loading the converting copy's kernel (" KERNEL_NAME ")", e, why, len);
        goto out;
    }
    cu.modules[cu.nmodules].ctx = ctx;
    cu.modules[cu.nmodules].fn = *fn;
    cu.nmodules++;
out:
    pthread_mutex_unlock(&cu.lock);
    return rc;
}

struct stage {
    CUdeviceptr dev;    /* device memory: bytes */
    size_t bytes;
    CUevent used;       /* recorded after each conversion reading dev */
    int recorded;       /* used was recorded at least once */
};

int client_pin_stage_new(size_t bytes, void **out, char *why, size_t len)
{
    struct stage *st;
    CUresult e;

    *out = NULL;
    if (ready(why, len) < 0)
        return -EIO;
    st = calloc(1, sizeof(*st));
    if (!st) {
        snprintf(why, len, "out of memory");
        return -ENOMEM;
    }
    st->bytes = bytes;
    e = cu.MemAlloc(&st->dev, bytes ? bytes : 1);
    if (e != CUDA_SUCCESS) {
        free(st);
        return fail("cuMemAlloc (the converting copy's staging buffer)", e, why, len);
    }
    e = cu.EventCreate(&st->used, CU_EVENT_DISABLE_TIMING);
    if (e != CUDA_SUCCESS) {
        (void)cu.MemFree(st->dev);
        free(st);
        return fail("cuEventCreate", e, why, len);
    }
    *out = st;
    return 0;
}

void client_pin_stage_free(void *p)
{
    struct stage *st = p;
    char why[8];

    if (!st)
        return;
    /* every conversion reading it is done: the hand-off waited for them */
    if (ready(why, sizeof(why)) == 0) {
        (void)cu.EventDestroy(st->used);
        (void)cu.MemFree(st->dev);
    }
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
    CUstream s = (CUstream)stream;
    struct kn_cu_affine k = {
        .count = bytes,
        .c = cv->c,
        .plane = cv->plane,
        .out = cv->out == RF_DTYPE_F16    ? KN_CU_OUT_F16
               : cv->out == RF_DTYPE_BF16 ? KN_CU_OUT_BF16
                                          : KN_CU_OUT_F32,
    };
    size_t blocks = (bytes + 255) / 256;
    CUdeviceptr src_dev;
    CUfunction fn;
    void *args[3];
    CUresult e;

    for (uint32_t i = 0; i < cv->c && i < 4; i++) {
        k.a[i] = cv->a[i];
        k.b[i] = cv->b[i];
    }
    if (bytes > st->bytes) {
        snprintf(why, len, "the batch's %zu bytes exceed the %zu-byte staging buffer", bytes,
                 st->bytes);
        return -EIO;
    }
    if (k.c < 1 || k.c > 4 || k.plane < 1) {
        snprintf(why, len, "the converting copy's %u channels or %u-value planes are out of "
                 "range", k.c, k.plane);
        return -EIO;
    }
    if (ready(why, len) < 0 || kernel(&fn, why, len) < 0)
        return -EIO;
    if (st->recorded) {
        e = cu.StreamWaitEvent(s, st->used, 0);
        if (e != CUDA_SUCCESS)
            return fail("cuStreamWaitEvent", e, why, len);
    }
    e = cu.MemcpyHtoDAsync(st->dev, src, bytes, s);
    if (e != CUDA_SUCCESS)
        return fail("cuMemcpyHtoDAsync", e, why, len);
    if (blocks > (1u << 20))
        blocks = 1u << 20;
    /* kn_u8_affine_kernel(const uint8_t *src, void *dst, struct kn_cu_affine p) */
    src_dev = st->dev;
    args[0] = &src_dev;
    args[1] = &dst;
    args[2] = &k;
    e = bytes ? cu.LaunchKernel(fn, (unsigned)blocks, 1, 1, 256, 1, 1, 0, s, args, NULL)
              : CUDA_SUCCESS;
    if (e == CUDA_SUCCESS)
        e = cu.EventRecord(st->used, s);
    if (e == CUDA_SUCCESS)
        st->recorded = 1;
    if (e == CUDA_SUCCESS)
        e = cu.EventRecord((CUevent)ev, s);
    if (e != CUDA_SUCCESS) {
        /* the copy is enqueued: wait for it so the slot is not released
         * under a DMA still reading it */
        (void)cu.StreamSynchronize(s);
        return fail("the conversion (" KERNEL_NAME ") or its event", e, why, len);
    }
    return 0;
}
