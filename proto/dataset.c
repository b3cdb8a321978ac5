/*
 * dataset.c - opening a dataset folder and reading its samples (the API is
 * in dataset.h, the shard layout in shard.h, the manifest in manifest.h).
 *
 * Open checks, in this order, and stops at the first failure (or, with
 * DATASET_OPEN_TOLERANT, records a shard's failure and goes on):
 *   1. MANIFEST parses (manifest.c checks its own consistency).
 *   2. The dictionary, if any: size and CRC-32C as the manifest says, and a
 *      real zstd dictionary (it has an id).
 *   3. Per shard: a regular file of exactly the manifest's size; a header
 *      that decodes (shard.c) and agrees with the manifest (records, shard
 *      number, index checksum, codecs, dictionary id); the index mapped and
 *      its CRC-32C equal to the header's.
 * Afterwards nothing is written: locate reads a mapped entry and checks it
 * (shard_entry_decode) on every call, so a damaged entry is caught where it
 * is used, whether or not open could see it.
 *
 * A sample number maps to its shard by binary search over each shard's
 * first sample number (nshards entries); within the shard the record number
 * is the difference.
 */
#include "dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "crc32c.h"
#include "fileio.h"
#include "manifest.h"
#include "mapguard.h"
#include "shard.h"
#include "sources.h"
#include "subset.h"

struct ds_shard {
    char *path;
    int fd;
    uint64_t first;            /* first sample number */
    uint64_t records;
    uint64_t file_size;
    struct shard_limits lim;   /* lim.data_end is the index offset */
    const uint8_t *index;      /* index_len bytes, inside map */
    void *map;
    size_t map_len;
    int usable;
    int status;                /* negative errno when unusable */
    char *problem;             /* NULL when the shard passed every check */
};

#define DATASET_VIEW_MAX 16

struct dataset {
    char *dir;
    uint64_t identity;         /* CRC-32C and length of the MANIFEST text */
    struct manifest m;
    struct dataset_info info;
    ZSTD_DDict *ddict;
    uint32_t dict_id;
    struct ds_shard *shards;
    char *src_text;            /* the source list, read on first use */
    uint64_t *src_off;         /* samples + 1 line starts (sources.h) */
    bool on_demand;            /* DATASET_OPEN_ON_DEMAND: shards opened when needed */
    /* a view (dataset_view_new): its parts, borrowed, and where each begins */
    uint32_t nparts;
    struct dataset *parts[DATASET_VIEW_MAX];
    uint64_t part_base[DATASET_VIEW_MAX + 1];
};

struct dataset_dctx {
    struct codec_dctx *codec;
    uint8_t *buf;              /* stored bytes for dataset_read */
    size_t cap;
};

static char *path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);

    if (!p)
        return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/*
 * Reads name, a file the manifest names beside the shards (the dictionary,
 * the source list), from dirfd into a malloc'd *buf of *len bytes, and
 * checks it is size bytes with CRC-32C crc as the manifest says.  what
 * names it in messages.  Returns 0, or a negative errno with err set (and
 * *buf NULL).
 */
static int read_checked(const struct dataset *ds, int dirfd, const char *name,
                        size_t max, uint64_t size, uint32_t crc, const char *what,
                        char **buf, size_t *len, struct rf_err *err)
{
    uint32_t got;
    int r;

    *buf = NULL;
    *len = 0;
    r = fio_read_file(dirfd, name, max, buf, len);
    if (r < 0)
        return rf_err_set(err, r, "%s/%s: cannot read the %s: %s", ds->dir, name, what,
                          strerror(-r));
    if (*len != size) {
        r = rf_err_set(err, -EBADMSG, "%s/%s: %s is %zu bytes, the manifest says %" PRIu64,
                       ds->dir, name, what, *len, size);
    } else if ((got = crc32c(0, *buf, *len)) != crc) {
        r = rf_err_set(err, -EBADMSG, "%s/%s at byte 0: %s checksum mismatch (manifest says "
                       "%08" PRIx32 ", file gives %08" PRIx32 ")", ds->dir, name, what, crc,
                       got);
    } else {
        return 0;
    }
    free(*buf);
    *buf = NULL;
    return r;
}

/* Loads and checks the dictionary the manifest names. */
static int load_dict(struct dataset *ds, int dirfd, struct rf_err *err)
{
    const struct manifest *m = &ds->m;
    const char *name = manifest_dict_name(m);
    char *buf = NULL;
    size_t len = 0;
    int r;

    r = read_checked(ds, dirfd, name, DATASET_DICT_MAX, m->dict_size, m->dict_crc,
                     "dictionary", &buf, &len, err);
    if (r < 0)
        return r;
    r = -EBADMSG;
    ds->ddict = ZSTD_createDDict(buf, len);
    if (!ds->ddict) {
        rf_err_set(err, -ENOMEM, "%s/%s: zstd cannot load the dictionary",
                   ds->dir, name);
        goto out;
    }
    ds->dict_id = ZSTD_getDictID_fromDDict(ds->ddict);
    if (ds->dict_id == 0) {
        rf_err_set(err, r, "%s/%s: not a zstd dictionary (no dictionary id)",
                   ds->dir, name);
        goto out;
    }
    r = 0;
out:
    free(buf);
    return r;
}

