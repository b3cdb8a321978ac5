/*
 * h2d-sweep.c - host-to-device copy bandwidth from three kinds of host
 * memory, 64 KiB to 256 MiB: a ringfeed ring attached to a running daemon
 * and registered by libringfeed (rf_cuda_register: cudaHostRegister), a
 * cudaMallocHost buffer (the pinned baseline), and plain malloc memory
 * (pageable: the driver stages it through its own pinned buffers).  The
 * ring column should match cudaMallocHost; pageable is what a trainer gets
 * without pinning.
 *
 *   h2d-sweep --probe
 *       prints the device and exits 0, or "no CUDA device: ..." and 77
 *   h2d-sweep [--socket PATH] [--dataset NAME] [--batch B] [--depth D]
 *             [--max BYTES]
 *       attaches to NAME (default fmnist-train) with batch B (65536) and
 *       depth D (6) so the ring is big enough (about 300 MiB for
 *       Fashion-MNIST's 784-byte samples), then prints one table.  Sizes
 *       past the ring's mapping are left out of its column.
 *
 * Method: each size and source gets 2 untimed copies, then reps copies
 * (1 GiB worth, 5..200) on one stream between two CUDA events, read after
 * cudaEventSynchronize; GB/s is bytes / time, 1 GB = 1e9 bytes.
 *
 * Exit status: 0 done, 1 failed, 2 bad usage, 77 no CUDA device.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "ringfeed.h"

#define MIN_BYTES ((size_t)64 << 10)
#define MAX_BYTES ((size_t)256 << 20)

static const char *prog = "h2d-sweep";

static int check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    fprintf(stderr, "%s: %s: %s (%s)\n", prog, what, cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

static int probe(int print)
{
    struct cudaDeviceProp p;
    cudaError_t e;
    int n = 0;

    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("no CUDA device: cudaGetDeviceCount: %s\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    if (check(cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties") < 0)
        return 1;
    if (print)
        printf("cuda device 0: %s, sm_%d%d, %.1f GiB, %d devices\n", p.name, p.major, p.minor,
               (double)p.totalGlobalMem / (1 << 30), n);
    return 0;
}

/* GB/s of copies of bytes from src to dst on s; -1 on failure. */
static double rate(void *dst, const void *src, size_t bytes, cudaStream_t s, cudaEvent_t a,
                   cudaEvent_t b)
{
    size_t reps = ((size_t)1 << 30) / bytes;
    float ms = 0.0f;

    reps = reps < 5 ? 5 : reps > 200 ? 200 : reps;
    for (int i = 0; i < 2; i++)
        if (check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s), "warm-up") < 0)
            return -1;
    if (check(cudaEventRecord(a, s), "cudaEventRecord") < 0)
        return -1;
    for (size_t i = 0; i < reps; i++)
        if (check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s),
                  "cudaMemcpyAsync") < 0)
            return -1;
    if (check(cudaEventRecord(b, s), "cudaEventRecord") < 0 ||
        check(cudaEventSynchronize(b), "cudaEventSynchronize") < 0 ||
        check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime") < 0)
        return -1;
    return ms > 0 ? (double)bytes * (double)reps / ((double)ms * 1e-3) / 1e9 : -1;
}

static void size_name(size_t bytes, char *out, size_t cap)
{
    if (bytes >= (1u << 20))
        snprintf(out, cap, "%zu MiB", bytes >> 20);
    else
        snprintf(out, cap, "%zu KiB", bytes >> 10);
}

