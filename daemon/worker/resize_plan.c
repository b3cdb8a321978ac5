/*
 * resize_plan.c - the resampler's coefficient tables and their cache
 * (resize.h).
 *
 * A table is built per image (train crops rarely repeat a size: the cache
 * hits 1% of bench/jpeg-loader's crops, bench/resize --photos), so the
 * build must be cheap: passes 1 and 2 take 4 outputs a step in vectors,
 * branch-free:
 *   1. spans: each output's first input and count (a zero weight at the
 *      end trimmed, the nearest allowed input when the filter misses), in
 *      the triangle's own coordinate x = (k + 0.5 - c) / f;
 *   2. fixed point: per output the weights 1 - |x| (x stepped by 1/f), then
 *      the cumulative rounding q_k = R(S_k) - R(S_(k-1)), R(s) = round(s
 *      2^prec / sum) of the running sums S_k (the last exactly 2^prec):
 *      every q_k within 1 of its exact value, none negative, summing to
 *      2^prec.  prec: 15, but for dot tables the most int16 allows for
 *      their largest weight, at most 22 (a pass more to find it);
 *   3. horizontal tables: the AVX2 kernels' layout (resize.h), the
 *      cheapest windows that fit.
 * The cache compares keys field by field (doubles exactly) and evicts the
 * least recently returned table; an evicted way's arrays are reused.
 */
#include "resize.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "resize_kern.h"

#define ALIGN32(n) (((n) + 31) & ~(size_t)31)

#ifdef RS_NO_AVX2
#define RS_PLAN_CLONES
#else
#define RS_PLAN_CLONES __attribute__((target_clones("avx2", "default")))
#endif

#define PREC_MAX_DOT 22  /* a dot table's sums: |p - 128| * 2^22 at most */
#define GATHER_WINDOW 16 /* bytes a gather window holds */

/* Grows *p to hold `bytes` (32-byte aligned, contents lost). */
static int grow(void **p, size_t *cap, size_t bytes)
{
    void *q;

    if (bytes <= *cap)
        return 0;
    bytes = ALIGN32(bytes);
    q = aligned_alloc(32, bytes);
    if (!q)
        return -ENOMEM;
    free(*p);
    *p = q;
    *cap = bytes;
    return 0;
}

/* Carves the table's arrays out of a->mem for its n, taps and dir. */
static int carve(struct rs_axis *a)
{
    size_t nt = ((size_t)a->n + 3) / 4 * 4 * a->taps, groups = 0, pairs = 0, t16 = 0, sz[6],
           total = 0;
    void **dst[6] = { (void **)&a->w, (void **)&a->base, (void **)&a->idx, (void **)&a->bw,
                      (void **)&a->off, (void **)&a->w16 };
    char *m;

    if (a->dir == RS_HORIZONTAL) {
        groups = ((size_t)a->n + 15) / 16;
        pairs = (a->taps + 1) / 2;
        t16 = ((size_t)a->taps + 15) / 16 * 16;
    }
    if (nt > SIZE_MAX / 16 || groups * 16 * (t16 + pairs * 4) > SIZE_MAX / 4)
        return -ENOMEM;
    sz[0] = nt * sizeof(int32_t);
    sz[1] = groups * 4 * sizeof(int32_t);
    sz[2] = groups * 2 * pairs * 32;
    sz[3] = groups * 2 * pairs * 16 * sizeof(int16_t);
    sz[4] = groups * 16 * sizeof(int32_t);
    sz[5] = groups * 16 * t16 * sizeof(int16_t);
    for (int i = 0; i < 6; i++)
        total += ALIGN32(sz[i]);
    if (grow(&a->mem, &a->cap_mem, total) < 0)
        return -ENOMEM;
    m = a->mem;
    for (int i = 0; i < 6; i++) {
        *dst[i] = m;
        m += ALIGN32(sz[i]);
    }
    a->pairs = (uint32_t)pairs;
    a->groups = (uint32_t)groups;
    a->taps16 = (uint32_t)t16;
    return 0;
}

