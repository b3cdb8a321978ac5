/*
 * manifest.h - the MANIFEST file of a dataset folder: what the dataset holds
 * and which shard files make it up, in text a person can read.
 *
 * One "key value..." per line, fields separated by one space, '\n' line
 * ends, '#' comment lines and blank lines allowed, "end" the last line (so a
 * truncated file is caught).  Numbers are decimal without sign or leading
 * zeros; checksums are 8 lowercase hex digits (CRC-32C).  An example:
 *
 *     # ringfeed dataset manifest (written by ringfeed-pack); do not edit
 *     ringfeed-dataset 1
 *     samples 60000
 *     kind tensor                  jpeg | tensor | bytes
 *     dtype u8                     tensors only: u8 i8 i16 i32 f32 f64
 *     shape 1x28x28                tensors only: 1 to 8 dims
 *     codec zstd                   none | zstd (records may also be none)
 *     max_stored 823               largest stored record, bytes
 *     max_decoded 784              largest decoded record, bytes
 *     max_side 512                 jpeg only, optional, with the next: the
 *     max_side_quality 90          images were packed with --max-side 512:
 *                                  longer side at most 512 px (larger ones
 *                                  re-encoded at quality 90), see below
 *     jpeg_restart lossless        jpeg only, optional: the images were
 *                                  re-encoded with restart markers, see below
 *     raw_images 12                jpeg only, optional: that many records
 *                                  are RFPX pixels, not JPEG, see below
 *     image_shape 32x32            jpeg only, optional: every image is
 *                                  32 high and 32 wide, see below
 *     fields 3                     kind fields only: then exactly that
 *     field image image            many field lines, the schema in
 *     field boxes ragged dtype=f32 shape=4 max=50 boxes=image
 *     field label scalar           order (schema.h says what they mean)
 *     classes 10                   then exactly that many class lines:
 *     class 0 T-shirt/top          number, then the name: the rest of the
 *     class 1 Trouser              line (spaces and '/' allowed, no control
 *     ...                          characters)
 *     dict dict.zstd 112640 9f0c3a1e         name, bytes, CRC-32C (optional)
 *     sources sources.txt 1843210 0b1c2d3e   name, bytes, CRC-32C (optional)
 *     subset val subset-val-5e1f00a2.rfss 6000 6431 5e1f00a2
 *                                  a named index set (optional, repeated):
 *                                  name, file, indices, bytes, CRC-32C
 *     shards 1                     then exactly that many shard lines:
 *     shard 0 shard-00000.rfs 60000 17012345 4a5b6c7d
 *                                  number, file, records, file bytes,
 *                                  index CRC-32C
 *     end
 *
 * The comments after the values above are for this page only; a value ends
 * at the end of its line.  File names are 1..255 of [A-Za-z0-9._-] and do
 * not start with '.', so a manifest cannot name a file outside its folder.
 *
 * max_side and max_side_quality come together or not at all, for kind jpeg
 * only: max_side MANIFEST_MAX_SIDE_MIN..MANIFEST_MAX_SIDE_MAX, the quality
 * 1..100.  A manifest without them (every one written before they existed)
 * describes images stored as they were; a reader that predates them refuses
 * a manifest that has them (unknown key), as it refuses any key it does not
 * know.  What they promise: every record that decodes has a longer side of
 * at most max_side pixels; a record that did not decode when packed was
 * stored as it was (it is a bad sample either way; tools/pack_imagefolder.c).
 *
 * jpeg_restart, for kind jpeg only, has one value, "lossless"
 * (DATASET_JPEG_RESTART_LOSSLESS in dataset_types.h, which says what it
 * promises): ringfeed-pack imagefolder writes it unless --as-is.  Without
 * it (every manifest written before it existed, and --as-is packs) the
 * records are as they were; another value is refused, naming the key and
 * the value, as is the key on another kind.  A reader older than the key
 * refuses a manifest that has it, as it refuses any key it does not know.
 *
 * raw_images N, for kind jpeg only, N from 1 to samples: N of the records
 * are RFPX records (pixels.h: an image kept as its decoded RGB pixels,
 * what ringfeed-pack imagefolder writes for PNG, WebP, BMP, TIFF and PPM
 * files), the others JPEG as ever; a record tells which it is by its first
 * bytes (px_is).  Without the key (every manifest written before it
 * existed) there are none; "raw_images 0" is refused, as are a value over
 * samples and the key on another kind, naming the line.  That is the key's
 * point: a reader older than it refuses the manifest as an unknown key,
 * rather than serve the RFPX records as bad JPEGs.  RFPX records are
 * stored with the dataset's codec like any other (zstd, usually, with the
 * records zstd cannot shrink stored as none); ringfeed-pack verify counts
 * them and checks the count against N.
 *
 * image_shape HxW, for kind jpeg only, H and W each from 1 to PX_SIDE_MAX
 * (decimal, no leading zero, a lower-case 'x' between): every image record,
 * JPEG or RFPX, decodes at full scale to H rows of W pixels, so the
 * workers' transform `none` can deliver them as they are, 3 x H x W with
 * no resize (ringfeed-pack writes it when every record it stored has one
 * size: CIFAR-10 exported as 32x32 PNGs, say).  Without the key (every
 * manifest written before it, and any dataset whose images differ in size)
 * nothing is known and `none` is refused; "image_shape 0x32", a malformed
 * value, the key twice and the key on another kind are refused, naming the
 * line.  The transforms train and eval ignore it.  A reader older than the
 * key refuses the manifest as an unknown key: a pack that writes it is
 * therefore refused by daemons and tools that predate it, even for train
 * and eval, which could serve it; repack with a newer ringfeed-pack (or
 * upgrade the reader) rather than edit the MANIFEST, whose text is the
 * dataset's identity.
 *
 * sources FILE BYTES CRC (optional, any kind): the dataset's source list,
 * the file each sample was packed from, sample i on line i (proto/sources.h
 * says its format; ringfeed-pack imagefolder writes it as sources.txt).
 * BYTES is the file's exact size, 2 * samples (one byte and a newline a
 * sample) up to SOURCES_FILE_MAX, and CRC its CRC-32C, both checked when a
 * reader loads the file (the daemon, on the first SOURCES request), as the
 * dict's are.  A dataset without the key (every one packed before it,
 * --no-sources packs, the Python writer) has no source list, and the
 * daemon's SOURCES verb says so.  A reader older than the key refuses the
 * manifest as an unknown key, as it refuses any key it does not know:
 * repack with --no-sources for such a reader (or upgrade it).
 *
 * subset NAME FILE COUNT BYTES CRC (optional, any kind, up to SUBSET_MAX
 * lines): a named set of sample indices, "train" and "val" as
 * ringfeed-pack split writes them; proto/subset.h says the file's format
 * and the name rule.  COUNT is 1..samples, BYTES the file's exact size
 * (SUBSET_HEADER_SIZE + 2 up to SUBSET_FILE_MAX), CRC its CRC-32C, both
 * checked when a reader loads the set (dataset_subset_load), as the
 * dict's are.  Names and files are each unique.  ringfeed-pack split adds
 * and replaces these lines after the pack is written (temp + rename);
 * they are the only lines that change after packing, and they are left
 * out of the dataset's identity (dataset.h), so a split never makes a
 * daemon or a saved resume point take the pack for another.  A reader
 * older than the key refuses the manifest as an unknown key.
 *
 * kind fields (since the schema): each record holds every field of the
 * schema (schema.h's record layout); the shard entries' labels are
 * DATASET_NO_LABEL, and classes, when given, name the values of a scalar
 * field called "label".  A reader older than the kind refuses it as an
 * unknown kind (and the fields lines as unknown keys), so a pack with
 * fields never reaches code that would misread its records.
 *
 * The parser is a pure function of a buffer.  Names are kept as offsets into
 * one text block that the struct owns.  Every count it allocates for is
 * bounded by the input's length, so a forged "classes 4000000000" costs
 * nothing.  Errors name the line and its byte offset.
 */
