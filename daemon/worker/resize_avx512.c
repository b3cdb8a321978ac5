/*
 * resize_avx512.c - the resampler's AVX-512 kernels (resize_kern.h) and
 * their tables' layout: every function is built for AVX512F, BW, VL, VBMI,
 * VNNI and PREFETCHW (target attribute), and runs only where rs_use_isa
 * found them all (__builtin_cpu_supports).  They compute exactly the integers of
 * resize.h's formulas, as the other sets do.
 *
 * horizontal  straight from the input row's RGB bytes, no deinterleave: h
 *             in RGB order (value v: channel v % 3 of output v / 3), 16
 *             values a group, one int32 lane a value.  Per group a 64-byte
 *             window of the row (one for all its taps, or wide one a pair
 *             of taps), and per pair of taps one byte permute (vpermb,
 *             zero-masked) putting each value's two samples in the low
 *             bytes of its lane's int16s, and one multiply-add into the
 *             lane (vpmaddwd, then vpdpwssd) by the pair's weights: the
 *             sum of w * p, shifted down by prec - 7 (any prec: the gather
 *             and the dot tables alike).  Two groups merged to 32 int16 a
 *             store, a's in the even positions (shifted), b's in the odd
 *             (moved by a byte shuffle), left in that order: the vertical
 *             pass is the same for every value, and the output's store
 *             puts them in order.  Rows go two at a time where they can
 *             (the indices and weights loaded once for both); a row under
 *             64 bytes is read from a copy, so no window passes the row.
 * vertical    64 values a step over rows in RGB order: the 16-bit formula
 *             (vpmulhrsw per tap, the rounding shift as one more, packed
 *             with signed saturation and moved up by 128) or the 32-bit
 *             one (row pairs interleaved, vpdpwssd by the weight pairs).
 *             HWC: the bytes are the output row, put in order by one byte
 *             permute a step and stored (the row's last step masked).
 *             CHW: three steps (64 pixels) to three planes by two byte
 *             permutes a plane (vpermt2b over the first 128 bytes, vpermb
 *             merging the third 64), stored into the planes' rows (the
 *             last masked): no line buffer, no second pass.  Normal
 *             stores, the lines of the row RS_PREFETCH_ROWS on prefetched
 *             for writing (resize_kern.h has the measurement).  Streaming
 *             stores, as the AVX2 set's CHW rows, measured worse here:
 *             rows through a line buffer and copied to the slot streaming
 *             its whole lines, the vertical pass and the copy took 4.8%
 *             of two workers' samples on bench/jpeg-loader's photos,
 *             against 3.4% for this pass alone.
 * The layout (rs_avx512_fit, rs_avx512_layout) is computed 16 values a
 * step in the same vectors: per lane its output and channel, its output's
 * start and count (permuted from a load of 16), the byte offsets of its
 * samples, its weight pair (permuted from a row of each output's pairs,
 * made from w's blocks 16 outputs at a time).
 */
#include "resize_kern.h"

#ifndef RS_NO_AVX512

#include <assert.h>
#include <immintrin.h>
#include <string.h>

#define TARGET "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,prfchw"

#define AVX512 __attribute__((target(TARGET)))
#define INLINE static inline __attribute__((always_inline, target(TARGET)))

#define WINDOW 64                       /* bytes a window holds */
#define LOW_BYTES 0x5555555555555555ull /* the low byte of every int16 */

/*
 * Packs work in 128-bit quarters, so the values they pack come out in
 * another order, left so (no permute) until the output bytes are stored:
 *   horizontal: values 0-15 and 16-31 of a row's 32 (two groups' int32
 *     sums) merged to int16 (hrow_n): the value u is at position HP(u);
 *   vertical: positions 0-31 and 32-63 of the row's 64 packed to bytes:
 *     the 64 values' byte for value v is byte BP(v) of the result.
 * The bytes of a step are put in order by one byte permute (HWC: by BP;
 * CHW: each plane's by its own table, the deinterleave's).
 */