/* Checks a decoded header against what the manifest says of shard i. */
static int header_agrees(const struct dataset *ds, uint32_t i,
                         const struct shard_header *h, const char *path,
                         struct rf_err *err)
{
    const struct manifest_shard *ms = &ds->m.shards[i];
    uint32_t allowed = 1u << DATASET_CODEC_NONE | 1u << ds->m.codec;
    int dict = (h->flags & SHARD_FLAG_DICT) != 0;

    if (h->records != ms->records)
        return rf_err_set(err, -EBADMSG, "%s: header at byte 16: %" PRIu64
                          " records, the manifest says %" PRIu64, path,
                          h->records, ms->records);
    if (h->shard_no != i)
        return rf_err_set(err, -EBADMSG, "%s: header at byte 52: this is "
                          "shard %" PRIu32 " of its pack, the manifest lists "
                          "it as shard %" PRIu32 ": files swapped or renamed?",
                          path, h->shard_no, i);
    if (h->codec_mask & ~allowed)
        return rf_err_set(err, -EBADMSG, "%s: header at byte 44: codec mask "
                          "%08" PRIx32 " allows codecs the dataset (codec %s) "
                          "does not use", path, h->codec_mask,
                          codec_name(ds->m.codec));
    if (dict != ds->m.has_dict || (dict && h->dict_id != ds->dict_id))
        return rf_err_set(err, -EBADMSG, "%s: header at byte 12: dictionary "
                          "%s (id %" PRIu32 "), the dataset %s (id %" PRIu32
                          ")", path, dict ? "used" : "not used", h->dict_id,
                          ds->m.has_dict ? "has one" : "has none",
                          ds->dict_id);
    if (h->index_crc != ms->index_crc)
        return rf_err_set(err, -EBADMSG, "%s: header at byte 40: index "
                          "checksum %08" PRIx32 ", the manifest says %08"
                          PRIx32 ": not the shard this dataset was packed "
                          "with", path, h->index_crc, ms->index_crc);
    return 0;
}

/*
 * Opens shard i.  Returns 0 when usable (sh->problem may still be set, in
 * tolerant mode, for an index checksum failure), or a negative errno.
 */
