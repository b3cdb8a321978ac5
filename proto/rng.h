/*
 * rng.h - ringfeed's counter-based random numbers: Philox4x32-10 and a small
 * per-sample stream on top of it.
 *
 * Every random decision ringfeed makes (the epoch's shuffle, each sample's
 * augmentation) is a pure function of (seed, epoch, sample index, how many
 * draws came before in that sample's stream).  No generator state crosses
 * samples, workers or restarts, so a batch comes out the same whichever
 * worker built it and after any crash (docs/design/determinism.md).
 *
 * Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As
 * Easy as 1, 2, 3", SC11) maps a 128-bit counter and a 64-bit key to 128
 * random bits; it is the generator of Random123, cuRAND and JAX, and passes
 * TestU01's BigCrush.  rng_philox4x32() is bit-exact with Random123's
 * philox4x32_R(10, ctr, key); the tests check its published known answers.
 *
 * The counter space, one table for all of ringfeed (never reuse a slot):
 *
 *     key[0..1]  seed, low word first
 *     ctr[0]     block number within one stream (4 words per block)
 *     ctr[1]     epoch
 *     ctr[2]     index bits 0..31
 *     ctr[3]     index bits 32..63
 *
 * Sample streams use index = the sample's dataset index, which must be below
 * RNG_INDEX_RESERVED (2^63).  Indices from RNG_INDEX_RESERVED up belong to
 * ringfeed's own derivations, so they can never collide with a sample:
 *
 *     RNG_INDEX_SAMPLER_KEYS   the epoch permutation's round keys (sampler.c)
 *     RNG_INDEX_SPLIT_KEYS     a validation split's permutation keys, the
 *                              stratum in the epoch word (subset.c)
 *     RNG_INDEX_BLOCK_ORDER_KEYS  shuffle=block: the keys of the blocks'
 *                              order (sampler.c)
 *     RNG_INDEX_BLOCK_KEYS + b shuffle=block: block b's own permutation
 *                              keys, b < 2^62 (the top quarter of the
 *                              index space, so no b reaches the others)
 *
 * A stream hands out the words of each block in order, so a sample's k-th
 * rng_u32() is word k % 4 of block k / 4.  rng_u64() takes two words, high
 * then low; rng_uniform() takes one rng_u64().  A stream yields about 2^34
 * words before its block number would wrap, which an assert forbids.
 */
#ifndef RINGFEED_PROTO_RNG_H
#define RINGFEED_PROTO_RNG_H

#include <stdbool.h>
#include <stdint.h>

/* Sample indices must be below this; the rest of the index space is ours. */
#define RNG_INDEX_RESERVED ((uint64_t)1 << 63)
/* Index whose stream gives the sampler's per-epoch permutation keys. */
#define RNG_INDEX_SAMPLER_KEYS (RNG_INDEX_RESERVED + 1)
/* Index whose stream keys a validation split's permutations (subset.c). */
#define RNG_INDEX_SPLIT_KEYS (RNG_INDEX_RESERVED + 2)
/* shuffle=block: the stream keying the order of the blocks (sampler.c). */
#define RNG_INDEX_BLOCK_ORDER_KEYS (RNG_INDEX_RESERVED + 3)
/* shuffle=block: block b's keys are stream RNG_INDEX_BLOCK_KEYS + b, for
 * b < 2^62 (a block holds at least one of at most 2^62 samples). */
#define RNG_INDEX_BLOCK_KEYS (RNG_INDEX_RESERVED + ((uint64_t)1 << 62))

/*
 * Philox4x32-10: out = Philox(ctr, key), 10 rounds.  Pure; out may not alias
 * ctr.  Known answers (Random123's kat_vectors): ctr 0, key 0 gives
 * 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
 */
void rng_philox4x32(const uint32_t ctr[4], const uint32_t key[2],
                    uint32_t out[4]);

/*
 * Block `block` of the stream (seed, epoch, index): the four words
 * Philox(ctr = {block, epoch, index lo, index hi}, key = {seed lo, seed hi}).
 * Pure; this is what rng_stream draws from, exposed for derivations that want
 * a block directly (the sampler's keys).
 */
void rng_block(uint64_t seed, uint32_t epoch, uint64_t index, uint32_t block,
               uint32_t out[4]);

/* A sample's stream.  Plain data: copy it to fork a stream, no free. */
struct rng_stream {
    uint64_t seed;
    uint64_t index;
    uint32_t epoch;
    uint32_t block;     /* next block to generate */
    uint32_t buf[4];    /* words of block - 1 */
    uint32_t used;      /* words of buf already handed out, 4 = none left */
};

/*
 * Starts the stream for one sample: index is its dataset index and must be
 * below RNG_INDEX_RESERVED (asserted).  Two streams started with the same
 * arguments give the same draws.
 */
void rng_stream_init(struct rng_stream *st, uint64_t seed, uint32_t epoch,
                     uint64_t index);

/* The next 32 random bits. */
uint32_t rng_u32(struct rng_stream *st);

/* The next 64 random bits: (first word << 32) | second word. */
uint64_t rng_u64(struct rng_stream *st);

/* A double uniform on [0, 1): the top 53 bits of rng_u64() times 2^-53. */
double rng_uniform(struct rng_stream *st);

/*
 * A double uniform on [lo, hi): lo + (hi - lo) * rng_uniform().  Where
 * rounding would give exactly hi, returns lo instead, so the result is
 * always in [lo, hi).  Returns lo when hi <= lo (or either is NaN); still
 * consumes one draw so later draws do not shift.
 */
double rng_uniform_range(struct rng_stream *st, double lo, double hi);

/*
 * True with probability p: rng_uniform() < p.  p <= 0 (or NaN) is never
 * true, p >= 1 always; one draw is consumed either way.
 */
bool rng_bernoulli(struct rng_stream *st, double p);

/*
 * An integer uniform on [0, n) without modulo bias (Lemire's multiply-shift
 * with rejection; rejects with probability below n / 2^32, so it usually
 * takes one draw).  Returns 0 when n is 0, taking one draw.
 */
uint32_t rng_below(struct rng_stream *st, uint32_t n);

#endif
