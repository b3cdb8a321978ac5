/*
 * mix.h - a weighted mixture of datasets: the text that names it
 * ("a:0.7 b:0.3") and the blended index that says, position by position,
 * which source the next sample comes from.  Pure functions, no I/O: the
 * daemon's mixture streams and their tests share them.
 *
 * THE RULE (Megatron's blended index): position p (0, 1, 2, ...) goes to
 * the source furthest below its share, the s with the largest
 * share_s * (p + 1) - c_s(p) * MIX_ONE, ties to the lowest s, where c_s(p) counts the
 * positions before p given to s.  So every prefix of the stream is within
 * one sample of the weights: |c_s(p) - w_s * p| <= 1 for every s and p
 * (tests/test_mix.c checks it over 10,000 positions for many weight
 * sets), and the order is a pure function of the weights.
 *
 * A mixture's state at position p is (p, c_s(p)): mix_seek computes it
 * from 0 (p * S steps: 3 sources at 10^8 positions is some 0.3 s), so a
 * resume needs no replay of samples, only of this counter walk.
 */
#ifndef RINGFEED_PROTO_MIX_H
#define RINGFEED_PROTO_MIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "sampler.h"

#define MIX_SOURCES_MAX 16
#define MIX_NAME_MAX 64                /* a source's name (= CTL_DATASET_NAME_MAX) */

#define MIX_ONE (1ull << 32)            /* the shares' sum */

struct mix_source {
    char name[MIX_NAME_MAX + 1];
    double weight;                     /* as given */
    uint64_t share;                    /* weight / sum of weights, in MIX_ONE parts,
                                          rounded so the shares sum to MIX_ONE:
                                          the rule runs on these, in integers, so
                                          every machine draws the same order */
};

struct mix {
    uint32_t n;
    struct mix_source s[MIX_SOURCES_MAX];
};

/*
 * Parses "NAME:WEIGHT NAME:WEIGHT ..." (blanks or commas between entries; a weight
 * a positive decimal such as 0.7, 3 or 1e-2; names of [A-Za-z0-9._-], each
 * once, 2..MIX_SOURCES_MAX entries) of len bytes into *m, the weights
 * turned into shares.  Returns 0, or -EINVAL with err naming the entry
 * and the byte.
 */
int mix_parse(const char *text, size_t len, struct mix *m, struct rf_err *err);

/* The blended index's state at position p. */
struct mix_state {
    uint64_t p;
    uint64_t c[MIX_SOURCES_MAX];
};

/* *st := position 0. */
void mix_start(const struct mix *m, struct mix_state *st);
/* The source of position st->p, and the state after it (st->p + 1).
 * *k (when not NULL) is that sample's place in its source's own order
 * (c_s before the step). */
uint32_t mix_next(const struct mix *m, struct mix_state *st, uint64_t *k);
/* *st := position p (from 0: p * n steps). */
void mix_seek(const struct mix *m, struct mix_state *st, uint64_t p);

/*
 * A MIXTURE STREAM for one rank (docs/design/mixtures.md).  Source s has
 * n[s] samples (the transform's: records, or windows of tokens); a
 * sample's mixture index is base[s] + its index in s (base[0] = 0, then
 * the sizes in order), so one number names source and sample.
 *
 * Each source is split across ranks and shuffled by its own sampler
 * (sampler.h: n[s], a seed derived from the stream's seed and s, batch 1,
 * the stream's shuffle 0/1, rank, world and drop_last), epoch after epoch:
 * its k-th sample on this rank (k = 0, 1, ... over all its epochs) is
 * sample k % per_rank[s] of its epoch k / per_rank[s].
 *
 * The blend picks, position by position (per_stream: batch by batch, B
 * samples of one source each), the source of the next unit by mix_next,
 * and restarts at every mixture epoch, so the prefix bound holds within
 * an epoch (across a boundary, within 2).  The epoch is `units` positions:
 *   repeat (the default)  until the epoch_of source (the first, unless
 *                         named) has given per_rank of its samples; the
 *                         other sources wrap into their next epochs
 *                         (reshuffled) as often as their weights ask, and
 *                         go on from there in the next mixture epoch;
 *   no repeat             until the first source that runs out of its
 *                         epoch; each mixture epoch e reads epoch e of
 *                         every source from its start.
 * All of it is a pure function of the parameters: any process computes
 * the same batches, and a resume at (epoch, batch) replays nothing.  The
 * blend's counts are kept every MIX_STEP positions of an epoch, so a
 * batch anywhere costs at most MIX_STEP steps to reach.
 */
#define MIX_STEP 1024
#define MIX_WALK_MAX (1ull << 30)   /* steps of source (positions x sources) an
                                       epoch's walk may take: some 1.5 s */

