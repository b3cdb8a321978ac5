/*
 * schema.h - the one description of a sample: an ordered list of named,
 * typed fields.  The MANIFEST carries it (kind fields: one "field" line per
 * field), the writers encode records by it, the workers split records and
 * lay ring columns out by it, and the clients read a ring's field table
 * made from it.  Datasets of the older kinds have an implicit schema
 * (schema_legacy): an image or a tensor, and a label.
 *
 * A field line in the MANIFEST, after "field", is its name, its kind, and
 * options as key=value words (no spaces inside one), in any order:
 *
 *     field image image                      shape=HxW when all one size
 *     field mask image channels=1 mask=image dtype=u8 (or u16)
 *     field boxes ragged dtype=f32 shape=4 max=50 boxes=image
 *     field classes ragged dtype=i64 max=50 rows=boxes
 *     field tokens ragged dtype=i32 max=2048 cap=65536
 *     field caption bytes max=312
 *     field emb tensor dtype=f16 shape=512
 *     field label scalar dtype=i64          (or f64)
 *
 *   name      1..SCHEMA_NAME_MAX of [A-Za-z0-9_], not starting with a digit;
 *             unique in the schema.
 *   image     an image per sample, any size: its record part is a JPEG or
 *             an RFPX record (pixels.h), told apart by its first bytes.
 *             channels=3 (default; RGB) or 1 (one plane: masks); dtype=u8
 *             (default) or u16 (channels=1 RFPX only); shape=HxW when every
 *             image of the field has that size; mask=F: a mask of image
 *             field F (same size per sample, class indices), which follows
 *             F's crop and flip, resized nearest-neighbour.
 *   tensor    a fixed shape (shape=AxBx..., 1..DATASET_MAX_DIMS dims) and
 *             dtype; the record part is exactly its bytes.
 *   ragged    a variable first dimension: rows of a fixed tail (shape=...,
 *             omitted for one value per row) and dtype; max=N rows per
 *             sample at most (the writer records the largest it wrote);
 *             cap=N rows per batch at most, optional (without it a batch
 *             holds batch * max); boxes=F: rows are boxes x0,y0,x1,y1 (f32,
 *             shape=4) in the pixels of image field F, which follow F's crop;
 *             rows=B: one row per box of the earlier boxes field B (a box's
 *             class, score, id), in the same order, so each sample has as
 *             many rows as B has and a row is dropped with its box.
 *   bytes     variable bytes (text, JSON): a ragged u8 field of one value
 *             per row; max= and cap= as for ragged.
 *   scalar    one int64 or float64 (dtype=i64 or f64, default i64).
 *
 * A record of a kind-fields dataset is every field's part in schema order,
 * each a 4-byte little-endian length then that many bytes:
 *
 *   +-----------+------------------+-----------+-----------------+---
 *   | len0 (u32)| field 0's bytes  | len1 (u32)| field 1's bytes | ...
 *   +-----------+------------------+-----------+-----------------+---
 *
 * and nothing after the last.  schema_record_split checks each length for
 * its field (scalar 8, tensor its size, ragged a whole number of rows of at
 * most max, bytes at most max, image at least 1) and that the parts fill
 * the record exactly.
 *
 * Everything here is a pure function of its arguments: the parsers take a
 * buffer and a length and name the field (and the option) that is wrong.
 */
#ifndef RINGFEED_PROTO_SCHEMA_H
#define RINGFEED_PROTO_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "dataset_types.h"
#include "err.h"

#define SCHEMA_MAX_FIELDS 16
#define SCHEMA_NAME_MAX 31
#define SCHEMA_LINE_MAX 512 /* a formatted field line, NUL included */

enum schema_kind {
    SCHEMA_IMAGE,
    SCHEMA_TENSOR,
    SCHEMA_RAGGED,
    SCHEMA_BYTES,
    SCHEMA_SCALAR,
    SCHEMA_KIND_COUNT
};

enum schema_role {
    SCHEMA_ROLE_NONE,
    SCHEMA_ROLE_BOXES, /* ragged f32 x 4: boxes of image field `of` */
    SCHEMA_ROLE_MASK,  /* image, one channel: mask of image field `of` */
    SCHEMA_ROLE_ROWS,  /* ragged: one row per box of boxes field `of`,
                          dropped with its box */
};

