/*
 * ringfeed-train.c - trains the Fashion-MNIST MLP on batches fed by
 * ringfeedd, on the GPU or on its CPU twin, and reports where the time of a
 * step goes.
 *
 *   ringfeed-train [--socket PATH] [--train NAME] [--eval NAME] [--epochs E]
 *                  [--batch B] [--eval-batch B] [--lr X] [--precision fp32|bf16]
 *                  [--accum K] [--seed S] [--backend auto|cpu|cuda]
 *                  [--max-steps N] [--copy-batches] [--json]
 *                  [--print-checksum] [--dump-indices FILE] [--no-overlap]
 *                  [--comm-timeout S] [--verbose]
 *   mpirun -np N ringfeed-train ...
 *
 * Two rings from the same daemon: the training set (shuffled every epoch
 * with --seed) and the evaluation set (in order, one epoch per
 * evaluation).  Under mpirun (a build with MPI) the N processes are one
 * data-parallel job: rank and world from MPI, passed to libringfeed, each
 * rank attached to its node's daemon, every update made with the gradient
 * averaged over the ranks (train_comm.h), and rank 0 prints the job's
 * figures (the others only errors, or everything with --verbose).  The
 * global batch is N x --batch.  Without mpirun (or without MPI) rank and
 * world come from the environment as libringfeed takes them
 * (RANK/WORLD_SIZE) and each process trains alone on its share.  Defaults: the datasets fmnist-train and fmnist-test, 10 epochs of
 * batch 128, lr 0.05 with a cosine decay to 0 over the run, momentum 0.9,
 * weight decay 5e-4, fp32, the backend CUDA when a device answers.  The
 * same seed and options give the same figures for any worker count.
 *
 * Output, after a header saying which backend runs and how batches reach
 * it, one line per epoch as it ends:
 *
 *   epoch  train loss  train acc  test loss  test acc  samples/s  wait ms  h2d ms  compute ms  bound
 *
 * samples/s is training samples over the epoch's training time (evaluation
 * left out).  wait, h2d and compute are the mean per step, the first
 * TR_WARMUP_STEPS steps of the run left out: time inside rf_next, the copy
 * of the batch to the device (0 on the CPU, which reads the slot in place),
 * and normalize + forward + backward + SGD (GPU times from events, read
 * after synchronizing).  bound is "input" when a step waited longer for
 * data than it computed, else "compute".  Then the peak memory (device, or
 * host), the verdict over the whole run, the way every batch (training and
 * evaluation, the job's: summed over the ranks) reached the backend,
 *
 *   ringfeed-train: batches in: N DMA from the registered ring, N DMA from
 *   pageable memory, N plain copies, N read in place
 *
 * (one line; a CUDA run whose ring registration or rf_cuda_copy_release
 * failed shows it here), and last the line
 *
 *   test accuracy: 0.xxxx
 *
 * With --json, only one JSON object on one line (the same figures, losses
 * with every digit, and the final weights' sum and L2 norm).  Of its keys,
 * "pinned" and "pinned_train" (the same) and "pinned_eval" say whether
 * this rank's train and eval rings are registered with cudaHostRegister at
 * the end, "pin_note" is the train ring's rf_stats.pin_note, and
 * "copy_path" is {"dma_pinned": N, "dma_pageable": N, "plain_copy": N,
 * "in_place": N}, the counts of the line above: summed over the ranks, as
 * epochs[].batches are, so with one rank they add up to the epochs'
 * batches plus epochs x "eval_batches_per_epoch" (a rank's, as
 * "batches_per_epoch" is).
 * --max-steps N stops after N SGD updates (the lr schedule is still the
 * full run's), for tests that compare runs over a few steps.
 * --copy-batches makes the CPU twin take the CUDA path (double-buffered
 * copies into backend buffers, events, labels staged on the host) with
 * memcpy for the DMA, so that code runs in tests without a device.
 *
 * Exit status: 0 done; 1 training failed (the reason on stderr); 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ringfeed.h"
#include "train.h"

static const char *prog = "ringfeed-train";

struct opts {
    const char *socket, *train, *eval;
    uint64_t epochs, max_steps, seed;
    uint32_t batch, eval_batch, accum;
    float lr;
    enum kn_dtype precision;
    enum kn_backend backend;
    int json;
    int copy_batches;
    int print_checksum, no_overlap, verbose;
    const char *dump_indices;
    double comm_timeout;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [--socket PATH] [--train NAME] [--eval NAME] [--epochs E]\n"
            "       [--batch B] [--eval-batch B] [--lr X] [--precision fp32|bf16]\n"
            "       [--accum K] [--seed S] [--backend auto|cpu|cuda] [--max-steps N]\n"
            "       [--copy-batches] [--json] [--print-checksum] [--dump-indices FILE]\n"
            "       [--no-overlap] [--comm-timeout S] [--verbose]\n"
            "       (as one data-parallel job: mpirun -np N %s ...)\n"
            "\n"
            "Trains the Fashion-MNIST MLP (784-512-256-10) on batches from ringfeedd and\n"
            "prints, per epoch, loss, accuracy, samples/s and where a step's time went.\n"
            "  --socket PATH     the daemon's control socket (default: as libringfeed)\n"
            "  --train NAME      training dataset (default fmnist-train)\n"
            "  --eval NAME       evaluation dataset (default fmnist-test)\n"
            "  --epochs E        default 10\n"
            "  --batch B         samples per step, default 128\n"
            "  --eval-batch B    samples per evaluation batch, default 1000\n"
            "  --lr X            peak learning rate, cosine-decayed to 0; default 0.05\n"
            "  --precision P     fp32 (default) or bf16 GEMM inputs\n"
            "  --accum K         accumulate gradients over K batches per update; default 1\n"
            "  --seed S          shuffle and initial weights; default 0\n"
            "  --backend B       auto (default: CUDA when a device answers), cpu or cuda\n"
            "  --max-steps N     stop after N updates (the schedule stays the full run's)\n"
            "  --copy-batches    on the CPU too, copy each batch into backend buffers as\n"
            "                    the CUDA path does (to test that path without a device)\n"
            "  --json            one JSON object instead of the table\n"
            "  --print-checksum  each rank prints a checksum of its parameters at the end\n"
            "  --dump-indices FILE  write \"epoch seq index\" per training sample; {rank}\n"
            "                    in FILE becomes the rank\n"
            "  --no-overlap      finish each gradient all-reduce before taking the next batch\n"
            "  --comm-timeout S  end the job when a collective takes S seconds; default 120\n"
            "  --verbose         every rank prints, not only rank 0\n"
            "  --help            this text\n",
            prog, prog);
}

static uint64_t num(const char *name, const char *v, uint64_t lo, uint64_t hi)
{
    char *end;
    unsigned long long x;

    errno = 0;
    x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || x < lo || x > hi) {
        fprintf(stderr, "%s: --%s \"%s\": give a whole number in %" PRIu64 "..%" PRIu64 "\n",
                prog, name, v, lo, hi);
        exit(2);
    }
    return x;
}

static void parse(int argc, char **argv, struct opts *o)
{
    enum { O_SOCKET = 1, O_TRAIN, O_EVAL, O_EPOCHS, O_BATCH, O_EVAL_BATCH, O_LR, O_PREC,
           O_ACCUM, O_SEED, O_BACKEND, O_MAX_STEPS, O_JSON, O_COPY, O_CHECKSUM, O_DUMP,
           O_NO_OVERLAP, O_COMM_TIMEOUT, O_VERBOSE, O_HELP };
    static const struct option lo[] = {
        {"socket", required_argument, NULL, O_SOCKET},
        {"train", required_argument, NULL, O_TRAIN},
        {"eval", required_argument, NULL, O_EVAL},
        {"epochs", required_argument, NULL, O_EPOCHS},
        {"batch", required_argument, NULL, O_BATCH},
        {"eval-batch", required_argument, NULL, O_EVAL_BATCH},
        {"lr", required_argument, NULL, O_LR},
        {"precision", required_argument, NULL, O_PREC},
        {"accum", required_argument, NULL, O_ACCUM},
        {"seed", required_argument, NULL, O_SEED},
        {"backend", required_argument, NULL, O_BACKEND},
        {"max-steps", required_argument, NULL, O_MAX_STEPS},
        {"json", no_argument, NULL, O_JSON},
        {"copy-batches", no_argument, NULL, O_COPY},
        {"print-checksum", no_argument, NULL, O_CHECKSUM},
        {"dump-indices", required_argument, NULL, O_DUMP},
        {"no-overlap", no_argument, NULL, O_NO_OVERLAP},
        {"comm-timeout", required_argument, NULL, O_COMM_TIMEOUT},
        {"verbose", no_argument, NULL, O_VERBOSE},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    char *end;
    int c;

    *o = (struct opts){
        .train = "fmnist-train",
        .eval = "fmnist-test",
        .epochs = 10,
        .batch = 128,
        .eval_batch = 1000,
        .accum = 1,
        .lr = 0.05f,
        .precision = KN_F32,
        .backend = KN_BACKEND_AUTO,
        .comm_timeout = 120.0,
    };
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case O_SOCKET: o->socket = optarg; break;
        case O_TRAIN: o->train = optarg; break;
        case O_EVAL: o->eval = optarg; break;
        case O_EPOCHS: o->epochs = num("epochs", optarg, 1, 100000); break;
        case O_BATCH: o->batch = (uint32_t)num("batch", optarg, 1, 65536); break;
        case O_EVAL_BATCH: o->eval_batch = (uint32_t)num("eval-batch", optarg, 1, 65536); break;
        case O_ACCUM: o->accum = (uint32_t)num("accum", optarg, 1, 1024); break;
        case O_SEED: o->seed = num("seed", optarg, 0, UINT64_MAX); break;
        case O_MAX_STEPS: o->max_steps = num("max-steps", optarg, 1, UINT64_MAX); break;
        case O_JSON: o->json = 1; break;
        case O_COPY: o->copy_batches = 1; break;
        case O_CHECKSUM: o->print_checksum = 1; break;
        case O_DUMP: o->dump_indices = optarg; break;
        case O_NO_OVERLAP: o->no_overlap = 1; break;
        case O_VERBOSE: o->verbose = 1; break;
        case O_COMM_TIMEOUT:
            o->comm_timeout = (double)num("comm-timeout", optarg, 1, 86400);
            break;
        case O_LR:
            o->lr = strtof(optarg, &end);
            if (end == optarg || *end || !isfinite(o->lr) || o->lr < 0.0f) {
                fprintf(stderr, "%s: --lr \"%s\": give a number >= 0, e.g. 0.05\n", prog,
                        optarg);
                exit(2);
            }
            break;
        case O_PREC:
            if (strcmp(optarg, "fp32") == 0)
                o->precision = KN_F32;
            else if (strcmp(optarg, "bf16") == 0)
                o->precision = KN_BF16;
            else {
                fprintf(stderr, "%s: --precision \"%s\": fp32 or bf16\n", prog, optarg);
                exit(2);
            }
            break;
        case O_BACKEND:
            if (strcmp(optarg, "auto") == 0)
                o->backend = KN_BACKEND_AUTO;
            else if (strcmp(optarg, "cpu") == 0)
                o->backend = KN_BACKEND_CPU;
            else if (strcmp(optarg, "cuda") == 0)
                o->backend = KN_BACKEND_CUDA;
            else {
                fprintf(stderr, "%s: --backend \"%s\": auto, cpu or cuda\n", prog, optarg);
                exit(2);
            }
            break;
        case O_HELP: usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument \"%s\"\n", prog, argv[optind]);
        usage(stderr);
        exit(2);
    }
}

/* Attaches to dataset; shuffle 1 for training, 0 for evaluation. */
static int attach(const struct opts *o, const struct tr_comm *comm, const char *dataset,
                  uint32_t batch, int shuffle, const char *name, struct rf_client **c)
{
    struct rf_options ro;
    int rc;

    rf_options_init(&ro);
    if (comm->mpi) { /* MPI's rank and world, whatever the environment says */
        ro.rank = comm->rank;
        ro.world = comm->world;
    }
    ro.socket = o->socket;
    ro.dataset = dataset;
    ro.batch = batch;
    ro.seed = o->seed;
    ro.shuffle = shuffle;
    ro.name = name;
    rc = rf_open(&ro, c);
    if (rc < 0)
        fprintf(stderr, "%s: rank %d: attaching to %s: %s\n", prog, comm->rank, dataset,
                rf_last_error(*c));
    return rc;
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;

        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

static const char *bound(double wait_ms, double compute_ms, double ar_ms)
{
    if (ar_ms > compute_ms && ar_ms >= wait_ms)
        return "comm";
    return wait_ms > compute_ms ? "input" : "compute";
}

static double mib(double bytes)
{
    return bytes / (1024.0 * 1024.0);
}

/* The final parameters' figures, for comparing runs: the sum and L2 norm
 * of every weight and bias, and FNV-1a 64 over their fp32 bytes layer by
 * layer (equal on two ranks exactly when their parameters are
 * bit-identical, barring a collision).  0 or a negative errno. */
static int param_figures(struct tr_step *t, double *sum, double *l2, uint64_t *hash)
{
    uint32_t dims[KN_FMNIST_NDIMS] = KN_FMNIST_DIMS;
    double s = 0.0, q = 0.0;
    uint64_t h = 0xcbf29ce484222325ull;

    dims[0] = t->in;
    for (uint32_t l = 0; l < kn_model_layers(t->model); l++) {
        size_t nw = (size_t)dims[l] * dims[l + 1], nb = dims[l + 1];
        float *w = malloc(sizeof(float) * (nw + nb));
        int rc;

        if (!w)
            return -ENOMEM;
        rc = kn_model_read(t->model, KN_WEIGHTS, l, w, w + nw);
        for (size_t i = 0; rc == 0 && i < nw + nb; i++) {
            s += w[i];
            q += (double)w[i] * w[i];
        }
        for (size_t i = 0; rc == 0 && i < (nw + nb) * sizeof(float); i++) {
            h ^= ((const unsigned char *)w)[i];
            h *= 0x100000001b3ull;
        }
        free(w);
        if (rc < 0)
            return rc;
    }
    *sum = s;
    *l2 = sqrt(q);
    *hash = h;
    return 0;
}

struct totals {
    double wait, h2d, compute, ar;
    uint64_t timed;
};

static void print_header(const struct opts *o, const struct tr_comm *comm,
                         const struct tr_loop *L, uint64_t total)
{
    char dims[64];

    snprintf(dims, sizeof(dims), "%u-512-256-%d", L->st.in, TR_CLASSES);
    printf("%s: backend %s (%s)\n", prog, kn_backend_name(L->st.ctx),
           kn_backend_note(L->st.ctx));
    printf("%s: train %s, %" PRIu64 " batches of %u an epoch%s; eval %s, %" PRIu64
           " batches of %u\n",
           prog, o->train, L->bpe, o->batch, comm->world > 1 ? " per rank" : "", o->eval,
           L->eval_bpe, o->eval_batch);
    printf("%s: MLP %s %s, %zu parameters; SGD lr %g cosine to 0 over %" PRIu64
           " epochs (%" PRIu64 " updates), momentum %g, weight decay %g, accum %u\n",
           prog, dims, o->precision == KN_BF16 ? "bf16" : "fp32",
           kn_model_params(L->st.model), (double)o->lr, o->epochs, total,
           (double)L->st.cfg.momentum, (double)L->st.cfg.weight_decay, o->accum);
    printf("%s: input: %s\n", prog, L->note);
    if (comm->mpi)
        printf("%s: ranks %d (%s), global batch %u = %d x %u%s; allreduce: %s\n", prog,
               comm->world, comm->launcher[0] ? comm->launcher : "MPI",
               (unsigned)comm->world * o->batch, comm->world, o->batch,
               o->no_overlap ? ", all-reduce not overlapped" : "", comm->note);
    else
        printf("%s: ranks 1; allreduce: %s\n", prog, comm->note);
    printf("\nepoch  train loss  train acc  test loss  test acc  samples/s  wait ms  h2d ms"
           "  compute ms  allreduce ms  bound\n");
    fflush(stdout);
}

static void print_row(const struct tr_epoch *e)
{
    printf("%5" PRIu64 "  %10.4f  %9.4f  %9.4f  %8.4f  %9.0f  %7.3f  %6.3f  %10.3f  %12.3f  %s\n",
           e->epoch, e->loss, e->acc, e->test_loss, e->test_acc,
           e->seconds > 0 ? (double)e->samples / e->seconds : 0.0, e->wait_ms, e->h2d_ms,
           e->compute_ms, e->allreduce_ms, bound(e->wait_ms, e->compute_ms, e->allreduce_ms));
    fflush(stdout);
}

static void print_summary(const struct tr_loop *L, const struct kn_mem *mem, long rss_kib,
                          const struct totals *t, const struct tr_paths *paths, double acc)
{
    double w = t->timed ? t->wait / (double)t->timed : 0.0;
    double h = t->timed ? t->h2d / (double)t->timed : 0.0;
    double c = t->timed ? t->compute / (double)t->timed : 0.0;
    double a = t->timed ? t->ar / (double)t->timed : 0.0;
    double share = w + h + c + a > 0 ? 100.0 * w / (w + h + c + a) : 0.0;

    printf("\n");
    if (kn_backend_kind(L->st.ctx) == KN_BACKEND_CUDA)
        printf("peak memory: device: %.1f MiB in use on the device at most (%.1f MiB of it "
               "the trainer's buffers and model), of %.1f MiB; host: %.1f MiB resident\n",
               mib((double)mem->dev_used_peak), mib((double)mem->peak),
               mib((double)mem->dev_total), (double)rss_kib / 1024.0);
    else
        printf("peak memory: host: %.1f MiB in the trainer's buffers and model, %.1f MiB "
               "resident (the whole process, rings included)\n",
               mib((double)mem->peak), (double)rss_kib / 1024.0);
    if (a > c && a >= w)
        printf("verdict: communication-bound: a step spent %.3f ms on the gradient all-reduce "
               "and computed %.3f ms (waited %.3f ms for data); give each rank more work per "
               "update (--batch, --accum), or fewer ranks per node, or a faster link (NCCL "
               "on GPUs)\n",
               a, c, w);
    else if (w > c)
        printf("verdict: input-bound: a step waited %.3f ms for data and computed %.3f ms "
               "(copy %.3f ms); give the daemon more workers (ringfeedctl workers N)\n",
               w, c, h);
    else
        printf("verdict: compute-bound: a step waited %.3f ms for data (%.1f%% of it) and "
               "computed %.3f ms (copy %.3f ms); the loader keeps up, more workers would "
               "not help\n",
               w, share, c, h);
    printf("%s: batches in: %" PRIu64 " DMA from the registered ring, %" PRIu64
           " DMA from pageable memory, %" PRIu64 " plain copies, %" PRIu64 " read in place\n",
           prog, paths->dma_pinned, paths->dma_pageable, paths->plain_copy, paths->in_place);
    printf("test accuracy: %.4f\n", acc);
}

static void print_json(const struct opts *o, const struct tr_comm *comm,
                       const struct tr_loop *L, const struct tr_epoch *ep, size_t n,
                       const struct kn_mem *mem, long rss_kib, const struct totals *t,
                       const struct tr_paths *paths, double wsum, double wl2, uint64_t total,
                       const uint64_t *sums)
{
    double w = t->timed ? t->wait / (double)t->timed : 0.0;
    double h = t->timed ? t->h2d / (double)t->timed : 0.0;
    double c = t->timed ? t->compute / (double)t->timed : 0.0;
    double a = t->timed ? t->ar / (double)t->timed : 0.0;
    struct rf_stats st, est;

    rf_get_stats(L->train, &st);
    rf_get_stats(L->eval, &est);
    printf("{\"backend\":");
    json_str(kn_backend_name(L->st.ctx));
    printf(",\"backend_note\":");
    json_str(kn_backend_note(L->st.ctx));
    printf(",\"input\":");
    json_str(L->note);
    printf(",\"world\":%d,\"mpi\":%s,\"global_batch\":%u,\"allreduce\":", comm->world,
           comm->mpi ? "true" : "false", (unsigned)comm->world * o->batch);
    json_str(comm->note);
    printf(",\"param_checksums\":[");
    for (int r = 0; r < comm->world; r++)
        printf("%s\"%016" PRIx64 "\"", r ? "," : "", sums[r]);
    printf("]");
    printf(",\"pinned\":%s,\"precision\":\"%s\",\"batch\":%u,\"accum\":%u,\"lr\":%.9g,"
           "\"seed\":%" PRIu64 ",\"epochs_planned\":%" PRIu64 ",\"updates_planned\":%" PRIu64
           ",\"updates\":%" PRIu64 ",\"batches_per_epoch\":%" PRIu64
           ",\"eval_batches_per_epoch\":%" PRIu64 ",\"epochs\":[",
           st.pinned ? "true" : "false", o->precision == KN_BF16 ? "bf16" : "fp32", o->batch,
           o->accum, (double)o->lr, o->seed, o->epochs, total, L->st.step, L->bpe,
           L->eval_bpe);
    for (size_t i = 0; i < n; i++) {
        const struct tr_epoch *e = &ep[i];

        printf("%s{\"epoch\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"batches\":%" PRIu64
               ",\"updates\":%" PRIu64 ",\"seconds\":%.6f,\"samples_per_s\":%.3f,"
               "\"loss\":%.17g,\"train_acc\":%.17g,\"test_loss\":%.17g,\"test_acc\":%.17g,"
               "\"test_samples\":%" PRIu64 ",\"wait_ms\":%.6f,\"h2d_ms\":%.6f,"
               "\"compute_ms\":%.6f,\"allreduce_ms\":%.6f,\"timed_steps\":%" PRIu64
               ",\"bound\":\"%s\"}",
               i ? "," : "", e->epoch, e->samples, e->batches, e->updates, e->seconds,
               e->seconds > 0 ? (double)e->samples / e->seconds : 0.0, e->loss, e->acc,
               e->test_loss, e->test_acc, e->test_samples, e->wait_ms, e->h2d_ms,
               e->compute_ms, e->allreduce_ms, e->timed,
               bound(e->wait_ms, e->compute_ms, e->allreduce_ms));
    }
    printf("],\"pinned_train\":%s,\"pinned_eval\":%s,\"pin_note\":",
           st.pinned ? "true" : "false", est.pinned ? "true" : "false");
    json_str(st.pin_note);
    printf(",\"copy_path\":{\"dma_pinned\":%" PRIu64 ",\"dma_pageable\":%" PRIu64
           ",\"plain_copy\":%" PRIu64 ",\"in_place\":%" PRIu64 "}",
           paths->dma_pinned, paths->dma_pageable, paths->plain_copy, paths->in_place);
    printf(",\"peak_bytes\":%zu,\"device_used_peak_bytes\":%zu,\"device_total_bytes\":%zu,"
           "\"peak_rss_bytes\":%lld,\"wait_ms\":%.6f,\"h2d_ms\":%.6f,\"compute_ms\":%.6f,"
           "\"allreduce_ms\":%.6f,\"verdict\":\"%s\",\"weights_sum\":%.17g,"
           "\"weights_l2\":%.17g,\"test_accuracy\":%.17g}\n",
           mem->peak, mem->dev_used_peak, mem->dev_total, (long long)rss_kib * 1024, w, h, c,
           a, a > c && a >= w ? "communication-bound" : w > c ? "input-bound" : "compute-bound",
           wsum, wl2, n ? ep[n - 1].test_acc : 0.0);
}

/* Opens --dump-indices FILE, "{rank}" replaced by the rank. */
static FILE *open_dump(const char *pattern, int rank)
{
    char path[4096];
    const char *at = strstr(pattern, "{rank}");
    FILE *f;

    if (at)
        snprintf(path, sizeof(path), "%.*s%d%s", (int)(at - pattern), pattern, rank, at + 6);
    else
        snprintf(path, sizeof(path), "%s", pattern);
    f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "%s: rank %d: --dump-indices %s: %s\n", prog, rank, path,
                strerror(errno));
    return f;
}

