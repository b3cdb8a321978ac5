/*
 * backend.h - the internal interface between kernels.c (argument checks,
 * backend choice, bookkeeping) and a backend (cpu/ or cuda/).
 *
 * A backend is one const struct kn_ops: a table of function pointers that
 * kernels.c calls after it has validated every argument, so a backend
 * function may assume sizes are in range, pointers are not NULL where the
 * public header requires them, and the model's geometry is consistent.
 * Backend functions return 0 or a negative errno and, on failure, describe
 * it with kn_set_err().
 *
 * Objects shared by both sides:
 *  - struct kn_ctx    owned by kernels.c; `impl` belongs to the backend.
 *  - struct kn_stream `handle` is the backend's (cudaStream_t or NULL).
 *  - struct kn_event  `handle` is the backend's (cudaEvent_t or NULL);
 *                     the CPU backend keeps the time in `t_ns`.
 *  - struct kn_model  geometry and accumulator count kept by kernels.c;
 *                     `impl` holds the backend's buffers.
 */
#ifndef RINGFEED_KERNELS_BACKEND_H
#define RINGFEED_KERNELS_BACKEND_H

#include <stdint.h>

#include "config.h"
#include "kernels.h"

#define KN_MSG_MAX 512

struct kn_alloc;

struct kn_ctx {
    const struct kn_ops *ops;
    enum kn_backend kind;
    void *impl;
    struct kn_stream *stream;       /* the default stream */
    struct kn_alloc *allocs;        /* live kn_buf_alloc buffers */
    size_t bytes, peak;             /* backend memory held, and its peak */
    size_t dev_used_peak;
    char note[KN_MSG_MAX];
    char err[KN_MSG_MAX];
};

struct kn_stream {
    struct kn_ctx *ctx;
    void *handle;
    int owned;                      /* handle is ours to destroy */
};

struct kn_event {
    struct kn_ctx *ctx;
    void *handle;
    int64_t t_ns;                   /* CPU: monotonic time at record */
    int recorded;
};

struct kn_model {
    struct kn_ctx *ctx;
    void *impl;
    uint32_t n_layers;              /* Linear layers */
    uint32_t dims[KN_MAX_LAYERS + 1];
    uint32_t max_dim;               /* widest layer */
    uint32_t max_batch;
    enum kn_dtype precision;
    uint64_t seed;
    size_t w_off[KN_MAX_LAYERS];    /* offsets in the flat parameter array */
    size_t b_off[KN_MAX_LAYERS];
    size_t n_params;
    uint64_t n_acc;                 /* samples in the gradient accumulator */
    size_t bytes;                   /* backend memory the model holds */
};

/* Layer l's fan-in and fan-out. */
static inline uint32_t kn_in(const struct kn_model *m, uint32_t l)
{
    return m->dims[l];
}

static inline uint32_t kn_out(const struct kn_model *m, uint32_t l)
{
    return m->dims[l + 1];
}

/*
 * The parameters of every layer live in one flat fp32 array per kind
 * (weights, gradients, momentum): W_0, b_0, W_1, b_1, ... at w_off[l] and
 * b_off[l].  Backends keep that layout so that the SGD update and the
 * parameter I/O are simple loops.
 */
struct kn_ops {
    const char *name;

    /* Fills ctx->impl and ctx->note; on failure -ENODEV (or other) and a
     * reason in why.  close frees impl. */
    int (*open)(struct kn_ctx *ctx, const struct kn_open_opts *o,
                char *why, size_t whylen);
    void (*close)(struct kn_ctx *ctx);
    int (*sync)(struct kn_ctx *ctx);

    int (*alloc)(struct kn_ctx *ctx, size_t bytes, void **out);
    void (*free)(struct kn_ctx *ctx, void *p);
    int (*copy)(struct kn_ctx *ctx, struct kn_stream *s, void *dst,
                const void *src, size_t bytes, enum kn_copy_dir dir);
    /* CUDA only (NULL elsewhere): device memory used and total. */
    int (*dev_mem)(struct kn_ctx *ctx, size_t *used, size_t *total);

    /* external == NULL: create one.  Otherwise wrap it (-ENOTSUP if the
     * backend has no such thing). */
    int (*stream_init)(struct kn_ctx *ctx, struct kn_stream *s,
                       void *external);
    void (*stream_fini)(struct kn_stream *s);
    int (*stream_sync)(struct kn_stream *s);
    int (*stream_wait)(struct kn_stream *s, struct kn_event *ev);

    int (*event_init)(struct kn_ctx *ctx, struct kn_event *ev);
    void (*event_fini)(struct kn_event *ev);
    int (*event_record)(struct kn_event *ev, struct kn_stream *s);
    int (*event_sync)(struct kn_event *ev);
    /* 1 done, 0 not yet, or a negative errno; never waits. */
    int (*event_query)(struct kn_event *ev);
    int (*event_elapsed)(struct kn_event *a, struct kn_event *b, float *ms);

    int (*normalize)(struct kn_ctx *ctx, struct kn_stream *s,
                     const struct kn_norm *p, const uint8_t *src, void *dst);

    /* Allocates m->impl (all buffers, zeroed); weights are written after
     * with param_write.  m->bytes is set to what it holds. */
    int (*model_init)(struct kn_model *m);
    void (*model_fini)(struct kn_model *m);
    /* Copies count floats at offset off of the flat array `which` to host
     * memory (for KN_GRADS the raw sum), or host weights into the flat
     * weight array, refreshing the bf16 copy of that range.  Both wait for
     * all work on the context. */
    int (*param_read)(struct kn_model *m, enum kn_tensor which, size_t off,
                      size_t count, float *host);
    int (*param_write)(struct kn_model *m, size_t off, size_t count,
                       const float *host);

    /* Forward of n rows; logits into the model's last activation and, when
     * out is not NULL, copied there. */
    int (*forward)(struct kn_model *m, struct kn_stream *s, const void *x,
                   uint32_t n, float *out);
    /* Forward + loss, and when train the backward pass into the gradient
     * accumulator: overwriting it when m->n_acc == 0, adding otherwise
     * (kernels.c adds n to m->n_acc afterwards).  The per-batch mean loss
     * and correct count are copied out (waiting) when not NULL. */
    int (*step)(struct kn_model *m, struct kn_stream *s, const void *x,
                const int32_t *labels, uint32_t n, int train,
                float *loss, int32_t *correct);
    /* SGD with grad scale 1/m->n_acc; the caller zeroes m->n_acc. */
    int (*apply)(struct kn_model *m, struct kn_stream *s,
                 const struct kn_sgd *opt);
    int (*metrics)(struct kn_model *m, struct kn_stream *s,
                   enum kn_phase phase, int reset, struct kn_metrics *out);
    /* The flat gradient-sum array (backend memory, n_params floats). */
    float *(*grad_buf)(struct kn_model *m);
};

extern const struct kn_ops kn_cpu_ops;
#if RINGFEED_HAVE_CUDA
extern const struct kn_ops kn_cuda_ops;
/* cudaGetDeviceCount, 0 on any error. */
int kn_cu_device_count(void);
#endif

/* Formats ctx->err and returns code (a negative errno). */
__attribute__((format(printf, 3, 4)))
int kn_set_err(struct kn_ctx *ctx, int code, const char *fmt, ...);

/* Adds (add != 0) or removes bytes from the context's memory figures. */
void kn_account(struct kn_ctx *ctx, size_t bytes, int add);

/* s, or the context's stream when s is NULL; NULL if s is another's. */
struct kn_stream *kn_stream_of(struct kn_ctx *ctx, struct kn_stream *s);

#endif
