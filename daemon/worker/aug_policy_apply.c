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
 * One op.  The shears are about the top-left corner (_apply_op passes
 * center=[0, 0]); aug_affine turns about the image's centre, so the corner
 * becomes a translation: the inverse map x' = x + tan(s) y about the corner
 * is, about the centre, that map followed by -tan(s) * h / 2 (ShearX; ShearY
 * -tan(s) * w / 2).  Rotate turns by m counter-clockwise, F.rotate's
 * convention: affine's angle is its negation.
 */
static int apply_one(struct aug_img *im, const struct aug_policy_step *st, enum aug_interp interp,
                     const uint8_t *fill, struct aug_scratch *s)
{
    float m = st->magnitude;
    double t;

    switch ((enum aug_pop)st->op) {
    case AUG_POP_IDENTITY:
        return 0;
    case AUG_POP_SHEAR_X:
        t = tan(atan((double)m));
        return aug_affine(im, 0.0f, (float)(-t * im->h / 2.0), 0.0f, 1.0f, atan_deg(m), 0.0f,
                          interp, fill, s);
    case AUG_POP_SHEAR_Y:
        t = tan(atan((double)m));
        return aug_affine(im, 0.0f, 0.0f, (float)(-t * im->w / 2.0), 1.0f, 0.0f, atan_deg(m),
                          interp, fill, s);
    case AUG_POP_TRANSLATE_X: /* int(magnitude): toward zero */
        return aug_affine(im, 0.0f, truncf(m), 0.0f, 1.0f, 0.0f, 0.0f, interp, fill, s);
    case AUG_POP_TRANSLATE_Y:
        return aug_affine(im, 0.0f, 0.0f, truncf(m), 1.0f, 0.0f, 0.0f, interp, fill, s);
    case AUG_POP_ROTATE:
        return aug_affine(im, -m, 0.0f, 0.0f, 1.0f, 0.0f, 0.0f, interp, fill, s);
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
