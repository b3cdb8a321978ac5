/*
 * test_jpeg_restart.c - ringfeed-pack's lossless re-encoding with restart
 * markers (tools/jpeg_restart.c): the interval rule and the MCUs of a row
 * against tables; then whole JPEGs made by tests/jpeg_make.c (4:2:0, 4:2:2,
 * 4:4:4, 4:1:1, grayscale, progressive, arithmetic-coded, already with
 * restart markers, odd sizes from 1x1 up, rows of a prime number of MCUs):
 * the output decodes with plain libjpeg to exactly the source's pixels at
 * every DCT scale, keeps its quantization tables and sampling, is one
 * baseline scan (SOF0) with a DRI of jpeg_restart_interval(MCUs per row)
 * and exactly intervals - 1 restart markers numbered 0..7 in turn, and
 * carries no APPn but JFIF and no COM marker; CMYK, YCCK and RGB sources,
 * corrupt, truncated and empty ones, a 190-scan progressive file and one
 * whose scans leave coefficient bits unsent come back "store as it is",
 * each with its reason, and the restarter works again after them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "jpeg_make.h"
#include "jpeg_restart.h"
#include "tap.h"

static void check_rule(void)
{
    static const unsigned intervals[][2] = {
        {0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 1}, {6, 3}, {7, 1},
        {8, 4}, {9, 3}, {10, 2}, {12, 4}, {14, 2}, {15, 3}, {29, 1}, {30, 3},
        {40, 4}, {42, 3}, {49, 1}, {65535, 3}, {65521, 1},
    };
    static const struct {
        uint32_t width;
        unsigned comps, max_h, want;
    } rows[] = {
        {1, 3, 2, 1}, {16, 3, 2, 1}, {17, 3, 2, 2}, {460, 3, 2, 29},
        {464, 3, 2, 29}, {465, 3, 2, 30}, {333, 3, 1, 42}, {200, 3, 4, 7},
        {1, 1, 1, 1}, {8, 1, 1, 1}, {9, 1, 1, 2}, {229, 1, 1, 29},
        {229, 1, 2, 29},  /* one component: a block an MCU, whatever h */
        {65535, 3, 2, 4096}, {65535, 1, 1, 8192},
    };

    for (size_t i = 0; i < sizeof(intervals) / sizeof(intervals[0]); i++) {
        unsigned got = jpeg_restart_interval(intervals[i][0]);

        if (!tap_ok(got == intervals[i][1], "jpeg_restart_interval(%u) = %u",
                    intervals[i][0], intervals[i][1]))
            tap_diag("  got %u", got);
    }
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        unsigned got = jpeg_mcus_per_row(rows[i].width, rows[i].comps, rows[i].max_h);

        if (!tap_ok(got == rows[i].want, "jpeg_mcus_per_row(%u, %u components, h %u) = %u",
                    rows[i].width, rows[i].comps, rows[i].max_h, rows[i].want))
            tap_diag("  got %u", got);
    }
    for (unsigned m = 1; m <= 1000; m++) {
        unsigned r = jpeg_restart_interval(m);
        int largest = r >= 1 && r <= 4 && m % r == 0;

        for (unsigned k = r + 1; k <= 4; k++)
            largest &= m % k != 0;
        if (!largest) {
            tap_ok(0, "jpeg_restart_interval(%u) = %u: not the largest divisor <= 4", m, r);
            return;
        }
    }
    TAP_OK(1, "jpeg_restart_interval(1..1000): always the largest divisor <= 4");
    for (int o = 0; o < RESTART_OUTCOME_COUNT; o++)
        if (!restart_outcome_name(o))
            tap_ok(0, "outcome %d has a name", o);
    TAP_OK(restart_outcome_name(-1) == NULL &&
           restart_outcome_name(RESTART_OUTCOME_COUNT) == NULL,
           "every outcome has a name, and none outside them");
}

/* ---- decoding with plain libjpeg ------------------------------------ */

struct image {
    uint32_t w, h, comps;
    J_COLOR_SPACE space;
    int progressive, arith;
    int ncomps, hs[4], vs[4];
    uint16_t quant[4][DCTSIZE2];  /* each component's table */
    unsigned mcus_per_row, restart_interval;
    uint8_t *pix;
};

