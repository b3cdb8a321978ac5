/*
 * aug_geom_run.c - drives the geometric augmentation ops (aug_geom.h) for
 * tests/integration/test_aug_geom.py, which compares them with
 * torchvision, and times them.
 *
 *   aug_geom_run apply JOBS IN OUT [--repeat R]
 *       One job a line of JOBS; each reads its input from IN and appends
 *       its result to OUT, in order:
 *         affine W H C LAYOUT INTERP FILL ANGLE TX TY SCALE SHX SHY
 *         rotate W H C LAYOUT INTERP FILL ANGLE
 *         hflip W H C LAYOUT
 *         vflip W H C LAYOUT
 *         padcrop W H C LAYOUT MODE FILL PL PT PR PB NX NY TOP LEFT OW OH
 *             (in place, out aliasing in, when OW x OH is W x H)
 *         boxes N MAP...    N x 4 f32 in; out: i32 kept, N keep bytes,
 *                           kept x 4 f32; MAP is one of
 *             affine W H ANGLE TX TY SCALE SHX SHY | rotate W H ANGLE |
 *             hflip W H | vflip W H | padcrop PL PT PR PB NX NY TOP LEFT OW OH
 *       LAYOUT chw|hwc, INTERP nearest|bilinear, MODE constant|edge|reflect|
 *       symmetric, FILL "-" (zeros) or c comma-separated values.  An image
 *       job reads W*H*C bytes and writes the result's bytes.  With --repeat
 *       R each image job runs R times on its own output and prints
 *       "time <op> <W>x<H>x<C> <layout> <ns per call>".
 *
 *   aug_geom_run draw SEED N KIND ARGS...
 *       N draws, the k-th from the stream (SEED, epoch 0, index k), one
 *       line each:
 *         affine W H D0 D1 TRANSLATE SCALE SHEAR -> angle tx ty scale shx shy
 *             (TRANSLATE a,b; SCALE lo,hi; SHEAR a,b or a,b,c,d; "-" none)
 *         rotate D0 D1                          -> angle
 *         flip P                                -> 0 or 1
 *         padcrop W H CW CH PADDING IFNEEDED    -> pl pt pr pb nx ny top left
 *             (PADDING l,t,r,b or "-"; IFNEEDED 0|1; "refused" when the
 *             crop is larger than the padded image)
 *
 * Exit status 0, 1 when an op fails, 2 for bad usage or unreadable files.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aug_geom.h"

static void die(const char *msg, const char *arg)
{
    fprintf(stderr, "aug_geom_run: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

/* The line's next whitespace-separated token; dies when there is none. */
static char *tok(char **save)
{
    char *t = strtok_r(NULL, " \t\n", save);

    if (!t)
        die("job line too short", NULL);
    return t;
}

static uint32_t u32(char **save)
{
    char *t = tok(save), *end;
    unsigned long v = strtoul(t, &end, 10);

    if (*end || v > UINT32_MAX)
        die("not a count", t);
    return (uint32_t)v;
}

static float f32(char **save)
{
    char *t = tok(save), *end;
    float v = strtof(t, &end);

    if (*end)
        die("not a number", t);
    return v;
}

/* Up to max comma-separated doubles of s into v; returns how many, 0 for "-". */
static uint32_t list(const char *s, double *v, uint32_t max)
{
    uint32_t n = 0;
    char *end;

    if (!strcmp(s, "-"))
        return 0;
    for (;;) {
        if (n == max)
            die("list too long", s);
        v[n++] = strtod(s, &end);
        if (end == s)
            die("bad list", s);
        if (!*end)
            return n;
        if (*end != ',')
            die("bad list", s);
        s = end + 1;
    }
}

static uint32_t layout_of(const char *s)
{
    if (!strcmp(s, "chw"))
        return AUG_CHW;
    if (!strcmp(s, "hwc"))
        return AUG_HWC;
    die("layout is chw or hwc", s);
    return 0;
}

static const char *const pad_names[] = { "constant", "edge", "reflect", "symmetric" };

static enum aug_pad pad_of(const char *s)
{
    for (unsigned k = 0; k < sizeof(pad_names) / sizeof(pad_names[0]); k++)
        if (!strcmp(s, pad_names[k]))
            return (enum aug_pad)k;
    die("bad padding mode", s);
    return AUG_PAD_CONSTANT;
}

/* FILL into f (c values), returning f, or NULL for "-". */
static const uint8_t *fill_of(const char *s, uint32_t c, uint8_t *f)
{
    double v[4];
    uint32_t n = list(s, v, 4);

    if (!n)
        return NULL;
    if (n != c)
        die("fill needs one value per channel", s);
    for (uint32_t k = 0; k < n; k++)
        f[k] = (uint8_t)v[k];
    return f;
}

static void read_all(FILE *f, void *p, size_t n)
{
    if (n && fread(p, 1, n, f) != n)
        die("input file too short", NULL);
}

