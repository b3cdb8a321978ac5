/*
 * fuzz_npy.c - fuzz target for proto/npy.h: npy_parse either refuses with
 * a message or gives a header whose figures agree (a known kind and size,
 * the count the shape's product, the data after the header and inside
 * the input when the input's size is given as the file's), and parses
 * the same bytes alike again.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct npy_header h, h2;
    struct rf_err err = {{0}};
    uint64_t count = 1;
    int r = npy_parse(data, size, size, &h, &err);

    if (r < 0) {
        if ((r != -EINVAL && r != -EPROTO && r != -EOVERFLOW) || err.msg[0] == '\0')
            abort();
        return 0;
    }
    if (!strchr("biuf", h.kind) || (h.itemsize != 1 && h.itemsize != 2 && h.itemsize != 4 &&
                                    h.itemsize != 8) || h.ndim > NPY_DIMS_MAX)
        abort();
    for (uint32_t i = 0; i < h.ndim; i++)
        count *= h.shape[i];
    if (count != h.count || h.data_bytes != h.count * h.itemsize ||
        h.data_off + h.data_bytes != size || h.data_off > size)
        abort();
    if (npy_parse(data, size, size, &h2, NULL) != 0 || memcmp(&h, &h2, sizeof(h)) != 0)
        abort();
    return 0;
}