/*
 * Passes 1 and 2 take 4 outputs at a time, one per lane of GCC's vector
 * types: the same IEEE operations, lane by lane, whatever the target
 * (SSE2 splits them in halves), so a table does not depend on the machine.
 * Floors are exact (|x| < 2^51: boxes are under 1e12); lanes past n are
 * computed into the room start, count and w keep for them, never read.
 * rs_axis_plan comes in an AVX2 clone (4 lanes a step) and the baseline
 * (GCC's target_clones: an ifunc chooses by the CPU); no FMA in either, so
 * the clones round alike.
 */
#pragma GCC diagnostic ignored "-Wpsabi" /* static inline only: no ABI to keep */

typedef double v4d __attribute__((vector_size(32)));
typedef int64_t v4l __attribute__((vector_size(32)));
typedef int32_t v4i __attribute__((vector_size(16)));

#define V4(x) ((v4d){ (x), (x), (x), (x) })

static inline __attribute__((always_inline)) v4d sel(v4l m, v4d a, v4d b) /* m ? a : b, m all ones or zeros */
{
    return (v4d)(((v4l)a & m) | ((v4l)b & ~m));
}

static inline __attribute__((always_inline)) v4d vfloor(v4d x)
{
    v4d t = (x + V4(6755399441055744.0)) - V4(6755399441055744.0); /* 1.5 * 2^52 */

    return t - sel(t > x, V4(1.0), V4(0.0));
}

static inline __attribute__((always_inline)) v4d vabs(v4d x)
{
    return (v4d)((v4l)x & (v4l){ INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX });
}

/* The centers of outputs o..o+3 (input coordinates). */
static inline __attribute__((always_inline)) v4d centers(double box0, double scale, uint32_t n, uint32_t o, bool mirror)
{
    v4d i = { o, o + 1.0, o + 2.0, o + 3.0 };

    if (mirror)
        i = V4((double)n - 1.0) - i;
    return V4(box0) + (i + V4(0.5)) * V4(scale);
}

/*
 * Pass 1 for outputs o..o+3: spans in [lim0, lim1) with a weight 1 - |x|
 * > 0 at both ends (x = (k + 0.5 - c) / f); the nearest allowed sample
 * when none is left.  With k0 = floor(c - f + 0.5) the first sample's x is
 * above -1 and the last's (k1 - 1) at most 1: only the last can weigh 0
 * (and rounding may put the first at -1), one step each, no loop.
 */
static inline __attribute__((always_inline)) void spans4(struct rs_axis *a, uint32_t o, v4d c, double f, double inv_f,
                          double lim0, double lim1)
{
    v4d s0 = vfloor(c - V4(f) + V4(0.5)), s1 = vfloor(c + V4(f) + V4(0.5)), x0, x1, near;
    v4l bad;

    s0 = sel(s0 < V4(lim0), V4(lim0), s0);
    s1 = sel(s1 > V4(lim1), V4(lim1), s1);
    x0 = (s0 + V4(0.5) - c) * V4(inv_f);
    x1 = ((s1 - V4(1.0)) + V4(0.5) - c) * V4(inv_f);
    s0 = s0 + sel(x0 <= V4(-1.0), V4(1.0), V4(0.0));
    s1 = s1 - sel(x1 >= V4(1.0), V4(1.0), V4(0.0));
    near = vfloor(c);
    near = sel(near < V4(lim0), V4(lim0), sel(near >= V4(lim1), V4(lim1 - 1.0), near));
    bad = s0 >= s1;
    s0 = sel(bad, near, s0);
    s1 = sel(bad, near + V4(1.0), s1);
    *(v4i *)(a->start + o) = __builtin_convertvector(s0, v4i);
    *(v4i *)(a->count + o) = __builtin_convertvector(s1 - s0, v4i);
}

/*
 * Pass 2 for outputs o..o+3 (o a multiple of 4): their weights at prec,
 * a vector of 4 a tap (RS_W).
 * Per output, the exact weights 1 - |x| (x stepped by inv_f from the first
 * sample, clamped at 0 against rounding) and their sum, then the running
 * sums rounded, R(s) = trunc(s 2^prec / sum + 0.5), and q_k = R(S_k) -
 * R(S_(k-1)), the last 2^prec - R(S_(count-2)).
 */
