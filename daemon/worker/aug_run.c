/*
 * aug_run.c - the pipeline's run functions (aug_run.h): parsed keys in,
 * the family's draw, the family's op.
 */
#include <errno.h>
#include <stdbool.h>

#include "aug_color.h"
#include "aug_geom.h"
#include "aug_policy.h"
#include "aug_run.h"

/* The p of a one-probability op, and its draw (torch.rand(1) < p). */
static bool coin(const struct aug_op *op, uint32_t key, struct rng_stream *rng)
{
    return aug_draw_coin(rng, op->a[key].v[0]);
}

/* A fill key's bytes (canonical [r, g, b], 0..255), or NULL when none was
 * given and none is the default (torchvision's fill=None: zeros). */
static const uint8_t *fill_of(const struct aug_param *p, uint8_t out[3])
{
    if (p->n == 0)
        return NULL;
    for (uint32_t i = 0; i < 3; i++)
        out[i] = (uint8_t)p->v[i < p->n ? i : p->n - 1];
    return out;
}

static enum aug_interp interp_of(const struct aug_param *p)
{
    return p->word == AUG_W_BILINEAR ? AUG_BILINEAR : AUG_NEAREST;
}

int aug_run_color_jitter(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                         struct aug_scratch *s)
{
    /* the family's adjustment k is read from the spec's key keys[k] */
    static const uint32_t keys[AUG_CJ_N] = {
        [AUG_CJ_BRIGHTNESS] = AUG_CJK_BRIGHTNESS, [AUG_CJ_CONTRAST] = AUG_CJK_CONTRAST,
        [AUG_CJ_SATURATION] = AUG_CJK_SATURATION, [AUG_CJ_HUE] = AUG_CJK_HUE};
    struct aug_colorjitter_ranges r = {0};
    struct aug_colorjitter j;

    (void)s;
    for (uint32_t k = 0; k < AUG_CJ_N; k++) {
        const struct aug_param *p = &op->a[keys[k]];
        double id = k == AUG_CJ_HUE ? 0.0 : 1.0; /* the identity: none, as torchvision */

        r.on[k] = p->n == 2 && !(p->v[0] == id && p->v[1] == id);
        r.lo[k] = (float)p->v[0];
        r.hi[k] = (float)p->v[1];
    }
    aug_draw_colorjitter(rng, &r, &j);
    aug_colorjitter(im, &j);
    return 0;
}

int aug_run_grayscale(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s)
{
    (void)s;
    if (coin(op, AUG_P, rng))
        aug_grayscale(im);
    return 0;
}

int aug_run_gaussian_blur(struct aug_img *im, const struct aug_op *op,
                          struct rng_stream *rng, struct aug_scratch *s)
{
    const struct aug_param *k = &op->a[AUG_BLUR_KERNEL], *sg = &op->a[AUG_BLUR_SIGMA];
    float sigma = aug_draw_gaussian_blur(rng, (float)sg->v[0], (float)sg->v[1]);

    return aug_gaussian_blur(im, (uint32_t)k->v[0], (uint32_t)k->v[1], sigma, sigma, s);
}

int aug_run_posterize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s)
{
    (void)s;
    if (coin(op, AUG_POST_P, rng))
        aug_posterize(im, (uint32_t)op->a[AUG_POST_BITS].v[0]);
    return 0;
}

int aug_run_solarize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s)
{
    (void)s;
    if (coin(op, AUG_SOL_P, rng))
        aug_solarize(im, (float)op->a[AUG_SOL_THRESHOLD].v[0]);
    return 0;
}

int aug_run_sharpness(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s)
{
    if (coin(op, AUG_SHARP_P, rng))
        return aug_sharpness(im, (float)op->a[AUG_SHARP_FACTOR].v[0], s);
    return 0;
}

int aug_run_autocontrast(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                         struct aug_scratch *s)
{
    (void)s;
    if (coin(op, AUG_P, rng))
        aug_autocontrast(im);
    return 0;
}

int aug_run_equalize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s)
{
    (void)s;
    if (coin(op, AUG_P, rng))
        aug_equalize(im);
    return 0;
}

int aug_run_invert(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                   struct aug_scratch *s)
{
    (void)s;
    if (coin(op, AUG_P, rng))
        aug_invert(im);
    return 0;
}

int aug_run_affine(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                   struct aug_scratch *s)
{
    const struct aug_param *tr = &op->a[AUG_AFF_TRANSLATE], *sc = &op->a[AUG_AFF_SCALE];
    const struct aug_param *sh = &op->a[AUG_AFF_SHEAR];
    struct aug_affine_params p;
    uint8_t fill[3];
    /* one shear range, or two: a y range of [0, 0] was never given (the
     * canonical form cannot tell a/b from a/b/0/0, which mean the same) */
    uint32_t n_shear = sh->n == 0 ? 0 : (sh->v[2] == 0 && sh->v[3] == 0) ? 2 : 4;

    aug_draw_affine(rng, op->a[AUG_AFF_DEGREES].v, tr->n ? tr->v : NULL,
                    sc->n ? sc->v : NULL, n_shear ? sh->v : NULL, n_shear, im->w, im->h, &p);
    return aug_affine(im, p.angle, p.tx, p.ty, p.scale, p.shear_x, p.shear_y,
                      interp_of(&op->a[AUG_AFF_INTERP]), fill_of(&op->a[AUG_AFF_FILL], fill),
                      s);
}

int aug_run_rotation(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s)
{
    uint8_t fill[3];
    float angle = aug_draw_rotate(rng, op->a[AUG_ROT_DEGREES].v);

    return aug_rotate(im, angle, interp_of(&op->a[AUG_ROT_INTERP]),
                      fill_of(&op->a[AUG_ROT_FILL], fill), s);
}

