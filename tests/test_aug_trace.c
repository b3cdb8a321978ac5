/*
 * test_aug_trace.c - the augmentation's trace (daemon/worker/aug_run.h):
 * the geometric steps augment_run records, and the boxes and masks moved
 * through them, without torchvision (test_aug_targets.py compares with it
 * through the daemon).  A mask equal to a one-channel image's pixels stays
 * equal to them through every geometric op (nearest affine with fill 0,
 * flips, pad + crop in every mode, the policies' shears, translations and
 * rotations), as a u8 mask and as a u16 one (two byte channels); a
 * photometric op records nothing; boxes through a trace drop rows and the
 * keep bytes of the rows that reached it follow; a bad box and a mask of
 * another size are refused.
 */
#include <errno.h>
#include <string.h>

#include "augment.h"
#include "tap.h"

#define W 13
#define H 9

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    struct rng_stream st;

    rng_stream_init(&st, seed, 0, 0);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(1 + rng_below(&st, 255)); /* no zeros: the fill shows */
}

static int run(const char *spec, uint64_t idx, uint8_t *px, struct aug_trace *tr,
               struct aug_scratch *s)
{
    static uint64_t ns[AUG_OP_COUNT], images[AUG_OP_COUNT];
    struct aug_img im = {px, W, H, 1, AUG_CHW};
    struct aug_spec sp;
    struct rng_stream rng;
    struct rf_err err = {0};

    if (aug_spec_parse(spec, strlen(spec), &sp, &err) < 0)
        tap_bail("%s: %s", spec, err.msg);
    rng_stream_init(&rng, 7, 0, idx);
    return augment_run(&sp, &im, &rng, NULL, s, ns, images, tr, &err);
}

/* The image and a mask of its pixels through spec: the mask follows. */
static void follows(const char *spec, uint32_t want_min_steps)
{
    static struct aug_trace tr;
    struct aug_scratch s = {0};
    uint32_t ok_u8 = 0, ok_u16 = 0, steps = 0, n = 40;

    for (uint64_t idx = 0; idx < n; idx++) {
        uint8_t img[W * H], m8[W * H], m16[2 * W * H];
        struct aug_img a = {m8, W, H, 1, AUG_CHW}, b = {m16, W, H, 2, AUG_HWC};
        bool same16 = true;

        fill(img, sizeof(img), (uint32_t)idx + 1);
        memcpy(m8, img, sizeof(img));
        for (size_t i = 0; i < W * H; i++)
            m16[2 * i] = m16[2 * i + 1] = img[i];
        tr.n = 99;
        if (run(spec, idx, img, &tr, &s) < 0 || aug_trace_mask(&tr, &a, &s) < 0 ||
            aug_trace_mask(&tr, &b, &s) < 0)
            continue;
        steps += tr.n;
        ok_u8 += memcmp(m8, img, sizeof(img)) == 0;
        for (size_t i = 0; i < W * H; i++)
            same16 = same16 && m16[2 * i] == img[i] && m16[2 * i + 1] == img[i];
        ok_u16 += same16;
    }
    tap_ok(ok_u8 == n, "%s: the u8 mask equals the image (%u of %u)", spec, ok_u8, n);
    tap_ok(ok_u16 == n, "%s: the u16 mask equals the image (%u of %u)", spec, ok_u16, n);
    tap_ok(steps >= want_min_steps, "%s: %u steps traced over %u samples", spec, steps, n);
    aug_scratch_free(&s);
}

/* A policy of one op a sample: a geometric op is traced (one step) and
 * the mask follows it to the image's pixels; any other op traces nothing. */
static void one_op_policy(const char *spec)
{
    static struct aug_trace tr;
    struct aug_scratch s = {0};
    uint32_t geometric = 0, bad = 0, n = 300;

    for (uint64_t idx = 0; idx < n; idx++) {
        uint8_t img[W * H], m8[W * H];
        struct aug_img a = {m8, W, H, 1, AUG_CHW};

        fill(img, sizeof(img), (uint32_t)idx + 11);
        memcpy(m8, img, sizeof(img));
        if (run(spec, idx, img, &tr, &s) < 0 || tr.n > 1 || aug_trace_mask(&tr, &a, &s) < 0) {
            bad++;
            continue;
        }
        if (tr.n == 1) {
            geometric++;
            bad += tr.step[0].kind != AUG_STEP_AFFINE || memcmp(m8, img, sizeof(img)) != 0;
        }
    }
    tap_ok(bad == 0, "%s: every geometric op's mask equals the image (%u bad)", spec, bad);
    tap_ok(geometric > n / 5 && geometric < n, "%s: %u of %u samples drew a geometric op",
           spec, geometric, n);
    aug_scratch_free(&s);
}

