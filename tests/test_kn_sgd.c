/*
 * test_kn_sgd.c - the CPU SGD update against its formula computed here:
 * PyTorch's SGD with momentum and weight decay, g' = g + wd*w (weights
 * only), v = mu*v + g', w -= lr*v, over two updates (so momentum carries),
 * in fp32 and bf16 models (bf16 keeps fp32 masters: the same update).
 * Also: the accumulator empties on apply, apply with nothing accumulated
 * is refused, bad options are refused, and the bf16 weight copy follows
 * the masters after an update.
 *
 * Tolerance: every parameter and momentum within 1e-6 * (1 + |value|) of
 * the formula evaluated in double from the gradients the model reports
 * (the model rounds each operation in fp32).
 */
#include <errno.h>

#include "kn_util.h"

#define NL 2
#define BATCH 6
static const uint32_t dims[NL + 1] = { 10, 8, 4 };

static size_t total(void)
{
    size_t t = 0;

    for (int l = 0; l < NL; l++)
        t += (size_t)dims[l] * dims[l + 1] + dims[l + 1];
    return t;
}

/* Is element i of the flat array a weight (decayed) or a bias? */
static int is_weight(size_t i)
{
    size_t off = 0;

    for (int l = 0; l < NL; l++) {
        size_t nw = (size_t)dims[l] * dims[l + 1];

        if (i < off + nw)
            return 1;
        off += nw;
        if (i < off + dims[l + 1])
            return 0;
        off += dims[l + 1];
    }
    return 0;
}

/* After an update the accumulator must hold the new batch's gradient
 * alone: a fresh model given the same weights computes the same one. */
static void check_fresh(struct kn_ctx *ctx, const struct kn_model_desc *d,
                        const float *w, const float *g, void *dx, void *dy,
                        const char *pn, int step)
{
    size_t np = total(), off = 0;
    float *g2 = ku_alloc(sizeof(float) * np);
    struct kn_model *m2 = NULL;
    double e;

    if (kn_model_create(ctx, d, &m2) < 0) {
        printf("Bail out! %s\n", kn_errmsg(ctx));
        exit(1);
    }
    for (int l = 0; l < NL; l++) {
        size_t nw = (size_t)dims[l] * dims[l + 1];

        kn_model_write(m2, l, w + off, w + off + nw);
        off += nw + dims[l + 1];
    }
    kn_train_step(m2, NULL, dx, dy, BATCH, NULL, 0, NULL, NULL);
    ku_read_all(m2, KN_GRADS, dims, g2);
    e = ku_relerr(g, g2, np, 1e-6);
    if (!tap_ok(e <= 1e-6, "%s step %d: the gradient is the batch's alone "
                "(a fresh model with the same weights agrees)", pn, step + 1))
        tap_diag("  relative error %g", e);
    kn_model_destroy(m2);
    free(g2);
}

