/*
 * idx.h - the header of an IDX file, the format of MNIST and Fashion-MNIST
 * (yann.lecun.com/exdb/mnist), parsed from a buffer.
 *
 *   byte 0..1   0x00 0x00
 *   byte 2      element type: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32,
 *               0x0D f32, 0x0E f64
 *   byte 3      number of dims, n >= 1
 *   byte 4..    n dims, each a big-endian u32; dim 0 counts the items
 *   then        the items, row-major, elements big-endian
 *
 * So "train-images-idx3-ubyte" starts 00 00 08 03, then 60000, 28, 28; its
 * labels file starts 00 00 08 01, then 60000.
 */
#ifndef RINGFEED_TOOLS_IDX_H
#define RINGFEED_TOOLS_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "dataset_types.h"
#include "err.h"

#define IDX_MAX_DIMS (1 + DATASET_MAX_DIMS)

struct idx_header {
    enum dataset_dtype dtype;
    size_t elem;                 /* bytes per element */
    unsigned ndim;               /* including the item count */
    uint32_t dims[IDX_MAX_DIMS];
    size_t header_len;           /* 4 + 4 * ndim */
    uint64_t count;              /* dims[0] */
    uint64_t item_bytes;         /* elem * dims[1] * ... (elem for 1 dim) */
};

/*
 * Parses the header at the start of the len bytes at buf.  Returns 0;
 * -EAGAIN when buf holds less than the whole header (h->header_len then
 * says how many bytes it needs, once the first 4 are there); -EBADMSG with
 * err saying what is wrong (bad magic, unknown type, a zero dim, an item
 * over DATASET_RECORD_MAX bytes or of more than DATASET_MAX_DIMS dims).
 */
int idx_parse_header(const uint8_t *buf, size_t len, struct idx_header *h,
                     struct rf_err *err);

/* Turns n big-endian elements of elem bytes at buf into little-endian. */
void idx_to_le(uint8_t *buf, uint64_t n, size_t elem);

#endif
