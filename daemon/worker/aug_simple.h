/*
 * aug_simple.h - the augmentation ops that are exact on uint8 and need no
 * scratch: RandomHorizontalFlip, RandomVerticalFlip, RandomInvert,
 * RandomPosterize, RandomSolarize (aug.h's conventions: a pure draw, a pure
 * apply in place, and the pipeline's run function per op).
 *
 * Each is torchvision 0.14's: forward draws one torch.rand(1) and applies
 * the functional op when it is below p (aug_draw_coin); the functional ops
 * on a uint8 tensor are hflip, vflip, invert (255 - x), posterize
 * (x & -(2^(8 - bits))) and solarize (x >= threshold ? 255 - x : x), all
 * exact, which tests/test_aug_simple.py checks pixel for pixel.
 */
#ifndef RINGFEED_DAEMON_WORKER_AUG_SIMPLE_H
#define RINGFEED_DAEMON_WORKER_AUG_SIMPLE_H

#include <stdbool.h>

#include "aug.h"
#include "aug_spec.h"

/* Whether the op applies: one rng_bernoulli(p), as torchvision's
 * torch.rand(1) < p (RandomPosterize and RandomSolarize write
 * "p < rand: skip", the same decision but at rand == p, which has
 * probability 0). */
bool aug_draw_coin(struct rng_stream *rng, double p);

/* The ops, in place on any c, layout and size. */
void aug_hflip(struct aug_img *im);
void aug_vflip(struct aug_img *im);
void aug_invert(struct aug_img *im);
/* bits 0..8: keeps the top bits of each byte (0: all black) */
void aug_posterize(struct aug_img *im, unsigned bits);
/* threshold any double: bytes >= threshold are inverted */
void aug_solarize(struct aug_img *im, double threshold);

/* The pipeline's run functions (augment.h's aug_run_fn): draw from rng
 * with the op's parsed keys, then apply.  Return 0. */
int aug_run_hflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s);
int aug_run_vflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s);
int aug_run_invert(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                   struct aug_scratch *s);
int aug_run_posterize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s);
int aug_run_solarize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s);

#endif
