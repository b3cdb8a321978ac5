/*
 * pack_idx.c - `ringfeed-pack idx`: IDX (MNIST-format) files, gzip or not,
 * into a tensor dataset.
 *
 * The labels file is read first (u8, one dim, as many as the images), then
 * the images are streamed through the writer a chunk at a time, so memory
 * stays small whatever the file size.  With --dict every image is read
 * first, because the dictionary is trained on images taken at an even
 * stride over the whole file (the first images alone could be one class).
 * zlib's gz* functions read plain and gzip-compressed files alike.
 *
 * Checked, with the file and the byte or record named: the magic and dims
 * of both files, equal counts, labels within the class names, a file that
 * ends early, and data after the last record.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "codec.h"
#include "dataset_writer.h"
#include "idx.h"
#include "pack.h"

static const char usage_text[] =
    "usage: ringfeed-pack idx --images FILE --labels FILE OUT_DIR [options]\n"
    "\n"
    "Packs IDX (MNIST-format) images and labels, gzip-compressed or not, into\n"
    "a tensor dataset at OUT_DIR (which must not exist): one record an image,\n"
    "labelled from the labels file.  A 3-dim images file (N x H x W) gives\n"
    "shape 1xHxW (channels first, as torchvision's ToTensor); other ranks keep\n"
    "their dims.  Multi-byte elements are stored little-endian.\n"
    "\n"
    "  --images FILE        IDX images (dim 0 counts them)\n"
    "  --labels FILE        IDX labels: u8, one dim, one per image\n"
    "  --codec zstd|none    how records are stored (default zstd)\n"
    "  --level N            zstd level (default 3)\n"
    "  --dict               train a zstd dictionary on ~11 MB of images taken\n"
    "                       across the file (small images compress far better)\n"
    "  --shard-size BYTES   start a new shard past this size, K/M/G suffixes\n"
    "                       (default 256M)\n"
    "  --class-names SPEC   'fashion-mnist', 'mnist', or a file of one name a\n"
    "                       line (default: the label numbers)\n"
    "  --help               this text\n";

static const char *const fashion_names[] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
};

static const char *const mnist_names[] = {
    "0 - zero", "1 - one", "2 - two", "3 - three", "4 - four",
    "5 - five", "6 - six", "7 - seven", "8 - eight", "9 - nine",
};

static const struct {
    const char *spec;
    const char *const *names;
    uint32_t n;
} presets[] = {
    {"fashion-mnist", fashion_names, 10},
    {"mnist", mnist_names, 10},
};

struct idx_opts {
    const char *images, *labels, *out, *class_spec;
    unsigned codec;
    long level;
    int dict;
    uint64_t shard_bytes;
};

/* An open IDX file. */
struct idx_file {
    gzFile f;
    const char *path;
    struct idx_header h;
};

/* Reads up to len bytes; returns the count (short only at the end). */
static int64_t gz_read(struct idx_file *x, void *buf, uint64_t len,
                       const char **why)
{
    uint64_t done = 0;

    while (done < len) {
        unsigned chunk = len - done > (1u << 30) ? 1u << 30
                                                  : (unsigned)(len - done);
        int n = gzread(x->f, (char *)buf + done, chunk);
        int zerr;

        if (n < 0) {
            *why = gzerror(x->f, &zerr);
            if (zerr == Z_ERRNO)
                *why = strerror(errno);
            return -1;
        }
        if (n == 0)
            break;
        done += (uint64_t)n;
    }
    *why = NULL;
    if (done < len) {
        int zerr;
        const char *msg = gzerror(x->f, &zerr);

        if (zerr != Z_OK)
            *why = msg;
    }
    return (int64_t)done;
}

static int idx_open(struct idx_file *x, const char *path, const char *what)
{
    uint8_t buf[4 + 4 * IDX_MAX_DIMS];
    struct rf_err err;
    const char *why;
    int64_t n;
    int r;

    x->path = path;
    x->f = gzopen(path, "rb");
    if (!x->f) {
        pack_warn("%s file %s: cannot open: %s", what, path,
                  errno ? strerror(errno) : "out of memory");
        return -1;
    }
    gzbuffer(x->f, 1u << 18);
    n = gz_read(x, buf, 4, &why);
    if (n == 4) {
        r = idx_parse_header(buf, 4, &x->h, &err);
        if (r == -EAGAIN) {
            int64_t m = gz_read(x, buf + 4, x->h.header_len - 4, &why);

            r = m == (int64_t)x->h.header_len - 4
                ? idx_parse_header(buf, x->h.header_len, &x->h, &err)
                : -EAGAIN;
        }
    } else {
        r = -EAGAIN;
    }
    if (r == -EAGAIN) {
        pack_warn("%s file %s: %s while reading the header", what, path,
                  why ? why : "file ends");
        return -1;
    }
    if (r < 0) {
        pack_warn("%s file %s: %s", what, path, err.msg);
        return -1;
    }
    return 0;
}

