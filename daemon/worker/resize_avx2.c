/*
 * resize_avx2.c - the resampler's AVX2 kernels (resize_kern.h): every
 * function is built for AVX2 (target attribute), and resize.c calls them
 * only where __builtin_cpu_supports("avx2") says the CPU has it.  They
 * compute exactly the integers of resize.h's formulas, as the baseline
 * kernels do.
 *
 * horizontal  the row deinterleaved into three byte planes, each byte xor
 *             0x80 (p - 128 as a signed byte), 32 pixels a step by byte
 *             shuffles; then per plane 16 outputs a step:
 *               gather  (resize.h's layout): per block of 8 outputs a
 *                       16-byte window in each 128-bit half (one, or one a
 *                       pair: wide), per weight pair one byte shuffle
 *                       putting each output's two samples in the high
 *                       bytes of its lane's int16s and one multiply-add
 *                       (vpmaddwd) by the pair; the even block's sums
 *                       shifted down 16 and blended with the odd block's:
 *                       the 16 high halves, in order; the three planes in
 *                       one loop;
 *               dot     (any other table): per output 16 samples widened
 *                       (sign-extended) to int16 times 16 weights a step,
 *                       the 8 outputs' sums folded by horizontal adds,
 *                       shifted by prec - 7 and packed;
 * vertical    32 values a step, in two halves of 16: up to RS_V16_TAPS
 *             taps, per tap one vpmulhrsw by the broadcast weight and an
 *             add in 16 bits, then the rounding shift as one more
 *             vpmulhrsw (by 2^8: (x + 2^6) >> 7), the bias and the clamp
 *             as a signed saturating pack and a xor 0x80; more taps, per pair
 *             of rows their values interleaved (unpack) and multiplied-added
 *             by the weight pair into int32.  Packed to bytes with
 *             saturation.  A row's last step is moved back to end at n (it
 *             writes some bytes twice, with the same values) so no store
 *             passes the row; a row under 32 goes through a buffer.
 * interleave  16 pixels a step, three planes to 48 bytes by byte shuffles.
 * CHW rows go into the slot with streaming stores (vmovntdq, rows 32-byte
 * aligned): the slot is read by another process, not by this core, and a
 * normal store would first read each line in (measured on
 * bench/jpeg-loader's mix, 2 workers: resize 97-101 us a sample with normal
 * stores, 83 us with these); avx2_finish fences them.  HWC rows come from
 * the interleave with normal stores: streaming them measured no different
 * (113-118 us either way), and the line they come from must stay cached.
 */
#include "resize_kern.h"

#ifndef RS_NO_AVX2

#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2")))
#define INLINE static inline __attribute__((always_inline, target("avx2")))

/* Byte j of the shuffle that takes channel ch of 16 RGB pixels out of
 * their `src`th 16 bytes (0x80: a zero). */
#define DI(ch, src, j) ((char)((3 * (j) + (ch)) / 16 == (src) ? 3 * (j) + (ch) - 16 * (src) : 0x80))
#define DI16(ch, src)                                                                          \
    _mm_setr_epi8(DI(ch, src, 0), DI(ch, src, 1), DI(ch, src, 2), DI(ch, src, 3),             \
                  DI(ch, src, 4), DI(ch, src, 5), DI(ch, src, 6), DI(ch, src, 7),             \
                  DI(ch, src, 8), DI(ch, src, 9), DI(ch, src, 10), DI(ch, src, 11),           \
                  DI(ch, src, 12), DI(ch, src, 13), DI(ch, src, 14), DI(ch, src, 15))

/* Byte j of the shuffle that puts channel ch of 16 pixels into the `o`th
 * 16 bytes of their RGB. */
#define IL(o, ch, j) ((char)((16 * (o) + (j)) % 3 == (ch) ? (16 * (o) + (j)) / 3 : 0x80))
#define IL16(o, ch)                                                                            \
    _mm_setr_epi8(IL(o, ch, 0), IL(o, ch, 1), IL(o, ch, 2), IL(o, ch, 3), IL(o, ch, 4),       \
                  IL(o, ch, 5), IL(o, ch, 6), IL(o, ch, 7), IL(o, ch, 8), IL(o, ch, 9),       \
                  IL(o, ch, 10), IL(o, ch, 11), IL(o, ch, 12), IL(o, ch, 13), IL(o, ch, 14),  \
                  IL(o, ch, 15))

