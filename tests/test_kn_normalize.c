/*
 * test_kn_normalize.c - the CPU normalize kernel against a scalar reference
 * written here in double: HWC and CHW sources, 1 and 3 channels, fp32 and
 * bf16 outputs; the bf16 conversion's round-to-nearest-even on crafted bit
 * patterns; argument checks.
 *
 * Tolerances:
 *  - fp32: |out - ref| <= 2e-6 * (1 + |ref|), a few fp32 ulps of the three
 *    rounded operations (multiply by 1/255, subtract mean, multiply by
 *    1/std).
 *  - bf16: |out - ref| <= 2^-8 * |ref| + 2e-6: half a bf16 ulp (8 bits of
 *    significand) plus the fp32 error; and the bf16 output must equal,
 *    bit for bit, the fp32 output rounded to nearest even.
 */
#include <errno.h>

#include "kn_util.h"

static void check_bf16_rounding(void)
{
    static const struct { uint32_t in; uint16_t want; const char *what; }
    cases[] = {
        { 0x3f800000u, 0x3f80u, "1.0 is exact" },
        { 0x3f808000u, 0x3f80u, "tie with even below rounds down" },
        { 0x3f818000u, 0x3f82u, "tie with odd below rounds up" },
        { 0x3f808001u, 0x3f81u, "above the tie rounds up" },
        { 0x3f807fffu, 0x3f80u, "below the tie rounds down" },
        { 0xbf818000u, 0xbf82u, "negative tie rounds to even" },
        { 0x7f7fffffu, 0x7f80u, "FLT_MAX rounds to infinity" },
        { 0x7f800000u, 0x7f80u, "infinity stays" },
        { 0x00000001u, 0x0000u, "smallest subnormal rounds to zero" },
        { 0x80000000u, 0x8000u, "negative zero stays" },
    };
    float f;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(&f, &cases[i].in, sizeof f);
        TAP_IS_INT(kn_bf16_from_f32(f), cases[i].want, cases[i].what);
    }
    {
        uint32_t nan = 0x7f800001u;     /* signalling NaN, low bits only */
        uint16_t b;

        memcpy(&f, &nan, sizeof f);
        b = kn_bf16_from_f32(f);
        TAP_OK((b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0,
               "a NaN whose payload is in the low bits stays a NaN");
    }
    TAP_OK(kn_f32_from_bf16(0x4049u) == 3.140625f, "bf16 widens exactly");
}

/* The source pixel (image i, channel ch, pixel px) in either layout. */
static uint8_t pix(const uint8_t *src, enum kn_layout lay, uint32_t c,
                   size_t hw, uint32_t i, uint32_t ch, size_t px)
{
    size_t base = (size_t)i * c * hw;

    return lay == KN_CHW ? src[base + ch * hw + px] : src[base + px * c + ch];
}

