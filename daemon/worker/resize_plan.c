/*
 * resize_plan.c - the resampler's coefficient tables and their cache
 * (resize.h).
 *
 * A table is built per image (train crops rarely repeat a size: the cache
 * hits 1% of bench/jpeg-loader's crops, bench/resize --photos), so the
 * build must be cheap: passes 1 and 2 take 4 outputs a step in vectors,
 * branch-free, or 8 where the AVX-512 kernels are in effect
 * (resize_lanes.h: the same operations, the same tables):
 *   1. spans: each output's first input and count (a zero weight at the
 *      end trimmed, the nearest allowed input when the filter misses), in
 *      the triangle's own coordinate x = (k + 0.5 - c) / f;
 *   2. fixed point: per output the weights 1 - |x| (x stepped by 1/f), then
 *      the cumulative rounding q_k = R(S_k) - R(S_(k-1)), R(s) = round(s
 *      2^prec / sum) of the running sums S_k (the last exactly 2^prec):
 *      every q_k within 1 of its exact value, none negative, summing to
 *      2^prec.  prec: 15, but for dot tables the most int16 allows for
 *      their largest weight, at most 22 (a pass more to find it);
 *   3. horizontal tables: the layout of the kernels in effect (resize.h):
 *      none for the baseline; AVX2's, the cheapest windows that fit; or
 *      AVX-512's (resize_avx512.c), whose fit is checked before the
 *      arrays are carved, AVX2's where it does not fit.  The AVX2 windows'
 *      fit (gather or dot) is found for every table: prec follows it, so
 *      the weights are the same whatever the kernels.
 * The cache compares keys field by field (doubles exactly, and the kernels
 * in effect) and evicts the least recently returned table; an evicted
 * way's arrays are reused.
 */
#include "resize.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "resize_kern.h"

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)

#define PREC_MAX_DOT 22  /* a dot table's sums: |p - 128| * 2^22 at most */
#define GATHER_WINDOW 16 /* bytes a gather window holds */

/* Grows *p to hold `bytes` (64-byte aligned, contents lost). */
static int grow(void **p, size_t *cap, size_t bytes)
{
    void *q;

    if (bytes <= *cap)
        return 0;
    bytes = ALIGN64(bytes);
    q = aligned_alloc(64, bytes);
    if (!q)
        return -ENOMEM;
    free(*p);
    *p = q;
    *cap = bytes;
    return 0;
}

/* The layouts' geometry of a horizontal table from n and taps: AVX2's
 * groups of 16 outputs and weight pairs (found for every kset: prec
 * follows its windows), AVX-512's groups of 16 values. */
static void geometry(struct rs_axis *a)
{
    a->groups = a->pairs = a->taps16 = a->vgroups = 0;
    if (a->dir != RS_HORIZONTAL)
        return;
    a->groups = (a->n + 15) / 16;
    a->pairs = (a->taps + 1) / 2;
    a->taps16 = (a->taps + 15) / 16 * 16;
    a->vgroups = (uint32_t)(((size_t)a->n * 3 + 63) / 64 * 4);
}

/* Carves the table's arrays out of a->mem: w, and the layout of its kset,
 * 64-byte aligned pieces. */
static int carve(struct rs_axis *a)
{
    size_t nt = ((size_t)a->n + RS_WB - 1) / RS_WB * RS_WB * a->taps,
           g = a->groups,
           P = a->pairs, vg = a->vgroups, sz[10] = { 0 }, total = 0;
    void **dst[10] = { (void **)&a->w,     (void **)&a->base, (void **)&a->idx,
                       (void **)&a->bw,    (void **)&a->off,  (void **)&a->w16,
                       (void **)&a->vbase, (void **)&a->vidx, (void **)&a->vw,
                       (void **)&a->vpw };
    char *m;

    if (nt > SIZE_MAX / 16 || g * 16 * (a->taps16 + P * 4) > SIZE_MAX / 4 ||
        vg * P > SIZE_MAX / 256)
        return -ENOMEM;
    sz[0] = nt * sizeof(int32_t);
    if (a->kset == RS_ISA_AVX2) {
        sz[1] = g * 4 * sizeof(int32_t);
        sz[2] = g * 2 * P * 32;
        sz[3] = g * 2 * P * 16 * sizeof(int16_t);
        sz[4] = g * 16 * sizeof(int32_t);
        sz[5] = g * 16 * a->taps16 * sizeof(int16_t);
    } else if (a->kset == RS_ISA_AVX512) {
        sz[6] = vg * (a->vwide ? P : 1) * sizeof(int32_t);
        sz[7] = vg * P * 16 * sizeof(uint32_t);
        sz[8] = vg * P * 16 * sizeof(uint32_t);
        sz[9] = P * (((size_t)a->n + 15) / 16 * 16 + 16) * sizeof(uint32_t);
    }
    for (int i = 0; i < 10; i++)
        total += ALIGN64(sz[i]);
    if (grow(&a->mem, &a->cap_mem, total) < 0)
        return -ENOMEM;
    m = a->mem;
    for (int i = 0; i < 10; i++) {
        *dst[i] = sz[i] ? m : NULL;
        m += ALIGN64(sz[i]);
    }
    return 0;
}

