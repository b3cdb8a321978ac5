/*
 * fuzz_jpeg_tiles.c - the restart-tile path (daemon/worker/jpeg_tiles.c,
 * jpeg.c's jpg_read) against the ordinary decode of the same file, on
 * arbitrary bytes: a crop the tiles give must be the crop the whole file
 * gives, byte for byte, or the tile path must decline.
 *
 * The input is 8 bytes of choices, then a JPEG:
 *
 *   0       scale s/8: s = 1 << (b & 3)
 *   1..4    the crop: x0, x1, y0, y1 as fractions (b / 256) of the scaled size
 *   5       fill bytes (0xFF) to insert: b & 7
 *   6       before which 0xFF byte of the JPEG (b mod their number): a
 *           fill byte before a marker, a marker's FF before another's
 *           code, or damage inside a segment, whichever it lands on
 *   7       the size the header check writes into a tiles' JPEG
 *
 * Checks, each a trap when it fails:
 *   - the header walk reads markers as libjpeg does: where libjpeg reads
 *     the file's header without a warning and it is sequential Huffman
 *     (SOF0/SOF1), jpg_tiles_find on the header alone finds its scan's
 *     data where libjpeg does, and the JPEG that jpg_tiles_build makes of
 *     it reads in libjpeg as the same header with the size it was built
 *     for, and nothing else changed;
 *   - the crop: decoded with tiles allowed and with tiles off.  Both
 *     decoded: the same pixels over the crop, each covering what was
 *     asked.  The tile path failed: so did the ordinary decode (a tiles'
 *     failure falls back to the file).  Only the ordinary decode failed:
 *     the crop came from tiles (damage in data the crop does not need).
 *
 * The pixel cap is 1 Mpixel so a mutated header costs little.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "jpeg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHOICES 8

struct hdr_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
};

static void hdr_fail(j_common_ptr ci)
{
    longjmp(((struct hdr_err *)ci->err)->jb, 1);
}

static void hdr_message(j_common_ptr ci, int level)
{
    if (level < 0) /* a warning: the decoder refuses the file too */
        longjmp(((struct hdr_err *)ci->err)->jb, 1);
}

/* What libjpeg reads from a header, for comparing two, and where its
 * first scan's data starts. */
struct hdr {
    uint32_t w, h;
    int comps, precision, colorspace, progressive, arith, restart, scan_comps;
    int samp[4];
    size_t data;
};

static bool same_hdr(const struct hdr *a, const struct hdr *b)
{
    return a->w == b->w && a->h == b->h && a->comps == b->comps &&
           a->precision == b->precision && a->colorspace == b->colorspace &&
           a->progressive == b->progressive && a->arith == b->arith &&
           a->restart == b->restart && a->scan_comps == b->scan_comps &&
           memcmp(a->samp, b->samp, sizeof(a->samp)) == 0 && a->data == b->data;
}

/* Reads buf's header with libjpeg, any warning a failure; true with *h. */
static bool read_hdr(struct jpeg_decompress_struct *ci, const uint8_t *buf, size_t len,
                     struct hdr *h)
{
    struct hdr_err *em = (struct hdr_err *)ci->err;

    if (setjmp(em->jb)) {
        jpeg_abort_decompress(ci);
        return false;
    }
    jpeg_mem_src(ci, buf, (unsigned long)len);
    jpeg_read_header(ci, TRUE);
    *h = (struct hdr){ .w = ci->image_width, .h = ci->image_height, .comps = ci->num_components,
                       .precision = ci->data_precision, .colorspace = ci->jpeg_color_space,
                       .progressive = ci->progressive_mode, .arith = ci->arith_code,
                       .restart = (int)ci->restart_interval, .scan_comps = ci->comps_in_scan };
    for (int i = 0; i < ci->num_components && i < 4; i++)
        h->samp[i] = ci->comp_info[i].h_samp_factor << 4 | ci->comp_info[i].v_samp_factor;
    h->data = (size_t)(ci->src->next_input_byte - buf);
    jpeg_abort_decompress(ci);
    return true;
}

/* The header walk against libjpeg's, and the size jpg_tiles_build writes. */
static void check_walk(const uint8_t *buf, size_t len, uint8_t size_choice)
{
    static struct jpeg_decompress_struct ci;
    static struct hdr_err em;
    static bool made;
    static struct jpg_tiles t;
    struct hdr a, b;
    uint32_t w = 1 + size_choice * 256u, h = 1 + (255u - size_choice) * 129u;
    uint8_t *sub;
    size_t n;
    int rc;

    if (!made) {
        ci.err = jpeg_std_error(&em.pub);
        em.pub.error_exit = hdr_fail;
        em.pub.emit_message = hdr_message;
        jpeg_create_decompress(&ci);
        made = true;
    }
    if (!read_hdr(&ci, buf, len, &a) || a.progressive || a.arith)
        return;
    /* the header alone, up to libjpeg's first entropy-coded byte, as one
     * tile with no data: the walk must find the SOS segment ending there */
    len = a.data;
    t = (struct jpg_tiles){ .mcu_w = 8, .mcu_h = 8, .interval = 1, .cols = 1, .rows = 1,
                            .end = t.end, .end_cap = t.end_cap };
    rc = jpg_tiles_find(buf, len, &t, 1);
    if (rc == -ENOMEM)
        return;
    if (rc != 0 || t.data != a.data)
        __builtin_trap(); /* the walk refused a header libjpeg read, or read it otherwise */
    sub = malloc(jpg_tiles_size(buf, &t, 0, 1, 0, 1));
    if (!sub)
        return;
    n = jpg_tiles_build(buf, &t, 0, 1, 0, 1, w, h, sub);
    if (n > jpg_tiles_size(buf, &t, 0, 1, 0, 1))
        __builtin_trap();
    if (!read_hdr(&ci, sub, n, &b))
        __builtin_trap(); /* the tiles' JPEG has a header libjpeg refuses */
    a.w = w;
    a.h = h;
    if (!same_hdr(&a, &b))
        __builtin_trap(); /* ... or another header than the one asked for */
    free(sub);
}

