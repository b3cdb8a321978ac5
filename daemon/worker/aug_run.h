/*
 * aug_run.h - the pipeline's run functions (augment.h's aug_run_fn), one
 * per op of proto/aug_spec.h's table: each reads the op's parsed keys
 * (their canonical forms, the table's "as" column), draws the op's random
 * parameters from the sample's stream with the family's draw function and
 * applies the family's op (aug_color.h, aug_geom.h, aug_policy.h).  Glue
 * only: the arithmetic and the draws live in the families.
 *
 * aug_run_check says, at ATTACH, what a run function would otherwise
 * find only on every sample: keys the ops cannot honour (a rotation
 * centre other than the image's), a policy's arguments out of what its
 * draw takes.
 */
#ifndef RINGFEED_DAEMON_WORKER_AUG_RUN_H
#define RINGFEED_DAEMON_WORKER_AUG_RUN_H

#include "aug.h"
#include "aug_spec.h"
#include "err.h"
#include "rng.h"

int aug_run_color_jitter(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                         struct aug_scratch *s);
int aug_run_grayscale(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s);
int aug_run_gaussian_blur(struct aug_img *im, const struct aug_op *op,
                          struct rng_stream *rng, struct aug_scratch *s);
int aug_run_posterize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s);
int aug_run_solarize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s);
int aug_run_sharpness(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s);
int aug_run_autocontrast(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                         struct aug_scratch *s);
int aug_run_equalize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s);
int aug_run_invert(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                   struct aug_scratch *s);
int aug_run_affine(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                   struct aug_scratch *s);
int aug_run_rotation(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s);
int aug_run_hflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s);
int aug_run_vflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s);
int aug_run_crop(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                 struct aug_scratch *s);
int aug_run_trivialaugment(struct aug_img *im, const struct aug_op *op,
                           struct rng_stream *rng, struct aug_scratch *s);
int aug_run_randaugment(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                        struct aug_scratch *s);
int aug_run_autoaugment(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                        struct aug_scratch *s);
int aug_run_erasing(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                    struct aug_scratch *s);

/* 0, or -EINVAL with err naming the op and the key the ops cannot take. */
int aug_run_check(const struct aug_op *op, struct rf_err *err);

#endif
