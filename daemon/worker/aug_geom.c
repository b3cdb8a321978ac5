/*
 * aug_geom.c - the geometric augmentation ops (aug_geom.h): affine and
 * rotation through torchvision's float32 grid, flips, pad-then-crop through
 * per-axis index maps, and the boxes' forward maps.
 *
 * The affine's per-pixel arithmetic is float32 with the fused multiply-adds
 * torch's CPU kernels use; fmaf() is exact wherever it runs, and the row
 * kernels are cloned for FMA hardware (target_clones) so it is one
 * instruction there rather than a libm call.  The file is built with
 * -ffp-contract=off (daemon/meson.build) so no other product is fused.
 */
#include "aug_geom.h"
#include "aug_simd.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* A layout's strides: byte of channel ch of pixel p is p * ps + ch * cs. */
struct strides {
    size_t ps, cs;
};

static struct strides strides_of(const struct aug_img *im)
{
    if (im->layout == AUG_CHW)
        return (struct strides){ 1, (size_t)im->w * im->h };
    return (struct strides){ im->c, 1 };
}

static size_t img_bytes(const struct aug_img *im)
{
    return (size_t)im->w * im->h * im->c;
}

/* ---- draws ---- */

static float uniform_f(struct rng_stream *rng, double lo, double hi)
{
    return (float)rng_uniform_range(rng, lo, hi);
}

void aug_draw_affine(struct rng_stream *rng, const double degrees[2], const double *translate,
                     const double *scale_range, const double *shear, uint32_t n_shear,
                     uint32_t w, uint32_t h, struct aug_affine_params *out)
{
    *out = (struct aug_affine_params){ .scale = 1.0f };
    out->angle = uniform_f(rng, degrees[0], degrees[1]);
    if (translate) {
        double mx = translate[0] * w, my = translate[1] * h;

        out->tx = rintf(uniform_f(rng, -mx, mx)); /* half to even, as round() */
        out->ty = rintf(uniform_f(rng, -my, my));
    }
    if (scale_range)
        out->scale = uniform_f(rng, scale_range[0], scale_range[1]);
    if (shear && (n_shear == 2 || n_shear == 4)) {
        out->shear_x = uniform_f(rng, shear[0], shear[1]);
        if (n_shear == 4)
            out->shear_y = uniform_f(rng, shear[2], shear[3]);
    }
}

float aug_draw_rotate(struct rng_stream *rng, const double degrees[2])
{
    return uniform_f(rng, degrees[0], degrees[1]);
}

bool aug_draw_flip(struct rng_stream *rng, double p)
{
    return rng_bernoulli(rng, p);
}

/* ---- the affine matrix (functional.py's _get_inverse_affine_matrix) ---- */

/* The rotation-shear part [a b; c d] without scale, as torchvision forms
 * it, operation for operation. */
static void rss(const struct aug_affine_params *p, double *a, double *b, double *c, double *d)
{
    double rot = p->angle * (M_PI / 180.0);
    double sx = p->shear_x * (M_PI / 180.0), sy = p->shear_y * (M_PI / 180.0);

    *a = cos(rot - sy) / cos(sy);
    *b = -cos(rot - sy) * tan(sx) / cos(sy) - sin(rot);
    *c = sin(rot - sy) / cos(sy);
    *d = -sin(rot - sy) * tan(sx) / cos(sy) + cos(rot);
}

/* The inverse matrix with the centre (0, 0) (the tensor path's). */
static void inverse_matrix(const struct aug_affine_params *p, double m[6])
{
    double a, b, c, d, s = p->scale;

    rss(p, &a, &b, &c, &d);
    m[0] = d / s;
    m[1] = -b / s;
    m[2] = 0.0 / s;
    m[3] = -c / s;
    m[4] = a / s;
    m[5] = 0.0 / s;
    m[2] += m[0] * (-0.0 - (double)p->tx) + m[1] * (-0.0 - (double)p->ty);
    m[5] += m[3] * (-0.0 - (double)p->tx) + m[4] * (-0.0 - (double)p->ty);
    m[2] += 0.0;
    m[5] += 0.0;
}

void aug_map_affine(uint32_t w, uint32_t h, const struct aug_affine_params *p,
                    struct aug_map *out)
{
    double a, b, c, d, s = p->scale, cx = w * 0.5, cy = h * 0.5;
    double *m = out->m;

