/*
 * test_jpeg_roi.c - the workers' region-of-interest JPEG decoder
 * (daemon/worker/jpeg.c) on JPEGs made here with libjpeg:
 *   - a region decoded at scale s/8 covers what was asked, holds exactly
 *     its rows, and its pixels are the full decode's at that scale
 *     (4:4:4, 4:2:2, 4:2:0, gray, progressive, restart markers);
 *   - a file whose restart intervals are tiles (jpeg.h, struct jpg_tiles)
 *     decodes a region from the tiles under it, with the same pixels as
 *     the file decoded the ordinary way (jpg_set_tiles(false)), for every
 *     sampling, interval and scale, with fill bytes before the markers or
 *     without; files whose intervals are not tiles, and damaged markers,
 *     go the ordinary way;
 *   - geometry: a feature at (X, Y) of the original is at (X, Y) * s/8 in
 *     the scaled region;
 *   - the marker-level scan count (marker lengths read as libjpeg reads
 *     them), the caps, CMYK conversion, and every kind of bad input
 *     refused with a reason.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jpeg.h"
#include "jpeg_make.h"
#include "tap.h"

static const struct jpg_limits no_caps = { 0, 0 };

static uint64_t seed = 0x9E3779B97F4A7C15ull;

static uint32_t below(uint32_t n)
{
    uint64_t z = (seed += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (uint32_t)((z ^ (z >> 31)) % n);
}

/* Full decode at scale s into a malloc'd RGB buffer; 0 or the error. */
static int full(struct jpg_dec *d, const uint8_t *buf, size_t len, unsigned s, uint8_t **out,
                uint32_t *w, uint32_t *h)
{
    struct jpg_header hdr;
    struct jpg_roi roi;
    struct rf_err err;
    int rc;

    jpg_set_tiles(d, false);
    rc = jpg_open(d, buf, len, &no_caps, &hdr, &err);
    jpg_set_tiles(d, true);
    if (rc == 0)
        rc = jpg_start(d, s, w, h, &err);
    if (rc == 0)
        rc = jpg_read(d, 0, *w, 0, *h, &roi, &err);
    if (rc < 0)
        return rc;
    *out = malloc((size_t)*w * *h * 3);
    for (uint32_t y = 0; y < *h; y++)
        memcpy(*out + (size_t)y * *w * 3, roi.pix + y * roi.stride, (size_t)*w * 3);
    return 0;
}

/* Random regions at every power-of-two scale of the W x H JPEG buf against
 * its full decode; tiled: how many of the 48 must come from tiles (at
 * least; when 0 and the file has restart markers, exactly 0: its
 * intervals are not tiles). */
static void region_checks_buf(const char *name, const uint8_t *buf, size_t len, uint32_t W,
                              uint32_t H, bool restart, int tiled)
{
    struct jpg_dec *d = jpg_new();
    int dims_ok = 1, cover_ok = 1, same = 1, regions = 0, from_tiles = 0;

    for (unsigned s = 1; s <= 8; s *= 2) {
        uint8_t *ref;
        uint32_t sw, sh;

        if (full(d, buf, len, s, &ref, &sw, &sh) < 0) {
            tap_ok(0, "%s: full decode at %u/8", name, s);
            continue;
        }
        dims_ok &= sw == (W * s + 7) / 8 && sh == (H * s + 7) / 8;
        for (int t = 0; t < 12; t++) {
            uint32_t x0 = below(sw), y0 = below(sh);
            uint32_t x1 = x0 + 1 + below(sw - x0), y1 = y0 + 1 + below(sh - y0);
            struct jpg_header hdr;
            struct jpg_roi roi;
            struct rf_err err;
            uint32_t w2, h2;

            if (jpg_open(d, buf, len, &no_caps, &hdr, &err) < 0 ||
                jpg_start(d, s, &w2, &h2, &err) < 0 ||
                jpg_read(d, x0, x1, y0, y1, &roi, &err) < 0) {
                tap_diag("%s: region %u..%u x %u..%u at %u/8: %s", name, x0, x1, y0, y1, s,
                         err.msg);
                cover_ok = 0;
                continue;
            }
            regions++;
            from_tiles += roi.from_tiles;
            cover_ok &= roi.x0 <= x0 && roi.x0 + roi.w >= x1 && roi.y0 == y0 &&
                        roi.h == y1 - y0 && roi.x0 + roi.w <= sw;
            for (uint32_t y = y0; y < y1; y++)
                for (uint32_t x = x0; x < x1; x++)
                    if (memcmp(roi.pix + (y - y0) * roi.stride + (x - roi.x0) * 3,
                               ref + ((size_t)y * sw + x) * 3, 3) != 0) {
                        if (same)
                            tap_diag("%s: %u/8 region %u..%u x %u..%u differs at (%u,%u)", name,
                                     s, x0, x1, y0, y1, x, y);
                        same = 0;
                    }
        }
        free(ref);
    }
    tap_ok(dims_ok, "%s %ux%u: scaled sizes are ceil(size * s / 8) for s = 1, 2, 4, 8", name, W,
           H);
    tap_ok(cover_ok && regions == 48, "%s: 48 random regions cover what was asked, exact rows",
           name);
    tap_ok(same, "%s: every region's pixels are the full decode's at its scale", name);
    if (tiled)
        tap_ok(from_tiles >= tiled, "%s: %d of 48 regions decoded from tiles (at least %d)", name,
               from_tiles, tiled);
    else if (restart)
        tap_ok(from_tiles == 0, "%s: intervals that are not tiles: no region from tiles (%d)",
               name, from_tiles);
    jpg_free(d);
}

