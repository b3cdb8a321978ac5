/*
 * fuzz_bmp_pnm.c - tools/image_decode.c's BMP and PNM decoders (their
 * header checks, then stb_image) on arbitrary bytes, each input given to
 * both (fuzz_image.h says what must hold).
 */
#include "fuzz_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_image(IMGDEC_BMP, data, size);
    fuzz_image(IMGDEC_PNM, data, size);
    return 0;
}
