/*
 * shard.c - encoding and checking of shard headers and index entries (the
 * layout is drawn in shard.h).  Pure functions of byte buffers: no I/O, no
 * allocation, so the fuzz target can call them on anything.
 */
#include "shard.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "codec.h"
#include "crc32c.h"
#include "dataset_types.h"

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void shard_header_encode(const struct shard_header *h,
                         uint8_t out[SHARD_HEADER_SIZE])
{
    memset(out, 0, SHARD_HEADER_SIZE);
    memcpy(out, SHARD_MAGIC, sizeof(SHARD_MAGIC));
    put32(out + 8, SHARD_VERSION);
    put32(out + 12, h->flags);
    put64(out + 16, h->records);
    put64(out + 24, h->index_off);
    put64(out + 32, h->index_len);
    put32(out + 40, h->index_crc);
    put32(out + 44, h->codec_mask);
    put32(out + 48, h->dict_id);
    put32(out + 52, h->shard_no);
    put32(out + 60, crc32c(0, out, 60));
}

int shard_header_decode(const uint8_t *buf, size_t len, uint64_t file_size,
                        const char *name, struct shard_header *h,
                        struct rf_err *err)
{
    uint32_t want, got;
    const uint32_t codecs_known = (1u << DATASET_CODEC_COUNT) - 1;

    if (len < SHARD_HEADER_SIZE || file_size < SHARD_HEADER_SIZE)
        return rf_err_set(err, -EBADMSG,
                          "%s: header at byte 0: file is %" PRIu64
                          " bytes, shorter than the %u-byte header",
                          name, file_size < len ? file_size : (uint64_t)len,
                          SHARD_HEADER_SIZE);
    if (memcmp(buf, SHARD_MAGIC, sizeof(SHARD_MAGIC)) != 0)
        return rf_err_set(err, -EBADMSG,
                          "%s: header at byte 0: bad magic (not a ringfeed "
                          "shard)", name);
    want = get32(buf + 60);
    got = crc32c(0, buf, 60);
    if (want != got)
        return rf_err_set(err, -EBADMSG,
                          "%s: header at byte 0: checksum mismatch (header "
                          "says %08x, bytes 0..59 give %08x): header corrupt",
                          name, want, got);
    h->version = get32(buf + 8);
    h->flags = get32(buf + 12);
    h->records = get64(buf + 16);
    h->index_off = get64(buf + 24);
    h->index_len = get64(buf + 32);
    h->index_crc = get32(buf + 40);
    h->codec_mask = get32(buf + 44);
    h->dict_id = get32(buf + 48);
    h->shard_no = get32(buf + 52);
    if (h->version != SHARD_VERSION)
        return rf_err_set(err, -EPROTO,
                          "%s: header at byte 8: format version %" PRIu32
                          ", this reader knows version %u: repack or "
                          "upgrade", name, h->version, SHARD_VERSION);
    if (h->flags & ~SHARD_FLAGS_KNOWN)
        return rf_err_set(err, -EBADMSG,
                          "%s: header at byte 12: unknown flags %08" PRIx32,
                          name, h->flags);
    if (h->codec_mask & ~codecs_known)
        return rf_err_set(err, -EBADMSG,
                          "%s: header at byte 44: unknown codecs in mask "
                          "%08" PRIx32, name, h->codec_mask);
    if (!(h->flags & SHARD_FLAG_DICT) && h->dict_id != 0)
        return rf_err_set(err, -EBADMSG,
                          "%s: header at byte 48: dictionary id %" PRIu32
                          " without the dictionary flag", name, h->dict_id);
    if (get32(buf + 56) != 0)
        return rf_err_set(err, -EBADMSG,
                          "%s: header at byte 56: reserved word is not zero",
                          name);
    if (h->records > UINT64_MAX / SHARD_ENTRY_SIZE ||
        h->index_len != h->records * SHARD_ENTRY_SIZE)
        return rf_err_set(err, -EFBIG,
                          "%s: header at byte 32: index length %" PRIu64
                          " is not %" PRIu64 " records x %u bytes",
                          name, h->index_len, h->records, SHARD_ENTRY_SIZE);
    if (h->index_off < SHARD_HEADER_SIZE || h->index_off > file_size ||
        h->index_len != file_size - h->index_off)
        return rf_err_set(err, -EFBIG,
                          "%s: header at byte 24: index at byte %" PRIu64
                          ", %" PRIu64 " bytes long, does not end the %"
                          PRIu64 "-byte file: truncated or corrupt",
                          name, h->index_off, h->index_len, file_size);
    return 0;
}

