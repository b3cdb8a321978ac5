/*
 * test_manifest.c - the MANIFEST parser and formatter: a built manifest
 * formats and parses back the same (names with spaces and '/'), and every
 * malformed or inconsistent input is refused with the line it is on;
 * max_side and max_side_quality (--max-side packs) read, write and are
 * checked, and a manifest without them still reads; so does jpeg_restart
 * (the lossless re-encoding with restart markers), alone and with
 * max_side, and an unknown value of it is refused naming key and value;
 * raw_images (RFPX pixel records in a jpeg dataset) reads, writes back, is
 * optional, and is refused as 0, over samples, twice, malformed or on
 * another kind, naming the line; so is image_shape HxW (every image one
 * size, for transform none), refused with a side 0 or over PX_SIDE_MAX,
 * malformed, twice or on another kind.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "manifest.h"
#include "tap.h"

static const char good[] =
    "# a comment\n"
    "ringfeed-dataset 1\n"
    "samples 5\n"
    "kind tensor\n"
    "dtype u8\n"
    "shape 1x28x28\n"
    "codec zstd\n"
    "max_stored 800\n"
    "max_decoded 784\n"
    "classes 2\n"
    "class 0 T-shirt/top\n"
    "class 1 Ankle boot\n"
    "\n"
    "dict dict.zstd 1000 0123abcd\n"
    "shards 2\n"
    "shard 0 shard-00000.rfs 3 1000 deadbeef\n"
    "shard 1 shard-00001.rfs 2 1000 00000001\n"
    "end\n";

/* base with the first occurrence of `from` replaced by `to`. */
static char *edit_in(const char *base, const char *from, const char *to)
{
    const char *at = strstr(base, from);
    size_t n = strlen(base) - strlen(from) + strlen(to) + 1;
    char *s = malloc(n);

    if (!at) {
        tap_diag("edit: \"%s\" not in the sample", from);
        abort();
    }
    memcpy(s, base, (size_t)(at - base));
    strcpy(s + (at - base), to);
    strcat(s, at + strlen(from));
    return s;
}

/* good[] edited */
static char *edit(const char *from, const char *to)
{
    return edit_in(good, from, to);
}

static void check_good(void)
{
    struct manifest m;
    struct rf_err e = {{0}};
    char *text;
    size_t len = 0;

    TAP_IS_INT(manifest_parse(good, strlen(good), &m, &e), 0, "sample parses");
    if (e.msg[0])
        tap_diag("%s", e.msg);
    TAP_IS_INT(m.samples, 5, "samples");
    TAP_IS_INT(m.kind, DATASET_TENSOR, "kind");
    TAP_IS_INT(m.dtype, DATASET_DTYPE_U8, "dtype");
    TAP_IS_INT(m.ndim, 3, "ndim");
    TAP_IS_INT(m.dims[0] * 1000000 + m.dims[1] * 1000 + m.dims[2], 1028028,
               "shape 1x28x28");
    TAP_IS_INT(m.codec, DATASET_CODEC_ZSTD, "codec");
    TAP_IS_INT(m.max_stored, 800, "max_stored");
    TAP_IS_INT(m.nclasses, 2, "classes");
    TAP_IS_STR(manifest_class_name(&m, 0), "T-shirt/top", "class name with /");
    TAP_IS_STR(manifest_class_name(&m, 1), "Ankle boot", "class name with space");
    TAP_OK(manifest_class_name(&m, 2) == NULL, "class past the end is NULL");
    TAP_IS_STR(manifest_dict_name(&m), "dict.zstd", "dict name");
    TAP_IS_INT(m.dict_crc, 0x0123abcd, "dict crc");
    TAP_IS_INT(m.nshards, 2, "shards");
    TAP_IS_STR(manifest_shard_name(&m, 1), "shard-00001.rfs", "shard name");
    TAP_IS_INT(m.shards[0].index_crc, 0xdeadbeef, "shard index crc");
    TAP_IS_INT(m.shards[1].records, 2, "shard records");

    text = manifest_format(&m, &len);
    TAP_OK(text != NULL, "format");
    manifest_free(&m);
    TAP_IS_INT(manifest_parse(text, len, &m, &e), 0, "formatted text parses");
    TAP_IS_STR(manifest_class_name(&m, 0), "T-shirt/top", "name survives");
    {
        size_t len2 = 0;
        char *text2 = manifest_format(&m, &len2);

        TAP_OK(text2 && len2 == len && memcmp(text, text2, len) == 0,
               "format(parse(format(m))) == format(m)");
        free(text2);
    }
    free(text);
    manifest_free(&m);
    manifest_free(&m); /* twice is fine: it zeroes */
}

