/*
 * aug_avx512.c - the augmentation ops' AVX-512 kernels (aug_simd.h): built
 * for AVX512F, BW, VL, DQ and VBMI (the pragma below) and run only where
 * aug_use_isa found them all.  Each computes the bytes of the baseline step
 * it stands for in aug_color.c:
 *
 *   table lookups  64 bytes a step: two two-table byte permutes
 *                  (vpermi2b) look the byte's low 7 bits up in entries
 *                  0..127 and 128..255, its top bit picks one; the last
 *                  step masked.  HWC's three tables: all three looked up,
 *                  merged by the channel of each byte (a step of 64 bytes
 *                  starts at channel step % 3, so three mask sets).
 *   float steps    16 pixels a step, each value widened to int32 and
 *                  float32, the baseline's operations in its order
 *                  (separate multiplies and adds: no fused multiply-add),
 *                  clamped with max/min (a NaN gives 0, as clamp_trunc)
 *                  and truncated.
 */
#include "aug_simd.h"

#ifndef AUG_NO_AVX512

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi")
#include <immintrin.h>

static inline __mmask64 first(size_t n)
{
    return n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
}

static inline __m512i look(__m512i x, __m512i t0, __m512i t1, __m512i t2, __m512i t3)
{
    __m512i lo = _mm512_permutex2var_epi8(t0, x, t1);
    __m512i hi = _mm512_permutex2var_epi8(t2, x, t3);

    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi);
}

void aug512_lut(uint8_t *p, size_t n, const uint8_t lut[256])
{
    __m512i t0 = _mm512_loadu_si512(lut), t1 = _mm512_loadu_si512(lut + 64);
    __m512i t2 = _mm512_loadu_si512(lut + 128), t3 = _mm512_loadu_si512(lut + 192);
    size_t i = 0;

    for (; i + 64 <= n; i += 64)
        _mm512_storeu_si512(p + i, look(_mm512_loadu_si512(p + i), t0, t1, t2, t3));
    if (i < n) {
        __mmask64 k = first(n - i);

        _mm512_mask_storeu_epi8(p + i, k, look(_mm512_maskz_loadu_epi8(k, p + i), t0, t1, t2, t3));
    }
}

void aug512_lut3(uint8_t *p, size_t npix, const uint8_t lut[3][256])
{
    __m512i t[3][4];
    __mmask64 m[3][3]; /* [phase][channel]: bytes j with (phase + j) % 3 == channel */
    size_t n = 3 * npix, i = 0;
    unsigned phase = 0;

    for (int c = 0; c < 3; c++)
        for (int q = 0; q < 4; q++)
            t[c][q] = _mm512_loadu_si512(lut[c] + 64 * q);
    for (unsigned ph = 0; ph < 3; ph++)
        for (unsigned c = 0; c < 3; c++) {
            m[ph][c] = 0;
            for (unsigned j = 0; j < 64; j++)
                if ((ph + j) % 3 == c)
                    m[ph][c] |= (__mmask64)1 << j;
        }
    for (; i < n; i += 64, phase = phase == 2 ? 0 : phase + 1) {
        __mmask64 k = first(n - i);
        __m512i x = _mm512_maskz_loadu_epi8(k, p + i);
        __m512i r = look(x, t[0][0], t[0][1], t[0][2], t[0][3]);

        r = _mm512_mask_mov_epi8(r, m[phase][1], look(x, t[1][0], t[1][1], t[1][2], t[1][3]));
        r = _mm512_mask_mov_epi8(r, m[phase][2], look(x, t[2][0], t[2][1], t[2][2], t[2][3]));
        _mm512_mask_storeu_epi8(p + i, k, r);
    }
}

static inline __m512 widen(const uint8_t *p, __mmask16 k)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, p)));
}

/* (float)(int)(R r + G g + B b), each product rounded, summed left to right */
static inline __m512i gray(__m512 r, __m512 g, __m512 b)
{
    __m512 s = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(AUG_GRAY_R), r),
                             _mm512_mul_ps(_mm512_set1_ps(AUG_GRAY_G), g));

    return _mm512_cvttps_epi32(_mm512_add_ps(s, _mm512_mul_ps(_mm512_set1_ps(AUG_GRAY_B), b)));
}

/* clamp_trunc of 16 floats, stored as 16 bytes under k */
static inline void store_clamped(uint8_t *p, __mmask16 k, __m512 x)
{
    x = _mm512_max_ps(x, _mm512_setzero_ps()); /* NaN: the second operand, 0 */
    x = _mm512_min_ps(x, _mm512_set1_ps(255.0f));
    _mm_mask_storeu_epi8(p, k, _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(x)));
}

void aug512_saturation(uint8_t *r, uint8_t *g, uint8_t *b, size_t n, float a, float q)
{
    __m512 va = _mm512_set1_ps(a), vq = _mm512_set1_ps(q);

    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 fr = widen(r + i, k), fg = widen(g + i, k), fb = widen(b + i, k);
        __m512 m = _mm512_mul_ps(vq, _mm512_cvtepi32_ps(gray(fr, fg, fb)));

        store_clamped(r + i, k, _mm512_add_ps(_mm512_mul_ps(va, fr), m));
        store_clamped(g + i, k, _mm512_add_ps(_mm512_mul_ps(va, fg), m));
        store_clamped(b + i, k, _mm512_add_ps(_mm512_mul_ps(va, fb), m));
    }
}

uint64_t aug512_gray_sum(const uint8_t *r, const uint8_t *g, const uint8_t *b, size_t n)
{
    uint64_t sum = 0;

    /* int32 lanes take at most 255 per step: a run of 2^23 steps cannot
     * overflow them */
    for (size_t o = 0; o < n; o += (size_t)16 << 23) {
        size_t end = n - o < ((size_t)16 << 23) ? n : o + ((size_t)16 << 23);
        __m512i acc = _mm512_setzero_si512();

        for (size_t i = o; i < end; i += 16) {
            __mmask16 k = end - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (end - i)) - 1);
            __m512i y = gray(widen(r + i, k), widen(g + i, k), widen(b + i, k));

            acc = _mm512_add_epi32(acc, _mm512_maskz_mov_epi32(k, y));
        }
        sum += (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(
            _mm512_cvtepu32_epi64(_mm512_castsi512_si256(acc)),
            _mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(acc, 1))));
    }
    return sum;
}

#endif
