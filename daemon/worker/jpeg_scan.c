/*
 * jpeg_scan.c - counts a JPEG's scans from its markers, without decoding:
 * the scan cap's check, run on multi-scan (progressive) files before the
 * decoder reads their coefficients.  A pure function of the buffer that
 * keeps offsets, fuzzed by tests/fuzz/fuzz_jpeg.c.
 *
 *   SOI  then segments:  FF xx LEN_HI LEN_LO <LEN - 2 bytes>
 *        standalone:     FF D0..D7 (RSTn), FF 01 (TEM)
 *        SOS segment, then entropy-coded data, in which FF 00 is a data
 *        byte and FF D0..D7 a restart marker; any other FF xx ends it
 *   EOI  FF D9
 * Fill bytes (FF repeated before a marker) are skipped, and so are stray
 * bytes between segments (libjpeg warns and skips them too).
 */
#include "jpeg.h"

#include <errno.h>
#include <string.h>

/* Offset of the marker byte ending the entropy-coded data at off, or len. */
static size_t skip_entropy(const uint8_t *buf, size_t len, size_t off)
{
    while (off < len) {
        const uint8_t *p = memchr(buf + off, 0xFF, len - off);
        uint8_t b;

        if (!p)
            return len;
        off = (size_t)(p - buf);
        if (off + 1 >= len)
            return len;
        b = buf[off + 1];
        if (b == 0x00 || (b >= 0xD0 && b <= 0xD7))
            off += 2;
        else if (b == 0xFF)
            off++;
        else
            return off;
    }
    return len;
}

int jpg_count_scans(const uint8_t *buf, size_t len, uint32_t stop)
{
    size_t off = 2;
    uint32_t count = 0;

    if (len < 2 || buf[0] != 0xFF || buf[1] != 0xD8)
        return -EBADMSG;
    while (off < len) {
        const uint8_t *p = memchr(buf + off, 0xFF, len - off);
        uint8_t m;
        size_t seg;

        if (!p)
            break;
        off = (size_t)(p - buf);
        while (off < len && buf[off] == 0xFF)
            off++;
        if (off >= len)
            break;
        m = buf[off++];
        if (m == 0xD9)
            break;
        if (m == 0x00 || m == 0x01 || (m >= 0xD0 && m <= 0xD8))
            continue;
        if (off + 2 > len)
            break;
        seg = ((size_t)buf[off] << 8) | buf[off + 1];
        if (seg < 2)
            return -EBADMSG;
        if (seg > len - off)
            break;
        off += seg;
        if (m == 0xDA) {
            if (++count > stop)
                return (int)(stop < (uint32_t)0x7FFFFFFE ? stop + 1 : stop);
            off = skip_entropy(buf, len, off);
        }
    }
    return (int)(count > 0x7FFFFFFF ? 0x7FFFFFFF : count);
}
