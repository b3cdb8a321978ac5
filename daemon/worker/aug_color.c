/*
 * aug_color.c - the photometric augmentation ops and their draws
 * (aug_color.h): torchvision 0.14's functional ops on uint8 tensors,
 * reproduced in their float32 arithmetic where that is what makes the
 * bytes (see the header for which are exact).
 *
 * How the work is laid out:
 *   - ops whose output byte depends on the input byte alone build a
 *     256-entry table with torchvision's math (brightness, solarize; and,
 *     from the image's statistics first, contrast's mean, autocontrast's
 *     and equalize's per-channel histograms) and map the image through it:
 *     64 bytes a step where the AVX-512 kernels run (aug_simd.h), a byte
 *     at a time otherwise; posterize and invert are straight loops that
 *     vectorize;
 *   - ops that mix channels (grayscale, saturation, hue, contrast's mean)
 *     are planar loops over three channel pointers: on a CHW image's
 *     planes directly, on an HWC image chunk by chunk through planes on
 *     the stack (FOR_RGB), so both vectorize;
 *   - the two convolutions: sharpness's 3x3 smoothing is an integer sum
 *     whose rounding is exact (a sum S of bytes over 13 is never within
 *     1/26 of a half, so torchvision's float conv rounds it as (2S + 13) /
 *     26 does), made a row at a time (64 bytes a step in the AVX-512
 *     kernel, aug512_sharp_row); the gaussian blur is two float32 passes
 *     (rows into scratch, then columns back into the image), each a
 *     straight-line loop over a row of w*c floats.
 * Every float -> byte goes through clamp_trunc or clamp_round, written so
 * that a NaN gives 0 rather than undefined behaviour.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "aug_color.h"
#include "aug_simd.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* The float loops' functions come in an AVX2 copy and the baseline one, an
 * ifunc choosing by the CPU (GCC on x86-64; elsewhere the baseline).  AVX2
 * brings no fused multiply-add, and -ffp-contract=off forbids it anyway. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define AUG_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define AUG_CLONES
#endif


/* ---- small helpers ----------------------------------------------------- */

/* x clamped to [0, 255] then truncated, as torch's clamp(0, 255).to(uint8);
 * NaN gives 0. */
static ALWAYS_INLINE uint8_t clamp_trunc(float x)
{
    x = x > 0.0f ? x : 0.0f;
    x = x < 255.0f ? x : 255.0f;
    return (uint8_t)(int)x;
}

/* x clamped to [0, 255] and rounded half to even, as torch.round(x) then
 * .to(uint8) for x in range; NaN gives 0.  Adding and taking away 2^23
 * rounds in the current (nearest-even) mode and vectorizes everywhere. */
static ALWAYS_INLINE uint8_t clamp_round(float x)
{
    x = x > 0.0f ? x : 0.0f;
    x = x < 255.0f ? x : 255.0f;
    x = (x + 8388608.0f) - 8388608.0f;
    return (uint8_t)(int)x;
}

static size_t npix(const struct aug_img *im)
{
    return (size_t)im->w * im->h;
}

/* HWC 3-channel images go through the channel-mixing loops in chunks of
 * this many pixels, split into three planes on the stack and merged back:
 * the planar loop vectorizes where the loop striding 3 bytes does not
 * (5-10x the time on 224x224 images). */
#define CHUNK 256

static ALWAYS_INLINE void split3(const uint8_t *restrict src, uint8_t (*restrict dst)[CHUNK],
                                 size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[0][i] = src[3 * i];
        dst[1][i] = src[3 * i + 1];
        dst[2][i] = src[3 * i + 2];
    }
}

static ALWAYS_INLINE void merge3(uint8_t (*restrict src)[CHUNK], uint8_t *restrict dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[3 * i] = src[0][i];
        dst[3 * i + 1] = src[1][i];
        dst[3 * i + 2] = src[2][i];
    }
}

/* Runs RUN(r, g, b, n) (a planar loop, step 1) over a 3-channel image:
 * straight on CHW planes, chunk by chunk on HWC; write back when WB. */
