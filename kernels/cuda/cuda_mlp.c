/*
 * cuda_mlp.c - the MLP on CUDA: sequences cuBLAS GEMMs and the kernels of
 * mlp.cu on the caller's stream, mirroring cpu/cpu_mlp.c step for step
 * (that file's comment has the buffer list, the bf16 rules and the GEMMs
 * in row-major terms).
 *
 * cuBLAS is column-major; a row-major [r][c] matrix is a column-major
 * c x r one, so each row-major GEMM of the CPU twin becomes (ld = the
 * row-major row length):
 *   forward  Z^T[out x n]  = W^T(op T of in x out) * A^T(in x n)
 *            gemm(T, N, m=out, n=n, k=in, W, ld in, A, ld in, Z, ld out)
 *   weights  gW^T[in x out] (+)= A^T(in x n) * dZ(op T of out x n)
 *            gemm(N, T, m=in, n=out, k=n, A, ld in, dZ, ld out, gW, ld in)
 *   input    dA^T[in x n]  = W^T(in x out) * dZ^T(out x n)
 *            gemm(N, N, m=in, n=n, k=out, W, ld in, dZ, ld out, dA, ld in)
 * fp32 models call cublasSgemm (CUBLAS_DEFAULT_MATH: no TF32); bf16 models
 * call cublasGemmEx with CUDA_R_16BF inputs, CUDA_R_32F output and
 * CUBLAS_COMPUTE_32F; both through the context's cuBLAS table (cu_blas.h).
 *
 * All device buffers are one cudaMalloc made at model creation, plus one
 * small pinned host block for reading figures back; a step allocates
 * nothing.  A call with a host result pointer copies into the pinned block
 * on the step's stream and waits for that stream only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cu_backend.h"
#include "cuda_kernels.h"

#define CU_ALIGN 256

struct cu_host {
    struct kn_cu_acc acc;
    struct kn_cu_step step;
};

struct cu_model {
    float *w, *g, *v;
    uint16_t *wb;
    float *act[KN_MAX_LAYERS];
    uint16_t *actb[KN_MAX_LAYERS];
    float *dz, *dz2;
    uint16_t *dzb;
    float *loss_i;
    int32_t *flag_i;
    struct kn_cu_acc *acc;          /* [2]: KN_TRAIN, KN_EVAL */
    struct kn_cu_step *step;
    void *block;
    struct cu_host *host;           /* pinned */
};

static void *carve(char **cur, size_t bytes)
{
    void *p = *cur;

    *cur += (bytes + CU_ALIGN - 1) / CU_ALIGN * CU_ALIGN;
    return p;
}

/* Lays the buffers out from base (NULL: just measure); returns the size. */
static size_t layout(const struct kn_model *m, struct cu_model *c,
                     char *base)
{
    int bf = m->precision == KN_BF16;
    size_t B = m->max_batch, D = m->max_dim, P = m->n_params;
    char *cur = base;

    c->w = carve(&cur, P * sizeof(float));
    c->g = carve(&cur, P * sizeof(float));
    c->v = carve(&cur, P * sizeof(float));
    c->wb = bf ? carve(&cur, P * sizeof(uint16_t)) : NULL;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        int hidden = l + 1 < m->n_layers;

        c->act[l] = carve(&cur, B * kn_out(m, l) * sizeof(float));
        c->actb[l] = bf && hidden ?
                     carve(&cur, B * kn_out(m, l) * sizeof(uint16_t)) : NULL;
    }
    c->dz = carve(&cur, B * D * sizeof(float));
    c->dz2 = carve(&cur, B * D * sizeof(float));
    c->dzb = bf ? carve(&cur, B * D * sizeof(uint16_t)) : NULL;
    c->loss_i = carve(&cur, B * sizeof(float));
    c->flag_i = carve(&cur, B * sizeof(int32_t));
    c->acc = carve(&cur, 2 * sizeof(struct kn_cu_acc));
    c->step = carve(&cur, sizeof(struct kn_cu_step));
    return (size_t)(cur - base);
}

