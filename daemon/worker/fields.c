/*
 * fields.c - a stream's ring field table, from its schema and transform
 * (fields.h says what it holds and who builds it).
 */
#include "fields.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "crc32c.h"

/* "a (image), b (ragged), ..." for messages. */
static const char *field_list(const struct schema *s, char *buf, size_t cap)
{
    size_t used = 0;

    buf[0] = '\0';
    for (uint32_t i = 0; i < s->n && used < cap; i++) {
        int n = snprintf(buf + used, cap - used, "%s%s (%s)", i ? ", " : "", s->f[i].name,
                         schema_kind_name(s->f[i].kind));

        if (n < 0)
            break;
        used += (size_t)n;
    }
    return buf;
}

int xform_first_fixed(const struct schema *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (s->f[i].kind == SCHEMA_TENSOR || s->f[i].kind == SCHEMA_SCALAR)
            return (int)i;
    return -ENOENT;
}

int xform_bind_field(const struct dataset_info *info, bool is_raw, const char *name,
                     uint32_t *field, struct rf_err *err)
{
    const struct schema *s = &info->schema;
    char list[SCHEMA_MAX_FIELDS * (SCHEMA_NAME_MAX + 12)];
    int k;

    *field = WIRE_NO_FIELD;
    if (is_raw) {
        if (name[0])
            return rf_err_set(err, -EINVAL, "field=%s: transform raw is bound to no field "
                              "(it delivers every field as stored); leave field= out", name);
        if (info->kind != DATASET_FIELDS)
            return 0;
        for (uint32_t i = 0; i < s->n; i++)
            if (s->f[i].kind == SCHEMA_IMAGE)
                return rf_err_set(err, -EINVAL, "transform raw cannot deliver image field %s "
                                  "(images vary in size and format): use train, eval or none",
                                  s->f[i].name);
        return 0;
    }
    if (info->kind != DATASET_FIELDS) {
        /* jpeg datasets: their one image field; other kinds: the transform's
         * geometry says what it needs, as before fields existed */
        if (info->kind == DATASET_JPEG && s->n > 0) {
            if (name[0] && strcmp(name, s->f[0].name) != 0)
                return rf_err_set(err, -EINVAL, "field=%s: dataset has no such field; its "
                                  "fields: %s", name, field_list(s, list, sizeof(list)));
            *field = 0;
        } else if (name[0]) {
            return rf_err_set(err, -EINVAL, "field=%s: this dataset holds %s, with no image "
                              "field to bind a transform to", name,
                              dataset_kind_name(info->kind));
        }
        return 0;
    }
    if (name[0]) {
        k = schema_find(s, name, strlen(name));
        if (k < 0)
            return rf_err_set(err, -EINVAL, "field=%s: dataset has no such field; its fields: "
                              "%s", name, field_list(s, list, sizeof(list)));
        if (s->f[k].kind != SCHEMA_IMAGE)
            return rf_err_set(err, -EINVAL, "field=%s is a %s field: an image transform is "
                              "bound to an image field; the dataset's fields: %s", name,
                              schema_kind_name(s->f[k].kind), field_list(s, list, sizeof(list)));
        if (s->f[k].role == SCHEMA_ROLE_MASK)
            return rf_err_set(err, -EINVAL, "field=%s is the mask of %s, which follows %s's "
                              "crop: bind the transform to field=%s", name,
                              s->f[s->f[k].of].name, s->f[s->f[k].of].name,
                              s->f[s->f[k].of].name);
    } else {
        for (k = 0; k < (int)s->n; k++)
            if (s->f[k].kind == SCHEMA_IMAGE && s->f[k].role != SCHEMA_ROLE_MASK)
                break;
        if (k == (int)s->n)
            return rf_err_set(err, -EINVAL, "an image transform needs an image field; this "
                              "dataset's fields: %s: use transform=raw",
                              field_list(s, list, sizeof(list)));
    }
    if (s->f[k].channels != 3 || s->f[k].dtype != DATASET_DTYPE_U8)
        return rf_err_set(err, -EINVAL, "field %s has %u channel(s) of %s: the image transforms "
                          "deliver 3-channel u8 images", s->f[k].name, s->f[k].channels,
                          dataset_dtype_name(s->f[k].dtype));
    for (uint32_t i = 0; i < s->n; i++)
        if (i != (uint32_t)k && s->f[i].kind == SCHEMA_IMAGE &&
            !(s->f[i].role == SCHEMA_ROLE_MASK && s->f[i].of == (uint32_t)k))
            return rf_err_set(err, -EINVAL, "image field %s: a stream binds its transform to "
                              "one image field (%s), and %s is neither it nor its mask "
                              "(a documented limit: attach a stream per image field)",
                              s->f[i].name, s->f[k].name, s->f[i].name);
    *field = (uint32_t)k;
    return 0;
}

