/*
 * image_decode.c - PNG, WebP, TIFF, BMP and PPM/PGM bytes to Pillow's RGB
 * pixels (image_decode.h has the rules).  The PNG and TIFF decoders hand
 * rows as stored to one row converter (struct rowfmt), so their rules
 * live in one place.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spng.h>
#include <stb_image.h>
#include <tiffio.h>
#include <webp/decode.h>

#include "image_decode.h"
#include "pixels.h"

#define PNG_CHUNK_MAX (64u << 20)   /* one ancillary chunk, and all cached */
#define TIFF_ALLOC_MAX (1ull << 30) /* libtiff's largest single allocation */

__attribute__((format(printf, 4, 5)))
static int fail(char *why, size_t cap, int r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return r;
}

/* Refuses sides out of 1..PX_SIDE_MAX or over max pixels in all. */
static int check_size(uint64_t w, uint64_t h, uint64_t max, char *why,
                      size_t cap)
{
    if (w < 1 || h < 1)
        return fail(why, cap, -EBADMSG, "%llux%llu: an empty image",
                    (unsigned long long)w, (unsigned long long)h);
    if (w > PX_SIDE_MAX || h > PX_SIDE_MAX || w * h > max)
        return fail(why, cap, -E2BIG, "%llux%llu: over the limit of %u "
                    "pixels a side and %llu in all", (unsigned long long)w,
                    (unsigned long long)h, PX_SIDE_MAX,
                    (unsigned long long)max);
    return 0;
}

/* Allocates im's RGB pixels for w x h (already checked). */
static int alloc_rgb(struct imgdec_image *im, uint32_t w, uint32_t h,
                     char *why, size_t cap)
{
    im->rgb = malloc((size_t)w * h * 3);
    if (!im->rgb)
        return fail(why, cap, -ENOMEM, "out of memory for %ux%u pixels", w, h);
    im->width = w;
    im->height = h;
    return 0;
}

void imgdec_image_free(struct imgdec_image *im)
{
    free(im->rgb);
    *im = (struct imgdec_image){0};
}

/*
 * A row as stored, and how Pillow turns it into RGB: samples of bits each
 * (1, 2, 4, 8 packed most significant bit first; 16 big-endian), spp to a
 * pixel, the first one (gray, palette) or three (RGB) used, the rest
 * (alpha, extra samples) dropped.
 */
enum row_kind { ROW_GRAY, ROW_PALETTE, ROW_RGB };

struct rowfmt {
    enum row_kind kind;
    unsigned bits, spp;
    int invert;                    /* gray: 0 is white (TIFF MinIsWhite) */
    int clip16;                    /* gray 16-bit: clip, not high byte */
    const uint8_t (*pal)[3];       /* ROW_PALETTE: pal_n entries */
    unsigned pal_n;
};

static unsigned sample_at(const uint8_t *row, unsigned bits, size_t i)
{
    size_t bit;

    switch (bits) {
    case 8:
        return row[i];
    case 16:
        return (unsigned)row[2 * i] << 8 | row[2 * i + 1];
    default:
        bit = i * bits;
        return (row[bit / 8] >> (8 - bits - bit % 8)) & ((1u << bits) - 1);
    }
}

/* A gray sample as Pillow's L: low depths scaled to 0..255 (1 -> 255,
 * 2 -> 85, 4 -> 17), 16-bit clipped or its high byte. */
static uint8_t gray8(const struct rowfmt *rf, unsigned v)
{
    unsigned max = rf->bits == 16 ? 65535u : (1u << rf->bits) - 1;

    if (rf->invert)
        v = max - v;
    if (rf->bits == 16)
        return (uint8_t)(rf->clip16 ? (v > 255 ? 255 : v) : v >> 8);
    return (uint8_t)(v * (255 / max));
}

/* Converts n pixels of row to RGB at dst.  Returns 0, or -1 when a
 * palette index is past the palette. */
static int convert_row(const struct rowfmt *rf, const uint8_t *row,
                       uint32_t n, uint8_t *dst)
{
    for (uint32_t x = 0; x < n; x++, dst += 3) {
        size_t s = (size_t)x * rf->spp;
        unsigned v = sample_at(row, rf->bits, s);

        if (rf->kind == ROW_GRAY) {
            dst[0] = dst[1] = dst[2] = gray8(rf, v);
        } else if (rf->kind == ROW_PALETTE) {
            if (v >= rf->pal_n)
                return -1;
            memcpy(dst, rf->pal[v], 3);
        } else {
            for (int c = 0; c < 3; c++)
                dst[c] = (uint8_t)(rf->bits == 16
                                   ? sample_at(row, 16, s + c) >> 8
                                   : sample_at(row, 8, s + c));
        }
    }
    return 0;
}

