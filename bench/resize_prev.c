/*
 * resize_prev.c - the resampler as it was before issue 15's rewrite:
 * daemon/worker/resize.c of commit e933b6f58a45, its names prefixed rsprev_
 * and nothing else changed, kept so bench/resize.c can time the old path
 * against the new one on the same machine.  Not part of the daemon.
 *
 * What it said of itself then:
 *
 * resize.c - Pillow-compatible antialiased bilinear resampling (resize.h):
 * per-axis weight plans, then per block of 8 output rows a vertical pass
 * over byte rows, a transpose that puts the 8 rows in the 8 lanes of a
 * vector, a horizontal pass over those vectors, and a transpose back.
 *
 * Built with -O3 (daemon/meson.build) so GCC's loop vectorizer takes the
 * vertical pass; the rest is written with GCC's vector extensions (v8f, 8
 * floats; __builtin_shuffle for the transposes), so every step of the
 * horizontal pass serves 8 output pixels whatever their taps.
 *
 * Scratch layout (rsprev_scratch_bytes), len = the used columns' RGB elements
 * rounded up to 8:
 *     uint16_t acc[8][len]               the block's 8 vertical rows, in 16-bit
 *                                        fixed point (plans of few taps)
 *     float    row[8][len]               the same in float (plans of many)
 *     v8f      block[len + 3 * taps]     element e of the 8 rows as one
 *                                        vector; zeros past the used ones,
 *                                        read by the padding taps
 *     v8f      plane[3][n rounded to 8]  per channel, output pixel i's 8 rows
 *     float    out[8][n rounded to 8]    one channel's 8 output rows, back to
 *                                        back
 */
#include "resize_prev.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint8_t v8u __attribute__((vector_size(8)));

#define LANES 8     /* output rows in a block: one per vector lane */

/* The entry points come in an AVX2 clone and the baseline one (GCC splits
 * the vectors in halves), chosen at load time by the CPU (GCC's
 * target_clones, an ifunc).  tests/meson.build builds this file again with
 * RSPREV_CLONES empty to test the baseline code on any machine. */
#ifndef RSPREV_CLONES
#define RSPREV_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#define ALIGN32(n) (((n) + 31) & ~(size_t)31)