#ifndef RINGFEED_PROTO_MANIFEST_H
#define RINGFEED_PROTO_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "dataset_types.h"
#include "err.h"
#include "schema.h"
#include "subset.h"

#define MANIFEST_VERSION 1u
#define MANIFEST_NAME_MAX 255u
/* max_side's range: below 16 px a photograph is a few JPEG blocks, of no
 * use to a model; 65535 is the largest side a JPEG can have, so a larger
 * value could never shrink anything. */
#define MANIFEST_MAX_SIDE_MIN 16u
#define MANIFEST_MAX_SIDE_MAX 65535u
#define MANIFEST_QUALITY_MIN 1u
#define MANIFEST_QUALITY_MAX 100u

struct manifest_shard {
    uint32_t name;      /* offset of the file name in text */
    uint64_t records;
    uint64_t bytes;     /* the shard file's exact size */
    uint32_t index_crc;
};

struct manifest_subset {
    uint32_t name;      /* offset of the set's name in text */
    uint32_t file;      /* offset of its file name in text */
    uint64_t count;     /* indices in the set */
    uint64_t bytes;     /* the file's exact size */
    uint32_t crc;       /* the file's CRC-32C */
};

struct manifest {
    uint32_t version;
    uint64_t samples;
    enum dataset_kind kind;
    enum dataset_dtype dtype;          /* DATASET_DTYPE_NONE unless tensor */
    unsigned ndim;                     /* 0 unless tensor */
    uint64_t dims[DATASET_MAX_DIMS];
    unsigned codec;                    /* enum dataset_codec */
    uint32_t max_stored;
    uint32_t max_decoded;
    uint32_t max_side;                 /* 0: images stored as they were */
    uint32_t max_side_quality;         /* 1..100 with max_side, else 0 */
    enum dataset_jpeg_restart jpeg_restart; /* DATASET_JPEG_AS_IS: no key */
    uint64_t raw_images;               /* jpeg: RFPX records; 0: none, no key */
    uint32_t image_height, image_width; /* jpeg: every image's size (image_shape
                                          HxW); 0, 0: not one size, no key */
    struct schema schema;              /* kind fields: the fields lines; else
                                          n == 0 (schema_legacy describes
                                          the older kinds) */
    uint32_t nclasses;
    uint32_t *classes;                 /* nclasses offsets into text */
    int has_dict;
    uint32_t dict_name;                /* offset into text */
    uint32_t dict_size;
    uint32_t dict_crc;
    int has_sources;
    uint32_t sources_name;             /* offset into text */
    uint64_t sources_size;
    uint32_t sources_crc;
    uint32_t nsubsets;
    struct manifest_subset subsets[SUBSET_MAX]; /* in MANIFEST order */
    uint32_t nshards;
    struct manifest_shard *shards;
    char *text;                        /* NUL-terminated names */
    size_t text_len, text_cap;
};

