/*
 * aug_avx512_affine.c - the affine's pixels for AVX-512 (aug_simd.h:
 * aug512_affine): the bytes of aug_geom.c's nearest_row and bilinear_row,
 * sixteen output pixels of a row a step.
 *
 *   the copy       The image is read from a copy in the caller's scratch:
 *                  one byte a pixel for one channel; otherwise four (the
 *                  pixel's c channel bytes, then zeros) whatever the
 *                  layout, so that one aligned dword load fetches a
 *                  pixel's every channel (a CHW image would take c
 *                  gathers a step, one a plane).  AUG512_FRONT zero bytes
 *                  before it and AUG512_SLACK after it: the reads below
 *                  may run that far.
 *   source         The baseline's float32 operations lane by lane, bx * r[0]
 *                  and bx * r[3] once a column (they do not depend on the
 *                  row): gx and gy with a packed FMA where it uses fmaf and
 *                  a separate add where it uses +; nearest's rint and the
 *                  conversion to int32 as one conversion rounding to
 *                  nearest even, bilinear's floors by roundscale; the
 *                  bounds tests as unsigned compares of those integers
 *                  (the same tests: see source16), idx = ry * w + rx.
 *   nearest        A masked dword gather at the sixteen pixels (the lanes
 *                  outside keep the fill, the gather's pass-through); none
 *                  when all are outside.  A gather costs about a cycle an
 *                  element, so where a row's steps mostly read one source
 *                  row (a shear along x, a zoom, a small turn), a step all
 *                  inside and within a window of 32 pixels from lane 0's
 *                  (128 for one channel) takes two loads of the window and
 *                  a two-table permute (vpermi2d; vpermi2b) instead.
 *   bilinear       Each pair of horizontal corners by one gather (two
 *                  qword gathers of eight lanes; one dword gather for one
 *                  channel), the corners outside zeroed, then per channel
 *                  bilinear_row's products and FMA chain, the fill mixed
 *                  in by the mask of ones, rint, to_u8's clamp.
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
 * last pixel; before it: a bilinear pair of corners at x0 = -1. */
#define AUG512_SLACK 128
#define AUG512_FRONT 64

/* The grid's constants in lanes, the fill, the store's permute. */
struct row_ctx {
    __m512 r[6], sfx, sfy;
    __m512i wi, hi, fill, order; /* order: the store's byte permute (c > 1) */
    __m512i chan[4];             /* bilinear: byte ch of each dword to its low byte */
    __m512 fl[4];                /* bilinear: (float)fill[ch] */
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
    return AUG512_FRONT + ((size_t)w * h * (c == 1 ? 1 : 4) + AUG512_SLACK + 63) / 64 * 64;
}

size_t aug512_affine_scratch(uint32_t w, uint32_t h, uint32_t c)
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

/* Stores output pixels x..x+n-1 (lanes: the first n) of row at (y * w)
 * from v, a dword a pixel: its low byte for one channel, else its first c
 * bytes through the order permute. */
static inline void emit(const struct row_ctx *R, size_t at, uint32_t x, uint32_t n,
                        __mmask16 lanes, __m512i v)
{
    size_t plane = (size_t)R->iw * R->ih;
    uint32_t c = R->c;
    __m512i o;

    if (c == 1) {
        _mm512_mask_cvtepi32_storeu_epi8(R->dst + at + x, lanes, v);
        return;
    }
    o = _mm512_permutexvar_epi8(R->order, v);
    if (!R->chw) {
        __mmask64 bytes = n * c >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n * c)) - 1);

        _mm512_mask_storeu_epi8(R->dst + (at + x) * c, bytes, o);
        return;
    }
    if (lanes == 0xffff) { /* plane ch's 16 bytes: lane ch of o */
        uint8_t *d = R->dst + at + x;

        _mm_storeu_si128((__m128i *)(void *)d, _mm512_castsi512_si128(o));
        _mm_storeu_si128((__m128i *)(void *)(d + plane), _mm512_extracti32x4_epi32(o, 1));
        if (c > 2)
            _mm_storeu_si128((__m128i *)(void *)(d + 2 * plane), _mm512_extracti32x4_epi32(o, 2));
        if (c > 3)
            _mm_storeu_si128((__m128i *)(void *)(d + 3 * plane), _mm512_extracti32x4_epi32(o, 3));
        return;
    }
    for (uint32_t ch = 0; ch < c; ch++) { /* plane ch's 16 bytes, then the next's */
        _mm_mask_storeu_epi8(R->dst + ch * plane + at + x, lanes, _mm512_castsi512_si128(o));
        o = _mm512_alignr_epi32(o, o, 4);
    }
}

