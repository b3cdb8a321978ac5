/*
 * test_sampler_block.c - shuffle=block (proto/sampler.c, THE BLOCK ORDER):
 * a bijection of [0, n) for many n, block sizes and seeds (n = 1, n below,
 * at and just past the block, a long last block); each block's positions
 * one run, so every window of W consecutive positions touches at most
 * ceil(W / K) + 1 blocks; keyed by (seed, epoch) and the same on every
 * evaluation; the rank split and the batch cut on top of it as with the
 * global shuffle (sampler_batch's cached block order equals per-sample
 * lookups; every index once per epoch over the ranks); the global shuffle
 * unchanged; the inverse walk; the default block size; the parameters
 * sampler_init refuses.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "tap.h"

static const uint64_t SIZES[] = {1, 2, 3, 5, 7, 8, 10, 16, 17, 63, 64, 65, 100, 257, 1000, 4097};
static const uint64_t BLOCKS[] = {1, 2, 3, 4, 7, 10, 16, 64, 100, 1000, 5000};
static const uint64_t SEEDS[] = {0, 1, 0xdeadbeefcafef00dull};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Whether order is a bijection of [0, n) that answers SAMPLER_NONE past it. */
static int is_bijection(const struct sampler_order *o, uint64_t n)
{
    uint8_t *seen = calloc(n, 1);
    int ok = seen != NULL;

    for (uint64_t p = 0; ok && p < n; p++) {
        uint64_t i = sampler_order_at(o, p);

        ok = i < n && !seen[i];
        if (ok)
            seen[i] = 1;
    }
    free(seen);
    return ok && sampler_order_at(o, n) == SAMPLER_NONE &&
           sampler_order_at(o, UINT64_MAX) == SAMPLER_NONE;
}

/*
 * The most blocks any window of w consecutive positions of order touches,
 * by a sliding window over the epoch; *runs gets the number of times the
 * block changes from one position to the next, plus one.
 */
static uint64_t most_blocks(const struct sampler_order *o, uint64_t n, uint64_t w,
                            uint64_t *runs)
{
    uint64_t m = o->blocks, distinct = 0, most = 0, prev = SAMPLER_NONE;
    uint64_t *count = calloc(m, sizeof(*count)), *blk = malloc(n * sizeof(*blk));

    if (!count || !blk) {
        free(count);
        free(blk);
        return UINT64_MAX;
    }
    *runs = 0;
    for (uint64_t p = 0; p < n; p++) {
        blk[p] = sampler_order_block_of(o, sampler_order_at(o, p));
        *runs += blk[p] != prev;
        prev = blk[p];
    }
    for (uint64_t p = 0; p < n; p++) {
        distinct += count[blk[p]]++ == 0;
        if (p >= w)
            distinct -= --count[blk[p - w]] == 0;
        if (p + 1 >= w || p + 1 == n)
            most = distinct > most ? distinct : most;
    }
    free(count);
    free(blk);
    return most;
}

