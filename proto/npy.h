/*
 * npy.h - the header of a NumPy .npy file (format versions 1.0, 2.0, 3.0),
 * read strictly: a pure function of a buffer, so packers (token files,
 * WebDataset members) and its fuzz target share one reader.
 *
 *     \x93NUMPY  major minor  HEADER_LEN (u16 LE in 1.x, u32 LE in 2.x/3.x)
 *     {'descr': '<u2', 'fortran_order': False, 'shape': (1024,), }  spaces \n
 *     data: count * itemsize bytes, C order
 *
 * The header is a Python dict literal with exactly those three keys, in any
 * order; descr a plain type string (byte order '<', '>', '|' or '=' taken as
 * little-endian, kind b/i/u/f, item size 1, 2, 4 or 8; no structured or
 * object dtype), fortran_order True only where it changes nothing (at most
 * one dimension), shape a tuple of up to NPY_DIMS_MAX non-negative
 * integers.  Anything else is refused with what and where.
 */
#ifndef RINGFEED_PROTO_NPY_H
#define RINGFEED_PROTO_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define NPY_DIMS_MAX 8
#define NPY_HEADER_MAX 65536u       /* a header longer than this is refused */

struct npy_header {
    char kind;                      /* 'b' bool, 'i' signed, 'u' unsigned, 'f' float */
    uint32_t itemsize;              /* bytes per element: 1, 2, 4 or 8 */
    bool big_endian;                /* descr's '>' (never for itemsize 1) */
    uint32_t ndim;
    uint64_t shape[NPY_DIMS_MAX];
    uint64_t count;                 /* elements: the product of shape (1 for ()) */
    uint64_t data_off;              /* where the data starts */
    uint64_t data_bytes;            /* count * itemsize */
};

/*
 * Reads the header at the start of buf (len bytes: the whole file, or at
 * least its header; file_size, when not 0, is checked to hold the data
 * exactly).  Returns 0, or -EINVAL / -EOVERFLOW / -EPROTO (a version this
 * code does not read) with err saying what is wrong at which byte.
 */
int npy_parse(const void *buf, size_t len, uint64_t file_size, struct npy_header *h,
              struct rf_err *err);

/* "u2", "i8", "f4": the header's kind and size, for messages (cap >= 4). */
void npy_type_name(const struct npy_header *h, char *out, size_t cap);

#endif