static void crop_params(char **save, struct aug_crop_params *p, uint32_t *ow, uint32_t *oh)
{
    p->pad_l = u32(save);
    p->pad_t = u32(save);
    p->pad_r = u32(save);
    p->pad_b = u32(save);
    p->need_x = u32(save);
    p->need_y = u32(save);
    p->top = u32(save);
    p->left = u32(save);
    *ow = u32(save);
    *oh = u32(save);
}

/* A boxes job: its map, then the boxes through it. */
static int boxes_job(char **save, FILE *in, FILE *out)
{
    uint32_t n = u32(save), w, h, ow, oh;
    const char *kind = tok(save);
    struct aug_map map;
    struct aug_crop_params cp = { 0 };
    struct rf_err err;
    float *b;
    uint8_t *keep;
    int32_t kept;

    if (!strcmp(kind, "padcrop")) {
        crop_params(save, &cp, &ow, &oh);
        aug_map_pad_crop(&cp, ow, oh, &map);
    } else {
        w = u32(save);
        h = u32(save);
        if (!strcmp(kind, "affine")) {
            struct aug_affine_params p;

            p.angle = f32(save);
            p.tx = f32(save);
            p.ty = f32(save);
            p.scale = f32(save);
            p.shear_x = f32(save);
            p.shear_y = f32(save);
            aug_map_affine(w, h, &p, &map);
        } else if (!strcmp(kind, "rotate")) {
            aug_map_rotate(w, h, f32(save), &map);
        } else if (!strcmp(kind, "hflip")) {
            aug_map_hflip(w, h, &map);
        } else if (!strcmp(kind, "vflip")) {
            aug_map_vflip(w, h, &map);
        } else {
            die("unknown box map", kind);
        }
    }
    b = malloc(16 * (size_t)n + 1);
    keep = malloc((size_t)n + 1);
    if (!b || !keep)
        die("out of memory", NULL);
    read_all(in, b, 16 * (size_t)n);
    kept = aug_boxes(&map, b, n, b, keep, &err);
    if (kept < 0) {
        fprintf(stderr, "aug_geom_run: boxes: %s\n", err.msg);
        free(b);
        free(keep);
        return 1;
    }
    fwrite(&kept, 4, 1, out);
    fwrite(keep, 1, n, out);
    fwrite(b, 16, (size_t)kept, out);
    free(b);
    free(keep);
    return 0;
}

static double now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* An image job, run repeat times (the first on the input, the others on
 * the output before it). */
static int image_job(const char *op, char **save, FILE *in, FILE *out, long repeat,
                     struct aug_scratch *s)
{
    struct aug_img im, dst;
    struct aug_crop_params cp = { 0 };
    uint8_t fbuf[4];
    const uint8_t *fill = NULL;
    enum aug_interp interp = AUG_NEAREST;
    enum aug_pad mode = AUG_PAD_CONSTANT;
    float a[6] = { 0 };
    uint32_t ow = 0, oh = 0;
    double t0;
    int rc = 0;

    im.w = u32(save);
    im.h = u32(save);
    im.c = u32(save);
    im.layout = layout_of(tok(save));
    if (im.c < 1 || im.c > 4)
        die("c is 1 to 4", op);
    if (!strcmp(op, "affine") || !strcmp(op, "rotate")) {
        const char *in_s = tok(save);

        interp = !strcmp(in_s, "bilinear") ? AUG_BILINEAR : AUG_NEAREST;
        if (strcmp(in_s, "bilinear") && strcmp(in_s, "nearest"))
            die("interpolation is nearest or bilinear", in_s);
        fill = fill_of(tok(save), im.c, fbuf);
        for (int k = 0; k < (!strcmp(op, "affine") ? 6 : 1); k++)
            a[k] = f32(save);
    } else if (!strcmp(op, "padcrop")) {
        mode = pad_of(tok(save));
        fill = fill_of(tok(save), im.c, fbuf);
        crop_params(save, &cp, &ow, &oh);
    } else if (strcmp(op, "hflip") && strcmp(op, "vflip")) {
        die("unknown op", op);
    }
    im.px = malloc((size_t)im.w * im.h * im.c + 1);
    if (!im.px)
        die("out of memory", NULL);
    read_all(in, im.px, (size_t)im.w * im.h * im.c);
    dst = im;
    if (!strcmp(op, "padcrop") && (ow != im.w || oh != im.h)) {
        dst.w = ow;
        dst.h = oh;
        dst.px = malloc((size_t)ow * oh * im.c + 1);
        if (!dst.px)
            die("out of memory", NULL);
    }
    t0 = now_ns();
    for (long r = 0; r < repeat && !rc; r++) {
        if (!strcmp(op, "affine"))
            rc = aug_affine(&im, a[0], a[1], a[2], a[3], a[4], a[5], interp, fill, s);
        else if (!strcmp(op, "rotate"))
            rc = aug_rotate(&im, a[0], interp, fill, s);
        else if (!strcmp(op, "hflip"))
            aug_hflip(&im);
        else if (!strcmp(op, "vflip"))
            aug_vflip(&im);
        else
            rc = aug_pad_crop(&im, &dst, &cp, mode, fill, s);
    }
    if (repeat > 1)
        printf("time %s %ux%ux%u %s %.0f\n", op, im.w, im.h, im.c,
               im.layout == AUG_CHW ? "chw" : "hwc", (now_ns() - t0) / (double)repeat);
    if (rc)
        fprintf(stderr, "aug_geom_run: %s failed: %s\n", op, strerror(-rc));
    else
        fwrite(dst.px, 1, (size_t)dst.w * dst.h * dst.c, out);
    if (dst.px != im.px)
        free(dst.px);
    free(im.px);
    return rc ? 1 : 0;
}