static void set_name(struct ring_field *c, const char *name)
{
    memset(c->name, 0, sizeof(c->name));
    snprintf(c->name, sizeof(c->name), "%s", name);
}

/* A fixed entry of a tensor's dims (ndim 1..DATASET_MAX_DIMS): more than
 * four are flattened into the first.  -EINVAL when a dim exceeds 32 bits. */
static int put_dims(struct ring_field *c, const uint64_t *dims, unsigned ndim)
{
    uint64_t d[4] = { 1, 1, 1, 1 };
    unsigned nd = ndim > 4 ? 4 : ndim, lead = ndim > 4 ? ndim - 3 : 1;

    for (unsigned i = 0; i < lead && i < ndim; i++)
        d[0] *= dims[i]; /* schema_check bounds the product (row_bytes) */
    for (unsigned i = lead; i < ndim; i++)
        d[i - lead + 1] = dims[i];
    c->ndim = nd;
    for (unsigned i = 0; i < nd; i++) {
        if (d[i] > UINT32_MAX)
            return -EINVAL;
        c->shape[i] = (uint32_t)d[i];
    }
    return 0;
}

/* Version 3 entry i of a kind-fields schema.  -EINVAL naming the field. */
static int field_entry(const struct schema *s, uint32_t i, const struct wire_xform *p,
                       const struct xform_out *out, uint32_t batch, struct ring_field *c,
                       struct rf_err *err)
{
    const struct schema_field *f = &s->f[i];

    memset(c, 0, sizeof(*c));
    set_name(c, f->name);
    c->layout = RING_FLAT;
    c->role = f->role == SCHEMA_ROLE_BOXES ? RING_ROLE_BOXES
              : f->role == SCHEMA_ROLE_MASK ? RING_ROLE_MASK
              : f->role == SCHEMA_ROLE_ROWS ? RING_ROLE_ROWS
                                            : RING_ROLE_NONE;
    c->of = f->role != SCHEMA_ROLE_NONE ? f->of : 0;
    switch (f->kind) {
    case SCHEMA_IMAGE:
        c->kind = RING_FIELD_FIXED;
        if (i == p->field) {
            c->dtype = out->dtype;
            c->layout = out->layout;
            c->ndim = 3;
            memcpy(c->shape, out->shape, sizeof(out->shape));
            c->item_bytes = out->sample_bytes;
            return 0;
        }
        if (f->role == SCHEMA_ROLE_MASK && f->of == p->field && p->field != WIRE_NO_FIELD) {
            uint32_t h = out->layout == RING_HWC ? out->shape[0] : out->shape[1];
            uint32_t w = out->layout == RING_HWC ? out->shape[1] : out->shape[2];

            c->dtype = dataset_dtype_ring(f->dtype);
            c->layout = out->layout;
            c->ndim = 3;
            if (out->layout == RING_HWC) {
                c->shape[0] = h, c->shape[1] = w, c->shape[2] = 1;
            } else {
                c->shape[0] = 1, c->shape[1] = h, c->shape[2] = w;
            }
            c->item_bytes = (uint64_t)h * w * dataset_dtype_size(f->dtype);
            return 0;
        }
        return rf_err_set(err, -EINVAL, "image field %s is not the transform's field nor its "
                          "mask", f->name);
    case SCHEMA_TENSOR:
        c->kind = RING_FIELD_FIXED;
        c->dtype = dataset_dtype_ring(f->dtype);
        c->item_bytes = f->row_bytes;
        if (put_dims(c, f->dims, f->ndim) < 0)
            return rf_err_set(err, -EINVAL, "field %s: a dim over 2^32", f->name);
        return 0;
    case SCHEMA_SCALAR:
        c->kind = RING_FIELD_FIXED;
        c->dtype = dataset_dtype_ring(f->dtype);
        c->item_bytes = 8;
        return 0;
    case SCHEMA_RAGGED:
    case SCHEMA_BYTES:
        c->kind = RING_FIELD_RAGGED;
        c->dtype = f->kind == SCHEMA_BYTES ? RING_U8 : dataset_dtype_ring(f->dtype);
        c->item_bytes = f->row_bytes;
        if (f->kind == SCHEMA_RAGGED && f->ndim && put_dims(c, f->dims, f->ndim) < 0)
            return rf_err_set(err, -EINVAL, "field %s: a dim over 2^32", f->name);
        if (f->cap_rows)
            c->capacity = f->cap_rows;
        else if (__builtin_mul_overflow((uint64_t)batch, f->max_rows, &c->capacity))
            return rf_err_set(err, -EOVERFLOW, "field %s: batch %u x max=%llu rows overflow",
                              f->name, batch, (unsigned long long)f->max_rows);
        /* a field every sample left empty still gets a row of room */
        if (c->capacity == 0)
            c->capacity = 1;
        return 0;
    default:
        return rf_err_set(err, -EINVAL, "field %s: kind %u unknown", f->name, f->kind);
    }
}

