/*
 * transform.c - the transform table, and the transforms that need no image
 * codec: `raw` copies a fixed-shape record (for example Fashion-MNIST's
 * 1x28x28 u8, or any other dtype of dataset_types.h) into the slot as it
 * is, little-endian elements and all; the ring header names its dtype.
 * The image transforms `train`, `eval` and `none` live in xform_image.c;
 * `tokens`, whose samples are windows of a token dataset, in window.c.
 * ATTACH names a transform by a word of proto/ctl_attach.c;
 * xform_table_check holds this table and that list to the same names at
 * start-up.  Each entry lists the ATTACH parameters it reads (params);
 * xform_check_params refuses a request that names any other.
 */
#include "transform.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "fields.h"
#include "ring.h"
#include "window.h"
#include "xform_image.h"

int xform_tensor_shape(const struct dataset_info *info, uint32_t shape[3])
{
    uint64_t dims[3] = { 1, 1, 1 };
    unsigned nd = info->ndim;

    if (info->kind != DATASET_TENSOR || nd == 0 || nd > DATASET_MAX_DIMS)
        return -EINVAL;
    if (nd <= 3) {
        for (unsigned i = 0; i < nd; i++)
            dims[3 - nd + i] = info->shape[i];
    } else {
        for (unsigned i = 0; i + 2 < nd; i++)
            dims[0] *= info->shape[i]; /* dataset_tensor_bytes bounds the product */
        dims[1] = info->shape[nd - 2];
        dims[2] = info->shape[nd - 1];
    }
    for (int i = 0; i < 3; i++) {
        if (dims[i] > UINT32_MAX)
            return -EINVAL;
        shape[i] = (uint32_t)dims[i];
    }
    return 0;
}

static int raw_geometry(const struct dataset *ds, const struct wire_xform *p,
                        struct xform_out *out, struct rf_err *err)
{
    const struct dataset_info *info = dataset_info(ds);

    (void)p;
    if (info->kind == DATASET_FIELDS) {
        /* the ring's primary column: the first fixed-size field (fields.c);
         * every field is delivered in its own column */
        int k = xform_first_fixed(&info->schema);
        const struct schema_field *f;

        if (k < 0)
            return rf_err_set(err, -EINVAL, "transform raw needs a fixed-size field (tensor or "
                              "scalar) for the ring's primary column; this dataset has none");
        f = &info->schema.f[k];
        out->shape[0] = out->shape[1] = out->shape[2] = 1;
        if (f->kind == SCHEMA_TENSOR)
            out->shape[0] = f->row_bytes / dataset_dtype_size(f->dtype) > UINT32_MAX
                                ? 0
                                : (uint32_t)(f->row_bytes / dataset_dtype_size(f->dtype));
        if (out->shape[0] == 0)
            return rf_err_set(err, -EINVAL, "field %s: over 2^32 elements", f->name);
        out->layout = RING_FLAT;
        out->dtype = dataset_dtype_ring(f->dtype);
        out->sample_bytes = f->row_bytes;
        return 0;
    }
    if (info->kind == DATASET_JPEG && info->image_height && info->image_width)
        return rf_err_set(err, -EINVAL,
                          "transform raw delivers tensor datasets as stored; this one holds "
                          "images (%s): use transform=train (random resized crop and flip, "
                          "for training), eval (resize and centre crop, for validation) or "
                          "none (each image as it is, 3x%ux%u)", dataset_kind_name(info->kind),
                          info->image_height, info->image_width);
    if (info->kind == DATASET_JPEG)
        return rf_err_set(err, -EINVAL,
                          "transform raw delivers tensor datasets as stored; this one holds "
                          "images (%s): use transform=train (random resized crop and flip, "
                          "for training) or eval (resize and centre crop, for validation)",
                          dataset_kind_name(info->kind));
    if (xform_tensor_shape(info, out->shape) < 0 || dataset_dtype_ring(info->dtype) == 0)
        return rf_err_set(err, -EINVAL,
                          "transform raw needs a fixed-shape tensor dataset, this one holds %s",
                          dataset_kind_name(info->kind));
    out->layout = RING_CHW;
    out->dtype = dataset_dtype_ring(info->dtype);
    out->sample_bytes = info->sample_bytes;
    return 0;
}

static int raw_apply(const struct dataset *ds, const struct wire_xform *p,
                     const void *rec, size_t rec_len, struct rng_stream *rng,
                     struct xform_ctx *ctx, uint8_t *dst, const struct xform_out *out,
                     enum wire_bad *why, struct rf_err *err)
{
    (void)ds;
    (void)p;
    (void)rng;
    (void)ctx;
    if (rec_len != out->sample_bytes) {
        *why = BAD_SHAPE;
        return rf_err_set(err, -EBADMSG, "record is %zu bytes, the shape needs %llu",
                          rec_len, (unsigned long long)out->sample_bytes);
    }
    memcpy(dst, rec, rec_len);
    return 0;
}

/* cost_ns, measured on a 2-core Xeon: raw Fashion-MNIST 0.9 us a sample
 * (ringfeed-read, 2 workers, 2.2 M samples/s); train/eval 224-pixel crops of
 * 300-500 px photos 790 us (bench/jpeg-loader's stage table); none: a
 * 32x32 image, an estimate (a copy, or a whole decode of a small JPEG). */
