/*
 * kernels.c - the front of the kernels module: picks a backend at run time,
 * checks every argument of the public calls, keeps the books (buffers,
 * memory peaks, error messages) and dispatches through the backend's ops
 * table.  The model's calls are in model.c, streams and events in stream.c.
 *
 * Backend choice (kn_open): the candidates for each request come from a
 * table, tried in order; the first that opens wins.  AUTO tries CUDA, then
 * the CPU.  A CUDA backend that is not built or has no usable device leaves
 * its reason in the CPU context's note, so the fallback is never silent.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "bf16.h"

/* A live kn_buf_alloc buffer, for the memory figures and kn_close. */
struct kn_alloc {
    void *p;
    size_t bytes;
    struct kn_alloc *next;
};

static const struct kn_ops *const kn_backends[] = {
    [KN_BACKEND_CPU] = &kn_cpu_ops,
#if RINGFEED_HAVE_CUDA
    [KN_BACKEND_CUDA] = &kn_cuda_ops,
#else
    [KN_BACKEND_CUDA] = NULL,
#endif
};

/* What each request tries, in order (KN_BACKEND_AUTO ends a list). */
static const enum kn_backend kn_try[][3] = {
    [KN_BACKEND_AUTO] = { KN_BACKEND_CUDA, KN_BACKEND_CPU, KN_BACKEND_AUTO },
    [KN_BACKEND_CPU] = { KN_BACKEND_CPU, KN_BACKEND_AUTO },
    [KN_BACKEND_CUDA] = { KN_BACKEND_CUDA, KN_BACKEND_AUTO },
};

int kn_set_err(struct kn_ctx *ctx, int code, const char *fmt, ...)
{
    va_list ap;

    if (ctx) {
        va_start(ap, fmt);
        vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* snprintf whose truncation of long messages is intended. */
__attribute__((format(printf, 3, 4)))
static void kn_fmt(char *dst, size_t len, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
}

uint16_t kn_bf16_from_f32(float f)
{
    return kn_bf16_rne(f);
}

float kn_f32_from_bf16(uint16_t b)
{
    return kn_bf16_to_f32(b);
}

/* Opens candidate `k` into ctx; on failure leaves the reason in why. */
static int kn_try_open(struct kn_ctx *ctx, enum kn_backend k,
                       const struct kn_open_opts *o, char *why, size_t len)
{
    const struct kn_ops *ops = kn_backends[k];

    if (!ops) {
        snprintf(why, len, "built without CUDA");
        return -ENOTSUP;
    }
    ctx->ops = ops;
    ctx->kind = k;
    ctx->note[0] = '\0';
    return ops->open(ctx, o, why, len);
}

int kn_open(struct kn_ctx **out, enum kn_backend want,
            const struct kn_open_opts *opts, char *err, size_t errlen)
{
    struct kn_open_opts o = { .device = 0, .cpu_threads = 0 };
    char why[KN_MSG_MAX] = "", first[KN_MSG_MAX] = "";
    struct kn_ctx *ctx;
    struct kn_stream *s;
    int rc = -EINVAL;

    if (err && errlen)
        err[0] = '\0';
    if (!out)
        goto fail;
    *out = NULL;
    if ((unsigned)want > KN_BACKEND_CUDA) {
        snprintf(why, sizeof why, "kn_open: unknown backend %d", (int)want);
        goto fail;
    }
    if (opts)
        o = *opts;
    if (o.device < 0 || o.cpu_threads < 0) {
        snprintf(why, sizeof why, "kn_open: device %d / cpu_threads %d: "
                 "must not be negative", o.device, o.cpu_threads);
        goto fail;
    }

    rc = -ENOMEM;
    ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        snprintf(why, sizeof why, "kn_open: out of memory");
        goto fail;
    }
    for (const enum kn_backend *k = kn_try[want]; *k != KN_BACKEND_AUTO;
         k++) {
        rc = kn_try_open(ctx, *k, &o, why, sizeof why);
        if (rc == 0)
            break;
        if (!first[0])
            memcpy(first, why, sizeof first);
    }
    if (rc < 0)
        goto fail_ctx;
    if (first[0]) {         /* a fallback: say why the first choice failed */
        char note[KN_MSG_MAX];

        kn_fmt(note, sizeof note, "%s; %s: %s", first, ctx->ops->name,
               ctx->note);
        memcpy(ctx->note, note, sizeof note);
    }

    rc = -ENOMEM;
    s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(why, sizeof why, "kn_open: out of memory");
        goto fail_backend;
    }
    s->ctx = ctx;
    rc = ctx->ops->stream_init(ctx, s, NULL);
    if (rc < 0) {
        kn_fmt(why, sizeof why, "kn_open: default stream: %s", ctx->err);
        goto fail_stream;
    }
    ctx->stream = s;
    *out = ctx;
    return 0;

fail_stream:
    free(s);
fail_backend:
    ctx->ops->close(ctx);
fail_ctx:
    free(ctx);
fail:
    if (err && errlen)
        snprintf(err, errlen, "%s", why[0] ? why : "kn_open: bad arguments");
    return rc;
}