static void run(enum kn_dtype prec)
{
    const char *pn = prec == KN_F32 ? "fp32" : "bf16";
    struct kn_ctx *ctx = ku_open(KN_BACKEND_CPU);
    struct kn_model_desc d = { .dims = dims, .n_dims = NL + 1, .seed = 99,
                               .precision = prec, .max_batch = BATCH };
    struct kn_sgd o = { .lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f };
    struct kn_model *m = NULL;
    size_t np = total();
    float *w0 = ku_alloc(sizeof(float) * np);
    float *w1 = ku_alloc(sizeof(float) * np);
    float *g = ku_alloc(sizeof(float) * np), *v = ku_alloc(sizeof(float) * np);
    double *vref = ku_alloc(sizeof(double) * np);
    float x[BATCH * 10];
    uint16_t xb[BATCH * 10];
    int32_t y[BATCH] = { 0, 1, 2, 3, 1, 2 };
    void *dx, *dy;

    if (kn_model_create(ctx, &d, &m) < 0) {
        printf("Bail out! %s\n", kn_errmsg(ctx));
        exit(1);
    }
    ku_fill(x, BATCH * 10, 5, -1.0, 1.0);
    for (int i = 0; i < BATCH * 10; i++)
        xb[i] = kn_bf16_from_f32(x[i]);
    dx = prec == KN_F32 ? ku_upload(ctx, x, sizeof x)
                        : ku_upload(ctx, xb, sizeof xb);
    dy = ku_upload(ctx, y, sizeof y);

    TAP_IS_INT(kn_model_apply(m, NULL, &o), -EINVAL,
               "apply with nothing accumulated is -EINVAL");
    for (int step = 0; step < 2; step++) {
        size_t bad_w = 0, bad_v = 0;

        ku_read_all(m, KN_WEIGHTS, dims, w0);
        TAP_IS_INT(kn_train_step(m, NULL, dx, dy, BATCH, NULL, 0, NULL, NULL),
                   0, "accumulate");
        ku_read_all(m, KN_GRADS, dims, g);
        TAP_OK(ku_maxabs(g, np) > 0.0, "the gradient is not zero");
        check_fresh(ctx, &d, w0, g, dx, dy, pn, step);
        TAP_IS_INT(kn_model_apply(m, NULL, &o), 0, "kn_model_apply");
        ku_read_all(m, KN_WEIGHTS, dims, w1);
        ku_read_all(m, KN_MOMENTUM, dims, v);
        for (size_t i = 0; i < np; i++) {
            double gi = (double)g[i] +
                        (is_weight(i) ? (double)o.weight_decay * w0[i] : 0.0);
            double want;

            vref[i] = (double)o.momentum * vref[i] + gi;
            want = (double)w0[i] - (double)o.lr * vref[i];
            if (!(fabs(w1[i] - want) <= 1e-6 * (1.0 + fabs(want))))
                bad_w++;
            if (!(fabs(v[i] - vref[i]) <= 1e-6 * (1.0 + fabs(vref[i]))))
                bad_v++;
            vref[i] = v[i];     /* carry the model's rounding forward */
        }
        if (!tap_ok(bad_w == 0, "%s update %d: %zu parameters follow "
                    "w - lr*(mu*v + g + wd*w)", pn, step + 1, np))
            tap_diag("  %zu differ", bad_w);
        if (!tap_ok(bad_v == 0, "%s update %d: momentum buffers", pn,
                    step + 1))
            tap_diag("  %zu differ", bad_v);
        ku_read_all(m, KN_GRADS, dims, g);
        TAP_OK(ku_maxabs(g, np) == 0.0, "the accumulator is empty after "
               "the update");
    }
    TAP_IS_INT(kn_model_apply(m, NULL, &o), -EINVAL,
               "a second apply without a step is -EINVAL");

    /* The forward pass uses the updated weights (bf16: the refreshed
     * copy): forward with the model equals forward with a fresh model
     * given the same weights. */
    {
        struct kn_model *m2 = NULL;
        float l1[BATCH * 4], l2[BATCH * 4];
        void *dl = NULL;
        size_t off = 0;

        kn_model_create(ctx, &d, &m2);
        ku_read_all(m, KN_WEIGHTS, dims, w1);
        for (int l = 0; l < NL; l++) {
            size_t nw = (size_t)dims[l] * dims[l + 1];

            kn_model_write(m2, l, w1 + off, w1 + off + nw);
            off += nw + dims[l + 1];
        }
        kn_buf_alloc(ctx, sizeof l1, &dl);
        kn_forward(m, NULL, dx, BATCH, dl);
        ku_download(ctx, l1, dl, sizeof l1);
        kn_forward(m2, NULL, dx, BATCH, dl);
        ku_download(ctx, l2, dl, sizeof l2);
        TAP_OK(memcmp(l1, l2, sizeof l1) == 0, "after updates the forward "
               "pass uses the updated weights");
        kn_buf_free(ctx, dl);
        kn_model_destroy(m2);
    }

    o.momentum = 1.0f;
    TAP_IS_INT(kn_train_step(m, NULL, dx, dy, BATCH, &o, KN_STEP_APPLY, NULL,
                             NULL), -EINVAL, "momentum 1 is -EINVAL");
    o.momentum = 0.9f;
    o.lr = NAN;
    TAP_IS_INT(kn_train_step(m, NULL, dx, dy, BATCH, &o, KN_STEP_APPLY, NULL,
                             NULL), -EINVAL, "lr NaN is -EINVAL");
    TAP_IS_INT(kn_train_step(m, NULL, dx, dy, BATCH, NULL, KN_STEP_APPLY,
                             NULL, NULL), -EINVAL,
               "apply without options is -EINVAL");
    TAP_IS_INT(kn_train_step(m, NULL, dx, dy, BATCH, NULL, 4, NULL, NULL),
               -EINVAL, "unknown flag is -EINVAL");

    kn_buf_free(ctx, dx);
    kn_buf_free(ctx, dy);
    kn_model_destroy(m);
    kn_close(ctx);
    free(w0);
    free(w1);
    free(g);
    free(v);
    free(vref);
}

int main(void)
{
    run(KN_F32);
    run(KN_BF16);
    return tap_done();
}