static void check_builders(void)
{
    struct manifest m = {0}, p;
    struct rf_err e = {{0}};
    char *text;
    size_t len = 0;
    int r;

    m.version = MANIFEST_VERSION;
    m.kind = DATASET_JPEG;
    m.codec = DATASET_CODEC_NONE;
    m.samples = 7;
    m.max_stored = m.max_decoded = 99;
    r = 0;
    for (int i = 0; i < 40; i++) {
        char name[32];

        snprintf(name, sizeof(name), "class %d / x", i);
        r |= manifest_add_class(&m, name);
    }
    r |= manifest_add_shard(&m, "a.rfs", 3, 1000, 1);
    r |= manifest_add_shard(&m, "b.rfs", 4, 1000, 2);
    TAP_IS_INT(r, 0, "builders succeed");
    TAP_IS_INT(manifest_add_class(&m, "bad\nname"), -EINVAL,
               "class name with a newline refused");
    TAP_IS_INT(manifest_add_class(&m, ""), -EINVAL, "empty class name refused");
    TAP_IS_INT(manifest_add_shard(&m, "../x", 1, 1000, 0), -EINVAL,
               "shard file name with .. refused");
    TAP_IS_INT(manifest_add_shard(&m, "a/b", 1, 1000, 0), -EINVAL,
               "shard file name with / refused");
    TAP_IS_INT(manifest_check(&m, &e), 0, "built manifest checks");
    text = manifest_format(&m, &len);
    TAP_IS_INT(manifest_parse(text, len, &p, &e), 0, "built manifest parses");
    TAP_IS_INT(p.nclasses, 40, "40 classes back");
    TAP_IS_STR(manifest_class_name(&p, 39), "class 39 / x", "last class name");
    TAP_IS_STR(manifest_shard_name(&p, 1), "b.rfs", "second shard");
    m.samples = 8;
    TAP_IS_INT(manifest_check(&m, &e), -EBADMSG, "records must sum to samples");
    free(text);
    manifest_free(&p);
    manifest_free(&m);
}

struct bad_case {
    const char *from, *to;
    int code;
    const char *msg; /* a substring the message must hold */
};

/* s with control characters as \xNN, for a one-line test name. */
static const char *oneline(const char *s, int slot)
{
    static char buf[2][256];
    size_t n = 0;

    for (; *s && n < sizeof(buf[0]) - 5; s++)
        n += (size_t)snprintf(buf[slot] + n, sizeof(buf[0]) - n,
                              (unsigned char)*s < 0x20 ? "\\x%02x" : "%c",
                              (unsigned char)*s);
    buf[slot][n] = '\0';
    return buf[slot];
}

