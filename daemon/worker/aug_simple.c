/*
 * aug_simple.c - the exact uint8 ops: flips, invert, posterize, solarize
 * (aug_simple.h).  Straight byte loops the compiler vectorizes; the flips
 * swap mirrored pixels of a row (HWC: c bytes at a time) or whole rows.
 */
#include <string.h>

#include "aug_simple.h"

bool aug_draw_coin(struct rng_stream *rng, double p)
{
    return rng_bernoulli(rng, p);
}

static size_t bytes(const struct aug_img *im)
{
    return (size_t)im->w * im->h * im->c;
}

void aug_hflip(struct aug_img *im)
{
    uint32_t w = im->w;

    if (im->layout == AUG_CHW || im->c == 1) {
        size_t rows = (size_t)im->h * im->c;

        for (size_t r = 0; r < rows; r++) {
            uint8_t *row = im->px + r * w;

            for (uint32_t x = 0; x < w / 2; x++) {
                uint8_t t = row[x];

                row[x] = row[w - 1 - x];
                row[w - 1 - x] = t;
            }
        }
        return;
    }
    for (uint32_t y = 0; y < im->h; y++) {
        uint8_t *row = im->px + (size_t)y * w * 3;

        for (uint32_t x = 0; x < w / 2; x++) {
            uint8_t *a = row + (size_t)x * 3, *b = row + (size_t)(w - 1 - x) * 3, t[3];

            memcpy(t, a, 3);
            memcpy(a, b, 3);
            memcpy(b, t, 3);
        }
    }
}

void aug_vflip(struct aug_img *im)
{
    /* CHW: each plane's rows; HWC: rows of w*c bytes, one plane */
    size_t planes = im->layout == AUG_CHW ? im->c : 1;
    size_t row = im->layout == AUG_CHW ? im->w : (size_t)im->w * im->c;

    for (size_t p = 0; p < planes; p++) {
        uint8_t *base = im->px + p * row * im->h;

        for (uint32_t y = 0; y < im->h / 2; y++) {
            uint8_t *a = base + y * row, *b = base + (im->h - 1 - y) * row;

            for (size_t i = 0; i < row; i++) {
                uint8_t t = a[i];

                a[i] = b[i];
                b[i] = t;
            }
        }
    }
}

void aug_invert(struct aug_img *im)
{
    size_t n = bytes(im);
    uint8_t *px = im->px;

    for (size_t i = 0; i < n; i++)
        px[i] = (uint8_t)(255 - px[i]);
}

void aug_posterize(struct aug_img *im, unsigned bits)
{
    uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));
    size_t n = bytes(im);
    uint8_t *px = im->px;

    for (size_t i = 0; i < n; i++)
        px[i] &= mask;
}

void aug_solarize(struct aug_img *im, double threshold)
{
    size_t n = bytes(im);
    uint8_t *px = im->px;
    unsigned t;

    /* x >= threshold for a byte x is x >= ceil(threshold), clamped */
    if (!(threshold <= 255.0)) /* above every byte (or NaN): nothing */
        return;
    t = threshold <= 0 ? 0 : (unsigned)threshold + ((double)(unsigned)threshold < threshold);
    for (size_t i = 0; i < n; i++)
        px[i] = px[i] >= t ? (uint8_t)(255 - px[i]) : px[i];
}

int aug_run_hflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s)
{
    (void)s;
    if (aug_draw_coin(rng, op->a[AUG_P].v[0]))
        aug_hflip(im);
    return 0;
}

int aug_run_vflip(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                  struct aug_scratch *s)
{
    (void)s;
    if (aug_draw_coin(rng, op->a[AUG_P].v[0]))
        aug_vflip(im);
    return 0;
}

int aug_run_invert(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                   struct aug_scratch *s)
{
    (void)s;
    if (aug_draw_coin(rng, op->a[AUG_P].v[0]))
        aug_invert(im);
    return 0;
}

int aug_run_posterize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                      struct aug_scratch *s)
{
    (void)s;
    if (aug_draw_coin(rng, op->a[AUG_POST_P].v[0]))
        aug_posterize(im, (unsigned)op->a[AUG_POST_BITS].v[0]);
    return 0;
}

int aug_run_solarize(struct aug_img *im, const struct aug_op *op, struct rng_stream *rng,
                     struct aug_scratch *s)
{
    (void)s;
    if (aug_draw_coin(rng, op->a[AUG_SOL_P].v[0]))
        aug_solarize(im, op->a[AUG_SOL_THRESHOLD].v[0]);
    return 0;
}
