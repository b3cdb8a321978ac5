/*
 * codec.c - the codec table: "none" copies, "zstd" runs one-shot zstd.
 *
 * Each codec is a row of function pointers; adding one is adding a row (and
 * a new id in codec.h).  The zstd decoder decodes straight into the
 * caller's buffer, whose size comes from the shard index: a frame that
 * declares another content size, or yields fewer bytes, is an error.  zstd
 * verifies each frame's content checksum itself.
 */
#include "codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

struct codec_dctx {
    ZSTD_DCtx *zd;
};

struct codec_cctx {
    ZSTD_CCtx *zc;
    ZSTD_CDict *cdict;
};

struct codec_def {
    const char *name;
    size_t (*bound)(size_t len);
    long (*encode)(struct codec_cctx *ctx, const void *src, size_t len,
                   void *dst, size_t cap, const char **why);
    int (*decode)(struct codec_dctx *ctx, const ZSTD_DDict *ddict,
                  const void *src, size_t src_len, void *dst, size_t dst_len,
                  const char **why);
};

static size_t none_bound(size_t len)
{
    return len;
}

static long none_encode(struct codec_cctx *ctx, const void *src, size_t len,
                        void *dst, size_t cap, const char **why)
{
    (void)ctx;
    if (len > cap) {
        *why = "output buffer too small";
        return -ENOBUFS;
    }
    memmove(dst, src, len);
    return (long)len;
}

static int none_decode(struct codec_dctx *ctx, const ZSTD_DDict *ddict,
                       const void *src, size_t src_len, void *dst,
                       size_t dst_len, const char **why)
{
    (void)ctx;
    (void)ddict;
    if (src_len != dst_len) {
        *why = "stored and decoded lengths differ for codec none";
        return -EBADMSG;
    }
    if (dst != src)
        memmove(dst, src, dst_len);
    return 0;
}

static size_t zstd_bound(size_t len)
{
    return ZSTD_compressBound(len);
}

static long zstd_encode(struct codec_cctx *ctx, const void *src, size_t len,
                        void *dst, size_t cap, const char **why)
{
    size_t n = ZSTD_compress2(ctx->zc, dst, cap, src, len);

    if (ZSTD_isError(n)) {
        *why = ZSTD_getErrorName(n);
        return -EIO;
    }
    return (long)n;
}

static int zstd_decode(struct codec_dctx *ctx, const ZSTD_DDict *ddict,
                       const void *src, size_t src_len, void *dst,
                       size_t dst_len, const char **why)
{
    size_t n;

    if (!ctx || !ctx->zd) {
        *why = "no zstd decoding context";
        return -EINVAL;
    }
    if (ddict)
        n = ZSTD_decompress_usingDDict(ctx->zd, dst, dst_len, src, src_len,
                                       ddict);
    else
        n = ZSTD_decompressDCtx(ctx->zd, dst, dst_len, src, src_len);
    if (ZSTD_isError(n)) {
        *why = ZSTD_getErrorName(n);
        return -EBADMSG;
    }
    if (n != dst_len) {
        *why = "zstd frames hold fewer bytes than the index's decoded length";
        return -EBADMSG;
    }
    return 0;
}

static const struct codec_def codecs[DATASET_CODEC_COUNT] = {
    [DATASET_CODEC_NONE] = {"none", none_bound, none_encode, none_decode},
    [DATASET_CODEC_ZSTD] = {"zstd", zstd_bound, zstd_encode, zstd_decode},
};

const char *codec_name(unsigned id)
{
    return id < DATASET_CODEC_COUNT ? codecs[id].name : NULL;
}

int codec_parse(const char *s, size_t n)
{
    for (unsigned id = 0; id < DATASET_CODEC_COUNT; id++)
        if (strlen(codecs[id].name) == n && memcmp(codecs[id].name, s, n) == 0)
            return (int)id;
    return -EINVAL;
}

struct codec_dctx *codec_dctx_new(void)
{
    struct codec_dctx *ctx = calloc(1, sizeof(*ctx));

    if (!ctx)
        return NULL;
    ctx->zd = ZSTD_createDCtx();
    if (!ctx->zd) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

void codec_dctx_free(struct codec_dctx *ctx)
{
    if (!ctx)
        return;
    ZSTD_freeDCtx(ctx->zd);
    free(ctx);
}

int codec_decode(unsigned id, struct codec_dctx *ctx,
                 const struct ZSTD_DDict_s *ddict,
                 const void *src, size_t src_len, void *dst, size_t dst_len,
                 const char **why)
{
    if (id >= DATASET_CODEC_COUNT) {
        *why = "unknown codec";
        return -EBADMSG;
    }
    return codecs[id].decode(ctx, ddict, src, src_len, dst, dst_len, why);
}

struct codec_cctx *codec_cctx_new(int level, const void *dict,
                                  size_t dict_len, const char **why)
{
    struct codec_cctx *ctx = calloc(1, sizeof(*ctx));
    size_t r;

    if (!ctx)
        goto fail_nomem;
    ctx->zc = ZSTD_createCCtx();
    if (!ctx->zc)
        goto fail_free;
    r = ZSTD_CCtx_setParameter(ctx->zc, ZSTD_c_compressionLevel, level);
    if (!ZSTD_isError(r))
        r = ZSTD_CCtx_setParameter(ctx->zc, ZSTD_c_checksumFlag, 1);
    if (!ZSTD_isError(r))
        r = ZSTD_CCtx_setParameter(ctx->zc, ZSTD_c_contentSizeFlag, 1);
    if (ZSTD_isError(r)) {
        *why = ZSTD_getErrorName(r);
        goto fail_cctx;
    }
    if (dict) {
        ctx->cdict = ZSTD_createCDict(dict, dict_len, level);
        if (!ctx->cdict) {
            *why = "zstd could not load the dictionary";
            goto fail_cctx;
        }
        r = ZSTD_CCtx_refCDict(ctx->zc, ctx->cdict);
        if (ZSTD_isError(r)) {
            *why = ZSTD_getErrorName(r);
            goto fail_cdict;
        }
    }
    return ctx;

fail_cdict:
    ZSTD_freeCDict(ctx->cdict);
fail_cctx:
    ZSTD_freeCCtx(ctx->zc);
    free(ctx);
    return NULL;
fail_free:
    free(ctx);
fail_nomem:
    *why = "out of memory";
    return NULL;
}

void codec_cctx_free(struct codec_cctx *ctx)
{
    if (!ctx)
        return;
    ZSTD_freeCCtx(ctx->zc);
    ZSTD_freeCDict(ctx->cdict);
    free(ctx);
}

size_t codec_bound(unsigned id, size_t len)
{
    return id < DATASET_CODEC_COUNT ? codecs[id].bound(len) : 0;
}

long codec_encode(unsigned id, struct codec_cctx *ctx, const void *src,
                  size_t len, void *dst, size_t cap, const char **why)
{
    if (id >= DATASET_CODEC_COUNT) {
        *why = "unknown codec";
        return -EINVAL;
    }
    return codecs[id].encode(ctx, src, len, dst, cap, why);
}
