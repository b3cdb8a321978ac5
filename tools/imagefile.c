/*
 * imagefile.c - `ringfeed-pack imagefolder`'s work on one file (see
 * imagefile.h): read, tell the format, decode or probe, re-encode, and a
 * verdict for the main thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "dataset_writer.h"
#include "fileio.h"
#include "imagefile.h"
#include "jpeg_probe.h"
#include "pixels.h"

int imagefile_coders_init(struct imagefile_coders *c,
                          const struct imagefile_opts *o)
{
    *c = (struct imagefile_coders){0};
    if ((o->max_side || o->mode != IMAGEFILE_RAW) && !(c->sh = shrinker_new()))
        return -ENOMEM;
    if (!o->as_is && !(c->rs = restarter_new()))
        return -ENOMEM;
    return 0;
}

void imagefile_coders_fini(struct imagefile_coders *c)
{
    shrinker_free(c->sh);
    restarter_free(c->rs);
    *c = (struct imagefile_coders){0};
}

void imagefile_tally_add(struct imagefile_tally *sum,
                         const struct imagefile_tally *t)
{
    sum->shrunk += t->shrunk;
    sum->shrink_bad += t->shrink_bad;
    sum->shrunk_src += t->shrunk_src;
    sum->shrunk_out += t->shrunk_out;
    sum->shrink_cpu += t->shrink_cpu;
    for (int o = 0; o < RESTART_OUTCOME_COUNT; o++)
        sum->outcomes[o] += t->outcomes[o];
    sum->no_memory += t->no_memory;
    for (unsigned i = 0; i <= RESTART_SEGMENT_MAX; i++)
        sum->interval[i] += t->interval[i];
    sum->lossless_src += t->lossless_src;
    sum->lossless_out += t->lossless_out;
    sum->restart_cpu += t->restart_cpu;
    for (unsigned k = 0; k < IMGDEC_FORMAT_COUNT; k++)
        sum->raw[k] += t->raw[k];
    sum->raw_shrunk += t->raw_shrunk;
    for (unsigned k = 0; k < IMGDEC_FORMAT_COUNT; k++)
        sum->encoded[k] += t->encoded[k];
    sum->encoded_src += t->encoded_src;
    sum->encoded_out += t->encoded_out;
    sum->raw_cpu += t->raw_cpu;
    sum->cpu += t->cpu;
}

static double cpu_now(void)
{
    return (double)clock_thread_cpu_ns() * 1e-9;
}

/* Grows *buf to at least need bytes.  Returns 0 or -1 (out of memory). */
static int reserve(uint8_t **buf, size_t *cap, size_t need)
{
    uint8_t *p;

    if (need <= *cap)
        return 0;
    p = realloc(*buf, need);
    if (!p)
        return -1;
    *buf = p;
    *cap = need;
    return 0;
}

/*
 * Reads a whole regular file into f->src.  Returns its length, or -1 with
 * f->why set.  O_NONBLOCK: a FIFO must not hang the pack.
 */
static int64_t read_image(struct imagefile *f, const char *path)
{
    struct stat st;
    ssize_t n;
    char eb[128];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

    if (fd == -1) {
        int e = errno;

        snprintf(f->why_buf, sizeof(f->why_buf), "cannot open: %s%s",
                 strerror_r(e, eb, sizeof(eb)),
                 e == ENOENT ? " (a dangling symlink?)" : "");
        f->why = f->why_buf;
        return -1;
    }
    if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
        f->why = "not a regular file";
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size >= DATASET_RECORD_MAX) {
        f->why = "larger than the 1 GiB record limit";
        close(fd);
        return -1;
    }
    if (reserve(&f->src, &f->src_cap, (size_t)st.st_size + 1) < 0) {
        f->why = "out of memory";
        close(fd);
        return -1;
    }
    n = fio_pread_full(fd, f->src, (size_t)st.st_size + 1, 0);
    close(fd);
    if (n < 0) {
        snprintf(f->why_buf, sizeof(f->why_buf), "read failed: %s",
                 strerror_r((int)-n, eb, sizeof(eb)));
        f->why = f->why_buf;
        return -1;
    }
    if (n != st.st_size) {
        f->why = "file changed size while read";
        return -1;
    }
    return n;
}

/* The coder's output, copied into f->out (the coder moves on to the next
 * file).  Returns 0, or -1 when out of memory (f->rec left on f->src). */
