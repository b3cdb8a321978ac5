/*
 * pack_tokens.c - `ringfeed-pack tokens`: token files (nanoGPT .bin, NumPy
 * .npy, Megatron-LM .bin/.idx pairs) into a token dataset: a kind-fields
 * pack whose schema is one ragged integer field `tokens` (u16 or i32), one
 * record a document, documents in input order, records stored as they are
 * (codec none), so the workers' `tokens` transform reads a window's pieces
 * straight into a ring slot (docs/design/tokens.md).
 *
 * Each input is mapped read-only and walked once: its tokens are read in
 * their own width and byte order, range-checked against the pack's dtype,
 * and appended to the document being built; a document ends at the end of
 * its input, after each --eot token, or where a Megatron index's doc_idx
 * says.  Empty documents are left out (they hold no token of the stream)
 * and counted in the summary.  A document over a record's size, a value
 * outside the dtype, a float or bool .npy, a .bin of odd length, and any
 * fault of a Megatron index are refused naming the file and where.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec.h"
#include "dataset_writer.h"
#include "megatron_idx.h"
#include "npy.h"
#include "pack.h"

static const char usage_text[] =
    "usage: ringfeed-pack tokens --format bin|npy|megatron [options] INPUT... OUT_DIR\n"
    "\n"
    "Packs token files into a token dataset at OUT_DIR (which must not exist):\n"
    "one record a document, documents in the order of the inputs, a single\n"
    "ragged field `tokens`, stored uncompressed.  ATTACH transform=tokens\n"
    "context=L serves windows of L+1 tokens of the concatenated stream.\n"
    "\n"
    "  --format bin         nanoGPT's raw little-endian u16 tokens, no header:\n"
    "                       each file one document (or split by --eot)\n"
    "  --format npy         NumPy .npy of integers, 1 dim: each file one\n"
    "                       document (or split by --eot)\n"
    "  --format megatron    Megatron-LM indexed datasets: INPUT is a prefix P\n"
    "                       (or P.bin, P.idx) of a P.bin/P.idx pair; its\n"
    "                       documents are the index's (doc_idx)\n"
    "  --dtype u16|i32      the pack's token type (default: u16 when every\n"
    "                       input is 1- or 2-byte unsigned, else i32); every\n"
    "                       value is checked to fit\n"
    "  --eot ID             bin, npy: a document ends after each token ID\n"
    "                       (nanoGPT's prepare scripts append the\n"
    "                       end-of-text token to every document)\n"
    "  --shard-size BYTES   start a new shard past this size, K/M/G suffixes\n"
    "                       (default 256M)\n"
    "  --help               this text\n";

enum tok_format { FMT_BIN, FMT_NPY, FMT_MEGATRON };

static const char *const format_names[] = {"bin", "npy", "megatron"};

struct tok_opts {
    enum tok_format format;
    int format_set;
    enum dataset_dtype dtype;      /* NONE: chosen from the inputs */
    long long eot;                 /* -1: none */
    uint64_t shard_bytes;
    char **inputs;
    int ninputs;
    const char *out;
};

/* One input mapped: its bytes, and its tokens' place and type in them. */
struct tok_file {
    char path[4096];
    const uint8_t *map;
    uint64_t size;
    uint64_t data_off;             /* the first token's byte */
    uint64_t count;                /* tokens */
    uint32_t itemsize;
    int is_signed;
    int big_endian;
    /* megatron: the .idx, mapped, and its header */
    char idx_path[4096];
    const uint8_t *idx_map;
    uint64_t idx_size;
    struct megatron_idx idx;
};

/* The document being built and the figures so far. */
struct tok_emit {
    struct dataset_writer *w;
    enum dataset_dtype dtype;
    uint32_t out_size;
    int64_t max_value;
    uint64_t max_tokens;           /* a record's room, in tokens */
    uint8_t *rec;                  /* 4-byte length word, then the tokens */
    uint64_t rec_tokens;
    size_t rec_cap;
    uint64_t docs, empty, tokens;
};

