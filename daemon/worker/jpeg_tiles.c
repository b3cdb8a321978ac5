/*
 * jpeg_tiles.c - a JPEG's restart intervals as tiles, and a smaller JPEG
 * made of some of them (jpeg.h, struct jpg_tiles): how the workers decode a
 * crop without entropy decoding the rest of the image.
 *
 * In a single-scan JPEG with a restart marker every `interval` MCUs, each
 * interval's entropy-coded data starts on a byte boundary with its DC
 * predictions at zero, so it decodes without the data before it.  When the
 * interval divides the MCUs of a row, the intervals form a grid of tiles,
 * `interval` MCUs wide and one MCU row high, and any rectangle of tiles is
 * itself a valid image: the same headers with the rectangle's size in the
 * SOF segment, then the tiles' data in raster order with restart markers
 * numbered again from RST0.  Its pixels are the original's, IDCT block by
 * IDCT block; only the chroma upsampler's neighbours at the rectangle's
 * edges differ, so jpg_read keeps a margin there (jpeg.c).
 *
 * The walk to the scan reads markers as libjpeg does (jpeg_scan.c: fill
 * bytes before any marker, every marker's length) and declines a file it
 * would read otherwise: the SOF it patches and the data it copies must be
 * the ones the decoder reads.
 *
 * Pure functions of the buffer that keep offsets, fuzzed through the train
 * and eval transforms by tests/fuzz/fuzz_jpeg.c, and against the ordinary
 * decode and libjpeg's own header reading by tests/fuzz/fuzz_jpeg_tiles.c.
 */
#include "jpeg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

#define M_SOF0 0xC0
#define M_SOF1 0xC1
#define M_SOF2 0xC2
#define M_SOF9 0xC9
#define M_SOF10 0xCA
#define M_RST0 0xD0
#define M_SOI 0xD8
#define M_EOI 0xD9
#define M_SOS 0xDA

/* The header's walk to the first scan, marker by marker as libjpeg reads
 * them (jpeg_scan.c): the offset of SOF0/SOF1's FF, the one just before its
 * code (fill bytes may come before it), and of the first entropy-coded
 * byte.  jpg_open has had libjpeg read this header without a warning, so
 * a walk that disagrees with libjpeg anywhere is refused here rather than
 * trusted.  Returns 0 or -EBADMSG (no SOF0/1 before the SOS, another SOF,
 * a second SOI, EOI, stray bytes, a marker or length libjpeg refuses). */
static int walk_header(const uint8_t *buf, size_t len, size_t *sof, size_t *data)
{
    size_t off = 2, junk = 0;
    bool seen = false;

    if (len < 4 || buf[0] != 0xFF || buf[1] != 0xD8)
        return -EBADMSG;
    for (;;) {
        size_t at = jpg_marker_next(buf, len, off, &junk), span;
        uint8_t m;

        if (at >= len || junk || jpg_marker_span(buf, len, at, &span) < 0)
            return -EBADMSG;
        m = buf[at];
        if (m == M_SOI || m == M_EOI)
            return -EBADMSG;
        if (m == M_SOF0 || m == M_SOF1) {
            if (seen || span < 8)
                return -EBADMSG; /* the size's bytes lie inside the segment */
            seen = true;
            *sof = at - 1;
        } else if (m == M_SOF2 || m == M_SOF9 || m == M_SOF10) {
            return -EBADMSG; /* progressive or arithmetic: not tiles */
        }
        off = at + 1 + span;
        if (m == M_SOS) {
            if (!seen)
                return -EBADMSG;
            *data = off;
            return 0;
        }
    }
}

int jpg_tiles_find(const uint8_t *buf, size_t len, struct jpg_tiles *t, uint32_t rows)
{
    size_t n = (size_t)t->cols * t->rows, k = 0, off, want;

    if (n == 0 || rows == 0 || rows > t->rows || walk_header(buf, len, &t->sof, &t->data) < 0)
        return -EBADMSG;
    want = (size_t)t->cols * rows;
    if (!buf_grow((void **)&t->end, &t->end_cap, want * sizeof(*t->end)))
        return -ENOMEM;
    off = t->data;
    while (k < want) {
        const uint8_t *p = off < len ? memchr(buf + off, 0xFF, len - off) : NULL;
        size_t at, q;

        if (!p) {
            t->end[k++] = len; /* truncated: the decoder will say so */
            break;
        }
        at = (size_t)(p - buf);
        q = at;
        while (q < len && buf[q] == 0xFF)
            q++;
        if (q >= len) {
            t->end[k++] = at;
            break;
        }
        if (buf[q] == 0x00) {
            off = q + 1;
            continue;
        }
        t->end[k++] = at;
        if (buf[q] < M_RST0 || buf[q] > M_RST0 + 7)
            break; /* EOI, or whatever ends the scan */
        if (k == n || buf[q] != M_RST0 + ((k - 1) & 7))
            return -EBADMSG; /* more intervals than tiles, or out of order */
        off = q + 1;
    }
    return k == want ? 0 : -EBADMSG;
}

/* Where tile i's data starts: after the scan's header, or after the
 * restart marker that ends tile i - 1. */
static size_t tile_start(const uint8_t *buf, const struct jpg_tiles *t, size_t i)
{
    size_t at = i ? t->end[i - 1] : t->data;

    if (i == 0)
        return at;
    while (buf[at] == 0xFF)
        at++;
    return at + 1;
}

size_t jpg_tiles_size(const uint8_t *buf, const struct jpg_tiles *t, uint32_t c0, uint32_t c1,
                      uint32_t r0, uint32_t r1)
{
    size_t n = t->data + 2;

    for (uint32_t r = r0; r < r1; r++) {
        size_t a = (size_t)r * t->cols;

        n += t->end[a + c1 - 1] - tile_start(buf, t, a + c0);
        n += 2 * (size_t)(c1 - c0); /* at most one marker after each tile */
    }
    return n;
}

size_t jpg_tiles_build(const uint8_t *buf, const struct jpg_tiles *t, uint32_t c0, uint32_t c1,
                       uint32_t r0, uint32_t r1, uint32_t width, uint32_t height, uint8_t *out)
{
    size_t o = t->data, k = 0, last = (size_t)(c1 - c0) * (r1 - r0) - 1;

    memcpy(out, buf, t->data);
    out[t->sof + 5] = (uint8_t)(height >> 8);
    out[t->sof + 6] = (uint8_t)height;
    out[t->sof + 7] = (uint8_t)(width >> 8);
    out[t->sof + 8] = (uint8_t)width;
    for (uint32_t r = r0; r < r1; r++)
        for (uint32_t c = c0; c < c1; c++, k++) {
            size_t i = (size_t)r * t->cols + c, s = tile_start(buf, t, i);

            memcpy(out + o, buf + s, t->end[i] - s);
            o += t->end[i] - s;
            if (k != last) {
                out[o++] = 0xFF;
                out[o++] = (uint8_t)(M_RST0 + (k & 7));
            }
        }
    out[o++] = 0xFF;
    out[o++] = 0xD9;
    return o;
}

void jpg_tiles_free(struct jpg_tiles *t)
{
    free(t->end);
    t->end = NULL;
    t->end_cap = 0;
}
