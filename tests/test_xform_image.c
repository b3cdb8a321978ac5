/*
 * test_xform_image.c - the train and eval transforms (daemon/worker/xform_image.c):
 *   - RandomResizedCrop's parameters against a C port of torchvision's
 *     RandomResizedCrop.get_params (0.14, written out below as it reads in
 *     Python) fed the same draws, over many image sizes and parameters;
 *   - its central fallback on hand-worked cases;
 *   - the distribution over many samples with fixed seeds: mean area
 *     against the expectation integrated numerically, log-uniform aspect
 *     ratios, uniform positions, flips near half;
 *   - eval's resize and center-crop numbers (torchvision's rounding);
 *   - apply(): deterministic per stream, CHW the transpose of HWC, bad
 *     inputs counted under the right reason;
 *   - RFPX pixel records (proto/pixels.h): one made of a JPEG's own pixels,
 *     decoded at full scale, gives the JPEG's bytes exactly when the JPEG
 *     path is held at scale 8/8, train and eval, many sizes, both layouts;
 *     bad ones are bad samples, decode or too_large.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jpeg.h"
#include "jpeg_make.h"
#include "pixels.h"
#include "ring.h"
#include "tap.h"
#include "xform_image.h"

/*
 * torchvision.transforms.RandomResizedCrop.get_params, as in 0.14:
 *
 *   area = height * width
 *   log_ratio = torch.log(torch.tensor(ratio))
 *   for _ in range(10):
 *       target_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
 *       aspect_ratio = torch.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1])).item()
 *       w = int(round(math.sqrt(target_area * aspect_ratio)))
 *       h = int(round(math.sqrt(target_area / aspect_ratio)))
 *       if 0 < w <= width and 0 < h <= height:
 *           i = torch.randint(0, height - h + 1, size=(1,)).item()
 *           j = torch.randint(0, width - w + 1, size=(1,)).item()
 *           return i, j, h, w
 *   in_ratio = float(width) / float(height)
 *   if in_ratio < min(ratio):   w = width;  h = int(round(w / min(ratio)))
 *   elif in_ratio > max(ratio): h = height; w = int(round(h * max(ratio)))
 *   else:                       w = width;  h = height
 *   i = (height - h) // 2
 *   j = (width - w) // 2
 *   return i, j, h, w
 *
 * torch's generator replaced by the sample's stream, draw for draw.
 */
static double py_round(double x)
{
    double r = floor(x + 0.5);

    if (r - x == 0.5 && fmod(r, 2.0) != 0) /* a tie goes to the even one */
        r -= 1.0;
    return r;
}

static struct xfi_crop port(uint32_t width, uint32_t height, const double scale[2],
                            const double ratio[2], struct rng_stream *g, int *fell)
{
    double area = (double)height * width;
    double log_ratio[2] = { log(ratio[0]), log(ratio[1]) };
    double in_ratio;
    struct xfi_crop c;
    long w, h;

    for (int k = 0; k < 10; k++) {
        double target_area = area * rng_uniform_range(g, scale[0], scale[1]);
        double aspect_ratio = exp(rng_uniform_range(g, log_ratio[0], log_ratio[1]));

        w = (long)py_round(sqrt(target_area * aspect_ratio));
        h = (long)py_round(sqrt(target_area / aspect_ratio));
        if (0 < w && w <= (long)width && 0 < h && h <= (long)height) {
            c.i = rng_below(g, (uint32_t)(height - h + 1));
            c.j = rng_below(g, (uint32_t)(width - w + 1));
            c.h = (uint32_t)h;
            c.w = (uint32_t)w;
            return c;
        }
    }
    *fell += 1;
    in_ratio = (double)width / (double)height;
    if (in_ratio < fmin(ratio[0], ratio[1])) {
        w = width;
        h = (long)py_round(w / fmin(ratio[0], ratio[1]));
    } else if (in_ratio > fmax(ratio[0], ratio[1])) {
        h = height;
        w = (long)py_round(h * fmax(ratio[0], ratio[1]));
    } else {
        w = width;
        h = height;
    }
    c.i = (uint32_t)((height - h) / 2);
    c.j = (uint32_t)((width - w) / 2);
    c.h = (uint32_t)h;
    c.w = (uint32_t)w;
    return c;
}

