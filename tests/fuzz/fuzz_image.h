/*
 * fuzz_image.h - the body of the image decoders' fuzz targets
 * (fuzz_png.c, fuzz_webp.c, fuzz_tiff.c, fuzz_bmp_pnm.c): arbitrary bytes
 * to imgdec_decode as one format, under a small pixel cap.  A success must
 * give pixels of a size within the cap, every byte of them readable; a
 * failure must leave no pixels and say why.
 */
#ifndef RINGFEED_TESTS_FUZZ_IMAGE_H
#define RINGFEED_TESTS_FUZZ_IMAGE_H

#include <stdint.h>
#include <stdlib.h>

#include "image_decode.h"

#define FUZZ_IMAGE_PIXELS (1u << 20)

static inline void fuzz_image(enum imgdec_format f, const uint8_t *data,
                              size_t size)
{
    struct imgdec_image im;
    char why[256];
    unsigned sum = 0;
    int r = imgdec_decode(f, data, size, FUZZ_IMAGE_PIXELS, &im, why,
                          sizeof(why));

    if (r < 0) {
        if (im.rgb || why[0] == '\0')
            abort();
        return;
    }
    if (!im.rgb || im.width == 0 || im.height == 0 ||
        (uint64_t)im.width * im.height > FUZZ_IMAGE_PIXELS)
        abort();
    for (size_t i = 0; i < (size_t)im.width * im.height * 3; i++)
        sum += im.rgb[i];   /* every pixel byte is readable (ASan) */
    if (sum > (size_t)im.width * im.height * 3 * 255u)
        abort();            /* cannot happen; keeps the loop */
    imgdec_image_free(&im);
}

#endif
