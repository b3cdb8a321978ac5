/*
 * aug_avx512_affine.c - the nearest affine's pixels for AVX-512
 * (aug_simd.h: aug512_nearest): the bytes of aug_geom.c's nearest_row,
 * sixteen output pixels of a row a step.
 *
 *   the copy       The image is read from a copy in the caller's scratch:
 *                  one byte a pixel for one channel; otherwise four (the
 *                  pixel's c channel bytes, then zeros) whatever the
 *                  layout, so that one aligned dword load fetches a
 *                  pixel's every channel (a CHW image would take c
 *                  gathers a step, one a plane).  AUG512_SLACK zero bytes
 *                  follow it: the window loads below may run that far.
 *   source pixel   The baseline's float32 operations lane by lane, bx * r[0]
 *                  and bx * r[3] once a column (they do not depend on the
 *                  row): gx and gy with a packed FMA where it uses fmaf and
 *                  a separate add where it uses +, rint and the conversion
 *                  to int32 as one conversion rounding to nearest even,
 *                  then the bounds test as an unsigned compare of those
 *                  integers (the same test: see source16), idx = ry * w + rx.
 *   fetch          A masked dword gather at the sixteen pixels (the lanes
 *                  outside keep the fill, the gather's pass-through); none
 *                  when all are outside.  A gather costs about a cycle an
 *                  element, so where a row's steps mostly read one source
 *                  row (a shear along x, a zoom, a small turn), a step all
 *                  inside and within a window of 32 pixels from lane 0's
 *                  (128 for one channel) takes two loads of the window and
 *                  a two-table permute (vpermi2d; vpermi2b) instead.
 *   store          One channel: the dwords' low bytes (vpmovdb).  Four
 *                  bytes a pixel: one byte permute (vpermb) into c runs of
 *                  16 bytes, one a plane (CHW), or into 16 pixels of c
 *                  bytes (HWC); the last step of a row masked.
 */
#include "aug_simd.h"

#include <math.h>
#include <string.h>

#ifndef AUG_NO_AVX512

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi")
#include <immintrin.h>

/* Bytes read past the copy: a window of 32 dwords or 128 bytes at its
 * last pixel. */
#define AUG512_SLACK 128

/* The grid's constants in lanes, the fill, the store's permute. */
struct row_ctx {
    __m512 r[6], sfx, sfy;
    __m512i wi, hi, fill, order; /* order: the store's byte permute (c > 1) */
    const float *bx0, *bx3;      /* column x's bx * r[0] and bx * r[3] */
    const uint8_t *src;          /* the copy */
    uint8_t *dst;
    uint32_t iw, ih, c, span;    /* span: of a window, in pixels; 0: try none */
    bool chw;
};

static const int32_t IOTA[16] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };

/* The copy's bytes with its slack, rounded to 64: the columns' products
 * follow. */
static size_t copy_bytes(uint32_t w, uint32_t h, uint32_t c)
{
    return ((size_t)w * h * (c == 1 ? 1 : 4) + AUG512_SLACK + 63) / 64 * 64;
}

size_t aug512_nearest_scratch(uint32_t w, uint32_t h, uint32_t c)
{
    return copy_bytes(w, h, c) + 2 * sizeof(float) * (((size_t)w + 15) / 16 * 16);
}

/* The source pixel of output pixels x..x+15 of the row at by, *in the
 * lanes inside the image, as nearest_row computes it.  rint and the
 * conversion are one: a conversion rounding to nearest even; the bounds
 * test on the rounded floats is the same as an unsigned one on these
 * integers (-0 converts to 0; a NaN or a value past the int32 range to
 * INT32_MIN, outside as an unsigned). */