static int shard_open(struct dataset *ds, uint32_t i, int dirfd,
                      unsigned flags, struct rf_err *err)
{
    const struct manifest_shard *ms = &ds->m.shards[i];
    struct ds_shard *sh = &ds->shards[i];
    const char *name = manifest_shard_name(&ds->m, i);
    uint8_t hbuf[SHARD_HEADER_SIZE];
    struct shard_header h;
    struct stat st;
    uint64_t map_off;
    uint32_t crc;
    ssize_t n;
    long page = sysconf(_SC_PAGESIZE);
    int r;

    if (!sh->path)
        sh->path = path_join(ds->dir, name);
    if (!sh->path)
        return rf_err_set(err, -ENOMEM, "out of memory");
    sh->fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (sh->fd == -1)
        return rf_err_set(err, -errno, "%s: cannot open: %s", sh->path,
                          strerror(errno));
    if (fstat(sh->fd, &st) == -1)
        return rf_err_set(err, -errno, "%s: cannot stat: %s", sh->path,
                          strerror(errno));
    if (!S_ISREG(st.st_mode))
        return rf_err_set(err, -EINVAL, "%s: not a regular file", sh->path);
    sh->file_size = (uint64_t)st.st_size;
    if (sh->file_size != ms->bytes)
        return rf_err_set(err, -EBADMSG, "%s: file is %" PRIu64 " bytes, "
                          "the manifest says %" PRIu64 ": %s", sh->path,
                          sh->file_size, ms->bytes,
                          sh->file_size < ms->bytes ? "truncated"
                          : "not the file this dataset was packed with");
    n = fio_pread_full(sh->fd, hbuf, sizeof(hbuf), 0);
    if (n < 0)
        return rf_err_set(err, (int)n, "%s: header at byte 0: read failed: "
                          "%s", sh->path, strerror((int)-n));
    r = shard_header_decode(hbuf, (size_t)n, sh->file_size, sh->path, &h, err);
    if (r < 0)
        return r;
    r = header_agrees(ds, i, &h, sh->path, err);
    if (r < 0)
        return r;
    sh->lim = (struct shard_limits){
        .data_end = h.index_off,
        .codec_mask = h.codec_mask,
        .max_stored = ds->m.max_stored,
        .max_decoded = ds->m.max_decoded,
        .tensor_bytes = (uint32_t)ds->info.sample_bytes,
        /* kind fields: a label is a field of the record, the entries'
         * are DATASET_NO_LABEL (manifest.h) */
        .classes = ds->m.kind == DATASET_FIELDS ? 0 : ds->m.nclasses,
    };
    if (h.records) {
        map_off = h.index_off & ~(uint64_t)(page - 1);
        if (sh->file_size - map_off > SIZE_MAX)
            return rf_err_set(err, -EFBIG, "%s: index too large to map",
                              sh->path);
        sh->map_len = (size_t)(sh->file_size - map_off);
        sh->map = mmap(NULL, sh->map_len, PROT_READ, MAP_SHARED, sh->fd,
                       (off_t)map_off);
        if (sh->map == MAP_FAILED) {
            sh->map = NULL;
            return rf_err_set(err, -errno, "%s: index at byte %" PRIu64
                              ": cannot map %zu bytes: %s", sh->path,
                              h.index_off, sh->map_len, strerror(errno));
        }
        sh->index = (const uint8_t *)sh->map + (h.index_off - map_off);
        mapguard_add(sh->map, sh->map_len); /* a shrunk file reads zeros */
    }
    sh->usable = 1;
    crc = crc32c(0, sh->index, (size_t)h.index_len);
    if (crc != h.index_crc) {
        r = rf_err_set(err, -EBADMSG, "%s: index at byte %" PRIu64
                       ": checksum mismatch (header says %08" PRIx32
                       ", %" PRIu64 " index bytes give %08" PRIx32 "): "
                       "index corrupt", sh->path, h.index_off, h.index_crc,
                       h.index_len, crc);
        if (!(flags & DATASET_OPEN_TOLERANT))
            return r;
        sh->problem = strdup(err->msg);
        if (!sh->problem)
            return rf_err_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

int dataset_open(const char *dir, struct dataset **out, struct rf_err *err)
{
    return dataset_open_flags(dir, DATASET_OPEN_STRICT, out, err);
}

int dataset_open_flags(const char *dir, unsigned flags, struct dataset **out,
                       struct rf_err *err)
{
    struct dataset *ds;
    char *text = NULL;
    size_t len = 0;
    struct rf_err se;
    uint64_t first = 0;
    int dirfd, r;

    *out = NULL;
    ds = calloc(1, sizeof(*ds));
    if (!ds)
        return rf_err_set(err, -ENOMEM, "out of memory");
    ds->dir = strdup(dir);
    if (!ds->dir) {
        r = rf_err_set(err, -ENOMEM, "out of memory");
        goto fail_free;
    }
    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd == -1) {
        r = rf_err_set(err, -errno, "%s: cannot open the dataset folder: %s",
                       dir, strerror(errno));
        goto fail_free;
    }
    r = fio_read_file(dirfd, DATASET_MANIFEST_NAME, DATASET_MANIFEST_MAX,
                      &text, &len);
    if (r < 0) {
        rf_err_set(err, r, "%s/%s: cannot read: %s%s", dir,
                   DATASET_MANIFEST_NAME, strerror(-r),
                   r == -ENOENT ? " (not a dataset, or a pack that did not "
                   "finish)" : "");
        goto fail_dir;
    }
    ds->identity = dataset_identity_of(text, len);
    r = manifest_parse(text, len, &ds->m, err);
    free(text);
    if (r < 0) {
        rf_err_prefix(err, "%s/%s", dir, DATASET_MANIFEST_NAME);
        goto fail_dir;
    }
    ds->info = (struct dataset_info){
        .samples = ds->m.samples,
        .kind = ds->m.kind,
        .dtype = ds->m.dtype,
        .ndim = ds->m.ndim,
        .codec = ds->m.codec,
        .has_dict = ds->m.has_dict,
        .dict_size = ds->m.dict_size,
        .classes = ds->m.nclasses,
        .max_stored = ds->m.max_stored,
        .max_decoded = ds->m.max_decoded,
        .max_side = ds->m.max_side,
        .max_side_quality = ds->m.max_side_quality,
        .jpeg_restart = ds->m.jpeg_restart,
        .raw_images = ds->m.raw_images,
        .image_height = ds->m.image_height,
        .image_width = ds->m.image_width,
        .shards = ds->m.nshards,
    };
    memcpy(ds->info.shape, ds->m.dims, sizeof(ds->info.shape));
    if (ds->m.kind == DATASET_FIELDS)
        ds->info.schema = ds->m.schema;
    else if (ds->m.kind != DATASET_BYTES)
        schema_legacy(ds->m.kind, ds->m.dtype, ds->m.dims, ds->m.ndim, ds->m.image_height,
                      ds->m.image_width, &ds->info.schema);
    if (ds->m.kind == DATASET_FIELDS)
        schema_check(&ds->info.schema, NULL); /* checked by the parser: fills row_bytes */
    if (ds->m.kind == DATASET_TENSOR)
        ds->info.sample_bytes = dataset_tensor_bytes(ds->m.dtype, ds->m.dims,
                                                     ds->m.ndim);
    if (ds->m.has_dict) {
        r = load_dict(ds, dirfd, err);
        if (r < 0)
            goto fail_dir;
    }
    ds->shards = calloc(ds->m.nshards ? ds->m.nshards : 1,
                        sizeof(*ds->shards));
    if (!ds->shards) {
        r = rf_err_set(err, -ENOMEM, "out of memory");
        goto fail_dir;
    }
    for (uint32_t i = 0; i < ds->m.nshards; i++)
        ds->shards[i].fd = -1;
    for (uint32_t i = 0; i < ds->m.nshards; i++) {
        struct ds_shard *sh = &ds->shards[i];

        sh->first = first;
        sh->records = ds->m.shards[i].records;
        first += sh->records;
        if (flags & DATASET_OPEN_ON_DEMAND) {
            /* opened by dataset_shard_load when first needed */
            sh->path = path_join(ds->dir, manifest_shard_name(&ds->m, i));
            if (!sh->path) {
                r = rf_err_set(err, -ENOMEM, "out of memory");
                goto fail_dir;
            }
            sh->file_size = ds->m.shards[i].bytes;
            sh->status = -EAGAIN;
            continue;
        }
        se.msg[0] = '\0';
        r = shard_open(ds, i, dirfd, flags, &se);
        if (r >= 0)
            continue;
        if (!(flags & DATASET_OPEN_TOLERANT) || !sh->path) {
            rf_err_set(err, r, "%s", se.msg);
            goto fail_dir;
        }
        sh->usable = 0;
        sh->status = r;
        free(sh->problem);
        sh->problem = strdup(se.msg);
        if (!sh->problem) {
            r = rf_err_set(err, -ENOMEM, "out of memory");
            goto fail_dir;
        }
    }
    if (flags & DATASET_OPEN_ON_DEMAND)
        ds->on_demand = true;
    close(dirfd);
    *out = ds;
    return 0;

fail_dir:
    close(dirfd);
fail_free:
    dataset_close(ds);
    return r;
}

/* Unmaps and closes one shard's file (its path stays): it is not open now. */
static void shard_close(struct ds_shard *sh)
{
    if (sh->map) {
        mapguard_remove(sh->map);
        munmap(sh->map, sh->map_len);
    }
    if (sh->fd >= 0)
        close(sh->fd);
    free(sh->problem);
    sh->map = NULL;
    sh->map_len = 0;
    sh->index = NULL;
    sh->fd = -1;
    sh->problem = NULL;
    sh->usable = 0;
    sh->status = -EAGAIN;
}

void dataset_close(struct dataset *ds)
{
    if (!ds)
        return;
    if (ds->nparts) {
        free(ds->dir);
        free(ds);
        return;
    }
    for (uint32_t i = 0; ds->shards && i < ds->m.nshards; i++) {
        shard_close(&ds->shards[i]);
        free(ds->shards[i].path);
    }
    free(ds->shards);
    ZSTD_freeDDict(ds->ddict);
    free(ds->src_text);
    free(ds->src_off);
    manifest_free(&ds->m);
    free(ds->dir);
    free(ds);
}

/* The part of view ds holding sample i (i < samples), and i's place in it. */
static uint32_t view_part(const struct dataset *ds, uint64_t *i)
{
    uint32_t k = 0;

    while (k + 1 < ds->nparts && *i >= ds->part_base[k + 1])
        k++;
    *i -= ds->part_base[k];
    return k;
}

/* Is every field of b as in a?  The first difference into why. */
static bool same_schema(const struct dataset_info *a, const struct dataset_info *b, char *why,
                        size_t cap)
{
    char fa[256], fb[256];

    if (a->kind != b->kind) {
        snprintf(why, cap, "a %s dataset against a %s one", dataset_kind_name(b->kind),
                 dataset_kind_name(a->kind));
        return false;
    }
    if (a->schema.n != b->schema.n) {
        snprintf(why, cap, "%u fields against %u", b->schema.n, a->schema.n);
        return false;
    }
    for (uint32_t f = 0; f < a->schema.n; f++) {
        struct schema sa = a->schema, sb = b->schema;

        /* sizes that differ from pack to pack are the view's largest (or
         * "varies"): the fields' kinds, names, types and roles must agree */
        sa.f[f].max_rows = sb.f[f].max_rows = sa.f[f].cap_rows = sb.f[f].cap_rows = 0;
        sa.f[f].height = sb.f[f].height = sa.f[f].width = sb.f[f].width = 0;
        if (schema_field_format(&sa, f, fa, sizeof(fa)) < 0 ||
            schema_field_format(&sb, f, fb, sizeof(fb)) < 0 || strcmp(fa, fb) != 0) {
            snprintf(why, cap, "field '%s' against '%s'", fb, fa);
            return false;
        }
    }
    if (a->kind == DATASET_TENSOR && (a->dtype != b->dtype || a->sample_bytes != b->sample_bytes ||
                                      a->ndim != b->ndim ||
                                      memcmp(a->shape, b->shape, sizeof(a->shape)) != 0)) {
        snprintf(why, cap, "tensors of another dtype or shape");
        return false;
    }
    return true;
}

int dataset_view_new(struct dataset *const *parts, const char *const *names, uint32_t n,
                     struct dataset **out, struct rf_err *err)
{
    struct dataset *v;
    char why[600];
    size_t len = 0;

    *out = NULL;
    if (n < 2 || n > DATASET_VIEW_MAX)
        return rf_err_set(err, -EINVAL, "a view of %u datasets: 2 to %d", n, DATASET_VIEW_MAX);
    for (uint32_t k = 0; k < n; k++) {
        if (parts[k]->on_demand || parts[k]->nparts)
            return rf_err_set(err, -EINVAL, "%s: a %s dataset cannot be mixed", names[k],
                              parts[k]->on_demand ? "remote" : "mixed");
        if (k && !same_schema(&parts[0]->info, &parts[k]->info, why, sizeof(why)))
            return rf_err_set(err, -EINVAL, "%s and %s differ: %s has %s", names[0], names[k],
                              names[k], why);
        len += strlen(names[k]) + 3;
    }
    if (!(v = calloc(1, sizeof(*v))) || !(v->dir = malloc(len + 1))) {
        free(v);
        return rf_err_set(err, -ENOMEM, "out of memory for a view");
    }
    v->dir[0] = '\0';
    v->info = parts[0]->info;
    v->info.samples = 0;
    v->info.shards = 0;
    v->identity = 0;
    v->nparts = n;
    v->m.nshards = 0;
    for (uint32_t k = 0; k < n; k++) {
        const struct dataset_info *pi = &parts[k]->info;

        strcat(v->dir, names[k]);
        if (k + 1 < n)
            strcat(v->dir, " + ");
        v->parts[k] = parts[k];
        v->part_base[k] = v->info.samples;
        v->info.samples += pi->samples;
        v->info.shards += pi->shards;
        v->info.max_stored = pi->max_stored > v->info.max_stored ? pi->max_stored
                                                                 : v->info.max_stored;
        v->info.max_decoded = pi->max_decoded > v->info.max_decoded ? pi->max_decoded
                                                                    : v->info.max_decoded;
        v->info.classes = pi->classes > v->info.classes ? pi->classes : v->info.classes;
        v->info.raw_images += pi->raw_images;
        v->identity = v->identity * 0x100000001b3ull ^ parts[k]->identity;
        if (pi->image_height != v->info.image_height || pi->image_width != v->info.image_width)
            v->info.image_height = v->info.image_width = 0; /* sizes vary */
        for (uint32_t f = 0; f < v->info.schema.n; f++) {
            struct schema_field *vf = &v->info.schema.f[f];
            const struct schema_field *pf = &pi->schema.f[f];

            vf->max_rows = pf->max_rows > vf->max_rows ? pf->max_rows : vf->max_rows;
            vf->cap_rows = !vf->cap_rows || !pf->cap_rows ? 0
                           : pf->cap_rows > vf->cap_rows ? pf->cap_rows : vf->cap_rows;
            if (pf->height != vf->height || pf->width != vf->width)
                vf->height = vf->width = 0;
        }
    }
    v->part_base[n] = v->info.samples;
    *out = v;
    return 0;
}

uint32_t dataset_view_parts(const struct dataset *ds)
{
    return ds->nparts;
}

const struct dataset_info *dataset_info(const struct dataset *ds)
{
    return &ds->info;
}

const char *dataset_dir(const struct dataset *ds)
{
    return ds->dir;
}

uint64_t dataset_identity(const struct dataset *ds)
{
    return ds->identity;
}

uint64_t dataset_identity_of(const char *text, size_t len)
{
    uint32_t crc = 0;
    uint64_t kept = 0;
    size_t pos = 0;

    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) + 1 : len - pos;

        if (!manifest_is_subset_line(text + pos, n)) {
            crc = crc32c(crc, text + pos, n);
            kept += n;
        }
        pos += n;
    }
    return (uint64_t)crc << 32 | (uint32_t)kept;
}

