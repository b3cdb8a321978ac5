/*
 * jpeg.h - the workers' JPEG decoder: libjpeg-turbo's libjpeg API, made to
 * decode only the region a transform needs, at the smallest DCT scale that
 * still covers it, and to fail cleanly on any bad input.
 *
 * One decoder per worker, used for one image at a time and reused across
 * images (libjpeg's pools are kept):
 *
 *     jpg_open()   reads the header; refuses images over the pixel cap and
 *                  multi-scan (progressive) files over the scan cap before
 *                  any pixel is decoded
 *     jpg_start()  picks the DCT scale s/8 (s in 1..8) and starts; gives the
 *                  scaled image's size
 *     jpg_read()   decodes rows [y0, y1) and at least columns [x0, x1) of
 *                  the scaled image.  A file whose restart intervals are
 *                  tiles (struct jpg_tiles, below: what ringfeed-pack
 *                  stores) is decoded from a JPEG made of the tiles that
 *                  cover the box and a margin, so the rows above and below
 *                  and the columns either side are never entropy decoded;
 *                  then, as for any other file, jpeg_crop_scanline for the columns
 *                  (two more each side, for the chroma upsampler's
 *                  neighbours, then widened to iMCU boundaries),
 *                  jpeg_skip_scanlines above (entropy decoding only),
 *                  and the decode stops after row y1 - 1
 *                  (jpeg_abort_decompress): rows below are never entropy
 *                  decoded (except in multi-scan files, whose coefficients
 *                  libjpeg reads whole in jpg_start)
 *     jpg_abort()  ends the image early; jpg_read and every failure call it
 *
 * Pixels come out RGB, 3 bytes a pixel, whatever the file holds: YCbCr,
 * RGB and grayscale through libjpeg-turbo's converters;
 * CMYK and YCCK (libjpeg gives CMYK for both) converted here as Pillow's
 * Image.convert("RGB") does, R = (255 - C) * (255 - K) / 255, after
 * undoing Adobe's inversion when the file has an Adobe APP14 marker (as
 * Photoshop and Pillow write them; Pillow reads such files as "CMYK;I").
 *
 * Errors never leave the decoder: libjpeg's error_exit longjmps back here,
 * and so does any warning (emit_message at level -1: premature end of
 * data, corrupt Huffman codes, extraneous bytes), because libjpeg goes on
 * after a warning with grey or garbage pixels that would pass for a sample.
 * Results: 0, or a negative errno with a reason in err:
 *     -EBADMSG   not a JPEG, corrupt, or truncated
 *     -E2BIG     over the pixel cap or the scan cap
 *     -ENOTSUP   a color space other than gray, YCbCr, RGB, CMYK, YCCK
 *     -ENOMEM    out of memory
 */
#ifndef RINGFEED_DAEMON_JPEG_H
#define RINGFEED_DAEMON_JPEG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Scans a multi-scan file may have: progressive files have about 10 (6
 * for gray); each scan is a pass over the image's coefficients, so a file
 * of thousands of tiny scans is a CPU bomb (libjpeg-turbo's advisory on
 * progressive files). */
#define JPG_SCAN_CAP 100

struct jpg_dec;

struct jpg_limits {
    uint64_t pixel_cap;   /* width * height at most; 0: no cap */
    uint32_t scan_cap;    /* scans of a multi-scan file at most; 0: no cap */
};

struct jpg_header {
    uint32_t width, height;
    uint32_t components;  /* in the file: 1, 3 or 4 */
    bool cmyk;            /* CMYK or YCCK, converted to RGB */
    bool multi_scan;      /* progressive (or a multi-scan sequential file) */
    uint32_t scans;       /* SOS markers counted when multi_scan, else 1 */
};

/* The decoded region: rows y0 .. y0 + h - 1 and columns x0 .. x0 + w - 1 of
 * the scaled image, pixel (x, y) at pix + (y - y0) * stride + (x - x0) * 3.
 * Owned by the decoder, valid until its next call. */
struct jpg_roi {
    const uint8_t *pix;
    size_t stride;
    uint32_t x0, y0, w, h;
    bool from_tiles;      /* decoded from the restart-interval tiles under it */
};

/* A decoder, or NULL without memory.  jpg_free accepts NULL. */
struct jpg_dec *jpg_new(void);
void jpg_free(struct jpg_dec *d);

/*
 * Reads the header of the JPEG in buf[0..len) (which must stay valid until
 * the image is done) and checks it against lim.  Returns 0 with *hdr, or a
 * negative errno (see above) with err set; the image is then done.
 */