#define HP(u) (2 * ((u) & 15) + ((u) >> 4))
#define BP(v) (16 * (HP((v) & 31) >> 3) + 8 * ((v) >> 5) + (HP((v) & 31) & 7))
#define R8(M, a, b) M(a, b), M(a, b + 1), M(a, b + 2), M(a, b + 3), M(a, b + 4), M(a, b + 5), \
                    M(a, b + 6), M(a, b + 7)
#define R64(M, a) R8(M, a, 0), R8(M, a, 8), R8(M, a, 16), R8(M, a, 24), R8(M, a, 32),         \
                  R8(M, a, 40), R8(M, a, 48), R8(M, a, 56)
#define HWC_AT(a, v) BP(v)
/* Plane c's byte j of 64 pixels: value 3j + c of their 192, in step
 * (3j + c) / 64 of three: that step's byte, plus 64 for the second (bit
 * 6: vpermt2b's second table; vpermb reads 6 bits, so the third step's
 * byte index is the same plus 128). */
#define CHW_AT(c, j) (64 * ((3 * (j) + (c)) >> 6) + BP((3 * (j) + (c)) & 63))

static const uint8_t hwc_order[64] __attribute__((aligned(64))) = { R64(HWC_AT, 0) };
static const uint8_t chw_order[3][64] __attribute__((aligned(64))) = {
    { R64(CHW_AT, 0) }, { R64(CHW_AT, 1) }, { R64(CHW_AT, 2) } };

/*
 * One group's 16 int32 sums: per pair t of P, the window's bytes put by
 * the pair's permute into the low bytes of the lanes' int16s (high bytes
 * zero) times the pair's weights, added to acc (BIAS) or to the first
 * pair's products (no bias: no accumulator to copy).  WIDE: a window per
 * pair at base[t], else one at base[0].
 */
INLINE __m512i group(const uint8_t *row, const int32_t *base, const __m512i *idx,
                     const __m512i *w, uint32_t P, bool WIDE, bool BIAS, __m512i acc)
{
    __m512i win = _mm512_loadu_si512(row + base[0]);

    for (uint32_t t = 0; t < P; t++) {
        __m512i x;

        if (WIDE && t > 0)
            win = _mm512_loadu_si512(row + base[t]);
        x = _mm512_maskz_permutexvar_epi8(LOW_BYTES, _mm512_load_si512(idx + t), win);
        acc = !BIAS && t == 0 ? _mm512_madd_epi16(x, _mm512_load_si512(w))
                              : _mm512_dpwssd_epi32(acc, x, _mm512_load_si512(w + t));
    }
    return acc;
}

/* Byte j of the shuffle putting each dword's bytes `from` and from + 1 in
 * its bytes 2 and 3 (the others, masked, 0). */
#define UP(from, j) ((char)((j) % 4 >= 2 ? (j) / 4 * 4 + (from) + (j) % 4 - 2 : 0))
#define UP16(from)                                                                             \
    _mm512_broadcast_i32x4(_mm_setr_epi8(UP(from, 0), UP(from, 1), UP(from, 2), UP(from, 3),   \
                                         UP(from, 4), UP(from, 5), UP(from, 6), UP(from, 7),   \
                                         UP(from, 8), UP(from, 9), UP(from, 10), UP(from, 11), \
                                         UP(from, 12), UP(from, 13), UP(from, 14),             \
                                         UP(from, 15)))
#define HIGH_WORDS 0xCCCCCCCCCCCCCCCCull /* bytes 2 and 3 of every dword */

/*
 * A row's h, two groups (32 values) a store, in pack order (HP: group a's
 * value i in int16 2i, group b's in 2i + 1), h = (sum >> (prec - 7)) -
 * 2^14 (the formula's h - 128 * 2^7).  a's shifted sums keep h in their
 * low halves, b's go to the high halves by a merging byte shuffle.  For
 * prec 15 (S8): b's bytes 1 and 2 are its sum >> 8 (no shift), and 2^14
 * is taken from both at once after the merge; for other precs the sums
 * start from -2^14 << (prec - 7) and both are shifted.  P pairs, WIDE and
 * S8 as constants for the common tables.  struct hpass holds what the
 * one-row and two-row loops share: their constants and the store.
 */
