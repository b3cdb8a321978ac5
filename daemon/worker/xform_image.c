/*
 * xform_image.c - the `train` and `eval` JPEG transforms (xform_image.h):
 * plan the box, decode it (jpeg.h), resample it (resize.h) straight into
 * the slot in the ring's layout.
 *
 * Per sample:            stage clock (struct xform_ctx)
 *   jpg_open             decode: header, pixel and scan caps
 *   plan                 (train draws from the sample's stream)
 *   jpg_start            decode: DCT scale s/8
 *   rs_cache_plan        resize: the two coefficient tables, from the
 *                        worker's cache or built
 *   jpg_read             decode: the box the tables read
 *   rs_resize            resize: to size x size RGB, flipped if drawn,
 *                        written into the slot as CHW or HWC
 *
 * Scaled coordinates: at scale s/8 scaled pixel m covers original pixels
 * [8m/s, 8(m+1)/s), so a box maps by multiplying by s/8 and the input
 * limits widen to the scaled pixels they touch.
 *
 * An RFPX record (proto/pixels.h: the image as its decoded RGB pixels, in
 * a dataset whose MANIFEST has raw_images) skips the decoder: px_parse
 * instead of jpg_open (a bad record is BAD_DECODE, one over the pixel cap
 * BAD_TOO_LARGE, as for a JPEG), the same plan over its width x height
 * (the same draws), and the same tables and resampler at scale 1 with the
 * record's pixels as the region, so its output is the output of a JPEG
 * that decodes to those pixels at scale 8/8.  All its time is resize.
 *
 * After an image applied with success, each of train, eval and none
 * leaves its view in struct xform_ctx (targets.h: the source box that
 * became the output, the flip, the masks' grid), for the sample's boxes
 * and masks; it changes no pixel and takes no draw.
 *
 * The `none` transform (bottom of the file) serves a dataset whose
 * MANIFEST has image_shape HxW as it is: an RFPX record's pixels, or a
 * JPEG decoded whole at scale 8/8, each checked to be H x W (else
 * BAD_SHAPE), copied into the slot (HWC) or split into planes (CHW).
 * Parsing and decoding count as decode, the copy as write.
 */
#include "xform_image.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "ctl.h"
#include "jpeg.h"
#include "pixels.h"
#include "resize.h"
#include "ring.h"

#define SIZE_MAX_OUT 4096
#define RESIZED_MAX (1u << 20)  /* eval's int(size / crop), at most */

struct xform_image_ctx {
    struct jpg_dec *dec;
    struct rs_cache tables;     /* the resampler's recent coefficient tables */
    void *scratch;              /* rs_resize's */
    size_t scratch_cap;
};

/* Failures of the decoder and the resampler, as the worker counts them. */
static const struct {
    int code;
    enum wire_bad why;
} bad_of[] = {
    { -E2BIG, BAD_TOO_LARGE },
    { -ENOMEM, BAD_TOO_LARGE },
};

static enum wire_bad why_of(int code)
{
    for (unsigned i = 0; i < sizeof(bad_of) / sizeof(bad_of[0]); i++)
        if (bad_of[i].code == code)
            return bad_of[i].why;
    return BAD_DECODE;
}

struct xfi_crop xfi_rrc_params(uint32_t width, uint32_t height, double scale_lo,
                               double scale_hi, double ratio_lo, double ratio_hi,
                               struct rng_stream *rng)
{
    double area = (double)width * height;
    double log_lo = log(ratio_lo), log_hi = log(ratio_hi);
    double rmin = fmin(ratio_lo, ratio_hi), rmax = fmax(ratio_lo, ratio_hi);
    double in_ratio = (double)width / height;
    struct xfi_crop c;

    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * rng_uniform_range(rng, scale_lo, scale_hi);
        double aspect = exp(rng_uniform_range(rng, log_lo, log_hi));
        double w = nearbyint(sqrt(target * aspect));
        double h = nearbyint(sqrt(target / aspect));

