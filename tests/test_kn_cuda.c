/*
 * test_kn_cuda.c - the CUDA kernels against their CPU twins: normalize,
 * forward, loss, backward, SGD update, running metrics, in fp32 and bf16,
 * on a small MLP and on the Fashion-MNIST one; and the CUDA-only plumbing
 * (a wrapped caller stream, a copy stream and a compute stream ordered by
 * an event, event timing, device memory figures).  Skips (exit 77) unless
 * kn_open finds a usable CUDA device.
 *
 * The cross-stream ordering check (check_overlap) can fail: the H2D copy
 * is made to land late (a host function, cudaLaunchHostFunc, holds the
 * copy stream for 200 ms ahead of it, and the device buffer holds 0xAB
 * until then), and a negative control runs the same sequence without
 * kn_stream_wait_event, whose result must differ from the CPU's ("the
 * ordering check cannot tell" otherwise).  Only then must the run with
 * the wait equal the CPU's bit for bit.  Both streams are non-blocking,
 * the legacy default stream is not used, host buffers are pinned, and both
 * streams are synchronized between the two runs.
 *
 * Tolerances (relative to the largest magnitude in each tensor):
 *  - normalize: identical bits (both round each operation in fp32 and bf16
 *    by round-to-nearest-even).
 *  - fp32: logits and loss 1e-5, gradients and momentum 1e-4, weights after
 *    an update 1e-5 (2e-5 after three), running loss 1e-4; only GEMM
 *    summation order differs.
 *  - bf16: logits and loss 1e-3, gradients and momentum 2e-3, weights 1e-3
 *    (2e-3 after three updates), running loss 1e-3.  A GEMM result that
 *    lands on the other side of a bf16 rounding boundary moves the next
 *    layer's input by one bf16 ulp; these bounds are 100x what two CPU
 *    BLAS kernels with different summation orders (OpenBLAS SkylakeX vs
 *    Prescott) showed on the same models, and below the bf16-vs-fp32 gap
 *    (5e-3 logits, 1e-2 gradients), so a bf16 path that skipped a rounding
 *    would fail.
 *  - correct counts within 1 per batch (a near-tie can go either way).
 * Initial weights must be identical (made on the host from the seed).
 */
#include <errno.h>
#include <time.h>

#include "config.h"
#include "kn_util.h"

#if RINGFEED_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

struct cfg {
    const char *name;
    uint32_t dims[4];
    uint32_t n_dims, batch;
};

static void check_normalize(struct kn_ctx *g, struct kn_ctx *c)
{
    for (int lay = KN_HWC; lay <= KN_CHW; lay++)
        for (uint32_t ch = 1; ch <= 3; ch += 2)
            for (int dt = KN_F32; dt <= KN_BF16; dt++) {
                struct kn_norm p = { .n = 5, .c = ch, .h = 28, .w = 28,
                                     .layout = (enum kn_layout)lay,
                                     .out = (enum kn_dtype)dt,
                                     .mean = { 0.2860f, 0.456f, 0.406f },
                                     .std = { 0.3530f, 0.224f, 0.225f } };
                size_t cnt = (size_t)5 * ch * 28 * 28;
                size_t ob = cnt * (dt == KN_F32 ? 4 : 2);
                uint8_t *src = ku_alloc(cnt);
                char *og = ku_alloc(ob), *oc = ku_alloc(ob);
                void *dsrc, *dout = NULL;

                for (size_t i = 0; i < cnt; i++)
                    src[i] = (uint8_t)(ku_mix(i + 77 * ch) >> 56);
                dsrc = ku_upload(g, src, cnt);
                kn_buf_alloc(g, ob, &dout);
                TAP_IS_INT(kn_normalize(g, NULL, &p, dsrc, dout), 0,
                           "cuda normalize");
                ku_download(g, og, dout, ob);
                TAP_IS_INT(kn_normalize(c, NULL, &p, src, oc), 0,
                           "cpu normalize");
                tap_ok(memcmp(og, oc, ob) == 0, "normalize %s, %u channel(s), "
                       "%s: cuda and cpu give identical bits",
                       lay == KN_HWC ? "HWC" : "CHW", ch,
                       dt == KN_F32 ? "fp32" : "bf16");
                kn_buf_free(g, dsrc);
                kn_buf_free(g, dout);
                free(src);
                free(og);
                free(oc);
            }
}

static struct kn_model *make(struct kn_ctx *ctx, const struct cfg *k,
                             enum kn_dtype prec)
{
    struct kn_model_desc d = { .dims = k->dims, .n_dims = k->n_dims,
                               .seed = 2024, .precision = prec,
                               .max_batch = k->batch };
    struct kn_model *m = NULL;

