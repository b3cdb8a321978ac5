/*
 * test_aug_color_unit.c - what the photometric ops (aug_color.h) promise that
 * needs no torchvision (test_aug_color.py holds the comparison with it):
 * the draws' use of the sample's stream (ColorJitter: three rng_below for
 * the order, then one draw per adjustment that is on, none for one that
 * is off), their ranges; every op giving the same pixels on a CHW image
 * and on its HWC transposition; the edges (an even blur kernel refused
 * with the image untouched, kernels wider than the image, 1x1 and 2xN
 * images, posterize above 8 bits, solarize above 255).
 */
#include <errno.h>
#include <math.h>

#include "aug_color.h"
#include "tap.h"

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    struct rng_stream st;

    rng_stream_init(&st, seed, 0, 0);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)rng_below(&st, 256);
}

static void check_jitter_draws(void)
{
    struct aug_colorjitter_ranges r = {
        .on = {true, false, false, true},
        .lo = {0.5f, 0, 0, -0.25f},
        .hi = {1.5f, 0, 0, 0.25f},
    };
    int perms_ok = 1, stream_ok = 1, range_ok = 1;

    for (uint64_t k = 0; k < 2000; k++) {
        struct rng_stream a, b;
        struct aug_colorjitter j;
        uint8_t order[4] = {0, 1, 2, 3}, seen = 0;

        rng_stream_init(&a, 42, 3, k);
        b = a;
        aug_draw_colorjitter(&a, &r, &j);
        /* the same decisions by hand on a copy of the stream */
        for (uint32_t i = 3; i > 0; i--) {
            uint32_t x = rng_below(&b, i + 1);
            uint8_t t = order[i];

            order[i] = order[x];
            order[x] = t;
        }
        float fb = (float)rng_uniform_range(&b, 0.5, 1.5);
        float fh = (float)rng_uniform_range(&b, -0.25, 0.25);

        for (int i = 0; i < 4; i++)
            seen |= (uint8_t)(1u << j.order[i]);
        perms_ok &= seen == 0xf;
        stream_ok &= !memcmp(order, j.order, 4) && j.factor[0] == fb && j.factor[3] == fh &&
                     j.on[0] && !j.on[1] && !j.on[2] && j.on[3] && rng_u32(&a) == rng_u32(&b);
        range_ok &= j.factor[0] >= 0.5f && j.factor[0] < 1.5f && j.factor[3] >= -0.25f &&
                    j.factor[3] < 0.25f && j.factor[1] == 0.0f && j.factor[2] == 0.0f;
    }
    tap_ok(perms_ok, "colorjitter: every order is a permutation of 0..3");
    tap_ok(stream_ok, "colorjitter: three rng_below, then one draw per adjustment on, none off");
    tap_ok(range_ok, "colorjitter: factors in [lo, hi), 0 where off");

    struct aug_colorjitter_ranges fixed = {.on = {true, true, true, true},
                                           .lo = {1.25f, 0.5f, 0.5f, 0.0f},
                                           .hi = {1.25f, 0.5f, 0.5f, 0.0f}};
    struct rng_stream st;
    struct aug_colorjitter j;

    rng_stream_init(&st, 1, 0, 5);
    aug_draw_colorjitter(&st, &fixed, &j);
    tap_ok(j.factor[0] == 1.25f && j.factor[1] == 0.5f && j.factor[3] == 0.0f,
           "colorjitter: a range lo == hi gives lo");
}

static void check_other_draws(void)
{
    int never = 1, always = 1, sigma_ok = 1, hits = 0;

    for (uint64_t k = 0; k < 4000; k++) {
        struct rng_stream st;

        rng_stream_init(&st, 9, 0, k);
        never &= !aug_draw_coin(&st, 0.0);
        always &= aug_draw_coin(&st, 1.0);
        hits += aug_draw_coin(&st, 0.25);
        float s = aug_draw_gaussian_blur(&st, 0.1f, 2.0f);
        sigma_ok &= s >= 0.1f && s < 2.0f;
    }
    tap_ok(never && always, "coin: p 0 never, p 1 always");
    /* 4000 draws at 0.25: mean 1000, sd 27; fixed seed, so no flake */
    tap_ok(hits > 850 && hits < 1150, "coin: p 0.25 gives %d of 4000", hits);
    tap_ok(sigma_ok, "gaussian blur: sigma in [lo, hi)");
}

/* An op on an image of w x h x c, given as CHW bytes; returns 0 or the op's
 * error. */
typedef int (*op_fn)(struct aug_img *, struct aug_scratch *);

static int op_brightness(struct aug_img *im, struct aug_scratch *s) { (void)s; aug_brightness(im, 1.37f); return 0; }
static int op_contrast(struct aug_img *im, struct aug_scratch *s) { (void)s; aug_contrast(im, 0.61f); return 0; }
static int op_saturation(struct aug_img *im, struct aug_scratch *s) { (void)s; aug_saturation(im, 1.9f); return 0; }
static int op_hue(struct aug_img *im, struct aug_scratch *s) { (void)s; aug_hue(im, -0.31f); return 0; }
static int op_grayscale(struct aug_img *im, struct aug_scratch *s) { (void)s; aug_grayscale(im); return 0; }
static int op_sharpness(struct aug_img *im, struct aug_scratch *s) { return aug_sharpness(im, 2.3f, s); }
static int op_posterize(struct aug_img *im, struct aug_scratch *s) { (void)s; aug_posterize(im, 3); return 0; }
static int op_solarize(struct aug_img *im, struct aug_scratch *s) { (void)s; aug_solarize(im, 99.5f); return 0; }
static int op_autocontrast(struct aug_img *im, struct aug_scratch *s) { (void)s; aug_autocontrast(im); return 0; }
static int op_equalize(struct aug_img *im, struct aug_scratch *s) { (void)s; aug_equalize(im); return 0; }
static int op_invert(struct aug_img *im, struct aug_scratch *s) { (void)s; aug_invert(im); return 0; }
static int op_blur(struct aug_img *im, struct aug_scratch *s) { return aug_gaussian_blur(im, 7, 3, 1.7f, 0.6f, s); }
static int op_blur_wide(struct aug_img *im, struct aug_scratch *s) { return aug_gaussian_blur(im, 31, 41, 4.0f, 9.0f, s); }

