/*
 * pack_show.c - `ringfeed-pack show DIR INDEX [--json]`: one sample's
 * fields, as the workers would split its record: for each field its name,
 * kind, dtype, shape (tensor), rows (ragged, bytes) or image size and
 * format, the CRC-32C of its bytes in the record, and its values when it
 * is small (text: up to SHOW_TEXT_VALUES; --json: up to SHOW_JSON_VALUES,
 * an RFPX image's pixels too, row by row, R G B; an RFPX image adds the
 * CRC-32C of its pixels).  A jpeg or tensor
 * dataset's sample shows its implicit fields (the label is the entry's).
 * Meant for a user looking into a pack, and for tests checking content.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "jsonw.h"
#include "pack.h"

#define SHOW_TEXT_VALUES 16
#define SHOW_JSON_VALUES 65536

static const char usage_text[] =
    "usage: ringfeed-pack show DIR INDEX [--json]\n"
    "\n"
    "Prints sample INDEX (0-based) of the dataset at DIR field by field: name,\n"
    "kind, dtype, shape or rows (or an image's size and format: JPEG or RFPX\n"
    "pixels), the CRC-32C of the field's bytes and, for a small field, its\n"
    "values (an RFPX image adds the CRC-32C of its pixels).  A jpeg or tensor\n"
    "dataset shows its implicit fields (image or tensor, and the label).\n"
    "\n"
    "  --json   one JSON object: {\"index\", \"kind\", \"fields\": [{\"name\",\n"
    "           \"kind\", \"dtype\", \"bytes\", \"crc32c\", ...}]}, with values\n"
    "           up to 65536 of them (bytes as \"hex\")\n"
    "  --help   this text\n";

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    float f;

    if (e == 0x1f) {
        bits = sign | 0x7f800000u | (m << 13);
    } else if (e) {
        bits = sign | ((e + 112) << 23) | (m << 13);
    } else if (m) {                       /* subnormal: m * 2^-24 */
        f = (float)m * 0x1p-24f;
        return sign ? -f : f;
    } else {
        bits = sign;
    }
    memcpy(&f, &bits, 4);
    return f;
}

/* Element i of n bytes of dtype at p as text into buf. */
static void value_text(enum dataset_dtype d, const uint8_t *p, size_t i, int json, char *buf,
                       size_t cap)
{
    double v = 0;
    int is_float = 1;

    switch (d) {
    case DATASET_DTYPE_U8: snprintf(buf, cap, "%u", p[i]); return;
    case DATASET_DTYPE_I8: snprintf(buf, cap, "%d", (int8_t)p[i]); return;
    case DATASET_DTYPE_I16: {
        int16_t x;
        memcpy(&x, p + i * 2, 2);
        snprintf(buf, cap, "%d", x);
        return;
    }
    case DATASET_DTYPE_U16: {
        uint16_t x;
        memcpy(&x, p + i * 2, 2);
        snprintf(buf, cap, "%u", x);
        return;
    }
    case DATASET_DTYPE_I32: {
        int32_t x;
        memcpy(&x, p + i * 4, 4);
        snprintf(buf, cap, "%" PRId32, x);
        return;
    }
    case DATASET_DTYPE_I64: {
        int64_t x;
        memcpy(&x, p + i * 8, 8);
        snprintf(buf, cap, "%" PRId64, x);
        return;
    }
    case DATASET_DTYPE_F16: {
        uint16_t x;
        memcpy(&x, p + i * 2, 2);
        v = half_to_float(x);
        break;
    }
    case DATASET_DTYPE_BF16: {
        uint16_t x;
        uint32_t bits;
        float f;
        memcpy(&x, p + i * 2, 2);
        bits = (uint32_t)x << 16;
        memcpy(&f, &bits, 4);
        v = f;
        break;
    }
    case DATASET_DTYPE_F32: {
        float f;
        memcpy(&f, p + i * 4, 4);
        v = f;
        break;
    }
    case DATASET_DTYPE_F64:
        memcpy(&v, p + i * 8, 8);
        break;
    default:
        is_float = 0;
        break;
    }
    if (!is_float)
        snprintf(buf, cap, "?");
    else if (isnan(v))
        snprintf(buf, cap, json ? "\"nan\"" : "nan");
    else if (isinf(v))
        snprintf(buf, cap, json ? "\"%sinf\"" : "%sinf", v < 0 ? "-" : "");
    else
        snprintf(buf, cap, "%.17g", v);
}

static void print_values(enum dataset_dtype d, const uint8_t *p, uint64_t n, int json)
{
    char buf[64];

    if (json) {
        fputs(", \"values\": [", stdout);
        for (uint64_t i = 0; i < n; i++) {
            value_text(d, p, (size_t)i, 1, buf, sizeof(buf));
            printf("%s%s", i ? ", " : "", buf);
        }
        fputc(']', stdout);
        return;
    }
    fputs("  [", stdout);
    for (uint64_t i = 0; i < n; i++) {
        value_text(d, p, (size_t)i, 0, buf, sizeof(buf));
        printf("%s%s", i ? " " : "", buf);
    }
    fputc(']', stdout);
}

