/*
 * pack_imagefolder.c - `ringfeed-pack imagefolder`: a tree of class folders
 * of images into a jpeg dataset, with the labels torchvision's ImageFolder
 * gives the same tree.
 *
 * torchvision's rules, followed here (datasets/folder.py):
 *   - classes: every folder directly under SRC_DIR (symlinks to folders
 *     too, hidden ones too), sorted by name; label = position in that list.
 *   - samples of a class: os.walk of its folder following symlinks, folders
 *     visited in sorted path order, files sorted by name within each, kept
 *     when their extension (any case) is one of .jpg .jpeg .png .ppm .bmp
 *     .pgm .tif .tiff .webp.  Files directly in SRC_DIR are not samples.
 * So sample i of the packed dataset is sample i of ImageFolder(SRC_DIR),
 * except for the files this packer skips, which it names.
 *
 * Formats (told from the bytes, never the name): JPEG files take the JPEG
 * path below, their records unchanged by what follows.  PNG, WebP, TIFF,
 * BMP and PPM/PGM files are decoded here, exactly as Pillow's
 * Image.open(f).convert("RGB") would decode them for torchvision
 * (image_decode.h has each format's rules and what it refuses); under
 * --max-side those larger than N are shrunk by the same box filter and
 * sizes as JPEGs (jpeg_shrink.h), and --as-is does not apply to them (it
 * is about JPEG bytes).  Then, by --image-mode (FFCV's write modes):
 *   raw    (the default) an RFPX record of their RGB pixels
 *          (proto/pixels.h), stored zstd-compressed: pixels exact;
 *   jpeg   a JPEG of those pixels at --quality (default 90), 4:2:0, with
 *          restart markers as every re-encoding here: smaller, lossy;
 *   smart  raw for images of at most --smart-pixels pixels (default 65536,
 *          256 x 256), jpeg above.
 * JPEG records stay codec none.  The MANIFEST counts the RFPX records
 * (raw_images) so that an older reader refuses the pack, and the summary
 * counts both kinds by source format.
 *
 * Where ringfeed differs, and why:
 *   - a file with an image extension whose content is none of the formats
 *     above, a JPEG whose header does not parse, a file of another format
 *     that does not decode or that image_decode.h refuses (16-bit TIFF,
 *     CMYK, animated WebP, ...), and a file that cannot be read (a dangling
 *     symlink, a FIFO, no permission) is reported with the reason and
 *     skipped, where torchvision would fail or convert it.  --strict makes
 *     any of them fail the pack instead.
 *   - An empty class (no image packed) is kept, with a warning, so labels
 *     still match torchvision's class list; torchvision's ImageFolder
 *     refuses such a tree (allow_empty=False), and so does --strict.
 *   - A folder that loops back (a link to `.`, `..`, SRC_DIR or any folder
 *     above it) is reported and not entered.  os.walk(followlinks=True)
 *     would walk it until paths grow too long, exponentially with two such
 *     links, and would file the images above it under this class.  Loops
 *     are found by (st_dev, st_ino): the scan keeps those of SRC_DIR and of
 *     every folder on the path from it to the folder being listed.  Links
 *     that lead elsewhere, out of the tree too, are followed, as often as
 *     they are met, as torchvision does.
 * The scan checks pack_stop between entries, so SIGINT/SIGTERM end it at
 * once, before anything is written; its warnings are capped (the first
 * SCAN_WARN_MAX in full, then a count).
 * Records (codec none: JPEG is already compressed) are by default the
 * files re-encoded losslessly with restart markers (jpeg_restart.h): the
 * same DCT coefficients, so the same pixels, in one baseline scan with a
 * restart marker every 1..4 MCUs, so that a worker entropy-decodes only
 * the part of an image its crop covers; EXIF and ICC markers are not kept.
 * The MANIFEST records "jpeg_restart lossless".  For each file whose
 * header parses:
 *   - YCbCr or grayscale, and it decodes: stored re-encoded;
 *   - CMYK, YCCK, RGB or another colour space; progressive with
 *     coefficient bits its scans never send; too large for the
 *     re-encoder's 2 GiB; not writable as one scan: stored as it is, and
 *     counted by reason in the summary (no warning: nothing is wrong);
 *   - its data does not decode (corrupt, truncated, a libjpeg warning,
 *     over 100 scans): stored as it is, with a warning, as it was before
 *     the re-encoding existed, so the packer never turns a file whose data
 *     the daemon finds corrupt into one it serves, and sample i is the
 *     same file in every pack of the tree.  The re-encoder reads to the
 *     end of the file and the daemon stops after the last row, so a file
 *     damaged only past its last row is still served.  --strict fails the
 *     pack instead;
 *   - out of memory: stored as it is, with a warning.
 * --as-is stores every file byte for byte, nothing decoded (what packs
 * were before the re-encoding), and writes no jpeg_restart key.
 *
 * --max-side N (FFCV's max_resolution): an image whose longer side exceeds
 * N pixels is decoded, box-downscaled to a longer side of exactly N and
 * encoded again at --quality (default 90), 4:2:0, with restart markers by
 * the same rule (jpeg_shrink.h has the filter and the choices: gray stays
 * gray, CMYK becomes RGB as ringfeedd would convert it).  The MANIFEST
 * records "max_side N" and "max_side_quality Q".  --as-is with it is
 * refused (it would store the larger images shrunk, not as they are).  For
 * each file:
 *   - not readable, or its header does not parse: skipped, as without
 *     --max-side (--strict: the pack fails);
 *   - longer side at most N: re-encoded losslessly, as without it (above);
 *   - larger, and it decodes: stored re-encoded;
 *   - larger, but its data does not decode (corrupt, truncated, a libjpeg
 *     warning, over 100 scans, an unsupported colour space): stored as it
 *     is, with a warning, because that is what happens to it without
 *     --max-side (its header parses), and ringfeedd counts it as a bad
 *     sample either way: the packer never turns a file whose data the
 *     daemon finds corrupt into one it serves, and sample i is the same
 *     file in a pack with and without --max-side.  (A sound picture over
 *     the daemon's pixel-cap is another matter: shrinking it is what
 *     --max-side is for.)  --strict fails the pack instead;
 *   - larger, and too big to decode within libjpeg's memory limit, or out
 *     of memory: skipped with the reason, as an unreadable file is
 *     (--strict: the pack fails).
 * The summary says how many were re-encoded each way and how many stored
 * as they are (by reason), the bytes of the packed images' sources against
 * the bytes stored, and the CPU seconds each re-encoding took.
 *
 * --jobs N (-j N): N threads read, check and re-encode files at once
 * (pack_jobs.h runs them, imagefile.h is the work on one file), each with
 * its own restarter and shrinker; only the main thread prints, counts and
 * writes, taking the files' verdicts strictly in scan order.  So sample i
 * is file i, and the dataset's bytes, the warnings and their order, the
 * file --strict stops at (the first bad one in scan order; nothing is
 * written) and the summary's counts are those of --jobs 1, for every N.
 * The re-encoding is the cost (about 1.7 ms a 450x450 photograph on one
 * core), and the threads share nothing while they re-encode, so N of them
 * run about N times as fast, up to the CPUs: on a 2-CPU machine
 * bench/pack-jobs packed bench/make-photos' 2000 photographs in 1.84 s
 * with --jobs 2 against 3.58 s with --jobs 1 (best of two runs each),
 * for the same CPU seconds.
 * Memory: at most 4N files are in flight (being read or re-encoded, or
 * done and waiting for the files before them to be written), each holding
 * its bytes and its record, so the window, not the tree, bounds it: a
 * thread waits rather than run ahead of it.  Add each thread's libjpeg
 * memory for the image it is on (JPAIR_MEM_MAX at most).  The default is the CPUs this
 * process may use (pack_jobs_cpus: its affinity, lowered to a cgroup v2
 * cpu.max quota); 1 runs
 * every file in the main thread and starts no thread.  The threads read
 * their files too: reading and checking is about 15 us a file from the
 * page cache (1% of a re-encoding), but from a cold disk one reader got
 * through bench/make-photos' 2000 photographs in 0.34-0.42 s, two in
 * 0.19-0.20 s, four in 0.14-0.16 s (--as-is): a single reading thread
 * would cap the pack at about ten cores there, N readers do not.
 * SIGINT/SIGTERM (pack_stop) stop the packing before the next file is
 * taken; the threads finish the file each is on, and no dataset is left.
 * The summary's "jobs" line gives the threads, the CPU seconds their files
 * took (read, check, re-encode; summed over the threads, so about N times
 * the wall time when all are busy), the wall time of the packing, and the
 * ratio of the two: the CPUs kept busy on average.  The per-re-encoding
 * times ("max-side", "restart") are CPU seconds summed over threads too.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset_writer.h"
#include "imagefile.h"
#include "manifest.h"
#include "pack.h"
#include "pack_jobs.h"
#include "pixels.h"

#define MAX_DEPTH 32
#define SCAN_WARN_MAX 20      /* scan warnings shown; the rest are counted */