static inline __attribute__((always_inline)) void weights4(struct rs_axis *a, uint32_t o, v4d c, double inv_f, uint32_t prec)
{
    v4i st = *(const v4i *)(a->start + o), cn = *(const v4i *)(a->count + o);
    v4d cnt = __builtin_convertvector(cn, v4d), x0, x, sum = V4(0.0), s = V4(0.0), k;
    v4d one = V4((double)(1 << prec)), prev = V4(0.0);
    uint32_t taps = a->taps;
    v4i *w = (v4i *)(a->w + (size_t)o * taps); /* the block's, tap-major */

    x0 = (__builtin_convertvector(st, v4d) + V4(0.5) - c) * V4(inv_f);
    x = x0;
    for (uint32_t i = 0; i < taps; i++, x += V4(inv_f)) {
        v4d v = V4(1.0) - vabs(x);

        sum += sel((v > V4(0.0)) & (V4((double)i) < cnt), v, V4(0.0));
    }
    k = sel(sum > V4(0.0), one / sum, V4(0.0)); /* 0: the nearest sample alone */
    x = x0;
    for (uint32_t i = 0; i < taps; i++, x += V4(inv_f)) {
        v4d v = V4(1.0) - vabs(x), r, q;
        v4l inner = V4((double)i + 1.0) < cnt, last = V4((double)i + 1.0) == cnt;

        s = sel(inner, s + sel(v > V4(0.0), v, V4(0.0)), s);
        r = __builtin_convertvector(__builtin_convertvector(s * k + V4(0.5), v4i), v4d);
        q = sel(inner, r - prev, sel(last, one - prev, V4(0.0)));
        prev = sel(inner, r, prev);
        w[i] = __builtin_convertvector(q, v4i);
    }
}

/* The widest span of first samples over the gather layout's windows: of
 * each half of each block (4 outputs, shared false) or of each half of a
 * group (the 8 outputs of both blocks' halves, shared true). */
static int64_t widest(const struct rs_axis *a, bool shared)
{
    int64_t most = 0;

    for (uint32_t g = 0; g < a->groups; g++)
        for (uint32_t h = 0; h < 2; h++)
            for (uint32_t blk = 0; blk < (shared ? 1u : 2u); blk++) {
                int32_t mn = INT32_MAX, mx = INT32_MIN;

                for (uint32_t j = 0; j < (shared ? 8u : 4u); j++) {
                    uint32_t x = g * 16 + h * 8 + (shared ? j : 2 * j + blk);

                    if (x < a->n) {
                        mn = a->start[x] < mn ? a->start[x] : mn;
                        mx = a->start[x] > mx ? a->start[x] : mx;
                    }
                }
                if (mn != INT32_MAX && (int64_t)mx - mn > most)
                    most = (int64_t)mx - mn;
            }
    return most;
}

/* Picks the gather layout's windows, cheapest first: one a half shared by
 * both blocks, one per block's half, then the same with a window per pair
 * (each needs only its pair's reach, 2 samples, past its first); false
 * when none fits (the dot kernel). */
static bool pick_windows(struct rs_axis *a)
{
    int64_t w8 = widest(a, true), w4 = widest(a, false), reach = 2 * (int64_t)a->pairs;

    a->shared = w8 + reach <= GATHER_WINDOW || (w4 + reach > GATHER_WINDOW && w8 + 2 <= GATHER_WINDOW);
    a->wide = (a->shared ? w8 : w4) + reach > GATHER_WINDOW;
    return (a->shared ? w8 : w4) + (a->wide ? 2 : reach) <= GATHER_WINDOW;
}

/* Pass 3: the gather kernel's windows, shuffles and weight pairs, or the
 * dot kernel's padded weights. */