static int keep_output(struct imagefile *f, const uint8_t *out, size_t len)
{
    if (reserve(&f->out, &f->out_cap, len ? len : 1) < 0)
        return -1;
    memcpy(f->out, out, len);
    f->rec = f->out;
    f->rec_len = len;
    return 0;
}

/*
 * Under --max-side, for an image of n bytes larger than it (dw x dh when
 * shrunk): sets the verdict.  A larger image whose data does not decode
 * is stored as it is, with a note; one too large to decode, or out of
 * memory, is skipped.
 */
static void shrink_record(struct imagefile *f, const struct imagefile_opts *o,
                          struct shrinker *sh, size_t n, uint32_t dw,
                          uint32_t dh)
{
    struct imagefile_tally *t = &f->tally;
    const uint8_t *out;
    size_t out_len;
    uint32_t ow, oh;
    double t0 = cpu_now();
    int r = shrinker_run(sh, f->src, n, o->max_side, o->quality, &out,
                         &out_len, &ow, &oh, f->why_buf, sizeof(f->why_buf));

    t->shrink_cpu += cpu_now() - t0;
    if (r == -EBADMSG) {
        f->note = (struct imagefile_note){f->why_buf, "stored as it is, "
                                          "larger than --max-side (as "
                                          "without --max-side, ringfeedd "
                                          "will count it as a bad sample)",
                                          1};
        t->shrink_bad++;
        return;
    }
    if (r == -E2BIG || r == -ENOMEM) {
        f->verdict = IMAGEFILE_SKIP;
        f->why = f->why_buf;
        return;
    }
    if (r == 0 && (ow != dw || oh != dh)) {
        snprintf(f->why_buf, sizeof(f->why_buf), "internal error: "
                 "re-encoded %ux%u, expected %ux%u", ow, oh, dw, dh);
        r = -EPROTO;
    }
    if (r < 0) {
        f->verdict = IMAGEFILE_FAIL;
        f->why = f->why_buf;
        return;
    }
    if (keep_output(f, out, out_len) < 0) {
        f->verdict = IMAGEFILE_SKIP;
        f->why = "out of memory for its re-encoding";
        return;
    }
    t->shrunk++;
    t->shrunk_src += n;
    t->shrunk_out += out_len;
}

/*
 * The lossless re-encoding of the n bytes in f->src: always stored, the
 * re-encoding or the bytes as they are; f->note set when the file is
 * stored as it is because its data does not decode, or for want of memory.
 */
static void restart_record(struct imagefile *f, struct restarter *rs,
                           size_t n)
{
    struct imagefile_tally *t = &f->tally;
    const uint8_t *out;
    size_t out_len;
    unsigned interval = 0;
    double t0 = cpu_now();
    int o = restart_run(rs, f->src, n, &out, &out_len, &interval, f->why_buf,
                        sizeof(f->why_buf));

    t->restart_cpu += cpu_now() - t0;
    if (o == RESTART_REENCODED && keep_output(f, out, out_len) < 0) {
        snprintf(f->why_buf, sizeof(f->why_buf), "out of memory for its "
                 "re-encoding");
        o = -ENOMEM;
    }
    if (o == RESTART_REENCODED) {
        t->outcomes[o]++;
        t->interval[interval <= RESTART_SEGMENT_MAX ? interval : 0]++;
        t->lossless_src += n;
        t->lossless_out += out_len;
        return;
    }
    if (o < 0) {              /* -ENOMEM, the one failure */
        t->no_memory++;
        f->note = (struct imagefile_note){f->why_buf, "stored as it is, not "
                                          "re-encoded", 0};
        return;
    }
    t->outcomes[o]++;
    if (o == RESTART_UNDECODABLE)
        f->note = (struct imagefile_note){f->why_buf, "stored as it is, not "
                                          "re-encoded (ringfeedd, as strict, "
                                          "will likely count it as a bad "
                                          "sample)", 1};
}

/* The w x h RGB pixels at rgb box-shrunk to dw x dh (jpeg_shrink.h's
 * filter, the one --max-side uses for JPEGs) into dst.  Returns 0 or
 * -ENOMEM. */