/* ---- PNG ---------------------------------------------------------- */

/* PNG colour types: what a row holds. */
static const struct {
    uint8_t type;
    enum row_kind kind;
    unsigned spp;
} png_types[] = {
    {SPNG_COLOR_TYPE_GRAYSCALE, ROW_GRAY, 1},
    {SPNG_COLOR_TYPE_TRUECOLOR, ROW_RGB, 3},
    {SPNG_COLOR_TYPE_INDEXED, ROW_PALETTE, 1},
    {SPNG_COLOR_TYPE_GRAYSCALE_ALPHA, ROW_GRAY, 2},
    {SPNG_COLOR_TYPE_TRUECOLOR_ALPHA, ROW_RGB, 4},
};

static int png_decode(const uint8_t *buf, size_t len, uint64_t max,
                      struct imgdec_image *im, char *why, size_t cap)
{
    struct spng_ihdr ih;
    struct spng_plte plte;
    uint8_t pal[256][3];
    struct rowfmt rf = {0};
    uint8_t *raw = NULL;
    size_t raw_len, stride;
    spng_ctx *ctx = spng_ctx_new(0);
    int r, found = 0;

    if (!ctx)
        return fail(why, cap, -ENOMEM, "out of memory");
    spng_set_image_limits(ctx, PX_SIDE_MAX, PX_SIDE_MAX);
    spng_set_chunk_limits(ctx, PNG_CHUNK_MAX, PNG_CHUNK_MAX);
    spng_set_png_buffer(ctx, buf, len);
    r = spng_get_ihdr(ctx, &ih);
    if (r) {
        r = fail(why, cap, r == SPNG_EWIDTH || r == SPNG_EHEIGHT ||
                 r == SPNG_EUSER_WIDTH || r == SPNG_EUSER_HEIGHT ? -E2BIG :
                 -EBADMSG, "%s", spng_strerror(r));
        goto out;
    }
    r = check_size(ih.width, ih.height, max, why, cap);
    if (r < 0)
        goto out;
    for (size_t i = 0; i < sizeof(png_types) / sizeof(png_types[0]); i++)
        if (png_types[i].type == ih.color_type) {
            rf.kind = png_types[i].kind;
            rf.spp = png_types[i].spp;
            found = 1;
        }
    if (!found) {
        r = fail(why, cap, -EBADMSG, "colour type %u", ih.color_type);
        goto out;
    }
    rf.bits = ih.bit_depth;
    rf.clip16 = ih.color_type == SPNG_COLOR_TYPE_GRAYSCALE;
    if (rf.kind == ROW_PALETTE) {
        r = spng_get_plte(ctx, &plte);
        if (r) {
            r = fail(why, cap, -EBADMSG, "palette: %s", spng_strerror(r));
            goto out;
        }
        for (uint32_t i = 0; i < plte.n_entries && i < 256; i++) {
            pal[i][0] = plte.entries[i].red;
            pal[i][1] = plte.entries[i].green;
            pal[i][2] = plte.entries[i].blue;
        }
        rf.pal = (const uint8_t (*)[3])pal;
        rf.pal_n = plte.n_entries;
    }
    r = spng_decoded_image_size(ctx, SPNG_FMT_RAW, &raw_len);
    if (r) {
        r = fail(why, cap, -EBADMSG, "%s", spng_strerror(r));
        goto out;
    }
    stride = raw_len / ih.height;
    raw = malloc(raw_len);
    r = raw ? alloc_rgb(im, ih.width, ih.height, why, cap)
            : fail(why, cap, -ENOMEM, "out of memory for %zu bytes", raw_len);
    if (r < 0)
        goto out;
    r = spng_decode_image(ctx, raw, raw_len, SPNG_FMT_RAW, 0);
    if (r) {
        r = fail(why, cap, r == SPNG_EMEM ? -ENOMEM : -EBADMSG, "%s",
                 spng_strerror(r));
        goto out;
    }
    for (uint32_t y = 0; y < ih.height; y++)
        if (convert_row(&rf, raw + y * stride, ih.width,
                        im->rgb + (size_t)y * ih.width * 3) < 0) {
            r = fail(why, cap, -ENOTSUP, "a palette index past the "
                     "PLTE's %u entries", rf.pal_n);
            goto out;
        }
out:
    if (r < 0)
        imgdec_image_free(im);
    free(raw);
    spng_ctx_free(ctx);
    return r;
}