static void check_bad(void)
{
    static const struct bad_case cases[] = {
        {"end\n", "", -EBADMSG, "no \"end\" line"},
        {"end\n", "end", -EBADMSG, "no newline"},
        {"end\n", "end\nsamples 1\n", -EBADMSG, "text after the end line"},
        {"ringfeed-dataset 1", "ringfeed-dataset 2", -EPROTO, "line 2 "},
        {"ringfeed-dataset 1\n", "", -EBADMSG, "first line must be"},
        {"samples 5", "samples 6", -EBADMSG, "shards hold 5 records"},
        {"samples 5", "samples 05", -EBADMSG, "line 3 "},
        {"samples 5", "samples 99999999999999999999999", -EBADMSG, "not a number"},
        {"samples 5", "samples -5", -EBADMSG, "not a number"},
        {"samples 5", "samples  5", -EBADMSG, "single spaces"},
        {"samples 5", "samples 5 ", -EBADMSG, "single spaces"},
        {"samples 5\n", "samples 5\r\n", -EBADMSG, "control character"},
        {"kind tensor", "kind image", -EBADMSG, "unknown kind"},
        {"kind tensor", "kind jpeg", -EBADMSG, "for kind tensor only"},
        {"dtype u8\n", "", -EBADMSG, "needs a dtype"},
        {"dtype u8", "dtype u9", -EBADMSG, "unknown dtype"},
        {"shape 1x28x28", "shape 1x0x28", -EBADMSG, "dim 1"},
        {"shape 1x28x28", "shape 1x28x", -EBADMSG, "dim 2"},
        {"shape 1x28x28", "shape 1x1x1x1x1x1x1x1x1", -EBADMSG, "more than 8"},
        {"shape 1x28x28", "shape 1x28x29", -EBADMSG, "not the tensor size"},
        {"shape 1x28x28", "shape 65536x65536", -EBADMSG, "more than"},
        {"codec zstd", "codec lz4", -EBADMSG, "unknown codec"},
        {"codec zstd", "codec none", -EBADMSG, "max_stored 800 != max_decoded"},
        {"max_stored 800", "max_stored 2000000000", -EBADMSG, "max_stored"},
        {"classes 2", "classes 3", -EBADMSG, "2 class lines"},
        {"classes 2", "classes 4000000", -EBADMSG, "line 10 "},
        {"classes 2", "classes 400000", -EBADMSG, "too short to hold"},
        {"class 1 Ankle boot", "class 2 Ankle boot", -EBADMSG,
         "expected 1"},
        {"class 0 T-shirt/top\n", "", -EBADMSG, "expected 0"},
        {"class 1 Ankle boot", "class 1 ", -EBADMSG, "single spaces"},
        {"class 1 Ankle boot", "class 1 Ankle\tboot", -EBADMSG,
         "control character"},
        {"classes 2\n", "", -EBADMSG, "before the classes line"},
        {"dict dict.zstd 1000 0123abcd", "dict dict.zstd 1000 0123ABCD",
         -EBADMSG, "8 lowercase hex"},
        {"dict dict.zstd", "dict ../dict.zstd", -EBADMSG, "dict file name"},
        {"dict dict.zstd 1000", "dict dict.zstd 0", -EBADMSG, "dict size"},
        {"shards 2", "shards 3", -EBADMSG, "2 shard lines"},
        {"shard 0 shard-00000.rfs", "shard 0 /etc/passwd", -EBADMSG,
         "file name"},
        {"shard 0 shard-00000.rfs", "shard 0 ..", -EBADMSG, "file name"},
        {"shard 0 shard-00000.rfs", "shard 0 .hidden", -EBADMSG, "file name"},
        {"shard 1 shard-00001.rfs 2 1000", "shard 1 shard-00001.rfs 2 10",
         -EBADMSG, "cannot hold a header"},
        {"shard 1 shard-00001.rfs 2", "shard 1 shard-00001.rfs 18446744073709551615",
         -EBADMSG, "too large"},
        {"shard 1 ", "shard 0 ", -EBADMSG, "expected 1"},
        {"shard 1 shard-00001.rfs 2 1000 00000001",
         "shard 1 shard-00001.rfs 2 1000", -EBADMSG, "5 fields"},
        {"shards 2\n", "shards 2\nshards 2\n", -EBADMSG, "given twice"},
        {"samples 5\n", "sample 5\n", -EBADMSG, "unknown key"},
        {"samples 5\n", "samples 5\n\x01\n", -EBADMSG, "line 4 "},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_case *c = &cases[i];
        char *text = edit(c->from, c->to);
        struct manifest m;
        struct rf_err e = {{0}};
        int r = manifest_parse(text, strlen(text), &m, &e);

        if (!tap_ok(r == c->code && strstr(e.msg, c->msg),
                    "refused: \"%s\" -> \"%s\"", oneline(c->from, 0),
                    oneline(c->to, 1)))
            tap_diag("  got %d \"%s\", want %d and \"%s\"", r, e.msg, c->code,
                     c->msg);
        TAP_OK(m.text == NULL && m.classes == NULL && m.shards == NULL,
               "nothing left allocated after an error");
        free(text);
    }
}

/* A jpeg manifest written with --max-side, and edits of it. */
static const char jpeg_max_side[] =
    "ringfeed-dataset 1\n"
    "samples 3\n"
    "kind jpeg\n"
    "codec none\n"
    "max_stored 9000\n"
    "max_decoded 9000\n"
    "max_side 512\n"
    "max_side_quality 90\n"
    "classes 1\n"
    "class 0 photos\n"
    "shards 1\n"
    "shard 0 shard-00000.rfs 3 30000 0000abcd\n"
    "end\n";

