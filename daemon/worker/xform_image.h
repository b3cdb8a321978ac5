/*
 * xform_image.h - the image transforms of the workers' table (transform.c):
 *
 *   train  torchvision's RandomResizedCrop(size, scale, ratio) then
 *          RandomHorizontalFlip(flip): the crop's parameters exactly as
 *          RandomResizedCrop.get_params draws them (10 attempts, then the
 *          central fallback), each draw from the sample's own stream
 *   eval   torchvision's Resize(int(size / crop)) then CenterCrop(size)
 *          (crop 0.875: Resize(256) + CenterCrop(224) for 224); flip is
 *          ignored
 *
 *   none   the image as it is, no resize, no crop, no flip: for a dataset
 *          whose MANIFEST has image_shape HxW (every image one size),
 *          3 x H x W (chw) or H x W x 3 (hwc).  geometry refuses a dataset
 *          without image_shape (or of another kind), and any size, scale,
 *          ratio or crop other than ATTACH's default, and a flip other than
 *          the default or 0 (none never flips).  An RFPX record is copied;
 *          a JPEG is decoded whole at scale 8/8 (grayscale and CMYK come
 *          out RGB, as for train/eval); either must be H x W, else it is a
 *          bad sample, BAD_SHAPE, naming both sizes.  Decoding (and px_parse)
 *          count as decode time, the copy into the slot as write time.
 *
 * train and eval give size x size uint8 RGB, CHW or HWC; grayscale and CMYK JPEGs
 * come out RGB (jpeg.h).  A plan (struct xfi_plan) says which box of the
 * original image maps onto the output; rendering decodes only that box
 * (plus the filter's reach) at the smallest DCT scale that still covers
 * the output (jpeg.h), then resamples with Pillow's antialiased bilinear
 * filter (resize.h).  The planning functions are pure, for the tests.
 *
 * Bad images (jpeg.h) are bad samples: BAD_DECODE (not a JPEG, corrupt,
 * truncated, any libjpeg warning, an unsupported color space) or
 * BAD_TOO_LARGE (over the pixel cap of the config's pixel-cap, over
 * JPG_SCAN_CAP scans, out of memory); the worker replaces and counts them.
 * The decode stops after the last row a sample needs, so damage below it
 * is not seen: that sample is good, as its pixels are.
 *
 * Stream draws, in order, for train (rng.h):
 *   per attempt (up to 10): rng_uniform_range(scale), rng_uniform_range
 *   (log ratio); when the crop fits: rng_below(H - h + 1) for the top,
 *   rng_below(W - w + 1) for the left; then one rng_bernoulli(flip).
 */
#ifndef RINGFEED_DAEMON_XFORM_IMAGE_H
#define RINGFEED_DAEMON_XFORM_IMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "rng.h"
#include "transform.h"
#include "wire.h"

/* A crop as torchvision's get_params returns it: top, left, height, width. */
struct xfi_crop {
    uint32_t i, j, h, w;
};

/* Which part of the original W x H image becomes the output. */
struct xfi_plan {
    double x0, x1, y0, y1;        /* the box mapped onto the output */
    int32_t lx0, lx1, ly0, ly1;   /* input the filter may read */
    bool flip;                    /* mirror left-right */
};

/*
 * torchvision's RandomResizedCrop.get_params over a width x height image
 * with scale [scale_lo, scale_hi) and log-uniform ratio [ratio_lo,
 * ratio_hi).  Python's round() is round-half-even, as nearbyint here.  One
 * addition: the fallback's crop is at least 1 pixel on each side (where
 * torchvision would make an empty crop of an image far narrower than
 * ratio_lo, and fail).
 */
struct xfi_crop xfi_rrc_params(uint32_t width, uint32_t height, double scale_lo,
                               double scale_hi, double ratio_lo, double ratio_hi,
                               struct rng_stream *rng);

/* train's plan: the crop above, then the flip draw. */
void xfi_train_plan(uint32_t width, uint32_t height, const struct wire_xform *p,
                    struct rng_stream *rng, struct xfi_plan *pl, struct xfi_crop *crop);

/*
 * eval's plan.  torchvision's rules: the shorter side becomes
 * S = int(size / crop) and the longer int(S * long / short); the crop's
 * top and left are round((resized - size) / 2) (half-even).  *rw x *rh is
 * that resized size, *top and *left the crop's corner in it.
 */
void xfi_eval_plan(uint32_t width, uint32_t height, const struct wire_xform *p,
                   struct xfi_plan *pl, uint32_t *rw, uint32_t *rh, uint32_t *top,
                   uint32_t *left);

/* The transforms' working memory in a worker (struct xform_ctx). */
struct xform_image_ctx;
void xform_image_ctx_free(struct xform_image_ctx *ic);

/* The table's entries (transform.c). */
int xform_image_geometry(const struct dataset *ds, const struct wire_xform *p,
                         struct xform_out *out, struct rf_err *err);
int xform_train_apply(const struct dataset *ds, const struct wire_xform *p, const void *rec,
                      size_t rec_len, struct rng_stream *rng, struct xform_ctx *ctx,
                      uint8_t *dst, const struct xform_out *out, enum wire_bad *why,
                      struct rf_err *err);
int xform_eval_apply(const struct dataset *ds, const struct wire_xform *p, const void *rec,
                     size_t rec_len, struct rng_stream *rng, struct xform_ctx *ctx,
                     uint8_t *dst, const struct xform_out *out, enum wire_bad *why,
                     struct rf_err *err);
int xform_none_geometry(const struct dataset *ds, const struct wire_xform *p,
                        struct xform_out *out, struct rf_err *err);
int xform_none_apply(const struct dataset *ds, const struct wire_xform *p, const void *rec,
                     size_t rec_len, struct rng_stream *rng, struct xform_ctx *ctx,
                     uint8_t *dst, const struct xform_out *out, enum wire_bad *why,
                     struct rf_err *err);

#endif