struct hpass {
    uint32_t bstep;      /* vbase entries a group */
    __m512i bias, shift; /* the sums' start, prec - 7 */
    __m512i up, h0;      /* b's bytes to the high halves, 2^14 */
};

INLINE struct hpass hpass_of(const struct rs_axis *ax, uint32_t P, bool WIDE, bool S8)
{
    uint32_t sh = S8 ? 8 : ax->prec - RS_FRAC;

    return (struct hpass){ .bstep = WIDE ? P : 1,
                           .bias = _mm512_set1_epi32(-(1 << (14 + sh))),
                           .shift = _mm512_set1_epi32((int)sh),
                           .up = S8 ? UP16(1) : UP16(0),
                           .h0 = _mm512_set1_epi16(1 << 14) };
}

/* Groups a and b's sums to 32 values of h at out (pack order). */
INLINE void hstore(const struct hpass *k, int16_t *out, __m512i a, __m512i b, bool S8)
{
    __m512i v;

    a = S8 ? _mm512_srai_epi32(a, 8) : _mm512_srav_epi32(a, k->shift);
    b = S8 ? b : _mm512_srav_epi32(b, k->shift);
    v = _mm512_mask_shuffle_epi8(a, HIGH_WORDS, b, k->up);
    _mm512_storeu_si512(out, S8 ? _mm512_sub_epi16(v, k->h0) : v);
}

INLINE void hrow_n(const uint8_t *row, const struct rs_axis *ax, int16_t *out, uint32_t P,
                   bool WIDE, bool S8)
{
    const __m512i *idx = (const __m512i *)ax->vidx, *w = (const __m512i *)ax->vw;
    const int32_t *base = ax->vbase;
    const struct hpass k = hpass_of(ax, P, WIDE, S8);

    for (uint32_t g = 0; g < ax->vgroups; g += 2, idx += 2 * P, w += 2 * P, base += 2 * k.bstep) {
        __m512i a = group(row, base, idx, w, P, WIDE, !S8, k.bias);
        __m512i b = group(row, base + k.bstep, idx + P, w + P, P, WIDE, !S8, k.bias);

        hstore(&k, out + (size_t)g * 16, a, b, S8);
    }
}

/* group for two rows at once (the second's sums in *acc1), sharing the
 * loads of the indices and the weights. */
INLINE __m512i group2(const uint8_t *r0, const uint8_t *r1, const int32_t *base,
                      const __m512i *idx, const __m512i *w, uint32_t P, bool WIDE, bool BIAS,
                      __m512i bias, __m512i *acc1)
{
    __m512i w0 = _mm512_loadu_si512(r0 + base[0]), w1 = _mm512_loadu_si512(r1 + base[0]);
    __m512i a0 = bias, a1 = bias;

    for (uint32_t t = 0; t < P; t++) {
        __m512i ix = _mm512_load_si512(idx + t), wt = _mm512_load_si512(w + t), x0, x1;

        if (WIDE && t > 0) {
            w0 = _mm512_loadu_si512(r0 + base[t]);
            w1 = _mm512_loadu_si512(r1 + base[t]);
        }
        x0 = _mm512_maskz_permutexvar_epi8(LOW_BYTES, ix, w0);
        x1 = _mm512_maskz_permutexvar_epi8(LOW_BYTES, ix, w1);
        a0 = !BIAS && t == 0 ? _mm512_madd_epi16(x0, wt) : _mm512_dpwssd_epi32(a0, x0, wt);
        a1 = !BIAS && t == 0 ? _mm512_madd_epi16(x1, wt) : _mm512_dpwssd_epi32(a1, x1, wt);
    }
    *acc1 = a1;
    return a0;
}

/* hrow_n for two rows: a table's indices and weights loaded once for both
 * (measured: a worker-like resize of 150..320-pixel crops 8-12% faster
 * than one row at a time). */
