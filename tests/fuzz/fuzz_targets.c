/*
 * fuzz_targets.c - a mask record and boxes from arbitrary bytes through a
 * view (daemon/worker/targets.h).
 *
 * Input: byte 0 flags (1 flip, 2 u16 values, 4 eval's grid: the whole
 * image resized, an offset into it), bytes 1-2 the output's sides - 1,
 * byte 3 the number of boxes, bytes 4-13 five 16-bit numbers that place the
 * grid (taken modulo the sides, so most views fit and some do not), then
 * the boxes (16 bytes each, as many as there are bytes for), then the mask
 * record.  The source's sides are the record's when it parses, else 4 x 3.
 *
 * Whatever the input: tgt_mask returns 0, -EBADMSG or -EINVAL (the last
 * only for a grid that does not fit), always with a message on failure,
 * and stores exactly out_w x out_h values (the bytes after them stay as
 * they were); tgt_boxes returns at most its rows or -EBADMSG, and every
 * kept box lies in the output, x0 <= x1 and y0 <= y1; or the target
 * aborts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pixels.h"
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define GUARD 32

static uint32_t u16_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t dst[256 * 256 * 2 + GUARD];
    static float boxes[255 * 4], kept[255 * 4];
    struct tgt_view v = { 0 };
    struct px_header px;
    struct rf_err err;
    enum wire_bad why;
    uint32_t vb, nbox, sw = 4, sh = 3, g[5];
    size_t n, at = 14;
    int rc;

    if (size < at)
        return 0;
    vb = data[0] & 2 ? 2 : 1;
    v.flip = data[0] & 1;
    v.out_w = data[1] + 1u;
    v.out_h = data[2] + 1u;
    nbox = data[3];
    for (int i = 0; i < 5; i++)
        g[i] = u16_at(data + 4 + 2 * i);
    if ((size - at) / 16 < nbox)
        nbox = (uint32_t)((size - at) / 16);
    memcpy(boxes, data + at, (size_t)nbox * 16);
    at += (size_t)nbox * 16;
    if (px_parse_any(data + at, size - at, &px, NULL) == 0) {
        sw = px.width;
        sh = px.height;
    }
    v.src_w = sw;
    v.src_h = sh;
    if (data[0] & 4) {
        /* eval: the whole image to rw x rh, the output at (ox, oy) in it */
        v.cw = sw;
        v.ch = sh;
        v.rw = v.out_w + g[0] % 64;
        v.rh = v.out_h + g[1] % 64;
        v.ox = g[2] % (v.rw - v.out_w + 2);  /* one past the last that fits */
        v.oy = g[3] % (v.rh - v.out_h + 1);
        v.x0 = (double)v.ox * sw / v.rw;
        v.x1 = (double)(v.ox + v.out_w) * sw / v.rw;
        v.y0 = (double)v.oy * sh / v.rh;
        v.y1 = (double)(v.oy + v.out_h) * sh / v.rh;
    } else {
        /* train: an integer crop to out_w x out_h */
        v.cx = g[0] % sw;
        v.cy = g[1] % sh;
        v.cw = 1 + g[2] % (sw - v.cx + 1);  /* one past the last that fits */
        v.ch = 1 + g[3] % (sh - v.cy);
        v.rw = v.out_w;
        v.rh = v.out_h;
        v.x0 = v.cx;
        v.y0 = v.cy;
        v.x1 = (double)v.cx + v.cw;
        v.y1 = (double)v.cy + v.ch;
    }
    (void)g[4];
    n = (size_t)v.out_w * v.out_h * vb;
    memset(dst, 0x5A, n + GUARD);
    err.msg[0] = '\0';
    rc = tgt_mask(&v, data + at, size - at, vb, dst, &why, &err);
    if (rc < 0 && (err.msg[0] == '\0' || (rc != -EBADMSG && rc != -EINVAL)))
        abort();
    if (rc == -EINVAL && (uint64_t)v.cx + v.cw <= sw && (uint64_t)v.ox + v.out_w <= v.rw &&
        (uint64_t)v.oy + v.out_h <= v.rh)
        abort(); /* -EINVAL only for a grid that does not fit */
    for (size_t i = n; i < n + GUARD; i++)
        if (dst[i] != 0x5A)
            abort();
    err.msg[0] = '\0';
    rc = tgt_boxes(&v, boxes, nbox, kept, NULL, &err);
    if (rc < 0 && (rc != -EBADMSG || err.msg[0] == '\0'))
        abort();
    if (rc > (int)nbox)
        abort();
    for (int i = 0; i < rc; i++) {
        const float *b = kept + 4 * i;

        if (!(b[0] >= 0 && b[0] <= b[2] && b[2] <= v.out_w && b[1] >= 0 && b[1] <= b[3] &&
              b[3] <= v.out_h))
            abort();
    }
    return 0;
}
