/*
 * targets.h - fields that follow an image field's crop: boxes (a ragged
 * f32 x 4 field declared boxes=IMAGE) and masks (a one-channel image field
 * declared mask=IMAGE), proto/schema.h.
 *
 * Each image transform (train, eval, none) leaves, after apply, how its
 * source mapped onto its output in struct xform_ctx's view (transform.h):
 * the source box [x0, x1) x [y0, y1), in the source's full-scale pixels,
 * that became the whole out_w x out_h output, then a left-right mirror
 * when flip.  train: torchvision's RandomResizedCrop box (top i, left j,
 * h, w); eval: Resize then CenterCrop, as one box (left * W / rw ...);
 * none: the whole image, no flip.
 *
 * Boxes (x0, y0, x1, y1 in source pixels) map through the view: scaled
 * by out / box size, mirrored when flip, clipped to the output; a box
 * whose centre lies outside the source box is dropped (and counted).
 *
 * Masks (class indices, u8 or u16) are resized nearest-neighbour the way
 * Pillow's NEAREST does it for torchvision's resized_crop: output pixel x
 * takes source column floor(x0 + (x + 0.5) * (x1 - x0) / out_w), rows
 * likewise, then the mirror; so a mask stays aligned pixel for pixel with
 * its image.  A mask whose size is not its image's is a bad sample
 * (BAD_SHAPE) naming both sizes.
 *
 * Pure functions of their arguments (the tests drive them directly).
 */
#ifndef RINGFEED_DAEMON_TARGETS_H
#define RINGFEED_DAEMON_TARGETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "wire.h"

/* How an image field's source maps onto its output. */
struct tgt_view {
    uint32_t src_w, src_h;  /* the source image at full scale */
    double x0, y0, x1, y1;  /* the source box that becomes the output */
    uint32_t out_w, out_h;
    bool flip;              /* mirrored left-right after the resize */
};

/*
 * Maps n boxes (n x 4 floats at in, xyxy in source pixels) through v into
 * out (room for n x 4), keeping their order.  Returns how many were kept;
 * the others' centres left the source box.  A box with x1 < x0 or y1 < y0,
 * or a coordinate that is not finite, is bad: -EBADMSG with err naming
 * its row (the caller makes the sample bad).
 */
int tgt_boxes(const struct tgt_view *v, const float *in, uint32_t n, float *out,
              struct rf_err *err);

/*
 * Writes the mask record part (rec, len bytes: an RFPX record of one
 * channel, value_bytes per value) through v into dst: out_h rows of out_w
 * values of value_bytes.  Returns 0, or -EBADMSG with *why (BAD_DECODE: not
 * a one-channel RFPX record of that value size; BAD_SHAPE: not src_w x
 * src_h) and err saying which.  Only stores to dst (a ring slot may be
 * client-written: proto/ring.h T2).
 */
int tgt_mask(const struct tgt_view *v, const void *rec, size_t len, uint32_t value_bytes,
             uint8_t *dst, enum wire_bad *why, struct rf_err *err);

#endif
