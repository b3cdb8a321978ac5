/*
 * window.c - transform `tokens`' geometry and the worker's read plan of
 * one window (window.h).
 */
#include "window.h"

#include <errno.h>
#include <string.h>

#include "ring.h"

int window_geometry(const struct dataset *ds, const struct wire_xform *p,
                    struct xform_out *out, struct rf_err *err)
{
    const struct dataset_info *info = dataset_info(ds);
    const struct schema_field *f = &info->schema.f[0];
    int rc = tokidx_check(info, err);

    if (rc < 0) {
        rf_err_prefix(err, "transform tokens");
        return rc;
    }
    if (p->context < 1 || p->context > TOKIDX_CONTEXT_MAX)
        return rf_err_set(err, -EINVAL, "transform tokens needs context=L, each sample the "
                          "L+1 tokens from token i*L (L in 1..%u)", TOKIDX_CONTEXT_MAX);
    if (p->doc_ids && strcmp(f->name, "doc_ids") == 0)
        return rf_err_set(err, -EINVAL, "doc_ids=1 adds a field named doc_ids, and the "
                          "dataset's token field has that name: leave doc_ids= out");
    out->shape[0] = p->context + 1;
    out->shape[1] = out->shape[2] = 1;
    out->layout = RING_FLAT;
    out->dtype = dataset_dtype_ring(f->dtype);
    out->sample_bytes = (uint64_t)(p->context + 1) * dataset_dtype_size(f->dtype);
    return 0;
}

int window_plan(const struct dataset *ds, const struct tok_index *ti, uint32_t context,
                uint64_t w, uint8_t *dst, uint8_t *doc_ids, struct io_req *reqs, uint32_t *n,
                uint32_t cap, struct rf_err *err)
{
    uint64_t t = w * context, left = (uint64_t)context + 1, d = tokidx_doc(ti, t);
    uint32_t at = *n;
    int32_t rel = 0;
    uint8_t *out = dst;

    while (left > 0) {
        struct dataset_loc loc;
        uint64_t take;
        int rc;

        /* past empty documents (tokidx_doc lands on a non-empty one; the
         * next ones may be empty) */
        while (d < ti->docs && ti->start[d + 1] <= t)
            d++;
        if (d >= ti->docs)
            return rf_err_set(err, -ERANGE, "window %llu passes the dataset's %llu tokens",
                              (unsigned long long)w, (unsigned long long)tokidx_tokens(ti));
        if (at == cap)
            return -ENOSPC;
        rc = dataset_locate(ds, d, &loc, err);
        if (rc < 0)
            return rc;
        take = ti->start[d + 1] - t;
        if (take > left)
            take = left;
        reqs[at++] = (struct io_req){
            .fd = loc.fd,
            .off = loc.offset + 4 + (t - ti->start[d]) * ti->value_bytes,
            .len = (uint32_t)(take * ti->value_bytes),
            .buf = out,
        };
        if (doc_ids) {
            uint8_t v[4] = {(uint8_t)rel, (uint8_t)(rel >> 8), (uint8_t)(rel >> 16),
                            (uint8_t)(rel >> 24)};

            for (uint64_t k = 0; k < take; k++, doc_ids += 4)
                memcpy(doc_ids, v, 4);
        }
        out += take * ti->value_bytes;
        t += take;
        left -= take;
        rel++;
        d++;
    }
    *n = at;
    return 0;
}
