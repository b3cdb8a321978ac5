/*
 * test_kn_accum.c - gradient accumulation on the CPU: K micro-batches of B
 * samples accumulated and then applied equal one step over the K*B samples,
 * over three updates (so momentum and weight decay take part), for fp32
 * and bf16; and the same with micro-batches of unequal sizes (5 + 11 + 16).
 * A model stepped K times with an update every step must differ (the test
 * can tell accumulation from plain steps).
 *
 * Tolerance: parameters within 1e-5 of each other relative to the largest
 * parameter, the mean gradient before an update within 1e-5 relative to
 * the largest gradient, and the batch loss (the micro-batch losses weighted
 * by their sizes) within 1e-6 relative.  Only the order of fp32 summation
 * differs between the two ways.
 */
#include <errno.h>

#include "kn_util.h"

#define NL 3
#define K 4
#define B 8
static const uint32_t dims[NL + 1] = { 20, 16, 12, 5 };

static size_t total(void)
{
    size_t t = 0;

    for (int l = 0; l < NL; l++)
        t += (size_t)dims[l] * dims[l + 1] + dims[l + 1];
    return t;
}

static struct kn_model *make(struct kn_ctx *ctx, enum kn_dtype prec)
{
    struct kn_model_desc d = { .dims = dims, .n_dims = NL + 1, .seed = 5,
                               .precision = prec, .max_batch = K * B };
    struct kn_model *m = NULL;

    if (kn_model_create(ctx, &d, &m) < 0) {
        printf("Bail out! %s\n", kn_errmsg(ctx));
        exit(1);
    }
    return m;
}

/* One round: `parts` micro-batches of the sizes given over the round's
 * K*B samples (x rows of esz bytes); returns the size-weighted mean loss. */
static double round_micro(struct kn_model *m, const char *x, size_t row,
                          const int32_t *y, const uint32_t *sizes, int parts,
                          const struct kn_sgd *o, float *gmean)
{
    double lsum = 0.0;
    uint32_t at = 0;

    for (int p = 0; p < parts; p++) {
        float loss = NAN;

        TAP_IS_INT(kn_train_step(m, NULL, x + at * row, y + at, sizes[p],
                                 NULL, 0, &loss, NULL), 0,
                   "accumulate a micro-batch");
        lsum += (double)loss * sizes[p];
        at += sizes[p];
    }
    ku_read_all(m, KN_GRADS, dims, gmean);
    TAP_IS_INT(kn_model_apply(m, NULL, o), 0, "apply the accumulated "
               "gradient");
    return lsum / at;
}

static void run(enum kn_dtype prec, const uint32_t *sizes, int parts,
                const char *what)
{
    const char *pn = prec == KN_F32 ? "fp32" : "bf16";
    struct kn_ctx *ctx = ku_open(KN_BACKEND_CPU);
    struct kn_model *ma = make(ctx, prec), *mb = make(ctx, prec);
    struct kn_model *mc = make(ctx, prec);
    struct kn_sgd o = { .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f };
    size_t np = total(), row, n = K * B * dims[0];
    float *xf = ku_alloc(sizeof(float) * n * 3);
    uint16_t *xb = ku_alloc(sizeof(uint16_t) * n * 3);
    int32_t y[3 * K * B];
    float *pa = ku_alloc(sizeof(float) * np);
    float *pb = ku_alloc(sizeof(float) * np);
    float *ga = ku_alloc(sizeof(float) * np);
    float *gb = ku_alloc(sizeof(float) * np);
    char *x;

    ku_fill(xf, n * 3, 17, -1.0, 1.0);
    for (size_t i = 0; i < n * 3; i++)
        xb[i] = kn_bf16_from_f32(xf[i]);
    for (int i = 0; i < 3 * K * B; i++)
        y[i] = (int32_t)(ku_mix((uint64_t)i) % dims[NL]);
    row = dims[0] * (prec == KN_F32 ? sizeof(float) : sizeof(uint16_t));
    x = prec == KN_F32 ? (char *)xf : (char *)xb;
    /* The CPU backend's memory is host memory: the arrays serve directly. */

    for (int r = 0; r < 3; r++) {
        const char *xr = x + (size_t)r * K * B * row;
        const int32_t *yr = y + r * K * B;
        double la, lb;
        float loss = NAN;
        double eg, ep;

        la = round_micro(ma, xr, row, yr, sizes, parts, &o, ga);
        TAP_IS_INT(kn_train_step(mb, NULL, xr, yr, K * B, NULL, 0, &loss,
                                 NULL), 0, "one step over K*B");
        ku_read_all(mb, KN_GRADS, dims, gb);
        TAP_IS_INT(kn_model_apply(mb, NULL, &o), 0, "apply");
        lb = loss;
        for (int p = 0, at = 0; p < K; p++, at += B)
            kn_train_step(mc, NULL, xr + at * row, yr + at, B, &o,
                          KN_STEP_APPLY, NULL, NULL);

        eg = ku_relerr(ga, gb, np, 1e-6);
        if (!tap_ok(eg <= 1e-5, "%s %s round %d: accumulated mean gradient "
                    "equals the K*B batch's", pn, what, r + 1))
            tap_diag("  relative error %g", eg);
        if (!tap_ok(fabs(la - lb) <= 1e-6 * fabs(lb), "%s %s round %d: "
                    "size-weighted micro-batch loss equals the batch loss",
                    pn, what, r + 1))
            tap_diag("  %.9g vs %.9g", la, lb);
        ku_read_all(ma, KN_WEIGHTS, dims, pa);
        ku_read_all(mb, KN_WEIGHTS, dims, pb);
        ep = ku_relerr(pa, pb, np, 1e-6);
        if (!tap_ok(ep <= 1e-5, "%s %s round %d: parameters after the "
                    "update equal", pn, what, r + 1))
            tap_diag("  relative error %g", ep);
    }
    ku_read_all(mc, KN_WEIGHTS, dims, pa);
    TAP_OK(ku_relerr(pa, pb, np, 1e-6) > 1e-3, "updating after every "
           "micro-batch gives different weights (the check can fail)");

    kn_model_destroy(ma);
    kn_model_destroy(mb);
    kn_model_destroy(mc);
    kn_close(ctx);
    free(xf);
    free(xb);
    free(pa);
    free(pb);
    free(ga);
    free(gb);
}

int main(void)
{
    static const uint32_t even[K] = { B, B, B, B };
    static const uint32_t uneven[3] = { 5, 11, 16 };

    run(KN_F32, even, K, "4 x 8");
    run(KN_BF16, even, K, "4 x 8");
    run(KN_F32, uneven, 3, "5 + 11 + 16");
    run(KN_BF16, uneven, 3, "5 + 11 + 16");
    return tap_done();
}
