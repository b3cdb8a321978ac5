/*
 * aug_color.h - the photometric augmentation ops (torchvision 0.14's
 * ColorJitter, RandomGrayscale, GaussianBlur, RandomPosterize,
 * RandomSolarize, RandomAdjustSharpness, RandomAutocontrast, RandomEqualize
 * and RandomInvert) on a uint8 image in place (aug.h), and their draws.
 *
 * Each op reproduces torchvision's functional op on a uint8 tensor of the
 * same layout and values, given the same parameters:
 *   - exact (byte for byte): brightness, contrast, saturation, grayscale,
 *     posterize, solarize, autocontrast, equalize, invert, sharpness.  The
 *     float ones do torchvision's float32 arithmetic in its order (products
 *     with the factor rounded to float32, clamp to [0, 255], truncation to
 *     uint8), so they land on the same byte; this needs the library built
 *     with -ffp-contract=off (daemon/meson.build), a fused multiply-add
 *     rounds once where torchvision rounds twice.  Contrast's mean is the
 *     exact sum of the grayscale bytes rounded to float32, over the pixel
 *     count: torchvision's own float32 sum is exact up to 2^24 (an image
 *     of 65,793 pixels of white), a larger image may differ in the mean's
 *     last bit.
 *   - hue: torchvision's float32 RGB -> HSV -> RGB, step by step; exact on
 *     the machines the test runs on, the test allows a rare 1 (differences
 *     in a float library's last bit).
 *   - gaussian blur: separable float32 passes where torchvision convolves
 *     with the 2-D outer-product kernel; the sums differ in their last bits,
 *     so a pixel whose value lies within that of .5 may round the other way:
 *     at most 1 apart, on a small fraction of pixels (the test's bound).
 * A 1-channel image is left as it is by saturation and hue, as torchvision
 * (which follows PIL there) leaves it; grayscale leaves it too.
 *
 * Factors outside torchvision's domain (a negative brightness, contrast,
 * saturation or sharpness factor, a hue factor outside [-0.5, 0.5]) are the
 * caller's to refuse: the ops stay defined (no undefined behaviour, bytes
 * clamped to [0, 255]) but have no torchvision counterpart.
 *
 * The draws follow the transforms' forward(): "coin" is torch.rand(1) < p,
 * the gate of every Random* op here with a probability; ColorJitter draws
 * its order then the factors that are on, in torchvision's order.
 */
#ifndef RINGFEED_DAEMON_WORKER_AUG_COLOR_H
#define RINGFEED_DAEMON_WORKER_AUG_COLOR_H

#include <stdbool.h>
#include <stdint.h>

#include "aug.h"
#include "rng.h"

/* --- the ops ------------------------------------------------------------ */

/* torchvision adjust_brightness: v * factor, clamped, truncated. */
void aug_brightness(struct aug_img *im, float factor);

/* adjust_contrast: blend with the mean of the grayscale image (of the
 * whole image, not per channel) at ratio factor. */
void aug_contrast(struct aug_img *im, float factor);

/* adjust_saturation: blend each pixel with its own grayscale value at
 * ratio factor; 3 channels (1: unchanged). */
void aug_saturation(struct aug_img *im, float factor);

/* adjust_hue: shift the hue by hue_factor turns (torchvision's domain is
 * [-0.5, 0.5]); 3 channels (1: unchanged). */
void aug_hue(struct aug_img *im, float hue_factor);

/* rgb_to_grayscale with num_output_channels = c: 0.2989 R + 0.587 G +
 * 0.114 B truncated, written to all three channels (1 channel: unchanged). */
void aug_grayscale(struct aug_img *im);

/* adjust_sharpness: blend with the image smoothed by torchvision's 3x3
 * kernel (1 1 1 / 1 5 1 / 1 1 1, over 13; border pixels keep their own
 * value as the smoothed one) at ratio factor.  Images of width or height
 * 2 or less are unchanged.  Borrows two rows (2*w*c bytes) of scratch;
 * returns 0, or -ENOMEM (image unchanged). */