struct test_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
};

static void test_error_exit(j_common_ptr ci)
{
    longjmp(((struct test_err *)ci->err)->jb, 1);
}

/* Warnings fail too: the sources here are clean. */
static void test_emit(j_common_ptr ci, int level)
{
    if (level < 0)
        longjmp(((struct test_err *)ci->err)->jb, 1);
}

/* libjpeg's block smoothing (on by default), for one check below */
static boolean smoothing = TRUE;

/* Decodes at 1/denom scale: gray stays gray, YCbCr comes out RGB. */
static int decode(const uint8_t *buf, size_t len, unsigned denom, struct image *o)
{
    struct jpeg_decompress_struct d;
    struct test_err e;

    memset(o, 0, sizeof(*o));
    d.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = test_error_exit;
    e.pub.emit_message = test_emit;
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
    o->progressive = d.progressive_mode;
    o->arith = d.arith_code;
    o->ncomps = d.num_components;
    for (int c = 0; c < d.num_components && c < 4; c++) {
        const JQUANT_TBL *q = d.quant_tbl_ptrs[d.comp_info[c].quant_tbl_no];

        o->hs[c] = d.comp_info[c].h_samp_factor;
        o->vs[c] = d.comp_info[c].v_samp_factor;
        for (int k = 0; q && k < DCTSIZE2; k++)
            o->quant[c][k] = q->quantval[k];
    }
    o->restart_interval = d.restart_interval;
    d.scale_num = 1;
    d.scale_denom = denom;
    d.dct_method = JDCT_ISLOW;
    d.do_block_smoothing = smoothing;
    jpeg_start_decompress(&d);
    o->mcus_per_row = d.MCUs_per_row;  /* a single-scan file's, set now */
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

/* ---- the output's markers, read byte by byte ------------------------ */

struct layout {
    int ok;                 /* SOI first, every segment within the buffer */
    int nsof, sof;          /* SOF markers seen, the last one's code */
    int nsos, ndri, jfif, other_app, com;
    unsigned interval;      /* the DRI's */
    unsigned rst;           /* restart markers in the entropy data */
    int rst_in_order;       /* numbered 0..7, 0..7, ... */
    int eoi_last;           /* EOI is the buffer's last two bytes */
};

static void read_layout(const uint8_t *b, size_t n, struct layout *l)
{
    size_t i = 2;

    memset(l, 0, sizeof(*l));
    l->rst_in_order = 1;
    if (n < 4 || b[0] != 0xFF || b[1] != 0xD8)
        return;
    while (i + 1 < n) {
        unsigned m, seg;

        if (b[i] != 0xFF)
            return;
        while (i + 1 < n && b[i + 1] == 0xFF)
            i++;
        m = b[i + 1];
        if (m == 0xD9) {
            l->eoi_last = i + 2 == n;
            l->ok = 1;
            return;
        }
        if (i + 3 >= n)
            return;
        seg = (unsigned)b[i + 2] << 8 | b[i + 3];
        if (i + 2 + seg > n)
            return;
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            l->nsof++;
            l->sof = (int)m;
        } else if (m == 0xDD && seg == 4) {
            l->ndri++;
            l->interval = (unsigned)b[i + 4] << 8 | b[i + 5];
        } else if (m == 0xE0 && seg >= 7 && memcmp(b + i + 4, "JFIF", 5) == 0) {
            l->jfif++;
        } else if (m >= 0xE0 && m <= 0xEF) {
            l->other_app++;
        } else if (m == 0xFE) {
            l->com++;
        }
        i += 2 + seg;
        if (m != 0xDA)
            continue;
        l->nsos++;
        while (i + 1 < n) {   /* entropy data: up to the next marker */
            if (b[i] != 0xFF) {
                i++;
            } else if (b[i + 1] == 0x00) {
                i += 2;       /* a stuffed 0xFF */
            } else if (b[i + 1] >= 0xD0 && b[i + 1] <= 0xD7) {
                l->rst_in_order &= (unsigned)(b[i + 1] - 0xD0) == l->rst % 8;
                l->rst++;
                i += 2;
            } else {
                break;
            }
        }
    }
}

