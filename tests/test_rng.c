/*
 * test_rng.c - Philox4x32-10 matches Random123's known answers; a sample's
 * stream is a pure function of (seed, epoch, index) laid out as rng.h says;
 * the derived draws have the right range and, over many fixed-seed draws,
 * the right mean (tolerances of 10+ standard deviations: they cannot flake,
 * yet any real bias or range bug lands far outside them).
 */
#include <math.h>
#include <stdint.h>

#include "rng.h"
#include "tap.h"

static void test_kat(void)
{
    /* Random123 1.14 kat_vectors, "philox4x32 10" lines. */
    static const struct {
        uint32_t ctr[4], key[2], out[4];
        const char *name;
    } kat[] = {
        { { 0, 0, 0, 0 }, { 0, 0 },
          { 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 }, "zeros" },
        { { 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff },
          { 0xffffffff, 0xffffffff },
          { 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd }, "all ones" },
        { { 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 },
          { 0xa4093822, 0x299f31d0 },
          { 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 }, "pi digits" },
    };

    for (size_t i = 0; i < sizeof(kat) / sizeof(kat[0]); i++) {
        uint32_t out[4];
        int same;

        rng_philox4x32(kat[i].ctr, kat[i].key, out);
        same = memcmp(out, kat[i].out, sizeof(out)) == 0;
        if (!tap_ok(same, "philox4x32-10 known answer: %s", kat[i].name))
            tap_diag("  got %08x %08x %08x %08x", out[0], out[1], out[2],
                     out[3]);
    }
}

static void test_layout(void)
{
    const uint64_t seed = UINT64_C(0x0123456789abcdef);
    const uint64_t index = UINT64_C(0x00000007deadbeef);
    const uint32_t ctr[4] = { 5, 42, 0xdeadbeef, 7 };
    const uint32_t key[2] = { 0x89abcdef, 0x01234567 };
    uint32_t a[4], b[4], blk0[4], blk1[4];
    struct rng_stream st;
    int ok = 1;

    rng_philox4x32(ctr, key, a);
    rng_block(seed, 42, index, 5, b);
    TAP_OK(memcmp(a, b, sizeof(a)) == 0,
           "rng_block uses ctr {block, epoch, index lo, index hi}, key seed");

    rng_block(seed, 42, index, 0, blk0);
    rng_block(seed, 42, index, 1, blk1);
    rng_stream_init(&st, seed, 42, index);
    for (int i = 0; i < 4; i++)
        ok &= rng_u32(&st) == blk0[i];
    for (int i = 0; i < 4; i++)
        ok &= rng_u32(&st) == blk1[i];
    TAP_OK(ok, "stream hands out block 0 then block 1, words in order");

    rng_stream_init(&st, seed, 42, index);
    TAP_OK(rng_u64(&st) == ((uint64_t)blk0[0] << 32 | blk0[1]) &&
           rng_u64(&st) == ((uint64_t)blk0[2] << 32 | blk0[3]),
           "rng_u64 is first word high, second word low");

    rng_stream_init(&st, seed, 42, index);
    rng_u32(&st);
    TAP_OK(rng_u64(&st) == ((uint64_t)blk0[1] << 32 | blk0[2]) &&
           rng_u64(&st) == ((uint64_t)blk0[3] << 32 | blk1[0]),
           "rng_u64 takes the next two words across a block boundary");
}

/* The first 8 words of a stream, packed for comparisons. */
static void first_words(uint64_t seed, uint32_t epoch, uint64_t index,
                        uint32_t w[8])
{
    struct rng_stream st;

    rng_stream_init(&st, seed, epoch, index);
    for (int i = 0; i < 8; i++)
        w[i] = rng_u32(&st);
}

