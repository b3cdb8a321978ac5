/*
 * token_index.c - the documents' token prefix sums of a token dataset
 * (token_index.h).
 */
#include "token_index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"

int tokidx_check(const struct dataset_info *info, struct rf_err *err)
{
    const struct schema_field *f = &info->schema.f[0];

    if (info->kind != DATASET_FIELDS)
        return rf_err_set(err, -EINVAL, "a token dataset is kind fields with one ragged "
                          "integer field (ringfeed-pack tokens); this one is kind %s",
                          dataset_kind_name(info->kind));
    if (info->schema.n != 1)
        return rf_err_set(err, -EINVAL, "a token dataset has exactly one field (a ragged u16 "
                          "or i32 field of documents); this one has %u", info->schema.n);
    if (f->kind != SCHEMA_RAGGED || f->ndim != 0 || f->role != SCHEMA_ROLE_NONE)
        return rf_err_set(err, -EINVAL, "field %s is %s%s: a token dataset's field is ragged, "
                          "one value a row", f->name, schema_kind_name(f->kind),
                          f->kind == SCHEMA_RAGGED ? " with rows of several values" : "");
    if (f->dtype != DATASET_DTYPE_U16 && f->dtype != DATASET_DTYPE_I32)
        return rf_err_set(err, -EINVAL, "field %s holds %s: token ids are u16 or i32", f->name,
                          dataset_dtype_name(f->dtype));
    return 0;
}

void tokidx_free(struct tok_index *ti)
{
    if (!ti)
        return;
    free(ti->start);
    memset(ti, 0, sizeof(*ti));
}

int tokidx_build(const struct dataset *ds, struct tok_index *ti, struct rf_err *err)
{
    const struct dataset_info *info = dataset_info(ds);
    uint64_t at = 0;
    int rc;

    memset(ti, 0, sizeof(*ti));
    rc = tokidx_check(info, err);
    if (rc < 0)
        return rc;
    ti->dtype = info->schema.f[0].dtype;
    ti->value_bytes = (uint32_t)dataset_dtype_size(ti->dtype);
    ti->docs = info->samples;
    ti->start = malloc((size_t)(ti->docs + 1) * sizeof(*ti->start));
    if (!ti->start) {
        memset(ti, 0, sizeof(*ti));
        return rf_err_set(err, -ENOMEM, "no memory for the token index of %llu documents",
                          (unsigned long long)info->samples);
    }
    for (uint64_t d = 0; d < ti->docs; d++) {
        struct dataset_loc loc;

        ti->start[d] = at;
        rc = dataset_locate(ds, d, &loc, err);
        if (rc < 0)
            goto fail;
        if (loc.codec != DATASET_CODEC_NONE || loc.stored_len != loc.decoded_len) {
            rc = rf_err_set(err, -EBADMSG, "%s: record %llu is stored %s: the tokens transform "
                            "reads documents in place, so they are stored raw (ringfeed-pack "
                            "tokens, or Writer(..., raw_codec=\"none\"))", loc.shard_path,
                            (unsigned long long)loc.record, codec_name(loc.codec));
            goto fail;
        }
        if (loc.stored_len < 4 || (loc.stored_len - 4) % ti->value_bytes) {
            rc = rf_err_set(err, -EBADMSG, "%s: record %llu is %u bytes, not a 4-byte length "
                            "and whole %u-byte tokens", loc.shard_path,
                            (unsigned long long)loc.record, loc.stored_len, ti->value_bytes);
            goto fail;
        }
        at += (loc.stored_len - 4) / ti->value_bytes;
    }
    ti->start[ti->docs] = at;
    return 0;
fail:
    tokidx_free(ti);
    return rc;
}

uint64_t tokidx_tokens(const struct tok_index *ti)
{
    return ti->start ? ti->start[ti->docs] : 0;
}

uint64_t tokidx_windows(const struct tok_index *ti, uint32_t context)
{
    uint64_t t = tokidx_tokens(ti);

    return t < 2 ? 0 : (t - 1) / context;
}

uint64_t tokidx_doc(const struct tok_index *ti, uint64_t t)
{
    uint64_t lo = 0, hi = ti->docs; /* start[lo] <= t < start[hi] */

    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;

        if (ti->start[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}