static const char usage_text[] =
    "usage: ringfeed-pack imagefolder SRC_DIR OUT_DIR [options]\n"
    "\n"
    "Packs a tree of class folders of images (SRC_DIR/<class>/**/<image>)\n"
    "into a jpeg dataset at OUT_DIR (which must not exist), with the class\n"
    "order and labels of torchvision's ImageFolder.  JPEGs are re-encoded\n"
    "losslessly (the same pixels) as baseline with restart markers, which\n"
    "lets ringfeedd decode only the part a crop covers; EXIF and ICC markers\n"
    "are dropped.  CMYK, RGB and files whose data does not decode are stored\n"
    "as they are.  PNG, WebP, TIFF, BMP and PPM/PGM files are stored as their\n"
    "RGB pixels, as Pillow's convert(\"RGB\") gives them.  Files whose content\n"
    "(not name) is none of these, that do not decode, whose kind is refused\n"
    "(16-bit TIFF, CMYK TIFF, animated WebP...) or that cannot be read are\n"
    "reported and skipped; empty classes are kept, with a warning, so labels\n"
    "match torchvision.\n"
    "\n"
    "  --shard-size BYTES   start a new shard past this size, K/M/G suffixes\n"
    "                       (default 256M)\n"
    "  --strict             fail on a file that is not a readable JPEG, whose\n"
    "                       data does not decode, and on an empty class,\n"
    "                       instead of skipping or storing it as it is\n"
    "  --no-sources         write no source list (sources.txt: each sample's\n"
    "                       file, relative to SRC_DIR, for loader.source(i))\n"
    "  --as-is              store every JPEG byte for byte: no re-encoding, no\n"
    "                       restart markers (not with --max-side)\n"
    "  --image-mode MODE    what PNG, WebP, TIFF, BMP and PPM/PGM files become:\n"
    "                       raw, their RGB pixels, exact (the default); jpeg, a\n"
    "                       JPEG of them at --quality (lossy, smaller); smart,\n"
    "                       raw up to --smart-pixels pixels and jpeg above.\n"
    "                       JPEG files are unchanged by it\n"
    "  --smart-pixels N     smart's threshold, in pixels (default 65536)\n"
    "  --raw-codec C        how pixel records are stored: zstd (default:\n"
    "                       smaller) or none (faster to serve small images)\n"
    "  --max-side N         re-encode images whose longer side exceeds N pixels\n"
    "                       (16..65535) to a longer side of N, aspect kept (box\n"
    "                       filter, JPEG 4:2:0); others losslessly, as above.\n"
    "                       Raw images are shrunk by the same filter\n"
    "                       The model then sees less detail: pack eval data the\n"
    "                       same way (ringfeed-pack(1))\n"
    "  --quality Q          JPEG quality of the images --max-side re-encodes\n"
    "                       and --image-mode jpeg/smart encodes, 1..100\n"
    "                       (default 90; only with one of them)\n"
    "  -j, --jobs N         read and re-encode N files at once, on N threads\n"
    "                       (1..1024; default: the CPUs this process may run\n"
    "                       on); the pack is the same for every N\n"
    "  --help               this text\n";

