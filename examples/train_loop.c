/*
 * train_loop.c - ringfeed-train's loop: batches from the ring to the
 * backend, the steps, their timing, and the evaluation passes.
 *
 * The way in, per backend:
 *
 *   CUDA   rf_next(train) ─▶ labels gathered on the host, copied (small)
 *            └─ rf_cuda_copy_release(slot ─DMA─▶ raw[k]) on the copy stream;
 *               the slot goes back to the daemon when the DMA is done
 *          compute stream: wait copied[k] ─▶ normalize raw[k] ─▶ step
 *          raw[] and lab[] are double-buffered: the copy of batch N+1
 *          (into raw[k^1]) runs while batch N computes; the copy of N+2
 *          into raw[k] waits for consumed[k], the end of batch N's step.
 *          The host runs at most one step ahead: after enqueueing step N
 *          it waits for step N-1's end, and reads N-1's timing events.
 *   CPU    rf_next ─▶ normalize straight from the slot (no copy: the
 *          twin's "backend memory" is host memory) ─▶ rf_release ─▶ step
 *
 * Timing, per step: data wait is host time inside rf_next; the copy and
 * the compute are event pairs on their streams (CUDA events; the CPU
 * twin's events read the clock), read only after the later event is
 * synchronized.  The first TR_WARMUP_STEPS steps of the run are left out
 * (CUDA context and cuBLAS start-up, first faults on the ring and the
 * buffers, the daemon's first fill).
 *
 * Ranks: the applying step starts the gradient all-reduce and the loop
 * goes on to take and normalize the next batch before the update is
 * finished (tr_step_settle, at the next step's learn), so the all-reduce
 * overlaps the wait in rf_next (--no-overlap finishes it at once).  Its
 * host-blocked time (NCCL: its time on the stream) is the step's
 * all-reduce time and is taken out of the compute time, which brackets
 * it.  At the end of an epoch the figures are summed over the ranks.
 *
 * Evaluation reads the eval ring's next epoch (the ring was opened without
 * shuffling, so every pass sees the same order) through the same way in.
 * Padding samples (RF_SAMPLE_PADDING, when ranks > 1 pad their share) get
 * label -1, which kn_eval counts apart, so each sample is scored once.
 *
 * Every batch, training or evaluation, is counted in L->paths by the way
 * it went, once it is handed back: DMA by rf_cuda_copy_release from a
 * registered ring or from pageable memory (rf_stats.pinned read right
 * after the call, which registers the ring the first time), a plain copy
 * (the fallback when rf_cuda_copy_release fails, and --copy-batches on the
 * CPU), or read in place.  A failed registration only slows the copies
 * down; these counts are what lets a checker see it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ringfeed.h"
#include "train.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int kn_fail(struct tr_loop *L, int rc, const char *what)
{
    snprintf(L->err, sizeof(L->err), "%s: %s", what, kn_errmsg(L->st.ctx));
    return rc;
}

static int step_fail(struct tr_loop *L, int rc)
{
    snprintf(L->err, sizeof(L->err), "%s", L->st.err);
    return rc;
}

static int rf_fail(struct tr_loop *L, struct rf_client *c, int rc, const char *what)
{
    snprintf(L->err, sizeof(L->err), "%s: %s", what, rf_last_error(c));
    return rc;
}

/* rf_next, blocking; adds the time spent to *wait_s. */
static int next(struct tr_loop *L, struct rf_client *c, struct rf_batch *b, double *wait_s,
                const char *what)
{
    double t0 = now_s();
    int rc = rf_next(c, b, -1);

    *wait_s += now_s() - t0;
    return rc < 0 ? rf_fail(L, c, rc, what) : 0;
}

/* Geometry of the samples from a batch: the ring's shape and layout as
 * kn_normalize's c, h, w and layout. */