static void check_max_side(void)
{
    static const struct bad_case cases[] = {
        {"max_side_quality 90\n", "", -EBADMSG, "come together"},
        {"max_side 512\n", "", -EBADMSG, "come together"},
        {"max_side 512", "max_side 15", -EBADMSG, "not a number from 16 to 65535"},
        {"max_side 512", "max_side 65536", -EBADMSG, "not a number from 16"},
        {"max_side 512", "max_side 0512", -EBADMSG, "line 7 "},
        {"max_side 512", "max_side x", -EBADMSG, "max_side \"x\""},
        {"max_side_quality 90", "max_side_quality 0", -EBADMSG,
         "not a number from 1 to 100"},
        {"max_side_quality 90", "max_side_quality 101", -EBADMSG,
         "from 1 to 100"},
        {"max_side 512\n", "max_side 512\nmax_side 256\n", -EBADMSG,
         "given twice"},
        {"max_side_quality 90", "max_side_quality 90 1", -EBADMSG,
         "1 field"},
        {"kind jpeg", "kind bytes", -EBADMSG, "for kind jpeg only"},
    };
    struct manifest m, p;
    struct rf_err e = {{0}};
    char *text, *old;
    size_t len = 0;

    TAP_IS_INT(manifest_parse(jpeg_max_side, strlen(jpeg_max_side), &m, &e), 0,
               "a jpeg manifest with max_side parses");
    if (e.msg[0])
        tap_diag("%s", e.msg);
    TAP_IS_INT(m.max_side, 512, "max_side");
    TAP_IS_INT(m.max_side_quality, 90, "max_side_quality");
    text = manifest_format(&m, &len);
    TAP_OK(text && strstr(text, "\nmax_side 512\nmax_side_quality 90\n"),
           "formatted with both keys");
    TAP_IS_INT(manifest_parse(text, len, &p, &e), 0, "and parses back");
    TAP_OK(p.max_side == 512 && p.max_side_quality == 90, "with the same values");
    free(text);
    manifest_free(&p);
    m.max_side_quality = 0;
    TAP_IS_INT(manifest_check(&m, &e), -EBADMSG,
               "manifest_check: max_side without its quality refused");
    m.max_side = 0;
    TAP_IS_INT(manifest_check(&m, &e), 0, "neither is fine");
    text = manifest_format(&m, &len);
    TAP_OK(text && !strstr(text, "max_side"), "and formats without the keys");
    free(text);
    manifest_free(&m);

    /* a manifest from before the keys existed still reads, as 0 */
    old = edit_in(jpeg_max_side, "max_side 512\nmax_side_quality 90\n", "");
    TAP_IS_INT(manifest_parse(old, strlen(old), &m, &e), 0,
               "a manifest without max_side (an older pack) parses");
    TAP_OK(m.max_side == 0 && m.max_side_quality == 0, "max_side 0 there");
    manifest_free(&m);
    free(old);
    old = edit("max_decoded 784\n", "max_decoded 784\nmax_side 512\n"
               "max_side_quality 90\n");
    TAP_IS_INT(manifest_parse(old, strlen(old), &m, &e), -EBADMSG,
               "max_side on a tensor manifest refused");
    TAP_OK(strstr(e.msg, "for kind jpeg only") != NULL, "saying jpeg only");
    free(old);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_case *c = &cases[i];
        char *t = edit_in(jpeg_max_side, c->from, c->to);
        int r = manifest_parse(t, strlen(t), &m, &e);

        if (!tap_ok(r == c->code && strstr(e.msg, c->msg),
                    "refused: \"%s\" -> \"%s\"", oneline(c->from, 0),
                    oneline(c->to, 1)))
            tap_diag("  got %d \"%s\", want %d and \"%s\"", r, e.msg, c->code,
                     c->msg);
        free(t);
    }
}