        if (w > 0 && w <= width && h > 0 && h <= height) {
            c.w = (uint32_t)w;
            c.h = (uint32_t)h;
            c.i = rng_below(rng, height - c.h + 1);
            c.j = rng_below(rng, width - c.w + 1);
            return c;
        }
    }
    /* the central fallback */
    if (in_ratio < rmin) {
        c.w = width;
        c.h = (uint32_t)nearbyint(c.w / rmin);
    } else if (in_ratio > rmax) {
        c.h = height;
        c.w = (uint32_t)nearbyint(c.h * rmax);
    } else {
        c.w = width;
        c.h = height;
    }
    c.w = c.w < 1 ? 1 : c.w > width ? width : c.w;
    c.h = c.h < 1 ? 1 : c.h > height ? height : c.h;
    c.i = (height - c.h) / 2;
    c.j = (width - c.w) / 2;
    return c;
}

void xfi_train_plan(uint32_t width, uint32_t height, const struct wire_xform *p,
                    struct rng_stream *rng, struct xfi_plan *pl, struct xfi_crop *crop)
{
    struct xfi_crop c = xfi_rrc_params(width, height, p->scale_lo, p->scale_hi, p->ratio_lo,
                                       p->ratio_hi, rng);

    *pl = (struct xfi_plan){
        .x0 = c.j, .x1 = (double)c.j + c.w, .y0 = c.i, .y1 = (double)c.i + c.h,
        .lx0 = (int32_t)c.j, .lx1 = (int32_t)(c.j + c.w),
        .ly0 = (int32_t)c.i, .ly1 = (int32_t)(c.i + c.h),
    };
    pl->flip = rng_bernoulli(rng, p->flip);
    if (crop)
        *crop = c;
}

void xfi_eval_plan(uint32_t width, uint32_t height, const struct wire_xform *p,
                   struct xfi_plan *pl, uint32_t *rw, uint32_t *rh, uint32_t *top,
                   uint32_t *left)
{
    uint32_t s = (uint32_t)(p->size / p->crop);  /* geometry bounds it */
    uint64_t nw, nh;
    double sx, sy;

    if (width <= height) {
        nw = s;
        nh = (uint64_t)s * height / width;
    } else {
        nh = s;
        nw = (uint64_t)s * width / height;
    }
    *rw = (uint32_t)nw;
    *rh = (uint32_t)nh;
    *top = (uint32_t)nearbyint(((double)nh - p->size) / 2.0);
    *left = (uint32_t)nearbyint(((double)nw - p->size) / 2.0);
    sx = (double)width / (double)nw;
    sy = (double)height / (double)nh;
    *pl = (struct xfi_plan){
        .x0 = *left * sx, .x1 = ((double)*left + p->size) * sx,
        .y0 = *top * sy, .y1 = ((double)*top + p->size) * sy,
        .lx0 = 0, .lx1 = (int32_t)width, .ly0 = 0, .ly1 = (int32_t)height,
    };
}

/*
 * The image the transform is bound to: a jpeg dataset's (its MANIFEST's
 * image_shape, 0 x 0 when it varies), or a kind-fields dataset's field
 * p->field (its shape=, 0 x 0 when it varies).  false when the dataset has
 * no such 3-channel u8 image field (the daemon's xform_bind_field names
 * what is wrong at ATTACH; this is the check that holds it).
 */
static bool bound_image(const struct dataset_info *info, const struct wire_xform *p,
                        uint32_t *h, uint32_t *w)
{
    const struct schema_field *f;

    if (info->kind == DATASET_JPEG) {
        *h = info->image_height;
        *w = info->image_width;
        return true;
    }
    if (info->kind != DATASET_FIELDS || p->field >= info->schema.n)
        return false;
    f = &info->schema.f[p->field];
    if (f->kind != SCHEMA_IMAGE || f->channels != 3 || f->dtype != DATASET_DTYPE_U8 ||
        f->role == SCHEMA_ROLE_MASK)
        return false;
    *h = f->height;
    *w = f->width;
    return true;
}

int xform_image_geometry(const struct dataset *ds, const struct wire_xform *p,
                         struct xform_out *out, struct rf_err *err)
{
    const struct dataset_info *info = dataset_info(ds);
    const struct xform_def *xf = xform_get(p->id);
    const char *name = xf ? xf->name : "train/eval";
    uint32_t h, w;

