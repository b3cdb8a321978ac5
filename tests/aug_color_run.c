/*
 * aug_color_run.c - runs one photometric augmentation op (aug_color.h) on a
 * raw image, or draws an op's random parameters, for
 * tests/integration/test_aug_color.py, which compares both with
 * torchvision; and times an op (--repeat), for the figures in the op
 * family's notes.
 *
 *   aug_color_run apply OP W H C chw|hwc IN OUT [ARG...] [--repeat N]
 *       IN holds W*H*C bytes (C 1 or 3) in the layout named; the op runs on
 *       them with ARG... and the result goes to OUT.  With --repeat N the
 *       op runs N times more on its own output first (untimed warm-up
 *       once), and "ns_per_image <t>" is printed.
 *   aug_color_run draw KIND SEED N [ARG...]
 *       N parameter sets, the k-th from the stream (SEED, epoch 0, index
 *       k), one line each on stdout.
 *
 * OPs and their ARGs (the functions' own, aug_color.h):
 *   brightness F | contrast F | saturation F | hue F | sharpness F
 *   posterize BITS | solarize THRESHOLD | blur KX KY SX SY
 *   grayscale | autocontrast | equalize | invert
 *   colorjitter ORDER B C S H   ORDER four digits (e.g. 2031), a factor
 *                               "-" for an adjustment that is off
 * KINDs, their ARGs and lines:
 *   colorjitter B C S H   each LO,HI or "-" (off); lines "o0 o1 o2 o3 b c s h"
 *                         with "-" for a factor not drawn
 *   coin P                lines 0 or 1
 *   blur LO HI            lines sigma
 * Exit status 0; 1 when the op fails (its error on stderr); 2 for bad usage
 * or files it cannot read or write.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aug_color.h"

static int usage(const char *why)
{
    fprintf(stderr, "aug_color_run: %s\n"
            "usage: aug_color_run apply OP W H C chw|hwc IN OUT [ARG...] [--repeat N]\n"
            "       aug_color_run draw KIND SEED N [ARG...]\n", why);
    return 2;
}

static int num(const char *s, double *out)
{
    char *end;

    *out = strtod(s, &end);
    return *s && !*end ? 0 : -1;
}

/* "-" (off) or a factor */
static int factor(const char *s, bool *on, float *f)
{
    double d;

    *on = strcmp(s, "-") != 0;
    *f = 0.0f;
    if (!*on)
        return 0;
    if (num(s, &d))
        return -1;
    *f = (float)d;
    return 0;
}

/* ---- apply ---------------------------------------------------------------- */

struct op_args {
    const char *const *argv;
    double v[4];
};

static int run_brightness(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    (void)s;
    aug_brightness(im, (float)a->v[0]);
    return 0;
}

static int run_contrast(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    (void)s;
    aug_contrast(im, (float)a->v[0]);
    return 0;
}

static int run_saturation(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    (void)s;
    aug_saturation(im, (float)a->v[0]);
    return 0;
}

static int run_hue(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    (void)s;
    aug_hue(im, (float)a->v[0]);
    return 0;
}

static int run_sharpness(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    return aug_sharpness(im, (float)a->v[0], s);
}

static int run_posterize(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    (void)s;
    aug_posterize(im, (uint32_t)a->v[0]);
    return 0;
}

static int run_solarize(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    (void)s;
    aug_solarize(im, (float)a->v[0]);
    return 0;
}

static int run_blur(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    return aug_gaussian_blur(im, (uint32_t)a->v[0], (uint32_t)a->v[1], (float)a->v[2],
                             (float)a->v[3], s);
}

static int run_grayscale(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    (void)a;
    (void)s;
    aug_grayscale(im);
    return 0;
}

static int run_autocontrast(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    (void)a;
    (void)s;
    aug_autocontrast(im);
    return 0;
}

static int run_equalize(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    (void)a;
    (void)s;
    aug_equalize(im);
    return 0;
}

static int run_invert(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    (void)a;
    (void)s;
    aug_invert(im);
    return 0;
}

static int run_colorjitter(struct aug_img *im, const struct op_args *a, struct aug_scratch *s)
{
    struct aug_colorjitter j;
    const char *order = a->argv[0];

    (void)s;
    if (strlen(order) != AUG_CJ_N)
        return -EINVAL;
    for (int i = 0; i < AUG_CJ_N; i++) {
        if (order[i] < '0' || order[i] >= '0' + AUG_CJ_N)
            return -EINVAL;
        j.order[i] = (uint8_t)(order[i] - '0');
        if (factor(a->argv[1 + i], &j.on[i], &j.factor[i]))
            return -EINVAL;
    }
    aug_colorjitter(im, &j);
    return 0;
}

/* An op: its name, how many arguments, whether they are numbers (parsed
 * into v) or words the runner parses itself (argv). */