static void region_checks_tiled(const char *name, const struct jm_opts *o, uint32_t W,
                                uint32_t H, int tiled)
{
    size_t len;
    uint8_t *buf = jm_encode(W, H, o, jm_pattern, NULL, &len);

    region_checks_buf(name, buf, len, W, H, o->restart || o->restart_mcus, tiled);
    free(buf);
}

static void region_checks(const char *name, const struct jm_opts *o, uint32_t W, uint32_t H)
{
    region_checks_tiled(name, o, W, H, 0);
}

/* A region of a tiled file whose markers were damaged: RSTn out of
 * sequence, or a tile's data cut short.  The tiles are not used and the
 * file's own decode reports the damage, or, where the damage is outside
 * what the region needs, the pixels are still the undamaged file's. */
static void tile_damage_checks(void)
{
    struct jm_opts o = { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .restart_mcus = 2 };
    size_t len, n = 0;
    uint8_t *buf = jm_encode(320, 240, &o, jm_pattern, NULL, &len);
    struct jpg_dec *d = jpg_new();
    struct jpg_header hdr;
    struct jpg_roi roi;
    struct rf_err err;
    uint32_t w, h;
    int rc;

    for (size_t i = 0; i + 1 < len; i++)
        if (buf[i] == 0xFF && buf[i + 1] >= 0xD0 && buf[i + 1] <= 0xD7 && ++n == 40) {
            buf[i + 1] = (uint8_t)(0xD0 + ((buf[i + 1] - 0xD0 + 3) & 7)); /* RST out of order */
            break;
        }
    tap_ok(n == 40, "the 4:2:0 320x240 file has 40 restart markers or more (%zu)", n);
    rc = jpg_open(d, buf, len, &no_caps, &hdr, &err);
    if (rc == 0)
        rc = jpg_start(d, 8, &w, &h, &err);
    if (rc == 0)
        rc = jpg_read(d, 100, 200, 100, 200, &roi, &err);
    tap_ok(rc == -EBADMSG && strstr(err.msg, "corrupt JPEG") != NULL,
           "a restart marker out of sequence: not decoded from tiles, refused as corrupt (%s)",
           rc ? err.msg : "decoded");
    jpg_free(d);
    free(buf);

    /* jpg_tiles_find itself: 320x240 at 4:2:0 is 20 x 15 MCUs, 10 tiles a row */
    buf = jm_encode(320, 240, &o, jm_pattern, NULL, &len);
    {
        struct jpg_tiles t = { .mcu_w = 16, .mcu_h = 16, .interval = 2, .cols = 10, .rows = 15 };
        int ok = jpg_tiles_find(buf, len, &t, 15) == 0;
        uint8_t *sub;
        size_t sub_len;

        for (size_t i = 0; ok && i + 1 < 150; i++)
            ok = t.end[i] < t.end[i + 1] && buf[t.end[i]] == 0xFF &&
                 buf[t.end[i] + 1] == 0xD0 + (i & 7);
        tap_ok(ok && buf[t.end[149]] == 0xFF && buf[t.end[149] + 1] == 0xD9,
               "jpg_tiles_find: 150 tiles, each ended by RSTn in turn, the last by EOI");
        TAP_IS_INT(jpg_tiles_find(buf, t.end[70], &t, 15), -EBADMSG,
                   "the file cut in row 7: all 15 rows not found");
        TAP_IS_INT(jpg_tiles_find(buf, t.end[70], &t, 7), 0,
                   "the file cut in row 7: its first 7 rows found");
        t.rows = 14;
        TAP_IS_INT(jpg_tiles_find(buf, len, &t, 14), -EBADMSG,
                   "more restart intervals than the header's tiles: refused");
        t.rows = 15;
        jpg_tiles_find(buf, len, &t, 15);
        sub = malloc(jpg_tiles_size(buf, &t, 3, 6, 4, 9));
        sub_len = jpg_tiles_build(buf, &t, 3, 6, 4, 9, 96, 80, sub);
        tap_ok(sub_len <= jpg_tiles_size(buf, &t, 3, 6, 4, 9) && sub[sub_len - 2] == 0xFF &&
                   sub[sub_len - 1] == 0xD9 && sub[t.sof + 5] == 0 && sub[t.sof + 6] == 80 &&
                   sub[t.sof + 7] == 0 && sub[t.sof + 8] == 96,
               "jpg_tiles_build: tiles 3..5 x rows 4..8 as a 96x80 JPEG within the size bound");
        free(sub);
        jpg_tiles_free(&t);
    }
    free(buf);
}

