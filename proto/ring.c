/*
 * ring.c - geometry, initialization and validation of the shared-memory
 * ring described in ring.h, and the shared futex calls both sides use.
 */
#include "ring.h"

#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(struct ring_hdr) <= RING_HDR_SIZE, "ring header fits its page");
_Static_assert(offsetof(struct ring_hdr, state) == 256, "daemon words at 256");
_Static_assert(sizeof(struct ring_slot) == 64, "slot header is one cache line");
_Static_assert(sizeof(struct ring_sample) == 16, "sample record is 16 bytes");
_Static_assert(sizeof(struct ring_field) == 128, "a field entry is 128 bytes");
_Static_assert(offsetof(struct ring_hdr, fields) == RING_FIELDS_AT, "field table at 1024");

static uint64_t round_page(uint64_t n)
{
    return (n + RING_PAGE - 1) & ~(uint64_t)(RING_PAGE - 1);
}

int ring_geometry(uint32_t depth, uint32_t batch, uint64_t sample_bytes,
                  struct ring_geom *g, struct rf_err *err)
{
    uint64_t data, meta;

    if (depth < 2 || depth > RING_MAX_DEPTH)
        return rf_err_set(err, -EINVAL, "depth %u is out of range 2..%u", depth,
                          RING_MAX_DEPTH);
    if (batch < 1 || batch > RING_MAX_BATCH)
        return rf_err_set(err, -EINVAL, "batch %u is out of range 1..%u", batch,
                          RING_MAX_BATCH);
    if (sample_bytes < 1 || sample_bytes > (1ull << 32))
        return rf_err_set(err, -EINVAL, "sample size %llu bytes is out of range",
                          (unsigned long long)sample_bytes);
    /* batch <= 2^16 and sample_bytes <= 2^32: the product fits in 2^48 */
    data = round_page((uint64_t)batch * sample_bytes);
    meta = round_page(sizeof(struct ring_slot) + (uint64_t)batch * sizeof(struct ring_sample));
    g->depth = depth;
    g->batch = batch;
    g->sample_bytes = sample_bytes;
    g->meta_size = meta;
    g->slot_stride = meta + data;
    if (g->slot_stride > (UINT64_MAX - RING_HDR_SIZE) / depth)
        return rf_err_set(err, -EOVERFLOW, "ring of %u slots of %llu bytes is too large",
                          depth, (unsigned long long)g->slot_stride);
    g->total_size = RING_HDR_SIZE + (uint64_t)depth * g->slot_stride;
    return 0;
}

int ring_geometry_fields(uint32_t depth, uint32_t batch, struct ring_field *f, uint32_t n,
                         uint32_t primary, struct ring_geom *g, struct rf_err *err)
{
    uint64_t at, cap = (uint64_t)1 << 40; /* a slot's columns, at most 1 TiB */
    int rc;

    if (n < 1 || n > RING_MAX_FIELDS || primary >= n)
        return rf_err_set(err, -EINVAL, "%u fields (1..%u), primary %u", n, RING_MAX_FIELDS,
                          primary);
    if (f[primary].kind != RING_FIELD_FIXED)
        return rf_err_set(err, -EINVAL, "field %u (%.*s) is the primary but not fixed-size",
                          primary, (int)RING_FIELD_NAME, f[primary].name);
    /* the v2 geometry for the primary column sets depth, batch and meta */
    rc = ring_geometry(depth, batch, f[primary].item_bytes, g, err);
    if (rc < 0)
        return rc;
    at = g->meta_size;
    for (uint32_t i = 0; i < n; i++) {
        struct ring_field *c = &f[i];

        if (c->item_bytes < 1 || c->item_bytes > (1ull << 32))
            return rf_err_set(err, -EINVAL, "field %.*s: item size %llu out of range",
                              (int)RING_FIELD_NAME, c->name, (unsigned long long)c->item_bytes);
        if (c->kind == RING_FIELD_FIXED) {
            c->capacity = batch;
            c->offsets_at = 0;
            c->offset = at;
            at += round_page((uint64_t)batch * c->item_bytes);
        } else if (c->kind == RING_FIELD_RAGGED) {
            if (c->capacity < 1 || c->capacity > cap / c->item_bytes)
                return rf_err_set(err, -EOVERFLOW, "field %.*s: %llu rows of %llu bytes per "
                                  "batch do not fit a slot", (int)RING_FIELD_NAME, c->name,
                                  (unsigned long long)c->capacity,
                                  (unsigned long long)c->item_bytes);
            c->offsets_at = at;
            at += round_page(((uint64_t)batch + 1) * sizeof(int64_t));
            c->offset = at;
            at += round_page(c->capacity * c->item_bytes);
        } else {
            return rf_err_set(err, -EINVAL, "field %.*s: kind %u unknown",
                              (int)RING_FIELD_NAME, c->name, c->kind);
        }
        if (at > cap)
            return rf_err_set(err, -EOVERFLOW, "a slot of %u fields is over 1 TiB", n);
    }
    g->slot_stride = at;
    if (g->slot_stride > (UINT64_MAX - RING_HDR_SIZE) / depth)
        return rf_err_set(err, -EOVERFLOW, "ring of %u slots of %llu bytes is too large",
                          depth, (unsigned long long)g->slot_stride);
    g->total_size = RING_HDR_SIZE + (uint64_t)depth * g->slot_stride;
    return 0;
}

