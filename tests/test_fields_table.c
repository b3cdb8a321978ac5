/*
 * test_fields_table.c - a stream's ring field table (daemon/worker/fields.c):
 *   - ATTACH field= resolved: the default (the first image that is not a
 *     mask), a name; refused naming the field and listing the fields: an
 *     unknown name, a scalar, a mask, a second image, field= with raw, raw
 *     on a dataset with image fields;
 *   - the version-3 table of a kind-fields schema: each kind's entry (the
 *     bound image, its mask in CHW and HWC, boxes, ragged with cap= and
 *     with max=, bytes, a 5-dim tensor flattened, scalars), the primary,
 *     and a header made from it passing ring_check;
 *   - raw's primary: the first fixed-size field, none refused;
 *   - jpeg/tensor datasets: version 3 adds the label column after the one
 *     version 2 has, at the same place; version 2 is ring_geometry's;
 *   - version 2 refused kind fields and dtypes from 7, naming the versions;
 *   - xform_fields_match (a worker's table against the main process's
 *     geometry and digest) finds a changed entry and a changed depth,
 *     xform_fields_equal tells tables apart.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fields.h"
#include "ring.h"
#include "schema.h"
#include "tap.h"

static void add(struct schema *s, const char *line)
{
    struct schema_field f;
    char of[SCHEMA_NAME_MAX + 1];
    struct rf_err e;

    if (schema_field_parse(line, strlen(line), &f, of, &e) < 0 || schema_add(s, &f, of, &e) < 0)
        tap_bail("%s", e.msg);
}

static void fields_info(struct dataset_info *info, const char *const *lines)
{
    struct rf_err e;

    memset(info, 0, sizeof(*info));
    info->kind = DATASET_FIELDS;
    for (; *lines; lines++)
        add(&info->schema, *lines);
    if (schema_check(&info->schema, &e) < 0)
        tap_bail("%s", e.msg);
}

static bool has(const struct rf_err *e, const char *a, const char *b)
{
    return strstr(e->msg, a) && (!b || strstr(e->msg, b));
}

/* A header made from xf passes ring_check. */
static int header_checks(const struct xform_fields *xf, const struct xform_out *out)
{
    void *mem = calloc(1, xf->g.total_size);
    struct ring_hdr *h = mem;
    struct rf_err e;
    int rc;

    if (!mem)
        return -ENOMEM;
    ring_init(mem, &xf->g, xf->version >= 3 ? 3 : 2);
    h->dtype = out->dtype;
    h->layout = out->layout;
    memcpy(h->shape, out->shape, sizeof(h->shape));
    xform_fields_put(xf, h);
    rc = ring_check(mem, xf->g.total_size, &e);
    if (rc < 0)
        tap_diag("ring_check: %s", e.msg);
    if (rc == 0)
        rc = xform_fields_match(xf, &xf->g, xform_fields_digest(xf), &e);
    if (rc == 0 && xf->n) {
        /* a worker whose schema gives another entry */
        struct xform_fields *other = malloc(sizeof(*other));

        if (!other) {
            free(mem);
            return -ENOMEM;
        }
        *other = *xf;
        other->f[xf->n - 1].capacity++;
        rc = xform_fields_match(other, &xf->g, xform_fields_digest(xf), &e) == -EBADMSG &&
                     strstr(e.msg, "field table")
                 ? 0 : -1;
        free(other);
    }
    if (rc == 0) {
        /* or another depth */
        struct ring_geom g = xf->g;

        g.depth++;
        rc = xform_fields_match(xf, &g, xform_fields_digest(xf), &e) == -EBADMSG &&
                     strstr(e.msg, "slots")
                 ? 0 : -1;
    }
    free(mem);
    return rc;
}

