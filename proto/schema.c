/* schema.c - a sample's fields: their MANIFEST lines, rules and records. */
#include "schema.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>


static const char *const kind_names[SCHEMA_KIND_COUNT] = {
    [SCHEMA_IMAGE] = "image",
    [SCHEMA_TENSOR] = "tensor",
    [SCHEMA_RAGGED] = "ragged",
    [SCHEMA_BYTES] = "bytes",
    [SCHEMA_SCALAR] = "scalar",
};

const char *schema_kind_name(enum schema_kind k)
{
    return (unsigned)k < SCHEMA_KIND_COUNT ? kind_names[k] : NULL;
}

int schema_kind_parse(const char *s, size_t n)
{
    for (int k = 0; k < SCHEMA_KIND_COUNT; k++)
        if (strlen(kind_names[k]) == n && memcmp(kind_names[k], s, n) == 0)
            return k;
    return -EINVAL;
}

static int valid_name(const char *s, size_t n)
{
    if (n == 0 || n > SCHEMA_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return 0;
    }
    return 1;
}

/* A decimal number of n bytes at s, 1..max, no sign or leading zero. */
static int parse_count(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - 9) / 10)
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v == 0 || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

/* dims "AxBxC" (each 1..DATASET_RECORD_MAX) of n bytes at s. */
static int parse_dims(const char *s, size_t n, uint64_t *dims, unsigned *ndim)
{
    size_t i = 0;

    *ndim = 0;
    while (i <= n) {
        size_t j = i;

        while (j < n && s[j] != 'x')
            j++;
        if (*ndim == DATASET_MAX_DIMS || parse_count(s + i, j - i, DATASET_RECORD_MAX,
                                                     &dims[*ndim]) < 0)
            return -EINVAL;
        (*ndim)++;
        i = j + 1;
    }
    return 0;
}

#define FIELD_FAIL(err, f, ...) rf_err_set(err, -EINVAL, __VA_ARGS__)