/* jpeg_restart lossless: read, written back, optional, checked. */
static void check_jpeg_restart(void)
{
    static const struct bad_case cases[] = {
        {"jpeg_restart lossless", "jpeg_restart lossy", -EBADMSG,
         "jpeg_restart \"lossy\": unknown value"},
        {"jpeg_restart lossless", "jpeg_restart none", -EBADMSG,
         "line 7 (byte 83): jpeg_restart \"none\""},
        {"jpeg_restart lossless", "jpeg_restart Lossless", -EBADMSG,
         "jpeg_restart \"Lossless\""},
        {"jpeg_restart lossless", "jpeg_restart", -EBADMSG, "1 field"},
        {"jpeg_restart lossless", "jpeg_restart lossless 4", -EBADMSG,
         "1 field"},
        {"jpeg_restart lossless\n", "jpeg_restart lossless\n"
         "jpeg_restart lossless\n", -EBADMSG, "given twice"},
        {"kind jpeg", "kind bytes", -EBADMSG,
         "jpeg_restart is for kind jpeg only, this is kind bytes"},
    };
    char *with = edit_in(jpeg_max_side, "max_side_quality 90\n",
                         "max_side_quality 90\njpeg_restart lossless\n");
    char *alone = edit_in(with, "max_side 512\nmax_side_quality 90\n", "");
    struct manifest m, p;
    struct rf_err e = {{0}};
    char *text;
    size_t len = 0;

    TAP_IS_INT(manifest_parse(alone, strlen(alone), &m, &e), 0,
               "a jpeg manifest with jpeg_restart lossless parses");
    if (e.msg[0])
        tap_diag("%s", e.msg);
    TAP_IS_INT(m.jpeg_restart, DATASET_JPEG_RESTART_LOSSLESS,
               "jpeg_restart lossless");
    TAP_IS_INT(m.max_side, 0, "without max_side");
    text = manifest_format(&m, &len);
    TAP_OK(text && strstr(text, "\nmax_decoded 9000\njpeg_restart lossless\n"
                          "classes 1\n"), "formatted with the key");
    TAP_IS_INT(manifest_parse(text, len, &p, &e), 0, "and parses back");
    TAP_IS_INT(p.jpeg_restart, DATASET_JPEG_RESTART_LOSSLESS, "the same");
    free(text);
    manifest_free(&p);
    m.jpeg_restart = DATASET_JPEG_AS_IS;
    text = manifest_format(&m, &len);
    TAP_OK(text && !strstr(text, "jpeg_restart"),
           "as is: formatted without the key (as packs made before it)");
    free(text);
    m.jpeg_restart = DATASET_JPEG_RESTART_COUNT;
    TAP_IS_INT(manifest_check(&m, &e), -EBADMSG,
               "manifest_check: an unknown jpeg_restart refused");
    manifest_free(&m);

    TAP_IS_INT(manifest_parse(with, strlen(with), &m, &e), 0,
               "with max_side and max_side_quality too");
    TAP_OK(m.jpeg_restart == DATASET_JPEG_RESTART_LOSSLESS && m.max_side == 512 &&
           m.max_side_quality == 90, "all three read");
    text = manifest_format(&m, &len);
    TAP_OK(text && strstr(text, "\nmax_side 512\nmax_side_quality 90\n"
                          "jpeg_restart lossless\n"), "and written");
    free(text);
    manifest_free(&m);
    TAP_IS_INT(manifest_parse(jpeg_max_side, strlen(jpeg_max_side), &m, &e), 0,
               "a manifest without jpeg_restart (an older pack) parses");
    TAP_IS_INT(m.jpeg_restart, DATASET_JPEG_AS_IS, "as they were");
    manifest_free(&m);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_case *c = &cases[i];
        char *t = edit_in(alone, c->from, c->to);
        int r = manifest_parse(t, strlen(t), &m, &e);

        if (!tap_ok(r == c->code && strstr(e.msg, c->msg),
                    "refused: \"%s\" -> \"%s\"", oneline(c->from, 0),
                    oneline(c->to, 1)))
            tap_diag("  got %d \"%s\", want %d and \"%s\"", r, e.msg, c->code,
                     c->msg);
        free(t);
    }
    free(alone);
    free(with);
}

