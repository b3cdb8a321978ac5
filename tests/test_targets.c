/*
 * test_targets.c - boxes and masks that follow an image's crop
 * (daemon/worker/targets.c), on hand-made cases:
 *   - boxes: scaled and shifted, clipped to the output, dropped when their
 *     centre leaves the source box (the half-open edges: on x0 kept, on x1
 *     dropped), mirrored when flipped, in order, in place; a NaN or an
 *     infinite coordinate or x1 < x0 is a bad box naming its row;
 *   - masks: the identity, 2x up and 3x down, the mirror, the sizes where
 *     Pillow's accumulated walk differs from (k + 0.5) * a (2 -> 7, 4 -> 6,
 *     with the columns Pillow 9.4 gives), eval's offset into the resize,
 *     u16 values kept little-endian; exactly out_w x out_h values stored;
 *     a mask of the wrong size is BAD_SHAPE naming both sizes, a bad or
 *     RGB or wrong-width RFPX record BAD_DECODE, a grid that does not fit
 *     -EINVAL;
 *   - the views train, eval and none leave in struct xform_ctx
 *     (daemon/worker/xform_image.c) for an RFPX image: train's the crop and
 *     flip its plan drew, eval's the Resize + CenterCrop box, none's the
 *     whole image.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "dataset.h"
#include "dataset_writer.h"
#include "pixels.h"
#include "ring.h"
#include "tap.h"
#include "targets.h"
#include "transform.h"
#include "xform_image.h"

/* A train-like view: the integer crop (cx, cy, cw, ch) of a src_w x
 * src_h image resized to out_w x out_h. */
static struct tgt_view crop_view(uint32_t src_w, uint32_t src_h, uint32_t cx, uint32_t cy,
                                 uint32_t cw, uint32_t ch, uint32_t out_w, uint32_t out_h,
                                 bool flip)
{
    return (struct tgt_view){
        .src_w = src_w, .src_h = src_h,
        .x0 = cx, .y0 = cy, .x1 = (double)cx + cw, .y1 = (double)cy + ch,
        .out_w = out_w, .out_h = out_h, .flip = flip,
        .cx = cx, .cy = cy, .cw = cw, .ch = ch, .rw = out_w, .rh = out_h,
    };
}

static bool rows_equal(const float *got, const float *want, uint32_t n)
{
    for (uint32_t i = 0; i < 4 * n; i++)
        if (fabsf(got[i] - want[i]) > 1e-5f) {
            tap_diag("value %u: got %g, want %g", i, got[i], want[i]);
            return false;
        }
    return true;
}

