/*
 * aug_policy_ops.h - the photometric and geometric ops the policies call
 * (aug_policy_apply.c), declared in one place for it and for its test's
 * recording doubles (tests/aug_policy_calls.c).
 *
 * Until aug_color.h and aug_geom.h are in the tree, the signatures agreed
 * for issue 25 are declared here; once the headers are there they are the
 * only declaration, and a disagreement is a compile error at the call.
 * aug_affine must take fractional translations (aug_policy_apply.c's
 * shears about the corner need them).
 */
#ifndef RINGFEED_DAEMON_WORKER_AUG_POLICY_OPS_H
#define RINGFEED_DAEMON_WORKER_AUG_POLICY_OPS_H

#include <stdint.h>

#include "aug.h"

#if __has_include("aug_color.h")
#include "aug_color.h"
#else
void aug_brightness(struct aug_img *im, float factor);
void aug_contrast(struct aug_img *im, float factor);
void aug_saturation(struct aug_img *im, float factor);
int aug_sharpness(struct aug_img *im, float factor, struct aug_scratch *s);
void aug_posterize(struct aug_img *im, uint32_t bits);
void aug_solarize(struct aug_img *im, float threshold);
void aug_autocontrast(struct aug_img *im);
void aug_equalize(struct aug_img *im);
void aug_invert(struct aug_img *im);
#endif

#if __has_include("aug_geom.h")
#include "aug_geom.h"
#else
enum aug_interp {
    AUG_NEAREST,
    AUG_BILINEAR,
};
int aug_affine(struct aug_img *im, float angle_deg, float tx, float ty, float scale,
               float shear_x_deg, float shear_y_deg, enum aug_interp interp,
               const uint8_t *fill, struct aug_scratch *s);
#endif

#endif
