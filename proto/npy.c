/*
 * npy.c - npy.h: the .npy header, parsed as a small, strict subset of the
 * Python literal NumPy writes.
 */
#include "npy.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6

/* A cursor over the header's text; at is its offset in the file. */
struct cur {
    const char *p, *end;
    uint64_t base;             /* the file offset of the text's first byte */
};

static uint64_t at(const struct cur *c, const char *start)
{
    return c->base + (uint64_t)(c->p - start);
}

static void skip_ws(struct cur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static bool eat(struct cur *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string ('...' or "...", no escapes) into out (cap incl. NUL). */
static bool quoted(struct cur *c, char *out, size_t cap)
{
    char q;
    size_t n = 0;

    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    q = *c->p++;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap)
            return false;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    out[n] = '\0';
    return true;
}

/* A decimal integer < 2^63 (no sign, no leading '+'). */
static bool integer(struct cur *c, uint64_t *v)
{
    uint64_t x = 0;
    const char *s;

    skip_ws(c);
    s = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (x > (INT64_MAX - 9) / 10)
            return false;
        x = x * 10 + (uint64_t)(*c->p - '0');
        c->p++;
    }
    if (c->p == s)
        return false;
    *v = x;
    return true;
}

/* descr's text into kind, itemsize, byte order. */
static int descr(const char *d, struct npy_header *h, uint64_t off, struct rf_err *err)
{
    static const char sizes[] = "1248";
    char order = d[0];

    if (strlen(d) != 3 || !strchr("<>|=", order) || !strchr("biuf", d[1]) ||
        !memchr(sizes, d[2], 4))
        return rf_err_set(err, -EINVAL, "npy header at byte %" PRIu64 ": descr '%s' is not "
                          "a plain type (byte order < > | =, kind b i u f, size 1 2 4 8; "
                          "structured and object arrays are not read)", off, d);
    h->kind = d[1];
    h->itemsize = (uint32_t)(d[2] - '0');
    h->big_endian = order == '>' && h->itemsize > 1;
    if (h->kind == 'b' && h->itemsize != 1)
        return rf_err_set(err, -EINVAL, "npy header at byte %" PRIu64 ": descr '%s': a bool "
                          "is 1 byte", off, d);
    if (h->kind == 'f' && h->itemsize == 1)
        return rf_err_set(err, -EINVAL, "npy header at byte %" PRIu64 ": descr '%s': no "
                          "1-byte float", off, d);
    return 0;
}

static int bad(struct rf_err *err, uint64_t off, const char *what)
{
    return rf_err_set(err, -EINVAL, "npy header at byte %" PRIu64 ": %s", off, what);
}

/* The dict literal in text [s, e), at file offset base. */
static int dict(const char *s, const char *e, uint64_t base, struct npy_header *h,
                struct rf_err *err)
{
    struct cur c = {s, e, base};
    bool have_descr = false, have_fortran = false, have_shape = false, fortran = false;

    if (!eat(&c, '{'))
        return bad(err, at(&c, s), "expected '{' (a Python dict)");
    for (;;) {
        char key[32], val[16];

        if (eat(&c, '}'))
            break;
        if (!quoted(&c, key, sizeof(key)))
            return bad(err, at(&c, s), "expected a quoted key or '}'");
        if (!eat(&c, ':'))
            return bad(err, at(&c, s), "expected ':' after a key");
        if (strcmp(key, "descr") == 0 && !have_descr) {
            int r;

            if (!quoted(&c, val, sizeof(val)))
                return bad(err, at(&c, s), "descr: expected a quoted type such as '<u2'");
            if ((r = descr(val, h, at(&c, s), err)) < 0)
                return r;
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0 && !have_fortran) {
            skip_ws(&c);
            if ((size_t)(c.end - c.p) >= 4 && memcmp(c.p, "True", 4) == 0) {
                fortran = true;
                c.p += 4;
            } else if ((size_t)(c.end - c.p) >= 5 && memcmp(c.p, "False", 5) == 0) {
                c.p += 5;
            } else {
                return bad(err, at(&c, s), "fortran_order: expected True or False");
            }
            have_fortran = true;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            if (!eat(&c, '('))
                return bad(err, at(&c, s), "shape: expected '(' (a tuple)");
            h->ndim = 0;
            while (!eat(&c, ')')) {
                uint64_t v;

                if (h->ndim == NPY_DIMS_MAX)
                    return rf_err_set(err, -EINVAL, "npy header at byte %" PRIu64 ": shape "
                                      "has more than %d dimensions", at(&c, s), NPY_DIMS_MAX);
                if (!integer(&c, &v))
                    return bad(err, at(&c, s), "shape: expected a non-negative integer");
                h->shape[h->ndim++] = v;
                if (!eat(&c, ',')) {
                    if (!eat(&c, ')'))
                        return bad(err, at(&c, s), "shape: expected ',' or ')'");
                    break;
                }
            }
            have_shape = true;
        } else {
            char what[96];

            snprintf(what, sizeof(what), "key '%s' is unknown or given twice (descr, "
                     "fortran_order, shape)", key);
            return bad(err, at(&c, s), what);
        }
        if (!eat(&c, ',')) {
            if (!eat(&c, '}'))
                return bad(err, at(&c, s), "expected ',' or '}' after a value");
            break;
        }
    }
    if (!have_descr || !have_fortran || !have_shape)
        return bad(err, at(&c, s), "the dict needs descr, fortran_order and shape");
    /* what is left is padding: spaces, then the newline (NumPy's) */
    skip_ws(&c);
    while (c.p < c.end && *c.p == '\n' && c.p + 1 == c.end)
        c.p++;
    if (c.p != c.end)
        return bad(err, at(&c, s), "bytes after the dict other than spaces and a newline");
    if (fortran && h->ndim > 1)
        return rf_err_set(err, -EINVAL, "npy header: fortran_order True with %u dimensions: "
                          "save a C-ordered array (numpy.ascontiguousarray)", h->ndim);
    return 0;
}