static int parse_args(int argc, char **argv, struct tok_opts *o)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        {"dtype", required_argument, NULL, 't'},
        {"eot", required_argument, NULL, 'e'},
        {"shard-size", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    *o = (struct tok_opts){.eot = -1, .dtype = DATASET_DTYPE_NONE};
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        long v;

        switch (c) {
        case 'f':
            o->format_set = 0;
            for (unsigned i = 0; i < sizeof(format_names) / sizeof(format_names[0]); i++)
                if (strcmp(optarg, format_names[i]) == 0) {
                    o->format = (enum tok_format)i;
                    o->format_set = 1;
                }
            if (!o->format_set)
                return pack_usage_error("tokens", "--format: '%s' is not bin, npy or megatron",
                                        optarg);
            break;
        case 't':
            if (strcmp(optarg, "u16") == 0)
                o->dtype = DATASET_DTYPE_U16;
            else if (strcmp(optarg, "i32") == 0)
                o->dtype = DATASET_DTYPE_I32;
            else
                return pack_usage_error("tokens", "--dtype: '%s' is not u16 or i32 (i32 "
                                        "holds ids up to 2^31 - 1, as Megatron's int32)",
                                        optarg);
            break;
        case 'e':
            if (pack_parse_int(optarg, 0, INT32_MAX, &v) < 0)
                return pack_usage_error("tokens", "--eot: '%s' is not a token id (0 to "
                                        "2147483647)", optarg);
            o->eot = v;
            break;
        case 's':
            if (pack_parse_size(optarg, &o->shard_bytes) < 0 || o->shard_bytes < 4096)
                return pack_usage_error("tokens", "--shard-size: '%s' is not a size of at "
                                        "least 4096 bytes (e.g. 256M)", optarg);
            break;
        case 'h':
            fputs(usage_text, stdout);
            return -1;
        case ':':
            return pack_usage_error("tokens", "%s needs a value", argv[optind - 1]);
        default:
            return pack_usage_error("tokens", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (!o->format_set)
        return pack_usage_error("tokens", "--format bin|npy|megatron is required");
    if (argc - optind < 2)
        return pack_usage_error("tokens", "INPUT... and OUT_DIR are required");
    if (o->format == FMT_MEGATRON && o->eot >= 0)
        return pack_usage_error("tokens", "--eot is for bin and npy: a Megatron index gives "
                                "its documents");
    o->inputs = argv + optind;
    o->ninputs = argc - optind - 1;
    o->out = argv[argc - 1];
    return 0;
}

/* Maps path read-only; *size its bytes (an empty file maps to NULL). */
static int map_file(const char *path, const uint8_t **map, uint64_t *size)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    void *m = NULL;

    *map = NULL;
    *size = 0;
    if (fd == -1) {
        pack_warn("%s: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &sb) == -1 || !S_ISREG(sb.st_mode)) {
        pack_warn("%s: %s", path, fstat(fd, &sb) == -1 ? strerror(errno) : "not a file");
        close(fd);
        return -1;
    }
    if (sb.st_size > 0) {
        m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            pack_warn("%s: mmap: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        madvise(m, (size_t)sb.st_size, MADV_SEQUENTIAL);
    }
    close(fd);
    *map = m;
    *size = (uint64_t)sb.st_size;
    return 0;
}

static void unmap_file(struct tok_file *f)
{
    if (f->map)
        munmap((void *)f->map, f->size);
    if (f->idx_map)
        munmap((void *)f->idx_map, f->idx_size);
    f->map = f->idx_map = NULL;
}

/* nanoGPT .bin: raw u16 LE, a whole number of them. */
static int open_bin(struct tok_file *f)
{
    if (map_file(f->path, &f->map, &f->size) < 0)
        return -1;
    if (f->size % 2) {
        pack_warn("%s: %" PRIu64 " bytes, an odd length: a .bin holds 2-byte tokens (its "
                  "last byte is a cut token)", f->path, f->size);
        return -1;
    }
    f->itemsize = 2;
    f->count = f->size / 2;
    return 0;
}

/* .npy: 1 dim of integers. */
static int open_npy(struct tok_file *f)
{
    struct npy_header h;
    struct rf_err err;
    char type[8];

    if (map_file(f->path, &f->map, &f->size) < 0)
        return -1;
    if (npy_parse(f->map ? f->map : (const uint8_t *)"", (size_t)f->size, f->size, &h,
                  &err) < 0) {
        pack_warn("%s: %s", f->path, err.msg);
        return -1;
    }
    npy_type_name(&h, type, sizeof(type));
    if (h.kind != 'i' && h.kind != 'u') {
        pack_warn("%s: an array of %s: tokens are integers (u2, u4, i4, i8, ...)", f->path,
                  type);
        return -1;
    }
    if (h.ndim != 1) {
        pack_warn("%s: an array of %u dims: a token file has 1 (one document's tokens, or "
                  "documents split by --eot)", f->path, h.ndim);
        return -1;
    }
    f->data_off = h.data_off;
    f->count = h.count;
    f->itemsize = h.itemsize;
    f->is_signed = h.kind == 'i';
    f->big_endian = h.big_endian;
    return 0;
}

/* Megatron: PREFIX (or PREFIX.bin / PREFIX.idx) -> the pair, checked. */
static int open_megatron(struct tok_file *f, const char *arg)
{
    size_t n = strlen(arg);
    struct rf_err err;

    if (n > 4 && (strcmp(arg + n - 4, ".bin") == 0 || strcmp(arg + n - 4, ".idx") == 0))
        n -= 4;
    if (n + 5 > sizeof(f->path)) {
        pack_warn("%s: path too long", arg);
        return -1;
    }
    snprintf(f->path, sizeof(f->path), "%.*s.bin", (int)n, arg);
    snprintf(f->idx_path, sizeof(f->idx_path), "%.*s.idx", (int)n, arg);
    if (map_file(f->idx_path, &f->idx_map, &f->idx_size) < 0 ||
        map_file(f->path, &f->map, &f->size) < 0)
        return -1;
    if (megatron_idx_parse(f->idx_map ? f->idx_map : (const uint8_t *)"", (size_t)f->idx_size,
                           &f->idx, &err) < 0) {
        pack_warn("%s: %s", f->idx_path, err.msg);
        return -1;
    }
    if (!f->idx.is_integer) {
        pack_warn("%s: dtype code %u (%s): tokens are integers", f->idx_path, f->idx.code,
                  dataset_dtype_name(f->idx.dtype));
        return -1;
    }
    if (megatron_idx_check(f->idx_map, &f->idx, f->size, &err) < 0) {
        pack_warn("%s: %s", f->idx_path, err.msg);
        return -1;
    }
    f->itemsize = f->idx.itemsize;
    f->is_signed = f->idx.dtype != DATASET_DTYPE_U8 && f->idx.dtype != DATASET_DTYPE_U16;
    return 0;
}

/* Element k of f's tokens from byte `at` as an int64; 0, or -1 for a u64
 * value past INT64_MAX. */
static int token_at(const struct tok_file *f, uint64_t at, int64_t *v)
{
    const uint8_t *p = f->map + at;
    uint64_t u = 0;

    for (uint32_t i = 0; i < f->itemsize; i++)
        u |= (uint64_t)p[f->big_endian ? f->itemsize - 1 - i : i] << (8 * i);
    if (f->is_signed && f->itemsize < 8 && (u >> (8 * f->itemsize - 1)) & 1)
        u |= ~0ull << (8 * f->itemsize); /* sign-extend */
    if (!f->is_signed && u > (uint64_t)INT64_MAX)
        return -1;
    *v = (int64_t)u;
    return 0;
}

/* Ends the document being built: a record, or counted as empty. */
static int emit_end(struct tok_emit *e, const char *path)
{
    struct rf_err err;
    uint64_t bytes = e->rec_tokens * e->out_size;

    if (e->rec_tokens == 0) {
        e->empty++;
        return 0;
    }
    schema_record_put_len(e->rec, (uint32_t)bytes);
    if (dataset_writer_add_codec(e->w, e->rec, 4 + bytes, DATASET_NO_LABEL, DATASET_CODEC_NONE,
                                 &err) < 0) {
        pack_warn("%s: document %" PRIu64 ": %s", path, e->docs, err.msg);
        return -1;
    }
    e->docs++;
    e->tokens += e->rec_tokens;
    e->rec_tokens = 0;
    return 0;
}

/*
 * Appends f's count tokens from byte `at` to the document being built,
 * each checked to fit the pack's dtype; with eot >= 0 a document ends
 * after each eot token.  first: the index of the first in f's tokens, for
 * messages.
 */
static int emit_tokens(struct tok_emit *e, const struct tok_file *f, uint64_t at,
                       uint64_t count, uint64_t first, long long eot)
{
    for (uint64_t k = 0; k < count && !pack_stop; k++) {
        int64_t v = INT64_MAX;
        int over = token_at(f, at + k * f->itemsize, &v) < 0;
        uint8_t *p;

        if (over || v < 0 || v > e->max_value) {
            pack_warn("%s: token %" PRIu64 " (byte %" PRIu64 ") is %s%lld, outside the pack's "
                      "%s (0..%lld)%s", f->path, first + k, at + k * f->itemsize,
                      over ? "over " : "", (long long)v,
                      dataset_dtype_name(e->dtype), (long long)e->max_value,
                      e->dtype == DATASET_DTYPE_U16 ? ": use --dtype i32" : "");
            return -1;
        }
        if (e->rec_tokens == e->max_tokens) {
            pack_warn("%s: document %" PRIu64 " passes %" PRIu64 " tokens at token %" PRIu64
                      ": a record holds at most that many; end documents with --eot ID",
                      f->path, e->docs, e->max_tokens, first + k);
            return -1;
        }
        if (e->rec_cap < 4 + (e->rec_tokens + 1) * e->out_size) {
            size_t want = e->rec_cap ? e->rec_cap * 2 : 1 << 20;
            uint8_t *n = realloc(e->rec, want);

            if (!n) {
                pack_warn("%s: out of memory for a document of %" PRIu64 " tokens", f->path,
                          e->rec_tokens + 1);
                return -1;
            }
            e->rec = n;
            e->rec_cap = want;
        }
        p = e->rec + 4 + e->rec_tokens * e->out_size;
        if (e->out_size == 2) {
            p[0] = (uint8_t)v;
            p[1] = (uint8_t)(v >> 8);
        } else {
            for (int i = 0; i < 4; i++)
                p[i] = (uint8_t)(v >> (8 * i));
        }
        e->rec_tokens++;
        if (eot >= 0 && v == eot && emit_end(e, f->path) < 0)
            return -1;
    }
    return pack_stop ? -1 : 0;
}

/* All of f's documents into e. */
static int emit_file(struct tok_emit *e, const struct tok_file *f, long long eot)
{
    if (f->idx_path[0] == '\0') { /* bin, npy */
        if (emit_tokens(e, f, f->data_off, f->count, 0, eot) < 0)
            return -1;
        return emit_end(e, f->path);
    }
    for (uint64_t d = 0; d + 1 < f->idx.doc_entries; d++) {
        uint64_t s0 = (uint64_t)megatron_idx_doc(f->idx_map, &f->idx, d);
        uint64_t s1 = (uint64_t)megatron_idx_doc(f->idx_map, &f->idx, d + 1);

        for (uint64_t s = s0; s < s1; s++) {
            uint64_t at = (uint64_t)megatron_idx_pointer(f->idx_map, &f->idx, s);
            uint64_t n = (uint64_t)megatron_idx_size(f->idx_map, &f->idx, s);

            if (emit_tokens(e, f, at, n, at / f->itemsize, -1) < 0)
                return -1;
        }
        if (emit_end(e, f->path) < 0)
            return -1;
    }
    return 0;
}

int pack_tokens_main(int argc, char **argv)
{
    struct tok_opts o;
    struct tok_file *files = NULL;
    struct tok_emit e = {0};
    struct dataset_writer_opts wo = {.kind = DATASET_FIELDS, .codec = DATASET_CODEC_NONE};
    struct schema sc = {0};
    struct schema_field fld = {0};
    struct dataset_writer_stats st;
    struct rf_err err;
    double t0 = pack_now();
    int r, rc = PACK_EXIT_FAIL, wide = 0;

    r = parse_args(argc, argv, &o);
    if (r)
        return r < 0 ? PACK_EXIT_OK : r;
    pack_signals();
    files = calloc((size_t)o.ninputs, sizeof(*files));
    if (!files) {
        pack_warn("out of memory");
        return PACK_EXIT_FAIL;
    }
    for (int i = 0; i < o.ninputs; i++) {
        struct tok_file *f = &files[i];

        if (o.format != FMT_MEGATRON)
            snprintf(f->path, sizeof(f->path), "%s", o.inputs[i]);
        r = o.format == FMT_BIN ? open_bin(f) : o.format == FMT_NPY ? open_npy(f)
                                                                    : open_megatron(f, o.inputs[i]);
        if (r < 0)
            goto out;
        if (f->itemsize > 2 || f->is_signed)
            wide = 1;
    }
    e.dtype = o.dtype != DATASET_DTYPE_NONE ? o.dtype : wide ? DATASET_DTYPE_I32
                                                             : DATASET_DTYPE_U16;
    e.out_size = (uint32_t)dataset_dtype_size(e.dtype);
    e.max_value = e.dtype == DATASET_DTYPE_U16 ? UINT16_MAX : INT32_MAX;
    if (o.eot > e.max_value) {
        pack_warn("--eot %lld is outside the pack's %s", o.eot, dataset_dtype_name(e.dtype));
        goto out;
    }
    snprintf(fld.name, sizeof(fld.name), "tokens");
    fld.kind = SCHEMA_RAGGED;
    fld.dtype = e.dtype;
    fld.max_rows = DATASET_RECORD_MAX / e.out_size - 2; /* the MANIFEST gets the most written */
    e.max_tokens = fld.max_rows;
    if (schema_add(&sc, &fld, "", &err) < 0 || schema_check(&sc, &err) < 0) {
        pack_warn("%s", err.msg);
        goto out;
    }
    wo.schema = &sc;
    wo.shard_bytes = o.shard_bytes;
    if (dataset_writer_create(o.out, &wo, &e.w, &err) < 0) {
        pack_warn("%s", err.msg);
        goto out;
    }
    for (int i = 0; i < o.ninputs; i++) {
        if (emit_file(&e, &files[i], o.eot) < 0) {
            if (pack_stop) {
                rc = pack_interrupted(e.w);
                e.w = NULL;
            }
            goto out;
        }
        unmap_file(&files[i]);
    }
    if (e.docs == 0) {
        pack_warn("the inputs hold no tokens");
        goto out;
    }
    if (dataset_writer_finish(e.w, &st, &err) < 0) {
        e.w = NULL;
        pack_warn("%s", err.msg);
        goto out;
    }
    e.w = NULL;
    pack_summary(o.out, &st, "none", pack_now() - t0);
    printf("  tokens   %" PRIu64 " (%s) in %" PRIu64 " documents%s", e.tokens,
           dataset_dtype_name(e.dtype), e.docs, e.empty ? "" : "\n");
    if (e.empty)
        printf(", %" PRIu64 " empty left out\n", e.empty);
    rc = PACK_EXIT_OK;
out:
    dataset_writer_abort(e.w);
    if (files)
        for (int i = 0; i < o.ninputs; i++)
            unmap_file(&files[i]);
    free(files);
    free(e.rec);
    return rc;
}