int dataset_manifest_now(const struct dataset *ds, struct manifest *m, struct rf_err *err)
{
    char *text = NULL;
    size_t len = 0;
    int dirfd, r;

    memset(m, 0, sizeof(*m));
    dirfd = open(ds->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd == -1)
        return rf_err_set(err, -errno, "%s: cannot open the dataset folder: %s", ds->dir,
                          strerror(errno));
    r = fio_read_file(dirfd, DATASET_MANIFEST_NAME, DATASET_MANIFEST_MAX, &text, &len);
    close(dirfd);
    if (r < 0)
        return rf_err_set(err, r, "%s/%s: cannot read: %s", ds->dir, DATASET_MANIFEST_NAME,
                          strerror(-r));
    if (dataset_identity_of(text, len) != ds->identity) {
        free(text);
        return rf_err_set(err, -ESTALE, "%s/%s: the pack changed since it was opened (not "
                          "only its subsets): pack into a new folder, or reload", ds->dir,
                          DATASET_MANIFEST_NAME);
    }
    r = manifest_parse(text, len, m, err);
    free(text);
    if (r < 0)
        rf_err_prefix(err, "%s/%s", ds->dir, DATASET_MANIFEST_NAME);
    return r;
}

int dataset_subset_find(const struct dataset *ds, const char *name,
                        struct dataset_subset_ref *ref, struct rf_err *err)
{
    struct manifest m;
    int r = dataset_manifest_now(ds, &m, err), i;

