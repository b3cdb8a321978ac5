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

void ring_init(void *mem, const struct ring_geom *g)
{
    struct ring_hdr *h = mem;

    memset(h, 0, RING_HDR_SIZE);
    h->magic = RING_MAGIC;
    h->version = RING_VERSION;
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
    if (h->version != RING_VERSION)
        return rf_err_set(err, -EPROTO,
                          "ring layout version %u, this library speaks version %u: "
                          "use a client and daemon of the same release",
                          h->version, RING_VERSION);
    if (h->hdr_size != RING_HDR_SIZE)
        return rf_err_set(err, -EBADMSG, "ring header size %u, expected %u",
                          h->hdr_size, RING_HDR_SIZE);
    rc = ring_geometry(h->depth, h->batch, h->sample_bytes, &g, err);
    if (rc < 0)
        return rc;
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