INLINE void hrow2_n(const uint8_t *r0, const uint8_t *r1, const struct rs_axis *ax, int16_t *o0,
                    int16_t *o1, uint32_t P, bool WIDE, bool S8)
{
    const __m512i *idx = (const __m512i *)ax->vidx, *w = (const __m512i *)ax->vw;
    const int32_t *base = ax->vbase;
    const struct hpass k = hpass_of(ax, P, WIDE, S8);

    for (uint32_t g = 0; g < ax->vgroups; g += 2, idx += 2 * P, w += 2 * P, base += 2 * k.bstep) {
        __m512i a1, b1, a0 = group2(r0, r1, base, idx, w, P, WIDE, !S8, k.bias, &a1);
        __m512i b0 = group2(r0, r1, base + k.bstep, idx + P, w + P, P, WIDE, !S8, k.bias, &b1);

        hstore(&k, o0 + (size_t)g * 16, a0, b0, S8);
        hstore(&k, o1 + (size_t)g * 16, a1, b1, S8);
    }
}

AVX512 static void avx512_hrow2(const uint8_t *r0, const uint8_t *r1, const struct rs_axis *ax,
                                int16_t *o0, int16_t *o1)
{
    switch (ax->prec == 15 ? ax->pairs * 2 + ax->vwide : 0) {
    case 1 * 2: hrow2_n(r0, r1, ax, o0, o1, 1, false, true); break;
    case 2 * 2: hrow2_n(r0, r1, ax, o0, o1, 2, false, true); break;
    case 3 * 2: hrow2_n(r0, r1, ax, o0, o1, 3, false, true); break;
    case 4 * 2 + 1: hrow2_n(r0, r1, ax, o0, o1, 4, true, true); break;
    default:
        if (ax->vwide)
            hrow2_n(r0, r1, ax, o0, o1, ax->pairs, true, false);
        else
            hrow2_n(r0, r1, ax, o0, o1, ax->pairs, false, false);
        break;
    }
}

AVX512 static void avx512_hrow(const uint8_t *row, const struct rs_axis *ax, uint8_t *planes,
                               size_t pstride, int16_t *out, size_t ns)
{
    size_t bytes = 3 * (size_t)(ax->hi - ax->lo);

    (void)pstride;
    (void)ns;
    if (bytes < WINDOW) { /* the windows start at 0: read them from a copy */
        memset(planes, 0, WINDOW);
        memcpy(planes, row, bytes);
        row = planes;
    }
    switch (ax->prec == 15 ? ax->pairs * 2 + ax->vwide : 0) { /* (wide only from 4
                                                                  pairs: about 3x) */
    case 1 * 2: hrow_n(row, ax, out, 1, false, true); break;
    case 2 * 2: hrow_n(row, ax, out, 2, false, true); break;
    case 3 * 2: hrow_n(row, ax, out, 3, false, true); break;
    case 4 * 2 + 1: hrow_n(row, ax, out, 4, true, true); break;
    default:
        if (ax->vwide)
            hrow_n(row, ax, out, ax->pairs, true, false);
        else
            hrow_n(row, ax, out, ax->pairs, false, false);
        break;
    }
}

/* 32 values of the 16-bit vertical sum at e: T taps, before the bias. */
INLINE __m512i v16_half(const int16_t *const *rows, size_t e, const __m512i *w, uint32_t T)
{
    __m512i a = _mm512_mulhrs_epi16(_mm512_loadu_si512(rows[0] + e), w[0]);

    for (uint32_t k = 1; k < T; k++)
        a = _mm512_add_epi16(
            a, _mm512_mulhrs_epi16(_mm512_loadu_si512(rows[k] + e), w[k]));
    return a;
}

/* 64 bytes of the 16-bit formula at e, in pack order (BP): (a + 2^6) >> 7
 * as one more vpmulhrsw (by 2^8), packed with signed saturation to
 * -128..127 and moved up by 128 (xor 0x80): the bias and the clamp to
 * 0..255. */
