/*
 * train_step.c - one training or evaluation step of ringfeed-train on
 * backend memory, and the optimizer's schedule: normalize uint8 pixels
 * with kn_normalize (on the device, or the CPU twin), then kn_train_step
 * or kn_eval on the Fashion-MNIST MLP (kernels.h).
 *
 * The recipe (measured by the kernels' author on the CPU twin, kernels.h):
 * SGD with momentum 0.9 and weight decay 5e-4, lr 0.05 at batch 128,
 * decayed to 0 by a cosine over the whole run, counted in SGD updates.  A
 * constant lr plateaus near 88% test accuracy; the decay takes it past 89%
 * in 6 epochs and to 90% in 10.
 *
 * Gradient accumulation: --accum K runs K micro-batches of B samples, the
 * last with KN_STEP_APPLY, so one update uses the mean gradient over K*B
 * samples, as a batch of K*B would (kernels.h).  Groups are counted within
 * an epoch and the epoch's last batch closes the last group, so K x B cuts
 * an epoch into exactly the updates a batch of K*B would: the same samples,
 * in the same order, the same lr for each update.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train.h"

static int fail(struct tr_step *t, int rc, const char *what)
{
    snprintf(t->err, sizeof(t->err), "%s: %s", what, kn_errmsg(t->ctx));
    return rc;
}

int tr_step_open(struct tr_step *t, const struct tr_config *cfg)
{
    uint32_t dims[KN_FMNIST_NDIMS] = KN_FMNIST_DIMS;
    struct kn_model_desc d;
    uint32_t max_batch;
    size_t esz;
    int rc;

    memset(t, 0, sizeof(*t));
    t->cfg = *cfg;
    t->in = cfg->c * cfg->h * cfg->w;
    if (cfg->accum < 1 || cfg->batch < 1 || cfg->eval_batch < 1 || t->in < 1 ||
        cfg->c > KN_MAX_CHANNELS) {
        snprintf(t->err, sizeof(t->err), "bad step configuration");
        return -EINVAL;
    }
    rc = kn_open(&t->ctx, cfg->backend, NULL, t->err, sizeof(t->err));
    if (rc < 0)
        return rc;
    rc = kn_stream_create(t->ctx, &t->compute); /* on the CPU a placeholder */
    if (rc < 0)
        return fail(t, rc, "compute stream");
    dims[0] = t->in;
    dims[KN_FMNIST_NDIMS - 1] = TR_CLASSES;
    max_batch = cfg->batch > cfg->eval_batch ? cfg->batch : cfg->eval_batch;
    d = (struct kn_model_desc){
        .dims = dims,
        .n_dims = KN_FMNIST_NDIMS,
        .seed = cfg->seed,
        .precision = cfg->precision,
        .max_batch = max_batch,
    };
    rc = kn_model_create(t->ctx, &d, &t->model);
    if (rc < 0)
        return fail(t, rc, "creating the model");
    esz = cfg->precision == KN_BF16 ? sizeof(uint16_t) : sizeof(float);
    rc = kn_buf_alloc(t->ctx, (size_t)max_batch * t->in * esz, &t->x);
    if (rc < 0)
        return fail(t, rc, "allocating the input batch");
    return 0;
}

void tr_step_close(struct tr_step *t)
{
    if (!t->ctx)
        return;
    kn_sync(t->ctx);
    kn_buf_free(t->ctx, t->x);
    kn_model_destroy(t->model);
    kn_stream_destroy(t->compute);
    kn_close(t->ctx);
    t->ctx = NULL;
}

float tr_lr(float lr, uint64_t step, uint64_t total)
{
    if (total == 0 || step >= total)
        return 0.0f;
    return (float)((double)lr * 0.5 * (1.0 + cos(M_PI * (double)step / (double)total)));
}

int tr_group_ends(uint64_t seq, uint64_t bpe, uint32_t accum)
{
    return (seq + 1) % accum == 0 || seq + 1 >= bpe;
}

uint64_t tr_updates_per_epoch(uint64_t bpe, uint32_t accum)
{
    return (bpe + accum - 1) / accum;
}

static int normalize(struct tr_step *t, const uint8_t *raw, uint32_t n)
{
    struct kn_norm p = {
        .n = n,
        .c = t->cfg.c,
        .h = t->cfg.h,
        .w = t->cfg.w,
        .layout = t->cfg.layout,
        .out = t->cfg.precision,
    };
    int rc;

    for (uint32_t i = 0; i < p.c; i++) {
        p.mean[i] = t->cfg.mean;
        p.std[i] = t->cfg.std;
    }
    rc = kn_normalize(t->ctx, t->compute, &p, raw, t->x);
    return rc < 0 ? fail(t, rc, "kn_normalize") : 0;
}

int tr_step_input(struct tr_step *t, const uint8_t *raw, uint32_t n, int eval)
{
    uint32_t max = eval ? t->cfg.eval_batch : t->cfg.batch;

    if (n < 1 || n > max) {
        snprintf(t->err, sizeof(t->err), "%s batch of %u samples (1..%u)",
                 eval ? "an evaluation" : "a training", n, max);
        return -EINVAL;
    }
    return normalize(t, raw, n);
}

int tr_step_learn(struct tr_step *t, const int32_t *labels, uint32_t n, int apply)
{
    struct kn_sgd o = {
        .lr = tr_lr(t->cfg.lr, t->step, t->cfg.total_steps),
        .momentum = t->cfg.momentum,
        .weight_decay = t->cfg.weight_decay,
    };
    int rc;

    rc = kn_train_step(t->model, t->compute, t->x, labels, n, apply ? &o : NULL,
                       apply ? KN_STEP_APPLY : 0, NULL, NULL);
    if (rc < 0)
        return fail(t, rc, "kn_train_step");
    t->micro++;
    if (apply) {
        t->step++;
        t->micro = 0;
    }
    return 0;
}

int tr_step_score(struct tr_step *t, const int32_t *labels, uint32_t n)
{
    int rc = kn_eval(t->model, t->compute, t->x, labels, n, NULL, NULL);

    return rc < 0 ? fail(t, rc, "kn_eval") : 0;
}

int tr_step_train(struct tr_step *t, const uint8_t *raw, const int32_t *labels, uint32_t n,
                  int apply)
{
    int rc = tr_step_input(t, raw, n, 0);

    return rc < 0 ? rc : tr_step_learn(t, labels, n, apply);
}

int tr_step_metrics(struct tr_step *t, enum kn_phase phase, struct kn_metrics *out)
{
    int rc = kn_model_metrics(t->model, t->compute, phase, 1, out);

    return rc < 0 ? fail(t, rc, "kn_model_metrics") : 0;
}