/* raw_images N: read, written back, optional, checked. */
static void check_raw_images(void)
{
    static const struct bad_case cases[] = {
        {"raw_images 2", "raw_images 0", -EBADMSG,
         "line 7 (byte 83): raw_images \"0\" is not a number from 1"},
        {"raw_images 2", "raw_images 4", -EBADMSG,
         "line 7 (byte 83): raw_images 4 but samples 3"},
        {"raw_images 2", "raw_images 02", -EBADMSG, "line 7 "},
        {"raw_images 2", "raw_images -1", -EBADMSG, "raw_images \"-1\""},
        {"raw_images 2", "raw_images 18446744073709551616", -EBADMSG,
         "is not a number"},
        {"raw_images 2", "raw_images", -EBADMSG, "1 field"},
        {"raw_images 2", "raw_images 2 2", -EBADMSG, "1 field"},
        {"raw_images 2\n", "raw_images 2\nraw_images 2\n", -EBADMSG,
         "line 8 (byte 96): key \"raw_images\" given twice"},
        {"kind jpeg", "kind bytes", -EBADMSG,
         "line 7 (byte 84): raw_images is for kind jpeg only, this is kind "
         "bytes"},
        {"kind jpeg", "kind tensor\ndtype u8\nshape 3000", -EBADMSG,
         "raw_images is for kind jpeg only, this is kind tensor"},
        /* before the lines it depends on: manifest_check still refuses */
        {"samples 3\n", "raw_images 4\nsamples 3\n", -EBADMSG,
         "raw_images 4 but samples 3"},
        {"kind jpeg\n", "raw_images 1\nkind bytes\n", -EBADMSG,
         "raw_images is for kind jpeg only, this is kind bytes"},
    };
    /* cases[] edit `with`, the last two the manifest without the key */
    const size_t late = 2;
    char *without = edit_in(jpeg_max_side, "max_side 512\nmax_side_quality 90\n", "");
    char *with = edit_in(without, "max_decoded 9000\n", "max_decoded 9000\nraw_images 2\n");
    struct manifest m, p;
    struct rf_err e = {{0}};
    char *text, *t;
    size_t len = 0;

    TAP_IS_INT(manifest_parse(with, strlen(with), &m, &e), 0,
               "a jpeg manifest with raw_images 2 parses");
    if (e.msg[0])
        tap_diag("%s", e.msg);
    TAP_IS_INT(m.raw_images, 2, "raw_images 2");
    text = manifest_format(&m, &len);
    TAP_OK(text && strstr(text, "\nmax_decoded 9000\nraw_images 2\n"
                          "classes 1\n"), "formatted with the key");
    TAP_IS_INT(manifest_parse(text, len, &p, &e), 0, "and parses back");
    TAP_IS_INT(p.raw_images, 2, "the same");
    free(text);
    manifest_free(&p);
    m.raw_images = 3;
    TAP_IS_INT(manifest_check(&m, &e), 0, "manifest_check: every record RFPX");
    m.raw_images = 4;
    TAP_IS_INT(manifest_check(&m, &e), -EBADMSG,
               "manifest_check: more RFPX records than samples refused");
    m.raw_images = 0;
    text = manifest_format(&m, &len);
    TAP_OK(text && !strstr(text, "raw_images"),
           "0: formatted without the key (as packs made before it)");
    free(text);
    manifest_free(&m);
    TAP_IS_INT(manifest_parse(jpeg_max_side, strlen(jpeg_max_side), &m, &e), 0,
               "a manifest without raw_images (an older pack) parses");
    TAP_IS_INT(m.raw_images, 0, "no RFPX records");
    manifest_free(&m);
    t = edit_in(with, "raw_images 2\n",
                "max_side 512\nmax_side_quality 90\njpeg_restart lossless\n"
                "raw_images 3\n");
    TAP_IS_INT(manifest_parse(t, strlen(t), &m, &e), 0,
               "with max_side and jpeg_restart too");
    TAP_OK(m.raw_images == 3 && m.max_side == 512 &&
           m.jpeg_restart == DATASET_JPEG_RESTART_LOSSLESS, "all read");
    manifest_free(&m);
    free(t);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_case *c = &cases[i];
        int r;

        t = edit_in(i + late >= sizeof(cases) / sizeof(cases[0]) ? without : with,
                    c->from, c->to);
        r = manifest_parse(t, strlen(t), &m, &e);
        if (!tap_ok(r == c->code && strstr(e.msg, c->msg),
                    "refused: \"%s\" -> \"%s\"", oneline(c->from, 0),
                    oneline(c->to, 1)))
            tap_diag("  got %d \"%s\", want %d and \"%s\"", r, e.msg, c->code,
                     c->msg);
        free(t);
    }
    free(with);
    free(without);
}

