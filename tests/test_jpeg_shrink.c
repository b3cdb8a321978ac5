/*
 * test_jpeg_shrink.c - ringfeed-pack --max-side's resampler and re-encoder
 * (tools/jpeg_shrink.c): output sizes and their rounding; the streaming
 * box filter against a brute-force area average over every source pixel
 * (exactly equal, many sizes and channel counts); then whole JPEGs: sizes,
 * components and sampling of what is written, a DRI marker whose interval
 * is jpeg_restart_interval() of its MCUs a row (so it divides them), pixels
 * close to the box average of the decoded source, progressive and CMYK
 * inputs, and corrupt
 * or truncated data, and a progressive file of 190 scans, refused as
 * ringfeedd's decoder refuses them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "jpeg_make.h"
#include "jpeg_restart.h"
#include "jpeg_shrink.h"
#include "tap.h"

static void check_dims(void)
{
    static const struct {
        uint32_t w, h, max, dw, dh;
        int shrink;
    } cases[] = {
        {2560, 1600, 256, 256, 160, 1},
        {1600, 2560, 256, 160, 256, 1},
        {1920, 1280, 512, 512, 341, 1},   /* 341.33 */
        {1680, 1050, 512, 512, 320, 1},
        {512, 3, 256, 256, 2, 1},         /* 1.5 rounds half up */
        {1000, 3, 256, 256, 1, 1},        /* 0.768 */
        {65000, 1, 16, 16, 1, 1},         /* 0.0002: at least 1 */
        {300, 300, 256, 256, 256, 1},
        {257, 100, 256, 256, 100, 1},     /* 99.6 */
        {256, 256, 256, 256, 256, 0},     /* at the limit: as it is */
        {100, 256, 256, 100, 256, 0},
        {17, 9, 16, 16, 8, 1},            /* 8.47 */
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint32_t dw = 0, dh = 0;
        int r = shrink_dims(cases[i].w, cases[i].h, cases[i].max, &dw, &dh);

        if (!tap_ok(r == cases[i].shrink && dw == cases[i].dw && dh == cases[i].dh,
                    "shrink_dims %ux%u under %u -> %ux%u", cases[i].w, cases[i].h,
                    cases[i].max, cases[i].dw, cases[i].dh))
            tap_diag("  got %d, %ux%u", r, dw, dh);
    }
}

/* The overlap of source cell i (spanning [i * d, (i + 1) * d)) and output
 * cell x (spanning [x * s, (x + 1) * s)), in those units. */
static uint64_t overlap(uint64_t i, uint64_t x, uint64_t s, uint64_t d)
{
    uint64_t lo = i * d > x * s ? i * d : x * s;
    uint64_t hi = (i + 1) * d < (x + 1) * s ? (i + 1) * d : (x + 1) * s;

    return hi > lo ? hi - lo : 0;
}

static uint32_t lcg(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return *state >> 24;
}

/* One size: the streamed result against the brute-force average. */
static void check_box_case(uint32_t sw, uint32_t sh, uint32_t dw, uint32_t dh,
                           uint32_t ch, int constant)
{
    struct shrink_box b;
    uint8_t *src = malloc((size_t)sw * sh * ch);
    uint8_t *got = calloc((size_t)dw * dh, ch);
    uint32_t seed = sw * 31 + sh * 7 + ch, rows = 0, extra = 0;
    size_t bad = 0;
    int r;

    for (size_t k = 0; k < (size_t)sw * sh * ch; k++)
        src[k] = constant ? 77 : (uint8_t)lcg(&seed);
    r = shrink_box_init(&b, sw, sh, dw, dh, ch);
    TAP_IS_INT(r, 0, "box init");
    for (uint32_t y = 0; r == 0 && y < sh; y++) {
        const uint8_t *o = shrink_box_push(&b, src + (size_t)y * sw * ch);

        if (o && rows < dh)
            memcpy(got + (size_t)rows * dw * ch, o, (size_t)dw * ch);
        rows += o != NULL;
        if (y == sh - 1 && !o)
            extra++;
    }
    if (r == 0 && shrink_box_push(&b, src))
        extra++;
    for (uint32_t y = 0; y < dh; y++)
        for (uint32_t x = 0; x < dw; x++)
            for (uint32_t c = 0; c < ch; c++) {
                uint64_t sum = 0, total = (uint64_t)sw * sh, want;

                for (uint32_t j = 0; j < sh; j++) {
                    uint64_t wy = overlap(j, y, sh, dh);

                    if (!wy)
                        continue;
                    for (uint32_t i = 0; i < sw; i++)
                        sum += wy * overlap(i, x, sw, dw) *
                               src[((size_t)j * sw + i) * ch + c];
                }
                want = (sum + total / 2) / total;
                bad += got[((size_t)y * dw + x) * ch + c] != want;
            }
    if (!tap_ok(rows == dh && extra == 0 && bad == 0,
                "box %ux%u -> %ux%u, %u channel%s%s: every output row once, "
                "equal to the area average", sw, sh, dw, dh, ch, ch == 1 ? "" : "s",
                constant ? ", constant" : ""))
        tap_diag("  %u rows (want %u), %u misplaced ends, %zu samples differ",
                 rows, dh, extra, bad);
    shrink_box_free(&b);
    shrink_box_free(&b); /* twice is fine: it zeroes */
    free(src);
    free(got);
}

