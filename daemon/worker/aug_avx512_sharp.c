/*
 * aug_avx512_sharp.c - sharpness's row step as an AVX-512 kernel
 * (aug_simd.h, aug512_sharp_row): the bytes of aug_color.c's sharp_row,
 * 64 bytes a step, built for the same target as aug_avx512.c and run only
 * where aug_use_isa found it.
 *
 * How a step of 64 bytes j0..j0+63 of a row with neighbours step bytes
 * apart is made:
 *   - the 3x3 sum, two halves of 32 lanes of 16 bits: the nine rows of
 *     bytes (up, cur, dn at -step, 0, +step) loaded and widened, added,
 *     the centre four times more (at most 13 * 255 = 3315: no overflow);
 *   - the smoothed byte (2s + 13) / 26 as a multiply-high by
 *     AUG512_DIV26_MUL and a shift (AUG512_DIV26_SHIFT in all): exact
 *     for every 2s + 13 the sum can give (test_aug_simd_sharp checks all
 *     of them);
 *   - the blend 16 lanes at a time in float32, as the baseline's
 *     a * cur + q * sm: two multiplies, then an add (never a fused
 *     multiply-add); min(255, x) keeps a NaN as NaN, which truncates to
 *     INT32_MIN, as does anything at or beyond 2^31; the signed then
 *     unsigned saturating packs turn every negative (and so those) into 0
 *     and leave 0..255 alone: clamp_trunc's bytes, NaN giving 0;
 *   - the packs interleave the four quarters by 128-bit lane, a dword
 *     permute puts them back in order.
 * The last step of a row is masked (loads and store), so nothing is read
 * or written past a row's bytes; the row's first and last step bytes (and
 * every byte of a row without both neighbours, or too short for an
 * inside) blend with themselves, as in the baseline.
 */
#include "aug_simd.h"

#ifndef AUG_NO_AVX512

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi")
#include <immintrin.h>

static inline __mmask32 first32(size_t n)
{
    return n >= 32 ? ~(__mmask32)0 : (((__mmask32)1 << n) - 1);
}

static inline __mmask64 first64(size_t n)
{
    return n >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << n) - 1);
}

/* 32 bytes from p widened to 16-bit lanes, those outside k 0. */
static inline __m512i wide(const uint8_t *p, __mmask32 k)
{
    return _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(k, p));
}

/* The smoothed byte (2s + 13) / 26 of 32 sums s: the rows above (u*),
 * at (c*) and below (d*), left, centre and right. */
static inline __m512i smooth(__m512i ul, __m512i u, __m512i ur, __m512i cl, __m512i c, __m512i cr,
                             __m512i dl, __m512i d, __m512i dr)
{
    __m512i up = _mm512_add_epi16(_mm512_add_epi16(ul, u), ur);
    __m512i dn = _mm512_add_epi16(_mm512_add_epi16(dl, d), dr);
    __m512i mid = _mm512_add_epi16(_mm512_add_epi16(cl, cr), _mm512_slli_epi16(c, 2));
    __m512i s = _mm512_add_epi16(_mm512_add_epi16(up, dn), _mm512_add_epi16(mid, c));
    __m512i x = _mm512_add_epi16(_mm512_add_epi16(s, s), _mm512_set1_epi16(13));

    return _mm512_srli_epi16(_mm512_mulhi_epu16(x, _mm512_set1_epi16((short)AUG512_DIV26_MUL)),
                             AUG512_DIV26_SHIFT - 16);
}

/* The smoothed bytes of positions j..j+31, all inside the row's inside
 * (j >= st, j + 32 + st <= n). */
static inline __m512i half_inside(const uint8_t *up, const uint8_t *cur, const uint8_t *dn, size_t j,
                                  size_t st)
{
    const __mmask32 all = ~(__mmask32)0;

    return smooth(wide(up + j - st, all), wide(up + j, all), wide(up + j + st, all),
                  wide(cur + j - st, all), wide(cur + j, all), wide(cur + j + st, all),
                  wide(dn + j - st, all), wide(dn + j, all), wide(dn + j + st, all));
}

/* The same at either end of a row of n bytes (j < n): lanes past the row
 * are 0; lanes within st of either end take the centre byte itself.  At
 * j = 0 the left neighbours are the centre lanes moved up st lanes by
 * shl (no byte before the row is addressed); a right neighbour is loaded
 * only from a half that has an inside byte (j + st < n), and then from
 * within the row. */
static inline __m512i half_edge(const uint8_t *up, const uint8_t *cur, const uint8_t *dn, size_t j,
                                size_t n, size_t st, __m512i shl)
{
    __mmask32 kc = first32(n - j), kr, kb;
    __m512i u, c, d, ul, cl, dl, sm;

    c = wide(cur + j, kc);
    if (j + st >= n)
        return c;
    kr = first32(n - st - j);
    u = wide(up + j, kc);
    d = wide(dn + j, kc);
    if (j >= st) {
        ul = wide(up + j - st, kc);
        cl = wide(cur + j - st, kc);
        dl = wide(dn + j - st, kc);
    } else {
        ul = _mm512_permutexvar_epi16(shl, u);
        cl = _mm512_permutexvar_epi16(shl, c);
        dl = _mm512_permutexvar_epi16(shl, d);
    }
    sm = smooth(ul, u, wide(up + j + st, kr), cl, c, wide(cur + j + st, kr), dl, d,
                wide(dn + j + st, kr));
    kb = ~kr | (j < st ? first32(st - j) : 0);
    return _mm512_mask_mov_epi16(sm, kb, c);
}

