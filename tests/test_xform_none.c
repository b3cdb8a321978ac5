/*
 * test_xform_none.c - the `none` transform (daemon/worker/xform_image.c):
 * images of one size (the MANIFEST's image_shape) delivered as they are.
 *   - the table has it under ATTACH's word, and the start-up check holds
 *     the two lists to the same names;
 *   - geometry: 3 x H x W (chw) or H x W x 3 (hwc) from image_shape; a
 *     jpeg dataset without the key, another kind, and a size, scale,
 *     ratio, crop or flip other than ATTACH's defaults are refused, saying
 *     why;
 *   - an RFPX record comes out byte for byte, HWC as stored, CHW its planes;
 *   - a JPEG (4:2:0 colour, grayscale) comes out as plain libjpeg decodes
 *     it whole to RGB;
 *   - an image of another size is a bad sample, shape, naming both sizes;
 *     a malformed record is one too, decode; the clocks advance.
 * Datasets are written into a temporary folder with the dataset writer.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "dataset.h"
#include "dataset_writer.h"
#include "jpeg_make.h"
#include "pixels.h"
#include "ring.h"
#include "tap.h"
#include "transform.h"
#include "xform_image.h"

#define H 24
#define W 40

static char root[256];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* Writes a one-record dataset of `kind` at root/name with image_shape
 * h x w (0, 0: none) and opens it; NULL on failure. */
static struct dataset *pack(const char *name, enum dataset_kind kind, uint32_t h, uint32_t w)
{
    struct dataset_writer_opts o = { .kind = kind, .codec = DATASET_CODEC_NONE };
    struct dataset_writer *wr;
    struct dataset *ds = NULL;
    struct rf_err err;
    char path[512];

    snprintf(path, sizeof(path), "%s/%s", root, name);
    if (dataset_writer_create(path, &o, &wr, &err) < 0) {
        tap_diag("create %s: %s", path, err.msg);
        return NULL;
    }
    if (dataset_writer_add(wr, "x", 1, DATASET_NO_LABEL, &err) < 0 ||
        dataset_writer_set_image_shape(wr, h, w, &err) < 0 ||
        dataset_writer_finish(wr, NULL, &err) < 0 || dataset_open(path, &ds, &err) < 0) {
        tap_diag("%s: %s", name, err.msg);
        return NULL;
    }
    return ds;
}

static void pattern(uint32_t x, uint32_t y, uint8_t *px)
{
    px[0] = (uint8_t)(x * 7 + y);
    px[1] = (uint8_t)(y * 13 + 5);
    px[2] = (uint8_t)(x ^ (y * 3));
}

/* An RFPX record of w x h pattern pixels (*len bytes), malloc'd. */
static uint8_t *rfpx(uint32_t w, uint32_t h, size_t *len)
{
    uint8_t *rec;

    *len = px_record_size(w, h);
    rec = malloc(*len);
    if (!rec)
        tap_bail("out of memory");
    px_write_header(rec, w, h);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++)
            pattern(x, y, rec + PX_HEADER_SIZE + ((size_t)y * w + x) * 3);
    return rec;
}

struct test_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
};

static void test_error_exit(j_common_ptr ci)
{
    longjmp(((struct test_err *)ci->err)->jb, 1);
}

/* Plain libjpeg's whole decode to RGB (w x h x 3, malloc'd), or NULL. */
static uint8_t *libjpeg_rgb(const uint8_t *buf, size_t len, uint32_t *w, uint32_t *h)
{
    struct jpeg_decompress_struct d;
    struct test_err e;
    uint8_t *volatile pix = NULL;

    d.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = test_error_exit;
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&d);
        free(pix);
        return NULL;
    }
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, buf, (unsigned long)len);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    *w = d.output_width;
    *h = d.output_height;
    pix = jm_read_pixels(&d);
    if (pix)
        jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return pix;
}

static struct wire_xform params(uint32_t layout)
{
    struct ctl_attach a;

    ctl_attach_defaults(&a);
    return (struct wire_xform){
        .id = (uint32_t)xform_find("none"), .size = a.size, .layout = layout,
        .scale_lo = a.scale[0], .scale_hi = a.scale[1], .ratio_lo = a.ratio[0],
        .ratio_hi = a.ratio[1], .flip = a.flip, .crop = a.crop, .pixel_cap = 1 << 20,
    };
}

/* HWC pixels (w x h) and a CHW sample: the same? */
static bool planes_of(const uint8_t *hwc, const uint8_t *chw, uint32_t w, uint32_t h)
{
    size_t n = (size_t)w * h;

    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            if (chw[c * n + i] != hwc[i * 3 + c])
                return false;
    return true;
}