INLINE __m512i v16_chunk(const int16_t *const *rows, size_t e, const __m512i *w, uint32_t T)
{
    const __m512i scale = _mm512_set1_epi16(1 << (15 - RS_FRAC));
    __m512i lo = _mm512_mulhrs_epi16(v16_half(rows, e, w, T), scale);
    __m512i hi = _mm512_mulhrs_epi16(v16_half(rows, e + 32, w, T), scale);

    return _mm512_xor_si512(_mm512_packs_epi16(lo, hi), _mm512_set1_epi8((char)0x80));
}

/* 64 bytes of the 32-bit formula at e, in pack order (BP, as the 16-bit
 * one): T / 2 pairs of rows. */
INLINE __m512i v32_chunk(const int16_t *const *rows, size_t e, const __m512i *wp, uint32_t T)
{
    const __m512i bias = _mm512_set1_epi32((128 << (RS_FRAC + 15)) + (1 << (RS_FRAC + 14)));
    __m512i a0 = bias, a1 = bias, a2 = bias, a3 = bias;

    for (uint32_t t = 0; t < T / 2; t++) {
        const int16_t *p = rows[2 * t] + e, *q = rows[2 * t + 1] + e;
        __m512i x0 = _mm512_loadu_si512(p), y0 = _mm512_loadu_si512(q);
        __m512i x1 = _mm512_loadu_si512(p + 32), y1 = _mm512_loadu_si512(q + 32);

        a0 = _mm512_dpwssd_epi32(a0, _mm512_unpacklo_epi16(x0, y0), wp[t]);
        a1 = _mm512_dpwssd_epi32(a1, _mm512_unpackhi_epi16(x0, y0), wp[t]);
        a2 = _mm512_dpwssd_epi32(a2, _mm512_unpacklo_epi16(x1, y1), wp[t]);
        a3 = _mm512_dpwssd_epi32(a3, _mm512_unpackhi_epi16(x1, y1), wp[t]);
    }
    /* unpack works in 128-bit quarters: a0 holds positions 0-3, 8-11, ...,
     * a1 4-7, 12-15, ..., so packing a0 with a1 puts 0-31 in order, and
     * the last pack orders the bytes as the 16-bit formula's does */
    a0 = _mm512_packs_epi32(_mm512_srai_epi32(a0, RS_FRAC + 15),
                            _mm512_srai_epi32(a1, RS_FRAC + 15));
    a2 = _mm512_packs_epi32(_mm512_srai_epi32(a2, RS_FRAC + 15),
                            _mm512_srai_epi32(a3, RS_FRAC + 15));
    return _mm512_packus_epi16(a0, a2);
}

INLINE __mmask64 first_bytes(size_t k) /* k < 64 */
{
    return ((__mmask64)1 << k) - 1;
}

/*
 * An output row of n pixels: the 16-bit formula (WIDE false: T broadcast
 * weights) or the 32-bit one (T / 2 broadcast weight pairs), written in
 * layout.  HWC: each step's bytes put in order (vpermb by hwc_order).
 * CHW: plane c's byte j of 64 pixels, value 3j + c of their 192, from the
 * first two steps by vpermt2b (7 bits of chw_order[c]), merged with the
 * third's where 3j + c >= 128 (vpermb, 6 bits of the same index).
 */
