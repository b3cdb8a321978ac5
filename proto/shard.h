/*
 * shard.h - the on-disk layout of one shard file, and pure functions that
 * encode it and check it from a buffer.
 *
 * A shard is a header, the records back to back, and an index with one
 * fixed-size entry per record.  The writer streams the records, appends the
 * index, and finally writes the header (which points at the index), so a
 * reader needs only the header and the index to reach any record: two reads,
 * or one read and a mapping of the index.
 *
 *   byte 0
 *   +---------------------------------------------------------------+
 *   | header (SHARD_HEADER_SIZE = 64 bytes; integers little-endian) |
 *   |   0  magic       8  "RFSHARD\0"                               |
 *   |   8  version     4  SHARD_VERSION (1)                         |
 *   |  12  flags       4  bit 0 SHARD_FLAG_DICT: zstd records use   |
 *   |                     the dataset's dictionary; others are 0    |
 *   |  16  records     8  number of records (and of index entries)  |
 *   |  24  index_off   8  byte offset of the index                  |
 *   |  32  index_len   8  records * SHARD_ENTRY_SIZE                |
 *   |  40  index_crc   4  CRC-32C of the index_len index bytes      |
 *   |  44  codec_mask  4  bit c set: records may use codec id c     |
 *   |  48  dict_id     4  zstd dictionary id with the flag, else 0  |
 *   |  52  shard_no    4  position of this shard in the manifest    |
 *   |  56  reserved    4  0                                         |
 *   |  60  header_crc  4  CRC-32C of bytes 0..59                    |
 *   +---------------------------------------------------------------+ 64
 *   | record 0: stored_len bytes (raw, or zstd frames)              |
 *   | record 1 ...     (records lie in [64, index_off), in any      |
 *   | ...               order: the index says where each one is)    |
 *   +---------------------------------------------------------------+ index_off
 *   | entry 0 (SHARD_ENTRY_SIZE = 32 bytes)                         |
 *   |   0  offset       8  file offset of the stored bytes          |
 *   |   8  stored_len   4  bytes on disk                            |
 *   |  12  decoded_len  4  bytes after decoding (exact output size) |
 *   |  16  label        4  class number, or DATASET_NO_LABEL        |
 *   |  20  crc          4  CRC-32C of the stored bytes              |
 *   |  24  codec        1  codec id (codec.h)                       |
 *   |  25  reserved     3  0                                        |
 *   |  28  entry_crc    4  CRC-32C of entry bytes 0..27             |
 *   | entry 1 ...                                                   |
 *   +---------------------------------------------------------------+ file size
 *                                          == index_off + index_len
 *
 * Invariants a reader checks before trusting anything:
 *   1. magic, version, header_crc; unknown flag or codec bits are errors.
 *   2. index_len == records * 32 without overflow, index_off >= 64, and
 *      index_off + index_len == the file size exactly.
 *   3. index_crc over the whole index, once, when the shard is opened.
 *   4. each entry, every time it is used: entry_crc, reserved bytes zero,
 *      codec in codec_mask, 64 <= offset and offset + stored_len <=
 *      index_off, lengths within the dataset's maxima (which are within
 *      DATASET_RECORD_MAX), stored_len == decoded_len for codec none,
 *      decoded_len == the tensor size for tensors, label < classes.
 *   5. the record's crc, every time its bytes are read.
 * The manifest repeats records, file size and index_crc per shard, so a
 * shard swapped, truncated or rewritten under a dataset is caught at open.
 */
#ifndef RINGFEED_PROTO_SHARD_H
#define RINGFEED_PROTO_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define SHARD_MAGIC       "RFSHARD"   /* 7 characters and the NUL: 8 bytes */
#define SHARD_VERSION     1u
#define SHARD_HEADER_SIZE 64u
#define SHARD_ENTRY_SIZE  32u
#define SHARD_FLAG_DICT   1u
#define SHARD_FLAGS_KNOWN SHARD_FLAG_DICT

struct shard_header {
    uint32_t version;
    uint32_t flags;
    uint64_t records;
    uint64_t index_off;
    uint64_t index_len;
    uint32_t index_crc;
    uint32_t codec_mask;
    uint32_t dict_id;
    uint32_t shard_no;
};

struct shard_entry {
    uint64_t offset;
    uint32_t stored_len;
    uint32_t decoded_len;
    uint32_t label;
    uint32_t crc;
    uint8_t codec;
};

/* What every entry of one shard must satisfy (invariant 4). */
struct shard_limits {
    uint64_t data_end;      /* the header's index_off */
    uint32_t codec_mask;    /* the header's codec_mask */
    uint32_t max_stored;    /* the dataset's maxima, <= DATASET_RECORD_MAX */
    uint32_t max_decoded;
    uint32_t tensor_bytes;  /* exact decoded_len, or 0 for any */
    uint32_t classes;       /* labels < classes; 0: DATASET_NO_LABEL only */
};

/* Writes h into 64 bytes at out, version, magic and header_crc included. */
void shard_header_encode(const struct shard_header *h,
                         uint8_t out[SHARD_HEADER_SIZE]);

/*
 * Reads the header from the first len bytes of a shard of file_size bytes
 * named name (for messages), checking invariants 1 and 2.  Returns 0, or
 * -EBADMSG (-EPROTO for an unknown version, -EFBIG for a layout that does
 * not fit the file) with err naming the shard, "header" and the byte.
 */
int shard_header_decode(const uint8_t *buf, size_t len, uint64_t file_size,
                        const char *name, struct shard_header *h,
                        struct rf_err *err);

/* Writes e into 32 bytes at out, entry_crc included. */
void shard_entry_encode(const struct shard_entry *e,
                        uint8_t out[SHARD_ENTRY_SIZE]);

/*
 * Reads entry `record` from the 32 bytes at p (which sit at file offset
 * `at`) and checks invariant 4 against lim.  Returns 0, or -EBADMSG with err
 * naming the shard, the record and the entry's byte offset.
 */
int shard_entry_decode(const uint8_t *p, const struct shard_limits *lim,
                       const char *name, uint64_t record, uint64_t at,
                       struct shard_entry *e, struct rf_err *err);

#endif
