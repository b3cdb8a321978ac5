/*
 * subset.c - index sets as runs: building, the position map, the file
 * format's encoder and parser, and the validation split (the format and
 * the rules are in subset.h).
 *
 * Invariants of a struct subset (checked by subset_parse on input, kept
 * by subset_push): runs are sorted, disjoint and maximal (start[i] >
 * start[i - 1] + length of run i - 1), cum[0] = 0, cum strictly rises, and
 * n = cum[nruns - 1] + length of the last run.  A run's length is
 * cum[i + 1] - cum[i], the last one's n - cum[nruns - 1].
 */
#include "subset.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "sampler.h"

bool subset_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > SUBSET_NAME_MAX || !((s[0] >= 'a' && s[0] <= 'z') ||
                                          (s[0] >= 'A' && s[0] <= 'Z')))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* Makes room for one more run. */
static int grow(struct subset *s)
{
    uint64_t cap = s->cap ? 2 * s->cap : 16;
    uint64_t *block;

    if (s->nruns < s->cap)
        return 0;
    if (cap > SIZE_MAX / (2 * sizeof(uint64_t)))
        return -ENOMEM;
    block = malloc((size_t)cap * 2 * sizeof(uint64_t));
    if (!block)
        return -ENOMEM;
    if (s->nruns) {
        memcpy(block, s->start, (size_t)s->nruns * sizeof(uint64_t));
        memcpy(block + cap, s->cum, (size_t)s->nruns * sizeof(uint64_t));
    }
    free(s->start);
    s->start = block;
    s->cum = block + cap;
    s->cap = cap;
    return 0;
}

/* One past the last index of s; 0 for the empty set. */
static uint64_t end_of(const struct subset *s)
{
    return s->nruns ? s->start[s->nruns - 1] + (s->n - s->cum[s->nruns - 1]) : 0;
}

int subset_push(struct subset *s, uint64_t idx)
{
    uint64_t end = end_of(s);

    if (s->nruns && idx < end)
        return -EINVAL;
    if (s->n == UINT64_MAX)
        return -EINVAL;
    if (s->nruns && idx == end) {
        s->n++;
        return 0;
    }
    if (grow(s) < 0)
        return -ENOMEM;
    s->start[s->nruns] = idx;
    s->cum[s->nruns] = s->n;
    s->nruns++;
    s->n++;
    return 0;
}

int subset_range(struct subset *s, uint64_t start, uint64_t stop)
{
    memset(s, 0, sizeof(*s));
    if (start >= stop)
        return -EINVAL;
    if (grow(s) < 0)
        return -ENOMEM;
    s->start[0] = start;
    s->cum[0] = 0;
    s->nruns = 1;
    s->n = stop - start;
    return 0;
}

uint64_t subset_at(const struct subset *s, uint64_t pos)
{
    uint64_t lo = 0, hi = s->nruns; /* the run is in [lo, hi) */

    if (pos >= s->n)
        return SUBSET_NONE;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;

        if (s->cum[mid] <= pos)
            lo = mid;
        else
            hi = mid;
    }
    return s->start[lo] + (pos - s->cum[lo]);
}

void subset_free(struct subset *s)
{
    if (!s)
        return;
    free(s->start);
    memset(s, 0, sizeof(*s));
}

/* ---- the file format */

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;

    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int subset_encode(const struct subset *s, uint8_t **out, size_t *len)
{
    uint8_t *buf, *p;
    uint64_t prev_end = 0;

    *out = NULL;
    *len = 0;
    if (s->n == 0 || s->nruns == 0)
        return -EINVAL;
    if (s->nruns > (SIZE_MAX - SUBSET_HEADER_SIZE) / 20)
        return -ENOMEM;
    buf = malloc(SUBSET_HEADER_SIZE + (size_t)s->nruns * 20);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, SUBSET_MAGIC, 4);
    buf[4] = SUBSET_VERSION;
    buf[5] = buf[6] = buf[7] = 0;
    put_u64(buf + 8, s->n);
    put_u64(buf + 16, s->nruns);
    p = buf + SUBSET_HEADER_SIZE;
    for (uint64_t i = 0; i < s->nruns; i++) {
        uint64_t run = (i + 1 < s->nruns ? s->cum[i + 1] : s->n) - s->cum[i];

        p += put_varint(p, s->start[i] - prev_end);
        p += put_varint(p, run);
        prev_end = s->start[i] + run;
    }
    *out = buf;
    *len = (size_t)(p - buf);
    return 0;
}