void shard_entry_encode(const struct shard_entry *e,
                        uint8_t out[SHARD_ENTRY_SIZE])
{
    memset(out, 0, SHARD_ENTRY_SIZE);
    put64(out, e->offset);
    put32(out + 8, e->stored_len);
    put32(out + 12, e->decoded_len);
    put32(out + 16, e->label);
    put32(out + 20, e->crc);
    out[24] = e->codec;
    put32(out + 28, crc32c(0, out, 28));
}

#define ENTRY_FAIL(...) \
    rf_err_set(err, -EBADMSG, "%s: record %" PRIu64 " (index entry at byte %" \
               PRIu64 "): " __VA_ARGS__)

int shard_entry_decode(const uint8_t *p, const struct shard_limits *lim,
                       const char *name, uint64_t record, uint64_t at,
                       struct shard_entry *e, struct rf_err *err)
{
    uint32_t want = get32(p + 28), got = crc32c(0, p, 28);

    if (want != got)
        return ENTRY_FAIL("entry checksum mismatch (entry says %08x, bytes "
                          "give %08x): index corrupt", name, record, at, want,
                          got);
    e->offset = get64(p);
    e->stored_len = get32(p + 8);
    e->decoded_len = get32(p + 12);
    e->label = get32(p + 16);
    e->crc = get32(p + 20);
    e->codec = p[24];
    if (p[25] | p[26] | p[27])
        return ENTRY_FAIL("reserved bytes are not zero", name, record, at);
    if (e->codec >= 32 || !(lim->codec_mask & (1u << e->codec)))
        return ENTRY_FAIL("codec %u is not one this shard declares (mask %08"
                          PRIx32 ")", name, record, at, e->codec,
                          lim->codec_mask);
    /* data_end <= file size < 2^63 in practice; compare without adding */
    if (e->offset < SHARD_HEADER_SIZE || e->offset > lim->data_end ||
        e->stored_len > lim->data_end - e->offset)
        return ENTRY_FAIL("%" PRIu32 " stored bytes at byte %" PRIu64
                          " fall outside the record area [%u, %" PRIu64 ")",
                          name, record, at, e->stored_len, e->offset,
                          SHARD_HEADER_SIZE, lim->data_end);
    if (e->stored_len > lim->max_stored)
        return ENTRY_FAIL("stored length %" PRIu32 " exceeds the dataset's "
                          "maximum %" PRIu32, name, record, at, e->stored_len,
                          lim->max_stored);
    if (e->decoded_len > lim->max_decoded)
        return ENTRY_FAIL("decoded length %" PRIu32 " exceeds the dataset's "
                          "maximum %" PRIu32, name, record, at,
                          e->decoded_len, lim->max_decoded);
    if (e->codec == DATASET_CODEC_NONE && e->stored_len != e->decoded_len)
        return ENTRY_FAIL("codec none with stored length %" PRIu32
                          " != decoded length %" PRIu32, name, record, at,
                          e->stored_len, e->decoded_len);
    if (lim->tensor_bytes && e->decoded_len != lim->tensor_bytes)
        return ENTRY_FAIL("decoded length %" PRIu32 " is not the tensor "
                          "size %" PRIu32, name, record, at, e->decoded_len,
                          lim->tensor_bytes);
    if (lim->classes ? e->label >= lim->classes
                     : e->label != DATASET_NO_LABEL)
        return ENTRY_FAIL("label %" PRIu32 " out of range (%" PRIu32
                          " classes)", name, record, at, e->label,
                          lim->classes);
    return 0;
}