/* ---- whole JPEGs ---------------------------------------------------- */

static void check_same_pixels(const char *what, const uint8_t *a, size_t alen,
                              const uint8_t *b, size_t blen)
{
    static const unsigned denoms[] = {1, 2, 4, 8};
    int same = 1;

    for (size_t k = 0; k < sizeof(denoms) / sizeof(denoms[0]); k++) {
        struct image x, y;
        int ok = decode(a, alen, denoms[k], &x) == 0 && decode(b, blen, denoms[k], &y) == 0;

        ok = ok && x.w == y.w && x.h == y.h && x.comps == y.comps &&
             memcmp(x.pix, y.pix, (size_t)x.w * x.h * x.comps) == 0;
        if (!ok)
            tap_diag("  %s: scale 1/%u differs", what, denoms[k]);
        same &= ok;
        free(x.pix);
        free(y.pix);
    }
    tap_ok(same, "%s: the same pixels as the source, at scales 1, 1/2, 1/4, 1/8", what);
}

/*
 * One source: re-encodes it and checks all of the above.  Returns the
 * interval written (0 when it failed).
 */
static unsigned check_one(struct restarter *r, const char *what, const uint8_t *src,
                          size_t len)
{
    const uint8_t *out = NULL;
    size_t out_len = 0;
    unsigned interval = 0, mcus, rows, max_h = 1, max_v = 1, want_rst;
    struct image si, oi;
    struct layout l;
    char why[512] = "";
    uint8_t *copy;
    int o = restart_run(r, src, len, &out, &out_len, &interval, why, sizeof(why));

    if (!tap_ok(o == RESTART_REENCODED, "%s: re-encoded", what)) {
        tap_diag("  got %d (%s)", o, why);
        return 0;
    }
    copy = malloc(out_len);  /* the restarter's buffer is reused */
    memcpy(copy, out, out_len);
    if (decode(src, len, 1, &si) < 0 || decode(copy, out_len, 1, &oi) < 0) {
        TAP_OK(0, "both decode");
        free(copy);
        return 0;
    }
    for (int c = 0; c < si.ncomps; c++) {
        max_h = (unsigned)si.hs[c] > max_h ? (unsigned)si.hs[c] : max_h;
        max_v = (unsigned)si.vs[c] > max_v ? (unsigned)si.vs[c] : max_v;
    }
    mcus = jpeg_mcus_per_row(si.w, (unsigned)si.ncomps, max_h);
    rows = si.ncomps == 1 ? (si.h + 7) / 8 : (si.h + 8 * max_v - 1) / (8 * max_v);
    if (!tap_ok(interval == jpeg_restart_interval(mcus) && oi.mcus_per_row == mcus &&
                oi.restart_interval == interval && mcus % interval == 0,
                "%s: %u MCUs a row (as libjpeg counts them), a restart every %u", what,
                mcus, jpeg_restart_interval(mcus)))
        tap_diag("  interval %u, libjpeg: %u MCUs a row, DRI %u", interval, oi.mcus_per_row,
                 oi.restart_interval);
    TAP_OK(oi.space == si.space && oi.ncomps == si.ncomps &&
           memcmp(oi.hs, si.hs, sizeof(si.hs)) == 0 && memcmp(oi.vs, si.vs, sizeof(si.vs)) == 0 &&
           memcmp(oi.quant, si.quant, sizeof(si.quant)) == 0 && !oi.progressive && !oi.arith,
           "its colour space, sampling and quantization tables kept; Huffman, not progressive");
    read_layout(copy, out_len, &l);
    want_rst = mcus * rows / interval - 1;
    if (!tap_ok(l.ok && l.eoi_last && l.nsof == 1 && l.sof == 0xC0 && l.nsos == 1 && l.ndri == 1 &&
                l.interval == interval,
                "%s: one baseline scan (SOF0), one DRI of %u, EOI last", what, interval))
        tap_diag("  ok %d, eoi last %d, %d SOF (last %02x), %d SOS, %d DRI of %u", l.ok,
                 l.eoi_last, l.nsof, l.sof, l.nsos, l.ndri, l.interval);
    if (!tap_ok(l.rst == want_rst && l.rst_in_order,
                "%s: %u restart markers (%u MCUs / %u - 1), numbered 0..7 in turn", what,
                want_rst, mcus * rows, interval))
        tap_diag("  %u markers, in order %d", l.rst, l.rst_in_order);
    TAP_OK(l.jfif == 1 && l.other_app == 0 && l.com == 0,
           "a JFIF marker, no other APPn, no COM");
    free(si.pix);
    free(oi.pix);
    check_same_pixels(what, src, len, copy, out_len);
    free(copy);
    return interval;
}

