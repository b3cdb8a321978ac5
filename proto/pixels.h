/*
 * pixels.h - an image record stored as its decoded pixels (RFPX), beside
 * the JPEG records of an image dataset: what ringfeed-pack imagefolder
 * writes for a PNG, WebP, BMP, TIFF or PPM/PGM file (converted as
 * torchvision's ImageFolder + convert("RGB") would), so its pixels are kept
 * exact and the workers crop and resize them with no decode.
 *
 *   byte 0
 *   +--------------------------------------------------------------+
 *   |  0  magic     4  "RFPX"                                      |
 *   |  4  version   1  PX_VERSION (1)                              |
 *   |  5  channels  1  3 (RGB), or 1 (one plane: a mask)           |
 *   |  6  values    1  0: one byte per value; 2: two (u16, little- |
 *   |                  endian; one channel only)                   |
 *   |  7  reserved  1  0                                           |
 *   |  8  width     4  pixels, little-endian, 1..PX_SIDE_MAX       |
 *   | 12  height    4  pixels, little-endian, 1..PX_SIDE_MAX       |
 *   +--------------------------------------------------------------+ 16
 *   | height rows of width x channels values, top to bottom, R G B |
 *   +--------------------------------------------------------------+ 16 + w*h*c*v
 *
 * One-channel records (a segmentation mask's class indices, u8 or u16)
 * are for kind fields' image fields of channels=1 (schema.h); px_parse
 * takes RGB only, as every reader of an RGB image field wants, and
 * px_parse_any both.
 *
 * A record is exactly that long: px_parse refuses one byte more or less.
 * A JPEG record starts FF D8, so the two never look alike.  The shard
 * stores the record with any codec (zstd, usually); what is parsed here is
 * the decoded record.  A dataset that holds any RFPX record says so in its
 * MANIFEST (raw_images, manifest.h), so a reader that predates them
 * refuses it rather than serve these records as bad JPEGs.
 *
 * Pure functions of a buffer (a fuzz target: tests/fuzz/fuzz_pixels.c).
 */
#ifndef RINGFEED_PROTO_PIXELS_H
#define RINGFEED_PROTO_PIXELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define PX_MAGIC       "RFPX"
#define PX_VERSION     1u
#define PX_HEADER_SIZE 16u
#define PX_CHANNELS    3u
#define PX_SIDE_MAX    65535u

struct px_header {
    uint32_t width, height, channels;
    uint32_t value_bytes;    /* 1, or 2 for u16 (one channel) */
    const uint8_t *pixels;   /* into the parsed buffer: height rows of width*channels */
};

/* true when the len bytes at buf start with the RFPX magic (len >= 4). */
bool px_is(const void *buf, size_t len);

/* Bytes of a record of width x height RGB pixels; 0 when out of range. */
size_t px_record_size(uint32_t width, uint32_t height);

/* Writes the header of a width x height record at buf (PX_HEADER_SIZE
 * bytes); the caller writes the pixels after it.  The sides must be in
 * range (px_record_size != 0). */
void px_write_header(void *buf, uint32_t width, uint32_t height);

/* The same for any record this format allows: channels 3 with 1-byte
 * values, or channels 1 with 1 or 2; 0 for anything else. */
size_t px_record_size_of(uint32_t width, uint32_t height, uint32_t channels,
                         uint32_t value_bytes);
void px_write_header_of(void *buf, uint32_t width, uint32_t height, uint32_t channels,
                        uint32_t value_bytes);
/* As px_parse, for any record (RGB or one channel of u8 or u16); the
 * caller checks h->channels and h->value_bytes against what it wants. */
int px_parse_any(const void *buf, size_t len, struct px_header *h, struct rf_err *err);

/* Checks the len bytes at buf as one RGB record and fills *h.  Returns 0, or
 * -EBADMSG with err naming what is wrong (magic, version, channels,
 * reserved bytes, a side, or the length against the sides). */
int px_parse(const void *buf, size_t len, struct px_header *h, struct rf_err *err);

#endif
