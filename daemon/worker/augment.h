/*
 * augment.h - the worker's augmentation stage: after the transform wrote a
 * sample, the ops of the stream's spec (proto/aug_spec.h) run on it in
 * order, each drawing from the sample's own random stream after the
 * transform's draws (so a train or eval crop is the same with or without
 * an augment), each op's time added to its own counter.
 *
 * ADDING AN OP.  proto/aug_spec.h's table names every op with its keys.
 * An op is linked into this stage by one line in augment.c's runs[] table:
 *     [AUG_COLOR_JITTER] = aug_run_color_jitter,
 * where aug_run_color_jitter (an aug_run_fn in aug_run.c) draws the op's
 * parameters from rng with the keys in op->a[] (their canonical forms are
 * the table's "as" column) through its family's draw (aug_color.h,
 * aug_geom.h, aug_policy.h) and applies the family's op.  An op without a
 * row is "not available in this build": ATTACH refuses a spec naming it
 * (augment_check), it is never skipped.
 *
 * The operator's own ops (Plugin:name=NAME, plugin.h) have no row: the
 * run hands them to the worker's plugin set, and the check to the main
 * process's.
 *
 * Where it runs.  Always in the worker's own memory (the transform's
 * output is made there, then copied into the ring): a ring slot is
 * client-writable and an op reads what it writes.
 */
#ifndef RINGFEED_DAEMON_WORKER_AUGMENT_H
#define RINGFEED_DAEMON_WORKER_AUGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "aug.h"
#include "aug_run.h"
#include "aug_spec.h"
#include "err.h"
#include "plugin.h"
#include "rng.h"
#include "transform.h"

/* One op of a pipeline on one image: draws, then applies, then appends
 * the geometric steps it applied to tr unless NULL (aug_run.h's trace).
 * Returns 0, or a negative errno (-ENOMEM: the scratch could not grow), which makes the
 * sample bad. */
typedef int aug_run_fn(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                       struct aug_scratch *s, struct aug_trace *tr);

/* Whether op id is linked into this build. */
bool augment_available(uint32_t id);

/*
 * The image the ops would see in a transform's output: c, h, w and layout
 * of a uint8 image with 1 or 3 channels (train/eval/none: their shape and
 * layout; raw: a uint8 tensor of shape CxHxW or HxW, or HxWxC when the
 * first dim is not 1 or 3).  px is left NULL.  Returns 0, or -EINVAL with
 * a message saying what the output is instead.
 */
int augment_image(const struct xform_out *out, struct aug_img *im, struct rf_err *err);

/*
 * The main process's check of a parsed spec against a stream's output
 * (ATTACH): an image (augment_image), every op available in this build,
 * RandomCrop's size the image's, every Plugin op's name one of plugins
 * and its params accepted (plugin_check_spec).  Returns 0 or -EINVAL with
 * err naming the op and what to do.
 */
int augment_check(const struct aug_spec *s, const struct xform_out *out,
                  const struct plugin_set *plugins, struct rf_err *err);

/*
 * Runs the spec's ops on im in order with the sample's stream rng (already
 * past the transform's draws), Plugin ops through plugins (the worker's:
 * states are kept there), adding each op's nanoseconds to ns[id] and one
 * to images[id] (the worker's counters, wire.h).  tr, unless NULL, gets
 * the geometric steps applied, in order (emptied first), for the sample's
 * boxes and masks (aug_trace_boxes, aug_trace_mask).  Returns 0, or the
 * first failing op's negative errno with err naming it.
 */
int augment_run(const struct aug_spec *s, struct aug_img *im, struct rng_stream *rng,
                struct plugin_set *plugins, struct aug_scratch *scratch,
                uint64_t ns[AUG_OP_COUNT], uint64_t images[AUG_OP_COUNT], struct aug_trace *tr,
                struct rf_err *err);

#endif
