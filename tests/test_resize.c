/*
 * test_resize.c - the resampler (daemon/worker/resize*.c) against a
 * straightforward reference: Pillow's antialiased bilinear filter written
 * out directly, in double precision, one output pixel at a time as a 2-D
 * weighted sum.
 *
 * Random images, boxes (fractional), input limits, output sizes (tiny to
 * large, reductions and enlargements) and flips from a fixed seed, each
 * planned and run for every kernel set the CPU has (the baseline, AVX2,
 * AVX-512, each forced with rs_use_isa before its tables are planned) in
 * both layouts: the tables' weights the same for every set, every output
 * byte within 1 of the reference, the mean difference small, and every
 * output the same bytes, none written past the output; the same for one
 * table of each of the AVX2 and AVX-512 horizontal kernels' variants (and
 * of AVX-512's fallback to AVX2).  The input is a copy of just the rows
 * and pixels the tables read, so a read past them is a read past a block
 * (the ASan build reports it).  Also the tables' invariants, the
 * coefficient cache (hits, translation, the kernels as a key, LRU
 * eviction, tables rebuilt after eviction the same as fresh ones) and
 * exact cases (identity, mirror, constant images, 1-pixel edges).  Built
 * again with RS_NO_AVX2 (resize_baseline in tests/meson.build), where AVX2
 * and AVX-512 are refused and the baseline runs alone.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "resize.h"
#include "tap.h"

static uint64_t seed = 0x2545F4914F6CDD1Dull;

static uint64_t next(void)
{
    uint64_t z = (seed += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double unit(void)
{
    return (double)(next() >> 11) * 0x1.0p-53;
}

static uint32_t below(uint32_t n)
{
    return (uint32_t)(next() % n);
}

/* The kernel sets this machine can run: baseline, and AVX2 and AVX-512 if
 * the CPU (and the build) has them. */
static enum rs_isa isas[3];
static int n_isas;
static bool has_avx512;

static const char *isa_name(enum rs_isa isa)
{
    return isa == RS_ISA_AVX512 ? "avx512" : isa == RS_ISA_AVX2 ? "avx2" : "baseline";
}

/* Pillow's weights for output i of n over [box0, box1) within [lim0, lim1):
 * written as Resample.c's precompute_coeffs reads, in double. */
static int ref_weights(uint32_t i, uint32_t n, double box0, double box1, int lim0, int lim1,
                       int *first, double *w)
{
    double scale = (box1 - box0) / n, fs = scale < 1 ? 1 : scale, support = fs;
    double center = box0 + (i + 0.5) * scale, ww = 0;
    int xmin = (int)floor(center - support + 0.5), xmax = (int)floor(center + support + 0.5);
    int cnt;

    if (xmin < lim0)
        xmin = lim0;
    if (xmax > lim1)
        xmax = lim1;
    cnt = xmax - xmin;
    for (int x = 0; x < cnt; x++) {
        double t = fabs((x + xmin - center + 0.5) / fs);

        w[x] = t < 1 ? 1 - t : 0;
        ww += w[x];
    }
    if (cnt <= 0 || ww == 0) {
        xmin = (int)floor(center);
        xmin = xmin < lim0 ? lim0 : xmin >= lim1 ? lim1 - 1 : xmin;
        w[0] = 1;
        cnt = 1;
        ww = 1;
    }
    for (int x = 0; x < cnt; x++)
        w[x] /= ww;
    *first = xmin;
    return cnt;
}

struct image {
    uint32_t w, h;
    uint8_t *p; /* RGB */
};

static void make_image(struct image *im, uint32_t w, uint32_t h, int kind)
{
    im->w = w;
    im->h = h;
    im->p = malloc((size_t)w * h * 3);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                uint8_t v;

                if (kind == 0)
                    v = (uint8_t)next();                            /* noise */
                else if (kind == 1)
                    v = (uint8_t)((x * 7 + y * 3 + c * 50) & 255);  /* ramps */
                else
                    v = ((x / 3 + y / 5) & 1) ? 250 : 5;            /* checkers */
                im->p[((size_t)y * w + x) * 3 + c] = v;
            }
}

struct spec {
    uint32_t nx, ny;
    double bx0, bx1, by0, by1;
    int lx0, lx1, ly0, ly1;
    bool mirror;
};

/* The reference output of a spec, CHW. */
static uint8_t *reference(const struct image *im, const struct spec *s)
{
    uint8_t *ref = malloc((size_t)s->nx * s->ny * 3);
    double *wx = malloc(sizeof(double) * (im->w + 2)), *wy = malloc(sizeof(double) * (im->h + 2));

    for (uint32_t oy = 0; oy < s->ny; oy++) {
        int fy, ny = ref_weights(oy, s->ny, s->by0, s->by1, s->ly0, s->ly1, &fy, wy);

        for (uint32_t ox = 0; ox < s->nx; ox++) {
            uint32_t sx = s->mirror ? s->nx - 1 - ox : ox;
            int fx, nx = ref_weights(sx, s->nx, s->bx0, s->bx1, s->lx0, s->lx1, &fx, wx);

            for (int c = 0; c < 3; c++) {
                double v = 0;
                int r;

                for (int j = 0; j < ny; j++)
                    for (int i = 0; i < nx; i++)
                        v += wy[j] * wx[i] *
                             im->p[((size_t)(fy + j) * im->w + (size_t)(fx + i)) * 3 + c];
                r = (int)floor(v + 0.5);
                r = r < 0 ? 0 : r > 255 ? 255 : r;
                ref[(size_t)c * s->nx * s->ny + (size_t)oy * s->nx + ox] = (uint8_t)r;
            }
        }
    }
    free(wx);
    free(wy);
    return ref;
}