/*
 * Parses len bytes at buf into *m (which it initialises; free it with
 * manifest_free whatever the result).  Returns 0, -EBADMSG for anything
 * malformed or inconsistent, -EPROTO for an unknown version, -ENOMEM; err
 * names the line and its byte offset.
 */
int manifest_parse(const char *buf, size_t len, struct manifest *m,
                   struct rf_err *err);

/* Frees what m owns and zeroes it.  Accepts a zeroed struct. */
void manifest_free(struct manifest *m);

/* The name of class i (i < nclasses), shard i's file name, the dict's. */
const char *manifest_class_name(const struct manifest *m, uint32_t i);
const char *manifest_shard_name(const struct manifest *m, uint32_t i);
const char *manifest_dict_name(const struct manifest *m);
/* The source list's file name; NULL without one. */
const char *manifest_sources_name(const struct manifest *m);
/* Set i's name and file name (i < nsubsets), else NULL. */
const char *manifest_subset_name(const struct manifest *m, uint32_t i);
const char *manifest_subset_file(const struct manifest *m, uint32_t i);
/* The set called name, or -1. */
int manifest_subset_find(const struct manifest *m, const char *name);
/* 1 when the line s[0..n) (no '\n') is a "subset" line: the lines left
 * out of a dataset's identity. */
int manifest_is_subset_line(const char *s, size_t n);

/*
 * Builders for a writer, on a struct zeroed by the caller (then set version,
 * samples, kind, dtype, dims, codec and maxima directly).  Each returns 0 or
 * -ENOMEM / -EINVAL (a name with a newline or control character, an invalid
 * file name).
 */
int manifest_add_class(struct manifest *m, const char *name);
int manifest_add_shard(struct manifest *m, const char *file, uint64_t records,
                       uint64_t bytes, uint32_t index_crc);
int manifest_set_dict(struct manifest *m, const char *file, uint32_t size,
                      uint32_t crc);
int manifest_set_sources(struct manifest *m, const char *file, uint64_t size,
                         uint32_t crc);
/* Adds a set (-EINVAL for a bad or repeated name or file, or SUBSET_MAX
 * sets already). */
int manifest_add_subset(struct manifest *m, const char *name, const char *file,
                        uint64_t count, uint64_t bytes, uint32_t crc);

/*
 * Checks the cross-field rules (the parser applies them too): kind and
 * tensor fields agree, shard records sum to samples, maxima within limits
 * and equal to the tensor size, dict only with zstd, max_side and its
 * quality together, in range, for kind jpeg only, jpeg_restart known and
 * for kind jpeg only, raw_images for kind jpeg only and at most samples,
 * image_shape for kind jpeg only with both sides in 1..PX_SIDE_MAX,
 * sources' size in 2 * samples..SOURCES_FILE_MAX, each subset's count in
 * 1..samples and bytes within what that count's file can be, names and
 * files unique.
 * Returns 0 or -EBADMSG.
 */
int manifest_check(const struct manifest *m, struct rf_err *err);

/*
 * The text of m as a malloc'd, NUL-terminated buffer (*len bytes without the
 * NUL), or NULL when out of memory.  manifest_parse gives m back.
 */
char *manifest_format(const struct manifest *m, size_t *len);

/* 1 when the n bytes at s make a valid file name (see above). */
int manifest_valid_file_name(const char *s, size_t n);

#endif