/* Transform tokens' table (window.h): the token field, FIXED context + 1
 * values of its dtype (out), and with doc_ids=1 "doc_ids", FIXED context
 * + 1 int32; primary 0.  Records are not split by the schema: kind_fields
 * stays false. */
static int window_fields(const struct schema *s, const struct wire_xform *p,
                         const struct xform_out *out, uint32_t version, uint32_t depth,
                         uint32_t batch, struct xform_fields *xf, struct rf_err *err)
{
    struct ring_field *c = &xf->f[0];

    if (version < RING_VERSION_FIELDS)
        return rf_err_set(err, -EPROTO, "transform tokens gives a sample of named fields, "
                          "which ring layout version %u and later carry; the client speaks "
                          "version %u: upgrade libringfeed or the ringfeed Python package",
                          RING_VERSION_FIELDS, version);
    set_name(c, s->f[0].name);
    c->kind = RING_FIELD_FIXED;
    c->dtype = out->dtype;
    c->layout = RING_FLAT;
    c->ndim = 1;
    c->shape[0] = out->shape[0];
    c->item_bytes = out->sample_bytes;
    xf->n = 1;
    if (p->doc_ids) {
        c = &xf->f[1];
        set_name(c, "doc_ids");
        c->kind = RING_FIELD_FIXED;
        c->dtype = RING_I32;
        c->layout = RING_FLAT;
        c->ndim = 1;
        c->shape[0] = out->shape[0];
        c->item_bytes = (uint64_t)out->shape[0] * 4;
        xf->n = 2;
    }
    xf->primary = 0;
    return ring_geometry_fields(depth, batch, xf->f, xf->n, xf->primary, &xf->g, err);
}

