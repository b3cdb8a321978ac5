/*
 * test_aug_simd_sharp.c - sharpness's AVX-512 row kernel
 * (daemon/worker/aug_avx512_sharp.c) gives the baseline's bytes: the
 * division by 26 as a multiply-high checked for every value the 3x3 sum
 * can give, then through the op itself (a row built to make each sum
 * 0..3315 once), then aug_sharpness run with aug_use_isa(BASELINE) and
 * with aug_use_isa(AVX512) on the same images compared byte for byte:
 * random, two-valued (0/255) and flat images of many sizes (1x1, 2xN,
 * 3x3, odd, row lengths at and around the kernel's 32 and 64 byte steps,
 * 224x224), 1 and 3 channels, CHW and HWC, factors drawn in [0, 2] and
 * beyond it, down to NaN and the infinities.  Exits 77 where the CPU or
 * build has no AVX-512 set.
 */
#include <errno.h>
#include <math.h>

#include "aug_color.h"
#include "aug_simd.h"
#include "tap.h"

struct size {
    uint32_t w, h;
};

/* widths and heights: the edges (1, 2, 3), odd ones, and CHW rows (w
 * bytes, step 1) and HWC rows (3w bytes, step 3) at and around the
 * kernel's 32- and 64-byte steps and its inside test j + 64 + step <= n */
static const struct size SIZES[] = {
    {1, 1},    {1, 7},    {7, 1},    {2, 2},    {2, 9},    {9, 2},    {3, 3},   {3, 4},
    {4, 3},    {5, 5},    {7, 3},    {11, 13},  {21, 3},   {22, 4},   {23, 5},  {31, 3},
    {32, 3},   {33, 4},   {34, 3},   {42, 3},   {43, 5},   {63, 3},   {64, 4},  {65, 3},
    {66, 5},   {67, 3},   {68, 3},   {95, 3},   {96, 4},   {97, 3},   {127, 3}, {128, 3},
    {129, 4},  {130, 3},  {131, 3},  {191, 5},  {193, 3},  {224, 224}, {299, 7}, {3, 300},
    {517, 9},
};

/* factors: the policies' and RandomAdjustSharpness's range, then beyond */
static const float SPECIAL[] = {
    0.0f,  1.0f,   2.0f,    0.5f,     1.5f,    0.1f,    1.9f,     0.99999994f, 1.0000001f,
    -0.0f, -1.0f,  -7.25f,  3.0f,     10.0f,   100.0f,  1e6f,     1e10f,       -1e10f,
    3e38f, -3e38f, 1e-8f,   1e-40f,   INFINITY, -INFINITY, NAN,
};

enum fill_kind { FILL_RANDOM, FILL_EXTREME, FILL_FLAT, FILL_KINDS };

static void fill(uint8_t *p, size_t n, enum fill_kind kind, struct rng_stream *st)
{
    uint8_t v = (uint8_t)rng_below(st, 256);

    for (size_t i = 0; i < n; i++)
        p[i] = kind == FILL_RANDOM    ? (uint8_t)rng_below(st, 256)
               : kind == FILL_EXTREME ? (uint8_t)(rng_below(st, 2) ? 255 : 0)
                                      : v;
}

/* The multiply-high's constant against every 2s + 13, s = 0..3315. */
static void check_div26(void)
{
    uint32_t bad = 0, first = 0;

    for (uint32_t s = 0; s <= 13 * 255; s++) {
        uint32_t x = 2 * s + 13;

        if ((x * AUG512_DIV26_MUL) >> AUG512_DIV26_SHIFT != x / 26 && !bad++)
            first = s;
    }
    tap_ok(AUG512_DIV26_MUL <= 0xffff && AUG512_DIV26_SHIFT >= 16,
           "div26: a 16-bit multiplier and a shift past the multiply-high's 16");
    tap_ok(!bad, "div26: (x * %u) >> %u == x / 26 for every x = 2s + 13, s in 0..3315 (%u wrong, "
           "first s %u)",
           AUG512_DIV26_MUL, AUG512_DIV26_SHIFT, bad, first);
}

/* One row of 3 * 3316 pixels between two others, the three columns
 * 3i .. 3i + 2 summing (centre 5 times) to i: with factor 0 the middle
 * row's byte 3i + 1 is the smoothed byte (2i + 13) / 26 itself, in either
 * set. */