/* Reads a minimal LEB128 varint at buf[*off..len).  0, or -1 with *why. */
static int get_varint(const uint8_t *buf, size_t len, size_t *off, uint64_t *v,
                      const char **why)
{
    uint64_t x = 0;
    size_t at = *off;

    for (unsigned shift = 0;; shift += 7) {
        uint8_t b;

        if (at >= len) {
            *why = "the file ends inside a varint (truncated?)";
            return -1;
        }
        b = buf[at++];
        if (shift == 63 && (b & 0x7e)) {
            *why = "a varint over 2^64 - 1";
            return -1;
        }
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (b == 0 && shift > 0) {
                *why = "a varint longer than its value needs (not the one encoding)";
                return -1;
            }
            break;
        }
        if (shift == 63) {
            *why = "a varint over 10 bytes";
            return -1;
        }
    }
    *off = at;
    *v = x;
    return 0;
}

int subset_parse(const uint8_t *buf, size_t len, uint64_t samples, struct subset *out,
                 struct rf_err *err)
{
    uint64_t count, runs, end = 0, total = 0;
    size_t off = SUBSET_HEADER_SIZE;
    const char *why;
    int r;

    memset(out, 0, sizeof(*out));
    if (len < SUBSET_HEADER_SIZE)
        return rf_err_set(err, -EBADMSG, "byte 0: %zu bytes, shorter than the %u-byte header "
                          "(truncated?)", len, SUBSET_HEADER_SIZE);
    if (memcmp(buf, SUBSET_MAGIC, 4) != 0)
        return rf_err_set(err, -EBADMSG, "byte 0: no \"%s\" magic: not a ringfeed subset file",
                          SUBSET_MAGIC);
    if (buf[4] != SUBSET_VERSION || buf[5] || buf[6] || buf[7])
        return rf_err_set(err, -EBADMSG, "byte 4: format version %" PRIu32 ", this reader "
                          "knows version %u", (uint32_t)buf[4] | (uint32_t)buf[5] << 8 |
                          (uint32_t)buf[6] << 16 | (uint32_t)buf[7] << 24, SUBSET_VERSION);
    count = get_u64(buf + 8);
    runs = get_u64(buf + 16);
    if (count == 0 || count > samples)
        return rf_err_set(err, -EBADMSG, "byte 8: count %" PRIu64 " is not in 1..%" PRIu64
                          " (the dataset's samples)", count, samples);
    if (runs == 0 || runs > count || runs > (len - SUBSET_HEADER_SIZE) / 2)
        return rf_err_set(err, -EBADMSG, "byte 16: %" PRIu64 " runs: not in 1..count (%"
                          PRIu64 ") or more than the file's %zu bytes can hold", runs, count,
                          len);
    out->cap = 0;
    for (uint64_t i = 0; i < runs; i++) {
        size_t at = off;
        uint64_t gap, n;

        if (get_varint(buf, len, &off, &gap, &why) < 0 ||
            (at = off, get_varint(buf, len, &off, &n, &why) < 0)) {
            r = rf_err_set(err, -EBADMSG, "byte %zu: run %" PRIu64 ": %s", at, i, why);
            goto fail;
        }
        if (i > 0 && gap == 0) {
            r = rf_err_set(err, -EBADMSG, "byte %zu: run %" PRIu64 ": gap 0 (runs overlap or "
                           "touch: indices not sorted and distinct)", at, i);
            goto fail;
        }
        if (n == 0) {
            r = rf_err_set(err, -EBADMSG, "byte %zu: run %" PRIu64 ": length 0", at, i);
            goto fail;
        }
        if (gap > samples - end || n > samples - end - gap) {
            r = rf_err_set(err, -EBADMSG, "byte %zu: run %" PRIu64 ": indices past the "
                           "dataset's %" PRIu64 " samples", at, i, samples);
            goto fail;
        }
        if (n > count - total) {
            r = rf_err_set(err, -EBADMSG, "byte %zu: run %" PRIu64 ": more indices than "
                           "count (%" PRIu64 ")", at, i, count);
            goto fail;
        }
        if (grow(out) < 0) {
            r = rf_err_set(err, -ENOMEM, "out of memory for %" PRIu64 " runs", runs);
            goto fail;
        }
        out->start[out->nruns] = end + gap;
        out->cum[out->nruns] = total;
        out->nruns++;
        end += gap + n;
        total += n;
        out->n = total;
    }
    if (total != count) {
        r = rf_err_set(err, -EBADMSG, "byte %zu: the runs hold %" PRIu64 " indices, count "
                       "says %" PRIu64, off, total, count);
        goto fail;
    }
    if (off != len) {
        r = rf_err_set(err, -EBADMSG, "byte %zu: %zu bytes after the last run", off,
                       len - off);
        goto fail;
    }
    return 0;
fail:
    subset_free(out);
    return r;
}

int subset_val_size(uint64_t n, double val_frac, uint64_t val_count, uint64_t *k,
                    struct rf_err *err)
{
    double want;