static void test_keying(void)
{
    uint32_t base[8], again[8], other[8];
    struct rng_stream a, b;
    int same = 1;

    first_words(7, 3, 1000, base);
    first_words(7, 3, 1000, again);
    TAP_OK(memcmp(base, again, sizeof(base)) == 0,
           "same (seed, epoch, index) gives the same draws");
    first_words(8, 3, 1000, other);
    TAP_OK(memcmp(base, other, sizeof(base)) != 0, "seed changes the draws");
    first_words(7, 4, 1000, other);
    TAP_OK(memcmp(base, other, sizeof(base)) != 0, "epoch changes the draws");
    first_words(7, 3, 1001, other);
    TAP_OK(memcmp(base, other, sizeof(base)) != 0, "index changes the draws");
    first_words(UINT64_C(7) | UINT64_C(1) << 40, 3, 1000, other);
    TAP_OK(memcmp(base, other, sizeof(base)) != 0,
           "the seed's high word is part of the key");
    first_words(7, 3, 1000 | UINT64_C(1) << 40, other);
    TAP_OK(memcmp(base, other, sizeof(base)) != 0,
           "the index's high word is part of the counter");

    /* A copied stream continues identically (plain data, no hidden state). */
    rng_stream_init(&a, 11, 0, 5);
    for (int i = 0; i < 3; i++)
        rng_u32(&a);
    b = a;
    for (int i = 0; i < 100; i++)
        same &= rng_u64(&a) == rng_u64(&b);
    TAP_OK(same, "a copied stream gives the same continuation");
}

#define DRAWS 1000000

