/*
 * dataset.h - reading a packed dataset: a folder holding a MANIFEST
 * (manifest.h), shard files (shard.h) and maybe a zstd dictionary.
 *
 * Reading a sample is three steps kept apart, so a worker can batch the
 * middle one (one io_uring submission for a whole batch):
 *
 *   dataset_locate   sample number -> shard fd, file offset, stored and
 *                    decoded lengths, label, codec, checksum; the index entry
 *                    is validated here, every time
 *   (read)           the caller reads loc.stored_len bytes at loc.offset
 *                    from loc.fd, by any means
 *   dataset_decode   checks the record's CRC-32C, then decodes (or copies)
 *                    into the caller's buffer: exactly loc.decoded_len bytes
 *
 * dataset_read does all three with pread, for tools and tests.
 *
 * Threads and processes.  After dataset_open returns, a dataset is
 * read-only: any number of threads may locate and decode at once, and forked
 * children may keep using it (shard fds are read with pread, never with the
 * file position).  Decoding state is per thread: a struct dataset_dctx.
 *
 * Memory.  Each shard's index is mapped read-only (MAP_SHARED), so all the
 * processes using a dataset share one copy in the page cache: a 100M-sample
 * dataset costs about 3.2 GB of index, once, however many workers read it.
 * Opening reads every index once to check its checksum.  Packs never
 * rewrite a dataset in place, but someone may truncate a shard by hand
 * while it is read: the index mappings are registered with the mapping
 * guard (mapguard.h), so in a process that installed it a read past the
 * new end gives zeros (which fail the entry checks) instead of SIGBUS, and
 * dataset_check then says which shard changed and how.
 *
 * Errors.  Every function that fails returns a negative errno and fills err
 * (when not NULL) with one line naming the shard file, the record number
 * and the byte offset: "<dir>/shard-00002.rfs: record 17 at byte 13392:
 * checksum mismatch ...".  Nothing aborts; no allocation follows a length
 * read from disk without a bound from the file size or DATASET_RECORD_MAX.
 */
#ifndef RINGFEED_PROTO_DATASET_H
#define RINGFEED_PROTO_DATASET_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "codec.h"
#include "dataset_types.h"
#include "err.h"
#include "schema.h"

struct dataset;
struct dataset_dctx;

/* What a dataset holds; dataset_info() returns it, owned by the dataset. */
struct dataset_info {
    uint64_t samples;
    enum dataset_kind kind;
    enum dataset_dtype dtype;        /* DATASET_DTYPE_NONE unless tensor */
    unsigned ndim;                   /* 0 unless tensor */
    uint64_t shape[DATASET_MAX_DIMS];
    uint64_t sample_bytes;           /* tensor: bytes per sample; else 0 */
    unsigned codec;                  /* enum dataset_codec */
    int has_dict;
    uint32_t dict_size;
    uint32_t classes;                /* 0: samples carry DATASET_NO_LABEL */
    uint32_t max_stored;             /* largest record on disk, bytes */
    uint32_t max_decoded;            /* largest decoded record, bytes */
    uint32_t max_side;               /* jpeg packed with --max-side: the
                                        longest side allowed; 0: as they were */
    uint32_t max_side_quality;       /* the re-encoding quality; 0 without */
    enum dataset_jpeg_restart jpeg_restart;  /* jpeg: how records were
                                        written (dataset_types.h) */
    uint64_t raw_images;             /* jpeg: records that are RFPX pixels
                                        (pixels.h), not JPEG; 0: none */
    uint32_t image_height, image_width; /* jpeg: every image's size (the
                                        MANIFEST's image_shape); 0, 0: not
                                        known to be one size */
    uint32_t shards;
    struct schema schema;            /* the fields of a sample: kind fields'
                                        MANIFEST lines, or the implicit
                                        schema of jpeg and tensor
                                        (schema_legacy); n == 0 for bytes */
};

/* Where one sample is and what it should decode to. */
struct dataset_loc {
    uint64_t sample;         /* dataset-wide sample number */
    int fd;                  /* the shard, O_RDONLY; owned by the dataset */
    const char *shard_path;  /* "<dir>/<file>"; owned by the dataset */
    uint32_t shard;          /* shard number in the manifest */
    uint64_t record;         /* record number within the shard */
    uint64_t offset;         /* file offset of the stored bytes */
    uint32_t stored_len;
    uint32_t decoded_len;
    uint32_t label;          /* < classes, or DATASET_NO_LABEL */
    uint32_t crc;            /* CRC-32C of the stored bytes */
    uint8_t codec;           /* enum dataset_codec */
    const struct dataset *ds; /* the dataset holding it (a view's part) */
};

/* One shard, for tools (verify, info). */
struct dataset_shard_info {
    const char *path;        /* "<dir>/<file>" */
    const char *file;        /* the MANIFEST's name for it */
    uint32_t index_crc;      /* the MANIFEST's CRC-32C of its index */
    uint64_t first_sample;
    uint64_t records;
    uint64_t file_size;
    uint64_t record_bytes;   /* bytes between the header and the index */
    const char *problem;     /* NULL, or why it failed its checks */
    int usable;              /* records can be located */
};

