/*
 * test_subset.c - named index sets (proto/subset.h): building runs, the
 * position map, the file format both ways and its refusals, the split
 * (deterministic, complements, a pinned result, stratified shares), and
 * the sampler over a subset: every index of the set exactly once per epoch
 * across the ranks, none outside it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "sampler.h"
#include "subset.h"
#include "tap.h"

static void test_runs(void)
{
    struct subset s = {0};
    static const uint64_t idx[] = {0, 1, 2, 7, 9, 10, 100};
    int ok = 1;

    for (size_t i = 0; i < sizeof(idx) / sizeof(idx[0]); i++)
        ok &= subset_push(&s, idx[i]) == 0;
    TAP_OK(ok, "push sorted indices");
    TAP_IS_INT(s.n, 7, "7 indices");
    TAP_IS_INT(s.nruns, 4, "in 4 maximal runs");
    for (size_t i = 0; i < 7; i++)
        ok &= subset_at(&s, i) == idx[i];
    TAP_OK(ok, "subset_at gives each back in order");
    TAP_OK(subset_at(&s, 7) == SUBSET_NONE, "past the end: SUBSET_NONE");
    TAP_IS_INT(subset_push(&s, 100), -EINVAL, "a repeated index refused");
    TAP_IS_INT(subset_push(&s, 50), -EINVAL, "a smaller index refused");
    subset_free(&s);
    TAP_IS_INT(subset_range(&s, 5, 5), -EINVAL, "an empty range refused");
    TAP_IS_INT(subset_range(&s, 5, 9), 0, "range 5:9");
    TAP_OK(s.n == 4 && subset_at(&s, 0) == 5 && subset_at(&s, 3) == 8, "is 5..8");
    subset_free(&s);
    TAP_OK(subset_name_ok("val", 3) && subset_name_ok("train-2_b", 9), "names");
    TAP_OK(!subset_name_ok("2val", 4) && !subset_name_ok("a.b", 3) && !subset_name_ok("", 0) &&
           !subset_name_ok("a:b", 3), "not names: a digit first, '.', empty, ':'");
}

/* Encodes s, parses it back for samples, compares. */
static int round_trip(const struct subset *s, uint64_t samples)
{
    struct subset back;
    struct rf_err err;
    uint8_t *buf;
    size_t len;
    int ok;

    if (subset_encode(s, &buf, &len) < 0)
        return 0;
    ok = subset_parse(buf, len, samples, &back, &err) == 0 && back.n == s->n &&
         back.nruns == s->nruns;
    for (uint64_t i = 0; ok && i < s->n; i++)
        ok = subset_at(&back, i) == subset_at(s, i);
    subset_free(&back);
    free(buf);
    return ok;
}

/* Parses the hand-made file and checks the refusal names want. */
static void refuse(const uint8_t *b, size_t n, uint64_t samples, const char *want,
                   const char *name)
{
    struct subset s;
    struct rf_err err = {0};
    int r = subset_parse(b, n, samples, &s, &err);

    tap_ok(r == -EBADMSG && strstr(err.msg, want), "%s (%s)", name, err.msg);
    subset_free(&s);
}

static void header(uint8_t *b, uint64_t count, uint64_t runs)
{
    memcpy(b, "RFSS\x01\0\0\0", 8);
    for (int i = 0; i < 8; i++) {
        b[8 + i] = (uint8_t)(count >> (8 * i));
        b[16 + i] = (uint8_t)(runs >> (8 * i));
    }
}

