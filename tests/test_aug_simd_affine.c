/*
 * test_aug_simd_affine.c - the affine's AVX-512 kernel, nearest and
 * bilinear (daemon/worker/aug_avx512_affine.c), gives the baseline's
 * bytes: every image is warped with aug_use_isa(AUG_ISA_BASELINE) and with
 * aug_use_isa(AUG_ISA_AVX512) and the two compared byte for byte, over
 * sizes from 1x1 to 224x224 (rows shorter than, equal to and longer than
 * a step of 16, odd), 1 to 4 channels, CHW and HWC, fills given and not,
 * and parameters drawn at random (angles, fractional translations, scales,
 * shears, the policies' shears about the corner) plus the edges: a scale
 * so small that the grid overflows to infinity and NaN, one so large that
 * a few source pixels fill the image, right angles, everything outside.
 * The bytes past the image stay untouched.  A row of 2^24 pixels, the
 * widest the kernel takes (aug512_affine_fits), too.  Exits 77 (skip)
 * where the CPU lacks AVX-512 VBMI.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "aug_geom.h"
#include "aug_simd.h"
#include "tap.h"

#define GUARD 64 /* bytes after the image that no op may write */

struct params {
    float angle, tx, ty, scale, shx, shy;
};

static float uni(struct rng_stream *st, double lo, double hi)
{
    return (float)rng_uniform_range(st, lo, hi);
}

/* Case k of an image w x h: the edges first, then random draws. */
static struct params params_of(struct rng_stream *st, uint32_t k, uint32_t w, uint32_t h)
{
    static const struct params edges[] = {
        { 90.0f, 0, 0, 1, 0, 0 },     { 180.0f, 0, 0, 1, 0, 0 },   { -270.0f, 0.5f, 0, 1, 0, 0 },
        { 0, 0.5f, -0.5f, 1, 0, 0 },  { 0, 0, 0, 1e-39f, 0, 0 },   { 17.0f, 0, 0, 1e-30f, 3, 0 },
        { 3.0f, 0, 0, 1e3f, 0, 0 },   { 0, 1e6f, 0, 1, 0, 0 },     { 0, 0, 0, 0.5f, 0, 0 },
        { 0, 0, 0, 2.0f, 0, 0 },      { 0, 0, 0, 1, 30.0f, 0 },    { 0, 0, 0, 1, 0, -30.0f },
        { 0, 0, 0, 1.0f, 89.9f, 0 },  { 0, 0.25f, 0, 1, 0, 0 },
    };
    struct params p;
    double t;

    if (k < sizeof edges / sizeof *edges)
        return edges[k];
    switch (rng_below(st, 4)) {
    case 0: /* a policy's ShearX / ShearY, about the top-left corner */
        t = rng_uniform_range(st, -0.99, 0.99);
        p = (struct params){ .scale = 1.0f };
        if (rng_below(st, 2)) {
            p.shx = (float)(atan(t) * 180.0 / M_PI);
            p.tx = (float)(-t * h / 2.0);
        } else {
            p.shy = (float)(atan(t) * 180.0 / M_PI);
            p.ty = (float)(-t * w / 2.0);
        }
        return p;
    case 1: /* a rotation */
        return (struct params){ .angle = uni(st, -180, 180), .scale = 1.0f };
    default: /* RandomAffine's every parameter */
        return (struct params){ uni(st, -180, 180), uni(st, -0.3 * w, 0.3 * w),
                                uni(st, -0.3 * h, 0.3 * h), uni(st, 0.3, 3.0),
                                uni(st, -60, 60), uni(st, -60, 60) };
    }
}

/* Warps a copy of img under the set isa into out (w*h*c + GUARD bytes, the
 * guard preset); returns aug_affine's result. */
static int warp(enum aug_isa isa, const uint8_t *img, uint8_t *out, uint32_t w, uint32_t h,
                uint32_t c, enum aug_layout layout, enum aug_interp interp,
                const struct params *p, const uint8_t *fill, struct aug_scratch *s)
{
    size_t n = (size_t)w * h * c;
    struct aug_img im = { out, w, h, c, layout };

    if (aug_use_isa(isa) < 0)
        tap_bail("aug_use_isa(%d) failed after succeeding", isa);
    memcpy(out, img, n);
    memset(out + n, 0xa5, GUARD);
    return aug_affine(&im, p->angle, p->tx, p->ty, p->scale, p->shx, p->shy, interp, fill, s);
}