#define FOR_RGB(im, WB, RUN)                                                   \
    do {                                                                       \
        size_t n_ = npix(im);                                                  \
        if ((im)->layout == AUG_CHW) {                                         \
            uint8_t *r = (im)->px, *g = r + n_, *b = g + n_;                   \
            size_t n = n_;                                                     \
            RUN;                                                               \
        } else {                                                               \
            uint8_t buf_[3][CHUNK];                                            \
            for (size_t o_ = 0; o_ < n_; o_ += CHUNK) {                        \
                size_t n = n_ - o_ < CHUNK ? n_ - o_ : CHUNK;                  \
                uint8_t *r = buf_[0], *g = buf_[1], *b = buf_[2];              \
                split3((im)->px + 3 * o_, buf_, n);                            \
                RUN;                                                           \
                if (WB)                                                        \
                    merge3(buf_, (im)->px + 3 * o_, n);                        \
            }                                                                  \
        }                                                                      \
    } while (0)

/* Maps every byte of channel ch through lut[ch] (lut[0] for all when
 * shared): aug512_lut where the AVX-512 kernels run (aug_simd.h). */
static void map_lut(struct aug_img *im, const uint8_t (*lut)[256], bool shared)
{
    size_t n = npix(im), c = im->c;

    if (aug_avx512()) {
        if (shared || c == 1)
            aug512_lut(im->px, n * c, lut[0]);
        else if (im->layout == AUG_CHW)
            for (size_t ch = 0; ch < c; ch++)
                aug512_lut(im->px + ch * n, n, lut[ch]);
        else
            aug512_lut3(im->px, n, lut);
        return;
    }
    if (shared || c == 1) {
        uint8_t *p = im->px;
        for (size_t i = 0; i < n * c; i++)
            p[i] = lut[0][p[i]];
    } else if (im->layout == AUG_CHW) {
        for (size_t ch = 0; ch < c; ch++) {
            uint8_t *p = im->px + ch * n;
            for (size_t i = 0; i < n; i++)
                p[i] = lut[ch][p[i]];
        }
    } else {
        uint8_t *p = im->px;
        for (size_t i = 0; i < n; i++, p += 3) {
            p[0] = lut[0][p[0]];
            p[1] = lut[1][p[1]];
            p[2] = lut[2][p[2]];
        }
    }
}

/* lut[v] = clamp_trunc(a * v + b): torchvision's _blend(img, other, ratio)
 * with a = float(ratio), b = float(1 - ratio) * other for a constant
 * other (0 for brightness, the mean for contrast). */
static void blend_lut(uint8_t lut[256], float a, float b)
{
    for (int v = 0; v < 256; v++)
        lut[v] = clamp_trunc(a * (float)v + b);
}

/* float(1.0 - ratio): Python computes 1.0 - ratio in double, torch rounds
 * the scalar to float32 for the float32 tensor it multiplies. */
static float one_minus(float ratio)
{
    return (float)(1.0 - (double)ratio);
}

/* ---- grayscale, brightness, contrast, saturation ------------------------- */

static ALWAYS_INLINE uint8_t gray_of(uint8_t r, uint8_t g, uint8_t b)
{
    return (uint8_t)(int)(AUG_GRAY_R * (float)r + AUG_GRAY_G * (float)g + AUG_GRAY_B * (float)b);
}

static ALWAYS_INLINE void gray_run(uint8_t *restrict r, uint8_t *restrict g, uint8_t *restrict b,
                                   size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t y = gray_of(r[i], g[i], b[i]);
        r[i] = y;
        g[i] = y;
        b[i] = y;
    }
}

AUG_CLONES void aug_grayscale(struct aug_img *im)
{
    if (im->c != 3)
        return;
    FOR_RGB(im, true, gray_run(r, g, b, n));
}

/* torchvision's _blend(img, zeros, factor): factor * v (+ 0), as a table
 * of the 256 values. */
void aug_brightness(struct aug_img *im, float factor)
{
    uint8_t lut[1][256];

    blend_lut(lut[0], factor, 0.0f);
    map_lut(im, (const uint8_t(*)[256])lut, true);
}