    if (n < 2)
        return rf_err_set(err, -EINVAL, "a dataset of %" PRIu64 " sample%s cannot be split "
                          "in two non-empty sets", n, n == 1 ? "" : "s");
    if (val_count) {
        if (val_count >= n)
            return rf_err_set(err, -EINVAL, "--val %" PRIu64 ": a count must be in 1..%"
                              PRIu64 " (the dataset has %" PRIu64 " samples)", val_count,
                              n - 1, n);
        *k = val_count;
        return 0;
    }
    if (!(val_frac > 0.0 && val_frac < 1.0))
        return rf_err_set(err, -EINVAL, "--val %g: a fraction must be in (0, 1)", val_frac);
    want = ceil(val_frac * (double)n);
    if (want >= (double)n)
        return rf_err_set(err, -EINVAL, "--val %g of %" PRIu64 " samples leaves none for the "
                          "other set", val_frac, n);
    *k = (uint64_t)want;
    return 0;
}

/* ---- the split */

/* Marks the first k positions of stratum members[0..m)'s permutation keyed
 * by (seed, stratum) in the bitmap chosen. */
static void choose(const uint64_t *members, uint64_t m, uint64_t k, uint64_t seed,
                   uint32_t stratum, uint64_t *chosen)
{
    struct sampler_perm pm;

    sampler_perm_init_keyed(&pm, m, seed, stratum, RNG_INDEX_SPLIT_KEYS, true);
    for (uint64_t i = 0; i < k; i++) {
        uint64_t x = members ? members[sampler_perm_at(&pm, i)] : sampler_perm_at(&pm, i);

        chosen[x / 64] |= (uint64_t)1 << (x % 64);
    }
}

/* The remainders cmp_rem sorts strata by (larger first, then the lower
 * stratum): set just before the sort, thread-local so that splits on two
 * threads never see each other's (qsort passes no context). */
static _Thread_local const uint64_t *by_rem;

static int cmp_rem(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    if (by_rem[x] != by_rem[y])
        return by_rem[x] > by_rem[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Stratified: fills chosen; -ENOMEM. */
static int choose_stratified(uint64_t n, const uint32_t *labels, uint32_t classes, uint64_t k,
                             uint64_t seed, uint64_t *chosen)
{
    uint64_t strata = (uint64_t)classes + 1; /* the last: no label */
    uint64_t *count = calloc((size_t)strata, sizeof(uint64_t));
    uint64_t *first = calloc((size_t)strata + 1, sizeof(uint64_t));
    uint64_t *want = calloc((size_t)strata, sizeof(uint64_t));
    uint64_t *rem = calloc((size_t)strata, sizeof(uint64_t));
    uint64_t *order = calloc((size_t)strata, sizeof(uint64_t));
    uint64_t *members = malloc((size_t)n * sizeof(uint64_t));
    uint64_t given = 0;
    int r = -ENOMEM;

    if (!count || !first || !want || !rem || !order || !members)
        goto out;
    for (uint64_t i = 0; i < n; i++)
        count[labels[i] < classes ? labels[i] : classes]++;
    for (uint64_t c = 0; c < strata; c++) {
        unsigned __int128 p = (unsigned __int128)count[c] * k;

        want[c] = (uint64_t)(p / n);
        rem[c] = (uint64_t)(p % n);
        given += want[c];
        first[c + 1] = first[c] + count[c];
    }
    /* the largest remainders get one more each, ties to the lower stratum:
     * k - given < strata (the remainders add up to (k - given) * n) */
    for (uint64_t c = 0; c < strata; c++)
        order[c] = c;
    by_rem = rem;
    qsort(order, (size_t)strata, sizeof(uint64_t), cmp_rem);
    for (uint64_t i = 0; given < k && i < strata; i++, given++)
        want[order[i]]++;
    memset(count, 0, (size_t)strata * sizeof(uint64_t));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t c = labels[i] < classes ? labels[i] : classes;

        members[first[c] + count[c]++] = i;
    }
    for (uint64_t c = 0; c < strata; c++)
        if (want[c])
            choose(members + first[c], count[c], want[c], seed, (uint32_t)c, chosen);
    r = 0;
out:
    free(count);
    free(first);
    free(want);
    free(rem);
    free(order);
    free(members);
    return r;
}

int subset_split(uint64_t n, const uint32_t *labels, uint32_t classes, uint64_t k,
                 bool stratify, uint64_t seed, struct subset *val, struct subset *rest)
{
    uint64_t *chosen;
    int r = 0;

    if (k < 1 || k >= n || n > SAMPLER_MAX_N || (stratify && !labels))
        return -EINVAL;
    chosen = calloc((size_t)(n / 64 + 1), sizeof(uint64_t));
    if (!chosen)
        return -ENOMEM;
    if (stratify)
        r = choose_stratified(n, labels, classes, k, seed, chosen);
    else
        choose(NULL, n, k, seed, 0, chosen);
    for (uint64_t i = 0; r == 0 && i < n; i++)
        r = subset_push((chosen[i / 64] >> (i % 64)) & 1 ? val : rest, i);
    free(chosen);
    if (r < 0) {
        subset_free(val);
        subset_free(rest);
    }
    return r;
}
