/*
 * targets.h - fields that follow an image field's crop: boxes (a ragged
 * f32 x 4 field declared boxes=IMAGE) and masks (a one-channel image field
 * declared mask=IMAGE), proto/schema.h.
 *
 * Each image transform (train, eval, none) leaves, after an apply that
 * returned 0, how its source mapped onto its output in struct xform_ctx's
 * view (transform.h): the source box [x0, x1) x [y0, y1), in the source's
 * full-scale pixels, that became the whole out_w x out_h output, then a
 * left-right mirror when flip; and the same as the integer grid the masks
 * are resampled on (cx .. oy below).
 *
 *   train  torchvision's RandomResizedCrop box (top i, left j, h, w):
 *          x0 = j, x1 = j + w; grid: c = (j, i, w, h), r = (size, size),
 *          o = (0, 0)
 *   eval   Resize to rw x rh then CenterCrop at (left, top), as one box:
 *          x0 = left * (W / rw), x1 = (left + size) * (W / rw) (y alike);
 *          grid: c = (0, 0, W, H), r = (rw, rh), o = (left, top)
 *   none   the whole image, no flip: x0 = 0, x1 = W; grid: c = (0, 0, W,
 *          H), r = (W, H), o = (0, 0)
 *
 * Boxes (x0, y0, x1, y1 in source pixels, f32) map through the box in
 * doubles: (x - v.x0) * out_w / (v.x1 - v.x0), y alike; when flip, x
 * becomes out_w - x (and the two x swap, so x0 <= x1 stays true); then
 * each coordinate is clipped to [0, out_w] or [0, out_h] and stored as
 * f32.  A box is kept when its centre ((x0 + x1) / 2, (y0 + y1) / 2, in
 * source pixels) lies in the half-open source box: v.x0 <= cx < v.x1 and
 * v.y0 <= cy < v.y1; the others are dropped (the caller counts them).
 *
 * Masks (class indices, u8 or u16) are resampled nearest-neighbour
 * exactly as Pillow's NEAREST resize does it for torchvision's
 * resized_crop (train), Resize + CenterCrop (eval) and hflip, found by
 * experiment with Pillow 9.4 on modes L (u8) and I (what a 16-bit PNG
 * opens as), bit for bit: along x, with a = (double)cw / rw, the k-th
 * column of the rw-wide resize reads source column cx + (int)t_k where
 * t_0 = a * 0.5 and t_(k+1) = t_k + a, each sum rounded to double as it
 * goes (an accumulation, not (k + 0.5) * a: the two differ by a column
 * somewhere for one in five random size pairs of up to 2000 -> 600); a
 * (int)t_k of cw or more reads 0, as Pillow fills.
 * Output column x is the resize's column ox + x, or ox + out_w - 1 - x
 * when flip; rows alike with (cy, ch, rh, oy), never mirrored.  (Pillow's
 * mode I;16, what Image.fromarray makes of a uint16 array, takes another
 * path, floor((k + 0.5) * a): resample u16 masks as mode I to compare.)
 * So a mask stays aligned pixel for pixel with its image.  A mask whose
 * size is not the view's src_w x src_h is a bad sample (BAD_SHAPE) naming
 * both sizes.
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
    /* the masks' grid (above): the integer source region [cx, cx + cw) x
     * [cy, cy + ch) resized to rw x rh, of which columns [ox, ox + out_w)
     * and rows [oy, oy + out_h) are the output */
    uint32_t cx, cy, cw, ch;
    uint32_t rw, rh;
    uint32_t ox, oy;
};

/*
 * Maps n boxes (n x 4 floats at in, xyxy in source pixels) through v into
 * out (room for n x 4; it may be in), keeping their order.  Returns how
 * many were kept (the first rows of out); the others' centres left the
 * source box.  A box with x1 < x0 or y1 < y0,
 * or a coordinate that is not finite, is bad: -EBADMSG with err naming
 * its row (the caller makes the sample bad); so is n over INT32_MAX.
 * keep, unless NULL, gets n bytes: 1 for each box kept, 0 for each
 * dropped, so fields of one row per box (schema.h rows=) drop the same.
 */
int tgt_boxes(const struct tgt_view *v, const float *in, uint32_t n, float *out,
              uint8_t *keep, struct rf_err *err);

/*
 * Writes the mask record part (rec, len bytes: an RFPX record of one
 * channel, value_bytes per value) through v into dst: out_h rows of out_w
 * values of value_bytes (1 or 2; u16 little-endian, as in the record).
 * Returns 0, or -EBADMSG with *why (BAD_DECODE: not a one-channel RFPX
 * record of that value size; BAD_SHAPE: not src_w x src_h) and err saying
 * which; -EINVAL (err set, *why BAD_SHAPE) for a view whose grid does not
 * fit its sizes or a value_bytes other than 1 or 2, which is the caller's
 * bug.  Only stores to dst (a ring slot may be client-written:
 * proto/ring.h T2).
 */
int tgt_mask(const struct tgt_view *v, const void *rec, size_t len, uint32_t value_bytes,
             uint8_t *dst, enum wire_bad *why, struct rf_err *err);

#endif