void ring_init(void *mem, const struct ring_geom *g, uint32_t version)
{
    struct ring_hdr *h = mem;

    memset(h, 0, RING_HDR_SIZE);
    h->magic = RING_MAGIC;
    h->version = version;
    h->hdr_size = RING_HDR_SIZE;
    h->total_size = g->total_size;
    h->depth = g->depth;
    h->batch = g->batch;
    h->slot_stride = g->slot_stride;
    h->meta_size = g->meta_size;
    h->sample_bytes = g->sample_bytes;
    atomic_store_explicit(&h->state, RING_LIVE, memory_order_relaxed);
    atomic_store_explicit(&h->released, 0, memory_order_relaxed);
}

int ring_field_check(const struct ring_field *f, uint32_t i, uint32_t n, struct rf_err *err)
{
    size_t len = strnlen(f->name, RING_FIELD_NAME);

    if (len == 0 || len == RING_FIELD_NAME)
        return rf_err_set(err, -EBADMSG, "ring field %u: name empty or not terminated", i);
    for (size_t k = 0; k < len; k++) {
        char c = f->name[k];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return rf_err_set(err, -EBADMSG, "ring field %u: name has a character 0x%02x", i,
                              (unsigned char)c);
    }
    if ((f->kind != RING_FIELD_FIXED && f->kind != RING_FIELD_RAGGED) || f->dtype < RING_U8 ||
        f->dtype > RING_U16 || f->layout < RING_CHW || f->layout > RING_FLAT || f->ndim > 4 ||
        f->role > RING_ROLE_ROWS || (f->role && f->of >= n))
        return rf_err_set(err, -EBADMSG, "ring field %u (%s): kind %u, dtype %u, layout %u, "
                          "ndim %u or role %u out of range", i, f->name, f->kind, f->dtype,
                          f->layout, f->ndim, f->role);
    return 0;
}

int ring_check(const void *mem, uint64_t map_size, struct rf_err *err)
{
    const struct ring_hdr *h = mem;
    struct ring_geom g;
    int rc;

    if (map_size < RING_HDR_SIZE)
        return rf_err_set(err, -EBADMSG, "ring is %llu bytes, smaller than its header",
                          (unsigned long long)map_size);
    if (h->magic != RING_MAGIC)
        return rf_err_set(err, -EPROTO, "not a ringfeed ring (magic %016llx)",
                          (unsigned long long)h->magic);
    if (h->version != RING_VERSION && h->version != 2)
        return rf_err_set(err, -EPROTO,
                          "ring layout version %u, this library speaks versions 2 and %u: "
                          "use a client and daemon of the same release",
                          h->version, RING_VERSION);
    if (h->hdr_size != RING_HDR_SIZE)
        return rf_err_set(err, -EBADMSG, "ring header size %u, expected %u",
                          h->hdr_size, RING_HDR_SIZE);
    if (h->version >= RING_VERSION_FIELDS) {
        struct ring_field f[RING_MAX_FIELDS];
        struct rf_err e;

        if (h->nfields < 1 || h->nfields > RING_MAX_FIELDS)
            return rf_err_set(err, -EBADMSG, "ring has %u fields (1..%u)", h->nfields,
                              RING_MAX_FIELDS);
        memcpy(f, h->fields, sizeof(f));
        for (uint32_t i = 0; i < h->nfields; i++) {
            rc = ring_field_check(&h->fields[i], i, h->nfields, err);
            if (rc < 0)
                return rc;
        }
        rc = ring_geometry_fields(h->depth, h->batch, f, h->nfields, h->primary, &g, &e);
        if (rc < 0)
            return rf_err_set(err, -EBADMSG, "ring field table: %s", e.msg);
        for (uint32_t i = 0; i < h->nfields; i++)
            if (f[i].offset != h->fields[i].offset ||
                f[i].offsets_at != h->fields[i].offsets_at ||
                f[i].capacity != h->fields[i].capacity)
                return rf_err_set(err, -EBADMSG, "ring field %u: offsets inconsistent", i);
        if (h->sample_bytes != f[h->primary].item_bytes)
            return rf_err_set(err, -EBADMSG, "ring sample size is not the primary field's");
    } else {
        rc = ring_geometry(h->depth, h->batch, h->sample_bytes, &g, err);
        if (rc < 0)
            return rc;
    }
    if (g.slot_stride != h->slot_stride || g.meta_size != h->meta_size ||
        g.total_size != h->total_size || h->total_size != map_size)
        return rf_err_set(err, -EBADMSG,
                          "ring geometry inconsistent: %llu bytes mapped, header says %llu",
                          (unsigned long long)map_size, (unsigned long long)h->total_size);
    return 0;
}

int ring_futex_wait(_Atomic uint32_t *word, uint32_t seen, int64_t timeout_ns)
{
    struct timespec ts = {
        .tv_sec = timeout_ns / 1000000000,
        .tv_nsec = timeout_ns % 1000000000,
    };

    /* EAGAIN (the word already changed), EINTR and ETIMEDOUT all mean
     * "look again"; the caller loops on the word, not on this result. */
    if (syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, seen, &ts, NULL, 0) == -1)
        return -errno;
    return 0;
}

void ring_futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}