/* Output row y of the nearest affine. */
static void row_nearest(const struct row_ctx *R, uint32_t y, float by_)
{
    __m512 by = _mm512_set1_ps(by_);
    size_t at = (size_t)y * R->iw;
    uint32_t w = R->iw;

    for (uint32_t x = 0; x < w; x += 16) {
        uint32_t n = w - x >= 16 ? 16 : w - x;
        __mmask16 lanes = (__mmask16)((1u << n) - 1), in;
        __m512i idx = source16(R, by, x, &in);

        in &= lanes;
        emit(R, at, x, n, lanes, R->c == 1 ? fetch1(R, idx, in) : fetch4(R, idx, in));
    }
}

/* Two horizontal neighbours, pixels idx and idx + 1 of the copy, as *a
 * and *b (a dword a pixel), each 0 where its lanes ka, kb are not: one
 * gather reads both, a qword at idx for four bytes a pixel (eight lanes a
 * gather), a dword at byte idx for one (bytes 0 and 1).  A lane with only
 * idx + 1 inside reads pixel idx = -1 of a row: AUG512_FRONT covers the
 * first row's. */
static inline void gather_pair(const struct row_ctx *R, __m512i idx, __mmask16 ka,
                               __mmask16 kb, __m512i *a, __m512i *b)
{
    const __m512i zero = _mm512_setzero_si512();
    __mmask16 k = ka | kb;

    if (!k) {
        *a = *b = zero;
        return;
    }
    if (R->c == 1) {
        __m512i v = _mm512_mask_i32gather_epi32(zero, k, idx, R->src, 1);

        *a = _mm512_maskz_mov_epi32(ka, v);
        *b = _mm512_maskz_mov_epi32(kb, _mm512_srli_epi32(v, 8));
        return;
    }
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26,
                                           28, 30);
    __m512i lo = _mm512_mask_i32gather_epi64(zero, (__mmask8)k, _mm512_castsi512_si256(idx),
                                             R->src, 4);
    __m512i hi = _mm512_mask_i32gather_epi64(zero, (__mmask8)(k >> 8),
                                             _mm512_extracti64x4_epi64(idx, 1), R->src, 4);

    *a = _mm512_maskz_permutex2var_epi32(ka, lo, even, hi);
    *b = _mm512_maskz_permutex2var_epi32(kb, lo, _mm512_add_epi32(even, _mm512_set1_epi32(1)),
                                         hi);
}

/* Byte ch of each dword of v as a float. */
static inline __m512 channel(const struct row_ctx *R, __m512i v, uint32_t ch)
{
    return _mm512_cvtepi32_ps(_mm512_shuffle_epi8(v, R->chan[ch]));
}

/* Output row y of the bilinear affine: bilinear_row's operations, lane by
 * lane.  The corners' bounds tests as nearest's, on the truncations of
 * the floors x0, y0 and of them plus one (exact wherever either is
 * inside: the sides are exact floats). */