/* buf, a JPEG as libjpeg writes it (no fill or stray bytes), with n fill
 * bytes (0xFF, which JPEG allows before any marker) before each marker
 * after SOI whose code is `code`, or before every one when code is 0:
 * the headers' segments, the scan's restart markers, EOI.  Malloc'd,
 * *out_len bytes. */
static uint8_t *add_fill(const uint8_t *buf, size_t len, unsigned n, uint8_t code,
                         size_t *out_len)
{
    size_t bound = len, i = 2, o = 2;
    bool scan = false;
    uint8_t *out;

    for (size_t k = 2; k + 1 < len; k++)
        bound += buf[k] == 0xFF && buf[k + 1] != 0x00 ? n : 0;
    out = malloc(bound);
    memcpy(out, buf, 2);
    while (i + 1 < len) {
        uint8_t m = buf[i + 1];
        size_t seg = 2;

        if (scan && (buf[i] != 0xFF || m == 0x00)) {
            out[o++] = buf[i++];
            continue;
        }
        if (code == 0 || m == code) {
            memset(out + o, 0xFF, n);
            o += n;
        }
        if (!scan)
            seg += ((size_t)buf[i + 2] << 8) | buf[i + 3];
        if (m == 0xD9)
            seg = len - i;
        memcpy(out + o, buf + i, seg);
        o += seg;
        i += seg;
        scan |= m == 0xDA;
    }
    memcpy(out + o, buf + i, len - i);
    *out_len = o + len - i;
    return out;
}

/* Fill bytes before markers change no pixel, and the tiles' JPEG of a file
 * with them is as good as any: the tile walk skips them as libjpeg does,
 * and patches the size into the SOF's own bytes, not the ones a fill byte
 * early (which, for crops of certain sizes, libjpeg accepted as a header
 * with another width and served sheared). */
