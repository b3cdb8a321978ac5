/*
 * cpu_mlp.c - the CPU twin of the MLP: forward (GEMM, then one fused pass
 * of bias + ReLU [+ bf16 rounding]), softmax cross-entropy with its
 * gradient, backward (two GEMMs per layer, bias gradient, ReLU mask) and
 * the SGD update, in plain C with the GEMMs through CBLAS.
 *
 * Buffers, all carved from one allocation made at model creation (nothing
 * is allocated per step), with L layers, B = max_batch, D = widest layer:
 *
 *   w, g, v     flat [n_params]: weights, gradient sums, momentum
 *   wb          KN_BF16 only: w rounded to bf16 (held as floats)
 *   act[l]      [B][out_l]: layer l's output after bias (+ ReLU when
 *               hidden); act[L-1] holds the logits
 *   actb[l]     KN_BF16 only: hidden act[l] rounded to bf16
 *   xb          KN_BF16 only: the bf16 input batch widened to floats
 *   dz, dz2     [B][D]: gradient of the summed loss w.r.t. a layer's
 *               pre-activation, ping-ponged down the layers
 *   dzb         KN_BF16 only: dz rounded to bf16
 *
 * The bf16 path is emulated exactly: a GEMM input that CUDA would read as
 * bf16 is here a float holding the same bf16 value, and sgemm accumulates
 * in fp32 as cublasGemmEx(CUBLAS_COMPUTE_32F) does.  Which tensors are
 * rounded is listed in kernels.h.  The ReLU mask comes from the fp32
 * activation on both backends.
 *
 * Row-major GEMMs (W_l is [out][in]):
 *   forward   Z  = A_prev W^T         sgemm(N, T) n x out x in
 *   weights   gW += dZ^T A_prev       sgemm(T, N) out x in x n (beta 0 on
 *                                     the first micro-batch, else 1)
 *   input     dA = dZ W               sgemm(N, N) n x in x out (not for
 *                                     layer 0: nothing needs it)
 */
#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "../bf16.h"

struct cpu_model {
    float *w, *g, *v, *wb;
    float *act[KN_MAX_LAYERS];
    float *actb[KN_MAX_LAYERS];
    float *xb;
    float *dz, *dz2, *dzb;
    struct kn_metrics met[2];
    void *block;
};

/* Returns the next `count` floats of the block, 256-byte aligned. */
static float *carve(char **cur, size_t count)
{
    float *p = (float *)*cur;

    *cur += (count * sizeof(float) + KN_CPU_ALIGN - 1) / KN_CPU_ALIGN *
            KN_CPU_ALIGN;
    return p;
}

/* Lays the buffers out from base (NULL: just measure); returns the size. */
static size_t layout(const struct kn_model *m, struct cpu_model *c,
                     char *base)
{
    int bf = m->precision == KN_BF16;
    size_t B = m->max_batch, D = m->max_dim, P = m->n_params;
    char *cur = base;

    c->w = carve(&cur, P);
    c->g = carve(&cur, P);
    c->v = carve(&cur, P);
    c->wb = bf ? carve(&cur, P) : NULL;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        int hidden = l + 1 < m->n_layers;

        c->act[l] = carve(&cur, B * kn_out(m, l));
        c->actb[l] = bf && hidden ? carve(&cur, B * kn_out(m, l)) : NULL;
    }
    c->xb = bf ? carve(&cur, B * m->dims[0]) : NULL;
    c->dz = carve(&cur, B * D);
    c->dz2 = carve(&cur, B * D);
    c->dzb = bf ? carve(&cur, B * D) : NULL;
    return (size_t)(cur - base);
}

int kn_cpu_model_init(struct kn_model *m)
{
    struct cpu_model *c;
    size_t bytes;

    c = calloc(1, sizeof *c);
    if (!c)
        goto fail;
    bytes = layout(m, c, NULL);
    c->block = kn_cpu_alloc_aligned(bytes);
    if (!c->block)
        goto fail_model;
    memset(c->block, 0, bytes);
    layout(m, c, c->block);
    m->impl = c;
    m->bytes = bytes;
    return 0;

fail_model:
    free(c);
fail:
    return kn_set_err(m->ctx, -ENOMEM, "kn_model_create: out of memory "
                      "(%zu params, batch %u)", m->n_params, m->max_batch);
}

void kn_cpu_model_fini(struct kn_model *m)
{
    struct cpu_model *c = m->impl;

    if (!c)
        return;
    free(c->block);
    free(c);
    m->impl = NULL;
}

int kn_cpu_param_read(struct kn_model *m, enum kn_tensor which, size_t off,
                      size_t count, float *host)
{
    struct cpu_model *c = m->impl;
    const float *src = which == KN_WEIGHTS ? c->w :
                       which == KN_GRADS ? c->g : c->v;

    memcpy(host, src + off, sizeof(float) * count);
    return 0;
}

