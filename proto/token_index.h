/*
 * token_index.h - where each token of a token dataset lies: the prefix
 * sums of its documents' token counts, so window i of a `tokens` stream
 * (tokens i*L .. i*L+L of the concatenated stream) maps to its first
 * document and offset by one binary search (docs/design/tokens.md).
 *
 * A token dataset is a kind-fields pack whose schema is exactly one ragged
 * field of one column of u16 or i32 (tokidx_check), every record stored
 * raw (codec none): a record is the schema's 4-byte length, then the
 * document's tokens, little-endian, so token k of document d lies at byte
 * loc.offset + 4 + k * value_bytes of its shard.
 *
 *   start[d]      first token of document d (start[0] = 0)
 *   start[docs]   T, every token
 *
 * Built once per dataset open, from the shard indexes alone (no record is
 * read): 8 bytes a document.  The main process and each worker build
 * their own from their own open of the dataset.
 */
#ifndef RINGFEED_PROTO_TOKEN_INDEX_H
#define RINGFEED_PROTO_TOKEN_INDEX_H

#include <stdint.h>

#include "dataset.h"
#include "err.h"

#define TOKIDX_CONTEXT_MAX 65536u

struct tok_index {
    uint64_t docs;
    uint64_t *start;             /* docs + 1 entries; owned */
    uint32_t value_bytes;        /* 2 (u16) or 4 (i32) */
    enum dataset_dtype dtype;
};

/*
 * Whether the dataset described by info is a token dataset: kind fields,
 * one ragged field of one column of u16 or i32.  Returns 0, or -EINVAL
 * with err naming the field (or the kind) and why not.
 */
int tokidx_check(const struct dataset_info *info, struct rf_err *err);

/*
 * Builds *ti for ds (tokidx_check first, then every record's index
 * entry: codec none, a length of 4 + a whole number of values).  Returns
 * 0; -EINVAL (not a token dataset), -EBADMSG (a compressed or misshapen
 * record, err naming the shard and record), -ENOMEM, or the index's
 * error.  ti is zeroed on failure; free with tokidx_free.
 */
int tokidx_build(const struct dataset *ds, struct tok_index *ti, struct rf_err *err);

/* Frees ti's sums and zeroes it; accepts a zeroed ti. */
void tokidx_free(struct tok_index *ti);

/* Every token: start[docs]. */
uint64_t tokidx_tokens(const struct tok_index *ti);

/* Windows of context+1 tokens at a stride of context: floor((T-1)/L),
 * 0 when T < 2.  context >= 1. */
uint64_t tokidx_windows(const struct tok_index *ti, uint32_t context);

/* The document holding token t (t < T): the last d with start[d] <= t
 * (empty documents are passed over). */
uint64_t tokidx_doc(const struct tok_index *ti, uint64_t t);

#endif