int xform_fields_build(const struct dataset_info *info, const struct wire_xform *p,
                       const struct xform_out *out, uint32_t version, uint32_t depth,
                       uint32_t batch, struct xform_fields *xf, struct rf_err *err)
{
    const struct schema *s = &info->schema;
    const struct xform_def *def = xform_get(p->id);
    int rc;

    memset(xf, 0, sizeof(*xf));
    xf->version = version;
    if (def && def->windows)
        return window_fields(s, p, out, version, depth, batch, xf, err);
    xf->kind_fields = info->kind == DATASET_FIELDS;
    if (version < RING_VERSION_FIELDS) {
        if (xf->kind_fields)
            return rf_err_set(err, -EPROTO, "this dataset's samples have fields (MANIFEST kind "
                              "fields), which ring layout version %u and later carry; the "
                              "client speaks version %u: upgrade libringfeed or the ringfeed "
                              "Python package", RING_VERSION_FIELDS, version);
        if (out->dtype >= RING_I64)
            return rf_err_set(err, -EPROTO, "this dataset's element type %s needs ring layout "
                              "version %u or later; the client speaks version %u: upgrade "
                              "libringfeed or the ringfeed Python package",
                              dataset_dtype_name(dataset_dtype_from_ring(out->dtype) < 0
                                                     ? DATASET_DTYPE_NONE
                                                     : (enum dataset_dtype)
                                                           dataset_dtype_from_ring(out->dtype)),
                              RING_VERSION_FIELDS, version);
        return ring_geometry(depth, batch, out->sample_bytes, &xf->g, err);
    }
    if (!xf->kind_fields) {
        struct ring_field *c = &xf->f[0];

        set_name(c, s->n ? s->f[0].name : "data");
        c->kind = RING_FIELD_FIXED;
        c->dtype = out->dtype;
        c->layout = out->layout;
        c->ndim = 3;
        memcpy(c->shape, out->shape, sizeof(out->shape));
        c->item_bytes = out->sample_bytes;
        c = &xf->f[1];
        set_name(c, "label");
        c->kind = RING_FIELD_FIXED;
        c->dtype = RING_I64;
        c->layout = RING_FLAT;
        c->item_bytes = 8;
        xf->n = 2;
        xf->primary = 0;
        xf->label_column = true;
    } else {
        if (s->n < 1 || s->n > RING_MAX_FIELDS)
            return rf_err_set(err, -EINVAL, "a schema of %u fields (1..%u)", s->n,
                              RING_MAX_FIELDS);
        for (uint32_t i = 0; i < s->n; i++) {
            rc = field_entry(s, i, p, out, batch, &xf->f[i], err);
            if (rc < 0)
                return rc;
            if (xf->f[i].kind == RING_FIELD_RAGGED)
                xf->ragged = true;
        }
        xf->n = s->n;
        if (p->field != WIRE_NO_FIELD) {
            xf->primary = p->field;
        } else {
            rc = xform_first_fixed(s);
            if (rc < 0)
                return rf_err_set(err, -EINVAL, "transform raw needs a fixed-size field "
                                  "(tensor or scalar) for the ring's primary column; this "
                                  "dataset has none");
            xf->primary = (uint32_t)rc;
        }
    }
    return ring_geometry_fields(depth, batch, xf->f, xf->n, xf->primary, &xf->g, err);
}

bool xform_fields_equal(const struct xform_fields *a, const struct xform_fields *b)
{
    return a->version == b->version && a->n == b->n && a->primary == b->primary &&
           memcmp(&a->g, &b->g, sizeof(a->g)) == 0 &&
           memcmp(a->f, b->f, (size_t)a->n * sizeof(a->f[0])) == 0;
}

uint32_t xform_fields_digest(const struct xform_fields *xf)
{
    uint32_t head[3] = { xf->version, xf->n, xf->primary };
    uint32_t crc = crc32c(0, head, sizeof(head));

    crc = crc32c(crc, &xf->g, sizeof(xf->g));
    return crc32c(crc, xf->f, (size_t)xf->n * sizeof(xf->f[0]));
}

int xform_fields_match(const struct xform_fields *xf, const struct ring_geom *g,
                       uint32_t digest, struct rf_err *err)
{
    if (xf->g.depth != g->depth || xf->g.batch != g->batch ||
        xf->g.sample_bytes != g->sample_bytes || xf->g.meta_size != g->meta_size ||
        xf->g.slot_stride != g->slot_stride || xf->g.total_size != g->total_size)
        return rf_err_set(err, -EBADMSG, "the schema gives a ring of %u slots of %llu bytes "
                          "(%llu in all), the main process made %u of %llu (%llu)",
                          xf->g.depth, (unsigned long long)xf->g.slot_stride,
                          (unsigned long long)xf->g.total_size, g->depth,
                          (unsigned long long)g->slot_stride,
                          (unsigned long long)g->total_size);
    if (xform_fields_digest(xf) != digest)
        return rf_err_set(err, -EBADMSG, "the schema gives a field table (%u fields, primary "
                          "%u) other than the main process's", xf->n, xf->primary);
    return 0;
}

void xform_fields_put(const struct xform_fields *xf, struct ring_hdr *h)
{
    if (xf->version < RING_VERSION_FIELDS)
        return;
    h->nfields = xf->n;
    h->primary = xf->primary;
    memcpy(h->fields, xf->f, (size_t)xf->n * sizeof(xf->f[0]));
}