static void check_every_sum(struct aug_scratch *scratch)
{
    enum { SUMS = 13 * 255 + 1, W = 3 * SUMS };
    static uint8_t px[3 * W];
    const char *name[] = {"baseline", "avx512"};
    enum aug_isa isa[] = {AUG_ISA_BASELINE, AUG_ISA_AVX512};

    for (int k = 0; k < 2; k++) {
        uint32_t bad = 0, first = 0;

        for (uint32_t i = 0; i < SUMS; i++) {
            uint32_t c = i / 13, r = i % 13, centre = c, plus = r; /* neighbours raised by 1 */
            uint8_t *blk[3] = {px + 3 * i, px + W + 3 * i, px + 2 * W + 3 * i};

            if (r >= 5) {
                centre = c + 1;
                plus = r - 5;
            }
            for (int y = 0, o = 0; y < 3; y++)
                for (int x = 0; x < 3; x++) {
                    if (y == 1 && x == 1)
                        continue;
                    blk[y][x] = (uint8_t)(c + (o++ < (int)plus));
                }
            blk[1][1] = (uint8_t)centre;
        }
        struct aug_img im = {px, W, 3, 1, AUG_CHW};

        aug_use_isa(isa[k]);
        if (aug_sharpness(&im, 0.0f, scratch) != 0) {
            tap_ok(0, "every sum (%s): aug_sharpness failed", name[k]);
            continue;
        }
        for (uint32_t i = 0; i < SUMS; i++)
            if (px[W + 3 * i + 1] != (2 * i + 13) / 26 && !bad++)
                first = i;
        tap_ok(!bad, "every sum (%s): factor 0 gives (2s + 13) / 26 for s = 0..3315 (%u wrong, "
               "first s %u)",
               name[k], bad, first);
    }
}

/* aug_sharpness in both sets on copies of src; true when every byte and
 * the return agree (the first difference described into why). */
static bool same(const uint8_t *src, uint8_t *a, uint8_t *b, const struct aug_img *shape,
                 float factor, struct aug_scratch *scratch, char *why, size_t whylen)
{
    size_t n = (size_t)shape->w * shape->h * shape->c;
    struct aug_img ia = *shape, ib = *shape;
    int ra, rb;

    memcpy(a, src, n);
    memcpy(b, src, n);
    ia.px = a;
    ib.px = b;
    aug_use_isa(AUG_ISA_BASELINE);
    ra = aug_sharpness(&ia, factor, scratch);
    aug_use_isa(AUG_ISA_AVX512);
    rb = aug_sharpness(&ib, factor, scratch);
    if (ra != rb) {
        snprintf(why, whylen, "factor %a: returned %d baseline, %d avx512", (double)factor, ra, rb);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            snprintf(why, whylen, "factor %a: byte %zu (of %zu): baseline %u, avx512 %u (source %u)",
                     (double)factor, i, n, a[i], b[i], src[i]);
            return false;
        }
    return true;
}

static void check_images(struct aug_scratch *scratch)
{
    static const char *kinds[] = {"random", "0/255", "flat"};
    struct rng_stream st;
    size_t nsizes = sizeof(SIZES) / sizeof(SIZES[0]);
    size_t nspecial = sizeof(SPECIAL) / sizeof(SPECIAL[0]);

    rng_stream_init(&st, 25, 0, 0);
    for (size_t si = 0; si < nsizes; si++)
        for (uint32_t layout = AUG_CHW; layout <= AUG_HWC; layout++)
            for (uint32_t c = 1; c <= 3; c += 2) {
                struct aug_img shape = {NULL, SIZES[si].w, SIZES[si].h, c, layout};
                size_t n = (size_t)shape.w * shape.h * c;
                uint8_t *src = malloc(n), *a = malloc(n), *b = malloc(n);
                bool big = n > 100000;
                uint32_t drawn = big ? 12 : 60, tried = 0;
                bool ok = true;
                char why[200] = "";

                if (!src || !a || !b)
                    tap_bail("out of memory");
                for (int kind = 0; kind < FILL_KINDS && ok; kind++) {
                    fill(src, n, (enum fill_kind)kind, &st);
                    for (size_t f = 0; f < nspecial + drawn && ok; f++, tried++) {
                        /* drawn: [0, 2) mostly, some in [-4, 6) */
                        float factor = f < nspecial ? SPECIAL[f]
                                       : f % 4      ? (float)rng_uniform_range(&st, 0.0, 2.0)
                                                    : (float)rng_uniform_range(&st, -4.0, 6.0);

                        ok = same(src, a, b, &shape, factor, scratch, why, sizeof(why));
                        if (!ok)
                            snprintf(why + strlen(why), sizeof(why) - strlen(why), ", %s image",
                                     kinds[kind]);
                    }
                }
                tap_ok(ok, "%ux%u %s c=%u: avx512 == baseline over %u factors x 3 images%s%s",
                       shape.w, shape.h, layout == AUG_CHW ? "CHW" : "HWC", c, tried,
                       ok ? "" : ": ", why);
                free(src);
                free(a);
                free(b);
            }
}

int main(void)
{
    struct aug_scratch scratch = {0};

    if (aug_use_isa(AUG_ISA_AVX512) == -ENOTSUP)
        tap_skip_all("this CPU or build has no AVX-512 set for the augmentation kernels");
    check_div26();
    check_every_sum(&scratch);
    check_images(&scratch);
    aug_scratch_free(&scratch);
    return tap_done();
}
