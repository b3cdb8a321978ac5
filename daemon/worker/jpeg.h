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
 *                  the scaled image: jpeg_crop_scanline for the columns
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
 * The smallest s of 1, 2, 4, 8 such that spans of span_x by span_y pixels
 * scaled by s/8 still cover need x need output pixels; 8 when even the full
 * scale falls short (the resize then enlarges).  Only powers of two:
 * libjpeg-turbo has SIMD inverse DCTs for 8x8, 4x4, 2x2 and 1x1 only, and
 * its plain-C 3/8, 5/8, 6/8 and 7/8 (with 4:2:0 chroma at twice that) decode
 * a 500x375 photo slower than the full scale does (measured: 1.2-1.8 ms
 * against 0.75 ms; 1/2 takes 0.63 ms), so the resampler takes up the rest.
 */
unsigned jpg_pick_scale(double span_x, double span_y, uint32_t need);

/* From the next jpg_start on: chroma upsampled by libjpeg's "fancy"
 * triangle filter (false, the default: what Pillow and libjpeg's own
 * default do) or merged with the color conversion (true: libjpeg-turbo's
 * h2v1/h2v2 merged upsampler, faster, replicating each chroma sample). */
void jpg_set_merged(struct jpg_dec *d, bool merged);

/*
 * Counts the scans (SOS markers) of the JPEG in buf[0..len) by walking its
 * marker segments and skipping entropy-coded data to the next marker; a
 * pure function of the buffer.  Stops counting past `stop` (returns stop +
 * 1 then) so a hostile file costs little.  Returns the count, or -EBADMSG
 * when buf does not start with SOI or a segment length is malformed.  Data
 * truncated inside a segment ends the count there (the decoder reports it).
 */
int jpg_count_scans(const uint8_t *buf, size_t len, uint32_t stop);

#endif