/* 16 RGB pixels at p to 16 bytes of each plane at pl + x, xor 0x80. */
AVX2 static inline void deinterleave16(const uint8_t *p, uint8_t *pl, size_t pstride, size_t x)
{
    const __m128i X = _mm_set1_epi8((char)0x80);
    __m128i a = _mm_loadu_si128((const __m128i *)p);
    __m128i b = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i r = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, DI16(0, 0)),
                                          _mm_shuffle_epi8(b, DI16(0, 1))),
                             _mm_shuffle_epi8(c, DI16(0, 2)));
    __m128i g = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, DI16(1, 0)),
                                          _mm_shuffle_epi8(b, DI16(1, 1))),
                             _mm_shuffle_epi8(c, DI16(1, 2)));
    __m128i bb = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, DI16(2, 0)),
                                           _mm_shuffle_epi8(b, DI16(2, 1))),
                              _mm_shuffle_epi8(c, DI16(2, 2)));

    _mm_storeu_si128((__m128i *)(pl + x), _mm_xor_si128(r, X));
    _mm_storeu_si128((__m128i *)(pl + pstride + x), _mm_xor_si128(g, X));
    _mm_storeu_si128((__m128i *)(pl + 2 * pstride + x), _mm_xor_si128(bb, X));
}

/* W RGB pixels at row to three planes pstride apart, each byte xor 0x80:
 * 32 pixels a step, then the last 16 (again over some already done: no
 * read past the row); rows under 16 pixels one by one. */
AVX2 static void deinterleave(const uint8_t *row, size_t W, uint8_t *pl, size_t pstride)
{
    const __m256i R0 = _mm256_broadcastsi128_si256(DI16(0, 0));
    const __m256i R1 = _mm256_broadcastsi128_si256(DI16(0, 1));
    const __m256i R2 = _mm256_broadcastsi128_si256(DI16(0, 2));
    const __m256i G0 = _mm256_broadcastsi128_si256(DI16(1, 0));
    const __m256i G1 = _mm256_broadcastsi128_si256(DI16(1, 1));
    const __m256i G2 = _mm256_broadcastsi128_si256(DI16(1, 2));
    const __m256i B0 = _mm256_broadcastsi128_si256(DI16(2, 0));
    const __m256i B1 = _mm256_broadcastsi128_si256(DI16(2, 1));
    const __m256i B2 = _mm256_broadcastsi128_si256(DI16(2, 2));
    const __m256i X = _mm256_set1_epi8((char)0x80);
    size_t x = 0;

    for (; x + 32 <= W; x += 32) { /* pixels x..x+15 in the low halves, x+16.. high */
        const uint8_t *p = row + 3 * x;
        __m256i a = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)p)),
            _mm_loadu_si128((const __m128i *)(p + 48)), 1);
        __m256i b = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p + 16))),
            _mm_loadu_si128((const __m128i *)(p + 64)), 1);
        __m256i c = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p + 32))),
            _mm_loadu_si128((const __m128i *)(p + 80)), 1);
        __m256i r = _mm256_or_si256(
            _mm256_or_si256(_mm256_shuffle_epi8(a, R0), _mm256_shuffle_epi8(b, R1)),
            _mm256_shuffle_epi8(c, R2));
        __m256i g = _mm256_or_si256(
            _mm256_or_si256(_mm256_shuffle_epi8(a, G0), _mm256_shuffle_epi8(b, G1)),
            _mm256_shuffle_epi8(c, G2));
        __m256i bb = _mm256_or_si256(
            _mm256_or_si256(_mm256_shuffle_epi8(a, B0), _mm256_shuffle_epi8(b, B1)),
            _mm256_shuffle_epi8(c, B2));

        _mm256_storeu_si256((__m256i *)(pl + x), _mm256_xor_si256(r, X));
        _mm256_storeu_si256((__m256i *)(pl + pstride + x), _mm256_xor_si256(g, X));
        _mm256_storeu_si256((__m256i *)(pl + 2 * pstride + x), _mm256_xor_si256(bb, X));
    }
    if (x < W && W >= 16) {
        if (x + 16 <= W) {
            deinterleave16(row + 3 * x, pl, pstride, x);
            x += 16;
        }
        if (x < W)
            deinterleave16(row + 3 * (W - 16), pl, pstride, W - 16);
        return;
    }
    for (; x < W; x++) {
        pl[x] = row[3 * x] ^ 0x80;
        pl[pstride + x] = row[3 * x + 1] ^ 0x80;
        pl[2 * pstride + x] = row[3 * x + 2] ^ 0x80;
    }
}