    if (info->kind == DATASET_FIELDS && !bound_image(info, p, &h, &w))
        return rf_err_set(err, -EINVAL, "transform %s is bound to field %u, which is not a "
                          "3-channel u8 image field of this dataset", name, p->field);
    if (info->kind != DATASET_JPEG && info->kind != DATASET_FIELDS)
        return rf_err_set(err, -EINVAL,
                          "transform %s needs a jpeg dataset (ringfeed-pack imagefolder), "
                          "this one holds %s: use transform=raw",
                          name, dataset_kind_name(info->kind));
    if (p->size < 1 || p->size > SIZE_MAX_OUT)
        return rf_err_set(err, -EINVAL, "size=%u: give 1..%u", p->size, SIZE_MAX_OUT);
    if (p->layout != RING_CHW && p->layout != RING_HWC)
        return rf_err_set(err, -EINVAL, "transform %s writes chw or hwc", name);
    if (!(p->crop > 0 && p->crop <= 1) || p->size / p->crop > RESIZED_MAX)
        return rf_err_set(err, -EINVAL, "crop=%g: give a fraction in (0, 1] of at least size/%u",
                          p->crop, RESIZED_MAX);
    if (!(p->scale_lo > 0 && p->scale_lo <= p->scale_hi && p->scale_hi <= 1) ||
        !(p->ratio_lo > 0 && p->ratio_lo <= p->ratio_hi && isfinite(p->ratio_hi)))
        return rf_err_set(err, -EINVAL, "scale=%g,%g ratio=%g,%g: give 0 < lo <= hi",
                          p->scale_lo, p->scale_hi, p->ratio_lo, p->ratio_hi);
    if (p->layout == RING_CHW) {
        out->shape[0] = 3;
        out->shape[1] = out->shape[2] = p->size;
    } else {
        out->shape[0] = out->shape[1] = p->size;
        out->shape[2] = 3;
    }
    out->layout = p->layout;
    out->dtype = RING_U8;
    out->sample_bytes = 3ull * p->size * p->size;
    return 0;
}

void xform_image_ctx_free(struct xform_image_ctx *ic)
{
    if (!ic)
        return;
    jpg_free(ic->dec);
    rs_cache_free(&ic->tables);
    free(ic->scratch);
    free(ic);
}

/* As buf_grow, for the resampler's scratch: 32-byte aligned, contents lost. */
static bool grow_aligned(void **p, size_t *cap, size_t need)
{
    void *q;

    if (need <= *cap)
        return true;
    need = (need + 31) & ~(size_t)31;
    q = aligned_alloc(32, need);
    if (!q)
        return false;
    free(*p);
    *p = q;
    *cap = need;
    return true;
}

static struct xform_image_ctx *image_ctx(struct xform_ctx *ctx)
{
    struct xform_image_ctx *ic = ctx->image;

    if (!ic) {
        ic = calloc(1, sizeof(*ic));
        if (!ic)
            return NULL;
        ic->dec = jpg_new();
        if (!ic->dec) {
            free(ic);
            return NULL;
        }
        ctx->image = ic;
    }
    return ic;
}

/* The two tables for the plan's box at scale k of an sw x sh image: the
 * input limits are the plan's, scaled, widened to the pixels they touch
 * and clipped to the image, returned in *lx0, *ly0 (the tables count from
 * them); scratch grown to fit.  Returns 0, or -ENOMEM with err set. */