static void fill_checks(void)
{
    static const struct {
        const char *name;
        struct jm_opts o;
        uint32_t w, h;
        int tiled;
    } files[] = {
        { "4:2:0, 3 MCUs", { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .restart_mcus = 3 },
          333, 250, 24 },
        { "gray, 1 MCU", { .space = JM_GRAY, .restart_mcus = 1 }, 97, 130, 24 },
        { "CMYK, 3 MCUs", { .space = JM_CMYK, .restart_mcus = 3 }, 190, 60, 12 },
    };
    static const struct {
        unsigned n;
        uint8_t code;
        const char *where;
    } fills[] = {
        { 1, 0xC0, "1 fill byte before SOF" },
        { 3, 0xC0, "3 fill bytes before SOF" },
        { 1, 0, "1 fill byte before every marker" },
        { 5, 0, "5 fill bytes before every marker" },
    };
    struct jpg_dec *d = jpg_new();

    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        size_t len;
        uint8_t *buf = jm_encode(files[f].w, files[f].h, &files[f].o, jm_pattern, NULL, &len);
        uint8_t *ref;
        uint32_t rw, rh;

        if (full(d, buf, len, 8, &ref, &rw, &rh) < 0) {
            tap_ok(0, "fill %s: the file without fill decodes", files[f].name);
            free(buf);
            continue;
        }
        for (size_t k = 0; k < sizeof(fills) / sizeof(fills[0]); k++) {
            size_t flen;
            uint8_t *fb = add_fill(buf, len, fills[k].n, fills[k].code, &flen), *pix = NULL;
            uint32_t w, h;
            char name[128];

            snprintf(name, sizeof(name), "tiles %s, %s", files[f].name, fills[k].where);
            tap_ok(full(d, fb, flen, 8, &pix, &w, &h) == 0 && w == rw && h == rh &&
                       memcmp(pix, ref, (size_t)w * h * 3) == 0,
                   "%s: the same pixels as without (%zu bytes more)", name, flen - len);
            region_checks_buf(name, fb, flen, files[f].w, files[f].h, true, files[f].tiled);
            free(pix);
            free(fb);
        }
        free(ref);
        free(buf);
    }

    /* jpg_tiles_build: the tiles' JPEG has the size it was built for */
    {
        struct jm_opts o = { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .restart_mcus = 2 };
        struct jpg_tiles t = { .mcu_w = 16, .mcu_h = 16, .interval = 2, .cols = 10, .rows = 15 };
        size_t len, flen, sub_len;
        uint8_t *buf = jm_encode(320, 240, &o, jm_pattern, NULL, &len);
        uint8_t *fb = add_fill(buf, len, 2, 0xC0, &flen), *sub;
        struct jpg_header hdr;
        struct rf_err err;
        int rc = jpg_tiles_find(fb, flen, &t, 15);

        TAP_IS_INT(rc, 0, "jpg_tiles_find: 2 fill bytes before SOF, the 150 tiles found");
        if (rc == 0) {
            sub = malloc(jpg_tiles_size(fb, &t, 3, 6, 4, 9));
            sub_len = jpg_tiles_build(fb, &t, 3, 6, 4, 9, 96, 80, sub);
            jpg_set_tiles(d, false);
            rc = jpg_open(d, sub, sub_len, &no_caps, &hdr, &err);
            jpg_set_tiles(d, true);
            jpg_abort(d);
            tap_ok(rc == 0 && hdr.width == 96 && hdr.height == 80 && hdr.components == 3,
                   "  jpg_tiles_build: its tiles' JPEG is 96x80 with 3 components (%s: %ux%u)",
                   rc ? err.msg : "read", rc ? 0 : hdr.width, rc ? 0 : hdr.height);
            free(sub);
        }
        jpg_tiles_free(&t);
        free(fb);
        free(buf);
    }
    jpg_free(d);
}

/* The crop that came out sheared: a 2560x2072 gray file with a restart
 * marker every MCU and one fill byte before SOF, cropped to 1..1023 x
 * 1..1028 at scale 4/8.  The tiles under it are 2056x2064 pixels; with the
 * size written a byte early, libjpeg read the SOF as 8-bit, 4104 high and
 * 2048 wide (the width's low byte, 0, left as it was), and the tiles' 257
 * MCUs a row filled rows of 256, each row one MCU further along: sheared,
 * without a warning. */
static void gray_px(uint32_t x, uint32_t y, uint8_t *px, void *arg);

static void shear_checks(void)
{
    struct jm_opts o = { .space = JM_GRAY, .restart_mcus = 1, .quality = 75 };
    size_t len, flen;
    uint8_t *buf = jm_encode(2560, 2072, &o, gray_px, NULL, &len);
    uint8_t *fb = add_fill(buf, len, 1, 0xC0, &flen);
    struct jpg_dec *d = jpg_new();
    struct jpg_roi ref = { 0 }, roi = { 0 };
    struct jpg_header hdr;
    struct rf_err err;
    uint8_t *keep = NULL;
    uint32_t w, h;
    int rc, same = 1;

    for (int tiles = 0; tiles < 2; tiles++) {
        jpg_set_tiles(d, tiles);
        rc = jpg_open(d, fb, flen, &no_caps, &hdr, &err);
        if (rc == 0)
            rc = jpg_start(d, 4, &w, &h, &err);
        if (rc == 0)
            rc = jpg_read(d, 1, 1023, 1, 1028, tiles ? &roi : &ref, &err);
        tap_ok(rc == 0, "2560x2072, fill byte before SOF: 1..1023 x 1..1028 at 4/8 decodes %s (%s)",
               tiles ? "from the tiles" : "the ordinary way", rc ? err.msg : "ok");
        if (rc == 0 && !tiles) {
            keep = malloc(ref.stride * ref.h);
            memcpy(keep, ref.pix, ref.stride * ref.h);
            ref.pix = keep;
        }
    }
    tap_ok(roi.from_tiles, "  the crop came from the tiles");
    for (uint32_t y = 1; keep && y < 1028 && same; y++)
        for (uint32_t x = 1; x < 1023 && same; x++)
            if (memcmp(roi.pix + (y - roi.y0) * roi.stride + (x - roi.x0) * 3,
                       ref.pix + (y - ref.y0) * ref.stride + (x - ref.x0) * 3, 3) != 0) {
                tap_diag("  first difference at (%u,%u)", x, y);
                same = 0;
            }
    tap_ok(keep && same, "  its pixels are the ordinary decode's, not sheared");
    free(keep);
    jpg_free(d);
    free(fb);
    free(buf);
}