static void layouts(struct rs_axis *a)
{
    uint32_t P = a->pairs;

    if (!a->gather) {
        for (uint32_t x = 0; x < a->groups * 16; x++) {
            int16_t *d = a->w16 + (size_t)x * a->taps16;

            memset(d, 0, (size_t)a->taps16 * sizeof(int16_t));
            a->off[x] = x < a->n ? a->start[x] - a->lo : 0;
            for (uint32_t k = 0; x < a->n && k < a->taps; k++)
                d[k] = (int16_t)RS_W(a, x, k);
        }
        return;
    }
    for (uint32_t g = 0; g < a->groups; g++)
        for (uint32_t h = 0; h < 2; h++) {
            int32_t mn[2] = { INT32_MAX, INT32_MAX };

            for (uint32_t j = 0; j < 8; j++) {
                uint32_t x = g * 16 + h * 8 + j;

                if (x < a->n && a->start[x] < mn[j % 2])
                    mn[j % 2] = a->start[x];
            }
            if (a->shared)
                mn[0] = mn[1] = mn[0] < mn[1] ? mn[0] : mn[1];
            for (uint32_t blk = 0; blk < 2; blk++) {
                int32_t base = mn[blk] == INT32_MAX ? 0 : mn[blk] - a->lo;
                uint8_t *ix = a->idx + ((size_t)g * 2 + blk) * P * 32 + h * 16;
                int16_t *bw = a->bw + ((size_t)g * 2 + blk) * P * 16 + h * 8;

                a->base[g * 4 + blk * 2 + h] = base;
                for (uint32_t j = 0; j < 4; j++) {
                    uint32_t x = g * 16 + h * 8 + 2 * j + blk, rel;
                    const int32_t *wx;

                    if (x >= a->n) { /* padding: zero samples, weight 0 */
                        for (uint32_t t = 0; t < P; t++) {
                            memset(ix + t * 32 + j * 4, 0x80, 4);
                            memset(bw + t * 16 + j * 2, 0, 4);
                        }
                        continue;
                    }
                    rel = (uint32_t)(a->start[x] - a->lo - base);
                    wx = &RS_W(a, x, 0); /* weight k at wx[4 * k] */
                    for (uint32_t t = 0; t < P; t++) {
                        uint32_t r = rel + (a->wide ? 0 : 2 * t), q, v;
                        int32_t w0 = wx[8 * t], w1 = 2 * t + 1 < a->taps ? wx[8 * t + 4] : 0;

                        if (w0 == 32768 || w1 == 32768) {
                            /* the one weight of 1 (the other is 0), too big
                             * for int16: 2^15 - 1 and 1 on its sample */
                            r += w0 ? 0 : 1;
                            q = 0x80 | r << 8 | 0x80 << 16 | r << 24;
                            w0 = 32767;
                            w1 = 1;
                        } else { /* low bytes zero, the samples high */
                            q = 0x80 | r << 8 | 0x80 << 16 | (r + 1) << 24;
                        }
                        v = (uint16_t)w0 | (uint32_t)(uint16_t)w1 << 16;
                        memcpy(ix + t * 32 + j * 4, &q, 4);
                        memcpy(bw + t * 16 + j * 2, &v, 4);
                    }
                }
            }
        }
}