struct schema_field {
    char name[SCHEMA_NAME_MAX + 1];
    enum schema_kind kind;
    enum dataset_dtype dtype;      /* image: u8 or u16; bytes: u8 */
    unsigned ndim;                 /* tensor: its dims; ragged: the tail's
                                      (0: one value per row); else 0 */
    uint64_t dims[DATASET_MAX_DIMS];
    uint32_t channels;             /* image: 3 or 1; else 0 */
    uint32_t height, width;        /* image: every image's size; 0, 0: varies */
    uint64_t max_rows;             /* ragged, bytes: rows per sample at most */
    uint64_t cap_rows;             /* ragged, bytes: rows per batch at most;
                                      0: batch * max_rows */
    enum schema_role role;
    uint32_t of;                   /* the field the role refers to */
    uint64_t row_bytes;            /* derived by schema_check: tensor: the
                                      whole tensor; ragged: one row; bytes:
                                      1; scalar: 8; image: 0 */
};

struct schema {
    uint32_t n;
    struct schema_field f[SCHEMA_MAX_FIELDS];
};

/* One field's part of a record: at byte off of the record, len bytes. */
struct schema_part {
    uint32_t off;
    uint32_t len;
};

/* "image", "tensor", ...; NULL out of range.  The kind named by n bytes at
 * s, or -EINVAL. */
const char *schema_kind_name(enum schema_kind k);
int schema_kind_parse(const char *s, size_t n);

/*
 * Parses a field line's text after "field " (name, kind, options; len
 * bytes, no newline) into *f, which it zeroes first.  A role's field is
 * kept by name in *of_name (SCHEMA_NAME_MAX + 1 bytes; "" without a role)
 * for schema_add to resolve.  Returns 0 or -EINVAL with err naming the
 * field and the word that is wrong.
 */
int schema_field_parse(const char *s, size_t len, struct schema_field *f,
                       char *of_name, struct rf_err *err);

/*
 * Appends f to s, resolving of_name (a field already in s; "" for none)
 * into f->of.  Returns 0, or -EINVAL (a full schema, a name used twice, a
 * role naming no earlier field) with err naming the field.
 */
int schema_add(struct schema *s, const struct schema_field *f,
               const char *of_name, struct rf_err *err);

/*
 * Checks every rule above and fills each field's row_bytes.  Returns 0 or
 * -EINVAL with err naming the field and the rule.  The manifest parser and
 * every writer call it; a reader trusts a schema it checked.
 */
int schema_check(struct schema *s, struct rf_err *err);

/* Writes field i's line (without "field " and the newline) into buf of cap
 * bytes; returns its length, or -ENOSPC. */
int schema_field_format(const struct schema *s, uint32_t i, char *buf,
                        size_t cap);

/* The index of the field named by n bytes at name, or -ENOENT. */
int schema_find(const struct schema *s, const char *name, size_t n);

/*
 * The implicit schema of a dataset of an older kind: jpeg: "image" (image,
 * 3 channels, height x width when known: 0, 0 otherwise) and "label"
 * (scalar i64); tensor: "tensor" (its dtype and dims) and "label".  The
 * label is the shard entry's, not part of the record.  Returns 0, or
 * -EINVAL for kind bytes (opaque, no schema) or fields (the manifest has
 * it).
 */
int schema_legacy(enum dataset_kind kind, enum dataset_dtype dtype,
                  const uint64_t *dims, unsigned ndim, uint32_t height,
                  uint32_t width, struct schema *out);

/*
 * Splits a record of len bytes into s->n parts (parts[] has room for
 * them) and checks each (see above).  Returns 0, or -EBADMSG with err
 * naming the field, its byte offset in the record and what is wrong.
 */
int schema_record_split(const struct schema *s, const uint8_t *rec,
                        size_t len, struct schema_part *parts,
                        struct rf_err *err);

/*
 * Bytes of the record made of parts with lens[i] bytes each, or 0 when it
 * would exceed DATASET_RECORD_MAX.  schema_record_put_len writes one
 * part's length word at p (then the caller copies its bytes after it).
 */
uint64_t schema_record_size(const struct schema *s, const uint64_t *lens);
void schema_record_put_len(uint8_t *p, uint32_t len);

/*
 * Rows of field i in one sample whose part is len bytes: scalar and
 * tensor 1, ragged len / row_bytes, bytes len, image 1.
 */
uint64_t schema_rows(const struct schema_field *f, uint64_t len);

#endif
