/*
 * sampler.h - which dataset samples make up batch `seq` of an epoch for one
 * rank: the epoch's shuffle and the split across ranks, as pure functions.
 *
 * Batch seq of epoch e for rank r of w is a function of (n, seed, e, r, w,
 * seq, batch size, flags) and nothing else: no table, no state carried from
 * earlier batches, O(1) memory at any dataset size.  Any process (the
 * daemon's scheduler, a worker, a client resuming from (epoch, seq), a test)
 * computes the same answer (docs/design/determinism.md).
 *
 * Three steps, each its own function of the one before:
 *
 * 1. The epoch order.  order = a permutation of [0, n) keyed by (seed,
 *    epoch), evaluated at one position at a time (sampler_order_at), of
 *    one of three kinds (enum sampler_shuffle, ATTACH shuffle=0|1|block):
 *
 *      off     the identity (evaluation runs);
 *      global  one keyed permutation of [0, n) (sampler_perm_at): the best
 *              mixing, and consecutive positions anywhere in the dataset;
 *      block   the indices cut into blocks of `block` consecutive ones
 *              (the last block takes the remainder, so it is longer, up
 *              to 2 * block - 1), the blocks in a keyed order, each
 *              block's indices in its own keyed order, each block's
 *              positions one run: every window of W consecutive positions
 *              touches at most ceil(W / block) + 1 blocks, so a cache of a
 *              few blocks' shards serves a whole stretch of the epoch.
 *
 *    The constructions and why each is a bijection are in sampler.c.
 *
 * 2. The rank split, as PyTorch's DistributedSampler does it.  Positions of
 *    the epoch order are numbered p = 0, 1, ... and rank r takes positions
 *    r, r + w, r + 2w, ...:
 *
 *      drop_last = 0:  total = ceil(n / w) * w positions.  Position p holds
 *                      perm[p mod n]: the order is padded by wrapping around
 *                      to its start (more than once when w > n).
 *      drop_last = 1:  total = floor(n / w) * w positions (needs n >= w);
 *                      perm[total .. n) is dropped this epoch.
 *
 *      per_rank = total / w, the same for every rank.
 *
 *    THE PADDING RULE.  A slot is padding exactly when its position
 *    p = r + k * w (k = the slot's rank-local number) is >= n; it then
 *    repeats perm[p mod n].  Padding exists only with drop_last = 0; it is
 *    total - n < w slots in all, at most one per rank, always that rank's
 *    last sample (k = per_rank - 1), and it falls on ranks r >= n - (per_rank
 *    - 1) * w.  So across all ranks an epoch delivers, with drop_last = 0,
 *    every index exactly once plus the padding perm[p mod n] for p in
 *    [n, total) (that is perm[0 .. total - n) once more when w <= n); with
 *    drop_last = 1, every index of perm[0 .. total) exactly once and nothing
 *    else (n - total < w indices sit out the epoch).
 *
 * 3. Batches.  The rank's per_rank samples, in order k = 0, 1, ..., are cut
 *    into batches of `batch`: batch seq holds k = seq * batch + j for
 *    j < sampler_batch_count(seq).  There are ceil(per_rank / batch) batches
 *    and the last may be partial; with drop_last_batch the partial one is
 *    dropped, leaving floor(per_rank / batch) batches (possibly none).  Every
 *    rank has the same number of batches, so collective ops in the training
 *    loop never wait on a rank that ran out.
 *
 * The shuffled order differs from torch.randperm's: the split and the
 * padding follow DistributedSampler, the permutation itself is ours.
 */
#ifndef RINGFEED_PROTO_SAMPLER_H
#define RINGFEED_PROTO_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct mix_plan;

/* The kinds of epoch order; the values are ATTACH's shuffle= words' order
 * (0, 1, block: ctl_attach.c) and WIRE_RING_ADD's shuffle byte. */
enum sampler_shuffle {
    SAMPLER_SHUFFLE_OFF = 0,    /* the identity */
    SAMPLER_SHUFFLE_GLOBAL = 1, /* one permutation of [0, n) */
    SAMPLER_SHUFFLE_BLOCK = 2,  /* blocks of consecutive indices (sampler.c) */
    SAMPLER_SHUFFLE_COUNT
};

/* shuffle=block's default block: this many of the dataset's shards
 * (sampler_block_default). */
