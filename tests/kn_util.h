/*
 * kn_util.h - helpers shared by the kernels module's tests (test_kn_*.c):
 * deterministic pseudo-random data, backend-memory round trips and
 * tolerance measures.  Header-only, static functions, one copy per test.
 */
#ifndef RINGFEED_TESTS_KN_UTIL_H
#define RINGFEED_TESTS_KN_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "tap.h"

static uint64_t ku_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) from (key, i). */
__attribute__((unused))
static double ku_unif(uint64_t key, uint64_t i)
{
    return (double)(ku_mix(ku_mix(key) ^ ku_mix(i)) >> 11) *
           (1.0 / 9007199254740992.0);
}

/* Standard normal from (key, i), Box-Muller. */
__attribute__((unused))
static double ku_normal(uint64_t key, uint64_t i)
{
    double u1 = ku_unif(key, 2 * i) + 1e-12, u2 = ku_unif(key, 2 * i + 1);

    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Fills n floats uniform in [lo, hi). */
__attribute__((unused))
static void ku_fill(float *p, size_t n, uint64_t key, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(lo + (hi - lo) * ku_unif(key, i));
}

__attribute__((unused))
static void *ku_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);

    if (!p) {
        printf("Bail out! out of memory\n");
        exit(1);
    }
    return p;
}

/* A backend buffer holding a copy of host data; bails out on failure. */
__attribute__((unused))
static void *ku_upload(struct kn_ctx *ctx, const void *host, size_t bytes)
{
    void *d = NULL;

    if (kn_buf_alloc(ctx, bytes, &d) < 0 ||
        kn_copy(ctx, NULL, d, host, bytes, KN_H2D) < 0 || kn_sync(ctx) < 0) {
        printf("Bail out! upload of %zu bytes: %s\n", bytes, kn_errmsg(ctx));
        exit(1);
    }
    return d;
}

/* Copies backend memory to host; bails out on failure. */
__attribute__((unused))
static void ku_download(struct kn_ctx *ctx, void *host, const void *dev,
                        size_t bytes)
{
    if (kn_copy(ctx, NULL, host, dev, bytes, KN_D2H) < 0 ||
        kn_sync(ctx) < 0) {
        printf("Bail out! download of %zu bytes: %s\n", bytes,
               kn_errmsg(ctx));
        exit(1);
    }
}

__attribute__((unused))
static double ku_maxabs(const float *a, size_t n)
{
    double m = 0.0;

    for (size_t i = 0; i < n; i++)
        if (fabs((double)a[i]) > m)
            m = fabs((double)a[i]);
    return m;
}

/* max |a - b| / max(max |b|, floor): the error relative to the tensor's
 * scale, the measure the cross-backend and accumulation tests use.  NaN in
 * either input gives infinity, so a NaN never passes a check. */
__attribute__((unused))
static double ku_relerr(const float *a, const float *b, size_t n,
                        double floor)
{
    double m = 0.0, scale = ku_maxabs(b, n);

    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);

        if (!(d == d))
            return INFINITY;
        if (d > m)
            m = d;
    }
    return m / (scale > floor ? scale : floor);
}

/* The model's whole flat tensor `which`, layer by layer, into host memory
 * (w_0, b_0, w_1, b_1, ...); returns the count, bails out on failure. */
__attribute__((unused))
static size_t ku_read_all(struct kn_model *m, enum kn_tensor which,
                          const uint32_t *dims, float *out)
{
    size_t off = 0;

    for (uint32_t l = 0; l < kn_model_layers(m); l++) {
        size_t nw = (size_t)dims[l] * dims[l + 1];

        if (kn_model_read(m, which, l, out + off, out + off + nw) < 0) {
            printf("Bail out! kn_model_read layer %u failed\n", l);
            exit(1);
        }
        off += nw + dims[l + 1];
    }
    return off;
}

/* Opens a context on `want` or bails out. */
__attribute__((unused))
static struct kn_ctx *ku_open(enum kn_backend want)
{
    struct kn_ctx *ctx = NULL;
    char err[256];

    if (kn_open(&ctx, want, NULL, err, sizeof err) < 0) {
        printf("Bail out! kn_open: %s\n", err);
        exit(1);
    }
    return ctx;
}

#endif
