/*
 * aug_geom.h - the geometric augmentation ops (aug.h): RandomAffine,
 * RandomRotation, RandomHorizontalFlip / RandomVerticalFlip and
 * RandomCrop with padding, each as a draw (torchvision 0.14's get_params /
 * forward) and an apply matching torchvision's functional op on a uint8
 * tensor; and what each does to the boxes and masks that follow an image.
 *
 * Affine and rotation (torchvision's tensor path, reproduced in float32):
 *   - the inverse matrix is _get_inverse_affine_matrix's, in doubles, with
 *     the centre at the image centre (the tensor path's centre (0, 0)), its
 *     signs: angle and shear clockwise for affine; rotate(a) is affine(-a)
 *     (F.rotate negates the angle), bit for bit;
 *   - the grid is _gen_affine_grid's: output pixel (x, y) has base
 *     bx = x - w/2 + 0.5, by = y - h/2 + 0.5, the float32 theta divided by
 *     (w/2, h/2), gx = fma(by, r1, bx * r0) + r2 (gy alike) -- the rounding
 *     of torch's bmm here, found by experiment and exact on millions of
 *     grid points -- then grid_sample(align_corners=False, zeros padding):
 *     ix = fma(gx + 1, w/2, -0.5); nearest takes round-half-even(ix),
 *     bilinear floors and weighs the four neighbours as its CPU kernel does
 *     (an fma chain nw, ne, sw, se);
 *   - the fill as RandomAffine / RandomRotation pass it (always a list of
 *     c values, so torchvision's mask path): nearest writes the fill where
 *     the nearest source pixel is outside; bilinear samples a mask of ones
 *     alongside and writes round(v * m + (1 - m) * fill).  So with fill 0
 *     a bilinear border is attenuated twice, as torchvision's is; the
 *     functional F.affine(fill=None) (no mask) is not reproduced.
 *   - expand=True (RandomRotation) and centre= are not here: the output is
 *     the input's size, centred; refusing them is the pipeline's job.
 * Every op works on c = 1 to 4 channels.  The index-only ops (nearest
 * affine, flips, pad-crop) move whole channel bytes, so a u16 mask goes
 * through them as an HWC image of c = 2 (its two bytes).
 *
 * Boxes (xyxy f32, in the image's pixels, the image spanning [0, w] x
 * [0, h]) follow an op through its forward map (struct aug_map): the four
 * corners are mapped, their enclosing box taken; a box is kept when the
 * mapped centre of the original box (the centre of that enclosing box)
 * lies in [0, out_w) x [0, out_h), then clipped to [0, out_w] x [0,
 * out_h]; the others are dropped (targets.h's rule for the train crop).
 * Reflected copies of objects in reflect / symmetric padding get no box.
 * Masks go through the same op: aug_affine with AUG_NEAREST and fill 0,
 * the flips, aug_pad_crop with the image's padding mode and fill 0.
 *
 * All functions are pure functions of their arguments (tests drive them
 * through tests/aug_geom_run.c).
 */
#ifndef RINGFEED_DAEMON_WORKER_AUG_GEOM_H
#define RINGFEED_DAEMON_WORKER_AUG_GEOM_H

#include <stdbool.h>
#include <stdint.h>

#include "aug.h"
#include "err.h"
#include "rng.h"

enum aug_interp {
    AUG_NEAREST = 0,
    AUG_BILINEAR = 1,
};

/* RandomCrop's padding_mode (F.pad): constant (the fill), edge (the last
 * pixel), reflect (without repeating the edge: 3 2 | 1 2 3 4), symmetric
 * (repeating it: 2 1 | 1 2 3 4).  Where torchvision refuses a pad wider
 * than the image (reflect: pad >= size; symmetric: pad > size) the
 * reflection repeats, as numpy.pad does (a period of 2 (n - 1) or 2 n). */
enum aug_pad {
    AUG_PAD_CONSTANT = 0,
    AUG_PAD_EDGE = 1,
    AUG_PAD_REFLECT = 2,
    AUG_PAD_SYMMETRIC = 3,
};

/* RandomAffine's parameters: F.affine(angle, (tx, ty), scale, (shear_x,
 * shear_y)), degrees clockwise, translations in pixels. */
struct aug_affine_params {
    float angle, tx, ty, scale, shear_x, shear_y;
};

/*
 * RandomAffine.get_params: angle uniform on [degrees[0], degrees[1]); then,
 * when translate (two fractions) is not NULL, tx = round(uniform(-t0 * w,
 * t0 * w)) and ty alike with t1 * h (round half to even, as Python's
 * round); then, when scale_range is not NULL, scale uniform on it (else
 * 1); then, when n_shear is 2 or 4, shear_x uniform on [shear[0],
 * shear[1]) and, when 4, shear_y on [shear[2], shear[3]) (else 0).  One
 * draw per value drawn, in that order, as torchvision draws them; each
 * value is rounded to float as torch's float32 uniform_ gives it.
 */
void aug_draw_affine(struct rng_stream *rng, const double degrees[2], const double *translate,
                     const double *scale_range, const double *shear, uint32_t n_shear,
                     uint32_t w, uint32_t h, struct aug_affine_params *out);

/* RandomRotation.get_params: the angle uniform on [degrees[0], degrees[1]),
 * counter-clockwise, as a float. */
float aug_draw_rotate(struct rng_stream *rng, const double degrees[2]);

/* RandomHorizontalFlip / RandomVerticalFlip's decision: torch.rand(1) < p
 * (one draw). */
bool aug_draw_flip(struct rng_stream *rng, double p);