/* trunc(min(255, a * c + q * m)) of 16 lanes as int32 (NaN and overflow:
 * INT32_MIN, which the packs make 0). */
static inline __m512i blend16(__m512 a, __m512 q, __m512i c, __m512i m)
{
    __m512 x = _mm512_add_ps(_mm512_mul_ps(a, _mm512_cvtepi32_ps(c)),
                             _mm512_mul_ps(q, _mm512_cvtepi32_ps(m)));

    return _mm512_cvttps_epi32(_mm512_min_ps(_mm512_set1_ps(255.0f), x));
}

/* Four quarters of int32 lanes (each 0..255, or negative for 0) to 64
 * bytes in order. */
static inline __m512i pack64(__m512i r0, __m512i r1, __m512i r2, __m512i r3)
{
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512i b = _mm512_packus_epi16(_mm512_packs_epi32(r0, r1), _mm512_packs_epi32(r2, r3));

    return _mm512_permutexvar_epi32(order, b);
}

/* Lanes 0..15 (hi 0) or 16..31 (hi 1) of 16-bit lanes as int32. */
static inline __m512i widen16(__m512i v, int hi)
{
    return _mm512_cvtepu16_epi32(hi ? _mm512_extracti64x4_epi64(v, 1) : _mm512_castsi512_si256(v));
}

/* 16 bytes from p as int32 lanes, those outside k 0. */
static inline __m512i load16(const uint8_t *p, __mmask16 k)
{
    return _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, p));
}

/* out[i] = blend of cur[i] and the smoothed bytes lo (i < 32) and hi
 * (i >= 32, when two) for the bytes i in k. */
static inline void store_blend(uint8_t *out, const uint8_t *cur, __mmask64 k, __m512i lo, __m512i hi,
                               int two, __m512 a, __m512 q)
{
    __m512i r0 = blend16(a, q, load16(cur, (__mmask16)k), widen16(lo, 0));
    __m512i r1 = blend16(a, q, load16(cur + 16, (__mmask16)(k >> 16)), widen16(lo, 1));
    __m512i r2 = _mm512_setzero_si512(), r3 = _mm512_setzero_si512();

    if (two) {
        r2 = blend16(a, q, load16(cur + 32, (__mmask16)(k >> 32)), widen16(hi, 0));
        r3 = blend16(a, q, load16(cur + 48, (__mmask16)(k >> 48)), widen16(hi, 1));
    }
    _mm512_mask_storeu_epi8(out, k, pack64(r0, r1, r2, r3));
}

/* The bytes j .. min(j + 64, n) - 1 of a row at an end. */
static void step_edge(uint8_t *out, const uint8_t *up, const uint8_t *cur, const uint8_t *dn,
                      size_t j, size_t n, size_t st, __m512i shl, __m512 a, __m512 q)
{
    int two = j + 32 < n;
    __m512i lo = half_edge(up, cur, dn, j, n, st, shl);
    __m512i hi = two ? half_edge(up, cur, dn, j + 32, n, st, shl) : _mm512_setzero_si512();

    store_blend(out + j, cur + j, first64(n - j), lo, hi, two, a, q);
}

/* out[j] = blend(cur[j], cur[j]) for n bytes. */
static void self_blend(uint8_t *out, const uint8_t *cur, size_t n, __m512 a, __m512 q)
{
    for (size_t j = 0; j < n; j += 64) {
        __mmask64 k = first64(n - j);
        __m512i r[4];

        for (int i = 0; i < 4; i++) {
            __m512i c = load16(cur + j + 16 * i, (__mmask16)(k >> (16 * i)));
            r[i] = blend16(a, q, c, c);
        }
        _mm512_mask_storeu_epi8(out + j, k, pack64(r[0], r[1], r[2], r[3]));
    }
}

void aug512_sharp_row(uint8_t *out, const uint8_t *up, const uint8_t *cur, const uint8_t *dn,
                      size_t n, size_t step, float a, float q)
{
    static const uint16_t lanes[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                       11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                       22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
    __m512 va = _mm512_set1_ps(a), vq = _mm512_set1_ps(q);
    __m512i shl; /* lane i takes lane i - step (lanes below step: any) */
    size_t j;

    if (!up || !dn || n <= 2 * step) {
        self_blend(out, cur, n, va, vq);
        return;
    }
    shl = _mm512_subs_epu16(_mm512_loadu_si512(lanes), _mm512_set1_epi16((short)step));
    step_edge(out, up, cur, dn, 0, n, step, shl, va, vq);
    for (j = 64; j + 64 + step <= n; j += 64)
        store_blend(out + j, cur + j, ~(__mmask64)0, half_inside(up, cur, dn, j, step),
                    half_inside(up, cur, dn, j + 32, step), 1, va, vq);
    for (; j < n; j += 64)
        step_edge(out, up, cur, dn, j, n, step, shl, va, vq);
}

#endif