#define GUARD 64 /* bytes past an output checked untouched */

static int overruns; /* outputs written past their end */

/* Resamples with the given tables (their kernels), origin (x0, y0) of the
 * tables' coordinates in the image, in layout: a new buffer.  The input
 * is a copy of the pixels [lo, hi) of the rows [lo, hi) alone, rows
 * exactly their bytes apart. */
static uint8_t *run(const struct image *im, const struct rs_axis *ax, const struct rs_axis *ay,
                    int x0, int y0, enum rs_layout layout)
{
    size_t n = (size_t)ax->n * ay->n * 3, rb = (size_t)(ax->hi - ax->lo) * 3;
    size_t rows = (size_t)(ay->hi - ay->lo);
    uint8_t *out = aligned_alloc(64, (n + GUARD + 63) & ~(size_t)63); /* as a slot: the
                                                                     kernels may stream
                                                                     aligned rows */
    void *scratch = aligned_alloc(32, (rs_scratch_bytes(ax, ay) + 31) & ~(size_t)31);
    uint8_t *src = malloc(rb * rows);

    for (size_t r = 0; r < rows; r++)
        memcpy(src + r * rb,
               im->p + ((size_t)(y0 + ay->lo + (int)r) * im->w + (size_t)(x0 + ax->lo)) * 3, rb);
    memset(out + n, 0xA5, GUARD);
    rs_resize(src, rb, ax, ay, layout, scratch, out);
    for (size_t k = 0; k < GUARD; k++)
        if (out[n + k] != 0xA5) {
            overruns++;
            break;
        }
    free(src);
    free(scratch);
    return out;
}

/* Plans the two tables of s for the kernels isa, directly (into px, py,
 * absolute coordinates) or through the cache (relative to the limits;
 * *x0, *y0 then the limits' origin).  Returns 0 or the plan's error. */
static int plan(const struct spec *s, enum rs_isa isa, struct rs_cache *cache,
                struct rs_axis *px, struct rs_axis *py, const struct rs_axis **ax,
                const struct rs_axis **ay, int *x0, int *y0)
{
    int rc;

    rs_use_isa(isa);
    if (cache) {
        rc = rs_cache_plan(cache, RS_HORIZONTAL, s->nx, s->bx0, s->bx1, s->lx0, s->lx1,
                           s->mirror, ax);
        if (rc == 0)
            rc = rs_cache_plan(cache, RS_VERTICAL, s->ny, s->by0, s->by1, s->ly0, s->ly1,
                               false, ay);
        *x0 = s->lx0;
        *y0 = s->ly0;
    } else {
        rc = rs_axis_plan(px, RS_HORIZONTAL, s->nx, s->bx0, s->bx1, s->lx0, s->lx1, s->mirror);
        if (rc == 0)
            rc = rs_axis_plan(py, RS_VERTICAL, s->ny, s->by0, s->by1, s->ly0, s->ly1, false);
        *ax = px;
        *ay = py;
        *x0 = *y0 = 0;
    }
    rs_use_isa(RS_ISA_AUTO);
    return rc;
}

/* Whether two tables of the same n and taps hold the same weights. */
static bool same_w(const struct rs_axis *a, const struct rs_axis *b)
{
    for (uint32_t i = 0; i < a->n; i++)
        for (uint32_t k = 0; k < a->taps; k++)
            if (RS_W(a, i, k) != RS_W(b, i, k))
                return false;
    return true;
}

/* Whether two tables hold the same spans and weights (not layouts). */
static bool same_weights(const struct rs_axis *a, const struct rs_axis *b)
{
    return a->n == b->n && a->taps == b->taps && a->prec == b->prec && a->lo == b->lo &&
           a->hi == b->hi && a->gather == b->gather &&
           memcmp(a->start, b->start, a->n * sizeof(int32_t)) == 0 &&
           memcmp(a->count, b->count, a->n * sizeof(uint32_t)) == 0 && same_w(a, b);
}

/* out (in layout) against ref (CHW): max |diff|, summed into *sum. */
static int diff(const uint8_t *out, const uint8_t *ref, uint32_t nx, uint32_t ny,
                enum rs_layout layout, double *sum)
{
    int maxd = 0;

    for (uint32_t y = 0; y < ny; y++)
        for (uint32_t x = 0; x < nx; x++)
            for (int c = 0; c < 3; c++) {
                size_t chw = (size_t)c * nx * ny + (size_t)y * nx + x;
                size_t at = layout == RS_CHW ? chw : ((size_t)y * nx + x) * 3 + c;
                int d = abs((int)out[at] - (int)ref[chw]);

                maxd = d > maxd ? d : maxd;
                *sum += d;
            }
    return maxd;
}

/* Tally of the random cases: gather and dot the AVX2 kernels' tables,
 * narrow, wide and fallback the AVX-512 kernels' (a window a group, a
 * window a pair, laid out for AVX2). */
struct tally {
    int worst, planned, same, cases, gather, dot, narrow, wide, fallback;
    double sum, count;
};

/* Runs one spec through every kernel set and layout, with tables planned
 * for each set directly (absolute coordinates) or through the cache
 * (relative to the limits), and checks them against the reference. */