int npy_parse(const void *buf, size_t len, uint64_t file_size, struct npy_header *h,
              struct rf_err *err)
{
    const unsigned char *b = buf;
    uint64_t hlen, off;
    unsigned major;
    int r;

    memset(h, 0, sizeof(*h));
    if (len < MAGIC_LEN + 2 || memcmp(b, MAGIC, MAGIC_LEN) != 0)
        return rf_err_set(err, -EINVAL, "not a .npy file: it does not start with "
                          "\\x93NUMPY");
    major = b[6];
    if (major < 1 || major > 3)
        return rf_err_set(err, -EPROTO, ".npy format version %u.%u: this reader knows 1.0, "
                          "2.0 and 3.0", major, b[7]);
    if (major == 1) {
        if (len < 10)
            return rf_err_set(err, -EINVAL, "npy: the header's length is cut off at byte %zu",
                              len);
        hlen = (uint64_t)b[8] | (uint64_t)b[9] << 8;
        off = 10;
    } else {
        if (len < 12)
            return rf_err_set(err, -EINVAL, "npy: the header's length is cut off at byte %zu",
                              len);
        hlen = (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 |
               (uint64_t)b[11] << 24;
        off = 12;
    }
    if (hlen > NPY_HEADER_MAX)
        return rf_err_set(err, -EINVAL, "npy: a header of %" PRIu64 " bytes (at most %u are "
                          "read)", hlen, NPY_HEADER_MAX);
    if (off + hlen > len)
        return rf_err_set(err, -EINVAL, "npy: the header needs %" PRIu64 " bytes, %zu are "
                          "there", off + hlen, len);
    r = dict((const char *)b + off, (const char *)b + off + hlen, off, h, err);
    if (r < 0)
        return r;
    h->count = 1;
    for (uint32_t i = 0; i < h->ndim; i++) {
        if (h->shape[i] && h->count > UINT64_MAX / h->shape[i])
            return rf_err_set(err, -EOVERFLOW, "npy: the shape's element count overflows");
        h->count *= h->shape[i];
    }
    if (h->count > UINT64_MAX / h->itemsize)
        return rf_err_set(err, -EOVERFLOW, "npy: the data's size overflows");
    h->data_off = off + hlen;
    h->data_bytes = h->count * h->itemsize;
    if (file_size && file_size != h->data_off + h->data_bytes)
        return rf_err_set(err, -EINVAL, "npy: the file is %" PRIu64 " bytes, the header says "
                          "%" PRIu64 " (%" PRIu64 " of header, %" PRIu64 " elements of %u "
                          "bytes): %s", file_size, h->data_off + h->data_bytes, h->data_off,
                          h->count, h->itemsize,
                          file_size < h->data_off + h->data_bytes ? "truncated"
                                                                  : "bytes after the data");
    return 0;
}

void npy_type_name(const struct npy_header *h, char *out, size_t cap)
{
    snprintf(out, cap, "%c%u", h->kind ? h->kind : '?', h->itemsize);
}