struct mix_plan_params {
    const struct mix *m;
    uint64_t n[MIX_SOURCES_MAX];
    uint64_t seed;
    uint32_t rank, world, batch;
    uint32_t shuffle;               /* 0 or 1 (sampler.h's off, global) */
    int32_t epoch_of;               /* the source whose epoch is the mixture's; -1: 0 */
    bool drop_last;                 /* each source's rank split (sampler.h) */
    bool drop_last_batch;           /* the epoch's last partial batch */
    bool no_repeat;
    bool per_stream;                /* each batch from one source */
};

struct mix_plan {
    struct mix m;
    struct mix_plan_params p;       /* p.m points at m */
    uint64_t seed[MIX_SOURCES_MAX]; /* each source's sampler seed */
    uint64_t per_rank[MIX_SOURCES_MAX]; /* a source epoch's samples on this rank */
    uint64_t base[MIX_SOURCES_MAX + 1]; /* mixture index of each source's sample 0;
                                           base[n]: all of them */
    uint64_t units;                 /* blend positions of an epoch */
    uint64_t unit;                  /* samples a position gives: 1, or batch */
    uint64_t per_epoch[MIX_SOURCES_MAX]; /* samples of s one mixture epoch takes */
    uint64_t advance[MIX_SOURCES_MAX];   /* and how far s's count moves per epoch */
    uint64_t samples;               /* an epoch's samples on this rank */
    uint64_t batches;               /* and its batches */
    uint64_t *cp;                   /* counts at positions 0, MIX_STEP, ...: n each */
    uint64_t ncp, cp_cap;           /* rows kept, and room (in counts) */
};

/*
 * Starts *pl: checks the parameters and sizes each source's share of a
 * rank (cheap).  The epoch is then had one of two ways:
 *   mix_plan_walk   walks the blend through one epoch (units * n steps,
 *                   some 1.5 ns each: 0.1 s for 20 million positions of 3
 *                   sources; the daemon's main process does it off its
 *                   loop), keeping every checkpoint;
 *   mix_plan_adopt  takes units and the counts at its end from a walk
 *                   made elsewhere (a worker, from the main process's
 *                   RING_ADD), keeping only position 0's checkpoint:
 *                   mix_plan_reach extends them as jobs go.
 * 0, or -EINVAL with err naming the parameter (a source with no sample
 * for this rank, epoch_of with no repeat, an epoch of more than
 * MIX_WALK_MAX / n positions, one without a whole batch), -ENOMEM.
 */
int mix_plan_init(struct mix_plan *pl, const struct mix_plan_params *p, struct rf_err *err);
int mix_plan_walk(struct mix_plan *pl, struct rf_err *err);
int mix_plan_adopt(struct mix_plan *pl, uint64_t units, const uint64_t *c, struct rf_err *err);
/* Keeps the checkpoints up to position q of an epoch (a range there then
 * takes at most MIX_STEP steps to start).  0 or -ENOMEM (the range works
 * then, walking from the last one kept). */
int mix_plan_reach(struct mix_plan *pl, uint64_t q);
void mix_plan_free(struct mix_plan *pl);
/* Samples in batch seq of an epoch (batch, less for the last, 0 past it). */
uint32_t mix_plan_batch_count(const struct mix_plan *pl, uint64_t seq);
/*
 * A caller's place in a plan, kept between calls (a worker's, per ring):
 * the blend's state after its last range and the source samplers it set
 * up, so the next range, a little further on in the same epoch, steps from
 * there instead of from a checkpoint.  Zeroed: nothing kept.  Plain data.
 */
struct mix_cursor {
    bool valid;
    uint64_t epoch;
    struct mix_state st;
    bool ready;                           /* smp_epoch[] set (UINT64_MAX: none) */
    uint64_t smp_epoch[MIX_SOURCES_MAX];
    struct sampler smp[MIX_SOURCES_MAX];
};

/*
 * Samples first .. first + count - 1 of batch seq of epoch `epoch` (cut to
 * the batch): each one's mixture index into out[], its source into src[]
 * (may be NULL), and whether it is its source's rank padding (sampler.h's
 * padding rule) into pad[] (may be NULL).  cur (may be NULL) is the
 * caller's cursor, read and updated.  Returns how many were written.
 */
uint32_t mix_plan_range(const struct mix_plan *pl, uint64_t epoch, uint64_t seq, uint32_t first,
                        uint32_t count, uint64_t *out, uint8_t *src, bool *pad,
                        struct mix_cursor *cur);
/* How many samples of each source positions [0, q) of epoch `epoch` and
 * every epoch before it took, into out[n] (q: a sample's place, or with
 * per_stream a batch's; at most units). */
void mix_plan_counts(const struct mix_plan *pl, uint64_t epoch, uint64_t q, uint64_t *out);
/* The source of mixture index i (base[s] <= i < base[s + 1]). */
uint32_t mix_plan_source(const struct mix_plan *pl, uint64_t i);

#endif