static void test_bijection_and_locality(void)
{
    int bij = 1, local = 1, runs_ok = 1, sizes_ok = 1;

    for (size_t a = 0; a < N_OF(SIZES); a++)
        for (size_t b = 0; b < N_OF(BLOCKS); b++)
            for (size_t c = 0; c < N_OF(SEEDS); c++) {
                uint64_t n = SIZES[a], k = BLOCKS[b], runs = 0;
                uint64_t ws[] = {1, 2, k > 1 ? k - 1 : 1, k, k + 1, 2 * k, 3 * k + 5, 64};
                struct sampler_order o;

                sampler_order_init(&o, n, SEEDS[c], (uint32_t)c, SAMPLER_SHUFFLE_BLOCK, k);
                sizes_ok &= o.blocks == (n / k ? n / k : 1);
                if (!is_bijection(&o, n)) {
                    bij = 0;
                    tap_diag("n %llu block %llu seed %zu: not a bijection",
                             (unsigned long long)n, (unsigned long long)k, c);
                }
                for (size_t i = 0; i < N_OF(ws); i++) {
                    uint64_t w = ws[i], bound = (w + k - 1) / k + 1;
                    uint64_t got = most_blocks(&o, n, w, &runs);

                    if (got > bound) {
                        local = 0;
                        tap_diag("n %llu block %llu window %llu: %llu blocks, bound %llu",
                                 (unsigned long long)n, (unsigned long long)k,
                                 (unsigned long long)w, (unsigned long long)got,
                                 (unsigned long long)bound);
                    }
                }
                if (runs != o.blocks) {
                    runs_ok = 0;
                    tap_diag("n %llu block %llu: %llu runs for %llu blocks",
                             (unsigned long long)n, (unsigned long long)k,
                             (unsigned long long)runs, (unsigned long long)o.blocks);
                }
            }
    TAP_OK(sizes_ok, "m = max(1, floor(n / block)) blocks, the remainder in the last");
    TAP_OK(bij, "shuffle=block is a bijection of [0, n) for every n, block size and seed "
           "(n = 1, n < block, n = block, a long last block)");
    TAP_OK(runs_ok, "each block's positions are one run of the epoch");
    TAP_OK(local, "every window of W positions touches at most ceil(W / block) + 1 blocks");
}

/* Positions where two orders of [0, n) agree. */
static uint64_t agree(const struct sampler_order *x, const struct sampler_order *y, uint64_t n)
{
    uint64_t same = 0;

    for (uint64_t p = 0; p < n; p++)
        same += sampler_order_at(x, p) == sampler_order_at(y, p);
    return same;
}

static void test_keying(void)
{
    const uint64_t n = 100003, k = 1000;
    struct sampler_order a, b, c, d;
    uint64_t fixed = 0, first_block_same = 0;

    sampler_order_init(&a, n, 5, 3, SAMPLER_SHUFFLE_BLOCK, k);
    sampler_order_init(&b, n, 5, 3, SAMPLER_SHUFFLE_BLOCK, k);
    TAP_IS_INT(agree(&a, &b, n), n, "the same (seed, epoch, block) gives the same order");
    sampler_order_init(&c, n, 5, 4, SAMPLER_SHUFFLE_BLOCK, k);
    TAP_OK(agree(&a, &c, n) < n / 50, "another epoch gives another order");
    sampler_order_init(&d, n, 6, 3, SAMPLER_SHUFFLE_BLOCK, k);
    TAP_OK(agree(&a, &d, n) < n / 50, "another seed gives another order");
    /* the blocks come in a shuffled order and each block is shuffled */
    for (uint64_t p = 0; p < n; p++)
        fixed += sampler_order_at(&a, p) == p;
    TAP_OK(fixed < n / 50, "the order is not the identity");
    for (uint32_t e = 0; e < 20; e++) {
        sampler_order_init(&c, n, 5, e, SAMPLER_SHUFFLE_BLOCK, k);
        first_block_same += sampler_order_block_of(&c, sampler_order_at(&c, 0)) ==
                            sampler_order_block_of(&a, sampler_order_at(&a, 0));
    }
    TAP_OK(first_block_same < 5, "the first block differs across epochs");
    /* one block (n < block) is a full shuffle of the dataset */
    sampler_order_init(&c, 1000, 5, 0, SAMPLER_SHUFFLE_BLOCK, 5000);
    fixed = 0;
    for (uint64_t p = 0; p < 1000; p++)
        fixed += sampler_order_at(&c, p) == p;
    TAP_OK(c.blocks == 1 && fixed < 20, "n below the block size: one block, shuffled");
}