static int geometry(struct tr_loop *L, const struct rf_batch *b, struct tr_config *cfg)
{
    switch (b->layout) {
    case RF_LAYOUT_CHW:
        cfg->c = b->shape[0], cfg->h = b->shape[1], cfg->w = b->shape[2];
        cfg->layout = KN_CHW;
        break;
    case RF_LAYOUT_HWC:
        cfg->h = b->shape[0], cfg->w = b->shape[1], cfg->c = b->shape[2];
        cfg->layout = KN_HWC;
        break;
    default:
        cfg->c = 1, cfg->h = 1, cfg->w = (uint32_t)b->sample_bytes;
        cfg->layout = KN_CHW;
        break;
    }
    if (cfg->c < 1 || cfg->c > KN_MAX_CHANNELS ||
        (uint64_t)cfg->c * cfg->h * cfg->w != b->sample_bytes) {
        snprintf(L->err, sizeof(L->err),
                 "the train ring's samples (%u x %u x %u, %zu bytes) are not images of "
                 "1..%d channels: train on a dataset of uint8 tensors such as Fashion-MNIST",
                 b->shape[0], b->shape[1], b->shape[2], b->sample_bytes, KN_MAX_CHANNELS);
        return -EINVAL;
    }
    return 0;
}

int tr_loop_open(struct tr_loop *L, struct rf_client *train, struct rf_client *eval,
                 struct tr_config *cfg)
{
    struct rf_stats st;
    size_t max_batch;
    int rc;

    memset(L, 0, sizeof(*L));
    L->train = train;
    L->eval = eval;
    rf_get_stats(train, &st);
    L->bpe = st.batches_per_epoch;
    rf_get_stats(eval, &st);
    L->eval_bpe = st.batches_per_epoch;
    if (L->bpe == 0 || L->eval_bpe == 0) {
        snprintf(L->err, sizeof(L->err), "a ring with no batches per epoch");
        return -EINVAL;
    }
    rc = next(L, train, &L->first, &L->first_wait, "the first training batch");
    if (rc < 0)
        return rc;
    L->have_first = 1;
    rc = geometry(L, &L->first, cfg);
    if (rc < 0)
        return rc;
    L->sample_bytes = L->first.sample_bytes;
    cfg->total_steps = cfg->total_steps ? cfg->total_steps : tr_updates_per_epoch(L->bpe, cfg->accum);
    rc = tr_step_open(&L->st, cfg);
    if (rc < 0)
        return step_fail(L, rc);
    L->copying = kn_backend_kind(L->st.ctx) == KN_BACKEND_CUDA || cfg->copy_batches;
    max_batch = cfg->batch > cfg->eval_batch ? cfg->batch : cfg->eval_batch;
    L->hlab = calloc(max_batch, sizeof(int32_t));
    if (!L->hlab) {
        snprintf(L->err, sizeof(L->err), "out of memory");
        return -ENOMEM;
    }
    for (int i = 0; i < 2; i++) {
        if ((rc = kn_buf_alloc(L->st.ctx, max_batch * sizeof(int32_t), (void **)&L->lab[i])) < 0)
            return kn_fail(L, rc, "allocating labels");
        if ((rc = kn_event_create(L->st.ctx, &L->tm[i].k0)) < 0 ||
            (rc = kn_event_create(L->st.ctx, &L->tm[i].k1)) < 0)
            return kn_fail(L, rc, "creating events");
    }
    if (!L->copying) {
        snprintf(L->note, sizeof(L->note),
                 "the CPU twin reads each batch in place from its ring slot (no copy)");
        return 0;
    }
    if ((rc = kn_stream_create(L->st.ctx, &L->copy)) < 0)
        return kn_fail(L, rc, "creating the copy stream");
    for (int i = 0; i < 2; i++) {
        if ((rc = kn_buf_alloc(L->st.ctx, max_batch * L->sample_bytes, (void **)&L->raw[i])) < 0)
            return kn_fail(L, rc, "allocating the device input");
        if ((rc = kn_event_create(L->st.ctx, &L->copied[i])) < 0 ||
            (rc = kn_event_create(L->st.ctx, &L->consumed[i])) < 0 ||
            (rc = kn_event_create(L->st.ctx, &L->tm[i].c0)) < 0 ||
            (rc = kn_event_create(L->st.ctx, &L->tm[i].c1)) < 0)
            return kn_fail(L, rc, "creating events");
    }
    if (kn_backend_kind(L->st.ctx) != KN_BACKEND_CUDA) {
        snprintf(L->note, sizeof(L->note),
                 "one copy per batch into backend buffers (--copy-batches on the CPU: the "
                 "CUDA path's code, memcpy for DMA)");
        return 0;
    }
    /* failing to pin still copies; the note says which it is */
    (void)rf_cuda_register(train);
    (void)rf_cuda_register(eval);
    rf_get_stats(train, &st);
    snprintf(L->note, sizeof(L->note), "one copy per batch from the ring to the device (%s)",
             st.pin_note);
    return 0;
}