/* ---- WebP --------------------------------------------------------- */

static int webp_decode(const uint8_t *buf, size_t len, uint64_t max,
                       struct imgdec_image *im, char *why, size_t cap)
{
    WebPBitstreamFeatures ft;
    VP8StatusCode st = WebPGetFeatures(buf, len, &ft);
    size_t n;
    int r;

    if (st != VP8_STATUS_OK)
        return fail(why, cap, -EBADMSG, "header does not parse "
                    "(libwebp status %d)", (int)st);
    if (ft.has_animation)
        return fail(why, cap, -ENOTSUP, "animated (refused: one "
                    "sample per file, and Pillow would keep only the first "
                    "frame)");
    r = check_size((uint64_t)ft.width, (uint64_t)ft.height, max, why, cap);
    if (r < 0 || (r = alloc_rgb(im, (uint32_t)ft.width, (uint32_t)ft.height,
                                why, cap)) < 0)
        return r;
    n = (size_t)im->width * im->height * 3;
    if (!WebPDecodeRGBInto(buf, len, im->rgb, n, (int)im->width * 3)) {
        imgdec_image_free(im);
        return fail(why, cap, -EBADMSG, "image data does not decode");
    }
    return 0;
}

/* ---- TIFF --------------------------------------------------------- */

/* The memory a TIFF is read from, and libtiff's first error message. */
struct tiff_mem {
    const uint8_t *buf;
    size_t len, at;
    char *why;
    size_t cap;
    int said;
};

static tmsize_t tm_read(thandle_t h, void *dst, tmsize_t n)
{
    struct tiff_mem *m = h;
    size_t k = m->at < m->len ? m->len - m->at : 0;

    if (n < 0)
        return -1;
    if ((size_t)n < k)
        k = (size_t)n;
    memcpy(dst, m->buf + m->at, k);
    m->at += k;
    return (tmsize_t)k;
}

static tmsize_t tm_write(thandle_t h, void *src, tmsize_t n)
{
    (void)h, (void)src, (void)n;
    return -1;
}

static toff_t tm_seek(thandle_t h, toff_t off, int whence)
{
    struct tiff_mem *m = h;
    uint64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->at : m->len;

    if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END)
        return (toff_t)-1;
    if (off > UINT64_MAX - base)
        return (toff_t)-1;
    m->at = (size_t)(base + off);
    return m->at;
}

static int tm_close(thandle_t h)
{
    (void)h;
    return 0;
}

static toff_t tm_size(thandle_t h)
{
    return ((struct tiff_mem *)h)->len;
}

static int tm_map(thandle_t h, void **base, toff_t *size)
{
    (void)h, (void)base, (void)size;
    return 0;
}

static void tm_unmap(thandle_t h, void *base, toff_t size)
{
    (void)h, (void)base, (void)size;
}

static int tm_error(TIFF *tif, void *user, const char *module,
                    const char *fmt, va_list ap)
{
    struct tiff_mem *m = user;

    (void)tif;
    if (!m->said) {
        int k = snprintf(m->why, m->cap, "%s%s", module ? module : "",
                         module ? ": " : "");

        if (k >= 0 && (size_t)k < m->cap)
            vsnprintf(m->why + k, m->cap - (size_t)k, fmt, ap);
        m->said = 1;
    }
    return 1;
}

static int tm_warning(TIFF *tif, void *user, const char *module,
                      const char *fmt, va_list ap)
{
    (void)tif, (void)user, (void)module, (void)fmt, (void)ap;
    return 1; /* ignored, as Pillow ignores them */
}

/* What the first directory holds, as a struct rowfmt; -ENOTSUP with the
 * reason for what Pillow would convert some other way (or not at all). */
