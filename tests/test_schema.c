/*
 * test_schema.c - a sample's fields (proto/schema.c): every kind and option
 * parses and formats back to the same line; every rule refuses what it
 * should with a message naming the field; records split at their length
 * words and are refused truncated, past their end, with trailing bytes,
 * ragged parts not a whole number of rows or over max, and empty images
 * (an empty ragged or bytes part is fine); schema_legacy gives the
 * implicit fields of jpeg and tensor datasets; a kind-fields MANIFEST
 * formats and parses back with the same schema.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "schema.h"
#include "tap.h"

/* Parses lines (n of them) into s and checks it; 0 or the first error. */
static int build(struct schema *s, const char *const *lines, size_t n, struct rf_err *err)
{
    memset(s, 0, sizeof(*s));
    for (size_t i = 0; i < n; i++) {
        struct schema_field f;
        char of[SCHEMA_NAME_MAX + 1];
        int r = schema_field_parse(lines[i], strlen(lines[i]), &f, of, err);

        if (r < 0 || (r = schema_add(s, &f, of, err)) < 0)
            return r;
    }
    return schema_check(s, err);
}

static const char *const every[] = {
    "image image",
    "image2 image shape=480x640",
    "mask image channels=1 mask=image",
    "depth image dtype=u16 channels=1 mask=image",
    "gray image channels=1",
    "boxes ragged dtype=f32 shape=4 max=50 boxes=image",
    "tokens ragged dtype=i32 max=2048 cap=65536",
    "pts ragged dtype=f16 shape=3x2 max=7",
    "caption bytes max=312",
    "blob bytes max=9 cap=100",
    "emb tensor dtype=bf16 shape=512",
    "vol tensor dtype=u16 shape=2x3x4",
    "label scalar",
    "weight scalar dtype=f64",
    "classes ragged dtype=i64 max=50 rows=boxes",
};

static void check_round_trip(void)
{
    struct schema s, t;
    struct rf_err err;
    size_t n = sizeof(every) / sizeof(every[0]);
    int r = build(&s, every, n, &err);

    tap_ok(r == 0, "every kind and option parses and checks (%s)", r ? err.msg : "ok");
    for (uint32_t i = 0; i < s.n; i++) {
        char line[SCHEMA_LINE_MAX];
        int len = schema_field_format(&s, i, line, sizeof(line));

        tap_ok(len > 0 && (size_t)len == strlen(every[i]) && strcmp(line, every[i]) == 0,
               "field %u formats back: \"%s\"", i, len > 0 ? line : "(error)");
    }
    /* options in another order parse to the same field */
    {
        static const char *const shuffled[] = {
            "image image",
            "boxes ragged boxes=image max=50 shape=4 dtype=f32",
        };
        r = build(&t, shuffled, 2, &err);
        tap_ok(r == 0 && memcmp(&t.f[1], &s.f[5], sizeof(t.f[1])) == 0,
               "options in any order give the same field");
    }
    tap_ok(s.f[5].row_bytes == 16 && s.f[6].row_bytes == 4 && s.f[7].row_bytes == 12 &&
           s.f[8].row_bytes == 1 && s.f[10].row_bytes == 1024 && s.f[11].row_bytes == 48 &&
           s.f[12].row_bytes == 8 && s.f[0].row_bytes == 0,
           "row_bytes: ragged a row, tensor the whole, bytes 1, scalar 8, image 0");
    tap_ok(s.f[2].role == SCHEMA_ROLE_MASK && s.f[2].of == 0 &&
           s.f[5].role == SCHEMA_ROLE_BOXES && s.f[5].of == 0, "roles resolve to field 0");
    tap_ok(schema_find(&s, "caption", 7) == 8 && schema_find(&s, "capt", 4) == -ENOENT,
           "schema_find");
    tap_ok(schema_kind_parse("ragged", 6) == SCHEMA_RAGGED && schema_kind_parse("rag", 3) < 0 &&
           !schema_kind_name(SCHEMA_KIND_COUNT), "kind names");
    {
        char small[8];

        tap_ok(schema_field_format(&s, 5, small, sizeof(small)) == -ENOSPC,
               "a line too long for the buffer is -ENOSPC");
    }
}