/* buf with n fill bytes inserted before its k-th 0xFF byte (k mod their
 * number); malloc'd, or NULL when there is none or no memory. */
static uint8_t *insert_fill(const uint8_t *buf, size_t len, unsigned n, unsigned k,
                            size_t *out_len)
{
    size_t ffs = 0, at = 0;
    uint8_t *out;

    for (size_t i = 0; i < len; i++)
        ffs += buf[i] == 0xFF;
    if (n == 0 || ffs == 0)
        return NULL;
    k %= ffs;
    for (at = 0; at < len; at++)
        if (buf[at] == 0xFF && k-- == 0)
            break;
    out = malloc(len + n);
    if (!out)
        return NULL;
    memcpy(out, buf, at);
    memset(out + at, 0xFF, n);
    memcpy(out + at + n, buf + at, len - at);
    *out_len = len + n;
    return out;
}

/* Decodes the crop of choices c from buf with tiles allowed or not; the
 * result, with *roi and the crop in *box. */
static int crop(struct jpg_dec *d, bool tiles, const uint8_t *c, const uint8_t *buf, size_t len,
                struct jpg_roi *roi, uint32_t box[4])
{
    static const struct jpg_limits lim = { .pixel_cap = 1 << 20, .scan_cap = 20 };
    struct jpg_header hdr;
    struct rf_err err;
    uint32_t w, h;
    int rc;

    jpg_set_tiles(d, tiles);
    rc = jpg_open(d, buf, len, &lim, &hdr, &err);
    if (rc == 0)
        rc = jpg_start(d, 1u << (c[0] & 3), &w, &h, &err);
    if (rc < 0)
        return rc;
    box[0] = (uint32_t)((uint64_t)w * c[1] / 256);
    box[1] = box[0] + 1 + (uint32_t)((uint64_t)(w - box[0] - 1) * c[2] / 255);
    box[2] = (uint32_t)((uint64_t)h * c[3] / 256);
    box[3] = box[2] + 1 + (uint32_t)((uint64_t)(h - box[2] - 1) * c[4] / 255);
    return jpg_read(d, box[0], box[1], box[2], box[3], roi, &err);
}

static bool covers(const struct jpg_roi *r, const uint32_t box[4])
{
    return r->x0 <= box[0] && r->x0 + r->w >= box[1] && r->y0 == box[2] &&
           r->h == box[3] - box[2];
}

static void check_crop(const uint8_t *c, const uint8_t *buf, size_t len)
{
    static struct jpg_dec *tiled, *plain;
    struct jpg_roi a = { 0 }, b = { 0 };
    uint32_t box_a[4], box_b[4];
    int ra, rb;

    if (!tiled && !(tiled = jpg_new()))
        return;
    if (!plain && !(plain = jpg_new()))
        return;
    ra = crop(tiled, true, c, buf, len, &a, box_a);
    rb = crop(plain, false, c, buf, len, &b, box_b);
    if (ra == -ENOMEM || rb == -ENOMEM)
        return;
    if (ra < 0 && rb == 0)
        __builtin_trap(); /* the tile path failed a file that decodes */
    if (ra == 0 && rb < 0 && !a.from_tiles)
        __builtin_trap(); /* the same decode, another result */
    if (ra < 0 || rb < 0)
        return;
    if (memcmp(box_a, box_b, sizeof(box_a)) != 0 || !covers(&a, box_a) || !covers(&b, box_b))
        __builtin_trap();
    for (uint32_t y = 0; y < a.h; y++)
        if (memcmp(a.pix + y * a.stride + (box_a[0] - a.x0) * 3,
                   b.pix + y * b.stride + (box_a[0] - b.x0) * 3,
                   (size_t)(box_a[1] - box_a[0]) * 3) != 0)
            __builtin_trap(); /* the tiles' pixels are not the file's */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *buf = data + CHOICES;
    size_t len, flen;
    uint8_t *filled;

    if (size < CHOICES)
        return 0;
    len = size - CHOICES;
    filled = insert_fill(buf, len, data[5] & 7, data[6], &flen);
    if (filled) {
        buf = filled;
        len = flen;
    }
    (void)jpg_count_scans(buf, len, 50);
    check_walk(buf, len, data[7]);
    check_crop(data, buf, len);
    free(filled);
    return 0;
}