static const char *const img_ext[] = {
    ".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp",
};

struct item {
    char *path;
    uint32_t label;
};

/* A folder on the path being scanned: where it is, and its name. */
struct dir_id {
    dev_t dev;
    ino_t ino;
    const char *path;
};

struct scan {
    const char *src;
    char **classes;
    uint32_t nclasses;
    uint64_t *candidates;     /* per class */
    struct item *items;
    size_t nitems, cap;
    uint64_t ignored;         /* files without an image extension */
    uint64_t loops;           /* folders not entered: they loop back */
    uint64_t warnings;        /* scan warnings, shown or not */
    /* up[0] is SRC_DIR, up[1] the class folder, up[depth - 1] the folder
     * being listed; paths borrowed from collect_dirs' callers */
    struct dir_id up[MAX_DEPTH + 2];
    int depth;
    int failed;
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * A warning from the scan: the first SCAN_WARN_MAX go to stderr, the rest
 * are only counted (scan_tree says how many), so a pathological tree cannot
 * flood the log.
 */
__attribute__((format(printf, 2, 3)))
static void scan_warn(struct scan *s, const char *fmt, ...)
{
    char msg[8192];
    va_list ap;

    if (s->warnings++ >= SCAN_WARN_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    pack_warn("%s", msg);
}

/* path as messages name it: relative to SRC_DIR, or as given when outside. */
static const char *rel_path(const struct scan *s, const char *path)
{
    size_t n = strlen(s->src);

    if (strncmp(path, s->src, n) == 0 && path[n] == '/')
        return path + n + 1;
    return path;
}

static int has_img_ext(const char *name)
{
    size_t n = strlen(name);

    for (size_t i = 0; i < sizeof(img_ext) / sizeof(img_ext[0]); i++) {
        size_t e = strlen(img_ext[i]);

        if (n >= e && strcasecmp(name + n - e, img_ext[i]) == 0)
            return 1;
    }
    return 0;
}

static char *join(const char *a, const char *b)
{
    char *p;

    return asprintf(&p, "%s/%s", a, b) < 0 ? NULL : p;
}

/*
 * Names in dir other than . and .., sorted bytewise; NULL on error.  Stops
 * early, with what it has, once pack_stop is set: callers check it.
 */
static char **list_dir(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char **v = NULL;
    size_t cap = 0;

    *n = 0;
    if (!d)
        return NULL;
    while (!pack_stop && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (*n == cap) {
            char **p = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));

            if (!p)
                break;
            v = p;
        }
        if ((v[*n] = strdup(de->d_name)) != NULL)
            (*n)++;
    }
    closedir(d);
    if (!v)
        v = calloc(1, sizeof(*v));
    if (v)
        qsort(v, *n, sizeof(*v), cmp_str);
    return v;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static int is_dir(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * Appends dir (st: its stat, links followed) and every folder below it,
 * following symlinks, to *dirs, which owns the copies.  A folder whose
 * (device, inode) is already on s->up, the path from SRC_DIR down, loops
 * back: it is counted in s->loops, reported, and not entered.  Returns 0,
 * or -1 when out of memory (s->failed set) or stopped by pack_stop.
 */
static int collect_dirs(struct scan *s, const char *dir, const struct stat *st,
                        char ***dirs, size_t *n, size_t *cap)
{
    char **names;
    size_t k;
    int rc = 0;

    for (int i = 0; i < s->depth; i++) {
        struct stat lst;

        if (s->up[i].dev != st->st_dev || s->up[i].ino != st->st_ino)
            continue;
        s->loops++;
        scan_warn(s, "skipped %s%s: loops back to %s%s",
                  lstat(dir, &lst) == 0 && S_ISLNK(lst.st_mode) ? "link " : "",
                  rel_path(s, dir), rel_path(s, s->up[i].path),
                  i == 0 ? " (SRC_DIR)" : "");
        return 0;
    }
    if (s->depth > MAX_DEPTH + 1) {
        scan_warn(s, "%s: more than %d folders deep: not descending further",
                  rel_path(s, dir), MAX_DEPTH);
        return 0;
    }
    if (*n == *cap) {
        char **p = realloc(*dirs, (*cap = *cap ? 2 * *cap : 16) * sizeof(**dirs));

        if (!p) {
            s->failed = 1;
            return -1;
        }
        *dirs = p;
    }
    (*dirs)[*n] = strdup(dir);
    if (!(*dirs)[*n]) {
        s->failed = 1;
        return -1;
    }
    (*n)++;
    names = list_dir(dir, &k);
    if (!names) {
        scan_warn(s, "%s: cannot list: %s", rel_path(s, dir), strerror(errno));
        return 0;
    }
    s->up[s->depth++] = (struct dir_id){st->st_dev, st->st_ino, dir};
    for (size_t i = 0; i < k && rc == 0; i++) {
        char *p = join(dir, names[i]);
        struct stat cst;

        if (pack_stop)
            rc = -1;
        else if (!p)
            s->failed = 1, rc = -1;
        else if (stat(p, &cst) == 0 && S_ISDIR(cst.st_mode))
            rc = collect_dirs(s, p, &cst, dirs, n, cap);
        free(p);
    }
    s->depth--;
    free_list(names, k);
    return pack_stop ? -1 : rc;
}

static int add_item(struct scan *s, char *path, uint32_t label)
{
    if (s->nitems == s->cap) {
        struct item *p = realloc(s->items,
                                 (s->cap = s->cap ? 2 * s->cap : 256) *
                                 sizeof(*p));

        if (!p)
            return -1;
        s->items = p;
    }
    s->items[s->nitems++] = (struct item){path, label};
    return 0;
}

/*
 * The class list and every candidate file, in torchvision's order.  Returns
 * 0, or -1 on a failure (reported) or once pack_stop is set.
 */
static int scan_tree(struct scan *s)
{
    struct stat st;
    char **top;
    size_t ntop;
    int rc;

    top = list_dir(s->src, &ntop);
    if (!top || stat(s->src, &st) < 0) {
        pack_warn("%s: cannot list: %s", s->src, strerror(errno));
        free_list(top, ntop);
        return -1;
    }
    s->up[0] = (struct dir_id){st.st_dev, st.st_ino, s->src};
    s->depth = 1;
    s->classes = calloc(ntop ? ntop : 1, sizeof(char *));
    s->candidates = calloc(ntop ? ntop : 1, sizeof(uint64_t));
    if (!s->classes || !s->candidates) {
        free_list(top, ntop);
        return -1;
    }
    for (size_t i = 0; i < ntop; i++) {
        char *p = join(s->src, top[i]);

        if (p && is_dir(p) && (s->classes[s->nclasses] = strdup(top[i])))
            s->nclasses++;
        free(p);
    }
    free_list(top, ntop);
    for (uint32_t c = 0; c < s->nclasses && !pack_stop && !s->failed; c++) {
        char *cdir = join(s->src, s->classes[c]), **dirs = NULL;
        size_t ndirs = 0, dcap = 0;

        if (!cdir) {
            s->failed = 1;
            break;
        }
        if (stat(cdir, &st) == 0 && S_ISDIR(st.st_mode))
            collect_dirs(s, cdir, &st, &dirs, &ndirs, &dcap);
        free(cdir);
        if (ndirs)
            qsort(dirs, ndirs, sizeof(*dirs), cmp_str);
        for (size_t d = 0; d < ndirs && !pack_stop; d++) {
            size_t k;
            char **names = list_dir(dirs[d], &k);

            for (size_t i = 0; names && i < k && !pack_stop; i++) {
                char *p = join(dirs[d], names[i]);

                if (!p || is_dir(p)) {
                    free(p);
                    continue;
                }
                if (!has_img_ext(names[i])) {
                    s->ignored++;
                    free(p);
                    continue;
                }
                if (add_item(s, p, c) < 0) {
                    free(p);
                    s->failed = 1;
                }
                s->candidates[c]++;
            }
            free_list(names, k);
        }
        free_list(dirs, ndirs);
    }
    rc = s->failed || pack_stop ? -1 : 0;
    if (s->warnings > SCAN_WARN_MAX)
        pack_warn("%" PRIu64 " more scan warnings not shown",
                  s->warnings - SCAN_WARN_MAX);
    return rc;
}

static void free_scan(struct scan *s)
{
    for (size_t i = 0; i < s->nitems; i++)
        free(s->items[i].path);
    free(s->items);
    free_list(s->classes, s->nclasses);
    free(s->candidates);
}

struct if_args {
    const char *src, *out;
    uint64_t shard_bytes;     /* 0: the default */
    int strict;
    struct imagefile_opts file; /* --max-side, --quality, --as-is */
    unsigned jobs;            /* --jobs: threads working on files */
    unsigned raw_codec;       /* --raw-codec: RFPX records' codec */
    int no_sources;           /* --no-sources: no source list */
};

static int parse_args(int argc, char **argv, struct if_args *a)
{
    static const struct option longopts[] = {
        {"shard-size", required_argument, NULL, 's'},
        {"strict", no_argument, NULL, 'S'},
        {"no-sources", no_argument, NULL, 'N'},
        {"as-is", no_argument, NULL, 'A'},
        {"max-side", required_argument, NULL, 'm'},
        {"quality", required_argument, NULL, 'q'},
        {"image-mode", required_argument, NULL, 'i'},
        {"smart-pixels", required_argument, NULL, 'P'},
        {"raw-codec", required_argument, NULL, 'C'},
        {"jobs", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *quality = NULL, *smart = NULL;
    long v;
    int c;

    *a = (struct if_args){.file.quality = IMAGEFILE_QUALITY_DEFAULT,
                          .file.smart_pixels = IMAGEFILE_SMART_PIXELS_DEFAULT,
                          .raw_codec = DATASET_CODEC_ZSTD,
                          .jobs = pack_jobs_cpus()};
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hj:", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (pack_parse_size(optarg, &a->shard_bytes) < 0 ||
                a->shard_bytes < 4096)
                return pack_usage_error("imagefolder", "--shard-size: '%s' is "
                                        "not a size of at least 4096 bytes "
                                        "(e.g. 256M)", optarg);
            break;
        case 'S':
            a->strict = 1;
            break;
        case 'N':
            a->no_sources = 1;
            break;
        case 'A':
            a->file.as_is = 1;
            break;
        case 'm':
            if (pack_parse_int(optarg, MANIFEST_MAX_SIDE_MIN,
                               MANIFEST_MAX_SIDE_MAX, &v) < 0)
                return pack_usage_error("imagefolder", "--max-side: '%s' is "
                                        "not a number of pixels from %u to %u",
                                        optarg, MANIFEST_MAX_SIDE_MIN,
                                        MANIFEST_MAX_SIDE_MAX);
            a->file.max_side = (uint32_t)v;
            break;
        case 'q':
            if (pack_parse_int(optarg, MANIFEST_QUALITY_MIN,
                               MANIFEST_QUALITY_MAX, &v) < 0)
                return pack_usage_error("imagefolder", "--quality: '%s' is "
                                        "not a JPEG quality from %u to %u",
                                        optarg, MANIFEST_QUALITY_MIN,
                                        MANIFEST_QUALITY_MAX);
            a->file.quality = (int)v;
            quality = optarg;
            break;
        case 'i':
            if (strcmp(optarg, "raw") == 0)
                a->file.mode = IMAGEFILE_RAW;
            else if (strcmp(optarg, "jpeg") == 0)
                a->file.mode = IMAGEFILE_JPEG;
            else if (strcmp(optarg, "smart") == 0)
                a->file.mode = IMAGEFILE_SMART;
            else
                return pack_usage_error("imagefolder", "--image-mode: '%s' "
                                        "is not a mode (raw: RGB pixels; "
                                        "jpeg: JPEGs at --quality; smart: "
                                        "raw up to --smart-pixels pixels)",
                                        optarg);
            break;
        case 'C':
            if (strcmp(optarg, "zstd") == 0)
                a->raw_codec = DATASET_CODEC_ZSTD;
            else if (strcmp(optarg, "none") == 0)
                a->raw_codec = DATASET_CODEC_NONE;
            else
                return pack_usage_error("imagefolder", "--raw-codec: '%s' is not "
                                        "zstd or none", optarg);
            break;
        case 'P':
            if (pack_parse_int(optarg, 1, (long)PX_SIDE_MAX * PX_SIDE_MAX, &v) < 0)
                return pack_usage_error("imagefolder", "--smart-pixels: '%s' "
                                        "is not a number of pixels from 1 to "
                                        "%lu", optarg,
                                        (unsigned long)PX_SIDE_MAX * PX_SIDE_MAX);
            a->file.smart_pixels = (uint64_t)v;
            smart = optarg;
            break;
        case 'j':
            if (pack_parse_int(optarg, 1, PACK_JOBS_MAX, &v) < 0)
                return pack_usage_error("imagefolder", "--jobs: '%s' is not "
                                        "a number of threads from 1 to %u",
                                        optarg, PACK_JOBS_MAX);
            a->jobs = (unsigned)v;
            break;
        case 'h':
            fputs(usage_text, stdout);
            return -1;
        case ':':
            return pack_usage_error("imagefolder", "%s needs a value",
                                    argv[optind - 1]);
        default:
            return pack_usage_error("imagefolder", "unknown option '%s'",
                                    argv[optind - 1]);
        }
    }
    if (a->file.as_is && a->file.max_side)
        return pack_usage_error("imagefolder", "--as-is and --max-side do not "
                                "go together: --max-side stores the larger "
                                "images shrunk and re-encoded, --as-is every "
                                "file byte for byte");
    if (quality && !a->file.max_side && a->file.mode == IMAGEFILE_RAW)
        return pack_usage_error("imagefolder", "--quality %s needs --max-side "
                                "or --image-mode jpeg or smart: it is the "
                                "quality of the images they encode (without "
                                "them, images are only re-encoded "
                                "losslessly)", quality);
    if (smart && a->file.mode != IMAGEFILE_SMART)
        return pack_usage_error("imagefolder", "--smart-pixels %s needs "
                                "--image-mode smart", smart);
    if (argc - optind != 2)
        return pack_usage_error("imagefolder", "SRC_DIR and OUT_DIR expected, "
                                "got %d argument%s", argc - optind,
                                argc - optind == 1 ? "" : "s");
    a->src = argv[optind];
    a->out = argv[optind + 1];
    return 0;
}

static double ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 0.0;
}

