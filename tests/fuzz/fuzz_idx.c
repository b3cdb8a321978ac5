/*
 * fuzz_idx.c - the IDX header parser (tools/idx.c) on arbitrary bytes:
 * every prefix length must give "need more", an error, or a header whose
 * fields agree with the bytes and stay within the limits.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct idx_header h;
    struct rf_err err;
    int r = idx_parse_header(data, size, &h, &err);

    if (r == -EAGAIN && size >= 4 && size >= h.header_len)
        abort(); /* said "need more" with enough bytes */
    if (r == 0 && (h.header_len > size || h.ndim == 0 ||
                   h.ndim > IDX_MAX_DIMS || h.item_bytes == 0 ||
                   h.item_bytes > DATASET_RECORD_MAX || h.count != h.dims[0]))
        abort();
    return 0;
}