static int grow(void **p, uint32_t *cap, uint64_t need, size_t elem)
{
    void *q;

    if (need <= *cap)
        return 0;
    if (need > UINT32_MAX / elem)
        return -ENOMEM;
    q = realloc(*p, (size_t)need * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = (uint32_t)need;
    return 0;
}

/* floor(x) as an integer, without a libm call on the baseline target;
 * |x| < 2^62 (plans refuse larger boxes). */
static inline int64_t ifloor(double x)
{
    int64_t i = (int64_t)x;

    return i - (x < (double)i);
}

/* The triangle filter's weight of input sample k for a center c and a
 * width of 1 / inv_f input samples. */
static inline double tri(int64_t k, double c, double inv_f)
{
    double x = fabs((double)k + 0.5 - c) * inv_f;

    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Input span of one output sample centered at c: [*a, *b), zero weights at
 * either end trimmed; the nearest allowed sample when the filter misses. */
static void one_span(double c, double f, double inv_f, int32_t lim0, int32_t lim1, int64_t *a,
                     int64_t *b)
{
    int64_t k0 = ifloor(c - f + 0.5), k1 = ifloor(c + f + 0.5);

    *a = k0 < lim0 ? lim0 : k0;
    *b = k1 > lim1 ? lim1 : k1;
    while (*a < *b && tri(*a, c, inv_f) == 0.0)
        (*a)++;
    while (*b > *a && tri(*b - 1, c, inv_f) == 0.0)
        (*b)--;
    if (*a >= *b) {
        int64_t nearest = ifloor(c);

        *a = nearest < lim0 ? lim0 : nearest >= lim1 ? lim1 - 1 : nearest;
        *b = *a + 1;
    }
}

/* Weights of output o over [a, b): float, and, for plans of at most
 * RSPREV_FIXED_TAPS taps, in 1/256 rounded by largest remainder so they sum to
 * exactly 256 with every one within 1/256 of its float. */
static void one_weights(struct rsprev_axis *ax, uint32_t o, double c, double inv_f, int64_t a,
                        int64_t b)
{
    float *w = ax->w + (size_t)o * ax->taps;
    uint32_t n = (uint32_t)(b - a);
    double sum = 0, v[RSPREV_FIXED_TAPS], rem[RSPREV_FIXED_TAPS];
    bool fixed = ax->taps <= RSPREV_FIXED_TAPS;
    int left = 256;

    for (uint32_t i = 0; i < n; i++) {
        double t = tri(a + i, c, inv_f);

        if (fixed)
            v[i] = t;
        sum += t;
    }
    for (uint32_t i = 0; i < ax->taps; i++) {
        double x = i >= n ? 0.0 : sum <= 0 ? 1.0 : (fixed ? v[i] : tri(a + i, c, inv_f)) / sum;

        w[i] = (float)x;
        if (fixed) {
            uint16_t *q = ax->q + (size_t)o * ax->taps;

            q[i] = (uint16_t)(x * 256.0);
            rem[i] = x * 256.0 - q[i];
            left -= q[i];
        }
    }
    while (fixed && left-- > 0) {
        uint16_t *q = ax->q + (size_t)o * ax->taps;
        uint32_t big = 0;

        for (uint32_t i = 1; i < n; i++)
            if (rem[i] > rem[big])
                big = i;
        q[big]++;
        rem[big] -= 1.0;
    }
}

int rsprev_axis_plan(struct rsprev_axis *a, uint32_t n, double box0, double box1, int32_t lim0,
                 int32_t lim1, bool mirror)
{
    double scale, f, inv_f;
    uint32_t taps = 1;

    if (n == 0 || !(box0 < box1) || lim0 >= lim1 || !(box1 > lim0) || !(box0 < lim1) ||
        !(fabs(box0) < 1e12) || !(fabs(box1) < 1e12))
        return -EINVAL;
    scale = (box1 - box0) / n;
    f = scale < 1.0 ? 1.0 : scale;
    if (f > 65536.0)
        return -EINVAL;
    inv_f = 1.0 / f;
    if (grow((void **)&a->span, &a->cap_n, n, sizeof(struct rsprev_span)) < 0)
        return -ENOMEM;
    a->n = n;
    a->lo = INT32_MAX;
    a->hi = INT32_MIN;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t o = mirror ? n - 1 - i : i;
        int64_t s0, s1;

        one_span(box0 + (i + 0.5) * scale, f, inv_f, lim0, lim1, &s0, &s1);
        a->span[o] = (struct rsprev_span){ .start = (int32_t)s0, .count = (uint32_t)(s1 - s0) };
        if (a->span[o].count > taps)
            taps = a->span[o].count;
        if (s0 < a->lo)
            a->lo = (int32_t)s0;
        if (s1 > a->hi)
            a->hi = (int32_t)s1;
    }
    a->taps = taps;
    if (grow((void **)&a->w, &a->cap_w, (uint64_t)n * taps, sizeof(float)) < 0 ||
        grow((void **)&a->q, &a->cap_q, (uint64_t)n * taps, sizeof(uint16_t)) < 0)
        return -ENOMEM;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t o = mirror ? n - 1 - i : i;

        one_weights(a, o, box0 + (i + 0.5) * scale, inv_f, a->span[o].start,
                    (int64_t)a->span[o].start + a->span[o].count);
    }
    return 0;
}

void rsprev_axis_free(struct rsprev_axis *a)
{
    if (!a)
        return;
    free(a->span);
    free(a->w);
    free(a->q);
    memset(a, 0, sizeof(*a));
}

/* Elements of a vertical row: the used columns' RGB, rounded up to whole
 * vectors. */
static size_t row_len(const struct rsprev_axis *ax)
{
    return ((size_t)(ax->hi - ax->lo) * 3 + LANES - 1) / LANES * LANES;
}

/* Rows of the transposed block a horizontal pass may read past the used
 * columns: fixed-count taps of the last outputs reach (taps - 1) pixels. */
static size_t row_pad(const struct rsprev_axis *ax)
{
    return (size_t)ax->taps * 3;
}

static size_t out_len(const struct rsprev_axis *ax)
{
    return ((size_t)ax->n + LANES - 1) / LANES * LANES;
}

size_t rsprev_scratch_bytes(const struct rsprev_axis *ax, const struct rsprev_axis *ay)
{
    (void)ay;
    return LANES * ALIGN32(row_len(ax) * sizeof(uint16_t)) +             /* acc */
           LANES * ALIGN32(row_len(ax) * sizeof(float)) +                /* rows */
           ALIGN32((row_len(ax) + row_pad(ax)) * LANES * sizeof(float)) + /* block */
           3 * ALIGN32(out_len(ax) * LANES * sizeof(float)) +            /* planes */
           LANES * out_len(ax) * sizeof(float);                          /* out */
}

/* acc[0..len) = sum over taps of q[k] * row k (rows `stride` bytes apart),
 * in 16 bits: the weights sum to 256, so the sum is at most 255 * 256. */