static const struct {
    const char *name;
    op_fn fn;
} ops[] = {
    {"brightness", op_brightness}, {"contrast", op_contrast},   {"saturation", op_saturation},
    {"hue", op_hue},               {"grayscale", op_grayscale}, {"sharpness", op_sharpness},
    {"posterize", op_posterize},   {"solarize", op_solarize},   {"autocontrast", op_autocontrast},
    {"equalize", op_equalize},     {"invert", op_invert},       {"blur", op_blur},
    {"blur (kernel wider than the image)", op_blur_wide},
};

static void check_layouts(struct aug_scratch *scratch)
{
    static const uint32_t sizes[][2] = {{1, 1}, {2, 9}, {9, 2}, {3, 3}, {13, 7}, {40, 33}};
    uint8_t chw[40 * 33 * 3], hwc[40 * 33 * 3];

    for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
        int same = 1, rc_ok = 1;

        for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
            uint32_t w = sizes[z][0], h = sizes[z][1];

            for (uint32_t c = 1; c <= 3; c += 2) {
                struct aug_img a = {chw, w, h, c, AUG_CHW}, b = {hwc, w, h, c, AUG_HWC};

                fill(chw, (size_t)w * h * c, (uint32_t)(o * 100 + z * 10 + c));
                for (uint32_t ch = 0; ch < c; ch++)
                    for (uint32_t y = 0; y < h; y++)
                        for (uint32_t x = 0; x < w; x++)
                            hwc[aug_at(&b, ch, y, x)] = chw[aug_at(&a, ch, y, x)];
                rc_ok &= ops[o].fn(&a, scratch) == 0 && ops[o].fn(&b, scratch) == 0;
                for (uint32_t ch = 0; ch < c; ch++)
                    for (uint32_t y = 0; y < h; y++)
                        for (uint32_t x = 0; x < w; x++)
                            same &= hwc[aug_at(&b, ch, y, x)] == chw[aug_at(&a, ch, y, x)];
            }
        }
        tap_ok(same && rc_ok, "%s: CHW and HWC give the same pixels (1 and 3 channels, 6 sizes)",
               ops[o].name);
    }
}

static void check_edges(struct aug_scratch *scratch)
{
    uint8_t px[5 * 4 * 3], orig[sizeof(px)];
    struct aug_img im = {px, 5, 4, 3, AUG_HWC};
    int same;

    fill(px, sizeof(px), 77);
    memcpy(orig, px, sizeof(px));
    tap_ok(aug_gaussian_blur(&im, 4, 3, 1.0f, 1.0f, scratch) == -EINVAL &&
           aug_gaussian_blur(&im, 3, 0, 1.0f, 1.0f, scratch) == -EINVAL &&
           !memcmp(px, orig, sizeof(px)), "blur: an even or zero kernel is -EINVAL, image untouched");
    tap_ok(aug_gaussian_blur(&im, 1, 1, 0.5f, 0.5f, scratch) == 0 && !memcmp(px, orig, sizeof(px)),
           "blur: a 1x1 kernel leaves the image");
    aug_posterize(&im, 8);
    aug_posterize(&im, 9);
    aug_solarize(&im, 255.5f);
    tap_ok(!memcmp(px, orig, sizeof(px)), "posterize 8 and 9 bits, solarize above 255: unchanged");
    aug_posterize(&im, 0);
    same = 1;
    for (size_t i = 0; i < sizeof(px); i++)
        same &= px[i] == 0;
    tap_ok(same, "posterize 0 bits: all 0");

    memset(px, 200, sizeof(px));
    tap_ok(aug_gaussian_blur(&im, 51, 51, 20.0f, 3.0f, scratch) == 0, "blur: a 51x51 kernel on 5x4");
    same = 1;
    for (size_t i = 0; i < sizeof(px); i++)
        same &= px[i] == 200;
    tap_ok(same, "blur: a constant image stays constant");

    struct aug_img one = {px, 1, 1, 3, AUG_CHW};
    px[0] = 10, px[1] = 20, px[2] = 30;
    tap_ok(aug_sharpness(&one, 0.0f, scratch) == 0 && px[0] == 10 && px[2] == 30,
           "sharpness: a 1x1 image is unchanged");
    aug_autocontrast(&one);
    aug_equalize(&one);
    tap_ok(px[0] == 10 && px[1] == 20 && px[2] == 30,
           "autocontrast, equalize: a 1x1 image is unchanged");
}

int main(void)
{
    struct aug_scratch scratch = {0};

    check_jitter_draws();
    check_other_draws();
    check_layouts(&scratch);
    check_edges(&scratch);
    aug_scratch_free(&scratch);
    return tap_done();
}