struct refusal {
    const char *lines[3];
    const char *needle;    /* in the message: the field and the rule */
};

static void check_refusals(void)
{
    static const struct refusal bad[] = {
        {{"9x image"}, "field name \"9x\""},
        {{"a-b image"}, "field name \"a-b\""},
        {{"abcdefghijabcdefghijabcdefghijab image"}, "field name"},
        {{"x"}, "field x: no kind"},
        {{"x picture"}, "field x: unknown kind \"picture\""},
        {{"x tensor dtype=q8 shape=2"}, "field x: unknown dtype \"q8\""},
        {{"x tensor shape=2x0"}, "field x: shape=2x0"},
        {{"x tensor shape=2xx3"}, "field x: shape=2xx3"},
        {{"x image shape=640"}, "field x: shape=640: not HxW"},
        {{"x ragged dtype=u8 max=0"}, "field x: max=0"},
        {{"x ragged dtype=u8 max=5 cap=-1"}, "field x: cap=-1"},
        {{"x image channels=2"}, "field x: channels=2: 1 or 3"},
        {{"x tensor shape=2 flavour=1"}, "field x: unknown option \"flavour\""},
        {{"x tensor shape"}, "field x: \"shape\" is not key=value"},
        {{"a image", "x image channels=1 mask=a boxes=a"}, "field x: boxes=a: a field has one role"},
        {{"a image", "x image channels=1 mask=zz"}, "field x: mask=zz names no field before it"},
        {{"x image", "x scalar"}, "field x: the name is used twice"},
        {{"a image", "c ragged dtype=i64 max=3 rows=a"}, "field c: rows= is for a ragged field "
         "naming an earlier boxes field"},
        {{"a image", "b ragged dtype=f32 shape=4 max=3 boxes=a", "c tensor dtype=u8 shape=2 "
          "rows=b"}, "field c: rows= is for a ragged field"},
        {{"c ragged dtype=i64 max=3 rows=b"}, "field c: rows=b names no field before it"},
        {{"a image", "b ragged dtype=i32 shape=4 max=3 boxes=a"}, "field b: boxes= is for a ragged f32"},
        {{"a tensor dtype=u8 shape=2", "b ragged dtype=f32 shape=4 max=3 boxes=a"},
         "field b: boxes= is for"},
        {{"a image", "m image mask=a"}, "field m: mask= is for an image field of channels=1"},
        {{"a image", "m image channels=1 mask=a", "n image channels=1 mask=m"},
         "field n: mask= is for"},
        {{"x tensor dtype=u8 shape=2 channels=3"}, "field x: channels and shape=HxW are for image"},
        {{"x tensor dtype=u8 shape=2 max=3"}, "field x: max= is for ragged and bytes fields only"},
        {{"x ragged dtype=u8"}, "field x: max= is required for ragged and bytes fields"},
        {{"x bytes"}, "field x: max= is required"},
        {{"x scalar cap=3"}, "field x: cap= is for ragged and bytes fields only"},
        {{"x ragged dtype=u8 max=10 cap=5"}, "field x: cap=5 is less than max=10"},
        {{"x image dtype=u16"}, "field x: images are u8 (u16 for channels=1)"},
        {{"x image dtype=f32 channels=1"}, "field x: images are u8"},
        {{"x tensor dtype=u8"}, "field x: a tensor needs shape="},
        {{"x tensor dtype=f64 shape=1073741824"}, "field x: tensor too large"},
        {{"x ragged dtype=f64 shape=2 max=1073741824"}, "field x: max=1073741824 rows exceed"},
        {{"x bytes dtype=i32 max=3"}, "field x: bytes have no dtype or shape"},
        {{"x scalar dtype=i32"}, "field x: a scalar is dtype=i64 or f64"},
        {{"x scalar shape=2"}, "field x: a scalar is dtype=i64 or f64, no shape"},
    };

    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        struct schema s;
        struct rf_err err;
        size_t n = 0;
        int r;

        while (n < 3 && bad[k].lines[n])
            n++;
        memset(&err, 0, sizeof(err));
        r = build(&s, bad[k].lines, n, &err);
        tap_ok(r == -EINVAL && strstr(err.msg, bad[k].needle) != NULL,
               "refused: %s | %s -> \"%s\"", bad[k].lines[0],
               n > 1 ? bad[k].lines[n - 1] : "", r ? err.msg : "(accepted)");
    }
    /* more than SCHEMA_MAX_FIELDS */
    {
        struct schema s;
        struct rf_err err;
        struct schema_field f;
        char of[SCHEMA_NAME_MAX + 1];
        int r = 0;

        memset(&s, 0, sizeof(s));
        for (int i = 0; i <= SCHEMA_MAX_FIELDS && r == 0; i++) {
            char line[32];

            snprintf(line, sizeof(line), "f%d scalar", i);
            r = schema_field_parse(line, strlen(line), &f, of, &err);
            if (r == 0)
                r = schema_add(&s, &f, of, &err);
        }
        tap_ok(r == -EINVAL && strstr(err.msg, "field f16: more than 16 fields"),
               "a 17th field is refused naming it (%s)", err.msg);
        s.n = 0;
        tap_ok(schema_check(&s, &err) == -EINVAL, "an empty schema is refused");
    }
}

