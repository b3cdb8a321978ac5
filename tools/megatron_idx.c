/*
 * megatron_idx.c - the Megatron-LM .idx reader of megatron_idx.h: the
 * header, the arrays' places, and their check against the .bin's size.
 */
#include "megatron_idx.h"

#include <errno.h>
#include <string.h>

static const uint8_t magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

/* The code table: Megatron-core's DType numbers and ringfeed's dtypes. */
static const struct {
    enum dataset_dtype dtype;
    uint32_t itemsize;
    int is_integer;
} codes[] = {
    [1] = {DATASET_DTYPE_U8, 1, 1},  [2] = {DATASET_DTYPE_I8, 1, 1},
    [3] = {DATASET_DTYPE_I16, 2, 1}, [4] = {DATASET_DTYPE_I32, 4, 1},
    [5] = {DATASET_DTYPE_I64, 8, 1}, [6] = {DATASET_DTYPE_F64, 8, 0},
    [7] = {DATASET_DTYPE_F32, 4, 0}, [8] = {DATASET_DTYPE_U16, 2, 1},
};

#define NCODES (sizeof(codes) / sizeof(codes[0]))

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int megatron_idx_parse(const uint8_t *buf, size_t len, struct megatron_idx *h,
                       struct rf_err *err)
{
    uint64_t v, need;

    memset(h, 0, sizeof(*h));
    if (len < MEGATRON_IDX_HEADER)
        return rf_err_set(err, -EBADMSG, "%zu bytes: shorter than the %u-byte header", len,
                          MEGATRON_IDX_HEADER);
    if (memcmp(buf, magic, sizeof(magic)) != 0)
        return rf_err_set(err, -EBADMSG, "byte 0: not a Megatron index (magic "
                          "\"MMIDIDX\\x00\\x00\" missing)");
    v = le64(buf + 9);
    if (v != 1)
        return rf_err_set(err, -EBADMSG, "byte 9: version %llu, only version 1 is read",
                          (unsigned long long)v);
    h->code = buf[17];
    if (h->code == 0 || h->code >= NCODES)
        return rf_err_set(err, -EBADMSG, "byte 17: dtype code %u is none of 1..8", h->code);
    h->dtype = codes[h->code].dtype;
    h->itemsize = codes[h->code].itemsize;
    h->is_integer = codes[h->code].is_integer;
    h->sequences = le64(buf + 18);
    h->doc_entries = le64(buf + 26);
    /* 4 + 8 bytes a sequence, 8 a document entry, all inside len */
    if (h->sequences > (len - MEGATRON_IDX_HEADER) / 12)
        return rf_err_set(err, -EBADMSG, "byte 18: %llu sequences need more than the file's "
                          "%zu bytes", (unsigned long long)h->sequences, len);
    need = MEGATRON_IDX_HEADER + h->sequences * 12;
    if (h->doc_entries > (len - need) / 8)
        return rf_err_set(err, -EBADMSG, "byte 26: %llu document entries need more than the "
                          "file's %zu bytes", (unsigned long long)h->doc_entries, len);
    need += h->doc_entries * 8;
    if (need != len)
        return rf_err_set(err, -EBADMSG, "%llu bytes after the arrays (ending at byte %llu): "
                          "a multimodal index, or not one of a token dataset",
                          (unsigned long long)(len - need), (unsigned long long)need);
    if (h->doc_entries == 0)
        return rf_err_set(err, -EBADMSG, "byte 26: no document entries (doc_idx holds at "
                          "least its first 0)");
    h->sizes_off = MEGATRON_IDX_HEADER;
    h->pointers_off = h->sizes_off + h->sequences * 4;
    h->doc_idx_off = h->pointers_off + h->sequences * 8;
    return 0;
}

int32_t megatron_idx_size(const uint8_t *buf, const struct megatron_idx *h, uint64_t i)
{
    const uint8_t *p = buf + h->sizes_off + i * 4;

    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24);
}

int64_t megatron_idx_pointer(const uint8_t *buf, const struct megatron_idx *h, uint64_t i)
{
    return (int64_t)le64(buf + h->pointers_off + i * 8);
}

int64_t megatron_idx_doc(const uint8_t *buf, const struct megatron_idx *h, uint64_t d)
{
    return (int64_t)le64(buf + h->doc_idx_off + d * 8);
}

int megatron_idx_check(const uint8_t *buf, const struct megatron_idx *h, uint64_t bin_size,
                       struct rf_err *err)
{
    int64_t prev = 0;

    for (uint64_t i = 0; i < h->sequences; i++) {
        int32_t n = megatron_idx_size(buf, h, i);
        int64_t at = megatron_idx_pointer(buf, h, i);

        if (n < 0)
            return rf_err_set(err, -EBADMSG, "sequence %llu: size %d is negative",
                              (unsigned long long)i, n);
        if (at < 0 || (uint64_t)at > bin_size ||
            (uint64_t)n * h->itemsize > bin_size - (uint64_t)at)
            return rf_err_set(err, -EBADMSG, "sequence %llu: %d tokens at byte %lld pass the "
                              "end of the %llu-byte .bin", (unsigned long long)i, n,
                              (long long)at, (unsigned long long)bin_size);
    }
    for (uint64_t d = 0; d < h->doc_entries; d++) {
        int64_t s = megatron_idx_doc(buf, h, d);

        if ((d == 0 && s != 0) || s < prev || (uint64_t)s > h->sequences)
            return rf_err_set(err, -EBADMSG, "doc_idx entry %llu: sequence %lld (entries start "
                              "at 0 and climb to the %llu sequences)", (unsigned long long)d,
                              (long long)s, (unsigned long long)h->sequences);
        prev = s;
    }
    if ((uint64_t)prev != h->sequences)
        return rf_err_set(err, -EBADMSG, "doc_idx ends at sequence %lld, not at the %llu "
                          "sequences: some sequences belong to no document", (long long)prev,
                          (unsigned long long)h->sequences);
    return 0;
}
