/*
 * jpeg_scan.c - a JPEG's markers read as libjpeg reads them (jdmarker.c),
 * without decoding: the marker walk that the scan counter here and the
 * tile walk (jpeg_tiles.c) share, and the scan count, the scan cap's
 * check, run on multi-scan (progressive) files before the decoder reads
 * their coefficients.  Pure functions of the buffer that keep offsets,
 * fuzzed by tests/fuzz/fuzz_jpeg.c and tests/fuzz/fuzz_jpeg_tiles.c.
 *
 *   SOI  FF D8, the file's first two bytes, nothing before them
 *   then markers, each FF xx with any number of FF fill bytes before it:
 *        segments:       FF xx LEN_HI LEN_LO <LEN - 2 bytes>
 *        standalone:     FF D0..D7 (RSTn), FF 01 (TEM)
 *        SOS segment, then entropy-coded data, in which FF 00 is a data
 *        byte (FF FF .. FF 00 too) and FF D0..D7 a restart marker; any
 *        other FF xx ends it
 *   EOI  FF D9
 *
 * What libjpeg does that a walk must do the same way, or disagree with the
 * decoder about where a segment starts:
 *   - fill bytes are skipped before every marker, in the headers and in
 *     the entropy-coded data alike;
 *   - bytes other than FF between segments, and FF 00 pairs there, are
 *     skipped with a warning (extraneous data), which the decoder treats
 *     as an error (jpeg.c): jpg_marker_next counts them;
 *   - a segment libjpeg only skips (APPn, COM, DNL) may claim a length of
 *     0 or 1, read as 2: its length word and nothing more; the segments it
 *     parses (SOFn, DHT, DQT, DRI, DAC, SOS) must have their exact length
 *     or it fails;
 *   - RSTn and TEM outside a scan are parameterless markers, skipped.
 */
#include "jpeg.h"

#include <errno.h>
#include <string.h>

/* What libjpeg does with a marker code: the segment kinds of the comment
 * above.  Codes not listed (DHP, EXP, JPGn, RESn, the SOFn it does not
 * decode) make it fail. */
enum {
    MK_FAILS = 0,   /* libjpeg refuses the file */
    MK_ALONE,       /* no length word: RSTn, TEM, SOI, EOI */
    MK_PARSED,      /* a length word libjpeg checks exactly */
    MK_SKIPPED,     /* a length word, under 2 read as 2 */
};

static const struct {
    uint8_t lo, hi;
    uint8_t kind;
} marker_kinds[] = {
    { 0x01, 0x01, MK_ALONE },   /* TEM */
    { 0xC0, 0xC2, MK_PARSED },  /* SOF0, SOF1, SOF2 */
    { 0xC4, 0xC4, MK_PARSED },  /* DHT */
    { 0xC9, 0xCA, MK_PARSED },  /* SOF9, SOF10 */
    { 0xCC, 0xCC, MK_PARSED },  /* DAC */
    { 0xD0, 0xD9, MK_ALONE },   /* RST0..7, SOI, EOI */
    { 0xDA, 0xDB, MK_PARSED },  /* SOS, DQT */
    { 0xDC, 0xDC, MK_SKIPPED }, /* DNL */
    { 0xDD, 0xDD, MK_PARSED },  /* DRI */
    { 0xE0, 0xEF, MK_SKIPPED }, /* APP0..15 */
    { 0xFE, 0xFE, MK_SKIPPED }, /* COM */
};

static int marker_kind(uint8_t m)
{
    for (size_t i = 0; i < sizeof(marker_kinds) / sizeof(marker_kinds[0]); i++)
        if (m >= marker_kinds[i].lo && m <= marker_kinds[i].hi)
            return marker_kinds[i].kind;
    return MK_FAILS;
}

size_t jpg_marker_next(const uint8_t *buf, size_t len, size_t off, size_t *junk)
{
    while (off < len) {
        const uint8_t *p = memchr(buf + off, 0xFF, len - off);
        size_t at;

        if (!p) {
            *junk += len - off;
            return len;
        }
        at = (size_t)(p - buf);
        *junk += at - off;
        while (at < len && buf[at] == 0xFF)
            at++; /* fill bytes */
        if (at >= len)
            return len;
        if (buf[at] != 0x00)
            return at;
        *junk += 2; /* FF 00 (or FF FF .. 00): libjpeg counts 2 */
        off = at + 1;
    }
    return len;
}

int jpg_marker_span(const uint8_t *buf, size_t len, size_t at, size_t *span)
{
    int kind = marker_kind(buf[at]);
    size_t seg;

    if (kind == MK_FAILS)
        return -EBADMSG;
    if (kind == MK_ALONE) {
        *span = 0;
        return 0;
    }
    if (len - at < 3)
        return -EBADMSG;
    seg = ((size_t)buf[at + 1] << 8) | buf[at + 2];
    if (seg < 2) {
        if (kind == MK_PARSED)
            return -EBADMSG;
        seg = 2;
    }
    if (seg > len - at - 1)
        return -ENODATA;
    *span = seg;
    return 0;
}

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
    size_t off = 2, junk = 0;
    uint32_t count = 0;

    if (len < 2 || buf[0] != 0xFF || buf[1] != 0xD8)
        return -EBADMSG;
    for (;;) {
        size_t at = jpg_marker_next(buf, len, off, &junk), span;
        int rc;

        if (at >= len || buf[at] == 0xD9)
            break;
        rc = jpg_marker_span(buf, len, at, &span);
        if (rc == -ENODATA)
            break;
        if (rc < 0)
            return rc;
        off = at + 1 + span;
        if (buf[at] == 0xDA) {
            if (++count > stop)
                return (int)(stop < (uint32_t)0x7FFFFFFE ? stop + 1 : stop);
            off = skip_entropy(buf, len, off);
        }
    }
    return (int)(count > 0x7FFFFFFF ? 0x7FFFFFFF : count);
}