/* A record of parts (lens[i] bytes of fill each) for s into buf. */
static size_t record(uint8_t *buf, const uint32_t *lens, size_t n)
{
    size_t at = 0;

    for (size_t i = 0; i < n; i++) {
        schema_record_put_len(buf + at, lens[i]);
        at += 4;
        memset(buf + at, (int)(0x10 + i), lens[i]);
        at += lens[i];
    }
    return at;
}

static void check_split(void)
{
    static const char *const lines[] = {
        "image image",
        "boxes ragged dtype=f32 shape=4 max=3 boxes=image",
        "text bytes max=5",
        "emb tensor dtype=f16 shape=3",
        "label scalar",
    };
    struct schema s;
    struct schema_part parts[SCHEMA_MAX_FIELDS];
    struct rf_err err;
    uint8_t buf[512];
    size_t len;
    uint64_t lens64[5] = {10, 32, 5, 6, 8};
    uint32_t lens[5] = {10, 32, 5, 6, 8};
    int r;

    tap_ok(build(&s, lines, 5, &err) == 0, "the split schema builds");
    len = record(buf, lens, 5);
    tap_ok(schema_record_size(&s, lens64) == len, "schema_record_size is the record's");
    r = schema_record_split(&s, buf, len, parts, &err);
    tap_ok(r == 0 && parts[0].off == 4 && parts[0].len == 10 && parts[1].off == 18 &&
           parts[1].len == 32 && parts[4].off == len - 8 && buf[parts[3].off] == 0x13,
           "a good record splits at its length words");
    tap_ok(schema_rows(&s.f[1], 32) == 2 && schema_rows(&s.f[2], 5) == 5 &&
           schema_rows(&s.f[3], 6) == 1 && schema_rows(&s.f[0], 10) == 1, "schema_rows");
    /* empty ragged and bytes are fine */
    lens[1] = 0;
    lens[2] = 0;
    len = record(buf, lens, 5);
    r = schema_record_split(&s, buf, len, parts, &err);
    tap_ok(r == 0 && parts[1].len == 0 && parts[2].len == 0, "empty ragged and bytes parts "
           "split (%s)", r ? err.msg : "ok");
    /* truncated length word: the record ends 2 bytes into field 3's */
    r = schema_record_split(&s, buf, parts[3].off - 2, parts, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "field emb") &&
           strstr(err.msg, "before its length"), "a truncated length word: %s", err.msg);
    /* a part past the end */
    len = record(buf, lens, 5);
    r = schema_record_split(&s, buf, len - 1, parts, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "field label") && strstr(err.msg, "past the"),
           "a part past the record's end: %s", err.msg);
    /* trailing bytes */
    buf[len] = 0;
    r = schema_record_split(&s, buf, len + 1, parts, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "1 bytes after the last field (label)"),
           "a byte after the last field: %s", err.msg);
    /* ragged not whole rows */
    lens[1] = 17;
    len = record(buf, lens, 5);
    r = schema_record_split(&s, buf, len, parts, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "field boxes") && strstr(err.msg, "17 bytes"),
           "a ragged part of 17 bytes (16-byte rows): %s", err.msg);
    /* over max: 4 rows of max=3 */
    lens[1] = 64;
    len = record(buf, lens, 5);
    r = schema_record_split(&s, buf, len, parts, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "field boxes") && strstr(err.msg, "max=3"),
           "a ragged part of 4 rows over max=3: %s", err.msg);
    lens[1] = 0;
    lens[2] = 6;
    len = record(buf, lens, 5);
    r = schema_record_split(&s, buf, len, parts, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "field text"), "bytes over max=5: %s", err.msg);
    /* empty image */
    lens[2] = 0;
    lens[0] = 0;
    len = record(buf, lens, 5);
    r = schema_record_split(&s, buf, len, parts, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "field image") && strstr(err.msg, "an empty image"),
           "an empty image: %s", err.msg);
    /* tensor and scalar of the wrong size */
    lens[0] = 3;
    lens[3] = 4;
    len = record(buf, lens, 5);
    r = schema_record_split(&s, buf, len, parts, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "field emb") && strstr(err.msg, "needs 6"),
           "a tensor of 4 bytes for 6: %s", err.msg);
    lens[3] = 6;
    lens[4] = 4;
    len = record(buf, lens, 5);
    r = schema_record_split(&s, buf, len, parts, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "field label") && strstr(err.msg, "needs 8"),
           "a scalar of 4 bytes: %s", err.msg);
    /* a length word near UINT32_MAX does not wrap */
    lens[4] = 8;
    len = record(buf, lens, 5);
    schema_record_put_len(buf, 0xfffffffcu);
    r = schema_record_split(&s, buf, len, parts, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "field image"), "a huge length word: %s", err.msg);
    tap_ok(schema_record_split(&s, buf, 0, parts, &err) == -EBADMSG, "an empty record");
    {
        uint64_t huge[5] = {1u << 30, 0, 0, 6, 8};

        tap_ok(schema_record_size(&s, huge) == 0, "a record over DATASET_RECORD_MAX sizes 0");
    }
}

