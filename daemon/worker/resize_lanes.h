/*
 * resize_lanes.h - the coefficient tables' passes 1 and 2 and their scan
 * (resize_plan.c), written once for vectors of LANES outputs: included by
 * resize_plan.c for LANES 4 (the AVX2 clone and the baseline) and for
 * LANES 8 (built for AVX-512, run for its kernel set), each time with SFX
 * suffixing its names (pass1_4, pass1_8, ...).  Internal to resize_plan.c.
 *
 * The passes take LANES outputs at a time, one per lane of GCC's vector
 * types: the same IEEE operations, lane by lane, whatever the width and
 * the target (SSE2 splits a vector of 4 in halves), so a table does not
 * depend on the machine or on which width built it (tests/test_resize.c
 * compares the tables of every kernel set).  Floors are exact (|x| < 2^51:
 * boxes are under 1e12); lanes past n are computed into the room start,
 * count and w keep for them, never read.  No FMA (the library is built
 * with -ffp-contract=off), so every build rounds alike.
 */

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define F(name) CAT(name, SFX)

_Static_assert(RS_WB % (2 * LANES) == 0, "pass 2's two vectors lie in one block of w");

typedef double F(vd) __attribute__((vector_size(8 * LANES)));
typedef int64_t F(vl) __attribute__((vector_size(8 * LANES)));
typedef int32_t F(vi) __attribute__((vector_size(4 * LANES)));

#define vd F(vd)
#define vl F(vl)
#define vi F(vi)
#if LANES == 4
#define V(x) ((vd){ (x), (x), (x), (x) })
#define VI(x) ((vi){ (x), (x), (x), (x) })
#define IOTA ((vd){ 0, 1, 2, 3 })
#define IOTAI ((vi){ 0, 1, 2, 3 })
#define BEFORE(v) __builtin_shufflevector(v, v, 0, 0, 1, 2)
#elif LANES == 8
#define V(x) ((vd){ (x), (x), (x), (x), (x), (x), (x), (x) })
#define VI(x) ((vi){ (x), (x), (x), (x), (x), (x), (x), (x) })
#define IOTA ((vd){ 0, 1, 2, 3, 4, 5, 6, 7 })
#define IOTAI ((vi){ 0, 1, 2, 3, 4, 5, 6, 7 })
#define BEFORE(v) __builtin_shufflevector(v, v, 0, 0, 1, 2, 3, 4, 5, 6)
#else
#error "LANES is 4 or 8"
#endif
#define INLINE static inline __attribute__((always_inline))

INLINE vd F(sel)(vl m, vd a, vd b) /* m ? a : b, m all ones or zeros */
{
    return (vd)(((vl)a & m) | ((vl)b & ~m));
}

INLINE vd F(keep)(vl m, vd a) /* m ? a : 0 */
{
    return (vd)((vl)a & m);
}

INLINE vd F(vfloor)(vd x)
{
    vd t = (x + V(6755399441055744.0)) - V(6755399441055744.0); /* 1.5 * 2^52 */

    return t - F(keep)(t > x, V(1.0));
}

INLINE vd F(vabs)(vd x)
{
    return (vd)((vl)x & ~(vl)V(-0.0)); /* the sign bit cleared */
}

/* The centers of outputs o..o+LANES-1 (input coordinates). */
INLINE vd F(centers)(double box0, double scale, uint32_t n, uint32_t o, bool mirror)
{
    vd i = V((double)o) + IOTA;

    if (mirror)
        i = V((double)n - 1.0) - i;
    return V(box0) + (i + V(0.5)) * V(scale);
}

/*
 * Pass 1 for outputs o..o+LANES-1: spans in [lim0, lim1) with a weight
 * 1 - |x| > 0 at both ends (x = (k + 0.5 - c) / f); the nearest allowed
 * sample when none is left.  With k0 = floor(c - f + 0.5) the first
 * sample's x is above -1 and the last's (k1 - 1) at most 1: only the last
 * can weigh 0 (and rounding may put the first at -1), one step each, no
 * loop.
 */
INLINE void F(spans)(struct rs_axis *a, uint32_t o, const vd *cp, double f, double inv_f,
                     double lim0, double lim1)
{
    vd c = *cp, s0 = F(vfloor)(c - V(f) + V(0.5)), s1 = F(vfloor)(c + V(f) + V(0.5)), x0, x1,
       near;
    vl bad;

    s0 = F(sel)(s0 < V(lim0), V(lim0), s0);
    s1 = F(sel)(s1 > V(lim1), V(lim1), s1);
    x0 = (s0 + V(0.5) - c) * V(inv_f);
    x1 = ((s1 - V(1.0)) + V(0.5) - c) * V(inv_f);
    s0 = s0 + F(keep)(x0 <= V(-1.0), V(1.0));
    s1 = s1 - F(keep)(x1 >= V(1.0), V(1.0));
    near = F(vfloor)(c);
    near = F(sel)(near < V(lim0), V(lim0), F(sel)(near >= V(lim1), V(lim1 - 1.0), near));
    bad = s0 >= s1;
    s0 = F(sel)(bad, near, s0);
    s1 = F(sel)(bad, near + V(1.0), s1);
    *(vi *)(a->start + o) = __builtin_convertvector(s0, vi);
    *(vi *)(a->count + o) = __builtin_convertvector(s1 - s0, vi);
}