static void test_boxes(void)
{
    /* 100 x 80 source, box [10, 60) x [20, 60) onto 25 x 20: half scale */
    struct tgt_view v = crop_view(100, 80, 10, 20, 50, 40, 25, 20, false);
    static const float in[] = {
        20, 30, 40, 50,   /* inside */
        0, 25, 30, 45,    /* centre inside, left part outside: clipped */
        0, 0, 18, 10,     /* centre (9, 5) outside: dropped */
        5, 30, 15, 40,    /* centre x 10 = x0: kept */
        55, 30, 65, 40,   /* centre x 60 = x1: dropped */
        0, 0, 100, 80,    /* covers all: clipped to the output */
        30, 30, 30, 30,   /* empty, centre inside: kept */
        40, 50, 50, 70,   /* centre y 60 = y1: dropped */
    };
    static const float want[] = {
        5, 5, 15, 15,
        0, 2.5f, 10, 12.5f,
        0, 5, 2.5f, 10,
        0, 0, 25, 20,
        10, 5, 10, 5,
    };
    static const float want_flip[] = {
        10, 5, 20, 15,
        15, 2.5f, 25, 12.5f,
        22.5f, 5, 25, 10,
        0, 0, 25, 20,
        15, 5, 15, 5,
    };
    float out[sizeof(in) / sizeof(in[0]) + 4], same[sizeof(in) / sizeof(in[0])];
    struct rf_err err = { { 0 } };
    uint32_t n = sizeof(in) / sizeof(in[0]) / 4;
    int rc;

    for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++)
        out[i] = -7;
    rc = tgt_boxes(&v, in, n, out, NULL, &err);
    tap_ok(rc == 5 && rows_equal(out, want, 5),
           "boxes: 8 in, 5 kept in order, scaled, clipped; centres on x1/y1 or outside "
           "dropped (%d)", rc);
    tap_ok(out[20] == -7, "boxes: nothing stored past the kept rows");
    v.flip = true;
    rc = tgt_boxes(&v, in, n, out, NULL, &err);
    tap_ok(rc == 5 && rows_equal(out, want_flip, 5), "boxes: flipped, x mirrored and swapped");
    memcpy(same, in, sizeof(in));
    rc = tgt_boxes(&v, same, n, same, NULL, &err);
    tap_ok(rc == 5 && rows_equal(same, want_flip, 5), "boxes: in place (out == in)");
    tap_ok(tgt_boxes(&v, in, 0, out, NULL, &err) == 0, "boxes: none in, none out");
    {
        uint8_t keep[sizeof(in) / sizeof(in[0]) / 4];
        uint32_t kept = 0;

        memset(keep, 7, sizeof(keep));
        rc = tgt_boxes(&v, in, n, out, keep, &err);
        for (uint32_t r = 0; r < n; r++)
            kept += keep[r] == 1;
        tap_ok(rc == 5 && kept == 5 && !memchr(keep, 7, n),
               "boxes: keep marks each box 1 kept or 0 dropped (%d kept, %u marked)", rc, kept);
    }

    /* a fractional box (eval's, in source pixels): 3x up from 1.5 */
    v = crop_view(10, 10, 0, 0, 10, 10, 12, 12, false);
    v.x0 = v.y0 = 1.5;
    v.x1 = v.y1 = 5.5;
    {
        static const float fin[] = { 2, 2, 4, 3 };
        static const float fwant[] = { 1.5f, 1.5f, 7.5f, 4.5f };

        rc = tgt_boxes(&v, fin, 1, out, NULL, &err);
        tap_ok(rc == 1 && rows_equal(out, fwant, 1), "boxes: a fractional source box");
    }

    {
        float bad[8] = { 1, 1, 2, 2, 1, 1, 2, 2 };

        bad[6] = NAN;
        rc = tgt_boxes(&v, bad, 2, out, NULL, &err);
        tap_ok(rc == -EBADMSG && strstr(err.msg, "box 1") && strstr(err.msg, "not finite"),
               "boxes: a NaN is a bad box naming its row (%s)", err.msg);
        bad[6] = 2;
        bad[1] = -INFINITY;
        rc = tgt_boxes(&v, bad, 2, out, NULL, &err);
        tap_ok(rc == -EBADMSG && strstr(err.msg, "box 0"),
               "boxes: an infinite coordinate is bad (%s)", err.msg);
        bad[1] = 1;
        bad[4] = 3;
        rc = tgt_boxes(&v, bad, 2, out, NULL, &err);
        tap_ok(rc == -EBADMSG && strstr(err.msg, "box 1") && strstr(err.msg, "xyxy"),
               "boxes: x1 < x0 is bad (%s)", err.msg);
    }
}

/* An RFPX one-channel record of w x h values of vb bytes, value(x, y);
 * malloc'd, *len its size. */
static uint8_t *mask_rec(uint32_t w, uint32_t h, uint32_t vb, size_t *len)
{
    uint8_t *rec;

    *len = px_record_size_of(w, h, 1, vb);
    rec = *len ? malloc(*len) : NULL;
    if (!rec)
        tap_bail("cannot make a %ux%u mask record", w, h);
    px_write_header_of(rec, w, h, 1, vb);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint32_t val = vb == 1 ? (y * 16 + x) & 0xff : 0x1000u * y + x + 0x0100u;
            uint8_t *p = rec + PX_HEADER_SIZE + ((size_t)y * w + x) * vb;

            p[0] = (uint8_t)val;
            if (vb == 2)
                p[1] = (uint8_t)(val >> 8);
        }
    return rec;
}