/* The bytes of a bytes field: JSON "hex", text a quoted, escaped string. */
static void print_bytes(const uint8_t *p, size_t n, int json)
{
    if (json) {
        fputs(", \"hex\": \"", stdout);
        for (size_t i = 0; i < n; i++)
            printf("%02x", p[i]);
        fputc('"', stdout);
        return;
    }
    fputs("  \"", stdout);
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"' || p[i] == '\\')
            printf("\\%c", p[i]);
        else if (p[i] >= 0x20 && p[i] < 0x7f)
            fputc(p[i], stdout);
        else
            printf("\\x%02x", p[i]);
    }
    fputc('"', stdout);
}

/* Field i of a sample; returns 0, or -1 when its image part is bad (said). */
static int show_field(const struct dataset_info *info, uint32_t i, const uint8_t *p, size_t n,
                      uint32_t label, int json, uint32_t crc)
{
    const struct schema_field *f = &info->schema.f[i];
    int legacy_label = info->kind != DATASET_FIELDS && i == 1;
    const char *dt = dataset_dtype_name(f->dtype);
    int limit = json ? SHOW_JSON_VALUES : SHOW_TEXT_VALUES;
    uint64_t rows = schema_rows(f, n);
    char cbuf[16];

    snprintf(cbuf, sizeof(cbuf), "%08" PRIx32, crc);
    if (json) {
        printf("%s{\"name\": ", i ? ", " : "");
        json_str(stdout, f->name);
        printf(", \"kind\": \"%s\", \"dtype\": \"%s\", \"bytes\": %zu", schema_kind_name(f->kind),
               dt, legacy_label ? (size_t)8 : n);
        if (!legacy_label)
            printf(", \"crc32c\": \"%s\"", cbuf);
    } else {
        printf("%-16s %-6s %-4s", f->name, schema_kind_name(f->kind), dt);
    }
    if (legacy_label) {
        if (json)
            printf(", \"value\": %s%" PRIu32 "%s, \"from\": \"entry\"}",
                   label == DATASET_NO_LABEL ? "null" : "",
                   label == DATASET_NO_LABEL ? 0 : label, "");
        else if (label == DATASET_NO_LABEL)
            printf("  none (the shard entry's label)\n");
        else
            printf("  %" PRIu32 " (the shard entry's label)\n", label);
        return 0;
    }
    switch (f->kind) {
    case SCHEMA_IMAGE: {
        struct pack_image im;
        struct rf_err err;

        if (pack_image_part(f, p, n, &im, &err) < 0) {
            if (json) {
                fputs(", \"error\": ", stdout);
                json_str(stdout, err.msg);
                fputc('}', stdout);
            } else {
                printf("  %zu bytes, crc32c %s: %s\n", n, cbuf, err.msg);
            }
            return -1;
        }
        if (json) {
            printf(", \"format\": \"%s\", \"height\": %" PRIu32 ", \"width\": %" PRIu32
                   ", \"channels\": %" PRIu32, im.rfpx ? "rfpx" : "jpeg", im.height, im.width,
                   im.channels);
            if (im.rfpx)
                printf(", \"pixels_crc32c\": \"%08" PRIx32 "\"",
                       crc32c(0, im.pixels, im.pixel_bytes));
            if (im.rfpx && (uint64_t)im.width * im.height * im.channels <= (uint64_t)limit)
                print_values(f->dtype, im.pixels, (uint64_t)im.width * im.height * im.channels,
                             1);
            fputc('}', stdout);
        } else {
            printf("  %" PRIu32 "x%" PRIu32 " (HxW) x%" PRIu32 " %s, %zu bytes, crc32c %s",
                   im.height, im.width, im.channels, im.rfpx ? "RFPX pixels" : "JPEG", n, cbuf);
            if (im.rfpx)
                printf(", pixels crc32c %08" PRIx32, crc32c(0, im.pixels, im.pixel_bytes));
            fputc('\n', stdout);
        }
        return 0;
    }
    case SCHEMA_TENSOR:
    case SCHEMA_SCALAR:
    case SCHEMA_RAGGED: {
        uint64_t count = n / dataset_dtype_size(f->dtype);

        if (json) {
            if (f->kind == SCHEMA_RAGGED)
                printf(", \"rows\": %" PRIu64, rows);
            fputs(", \"shape\": [", stdout);
            if (f->kind == SCHEMA_RAGGED)
                printf("%" PRIu64 "%s", rows, f->ndim ? ", " : "");
            for (unsigned d = 0; d < f->ndim; d++)
                printf("%s%" PRIu64, d ? ", " : "", f->dims[d]);
            fputc(']', stdout);
            if (f->kind == SCHEMA_SCALAR) {
                char buf[64];

                value_text(f->dtype, p, 0, 1, buf, sizeof(buf));
                printf(", \"value\": %s", buf);
            } else if (count <= (uint64_t)limit) {
                print_values(f->dtype, p, count, 1);
            }
            fputc('}', stdout);
            return 0;
        }
        if (f->kind == SCHEMA_RAGGED)
            printf("  %" PRIu64 " row%s", rows, rows == 1 ? "" : "s");
        if (f->kind == SCHEMA_SCALAR) {
            char buf[64];

            value_text(f->dtype, p, 0, 0, buf, sizeof(buf));
            printf("  %s\n", buf);
            return 0;
        }
        if (f->ndim) {
            fputs(f->kind == SCHEMA_RAGGED ? " of (" : "  (", stdout);
            for (unsigned d = 0; d < f->ndim; d++)
                printf("%s%" PRIu64, d ? ", " : "", f->dims[d]);
            printf(f->ndim == 1 ? ",)" : ")");
        }
        printf(", %zu bytes, crc32c %s", n, cbuf);
        if (count <= (uint64_t)limit)
            print_values(f->dtype, p, count, 0);
        fputc('\n', stdout);
        return 0;
    }
    case SCHEMA_BYTES:
        if (json) {
            printf(", \"rows\": %zu", n);
            if (n <= (size_t)limit)
                print_bytes(p, n, 1);
            fputc('}', stdout);
        } else {
            printf("  %zu bytes, crc32c %s", n, cbuf);
            if (n <= 64)
                print_bytes(p, n, 0);
            fputc('\n', stdout);
        }
        return 0;
    default:
        return -1;
    }
}

