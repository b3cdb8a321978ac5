/*
 * model.c - the MLP's public calls: geometry and argument checks, the
 * deterministic initial weights, the gradient accumulator's sample count,
 * and dispatch to the backend's model ops.
 *
 * Initial weights are computed here, on the host, for every backend: weight
 * (layer l, index i) is a pure function of (seed, l, i) through a
 * counter-based hash (SplitMix64's finalizer applied to a key and the
 * counter), so a CUDA model and a CPU model made from the same seed start
 * bit-identical.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

#define KN_MAX_BATCH (1u << 20)

static uint64_t kn_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1) from (key, counter), 24 bits of resolution. */
static float kn_uniform_pm1(uint64_t key, uint64_t i)
{
    uint64_t r = kn_mix64(key ^ kn_mix64(i));

    return (float)((double)(r >> 40) * (1.0 / 8388608.0) - 1.0);
}

static void kn_init_weights(const struct kn_model *m, float *p)
{
    for (uint32_t l = 0; l < m->n_layers; l++) {
        uint32_t in = kn_in(m, l), out = kn_out(m, l);
        double gain = l + 1 < m->n_layers ? 6.0 : 3.0;
        float a = (float)sqrt(gain / in);
        uint64_t key = kn_mix64(m->seed ^ kn_mix64(0x6b6e00u + l));
        float *w = p + m->w_off[l];

        for (size_t i = 0; i < (size_t)in * out; i++)
            w[i] = a * kn_uniform_pm1(key, i);
        memset(p + m->b_off[l], 0, sizeof(float) * out);
    }
}

static int kn_check_desc(struct kn_ctx *ctx, const struct kn_model_desc *d)
{
    if (!d || !d->dims)
        return kn_set_err(ctx, -EINVAL, "kn_model_create: NULL %s",
                          d ? "dims" : "descriptor");
    if (d->n_dims < 2 || d->n_dims > KN_MAX_LAYERS + 1)
        return kn_set_err(ctx, -EINVAL, "kn_model_create: %u dims (2..%d)",
                          d->n_dims, KN_MAX_LAYERS + 1);
    for (uint32_t i = 0; i < d->n_dims; i++)
        if (d->dims[i] < 1 || d->dims[i] > KN_MAX_DIM)
            return kn_set_err(ctx, -EINVAL, "kn_model_create: dims[%u] = "
                              "%u (1..%d)", i, d->dims[i], KN_MAX_DIM);
    if (d->dims[d->n_dims - 1] < 2)
        return kn_set_err(ctx, -EINVAL, "kn_model_create: %u classes "
                          "(at least 2)", d->dims[d->n_dims - 1]);
    if ((unsigned)d->precision > KN_BF16)
        return kn_set_err(ctx, -EINVAL, "kn_model_create: unknown "
                          "precision %d", (int)d->precision);
    if (d->max_batch < 1 || d->max_batch > KN_MAX_BATCH)
        return kn_set_err(ctx, -EINVAL, "kn_model_create: max_batch %u "
                          "(1..%u)", d->max_batch, KN_MAX_BATCH);
    return 0;
}

int kn_model_create(struct kn_ctx *ctx, const struct kn_model_desc *d,
                    struct kn_model **out)
{
    struct kn_model *m;
    float *init;
    size_t off = 0;
    int rc;

    if (!ctx || !out)
        return -EINVAL;
    *out = NULL;
    rc = kn_check_desc(ctx, d);
    if (rc < 0)
        return rc;

    m = calloc(1, sizeof *m);
    if (!m)
        return kn_set_err(ctx, -ENOMEM, "kn_model_create: out of memory");
    m->ctx = ctx;
    m->n_layers = d->n_dims - 1;
    memcpy(m->dims, d->dims, sizeof(uint32_t) * d->n_dims);
    m->max_batch = d->max_batch;
    m->precision = d->precision;
    m->seed = d->seed;
    for (uint32_t l = 0; l < m->n_layers; l++) {
        m->w_off[l] = off;
        off += (size_t)kn_in(m, l) * kn_out(m, l);
        m->b_off[l] = off;
        off += kn_out(m, l);
    }
    m->n_params = off;
    for (uint32_t i = 0; i < d->n_dims; i++)
        if (m->dims[i] > m->max_dim)
            m->max_dim = m->dims[i];

