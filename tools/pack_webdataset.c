/*
 * pack_webdataset.c - `ringfeed-pack webdataset`: WebDataset tar shards
 * into a kind-fields dataset (proto/schema.h), one record a sample, in the
 * order of the tars and of their members.
 *
 * The tars are read with libarchive (plain, or compressed by any filter it
 * knows: .tar.gz, .tar.zst, ...); WebDataset's naming and grouping rules
 * are wds.h's pure functions.  Each extension is a field, named after it
 * (wds_field_name: `seg.png` -> `seg_png`), its kind told by the
 * extension's last part (wds_ext_kind):
 *   image    (jpg jpeg png webp ppm pgm bmp tif tiff) stored as
 *            `ringfeed-pack imagefolder` stores a file (imagefile.h, its
 *            defaults: JPEGs re-encoded losslessly with restart markers,
 *            other formats as RFPX pixels); RGB, channels=3; the MANIFEST
 *            gets shape=HxW when every image of the field has one size;
 *   integer  (cls cls2 index label) an int64 scalar from ASCII decimal;
 *   text, json and any other extension: a bytes field, stored as given
 *            (text is not checked to be UTF-8, JSON is not parsed);
 *   npy      a tensor of the first sample's dtype and shape (a 0-d array
 *            is shape 1), little-endian; with --ragged EXT a ragged field
 *            whose rows are the first dimension, the rest the first
 *            sample's.  A one-pass packer cannot know that shapes will vary,
 *            so the user says so; a later sample of another dtype or shape
 *            is a bad sample whose message names --ragged.  Bool arrays
 *            are u8; u4 and u8 arrays are refused (no such dtype here).
 * The field list, in its order, is --fields' or the first sample's (its
 * members' order).  With --fields, a sample's other extensions are left
 * out; without it, a sample with an extension the first did not have is
 * bad.  A sample missing a field, holding an extension twice, whose key
 * came earlier in the same tar apart from it, whose image does not decode,
 * whose .cls is no integer or whose .npy does not match its field, is bad:
 * reported naming the tar, the member and the key; the pack then fails
 * (exit 1, no dataset left) unless --skip-bad, which skips and counts it.
 * Members that are not regular files (folders, links) and members with no
 * extension are skipped (WebDataset skips them too) and counted.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "pack.h"

static const char usage_text[] =
    "usage: ringfeed-pack webdataset [options] TAR... OUT_DIR\n"
    "\n"
    "Packs WebDataset tar shards (plain or compressed) into a fields dataset at\n"
    "OUT_DIR (which must not exist): members with one key (path up to the first\n"
    "'.' of the basename) form a sample, each extension a field: jpg/png/webp/...\n"
    "images, cls/cls2/index/label int64 scalars, npy tensors, txt/json and any\n"
    "other extension bytes.\n"
    "\n"
    "  --fields EXT,...     the fields, in order (default: the first sample's\n"
    "                       extensions); other extensions are left out\n"
    "  --ragged EXT,...     npy fields whose first dimension varies: ragged\n"
    "                       fields (default: a tensor of the first sample's shape)\n"
    "  --skip-bad           skip samples whose members do not fit the fields\n"
    "                       (counted at the end) rather than fail\n"
    "  --shard-size BYTES   start a new shard past this size, K/M/G suffixes\n"
    "                       (default 256M)\n"
    "  --help               this text\n";

#if RINGFEED_HAVE_LIBARCHIVE

#include <archive.h>
#include <archive_entry.h>

#include "imagefile.h"
#include "npy.h"
#include "wds.h"

struct wd_args {
    const char *fields;         /* --fields */
    const char *ragged;         /* --ragged */
    int skip_bad;
    uint64_t shard_bytes;
    char **tars;
    int ntars;
    const char *out;
};

/* A member of the open sample: its path and bytes. */
struct wd_member {
    char *path;
    size_t path_cap;
    uint8_t *data;
    size_t len, cap;
};