/* A 16-byte window in each half: plane + b0 + at and plane + b1 + at. */
INLINE __m256i window(const uint8_t *plane, int32_t b0, int32_t b1, uint32_t at)
{
    return _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(plane + b0 + at))),
        _mm_loadu_si128((const __m128i *)(plane + b1 + at)), 1);
}

/* Pair t of a block: its samples spread by the shuffle, times its
 * weights, summed into int32 lanes. */
INLINE __m256i pair(__m256i win, const __m256i *idx, const __m256i *w, uint32_t t)
{
    return _mm256_madd_epi16(_mm256_shuffle_epi8(win, _mm256_load_si256(idx + t)),
                             _mm256_load_si256(w + t));
}

/*
 * The three planes' outputs by the gather kernel, 16 a store: the even
 * block's high halves shifted down into the low halves, the odd block's
 * kept.  P pairs; STEP 0 one window a half, 2 one a pair (at base + 2t);
 * SHARED, the even block's windows serve the odd block too.
 */
INLINE void gather_planes(const uint8_t *planes, size_t pstride, const struct rs_axis *ax,
                          int16_t *out, size_t ns, uint32_t P, uint32_t STEP, bool SHARED)
{
    const __m256i *idx = (const __m256i *)ax->idx, *w = (const __m256i *)ax->bw;
    const int32_t *base = ax->base;

    for (uint32_t g = 0; g < ax->groups; g++, idx += 2 * P, w += 2 * P, base += 4) {
        int32_t e0 = base[0], e1 = base[1], o0 = base[2], o1 = base[3];

        for (int c = 0; c < 3; c++) {
            const uint8_t *plane = planes + c * pstride;
            __m256i we = window(plane, e0, e1, 0), wo = SHARED ? we : window(plane, o0, o1, 0);
            __m256i even = pair(we, idx, w, 0), odd = pair(wo, idx + P, w + P, 0), v;

            for (uint32_t t = 1; t < P; t++) {
                if (STEP) {
                    we = window(plane, e0, e1, STEP * t);
                    wo = SHARED ? we : window(plane, o0, o1, STEP * t);
                }
                even = _mm256_add_epi32(even, pair(we, idx, w, t));
                odd = _mm256_add_epi32(odd, pair(wo, idx + P, w + P, t));
            }
            v = _mm256_blend_epi16(_mm256_srli_epi32(even, 16), odd, 0xAA);
            _mm256_storeu_si256((__m256i *)(out + c * ns + (size_t)g * 16), v);
        }
    }
}

/* The pair count and windows as constants for the common tables, so the
 * pair loop unrolls and the windows' loads are known. */
AVX2 static void gather_row(const uint8_t *planes, size_t pstride, const struct rs_axis *ax,
                            int16_t *out, size_t ns)
{
#define G(p, step, shared) gather_planes(planes, pstride, ax, out, ns, p, step, shared)
    /* (one or two taps: one window for the group; two pairs fit a window
     * per block but at a scale of 2 exactly) */
    switch (ax->pairs * 4 + ax->wide * 2 + ax->shared) {
    case 1 * 4 + 1: G(1, 0, true); break;
    case 2 * 4 + 0: G(2, 0, false); break;
    case 2 * 4 + 1: G(2, 0, true); break;
    case 3 * 4 + 0: G(3, 0, false); break;
    case 3 * 4 + 1: G(3, 0, true); break;
    case 3 * 4 + 2: G(3, 2, false); break;
    case 3 * 4 + 3: G(3, 2, true); break;
    default: G(ax->pairs, ax->wide ? 2 : 0, ax->shared); break;
    }
#undef G
}

