/*
 * test_kn_train.c - a short CPU training run on synthetic separable data,
 * through the whole path a trainer takes: uint8 images -> kn_normalize ->
 * kn_train_step / kn_eval, in fp32 and bf16.
 *
 * Data: 8x8 one-channel images of 4 classes; class k is bright in quadrant
 * k (mean 150) and dark elsewhere (mean 100), with noise of standard
 * deviation 60 per pixel, so single pixels are unreliable but the quadrant
 * averages separate the classes (a few percent overlap).  1024 training
 * and 512 held-out images, MLP 64-32-4.
 *
 * Checks (not timed): before training the held-out accuracy is near chance
 * (< 50%); after 6 epochs the held-out accuracy is >= 90% and the mean
 * held-out loss fell below half its start; the running training metrics
 * count every sample and report a loss that fell from the first epoch to
 * the last.
 */
#include <errno.h>

#include "kn_util.h"

#define SIDE 8
#define NPIX (SIDE * SIDE)
#define NTRAIN 1024
#define NTEST 512
#define BATCH 32
#define EPOCHS 6

static const uint32_t dims[3] = { NPIX, 32, 4 };

static void make_images(uint8_t *img, int32_t *y, int n, uint64_t key)
{
    for (int i = 0; i < n; i++) {
        int k = (int)(ku_mix(key + (uint64_t)i) % 4);

        y[i] = k;
        for (int p = 0; p < NPIX; p++) {
            int r = p / SIDE, c = p % SIDE;
            int q = (r >= SIDE / 2) * 2 + (c >= SIDE / 2);
            double v = (q == k ? 150.0 : 100.0) +
                       60.0 * ku_normal(key * 7919 + 1, (uint64_t)i * NPIX + p);

            img[i * NPIX + p] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
}

/* Held-out accuracy and mean loss. */
static void evaluate(struct kn_model *m, const char *x, size_t row,
                     const int32_t *y, double *acc, double *loss)
{
    struct kn_metrics met;

    for (int at = 0; at < NTEST; at += BATCH)
        if (kn_eval(m, NULL, x + at * row, y + at, BATCH, NULL, NULL) < 0) {
            printf("Bail out! kn_eval failed\n");
            exit(1);
        }
    kn_model_metrics(m, NULL, KN_EVAL, 1, &met);
    *acc = (double)met.correct / (double)met.samples;
    *loss = met.loss_sum / (double)met.samples;
}

static void run(enum kn_dtype prec)
{
    const char *pn = prec == KN_F32 ? "fp32" : "bf16";
    struct kn_ctx *ctx = ku_open(KN_BACKEND_CPU);
    struct kn_model_desc d = { .dims = dims, .n_dims = 3, .seed = 1,
                               .precision = prec, .max_batch = BATCH };
    struct kn_norm np = { .c = 1, .h = SIDE, .w = SIDE, .layout = KN_HWC,
                          .out = prec, .mean = { 0.45f }, .std = { 0.25f } };
    struct kn_sgd o = { .lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f };
    size_t esz = prec == KN_F32 ? sizeof(float) : sizeof(uint16_t);
    size_t row = NPIX * esz;
    uint8_t *tr = ku_alloc(NTRAIN * NPIX), *te = ku_alloc(NTEST * NPIX);
    int32_t *ytr = ku_alloc(sizeof(int32_t) * NTRAIN);
    int32_t *yte = ku_alloc(sizeof(int32_t) * NTEST);
    char *xtr = ku_alloc(NTRAIN * row), *xte = ku_alloc(NTEST * row);
    struct kn_model *m = NULL;
    struct kn_metrics met;
    double acc0, loss0, acc1, loss1, first_loss = 0, last_loss = 0;

    make_images(tr, ytr, NTRAIN, 1000);
    make_images(te, yte, NTEST, 2000);
    np.n = NTRAIN;
    TAP_IS_INT(kn_normalize(ctx, NULL, &np, tr, xtr), 0, "normalize train");
    np.n = NTEST;
    TAP_IS_INT(kn_normalize(ctx, NULL, &np, te, xte), 0, "normalize test");
    if (kn_model_create(ctx, &d, &m) < 0) {
        printf("Bail out! %s\n", kn_errmsg(ctx));
        exit(1);
    }

    evaluate(m, xte, row, yte, &acc0, &loss0);
    for (int e = 0; e < EPOCHS; e++) {
        for (int at = 0; at < NTRAIN; at += BATCH)
            if (kn_train_step(m, NULL, xtr + at * row, ytr + at, BATCH, &o,
                              KN_STEP_APPLY, NULL, NULL) < 0) {
                printf("Bail out! %s\n", kn_errmsg(ctx));
                exit(1);
            }
        kn_model_metrics(m, NULL, KN_TRAIN, 1, &met);
        TAP_IS_INT(met.samples, NTRAIN, "the training metrics count every "
                   "sample of the epoch");
        if (e == 0)
            first_loss = met.loss_sum / (double)met.samples;
        last_loss = met.loss_sum / (double)met.samples;
        tap_diag("%s epoch %d: train loss %.4f, accuracy %.3f", pn, e + 1,
                 last_loss, (double)met.correct / (double)met.samples);
    }
    evaluate(m, xte, row, yte, &acc1, &loss1);
    tap_diag("%s held-out: accuracy %.3f -> %.3f, loss %.4f -> %.4f", pn,
             acc0, acc1, loss0, loss1);
    TAP_OK(acc0 < 0.5, "before training the accuracy is near chance");
    TAP_OK(acc1 >= 0.90, "after training the held-out accuracy >= 90%");
    TAP_OK(loss1 < 0.5 * loss0, "the held-out loss fell below half");
    TAP_OK(last_loss < first_loss, "the training loss fell from the first "
           "epoch to the last");

    kn_model_destroy(m);
    kn_close(ctx);
    free(tr);
    free(te);
    free(ytr);
    free(yte);
    free(xtr);
    free(xte);
}

int main(void)
{
    run(KN_F32);
    run(KN_BF16);
    return tap_done();
}