static void check_made(struct restarter *r, const char *what, const struct jm_opts *o,
                       uint32_t w, uint32_t h)
{
    size_t len = 0;
    uint8_t *src = jm_encode(w, h, o, jm_pattern, NULL, &len);
    char name[128];

    snprintf(name, sizeof(name), "%s %ux%u", what, w, h);
    if (!src) {
        TAP_OK(0, "jm_encode");
        return;
    }
    check_one(r, name, src, len);
    free(src);
}

/* A COM marker and an EXIF-like APP1 inserted after the SOI of src. */
static uint8_t *with_markers(const uint8_t *src, size_t len, size_t *out_len)
{
    static const uint8_t extra[] = {
        0xFF, 0xFE, 0x00, 0x07, 'h', 'e', 'l', 'l', 'o',
        0xFF, 0xE1, 0x00, 0x10, 'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8,
    };
    uint8_t *b = malloc(len + sizeof(extra));

    memcpy(b, src, 2);
    memcpy(b + 2, extra, sizeof(extra));
    memcpy(b + 2 + sizeof(extra), src + 2, len - 2);
    *out_len = len + sizeof(extra);
    return b;
}

static void check_sources(struct restarter *r)
{
    struct jm_opts s420 = {.space = JM_RGB, .h_samp = 2, .v_samp = 2, .quality = 90};
    struct jm_opts s422 = {.space = JM_RGB, .h_samp = 2, .v_samp = 1, .quality = 85};
    struct jm_opts s444 = {.space = JM_RGB, .h_samp = 1, .v_samp = 1, .quality = 95};
    struct jm_opts s411 = {.space = JM_RGB, .h_samp = 4, .v_samp = 1, .quality = 90};
    struct jm_opts gray = {.space = JM_GRAY, .quality = 92};
    struct jm_opts prog = {.space = JM_RGB, .h_samp = 2, .v_samp = 2, .quality = 90,
                           .progressive = true};
    struct jm_opts gprog = {.space = JM_GRAY, .quality = 80, .progressive = true};
    struct jm_opts rst = {.space = JM_RGB, .h_samp = 2, .v_samp = 2, .quality = 90,
                          .restart = 1};
    struct jm_opts arith = {.space = JM_RGB, .h_samp = 2, .v_samp = 2, .quality = 90,
                            .arith = true};
    struct jm_opts aprog = {.space = JM_RGB, .h_samp = 2, .v_samp = 1, .quality = 75,
                            .arith = true, .progressive = true};
    struct jm_opts low = {.space = JM_RGB, .h_samp = 2, .v_samp = 2, .quality = 20};

    check_made(r, "4:2:0", &s420, 640, 480);      /* 40 MCUs: every 4 */
    check_made(r, "4:2:2", &s422, 500, 375);      /* 32: 4 */
    check_made(r, "4:4:4", &s444, 333, 250);      /* 42: 3 */
    check_made(r, "4:1:1", &s411, 200, 100);      /* 7 (32-pixel MCUs): 1 */
    check_made(r, "gray", &gray, 333, 250);       /* 42: 3 */
    check_made(r, "gray, 29 MCUs", &gray, 229, 40);
    check_made(r, "4:2:0, 29 MCUs", &s420, 460, 100);
    check_made(r, "4:2:0, 30 MCUs", &s420, 480, 64);
    check_made(r, "4:2:0, 2 MCUs", &s420, 17, 9);
    check_made(r, "4:4:4, 3 MCUs", &s444, 17, 9);
    check_made(r, "4:4:4, 5 MCUs", &s444, 40, 40);
    check_made(r, "4:2:0, 6 MCUs", &s420, 96, 32);
    check_made(r, "4:2:0, 8 MCUs", &s420, 128, 128);
    check_made(r, "4:4:4, 12 MCUs", &s444, 96, 8);
    check_made(r, "4:2:0", &s420, 1, 1);
    check_made(r, "gray", &gray, 1, 1);
    check_made(r, "4:2:0 tall", &s420, 64, 1000);
    check_made(r, "4:2:0 quality 20", &low, 300, 200);
    check_made(r, "progressive 4:2:0", &prog, 333, 250);
    check_made(r, "progressive gray", &gprog, 200, 150);
    check_made(r, "restart every MCU row", &rst, 512, 256);
    check_made(r, "restart every MCU row, odd", &rst, 301, 203);
    check_made(r, "arithmetic", &arith, 320, 240);
    check_made(r, "arithmetic progressive 4:2:2", &aprog, 250, 170);

    /* markers dropped; and the output re-encoded again is the same */
    {
        size_t len = 0, mlen = 0, out_len = 0, out2_len = 0;
        uint8_t *src = jm_encode(300, 200, &s420, jm_pattern, NULL, &len);
        uint8_t *marked = with_markers(src, len, &mlen);
        const uint8_t *out = NULL;
        uint8_t *first;
        unsigned interval = 0;
        char why[256];
        struct layout l;

        read_layout(marked, mlen, &l);
        TAP_OK(l.ok && l.com == 1 && l.other_app == 1, "a source with a COM and an APP1 marker");
        check_one(r, "with COM and APP1", marked, mlen);
        restart_run(r, marked, mlen, &out, &out_len, &interval, why, sizeof(why));
        first = malloc(out_len);
        memcpy(first, out, out_len);
        TAP_IS_INT(restart_run(r, first, out_len, &out, &out2_len, &interval, why, sizeof(why)),
                   RESTART_REENCODED, "its output re-encoded again");
        TAP_OK(out2_len == out_len && memcmp(out, first, out_len) == 0,
               "gives the same bytes");
        free(first);
        free(marked);
        free(src);
    }
}

