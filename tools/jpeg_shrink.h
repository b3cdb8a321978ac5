/*
 * jpeg_shrink.h - `ringfeed-pack imagefolder --max-side N`: a JPEG whose
 * longer side exceeds N decoded, downscaled to a longer side of exactly N
 * and encoded again, one row at a time (no whole image is held, except the
 * coefficients libjpeg keeps for a progressive file).
 *
 * The filter is an exact box (area) average, OpenCV's INTER_AREA and what
 * FFCV's max_resolution uses: output pixel (x, y) is the mean of the source
 * area it covers, partly covered source pixels weighted by the fraction
 * covered.  In integers: with the source scaled by dw and the output by sw
 * (and dh, sh vertically) every edge falls on an integer, the weights are
 * integers that sum to sw * sh, and the mean is rounded half up, so the
 * result is exact and the same on every machine.  A box is the right
 * filter for shrinking (every source pixel counts once, no ringing); the
 * factors here are at least 1 on both axes by construction.
 *
 * Sizes: the longer side becomes N, the other round(side * N / longer)
 * (half up), at least 1 (shrink_dims).
 *
 * What the decoder gives and the encoder writes (the choices, and why):
 *   - grayscale stays grayscale (one component): what ringfeedd's decoder
 *     expands to R = G = B is the same either way, at a third of the bytes;
 *   - YCbCr and RGB files come out RGB and are written YCbCr 4:2:0,
 *     baseline, Huffman tables optimized: 4:2:0 is what Pillow and OpenCV
 *     (so FFCV) write by default and what most photographs (ImageNet's
 *     among them) already are; it decodes fastest in the workers (a
 *     quarter of the chroma samples, libjpeg-turbo's SIMD upsampler); a
 *     4:4:4 source loses chroma detail, which downscaling has mostly
 *     removed already and to which models (and eyes) are least sensitive.
 *     Baseline, not progressive: a progressive file decodes about twice as
 *     slowly and ringfeedd caps its scans.  Restart markers every
 *     jpeg_restart_interval() MCUs, as the lossless re-encoding writes
 *     them (jpeg_restart.h: the rule, and why), so a worker's crop
 *     decodes only the restart intervals it covers;
 *   - CMYK and YCCK are converted to RGB exactly as ringfeedd's decoder
 *     converts them when it serves such a file (the same function,
 *     proto/cmyk.h: Pillow's convert("RGB"), Adobe inversion undone), then
 *     written as RGB would be: the model sees the colours it would have
 *     seen from the original, and the dataset's records are all
 *     gray/YCbCr.  (Storing them as they are would leave full-size images
 *     in a pack whose manifest says max_side.)
 *   - markers (EXIF, ICC profiles, comments) are not copied: ringfeedd
 *     ignores them, as torchvision's default loader does.
 *   - decoding is as strict as ringfeedd's: the accurate integer IDCT, and
 *     any libjpeg warning (corrupt or truncated data, which libjpeg papers
 *     over with grey) or more than JPAIR_SCAN_CAP scans is a failure, so
 *     a file whose data the daemon finds corrupt is never re-encoded into
 *     one it serves.  Rows after the last are not read (no EOI check), as
 *     in the daemon.
 *
 * One shrinker is used by one thread, for one image at a time, and keeps
 * its libjpeg objects and buffers for the next image.
 */
#ifndef RINGFEED_TOOLS_JPEG_SHRINK_H
#define RINGFEED_TOOLS_JPEG_SHRINK_H

#include <stddef.h>
#include <stdint.h>

#include "jpeg_pair.h"   /* JPAIR_SCAN_CAP, JPAIR_MEM_MAX */

/*
 * The box resampler, streaming: source rows go in one at a time, output
 * rows come out as soon as the last source row they cover has gone in.
 */
struct shrink_tap {
    uint32_t first;           /* first source column covered */
    uint32_t count;           /* columns covered, partly or wholly */
    uint32_t wfirst, wlast;   /* the first and last one's weights (the
                                 ones between weigh dw); wlast 0 if count 1 */
};

