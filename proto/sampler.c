/*
 * sampler.c - the epoch permutation and the rank/batch split (the rules and
 * the padding are stated in sampler.h; this file holds the construction).
 *
 * THE PERMUTATION: a keyed Feistel network with cycle walking.
 *
 * Domain.  h = the smallest h >= 1 with 4^h >= n; a number x < 4^h is split
 * into two h-bit halves, x = L * 2^h + R.  (Balanced halves need an even bit
 * count, hence a power of 4 rather than of 2.)
 *
 * Feistel network E.  SAMPLER_ROUNDS rounds of
 *     (L, R) -> (R, L xor F_i(R)),   F_i(R) = top h bits of mix64(R xor k_i)
 * where mix64 is Stafford's "Mix13" 64-bit finalizer (the one splitmix64
 * ends with; full avalanche) and k_0 .. k_5 are 64-bit round keys from
 * Philox blocks of the reserved stream (seed, epoch, RNG_INDEX_SAMPLER_KEYS).
 *
 * Why E is a bijection of [0, 4^h): each round is invertible whatever F_i
 * is, because (L', R') = (R, L xor F_i(R)) gives back R = L' and
 * L = R' xor F_i(L').  A composition of bijections is a bijection.  (By
 * Luby-Rackoff, four or more rounds with pseudorandom F_i make E
 * indistinguishable from a random permutation; we use six.)
 *
 * Cycle walking (Black and Rogaway, "Ciphers with arbitrary finite
 * domains", 2002).  perm(i) for i < n applies E until the value lands in
 * [0, n): y = E(i); while (y >= n) y = E(y).  It ends because i lies on a
 * finite cycle of E and i < n.  It is a bijection of [0, n): perm(i) is the
 * next element of [0, n) after i along i's cycle of E, so perm^-1(y) is the
 * previous one, found by walking E^-1 the same way.
 *
 * Cost.  Over a whole epoch the walks from every i < n visit each value
 * of [n, 4^h) at most once (a value >= n is stepped over only by the walk
 * that starts at the nearest in-range value before it on its cycle), so all
 * n lookups together take at most 4^h evaluations of E: on average at most
 * 4^h / n per lookup, which is below 4 because 4^(h-1) < n by minimality of
 * h (for h = 1, n >= 2 and 4 / n <= 2).  n <= 1 is the identity and costs
 * nothing.  For E like a random permutation, a single walk needs more than
 * k steps with probability about (1 - n / 4^h)^k, below (3/4)^k.
 *
 * The inverse (sampler_perm_index) walks E^-1 from y the same way:
 * E^-1 undoes the rounds in reverse order, each as above.
 *
 * THE BLOCK ORDER (shuffle=block): K = the block size, m = max(1,
 * floor(n / K)) blocks.  Block b < m - 1 holds indices [bK, bK + K); the
 * last, m - 1, holds [(m - 1)K, n): size(m - 1) = K + E with the extra
 * E = n - mK in [0, K) (or, when n < K, m = 1 and the block is [0, n)).
 *
 *   beta     = the permutation of the m blocks keyed by (seed, epoch,
 *              RNG_INDEX_BLOCK_ORDER_KEYS): run q of the epoch holds block
 *              beta(q);
 *   sigma_b  = the permutation of [0, size(b)) keyed by (seed, epoch,
 *              RNG_INDEX_BLOCK_KEYS + b): block b's own order;
 *   runs     = consecutive stretches of positions, run q of length
 *              size(beta(q)): run q starts at qK for q <= q*, at qK + E
 *              for q > q*, where q* = beta^-1(m - 1) (computed once, at
 *              init, by sampler_perm_index) is the run of the long block.
 *
 *   order(p) = beta(q) * K + sigma_beta(q)(p - start(q)), q = p's run.
 *
 * Why it is a bijection of [0, n).  The runs are consecutive and their
 * lengths are the sizes of beta(0), ..., beta(m - 1), every block once, so
 * they tile [0, n): p -> (q, o = p - start(q)) is a bijection onto the
 * pairs with o < size(beta(q)).  (q, o) -> (beta(q), o) is one onto the
 * pairs (b, o) with o < size(b), beta being a permutation of the blocks;
 * and (b, o) -> bK + sigma_b(o) is one onto [0, n), sigma_b being a
 * permutation of [0, size(b)) and the blocks tiling [0, n).  A
 * composition of bijections is a bijection.
 *
 * Why the remainder joins the last block instead of making a short one.
 * Every run is then at least K long (when m >= 2), so a window of W
 * consecutive positions that touches j >= 2 runs holds the j - 2 between
 * its ends whole and a position of each end: W >= (j - 2)K + 2, so
 * j - 2 <= (W - 2) / K < ceil(W / K), and j <= ceil(W / K) + 1.  Each run
 * is one block: every window of W positions touches at most
 * ceil(W / K) + 1 blocks (m = 1 touches one).  A short block's run in the
 * middle of the epoch would break that: a window of K positions could
 * take the end of one run, the short run and the start of the next,
 * three blocks.  The cost is one block of up to 2K - 1 samples.
 *
 * Cost per lookup: beta's walk (below 4 Feistel evaluations on average
 * over an epoch, as above), sigma's round keys (three Philox blocks) and
 * its walk.  sampler_batch keeps sigma from one sample to the next while
 * they lie in the same block, which they mostly do.
 *
 * Invariants: keys depend on (seed, epoch) only (and the block number for
 * sigma); n, h, K, m and q* never change after init; every function here
 * is pure and touches no global state.
 */