int kn_cu_model_init(struct kn_model *m)
{
    struct kn_ctx *ctx = m->ctx;
    cudaStream_t st = cu_stream(ctx->stream);
    struct cu_model *c;
    size_t bytes;
    int rc = -ENOMEM;

    c = calloc(1, sizeof *c);
    if (!c) {
        kn_set_err(ctx, rc, "kn_model_create: out of memory");
        goto fail;
    }
    bytes = layout(m, c, NULL);
    if (cudaMalloc(&c->block, bytes) != cudaSuccess) {
        kn_set_err(ctx, rc, "kn_model_create: cudaMalloc of %zu bytes "
                   "failed (%zu params, batch %u)", bytes, m->n_params,
                   m->max_batch);
        goto fail_model;
    }
    if (cudaMallocHost((void **)&c->host, sizeof *c->host) != cudaSuccess) {
        kn_set_err(ctx, rc, "kn_model_create: cudaMallocHost failed");
        goto fail_block;
    }
    layout(m, c, c->block);
    rc = kn_cu_check(ctx, "kn_model_create: cudaMemsetAsync",
                     cudaMemsetAsync(c->block, 0, bytes, st));
    if (rc == 0)
        rc = kn_cu_check(ctx, "kn_model_create: cudaStreamSynchronize",
                         cudaStreamSynchronize(st));
    if (rc < 0)
        goto fail_host;
    m->impl = c;
    m->bytes = bytes;
    return 0;

fail_host:
    cudaFreeHost(c->host);
fail_block:
    cudaFree(c->block);
fail_model:
    free(c);
fail:
    return rc;
}

void kn_cu_model_fini(struct kn_model *m)
{
    struct cu_model *c = m->impl;

    if (!c)
        return;
    cudaDeviceSynchronize();    /* no stream may still use the buffers */
    cudaFreeHost(c->host);
    cudaFree(c->block);
    free(c);
    m->impl = NULL;
}

int kn_cu_param_read(struct kn_model *m, enum kn_tensor which, size_t off,
                     size_t count, float *host)
{
    struct cu_model *c = m->impl;
    cudaStream_t st = cu_stream(m->ctx->stream);
    const float *src = which == KN_WEIGHTS ? c->w :
                       which == KN_GRADS ? c->g : c->v;
    int rc;

    rc = kn_cu_check(m->ctx, "kn_model_read: cudaDeviceSynchronize",
                     cudaDeviceSynchronize());
    if (rc == 0)
        rc = kn_cu_check(m->ctx, "kn_model_read: cudaMemcpyAsync",
                         cudaMemcpyAsync(host, src + off,
                                         count * sizeof(float),
                                         cudaMemcpyDeviceToHost, st));
    if (rc == 0)
        rc = kn_cu_check(m->ctx, "kn_model_read: cudaStreamSynchronize",
                         cudaStreamSynchronize(st));
    return rc;
}

int kn_cu_param_write(struct kn_model *m, size_t off, size_t count,
                      const float *host)
{
    struct cu_model *c = m->impl;
    cudaStream_t st = cu_stream(m->ctx->stream);
    int rc;

    rc = kn_cu_check(m->ctx, "kn_model_write: cudaDeviceSynchronize",
                     cudaDeviceSynchronize());
    if (rc == 0)
        rc = kn_cu_check(m->ctx, "kn_model_write: cudaMemcpyAsync",
                         cudaMemcpyAsync(c->w + off, host,
                                         count * sizeof(float),
                                         cudaMemcpyHostToDevice, st));
    if (rc == 0 && c->wb)
        rc = kn_cu_check(m->ctx, "kn_model_write: bf16 copy",
                         kn_cu_to_bf16(st, c->w + off, c->wb + off, count));
    if (rc == 0)
        rc = kn_cu_check(m->ctx, "kn_model_write: cudaStreamSynchronize",
                         cudaStreamSynchronize(st));
    return rc;
}