static void photometric_traces_nothing(void)
{
    static struct aug_trace tr;
    struct aug_scratch s = {0};
    uint8_t img[W * H];

    fill(img, sizeof(img), 3);
    tr.n = 5;
    TAP_IS_INT(run("RandomInvert:p=1,ColorJitter:brightness=0.5,RandomErasing:p=1", 0, img,
                   &tr, &s), 0, "photometric: runs");
    TAP_IS_INT(tr.n, 0, "photometric: the trace emptied, nothing recorded");
    TAP_IS_INT(run("RandomHorizontalFlip:p=0", 0, img, &tr, &s), 0, "a flip not drawn: runs");
    TAP_IS_INT(tr.n, 0, "a flip not drawn records nothing");
    TAP_IS_INT(run("RandomHorizontalFlip:p=1,RandomInvert:p=1,RandomVerticalFlip:p=1", 0, img,
                   &tr, &s), 0, "flips around an invert: runs");
    TAP_OK(tr.n == 2 && tr.step[0].kind == AUG_STEP_HFLIP && tr.step[1].kind == AUG_STEP_VFLIP,
           "the two flips, in order");
    aug_scratch_free(&s);
}

static void boxes(void)
{
    static struct aug_trace tr;
    struct rf_err err = {0};
    /* rows 0..4; row 1 was dropped by the transform already */
    uint8_t keep[5] = {1, 0, 1, 1, 1}, tmp[4];
    float b[16] = {
        1, 1, 3, 3,     /* row 0: centre (2, 2) -> (12, 2): kept */
        8, 0, 10, 2,    /* row 2: centre (9, 1) -> (19, 1): kept, clipped to x 20 */
        12, 5, 14, 7,   /* row 3: centre (13, 6) -> (23, 6): out */
        0, 15, 2, 19,   /* row 4: centre (1, 17) -> then (11, 17) -> vflip y 3 */
    };
    float bad[4] = {3, 3, 1, 1};

    tr.n = 2;
    tr.step[0] = (struct aug_step){.kind = AUG_STEP_PAD_CROP,
                                   .map = {{1, 0, 10, 0, 1, 0}, 20, 20}};
    aug_map_vflip(20, 20, &tr.step[1].map);
    tr.step[1].kind = AUG_STEP_VFLIP;
    TAP_IS_INT(aug_trace_boxes(&tr, b, 4, keep, 5, tmp, &err), 3, "boxes: three of four kept");
    TAP_OK(keep[0] == 1 && keep[1] == 0 && keep[2] == 1 && keep[3] == 0 && keep[4] == 1,
           "boxes: the keep bytes of the original rows follow");
    TAP_OK(b[0] == 11 && b[1] == 17 && b[2] == 13 && b[3] == 19, "boxes: row 0 moved");
    TAP_OK(b[4] == 18 && b[5] == 18 && b[6] == 20 && b[7] == 20, "boxes: row 2 clipped");
    TAP_OK(b[8] == 10 && b[9] == 1 && b[10] == 12 && b[11] == 5, "boxes: row 4 moved, flipped");
    memset(keep, 1, sizeof(keep));
    TAP_IS_INT(aug_trace_boxes(&tr, bad, 1, keep, 1, tmp, &err), -EBADMSG,
               "boxes: x1 < x0 refused");
    TAP_OK(strstr(err.msg, "box 0") != NULL, "boxes: the message names the box");
    tr.n = 0;
    TAP_IS_INT(aug_trace_boxes(&tr, b, 3, keep, 5, tmp, &err), 3, "boxes: no step, no change");
}

static void mask_size(void)
{
    static struct aug_trace tr;
    struct aug_scratch s = {0};
    uint8_t m[4 * 4] = {0};
    struct aug_img a = {m, 4, 4, 1, AUG_CHW};

    tr.n = 1;
    tr.step[0].kind = AUG_STEP_HFLIP;
    aug_map_hflip(W, H, &tr.step[0].map);
    TAP_IS_INT(aug_trace_mask(&tr, &a, &s), -EINVAL, "a mask of another size is refused");
    aug_scratch_free(&s);
}

int main(void)
{
    follows("RandomAffine:degrees=-40/40:translate=0.2/0.2:scale=0.7/1.3:shear=-20/20/-10/10",
            40);
    follows("RandomRotation:degrees=90", 40);
    follows("RandomHorizontalFlip,RandomVerticalFlip", 20);
    follows("RandomCrop:size=9/13:padding=3:padding_mode=constant", 40);
    follows("RandomCrop:size=9/13:padding=2/4:padding_mode=reflect", 40);
    follows("RandomCrop:size=9/13:padding=1/2/5/3:padding_mode=symmetric", 40);
    follows("RandomCrop:size=9/13:padding=4:padding_mode=edge,RandomHorizontalFlip", 40);
    one_op_policy("RandAugment:num_ops=1:magnitude=12");
    one_op_policy("TrivialAugmentWide");
    photometric_traces_nothing();
    boxes();
    mask_size();
    return tap_done();
}
