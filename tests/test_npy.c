/*
 * test_npy.c - proto/npy.h: headers NumPy writes (versions 1.0 and 2.0,
 * several dtypes and shapes, keys in another order) parse to their
 * descr, shape, count and data offset; each thing the reader refuses is
 * refused with a message that names it; a file size that does not match
 * the data is refused as truncated or as having bytes after it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "npy.h"
#include "tap.h"

/* A version-1.0 file's header around dict text d, padded to 64 bytes as
 * NumPy pads it, into out; returns its length. */
static size_t v1(const char *d, char *out, size_t cap)
{
    size_t dl = strlen(d), hl = dl + 1;

    while ((10 + hl) % 64)
        hl++;
    if (10 + hl > cap)
        return 0;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (char)(hl & 0xff);
    out[9] = (char)(hl >> 8);
    memcpy(out + 10, d, dl);
    memset(out + 10 + dl, ' ', hl - dl - 1);
    out[10 + hl - 1] = '\n';
    return 10 + hl;
}

static int parse(const char *d, uint64_t file_size, struct npy_header *h, struct rf_err *err)
{
    char buf[512];
    size_t n = v1(d, buf, sizeof(buf));

    return npy_parse(buf, n, file_size, h, err);
}

static void test_good(void)
{
    struct npy_header h;
    struct rf_err err;
    char name[8];

    TAP_IS_INT(parse("{'descr': '<u2', 'fortran_order': False, 'shape': (1024,), }", 0, &h,
                     &err), 0, "u2, one dimension");
    TAP_OK(h.kind == 'u' && h.itemsize == 2 && !h.big_endian, "descr <u2");
    TAP_IS_INT(h.ndim, 1, "one dimension");
    TAP_IS_INT(h.count, 1024, "1024 elements");
    TAP_IS_INT(h.data_off, 128, "data after the header, padded to 64 bytes (128)");
    TAP_IS_INT(h.data_bytes, 2048, "2048 data bytes");
    npy_type_name(&h, name, sizeof(name));
    TAP_IS_STR(name, "u2", "its type's name");

    TAP_IS_INT(parse("{'shape': (3, 4), 'descr': '>f4', 'fortran_order': False}", 128 + 48, &h,
                     &err), 0, "keys in another order, no trailing comma, file size right");
    TAP_OK(h.kind == 'f' && h.itemsize == 4 && h.big_endian, "descr >f4: big-endian");
    TAP_OK(h.ndim == 2 && h.shape[0] == 3 && h.shape[1] == 4 && h.count == 12, "shape (3, 4)");

    TAP_IS_INT(parse("{'descr': '|u1', 'fortran_order': True, 'shape': (5,), }", 0, &h, &err),
               0, "fortran_order True with one dimension changes nothing");
    TAP_IS_INT(parse("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 0, &h, &err),
               0, "a scalar");
    TAP_OK(h.ndim == 0 && h.count == 1 && h.data_bytes == 8, "a scalar is one element");
    TAP_IS_INT(parse("{'descr': '<u4', 'fortran_order': False, 'shape': (0,), }", 0, &h, &err),
               0, "an empty array");
    TAP_IS_INT(h.count, 0, "no elements");

    {
        /* version 2.0: a 4-byte header length */
        char buf[128] = "\x93NUMPY\x02\x00";
        const char *d = "{'descr': '<u4', 'fortran_order': False, 'shape': (7,), }\n";
        size_t dl = strlen(d);

        buf[8] = (char)dl;
        buf[9] = buf[10] = buf[11] = 0;
        memcpy(buf + 12, d, dl);
        TAP_IS_INT(npy_parse(buf, 12 + dl, 12 + dl + 28, &h, &err), 0, "version 2.0");
        TAP_OK(h.count == 7 && h.data_off == 12 + dl, "version 2.0: count and offset");
    }
}

static void bad(const char *d, uint64_t size, int want, const char *has, const char *name)
{
    struct npy_header h;
    struct rf_err err = {{0}};
    int r = parse(d, size, &h, &err);

    TAP_IS_INT(r, want, name);
    if (!strstr(err.msg, has))
        fprintf(stderr, "# message: %s\n", err.msg);
    TAP_OK(strstr(err.msg, has) != NULL, name);
}

static void test_bad(void)
{
    struct npy_header h;
    struct rf_err err = {{0}};

    TAP_IS_INT(npy_parse("PK\x03\x04....", 10, 0, &h, &err), -EINVAL, "not a .npy");
    TAP_OK(strstr(err.msg, "\\x93NUMPY") != NULL, "not a .npy: says what it looks for");
    TAP_IS_INT(npy_parse("\x93NUMPY\x04\x00\x10\x00", 10, 0, &h, &err), -EPROTO,
               "version 4 is refused");
    TAP_IS_INT(npy_parse("\x93NUMPY\x01\x00\x40\x00{'descr'", 18, 0, &h, &err), -EINVAL,
               "a header cut short");
    bad("{'descr': '<u2', 'shape': (3,), }", 0, -EINVAL, "needs descr, fortran_order and shape",
        "a key missing");
    bad("{'descr': '<u2', 'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", 0, -EINVAL,
        "unknown or given twice", "a key twice");
    bad("{'descr': '<u2', 'fortran_order': False, 'shape': (3,), 'extra': 1}", 0, -EINVAL,
        "'extra'", "an unknown key, named");
    bad("{'descr': [('a', '<u2')], 'fortran_order': False, 'shape': (3,), }", 0, -EINVAL,
        "descr", "a structured dtype");
    bad("{'descr': '<U5', 'fortran_order': False, 'shape': (3,), }", 0, -EINVAL,
        "not a plain type", "a unicode dtype");
    bad("{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", 0, -EINVAL,
        "not a plain type", "an object dtype");
    bad("{'descr': '<f1', 'fortran_order': False, 'shape': (3,), }", 0, -EINVAL,
        "no 1-byte float", "a 1-byte float");
    bad("{'descr': '<u2', 'fortran_order': True, 'shape': (3, 2), }", 0, -EINVAL,
        "C-ordered", "fortran order over 2 dimensions");
    bad("{'descr': '<u2', 'fortran_order': Maybe, 'shape': (3,), }", 0, -EINVAL,
        "True or False", "fortran_order not a bool");
    bad("{'descr': '<u2', 'fortran_order': False, 'shape': (-3,), }", 0, -EINVAL,
        "non-negative integer", "a negative dimension");
    bad("{'descr': '<u2', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 0,
        -EINVAL, "more than 8 dimensions", "nine dimensions");
    bad("{'descr': '<u8', 'fortran_order': False, "
        "'shape': (4294967296, 4294967296, 2), }", 0, -EOVERFLOW, "overflows",
        "a count that overflows");
    bad("{'descr': '<u2', 'fortran_order': False, 'shape': (3,), } x", 0, -EINVAL,
        "after the dict", "bytes after the dict");
    bad("{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", 128 + 5, -EINVAL,
        "truncated", "a file cut short");
    bad("{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", 128 + 8, -EINVAL,
        "bytes after the data", "a file with bytes after the data");
}

int main(void)
{
    test_good();
    test_bad();
    return tap_done();
}
