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
 *
 * Ranks (data parallel, train_comm.h): every rank starts from rank 0's
 * weights (broadcast after creation) and each update uses the gradient
 * summed over the ranks, one all-reduce of the model's one contiguous
 * gradient buffer, started on the applying micro-batch only (so --accum K
 * composes: K local micro-batches, then one all-reduce), divided by the
 * job's sample count.  The update is left pending until the next step
 * needs the weights (tr_step_settle), so the caller can take the next
 * batch while the all-reduce runs.  R ranks at batch B make the updates
 * one rank at batch R*B makes: the same samples (libringfeed deals an
 * epoch's order round robin), the same lr, the mean gradient up to fp32
 * summation order.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train.h"

static int fail(struct tr_step *t, int rc, const char *what)
{
    snprintf(t->err, sizeof(t->err), "%s: %s", what, kn_errmsg(t->ctx));
    return rc;
}

static int world(const struct tr_step *t)
{
    return t->cfg.comm ? t->cfg.comm->world : 1;
}

/* Ranks > 1: every rank takes rank 0's initial weights (the same seed
 * gives the same ones; the broadcast makes it so whatever the seeds). */
static int share_weights(struct tr_step *t, const uint32_t *dims)
{
    size_t n = kn_model_params(t->model), off = 0;
    float *all;
    int rc = 0;

    if (world(t) == 1)
        return 0;
    all = malloc(n * sizeof(float));
    if (!all) {
        snprintf(t->err, sizeof(t->err), "out of memory (%zu parameters)", n);
        return -ENOMEM;
    }
    for (uint32_t pass = 0; pass < 2 && rc == 0; pass++) {
        off = 0;
        if (pass == 1)
            tr_comm_bcast(t->cfg.comm, all, n * sizeof(float));
        for (uint32_t l = 0; rc == 0 && l < kn_model_layers(t->model); l++) {
            size_t nw = (size_t)dims[l] * dims[l + 1];

            rc = pass == 0 ? kn_model_read(t->model, KN_WEIGHTS, l, all + off, all + off + nw)
                           : kn_model_write(t->model, l, all + off, all + off + nw);
            off += nw + dims[l + 1];
        }
    }
    free(all);
    return rc < 0 ? fail(t, rc, "sharing rank 0's initial weights") : 0;
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
    rc = kn_open(&t->ctx, cfg->backend, &(struct kn_open_opts){.device = cfg->device}, t->err,
                 sizeof(t->err));
    if (rc < 0)
        return rc;
    if (cfg->comm && (rc = tr_comm_bind(cfg->comm, t->ctx, cfg->device)) < 0) {
        snprintf(t->err, sizeof(t->err), "%s", cfg->comm->err);
        return rc;
    }
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
    return share_weights(t, dims);
}

void tr_step_close(struct tr_step *t)
{
    if (!t->ctx)
        return;
    kn_sync(t->ctx);
    kn_buf_free(t->ctx, t->x);
    kn_model_destroy(t->model);
    kn_stream_destroy(t->compute);
    if (t->cfg.comm)
        tr_comm_unbind(t->cfg.comm);
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
    float *g;
    size_t count;
    uint64_t samples;
    double ms;
    int rc, alone = world(t) == 1;

    if ((rc = tr_step_settle(t)) < 0)
        return rc;
    rc = kn_train_step(t->model, t->compute, t->x, labels, n, apply && alone ? &o : NULL,
                       apply && alone ? KN_STEP_APPLY : 0, NULL, NULL);
    if (rc < 0)
        return fail(t, rc, "kn_train_step");
    if (apply && !alone) {
        if ((rc = kn_model_grads(t->model, &g, &count, &samples)) < 0)
            return fail(t, rc, "kn_model_grads");
        t->pend_opt = o;
        t->pend_samples = samples * (uint64_t)world(t);
        if ((rc = tr_comm_grads_start(t->cfg.comm, g, count, t->compute, &ms)) < 0) {
            snprintf(t->err, sizeof(t->err), "%s", t->cfg.comm->err);
            return rc;
        }
        t->ar_ms += ms;
        t->pending = 1;
    }
    t->micro++;
    if (apply) {
        t->step++;
        t->micro = 0;
    }
    return 0;
}

int tr_step_settle(struct tr_step *t)
{
    double ms;
    int rc;

    if (!t->pending)
        return 0;
    t->pending = 0;
    if ((rc = tr_comm_grads_wait(t->cfg.comm, &ms)) < 0) {
        snprintf(t->err, sizeof(t->err), "%s", t->cfg.comm->err);
        return rc;
    }
    t->ar_ms += ms;
    if ((rc = kn_model_set_samples(t->model, t->pend_samples)) < 0)
        return fail(t, rc, "kn_model_set_samples");
    rc = kn_model_apply(t->model, t->compute, &t->pend_opt);
    return rc < 0 ? fail(t, rc, "kn_model_apply") : 0;
}

int tr_step_score(struct tr_step *t, const int32_t *labels, uint32_t n)
{
    int rc = tr_step_settle(t);

    if (rc < 0)
        return rc;
    rc = kn_eval(t->model, t->compute, t->x, labels, n, NULL, NULL);

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
