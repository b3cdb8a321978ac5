/*
 * transform.h - what a worker does to a decoded record before it lands in a
 * ring slot, as a table of named transforms.
 *
 * The main process looks a transform up by the name ATTACH gave and asks it
 * for the output geometry (shape, layout, element type, bytes per sample),
 * which sizes the ring and fills its header.  Workers call apply() on each record with the sample's own random
 * stream, keyed by (seed, epoch, dataset index), so the output never
 * depends on which worker ran it.
 *
 * apply() returns 0, or a negative errno with *why set and a reason in err;
 * a failing sample is bad, not fatal: the worker substitutes it.
 */
#ifndef RINGFEED_DAEMON_TRANSFORM_H
#define RINGFEED_DAEMON_TRANSFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl.h"
#include "dataset.h"
#include "err.h"
#include "rng.h"
#include "targets.h"
#include "wire.h"

struct xform_image_ctx;

struct xform_out {
    uint32_t shape[3];
    uint32_t layout;       /* enum ring_layout */
    uint32_t dtype;        /* enum ring_dtype, written to the ring header */
    uint64_t sample_bytes; /* shape's elements times dtype's size */
};

/*
 * What apply() keeps in one worker between samples (decoders, buffers) and
 * the time it spent per stage, which the worker moves into its counters
 * (wire.h) after each call.  Zero-initialize; xform_ctx_clear frees.
 */
struct xform_ctx {
    struct xform_image_ctx *image;  /* train/eval (xform_image.c), made on first use */
    uint64_t decode_ns;             /* decoding the image (JPEG) */
    uint64_t resize_ns;             /* resampling it */
    uint64_t tiled;                 /* images decoded from restart-interval tiles */
    uint64_t write_ns;              /* writing the sample into the slot (0
                                       for train/eval: their resampler
                                       writes the slot, inside resize) */
    unsigned force_scale;           /* tools only (tests/xform_run --scale): decode at
                                     * force_scale/8, 1..8; 0 in the workers: the rule
                                     * (jpg_pick_scale) */
    unsigned last_scale;            /* the DCT scale (n of n/8) of the last image */
    bool merged_upsampling;         /* tools only (xform_run --merged): jpg_set_merged */
    bool fast_dct;                  /* tools only (xform_run --fast-dct): jpg_set_fast_dct */
    bool no_tiles;                  /* tools only (xform_run --no-tiles): jpg_set_tiles(false) */
    struct tgt_view view;           /* train/eval/none: how the last image they
                                     * applied with success mapped onto the
                                     * output, for its boxes and masks
                                     * (targets.h); untouched by raw */
};

void xform_ctx_clear(struct xform_ctx *ctx);

/* The ATTACH keys that parameterize a transform, one bit each: a
 * transform's params says which it reads, and a request that names any
 * other is refused (xform_check_params), never served as if it were not
 * there. */
enum xform_param {
    XP_SIZE = 1u << 0,
    XP_LAYOUT = 1u << 1,
    XP_SCALE = 1u << 2,
    XP_RATIO = 1u << 3,
    XP_FLIP = 1u << 4,
    XP_CROP = 1u << 5,
    XP_CONTEXT = 1u << 6,
    XP_DOC_IDS = 1u << 7,
};

struct xform_def {
    const char *name;
    uint32_t params; /* the enum xform_param bits geometry() and apply() read */
    /* The record decodes straight into the slot, as it is: apply() is not
     * called and the decoded length must equal out->sample_bytes. */
    bool direct;
    /* A sample is not a record but a window of consecutive values of the
     * dataset's one ragged field, read by the worker's window path
     * (window.h) straight into the slot: apply() is NULL, and the
     * stream's n is the windows' count, not the records'. */
    bool windows;
    /* What one sample typically costs a worker, in nanoseconds, measured
     * (STATS' busy time over samples): the scheduler sizes jobs by it. */
    uint64_t cost_ns;
    /* Output geometry for a dataset and parameters; -EINVAL with a reason
     * when the transform does not fit the dataset's kind. */
    int (*geometry)(const struct dataset *ds, const struct wire_xform *p,
                    struct xform_out *out, struct rf_err *err);
    /* Writes one sample of out->sample_bytes at dst; may keep working
     * memory in ctx and adds its stage times there.  It only stores to
     * dst, never loads from it: dst may be a ring slot, which its client
     * can write at any time (proto/ring.h T2). */
    int (*apply)(const struct dataset *ds, const struct wire_xform *p,
                 const void *rec, size_t rec_len, struct rng_stream *rng,
                 struct xform_ctx *ctx, uint8_t *dst, const struct xform_out *out,
                 enum wire_bad *why, struct rf_err *err);
};

/* A dataset's tensor shape as three dims (C,H,W): leading dims of 1 are
 * added, and a tensor of more than three dims is flattened into the first.
 * Returns 0, or -EINVAL when the dataset is not a tensor. */
int xform_tensor_shape(const struct dataset_info *info, uint32_t shape[3]);

/* Refuses a transform parameter that the request a names and transform
 * id does not use (flip= with raw, crop= with train), whatever its value.
 * Returns 0, or -EINVAL with the parameter, the transform and what to do
 * in err. */
int xform_check_params(uint32_t id, const struct ctl_attach *a, struct rf_err *err);

/* Index of the named transform, or -ENOENT. */
int xform_find(const char *name);
const struct xform_def *xform_get(uint32_t id);
/* The names, space separated, for error messages. */
const char *xform_names(void);
/* Checks the table at start-up: names unique, every entry complete, and
 * the names exactly ATTACH's transform words (ctl_transform_name). */
int xform_table_check(void);

#endif