struct square {
    uint32_t x0, x1, y0, y1;
};

static void square_px(uint32_t x, uint32_t y, uint8_t *px, void *arg)
{
    const struct square *s = arg;
    uint8_t v = x >= s->x0 && x < s->x1 && y >= s->y0 && y < s->y1 ? 255 : 0;

    px[0] = px[1] = px[2] = v;
}

/* A bright square at a known place lands at that place times s/8. */
static void geometry_checks(void)
{
    struct square sq = { 296, 360, 168, 232 };
    struct jm_opts o = { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .quality = 95 };
    size_t len;
    uint8_t *buf = jm_encode(640, 480, &o, square_px, &sq, &len);
    struct jpg_dec *d = jpg_new();
    int ok = 1;

    for (unsigned s = 1; s <= 8; s *= 2) {
        double k = s / 8.0, sx = 0, sy = 0, n = 0;
        double ex = (sq.x0 + sq.x1) / 2.0 * k, ey = (sq.y0 + sq.y1) / 2.0 * k;
        uint32_t x0 = (uint32_t)(200 * k), x1 = (uint32_t)(460 * k);
        uint32_t y0 = (uint32_t)(100 * k), y1 = (uint32_t)(300 * k), w, h;
        struct jpg_header hdr;
        struct jpg_roi roi;
        struct rf_err err;

        if (jpg_open(d, buf, len, &no_caps, &hdr, &err) < 0 || jpg_start(d, s, &w, &h, &err) < 0 ||
            jpg_read(d, x0, x1, y0, y1, &roi, &err) < 0) {
            ok = 0;
            continue;
        }
        for (uint32_t y = 0; y < roi.h; y++)
            for (uint32_t x = 0; x < roi.w; x++)
                if (roi.pix[y * roi.stride + x * 3 + 1] > 128) {
                    sx += roi.x0 + x + 0.5;
                    sy += roi.y0 + y + 0.5;
                    n++;
                }
        if (n == 0 || fabs(sx / n - ex) > 0.5 || fabs(sy / n - ey) > 0.5) {
            tap_diag("scale %u/8: square's center at (%.2f, %.2f), expected (%.2f, %.2f)", s,
                     n ? sx / n : -1, n ? sy / n : -1, ex, ey);
            ok = 0;
        }
    }
    tap_ok(ok, "a square at (328, 200) of 640x480 is at (328, 200) * s/8 in every scaled region");
    jpg_free(d);
    free(buf);
}

static int count_ffda(const uint8_t *b, size_t n)
{
    int c = 0;

    for (size_t i = 0; i + 1 < n; i++)
        c += b[i] == 0xFF && b[i + 1] == 0xDA;
    return c;
}