/* Fail the open on any damaged shard (the default). */
#define DATASET_OPEN_STRICT   0u
/*
 * For verify: open even when shards are damaged.  A shard whose header or
 * size is bad is marked unusable (its records fail to locate, with the
 * shard's problem); a shard whose index checksum fails stays usable, and
 * each entry's own checksum tells the damaged records from the good ones.
 * Problems of the manifest and dictionary still fail the open.
 */
#define DATASET_OPEN_TOLERANT 1u
/*
 * For a pack whose shards come and go (a remote dataset in the node cache,
 * daemon/ahead.h): the MANIFEST and the small files are read and checked
 * at open, every shard's place and size come from the MANIFEST, and a
 * shard's file is opened and checked (as at a strict open) by
 * dataset_shard_load, when first needed.  A shard not loaded locates with
 * -EAGAIN.  Loading changes the dataset: an on-demand dataset belongs to
 * one thread.
 */
#define DATASET_OPEN_ON_DEMAND 2u

/*
 * Opens the dataset in folder dir: parses the manifest, opens and checks
 * every shard (size, header, index checksum against header and manifest),
 * loads the dictionary.  On success *out owns everything; close it with
 * dataset_close.  Returns 0, or a negative errno (-ENOENT: no MANIFEST,
 * -EBADMSG: damaged, -EPROTO: a format version this code does not read).
 */
int dataset_open(const char *dir, struct dataset **out, struct rf_err *err);
int dataset_open_flags(const char *dir, unsigned flags, struct dataset **out,
                       struct rf_err *err);

/* Unmaps and closes everything.  Accepts NULL. */
void dataset_close(struct dataset *ds);

/*
 * A VIEW: parts[0..n) (2..16 open datasets of one schema) read as one, the
 * samples of parts[k] following those of the parts before it (a mixture
 * stream's index space, mix.h).  The view borrows the parts (they outlive
 * it; dataset_close frees only the view).  Its info is parts[0]'s with the
 * samples summed and the largest record sizes and class count of any part;
 * locate, prefetch, decode, check, class names and sources answer for the
 * part holding the sample.  Splits, shards and on-demand parts are not for
 * views: a part opened on demand is refused, and so are parts whose fields
 * (or image size, or tensor shape) differ, naming the first difference.
 * 0, -EINVAL with err, -ENOMEM.
 */
int dataset_view_new(struct dataset *const *parts, const char *const *names, uint32_t n,
                     struct dataset **out, struct rf_err *err);
/* Part k of a view holds samples [base, base + samples); n parts (0: not a view). */
uint32_t dataset_view_parts(const struct dataset *ds);

/* Was ds opened with DATASET_OPEN_ON_DEMAND? */
bool dataset_on_demand(const struct dataset *ds);
/* The shard holding sample (a sample past the end: the last shard). */
uint32_t dataset_shard_of(const struct dataset *ds, uint64_t sample);
/*
 * Opens and checks shard i of an on-demand dataset if it is not open now
 * (size, header, index checksum against the MANIFEST).  Returns 0, or a
 * negative errno with err naming the file (-ENOENT: not in the folder);
 * the shard then stays closed and a later call tries again.  On a dataset
 * opened otherwise: 0 when the shard is usable, else its problem.
 */
int dataset_shard_load(struct dataset *ds, uint32_t i, struct rf_err *err);
/* dataset_locate, loading the sample's shard first when ds is on demand. */
int dataset_locate_load(struct dataset *ds, uint64_t sample, struct dataset_loc *loc,
                        struct rf_err *err);
/*
 * Closes the loaded shards of an on-demand dataset whose files were
 * removed (evicted from the cache: the open file kept their disk space);
 * a later load opens the file under the name again.  Returns how many.
 */
uint32_t dataset_sweep(struct dataset *ds);
/* How many loaded shards dataset_sweep would close now (a reader that
 * keeps maps of the files drops them first). */
uint32_t dataset_removed(const struct dataset *ds);

/*
 * Does every shard file still have the size it had when ds was opened?
 * Returns 0, or -ESTALE with err naming the shard and both sizes ("...:
 * file is 15000000 bytes now, 47040016 when the dataset was opened:
 * truncated while being read"), or fstat's errno.  A few fstat calls per
 * shard: for after a failed read or a survived fault, not per record.
 */
int dataset_check(const struct dataset *ds, struct rf_err *err);

/* What the dataset was packed as: CRC-32C of its MANIFEST text (which
 * names every shard's size and index checksum) and the text's length, both
 * without the "subset" lines (manifest.h), which ringfeed-pack split
 * changes after packing.  Two opens of one folder agree unless the pack
 * in it changed; a split changes the sets, not the data. */
uint64_t dataset_identity(const struct dataset *ds);
/* dataset_identity's value for a MANIFEST's text. */
uint64_t dataset_identity_of(const char *text, size_t len);

