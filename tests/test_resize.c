/*
 * test_resize.c - the resampler (daemon/worker/resize.c) against a straightforward
 * reference: Pillow's antialiased bilinear filter written out directly, in
 * double precision, one output pixel at a time as a 2-D weighted sum.
 *
 * Random images, boxes (fractional), input limits, output sizes (both
 * reductions and enlargements) and flips from a fixed seed: every output
 * byte within 1 of the reference, and the mean difference small.  Also the
 * plans' invariants and two exact cases (identity, constant image).
 */
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

/* Runs rs_resize over the whole image as input; returns max |diff| and
 * adds to *sum and *count. */
static int compare(const struct image *im, const struct spec *s, double *sum, double *count,
                   int *planned)
{
    struct rs_axis ax = { 0 }, ay = { 0 };
    uint8_t *out;
    void *scratch;
    double wx[4096], wy[4096];
    int maxd = 0;

    *planned = rs_axis_plan(&ax, s->nx, s->bx0, s->bx1, s->lx0, s->lx1, s->mirror) == 0 &&
               rs_axis_plan(&ay, s->ny, s->by0, s->by1, s->ly0, s->ly1, false) == 0;
    if (!*planned)
        return 999;
    out = malloc((size_t)s->nx * s->ny * 3);
    scratch = aligned_alloc(32, (rs_scratch_bytes(&ax, &ay) + 31) & ~(size_t)31);
    rs_resize(im->p, (size_t)im->w * 3, 0, 0, &ax, &ay, scratch, out);
    for (uint32_t oy = 0; oy < s->ny; oy++) {
        int fy, ny = ref_weights(oy, s->ny, s->by0, s->by1, s->ly0, s->ly1, &fy, wy);

        for (uint32_t ox = 0; ox < s->nx; ox++) {
            uint32_t sx = s->mirror ? s->nx - 1 - ox : ox;
            int fx, nx = ref_weights(sx, s->nx, s->bx0, s->bx1, s->lx0, s->lx1, &fx, wx);

            for (int c = 0; c < 3; c++) {
                double v = 0;
                int r, d;

                for (int j = 0; j < ny; j++)
                    for (int i = 0; i < nx; i++)
                        v += wy[j] * wx[i] *
                             im->p[((size_t)(fy + j) * im->w + (size_t)(fx + i)) * 3 + c];
                r = (int)floor(v + 0.5);
                r = r < 0 ? 0 : r > 255 ? 255 : r;
                d = abs(r - out[(size_t)c * s->nx * s->ny + (size_t)oy * s->nx + ox]);
                if (d > maxd)
                    maxd = d;
                *sum += d;
                *count += 1;
            }
        }
    }
    free(out);
    free(scratch);
    rs_axis_free(&ax);
    rs_axis_free(&ay);
    return maxd;
}

static void random_cases(void)
{
    int worst = 0, all_planned = 1;
    double sum = 0, count = 0;

    for (int t = 0; t < 300; t++) {
        struct image im;
        struct spec s;
        double bw, bh;
        int planned, d;

        make_image(&im, 1 + below(300), 1 + below(300), t % 3);
        /* a crop box inside the image, from a few pixels to all of it */
        bw = im.w * (0.05 + 0.95 * unit());
        bh = im.h * (0.05 + 0.95 * unit());
        s.bx0 = (im.w - bw) * unit();
        s.by0 = (im.h - bh) * unit();
        s.bx1 = s.bx0 + bw;
        s.by1 = s.by0 + bh;
        s.nx = 1 + below(t % 2 ? 64 : 400);
        s.ny = 1 + below(t % 2 ? 64 : 400);
        s.mirror = next() & 1;
        if (t % 4 == 0) { /* limits: the whole image (a resize then crop) */
            s.lx0 = s.ly0 = 0;
            s.lx1 = (int)im.w;
            s.ly1 = (int)im.h;
        } else { /* limits: the box's pixels (a crop then resize) */
            s.lx0 = (int)floor(s.bx0);
            s.ly0 = (int)floor(s.by0);
            s.lx1 = (int)ceil(s.bx1);
            s.ly1 = (int)ceil(s.by1);
        }
        d = compare(&im, &s, &sum, &count, &planned);
        all_planned &= planned;
        if (d > worst)
            worst = d;
        if (d > 1)
            tap_diag("case %d: %ux%u box %.2f..%.2f x %.2f..%.2f -> %ux%u: max diff %d", t,
                     im.w, im.h, s.bx0, s.bx1, s.by0, s.by1, s.nx, s.ny, d);
        free(im.p);
    }
    tap_ok(all_planned, "every random plan accepted");
    tap_ok(worst <= 1, "300 random resizes: every byte within 1 of the reference (worst %d)",
           worst);
    tap_ok(sum / count < 0.05, "mean difference %.4f below 0.05", sum / count);
}

