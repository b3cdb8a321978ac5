/*
 * cpu_backend.c - the CPU twin's ops table: host memory as "backend
 * memory", streams that run work at the call, events that read the
 * monotonic clock, and the OpenBLAS set-up.
 *
 * OpenBLAS kernels: Debian's OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its
 * kernels by CPU model at load time and falls back to "Prescott" (SSE3) for
 * models it does not know, such as the Sapphire/Emerald Rapids Xeons this
 * was written on, which runs sgemm 4-5x slower than its AVX-512 kernels
 * (about 36 against 136-186 GFLOP/s at the MLP's sizes on 2 cores).  So
 * the first CPU context re-selects the kernels for what the CPU can do
 * (SkylakeX with AVX-512, Haswell with AVX2 and FMA) through OpenBLAS's
 * exported gotoblas_dynamic_quit/_init, exactly as OPENBLAS_CORETYPE would
 * at load time, and says so in the note.  It does nothing when the user set
 * OPENBLAS_CORETYPE, when OpenBLAS chose something else than Prescott, or
 * when the library has no dynamic-arch entry points (they are weak here).
 * It must happen before other threads call BLAS: kn_open is the place.
 *
 * Threads: the GEMMs are OpenBLAS's, threaded by OpenBLAS; the element-wise
 * loops (bias, ReLU, softmax, SGD) are single-threaded and memory-bound.
 * kn_open_opts.cpu_threads == 0 leaves OpenBLAS's own choice, which is
 * OPENBLAS_NUM_THREADS or else every core: on 2 cores, 2 threads run the
 * 784-512-256-10 MLP's GEMMs at batch 128 1.3-1.45x faster than 1 (the
 * trainer's data wait happens in the daemon's processes, so nothing else
 * in the trainer wants the cores).
 */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu.h"

void *kn_cpu_alloc_aligned(size_t bytes)
{
    size_t rounded = (bytes + KN_CPU_ALIGN - 1) / KN_CPU_ALIGN * KN_CPU_ALIGN;

    if (rounded < bytes)
        return NULL;
    return aligned_alloc(KN_CPU_ALIGN, rounded ? rounded : KN_CPU_ALIGN);
}

/* OpenBLAS's dynamic-arch entry points; NULL where the build lacks them. */
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

/* Raises OpenBLAS's kernels from the Prescott fallback; returns the core
 * chosen, or NULL when nothing was changed.  Acts once per process and
 * gives the same answer after. */
static const char *cpu_blas_raise(void)
{
    static int done;
    static const char *raised;
    const char *want = NULL;

    if (done)
        return raised;
    done = 1;
    if (getenv("OPENBLAS_CORETYPE") ||
        strcmp(openblas_get_corename(), "Prescott") != 0 ||
        !gotoblas_dynamic_init || !gotoblas_dynamic_quit)
        return NULL;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        want = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        want = "Haswell";
    if (!want || setenv("OPENBLAS_CORETYPE", want, 1) == -1)
        return NULL;
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
    raised = want;
    return raised;
}

static int cpu_open(struct kn_ctx *ctx, const struct kn_open_opts *o,
                    char *why, size_t whylen)
{
    const char *raised = cpu_blas_raise();
    int threads;

    (void)why;
    (void)whylen;
    if (o->cpu_threads > 0)
        openblas_set_num_threads(o->cpu_threads);
    threads = openblas_get_num_threads();
    snprintf(ctx->note, sizeof ctx->note, "OpenBLAS core %s%s, %d thread%s "
             "(%.200s)", openblas_get_corename(),
             raised ? " (raised from the Prescott fallback)" : "", threads,
             threads == 1 ? "" : "s", openblas_get_config());
    return 0;
}

static void cpu_close(struct kn_ctx *ctx)
{
    (void)ctx;
}

static int cpu_sync(struct kn_ctx *ctx)
{
    (void)ctx;
    return 0;
}

static int cpu_alloc(struct kn_ctx *ctx, size_t bytes, void **out)
{
    *out = kn_cpu_alloc_aligned(bytes);
    if (!*out)
        return kn_set_err(ctx, -ENOMEM, "kn_buf_alloc: %zu bytes: out of "
                          "memory", bytes);
    return 0;
}

static void cpu_free(struct kn_ctx *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static int cpu_copy(struct kn_ctx *ctx, struct kn_stream *s, void *dst,
                    const void *src, size_t bytes, enum kn_copy_dir dir)
{
    (void)ctx;
    (void)s;
    (void)dir;
    memmove(dst, src, bytes);
    return 0;
}

static int cpu_stream_init(struct kn_ctx *ctx, struct kn_stream *s,
                           void *external)
{
    if (external)
        return kn_set_err(ctx, -ENOTSUP, "kn_stream_wrap: the cpu backend "
                          "has no CUDA streams");
    s->handle = NULL;
    s->owned = 0;
    return 0;
}

static void cpu_stream_fini(struct kn_stream *s)
{
    (void)s;
}

static int cpu_stream_sync(struct kn_stream *s)
{
    (void)s;
    return 0;
}

static int cpu_stream_wait(struct kn_stream *s, struct kn_event *ev)
{
    (void)s;
    (void)ev;
    return 0;
}

static int cpu_event_init(struct kn_ctx *ctx, struct kn_event *ev)
{
    (void)ctx;
    ev->handle = NULL;
    ev->t_ns = 0;
    return 0;
}

static void cpu_event_fini(struct kn_event *ev)
{
    (void)ev;
}

static int cpu_event_record(struct kn_event *ev, struct kn_stream *s)
{
    struct timespec ts;

    (void)s;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1)
        return kn_set_err(ev->ctx, -errno, "kn_event_record: "
                          "clock_gettime: %s", strerror(errno));
    ev->t_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return 0;
}

static int cpu_event_sync(struct kn_event *ev)
{
    (void)ev;
    return 0;
}

static int cpu_event_query(struct kn_event *ev)
{
    (void)ev;
    return 1;                   /* the work ran at the call */
}

static int cpu_event_elapsed(struct kn_event *a, struct kn_event *b,
                             float *ms)
{
    *ms = (float)((double)(b->t_ns - a->t_ns) / 1e6);
    return 0;
}

const struct kn_ops kn_cpu_ops = {
    .name = "cpu",
    .open = cpu_open,
    .close = cpu_close,
    .sync = cpu_sync,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .dev_mem = NULL,
    .stream_init = cpu_stream_init,
    .stream_fini = cpu_stream_fini,
    .stream_sync = cpu_stream_sync,
    .stream_wait = cpu_stream_wait,
    .event_init = cpu_event_init,
    .event_fini = cpu_event_fini,
    .event_record = cpu_event_record,
    .event_sync = cpu_event_sync,
    .event_query = cpu_event_query,
    .event_elapsed = cpu_event_elapsed,
    .normalize = kn_cpu_normalize,
    .model_init = kn_cpu_model_init,
    .model_fini = kn_cpu_model_fini,
    .param_read = kn_cpu_param_read,
    .param_write = kn_cpu_param_write,
    .forward = kn_cpu_forward,
    .step = kn_cpu_step,
    .apply = kn_cpu_apply,
    .metrics = kn_cpu_metrics,
    .grad_buf = kn_cpu_grad_buf,
};