int jpg_open(struct jpg_dec *d, const uint8_t *buf, size_t len, const struct jpg_limits *lim,
             struct jpg_header *hdr, struct rf_err *err);

/*
 * After jpg_open: starts decoding at scale s/8 (1 <= s <= 8) and gives the
 * scaled size, ceil(width * s / 8) x ceil(height * s / 8).  Returns 0 or a
 * negative errno with err set (the image is then done).
 */
int jpg_start(struct jpg_dec *d, unsigned s, uint32_t *width, uint32_t *height,
              struct rf_err *err);

/*
 * After jpg_start: decodes at least [x0, x1) x [y0, y1) of the scaled image
 * (0 <= x0 < x1 <= width, 0 <= y0 < y1 <= height) into *roi, which may
 * start left of x0 and end right of x1 (iMCU alignment) but holds exactly
 * rows y0 .. y1 - 1.  The image is done afterwards, whatever the result.
 * Returns 0 or a negative errno with err set.
 */
int jpg_read(struct jpg_dec *d, uint32_t x0, uint32_t x1, uint32_t y0, uint32_t y1,
             struct jpg_roi *roi, struct rf_err *err);

/* Ends the current image early (nothing happens when none is open). */
void jpg_abort(struct jpg_dec *d);

/*
 * The smallest s of 1, 2, 4 such that spans of span_x by span_y pixels
 * scaled by s/8 are at least cover x need on both sides, else 8 (the full
 * scale; the resize enlarges what falls short).
 *
 * Train crops take JPG_COVER_TRAIN: 1/2 from a crop of 1.25 x the output
 * on, 1/4 from 2.5 x, 1/8 from 5 x.  Measured by bench/jpeg-scale on 120
 * train crops to 224 of each photo set (against Pillow's full decode +
 * BILINEAR resize; times of decode + resize): mean absolute difference
 * 0.34 (the ImageNet-like set), 0.38 (the --mix set: progressive, 4:4:4,
 * 4:2:2, grey, odd sizes) and 0.39 (all progressive), no bucket of
 * crop/output above 0.88, for 1.15x, 1.11x and 1.07x the speed of
 * requiring the full output size (MAD 0.12-0.14).  0.5 (1/2 from 1 x) is
 * faster still (1.22x, 1.17x) but a bucket's mean reaches 1.1-2.0.
 * Eval takes JPG_COVER_EVAL, the full output size: its fixed center crop
 * is what validation accuracy is measured on, and an enlarged half-scale
 * decode of a detailed 333x444 photo differs from Pillow's by 2.3 (0.16 at
 * full size; tests/integration/test_jpeg.py's set).
 *
 * Only powers of two: libjpeg-turbo has SIMD inverse DCTs for 8x8, 4x4,
 * 2x2 and 1x1 only, and its plain-C 3/8, 5/8, 6/8 and 7/8 decode slower
 * than the full scale (bench/jpeg-scale: 1.03-1.77x its time).
 */
#define JPG_COVER_TRAIN 0.625
#define JPG_COVER_EVAL 1.0
unsigned jpg_pick_scale(double span_x, double span_y, uint32_t need, double cover);

/* From the next jpg_start on: chroma upsampled by libjpeg's "fancy"
 * triangle filter (false, the default: what Pillow and libjpeg's own
 * default do) or merged with the color conversion (true: libjpeg-turbo's
 * h2v1/h2v2 merged upsampler, faster, replicating each chroma sample). */
void jpg_set_merged(struct jpg_dec *d, bool merged);

/* From the next jpg_start on: libjpeg's fast integer inverse DCT
 * (JDCT_IFAST, less accurate) instead of the accurate one (JDCT_ISLOW, the
 * default, what Pillow uses). */
void jpg_set_fast_dct(struct jpg_dec *d, bool fast);

/* From the next jpg_open on: decode a crop from the restart-interval tiles
 * that cover it when the file has them (true, the default), or always from
 * the file itself (false: the tests' reference). */
void jpg_set_tiles(struct jpg_dec *d, bool tiles);