static void check_box(void)
{
    struct shrink_box b;

    check_box_case(37, 23, 5, 7, 3, 0);
    check_box_case(37, 23, 37, 23, 3, 0);  /* identity */
    check_box_case(64, 48, 32, 24, 3, 0);  /* exactly 2x */
    check_box_case(100, 7, 16, 1, 1, 0);   /* one output row */
    check_box_case(7, 100, 1, 16, 4, 0);   /* one output column */
    check_box_case(53, 41, 17, 13, 1, 0);
    check_box_case(50, 50, 49, 49, 3, 0);  /* barely smaller */
    check_box_case(90, 60, 13, 9, 3, 1);
    TAP_IS_INT(shrink_box_init(&b, 10, 10, 11, 10, 3), -EINVAL,
               "box init refuses growing");
    shrink_box_free(&b);
    TAP_IS_INT(shrink_box_init(&b, 10, 10, 0, 10, 3), -EINVAL,
               "box init refuses a zero size");
    shrink_box_free(&b);
    TAP_IS_INT(shrink_box_init(&b, 10, 10, 5, 5, 5), -EINVAL,
               "box init refuses 5 channels");
    shrink_box_free(&b);
}

/* ---- whole JPEGs ---------------------------------------------------- */

struct decoded {
    uint32_t w, h, comps;
    int h0, v0, progressive, adobe;
    J_COLOR_SPACE space;
    uint8_t *pix;      /* w * h * comps as libjpeg gives them */
};

struct test_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
};

static void test_error_exit(j_common_ptr ci)
{
    longjmp(((struct test_err *)ci->err)->jb, 1);
}

/* Decodes with plain libjpeg: gray stays gray, color comes out RGB or CMYK. */
static int decode(const uint8_t *buf, size_t len, struct decoded *o)
{
    struct jpeg_decompress_struct d;
    struct test_err e;

    memset(o, 0, sizeof(*o));
    d.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = test_error_exit;
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&d);
        free(o->pix);
        o->pix = NULL;
        return -1;
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, buf, (unsigned long)len);
    jpeg_read_header(&d, TRUE);
    o->space = d.jpeg_color_space;
    o->h0 = d.comp_info[0].h_samp_factor;
    o->v0 = d.comp_info[0].v_samp_factor;
    o->progressive = d.progressive_mode;
    o->adobe = d.saw_Adobe_marker;
    if (d.jpeg_color_space == JCS_YCbCr)
        d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    o->w = d.output_width;
    o->h = d.output_height;
    o->comps = (uint32_t)d.output_components;
    o->pix = jm_read_pixels(&d);
    if (!o->pix) {
        jpeg_destroy_decompress(&d);
        return -1;
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return 0;
}

/* The interval of the DRI marker before the first scan; 0 without one. */
static unsigned dri_interval(const uint8_t *b, size_t n)
{
    size_t i = 2;

    while (i + 5 < n && b[i] == 0xFF && b[i + 1] != 0xDA) {
        unsigned seg = (unsigned)b[i + 2] << 8 | b[i + 3];

        if (b[i + 1] == 0xDD)
            return (unsigned)b[i + 4] << 8 | b[i + 5];
        i += 2 + seg;
    }
    return 0;
}

/* Mean absolute difference of got against the box average of src. */
static double mad_against_box(const struct decoded *src, const struct decoded *got)
{
    struct shrink_box b;
    double sum = 0;

    if (shrink_box_init(&b, src->w, src->h, got->w, got->h, src->comps) < 0) {
        shrink_box_free(&b);
        return 1e9;
    }
    for (uint32_t y = 0, j = 0; y < src->h; y++) {
        const uint8_t *o = shrink_box_push(&b, src->pix + (size_t)y * src->w * src->comps);

        if (!o)
            continue;
        for (size_t k = 0; k < (size_t)got->w * got->comps; k++)
            sum += abs((int)o[k] - (int)got->pix[(size_t)j * got->w * got->comps + k]);
        j++;
    }
    shrink_box_free(&b);
    return sum / ((double)got->w * got->h * got->comps);
}