static void test_uniform(void)
{
    struct rng_stream st;
    double sum = 0, sumsq = 0, mean, var, lo = 1, hi = 0;
    int in_range = 1;

    rng_stream_init(&st, 2024, 1, 17);
    for (int i = 0; i < DRAWS; i++) {
        double u = rng_uniform(&st);

        in_range &= u >= 0.0 && u < 1.0;
        sum += u;
        sumsq += u * u;
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    mean = sum / DRAWS;
    var = sumsq / DRAWS - mean * mean;
    TAP_OK(in_range, "rng_uniform stays in [0, 1)");
    /* sd of the mean is 0.29e-3: 0.005 is 17 sd. */
    if (!tap_ok(fabs(mean - 0.5) < 0.005, "rng_uniform mean near 1/2"))
        tap_diag("  mean %.6f", mean);
    if (!tap_ok(fabs(var - 1.0 / 12) < 0.002, "rng_uniform variance near 1/12"))
        tap_diag("  variance %.6f", var);
    TAP_OK(lo < 1e-4 && hi > 1 - 1e-4, "rng_uniform reaches both ends");
    tap_diag("rng_uniform over %d draws: mean %.6f variance %.6f", DRAWS,
             mean, var);

    /* The 53-bit construction: exactly (u64 >> 11) * 2^-53. */
    {
        struct rng_stream a, b;

        rng_stream_init(&a, 1, 2, 3);
        rng_stream_init(&b, 1, 2, 3);
        TAP_OK(rng_uniform(&a) == (double)(rng_u64(&b) >> 11) * 0x1.0p-53,
               "rng_uniform is the top 53 bits of rng_u64 times 2^-53");
    }
}

static void test_bits(void)
{
    struct rng_stream st;
    int counts[32] = { 0 }, ok = 1;
    const int draws = 200000;

    rng_stream_init(&st, 99, 0, 0);
    for (int i = 0; i < draws; i++) {
        uint32_t v = rng_u32(&st);

        for (int b = 0; b < 32; b++)
            counts[b] += (v >> b) & 1;
    }
    /* sd of each count is 224: 3000 is 13 sd. */
    for (int b = 0; b < 32; b++)
        if (abs(counts[b] - draws / 2) > 3000) {
            ok = 0;
            tap_diag("  bit %d set %d times of %d", b, counts[b], draws);
        }
    TAP_OK(ok, "every bit of rng_u32 is set about half the time");
}

static void test_bernoulli(void)
{
    struct rng_stream st;
    int half = 0, quarter = 0, never = 0, always = 0, nan_true = 0;

    rng_stream_init(&st, 5, 9, 123456);
    for (int i = 0; i < DRAWS; i++) {
        half += rng_bernoulli(&st, 0.5);
        quarter += rng_bernoulli(&st, 0.25);
        never += rng_bernoulli(&st, 0.0);
        never += rng_bernoulli(&st, -1.0);
        always += rng_bernoulli(&st, 1.0);
        always += rng_bernoulli(&st, 2.0);
        nan_true += rng_bernoulli(&st, NAN);
    }
    /* sd 500 and 433: 5000 is 10+ sd. */
    if (!tap_ok(abs(half - DRAWS / 2) < 5000, "bernoulli(0.5) near half"))
        tap_diag("  %d of %d", half, DRAWS);
    if (!tap_ok(abs(quarter - DRAWS / 4) < 5000, "bernoulli(0.25) near a quarter"))
        tap_diag("  %d of %d", quarter, DRAWS);
    TAP_IS_INT(never, 0, "bernoulli(p <= 0) is never true");
    TAP_IS_INT(always, 2 * DRAWS, "bernoulli(p >= 1) is always true");
    TAP_IS_INT(nan_true, 0, "bernoulli(NaN) is never true");
    tap_diag("bernoulli(0.5): %d of %d", half, DRAWS);
}

static void test_range(void)
{
    struct rng_stream st, ref;
    double sum = 0, mean;
    int in_range = 1;

    rng_stream_init(&st, 31, 0, 8);
    for (int i = 0; i < DRAWS; i++) {
        double x = rng_uniform_range(&st, 0.08, 1.0);

        in_range &= x >= 0.08 && x < 1.0;
        sum += x;
    }
    mean = sum / DRAWS;
    TAP_OK(in_range, "rng_uniform_range(0.08, 1) stays in [0.08, 1)");
    if (!tap_ok(fabs(mean - 0.54) < 0.005, "rng_uniform_range mean near the middle"))
        tap_diag("  mean %.6f", mean);

    rng_stream_init(&st, 31, 0, 8);
    in_range = 1;
    for (int i = 0; i < 100000; i++) {
        double x = rng_uniform_range(&st, -3.0, -2.5);

        in_range &= x >= -3.0 && x < -2.5;
    }
    TAP_OK(in_range, "negative bounds stay in [lo, hi)");

    /* A tiny interval where lo + (hi - lo) * u rounds up to hi for large u. */
    {
        double lo = 1.0, hi = 1.0 + 0x1.0p-52;

        rng_stream_init(&st, 31, 0, 9);
        in_range = 1;
        for (int i = 0; i < 10000; i++) {
            double x = rng_uniform_range(&st, lo, hi);

            in_range &= x >= lo && x < hi;
        }
        TAP_OK(in_range, "a one-ulp interval never returns hi");
    }

    rng_stream_init(&st, 31, 0, 10);
    rng_stream_init(&ref, 31, 0, 10);
    TAP_OK(rng_uniform_range(&st, 2.0, 2.0) == 2.0 &&
           rng_uniform_range(&st, 3.0, 1.0) == 3.0,
           "hi <= lo returns lo");
    rng_u64(&ref);
    rng_u64(&ref);
    TAP_OK(rng_u32(&st) == rng_u32(&ref),
           "an empty range still consumes its draw");
}

static void test_below(void)
{
    struct rng_stream st;
    int counts[10] = { 0 }, ok = 1, in_range = 1, zeros = 1;
    const int draws = 100000;
    uint32_t big = UINT32_C(0xC0000000);
    int thirds = 0;

    rng_stream_init(&st, 77, 2, 4);
    for (int i = 0; i < draws; i++) {
        uint32_t v = rng_below(&st, 10);

        if (v >= 10)
            in_range = 0;
        else
            counts[v]++;
    }
    TAP_OK(in_range, "rng_below(10) is below 10");
    /* sd of each count is 95: 1000 is 10 sd. */
    for (int i = 0; i < 10; i++)
        if (abs(counts[i] - draws / 10) > 1000) {
            ok = 0;
            tap_diag("  value %d drawn %d times of %d", i, counts[i], draws);
        }
    TAP_OK(ok, "rng_below(10) is about uniform");

    /* n = 3 * 2^30: a plain multiply-shift would map two 32-bit draws to
     * every value divisible by 3 and one to the others, so half the results
     * would be multiples of 3; without bias a third are. */
    in_range = 1;
    for (int i = 0; i < draws; i++) {
        uint32_t v = rng_below(&st, big);

        in_range &= v < big;
        thirds += v % 3 == 0;
    }
    TAP_OK(in_range, "rng_below(3 * 2^30) is below its bound");
    /* sd 149: 2000 is 13 sd, and the biased 50000 is 100 sd away. */
    if (!tap_ok(abs(thirds - draws / 3) < 2000, "rng_below(3 * 2^30) is unbiased"))
        tap_diag("  %d of %d are multiples of 3", thirds, draws);

    for (int i = 0; i < 1000; i++)
        zeros &= rng_below(&st, 1) == 0 && rng_below(&st, 0) == 0;
    TAP_OK(zeros, "rng_below(1) and rng_below(0) return 0");
}

int main(void)
{
    test_kat();
    test_layout();
    test_keying();
    test_uniform();
    test_bits();
    test_bernoulli();
    test_range();
    test_below();
    return tap_done();
}