static void exact_cases(void)
{
    struct image im;
    struct spec id = { .nx = 37, .ny = 23, .bx0 = 0, .bx1 = 37, .by0 = 0, .by1 = 23,
                       .lx0 = 0, .lx1 = 37, .ly0 = 0, .ly1 = 23 };
    struct rs_axis ax = { 0 }, ay = { 0 };
    uint8_t *out = malloc(37 * 23 * 3), *planes = malloc(37 * 23 * 3), flat[40 * 30 * 3];
    uint8_t small[7 * 5 * 3];
    void *scratch;
    int same = 1;

    make_image(&im, 37, 23, 0);
    rs_axis_plan(&ax, 37, 0, 37, 0, 37, false);
    rs_axis_plan(&ay, 23, 0, 23, 0, 23, false);
    tap_ok(ax.taps == 1 && ay.taps == 1, "same size: one tap per output");
    scratch = aligned_alloc(32, (rs_scratch_bytes(&ax, &ay) + 31) & ~(size_t)31);
    rs_resize(im.p, 37 * 3, 0, 0, &ax, &ay, scratch, planes);
    rs_interleave(planes, 37 * 23, out);
    tap_ok(memcmp(out, im.p, 37 * 23 * 3) == 0, "same size: the image unchanged (planes "
                                                 "interleaved back)");
    (void)id;
    /* mirrored identity is the flipped image */
    rs_axis_plan(&ax, 37, 0, 37, 0, 37, true);
    rs_resize(im.p, 37 * 3, 0, 0, &ax, &ay, scratch, planes);
    rs_interleave(planes, 37 * 23, out);
    for (int y = 0; y < 23; y++)
        for (int x = 0; x < 37; x++)
            same &= memcmp(out + (y * 37 + x) * 3, im.p + (y * 37 + (36 - x)) * 3, 3) == 0;
    tap_ok(same, "mirrored: the image flipped left-right");
    free(scratch);
    /* a constant image stays constant through any resize */
    memset(flat, 173, sizeof(flat));
    rs_axis_plan(&ax, 7, 3.3, 31.9, 0, 40, false);
    rs_axis_plan(&ay, 5, 1.25, 29.5, 0, 30, false);
    scratch = aligned_alloc(32, (rs_scratch_bytes(&ax, &ay) + 31) & ~(size_t)31);
    rs_resize(flat, 40 * 3, 0, 0, &ax, &ay, scratch, small);
    same = 1;
    for (size_t i = 0; i < sizeof(small); i++)
        same &= small[i] == 173;
    tap_ok(same, "a constant image stays constant");
    free(scratch);
    free(out);
    free(planes);
    free(im.p);
    rs_axis_free(&ax);
    rs_axis_free(&ay);
}

static void plan_invariants(void)
{
    struct rs_axis a = { 0 };
    int ok = 1, qok = 1, inside = 1;

    for (int t = 0; t < 500; t++) {
        uint32_t n = 1 + below(300);
        int lim1 = 1 + (int)below(2000), lim0 = (int)below((uint32_t)lim1);
        double b0 = lim0 + unit() * (lim1 - lim0) * 0.9;
        double b1 = b0 + (lim1 - b0) * (0.01 + 0.99 * unit());

        if (rs_axis_plan(&a, n, b0, b1, lim0, lim1, next() & 1) < 0) {
            ok = 0;
            continue;
        }
        for (uint32_t i = 0; i < n; i++) {
            double s = 0;
            int qs = 0;

            for (uint32_t k = 0; k < a.taps; k++) {
                s += a.w[(size_t)i * a.taps + k];
                if (a.taps <= RS_FIXED_TAPS)
                    qs += a.q[(size_t)i * a.taps + k];
            }
            ok &= fabs(s - 1.0) < 1e-5;
            qok &= a.taps > RS_FIXED_TAPS || qs == 256;
            inside &= a.span[i].start >= lim0 && a.span[i].count >= 1 &&
                      a.span[i].count <= a.taps &&
                      a.span[i].start + (int)a.span[i].count <= lim1 &&
                      a.span[i].start >= a.lo &&
                      a.span[i].start + (int)a.span[i].count <= a.hi;
        }
    }
    tap_ok(ok, "float weights of every output sum to 1");
    tap_ok(qok, "fixed-point weights of every output sum to 256 (plans of %d taps or less)",
           RS_FIXED_TAPS);
    tap_ok(inside, "every span inside the limits and inside [lo, hi)");
    tap_ok(rs_axis_plan(&a, 0, 0, 1, 0, 1, false) < 0 &&
               rs_axis_plan(&a, 4, 2, 1, 0, 4, false) < 0 &&
               rs_axis_plan(&a, 4, 0, 4, 3, 3, false) < 0 &&
               rs_axis_plan(&a, 4, 5, 9, 0, 4, false) < 0 &&
               rs_axis_plan(&a, 4, NAN, 4, 0, 4, false) < 0 &&
               rs_axis_plan(&a, 4, -1e300, 4, 0, 4, false) < 0,
           "bad plans refused: no outputs, empty box, empty limits, box outside, NaN, huge");
    rs_axis_free(&a);
    rs_axis_free(NULL);
}

int main(void)
{
    plan_invariants();
    exact_cases();
    random_cases();
    return tap_done();
}
