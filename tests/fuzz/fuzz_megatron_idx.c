/*
 * fuzz_megatron_idx.c - the Megatron-LM .idx reader (tools/megatron_idx.c)
 * on arbitrary bytes: megatron_idx_parse refuses with a message or places
 * arrays that fill the input exactly; megatron_idx_check, against .bin
 * sizes around the input's, refuses with a message or vouches for
 * sequences inside the .bin and a doc_idx from 0 up to S, which is
 * checked again here element by element.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "megatron_idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct megatron_idx h;
    struct rf_err err = {{0}};
    const uint64_t bins[] = {0, 1, size, (uint64_t)size * 4, UINT64_MAX / 2};
    int r = megatron_idx_parse(data, size, &h, &err);

    if (r < 0) {
        if (r != -EBADMSG || err.msg[0] == '\0')
            abort();
        return 0;
    }
    if (h.itemsize == 0 || h.doc_entries == 0 || h.sizes_off != MEGATRON_IDX_HEADER ||
        h.doc_idx_off + h.doc_entries * 8 != size)
        abort();
    for (unsigned b = 0; b < sizeof(bins) / sizeof(bins[0]); b++) {
        err.msg[0] = '\0';
        r = megatron_idx_check(data, &h, bins[b], &err);
        if (r < 0) {
            if (r != -EBADMSG || err.msg[0] == '\0')
                abort();
            continue;
        }
        for (uint64_t i = 0; i < h.sequences; i++) {
            int64_t at = megatron_idx_pointer(data, &h, i);
            int32_t n = megatron_idx_size(data, &h, i);

            if (n < 0 || at < 0 || (uint64_t)at + (uint64_t)n * h.itemsize > bins[b])
                abort();
        }
        if (megatron_idx_doc(data, &h, 0) != 0 ||
            (uint64_t)megatron_idx_doc(data, &h, h.doc_entries - 1) != h.sequences)
            abort();
    }
    return 0;
}