static void reencode_summary(const struct imagefile_opts *o,
                             const struct imagefile_tally *t,
                             uint64_t src_bytes, uint64_t stored)
{
    uint64_t kept = t->no_memory;
    const char *sep = " (";

    for (int k = RESTART_REENCODED + 1; k < RESTART_OUTCOME_COUNT; k++)
        kept += t->outcomes[k];
    if (o->max_side)
        printf("  max-side %u px, quality %d: %" PRIu64 " images re-encoded "
               "in %.2f CPU s, %" PRIu64 " that do not decode stored as "
               "they are\n", o->max_side, o->quality, t->shrunk,
               t->shrink_cpu, t->shrink_bad);
    printf("  restart  %" PRIu64 " images", t->outcomes[RESTART_REENCODED]);
    if (o->max_side)
        printf(" at most %u px", o->max_side);
    printf(" re-encoded losslessly with restart markers in %.2f CPU s, %"
           PRIu64 " stored as they are", t->restart_cpu, kept);
    for (int k = RESTART_REENCODED + 1; k < RESTART_OUTCOME_COUNT; k++)
        if (t->outcomes[k]) {
            printf("%s%" PRIu64 " %s", sep, t->outcomes[k],
                   restart_outcome_name(k));
            sep = ", ";
        }
    if (t->no_memory) {
        printf("%s%" PRIu64 " out of memory", sep, t->no_memory);
        sep = ", ";
    }
    printf("%s\n", sep[0] == ',' ? ")" : "");
    printf("  interval every 4 MCUs: %" PRIu64 " images, 3: %" PRIu64
           ", 2: %" PRIu64 ", 1: %" PRIu64 "\n", t->interval[4],
           t->interval[3], t->interval[2], t->interval[1]);
    printf("  sources  %" PRIu64 " bytes before, %" PRIu64 " bytes stored "
           "(%.2fx)", src_bytes, stored, ratio(stored, src_bytes));
    if (o->max_side)
        printf("; shrunk %" PRIu64 " -> %" PRIu64 " bytes (%.2fx)",
               t->shrunk_src, t->shrunk_out,
               ratio(t->shrunk_out, t->shrunk_src));
    printf("; re-encoded losslessly %" PRIu64 " -> %" PRIu64 " bytes "
           "(%.2fx)\n", t->lossless_src, t->lossless_out,
           ratio(t->lossless_out, t->lossless_src));
}