/*
 * Pass 2 for outputs o..o+2*LANES-1 (o a multiple of 2 * LANES, two
 * vectors side by side: their chains of sums overlap), centers c: their
 * weights at prec, a vector a tap (RS_W: LANES consecutive ints of w's
 * block, RS_WB apart a tap).
 * Per output, the exact weights 1 - |x| (x stepped by inv_f from the first
 * sample, clamped at 0 against rounding) and their sum, then the running
 * sums rounded, R(s) = trunc(s 2^prec / sum + 0.5), and q_k = R(S_k) -
 * R(S_(k-1)), with R(S_k) = 2^prec from the last sample on (k + 1 >=
 * count): the last weight 2^prec - R(S_(count-2)), the ones past it 0.
 * The rounded sums are kept as integers (no conversion back), so a tap
 * costs one conversion.
 */
INLINE void F(weights)(struct rs_axis *a, uint32_t o, const vd c[2], double inv_f,
                       uint32_t prec)
{
    vi one = VI(1 << prec), cn[2], prev[2] = { VI(0), VI(0) };
    vd cnt[2], x0[2], x[2], sum[2] = { V(0.0), V(0.0) }, s[2] = { V(0.0), V(0.0) }, k[2];
    uint32_t taps = a->taps;
    int32_t *w[2];

    for (int j = 0; j < 2; j++) {
        uint32_t q = o + j * LANES;

        cn[j] = *(const vi *)(a->count + q);
        cnt[j] = __builtin_convertvector(cn[j], vd);
        x0[j] = (__builtin_convertvector(*(const vi *)(a->start + q), vd) + V(0.5) - c[j]) *
                V(inv_f);
        x[j] = x0[j];
        w[j] = a->w + (size_t)(q / RS_WB) * taps * RS_WB + q % RS_WB; /* tap-major */
    }
    for (uint32_t i = 0; i < taps; i++)
        for (int j = 0; j < 2; j++) {
            vd v = V(1.0) - F(vabs)(x[j]);

            sum[j] += F(keep)((v > V(0.0)) & (V((double)i) < cnt[j]), v);
            x[j] += V(inv_f);
        }
    for (int j = 0; j < 2; j++) {
        k[j] = F(keep)(sum[j] > V(0.0), V((double)(1 << prec)) / sum[j]); /* 0: the nearest
                                                                             sample alone */
        x[j] = x0[j];
    }
    for (uint32_t i = 0; i < taps; i++) {
        vi next = VI((int32_t)i + 1);

        for (int j = 0; j < 2; j++) {
            vd v = V(1.0) - F(vabs)(x[j]);
            vi r, inner = next < cn[j];

            s[j] += F(keep)((V((double)i + 1.0) < cnt[j]) & (v > V(0.0)), v);
            r = __builtin_convertvector(s[j] * k[j] + V(0.5), vi);
            r = (r & inner) | (one & ~inner);
            *(vi *)(w[j] + (size_t)i * RS_WB) = r - prev[j];
            prev[j] = r;
            x[j] += V(inv_f);
        }
    }
}

/* Pass 1 over the table's room (n rounded up to 2 * LANES: pass 2's second
 * vector too). */
LANES_CLONES
static void F(pass1)(struct rs_axis *a, uint32_t room, double box0, double scale, bool mirror,
                     double f, double inv_f, double lim0, double lim1)
{
    for (uint32_t o = 0; o < room; o += LANES) {
        vd c = F(centers)(box0, scale, a->n, o, mirror);

        F(spans)(a, o, &c, f, inv_f, lim0, lim1);
    }
}

/* Pass 2 over the table's outputs, at prec. */
LANES_CLONES
static void F(pass2)(struct rs_axis *a, double box0, double scale, bool mirror, double inv_f,
                     uint32_t prec)
{
    for (uint32_t o = 0; o < a->n; o += 2 * LANES) {
        vd c[2] = { F(centers)(box0, scale, a->n, o, mirror),
                    F(centers)(box0, scale, a->n, o + LANES, mirror) };

        F(weights)(a, o, c, inv_f, prec);
    }
}

/* The table's taps, [lo, hi) and whether it is monotone, from its spans,
 * LANES outputs a step (lanes past n left out). */
LANES_CLONES
static void F(scan)(struct rs_axis *a)
{
    const int32_t *st = a->start;
    const uint32_t *cn = a->count;
    vi lo = VI(st[0]), hi = VI(st[0] + (int32_t)cn[0]), taps = VI(1), down = VI(0);
    int32_t n = (int32_t)a->n;

    for (int32_t o = 0; o < n; o += LANES) {
        vi s = *(const vi *)(st + o), c = *(const vi *)(cn + o), e = s + c, ps, pe;
        vi in = VI(o) + IOTAI < VI(n);

        if (o > 0) { /* each lane's previous output */
            memcpy(&ps, st + o - 1, sizeof(ps));
            memcpy(&pe, cn + o - 1, sizeof(pe));
            pe += ps;
        } else {
            ps = BEFORE(s);
            pe = BEFORE(e);
        }
        lo = (in & (s < lo) & s) | (~(in & (s < lo)) & lo);
        hi = (in & (e > hi) & e) | (~(in & (e > hi)) & hi);
        taps = (in & (c > taps) & c) | (~(in & (c > taps)) & taps);
        down |= in & ((s < ps) | (e < pe));
    }
    a->lo = lo[0];
    a->hi = hi[0];
    a->taps = (uint32_t)taps[0];
    a->monotone = !down[0];
    for (int k = 1; k < LANES; k++) {
        a->lo = lo[k] < a->lo ? lo[k] : a->lo;
        a->hi = hi[k] > a->hi ? hi[k] : a->hi;
        a->taps = (uint32_t)taps[k] > a->taps ? (uint32_t)taps[k] : a->taps;
        a->monotone = a->monotone && !down[k];
    }
}

#undef vd
#undef vl
#undef vi
#undef V
#undef VI
#undef IOTA
#undef IOTAI
#undef BEFORE
#undef INLINE
#undef F
#undef CAT
#undef CAT_