static void table(void)
{
    int i = xform_find("none");
    const struct xform_def *xf = i >= 0 ? xform_get((uint32_t)i) : NULL;

    tap_ok(xf && !xf->direct && strcmp(xf->name, ctl_transform_name(CTL_TRANSFORM_NONE)) == 0,
           "none is in the workers' table under ATTACH's word");
    TAP_IS_INT(xform_table_check(), 0, "the table matches ATTACH's transform words");
    tap_ok(strstr(xform_names(), "none") != NULL, "xform_names lists it (%s)", xform_names());
}

static void geometry(struct dataset *shaped, struct dataset *plain, struct dataset *bytes)
{
    const struct xform_def *xf = xform_get((uint32_t)xform_find("none"));
    struct wire_xform p = params(RING_CHW);
    struct xform_out out;
    struct rf_err err = {{0}};
    int rc;

    rc = xf->geometry(shaped, &p, &out, &err);
    tap_ok(rc == 0 && out.shape[0] == 3 && out.shape[1] == H && out.shape[2] == W &&
           out.layout == RING_CHW && out.sample_bytes == 3 * H * W,
           "chw: 3 x %d x %d, %d bytes (%s)", H, W, 3 * H * W, rc ? err.msg : "ok");
    p.layout = RING_HWC;
    rc = xf->geometry(shaped, &p, &out, &err);
    tap_ok(rc == 0 && out.shape[0] == H && out.shape[1] == W && out.shape[2] == 3 &&
           out.layout == RING_HWC && out.sample_bytes == 3 * H * W, "hwc: %d x %d x 3", H, W);
    p.flip = 0;
    TAP_IS_INT(xf->geometry(shaped, &p, &out, &err), 0, "flip=0 accepted (none never flips)");

    p = params(RING_CHW);
    rc = xf->geometry(plain, &p, &out, &err);
    tap_ok(rc == -EINVAL && strstr(err.msg, "MANIFEST has no image_shape") &&
           strstr(err.msg, "use train or eval"),
           "a jpeg dataset without image_shape refused: %s", err.msg);
    rc = xf->geometry(bytes, &p, &out, &err);
    tap_ok(rc == -EINVAL && strstr(err.msg, "this one holds bytes"),
           "a bytes dataset refused: %s", err.msg);

    p.size = 32;
    rc = xf->geometry(shaped, &p, &out, &err);
    tap_ok(rc == -EINVAL && strstr(err.msg, "size=32") && strstr(err.msg, "24x40"),
           "size other than the default refused: %s", err.msg);
    p = params(RING_CHW);
    p.crop = 1;
    rc = xf->geometry(shaped, &p, &out, &err);
    tap_ok(rc == -EINVAL && strstr(err.msg, "neither crops nor flips"),
           "crop other than the default refused: %s", err.msg);
    p = params(RING_CHW);
    p.scale_lo = 0.5;
    TAP_IS_INT(xf->geometry(shaped, &p, &out, &err), -EINVAL, "scale refused");
    p = params(RING_CHW);
    p.ratio_hi = 2;
    TAP_IS_INT(xf->geometry(shaped, &p, &out, &err), -EINVAL, "ratio refused");
    p = params(RING_CHW);
    p.flip = 1;
    TAP_IS_INT(xf->geometry(shaped, &p, &out, &err), -EINVAL, "flip=1 refused");
    p = params(RING_FLAT);
    TAP_IS_INT(xf->geometry(shaped, &p, &out, &err), -EINVAL, "layout flat refused");
}

/* Runs none over rec in both layouts; checks the output against the HWC
 * pixels want (W x H). */
static void both_layouts(struct dataset *ds, const uint8_t *rec, size_t len, const uint8_t *want,
                         const char *what)
{
    const struct xform_def *xf = xform_get((uint32_t)xform_find("none"));
    static uint8_t a[3 * H * W], b[3 * H * W];
    struct xform_ctx ctx = { 0 };
    struct wire_xform p = params(RING_HWC);
    struct xform_out out;
    struct rng_stream g;
    enum wire_bad why = BAD_READ;
    struct rf_err err = {{0}};
    int rc;

    rng_stream_init(&g, 1, 0, 0);
    memset(a, 0xAA, sizeof(a));
    rc = xf->geometry(ds, &p, &out, &err);
    if (rc == 0)
        rc = xf->apply(ds, &p, rec, len, &g, &ctx, a, &out, &why, &err);
    tap_ok(rc == 0 && memcmp(a, want, sizeof(a)) == 0, "%s: hwc byte for byte (%s)", what,
           rc ? err.msg : "ok");
    tap_ok(ctx.decode_ns > 0 && ctx.write_ns > 0 && ctx.resize_ns == 0,
           "%s: decode and write clocks advance, resize does not", what);
    p = params(RING_CHW);
    memset(b, 0x55, sizeof(b));
    rc = xf->geometry(ds, &p, &out, &err);
    if (rc == 0)
        rc = xf->apply(ds, &p, rec, len, &g, &ctx, b, &out, &why, &err);
    tap_ok(rc == 0 && planes_of(want, b, W, H), "%s: chw its three planes (%s)", what,
           rc ? err.msg : "ok");
    xform_ctx_clear(&ctx);
}

