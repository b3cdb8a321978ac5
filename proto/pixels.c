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
    return px_record_size_of(width, height, PX_CHANNELS, 1);
}

size_t px_record_size_of(uint32_t width, uint32_t height, uint32_t channels,
                         uint32_t value_bytes)
{
    if (width < 1 || height < 1 || width > PX_SIDE_MAX || height > PX_SIDE_MAX ||
        !((channels == 3 && value_bytes == 1) ||
          (channels == 1 && (value_bytes == 1 || value_bytes == 2))))
        return 0;
    return PX_HEADER_SIZE + (size_t)width * height * channels * value_bytes;
}

void px_write_header(void *buf, uint32_t width, uint32_t height)
{
    px_write_header_of(buf, width, height, PX_CHANNELS, 1);
}

void px_write_header_of(void *buf, uint32_t width, uint32_t height, uint32_t channels,
                        uint32_t value_bytes)
{
    uint8_t *p = buf;

    memcpy(p, PX_MAGIC, 4);
    p[4] = PX_VERSION;
    p[5] = (uint8_t)channels;
    p[6] = value_bytes == 2 ? 2 : 0;
    p[7] = 0;
    put32(p + 8, width);
    put32(p + 12, height);
}

int px_parse(const void *buf, size_t len, struct px_header *h, struct rf_err *err)
{
    int r = px_parse_any(buf, len, h, err);

    if (r == 0 && (h->channels != PX_CHANNELS || h->value_bytes != 1)) {
        r = rf_err_set(err, -EBADMSG, "RFPX with %u channel%s of %u byte%s (RGB expected)",
                       h->channels, h->channels == 1 ? "" : "s", h->value_bytes,
                       h->value_bytes == 1 ? "" : "s");
        memset(h, 0, sizeof(*h));
    }
    return r;
}

int px_parse_any(const void *buf, size_t len, struct px_header *h, struct rf_err *err)
{
    const uint8_t *p = buf;
    size_t want;

    memset(h, 0, sizeof(*h));
    if (len < PX_HEADER_SIZE || !px_is(buf, len))
        return rf_err_set(err, -EBADMSG, "not an RFPX pixel record (%zu bytes)", len);
    if (p[4] != PX_VERSION)
        return rf_err_set(err, -EBADMSG, "RFPX version %u (this reader knows %u)", p[4],
                          PX_VERSION);
    if (p[5] != 1 && p[5] != 3)
        return rf_err_set(err, -EBADMSG, "RFPX with %u channels (1 or 3)", p[5]);
    if ((p[6] != 0 && p[6] != 2) || (p[6] == 2 && p[5] != 1) || p[7])
        return rf_err_set(err, -EBADMSG, "RFPX value size byte %u or reserved byte %u "
                          "unknown", p[6], p[7]);
    h->width = le32(p + 8);
    h->height = le32(p + 12);
    want = px_record_size_of(h->width, h->height, p[5], p[6] == 2 ? 2 : 1);
    if (!want)
        return rf_err_set(err, -EBADMSG, "RFPX %ux%u: each side must be 1..%u", h->width,
                          h->height, PX_SIDE_MAX);
    if (len != want)
        return rf_err_set(err, -EBADMSG, "RFPX %ux%u is %zu bytes, not %zu", h->width,
                          h->height, len, want);
    h->channels = p[5];
    h->value_bytes = p[6] == 2 ? 2 : 1;
    h->pixels = p + PX_HEADER_SIZE;
    return 0;
}
