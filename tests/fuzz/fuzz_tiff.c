/*
 * fuzz_tiff.c - tools/image_decode.c's TIFF decoder on arbitrary bytes
 * (fuzz_image.h says what must hold).
 */
#include "fuzz_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_image(IMGDEC_TIFF, data, size);
    return 0;
}
