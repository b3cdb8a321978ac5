/*
 * test_aug_simd.c - the photometric ops give the same bytes with the
 * AVX-512 kernels as with the baseline C (aug_simd.h): brightness,
 * contrast, saturation, solarize, autocontrast and equalize (the table
 * maps, the saturation blend and contrast's grayscale sum) over images of
 * many sizes (1x1, 2xN, odd, 224x224, one over 64 KiB a plane), 1 and 3
 * channels, CHW and HWC, contents from noise to constant, many parameters;
 * and the table map itself over every length 0..300 leaves the bytes
 * around the span alone.  Skipped (77) where the CPU or the build has no
 * AVX-512 kernels.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aug_color.h"
#include "aug_simd.h"
#include "tap.h"

enum content { NOISE, NARROW, CONSTANT, GRADIENT, KINDS };

static void fill(uint8_t *p, size_t n, enum content kind, uint64_t seed)
{
    struct rng_stream st;

    rng_stream_init(&st, seed, 0, 0);
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case NOISE: p[i] = (uint8_t)rng_below(&st, 256); break;
        case NARROW: p[i] = (uint8_t)(100 + rng_below(&st, 20)); break;
        case CONSTANT: p[i] = 77; break;
        default: p[i] = (uint8_t)(i * 7 / 5); break;
        }
    }
}

enum op { BRIGHTNESS, CONTRAST, SATURATION, SOLARIZE, AUTOCONTRAST, EQUALIZE, OPS };

static const char *const op_names[OPS] = {
    "brightness", "contrast", "saturation", "solarize", "autocontrast", "equalize",
};

static void run(enum op op, struct aug_img *im, float f)
{
    switch (op) {
    case BRIGHTNESS: aug_brightness(im, f); break;
    case CONTRAST: aug_contrast(im, f); break;
    case SATURATION: aug_saturation(im, f); break;
    case SOLARIZE: aug_solarize(im, f * 100.0f); break;
    case AUTOCONTRAST: aug_autocontrast(im); break;
    default: aug_equalize(im); break;
    }
}

/* op on a copy of src under each set; true when the bytes agree */
static bool same(enum op op, const uint8_t *src, uint32_t w, uint32_t h, uint32_t c,
                 uint32_t layout, float f, uint8_t *a, uint8_t *b)
{
    size_t n = (size_t)w * h * c;
    struct aug_img ia = {a, w, h, c, layout}, ib = {b, w, h, c, layout};

    memcpy(a, src, n);
    memcpy(b, src, n);
    if (aug_use_isa(AUG_ISA_BASELINE) < 0)
        tap_bail("the baseline set refused");
    run(op, &ia, f);
    if (aug_use_isa(AUG_ISA_AVX512) < 0)
        tap_bail("the AVX-512 set refused after it was found");
    run(op, &ib, f);
    if (memcmp(a, b, n) == 0)
        return true;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            tap_diag("%s %ux%ux%u layout %u factor %g: byte %zu baseline %u avx512 %u",
                     op_names[op], w, h, c, layout, f, i, a[i], b[i]);
            break;
        }
    return false;
}

static void check_ops(void)
{
    static const uint32_t sizes[][2] = {
        {1, 1}, {2, 5}, {5, 2}, {3, 3}, {7, 11}, {16, 4}, {21, 3}, {64, 1}, {65, 3},
        {31, 17}, {101, 77}, {224, 224}, {300, 250},
    };
    static const float factors[] = {0.0f, 0.25f, 0.6f, 1.0f, 1.37f, 2.0f, 3.5f};
    size_t most = 300 * 250 * 3;
    uint8_t *src = malloc(most), *a = malloc(most), *b = malloc(most);
    int bad[OPS] = {0}, runs[OPS] = {0};

    if (!src || !a || !b)
        tap_bail("no memory");
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (uint32_t c = 1; c <= 3; c += 2)
            for (uint32_t layout = AUG_CHW; layout <= AUG_HWC; layout++)
                for (int kind = 0; kind < KINDS; kind++) {
                    uint32_t w = sizes[s][0], h = sizes[s][1];

                    fill(src, (size_t)w * h * c, (enum content)kind, s * 97 + c * 7 + layout);
                    for (int op = 0; op < OPS; op++)
                        for (size_t k = 0; k < sizeof(factors) / sizeof(factors[0]); k++) {
                            runs[op]++;
                            bad[op] += !same((enum op)op, src, w, h, c, layout, factors[k],
                                             a, b);
                            if (op >= AUTOCONTRAST)
                                break; /* no parameter */
                        }
                }
    for (int op = 0; op < OPS; op++)
        tap_ok(bad[op] == 0, "%s: the same bytes under both sets (%d cases, %d differ)",
               op_names[op], runs[op], bad[op]);
    free(src);
    free(a);
    free(b);
}

static void check_lut_bounds(void)
{
    uint8_t lut[256], buf[300 + 128], want[300 + 128];
    int bad = 0;

    for (int v = 0; v < 256; v++)
        lut[v] = (uint8_t)(v * 37 + 11);
    for (size_t n = 0; n <= 300; n++) {
        fill(buf, sizeof(buf), NOISE, n);
        memcpy(want, buf, sizeof(want));
        for (size_t i = 0; i < n; i++)
            want[64 + i] = lut[want[64 + i]];
        aug512_lut(buf + 64, n, lut);
        bad += memcmp(buf, want, sizeof(buf)) != 0;
    }
    tap_ok(bad == 0, "aug512_lut: every length 0..300 maps its span and nothing else (%d differ)",
           bad);
}

int main(void)
{
    int rc = aug_use_isa(AUG_ISA_AVX512);

    if (rc == -ENOTSUP)
        tap_skip_all("no AVX-512 (F, BW, VL, DQ, VBMI) on this CPU or in this build");
    TAP_IS_INT(rc, 0, "the AVX-512 set is chosen");
    TAP_IS_STR(aug_isa_name(), "avx512", "and named");
    TAP_IS_INT(aug_use_isa((enum aug_isa)9), -EINVAL, "an unknown set is refused");
    check_lut_bounds();
    check_ops();
    return tap_done();
}
