/*
 * manifest.c - parsing, checking and formatting of a dataset's MANIFEST
 * (the format is described in manifest.h).
 *
 * The parser copies the input into the struct's text block once and cuts
 * names out of that copy in place (a NUL where each name ends), so names
 * cost no further allocation.  Each key is a row in keys[]: how many fields
 * it takes, whether it may repeat, and the function that stores it.  The
 * rules between fields (tensor shape for tensors only, shard records that
 * sum to samples, ...) run once at the end, in manifest_check, which a
 * writer calls too before it writes a manifest.
 */
#include "manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "pixels.h"
#include "schema.h"
#include "shard.h"
#include "sources.h"

struct mparse {
    struct manifest *m;
    unsigned lineno;
    size_t off;               /* byte offset of the line in the input */
    uint32_t seen;            /* bit per keys[] row already seen */
    uint32_t classes_filled;
    uint32_t shards_filled;
    uint32_t fields_declared;     /* the fields line's N; fields added so far
                                     are m->schema.n */
    int have_fields;
    int have_samples, have_kind;  /* those lines came already */
    size_t input_len;
    int ended;
};

struct field {
    char *s;
    size_t n;
};

#define MAX_FIELDS 5

#define LINE_FAIL(ps, ...) \
    line_fail((ps), err, __VA_ARGS__)