/* What a field holds beyond its schema line. */
struct wd_field {
    enum wds_kind kind;
    int ragged;                 /* npy: --ragged */
    /* npy: this sample's dtype and shape (tensor: all dims; ragged: the
     * tail), checked against the schema's once the writer exists */
    enum dataset_dtype dtype;
    unsigned ndim;
    uint64_t dims[DATASET_MAX_DIMS];
    uint8_t *swapped;           /* npy: a big-endian array's bytes, swapped */
    size_t swapped_cap;
    struct imagefile img;       /* image: this sample's record */
    uint32_t height, width;     /* image: the size every image had so far */
    int sizes_vary;
    const uint8_t *part;        /* this sample's part */
    size_t part_len;
    uint8_t scalar[8];
};

struct wd {
    const struct wd_args *a;
    const char *tar;            /* the tar being read */
    struct wds_group g;
    struct wds_fields fields;
    int have_fields;
    struct wds_fields ragged;
    struct wd_member mem[WDS_MEMBERS_MAX];
    struct wd_field f[SCHEMA_MAX_FIELDS];
    struct schema schema;
    struct dataset_writer *w;
    struct imagefile_opts io;
    struct imagefile_coders coders;
    uint8_t *rec;
    size_t rec_cap;
    uint64_t samples, bad, not_files, no_ext, left_out, members;
};

/* npy's type -> a dataset dtype (DATASET_DTYPE_NONE: none). */
static const struct {
    char kind;
    uint32_t size;
    enum dataset_dtype dtype;
} npy_dtypes[] = {
    {'b', 1, DATASET_DTYPE_U8}, {'u', 1, DATASET_DTYPE_U8}, {'i', 1, DATASET_DTYPE_I8},
    {'u', 2, DATASET_DTYPE_U16}, {'i', 2, DATASET_DTYPE_I16}, {'i', 4, DATASET_DTYPE_I32},
    {'i', 8, DATASET_DTYPE_I64}, {'f', 2, DATASET_DTYPE_F16}, {'f', 4, DATASET_DTYPE_F32},
    {'f', 8, DATASET_DTYPE_F64},
};

static enum dataset_dtype npy_dtype(const struct npy_header *h)
{
    for (size_t i = 0; i < sizeof(npy_dtypes) / sizeof(npy_dtypes[0]); i++)
        if (npy_dtypes[i].kind == h->kind && npy_dtypes[i].size == h->itemsize)
            return npy_dtypes[i].dtype;
    return DATASET_DTYPE_NONE;
}