static int plan_tables(struct xform_image_ctx *ic, const struct xfi_plan *pl, double k,
                       uint32_t sw, uint32_t sh, uint32_t size, int32_t *lx0, int32_t *ly0,
                       const struct rs_axis **ax, const struct rs_axis **ay, struct rf_err *err)
{
    int32_t lx1, ly1;

    *lx0 = (int32_t)floor(pl->lx0 * k);
    *ly0 = (int32_t)floor(pl->ly0 * k);
    lx1 = (int32_t)fmin(ceil(pl->lx1 * k), sw);
    ly1 = (int32_t)fmin(ceil(pl->ly1 * k), sh);
    /* tables relative to (lx0, ly0) */
    if (rs_cache_plan(&ic->tables, RS_HORIZONTAL, size, pl->x0 * k, pl->x1 * k, *lx0, lx1,
                      pl->flip, ax) < 0 ||
        rs_cache_plan(&ic->tables, RS_VERTICAL, size, pl->y0 * k, pl->y1 * k, *ly0, ly1, false,
                      ay) < 0 ||
        !grow_aligned(&ic->scratch, &ic->scratch_cap, rs_scratch_bytes(*ax, *ay)))
        return rf_err_set(err, -ENOMEM, "cannot plan a %ux%u resize of %ux%u", size, size, sw,
                          sh);
    return 0;
}

/* Decodes the plan's box at the smallest sufficient DCT scale and resamples
 * it to size x size RGB at dst, in layout (train or eval picks the scale
 * rule, jpeg.h).  Adds to the decode and resize clocks (the tables' lookup
 * or build is resize time). */
static int render(struct xform_image_ctx *ic, const struct xfi_plan *pl, uint32_t size, bool train,
                  enum rs_layout layout, uint8_t *dst, struct xform_ctx *ctx, struct rf_err *err)
{
    unsigned s = ctx->force_scale >= 1 && ctx->force_scale <= 8
                     ? ctx->force_scale
                     : jpg_pick_scale(pl->x1 - pl->x0, pl->y1 - pl->y0, size,
                                      train ? JPG_COVER_TRAIN : JPG_COVER_EVAL);
    double k = s / 8.0;
    uint32_t sw, sh;
    struct jpg_roi roi;
    const struct rs_axis *ax, *ay;
    const uint8_t *src;
    uint64_t t0 = clock_mono_ns(), t1, t2;
    int32_t lx0, ly0;
    int rc;

    ctx->last_scale = s;
    jpg_set_merged(ic->dec, ctx->merged_upsampling);
    jpg_set_fast_dct(ic->dec, ctx->fast_dct);
    rc = jpg_start(ic->dec, s, &sw, &sh, err);
    t1 = clock_mono_ns();
    ctx->decode_ns += t1 - t0;
    if (rc < 0)
        return rc;
    rc = plan_tables(ic, pl, k, sw, sh, size, &lx0, &ly0, &ax, &ay, err);
    if (rc < 0) {
        jpg_abort(ic->dec);
        ctx->resize_ns += clock_mono_ns() - t1;
        return rc;
    }
    t2 = clock_mono_ns();
    ctx->resize_ns += t2 - t1;
    rc = jpg_read(ic->dec, (uint32_t)(lx0 + ax->lo), (uint32_t)(lx0 + ax->hi),
                  (uint32_t)(ly0 + ay->lo), (uint32_t)(ly0 + ay->hi), &roi, err);
    t1 = clock_mono_ns();
    ctx->decode_ns += t1 - t2;
    if (rc < 0)
        return rc;
    ctx->tiled += roi.from_tiles;
    src = roi.pix + (size_t)(ly0 + ay->lo - (int32_t)roi.y0) * roi.stride +
          (size_t)(lx0 + ax->lo - (int32_t)roi.x0) * 3;
    rs_resize(src, roi.stride, ax, ay, layout, ic->scratch, dst);
    ctx->resize_ns += clock_mono_ns() - t1;
    return 0;
}

/* As render, for an RFPX record's pixels (width x height, rows of
 * width * 3 bytes): no decode, scale 1, the whole image the region.  All
 * resize time. */
static int render_pixels(struct xform_image_ctx *ic, const struct xfi_plan *pl, uint32_t size,
                         const struct px_header *px, enum rs_layout layout, uint8_t *dst,
                         struct xform_ctx *ctx, struct rf_err *err)
{
    const struct rs_axis *ax, *ay;
    size_t stride = (size_t)px->width * PX_CHANNELS;
    uint64_t t0 = clock_mono_ns();
    int32_t lx0, ly0;
    int rc;

