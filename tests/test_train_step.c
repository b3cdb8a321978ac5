/*
 * test_train_step.c - ringfeed-train's step (examples/train_step.c) on the
 * CPU twin, without a ring: the cosine schedule, the accumulation groups,
 * and that --accum 2 --batch B trains the same model as --batch 2B.
 *
 * The accumulation check runs two epochs of 9.5 batches of 2B samples
 * (the last partial, as a real epoch's last batch is) through the trainer's
 * own step, group and lr functions both ways, over uint8 images normalized
 * by the step as the trainer does, and compares every parameter afterwards
 * (within 1e-5 of the largest, as test_kn_accum: only the order of fp32
 * sums differs) and the training loss (1e-5 relative).  A third run with
 * an update after every batch of B must differ, so the check can tell.
 * Nothing is timed.
 */
#include <errno.h>

#include "kn_util.h"
#include "train.h"

#define SIDE 8
#define NPIX (SIDE * SIDE)
#define B 16
#define NSAMP (19 * B / 2) /* 9.5 batches of 2B */
#define EPOCHS 2

static uint8_t g_img[NSAMP * NPIX];
static int32_t g_lab[NSAMP];

static void make_data(void)
{
    for (int i = 0; i < NSAMP; i++) {
        g_lab[i] = (int32_t)(ku_mix(77 + (uint64_t)i) % TR_CLASSES);
        for (int p = 0; p < NPIX; p++)
            g_img[i * NPIX + p] = (uint8_t)((ku_mix((uint64_t)i * 1000 + (uint64_t)p) & 127) +
                                            (p % TR_CLASSES == g_lab[i] ? 100 : 0));
    }
}

static struct tr_config config(uint32_t batch, uint32_t accum, uint64_t total)
{
    return (struct tr_config){
        .backend = KN_BACKEND_CPU,
        .precision = KN_F32,
        .batch = batch,
        .eval_batch = batch,
        .accum = accum,
        .lr = 0.05f,
        .momentum = 0.9f,
        .weight_decay = 5e-4f,
        .seed = 3,
        .total_steps = total,
        .c = 1, .h = SIDE, .w = SIDE,
        .layout = KN_CHW,
        .mean = 0.3f, .std = 0.3f,
    };
}

/* Trains EPOCHS epochs with batches of `batch` and groups of `accum`, as
 * ringfeed-train's loop does; returns the flat parameters (malloc'd) and
 * the mean training loss of the last epoch. */
static float *train(uint32_t batch, uint32_t accum, double *loss, size_t *np)
{
    uint64_t bpe = (NSAMP + batch - 1) / batch;
    struct tr_config cfg = config(batch, accum, EPOCHS * tr_updates_per_epoch(bpe, accum));
    struct kn_metrics met;
    struct tr_step t;
    uint32_t dims[KN_FMNIST_NDIMS] = KN_FMNIST_DIMS;
    int32_t *lab;
    float *params;
    size_t at = 0;
    int ok = 1;

    if (tr_step_open(&t, &cfg) < 0) {
        printf("Bail out! %s\n", t.err);
        exit(1);
    }
    lab = ku_upload(t.ctx, g_lab, sizeof(g_lab));
    for (int e = 0; e < EPOCHS; e++) {
        for (uint64_t s = 0; s < bpe; s++) {
            uint32_t n = (uint32_t)(s + 1 < bpe ? batch : NSAMP - s * batch);

            ok &= tr_step_train(&t, g_img + s * batch * NPIX, lab + s * batch, n,
                                tr_group_ends(s, bpe, accum)) == 0;
        }
        ok &= tr_step_metrics(&t, KN_TRAIN, &met) == 0;
    }
    tap_ok(ok, "batch %u accum %u: %llu updates over %d epochs", batch, accum,
           (unsigned long long)t.step, EPOCHS);
    TAP_IS_INT(t.step, cfg.total_steps, "  the schedule's every update was made");
    *loss = met.loss_sum / (double)met.samples;
    dims[0] = NPIX;
    *np = 0;
    for (int l = 0; l < KN_FMNIST_NDIMS - 1; l++)
        *np += (size_t)dims[l] * dims[l + 1] + dims[l + 1];
    params = ku_alloc(sizeof(float) * *np);
    for (int l = 0; l < KN_FMNIST_NDIMS - 1; l++) {
        size_t nw = (size_t)dims[l] * dims[l + 1];

        kn_model_read(t.model, KN_WEIGHTS, (uint32_t)l, params + at, params + at + nw);
        at += nw + dims[l + 1];
    }
    kn_buf_free(t.ctx, lab);
    tr_step_close(&t);
    return params;
}