int schema_field_parse(const char *s, size_t len, struct schema_field *f,
                       char *of_name, struct rf_err *err)
{
    const char *end = s + len, *w;
    size_t n;
    int k, have_dtype = 0;

    memset(f, 0, sizeof(*f));
    of_name[0] = '\0';
    /* the name */
    for (w = s; w < end && *w != ' '; w++)
        ;
    n = (size_t)(w - s);
    if (!valid_name(s, n))
        return rf_err_set(err, -EINVAL, "field name \"%.*s\": 1 to %d of A-Z a-z 0-9 _, not "
                          "starting with a digit", (int)(n > 64 ? 64 : n), s, SCHEMA_NAME_MAX);
    memcpy(f->name, s, n);
    f->name[n] = '\0';
    if (w == end)
        return rf_err_set(err, -EINVAL, "field %s: no kind (image tensor ragged bytes scalar)",
                          f->name);
    s = w + 1;
    for (w = s; w < end && *w != ' '; w++)
        ;
    k = schema_kind_parse(s, (size_t)(w - s));
    if (k < 0)
        return rf_err_set(err, -EINVAL, "field %s: unknown kind \"%.*s\" (image tensor ragged "
                          "bytes scalar)", f->name, (int)((w - s) > 64 ? 64 : (w - s)), s);
    f->kind = (enum schema_kind)k;
    f->dtype = f->kind == SCHEMA_SCALAR ? DATASET_DTYPE_I64 : DATASET_DTYPE_U8;
    f->channels = f->kind == SCHEMA_IMAGE ? 3 : 0;
    /* the options */
    while (w < end) {
        const char *key, *eq, *val;
        size_t klen, vlen;
        uint64_t v;

        s = w + 1;
        for (w = s; w < end && *w != ' '; w++)
            ;
        key = s;
        for (eq = s; eq < w && *eq != '='; eq++)
            ;
        if (eq == w || eq == s)
            return rf_err_set(err, -EINVAL, "field %s: \"%.*s\" is not key=value", f->name,
                              (int)((w - s) > 64 ? 64 : (w - s)), s);
        klen = (size_t)(eq - key);
        val = eq + 1;
        vlen = (size_t)(w - val);
#define KEY(word) (klen == sizeof(word) - 1 && memcmp(key, word, klen) == 0)
#define BAD(what) rf_err_set(err, -EINVAL, "field %s: %.*s=%.*s: %s", f->name, (int)klen, key, \
                             (int)(vlen > 64 ? 64 : vlen), val, what)
        if (KEY("dtype")) {
            int d = dataset_dtype_parse(val, vlen);

            if (d < 0)
                return rf_err_set(err, -EINVAL, "field %s: unknown dtype \"%.*s\" (%s)", f->name,
                                  (int)(vlen > 64 ? 64 : vlen), val, dataset_dtype_names());
            f->dtype = (enum dataset_dtype)d;
            have_dtype = 1;
        } else if (KEY("shape")) {
            if (f->kind == SCHEMA_IMAGE) {
                const char *x = memchr(val, 'x', vlen);
                uint64_t h, wd;

                if (!x || parse_count(val, (size_t)(x - val), UINT32_MAX, &h) < 0 ||
                    parse_count(x + 1, vlen - (size_t)(x - val) - 1, UINT32_MAX, &wd) < 0)
                    return BAD("not HxW");
                f->height = (uint32_t)h;
                f->width = (uint32_t)wd;
            } else if (parse_dims(val, vlen, f->dims, &f->ndim) < 0) {
                return BAD("not dims AxBx... of 1 to 8 numbers, each at least 1");
            }
        } else if (KEY("max")) {
            if (parse_count(val, vlen, DATASET_RECORD_MAX, &f->max_rows) < 0)
                return BAD("not a number from 1");
        } else if (KEY("cap")) {
            if (parse_count(val, vlen, DATASET_RECORD_MAX, &f->cap_rows) < 0)
                return BAD("not a number from 1");
        } else if (KEY("channels")) {
            if (parse_count(val, vlen, 3, &v) < 0 || v == 2)
                return BAD("1 or 3");
            f->channels = (uint32_t)v;
        } else if (KEY("boxes") || KEY("mask") || KEY("rows")) {
            if (f->role != SCHEMA_ROLE_NONE)
                return BAD("a field has one role");
            if (!valid_name(val, vlen))
                return BAD("not a field name");
            f->role = KEY("boxes") ? SCHEMA_ROLE_BOXES
                      : KEY("mask") ? SCHEMA_ROLE_MASK : SCHEMA_ROLE_ROWS;
            memcpy(of_name, val, vlen);
            of_name[vlen] = '\0';
        } else {
            return rf_err_set(err, -EINVAL, "field %s: unknown option \"%.*s\" (dtype shape max "
                              "cap channels boxes mask rows)", f->name, (int)(klen > 64 ? 64 : klen),
                              key);
        }
#undef KEY
#undef BAD
    }
    (void)have_dtype;
    return 0;
}

int schema_add(struct schema *s, const struct schema_field *f, const char *of_name,
               struct rf_err *err)
{
    struct schema_field *to;

    if (s->n >= SCHEMA_MAX_FIELDS)
        return rf_err_set(err, -EINVAL, "field %s: more than %d fields", f->name,
                          SCHEMA_MAX_FIELDS);
    if (schema_find(s, f->name, strlen(f->name)) >= 0)
        return rf_err_set(err, -EINVAL, "field %s: the name is used twice", f->name);
    to = &s->f[s->n];
    *to = *f;
    to->of = 0;
    if (f->role != SCHEMA_ROLE_NONE) {
        int of = schema_find(s, of_name, strlen(of_name));

        if (of < 0)
            return rf_err_set(err, -EINVAL, "field %s: %s=%s names no field before it",
                              f->name, f->role == SCHEMA_ROLE_BOXES  ? "boxes"
                                       : f->role == SCHEMA_ROLE_MASK ? "mask"
                                                                     : "rows",
                              of_name);
        to->of = (uint32_t)of;
    }
    s->n++;
    return 0;
}