static inline __attribute__((always_inline)) void
vertical_fixed(uint16_t *restrict acc, const uint8_t *restrict src, size_t stride,
               const uint16_t *q, uint32_t count, size_t len)
{
    const uint8_t *restrict r0 = src;
    uint16_t q0 = q[0];

    for (size_t x = 0; x < len; x++)
        acc[x] = (uint16_t)(q0 * r0[x]);
    for (uint32_t k = 1; k < count; k++) {
        const uint8_t *restrict r = src + k * stride;
        uint16_t qk = q[k];

        if (qk == 0)
            continue;
        for (size_t x = 0; x < len; x++)
            acc[x] = (uint16_t)(acc[x] + qk * r[x]);
    }
}

/* row[0..len) = sum over taps of w[k] * row k, in float: for plans of more
 * than RSPREV_FIXED_TAPS taps, where 1/256 weights would lose precision. */
static inline __attribute__((always_inline)) void
vertical_float(float *restrict row, const uint8_t *restrict src, size_t stride, const float *w,
               uint32_t count, size_t len)
{
    const uint8_t *restrict r0 = src;
    float w0 = w[0];

    for (size_t x = 0; x < len; x++)
        row[x] = w0 * (float)r0[x];
    for (uint32_t k = 1; k < count; k++) {
        const uint8_t *restrict r = src + k * stride;
        float wk = w[k];

        for (size_t x = 0; x < len; x++)
            row[x] += wk * (float)r[x];
    }
}

/* out[j][i] = in[i][j] for an 8 x 8 block of floats: rows in[0..7] (8
 * floats each, any alignment) to rows out[0..7] (unpack, shuffle, swap
 * halves: 24 shuffles; locals, so the compiler keeps all in registers). */
static inline __attribute__((always_inline)) void
transpose8(const float *const in[LANES], float *const out[LANES])
{
    const v8i lo = { 0, 8, 1, 9, 4, 12, 5, 13 }, hi = { 2, 10, 3, 11, 6, 14, 7, 15 };
    const v8i plo = { 0, 1, 8, 9, 4, 5, 12, 13 }, phi = { 2, 3, 10, 11, 6, 7, 14, 15 };
    const v8i qlo = { 0, 1, 2, 3, 8, 9, 10, 11 }, qhi = { 4, 5, 6, 7, 12, 13, 14, 15 };
    v8f r0, r1, r2, r3, r4, r5, r6, r7, t0, t1, t2, t3, t4, t5, t6, t7;

    memcpy(&r0, in[0], 32);
    memcpy(&r1, in[1], 32);
    memcpy(&r2, in[2], 32);
    memcpy(&r3, in[3], 32);
    memcpy(&r4, in[4], 32);
    memcpy(&r5, in[5], 32);
    memcpy(&r6, in[6], 32);
    memcpy(&r7, in[7], 32);
    t0 = __builtin_shuffle(r0, r1, lo);
    t1 = __builtin_shuffle(r0, r1, hi);
    t2 = __builtin_shuffle(r2, r3, lo);
    t3 = __builtin_shuffle(r2, r3, hi);
    t4 = __builtin_shuffle(r4, r5, lo);
    t5 = __builtin_shuffle(r4, r5, hi);
    t6 = __builtin_shuffle(r6, r7, lo);
    t7 = __builtin_shuffle(r6, r7, hi);
    r0 = __builtin_shuffle(t0, t2, plo);
    r1 = __builtin_shuffle(t0, t2, phi);
    r2 = __builtin_shuffle(t1, t3, plo);
    r3 = __builtin_shuffle(t1, t3, phi);
    r4 = __builtin_shuffle(t4, t6, plo);
    r5 = __builtin_shuffle(t4, t6, phi);
    r6 = __builtin_shuffle(t5, t7, plo);
    r7 = __builtin_shuffle(t5, t7, phi);
    t0 = __builtin_shuffle(r0, r4, qlo);
    t4 = __builtin_shuffle(r0, r4, qhi);
    t1 = __builtin_shuffle(r1, r5, qlo);
    t5 = __builtin_shuffle(r1, r5, qhi);
    t2 = __builtin_shuffle(r2, r6, qlo);
    t6 = __builtin_shuffle(r2, r6, qhi);
    t3 = __builtin_shuffle(r3, r7, qlo);
    t7 = __builtin_shuffle(r3, r7, qhi);
    memcpy(out[0], &t0, 32);
    memcpy(out[1], &t1, 32);
    memcpy(out[2], &t2, 32);
    memcpy(out[3], &t3, 32);
    memcpy(out[4], &t4, 32);
    memcpy(out[5], &t5, 32);
    memcpy(out[6], &t6, 32);
    memcpy(out[7], &t7, 32);
}

