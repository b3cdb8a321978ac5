/*
 * kernels.h - the trainer's compute: image normalization and a small MLP
 * (forward, backward, softmax cross-entropy, SGD), on CUDA or on the CPU,
 * behind one interface with the prefix kn_.
 *
 * Backends.  A context (struct kn_ctx) runs on one backend, chosen at run
 * time by kn_open(): CUDA when the library was built with CUDA and a device
 * answers, else the CPU twin (plain C, GEMMs through CBLAS/OpenBLAS).  The
 * choice and its reason are reported by kn_backend_name() and
 * kn_backend_note(), e.g. "CUDA built, no device: cudaGetDeviceCount: ...".
 * Both backends compute the same functions with the same data layouts, the
 * same initial weights for a seed and the same rounding rules; results agree
 * to within floating-point summation order (the tests state the tolerances).
 *
 * Memory.  "Backend memory" is device memory on CUDA and ordinary host memory
 * on the CPU.  Every tensor argument of the compute calls (kn_normalize,
 * kn_forward, kn_train_step, kn_eval) lives in backend memory, allocated with
 * kn_buf_alloc() and filled with kn_copy(); host arrays appear only in the
 * parameter read/write calls and in small by-value descriptors.  So a trainer
 * written against this header runs unchanged on either backend.
 *
 * Streams and events.  On CUDA every call that takes a struct kn_stream
 * enqueues its work there and returns without waiting, except where its
 * comment says it waits (any call with a host result pointer that is not
 * NULL).  A stream may be created by the library or wrap a caller's
 * cudaStream_t.  Events mark a point in a stream: for cross-stream ordering
 * (copy batch N+1 on one stream while batch N computes on another) and for
 * timing with kn_event_elapsed_ms() after kn_event_sync().  On the CPU all
 * work runs at the call, streams are placeholders and an event records the
 * monotonic clock when recorded, so the same timing code works there.
 * A NULL stream means the context's own stream.
 *
 * Data layouts (row-major, as PyTorch's nn.Linear):
 *   input x       [n][dims[0]]            float (KN_F32) or bf16 (KN_BF16)
 *   labels        [n] int32 in [0, classes)
 *   weights W_l   [dims[l+1]][dims[l]]    fp32 master copy
 *   bias b_l      [dims[l+1]]             fp32
 *   logits        [n][classes] fp32, classes = dims[n_layers]
 * Hidden layers are Linear + ReLU; the last layer is Linear, followed by
 * softmax cross-entropy.
 *
 * Precision.  KN_F32: all fp32 (cuBLAS SGEMM with the default math mode, no
 * TF32; CBLAS sgemm).  KN_BF16: GEMM inputs (input batch, weights, hidden
 * activations, output gradients) are bf16, rounded to nearest even from the
 * fp32 values, accumulated in fp32 (cublasGemmEx with CUBLAS_COMPUTE_32F; on
 * the CPU the same bf16 values held in floats through sgemm).  Bias, ReLU,
 * softmax, gradients and the SGD update stay fp32, on fp32 master weights;
 * the bf16 weight copy is refreshed after every update.
 *
 * The Fashion-MNIST model (KN_FMNIST_DIMS): 784-512-256-10, 535,818
 * parameters.  Measured on the CPU twin (2 cores, fp32, batch 128,
 * momentum 0.9, weight decay 5e-4, inputs normalized with mean 0.2860 and
 * std 0.3530, lr 0.05 decayed to 0 by a cosine over 10 epochs): 89.1% test
 * accuracy after epoch 6 and 90.0% after epoch 10, at 2.3-3 s an epoch on
 * a quiet machine (the GEMMs are about 80% of a step).  A constant lr of
 * 0.05 plateaus near 88%: the trainer should decay it (lr is a per-step
 * argument).  bf16 reaches the same accuracy, about 10% slower on the CPU.
 *
 * CPU threads: the GEMMs run on OpenBLAS's threads (see kn_open_opts).  The
 * first CPU context also moves OpenBLAS off its generic "Prescott" kernels
 * when OpenBLAS did not recognise an AVX2/AVX-512 CPU (4-5x faster GEMMs;
 * cpu/cpu_backend.c says how); the note reports it.  Both are process-wide.
 *
 * Errors: functions return 0 (or a count) on success and a negative errno on
 * failure; kn_errmsg() then holds one line saying what was wrong.  Free and
 * destroy functions accept NULL.  A context, and the models, streams and
 * events made from it, are used by one thread at a time.
 */
#ifndef RINGFEED_KERNELS_H
#define RINGFEED_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kn_ctx;
struct kn_stream;
struct kn_event;
struct kn_model;