static int check_field(struct schema *s, uint32_t i, struct rf_err *err)
{
    struct schema_field *f = &s->f[i];
    size_t esize = dataset_dtype_size(f->dtype);
    uint64_t elems = 1;

    if (!valid_name(f->name, strnlen(f->name, sizeof(f->name))) || !schema_kind_name(f->kind) ||
        !esize)
        return rf_err_set(err, -EINVAL, "field %u: bad name, kind or dtype", i);
    for (unsigned d = 0; d < f->ndim; d++) {
        if (f->dims[d] == 0 || f->dims[d] > DATASET_RECORD_MAX / elems)
            return rf_err_set(err, -EINVAL, "field %s: shape too large", f->name);
        elems *= f->dims[d];
    }
    if (f->role == SCHEMA_ROLE_BOXES &&
        (f->kind != SCHEMA_RAGGED || f->dtype != DATASET_DTYPE_F32 || f->ndim != 1 ||
         f->dims[0] != 4 || f->of >= i || s->f[f->of].kind != SCHEMA_IMAGE ||
         s->f[f->of].role != SCHEMA_ROLE_NONE))
        return rf_err_set(err, -EINVAL, "field %s: boxes= is for a ragged f32 field of shape 4 "
                          "naming an earlier image field that is not a mask", f->name);
    if (f->role == SCHEMA_ROLE_MASK &&
        (f->kind != SCHEMA_IMAGE || f->channels != 1 || f->of >= i ||
         s->f[f->of].kind != SCHEMA_IMAGE || s->f[f->of].role != SCHEMA_ROLE_NONE))
        return rf_err_set(err, -EINVAL, "field %s: mask= is for an image field of channels=1 "
                          "naming an earlier image field that is not a mask", f->name);
    if (f->role == SCHEMA_ROLE_ROWS &&
        (f->kind != SCHEMA_RAGGED || f->of >= i || s->f[f->of].role != SCHEMA_ROLE_BOXES))
        return rf_err_set(err, -EINVAL, "field %s: rows= is for a ragged field naming an "
                          "earlier boxes field", f->name);
    if (f->role > SCHEMA_ROLE_ROWS)
        return rf_err_set(err, -EINVAL, "field %s: unknown role", f->name);
    if (f->kind != SCHEMA_IMAGE && (f->channels || f->height || f->width))
        return rf_err_set(err, -EINVAL, "field %s: channels and shape=HxW are for image fields",
                          f->name);
    if ((f->kind == SCHEMA_RAGGED || f->kind == SCHEMA_BYTES) == (f->max_rows == 0))
        return rf_err_set(err, -EINVAL, "field %s: max= is %s", f->name,
                          f->max_rows ? "for ragged and bytes fields only"
                                      : "required for ragged and bytes fields");
    if (f->cap_rows && f->kind != SCHEMA_RAGGED && f->kind != SCHEMA_BYTES)
        return rf_err_set(err, -EINVAL, "field %s: cap= is for ragged and bytes fields only",
                          f->name);
    if (f->cap_rows && f->cap_rows < f->max_rows)
        return rf_err_set(err, -EINVAL, "field %s: cap=%llu is less than max=%llu: one sample "
                          "would not fit a batch", f->name, (unsigned long long)f->cap_rows,
                          (unsigned long long)f->max_rows);
    switch (f->kind) {
    case SCHEMA_IMAGE:
        if (f->ndim)
            return rf_err_set(err, -EINVAL, "field %s: an image's shape is HxW", f->name);
        if (f->channels != 1 && f->channels != 3)
            return rf_err_set(err, -EINVAL, "field %s: channels 1 or 3", f->name);
        if (f->dtype != DATASET_DTYPE_U8 &&
            !(f->dtype == DATASET_DTYPE_U16 && f->channels == 1))
            return rf_err_set(err, -EINVAL, "field %s: images are u8 (u16 for channels=1)",
                              f->name);
        if ((f->height == 0) != (f->width == 0))
            return rf_err_set(err, -EINVAL, "field %s: shape=HxW needs both sides", f->name);
        f->row_bytes = 0;
        break;
    case SCHEMA_TENSOR:
        if (!f->ndim)
            return rf_err_set(err, -EINVAL, "field %s: a tensor needs shape=AxB...", f->name);
        if (elems > DATASET_RECORD_MAX / esize)
            return rf_err_set(err, -EINVAL, "field %s: tensor too large", f->name);
        f->row_bytes = elems * esize;
        break;
    case SCHEMA_RAGGED:
        if (elems > DATASET_RECORD_MAX / esize)
            return rf_err_set(err, -EINVAL, "field %s: row too large", f->name);
        f->row_bytes = elems * esize;
        if (f->max_rows > DATASET_RECORD_MAX / f->row_bytes)
            return rf_err_set(err, -EINVAL, "field %s: max=%llu rows exceed a record", f->name,
                              (unsigned long long)f->max_rows);
        break;
    case SCHEMA_BYTES:
        if (f->ndim || f->dtype != DATASET_DTYPE_U8)
            return rf_err_set(err, -EINVAL, "field %s: bytes have no dtype or shape", f->name);
        f->row_bytes = 1;
        break;
    case SCHEMA_SCALAR:
        if (f->ndim || (f->dtype != DATASET_DTYPE_I64 && f->dtype != DATASET_DTYPE_F64))
            return rf_err_set(err, -EINVAL, "field %s: a scalar is dtype=i64 or f64, no shape",
                              f->name);
        f->row_bytes = 8;
        break;
    default:
        return rf_err_set(err, -EINVAL, "field %s: unknown kind", f->name);
    }
    return 0;
}

