/*
 * train.h - ringfeed-train's internals, shared by its files:
 *
 *   ringfeed-train.c  options, the two rings, the epoch table and JSON
 *   train_loop.c      the loop: take a batch from a ring, move it to the
 *                     backend (one DMA on CUDA, in place on the CPU), run
 *                     the step, time it; evaluation passes
 *   train_step.c      the step on backend memory: normalize, forward,
 *                     backward, the gradient all-reduce across ranks, SGD
 *                     with a cosine lr and gradient accumulation; no ring
 *                     in sight (its unit test, tests/test_train_step.c,
 *                     drives it directly)
 *   train_comm.h      the ranks of a data-parallel job (MPI, NCCL) and
 *                     their collectives (train_comm_mpi.c or _solo.c)
 *
 * Names carry the prefix tr_.
 */
#ifndef RINGFEED_EXAMPLES_TRAIN_H
#define RINGFEED_EXAMPLES_TRAIN_H

#include <stdint.h>

#include <stdio.h>

#include "kernels.h"
#include "ringfeed.h"
#include "train_comm.h"

#define TR_CLASSES 10
#define TR_WARMUP_STEPS 10     /* first steps left out of the timings */

/* What the step needs to know: the model and the optimizer. */
struct tr_config {
    enum kn_backend backend;
    enum kn_dtype precision;
    uint32_t batch;            /* largest micro-batch of training */
    uint32_t eval_batch;       /* largest batch of evaluation */
    uint32_t accum;            /* micro-batches per SGD update, >= 1 */
    float lr;                  /* peak lr; cosine-decayed to 0 */
    float momentum;
    float weight_decay;
    uint64_t seed;             /* initial weights */
    uint64_t total_steps;      /* SGD updates the cosine spans */
    /* the samples: c x h x w uint8 in layout, normalized with mean/std */
    uint32_t c, h, w;
    enum kn_layout layout;
    float mean, std;
    /* the loop's: copy batches into backend buffers even on the CPU (the
     * CUDA path's code, run where there is no device) */
    int copy_batches;
    /* the job: NULL or one rank trains alone; more ranks all-reduce every
     * update's gradient (one fused buffer) and start from rank 0's
     * weights.  Every rank's batch s holds the same number of samples
     * (libringfeed pads the ranks' shares to equal), so the job's update
     * divides the summed gradient by world x the local count. */
    struct tr_comm *comm;
    int device;                /* CUDA ordinal (a rank's local rank) */
};

/* The step's state: a context, the model, and the buffers of one batch.
 * Buffers are backend memory (device memory on CUDA). */
struct tr_step {
    struct tr_config cfg;
    struct kn_ctx *ctx;
    struct kn_model *model;
    struct kn_stream *compute; /* the steps' stream (CPU: a placeholder) */
    uint32_t in;               /* c*h*w */
    void *x;                   /* [max batch][in] normalized, model precision */
    uint64_t step;             /* SGD updates made */
    uint32_t micro;            /* micro-batches accumulated since the last */
    /* ranks > 1: the update whose gradient all-reduce is in flight */
    int pending;
    struct kn_sgd pend_opt;
    uint64_t pend_samples;     /* the job's samples in the summed gradient */
    double ar_ms;              /* time spent on all-reduces, running sum */
    char err[512];
};

/*
 * Opens a context on cfg->backend and creates the 784-512-256-10 MLP
 * (input c*h*w) and its buffers.  Returns 0, or a negative errno with the
 * reason in t->err; tr_step_close() either way.
 */
int tr_step_open(struct tr_step *t, const struct tr_config *cfg);
void tr_step_close(struct tr_step *t);

/* The lr of SGD update number `step` of `total`: lr * (1 + cos(pi step /
 * total)) / 2, so the first update uses lr and the last nearly 0. */
float tr_lr(float lr, uint64_t step, uint64_t total);

/* Whether micro-batch seq of an epoch of bpe batches ends an accumulation
 * group: every accum-th, and the epoch's last. */
int tr_group_ends(uint64_t seq, uint64_t bpe, uint32_t accum);

/* SGD updates in an epoch of bpe batches. */
uint64_t tr_updates_per_epoch(uint64_t bpe, uint32_t accum);

/*
 * A step in two halves, so the CPU can hand a ring slot back as soon as it
 * has read it.  tr_step_input normalizes n samples of raw (uint8, backend
 * memory; on the CPU any host memory, such as a ring slot, finished with
 * when the call returns) into t->x, enqueued on t->compute.  n is checked
 * against the training or evaluation batch (eval != 0).
 */
int tr_step_input(struct tr_step *t, const uint8_t *raw, uint32_t n, int eval);

/* Then one micro-batch of training on t->x: forward and backward adding
 * to the gradient and, with apply, the SGD update at tr_lr(step).
 * labels: [n] int32 in backend memory.  0 or a negative errno (t->err).
 * With more than one rank the applying micro-batch starts the all-reduce
 * of the gradient and leaves the update pending (t->pending): the next
 * tr_step_learn or tr_step_score, or tr_step_settle, finishes it, so the
 * caller can take and normalize the next batch meanwhile. */
int tr_step_learn(struct tr_step *t, const int32_t *labels, uint32_t n, int apply);

/* Finishes a pending update: waits for its all-reduce and applies SGD with
 * the job's mean gradient.  0 (also when none is pending) or a negative
 * errno.  A collective past its deadline ends the job (train_comm.h). */