static void test_format(void)
{
    struct subset s = {0}, p;
    struct rf_err err;
    uint8_t b[64], *enc;
    size_t len;

    subset_push(&s, 3);
    subset_push(&s, 4);
    subset_push(&s, 200);
    TAP_IS_INT(subset_encode(&s, &enc, &len), 0, "encode {3, 4, 200}");
    TAP_IS_INT(len, 24 + 2 + 3, "header, (3, 2), (195: two bytes, 1)");
    TAP_OK(enc[24] == 3 && enc[25] == 2 && enc[26] == 0xc3 && enc[27] == 0x01 && enc[28] == 1,
           "the pairs as LEB128");
    TAP_IS_INT(subset_parse(enc, len, 201, &p, &err), 0, "parses back");
    TAP_OK(p.n == 3 && subset_at(&p, 2) == 200, "the same set");
    subset_free(&p);
    refuse(enc, len, 200, "past the dataset", "an index past the samples");
    refuse(enc, len - 1, 201, "truncated", "a truncated file");
    memcpy(b, enc, len);
    b[len] = 0;
    refuse(b, len + 1, 201, "after the last run", "a byte after the last run");
    free(enc);
    subset_free(&s);
    TAP_OK(round_trip(&s, 1) == 0, "the empty set does not encode");

    header(b, 2, 2);
    b[24] = 1; b[25] = 1; b[26] = 0; b[27] = 1;
    refuse(b, 28, 10, "gap 0", "touching runs (not maximal, not one encoding)");
    header(b, 1, 1);
    b[24] = 0x81; b[25] = 0x00; b[26] = 1;
    refuse(b, 27, 10, "longer than its value needs", "a padded varint");
    header(b, 1, 1);
    b[24] = 0; b[25] = 0;
    refuse(b, 26, 10, "length 0", "an empty run");
    header(b, 3, 1);
    b[24] = 0; b[25] = 2;
    refuse(b, 26, 10, "count says", "runs short of count");
    header(b, 1, 1);
    b[24] = 0; b[25] = 2;
    refuse(b, 26, 10, "more indices than count", "runs past count");
    header(b, 0, 1);
    refuse(b, 26, 10, "count 0", "count 0");
    header(b, 1, 1);
    b[4] = 2;
    refuse(b, 26, 10, "version 2", "an unknown version");
    header(b, 1, 1);
    b[0] = 'X';
    refuse(b, 26, 10, "magic", "no magic");
    header(b, 1, 1);
    memset(b + 24, 0xff, 10);
    b[34] = 1;
    refuse(b, 36, UINT64_MAX, "over", "a varint over 2^64 - 1");
    refuse(b, 10, 10, "header", "shorter than the header");
}

static void test_val_size(void)
{
    struct rf_err err;
    uint64_t k = 0;

    TAP_OK(subset_val_size(1000, 0.1, 0, &k, &err) == 0 && k == 100, "0.1 of 1000: 100");
    TAP_OK(subset_val_size(1001, 0.1, 0, &k, &err) == 0 && k == 101, "0.1 of 1001: ceil, 101");
    TAP_OK(subset_val_size(1000, 0, 250, &k, &err) == 0 && k == 250, "a count");
    TAP_IS_INT(subset_val_size(1000, 0, 1000, &k, &err), -EINVAL, "a count of all refused");
    TAP_IS_INT(subset_val_size(1000, 1.0, 0, &k, &err), -EINVAL, "a fraction of 1 refused");
    TAP_IS_INT(subset_val_size(10, 0.99, 0, &k, &err), -EINVAL, "0.99 of 10 leaves none");
    TAP_IS_INT(subset_val_size(1, 0.5, 0, &k, &err), -EINVAL, "one sample cannot split");
}

/* CRC-32C of a set's encoding: a pin of the split's result. */
static uint32_t crc_of(const struct subset *s)
{
    uint8_t *b;
    size_t n;
    uint32_t c;

    if (subset_encode(s, &b, &n) < 0)
        return 0;
    c = crc32c(0, b, n);
    free(b);
    return c;
}