/* Smooth content: what a downscaled photograph is, so the re-encoding's
 * loss stays small (jm_pattern's 7-pixel checkerboard is pure detail). */
static void smooth(uint32_t x, uint32_t y, uint8_t *px, void *arg)
{
    (void)arg;
    px[0] = (uint8_t)(128 + 100 * ((x % 200) < 100 ? (x % 100) : 100 - (x % 100)) / 100);
    px[1] = (uint8_t)(40 + (y * 180) / 400);
    px[2] = (uint8_t)((x + 2 * y) / 6);
    px[3] = (uint8_t)(y / 4);
}

static void check_jpeg(struct shrinker *s, const char *what, const struct jm_opts *o,
                       uint32_t w, uint32_t h, uint32_t max_side, uint32_t want_w,
                       uint32_t want_h, uint32_t want_comps)
{
    size_t len = 0, out_len = 0;
    uint8_t *src = jm_encode(w, h, o, smooth, NULL, &len);
    const uint8_t *out = NULL;
    uint32_t ow = 0, oh = 0;
    char why[256] = "";
    struct decoded ds, dg;
    int r = shrinker_run(s, src, len, max_side, 95, &out, &out_len, &ow, &oh, why,
                         sizeof(why));

    if (!tap_ok(r == 0 && ow == want_w && oh == want_h,
                "%s %ux%u under %u: re-encoded at %ux%u", what, w, h, max_side, want_w,
                want_h))
        tap_diag("  got %d (%s), %ux%u", r, why, ow, oh);
    if (r != 0 || decode(out, out_len, &dg) < 0) {
        TAP_OK(0, "the re-encoded image decodes");
        free(src);
        return;
    }
    TAP_OK(dg.w == want_w && dg.h == want_h && dg.comps == want_comps &&
           dg.progressive == 0, "its header: the size, components, baseline");
    if (want_comps == 3)
        TAP_OK(dg.space == JCS_YCbCr && dg.h0 == 2 && dg.v0 == 2, "YCbCr 4:2:0");
    {
        unsigned mcus = jpeg_mcus_per_row(dg.w, dg.comps, (unsigned)dg.h0);
        unsigned ri = dri_interval(out, out_len);

        if (!tap_ok(ri != 0 && ri == jpeg_restart_interval(mcus) && mcus % ri == 0,
                    "a restart every %u MCUs, which divides its %u MCUs a row",
                    jpeg_restart_interval(mcus), mcus))
            tap_diag("  DRI %u", ri);
    }
    if (o->space != JM_CMYK && decode(src, len, &ds) == 0) {
        double mad = mad_against_box(&ds, &dg);

        /* quality 95 on smooth content: the loss is about a level */
        tap_ok(mad < 2.0, "pixels within 2 levels (mean) of the box average "
               "of the decoded source (%.2f)", mad);
        free(ds.pix);
    }
    free(dg.pix);
    free(src);
}

/* A progressive RGB JPEG of 1 + 3 * 63 = 190 scans (one per coefficient
 * and component), valid but over JPAIR_SCAN_CAP; *len bytes, malloc'd. */
static uint8_t *many_scans(uint32_t w, uint32_t h, unsigned long *len)
{
    static jpeg_scan_info scans[1 + 3 * 63];
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr em;
    unsigned char *out = NULL;
    uint8_t *row = malloc((size_t)w * 3);
    int n = 0;

    scans[n++] = (jpeg_scan_info){.comps_in_scan = 3, .component_index = {0, 1, 2}};
    for (int comp = 0; comp < 3; comp++)
        for (int k = 1; k < 64; k++)
            scans[n++] = (jpeg_scan_info){.comps_in_scan = 1, .component_index = {comp},
                                          .Ss = k, .Se = k};
    *len = 0;
    c.err = jpeg_std_error(&em);
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &out, len);
    c.image_width = w;
    c.image_height = h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    c.scan_info = scans;
    c.num_scans = n;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < h) {
        JSAMPROW r = row;

        for (uint32_t x = 0; x < w; x++) {
            uint8_t px[4];  /* smooth fills 4 */

            smooth(x, c.next_scanline, px, NULL);
            memcpy(row + 3 * x, px, 3);
        }
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    return out;
}

