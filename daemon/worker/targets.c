/*
 * targets.c - boxes and masks that follow an image field's crop
 * (targets.h): boxes through the view's source box in doubles, masks
 * through its integer grid the way Pillow's NEAREST resize walks it.
 */
#include "targets.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "aug_geom.h" /* aug_box_read */
#include "pixels.h"

/*
 * Pillow's column walk along one axis (targets.h): the k-th sample of a
 * resize of c source pixels to r reads (int)t_k, t_0 = a / 2, t_(k+1) =
 * t_k + a, a = c / r.  The walk starts at k = 0 and steps to the first
 * sample wanted (eval's CenterCrop offset), so every t_k is the very sum
 * Pillow forms.
 */
struct walk {
    double t, a;
};

static struct walk walk_start(uint32_t c, uint32_t r, uint32_t skip)
{
    struct walk w = { .a = (double)c / (double)r };

    w.t = w.a * 0.5;
    for (uint32_t k = 0; k < skip; k++)
        w.t += w.a;
    return w;
}

/* The source index of the walk's current sample, or -1 when Pillow would
 * fill (past the c source pixels). */
static int64_t walk_index(const struct walk *w, uint32_t c)
{
    int64_t i = w->t < 0.0 ? -1 : (int64_t)w->t;

    return i < (int64_t)c ? i : -1;
}

static int view_check(const struct tgt_view *v, struct rf_err *err)
{
    if (!v->out_w || !v->out_h || !v->cw || !v->ch || !v->rw || !v->rh ||
        (uint64_t)v->cx + v->cw > v->src_w || (uint64_t)v->cy + v->ch > v->src_h ||
        (uint64_t)v->ox + v->out_w > v->rw || (uint64_t)v->oy + v->out_h > v->rh)
        return rf_err_set(err, -EINVAL,
                          "targets: view of %ux%u (grid %u+%u, %u+%u to %ux%u at %u,%u) does "
                          "not fit its %ux%u output",
                          v->src_w, v->src_h, v->cx, v->cw, v->cy, v->ch, v->rw, v->rh, v->ox,
                          v->oy, v->out_w, v->out_h);
    return 0;
}

static float clip(double x, uint32_t hi)
{
    return (float)(x < 0.0 ? 0.0 : x > hi ? (double)hi : x);
}

int tgt_boxes(const struct tgt_view *v, const float *in, uint32_t n, float *out,
              uint8_t *keep, struct rf_err *err)
{
    double sx = (double)v->out_w / (v->x1 - v->x0), sy = (double)v->out_h / (v->y1 - v->y0);
    uint32_t kept = 0;

    if (n > INT32_MAX)
        return rf_err_set(err, -EBADMSG, "%u boxes: at most %d in one sample", n, INT32_MAX);
    for (uint32_t r = 0; r < n; r++) {
        double b[4], cx, cy, x0, x1, y0, y1;

        if (aug_box_read(in, r, b, err) < 0)
            return -EBADMSG;
        cx = (b[0] + b[2]) / 2;
        cy = (b[1] + b[3]) / 2;
        if (keep)
            keep[r] = cx >= v->x0 && cx < v->x1 && cy >= v->y0 && cy < v->y1;
        if (!(cx >= v->x0 && cx < v->x1 && cy >= v->y0 && cy < v->y1))
            continue;
        x0 = (b[0] - v->x0) * sx;
        x1 = (b[2] - v->x0) * sx;
        y0 = (b[1] - v->y0) * sy;
        y1 = (b[3] - v->y0) * sy;
        if (v->flip) {
            double t = x0;

            x0 = v->out_w - x1;
            x1 = v->out_w - t;
        }
        out[4 * (size_t)kept + 0] = clip(x0, v->out_w);
        out[4 * (size_t)kept + 1] = clip(y0, v->out_h);
        out[4 * (size_t)kept + 2] = clip(x1, v->out_w);
        out[4 * (size_t)kept + 3] = clip(y1, v->out_h);
        kept++;
    }
    return (int)kept;
}

int tgt_mask(const struct tgt_view *v, const void *rec, size_t len, uint32_t value_bytes,
             uint8_t *dst, enum wire_bad *why, struct rf_err *err)
{
    struct px_header px;
    struct rf_err perr;
    struct walk wy, wx0;
    size_t row_bytes = (size_t)v->out_w * value_bytes;

    *why = BAD_SHAPE;
    if (value_bytes != 1 && value_bytes != 2)
        return rf_err_set(err, -EINVAL, "targets: masks hold 1- or 2-byte values, not %u",
                          value_bytes);
    if (view_check(v, err) < 0)
        return -EINVAL;
    if (px_parse_any(rec, len, &px, &perr) < 0) {
        *why = BAD_DECODE;
        return rf_err_set(err, -EBADMSG, "bad mask record: %s", perr.msg);
    }
    if (px.channels != 1 || px.value_bytes != value_bytes) {
        *why = BAD_DECODE;
        return rf_err_set(err, -EBADMSG,
                          "mask record has %u channel%s of %u-byte values, the field holds one "
                          "of %u-byte values",
                          px.channels, px.channels == 1 ? "" : "s", px.value_bytes,
                          value_bytes);
    }
    if (px.width != v->src_w || px.height != v->src_h)
        return rf_err_set(err, -EBADMSG, "mask is %ux%u (HxW), its image is %ux%u", px.height,
                          px.width, v->src_h, v->src_w);
    wy = walk_start(v->ch, v->rh, v->oy);
    wx0 = walk_start(v->cw, v->rw, v->ox);
    for (uint32_t y = 0; y < v->out_h; y++, wy.t += wy.a) {
        int64_t sy = walk_index(&wy, v->ch);
        uint8_t *d = dst + (size_t)y * row_bytes;
        const uint8_t *row;
        struct walk wx = wx0;

        if (sy < 0) {
            memset(d, 0, row_bytes);
            continue;
        }
        row = px.pixels + ((size_t)(v->cy + sy) * px.width + v->cx) * value_bytes;
        for (uint32_t x = 0; x < v->out_w; x++, wx.t += wx.a) {
            int64_t sx = walk_index(&wx, v->cw);
            uint32_t at = v->flip ? v->out_w - 1 - x : x;

            if (value_bytes == 1) {
                d[at] = sx < 0 ? 0 : row[sx];
            } else if (sx < 0) {
                d[2 * (size_t)at] = d[2 * (size_t)at + 1] = 0;
            } else {
                d[2 * (size_t)at] = row[2 * sx];
                d[2 * (size_t)at + 1] = row[2 * sx + 1];
            }
        }
    }
    return 0;
}