    if (kn_model_create(ctx, &d, &m) < 0) {
        printf("Bail out! kn_model_create on %s: %s\n", kn_backend_name(ctx),
               kn_errmsg(ctx));
        exit(1);
    }
    return m;
}

static size_t nparams(const struct cfg *k)
{
    size_t t = 0;

    for (uint32_t l = 0; l + 1 < k->n_dims; l++)
        t += (size_t)k->dims[l] * k->dims[l + 1] + k->dims[l + 1];
    return t;
}

/* Compares one flat tensor of both models; returns the relative error. */
static double cmp_tensor(struct kn_model *mg, struct kn_model *mc,
                         const struct cfg *k, enum kn_tensor which)
{
    size_t np = nparams(k);
    float *a = ku_alloc(np * sizeof(float)), *b = ku_alloc(np * sizeof(float));
    double e;

    ku_read_all(mg, which, k->dims, a);
    ku_read_all(mc, which, k->dims, b);
    e = ku_relerr(a, b, np, 1e-12);
    free(a);
    free(b);
    return e;
}

static void check_model(struct kn_ctx *g, struct kn_ctx *c,
                        const struct cfg *k, enum kn_dtype prec)
{
    int bf = prec == KN_BF16;
    const char *pn = bf ? "bf16" : "fp32";
    double t_logit = bf ? 1e-3 : 1e-5, t_grad = bf ? 2e-3 : 1e-4;
    double t_w = bf ? 1e-3 : 1e-5, t_run = bf ? 1e-3 : 1e-4;
    uint32_t B = k->batch, in = k->dims[0], C = k->dims[k->n_dims - 1];
    size_t esz = bf ? 2 : 4, xbytes = (size_t)B * in * esz;
    struct kn_model *mg = make(g, k, prec), *mc = make(c, k, prec);
    struct kn_sgd o = { .lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f };
    float *xf = ku_alloc((size_t)B * in * sizeof(float));
    uint16_t *xb = ku_alloc((size_t)B * in * sizeof(uint16_t));
    int32_t *y = ku_alloc(B * sizeof(int32_t));
    float *lg = ku_alloc((size_t)B * C * 4), *lc = ku_alloc((size_t)B * C * 4);
    const void *xh;
    void *dx, *dy, *dl = NULL;
    float loss_g = NAN, loss_c = NAN;
    int32_t cor_g = -1, cor_c = -1;
    struct kn_stream *s = NULL;
    struct kn_event *e0 = NULL, *e1 = NULL;
    struct kn_metrics mtg, mtc;
    float ms = -1;
    double e;

    ku_fill(xf, (size_t)B * in, 31, -1.5, 1.5);
    for (size_t i = 0; i < (size_t)B * in; i++)
        xb[i] = kn_bf16_from_f32(xf[i]);
    for (uint32_t i = 0; i < B; i++)
        y[i] = (int32_t)(ku_mix(i + 5) % C);
    xh = bf ? (const void *)xb : (const void *)xf;
    dx = ku_upload(g, xh, xbytes);
    dy = ku_upload(g, y, B * sizeof(int32_t));
    kn_buf_alloc(g, (size_t)B * C * 4, &dl);

    TAP_OK(cmp_tensor(mg, mc, k, KN_WEIGHTS) == 0.0,
           "initial weights are identical on both backends");

    TAP_IS_INT(kn_forward(mg, NULL, dx, B, dl), 0, "cuda forward");
    ku_download(g, lg, dl, (size_t)B * C * 4);
    kn_forward(mc, NULL, xh, B, lc);
    e = ku_relerr(lg, lc, (size_t)B * C, 1e-6);
    if (!tap_ok(e <= t_logit, "%s %s: logits agree", k->name, pn))
        tap_diag("  relative error %g", e);

    TAP_IS_INT(kn_train_step(mg, NULL, dx, dy, B, NULL, 0, &loss_g, &cor_g),
               0, "cuda train step");
    kn_train_step(mc, NULL, xh, y, B, NULL, 0, &loss_c, &cor_c);
    if (!tap_ok(fabs(loss_g - loss_c) <= t_logit * fabs(loss_c), "%s %s: "
                "loss agrees", k->name, pn))
        tap_diag("  cuda %.9g cpu %.9g", loss_g, loss_c);
    if (!tap_ok(abs(cor_g - cor_c) <= 1, "%s %s: correct count agrees",
                k->name, pn))
        tap_diag("  cuda %d cpu %d", cor_g, cor_c);
    e = cmp_tensor(mg, mc, k, KN_GRADS);
    if (!tap_ok(e <= t_grad, "%s %s: gradients agree", k->name, pn))
        tap_diag("  relative error %g", e);

    TAP_IS_INT(kn_model_apply(mg, NULL, &o), 0, "cuda apply");
    kn_model_apply(mc, NULL, &o);
    e = cmp_tensor(mg, mc, k, KN_WEIGHTS);
    if (!tap_ok(e <= t_w, "%s %s: weights after SGD agree", k->name, pn))
        tap_diag("  relative error %g", e);
    e = cmp_tensor(mg, mc, k, KN_MOMENTUM);
    if (!tap_ok(e <= t_grad, "%s %s: momentum agrees", k->name, pn))
        tap_diag("  relative error %g", e);

    /* Asynchronous steps on a stream of our own, accumulation of 2, timed
     * with events (the time is reported, never checked). */
    kn_model_metrics(mg, NULL, KN_TRAIN, 1, &mtg);
    kn_model_metrics(mc, NULL, KN_TRAIN, 1, &mtc);
    TAP_IS_INT(kn_stream_create(g, &s), 0, "stream create");
    kn_event_create(g, &e0);
    kn_event_create(g, &e1);
    kn_event_record(e0, s);
    for (int i = 0; i < 4; i++) {
        unsigned fl = (i & 1) ? KN_STEP_APPLY : 0;

        TAP_IS_INT(kn_train_step(mg, s, dx, dy, B, &o, fl, NULL, NULL), 0,
                   "asynchronous cuda step");
        kn_train_step(mc, NULL, xh, y, B, &o, fl, NULL, NULL);
    }
    kn_event_record(e1, s);
    TAP_IS_INT(kn_event_sync(e1), 0, "event sync");
    TAP_IS_INT(kn_event_elapsed_ms(e0, e1, &ms), 0, "event elapsed");
    tap_diag("%s %s: 4 steps in %.3f ms (not checked)", k->name, pn, ms);
    TAP_IS_INT(kn_model_metrics(mg, s, KN_TRAIN, 0, &mtg), 0, "metrics");
    kn_model_metrics(mc, NULL, KN_TRAIN, 0, &mtc);
    TAP_IS_INT(mtg.samples, 4 * B, "the running metrics count every sample");
    if (!tap_ok(fabs(mtg.loss_sum - mtc.loss_sum) <= t_run * mtc.loss_sum,
                "%s %s: running loss agrees", k->name, pn))
        tap_diag("  cuda %.9g cpu %.9g", mtg.loss_sum, mtc.loss_sum);
    TAP_OK(llabs((long long)(mtg.correct - mtc.correct)) <= 4,
           "running correct count agrees within 1 a batch");
    e = cmp_tensor(mg, mc, k, KN_WEIGHTS);
    if (!tap_ok(e <= 2 * t_w, "%s %s: weights after 2 more accumulated "
                "updates agree", k->name, pn))
        tap_diag("  relative error %g", e);

    /* Eval metrics and bad labels. */
    {
        int32_t yb[2] = { (int32_t)C, -3 };
        void *dyb = ku_upload(g, yb, sizeof yb);
        float le = NAN;
        int32_t ce = -1;

        TAP_IS_INT(kn_eval(mg, s, dx, dyb, 2, &le, &ce), 0,
                   "eval with bad labels");
        kn_model_metrics(mg, s, KN_EVAL, 1, &mtg);
        TAP_IS_INT(mtg.bad_labels, 2, "cuda counts bad labels");
        TAP_OK(le == 0.0f && ce == 0, "which add no loss and are wrong");
        kn_buf_free(g, dyb);
    }

    kn_event_destroy(e0);
    kn_event_destroy(e1);
    kn_stream_destroy(s);
    kn_buf_free(g, dx);
    kn_buf_free(g, dy);
    kn_buf_free(g, dl);
    kn_model_destroy(mg);
    kn_model_destroy(mc);
    free(xf);
    free(xb);
    free(y);
    free(lg);
    free(lc);
}