static void against_port(void)
{
    static const uint32_t sizes[][2] = {
        { 500, 375 }, { 375, 500 }, { 224, 224 }, { 1, 1 }, { 3, 1000 }, { 1000, 3 },
        { 4000, 3000 }, { 17, 31 }, { 640, 480 }, { 2, 2 },
    };
    static const double params[][4] = {
        { 0.08, 1.0, 3.0 / 4, 4.0 / 3 }, { 0.5, 0.5, 1.0, 1.0 }, { 0.9, 1.0, 0.25, 4.0 },
        { 0.08, 0.1, 0.75, 1.3333333 }, { 1.0, 1.0, 2.0, 3.0 },
    };
    int same = 1, runs = 0, fallbacks = 0, empty = 0;

    for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (unsigned p = 0; p < sizeof(params) / sizeof(params[0]); p++)
            for (uint64_t idx = 0; idx < 200; idx++) {
                struct rng_stream a, b;
                struct xfi_crop got, want;

                rng_stream_init(&a, 42 + p, (uint32_t)s, idx);
                b = a;
                got = xfi_rrc_params(sizes[s][0], sizes[s][1], params[p][0], params[p][1],
                                     params[p][2], params[p][3], &a);
                want = port(sizes[s][0], sizes[s][1], params[p], params[p] + 2, &b,
                            &fallbacks);
                runs++;
                if (want.h == 0 || want.w == 0) {
                    /* torchvision's empty crop: ours is one pixel (xform_image.h) */
                    empty++;
                    want.h = want.h ? want.h : 1;
                    want.w = want.w ? want.w : 1;
                    want.i = (sizes[s][1] - want.h) / 2;
                    want.j = (sizes[s][0] - want.w) / 2;
                }
                if (memcmp(&got, &want, sizeof(got)) != 0 || a.block != b.block ||
                    a.used != b.used) {
                    if (same)
                        tap_diag("%ux%u params %u index %llu: got %u %u %u %u, want %u %u %u %u",
                                 sizes[s][0], sizes[s][1], p, (unsigned long long)idx, got.i,
                                 got.j, got.h, got.w, want.i, want.j, want.h, want.w);
                    same = 0;
                }
            }
    tap_ok(same, "get_params: %d streams give torchvision's crops and consume the same draws",
           runs);
    tap_ok(fallbacks > 100, "  %d of them through the central fallback, %d of those an empty "
                            "crop in torchvision, one pixel here", fallbacks, empty);
}

static void fallback_cases(void)
{
    struct rng_stream g;
    struct xfi_crop c;

    rng_stream_init(&g, 1, 0, 0);
    c = xfi_rrc_params(1000, 10, 0.08, 1, 3.0 / 4, 4.0 / 3, &g);
    tap_ok(c.i == 0 && c.j == 493 && c.h == 10 && c.w == 13,
           "1000x10: no attempt fits, fallback h=10 w=round(13.33)=13 at (0, 493): %u %u %u %u",
           c.i, c.j, c.h, c.w);
    c = xfi_rrc_params(10, 1000, 0.08, 1, 3.0 / 4, 4.0 / 3, &g);
    tap_ok(c.i == 493 && c.j == 0 && c.h == 13 && c.w == 10,
           "10x1000: fallback w=10 h=round(13.33)=13 at (493, 0): %u %u %u %u", c.i, c.j, c.h,
           c.w);
    c = xfi_rrc_params(300, 200, 1, 1, 2, 3, &g);
    tap_ok(c.i == 25 && c.j == 0 && c.h == 150 && c.w == 300,
           "300x200, scale 1, ratio 2..3: no attempt fits, in ratio 1.5 < 2: w=300 "
           "h=round(300/2)=150 at (25, 0): %u %u %u %u",
           c.i, c.j, c.h, c.w);
    c = xfi_rrc_params(300, 200, 1, 1, 1.4, 1.6, &g);
    tap_ok(c.i == 0 && c.j == 0 && c.h == 200 && c.w == 300,
           "300x200, scale 1, ratio 1.4..1.6: fallback to the whole image: %u %u %u %u", c.i,
           c.j, c.h, c.w);
    c = xfi_rrc_params(1, 1000, 0.5, 0.5, 50, 100, &g);
    tap_ok(c.h >= 1 && c.w == 1 && c.h <= 1000,
           "1x1000 with ratio 50..100: the fallback's crop is never empty (h=%u)", c.h);
}

/* The expected area fraction of an accepted attempt on a W x H image:
 * scale and log ratio uniform, accepted when the crop fits (rounding
 * ignored; the image is large).  Midpoint rule on a fine grid. */