static void scan_checks(void)
{
    struct jm_opts base = { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .restart = 1 };
    struct jm_opts prog = { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .progressive = true };
    size_t lb, lp;
    uint8_t *b = jm_encode(100, 60, &base, jm_pattern, NULL, &lb);
    uint8_t *p = jm_encode(100, 60, &prog, jm_pattern, NULL, &lp);
    uint8_t bad[] = { 0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x01, 0x00 };
    uint8_t unknown[] = { 0xFF, 0xD8, 0xFF, 0xF0, 0x00, 0x02, 0xFF, 0xDA, 0x00, 0x02 };
    struct jpg_dec *d = jpg_new();
    struct jpg_limits cap3 = { .scan_cap = 3 };
    struct jpg_header hdr;
    struct rf_err err;
    int n = jpg_count_scans(p, lp, 1000);

    TAP_IS_INT(jpg_count_scans(b, lb, 1000), 1, "a baseline file with restart markers: 1 scan");
    tap_ok(n == count_ffda(p, lp) && n >= 6, "a progressive file: %d scans, as many SOS markers",
           n);
    TAP_IS_INT(jpg_count_scans(p, lp, 3), 4, "counting stops past the limit (limit + 1)");
    TAP_IS_INT(jpg_count_scans(p + 1, lp - 1, 100), -EBADMSG, "no SOI: -EBADMSG");
    TAP_IS_INT(jpg_count_scans(bad, sizeof(bad), 100), -EBADMSG, "DQT of length 1: -EBADMSG");
    TAP_IS_INT(jpg_count_scans(unknown, sizeof(unknown), 100), -EBADMSG,
               "a marker libjpeg does not know (FF F0): -EBADMSG");
    {
        /* libjpeg skips an APPn or COM of length 0 or 1 as a length word
         * alone; the count must walk it the same way */
        size_t l2 = lp + 8;
        uint8_t *p2 = malloc(l2), *a = NULL, *b2 = NULL;
        uint32_t w1, h1, w2, h2;

        memcpy(p2, p, 2);
        memcpy(p2 + 2, "\xFF\xFE\x00\x00\xFF\xE3\x00\x01", 8);
        memcpy(p2 + 10, p + 2, lp - 2);
        TAP_IS_INT(jpg_count_scans(p2, l2, 1000), n,
                   "COM of length 0 and APP3 of length 1: read as libjpeg reads them");
        tap_ok(full(d, p, lp, 8, &a, &w1, &h1) == 0 && full(d, p2, l2, 8, &b2, &w2, &h2) == 0 &&
                   w1 == w2 && h1 == h2 && memcmp(a, b2, (size_t)w1 * h1 * 3) == 0,
               "  and the file decodes to the same pixels");
        free(a);
        free(b2);
        free(p2);
    }
    TAP_IS_INT(jpg_count_scans(p, 40, 100), 0, "cut before the first scan: 0");
    TAP_IS_INT(jpg_open(d, p, lp, &cap3, &hdr, &err), -E2BIG,
               "a progressive file over a scan cap of 3 is refused before decoding");
    tap_ok(strstr(err.msg, "scan") != NULL, "  with a reason: %s", err.msg);
    TAP_IS_INT(jpg_open(d, b, lb, &cap3, &hdr, &err), 0, "a baseline file passes the scan cap");
    tap_ok(!hdr.multi_scan && hdr.scans == 1 && hdr.width == 100 && hdr.height == 60,
           "  header: 100x60, one scan");
    jpg_abort(d);
    jpg_free(d);
    free(b);
    free(p);
}

static void cmyk_px(uint32_t x, uint32_t y, uint8_t *px, void *arg)
{
    /* stored inverted, as Photoshop and Pillow write Adobe CMYK:
     * left half C=0 M=255 Y=255 K=0 (red), right half K=255 (black) */
    (void)y;
    (void)arg;
    if (x < 32) {
        px[0] = 255 - 0;
        px[1] = 255 - 255;
        px[2] = 255 - 255;
        px[3] = 255 - 0;
    } else {
        px[0] = px[1] = px[2] = 255;
        px[3] = 0;
    }
}

static void cmyk_checks(void)
{
    struct jm_opts o = { .space = JM_CMYK, .quality = 100 };
    size_t len;
    uint8_t *buf = jm_encode(64, 16, &o, cmyk_px, NULL, &len), *rgb = NULL;
    struct jpg_dec *d = jpg_new();
    uint32_t w, h;
    int rc = full(d, buf, len, 8, &rgb, &w, &h);

    tap_ok(rc == 0, "a CMYK JPEG (Adobe marker) decodes");
    if (rc == 0) {
        const uint8_t *l = rgb + (8 * 64 + 8) * 3, *r = rgb + (8 * 64 + 50) * 3;

        tap_ok(l[0] > 245 && l[1] < 10 && l[2] < 10, "  C=0 M=Y=255 K=0 is red: %u %u %u", l[0],
               l[1], l[2]);
        tap_ok(r[0] < 10 && r[1] < 10 && r[2] < 10, "  K=255 is black: %u %u %u", r[0], r[1],
               r[2]);
    }
    free(rgb);
    jpg_free(d);
    free(buf);
}

static void gray_px(uint32_t x, uint32_t y, uint8_t *px, void *arg)
{
    (void)arg;
    px[0] = (uint8_t)(x + y);
}