static void row_bilinear(const struct row_ctx *R, uint32_t y, float by_)
{
    const __m512 one = _mm512_set1_ps(1.0f), mhalf = _mm512_set1_ps(-0.5f);
    const __m512i i1 = _mm512_set1_epi32(1);
    __m512 by = _mm512_set1_ps(by_);
    size_t at = (size_t)y * R->iw, plane = (size_t)R->iw * R->ih;
    uint32_t w = R->iw;

    for (uint32_t x = 0; x < w; x += 16) {
        uint32_t n = w - x >= 16 ? 16 : w - x;
        __mmask16 lanes = (__mmask16)((1u << n) - 1), kx0, kx1, ky0, ky1, in[4];
        __m512 gx = _mm512_add_ps(_mm512_fmadd_ps(by, R->r[1], _mm512_loadu_ps(R->bx0 + x)),
                                  R->r[2]);
        __m512 gy = _mm512_add_ps(_mm512_fmadd_ps(by, R->r[4], _mm512_loadu_ps(R->bx3 + x)),
                                  R->r[5]);
        __m512 ix = _mm512_fmadd_ps(_mm512_add_ps(gx, one), R->sfx, mhalf);
        __m512 iy = _mm512_fmadd_ps(_mm512_add_ps(gy, one), R->sfy, mhalf);
        __m512 x0 = _mm512_roundscale_ps(ix, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        __m512 y0 = _mm512_roundscale_ps(iy, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        __m512 we = _mm512_sub_ps(ix, x0), ea = _mm512_sub_ps(one, we);
        __m512 no = _mm512_sub_ps(iy, y0), so = _mm512_sub_ps(one, no);
        __m512 wt[4] = { _mm512_mul_ps(so, ea), _mm512_mul_ps(so, we), _mm512_mul_ps(no, ea),
                         _mm512_mul_ps(no, we) };
        __m512i xi = _mm512_cvttps_epi32(x0), yi = _mm512_cvttps_epi32(y0), idx, v[4], out;
        __m512 m, om;

        kx0 = _mm512_cmplt_epu32_mask(xi, R->wi);
        kx1 = _mm512_cmplt_epu32_mask(_mm512_add_epi32(xi, i1), R->wi);
        ky0 = _mm512_mask_cmplt_epu32_mask(lanes, yi, R->hi);
        ky1 = _mm512_mask_cmplt_epu32_mask(lanes, _mm512_add_epi32(yi, i1), R->hi);
        in[0] = kx0 & ky0;
        in[1] = kx1 & ky0;
        in[2] = kx0 & ky1;
        in[3] = kx1 & ky1;
        m = _mm512_maskz_mov_ps(in[0], wt[0]);
        for (int k = 1; k < 4; k++)
            m = _mm512_fmadd_ps(_mm512_maskz_mov_ps(in[k], one), wt[k], m);
        om = _mm512_sub_ps(one, m);
        idx = _mm512_add_epi32(_mm512_mullo_epi32(yi, R->wi), xi);
        gather_pair(R, idx, in[0], in[1], &v[0], &v[1]);
        gather_pair(R, _mm512_add_epi32(idx, R->wi), in[2], in[3], &v[2], &v[3]);
        out = _mm512_setzero_si512();
        for (uint32_t ch = 0; ch < R->c; ch++) {
            __m512 acc = _mm512_mul_ps(channel(R, v[0], ch), wt[0]), t;
            __m512i b;

            for (int k = 1; k < 4; k++)
                acc = _mm512_fmadd_ps(channel(R, v[k], ch), wt[k], acc);
            t = _mm512_roundscale_ps(_mm512_add_ps(_mm512_mul_ps(acc, m),
                                                   _mm512_mul_ps(om, R->fl[ch])),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            /* to_u8: <= 0 (and NaN, whose truncation's low byte is 0) is 0,
             * >= 255 is 255: max gives its second operand for a NaN */
            t = _mm512_min_ps(_mm512_max_ps(t, _mm512_setzero_ps()), _mm512_set1_ps(255.0f));
            b = _mm512_cvttps_epi32(t);
            if (R->chw || R->c == 1) { /* a plane's 16 bytes */
                _mm512_mask_cvtepi32_storeu_epi8(R->dst + ch * plane + at + x, lanes, b);
                continue;
            }
            out = _mm512_or_si512(out, _mm512_sll_epi32(b, _mm_cvtsi32_si128((int)(8 * ch))));
        }
        if (!R->chw && R->c > 1)
            emit(R, at, x, n, lanes, out);
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

void aug512_affine(const struct aug_grid *g, bool bilinear, uint8_t *px, uint32_t w, uint32_t h,
                   uint32_t c, bool chw, const uint8_t *fill, uint8_t *scratch)
{
    size_t npix = (size_t)w * h;
    uint8_t order[64];
    uint32_t fd = 0;
    float hh = (float)(0.5 * h);
    float *bx0 = (float *)(void *)(scratch + copy_bytes(w, h, c)), *bx3 = bx0 + (w + 15) / 16 * 16;
    /* the source pixels per output pixel along a row, across and down */
    double across = fabs((double)g->r[0] * g->sfx), down = fabs((double)g->r[3] * g->sfy);
    uint8_t *copy = scratch + AUG512_FRONT;
    struct row_ctx R = { .bx0 = bx0, .bx3 = bx3, .src = copy, .dst = px,
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
    if (bilinear || !(15 * down < 1.0 && 15 * across < R.span - 1))
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
    for (uint32_t ch = 0; ch < c; ch++) {
        uint8_t sel[64];

        for (uint32_t j = 0; j < 64; j++) /* byte ch of each dword, zeros above */
            sel[j] = j % 4 ? 0x80 : (uint8_t)(j + ch);
        R.chan[ch] = _mm512_loadu_si512(sel);
        R.fl[ch] = _mm512_set1_ps((float)fill[ch]);
    }
    if (c == 1) {
        memcpy(copy, px, npix);
        memset(copy + npix, 0, AUG512_SLACK);
    } else {
        if (chw)
            copy4_planes(copy, px, npix, c);
        else
            copy4_pixels(copy, px, npix, c);
        memset(copy + npix * 4, 0, AUG512_SLACK);
    }
    memset(scratch, 0, AUG512_FRONT);
    for (uint32_t y = 0; y < h; y++) {
        if (bilinear)
            row_bilinear(&R, y, (float)y - hh + 0.5f);
        else
            row_nearest(&R, y, (float)y - hh + 0.5f);
    }
}

#endif
