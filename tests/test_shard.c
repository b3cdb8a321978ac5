/*
 * test_shard.c - the shard header and index entry codecs (shard.h): round
 * trips, and each invariant refused with the shard, record and byte named.
 */
#include <errno.h>
#include <string.h>

#include "codec.h"
#include "crc32c.h"
#include "dataset_types.h"
#include "shard.h"
#include "tap.h"

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

/* Re-seals a hand-edited header so only the field checks can catch it. */
static void reseal_header(uint8_t *h)
{
    put32(h + 60, crc32c(0, h, 60));
}

static void reseal_entry(uint8_t *e)
{
    put32(e + 28, crc32c(0, e, 28));
}

static const struct shard_header base_hdr = {
    .flags = 0,
    .records = 10,
    .index_off = 64 + 1000,
    .index_len = 10 * SHARD_ENTRY_SIZE,
    .index_crc = 0x11223344,
    .codec_mask = 3,
    .shard_no = 7,
};
#define BASE_FILE_SIZE (64 + 1000 + 10 * SHARD_ENTRY_SIZE)

static void expect_header_error(const uint8_t *h, uint64_t file_size,
                                int code, const char *what, const char *name)
{
    struct shard_header d;
    struct rf_err e = {{0}};
    int r = shard_header_decode(h, SHARD_HEADER_SIZE, file_size, "s.rfs", &d,
                                &e);

    if (!tap_ok(r == code && strstr(e.msg, what) &&
                strncmp(e.msg, "s.rfs: header at byte ", 22) == 0,
                "header refused: %s", name))
        tap_diag("  got %d \"%s\", want %d and \"%s\"", r, e.msg, code, what);
}

static void check_header(void)
{
    uint8_t h[SHARD_HEADER_SIZE], x[SHARD_HEADER_SIZE];
    struct shard_header d;
    struct rf_err e = {{0}};

    shard_header_encode(&base_hdr, h);
    TAP_OK(memcmp(h, "RFSHARD\0", 8) == 0, "magic at byte 0");
    TAP_IS_INT(shard_header_decode(h, sizeof(h), BASE_FILE_SIZE, "s.rfs", &d,
                                   &e), 0, "header round trip");
    TAP_IS_INT(d.records, 10, "records");
    TAP_IS_INT(d.index_off, 1064, "index_off");
    TAP_IS_INT(d.index_crc, 0x11223344, "index_crc");
    TAP_IS_INT(d.shard_no, 7, "shard_no");
    TAP_IS_INT(d.version, SHARD_VERSION, "version");

    TAP_IS_INT(shard_header_decode(h, 10, BASE_FILE_SIZE, "s.rfs", &d, &e),
               -EBADMSG, "short buffer refused");
    expect_header_error(h, 40, -EBADMSG, "shorter than", "file of 40 bytes");

    memcpy(x, h, sizeof(x));
    x[0] = 'X';
    expect_header_error(x, BASE_FILE_SIZE, -EBADMSG, "bad magic", "magic");
    memcpy(x, h, sizeof(x));
    x[20] ^= 0x40;
    expect_header_error(x, BASE_FILE_SIZE, -EBADMSG, "checksum mismatch",
                        "flipped bit");
    memcpy(x, h, sizeof(x));
    put32(x + 8, 2);
    reseal_header(x);
    expect_header_error(x, BASE_FILE_SIZE, -EPROTO, "version 2", "version");
    memcpy(x, h, sizeof(x));
    put32(x + 12, 0x80);
    reseal_header(x);
    expect_header_error(x, BASE_FILE_SIZE, -EBADMSG, "unknown flags", "flags");
    memcpy(x, h, sizeof(x));
    put32(x + 44, 0x4);
    reseal_header(x);
    expect_header_error(x, BASE_FILE_SIZE, -EBADMSG, "unknown codecs",
                        "codec mask");
    memcpy(x, h, sizeof(x));
    put32(x + 48, 99);
    reseal_header(x);
    expect_header_error(x, BASE_FILE_SIZE, -EBADMSG, "without the dictionary",
                        "dict id without flag");
    memcpy(x, h, sizeof(x));
    put32(x + 56, 1);
    reseal_header(x);
    expect_header_error(x, BASE_FILE_SIZE, -EBADMSG, "reserved", "reserved");
    /* forged sizes: the checksum is right, only the bounds can catch them */
    memcpy(x, h, sizeof(x));
    put64(x + 16, 1ull << 60);
    put64(x + 32, (1ull << 60) * 32); /* wraps to 0 in 64 bits */
    reseal_header(x);
    expect_header_error(x, BASE_FILE_SIZE, -EFBIG, "index length",
                        "records * 32 overflowing");
    memcpy(x, h, sizeof(x));
    put64(x + 16, 0xffffffffffffffffull);
    reseal_header(x);
    expect_header_error(x, BASE_FILE_SIZE, -EFBIG, "index length",
                        "records = 2^64-1");
    memcpy(x, h, sizeof(x));
    put64(x + 24, 0xffffffffffffff00ull);
    reseal_header(x);
    expect_header_error(x, BASE_FILE_SIZE, -EFBIG, "does not end the",
                        "index offset near 2^64");
    memcpy(x, h, sizeof(x));
    put64(x + 24, 10);
    reseal_header(x);
    expect_header_error(x, BASE_FILE_SIZE, -EFBIG, "does not end the",
                        "index offset inside the header");
    expect_header_error(h, BASE_FILE_SIZE - 1, -EFBIG, "truncated",
                        "file one byte short");
    expect_header_error(h, BASE_FILE_SIZE + 1, -EFBIG, "does not end the",
                        "file one byte long");
}

