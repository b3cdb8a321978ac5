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
 * Invariants: keys depend on (seed, epoch) only; n and h never change after
 * init; every function here is pure and touches no global state.
 */
#include "sampler.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>

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

int sampler_init(struct sampler *s, const struct sampler_params *p,
                 struct rf_err *err)
{
    uint64_t per_rank, batches;

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

    if (p->drop_last)
        per_rank = p->n / p->world;
    else
        per_rank = p->n / p->world + (p->n % p->world != 0);
    batches = per_rank / p->batch;
    if (!p->drop_last_batch && per_rank % p->batch != 0)
        batches++;

    sampler_perm_init(&s->perm, p->n, p->seed, p->epoch, p->shuffle);
    s->n = p->n;
    s->total = per_rank * p->world;
    s->per_rank = per_rank;
    s->batches = batches;
    s->rank = p->rank;
    s->world = p->world;
    s->batch = p->batch;
    s->pad_ = 0;
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
    p = position(s, seq, j);
    if (p >= s->n)
        p %= s->n;
    return sampler_perm_at(&s->perm, p);
}

uint64_t sampler_position(const struct sampler *s, uint64_t seq, uint32_t j)
{
    if (j >= sampler_batch_count(s, seq))
        return SAMPLER_NONE;
    return position(s, seq, j);
}

bool sampler_is_padding(const struct sampler *s, uint64_t seq, uint32_t j)
{
    if (j >= sampler_batch_count(s, seq))
        return false;
    return position(s, seq, j) >= s->n;
}

uint32_t sampler_batch(const struct sampler *s, uint64_t seq, uint64_t *out)
{
    uint32_t count = sampler_batch_count(s, seq);
    uint64_t p = count ? position(s, seq, 0) : 0;

    for (uint32_t j = 0; j < count; j++, p += s->world)
        out[j] = sampler_perm_at(&s->perm, p >= s->n ? p % s->n : p);
    return count;
}