static void check_case(struct kn_ctx *ctx, enum kn_layout lay, uint32_t c,
                       uint64_t key)
{
    static const float mean[3] = { 0.485f, 0.456f, 0.406f };
    static const float stdv[3] = { 0.229f, 0.224f, 0.225f };
    struct kn_norm p = { .n = 3, .c = c, .h = 5, .w = 7, .layout = lay };
    size_t hw = 35, count = (size_t)p.n * c * hw;
    uint8_t *src = ku_alloc(count);
    float *out32 = ku_alloc(count * sizeof(float));
    uint16_t *out16 = ku_alloc(count * sizeof(uint16_t));
    void *dsrc, *d32 = NULL, *d16 = NULL;
    size_t bad32 = 0, bad16 = 0, notrne = 0;
    double worst32 = 0.0, worst16 = 0.0;
    int rc32, rc16;

    for (uint32_t ch = 0; ch < c; ch++) {
        p.mean[ch] = c == 1 ? 0.2860f : mean[ch];
        p.std[ch] = c == 1 ? 0.3530f : stdv[ch];
    }
    /* Every byte value appears: the first 256 elements are 0..255. */
    for (size_t i = 0; i < count; i++)
        src[i] = i < 256 ? (uint8_t)i : (uint8_t)(ku_mix(key + i) >> 56);
    dsrc = ku_upload(ctx, src, count);
    if (kn_buf_alloc(ctx, count * sizeof(float), &d32) < 0 ||
        kn_buf_alloc(ctx, count * sizeof(uint16_t), &d16) < 0) {
        printf("Bail out! %s\n", kn_errmsg(ctx));
        exit(1);
    }
    p.out = KN_F32;
    rc32 = kn_normalize(ctx, NULL, &p, dsrc, d32);
    p.out = KN_BF16;
    rc16 = kn_normalize(ctx, NULL, &p, dsrc, d16);
    ku_download(ctx, out32, d32, count * sizeof(float));
    ku_download(ctx, out16, d16, count * sizeof(uint16_t));

    for (uint32_t i = 0; i < p.n; i++)
        for (uint32_t ch = 0; ch < c; ch++)
            for (size_t px = 0; px < hw; px++) {
                size_t o = ((size_t)i * c + ch) * hw + px;
                double ref = ((double)pix(src, lay, c, hw, i, ch, px) / 255.0
                              - p.mean[ch]) / p.std[ch];
                double e32 = fabs(out32[o] - ref);
                double e16 = fabs(kn_f32_from_bf16(out16[o]) - ref);

                if (!(e32 <= 2e-6 * (1.0 + fabs(ref))))
                    bad32++;
                if (!(e16 <= ldexp(fabs(ref), -8) + 2e-6))
                    bad16++;
                if (out16[o] != kn_bf16_from_f32(out32[o]))
                    notrne++;
                worst32 = e32 > worst32 ? e32 : worst32;
                worst16 = e16 > worst16 ? e16 : worst16;
            }

    const char *ln = lay == KN_HWC ? "HWC" : "CHW";
    TAP_IS_INT(rc32, 0, "kn_normalize fp32 returns 0");
    TAP_IS_INT(rc16, 0, "kn_normalize bf16 returns 0");
    if (!tap_ok(bad32 == 0, "%s, %u channel(s), fp32: %zu values within "
                "2e-6*(1+|ref|) of the double reference", ln, c, count))
        tap_diag("  %zu out of tolerance, worst error %g", bad32, worst32);
    if (!tap_ok(bad16 == 0, "%s, %u channel(s), bf16: %zu values within "
                "2^-8*|ref| + 2e-6", ln, c, count))
        tap_diag("  %zu out of tolerance, worst error %g", bad16, worst16);
    if (!tap_ok(notrne == 0, "%s, %u channel(s): bf16 output is the fp32 "
                "output rounded to nearest even", ln, c))
        tap_diag("  %zu differ", notrne);

    kn_buf_free(ctx, dsrc);
    kn_buf_free(ctx, d32);
    kn_buf_free(ctx, d16);
    free(src);
    free(out32);
    free(out16);
}

static void check_args(struct kn_ctx *ctx)
{
    struct kn_norm p = { .n = 1, .c = 1, .h = 2, .w = 2, .layout = KN_HWC,
                         .out = KN_F32, .mean = { 0.5f }, .std = { 0.5f } };
    uint8_t src[4] = { 0, 64, 128, 255 };
    float dst[4] = { 7, 7, 7, 7 };

    p.c = 0;
    TAP_IS_INT(kn_normalize(ctx, NULL, &p, src, dst), -EINVAL,
               "0 channels is -EINVAL");
    TAP_OK(strstr(kn_errmsg(ctx), "channels") != NULL,
           "the message names the channels");
    p.c = KN_MAX_CHANNELS + 1;
    TAP_IS_INT(kn_normalize(ctx, NULL, &p, src, dst), -EINVAL,
               "too many channels is -EINVAL");
    p.c = 1;
    p.std[0] = 0.0f;
    TAP_IS_INT(kn_normalize(ctx, NULL, &p, src, dst), -EINVAL,
               "std 0 is -EINVAL");
    p.std[0] = NAN;
    TAP_IS_INT(kn_normalize(ctx, NULL, &p, src, dst), -EINVAL,
               "std NaN is -EINVAL");
    p.std[0] = 0.5f;
    p.layout = (enum kn_layout)7;
    TAP_IS_INT(kn_normalize(ctx, NULL, &p, src, dst), -EINVAL,
               "unknown layout is -EINVAL");
    p.layout = KN_HWC;
    TAP_IS_INT(kn_normalize(ctx, NULL, &p, NULL, dst), -EINVAL,
               "NULL source is -EINVAL");
    p.n = 0;
    TAP_IS_INT(kn_normalize(ctx, NULL, &p, src, dst), 0,
               "an empty batch is done");
    TAP_OK(dst[0] == 7 && dst[3] == 7, "an empty batch writes nothing");
    p.n = 1;
    TAP_IS_INT(kn_normalize(ctx, NULL, &p, src, dst), 0, "2x2 image");
    TAP_OK(dst[0] == -1.0f && dst[3] == 1.0f,
           "0 -> -1 and 255 -> 1 with mean 0.5, std 0.5");
}

int main(void)
{
    struct kn_ctx *ctx = ku_open(KN_BACKEND_CPU);

    check_bf16_rounding();
    for (int lay = KN_HWC; lay <= KN_CHW; lay++) {
        check_case(ctx, (enum kn_layout)lay, 1, 11);
        check_case(ctx, (enum kn_layout)lay, 3, 12);
    }
    check_args(ctx);
    kn_close(ctx);
    return tap_done();
}
