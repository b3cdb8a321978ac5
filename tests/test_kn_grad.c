/*
 * test_kn_grad.c - the CPU MLP's forward and backward against a reference
 * written here in double: loss and logits against a double forward pass,
 * every weight and bias gradient against central finite differences of the
 * double loss, on a 12-7-5-3 MLP with a batch of 4 (fp32); then the bf16
 * path's forward against a double forward over bf16-rounded inputs and
 * weights, and its gradients against the fp32 path's.
 *
 * Tolerances (stated, and met with margin by a correct implementation):
 *  - loss: |kn - ref| <= 1e-5 * (1 + |ref|); logits: <= 1e-5 relative to
 *    the largest logit.
 *  - gradients: |analytic - numeric| <= 1e-4 * max(|analytic|, |numeric|)
 *    + 1e-6 for every single parameter; the numeric gradient is a central
 *    difference in double with h = 1e-6, accurate to ~1e-10, so the error
 *    measured is the fp32 analytic gradient's.  The inputs are chosen so no
 *    pre-activation lies within 1e-4 of the ReLU kink (checked), where a
 *    finite difference would straddle it.
 *  - bf16 forward: logits within 1e-5 (relative to the largest) of a double
 *    forward whose input, weights and hidden activations are bf16-rounded
 *    the same way; bf16 gradients within 3e-2 (relative to each tensor's
 *    largest) of the fp32 gradients.
 */
#include <errno.h>

#include "kn_util.h"

#define NL 3
#define BATCH 4
static const uint32_t dims[NL + 1] = { 12, 7, 5, 3 };

/* Flat double parameters in the model's order: W_0, b_0, W_1, b_1, ... */
static size_t woff[NL], boff[NL], nparams;

static void offsets(void)
{
    size_t off = 0;

    for (int l = 0; l < NL; l++) {
        woff[l] = off;
        off += (size_t)dims[l] * dims[l + 1];
        boff[l] = off;
        off += dims[l + 1];
    }
    nparams = off;
}

static double round_bf16(double v)
{
    return kn_f32_from_bf16(kn_bf16_from_f32((float)v));
}

/*
 * Double forward: returns the mean loss, fills logits [BATCH][3] when not
 * NULL and the smallest |pre-activation| of the hidden layers in *kink.
 * With bf16, the GEMM inputs are rounded as the bf16 path rounds them.
 */
static double ref_forward(const double *p, const float *x, const int32_t *y,
                          int bf16, double *logits, double *kink)
{
    double a[BATCH][16], z[BATCH][16], loss = 0.0;
    uint32_t width = dims[0];

    if (kink)
        *kink = INFINITY;
    for (int i = 0; i < BATCH; i++)
        for (uint32_t k = 0; k < dims[0]; k++)
            a[i][k] = bf16 ? round_bf16(x[i * dims[0] + k])
                           : x[i * dims[0] + k];
    for (int l = 0; l < NL; l++) {
        uint32_t in = dims[l], out = dims[l + 1];

        for (int i = 0; i < BATCH; i++)
            for (uint32_t o = 0; o < out; o++) {
                double s = 0.0;

                for (uint32_t k = 0; k < in; k++) {
                    double w = p[woff[l] + o * in + k];

                    s += (bf16 ? round_bf16(w) : w) * a[i][k];
                }
                z[i][o] = s + p[boff[l] + o];
            }
        for (int i = 0; i < BATCH; i++)
            for (uint32_t o = 0; o < out; o++) {
                if (l + 1 == NL) {
                    a[i][o] = z[i][o];
                    continue;
                }
                if (kink && fabs(z[i][o]) < *kink)
                    *kink = fabs(z[i][o]);
                a[i][o] = z[i][o] > 0 ? z[i][o] : 0.0;
                if (bf16)
                    a[i][o] = round_bf16(a[i][o]);
            }
        width = out;
    }
    for (int i = 0; i < BATCH; i++) {
        double mx = a[i][0], s = 0.0;

        for (uint32_t j = 0; j < width; j++)
            mx = a[i][j] > mx ? a[i][j] : mx;
        for (uint32_t j = 0; j < width; j++)
            s += exp(a[i][j] - mx);
        loss += log(s) + mx - a[i][y[i]];
        for (uint32_t j = 0; logits && j < width; j++)
            logits[i * width + j] = a[i][j];
    }
    return loss / BATCH;
}