static void shape_text(const uint64_t *dims, unsigned ndim, char *buf, size_t cap)
{
    size_t at = (size_t)snprintf(buf, cap, "(");

    for (unsigned d = 0; d < ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%" PRIu64, d ? ", " : "", dims[d]);
    if (at < cap)
        snprintf(buf + at, cap - at, ndim == 1 ? ",)" : ")");
}

/*
 * Member m's npy bytes as field fi's part: the header read, its dtype and
 * shape put in f (and checked against the schema once there is one), the
 * data swapped to little-endian when it was not.  Returns 0, or -EBADMSG
 * with err saying why.
 */
static int npy_part(struct wd *p, uint32_t fi, const struct wd_member *m, struct rf_err *err)
{
    struct wd_field *f = &p->f[fi];
    struct npy_header h;
    char tn[8], have[160], want[160];
    unsigned skip;

    if (npy_parse(m->data, m->len, m->len, &h, err) < 0)
        return -EBADMSG;
    f->dtype = npy_dtype(&h);
    if (f->dtype == DATASET_DTYPE_NONE) {
        npy_type_name(&h, tn, sizeof(tn));
        return rf_err_set(err, -EBADMSG, "an array of %s: ringfeed holds b1 u1 i1 u2 i2 i4 "
                          "i8 f2 f4 f8", tn);
    }
    if (f->ragged && h.ndim == 0)
        return rf_err_set(err, -EBADMSG, "a 0-d array in a ragged field (rows are the "
                          "first dimension)");
    skip = f->ragged ? 1 : 0;
    f->ndim = h.ndim - skip;
    for (unsigned d = skip; d < h.ndim; d++)
        f->dims[d - skip] = h.shape[d];
    if (!f->ragged && h.ndim == 0) {
        f->ndim = 1;
        f->dims[0] = 1;
    }
    if (p->w) {
        const struct schema_field *sf = &p->schema.f[fi];

        if (sf->dtype != f->dtype || sf->ndim != f->ndim ||
            memcmp(sf->dims, f->dims, f->ndim * sizeof(f->dims[0])) != 0) {
            npy_type_name(&h, tn, sizeof(tn));
            shape_text(h.shape, h.ndim, have, sizeof(have));
            shape_text(sf->dims, sf->ndim, want, sizeof(want));
            return rf_err_set(err, -EBADMSG, "an array of %s of shape %s, but the field holds "
                              "%s %s%s%s", tn, have, dataset_dtype_name(sf->dtype),
                              f->ragged ? "rows of shape " : "of shape ", want,
                              f->ragged ? "" : " (--ragged makes a field whose first "
                                               "dimension varies)");
        }
    }
    f->part = m->data + h.data_off;
    f->part_len = h.data_bytes;
    if (h.big_endian && h.itemsize > 1) {
        if (f->swapped_cap < h.data_bytes) {
            uint8_t *b = realloc(f->swapped, h.data_bytes);

            if (!b)
                return rf_err_set(err, -EBADMSG, "out of memory for %" PRIu64 " bytes",
                                  h.data_bytes);
            f->swapped = b;
            f->swapped_cap = h.data_bytes;
        }
        for (uint64_t e = 0; e < h.count; e++)
            for (uint32_t b = 0; b < h.itemsize; b++)
                f->swapped[e * h.itemsize + b] = f->part[e * h.itemsize + h.itemsize - 1 - b];
        f->part = f->swapped;
    }
    return 0;
}

/*
 * Member m as field fi's part.  Returns 0; -EBADMSG (a bad sample) with
 * err saying why; -EIO (the pack fails) with err saying why.
 */
static int member_part(struct wd *p, uint32_t fi, const struct wd_member *m,
                       struct rf_err *err)
{
    struct wd_field *f = &p->f[fi];
    int64_t v;

    switch (f->kind) {
    case WDS_IMAGE:
        imagefile_run_bytes(&f->img, m->data, m->len, &p->io, &p->coders);
        if (f->img.verdict == IMAGEFILE_FAIL)
            return rf_err_set(err, -EIO, "%s", f->img.why);
        if (f->img.verdict == IMAGEFILE_SKIP)
            return rf_err_set(err, -EBADMSG, "%s", f->img.why);
        if (f->img.note.why)
            pack_warn("%s: member %s: %s: %s", p->tar, m->path, f->img.note.why,
                      f->img.note.then);
        f->part = f->img.rec;
        f->part_len = f->img.rec_len;
        return 0;
    case WDS_INT:
        if (wds_parse_int(m->data, m->len, &v, err) < 0)
            return -EBADMSG;
        for (int b = 0; b < 8; b++)
            f->scalar[b] = (uint8_t)((uint64_t)v >> (8 * b));
        f->part = f->scalar;
        f->part_len = 8;
        return 0;
    case WDS_NPY:
        return npy_part(p, fi, m, err);
    case WDS_TEXT:
    case WDS_JSON:
    case WDS_BYTES:
    case WDS_KIND_COUNT:
        break;
    }
    f->part = m->data;
    f->part_len = m->len;
    return 0;
}

/* Checks --ragged against the field list: each an npy field. */
static int check_ragged(struct wd *p)
{
    for (uint32_t k = 0; k < p->ragged.n; k++) {
        uint32_t i;

        for (i = 0; i < p->fields.n && strcmp(p->fields.ext[i], p->ragged.ext[k]); i++)
            ;
        if (i == p->fields.n || p->f[i].kind != WDS_NPY) {
            pack_warn("--ragged %s: %s", p->ragged.ext[k], i == p->fields.n ?
                      "no such field" : "not an npy field");
            return -1;
        }
    }
    return 0;
}

/*
 * The schema from the field list and the first good sample's parts, and
 * the writer.  Returns 0, or -1 after saying why.
 */
static int start_writer(struct wd *p)
{
    struct dataset_writer_opts wo = {.kind = DATASET_FIELDS, .codec = DATASET_CODEC_ZSTD,
                                     .shard_bytes = p->a->shard_bytes,
                                     .schema = &p->schema};
    struct rf_err err;

    if (check_ragged(p) < 0)
        return -1;
    memset(&p->schema, 0, sizeof(p->schema));
    for (uint32_t i = 0; i < p->fields.n; i++) {
        struct schema_field sf;
        const struct wd_field *f = &p->f[i];

        memset(&sf, 0, sizeof(sf));
        wds_field_name(p->fields.ext[i], strlen(p->fields.ext[i]), sf.name);
        switch (f->kind) {
        case WDS_IMAGE:
            sf.kind = SCHEMA_IMAGE;
            sf.dtype = DATASET_DTYPE_U8;
            sf.channels = 3;
            break;
        case WDS_INT:
            sf.kind = SCHEMA_SCALAR;
            sf.dtype = DATASET_DTYPE_I64;
            break;
        case WDS_NPY:
            sf.kind = f->ragged ? SCHEMA_RAGGED : SCHEMA_TENSOR;
            sf.dtype = f->dtype;
            sf.ndim = f->ndim;
            memcpy(sf.dims, f->dims, sizeof(sf.dims));
            if (f->ragged) {
                uint64_t row = dataset_dtype_size(f->dtype);

                for (unsigned d = 0; d < f->ndim; d++)
                    row *= f->dims[d] ? f->dims[d] : 1;
                sf.max_rows = row && row <= DATASET_RECORD_MAX ? DATASET_RECORD_MAX / row : 1;
            }
            break;
        case WDS_TEXT:
        case WDS_JSON:
        case WDS_BYTES:
        case WDS_KIND_COUNT:
            sf.kind = SCHEMA_BYTES;
            sf.dtype = DATASET_DTYPE_U8;
            sf.max_rows = DATASET_RECORD_MAX;
            break;
        }
        if (schema_add(&p->schema, &sf, "", &err) < 0)
            goto bad;
    }
    if (schema_check(&p->schema, &err) < 0)
        goto bad;
    if (dataset_writer_create(p->a->out, &wo, &p->w, &err) < 0)
        goto bad;
    return 0;
bad:
    pack_warn("%s: the fields of the first sample: %s", p->tar, err.msg);
    return -1;
}

/*
 * Reports a bad sample: the tar, member m's path (or the sample's key when
 * m < 0) and why.  Returns 0 to go on (--skip-bad) or -1 to fail.
 */
static int bad_sample(struct wd *p, int m, const char *why)
{
    if (m >= 0)
        pack_warn("%s: member %s (key %s): %s", p->tar, p->mem[m].path, p->g.key, why);
    else
        pack_warn("%s: key %s: %s", p->tar, p->g.key, why);
    p->bad++;
    if (p->a->skip_bad)
        return 0;
    pack_warn("the pack fails at the first bad sample (--skip-bad skips them)");
    return -1;
}

/* Checks, converts and adds the open sample.  Returns 0, or -1 to fail. */
static int sample_done(struct wd *p)
{
    uint32_t n = p->g.members, which;
    int32_t field_of[WDS_MEMBERS_MAX];
    uint64_t lens[SCHEMA_MAX_FIELDS];
    struct rf_err err;
    char why[RF_ERR_MSG_MAX + 128];
    uint64_t size;
    uint8_t *at;
    int r;

    if (!p->g.open || n == 0)
        return 0;
    if (p->g.fault != WDS_OK)
        return bad_sample(p, (int)p->g.fault_member, wds_fault_text(p->g.fault));
    if (!p->have_fields) {
        if (wds_fields_from(&p->fields, p->g.ext, n, &err) < 0) {
            pack_warn("%s: key %s: the first sample's extensions make no field list: %s",
                      p->tar, p->g.key, err.msg);
            return -1;
        }
        p->have_fields = 1;
    }
    if (!p->w)
        for (uint32_t i = 0; i < p->fields.n; i++) {
            const char *e = p->fields.ext[i];

            p->f[i].kind = wds_ext_kind(e, strlen(e));
            for (uint32_t k = 0; k < p->ragged.n; k++)
                if (strcmp(p->ragged.ext[k], e) == 0)
                    p->f[i].ragged = 1;
        }
    r = wds_fields_map(&p->fields, p->g.ext, n, field_of, &which);
    if (r == -ENOENT) {
        snprintf(why, sizeof(why), "the sample has no .%s member", p->fields.ext[which]);
        return bad_sample(p, -1, why);
    }
    if (r < 0)
        return bad_sample(p, (int)which, "its extension is not one of the first sample's "
                          "(--fields chooses the fields)");
    for (uint32_t m = 0; m < n; m++) {
        if (field_of[m] < 0) {
            p->left_out++;
            continue;
        }
        r = member_part(p, (uint32_t)field_of[m], &p->mem[m], &err);
        if (r == -EIO) {
            pack_warn("%s: member %s (key %s): %s", p->tar, p->mem[m].path, p->g.key, err.msg);
            return -1;
        }
        if (r < 0)
            return bad_sample(p, (int)m, err.msg);
    }
    if (!p->w && start_writer(p) < 0)
        return -1;
    for (uint32_t i = 0; i < p->fields.n; i++)
        lens[i] = p->f[i].part_len;
    size = schema_record_size(&p->schema, lens);
    if (size == 0)
        return bad_sample(p, -1, "its fields make a record over 1 GiB");
    if (size > p->rec_cap) {
        uint8_t *b = realloc(p->rec, size);

        if (!b) {
            pack_warn("%s: key %s: out of memory for a record of %" PRIu64 " bytes", p->tar,
                      p->g.key, size);
            return -1;
        }
        p->rec = b;
        p->rec_cap = size;
    }
    at = p->rec;
    for (uint32_t i = 0; i < p->fields.n; i++) {
        schema_record_put_len(at, (uint32_t)lens[i]);
        if (lens[i])
            memcpy(at + 4, p->f[i].part, lens[i]);
        at += 4 + lens[i];
    }
    if (dataset_writer_add(p->w, p->rec, size, DATASET_NO_LABEL, &err) < 0) {
        pack_warn("%s: key %s: %s", p->tar, p->g.key, err.msg);
        return -1;
    }
    for (uint32_t i = 0; i < p->fields.n; i++) {
        struct wd_field *f = &p->f[i];

        if (f->kind != WDS_IMAGE)
            continue;
        if (p->samples == 0) {
            f->height = f->img.height;
            f->width = f->img.width;
        } else if (f->height != f->img.height || f->width != f->img.width) {
            f->sizes_vary = 1;
        }
        imagefile_trim(&f->img);
    }
    p->samples++;
    return 0;
}

/* Reads the current entry's data into member m.  Returns 0, -EFBIG (over a
 * record), or -EIO with err set. */
static int read_member(struct archive *ar, struct archive_entry *e, struct wd_member *m,
                       struct rf_err *err)
{
    la_int64_t want = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;

    m->len = 0;
    if (want > (la_int64_t)DATASET_RECORD_MAX)
        return rf_err_set(err, -EFBIG, "a member of %lld bytes: over a record's %u",
                          (long long)want, DATASET_RECORD_MAX);
    for (;;) {
        la_ssize_t got;

        if (m->cap - m->len < 65536) {
            size_t cap = m->cap ? m->cap * 2 : 65536;
            uint8_t *b;

            if (cap < (size_t)want + 1)
                cap = (size_t)want + 1;
            if (cap > (size_t)DATASET_RECORD_MAX + 65536)
                return rf_err_set(err, -EFBIG, "a member over a record's %u bytes",
                                  DATASET_RECORD_MAX);
            if (!(b = realloc(m->data, cap)))
                return rf_err_set(err, -EIO, "out of memory for %zu bytes", cap);
            m->data = b;
            m->cap = cap;
        }
        got = archive_read_data(ar, m->data + m->len, m->cap - m->len);
        if (got < 0)
            return rf_err_set(err, -EIO, "%s", archive_error_string(ar));
        if (got == 0)
            return 0;
        m->len += (size_t)got;
    }
}

static int set_path(struct wd_member *m, const char *path)
{
    size_t n = strlen(path) + 1;

    if (n > m->path_cap) {
        char *s = realloc(m->path, n);

        if (!s)
            return -ENOMEM;
        m->path = s;
        m->path_cap = n;
    }
    memcpy(m->path, path, n);
    return 0;
}

/* Packs one tar.  Returns 0, or -1 after saying why. */
static int pack_tar(struct wd *p, const char *tar)
{
    struct archive *ar = archive_read_new();
    struct archive_entry *e;
    struct rf_err err;
    int r, rc = -1;

    p->tar = tar;
    wds_group_reset(&p->g);
    if (!ar) {
        pack_warn("%s: out of memory", tar);
        return -1;
    }
    archive_read_support_filter_all(ar);
    archive_read_support_format_tar(ar);
    if (archive_read_open_filename(ar, tar, 1 << 16) != ARCHIVE_OK) {
        pack_warn("%s: not a readable tar: %s", tar, archive_error_string(ar));
        goto out;
    }
    for (;;) {
        const char *path;
        struct wds_name nm;
        uint32_t idx;

        if (pack_stop)
            goto out;
        r = archive_read_next_header(ar, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r == ARCHIVE_WARN) {
            pack_warn("%s: %s", tar, archive_error_string(ar));
        } else if (r != ARCHIVE_OK) {
            pack_warn("%s: not a readable tar: %s", tar, archive_error_string(ar));
            goto out;
        }
        path = archive_entry_pathname(e);
        if (archive_entry_filetype(e) != AE_IFREG || !path) {
            p->not_files++;
            continue;
        }
        if (wds_name_split(path, strlen(path), &nm) < 0) {
            p->no_ext++;
            continue;
        }
        p->members++;
        /* a new key: the open sample is complete */
        if (wds_group_is_new(&p->g, path, nm.key_len) && sample_done(p) < 0)
            goto out;
        idx = wds_group_is_new(&p->g, path, nm.key_len) ? 0 : p->g.members;
        if (wds_group_next(&p->g, path, nm.key_len, path + nm.ext_off, nm.ext_len) < 0) {
            pack_warn("%s: out of memory", tar);
            goto out;
        }
        if (idx == p->g.members) {       /* over WDS_MEMBERS_MAX: not kept */
            archive_read_data_skip(ar);
            continue;
        }
        if (set_path(&p->mem[idx], path) < 0) {
            pack_warn("%s: out of memory", tar);
            goto out;
        }
        r = read_member(ar, e, &p->mem[idx], &err);
        if (r < 0) {
            pack_warn("%s: member %s: %s", tar, path, err.msg);
            goto out;
        }
    }
    rc = sample_done(p);
out:
    archive_read_free(ar);
    return rc;
}

static int parse_args(int argc, char **argv, struct wd_args *a)
{
    static const struct option longopts[] = {
        {"fields", required_argument, NULL, 'f'},
        {"ragged", required_argument, NULL, 'r'},
        {"skip-bad", no_argument, NULL, 'k'},
        {"shard-size", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    *a = (struct wd_args){0};
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f': a->fields = optarg; break;
        case 'r': a->ragged = optarg; break;
        case 'k': a->skip_bad = 1; break;
        case 's':
            if (pack_parse_size(optarg, &a->shard_bytes) < 0 || a->shard_bytes < 4096)
                return pack_usage_error("webdataset", "--shard-size: '%s' is not a size of "
                                        "at least 4096 bytes (e.g. 256M)", optarg);
            break;
        case 'h':
            fputs(usage_text, stdout);
            return -1;
        case ':':
            return pack_usage_error("webdataset", "%s needs a value", argv[optind - 1]);
        default:
            return pack_usage_error("webdataset", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind < 2)
        return pack_usage_error("webdataset", argc - optind == 1 ? "OUT_DIR is required "
                                "after the tars" : "TAR... and OUT_DIR are required");
    a->tars = argv + optind;
    a->ntars = argc - optind - 1;
    a->out = argv[argc - 1];
    return 0;
}

int pack_webdataset_main(int argc, char **argv)
{
    struct wd_args a;
    struct wd *p;
    struct rf_err err;
    struct dataset_writer_stats st;
    struct progress prog;
    double t0 = pack_now();
    int r, rc = PACK_EXIT_FAIL;

    r = parse_args(argc, argv, &a);
    if (r)
        return r < 0 ? PACK_EXIT_OK : r;
    if (!(p = calloc(1, sizeof(*p)))) {
        pack_warn("out of memory");
        return PACK_EXIT_FAIL;
    }
    p->a = &a;
    wds_group_init(&p->g);
    if (a.fields) {
        if (wds_fields_parse(a.fields, &p->fields, &err) < 0) {
            rc = pack_usage_error("webdataset", "--fields: %s", err.msg);
            goto out;
        }
        p->have_fields = 1;
    }
    if (a.ragged && wds_fields_parse(a.ragged, &p->ragged, &err) < 0) {
        rc = pack_usage_error("webdataset", "--ragged: %s", err.msg);
        goto out;
    }
    p->io = (struct imagefile_opts){.quality = IMAGEFILE_QUALITY_DEFAULT,
                                    .smart_pixels = IMAGEFILE_SMART_PIXELS_DEFAULT,
                                    .mode = IMAGEFILE_RAW};
    if (imagefile_coders_init(&p->coders, &p->io) < 0) {
        pack_warn("out of memory");
        goto out;
    }
    pack_signals();
    progress_start(&prog, "packing", (uint64_t)a.ntars);
    for (int t = 0; t < a.ntars; t++) {
        if (pack_tar(p, a.tars[t]) < 0)
            goto out;
        if (p->w) {
            dataset_writer_get_stats(p->w, &st);
            progress_update(&prog, (uint64_t)t + 1, st.decoded_bytes);
        }
    }
    progress_end(&prog);
    if (!p->w) {
        pack_warn("no sample to pack in %d tar%s%s", a.ntars, a.ntars == 1 ? "" : "s",
                  p->bad ? " (every sample was bad)" : "");
        goto out;
    }
    for (uint32_t i = 0; i < p->fields.n; i++) {
        const struct wd_field *f = &p->f[i];

        if (f->kind == WDS_IMAGE && !f->sizes_vary && f->height && f->width &&
            dataset_writer_set_field_shape(p->w, i, f->height, f->width, &err) < 0) {
            pack_warn("%s", err.msg);
            goto out;
        }
    }
    r = dataset_writer_finish(p->w, &st, &err);
    p->w = NULL;
    if (r < 0) {
        pack_warn("%s", err.msg);
        goto out;
    }
    pack_summary(a.out, &st, "zstd", pack_now() - t0);
    printf("  samples  %" PRIu64 " from %" PRIu64 " members of %d tar%s; %" PRIu64
           " bad sample%s skipped\n", p->samples, p->members, a.ntars, a.ntars == 1 ? "" : "s",
           p->bad, p->bad == 1 ? "" : "s");
    if (p->left_out || p->no_ext || p->not_files)
        printf("  left out %" PRIu64 " member%s not in --fields, %" PRIu64 " without an "
               "extension, %" PRIu64 " not regular files\n", p->left_out,
               p->left_out == 1 ? "" : "s", p->no_ext, p->not_files);
    rc = PACK_EXIT_OK;
out:
    if (pack_stop && rc != PACK_EXIT_OK)
        rc = pack_interrupted(p->w);
    else
        dataset_writer_abort(p->w);
    imagefile_coders_fini(&p->coders);
    for (uint32_t i = 0; i < SCHEMA_MAX_FIELDS; i++) {
        imagefile_fini(&p->f[i].img);
        free(p->f[i].swapped);
    }
    for (uint32_t m = 0; m < WDS_MEMBERS_MAX; m++) {
        free(p->mem[m].path);
        free(p->mem[m].data);
    }
    free(p->rec);
    wds_group_fini(&p->g);
    free(p);
    return rc;
}

#else /* !RINGFEED_HAVE_LIBARCHIVE */

int pack_webdataset_main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage_text, stdout);
        return PACK_EXIT_OK;
    }
    pack_warn("webdataset: this ringfeed-pack was built without libarchive, which reads "
              "the tars (Debian: libarchive-dev; then meson setup --reconfigure)");
    return PACK_EXIT_FAIL;
}

#endif