    rc = -ENOMEM;
    init = malloc(sizeof(float) * m->n_params);
    if (!init) {
        kn_set_err(ctx, rc, "kn_model_create: out of memory (%zu params)",
                   m->n_params);
        goto fail_model;
    }
    rc = ctx->ops->model_init(m);
    if (rc < 0)
        goto fail_init;
    kn_init_weights(m, init);
    rc = ctx->ops->param_write(m, 0, m->n_params, init);
    if (rc < 0)
        goto fail_backend;
    free(init);
    kn_account(ctx, m->bytes, 1);
    *out = m;
    return 0;

fail_backend:
    ctx->ops->model_fini(m);
fail_init:
    free(init);
fail_model:
    free(m);
    return rc;
}

void kn_model_destroy(struct kn_model *m)
{
    if (!m)
        return;
    kn_account(m->ctx, m->bytes, 0);
    m->ctx->ops->model_fini(m);
    free(m);
}

uint32_t kn_model_layers(const struct kn_model *m)
{
    return m ? m->n_layers : 0;
}

size_t kn_model_params(const struct kn_model *m)
{
    return m ? m->n_params : 0;
}

/* Checks the batch arguments shared by forward, train and eval. */
static int kn_check_batch(struct kn_model *m, struct kn_stream **s,
                          const char *fn, const void *x, const void *y,
                          int need_y, uint32_t n)
{
    struct kn_ctx *ctx = m->ctx;

    *s = kn_stream_of(ctx, *s);
    if (!*s)
        return kn_set_err(ctx, -EINVAL, "%s: stream of another context", fn);
    if (!x || (need_y && !y))
        return kn_set_err(ctx, -EINVAL, "%s: NULL %s", fn,
                          !x ? "input" : "labels");
    if (n < 1 || n > m->max_batch)
        return kn_set_err(ctx, -EINVAL, "%s: batch of %u (1..max_batch "
                          "%u)", fn, n, m->max_batch);
    return 0;
}

static int kn_check_sgd(struct kn_ctx *ctx, const char *fn,
                        const struct kn_sgd *o)
{
    if (!o)
        return kn_set_err(ctx, -EINVAL, "%s: applying SGD needs options",
                          fn);
    if (!isfinite(o->lr) || o->lr < 0.0f || !isfinite(o->momentum) ||
        o->momentum < 0.0f || o->momentum >= 1.0f ||
        !isfinite(o->weight_decay) || o->weight_decay < 0.0f)
        return kn_set_err(ctx, -EINVAL, "%s: lr %g momentum %g weight "
                          "decay %g (want lr >= 0, 0 <= momentum < 1, "
                          "decay >= 0)", fn, o->lr, o->momentum,
                          o->weight_decay);
    return 0;
}

int kn_train_step(struct kn_model *m, struct kn_stream *s, const void *x,
                  const int32_t *labels, uint32_t n,
                  const struct kn_sgd *opt, unsigned flags,
                  float *loss, int32_t *correct)
{
    int rc;

    if (!m)
        return -EINVAL;
    rc = kn_check_batch(m, &s, "kn_train_step", x, labels, 1, n);
    if (rc < 0)
        return rc;
    if (flags & ~KN_STEP_APPLY)
        return kn_set_err(m->ctx, -EINVAL, "kn_train_step: unknown flags "
                          "%#x", flags);
    if (flags & KN_STEP_APPLY) {
        rc = kn_check_sgd(m->ctx, "kn_train_step", opt);
        if (rc < 0)
            return rc;
    }
    rc = m->ctx->ops->step(m, s, x, labels, n, 1, loss, correct);
    if (rc < 0)
        return rc;
    m->n_acc += n;
    if (flags & KN_STEP_APPLY) {
        rc = m->ctx->ops->apply(m, s, opt);
        m->n_acc = 0;
    }
    return rc;
}

int kn_model_apply(struct kn_model *m, struct kn_stream *s,
                   const struct kn_sgd *opt)
{
    int rc;

    if (!m)
        return -EINVAL;
    s = kn_stream_of(m->ctx, s);
    if (!s)
        return kn_set_err(m->ctx, -EINVAL, "kn_model_apply: stream of "
                          "another context");
    rc = kn_check_sgd(m->ctx, "kn_model_apply", opt);
    if (rc < 0)
        return rc;
    if (m->n_acc == 0)
        return kn_set_err(m->ctx, -EINVAL, "kn_model_apply: no gradient "
                          "accumulated since the last update");
    rc = m->ctx->ops->apply(m, s, opt);
    m->n_acc = 0;
    return rc;
}

int kn_model_grads(struct kn_model *m, float **sums, size_t *count,
                   uint64_t *samples)
{
    if (!m || !sums || !count || !samples)
        return -EINVAL;
    if (m->n_acc == 0)
        return kn_set_err(m->ctx, -EINVAL, "kn_model_grads: no gradient "
                          "accumulated since the last update");
    *sums = m->ctx->ops->grad_buf(m);
    *count = m->n_params;
    *samples = m->n_acc;
    return 0;
}

