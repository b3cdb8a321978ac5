/*
 * aug_policy_apply.c - runs a policy's drawn ops (aug_policy.h) on an
 * image with the photometric (aug_color.h) and geometric (aug_geom.h) ops,
 * as torchvision 0.14's autoaugment._apply_op calls its functional ops.
 * Its own file so the draws and their tests link without the ops.
 */
#include <errno.h>
#include <math.h>

#include "aug_policy.h"
#include "aug_policy_ops.h"

/* torchvision's math.degrees(math.atan(m)) */
static float atan_deg(float m)
{
    return (float)(atan((double)m) * (180.0 / M_PI));
}

/*
 * A policy op's affine, when it is geometric.  The shears are about the
 * top-left corner (_apply_op passes center=[0, 0]); aug_affine turns about
 * the image's centre, so the corner becomes a translation: the inverse map
 * x' = x + tan(s) y about the corner is, about the centre, that map
 * followed by -tan(s) * h / 2 (ShearX; ShearY -tan(s) * w / 2).  Rotate
 * turns by m counter-clockwise, F.rotate's convention: affine's angle is
 * its negation.  Translate takes int(magnitude): toward zero.
 */
bool aug_policy_step_affine(const struct aug_policy_step *st, uint32_t w, uint32_t h,
                            struct aug_affine_params *p)
{
    float m = st->magnitude;
    double t = tan(atan((double)m));

    *p = (struct aug_affine_params){ .scale = 1.0f };
    switch ((enum aug_pop)st->op) {
    case AUG_POP_SHEAR_X:
        p->tx = (float)(-t * h / 2.0);
        p->shear_x = atan_deg(m);
        return true;
    case AUG_POP_SHEAR_Y:
        p->ty = (float)(-t * w / 2.0);
        p->shear_y = atan_deg(m);
        return true;
    case AUG_POP_TRANSLATE_X:
        p->tx = truncf(m);
        return true;
    case AUG_POP_TRANSLATE_Y:
        p->ty = truncf(m);
        return true;
    case AUG_POP_ROTATE:
        p->angle = -m;
        return true;
    default:
        return false;
    }
}

/* One op: its affine (aug_policy_step_affine), or its photometric op. */
static int apply_one(struct aug_img *im, const struct aug_policy_step *st, enum aug_interp interp,
                     const uint8_t *fill, struct aug_scratch *s)
{
    float m = st->magnitude;
    struct aug_affine_params a;

    if (aug_policy_step_affine(st, im->w, im->h, &a))
        return aug_affine(im, a.angle, a.tx, a.ty, a.scale, a.shear_x, a.shear_y, interp, fill,
                          s);
    switch ((enum aug_pop)st->op) {
    case AUG_POP_IDENTITY:
        return 0;
    case AUG_POP_SHEAR_X:
    case AUG_POP_SHEAR_Y:
    case AUG_POP_TRANSLATE_X:
    case AUG_POP_TRANSLATE_Y:
    case AUG_POP_ROTATE:
        break; /* geometric: above */
    case AUG_POP_BRIGHTNESS:
        aug_brightness(im, (float)(1.0 + m));
        return 0;
    case AUG_POP_COLOR:
        aug_saturation(im, (float)(1.0 + m));
        return 0;
    case AUG_POP_CONTRAST:
        aug_contrast(im, (float)(1.0 + m));
        return 0;
    case AUG_POP_SHARPNESS:
        return aug_sharpness(im, (float)(1.0 + m), s);
    case AUG_POP_POSTERIZE:
        aug_posterize(im, (uint32_t)m);
        return 0;
    case AUG_POP_SOLARIZE:
        aug_solarize(im, m);
        return 0;
    case AUG_POP_AUTOCONTRAST:
        aug_autocontrast(im);
        return 0;
    case AUG_POP_EQUALIZE:
        aug_equalize(im);
        return 0;
    case AUG_POP_INVERT:
        aug_invert(im);
        return 0;
    case AUG_POP_COUNT:
        break;
    }
    return -EINVAL;
}

int aug_policy_apply_interp(struct aug_img *im, const struct aug_policy_draw *d,
                            unsigned interp, const uint8_t *fill, struct aug_scratch *s)
{
    for (uint32_t k = 0; k < d->n && k < AUG_POLICY_MAX_OPS; k++) {
        int rc = apply_one(im, &d->step[k], (enum aug_interp)interp, fill, s);

        if (rc)
            return rc;
    }
    return 0;
}

int aug_policy_apply(struct aug_img *im, const struct aug_policy_draw *d, const uint8_t *fill,
                     struct aug_scratch *s)
{
    return aug_policy_apply_interp(im, d, AUG_NEAREST, fill, s);
}