#define SAMPLER_BLOCK_SHARDS 4

/* Largest dataset a sampler takes (2^62 samples; keeps every sum in range). */
#define SAMPLER_MAX_N ((uint64_t)1 << 62)
/* Feistel rounds of the permutation (Luby-Rackoff needs 4; 6 for margin). */
#define SAMPLER_ROUNDS 6
/* What sampler_sample and sampler_perm_at return for a slot that is not there. */
#define SAMPLER_NONE UINT64_MAX

/* The epoch's permutation of [0, n).  Plain data, no free. */
struct sampler_perm {
    uint64_t n;
    uint32_t half_bits;     /* h: the Feistel works on 2h-bit numbers; 0 = identity */
    uint32_t pad_;
    uint64_t keys[SAMPLER_ROUNDS];
};

/*
 * Sets up the permutation for (seed, epoch) over n elements.  shuffle false,
 * n <= 1 give the identity.  n must be at most SAMPLER_MAX_N (asserted).
 */
void sampler_perm_init(struct sampler_perm *pm, uint64_t n, uint64_t seed,
                       uint32_t epoch, bool shuffle);
/* The same permutation construction under the round keys of another
 * reserved RNG stream, key_index (rng.h): sampler_perm_init is this with
 * RNG_INDEX_SAMPLER_KEYS; the validation split (subset.h) uses
 * RNG_INDEX_SPLIT_KEYS, so a split never repeats an epoch's order. */
void sampler_perm_init_keyed(struct sampler_perm *pm, uint64_t n, uint64_t seed,
                             uint32_t epoch, uint64_t key_index, bool shuffle);

/* perm[i] for i < n; SAMPLER_NONE when i >= n.  Pure, O(1) expected. */
uint64_t sampler_perm_at(const struct sampler_perm *pm, uint64_t i);

/*
 * The Feistel network under the permutation, exposed for tests of its cost
 * and bijectivity: a bijection of [0, sampler_perm_domain(pm)).  The domain
 * is 4^h, the smallest power of 4 (>= 4) at or above n; 0 for the identity.
 */
uint64_t sampler_perm_domain(const struct sampler_perm *pm);
uint64_t sampler_perm_feistel(const struct sampler_perm *pm, uint64_t x);

/* y's preimage: the i < n with sampler_perm_at(pm, i) == y; SAMPLER_NONE
 * when y >= n.  Pure, O(1) expected (walks the Feistel backwards). */
uint64_t sampler_perm_index(const struct sampler_perm *pm, uint64_t y);

/* The epoch's order of any kind.  Plain data, no free. */
struct sampler_order {
    struct sampler_perm perm; /* global: of [0, n); block: of the blocks */
    uint64_t n;
    uint64_t seed;
    uint64_t block;           /* block: samples per block (K); else 0 */
    uint64_t blocks;          /* block: m = max(1, floor(n / K)); else 0 */
    uint64_t long_run;        /* block: the run holding block m - 1 */
    uint32_t epoch;
    uint32_t mode;            /* enum sampler_shuffle */
};

/*
 * Sets up the order of kind mode for (seed, epoch) over n elements; block
 * is K for SAMPLER_SHUFFLE_BLOCK and ignored otherwise.  n at most
 * SAMPLER_MAX_N, mode below SAMPLER_SHUFFLE_COUNT, K >= 1 in block mode
 * (asserted: sampler_init checks them for callers with untrusted values).
 * Global is sampler_perm_init's permutation exactly.
 */
void sampler_order_init(struct sampler_order *o, uint64_t n, uint64_t seed, uint32_t epoch,
                        uint32_t mode, uint64_t block);

/* order[pos] for pos < n; SAMPLER_NONE when pos >= n.  Pure, O(1) expected. */
uint64_t sampler_order_at(const struct sampler_order *o, uint64_t pos);

/* Block mode: the block dataset position i lies in, min(i / K, m - 1);
 * SAMPLER_NONE when i >= n or the order is not block mode. */
uint64_t sampler_order_block_of(const struct sampler_order *o, uint64_t i);

/*
 * shuffle=block's default K for a stream of n samples drawn from a dataset
 * of `samples` whose largest shard holds shard_records: the samples of
 * `shards` shards (SAMPLER_BLOCK_SHARDS, or fewer where the node cache of a
 * remote dataset holds few: daemon/ahead.h), scaled by n / samples for a
 * subset (a subset's positions are its own), rounded up, at least 1.  Over
 * a whole dataset whose shards hold shard_records each (the last maybe
 * fewer), every block starts on a shard boundary.
 */