/* Passes 1 and 2 and the scan, in vectors of 4 lanes (the AVX2 clone and
 * the baseline: GCC's target_clones, an ifunc chooses by the CPU) and of 8
 * (AVX-512, for its kernel set): resize_lanes.h. */
#pragma GCC diagnostic ignored "-Wpsabi" /* static inline only: no ABI to keep */

#ifdef RS_NO_AVX2
#define LANES_CLONES
#else
#define LANES_CLONES __attribute__((target_clones("avx2", "default")))
#endif

#define LANES 4
#define SFX _4
#include "resize_lanes.h"
#undef LANES
#undef SFX

#ifndef RS_NO_AVX512
#pragma GCC push_options
#pragma GCC target("avx512f,avx512dq,avx512vl,avx512bw")
#undef LANES_CLONES
#define LANES_CLONES
#define LANES 8
#define SFX _8
#include "resize_lanes.h"
#undef LANES
#undef SFX
#pragma GCC pop_options
#else
#define pass1_8 pass1_4 /* (never called: wide8 is false) */
#define pass2_8 pass2_4
#define scan_8 scan_4
#endif

/* The widest span of first samples over the gather layout's windows: of
 * each half of each block (4 outputs, shared false) or of each half of a
 * group (the 8 outputs of both blocks' halves, shared true). */