static const struct shard_limits lim = {
    .data_end = 1064,
    .codec_mask = 3,
    .max_stored = 600,
    .max_decoded = 784,
    .tensor_bytes = 0,
    .classes = 10,
};

static void expect_entry_error(const uint8_t *p, const struct shard_limits *l,
                               const char *what, const char *name)
{
    struct shard_entry d;
    struct rf_err e = {{0}};
    int r = shard_entry_decode(p, l, "s.rfs", 4, 1064 + 4 * 32, &d, &e);

    if (!tap_ok(r == -EBADMSG && strstr(e.msg, what) &&
                strstr(e.msg, "s.rfs: record 4 (index entry at byte 1192)"),
                "entry refused: %s", name))
        tap_diag("  got %d \"%s\", want \"%s\"", r, e.msg, what);
}

static void check_entry(void)
{
    const struct shard_entry ent = {
        .offset = 500, .stored_len = 300, .decoded_len = 784, .label = 9,
        .crc = 0xabcdef01, .codec = DATASET_CODEC_ZSTD};
    uint8_t p[SHARD_ENTRY_SIZE], x[SHARD_ENTRY_SIZE];
    struct shard_entry d;
    struct shard_limits l;
    struct rf_err e = {{0}};

    shard_entry_encode(&ent, p);
    TAP_IS_INT(shard_entry_decode(p, &lim, "s.rfs", 4, 1192, &d, &e), 0,
               "entry round trip");
    TAP_IS_INT(d.offset, 500, "offset");
    TAP_IS_INT(d.stored_len, 300, "stored_len");
    TAP_IS_INT(d.decoded_len, 784, "decoded_len");
    TAP_IS_INT(d.label, 9, "label");
    TAP_IS_INT(d.crc, 0xabcdef01, "crc");
    TAP_IS_INT(d.codec, DATASET_CODEC_ZSTD, "codec");

    memcpy(x, p, sizeof(x));
    x[3] ^= 1;
    expect_entry_error(x, &lim, "entry checksum mismatch", "flipped bit");
    memcpy(x, p, sizeof(x));
    x[26] = 1;
    reseal_entry(x);
    expect_entry_error(x, &lim, "reserved", "reserved byte");
    memcpy(x, p, sizeof(x));
    x[24] = 5;
    reseal_entry(x);
    expect_entry_error(x, &lim, "codec 5", "unknown codec");
    l = lim;
    l.codec_mask = 1;
    expect_entry_error(p, &l, "codec 1 is not one", "codec not in the mask");
    memcpy(x, p, sizeof(x));
    put64(x, 0xffffffffffffff00ull);
    reseal_entry(x);
    expect_entry_error(x, &lim, "outside the record area", "offset near 2^64");
    memcpy(x, p, sizeof(x));
    put64(x, 10);
    reseal_entry(x);
    expect_entry_error(x, &lim, "outside the record area", "offset in header");
    memcpy(x, p, sizeof(x));
    put32(x + 8, 0xfffffff0u);
    reseal_entry(x);
    expect_entry_error(x, &lim, "outside the record area", "huge stored_len");
    memcpy(x, p, sizeof(x));
    put64(x, 1064 - 299);
    reseal_entry(x);
    expect_entry_error(x, &lim, "outside the record area",
                       "record one byte into the index");
    memcpy(x, p, sizeof(x));
    put64(x, 1064 - 300);
    reseal_entry(x);
    TAP_IS_INT(shard_entry_decode(x, &lim, "s.rfs", 4, 1192, &d, &e), 0,
               "record ending exactly at the index is fine");
    l = lim;
    l.max_stored = 299;
    expect_entry_error(p, &l, "stored length 300 exceeds", "over max_stored");
    memcpy(x, p, sizeof(x));
    put32(x + 12, 0x7fffffffu);
    reseal_entry(x);
    expect_entry_error(x, &lim, "decoded length 2147483647 exceeds",
                       "huge decoded_len");
    l = lim;
    l.tensor_bytes = 783;
    expect_entry_error(p, &l, "not the tensor size", "tensor size");
    memcpy(x, p, sizeof(x));
    x[24] = DATASET_CODEC_NONE;
    reseal_entry(x);
    expect_entry_error(x, &lim, "codec none with stored length",
                       "none with different lengths");
    memcpy(x, p, sizeof(x));
    put32(x + 16, 10);
    reseal_entry(x);
    expect_entry_error(x, &lim, "label 10 out of range", "label = classes");
    l = lim;
    l.classes = 0;
    expect_entry_error(p, &l, "label 9 out of range", "label without classes");
    memcpy(x, p, sizeof(x));
    put32(x + 16, DATASET_NO_LABEL);
    reseal_entry(x);
    TAP_IS_INT(shard_entry_decode(x, &l, "s.rfs", 4, 1192, &d, &e), 0,
               "no label without classes is fine");
}

int main(void)
{
    check_header();
    check_entry();
    return tap_done();
}