INLINE void vrow_n(const int16_t *const *rows, const int16_t *wt, uint32_t T, uint32_t n,
                   enum rs_layout layout, uint8_t *const out[3], uint8_t *const *next,
                   bool WIDE)
{
    __m512i w[WIDE ? T / 2 : RS_V16_TAPS];
    size_t vals = 3 * (size_t)n;

    for (uint32_t k = 0; k < (WIDE ? T / 2 : T); k++)
        w[k] = WIDE ? _mm512_set1_epi32((int)((uint32_t)(uint16_t)wt[2 * k] |
                                              (uint32_t)(uint16_t)wt[2 * k + 1] << 16))
                    : _mm512_set1_epi16(wt[k]);
    if (next) { /* the lines of a row ahead, for writing (RS_PREFETCH_ROWS) */
        size_t len = layout == RS_HWC ? vals : n;

        for (int c = 0; c < (layout == RS_HWC ? 1 : 3); c++)
            for (size_t i = 0; i < len; i += 64)
                __builtin_prefetch(next[c] + i, 1, 3); /* prefetchw (prfchw) */
    }
#define CHUNK(at) (WIDE ? v32_chunk(rows, (at), w, T) : v16_chunk(rows, (at), w, T))
    if (layout == RS_HWC) {
        const __m512i order = _mm512_load_si512(hwc_order);
        uint8_t *o = out[0];
        size_t e = 0;

        for (; e + 64 <= vals; e += 64)
            _mm512_storeu_si512(o + e, _mm512_permutexvar_epi8(order, CHUNK(e)));
        if (e < vals)
            _mm512_mask_storeu_epi8(o + e, first_bytes(vals - e),
                                    _mm512_permutexvar_epi8(order, CHUNK(e)));
        return;
    }
    {
        const __m512i ix[3] = { _mm512_load_si512(chw_order[0]), _mm512_load_si512(chw_order[1]),
                                _mm512_load_si512(chw_order[2]) };
        /* the pixels whose value 3j + c is in the third step */
        const __mmask64 third[3] = { ~(__mmask64)0 << 43, ~(__mmask64)0 << 43,
                                     ~(__mmask64)0 << 42 };

        for (size_t x = 0; x < n; x += 64) {
            size_t e = 3 * x;
            __m512i r0 = CHUNK(e);
            __m512i r1 = e + 64 < vals ? CHUNK(e + 64) : _mm512_setzero_si512();
            __m512i r2 = e + 128 < vals ? CHUNK(e + 128) : _mm512_setzero_si512();

            for (int c = 0; c < 3; c++) {
                __m512i p = _mm512_mask_permutexvar_epi8(
                    _mm512_permutex2var_epi8(r0, ix[c], r1), third[c], ix[c], r2);

                if (x + 64 <= n)
                    _mm512_storeu_si512(out[c] + x, p);
                else
                    _mm512_mask_storeu_epi8(out[c] + x, first_bytes(n - x), p);
            }
        }
    }
#undef CHUNK
}

AVX512 static void avx512_vrow_rgb(const int16_t *const *rows, const int16_t *wt, uint32_t T,
                                   uint32_t n, enum rs_layout layout, uint8_t *const out[3],
                                   uint8_t *const *next)
{
    switch (T) {
    case 0: break; /* (a row has a tap at least) */
    case 1: vrow_n(rows, wt, 1, n, layout, out, next, false); break;
    case 2: vrow_n(rows, wt, 2, n, layout, out, next, false); break;
    case 3: vrow_n(rows, wt, 3, n, layout, out, next, false); break;
    case 4: vrow_n(rows, wt, 4, n, layout, out, next, false); break;
    case 5: vrow_n(rows, wt, 5, n, layout, out, next, false); break;
    case 6: vrow_n(rows, wt, 6, n, layout, out, next, false); break;
    default: vrow_n(rows, wt, T, n, layout, out, next, T > RS_V16_TAPS); break;
    }
}

const struct rs_kern rs_kern_avx512 = {
    .name = "avx512",
    .rgb = true,
    .hrow = avx512_hrow,
    .hrow2 = avx512_hrow2,
    .vrow_rgb = avx512_vrow_rgb,
};

/* ---- the layout ---- */

/* The lanes of a group: value 16g + m is channel c of output x. */
struct lanes {
    __m512i x, c;  /* for the group at hand */
    __m512i s, k1; /* its output's start - lo, count - 1 (0 past n) */
    __mmask16 valid; /* x < n */
};

AVX512 static void lanes_first(struct lanes *l)
{
    l->x = _mm512_setr_epi32(0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5);
    l->c = _mm512_setr_epi32(0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0);
}

