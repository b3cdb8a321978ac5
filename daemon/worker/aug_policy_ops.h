/*
 * aug_policy_ops.h - the photometric and geometric ops the policies call
 * (aug_policy_apply.c), declared in one place for it and for its test's
 * recording doubles (tests/aug_policy_calls.c).
 *
 * The ops' own headers are the only declaration: a disagreement is a
 * compile error at the call.  aug_affine must take fractional translations
 * (aug_policy_apply.c's shears about the corner need them).
 */
#ifndef RINGFEED_DAEMON_WORKER_AUG_POLICY_OPS_H
#define RINGFEED_DAEMON_WORKER_AUG_POLICY_OPS_H

#include <stdint.h>

#include "aug.h"

#include "aug_color.h"
#include "aug_geom.h"

#endif
