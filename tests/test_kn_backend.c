/*
 * test_kn_backend.c - the kernels module's front: backend choice and its
 * report (AUTO falls back to the CPU with the reason, an explicit CUDA
 * request fails cleanly without a device), buffers and copies, memory
 * figures, streams and events on the CPU backend, and argument checks that
 * return -EINVAL with a message instead of touching memory.
 */
#include <errno.h>

#include "config.h"
#include "kn_util.h"

static void check_choice(void)
{
    struct kn_ctx *cuda = NULL, *autox = NULL, *cpu = NULL;
    char err[256] = "unset";
    int rc;

    TAP_IS_INT(kn_open(&cpu, KN_BACKEND_CPU, NULL, err, sizeof err), 0,
               "kn_open cpu");
    TAP_IS_STR(kn_backend_name(cpu), "cpu", "the cpu backend is named cpu");
    TAP_IS_INT(kn_backend_kind(cpu), KN_BACKEND_CPU, "kind is cpu");
    TAP_OK(strstr(kn_backend_note(cpu), "thread") != NULL,
           "the cpu note gives the OpenBLAS threads");
    tap_diag("cpu note: %s", kn_backend_note(cpu));
    kn_close(cpu);

    rc = kn_open(&cuda, KN_BACKEND_CUDA, NULL, err, sizeof err);
    TAP_IS_INT(kn_open(&autox, KN_BACKEND_AUTO, NULL, NULL, 0), 0,
               "kn_open auto");
    tap_diag("auto: %s (%s)", kn_backend_name(autox), kn_backend_note(autox));
    if (rc == 0) {
        TAP_IS_STR(kn_backend_name(autox), "cuda",
                   "with a usable device auto picks cuda");
        kn_close(cuda);
    } else {
        TAP_OK(cuda == NULL, "a failed open leaves NULL");
        TAP_IS_STR(kn_backend_name(autox), "cpu",
                   "without a usable device auto picks cpu");
#if RINGFEED_HAVE_CUDA
        TAP_IS_INT(rc, -ENODEV, "explicit cuda without a device: -ENODEV");
        TAP_OK(strncmp(err, "CUDA built, no device: cudaGetDeviceCount: ",
                       43) == 0, "the error names cudaGetDeviceCount");
        TAP_OK(strncmp(kn_backend_note(autox), err, strlen(err)) == 0,
               "auto's note carries the reason it fell back");
#else
        TAP_IS_INT(rc, -ENOTSUP, "explicit cuda without CUDA built: "
                   "-ENOTSUP");
        TAP_IS_STR(err, "built without CUDA", "the error says why");
        TAP_OK(strncmp(kn_backend_note(autox), "built without CUDA; cpu: ",
                       25) == 0, "auto's note says why it runs on the cpu");
#endif
        tap_diag("explicit cuda: %s", err);
    }
    kn_close(autox);

    TAP_IS_INT(kn_open(&cpu, (enum kn_backend)9, NULL, err, sizeof err),
               -EINVAL, "unknown backend is -EINVAL");
    TAP_OK(strstr(err, "unknown backend") != NULL, "and says so");
    TAP_IS_INT(kn_open(NULL, KN_BACKEND_CPU, NULL, NULL, 0), -EINVAL,
               "NULL out is -EINVAL");
}