static void idx_close(struct idx_file *x)
{
    if (x->f)
        gzclose(x->f);
    x->f = NULL;
}

/* The file must end right after its last record. */
static int check_end(struct idx_file *x, const char *what)
{
    uint8_t extra;
    const char *why;
    int64_t n = gz_read(x, &extra, 1, &why);

    if (n != 0 || why) {
        pack_warn("%s file %s: %s after its %" PRIu64 " records (%" PRIu64
                  " header + data bytes expected)", what, x->path,
                  n ? "more data" : why, x->h.count,
                  (uint64_t)x->h.header_len + x->h.count * x->h.item_bytes);
        return -1;
    }
    return 0;
}

static void truncated(struct idx_file *x, const char *what, uint64_t rec,
                      const char *why)
{
    pack_warn("%s file %s: record %" PRIu64 " of %" PRIu64 " (at byte %"
              PRIu64 " of the data): %s: the file is truncated or its header "
              "count is wrong", what, x->path, rec, x->h.count,
              (uint64_t)x->h.header_len + rec * x->h.item_bytes,
              why ? why : "file ends");
}

/* Reads all count records of x into a malloc'd buffer, growing as data
 * actually arrives (a forged count cannot make it allocate up front). */
static uint8_t *read_all(struct idx_file *x, const char *what)
{
    uint64_t total = x->h.count * x->h.item_bytes, have = 0, cap = 0;
    uint8_t *buf = NULL;

    while (have < total) {
        const char *why;
        int64_t n;

        if (have == cap) {
            uint64_t want = cap ? cap * 2 : 1u << 20;
            uint8_t *p;

            if (want > total)
                want = total;
            p = realloc(buf, want);
            if (!p) {
                pack_warn("%s file %s: out of memory for %" PRIu64 " bytes",
                          what, x->path, want);
                free(buf);
                return NULL;
            }
            buf = p;
            cap = want;
        }
        n = gz_read(x, buf + have, cap - have, &why);
        if (n < 0 || (uint64_t)n < cap - have) {
            if (!pack_stop)
                truncated(x, what, (have + (n > 0 ? (uint64_t)n : 0)) /
                          x->h.item_bytes, why);
            free(buf);
            return NULL;
        }
        have += (uint64_t)n;
    }
    return buf ? buf : malloc(1);
}

/* Class names: a preset, a file of one name a line, or label numbers. */
static int load_names(const char *spec, uint32_t nlabels, char ***names,
                      uint32_t *n)
{
    FILE *f;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;

    *names = NULL;
    *n = 0;
    if (spec && !strchr(spec, '/'))
        for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
            if (strcmp(spec, presets[i].spec) == 0) {
                *names = calloc(presets[i].n, sizeof(char *));
                if (!*names)
                    return -1;
                for (uint32_t k = 0; k < presets[i].n; k++)
                    (*names)[k] = strdup(presets[i].names[k]);
                *n = presets[i].n;
                return 0;
            }
    if (!spec) {
        *names = calloc(nlabels ? nlabels : 1, sizeof(char *));
        if (!*names)
            return -1;
        for (uint32_t k = 0; k < nlabels; k++)
            if (asprintf(&(*names)[k], "%u", k) < 0)
                (*names)[k] = NULL;
        *n = nlabels;
        return 0;
    }
    f = fopen(spec, "r");
    if (!f) {
        pack_warn("--class-names %s: not a preset (fashion-mnist, mnist) and "
                  "cannot open it as a file: %s", spec, strerror(errno));
        return -1;
    }
    while ((len = getline(&line, &cap, f)) != -1) {
        char **p;

        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (*n >= 65536 || !(p = realloc(*names, (*n + 1) * sizeof(char *))))
            break;
        *names = p;
        (*names)[(*n)++] = strdup(line);
    }
    free(line);
    fclose(f);
    return 0;
}