/*
 * Markers read as libjpeg reads them (jpeg_scan.c has the rules): a walk
 * that disagrees with libjpeg about where a segment starts reads other
 * bytes than the decoder does.
 *
 * jpg_marker_next: from off (just past the previous marker or segment),
 * the offset of the next marker's code byte, past any fill bytes (the FF
 * before the code is at the result - 1), or len when the buffer ends
 * first.  Adds to *junk the bytes skipped that are not fill (stray bytes
 * and FF 00 pairs: libjpeg warns of them, the decoder refuses the file).
 *
 * jpg_marker_span: for the marker whose code byte is at buf[at], how many
 * bytes after the code its segment spans as libjpeg skips them (0 for
 * RSTn, TEM, SOI and EOI; a length of 0 or 1 for APPn, COM and DNL counts
 * as 2).  Returns 0 with *span, -EBADMSG for a marker libjpeg refuses (an
 * unknown code or a SOFn it does not decode, a segment it parses shorter
 * than its length word), or -ENODATA when the segment runs past len.
 */
size_t jpg_marker_next(const uint8_t *buf, size_t len, size_t off, size_t *junk);
int jpg_marker_span(const uint8_t *buf, size_t len, size_t at, size_t *span);

/*
 * Counts the scans (SOS markers) of the JPEG in buf[0..len) by walking its
 * marker segments and skipping entropy-coded data to the next marker; a
 * pure function of the buffer.  Stops counting past `stop` (returns stop +
 * 1 then) so a hostile file costs little.  Returns the count, or -EBADMSG
 * when buf does not start with SOI or holds a marker libjpeg refuses
 * (jpg_marker_span).  Data truncated inside a segment ends the count there
 * (the decoder reports it).
 */
int jpg_count_scans(const uint8_t *buf, size_t len, uint32_t stop);

/*
 * A single-scan JPEG's restart intervals as tiles (jpeg_tiles.c): with a
 * restart marker every `interval` MCUs and `interval` dividing the MCUs of
 * a row, tile (c, r) is MCUs c * interval .. (c + 1) * interval - 1 of MCU
 * row r, and its entropy-coded data decodes on its own.  ringfeed-pack
 * stores JPEGs so (tools/jpeg_restart.h), and cameras often write them so.
 * jpg_read decodes a crop from the tiles that cover it (jpeg.c).
 *
 * The caller fills the geometry from the header; jpg_tiles_find fills the
 * offsets.  Invariant after a successful find of R rows: data <= end[0]
 * <= end[1] ... <= end[cols * R - 1] <= len, and end[i] for i < cols *
 * t->rows - 1 is an RSTn marker numbered i mod 8.
 */
struct jpg_tiles {
    uint32_t mcu_w, mcu_h;   /* an MCU's size in pixels */
    uint32_t interval;       /* MCUs a tile */
    uint32_t cols, rows;     /* tiles across a row (MCUs a row / interval), MCU rows */
    size_t sof;              /* offset of the SOF0/SOF1 marker's FF (after any fill) */
    size_t data;             /* the first entropy-coded byte */
    size_t *end;             /* per tile: offset of the marker after its data */
    size_t end_cap;          /* bytes at end */
};

/* Locates the SOF segment, the scan's data and the marker ending each tile
 * of the first `rows` MCU rows (1..t->rows; the scan stops there, since a
 * crop needs no tile below it) in buf[0..len).  Returns 0, -EBADMSG when
 * the file is not laid out so (another SOF, a progressive or arithmetic
 * file, too few restart markers, more than the header's tiles, or out of
 * sequence: the caller decodes it the ordinary way, which reports real
 * damage), or -ENOMEM.  end[] is valid for those rows' tiles only. */
int jpg_tiles_find(const uint8_t *buf, size_t len, struct jpg_tiles *t, uint32_t rows);

/* Bytes jpg_tiles_build may write for tiles [c0, c1) x [r0, r1). */
size_t jpg_tiles_size(const uint8_t *buf, const struct jpg_tiles *t, uint32_t c0, uint32_t c1,
                      uint32_t r0, uint32_t r1);

/* Writes to out the JPEG of tiles [c0, c1) x [r0, r1) (0 <= c0 < c1 <=
 * cols, 0 <= r0 < r1 <= rows) of the found file, width x height pixels
 * (the tiles' extent, clipped to the image): buf's headers with that size
 * in the SOF, the tiles' data with restart markers from RST0, EOI.
 * Returns its length. */
size_t jpg_tiles_build(const uint8_t *buf, const struct jpg_tiles *t, uint32_t c0, uint32_t c1,
                       uint32_t r0, uint32_t r1, uint32_t width, uint32_t height, uint8_t *out);

void jpg_tiles_free(struct jpg_tiles *t);

#endif
