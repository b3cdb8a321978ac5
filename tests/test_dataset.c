/*
 * test_dataset.c - the dataset writer and reader together (dataset.h,
 * dataset_writer.h): round trips with each codec and with a dictionary,
 * many shards, records larger than a shard, an interrupted pack, and damage:
 * a flipped byte in a record, an index and a header, a truncated shard, a
 * broken dictionary, and index entries forged with huge lengths and offsets
 * whose checksums were recomputed so only the bounds checks stand between
 * them and a crash.  Every error must name the shard, the record and the
 * byte offset; none may cause a large allocation (malloc, calloc and
 * realloc are wrapped at link time to record the largest request).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crc32c.h"
#include "dataset.h"
#include "dataset_writer.h"
#include "ring.h"
#include "shard.h"
#include "tap.h"

/* ---- the largest allocation request, via -Wl,--wrap ---- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

static size_t max_alloc;

void *__wrap_malloc(size_t n)
{
    if (n > max_alloc)
        max_alloc = n;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
    if (m && n > SIZE_MAX / m)
        max_alloc = SIZE_MAX;
    else if (n * m > max_alloc)
        max_alloc = n * m;
    return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (n > max_alloc)
        max_alloc = n;
    return __real_realloc(p, n);
}

/* ---- records ---- */
#define NREC 2000
#define TBYTES 256 /* 1x16x16 u8 */
#define SHARD_BYTES (64 * 1024)

static uint8_t templates[10][TBYTES];

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void make_templates(void)
{
    for (int c = 0; c < 10; c++)
        for (int j = 0; j < TBYTES; j++)
            templates[c][j] = (uint8_t)mix((uint64_t)c * 1000 +
                                           (uint64_t)j / 4);
}

/*
 * Record i of the tensor datasets: its class's template (runs of 4 equal
 * bytes: a little for zstd to find inside one record, much more across
 * records of a class, which a dictionary captures), and a little noise.
 */
static void gen_tensor(uint64_t i, uint8_t *out)
{
    const uint8_t *t = templates[i % 10];

    for (int j = 0; j < TBYTES; j++) {
        uint64_t r = mix(i * 4096 + (uint64_t)j);

        out[j] = (r & 15) == 0 ? (uint8_t)(r >> 8) : t[j];
    }
}

/* Record i of the bytes dataset: length and content vary, some random. */
static size_t gen_bytes(uint64_t i, uint8_t *out)
{
    size_t n = i == 5 ? 100000 : (size_t)(i * 37 % 700);

    for (size_t j = 0; j < n; j++)
        out[j] = i % 3 == 0 ? (uint8_t)mix(i * 1000003 + j)
                            : (uint8_t)("abcabcabd"[j % 9] + i % 5);
    return n;
}

#define BYTES_NREC 300

static char root[256];