    if (r < 0)
        return r;
    i = manifest_subset_find(&m, name);
    if (i < 0) {
        char names[SUBSET_MAX * (SUBSET_NAME_MAX + 1) + 1];
        size_t used = 0;

        names[0] = '\0';
        for (uint32_t k = 0; k < m.nsubsets; k++)
            used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s",
                                     k ? " " : "", manifest_subset_name(&m, k));
        r = rf_err_set(err, -ENOENT, m.nsubsets ? "%s has no subset \"%s\"; its subsets: %s"
                       : "%s has no subset \"%s\"; it has no subsets (ringfeed-pack split "
                       "makes them)%s", ds->dir, name, names);
    } else {
        *ref = (struct dataset_subset_ref){
            .count = m.subsets[i].count,
            .bytes = m.subsets[i].bytes,
            .crc = m.subsets[i].crc,
        };
        snprintf(ref->name, sizeof(ref->name), "%s", manifest_subset_name(&m, (uint32_t)i));
        snprintf(ref->file, sizeof(ref->file), "%s", manifest_subset_file(&m, (uint32_t)i));
    }
    manifest_free(&m);
    return r;
}

int dataset_subset_read(const struct dataset *ds, const struct dataset_subset_ref *ref,
                        struct subset *out, struct rf_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    struct rf_err e;
    int dirfd, r;

    memset(out, 0, sizeof(*out));
    if (!manifest_valid_file_name(ref->file, strlen(ref->file)))
        return rf_err_set(err, -EINVAL, "subset %s: \"%s\" is not a file name", ref->name,
                          ref->file);
    dirfd = open(ds->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd == -1)
        return rf_err_set(err, -errno, "%s: cannot open the dataset folder: %s", ds->dir,
                          strerror(errno));
    r = read_checked(ds, dirfd, ref->file, (size_t)SUBSET_FILE_MAX, ref->bytes, ref->crc,
                     "subset file", &buf, &len, err);
    close(dirfd);
    if (r < 0)
        return r;
    r = subset_parse((const uint8_t *)buf, len, ds->m.samples, out, &e);
    if (r < 0)
        rf_err_set(err, r, "%s/%s: %s", ds->dir, ref->file, e.msg);
    else if (out->n != ref->count)
        r = rf_err_set(err, -EBADMSG, "%s/%s: %" PRIu64 " indices, the manifest says %" PRIu64,
                       ds->dir, ref->file, out->n, ref->count);
    if (r < 0)
        subset_free(out);
    free(buf);
    return r;
}