static const struct xform_def table[] = {
    { .name = "raw", .params = 0, .direct = true, .cost_ns = 900,
      .geometry = raw_geometry, .apply = raw_apply },
    { .name = "train", .params = XP_SIZE | XP_LAYOUT | XP_SCALE | XP_RATIO | XP_FLIP,
      .cost_ns = 790000, .geometry = xform_image_geometry, .apply = xform_train_apply },
    { .name = "eval", .params = XP_SIZE | XP_LAYOUT | XP_CROP, .cost_ns = 790000,
      .geometry = xform_image_geometry, .apply = xform_eval_apply },
    { .name = "none", .params = XP_LAYOUT, .cost_ns = 20000,
      .geometry = xform_none_geometry, .apply = xform_none_apply },
    /* an estimate: a window is one binary search and a read or two of
     * context + 1 values straight into the slot */
    { .name = "tokens", .params = XP_CONTEXT | XP_DOC_IDS, .windows = true, .cost_ns = 2000,
      .geometry = window_geometry },
};

#define TABLE_LEN (sizeof(table) / sizeof(table[0]))

/* The ATTACH key of each enum xform_param bit, in bit order. */
static const char *const param_keys[] = {"size", "layout", "scale", "ratio", "flip", "crop",
                                         "context", "doc_ids"};

#define NPARAMS (sizeof(param_keys) / sizeof(param_keys[0]))

/* Writes the keys of the bits in mask as "a, b and c" ("no parameters"
 * for none). */
static void param_list(uint32_t mask, char *buf, size_t cap)
{
    size_t used = 0;
    unsigned n = (unsigned)__builtin_popcount(mask), k = 0;

    buf[0] = '\0';
    if (n == 0) {
        snprintf(buf, cap, "no parameters");
        return;
    }
    for (unsigned i = 0; i < NPARAMS && used < cap; i++) {
        if (!(mask & (1u << i)))
            continue;
        k++;
        used += (size_t)snprintf(buf + used, cap - used, "%s%s",
                                 k == 1 ? "" : k == n ? " and " : ", ", param_keys[i]);
    }
}

int xform_check_params(uint32_t id, const struct ctl_attach *a, struct rf_err *err)
{
    const struct xform_def *xf = xform_get(id);
    char takes[64], users[64];
    size_t used = 0;

    if (!xf)
        return rf_err_set(err, -EINVAL, "transform %u: no such transform", id);
    for (unsigned i = 0; i < NPARAMS; i++) {
        if ((xf->params & (1u << i)) || !ctl_attach_given(a, param_keys[i]))
            continue;
        users[0] = '\0';
        for (unsigned t = 0; t < TABLE_LEN && used < sizeof(users); t++)
            if (table[t].params & (1u << i))
                used += (size_t)snprintf(users + used, sizeof(users) - used, "%s%s",
                                         used ? " or " : "", table[t].name);
        param_list(xf->params, takes, sizeof(takes));
        return rf_err_set(err, -EINVAL, "%s= is not a parameter of transform %s, which takes "
                          "%s: leave %s out, or use a transform that uses it (%s)",
                          param_keys[i], xf->name, takes, param_keys[i], users);
    }
    return 0;
}

void xform_ctx_clear(struct xform_ctx *ctx)
{
    if (!ctx)
        return;
    xform_image_ctx_free(ctx->image);
    *ctx = (struct xform_ctx){ 0 };
}

int xform_find(const char *name)
{
    for (unsigned i = 0; i < TABLE_LEN; i++)
        if (strcmp(table[i].name, name) == 0)
            return (int)i;
    return -ENOENT;
}

const struct xform_def *xform_get(uint32_t id)
{
    return id < TABLE_LEN ? &table[id] : NULL;
}

const char *xform_names(void)
{
    static char names[256];

    if (!names[0]) {
        for (unsigned i = 0; i < TABLE_LEN; i++) {
            if (i)
                strcat(names, " ");
            strcat(names, table[i].name);
        }
    }
    return names;
}

int xform_table_check(void)
{
    /* ATTACH's words (ctl.h) and this table: the same names */
    if (TABLE_LEN != CTL_TRANSFORM_COUNT)
        return -EINVAL;
    for (uint32_t t = 0; t < CTL_TRANSFORM_COUNT; t++)
        if (xform_find(ctl_transform_name(t)) < 0)
            return -EINVAL;
    /* each transform parameter is an ATTACH key */
    for (unsigned i = 0; i < NPARAMS; i++) {
        struct ctl_attach a;

        ctl_attach_defaults(&a);
        if (ctl_attach_give(&a, param_keys[i]) < 0)
            return -EINVAL;
    }
    for (unsigned i = 0; i < TABLE_LEN; i++) {
        if (!table[i].name || !table[i].geometry || !table[i].apply == !table[i].windows ||
            (table[i].params >> NPARAMS) != 0)
            return -EINVAL;
        for (unsigned j = 0; j < i; j++)
            if (strcmp(table[i].name, table[j].name) == 0)
                return -EINVAL;
    }
    return 0;
}
