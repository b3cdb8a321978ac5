/*
 * dump_dataset.c - a test helper: writes every sample of a dataset, in
 * order, to a file the integration tests compare with the source data:
 *
 *     per sample: u32 label, u32 decoded length (little-endian), the bytes
 *
 * usage: dump_dataset DIR OUT_FILE
 * Exit 0 when every sample read; 1 (with the reader's message) otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "dataset.h"

static int put_u32(FILE *f, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                    (uint8_t)(v >> 24)};

    return fwrite(b, 1, 4, f) == 4 ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct dataset *ds;
    struct dataset_dctx *ctx;
    struct rf_err err;
    const struct dataset_info *info;
    uint8_t *buf;
    FILE *f;
    int rc = 1;

    if (argc != 3) {
        fprintf(stderr, "usage: dump_dataset DIR OUT_FILE\n");
        return 2;
    }
    if (dataset_open(argv[1], &ds, &err) < 0) {
        fprintf(stderr, "dump_dataset: %s\n", err.msg);
        return 1;
    }
    info = dataset_info(ds);
    ctx = dataset_dctx_new();
    buf = malloc(info->max_decoded ? info->max_decoded : 1);
    f = fopen(argv[2], "wb");
    if (!ctx || !buf || !f) {
        fprintf(stderr, "dump_dataset: cannot start\n");
        goto out;
    }
    for (uint64_t i = 0; i < info->samples; i++) {
        struct dataset_loc loc;
        int n = dataset_read(ds, i, buf, info->max_decoded, ctx, &loc, &err);

        if (n < 0) {
            fprintf(stderr, "dump_dataset: %s\n", err.msg);
            goto out;
        }
        if (put_u32(f, loc.label) < 0 || put_u32(f, (uint32_t)n) < 0 ||
            fwrite(buf, 1, (size_t)n, f) != (size_t)n) {
            fprintf(stderr, "dump_dataset: %s: write failed\n", argv[2]);
            goto out;
        }
    }
    rc = 0;
out:
    if (f && fclose(f) != 0)
        rc = 1;
    free(buf);
    dataset_dctx_free(ctx);
    dataset_close(ds);
    return rc;
}
