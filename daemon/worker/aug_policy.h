/*
 * aug_policy.h - the automatic augmentation policies (TrivialAugmentWide,
 * RandAugment, AutoAugment's ImageNet policy) and RandomErasing, as
 * torchvision 0.14 decides them, split into pure draws and their
 * application.
 *
 * A policy is data: per policy, a table of (op, magnitude space, signed)
 * in torchvision's _augmentation_space order, and for AutoAugment its 25
 * sub-policies.  A draw walks torchvision's forward decision by decision
 * on the sample's stream (proto/rng.h): rng_below where torchvision calls
 * torch.randint, a 24-bit float uniform where it calls torch.rand, in the
 * same order, and fills a struct aug_policy_draw: the ops chosen, each with
 * its magnitude bin and its signed magnitude (torchvision's float32 value,
 * bit for bit: aug_policy_magnitude).  aug_policy_apply (its own file,
 * aug_policy_apply.c) then runs them with the photometric (aug_color.h)
 * and geometric (aug_geom.h) ops.
 *
 * RandomErasing: aug_draw_erasing draws the box as RandomErasing.get_params
 * does (10 attempts at a log-uniform aspect ratio, then its top-left
 * corner), aug_draw_erasing_noise the bytes of value="random", aug_erase
 * writes them.  value="random" on uint8 images: torchvision erases float
 * tensors with N(0, 1) noise (the space after Normalize); ringfeed's ops
 * work on bytes before any normalization, so it writes the bytes an image
 * normalized with mean 0.5 and std 0.25 would hold for that noise:
 * clamp(round(127.5 + 63.75 z), 0, 255), z ~ N(0, 1) per byte
 * (docs/design/augment-policies.md).
 */
#ifndef RINGFEED_DAEMON_WORKER_AUG_POLICY_H
#define RINGFEED_DAEMON_WORKER_AUG_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "aug.h"

/* The ops a policy chooses from, torchvision's _apply_op names. */
enum aug_pop {
    AUG_POP_IDENTITY,
    AUG_POP_SHEAR_X,
    AUG_POP_SHEAR_Y,
    AUG_POP_TRANSLATE_X,
    AUG_POP_TRANSLATE_Y,
    AUG_POP_ROTATE,
    AUG_POP_BRIGHTNESS,
    AUG_POP_COLOR,
    AUG_POP_CONTRAST,
    AUG_POP_SHARPNESS,
    AUG_POP_POSTERIZE,
    AUG_POP_SOLARIZE,
    AUG_POP_AUTOCONTRAST,
    AUG_POP_EQUALIZE,
    AUG_POP_INVERT,
    AUG_POP_COUNT
};

/* torchvision's name of op ("ShearX", ...), or NULL out of range. */
const char *aug_pop_name(unsigned op);

/* The policies whose magnitude spaces this file holds. */
enum aug_policy {
    AUG_POLICY_TRIVIALAUGMENT, /* TrivialAugmentWide */
    AUG_POLICY_RANDAUGMENT,
    AUG_POLICY_AUTOAUGMENT, /* AutoAugment's space (10 bins) */
    AUG_POLICY_COUNT
};

/* torchvision's defaults and ringfeed's bounds. */
#define AUG_TRIVIAL_BINS 31          /* TrivialAugmentWide(num_magnitude_bins) */
#define AUG_RANDAUG_NUM_OPS 2        /* RandAugment(num_ops) */
#define AUG_RANDAUG_MAGNITUDE 9      /* RandAugment(magnitude) */
#define AUG_RANDAUG_BINS 31          /* RandAugment(num_magnitude_bins) */
#define AUG_AUTOAUG_BINS 10          /* AutoAugment's fixed bin count */
#define AUG_POLICY_MAX_OPS 16        /* RandAugment num_ops at most */
#define AUG_POLICY_MIN_BINS 2        /* fewer makes torchvision divide by 0 */
#define AUG_POLICY_MAX_BINS 1024

/* One op a draw chose: bin is the magnitude bin drawn or fixed (-1 for an
 * op without magnitudes: Identity, AutoContrast, Equalize, Invert), and
 * magnitude torchvision's value for it, negated where the sign coin said
 * so (0 without magnitudes). */