static ALWAYS_INLINE uint64_t gray_sum_run(const uint8_t *r, const uint8_t *g, const uint8_t *b,
                                           size_t n)
{
    uint64_t sum = 0;

    for (size_t i = 0; i < n; i++)
        sum += gray_of(r[i], g[i], b[i]);
    return sum;
}

AUG_CLONES void aug_contrast(struct aug_img *im, float factor)
{
    size_t pixels = npix(im);
    uint64_t sum = 0;
    uint8_t lut[1][256];
    float mean;

    if (pixels == 0)
        return;
    if (im->c == 3 && aug_avx512()) {
        FOR_RGB(im, false, sum += aug512_gray_sum(r, g, b, n));
    } else if (im->c == 3) {
        FOR_RGB(im, false, sum += gray_sum_run(r, g, b, n));
    } else {
        for (size_t i = 0; i < pixels; i++)
            sum += im->px[i];
    }
    /* torch: sum in float32 (exact while below 2^24), then .div_(n) */
    mean = (float)sum / (float)pixels;
    blend_lut(lut[0], factor, one_minus(factor) * mean);
    map_lut(im, (const uint8_t(*)[256])lut, true);
}

static ALWAYS_INLINE void saturation_run(uint8_t *restrict r, uint8_t *restrict g,
                                         uint8_t *restrict b, size_t n, float a,
                                         float q)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t vr = r[i], vg = g[i], vb = b[i];
        float m = q * (float)gray_of(vr, vg, vb);

        r[i] = clamp_trunc(a * (float)vr + m);
        g[i] = clamp_trunc(a * (float)vg + m);
        b[i] = clamp_trunc(a * (float)vb + m);
    }
}

AUG_CLONES void aug_saturation(struct aug_img *im, float factor)
{
    float q = one_minus(factor);

    if (im->c != 3)
        return;
    if (aug_avx512())
        FOR_RGB(im, true, aug512_saturation(r, g, b, n, factor, q));
    else
        FOR_RGB(im, true, saturation_run(r, g, b, n, factor, q));
}

/* ---- hue ------------------------------------------------------------------ */

/* x - trunc(x): fmod(x, 1) for |x| < 2^31, exact (no rounding: the
 * integer part is taken away from a float of the same binade or above). */
static ALWAYS_INLINE float frac_part(float x)
{
    return x - (float)(int)x;
}

static ALWAYS_INLINE float clamp01(float x)
{
    x = x > 0.0f ? x : 0.0f;
    return x < 1.0f ? x : 1.0f;
}

/*
 * Pixels through torchvision's _rgb2hsv, (h + hue) % 1.0 and _hsv2rgb,
 * operation for operation in float32.  The bool-mask products of _rgb2hsv
 * become selects (1.0 * x + 0.0 * y + 0.0 * z is x exactly); _hsv2rgb's
 * one-hot products stay products.  No branches, so the loop vectorizes
 * (with -fno-trapping-math: GCC will not if-convert a division whose
 * divisor is a select otherwise).
 */