static void check_legacy(void)
{
    struct schema s;
    uint64_t dims[3] = {1, 28, 28};

    tap_ok(schema_legacy(DATASET_JPEG, DATASET_DTYPE_NONE, NULL, 0, 32, 48, &s) == 0 &&
           s.n == 2 && !strcmp(s.f[0].name, "image") && s.f[0].kind == SCHEMA_IMAGE &&
           s.f[0].channels == 3 && s.f[0].height == 32 && s.f[0].width == 48 &&
           !strcmp(s.f[1].name, "label") && s.f[1].kind == SCHEMA_SCALAR &&
           s.f[1].dtype == DATASET_DTYPE_I64, "jpeg: image (with its shape) and label");
    tap_ok(schema_legacy(DATASET_JPEG, DATASET_DTYPE_NONE, NULL, 0, 0, 0, &s) == 0 &&
           s.f[0].height == 0, "jpeg of mixed sizes: no shape");
    tap_ok(schema_legacy(DATASET_TENSOR, DATASET_DTYPE_U8, dims, 3, 0, 0, &s) == 0 &&
           !strcmp(s.f[0].name, "tensor") && s.f[0].kind == SCHEMA_TENSOR && s.f[0].ndim == 3 &&
           s.f[0].dims[2] == 28 && s.f[0].row_bytes == 784 && s.f[1].kind == SCHEMA_SCALAR,
           "tensor: tensor (dtype, dims) and label");
    tap_ok(schema_legacy(DATASET_BYTES, DATASET_DTYPE_NONE, NULL, 0, 0, 0, &s) == -EINVAL &&
           schema_legacy(DATASET_FIELDS, DATASET_DTYPE_NONE, NULL, 0, 0, 0, &s) == -EINVAL &&
           schema_legacy(DATASET_TENSOR, DATASET_DTYPE_U8, dims, 0, 0, 0, &s) == -EINVAL,
           "bytes, fields and a tensor without dims have no implicit schema");
}

