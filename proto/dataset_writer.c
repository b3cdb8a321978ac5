/*
 * dataset_writer.c - writes a dataset folder: shards, dictionary, MANIFEST
 * (the API and its crash-safety promise are in dataset_writer.h, the shard
 * layout in shard.h).
 *
 * A shard is written front to back: a zeroed placeholder header, the
 * records through a 1 MiB buffer, the index (kept in memory, 32 bytes a
 * record, until the shard closes), then the real header over the
 * placeholder, then fsync.  A shard closes when the next record would take
 * it past shard_bytes (a record larger than that gets a shard of its own).
 * The MANIFEST goes last, so a folder with a MANIFEST has every shard it
 * names complete on disk.
 *
 * Order of durability at finish: each shard fsynced as it closes, the
 * dictionary when written, the MANIFEST, the temporary folder, then the
 * rename to the destination (RENAME_NOREPLACE: never over another folder),
 * then the parent folder.
 */
#include "dataset_writer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zdict.h>
#include <zstd.h>

#include "crc32c.h"
#include "fileio.h"
#include "manifest.h"
#include "pixels.h"
#include "shard.h"
#include "sources.h"

#define WBUF_SIZE (1u << 20)

struct dataset_writer {
    char *dest;
    char *parent;           /* the destination's folder, for its fsync */
    char *tmp;
    int dirfd;              /* tmp */
    struct manifest m;
    unsigned codec;
    int level;
    uint64_t shard_bytes;
    uint64_t tensor_bytes;
    struct schema schema;   /* kind fields: as given, checked; max= is the
                               bound each record is checked against */
    uint64_t seen_rows[SCHEMA_MAX_FIELDS]; /* ragged, bytes: the most rows
                               one record had: the MANIFEST's max= */
    struct codec_cctx *cctx;
    int started;            /* a record was added: too late for a dict */
    int failed;             /* an add failed midway: only abort is left */
    uint32_t dict_id;       /* zstd dictionary id, 0 without one */

    /* the shard being written (fd == -1: none) */
    int fd;
    char name[32];
    uint64_t off;           /* file offset where the next record goes */
    uint64_t nrec;
    uint32_t codec_mask;
    uint8_t *idx;
    size_t idx_cap;

    uint8_t *wbuf;
    size_t wlen;
    uint8_t *enc;
    size_t enc_cap;

    struct dataset_writer_stats st;

    char *src;              /* the source list so far (sources.h), escaped */
    size_t src_len, src_cap;
    uint64_t nsrc;          /* its lines: one per record, or none at all */
};

/* "a/b/c/" -> parent "a/b", base "c"; "c" -> ".", "c". */
static int split_dest(const char *dest, char **parent, char **base)
{
    size_t n = strlen(dest);
    const char *slash;

    while (n > 1 && dest[n - 1] == '/')
        n--;
    *parent = NULL;
    *base = NULL;
    slash = memrchr(dest, '/', n);
    if (!slash) {
        *parent = strdup(".");
        *base = strndup(dest, n);
    } else {
        *parent = slash == dest ? strdup("/") : strndup(dest, (size_t)(slash - dest));
        *base = strndup(slash + 1, n - (size_t)(slash + 1 - dest));
    }
    if (!*parent || !*base) {
        free(*parent);
        free(*base);
        return -ENOMEM;
    }
    return 0;
}

