/*
 * pack_bytes.c - writes files as they are into a jpeg-kind dataset, one
 * record per file, with the writer API (proto/dataset_writer.h): how the
 * integration tests get damaged and foreign files into a dataset, which
 * `ringfeed-pack imagefolder` rightly refuses to do.
 *
 *   pack_bytes [--zstd] [--raw-images N] [--image-shape HxW] OUT_DIR CLASSES
 *              FILE:LABEL...
 *
 * Records are stored with codec none (--zstd: zstd, each record that it
 * shrinks) and a correct checksum: the damage is in the image, where the
 * workers' decoder must find it.  --raw-images N writes raw_images N in the
 * MANIFEST (manifest.h: N of the files are RFPX pixel records), whatever the
 * files hold, so a test can also write a wrong count; --image-shape HxW
 * writes image_shape HxW likewise, unchecked.  Exit 0, or 1 with
 * the reason on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_writer.h"

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

            if (!q)
                break;
            buf = q;
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    struct dataset_writer_opts o = { .kind = DATASET_JPEG, .codec = DATASET_CODEC_NONE };
    struct dataset_writer *w;
    struct rf_err err;
    char names[64][16];
    const char *name_ptrs[64];
    unsigned long long raw_images = 0;
    unsigned long shape_h = 0, shape_w = 0;

    while (argc > 1 && strncmp(argv[1], "--", 2) == 0) {
        if (strcmp(argv[1], "--zstd") == 0) {
            o.codec = DATASET_CODEC_ZSTD;
        } else if (strcmp(argv[1], "--raw-images") == 0 && argc > 2) {
            raw_images = strtoull(argv[2], NULL, 10);
            argv++;
            argc--;
        } else if (strcmp(argv[1], "--image-shape") == 0 && argc > 2) {
            char *x;

            shape_h = strtoul(argv[2], &x, 10);
            shape_w = *x == 'x' ? strtoul(x + 1, NULL, 10) : 0;
            argv++;
            argc--;
        } else {
            argc = 0; /* usage */
            break;
        }
        argv++;
        argc--;
    }
    if (argc < 4 || atoi(argv[2]) < 1 || atoi(argv[2]) > 64) {
        fprintf(stderr, "usage: pack_bytes [--zstd] [--raw-images N] [--image-shape HxW] "
                "OUT_DIR CLASSES(1..64) FILE:LABEL...\n");
        return 1;
    }
    o.classes = (uint32_t)atoi(argv[2]);
    for (uint32_t c = 0; c < o.classes; c++) {
        snprintf(names[c], sizeof(names[c]), "c%u", c);
        name_ptrs[c] = names[c];
    }
    o.class_names = name_ptrs;
    if (dataset_writer_create(argv[1], &o, &w, &err) < 0) {
        fprintf(stderr, "pack_bytes: %s\n", err.msg);
        return 1;
    }
    for (int i = 3; i < argc; i++) {
        char *colon = strrchr(argv[i], ':');
        size_t len = 0;
        uint8_t *buf;

        if (!colon) {
            fprintf(stderr, "pack_bytes: %s: expected FILE:LABEL\n", argv[i]);
            dataset_writer_abort(w);
            return 1;
        }
        *colon = 0;
        buf = slurp(argv[i], &len);
        if (!buf && len) {
            fprintf(stderr, "pack_bytes: cannot read %s\n", argv[i]);
            dataset_writer_abort(w);
            return 1;
        }
        if (dataset_writer_add(w, buf ? buf : (const uint8_t *)"", len,
                               (uint32_t)atoi(colon + 1), &err) < 0) {
            fprintf(stderr, "pack_bytes: %s: %s\n", argv[i], err.msg);
            free(buf);
            dataset_writer_abort(w);
            return 1;
        }
        free(buf);
    }
    if (dataset_writer_set_raw_images(w, raw_images, &err) < 0 ||
        dataset_writer_set_image_shape(w, (uint32_t)shape_h, (uint32_t)shape_w, &err) < 0 ||
        dataset_writer_finish(w, NULL, &err) < 0) {
        fprintf(stderr, "pack_bytes: %s\n", err.msg);
        return 1;
    }
    return 0;
}
