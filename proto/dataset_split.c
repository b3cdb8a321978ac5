/*
 * dataset_split.c - ringfeed-pack split's work (dataset_split.h): the
 * labels read, the split chosen (subset.c), the set files and the MANIFEST
 * written in the order that keeps a reader consistent.
 */
#include "dataset_split.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "crc32c.h"
#include "dataset.h"
#include "fileio.h"
#include "manifest.h"
#include "schema.h"

/* The strata: *labels (n entries; the caller frees) and *classes.  The
 * shard entries' labels for jpeg and tensor; the scalar "label" field of
 * each record for kind fields (values 0..DATASET_MAX_CLASSES - 1 are
 * classes, anything else "no label"). */
static int read_labels(struct dataset *ds, uint32_t **labels, uint32_t *classes,
                       struct rf_err *err)
{
    const struct dataset_info *info = dataset_info(ds);
    uint64_t n = info->samples;
    uint32_t *lab = malloc((size_t)n * sizeof(*lab));
    struct dataset_dctx *ctx = NULL;
    struct schema_part parts[SCHEMA_MAX_FIELDS];
    uint8_t *rec = NULL;
    int field = -1, r = 0;
    uint32_t top = 0;

    if (!lab)
        return rf_err_set(err, -ENOMEM, "out of memory for %" PRIu64 " labels", n);
    if (info->kind == DATASET_FIELDS) {
        field = schema_find(&info->schema, "label", 5);
        if (field < 0 || info->schema.f[field].kind != SCHEMA_SCALAR ||
            info->schema.f[field].dtype != DATASET_DTYPE_I64) {
            free(lab);
            return rf_err_set(err, -EINVAL, "%s: --stratify needs labels: its samples have no "
                              "scalar i64 field \"label\"", dataset_dir(ds));
        }
        ctx = dataset_dctx_new();
        rec = malloc(info->max_decoded ? info->max_decoded : 1);
        if (!ctx || !rec) {
            r = rf_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
    } else if (info->classes == 0 || info->kind == DATASET_BYTES) {
        free(lab);
        return rf_err_set(err, -EINVAL, "%s: --stratify needs labels: the dataset names no "
                          "classes", dataset_dir(ds));
    }
    for (uint64_t i = 0; i < n; i++) {
        struct dataset_loc loc;

        if (field < 0) {
            r = dataset_locate(ds, i, &loc, err);
            if (r < 0)
                goto out;
            lab[i] = loc.label;
            continue;
        }
        r = dataset_read(ds, i, rec, info->max_decoded, ctx, &loc, err);
        if (r < 0)
            goto out;
        r = schema_record_split(&info->schema, rec, (size_t)r, parts, err);
        if (r < 0) {
            rf_err_prefix(err, "%s: record %" PRIu64, loc.shard_path, loc.record);
            goto out;
        }
        {
            int64_t v;

            memcpy(&v, rec + parts[field].off, sizeof(v)); /* little-endian */
            lab[i] = v >= 0 && v < (int64_t)DATASET_MAX_CLASSES ? (uint32_t)v : UINT32_MAX;
            if (lab[i] != UINT32_MAX && lab[i] >= top)
                top = lab[i] + 1;
        }
    }
    r = 0;
out:
    dataset_dctx_free(ctx);
    free(rec);
    if (r < 0) {
        free(lab);
        return r;
    }
    *labels = lab;
    *classes = field < 0 ? info->classes : top;
    return 0;
}

/* Writes len bytes as dir's file name: a temporary name, fsync, rename. */
static int write_file(int dirfd, const char *dir, const char *name, const void *buf,
                      size_t len, struct rf_err *err)
{
    char tmp[300];
    int fd, r;

    snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
    fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd == -1)
        return rf_err_set(err, -errno, "%s/%s: cannot create: %s", dir, tmp, strerror(errno));
    r = fio_write_full(fd, buf, len);
    if (r == 0 && fsync(fd) == -1)
        r = -errno;
    if (close(fd) == -1 && r == 0)
        r = -errno;
    if (r == 0 && renameat(dirfd, tmp, dirfd, name) == -1)
        r = -errno;
    if (r < 0) {
        unlinkat(dirfd, tmp, 0);
        return rf_err_set(err, r, "%s/%s: cannot write: %s", dir, name, strerror(-r));
    }
    return 0;
}