static void check_memory(struct kn_ctx *ctx)
{
    struct kn_mem mem;
    char host[1000], back[1000];
    void *a = NULL, *b = NULL;

    for (int i = 0; i < 1000; i++)
        host[i] = (char)(i * 7);
    TAP_IS_INT(kn_buf_alloc(ctx, 1000, &a), 0, "alloc 1000 bytes");
    TAP_OK(((uintptr_t)a & 255) == 0, "aligned to 256 bytes");
    TAP_IS_INT(kn_buf_alloc(ctx, 3000, &b), 0, "alloc 3000 bytes");
    kn_buf_free(ctx, b);
    TAP_IS_INT(kn_buf_alloc(ctx, 0, &b), -EINVAL, "alloc 0 is -EINVAL");
    TAP_OK(b == NULL, "a failed alloc leaves NULL");
    kn_mem_stats(ctx, &mem);
    TAP_IS_INT(mem.bytes, 1000, "one buffer held");
    TAP_OK(mem.peak >= 4000, "the peak saw both");
    TAP_IS_INT(kn_copy(ctx, NULL, a, host, 1000, KN_H2D), 0, "H2D");
    TAP_IS_INT(kn_copy(ctx, NULL, back, a, 1000, KN_D2H), 0, "D2H");
    TAP_OK(memcmp(host, back, 1000) == 0, "the round trip keeps the bytes");
    TAP_IS_INT(kn_copy(ctx, NULL, a, NULL, 10, KN_H2D), -EINVAL,
               "copy from NULL is -EINVAL");
    TAP_IS_INT(kn_copy(ctx, NULL, a, host, 10, (enum kn_copy_dir)5), -EINVAL,
               "unknown direction is -EINVAL");
    kn_buf_free(ctx, a);
    kn_buf_free(ctx, NULL);
    kn_mem_stats(ctx, &mem);
    TAP_IS_INT(mem.bytes, 0, "all freed");
}

static void check_streams(struct kn_ctx *ctx)
{
    struct kn_stream *s = NULL, *w = NULL;
    struct kn_event *e0 = NULL, *e1 = NULL;
    float ms = -1.0f;
    int dummy;

    TAP_IS_INT(kn_stream_create(ctx, &s), 0, "stream create");
    TAP_IS_INT(kn_stream_wrap(ctx, &dummy, &w), -ENOTSUP,
               "the cpu backend wraps no CUDA stream");
    TAP_OK(kn_stream_native(ctx, s) == NULL && kn_stream_native(ctx, NULL) == NULL &&
           kn_stream_native(NULL, s) == NULL,
           "kn_stream_native: no cudaStream_t on the cpu backend");
    TAP_IS_INT(kn_event_create(ctx, &e0), 0, "event create");
    TAP_IS_INT(kn_event_create(ctx, &e1), 0, "event create");
    TAP_IS_INT(kn_event_elapsed_ms(e0, e1, &ms), -EINVAL,
               "elapsed of unrecorded events is -EINVAL");
    TAP_IS_INT(kn_event_record(e0, s), 0, "record");
    TAP_IS_INT(kn_stream_wait_event(NULL, e0), -EINVAL,
               "wait on NULL stream is -EINVAL");
    TAP_IS_INT(kn_stream_wait_event(s, e0), 0, "stream waits for event");
    TAP_IS_INT(kn_event_record(e1, NULL), 0, "record on the default stream");
    TAP_IS_INT(kn_event_sync(e1), 0, "event sync");
    TAP_IS_INT(kn_stream_sync(s), 0, "stream sync");
    TAP_IS_INT(kn_event_elapsed_ms(e0, e1, &ms), 0, "elapsed");
    TAP_OK(ms == ms && ms < 1e9f, "elapsed is a number");
    kn_event_destroy(e0);
    kn_event_destroy(e1);
    kn_event_destroy(NULL);
    kn_stream_destroy(s);
    kn_stream_destroy(NULL);
    TAP_IS_INT(kn_sync(ctx), 0, "kn_sync");
}

