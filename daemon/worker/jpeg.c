/*
 * jpeg.c - the workers' region-of-interest JPEG decoder over libjpeg-turbo
 * (see jpeg.h for the contract).
 *
 * Every entry point that calls into libjpeg sets the decoder's jmp_buf
 * first; on_error (libjpeg's error_exit) and on_message (a warning) format
 * libjpeg's message and longjmp back to it, and the entry point abandons
 * the image (jpeg_abort_decompress keeps the object and its permanent pool
 * for the next image).  Nothing declared in those functions is modified
 * between setjmp and a possible longjmp and read after it, so no local
 * needs to be volatile.
 */
#include "jpeg.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "buf.h"
#include "cmyk.h"

struct jpg_errmgr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int code;                    /* negative errno of the failure */
    char msg[JMSG_LENGTH_MAX];
};

struct jpg_dec {
    struct jpeg_decompress_struct ci;
    struct jpg_errmgr em;
    bool open;                   /* an image is between jpg_open and done */
    bool cmyk, adobe;
    bool merged;                 /* jpg_set_merged: merged upsampling */
    bool fast_dct;               /* jpg_set_fast_dct: JDCT_IFAST */
    bool no_tiles;               /* jpg_set_tiles(false): never from tiles */
    bool tiled;                  /* this image's restart intervals are tiles */
    bool lazy;                   /* jpg_start left jpeg_start_decompress to jpg_read */
    J_COLOR_SPACE out_space;     /* what check_header asked libjpeg for */
    unsigned scale;              /* jpg_start's s */
    const uint8_t *buf;          /* the image jpg_open was given */
    size_t len;
    struct jpg_tiles tiles;      /* when tiled: its tiles (found in jpg_read) */
    uint8_t *sub;                /* the JPEG of the tiles a crop needs */
    size_t sub_cap;
    uint8_t *pix;
    size_t pix_cap;
    JSAMPROW *rows;
    size_t rows_cap;
};

/*
 * The decoder's states and their invariants (dec_check(), run in debug
 * builds after every transition):
 *   idle      !open: no image; lazy and tiled are false
 *   open      jpg_open read the header; tiled says whether the file's
 *             restart intervals are tiles, never when no_tiles
 *   lazy      jpg_start of a tiled file: scale and output size set, the
 *             decompression not started (jpg_read starts it on the tiles
 *             or on the file); lazy implies open and tiled
 *   started   jpg_start of another file, or jpg_read under way
 * jpg_read and every failure end in idle.
 */
static void dec_check(const struct jpg_dec *d)
{
#ifndef NDEBUG
    assert(d->open || (!d->lazy && !d->tiled));
    assert(!d->lazy || d->tiled);
    assert(!d->tiled || !d->no_tiles);
    assert(!d->open || d->buf);
    assert(!d->tiled || (d->tiles.interval && d->tiles.cols && d->tiles.rows &&
                         d->tiles.mcu_w && d->tiles.mcu_h));
#else
    (void)d;
#endif
}

/* The color spaces a file may hold, and what libjpeg is asked to give. */
static const struct {
    J_COLOR_SPACE in;
    J_COLOR_SPACE out;
    bool cmyk;
} spaces[] = {
    { JCS_GRAYSCALE, JCS_EXT_RGB, false },
    { JCS_YCbCr, JCS_EXT_RGB, false },
    { JCS_RGB, JCS_EXT_RGB, false },
    { JCS_CMYK, JCS_CMYK, true },
    { JCS_YCCK, JCS_CMYK, true },
};

/* Other formats a file named .jpg turns out to be, named in the reason. */
static const struct {
    const char *magic;
    size_t len;
    const char *name;
} formats[] = {
    { "\x89PNG", 4, "PNG" },  { "GIF8", 4, "GIF" },    { "BM", 2, "BMP" },
    { "RIFF", 4, "RIFF (WebP?)" }, { "II*\0", 4, "TIFF" }, { "MM\0*", 4, "TIFF" },
};