static int apply(int argc, char **argv)
{
    FILE *jobs, *in, *out;
    struct aug_scratch s = { 0 };
    char line[1024];
    long repeat = 1;
    int rc = 0;

    if (argc != 5 && !(argc == 7 && !strcmp(argv[5], "--repeat")))
        die("usage: aug_geom_run apply JOBS IN OUT [--repeat R]", NULL);
    if (argc == 7 && (repeat = strtol(argv[6], NULL, 10)) < 1)
        die("--repeat wants a positive count", argv[6]);
    jobs = fopen(argv[2], "r");
    in = fopen(argv[3], "rb");
    out = fopen(argv[4], "wb");
    if (!jobs || !in || !out)
        die("cannot open", !jobs ? argv[2] : !in ? argv[3] : argv[4]);
    while (fgets(line, sizeof(line), jobs)) {
        char *save, *op = strtok_r(line, " \t\n", &save);

        if (!op)
            continue;
        if (!strcmp(op, "boxes"))
            rc |= boxes_job(&save, in, out);
        else
            rc |= image_job(op, &save, in, out, repeat, &s);
    }
    aug_scratch_free(&s);
    fclose(jobs);
    fclose(in);
    if (fclose(out))
        die("cannot write", argv[4]);
    return rc;
}

static uint32_t arg_u32(const char *s)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);

    if (*end || v > UINT32_MAX)
        die("not a count", s);
    return (uint32_t)v;
}

static int draw(int argc, char **argv)
{
    unsigned long long seed;
    uint32_t n;
    const char *kind;

    if (argc < 5)
        die("usage: aug_geom_run draw SEED N KIND ARGS...", NULL);
    seed = strtoull(argv[2], NULL, 10);
    n = arg_u32(argv[3]);
    kind = argv[4];
    for (uint32_t k = 0; k < n; k++) {
        struct rng_stream st;

        rng_stream_init(&st, seed, 0, k);
        if (!strcmp(kind, "affine") && argc == 12) {
            double deg[2] = { strtod(argv[7], NULL), strtod(argv[8], NULL) };
            double tr[2], sc[2], sh[4];
            uint32_t nt = list(argv[9], tr, 2), ns = list(argv[10], sc, 2);
            uint32_t nsh = list(argv[11], sh, 4);
            struct aug_affine_params p;

            if ((nt && nt != 2) || (ns && ns != 2) || (nsh && nsh != 2 && nsh != 4))
                die("bad affine ranges", NULL);
            aug_draw_affine(&st, deg, nt ? tr : NULL, ns ? sc : NULL, nsh ? sh : NULL, nsh,
                            arg_u32(argv[5]), arg_u32(argv[6]), &p);
            printf("%.9g %.9g %.9g %.9g %.9g %.9g\n", p.angle, p.tx, p.ty, p.scale, p.shear_x,
                   p.shear_y);
        } else if (!strcmp(kind, "rotate") && argc == 7) {
            double deg[2] = { strtod(argv[5], NULL), strtod(argv[6], NULL) };

            printf("%.9g\n", aug_draw_rotate(&st, deg));
        } else if (!strcmp(kind, "flip") && argc == 6) {
            printf("%d\n", aug_draw_flip(&st, strtod(argv[5], NULL)));
        } else if (!strcmp(kind, "padcrop") && argc == 11) {
            double pd[4];
            uint32_t np = list(argv[9], pd, 4), pad[4];
            struct aug_crop_params p;

            if (np && np != 4)
                die("padding is l,t,r,b", argv[9]);
            for (uint32_t j = 0; j < np; j++)
                pad[j] = (uint32_t)pd[j];
            if (aug_draw_pad_crop(&st, arg_u32(argv[5]), arg_u32(argv[6]), np ? pad : NULL,
                                  !strcmp(argv[10], "1"), arg_u32(argv[7]), arg_u32(argv[8]),
                                  &p) < 0)
                printf("refused\n");
            else
                printf("%u %u %u %u %u %u %u %u\n", p.pad_l, p.pad_t, p.pad_r, p.pad_b,
                       p.need_x, p.need_y, p.top, p.left);
        } else {
            die("unknown draw or wrong argument count", kind);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "apply"))
        return apply(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "draw"))
        return draw(argc, argv);
    die("usage: aug_geom_run apply JOBS IN OUT [--repeat R] | draw SEED N KIND ARGS...",
        NULL);
    return 2;
}
