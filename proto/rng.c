/*
 * rng.c - Philox4x32-10 and the per-sample random stream (see rng.h for the
 * counter-space table and the order in which a stream hands out words).
 *
 * Philox round (Random123, philox.h, _philox4x32round):
 *     (hi0, lo0) = M0 * ctr[0]          64-bit product split in halves
 *     (hi1, lo1) = M1 * ctr[2]
 *     ctr' = { hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0 }
 * and between rounds the key is bumped by the Weyl constants W0, W1 (the
 * first round uses the key as given, so ten rounds bump it nine times).
 */
#include "rng.h"

#include <assert.h>

#define PHILOX_M0 UINT32_C(0xD2511F53)
#define PHILOX_M1 UINT32_C(0xCD9E8D57)
#define PHILOX_W0 UINT32_C(0x9E3779B9)   /* golden ratio */
#define PHILOX_W1 UINT32_C(0xBB67AE85)   /* sqrt(3) - 1 */
#define PHILOX_ROUNDS 10

void rng_philox4x32(const uint32_t ctr[4], const uint32_t key[2],
                    uint32_t out[4])
{
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];

    for (int r = 0; r < PHILOX_ROUNDS; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;

        if (r > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        c0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        c2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void rng_block(uint64_t seed, uint32_t epoch, uint64_t index, uint32_t block,
               uint32_t out[4])
{
    const uint32_t ctr[4] = {
        block, epoch, (uint32_t)index, (uint32_t)(index >> 32),
    };
    const uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };

    rng_philox4x32(ctr, key, out);
}

void rng_stream_init(struct rng_stream *st, uint64_t seed, uint32_t epoch,
                     uint64_t index)
{
    assert(index < RNG_INDEX_RESERVED);
    st->seed = seed;
    st->index = index;
    st->epoch = epoch;
    st->block = 0;
    st->used = 4;
    st->buf[0] = st->buf[1] = st->buf[2] = st->buf[3] = 0;
}

uint32_t rng_u32(struct rng_stream *st)
{
    if (st->used == 4) {
        /* Block numbers never wrap: that would replay the stream. */
        assert(st->block != UINT32_MAX);
        rng_block(st->seed, st->epoch, st->index, st->block, st->buf);
        st->block++;
        st->used = 0;
    }
    return st->buf[st->used++];
}

uint64_t rng_u64(struct rng_stream *st)
{
    uint64_t hi = rng_u32(st);

    return (hi << 32) | rng_u32(st);
}

double rng_uniform(struct rng_stream *st)
{
    return (double)(rng_u64(st) >> 11) * 0x1.0p-53;
}

double rng_uniform_range(struct rng_stream *st, double lo, double hi)
{
    double u = rng_uniform(st);
    double x;

    if (!(hi > lo))
        return lo;
    x = lo + (hi - lo) * u;
    return x < hi ? x : lo;
}

bool rng_bernoulli(struct rng_stream *st, double p)
{
    return rng_uniform(st) < p;
}

uint32_t rng_below(struct rng_stream *st, uint32_t n)
{
    uint64_t m = (uint64_t)rng_u32(st) * n;
    uint32_t low = (uint32_t)m;

    if (low < n) {
        /* 2^32 mod n: the products landing below it are the biased ones. */
        uint32_t threshold = (uint32_t)-n % n;

        while (low < threshold) {
            m = (uint64_t)rng_u32(st) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}
