/* idx.c - the IDX header parser and element byte order (see idx.h). */
#include "idx.h"

#include <errno.h>
#include <inttypes.h>

static const struct {
    uint8_t code;
    enum dataset_dtype dtype;
} idx_types[] = {
    {0x08, DATASET_DTYPE_U8},  {0x09, DATASET_DTYPE_I8},
    {0x0B, DATASET_DTYPE_I16}, {0x0C, DATASET_DTYPE_I32},
    {0x0D, DATASET_DTYPE_F32}, {0x0E, DATASET_DTYPE_F64},
};

int idx_parse_header(const uint8_t *buf, size_t len, struct idx_header *h,
                     struct rf_err *err)
{
    size_t t;

    h->header_len = 4;
    if (len < 4)
        return -EAGAIN;
    if (buf[0] != 0 || buf[1] != 0)
        return rf_err_set(err, -EBADMSG, "not an IDX file: it starts with "
                          "%02x %02x, not 00 00 (a gzip file named without "
                          ".gz is read fine; is this an IDX file at all?)",
                          buf[0], buf[1]);
    for (t = 0; t < sizeof(idx_types) / sizeof(idx_types[0]); t++)
        if (idx_types[t].code == buf[2])
            break;
    if (t == sizeof(idx_types) / sizeof(idx_types[0]))
        return rf_err_set(err, -EBADMSG, "unknown IDX element type 0x%02x "
                          "at byte 2 (known: 08 u8, 09 i8, 0B i16, 0C i32, "
                          "0D f32, 0E f64)", buf[2]);
    h->dtype = idx_types[t].dtype;
    h->elem = dataset_dtype_size(h->dtype);
    h->ndim = buf[3];
    if (h->ndim == 0 || h->ndim > IDX_MAX_DIMS)
        return rf_err_set(err, -EBADMSG, "%u dims at byte 3: an IDX file "
                          "here needs 1 to %d", h->ndim, IDX_MAX_DIMS);
    h->header_len = 4 + 4 * (size_t)h->ndim;
    if (len < h->header_len)
        return -EAGAIN;
    h->item_bytes = h->elem;
    for (unsigned i = 0; i < h->ndim; i++) {
        const uint8_t *p = buf + 4 + 4 * i;

        h->dims[i] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                     (uint32_t)p[2] << 8 | p[3];
        if (i == 0)
            continue;
        if (h->dims[i] == 0)
            return rf_err_set(err, -EBADMSG, "dim %u (at byte %zu) is 0", i,
                              (size_t)(4 + 4 * i));
        if (h->dims[i] > DATASET_RECORD_MAX ||
            h->item_bytes * h->dims[i] > DATASET_RECORD_MAX)
            return rf_err_set(err, -EBADMSG, "items of dims 1..%u hold more "
                              "than %u bytes", h->ndim - 1,
                              DATASET_RECORD_MAX);
        h->item_bytes *= h->dims[i];
    }
    h->count = h->dims[0];
    return 0;
}

void idx_to_le(uint8_t *buf, uint64_t n, size_t elem)
{
    if (elem < 2)
        return;
    for (uint64_t i = 0; i < n; i++, buf += elem)
        for (size_t a = 0, b = elem - 1; a < b; a++, b--) {
            uint8_t t = buf[a];

            buf[a] = buf[b];
            buf[b] = t;
        }
}