/* want_rc 0: any negative errno */
static void bad(struct dataset *ds, const uint8_t *rec, size_t len, int want_rc,
                enum wire_bad want_why, const char *want_msg, const char *what)
{
    const struct xform_def *xf = xform_get((uint32_t)xform_find("none"));
    static uint8_t a[3 * H * W];
    struct xform_ctx ctx = { 0 };
    struct wire_xform p = params(RING_CHW);
    struct xform_out out;
    struct rng_stream g;
    enum wire_bad why = BAD_READ;
    struct rf_err err = {{0}};
    int rc;

    rng_stream_init(&g, 1, 0, 0);
    rc = xf->geometry(ds, &p, &out, &err);
    if (rc == 0)
        rc = xf->apply(ds, &p, rec, len, &g, &ctx, a, &out, &why, &err);
    tap_ok((want_rc ? rc == want_rc : rc < 0) && why == want_why && strstr(err.msg, want_msg),
           "%s: bad, %s (%s)", what, want_why == BAD_SHAPE ? "shape" : "decode", err.msg);
    xform_ctx_clear(&ctx);
}

static void apply(struct dataset *ds)
{
    size_t len, jlen, glen;
    uint8_t *rec = rfpx(W, H, &len), *want;
    struct jm_opts color = { .space = JM_RGB, .h_samp = 2, .v_samp = 2, .quality = 90 };
    struct jm_opts gray = { .space = JM_GRAY, .h_samp = 1, .v_samp = 1, .quality = 85 };
    uint8_t *jpg = jm_encode(W, H, &color, jm_pattern, NULL, &jlen);
    uint8_t *gjpg = jm_encode(W, H, &gray, jm_pattern, NULL, &glen);
    uint32_t w, h;

    both_layouts(ds, rec, len, rec + PX_HEADER_SIZE, "RFPX 40 wide, 24 high");
    want = jpg ? libjpeg_rgb(jpg, jlen, &w, &h) : NULL;
    if (!tap_ok(want && w == W && h == H, "libjpeg decodes the 4:2:0 JPEG"))
        tap_bail("no JPEG to test with");
    both_layouts(ds, jpg, jlen, want, "JPEG 4:2:0");
    free(want);
    want = gjpg ? libjpeg_rgb(gjpg, glen, &w, &h) : NULL;
    if (!tap_ok(want && w == W && h == H, "libjpeg decodes the grayscale JPEG"))
        tap_bail("no JPEG to test with");
    both_layouts(ds, gjpg, glen, want, "grayscale JPEG, out as RGB");
    free(want);
    free(rec);

    rec = rfpx(H, H, &len);
    bad(ds, rec, len, -EBADMSG, BAD_SHAPE, "RFPX image is 24x24 (HxW), the dataset's "
        "image_shape is 24x40", "an RFPX record of another size");
    free(rec);
    rec = rfpx(H, W, &len); /* transposed: 24 wide, 40 high */
    bad(ds, rec, len, -EBADMSG, BAD_SHAPE, "is 40x24 (HxW)", "an RFPX record on its side");
    bad(ds, rec, len - 1, -EBADMSG, BAD_DECODE, "bad pixel record", "a truncated RFPX record");
    free(rec);
    free(jpg);
    jpg = jm_encode(W, H + 1, &color, jm_pattern, NULL, &jlen);
    bad(ds, jpg, jlen, -EBADMSG, BAD_SHAPE, "JPEG is 25x40 (HxW), the dataset's image_shape "
        "is 24x40", "a JPEG of another size");
    free(jpg);
    bad(ds, gjpg, glen / 2, 0, BAD_DECODE, "", "a truncated JPEG");
    free(gjpg);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    struct dataset *shaped, *plain, *bytes;

    snprintf(root, sizeof(root), "%s/rf-test-none-XXXXXX", t ? t : "/tmp");
    if (!mkdtemp(root))
        tap_bail("cannot create a temporary folder");
    shaped = pack("shaped", DATASET_JPEG, H, W);
    plain = pack("plain", DATASET_JPEG, 0, 0);
    bytes = pack("bytes", DATASET_BYTES, 0, 0);
    if (!shaped || !plain || !bytes)
        tap_bail("cannot write the test datasets");
    tap_ok(dataset_info(shaped)->image_height == H && dataset_info(shaped)->image_width == W,
           "dataset_info has image_shape");
    table();
    geometry(shaped, plain, bytes);
    apply(shaped);
    dataset_close(shaped);
    dataset_close(plain);
    dataset_close(bytes);
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