static void check_spec(const struct image *im, const struct spec *s, struct rs_cache *cache,
                       struct tally *t, const char *what)
{
    struct rs_axis px[3] = { 0 }, py[3] = { 0 };
    const struct rs_axis *ax[3], *ay[3];
    uint8_t *ref, *first = NULL;
    int x0 = 0, y0 = 0, worst = 0;
    bool ok = true;

    t->cases++;
    for (int i = 0; i < n_isas && ok; i++)
        ok = plan(s, isas[i], cache, &px[i], &py[i], &ax[i], &ay[i], &x0, &y0) == 0;
    if (!ok) {
        tap_diag("%s: %ux%u -> %ux%u not planned", what, im->w, im->h, s->nx, s->ny);
        goto out;
    }
    t->planned++;
    if (ax[0]->gather)
        t->gather++;
    else
        t->dot++;
    ref = reference(im, s);
    for (int i = 0; i < n_isas; i++) {
        if (!same_weights(ax[i], ax[0]) || !same_weights(ay[i], ay[0])) {
            t->same = 0;
            tap_diag("%s: %ux%u -> %ux%u: %s's tables differ from the baseline's", what,
                     im->w, im->h, s->nx, s->ny, isa_name(isas[i]));
        }
        if (isas[i] == RS_ISA_AVX512) {
            t->fallback += ax[i]->kset == RS_ISA_AVX2;
            t->narrow += ax[i]->kset == RS_ISA_AVX512 && !ax[i]->vwide;
            t->wide += ax[i]->kset == RS_ISA_AVX512 && ax[i]->vwide;
        }
        for (int l = 0; l < 2; l++) {
            enum rs_layout layout = l ? RS_HWC : RS_CHW;
            uint8_t *out = run(im, ax[i], ay[i], x0, y0, layout), *chw = out;
            int d = diff(out, ref, s->nx, s->ny, layout, &t->sum);

            worst = d > worst ? d : worst;
            if (layout == RS_HWC) { /* back to CHW to compare the bytes */
                chw = malloc((size_t)s->nx * s->ny * 3);
                for (size_t p = 0; p < (size_t)s->nx * s->ny; p++)
                    for (int c = 0; c < 3; c++)
                        chw[(size_t)c * s->nx * s->ny + p] = out[p * 3 + c];
                free(out);
            }
            if (!first)
                first = chw;
            else {
                if (memcmp(first, chw, (size_t)s->nx * s->ny * 3) != 0) {
                    t->same = 0;
                    tap_diag("%s: %ux%u -> %ux%u: %s (%s) %s differs from the first output",
                             what, im->w, im->h, s->nx, s->ny, isa_name(isas[i]),
                             rs_kset_name(ax[i]), l ? "hwc" : "chw");
                }
                free(chw);
            }
        }
    }
    t->count += (double)s->nx * s->ny * 3 * n_isas * 2;
    if (worst > 1)
        tap_diag("%s: %ux%u box %.2f..%.2f x %.2f..%.2f lim %d..%d x %d..%d -> %ux%u%s: "
                 "max diff %d", what, im->w, im->h, s->bx0, s->bx1, s->by0, s->by1, s->lx0,
                 s->lx1, s->ly0, s->ly1, s->nx, s->ny, s->mirror ? " mirrored" : "", worst);
    t->worst = worst > t->worst ? worst : t->worst;
    free(first);
    free(ref);
out:
    for (int i = 0; i < 3; i++) {
        rs_axis_free(&px[i]);
        rs_axis_free(&py[i]);
    }
}

/* A random crop box of im with limits of either kind. */
static void random_box(const struct image *im, struct spec *s, bool whole_limits)
{
    double bw = im->w * (0.05 + 0.95 * unit()), bh = im->h * (0.05 + 0.95 * unit());

    s->bx0 = (im->w - bw) * unit();
    s->by0 = (im->h - bh) * unit();
    s->bx1 = s->bx0 + bw;
    s->by1 = s->by0 + bh;
    s->mirror = next() & 1;
    if (whole_limits) { /* the whole image (a resize then crop) */
        s->lx0 = s->ly0 = 0;
        s->lx1 = (int)im->w;
        s->ly1 = (int)im->h;
    } else { /* the box's pixels (a crop then resize) */
        s->lx0 = (int)floor(s->bx0);
        s->ly0 = (int)floor(s->by0);
        s->lx1 = (int)ceil(s->bx1);
        s->ly1 = (int)ceil(s->by1);
    }
}