static int tiff_rowfmt(TIFF *tif, struct rowfmt *rf, uint8_t (*pal)[3],
                       char *why, size_t cap)
{
    uint16_t spp = 1, bps = 1, photo, planar = PLANARCONFIG_CONTIG;
    uint16_t fmt = SAMPLEFORMAT_UINT, nextra = 0, *extra = NULL;
    uint16_t *cr, *cg, *cb;

    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &fmt);
    TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, &nextra, &extra);
    if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photo))
        return fail(why, cap, -EBADMSG, "no PhotometricInterpretation");
    if (fmt != SAMPLEFORMAT_UINT)
        return fail(why, cap, -ENOTSUP, "sample format %u (only "
                    "unsigned integers are packed)", fmt);
    if (planar != PLANARCONFIG_CONTIG && spp > 1)
        return fail(why, cap, -ENOTSUP, "separate planes");
    if (nextra && extra && extra[0] == EXTRASAMPLE_ASSOCALPHA)
        return fail(why, cap, -ENOTSUP, "premultiplied alpha");
    *rf = (struct rowfmt){.bits = bps, .spp = spp};
    switch (photo) {
    case PHOTOMETRIC_MINISBLACK:
    case PHOTOMETRIC_MINISWHITE:
        rf->kind = ROW_GRAY;
        rf->invert = photo == PHOTOMETRIC_MINISWHITE;
        if ((spp == 1 && (bps == 1 || bps == 8)) ||
            (spp == 2 && bps == 8 && !rf->invert && nextra == 1 &&
             extra[0] == EXTRASAMPLE_UNASSALPHA))
            return 0;
        break;
    case PHOTOMETRIC_RGB:
        rf->kind = ROW_RGB;
        if (bps == 8 && (spp == 3 || (spp == 4 && nextra == 1)))
            return 0;
        break;
    case PHOTOMETRIC_PALETTE:
        rf->kind = ROW_PALETTE;
        if (spp != 1 || (bps != 1 && bps != 2 && bps != 4 && bps != 8))
            break;
        if (!TIFFGetField(tif, TIFFTAG_COLORMAP, &cr, &cg, &cb))
            return fail(why, cap, -EBADMSG, "palette without a "
                        "ColorMap");
        rf->pal_n = 1u << bps;
        for (unsigned i = 0; i < rf->pal_n; i++) {
            pal[i][0] = (uint8_t)(cr[i] >> 8);
            pal[i][1] = (uint8_t)(cg[i] >> 8);
            pal[i][2] = (uint8_t)(cb[i] >> 8);
        }
        rf->pal = (const uint8_t (*)[3])pal;
        return 0;
    default:
        return fail(why, cap, -ENOTSUP, "photometric %u (CMYK, YCbCr, "
                    "Lab and others are refused)", photo);
    }
    return fail(why, cap, -ENOTSUP, "%u sample%s of %u bits%s "
                "(refused: only 8-bit RGB/RGBA/gray/gray+alpha, 1-bit "
                "bilevel and 1..8-bit palette)", spp, spp == 1 ? "" : "s",
                bps, nextra ? " with extra samples" : "");
}

/* The rows of a striped image, converted one at a time. */
static int tiff_strips(TIFF *tif, const struct rowfmt *rf,
                       struct imgdec_image *im, uint8_t *row)
{
    for (uint32_t y = 0; y < im->height; y++)
        if (TIFFReadScanline(tif, row, y, 0) != 1 ||
            convert_row(rf, row, im->width,
                        im->rgb + (size_t)y * im->width * 3) < 0)
            return -1;
    return 0;
}

/* The tiles of a tiled image, each converted into place (a tile's rows
 * start on a byte: its width is a multiple of 16). */
static int tiff_tiles(TIFF *tif, const struct rowfmt *rf,
                      struct imgdec_image *im, uint8_t *tile, uint32_t tw,
                      uint32_t th)
{
    tmsize_t trow = TIFFTileRowSize(tif);

    for (uint32_t y0 = 0; y0 < im->height; y0 += th)
        for (uint32_t x0 = 0; x0 < im->width; x0 += tw) {
            uint32_t n = im->width - x0 < tw ? im->width - x0 : tw;

            if (TIFFReadTile(tif, tile, x0, y0, 0, 0) < 0)
                return -1;
            for (uint32_t y = y0; y < im->height && y < y0 + th; y++)
                if (convert_row(rf, tile + (size_t)(y - y0) * (size_t)trow, n,
                                im->rgb + ((size_t)y * im->width + x0) * 3) < 0)
                    return -1;
        }
    return 0;
}