uint64_t sampler_block_default(uint32_t shards, uint64_t shard_records, uint64_t n,
                               uint64_t samples);

struct sampler_params {
    uint64_t n;             /* dataset size: 1 .. SAMPLER_MAX_N */
    uint64_t seed;
    uint32_t epoch;
    uint32_t rank;          /* < world */
    uint32_t world;         /* >= 1 */
    uint32_t batch;         /* samples per batch, >= 1 */
    uint32_t shuffle;       /* enum sampler_shuffle; 0: identity order */
    uint64_t block;         /* SAMPLER_SHUFFLE_BLOCK: samples per block,
                               1..SAMPLER_MAX_N; 0 with the other kinds */
    bool drop_last;         /* drop the tail instead of padding; n >= world */
    bool drop_last_batch;   /* drop each rank's final partial batch */
    const struct mix_plan *mix; /* a mixture stream (mix.h): when set, the
                               batches are the plan's for this epoch and
                               every other field but epoch is ignored; the
                               plan outlives the sampler */
};

/* Everything a lookup needs, about 150 bytes whatever n is. */
struct sampler {
    struct sampler_order order;
    uint64_t n;
    uint64_t total;         /* positions over all ranks */
    uint64_t per_rank;      /* samples this rank gets (= every rank's) */
    uint64_t batches;       /* batches this rank gets (= every rank's) */
    uint32_t rank;
    uint32_t world;
    uint32_t batch;
    uint32_t pad_;
    const struct mix_plan *mix; /* sampler_params.mix; epoch: order.epoch */
};

/*
 * Validates p and fills s.  Returns 0, or -EINVAL with a message in err
 * (when err is not NULL) naming the parameter: n outside 1..SAMPLER_MAX_N,
 * world 0, rank >= world, batch 0, drop_last with n < world, shuffle not
 * an enum sampler_shuffle, a block size outside 1..SAMPLER_MAX_N in block
 * mode, or one given (not 0) with another kind.  s is
 * untouched on error.  s holds no resources.
 */
int sampler_init(struct sampler *s, const struct sampler_params *p,
                 struct rf_err *err);

/* Samples per rank in this epoch (padding included), the same for all ranks. */
uint64_t sampler_samples_per_rank(const struct sampler *s);

/* Batches per rank in this epoch, the same for all ranks. */
uint64_t sampler_batches(const struct sampler *s);

/* Samples in batch seq: batch, less for a final partial one, 0 past the end. */
uint32_t sampler_batch_count(const struct sampler *s, uint64_t seq);

/*
 * The dataset index of sample j of batch seq, O(1) expected (a few Feistel
 * evaluations); SAMPLER_NONE when seq or j is out of range.
 */
uint64_t sampler_sample(const struct sampler *s, uint64_t seq, uint32_t j);

/*
 * The position of sample j of batch seq in the epoch's padded order (step 2
 * above): rank + (seq * batch + j) * world.  Positions >= n are the
 * padding, which repeats position p mod n.  SAMPLER_NONE when seq or j is
 * out of range.  Substitutes for a bad sample are searched from here.
 */
uint64_t sampler_position(const struct sampler *s, uint64_t seq, uint32_t j);

/*
 * Whether sample j of batch seq is wrap-around padding (the padding rule
 * above: its position is >= n).  False when out of range.
 */
bool sampler_is_padding(const struct sampler *s, uint64_t seq, uint32_t j);

/*
 * Fills out[0 .. count) with batch seq's dataset indices, where count =
 * sampler_batch_count(s, seq), and returns count (0 past the end; out is not
 * written then).  out must have room for the batch size.
 */
uint32_t sampler_batch(const struct sampler *s, uint64_t seq, uint64_t *out);
/*
 * Samples first .. first + count - 1 of batch seq (cut to the batch) into
 * out, as sampler_sample gives them one by one, but with block mode's
 * permutation of a block set up once for its run rather than per sample
 * (a worker's job is such a slice).  Returns how many were written.
 */
uint32_t sampler_batch_range(const struct sampler *s, uint64_t seq, uint32_t first,
                             uint32_t count, uint64_t *out);

#endif