struct shrink_box {
    uint32_t sw, sh, dw, dh, ch;
    struct shrink_tap *taps;  /* dw */
    uint32_t *hrow;           /* dw * ch: a source row resampled across */
    uint64_t *acc[2];         /* dw * ch: output rows j (j % 2) summing */
    uint8_t *out;             /* dw * ch: the row shrink_box_push gives */
    uint32_t y;               /* source rows pushed */
};

/*
 * Sets b up for sw x sh -> dw x dh with ch interleaved channels (1..4);
 * needs 1 <= dw <= sw, 1 <= dh <= sh.  b need not be initialised; free it
 * with shrink_box_free whatever the result.  Returns 0, -EINVAL or -ENOMEM.
 */
int shrink_box_init(struct shrink_box *b, uint32_t sw, uint32_t sh,
                    uint32_t dw, uint32_t dh, uint32_t ch);

/*
 * Takes the next source row (sw * ch bytes).  Returns the output row it
 * completed (dw * ch bytes, owned by b, valid until the next push), or
 * NULL when it completed none; every source row completes at most one,
 * and the last (row sh - 1) completes output row dh - 1.  A push past the
 * last row is ignored (NULL).
 */
const uint8_t *shrink_box_push(struct shrink_box *b, const uint8_t *row);

/* Frees what b holds and zeroes it.  Accepts a zeroed struct. */
void shrink_box_free(struct shrink_box *b);

/*
 * The size a w x h image is stored at under max_side: returns 1 with
 * *dw x *dh when the longer side exceeds max_side, else 0 with w x h.
 */
int shrink_dims(uint32_t w, uint32_t h, uint32_t max_side, uint32_t *dw,
                uint32_t *dh);

struct shrinker;

/* A shrinker, or NULL when out of memory.  shrinker_free accepts NULL. */
struct shrinker *shrinker_new(void);
void shrinker_free(struct shrinker *s);

/*
 * Decodes the JPEG of len bytes at buf, shrinks it to shrink_dims' size
 * under max_side (16..65535; an image already within it is encoded at its
 * size) and encodes it at quality (1..100).  Returns 0 with *out (*out_len
 * bytes, owned by s, valid until its next run) and the size in *w x *h;
 * or, with a reason in why (why_cap bytes, always terminated):
 *   -EBADMSG  it does not decode: corrupt, truncated, a libjpeg warning,
 *             over JPAIR_SCAN_CAP scans, an unsupported colour space;
 *   -E2BIG    libjpeg would need more than JPAIR_MEM_MAX for it;
 *   -ENOMEM   out of memory;
 *   -EPROTO   the encoder failed on a decoded image (not the source's
 *             fault: a bug to report);
 *   -EINVAL   max_side or quality out of range.
 */
int shrinker_run(struct shrinker *s, const uint8_t *buf, size_t len,
                 uint32_t max_side, int quality, const uint8_t **out,
                 size_t *out_len, uint32_t *w, uint32_t *h, char *why,
                 size_t why_cap);

/*
 * Encodes w x h RGB pixels (rows of w * 3 bytes, top to bottom) as a JPEG
 * the way shrinker_run encodes: baseline 4:2:0 at quality (1..100),
 * optimized Huffman tables, restart markers by jpeg_restart.h's rule
 * (ringfeed-pack imagefolder --image-mode jpeg or smart, for the formats
 * other than JPEG).  Returns 0 with *out (*out_len bytes, owned by s,
 * valid until its next run), or -ENOMEM, -EPROTO (the encoder failed: a
 * bug to report) or -EINVAL (quality or a side out of range) with a
 * reason in why.
 */
int shrinker_encode_rgb(struct shrinker *s, const uint8_t *rgb, uint32_t w,
                        uint32_t h, int quality, const uint8_t **out,
                        size_t *out_len, char *why, size_t why_cap);

#endif