static int tiff_decode(const uint8_t *buf, size_t len, uint64_t max,
                       struct imgdec_image *im, char *why, size_t cap)
{
    struct tiff_mem m = {buf, len, 0, why, cap, 0};
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    TIFF *tif = NULL;
    struct rowfmt rf;
    uint8_t pal[256][3], *scratch = NULL;
    uint32_t w = 0, h = 0, tw = 0, th = 0;
    tmsize_t n;
    int r;

    if (!opts)
        return fail(why, cap, -ENOMEM, "out of memory");
    if (len >= 4 && (buf[0] == 'I' ? buf[2] : buf[3]) == 43) {
        r = fail(why, cap, -ENOTSUP, "BigTIFF (Pillow cannot open it)");
        goto out;
    }
    TIFFOpenOptionsSetMaxSingleMemAlloc(opts, TIFF_ALLOC_MAX);
    TIFFOpenOptionsSetErrorHandlerExtR(opts, tm_error, &m);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, tm_warning, &m);
    tif = TIFFClientOpenExt("image", "rm", &m, tm_read, tm_write, tm_seek,
                            tm_close, tm_size, tm_map, tm_unmap, opts);
    if (!tif) {
        r = m.said ? -EBADMSG : fail(why, cap, -EBADMSG, "does not open");
        goto out;
    }
    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w) ||
        !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h)) {
        r = fail(why, cap, -EBADMSG, "no image size");
        goto out;
    }
    r = check_size(w, h, max, why, cap);
    if (r < 0 || (r = tiff_rowfmt(tif, &rf, pal, why, cap)) < 0)
        goto out;
    if (TIFFIsTiled(tif)) {
        TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
        TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
        n = TIFFTileSize(tif);
    } else {
        n = TIFFScanlineSize(tif);
    }
    if (n <= 0 || (TIFFIsTiled(tif) && (tw == 0 || th == 0 || tw % 16))) {
        r = m.said ? -EBADMSG : fail(why, cap, -EBADMSG, "bad strip "
                                     "or tile layout");
        goto out;
    }
    if ((uint64_t)n > TIFF_ALLOC_MAX || !(scratch = malloc((size_t)n))) {
        r = fail(why, cap, -ENOMEM, "out of memory for a %lld-byte %s",
                 (long long)n, TIFFIsTiled(tif) ? "tile" : "row");
        goto out;
    }
    r = alloc_rgb(im, w, h, why, cap);
    if (r < 0)
        goto out;
    r = TIFFIsTiled(tif) ? tiff_tiles(tif, &rf, im, scratch, tw, th)
                         : tiff_strips(tif, &rf, im, scratch);
    if (r < 0)
        r = m.said ? -EBADMSG
                   : fail(why, cap, rf.kind == ROW_PALETTE ? -ENOTSUP : -EBADMSG,
                          "%s", rf.kind == ROW_PALETTE
                          ? "a palette index past the ColorMap"
                          : "image data does not decode");
out:
    if (r < 0)
        imgdec_image_free(im);
    free(scratch);
    if (tif)
        TIFFClose(tif);
    TIFFOpenOptionsFree(opts);
    return r;
}

/* ---- BMP and PNM, through stb_image ------------------------------- */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

/*
 * The BMP kinds stb_image decodes as Pillow does: checks the header and,
 * for palette images, that every index is within the palette (stb reads
 * the entries past a short palette from uninitialised memory).
 */