static inline __m512i source16(const struct row_ctx *R, __m512 by, uint32_t x, __mmask16 *in)
{
    const __m512 one = _mm512_set1_ps(1.0f), mhalf = _mm512_set1_ps(-0.5f);
    __m512 gx = _mm512_add_ps(_mm512_fmadd_ps(by, R->r[1], _mm512_loadu_ps(R->bx0 + x)),
                              R->r[2]);
    __m512 gy = _mm512_add_ps(_mm512_fmadd_ps(by, R->r[4], _mm512_loadu_ps(R->bx3 + x)),
                              R->r[5]);
    __m512i rx = _mm512_cvt_roundps_epi32(_mm512_fmadd_ps(_mm512_add_ps(gx, one), R->sfx, mhalf),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i ry = _mm512_cvt_roundps_epi32(_mm512_fmadd_ps(_mm512_add_ps(gy, one), R->sfy, mhalf),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);

    *in = _mm512_mask_cmplt_epu32_mask(_mm512_cmplt_epu32_mask(rx, R->wi), ry, R->hi);
    return _mm512_add_epi32(_mm512_mullo_epi32(ry, R->wi), rx);
}

/* True when all 16 lanes of idx lie in [base, base + span), base lane
 * 0's: *base and *rel (idx - base) set either way. */
static inline bool in_window(__m512i idx, uint32_t span, int32_t *base, __m512i *rel)
{
    *base = _mm_cvtsi128_si32(_mm512_castsi512_si128(idx));
    *rel = _mm512_sub_epi32(idx, _mm512_set1_epi32(*base));
    return _mm512_cmplt_epu32_mask(*rel, _mm512_set1_epi32((int32_t)span)) == 0xffff;
}

/* The 16 pixels' dwords from a copy of four bytes a pixel. */
static inline __m512i fetch4(const struct row_ctx *R, __m512i idx, __mmask16 in)
{
    __m512i rel;
    int32_t base;

    if (!in)
        return R->fill;
    if (R->span && in == 0xffff && in_window(idx, R->span, &base, &rel)) {
        const uint8_t *p = R->src + (size_t)base * 4;

        return _mm512_permutex2var_epi32(_mm512_loadu_si512(p), rel,
                                         _mm512_loadu_si512(p + 64));
    }
    return _mm512_mask_i32gather_epi32(R->fill, in, idx, R->src, 4);
}

/* The 16 pixels' bytes, in the dwords' low bytes, from a copy of one byte
 * a pixel. */
static inline __m512i fetch1(const struct row_ctx *R, __m512i idx, __mmask16 in)
{
    __m512i rel;
    int32_t base;

    if (!in)
        return R->fill;
    if (R->span && in == 0xffff && in_window(idx, R->span, &base, &rel)) {
        const uint8_t *p = R->src + base;
        __m512i sel = _mm512_castsi128_si512(_mm512_cvtepi32_epi8(rel));

        return _mm512_cvtepu8_epi32(_mm512_castsi512_si128(_mm512_permutex2var_epi8(
            _mm512_loadu_si512(p), sel, _mm512_loadu_si512(p + 64))));
    }
    return _mm512_mask_i32gather_epi32(R->fill, in, idx, R->src, 1);
}

/* Output row y. */
static void row(const struct row_ctx *R, uint32_t y, float by_)
{
    __m512 by = _mm512_set1_ps(by_);
    size_t plane = (size_t)R->iw * R->ih, at = (size_t)y * R->iw;
    uint32_t w = R->iw, c = R->c;

    for (uint32_t x = 0; x < w; x += 16) {
        uint32_t n = w - x >= 16 ? 16 : w - x;
        __mmask16 lanes = (__mmask16)((1u << n) - 1), in;
        __m512i idx = source16(R, by, x, &in);
        __m512i v, o;

        in &= lanes;
        if (c == 1) {
            _mm512_mask_cvtepi32_storeu_epi8(R->dst + at + x, lanes, fetch1(R, idx, in));
            continue;
        }
        v = fetch4(R, idx, in);
        o = _mm512_permutexvar_epi8(R->order, v);
        if (!R->chw) {
            __mmask64 bytes = n * c >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n * c)) - 1);

            _mm512_mask_storeu_epi8(R->dst + (at + x) * c, bytes, o);
            continue;
        }
        if (lanes == 0xffff) { /* plane ch's 16 bytes: lane ch of o */
            uint8_t *d = R->dst + at + x;

            _mm_storeu_si128((__m128i *)(void *)d, _mm512_castsi512_si128(o));
            _mm_storeu_si128((__m128i *)(void *)(d + plane), _mm512_extracti32x4_epi32(o, 1));
            if (c > 2)
                _mm_storeu_si128((__m128i *)(void *)(d + 2 * plane),
                                 _mm512_extracti32x4_epi32(o, 2));
            if (c > 3)
                _mm_storeu_si128((__m128i *)(void *)(d + 3 * plane),
                                 _mm512_extracti32x4_epi32(o, 3));
            continue;
        }
        for (uint32_t ch = 0; ch < c; ch++) { /* plane ch's 16 bytes, then the next's */
            _mm_mask_storeu_epi8(R->dst + ch * plane + at + x, lanes, _mm512_castsi512_si128(o));
            o = _mm512_alignr_epi32(o, o, 4);
        }
    }
}

