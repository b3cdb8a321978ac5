/*
 * subset.h - named index sets of a dataset ("train", "val"): their file
 * format, a parser and an encoder that are pure functions of a buffer, the
 * position -> dataset index map a stream's sampler goes through, and the
 * split that chooses a validation set (ringfeed-pack split,
 * ringfeed.split).
 *
 * A set is a sorted list of distinct dataset indices, kept as maximal runs
 * of consecutive indices: run i covers [start[i], start[i] + len[i]).  A
 * contiguous range (ATTACH subset=START:STOP) is one run; a random 10 %
 * validation set is about one run per index; its complement about one run
 * per ten.  Position p of the set (0 <= p < n, the order the set's indices
 * sort in) is the index run i holds at p - cum[i], found by binary search
 * over the runs: the sampler permutes positions 0..n-1 and this maps them
 * (subset_at), so sharding, padding and resume work on the set as they do
 * on a whole dataset.
 *
 * THE FILE (one per set, in the dataset folder, named by the MANIFEST's
 * "subset" line with its size and CRC-32C; manifest.h), little-endian:
 *
 *     0        4        8                16               24
 *     +--------+--------+----------------+----------------+---------------
 *     | "RFSS" | vers 1 | count (u64)    | runs (u64)     | runs x pair...
 *     +--------+--------+----------------+----------------+---------------
 *
 *     pair = gap, len: two unsigned LEB128 varints (7 bits a byte, low
 *            first, the top bit set on every byte but the last), each the
 *            shortest encoding of its value (1 to 10 bytes)
 *     run 0 starts at gap; run i > 0 starts gap after run i - 1's end
 *
 * The rules, every one checked by subset_parse: the magic and version;
 * count >= 1 and 1 <= runs <= count; every len >= 1; every gap after the
 * first >= 1 (runs are maximal, so the indices are sorted and distinct);
 * the lens add up to count; the last run ends at or before the dataset's
 * samples; no varint longer than its value needs or past 2^64 - 1; no
 * byte after the last pair.  So one set has exactly one encoding, and the
 * tool and the Python writer write the same bytes for the same set.
 * ImageNet's 1.28 M-sample train set after a random 10 % split is about
 * 0.3 MB; the 128 K-sample val set about 0.26 MB.
 *
 * Names: 1..SUBSET_NAME_MAX of [A-Za-z0-9_-], the first a letter
 * (subset_name_ok), so a name never reads as a range "START:STOP".
 */
#ifndef RINGFEED_PROTO_SUBSET_H
#define RINGFEED_PROTO_SUBSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define SUBSET_MAGIC "RFSS"
#define SUBSET_VERSION 1u
#define SUBSET_HEADER_SIZE 24u
#define SUBSET_NAME_MAX 32u
/* Sets one pack names at most (MANIFEST "subset" lines). */
#define SUBSET_MAX 64u
/* A set's file, at most: a header and a 20-byte pair per index of the
 * largest dataset a sampler takes would not fit anyone's memory; 1 GiB is
 * 50 M worst-case runs. */
#define SUBSET_FILE_MAX (1ull << 30)
/* What subset_at returns past the end. */
#define SUBSET_NONE UINT64_MAX

/* A set in memory: runs sorted by start, maximal.  Owned arrays (one block
 * at start); subset_free releases them.  A zeroed struct is the empty set. */
struct subset {
    uint64_t n;        /* indices in the set */
    uint64_t nruns;
    uint64_t cap;      /* runs the arrays hold */
    uint64_t *start;   /* nruns run starts */
    uint64_t *cum;     /* nruns positions before each run: cum[0] = 0 */
};

/* 1 when s[0..n) is a set name (see above). */
bool subset_name_ok(const char *s, size_t n);

/*
 * Appends index idx, which must be above every index in s (else -EINVAL),
 * merging it into the last run when it follows it.  Returns 0, -EINVAL or
 * -ENOMEM (s unchanged).
 */
int subset_push(struct subset *s, uint64_t idx);

/* The range [start, stop) as a set, start < stop.  Returns 0, -EINVAL or
 * -ENOMEM. */
int subset_range(struct subset *s, uint64_t start, uint64_t stop);

/* The index at position pos (0 <= pos < n), O(log runs); SUBSET_NONE past
 * the end. */
uint64_t subset_at(const struct subset *s, uint64_t pos);

/* Frees what s owns and zeroes it.  Accepts NULL and a zeroed struct. */
void subset_free(struct subset *s);

/*
 * Encodes s (n >= 1) in the file format above: a malloc'd buffer *out of
 * *len bytes the caller frees.  Returns 0, -EINVAL for an empty set, or
 * -ENOMEM.
 */
int subset_encode(const struct subset *s, uint8_t **out, size_t *len);

/*
 * Parses a set's file buf[0..len) for a dataset of `samples` samples into
 * *out (initialised here; free it with subset_free whatever the result).
 * Pure: reads nothing past buf[len), allocates at most len / 2 runs.
 * Returns 0, or -EBADMSG with err naming the byte offset and the rule
 * broken ("byte 31: run 2: gap 0 (runs overlap or touch: indices not
 * sorted and distinct)"), or -ENOMEM.
 */
int subset_parse(const uint8_t *buf, size_t len, uint64_t samples, struct subset *out,
                 struct rf_err *err);

/* The size of the validation set a request asks for, n samples in all:
 * val_count when not 0, else ceil(val_frac * n) (scikit-learn's
 * train_test_split test_size).  Returns 0 and *k in 1..n-1, or -EINVAL
 * with err saying what fits. */
int subset_val_size(uint64_t n, double val_frac, uint64_t val_count, uint64_t *k,
                    struct rf_err *err);

/*
 * Chooses the validation set: k of the n samples (1 <= k < n), a pure
 * function of (n, labels, k, stratify, seed), the same on every machine.
 *
 * Without stratify: the first k positions of a permutation of [0, n)
 * keyed by seed (sampler.h's Feistel permutation under its own keys,
 * RNG_INDEX_SPLIT_KEYS, stratum 0).  With stratify (labels[i] < classes,
 * or anything else for "no label", its own stratum after the classes):
 * stratum c of n_c samples gives floor(n_c * k / n) and the k - sum of
 * those left over go one each to the strata with the largest remainders
 * (n_c * k mod n), ties to the lower class number, so the total is k
 * exactly and every class's share is its n_c * k / n rounded down or up;
 * a stratum's members are taken in index order and the first k_c
 * positions of a permutation of them keyed by (seed, c) are chosen.
 *
 * Fills val (the chosen) and rest (the others), both zeroed by the caller.
 * Returns 0, -EINVAL (k out of 1..n-1, labels NULL with stratify), or
 * -ENOMEM (nothing kept).
 */
int subset_split(uint64_t n, const uint32_t *labels, uint32_t classes, uint64_t k,
                 bool stratify, uint64_t seed, struct subset *val, struct subset *rest);

#endif