static int bmp_check(const uint8_t *buf, size_t len, char *why, size_t cap)
{
    uint32_t off, hsz, comp, used, colors;
    int32_t w, h;
    unsigned bpp;
    size_t stride;

    if (len < 54)
        return fail(why, cap, -EBADMSG, "truncated header");
    off = le32(buf + 10);
    hsz = le32(buf + 14);
    if (hsz != 40 && hsz != 52 && hsz != 56 && hsz != 108 && hsz != 124)
        return fail(why, cap, -ENOTSUP, "a %u-byte header (OS/2 or "
                    "unknown)", hsz);
    w = (int32_t)le32(buf + 18);
    h = (int32_t)le32(buf + 22);
    bpp = buf[28] | buf[29] << 8;
    comp = le32(buf + 30);
    used = le32(buf + 46);
    if (w <= 0 || h == 0 || h == INT32_MIN)
        return fail(why, cap, -EBADMSG, "size %dx%d", w, h);
    if (bpp == 24 && comp == 0)
        return 0;
    if (bpp == 32 && comp == 0)
        return 0;
    if (bpp == 32 && comp == 3) {
        const uint8_t *mk = buf + 54;

        if (len < 66 || le32(mk) != 0xff0000u || le32(mk + 4) != 0xff00u ||
            le32(mk + 8) != 0xffu)
            return fail(why, cap, -ENOTSUP, "32-bit with bit fields "
                        "other than R 0xff0000 G 0xff00 B 0xff");
        return 0;
    }
    if (!(bpp == 1 || bpp == 4 || bpp == 8) || comp != 0)
        return fail(why, cap, -ENOTSUP, "%u bits a pixel, compression "
                    "%u (refused: RLE, 16-bit and others)", bpp, comp);
    colors = used ? used : 1u << bpp;
    if (colors > 1u << bpp || off != 14 + hsz + 4 * colors)
        return fail(why, cap, -ENOTSUP, "%u palette colours at offset %u "
                    "(expected at most %u, pixels right after them)", colors,
                    off, 1u << bpp);
    stride = ((size_t)w * bpp + 31) / 32 * 4;
    h = h < 0 ? -h : h;
    if (off > len || (len - off) / stride < (size_t)h)
        return fail(why, cap, -EBADMSG, "truncated pixel data");
    for (int32_t y = 0; colors < 1u << bpp && y < h; y++)
        for (int32_t x = 0; x < w; x++)
            if (sample_at(buf + off + (size_t)y * stride, bpp, (size_t)x) >= colors)
                return fail(why, cap, -ENOTSUP, "a palette index past "
                            "its %u colours", colors);
    return 0;
}

/* Skips PNM whitespace and # comments from *at. */
static void pnm_space(const uint8_t *buf, size_t len, size_t *at)
{
    while (*at < len) {
        if (buf[*at] == '#') {
            while (*at < len && buf[*at] != '\n' && buf[*at] != '\r')
                (*at)++;
        } else if (buf[*at] == ' ' || (buf[*at] >= '\t' && buf[*at] <= '\r')) {
            (*at)++;
        } else {
            return;
        }
    }
}

/* The decimal number at *at, after whitespace; -1 when none or too long. */
static long pnm_number(const uint8_t *buf, size_t len, size_t *at)
{
    long v = 0;
    size_t start;

    pnm_space(buf, len, at);
    start = *at;
    while (*at < len && buf[*at] >= '0' && buf[*at] <= '9' && *at - start < 9)
        v = v * 10 + (buf[(*at)++] - '0');
    return *at == start || (*at < len && buf[*at] >= '0' && buf[*at] <= '9')
           ? -1 : v;
}

/* P5/P6 with maxval 255 and all their pixel bytes, or refused. */
static int pnm_check(const uint8_t *buf, size_t len, char *why, size_t cap)
{
    size_t at = 2;
    long w, h, maxval;
    unsigned ch;

    if (len < 2 || buf[0] != 'P' || (buf[1] != '5' && buf[1] != '6'))
        return fail(why, cap, -ENOTSUP, "P%c (only binary P5 PGM and P6 "
                    "PPM)", len >= 2 ? buf[1] : '?');
    ch = buf[1] == '6' ? 3 : 1;
    w = pnm_number(buf, len, &at);
    h = pnm_number(buf, len, &at);
    maxval = pnm_number(buf, len, &at);
    if (w < 1 || h < 1 || maxval < 1 || at >= len)
        return fail(why, cap, -EBADMSG, "header does not parse");
    if (maxval != 255)
        return fail(why, cap, -ENOTSUP, "maxval %ld (only 255: 16-bit "
                    "and scaled samples are refused)", maxval);
    at++; /* the one whitespace byte before the pixels */
    if ((len - at) / ch / (size_t)w < (size_t)h)
        return fail(why, cap, -EBADMSG, "truncated pixel data");
    return 0;
}

