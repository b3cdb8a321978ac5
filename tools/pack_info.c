/*
 * pack_info.c - `ringfeed-pack info DIR`: what a dataset holds: kind and
 * shape, samples and shards, codec and dictionary, for a jpeg dataset
 * whether it was packed with --max-side (the MANIFEST's max_side and
 * max_side_quality) and how its JPEGs were written (jpeg_restart: re-encoded
 * losslessly with restart markers, or as they were) and how many of its
 * records are RFPX pixels rather than JPEG (raw_images) and whether its
 * images have one size (image_shape), bytes stored against
 * bytes decoded, and the sample count of every class by name.  Reads the
 * manifest and the index entries (not the records: that is verify's job).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "manifest.h"
#include "pack.h"

static const char usage_text[] =
    "usage: ringfeed-pack info DIR\n"
    "\n"
    "Describes the dataset at DIR: kind, shape, its fields (one line each,\n"
    "the MANIFEST's words: name, kind, options), samples, shards, codec,\n"
    "the largest side it was packed with and how its JPEGs were written\n"
    "(jpeg), how many records are decoded pixels (RFPX) rather than JPEG,\n"
    "bytes stored and decoded, and the samples of each class by name.\n"
    "\n"
    "  --help   this text\n";

/* How a jpeg dataset's records were written, from its MANIFEST. */
static const char *layout_line(const struct dataset_info *info)
{
    if (info->jpeg_restart == DATASET_JPEG_RESTART_LOSSLESS)
        return info->max_side
            ? "JPEG with restart markers: larger ones shrunk, the others "
              "re-encoded losslessly (pixels identical; CMYK, RGB and "
              "undecodable files as they were)"
            : "JPEG re-encoded losslessly with restart markers (pixels "
              "identical; CMYK, RGB and undecodable files as they were)";
    return info->max_side
        ? "JPEG as they were, but for those shrunk (no restart markers "
          "written)"
        : "JPEG as they were (not re-encoded)";
}

/* The named index sets (ringfeed-pack split), as the MANIFEST names them
 * now: name, indices, share of the samples, file.  Their contents are
 * verify's to check. */
static void print_subsets(const struct dataset *ds)
{
    uint64_t n = dataset_info(ds)->samples;
    struct manifest m;
    struct rf_err err;

    if (dataset_manifest_now(ds, &m, &err) < 0) {
        printf("subsets   ? (%s)\n", err.msg);
        return;
    }
    printf("subsets   %u%s\n", m.nsubsets, m.nsubsets ? "" : " (ringfeed-pack split makes "
           "them; ATTACH subset=START:STOP needs none)");
    if (m.nsubsets)
        printf("  name              samples   share  file\n");
    for (uint32_t i = 0; i < m.nsubsets; i++)
        printf("  %-14s %10" PRIu64 "  %5.1f%%  %s\n", manifest_subset_name(&m, i),
               m.subsets[i].count, n ? 100.0 * (double)m.subsets[i].count / (double)n : 0.0,
               manifest_subset_file(&m, i));
    manifest_free(&m);
}

