/*
 * fields.h - a stream's ring field table (proto/ring.h VERSION 3), made
 * from its dataset's schema (proto/schema.h) and its transform's
 * parameters.  The main process builds it to size the ring and fill the
 * header; a worker builds it again at WIRE_RING_ADD from its own open of
 * the dataset and compares it with the header's copy (never trusting the
 * ring, ring.h T3), and places every column by its own copy.
 *
 * The table (docs/design/ring.md, Fields in the daemon):
 *   kind fields: one entry per schema field, in schema order; the bound
 *     image field (wire_xform.field) FIXED u8, the transform's shape and
 *     layout; a mask of it FIXED 1xSxS (CHW) or SxSx1 (HWC), u8 or u16;
 *     tensor FIXED its dtype and dims (more than 4 flattened into the
 *     first); scalar FIXED i64 or f64, ndim 0; ragged RAGGED, item = one
 *     row, ndim/shape = the tail, capacity = cap= or batch * max=; bytes
 *     RAGGED u8, ndim 0.  primary: the bound image field, or for raw the
 *     first fixed-size field.
 *   transform tokens (window.h): the token field FIXED context + 1 values
 *     of its dtype, and with doc_ids=1 "doc_ids" FIXED context + 1 int32;
 *     primary 0; kind_fields false (a sample is not a record).
 *   jpeg and tensor datasets: the transform's output (FIXED, at meta_size
 *     exactly as version 2) and "label" (FIXED i64), primary 0.
 * A version-1 or -2 ring has no table: the version-2 geometry of the
 * transform's output; such a client is refused a kind-fields dataset or an
 * element type numbered 7 or more.
 *
 * Pure functions of their arguments.
 */
#ifndef RINGFEED_DAEMON_FIELDS_H
#define RINGFEED_DAEMON_FIELDS_H

#include <stdbool.h>
#include <stdint.h>

#include "dataset.h"
#include "err.h"
#include "ring.h"
#include "transform.h"
#include "wire.h"

struct xform_fields {
    uint32_t version;        /* the ring's layout, 1..3 */
    uint32_t n, primary;     /* version 3: entries of f[]; else 0, 0 */
    struct ring_field f[RING_MAX_FIELDS];
    bool kind_fields;        /* the dataset is kind fields: records split by schema */
    bool ragged;             /* a RAGGED column: one job per batch (plan.c) */
    bool label_column;       /* version 3 of a jpeg/tensor dataset: f[1] is the label */
    struct ring_geom g;
};

/*
 * Resolves ATTACH field= (name, "" when not given) for transform raw
 * (is_raw) or an image transform on the dataset described by info, into
 * *field (a schema index, or WIRE_NO_FIELD).  Refuses, with err naming
 * the field and listing the dataset's fields: an unknown name, a field that
 * is not a 3-channel image or is a mask, a second image field that is not
 * a mask (one transform per stream), field= with raw, and raw on a dataset
 * with image fields.  Returns 0 or -EINVAL.
 */
int xform_bind_field(const struct dataset_info *info, bool is_raw, const char *name,
                     uint32_t *field, struct rf_err *err);

/*
 * Builds the table and geometry of a ring of `version` for dataset info,
 * parameters p (field resolved), the transform's output out, depth and
 * batch.  Returns 0, or -EPROTO (a version-2 client and a dataset it
 * cannot read: err says which versions and what to upgrade), -EINVAL or
 * -EOVERFLOW with err naming the field.
 */
int xform_fields_build(const struct dataset_info *info, const struct wire_xform *p,
                       const struct xform_out *out, uint32_t version, uint32_t depth,
                       uint32_t batch, struct xform_fields *xf, struct rf_err *err);

/* The first tensor or scalar field of s (raw's primary), or -ENOENT. */
int xform_first_fixed(const struct schema *s);

/* True when two built tables give the same ring layout (version, geometry,
 * every entry): rings share batches only then (daemon/share.c). */
bool xform_fields_equal(const struct xform_fields *a, const struct xform_fields *b);

/* A digest of a built table (version, entries, primary, geometry): the
 * main process sends its stream's in WIRE_RING_ADD. */
uint32_t xform_fields_digest(const struct xform_fields *xf);

/* Compares a worker's built table with the main process's geometry and
 * digest (WIRE_RING_ADD): 0, or -EBADMSG with err naming the figure that
 * differs.  Never a ring's header: the client can rewrite that. */
int xform_fields_match(const struct xform_fields *xf, const struct ring_geom *g,
                       uint32_t digest, struct rf_err *err);

/* Writes the table into a fresh header (after ring_init, version 3). */
void xform_fields_put(const struct xform_fields *xf, struct ring_hdr *h);

#endif