static ALWAYS_INLINE void hue_run(uint8_t *restrict pr, uint8_t *restrict pg,
                                  uint8_t *restrict pb, size_t n, float hue)
{
    for (size_t k = 0; k < n; k++) {
        float r = (float)pr[k] / 255.0f;
        float g = (float)pg[k] / 255.0f;
        float b = (float)pb[k] / 255.0f;
        float maxc = r > g ? r : g, minc = r < g ? r : g;
        maxc = maxc > b ? maxc : b;
        minc = minc < b ? minc : b;
        bool eqc = maxc == minc;
        float cr = maxc - minc;
        float s = cr / (eqc ? 1.0f : maxc);
        float crd = eqc ? 1.0f : cr;
        float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - b) / crd;
        float hr = bc - gc, hg = 2.0f + rc - bc, hb = 4.0f + gc - rc;
        float h = maxc == r ? hr : maxc == g ? hg : hb;

        h = frac_part(h / 6.0f + 1.0f); /* torch.fmod(h / 6 + 1, 1): h / 6 + 1 > 0 */
        /* torch.remainder(h + hue, 1.0) on floats: fmod, then + 1 if below 0 */
        h = frac_part(h + hue);
        float h1 = h + 1.0f;            /* computed either way: no branch */
        h = h < 0.0f ? h1 : h;

        float h6 = h * 6.0f;
        int i = (int)h6;                /* floor: h6 in [0, 6] */
        float f = h6 - (float)i;
        float v = maxc;
        float p = clamp01(v * (1.0f - s));
        float q = clamp01(v * (1.0f - s * f));
        float t = clamp01(v * (1.0f - s * (1.0f - f)));

        i = i == 6 ? 0 : i;             /* i % 6 */
        /* torchvision's einsum of the sector's one-hot mask with the six
         * candidates: (v t p) (q v p) (p v t) (p q v) (t p v) (v p q) */
        float m0 = (float)(i == 0), m1 = (float)(i == 1), m2 = (float)(i == 2);
        float m3 = (float)(i == 3), m4 = (float)(i == 4), m5 = (float)(i == 5);
        float ro = v * m0 + q * m1 + p * m2 + p * m3 + t * m4 + v * m5;
        float go = t * m0 + v * m1 + v * m2 + q * m3 + p * m4 + p * m5;
        float bo = p * m0 + p * m1 + t * m2 + v * m3 + v * m4 + q * m5;

        /* (x * 255.0).to(uint8): truncation, x in [0, 1] */
        pr[k] = (uint8_t)(int)(ro * 255.0f);
        pg[k] = (uint8_t)(int)(go * 255.0f);
        pb[k] = (uint8_t)(int)(bo * 255.0f);
    }
}

AUG_CLONES void aug_hue(struct aug_img *im, float hue_factor)
{
    if (im->c != 3)
        return;
    FOR_RGB(im, true, hue_run(r, g, b, n, hue_factor));
}

/* ---- byte maps: posterize, solarize, invert, autocontrast, equalize ------- */

void aug_posterize(struct aug_img *im, uint32_t bits)
{
    size_t n = npix(im) * im->c;
    uint8_t *p = im->px;
    uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff00u >> bits);

    for (size_t i = 0; i < n; i++)
        p[i] &= mask;
}

/* torch.where(img >= threshold, 255 - img, img), the comparison in float:
 * for a byte v, v >= threshold is v >= the least integer not below it. */
void aug_solarize(struct aug_img *im, float threshold)
{
    uint8_t lut[1][256];
    int t = 0;

    while (t < 256 && !((float)t >= threshold))
        t++;
    if (t > 255)
        return;
    for (int v = 0; v < 256; v++)
        lut[0][v] = v >= t ? (uint8_t)(255 - v) : (uint8_t)v;
    map_lut(im, (const uint8_t(*)[256])lut, true);
}

void aug_invert(struct aug_img *im)
{
    size_t n = npix(im) * im->c;
    uint8_t *p = im->px;

    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(255 - p[i]);
}

/* hist[v] = how many of the n bytes at p are v.  Counted into four tables
 * by the byte's index mod 4, added up at the end: in a photo's plane a
 * byte often equals the one before it, and one table would make each such
 * increment wait on the store of the last (224x224 photos, CHW: 52 -> 33
 * us for three planes). */
static void plane_histogram(const uint8_t *p, size_t n, uint32_t hist[256])
{
    uint32_t sub[4][256];
    size_t i = 0;

    memset(sub, 0, sizeof(sub));
    for (; i + 4 <= n; i += 4) {
        sub[0][p[i]]++;
        sub[1][p[i + 1]]++;
        sub[2][p[i + 2]]++;
        sub[3][p[i + 3]]++;
    }
    for (; i < n; i++)
        sub[0][p[i]]++;
    for (int v = 0; v < 256; v++)
        hist[v] = sub[0][v] + sub[1][v] + sub[2][v] + sub[3][v];
}

/* hist[ch][v]: how many bytes of channel ch are v.  An HWC pixel's three
 * channels go to three tables already; splitting them further measured
 * no faster (quicker on photos, slower on noise). */