static int shrink_rgb(const uint8_t *rgb, uint32_t w, uint32_t h, uint32_t dw,
                      uint32_t dh, uint8_t *dst)
{
    struct shrink_box b;
    uint32_t oy = 0;
    int r = shrink_box_init(&b, w, h, dw, dh, 3);

    for (uint32_t y = 0; r == 0 && y < h; y++) {
        const uint8_t *row = shrink_box_push(&b, rgb + (size_t)y * w * 3);

        if (row)
            memcpy(dst + (size_t)oy++ * dw * 3, row, (size_t)dw * 3);
    }
    shrink_box_free(&b);
    return r < 0 ? r : oy == dh ? 0 : -EPROTO;
}

/*
 * w x h RGB pixels at rgb, from a file of src_len bytes in format fmt
 * (IMGDEC_NONE: pixels given, no file): shrunk under --max-side by the
 * JPEG path's rule, and made an RFPX record in f->out, or, under
 * --image-mode jpeg (smart: above smart_pixels pixels), a JPEG of those
 * pixels at --quality.  rgb must not point into f->out.
 */
static void store_pixels(struct imagefile *f, const struct imagefile_opts *o,
                         struct imagefile_coders *c, const uint8_t *rgb,
                         uint32_t w, uint32_t h, size_t src_len,
                         enum imgdec_format fmt)
{
    uint32_t dw, dh;
    int r, shrink = o->max_side && shrink_dims(w, h, o->max_side, &dw, &dh);

    if (!shrink) {
        dw = w;
        dh = h;
    }
    if (!px_record_size(dw, dh)) {
        f->verdict = IMAGEFILE_SKIP;
        snprintf(f->why_buf, sizeof(f->why_buf), "%ux%u pixels: a side is "
                 "0 or over %u", dw, dh, PX_SIDE_MAX);
        f->why = f->why_buf;
        return;
    }
    if (reserve(&f->out, &f->out_cap, px_record_size(dw, dh)) < 0) {
        f->verdict = IMAGEFILE_SKIP;
        f->why = "out of memory for its pixels";
        return;
    }
    px_write_header(f->out, dw, dh);
    if (!shrink)
        memcpy(f->out + PX_HEADER_SIZE, rgb, (size_t)dw * dh * 3);
    else if ((r = shrink_rgb(rgb, w, h, dw, dh, f->out + PX_HEADER_SIZE)) < 0) {
        f->verdict = r == -ENOMEM ? IMAGEFILE_SKIP : IMAGEFILE_FAIL;
        f->why = r == -ENOMEM ? "out of memory to shrink it"
                              : "internal error: the box filter's rows";
        return;
    }
    f->rec = f->out;
    f->rec_len = px_record_size(dw, dh);
    f->src_len = src_len;
    f->width = dw;
    f->height = dh;
    f->tally.raw_shrunk += (uint64_t)shrink;
    if (o->mode == IMAGEFILE_JPEG ||
        (o->mode == IMAGEFILE_SMART && (uint64_t)dw * dh > o->smart_pixels)) {
        const uint8_t *enc;
        size_t enc_len;

        r = shrinker_encode_rgb(c->sh, f->out + PX_HEADER_SIZE, dw, dh, o->quality, &enc,
                                &enc_len, f->why_buf, sizeof(f->why_buf));
        if (r < 0 || keep_output(f, enc, enc_len) < 0) {
            f->verdict = r == -EPROTO ? IMAGEFILE_FAIL : IMAGEFILE_SKIP;
            f->why = r < 0 ? f->why_buf : "out of memory for its JPEG";
            return;
        }
        if (fmt != IMGDEC_NONE)
            f->tally.encoded[fmt]++;
        f->tally.encoded_src += src_len;
        f->tally.encoded_out += f->rec_len;
        return;                         /* the record is a JPEG */
    }
    f->format = fmt;
    f->raw = 1;
    if (fmt != IMGDEC_NONE)
        f->tally.raw[fmt]++;
}

/*
 * A file of format fmt (n bytes in f->src): decoded to RGB, then
 * store_pixels.  One that does not decode, is refused (image_decode.h), is
 * too large or finds no memory is skipped with the decoder's reason.
 */
static void raw_record(struct imagefile *f, const struct imagefile_opts *o,
                       struct imagefile_coders *c, size_t n, enum imgdec_format fmt)
{
    struct imgdec_image im;
    double t0 = cpu_now();
    int r = imgdec_decode(fmt, f->src, n, IMGDEC_PIXELS_MAX, &im,
                          f->why_buf, sizeof(f->why_buf));