static void bad_checks(void)
{
    struct jm_opts o = { .space = JM_RGB, .h_samp = 2, .v_samp = 2 };
    struct jm_opts g = { .space = JM_GRAY };
    size_t len, glen;
    uint8_t *buf = jm_encode(160, 120, &o, jm_pattern, NULL, &len);
    uint8_t *gbuf = jm_encode(20, 10, &g, gray_px, NULL, &glen);
    uint8_t png[] = { 0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13 };
    uint8_t *flip = malloc(len);
    struct jpg_dec *d = jpg_new();
    struct jpg_limits cap = { .pixel_cap = 160 * 120 - 1 };
    struct jpg_header hdr;
    struct jpg_roi roi;
    struct rf_err err;
    uint32_t w, h;
    int rc;

    TAP_IS_INT(jpg_open(d, buf, 0, &no_caps, &hdr, &err), -EBADMSG, "zero bytes: -EBADMSG");
    tap_ok(strstr(err.msg, "empty") != NULL, "  reason: %s", err.msg);
    TAP_IS_INT(jpg_open(d, png, sizeof(png), &no_caps, &hdr, &err), -EBADMSG, "PNG: -EBADMSG");
    tap_ok(strstr(err.msg, "PNG") != NULL, "  reason: %s", err.msg);
    TAP_IS_INT(jpg_open(d, buf, 120, &no_caps, &hdr, &err), -EBADMSG,
               "truncated in the header: -EBADMSG");
    tap_ok(err.msg[0] != 0, "  reason: %s", err.msg);
    rc = jpg_open(d, buf, len / 2, &no_caps, &hdr, &err);
    if (rc == 0)
        rc = jpg_start(d, 8, &w, &h, &err);
    if (rc == 0)
        rc = jpg_read(d, 0, w, 0, h, &roi, &err);
    TAP_IS_INT(rc, -EBADMSG, "truncated in the scan: a warning, -EBADMSG, not grey pixels");
    tap_ok(strstr(err.msg, "Premature end") != NULL, "  reason: %s", err.msg);
    rc = jpg_open(d, buf, len / 2, &no_caps, &hdr, &err);
    if (rc == 0)
        rc = jpg_start(d, 8, &w, &h, &err);
    if (rc == 0)
        rc = jpg_read(d, 0, 8, 0, 8, &roi, &err);
    TAP_IS_INT(rc, 0, "  ... while a region inside the data that is there decodes");
    /* a corrupted scan: flip bits in the entropy-coded data */
    memcpy(flip, buf, len);
    for (size_t i = len / 3; i < len - 4; i += 37)
        flip[i] ^= 0x5A;
    rc = jpg_open(d, flip, len, &no_caps, &hdr, &err);
    if (rc == 0)
        rc = jpg_start(d, 8, &w, &h, &err);
    if (rc == 0)
        rc = jpg_read(d, 0, w, 0, h, &roi, &err);
    TAP_IS_INT(rc, -EBADMSG, "bit flips in the scan: -EBADMSG");
    tap_ok(err.msg[0] != 0, "  reason: %s", err.msg);
    TAP_IS_INT(jpg_open(d, buf, len, &cap, &hdr, &err), -E2BIG,
               "one pixel over the pixel cap: -E2BIG");
    tap_ok(strstr(err.msg, "pixel cap") != NULL, "  reason: %s", err.msg);
    /* the decoder is reusable after every failure */
    free(flip);
    flip = NULL;
    rc = full(d, gbuf, glen, 8, &flip, &w, &h);
    tap_ok(rc == 0 && w == 20 && h == 10 && flip[(5 * 20 + 7) * 3] == flip[(5 * 20 + 7) * 3 + 1] &&
               flip[(5 * 20 + 7) * 3] == flip[(5 * 20 + 7) * 3 + 2],
           "after the failures, a gray JPEG decodes to RGB with equal channels");
    TAP_IS_INT(jpg_start(d, 8, &w, &h, &err), -EINVAL, "jpg_start with no image open: -EINVAL");
    rc = jpg_open(d, buf, len, &no_caps, &hdr, &err);
    if (rc == 0)
        rc = jpg_start(d, 8, &w, &h, &err);
    TAP_IS_INT(rc == 0 ? jpg_read(d, 0, w + 1, 0, h, &roi, &err) : rc, -EINVAL,
               "a region outside the image: -EINVAL");
    free(flip);
    jpg_free(d);
    jpg_free(NULL);
    free(buf);
    free(gbuf);
}

