/*
 * zstd-blocks.c - bench/zstd-blocks: what zstd costs per sample for
 * ringfeed's small records, one frame per record (what ringfeed-pack
 * writes) against blocks of K records compressed together (the block codec
 * of Streaming's and FFCV's shards), on a packed tensor dataset.
 *
 * For each layout: the compressed size, and the decode rate on one core in
 * samples/s when the block's every record is used (a block-shuffled epoch)
 * and when one record is wanted from each block (a fully shuffled epoch,
 * ringfeed's order today, which must decode a whole block per record).
 * The baseline in the same run: a plain memcpy of the stored-as-is
 * records.  Level 3, as ringfeed-pack's default.
 *
 *     build/bench/zstd-blocks DATASET_DIR   (records stored as is: --codec none)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <zstd.h>

#include "dataset.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    static const unsigned ks[] = {1, 16, 64, 256};
    struct dataset *ds;
    struct rf_err err;
    const struct dataset_info *info;
    uint8_t *raw, *out, *comp;
    size_t rec, n;
    ZSTD_DCtx *dctx = ZSTD_createDCtx();

    if (argc != 2 || dataset_open(argv[1], &ds, &err) < 0) {
        fprintf(stderr, "usage: %s DATASET_DIR (%s)\n", argv[0], argc == 2 ? err.msg : "");
        return 2;
    }
    info = dataset_info(ds);
    rec = info->sample_bytes;
    n = info->samples;
    if (rec == 0) {
        fprintf(stderr, "zstd-blocks: a fixed-size tensor dataset is needed\n");
        return 2;
    }
    raw = malloc(n * rec);
    out = malloc(256 * rec);
    comp = malloc(ZSTD_compressBound(n * rec) + n * 64);
    if (!raw || !out || !comp || !dctx)
        return 1;
    for (size_t i = 0; i < n; i++) {
        struct dataset_loc loc;

        if (dataset_locate(ds, i, &loc, &err) < 0 ||
            dataset_read(ds, i, raw + i * rec, rec, NULL, &loc, &err) < 0) {
            fprintf(stderr, "zstd-blocks: %s\n", err.msg);
            return 1;
        }
    }
    {
        double t0 = now_s(), t;

        for (int r = 0; r < 5; r++)
            for (size_t i = 0; i < n; i++)
                memcpy(out + (i % 256) * rec, raw + i * rec, rec);
        t = (now_s() - t0) / 5;
        printf("%d records of %zu bytes; stored as is: %zu bytes, memcpy %.2f M samples/s\n",
               (int)n, rec, n * rec, (double)n / t / 1e6);
    }
    printf("%8s %14s %8s %24s %24s\n", "records", "compressed", "ratio",
           "decode, whole blocks", "decode, one per block");
    for (size_t k = 0; k < sizeof(ks) / sizeof(ks[0]); k++) {
        size_t blocks = (n + ks[k] - 1) / ks[k], total = 0;
        size_t *off = malloc((blocks + 1) * sizeof(*off));
        double t0, whole, one;

        for (size_t b = 0; b < blocks; b++) {
            size_t cnt = (b + 1) * ks[k] <= n ? ks[k] : n - b * ks[k];
            size_t c = ZSTD_compress(comp + total, ZSTD_compressBound(cnt * rec),
                                     raw + b * ks[k] * rec, cnt * rec, 3);

            if (ZSTD_isError(c))
                return 1;
            off[b] = total;
            total += c;
        }
        off[blocks] = total;
        t0 = now_s();
        for (size_t b = 0; b < blocks; b++)
            ZSTD_decompressDCtx(dctx, out, 256 * rec, comp + off[b], off[b + 1] - off[b]);
        whole = (double)n / (now_s() - t0);
        /* one record used per block decoded: the rate in records actually used */
        t0 = now_s();
        for (size_t b = 0; b < blocks; b++)
            ZSTD_decompressDCtx(dctx, out, 256 * rec, comp + off[b], off[b + 1] - off[b]);
        one = (double)blocks / (now_s() - t0);
        printf("%8zu %14zu %7.2fx %17.2f M/s %19.2f M/s\n", (size_t)ks[k], total,
               (double)(n * rec) / (double)total, whole / 1e6, one / 1e6);
        free(off);
    }
    ZSTD_freeDCtx(dctx);
    dataset_close(ds);
    return 0;
}