int pack_info_main(int argc, char **argv)
{
    struct dataset *ds;
    const struct dataset_info *info;
    struct rf_err err;
    uint64_t *per_class = NULL, stored = 0, decoded = 0, on_disk = 0;
    uint64_t raw_records = 0;
    const char *dir;
    int rc;

    rc = pack_one_dir_arg("info", usage_text, argc, argv, &dir);
    if (rc >= 0)
        return rc;
    rc = PACK_EXIT_FAIL;
    if (dataset_open(dir, &ds, &err) < 0) {
        pack_warn("%s", err.msg);
        pack_warn("(ringfeed-pack verify %s lists every problem)", dir);
        return PACK_EXIT_FAIL;
    }
    info = dataset_info(ds);
    per_class = calloc(info->classes ? info->classes : 1, sizeof(*per_class));
    if (!per_class)
        goto out;
    for (uint64_t i = 0; i < info->samples; i++) {
        struct dataset_loc loc;

        if (dataset_locate(ds, i, &loc, &err) < 0) {
            pack_warn("%s", err.msg);
            pack_warn("(ringfeed-pack verify %s lists every problem)",
                      dir);
            goto out;
        }
        stored += loc.stored_len;
        decoded += loc.decoded_len;
        if (loc.codec == DATASET_CODEC_NONE)
            raw_records++;
        if (loc.label < info->classes)
            per_class[loc.label]++;
    }
    for (uint32_t s = 0; s < info->shards; s++) {
        struct dataset_shard_info si;

        dataset_shard_info(ds, s, &si);
        on_disk += si.file_size;
    }
    on_disk += info->dict_size;

    printf("dataset   %s\n", dataset_dir(ds));
    printf("kind      %s", dataset_kind_name(info->kind));
    if (info->kind == DATASET_TENSOR) {
        printf(" %s ", dataset_dtype_name(info->dtype));
        for (unsigned d = 0; d < info->ndim; d++)
            printf("%s%" PRIu64, d ? "x" : "", info->shape[d]);
        printf(" (%" PRIu64 " bytes a sample)", info->sample_bytes);
    }
    if (info->schema.n) {
        printf("\nfields    %u%s", info->schema.n, info->kind == DATASET_FIELDS
               ? " (the MANIFEST's field lines: name kind options)"
               : " (implicit: the label is the shard entry's, not in the record)");
        for (uint32_t i = 0; i < info->schema.n; i++) {
            char line[SCHEMA_LINE_MAX];

            if (schema_field_format(&info->schema, i, line, sizeof(line)) < 0)
                snprintf(line, sizeof(line), "%s (too long to show)", info->schema.f[i].name);
            printf("\n  field   %s", line);
        }
    }
    printf("\nsamples   %" PRIu64 " in %u shard%s\n", info->samples,
           info->shards, info->shards == 1 ? "" : "s");
    printf("codec     %s", codec_name(info->codec));
    if (info->has_dict)
        printf(" with a %u-byte dictionary", info->dict_size);
    if (info->codec != DATASET_CODEC_NONE)
        printf(" (%" PRIu64 " records stored as is: zstd did not shrink "
               "them)", raw_records);
    if (info->kind == DATASET_JPEG && info->max_side)
        printf("\nmax side  %u px (packed with --max-side %u --quality %u: "
               "larger images were re-encoded)", info->max_side,
               info->max_side, info->max_side_quality);
    else if (info->kind == DATASET_JPEG)
        printf("\nmax side  none (no image shrunk)");
    if (info->kind == DATASET_JPEG)
        printf("\nlayout    %s", layout_line(info));
    if (info->kind == DATASET_JPEG && info->raw_images)
        printf("\npixels    %" PRIu64 " record%s RFPX (decoded RGB pixels, "
               "from PNG, WebP, BMP, TIFF or PPM files), %" PRIu64 " JPEG",
               info->raw_images, info->raw_images == 1 ? "" : "s",
               info->samples - info->raw_images);
    else if (info->kind == DATASET_JPEG)
        printf("\npixels    none (every record JPEG)");
    if (info->kind == DATASET_JPEG && info->image_width)
        printf("\nshape     every image %" PRIu32 "x%" PRIu32 " (HxW: transform "
               "none delivers them as they are)", info->image_height,
               info->image_width);
    else if (info->kind == DATASET_JPEG)
        printf("\nshape     not one size (no image_shape: use train or eval)");
    printf("\nstored    %" PRIu64 " bytes of records, %" PRIu64 " bytes on "
           "disk with headers, indexes and dictionary\n", stored, on_disk);
    printf("decoded   %" PRIu64 " bytes\n", decoded);
    printf("ratio     %.2f (decoded / stored)\n",
           stored ? (double)decoded / (double)stored : 0.0);
    printf("largest   %u bytes stored, %u decoded\n", info->max_stored,
           info->max_decoded);
    printf("classes   %u\n", info->classes);
    if (info->classes && info->kind == DATASET_FIELDS) {
        /* the label is a field of the record, which info does not read */
        printf("  label  name (kind fields: samples per class are not counted)\n");
        for (uint32_t c = 0; c < info->classes; c++)
            printf("  %5u  %s\n", c, dataset_class_name(ds, c));
    } else if (info->classes) {
        printf("  label    samples  name\n");
        for (uint32_t c = 0; c < info->classes; c++)
            printf("  %5u  %9" PRIu64 "  %s\n", c, per_class[c],
                   dataset_class_name(ds, c));
    }
    print_subsets(ds);
    rc = PACK_EXIT_OK;
out:
    free(per_class);
    dataset_close(ds);
    return rc;
}
