/*
 * aug_policy_calls.c - what aug_policy_apply (daemon/worker/
 * aug_policy_apply.c) asks of the photometric and geometric ops for each
 * policy op, recorded by doubles of those ops that print their arguments
 * and leave the image alone; tests/integration/test_aug_policy.py compares
 * the calls with the ones torchvision's _apply_op makes to its functional
 * ops.  The doubles are the ops' declared signatures (aug_policy_ops.h),
 * so a signature the op families change breaks this build too.
 *
 *   aug_policy_calls W H C nearest|bilinear none|F0,F1,F2 NAME MAGNITUDE...
 *       one line per op call:
 *       affine ANGLE TX TY SCALE SHEAR_X SHEAR_Y INTERP FILL...
 *       brightness|contrast|saturation|sharpness FACTOR
 *       posterize BITS | solarize THRESHOLD
 *       autocontrast | equalize | invert
 *       then "rc N", aug_policy_apply_interp's return
 * Exit status 0, or 2 for bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aug_policy.h"
#include "aug_policy_ops.h"

static void say_f(const char *name, float v)
{
    printf("%s %.9g\n", name, (double)v);
}

void aug_brightness(struct aug_img *im, float factor)
{
    (void)im;
    say_f("brightness", factor);
}

void aug_contrast(struct aug_img *im, float factor)
{
    (void)im;
    say_f("contrast", factor);
}

void aug_saturation(struct aug_img *im, float factor)
{
    (void)im;
    say_f("saturation", factor);
}

int aug_sharpness(struct aug_img *im, float factor, struct aug_scratch *s)
{
    (void)im;
    (void)s;
    say_f("sharpness", factor);
    return 0;
}

void aug_posterize(struct aug_img *im, uint32_t bits)
{
    (void)im;
    printf("posterize %u\n", bits);
}

void aug_solarize(struct aug_img *im, float threshold)
{
    (void)im;
    say_f("solarize", threshold);
}

void aug_autocontrast(struct aug_img *im)
{
    (void)im;
    printf("autocontrast\n");
}

void aug_equalize(struct aug_img *im)
{
    (void)im;
    printf("equalize\n");
}

void aug_invert(struct aug_img *im)
{
    (void)im;
    printf("invert\n");
}

int aug_affine(struct aug_img *im, float angle_deg, float tx, float ty, float scale,
               float shear_x_deg, float shear_y_deg, enum aug_interp interp,
               const uint8_t *fill, struct aug_scratch *s)
{
    (void)s;
    printf("affine %.9g %.9g %.9g %.9g %.9g %.9g %s", (double)angle_deg, (double)tx, (double)ty,
           (double)scale, (double)shear_x_deg, (double)shear_y_deg,
           interp == AUG_NEAREST ? "nearest" : interp == AUG_BILINEAR ? "bilinear" : "?");
    if (fill)
        for (uint32_t c = 0; c < im->c; c++)
            printf(" %u", fill[c]);
    else
        printf(" none");
    putchar('\n');
    return 0;
}

static int op_of(const char *name)
{
    for (unsigned op = 0; op < AUG_POP_COUNT; op++)
        if (!strcmp(name, aug_pop_name(op)))
            return (int)op;
    return -1;
}

int main(int argc, char **argv)
{
    struct aug_policy_draw d = {0};
    struct aug_scratch s = {0};
    uint8_t px[1], fill[3];
    struct aug_img im = {.px = px, .layout = AUG_CHW};
    unsigned interp;
    int rc;

    if (argc < 6 || (argc - 6) % 2 || (argc - 6) / 2 > AUG_POLICY_MAX_OPS)
        goto usage;
    im.w = (uint32_t)strtoul(argv[1], NULL, 0);
    im.h = (uint32_t)strtoul(argv[2], NULL, 0);
    im.c = (uint32_t)strtoul(argv[3], NULL, 0);
    if (im.c != 1 && im.c != 3)
        goto usage;
    if (!strcmp(argv[4], "nearest"))
        interp = AUG_NEAREST;
    else if (!strcmp(argv[4], "bilinear"))
        interp = AUG_BILINEAR;
    else
        goto usage;
    if (strcmp(argv[5], "none") != 0) {
        char *p = argv[5];

        for (uint32_t c = 0; c < im.c; c++, p++)
            fill[c] = (uint8_t)strtoul(p, &p, 0);
    }
    for (int k = 6; k < argc; k += 2) {
        int op = op_of(argv[k]);

        if (op < 0)
            goto usage;
        d.step[d.n].op = (uint8_t)op;
        d.step[d.n].bin = 0;
        d.step[d.n++].magnitude = strtof(argv[k + 1], NULL);
    }
    if (interp == AUG_NEAREST && !strcmp(argv[5], "none"))
        rc = aug_policy_apply(&im, &d, NULL, &s); /* the brief form: nearest */
    else
        rc = aug_policy_apply_interp(&im, &d, interp, strcmp(argv[5], "none") ? fill : NULL, &s);
    printf("rc %d\n", rc);
    aug_scratch_free(&s);
    return 0;
usage:
    fprintf(stderr, "usage: see tests/aug_policy_calls.c's opening comment\n");
    return 2;
}