enum kn_backend {
    KN_BACKEND_AUTO = 0,  /* CUDA if built and a device answers, else CPU */
    KN_BACKEND_CPU,
    KN_BACKEND_CUDA,
};

enum kn_dtype {
    KN_F32 = 0,
    KN_BF16,              /* bfloat16 held as uint16_t bits */
};

enum kn_layout {
    KN_HWC = 0,           /* pixels interleaved: [n][h][w][c] */
    KN_CHW,               /* planes: [n][c][h][w] */
};

enum kn_copy_dir {
    KN_H2D = 0,           /* host memory -> backend memory */
    KN_D2H,               /* backend memory -> host memory */
    KN_D2D,               /* backend memory -> backend memory */
};

enum kn_phase {
    KN_TRAIN = 0,         /* kn_train_step's running metrics */
    KN_EVAL,              /* kn_eval's running metrics */
};

enum kn_tensor {
    KN_WEIGHTS = 0,       /* fp32 master weights and biases */
    KN_GRADS,             /* mean gradient over the samples accumulated */
    KN_MOMENTUM,          /* SGD momentum buffers */
};

#define KN_MAX_LAYERS   8      /* Linear layers in a model */
#define KN_MAX_DIM      65536  /* width of any layer */
#define KN_MAX_CHANNELS 4      /* image channels kn_normalize accepts */

/* The Fashion-MNIST MLP: 784-512-256-10, three Linear layers. */
#define KN_FMNIST_DIMS { 784, 512, 256, 10 }
#define KN_FMNIST_NDIMS 4

/* ---- contexts ---------------------------------------------------------- */

struct kn_open_opts {
    int device;           /* CUDA device ordinal (default 0) */
    int cpu_threads;      /* OpenBLAS threads; 0 leaves OpenBLAS's choice
                           * (OPENBLAS_NUM_THREADS, else every core).  The
                           * setting is process-wide, as OpenBLAS's is. */
};

/*
 * Opens a context on the backend `want` (opts may be NULL for defaults).
 * AUTO falls back to the CPU when CUDA is not built or has no usable device,
 * and says why in kn_backend_note().  Asking for CUDA explicitly fails with
 * -ENOTSUP (not built with CUDA) or -ENODEV (no usable device).
 * On failure *out is NULL and err (if not NULL) holds the reason.
 * The caller owns *out and frees it with kn_close().
 */
int kn_open(struct kn_ctx **out, enum kn_backend want,
            const struct kn_open_opts *opts, char *err, size_t errlen);

/* Frees the context; its buffers, models, streams and events must be freed
 * first (a buffer still allocated is freed here). */
void kn_close(struct kn_ctx *ctx);

/* CUDA devices this process sees (0 without CUDA built or without a
 * device): for picking kn_open_opts.device, e.g. a rank's local rank
 * modulo this. */
int kn_device_count(void);

/* "cuda" or "cpu". */
const char *kn_backend_name(const struct kn_ctx *ctx);
enum kn_backend kn_backend_kind(const struct kn_ctx *ctx);

/* One line: the device ("cuda device 0: NVIDIA H200, sm_90, ...") or why the
 * CPU runs ("CUDA built, no device: cudaGetDeviceCount: ..." or "built
 * without CUDA"), and OpenBLAS's thread count on the CPU. */
const char *kn_backend_note(const struct kn_ctx *ctx);

/* The message of the last failed call on ctx ("" when none failed). */
const char *kn_errmsg(const struct kn_ctx *ctx);

/* Waits until all work on every stream of the context is done. */
int kn_sync(struct kn_ctx *ctx);

/* ---- memory ------------------------------------------------------------ */

/* Allocates bytes of backend memory, aligned to 256 bytes; *out is owned by
 * the caller until kn_buf_free().  bytes == 0 is -EINVAL. */
int kn_buf_alloc(struct kn_ctx *ctx, size_t bytes, void **out);
void kn_buf_free(struct kn_ctx *ctx, void *buf);

/* Copies bytes in the direction dir, ordered on stream s.  On CUDA a
 * host-side buffer must stay unchanged until the stream reaches the copy;
 * for real overlap it should be pinned (cudaHostRegister'd ring slots are). */
int kn_copy(struct kn_ctx *ctx, struct kn_stream *s, void *dst,
            const void *src, size_t bytes, enum kn_copy_dir dir);

