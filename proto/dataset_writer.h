/*
 * dataset_writer.h - packing records into a dataset folder (the format the
 * reader in dataset.h opens).
 *
 *   dataset_writer_create      makes "<parent>/.<name>.tmp-XXXXXX" next to
 *                              the destination, which must not exist
 *   dataset_writer_train_dict  (zstd only, optional, before the first add)
 *                              trains a zstd dictionary on sample records
 *   dataset_writer_add         encodes one record and appends it; shards
 *                              roll over at opts.shard_bytes
 *   dataset_writer_add_codec   the same with the record's own codec
 *   dataset_writer_set_raw_images  (jpeg only, optional, before finish)
 *                              how many records are RFPX pixels
 *   dataset_writer_set_image_shape  (jpeg only, optional, before finish)
 *                              every image's height and width
 *   dataset_writer_set_field_shape  (fields only, optional, before
 *                              finish) every image's height and width
 *                              in one image field
 *   dataset_writer_finish      writes the last index and header, the
 *                              MANIFEST, fsyncs everything, and renames the
 *                              temporary folder to the destination
 *   dataset_writer_abort       removes the temporary folder
 *
 * The destination appears only by the final rename, complete and synced, so
 * a pack that is killed or fails leaves no folder under that name; what it
 * leaves is a hidden ".<name>.tmp-*" folder without a MANIFEST, which no
 * reader opens.  (abort, or a failing finish, removes even that; only
 * SIGKILL or a crash leave it behind.)
 *
 * With codec zstd each record is one zstd frame with a content checksum; a
 * record that zstd cannot shrink is stored as is (codec none), so a shard of
 * a zstd dataset may mix both.  A writer is used by one thread.
 */
#ifndef RINGFEED_PROTO_DATASET_WRITER_H
#define RINGFEED_PROTO_DATASET_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "dataset_types.h"
#include "err.h"
#include "schema.h"

#define DATASET_WRITER_SHARD_BYTES (256ull << 20) /* default shard size */
#define DATASET_WRITER_ZSTD_LEVEL  3
#define DATASET_WRITER_DICT_BYTES  (112640u)      /* zstd's default, 110 KiB */

struct dataset_writer;

struct dataset_writer_opts {
    enum dataset_kind kind;
    enum dataset_dtype dtype;          /* tensor only */
    unsigned ndim;                     /* tensor only, 1..DATASET_MAX_DIMS */
    uint64_t shape[DATASET_MAX_DIMS];
    unsigned codec;                    /* enum dataset_codec */
    int level;                         /* zstd level; 0 means the default */
    uint64_t shard_bytes;              /* 0 means the default */
    uint32_t classes;                  /* 0: records carry DATASET_NO_LABEL */
    const char *const *class_names;    /* classes names, copied */
    uint32_t max_side;                 /* jpeg only: recorded in the
                                          MANIFEST (the packer resized the
                                          records); 0: none */
    uint32_t max_side_quality;         /* with max_side: 1..100 */
    const struct schema *schema;       /* kind fields only: the fields,
                                          copied and checked; a ragged or
                                          bytes field's max= bounds each
                                          record, and the MANIFEST records
                                          the most rows one had (schema.h) */
    enum dataset_jpeg_restart jpeg_restart;  /* jpeg only: recorded in the
                                          MANIFEST (the packer re-encoded
                                          the records with restart
                                          markers); 0: as they were */
};

struct dataset_writer_stats {
    uint64_t records;
    uint64_t decoded_bytes;  /* sum of the records as given */
    uint64_t stored_bytes;   /* sum of the records as stored */
    uint64_t file_bytes;     /* shard files (headers and indexes too) and
                                dictionary; the MANIFEST when finished */
    uint32_t shards;         /* shards started so far */
    uint32_t dict_size;      /* 0 without a dictionary */
};

/*
 * Validates opts and starts a pack into dest (a path that must not exist,
 * whose parent must).  Returns 0 with *out set, or a negative errno
 * (-EEXIST, -EINVAL for bad options) with err saying which.
 */
int dataset_writer_create(const char *dest,
                          const struct dataset_writer_opts *opts,
                          struct dataset_writer **out, struct rf_err *err);

/*
 * Trains a dictionary of at most dict_cap bytes (0: the default) on n
 * sample records, concatenated at samples with their sizes in sizes, and
 * uses it for every record after.  Only for codec zstd, only before the
 * first add.  zstd wants ~100x dict_cap bytes of samples, and at least a few
 * hundred of them.  Returns 0 or a negative errno with err set.
 */
int dataset_writer_train_dict(struct dataset_writer *w, const void *samples,
                              const size_t *sizes, size_t n, size_t dict_cap,
                              struct rf_err *err);