/* The new MANIFEST text: old's lines without the subset lines of names[],
 * then add[] before the "shards" line.  A malloc'd *out of *len bytes. */
static int edit_manifest(const char *old, size_t len, const char *const names[2], const char *add, char **out,
                         size_t *out_len)
{
    size_t cap = len + strlen(add) + 1, used = 0, pos = 0;
    char *t = malloc(cap);
    bool added = false;

    if (!t)
        return -ENOMEM;
    while (pos < len) {
        const char *line = old + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) + 1 : len - pos;
        bool drop = false;

        if (!added && n > 7 && memcmp(line, "shards ", 7) == 0) {
            memcpy(t + used, add, strlen(add));
            used += strlen(add);
            added = true;
        }
        if (manifest_is_subset_line(line, n))
            for (int k = 0; k < 2; k++) {
                size_t nl2 = strlen(names[k]);

                if (n > 7 + nl2 && memcmp(line + 7, names[k], nl2) == 0 && line[7 + nl2] == ' ')
                    drop = true;
            }
        if (!drop) {
            memcpy(t + used, line, n);
            used += n;
        }
        pos += n;
    }
    if (!added) {
        free(t);
        return -EBADMSG;
    }
    *out = t;
    *out_len = used;
    return 0;
}

/* Checks the request's own parts. */
static int check_request(const struct split_request *rq, struct rf_err *err)
{
    for (int k = 0; k < 2; k++)
        if (!rq->names[k] || !subset_name_ok(rq->names[k], strlen(rq->names[k])))
            return rf_err_set(err, -EINVAL, "set name \"%s\" is not 1..%u of [A-Za-z0-9_-] "
                              "starting with a letter", rq->names[k] ? rq->names[k] : "",
                              SUBSET_NAME_MAX);
    if (strcmp(rq->names[0], rq->names[1]) == 0)
        return rf_err_set(err, -EINVAL, "the two sets need two names, both are \"%s\"",
                          rq->names[0]);
    return 0;
}

int dataset_split(const char *dir, const struct split_request *rq, struct split_result *res,
                  struct rf_err *err)
{
    struct dataset *ds = NULL;
    struct subset sets[2] = {{0}};   /* [0] the rest, [1] validation */
    struct manifest now = {0}, check = {0};
    uint32_t *labels = NULL, classes = 0;
    uint8_t *enc[2] = {NULL, NULL};
    size_t enc_len[2] = {0, 0};
    char *text = NULL, *edited = NULL, add[2 * 400];
    size_t text_len = 0, edited_len = 0;
    int old[2] = {-1, -1};
    char old_file[2][256] = {"", ""};
    uint64_t k;
    int dirfd = -1, written = 0, r;