/* The copy at four bytes a pixel of the CHW planes of npix pixels at px
 * into s: 64 pixels a step, each plane's 64 bytes loaded once; the 16
 * pixels of quarter q from two two-table byte permutes, [p0 p1 p0 p1] of
 * planes 0 and 1 and [p2 p3 p2 p3] of planes 2 and 3 (zeros where there
 * are fewer), merged at bytes 2 and 3. */
static void copy4_planes(uint8_t *s, const uint8_t *px, size_t npix, uint32_t c)
{
    uint8_t index[64];
    __m512i I[4], p[4];
    const __mmask64 hi = 0xccccccccccccccccu; /* bytes 2 and 3 of each dword */

    for (uint32_t j = 0; j < 64; j++)
        index[j] = (uint8_t)(j / 4 + (j % 2 ? 64 : 0));
    I[0] = _mm512_loadu_si512(index);
    for (int q = 1; q < 4; q++)
        I[q] = _mm512_add_epi8(I[0], _mm512_set1_epi8((char)(16 * q)));
    for (size_t i = 0; i < npix; i += 64) {
        size_t n = npix - i;
        __mmask64 k = n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);

        for (uint32_t ch = 0; ch < 4; ch++)
            p[ch] = ch < c ? _mm512_maskz_loadu_epi8(k, px + ch * npix + i)
                           : _mm512_setzero_si512();
        for (uint32_t q = 0; q < 4 && 16 * q < n; q++) {
            __m512i v = _mm512_mask_blend_epi8(hi, _mm512_permutex2var_epi8(p[0], I[q], p[1]),
                                               _mm512_permutex2var_epi8(p[2], I[q], p[3]));
            uint32_t m = n - 16 * q >= 16 ? 16 : (uint32_t)(n - 16 * q);

            _mm512_mask_storeu_epi32(s + (i + 16 * q) * 4, (__mmask16)((1u << m) - 1), v);
        }
    }
}

/* The copy at four bytes a pixel of the HWC image of npix pixels of c
 * bytes at px into s: 16 pixels a step, one byte permute. */
static void copy4_pixels(uint8_t *s, const uint8_t *px, size_t npix, uint32_t c)
{
    uint8_t spread[64];
    __mmask64 used = 0; /* the bytes of channels: the rest zero */
    __m512i sp;
    size_t i = 0;

    /* byte 4j + ch of 16 pixels from byte c * j + ch */
    for (uint32_t j = 0; j < 64; j++) {
        spread[j] = (uint8_t)(j % 4 < c ? j / 4 * c + j % 4 : 0);
        used |= (__mmask64)(j % 4 < c) << j;
    }
    sp = _mm512_loadu_si512(spread);
    for (; i + 16 <= npix && i * c + 64 <= npix * c; i += 16) /* whole loads and stores */
        _mm512_storeu_si512(s + i * 4,
                            _mm512_maskz_permutexvar_epi8(used, sp, _mm512_loadu_si512(px + i * c)));
    for (; i < npix; i += 16) {
        uint32_t n = npix - i >= 16 ? 16 : (uint32_t)(npix - i);
        __mmask64 b = n * c >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n * c)) - 1);
        __m512i v = _mm512_maskz_permutexvar_epi8(used, sp, _mm512_maskz_loadu_epi8(b, px + i * c));

        _mm512_mask_storeu_epi32(s + i * 4, (__mmask16)((1u << n) - 1), v);
    }
}