static void test_bind(void)
{
    static const char *const lines[] = {
        "photo image shape=6x5", "mask image channels=1 mask=photo",
        "boxes ragged dtype=f32 shape=4 max=3 boxes=photo", "label scalar dtype=i64", NULL,
    };
    static const char *const two[] = { "a image", "b image", NULL };
    static const char *const gray[] = { "g image channels=1", NULL };
    static const char *const noimg[] = { "t tensor dtype=u8 shape=4", "label scalar", NULL };
    struct dataset_info info;
    struct rf_err e = {{0}};
    uint32_t f = 99;

    fields_info(&info, lines);
    TAP_IS_INT(xform_bind_field(&info, false, "", &f, &e), 0, "default binding");
    TAP_IS_INT(f, 0, "is the first image field");
    TAP_IS_INT(xform_bind_field(&info, false, "photo", &f, &e), 0, "field=photo");
    TAP_IS_INT(xform_bind_field(&info, false, "nope", &f, &e), -EINVAL, "field=nope refused");
    TAP_OK(has(&e, "field=nope", "photo (image), mask (image), boxes (ragged), label (scalar)"),
           "naming it and listing the fields");
    TAP_IS_INT(xform_bind_field(&info, false, "label", &f, &e), -EINVAL, "a scalar refused");
    TAP_OK(has(&e, "scalar", "label"), "saying it is a scalar");
    TAP_IS_INT(xform_bind_field(&info, false, "mask", &f, &e), -EINVAL, "a mask refused");
    TAP_OK(has(&e, "mask of photo", "field=photo"), "pointing at its image");
    TAP_IS_INT(xform_bind_field(&info, true, "", &f, &e), -EINVAL, "raw on image fields refused");
    TAP_OK(has(&e, "image field photo", NULL), "naming the field");
    TAP_IS_INT(xform_bind_field(&info, true, "photo", &f, &e), -EINVAL, "field= with raw refused");
    fields_info(&info, two);
    TAP_IS_INT(xform_bind_field(&info, false, "a", &f, &e), -EINVAL, "a second image refused");
    TAP_OK(has(&e, "image field b", "one image field"), "naming it");
    fields_info(&info, gray);
    TAP_IS_INT(xform_bind_field(&info, false, "", &f, &e), -EINVAL, "one channel refused");
    TAP_OK(has(&e, "field g", "channel"), "naming it");
    fields_info(&info, noimg);
    TAP_IS_INT(xform_bind_field(&info, false, "", &f, &e), -EINVAL, "no image field refused");
    TAP_OK(has(&e, "t (tensor)", "transform=raw"), "listing the fields");
    TAP_IS_INT(xform_bind_field(&info, true, "", &f, &e), 0, "raw without images");
    TAP_IS_INT(f, WIRE_NO_FIELD, "binds no field");
}

static void test_table(void)
{
    static const char *const lines[] = {
        "photo image shape=6x5", "mask image channels=1 mask=photo dtype=u16",
        "boxes ragged dtype=f32 shape=4 max=3 boxes=photo", "tokens ragged dtype=i32 max=5 cap=7",
        "caption bytes max=10", "emb tensor dtype=f16 shape=2x3x4x5x6", "label scalar dtype=i64",
        "score scalar dtype=f64", NULL,
    };
    struct dataset_info info;
    struct wire_xform p = { .field = 0, .layout = RING_CHW };
    struct xform_out out = { .shape = { 3, 6, 5 }, .layout = RING_CHW, .dtype = RING_U8,
                             .sample_bytes = 90 };
    struct xform_fields xf, xf2;
    struct rf_err e = {{0}};
    const struct ring_field *c;

    fields_info(&info, lines);
    TAP_IS_INT(xform_fields_build(&info, &p, &out, 3, 2, 4, &xf, &e), 0, "version 3 table");
    TAP_OK(xf.n == 8 && xf.primary == 0 && xf.kind_fields && xf.ragged && !xf.label_column,
           "8 fields, primary 0, ragged");
    c = &xf.f[0];
    TAP_OK(strcmp(c->name, "photo") == 0 && c->kind == RING_FIELD_FIXED && c->dtype == RING_U8 &&
           c->layout == RING_CHW && c->ndim == 3 && c->shape[0] == 3 && c->shape[1] == 6 &&
           c->shape[2] == 5 && c->item_bytes == 90 && c->offset == xf.g.meta_size,
           "the bound image: the transform's output, at meta_size");
    c = &xf.f[1];
    TAP_OK(c->kind == RING_FIELD_FIXED && c->dtype == RING_U16 && c->shape[0] == 1 &&
           c->shape[1] == 6 && c->shape[2] == 5 && c->item_bytes == 60 &&
           c->role == RING_ROLE_MASK && c->of == 0, "its mask: 1 x 6 x 5 u16, role mask of 0");
    c = &xf.f[2];
    TAP_OK(c->kind == RING_FIELD_RAGGED && c->dtype == RING_F32 && c->ndim == 1 &&
           c->shape[0] == 4 && c->item_bytes == 16 && c->capacity == 12 &&
           c->role == RING_ROLE_BOXES && c->of == 0, "boxes: rows of 4 f32, batch x max rows");
    c = &xf.f[3];
    TAP_OK(c->kind == RING_FIELD_RAGGED && c->ndim == 0 && c->item_bytes == 4 && c->capacity == 7,
           "tokens: cap= rows");
    c = &xf.f[4];
    TAP_OK(c->kind == RING_FIELD_RAGGED && c->dtype == RING_U8 && c->item_bytes == 1 &&
           c->capacity == 40, "caption: bytes, batch x max");
    c = &xf.f[5];
    TAP_OK(c->kind == RING_FIELD_FIXED && c->dtype == RING_F16 && c->ndim == 4 &&
           c->shape[0] == 6 && c->shape[1] == 4 && c->shape[2] == 5 && c->shape[3] == 6 &&
           c->item_bytes == 1440 && c->layout == RING_FLAT, "a 5-dim tensor: the first two flattened");
    TAP_OK(xf.f[6].dtype == RING_I64 && xf.f[6].ndim == 0 && xf.f[6].item_bytes == 8 &&
           xf.f[7].dtype == RING_F64, "scalars: i64 and f64, one value");
    TAP_OK(xf.f[2].offsets_at % RING_PAGE == 0 && xf.f[2].offset % RING_PAGE == 0,
           "a ragged column's offsets and values each on a page");
    TAP_IS_INT(header_checks(&xf, &out), 0, "a header made from it passes ring_check and match, "
               "and a changed entry is found");
    TAP_IS_INT(xform_fields_build(&info, &p, &out, 3, 2, 4, &xf2, &e), 0, "built again");
    TAP_OK(xform_fields_equal(&xf, &xf2), "equal");
    TAP_IS_INT(xform_fields_build(&info, &p, &out, 3, 2, 5, &xf2, &e), 0, "another batch");
    TAP_OK(!xform_fields_equal(&xf, &xf2), "not equal");

    out = (struct xform_out){ .shape = { 6, 5, 3 }, .layout = RING_HWC, .dtype = RING_U8,
                              .sample_bytes = 90 };
    p.layout = RING_HWC;
    TAP_IS_INT(xform_fields_build(&info, &p, &out, 3, 2, 4, &xf, &e), 0, "hwc");
    TAP_OK(xf.f[1].layout == RING_HWC && xf.f[1].shape[0] == 6 && xf.f[1].shape[1] == 5 &&
           xf.f[1].shape[2] == 1, "the mask 6 x 5 x 1");

    TAP_IS_INT(xform_fields_build(&info, &p, &out, 2, 2, 4, &xf, &e), -EPROTO,
               "version 2: kind fields refused");
    TAP_OK(has(&e, "version 3", "upgrade"), "naming the versions and what to upgrade");
}