static int rm_one(const char *p, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void rm_rf(const char *p)
{
    nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *const class_names[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
};

enum pack_kind { PACK_NONE, PACK_ZSTD, PACK_DICT, PACK_BYTES };

/* Bytes in the regular files of a (flat) folder. */
static uint64_t dir_bytes(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;
    uint64_t total = 0;
    char f[1024];
    struct stat st;

    while (d && (de = readdir(d)) != NULL) {
        snprintf(f, sizeof(f), "%s/%s", path, de->d_name);
        if (stat(f, &st) == 0 && S_ISREG(st.st_mode))
            total += (uint64_t)st.st_size;
    }
    if (d)
        closedir(d);
    return total;
}

/* Packs dataset `kind` into root/name; returns 0 or the error. */
static int pack(const char *name, enum pack_kind kind, char *path,
                size_t pathcap)
{
    struct dataset_writer_opts o = {
        .kind = DATASET_TENSOR,
        .dtype = DATASET_DTYPE_U8,
        .ndim = 3,
        .shape = {1, 16, 16},
        .codec = kind == PACK_NONE ? DATASET_CODEC_NONE : DATASET_CODEC_ZSTD,
        .shard_bytes = SHARD_BYTES,
        .classes = 10,
        .class_names = class_names,
    };
    struct dataset_writer *w;
    struct dataset_writer_stats st;
    struct rf_err e = {{0}};
    static uint8_t rec[100000];
    int r;

    snprintf(path, pathcap, "%s/%s", root, name);
    if (kind == PACK_BYTES) {
        o.kind = DATASET_BYTES;
        o.ndim = 0;
        o.classes = 0;
        o.shard_bytes = 16 * 1024;
    }
    r = dataset_writer_create(path, &o, &w, &e);
    if (r < 0) {
        tap_diag("create %s: %s", path, e.msg);
        return r;
    }
    if (kind == PACK_DICT) {
        static uint8_t samples[NREC * TBYTES];
        static size_t sizes[NREC];

        for (int i = 0; i < NREC; i++) {
            gen_tensor((uint64_t)i, samples + (size_t)i * TBYTES);
            sizes[i] = TBYTES;
        }
        r = dataset_writer_train_dict(w, samples, sizes, NREC, 8192, &e);
        if (r < 0) {
            tap_diag("train: %s", e.msg);
            dataset_writer_abort(w);
            return r;
        }
    }
    for (uint64_t i = 0; i < (kind == PACK_BYTES ? BYTES_NREC : NREC); i++) {
        size_t n = TBYTES;
        uint32_t label = (uint32_t)(i % 10);

        if (kind == PACK_BYTES) {
            n = gen_bytes(i, rec);
            label = DATASET_NO_LABEL;
        } else {
            gen_tensor(i, rec);
        }
        r = dataset_writer_add(w, rec, n, label, &e);
        if (r < 0) {
            tap_diag("add %" PRIu64 ": %s", i, e.msg);
            dataset_writer_abort(w);
            return r;
        }
    }
    r = dataset_writer_finish(w, &st, &e);
    if (r < 0) {
        tap_diag("finish: %s", e.msg);
        return r;
    }
    if (!tap_ok(st.file_bytes == dir_bytes(path) &&
                st.records == (kind == PACK_BYTES ? BYTES_NREC : NREC),
                "%s: writer's figures match the files", name))
        tap_diag("  stats say %" PRIu64 " bytes, %" PRIu64 " records; files "
                 "hold %" PRIu64 " bytes", st.file_bytes, st.records,
                 dir_bytes(path));
    return 0;
}

/* Reads every sample two ways and compares with the generator. */
static int check_all(struct dataset *ds, enum pack_kind kind)
{
    uint8_t *want = malloc(100000), *got = malloc(100000);
    uint8_t *stored = malloc(100000);
    struct dataset_dctx *ctx = dataset_dctx_new();
    const struct dataset_info *info = dataset_info(ds);
    struct rf_err e = {{0}};
    int bad = 0;

    for (uint64_t i = 0; i < info->samples; i++) {
        struct dataset_loc loc;
        size_t n = kind == PACK_BYTES ? gen_bytes(i, want) : TBYTES;
        int r;

        if (kind != PACK_BYTES)
            gen_tensor(i, want);
        r = dataset_read(ds, i, got, 100000, ctx, &loc, &e);
        if (r != (int)n || memcmp(got, want, n) != 0 ||
            loc.label != (kind == PACK_BYTES ? DATASET_NO_LABEL : i % 10)) {
            if (bad++ < 3)
                tap_diag("sample %" PRIu64 ": read %d (%s)", i, r, e.msg);
            continue;
        }
        /* the split path a worker takes: locate, own read, decode */
        memset(got, 0, n);
        if (dataset_locate(ds, i, &loc, &e) < 0 ||
            pread(loc.fd, stored, loc.stored_len, (off_t)loc.offset) !=
                (ssize_t)loc.stored_len ||
            dataset_decode(ds, &loc, stored, got, n, ctx, &e) != (int)n ||
            memcmp(got, want, n) != 0) {
            if (bad++ < 3)
                tap_diag("sample %" PRIu64 ": split path: %s", i, e.msg);
        }
    }
    dataset_dctx_free(ctx);
    free(want);
    free(got);
    free(stored);
    return bad;
}

static uint64_t stored_total(struct dataset *ds)
{
    uint64_t t = 0;

    for (uint32_t i = 0; i < dataset_info(ds)->shards; i++) {
        struct dataset_shard_info si;

        dataset_shard_info(ds, i, &si);
        t += si.record_bytes;
    }
    return t;
}

static uint64_t round_trips(void)
{
    char path[512];
    struct dataset *ds;
    struct rf_err e = {{0}};
    uint64_t sizes[3] = {0};
    static const char *const names[] = {"none", "zstd", "dict", "bytes"};

    for (int k = PACK_NONE; k <= PACK_BYTES; k++) {
        const struct dataset_info *info;

        TAP_IS_INT(pack(names[k], k, path, sizeof(path)), 0, names[k]);
        if (!tap_ok(dataset_open(path, &ds, &e) == 0, "open %s", names[k])) {
            tap_diag("%s", e.msg);
            continue;
        }
        info = dataset_info(ds);
        TAP_IS_INT(info->samples, k == PACK_BYTES ? BYTES_NREC : NREC,
                   "sample count");
        TAP_OK(info->shards > 1, "several shards");
        TAP_IS_INT(info->has_dict, k == PACK_DICT, "dict flag");
        if (k != PACK_BYTES) {
            TAP_IS_INT(info->kind, DATASET_TENSOR, "kind tensor");
            TAP_IS_INT(info->sample_bytes, TBYTES, "sample bytes");
            TAP_IS_INT(info->ndim, 3, "ndim");
            TAP_IS_INT(info->shape[1], 16, "shape");
            TAP_IS_INT(info->classes, 10, "classes");
            TAP_IS_STR(dataset_class_name(ds, 0), "T-shirt/top", "class 0");
            TAP_IS_STR(dataset_class_name(ds, 9), "Ankle boot", "class 9");
            TAP_IS_INT(info->max_decoded, TBYTES, "max_decoded");
            sizes[k] = stored_total(ds);
        } else {
            TAP_IS_INT(info->kind, DATASET_BYTES, "kind bytes");
            TAP_IS_INT(info->classes, 0, "no classes");
            TAP_IS_INT(info->max_decoded, 100000, "max_decoded");
        }
        TAP_IS_INT(check_all(ds, k), 0, "every sample reads back exactly");
        dataset_close(ds);
    }
    tap_diag("stored bytes: none %" PRIu64 ", zstd %" PRIu64 ", zstd+dict %"
             PRIu64, sizes[0], sizes[1], sizes[2]);
    TAP_IS_INT(sizes[0], (uint64_t)NREC * TBYTES, "codec none stores as is");
    TAP_OK(sizes[1] < sizes[0], "zstd stores less");
    TAP_OK(sizes[2] < sizes[1] / 2, "a dictionary stores much less");
    return 0;
}

/* ---- threads read one dataset at once ---- */
struct thread_arg {
    struct dataset *ds;
    int bad;
};

static void *reader(void *p)
{
    struct thread_arg *a = p;

    a->bad = check_all(a->ds, PACK_DICT);
    return NULL;
}

static void threads(void)
{
    char path[512];
    struct dataset *ds;
    pthread_t t[4];
    struct thread_arg a[4];
    int bad = 0;

    snprintf(path, sizeof(path), "%s/dict", root);
    if (dataset_open(path, &ds, NULL) < 0) {
        TAP_OK(0, "open for threads");
        return;
    }
    for (int i = 0; i < 4; i++) {
        a[i] = (struct thread_arg){.ds = ds};
        pthread_create(&t[i], NULL, reader, &a[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        bad += a[i].bad;
    }
    TAP_IS_INT(bad, 0, "4 threads read every sample at once");
    dataset_close(ds);
}

/* ---- the writer refuses bad input ---- */
static void writer_rules(void)
{
    struct dataset_writer_opts o = {
        .kind = DATASET_TENSOR, .dtype = DATASET_DTYPE_U8, .ndim = 2,
        .shape = {4, 4}, .codec = DATASET_CODEC_NONE, .classes = 2,
        .class_names = class_names,
    };
    struct dataset_writer *w;
    struct rf_err e = {{0}};
    char path[512], existing[512];
    uint8_t rec[17] = {0};
    size_t one = 16;
    struct stat st;

    snprintf(path, sizeof(path), "%s/rules", root);
    snprintf(existing, sizeof(existing), "%s/none", root);
    TAP_IS_INT(dataset_writer_create(existing, &o, &w, &e), -EEXIST,
               "an existing destination is refused");
    TAP_OK(strstr(e.msg, existing) != NULL, "message names it");
    o.ndim = 0;
    TAP_IS_INT(dataset_writer_create(path, &o, &w, &e), -EINVAL,
               "a tensor without a shape is refused");
    o.ndim = 2;
    o.codec = DATASET_CODEC_ZSTD;
    o.level = 99;
    TAP_IS_INT(dataset_writer_create(path, &o, &w, &e), -EINVAL,
               "zstd level 99 is refused");
    o.level = 0;
    o.codec = DATASET_CODEC_NONE;
    {
        /* regression: classes without names made the writer read NULL */
        const char *const *names = o.class_names;
        uint32_t classes = o.classes;

        o.classes = 3;
        o.class_names = NULL;
        TAP_IS_INT(dataset_writer_create(path, &o, &w, &e), -EINVAL,
                   "classes without names are refused");
        TAP_OK(strstr(e.msg, "no class names") != NULL, "  message says so");
        o.classes = classes;
        o.class_names = names;
    }
    TAP_IS_INT(dataset_writer_create(path, &o, &w, &e), 0, "create");
    TAP_IS_INT(dataset_writer_train_dict(w, rec, &one, 1, 0, &e), -EINVAL,
               "a dictionary needs zstd");
    TAP_IS_INT(dataset_writer_add(w, rec, 17, 0, &e), -EINVAL,
               "a record of the wrong size is refused");
    TAP_IS_INT(dataset_writer_add(w, rec, 16, 2, &e), -EINVAL,
               "a label out of range is refused");
    TAP_IS_INT(dataset_writer_add(w, rec, 16, 1, &e), 0,
               "the writer goes on after refusing");
    TAP_OK(stat(dataset_writer_tmpdir(w), &st) == 0 && S_ISDIR(st.st_mode),
           "the temporary folder exists while packing");
    {
        char tmp[512];

        snprintf(tmp, sizeof(tmp), "%s", dataset_writer_tmpdir(w));
        TAP_OK(strstr(tmp, "/.rules.tmp-") != NULL,
               "temporary folder is hidden, next to the destination");
        dataset_writer_abort(w);
        TAP_OK(stat(tmp, &st) == -1 && errno == ENOENT,
               "abort removes the temporary folder");
    }
    TAP_OK(stat(path, &st) == -1 && errno == ENOENT,
           "abort leaves no destination");

    o.codec = DATASET_CODEC_ZSTD;
    TAP_IS_INT(dataset_writer_create(path, &o, &w, &e), 0, "create zstd");
    dataset_writer_add(w, rec, 16, 1, &e);
    TAP_IS_INT(dataset_writer_train_dict(w, rec, &one, 1, 0, &e), -EINVAL,
               "a dictionary after the first record is refused");
    TAP_IS_INT(dataset_writer_finish(w, NULL, &e), 0, "finish with 1 record");
    rm_rf(path);
}

/* A pack killed midway leaves nothing that opens as a dataset. */
static void interrupted(void)
{
    char path[512], tmp[600] = "";
    struct dataset *ds;
    struct rf_err e = {{0}};
    struct stat st;
    int fds[2], status = 0;
    pid_t pid;

    snprintf(path, sizeof(path), "%s/killed", root);
    if (pipe(fds) == -1)
        return;
    pid = fork();
    if (pid == 0) {
        struct dataset_writer_opts o = {
            .kind = DATASET_TENSOR, .dtype = DATASET_DTYPE_U8, .ndim = 3,
            .shape = {1, 16, 16}, .codec = DATASET_CODEC_ZSTD,
            .shard_bytes = 4096, .classes = 10, .class_names = class_names,
        };
        struct dataset_writer *w;
        uint8_t rec[TBYTES];

        if (dataset_writer_create(path, &o, &w, NULL) < 0)
            _exit(1);
        for (uint64_t i = 0; i < 500; i++) {
            gen_tensor(i, rec);
            dataset_writer_add(w, rec, TBYTES, (uint32_t)(i % 10), NULL);
        }
        if (write(fds[1], dataset_writer_tmpdir(w),
                  strlen(dataset_writer_tmpdir(w))) < 0)
            _exit(1);
        _exit(0); /* dies without finishing, as if killed */
    }
    close(fds[1]);
    if (read(fds[0], tmp, sizeof(tmp) - 1) < 0)
        tmp[0] = '\0';
    close(fds[0]);
    waitpid(pid, &status, 0);
    TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child packed");
    TAP_OK(stat(path, &st) == -1 && errno == ENOENT,
           "no destination after a killed pack");
    TAP_OK(tmp[0] && stat(tmp, &st) == 0, "its temporary folder remains");
    {
        char shard[700];

        snprintf(shard, sizeof(shard), "%s/shard-00001.rfs", tmp);
        TAP_OK(stat(shard, &st) == 0, "with complete shards in it");
    }
    TAP_IS_INT(dataset_open(tmp, &ds, &e), -ENOENT,
               "the temporary folder does not open as a dataset");
    TAP_OK(strstr(e.msg, "did not finish") != NULL, "and says why");
    rm_rf(tmp);
}

/* ---- damage ---- */
static void copy_file(const char *from, const char *to)
{
    static char buf[1 << 16];
    int a = open(from, O_RDONLY), b = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ssize_t n;

    while ((n = read(a, buf, sizeof(buf))) > 0)
        if (write(b, buf, (size_t)n) != n)
            break;
    close(a);
    close(b);
}

/* A fresh copy of dataset src at root/dst (flat folder). */
static void copy_dataset(const char *src, const char *dst, char *out,
                         size_t cap)
{
    char s[512], f[1024], g[1024];
    const char *files[] = {"MANIFEST", "dict.zstd", NULL};

    snprintf(s, sizeof(s), "%s/%s", root, src);
    snprintf(out, cap, "%s/%s", root, dst);
    rm_rf(out);
    mkdir(out, 0755);
    for (int i = 0; files[i]; i++) {
        snprintf(f, sizeof(f), "%s/%s", s, files[i]);
        snprintf(g, sizeof(g), "%s/%s", out, files[i]);
        if (access(f, F_OK) == 0)
            copy_file(f, g);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(f, sizeof(f), "%s/shard-%05d.rfs", s, i);
        snprintf(g, sizeof(g), "%s/shard-%05d.rfs", out, i);
        if (access(f, F_OK) != 0)
            break;
        copy_file(f, g);
    }
}

static void shard_path(const char *dir, int shard, char *out, size_t cap)
{
    snprintf(out, cap, "%s/shard-%05d.rfs", dir, shard);
}

static uint64_t rd64(int fd, uint64_t off)
{
    uint8_t b[8];
    uint64_t v = 0;

    if (pread(fd, b, 8, (off_t)off) != 8)
        return 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static void wr(int fd, uint64_t off, uint64_t v, int width)
{
    uint8_t b[8];

    for (int i = 0; i < width; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    if (pwrite(fd, b, (size_t)width, (off_t)off) != width)
        abort();
}

static void flip(const char *file, uint64_t off)
{
    int fd = open(file, O_RDWR);
    uint8_t b;

    if (pread(fd, &b, 1, (off_t)off) != 1)
        abort();
    b ^= 0x10;
    wr(fd, off, b, 1);
    close(fd);
}

/*
 * Forges field (at byte field_off, width bytes) of entry rec in shard 1 of
 * dir, then re-seals everything: the entry's checksum, the index checksum
 * in the header, the header checksum and the manifest's index checksum.
 */
static void forge(const char *dir, uint64_t rec, unsigned field_off,
                  int width, uint64_t value)
{
    static char text[1 << 16];
    char file[600], man[600], hex_old[9], hex_new[9], *at;
    int fd;
    uint64_t index_off, index_len;
    uint8_t *index, hdr[64], entry[32];
    uint32_t old_crc, new_crc;
    FILE *f;
    long n;

    shard_path(dir, 1, file, sizeof(file));
    fd = open(file, O_RDWR);
    index_off = rd64(fd, 24);
    index_len = rd64(fd, 32);
    wr(fd, index_off + rec * 32 + field_off, value, width);
    if (pread(fd, entry, 32, (off_t)(index_off + rec * 32)) != 32)
        abort();
    wr(fd, index_off + rec * 32 + 28, crc32c(0, entry, 28), 4);
    index = __real_malloc(index_len); /* not the reader's allocation */
    if (pread(fd, index, index_len, (off_t)index_off) != (ssize_t)index_len)
        abort();
    new_crc = crc32c(0, index, index_len);
    free(index);
    if (pread(fd, hdr, 64, 0) != 64)
        abort();
    old_crc = (uint32_t)hdr[40] | (uint32_t)hdr[41] << 8 |
              (uint32_t)hdr[42] << 16 | (uint32_t)hdr[43] << 24;
    wr(fd, 40, new_crc, 4);
    if (pread(fd, hdr, 64, 0) != 64)
        abort();
    wr(fd, 60, crc32c(0, hdr, 60), 4);
    close(fd);

    snprintf(man, sizeof(man), "%s/MANIFEST", dir);
    f = fopen(man, "r+");
    memset(text, 0, sizeof(text));
    n = (long)fread(text, 1, sizeof(text) - 1, f);
    snprintf(hex_old, sizeof(hex_old), "%08x", old_crc);
    snprintf(hex_new, sizeof(hex_new), "%08x", new_crc);
    at = strstr(text, hex_old);
    if (at)
        memcpy(at, hex_new, 8);
    rewind(f);
    fwrite(text, 1, (size_t)n, f);
    fclose(f);
}

/* Expects err to name shard 1's file, record rec and a byte offset. */
static void expect_msg(const struct rf_err *e, const char *dir, int shard,
                       const char *part, const char *name)
{
    char file[600];

    shard_path(dir, shard, file, sizeof(file));
    if (!tap_ok(strstr(e->msg, file) && strstr(e->msg, part) &&
                strstr(e->msg, "byte "), "%s: message", name))
        tap_diag("  got \"%s\", want \"%s\" and \"%s\"", e->msg, file, part);
}

static void damage(void)
{
    char dir[512], file[600], part[200];
    struct dataset *ds;
    struct dataset_dctx *ctx = dataset_dctx_new();
    struct dataset_loc loc;
    struct dataset_shard_info si;
    struct rf_err e = {{0}};
    static uint8_t out[1 << 17];
    uint64_t rec, first = 0;
    int r;

    /* a flipped byte in a record */
    copy_dataset("zstd", "d-record", dir, sizeof(dir));
    dataset_open(dir, &ds, NULL);
    dataset_locate(ds, 1000, &loc, NULL);
    dataset_close(ds); /* loc.shard_path went with it */
    shard_path(dir, (int)loc.shard, file, sizeof(file));
    flip(file, loc.offset + 3);
    TAP_IS_INT(dataset_open(dir, &ds, &e), 0, "record damage: opens");
    r = dataset_read(ds, 1000, out, sizeof(out), ctx, NULL, &e);
    TAP_IS_INT(r, -EBADMSG, "record damage: read fails");
    snprintf(part, sizeof(part), "record %" PRIu64 " at byte %" PRIu64
             ": checksum mismatch", loc.record, loc.offset);
    expect_msg(&e, dir, (int)loc.shard, part, "record damage");
    TAP_IS_INT(dataset_read(ds, 999, out, sizeof(out), ctx, NULL, &e), TBYTES,
               "record damage: the record before reads");
    TAP_IS_INT(dataset_read(ds, 1001, out, sizeof(out), ctx, NULL, &e), TBYTES,
               "record damage: the record after reads");
    dataset_close(ds);

    /* a flipped byte in the index: entry 5 of shard 1 */
    copy_dataset("zstd", "d-index", dir, sizeof(dir));
    shard_path(dir, 1, file, sizeof(file));
    {
        int fd = open(file, O_RDONLY);
        uint64_t index_off = rd64(fd, 24);

        close(fd);
        flip(file, index_off + 5 * 32 + 9);
        TAP_IS_INT(dataset_open(dir, &ds, &e), -EBADMSG,
                   "index damage: strict open fails");
        snprintf(part, sizeof(part), "index at byte %" PRIu64
                 ": checksum mismatch", index_off);
        expect_msg(&e, dir, 1, part, "index damage (open)");
        TAP_IS_INT(dataset_open_flags(dir, DATASET_OPEN_TOLERANT, &ds, &e), 0,
                   "index damage: tolerant open succeeds");
        dataset_shard_info(ds, 1, &si);
        TAP_OK(si.usable && si.problem && strstr(si.problem, "index"),
               "index damage: shard usable, problem noted");
        r = dataset_locate(ds, si.first_sample + 5, &loc, &e);
        TAP_IS_INT(r, -EBADMSG, "index damage: the entry fails to locate");
        snprintf(part, sizeof(part), "record 5 (index entry at byte %" PRIu64
                 "): entry checksum mismatch", index_off + 5 * 32);
        expect_msg(&e, dir, 1, part, "index damage (locate)");
        TAP_IS_INT(dataset_read(ds, si.first_sample + 6, out, sizeof(out), ctx,
                                NULL, &e), TBYTES,
                   "index damage: the next entry reads");
        dataset_close(ds);
    }

    /* a flipped byte in a header */
    copy_dataset("zstd", "d-header", dir, sizeof(dir));
    shard_path(dir, 0, file, sizeof(file));
    flip(file, 17);
    TAP_IS_INT(dataset_open(dir, &ds, &e), -EBADMSG,
               "header damage: strict open fails");
    expect_msg(&e, dir, 0, "header at byte 0: checksum mismatch",
               "header damage");
    TAP_IS_INT(dataset_open_flags(dir, DATASET_OPEN_TOLERANT, &ds, &e), 0,
               "header damage: tolerant open succeeds");
    dataset_shard_info(ds, 0, &si);
    TAP_OK(!si.usable && si.problem, "header damage: shard unusable");
    TAP_OK(dataset_locate(ds, 3, &loc, &e) < 0 &&
           strstr(e.msg, "record 3 not checked") && strstr(e.msg, file),
           "header damage: its records fail, naming record and shard");
    TAP_IS_INT(dataset_read(ds, dataset_info(ds)->samples - 1, out,
                            sizeof(out), ctx, NULL, &e), TBYTES,
               "header damage: other shards read");
    dataset_close(ds);

    /* a truncated shard */
    copy_dataset("zstd", "d-trunc", dir, sizeof(dir));
    shard_path(dir, 1, file, sizeof(file));
    {
        struct stat st;

        stat(file, &st);
        if (truncate(file, st.st_size - 100) == -1)
            abort();
    }
    TAP_IS_INT(dataset_open(dir, &ds, &e), -EBADMSG, "truncated: open fails");
    TAP_OK(strstr(e.msg, file) && strstr(e.msg, "truncated"),
           "truncated: message names the shard");

    /* forged lengths and offsets, all checksums recomputed */
    copy_dataset("zstd", "d-forge", dir, sizeof(dir));
    rec = 7;
    forge(dir, rec, 8, 4, 0xfffffff0u); /* stored_len */
    max_alloc = 0;
    if (!tap_ok(dataset_open(dir, &ds, &e) == 0,
                "forged stored_len: open succeeds (checksums agree)")) {
        tap_diag("%s", e.msg);
    } else {
        dataset_shard_info(ds, 1, &si);
        first = si.first_sample;
        r = dataset_read(ds, first + rec, out, sizeof(out), ctx, NULL, &e);
        TAP_IS_INT(r, -EBADMSG, "forged stored_len: read fails");
        expect_msg(&e, dir, 1, "record 7 (index entry at byte",
                   "forged stored_len");
        TAP_OK(strstr(e.msg, "outside the record area") != NULL,
               "forged stored_len: the bounds check caught it");
        dataset_close(ds);
    }
    copy_dataset("zstd", "d-forge1", dir, sizeof(dir));
    forge(dir, rec, 0, 8, 0xffffffffffffff00ull); /* offset */
    if (dataset_open(dir, &ds, &e) == 0) {
        r = dataset_locate(ds, first + rec, &loc, &e);
        TAP_IS_INT(r, -EBADMSG, "forged offset: locate fails");
        expect_msg(&e, dir, 1, "record 7 (index entry", "forged offset");
        dataset_close(ds);
    } else {
        TAP_OK(0, "forged offset: open");
        tap_diag("%s", e.msg);
    }
    copy_dataset("zstd", "d-forge2", dir, sizeof(dir));
    forge(dir, rec, 12, 4, 0x7fffffffu); /* decoded_len */
    if (dataset_open(dir, &ds, &e) == 0) {
        r = dataset_read(ds, first + rec, out, sizeof(out), ctx, NULL, &e);
        TAP_IS_INT(r, -EBADMSG, "forged decoded_len: read fails");
        expect_msg(&e, dir, 1, "decoded length 2147483647 exceeds",
                   "forged decoded_len");
        dataset_close(ds);
    } else {
        TAP_OK(0, "forged decoded_len: open");
    }
    TAP_OK(max_alloc < (1u << 20), "no allocation over 1 MiB for forged "
           "entries");
    tap_diag("largest allocation while reading forged entries: %zu bytes",
             max_alloc);

    /* bytes dataset: a decoded length one short makes zstd fail */
    copy_dataset("bytes", "d-short", dir, sizeof(dir));
    dataset_open(dir, &ds, NULL);
    dataset_shard_info(ds, 1, &si);
    first = si.first_sample;
    dataset_locate(ds, first + 1, &loc, NULL);
    dataset_close(ds);
    if (tap_ok(loc.codec == DATASET_CODEC_ZSTD && loc.decoded_len > 1,
               "bytes: record is zstd-compressed")) {
        forge(dir, 1, 12, 4, loc.decoded_len - 1);
        dataset_open(dir, &ds, NULL);
        r = dataset_read(ds, first + 1, out, sizeof(out), ctx, NULL, &e);
        TAP_IS_INT(r, -EBADMSG, "decoded_len one short: read fails");
        snprintf(part, sizeof(part), "record 1 at byte %" PRIu64 ": codec zstd",
                 loc.offset);
        expect_msg(&e, dir, 1, part, "decoded_len one short");
        dataset_close(ds);
        forge(dir, 1, 12, 4, loc.decoded_len + 1);
        dataset_open(dir, &ds, NULL);
        r = dataset_read(ds, first + 1, out, sizeof(out), ctx, NULL, &e);
        TAP_IS_INT(r, -EBADMSG, "decoded_len one long: read fails");
        expect_msg(&e, dir, 1, part, "decoded_len one long");
        dataset_close(ds);
    }

    /* a damaged dictionary */
    copy_dataset("dict", "d-dict", dir, sizeof(dir));
    snprintf(file, sizeof(file), "%s/dict.zstd", dir);
    flip(file, 100);
    TAP_IS_INT(dataset_open(dir, &ds, &e), -EBADMSG, "dict damage: open fails");
    TAP_OK(strstr(e.msg, "dict.zstd") && strstr(e.msg, "checksum"),
           "dict damage: message names the dictionary");

    /* no manifest */
    snprintf(file, sizeof(file), "%s/MANIFEST", dir);
    unlink(file);
    TAP_IS_INT(dataset_open(dir, &ds, &e), -ENOENT, "no MANIFEST: -ENOENT");

    /* small buffer, out of range */
    snprintf(dir, sizeof(dir), "%s/zstd", root);
    dataset_open(dir, &ds, NULL);
    TAP_IS_INT(dataset_read(ds, 0, out, TBYTES - 1, ctx, NULL, &e), -ENOBUFS,
               "a buffer one byte short is refused");
    TAP_IS_INT(dataset_locate(ds, NREC, &loc, &e), -ERANGE,
               "a sample past the end is refused");
    dataset_close(ds);
    dataset_close(NULL);
    dataset_dctx_free(ctx);
    dataset_dctx_free(NULL);
}

/* The dtype table (dataset_types.c): every tensor dtype has a name, a
 * size and a ring number of its own, and they round-trip; the ring numbers
 * are part of the ring layout and never change. */
static void dtype_table(void)
{
    static const struct {
        enum dataset_dtype d;
        const char *name;
        size_t size;
        uint32_t ring;
    } want[] = {
        {DATASET_DTYPE_U8, "u8", 1, 1},   {DATASET_DTYPE_I8, "i8", 1, 2},
        {DATASET_DTYPE_I16, "i16", 2, 3}, {DATASET_DTYPE_I32, "i32", 4, 4},
        {DATASET_DTYPE_F32, "f32", 4, 5}, {DATASET_DTYPE_F64, "f64", 8, 6},
        {DATASET_DTYPE_I64, "i64", 8, 7}, {DATASET_DTYPE_F16, "f16", 2, 8},
        {DATASET_DTYPE_BF16, "bf16", 2, 9}, {DATASET_DTYPE_U16, "u16", 2, 10},
    };
    uint32_t seen = 0;

    TAP_IS_INT(sizeof(want) / sizeof(want[0]), DATASET_DTYPE_COUNT - 1, "every dtype listed");
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        enum dataset_dtype d = want[i].d;
        const char *name = dataset_dtype_name(d);
        uint32_t ring = dataset_dtype_ring(d);

        tap_ok(name && strcmp(name, want[i].name) == 0 && dataset_dtype_size(d) == want[i].size &&
                   ring == want[i].ring && dataset_dtype_from_ring(ring) == (int)d &&
                   dataset_dtype_parse(name, strlen(name)) == (int)d && !(seen & (1u << ring)),
               "dtype %s: %zu bytes, ring %u, round trips", want[i].name, want[i].size,
               want[i].ring);
        seen |= 1u << (ring & 31);
    }
    TAP_OK(RING_U8 == 1 && RING_I8 == 2 && RING_I16 == 3 && RING_I32 == 4 && RING_F32 == 5 &&
               RING_F64 == 6 && RING_I64 == 7 && RING_F16 == 8 && RING_BF16 == 9 &&
               RING_U16 == 10,
           "ring dtype numbers as shipped");
    TAP_IS_INT(dataset_dtype_ring(DATASET_DTYPE_NONE), 0, "no ring number for NONE");
    TAP_IS_INT(dataset_dtype_ring(DATASET_DTYPE_COUNT), 0, "none out of range");
    TAP_IS_INT(dataset_dtype_from_ring(0), -EINVAL, "ring dtype 0 names none");
    TAP_IS_INT(dataset_dtype_from_ring(11), -EINVAL, "ring dtype 11 names none");
}

int main(void)
{
    const char *t = getenv("TMPDIR");

    dtype_table();
    make_templates();
    snprintf(root, sizeof(root), "%s/rf-test-dataset-XXXXXX", t ? t : "/tmp");
    if (!mkdtemp(root))
        tap_bail("cannot create a temporary folder");
    round_trips();
    threads();
    writer_rules();
    interrupted();
    damage();
    rm_rf(root);
    return tap_done();
}