/* Output x's sum of the dot kernel, as 8 int32 partial sums: T16 taps
 * (a multiple of 16), 16 a step. */
INLINE __m256i dot_one(const uint8_t *p, const int16_t *w, uint32_t T16)
{
    __m256i acc = _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p)),
                                    _mm256_load_si256((const __m256i *)w));

    for (uint32_t k = 16; k < T16; k += 16)
        acc = _mm256_add_epi32(
            acc, _mm256_madd_epi16(
                     _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + k))),
                     _mm256_load_si256((const __m256i *)(w + k))));
    return acc;
}

/* 8 outputs of the dot kernel from x: their partial sums folded to one
 * lane each, then h = sum >> (prec - 7) (the samples are p - 128 already). */
INLINE __m256i dot_block(const uint8_t *plane, const int32_t *off, const int16_t *w,
                         uint32_t T16, __m256i shift)
{
    __m256i s0 = dot_one(plane + off[0], w, T16), s1 = dot_one(plane + off[1], w + T16, T16);
    __m256i s2 = dot_one(plane + off[2], w + 2 * T16, T16);
    __m256i s3 = dot_one(plane + off[3], w + 3 * T16, T16);
    __m256i s4 = dot_one(plane + off[4], w + 4 * T16, T16);
    __m256i s5 = dot_one(plane + off[5], w + 5 * T16, T16);
    __m256i s6 = dot_one(plane + off[6], w + 6 * T16, T16);
    __m256i s7 = dot_one(plane + off[7], w + 7 * T16, T16);
    __m256i q0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
    __m256i q1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s4, s5), _mm256_hadd_epi32(s6, s7));

    /* q0: [0-3 low halves' sums | 0-3 high halves'], q1 the same for 4-7 */
    return _mm256_srav_epi32(_mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20),
                                              _mm256_permute2x128_si256(q0, q1, 0x31)),
                             shift);
}

/* The three planes' outputs by the dot kernel, 16 a store. */
INLINE void dot_planes(const uint8_t *planes, size_t pstride, const struct rs_axis *ax,
                       int16_t *out, size_t ns, uint32_t T16)
{
    __m256i shift = _mm256_set1_epi32((int)(ax->prec - RS_FRAC));

    for (uint32_t g = 0; g < ax->groups; g++) {
        const int32_t *off = ax->off + (size_t)g * 16;
        const int16_t *w = ax->w16 + (size_t)g * 16 * T16;

        for (int c = 0; c < 3; c++) {
            const uint8_t *plane = planes + c * pstride;
            __m256i lo = dot_block(plane, off, w, T16, shift);
            __m256i hi = dot_block(plane, off + 8, w + 8 * T16, T16, shift);
            __m256i v = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8);

            _mm256_storeu_si256((__m256i *)(out + c * ns + (size_t)g * 16), v);
        }
    }
}

/* The tap count as a constant for the common tables. */
AVX2 static void dot_row(const uint8_t *planes, size_t pstride, const struct rs_axis *ax,
                         int16_t *out, size_t ns)
{
    switch (ax->taps16) {
    case 16: dot_planes(planes, pstride, ax, out, ns, 16); break;
    case 32: dot_planes(planes, pstride, ax, out, ns, 32); break;
    default: dot_planes(planes, pstride, ax, out, ns, ax->taps16); break;
    }
}

AVX2 static void avx2_hrow(const uint8_t *row, const struct rs_axis *ax, uint8_t *planes,
                           size_t pstride, int16_t *out, size_t ns)
{
    deinterleave(row, (size_t)(ax->hi - ax->lo), planes, pstride);
    if (ax->gather)
        gather_row(planes, pstride, ax, out, ns);
    else
        dot_row(planes, pstride, ax, out, ns);
}