int kn_cpu_param_write(struct kn_model *m, size_t off, size_t count,
                       const float *host)
{
    struct cpu_model *c = m->impl;

    memcpy(c->w + off, host, sizeof(float) * count);
    if (c->wb)
        for (size_t i = 0; i < count; i++)
            c->wb[off + i] = kn_bf16_round(host[i]);
    return 0;
}

/* The input batch as floats: x itself, or the bf16 batch widened. */
static const float *input_of(const struct kn_model *m, struct cpu_model *c,
                             const void *x, uint32_t n)
{
    const uint16_t *xh = x;
    size_t k = (size_t)n * m->dims[0];

    if (m->precision == KN_F32)
        return x;
    for (size_t i = 0; i < k; i++)
        c->xb[i] = kn_bf16_to_f32(xh[i]);
    return c->xb;
}

/* z[i][j] += b[j], then ReLU when relu, then a rounded copy when zb. */
static void bias_act(float *z, const float *b, uint32_t n, uint32_t out,
                     int relu, float *zb)
{
    for (uint32_t i = 0; i < n; i++) {
        float *row = z + (size_t)i * out;

        if (!relu) {
            for (uint32_t j = 0; j < out; j++)
                row[j] += b[j];
            continue;
        }
        for (uint32_t j = 0; j < out; j++) {
            float t = row[j] + b[j];

            row[j] = t > 0.0f ? t : 0.0f;
        }
        if (zb)
            for (uint32_t j = 0; j < out; j++)
                zb[(size_t)i * out + j] = kn_bf16_round(row[j]);
    }
}

static void forward(const struct kn_model *m, struct cpu_model *c,
                    const float *x0, uint32_t n)
{
    const float *a = x0;
    const float *wsrc = m->precision == KN_BF16 ? c->wb : c->w;

    for (uint32_t l = 0; l < m->n_layers; l++) {
        uint32_t in = kn_in(m, l), out = kn_out(m, l);
        int hidden = l + 1 < m->n_layers;

        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n,
                    (int)out, (int)in, 1.0f, a, (int)in, wsrc + m->w_off[l],
                    (int)in, 0.0f, c->act[l], (int)out);
        bias_act(c->act[l], c->w + m->b_off[l], n, out, hidden, c->actb[l]);
        a = c->actb[l] ? c->actb[l] : c->act[l];
    }
}

/*
 * Softmax cross-entropy over n rows of `classes` logits.  Adds the
 * per-sample losses to *loss_sum and counts correct and bad labels; when dz
 * is not NULL writes the gradient of the summed loss, softmax - onehot (a
 * zero row for a bad label).  The CUDA kernel does the same arithmetic in
 * the same order.
 */
static void xent(const float *z, const int32_t *y, uint32_t n,
                 uint32_t classes, float *dz, double *loss_sum,
                 int64_t *correct, int64_t *bad)
{
    for (uint32_t i = 0; i < n; i++) {
        const float *row = z + (size_t)i * classes;
        float *drow = dz ? dz + (size_t)i * classes : NULL;
        float mx = row[0], sum = 0.0f, inv;
        uint32_t arg = 0;
        int32_t lab = y[i];

        for (uint32_t j = 1; j < classes; j++)
            if (row[j] > mx) {
                mx = row[j];
                arg = j;
            }
        if (lab < 0 || (uint32_t)lab >= classes) {
            (*bad)++;
            if (drow)
                memset(drow, 0, sizeof(float) * classes);
            continue;
        }
        for (uint32_t j = 0; j < classes; j++) {
            float e = expf(row[j] - mx);

            if (drow)
                drow[j] = e;
            sum += e;
        }
        *loss_sum += (double)(logf(sum) - (row[lab] - mx));
        *correct += arg == (uint32_t)lab;
        if (!drow)
            continue;
        inv = 1.0f / sum;
        for (uint32_t j = 0; j < classes; j++)
            drow[j] *= inv;
        drow[lab] -= 1.0f;
    }
}

static void round_into(float *dst, const float *src, size_t k)
{
    for (size_t i = 0; i < k; i++)
        dst[i] = kn_bf16_round(src[i]);
}

/* gb[j] (+)= sum over rows of dz[i][j], rows in order. */
static void bias_grad(float *gb, const float *dz, uint32_t n, uint32_t out,
                      int first)
{
    if (first)
        memset(gb, 0, sizeof(float) * out);
    for (uint32_t i = 0; i < n; i++) {
        const float *row = dz + (size_t)i * out;

        for (uint32_t j = 0; j < out; j++)
            gb[j] += row[j];
    }
}

