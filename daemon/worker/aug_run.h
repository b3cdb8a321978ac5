/*
 * aug_run.h - the pipeline's run functions (augment.h's aug_run_fn), one
 * per op of proto/aug_spec.h's table: each reads the op's parsed keys
 * (their canonical forms, the table's "as" column), draws the op's random
 * parameters from the sample's stream with the family's draw function and
 * applies the family's op (aug_color.h, aug_geom.h, aug_policy.h).  Glue
 * only: the arithmetic and the draws live in the families.
 *
 * The trace.  Each run function that moves pixels (the geometric ops, and
 * the geometric ops a policy draws: ShearX/Y, TranslateX/Y, Rotate)
 * appends to tr, unless NULL, one step per geometric op it actually
 * applied, in order: what it did (an affine's parameters, a flip, a pad
 * and crop with its mode) and its forward map of points (aug_geom.h's
 * struct aug_map).  Photometric ops and RandomErasing append nothing:
 * the targets stay where they are.  The worker then moves the sample's
 * boxes (aug_trace_boxes) and masks (aug_trace_mask) through the same
 * steps, so they follow the image exactly as torchvision's functional ops
 * would move them.
 *
 * aug_run_check says, at ATTACH, what a run function would otherwise
 * find only on every sample: keys the ops cannot honour (a rotation
 * centre other than the image's), a policy's arguments out of what its
 * draw takes.
 */
#ifndef RINGFEED_DAEMON_WORKER_AUG_RUN_H
#define RINGFEED_DAEMON_WORKER_AUG_RUN_H

#include "aug.h"
#include "aug_geom.h"
#include "aug_policy.h"
#include "aug_spec.h"
#include "err.h"
#include "rng.h"

enum aug_step_kind {
    AUG_STEP_AFFINE = 1, /* aug_affine with .affine (rotations included) */
    AUG_STEP_HFLIP = 2,
    AUG_STEP_VFLIP = 3,
    AUG_STEP_PAD_CROP = 4, /* aug_pad_crop with .crop and .pad, back to the same size */
};

struct aug_step {
    uint32_t kind;                   /* enum aug_step_kind */
    struct aug_affine_params affine; /* AUG_STEP_AFFINE */
    struct aug_crop_params crop;     /* AUG_STEP_PAD_CROP */
    uint32_t pad;                    /* AUG_STEP_PAD_CROP: enum aug_pad */
    struct aug_map map;              /* the step's forward map of points */
};

/* The most steps one sample's spec can apply: every op a policy of the
 * most ops. */
#define AUG_TRACE_MAX (AUG_OPS_MAX * AUG_POLICY_MAX_OPS)

struct aug_trace {
    uint32_t n;
    struct aug_step step[AUG_TRACE_MAX];
};

/*
 * Applies the trace's steps in order to a mask of the traced image's size
 * (mask->w x mask->h, 1 channel of u8, or a u16 mask as an HWC image of 2
 * byte channels): nearest affine with fill 0, the flips, the pad and crop
 * with the image's padding mode and fill 0 -- what torchvision's F.affine
 * (NEAREST, fill 0), F.hflip / F.vflip and F.pad + F.crop do to a mask
 * tensor.  Returns 0, or -ENOMEM (the scratch could not grow) or -EINVAL
 * (a mask of another size), mask then partly moved.
 */
int aug_trace_mask(const struct aug_trace *t, struct aug_img *mask, struct aug_scratch *s);

/*
 * Moves n boxes (xyxy f32, n x 4 at boxes, in the traced image's pixels)
 * through the trace's maps in order (aug_geom.h's aug_boxes, each step
 * dropping the boxes whose centre leaves its output and clipping the
 * rest), compacting them in place.  keep has n_rows bytes, one per row of
 * the sample's boxes field before any mapping, 1 for each of the n rows
 * that reached this stage (in order); the ones dropped here become 0.
 * tmp: room for n bytes.  Returns the boxes kept, or -EBADMSG with err
 * naming the box (aug_boxes).
 */
int aug_trace_boxes(const struct aug_trace *t, float *boxes, uint32_t n, uint8_t *keep,
                    uint64_t n_rows, uint8_t *tmp, struct rf_err *err);

int aug_run_color_jitter(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                         struct aug_scratch *s, struct aug_trace *tr);
int aug_run_grayscale(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s, struct aug_trace *tr);
int aug_run_gaussian_blur(struct aug_img *im, const struct aug_op *op,
                          struct rng_stream *rng, struct aug_scratch *s, struct aug_trace *tr);
int aug_run_posterize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s, struct aug_trace *tr);
int aug_run_solarize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s, struct aug_trace *tr);
int aug_run_sharpness(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s, struct aug_trace *tr);
int aug_run_autocontrast(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                         struct aug_scratch *s, struct aug_trace *tr);
int aug_run_equalize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s, struct aug_trace *tr);
int aug_run_invert(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                   struct aug_scratch *s, struct aug_trace *tr);
int aug_run_affine(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                   struct aug_scratch *s, struct aug_trace *tr);
int aug_run_rotation(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s, struct aug_trace *tr);
int aug_run_hflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s, struct aug_trace *tr);
int aug_run_vflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s, struct aug_trace *tr);
int aug_run_crop(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                 struct aug_scratch *s, struct aug_trace *tr);
int aug_run_trivialaugment(struct aug_img *im, const struct aug_op *op,
                           struct rng_stream *rng, struct aug_scratch *s, struct aug_trace *tr);
int aug_run_randaugment(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                        struct aug_scratch *s, struct aug_trace *tr);
int aug_run_autoaugment(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                        struct aug_scratch *s, struct aug_trace *tr);
int aug_run_erasing(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                    struct aug_scratch *s, struct aug_trace *tr);

/* 0, or -EINVAL with err naming the op and the key the ops cannot take. */
int aug_run_check(const struct aug_op *op, struct rf_err *err);

#endif