static void random_cases(void)
{
    struct tally t = { .same = 1 };
    struct rs_cache cache = { 0 };

    for (int i = 0; i < 400; i++) {
        struct image im;
        struct spec s;

        /* tiny to mid-size images, outputs of 1 to 400 */
        make_image(&im, 1 + below(i % 5 ? 300 : 12), 1 + below(i % 7 ? 300 : 12), i % 3);
        random_box(&im, &s, i % 4 == 0);
        s.nx = i % 4 == 3 ? 32 * (1 + below(8)) : 1 + below(i % 2 ? 64 : 400);
        s.ny = 1 + below(i % 2 ? 64 : 400);
        check_spec(&im, &s, i % 3 == 0 ? &cache : NULL, &t, "random");
        free(im.p);
    }
    for (int i = 0; i < 24; i++) { /* large: photo-sized inputs to train-sized outputs */
        struct image im;
        struct spec s;

        make_image(&im, 64 + below(1400), 64 + below(1000), i % 3);
        random_box(&im, &s, i % 2 == 0);
        s.nx = 100 + below(300);
        s.ny = 100 + below(300);
        check_spec(&im, &s, i % 2 ? &cache : NULL, &t, "large");
        free(im.p);
    }
    for (int i = 0; i < 24; i++) { /* train crops: 150..450 pixels a side to 224 x 224 */
        struct image im;
        struct spec s;
        double bw = 150 + 300 * unit(), bh = 150 + 300 * unit();

        make_image(&im, 460, 460, i % 3);
        s = (struct spec){ .nx = 224, .ny = 224, .bx0 = (459 - bw) * unit(),
                           .by0 = (459 - bh) * unit(), .mirror = i & 1 };
        s.bx1 = s.bx0 + bw;
        s.by1 = s.by0 + bh;
        s.lx0 = (int)floor(s.bx0);
        s.ly0 = (int)floor(s.by0);
        s.lx1 = (int)ceil(s.bx1);
        s.ly1 = (int)ceil(s.by1);
        check_spec(&im, &s, i % 2 ? &cache : NULL, &t, "train");
        free(im.p);
    }
    tap_ok(t.planned == t.cases, "every random plan accepted (%d of %d)", t.planned, t.cases);
    tap_ok(t.worst <= 1, "%d random resizes x %d kernel sets x 2 layouts: every byte within 1 "
                         "of the reference (worst %d)", t.cases, n_isas, t.worst);
    tap_ok(t.sum / t.count < 0.05, "mean difference %.4f below 0.05", t.sum / t.count);
    tap_ok(t.same, "every kernel set the same tables' weights and, CHW and HWC, the same bytes");
    tap_ok(overruns == 0, "no byte written past an output (%d overruns)", overruns);
    tap_ok(t.gather > 0 && t.dot > 0, "both horizontal AVX2 kernels' tables met (gather %d, "
                                      "dot %d)", t.gather, t.dot);
    if (has_avx512)
        tap_ok(t.narrow > 0 && t.wide > 0 && t.fallback > 0,
               "AVX-512's tables of every kind met (a window a group %d, a window a pair %d, "
               "laid out for AVX2 %d)", t.narrow, t.wide, t.fallback);
    rs_cache_free(&cache);
}

/* The horizontal AVX2 kernel's variants, as gather_row picks them: pairs
 * 1, 2, 3 and more, windows shared or not, one a half or one a pair
 * (wide), and the dot kernel.  Taps of one or two only come with outputs
 * at most a sample apart (one shared window, never wide), and two pairs
 * (up to 4 taps: scale under 2) wide only at scale 2 exactly, which the
 * search below may miss: the generic path takes it. */
static int variant(const struct rs_axis *a)
{
    uint32_t p = a->pairs > 4 ? 4 : a->pairs;

    if (!a->gather)
        return 0;
    return 1 + (int)(p - 1) * 4 + a->shared * 2 + a->wide;
}

static void kernel_variants(void)
{
    struct rs_axis a = { 0 };
    struct tally t = { .same = 1 };
    bool met[17] = { false };
    int want = 0, got = 0;
    struct image im;

    make_image(&im, 401, 40, 0);
    for (uint32_t n = 1; n <= 64; n++)
        for (uint32_t w = 2; w <= 400; w += 1 + w / 50)
            for (int f = 0; f < 4; f++) {
                struct spec s = { .nx = n, .ny = 1 + (n * 7) % 40, .bx0 = f * 0.13,
                                  .bx1 = w - f * 0.07, .by0 = 0, .by1 = 40, .lx0 = 0,
                                  .lx1 = (int)w, .ly0 = 0, .ly1 = 40, .mirror = f & 1 };
                int v;

                if (rs_axis_plan(&a, RS_HORIZONTAL, n, s.bx0, s.bx1, 0, (int)w, s.mirror) < 0)
                    continue;
                v = variant(&a); /* (the AVX2 geometry: found for every kset) */
                if (!met[v]) {
                    met[v] = true;
                    check_spec(&im, &s, NULL, &t, "variant");
                }
            }
    for (int v = 0; v <= 16; v++) {
        bool possible = v == 0 || v == 3 || v == 5 || v == 7 || v >= 9;

        want += possible;
        got += possible && met[v];
        if (possible && !met[v])
            tap_diag("variant %d (pairs %d, shared %d, wide %d) not met", v, 1 + (v - 1) / 4,
                     (v - 1) / 2 % 2, (v - 1) % 2);
    }
    tap_ok(got == want, "every horizontal AVX2 kernel variant met (%d of %d)", got, want);
    tap_ok(t.worst <= 1 && t.same && t.planned == t.cases,
           "each within 1 of the reference, every kernel set the same bytes (worst %d)",
           t.worst);
    free(im.p);
    rs_axis_free(&a);
}

/* The horizontal AVX-512 kernel's variants, as avx512_hrow picks them:
 * pairs 1 to 4 and more (as 5), a window a group (narrow) or a pair
 * (wide), and tables laid out for AVX2 instead (0).  Past 3 pairs (about
 * 3x) narrow windows fit only tables of a few outputs, and wide ones only
 * help from there (never met with 1 to 3 pairs). */
static int variant512(const struct rs_axis *a)
{
    uint32_t p = a->pairs > 5 ? 5 : a->pairs;

    if (a->kset != RS_ISA_AVX512)
        return 0;
    return (int)p * 2 - 1 + a->vwide;
}