#include "sampler.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "mix.h"
#include "rng.h"

/* Stafford's Mix13 (the splitmix64 finalizer): a bijection with avalanche. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void sampler_perm_init(struct sampler_perm *pm, uint64_t n, uint64_t seed,
                       uint32_t epoch, bool shuffle)
{
    sampler_perm_init_keyed(pm, n, seed, epoch, RNG_INDEX_SAMPLER_KEYS, shuffle);
}

void sampler_perm_init_keyed(struct sampler_perm *pm, uint64_t n, uint64_t seed,
                             uint32_t epoch, uint64_t key_index, bool shuffle)
{
    assert(n <= SAMPLER_MAX_N);
    pm->n = n;
    pm->half_bits = 0;
    pm->pad_ = 0;
    for (int i = 0; i < SAMPLER_ROUNDS; i++)
        pm->keys[i] = 0;
    if (!shuffle || n <= 1)
        return;

    /* bits = ceil(log2 n) for n >= 2; h = ceil(bits / 2), at least 1. */
    unsigned bits = 64 - (unsigned)__builtin_clzll(n - 1);
    pm->half_bits = (bits + 1) / 2;

    for (uint32_t b = 0; b < SAMPLER_ROUNDS / 2; b++) {
        uint32_t w[4];

        rng_block(seed, epoch, key_index, b, w);
        pm->keys[2 * b] = (uint64_t)w[0] << 32 | w[1];
        pm->keys[2 * b + 1] = (uint64_t)w[2] << 32 | w[3];
    }
}

uint64_t sampler_perm_domain(const struct sampler_perm *pm)
{
    return pm->half_bits ? (uint64_t)1 << (2 * pm->half_bits) : 0;
}

uint64_t sampler_perm_feistel(const struct sampler_perm *pm, uint64_t x)
{
    unsigned h = pm->half_bits;
    uint64_t mask = ((uint64_t)1 << h) - 1;
    uint64_t l = (x >> h) & mask, r = x & mask;

    for (int i = 0; i < SAMPLER_ROUNDS; i++) {
        uint64_t t = l ^ (mix64(r ^ pm->keys[i]) >> (64 - h));

        l = r;
        r = t;
    }
    return l << h | r;
}

/* E^-1: the rounds of sampler_perm_feistel undone, last first. */
static uint64_t feistel_inverse(const struct sampler_perm *pm, uint64_t y)
{
    unsigned h = pm->half_bits;
    uint64_t mask = ((uint64_t)1 << h) - 1;
    uint64_t l = (y >> h) & mask, r = y & mask;

    for (int i = SAMPLER_ROUNDS - 1; i >= 0; i--) {
        uint64_t t = r ^ (mix64(l ^ pm->keys[i]) >> (64 - h));

        r = l;
        l = t;
    }
    return l << h | r;
}

uint64_t sampler_perm_index(const struct sampler_perm *pm, uint64_t y)
{
    uint64_t x;

    if (y >= pm->n)
        return SAMPLER_NONE;
    if (pm->half_bits == 0)
        return y;
    x = y;
    do
        x = feistel_inverse(pm, x);
    while (x >= pm->n);
    return x;
}

uint64_t sampler_perm_at(const struct sampler_perm *pm, uint64_t i)
{
    uint64_t y;

    if (i >= pm->n)
        return SAMPLER_NONE;
    if (pm->half_bits == 0)
        return i;
    y = i;
    do
        y = sampler_perm_feistel(pm, y);
    while (y >= pm->n);
    return y;
}