    rss(p, &a, &b, &c, &d);
    m[0] = a * s;
    m[1] = b * s;
    m[3] = c * s;
    m[4] = d * s;
    m[2] = m[0] * -cx + m[1] * -cy + cx + p->tx;
    m[5] = m[3] * -cx + m[4] * -cy + cy + p->ty;
    out->out_w = w;
    out->out_h = h;
}

void aug_map_rotate(uint32_t w, uint32_t h, float angle_deg, struct aug_map *out)
{
    struct aug_affine_params p = { .angle = -angle_deg, .scale = 1.0f };

    aug_map_affine(w, h, &p, out);
}

/* ---- affine pixels ---- */

/* The float32 sampling grid's constants for one image (aug_simd.h). */
static struct aug_grid grid_of(const double m[6], uint32_t w, uint32_t h)
{
    struct aug_grid g;
    float hw = (float)(0.5 * w), hh = (float)(0.5 * h);

    for (int k = 0; k < 3; k++) {
        g.r[k] = (float)m[k] / hw;
        g.r[3 + k] = (float)m[3 + k] / hh;
    }
    g.sfx = (float)w / 2;
    g.sfy = (float)h / 2;
    g.w = (float)w;
    g.h = (float)h;
    return g;
}

/* Source position (ix, iy) of output pixel (x, y), in grid_sample's pixel
 * units. */
static inline void grid_at(const struct aug_grid *g, float bx, float by, float *ix, float *iy)
{
    float gx = fmaf(by, g->r[1], bx * g->r[0]) + g->r[2];
    float gy = fmaf(by, g->r[4], bx * g->r[3]) + g->r[5];

    *ix = fmaf(gx + 1.0f, g->sfx, -0.5f);
    *iy = fmaf(gy + 1.0f, g->sfy, -0.5f);
}

/* One output row y of the nearest affine from src into dst, in two
 * passes: the source pixel of every output pixel (the same float
 * operations as grid_at, one pixel after another, so the compiler can run
 * them eight at a time: each lane rounds as the scalar code would), into
 * idx (w entries; -1 for outside), then the copies. */
__attribute__((target_clones("fma", "default")))
static void nearest_row(const struct aug_grid *g, const struct aug_img *dst, const uint8_t *src,
                        struct strides st, uint32_t y, const uint8_t *fill, int32_t *idx)
{
    uint32_t w = dst->w, c = dst->c;
    float by = (float)y - (float)(0.5 * dst->h) + 0.5f, half = (float)(0.5 * w);

    size_t row = (size_t)y * w;

    for (uint32_t x = 0; x < w; x++) {
        float bx = (float)(int32_t)x - half + 0.5f;
        float gx = fmaf(by, g->r[1], bx * g->r[0]) + g->r[2];
        float gy = fmaf(by, g->r[4], bx * g->r[3]) + g->r[5];
        float rx = rintf(fmaf(gx + 1.0f, g->sfx, -0.5f));
        float ry = rintf(fmaf(gy + 1.0f, g->sfy, -0.5f));
        bool in = rx >= 0.0f && rx < g->w && ry >= 0.0f && ry < g->h;

        idx[x] = in ? (int32_t)ry * (int32_t)w + (int32_t)rx : -1;
    }
    if (dst->layout == AUG_CHW) { /* plane by plane: one byte a pixel */
        for (uint32_t ch = 0; ch < c; ch++) {
            const uint8_t *sp = src + ch * st.cs;
            uint8_t *dp = dst->px + ch * st.cs + row, f = fill[ch];

            for (uint32_t x = 0; x < w; x++)
                dp[x] = idx[x] >= 0 ? sp[idx[x]] : f;
        }
        return;
    }
    for (uint32_t x = 0; x < w; x++) {
        size_t o = (row + x) * st.ps;

        if (idx[x] >= 0) {
            size_t i = (size_t)idx[x] * st.ps;

            for (uint32_t ch = 0; ch < c; ch++)
                dst->px[o + ch] = src[i + ch];
        } else {
            for (uint32_t ch = 0; ch < c; ch++)
                dst->px[o + ch] = fill[ch];
        }
    }
}