int main(int argc, char **argv)
{
    enum { O_SOCKET = 1, O_DATASET, O_BATCH, O_DEPTH, O_MAX, O_PROBE, O_HELP };
    static const struct option lo[] = {
        {"socket", required_argument, NULL, O_SOCKET},
        {"dataset", required_argument, NULL, O_DATASET},
        {"batch", required_argument, NULL, O_BATCH},
        {"depth", required_argument, NULL, O_DEPTH},
        {"max", required_argument, NULL, O_MAX},
        {"probe", no_argument, NULL, O_PROBE},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    struct rf_options ro;
    struct rf_client *c = NULL;
    struct rf_stats st;
    cudaStream_t s;
    cudaEvent_t a, b;
    size_t max = MAX_BYTES, ring_size = 0;
    void *dst = NULL, *pinned = NULL, *pageable = NULL, *ring = NULL;
    int opt, rc, status = 1;

    rf_options_init(&ro);
    ro.dataset = "fmnist-train";
    ro.batch = 65536;
    ro.depth = 6;
    ro.shuffle = 0;
    ro.name = "h2d-sweep";
    while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (opt) {
        case O_SOCKET: ro.socket = optarg; break;
        case O_DATASET: ro.dataset = optarg; break;
        case O_BATCH: ro.batch = (uint32_t)strtoul(optarg, NULL, 10); break;
        case O_DEPTH: ro.depth = (uint32_t)strtoul(optarg, NULL, 10); break;
        case O_MAX: max = (size_t)strtoull(optarg, NULL, 10); break;
        case O_PROBE: return probe(1);
        case O_HELP:
            printf("usage: %s --probe | [--socket PATH] [--dataset NAME] [--batch B] "
                   "[--depth D] [--max BYTES]\n", prog);
            return 0;
        default: return 2;
        }
    }
    if (max < MIN_BYTES) {
        fprintf(stderr, "%s: --max %zu: at least %zu\n", prog, max, MIN_BYTES);
        return 2;
    }
    rc = probe(1);
    if (rc)
        return rc;

    rc = rf_open(&ro, &c);
    if (rc < 0) {
        fprintf(stderr, "%s: attaching to %s: %s\n", prog, ro.dataset, rf_last_error(c));
        goto out;
    }
    rc = rf_cuda_register(c);
    ring = rf_ring_base(c, &ring_size);
    rf_get_stats(c, &st);
    printf("ring: %.1f MiB mapped from ringfeedd (%s, batch %u, depth %u); %s\n",
           (double)ring_size / (1 << 20), ro.dataset, ro.batch, st.depth, st.pin_note);
    if (rc < 0)
        printf("ring: not pinned (%s): its column measures pageable copies\n", rf_strerror(rc));

    if (check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate") < 0 ||
        check(cudaEventCreate(&a), "cudaEventCreate") < 0 ||
        check(cudaEventCreate(&b), "cudaEventCreate") < 0 ||
        check(cudaMalloc(&dst, max), "cudaMalloc") < 0 ||
        check(cudaMallocHost(&pinned, max), "cudaMallocHost") < 0)
        goto out;
    pageable = malloc(max);
    if (!pageable) {
        fprintf(stderr, "%s: out of memory\n", prog);
        goto out;
    }
    memset(pinned, 1, max);
    memset(pageable, 1, max); /* fault every page in before timing */

    printf("\n%-9s %12s %16s %14s %12s\n", "size", "ring GB/s", "cudaMallocHost", "pageable",
           "ring/pinned");
    for (size_t bytes = MIN_BYTES; bytes <= max; bytes *= 4) {
        char name[32], rs[32] = "-", ratio[32] = "-";
        double r = -1, p, g;

        size_name(bytes, name, sizeof(name));
        if (ring && bytes <= ring_size) {
            r = rate(dst, ring, bytes, s, a, b);
            if (r < 0)
                goto out;
            snprintf(rs, sizeof(rs), "%.2f", r);
        }
        p = rate(dst, pinned, bytes, s, a, b);
        g = rate(dst, pageable, bytes, s, a, b);
        if (p < 0 || g < 0)
            goto out;
        if (r > 0)
            snprintf(ratio, sizeof(ratio), "%.2f", r / p);
        printf("%-9s %12s %16.2f %14.2f %12s\n", name, rs, p, g, ratio);
        fflush(stdout);
    }
    status = 0;
out:
    rf_close(c);
    free(pageable);
    if (pinned)
        cudaFreeHost(pinned);
    if (dst)
        cudaFree(dst);
    return status;
}