void sampler_order_init(struct sampler_order *o, uint64_t n, uint64_t seed, uint32_t epoch,
                        uint32_t mode, uint64_t block)
{
    assert(n <= SAMPLER_MAX_N && mode < SAMPLER_SHUFFLE_COUNT);
    o->n = n;
    o->seed = seed;
    o->epoch = epoch;
    o->mode = mode;
    o->block = o->blocks = o->long_run = 0;
    if (mode != SAMPLER_SHUFFLE_BLOCK) {
        sampler_perm_init(&o->perm, n, seed, epoch, mode == SAMPLER_SHUFFLE_GLOBAL);
        return;
    }
    assert(block >= 1);
    o->block = block;
    o->blocks = n / block ? n / block : 1;
    sampler_perm_init_keyed(&o->perm, o->blocks, seed, epoch, RNG_INDEX_BLOCK_ORDER_KEYS, true);
    o->long_run = sampler_perm_index(&o->perm, o->blocks - 1);
}

/* Block mode: the samples block b holds. */
static inline uint64_t block_size(const struct sampler_order *o, uint64_t b)
{
    return b + 1 < o->blocks ? o->block : o->n - b * o->block;
}

/* Block mode: position pos's run q and its offset in the run (the runs are
 * drawn in the file-top comment). */
static inline uint64_t run_of(const struct sampler_order *o, uint64_t pos, uint64_t *off)
{
    uint64_t k = o->block, qs = o->long_run, extra, q;

    if (o->blocks == 1) {
        *off = pos;
        return 0;
    }
    extra = o->n - o->blocks * k;
    if (pos < qs * k)
        q = pos / k;
    else if (pos < qs * k + k + extra)
        q = qs;
    else
        q = (pos - extra) / k;
    *off = pos - q * k - (q > qs ? extra : 0);
    return q;
}

/* Block mode: sets up sigma_b, block b's own permutation, into *pm. */
static inline void block_perm(const struct sampler_order *o, uint64_t b, struct sampler_perm *pm)
{
    sampler_perm_init_keyed(pm, block_size(o, b), o->seed, o->epoch, RNG_INDEX_BLOCK_KEYS + b,
                            true);
}

/* order[pos] for pos < n; in block mode *last caches sigma of the block
 * *last_b (SAMPLER_NONE: none yet) across calls. */
static uint64_t order_at(const struct sampler_order *o, uint64_t pos, struct sampler_perm *last,
                         uint64_t *last_b)
{
    uint64_t off, b;

    if (o->mode != SAMPLER_SHUFFLE_BLOCK)
        return sampler_perm_at(&o->perm, pos);
    b = sampler_perm_at(&o->perm, run_of(o, pos, &off));
    if (b != *last_b) {
        block_perm(o, b, last);
        *last_b = b;
    }
    return b * o->block + sampler_perm_at(last, off);
}

uint64_t sampler_order_at(const struct sampler_order *o, uint64_t pos)
{
    struct sampler_perm pm;
    uint64_t none = SAMPLER_NONE;

    if (pos >= o->n)
        return SAMPLER_NONE;
    return order_at(o, pos, &pm, &none);
}

uint64_t sampler_order_block_of(const struct sampler_order *o, uint64_t i)
{
    uint64_t b;

    if (i >= o->n || o->mode != SAMPLER_SHUFFLE_BLOCK)
        return SAMPLER_NONE;
    b = i / o->block;
    return b < o->blocks ? b : o->blocks - 1;
}

uint64_t sampler_block_default(uint32_t shards, uint64_t shard_records, uint64_t n,
                               uint64_t samples)
{
    unsigned __int128 k;

    if (shard_records == 0 || samples == 0 || n == 0)
        return 1;
    /* ceil(shards * shard_records * n / samples) without overflow */
    k = ((unsigned __int128)(shards ? shards : 1) * shard_records * n + samples - 1) / samples;
    if (k > SAMPLER_MAX_N)
        return SAMPLER_MAX_N;
    return k ? (uint64_t)k : 1;
}

int sampler_init(struct sampler *s, const struct sampler_params *p,
                 struct rf_err *err)
{
    uint64_t per_rank, batches;

    if (p->mix) {
        memset(s, 0, sizeof(*s));
        s->order.epoch = p->epoch;
        s->mix = p->mix;
        s->per_rank = p->mix->samples;
        s->batches = p->mix->batches;
        s->batch = p->mix->p.batch;
        s->rank = p->mix->p.rank;
        s->world = p->mix->p.world;
        return 0;
    }
    if (p->n < 1 || p->n > SAMPLER_MAX_N)
        return rf_err_set(err, -EINVAL,
                          "sampler: dataset size %" PRIu64 " is outside 1..%"
                          PRIu64, p->n, SAMPLER_MAX_N);
    if (p->world < 1)
        return rf_err_set(err, -EINVAL,
                          "sampler: world size 0; it must be at least 1");
    if (p->rank >= p->world)
        return rf_err_set(err, -EINVAL,
                          "sampler: rank %" PRIu32 " is not below world size %"
                          PRIu32 " (ranks count from 0)", p->rank, p->world);
    if (p->batch < 1)
        return rf_err_set(err, -EINVAL,
                          "sampler: batch size 0; it must be at least 1");
    if (p->drop_last && p->n < p->world)
        return rf_err_set(err, -EINVAL,
                          "sampler: drop_last with %" PRIu64 " samples over %"
                          PRIu32 " ranks leaves every rank empty; turn "
                          "drop_last off or use fewer ranks", p->n, p->world);

