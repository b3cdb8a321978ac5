/*
 * dataset_types.h - the vocabulary of a packed dataset: kinds of sample,
 * tensor element types, and the limits every reader and writer enforces.
 *
 * The numbers of enum dataset_kind and enum dataset_dtype never appear on
 * disk (the manifest names them in words), so they may be reordered; the
 * names may not change.  Codecs, whose ids do go on disk, are in codec.h.
 */
#ifndef RINGFEED_PROTO_DATASET_TYPES_H
#define RINGFEED_PROTO_DATASET_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* What one sample is. */
enum dataset_kind {
    DATASET_JPEG,   /* an encoded JPEG image, decoded by the daemon */
    DATASET_TENSOR, /* a fixed-shape array, dtype and shape in the manifest */
    DATASET_BYTES,  /* opaque bytes of any length */
    DATASET_FIELDS, /* named, typed fields per sample: the schema in the
                       manifest (schema.h), each record all of them */
    DATASET_KIND_COUNT
};

/*
 * Element type of a tensor; multi-byte types are stored little-endian, and
 * delivered so (transform raw copies records as they are).  The table in
 * dataset_types.c is the one place that gives each its name, its size and
 * its number in a ring header (enum ring_dtype in ring.h, which a client
 * sees as RF_DTYPE_* in ringfeed.h).
 */
enum dataset_dtype {
    DATASET_DTYPE_NONE, /* not a tensor */
    DATASET_DTYPE_U8,
    DATASET_DTYPE_I8,
    DATASET_DTYPE_I16,
    DATASET_DTYPE_I32,
    DATASET_DTYPE_F32,
    DATASET_DTYPE_F64,
    DATASET_DTYPE_I64,
    DATASET_DTYPE_F16,
    DATASET_DTYPE_BF16,
    DATASET_DTYPE_U16,
    DATASET_DTYPE_COUNT
};

/*
 * How a jpeg dataset's records were written: the MANIFEST's jpeg_restart
 * key, in words there ("lossless"; no key for DATASET_JPEG_AS_IS).
 * DATASET_JPEG_RESTART_LOSSLESS: every record the packer could re-encode
 * is a single-scan baseline JPEG with restart markers every 1..4 MCUs, a
 * number that divides the MCUs of a row (tools/jpeg_restart.h has the
 * rule), re-encoded losslessly (the same DCT coefficients, so the same
 * pixels) unless --max-side shrank it; the others (CMYK, RGB, data that
 * does not decode, ...) are stored as they were, so a reader still checks
 * each record's own markers.
 */
enum dataset_jpeg_restart {
    DATASET_JPEG_AS_IS,             /* stored as they were (or shrunk by
                                       --max-side, without restarts) */
    DATASET_JPEG_RESTART_LOSSLESS,
    DATASET_JPEG_RESTART_COUNT
};

/* Hard caps: a record (stored or decoded) and the files read whole. */
#define DATASET_RECORD_MAX   (1u << 30)    /* 1 GiB */
#define DATASET_MANIFEST_MAX (64u << 20)   /* 64 MiB */
#define DATASET_DICT_MAX     (16u << 20)   /* 16 MiB */
#define DATASET_MAX_DIMS     8
#define DATASET_MAX_CLASSES  (1u << 20)
#define DATASET_MAX_SHARDS   (1u << 20)

/* The label of a sample in a dataset without classes. */
#define DATASET_NO_LABEL 0xFFFFFFFFu

/* File names inside a dataset folder. */
#define DATASET_MANIFEST_NAME "MANIFEST"
#define DATASET_DICT_NAME     "dict.zstd"
#define DATASET_SOURCES_NAME  "sources.txt"   /* proto/sources.h */

/* "jpeg", "tensor", "bytes"; NULL for a value out of range. */
const char *dataset_kind_name(enum dataset_kind kind);
/* The kind named by the n bytes at s, or -EINVAL. */
int dataset_kind_parse(const char *s, size_t n);

/* "u8", "i8", ...; NULL for DATASET_DTYPE_NONE or out of range. */
const char *dataset_dtype_name(enum dataset_dtype dtype);
/* Bytes per element; 0 for DATASET_DTYPE_NONE or out of range. */
size_t dataset_dtype_size(enum dataset_dtype dtype);
/* The dtype named by the n bytes at s, or -EINVAL. */
int dataset_dtype_parse(const char *s, size_t n);
/* Every dtype's name, space separated, for messages. */
const char *dataset_dtype_names(void);
/* Its number in a ring header (enum ring_dtype); 0 for DATASET_DTYPE_NONE
 * or out of range. */
uint32_t dataset_dtype_ring(enum dataset_dtype dtype);
/* The dtype whose ring number is ring, or -EINVAL (0 and unknown numbers:
 * a ring header is input to the client). */
int dataset_dtype_from_ring(uint32_t ring);

/*
 * Bytes in one tensor of ndim dims of dtype, or 0 when ndim is 0 or out of
 * range, a dim is 0, or the product overflows or exceeds DATASET_RECORD_MAX.
 */
uint64_t dataset_tensor_bytes(enum dataset_dtype dtype, const uint64_t *dims,
                              unsigned ndim);

#endif