static void kernel_variants512(void)
{
    static const int need[] = { 0, 1, 3, 5, 7, 8, 9, 10 }; /* AVX2; narrow 1-5; wide 4, 5 */
    struct rs_axis a = { 0 };
    struct tally t = { .same = 1 };
    bool met[11] = { false };
    int got = 0, any = 0;
    struct image im;

    if (!has_avx512) {
        tap_diag("no AVX-512 kernels on this CPU or build: their variants not tested");
        return;
    }
    make_image(&im, 401, 40, 1);
    rs_use_isa(RS_ISA_AVX512);
    for (uint32_t n = 1; n <= 64; n++)
        for (uint32_t w = 2; w <= 400; w += 1 + w / 50)
            for (int f = 0; f < 4; f++) {
                struct spec s = { .nx = n, .ny = 1 + (n * 5) % 40, .bx0 = f * 0.11,
                                  .bx1 = w - f * 0.05, .by0 = 0, .by1 = 40, .lx0 = 0,
                                  .lx1 = (int)w, .ly0 = 0, .ly1 = 40, .mirror = f & 1 };
                int v;

                if (rs_axis_plan(&a, RS_HORIZONTAL, n, s.bx0, s.bx1, 0, (int)w, s.mirror) < 0)
                    continue;
                v = variant512(&a);
                if (!met[v]) {
                    met[v] = true;
                    any++;
                    check_spec(&im, &s, NULL, &t, "variant512");
                    rs_use_isa(RS_ISA_AVX512); /* (check_spec leaves AUTO) */
                }
            }
    rs_use_isa(RS_ISA_AUTO);
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
        got += met[need[i]];
        if (!met[need[i]])
            tap_diag("AVX-512 variant %d (pairs %d, wide %d) not met", need[i],
                     (need[i] + 1) / 2, (need[i] + 1) % 2);
    }
    tap_ok(got == (int)(sizeof(need) / sizeof(need[0])),
           "every horizontal AVX-512 kernel variant met (%d of %d, %d kinds in all)", got,
           (int)(sizeof(need) / sizeof(need[0])), any);
    tap_ok(t.worst <= 1 && t.same && t.planned == t.cases,
           "each within 1 of the reference, every kernel set the same bytes (worst %d)",
           t.worst);
    free(im.p);
    rs_axis_free(&a);
}

/* The image's pixels flipped left-right, as HWC. */
static int is_mirror(const uint8_t *out, const struct image *im)
{
    int same = 1;

    for (uint32_t y = 0; y < im->h; y++)
        for (uint32_t x = 0; x < im->w; x++)
            same &= memcmp(out + (y * im->w + x) * 3,
                           im->p + (y * im->w + (im->w - 1 - x)) * 3, 3) == 0;
    return same;
}

static void exact_cases(void)
{
    struct image im, flat, one;
    struct rs_axis ax = { 0 }, ay = { 0 };
    int same = 1, mirrored = 1, constant = 1, edges = 1;

    make_image(&im, 37, 23, 0);
    rs_axis_plan(&ax, RS_HORIZONTAL, 37, 0, 37, 0, 37, false);
    rs_axis_plan(&ay, RS_VERTICAL, 23, 0, 23, 0, 23, false);
    tap_ok(ax.taps == 1 && ay.taps == 1, "same size: one tap per output");
    for (int i = 0; i < n_isas; i++) {
        uint8_t *out;

        rs_use_isa(isas[i]);
        rs_axis_plan(&ax, RS_HORIZONTAL, 37, 0, 37, 0, 37, false);
        out = run(&im, &ax, &ay, 0, 0, RS_HWC);
        same &= memcmp(out, im.p, 37 * 23 * 3) == 0;
        free(out);
        rs_axis_plan(&ax, RS_HORIZONTAL, 37, 0, 37, 0, 37, true);
        out = run(&im, &ax, &ay, 0, 0, RS_HWC);
        mirrored &= is_mirror(out, &im);
        free(out);
    }
    rs_use_isa(RS_ISA_AUTO);
    tap_ok(same, "same size: the image unchanged (every kernel set)");
    tap_ok(mirrored, "mirrored: the image flipped left-right (every kernel set)");
    /* a constant image stays constant through any resize */
    flat.w = 300;
    flat.h = 200;
    flat.p = malloc(300 * 200 * 3);
    memset(flat.p, 173, 300 * 200 * 3);
    for (int t = 0; t < 40; t++) {
        struct spec s;

        random_box(&flat, &s, t % 2);
        s.nx = 1 + below(300);
        s.ny = 1 + below(300);
        for (int i = 0; i < n_isas; i++) {
            const struct rs_axis *pax, *pay;
            int x0, y0;
            uint8_t *out;

            plan(&s, isas[i], NULL, &ax, &ay, &pax, &pay, &x0, &y0);
            out = run(&flat, &ax, &ay, 0, 0, t % 4 < 2 ? RS_CHW : RS_HWC);
            for (size_t k = 0; k < (size_t)s.nx * s.ny * 3; k++)
                constant &= out[k] == 173;
            free(out);
        }
    }
    tap_ok(constant, "a constant image stays constant (40 resizes, every kernel set)");
    /* 1-pixel edges: a 1x1 image to any size, any image to 1x1, rows and
     * columns of one pixel */
    make_image(&one, 1, 1, 0);
    for (int t = 0; t < 30; t++) {
        struct image *src = t < 10 ? &one : &im;
        struct spec s = { .bx0 = 0, .bx1 = src->w, .by0 = 0, .by1 = src->h, .lx0 = 0,
                          .lx1 = (int)src->w, .ly0 = 0, .ly1 = (int)src->h,
                          .mirror = t & 1 };
        struct tally tl = { .same = 1 };

        s.nx = t < 10 ? 1 + below(70) : t < 20 ? 1 : 1 + below(70);
        s.ny = t < 10 ? 1 + below(70) : t < 20 ? 1 + below(70) : 1;
        check_spec(src, &s, NULL, &tl, "edge");
        edges &= tl.worst <= 1 && tl.same && tl.planned == 1;
        if (t < 10)
            edges &= tl.sum == 0; /* one pixel everywhere */
    }
    tap_ok(edges, "1-pixel edges: 1x1 to n x m (exact), to one row, to one column");
    free(one.p);
    free(flat.p);
    free(im.p);
    rs_axis_free(&ax);
    rs_axis_free(&ay);
}