static inline uint8_t to_u8(float v)
{
    v = rintf(v);
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

/* One output row y of the bilinear affine, torch's fma chain per channel
 * and for the mask of ones, then the fill through the mask. */
__attribute__((target_clones("fma", "default")))
static void bilinear_row(const struct aug_grid *g, const struct aug_img *dst, const uint8_t *src,
                         struct strides st, uint32_t y, const uint8_t *fill)
{
    uint32_t w = dst->w, h = dst->h, c = dst->c;
    float by = (float)y - (float)(0.5 * h) + 0.5f;
    size_t row = (size_t)y * w;

    for (uint32_t x = 0; x < w; x++) {
        float bx = (float)x - (float)(0.5 * w) + 0.5f, ix, iy, x0, y0;
        float we, ea, n, s, wnw, wne, wsw, wse, m;
        bool in[4];
        size_t at[4], o = (row + x) * st.ps;

        grid_at(g, bx, by, &ix, &iy);
        x0 = floorf(ix);
        y0 = floorf(iy);
        we = ix - x0;
        ea = 1.0f - we;
        n = iy - y0;
        s = 1.0f - n;
        wnw = s * ea;
        wne = s * we;
        wsw = n * ea;
        wse = n * we;
        for (int k = 0; k < 4; k++) {
            float cx = x0 + (float)(k & 1), cy = y0 + (float)(k >> 1);

            in[k] = cx >= 0.0f && cx < g->w && cy >= 0.0f && cy < g->h;
            at[k] = in[k] ? ((size_t)cy * w + (size_t)cx) * st.ps : 0;
        }
        m = in[0] ? wnw : 0.0f;
        m = fmaf(in[1] ? 1.0f : 0.0f, wne, m);
        m = fmaf(in[2] ? 1.0f : 0.0f, wsw, m);
        m = fmaf(in[3] ? 1.0f : 0.0f, wse, m);
        for (uint32_t ch = 0; ch < c; ch++) {
            size_t co = ch * st.cs;
            float v[4], acc, fl = (float)fill[ch];

            for (int k = 0; k < 4; k++)
                v[k] = in[k] ? (float)src[at[k] + co] : 0.0f;
            acc = v[0] * wnw;
            acc = fmaf(v[1], wne, acc);
            acc = fmaf(v[2], wsw, acc);
            acc = fmaf(v[3], wse, acc);
            dst->px[o + co] = to_u8(acc * m + (1.0f - m) * fl);
        }
    }
}

static bool params_ok(float angle, float tx, float ty, float scale, float shx, float shy)
{
    return isfinite(angle) && isfinite(tx) && isfinite(ty) && isfinite(scale) &&
           isfinite(shx) && isfinite(shy) && scale > 0.0f;
}

/*
 * A translation by whole pixels alone: F.affine's grid then samples every
 * output pixel at a source pixel's centre (to within float32 rounding,
 * which neither nearest nor bilinear, with its mask, turns into a byte),
 * so the result is the image shifted, the uncovered pixels filled: rows
 * moved with memmove, in place.  tests/integration/test_aug_geom.py holds
 * it to torchvision's F.affine for both interpolations (the policies'
 * TranslateX/Y, two of their fourteen ops, come this way).
 */
/* Pixels from..to-1 of a row of px-byte pixels set to val (px bytes). */
static void fill_pixels(uint8_t *row, int64_t from, int64_t to, size_t px, const uint8_t *val)
{
    if (from >= to)
        return;
    if (px == 1) {
        memset(row + from, val[0], (size_t)(to - from));
        return;
    }
    for (int64_t x = from; x < to; x++)
        memcpy(row + x * px, val, px);
}

static void shift(struct aug_img *im, int64_t tx, int64_t ty, const uint8_t *fill)
{
    int64_t w = im->w, h = im->h;
    uint32_t planes = im->layout == AUG_CHW ? im->c : 1;
    size_t px = im->layout == AUG_CHW ? 1 : im->c; /* bytes per pixel in a plane's row */
    size_t row = (size_t)w * px;
    /* the columns kept: source x0..x0+n-1 to destination x0+tx.. */
    int64_t n = w - (tx < 0 ? -tx : tx);
    int64_t sx = tx < 0 ? -tx : 0, dx = tx < 0 ? 0 : tx;

    if (n < 0)
        n = 0; /* shifted wholly out: every row is fill */

    for (uint32_t pl = 0; pl < planes; pl++) {
        uint8_t *base = im->px + (size_t)pl * h * row;
        const uint8_t *val = im->layout == AUG_CHW ? fill + pl : fill; /* px bytes */
        /* rows in the order that never overwrites a row still to be read */
        for (int64_t k = 0; k < h; k++) {
            int64_t y = ty > 0 ? h - 1 - k : k, sy = y - ty;
            uint8_t *d = base + (size_t)y * row;

            if (sy < 0 || sy >= h || n == 0) {
                fill_pixels(d, 0, w, px, val);
                continue;
            }
            memmove(d + dx * px, base + (size_t)sy * row + sx * px, (size_t)n * px);
            fill_pixels(d, 0, dx, px, val);
            fill_pixels(d, dx + n, w, px, val);
        }
    }
}

int aug_affine(struct aug_img *im, float angle_deg, float tx, float ty, float scale,
               float shear_x_deg, float shear_y_deg, enum aug_interp interp,
               const uint8_t *fill, struct aug_scratch *s)
{
    static const uint8_t zeros[4];
    struct aug_affine_params p = { angle_deg, tx, ty, scale, shear_x_deg, shear_y_deg };
    struct strides st = strides_of(im);
    struct aug_grid g;
    double m[6];
    uint8_t *src;
    int32_t *idx;

    if (!params_ok(angle_deg, tx, ty, scale, shear_x_deg, shear_y_deg) || im->c < 1 ||
        im->c > 4 || (interp != AUG_NEAREST && interp != AUG_BILINEAR))
        return -EINVAL;
    if (!im->w || !im->h)
        return 0;
    if (angle_deg == 0 && scale == 1 && shear_x_deg == 0 && shear_y_deg == 0 &&
        tx == nearbyintf(tx) && ty == nearbyintf(ty)) {
        shift(im, (int64_t)tx, (int64_t)ty, fill ? fill : zeros);
        return 0;
    }
    inverse_matrix(&p, m);
    g = grid_of(m, im->w, im->h);
    if (!fill)
        fill = zeros;
    /* the AVX-512 kernel: nearest_row's and bilinear_row's bytes, its own
     * copy of the image (tests/test_aug_simd_affine.c) */
    if (aug_avx512() && aug512_affine_fits(im->w, im->h)) {
        src = aug_scratch_get(s, aug512_affine_scratch(im->w, im->h, im->c));
        if (!src)
            return -ENOMEM;
        aug512_affine(&g, interp == AUG_BILINEAR, im->px, im->w, im->h, im->c,
                      im->layout == AUG_CHW, fill, src);
        return 0;
    }
    /* the image's copy, then (4-byte aligned) nearest_row's indices */
    src = aug_scratch_get(s, (img_bytes(im) + 3) / 4 * 4 + (size_t)im->w * sizeof(int32_t));
    if (!src)
        return -ENOMEM;
    idx = (int32_t *)(void *)(src + (img_bytes(im) + 3) / 4 * 4);
    memcpy(src, im->px, img_bytes(im));
    for (uint32_t y = 0; y < im->h; y++) {
        if (interp == AUG_NEAREST)
            nearest_row(&g, im, src, st, y, fill, idx);
        else
            bilinear_row(&g, im, src, st, y, fill);
    }
    return 0;
}

int aug_rotate(struct aug_img *im, float angle_deg, enum aug_interp interp,
               const uint8_t *fill, struct aug_scratch *s)
{
    return aug_affine(im, -angle_deg, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, interp, fill, s);
}

/* ---- flips ---- */

/* Reverses n bytes in place, eight at a time from both ends (a byte swap
 * of each word), the middle byte by byte. */
static void reverse_bytes(uint8_t *row, uint32_t n)
{
    uint32_t a = 0, b = n; /* [a, b) is still to reverse */

    while (b - a >= 16) {
        uint64_t l, r;

        memcpy(&l, row + a, 8);
        memcpy(&r, row + b - 8, 8);
        l = __builtin_bswap64(l);
        r = __builtin_bswap64(r);
        memcpy(row + a, &r, 8);
        memcpy(row + b - 8, &l, 8);
        a += 8;
        b -= 8;
    }
    for (; a + 1 < b; a++, b--) {
        uint8_t t = row[a];

        row[a] = row[b - 1];
        row[b - 1] = t;
    }
}

/* Reverses the order of n pixels of pb bytes in place: the row's bytes
 * reversed, then each pixel's bytes back in order. */
static void reverse_pixels(uint8_t *row, uint32_t n, uint32_t pb)
{
    reverse_bytes(row, n * pb);
    for (uint32_t a = 0; a < n; a++) {
        uint8_t *px = row + (size_t)a * pb;

        for (uint32_t k = 0; k < pb / 2; k++) {
            uint8_t t = px[k];

            px[k] = px[pb - 1 - k];
            px[pb - 1 - k] = t;
        }
    }
}

/* reverse_pixels for 3 bytes a pixel. */
static void reverse_rgb(uint8_t *row, uint32_t n)
{
    reverse_bytes(row, 3 * n);
    for (uint32_t a = 0; a < n; a++) {
        uint8_t t = row[3 * a];

        row[3 * a] = row[3 * a + 2];
        row[3 * a + 2] = t;
    }
}

void aug_hflip(struct aug_img *im)
{
    struct strides st = strides_of(im);
    uint32_t planes = im->layout == AUG_CHW ? im->c : 1;
    uint32_t pb = im->layout == AUG_CHW ? 1 : im->c; /* bytes per pixel in a plane */

    for (uint32_t pl = 0; pl < planes; pl++) {
        for (uint32_t y = 0; y < im->h; y++) {
            uint8_t *row = im->px + pl * st.cs * (im->layout == AUG_CHW) +
                           (size_t)y * im->w * pb;

            if (pb == 1)
                reverse_bytes(row, im->w);
            else if (pb == 3) /* the common case: swap each pixel's ends */
                reverse_rgb(row, im->w);
            else
                reverse_pixels(row, im->w, pb);
        }
    }
}

void aug_vflip(struct aug_img *im)
{
    uint32_t planes = im->layout == AUG_CHW ? im->c : 1;
    size_t rb = (size_t)im->w * (im->layout == AUG_CHW ? 1 : im->c);
    size_t plane = rb * im->h;

    for (uint32_t pl = 0; pl < planes; pl++) {
        uint8_t *base = im->px + pl * plane;

        for (uint32_t a = 0, b = im->h ? im->h - 1 : 0; a < b; a++, b--) {
            uint8_t *ra = base + a * rb, *rb_ = base + b * rb;

            for (size_t k = 0; k < rb; k++) {
                uint8_t t = ra[k];

                ra[k] = rb_[k];
                rb_[k] = t;
            }
        }
    }
}

void aug_map_hflip(uint32_t w, uint32_t h, struct aug_map *out)
{
    *out = (struct aug_map){ { -1.0, 0.0, w, 0.0, 1.0, 0.0 }, w, h };
}

void aug_map_vflip(uint32_t w, uint32_t h, struct aug_map *out)
{
    *out = (struct aug_map){ { 1.0, 0.0, 0.0, 0.0, -1.0, h }, w, h };
}

/* ---- pad then crop ---- */

int aug_draw_pad_crop(struct rng_stream *rng, uint32_t w, uint32_t h, const uint32_t *padding,
                      bool pad_if_needed, uint32_t crop_w, uint32_t crop_h,
                      struct aug_crop_params *out)
{
    uint64_t pw, ph;

    *out = (struct aug_crop_params){ 0 };
    if (padding) {
        out->pad_l = padding[0];
        out->pad_t = padding[1];
        out->pad_r = padding[2];
        out->pad_b = padding[3];
    }
    pw = (uint64_t)w + out->pad_l + out->pad_r;
    ph = (uint64_t)h + out->pad_t + out->pad_b;
    if (pad_if_needed && pw < crop_w)
        out->need_x = (uint32_t)(crop_w - pw);
    if (pad_if_needed && ph < crop_h)
        out->need_y = (uint32_t)(crop_h - ph);
    pw += 2 * (uint64_t)out->need_x;
    ph += 2 * (uint64_t)out->need_y;
    if (pw < crop_w || ph < crop_h || pw > UINT32_MAX || ph > UINT32_MAX)
        return -EINVAL;
    if (pw == crop_w && ph == crop_h)
        return 0;
    out->top = rng_below(rng, (uint32_t)(ph - crop_h + 1));
    out->left = rng_below(rng, (uint32_t)(pw - crop_w + 1));
    return 0;
}

/* Where index i (may be negative or past n) of a pad over n pixels reads:
 * an index in [0, n), or -1 for the fill. */
static int64_t fold(int64_t i, int64_t n, enum aug_pad mode)
{
    int64_t p;

    if (i >= 0 && i < n)
        return i;
    switch (mode) {
    case AUG_PAD_EDGE:
        return i < 0 ? 0 : n - 1;
    case AUG_PAD_REFLECT:
        if (n == 1)
            return 0;
        p = 2 * (n - 1);
        i %= p;
        if (i < 0)
            i += p;
        return i < n ? i : p - i;
    case AUG_PAD_SYMMETRIC:
        p = 2 * n;
        i %= p;
        if (i < 0)
            i += p;
        return i < n ? i : p - 1 - i;
    default:
        return -1;
    }
}

/* The source index of each of the out output positions along one axis:
 * stage one pads n by (lo, hi), stage two the result by (need, need), then
 * the crop starts at off. */
static void axis_map(int32_t *map, uint32_t out, uint32_t off, uint32_t need, uint32_t lo,
                     uint32_t hi, uint32_t n, enum aug_pad mode)
{
    int64_t n1 = (int64_t)n + lo + hi;

    for (uint32_t k = 0; k < out; k++) {
        int64_t i = fold((int64_t)off + k - need, n1, mode);

        map[k] = (int32_t)(i < 0 ? -1 : fold(i - lo, n, mode));
    }
}

static bool overlaps(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
    return a < b + nb && b < a + na;
}

int aug_pad_crop(const struct aug_img *in, struct aug_img *out, const struct aug_crop_params *p,
                 enum aug_pad mode, const uint8_t *fill, struct aug_scratch *s)
{
    static const uint8_t zeros[4];
    uint64_t pw = (uint64_t)in->w + p->pad_l + p->pad_r + 2 * (uint64_t)p->need_x;
    uint64_t ph = (uint64_t)in->h + p->pad_t + p->pad_b + 2 * (uint64_t)p->need_y;
    size_t maps = 4 * ((size_t)out->w + out->h), inb = img_bytes(in);
    struct strides si = strides_of(in), so = strides_of(out); /* planes' cs */
    uint32_t c = in->c, xs = 0, run = 0, chw = in->layout == AUG_CHW;
    uint32_t planes = chw ? c : 1, pb = chw ? 1 : c; /* bytes per pixel in a plane */
    const uint8_t *src = in->px;
    int32_t *xm, *ym;
    uint8_t *buf;

    if (out->c != c || out->layout != in->layout || c < 1 || c > 4 ||
        (uint64_t)p->top + out->h > ph || (uint64_t)p->left + out->w > pw ||
        (mode != AUG_PAD_CONSTANT && (!in->w || !in->h) && out->w && out->h) ||
        mode < AUG_PAD_CONSTANT || mode > AUG_PAD_SYMMETRIC || ph > INT32_MAX ||
        pw > INT32_MAX)
        return -EINVAL;
    if (!out->w || !out->h)
        return 0;
    buf = aug_scratch_get(s, maps + (overlaps(in->px, inb, out->px, img_bytes(out)) ? inb : 0));
    if (!buf)
        return -ENOMEM;
    xm = (int32_t *)buf;
    ym = xm + out->w;
    if (overlaps(in->px, inb, out->px, img_bytes(out))) {
        memcpy(buf + maps, in->px, inb);
        src = buf + maps;
    }
    if (!fill)
        fill = zeros;
    axis_map(xm, out->w, p->left, p->need_x, p->pad_l, p->pad_r, in->w, mode);
    axis_map(ym, out->h, p->top, p->need_y, p->pad_t, p->pad_b, in->h, mode);
    /* the longest run of columns read in order, copied whole */
    for (uint32_t x = 0, len = 0; x < out->w; x++) {
        len = x && xm[x] >= 0 && xm[x - 1] >= 0 && xm[x] == xm[x - 1] + 1 ? len + 1
              : xm[x] >= 0                                                ? 1
                                                                          : 0;
        if (len > run) {
            run = len;
            xs = x + 1 - len;
        }
    }
    for (uint32_t pl = 0; pl < planes; pl++) {
        for (uint32_t y = 0; y < out->h; y++) {
            uint8_t *d = out->px + pl * so.cs * chw + (size_t)y * out->w * pb;
            const uint8_t *r = src + pl * si.cs * chw + (size_t)(ym[y] < 0 ? 0 : ym[y]) * in->w * pb;
            const uint8_t *f = fill + pl;

            for (uint32_t x = 0; x < out->w; x++) {
                if (ym[y] >= 0 && x == xs && run) {
                    memcpy(d + (size_t)x * pb, r + (size_t)xm[x] * pb, (size_t)run * pb);
                    x += run - 1;
                    continue;
                }
                if (ym[y] < 0 || xm[x] < 0)
                    memcpy(d + (size_t)x * pb, f, pb);
                else
                    memcpy(d + (size_t)x * pb, r + (size_t)xm[x] * pb, pb);
            }
        }
    }
    return 0;
}

void aug_map_pad_crop(const struct aug_crop_params *p, uint32_t crop_w, uint32_t crop_h,
                      struct aug_map *out)
{
    double dx = (double)p->pad_l + p->need_x - p->left;
    double dy = (double)p->pad_t + p->need_y - p->top;

    *out = (struct aug_map){ { 1.0, 0.0, dx, 0.0, 1.0, dy }, crop_w, crop_h };
}

/* ---- boxes ---- */

static float clip(double v, uint32_t hi)
{
    return (float)(v < 0.0 ? 0.0 : v > hi ? (double)hi : v);
}

int aug_box_read(const float *in, uint32_t r, double b[4], struct rf_err *err)
{
    for (int k = 0; k < 4; k++) {
        b[k] = in[4 * (size_t)r + k];
        if (!isfinite(b[k]))
            return rf_err_set(err, -EBADMSG, "box %u: coordinate %d is %g, not finite", r, k,
                              b[k]);
    }
    if (b[2] < b[0] || b[3] < b[1])
        return rf_err_set(err, -EBADMSG,
                          "box %u: (%g, %g, %g, %g) is not x0 <= x1, y0 <= y1 (xyxy)", r, b[0],
                          b[1], b[2], b[3]);
    return 0;
}

int aug_boxes(const struct aug_map *map, const float *in, uint32_t n, float *out, uint8_t *keep,
              struct rf_err *err)
{
    const double *m = map->m;
    uint32_t kept = 0;

    if (n > INT32_MAX)
        return rf_err_set(err, -EBADMSG, "%u boxes: at most %d in one sample", n, INT32_MAX);
    for (uint32_t r = 0; r < n; r++) {
        double b[4], lo[2] = { INFINITY, INFINITY }, hi[2] = { -INFINITY, -INFINITY };
        double cx, cy, ccx, ccy;
        bool ok;

        if (aug_box_read(in, r, b, err) < 0)
            return -EBADMSG;
        for (int k = 0; k < 4; k++) {
            double x = b[(k & 1) ? 2 : 0], y = b[(k & 2) ? 3 : 1];
            double u = m[0] * x + m[1] * y + m[2], v = m[3] * x + m[4] * y + m[5];

            lo[0] = fmin(lo[0], u);
            hi[0] = fmax(hi[0], u);
            lo[1] = fmin(lo[1], v);
            hi[1] = fmax(hi[1], v);
        }
        cx = (b[0] + b[2]) / 2;
        cy = (b[1] + b[3]) / 2;
        ccx = m[0] * cx + m[1] * cy + m[2];
        ccy = m[3] * cx + m[4] * cy + m[5];
        ok = ccx >= 0.0 && ccx < map->out_w && ccy >= 0.0 && ccy < map->out_h;
        if (keep)
            keep[r] = ok;
        if (!ok)
            continue;
        out[4 * (size_t)kept + 0] = clip(lo[0], map->out_w);
        out[4 * (size_t)kept + 1] = clip(lo[1], map->out_h);
        out[4 * (size_t)kept + 2] = clip(hi[0], map->out_w);
        out[4 * (size_t)kept + 3] = clip(hi[1], map->out_h);
        kept++;
    }
    return (int)kept;
}
