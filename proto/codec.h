/*
 * codec.h - how a record's stored bytes become its decoded bytes.
 *
 * A codec id is written in every shard index entry, so the numbers below
 * never change meaning; new codecs take new numbers.  A shard's header keeps
 * a mask (1 << id) of the codecs its records may use.
 *
 *   id  name   stored bytes
 *   0   none   the decoded bytes themselves
 *   1   zstd   one or more zstd frames, written with content checksums and,
 *              when the dataset has one, the dataset's dictionary
 *
 * Decoding is one-shot into a buffer of exactly the length the index gives
 * (never a size a frame declares), and succeeds only when exactly that many
 * bytes come out.  The contexts below are not shared between threads; a
 * dictionary (ZSTD_DDict) is read-only and may be shared.
 */
#ifndef RINGFEED_PROTO_CODEC_H
#define RINGFEED_PROTO_CODEC_H

#include <stddef.h>
#include <stdint.h>

enum dataset_codec {
    DATASET_CODEC_NONE = 0,
    DATASET_CODEC_ZSTD = 1,
    DATASET_CODEC_COUNT
};

struct ZSTD_DDict_s; /* zstd.h's ZSTD_DDict */

struct codec_dctx; /* decoding state of one thread */
struct codec_cctx; /* encoding state of one writer */

/* "none", "zstd"; NULL for an unknown id. */
const char *codec_name(unsigned id);
/* The codec named by the n bytes at s, or -EINVAL. */
int codec_parse(const char *s, size_t n);

/* A new decoding context, or NULL when out of memory.  Free accepts NULL. */
struct codec_dctx *codec_dctx_new(void);
void codec_dctx_free(struct codec_dctx *ctx);

/*
 * Decodes src_len bytes at src with codec id into exactly dst_len bytes at
 * dst.  ddict is the dataset's dictionary or NULL.  Returns 0, or a negative
 * errno with *why pointing at a static reason ("zstd: Corrupted block
 * detected", "decoded 10 bytes, expected 784").  Never writes past
 * dst + dst_len and allocates nothing.
 */
int codec_decode(unsigned id, struct codec_dctx *ctx,
                 const struct ZSTD_DDict_s *ddict,
                 const void *src, size_t src_len, void *dst, size_t dst_len,
                 const char **why);

/*
 * A new encoding context at zstd level (ignored by "none"), with the dict
 * bytes (a trained zstd dictionary, copied) or NULL.  NULL on failure with
 * *why set.  Free accepts NULL.
 */
struct codec_cctx *codec_cctx_new(int level, const void *dict,
                                  size_t dict_len, const char **why);
void codec_cctx_free(struct codec_cctx *ctx);

/* The largest output codec_encode can produce from len input bytes. */
size_t codec_bound(unsigned id, size_t len);

/*
 * Encodes len bytes at src into dst (capacity cap >= codec_bound()).
 * Returns the encoded length, or a negative errno with *why set.
 */
long codec_encode(unsigned id, struct codec_cctx *ctx, const void *src,
                  size_t len, void *dst, size_t cap, const char **why);

#endif