struct kn_mem {
    size_t bytes;         /* backend memory held by this context now */
    size_t peak;          /* most it has held at once */
    size_t dev_used;      /* CUDA: device memory in use (all users), at the
                           * time of the call; CPU: 0 */
    size_t dev_used_peak; /* CUDA: the most dev_used seen at allocations and
                           * at these calls; CPU: 0 */
    size_t dev_total;     /* CUDA: device memory size; CPU: 0 */
};
int kn_mem_stats(struct kn_ctx *ctx, struct kn_mem *out);

/* ---- streams and events ------------------------------------------------ */

/* A new stream (CUDA: a non-blocking cudaStream_t owned by the library). */
int kn_stream_create(struct kn_ctx *ctx, struct kn_stream **out);
/* Wraps the caller's cudaStream_t (passed as void *; the caller keeps
 * ownership and must outlive the wrapper).  -ENOTSUP on the CPU. */
int kn_stream_wrap(struct kn_ctx *ctx, void *cuda_stream,
                   struct kn_stream **out);
void kn_stream_destroy(struct kn_stream *s);
/* The stream's cudaStream_t as void *, for another CUDA user on the same
 * stream (libringfeed's rf_cuda_copy_release); NULL on the CPU.  s NULL:
 * the context's own stream.  The handle stays the stream's owner's. */
void *kn_stream_native(struct kn_ctx *ctx, struct kn_stream *s);
/* Waits for all work enqueued on s. */
int kn_stream_sync(struct kn_stream *s);
/* Makes later work on s wait for ev (recorded on any stream). */
int kn_stream_wait_event(struct kn_stream *s, struct kn_event *ev);

int kn_event_create(struct kn_ctx *ctx, struct kn_event **out);
void kn_event_destroy(struct kn_event *ev);
/* Marks the current end of stream s. */
int kn_event_record(struct kn_event *ev, struct kn_stream *s);
/* Waits until the work before the mark is done. */
int kn_event_sync(struct kn_event *ev);
/* Without waiting: 1 when the work before the mark is done (or ev was
 * never recorded), 0 while it is not, or a negative errno.  For a waiter
 * that needs a deadline (kn_event_sync waits as long as it takes). */
int kn_event_query(struct kn_event *ev);
/* Milliseconds between two recorded, completed events (sync `end` first);
 * -EAGAIN when one has not completed, -EINVAL when one was never recorded. */
int kn_event_elapsed_ms(struct kn_event *start, struct kn_event *end,
                        float *ms);

/* ---- normalize --------------------------------------------------------- */

struct kn_norm {
    uint32_t n, c, h, w;  /* images, channels (1..KN_MAX_CHANNELS), size */
    enum kn_layout layout;/* of the uint8 source; the output is always CHW */
    enum kn_dtype out;    /* KN_F32 or KN_BF16 */
    float mean[KN_MAX_CHANNELS]; /* per channel, on the 0..1 scale */
    float std[KN_MAX_CHANNELS];  /* per channel, finite and > 0 */
};

/*
 * dst[i][ch][y][x] = (src/255 - mean[ch]) / std[ch], computed in fp32 as
 * (v * (1/255) - mean) * (1/std) and, for KN_BF16, rounded to nearest even.
 * src and dst are backend memory of n*c*h*w elements; they must not overlap.
 */
int kn_normalize(struct kn_ctx *ctx, struct kn_stream *s,
                 const struct kn_norm *p, const uint8_t *src, void *dst);

/* Round-to-nearest-even fp32 -> bf16 (NaN stays a quiet NaN) and back. */
uint16_t kn_bf16_from_f32(float f);
float kn_f32_from_bf16(uint16_t b);

/* ---- the MLP ----------------------------------------------------------- */

struct kn_model_desc {
    const uint32_t *dims; /* n_dims widths: input, hidden..., classes */
    uint32_t n_dims;      /* 2 .. KN_MAX_LAYERS + 1 */
    uint64_t seed;        /* initial weights are a pure function of it */
    enum kn_dtype precision;
    uint32_t max_batch;   /* the largest n any call will pass */
};

/*
 * Creates a model with all its buffers (nothing is allocated per step).
 * Initial weights: Kaiming-uniform, W ~ U(-a, a) with a = sqrt(6 / fan_in)
 * for hidden layers (ReLU gain) and sqrt(3 / fan_in) for the last; biases 0.
 * Each weight's uniform draw is a counter-based hash of (seed, layer, index),
 * so the weights do not depend on the backend or on the order of creation.
 * Gradients and momentum start at zero.  Owned by the caller:
 * kn_model_destroy() before kn_close().
 */
int kn_model_create(struct kn_ctx *ctx, const struct kn_model_desc *d,
                    struct kn_model **out);