int kn_model_set_samples(struct kn_model *m, uint64_t samples)
{
    if (!m)
        return -EINVAL;
    if (samples < 1)
        return kn_set_err(m->ctx, -EINVAL, "kn_model_set_samples: 0 "
                          "samples");
    m->n_acc = samples;
    return 0;
}

int kn_forward(struct kn_model *m, struct kn_stream *s, const void *x,
               uint32_t n, float *logits)
{
    int rc;

    if (!m)
        return -EINVAL;
    rc = kn_check_batch(m, &s, "kn_forward", x, NULL, 0, n);
    if (rc < 0)
        return rc;
    if (!logits)
        return kn_set_err(m->ctx, -EINVAL, "kn_forward: NULL logits");
    return m->ctx->ops->forward(m, s, x, n, logits);
}

int kn_eval(struct kn_model *m, struct kn_stream *s, const void *x,
            const int32_t *labels, uint32_t n, float *loss,
            int32_t *correct)
{
    int rc;

    if (!m)
        return -EINVAL;
    rc = kn_check_batch(m, &s, "kn_eval", x, labels, 1, n);
    if (rc < 0)
        return rc;
    return m->ctx->ops->step(m, s, x, labels, n, 0, loss, correct);
}

int kn_model_metrics(struct kn_model *m, struct kn_stream *s,
                     enum kn_phase phase, int reset, struct kn_metrics *out)
{
    if (!m || !out)
        return -EINVAL;
    s = kn_stream_of(m->ctx, s);
    if (!s)
        return kn_set_err(m->ctx, -EINVAL, "kn_model_metrics: stream of "
                          "another context");
    if ((unsigned)phase > KN_EVAL)
        return kn_set_err(m->ctx, -EINVAL, "kn_model_metrics: unknown "
                          "phase %d", (int)phase);
    return m->ctx->ops->metrics(m, s, phase, reset, out);
}

static int kn_check_layer(struct kn_model *m, const char *fn, uint32_t l)
{
    if (l >= m->n_layers)
        return kn_set_err(m->ctx, -EINVAL, "%s: layer %u of %u", fn, l,
                          m->n_layers);
    return 0;
}

int kn_model_read(struct kn_model *m, enum kn_tensor which, uint32_t layer,
                  float *w, float *b)
{
    size_t nw, nb;
    int rc;

    if (!m)
        return -EINVAL;
    rc = kn_check_layer(m, "kn_model_read", layer);
    if (rc < 0)
        return rc;
    if ((unsigned)which > KN_MOMENTUM)
        return kn_set_err(m->ctx, -EINVAL, "kn_model_read: unknown tensor "
                          "%d", (int)which);
    nw = (size_t)kn_in(m, layer) * kn_out(m, layer);
    nb = kn_out(m, layer);
    if (which == KN_GRADS && m->n_acc == 0) {
        /* The buffer holds the last update's sums; the accumulator is
         * empty, so the mean is zero.  Still wait, as documented. */
        if (w)
            memset(w, 0, sizeof(float) * nw);
        if (b)
            memset(b, 0, sizeof(float) * nb);
        return m->ctx->ops->sync(m->ctx);
    }
    if (w) {
        rc = m->ctx->ops->param_read(m, which, m->w_off[layer], nw, w);
        if (rc < 0)
            return rc;
    }
    if (b) {
        rc = m->ctx->ops->param_read(m, which, m->b_off[layer], nb, b);
        if (rc < 0)
            return rc;
    }
    if (which == KN_GRADS) {
        float inv = (float)(1.0 / (double)m->n_acc);

        for (size_t i = 0; w && i < nw; i++)
            w[i] *= inv;
        for (size_t i = 0; b && i < nb; i++)
            b[i] *= inv;
    }
    return 0;
}

int kn_model_write(struct kn_model *m, uint32_t layer, const float *w,
                   const float *b)
{
    int rc;

    if (!m)
        return -EINVAL;
    rc = kn_check_layer(m, "kn_model_write", layer);
    if (rc < 0)
        return rc;
    if (w) {
        rc = m->ctx->ops->param_write(m, m->w_off[layer],
                                      (size_t)kn_in(m, layer) *
                                      kn_out(m, layer), w);
        if (rc < 0)
            return rc;
    }
    if (b)
        rc = m->ctx->ops->param_write(m, m->b_off[layer], kn_out(m, layer),
                                      b);
    return rc;
}