/* 16 values of the 16-bit vertical sum at e: T taps, before the bias. */
INLINE __m256i v16_half(const int16_t *const *rows, size_t e, const __m256i *w, uint32_t T)
{
    __m256i a = _mm256_mulhrs_epi16(_mm256_loadu_si256((const __m256i *)(rows[0] + e)), w[0]);

    for (uint32_t k = 1; k < T; k++)
        a = _mm256_add_epi16(
            a, _mm256_mulhrs_epi16(_mm256_loadu_si256((const __m256i *)(rows[k] + e)), w[k]));
    return a;
}

/* 32 bytes of the 16-bit vertical formula at e: (a + 2^6) >> 7 as one
 * more vpmulhrsw (by 2^8), packed with signed saturation to -128..127 and
 * moved up by 128 (xor 0x80): the bias and the clamp to 0..255. */
INLINE __m256i v16_chunk(const int16_t *const *rows, size_t e, const __m256i *w, uint32_t T)
{
    const __m256i scale = _mm256_set1_epi16(1 << (15 - RS_FRAC));
    __m256i lo = _mm256_mulhrs_epi16(v16_half(rows, e, w, T), scale);
    __m256i hi = _mm256_mulhrs_epi16(v16_half(rows, e + 16, w, T), scale);

    /* [0-7, 16-23 | 8-15, 24-31] to [0-31] */
    return _mm256_permute4x64_epi64(
        _mm256_xor_si256(_mm256_packs_epi16(lo, hi), _mm256_set1_epi8((char)0x80)), 0xD8);
}

/* 32 bytes of the 32-bit vertical formula at e: T / 2 pairs of rows. */
INLINE __m256i v32_chunk(const int16_t *const *rows, size_t e, const __m256i *wp, uint32_t T)
{
    const __m256i bias = _mm256_set1_epi32((128 << (RS_FRAC + 15)) + (1 << (RS_FRAC + 14)));
    __m256i a0 = bias, a1 = bias, a2 = bias, a3 = bias;

    for (uint32_t t = 0; t < T / 2; t++) {
        const int16_t *p = rows[2 * t] + e, *q = rows[2 * t + 1] + e;
        __m256i x0 = _mm256_loadu_si256((const __m256i *)p);
        __m256i y0 = _mm256_loadu_si256((const __m256i *)q);
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(p + 16));
        __m256i y1 = _mm256_loadu_si256((const __m256i *)(q + 16));

        a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, y0), wp[t]));
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, y0), wp[t]));
        a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi16(x1, y1), wp[t]));
        a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi16(x1, y1), wp[t]));
    }
    /* unpack works in 128-bit halves: a0 holds values 0-3 and 8-11, a1
     * 4-7 and 12-15, so packing a0 with a1 puts 0-15 in order */
    a0 = _mm256_packs_epi32(_mm256_srai_epi32(a0, RS_FRAC + 15),
                            _mm256_srai_epi32(a1, RS_FRAC + 15));
    a2 = _mm256_packs_epi32(_mm256_srai_epi32(a2, RS_FRAC + 15),
                            _mm256_srai_epi32(a3, RS_FRAC + 15));
    return _mm256_permute4x64_epi64(_mm256_packus_epi16(a0, a2), 0xD8);
}

/* An output row of the three planes: the 16-bit formula (wide false: T
 * broadcast weights) or the 32-bit one (T / 2 broadcast weight pairs). */