int pack_show_main(int argc, char **argv)
{
    struct dataset *ds = NULL;
    struct dataset_dctx *ctx = NULL;
    const struct dataset_info *info;
    struct schema_part parts[SCHEMA_MAX_FIELDS];
    struct dataset_loc loc;
    struct rf_err err;
    const char *dir = NULL, *index_arg = NULL;
    unsigned long long index;
    uint8_t *rec = NULL;
    char *end;
    int json = 0, rc = PACK_EXIT_FAIL, n, bad = 0;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return PACK_EXIT_OK;
        }
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (argv[i][0] == '-' && !(argv[i][1] >= '0' && argv[i][1] <= '9'))
            return pack_usage_error("show", "unknown option '%s'", argv[i]);
        else if (!dir)
            dir = argv[i];
        else if (!index_arg)
            index_arg = argv[i];
        else
            return pack_usage_error("show", "DIR and INDEX expected, also got '%s'", argv[i]);
    }
    if (!dir || !index_arg)
        return pack_usage_error("show", "DIR and INDEX are required");
    errno = 0;
    index = strtoull(index_arg, &end, 10);
    if (!index_arg[0] || *end || errno || index_arg[0] == '-')
        return pack_usage_error("show", "INDEX '%s' is not a sample number", index_arg);
    if (dataset_open(dir, &ds, &err) < 0) {
        pack_warn("%s", err.msg);
        return PACK_EXIT_FAIL;
    }
    info = dataset_info(ds);
    if (index >= info->samples) {
        pack_warn("%s: sample %llu: the dataset has %" PRIu64 " (0 to %" PRIu64 ")", dir, index,
                  info->samples, info->samples ? info->samples - 1 : 0);
        goto out;
    }
    ctx = dataset_dctx_new();
    rec = malloc(info->max_decoded ? info->max_decoded : 1);
    if (!ctx || !rec) {
        pack_warn("out of memory");
        goto out;
    }
    n = dataset_read(ds, index, rec, info->max_decoded, ctx, &loc, &err);
    if (n < 0) {
        pack_warn("%s", err.msg);
        goto out;
    }
    if (info->schema.n == 0) {                     /* kind bytes: opaque */
        if (json)
            printf("{\"index\": %llu, \"kind\": \"bytes\", \"bytes\": %d, \"crc32c\": "
                   "\"%08" PRIx32 "\", \"fields\": []}\n", index, n,
                   crc32c(0, rec, (size_t)n));
        else
            printf("sample %llu of %s: %d opaque bytes (kind bytes: no fields), crc32c "
                   "%08" PRIx32 "\n", index, dir, n, crc32c(0, rec, (size_t)n));
        rc = PACK_EXIT_OK;
        goto out;
    }
    if (pack_record_parts(info, rec, (size_t)n, parts, &err) < 0) {
        pack_warn("%s: record %" PRIu64 ": %s", loc.shard_path, loc.record, err.msg);
        goto out;
    }
    if (json)
        printf("{\"index\": %llu, \"kind\": \"%s\", \"fields\": [", index,
               dataset_kind_name(info->kind));
    else
        printf("sample %llu of %s (%s dataset, %s record %" PRIu64 ")\n", index, dir,
               dataset_kind_name(info->kind), loc.shard_path, loc.record);
    for (uint32_t i = 0; i < info->schema.n; i++) {
        const uint8_t *p = rec + parts[i].off;

        if (show_field(info, i, p, parts[i].len, loc.label, json,
                       crc32c(0, p, parts[i].len)) < 0)
            bad++;
    }
    if (json)
        printf("]}\n");
    rc = bad ? PACK_EXIT_FAIL : PACK_EXIT_OK;
out:
    free(rec);
    dataset_dctx_free(ctx);
    dataset_close(ds);
    return rc;
}