/* The mask through v, u8 values (x, y) of mask_rec, against the source
 * columns xs and rows ys; dst's bytes past the output stay 0xAA. */
static bool mask_is(const struct tgt_view *v, const uint32_t *xs, const uint32_t *ys,
                    const char *what)
{
    size_t len, n = (size_t)v->out_w * v->out_h;
    uint8_t *rec = mask_rec(v->src_w, v->src_h, 1, &len);
    uint8_t *dst = malloc(n + 16);
    struct rf_err err = { { 0 } };
    enum wire_bad why = BAD_READ;
    bool ok;
    int rc;

    if (!dst)
        tap_bail("out of memory");
    memset(dst, 0xAA, n + 16);
    rc = tgt_mask(v, rec, len, 1, dst, &why, &err);
    ok = rc == 0;
    for (uint32_t y = 0; ok && y < v->out_h; y++)
        for (uint32_t x = 0; ok && x < v->out_w; x++) {
            uint8_t want = (uint8_t)((ys[y] * 16 + xs[x]) & 0xff);

            if (dst[(size_t)y * v->out_w + x] != want) {
                tap_diag("%s: (%u, %u) is %u, want %u (source %u, %u)", what, x, y,
                         dst[(size_t)y * v->out_w + x], want, xs[x], ys[y]);
                ok = false;
            }
        }
    for (size_t i = n; ok && i < n + 16; i++)
        ok = dst[i] == 0xAA;
    if (rc != 0)
        tap_diag("%s: %d %s", what, rc, err.msg);
    free(dst);
    free(rec);
    return ok;
}