static double expected_area(double W, double H, double s0, double s1, double r0, double r1)
{
    const int N = 1500;
    double num = 0, den = 0, l0 = log(r0), l1 = log(r1);

    for (int a = 0; a < N; a++) {
        double s = s0 + (s1 - s0) * (a + 0.5) / N;

        for (int b = 0; b < N; b++) {
            double r = exp(l0 + (l1 - l0) * (b + 0.5) / N);
            double w = sqrt(s * W * H * r), h = sqrt(s * W * H / r);

            if (w <= W && h <= H) {
                num += s;
                den += 1;
            }
        }
    }
    return num / den;
}

static void distribution(void)
{
    const int N = 20000;
    struct wire_xform p = { .scale_lo = 0.08, .scale_hi = 1, .ratio_lo = 3.0 / 4,
                            .ratio_hi = 4.0 / 3, .flip = 0.5 };
    double area = 0, want = expected_area(1200, 900, 0.08, 1, 3.0 / 4, 4.0 / 3);
    double logr = 0, pos_i = 0, pos_j = 0, bins[10] = { 0 };
    int flips = 0, npos = 0, bins_ok = 1;

    for (int k = 0; k < N; k++) {
        struct rng_stream g;
        struct xfi_plan pl;
        struct xfi_crop c;

        rng_stream_init(&g, 7, 3, (uint64_t)k);
        xfi_train_plan(1200, 900, &p, &g, &pl, &c);
        area += (double)c.w * c.h / (1200.0 * 900.0);
        flips += pl.flip;
        if (c.h < 900 && c.w < 1200) {
            pos_i += (double)c.i / (900 - c.h);
            pos_j += (double)c.j / (1200 - c.w);
            npos++;
        }
    }
    area /= N;
    tap_ok(fabs(area - want) < 0.01, "mean area %.4f of 1200x900 crops within 0.01 of %.4f", area,
           want);
    tap_ok(fabs((double)flips / N - 0.5) < 0.015, "flips %.4f of samples, near 0.5",
           (double)flips / N);
    tap_ok(fabs(pos_i / npos - 0.5) < 0.01 && fabs(pos_j / npos - 0.5) < 0.01,
           "crop positions uniform: mean top %.4f, left %.4f of their range", pos_i / npos,
           pos_j / npos);
    /* small areas on a large square never fail an attempt: log ratio is
     * uniform on [log 3/4, log 4/3] */
    p.scale_hi = 0.3;
    for (int k = 0; k < N; k++) {
        struct rng_stream g;
        struct xfi_plan pl;
        struct xfi_crop c;
        double lr;
        int b;

        rng_stream_init(&g, 11, 0, (uint64_t)k);
        xfi_train_plan(4000, 4000, &p, &g, &pl, &c);
        lr = log((double)c.w / c.h);
        logr += lr;
        b = (int)floor((lr - log(3.0 / 4)) / (log(4.0 / 3) - log(3.0 / 4)) * 10);
        bins[b < 0 ? 0 : b > 9 ? 9 : b] += 1;
    }
    for (int b = 0; b < 10; b++)
        bins_ok &= fabs(bins[b] / N - 0.1) < 0.015;
    tap_ok(fabs(logr / N) < 0.01, "mean log aspect ratio %.4f, near 0", logr / N);
    tap_ok(bins_ok, "log aspect ratio log-uniform: 10 bins of %.3f %.3f %.3f %.3f %.3f %.3f "
                    "%.3f %.3f %.3f %.3f",
           bins[0] / N, bins[1] / N, bins[2] / N, bins[3] / N, bins[4] / N, bins[5] / N,
           bins[6] / N, bins[7] / N, bins[8] / N, bins[9] / N);
}