/* The records stored as RGB pixels (RFPX), by source format. */
static void raw_summary(const struct imagefile_opts *o,
                        const struct imagefile_tally *t)
{
    uint64_t all = 0;
    const char *sep = " (";

    for (unsigned k = 0; k < IMGDEC_FORMAT_COUNT; k++)
        all += t->raw[k];
    printf("  raw      %" PRIu64 " images stored as RGB pixels", all);
    for (unsigned k = 0; k < IMGDEC_FORMAT_COUNT; k++)
        if (t->raw[k]) {
            printf("%s%s %" PRIu64, sep, imgdec_format_name(k), t->raw[k]);
            sep = ", ";
        }
    printf("%s", sep[0] == ',' ? ")" : "");
    if (o->max_side)
        printf(", %" PRIu64 " shrunk to %u px", t->raw_shrunk, o->max_side);
    printf(", decoded in %.2f CPU s\n", t->raw_cpu);
    all = 0;
    for (unsigned k = 0; k < IMGDEC_FORMAT_COUNT; k++)
        all += t->encoded[k];
    if (o->mode == IMAGEFILE_RAW)
        return;
    printf("  encoded  %" PRIu64 " images stored as JPEGs at quality %d", all, o->quality);
    sep = " (";
    for (unsigned k = 0; k < IMGDEC_FORMAT_COUNT; k++)
        if (t->encoded[k]) {
            printf("%s%s %" PRIu64, sep, imgdec_format_name(k), t->encoded[k]);
            sep = ", ";
        }
    printf("%s: %" PRIu64 " bytes of files -> %" PRIu64 " (%.2fx)\n",
           sep[0] == ',' ? ")" : "", t->encoded_src, t->encoded_out,
           ratio(t->encoded_out, t->encoded_src));
}