static void test_masks(void)
{
    struct tgt_view v;

    {
        const uint32_t xs[] = { 0, 1, 2, 3, 4 }, ys[] = { 0, 1, 2, 3 };

        v = crop_view(5, 4, 0, 0, 5, 4, 5, 4, false);
        tap_ok(mask_is(&v, xs, ys, "identity"), "mask: none's view is the identity");
    }
    {
        /* a crop of 4 x 2 at (1, 1) of 6 x 4, 2x up: each pixel twice */
        const uint32_t xs[] = { 1, 1, 2, 2, 3, 3, 4, 4 }, ys[] = { 1, 1, 2, 2 };
        const uint32_t xf[] = { 4, 4, 3, 3, 2, 2, 1, 1 };

        v = crop_view(6, 4, 1, 1, 4, 2, 8, 4, false);
        tap_ok(mask_is(&v, xs, ys, "2x"), "mask: a crop 2x up");
        v.flip = true;
        tap_ok(mask_is(&v, xf, ys, "2x flip"), "mask: the same, mirrored");
    }
    {
        /* 9 x 9 to 3 x 3: a = 3, t = 1.5, 4.5, 7.5 */
        const uint32_t xs[] = { 1, 4, 7 };

        v = crop_view(9, 9, 0, 0, 9, 9, 3, 3, false);
        tap_ok(mask_is(&v, xs, xs, "3x down"), "mask: 3x down reads the middle pixels");
    }
    {
        /* Pillow 9.4, mode L: 2 -> 7 gives columns 0 0 0 0 1 1 1 (the
         * product (k + 0.5) * 2/7 would give 0 0 0 1 1 1 1), 4 -> 6 gives
         * 0 1 1 2 2 3 (not 0 1 1 2 3 3) */
        const uint32_t xs[] = { 0, 0, 0, 0, 1, 1, 1 }, ys[] = { 0, 1, 1, 2, 2, 3 };

        v = crop_view(2, 4, 0, 0, 2, 4, 7, 6, false);
        tap_ok(mask_is(&v, xs, ys, "pillow walk"),
               "mask: Pillow's accumulated walk, 2 -> 7 and 4 -> 6, not (k + 0.5) * a");
    }
    {
        /* eval: 4 x 4 resized to 7 x 6, of which the 3 x 2 at (2, 3):
         * columns 2..4 of 0 0 0 0 1 1 1 ... of the 4 -> 7 walk */
        const uint32_t xs7[] = { 0, 0, 1, 1, 2, 2, 3 };  /* Pillow's 4 -> 7 */
        uint32_t xs[3], ys[2];
        const uint32_t ys6[] = { 0, 1, 1, 2, 2, 3 };

        memcpy(xs, xs7 + 2, sizeof(xs));
        memcpy(ys, ys6 + 3, sizeof(ys));
        v = (struct tgt_view){ .src_w = 4, .src_h = 4, .x1 = 4, .y1 = 4, .out_w = 3, .out_h = 2,
                               .cw = 4, .ch = 4, .rw = 7, .rh = 6, .ox = 2, .oy = 3 };
        tap_ok(mask_is(&v, xs, ys, "eval offset"), "mask: eval's CenterCrop into the resize");
        v.flip = true;
        xs[0] = xs7[4];
        xs[2] = xs7[2];
        tap_ok(mask_is(&v, xs, ys, "eval offset flip"), "mask: the same, mirrored");
    }
    {
        /* u16: 2 x 2 of 3 x 2 at (1, 0) up to 4 x 2, flipped */
        size_t len;
        uint8_t *rec = mask_rec(3, 2, 2, &len);
        uint8_t dst[4 * 2 * 2 + 2];
        struct rf_err err = { { 0 } };
        enum wire_bad why = BAD_READ;
        /* value 0x1000 y + x + 0x100: source columns 2 2 1 1 */
        const uint16_t want[8] = { 0x0102, 0x0102, 0x0101, 0x0101,
                                   0x1102, 0x1102, 0x1101, 0x1101 };
        bool ok = true;
        int rc;

        v = crop_view(3, 2, 1, 0, 2, 2, 4, 2, true);
        memset(dst, 0xAA, sizeof(dst));
        rc = tgt_mask(&v, rec, len, 2, dst, &why, &err);
        for (int i = 0; i < 8; i++)
            ok = ok && dst[2 * i] == (want[i] & 0xff) && dst[2 * i + 1] == want[i] >> 8;
        tap_ok(rc == 0 && ok && dst[16] == 0xAA && dst[17] == 0xAA,
               "mask: u16 values, little-endian, both bytes moved, flipped");
        /* the u16 record for a u8 field, and the other way */
        rc = tgt_mask(&v, rec, len, 1, dst, &why, &err);
        tap_ok(rc == -EBADMSG && why == BAD_DECODE && strstr(err.msg, "2-byte values"),
               "mask: a u16 record for a u8 field is BAD_DECODE (%s)", err.msg);
        free(rec);
    }
}