/*
 * Appends one record of len bytes (exactly the tensor size for tensors) with
 * its label (< classes, or DATASET_NO_LABEL without classes).  Returns 0 or
 * a negative errno with err set; after an I/O error the writer refuses
 * further adds and must be aborted.
 */
int dataset_writer_add(struct dataset_writer *w, const void *data,
                       size_t len, uint32_t label, struct rf_err *err);

/*
 * As dataset_writer_add, with this record's codec chosen by the caller:
 * DATASET_CODEC_NONE stores it as it is whatever the dataset's codec;
 * DATASET_CODEC_ZSTD compresses it (without the dictionary, unless the
 * dataset's codec is zstd), stored as is when zstd cannot shrink it.  The
 * MANIFEST's codec line says zstd once any record was stored so (a reader
 * allows records of codec none beside it), so a writer made with codec none
 * whose records all stay none writes the MANIFEST it always did.  The
 * image packer stores JPEGs as they are and RFPX pixel records with zstd.
 */
int dataset_writer_add_codec(struct dataset_writer *w, const void *data,
                             size_t len, uint32_t label, unsigned codec,
                             struct rf_err *err);

/*
 * The path of the file the record just added came from (n bytes, relative
 * to the folder being packed), for the dataset's source list (sources.h:
 * escaped by this call; finish writes it as DATASET_SOURCES_NAME and the
 * MANIFEST's sources line).  Give one right after each add, for every
 * record, or none at all: finish refuses a list with a line missing.
 * Returns 0, or -EINVAL (not right after an add, an empty path),
 * -ENAMETOOLONG (over SOURCES_LINE_MAX escaped), -EFBIG, -ENOMEM, with err
 * set; the record stays added either way.
 */
int dataset_writer_add_source(struct dataset_writer *w, const char *path,
                              size_t n, struct rf_err *err);

/*
 * For a jpeg dataset: n of its records are RFPX pixel records (pixels.h)
 * rather than JPEG, written to the MANIFEST as raw_images (manifest.h;
 * none when n is 0, the default).  Call it any time before finish, as often
 * as wanted: the last value counts.  The writer does not look at the
 * records; the caller counts what it added.  Returns 0, or -EINVAL with err
 * set for n > 0 on another kind (finish refuses n over the records added).
 */
int dataset_writer_set_raw_images(struct dataset_writer *w, uint64_t n,
                                  struct rf_err *err);

/*
 * For a jpeg dataset: every image record (JPEG or RFPX) decodes at full
 * scale to height x width pixels, written to the MANIFEST as image_shape
 * HxW (manifest.h; none when both are 0, the default), which the workers'
 * transform none needs.  Call it any time before finish; the last value
 * counts.  The writer does not decode the records: the caller vouches for
 * them.  Returns 0, or -EINVAL with err set for a non-zero shape on another
 * kind, or one side 0 and not the other, or a side over PX_SIDE_MAX.
 */
int dataset_writer_set_image_shape(struct dataset_writer *w, uint32_t height,
                                   uint32_t width, struct rf_err *err);

/*
 * For a kind-fields dataset: every image of image field `field` decodes at
 * full scale to height x width pixels, written to the MANIFEST as that
 * field's shape=HxW (schema.h; none when both are 0, the default).  Call
 * it any time before finish; the last value counts.  The writer does not
 * decode the records: the caller vouches for them (ringfeed-pack verify
 * checks them).  Returns 0, or -EINVAL with err set for another kind, a
 * field that is not an image, one side 0 and not the other, or a side
 * over PX_SIDE_MAX.
 */
int dataset_writer_set_field_shape(struct dataset_writer *w, uint32_t field,
                                   uint32_t height, uint32_t width,
                                   struct rf_err *err);

/* Figures so far (for progress lines and the summary). */
void dataset_writer_get_stats(const struct dataset_writer *w,
                              struct dataset_writer_stats *st);

/* The temporary folder being written ("<parent>/.<name>.tmp-XXXXXX"). */
const char *dataset_writer_tmpdir(const struct dataset_writer *w);

/*
 * Completes the pack and frees w whatever happens.  On success dest is a
 * complete dataset and *st (when not NULL) has the final figures.  On
 * failure the temporary folder is removed and dest does not exist, with one
 * exception that err says: the rename succeeded but the fsync of the
 * parent folder failed (dest is complete; the rename may not survive a
 * power cut).
 */
int dataset_writer_finish(struct dataset_writer *w,
                          struct dataset_writer_stats *st,
                          struct rf_err *err);

/* Removes the temporary folder and frees w.  Accepts NULL. */
void dataset_writer_abort(struct dataset_writer *w);

#endif
