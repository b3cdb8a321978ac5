/*
 * megatron_idx.h - the index file (.idx) of a Megatron-LM indexed dataset
 * (a .bin/.idx pair, the MMapIndexedDataset layout), read strictly from a
 * buffer: a pure function that ringfeed-pack tokens and its fuzz target
 * share.
 *
 *   byte 0      magic "MMIDIDX\x00\x00" (9 bytes)
 *   byte 9      version, u64 LE, 1
 *   byte 17     dtype code, u8: 1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 6 f64,
 *               7 f32, 8 u16 (Megatron-core's DType; older fairseq-era
 *               writers gave 6 and 7 both to float64: no float is a token)
 *   byte 18     sequence count S, u64 LE
 *   byte 26     document count D, u64 LE (entries of doc_idx: documents + 1)
 *   byte 34     sizes     int32[S]  tokens in each sequence
 *               pointers  int64[S]  byte offset of each sequence in .bin
 *               doc_idx   int64[D]  the first sequence of each document,
 *                                   0 first and S last
 *   then        nothing (a multimodal index's sequence modes are refused)
 *
 * A document of the pack is the sequences doc_idx[d] .. doc_idx[d+1] - 1,
 * one after another.  Offsets, never pointers into buf, are kept.
 */
#ifndef RINGFEED_TOOLS_MEGATRON_IDX_H
#define RINGFEED_TOOLS_MEGATRON_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "dataset_types.h"
#include "err.h"

#define MEGATRON_IDX_HEADER 34u

struct megatron_idx {
    uint8_t code;                  /* the dtype code as stored */
    enum dataset_dtype dtype;      /* the code's dtype (u8 .. f64, u16) */
    uint32_t itemsize;             /* bytes per token in .bin */
    int is_integer;                /* 0 for the float codes */
    uint64_t sequences;            /* S */
    uint64_t doc_entries;          /* D: documents + 1 */
    uint64_t sizes_off;            /* where each array starts in the file */
    uint64_t pointers_off;
    uint64_t doc_idx_off;
};

/*
 * Reads the header and places the arrays of the len bytes at buf (the
 * whole .idx file).  Returns 0; -EBADMSG with err saying what and at which
 * byte (magic, version, code, counts past the file, bytes after the
 * arrays).
 */
int megatron_idx_parse(const uint8_t *buf, size_t len, struct megatron_idx *h,
                       struct rf_err *err);

/* Sequence i's size, pointer and doc_idx entry d, read little-endian from
 * buf (which megatron_idx_parse accepted with h; i < S, d < D). */
int32_t megatron_idx_size(const uint8_t *buf, const struct megatron_idx *h, uint64_t i);
int64_t megatron_idx_pointer(const uint8_t *buf, const struct megatron_idx *h, uint64_t i);
int64_t megatron_idx_doc(const uint8_t *buf, const struct megatron_idx *h, uint64_t d);

/*
 * Checks the arrays against a .bin file of bin_size bytes: every size
 * non-negative, every sequence (pointer, size * itemsize) inside the
 * file, doc_idx starting at 0, never decreasing, ending at S.  Returns 0,
 * or -EBADMSG with err naming the sequence or document entry.
 */
int megatron_idx_check(const uint8_t *buf, const struct megatron_idx *h, uint64_t bin_size,
                       struct rf_err *err);

#endif