void kn_model_destroy(struct kn_model *m);

uint32_t kn_model_layers(const struct kn_model *m);
/* Parameters (weights and biases) in all layers. */
size_t kn_model_params(const struct kn_model *m);

struct kn_sgd {
    float lr;
    float momentum;       /* PyTorch's: v = mu*v + g; w -= lr*v */
    float weight_decay;   /* added to the gradient as wd*w, weights only
                           * (biases are not decayed) */
};

#define KN_STEP_APPLY 1u  /* after accumulating this batch, apply SGD */

/*
 * One micro-batch of training: forward, loss, backward.  The gradient of the
 * summed loss is added to the model's accumulator along with the n samples;
 * with KN_STEP_APPLY the SGD update then uses the mean gradient over every
 * sample accumulated since the last update (so K calls over B samples, the
 * last with KN_STEP_APPLY, equal one call over K*B samples), and the
 * accumulator empties.  opt may be NULL without KN_STEP_APPLY.
 * x: [n][dims[0]] of the model's precision; labels: [n]; both backend memory,
 * 1 <= n <= max_batch.  A label outside [0, classes) adds no loss or
 * gradient, counts as wrong and is counted in kn_metrics.bad_labels.
 * loss (mean over this batch) and correct (argmax == label; ties go to the
 * lowest class) are written when not NULL, which waits for the stream; with
 * both NULL the call only enqueues.  Either way they add to the KN_TRAIN
 * metrics.
 */
int kn_train_step(struct kn_model *m, struct kn_stream *s, const void *x,
                  const int32_t *labels, uint32_t n,
                  const struct kn_sgd *opt, unsigned flags,
                  float *loss, int32_t *correct);

/* Applies SGD with the mean accumulated gradient and empties the
 * accumulator; -EINVAL when nothing has been accumulated. */
int kn_model_apply(struct kn_model *m, struct kn_stream *s,
                   const struct kn_sgd *opt);

/*
 * The gradient accumulator, for an all-reduce across data-parallel ranks.
 * *sums gets the flat fp32 buffer of gradient sums in backend memory (device
 * memory on CUDA): every parameter, laid out W_0, b_0, W_1, b_1, ... in one
 * contiguous run, so one all-reduce call covers the whole model.  *count
 * gets its floats (kn_model_params), *samples the samples accumulated into
 * it since the last update.  The buffer stays the model's; a caller may
 * overwrite it (with the sum over ranks, on the model's stream or after
 * waiting for it) between the last kn_train_step of a group, made without
 * KN_STEP_APPLY, and the kn_model_apply that ends the group, and then says
 * how many samples the new sums cover with kn_model_set_samples, so the
 * update divides by the job's sample count.  -EINVAL (the pointers left
 * alone) when nothing has been accumulated.
 */
int kn_model_grads(struct kn_model *m, float **sums, size_t *count,
                   uint64_t *samples);
/* samples >= 1: the accumulator now holds sums over that many samples. */
int kn_model_set_samples(struct kn_model *m, uint64_t samples);

/* Forward pass only: logits [n][classes] fp32 into backend memory. */
int kn_forward(struct kn_model *m, struct kn_stream *s, const void *x,
               uint32_t n, float *logits);

/* Forward and loss without gradients; loss/correct as in kn_train_step,
 * added to the KN_EVAL metrics. */
int kn_eval(struct kn_model *m, struct kn_stream *s, const void *x,
            const int32_t *labels, uint32_t n, float *loss,
            int32_t *correct);

struct kn_metrics {
    double loss_sum;      /* sum of per-sample losses */
    int64_t correct;
    int64_t samples;
    int64_t bad_labels;
};

/* Reads (and with reset, zeroes) the running metrics of a phase; waits for
 * stream s, which must be the stream the steps ran on. */
int kn_model_metrics(struct kn_model *m, struct kn_stream *s,
                     enum kn_phase phase, int reset, struct kn_metrics *out);

/*
 * Copies one layer's tensors to host arrays w [out][in] and b [out] (either
 * may be NULL).  KN_GRADS gives the mean over the samples accumulated so far
 * (zeros when none).  Waits for all work on the context.
 */
int kn_model_read(struct kn_model *m, enum kn_tensor which, uint32_t layer,
                  float *w, float *b);

/* Replaces one layer's weights and biases from host arrays (either may be
 * NULL to keep it); refreshes the bf16 copy.  Waits for all work. */
int kn_model_write(struct kn_model *m, uint32_t layer, const float *w,
                   const float *b);

#ifdef __cplusplus
}
#endif

#endif