/* Every case for one size, channel count, layout and interpolation: one
 * check. */
static void check_shape(uint32_t w, uint32_t h, uint32_t c, enum aug_layout layout,
                        enum aug_interp interp, uint32_t cases, struct aug_scratch *s)
{
    size_t n = (size_t)w * h * c;
    uint8_t *img = malloc(n), *a = malloc(n + GUARD), *b = malloc(n + GUARD), fill[4];
    uint8_t guard[GUARD];
    struct rng_stream st;
    uint32_t bad = 0, first_bad = 0, fails = 0;
    size_t at = 0;

    if (!img || !a || !b)
        tap_bail("out of memory for a %ux%ux%u image", w, h, c);
    memset(guard, 0xa5, GUARD);
    rng_stream_init(&st, 25, w * 1000 + h, c * 100 + layout * 10 + interp);
    for (size_t i = 0; i < n; i++)
        img[i] = (uint8_t)rng_below(&st, 256);
    for (uint32_t k = 0; k < cases; k++) {
        struct params p = params_of(&st, k, w, h);
        const uint8_t *f = k % 3 == 2 ? NULL : fill;
        int ra, rb;

        for (uint32_t ch = 0; ch < 4; ch++)
            fill[ch] = (uint8_t)rng_below(&st, 256);
        ra = warp(AUG_ISA_BASELINE, img, a, w, h, c, layout, interp, &p, f, s);
        rb = warp(AUG_ISA_AVX512, img, b, w, h, c, layout, interp, &p, f, s);
        if (ra || rb) {
            fails++;
            continue;
        }
        if (memcmp(a, b, n) || memcmp(b + n, guard, GUARD)) {
            if (!bad++) {
                first_bad = k;
                while (at < n + GUARD && a[at] == b[at])
                    at++;
            }
        }
    }
    if (!tap_ok(!bad && !fails, "%ux%ux%u %s %s: %u cases byte-identical", w, h, c,
                layout == AUG_CHW ? "chw" : "hwc",
                interp == AUG_NEAREST ? "nearest" : "bilinear", cases)) {
        if (fails)
            tap_diag("  %u cases failed to run", fails);
        if (bad)
            tap_diag("  %u cases differ; the first, case %u, at byte %zu", bad, first_bad, at);
    }
    free(img);
    free(a);
    free(b);
}

int main(void)
{
    static const uint32_t sizes[][2] = {
        { 1, 1 },   { 2, 1 },   { 1, 2 },   { 2, 7 },    { 7, 2 },    { 15, 3 },
        { 16, 16 }, { 17, 5 },  { 31, 33 }, { 32, 32 },  { 48, 19 },  { 65, 64 },
        { 97, 13 }, { 13, 97 }, { 100, 75 }, { 224, 224 },
    };
    struct aug_scratch s = { 0 };

    if (aug_use_isa(AUG_ISA_AVX512) == -ENOTSUP)
        tap_skip_all("this CPU or build runs no AVX-512 VBMI kernels");
    for (int interp = AUG_NEAREST; interp <= AUG_BILINEAR; interp++)
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
            for (uint32_t c = 1; c <= 4; c++)
                for (int layout = AUG_CHW; layout <= AUG_HWC; layout++) {
                    uint32_t w = sizes[i][0], h = sizes[i][1];

                    check_shape(w, h, c, (enum aug_layout)layout, (enum aug_interp)interp,
                                w * h > 10000 ? 60 : 300, &s);
                }
    /* the widest row the kernel takes: 2^24 pixels, exact as a float */
    check_shape(1u << 24, 1, 1, AUG_CHW, AUG_NEAREST, 4, &s);
    check_shape(1u << 24, 1, 1, AUG_CHW, AUG_BILINEAR, 4, &s);
    aug_scratch_free(&s);
    return tap_done();
}