/* C (ldc) = op(A) op(B) + beta C in the model's precision. */
static int gemm(struct kn_model *m, cublasOperation_t ta,
                cublasOperation_t tb, uint32_t rows, uint32_t cols,
                uint32_t inner, const void *a, uint32_t lda, const void *b,
                uint32_t ldb, float beta, float *cm, uint32_t ldc)
{
    const struct cu_ctx *c = cu_of(m->ctx);
    cublasHandle_t h = c->blas;
    const float one = 1.0f;

    if (m->precision == KN_BF16)
        return kn_cu_blas_check(m->ctx, "cublasGemmEx",
            c->api->gemm_ex(h, ta, tb, (int)rows, (int)cols, (int)inner, &one,
                         a, CUDA_R_16BF, (int)lda, b, CUDA_R_16BF, (int)ldb,
                         &beta, cm, CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
    return kn_cu_blas_check(m->ctx, "cublasSgemm",
        c->api->sgemm(h, ta, tb, (int)rows, (int)cols, (int)inner, &one, a,
                    (int)lda, b, (int)ldb, &beta, cm, (int)ldc));
}

/* The weights as the GEMMs read them: bf16 copy or fp32 masters. */
static const void *gemm_w(const struct kn_model *m, const struct cu_model *c,
                          uint32_t l)
{
    if (c->wb)
        return c->wb + m->w_off[l];
    return c->w + m->w_off[l];
}

static int forward(struct kn_model *m, struct cu_model *c, cudaStream_t st,
                   const void *x, uint32_t n)
{
    const void *a = x;
    int rc;

    rc = kn_cu_blas_check(m->ctx, "cublasSetStream",
                          cu_of(m->ctx)->api->set_stream(
                              cu_of(m->ctx)->blas, st));
    for (uint32_t l = 0; rc == 0 && l < m->n_layers; l++) {
        uint32_t in = kn_in(m, l), out = kn_out(m, l);
        int hidden = l + 1 < m->n_layers;

        rc = gemm(m, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, gemm_w(m, c, l),
                  in, a, in, 0.0f, c->act[l], out);
        if (rc == 0)
            rc = kn_cu_check(m->ctx, "bias_act launch",
                             kn_cu_bias_act(st, c->act[l],
                                            c->w + m->b_off[l], n, out,
                                            hidden, c->actb[l]));
        a = c->actb[l] ? (const void *)c->actb[l] : (const void *)c->act[l];
    }
    return rc;
}

static int backward(struct kn_model *m, struct cu_model *c, cudaStream_t st,
                    const void *x, uint32_t n)
{
    int bf = m->precision == KN_BF16, first = m->n_acc == 0;
    float *dz = c->dz, *dnext = c->dz2, *tmp;
    int rc = 0;

    for (uint32_t l = m->n_layers; rc == 0 && l-- > 0;) {
        uint32_t in = kn_in(m, l), out = kn_out(m, l);
        const void *d = dz, *aprev;

        if (bf) {
            rc = kn_cu_check(m->ctx, "to_bf16 launch",
                             kn_cu_to_bf16(st, dz, c->dzb, (size_t)n * out));
            d = c->dzb;
        }
        aprev = l == 0 ? x : bf ? (const void *)c->actb[l - 1]
                                : (const void *)c->act[l - 1];
        if (rc == 0)
            rc = gemm(m, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, aprev, in, d,
                      out, first ? 0.0f : 1.0f, c->g + m->w_off[l], in);
        if (rc == 0)
            rc = kn_cu_check(m->ctx, "bias_grad launch",
                             kn_cu_bias_grad(st, dz, n, out,
                                             c->g + m->b_off[l], first));
        if (rc < 0 || l == 0)
            break;
        rc = gemm(m, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, gemm_w(m, c, l),
                  in, d, out, 0.0f, dnext, in);
        if (rc == 0)
            rc = kn_cu_check(m->ctx, "relu_mask launch",
                             kn_cu_relu_mask(st, dnext, c->act[l - 1],
                                             (size_t)n * in));
        tmp = dz;
        dz = dnext;
        dnext = tmp;
    }
    return rc;
}

int kn_cu_forward(struct kn_model *m, struct kn_stream *s, const void *x,
                  uint32_t n, float *out)
{
    struct cu_model *c = m->impl;
    cudaStream_t st = cu_stream(s);
    uint32_t classes = m->dims[m->n_layers];
    int rc = forward(m, c, st, x, n);

    if (rc == 0 && out)
        rc = kn_cu_check(m->ctx, "kn_forward: cudaMemcpyAsync",
                         cudaMemcpyAsync(out, c->act[m->n_layers - 1],
                                         sizeof(float) * n * classes,
                                         cudaMemcpyDeviceToDevice, st));
    return rc;
}

int kn_cu_step(struct kn_model *m, struct kn_stream *s, const void *x,
               const int32_t *labels, uint32_t n, int train, float *loss,
               int32_t *correct)
{
    struct cu_model *c = m->impl;
    cudaStream_t st = cu_stream(s);
    uint32_t classes = m->dims[m->n_layers];
    int rc = forward(m, c, st, x, n);

    if (rc == 0)
        rc = kn_cu_check(m->ctx, "xent launch",
                         kn_cu_xent(st, c->act[m->n_layers - 1], labels, n,
                                    classes, train ? c->dz : NULL,
                                    c->loss_i, c->flag_i));
    if (rc == 0)
        rc = kn_cu_check(m->ctx, "metrics launch",
                         kn_cu_metrics_add(st, c->loss_i, c->flag_i, n,
                                           &c->acc[train ? KN_TRAIN
                                                         : KN_EVAL],
                                           c->step));
    if (rc == 0 && train)
        rc = backward(m, c, st, x, n);
    if (rc < 0 || (!loss && !correct))
        return rc;
    rc = kn_cu_check(m->ctx, "step figures: cudaMemcpyAsync",
                     cudaMemcpyAsync(&c->host->step, c->step,
                                     sizeof c->host->step,
                                     cudaMemcpyDeviceToHost, st));
    if (rc == 0)
        rc = kn_cu_check(m->ctx, "cudaStreamSynchronize",
                         cudaStreamSynchronize(st));
    if (rc < 0)
        return rc;
    if (loss)
        *loss = c->host->step.loss;
    if (correct)
        *correct = c->host->step.correct;
    return 0;
}

int kn_cu_apply(struct kn_model *m, struct kn_stream *s,
                const struct kn_sgd *opt)
{
    struct cu_model *c = m->impl;
    cudaStream_t st = cu_stream(s);
    float scale = (float)(1.0 / (double)m->n_acc);
    int rc = 0;

    for (uint32_t l = 0; rc == 0 && l < m->n_layers; l++) {
        size_t wo = m->w_off[l], bo = m->b_off[l];
        size_t nw = (size_t)kn_in(m, l) * kn_out(m, l);

        rc = kn_cu_check(m->ctx, "sgd launch",
                         kn_cu_sgd(st, c->w + wo, c->v + wo, c->g + wo, nw,
                                   scale, opt->lr, opt->momentum,
                                   opt->weight_decay,
                                   c->wb ? c->wb + wo : NULL));
        if (rc == 0)
            rc = kn_cu_check(m->ctx, "sgd launch",
                             kn_cu_sgd(st, c->w + bo, c->v + bo, c->g + bo,
                                       kn_out(m, l), scale, opt->lr,
                                       opt->momentum, 0.0f,
                                       c->wb ? c->wb + bo : NULL));
    }
    return rc;
}

int kn_cu_metrics(struct kn_model *m, struct kn_stream *s,
                  enum kn_phase phase, int reset, struct kn_metrics *out)
{
    struct cu_model *c = m->impl;
    cudaStream_t st = cu_stream(s);
    int rc;

    rc = kn_cu_check(m->ctx, "kn_model_metrics: cudaMemcpyAsync",
                     cudaMemcpyAsync(&c->host->acc, &c->acc[phase],
                                     sizeof c->host->acc,
                                     cudaMemcpyDeviceToHost, st));
    if (rc == 0 && reset)
        rc = kn_cu_check(m->ctx, "kn_model_metrics: cudaMemsetAsync",
                         cudaMemsetAsync(&c->acc[phase], 0,
                                         sizeof c->acc[phase], st));
    if (rc == 0)
        rc = kn_cu_check(m->ctx, "kn_model_metrics: cudaStreamSynchronize",
                         cudaStreamSynchronize(st));
    if (rc < 0)
        return rc;
    out->loss_sum = c->host->acc.loss_sum;
    out->correct = c->host->acc.correct;
    out->samples = c->host->acc.samples;
    out->bad_labels = c->host->acc.bad;
    return 0;
}

float *kn_cu_grad_buf(struct kn_model *m)
{
    return ((struct cu_model *)m->impl)->g;
}
