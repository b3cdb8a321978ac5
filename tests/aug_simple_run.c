/*
 * aug_simple_run.c - runs one of daemon/worker/aug_simple.c's ops for
 * tests/integration/test_aug_simple.py, which compares it with
 * torchvision's functional op.
 *
 *   aug_simple_run apply OP C H W chw|hwc PARAM < image > result
 *       OP hflip|vflip|invert|posterize|solarize; PARAM the bits or the
 *       threshold (ignored by the others); the image is C*H*W bytes in
 *       the layout given, the result the same bytes after the op
 *   aug_simple_run draws P N SEED
 *       prints how many of N coins (aug_draw_coin) came up with
 *       probability P, the i-th from sample i's stream of seed SEED
 * Exits 0, or 2 on a usage or I/O error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aug_simple.h"

static int usage(void)
{
    fprintf(stderr, "usage: aug_simple_run apply OP C H W chw|hwc PARAM < in > out\n"
                    "       aug_simple_run draws P N SEED\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct aug_img im;
    size_t n;
    uint8_t *px;

    if (argc == 5 && strcmp(argv[1], "draws") == 0) {
        double p = atof(argv[2]);
        unsigned long long count = strtoull(argv[3], NULL, 10), hits = 0;
        uint64_t seed = strtoull(argv[4], NULL, 10);

        for (unsigned long long i = 0; i < count; i++) {
            struct rng_stream rng;

            rng_stream_init(&rng, seed, 0, i);
            hits += aug_draw_coin(&rng, p);
        }
        printf("%llu\n", hits);
        return 0;
    }
    if (argc != 8 || strcmp(argv[1], "apply") != 0)
        return usage();
    im.c = (uint32_t)atoi(argv[3]);
    im.h = (uint32_t)atoi(argv[4]);
    im.w = (uint32_t)atoi(argv[5]);
    im.layout = strcmp(argv[6], "hwc") == 0 ? AUG_HWC : AUG_CHW;
    n = (size_t)im.c * im.h * im.w;
    px = malloc(n ? n : 1);
    if (!px || fread(px, 1, n, stdin) != n)
        return usage();
    im.px = px;
    if (strcmp(argv[2], "hflip") == 0)
        aug_hflip(&im);
    else if (strcmp(argv[2], "vflip") == 0)
        aug_vflip(&im);
    else if (strcmp(argv[2], "invert") == 0)
        aug_invert(&im);
    else if (strcmp(argv[2], "posterize") == 0)
        aug_posterize(&im, (unsigned)atoi(argv[7]));
    else if (strcmp(argv[2], "solarize") == 0)
        aug_solarize(&im, atof(argv[7]));
    else
        return usage();
    if (fwrite(px, 1, n, stdout) != n)
        return 2;
    free(px);
    return 0;
}