void tr_loop_close(struct tr_loop *L)
{
    if (L->st.ctx) {
        kn_sync(L->st.ctx);
        for (int i = 0; i < 2; i++) {
            kn_event_destroy(L->copied[i]);
            kn_event_destroy(L->consumed[i]);
            kn_event_destroy(L->tm[i].c0);
            kn_event_destroy(L->tm[i].c1);
            kn_event_destroy(L->tm[i].k0);
            kn_event_destroy(L->tm[i].k1);
            kn_buf_free(L->st.ctx, L->raw[i]);
            kn_buf_free(L->st.ctx, L->lab[i]);
        }
        kn_stream_destroy(L->copy);
    }
    tr_step_close(&L->st);
    free(L->hlab);
    L->hlab = NULL;
}

/* Gathers b's labels into lab (host memory), -1 for padding when eval. */
static void gather(const struct rf_batch *b, int32_t *lab, int eval)
{
    for (uint32_t i = 0; i < b->count; i++)
        lab[i] = eval && (b->samples[i].flags & RF_SAMPLE_PADDING) ? -1 : b->samples[i].label;
}

/*
 * CUDA: brings batch b into raw[k] and lab[k] on the copy stream and makes
 * the compute stream wait for it; the slot goes back once its DMA is done.
 * tm (may be NULL) gets the copy's timing events.
 */
static int cuda_in(struct tr_loop *L, struct rf_client *c, const struct rf_batch *b,
                   unsigned k, struct tr_timing *tm)
{
    struct kn_ctx *ctx = L->st.ctx;
    size_t bytes = (size_t)b->count * b->sample_bytes;
    int rc;

    gather(b, L->hlab, c == L->eval);
    if ((rc = kn_stream_wait_event(L->copy, L->consumed[k])) < 0)
        return kn_fail(L, rc, "copy stream");
    if (tm && (rc = kn_event_record(tm->c0, L->copy)) < 0)
        return kn_fail(L, rc, "event");
    /* from pageable memory: cudaMemcpyAsync has staged hlab on return */
    rc = kn_copy(ctx, L->copy, L->lab[k], L->hlab, b->count * sizeof(int32_t), KN_H2D);
    if (rc < 0)
        return kn_fail(L, rc, "copying labels");
    if (!L->fallback) {
        rc = -ENODEV;
        if (kn_backend_kind(ctx) == KN_BACKEND_CUDA)
            rc = rf_cuda_copy_release(c, b, L->raw[k], kn_stream_native(ctx, L->copy));
        if (rc == 0) {
            struct rf_stats st;

            /* the live ring is b's: rf_cuda_copy_release maps none */
            rf_get_stats(c, &st);
            if (st.pinned)
                L->paths.dma_pinned++;
            else
                L->paths.dma_pageable++;
        } else if (kn_backend_kind(ctx) != KN_BACKEND_CUDA) {
            L->fallback = 1; /* --copy-batches on the CPU: kn_copy is memcpy */
        } else {
            L->fallback = 1;
            snprintf(L->note, sizeof(L->note),
                     "rf_cuda_copy_release failed (%s): plain copies, slot released after each",
                     rf_last_error(c));
        }
    }
    if (L->fallback) {
        rc = kn_copy(ctx, L->copy, L->raw[k], b->data, bytes, KN_H2D);
        if (rc == 0)
            rc = kn_stream_sync(L->copy);
        if (rc < 0)
            return kn_fail(L, rc, "copying a batch");
        if ((rc = rf_release(c, b)) < 0)
            return rf_fail(L, c, rc, "rf_release");
        L->paths.plain_copy++;
    }
    if ((rc = kn_event_record(L->copied[k], L->copy)) < 0 ||
        (tm && (rc = kn_event_record(tm->c1, L->copy)) < 0) ||
        (rc = kn_stream_wait_event(L->st.compute, L->copied[k])) < 0)
        return kn_fail(L, rc, "events");
    if (tm)
        tm->copied = 1;
    return 0;
}