int aug_run_hflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s)
{
    (void)s;
    if (aug_draw_flip(rng, op->a[AUG_P].v[0]))
        aug_hflip(im);
    return 0;
}

int aug_run_vflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s)
{
    (void)s;
    if (aug_draw_flip(rng, op->a[AUG_P].v[0]))
        aug_vflip(im);
    return 0;
}

int aug_run_crop(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                 struct aug_scratch *s)
{
    static const enum aug_pad modes[] = {
        [AUG_W_PAD_CONSTANT] = AUG_PAD_CONSTANT, [AUG_W_PAD_EDGE] = AUG_PAD_EDGE,
        [AUG_W_PAD_REFLECT] = AUG_PAD_REFLECT, [AUG_W_PAD_SYMMETRIC] = AUG_PAD_SYMMETRIC};
    const struct aug_param *pad = &op->a[AUG_CROP_PADDING];
    int32_t w = op->a[AUG_CROP_MODE].word;
    uint32_t padding[4];
    struct aug_crop_params cp;
    uint8_t fill[3];
    int rc;

    for (uint32_t i = 0; i < 4; i++)
        padding[i] = (uint32_t)pad->v[i];
    /* the output is the image itself: augment_check made size its size */
    rc = aug_draw_pad_crop(rng, im->w, im->h, pad->n ? padding : NULL,
                           op->a[AUG_CROP_PAD_IF_NEEDED].v[0] != 0, im->w, im->h, &cp);
    if (rc < 0)
        return rc;
    return aug_pad_crop(im, im, &cp, w >= 0 && w <= AUG_W_PAD_SYMMETRIC ? modes[w]
                                                                         : AUG_PAD_CONSTANT,
                        fill_of(&op->a[AUG_CROP_FILL], fill), s);
}

static int policy(struct aug_img *im, const struct aug_policy_draw *d,
                  const struct aug_param *interp, const struct aug_param *fill,
                  struct aug_scratch *s)
{
    uint8_t f[3];

    return aug_policy_apply_interp(im, d, interp_of(interp), fill_of(fill, f), s);
}

int aug_run_trivialaugment(struct aug_img *im, const struct aug_op *op,
                           struct rng_stream *rng, struct aug_scratch *s)
{
    struct aug_policy_draw d;

    aug_draw_trivialaugment_bins(rng, (uint32_t)op->a[AUG_TA_BINS].v[0], im->w, im->h, &d);
    return policy(im, &d, &op->a[AUG_TA_INTERP], &op->a[AUG_TA_FILL], s);
}

int aug_run_randaugment(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                        struct aug_scratch *s)
{
    struct aug_policy_draw d;

    aug_draw_randaugment(rng, (uint32_t)op->a[AUG_RA_NUM_OPS].v[0],
                         (uint32_t)op->a[AUG_RA_MAGNITUDE].v[0],
                         (uint32_t)op->a[AUG_RA_BINS].v[0], im->w, im->h, &d);
    return policy(im, &d, &op->a[AUG_RA_INTERP], &op->a[AUG_RA_FILL], s);
}

int aug_run_autoaugment(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                        struct aug_scratch *s)
{
    struct aug_policy_draw d;

    aug_draw_autoaugment_imagenet(rng, im->w, im->h, &d);
    return policy(im, &d, &op->a[AUG_AA_INTERP], &op->a[AUG_AA_FILL], s);
}

static void erasing_args(const struct aug_op *op, struct aug_erasing_args *a)
{
    const struct aug_param *v = &op->a[AUG_ER_VALUE];

    *a = (struct aug_erasing_args){
        .p = op->a[AUG_ER_P].v[0],
        .scale = {op->a[AUG_ER_SCALE].v[0], op->a[AUG_ER_SCALE].v[1]},
        .ratio = {op->a[AUG_ER_RATIO].v[0], op->a[AUG_ER_RATIO].v[1]},
        .value_mode = v->word == AUG_W_RANDOM ? AUG_ERASE_RANDOM : AUG_ERASE_CONST,
    };
    for (uint32_t i = 0; i < 3 && v->n; i++)
        a->value[i] = (uint8_t)v->v[i < v->n ? i : v->n - 1];
}

int aug_run_erasing(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                    struct aug_scratch *s)
{
    struct aug_erasing_args a;

    erasing_args(op, &a);
    return aug_random_erasing(im, rng, &a, s);
}

int aug_run_check(const struct aug_op *op, struct rf_err *err)
{
    struct aug_erasing_args ea;
    const char *why = NULL;

    switch (op->id) {
    case AUG_AFFINE:
    case AUG_ROTATION:
        if (op->a[op->id == AUG_AFFINE ? AUG_AFF_CENTER : AUG_ROT_CENTER].n)
            return rf_err_set(err, -EINVAL, "augment: %s: center= is not supported (the ops "
                              "turn about the image's centre, torchvision's default); leave "
                              "it out", aug_op_name(op->id));
        break;
    case AUG_TRIVIAL:
        why = aug_trivialaugment_check((uint32_t)op->a[AUG_TA_BINS].v[0]);
        break;
    case AUG_RANDAUGMENT:
        why = aug_randaugment_check((uint32_t)op->a[AUG_RA_NUM_OPS].v[0],
                                    (uint32_t)op->a[AUG_RA_MAGNITUDE].v[0],
                                    (uint32_t)op->a[AUG_RA_BINS].v[0]);
        break;
    case AUG_ERASING:
        erasing_args(op, &ea);
        why = aug_erasing_check(&ea);
        break;
    default:
        break;
    }
    if (why)
        return rf_err_set(err, -EINVAL, "augment: %s: %s", aug_op_name(op->id), why);
    return 0;
}