__attribute__((format(printf, 3, 4)))
static int line_fail(const struct mparse *ps, struct rf_err *err,
                     const char *fmt, ...)
{
    char what[RF_ERR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return rf_err_set(err, -EBADMSG, "line %u (byte %zu): %s", ps->lineno,
                      ps->off, what);
}

/* Decimal, no sign, no leading zero (but "0"), no overflow past max. */
static int parse_num(const struct field *f, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (f->n == 0 || f->n > 20 || (f->s[0] == '0' && f->n > 1))
        return -EINVAL;
    for (size_t i = 0; i < f->n; i++) {
        unsigned d = (unsigned char)f->s[i] - '0';

        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    if (v > max)
        return -ERANGE;
    *out = v;
    return 0;
}

static int parse_crc(const struct field *f, uint32_t *out)
{
    uint32_t v = 0;

    if (f->n != 8)
        return -EINVAL;
    for (size_t i = 0; i < 8; i++) {
        char c = f->s[i];
        uint32_t d;

        if (c >= '0' && c <= '9')
            d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (uint32_t)(c - 'a' + 10);
        else
            return -EINVAL;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

int manifest_valid_file_name(const char *s, size_t n)
{
    if (n == 0 || n > MANIFEST_NAME_MAX || s[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* A class name: not empty, no control characters (bytes >= 0x80 pass). */
static int valid_class_name(const char *s, size_t n)
{
    if (n == 0 || n > 4096)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

/* Fields 1.. of a line, split at single spaces; the last may be "rest". */
static int split_fields(char *s, size_t n, unsigned want, int rest,
                        struct field *f)
{
    unsigned k = 0;
    size_t i = 0;

    while (k < want) {
        size_t start = i;

        if (rest && k == want - 1)
            i = n;
        else
            while (i < n && s[i] != ' ')
                i++;
        f[k].s = s + start;
        f[k].n = i - start;
        if (f[k].n == 0)
            return -EINVAL;
        k++;
        if (k < want) {
            if (i >= n)
                return -EINVAL; /* too few fields */
            i++;                /* the one space */
        }
    }
    return i == n ? 0 : -EINVAL; /* too many fields */
}

/* Cuts field f out of the text block with a NUL; returns its offset. */
static uint32_t cut(const struct manifest *m, const struct field *f)
{
    f->s[f->n] = '\0';
    return (uint32_t)(f->s - m->text);
}

static int key_version(struct mparse *ps, struct field *f, struct rf_err *err)
{
    uint64_t v;

    if (parse_num(&f[0], UINT32_MAX, &v) < 0)
        return LINE_FAIL(ps, "format version \"%.*s\" is not a number",
                         (int)f[0].n, f[0].s);
    if (v != MANIFEST_VERSION)
        return rf_err_set(err, -EPROTO,
                          "line %u (byte %zu): format version %" PRIu64
                          ", this reader knows version %u: repack or upgrade",
                          ps->lineno, ps->off, v, MANIFEST_VERSION);
    ps->m->version = (uint32_t)v;
    return 0;
}

static int key_samples(struct mparse *ps, struct field *f, struct rf_err *err)
{
    if (parse_num(&f[0], UINT64_MAX, &ps->m->samples) < 0)
        return LINE_FAIL(ps, "samples \"%.*s\" is not a number", (int)f[0].n,
                         f[0].s);
    ps->have_samples = 1;
    return 0;
}

static int key_kind(struct mparse *ps, struct field *f, struct rf_err *err)
{
    int k = dataset_kind_parse(f[0].s, f[0].n);

    if (k < 0)
        return LINE_FAIL(ps, "unknown kind \"%.*s\" (jpeg, tensor, bytes, fields)",
                         (int)f[0].n, f[0].s);
    ps->m->kind = (enum dataset_kind)k;
    ps->have_kind = 1;
    return 0;
}

static int key_dtype(struct mparse *ps, struct field *f, struct rf_err *err)
{
    int d = dataset_dtype_parse(f[0].s, f[0].n);

    if (d < 0)
        return LINE_FAIL(ps, "unknown dtype \"%.*s\" (%s)", (int)f[0].n, f[0].s,
                         dataset_dtype_names());
    ps->m->dtype = (enum dataset_dtype)d;
    return 0;
}

static int key_shape(struct mparse *ps, struct field *f, struct rf_err *err)
{
    struct manifest *m = ps->m;
    size_t i = 0;

    m->ndim = 0;
    while (i <= f[0].n) {
        size_t j = i;
        struct field d;

        while (j < f[0].n && f[0].s[j] != 'x')
            j++;
        d.s = f[0].s + i;
        d.n = j - i;
        if (m->ndim == DATASET_MAX_DIMS)
            return LINE_FAIL(ps, "shape has more than %d dims",
                             DATASET_MAX_DIMS);
        if (parse_num(&d, DATASET_RECORD_MAX, &m->dims[m->ndim]) < 0 ||
            m->dims[m->ndim] == 0)
            return LINE_FAIL(ps, "shape \"%.*s\": dim %u is not a number "
                             "from 1 to %u", (int)f[0].n, f[0].s, m->ndim,
                             DATASET_RECORD_MAX);
        m->ndim++;
        i = j + 1;
    }
    return 0;
}

static int key_codec(struct mparse *ps, struct field *f, struct rf_err *err)
{
    int c = codec_parse(f[0].s, f[0].n);

    if (c < 0)
        return LINE_FAIL(ps, "unknown codec \"%.*s\" (none, zstd)",
                         (int)f[0].n, f[0].s);
    ps->m->codec = (unsigned)c;
    return 0;
}

static int key_max(struct mparse *ps, struct field *f, uint32_t *out,
                   const char *what, struct rf_err *err)
{
    uint64_t v;

    if (parse_num(&f[0], DATASET_RECORD_MAX, &v) < 0)
        return LINE_FAIL(ps, "%s \"%.*s\" is not a number up to %u", what,
                         (int)f[0].n, f[0].s, DATASET_RECORD_MAX);
    *out = (uint32_t)v;
    return 0;
}

static int key_max_stored(struct mparse *ps, struct field *f,
                          struct rf_err *err)
{
    return key_max(ps, f, &ps->m->max_stored, "max_stored", err);
}

static int key_max_decoded(struct mparse *ps, struct field *f,
                           struct rf_err *err)
{
    return key_max(ps, f, &ps->m->max_decoded, "max_decoded", err);
}

/* max_side and max_side_quality: in range here, together and for kind
 * jpeg only in manifest_check (they may come before the kind line). */
static int key_max_side(struct mparse *ps, struct field *f,
                        struct rf_err *err)
{
    uint64_t v;

    if (parse_num(&f[0], MANIFEST_MAX_SIDE_MAX, &v) < 0 ||
        v < MANIFEST_MAX_SIDE_MIN)
        return LINE_FAIL(ps, "max_side \"%.*s\" is not a number from %u to "
                         "%u", (int)f[0].n, f[0].s, MANIFEST_MAX_SIDE_MIN,
                         MANIFEST_MAX_SIDE_MAX);
    ps->m->max_side = (uint32_t)v;
    return 0;
}

static int key_max_side_quality(struct mparse *ps, struct field *f,
                                struct rf_err *err)
{
    uint64_t v;

    if (parse_num(&f[0], MANIFEST_QUALITY_MAX, &v) < 0 ||
        v < MANIFEST_QUALITY_MIN)
        return LINE_FAIL(ps, "max_side_quality \"%.*s\" is not a number "
                         "from %u to %u", (int)f[0].n, f[0].s,
                         MANIFEST_QUALITY_MIN, MANIFEST_QUALITY_MAX);
    ps->m->max_side_quality = (uint32_t)v;
    return 0;
}

/* "classes N" / "shards N": N is bounded by the lines the input can hold. */
static int key_count(struct mparse *ps, struct field *f, uint64_t cap,
                     size_t min_line, size_t elem, void **arr, uint32_t *n,
                     const char *what, struct rf_err *err)
{
    uint64_t v;

    if (parse_num(&f[0], cap, &v) < 0)
        return LINE_FAIL(ps, "%s \"%.*s\" is not a number up to %" PRIu64,
                         what, (int)f[0].n, f[0].s, cap);
    if (v > ps->input_len / min_line)
        return LINE_FAIL(ps, "%s %" PRIu64 ", but the file is too short to "
                         "hold that many lines", what, v);
    *arr = calloc(v ? v : 1, elem);
    if (!*arr)
        return rf_err_set(err, -ENOMEM, "line %u: out of memory", ps->lineno);
    *n = (uint32_t)v;
    return 0;
}

/* The words of jpeg_restart's values; DATASET_JPEG_AS_IS has none (no
 * key is written for it). */
static const char *const jpeg_restart_words[DATASET_JPEG_RESTART_COUNT] = {
    [DATASET_JPEG_RESTART_LOSSLESS] = "lossless",
};

/* jpeg_restart: a known value here, for kind jpeg only in manifest_check
 * (it may come before the kind line). */
static int key_jpeg_restart(struct mparse *ps, struct field *f,
                            struct rf_err *err)
{
    for (unsigned v = 0; v < DATASET_JPEG_RESTART_COUNT; v++) {
        const char *w = jpeg_restart_words[v];

        if (w && strlen(w) == f[0].n && memcmp(w, f[0].s, f[0].n) == 0) {
            ps->m->jpeg_restart = (enum dataset_jpeg_restart)v;
            return 0;
        }
    }
    return LINE_FAIL(ps, "jpeg_restart \"%.*s\": unknown value (this reader "
                     "knows \"lossless\"; a newer ringfeed-pack wrote it? "
                     "upgrade)", (int)(f[0].n > 64 ? 64 : f[0].n), f[0].s);
}

/* raw_images N: 1..samples records are RFPX pixel records (pixels.h).
 * Refused here, naming the line, when the samples or kind line came
 * before it (as a writer puts them) and disagrees; manifest_check applies
 * the same rules whatever the order. */
static int key_raw_images(struct mparse *ps, struct field *f,
                          struct rf_err *err)
{
    struct manifest *m = ps->m;
    uint64_t v;

    if (parse_num(&f[0], UINT64_MAX, &v) < 0 || v == 0)
        return LINE_FAIL(ps, "raw_images \"%.*s\" is not a number from 1 "
                         "(a dataset without RFPX records has no raw_images "
                         "line)", (int)(f[0].n > 64 ? 64 : f[0].n), f[0].s);
    if (ps->have_samples && v > m->samples)
        return LINE_FAIL(ps, "raw_images %" PRIu64 " but samples %" PRIu64
                         ": more RFPX records than records", v, m->samples);
    if (ps->have_kind && m->kind != DATASET_JPEG)
        return LINE_FAIL(ps, "raw_images is for kind jpeg only, this is "
                         "kind %s", dataset_kind_name(m->kind));
    m->raw_images = v;
    return 0;
}

/* One side of image_shape: 1..PX_SIDE_MAX, digits only, no leading 0. */
static int parse_side(const char *s, size_t n, uint32_t *out)
{
    struct field f = { (char *)s, n };
    uint64_t v;

    if (parse_num(&f, PX_SIDE_MAX, &v) < 0 || v == 0)
        return -EINVAL;
    *out = (uint32_t)v;
    return 0;
}

/* image_shape HxW: every image record decodes to height H and width W,
 * each 1..PX_SIDE_MAX.  Refused on another kind, naming the line, when the
 * kind line came before it; manifest_check applies the rule whatever the
 * order. */
static int key_image_shape(struct mparse *ps, struct field *f, struct rf_err *err)
{
    struct manifest *m = ps->m;
    const char *x = memchr(f[0].s, 'x', f[0].n);
    uint32_t h, w;

    if (!x || parse_side(f[0].s, (size_t)(x - f[0].s), &h) < 0 ||
        parse_side(x + 1, f[0].n - (size_t)(x - f[0].s) - 1, &w) < 0)
        return LINE_FAIL(ps, "image_shape \"%.*s\" is not HxW, each side a number "
                         "1..%u (a dataset whose images differ in size has no "
                         "image_shape line)", (int)(f[0].n > 64 ? 64 : f[0].n), f[0].s,
                         PX_SIDE_MAX);
    if (ps->have_kind && m->kind != DATASET_JPEG)
        return LINE_FAIL(ps, "image_shape is for kind jpeg only, this is "
                         "kind %s", dataset_kind_name(m->kind));
    m->image_height = h;
    m->image_width = w;
    return 0;
}

static int key_classes(struct mparse *ps, struct field *f, struct rf_err *err)
{
    void *arr = NULL;
    int r = key_count(ps, f, DATASET_MAX_CLASSES, sizeof("class 0 x\n") - 1,
                      sizeof(uint32_t), &arr, &ps->m->nclasses, "classes",
                      err);

    ps->m->classes = arr;
    return r;
}

static int key_class(struct mparse *ps, struct field *f, struct rf_err *err)
{
    struct manifest *m = ps->m;
    uint64_t i;

    if (!m->classes)
        return LINE_FAIL(ps, "class line before the classes line");
    if (parse_num(&f[0], UINT32_MAX, &i) < 0 || i != ps->classes_filled)
        return LINE_FAIL(ps, "class number \"%.*s\", expected %" PRIu32,
                         (int)f[0].n, f[0].s, ps->classes_filled);
    if (i >= m->nclasses)
        return LINE_FAIL(ps, "class %" PRIu64 " but classes says %" PRIu32,
                         i, m->nclasses);
    if (!valid_class_name(f[1].s, f[1].n))
        return LINE_FAIL(ps, "class %" PRIu64 ": name is empty, too long or "
                         "holds a control character", i);
    m->classes[i] = cut(m, &f[1]);
    ps->classes_filled++;
    return 0;
}

static int key_dict(struct mparse *ps, struct field *f, struct rf_err *err)
{
    struct manifest *m = ps->m;
    uint64_t size;

    if (!manifest_valid_file_name(f[0].s, f[0].n))
        return LINE_FAIL(ps, "dict file name \"%.*s\" is not 1..255 of "
                         "[A-Za-z0-9._-] without a leading '.'",
                         (int)f[0].n, f[0].s);
    if (parse_num(&f[1], DATASET_DICT_MAX, &size) < 0 || size == 0)
        return LINE_FAIL(ps, "dict size \"%.*s\" is not a number from 1 to "
                         "%u", (int)f[1].n, f[1].s, DATASET_DICT_MAX);
    if (parse_crc(&f[2], &m->dict_crc) < 0)
        return LINE_FAIL(ps, "dict checksum \"%.*s\" is not 8 lowercase hex "
                         "digits", (int)f[2].n, f[2].s);
    m->has_dict = 1;
    m->dict_size = (uint32_t)size;
    m->dict_name = cut(m, &f[0]);
    return 0;
}

static int key_sources(struct mparse *ps, struct field *f, struct rf_err *err)
{
    struct manifest *m = ps->m;

    if (!manifest_valid_file_name(f[0].s, f[0].n))
        return LINE_FAIL(ps, "sources file name \"%.*s\" is not 1..255 of "
                         "[A-Za-z0-9._-] without a leading '.'",
                         (int)f[0].n, f[0].s);
    if (parse_num(&f[1], SOURCES_FILE_MAX, &m->sources_size) < 0 ||
        m->sources_size == 0)
        return LINE_FAIL(ps, "sources size \"%.*s\" is not a number from 1 to "
                         "%llu", (int)f[1].n, f[1].s,
                         (unsigned long long)SOURCES_FILE_MAX);
    if (parse_crc(&f[2], &m->sources_crc) < 0)
        return LINE_FAIL(ps, "sources checksum \"%.*s\" is not 8 lowercase "
                         "hex digits", (int)f[2].n, f[2].s);
    m->has_sources = 1;
    m->sources_name = cut(m, &f[0]);
    return 0;
}

static int key_subset(struct mparse *ps, struct field *f, struct rf_err *err)
{
    struct manifest *m = ps->m;
    struct manifest_subset *ss;

    if (m->nsubsets >= SUBSET_MAX)
        return LINE_FAIL(ps, "more than %u subset lines", SUBSET_MAX);
    ss = &m->subsets[m->nsubsets];
    if (!subset_name_ok(f[0].s, f[0].n))
        return LINE_FAIL(ps, "subset name \"%.*s\" is not 1..%u of [A-Za-z0-9_-] starting "
                         "with a letter", (int)(f[0].n > 64 ? 64 : f[0].n), f[0].s,
                         SUBSET_NAME_MAX);
    if (!manifest_valid_file_name(f[1].s, f[1].n))
        return LINE_FAIL(ps, "subset %.*s: file name \"%.*s\" is not 1..255 of "
                         "[A-Za-z0-9._-] without a leading '.'", (int)f[0].n, f[0].s,
                         (int)f[1].n, f[1].s);
    if (parse_num(&f[2], UINT64_MAX, &ss->count) < 0 || ss->count == 0)
        return LINE_FAIL(ps, "subset %.*s: count \"%.*s\" is not a number from 1", (int)f[0].n,
                         f[0].s, (int)f[2].n, f[2].s);
    if (parse_num(&f[3], SUBSET_FILE_MAX, &ss->bytes) < 0)
        return LINE_FAIL(ps, "subset %.*s: size \"%.*s\" is not a number up to %llu",
                         (int)f[0].n, f[0].s, (int)f[3].n, f[3].s,
                         (unsigned long long)SUBSET_FILE_MAX);
    if (parse_crc(&f[4], &ss->crc) < 0)
        return LINE_FAIL(ps, "subset %.*s: checksum \"%.*s\" is not 8 lowercase hex digits",
                         (int)f[0].n, f[0].s, (int)f[4].n, f[4].s);
    ss->name = cut(m, &f[0]);
    ss->file = cut(m, &f[1]);
    m->nsubsets++;
    return 0;
}

static int key_shards(struct mparse *ps, struct field *f, struct rf_err *err)
{
    void *arr = NULL;
    int r = key_count(ps, f, DATASET_MAX_SHARDS,
                      sizeof("shard 0 a 0 0 00000000\n") - 1,
                      sizeof(struct manifest_shard), &arr, &ps->m->nshards,
                      "shards", err);

    ps->m->shards = arr;
    return r;
}

static int key_shard(struct mparse *ps, struct field *f, struct rf_err *err)
{
    struct manifest *m = ps->m;
    struct manifest_shard *s;
    uint64_t i;

    if (!m->shards)
        return LINE_FAIL(ps, "shard line before the shards line");
    if (parse_num(&f[0], UINT32_MAX, &i) < 0 || i != ps->shards_filled)
        return LINE_FAIL(ps, "shard number \"%.*s\", expected %" PRIu32,
                         (int)f[0].n, f[0].s, ps->shards_filled);
    if (i >= m->nshards)
        return LINE_FAIL(ps, "shard %" PRIu64 " but shards says %" PRIu32,
                         i, m->nshards);
    s = &m->shards[i];
    if (!manifest_valid_file_name(f[1].s, f[1].n))
        return LINE_FAIL(ps, "shard %" PRIu64 ": file name \"%.*s\" is not "
                         "1..255 of [A-Za-z0-9._-] without a leading '.'",
                         i, (int)f[1].n, f[1].s);
    if (parse_num(&f[2], UINT64_MAX, &s->records) < 0)
        return LINE_FAIL(ps, "shard %" PRIu64 ": record count \"%.*s\" is "
                         "not a number", i, (int)f[2].n, f[2].s);
    if (parse_num(&f[3], INT64_MAX, &s->bytes) < 0)
        return LINE_FAIL(ps, "shard %" PRIu64 ": file size \"%.*s\" is not "
                         "a number", i, (int)f[3].n, f[3].s);
    if (parse_crc(&f[4], &s->index_crc) < 0)
        return LINE_FAIL(ps, "shard %" PRIu64 ": index checksum \"%.*s\" is "
                         "not 8 lowercase hex digits", i, (int)f[4].n,
                         f[4].s);
    s->name = cut(m, &f[1]);
    ps->shards_filled++;
    return 0;
}

/* "fields N": N field lines follow, 1..SCHEMA_MAX_FIELDS. */
static int key_fields(struct mparse *ps, struct field *f, struct rf_err *err)
{
    uint64_t v;

    if (parse_num(&f[0], SCHEMA_MAX_FIELDS, &v) < 0 || v == 0)
        return LINE_FAIL(ps, "fields \"%.*s\" is not a number from 1 to %d",
                         (int)f[0].n, f[0].s, SCHEMA_MAX_FIELDS);
    ps->fields_declared = (uint32_t)v;
    ps->have_fields = 1;
    return 0;
}

/* "field NAME KIND OPTIONS...": one field of the schema (schema.h). */
static int key_field(struct mparse *ps, struct field *f, struct rf_err *err)
{
    struct schema_field sf;
    char of[SCHEMA_NAME_MAX + 1];
    struct rf_err e;

    if (!ps->have_fields)
        return LINE_FAIL(ps, "field line before the fields line");
    if (ps->m->schema.n >= ps->fields_declared)
        return LINE_FAIL(ps, "more field lines than fields says (%" PRIu32 ")",
                         ps->fields_declared);
    if (schema_field_parse(f[0].s, f[0].n, &sf, of, &e) < 0 ||
        schema_add(&ps->m->schema, &sf, of, &e) < 0)
        return LINE_FAIL(ps, "%s", e.msg);
    return 0;
}

static int key_end(struct mparse *ps, struct field *f, struct rf_err *err)
{
    (void)f;
    (void)err;
    ps->ended = 1;
    return 0;
}

enum { ONCE = 0, REPEAT = 1, REST = 2 };

static const struct key_def {
    const char *key;
    unsigned nfields;
    unsigned flags;     /* REPEAT: may appear many times; REST: last field
                           runs to the end of the line */
    int required;
    int (*fn)(struct mparse *ps, struct field *f, struct rf_err *err);
} keys[] = {
    {"ringfeed-dataset", 1, ONCE, 1, key_version},
    {"samples", 1, ONCE, 1, key_samples},
    {"kind", 1, ONCE, 1, key_kind},
    {"dtype", 1, ONCE, 0, key_dtype},
    {"shape", 1, ONCE, 0, key_shape},
    {"codec", 1, ONCE, 1, key_codec},
    {"max_stored", 1, ONCE, 1, key_max_stored},
    {"max_decoded", 1, ONCE, 1, key_max_decoded},
    {"max_side", 1, ONCE, 0, key_max_side},
    {"max_side_quality", 1, ONCE, 0, key_max_side_quality},
    {"jpeg_restart", 1, ONCE, 0, key_jpeg_restart},
    {"raw_images", 1, ONCE, 0, key_raw_images},
    {"image_shape", 1, ONCE, 0, key_image_shape},
    {"fields", 1, ONCE, 0, key_fields},
    {"field", 1, REPEAT | REST, 0, key_field},
    {"classes", 1, ONCE, 1, key_classes},
    {"class", 2, REPEAT | REST, 0, key_class},
    {"dict", 3, ONCE, 0, key_dict},
    {"sources", 3, ONCE, 0, key_sources},
    {"subset", 5, REPEAT, 0, key_subset},
    {"shards", 1, ONCE, 1, key_shards},
    {"shard", 5, REPEAT, 0, key_shard},
    {"end", 0, ONCE, 1, key_end},
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))
_Static_assert(NKEYS <= 32, "struct mparse's seen has a bit per key");

static int parse_line(struct mparse *ps, char *s, size_t n,
                      struct rf_err *err)
{
    size_t klen = 0;
    const struct key_def *k = NULL;
    struct field f[MAX_FIELDS];
    unsigned ki;

    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return LINE_FAIL(ps, "control character 0x%02x at column %zu",
                             (unsigned char)s[i], i + 1);
    if (n == 0 || s[0] == '#')
        return 0;
    if (ps->ended)
        return LINE_FAIL(ps, "text after the end line");
    while (klen < n && s[klen] != ' ')
        klen++;
    for (ki = 0; ki < NKEYS; ki++)
        if (strlen(keys[ki].key) == klen && memcmp(keys[ki].key, s, klen) == 0) {
            k = &keys[ki];
            break;
        }
    if (!k)
        return LINE_FAIL(ps, "unknown key \"%.*s\"", (int)(klen > 64 ? 64 : klen),
                         s);
    if (ps->seen == 0 && ki != 0)
        return LINE_FAIL(ps, "the first line must be \"ringfeed-dataset %u\" "
                         "(not a ringfeed manifest?)", MANIFEST_VERSION);
    if (!(k->flags & REPEAT) && (ps->seen & (1u << ki)))
        return LINE_FAIL(ps, "key \"%s\" given twice", k->key);
    ps->seen |= 1u << ki;
    if (k->nfields == 0 ? klen != n
        : klen == n || split_fields(s + klen + 1, n - klen - 1, k->nfields,
                                    k->flags & REST, f) < 0)
        return LINE_FAIL(ps, "\"%s\" takes %u field%s separated by single "
                         "spaces", k->key, k->nfields,
                         k->nfields == 1 ? "" : "s");
    return k->fn(ps, f, err);
}

int manifest_parse(const char *buf, size_t len, struct manifest *m,
                   struct rf_err *err)
{
    struct mparse ps = {.m = m, .input_len = len};
    size_t pos = 0;
    int r;

    memset(m, 0, sizeof(*m));
    if (len > DATASET_MANIFEST_MAX)
        return rf_err_set(err, -EFBIG, "%zu bytes, over the %u-byte limit "
                          "for a manifest", len, DATASET_MANIFEST_MAX);
    m->text = malloc(len + 1);
    if (!m->text)
        return rf_err_set(err, -ENOMEM, "out of memory");
    memcpy(m->text, buf, len);
    m->text[len] = '\0';
    m->text_len = m->text_cap = len + 1;
    while (pos < len) {
        char *line = m->text + pos;
        char *nl = memchr(line, '\n', len - pos);

        ps.lineno++;
        ps.off = pos;
        if (!nl) {
            r = LINE_FAIL(&ps, "no newline at the end: truncated?");
            goto fail;
        }
        r = parse_line(&ps, line, (size_t)(nl - line), err);
        if (r < 0)
            goto fail;
        pos = (size_t)(nl - m->text) + 1;
    }
    ps.lineno++;
    ps.off = pos;
    for (unsigned ki = 0; ki < NKEYS; ki++)
        if (keys[ki].required && !(ps.seen & (1u << ki))) {
            r = LINE_FAIL(&ps, "end of file: no \"%s\" line%s", keys[ki].key,
                          ki == NKEYS - 1 ? " (truncated?)" : "");
            goto fail;
        }
    if (ps.classes_filled != m->nclasses) {
        r = LINE_FAIL(&ps, "end of file: %" PRIu32 " class lines, classes "
                      "says %" PRIu32, ps.classes_filled, m->nclasses);
        goto fail;
    }
    if (m->schema.n != ps.fields_declared) {
        r = LINE_FAIL(&ps, "end of file: %" PRIu32 " field lines, fields "
                      "says %" PRIu32, m->schema.n, ps.fields_declared);
        goto fail;
    }
    if (ps.shards_filled != m->nshards) {
        r = LINE_FAIL(&ps, "end of file: %" PRIu32 " shard lines, shards "
                      "says %" PRIu32, ps.shards_filled, m->nshards);
        goto fail;
    }
    r = manifest_check(m, err);
    if (r < 0)
        goto fail;
    /* checked (on a copy) above: this fills each field's row_bytes, which
     * schema_record_split divides by */
    if (m->schema.n)
        schema_check(&m->schema, NULL);
    return 0;

fail:
    manifest_free(m);
    return r;
}

void manifest_free(struct manifest *m)
{
    if (!m)
        return;
    free(m->classes);
    free(m->shards);
    free(m->text);
    memset(m, 0, sizeof(*m));
}

const char *manifest_class_name(const struct manifest *m, uint32_t i)
{
    return i < m->nclasses ? m->text + m->classes[i] : NULL;
}

const char *manifest_shard_name(const struct manifest *m, uint32_t i)
{
    return i < m->nshards ? m->text + m->shards[i].name : NULL;
}

const char *manifest_sources_name(const struct manifest *m)
{
    return m->has_sources ? m->text + m->sources_name : NULL;
}

const char *manifest_subset_name(const struct manifest *m, uint32_t i)
{
    return i < m->nsubsets ? m->text + m->subsets[i].name : NULL;
}

const char *manifest_subset_file(const struct manifest *m, uint32_t i)
{
    return i < m->nsubsets ? m->text + m->subsets[i].file : NULL;
}

int manifest_subset_find(const struct manifest *m, const char *name)
{
    for (uint32_t i = 0; i < m->nsubsets; i++)
        if (strcmp(manifest_subset_name(m, i), name) == 0)
            return (int)i;
    return -1;
}

int manifest_is_subset_line(const char *s, size_t n)
{
    return n > 7 && memcmp(s, "subset ", 7) == 0;
}

const char *manifest_dict_name(const struct manifest *m)
{
    return m->has_dict ? m->text + m->dict_name : NULL;
}

/* Appends the NUL-terminated s to the text block; returns its offset. */
static long text_add(struct manifest *m, const char *s)
{
    size_t n = strlen(s) + 1;
    long off;

    if (m->text_len + n > m->text_cap) {
        size_t cap = m->text_cap ? m->text_cap : 256;
        char *t;

        while (cap < m->text_len + n)
            cap *= 2;
        if (cap > UINT32_MAX)
            return -ENOMEM;
        t = realloc(m->text, cap);
        if (!t)
            return -ENOMEM;
        m->text = t;
        m->text_cap = cap;
    }
    memcpy(m->text + m->text_len, s, n);
    off = (long)m->text_len;
    m->text_len += n;
    return off;
}

/* Grows a builder array to hold n+1 elements of size elem. */
static int grow(void **arr, uint32_t n, size_t elem)
{
    void *p;

    if ((n & (n - 1)) != 0 && n != 0)
        return 0; /* capacity is the next power of two: room left */
    p = realloc(*arr, (n ? 2 * (size_t)n : 1) * elem);
    if (!p)
        return -ENOMEM;
    *arr = p;
    return 0;
}

int manifest_add_class(struct manifest *m, const char *name)
{
    long off;

    if (!valid_class_name(name, strlen(name)) ||
        m->nclasses >= DATASET_MAX_CLASSES)
        return -EINVAL;
    if (grow((void **)&m->classes, m->nclasses, sizeof(*m->classes)) < 0)
        return -ENOMEM;
    off = text_add(m, name);
    if (off < 0)
        return (int)off;
    m->classes[m->nclasses++] = (uint32_t)off;
    return 0;
}

int manifest_add_shard(struct manifest *m, const char *file, uint64_t records,
                       uint64_t bytes, uint32_t index_crc)
{
    long off;

    if (!manifest_valid_file_name(file, strlen(file)) ||
        m->nshards >= DATASET_MAX_SHARDS)
        return -EINVAL;
    if (grow((void **)&m->shards, m->nshards, sizeof(*m->shards)) < 0)
        return -ENOMEM;
    off = text_add(m, file);
    if (off < 0)
        return (int)off;
    m->shards[m->nshards++] = (struct manifest_shard){
        .name = (uint32_t)off, .records = records, .bytes = bytes,
        .index_crc = index_crc};
    return 0;
}

int manifest_set_dict(struct manifest *m, const char *file, uint32_t size,
                      uint32_t crc)
{
    long off;

    if (!manifest_valid_file_name(file, strlen(file)))
        return -EINVAL;
    off = text_add(m, file);
    if (off < 0)
        return (int)off;
    m->has_dict = 1;
    m->dict_name = (uint32_t)off;
    m->dict_size = size;
    m->dict_crc = crc;
    return 0;
}

int manifest_set_sources(struct manifest *m, const char *file, uint64_t size,
                         uint32_t crc)
{
    long off;

    if (!manifest_valid_file_name(file, strlen(file)))
        return -EINVAL;
    off = text_add(m, file);
    if (off < 0)
        return (int)off;
    m->has_sources = 1;
    m->sources_name = (uint32_t)off;
    m->sources_size = size;
    m->sources_crc = crc;
    return 0;
}

int manifest_add_subset(struct manifest *m, const char *name, const char *file,
                        uint64_t count, uint64_t bytes, uint32_t crc)
{
    long a, b;

    if (!subset_name_ok(name, strlen(name)) || !manifest_valid_file_name(file, strlen(file)) ||
        m->nsubsets >= SUBSET_MAX)
        return -EINVAL;
    for (uint32_t i = 0; i < m->nsubsets; i++)
        if (strcmp(manifest_subset_name(m, i), name) == 0 ||
            strcmp(manifest_subset_file(m, i), file) == 0)
            return -EINVAL;
    a = text_add(m, name);
    if (a < 0)
        return (int)a;
    b = text_add(m, file);
    if (b < 0)
        return (int)b;
    m->subsets[m->nsubsets++] = (struct manifest_subset){
        .name = (uint32_t)a, .file = (uint32_t)b, .count = count, .bytes = bytes, .crc = crc};
    return 0;
}

/* The subset lines' rules: count within the samples, a size its file can
 * have, names and files unique. */
static int check_subsets(const struct manifest *m, struct rf_err *err)
{
    for (uint32_t i = 0; i < m->nsubsets; i++) {
        const struct manifest_subset *ss = &m->subsets[i];
        const char *name = manifest_subset_name(m, i);

        if (ss->count == 0 || ss->count > m->samples)
            return rf_err_set(err, -EBADMSG, "subset %s: %" PRIu64 " indices, the dataset "
                              "has %" PRIu64 " samples", name, ss->count, m->samples);
        if (ss->bytes < SUBSET_HEADER_SIZE + 2 || ss->bytes > SUBSET_FILE_MAX ||
            (ss->bytes - SUBSET_HEADER_SIZE) / 20 > ss->count)
            return rf_err_set(err, -EBADMSG, "subset %s: %" PRIu64 " bytes cannot be the "
                              "file of %" PRIu64 " indices", name, ss->bytes, ss->count);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(manifest_subset_name(m, j), name) == 0 ||
                strcmp(manifest_subset_file(m, j), manifest_subset_file(m, i)) == 0)
                return rf_err_set(err, -EBADMSG, "subset %s: its name or its file %s is "
                                  "named twice", name, manifest_subset_file(m, i));
    }
    return 0;
}

int manifest_check(const struct manifest *m, struct rf_err *err)
{
    uint64_t total = 0, tensor = 0;

    if (m->version != MANIFEST_VERSION)
        return rf_err_set(err, -EPROTO, "format version %" PRIu32
                          ", this reader knows version %u", m->version,
                          MANIFEST_VERSION);
    if (!dataset_kind_name(m->kind) || !codec_name(m->codec))
        return rf_err_set(err, -EBADMSG, "unknown kind or codec");
    if (m->kind == DATASET_TENSOR) {
        if (m->dtype == DATASET_DTYPE_NONE || m->ndim == 0)
            return rf_err_set(err, -EBADMSG, "kind tensor needs a dtype and "
                              "a shape line");
        tensor = dataset_tensor_bytes(m->dtype, m->dims, m->ndim);
        if (tensor == 0)
            return rf_err_set(err, -EBADMSG, "tensor shape holds more than "
                              "%u bytes", DATASET_RECORD_MAX);
    } else if (m->dtype != DATASET_DTYPE_NONE || m->ndim != 0) {
        return rf_err_set(err, -EBADMSG, "dtype and shape are for kind "
                          "tensor only, this is kind %s",
                          dataset_kind_name(m->kind));
    }
    if ((m->kind == DATASET_FIELDS) != (m->schema.n != 0))
        return rf_err_set(err, -EBADMSG, m->schema.n
                          ? "fields and field lines are for kind fields only, "
                            "this is kind %s"
                          : "kind %s needs a fields line and its field lines",
                          dataset_kind_name(m->kind));
    if (m->schema.n) {
        struct schema s = m->schema;
        struct rf_err e;

        if (schema_check(&s, &e) < 0)
            return rf_err_set(err, -EBADMSG, "%s", e.msg);
    }
    if (m->max_stored > DATASET_RECORD_MAX ||
        m->max_decoded > DATASET_RECORD_MAX)
        return rf_err_set(err, -EBADMSG, "max_stored/max_decoded over the "
                          "%u-byte record limit", DATASET_RECORD_MAX);
    if (m->codec == DATASET_CODEC_NONE && m->max_stored != m->max_decoded)
        return rf_err_set(err, -EBADMSG, "codec none but max_stored %" PRIu32
                          " != max_decoded %" PRIu32, m->max_stored,
                          m->max_decoded);
    if (tensor && m->samples && m->max_decoded != tensor)
        return rf_err_set(err, -EBADMSG, "max_decoded %" PRIu32 " is not the "
                          "tensor size %" PRIu64, m->max_decoded, tensor);
    if ((m->max_side != 0) != (m->max_side_quality != 0))
        return rf_err_set(err, -EBADMSG, "max_side and max_side_quality "
                          "come together: one without the other");
    if (m->max_side && m->kind != DATASET_JPEG)
        return rf_err_set(err, -EBADMSG, "max_side is for kind jpeg only, "
                          "this is kind %s", dataset_kind_name(m->kind));
    if (m->max_side && (m->max_side < MANIFEST_MAX_SIDE_MIN ||
                        m->max_side > MANIFEST_MAX_SIDE_MAX ||
                        m->max_side_quality < MANIFEST_QUALITY_MIN ||
                        m->max_side_quality > MANIFEST_QUALITY_MAX))
        return rf_err_set(err, -EBADMSG, "max_side %" PRIu32 " not in %u..%u "
                          "or max_side_quality %" PRIu32 " not in %u..%u",
                          m->max_side, MANIFEST_MAX_SIDE_MIN,
                          MANIFEST_MAX_SIDE_MAX, m->max_side_quality,
                          MANIFEST_QUALITY_MIN, MANIFEST_QUALITY_MAX);
    if ((unsigned)m->jpeg_restart >= DATASET_JPEG_RESTART_COUNT)
        return rf_err_set(err, -EBADMSG, "jpeg_restart %u unknown",
                          (unsigned)m->jpeg_restart);
    if (m->jpeg_restart != DATASET_JPEG_AS_IS && m->kind != DATASET_JPEG)
        return rf_err_set(err, -EBADMSG, "jpeg_restart is for kind jpeg "
                          "only, this is kind %s", dataset_kind_name(m->kind));
    if (m->raw_images && m->kind != DATASET_JPEG)
        return rf_err_set(err, -EBADMSG, "raw_images is for kind jpeg only, "
                          "this is kind %s", dataset_kind_name(m->kind));
    if (m->raw_images > m->samples)
        return rf_err_set(err, -EBADMSG, "raw_images %" PRIu64 " but samples "
                          "%" PRIu64 ": more RFPX records than records",
                          m->raw_images, m->samples);
    if ((m->image_height || m->image_width) && m->kind != DATASET_JPEG)
        return rf_err_set(err, -EBADMSG, "image_shape is for kind jpeg only, "
                          "this is kind %s", dataset_kind_name(m->kind));
    if (!m->image_height != !m->image_width || m->image_height > PX_SIDE_MAX ||
        m->image_width > PX_SIDE_MAX)
        return rf_err_set(err, -EBADMSG, "image_shape %" PRIu32 "x%" PRIu32
                          ": each side 1..%u, or neither", m->image_height,
                          m->image_width, PX_SIDE_MAX);
    if (m->has_dict && m->codec != DATASET_CODEC_ZSTD)
        return rf_err_set(err, -EBADMSG, "a dict is for codec zstd only");
    if (m->has_dict && (m->dict_size == 0 || m->dict_size > DATASET_DICT_MAX))
        return rf_err_set(err, -EBADMSG, "dict size %" PRIu32 " not in 1..%u",
                          m->dict_size, DATASET_DICT_MAX);
    if (m->has_sources && (m->sources_size > SOURCES_FILE_MAX ||
                           m->samples > m->sources_size / 2))
        return rf_err_set(err, -EBADMSG, "sources size %" PRIu64 " cannot "
                          "hold a line for each of %" PRIu64 " samples (2 "
                          "bytes or more each, at most %llu bytes in all)",
                          m->sources_size, m->samples,
                          (unsigned long long)SOURCES_FILE_MAX);
    if (check_subsets(m, err) < 0)
        return -EBADMSG;
    if (m->nclasses > DATASET_MAX_CLASSES || m->nshards > DATASET_MAX_SHARDS)
        return rf_err_set(err, -EBADMSG, "too many classes or shards");
    for (uint32_t i = 0; i < m->nshards; i++) {
        const struct manifest_shard *s = &m->shards[i];
        uint64_t min;

        if (s->records > (UINT64_MAX - SHARD_HEADER_SIZE) / SHARD_ENTRY_SIZE ||
            total > UINT64_MAX - s->records)
            return rf_err_set(err, -EBADMSG, "shard %" PRIu32 ": record "
                              "count %" PRIu64 " too large", i, s->records);
        min = SHARD_HEADER_SIZE + SHARD_ENTRY_SIZE * s->records;
        if (s->bytes < min)
            return rf_err_set(err, -EBADMSG, "shard %" PRIu32 " (%s): %" PRIu64
                              " bytes cannot hold a header and %" PRIu64
                              " index entries", i, manifest_shard_name(m, i),
                              s->bytes, s->records);
        total += s->records;
    }
    if (total != m->samples)
        return rf_err_set(err, -EBADMSG, "shards hold %" PRIu64 " records but "
                          "samples says %" PRIu64, total, m->samples);
    if (m->samples == 0 && (m->max_stored || m->max_decoded))
        return rf_err_set(err, -EBADMSG, "no samples but max_stored/"
                          "max_decoded are not 0");
    return 0;
}

char *manifest_format(const struct manifest *m, size_t *len)
{
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);

    if (!f)
        return NULL;
    fprintf(f, "# ringfeed dataset manifest (written by ringfeed-pack); do "
            "not edit:\n# shard sizes and checksums are checked on open.\n");
    fprintf(f, "ringfeed-dataset %" PRIu32 "\n", m->version);
    fprintf(f, "samples %" PRIu64 "\n", m->samples);
    fprintf(f, "kind %s\n", dataset_kind_name(m->kind));
    if (m->kind == DATASET_TENSOR) {
        fprintf(f, "dtype %s\nshape ", dataset_dtype_name(m->dtype));
        for (unsigned i = 0; i < m->ndim; i++)
            fprintf(f, "%s%" PRIu64, i ? "x" : "", m->dims[i]);
        fputc('\n', f);
    }
    if (m->schema.n)
        fprintf(f, "fields %" PRIu32 "\n", m->schema.n);
    for (uint32_t i = 0; i < m->schema.n; i++) {
        char line[SCHEMA_LINE_MAX];

        if (schema_field_format(&m->schema, i, line, sizeof(line)) < 0) {
            fclose(f);
            free(out);
            return NULL;
        }
        fprintf(f, "field %s\n", line);
    }
    fprintf(f, "codec %s\n", codec_name(m->codec));
    fprintf(f, "max_stored %" PRIu32 "\nmax_decoded %" PRIu32 "\n",
            m->max_stored, m->max_decoded);
    if (m->max_side)
        fprintf(f, "max_side %" PRIu32 "\nmax_side_quality %" PRIu32 "\n",
                m->max_side, m->max_side_quality);
    if ((unsigned)m->jpeg_restart < DATASET_JPEG_RESTART_COUNT &&
        jpeg_restart_words[m->jpeg_restart])
        fprintf(f, "jpeg_restart %s\n", jpeg_restart_words[m->jpeg_restart]);
    if (m->raw_images)
        fprintf(f, "raw_images %" PRIu64 "\n", m->raw_images);
    if (m->image_height && m->image_width)
        fprintf(f, "image_shape %" PRIu32 "x%" PRIu32 "\n", m->image_height,
                m->image_width);
    fprintf(f, "classes %" PRIu32 "\n", m->nclasses);
    for (uint32_t i = 0; i < m->nclasses; i++)
        fprintf(f, "class %" PRIu32 " %s\n", i, manifest_class_name(m, i));
    if (m->has_dict)
        fprintf(f, "dict %s %" PRIu32 " %08" PRIx32 "\n",
                manifest_dict_name(m), m->dict_size, m->dict_crc);
    if (m->has_sources)
        fprintf(f, "sources %s %" PRIu64 " %08" PRIx32 "\n",
                manifest_sources_name(m), m->sources_size, m->sources_crc);
    for (uint32_t i = 0; i < m->nsubsets; i++)
        fprintf(f, "subset %s %s %" PRIu64 " %" PRIu64 " %08" PRIx32 "\n",
                manifest_subset_name(m, i), manifest_subset_file(m, i), m->subsets[i].count,
                m->subsets[i].bytes, m->subsets[i].crc);
    fprintf(f, "shards %" PRIu32 "\n", m->nshards);
    for (uint32_t i = 0; i < m->nshards; i++)
        fprintf(f, "shard %" PRIu32 " %s %" PRIu64 " %" PRIu64 " %08" PRIx32
                "\n", i, manifest_shard_name(m, i), m->shards[i].records,
                m->shards[i].bytes, m->shards[i].index_crc);
    fprintf(f, "end\n");
    if (ferror(f)) {
        fclose(f);
        free(out);
        return NULL;
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    *len = n;
    return out;
}