/* Reads a step's timing once its last event is done; adds it to the
 * epoch's sums when it counts. */
static int read_timing(struct tr_loop *L, struct tr_timing *tm)
{
    float h2d = 0.0f, comp = 0.0f;
    int rc;

    if (!tm->pending)
        return 0;
    tm->pending = 0;
    if ((rc = kn_event_sync(tm->k1)) < 0 || (rc = kn_event_elapsed_ms(tm->k0, tm->k1, &comp)) < 0)
        return kn_fail(L, rc, "reading the compute time");
    if (tm->copied && ((rc = kn_event_sync(tm->c1)) < 0 ||
                       (rc = kn_event_elapsed_ms(tm->c0, tm->c1, &h2d)) < 0))
        return kn_fail(L, rc, "reading the copy time");
    if (tm->timed) {
        L->sum_wait += tm->wait_s * 1e3;
        L->sum_h2d += h2d;
        L->sum_compute += comp > tm->ar_ms ? comp - tm->ar_ms : 0.0;
        L->sum_ar += tm->ar_ms;
        L->n_timed++;
    }
    return 0;
}

/* One training step on batch b (taken after wait_s in rf_next). */
static int train_one(struct tr_loop *L, const struct rf_batch *b, double wait_s, int apply)
{
    struct tr_timing *tm = &L->tm[L->steps & 1], *prev = &L->tm[(L->steps & 1) ^ 1];
    unsigned k = L->k;
    uint32_t n = b->count;
    double ar0 = L->st.ar_ms;
    int rc;

    L->k ^= 1;
    *tm = (struct tr_timing){.c0 = tm->c0, .c1 = tm->c1, .k0 = tm->k0, .k1 = tm->k1,
                             .wait_s = wait_s, .timed = L->steps >= TR_WARMUP_STEPS};
    if (L->copying) {
        rc = cuda_in(L, L->train, b, k, tm);
        if (rc < 0)
            return rc;
        if ((rc = kn_event_record(tm->k0, L->st.compute)) < 0)
            return kn_fail(L, rc, "event");
        if ((rc = tr_step_input(&L->st, L->raw[k], n, 0)) < 0)
            return step_fail(L, rc);
        if ((rc = tr_step_learn(&L->st, L->lab[k], n, apply)) < 0)
            return step_fail(L, rc);
        /* raw[k] and lab[k] are free again once the step has read them */
        if ((rc = kn_event_record(L->consumed[k], L->st.compute)) < 0)
            return kn_fail(L, rc, "event");
    } else {
        gather(b, L->lab[k], 0);
        if ((rc = kn_event_record(tm->k0, NULL)) < 0)
            return kn_fail(L, rc, "event");
        if ((rc = tr_step_input(&L->st, b->data, n, 0)) < 0)
            return step_fail(L, rc);
        if ((rc = rf_release(L->train, b)) < 0) /* read: the slot goes back */
            return rf_fail(L, L->train, rc, "rf_release");
        L->paths.in_place++;
        if ((rc = tr_step_learn(&L->st, L->lab[k], n, apply)) < 0)
            return step_fail(L, rc);
    }
    if (L->no_overlap && (rc = tr_step_settle(&L->st)) < 0)
        return step_fail(L, rc);
    if ((rc = kn_event_record(tm->k1, L->st.compute)) < 0)
        return kn_fail(L, rc, "event");
    tm->ar_ms = L->st.ar_ms - ar0;
    tm->pending = 1;
    L->steps++;
    /* at most one step ahead: wait for the previous step, read its times */
    rc = read_timing(L, L->copying ? prev : tm);
    return rc;
}

static int world(const struct tr_loop *L)
{
    return L->st.cfg.comm ? L->st.cfg.comm->world : 1;
}

