/*
 * aug_policy_ops.h - the photometric and geometric ops the policies call
 * (aug_policy_apply.c), declared in one place for it and for its test's
 * recording doubles (tests/aug_policy_calls.c).
 *
 * The ops' own headers are the only declaration: a disagreement is a
 * compile error at the call.  aug_affine must take fractional translations
 * (aug_policy_apply.c's shears about the corner need them).
 *
 * aug_policy_step_affine (aug_policy_apply.c) is the one statement of
 * which policy ops are geometric and with which affine: the apply calls
 * aug_affine with it, and the pipeline (aug_run.c) traces the same
 * parameters for the boxes and masks that follow the image.
 */
#ifndef RINGFEED_DAEMON_WORKER_AUG_POLICY_OPS_H
#define RINGFEED_DAEMON_WORKER_AUG_POLICY_OPS_H

#include <stdint.h>

#include "aug.h"

#include "aug_color.h"
#include "aug_geom.h"

struct aug_policy_step;

/* Whether step is a geometric op (ShearX/Y, TranslateX/Y, Rotate); if so
 * *p gets the affine aug_affine applies to a w x h image for it. */
bool aug_policy_step_affine(const struct aug_policy_step *st, uint32_t w, uint32_t h,
                            struct aug_affine_params *p);

#endif