    ctx->last_scale = 8;
    rc = plan_tables(ic, pl, 1.0, px->width, px->height, size, &lx0, &ly0, &ax, &ay, err);
    if (rc == 0)
        rs_resize(px->pixels + (size_t)(ly0 + ay->lo) * stride + (size_t)(lx0 + ax->lo) * 3,
                  stride, ax, ay, layout, ic->scratch, dst);
    ctx->resize_ns += clock_mono_ns() - t0;
    return rc;
}

/* Checks an RFPX record and its size against the cap: 0, or a negative
 * errno with *why and err set. */
static int open_pixels(const void *rec, size_t rec_len, uint64_t pixel_cap,
                       struct px_header *px, enum wire_bad *why, struct rf_err *err)
{
    struct rf_err perr;
    uint64_t n;

    if (px_parse(rec, rec_len, px, &perr) < 0) {
        *why = BAD_DECODE;
        return rf_err_set(err, -EBADMSG, "bad pixel record: %s", perr.msg);
    }
    n = (uint64_t)px->width * px->height;
    if (pixel_cap && n > pixel_cap) {
        *why = BAD_TOO_LARGE;
        return rf_err_set(err, -E2BIG,
                          "RFPX image of %ux%u = %llu pixels is over the pixel cap of %llu "
                          "(pixel-cap in ringfeedd.conf)",
                          px->width, px->height, (unsigned long long)n,
                          (unsigned long long)pixel_cap);
    }
    return 0;
}

static int image_apply(bool train, const struct wire_xform *p, const void *rec, size_t rec_len,
                       struct rng_stream *rng, struct xform_ctx *ctx, uint8_t *dst,
                       enum wire_bad *why, struct rf_err *err)
{
    struct jpg_limits lim = { .pixel_cap = p->pixel_cap, .scan_cap = JPG_SCAN_CAP };
    struct xform_image_ctx *ic = image_ctx(ctx);
    struct jpg_header hdr;
    struct px_header px = { 0 };
    struct xfi_plan pl;
    struct tgt_view view;
    enum rs_layout layout;
    uint64_t t0 = clock_mono_ns();
    int rc;

    if (!ic) {
        *why = BAD_TOO_LARGE;
        return rf_err_set(err, -ENOMEM, "out of memory for the image transforms");
    }
    if (px_is(rec, rec_len)) {
        rc = open_pixels(rec, rec_len, p->pixel_cap, &px, why, err);
        ctx->resize_ns += clock_mono_ns() - t0;
        if (rc < 0)
            return rc;
        hdr.width = px.width;
        hdr.height = px.height;
    } else {
        jpg_set_tiles(ic->dec, !ctx->no_tiles);
        rc = jpg_open(ic->dec, rec, rec_len, &lim, &hdr, err);
        ctx->decode_ns += clock_mono_ns() - t0;
        if (rc < 0) {
            *why = why_of(rc);
            return rc;
        }
    }
    if (train) {
        struct xfi_crop c;

        xfi_train_plan(hdr.width, hdr.height, p, rng, &pl, &c);
        view = (struct tgt_view){ .cx = c.j, .cy = c.i, .cw = c.w, .ch = c.h,
                                  .rw = p->size, .rh = p->size };
    } else {
        uint32_t rw, rh, top, left;

        xfi_eval_plan(hdr.width, hdr.height, p, &pl, &rw, &rh, &top, &left);
        view = (struct tgt_view){ .cw = hdr.width, .ch = hdr.height, .rw = rw, .rh = rh,
                                  .ox = left, .oy = top };
    }
    /* the resampler's vertical pass stores straight into the slot, in
     * either layout: its time counts as resize */
    layout = p->layout == RING_CHW ? RS_CHW : RS_HWC;
    rc = px.pixels ? render_pixels(ic, &pl, p->size, &px, layout, dst, ctx, err)
                   : render(ic, &pl, p->size, train, layout, dst, ctx, err);
    if (rc < 0) {
        *why = why_of(rc);
        return rc;
    }
    /* the box the resampler took (eval's in source pixels), and the mask grid */
    view.src_w = hdr.width;
    view.src_h = hdr.height;
    view.x0 = pl.x0;
    view.x1 = pl.x1;
    view.y0 = pl.y0;
    view.y1 = pl.y1;
    view.out_w = view.out_h = p->size;
    view.flip = pl.flip;
    ctx->view = view;
    return 0;
}