static void histograms(const struct aug_img *im, uint32_t hist[3][256])
{
    size_t n = npix(im), c = im->c;

    memset(hist, 0, 3 * sizeof(hist[0]));
    if (im->layout == AUG_CHW || c == 1) {
        for (size_t ch = 0; ch < c; ch++)
            plane_histogram(im->px + ch * n, n, hist[ch]);
    } else {
        const uint8_t *p = im->px;
        for (size_t i = 0; i < n; i++, p += 3) {
            hist[0][p[0]]++;
            hist[1][p[1]]++;
            hist[2][p[2]]++;
        }
    }
}

/*
 * torchvision's autocontrast: per channel, with lo/hi the channel's min and
 * max as float32, scale = reciprocal(hi - lo) * 255 (Python's 255.0 /
 * tensor is tensor.reciprocal() * 255.0); a constant channel (scale not
 * finite) gets lo = 0, scale = 1; then clamp((v - lo) * scale).
 */
void aug_autocontrast(struct aug_img *im)
{
    uint32_t hist[3][256];
    uint8_t lut[3][256];

    if (npix(im) == 0)
        return;
    histograms(im, hist);
    for (uint32_t ch = 0; ch < im->c; ch++) {
        int lo = 0, hi = 255;
        float flo, scale;

        while (!hist[ch][lo])
            lo++;
        while (!hist[ch][hi])
            hi--;
        if (hi == lo) {
            flo = 0.0f;
            scale = 1.0f;
        } else {
            flo = (float)lo;
            scale = (1.0f / ((float)hi - flo)) * 255.0f;
        }
        for (int v = 0; v < 256; v++)
            lut[ch][v] = clamp_trunc(((float)v - flo) * scale);
    }
    map_lut(im, (const uint8_t(*)[256])lut, false);
}

/*
 * torchvision's _scale_channel: step = (count of all bytes but those of the
 * last non-empty bin) // 255; no step leaves the channel; else byte v maps
 * to (cumulative count below v + step // 2) // step, clamped to 255.
 */
void aug_equalize(struct aug_img *im)
{
    uint32_t hist[3][256];
    uint8_t lut[3][256];
    bool change = false;

    histograms(im, hist);
    for (uint32_t ch = 0; ch < im->c; ch++) {
        uint64_t total = 0, last = 0, step, cum = 0;

        for (int v = 0; v < 256; v++) {
            total += hist[ch][v];
            if (hist[ch][v])
                last = hist[ch][v];
        }
        step = (total - last) / 255;
        for (int v = 0; v < 256; v++) {
            if (!step) {
                lut[ch][v] = (uint8_t)v;
                continue;
            }
            uint64_t x = (cum + step / 2) / step;
            lut[ch][v] = x > 255 ? 255 : (uint8_t)x;
            cum += hist[ch][v];
            change = true;
        }
    }
    if (change)
        map_lut(im, (const uint8_t(*)[256])lut, false);
}

/* ---- sharpness ------------------------------------------------------------- */

/*
 * One row of sharpness: out[j] = blend(cur[j], smoothed) for j of the row's
 * n bytes, whose horizontal neighbours are step bytes away.  up and dn are
 * the rows above and below (original bytes; NULL on the image's first and
 * last rows, whose bytes all blend with themselves, as do the first and
 * last pixel of every row).  aug512_sharp_row computes the same bytes.
 */
static ALWAYS_INLINE void sharp_row(uint8_t *restrict out, const uint8_t *restrict up,
                                    const uint8_t *restrict cur, const uint8_t *restrict dn,
                                    size_t n, size_t step, float a, float q)
{
    size_t j = 0;

    if (up && dn && n > 2 * step) {
        for (; j < step; j++)
            out[j] = clamp_trunc(a * (float)cur[j] + q * (float)cur[j]);
        for (; j < n - step; j++) {
            uint32_t s = (uint32_t)up[j - step] + up[j] + up[j + step] + cur[j - step] +
                         5u * cur[j] + cur[j + step] + dn[j - step] + dn[j] + dn[j + step];
            uint8_t sm = (uint8_t)((2 * s + 13) / 26);

            out[j] = clamp_trunc(a * (float)cur[j] + q * (float)sm);
        }
    }
    for (; j < n; j++)
        out[j] = clamp_trunc(a * (float)cur[j] + q * (float)cur[j]);
}