static void free_names(char **names, uint32_t n)
{
    for (uint32_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

static int parse_args(int argc, char **argv, struct idx_opts *o)
{
    static const struct option longopts[] = {
        {"images", required_argument, NULL, 'i'},
        {"labels", required_argument, NULL, 'l'},
        {"codec", required_argument, NULL, 'c'},
        {"level", required_argument, NULL, 'L'},
        {"dict", no_argument, NULL, 'd'},
        {"shard-size", required_argument, NULL, 's'},
        {"class-names", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, level_set = 0;

    *o = (struct idx_opts){.codec = DATASET_CODEC_ZSTD,
                           .level = DATASET_WRITER_ZSTD_LEVEL};
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        int r;

        switch (c) {
        case 'i': o->images = optarg; break;
        case 'l': o->labels = optarg; break;
        case 'd': o->dict = 1; break;
        case 'n': o->class_spec = optarg; break;
        case 'c':
            r = codec_parse(optarg, strlen(optarg));
            if (r < 0)
                return pack_usage_error("idx", "--codec: '%s' is not a codec "
                                        "(zstd or none)", optarg);
            o->codec = (unsigned)r;
            break;
        case 'L':
            if (pack_parse_int(optarg, -7, 22, &o->level) < 0 ||
                o->level == 0)
                return pack_usage_error("idx", "--level: '%s' is not a zstd "
                                        "level (1 to 22, or -7 to -1)",
                                        optarg);
            level_set = 1;
            break;
        case 's':
            if (pack_parse_size(optarg, &o->shard_bytes) < 0 ||
                o->shard_bytes < 4096)
                return pack_usage_error("idx", "--shard-size: '%s' is not a "
                                        "size of at least 4096 bytes (e.g. "
                                        "256M)", optarg);
            break;
        case 'h':
            fputs(usage_text, stdout);
            return -1;
        case ':':
            return pack_usage_error("idx", "%s needs a value",
                                    argv[optind - 1]);
        default:
            return pack_usage_error("idx", "unknown option '%s'",
                                    argv[optind - 1]);
        }
    }
    if (!o->images)
        return pack_usage_error("idx", "--images FILE is required");
    if (!o->labels)
        return pack_usage_error("idx", "--labels FILE is required");
    if (optind >= argc)
        return pack_usage_error("idx", "OUT_DIR is required");
    if (optind + 1 < argc)
        return pack_usage_error("idx", "one OUT_DIR expected, also got '%s'",
                                argv[optind + 1]);
    o->out = argv[optind];
    if (o->dict && o->codec != DATASET_CODEC_ZSTD)
        return pack_usage_error("idx", "--dict needs --codec zstd");
    if (level_set && o->codec != DATASET_CODEC_ZSTD)
        return pack_usage_error("idx", "--level applies to --codec zstd");
    return 0;
}

/* Trains the dictionary on images at an even stride over all of them. */
static int train(struct dataset_writer *w, const uint8_t *all,
                 const struct idx_header *h)
{
    uint64_t want = 100ull * DATASET_WRITER_DICT_BYTES / h->item_bytes;
    uint64_t n = want < h->count ? want : h->count;
    uint8_t *samples;
    size_t *sizes;
    struct rf_err err;
    double t0 = pack_now();
    int r = -1;

    if (n == 0)
        n = 1;
    samples = malloc(n * h->item_bytes);
    sizes = malloc(n * sizeof(*sizes));
    if (samples && sizes) {
        for (uint64_t k = 0; k < n; k++) {
            uint64_t i = k * h->count / n;

            memcpy(samples + k * h->item_bytes, all + i * h->item_bytes,
                   h->item_bytes);
            sizes[k] = h->item_bytes;
        }
        r = dataset_writer_train_dict(w, samples, sizes, n, 0, &err);
        if (r < 0)
            pack_warn("%s", err.msg);
        else
            fprintf(stderr, "dictionary trained on %" PRIu64 " images in "
                    "%.2f s\n", n, pack_now() - t0);
    } else {
        pack_warn("out of memory for dictionary samples");
    }
    free(samples);
    free(sizes);
    return r;
}

/* Gives the writer records [from, from + n) held in buf. */
static int add_records(struct dataset_writer *w, struct progress *p,
                       uint8_t *buf, const struct idx_header *h,
                       const uint8_t *labels, uint64_t from, uint64_t n)
{
    struct rf_err err;

    idx_to_le(buf, n * h->item_bytes / h->elem, h->elem);
    for (uint64_t k = 0; k < n && !pack_stop; k++) {
        if (dataset_writer_add(w, buf + k * h->item_bytes, h->item_bytes,
                               labels[from + k], &err) < 0) {
            pack_warn("record %" PRIu64 ": %s", from + k, err.msg);
            return -1;
        }
        progress_update(p, from + k + 1, (from + k + 1) * h->item_bytes);
    }
    return 0;
}

int pack_idx_main(int argc, char **argv)
{
    struct idx_opts o;
    struct idx_file img = {0}, lab = {0};
    struct dataset_writer_opts wo = {.kind = DATASET_TENSOR};
    struct dataset_writer *w = NULL;
    struct dataset_writer_stats st;
    struct progress prog;
    struct rf_err err;
    uint8_t *labels = NULL, *buf = NULL;
    char **names = NULL;
    uint32_t nnames = 0, max_label = 0;
    uint64_t chunk;
    double t0 = pack_now();
    int r, rc = PACK_EXIT_FAIL;
    char codec_desc[64];

    r = parse_args(argc, argv, &o);
    if (r)
        return r < 0 ? PACK_EXIT_OK : r;
    pack_signals();
    if (idx_open(&lab, o.labels, "labels") < 0)
        goto out;
    if (lab.h.ndim != 1 || lab.h.dtype != DATASET_DTYPE_U8) {
        pack_warn("labels file %s: %u dims of %s, a labels file has 1 dim of "
                  "u8", o.labels, lab.h.ndim, dataset_dtype_name(lab.h.dtype));
        goto out;
    }
    labels = read_all(&lab, "labels");
    if (!labels || check_end(&lab, "labels") < 0)
        goto out;
    if (idx_open(&img, o.images, "images") < 0)
        goto out;
    if (img.h.ndim < 2) {
        pack_warn("images file %s: 1 dim: images need at least 2 (count, "
                  "then the image's dims)", o.images);
        goto out;
    }
    if (img.h.count != lab.h.count) {
        pack_warn("images file %s holds %" PRIu64 " images but labels file "
                  "%s holds %" PRIu64 " labels", o.images, img.h.count,
                  o.labels, lab.h.count);
        goto out;
    }
    if (img.h.count == 0) {
        pack_warn("images file %s holds no images", o.images);
        goto out;
    }
    for (uint64_t i = 0; i < lab.h.count; i++)
        if (labels[i] > max_label)
            max_label = labels[i];
    if (load_names(o.class_spec, max_label + 1, &names, &nnames) < 0)
        goto out;
    for (uint64_t i = 0; i < lab.h.count; i++)
        if (labels[i] >= nnames) {
            pack_warn("labels file %s: record %" PRIu64 " (byte %" PRIu64
                      ") has label %u, but there are %u class names", o.labels,
                      i, (uint64_t)lab.h.header_len + i, labels[i], nnames);
            goto out;
        }

    wo.dtype = img.h.dtype;
    if (img.h.ndim == 3) {
        wo.ndim = 3;
        wo.shape[0] = 1;
        wo.shape[1] = img.h.dims[1];
        wo.shape[2] = img.h.dims[2];
    } else {
        wo.ndim = img.h.ndim - 1;
        for (unsigned i = 1; i < img.h.ndim; i++)
            wo.shape[i - 1] = img.h.dims[i];
    }
    wo.codec = o.codec;
    wo.level = (int)o.level;
    wo.shard_bytes = o.shard_bytes;
    wo.classes = nnames;
    wo.class_names = (const char *const *)names;
    if (dataset_writer_create(o.out, &wo, &w, &err) < 0) {
        pack_warn("%s", err.msg);
        goto out;
    }

    progress_start(&prog, "packing", img.h.count);
    if (o.dict) {
        buf = read_all(&img, "images");
        if (!buf || train(w, buf, &img.h) < 0)
            goto out;
        if (add_records(w, &prog, buf, &img.h, labels, 0, img.h.count) < 0)
            goto out;
    } else {
        chunk = (1u << 20) / img.h.item_bytes;
        if (chunk == 0)
            chunk = 1;
        buf = malloc(chunk * img.h.item_bytes);
        if (!buf)
            goto out;
        for (uint64_t at = 0; at < img.h.count && !pack_stop; at += chunk) {
            uint64_t n = img.h.count - at < chunk ? img.h.count - at : chunk;
            const char *why;
            int64_t got = gz_read(&img, buf, n * img.h.item_bytes, &why);

            if (got < 0 || (uint64_t)got < n * img.h.item_bytes) {
                if (!pack_stop)
                    truncated(&img, "images", at + (got > 0 ? (uint64_t)got : 0)
                              / img.h.item_bytes, why);
                goto out;
            }
            if (add_records(w, &prog, buf, &img.h, labels, at, n) < 0)
                goto out;
        }
    }
    if (pack_stop)
        goto out;
    if (check_end(&img, "images") < 0)
        goto out;
    progress_end(&prog);
    snprintf(codec_desc, sizeof(codec_desc), "%s%s", codec_name(o.codec),
             o.dict ? " + dictionary" : "");
    r = dataset_writer_finish(w, &st, &err);
    w = NULL;
    if (r < 0) {
        pack_warn("%s", err.msg);
        goto out;
    }
    pack_summary(o.out, &st, codec_desc, pack_now() - t0);
    rc = PACK_EXIT_OK;
out:
    /* a signal that comes after the rename changes nothing */
    if (rc != PACK_EXIT_OK && pack_stop)
        rc = pack_interrupted(w);
    else
        dataset_writer_abort(w);
    idx_close(&img);
    idx_close(&lab);
    free(labels);
    free(buf);
    free_names(names, nnames);
    return rc;
}