static void schedule(void)
{
    float prev = 1.0f;
    int mono = 1;

    TAP_OK(tr_lr(0.05f, 0, 100) == 0.05f, "tr_lr: the first update uses the peak lr");
    TAP_OK(fabsf(tr_lr(0.05f, 50, 100) - 0.025f) < 1e-7f, "  half of it half way");
    TAP_OK(tr_lr(0.05f, 100, 100) == 0.0f && tr_lr(0.05f, 7, 0) == 0.0f,
           "  0 at the end (and for an empty schedule)");
    for (uint64_t s = 0; s < 100; s++) {
        float lr = tr_lr(0.05f, s, 100);

        mono &= lr <= prev && lr > 0.0f;
        prev = lr;
    }
    TAP_OK(mono, "  decreasing and positive over the run");

    TAP_OK(tr_group_ends(0, 5, 1) && tr_group_ends(3, 5, 1), "accum 1: every batch updates");
    TAP_OK(!tr_group_ends(0, 5, 2) && tr_group_ends(1, 5, 2) && !tr_group_ends(2, 5, 2) &&
               tr_group_ends(3, 5, 2) && tr_group_ends(4, 5, 2),
           "accum 2 over 5 batches: updates after 2, 4 and the last");
    TAP_IS_INT(tr_updates_per_epoch(469, 1), 469, "469 batches: 469 updates");
    TAP_IS_INT(tr_updates_per_epoch(938, 2), 469, "938 batches, accum 2: 469 updates");
    TAP_IS_INT(tr_updates_per_epoch(5, 2), 3, "5 batches, accum 2: 3 updates");
}

static void limits(void)
{
    struct tr_config cfg = config(B, 1, 1);
    struct tr_step t;

    TAP_IS_INT(tr_step_open(&t, &cfg), 0, "tr_step_open on the CPU");
    TAP_IS_INT(tr_step_input(&t, g_img, B + 1, 0), -EINVAL, "a batch over --batch: -EINVAL");
    TAP_OK(strstr(t.err, "training batch"), "  saying which");
    tr_step_close(&t);
    cfg.accum = 0;
    TAP_IS_INT(tr_step_open(&t, &cfg), -EINVAL, "accum 0: -EINVAL");
    tr_step_close(&t);
}

int main(void)
{
    double la, lb, lc;
    size_t np;
    float *a, *b, *c;

    make_data();
    schedule();
    limits();
    a = train(2 * B, 1, &la, &np);
    b = train(B, 2, &lb, &np);
    c = train(B, 1, &lc, &np);
    tap_diag("loss: batch 2B %.7f, B x accum 2 %.7f, B %.7f; weights relerr %.2e (B: %.2e)",
             la, lb, lc, ku_relerr(b, a, np, 1e-3), ku_relerr(c, a, np, 1e-3));
    TAP_OK(ku_relerr(b, a, np, 1e-3) < 1e-5,
           "accum 2 x batch B trains the same weights as batch 2B");
    TAP_OK(fabs(lb - la) <= 1e-5 * fabs(la), "  and the same training loss");
    TAP_OK(ku_relerr(c, a, np, 1e-3) > 1e-3, "batch B without accumulation differs (the check "
           "can tell)");
    free(a);
    free(b);
    free(c);
    return tap_done();
}
