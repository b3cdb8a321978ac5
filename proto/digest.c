/*
 * digest.c - XXH64 from xxHash's specification (doc/xxhash_spec.md).
 *
 * Input is consumed in 32-byte stripes, each 8-byte lane of a stripe feeding
 * one of four accumulators (round: acc = rotl(acc + lane * P2, 31) * P1).
 * Bytes that do not fill a stripe wait in d->buf.  The final step merges the
 * accumulators (or starts from seed + P5 for inputs under 32 bytes), adds the
 * length, folds in the tail 8, 4 and 1 bytes at a time, and avalanches.
 *
 * Invariants: buf_len < 32; the accumulators have absorbed exactly
 * total_len - buf_len bytes, a multiple of 32; digest_final reads d only.
 */
#include "digest.h"

#include <string.h>

#define P1 UINT64_C(0x9E3779B185EBCA87)
#define P2 UINT64_C(0xC2B2AE3D27D4EB4F)
#define P3 UINT64_C(0x165667B19E3779F9)
#define P4 UINT64_C(0x85EBCA77C2B2AE63)
#define P5 UINT64_C(0x27D4EB2F165667C5)

static inline uint64_t rotl64(uint64_t x, int r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t read64le(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t read32le(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t xxh_round(uint64_t acc, uint64_t lane)
{
    acc += lane * P2;
    acc = rotl64(acc, 31);
    return acc * P1;
}

static inline uint64_t xxh_merge(uint64_t h, uint64_t acc)
{
    h ^= xxh_round(0, acc);
    return h * P1 + P4;
}

/* Absorbs whole stripes from p; returns the bytes consumed (a multiple of 32). */
static size_t absorb(uint64_t acc[4], const uint8_t *p, size_t len)
{
    uint64_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    size_t done = 0;

    for (; len - done >= 32; done += 32) {
        a0 = xxh_round(a0, read64le(p + done));
        a1 = xxh_round(a1, read64le(p + done + 8));
        a2 = xxh_round(a2, read64le(p + done + 16));
        a3 = xxh_round(a3, read64le(p + done + 24));
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
    return done;
}

void digest_init(struct digest *d, uint64_t seed)
{
    memset(d, 0, sizeof(*d));
    d->seed = seed;
    d->acc[0] = seed + P1 + P2;
    d->acc[1] = seed + P2;
    d->acc[2] = seed;
    d->acc[3] = seed - P1;
}

void digest_update(struct digest *d, const void *data, size_t len)
{
    const uint8_t *p = data;

    if (len == 0)
        return;
    d->total_len += len;
    if (d->buf_len + len < 32) {
        memcpy(d->buf + d->buf_len, p, len);
        d->buf_len += (uint32_t)len;
        return;
    }
    if (d->buf_len) {
        size_t fill = 32 - d->buf_len;

        memcpy(d->buf + d->buf_len, p, fill);
        absorb(d->acc, d->buf, 32);
        p += fill;
        len -= fill;
        d->buf_len = 0;
    }
    {
        size_t done = absorb(d->acc, p, len);

        memcpy(d->buf, p + done, len - done);
        d->buf_len = (uint32_t)(len - done);
    }
}

void digest_update_u32(struct digest *d, uint32_t v)
{
    uint8_t b[4];

    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    digest_update(d, b, sizeof(b));
}

void digest_update_u64(struct digest *d, uint64_t v)
{
    uint8_t b[8];

    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    digest_update(d, b, sizeof(b));
}

uint64_t digest_final(const struct digest *d)
{
    const uint8_t *p = d->buf;
    size_t left = d->buf_len;
    uint64_t h;

    if (d->total_len >= 32) {
        h = rotl64(d->acc[0], 1) + rotl64(d->acc[1], 7) +
            rotl64(d->acc[2], 12) + rotl64(d->acc[3], 18);
        for (int i = 0; i < 4; i++)
            h = xxh_merge(h, d->acc[i]);
    } else {
        h = d->seed + P5;
    }
    h += d->total_len;

    for (; left >= 8; left -= 8, p += 8) {
        h ^= xxh_round(0, read64le(p));
        h = rotl64(h, 27) * P1 + P4;
    }
    if (left >= 4) {
        h ^= (uint64_t)read32le(p) * P1;
        h = rotl64(h, 23) * P2 + P3;
        left -= 4;
        p += 4;
    }
    for (; left > 0; left--, p++) {
        h ^= *p * P5;
        h = rotl64(h, 11) * P1;
    }

    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t digest_xxh64(const void *data, size_t len, uint64_t seed)
{
    struct digest d;

    digest_init(&d, seed);
    digest_update(&d, data, len);
    return digest_final(&d);
}

char *digest_hex(uint64_t h, char out[DIGEST_HEX_SIZE])
{
    static const char hex[] = "0123456789abcdef";

    for (int i = 0; i < 16; i++)
        out[i] = hex[(h >> (60 - 4 * i)) & 0xf];
    out[16] = '\0';
    return out;
}