static const struct {
    const char *name;
    int nargs;
    bool words;
    int (*run)(struct aug_img *, const struct op_args *, struct aug_scratch *);
} ops[] = {
    {"brightness", 1, false, run_brightness},
    {"contrast", 1, false, run_contrast},
    {"saturation", 1, false, run_saturation},
    {"hue", 1, false, run_hue},
    {"sharpness", 1, false, run_sharpness},
    {"posterize", 1, false, run_posterize},
    {"solarize", 1, false, run_solarize},
    {"blur", 4, false, run_blur},
    {"grayscale", 0, false, run_grayscale},
    {"autocontrast", 0, false, run_autocontrast},
    {"equalize", 0, false, run_equalize},
    {"invert", 0, false, run_invert},
    {"colorjitter", 5, true, run_colorjitter},
};

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int apply(int argc, char **argv)
{
    struct aug_scratch scratch = {0};
    struct aug_img im;
    struct op_args a = {0};
    long repeat = -1;
    double d;
    size_t bytes;
    FILE *f;
    int op = -1, rc;

    if (argc >= 2 && !strcmp(argv[argc - 2], "--repeat")) {
        repeat = strtol(argv[argc - 1], NULL, 10);
        if (repeat < 1)
            return usage("--repeat wants a count of 1 or more");
        argc -= 2;
    }
    if (argc < 8)
        return usage("apply wants OP W H C LAYOUT IN OUT");
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (!strcmp(ops[i].name, argv[1]))
            op = (int)i;
    if (op < 0)
        return usage("unknown op");
    if (argc != 8 + ops[op].nargs)
        return usage("wrong number of arguments for the op");
    a.argv = (const char *const *)argv + 8;
    for (int i = 0; i < ops[op].nargs && !ops[op].words; i++)
        if (num(argv[8 + i], &a.v[i]))
            return usage("an op argument is not a number");
    if (num(argv[2], &d) || d < 1 || d > 1e5 || (im.w = (uint32_t)d, num(argv[3], &d)) || d < 1 ||
        d > 1e5 || (im.h = (uint32_t)d, num(argv[4], &d)) || (d != 1 && d != 3))
        return usage("W and H are 1..100000, C is 1 or 3");
    im.c = (uint32_t)d;
    if (!strcmp(argv[5], "chw"))
        im.layout = AUG_CHW;
    else if (!strcmp(argv[5], "hwc"))
        im.layout = AUG_HWC;
    else
        return usage("the layout is chw or hwc");
    bytes = (size_t)im.w * im.h * im.c;
    im.px = malloc(bytes);
    if (!im.px)
        return usage("out of memory");
    f = fopen(argv[6], "rb");
    if (!f || fread(im.px, 1, bytes, f) != bytes || fgetc(f) != EOF) {
        fprintf(stderr, "aug_color_run: %s: cannot read %zu bytes (exactly)\n", argv[6], bytes);
        return 2;
    }
    fclose(f);

    rc = ops[op].run(&im, &a, &scratch);
    if (rc == 0 && repeat > 0) {
        double t0 = now_ns();

        for (long i = 0; i < repeat && rc == 0; i++)
            rc = ops[op].run(&im, &a, &scratch);
        printf("ns_per_image %.0f\n", (now_ns() - t0) / (double)repeat);
    }
    if (rc) {
        fprintf(stderr, "aug_color_run: %s: %s\n", argv[1], strerror(-rc));
        return 1;
    }
    f = fopen(argv[7], "wb");
    if (!f || fwrite(im.px, 1, bytes, f) != bytes || fclose(f)) {
        fprintf(stderr, "aug_color_run: %s: cannot write\n", argv[7]);
        return 2;
    }
    free(im.px);
    aug_scratch_free(&scratch);
    return 0;
}

/* ---- draw ------------------------------------------------------------------ */

static int range(const char *s, bool *on, float *lo, float *hi)
{
    char *end;

    *on = strcmp(s, "-") != 0;
    *lo = *hi = 0.0f;
    if (!*on)
        return 0;
    *lo = strtof(s, &end);
    if (*end != ',')
        return -1;
    *hi = strtof(end + 1, &end);
    return *end ? -1 : 0;
}

static int draw(int argc, char **argv)
{
    enum { COLORJITTER, COIN, BLUR } kind;
    struct aug_colorjitter_ranges r;
    struct rng_stream st;
    double seed, n, p = 0, lo = 0, hi = 0;

    if (argc < 4 || num(argv[2], &seed) || seed < 0 || num(argv[3], &n) || n < 0)
        return usage("draw wants KIND SEED N");
    if (!strcmp(argv[1], "colorjitter")) {
        kind = COLORJITTER;
        if (argc != 8)
            return usage("draw colorjitter wants four ranges");
        for (int i = 0; i < AUG_CJ_N; i++)
            if (range(argv[4 + i], &r.on[i], &r.lo[i], &r.hi[i]))
                return usage("a range is LO,HI or -");
    } else if (!strcmp(argv[1], "coin")) {
        kind = COIN;
        if (argc != 5 || num(argv[4], &p))
            return usage("draw coin wants P");
    } else if (!strcmp(argv[1], "blur")) {
        kind = BLUR;
        if (argc != 6 || num(argv[4], &lo) || num(argv[5], &hi))
            return usage("draw blur wants LO HI");
    } else {
        return usage("unknown draw kind");
    }
    for (uint64_t k = 0; k < (uint64_t)n; k++) {
        rng_stream_init(&st, (uint64_t)seed, 0, k);
        if (kind == COLORJITTER) {
            struct aug_colorjitter j;

            aug_draw_colorjitter(&st, &r, &j);
            printf("%u %u %u %u", j.order[0], j.order[1], j.order[2], j.order[3]);
            for (int i = 0; i < AUG_CJ_N; i++)
                j.on[i] ? printf(" %.9g", j.factor[i]) : printf(" -");
            printf("\n");
        } else if (kind == COIN) {
            printf("%d\n", aug_draw_coin(&st, p));
        } else {
            printf("%.9g\n", aug_draw_gaussian_blur(&st, (float)lo, (float)hi));
        }
    }
    return fflush(stdout) ? 2 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "apply"))
        return apply(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "draw"))
        return draw(argc - 1, argv + 1);
    return usage("the mode is apply or draw");
}