RS_PLAN_CLONES
int rs_axis_plan(struct rs_axis *a, enum rs_dir dir, uint32_t n, double box0, double box1,
                 int32_t lim0, int32_t lim1, bool mirror)
{
    double scale, f, inv_f;
    uint32_t taps = 1, prec;

    if (n == 0 || !(box0 < box1) || lim0 >= lim1 || !(box1 > lim0) || !(box0 < lim1) ||
        !(fabs(box0) < 1e12) || !(fabs(box1) < 1e12) ||
        (dir != RS_HORIZONTAL && dir != RS_VERTICAL) || (dir == RS_VERTICAL && mirror))
        return -EINVAL;
    scale = (box1 - box0) / n;
    f = scale < 1.0 ? 1.0 : scale;
    if (f > 65536.0)
        return -EINVAL;
    inv_f = 1.0 / f;
    if (n > a->cap_n) {
        void *q = NULL;
        size_t cap = 0, room = ((size_t)n + 3) / 4 * 4; /* the lanes past n */

        if (grow(&q, &cap, room * 8) < 0)
            return -ENOMEM;
        free(a->start);
        a->start = q;
        a->cap_n = room;
    }
    a->count = (uint32_t *)(a->start + a->cap_n);
    a->dir = dir;
    a->n = n;
    for (uint32_t o = 0; o < n; o += 4) /* 1 */
        spans4(a, o, centers(box0, scale, n, o, mirror), f, inv_f, lim0, lim1);
    a->lo = a->start[0];
    a->hi = a->start[0] + (int32_t)a->count[0];
    a->monotone = true;
    for (uint32_t o = 0; o < n; o++) {
        int32_t s0 = a->start[o], s1 = s0 + (int32_t)a->count[o];

        taps = a->count[o] > taps ? a->count[o] : taps;
        a->lo = s0 < a->lo ? s0 : a->lo;
        a->hi = s1 > a->hi ? s1 : a->hi;
        if (o > 0 && (s0 < a->start[o - 1] || s1 < a->start[o - 1] + (int32_t)a->count[o - 1]))
            a->monotone = false;
    }
    a->taps = taps;
    if (carve(a) < 0)
        return -ENOMEM;
    a->gather = a->wide = a->shared = false;
    if (dir == RS_HORIZONTAL)
        a->gather = pick_windows(a);
    prec = 15;
    if (dir == RS_HORIZONTAL && !a->gather) {
        /* a dot table: as many bits as its largest weight allows in int16 */
        int32_t most = 0;

        for (uint32_t o = 0; o < n; o += 4)
            weights4(a, o, centers(box0, scale, n, o, mirror), inv_f, PREC_MAX_DOT);
        for (size_t k = 0; k < ((size_t)n + 3) / 4 * 4 * taps; k++)
            most = a->w[k] > most ? a->w[k] : most;
        for (prec = PREC_MAX_DOT; prec > 14 && (most >> (PREC_MAX_DOT - prec)) + 1 > 32767;)
            prec--;
    }
    for (uint32_t o = 0; o < n; o += 4) /* 2 */
        weights4(a, o, centers(box0, scale, n, o, mirror), inv_f, prec);
    a->prec = prec;
    if (dir == RS_HORIZONTAL) /* 3 */
        layouts(a);
    return 0;
}

void rs_axis_free(struct rs_axis *a)
{
    if (!a)
        return;
    free(a->start);
    free(a->mem);
    memset(a, 0, sizeof(*a));
}

int rs_cache_plan(struct rs_cache *c, enum rs_dir dir, uint32_t n, double box0, double box1,
                  int32_t lim0, int32_t lim1, bool mirror, const struct rs_axis **out)
{
    double b0 = box0 - (double)lim0, b1 = box1 - (double)lim0;
    int64_t len = (int64_t)lim1 - lim0;
    struct rs_cache_way *victim = NULL;
    int rc;

    if (len <= 0 || len > INT32_MAX)
        return -EINVAL;
    for (int i = 0; i < RS_CACHE_WAYS; i++) {
        struct rs_cache_way *w = &c->way[i];

        if (w->valid && w->dir == dir && w->n == n && w->len == len &&
            w->mirror == mirror && w->box0 == b0 && w->box1 == b1) {
            w->used = ++c->clock;
            c->hits++;
            *out = &w->axis;
            return 0;
        }
        if (!victim || (victim->valid && (!w->valid || w->used < victim->used)))
            victim = w; /* the first free way, else the least recently used */
    }
    victim->valid = false;
    rc = rs_axis_plan(&victim->axis, dir, n, b0, b1, 0, (int32_t)len, mirror);
    if (rc < 0)
        return rc;
    victim->valid = true;
    victim->dir = (uint8_t)dir;
    victim->mirror = mirror;
    victim->n = n;
    victim->len = (int32_t)len;
    victim->box0 = b0;
    victim->box1 = b1;
    victim->used = ++c->clock;
    c->misses++;
    *out = &victim->axis;
    return 0;
}

void rs_cache_free(struct rs_cache *c)
{
    if (!c)
        return;
    for (int i = 0; i < RS_CACHE_WAYS; i++)
        rs_axis_free(&c->way[i].axis);
    memset(c, 0, sizeof(*c));
}