/*
 * The packing of the scanned files: the main thread's state, and what the
 * threads share with it.  While pack_jobs runs, the threads only read a,
 * s and coders[their number], and write slots[the slot they were given];
 * everything else is the main thread's.
 */
struct if_pack {
    const struct if_args *a;
    const struct scan *s;
    size_t skip;                  /* SRC_DIR's length + 1, for messages */
    struct imagefile *slots;      /* pack_jobs' window */
    struct imagefile_coders *coders;  /* one per thread */
    unsigned threads;
    struct dataset_writer *w;
    struct progress prog;
    struct imagefile_tally tally; /* the files taken so far, summed */
    uint64_t *packed;             /* records per class */
    uint64_t raw_images;          /* RFPX records written: the MANIFEST's
                                     raw_images */
    uint32_t shape_h, shape_w;    /* every stored image's size, while they agree */
    int shape_mixed;              /* two differ, or one's is unknown: no
                                     image_shape in the MANIFEST */
    uint64_t skipped, bytes, src_bytes;
    double seconds;               /* wall time of pack_files */
};

/* pack_job_fn: file index, on any thread. */
static void run_file(void *ctx, unsigned thread, size_t slot, size_t index)
{
    struct if_pack *p = ctx;

    imagefile_run(&p->slots[slot], p->s->items[index].path, &p->a->file,
                  &p->coders[thread]);
}