int schema_check(struct schema *s, struct rf_err *err)
{
    if (s->n == 0 || s->n > SCHEMA_MAX_FIELDS)
        return rf_err_set(err, -EINVAL, "a schema has 1 to %d fields, not %u",
                          SCHEMA_MAX_FIELDS, s->n);
    for (uint32_t i = 0; i < s->n; i++) {
        int r = check_field(s, i, err);

        if (r < 0)
            return r;
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(s->f[i].name, s->f[j].name) == 0)
                return rf_err_set(err, -EINVAL, "field %s: the name is used twice",
                                  s->f[i].name);
    }
    return 0;
}

static int put(char *buf, size_t cap, size_t *at, const char *fmt, const char *a, uint64_t v)
{
    int n = a ? snprintf(buf + *at, cap - *at, fmt, a)
              : snprintf(buf + *at, cap - *at, fmt, (unsigned long long)v);

    if (n < 0 || (size_t)n >= cap - *at)
        return -ENOSPC;
    *at += (size_t)n;
    return 0;
}

int schema_field_format(const struct schema *s, uint32_t i, char *buf, size_t cap)
{
    const struct schema_field *f = &s->f[i];
    size_t at = 0;
    int r = 0;

    if (i >= s->n || cap == 0)
        return -ENOSPC;
    buf[0] = '\0';
    r |= put(buf, cap, &at, "%s", f->name, 0);
    r |= put(buf, cap, &at, " %s", schema_kind_name(f->kind), 0);
    if ((f->kind == SCHEMA_IMAGE && f->dtype != DATASET_DTYPE_U8) ||
        f->kind == SCHEMA_TENSOR || f->kind == SCHEMA_RAGGED ||
        (f->kind == SCHEMA_SCALAR && f->dtype != DATASET_DTYPE_I64))
        r |= put(buf, cap, &at, " dtype=%s", dataset_dtype_name(f->dtype), 0);
    if (f->kind == SCHEMA_IMAGE && f->channels != 3)
        r |= put(buf, cap, &at, " channels=%llu", NULL, f->channels);
    if (f->kind == SCHEMA_IMAGE && f->height) {
        r |= put(buf, cap, &at, " shape=%llu", NULL, f->height);
        r |= put(buf, cap, &at, "x%llu", NULL, f->width);
    }
    for (unsigned d = 0; d < f->ndim; d++)
        r |= put(buf, cap, &at, d ? "x%llu" : " shape=%llu", NULL, f->dims[d]);
    if (f->max_rows)
        r |= put(buf, cap, &at, " max=%llu", NULL, f->max_rows);
    if (f->cap_rows)
        r |= put(buf, cap, &at, " cap=%llu", NULL, f->cap_rows);
    if (f->role == SCHEMA_ROLE_BOXES)
        r |= put(buf, cap, &at, " boxes=%s", s->f[f->of].name, 0);
    if (f->role == SCHEMA_ROLE_MASK)
        r |= put(buf, cap, &at, " mask=%s", s->f[f->of].name, 0);
    if (f->role == SCHEMA_ROLE_ROWS)
        r |= put(buf, cap, &at, " rows=%s", s->f[f->of].name, 0);
    return r ? -ENOSPC : (int)at;
}

int schema_find(const struct schema *s, const char *name, size_t n)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (strnlen(s->f[i].name, sizeof(s->f[i].name)) == n && memcmp(s->f[i].name, name, n) == 0)
            return (int)i;
    return -ENOENT;
}