static void plan_invariants(void)
{
    struct rs_axis a = { 0 };
    int ok = 1, sums = 1, close = 1, prec = 1, inside = 1, mono = 1, fit16 = 1, tight = 1;
    double *ref = malloc(4200 * sizeof(double));

    for (int t = 0; t < 600; t++) {
        uint32_t n = 1 + below(t % 10 ? 300 : 8);
        int lim1 = 1 + (int)below(2000), lim0 = (int)below((uint32_t)lim1);
        double b0 = lim0 + unit() * (lim1 - lim0) * 0.9;
        double b1 = b0 + (lim1 - b0) * (0.01 + 0.99 * unit());
        enum rs_dir dir = t % 2 ? RS_VERTICAL : RS_HORIZONTAL;
        bool mirror = dir == RS_HORIZONTAL && (next() & 1);

        if (rs_axis_plan(&a, dir, n, b0, b1, lim0, lim1, mirror) < 0) {
            ok = 0;
            continue;
        }
        prec &= dir == RS_VERTICAL || a.gather ? a.prec == 15 : a.prec >= 14 && a.prec <= 22;
        mono &= dir == RS_HORIZONTAL || a.monotone;
        {
            int32_t lo = a.start[0], hi = a.start[0] + (int32_t)a.count[0];
            uint32_t most = 0;

            for (uint32_t i = 0; i < n; i++) {
                lo = a.start[i] < lo ? a.start[i] : lo;
                hi = a.start[i] + (int32_t)a.count[i] > hi ? a.start[i] + (int32_t)a.count[i] : hi;
                most = a.count[i] > most ? a.count[i] : most;
            }
            tight &= a.lo == lo && a.hi == hi && a.taps == most;
        }
        for (uint32_t i = 0; i < n; i++) {
            int first, cnt = ref_weights(mirror ? n - 1 - i : i, n, b0, b1, lim0, lim1, &first,
                                         ref);
            int64_t s = 0;

            for (uint32_t k = 0; k < a.taps; k++) {
                int32_t q = RS_W(&a, i, k);
                int at = a.start[i] + (int)k - first;
                double exact = k < a.count[i] && at >= 0 && at < cnt ? ref[at] : 0;

                s += q;
                close &= q >= 0 && fabs(q - exact * (double)(1u << a.prec)) <= 1.0;
                close &= k < a.count[i] || q == 0;
                fit16 &= dir == RS_VERTICAL || a.gather || q <= 32767;
            }
            for (int k = 0; k < cnt; k++) /* the samples left out weigh nothing */
                close &= (first + k >= a.start[i] && first + k < a.start[i] + (int)a.count[i]) ||
                         ref[k] * (double)(1u << a.prec) < 1.0;
            sums &= s == (int64_t)1 << a.prec;
            inside &= a.start[i] >= lim0 && a.count[i] >= 1 && a.count[i] <= a.taps &&
                      a.start[i] + (int)a.count[i] <= lim1 && a.start[i] >= a.lo &&
                      a.start[i] + (int)a.count[i] <= a.hi;
        }
    }
    tap_ok(ok, "600 random tables built");
    tap_ok(sums, "every output's weights sum to exactly 2^prec");
    tap_ok(close, "every weight within 1 of the reference's, none negative, zeros past the "
                  "span, none left out");
    tap_ok(prec, "prec 15 (vertical, gather), 14..22 (dot)");
    tap_ok(fit16, "dot tables' weights fit int16");
    tap_ok(inside, "every span inside the limits and inside [lo, hi)");
    tap_ok(tight, "[lo, hi) and taps exactly the spans' (none widened by the vector lanes past "
                  "n: tables of 1 to 8 outputs among them)");
    tap_ok(mono, "vertical tables' spans only move forward (the ring holds them)");
    tap_ok(rs_axis_plan(&a, RS_HORIZONTAL, 0, 0, 1, 0, 1, false) == -EINVAL &&
               rs_axis_plan(&a, RS_HORIZONTAL, 4, 2, 1, 0, 4, false) == -EINVAL &&
               rs_axis_plan(&a, RS_HORIZONTAL, 4, 0, 4, 3, 3, false) == -EINVAL &&
               rs_axis_plan(&a, RS_HORIZONTAL, 4, 5, 9, 0, 4, false) == -EINVAL &&
               rs_axis_plan(&a, RS_HORIZONTAL, 4, NAN, 4, 0, 4, false) == -EINVAL &&
               rs_axis_plan(&a, RS_HORIZONTAL, 4, -1e300, 4, 0, 4, false) == -EINVAL &&
               rs_axis_plan(&a, RS_VERTICAL, 4, 0, 4, 0, 4, true) == -EINVAL,
           "bad plans refused: no outputs, empty box, empty limits, box outside, NaN, huge, "
           "a mirrored vertical table");
    free(ref);
    rs_axis_free(&a);
    rs_axis_free(NULL);
}