static void eval_cases(void)
{
    static const struct {
        uint32_t w, h, size;
        double crop;
        uint32_t rw, rh, top, left;
    } cases[] = {
        { 500, 375, 224, 0.875, 341, 256, 16, 58 },    /* 58.5 rounds to even 58 */
        { 375, 500, 224, 0.875, 256, 341, 58, 16 },
        { 256, 256, 224, 0.875, 256, 256, 16, 16 },
        { 1920, 1080, 224, 0.875, 455, 256, 16, 116 }, /* 115.5 rounds to even 116 */
        { 640, 480, 224, 1.0, 298, 224, 0, 37 },
        { 333, 444, 299, 0.875, 341, 454, 78, 21 },    /* int(299 / 0.875) = 341 */
        { 3, 4000, 32, 0.5, 64, 85333, 42650, 16 },
    };
    int ok = 1;

    for (unsigned k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct wire_xform p = { .size = cases[k].size, .crop = cases[k].crop };
        uint32_t rw, rh, top, left;
        struct xfi_plan pl;

        xfi_eval_plan(cases[k].w, cases[k].h, &p, &pl, &rw, &rh, &top, &left);
        if (rw != cases[k].rw || rh != cases[k].rh || top != cases[k].top ||
            left != cases[k].left ||
            fabs(pl.x0 - left * (double)cases[k].w / rw) > 1e-9 ||
            fabs(pl.x1 - pl.x0 - p.size * (double)cases[k].w / rw) > 1e-9 || pl.lx0 != 0 ||
            pl.lx1 != (int32_t)cases[k].w || pl.flip) {
            tap_diag("%ux%u size %u crop %g: %ux%u at (%u, %u)", cases[k].w, cases[k].h,
                     cases[k].size, cases[k].crop, rw, rh, top, left);
            ok = 0;
        }
    }
    tap_ok(ok, "eval: Resize(int(size/crop)) sizes, CenterCrop corners, boxes in the original");
}

static uint8_t *photo(uint32_t w, uint32_t h, size_t *len)
{
    struct jm_opts o = { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .quality = 90 };

    return jm_encode(w, h, &o, jm_pattern, NULL, len);
}

static void apply_checks(void)
{
    const struct xform_def *train = xform_get((uint32_t)xform_find("train"));
    const struct xform_def *eval = xform_get((uint32_t)xform_find("eval"));
    struct wire_xform p = { .size = 64, .layout = RING_HWC, .scale_lo = 0.08, .scale_hi = 1,
                            .ratio_lo = 0.75, .ratio_hi = 4.0 / 3, .flip = 0.5, .crop = 0.875,
                            .pixel_cap = 1 << 20 };
    struct xform_out out = { .sample_bytes = 3 * 64 * 64 };
    struct xform_ctx ctx = { 0 };
    uint8_t a[3 * 64 * 64], b[3 * 64 * 64], c[3 * 64 * 64];
    struct rng_stream g;
    enum wire_bad why;
    struct rf_err err;
    size_t len;
    uint8_t *jpg = photo(300, 200, &len);
    int differ = 0, transposed = 1, rc;

    tap_ok(train && eval && train->geometry == eval->geometry && !train->direct,
           "train and eval are in the table");
    if (!train || !eval)
        return;
    for (uint64_t idx = 0; idx < 8; idx++) {
        rng_stream_init(&g, 5, 0, idx);
        rc = train->apply(NULL, &p, jpg, len, &g, &ctx, a, &out, &why, &err);
        rng_stream_init(&g, 5, 0, idx);
        rc |= train->apply(NULL, &p, jpg, len, &g, &ctx, b, &out, &why, &err);
        if (rc != 0 || memcmp(a, b, sizeof(a)) != 0)
            break;
        differ += idx > 0 && memcmp(a, c, sizeof(a)) != 0;
        memcpy(c, a, sizeof(a));
    }
    tap_ok(differ == 7, "train: a stream gives the same bytes every time, streams differ (%d/7)",
           differ);
    tap_ok(ctx.decode_ns > 0 && ctx.resize_ns > 0 && ctx.write_ns == 0,
           "the stage clocks advance: decode, resize (the resampler writes the slot, HWC "
           "too: no write stage)");
    p.layout = RING_CHW;
    rng_stream_init(&g, 5, 0, 3);
    rc = train->apply(NULL, &p, jpg, len, &g, &ctx, b, &out, &why, &err);
    p.layout = RING_HWC;
    rng_stream_init(&g, 5, 0, 3);
    rc |= train->apply(NULL, &p, jpg, len, &g, &ctx, a, &out, &why, &err);
    for (int i = 0; i < 64 * 64 && rc == 0; i++)
        for (int ch = 0; ch < 3; ch++)
            transposed &= b[ch * 64 * 64 + i] == a[i * 3 + ch];
    tap_ok(rc == 0 && transposed, "CHW is HWC transposed");
    rc = eval->apply(NULL, &p, jpg, len, &g, &ctx, a, &out, &why, &err);
    TAP_IS_INT(rc, 0, "eval applies");
    why = BAD_READ;
    rc = train->apply(NULL, &p, jpg, 0, &g, &ctx, a, &out, &why, &err);
    tap_ok(rc < 0 && why == BAD_DECODE, "empty record: bad, decode (%s)", err.msg);
    why = BAD_READ;
    rc = train->apply(NULL, &p, jpg, len / 2, &g, &ctx, a, &out, &why, &err);
    tap_ok(rc < 0 && why == BAD_DECODE, "truncated: bad, decode (%s)", err.msg);
    p.pixel_cap = 300 * 200 - 1;
    why = BAD_READ;
    rc = eval->apply(NULL, &p, jpg, len, &g, &ctx, a, &out, &why, &err);
    tap_ok(rc < 0 && why == BAD_TOO_LARGE, "over the pixel cap: bad, too_large (%s)", err.msg);
    xform_ctx_clear(&ctx);
    xform_ctx_clear(NULL);
    free(jpg);
}