int aug_sharpness(struct aug_img *im, float factor, struct aug_scratch *scratch);

/* posterize: keep the top bits bits of each byte (bits 0..8; 0 gives 0,
 * 8 leaves the image; above 8 is taken as 8). */
void aug_posterize(struct aug_img *im, uint32_t bits);

/* solarize: bytes v >= threshold become 255 - v (threshold on the 0..255
 * scale, as torchvision on uint8; above 255 changes nothing). */
void aug_solarize(struct aug_img *im, float threshold);

/* autocontrast: per channel, stretch [min, max] to [0, 255] (a constant
 * channel is unchanged). */
void aug_autocontrast(struct aug_img *im);

/* equalize: torchvision's per-channel histogram equalization, exact. */
void aug_equalize(struct aug_img *im);

/* invert: 255 - v. */
void aug_invert(struct aug_img *im);

/* gaussian_blur with an odd kernel kx wide and ky high (1 and up) and
 * standard deviations sx, sy (> 0): torchvision's kernel (a normalized
 * exp(-x^2 / 2 s^2) over x = -(k-1)/2 .. (k-1)/2), reflect padding
 * (mirrored again where a kernel is wider than the image, where
 * torchvision refuses; a 1-pixel side repeats its pixel), rounded half to
 * even.  Borrows about 4 h w c + 4 (w + kx) c bytes of scratch; returns 0,
 * -EINVAL for an even or zero kernel size (image unchanged), or -ENOMEM
 * (image unchanged). */
int aug_gaussian_blur(struct aug_img *im, uint32_t kx, uint32_t ky, float sx, float sy,
                      struct aug_scratch *scratch);

/* --- ColorJitter ---------------------------------------------------------- */

/* ColorJitter's four adjustments, in torchvision's numbering (its
 * fn_idx values). */
enum aug_cj_op {
    AUG_CJ_BRIGHTNESS,
    AUG_CJ_CONTRAST,
    AUG_CJ_SATURATION,
    AUG_CJ_HUE,
    AUG_CJ_N,
};

/* The transform's arguments as torchvision's _check_input leaves them:
 * for each adjustment, on (a range was given and is not the identity) and
 * the factor's range [lo, hi]. */
struct aug_colorjitter_ranges {
    bool on[AUG_CJ_N];
    float lo[AUG_CJ_N], hi[AUG_CJ_N];
};

/* One draw: the order the adjustments run in (a permutation of 0..3) and
 * the factor of each one that is on (0 where off). */
struct aug_colorjitter {
    uint8_t order[AUG_CJ_N];
    bool on[AUG_CJ_N];
    float factor[AUG_CJ_N];
};

/* ColorJitter.get_params: a uniform permutation (Fisher-Yates from
 * rng_below, where torchvision calls torch.randperm(4)), then, for
 * brightness, contrast, saturation and hue in that order, a factor uniform
 * on [lo, hi) for each adjustment that is on (one draw each; an adjustment
 * that is off draws nothing). */
void aug_draw_colorjitter(struct rng_stream *rng, const struct aug_colorjitter_ranges *r,
                          struct aug_colorjitter *out);

/* ColorJitter.forward: the adjustments that are on, in j's order. */
void aug_colorjitter(struct aug_img *im, const struct aug_colorjitter *j);

/* --- the other draws ------------------------------------------------------ */

/* The gate of RandomGrayscale, RandomPosterize, RandomSolarize,
 * RandomAdjustSharpness, RandomAutocontrast, RandomEqualize and
 * RandomInvert: torch.rand(1) < p, one draw (rng_bernoulli). */
bool aug_draw_coin(struct rng_stream *rng, double p);

/* GaussianBlur.get_params: sigma uniform on [lo, hi) (one draw), used for
 * both axes as torchvision does. */
float aug_draw_gaussian_blur(struct rng_stream *rng, float lo, float hi);

#endif