    if (r < 0) {
        f->verdict = IMAGEFILE_SKIP;
        f->why = f->why_buf;
    } else {
        store_pixels(f, o, c, im.rgb, im.width, im.height, n, fmt);
    }
    imgdec_image_free(&im);
    f->tally.raw_cpu += cpu_now() - t0;
}

/* f made ready for a new image: no verdict, no counts. */
static void reset(struct imagefile *f)
{
    f->verdict = IMAGEFILE_STORE;
    f->format = IMGDEC_NONE;
    f->raw = 0;
    f->rec = NULL;
    f->rec_len = f->src_len = 0;
    f->width = f->height = 0;
    f->why = NULL;
    f->note = (struct imagefile_note){0};
    f->tally = (struct imagefile_tally){0};
    f->why_buf[0] = '\0';
}

/* The image of n bytes in f->src (n < 0: it could not be had, f->why
 * says why): told from its bytes, then the JPEG path or raw_record. */
static void run_src(struct imagefile *f, int64_t n,
                    const struct imagefile_opts *o, struct imagefile_coders *c)
{
    enum imgdec_format fmt;
    unsigned w, h;
    uint32_t dw, dh;

    fmt = n >= 0 ? imgdec_sniff(f->src, (size_t)n) : IMGDEC_NONE;
    if (fmt != IMGDEC_NONE) {
        raw_record(f, o, c, (size_t)n, fmt);
        return;
    }
    if (n >= 0 && jpeg_probe(f->src, (size_t)n, &w, &h, f->why_buf,
                             sizeof(f->why_buf), &f->why) < 0)
        n = -1;
    if (n < 0) {
        f->verdict = IMAGEFILE_SKIP;
        return;
    }
    f->rec = f->src;
    f->rec_len = f->src_len = (size_t)n;
    f->width = w;
    f->height = h;
    if (o->as_is)
        return;
    if (o->max_side && shrink_dims(w, h, o->max_side, &dw, &dh)) {
        shrink_record(f, o, c->sh, (size_t)n, dw, dh);
        if (f->rec != f->src) {         /* shrunk: else stored as it is */
            f->width = dw;
            f->height = dh;
        }
    } else {
        restart_record(f, c->rs, (size_t)n);
    }
}

void imagefile_run(struct imagefile *f, const char *path,
                   const struct imagefile_opts *o, struct imagefile_coders *c)
{
    double t0 = cpu_now();

    reset(f);
    run_src(f, read_image(f, path), o, c);
    f->tally.cpu = cpu_now() - t0;
}

void imagefile_run_bytes(struct imagefile *f, const void *buf, size_t len,
                         const struct imagefile_opts *o,
                         struct imagefile_coders *c)
{
    double t0 = cpu_now();
    int64_t n = (int64_t)len;

    reset(f);
    if (len >= DATASET_RECORD_MAX) {
        f->why = "larger than the 1 GiB record limit";
        n = -1;
    } else if (reserve(&f->src, &f->src_cap, len + 1) < 0) {
        f->why = "out of memory";
        n = -1;
    } else if (len) {
        memcpy(f->src, buf, len);
    }
    run_src(f, n, o, c);
    f->tally.cpu = cpu_now() - t0;
}

void imagefile_run_rgb(struct imagefile *f, const uint8_t *rgb, uint32_t w,
                       uint32_t h, const struct imagefile_opts *o,
                       struct imagefile_coders *c)
{
    double t0 = cpu_now();

    reset(f);
    store_pixels(f, o, c, rgb, w, h, (size_t)w * h * 3, IMGDEC_NONE);
    f->tally.raw_cpu += cpu_now() - t0;
    f->tally.cpu = cpu_now() - t0;
}

void imagefile_trim(struct imagefile *f)
{
    if (f->src_cap > IMAGEFILE_KEEP_MAX) {
        free(f->src);
        f->src = NULL;
        f->src_cap = 0;
    }
    if (f->out_cap > IMAGEFILE_KEEP_MAX) {
        free(f->out);
        f->out = NULL;
        f->out_cap = 0;
    }
    f->rec = NULL;
}

void imagefile_fini(struct imagefile *f)
{
    free(f->src);
    free(f->out);
    *f = (struct imagefile){0};
}