AUG_CLONES int aug_sharpness(struct aug_img *im, float factor, struct aug_scratch *scratch)
{
    size_t w = im->w, h = im->h, c = im->c;
    size_t planes = im->layout == AUG_CHW ? c : 1;    /* of h rows each */
    size_t len = im->layout == AUG_CHW ? w : w * c;   /* bytes a row */
    size_t step = im->layout == AUG_CHW ? 1 : c;      /* to the next pixel */
    float q = one_minus(factor);
    uint8_t *buf;

    if (w <= 2 || h <= 2)
        return 0;
    buf = aug_scratch_get(scratch, 2 * len);
    if (!buf)
        return -ENOMEM;
    /* in place, a row at a time: row y is written into buf's half y % 2
     * from the image's own rows y - 1, y and y + 1, and copied into the
     * image once row y + 1 is made (the last row's, at the end), so every
     * row read is still the image's own and never one just written */
    for (size_t pl = 0; pl < planes; pl++) {
        uint8_t *plane = im->px + pl * h * len;

        for (size_t y = 0; y < h; y++) {
            const uint8_t *row = plane + y * len;
            const uint8_t *up = y ? row - len : NULL, *dn = y + 1 < h ? row + len : NULL;
            uint8_t *out = buf + (y & 1) * len;

            if (aug_avx512())
                aug512_sharp_row(out, up, row, dn, len, step, factor, q);
            else if (step == 1)
                sharp_row(out, up, row, dn, len, 1, factor, q);
            else
                sharp_row(out, up, row, dn, len, 3, factor, q);
            if (y)
                memcpy(plane + (y - 1) * len, buf + ((y - 1) & 1) * len, len);
        }
        memcpy(plane + (h - 1) * len, buf + ((h - 1) & 1) * len, len);
    }
    return 0;
}

/* ---- gaussian blur ------------------------------------------------------------ */

/* Index i (from -(n-1) * many up) reflected into [0, n): torch's reflect
 * padding, folded again for pads wider than the image. */
static size_t reflect(long i, size_t n)
{
    long period = 2 * (long)n - 2;

    if (n == 1)
        return 0;
    i %= period;
    if (i < 0)
        i += period;
    return (size_t)(i < (long)n ? i : period - i);
}

/* torchvision's _get_gaussian_kernel1d in float32: x = -(k-1)/2 .. (k-1)/2
 * (exact), pdf = exp(-0.5 * (x / sigma)^2), normalized by its sum. */
static void gauss_kernel(float *wt, uint32_t k, float sigma)
{
    float half = (float)(k - 1) * 0.5f, sum = 0.0f;

    for (uint32_t i = 0; i < k; i++) {
        float x = ((float)i - half) / sigma;
        wt[i] = expf(-0.5f * (x * x));
        sum += wt[i];
    }
    for (uint32_t i = 0; i < k; i++)
        wt[i] /= sum;
}

/* out[j] = sum_k wt[k] * in[j + k * step] over n outputs: one row's
 * horizontal pass (in is the padded row). */
static void conv_row(float *restrict out, const float *restrict in, const float *wt, uint32_t k,
                     size_t n, size_t step)
{
    for (size_t j = 0; j < n; j++)
        out[j] = wt[0] * in[j];
    for (uint32_t t = 1; t < k; t++) {
        float wk = wt[t];
        const float *src = in + t * step;
        for (size_t j = 0; j < n; j++)
            out[j] += wk * src[j];
    }
}

int aug_gaussian_blur(struct aug_img *im, uint32_t kx, uint32_t ky, float sx, float sy,
                      struct aug_scratch *scratch)
{
    size_t w = im->w, h = im->h, c = im->c;
    bool chw = im->layout == AUG_CHW;
    size_t planes = chw ? c : 1, pc = chw ? 1 : c; /* bytes a pixel in a plane */
    size_t len = w * pc, rx = kx / 2, ry = ky / 2;
    size_t padlen = (w + 2 * rx) * pc;
    float *tmp, *pad, *acc, *wx, *wy;
    size_t need;

