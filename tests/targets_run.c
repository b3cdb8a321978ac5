/*
 * targets_run.c - runs the workers' train or eval transform on one image
 * and takes a mask and boxes through the view it leaves (targets.h), for
 * tests/integration/test_targets.py, which compares them with
 * torchvision + Pillow and a plain numpy reference.
 *
 *   targets_run train|eval SIZE SEED INDEX COUNT IMAGE MASK BOXES OUT [options]
 *       --crop F         eval's crop fraction (default 0.875)
 *       --flip P         train's flip probability (default 0.5)
 *       --scale LO,HI    train's scale range (default 0.08,1)
 *       --ratio LO,HI    train's ratio range (default 0.75,1.3333333333333333)
 *
 * IMAGE is a JPEG or an RFPX RGB record, MASK an RFPX one-channel record
 * (u8 or u16: its header says which), BOXES n x 4 little-endian f32 (xyxy,
 * source pixels; an empty file for none).  For each k of 0..COUNT-1, with
 * the stream (SEED, epoch 0, INDEX + k), the image goes through the
 * transform, then the mask and the boxes through the view; it prints
 *   ok <k> <a> <b> <c> <d> <flip> <s>   train: i j h w of the crop; eval:
 *                                 the resized rw rh and the crop's top
 *                                 left; the DCT scale s/8 decoded at (8
 *                                 for an RFPX record)
 *   view <x0> <y0> <x1> <y1>      the source box, %.17g
 *   boxes <kept> <x0> <y0> <x1> <y1> ...   the kept boxes, %.9g
 * or "bad <k> <why> <message>" when the image, mask or boxes fail, and
 * appends SIZE x SIZE mask values (zeros when bad) to OUT.
 * Exit status 0, or 2 for bad usage or files it cannot read.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pixels.h"
#include "ring.h"
#include "targets.h"
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

static int pair(const char *s, double *lo, double *hi)
{
    char *end;

    *lo = strtod(s, &end);
    if (*end != ',')
        return -1;
    *hi = strtod(end + 1, &end);
    return *end ? -1 : 0;
}

int main(int argc, char **argv)
{
    struct wire_xform p = { .size = 224, .layout = RING_HWC, .scale_lo = 0.08, .scale_hi = 1,
                            .ratio_lo = 3.0 / 4, .ratio_hi = 4.0 / 3, .flip = 0.5,
                            .crop = 0.875, .pixel_cap = 8192ull * 8192 };
    struct xform_ctx ctx = { 0 };
    struct xform_out out = { 0 };
    const struct xform_def *xf;
    struct px_header mh;
    unsigned long long seed, index, count;
    size_t ilen, mlen, blen;
    uint8_t *img, *mask, *pix, *mdst;
    float *boxes, *kept;
    uint32_t nbox, vb;
    FILE *of;
    int id;
    bool train;

    if (argc < 10 || (id = xform_find(argv[1])) < 0 ||
        (strcmp(argv[1], "train") != 0 && strcmp(argv[1], "eval") != 0)) {
        fprintf(stderr, "usage: targets_run train|eval SIZE SEED INDEX COUNT IMAGE MASK BOXES "
                        "OUT [options]\n");
        return 2;
    }
    train = strcmp(argv[1], "train") == 0;
    xf = xform_get((uint32_t)id);
    p.id = (uint32_t)id;
    p.size = (uint32_t)strtoul(argv[2], NULL, 10);
    seed = strtoull(argv[3], NULL, 10);
    index = strtoull(argv[4], NULL, 10);
    count = strtoull(argv[5], NULL, 10);
    for (int i = 10; i < argc; i++) {
        if (strcmp(argv[i], "--crop") == 0 && i + 1 < argc) {
            p.crop = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--flip") == 0 && i + 1 < argc) {
            p.flip = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc) {
            if (pair(argv[++i], &p.scale_lo, &p.scale_hi) < 0)
                return fprintf(stderr, "targets_run: --scale LO,HI\n"), 2;
        } else if (strcmp(argv[i], "--ratio") == 0 && i + 1 < argc) {
            if (pair(argv[++i], &p.ratio_lo, &p.ratio_hi) < 0)
                return fprintf(stderr, "targets_run: --ratio LO,HI\n"), 2;
        } else {
            fprintf(stderr, "targets_run: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (p.size < 1 || p.size > 4096) {
        fprintf(stderr, "targets_run: bad size %u\n", p.size);
        return 2;
    }
    img = slurp(argv[6], &ilen);
    mask = slurp(argv[7], &mlen);
    boxes = (float *)slurp(argv[8], &blen);
    if (!img || !mask || !boxes || blen % 16) {
        fprintf(stderr, "targets_run: cannot read the image, mask or boxes (%s)\n",
                strerror(errno));
        return 2;
    }
    nbox = (uint32_t)(blen / 16);
    /* the field's value size: what the record says (1 when it says nothing) */
    vb = px_parse_any(mask, mlen, &mh, NULL) == 0 ? mh.value_bytes : 1;
    out.sample_bytes = 3ull * p.size * p.size;
    out.layout = p.layout;
    pix = malloc(out.sample_bytes);
    mdst = malloc((size_t)p.size * p.size * vb);
    kept = malloc(blen + 16);
    of = fopen(argv[9], "wb");
    if (!pix || !mdst || !kept || !of) {
        fprintf(stderr, "targets_run: %s: %s\n", argv[9], strerror(errno));
        return 2;
    }
    for (unsigned long long k = 0; k < count; k++) {
        struct rng_stream rng, probe;
        struct rf_err err = { { 0 } };
        enum wire_bad why = BAD_DECODE;
        const struct tgt_view *v = &ctx.view;
        int rc, nk = 0;

        rng_stream_init(&rng, seed, 0, index + k);
        probe = rng;
        rc = xf->apply(NULL, &p, img, ilen, &rng, &ctx, pix, &out, &why, &err);
        if (rc == 0)
            rc = tgt_mask(v, mask, mlen, vb, mdst, &why, &err);
        if (rc == 0) {
            nk = tgt_boxes(v, boxes, nbox, kept, NULL, &err);
            if (nk < 0) {
                rc = nk;
                why = BAD_DECODE;
            }
        }
        if (rc < 0) {
            printf("bad %llu %s %s\n", k, bad_names[why], err.msg);
            memset(mdst, 0, (size_t)p.size * p.size * vb);
        } else {
            struct xfi_plan pl;

            if (train) {
                struct xfi_crop c;

                xfi_train_plan(v->src_w, v->src_h, &p, &probe, &pl, &c);
                printf("ok %llu %u %u %u %u %d %u\n", k, c.i, c.j, c.h, c.w, pl.flip,
                       ctx.last_scale);
            } else {
                uint32_t rw, rh, top, left;

                xfi_eval_plan(v->src_w, v->src_h, &p, &pl, &rw, &rh, &top, &left);
                printf("ok %llu %u %u %u %u 0 %u\n", k, rw, rh, top, left, ctx.last_scale);
            }
            printf("view %.17g %.17g %.17g %.17g\n", v->x0, v->y0, v->x1, v->y1);
            printf("boxes %d", nk);
            for (int i = 0; i < 4 * nk; i++)
                printf(" %.9g", kept[i]);
            printf("\n");
        }
        fwrite(mdst, 1, (size_t)p.size * p.size * vb, of);
    }
    if (fclose(of) != 0) {
        fprintf(stderr, "targets_run: %s: %s\n", argv[9], strerror(errno));
        return 2;
    }
    free(img);
    free(mask);
    free(boxes);
    free(pix);
    free(mdst);
    free(kept);
    xform_ctx_clear(&ctx);
    return 0;
}