INLINE void vrow_n(const int16_t *const *rows, size_t ns, const int16_t *wt, uint32_t T,
                   uint32_t n, uint8_t *const out[3], bool stream, bool wide)
{
    __m256i w[wide ? T / 2 : RS_V16_TAPS];

    for (uint32_t k = 0; k < (wide ? T / 2 : T); k++)
        w[k] = wide ? _mm256_set1_epi32((int)((uint32_t)(uint16_t)wt[2 * k] |
                                              (uint32_t)(uint16_t)wt[2 * k + 1] << 16))
                    : _mm256_set1_epi16(wt[k]);
#define CHUNK(at) (wide ? v32_chunk(rows, (at), w, T) : v16_chunk(rows, (at), w, T))
    for (int c = 0; c < 3; c++) {
        size_t off = c * ns;
        uint8_t *o = out[c];
        uint32_t e = 0;

        if (n < 32) {
            uint8_t tmp[32];

            _mm256_storeu_si256((__m256i *)tmp, CHUNK(off));
            memcpy(o, tmp, n);
            continue;
        }
        if (stream && ((uintptr_t)o & 31) == 0)
            for (; e + 32 <= n; e += 32)
                _mm256_stream_si256((__m256i *)(o + e), CHUNK(off + e));
        for (; e + 32 <= n; e += 32)
            _mm256_storeu_si256((__m256i *)(o + e), CHUNK(off + e));
        if (e < n)
            _mm256_storeu_si256((__m256i *)(o + n - 32), CHUNK(off + n - 32));
    }
#undef CHUNK
}

AVX2 static void avx2_vrow(const int16_t *const *rows, size_t ns, const int16_t *wt,
                           uint32_t T, uint32_t n, uint8_t *const out[3], bool stream)
{
    switch (T) {
    case 0: break; /* (a row has a tap at least) */
    case 1: vrow_n(rows, ns, wt, 1, n, out, stream, false); break;
    case 2: vrow_n(rows, ns, wt, 2, n, out, stream, false); break;
    case 3: vrow_n(rows, ns, wt, 3, n, out, stream, false); break;
    case 4: vrow_n(rows, ns, wt, 4, n, out, stream, false); break;
    case 5: vrow_n(rows, ns, wt, 5, n, out, stream, false); break;
    case 6: vrow_n(rows, ns, wt, 6, n, out, stream, false); break;
    default: vrow_n(rows, ns, wt, T, n, out, stream, T > RS_V16_TAPS); break;
    }
}

AVX2 static void avx2_interleave(const uint8_t *p, size_t pstride, uint32_t n, uint8_t *rgb)
{
    const __m128i m00 = IL16(0, 0), m01 = IL16(0, 1), m02 = IL16(0, 2);
    const __m128i m10 = IL16(1, 0), m11 = IL16(1, 1), m12 = IL16(1, 2);
    const __m128i m20 = IL16(2, 0), m21 = IL16(2, 1), m22 = IL16(2, 2);
    uint32_t i = 0;

    for (; i < n; i += 16) {
        __m128i r = _mm_loadu_si128((const __m128i *)(p + i));
        __m128i g = _mm_loadu_si128((const __m128i *)(p + pstride + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(p + 2 * pstride + i));
        __m128i o0 = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(r, m00), _mm_shuffle_epi8(g, m01)),
                                  _mm_shuffle_epi8(b, m02));
        __m128i o1 = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(r, m10), _mm_shuffle_epi8(g, m11)),
                                  _mm_shuffle_epi8(b, m12));
        __m128i o2 = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(r, m20), _mm_shuffle_epi8(g, m21)),
                                  _mm_shuffle_epi8(b, m22));

        if (i + 16 <= n) {
            _mm_storeu_si128((__m128i *)(rgb + 3 * i), o0);
            _mm_storeu_si128((__m128i *)(rgb + 3 * i + 16), o1);
            _mm_storeu_si128((__m128i *)(rgb + 3 * i + 32), o2);
        } else { /* the last pixels: no store past the row */
            uint8_t tmp[48];

            _mm_storeu_si128((__m128i *)tmp, o0);
            _mm_storeu_si128((__m128i *)(tmp + 16), o1);
            _mm_storeu_si128((__m128i *)(tmp + 32), o2);
            memcpy(rgb + 3 * i, tmp, 3 * (size_t)(n - i));
        }
    }
}

/* The streaming stores above are weakly ordered: fenced before rs_resize
 * returns, so the slot's ready flag (a release store) comes after them. */
AVX2 static void avx2_finish(void)
{
    _mm_sfence();
}

const struct rs_kern rs_kern_avx2 = {
    .name = "avx2",
    .hrow = avx2_hrow,
    .vrow = avx2_vrow,
    .interleave = avx2_interleave,
    .finish = avx2_finish,
};

#endif
