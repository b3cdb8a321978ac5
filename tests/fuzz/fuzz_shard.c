/*
 * fuzz_shard.c - shard header and index validation on arbitrary bytes.
 *
 * The input is a whole shard file.  The target decodes the header against
 * the input's length, checks the index checksum, then decodes and checks
 * every entry (at most 4096) and, for the entries that pass, checksums the
 * record and decodes it with its codec into a buffer of exactly the decoded
 * length.  The limits below cap lengths at 1 MiB, so no input can make the
 * target read outside it or allocate more than that.
 *
 * Checksums stop almost every mutation at the first check, so each input
 * is run twice: as it is, and "re-sealed", with the header, entry and
 * record checksums recomputed the way a forger would, so mutated fields
 * reach the bounds checks and mutated records reach the zstd decoder.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "crc32c.h"
#include "dataset_types.h"
#include "shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct codec_dctx *dctx;

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void check(const uint8_t *data, size_t size)
{
    struct shard_header h;
    struct shard_limits lim;
    struct rf_err err;
    uint64_t n;

    if (shard_header_decode(data, size, size, "fuzz.rfs", &h, &err) < 0)
        return;
    /* the reader refuses a bad index checksum at open; go on anyway, so
     * mutated entries reach the entry checks */
    (void)(crc32c(0, data + h.index_off, (size_t)h.index_len) == h.index_crc);
    lim = (struct shard_limits){
        .data_end = h.index_off,
        .codec_mask = h.codec_mask,
        .max_stored = 1u << 20,
        .max_decoded = 1u << 20,
        .tensor_bytes = 0,
        .classes = 1000,
    };
    n = h.records < 4096 ? h.records : 4096;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t at = h.index_off + i * SHARD_ENTRY_SIZE;
        struct shard_entry e;
        const char *why;
        uint8_t *out;

        if (shard_entry_decode(data + at, &lim, "fuzz.rfs", i, at, &e,
                               &err) < 0)
            continue;
        if (crc32c(0, data + e.offset, e.stored_len) != e.crc)
            continue;
        out = malloc(e.decoded_len ? e.decoded_len : 1);
        if (!out)
            abort();
        codec_decode(e.codec, dctx, NULL, data + e.offset, e.stored_len, out,
                     e.decoded_len, &why);
        free(out);
    }
}

/* Recomputes every checksum a forger could, within the buffer's bounds. */
static void reseal(uint8_t *b, size_t size)
{
    uint64_t index_off, records;

    if (size < SHARD_HEADER_SIZE)
        return;
    index_off = get64(b + 24);
    records = get64(b + 16);
    if (index_off < SHARD_HEADER_SIZE || index_off > size)
        goto header;
    for (uint64_t i = 0; i < records && i < 4096 &&
                         (size - index_off) / SHARD_ENTRY_SIZE > i; i++) {
        uint8_t *e = b + index_off + i * SHARD_ENTRY_SIZE;
        uint64_t off = get64(e);
        uint32_t len = (uint32_t)get64(e + 8);

        if (off >= SHARD_HEADER_SIZE && off <= index_off &&
            len <= index_off - off)
            put32(e + 20, crc32c(0, b + off, len));
        put32(e + 28, crc32c(0, e, 28));
    }
    if (records <= (size - index_off) / SHARD_ENTRY_SIZE)
        put32(b + 40, crc32c(0, b + index_off,
                             (size_t)records * SHARD_ENTRY_SIZE));
header:
    put32(b + 60, crc32c(0, b, 60));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy;

    if (!dctx)
        dctx = codec_dctx_new();
    check(data, size);
    copy = malloc(size ? size : 1);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    reseal(copy, size);
    check(copy, size);
    free(copy);
    return 0;
}