/*
 * F.affine on im in place (see the file's comment for the exact math).
 * fill: c values, or NULL for zeros (RandomAffine's default fill=0).
 * scale must be > 0 and all parameters finite (-EINVAL otherwise: the
 * pipeline checks its arguments; this keeps a bad one from reaching the
 * pixels).  Borrows h*w*c + 8 (w + h) bytes of s.  Returns 0, -EINVAL or
 * -ENOMEM (im untouched then).
 */
int aug_affine(struct aug_img *im, float angle_deg, float tx, float ty, float scale,
               float shear_x_deg, float shear_y_deg, enum aug_interp interp,
               const uint8_t *fill, struct aug_scratch *s);

/* F.rotate(angle, expand=False, centre at the middle): aug_affine with
 * -angle and nothing else, as torchvision computes it.  Same returns. */
int aug_rotate(struct aug_img *im, float angle_deg, enum aug_interp interp,
               const uint8_t *fill, struct aug_scratch *s);

/* F.hflip / F.vflip in place; exact. */
void aug_hflip(struct aug_img *im);
void aug_vflip(struct aug_img *im);

/*
 * RandomCrop's decisions for a w x h image: padding (l, t, r, b; F.pad's
 * four-value form), then with pad_if_needed the extra padding of the
 * padded image's width deficit on both the left and the right (need_x =
 * crop_w - padded width, when positive) and its height deficit on the top
 * and the bottom (need_y), then the crop's top and left as get_params
 * draws them on the padded image: none drawn when it is exactly the crop's
 * size, else top = randint(0, H - crop_h + 1) then left = randint(0, W -
 * crop_w + 1) (two draws).  padding NULL is no padding.  Returns 0, or
 * -EINVAL when the padded image is smaller than the crop (torchvision's
 * "Required crop size ... is larger than input image size"), nothing
 * drawn then.
 */
struct aug_crop_params {
    uint32_t pad_l, pad_t, pad_r, pad_b; /* RandomCrop's padding */
    uint32_t need_x, need_y;             /* pad_if_needed's, on both sides */
    uint32_t top, left;                  /* the crop in the padded image */
};

int aug_draw_pad_crop(struct rng_stream *rng, uint32_t w, uint32_t h, const uint32_t *padding,
                      bool pad_if_needed, uint32_t crop_w, uint32_t crop_h,
                      struct aug_crop_params *out);

/*
 * RandomCrop.forward: F.pad(in, (pad_l, pad_t, pad_r, pad_b), mode), then
 * F.pad with (need_x, need_x, need_y, need_y) on the padded image (two
 * stages, as torchvision pads: they differ from one wider pad for reflect
 * and symmetric), then F.crop(top, left, out->h, out->w).  out gives the
 * crop's size, the buffer and its layout; it has in's c and layout.  fill
 * (c values, or NULL for zeros) is used in constant mode only.  Exact.
 * out->px may be in->px (the slot, when the sizes agree) or overlap it
 * anyhow: in is then copied to s first.  Borrows 4 (out_w + out_h) bytes
 * of s, plus in's size when they overlap.  Returns 0, -EINVAL (c or
 * layout differ, or the crop leaves the padded image), or -ENOMEM.
 */
int aug_pad_crop(const struct aug_img *in, struct aug_img *out, const struct aug_crop_params *p,
                 enum aug_pad mode, const uint8_t *fill, struct aug_scratch *s);

/*
 * A geometric op's forward map of points, for the boxes: (x, y) in the
 * input's pixels (the image spanning [0, w] x [0, h]) goes to (m[0] x +
 * m[1] y + m[2], m[3] x + m[4] y + m[5]) in an output of out_w x out_h.
 */
struct aug_map {
    double m[6];
    uint32_t out_w, out_h;
};

/* The forward map of aug_affine on a w x h image: torchvision's
 * non-inverted matrix about the centre (w/2, h/2), in doubles. */
void aug_map_affine(uint32_t w, uint32_t h, const struct aug_affine_params *p,
                    struct aug_map *out);
/* ... of aug_rotate (the affine of -angle). */
void aug_map_rotate(uint32_t w, uint32_t h, float angle_deg, struct aug_map *out);
void aug_map_hflip(uint32_t w, uint32_t h, struct aug_map *out);
void aug_map_vflip(uint32_t w, uint32_t h, struct aug_map *out);
/* ... of aug_pad_crop to a crop_w x crop_h output: a shift. */
void aug_map_pad_crop(const struct aug_crop_params *p, uint32_t crop_w, uint32_t crop_h,
                      struct aug_map *out);

/*
 * Box r of in (xyxy floats) into b as doubles: 0, or -EBADMSG with err
 * naming the row when a coordinate is not finite or x1 < x0 or y1 < y0.
 * The one check of a box that aug_boxes and targets.c's tgt_boxes share.
 */
int aug_box_read(const float *in, uint32_t r, double b[4], struct rf_err *err);

/*
 * Maps n boxes (n x 4 floats at in, xyxy) through map into out (room for n
 * x 4; it may be in), keeping their order (the rule in the file's
 * comment).  Returns how many were kept (the first rows of out).  keep,
 * unless NULL, gets n bytes: 1 for each box kept, 0 for each dropped.  A
 * box with x1 < x0 or y1 < y0 or a coordinate that is not finite is bad:
 * -EBADMSG with err naming its row; so is n over INT32_MAX.
 */
int aug_boxes(const struct aug_map *map, const float *in, uint32_t n, float *out, uint8_t *keep,
              struct rf_err *err);

#endif