static void test_mask_errors(void)
{
    struct tgt_view v = crop_view(6, 4, 0, 0, 6, 4, 3, 2, false);
    struct rf_err err = { { 0 } };
    enum wire_bad why = BAD_READ;
    uint8_t dst[64];
    size_t len;
    uint8_t *rec = mask_rec(5, 4, 1, &len);
    uint8_t rgb[PX_HEADER_SIZE + 6 * 4 * 3] = { 0 };
    int rc;

    rc = tgt_mask(&v, rec, len, 1, dst, &why, &err);
    tap_ok(rc == -EBADMSG && why == BAD_SHAPE && strstr(err.msg, "4x5") &&
               strstr(err.msg, "4x6"),
           "mask: wrong size is BAD_SHAPE naming both (%s)", err.msg);
    free(rec);
    rec = mask_rec(6, 4, 1, &len);
    why = BAD_READ;
    rc = tgt_mask(&v, rec, len - 1, 1, dst, &why, &err);
    tap_ok(rc == -EBADMSG && why == BAD_DECODE && strstr(err.msg, "bad mask record"),
           "mask: a short record is BAD_DECODE (%s)", err.msg);
    rec[0] = 'X';
    why = BAD_READ;
    rc = tgt_mask(&v, rec, len, 1, dst, &why, &err);
    tap_ok(rc == -EBADMSG && why == BAD_DECODE, "mask: a bad magic is BAD_DECODE (%s)",
           err.msg);
    why = BAD_READ;
    rc = tgt_mask(&v, "\xff\xd8\xff", 3, 1, dst, &why, &err);
    tap_ok(rc == -EBADMSG && why == BAD_DECODE, "mask: a JPEG is BAD_DECODE (%s)", err.msg);
    px_write_header(rgb, 6, 4);
    why = BAD_READ;
    rc = tgt_mask(&v, rgb, sizeof(rgb), 1, dst, &why, &err);
    tap_ok(rc == -EBADMSG && why == BAD_DECODE && strstr(err.msg, "3 channels"),
           "mask: an RGB record is BAD_DECODE (%s)", err.msg);
    free(rec);
    rec = mask_rec(6, 4, 1, &len);
    v.ox = 2; /* 2 + 3 columns of a 3-column resize */
    rc = tgt_mask(&v, rec, len, 1, dst, &why, &err);
    tap_ok(rc == -EINVAL && strstr(err.msg, "does not fit"), "mask: a grid off its resize (%s)",
           err.msg);
    v.ox = 0;
    v.cx = 1;
    rc = tgt_mask(&v, rec, len, 1, dst, &why, &err);
    tap_ok(rc == -EINVAL, "mask: a crop off the source is -EINVAL");
    v.cx = 0;
    rc = tgt_mask(&v, rec, len, 4, dst, &why, &err);
    tap_ok(rc == -EINVAL && strstr(err.msg, "not 4"), "mask: 4-byte values are -EINVAL (%s)",
           err.msg);
    free(rec);
}

/* An RFPX RGB record of w x h (values irrelevant here), malloc'd. */
static uint8_t *rgb_rec(uint32_t w, uint32_t h, size_t *len)
{
    uint8_t *rec;

    *len = px_record_size(w, h);
    rec = calloc(1, *len);
    if (!rec)
        tap_bail("out of memory");
    px_write_header(rec, w, h);
    for (size_t i = PX_HEADER_SIZE; i < *len; i++)
        rec[i] = (uint8_t)(i * 31);
    return rec;
}

