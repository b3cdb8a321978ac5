/*
 * dataset_split.h - recording a train/validation split in a packed
 * dataset: ringfeed-pack split and ringfeed.split (Python) both call
 * dataset_split, so the two write the same bytes for the same arguments.
 *
 * What it writes (subset.h has the file format, manifest.h the lines):
 *   1. one file per set, "subset-<name>-<crc>.rfss" (the CRC-32C of its
 *      bytes in 8 hex digits: a file's name says its content, so a file
 *      is never rewritten in place), each written to a temporary name
 *      starting with '.', fsynced and renamed;
 *   2. the MANIFEST: the text as it was, its subset lines of the two names
 *      dropped, the others kept, and the two new lines before "shards";
 *      written to ".MANIFEST.tmp", fsynced, renamed over MANIFEST, the
 *      folder fsynced.  The new text is parsed and its identity checked
 *      (dataset.h) before the rename: the data lines are the old bytes;
 *   3. the replaced sets' old files, removed after the rename.
 * A reader sees the old MANIFEST and old files or the new and new, never
 * a mix; a crash leaves at most a temporary file (names starting with '.'
 * are never a pack's).  Two splits of one folder at once are serialised
 * by an flock on the folder.
 *
 * Re-running: sets of the same names are refused (-EEXIST, the message
 * says --force) unless force; with force they are replaced.  A stream
 * attached to a replaced set keeps the set it loaded in the daemon; a
 * worker that starts later fails that stream, naming the missing file
 * (the set changed under it), so re-split names no one is training on.
 */
#ifndef RINGFEED_PROTO_DATASET_SPLIT_H
#define RINGFEED_PROTO_DATASET_SPLIT_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"
#include "subset.h"

struct split_request {
    double val_frac;          /* in (0, 1) when val_count is 0 */
    uint64_t val_count;       /* 0: val_frac says */
    bool stratify;            /* keep each class's share (subset_split) */
    uint64_t seed;
    const char *names[2];     /* the complement's and the validation set's:
                                 "train", "val" by default */
    bool force;               /* replace sets of those names */
};

struct split_result {
    uint64_t count[2];        /* indices in names[0], names[1] */
    char file[2][64];         /* their files */
    uint64_t bytes[2];
    uint64_t replaced;        /* sets of those names there were before */
};

/*
 * Splits the dataset in folder dir as rq says and records the two sets.
 * Returns 0 with *res filled; -EINVAL for a bad request (names equal or not
 * set names, the size out of range, stratify on a dataset without labels),
 * -EEXIST for sets of those names without force, -ESTALE when the pack
 * changed while it was split, a dataset_open error, or an I/O errno; err
 * says which, naming the file.  Nothing in the folder changes on failure
 * but a temporary file removed again.
 */
int dataset_split(const char *dir, const struct split_request *rq, struct split_result *res,
                  struct rf_err *err);

#endif
