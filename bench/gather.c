/*
 * gather.c - bench/gather: the gather-copy limit of a packed dataset, the
 * ceiling ringfeed's raw path is measured against (bench/loader-fmnist).
 *
 * One core, no daemon: the shards mapped as the workers' mmap backend maps
 * them, records taken in the epoch's shuffled order (the same keyed
 * permutation as the daemon's sampler) and copied one memcpy each into a
 * slot-sized buffer of `batch` samples.  Printed twice: the copy alone, and
 * with each record's CRC-32C checked first, as the workers do (that is the
 * floor for a loader that verifies what it serves).  Warm-up epoch first;
 * each figure is the best of `epochs` timed epochs.
 *
 *     build/bench/gather DATASET_DIR [batch 256] [epochs 20]
 * prints:
 *     gather-copy: N samples/s
 *     gather-copy + crc32c: N samples/s
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "crc32c.h"
#include "codec.h"
#include "dataset.h"
#include "sampler.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct rec {
    const uint8_t *p;
    uint32_t len;
    uint32_t crc;   /* the index's CRC-32C of the record */
};

/* One epoch: returns the seconds it took; *bad counts CRC mismatches. */
static double epoch(const struct rec *recs, uint64_t n, uint32_t batch, uint8_t *slot,
                    uint32_t epoch_no, int check, uint64_t *bad)
{
    struct sampler_perm pm;
    double t0 = now_s();
    uint64_t at = 0;

    sampler_perm_init(&pm, n, 1, epoch_no, true);
    for (uint64_t i = 0; i < n; i++) {
        const struct rec *r = &recs[sampler_perm_at(&pm, i)];

        if (check && crc32c(0, r->p, r->len) != r->crc)
            (*bad)++;
        memcpy(slot + at, r->p, r->len);
        at += r->len;
        if (i % batch == batch - 1)
            at = 0;
    }
    return now_s() - t0;
}

int main(int argc, char **argv)
{
    struct dataset *ds;
    struct rf_err err;
    const struct dataset_info *info;
    struct rec *recs;
    uint8_t *slot;
    uint32_t batch = argc > 2 ? (uint32_t)atoi(argv[2]) : 256;
    int epochs = argc > 3 ? atoi(argv[3]) : 20;
    uint64_t bad = 0;

    if (argc < 2 || batch == 0 || epochs <= 0) {
        fprintf(stderr, "usage: %s DATASET_DIR [batch] [epochs]\n", argv[0]);
        return 2;
    }
    if (dataset_open(argv[1], &ds, &err) < 0) {
        fprintf(stderr, "gather: %s\n", err.msg);
        return 1;
    }
    info = dataset_info(ds);
    recs = calloc(info->samples, sizeof(*recs));
    slot = malloc((size_t)batch * (info->sample_bytes ? info->sample_bytes : 65536));
    if (!recs || !slot)
        return 1;
    for (uint64_t i = 0; i < info->samples; i++) {
        struct dataset_loc loc;
        struct stat sb;
        static int last_fd = -1;
        static const uint8_t *map;

        if (dataset_locate(ds, i, &loc, &err) < 0 || loc.codec != DATASET_CODEC_NONE) {
            fprintf(stderr, "gather: %s\n", loc.codec != DATASET_CODEC_NONE
                    ? "records must be stored as they are (ringfeed-pack --codec none)" : err.msg);
            return 1;
        }
        if (loc.fd != last_fd) {
            if (fstat(loc.fd, &sb) == -1 ||
                (map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, loc.fd, 0)) ==
                    MAP_FAILED) {
                perror("gather: mapping a shard");
                return 1;
            }
            last_fd = loc.fd;
        }
        recs[i] = (struct rec){.p = map + loc.offset, .len = loc.stored_len, .crc = loc.crc};
    }
    for (int check = 0; check < 2; check++) {
        double best = 1e30;

        epoch(recs, info->samples, batch, slot, 0, check, &bad); /* warm-up */
        for (int e = 1; e <= epochs; e++) {
            double t = epoch(recs, info->samples, batch, slot, (uint32_t)e, check, &bad);

            if (t < best)
                best = t;
        }
        printf("gather-copy%s: %.0f samples/s\n", check ? " + crc32c" : "",
               (double)info->samples / best);
    }
    if (bad) {
        fprintf(stderr, "gather: %llu records failed their CRC\n", (unsigned long long)bad);
        return 1;
    }
    dataset_close(ds);
    free(recs);
    free(slot);
    return 0;
}
