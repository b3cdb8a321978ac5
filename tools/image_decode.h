/*
 * image_decode.h - the bytes of a PNG, WebP, TIFF, BMP or PPM/PGM file to
 * its RGB pixels (8 bits a channel, rows top to bottom), exactly as
 * Pillow's Image.open(f).convert("RGB") gives them: what torchvision's
 * ImageFolder loader feeds a model, and what `ringfeed-pack imagefolder`
 * stores as an RFPX record (proto/pixels.h) for each such file.
 *
 * The format is told by the first bytes (imgdec_sniff), never by the name.
 * Each format has one decoder, a Debian library, and one conversion rule
 * that was checked against Pillow pixel for pixel
 * (tests/integration/test_pack_formats.py); what a rule cannot match is
 * refused (-ENOTSUP with the reason), never converted some other way:
 *
 *   PNG   libspng, rows as stored (SPNG_FMT_RAW), converted here:
 *         gray 1/2/4/8-bit scaled to 0..255 (x255, x85, x17, x1); gray
 *         16-bit clipped to 255 (Pillow opens it as mode I, and I -> RGB
 *         clips, it does not scale); gray+alpha, RGB, RGBA 8/16-bit: alpha
 *         dropped, 16-bit samples' high byte; palette 1..8-bit through
 *         PLTE (tRNS ignored; an index past the PLTE's entries refused);
 *         gAMA, sBIT, iCCP ignored; interlaced decoded whole.
 *   WebP  libwebp, lossy or lossless, alpha dropped (Pillow decodes RGBA
 *         and convert drops it); animated files refused.
 *   TIFF  libtiff from memory, first directory, rows (or tiles) as
 *         stored, converted here: 8-bit RGB, RGB + unassociated or
 *         unspecified extra sample (alpha dropped), 8-bit gray (MinIsWhite
 *         inverted), 8-bit gray + alpha, 1-bit bilevel, 1/2/4/8-bit
 *         palette (16-bit colormap entries' high byte, as Pillow).
 *         Orientation is not applied (Pillow's open does not).  Refused:
 *         other bit depths, float or signed samples, CMYK, YCbCr, Lab,
 *         premultiplied alpha, separate planes, BigTIFF.
 *   BMP   stb_image (req_comp 3) after checks here: 1/4/8-bit palette
 *         uncompressed (every index within the palette, checked), 24-bit,
 *         32-bit plain or with bit fields R 0xff0000 G 0xff00 B 0xff.
 *         Refused: RLE, 16-bit (Pillow and stb scale 5-bit channels
 *         differently), other masks, OS/2 headers.
 *   PNM   stb_image (req_comp 3): P6 (PPM) and P5 (PGM, gray replicated)
 *         with maxval 255.  Refused: maxval other than 255 (16-bit, or
 *         scaled), ASCII P1-P3, P4 bitmaps, P7 PAM.
 *
 * Memory: the sides are read from the header and an image over
 * PX_SIDE_MAX a side or max_pixels in all is refused (-E2BIG) before
 * anything its size is allocated.  Decoding then holds the image once as
 * stored (at most 8 bytes a pixel: 16-bit RGBA PNG) and once as RGB.
 *
 * Pure functions of a buffer, safe on any number of threads at once
 * (libtiff's messages go to a per-call handler, stb's reason is thread
 * local).  A fuzz target per decoder: tests/fuzz/fuzz_{png,webp,tiff,
 * bmp_pnm}.c.
 */
#ifndef RINGFEED_TOOLS_IMAGE_DECODE_H
#define RINGFEED_TOOLS_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#define IMGDEC_PIXELS_MAX (1ull << 28)   /* default cap: 768 MiB of RGB */

enum imgdec_format {
    IMGDEC_NONE = 0,          /* none of these: JPEG, or not an image */
    IMGDEC_PNG,
    IMGDEC_WEBP,
    IMGDEC_TIFF,
    IMGDEC_BMP,
    IMGDEC_PNM,
    IMGDEC_FORMAT_COUNT
};

/* A decoded image: width x height x 3 bytes at rgb (malloc'd, the
 * caller's to free with imgdec_image_free). */
struct imgdec_image {
    uint8_t *rgb;
    uint32_t width, height;
};

/* The format the len bytes at buf start as (its magic bytes), or
 * IMGDEC_NONE. */
enum imgdec_format imgdec_sniff(const uint8_t *buf, size_t len);

/* "PNG", "WebP", "TIFF", "BMP", "PNM"; NULL for IMGDEC_NONE or unknown. */
const char *imgdec_format_name(enum imgdec_format f);

/*
 * Decodes the len bytes at buf as format f into *im.  Returns 0, or with
 * *im zeroed and a reason in why (why_cap bytes, always terminated):
 *   -EBADMSG  not a valid file of that format (corrupt, truncated);
 *   -ENOTSUP  a valid file whose kind is refused (see the table above);
 *   -E2BIG    a side over PX_SIDE_MAX, or over max_pixels in all;
 *   -ENOMEM   out of memory.
 */
int imgdec_decode(enum imgdec_format f, const uint8_t *buf, size_t len,
                  uint64_t max_pixels, struct imgdec_image *im, char *why,
                  size_t why_cap);

/* Frees im's pixels and zeroes it.  Accepts a zeroed struct. */
void imgdec_image_free(struct imgdec_image *im);

#endif
