/*
 * fuzz_schema.c - a sample's fields on arbitrary bytes: the input is a
 * MANIFEST's text, a NUL, then a record.  manifest_parse reads the text
 * (its field lines through schema_field_parse, schema_add, schema_check);
 * when it gives a kind-fields schema, every field formats to a line that
 * parses back to the same field, and the record goes through
 * schema_record_split: accepted, its parts must lie inside the record, in
 * order, fill it exactly, and each have a length its field allows, or the
 * target aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_lines(const struct schema *s)
{
    struct schema again;
    struct rf_err err;

    memset(&again, 0, sizeof(again));
    for (uint32_t i = 0; i < s->n; i++) {
        char line[SCHEMA_LINE_MAX], of[SCHEMA_NAME_MAX + 1];
        struct schema_field f;
        int n = schema_field_format(s, i, line, sizeof(line));

        if (n < 0 || schema_field_parse(line, (size_t)n, &f, of, &err) < 0 ||
            schema_add(&again, &f, of, &err) < 0)
            abort(); /* a line we wrote that we cannot read */
    }
    if (schema_check(&again, &err) < 0 || memcmp(&again, s, sizeof(again)) != 0)
        abort();
}

static void check_split(const struct schema *s, const uint8_t *rec, size_t len)
{
    struct schema_part parts[SCHEMA_MAX_FIELDS];
    struct rf_err err;
    size_t at = 0;

    if (schema_record_split(s, rec, len, parts, &err) < 0)
        return;
    for (uint32_t i = 0; i < s->n; i++) {
        const struct schema_field *f = &s->f[i];

        if (parts[i].off != at + 4 || parts[i].len > len - parts[i].off)
            abort();
        if ((f->kind == SCHEMA_TENSOR || f->kind == SCHEMA_SCALAR) &&
            parts[i].len != f->row_bytes)
            abort();
        if ((f->kind == SCHEMA_RAGGED || f->kind == SCHEMA_BYTES) &&
            (parts[i].len % f->row_bytes || schema_rows(f, parts[i].len) > f->max_rows))
            abort();
        if (f->kind == SCHEMA_IMAGE && parts[i].len == 0)
            abort();
        at = parts[i].off + parts[i].len;
    }
    if (at != len)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t text_len = nul ? (size_t)(nul - data) : size;
    struct manifest m;
    struct rf_err err;

    if (manifest_parse((const char *)data, text_len, &m, &err) == 0 &&
        m.kind == DATASET_FIELDS) {
        check_lines(&m.schema);
        if (nul) {
            size_t len = size - text_len - 1;
            /* a copy of exactly len bytes, so a read past it is caught */
            uint8_t *rec = malloc(len ? len : 1);

            if (!rec)
                abort();
            memcpy(rec, nul + 1, len);
            check_split(&m.schema, rec, len);
            free(rec);
        }
    }
    manifest_free(&m);
    return 0;
}