static void scale_checks(void)
{
    TAP_IS_INT(jpg_pick_scale(1000, 1000, 224, 1.0), 2, "1000 px for 224: 2/8 (250)");
    TAP_IS_INT(jpg_pick_scale(1792, 1792, 224, 1.0), 1, "1792 px for 224: 1/8 exactly");
    TAP_IS_INT(jpg_pick_scale(447, 2000, 224, 1.0), 8, "447 px for 224: full scale (1/2 is 223.5)");
    TAP_IS_INT(jpg_pick_scale(448, 448, 224, 1.0), 4, "448 px for 224: 4/8");
    TAP_IS_INT(jpg_pick_scale(100, 100, 224, 1.0), 8, "smaller than the output: full scale");
    /* train crops: cover 0.625 */
    TAP_IS_INT(jpg_pick_scale(447, 2000, 224, JPG_COVER_TRAIN), 4,
               "train: 447 px for 224: 4/8 (223.5, over 0.625 x 224)");
    TAP_IS_INT(jpg_pick_scale(279, 2000, 224, JPG_COVER_TRAIN), 8,
               "train: 279 px for 224: full scale (1/2 is 139.5)");
    TAP_IS_INT(jpg_pick_scale(280, 280, 224, JPG_COVER_TRAIN), 4,
               "train: 280 px for 224: 4/8 (140 = 0.625 x 224)");
    TAP_IS_INT(jpg_pick_scale(559, 2000, 224, JPG_COVER_TRAIN), 4,
               "train: 559 px for 224: 4/8 (2/8 is 139.75)");
    TAP_IS_INT(jpg_pick_scale(1120, 1120, 224, JPG_COVER_TRAIN), 1, "train: 1120 px: 1/8 (140)");
    TAP_IS_INT(jpg_pick_scale(100, 100, 224, JPG_COVER_TRAIN), 8, "train: smaller: full scale");
}

int main(void)
{
    struct jm_opts s444 = { .space = JM_RGB, .h_samp = 1, .v_samp = 1 };
    struct jm_opts s422 = { .space = JM_RGB, .h_samp = 2, .v_samp = 1 };
    struct jm_opts s420 = { .space = JM_RGB, .h_samp = 2, .v_samp = 2 };
    struct jm_opts gray = { .space = JM_GRAY };
    struct jm_opts prog = { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .progressive = true };
    struct jm_opts rst = { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .restart = 2 };

    region_checks("4:4:4", &s444, 203, 157);
    region_checks("4:2:2", &s422, 256, 171);
    region_checks("4:2:0", &s420, 333, 250);
    region_checks("gray", &gray, 97, 130);
    region_checks("progressive 4:2:0", &prog, 210, 190);
    region_checks("restart markers", &rst, 180, 140);
    {
        struct jm_opts t420 = { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .restart_mcus = 3 };
        struct jm_opts t422 = { .space = JM_RGB, .h_samp = 2, .v_samp = 1, .restart_mcus = 4 };
        struct jm_opts t444 = { .space = JM_RGB, .h_samp = 1, .v_samp = 1, .restart_mcus = 1 };
        struct jm_opts t444b = { .space = JM_RGB, .h_samp = 1, .v_samp = 1, .restart_mcus = 2 };
        struct jm_opts tgray = { .space = JM_GRAY, .restart_mcus = 1 };
        struct jm_opts trows = { .space = JM_GRAY, .restart = 1 };
        struct jm_opts tcmyk = { .space = JM_CMYK, .restart_mcus = 3 };
        struct jm_opts tnot = { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .restart_mcus = 4 };

        /* 333 px: 21 MCUs of 16 a row, 7 tiles of 3 */
        region_checks_tiled("tiles 4:2:0, 3 MCUs", &t420, 333, 250, 24);
        region_checks_tiled("tiles 4:2:2, 4 MCUs", &t422, 256, 171, 24);
        region_checks_tiled("tiles 4:4:4, 1 MCU", &t444, 203, 157, 24);
        region_checks_tiled("tiles 4:4:4, 2 MCUs", &t444b, 207, 9, 12);
        region_checks_tiled("tiles gray, 1 MCU", &tgray, 97, 130, 24);
        region_checks_tiled("tiles gray, a row each", &trows, 97, 130, 12);
        region_checks_tiled("tiles CMYK, 3 MCUs", &tcmyk, 190, 60, 12);
        region_checks("4:2:0, 4 MCUs, 21 a row: not tiles", &tnot, 333, 250);
        tile_damage_checks();
        fill_checks();
        shear_checks();
    }
    geometry_checks();
    scan_checks();
    cmyk_checks();
    bad_checks();
    scale_checks();
    return tap_done();
}