/* A cached table the same as one built fresh in the cache's coordinates. */
static int same_table(const struct rs_axis *c, enum rs_dir dir, uint32_t n, double b0,
                      double b1, int lim0, int lim1, bool mirror)
{
    struct rs_axis f = { 0 };
    int same = rs_axis_plan(&f, dir, n, b0 - lim0, b1 - lim0, 0, lim1 - lim0, mirror) == 0 &&
               c->n == f.n && c->taps == f.taps && c->prec == f.prec && c->lo == f.lo &&
               c->hi == f.hi && c->gather == f.gather && c->kset == f.kset &&
               memcmp(c->start, f.start, n * sizeof(int32_t)) == 0 &&
               memcmp(c->count, f.count, n * sizeof(uint32_t)) == 0 && same_w(c, &f);

    if (same && dir == RS_HORIZONTAL && f.kset == RS_ISA_AVX512)
        same = c->vwide == f.vwide && c->vgroups == f.vgroups &&
               memcmp(c->vidx, f.vidx, (size_t)f.vgroups * f.pairs * 64) == 0 &&
               memcmp(c->vw, f.vw, (size_t)f.vgroups * f.pairs * 64) == 0 &&
               memcmp(c->vbase, f.vbase, (size_t)f.vgroups * (f.vwide ? f.pairs : 1) *
                                             sizeof(int32_t)) == 0;
    else if (same && dir == RS_HORIZONTAL && f.kset != RS_ISA_AVX2)
        ; /* the baseline's: no layout */
    else if (same && dir == RS_HORIZONTAL && f.gather)
        same = memcmp(c->idx, f.idx, (size_t)f.groups * 2 * f.pairs * 32) == 0 &&
               memcmp(c->bw, f.bw, (size_t)f.groups * 2 * f.pairs * 32) == 0 &&
               memcmp(c->base, f.base, (size_t)f.groups * 4 * sizeof(int32_t)) == 0;
    else if (same && dir == RS_HORIZONTAL)
        same = memcmp(c->w16, f.w16, (size_t)f.groups * 16 * f.taps16 * 2) == 0 &&
               memcmp(c->off, f.off, (size_t)f.groups * 16 * sizeof(int32_t)) == 0;
    rs_axis_free(&f);
    return same;
}

static void cache_cases(void)
{
    struct rs_cache c = { 0 };
    const struct rs_axis *a, *b, *keep[RS_CACHE_WAYS + 1];
    int fresh = 1, evicted = 1;
    struct image im;

    /* a hit: the same arguments, and the same crop moved (relative key) */
    rs_cache_plan(&c, RS_HORIZONTAL, 224, 10.5, 310.5, 10, 311, false, &a);
    rs_cache_plan(&c, RS_HORIZONTAL, 224, 10.5, 310.5, 10, 311, false, &b);
    tap_ok(a == b && c.hits == 1 && c.misses == 1, "the same plan twice: one build, one hit");
    rs_cache_plan(&c, RS_HORIZONTAL, 224, 110.5, 410.5, 110, 411, false, &b);
    tap_ok(a == b && c.hits == 2, "the same crop elsewhere in the image: a hit");
    rs_cache_plan(&c, RS_HORIZONTAL, 224, 10.5, 310.5, 10, 311, true, &b);
    rs_cache_plan(&c, RS_VERTICAL, 224, 10.5, 310.5, 10, 311, false, &b);
    rs_cache_plan(&c, RS_HORIZONTAL, 223, 10.5, 310.5, 10, 311, false, &b);
    rs_cache_plan(&c, RS_HORIZONTAL, 224, 10.5, 310.5, 10, 312, false, &b);
    rs_cache_plan(&c, RS_HORIZONTAL, 224, 10.25, 310.5, 10, 311, false, &b);
    tap_ok(c.hits == 2 && c.misses == 6, "mirror, direction, size, limits and box are keys");
    if (n_isas > 1) {
        rs_use_isa(RS_ISA_BASELINE);
        rs_cache_plan(&c, RS_HORIZONTAL, 224, 10.5, 310.5, 10, 311, false, &b);
        rs_use_isa(RS_ISA_AUTO);
        tap_ok(c.hits == 2 && c.misses == 7 && b != a && b->kset == RS_ISA_BASELINE &&
                   a->kset != RS_ISA_BASELINE,
               "the kernels in effect are a key: the baseline's table is another");
    }
    /* LRU: fill every way, touch the oldest, add one more: the second
     * oldest goes, the touched one stays */
    rs_cache_free(&c);
    for (int i = 0; i < RS_CACHE_WAYS; i++)
        rs_cache_plan(&c, RS_VERTICAL, 100 + i, 0, 300, 0, 300, false, &keep[i]);
    rs_cache_plan(&c, RS_VERTICAL, 100, 0, 300, 0, 300, false, &a);
    rs_cache_plan(&c, RS_VERTICAL, 999, 0, 300, 0, 300, false, &b);
    tap_ok(c.misses == RS_CACHE_WAYS + 1 && c.hits == 1 && a == keep[0] && b == keep[1],
           "LRU: the least recently used way is evicted and reused");
    rs_cache_plan(&c, RS_VERTICAL, 100, 0, 300, 0, 300, false, &a);
    rs_cache_plan(&c, RS_VERTICAL, 101, 0, 300, 0, 300, false, &b);
    tap_ok(c.hits == 2 && c.misses == RS_CACHE_WAYS + 2, "after eviction: the kept one hits, "
                                                         "the evicted one is built again");
    /* tables rebuilt in reused ways (large then small then large) are the
     * same as fresh ones, and two lookups' tables stay valid together */
    rs_cache_free(&c);
    for (int i = 0; i < 300; i++) {
        uint32_t n = 1 + below(i % 3 ? 64 : 600);
        int len = 1 + (int)below(i % 5 ? 400 : 3000), lim0 = (int)below(500);
        double b0 = lim0 + unit() * len * 0.5, b1 = b0 + (lim0 + len - b0) * (0.05 + unit());
        enum rs_dir dir = i % 2 ? RS_VERTICAL : RS_HORIZONTAL;
        bool mirror = dir == RS_HORIZONTAL && (i & 2);

        b1 = b1 > lim0 + len ? lim0 + len : b1;
        if (rs_cache_plan(&c, dir, n, b0, b1, lim0, lim0 + len, mirror, &a) < 0) {
            fresh = 0;
            continue;
        }
        fresh &= same_table(a, dir, n, b0, b1, lim0, lim0 + len, mirror);
    }
    tap_ok(fresh, "300 lookups over %d ways: every table the same as a fresh one", RS_CACHE_WAYS);
    /* a resize through tables from a cache that has evicted and rebuilt
     * them is within a level of the reference, in every kernel set */
    make_image(&im, 257, 190, 0);
    for (int round = 0; round < 3; round++) {
        struct tally t = { .same = 1 };
        struct spec s = { .nx = 224, .ny = 224, .bx0 = 20, .bx1 = 240, .by0 = 7, .by1 = 180,
                          .lx0 = 20, .lx1 = 240, .ly0 = 7, .ly1 = 180, .mirror = true };

        check_spec(&im, &s, &c, &t, "cache");
        for (int i = 0; i < 2 * RS_CACHE_WAYS; i++) /* push it out */
            rs_cache_plan(&c, RS_VERTICAL, 50 + i, 0, 100, 0, 100, false, &a);
        evicted &= t.worst <= 1 && t.same && t.planned == 1;
    }
    tap_ok(evicted, "evicted and rebuilt three times: the resize within 1 of the reference");
    /* the two tables of an image stay valid through the next lookups */
    rs_cache_plan(&c, RS_HORIZONTAL, 224, 0, 300, 0, 300, true, &a);
    rs_cache_plan(&c, RS_VERTICAL, 224, 0, 200, 0, 200, false, &b);
    for (int i = 0; i < RS_CACHE_WAYS - 2; i++)
        rs_cache_plan(&c, RS_VERTICAL, 7 + i, 0, 10, 0, 10, false, &keep[i]);
    tap_ok(same_table(a, RS_HORIZONTAL, 224, 0, 300, 0, 300, true) &&
               same_table(b, RS_VERTICAL, 224, 0, 200, 0, 200, false),
           "an image's two tables intact after %d more lookups", RS_CACHE_WAYS - 2);
    tap_ok(rs_cache_plan(&c, RS_VERTICAL, 224, 0, 200, 0, 200, true, &a) == -EINVAL &&
               rs_cache_plan(&c, RS_HORIZONTAL, 0, 0, 200, 0, 200, false, &a) == -EINVAL &&
               rs_cache_plan(&c, RS_HORIZONTAL, 4, 0, 4, 10, 10, false, &a) == -EINVAL,
           "bad plans refused through the cache");
    free(im.p);
    rs_cache_free(&c);
    rs_cache_free(NULL);
}

