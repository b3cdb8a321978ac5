/*
 * cmyk.h - how a CMYK (or YCCK, which libjpeg gives as CMYK) JPEG becomes
 * RGB: the one rule the workers serve (daemon/worker/jpeg.c) and the
 * packer re-encodes by (ringfeed-pack --max-side), so a CMYK photograph is
 * the same pixels from either.  Pillow's Image.convert("RGB"): with
 * nk = 255 - K, R = nk - C * nk / 255 rounded as Pillow's MULDIV255; files
 * with an Adobe APP14 marker store every channel inverted.
 */
#ifndef RINGFEED_PROTO_CMYK_H
#define RINGFEED_PROTO_CMYK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* In place, n CMYK pixels (4 bytes) to n RGB pixels (3 bytes) from the
 * start of p; adobe: the channels are stored inverted. */
void cmyk_to_rgb(uint8_t *p, size_t n, bool adobe);

#endif
