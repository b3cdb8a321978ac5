/*
 * test_client_cuda.c - libringfeed's CUDA hand-off on a real device: the
 * ring is registered (cudaHostGetFlags answers for its base), batches
 * copied with rf_cuda_copy_release on a stream arrive intact in device
 * memory, slots go back once the copies are done, a reconnect registers
 * the new mapping, and a device still works after rf_close (nothing left
 * pending, no runtime error left behind).  Exits 77 without a device; the
 * same logic without one is test_client_handoff.c's.
 *
 * A slot goes back when its copy has FINISHED, not when it was queued:
 * check_in_flight blocks the stream with a gate (a host function,
 * cudaLaunchHostFunc, that waits for the test to open it), hands a batch
 * to rf_cuda_copy_release on that stream, and for GATE_HOLD_MS checks
 * several times that rf_poll() still reports it pending and that the
 * ring's `released` has not moved; it then takes batches up to the
 * held-batch limit and checks that rf_next with a short timeout waits for
 * the gated copy (-ETIMEDOUT, nothing released) rather than go past it.
 * Only after the gate opens and the stream synchronizes must rf_poll()
 * return 0 with `released` one further.  The gate opens on every path
 * (and by itself after GATE_SAFETY_MS, which the test reports as a
 * failure), so a failing test never hangs.  The loop before it
 * synchronizes after every copy and could not tell.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
#define GATE_HOLD_MS 100     /* how long the checks watch a gated copy */
#define GATE_SAFETY_MS 5000  /* the gate opens by itself after this */

/* Each ring publishes exactly what the test takes from the first: N
 * batches in the loop, DEPTH-1 in check_in_flight (the held-batch limit)
 * and 1 before the drop, so the batch after the drop must come from the
 * second ring. */
static struct fake_fleet g_fleet = {
    .depth = DEPTH, .batch = BATCH, .sample = SAMPLE, .bpe = BPE, .seals = SEALS,
    .per_ring = N + DEPTH,
};

/* The gate a host function waits at on the copy stream: the test opens it;
 * `expired` says it gave up waiting (GATE_SAFETY_MS) and let the stream go.
 * Static: the runtime's thread may read it after a failed check returns. */
static struct {
    atomic_int open, expired;
} g_gate;

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

static void nap_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000L};

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/* The host function holding the stream until the gate opens, or at most
 * GATE_SAFETY_MS.  Runs on the runtime's thread: no CUDA calls here. */
static void CUDART_CB gate_wait(void *arg)
{
    (void)arg;
    for (long ms = 0; !atomic_load(&g_gate.open); ms++) {
        if (ms >= GATE_SAFETY_MS) {
            atomic_store(&g_gate.expired, 1);
            return;
        }
        nap_ms(1);
    }
}

static uint64_t released(void)
{
    return atomic_load(&g_fleet.rings[0].hdr->released);
}

/*
 * A copy still in flight keeps its slot: with the stream gated, the batch
 * handed to rf_cuda_copy_release stays pending and `released` stays put,
 * also through rf_next at the held-batch limit; once the gate opens and the
 * stream is synchronized it goes back, exactly one.  Expects nothing held
 * or pending and the first ring live; leaves the same, the gate open and
 * the stream idle on every path.
 */
static void check_in_flight(struct rf_client *c, cudaStream_t s, void *dev)
{
    struct rf_batch b, more[DEPTH];
    uint64_t before = released(), seq;
    int rc, n_more = 0, pending_ok = 1, released_ok = 1, queued = 0;
    cudaError_t e;

    atomic_store(&g_gate.open, 0);
    atomic_store(&g_gate.expired, 0);
    rc = rf_next(c, &b, 5000);
    TAP_IS_INT(rc, 0, "in flight: rf_next");
    if (rc < 0) {
        tap_diag("%s", rf_last_error(c));
        goto out;
    }
    seq = b.stream_seq;
    e = cudaLaunchHostFunc(s, gate_wait, NULL);
    if (!tap_ok(e == cudaSuccess, "in flight: a gate blocks the stream (cudaLaunchHostFunc)")) {
        tap_diag("cudaLaunchHostFunc: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError();
        rf_release(c, &b);
        goto out;
    }
    rc = rf_cuda_copy_release(c, &b, dev, s);
    TAP_IS_INT(rc, 0, "in flight: rf_cuda_copy_release behind the gate");
    if (rc < 0) {
        tap_diag("%s", rf_last_error(c));
        rf_release(c, &b);
        goto out;
    }
    queued = 1;
    for (int t = 0; t < GATE_HOLD_MS / 10; t++) {
        rc = rf_poll(c);
        if (rc != 1 && pending_ok)
            tap_diag("  after %d ms rf_poll gave %d", t * 10, rc);
        pending_ok &= rc == 1;
        released_ok &= released() == before;
        nap_ms(10);
    }
    tap_ok(pending_ok, "in flight: rf_poll reports the gated copy pending for %d ms",
           GATE_HOLD_MS);
    if (!tap_ok(released_ok, "in flight: its slot is not released while the copy waits"))
        tap_diag("  released went from %" PRIu64 " to %" PRIu64 " with the copy of batch %"
                 PRIu64 " not yet run", before, released(), seq);

    /* at the held-batch limit rf_next waits for the oldest copy (ringfeed.h):
     * it must time out, not go past it */
    while (n_more < DEPTH - 2 && (rc = rf_next(c, &more[n_more], 5000)) == 0)
        n_more++;
    if (!tap_ok(n_more == DEPTH - 2, "in flight: the other batches up to the limit come"))
        tap_diag("  rf_next after %d: %s", n_more, rf_last_error(c));
    rc = rf_next(c, &b, 50);
    TAP_IS_INT(rc, -ETIMEDOUT, "in flight: at the limit rf_next times out on the gated copy");
    if (rc == 0)
        more[n_more++] = b; /* wrong, but hand it back below */
    TAP_IS_INT(rf_poll(c), 1, "  it is still pending");
    TAP_OK(released() == before, "  and nothing was released");
    TAP_OK(!atomic_load(&g_gate.expired), "the gate was still closed for all of the above");

out:
    atomic_store(&g_gate.open, 1);
    e = cudaStreamSynchronize(s);
    if (!tap_ok(e == cudaSuccess, "in flight: the stream synchronizes once the gate opens")) {
        tap_diag("cudaStreamSynchronize: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        (void)cudaGetLastError();
    }
    if (queued) {
        TAP_IS_INT(rf_poll(c), 0, "in flight: once the copy is done nothing is pending");
        TAP_IS_INT(released(), before + 1, "  and its slot went back, exactly one");
    }
    for (int i = 0; i < n_more; i++)
        rf_release(c, &more[i]);
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

    check_in_flight(c, s, dev[0]);

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