static void check_refusals(struct shrinker *s)
{
    struct jm_opts o = {.space = JM_RGB, .quality = 90};
    size_t len = 0, out_len = 0;
    uint8_t *src = jm_encode(300, 200, &o, jm_pattern, NULL, &len);
    const uint8_t *out = NULL;
    uint32_t ow = 0, oh = 0;
    char why[256] = "";
    uint8_t *cut;
    int r;

    cut = malloc(len);
    memcpy(cut, src, len);
    r = shrinker_run(s, cut, len / 2, 64, 90, &out, &out_len, &ow, &oh, why, sizeof(why));
    if (!tap_ok(r == -EBADMSG && strstr(why, "does not decode"),
                "a truncated JPEG: -EBADMSG, does not decode (libjpeg's warning)"))
        tap_diag("  got %d (%s)", r, why);
    memcpy(cut, src, len);
    for (size_t k = len / 2; k < len / 2 + 64; k++)
        cut[k] = 0xFF;
    r = shrinker_run(s, cut, len, 64, 90, &out, &out_len, &ow, &oh, why, sizeof(why));
    if (!tap_ok(r == -EBADMSG, "garbage in the scan data: -EBADMSG"))
        tap_diag("  got %d (%s)", r, why);
    r = shrinker_run(s, cut, 40, 64, 90, &out, &out_len, &ow, &oh, why, sizeof(why));
    TAP_IS_INT(r, -EBADMSG, "only the start of a header: -EBADMSG");
    {
        unsigned long n = 0;
        uint8_t *many = many_scans(200, 150, &n);
        struct decoded dm;

        TAP_OK(decode(many, n, &dm) == 0 && dm.progressive,
               "a 190-scan progressive JPEG decodes with plain libjpeg");
        free(dm.pix);
        r = shrinker_run(s, many, n, 64, 90, &out, &out_len, &ow, &oh, why, sizeof(why));
        if (!tap_ok(r == -EBADMSG && strstr(why, "more than 100 scans"),
                    "but is refused by the shrinker, as by ringfeedd: more than "
                    "100 scans"))
            tap_diag("  got %d (%s)", r, why);
        free(many);
    }
    r = shrinker_run(s, src, len, 8, 90, &out, &out_len, &ow, &oh, why, sizeof(why));
    TAP_IS_INT(r, -EINVAL, "max side 8: -EINVAL");
    r = shrinker_run(s, src, len, 64, 0, &out, &out_len, &ow, &oh, why, sizeof(why));
    TAP_IS_INT(r, -EINVAL, "quality 0: -EINVAL");
    r = shrinker_run(s, src, len, 64, 101, &out, &out_len, &ow, &oh, why, sizeof(why));
    TAP_IS_INT(r, -EINVAL, "quality 101: -EINVAL");
    /* after failures the same shrinker still works */
    r = shrinker_run(s, src, len, 64, 90, &out, &out_len, &ow, &oh, why, sizeof(why));
    TAP_OK(r == 0 && ow == 64 && oh == 43, "the shrinker works again after failures");
    free(cut);
    free(src);
}

int main(void)
{
    struct shrinker *s = shrinker_new();
    struct jm_opts rgb444 = {.space = JM_RGB, .h_samp = 1, .v_samp = 1, .quality = 95};
    struct jm_opts rgb420 = {.space = JM_RGB, .h_samp = 2, .v_samp = 2, .quality = 90};
    struct jm_opts prog = {.space = JM_RGB, .h_samp = 2, .v_samp = 2, .quality = 90,
                           .progressive = true};
    struct jm_opts gray = {.space = JM_GRAY, .quality = 95};
    struct jm_opts cmyk = {.space = JM_CMYK, .quality = 95};
    struct jm_opts restart = {.space = JM_RGB, .h_samp = 2, .v_samp = 1, .quality = 90,
                              .restart = 1};

    check_dims();
    check_box();
    if (!s)
        tap_bail("shrinker_new: out of memory");
    check_jpeg(s, "RGB 4:4:4", &rgb444, 600, 400, 64, 64, 43, 3);
    check_jpeg(s, "RGB 4:2:0", &rgb420, 400, 600, 100, 67, 100, 3);
    check_jpeg(s, "progressive", &prog, 640, 480, 256, 256, 192, 3);
    check_jpeg(s, "gray", &gray, 333, 222, 100, 100, 67, 1);
    check_jpeg(s, "CMYK", &cmyk, 320, 240, 64, 64, 48, 3);
    check_jpeg(s, "4:2:2 with restarts", &restart, 500, 500, 499, 499, 499, 3);
    check_jpeg(s, "at the limit", &rgb420, 200, 100, 200, 200, 100, 3);
    check_refusals(s);
    shrinker_free(s);
    shrinker_free(NULL);
    return tap_done();
}