static void test_split(void)
{
    enum { N = 10007, K = 1001, C = 7 };
    uint32_t *labels = malloc(N * sizeof(*labels));
    struct subset v1 = {0}, r1 = {0}, v2 = {0}, r2 = {0}, v3 = {0}, r3 = {0};
    uint64_t per[C + 1] = {0}, inval[C + 1] = {0}, seen = 0;
    int ok = 1;

    for (uint32_t i = 0; i < N; i++)
        labels[i] = i % 10 < 5 ? 0 : i % 10 < 8 ? 1 + i % 3 : i % 97 == 0 ? UINT32_MAX : 4 + i % 3;
    TAP_IS_INT(subset_split(N, NULL, 0, K, false, 5, &v1, &r1), 0, "split 1001 of 10007");
    TAP_IS_INT(subset_split(N, NULL, 0, K, false, 5, &v2, &r2), 0, "again, same seed");
    TAP_OK(v1.n == K && r1.n == N - K, "sizes k and n - k");
    TAP_OK(crc_of(&v1) == crc_of(&v2) && crc_of(&r1) == crc_of(&r2), "deterministic");
    /* pinned: the same bytes on every machine and in every build */
    tap_ok(crc_of(&v1) == 0x74822472u, "val set pinned (crc %08x)", crc_of(&v1));
    for (uint64_t i = 0, a = 0, b = 0; i < N; i++) {
        int in_v = a < v1.n && subset_at(&v1, a) == i, in_r = b < r1.n && subset_at(&r1, b) == i;

        ok &= in_v + in_r == 1;
        a += in_v;
        b += in_r;
    }
    TAP_OK(ok, "complements: every sample in exactly one");
    TAP_IS_INT(subset_split(N, NULL, 0, K, false, 6, &v3, &r3), 0, "another seed");
    TAP_OK(crc_of(&v3) != crc_of(&v1), "gives another set");
    subset_free(&v1); subset_free(&r1); subset_free(&v2); subset_free(&r2);
    subset_free(&v3); subset_free(&r3);

    TAP_IS_INT(subset_split(N, labels, C, K, true, 5, &v1, &r1), 0, "stratified split");
    TAP_OK(v1.n == K, "the total is the request exactly");
    for (uint32_t i = 0; i < N; i++)
        per[labels[i] < C ? labels[i] : C]++;
    for (uint64_t p = 0; p < v1.n; p++) {
        uint32_t l = labels[subset_at(&v1, p)];

        inval[l < C ? l : C]++;
    }
    ok = 1;
    for (int c = 0; c <= C; c++) {
        uint64_t lo = per[c] * K / N, hi = lo + ((per[c] * K) % N != 0);

        ok &= inval[c] >= lo && inval[c] <= hi;
        seen += inval[c];
    }
    TAP_OK(ok && seen == K, "each class's share rounded down or up (no label: its own)");
    subset_free(&v1);
    subset_free(&r1);
    TAP_IS_INT(subset_split(N, NULL, 0, K, true, 5, &v1, &r1), -EINVAL, "stratify needs labels");
    TAP_IS_INT(subset_split(N, NULL, 0, N, false, 5, &v1, &r1), -EINVAL, "k = n refused");
    free(labels);
}

/* The sampler over a subset: positions mapped through it, every rank. */
static void test_sampler_over_subset(void)
{
    struct subset val = {0}, rest = {0};
    enum { N = 5003 };
    uint8_t *hits = calloc(N, 1);
    int ok = 1;

    subset_split(N, NULL, 0, 777, false, 1, &val, &rest);
    for (uint32_t world = 1; world <= 3; world++) {
        for (int drop = 0; drop <= 1; drop++) {
            uint64_t padding = 0, outside = 0, twice = 0, missing = 0;

            memset(hits, 0, N);
            for (uint32_t rank = 0; rank < world; rank++) {
                struct sampler s;
                struct sampler_params p = {.n = val.n, .seed = 9, .epoch = 2, .rank = rank,
                                           .world = world, .batch = 64, .shuffle = true,
                                           .drop_last = drop};

                if (sampler_init(&s, &p, NULL) < 0) {
                    ok = 0;
                    continue;
                }
                for (uint64_t g = 0; g < sampler_batches(&s); g++)
                    for (uint32_t j = 0; j < sampler_batch_count(&s, g); j++) {
                        uint64_t i = subset_at(&val, sampler_sample(&s, g, j));

                        if (sampler_is_padding(&s, g, j)) {
                            padding++;
                            continue;
                        }
                        if (i >= N)
                            outside++;
                        else if (hits[i]++)
                            twice++;
                    }
            }
            for (uint64_t p = 0; p < val.n; p++)
                missing += !hits[subset_at(&val, p)];
            for (uint64_t p = 0; p < rest.n; p++)
                outside += hits[subset_at(&rest, p)] != 0;
            tap_ok(!outside && !twice && (drop ? missing < world : !missing) &&
                   padding < world, "world %u drop_last %d: every val index once, none of "
                   "train (missing %llu, padding %llu)", world, drop,
                   (unsigned long long)missing, (unsigned long long)padding);
        }
    }
    TAP_OK(ok, "the samplers set up");
    subset_free(&val);
    subset_free(&rest);
    free(hits);
}

int main(void)
{
    test_runs();
    test_format();
    test_val_size();
    test_split();
    test_sampler_over_subset();
    return tap_done();
}