    if (!(kx & 1) || !(ky & 1))
        return -EINVAL;
    if (w == 0 || h == 0)
        return 0;
    need = (h * len + padlen + len + kx + ky) * sizeof(float);
    tmp = aug_scratch_get(scratch, need);
    if (!tmp)
        return -ENOMEM;
    pad = tmp + h * len;
    acc = pad + padlen;
    wx = acc + len;
    wy = wx + kx;
    gauss_kernel(wx, kx, sx);
    gauss_kernel(wy, ky, sy);

    for (size_t pl = 0; pl < planes; pl++) {
        uint8_t *img = im->px + pl * h * len;

        /* rows: reflect-pad into floats, convolve into tmp */
        for (size_t y = 0; y < h; y++) {
            const uint8_t *row = img + y * len;
            for (size_t j = 0; j < len; j++)
                pad[rx * pc + j] = (float)row[j];
            for (size_t x = 0; x < rx; x++) {
                size_t l = reflect((long)x - (long)rx, w), r = reflect((long)(w + x), w);
                for (size_t ch = 0; ch < pc; ch++) {
                    pad[x * pc + ch] = (float)row[l * pc + ch];
                    pad[(w + rx + x) * pc + ch] = (float)row[r * pc + ch];
                }
            }
            conv_row(tmp + y * len, pad, wx, kx, len, pc);
        }
        /* columns: tmp back into the image */
        for (size_t y = 0; y < h; y++) {
            uint8_t *row = img + y * len;
            const float *src = tmp + reflect((long)y - (long)ry, h) * len;

            for (size_t j = 0; j < len; j++)
                acc[j] = wy[0] * src[j];
            for (uint32_t t = 1; t < ky; t++) {
                float wk = wy[t];
                src = tmp + reflect((long)y + (long)t - (long)ry, h) * len;
                for (size_t j = 0; j < len; j++)
                    acc[j] += wk * src[j];
            }
            for (size_t j = 0; j < len; j++)
                row[j] = clamp_round(acc[j]);
        }
    }
    return 0;
}

/* ---- ColorJitter ---------------------------------------------------------------- */

void aug_draw_colorjitter(struct rng_stream *rng, const struct aug_colorjitter_ranges *r,
                          struct aug_colorjitter *out)
{
    for (uint32_t i = 0; i < AUG_CJ_N; i++)
        out->order[i] = (uint8_t)i;
    /* Fisher-Yates: every permutation of 4 with probability 1/24 */
    for (uint32_t i = AUG_CJ_N - 1; i > 0; i--) {
        uint32_t k = rng_below(rng, i + 1);
        uint8_t t = out->order[i];

        out->order[i] = out->order[k];
        out->order[k] = t;
    }
    for (uint32_t i = 0; i < AUG_CJ_N; i++) {
        out->on[i] = r->on[i];
        out->factor[i] = r->on[i] ? (float)rng_uniform_range(rng, r->lo[i], r->hi[i]) : 0.0f;
        /* float rounding may land on hi: torch.uniform_ stays below it */
        if (r->on[i] && out->factor[i] >= r->hi[i] && r->hi[i] > r->lo[i])
            out->factor[i] = nextafterf(r->hi[i], r->lo[i]);
    }
}

/* ColorJitter's adjustments by fn_idx. */
static void (*const jitter_ops[AUG_CJ_N])(struct aug_img *, float) = {
    [AUG_CJ_BRIGHTNESS] = aug_brightness,
    [AUG_CJ_CONTRAST] = aug_contrast,
    [AUG_CJ_SATURATION] = aug_saturation,
    [AUG_CJ_HUE] = aug_hue,
};

void aug_colorjitter(struct aug_img *im, const struct aug_colorjitter *j)
{
    for (uint32_t i = 0; i < AUG_CJ_N; i++) {
        uint8_t op = j->order[i];

        if (op < AUG_CJ_N && j->on[op])
            jitter_ops[op](im, j->factor[op]);
    }
}

/* ---- the other draws -------------------------------------------------------------- */

bool aug_draw_coin(struct rng_stream *rng, double p)
{
    return rng_bernoulli(rng, p);
}

float aug_draw_gaussian_blur(struct rng_stream *rng, float lo, float hi)
{
    float s = (float)rng_uniform_range(rng, lo, hi);

    return s >= hi && hi > lo ? nextafterf(hi, lo) : s;
}