void kn_close(struct kn_ctx *ctx)
{
    struct kn_alloc *a, *next;

    if (!ctx)
        return;
    for (a = ctx->allocs; a; a = next) {
        next = a->next;
        ctx->ops->free(ctx, a->p);
        free(a);
    }
    ctx->ops->stream_fini(ctx->stream);
    free(ctx->stream);
    ctx->ops->close(ctx);
    free(ctx);
}

int kn_device_count(void)
{
#if RINGFEED_HAVE_CUDA
    return kn_cu_device_count();
#else
    return 0;
#endif
}

const char *kn_backend_name(const struct kn_ctx *ctx)
{
    return ctx ? ctx->ops->name : "none";
}

enum kn_backend kn_backend_kind(const struct kn_ctx *ctx)
{
    return ctx ? ctx->kind : KN_BACKEND_AUTO;
}

const char *kn_backend_note(const struct kn_ctx *ctx)
{
    return ctx ? ctx->note : "";
}

const char *kn_errmsg(const struct kn_ctx *ctx)
{
    return ctx ? ctx->err : "no context";
}

int kn_sync(struct kn_ctx *ctx)
{
    if (!ctx)
        return -EINVAL;
    return ctx->ops->sync(ctx);
}

/* ---- memory ------------------------------------------------------------ */

static void kn_note_dev_peak(struct kn_ctx *ctx, size_t *used, size_t *total)
{
    size_t u = 0, t = 0;

    if (ctx->ops->dev_mem && ctx->ops->dev_mem(ctx, &u, &t) == 0 &&
        u > ctx->dev_used_peak)
        ctx->dev_used_peak = u;
    if (used)
        *used = u;
    if (total)
        *total = t;
}

void kn_account(struct kn_ctx *ctx, size_t bytes, int add)
{
    if (add) {
        ctx->bytes += bytes;
        if (ctx->bytes > ctx->peak)
            ctx->peak = ctx->bytes;
        kn_note_dev_peak(ctx, NULL, NULL);
    } else {
        ctx->bytes -= bytes;
    }
}

int kn_buf_alloc(struct kn_ctx *ctx, size_t bytes, void **out)
{
    struct kn_alloc *a;
    int rc;

    if (!ctx || !out)
        return -EINVAL;
    *out = NULL;
    if (bytes == 0)
        return kn_set_err(ctx, -EINVAL, "kn_buf_alloc: 0 bytes");
    a = malloc(sizeof *a);
    if (!a)
        return kn_set_err(ctx, -ENOMEM, "kn_buf_alloc: out of memory");
    rc = ctx->ops->alloc(ctx, bytes, &a->p);
    if (rc < 0) {
        free(a);
        return rc;
    }
    a->bytes = bytes;
    a->next = ctx->allocs;
    ctx->allocs = a;
    kn_account(ctx, bytes, 1);
    *out = a->p;
    return 0;
}