int dataset_check(const struct dataset *ds, struct rf_err *err)
{
    for (uint32_t k = 0; k < ds->nparts; k++) {
        int r = dataset_check(ds->parts[k], err);

        if (r < 0)
            return r;
    }
    for (uint32_t i = 0; i < ds->m.nshards; i++) {
        const struct ds_shard *sh = &ds->shards[i];
        struct stat st;

        if (sh->fd < 0)
            continue;
        if (fstat(sh->fd, &st) == -1)
            return rf_err_set(err, -errno, "%s: cannot stat: %s", sh->path, strerror(errno));
        if ((uint64_t)st.st_size != sh->file_size)
            return rf_err_set(err, -ESTALE, "%s: file is %llu bytes now, %llu when the dataset "
                              "was opened: %s while being read", sh->path,
                              (unsigned long long)st.st_size,
                              (unsigned long long)sh->file_size,
                              (uint64_t)st.st_size < sh->file_size ? "truncated" : "grown");
    }
    return 0;
}

const char *dataset_class_name(const struct dataset *ds, uint32_t i)
{
    if (ds->nparts) /* the first part's names: a view's parts share a schema */
        return manifest_class_name(&ds->parts[0]->m, i);
    return manifest_class_name(&ds->m, i);
}

int dataset_shard_info(const struct dataset *ds, uint32_t i,
                       struct dataset_shard_info *info)
{
    const struct ds_shard *sh;

    if (i >= ds->m.nshards)
        return -ERANGE;
    sh = &ds->shards[i];
    *info = (struct dataset_shard_info){
        .path = sh->path,
        .file = manifest_shard_name(&ds->m, i),
        .index_crc = ds->m.shards[i].index_crc,
        .first_sample = sh->first,
        .records = sh->records,
        .file_size = sh->file_size,
        .record_bytes = sh->usable ? sh->lim.data_end - SHARD_HEADER_SIZE : 0,
        .problem = sh->problem,
        .usable = sh->usable,
    };
    return 0;
}