/* The global kind is sampler_perm_init's permutation exactly; off is the identity. */
static void test_other_kinds(void)
{
    struct sampler_order o;
    struct sampler_perm pm;
    int same = 1, ident = 1, inverse = 1;

    sampler_order_init(&o, 77777, 9, 2, SAMPLER_SHUFFLE_GLOBAL, 0);
    sampler_perm_init(&pm, 77777, 9, 2, true);
    for (uint64_t p = 0; p < 77777; p++)
        same &= sampler_order_at(&o, p) == sampler_perm_at(&pm, p);
    TAP_OK(same, "shuffle=1 is the global permutation as before");
    sampler_order_init(&o, 1000, 9, 2, SAMPLER_SHUFFLE_OFF, 0);
    for (uint64_t p = 0; p < 1000; p++)
        ident &= sampler_order_at(&o, p) == p;
    TAP_OK(ident && sampler_order_block_of(&o, 3) == SAMPLER_NONE, "shuffle=0 is the identity");
    for (size_t a = 0; a < N_OF(SIZES); a++) {
        sampler_perm_init(&pm, SIZES[a], 4, 1, true);
        for (uint64_t i = 0; i < SIZES[a]; i++)
            inverse &= sampler_perm_index(&pm, sampler_perm_at(&pm, i)) == i;
        inverse &= sampler_perm_index(&pm, SIZES[a]) == SAMPLER_NONE;
    }
    TAP_OK(inverse, "sampler_perm_index inverts sampler_perm_at");
}

/* Over all ranks, an epoch delivers every index once plus the padding, and
 * sampler_batch (which keeps a block's order between samples) agrees with
 * sampler_sample, for block mode under the rank split. */
static void test_split(void)
{
    static const uint64_t ns[] = {1, 9, 100, 1001, 6000};
    static const uint32_t worlds[] = {1, 2, 3, 8};
    static const uint32_t batches[] = {1, 7, 64};
    static const uint64_t ks[] = {1, 10, 400, 7000};
    int once = 1, same = 1;
    uint64_t out[64];

    for (size_t a = 0; a < N_OF(ns); a++)
        for (size_t b = 0; b < N_OF(worlds); b++)
            for (size_t c = 0; c < N_OF(batches); c++)
                for (size_t e = 0; e < N_OF(ks); e++) {
                    uint64_t n = ns[a], got = 0, pad = 0;
                    uint8_t *seen = calloc(n, 1);

                    for (uint32_t r = 0; seen && r < worlds[b]; r++) {
                        struct sampler_params p = {
                            .n = n, .seed = 3, .epoch = 1, .rank = r, .world = worlds[b],
                            .batch = batches[c], .shuffle = SAMPLER_SHUFFLE_BLOCK,
                            .block = ks[e],
                        };
                        struct sampler s;

                        if (sampler_init(&s, &p, NULL) < 0) {
                            once = 0;
                            break;
                        }
                        for (uint64_t q = 0; q < sampler_batches(&s); q++) {
                            uint32_t cnt = sampler_batch(&s, q, out);
                            uint64_t part[8];
                            uint32_t first = cnt / 3, pc;

                            /* a worker's slice: first.. of the batch, cut to it */
                            pc = sampler_batch_range(&s, q, first, 8, part);
                            same &= pc == (cnt - first < 8 ? cnt - first : 8);
                            for (uint32_t j = 0; j < pc; j++)
                                same &= part[j] == out[first + j];
                            same &= sampler_batch_range(&s, q, cnt, 1, part) == 0;
                            for (uint32_t j = 0; j < cnt; j++) {
                                same &= out[j] == sampler_sample(&s, q, j);
                                if (sampler_is_padding(&s, q, j)) {
                                    pad++;
                                    continue;
                                }
                                once &= out[j] < n && !seen[out[j]];
                                if (out[j] < n)
                                    seen[out[j]] = 1;
                                got++;
                            }
                        }
                    }
                    once &= seen && got == n &&
                            pad == (n + worlds[b] - 1) / worlds[b] * worlds[b] - n;
                    free(seen);
                }
    TAP_OK(once, "over all ranks every index comes once per epoch, plus the padding");
    TAP_OK(same, "sampler_batch and sampler_batch_range agree with sampler_sample in block mode");
}

