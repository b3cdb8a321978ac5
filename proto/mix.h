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

#include <stddef.h>
#include <stdint.h>

#include "err.h"

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
 * Parses "NAME:WEIGHT NAME:WEIGHT ..." (blanks between entries; a weight
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

#endif