    memset(res, 0, sizeof(*res));
    r = check_request(rq, err);
    if (r < 0)
        return r;
    r = dataset_open(dir, &ds, err);
    if (r < 0)
        return r;
    dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd == -1) {
        r = rf_err_set(err, -errno, "%s: cannot open the folder: %s", dir, strerror(errno));
        goto out;
    }
    if (flock(dirfd, LOCK_EX) == -1) {
        r = rf_err_set(err, -errno, "%s: cannot lock the folder: %s", dir, strerror(errno));
        goto out;
    }
    r = subset_val_size(dataset_info(ds)->samples, rq->val_frac, rq->val_count, &k, err);
    if (r < 0)
        goto out;
    r = dataset_manifest_now(ds, &now, err);
    if (r < 0)
        goto out;
    for (int i = 0; i < 2; i++) {
        old[i] = manifest_subset_find(&now, rq->names[i]);
        if (old[i] >= 0) {
            res->replaced++;
            snprintf(old_file[i], sizeof(old_file[i]), "%s",
                     manifest_subset_file(&now, (uint32_t)old[i]));
        }
    }
    if (res->replaced && !rq->force) {
        r = rf_err_set(err, -EEXIST, "%s already has subset%s %s%s%s: --force replaces %s", dir,
                       res->replaced > 1 ? "s" : "", old[0] >= 0 ? rq->names[0] : "",
                       old[0] >= 0 && old[1] >= 0 ? " and " : "",
                       old[1] >= 0 ? rq->names[1] : "", res->replaced > 1 ? "them" : "it");
        goto out;
    }
    if (now.nsubsets - res->replaced + 2 > SUBSET_MAX) {
        r = rf_err_set(err, -EINVAL, "%s has %u subsets, the most a pack names is %u", dir,
                       now.nsubsets, SUBSET_MAX);
        goto out;
    }
    if (rq->stratify) {
        r = read_labels(ds, &labels, &classes, err);
        if (r < 0)
            goto out;
    }
    r = subset_split(dataset_info(ds)->samples, labels, classes, k, rq->stratify, rq->seed,
                     &sets[1], &sets[0]);
    if (r < 0) {
        rf_err_set(err, r, "%s: out of memory for the split", dir);
        goto out;
    }
    add[0] = '\0';
    for (int i = 0; i < 2; i++) {
        uint32_t crc;

        r = subset_encode(&sets[i], &enc[i], &enc_len[i]);
        if (r < 0) {
            rf_err_set(err, r, "%s: out of memory for the set files", dir);
            goto out;
        }
        crc = crc32c(0, enc[i], enc_len[i]);
        snprintf(res->file[i], sizeof(res->file[i]), "subset-%s-%08" PRIx32 ".rfss",
                 rq->names[i], crc);
        res->count[i] = sets[i].n;
        res->bytes[i] = enc_len[i];
        snprintf(add + strlen(add), sizeof(add) - strlen(add),
                 "subset %s %s %" PRIu64 " %zu %08" PRIx32 "\n", rq->names[i], res->file[i],
                 sets[i].n, enc_len[i], crc);
    }
    r = fio_read_file(dirfd, DATASET_MANIFEST_NAME, DATASET_MANIFEST_MAX, &text, &text_len);
    if (r < 0) {
        rf_err_set(err, r, "%s/%s: cannot read: %s", dir, DATASET_MANIFEST_NAME, strerror(-r));
        goto out;
    }
    r = edit_manifest(text, text_len, rq->names, add, &edited, &edited_len);
    if (r < 0) {
        rf_err_set(err, r, "%s/%s: %s", dir, DATASET_MANIFEST_NAME,
                   r == -ENOMEM ? "out of memory" : "no shards line");
        goto out;
    }
    r = manifest_parse(edited, edited_len, &check, err);
    if (r < 0) {
        rf_err_prefix(err, "%s: the new MANIFEST", dir);
        goto out;
    }
    if (dataset_identity_of(edited, edited_len) != dataset_identity(ds)) {
        r = rf_err_set(err, -ESTALE, "%s: the pack changed while it was split", dir);
        goto out;
    }
    for (int i = 0; i < 2 && r == 0; i++) {
        r = write_file(dirfd, dir, res->file[i], enc[i], enc_len[i], err);
        written = i + (r == 0);
    }
    if (r == 0)
        r = write_file(dirfd, dir, DATASET_MANIFEST_NAME, edited, edited_len, err);
    if (r < 0) {
        /* the old MANIFEST stands: the new files it does not name go */
        for (int i = 0; i < written; i++)
            if (strcmp(res->file[i], old_file[0]) != 0 && strcmp(res->file[i], old_file[1]) != 0)
                unlinkat(dirfd, res->file[i], 0);
        goto out;
    }
    if (fsync(dirfd) == -1) {
        r = rf_err_set(err, -errno, "%s: fsync: %s", dir, strerror(errno));
        goto out;
    }
    /* the replaced sets' files, unless a new set has the same bytes */
    for (int i = 0; i < 2; i++)
        if (old_file[i][0] && strcmp(old_file[i], res->file[0]) != 0 &&
            strcmp(old_file[i], res->file[1]) != 0)
            unlinkat(dirfd, old_file[i], 0); /* gone already is fine */
    r = 0;
out:
    if (dirfd >= 0)
        close(dirfd); /* drops the lock */
    manifest_free(&now);
    manifest_free(&check);
    free(text);
    free(edited);
    free(enc[0]);
    free(enc[1]);
    free(labels);
    subset_free(&sets[0]);
    subset_free(&sets[1]);
    dataset_close(ds);
    return r;
}