static void kernel_sets(void)
{
    int avx2 = rs_use_isa(RS_ISA_AVX2), avx512 = rs_use_isa(RS_ISA_AVX512);

    isas[n_isas++] = RS_ISA_BASELINE;
    tap_ok(rs_use_isa(RS_ISA_BASELINE) == 0 && strcmp(rs_isa_name(), "baseline") == 0,
           "the baseline kernels can be forced");
#ifdef RS_NO_AVX2
    tap_ok(avx2 == -ENOTSUP && avx512 == -ENOTSUP && strcmp(rs_isa_name(), "baseline") == 0,
           "built without AVX2: AVX2 and AVX-512 refused, the baseline kept");
#else
    if (avx2 == 0) {
        isas[n_isas++] = RS_ISA_AVX2;
        tap_ok(strcmp((rs_use_isa(RS_ISA_AVX2), rs_isa_name()), "avx2") == 0,
               "the AVX2 kernels can be forced");
    } else {
        tap_ok(avx2 == -ENOTSUP, "no AVX2 on this CPU: refused (the baseline alone is tested)");
    }
    if (avx512 == 0) {
        isas[n_isas++] = RS_ISA_AVX512;
        has_avx512 = true;
        tap_ok(strcmp((rs_use_isa(RS_ISA_AVX512), rs_isa_name()), "avx512") == 0,
               "the AVX-512 kernels can be forced");
    } else {
        tap_ok(avx512 == -ENOTSUP, "no AVX-512 (F, BW, VL, DQ, VBMI, VNNI) on this CPU: refused");
    }
#endif
    tap_ok(rs_use_isa((enum rs_isa)9) == -EINVAL, "an unknown kernel set refused");
    rs_use_isa(RS_ISA_AUTO);
    tap_ok(strcmp(rs_isa_name(), isa_name(isas[n_isas - 1])) == 0,
           "AUTO takes the best this CPU has (%s)", rs_isa_name());
    tap_diag("kernel sets tested: baseline%s%s", n_isas > 1 ? ", avx2" : "",
             has_avx512 ? ", avx512" : "");
}

int main(void)
{
    kernel_sets();
    plan_invariants();
    exact_cases();
    cache_cases();
    kernel_variants();
    kernel_variants512();
    random_cases();
    return tap_done();
}
