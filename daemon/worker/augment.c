/*
 * augment.c - the worker's augmentation stage (augment.h): the table of
 * ops linked into this build, the main process's check, and the run.
 */
#include <errno.h>

#include "augment.h"
#include "aug_run.h"
#include "clock.h"
#include "ring.h"

/* The ops linked in, by enum aug_op_id; NULL: not in this build. */
static aug_run_fn *const runs[AUG_OP_COUNT] = {
    [AUG_COLOR_JITTER] = aug_run_color_jitter,
    [AUG_GRAYSCALE] = aug_run_grayscale,
    [AUG_GAUSSIAN_BLUR] = aug_run_gaussian_blur,
    [AUG_POSTERIZE] = aug_run_posterize,
    [AUG_SOLARIZE] = aug_run_solarize,
    [AUG_SHARPNESS] = aug_run_sharpness,
    [AUG_AUTOCONTRAST] = aug_run_autocontrast,
    [AUG_EQUALIZE] = aug_run_equalize,
    [AUG_INVERT] = aug_run_invert,
    [AUG_AFFINE] = aug_run_affine,
    [AUG_ROTATION] = aug_run_rotation,
    [AUG_HFLIP] = aug_run_hflip,
    [AUG_VFLIP] = aug_run_vflip,
    [AUG_CROP] = aug_run_crop,
    [AUG_TRIVIAL] = aug_run_trivialaugment,
    [AUG_RANDAUGMENT] = aug_run_randaugment,
    [AUG_AUTOAUGMENT] = aug_run_autoaugment,
    [AUG_ERASING] = aug_run_erasing,
};

bool augment_available(uint32_t id)
{
    return id == AUG_PLUGIN || (id < AUG_OP_COUNT && runs[id] != NULL);
}

int augment_image(const struct xform_out *out, struct aug_img *im, struct rf_err *err)
{
    const uint32_t *s = out->shape;

    *im = (struct aug_img){ 0 };
    if (out->dtype != RING_U8 || (out->layout != RING_CHW && out->layout != RING_HWC))
        return rf_err_set(err, -EINVAL, "augment= works on uint8 images; this stream's samples "
                          "are %s", out->dtype != RING_U8 ? "not uint8" : "not image-shaped");
    if (out->layout == RING_HWC) {
        im->h = s[0], im->w = s[1], im->c = s[2], im->layout = AUG_HWC;
    } else if (s[0] == 1 || s[0] == 3) {
        im->c = s[0], im->h = s[1], im->w = s[2], im->layout = AUG_CHW;
    } else {
        /* a raw tensor stored height, width, channels */
        im->h = s[0], im->w = s[1], im->c = s[2], im->layout = AUG_HWC;
    }
    if ((im->c != 1 && im->c != 3) || im->h == 0 || im->w == 0)
        return rf_err_set(err, -EINVAL, "augment= works on images of 1 or 3 channels (CxHxW, "
                          "HxW or HxWxC); this stream's samples are uint8 %ux%ux%u",
                          s[0], s[1], s[2]);
    return 0;
}

int augment_check(const struct aug_spec *s, const struct xform_out *out,
                  const struct plugin_set *plugins, struct rf_err *err)
{
    struct aug_img im;
    int rc = augment_image(out, &im, err);

    if (rc < 0)
        return rc;
    for (uint32_t i = 0; i < s->n; i++) {
        const struct aug_op *o = &s->op[i];

        if (!augment_available(o->id))
            return rf_err_set(err, -EINVAL, "augment: %s is not available in this build of "
                              "ringfeedd; leave it out", aug_op_name(o->id));
        rc = aug_run_check(o, err);
        if (rc < 0)
            return rc;
        if (o->id == AUG_CROP && (o->a[AUG_CROP_SIZE].v[0] != im.h ||
                                  o->a[AUG_CROP_SIZE].v[1] != im.w))
            return rf_err_set(err, -EINVAL, "augment: RandomCrop: size=%g/%g must be the "
                              "images' own %u/%u (the crop's output is the sample); pad with "
                              "padding= and crop back to the same size",
                              o->a[AUG_CROP_SIZE].v[0], o->a[AUG_CROP_SIZE].v[1], im.h, im.w);
    }
    return plugin_check_spec(plugins, s, err);
}

int augment_run(const struct aug_spec *s, struct aug_img *im, struct rng_stream *rng,
                struct plugin_set *plugins, struct aug_scratch *scratch,
                uint64_t ns[AUG_OP_COUNT], uint64_t images[AUG_OP_COUNT], struct aug_trace *tr,
                struct rf_err *err)
{
    uint64_t t0 = clock_mono_ns();

    if (tr)
        tr->n = 0;
    for (uint32_t i = 0; i < s->n && i < AUG_OPS_MAX; i++) {
        const struct aug_op *o = &s->op[i];
        uint64_t t1;
        int rc;

        if (!augment_available(o->id)) /* augment_check refused it: a bug */
            return rf_err_set(err, -EINVAL, "augment: op %u is not in this build", o->id);
        if (o->id == AUG_PLUGIN)
            rc = plugin_run(plugins, s, o, im, rng, err);
        else
            rc = runs[o->id](im, o, rng, scratch, tr);
        t1 = clock_mono_ns();
        ns[o->id] += t1 - t0;
        images[o->id]++;
        t0 = t1;
        if (rc < 0 && o->id == AUG_PLUGIN) /* err says which and why */
            return rc;
        if (rc < 0)
            return rf_err_set(err, rc, "augment: %s failed: %s", aug_op_name(o->id),
                              rc == -ENOMEM      ? "no memory for its scratch"
                              : rc == -EOVERFLOW ? "too many geometric steps to trace"
                                                 : "error");
    }
    return 0;
}
