/*
 * fuzz_pixels.c - the RFPX pixel record's parser (proto/pixels.h) on
 * arbitrary bytes.
 *
 * Whatever the input, px_parse must return without reading past it; when
 * it accepts the input, the record must be exactly px_record_size of its
 * sides, its pixels must lie inside the input, and px_write_header must
 * write back the same 16 header bytes, or the target aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pixels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct px_header h;
    struct rf_err err;
    uint8_t hdr[PX_HEADER_SIZE];
    unsigned sum = 0;

    if (px_parse(data, size, &h, &err) < 0) {
        if (err.msg[0] == '\0')
            abort(); /* a refusal always says why */
        return 0;
    }
    if (!px_is(data, size) || px_record_size(h.width, h.height) != size ||
        h.pixels != data + PX_HEADER_SIZE || h.channels != PX_CHANNELS)
        abort();
    px_write_header(hdr, h.width, h.height);
    if (memcmp(hdr, data, PX_HEADER_SIZE) != 0)
        abort();
    /* every pixel byte is readable */
    for (size_t i = 0; i < (size_t)h.width * h.height * h.channels; i++)
        sum += h.pixels[i];
    (void)sum;
    return 0;
}
