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
    uint8_t *pix;
    size_t pix_cap;
    JSAMPROW *rows;
    size_t rows_cap;
};

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
    free(d->pix);
    free(d->rows);
    free(d);
}

void jpg_abort(struct jpg_dec *d)
{
    if (d->open)
        jpeg_abort_decompress(&d->ci);
    d->open = false;
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
    if (rc < 0)
        jpg_abort(d);
    return rc;
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
    d->ci.scale_num = s;
    d->ci.scale_denom = 8;
    d->ci.dct_method = d->fast_dct ? JDCT_IFAST : JDCT_ISLOW;
    d->ci.do_fancy_upsampling = d->merged ? FALSE : TRUE;
    jpeg_start_decompress(&d->ci);
    *width = d->ci.output_width;
    *height = d->ci.output_height;
    return 0;
}

int jpg_read(struct jpg_dec *d, uint32_t x0, uint32_t x1, uint32_t y0, uint32_t y1,
             struct jpg_roi *roi, struct rf_err *err)
{
    struct jpeg_decompress_struct *ci = &d->ci;
    JDIMENSION xoff = x0, w = x1 - x0;
    size_t stride, nrows = (size_t)y1 - y0, bpp = d->cmyk ? 4 : 3;

    if (!d->open || x0 >= x1 || x1 > ci->output_width || y0 >= y1 ||
        y1 > ci->output_height || ci->output_scanline != 0) {
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
