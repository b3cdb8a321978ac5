/*
 * xform_run.c - runs one image transform of the workers' table on JPEG
 * files, or RFPX pixel records (proto/pixels.h), outside the daemon: the
 * integration tests compare its `train` output with Pillow given the crop
 * it reports, and it times the stages.
 *
 *   xform_run train|eval SIZE SEED INDEX OUT FILE... [options]
 *       --crop F         eval's crop fraction (default 0.875)
 *       --flip P         train's flip probability (default 0.5)
 *       --pixel-cap N    (default 8192 * 8192)
 *       --chw            write CHW (default HWC)
 *       --repeat N       run every file N times (timing)
 *       --scale S        decode at DCT scale S/8 (1..8) whatever the crop
 *                        (bench/jpeg-scale); default: the workers' rule
 *       --merged         merged chroma upsampling (jpg_set_merged)
 *       --fast-dct       libjpeg's fast inverse DCT (jpg_set_fast_dct)
 *       --no-tiles       never decode from restart-interval tiles
 *                        (jpg_set_tiles: the file's own rows instead)
 *
 * For each FILE, with the stream (SEED, epoch 0, INDEX + its position):
 *   ok <file> <W> <H> <i> <j> <h> <w> <flip> <s> crop as get_params gives it
 *                                                 (eval: the resized size and
 *                                                 the crop's top, left), and
 *                                                 the DCT scale s/8 decoded at
 *                                                 (8 for an RFPX record)
 *   bad <file> <why> <message>
 * and appends its size x size x 3 output to OUT (zeros when bad).
 * Last, per stage: "stages decode_us resize_us write_us per image".
 * Exit status 0, or 2 for bad usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpeg.h"
#include "pixels.h"
#include "ring.h"
#include "transform.h"
#include "xform_image.h"

static const char *const bad_names[] = {
    "read", "checksum", "decode", "shape", "too_large", "quarantined",
};

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0, r;

    if (!f)
        return NULL;
    do {
        if (n == cap) {
            uint8_t *q = realloc(buf, cap = cap ? cap * 2 : 65536);

            if (!q) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = q;
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    fclose(f);
    *len = n;
    return buf ? buf : malloc(1);
}

/* The image's sides, from an RFPX record's header or a JPEG's. */
static int sides(struct jpg_dec *dec, const uint8_t *buf, size_t len,
                 const struct jpg_limits *lim, struct jpg_header *hdr, struct rf_err *err)
{
    struct px_header px;
    int rc;

    if (px_is(buf, len)) {
        rc = px_parse(buf, len, &px, err);
        hdr->width = px.width;
        hdr->height = px.height;
        return rc;
    }
    rc = jpg_open(dec, buf, len, lim, hdr, err);
    jpg_abort(dec);
    return rc;
}

int main(int argc, char **argv)
{
    struct wire_xform p = { .size = 224, .layout = RING_HWC, .scale_lo = 0.08, .scale_hi = 1,
                            .ratio_lo = 3.0 / 4, .ratio_hi = 4.0 / 3, .flip = 0.5,
                            .crop = 0.875, .pixel_cap = 8192ull * 8192 };
    struct xform_ctx ctx = { 0 };
    struct xform_out out = { 0 };
    const struct xform_def *xf;
    struct jpg_dec *dec = jpg_new();
    const char *files[4096];
    unsigned long long seed, index;
    unsigned nfiles = 0, repeat = 1;
    uint8_t *dst;
    FILE *of;
    int id;

    if (argc < 7 || (id = xform_find(argv[1])) < 1) {
        fprintf(stderr, "usage: xform_run train|eval SIZE SEED INDEX OUT FILE... [options]\n");
        return 2;
    }
    xf = xform_get((uint32_t)id);
    p.id = (uint32_t)id;
    p.size = (uint32_t)strtoul(argv[2], NULL, 10);
    seed = strtoull(argv[3], NULL, 10);
    index = strtoull(argv[4], NULL, 10);
    for (int i = 6; i < argc; i++) {
        if (strcmp(argv[i], "--crop") == 0 && i + 1 < argc)
            p.crop = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--flip") == 0 && i + 1 < argc)
            p.flip = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--pixel-cap") == 0 && i + 1 < argc)
            p.pixel_cap = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--chw") == 0)
            p.layout = RING_CHW;
        else if (strcmp(argv[i], "--merged") == 0)
            ctx.merged_upsampling = true;
        else if (strcmp(argv[i], "--fast-dct") == 0)
            ctx.fast_dct = true;
        else if (strcmp(argv[i], "--no-tiles") == 0)
            ctx.no_tiles = true;
        else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc)
            ctx.force_scale = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (nfiles < 4096)
            files[nfiles++] = argv[i];
    }
    if (p.size < 1 || p.size > 4096 || !dec || repeat < 1 || ctx.force_scale > 8) {
        fprintf(stderr, "xform_run: bad size, repeat or scale\n");
        return 2;
    }
    out.sample_bytes = 3ull * p.size * p.size;
    out.layout = p.layout;
    dst = malloc(out.sample_bytes);
    of = fopen(argv[5], "wb");
    if (!dst || !of) {
        fprintf(stderr, "xform_run: %s: %s\n", argv[5], strerror(errno));
        return 2;
    }
    for (unsigned f = 0; f < nfiles; f++) {
        size_t len = 0;
        uint8_t *buf = slurp(files[f], &len);
        struct jpg_limits lim = { .pixel_cap = p.pixel_cap, .scan_cap = JPG_SCAN_CAP };
        struct jpg_header hdr;
        struct rf_err err = { 0 };
        enum wire_bad why = BAD_DECODE;
        int rc = -ENOENT;

        if (!buf) {
            printf("bad %s read %s\n", files[f], strerror(errno));
            continue;
        }
        for (unsigned r = 0; r < repeat; r++) {
            struct rng_stream rng, probe;

            rng_stream_init(&rng, seed, 0, index + f);
            probe = rng;
            rc = xf->apply(NULL, &p, buf, len, &rng, &ctx, dst, &out, &why, &err);
            if (r + 1 < repeat)
                continue;
            if (rc < 0) {
                printf("bad %s %s %s\n", files[f], bad_names[why], err.msg);
                memset(dst, 0, out.sample_bytes);
            } else if (sides(dec, buf, len, &lim, &hdr, &err) == 0) {
                struct xfi_plan pl;

                if (strcmp(xf->name, "train") == 0) {
                    struct xfi_crop c;

                    xfi_train_plan(hdr.width, hdr.height, &p, &probe, &pl, &c);
                    printf("ok %s %u %u %u %u %u %u %d %u\n", files[f], hdr.width, hdr.height,
                           c.i, c.j, c.h, c.w, pl.flip, ctx.last_scale);
                } else {
                    uint32_t rw, rh, top, left;

                    xfi_eval_plan(hdr.width, hdr.height, &p, &pl, &rw, &rh, &top, &left);
                    printf("ok %s %u %u %u %u %u %u 0 %u\n", files[f], hdr.width, hdr.height,
                           rw, rh, top, left, ctx.last_scale);
                }
            }
        }
        fwrite(dst, 1, out.sample_bytes, of);
        free(buf);
    }
    if (nfiles)
        printf("stages %.1f %.1f %.1f us per image\n",
               (double)ctx.decode_ns / 1e3 / (nfiles * repeat),
               (double)ctx.resize_ns / 1e3 / (nfiles * repeat),
               (double)ctx.write_ns / 1e3 / (nfiles * repeat));
    fclose(of);
    free(dst);
    jpg_free(dec);
    xform_ctx_clear(&ctx);
    return 0;
}