/* block[e * 8 + r] = row[r][e]: element e of the 8 rows in one vector. */
static inline __attribute__((always_inline)) void
gather_block(v8f *restrict block, float *const *row, size_t len)
{
    for (size_t e = 0; e < len; e += LANES) {
        const float *in[LANES] = { row[0] + e, row[1] + e, row[2] + e, row[3] + e,
                                   row[4] + e, row[5] + e, row[6] + e, row[7] + e };
        float *out[LANES] = { (float *)(block + e), (float *)(block + e + 1),
                              (float *)(block + e + 2), (float *)(block + e + 3),
                              (float *)(block + e + 4), (float *)(block + e + 5),
                              (float *)(block + e + 6), (float *)(block + e + 7) };

        transpose8(in, out);
    }
}

typedef uint16_t v8h __attribute__((vector_size(16)));

/* As gather_block, from the 16-bit rows of the fixed-point vertical pass,
 * converted to float on the way (still times 256: scatter_block undoes it). */
static inline __attribute__((always_inline)) void
gather_block_fixed(v8f *restrict block, uint16_t *const *acc, size_t len)
{
    for (size_t e = 0; e < len; e += LANES) {
        float f[LANES][LANES] __attribute__((aligned(32)));
        const float *in[LANES] = { f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7] };
        float *out[LANES] = { (float *)(block + e), (float *)(block + e + 1),
                              (float *)(block + e + 2), (float *)(block + e + 3),
                              (float *)(block + e + 4), (float *)(block + e + 5),
                              (float *)(block + e + 6), (float *)(block + e + 7) };

        for (int r = 0; r < LANES; r++) {
            v8h h;
            v8f v;

            memcpy(&h, acc[r] + e, sizeof(h));
            v = __builtin_convertvector(h, v8f);
            memcpy(f[r], &v, sizeof(v));
        }
        transpose8(in, out);
    }
}

/*
 * The horizontal pass for 8 rows at once: plane[c][i] (8 lanes, one per
 * row) = sum over k < TAPS of w(i, k) * block[(start_i + k) * 3 + c].
 * TAPS is a constant in the calls below, so the tap loop unrolls.
 */
static inline __attribute__((always_inline)) void
horizontal_n(v8f *restrict plane[3], const v8f *restrict block, const struct rsprev_axis *ax,
             uint32_t TAPS)
{
    const float *w = ax->w;

    for (uint32_t i = 0; i < ax->n; i++, w += TAPS) {
        const v8f *p = block + (size_t)(ax->span[i].start - ax->lo) * 3;
        v8f r = w[0] * p[0], g = w[0] * p[1], b = w[0] * p[2];

        for (uint32_t k = 1; k < TAPS; k++) {
            r += w[k] * p[3 * k];
            g += w[k] * p[3 * k + 1];
            b += w[k] * p[3 * k + 2];
        }
        plane[0][i] = r;
        plane[1][i] = g;
        plane[2][i] = b;
    }
}

/* A switch, not a table of functions: each case inlines a copy with the
 * tap count a constant into rsprev_resize and so into each of its clones. */
static inline __attribute__((always_inline)) void
horizontal(v8f *restrict plane[3], const v8f *restrict block, const struct rsprev_axis *ax)
{
    switch (ax->taps) {
    case 2: horizontal_n(plane, block, ax, 2); break;
    case 3: horizontal_n(plane, block, ax, 3); break;
    case 4: horizontal_n(plane, block, ax, 4); break;
    case 5: horizontal_n(plane, block, ax, 5); break;
    default: horizontal_n(plane, block, ax, ax->taps); break;
    }
}

/* A row of n floats times scale to bytes, rounded half up, clamped to
 * 0..255. */
static inline __attribute__((always_inline)) void
to_bytes(uint8_t *restrict dst, const float *restrict f, size_t n, float scale)
{
    for (size_t x = 0; x < n; x++) {
        int v = (int)(f[x] * scale + 0.5f);

        v = v < 0 ? 0 : v;
        dst[x] = (uint8_t)(v > 255 ? 255 : v);
    }
}

/* One channel's block (output pixel i's 8 rows in plane[i]) back to rows:
 * out[k][i] for k < 8, then the first `rows` of them, times scale, to
 * bytes in dst, n pixels a row. */
