/*
 * aug_policy_run.c - the policies' and RandomErasing's draws and the erase
 * (daemon/worker/aug_policy.h) outside the daemon, for
 * tests/integration/test_aug_policy.py to compare with torchvision.
 * Draw k uses the stream (SEED, epoch 0, index k), as sample k would.
 *
 *   aug_policy_run draw trivialaugment SEED N W H [BINS]
 *   aug_policy_run draw randaugment SEED N W H NUM_OPS MAGNITUDE BINS
 *   aug_policy_run draw autoaugment SEED N W H
 *       one line per draw: the op count, then per op "NAME BIN MAGNITUDE"
 *       (BIN -1 for an op without magnitudes; MAGNITUDE signed, %.9g)
 *   aug_policy_run table trivialaugment|randaugment|autoaugment BINS W H
 *       one line per op of the space, in torchvision's order:
 *       "NAME SIGNED M0 M1 ..." (no M for an op without magnitudes)
 *   aug_policy_run check trivialaugment BINS
 *   aug_policy_run check randaugment NUM_OPS MAGNITUDE BINS
 *   aug_policy_run check erasing P S0 S1 R0 R1
 *       "ok", or "refused MESSAGE"
 *   aug_policy_run erasing SEED N IMG_H IMG_W P S0 S1 R0 R1
 *       one line per draw: "ERASE I J H W"
 *   aug_policy_run noise SEED N
 *       N bytes of value="random" from the stream (SEED, 0, 0), one line
 *   aug_policy_run erase IN OUT C H W chw|hwc I J BH BW const V0 [V1 V2]
 *   aug_policy_run erase IN OUT C H W chw|hwc I J BH BW random SEED
 *       the image in IN (raw bytes) erased, to OUT; random: the noise of
 *       the stream (SEED, 0, 0), as `noise` prints it
 * Exit status 0, 1 for a failure (a file, memory), 2 for bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aug_policy.h"

static const char *const policy_names[AUG_POLICY_COUNT] = {
    [AUG_POLICY_TRIVIALAUGMENT] = "trivialaugment",
    [AUG_POLICY_RANDAUGMENT] = "randaugment",
    [AUG_POLICY_AUTOAUGMENT] = "autoaugment",
};

static int usage(void)
{
    fprintf(stderr, "usage: see tests/aug_policy_run.c's opening comment\n");
    return 2;
}

static int policy_of(const char *name)
{
    for (int p = 0; p < AUG_POLICY_COUNT; p++)
        if (!strcmp(name, policy_names[p]))
            return p;
    return -1;
}

static uint32_t u32(const char *s)
{
    return (uint32_t)strtoul(s, NULL, 0);
}

static int cmd_draw(int argc, char **argv)
{
    int pol;
    uint64_t seed;
    uint32_t n, w, h, bins = AUG_TRIVIAL_BINS, num_ops = 0, mag = 0;
    struct aug_policy_draw d;

    if (argc < 7 || (pol = policy_of(argv[2])) < 0)
        return usage();
    seed = strtoull(argv[3], NULL, 0);
    n = u32(argv[4]);
    w = u32(argv[5]);
    h = u32(argv[6]);
    if (pol == AUG_POLICY_TRIVIALAUGMENT && argc > 7)
        bins = u32(argv[7]);
    if (pol == AUG_POLICY_RANDAUGMENT) {
        if (argc != 10)
            return usage();
        num_ops = u32(argv[7]);
        mag = u32(argv[8]);
        bins = u32(argv[9]);
    }
    if ((pol == AUG_POLICY_TRIVIALAUGMENT && aug_trivialaugment_check(bins)) ||
        (pol == AUG_POLICY_RANDAUGMENT && aug_randaugment_check(num_ops, mag, bins)))
        return usage();
    for (uint32_t k = 0; k < n; k++) {
        struct rng_stream rng;

        rng_stream_init(&rng, seed, 0, k);
        if (pol == AUG_POLICY_TRIVIALAUGMENT)
            aug_draw_trivialaugment_bins(&rng, bins, w, h, &d);
        else if (pol == AUG_POLICY_RANDAUGMENT)
            aug_draw_randaugment(&rng, num_ops, mag, bins, w, h, &d);
        else
            aug_draw_autoaugment_imagenet(&rng, w, h, &d);
        printf("%u", d.n);
        for (uint32_t s = 0; s < d.n; s++)
            printf(" %s %d %.9g", aug_pop_name(d.step[s].op), d.step[s].bin,
                   (double)d.step[s].magnitude);
        putchar('\n');
    }
    return 0;
}

static int cmd_table(int argc, char **argv)
{
    int pol;
    uint32_t bins, w, h;

    if (argc != 6 || (pol = policy_of(argv[2])) < 0)
        return usage();
    bins = u32(argv[3]);
    w = u32(argv[4]);
    h = u32(argv[5]);
    if (aug_trivialaugment_check(bins))
        return usage();
    for (unsigned k = 0; k < aug_policy_space_size(pol); k++) {
        unsigned op = (unsigned)aug_policy_space_op(pol, k);
        bool sign;

        aug_policy_magnitude(pol, op, bins, 0, w, h, &sign);
        printf("%s %d", aug_pop_name(op), sign);
        if (op != AUG_POP_IDENTITY && op != AUG_POP_AUTOCONTRAST && op != AUG_POP_EQUALIZE &&
            op != AUG_POP_INVERT)
            for (uint32_t b = 0; b < bins; b++)
                printf(" %.9g", (double)aug_policy_magnitude(pol, op, bins, b, w, h, NULL));
        putchar('\n');
    }
    return 0;
}

static int cmd_check(int argc, char **argv)
{
    const char *why;

    if (argc == 4 && !strcmp(argv[2], "trivialaugment")) {
        why = aug_trivialaugment_check(u32(argv[3]));
    } else if (argc == 6 && !strcmp(argv[2], "randaugment")) {
        why = aug_randaugment_check(u32(argv[3]), u32(argv[4]), u32(argv[5]));
    } else if (argc == 8 && !strcmp(argv[2], "erasing")) {
        struct aug_erasing_args a = {
            .p = strtod(argv[3], NULL),
            .scale = {strtod(argv[4], NULL), strtod(argv[5], NULL)},
            .ratio = {strtod(argv[6], NULL), strtod(argv[7], NULL)},
        };
        why = aug_erasing_check(&a);
    } else {
        return usage();
    }
    if (why)
        printf("refused %s\n", why);
    else
        printf("ok\n");
    return 0;
}

static int cmd_erasing(int argc, char **argv)
{
    uint64_t seed;
    uint32_t n, ih, iw;
    double p, scale[2], ratio[2];

    if (argc != 11)
        return usage();
    seed = strtoull(argv[2], NULL, 0);
    n = u32(argv[3]);
    ih = u32(argv[4]);
    iw = u32(argv[5]);
    p = strtod(argv[6], NULL);
    scale[0] = strtod(argv[7], NULL);
    scale[1] = strtod(argv[8], NULL);
    ratio[0] = strtod(argv[9], NULL);
    ratio[1] = strtod(argv[10], NULL);
    for (uint32_t k = 0; k < n; k++) {
        struct rng_stream rng;
        struct aug_erasing_draw d;

        rng_stream_init(&rng, seed, 0, k);
        aug_draw_erasing(&rng, p, scale, ratio, ih, iw, &d);
        printf("%d %u %u %u %u\n", d.erase, d.i, d.j, d.h, d.w);
    }
    return 0;
}

static int cmd_noise(int argc, char **argv)
{
    struct rng_stream rng;
    uint8_t *v;
    size_t n;

    if (argc != 4)
        return usage();
    n = strtoull(argv[3], NULL, 0);
    v = malloc(n ? n : 1);
    if (!v)
        return 1;
    rng_stream_init(&rng, strtoull(argv[2], NULL, 0), 0, 0);
    aug_draw_erasing_noise(&rng, n, v);
    for (size_t k = 0; k < n; k++)
        printf(k ? " %u" : "%u", v[k]);
    putchar('\n');
    free(v);
    return 0;
}

static int cmd_erase(int argc, char **argv)
{
    struct aug_img im;
    uint32_t i, j, bh, bw;
    uint8_t val[3] = {0, 0, 0}, *noise = NULL;
    size_t bytes;
    FILE *f;
    int rc = 1;

    if (argc < 14)
        return usage();
    im.c = u32(argv[4]);
    im.h = u32(argv[5]);
    im.w = u32(argv[6]);
    im.layout = !strcmp(argv[7], "chw") ? AUG_CHW : AUG_HWC;
    i = u32(argv[8]);
    j = u32(argv[9]);
    bh = u32(argv[10]);
    bw = u32(argv[11]);
    if ((im.c != 1 && im.c != 3) || i + bh > im.h || j + bw > im.w)
        return usage();
    if (!strcmp(argv[12], "const")) {
        if (argc != 13 + (int)im.c)
            return usage();
        for (uint32_t ch = 0; ch < im.c; ch++)
            val[ch] = (uint8_t)u32(argv[13 + ch]);
    } else if (!strcmp(argv[12], "random") && argc == 14) {
        struct rng_stream rng;

        noise = malloc((size_t)im.c * bh * bw + 1);
        if (!noise)
            return 1;
        rng_stream_init(&rng, strtoull(argv[13], NULL, 0), 0, 0);
        aug_draw_erasing_noise(&rng, (size_t)im.c * bh * bw, noise);
    } else {
        return usage();
    }
    bytes = (size_t)im.c * im.h * im.w;
    im.px = malloc(bytes ? bytes : 1);
    if (!im.px)
        goto out;
    f = fopen(argv[2], "rb");
    if (!f || fread(im.px, 1, bytes, f) != bytes) {
        fprintf(stderr, "aug_policy_run: cannot read %u bytes from %s\n", (unsigned)bytes, argv[2]);
        if (f)
            fclose(f);
        goto out;
    }
    fclose(f);
    aug_erase(&im, i, j, bh, bw, noise ? noise : val, noise != NULL);
    f = fopen(argv[3], "wb");
    if (!f || fwrite(im.px, 1, bytes, f) != bytes || fclose(f) != 0) {
        fprintf(stderr, "aug_policy_run: cannot write %s\n", argv[3]);
        goto out;
    }
    rc = 0;
out:
    free(im.px);
    free(noise);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int, char **);
    } cmds[] = {
        {"draw", cmd_draw},       {"table", cmd_table}, {"check", cmd_check},
        {"erasing", cmd_erasing}, {"noise", cmd_noise}, {"erase", cmd_erase},
    };

    if (argc < 2)
        return usage();
    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++)
        if (!strcmp(argv[1], cmds[k].name))
            return cmds[k].run(argc, argv);
    return usage();
}
