/*
 * aug_run.c - the pipeline's run functions (aug_run.h): parsed keys in,
 * the family's draw, the family's op.
 */
#include <errno.h>
#include <stdbool.h>

#include "aug_color.h"
#include "aug_geom.h"
#include "aug_policy.h"
#include "aug_policy_ops.h"
#include "aug_run.h"

/* The p of a one-probability op, and its draw (torch.rand(1) < p). */
static bool coin(const struct aug_op *op, uint32_t key, struct rng_stream *rng)
{
    return aug_draw_coin(rng, op->a[key].v[0]);
}

/* The one-probability ops that take nothing but the image: fn when the
 * coin says so (they move no pixel, so they trace nothing). */
static int gated(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                 void (*fn)(struct aug_img *))
{
    if (coin(op, AUG_P, rng))
        fn(im);
    return 0;
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

/* The next step of tr (NULL when tr is NULL), its kind set; -EOVERFLOW
 * when full, which AUG_TRACE_MAX's bound rules out. */
static int trace_add(struct aug_trace *tr, uint32_t kind, struct aug_step **out)
{
    *out = NULL;
    if (!tr)
        return 0;
    if (tr->n >= AUG_TRACE_MAX)
        return -EOVERFLOW;
    *out = &tr->step[tr->n++];
    **out = (struct aug_step){ .kind = kind };
    return 0;
}

/* Traces an affine of im's size (aug_map_affine's forward map). */
static int trace_affine(struct aug_trace *tr, const struct aug_img *im,
                        const struct aug_affine_params *p)
{
    struct aug_step *st;
    int rc = trace_add(tr, AUG_STEP_AFFINE, &st);

    if (st) {
        st->affine = *p;
        aug_map_affine(im->w, im->h, p, &st->map);
    }
    return rc;
}

static enum aug_interp interp_of(const struct aug_param *p)
{
    return p->word == AUG_W_BILINEAR ? AUG_BILINEAR : AUG_NEAREST;
}

int aug_run_color_jitter(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                         struct aug_scratch *s, struct aug_trace *tr)
{
    /* the family's adjustment k is read from the spec's key keys[k] */
    static const uint32_t keys[AUG_CJ_N] = {
        [AUG_CJ_BRIGHTNESS] = AUG_CJK_BRIGHTNESS, [AUG_CJ_CONTRAST] = AUG_CJK_CONTRAST,
        [AUG_CJ_SATURATION] = AUG_CJK_SATURATION, [AUG_CJ_HUE] = AUG_CJK_HUE};
    struct aug_colorjitter_ranges r = {0};
    struct aug_colorjitter j;

    (void)tr;
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
                      struct aug_scratch *s, struct aug_trace *tr)
{
    (void)s;
    (void)tr;
    return gated(im, op, rng, aug_grayscale);
}

int aug_run_gaussian_blur(struct aug_img *im, const struct aug_op *op,
                          struct rng_stream *rng, struct aug_scratch *s, struct aug_trace *tr)
{
    const struct aug_param *k = &op->a[AUG_BLUR_KERNEL], *sg = &op->a[AUG_BLUR_SIGMA];
    float sigma = aug_draw_gaussian_blur(rng, (float)sg->v[0], (float)sg->v[1]);

    (void)tr;
    return aug_gaussian_blur(im, (uint32_t)k->v[0], (uint32_t)k->v[1], sigma, sigma, s);
}

int aug_run_posterize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s, struct aug_trace *tr)
{
    (void)tr;
    (void)s;
    if (coin(op, AUG_POST_P, rng))
        aug_posterize(im, (uint32_t)op->a[AUG_POST_BITS].v[0]);
    return 0;
}

int aug_run_solarize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s, struct aug_trace *tr)
{
    (void)tr;
    (void)s;
    if (coin(op, AUG_SOL_P, rng))
        aug_solarize(im, (float)op->a[AUG_SOL_THRESHOLD].v[0]);
    return 0;
}

int aug_run_sharpness(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s, struct aug_trace *tr)
{
    (void)tr;
    if (coin(op, AUG_SHARP_P, rng))
        return aug_sharpness(im, (float)op->a[AUG_SHARP_FACTOR].v[0], s);
    return 0;
}

int aug_run_autocontrast(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                         struct aug_scratch *s, struct aug_trace *tr)
{
    (void)s;
    (void)tr;
    return gated(im, op, rng, aug_autocontrast);
}