static void check_manifest(void)
{
    static const char text[] =
        "ringfeed-dataset 1\n"
        "samples 3\n"
        "kind fields\n"
        "fields 5\n"
        "field image image\n"
        "field mask image channels=1 mask=image\n"
        "field boxes ragged dtype=f32 shape=4 max=50 boxes=image\n"
        "field caption bytes max=312 cap=4096\n"
        "field label scalar\n"
        "codec zstd\n"
        "max_stored 800\n"
        "max_decoded 900\n"
        "classes 0\n"
        "shards 1\n"
        "shard 0 shard-00000.rfs 3 1000 deadbeef\n"
        "end\n";
    struct manifest m, back;
    struct rf_err err;
    char *out, *again;
    size_t len, len2;
    int r = manifest_parse(text, sizeof(text) - 1, &m, &err);

    tap_ok(r == 0 && m.kind == DATASET_FIELDS && m.schema.n == 5 &&
           m.schema.f[2].role == SCHEMA_ROLE_BOXES && m.schema.f[3].cap_rows == 4096,
           "a kind-fields MANIFEST parses (%s)", r ? err.msg : "ok");
    /* regression: manifest_parse checked a copy, leaving row_bytes 0 in m,
     * which schema_record_split divides by */
    tap_ok(r == 0 && m.schema.f[2].row_bytes == 16 && m.schema.f[3].row_bytes == 1 &&
           m.schema.f[4].row_bytes == 8, "manifest_parse fills row_bytes");
    out = manifest_format(&m, &len);
    r = out ? manifest_parse(out, len, &back, &err) : -ENOMEM;
    tap_ok(r == 0 && back.schema.n == m.schema.n &&
           memcmp(&back.schema, &m.schema, sizeof(m.schema)) == 0,
           "manifest_parse(manifest_format(m)) has the same schema (%s)", r ? err.msg : "ok");
    again = r == 0 ? manifest_format(&back, &len2) : NULL;
    tap_ok(again && len2 == len && memcmp(again, out, len) == 0, "and formats the same text");
    tap_ok(out && strstr(out, "field boxes ragged dtype=f32 shape=4 max=50 boxes=image\n"),
           "the field lines are written in the MANIFEST's words");
    free(again);
    free(out);
    manifest_free(&back);
    manifest_free(&m);
    {
        char bad[sizeof(text) + 64];

        snprintf(bad, sizeof(bad), "%s", text);
        memcpy(strstr(bad, "channels=1"), "channels=3", 10);
        r = manifest_parse(bad, strlen(bad), &m, &err);
        tap_ok(r == -EBADMSG && strstr(err.msg, "field mask"),
               "a MANIFEST breaking a field rule is refused naming it: %s", err.msg);
        manifest_free(&m);
    }
}

/* rows=: a record whose rows differ from its boxes' is refused, naming both */
static void check_rows_split(void)
{
    static const char *const lines[] = {
        "image image",
        "boxes ragged dtype=f32 shape=4 max=9 boxes=image",
        "classes ragged dtype=i64 max=9 rows=boxes",
    };
    struct schema s;
    struct schema_part parts[SCHEMA_MAX_FIELDS];
    struct rf_err err;
    uint8_t buf[512];
    uint32_t same[3] = {10, 32, 16}, fewer[3] = {10, 32, 8};
    size_t len;
    int r;

    tap_ok(build(&s, lines, 3, &err) == 0 && s.f[2].role == SCHEMA_ROLE_ROWS && s.f[2].of == 1,
           "rows= builds, naming the boxes field");
    len = record(buf, same, 3);
    tap_ok(schema_record_split(&s, buf, len, parts, &err) == 0,
           "two boxes and two rows split");
    len = record(buf, fewer, 3);
    r = schema_record_split(&s, buf, len, parts, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "field classes") &&
           strstr(err.msg, "1 rows, but its boxes field boxes has 2"),
           "one row for two boxes is refused: %s", err.msg);
}

int main(void)
{
    check_round_trip();
    check_refusals();
    check_split();
    check_legacy();
    check_manifest();
    check_rows_split();
    return tap_done();
}