/* A failure: with more ranks the whole job ends (the others would wait
 * for this one's next all-reduce); alone, exit status 1. */
static void fail_job(struct tr_comm *comm, const char *msg)
{
    if (comm->world > 1)
        tr_comm_abort(comm, "%s", msg);
    fprintf(stderr, "%s: %s\n", prog, msg);
}

int main(int argc, char **argv)
{
    struct rf_client *train = NULL, *eval = NULL;
    struct tr_epoch *ep = NULL;
    struct tr_config cfg;
    struct tr_comm comm;
    struct tr_loop L;
    struct rf_stats st;
    struct kn_mem mem;
    struct totals tot = {0};
    struct tr_paths paths;
    struct rusage ru;
    struct opts o;
    double wsum = 0.0, wl2 = 0.0;
    uint64_t total, sum = 0, *sums = NULL;
    char msg[1024];
    size_t n = 0;
    int rc, status = 1, speak, devices;

    parse(argc, argv, &o);
    memset(&L, 0, sizeof(L));
    if (tr_comm_open(&comm, o.comm_timeout) < 0) {
        fprintf(stderr, "%s: %s\n", prog, comm.err);
        tr_comm_close(&comm);
        return 1;
    }
    speak = comm.rank == 0 || o.verbose;
    if (comm.env_rank != -1 || comm.env_world != -1)
        fprintf(stderr, "%s: rank %d: RANK=%d WORLD_SIZE=%d in the environment differ from "
                "MPI's rank %d of %d; using MPI's\n", prog, comm.rank, comm.env_rank,
                comm.env_world, comm.rank, comm.world);
    if (attach(&o, &comm, o.train, o.batch, 1, "ringfeed-train", &train) < 0 ||
        attach(&o, &comm, o.eval, o.eval_batch, 0, "ringfeed-train:eval", &eval) < 0) {
        if (comm.world > 1)
            tr_comm_abort(&comm, "could not attach to the daemon (see above)");
        goto out;
    }
    rf_get_stats(train, &st);
    total = o.epochs * tr_updates_per_epoch(st.batches_per_epoch, o.accum);
    devices = kn_device_count();
    cfg = (struct tr_config){
        .backend = o.backend,
        .precision = o.precision,
        .batch = o.batch,
        .eval_batch = o.eval_batch,
        .accum = o.accum,
        .lr = o.lr,
        .momentum = 0.9f,
        .weight_decay = 5e-4f,
        .seed = o.seed,
        .total_steps = total,
        .mean = 0.2860f,
        .std = 0.3530f,
        .copy_batches = o.copy_batches,
        .comm = &comm,
        .device = devices > 0 ? comm.local_rank % devices : 0,
    };
    rc = tr_loop_open(&L, train, eval, &cfg);
    if (rc < 0) {
        fail_job(&comm, L.err);
        goto out;
    }
    L.no_overlap = o.no_overlap;
    if (o.dump_indices && !(L.dump = open_dump(o.dump_indices, comm.rank))) {
        fail_job(&comm, "cannot write the --dump-indices file");
        goto out;
    }
    ep = calloc(o.epochs, sizeof(*ep));
    sums = calloc((size_t)comm.world, sizeof(*sums));
    if (!ep || !sums) {
        fail_job(&comm, "out of memory");
        goto out;
    }
    if (!o.json && speak)
        print_header(&o, &comm, &L, total);
    for (rc = 0; n < o.epochs && rc == 0; n++) {
        rc = tr_loop_epoch(&L, o.max_steps, &ep[n]);
        if (rc >= 0 && tr_loop_eval(&L, &ep[n]) < 0)
            rc = -1;
        if (rc < 0) {
            snprintf(msg, sizeof(msg), "epoch %zu: %s", n + 1, L.err);
            fail_job(&comm, msg);
            goto out;
        }
        tot.wait += ep[n].wait_ms * (double)ep[n].timed;
        tot.h2d += ep[n].h2d_ms * (double)ep[n].timed;
        tot.compute += ep[n].compute_ms * (double)ep[n].timed;
        tot.ar += ep[n].allreduce_ms * (double)ep[n].timed;
        tot.timed += ep[n].timed;
        if (!o.json && speak)
            print_row(&ep[n]);
    }
    if (L.dump && fflush(L.dump) != 0) {
        fail_job(&comm, "writing the --dump-indices file failed");
        goto out;
    }
    kn_mem_stats(L.st.ctx, &mem);
    getrusage(RUSAGE_SELF, &ru);
    if (param_figures(&L.st, &wsum, &wl2, &sum) < 0) {
        snprintf(msg, sizeof(msg), "reading the weights: %s", kn_errmsg(L.st.ctx));
        fail_job(&comm, msg);
        goto out;
    }
    tr_comm_gather_u64(&comm, sum, sums);
    tr_loop_paths(&L, &paths);
    if (o.print_checksum) {
        printf("%s: rank %d of %d: parameter checksum %016" PRIx64 " (FNV-1a 64 of %zu fp32 "
               "parameters after %" PRIu64 " updates)\n", prog, comm.rank, comm.world, sum,
               kn_model_params(L.st.model), L.st.step);
        fflush(stdout);
    }
    if (speak) {
        if (o.json)
            print_json(&o, &comm, &L, ep, n, &mem, ru.ru_maxrss, &tot, &paths, wsum, wl2,
                       total, sums);
        else
            print_summary(&L, &mem, ru.ru_maxrss, &tot, &paths, n ? ep[n - 1].test_acc : 0.0);
    }
    status = 0;
out:
    if (L.dump)
        fclose(L.dump);
    L.dump = NULL;
    tr_loop_close(&L);
    rf_close(eval);
    rf_close(train);
    free(ep);
    free(sums);
    tr_comm_close(&comm);
    return status;
}
