/*
 * test_client_cuda.c - libringfeed's CUDA hand-off on a real device: the
 * ring is registered (cudaHostGetFlags answers for its base), batches
 * copied with rf_cuda_copy_release on a stream arrive intact in device
 * memory, slots go back once the copies are done, a reconnect registers
 * the new mapping, and a device still works after rf_close (nothing left
 * pending, no runtime error left behind).  Exits 77 without a device; the
 * same logic without one is test_client_handoff.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "fake_daemon.h"
#include "ringfeed.h"
#include "tap.h"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define DEPTH 4
#define BATCH 16
#define SAMPLE 8192
#define BPE 5
#define N 40


static struct fake_fleet g_fleet = {
    .depth = DEPTH, .batch = BATCH, .sample = SAMPLE, .bpe = BPE, .seals = SEALS,
};

static int handler(struct fake *f, int conn, const char *line)
{
    (void)f;
    return fake_fleet_attach(&g_fleet, conn, line);
}

static int registered(const void *p)
{
    unsigned flags = 0;
    cudaError_t e = cudaHostGetFlags(&flags, (void *)p);

    if (e != cudaSuccess)
        (void)cudaGetLastError();
    return e == cudaSuccess;
}

int main(void)
{
    static uint8_t host[BATCH * SAMPLE];
    struct rf_options o;
    struct rf_client *c = NULL;
    struct rf_batch b;
    struct rf_stats st;
    struct fake f;
    cudaStream_t s;
    uint8_t *dev[2];
    void *base, *old_base;
    int n = 0, rc, all_ok = 1;

    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        tap_skip_all("no CUDA device");
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaMalloc((void **)&dev[0], sizeof(host)) != cudaSuccess ||
        cudaMalloc((void **)&dev[1], sizeof(host)) != cudaSuccess) {
        printf("Bail out! cannot set up the device\n");
        return 1;
    }
    if (fake_start(&f, NULL, handler, NULL) < 0) {
        printf("Bail out! fake daemon\n");
        return 1;
    }
    rf_options_init(&o);
    o.socket = f.path;
    o.dataset = "fm";
    o.batch = BATCH;
    o.rank = 0;
    o.world = 1;
    rc = rf_open(&o, &c);
    TAP_IS_INT(rc, 0, "rf_open");
    if (rc < 0)
        tap_diag("%s", rf_last_error(c));
    rc = rf_cuda_register(c);
    TAP_IS_INT(rc, 0, "rf_cuda_register");
    if (rc < 0)
        tap_diag("%s", rf_last_error(c));
    base = rf_ring_base(c, NULL);
    TAP_OK(registered(base), "the ring's base is registered memory");
    rf_get_stats(c, &st);
    TAP_IS_INT(st.pinned, 1, "stats: pinned");
    tap_diag("pin_note: %s", st.pin_note);

    /* copy batch k into dev[k % 2]; check batch k-1 once its copy is done */
    for (int k = 0; k < N; k++) {
        rc = rf_next(c, &b, 5000);
        if (rc < 0) {
            tap_diag("rf_next %d: %s", k, rf_last_error(c));
            all_ok = 0;
            break;
        }
        uint64_t epoch = b.epoch, seq = b.seq;
        uint32_t count = b.count;

        rc = rf_cuda_copy_release(c, &b, dev[k % 2], s);
        if (rc < 0) {
            tap_diag("rf_cuda_copy_release %d: %s", k, rf_last_error(c));
            all_ok = 0;
            break;
        }
        if (cudaMemcpyAsync(host, dev[k % 2], (size_t)count * SAMPLE, cudaMemcpyDeviceToHost,
                            s) != cudaSuccess ||
            cudaStreamSynchronize(s) != cudaSuccess) {
            all_ok = 0;
            break;
        }
        for (uint32_t i = 0; i < count; i++)
            for (uint64_t j = 0; j < SAMPLE; j += 97)
                all_ok &= host[i * SAMPLE + j] == fake_pixel(epoch, seq, i, j);
    }
    TAP_OK(all_ok, "40 batches copied to the device with rf_cuda_copy_release arrive intact");
    TAP_IS_INT(rf_poll(c), 0, "after the stream synchronized nothing is pending");
    TAP_IS_INT(atomic_load(&g_fleet.rings[0].hdr->released), N, "every slot went back");

    rf_next(c, &b, 5000);
    rf_cuda_copy_release(c, &b, dev[0], s);
    old_base = base;
    fake_drop(&f, 0);
    rc = rf_next(c, &b, 5000);
    TAP_IS_INT(rc, 0, "reconnect with a copy in flight");
    base = rf_ring_base(c, NULL);
    TAP_OK(base != old_base && registered(base), "the new mapping is registered");
    TAP_IS_INT(rf_release(c, &b), 0, "release behind the copy");
    cudaStreamSynchronize(s);
    TAP_IS_INT(rf_poll(c), 0, "  both go back");
    TAP_OK(!registered(old_base), "the old mapping was unregistered");
    rf_close(c);
    TAP_IS_INT(cudaGetLastError(), cudaSuccess, "no runtime error left behind");
    fake_fleet_stop(&g_fleet, &f);
    cudaFree(dev[0]);
    cudaFree(dev[1]);
    cudaStreamDestroy(s);
    return tap_done();
}
