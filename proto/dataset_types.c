/* dataset_types.c - the name tables of dataset kinds and tensor dtypes. */
#include "dataset_types.h"

#include <errno.h>
#include <string.h>

#include "ring.h"

static const char *const kind_names[DATASET_KIND_COUNT] = {
    [DATASET_JPEG] = "jpeg",
    [DATASET_TENSOR] = "tensor",
    [DATASET_BYTES] = "bytes",
    [DATASET_FIELDS] = "fields",
};

/* The one description of a tensor element type: its manifest name, its
 * size, and its number in a ring header (tests/test_dataset.c checks the
 * ring numbers are distinct and round-trip). */
static const struct {
    const char *name;
    size_t size;
    uint32_t ring; /* enum ring_dtype */
} dtypes[DATASET_DTYPE_COUNT] = {
    [DATASET_DTYPE_NONE] = {NULL, 0, 0},
    [DATASET_DTYPE_U8] = {"u8", 1, RING_U8},
    [DATASET_DTYPE_I8] = {"i8", 1, RING_I8},
    [DATASET_DTYPE_I16] = {"i16", 2, RING_I16},
    [DATASET_DTYPE_I32] = {"i32", 4, RING_I32},
    [DATASET_DTYPE_F32] = {"f32", 4, RING_F32},
    [DATASET_DTYPE_F64] = {"f64", 8, RING_F64},
    [DATASET_DTYPE_I64] = {"i64", 8, RING_I64},
    [DATASET_DTYPE_F16] = {"f16", 2, RING_F16},
    [DATASET_DTYPE_BF16] = {"bf16", 2, RING_BF16},
    [DATASET_DTYPE_U16] = {"u16", 2, RING_U16},
};

const char *dataset_dtype_names(void)
{
    return "u8 i8 i16 i32 i64 f16 bf16 f32 f64 u16";
}

static int word_is(const char *s, size_t n, const char *word)
{
    return word && strlen(word) == n && memcmp(s, word, n) == 0;
}

const char *dataset_kind_name(enum dataset_kind kind)
{
    return (unsigned)kind < DATASET_KIND_COUNT ? kind_names[kind] : NULL;
}

int dataset_kind_parse(const char *s, size_t n)
{
    for (int k = 0; k < DATASET_KIND_COUNT; k++)
        if (word_is(s, n, kind_names[k]))
            return k;
    return -EINVAL;
}

const char *dataset_dtype_name(enum dataset_dtype dtype)
{
    return (unsigned)dtype < DATASET_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

size_t dataset_dtype_size(enum dataset_dtype dtype)
{
    return (unsigned)dtype < DATASET_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

int dataset_dtype_parse(const char *s, size_t n)
{
    for (int d = 0; d < DATASET_DTYPE_COUNT; d++)
        if (word_is(s, n, dtypes[d].name))
            return d;
    return -EINVAL;
}

uint32_t dataset_dtype_ring(enum dataset_dtype dtype)
{
    return (unsigned)dtype < DATASET_DTYPE_COUNT ? dtypes[dtype].ring : 0;
}

int dataset_dtype_from_ring(uint32_t ring)
{
    for (int d = 0; d < DATASET_DTYPE_COUNT; d++)
        if (ring != 0 && dtypes[d].ring == ring)
            return d;
    return -EINVAL;
}

uint64_t dataset_tensor_bytes(enum dataset_dtype dtype, const uint64_t *dims,
                              unsigned ndim)
{
    uint64_t n = dataset_dtype_size(dtype);

    if (n == 0 || ndim == 0 || ndim > DATASET_MAX_DIMS)
        return 0;
    for (unsigned i = 0; i < ndim; i++) {
        /* n and dims[i] both <= RECORD_MAX keeps the product in 60 bits */
        if (dims[i] == 0 || dims[i] > DATASET_RECORD_MAX)
            return 0;
        n *= dims[i];
        if (n > DATASET_RECORD_MAX)
            return 0;
    }
    return n;
}