static int check_opts(const struct dataset_writer_opts *o,
                      uint64_t *tensor_bytes, struct rf_err *err)
{
    *tensor_bytes = 0;
    if (!dataset_kind_name(o->kind))
        return rf_err_set(err, -EINVAL, "unknown dataset kind %d", o->kind);
    if (!codec_name(o->codec))
        return rf_err_set(err, -EINVAL, "unknown codec %u", o->codec);
    if (o->classes && !o->class_names)
        return rf_err_set(err, -EINVAL, "%u classes but no class names", o->classes);
    if ((o->kind == DATASET_FIELDS) != (o->schema != NULL))
        return rf_err_set(err, -EINVAL, "a schema is for kind fields, and kind fields needs one");
    if (o->kind == DATASET_TENSOR) {
        *tensor_bytes = dataset_tensor_bytes(o->dtype, o->shape, o->ndim);
        if (*tensor_bytes == 0)
            return rf_err_set(err, -EINVAL, "tensor needs a dtype and a shape "
                              "of 1..%d dims, each >= 1, of at most %u bytes",
                              DATASET_MAX_DIMS, DATASET_RECORD_MAX);
    }
    if (o->classes > DATASET_MAX_CLASSES)
        return rf_err_set(err, -EINVAL, "%" PRIu32 " classes, over the limit "
                          "of %u", o->classes, DATASET_MAX_CLASSES);
    if ((o->max_side || o->max_side_quality) &&
        (o->kind != DATASET_JPEG || o->max_side < MANIFEST_MAX_SIDE_MIN ||
         o->max_side > MANIFEST_MAX_SIDE_MAX ||
         o->max_side_quality < MANIFEST_QUALITY_MIN ||
         o->max_side_quality > MANIFEST_QUALITY_MAX))
        return rf_err_set(err, -EINVAL, "max_side %" PRIu32 " (quality %"
                          PRIu32 "): for jpeg datasets only, %u..%u with a "
                          "quality of %u..%u", o->max_side,
                          o->max_side_quality, MANIFEST_MAX_SIDE_MIN,
                          MANIFEST_MAX_SIDE_MAX, MANIFEST_QUALITY_MIN,
                          MANIFEST_QUALITY_MAX);
    if ((unsigned)o->jpeg_restart >= DATASET_JPEG_RESTART_COUNT ||
        (o->jpeg_restart != DATASET_JPEG_AS_IS && o->kind != DATASET_JPEG))
        return rf_err_set(err, -EINVAL, "jpeg_restart %u: for jpeg datasets "
                          "only, and 0 or 1", (unsigned)o->jpeg_restart);
    if (o->codec == DATASET_CODEC_ZSTD &&
        (o->level < ZSTD_minCLevel() || o->level > ZSTD_maxCLevel()))
        return rf_err_set(err, -EINVAL, "zstd level %d not in %d..%d",
                          o->level, ZSTD_minCLevel(), ZSTD_maxCLevel());
    return 0;
}

int dataset_writer_create(const char *dest,
                          const struct dataset_writer_opts *o,
                          struct dataset_writer **out, struct rf_err *err)
{
    struct dataset_writer *w;
    struct stat st;
    const char *why = NULL;
    char *base = NULL;
    int r;