void kn_buf_free(struct kn_ctx *ctx, void *buf)
{
    struct kn_alloc **pp, *a;

    if (!ctx || !buf)
        return;
    for (pp = &ctx->allocs; (a = *pp); pp = &a->next) {
        if (a->p == buf) {
            *pp = a->next;
            kn_account(ctx, a->bytes, 0);
            ctx->ops->free(ctx, a->p);
            free(a);
            return;
        }
    }
}

struct kn_stream *kn_stream_of(struct kn_ctx *ctx, struct kn_stream *s)
{
    if (!s)
        return ctx->stream;
    return s->ctx == ctx ? s : NULL;
}

int kn_copy(struct kn_ctx *ctx, struct kn_stream *s, void *dst,
            const void *src, size_t bytes, enum kn_copy_dir dir)
{
    if (!ctx)
        return -EINVAL;
    s = kn_stream_of(ctx, s);
    if (!s)
        return kn_set_err(ctx, -EINVAL, "kn_copy: stream of another context");
    if ((unsigned)dir > KN_D2D)
        return kn_set_err(ctx, -EINVAL, "kn_copy: unknown direction %d",
                          (int)dir);
    if (bytes == 0)
        return 0;
    if (!dst || !src)
        return kn_set_err(ctx, -EINVAL, "kn_copy: NULL %s",
                          dst ? "source" : "destination");
    return ctx->ops->copy(ctx, s, dst, src, bytes, dir);
}

int kn_mem_stats(struct kn_ctx *ctx, struct kn_mem *out)
{
    if (!ctx || !out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    kn_note_dev_peak(ctx, &out->dev_used, &out->dev_total);
    out->bytes = ctx->bytes;
    out->peak = ctx->peak;
    out->dev_used_peak = ctx->dev_used_peak;
    return 0;
}

/* ---- normalize --------------------------------------------------------- */

int kn_normalize(struct kn_ctx *ctx, struct kn_stream *s,
                 const struct kn_norm *p, const uint8_t *src, void *dst)
{
    uint64_t count;

    if (!ctx)
        return -EINVAL;
    s = kn_stream_of(ctx, s);
    if (!s)
        return kn_set_err(ctx, -EINVAL,
                          "kn_normalize: stream of another context");
    if (!p || !src || !dst)
        return kn_set_err(ctx, -EINVAL, "kn_normalize: NULL %s",
                          !p ? "descriptor" : !src ? "source" : "output");
    if (p->c < 1 || p->c > KN_MAX_CHANNELS)
        return kn_set_err(ctx, -EINVAL, "kn_normalize: %u channels "
                          "(1..%d)", p->c, KN_MAX_CHANNELS);
    if ((unsigned)p->layout > KN_CHW || (unsigned)p->out > KN_BF16)
        return kn_set_err(ctx, -EINVAL, "kn_normalize: unknown layout %d "
                          "or dtype %d", (int)p->layout, (int)p->out);
    for (uint32_t c = 0; c < p->c; c++)
        if (!isfinite(p->mean[c]) || !isfinite(p->std[c]) ||
            !(p->std[c] > 0.0f))
            return kn_set_err(ctx, -EINVAL, "kn_normalize: channel %u: "
                              "mean %g std %g (std must be finite, > 0)",
                              c, p->mean[c], p->std[c]);
    count = (uint64_t)p->n * p->c * p->h * p->w;
    if (count == 0)
        return 0;
    if (count > ((uint64_t)1 << 40))
        return kn_set_err(ctx, -EINVAL, "kn_normalize: %llu elements is "
                          "too many", (unsigned long long)count);
    return ctx->ops->normalize(ctx, s, p, src, dst);
}