int aug_run_equalize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s, struct aug_trace *tr)
{
    (void)s;
    (void)tr;
    return gated(im, op, rng, aug_equalize);
}

int aug_run_invert(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                   struct aug_scratch *s, struct aug_trace *tr)
{
    (void)s;
    (void)tr;
    return gated(im, op, rng, aug_invert);
}

int aug_run_affine(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                   struct aug_scratch *s, struct aug_trace *tr)
{
    const struct aug_param *tl = &op->a[AUG_AFF_TRANSLATE], *sc = &op->a[AUG_AFF_SCALE];
    const struct aug_param *sh = &op->a[AUG_AFF_SHEAR];
    struct aug_affine_params p;
    uint8_t fill[3];
    /* one shear range, or two: a y range of [0, 0] was never given (the
     * canonical form cannot tell a/b from a/b/0/0, which mean the same) */
    uint32_t n_shear = sh->n == 0 ? 0 : (sh->v[2] == 0 && sh->v[3] == 0) ? 2 : 4;

    int rc;

    aug_draw_affine(rng, op->a[AUG_AFF_DEGREES].v, tl->n ? tl->v : NULL,
                    sc->n ? sc->v : NULL, n_shear ? sh->v : NULL, n_shear, im->w, im->h, &p);
    rc = aug_affine(im, p.angle, p.tx, p.ty, p.scale, p.shear_x, p.shear_y,
                    interp_of(&op->a[AUG_AFF_INTERP]), fill_of(&op->a[AUG_AFF_FILL], fill), s);
    return rc < 0 ? rc : trace_affine(tr, im, &p);
}

int aug_run_rotation(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s, struct aug_trace *tr)
{
    uint8_t fill[3];
    float angle = aug_draw_rotate(rng, op->a[AUG_ROT_DEGREES].v);
    /* aug_rotate is this affine, bit for bit (aug_geom.h) */
    struct aug_affine_params p = { .angle = -angle, .scale = 1.0f };
    int rc = aug_rotate(im, angle, interp_of(&op->a[AUG_ROT_INTERP]),
                        fill_of(&op->a[AUG_ROT_FILL], fill), s);

    return rc < 0 ? rc : trace_affine(tr, im, &p);
}

/* RandomHorizontalFlip and RandomVerticalFlip: the coin, the flip, its step. */
static int run_flip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                    struct aug_trace *tr, bool vertical)
{
    struct aug_step *st;
    int rc;

    if (!aug_draw_flip(rng, op->a[AUG_P].v[0]))
        return 0;
    (vertical ? aug_vflip : aug_hflip)(im);
    rc = trace_add(tr, vertical ? AUG_STEP_VFLIP : AUG_STEP_HFLIP, &st);
    if (st)
        (vertical ? aug_map_vflip : aug_map_hflip)(im->w, im->h, &st->map);
    return rc;
}

int aug_run_hflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s, struct aug_trace *tr)
{
    (void)s;
    return run_flip(im, op, rng, tr, false);
}

int aug_run_vflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s, struct aug_trace *tr)
{
    (void)s;
    return run_flip(im, op, rng, tr, true);
}

int aug_run_crop(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                 struct aug_scratch *s, struct aug_trace *tr)
{
    static const enum aug_pad modes[] = {
        [AUG_W_PAD_CONSTANT] = AUG_PAD_CONSTANT, [AUG_W_PAD_EDGE] = AUG_PAD_EDGE,
        [AUG_W_PAD_REFLECT] = AUG_PAD_REFLECT, [AUG_W_PAD_SYMMETRIC] = AUG_PAD_SYMMETRIC};
    const struct aug_param *pad = &op->a[AUG_CROP_PADDING];
    int32_t w = op->a[AUG_CROP_MODE].word;
    enum aug_pad mode = w >= 0 && w <= AUG_W_PAD_SYMMETRIC ? modes[w] : AUG_PAD_CONSTANT;
    uint32_t padding[4];
    struct aug_crop_params cp;
    struct aug_step *st;
    uint8_t fill[3];
    int rc;

    for (uint32_t i = 0; i < 4; i++)
        padding[i] = (uint32_t)pad->v[i];
    /* the output is the image itself: augment_check made size its size */
    rc = aug_draw_pad_crop(rng, im->w, im->h, pad->n ? padding : NULL,
                           op->a[AUG_CROP_PAD_IF_NEEDED].v[0] != 0, im->w, im->h, &cp);
    if (rc < 0)
        return rc;
    rc = aug_pad_crop(im, im, &cp, mode, fill_of(&op->a[AUG_CROP_FILL], fill), s);
    if (rc < 0)
        return rc;
    rc = trace_add(tr, AUG_STEP_PAD_CROP, &st);
    if (st) {
        st->crop = cp;
        st->pad = mode;
        aug_map_pad_crop(&cp, im->w, im->h, &st->map);
    }
    return rc;
}

