/*
 * pixels.c - the RFPX image record (pixels.h).
 */
#include <errno.h>
#include <string.h>

#include "pixels.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

bool px_is(const void *buf, size_t len)
{
    return len >= 4 && memcmp(buf, PX_MAGIC, 4) == 0;
}

size_t px_record_size(uint32_t width, uint32_t height)
{
    if (width < 1 || height < 1 || width > PX_SIDE_MAX || height > PX_SIDE_MAX)
        return 0;
    return PX_HEADER_SIZE + (size_t)width * height * PX_CHANNELS;
}

void px_write_header(void *buf, uint32_t width, uint32_t height)
{
    uint8_t *p = buf;

    memcpy(p, PX_MAGIC, 4);
    p[4] = PX_VERSION;
    p[5] = PX_CHANNELS;
    p[6] = p[7] = 0;
    put32(p + 8, width);
    put32(p + 12, height);
}

int px_parse(const void *buf, size_t len, struct px_header *h, struct rf_err *err)
{
    const uint8_t *p = buf;
    size_t want;

    memset(h, 0, sizeof(*h));
    if (len < PX_HEADER_SIZE || !px_is(buf, len))
        return rf_err_set(err, -EBADMSG, "not an RFPX pixel record (%zu bytes)", len);
    if (p[4] != PX_VERSION)
        return rf_err_set(err, -EBADMSG, "RFPX version %u (this reader knows %u)", p[4],
                          PX_VERSION);
    if (p[5] != PX_CHANNELS)
        return rf_err_set(err, -EBADMSG, "RFPX with %u channels (3 expected)", p[5]);
    if (p[6] || p[7])
        return rf_err_set(err, -EBADMSG, "RFPX reserved bytes are not zero");
    h->width = le32(p + 8);
    h->height = le32(p + 12);
    want = px_record_size(h->width, h->height);
    if (!want)
        return rf_err_set(err, -EBADMSG, "RFPX %ux%u: each side must be 1..%u", h->width,
                          h->height, PX_SIDE_MAX);
    if (len != want)
        return rf_err_set(err, -EBADMSG, "RFPX %ux%u is %zu bytes, not %zu", h->width,
                          h->height, len, want);
    h->channels = PX_CHANNELS;
    h->pixels = p + PX_HEADER_SIZE;
    return 0;
}