/* To the next group: 16 values on, 5 outputs and a channel. */
INLINE void lanes_next(struct lanes *l)
{
    const __m512i one = _mm512_set1_epi32(1);
    __m512i c = _mm512_add_epi32(l->c, one);
    __mmask16 wrap = _mm512_cmpeq_epi32_mask(c, _mm512_set1_epi32(3));

    l->c = _mm512_mask_mov_epi32(c, wrap, _mm512_setzero_si512());
    l->x = _mm512_mask_add_epi32(_mm512_add_epi32(l->x, _mm512_set1_epi32(5)), wrap,
                                 _mm512_add_epi32(l->x, _mm512_set1_epi32(5)), one);
}

/* The group's starts and counts: its outputs are x0..x0 + 5 (lane 0's
 * first), read as 16 from x0 (masked past n) and permuted to the lanes. */
INLINE void lanes_load(const struct rs_axis *a, struct lanes *l)
{
    int x0 = _mm_cvtsi128_si32(_mm512_castsi512_si128(l->x));
    __m512i rel = _mm512_sub_epi32(l->x, _mm512_set1_epi32(x0));
    uint32_t left = x0 < (int)a->n ? a->n - (uint32_t)x0 : 0; /* outputs from x0 */
    __mmask16 in = (__mmask16)(left >= 16 ? 0xffff : (1u << left) - 1);
    __m512i s = _mm512_permutexvar_epi32(rel, _mm512_maskz_loadu_epi32(in, a->start + x0));
    __m512i k = _mm512_permutexvar_epi32(rel, _mm512_maskz_loadu_epi32(in, a->count + x0));

    l->valid = _mm512_cmplt_epi32_mask(l->x, _mm512_set1_epi32((int)a->n));
    l->s = _mm512_maskz_sub_epi32(l->valid, s, _mm512_set1_epi32(a->lo));
    l->k1 = _mm512_maskz_sub_epi32(l->valid, k, _mm512_set1_epi32(1));
}

/* Byte offset in the row of each lane's sample min(k, count - 1). */
INLINE __m512i offsets(const struct lanes *l, uint32_t k)
{
    __m512i s = _mm512_add_epi32(l->s, _mm512_min_epi32(_mm512_set1_epi32((int)k), l->k1));

    return _mm512_add_epi32(_mm512_add_epi32(s, _mm512_add_epi32(s, s)), l->c);
}

AVX512 int rs_avx512_fit(const struct rs_axis *a)
{
    struct lanes l;
    bool narrow = true, wide = true;

    lanes_first(&l);
    for (uint32_t g = 0; g < a->vgroups; g++, lanes_next(&l)) {
        lanes_load(a, &l);
        if (!l.valid)
            break;
        if (narrow &&
            _mm512_mask_reduce_max_epi32(l.valid, offsets(&l, a->taps)) -
                    _mm512_mask_reduce_min_epi32(l.valid, offsets(&l, 0)) >= WINDOW)
            narrow = false;
        for (uint32_t t = 0; !narrow && wide && t < a->pairs; t++)
            if (_mm512_mask_reduce_max_epi32(l.valid, offsets(&l, 2 * t + 1)) -
                    _mm512_mask_reduce_min_epi32(l.valid, offsets(&l, 2 * t)) >= WINDOW)
                wide = false;
        if (!narrow && !wide)
            return 0;
    }
    return narrow ? 1 : 2;
}

/* Per output and pair t, its weights 2t and 2t + 1 as an int16 pair (0
 * past taps), 16 outputs a step from w's blocks (RS_WB 16): vpw row t,
 * padded with 16 zeros so a group's read of 16 from its first output stays
 * inside.  A weight of 2^15 shows as the half 0x8000, which no other
 * weight makes (they are at most 2^15 - 1). */
static_assert(RS_WB == 16, "a tap of a block of w is one vector");