/*
 * Named index sets (proto/subset.h).  The sets a dataset names can change
 * while it is open (ringfeed-pack split rewrites the MANIFEST's subset
 * lines), so they are read from the folder when asked for, not at open:
 * dataset_manifest_now parses the MANIFEST as it is now into *m (free it
 * with manifest_free) and checks that it describes the same data as when
 * ds was opened.  Returns 0, -ESTALE when the pack changed (err says
 * "repack into a new folder or reload"), or a read or parse error, err
 * naming the file and line.
 */
struct manifest;
int dataset_manifest_now(const struct dataset *ds, struct manifest *m, struct rf_err *err);

/* One set as the MANIFEST names it: what a process needs to read it and
 * to check it is the one another process read. */
struct dataset_subset_ref {
    char name[33];           /* SUBSET_NAME_MAX + 1 */
    char file[256];          /* MANIFEST_NAME_MAX + 1 */
    uint64_t count;
    uint64_t bytes;
    uint32_t crc;
};

/*
 * Set name of ds as the folder's MANIFEST names it now: fills *ref.
 * Returns 0; -ENOENT with err listing the sets the pack has ("... the pack
 * has: train val", or says it has none and how to make them); or
 * dataset_manifest_now's errors.
 */
int dataset_subset_find(const struct dataset *ds, const char *name,
                        struct dataset_subset_ref *ref, struct rf_err *err);

/*
 * Reads ref's file from ds's folder, checks its size and CRC-32C against
 * ref (read_checked, as the dictionary), parses it (subset_parse: every
 * index below the dataset's samples, sorted, distinct) and checks its
 * count.  *out is initialised; free it with subset_free.  Returns 0, or a
 * negative errno with err naming the file: "<dir>/<file>: ...".
 */
struct subset;
int dataset_subset_read(const struct dataset *ds, const struct dataset_subset_ref *ref,
                        struct subset *out, struct rf_err *err);

/* Accessors; the pointers live as long as ds. */
const struct dataset_info *dataset_info(const struct dataset *ds);
const char *dataset_dir(const struct dataset *ds);
/* Class i's name (i < classes), else NULL. */
const char *dataset_class_name(const struct dataset *ds, uint32_t i);
/* 1 when the MANIFEST names a source list (proto/sources.h), else 0. */
int dataset_has_sources(const struct dataset *ds);
/*
 * Sample i's line of the source list, escaped (sources.h), without its
 * '\n': *line, *len, valid until dataset_close.  The first call reads the
 * list whole and checks its size, CRC-32C and every line (a failure is not
 * kept: the next call tries again).  Returns 0, -ENOENT when the dataset has
 * no source list, -ERANGE for i past the samples, -EBADMSG for a list that
 * fails a check, -ENOMEM or the read's -errno; err says which.
 */
int dataset_source(struct dataset *ds, uint64_t i, const char **line,
                   size_t *len, struct rf_err *err);
/* Shard i (i < shards): 0, or -ERANGE. */
int dataset_shard_info(const struct dataset *ds, uint32_t i,
                       struct dataset_shard_info *info);

/* Asks the CPU to fetch sample's index entry, for a dataset_locate soon
 * after: entries of a shuffled epoch are each a cache miss.  No effect on
 * anything else; a sample out of range is ignored. */
void dataset_prefetch(const struct dataset *ds, uint64_t sample);

/*
 * Fills *loc for sample number `sample` after checking its index entry
 * (shard.h, invariant 4).  Returns 0; -ERANGE for a sample past the end;
 * -EBADMSG for a damaged entry; a shard's error when it is unusable.
 */
int dataset_locate(const struct dataset *ds, uint64_t sample,
                   struct dataset_loc *loc, struct rf_err *err);

/*
 * Checks the CRC-32C of the loc->stored_len bytes at stored, then decodes
 * them into out (capacity out_cap) with ctx (needed for zstd; may be NULL
 * for codec none).  stored may equal out for codec none (no copy is made).
 * Returns the decoded length (== loc->decoded_len), or -EBADMSG (checksum,
 * corrupt frame, wrong length), -ENOBUFS (out_cap < decoded_len), -EINVAL.
 */
int dataset_decode(const struct dataset *ds, const struct dataset_loc *loc,
                   const void *stored, void *out, size_t out_cap,
                   struct dataset_dctx *ctx, struct rf_err *err);

/*
 * Locates, preads and decodes sample `sample` into out; fills *loc when loc
 * is not NULL.  Needs a ctx (it holds the read buffer for compressed
 * records).  Returns the decoded length or a negative errno (-EIO for a
 * read that failed or came up short).
 */
int dataset_read(const struct dataset *ds, uint64_t sample, void *out,
                 size_t out_cap, struct dataset_dctx *ctx,
                 struct dataset_loc *loc, struct rf_err *err);

/* A decoding context for one thread; NULL when out of memory.  Free
 * accepts NULL. */
struct dataset_dctx *dataset_dctx_new(void);
void dataset_dctx_free(struct dataset_dctx *ctx);

#endif