/* libjpeg errors that are not plain corruption; the rest are -EBADMSG. */
static const struct {
    int msg_code;
    int code;
} error_codes[] = {
    { JERR_OUT_OF_MEMORY, -ENOMEM },
    { JERR_NO_BACKING_STORE, -E2BIG },  /* past max_memory_to_use */
    { JERR_IMAGE_TOO_BIG, -E2BIG },     /* past JPEG_MAX_DIMENSION */
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define CROP_CONTEXT 2   /* columns read past a region's edges (jpg_read) */

static void on_error(j_common_ptr ci)
{
    struct jpg_errmgr *em = (struct jpg_errmgr *)ci->err;

    em->pub.format_message(ci, em->msg);
    em->code = -EBADMSG;
    for (unsigned i = 0; i < COUNT(error_codes); i++)
        if (em->pub.msg_code == error_codes[i].msg_code)
            em->code = error_codes[i].code;
    longjmp(em->jb, 1);
}

/* Level -1 is a warning: corrupt or missing data that libjpeg would paper
 * over.  Trace messages (level >= 0) are ignored. */
static void on_message(j_common_ptr ci, int level)
{
    struct jpg_errmgr *em = (struct jpg_errmgr *)ci->err;

    if (level >= 0)
        return;
    em->pub.num_warnings++;
    em->pub.format_message(ci, em->msg);
    em->code = -EBADMSG;
    longjmp(em->jb, 1);
}

static void on_output(j_common_ptr ci)
{
    (void)ci;
}

/* jpeg_create_decompress fails only without memory, by error_exit. */
static int create(struct jpg_dec *d)
{
    if (setjmp(d->em.jb))
        return -ENOMEM;
    jpeg_create_decompress(&d->ci);
    return 0;
}

struct jpg_dec *jpg_new(void)
{
    struct jpg_dec *d = calloc(1, sizeof(*d));

    if (!d)
        return NULL;
    d->ci.err = jpeg_std_error(&d->em.pub);
    d->em.pub.error_exit = on_error;
    d->em.pub.emit_message = on_message;
    d->em.pub.output_message = on_output;
    if (create(d) < 0) {
        free(d);
        return NULL;
    }
    return d;
}

void jpg_free(struct jpg_dec *d)
{
    if (!d)
        return;
    jpeg_destroy_decompress(&d->ci);
    jpg_tiles_free(&d->tiles);
    free(d->sub);
    free(d->pix);
    free(d->rows);
    free(d);
}

void jpg_abort(struct jpg_dec *d)
{
    if (d->open)
        jpeg_abort_decompress(&d->ci);
    d->open = false;
    d->lazy = false;
    d->tiled = false;
    dec_check(d);
}

/* Abandons the image after a longjmp; returns the error. */
static int failed(struct jpg_dec *d, const char *stage, struct rf_err *err)
{
    int code = d->em.code ? d->em.code : -EBADMSG;

    jpg_abort(d);
    return rf_err_set(err, code, "%s JPEG (%s): %s",
                      code == -ENOMEM ? "out of memory decoding a"
                      : code == -E2BIG ? "oversized" : "corrupt",
                      stage, d->em.msg);
}

static int not_jpeg(const uint8_t *buf, size_t len, struct rf_err *err)
{
    if (len == 0)
        return rf_err_set(err, -EBADMSG, "empty record, not a JPEG");
    for (unsigned i = 0; i < COUNT(formats); i++)
        if (len >= formats[i].len && memcmp(buf, formats[i].magic, formats[i].len) == 0)
            return rf_err_set(err, -EBADMSG, "%s data, not a JPEG", formats[i].name);
    return rf_err_set(err, -EBADMSG, "not a JPEG (starts %02x %02x, not the SOI marker ff d8)",
                      buf[0], len > 1 ? buf[1] : 0);
}

static int check_header(struct jpg_dec *d, const uint8_t *buf, size_t len,
                        const struct jpg_limits *lim, struct jpg_header *hdr, struct rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->ci;
    uint64_t px = (uint64_t)ci->image_width * ci->image_height;
    unsigned i;

    for (i = 0; i < COUNT(spaces); i++)
        if (spaces[i].in == ci->jpeg_color_space)
            break;
    if (i == COUNT(spaces))
        return rf_err_set(err, -ENOTSUP,
                          "JPEG color space %d with %d components is not supported "
                          "(gray, YCbCr, RGB, CMYK and YCCK are)",
                          (int)ci->jpeg_color_space, ci->num_components);
    d->cmyk = spaces[i].cmyk;
    d->adobe = ci->saw_Adobe_marker;
    ci->out_color_space = spaces[i].out;
    d->out_space = spaces[i].out;
    *hdr = (struct jpg_header){
        .width = ci->image_width, .height = ci->image_height,
        .components = (uint32_t)ci->num_components, .cmyk = d->cmyk,
        .multi_scan = jpeg_has_multiple_scans(ci) != 0, .scans = 1,
    };
    if (lim->pixel_cap && px > lim->pixel_cap)
        return rf_err_set(err, -E2BIG,
                          "JPEG of %ux%u = %llu pixels is over the pixel cap of %llu "
                          "(pixel-cap in ringfeedd.conf)",
                          hdr->width, hdr->height, (unsigned long long)px,
                          (unsigned long long)lim->pixel_cap);
    if (hdr->multi_scan) {
        uint32_t stop = lim->scan_cap ? lim->scan_cap : UINT32_MAX - 1;
        int n = jpg_count_scans(buf, len, stop);

        if (n < 0)
            return rf_err_set(err, -EBADMSG, "corrupt JPEG: malformed marker segment");
        hdr->scans = (uint32_t)n;
        if (lim->scan_cap && hdr->scans > lim->scan_cap)
            return rf_err_set(err, -E2BIG,
                              "progressive JPEG with more than %u scans (the scan cap; "
                              "ordinary files have about 10)",
                              lim->scan_cap);
    }
    /* libjpeg's own allocations (a multi-scan file's coefficients: at most
     * 8 bytes a pixel for CMYK) stay within what the pixel cap implies */
    if (lim->pixel_cap) {
        uint64_t mem = lim->pixel_cap * 8 + (64ull << 20);

        ci->mem->max_memory_to_use = mem > LONG_MAX ? LONG_MAX : (long)mem;
    }
    return 0;
}

/* Whether the file's restart intervals are tiles (jpeg.h, struct
 * jpg_tiles), and their geometry: one interleaved scan (or a one-component
 * file's one scan), Huffman coded, sequential, with an interval that
 * divides the MCUs of a row, and more than one tile. */
static bool tile_layout(const struct jpeg_decompress_struct *ci, struct jpg_tiles *t)
{
    uint32_t mcus_x;

    if (ci->restart_interval == 0 || ci->progressive_mode || ci->arith_code ||
        ci->comps_in_scan != ci->num_components || jpeg_has_multiple_scans((j_decompress_ptr)ci))
        return false;
    if (ci->comps_in_scan == 1) {
        t->mcu_w = t->mcu_h = DCTSIZE;
    } else {
        t->mcu_w = DCTSIZE * (uint32_t)ci->max_h_samp_factor;
        t->mcu_h = DCTSIZE * (uint32_t)ci->max_v_samp_factor;
    }
    mcus_x = (ci->image_width + t->mcu_w - 1) / t->mcu_w;
    t->interval = ci->restart_interval;
    if (mcus_x % t->interval)
        return false;
    t->cols = mcus_x / t->interval;
    t->rows = (ci->image_height + t->mcu_h - 1) / t->mcu_h;
    return (uint64_t)t->cols * t->rows > 1;
}

int jpg_open(struct jpg_dec *d, const uint8_t *buf, size_t len, const struct jpg_limits *lim,
             struct jpg_header *hdr, struct rf_err *err)
{
    int rc;

    jpg_abort(d);
    if (len < 3 || buf[0] != 0xFF || buf[1] != 0xD8 || buf[2] != 0xFF)
        return not_jpeg(buf, len, err);
    d->em.code = 0;
    if (setjmp(d->em.jb))
        return failed(d, "header", err);
    d->open = true;
    jpeg_mem_src(&d->ci, buf, (unsigned long)len);
    jpeg_read_header(&d->ci, TRUE);
    rc = check_header(d, buf, len, lim, hdr, err);
    if (rc < 0) {
        jpg_abort(d);
        return rc;
    }
    d->buf = buf;
    d->len = len;
    d->tiled = !d->no_tiles && tile_layout(&d->ci, &d->tiles);
    dec_check(d);
    return 0;
}

/* jpg_start's settings, on the header libjpeg has just read. */
static void apply_settings(struct jpg_dec *d)
{
    d->ci.out_color_space = d->out_space;
    d->ci.scale_num = d->scale;
    d->ci.scale_denom = 8;
    d->ci.dct_method = d->fast_dct ? JDCT_IFAST : JDCT_ISLOW;
    d->ci.do_fancy_upsampling = d->merged ? FALSE : TRUE;
}

int jpg_start(struct jpg_dec *d, unsigned s, uint32_t *width, uint32_t *height,
              struct rf_err *err)
{
    if (!d->open || s < 1 || s > 8) {
        jpg_abort(d);
        return rf_err_set(err, -EINVAL, "jpg_start: no image open or scale %u/8 out of range", s);
    }
    if (setjmp(d->em.jb))
        return failed(d, "scan", err);
    d->scale = s;
    apply_settings(d);
    if (d->tiled) { /* jpg_read starts, on the tiles the box needs */
        jpeg_calc_output_dimensions(&d->ci);
        d->lazy = true;
    } else {
        jpeg_start_decompress(&d->ci);
    }
    *width = d->ci.output_width;
    *height = d->ci.output_height;
    dec_check(d);
    return 0;
}

/* Decodes [x0, x1) x [y0, y1) of the started image (jpg_read's contract). */
static int read_box(struct jpg_dec *d, uint32_t x0, uint32_t x1, uint32_t y0, uint32_t y1,
                    struct jpg_roi *roi, struct rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->ci;
    JDIMENSION xoff = x0, w = x1 - x0;
    size_t stride, nrows = (size_t)y1 - y0, bpp = d->cmyk ? 4 : 3;

    if (x0 >= x1 || x1 > ci->output_width || y0 >= y1 || y1 > ci->output_height ||
        ci->output_scanline != 0) {
        jpg_abort(d);
        return rf_err_set(err, -EINVAL, "jpg_read: region %u..%u x %u..%u outside %ux%u",
                          x0, x1, y0, y1, ci->output_width, ci->output_height);
    }
    if (setjmp(d->em.jb))
        return failed(d, "scan", err);
    /* two columns more each side: fancy (triangle) chroma upsampling at
     * full scale reads the neighbouring chroma sample, which a crop edge
     * would replace by its own (libjpeg-turbo replicates at the edge) */
    xoff = x0 >= CROP_CONTEXT ? x0 - CROP_CONTEXT : 0;
    w = (x1 + CROP_CONTEXT <= ci->output_width ? x1 + CROP_CONTEXT : ci->output_width) - xoff;
    if (xoff != 0 || w != ci->output_width)
        jpeg_crop_scanline(ci, &xoff, &w);
    stride = (size_t)w * bpp;
    if (!buf_grow((void **)&d->pix, &d->pix_cap, stride * nrows) ||
        !buf_grow((void **)&d->rows, &d->rows_cap, nrows * sizeof(JSAMPROW))) {
        jpg_abort(d);
        return rf_err_set(err, -ENOMEM, "out of memory for a %ux%zu region", w, nrows);
    }
    for (size_t r = 0; r < nrows; r++)
        d->rows[r] = d->pix + r * stride;
    if (y0 && jpeg_skip_scanlines(ci, y0) != y0) {
        jpg_abort(d);
        return rf_err_set(err, -EBADMSG, "corrupt JPEG: could not skip to row %u", y0);
    }
    while (ci->output_scanline < y1) {
        JDIMENSION at = ci->output_scanline - y0;

        if (jpeg_read_scanlines(ci, d->rows + at, y1 - ci->output_scanline) == 0) {
            jpg_abort(d);
            return rf_err_set(err, -EBADMSG, "corrupt JPEG: no data at row %u", at + y0);
        }
    }
    jpg_abort(d);
    if (d->cmyk)
        for (size_t r = 0; r < nrows; r++)
            cmyk_to_rgb(d->rows[r], w, d->adobe); /* rows keep the CMYK stride */
    *roi = (struct jpg_roi){ .pix = d->pix, .stride = stride, .x0 = xoff, .y0 = y0, .w = w,
                             .h = (uint32_t)nrows };
    return 0;
}

/* Reads the header of buf[0..len) again and starts it at jpg_start's
 * settings; false after a longjmp (the decoder's message in d->em). */
static bool restart_on(struct jpg_dec *d, const uint8_t *buf, size_t len)
{
    struct jpeg_decompress_struct *ci = &d->ci;

    if (setjmp(d->em.jb))
        return false;
    jpeg_abort_decompress(ci);
    jpeg_mem_src(ci, buf, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    apply_settings(d);
    jpeg_start_decompress(ci);
    return true;
}

/* The tiles under the box, with CROP_CONTEXT scaled pixels around it (the
 * chroma upsampler's neighbours: inside the tiles' JPEG its edges
 * replicate), as the JPEG d->sub of sw x sh scaled pixels at scaled
 * (qx, qy) of the image.  False when they are the whole image down to the
 * box (nothing to gain), or the markers are not what the header says, or
 * out of memory: the caller decodes the file itself. */
static bool sub_image(struct jpg_dec *d, uint32_t x0, uint32_t x1, uint32_t y0, uint32_t y1,
                      size_t *len, uint32_t *qx, uint32_t *qy)
{
    const struct jpeg_decompress_struct *ci = &d->ci;
    struct jpg_tiles *t = &d->tiles;
    uint32_t s = d->scale, W = ci->image_width, H = ci->image_height;
    uint64_t seg = (uint64_t)t->interval * t->mcu_w;
    /* the box and its margin in the original's pixels: scaled pixel m
     * covers [8m/s, 8(m+1)/s) */
    uint64_t ox0 = (uint64_t)(x0 > CROP_CONTEXT ? x0 - CROP_CONTEXT : 0) * 8 / s;
    uint64_t oy0 = (uint64_t)(y0 > CROP_CONTEXT ? y0 - CROP_CONTEXT : 0) * 8 / s;
    uint64_t ox1 = ((uint64_t)x1 + CROP_CONTEXT) * 8 / s + 1;
    uint64_t oy1 = ((uint64_t)y1 + CROP_CONTEXT) * 8 / s + 1;
    uint32_t c0, c1, r0, r1, px, py, pw, ph;

    ox1 = ox1 < W ? ox1 : W;
    oy1 = oy1 < H ? oy1 : H;
    c0 = (uint32_t)(ox0 / seg);
    c1 = (uint32_t)((ox1 + seg - 1) / seg);
    r0 = (uint32_t)(oy0 / t->mcu_h);
    r1 = (uint32_t)((oy1 + t->mcu_h - 1) / t->mcu_h);
    c1 = c1 < t->cols ? c1 : t->cols;
    r1 = r1 < t->rows ? r1 : t->rows;
    if (c0 >= c1 || r0 >= r1 || (c0 == 0 && c1 == t->cols && r0 == 0))
        return false;
    if (jpg_tiles_find(d->buf, d->len, t, r1) < 0)
        return false;
    if (!buf_grow((void **)&d->sub, &d->sub_cap, jpg_tiles_size(d->buf, t, c0, c1, r0, r1)))
        return false;
    px = (uint32_t)(c0 * seg);
    py = r0 * t->mcu_h;
    pw = (uint32_t)((uint64_t)c1 * seg < W ? c1 * seg : W) - px;
    ph = ((uint64_t)r1 * t->mcu_h < H ? r1 * t->mcu_h : H) - py;
    *len = jpg_tiles_build(d->buf, t, c0, c1, r0, r1, pw, ph, d->sub);
    *qx = px / 8 * s; /* px and py are whole blocks */
    *qy = py / 8 * s;
    return true;
}

int jpg_read(struct jpg_dec *d, uint32_t x0, uint32_t x1, uint32_t y0, uint32_t y1,
             struct jpg_roi *roi, struct rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->ci;
    uint32_t qx, qy;
    size_t len;
    int rc;

    if (!d->open) {
        jpg_abort(d);
        return rf_err_set(err, -EINVAL, "jpg_read: no image started");
    }
    if (!d->lazy)
        return read_box(d, x0, x1, y0, y1, roi, err);
    d->lazy = false;
    if (x0 >= x1 || x1 > ci->output_width || y0 >= y1 || y1 > ci->output_height)
        return read_box(d, x0, x1, y0, y1, roi, err); /* which refuses it */
    if (!sub_image(d, x0, x1, y0, y1, &len, &qx, &qy)) {
        /* still as jpg_start left it: start the file itself */
        if (setjmp(d->em.jb))
            return failed(d, "scan", err);
        jpeg_start_decompress(ci);
        return read_box(d, x0, x1, y0, y1, roi, err);
    }
    if (restart_on(d, d->sub, len) && ci->output_width > x1 - 1 - qx &&
        ci->output_height > y1 - 1 - qy) {
        rc = read_box(d, x0 - qx, x1 - qx, y0 - qy, y1 - qy, roi, err);
        if (rc == 0) {
            roi->x0 += qx;
            roi->y0 += qy;
            roi->from_tiles = true;
            return 0;
        }
        if (rc == -ENOMEM)
            return rc;
        d->open = true; /* damage the tiles showed: the file itself says what */
    }
    if (!restart_on(d, d->buf, d->len))
        return failed(d, "scan", err);
    return read_box(d, x0, x1, y0, y1, roi, err);
}

void jpg_set_tiles(struct jpg_dec *d, bool tiles)
{
    d->no_tiles = !tiles;
}

void jpg_set_merged(struct jpg_dec *d, bool merged)
{
    d->merged = merged;
}

void jpg_set_fast_dct(struct jpg_dec *d, bool fast)
{
    d->fast_dct = fast;
}

unsigned jpg_pick_scale(double span_x, double span_y, uint32_t need, double cover)
{
    for (unsigned s = 1; s < 8; s *= 2)
        if (span_x * s / 8 >= cover * need && span_y * s / 8 >= cover * need)
            return s;
    return 8;
}