    *out = NULL;
    w = calloc(1, sizeof(*w));
    if (!w)
        return rf_err_set(err, -ENOMEM, "out of memory");
    w->fd = -1;
    w->dirfd = -1;
    r = check_opts(o, &w->tensor_bytes, err);
    if (r < 0)
        goto fail;
    w->codec = o->codec;
    w->level = o->level ? o->level : DATASET_WRITER_ZSTD_LEVEL;
    w->shard_bytes = o->shard_bytes ? o->shard_bytes
                                    : DATASET_WRITER_SHARD_BYTES;
    w->m.version = MANIFEST_VERSION;
    w->m.kind = o->kind;
    w->m.codec = o->codec;
    w->m.max_side = o->max_side;
    w->m.max_side_quality = o->max_side_quality;
    w->m.jpeg_restart = o->jpeg_restart;
    if (o->kind == DATASET_FIELDS) {
        w->schema = *o->schema;
        r = schema_check(&w->schema, err);
        if (r < 0)
            goto fail;
    }
    if (o->kind == DATASET_TENSOR) {
        w->m.dtype = o->dtype;
        w->m.ndim = o->ndim;
        memcpy(w->m.dims, o->shape, sizeof(uint64_t) * o->ndim);
    }
    for (uint32_t i = 0; i < o->classes; i++) {
        r = manifest_add_class(&w->m, o->class_names[i]);
        if (r < 0) {
            rf_err_set(err, r, "class %" PRIu32 " name \"%s\": %s", i,
                       o->class_names[i], r == -ENOMEM ? "out of memory" :
                       "empty, over 4096 bytes, or holds a control character");
            goto fail;
        }
    }
    w->dest = strdup(dest);
    if (!w->dest || split_dest(dest, &w->parent, &base) < 0) {
        r = rf_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    if (base[0] == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        r = rf_err_set(err, -EINVAL, "%s: not a usable name for a dataset "
                       "folder", dest);
        goto fail;
    }
    if (lstat(dest, &st) == 0) {
        r = rf_err_set(err, -EEXIST, "%s exists: remove it or choose another "
                       "output folder", dest);
        goto fail;
    }
    if (errno != ENOENT) {
        r = rf_err_set(err, -errno, "%s: %s", dest, strerror(errno));
        goto fail;
    }
    if (asprintf(&w->tmp, "%s/.%s.tmp-XXXXXX", w->parent, base) < 0) {
        w->tmp = NULL;
        r = rf_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    if (!mkdtemp(w->tmp)) {
        r = rf_err_set(err, -errno, "cannot create a folder in %s: %s",
                       w->parent, strerror(errno));
        free(w->tmp);
        w->tmp = NULL;
        goto fail;
    }
    w->dirfd = open(w->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->dirfd == -1) {
        r = rf_err_set(err, -errno, "%s: %s", w->tmp, strerror(errno));
        goto fail;
    }
    w->wbuf = malloc(WBUF_SIZE);
    if (!w->wbuf) {
        r = rf_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    if (w->codec != DATASET_CODEC_NONE) {
        w->cctx = codec_cctx_new(w->level, NULL, 0, &why);
        if (!w->cctx) {
            r = rf_err_set(err, -ENOMEM, "codec %s: %s", codec_name(w->codec),
                           why);
            goto fail;
        }
    }
    free(base);
    *out = w;
    return 0;

fail:
    free(base);
    dataset_writer_abort(w);
    return r;
}

/* Creates file name in the temporary folder and writes all of buf, synced. */
static int write_small_file(struct dataset_writer *w, const char *name,
                            const void *buf, size_t len, struct rf_err *err)
{
    int fd, r;

    fd = openat(w->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd == -1)
        return rf_err_set(err, -errno, "%s/%s: cannot create: %s", w->tmp,
                          name, strerror(errno));
    r = fio_write_full(fd, buf, len);
    if (r == 0 && fsync(fd) == -1)
        r = -errno;
    if (close(fd) == -1 && r == 0)
        r = -errno;
    if (r < 0)
        return rf_err_set(err, r, "%s/%s: cannot write: %s", w->tmp, name,
                          strerror(-r));
    w->st.file_bytes += len;
    return 0;
}

int dataset_writer_train_dict(struct dataset_writer *w, const void *samples,
                              const size_t *sizes, size_t n, size_t dict_cap,
                              struct rf_err *err)
{
    const char *why = NULL;
    struct codec_cctx *cctx;
    void *dict;
    size_t len;
    int r;

    if (w->codec != DATASET_CODEC_ZSTD)
        return rf_err_set(err, -EINVAL, "a dictionary needs codec zstd");
    if (w->started || w->m.has_dict)
        return rf_err_set(err, -EINVAL, "a dictionary must be trained once, "
                          "before the first record");
    if (n == 0 || n > UINT32_MAX)
        return rf_err_set(err, -EINVAL, "dictionary training needs 1 to %u "
                          "samples, not %zu", UINT32_MAX, n);
    if (dict_cap == 0)
        dict_cap = DATASET_WRITER_DICT_BYTES;
    if (dict_cap > DATASET_DICT_MAX)
        return rf_err_set(err, -EINVAL, "dictionary of %zu bytes: the limit "
                          "is %u", dict_cap, DATASET_DICT_MAX);
    dict = malloc(dict_cap);
    if (!dict)
        return rf_err_set(err, -ENOMEM, "out of memory");
    len = ZDICT_trainFromBuffer(dict, dict_cap, samples, sizes, (unsigned)n);
    if (ZDICT_isError(len)) {
        r = rf_err_set(err, -EINVAL, "zstd dictionary training on %zu "
                       "samples failed: %s (too few or too alike samples? "
                       "pack without a dictionary)", n,
                       ZDICT_getErrorName(len));
        goto out;
    }
    cctx = codec_cctx_new(w->level, dict, len, &why);
    if (!cctx) {
        r = rf_err_set(err, -ENOMEM, "zstd: %s", why);
        goto out;
    }
    r = write_small_file(w, DATASET_DICT_NAME, dict, len, err);
    if (r < 0) {
        codec_cctx_free(cctx);
        goto out;
    }
    r = manifest_set_dict(&w->m, DATASET_DICT_NAME, (uint32_t)len,
                          crc32c(0, dict, len));
    if (r < 0) {
        codec_cctx_free(cctx);
        rf_err_set(err, r, "out of memory");
        goto out;
    }
    codec_cctx_free(w->cctx);
    w->cctx = cctx;
    w->st.dict_size = (uint32_t)len;
    w->dict_id = ZDICT_getDictID(dict, len);
    r = 0;
out:
    free(dict);
    return r;
}

static int flush_wbuf(struct dataset_writer *w, struct rf_err *err)
{
    int r = fio_write_full(w->fd, w->wbuf, w->wlen);

    if (r < 0)
        return rf_err_set(err, r, "%s/%s: write failed: %s", w->tmp, w->name,
                          strerror(-r));
    w->wlen = 0;
    return 0;
}

static int shard_start(struct dataset_writer *w, struct rf_err *err)
{
    uint8_t zero[SHARD_HEADER_SIZE] = {0};

    snprintf(w->name, sizeof(w->name), "shard-%05" PRIu32 ".rfs",
             w->m.nshards);
    w->fd = openat(w->dirfd, w->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                   0644);
    if (w->fd == -1)
        return rf_err_set(err, -errno, "%s/%s: cannot create: %s", w->tmp,
                          w->name, strerror(errno));
    memcpy(w->wbuf, zero, sizeof(zero)); /* placeholder header */
    w->wlen = sizeof(zero);
    w->off = SHARD_HEADER_SIZE;
    w->nrec = 0;
    w->codec_mask = 0;
    w->st.shards++;
    w->st.file_bytes += SHARD_HEADER_SIZE;
    return 0;
}

static int shard_close(struct dataset_writer *w, struct rf_err *err)
{
    uint8_t hbuf[SHARD_HEADER_SIZE];
    struct shard_header h = {
        .flags = w->m.has_dict ? SHARD_FLAG_DICT : 0,
        .records = w->nrec,
        .index_off = w->off,
        .index_len = w->nrec * SHARD_ENTRY_SIZE,
        .codec_mask = w->codec_mask,
        .shard_no = w->m.nshards,
    };
    int r, fd = w->fd;

    r = flush_wbuf(w, err);
    if (r < 0)
        return r;
    h.index_crc = crc32c(0, w->idx, (size_t)h.index_len);
    r = fio_write_full(fd, w->idx, (size_t)h.index_len);
    if (r < 0)
        return rf_err_set(err, r, "%s/%s: writing the index failed: %s",
                          w->tmp, w->name, strerror(-r));
    h.dict_id = w->dict_id;
    shard_header_encode(&h, hbuf);
    r = fio_pwrite_full(fd, hbuf, sizeof(hbuf), 0);
    if (r == 0 && fsync(fd) == -1)
        r = -errno;
    w->fd = -1;
    if (close(fd) == -1 && r == 0)
        r = -errno;
    if (r < 0)
        return rf_err_set(err, r, "%s/%s: writing the header failed: %s",
                          w->tmp, w->name, strerror(-r));
    r = manifest_add_shard(&w->m, w->name, w->nrec, w->off + h.index_len,
                           h.index_crc);
    if (r < 0)
        return rf_err_set(err, r, "out of memory");
    return 0;
}

static int append(struct dataset_writer *w, const void *buf, size_t len,
                  struct rf_err *err)
{
    int r;

    if (w->wlen + len > WBUF_SIZE) {
        r = flush_wbuf(w, err);
        if (r < 0)
            return r;
    }
    if (len > WBUF_SIZE) {
        r = fio_write_full(w->fd, buf, len);
        if (r < 0)
            return rf_err_set(err, r, "%s/%s: write failed: %s", w->tmp,
                              w->name, strerror(-r));
        return 0;
    }
    memcpy(w->wbuf + w->wlen, buf, len);
    w->wlen += len;
    return 0;
}

int dataset_writer_add(struct dataset_writer *w, const void *data,
                       size_t len, uint32_t label, struct rf_err *err)
{
    return dataset_writer_add_codec(w, data, len, label, w->codec, err);
}

int dataset_writer_add_codec(struct dataset_writer *w, const void *data,
                             size_t len, uint32_t label, unsigned codec,
                             struct rf_err *err)
{
    struct shard_entry e = {.label = label, .codec = DATASET_CODEC_NONE};
    const void *stored = data;
    size_t stored_len = len;
    int r;

    if (codec != DATASET_CODEC_NONE && codec != w->codec && codec != DATASET_CODEC_ZSTD)
        return rf_err_set(err, -EINVAL, "unknown codec %u", codec);
    if (codec != DATASET_CODEC_NONE && !w->cctx) { /* a first zstd record */
        const char *why = NULL;

        w->cctx = codec_cctx_new(w->level, NULL, 0, &why);
        if (!w->cctx)
            return rf_err_set(err, -ENOMEM, "codec %s: %s", codec_name(codec), why);
    }

    if (w->failed)
        return rf_err_set(err, -EIO, "an earlier write failed: abort the pack");
    if (len > DATASET_RECORD_MAX)
        return rf_err_set(err, -EFBIG, "record of %zu bytes: the limit is %u",
                          len, DATASET_RECORD_MAX);
    if (w->tensor_bytes && len != w->tensor_bytes)
        return rf_err_set(err, -EINVAL, "record of %zu bytes: the tensor "
                          "shape needs %" PRIu64, len, w->tensor_bytes);
    if (w->m.kind == DATASET_FIELDS) {
        struct schema_part parts[SCHEMA_MAX_FIELDS];
        uint64_t rows[SCHEMA_MAX_FIELDS];

        r = schema_record_split(&w->schema, data, len, parts, err);
        if (r < 0)
            return r;
        if (label != DATASET_NO_LABEL)
            return rf_err_set(err, -EINVAL, "kind fields: a label is a field, the record's "
                              "label must be DATASET_NO_LABEL");
        for (uint32_t i = 0; i < w->schema.n; i++) {
            const struct schema_field *f = &w->schema.f[i];

            rows[i] = schema_rows(f, parts[i].len);
            if (f->cap_rows && rows[i] > f->cap_rows)
                return rf_err_set(err, -EINVAL, "field %s: %" PRIu64 " rows, more than the "
                                  "batch's cap=%" PRIu64, f->name, rows[i], f->cap_rows);
        }
        for (uint32_t i = 0; i < w->schema.n; i++)
            if ((w->schema.f[i].kind == SCHEMA_RAGGED || w->schema.f[i].kind == SCHEMA_BYTES) &&
                rows[i] > w->seen_rows[i])
                w->seen_rows[i] = rows[i];
    } else if (w->m.nclasses ? label >= w->m.nclasses : label != DATASET_NO_LABEL)
        return rf_err_set(err, -EINVAL, "label %" PRIu32 " out of range "
                          "(%" PRIu32 " classes)", label, w->m.nclasses);
    w->started = 1;
    if (codec != DATASET_CODEC_NONE) {
        size_t bound = codec_bound(codec, len);
        const char *why = NULL;
        long n;

        if (bound > w->enc_cap) {
            uint8_t *p = realloc(w->enc, bound);

            if (!p)
                return rf_err_set(err, -ENOMEM, "out of memory");
            w->enc = p;
            w->enc_cap = bound;
        }
        n = codec_encode(codec, w->cctx, data, len, w->enc, w->enc_cap,
                         &why);
        if (n < 0)
            return rf_err_set(err, (int)n, "codec %s: %s",
                              codec_name(codec), why);
        if ((size_t)n < len) { /* else keep it as is: codec none */
            stored = w->enc;
            stored_len = (size_t)n;
            e.codec = (uint8_t)codec;
            w->m.codec = codec; /* the MANIFEST names the codec records may use */
        }
    }
    w->failed = 1; /* until the record is fully in */
    if (w->fd != -1 && w->nrec > 0 &&
        w->off + stored_len + (w->nrec + 1) * SHARD_ENTRY_SIZE > w->shard_bytes) {
        r = shard_close(w, err);
        if (r < 0)
            return r;
    }
    if (w->fd == -1) {
        r = shard_start(w, err);
        if (r < 0)
            return r;
    }
    if ((w->nrec + 1) * SHARD_ENTRY_SIZE > w->idx_cap) {
        size_t cap = w->idx_cap ? 2 * w->idx_cap : 4096;
        uint8_t *p = realloc(w->idx, cap);

        if (!p)
            return rf_err_set(err, -ENOMEM, "out of memory");
        w->idx = p;
        w->idx_cap = cap;
    }
    e.offset = w->off;
    e.stored_len = (uint32_t)stored_len;
    e.decoded_len = (uint32_t)len;
    e.crc = crc32c(0, stored, stored_len);
    r = append(w, stored, stored_len, err);
    if (r < 0)
        return r;
    shard_entry_encode(&e, w->idx + w->nrec * SHARD_ENTRY_SIZE);
    w->nrec++;
    w->off += stored_len;
    w->codec_mask |= 1u << e.codec;
    if (e.stored_len > w->m.max_stored)
        w->m.max_stored = e.stored_len;
    if (e.decoded_len > w->m.max_decoded)
        w->m.max_decoded = e.decoded_len;
    w->st.records++;
    w->st.decoded_bytes += len;
    w->st.stored_bytes += stored_len;
    w->st.file_bytes += stored_len + SHARD_ENTRY_SIZE;
    w->failed = 0;
    return 0;
}

int dataset_writer_set_raw_images(struct dataset_writer *w, uint64_t n,
                                  struct rf_err *err)
{
    if (n && w->m.kind != DATASET_JPEG)
        return rf_err_set(err, -EINVAL, "raw_images %" PRIu64 ": RFPX records "
                          "are for jpeg datasets only, this is %s", n,
                          dataset_kind_name(w->m.kind));
    w->m.raw_images = n;
    return 0;
}

int dataset_writer_set_image_shape(struct dataset_writer *w, uint32_t height,
                                   uint32_t width, struct rf_err *err)
{
    if ((height || width) && w->m.kind != DATASET_JPEG)
        return rf_err_set(err, -EINVAL, "image_shape %" PRIu32 "x%" PRIu32 ": "
                          "for jpeg datasets only, this is %s", height, width,
                          dataset_kind_name(w->m.kind));
    if (!height != !width || height > PX_SIDE_MAX || width > PX_SIDE_MAX)
        return rf_err_set(err, -EINVAL, "image_shape %" PRIu32 "x%" PRIu32 ": "
                          "give each side 1..%u, or 0x0 for none", height, width,
                          PX_SIDE_MAX);
    w->m.image_height = height;
    w->m.image_width = width;
    return 0;
}

int dataset_writer_set_field_shape(struct dataset_writer *w, uint32_t field, uint32_t height,
                                   uint32_t width, struct rf_err *err)
{
    if (w->m.kind != DATASET_FIELDS || field >= w->schema.n ||
        w->schema.f[field].kind != SCHEMA_IMAGE)
        return rf_err_set(err, -EINVAL, "field %" PRIu32 ": shape=HxW is for an image field "
                          "of a kind-fields dataset", field);
    if (!height != !width || height > PX_SIDE_MAX || width > PX_SIDE_MAX)
        return rf_err_set(err, -EINVAL, "field %s: shape=%" PRIu32 "x%" PRIu32 ": give each "
                          "side 1..%u, or 0x0 for none", w->schema.f[field].name, height, width,
                          PX_SIDE_MAX);
    w->schema.f[field].height = height;
    w->schema.f[field].width = width;
    return 0;
}

void dataset_writer_get_stats(const struct dataset_writer *w,
                              struct dataset_writer_stats *st)
{
    *st = w->st;
}

const char *dataset_writer_tmpdir(const struct dataset_writer *w)
{
    return w->tmp;
}

static int sync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;

    if (fd == -1)
        return -errno;
    if (fsync(fd) == -1)
        r = -errno;
    close(fd);
    return r;
}

int dataset_writer_add_source(struct dataset_writer *w, const char *path,
                              size_t n, struct rf_err *err)
{
    char line[SOURCES_LINE_MAX + 2];
    long k;

    if (w->nsrc + 1 != w->st.records)
        return rf_err_set(err, -EINVAL, "source path for record %" PRIu64
                          " after %" PRIu64 " records: give each record's "
                          "path right after adding it, for every record or "
                          "none", w->nsrc, w->st.records);
    k = sources_escape(path, n, line, sizeof(line) - 1);
    if (k < 0)
        return rf_err_set(err, (int)k, k == -EINVAL ? "an empty source path"
                          : "source path \"%.*s...\" is over %u bytes when "
                          "escaped (proto/sources.h)", 60, path,
                          SOURCES_LINE_MAX);
    line[k++] = '\n';
    if (w->src_len + (size_t)k > SOURCES_FILE_MAX)
        return rf_err_set(err, -EFBIG, "the source list is over %llu bytes",
                          (unsigned long long)SOURCES_FILE_MAX);
    if (w->src_len + (size_t)k > w->src_cap) {
        size_t cap = w->src_cap ? w->src_cap * 2 : 1u << 16;
        char *p;

        while (cap < w->src_len + (size_t)k)
            cap *= 2;
        p = realloc(w->src, cap);
        if (!p)
            return rf_err_set(err, -ENOMEM, "out of memory for the source list");
        w->src = p;
        w->src_cap = cap;
    }
    memcpy(w->src + w->src_len, line, (size_t)k);
    w->src_len += (size_t)k;
    w->nsrc++;
    return 0;
}

int dataset_writer_finish(struct dataset_writer *w,
                          struct dataset_writer_stats *st,
                          struct rf_err *err)
{
    char *text = NULL;
    size_t len = 0;
    int r;

    if (w->failed) {
        r = rf_err_set(err, -EIO, "an earlier write failed");
        goto fail;
    }
    if (w->fd != -1) {
        r = shard_close(w, err);
        if (r < 0)
            goto fail;
    }
    w->m.samples = w->st.records;
    if (w->m.kind == DATASET_FIELDS) {
        /* max= is the most rows a record had (at least 1): the ring's
         * capacity per batch is sized from it */
        w->m.schema = w->schema;
        for (uint32_t i = 0; i < w->schema.n; i++)
            if (w->schema.f[i].max_rows)
                w->m.schema.f[i].max_rows = w->seen_rows[i] ? w->seen_rows[i] : 1;
    }
    if (w->m.raw_images > w->m.samples) {
        r = rf_err_set(err, -EINVAL, "raw_images %" PRIu64 " but only %" PRIu64
                       " records added", w->m.raw_images, w->m.samples);
        goto fail;
    }
    if (w->nsrc && w->nsrc != w->m.samples) {
        r = rf_err_set(err, -EINVAL, "%" PRIu64 " source paths for %" PRIu64
                       " records: give one for every record or none",
                       w->nsrc, w->m.samples);
        goto fail;
    }
    if (w->nsrc) {
        r = write_small_file(w, DATASET_SOURCES_NAME, w->src, w->src_len, err);
        if (r < 0)
            goto fail;
        r = manifest_set_sources(&w->m, DATASET_SOURCES_NAME, w->src_len,
                                 crc32c(0, w->src, w->src_len));
        if (r < 0) {
            r = rf_err_set(err, r, "out of memory");
            goto fail;
        }
    }
    r = manifest_check(&w->m, err);
    if (r < 0) {
        rf_err_prefix(err, "internal error: manifest about to be written");
        goto fail;
    }
    text = manifest_format(&w->m, &len);
    if (!text) {
        r = rf_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    r = write_small_file(w, DATASET_MANIFEST_NAME, text, len, err);
    free(text);
    if (r < 0)
        goto fail;
    if (fchmod(w->dirfd, 0755) == -1 || fsync(w->dirfd) == -1) {
        r = rf_err_set(err, -errno, "%s: %s", w->tmp, strerror(errno));
        goto fail;
    }
    if (renameat2(AT_FDCWD, w->tmp, AT_FDCWD, w->dest, RENAME_NOREPLACE) == -1) {
        if (errno == EINVAL || errno == ENOSYS) {
            /* a file system without RENAME_NOREPLACE: rename still refuses
             * a non-empty folder, and we checked dest was absent */
            if (rename(w->tmp, w->dest) == -1)
                r = -errno;
        } else {
            r = -errno;
        }
        if (r < 0) {
            rf_err_set(err, r, "renaming %s to %s: %s", w->tmp, w->dest,
                       strerror(-r));
            goto fail;
        }
    }
    r = sync_dir(w->parent);
    if (r < 0) {
        /* the dataset is complete under its name; only durability is in
         * doubt, so report without undoing */
        rf_err_set(err, r, "%s: fsync of the parent folder failed: %s",
                   w->parent, strerror(-r));
    }
    if (st)
        *st = w->st;
    free(w->tmp);
    w->tmp = NULL; /* nothing to remove any more */
    dataset_writer_abort(w);
    return r;

fail:
    dataset_writer_abort(w);
    return r;
}

/* Removes every file in the temporary folder, then the folder. */
static void remove_tmp(struct dataset_writer *w)
{
    DIR *d;
    struct dirent *de;
    int fd;

    if (!w->tmp || w->dirfd == -1) {
        if (w->tmp)
            rmdir(w->tmp);
        return;
    }
    fd = dup(w->dirfd);
    if (fd == -1)
        return;
    d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            unlinkat(w->dirfd, de->d_name, 0);
    closedir(d);
    rmdir(w->tmp);
}

void dataset_writer_abort(struct dataset_writer *w)
{
    if (!w)
        return;
    if (w->fd != -1)
        close(w->fd);
    remove_tmp(w);
    if (w->dirfd != -1)
        close(w->dirfd);
    codec_cctx_free(w->cctx);
    manifest_free(&w->m);
    free(w->idx);
    free(w->wbuf);
    free(w->enc);
    free(w->src);
    free(w->tmp);
    free(w->parent);
    free(w->dest);
    free(w);
}