/* The shard holding sample s: the last one whose first sample is <= s. */
static uint32_t find_shard(const struct dataset *ds, uint64_t s)
{
    uint32_t lo = 0, hi = ds->m.nshards; /* answer in [lo, hi) */

    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;

        if (ds->shards[mid].first <= s)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

void dataset_prefetch(const struct dataset *ds, uint64_t sample)
{
    const struct ds_shard *sh;

    if (ds->nparts) {
        if (sample < ds->info.samples) {
            uint32_t k = view_part(ds, &sample);

            dataset_prefetch(ds->parts[k], sample);
        }
        return;
    }
    if (sample >= ds->m.samples)
        return;
    sh = &ds->shards[find_shard(ds, sample)];
    if (sh->usable)
        __builtin_prefetch(sh->index + (sample - sh->first) * SHARD_ENTRY_SIZE, 0, 3);
}

int dataset_locate(const struct dataset *ds, uint64_t sample,
                   struct dataset_loc *loc, struct rf_err *err)
{
    const struct ds_shard *sh;
    struct shard_entry e;
    uint64_t rec, at;
    uint32_t i;
    int r;

    if (ds->nparts) {
        uint64_t in = sample;

        if (sample >= ds->info.samples)
            return rf_err_set(err, -ERANGE, "%s: sample %" PRIu64 " out of range: the "
                              "mixture has %" PRIu64, ds->dir, sample, ds->info.samples);
        i = view_part(ds, &in);
        r = dataset_locate(ds->parts[i], in, loc, err);
        loc->sample = sample;
        return r;
    }
    if (sample >= ds->m.samples)
        return rf_err_set(err, -ERANGE, "%s: sample %" PRIu64 " out of "
                          "range: the dataset has %" PRIu64, ds->dir, sample,
                          ds->m.samples);
    i = find_shard(ds, sample);
    sh = &ds->shards[i];
    rec = sample - sh->first;
    if (!sh->usable)
        return rf_err_set(err, sh->status ? sh->status : -EIO,
                          "record %" PRIu64 " not checked: %s", rec,
                          sh->problem ? sh->problem
                          : sh->status == -EAGAIN ? "shard not loaded (on demand)"
                          : "shard unusable");
    at = sh->lim.data_end + rec * SHARD_ENTRY_SIZE;
    r = shard_entry_decode(sh->index + rec * SHARD_ENTRY_SIZE, &sh->lim,
                           sh->path, rec, at, &e, err);
    if (r < 0)
        return r;
    *loc = (struct dataset_loc){
        .sample = sample,
        .fd = sh->fd,
        .shard_path = sh->path,
        .shard = i,
        .record = rec,
        .offset = e.offset,
        .stored_len = e.stored_len,
        .decoded_len = e.decoded_len,
        .label = e.label,
        .crc = e.crc,
        .codec = e.codec,
        .ds = ds,
    };
    return 0;
}

bool dataset_on_demand(const struct dataset *ds)
{
    return ds->on_demand;
}

uint32_t dataset_shard_of(const struct dataset *ds, uint64_t sample)
{
    return find_shard(ds, sample < ds->m.samples ? sample : ds->m.samples - 1);
}

int dataset_shard_load(struct dataset *ds, uint32_t i, struct rf_err *err)
{
    struct ds_shard *sh;
    int dirfd, r;

    if (i >= ds->m.nshards)
        return rf_err_set(err, -ERANGE, "%s: shard %u out of range: the dataset has %u",
                          ds->dir, i, ds->m.nshards);
    sh = &ds->shards[i];
    if (sh->usable || !ds->on_demand)
        return sh->usable ? 0 : rf_err_set(err, sh->status ? sh->status : -EIO, "%s",
                                           sh->problem ? sh->problem : "shard unusable");
    dirfd = open(ds->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd == -1)
        return rf_err_set(err, -errno, "%s: cannot open the dataset folder: %s", ds->dir,
                          strerror(errno));
    r = shard_open(ds, i, dirfd, DATASET_OPEN_STRICT, err);
    close(dirfd);
    if (r < 0) {
        shard_close(sh); /* not usable; the next load tries again */
        return r;
    }
    sh->status = 0;
    return 0;
}

int dataset_locate_load(struct dataset *ds, uint64_t sample, struct dataset_loc *loc,
                        struct rf_err *err)
{
    if (ds->on_demand && sample < ds->m.samples) {
        int r = dataset_shard_load(ds, find_shard(ds, sample), err);

        if (r < 0)
            return r;
    }
    return dataset_locate(ds, sample, loc, err);
}

uint32_t dataset_removed(const struct dataset *ds)
{
    uint32_t n = 0;

    for (uint32_t i = 0; ds->on_demand && i < ds->m.nshards; i++) {
        const struct ds_shard *sh = &ds->shards[i];
        struct stat st;

        n += sh->fd >= 0 && fstat(sh->fd, &st) == 0 && st.st_nlink == 0;
    }
    return n;
}

uint32_t dataset_sweep(struct dataset *ds)
{
    uint32_t closed = 0;

    for (uint32_t i = 0; ds->on_demand && i < ds->m.nshards; i++) {
        struct ds_shard *sh = &ds->shards[i];
        struct stat st;

        if (sh->fd >= 0 && fstat(sh->fd, &st) == 0 && st.st_nlink == 0) {
            shard_close(sh);
            closed++;
        }
    }
    return closed;
}

int dataset_decode(const struct dataset *ds, const struct dataset_loc *loc,
                   const void *stored, void *out, size_t out_cap,
                   struct dataset_dctx *ctx, struct rf_err *err)
{
    const char *why = NULL;
    uint32_t crc;
    int r;

    if (loc->ds) /* the part of a view holding it */
        ds = loc->ds;
    if (loc->decoded_len > DATASET_RECORD_MAX ||
        loc->stored_len > DATASET_RECORD_MAX)
        return rf_err_set(err, -EINVAL, "%s: record %" PRIu64 " at byte %"
                          PRIu64 ": lengths over the %u-byte record limit",
                          loc->shard_path, loc->record, loc->offset,
                          DATASET_RECORD_MAX);
    crc = crc32c(0, stored, loc->stored_len);
    if (crc != loc->crc)
        return rf_err_set(err, -EBADMSG, "%s: record %" PRIu64 " at byte %"
                          PRIu64 ": checksum mismatch (index says %08" PRIx32
                          ", %" PRIu32 " stored bytes give %08" PRIx32 "): "
                          "record corrupt", loc->shard_path, loc->record,
                          loc->offset, loc->crc, loc->stored_len, crc);
    if (loc->decoded_len > out_cap)
        return rf_err_set(err, -ENOBUFS, "%s: record %" PRIu64 " at byte %"
                          PRIu64 ": decodes to %" PRIu32 " bytes, the buffer "
                          "holds %zu", loc->shard_path, loc->record,
                          loc->offset, loc->decoded_len, out_cap);
    r = codec_decode(loc->codec, ctx ? ctx->codec : NULL, ds->ddict, stored,
                     loc->stored_len, out, loc->decoded_len, &why);
    if (r < 0)
        return rf_err_set(err, r, "%s: record %" PRIu64 " at byte %" PRIu64
                          ": codec %s: %s", loc->shard_path, loc->record,
                          loc->offset, codec_name(loc->codec)
                          ? codec_name(loc->codec) : "?", why);
    return (int)loc->decoded_len;
}

int dataset_read(const struct dataset *ds, uint64_t sample, void *out,
                 size_t out_cap, struct dataset_dctx *ctx,
                 struct dataset_loc *loc_out, struct rf_err *err)
{
    struct dataset_loc loc;
    void *buf;
    ssize_t n;
    int r;

    r = dataset_locate(ds, sample, &loc, err);
    if (r < 0)
        return r;
    if (loc_out)
        *loc_out = loc;
    if (loc.codec == DATASET_CODEC_NONE) {
        if (loc.stored_len > out_cap)
            return rf_err_set(err, -ENOBUFS, "%s: record %" PRIu64 " at byte "
                              "%" PRIu64 ": %" PRIu32 " bytes, the buffer "
                              "holds %zu", loc.shard_path, loc.record,
                              loc.offset, loc.stored_len, out_cap);
        buf = out; /* read in place: decode checks and skips the copy */
    } else {
        if (!ctx)
            return rf_err_set(err, -EINVAL, "dataset_read needs a context");
        if (ctx->cap < loc.stored_len) {
            uint8_t *p = realloc(ctx->buf, loc.stored_len);

            if (!p)
                return rf_err_set(err, -ENOMEM, "out of memory");
            ctx->buf = p;
            ctx->cap = loc.stored_len;
        }
        buf = ctx->buf;
    }
    n = fio_pread_full(loc.fd, buf, loc.stored_len, loc.offset);
    if (n < 0)
        return rf_err_set(err, (int)n, "%s: record %" PRIu64 " at byte %"
                          PRIu64 ": read failed: %s", loc.shard_path,
                          loc.record, loc.offset, strerror((int)-n));
    if ((size_t)n < loc.stored_len)
        return rf_err_set(err, -EIO, "%s: record %" PRIu64 " at byte %" PRIu64
                          ": short read, %zd of %" PRIu32 " bytes (file "
                          "truncated since open?)", loc.shard_path,
                          loc.record, loc.offset, n, loc.stored_len);
    return dataset_decode(ds, &loc, buf, out, out_cap, ctx, err);
}

struct dataset_dctx *dataset_dctx_new(void)
{
    struct dataset_dctx *ctx = calloc(1, sizeof(*ctx));

    if (!ctx)
        return NULL;
    ctx->codec = codec_dctx_new();
    if (!ctx->codec) {
        free(ctx);
        return NULL;
    }
    return ctx;
}

void dataset_dctx_free(struct dataset_dctx *ctx)
{
    if (!ctx)
        return;
    codec_dctx_free(ctx->codec);
    free(ctx->buf);
    free(ctx);
}

int dataset_has_sources(const struct dataset *ds)
{
    for (uint32_t k = 0; k < ds->nparts; k++)
        if (!ds->parts[k]->m.has_sources)
            return 0;
    if (ds->nparts)
        return 1;
    return ds->m.has_sources;
}

/* Reads the source list the manifest names, checks its size, CRC-32C and
 * lines, and keeps it in ds. */
static int load_sources(struct dataset *ds, struct rf_err *err)
{
    const struct manifest *m = &ds->m;
    const char *name = manifest_sources_name(m);
    char *buf = NULL;
    uint64_t *off = NULL;
    size_t len = 0;
    struct rf_err e;
    int dirfd, r;

    dirfd = open(ds->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd == -1)
        return rf_err_set(err, -errno, "%s: cannot open the dataset folder: %s",
                          ds->dir, strerror(errno));
    r = read_checked(ds, dirfd, name, (size_t)SOURCES_FILE_MAX, m->sources_size,
                     m->sources_crc, "source list", &buf, &len, err);
    close(dirfd);
    if (r < 0)
        return r;
    r = -EBADMSG;
    off = malloc(((size_t)m->samples + 1) * sizeof(*off));
    if (!off) {
        r = rf_err_set(err, -ENOMEM, "%s/%s: out of memory for %" PRIu64
                       " line offsets", ds->dir, name, m->samples);
        goto out;
    }
    if (sources_index(buf, len, m->samples, off, &e) < 0) {
        rf_err_set(err, r, "%s/%s: %s", ds->dir, name, e.msg);
        goto out;
    }
    ds->src_text = buf;
    ds->src_off = off;
    return 0;
out:
    free(off);
    free(buf);
    return r;
}

int dataset_source(struct dataset *ds, uint64_t i, const char **line,
                   size_t *len, struct rf_err *err)
{
    if (ds->nparts) {
        if (i >= ds->info.samples)
            return rf_err_set(err, -ERANGE, "sample %" PRIu64 " is past the mixture's %"
                              PRIu64 " samples", i, ds->info.samples);
        {
            uint32_t k = view_part(ds, &i);

            return dataset_source(ds->parts[k], i, line, len, err);
        }
    }
    if (!ds->m.has_sources)
        return rf_err_set(err, -ENOENT, "%s has no source list (its MANIFEST "
                          "names none: packed before source lists, with "
                          "--no-sources, or by a writer that records none)",
                          ds->dir);
    if (i >= ds->m.samples)
        return rf_err_set(err, -ERANGE, "sample %" PRIu64 " is past the "
                          "dataset's %" PRIu64 " samples", i, ds->m.samples);
    if (!ds->src_off) {
        int r = load_sources(ds, err);

        if (r < 0)
            return r;
    }
    *line = ds->src_text + ds->src_off[i];
    *len = (size_t)(ds->src_off[i + 1] - ds->src_off[i] - 1);
    return 0;
}