/* image_shape HxW: read, written back, optional, checked. */
static void check_image_shape(void)
{
    static const struct bad_case cases[] = {
        {"image_shape 32x24", "image_shape 0x24", -EBADMSG,
         "line 7 (byte 83): image_shape \"0x24\" is not HxW"},
        {"image_shape 32x24", "image_shape 32x0", -EBADMSG, "line 7 "},
        {"image_shape 32x24", "image_shape 32x65536", -EBADMSG, "1..65535"},
        {"image_shape 32x24", "image_shape 032x24", -EBADMSG, "is not HxW"},
        {"image_shape 32x24", "image_shape 32X24", -EBADMSG, "is not HxW"},
        {"image_shape 32x24", "image_shape 32x24x3", -EBADMSG, "is not HxW"},
        {"image_shape 32x24", "image_shape 32", -EBADMSG, "is not HxW"},
        {"image_shape 32x24", "image_shape x24", -EBADMSG, "is not HxW"},
        {"image_shape 32x24", "image_shape 32x", -EBADMSG, "is not HxW"},
        {"image_shape 32x24", "image_shape -1x24", -EBADMSG, "is not HxW"},
        {"image_shape 32x24", "image_shape", -EBADMSG, "1 field"},
        {"image_shape 32x24", "image_shape 32 24", -EBADMSG, "1 field"},
        {"image_shape 32x24\n", "image_shape 32x24\nimage_shape 32x24\n", -EBADMSG,
         "line 8 (byte 101): key \"image_shape\" given twice"},
        {"kind jpeg", "kind bytes", -EBADMSG,
         "line 7 (byte 84): image_shape is for kind jpeg only, this is kind bytes"},
        {"kind jpeg", "kind tensor\ndtype u8\nshape 3000", -EBADMSG,
         "image_shape is for kind jpeg only, this is kind tensor"},
        /* before the kind line: manifest_check still refuses */
        {"kind jpeg\n", "image_shape 2x2\nkind bytes\n", -EBADMSG,
         "image_shape is for kind jpeg only, this is kind bytes"},
    };
    /* cases[] edit `with`, the last one the manifest without the key */
    const size_t late = 1;
    char *without = edit_in(jpeg_max_side, "max_side 512\nmax_side_quality 90\n", "");
    char *with = edit_in(without, "max_decoded 9000\n",
                         "max_decoded 9000\nimage_shape 32x24\n");
    struct manifest m, p;
    struct rf_err e = {{0}};
    char *text, *t;
    size_t len = 0;

    TAP_IS_INT(manifest_parse(with, strlen(with), &m, &e), 0,
               "a jpeg manifest with image_shape 32x24 parses");
    if (e.msg[0])
        tap_diag("%s", e.msg);
    TAP_OK(m.image_height == 32 && m.image_width == 24, "height 32, width 24");
    text = manifest_format(&m, &len);
    TAP_OK(text && strstr(text, "\nmax_decoded 9000\nimage_shape 32x24\n"
                          "classes 1\n"), "formatted with the key");
    TAP_IS_INT(manifest_parse(text, len, &p, &e), 0, "and parses back");
    TAP_OK(p.image_height == 32 && p.image_width == 24, "the same");
    free(text);
    manifest_free(&p);
    m.image_height = m.image_width = 65535;
    TAP_IS_INT(manifest_check(&m, &e), 0, "manifest_check: 65535x65535");
    m.image_width = 0;
    TAP_IS_INT(manifest_check(&m, &e), -EBADMSG, "manifest_check: one side 0 refused");
    m.image_width = 65536;
    TAP_IS_INT(manifest_check(&m, &e), -EBADMSG, "manifest_check: a side over 65535 refused");
    m.image_height = m.image_width = 0;
    TAP_IS_INT(manifest_check(&m, &e), 0, "manifest_check: 0x0, no shape");
    text = manifest_format(&m, &len);
    TAP_OK(text && !strstr(text, "image_shape"),
           "0x0: formatted without the key (as packs made before it)");
    free(text);
    manifest_free(&m);
    TAP_IS_INT(manifest_parse(jpeg_max_side, strlen(jpeg_max_side), &m, &e), 0,
               "a manifest without image_shape (an older pack) parses");
    TAP_OK(m.image_height == 0 && m.image_width == 0, "no shape");
    manifest_free(&m);
    t = edit_in(with, "image_shape 32x24\n",
                "max_side 512\nmax_side_quality 90\njpeg_restart lossless\n"
                "raw_images 3\nimage_shape 1x65535\n");
    TAP_IS_INT(manifest_parse(t, strlen(t), &m, &e), 0,
               "with max_side, jpeg_restart and raw_images too");
    TAP_OK(m.image_height == 1 && m.image_width == 65535 && m.raw_images == 3 &&
           m.max_side == 512, "all read");
    manifest_free(&m);
    free(t);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_case *c = &cases[i];
        int r;

        t = edit_in(i + late >= sizeof(cases) / sizeof(cases[0]) ? without : with,
                    c->from, c->to);
        r = manifest_parse(t, strlen(t), &m, &e);
        if (!tap_ok(r == c->code && strstr(e.msg, c->msg),
                    "refused: \"%s\" -> \"%s\"", oneline(c->from, 0),
                    oneline(c->to, 1)))
            tap_diag("  got %d \"%s\", want %d and \"%s\"", r, e.msg, c->code,
                     c->msg);
        if (r == 0)
            manifest_free(&m);
        free(t);
    }
    free(with);
    free(without);
}