void aug512_nearest(const struct aug_grid *g, uint8_t *px, uint32_t w, uint32_t h, uint32_t c,
                    bool chw, const uint8_t *fill, uint8_t *scratch)
{
    size_t npix = (size_t)w * h;
    uint8_t order[64];
    uint32_t fd = 0;
    float hh = (float)(0.5 * h);
    float *bx0 = (float *)(void *)(scratch + copy_bytes(w, h, c)), *bx3 = bx0 + (w + 15) / 16 * 16;
    /* the source pixels per output pixel along a row, across and down */
    double across = fabs((double)g->r[0] * g->sfx), down = fabs((double)g->r[3] * g->sfy);
    struct row_ctx R = { .bx0 = bx0, .bx3 = bx3, .src = scratch, .dst = px,
                         .iw = w, .ih = h, .c = c, .chw = chw };

    for (int k = 0; k < 6; k++)
        R.r[k] = _mm512_set1_ps(g->r[k]);
    R.sfx = _mm512_set1_ps(g->sfx);
    R.sfy = _mm512_set1_ps(g->sfy);
    R.wi = _mm512_set1_epi32((int32_t)w);
    R.hi = _mm512_set1_epi32((int32_t)h);
    /* the windows when most steps of 16 read one source row, within the
     * window's width (c == 1: 128 bytes, else 32 dwords) */
    R.span = c == 1 ? 128 : 32;
    if (!(15 * down < 1.0 && 15 * across < R.span - 1))
        R.span = 0;
    /* bx * r[0] and bx * r[3] of each column, the steps' last padded */
    for (uint32_t x = 0; x < w; x += 16) {
        __m512i xs = _mm512_add_epi32(_mm512_set1_epi32((int32_t)x), _mm512_loadu_si512(IOTA));
        __m512 bx = _mm512_add_ps(
            _mm512_sub_ps(_mm512_cvtepi32_ps(xs), _mm512_set1_ps((float)(0.5 * w))),
            _mm512_set1_ps(0.5f));

        _mm512_storeu_ps(bx0 + x, _mm512_mul_ps(bx, R.r[0]));
        _mm512_storeu_ps(bx3 + x, _mm512_mul_ps(bx, R.r[3]));
    }
    /* byte j of the store: CHW plane j / 16's pixel j % 16, HWC pixel
     * j / c's channel j % c; each the byte 4 * pixel + channel */
    for (uint32_t j = 0; j < 64; j++)
        order[j] = (uint8_t)(chw ? j % 16 * 4 + j / 16 : j < 16 * c ? j / c * 4 + j % c : 0);
    R.order = _mm512_loadu_si512(order);
    for (uint32_t ch = 0; ch < c; ch++)
        fd |= (uint32_t)fill[ch] << (8 * ch);
    R.fill = _mm512_set1_epi32((int32_t)(c == 1 ? fill[0] : fd));
    if (c == 1) {
        memcpy(scratch, px, npix);
        memset(scratch + npix, 0, AUG512_SLACK);
    } else {
        if (chw)
            copy4_planes(scratch, px, npix, c);
        else
            copy4_pixels(scratch, px, npix, c);
        memset(scratch + npix * 4, 0, AUG512_SLACK);
    }
    for (uint32_t y = 0; y < h; y++)
        row(&R, y, (float)y - hh + 0.5f);
}

#endif