static void check_model_args(struct kn_ctx *ctx)
{
    uint32_t dims[3] = { 4, 3, 2 }, bad[3] = { 4, 0, 2 };
    struct kn_model_desc d = { .dims = dims, .n_dims = 3, .seed = 1,
                               .precision = KN_F32, .max_batch = 2 };
    struct kn_model *m = NULL, *m2 = NULL;
    float x[3 * 4] = { 0 }, w[12], w2[12];
    int32_t y[3] = { 0, 1, 1 };
    struct kn_mem mem;

    TAP_IS_INT(kn_model_create(ctx, &d, &m), 0, "create 4-3-2");
    TAP_IS_INT(kn_model_layers(m), 2, "2 layers");
    kn_mem_stats(ctx, &mem);
    TAP_OK(mem.bytes > 0, "the model's memory is counted");
    d.dims = bad;
    TAP_IS_INT(kn_model_create(ctx, &d, &m2), -EINVAL, "a 0 width is "
               "-EINVAL");
    TAP_OK(strstr(kn_errmsg(ctx), "dims[1]") != NULL, "naming the dim");
    d.dims = dims;
    d.n_dims = 1;
    TAP_IS_INT(kn_model_create(ctx, &d, &m2), -EINVAL, "1 dim is -EINVAL");
    d.n_dims = 3;
    d.max_batch = 0;
    TAP_IS_INT(kn_model_create(ctx, &d, &m2), -EINVAL,
               "max_batch 0 is -EINVAL");
    d.max_batch = 2;
    d.precision = (enum kn_dtype)3;
    TAP_IS_INT(kn_model_create(ctx, &d, &m2), -EINVAL,
               "unknown precision is -EINVAL");
    d.precision = KN_F32;

    TAP_IS_INT(kn_train_step(m, NULL, x, y, 3, NULL, 0, NULL, NULL), -EINVAL,
               "a batch above max_batch is -EINVAL");
    TAP_OK(strstr(kn_errmsg(ctx), "max_batch") != NULL, "and says so");
    TAP_IS_INT(kn_train_step(m, NULL, x, y, 0, NULL, 0, NULL, NULL), -EINVAL,
               "an empty batch is -EINVAL");
    TAP_IS_INT(kn_train_step(m, NULL, x, NULL, 2, NULL, 0, NULL, NULL),
               -EINVAL, "NULL labels is -EINVAL");
    TAP_IS_INT(kn_model_read(m, KN_WEIGHTS, 2, w, NULL), -EINVAL,
               "layer out of range is -EINVAL");
    TAP_IS_INT(kn_model_read(m, (enum kn_tensor)7, 0, w, NULL), -EINVAL,
               "unknown tensor is -EINVAL");

    /* Labels out of range are counted, not used as indices. */
    {
        int32_t yb[2] = { 5, -1 };
        struct kn_metrics met;
        float loss = -1;
        int32_t correct = -1;

        TAP_IS_INT(kn_train_step(m, NULL, x, yb, 2, NULL, 0, &loss, &correct),
                   0, "bad labels do not fail the step");
        TAP_OK(loss == 0.0f && correct == 0, "they add no loss and are wrong");
        kn_model_metrics(m, NULL, KN_TRAIN, 0, &met);
        TAP_IS_INT(met.bad_labels, 2, "and are counted");
        TAP_IS_INT(met.samples, 2, "as samples");
    }

    /* Same seed, same weights; another seed, others. */
    d.seed = 1;
    kn_model_create(ctx, &d, &m2);
    kn_model_read(m, KN_WEIGHTS, 0, w, NULL);
    kn_model_read(m2, KN_WEIGHTS, 0, w2, NULL);
    TAP_OK(memcmp(w, w2, sizeof w) == 0, "the same seed gives the same "
           "weights");
    kn_model_destroy(m2);
    d.seed = 2;
    kn_model_create(ctx, &d, &m2);
    kn_model_read(m2, KN_WEIGHTS, 0, w2, NULL);
    TAP_OK(memcmp(w, w2, sizeof w) != 0, "another seed gives others");
    {
        double a = sqrt(6.0 / 4.0), mx = 0.0;

        for (int i = 0; i < 12; i++)
            mx = fabs(w2[i]) > mx ? fabs(w2[i]) : mx;
        TAP_OK(mx <= a && mx > 0.3 * a, "hidden weights lie in the "
               "Kaiming-uniform bound sqrt(6/fan_in)");
    }
    kn_model_destroy(m2);
    kn_model_destroy(m);
    kn_model_destroy(NULL);
    kn_mem_stats(ctx, &mem);
    TAP_IS_INT(mem.bytes, 0, "destroying the models returns their memory");
}

int main(void)
{
    struct kn_ctx *ctx;

    check_choice();
    ctx = ku_open(KN_BACKEND_CPU);
    check_memory(ctx);
    check_streams(ctx);
    check_model_args(ctx);
    kn_close(ctx);
    kn_close(NULL);
    return tap_done();
}