/* Applies a policy's draw, then traces its geometric ops, in order (the
 * photometric ones between them do not move the targets). */
static int policy(struct aug_img *im, const struct aug_policy_draw *d,
                  const struct aug_param *interp, const struct aug_param *fill,
                  struct aug_scratch *s, struct aug_trace *tr)
{
    struct aug_affine_params p;
    uint8_t f[3];
    int rc = aug_policy_apply_interp(im, d, interp_of(interp), fill_of(fill, f), s);

    for (uint32_t k = 0; rc == 0 && k < d->n && k < AUG_POLICY_MAX_OPS; k++)
        if (aug_policy_step_affine(&d->step[k], im->w, im->h, &p))
            rc = trace_affine(tr, im, &p);
    return rc;
}

int aug_run_trivialaugment(struct aug_img *im, const struct aug_op *op,
                           struct rng_stream *rng, struct aug_scratch *s, struct aug_trace *tr)
{
    struct aug_policy_draw d;

    aug_draw_trivialaugment_bins(rng, (uint32_t)op->a[AUG_TA_BINS].v[0], im->w, im->h, &d);
    return policy(im, &d, &op->a[AUG_TA_INTERP], &op->a[AUG_TA_FILL], s, tr);
}

int aug_run_randaugment(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                        struct aug_scratch *s, struct aug_trace *tr)
{
    struct aug_policy_draw d;

    aug_draw_randaugment(rng, (uint32_t)op->a[AUG_RA_NUM_OPS].v[0],
                         (uint32_t)op->a[AUG_RA_MAGNITUDE].v[0],
                         (uint32_t)op->a[AUG_RA_BINS].v[0], im->w, im->h, &d);
    return policy(im, &d, &op->a[AUG_RA_INTERP], &op->a[AUG_RA_FILL], s, tr);
}

int aug_run_autoaugment(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                        struct aug_scratch *s, struct aug_trace *tr)
{
    struct aug_policy_draw d;

    aug_draw_autoaugment_imagenet(rng, im->w, im->h, &d);
    return policy(im, &d, &op->a[AUG_AA_INTERP], &op->a[AUG_AA_FILL], s, tr);
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
                    struct aug_scratch *s, struct aug_trace *tr)
{
    struct aug_erasing_args a;

    (void)tr;
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

int aug_trace_mask(const struct aug_trace *t, struct aug_img *mask, struct aug_scratch *s)
{
    for (uint32_t i = 0; i < t->n && i < AUG_TRACE_MAX; i++) {
        const struct aug_step *st = &t->step[i];
        const struct aug_affine_params *a = &st->affine;
        int rc = 0;

        if (st->map.out_w != mask->w || st->map.out_h != mask->h)
            return -EINVAL;
        switch (st->kind) {
        case AUG_STEP_AFFINE:
            rc = aug_affine(mask, a->angle, a->tx, a->ty, a->scale, a->shear_x, a->shear_y,
                            AUG_NEAREST, NULL, s);
            break;
        case AUG_STEP_HFLIP:
            aug_hflip(mask);
            break;
        case AUG_STEP_VFLIP:
            aug_vflip(mask);
            break;
        case AUG_STEP_PAD_CROP:
            rc = aug_pad_crop(mask, mask, &st->crop, (enum aug_pad)st->pad, NULL, s);
            break;
        default:
            rc = -EINVAL;
            break;
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

int aug_trace_boxes(const struct aug_trace *t, float *boxes, uint32_t n, uint8_t *keep,
                    uint64_t n_rows, uint8_t *tmp, struct rf_err *err)
{
    for (uint32_t i = 0; i < t->n && i < AUG_TRACE_MAX && n > 0; i++) {
        int kept = aug_boxes(&t->step[i].map, boxes, n, boxes, tmp, err);
        uint32_t j = 0;

        if (kept < 0)
            return kept;
        /* the rows that reached this step, in order, are tmp's */
        for (uint64_t r = 0; r < n_rows && j < n; r++)
            if (keep[r])
                keep[r] = tmp[j++];
        n = (uint32_t)kept;
    }
    return (int)n;
}
