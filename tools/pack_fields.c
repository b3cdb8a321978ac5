/*
 * pack_fields.c - what verify and show share about a record's fields: its
 * parts (schema_record_split for kind fields; the whole record and the
 * entry's label for jpeg and tensor datasets) and an image part's check.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "jpeg_probe.h"
#include "pack.h"
#include "pixels.h"

int pack_record_parts(const struct dataset_info *info, const uint8_t *rec, size_t len,
                      struct schema_part *parts, struct rf_err *err)
{
    if (info->kind == DATASET_FIELDS)
        return schema_record_split(&info->schema, rec, len, parts, err);
    if (info->schema.n != 2)
        return rf_err_set(err, -EINVAL, "a %s dataset has no fields",
                          dataset_kind_name(info->kind));
    /* jpeg, tensor: the record is the first field; the label is the
     * entry's (not in the record) */
    if (len > UINT32_MAX)
        return rf_err_set(err, -EBADMSG, "a record of %zu bytes", len);
    parts[0] = (struct schema_part){ .off = 0, .len = (uint32_t)len };
    parts[1] = (struct schema_part){ .off = 0, .len = 0 };
    return 0;
}

int pack_image_part(const struct schema_field *f, const uint8_t *p, size_t n,
                    struct pack_image *out, struct rf_err *err)
{
    memset(out, 0, sizeof(*out));
    if (px_is(p, n)) {
        struct px_header h;
        uint32_t vb = f->dtype == DATASET_DTYPE_U16 ? 2 : 1;

        if (px_parse_any(p, n, &h, err) < 0)
            return -EBADMSG;
        if (h.channels != f->channels || h.value_bytes != vb)
            return rf_err_set(err, -EBADMSG, "an RFPX record of %u channel%s of %u-byte "
                              "values in a field of %u channel%s of %u-byte values",
                              h.channels, h.channels == 1 ? "" : "s", h.value_bytes,
                              f->channels, f->channels == 1 ? "" : "s", vb);
        out->rfpx = 1;
        out->width = h.width;
        out->height = h.height;
        out->channels = h.channels;
        out->value_bytes = h.value_bytes;
        out->pixels = h.pixels;
        out->pixel_bytes = (size_t)h.width * h.height * h.channels * h.value_bytes;
        return 0;
    }
    if (f->channels != 3)
        return rf_err_set(err, -EBADMSG, "not an RFPX record: a one-channel field holds "
                          "RFPX records");
    {
        unsigned w, h;
        char why_buf[256];
        const char *why;

        if (jpeg_probe(p, n, &w, &h, why_buf, sizeof(why_buf), &why) < 0)
            return rf_err_set(err, -EBADMSG, "neither RFPX nor a JPEG: %s", why);
        out->width = w;
        out->height = h;
        out->channels = 3;
        out->value_bytes = 1;
    }
    return 0;
}