static int64_t widest(const struct rs_axis *a, bool shared, uint32_t from)
{
    int64_t most = 0;

    for (uint32_t g = from / 16; g < a->groups; g++)
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

static inline int32_t min2(int32_t x, int32_t y) { return x < y ? x : y; }
static inline int32_t max2(int32_t x, int32_t y) { return x > y ? x : y; }

/* widest(a, true) and widest(a, false) at once: the whole groups by
 * straight-line mins and maxes of their halves, the last partial one by
 * widest's loop. */
static void widests(const struct rs_axis *a, int64_t *w8, int64_t *w4)
{
    uint32_t whole = a->n / 16 * 16;
    int64_t s8 = 0, s4 = 0;

    for (uint32_t x = 0; x < whole; x += 8) {
        const int32_t *p = a->start + x;
        int32_t e0 = min2(min2(p[0], p[2]), min2(p[4], p[6]));
        int32_t e1 = max2(max2(p[0], p[2]), max2(p[4], p[6]));
        int32_t o0 = min2(min2(p[1], p[3]), min2(p[5], p[7]));
        int32_t o1 = max2(max2(p[1], p[3]), max2(p[5], p[7]));
        int64_t sh = (int64_t)max2(e1, o1) - min2(e0, o0);
        int64_t un = (int64_t)e1 - e0 > (int64_t)o1 - o0 ? (int64_t)e1 - e0 : (int64_t)o1 - o0;

        s8 = sh > s8 ? sh : s8;
        s4 = un > s4 ? un : s4;
    }
    if (whole < a->n) {
        int64_t t8 = widest(a, true, whole), t4 = widest(a, false, whole);

        s8 = t8 > s8 ? t8 : s8;
        s4 = t4 > s4 ? t4 : s4;
    }
    *w8 = s8;
    *w4 = s4;
}

/* Picks the gather layout's windows, cheapest first: one a half shared by
 * both blocks, one per block's half, then the same with a window per pair
 * (each needs only its pair's reach, 2 samples, past its first); false
 * when none fits (the dot kernel). */
static bool pick_windows(struct rs_axis *a)
{
    int64_t w8, w4, reach = 2 * (int64_t)a->pairs;

    widests(a, &w8, &w4);

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
                    wx = &RS_W(a, x, 0); /* weight k at wx[RS_WB * k] */
                    for (uint32_t t = 0; t < P; t++) {
                        uint32_t r = rel + (a->wide ? 0 : 2 * t), q, v;
                        int32_t w0 = wx[2 * RS_WB * t],
                                w1 = 2 * t + 1 < a->taps ? wx[(2 * t + 1) * RS_WB] : 0;

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

int rs_axis_plan(struct rs_axis *a, enum rs_dir dir, uint32_t n, double box0, double box1,
                 int32_t lim0, int32_t lim1, bool mirror)
{
    double scale, f, inv_f;
    uint32_t taps = 1, prec;
    size_t room = ((size_t)n + 15) / 16 * 16; /* with the lanes past n, for either width */
#ifndef RS_NO_AVX512
    bool wide8 = rs_isa_current() == RS_ISA_AVX512; /* (the CPU has AVX-512) */
#else
    bool wide8 = false;
#endif

    if (n == 0 || !(box0 < box1) || lim0 >= lim1 || !(box1 > lim0) || !(box0 < lim1) ||
        !(fabs(box0) < 1e12) || !(fabs(box1) < 1e12) ||
        (dir != RS_HORIZONTAL && dir != RS_VERTICAL) || (dir == RS_VERTICAL && mirror))
        return -EINVAL;
    scale = (box1 - box0) / n;
    f = scale < 1.0 ? 1.0 : scale;
    if (f > 65536.0)
        return -EINVAL;
    inv_f = 1.0 / f;
    if (room > a->cap_n) {
        void *q = NULL;
        size_t cap = 0;

        if (grow(&q, &cap, room * 8) < 0)
            return -ENOMEM;
        free(a->start);
        a->start = q;
        a->cap_n = room;
    }
    a->count = (uint32_t *)(a->start + a->cap_n);
    a->dir = dir;
    a->n = n;
    if (wide8) { /* 1, and its scan */
        pass1_8(a, (uint32_t)room, box0, scale, mirror, f, inv_f, lim0, lim1);
        scan_8(a);
    } else {
        pass1_4(a, (uint32_t)room, box0, scale, mirror, f, inv_f, lim0, lim1);
        scan_4(a);
    }
    taps = a->taps;
    a->kset = (uint8_t)rs_isa_current();
    geometry(a);
    a->gather = a->wide = a->shared = a->vwide = false;
    if (dir == RS_HORIZONTAL) {
        a->gather = pick_windows(a);
        if (a->kset == RS_ISA_BASELINE) {
            /* no layout */
#ifndef RS_NO_AVX512
        } else if (a->kset == RS_ISA_AVX512) {
            int fit = rs_avx512_fit(a);

            if (fit == 0)
                a->kset = RS_ISA_AVX2; /* a reduction too wide for its windows */
            a->vwide = fit == 2;
#endif
        }
    }
    if (carve(a) < 0)
        return -ENOMEM;
    prec = 15;
    if (dir == RS_HORIZONTAL && !a->gather) {
        /* a dot table: as many bits as its largest weight allows in int16 */
        int32_t most = 0;

        if (wide8)
            pass2_8(a, box0, scale, mirror, inv_f, PREC_MAX_DOT);
        else
            pass2_4(a, box0, scale, mirror, inv_f, PREC_MAX_DOT);
        for (uint32_t x = 0; x < n; x++)
            for (uint32_t k = 0; k < taps; k++)
                most = RS_W(a, x, k) > most ? RS_W(a, x, k) : most;
        for (prec = PREC_MAX_DOT; prec > 14 && (most >> (PREC_MAX_DOT - prec)) + 1 > 32767;)
            prec--;
    }
    if (wide8) /* 2 */
        pass2_8(a, box0, scale, mirror, inv_f, prec);
    else
        pass2_4(a, box0, scale, mirror, inv_f, prec);
    a->prec = prec;
    if (dir == RS_HORIZONTAL && a->kset == RS_ISA_AVX2) /* 3 */
        layouts(a);
#ifndef RS_NO_AVX512
    else if (dir == RS_HORIZONTAL && a->kset == RS_ISA_AVX512)
        rs_avx512_layout(a);
#endif
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
    unsigned isa = rs_isa_current();
    struct rs_cache_way *victim = NULL;
    int rc;

    if (len <= 0 || len > INT32_MAX)
        return -EINVAL;
    for (int i = 0; i < RS_CACHE_WAYS; i++) {
        struct rs_cache_way *w = &c->way[i];

        if (w->valid && w->dir == dir && w->n == n && w->len == len &&
            w->mirror == mirror && w->isa == isa && w->box0 == b0 && w->box1 == b1) {
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
    victim->isa = (uint8_t)isa;
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