int schema_legacy(enum dataset_kind kind, enum dataset_dtype dtype, const uint64_t *dims,
                  unsigned ndim, uint32_t height, uint32_t width, struct schema *out)
{
    struct schema_field *f;

    memset(out, 0, sizeof(*out));
    f = &out->f[0];
    if (kind == DATASET_JPEG) {
        snprintf(f->name, sizeof(f->name), "image");
        f->kind = SCHEMA_IMAGE;
        f->dtype = DATASET_DTYPE_U8;
        f->channels = 3;
        f->height = height;
        f->width = width;
    } else if (kind == DATASET_TENSOR && ndim >= 1 && ndim <= DATASET_MAX_DIMS) {
        snprintf(f->name, sizeof(f->name), "tensor");
        f->kind = SCHEMA_TENSOR;
        f->dtype = dtype;
        f->ndim = ndim;
        memcpy(f->dims, dims, ndim * sizeof(*dims));
    } else {
        return -EINVAL;
    }
    f = &out->f[1];
    snprintf(f->name, sizeof(f->name), "label");
    f->kind = SCHEMA_SCALAR;
    f->dtype = DATASET_DTYPE_I64;
    out->n = 2;
    return schema_check(out, NULL) < 0 ? -EINVAL : 0;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void schema_record_put_len(uint8_t *p, uint32_t len)
{
    p[0] = (uint8_t)len;
    p[1] = (uint8_t)(len >> 8);
    p[2] = (uint8_t)(len >> 16);
    p[3] = (uint8_t)(len >> 24);
}

int schema_record_split(const struct schema *s, const uint8_t *rec, size_t len,
                        struct schema_part *parts, struct rf_err *err)
{
    size_t at = 0;

    for (uint32_t i = 0; i < s->n; i++) {
        const struct schema_field *f = &s->f[i];
        uint32_t n;

        if (len - at < 4)
            return rf_err_set(err, -EBADMSG, "field %s at byte %zu: the record ends (%zu bytes) "
                              "before its length", f->name, at, len);
        n = get_u32(rec + at);
        at += 4;
        if (n > len - at)
            return rf_err_set(err, -EBADMSG, "field %s at byte %zu: %u bytes, past the record's "
                              "end (%zu bytes)", f->name, at, n, len);
        switch (f->kind) {
        case SCHEMA_IMAGE:
            if (n == 0)
                return rf_err_set(err, -EBADMSG, "field %s at byte %zu: an empty image", f->name,
                                  at);
            break;
        case SCHEMA_TENSOR:
        case SCHEMA_SCALAR:
            if (n != f->row_bytes)
                return rf_err_set(err, -EBADMSG, "field %s at byte %zu: %u bytes, its shape "
                                  "needs %llu", f->name, at, n,
                                  (unsigned long long)f->row_bytes);
            break;
        case SCHEMA_RAGGED:
        case SCHEMA_BYTES:
            if (n % f->row_bytes || n / f->row_bytes > f->max_rows)
                return rf_err_set(err, -EBADMSG, "field %s at byte %zu: %u bytes: not a whole "
                                  "number of %llu-byte rows up to max=%llu", f->name, at, n,
                                  (unsigned long long)f->row_bytes,
                                  (unsigned long long)f->max_rows);
            break;
        default:
            return rf_err_set(err, -EBADMSG, "field %s: unknown kind", f->name);
        }
        parts[i] = (struct schema_part){ .off = (uint32_t)at, .len = n };
        at += n;
        if (f->role == SCHEMA_ROLE_ROWS && f->of < i &&
            n / f->row_bytes != parts[f->of].len / s->f[f->of].row_bytes)
            return rf_err_set(err, -EBADMSG, "field %s at byte %zu: %llu rows, but its boxes "
                              "field %s has %llu", f->name, at - n,
                              (unsigned long long)(n / f->row_bytes), s->f[f->of].name,
                              (unsigned long long)(parts[f->of].len / s->f[f->of].row_bytes));
    }
    if (at != len)
        return rf_err_set(err, -EBADMSG, "%zu bytes after the last field (%s) at byte %zu",
                          len - at, s->f[s->n - 1].name, at);
    return 0;
}

uint64_t schema_record_size(const struct schema *s, const uint64_t *lens)
{
    uint64_t total = 0;

    for (uint32_t i = 0; i < s->n; i++) {
        if (lens[i] > DATASET_RECORD_MAX)
            return 0;
        total += 4 + lens[i];
        if (total > DATASET_RECORD_MAX)
            return 0;
    }
    return total;
}

uint64_t schema_rows(const struct schema_field *f, uint64_t len)
{
    switch (f->kind) {
    case SCHEMA_RAGGED:
        return f->row_bytes ? len / f->row_bytes : 0;
    case SCHEMA_BYTES:
        return len;
    default:
        return 1;
    }
}