static inline __attribute__((always_inline)) void
scatter_block(uint8_t *restrict dst, const v8f *restrict plane, float *const out[LANES],
              uint32_t n, uint32_t rows, float scale)
{
    for (uint32_t i = 0; i < n; i += LANES) {
        const float *in[LANES] = {
            (const float *)(plane + i), (const float *)(plane + i + 1),
            (const float *)(plane + i + 2), (const float *)(plane + i + 3),
            (const float *)(plane + i + 4), (const float *)(plane + i + 5),
            (const float *)(plane + i + 6), (const float *)(plane + i + 7) };
        float *o[LANES] = { out[0] + i, out[1] + i, out[2] + i, out[3] + i,
                            out[4] + i, out[5] + i, out[6] + i, out[7] + i };

        transpose8(in, o);
    }
    if (n % LANES == 0) /* the rows are back to back here and in dst: one loop */
        to_bytes(dst, out[0], (size_t)rows * n, scale);
    else
        for (uint32_t k = 0; k < rows; k++)
            to_bytes(dst + (size_t)k * n, out[k], n, scale);
}

RSPREV_CLONES
void rsprev_resize(const uint8_t *src, size_t stride, int32_t x0, int32_t y0,
               const struct rsprev_axis *ax, const struct rsprev_axis *ay, void *scratch, uint8_t *dst)
{
    size_t len = row_len(ax), used = (size_t)(ax->hi - ax->lo) * 3;
    size_t row_bytes = ALIGN32(len * sizeof(float));
    size_t plane_bytes = ALIGN32(out_len(ax) * LANES * sizeof(float));
    size_t plane_size = (size_t)ax->n * ay->n;
    char *base = (char *)scratch;
    uint16_t *acc[LANES];
    float *row[LANES], *out[LANES];
    v8f *block, *plane[3];
    const uint8_t *col = src + (size_t)(ax->lo - x0) * 3;

    for (int r = 0; r < LANES; r++, base += ALIGN32(len * sizeof(uint16_t)))
        acc[r] = (uint16_t *)base;
    for (int r = 0; r < LANES; r++, base += row_bytes)
        row[r] = (float *)base;
    block = (v8f *)base;
    base += ALIGN32((len + row_pad(ax)) * LANES * sizeof(float));
    for (int c = 0; c < 3; c++, base += plane_bytes)
        plane[c] = (v8f *)base;
    for (int r = 0; r < LANES; r++, base += out_len(ax) * sizeof(float))
        out[r] = (float *)base; /* back to back: out_len is a multiple of 8 floats */
    /* past the used elements: zeros, read by padded taps with weight 0 */
    for (int r = 0; r < LANES; r++) {
        memset(row[r] + used, 0, (len - used) * sizeof(float));
        memset(acc[r] + used, 0, (len - used) * sizeof(uint16_t));
    }
    memset(block + len, 0, row_pad(ax) * sizeof(v8f));
    memset(plane[0] + ax->n, 0, (out_len(ax) - ax->n) * sizeof(v8f));
    memset(plane[1] + ax->n, 0, (out_len(ax) - ax->n) * sizeof(v8f));
    memset(plane[2] + ax->n, 0, (out_len(ax) - ax->n) * sizeof(v8f));
    for (uint32_t y = 0; y < ay->n; y += LANES) {
        uint32_t rows = ay->n - y < LANES ? ay->n - y : LANES;

        for (uint32_t r = 0; r < LANES; r++) {
            uint32_t yy = y + (r < rows ? r : rows - 1); /* a short block repeats its last */
            const uint8_t *first = col + (size_t)(ay->span[yy].start - y0) * stride;

            if (ay->taps <= RSPREV_FIXED_TAPS)
                vertical_fixed(acc[r], first, stride, ay->q + (size_t)yy * ay->taps,
                               ay->span[yy].count, used);
            else
                vertical_float(row[r], first, stride, ay->w + (size_t)yy * ay->taps,
                               ay->span[yy].count, used);
        }
        if (ay->taps <= RSPREV_FIXED_TAPS)
            gather_block_fixed(block, acc, len);
        else
            gather_block(block, row, len);
        horizontal(plane, block, ax);
        for (int c = 0; c < 3; c++)
            scatter_block(dst + c * plane_size + (size_t)y * ax->n, plane[c], out, ax->n, rows,
                          ay->taps <= RSPREV_FIXED_TAPS ? 1.0f / 256.0f : 1.0f);
    }
}

RSPREV_CLONES
void rsprev_interleave(const uint8_t *restrict planes, size_t n, uint8_t *restrict rgb)
{
    const uint8_t *restrict r = planes, *restrict g = planes + n, *restrict b = planes + 2 * n;

    for (size_t i = 0; i < n; i++) {
        rgb[3 * i] = r[i];
        rgb[3 * i + 1] = g[i];
        rgb[3 * i + 2] = b[i];
    }
}