struct aug_policy_step {
    uint8_t op;      /* enum aug_pop */
    int16_t bin;
    float magnitude;
};

/* What one sample's policy does: n ops, in order. */
struct aug_policy_draw {
    uint32_t n;
    struct aug_policy_step step[AUG_POLICY_MAX_OPS];
};

/*
 * How many ops a policy's space has (TrivialAugmentWide and RandAugment 14,
 * without Invert; AutoAugment 14, without Identity), and the op at position
 * k of torchvision's dict order (-1 out of range).
 */
unsigned aug_policy_space_size(enum aug_policy pol);
int aug_policy_space_op(enum aug_policy pol, unsigned k);

/*
 * torchvision's magnitude of op in policy pol's space with bins bins, at bin
 * bin, for an image of w x h (Translate's range scales with it in
 * RandAugment and AutoAugment), unsigned: exactly the float32 torch 1.13's
 * CPU kernels give for torch.linspace (its AVX2 kernel: fused multiply-adds,
 * 16-element vector blocks) or 8 - round(arange / ((bins - 1) / k)) for
 * Posterize.  0 for an op without magnitudes.  *is_signed (may be NULL) says
 * whether the op takes the sign coin.  Requires AUG_POLICY_MIN_BINS <= bins
 * and bin < bins.
 */
float aug_policy_magnitude(enum aug_policy pol, unsigned op, uint32_t bins, uint32_t bin,
                           uint32_t w, uint32_t h, bool *is_signed);

/*
 * NULL when the policy's arguments are ones torchvision runs with and
 * ringfeed accepts, else a message naming the argument: bins in
 * [AUG_POLICY_MIN_BINS, AUG_POLICY_MAX_BINS], num_ops in
 * [0, AUG_POLICY_MAX_OPS], magnitude in [0, bins).
 */
const char *aug_trivialaugment_check(uint32_t bins);
const char *aug_randaugment_check(uint32_t num_ops, uint32_t magnitude, uint32_t bins);

/*
 * The draws: fill *out as the policy's forward decides, on rng.  w x h is
 * the image's size (after the crop).  Arguments must have passed the
 * checks above.
 *   trivialaugment: op = randint(14); bin = randint(bins) for ops with
 *     magnitudes; sign coin randint(2) for signed ops (1: negative).
 *     aug_draw_trivialaugment uses torchvision's default 31 bins.
 *   randaugment: num_ops times: op = randint(14), bin = magnitude, sign coin
 *     for signed ops.
 *   autoaugment_imagenet: sub-policy randint(25), two float32 uniforms, two
 *     sign coins (0: negative), then each of the sub-policy's two ops kept
 *     when its uniform <= its probability.
 */
void aug_draw_trivialaugment(struct rng_stream *rng, uint32_t w, uint32_t h,
                             struct aug_policy_draw *out);
void aug_draw_trivialaugment_bins(struct rng_stream *rng, uint32_t bins, uint32_t w,
                                  uint32_t h, struct aug_policy_draw *out);
void aug_draw_randaugment(struct rng_stream *rng, uint32_t num_ops, uint32_t magnitude,
                          uint32_t bins, uint32_t w, uint32_t h, struct aug_policy_draw *out);
void aug_draw_autoaugment_imagenet(struct rng_stream *rng, uint32_t w, uint32_t h,
                                   struct aug_policy_draw *out);

/* AutoAugment's ImageNet sub-policies: 25 of two (op, probability, bin or
 * -1), exposed for the tests. */
#define AUG_AUTOAUG_IMAGENET_LEN 25
struct aug_autoaug_op {
    uint8_t op;
    float p;
    int8_t bin;
};
extern const struct aug_autoaug_op aug_autoaug_imagenet[AUG_AUTOAUG_IMAGENET_LEN][2];

