/*
 * pack_verify.c - `ringfeed-pack verify DIR`: reads every record of a
 * dataset and checks it: the index entry (bounds, entry checksum), the
 * record's CRC-32C, that it decodes (zstd frames, with their own content
 * checksums) to exactly its decoded length, and for jpeg datasets that the
 * JPEG header parses, or for an RFPX record (proto/pixels.h) that it is
 * well formed.
 *
 * The dataset is opened tolerantly (DATASET_OPEN_TOLERANT), so one damaged
 * shard does not hide the state of the others: a shard whose header or size
 * is wrong gets one line (its records cannot be reached), a shard whose
 * index checksum fails gets one line and its entries are still checked one
 * by one.  Every bad record gets one line on stdout naming the shard file,
 * the record, the byte offset and the reason; a summary line ends the
 * output.  Exit 0 when everything is clean, 1 otherwise.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "jpeg_probe.h"
#include "pack.h"
#include "pixels.h"

static const char usage_text[] =
    "usage: ringfeed-pack verify DIR\n"
    "\n"
    "Checks every record of the dataset at DIR: index entries, checksums,\n"
    "that zstd records decode to their exact length, and that JPEG headers\n"
    "parse.  Prints one line per problem (shard file, record, byte offset,\n"
    "reason) and a summary; exits 0 when the dataset is clean, 1 otherwise.\n"
    "\n"
    "  --help   this text\n";

int pack_verify_main(int argc, char **argv)
{
    struct dataset *ds = NULL;
    struct dataset_dctx *ctx = NULL;
    const struct dataset_info *info;
    struct progress prog;
    struct rf_err err;
    uint64_t bad = 0, good = 0, unchecked = 0, bytes = 0, done = 0;
    uint8_t *out = NULL;
    double t0 = pack_now();
    const char *dir;
    int rc;

    rc = pack_one_dir_arg("verify", usage_text, argc, argv, &dir);
    if (rc >= 0)
        return rc;
    rc = PACK_EXIT_FAIL;
    pack_signals();
    if (dataset_open_flags(dir, DATASET_OPEN_TOLERANT, &ds, &err) < 0) {
        printf("%s\n", err.msg);
        printf("verify: %s is not a readable dataset\n", dir);
        return PACK_EXIT_FAIL;
    }
    info = dataset_info(ds);
    ctx = dataset_dctx_new();
    out = malloc(info->max_decoded ? info->max_decoded : 1);
    if (!ctx || !out) {
        pack_warn("out of memory");
        goto done;
    }
    progress_start(&prog, "verifying", info->samples);
    for (uint32_t s = 0; s < info->shards && !pack_stop; s++) {
        struct dataset_shard_info si;

        dataset_shard_info(ds, s, &si);
        if (si.problem) {
            progress_end(&prog);
            printf("%s\n", si.problem);
        }
        if (!si.usable) {
            if (si.records) {
                printf("%s: records 0..%" PRIu64 " not checked: the shard "
                       "cannot be read\n", si.path, si.records - 1);
                bad++;
            }
            unchecked += si.records;
            done += si.records;
            continue;
        }
        if (si.problem)
            bad++;
        for (uint64_t r = 0; r < si.records && !pack_stop; r++) {
            struct dataset_loc loc;
            int n = dataset_read(ds, si.first_sample + r, out,
                                 info->max_decoded, ctx, &loc, &err);

            if (n >= 0 && info->kind == DATASET_JPEG &&
                px_is(out, (size_t)n)) {
                struct px_header ph;
                struct rf_err pe;

                if (px_parse(out, (size_t)n, &ph, &pe) < 0) {
                    rf_err_set(&err, -EBADMSG, "%s: record %" PRIu64 " at "
                               "byte %" PRIu64 ": %s", loc.shard_path,
                               loc.record, loc.offset, pe.msg);
                    n = -EBADMSG;
                }
            } else if (n >= 0 && info->kind == DATASET_JPEG) {
                unsigned w, h;
                char why_buf[256];
                const char *why;

                if (jpeg_probe(out, (size_t)n, &w, &h, why_buf,
                               sizeof(why_buf), &why) < 0) {
                    rf_err_set(&err, -EBADMSG, "%s: record %" PRIu64 " at "
                               "byte %" PRIu64 ": %s", loc.shard_path,
                               loc.record, loc.offset, why);
                    n = -EBADMSG;
                }
            }
            if (n < 0) {
                progress_end(&prog);
                printf("%s\n", err.msg);
                bad++;
            } else {
                good++;
                bytes += (uint64_t)n;
            }
            progress_update(&prog, ++done, bytes);
        }
    }
    progress_end(&prog);
    if (pack_stop) {
        pack_warn("interrupted by signal %d", (int)pack_stop);
        rc = 128 + pack_stop;
        goto done;
    }
    printf("verify: %s: %" PRIu64 " records in %u shard%s: %" PRIu64
           " good, %" PRIu64 " problem%s%s, %" PRIu64 " bytes decoded, "
           "%.2f s\n", dir, info->samples, info->shards,
           info->shards == 1 ? "" : "s", good, bad, bad == 1 ? "" : "s",
           unchecked ? " (some records unreachable)" : "", bytes,
           pack_now() - t0);
    rc = bad ? PACK_EXIT_FAIL : PACK_EXIT_OK;
done:
    free(out);
    dataset_dctx_free(ctx);
    dataset_close(ds);
    return rc;
}