/* none's view: the whole w x h image, as it is. */
static void whole_view(struct xform_ctx *ctx, uint32_t w, uint32_t h)
{
    ctx->view = (struct tgt_view){ .src_w = w, .src_h = h, .x1 = w, .y1 = h,
                                   .out_w = w, .out_h = h, .cw = w, .ch = h, .rw = w, .rh = h };
}

int xform_train_apply(const struct dataset *ds, const struct wire_xform *p, const void *rec,
                      size_t rec_len, struct rng_stream *rng, struct xform_ctx *ctx,
                      uint8_t *dst, const struct xform_out *out, enum wire_bad *why,
                      struct rf_err *err)
{
    (void)ds;
    (void)out;
    return image_apply(true, p, rec, rec_len, rng, ctx, dst, why, err);
}

int xform_eval_apply(const struct dataset *ds, const struct wire_xform *p, const void *rec,
                     size_t rec_len, struct rng_stream *rng, struct xform_ctx *ctx,
                     uint8_t *dst, const struct xform_out *out, enum wire_bad *why,
                     struct rf_err *err)
{
    (void)ds;
    (void)out;
    (void)rng;
    return image_apply(false, p, rec, rec_len, rng, ctx, dst, why, err);
}

/*
 * none: the images as they are, for a dataset whose MANIFEST says they all
 * have one size (image_shape HxW).  The ATTACH parameters of the resizing
 * transforms do not apply: each must be left at its default (flip may
 * also be 0), so a request that asks for a crop or a size is refused
 * rather than served something else.  (The daemon refuses any of them
 * named at all, at any value: transform.c's xform_check_params; this
 * holds the geometry for the tools that call it directly.)
 */
int xform_none_geometry(const struct dataset *ds, const struct wire_xform *p,
                        struct xform_out *out, struct rf_err *err)
{
    const struct dataset_info *info = dataset_info(ds);
    struct ctl_attach def;
    uint32_t h = 0, w = 0;

    if (info->kind == DATASET_FIELDS && !bound_image(info, p, &h, &w))
        return rf_err_set(err, -EINVAL, "transform none is bound to field %u, which is not a "
                          "3-channel u8 image field of this dataset", p->field);
    if (info->kind != DATASET_JPEG && info->kind != DATASET_FIELDS)
        return rf_err_set(err, -EINVAL,
                          "transform none needs a jpeg dataset whose images have one size "
                          "(ringfeed-pack imagefolder), this one holds %s: use transform=raw",
                          dataset_kind_name(info->kind));
    bound_image(info, p, &h, &w);
    if ((!h || !w) && info->kind == DATASET_FIELDS)
        return rf_err_set(err, -EINVAL,
                          "transform none needs images of one size: field %s has no shape=HxW "
                          "in the MANIFEST (its images differ in size); use train or eval",
                          info->schema.f[p->field].name);
    if (!h || !w)
        return rf_err_set(err, -EINVAL,
                          "transform none needs images of one size: this dataset's MANIFEST "
                          "has no image_shape (its images differ in size, or it was packed "
                          "before image_shape existed); use train or eval");
    if (p->layout != RING_CHW && p->layout != RING_HWC)
        return rf_err_set(err, -EINVAL, "transform none writes chw or hwc");
    ctl_attach_defaults(&def);
    if (p->size != def.size)
        return rf_err_set(err, -EINVAL,
                          "size=%u: transform none delivers every image at its own %ux%u "
                          "(the MANIFEST's image_shape, HxW); leave size out, or use train "
                          "or eval to resize", p->size, h, w);
    if (p->scale_lo != def.scale[0] || p->scale_hi != def.scale[1] ||
        p->ratio_lo != def.ratio[0] || p->ratio_hi != def.ratio[1] || p->crop != def.crop ||
        (p->flip != def.flip && p->flip != 0))
        return rf_err_set(err, -EINVAL,
                          "scale=%g,%g ratio=%g,%g crop=%g flip=%g: transform none neither "
                          "crops nor flips; leave these out, or use train or eval",
                          p->scale_lo, p->scale_hi, p->ratio_lo, p->ratio_hi, p->crop, p->flip);
    if (p->layout == RING_CHW) {
        out->shape[0] = 3;
        out->shape[1] = h;
        out->shape[2] = w;
    } else {
        out->shape[0] = h;
        out->shape[1] = w;
        out->shape[2] = 3;
    }
    out->layout = p->layout;
    out->dtype = RING_U8;
    out->sample_bytes = 3ull * h * w;
    return 0;
}