static void test_raw(void)
{
    static const char *const lines[] = { "tokens ragged dtype=i32 max=5", "label scalar",
                                         "emb tensor dtype=f32 shape=3", NULL };
    static const char *const none[] = { "tokens ragged dtype=i32 max=5", NULL };
    struct dataset_info info;
    struct wire_xform p = { .field = WIRE_NO_FIELD, .layout = RING_CHW };
    struct xform_out out = { .shape = { 1, 1, 1 }, .layout = RING_FLAT, .dtype = RING_I64,
                             .sample_bytes = 8 };
    struct xform_fields xf;
    struct rf_err e = {{0}};

    fields_info(&info, lines);
    TAP_IS_INT(xform_fields_build(&info, &p, &out, 3, 2, 4, &xf, &e), 0, "raw");
    TAP_IS_INT(xf.primary, 1, "primary: the first fixed-size field");
    TAP_IS_INT(header_checks(&xf, &out), 0, "its header checks");
    fields_info(&info, none);
    TAP_IS_INT(xform_fields_build(&info, &p, &out, 3, 2, 4, &xf, &e), -EINVAL,
               "no fixed-size field refused");
    TAP_OK(has(&e, "fixed-size", NULL), "saying why");
}

static void test_legacy(void)
{
    struct dataset_info info = { .kind = DATASET_TENSOR };
    uint64_t dims[3] = { 1, 28, 28 };
    struct wire_xform p = { .field = WIRE_NO_FIELD, .layout = RING_CHW };
    struct xform_out out = { .shape = { 1, 28, 28 }, .layout = RING_CHW, .dtype = RING_U8,
                             .sample_bytes = 784 };
    struct xform_fields xf;
    struct ring_geom g;
    struct rf_err e = {{0}};

    if (schema_legacy(DATASET_TENSOR, DATASET_DTYPE_U8, dims, 3, 0, 0, &info.schema) < 0)
        tap_bail("schema_legacy");
    TAP_IS_INT(xform_fields_build(&info, &p, &out, 2, 4, 256, &xf, &e), 0, "version 2");
    TAP_IS_INT(ring_geometry(4, 256, 784, &g, &e), 0, "ring_geometry");
    TAP_OK(xf.n == 0 && memcmp(&g, &xf.g, sizeof(g)) == 0, "version 2: no table, v2 geometry");
    TAP_IS_INT(xform_fields_build(&info, &p, &out, 1, 4, 256, &xf, &e), 0, "version 1 too");
    TAP_IS_INT(xform_fields_build(&info, &p, &out, 3, 4, 256, &xf, &e), 0, "version 3");
    TAP_OK(xf.n == 2 && xf.primary == 0 && xf.label_column && !xf.ragged &&
           strcmp(xf.f[0].name, "tensor") == 0 && xf.f[0].offset == g.meta_size &&
           xf.f[0].item_bytes == 784 && xf.g.meta_size == g.meta_size,
           "version 3: the tensor where version 2 has it");
    TAP_OK(strcmp(xf.f[1].name, "label") == 0 && xf.f[1].dtype == RING_I64 &&
           xf.f[1].item_bytes == 8 && xf.f[1].offset == g.slot_stride,
           "and the label column after it");
    TAP_IS_INT(header_checks(&xf, &out), 0, "its header checks");
    out.dtype = RING_I64;
    out.sample_bytes = 784 * 8;
    TAP_IS_INT(xform_fields_build(&info, &p, &out, 2, 4, 256, &xf, &e), -EPROTO,
               "version 2: dtype i64 refused");
    TAP_OK(has(&e, "i64", "version 3"), "naming it and the version");
}

int main(void)
{
    test_bind();
    test_table();
    test_raw();
    test_legacy();
    return tap_done();
}