/* Ranks > 1: the job's training figures, summed over ranks (samples,
 * batches, loss, accuracy) or their mean (times, seconds).  Every rank's
 * share must be as large: the sampler's padding makes it so, and the
 * update's divisor counts on it. */
static int job_train_figures(struct tr_loop *L, struct kn_metrics *met, struct tr_epoch *e)
{
    uint64_t local = e->samples;
    double v[10] = {met->loss_sum, (double)met->correct, (double)met->samples,
                    (double)e->samples, (double)e->batches, e->seconds, e->wait_ms, e->h2d_ms,
                    e->compute_ms, e->allreduce_ms};
    double r = world(L);

    if (r == 1)
        return 0;
    tr_comm_sum(L->st.cfg.comm, v, 10);
    met->loss_sum = v[0];
    met->correct = (int64_t)v[1];
    met->samples = (int64_t)v[2];
    e->samples = (uint64_t)v[3];
    e->batches = (uint64_t)v[4];
    e->seconds = v[5] / r;
    e->wait_ms = v[6] / r, e->h2d_ms = v[7] / r;
    e->compute_ms = v[8] / r, e->allreduce_ms = v[9] / r;
    if (e->samples != local * (uint64_t)world(L)) {
        snprintf(L->err, sizeof(L->err),
                 "the ranks trained on %" PRIu64 " samples in all where %d x %" PRIu64
                 " were due: their shares differ, so the mean gradient was wrong",
                 e->samples, world(L), local);
        return -EPROTO;
    }
    return 0;
}

int tr_loop_epoch(struct tr_loop *L, uint64_t max_updates, struct tr_epoch *e)
{
    struct kn_metrics met;
    struct rf_batch b;
    uint64_t epoch = UINT64_MAX;
    double t0 = now_s(), wait_s;
    int rc, stop = 0;

    L->sum_wait = L->sum_h2d = L->sum_compute = L->sum_ar = 0.0;
    L->n_timed = 0;
    e->samples = e->batches = e->updates = 0;
    for (uint64_t s = 0; s < L->bpe && !stop; s++) {
        uint64_t before = L->st.step;
        int apply;

        wait_s = 0.0;
        if (L->have_first) {
            b = L->first;
            wait_s = L->first_wait;
            L->have_first = 0;
        } else if ((rc = next(L, L->train, &b, &wait_s, "rf_next(train)")) < 0) {
            return rc;
        }
        if (epoch == UINT64_MAX)
            epoch = b.epoch;
        if (b.epoch != epoch || b.seq != s) {
            snprintf(L->err, sizeof(L->err),
                     "the train ring delivered epoch %" PRIu64 " batch %" PRIu64
                     " where epoch %" PRIu64 " batch %" PRIu64 " was due",
                     b.epoch, b.seq, epoch, s);
            return -EBADMSG;
        }
        if (L->dump)
            for (uint32_t i = 0; i < b.count; i++)
                fprintf(L->dump, "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", b.epoch, b.seq,
                        b.samples[i].index);
        apply = tr_group_ends(b.seq, L->bpe, L->st.cfg.accum);
        e->samples += b.count;
        e->batches++;
        rc = train_one(L, &b, wait_s, apply);
        if (rc < 0)
            return rc;
        e->updates += L->st.step - before;
        if (max_updates && L->st.step >= max_updates)
            stop = 1;
    }
    {
        double ar0 = L->st.ar_ms;

        if ((rc = tr_step_settle(&L->st)) < 0) /* the epoch's last update */
            return step_fail(L, rc);
        L->sum_ar += L->st.ar_ms - ar0;
    }
    for (int i = 0; i < 2; i++)
        if ((rc = read_timing(L, &L->tm[i])) < 0)
            return rc;
    if ((rc = tr_step_metrics(&L->st, KN_TRAIN, &met)) < 0)
        return step_fail(L, rc);
    e->seconds = now_s() - t0;
    e->epoch = epoch + 1;
    e->timed = L->n_timed;
    e->wait_ms = L->n_timed ? L->sum_wait / (double)L->n_timed : 0.0;
    e->h2d_ms = L->n_timed ? L->sum_h2d / (double)L->n_timed : 0.0;
    e->compute_ms = L->n_timed ? L->sum_compute / (double)L->n_timed : 0.0;
    e->allreduce_ms = L->n_timed ? L->sum_ar / (double)L->n_timed : 0.0;
    if ((rc = job_train_figures(L, &met, e)) < 0)
        return rc;
    e->loss = met.samples ? met.loss_sum / (double)met.samples : 0.0;
    e->acc = met.samples ? (double)met.correct / (double)met.samples : 0.0;
    return stop;
}