/*
 * What file i's verdict f means, in scan order: its warning, its record
 * written, its counts.  Returns 0 to go on, or -1 when the pack fails
 * (said why).
 */
static int take_file(struct if_pack *p, size_t i, const struct imagefile *f)
{
    const struct item *it = &p->s->items[i];
    const char *path = it->path + p->skip;
    struct rf_err err;

    imagefile_tally_add(&p->tally, &f->tally);
    if (f->verdict == IMAGEFILE_FAIL) {
        progress_end(&p->prog);
        pack_warn("%s: %s", path, f->why);
        return -1;
    }
    if (f->verdict == IMAGEFILE_SKIP ||
        (f->note.why && f->note.strict_stops && p->a->strict)) {
        progress_end(&p->prog);
        if (p->a->strict) {
            pack_warn("%s: %s (--strict: stopping)", path,
                      f->verdict == IMAGEFILE_SKIP ? f->why : f->note.why);
            return -1;
        }
        pack_warn("skipped %s: %s", path, f->why);
        p->skipped++;
        return 0;
    }
    if (f->note.why) {
        progress_end(&p->prog);
        pack_warn("%s: %s: %s", path, f->note.why, f->note.then);
    }
    /* JPEGs as they are; pixels (RFPX) by --raw-codec */
    if (dataset_writer_add_codec(p->w, f->rec, f->rec_len, it->label,
                                 f->raw ? p->a->raw_codec : DATASET_CODEC_NONE,
                                 &err) < 0) {
        progress_end(&p->prog);
        pack_warn("%s: %s", path, err.msg);
        return -1;
    }
    /* the source list: this record's path relative to SRC_DIR, as
     * ImageFolder's samples[i][0] is relative to its root */
    if (!p->a->no_sources &&
        dataset_writer_add_source(p->w, path, strlen(path), &err) < 0) {
        progress_end(&p->prog);
        pack_warn("%s: %s (--no-sources packs without a source list)", path,
                  err.msg);
        return -1;
    }
    p->packed[it->label]++;
    if (f->raw)
        p->raw_images++;
    if (!f->width || (p->shape_w && (f->width != p->shape_w || f->height != p->shape_h)))
        p->shape_mixed = 1;
    p->shape_w = f->width;
    p->shape_h = f->height;
    p->src_bytes += f->src_len;
    p->bytes += f->rec_len;
    progress_update(&p->prog, i + 1, p->bytes);
    return 0;
}

/*
 * Every scanned file, run on p->threads threads and taken in scan order.
 * Returns 0, or -1 when the pack fails (said why) or pack_stop is set.
 */
static int pack_files(struct if_pack *p)
{
    struct pack_jobs_opts jo = {.threads = p->threads,
                                .total = p->s->nitems, .run = run_file,
                                .ctx = p};
    struct pack_jobs *jobs;
    double t0 = pack_now();
    long slot;
    size_t i = 0;
    int r = pack_jobs_start(&jo, &jobs);

    if (r < 0) {
        pack_warn("cannot start %u threads (--jobs): %s", p->threads,
                  strerror(-r));
        return -1;
    }
    progress_start(&p->prog, "packing", p->s->nitems);
    while (r == 0 && (slot = pack_jobs_next(jobs)) >= 0) {
        r = take_file(p, i++, &p->slots[slot]);
        imagefile_trim(&p->slots[slot]);
        pack_jobs_done(jobs);
    }
    pack_jobs_free(jobs);
    p->seconds = pack_now() - t0;
    progress_end(&p->prog); /* (before the warning of a stop or a failure) */
    return r < 0 || pack_stop ? -1 : 0;
}

/* The threads, their coders and the window's slots for n files.  Returns
 * 0, or -1 (said why); free_workers frees what it made either way. */
static int make_workers(struct if_pack *p, size_t n)
{
    struct pack_jobs_opts jo;

    p->threads = p->a->jobs;
    if (p->threads > n)       /* no thread without a file */
        p->threads = n ? (unsigned)n : 1;
    jo = (struct pack_jobs_opts){.threads = p->threads, .total = n};
    p->slots = calloc(pack_jobs_window(&jo), sizeof(*p->slots));
    p->coders = calloc(p->threads, sizeof(*p->coders));
    if (!p->slots || !p->coders) {
        pack_warn("out of memory for %u threads' buffers", p->threads);
        return -1;
    }
    for (unsigned t = 0; t < p->threads; t++)
        if (imagefile_coders_init(&p->coders[t], &p->a->file) < 0) {
            pack_warn("out of memory for the JPEG decoder and encoder");
            return -1;
        }
    return 0;
}

static void free_workers(struct if_pack *p, size_t n)
{
    struct pack_jobs_opts jo = {.threads = p->threads, .total = n};

    for (size_t k = 0; p->slots && k < pack_jobs_window(&jo); k++)
        imagefile_fini(&p->slots[k]);
    for (unsigned t = 0; p->coders && t < p->threads; t++)
        imagefile_coders_fini(&p->coders[t]);
    free(p->slots);
    free(p->coders);
}