static void test_large(void)
{
    struct sampler_params p = {
        .n = SAMPLER_MAX_N, .seed = 1, .epoch = 7, .rank = 3, .world = 8, .batch = 512,
        .shuffle = SAMPLER_SHUFFLE_BLOCK, .block = 40000,
    };
    struct sampler s;
    uint64_t out[512], nb;
    int ok = 1;

    TAP_IS_INT(sampler_init(&s, &p, NULL), 0, "n = 2^62, block 40000 set up");
    nb = sampler_batches(&s);
    for (uint64_t t = 0; t < 200; t++) {
        uint64_t q = (t * 0x9e3779b97f4a7c15ull) % nb;
        uint32_t c = sampler_batch(&s, q, out);

        for (uint32_t j = 0; j < c; j++)
            ok &= out[j] < SAMPLER_MAX_N && out[j] == sampler_sample(&s, q, j);
    }
    /* the positions around the long block's run, and the epoch's ends */
    {
        const struct sampler_order *o = &s.order;
        uint64_t at[] = {0, 1, o->long_run * o->block - 1, o->long_run * o->block,
                         o->long_run * o->block + o->block, SAMPLER_MAX_N - 1};

        for (size_t i = 0; i < N_OF(at); i++)
            ok &= sampler_order_at(o, at[i]) < SAMPLER_MAX_N;
    }
    TAP_OK(ok, "n = 2^62: lookups in range, batches match per-sample lookups");
}

static void test_default_and_params(void)
{
    struct sampler_params good = {
        .n = 1000, .world = 2, .batch = 10, .shuffle = SAMPLER_SHUFFLE_BLOCK, .block = 100,
    };
    struct sampler_params p;
    struct sampler s;
    struct rf_err err;

    TAP_IS_INT(sampler_block_default(SAMPLER_BLOCK_SHARDS, 10000, 60000, 60000), 40000,
               "default block: 4 shards of the whole dataset");
    TAP_IS_INT(sampler_block_default(1, 10000, 60000, 60000), 10000,
               "default block: 1 shard (a small node cache)");
    TAP_IS_INT(sampler_block_default(0, 10000, 60000, 60000), 10000,
               "default block: 0 shards counts as 1");
    TAP_IS_INT(sampler_block_default(SAMPLER_BLOCK_SHARDS, 10000, 6000, 60000), 4000,
               "default block: scaled to a subset's share");
    TAP_IS_INT(sampler_block_default(SAMPLER_BLOCK_SHARDS, 3, 1, 7), 2,
               "default block: rounded up");
    TAP_IS_INT(sampler_block_default(SAMPLER_BLOCK_SHARDS, 0, 5, 5), 1,
               "default block: at least 1");
    TAP_IS_INT(sampler_block_default(SAMPLER_BLOCK_SHARDS, SAMPLER_MAX_N, SAMPLER_MAX_N,
                                     SAMPLER_MAX_N),
               SAMPLER_MAX_N, "default block: no overflow, at most SAMPLER_MAX_N");

    TAP_IS_INT(sampler_init(&s, &good, &err), 0, "block parameters accepted");
    p = good;
    p.shuffle = SAMPLER_SHUFFLE_COUNT;
    TAP_IS_INT(sampler_init(&s, &p, &err), -EINVAL, "an unknown shuffle kind refused");
    TAP_OK(strstr(err.msg, "shuffle kind") != NULL, "  and named");
    p = good;
    p.block = 0;
    TAP_IS_INT(sampler_init(&s, &p, &err), -EINVAL, "block 0 in block mode refused");
    TAP_OK(strstr(err.msg, "block size 0") != NULL, "  and named");
    p.block = SAMPLER_MAX_N + 1;
    TAP_IS_INT(sampler_init(&s, &p, &err), -EINVAL, "a block past 2^62 refused");
    p = good;
    p.shuffle = SAMPLER_SHUFFLE_GLOBAL;
    TAP_IS_INT(sampler_init(&s, &p, &err), -EINVAL, "a block size with shuffle=1 refused");
    TAP_OK(strstr(err.msg, "shuffle=block only") != NULL, "  and named");
}

int main(void)
{
    test_bijection_and_locality();
    test_keying();
    test_other_kinds();
    test_split();
    test_large();
    test_default_and_params();
    return tap_done();
}