/*
 * Runs a draw's ops on im in order (aug_policy_apply.c), as torchvision's
 * _apply_op: ShearX/ShearY about the top-left corner with angle atan(m),
 * TranslateX/Y by int(m) pixels, Rotate by m degrees counter-clockwise,
 * Brightness/Color/Contrast/Sharpness with factor 1 + m, Posterize int(m)
 * bits, Solarize at m.  fill: c bytes for the pixels geometric ops uncover,
 * or NULL for zeros (torchvision's fill=None).  aug_policy_apply samples
 * nearest (the policies' default); aug_policy_apply_interp takes the
 * interpolation (enum aug_interp of aug_geom.h, passed as unsigned so this
 * header stands alone).  Returns 0, -ENOMEM when an op's scratch could
 * not grow, or -EINVAL for an op id past AUG_POP_COUNT (im is then partly
 * transformed: a bad sample).
 */
int aug_policy_apply(struct aug_img *im, const struct aug_policy_draw *d, const uint8_t *fill,
                     struct aug_scratch *s);
int aug_policy_apply_interp(struct aug_img *im, const struct aug_policy_draw *d,
                            unsigned interp, const uint8_t *fill, struct aug_scratch *s);

/* ---- RandomErasing ---- */

enum aug_erase_value {
    AUG_ERASE_CONST = 0,  /* one byte per channel (value=0, v or (r, g, b)) */
    AUG_ERASE_RANDOM = 1, /* value="random": a byte per pixel and channel */
};

/* RandomErasing's arguments (torchvision's defaults: p 0.5, scale (0.02,
 * 0.33), ratio (0.3, 3.3), value 0). */
struct aug_erasing_args {
    double p;
    double scale[2];
    double ratio[2];
    uint32_t value_mode; /* enum aug_erase_value */
    uint8_t value[3];    /* AUG_ERASE_CONST: per channel (a single value repeated) */
};

/*
 * NULL when the arguments are ones torchvision accepts and the draw can
 * use, else a message naming the argument: p in [0, 1], 0 <= scale[0] <=
 * scale[1] <= 1, 0 < ratio[0] <= ratio[1] (torchvision only warns about a
 * reversed range; ringfeed refuses it), all finite.
 */
const char *aug_erasing_check(const struct aug_erasing_args *a);

/* A box to erase: rows i..i+h-1, columns j..j+w-1; erase false leaves the
 * image as it is (the coin said no, or no attempt fitted). */
struct aug_erasing_draw {
    bool erase;
    uint32_t i, j, h, w;
};

/*
 * RandomErasing.forward's decisions on an img_h x img_w image: the coin
 * uniform < p, then up to 10 attempts of an area uniform in scale * area and
 * an aspect ratio exp(uniform(log ratio)), h = round(sqrt(area * ratio)),
 * w = round(sqrt(area / ratio)) (half to even), kept when h < img_h and
 * w < img_w; then i = randint(img_h - h + 1), j = randint(img_w - w + 1).
 * torchvision draws the random values before i and j; ringfeed draws them
 * after (aug_draw_erasing_noise), so the box is the same draw whatever the
 * value mode.  Arguments must have passed aug_erasing_check.
 */
void aug_draw_erasing(struct rng_stream *rng, double p, const double scale[2],
                      const double ratio[2], uint32_t img_h, uint32_t img_w,
                      struct aug_erasing_draw *out);

/* n bytes of value="random" into v: clamp(round(127.5 + 63.75 z)), z
 * standard normal (Box-Muller, two bytes per two uniforms), in
 * torchvision's order (channel, row, column). */
void aug_draw_erasing_noise(struct rng_stream *rng, size_t n, uint8_t *v);

/*
 * Writes the box (i, j, h, w), which must lie inside im, with v: per_pixel
 * false, one byte per channel (v[0..c-1]); true, c*h*w bytes in
 * (channel, row, column) order as aug_draw_erasing_noise gives them.
 * Equals torchvision's F.erase on a uint8 tensor given the same values.
 */
void aug_erase(struct aug_img *im, uint32_t i, uint32_t j, uint32_t h, uint32_t w,
               const uint8_t *v, bool per_pixel);

/*
 * RandomErasing on im, whole: the draw, the noise for value="random" (in
 * s), the erase.  Returns 0, or -ENOMEM when s could not grow (im then
 * unchanged).
 */
int aug_random_erasing(struct aug_img *im, struct rng_stream *rng,
                       const struct aug_erasing_args *a, struct aug_scratch *s);

#endif