/* One row of w RGB pixels split into its three planes. */
static void deinterleave(const uint8_t *restrict row, uint8_t *restrict r, uint8_t *restrict g,
                         uint8_t *restrict b, uint32_t x, uint32_t w)
{
    for (; x < w; x++) {
        r[x] = row[3 * x];
        g[x] = row[3 * x + 1];
        b[x] = row[3 * x + 2];
    }
}

#if defined(__x86_64__)
#include <immintrin.h>

/* The same, 16 pixels (48 bytes, three loads) at a time with SSSE3's
 * byte shuffle: plane c's byte k is source byte 3k + c, in load (3k + c)
 * / 16 (SHUF[c][load], -128: none); each load's shuffle puts its bytes of
 * the plane in place and the three are ORed.  The rest of the row goes
 * through deinterleave.  The scalar loop, which compilers leave
 * unvectorized, took 6x a plain copy's time (transform none on 32x32
 * images, CHW: 1.29 s of the workers' 2.2 s for 400,000 images). */
static const int8_t SHUF[3][3][16] = {
    {{0, 3, 6, 9, 12, 15, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128},
     {-128, -128, -128, -128, -128, -128, 2, 5, 8, 11, 14, -128, -128, -128, -128, -128},
     {-128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, 1, 4, 7, 10, 13}},
    {{1, 4, 7, 10, 13, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128},
     {-128, -128, -128, -128, -128, 0, 3, 6, 9, 12, 15, -128, -128, -128, -128, -128},
     {-128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, 2, 5, 8, 11, 14}},
    {{2, 5, 8, 11, 14, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128, -128},
     {-128, -128, -128, -128, -128, 1, 4, 7, 10, 13, -128, -128, -128, -128, -128, -128},
     {-128, -128, -128, -128, -128, -128, -128, -128, -128, -128, 0, 3, 6, 9, 12, 15}},
};

__attribute__((target("ssse3"))) static void deinterleave_ssse3(const uint8_t *restrict src,
                                                                  size_t stride, uint32_t w,
                                                                  uint32_t h,
                                                                  uint8_t *restrict dst)
{
    size_t plane = (size_t)w * h;
    __m128i mask[3][3];

    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 3; v++)
            mask[c][v] = _mm_loadu_si128((const __m128i *)SHUF[c][v]);
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *row = src + y * stride;
        uint8_t *out[3] = {dst + (size_t)y * w, dst + (size_t)y * w + plane,
                           dst + (size_t)y * w + 2 * plane};
        uint32_t x = 0;

        for (; x + 16 <= w; x += 16) {
            __m128i a0 = _mm_loadu_si128((const __m128i *)(row + 3 * (size_t)x));
            __m128i a1 = _mm_loadu_si128((const __m128i *)(row + 3 * (size_t)x + 16));
            __m128i a2 = _mm_loadu_si128((const __m128i *)(row + 3 * (size_t)x + 32));

            for (int c = 0; c < 3; c++)
                _mm_storeu_si128((__m128i *)(out[c] + x),
                                 _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a0, mask[c][0]),
                                                           _mm_shuffle_epi8(a1, mask[c][1])),
                                              _mm_shuffle_epi8(a2, mask[c][2])));
        }
        deinterleave(row, out[0], out[1], out[2], x, w);
    }
}
#endif

/* Copies h rows of w RGB pixels (rows stride bytes apart) to dst, as they
 * are (HWC) or as three planes (CHW).  Only stores to dst. */