static char root[] = "/tmp/test_targets.XXXXXX";

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void test_views(void)
{
    struct wire_xform p = { .size = 16, .layout = RING_HWC, .scale_lo = 0.08, .scale_hi = 1,
                            .ratio_lo = 3.0 / 4, .ratio_hi = 4.0 / 3, .flip = 0.5,
                            .crop = 0.875, .pixel_cap = 1u << 20 };
    struct xform_out out = { .sample_bytes = 3 * 16 * 16, .layout = RING_HWC };
    struct xform_ctx ctx = { 0 };
    struct rf_err err = { { 0 } };
    enum wire_bad why;
    size_t len;
    uint8_t *rec = rgb_rec(40, 30, &len), dst[3 * 40 * 30];
    int flips = 0, ok = 1, rc;

    p.id = (uint32_t)xform_find("train");
    for (uint64_t i = 0; i < 64; i++) {
        struct rng_stream rng, probe;
        struct xfi_plan pl;
        struct xfi_crop c;
        const struct tgt_view *v = &ctx.view;

        rng_stream_init(&rng, 7, 0, i);
        probe = rng;
        xfi_train_plan(40, 30, &p, &probe, &pl, &c);
        rc = xform_train_apply(NULL, &p, rec, len, &rng, &ctx, dst, &out, &why, &err);
        flips += pl.flip;
        if (rc != 0 || v->src_w != 40 || v->src_h != 30 || v->x0 != c.j || v->y0 != c.i ||
            v->x1 != (double)c.j + c.w || v->y1 != (double)c.i + c.h || v->out_w != 16 ||
            v->out_h != 16 || v->flip != pl.flip || v->cx != c.j || v->cy != c.i ||
            v->cw != c.w || v->ch != c.h || v->rw != 16 || v->rh != 16 || v->ox || v->oy) {
            tap_diag("train view %llu: rc %d crop %u %u %u %u", (unsigned long long)i, rc, c.i,
                     c.j, c.h, c.w);
            ok = 0;
        }
    }
    tap_ok(ok && flips > 0 && flips < 64, "view: train's is its crop and flip draw (%d flips)",
           flips);

    p.id = (uint32_t)xform_find("eval");
    rc = xform_eval_apply(NULL, &p, rec, len, NULL, &ctx, dst, &out, &why, &err);
    {
        /* int(16 / 0.875) = 18: 40 x 30 -> 24 x 18, crop 16 at (4, 1) */
        const struct tgt_view *v = &ctx.view;

        tap_ok(rc == 0 && v->src_w == 40 && v->src_h == 30 && v->rw == 24 && v->rh == 18 &&
                   v->ox == 4 && v->oy == 1 && v->cx == 0 && v->cy == 0 && v->cw == 40 &&
                   v->ch == 30 && !v->flip && fabs(v->x0 - 4 * 40.0 / 24) < 1e-12 &&
                   fabs(v->x1 - 20 * 40.0 / 24) < 1e-12 && fabs(v->y0 - 30.0 / 18) < 1e-12 &&
                   fabs(v->y1 - 17 * 30.0 / 18) < 1e-12 && v->out_w == 16,
               "view: eval's is Resize + CenterCrop in source pixels (%d)", rc);
    }

    {
        struct dataset_writer_opts o = { .kind = DATASET_JPEG, .codec = DATASET_CODEC_NONE };
        struct dataset_writer *wr;
        struct dataset *ds = NULL;
        char path[64];

        snprintf(path, sizeof(path), "%s/none", root);
        if (dataset_writer_create(path, &o, &wr, &err) < 0 ||
            dataset_writer_add(wr, "x", 1, DATASET_NO_LABEL, &err) < 0 ||
            dataset_writer_set_image_shape(wr, 30, 40, &err) < 0 ||
            dataset_writer_finish(wr, NULL, &err) < 0 || dataset_open(path, &ds, &err) < 0)
            tap_bail("cannot write the none dataset: %s", err.msg);
        {
            struct ctl_attach a;
            struct wire_xform q;
            const struct xform_def *xf = xform_get((uint32_t)xform_find("none"));
            struct xform_out o3;

            ctl_attach_defaults(&a);
            q = (struct wire_xform){
                .id = (uint32_t)xform_find("none"), .size = a.size, .layout = RING_HWC,
                .scale_lo = a.scale[0], .scale_hi = a.scale[1], .ratio_lo = a.ratio[0],
                .ratio_hi = a.ratio[1], .flip = 0, .crop = a.crop, .pixel_cap = 1 << 20,
            };
            rc = xf->geometry(ds, &q, &o3, &err);
            if (rc == 0) {
                ctx.view.flip = true;
                rc = xf->apply(ds, &q, rec, len, NULL, &ctx, dst, &o3, &why, &err);
            }
        }
        {
            const struct tgt_view *v = &ctx.view;

            tap_ok(rc == 0 && v->src_w == 40 && v->src_h == 30 && v->x0 == 0 && v->y0 == 0 &&
                       v->x1 == 40 && v->y1 == 30 && v->out_w == 40 && v->out_h == 30 &&
                       !v->flip && v->cw == 40 && v->ch == 30 && v->rw == 40 && v->rh == 30 &&
                       !v->ox && !v->oy,
                   "view: none's is the whole image (%d %s)", rc, err.msg);
        }
        dataset_close(ds);
    }
    xform_ctx_clear(&ctx);
    free(rec);
}

int main(void)
{
    if (!mkdtemp(root))
        tap_bail("cannot create a temporary folder");
    test_boxes();
    test_masks();
    test_mask_errors();
    test_views();
    nftw(root, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