static void jobs_summary(const struct if_pack *p)
{
    printf("  jobs     %u thread%s: files read and %s in %.2f CPU s over "
           "%.2f s (%.2f CPUs busy)\n", p->threads, p->threads == 1 ? "" : "s",
           p->a->file.as_is ? "checked" : "re-encoded", p->tally.cpu,
           p->seconds, p->seconds > 0 ? p->tally.cpu / p->seconds : 0.0);
}

int pack_imagefolder_main(int argc, char **argv)
{
    struct scan s = {0};
    struct if_args a;
    struct if_pack p = {.a = &a, .s = &s};
    struct dataset_writer_opts wo = {.kind = DATASET_JPEG,
                                     .codec = DATASET_CODEC_NONE};
    struct dataset_writer_stats st;
    struct rf_err err;
    uint64_t empty = 0;
    double t0 = pack_now();
    int r, rc = PACK_EXIT_FAIL;

    r = parse_args(argc, argv, &a);
    if (r)
        return r < 0 ? PACK_EXIT_OK : r;
    s.src = a.src;
    wo.shard_bytes = a.shard_bytes;
    if (a.file.max_side) {
        wo.max_side = a.file.max_side;
        wo.max_side_quality = (uint32_t)a.file.quality;
    }
    wo.jpeg_restart = a.file.as_is ? DATASET_JPEG_AS_IS
                                   : DATASET_JPEG_RESTART_LOSSLESS;
    pack_signals();
    if (!is_dir(s.src)) {
        pack_warn("%s: not a folder", s.src);
        return PACK_EXIT_FAIL;
    }
    p.skip = strlen(s.src) + 1; /* paths in messages: relative to SRC_DIR */
    if (scan_tree(&s) < 0) {
        if (pack_stop)
            pack_warn("stopped while scanning %s: nothing written",
                      s.src);
        goto out;
    }
    if (s.nclasses == 0) {
        pack_warn("%s: no class folders in it (expected SRC_DIR/<class>/"
                  "<image>.jpg)", s.src);
        goto out;
    }
    fprintf(stderr, "found %zu image files in %u classes (%" PRIu64 " other "
            "files ignored, %" PRIu64 " looping folder links skipped)\n",
            s.nitems, s.nclasses, s.ignored, s.loops);
    for (uint32_t c = 0; a.strict && c < s.nclasses; c++)
        if (s.candidates[c] == 0) {
            pack_warn("class '%s' (label %u) has no images: --strict refuses "
                      "empty classes, as torchvision's ImageFolder does",
                      s.classes[c], c);
            goto out;
        }
    p.packed = calloc(s.nclasses, sizeof(*p.packed));
    if (!p.packed || make_workers(&p, s.nitems) < 0)
        goto out;
    wo.classes = s.nclasses;
    wo.class_names = (const char *const *)s.classes;
    if (dataset_writer_create(a.out, &wo, &p.w, &err) < 0) {
        pack_warn("%s", err.msg);
        goto out;
    }
    if (pack_files(&p) < 0)
        goto out;
    dataset_writer_get_stats(p.w, &st);
    if (st.records == 0) {
        pack_warn("%s: no image to pack (%" PRIu64 " files skipped)",
                  s.src, p.skipped);
        goto out;
    }
    for (uint32_t c = 0; c < s.nclasses; c++)
        if (p.packed[c] == 0) {
            pack_warn("class '%s' (label %u) has no images: kept, so labels "
                      "match torchvision's class list", s.classes[c], c);
            empty++;
        }
    r = dataset_writer_set_raw_images(p.w, p.raw_images, &err);
    /* images all of one size: transform none can deliver them as they are */
    if (r == 0 && !p.shape_mixed && p.shape_w)
        r = dataset_writer_set_image_shape(p.w, p.shape_h, p.shape_w, &err);
    if (r < 0) {
        pack_warn("%s", err.msg);
        goto out;
    }
    r = dataset_writer_finish(p.w, &st, &err);
    p.w = NULL;
    if (r < 0) {
        pack_warn("%s", err.msg);
        goto out;
    }
    pack_summary(a.out, &st, a.file.as_is ? "none (JPEG as is)" :
                 a.file.max_side ? "none (JPEG with restart markers: shrunk "
                 "by --max-side or re-encoded losslessly)" : "none (JPEG "
                 "re-encoded losslessly with restart markers)",
                 pack_now() - t0);
    jobs_summary(&p);
    if (!a.file.as_is)
        reencode_summary(&a.file, &p.tally, p.src_bytes, st.stored_bytes);
    raw_summary(&a.file, &p.tally);
    printf("  classes  %u (%" PRIu64 " empty)\n", s.nclasses, empty);
    printf("  skipped  %" PRIu64 " files (not an image, not decodable or "
           "refused, or unreadable%s)\n",
           p.skipped, a.file.max_side ? ", or too large to decode" : "");
    printf("  ignored  %" PRIu64 " files without an image extension\n",
           s.ignored);
    printf("  loops    %" PRIu64 " folder links skipped (they lead back to a "
           "folder above them)\n", s.loops);
    rc = PACK_EXIT_OK;
out:
    /* a signal that comes after the rename changes nothing */
    if (rc != PACK_EXIT_OK && pack_stop)
        rc = pack_interrupted(p.w);
    else
        dataset_writer_abort(p.w);
    free_workers(&p, s.nitems);
    free(p.packed);
    free_scan(&s);
    return rc;
}