    if (p->shuffle >= SAMPLER_SHUFFLE_COUNT)
        return rf_err_set(err, -EINVAL,
                          "sampler: shuffle kind %" PRIu32 " is not one of 0 (off), 1 "
                          "(global), 2 (block)", p->shuffle);
    if (p->shuffle == SAMPLER_SHUFFLE_BLOCK && (p->block < 1 || p->block > SAMPLER_MAX_N))
        return rf_err_set(err, -EINVAL,
                          "sampler: block size %" PRIu64 " is outside 1..%" PRIu64,
                          p->block, SAMPLER_MAX_N);
    if (p->shuffle != SAMPLER_SHUFFLE_BLOCK && p->block != 0)
        return rf_err_set(err, -EINVAL,
                          "sampler: a block size (%" PRIu64 ") is for shuffle=block only",
                          p->block);

    if (p->drop_last)
        per_rank = p->n / p->world;
    else
        per_rank = p->n / p->world + (p->n % p->world != 0);
    batches = per_rank / p->batch;
    if (!p->drop_last_batch && per_rank % p->batch != 0)
        batches++;

    sampler_order_init(&s->order, p->n, p->seed, p->epoch, p->shuffle, p->block);
    s->n = p->n;
    s->total = per_rank * p->world;
    s->per_rank = per_rank;
    s->batches = batches;
    s->rank = p->rank;
    s->world = p->world;
    s->batch = p->batch;
    s->pad_ = 0;
    s->mix = NULL;
    return 0;
}

uint64_t sampler_samples_per_rank(const struct sampler *s)
{
    return s->per_rank;
}

uint64_t sampler_batches(const struct sampler *s)
{
    return s->batches;
}

uint32_t sampler_batch_count(const struct sampler *s, uint64_t seq)
{
    uint64_t left;

    if (s->mix)
        return mix_plan_batch_count(s->mix, seq);
    if (seq >= s->batches)
        return 0;
    left = s->per_rank - seq * s->batch;
    return left < s->batch ? (uint32_t)left : s->batch;
}

/* The position in the padded epoch order of sample j of batch seq. */
static inline uint64_t position(const struct sampler *s, uint64_t seq,
                                uint32_t j)
{
    return s->rank + (seq * s->batch + j) * s->world;
}

uint64_t sampler_sample(const struct sampler *s, uint64_t seq, uint32_t j)
{
    uint64_t p;

    if (j >= sampler_batch_count(s, seq))
        return SAMPLER_NONE;
    if (s->mix) {
        mix_plan_range(s->mix, s->order.epoch, seq, j, 1, &p, NULL, NULL, NULL);
        return p;
    }
    p = position(s, seq, j);
    if (p >= s->n)
        p %= s->n;
    return sampler_order_at(&s->order, p);
}

uint64_t sampler_position(const struct sampler *s, uint64_t seq, uint32_t j)
{
    if (j >= sampler_batch_count(s, seq))
        return SAMPLER_NONE;
    if (s->mix) /* the place in the mixture's epoch */
        return seq * s->batch + j;
    return position(s, seq, j);
}

bool sampler_is_padding(const struct sampler *s, uint64_t seq, uint32_t j)
{
    if (j >= sampler_batch_count(s, seq))
        return false;
    if (s->mix) {
        uint64_t i;
        bool pad;

        mix_plan_range(s->mix, s->order.epoch, seq, j, 1, &i, NULL, &pad, NULL);
        return pad;
    }
    return position(s, seq, j) >= s->n;
}

uint32_t sampler_batch(const struct sampler *s, uint64_t seq, uint64_t *out)
{
    return sampler_batch_range(s, seq, 0, sampler_batch_count(s, seq), out);
}

uint32_t sampler_batch_range(const struct sampler *s, uint64_t seq, uint32_t first,
                             uint32_t count, uint64_t *out)
{
    uint32_t all = sampler_batch_count(s, seq);
    uint64_t p, last_b = SAMPLER_NONE;
    struct sampler_perm sigma;

    if (s->mix)
        return mix_plan_range(s->mix, s->order.epoch, seq, first, count, out, NULL, NULL, NULL);
    if (first >= all)
        return 0;
    if (count > all - first)
        count = all - first;
    p = position(s, seq, first);
    for (uint32_t j = 0; j < count; j++, p += s->world)
        out[j] = order_at(&s->order, p >= s->n ? p % s->n : p, &sigma, &last_b);
    return count;
}