int tr_step_settle(struct tr_step *t);

/* Or an evaluation of t->x (kn_eval, no gradient).  A label of -1
 * (padding) counts in kn_metrics.bad_labels and nowhere else. */
int tr_step_score(struct tr_step *t, const int32_t *labels, uint32_t n);

/* tr_step_input then tr_step_learn. */
int tr_step_train(struct tr_step *t, const uint8_t *raw, const int32_t *labels, uint32_t n,
                  int apply);

/* Reads and resets a phase's running metrics (waits for the stream). */
int tr_step_metrics(struct tr_step *t, enum kn_phase phase, struct kn_metrics *out);

/* ---- train_loop.c ---------------------------------------------------- */

/* One epoch's figures.  Times are means per timed step (steps after the
 * first TR_WARMUP_STEPS of the run), in milliseconds. */
struct tr_epoch {
    uint64_t epoch;            /* 1-based */
    uint64_t samples, batches, updates;
    double seconds;            /* training wall time (no evaluation) */
    double loss, acc;          /* training: running mean loss, accuracy */
    double test_loss, test_acc;
    uint64_t test_samples;     /* evaluated, padding left out */
    double wait_ms;            /* in rf_next */
    double h2d_ms;             /* the copy to the device (0 on the CPU) */
    double compute_ms;         /* normalize + forward + backward + SGD */
    double allreduce_ms;       /* the gradient all-reduce not hidden */
    uint64_t timed;
};

/* A step's timing events (one set per step parity). */
struct tr_timing {
    struct kn_event *c0, *c1, *k0, *k1;
    int pending;               /* recorded, not yet read */
    int copied;                /* c0 and c1 were recorded */
    int timed;                 /* counts (past the warm-up) */
    double wait_s;
    double ar_ms;              /* all-reduce time inside the step */
};

/* Which way batches (training and evaluation) reached the backend, one
 * count per batch handed back.  A checker reads them to tell a GPU run fed
 * by DMA from the registered ring from one that fell back. */
struct tr_paths {
    uint64_t dma_pinned;       /* rf_cuda_copy_release, its ring registered
                                  (rf_stats.pinned just after the call) */
    uint64_t dma_pageable;     /* rf_cuda_copy_release, the ring not registered */
    uint64_t plain_copy;       /* kn_copy, sync, rf_release: the fallback when
                                  rf_cuda_copy_release failed, and
                                  --copy-batches on the CPU */
    uint64_t in_place;         /* the CPU twin normalized from the slot */
};

struct tr_loop {
    struct tr_step st;
    struct rf_client *train, *eval;
    uint64_t bpe, eval_bpe;    /* batches per epoch of each ring */
    size_t sample_bytes;
    int copying;               /* copy batches over (CUDA, or asked for) */
    /* copying: double-buffered backend input, host label staging, events */
    struct kn_stream *copy;
    uint8_t *raw[2];
    int32_t *lab[2];           /* backend memory */
    int32_t *hlab;             /* host: labels gathered from the slot */
    struct kn_event *copied[2], *consumed[2];
    struct tr_timing tm[2];
    unsigned k;                /* the input buffer of the next batch */
    uint64_t steps;            /* micro-batches run */
    /* the epoch's sums over timed steps */
    double sum_wait, sum_h2d, sum_compute, sum_ar;
    uint64_t n_timed;
    struct rf_batch first;     /* the train ring's first batch, taken at */
    int have_first;            /* open for its geometry; the first step's */
    double first_wait;
    int fallback;              /* rf_cuda_copy_release failed: plain copies */
    char note[256];            /* how batches reach the backend */
    struct tr_paths paths;     /* this rank's batches, by the way they came */
    FILE *dump;                /* "epoch seq index" per training sample, or NULL */
    int no_overlap;            /* finish each all-reduce before the next batch */
    char err[768];
};

/*
 * Opens the step on the geometry of the train ring's first batch (which
 * it takes with rf_next and keeps for the first step) and sets up the
 * backend buffers.  cfg's geometry fields are filled here.  Returns 0 or a
 * negative errno with L->err; tr_loop_close() either way.
 */
int tr_loop_open(struct tr_loop *L, struct rf_client *train, struct rf_client *eval,
                 struct tr_config *cfg);
void tr_loop_close(struct tr_loop *L);

/* Trains one epoch (all of the ring's batches for it, or until
 * max_updates SGD updates have been made in all, 0: no limit) and fills
 * the training half of *e, the job's figures when there are ranks
 * (summed over them: samples, batches, loss and accuracy; times are the
 * ranks' mean).  Returns 0, or 1 when max_updates was reached,
 * or a negative errno with L->err. */
int tr_loop_epoch(struct tr_loop *L, uint64_t max_updates, struct tr_epoch *e);

/* One pass over the eval ring's next epoch; fills test_* of *e. */
int tr_loop_eval(struct tr_loop *L, struct tr_epoch *e);

/* The job's L->paths into *job: summed over the ranks, as the epochs'
 * batches are (a collective: every rank calls it, at the same point);
 * with one rank, this rank's.  Returns 0 or tr_comm_sum's negative errno
 * (then *job holds this rank's). */
int tr_loop_paths(struct tr_loop *L, struct tr_paths *job);

#endif