static void backward(const struct kn_model *m, struct cpu_model *c,
                     const float *x0, uint32_t n)
{
    int bf = m->precision == KN_BF16, first = m->n_acc == 0;
    const float *wsrc = bf ? c->wb : c->w;
    float *dz = c->dz, *dnext = c->dz2, *tmp;

    for (uint32_t l = m->n_layers; l-- > 0;) {
        uint32_t in = kn_in(m, l), out = kn_out(m, l);
        const float *d = dz, *aprev;
        size_t k = (size_t)n * in;

        if (bf) {
            round_into(c->dzb, dz, (size_t)n * out);
            d = c->dzb;
        }
        aprev = l == 0 ? x0 : bf ? c->actb[l - 1] : c->act[l - 1];
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)out,
                    (int)in, (int)n, 1.0f, d, (int)out, aprev, (int)in,
                    first ? 0.0f : 1.0f, c->g + m->w_off[l], (int)in);
        bias_grad(c->g + m->b_off[l], dz, n, out, first);
        if (l == 0)
            break;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n,
                    (int)in, (int)out, 1.0f, d, (int)out,
                    wsrc + m->w_off[l], (int)in, 0.0f, dnext, (int)in);
        for (size_t i = 0; i < k; i++)      /* ReLU: pass where act > 0 */
            dnext[i] = c->act[l - 1][i] > 0.0f ? dnext[i] : 0.0f;
        tmp = dz;
        dz = dnext;
        dnext = tmp;
    }
}

int kn_cpu_forward(struct kn_model *m, struct kn_stream *s, const void *x,
                   uint32_t n, float *out)
{
    struct cpu_model *c = m->impl;
    uint32_t classes = m->dims[m->n_layers];

    (void)s;
    forward(m, c, input_of(m, c, x, n), n);
    if (out)
        memcpy(out, c->act[m->n_layers - 1],
               sizeof(float) * n * classes);
    return 0;
}

int kn_cpu_step(struct kn_model *m, struct kn_stream *s, const void *x,
                const int32_t *labels, uint32_t n, int train, float *loss,
                int32_t *correct)
{
    struct cpu_model *c = m->impl;
    struct kn_metrics *met = &c->met[train ? KN_TRAIN : KN_EVAL];
    uint32_t classes = m->dims[m->n_layers];
    const float *x0 = input_of(m, c, x, n);
    double lsum = 0.0;
    int64_t ok = 0, bad = 0;

    (void)s;
    forward(m, c, x0, n);
    xent(c->act[m->n_layers - 1], labels, n, classes, train ? c->dz : NULL,
         &lsum, &ok, &bad);
    if (train)
        backward(m, c, x0, n);
    met->loss_sum += lsum;
    met->correct += ok;
    met->samples += n;
    met->bad_labels += bad;
    if (loss)
        *loss = (float)(lsum / n);
    if (correct)
        *correct = (int32_t)ok;
    return 0;
}

/* PyTorch's SGD: g' = g*scale + wd*w; v = mu*v + g'; w -= lr*v. */
static void sgd(float *w, float *v, const float *g, size_t k, float scale,
                const struct kn_sgd *o, float wd, float *wb)
{
    float lr = o->lr, mu = o->momentum;

    for (size_t i = 0; i < k; i++) {
        float gi = g[i] * scale + wd * w[i];
        float vi = mu * v[i] + gi;

        v[i] = vi;
        w[i] = w[i] - lr * vi;
    }
    if (wb)
        round_into(wb, w, k);
}

int kn_cpu_apply(struct kn_model *m, struct kn_stream *s,
                 const struct kn_sgd *opt)
{
    struct cpu_model *c = m->impl;
    float scale = (float)(1.0 / (double)m->n_acc);

    (void)s;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        size_t wo = m->w_off[l], bo = m->b_off[l];
        size_t nw = (size_t)kn_in(m, l) * kn_out(m, l);

        sgd(c->w + wo, c->v + wo, c->g + wo, nw, scale, opt,
            opt->weight_decay, c->wb ? c->wb + wo : NULL);
        sgd(c->w + bo, c->v + bo, c->g + bo, kn_out(m, l), scale, opt, 0.0f,
            c->wb ? c->wb + bo : NULL);
    }
    return 0;
}

int kn_cpu_metrics(struct kn_model *m, struct kn_stream *s,
                   enum kn_phase phase, int reset, struct kn_metrics *out)
{
    struct cpu_model *c = m->impl;

    (void)s;
    *out = c->met[phase];
    if (reset)
        memset(&c->met[phase], 0, sizeof c->met[phase]);
    return 0;
}

float *kn_cpu_grad_buf(struct kn_model *m)
{
    return ((struct cpu_model *)m->impl)->g;
}
