/*
 * test_megatron_idx.c - the Megatron-LM .idx reader (tools/megatron_idx.c):
 * a file as Megatron-core writes it parses to its figures and arrays; each
 * fault (magic, version, code, counts past the file, bytes after, a
 * sequence past the .bin, a negative size, doc_idx not from 0 up to S) is
 * refused with a message naming it.  Also writes the fuzz seeds when
 * given a folder (tests/fuzz/corpus/megatron_idx).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "megatron_idx.h"
#include "tap.h"

/* An index of S sequences of sizes[] u16 tokens, packed back to back,
 * and D doc_idx entries; returns its length. */
static size_t make(uint8_t *buf, uint8_t code, uint64_t s, const int32_t *sizes, uint64_t d,
                   const int64_t *docs)
{
    size_t at = 0;
    int64_t ptr = 0;

    memcpy(buf, "MMIDIDX\0\0", 9);
    at = 9;
    for (int i = 0; i < 8; i++)
        buf[at++] = i == 0 ? 1 : 0;
    buf[at++] = code;
    for (int i = 0; i < 8; i++)
        buf[at++] = (uint8_t)(s >> (8 * i));
    for (int i = 0; i < 8; i++)
        buf[at++] = (uint8_t)(d >> (8 * i));
    for (uint64_t i = 0; i < s; i++)
        for (int b = 0; b < 4; b++)
            buf[at++] = (uint8_t)((uint32_t)sizes[i] >> (8 * b));
    for (uint64_t i = 0; i < s; i++) {
        for (int b = 0; b < 8; b++)
            buf[at++] = (uint8_t)((uint64_t)ptr >> (8 * b));
        ptr += (int64_t)sizes[i] * 2;
    }
    for (uint64_t i = 0; i < d; i++)
        for (int b = 0; b < 8; b++)
            buf[at++] = (uint8_t)((uint64_t)docs[i] >> (8 * b));
    return at;
}

static void seed(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (f) {
        fwrite(p, 1, n, f);
        fclose(f);
    }
}

int main(int argc, char **argv)
{
    static const int32_t sizes[3] = {5, 0, 7};
    static const int64_t docs[3] = {0, 2, 3};
    uint8_t buf[512], bad[512];
    struct megatron_idx h;
    struct rf_err err = {{0}};
    size_t n = make(buf, 8, 3, sizes, 3, docs);

    tap_ok(megatron_idx_parse(buf, n, &h, &err) == 0 && h.dtype == DATASET_DTYPE_U16 &&
           h.itemsize == 2 && h.sequences == 3 && h.doc_entries == 3,
           "a u16 index of 3 sequences and 2 documents parses");
    tap_ok(megatron_idx_size(buf, &h, 2) == 7 && megatron_idx_pointer(buf, &h, 2) == 10 &&
           megatron_idx_doc(buf, &h, 1) == 2, "its arrays read back");
    tap_ok(megatron_idx_check(buf, &h, 24, &err) == 0, "it fits a .bin of 24 bytes");
    tap_ok(megatron_idx_check(buf, &h, 23, &err) == -EBADMSG && strstr(err.msg, "sequence 2"),
           "a .bin one byte short is refused naming the sequence: %s", err.msg);

    memcpy(bad, buf, n);
    bad[3] = 'X';
    tap_ok(megatron_idx_parse(bad, n, &h, &err) == -EBADMSG && strstr(err.msg, "magic"),
           "bad magic: %s", err.msg);
    memcpy(bad, buf, n);
    bad[9] = 2;
    tap_ok(megatron_idx_parse(bad, n, &h, &err) == -EBADMSG && strstr(err.msg, "version 2"),
           "version 2: %s", err.msg);
    memcpy(bad, buf, n);
    bad[17] = 9;
    tap_ok(megatron_idx_parse(bad, n, &h, &err) == -EBADMSG && strstr(err.msg, "code 9"),
           "code 9: %s", err.msg);
    memcpy(bad, buf, n);
    bad[18 + 6] = 1; /* S = 2^48 + 3 */
    tap_ok(megatron_idx_parse(bad, n, &h, &err) == -EBADMSG && strstr(err.msg, "byte 18"),
           "a sequence count past the file: %s", err.msg);
    memcpy(bad, buf, n);
    bad[26] = 4;
    tap_ok(megatron_idx_parse(bad, n, &h, &err) == -EBADMSG && strstr(err.msg, "byte 26"),
           "a document count past the file: %s", err.msg);
    memcpy(bad, buf, n);
    bad[n] = 0;
    tap_ok(megatron_idx_parse(bad, n + 1, &h, &err) == -EBADMSG && strstr(err.msg, "after"),
           "a byte after the arrays: %s", err.msg);
    tap_ok(megatron_idx_parse(buf, 20, &h, &err) == -EBADMSG && strstr(err.msg, "header"),
           "a cut header: %s", err.msg);
    {
        static const int32_t neg[3] = {5, -1, 7};
        size_t m = make(bad, 8, 3, neg, 3, docs);

        tap_ok(megatron_idx_parse(bad, m, &h, &err) == 0 &&
               megatron_idx_check(bad, &h, 1 << 20, &err) == -EBADMSG &&
               strstr(err.msg, "sequence 1") && strstr(err.msg, "negative"),
               "a negative size: %s", err.msg);
    }
    {
        static const int64_t d1[3] = {1, 2, 3}, d2[3] = {0, 3, 2}, d3[3] = {0, 1, 2};
        size_t m = make(bad, 8, 3, sizes, 3, d1);

        tap_ok(megatron_idx_parse(bad, m, &h, &err) == 0 &&
               megatron_idx_check(bad, &h, 24, &err) == -EBADMSG && strstr(err.msg, "entry 0"),
               "doc_idx not starting at 0: %s", err.msg);
        m = make(bad, 8, 3, sizes, 3, d2);
        tap_ok(megatron_idx_parse(bad, m, &h, &err) == 0 &&
               megatron_idx_check(bad, &h, 24, &err) == -EBADMSG && strstr(err.msg, "entry 2"),
               "doc_idx going down: %s", err.msg);
        m = make(bad, 8, 3, sizes, 3, d3);
        tap_ok(megatron_idx_parse(bad, m, &h, &err) == 0 &&
               megatron_idx_check(bad, &h, 24, &err) == -EBADMSG && strstr(err.msg, "ends"),
               "doc_idx short of S: %s", err.msg);
    }
    n = make(buf, 7, 3, sizes, 3, docs);
    tap_ok(megatron_idx_parse(buf, n, &h, &err) == 0 && !h.is_integer &&
           h.dtype == DATASET_DTYPE_F32, "code 7 is float32, not a token type");
    if (argc == 2) {
        static const int64_t d4[3] = {0, 1, 3};

        seed(argv[1], "u16_3seq.idx", buf, make(buf, 8, 3, sizes, 3, docs));
        seed(argv[1], "i32_2doc.idx", buf, make(buf, 4, 3, sizes, 3, d4));
        seed(argv[1], "empty.idx", buf, make(buf, 8, 0, sizes, 1, docs));
        memcpy(bad, "MMIDIDX\0\0", 9);
        seed(argv[1], "bad.idx", bad, 30);
    }
    return tap_done();
}