INLINE void pairs_of(const struct rs_axis *a)
{
    size_t stride = ((size_t)a->n + 15) / 16 * 16 + 16, blocks = ((size_t)a->n + 15) / 16;
    const __m512i lo16 = _mm512_set1_epi32(0xffff);

    for (uint32_t t = 0; t < a->pairs; t++) {
        uint32_t *pw = a->vpw + t * stride;

        for (size_t b = 0; b < blocks; b++) {
            const int32_t *wb = a->w + b * a->taps * RS_WB;
            __m512i w0 = _mm512_load_si512(wb + 2 * t * RS_WB);
            __m512i w1 = 2 * t + 1 < a->taps ? _mm512_load_si512(wb + (2 * t + 1) * RS_WB)
                                             : _mm512_setzero_si512();

            _mm512_store_si512(pw + b * 16, _mm512_or_si512(_mm512_and_si512(w0, lo16),
                                                            _mm512_slli_epi32(w1, 16)));
        }
        _mm512_store_si512(pw + blocks * 16, _mm512_setzero_si512());
    }
}

AVX512 void rs_avx512_layout(struct rs_axis *a)
{
    const __m512i lo16 = _mm512_set1_epi32(0xffff), half = _mm512_set1_epi32(0x8000);
    const __m512i split = _mm512_set1_epi32(32767 | 1 << 16);
    int32_t bytes = 3 * (a->hi - a->lo), cap = bytes >= WINDOW ? bytes - WINDOW : 0;
    size_t stride = ((size_t)a->n + 15) / 16 * 16 + 16;
    uint32_t P = a->pairs;
    struct lanes l;

    pairs_of(a);
    lanes_first(&l);
    for (uint32_t g = 0; g < a->vgroups; g++, lanes_next(&l)) {
        uint32_t *idx = a->vidx + (size_t)g * P * 16, *wp = a->vw + (size_t)g * P * 16;
        int x0 = _mm_cvtsi128_si32(_mm512_castsi512_si128(l.x));
        __m512i rel = _mm512_sub_epi32(l.x, _mm512_set1_epi32(x0));
        int32_t base = 0;

        lanes_load(a, &l);
        if (!l.valid) { /* padding groups: weight 0 from byte 0 */
            memset(idx, 0, (size_t)P * 64);
            memset(wp, 0, (size_t)P * 64);
            if (a->vwide)
                memset(a->vbase + (size_t)g * P, 0, P * sizeof(int32_t));
            else
                a->vbase[g] = 0;
            continue;
        }
        if (!a->vwide) {
            base = _mm512_mask_reduce_min_epi32(l.valid, offsets(&l, 0));
            base = base < cap ? base : cap;
            a->vbase[g] = base;
        }
        for (uint32_t t = 0; t < P; t++) {
            __m512i o0 = offsets(&l, 2 * t), o1 = offsets(&l, 2 * t + 1);
            __m512i w = _mm512_permutexvar_epi32(
                rel, _mm512_loadu_si512(a->vpw + t * stride + (size_t)x0));
            __mmask16 m0 = _mm512_cmpeq_epi32_mask(_mm512_and_si512(w, lo16), half);
            __mmask16 m1 = _mm512_cmpeq_epi32_mask(_mm512_srli_epi32(w, 16), half);
            __m512i vb;

            if (a->vwide) {
                base = _mm512_mask_reduce_min_epi32(l.valid, o0);
                base = base < cap ? base : cap;
                a->vbase[(size_t)g * P + t] = base;
            }
            /* a weight of 2^15: 2^15 - 1 and 1, both on its sample */
            o1 = _mm512_mask_mov_epi32(o1, m0, o0);
            o0 = _mm512_mask_mov_epi32(o0, m1, o1);
            w = _mm512_mask_mov_epi32(w, m0 | m1, split);
            vb = _mm512_set1_epi32(base);
            _mm512_storeu_si512(
                idx + t * 16,
                _mm512_maskz_or_epi32(l.valid, _mm512_sub_epi32(o0, vb),
                                      _mm512_slli_epi32(_mm512_sub_epi32(o1, vb), 16)));
            _mm512_storeu_si512(wp + t * 16, _mm512_maskz_mov_epi32(l.valid, w));
        }
    }
}

#endif