static void check_nul_and_empty(void)
{
    struct manifest m;
    struct rf_err e = {{0}};
    char text[sizeof(good)];

    memcpy(text, good, sizeof(good));
    text[30] = '\0';
    TAP_IS_INT(manifest_parse(text, sizeof(good) - 1, &m, &e), -EBADMSG,
               "a NUL byte is refused");
    TAP_IS_INT(manifest_parse("", 0, &m, &e), -EBADMSG, "empty input refused");
    TAP_OK(strstr(e.msg, "ringfeed-dataset") != NULL,
           "empty input: message names the missing line");
}

/* The sources line: parsed, formatted back, refused when malformed. */
static void check_sources(void)
{
    static const struct bad_case cases[] = {
        {"sources sources.txt 10 0b1c2d3e", "sources sources.txt 10 0B1C2D3E", -EBADMSG,
         "sources checksum"},
        {"sources sources.txt", "sources ../sources.txt", -EBADMSG, "sources file name"},
        {"sources sources.txt 10", "sources sources.txt 0", -EBADMSG, "sources size"},
        {"sources sources.txt 10", "sources sources.txt 9", -EBADMSG,
         "cannot hold a line for each of 5 samples"},
        {"sources sources.txt 10", "sources sources.txt 99999999999", -EBADMSG,
         "sources size"},
        {"sources sources.txt 10 0b1c2d3e", "sources sources.txt 10", -EBADMSG, "3 fields"},
        {"sources sources.txt 10 0b1c2d3e\n",
         "sources sources.txt 10 0b1c2d3e\nsources sources.txt 10 0b1c2d3e\n", -EBADMSG,
         "given twice"},
    };
    char *with = edit("shards 2\n", "sources sources.txt 10 0b1c2d3e\nshards 2\n");
    struct manifest m, p;
    struct rf_err e = {{0}};
    char *text;
    size_t len = 0;

    TAP_IS_INT(manifest_parse(with, strlen(with), &m, &e), 0, "a manifest with sources parses");
    TAP_OK(m.has_sources && m.sources_size == 10 && m.sources_crc == 0x0b1c2d3e,
           "sources size 10, crc 0b1c2d3e");
    TAP_IS_STR(manifest_sources_name(&m), "sources.txt", "sources name");
    text = manifest_format(&m, &len);
    TAP_OK(text && strstr(text, "\nsources sources.txt 10 0b1c2d3e\n"), "formatted back");
    TAP_IS_INT(manifest_parse(text, len, &p, &e), 0, "and parsed again");
    TAP_OK(p.has_sources && p.sources_size == 10 && p.sources_crc == 0x0b1c2d3e,
           "the same sources line");
    free(text);
    manifest_free(&p);
    manifest_free(&m);
    TAP_IS_INT(manifest_parse(good, strlen(good), &m, &e), 0, "without the key");
    TAP_OK(!m.has_sources && manifest_sources_name(&m) == NULL, "no source list");
    TAP_IS_INT(manifest_set_sources(&m, "a/b", 10, 1), -EINVAL, "builder: a bad name refused");
    TAP_IS_INT(manifest_set_sources(&m, "sources.txt", 10, 1), 0, "builder: set");
    TAP_IS_INT(manifest_check(&m, &e), 0, "builder: checks");
    manifest_free(&m);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct bad_case *c = &cases[i];
        char *t = edit_in(with, c->from, c->to);
        int r = manifest_parse(t, strlen(t), &m, &e);

        if (!tap_ok(r == c->code && strstr(e.msg, c->msg), "sources refused: \"%s\"",
                    oneline(c->to, 1)))
            tap_diag("  got %d \"%s\", want %d and \"%s\"", r, e.msg, c->code, c->msg);
        manifest_free(&m);
        free(t);
    }
    free(with);
}

int main(void)
{
    check_good();
    check_builders();
    check_bad();
    check_max_side();
    check_jpeg_restart();
    check_raw_images();
    check_image_shape();
    check_nul_and_empty();
    check_sources();
    return tap_done();
}