#if RINGFEED_HAVE_CUDA
#define SLOW_PRODUCER_MS 200 /* how long the copy stream is held before its copy */
#define STALE 0xAB           /* what dsrc holds before the copy lands */

/* The slow producer: a host function enqueued on the copy stream ahead of
 * the H2D copy, so the copy starts SLOW_PRODUCER_MS after the stream
 * reaches it.  It runs on the runtime's own thread and must not call CUDA. */
static void CUDART_CB slow_producer(void *arg)
{
    struct timespec ts = { .tv_sec = 0, .tv_nsec = SLOW_PRODUCER_MS * 1000000L };

    (void)arg;
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/* The overlap pattern's parts: the copy stream cp feeds the compute stream
 * comp (both non-blocking) through `ready`; hsrc and hout are pinned host
 * buffers of cnt bytes and cnt floats, dsrc and dout their device twins. */
struct overlap {
    struct kn_ctx *g;
    struct kn_stream *cp, *comp;
    struct kn_event *ready;
    const struct kn_norm *p;
    const uint8_t *hsrc;
    float *hout;
    void *dsrc, *dout;
    size_t cnt;
};

/* A check on a CUDA runtime call; clears the runtime's error on failure. */
static int cu_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 1;
    tap_ok(0, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    (void)cudaGetLastError();
    return 0;
}

/* A check on a kn_ call. */
static int kn_ok(struct overlap *o, int rc, const char *what)
{
    if (rc == 0)
        return 1;
    tap_ok(0, "%s: %s", what, kn_errmsg(o->g));
    return 0;
}

/*
 * One run of the pattern with a slow producer.  First dsrc is set to STALE,
 * dout and hout to 0, and the copy stream synchronized.  Then the copy
 * stream sleeps (slow_producer), copies hsrc to dsrc and records ready; the
 * compute stream waits for ready when `wait` is set, normalizes dsrc into
 * dout and copies it to hout.  Both streams are synchronized before it
 * returns, whatever failed, so nothing of this run is in flight after it.
 * Returns 1 when every call succeeded (hout holds the result), else 0
 * after a failed check naming the call.
 */
static int overlap_run(struct overlap *o, int wait)
{
    cudaStream_t cps = (cudaStream_t)kn_stream_native(o->g, o->cp);
    size_t ob = o->cnt * sizeof(float);
    int ok;

    memset(o->hout, 0, ob);
    ok = cu_ok(cudaMemsetAsync(o->dsrc, STALE, o->cnt, cps), "cudaMemsetAsync dsrc") &&
         cu_ok(cudaMemsetAsync(o->dout, 0, ob, cps), "cudaMemsetAsync dout") &&
         kn_ok(o, kn_stream_sync(o->cp), "sync the copy stream before the run") &&
         cu_ok(cudaLaunchHostFunc(cps, slow_producer, NULL), "cudaLaunchHostFunc") &&
         kn_ok(o, kn_copy(o->g, o->cp, o->dsrc, o->hsrc, o->cnt, KN_H2D), "H2D on the copy "
               "stream") &&
         kn_ok(o, kn_event_record(o->ready, o->cp), "record ready on the copy stream") &&
         (!wait || kn_ok(o, kn_stream_wait_event(o->comp, o->ready), "compute waits for it")) &&
         kn_ok(o, kn_normalize(o->g, o->comp, o->p, o->dsrc, o->dout), "normalize on the "
               "wrapped stream") &&
         kn_ok(o, kn_copy(o->g, o->comp, o->hout, o->dout, ob, KN_D2H), "D2H");
    /* both, even after a failure: the next run starts from idle streams */
    ok &= kn_ok(o, kn_stream_sync(o->comp), "sync the compute stream");
    ok &= kn_ok(o, kn_stream_sync(o->cp), "sync the copy stream");
    return ok;
}

/*
 * A copy stream feeds a compute stream through an event, on a caller's
 * wrapped cudaStream_t: the trainer's overlap pattern.  The copy is made
 * late on purpose (a host function holds the copy stream for
 * SLOW_PRODUCER_MS first), so a compute stream that did not wait would
 * read dsrc's stale bytes.  A negative control runs the same sequence
 * without kn_stream_wait_event and must get a result that differs from the
 * CPU's (else the check cannot tell ordered from unordered); then the real
 * run, with the wait, must equal the CPU's bit for bit.  Both streams are
 * non-blocking (kn_stream_create's, and the caller's made so here), and
 * nothing runs on the legacy default stream, so no implicit
 * synchronization between them can hide a missing wait; host buffers are
 * pinned so the copies are asynchronous (a pageable H2D copy may block the
 * host until it is done).
 */
static void check_overlap(struct kn_ctx *g, struct kn_ctx *c)
{
    struct kn_norm p = { .n = 64, .c = 1, .h = 28, .w = 28, .layout = KN_HWC,
                         .out = KN_F32, .mean = { 0.286f }, .std = { 0.353f } };
    size_t cnt = (size_t)64 * 784, ob = cnt * sizeof(float), diff = 0;
    float *oc = ku_alloc(ob);
    struct overlap o = { .g = g, .p = &p, .cnt = cnt };
    uint8_t *hsrc = NULL;
    cudaStream_t mine = NULL;
    struct kn_mem mem;
    int ok;

    ok = cu_ok(cudaMallocHost((void **)&hsrc, cnt), "cudaMallocHost src") &&
         cu_ok(cudaMallocHost((void **)&o.hout, ob), "cudaMallocHost out") &&
         cu_ok(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags");
    if (!ok)
        goto out;
    for (size_t i = 0; i < cnt; i++)
        hsrc[i] = (uint8_t)(ku_mix(i) >> 40);
    o.hsrc = hsrc;
    TAP_IS_INT(kn_stream_wrap(g, mine, &o.comp), 0, "wrap a caller's stream");
    TAP_OK(kn_stream_native(g, o.comp) == (void *)mine,
           "kn_stream_native gives the wrapped cudaStream_t back");
    TAP_IS_INT(kn_stream_create(g, &o.cp), 0, "copy stream");
    TAP_OK(kn_stream_native(g, o.cp) != NULL, "  and a created stream's");
    TAP_IS_INT(kn_event_create(g, &o.ready), 0, "an event");
    TAP_IS_INT(kn_buf_alloc(g, cnt, &o.dsrc), 0, "dsrc");
    TAP_IS_INT(kn_buf_alloc(g, ob, &o.dout), 0, "dout");
    if (!o.comp || !o.cp || !o.ready || !o.dsrc || !o.dout)
        goto out;
    TAP_IS_INT(kn_normalize(c, NULL, &p, hsrc, oc), 0, "cpu normalize");

    /* the negative control: no wait, so normalize reads the stale bytes */
    if (overlap_run(&o, 0)) {
        for (size_t i = 0; i < cnt; i++)
            diff += memcmp(&o.hout[i], &oc[i], sizeof(float)) != 0;
        if (!tap_ok(diff > 0, "control: without the wait the result differs from the cpu's "
                    "(%zu of %zu values)", diff, cnt))
            tap_diag("the ordering check cannot tell: without the wait the result is still "
                     "right");
    }
    /* the real run */
    if (overlap_run(&o, 1))
        TAP_OK(memcmp(o.hout, oc, ob) == 0, "the result after the cross-stream wait is the "
               "cpu's, bit for bit, though the copy landed late");

    TAP_IS_INT(kn_mem_stats(g, &mem), 0, "memory figures");
    TAP_OK(mem.dev_total > 0 && mem.dev_used > 0 &&
           mem.dev_used_peak >= mem.dev_used && mem.bytes >= cnt * 5,
           "device memory figures are filled in");
    tap_diag("device memory: %zu used (peak %zu) of %zu; ours %zu, peak %zu",
             mem.dev_used, mem.dev_used_peak, mem.dev_total, mem.bytes,
             mem.peak);
out:
    kn_buf_free(g, o.dsrc);
    kn_buf_free(g, o.dout);
    kn_event_destroy(o.ready);
    kn_stream_destroy(o.cp);
    kn_stream_destroy(o.comp);
    if (mine)
        cudaStreamDestroy(mine);
    if (o.hout)
        cudaFreeHost(o.hout);
    if (hsrc)
        cudaFreeHost(hsrc);
    free(oc);
}
#endif

int main(void)
{
    static const struct cfg cfgs[] = {
        { "20-24-16-5 batch 12", { 20, 24, 16, 5 }, 4, 12 },
        { "784-512-256-10 batch 128", { 784, 512, 256, 10 }, 4, 128 },
    };
    struct kn_ctx *g = NULL, *c;
    char err[512];

    if (kn_open(&g, KN_BACKEND_CUDA, NULL, err, sizeof err) < 0)
        tap_skip_all("no usable CUDA device: %s", err);
    c = ku_open(KN_BACKEND_CPU);
    tap_diag("%s", kn_backend_note(g));
    TAP_IS_STR(kn_backend_name(g), "cuda", "the backend is cuda");

    check_normalize(g, c);
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        check_model(g, c, &cfgs[i], KN_F32);
        check_model(g, c, &cfgs[i], KN_BF16);
    }
#if RINGFEED_HAVE_CUDA
    check_overlap(g, c);
#endif
    kn_close(g);
    kn_close(c);
    return tap_done();
}