/* The RFPX record of a JPEG's pixels decoded at full scale (the worker's
 * decoder, whole image), or NULL. */
static uint8_t *pixels_of(const uint8_t *jpg, size_t len, size_t *rec_len)
{
    struct jpg_dec *d = jpg_new();
    struct jpg_limits lim = { 0 };
    struct jpg_header hdr;
    struct jpg_roi roi;
    struct rf_err err;
    uint32_t w, h;
    uint8_t *rec = NULL;

    if (!d || jpg_open(d, jpg, len, &lim, &hdr, &err) < 0 || jpg_start(d, 8, &w, &h, &err) < 0 ||
        jpg_read(d, 0, w, 0, h, &roi, &err) < 0 || roi.x0 != 0 || roi.y0 != 0 || roi.w < w ||
        roi.h != h || !(*rec_len = px_record_size(w, h)) || !(rec = malloc(*rec_len)))
        goto out;
    px_write_header(rec, w, h);
    for (uint32_t y = 0; y < h; y++)
        memcpy(rec + PX_HEADER_SIZE + (size_t)y * w * 3, roi.pix + y * roi.stride, (size_t)w * 3);
out:
    jpg_free(d);
    return rec;
}

static void pixel_records(void)
{
    static const uint32_t sizes[][2] = {
        { 300, 200 }, { 200, 300 }, { 64, 64 }, { 17, 31 }, { 1, 1 }, { 3, 500 },
        { 500, 3 }, { 641, 479 }, { 73, 1024 }, { 40, 30 },
    };
    const struct xform_def *train = xform_get((uint32_t)xform_find("train"));
    const struct xform_def *eval = xform_get((uint32_t)xform_find("eval"));
    struct wire_xform p = { .size = 56, .layout = RING_HWC, .scale_lo = 0.08, .scale_hi = 1,
                            .ratio_lo = 0.75, .ratio_hi = 4.0 / 3, .flip = 0.5, .crop = 0.875,
                            .pixel_cap = 1 << 20 };
    struct xform_out out = { .sample_bytes = 3 * 56 * 56 };
    struct xform_ctx jctx = { .force_scale = 8 }, pctx = { 0 };
    static uint8_t a[3 * 56 * 56], b[3 * 56 * 56];
    struct rng_stream g;
    struct rf_err err;
    enum wire_bad why;
    int same = 1, runs = 0, rc;
    uint64_t decode_ns;

    for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t jlen, plen;
        uint8_t *jpg = photo(sizes[s][0], sizes[s][1], &jlen);
        uint8_t *pix = jpg ? pixels_of(jpg, jlen, &plen) : NULL;

        if (!pix) {
            tap_diag("%ux%u: no JPEG or no pixels", sizes[s][0], sizes[s][1]);
            same = 0;
            free(jpg);
            continue;
        }
        for (unsigned k = 0; k < 2 * 8 + 2; k++) {
            const struct xform_def *xf = k < 16 ? train : eval;
            struct rng_stream g2;
            int ra, rb;

            p.layout = k % 2 ? RING_CHW : RING_HWC;
            rng_stream_init(&g, 11, s, k / 2);
            g2 = g;
            ra = xf->apply(NULL, &p, jpg, jlen, &g, &jctx, a, &out, &why, &err);
            rb = xf->apply(NULL, &p, pix, plen, &g2, &pctx, b, &out, &why, &err);
            runs++;
            if (ra != 0 || rb != 0 || jctx.last_scale != 8 || memcmp(a, b, sizeof(a)) != 0 ||
                g.block != g2.block || g.used != g2.used) {
                if (same)
                    tap_diag("%ux%u %s %s index %u: rc %d %d (%s)", sizes[s][0], sizes[s][1],
                             xf->name, p.layout == RING_CHW ? "chw" : "hwc", k / 2, ra, rb,
                             err.msg);
                same = 0;
            }
        }
        free(pix);
        free(jpg);
    }
    tap_ok(same, "RFPX of a JPEG's pixels: %d train and eval outputs byte-identical to the "
                 "JPEG's at scale 8/8, the same draws taken", runs);
    tap_ok(pctx.decode_ns == 0 && pctx.resize_ns > 0 && pctx.last_scale == 8,
           "an RFPX record's time is resize (no decode)");

    /* bad records */
    {
        size_t plen = px_record_size(40, 30);
        uint8_t *pix = calloc(1, plen + 1);
        static const struct {
            const char *what;
            long len;          /* bytes given: 0 the record's, -1 one more */
            int at;            /* header byte changed, -1 none */
            uint8_t byte;
            const char *msg;
        } bad[] = {
            { "short: a header only", PX_HEADER_SIZE, -1, 0, "is 16 bytes, not 3616" },
            { "short: 8 bytes", 8, -1, 0, "not an RFPX pixel record (8 bytes)" },
            { "short: a row missing", 3616 - 120, -1, 0, "is 3496 bytes, not 3616" },
            { "one byte long", -1, -1, 0, "is 3617 bytes, not 3616" },
            { "bad version", 0, 4, 2, "RFPX version 2" },
            { "4 channels", 0, 5, 4, "4 channels" },
            { "reserved byte set", 0, 7, 1, "reserved" },
            { "width 0", 0, 8, 0, "RFPX 0x30: each side must be" },
            { "a side over 65535", 0, 14, 1, "RFPX 40x65566: each side must be" },
            { "a wide side (65320), short body", 0, 9, 0xff, "RFPX 65320x30 is 3616" },
            { "bad magic (so a JPEG, a bad one)", 0, 0, 'X', "not a JPEG" },
        };

        for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            size_t len = bad[i].len < 0 ? plen + 1 : bad[i].len ? (size_t)bad[i].len : plen;

            memset(pix, 0, plen + 1);
            px_write_header(pix, 40, 30);
            if (bad[i].at >= 0)
                pix[bad[i].at] = bad[i].byte;
            why = BAD_READ;
            err.msg[0] = 0;
            rc = (i % 2 ? train : eval)->apply(NULL, &p, pix, len, &g, &pctx, a, &out, &why,
                                               &err);
            tap_ok(rc < 0 && why == BAD_DECODE && strstr(err.msg, bad[i].msg),
                   "RFPX %s: bad, decode (%s)", bad[i].what, err.msg);
        }
        memset(pix, 0, plen);
        px_write_header(pix, 40, 30);
        p.pixel_cap = 40 * 30 - 1;
        why = BAD_READ;
        decode_ns = pctx.decode_ns;
        rc = train->apply(NULL, &p, pix, plen, &g, &pctx, a, &out, &why, &err);
        tap_ok(rc < 0 && why == BAD_TOO_LARGE && strstr(err.msg, "over the pixel cap"),
               "RFPX over the pixel cap: bad, too_large (%s)", err.msg);
        p.pixel_cap = 1 << 20;
        {
            size_t blen = px_record_size(2000, 1500);
            uint8_t *big = calloc(1, blen);

            px_write_header(big, 2000, 1500);
            why = BAD_READ;
            rc = eval->apply(NULL, &p, big, blen, &g, &pctx, a, &out, &why, &err);
            tap_ok(rc < 0 && why == BAD_TOO_LARGE && strstr(err.msg, "2000x1500"),
                   "a valid 2000x1500 RFPX over a 2^20 pixel cap: bad, too_large (%s)",
                   err.msg);
            free(big);
        }
        p.pixel_cap = 40 * 30;
        rc = eval->apply(NULL, &p, pix, plen, &g, &pctx, a, &out, &why, &err);
        TAP_IS_INT(rc, 0, "RFPX at the pixel cap applies");
        tap_ok(pctx.decode_ns == decode_ns, "and never counts decode time");
        free(pix);
    }
    xform_ctx_clear(&jctx);
    xform_ctx_clear(&pctx);
}

int main(void)
{
    against_port();
    fallback_cases();
    distribution();
    eval_cases();
    apply_checks();
    pixel_records();
    return tap_done();
}