/* ---- files stored as they are --------------------------------------- */

/* A progressive RGB JPEG with the given scans; *len bytes, malloc'd. */
static uint8_t *encode_scans(uint32_t w, uint32_t h, const jpeg_scan_info *scans, int n,
                             size_t *len)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr em;
    unsigned char *out = NULL;
    unsigned long outlen = 0;
    uint8_t *row = malloc((size_t)w * 3);

    c.err = jpeg_std_error(&em);
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &out, &outlen);
    c.image_width = w;
    c.image_height = h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    c.scan_info = scans;
    c.num_scans = n;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < h) {
        JSAMPROW rr = row;

        for (uint32_t x = 0; x < w; x++) {
            uint8_t px[4];

            jm_pattern(x, c.next_scanline, px, NULL);
            memcpy(row + 3 * x, px, 3);
        }
        jpeg_write_scanlines(&c, &rr, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    *len = outlen;
    return out;
}

static void check_kept(struct restarter *r, const char *what, const uint8_t *buf, size_t len,
                       int want, const char *needle)
{
    const uint8_t *out = NULL;
    size_t out_len = 0;
    unsigned interval = 7;
    char why[512] = "";
    int o = restart_run(r, buf, len, &out, &out_len, &interval, why, sizeof(why));

    if (!tap_ok(o == want && strstr(why, needle) && interval == 0,
                "%s: stored as it is (%s), the reason says \"%s\"", what,
                restart_outcome_name(want), needle))
        tap_diag("  got %d (%s), interval %u", o, why, interval);
}

static void check_refusals(struct restarter *r)
{
    struct jm_opts cmyk = {.space = JM_CMYK, .quality = 90};
    struct jm_opts ycck = {.space = JM_YCCK, .quality = 90};
    struct jm_opts rgb = {.space = JM_RGB_PLAIN, .quality = 90};
    struct jm_opts s420 = {.space = JM_RGB, .h_samp = 2, .v_samp = 2, .quality = 90};
    static jpeg_scan_info many[1 + 3 * 63], partial[4];
    size_t len = 0, src_len = 0;
    uint8_t *src, *cut;
    struct image im;
    int n = 0;

    src = jm_encode(120, 80, &cmyk, jm_pattern, NULL, &len);
    check_kept(r, "CMYK", src, len, RESTART_CMYK, "CMYK");
    free(src);
    src = jm_encode(120, 80, &ycck, jm_pattern, NULL, &len);
    check_kept(r, "YCCK", src, len, RESTART_YCCK, "YCCK");
    free(src);
    src = jm_encode(120, 80, &rgb, jm_pattern, NULL, &len);
    TAP_OK(decode(src, len, 1, &im) == 0 && im.space == JCS_RGB,
           "an RGB source (Adobe transform 0) decodes as RGB");
    free(im.pix);
    check_kept(r, "RGB", src, len, RESTART_RGB, "RGB");
    free(src);

    src = jm_encode(300, 200, &s420, jm_pattern, NULL, &src_len);
    len = src_len;
    cut = malloc(len);
    memcpy(cut, src, len);
    check_kept(r, "truncated to half", cut, len / 2, RESTART_UNDECODABLE,
               "does not decode: Premature end");
    check_kept(r, "without its EOI", cut, len - 2, RESTART_UNDECODABLE, "does not decode");
    for (size_t k = len / 2; k < len / 2 + 64; k++)
        cut[k] = 0xFF;
    check_kept(r, "garbage in the scan data", cut, len, RESTART_UNDECODABLE, "does not decode");
    memcpy(cut, src, len);
    for (size_t k = len / 3; k < len / 3 + 200; k++)
        cut[k] = (uint8_t)(k * 37);
    check_kept(r, "noise in the scan data", cut, len, RESTART_UNDECODABLE, "does not decode");
    check_kept(r, "only the start of a header", src, 40, RESTART_UNDECODABLE,
               "does not decode");
    check_kept(r, "nothing", src, 0, RESTART_UNDECODABLE, "does not decode");
    free(cut);

    /* 1 + 3 * 63 scans: valid, but over the cap ringfeedd applies */
    many[n++] = (jpeg_scan_info){.comps_in_scan = 3, .component_index = {0, 1, 2}};
    for (int comp = 0; comp < 3; comp++)
        for (int k = 1; k < 64; k++)
            many[n++] = (jpeg_scan_info){.comps_in_scan = 1, .component_index = {comp},
                                         .Ss = k, .Se = k};
    {
        uint8_t *m = encode_scans(100, 80, many, n, &len);

        TAP_OK(decode(m, len, 1, &im) == 0 && im.progressive,
               "a 190-scan progressive JPEG decodes with plain libjpeg");
        free(im.pix);
        check_kept(r, "190 scans", m, len, RESTART_UNDECODABLE, "more than 100 scans");
        free(m);
    }
    /* AC sent to bit 1 and never refined: valid, and libjpeg smooths it,
     * which it would not do for a baseline copy */
    partial[0] = (jpeg_scan_info){.comps_in_scan = 3, .component_index = {0, 1, 2}};
    for (int comp = 0; comp < 3; comp++)
        partial[1 + comp] = (jpeg_scan_info){.comps_in_scan = 1, .component_index = {comp},
                                             .Ss = 1, .Se = 63, .Al = 1};
    {
        uint8_t *p = encode_scans(100, 80, partial, 4, &len);
        struct image flat = {0};
        int ok = decode(p, len, 1, &im) == 0 && im.progressive;

        smoothing = FALSE;
        ok = ok && decode(p, len, 1, &flat) == 0 &&
             memcmp(im.pix, flat.pix, (size_t)im.w * im.h * im.comps) != 0;
        smoothing = TRUE;
        TAP_OK(ok, "a progressive JPEG whose AC bits are never refined decodes, to other "
                   "pixels without libjpeg's block smoothing");
        free(im.pix);
        free(flat.pix);
        check_kept(r, "AC bits unsent", p, len, RESTART_PARTIAL, "coefficient bits unsent");
        free(p);
    }
    /* after all that, the same restarter still works */
    check_one(r, "after the refusals", src, src_len);
    free(src);
}

int main(void)
{
    struct restarter *r = restarter_new();

    check_rule();
    if (!r)
        tap_bail("restarter_new: out of memory");
    check_sources(r);
    check_refusals(r);
    restarter_free(r);
    restarter_free(NULL);
    return tap_done();
}