static void copy_pixels(const uint8_t *restrict src, size_t stride, uint32_t w, uint32_t h,
                        bool chw, uint8_t *restrict dst)
{
    size_t plane = (size_t)w * h;
#if defined(__x86_64__)
    bool ssse3 = __builtin_cpu_supports("ssse3");
#endif

    if (!chw) {
        for (uint32_t y = 0; y < h; y++)
            memcpy(dst + (size_t)y * w * 3, src + y * stride, (size_t)w * 3);
        return;
    }
#if defined(__x86_64__)
    if (ssse3) {
        deinterleave_ssse3(src, stride, w, h, dst);
        return;
    }
#endif
    for (uint32_t y = 0; y < h; y++) {
        const uint8_t *row = src + y * stride;
        uint8_t *r = dst + (size_t)y * w;

        deinterleave(row, r, r + plane, r + 2 * plane, 0, w);
    }
}

static int wrong_size(const char *what, uint32_t w, uint32_t h, uint32_t want_h,
                      uint32_t want_w, enum wire_bad *why, struct rf_err *err)
{
    *why = BAD_SHAPE;
    return rf_err_set(err, -EBADMSG,
                      "%s is %ux%u (HxW), the dataset's image_shape is %ux%u", what, h, w,
                      want_h, want_w);
}

int xform_none_apply(const struct dataset *ds, const struct wire_xform *p, const void *rec,
                     size_t rec_len, struct rng_stream *rng, struct xform_ctx *ctx,
                     uint8_t *dst, const struct xform_out *out, enum wire_bad *why,
                     struct rf_err *err)
{
    const struct dataset_info *info = dataset_info(ds);
    struct jpg_limits lim = { .pixel_cap = p->pixel_cap, .scan_cap = JPG_SCAN_CAP };
    struct xform_image_ctx *ic;
    struct jpg_header hdr;
    struct px_header px;
    struct jpg_roi roi;
    uint32_t sw, sh, w = 0, h = 0;
    bool chw = out->layout == RING_CHW;
    uint64_t t0 = clock_mono_ns(), t1;
    int rc;

    (void)rng;
    bound_image(info, p, &h, &w); /* geometry checked it */
    ctx->last_scale = 8;
    if (px_is(rec, rec_len)) {
        rc = open_pixels(rec, rec_len, p->pixel_cap, &px, why, err);
        t1 = clock_mono_ns();
        ctx->decode_ns += t1 - t0;
        if (rc < 0)
            return rc;
        if (px.width != w || px.height != h)
            return wrong_size("RFPX image", px.width, px.height, h, w, why, err);
        copy_pixels(px.pixels, (size_t)px.width * PX_CHANNELS, w, h, chw, dst);
        ctx->write_ns += clock_mono_ns() - t1;
        whole_view(ctx, w, h);
        return 0;
    }
    ic = image_ctx(ctx);
    if (!ic) {
        *why = BAD_TOO_LARGE;
        return rf_err_set(err, -ENOMEM, "out of memory for the image transforms");
    }
    jpg_set_tiles(ic->dec, !ctx->no_tiles);
    jpg_set_merged(ic->dec, ctx->merged_upsampling);
    jpg_set_fast_dct(ic->dec, ctx->fast_dct);
    rc = jpg_open(ic->dec, rec, rec_len, &lim, &hdr, err);
    if (rc == 0 && (hdr.width != w || hdr.height != h)) {
        jpg_abort(ic->dec);
        ctx->decode_ns += clock_mono_ns() - t0;
        return wrong_size("JPEG", hdr.width, hdr.height, h, w, why, err);
    }
    if (rc == 0)
        rc = jpg_start(ic->dec, 8, &sw, &sh, err);
    if (rc == 0)
        rc = jpg_read(ic->dec, 0, sw, 0, sh, &roi, err);
    t1 = clock_mono_ns();
    ctx->decode_ns += t1 - t0;
    if (rc < 0) {
        *why = why_of(rc);
        return rc;
    }
    ctx->tiled += roi.from_tiles;
    copy_pixels(roi.pix, roi.stride, w, h, chw, dst); /* roi.x0 is 0: it was asked for */
    ctx->write_ns += clock_mono_ns() - t1;
    whole_view(ctx, w, h);
    return 0;
}