static struct kn_model *make_model(struct kn_ctx *ctx, enum kn_dtype prec)
{
    struct kn_model_desc d = { .dims = dims, .n_dims = NL + 1, .seed = 7,
                               .precision = prec, .max_batch = BATCH };
    struct kn_model *m = NULL;

    if (kn_model_create(ctx, &d, &m) < 0) {
        printf("Bail out! kn_model_create: %s\n", kn_errmsg(ctx));
        exit(1);
    }
    return m;
}

/* Runs one accumulate-only step of the batch; returns its loss. */
static float grad_step(struct kn_ctx *ctx, struct kn_model *m, const void *x,
                       size_t xbytes, const int32_t *y)
{
    void *dx = ku_upload(ctx, x, xbytes);
    void *dy = ku_upload(ctx, y, sizeof(int32_t) * BATCH);
    float loss = NAN;
    int32_t correct = -1;
    int rc = kn_train_step(m, NULL, dx, dy, BATCH, NULL, 0, &loss, &correct);

    TAP_IS_INT(rc, 0, "kn_train_step without apply returns 0");
    TAP_OK(correct >= 0 && correct <= BATCH, "correct count is in range");
    kn_buf_free(ctx, dx);
    kn_buf_free(ctx, dy);
    return loss;
}

int main(void)
{
    struct kn_ctx *ctx = ku_open(KN_BACKEND_CPU);
    struct kn_model *m32, *m16;
    float x[BATCH * 12], *w, *g32, *g16;
    uint16_t xb[BATCH * 12];
    int32_t y[BATCH] = { 0, 2, 1, 2 };
    double *p, kink, ref, logits_ref[BATCH * 3];
    float logits[BATCH * 3];
    float loss32, loss16;
    void *dx, *dlog;

    offsets();
    ku_fill(x, BATCH * 12, 3, -1.0, 1.0);
    for (int i = 0; i < BATCH * 12; i++)
        xb[i] = kn_bf16_from_f32(x[i]);

    m32 = make_model(ctx, KN_F32);
    TAP_IS_INT(kn_model_params(m32), 12 * 7 + 7 + 7 * 5 + 5 + 5 * 3 + 3,
               "parameter count of 12-7-5-3");
    w = ku_alloc(sizeof(float) * nparams);
    g32 = ku_alloc(sizeof(float) * nparams);
    g16 = ku_alloc(sizeof(float) * nparams);
    p = ku_alloc(sizeof(double) * nparams);
    ku_read_all(m32, KN_WEIGHTS, dims, w);
    /* Non-zero biases, so that their use in the forward pass is tested. */
    for (int l = 0; l < NL; l++) {
        ku_fill(w + boff[l], dims[l + 1], 100 + l, -0.2, 0.2);
        TAP_IS_INT(kn_model_write(m32, l, NULL, w + boff[l]), 0,
                   "kn_model_write biases");
    }
    for (size_t i = 0; i < nparams; i++)
        p[i] = w[i];

    ref = ref_forward(p, x, y, 0, logits_ref, &kink);
    if (!tap_ok(kink > 1e-4, "no hidden pre-activation within 1e-4 of the "
                "ReLU kink (finite differences are valid)"))
        tap_diag("  closest %g", kink);

    /* Forward alone, then loss and gradients. */
    dx = ku_upload(ctx, x, sizeof x);
    TAP_IS_INT(kn_buf_alloc(ctx, sizeof logits, &dlog), 0, "logit buffer");
    TAP_IS_INT(kn_forward(m32, NULL, dx, BATCH, dlog), 0, "kn_forward");
    ku_download(ctx, logits, dlog, sizeof logits);
    {
        float lr[BATCH * 3];

        for (int i = 0; i < BATCH * 3; i++)
            lr[i] = (float)logits_ref[i];
        double e = ku_relerr(logits, lr, BATCH * 3, 1e-3);
        if (!tap_ok(e <= 1e-5, "fp32 logits match the double forward"))
            tap_diag("  relative error %g", e);
    }
    loss32 = grad_step(ctx, m32, x, sizeof x, y);
    if (!tap_ok(fabs(loss32 - ref) <= 1e-5 * (1 + fabs(ref)),
                "fp32 loss matches the double forward"))
        tap_diag("  kn %.9g, reference %.9g", loss32, ref);
    {
        void *dy = ku_upload(ctx, y, sizeof y);
        float el = NAN;
        int32_t ec;

        TAP_IS_INT(kn_eval(m32, NULL, dx, dy, BATCH, &el, &ec), 0,
                   "kn_eval");
        TAP_OK(el == loss32, "kn_eval's loss is the training step's loss");
        kn_buf_free(ctx, dy);
    }
    kn_buf_free(ctx, dx);

    /* Every gradient against a central difference of the double loss. */
    ku_read_all(m32, KN_GRADS, dims, g32);
    for (int l = 0; l < NL; l++) {
        for (int part = 0; part < 2; part++) {
            size_t off = part ? boff[l] : woff[l];
            size_t cnt = part ? dims[l + 1] : (size_t)dims[l] * dims[l + 1];
            size_t bad = 0;
            double worst = 0.0;

            for (size_t i = off; i < off + cnt; i++) {
                const double h = 1e-6;
                double keep = p[i], num, an = g32[i], err, tol;

                p[i] = keep + h;
                num = ref_forward(p, x, y, 0, NULL, NULL);
                p[i] = keep - h;
                num = (num - ref_forward(p, x, y, 0, NULL, NULL)) / (2 * h);
                p[i] = keep;
                err = fabs(an - num);
                tol = 1e-4 * fmax(fabs(an), fabs(num)) + 1e-6;
                if (!(err <= tol))
                    bad++;
                if (err / (fabs(num) + 1e-6) > worst)
                    worst = err / (fabs(num) + 1e-6);
            }
            if (!tap_ok(bad == 0, "layer %d %s: %zu gradients within 1e-4 "
                        "relative of finite differences", l,
                        part ? "biases" : "weights", cnt))
                tap_diag("  %zu out of tolerance", bad);
            tap_diag("  worst |analytic - numeric| / (|numeric| + 1e-6): %g",
                     worst);
        }
    }

    /* bf16: same weights, bf16 input. */
    m16 = make_model(ctx, KN_BF16);
    for (int l = 0; l < NL; l++)
        TAP_IS_INT(kn_model_write(m16, l, w + woff[l], w + boff[l]), 0,
                   "kn_model_write into the bf16 model");
    {
        void *dxb = ku_upload(ctx, xb, sizeof xb);
        float lr[BATCH * 3];
        double e;

        ref_forward(p, x, y, 1, logits_ref, NULL);
        TAP_IS_INT(kn_forward(m16, NULL, dxb, BATCH, dlog), 0,
                   "kn_forward bf16");
        ku_download(ctx, logits, dlog, sizeof logits);
        for (int i = 0; i < BATCH * 3; i++)
            lr[i] = (float)logits_ref[i];
        e = ku_relerr(logits, lr, BATCH * 3, 1e-3);
        if (!tap_ok(e <= 1e-5, "bf16 logits match a double forward over "
                    "bf16-rounded input, weights and activations"))
            tap_diag("  relative error %g", e);
        ref_forward(p, x, y, 0, logits_ref, NULL);
        for (int i = 0; i < BATCH * 3; i++)
            lr[i] = (float)logits_ref[i];
        e = ku_relerr(logits, lr, BATCH * 3, 1e-3);
        if (!tap_ok(e > 1e-5, "bf16 logits differ from the unrounded "
                    "forward (the rounding happens)"))
            tap_diag("  relative error %g", e);
        kn_buf_free(ctx, dxb);
    }
    loss16 = grad_step(ctx, m16, xb, sizeof xb, y);
    if (!tap_ok(fabs(loss16 - loss32) <= 2e-2 * (1 + fabs(loss32)),
                "bf16 loss within 2e-2 of fp32"))
        tap_diag("  bf16 %g fp32 %g", loss16, loss32);
    ku_read_all(m16, KN_GRADS, dims, g16);
    for (int l = 0; l < NL; l++) {
        double ew = ku_relerr(g16 + woff[l], g32 + woff[l],
                              (size_t)dims[l] * dims[l + 1], 1e-6);
        double eb = ku_relerr(g16 + boff[l], g32 + boff[l], dims[l + 1],
                              1e-6);

        if (!tap_ok(ew <= 3e-2 && eb <= 3e-2, "layer %d bf16 gradients "
                    "within 3e-2 of fp32", l))
            tap_diag("  weights %g, biases %g", ew, eb);
    }

    kn_buf_free(ctx, dlog);
    kn_model_destroy(m16);
    kn_model_destroy(m32);
    kn_close(ctx);
    free(w);
    free(g32);
    free(g16);
    free(p);
    return tap_done();
}