static int stb_decode(enum imgdec_format f, const uint8_t *buf, size_t len,
                      uint64_t max, struct imgdec_image *im, char *why,
                      size_t cap)
{
    int w, h, comp, r;
    stbi_uc *px;

    if (len > INT32_MAX)
        return fail(why, cap, -E2BIG, "over 2 GiB");
    r = f == IMGDEC_BMP ? bmp_check(buf, len, why, cap)
                        : pnm_check(buf, len, why, cap);
    if (r < 0)
        return r;
    if (!stbi_info_from_memory(buf, (int)len, &w, &h, &comp))
        return fail(why, cap, -EBADMSG, "%s", stbi_failure_reason());
    r = check_size((uint64_t)w, (uint64_t)h, max, why, cap);
    if (r < 0)
        return r;
    px = stbi_load_from_memory(buf, (int)len, &w, &h, &comp, 3);
    if (!px)
        return fail(why, cap, -EBADMSG, "%s", stbi_failure_reason());
    im->rgb = px;   /* stb allocates with malloc (STBI_MALLOC's default) */
    im->width = (uint32_t)w;
    im->height = (uint32_t)h;
    return 0;
}

/* ---- the table ---------------------------------------------------- */

static int png_run(enum imgdec_format f, const uint8_t *b, size_t n,
                   uint64_t max, struct imgdec_image *im, char *why, size_t c)
{
    (void)f;
    return png_decode(b, n, max, im, why, c);
}

static int webp_run(enum imgdec_format f, const uint8_t *b, size_t n,
                    uint64_t max, struct imgdec_image *im, char *why, size_t c)
{
    (void)f;
    return webp_decode(b, n, max, im, why, c);
}

static int tiff_run(enum imgdec_format f, const uint8_t *b, size_t n,
                    uint64_t max, struct imgdec_image *im, char *why, size_t c)
{
    (void)f;
    return tiff_decode(b, n, max, im, why, c);
}

static const struct {
    const char *name;
    const char *magic;        /* at byte 0 ... */
    size_t magic_len;
    const char *magic2;       /* ... and at byte 8 (WebP's "WEBP"), or NULL */
    int (*run)(enum imgdec_format, const uint8_t *, size_t, uint64_t,
               struct imgdec_image *, char *, size_t);
} formats[IMGDEC_FORMAT_COUNT] = {
    [IMGDEC_PNG] = {"PNG", "\x89PNG\r\n\x1a\n", 8, NULL, png_run},
    [IMGDEC_WEBP] = {"WebP", "RIFF", 4, "WEBP", webp_run},
    [IMGDEC_TIFF] = {"TIFF", NULL, 0, NULL, tiff_run},
    [IMGDEC_BMP] = {"BMP", "BM", 2, NULL, stb_decode},
    [IMGDEC_PNM] = {"PNM", NULL, 0, NULL, stb_decode},
};

const char *imgdec_format_name(enum imgdec_format f)
{
    return (unsigned)f < IMGDEC_FORMAT_COUNT ? formats[f].name : NULL;
}

enum imgdec_format imgdec_sniff(const uint8_t *buf, size_t len)
{
    if (len >= 4 && ((buf[0] == 'I' && buf[1] == 'I' && buf[3] == 0 &&
                      (buf[2] == 42 || buf[2] == 43)) ||
                     (buf[0] == 'M' && buf[1] == 'M' && buf[2] == 0 &&
                      (buf[3] == 42 || buf[3] == 43))))
        return IMGDEC_TIFF;
    if (len >= 3 && buf[0] == 'P' && buf[1] >= '1' && buf[1] <= '7' &&
        (buf[2] == ' ' || (buf[2] >= '\t' && buf[2] <= '\r')))
        return IMGDEC_PNM;
    for (unsigned f = 1; f < IMGDEC_FORMAT_COUNT; f++) {
        if (!formats[f].magic || len < formats[f].magic_len ||
            memcmp(buf, formats[f].magic, formats[f].magic_len) != 0)
            continue;
        if (formats[f].magic2 &&
            (len < 12 || memcmp(buf + 8, formats[f].magic2, 4) != 0))
            continue;
        return (enum imgdec_format)f;
    }
    return IMGDEC_NONE;
}

int imgdec_decode(enum imgdec_format f, const uint8_t *buf, size_t len,
                  uint64_t max_pixels, struct imgdec_image *im, char *why,
                  size_t why_cap)
{
    int k;

    *im = (struct imgdec_image){0};
    if ((unsigned)f >= IMGDEC_FORMAT_COUNT || !formats[f].run)
        return fail(why, why_cap, -EINVAL, "not a format decoded here");
    /* every reason starts with the format's name */
    k = snprintf(why, why_cap, "%s: ", formats[f].name);
    if (k < 0 || (size_t)k >= why_cap)
        k = 0;
    return formats[f].run(f, buf, len, max_pixels, im, why + k, why_cap - (size_t)k);
}
