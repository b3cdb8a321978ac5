/*
 * pack_verify.c - `ringfeed-pack verify DIR`: reads every record of a
 * dataset and checks it: the index entry (bounds, entry checksum), the
 * record's CRC-32C, that it decodes (zstd frames, with their own content
 * checksums) to exactly its decoded length, and for jpeg datasets that the
 * JPEG header parses, or for a record that starts with RFPX's magic that
 * it parses as one (pixels.h); the RFPX records are counted and the count
 * must be the MANIFEST's raw_images (0 without the key).  A source list
 * (sources.h), when the MANIFEST names one, must have its size, CRC-32C and
 * a well-formed line per sample (one problem line if not).  Each subset
 * the MANIFEST names (subset.h) must have its size and CRC-32C and parse:
 * indices in range, sorted, distinct, as many as its line says (one
 * problem line naming the file if not).  A kind-fields
 * record must split by the schema (schema_record_split), each image part
 * be an RFPX record of its field's channels and value size or (RGB) a
 * JPEG whose header parses, and each mask its image's size.
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
#include "manifest.h"
#include "subset.h"
#include "pack.h"
#include "pixels.h"

static const char usage_text[] =
    "usage: ringfeed-pack verify DIR\n"
    "\n"
    "Checks every record of the dataset at DIR: index entries, checksums,\n"
    "that zstd records decode to their exact length, that JPEG headers\n"
    "parse, that pixel (RFPX) records parse and that there are as many as\n"
    "the MANIFEST's raw_images says, that the source list (sources.txt) has\n"
    "its size, checksum and a line per sample, that each subset file (ringfeed-pack\n"
    "split) has its size and checksum and holds sorted, distinct indices in range;\n"
    "for a dataset of kind fields, that every\n"
    "record splits into its fields (schema.h) and that each image field holds\n"
    "RFPX pixels of its channels or a JPEG, each mask its image's size.\n"
    "Prints one line per problem (shard file, record, byte offset, field,\n"
    "reason) and a summary; exits 0 when the dataset is clean, 1 otherwise.\n"
    "\n"
    "  --help   this text\n";

/*
 * A kind-fields record: split by the schema (schema_record_split), each
 * image part an RFPX record of its field's channels and value size or
 * (RGB fields) a JPEG whose header parses, each mask its image's size.
 * Returns 0, or -EBADMSG with err naming the record and the field.
 */
static int check_fields(const struct dataset_info *info, const uint8_t *rec, size_t len,
                        const struct dataset_loc *loc, struct rf_err *err)
{
    struct schema_part parts[SCHEMA_MAX_FIELDS];
    struct pack_image im[SCHEMA_MAX_FIELDS];
    struct rf_err why;

    if (schema_record_split(&info->schema, rec, len, parts, &why) < 0)
        return rf_err_set(err, -EBADMSG, "%s: record %" PRIu64 " at byte %" PRIu64 ": %s",
                          loc->shard_path, loc->record, loc->offset, why.msg);
    for (uint32_t i = 0; i < info->schema.n; i++) {
        const struct schema_field *f = &info->schema.f[i];

        if (f->kind != SCHEMA_IMAGE)
            continue;
        if (pack_image_part(f, rec + parts[i].off, parts[i].len, &im[i], &why) < 0)
            return rf_err_set(err, -EBADMSG, "%s: record %" PRIu64 " at byte %" PRIu64
                              ": field %s: %s", loc->shard_path, loc->record, loc->offset,
                              f->name, why.msg);
        if (f->role == SCHEMA_ROLE_MASK &&
            (im[i].width != im[f->of].width || im[i].height != im[f->of].height))
            return rf_err_set(err, -EBADMSG, "%s: record %" PRIu64 " at byte %" PRIu64
                              ": field %s: a mask of %" PRIu32 "x%" PRIu32 " (HxW) for "
                              "field %s of %" PRIu32 "x%" PRIu32, loc->shard_path,
                              loc->record, loc->offset, f->name, im[i].height, im[i].width,
                              info->schema.f[f->of].name, im[f->of].height,
                              im[f->of].width);
        if (f->height && (im[i].width != f->width || im[i].height != f->height))
            return rf_err_set(err, -EBADMSG, "%s: record %" PRIu64 " at byte %" PRIu64
                              ": field %s: %" PRIu32 "x%" PRIu32 " (HxW), the MANIFEST's "
                              "shape is %" PRIu32 "x%" PRIu32, loc->shard_path, loc->record,
                              loc->offset, f->name, im[i].height, im[i].width, f->height,
                              f->width);
    }
    return 0;
}

/* Reads and checks every set the MANIFEST names; one line per problem.
 * Returns the problems. */
static uint64_t check_subsets(const struct dataset *ds)
{
    struct manifest m;
    struct rf_err err;
    uint64_t bad = 0;

    if (dataset_manifest_now(ds, &m, &err) < 0) {
        printf("%s\n", err.msg);
        return 1;
    }
    for (uint32_t i = 0; i < m.nsubsets; i++) {
        struct dataset_subset_ref ref = {
            .count = m.subsets[i].count, .bytes = m.subsets[i].bytes, .crc = m.subsets[i].crc};
        struct subset s;

        snprintf(ref.name, sizeof(ref.name), "%s", manifest_subset_name(&m, i));
        snprintf(ref.file, sizeof(ref.file), "%s", manifest_subset_file(&m, i));
        if (dataset_subset_read(ds, &ref, &s, &err) < 0) {
            printf("subset %s: %s\n", ref.name, err.msg);
            bad++;
        }
        subset_free(&s);
    }
    manifest_free(&m);
    return bad;
}

int pack_verify_main(int argc, char **argv)
{
    struct dataset *ds = NULL;
    struct dataset_dctx *ctx = NULL;
    const struct dataset_info *info;
    struct progress prog;
    struct rf_err err;
    uint64_t bad = 0, good = 0, unchecked = 0, bytes = 0, done = 0;
    uint64_t pixels = 0;      /* records that start with RFPX's magic */
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
                struct rf_err why;

                pixels++;
                if (px_parse(out, (size_t)n, &ph, &why) < 0) {
                    rf_err_set(&err, -EBADMSG, "%s: record %" PRIu64 " at "
                               "byte %" PRIu64 ": %s", loc.shard_path,
                               loc.record, loc.offset, why.msg);
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
            if (n >= 0 && info->kind == DATASET_FIELDS &&
                check_fields(info, out, (size_t)n, &loc, &err) < 0)
                n = -EBADMSG;
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
    if (info->kind == DATASET_JPEG && pixels != info->raw_images) {
        /* with shards unreadable the count is short: say so, still a problem */
        printf("%s: %" PRIu64 " RFPX pixel record%s found%s, the MANIFEST's "
               "raw_images says %" PRIu64 "\n", dir, pixels,
               pixels == 1 ? "" : "s",
               unchecked ? " in the records that could be read" : "",
               info->raw_images);
        bad++;
    }
    if (dataset_has_sources(ds) && info->samples) {
        const char *line;
        size_t len;
        struct rf_err serr;

        /* the first look reads the whole list and checks every line */
        if (dataset_source(ds, 0, &line, &len, &serr) < 0) {
            printf("%s\n", serr.msg);
            bad++;
        }
    }
    bad += check_subsets(ds);
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