int tr_loop_eval(struct tr_loop *L, struct tr_epoch *e)
{
    struct kn_metrics met;
    struct rf_batch b;
    double wait_s = 0.0;
    uint64_t scored;
    int rc;

    for (uint64_t s = 0; s < L->eval_bpe; s++) {
        unsigned k = L->k;

        if ((rc = next(L, L->eval, &b, &wait_s, "rf_next(eval)")) < 0)
            return rc;
        if (b.sample_bytes != L->sample_bytes || b.layout != L->first.layout ||
            memcmp(b.shape, L->first.shape, sizeof(b.shape)) != 0) {
            snprintf(L->err, sizeof(L->err),
                     "the eval ring's samples (%u x %u x %u, %zu bytes) are not shaped as the "
                     "train ring's (%u x %u x %u, %zu bytes): evaluate on the same kind of data",
                     b.shape[0], b.shape[1], b.shape[2], b.sample_bytes, L->first.shape[0],
                     L->first.shape[1], L->first.shape[2], L->sample_bytes);
            return -EINVAL;
        }
        L->k ^= 1;
        if (L->copying) {
            if ((rc = cuda_in(L, L->eval, &b, k, NULL)) < 0)
                return rc;
            if ((rc = tr_step_input(&L->st, L->raw[k], b.count, 1)) < 0 ||
                (rc = tr_step_score(&L->st, L->lab[k], b.count)) < 0)
                return step_fail(L, rc);
            if ((rc = kn_event_record(L->consumed[k], L->st.compute)) < 0)
                return kn_fail(L, rc, "event");
        } else {
            gather(&b, L->lab[k], 1);
            if ((rc = tr_step_input(&L->st, b.data, b.count, 1)) < 0)
                return step_fail(L, rc);
            if ((rc = rf_release(L->eval, &b)) < 0)
                return rf_fail(L, L->eval, rc, "rf_release(eval)");
            L->paths.in_place++;
            if ((rc = tr_step_score(&L->st, L->lab[k], b.count)) < 0)
                return step_fail(L, rc);
        }
    }
    if ((rc = tr_step_metrics(&L->st, KN_EVAL, &met)) < 0)
        return step_fail(L, rc);
    if (world(L) > 1) {
        double v[4] = {met.loss_sum, (double)met.correct, (double)met.samples,
                       (double)met.bad_labels};

        tr_comm_sum(L->st.cfg.comm, v, 4);
        met.loss_sum = v[0], met.correct = (int64_t)v[1];
        met.samples = (int64_t)v[2], met.bad_labels = (int64_t)v[3];
    }
    scored = (uint64_t)(met.samples - met.bad_labels);
    e->test_samples = scored;
    e->test_loss = scored ? met.loss_sum / (double)scored : 0.0;
    e->test_acc = scored ? (double)met.correct / (double)scored : 0.0;
    return 0;
}

int tr_loop_paths(struct tr_loop *L, struct tr_paths *job)
{
    double v[4] = {(double)L->paths.dma_pinned, (double)L->paths.dma_pageable,
                   (double)L->paths.plain_copy, (double)L->paths.in_place};
    int rc;

    *job = L->paths;
    if (world(L) == 1)
        return 0;
    rc = tr_comm_sum(L->st.cfg.comm, v, 4); /* exact: counts stay below 2^53 */
    if (rc < 0)
        return rc;
    job->dma_pinned = (uint64_t)v[0], job->dma_pageable = (uint64_t)v[1];
    job->plain_copy = (uint64_t)v[2], job->in_place = (uint64_t)v[3];
    return 0;
}
