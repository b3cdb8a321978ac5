/*
 * tjdecode.c - the single-core libjpeg-turbo rates of a set of JPEGs: the
 * full decode, the ceiling bench/jpeg-loader holds ringfeed's workers
 * against (workers x this rate), and the entropy-only floor under it.
 *
 *   tjdecode [--mode MODE[,MODE...]] [--passes P] [--min-pass S] [--json]
 *            FILE...
 *
 * Reads every file into memory first, then, in one thread, runs the modes
 * asked for (default full,entropy; "both" says the same, "all" all three):
 *   full     tjDecompress2 decodes each file whole to packed RGB (flags 0:
 *            accurate integer IDCT and fancy upsampling, as the workers and
 *            Pillow decode);
 *   entropy  libjpeg's jpeg_read_coefficients over the whole file: markers
 *            and Huffman decoding into the DCT coefficient arrays, and
 *            nothing after (no dequantization, IDCT, upsampling or color
 *            conversion), the floor below which no CPU decoder of the whole
 *            file goes;
 *   skip     the same floor measured the way the workers skip rows:
 *            jpeg_start_decompress, then jpeg_skip_scanlines over all rows
 *            but the last (whole iMCU rows are Huffman decoded with their
 *            coefficients dropped: no whole-image arrays in a single-scan
 *            file), then the last row read (YCbCr out, no fancy
 *            upsampling: the last iMCU row is fully decoded, a few percent
 *            of the image, so this figure is a little slow).
 * Each mode decodes every file once as a warm-up (code, tables, caches, and
 * the check that every file decodes), then runs P passes (default 5), the
 * modes taking turns pass by pass and the one that goes first rotating, so
 * the drift of a shared machine hits them alike.  A pass decodes the files
 * in turn, the whole set again and again until at least S seconds (default
 * 0.2) have passed, so a small set still times well; its rate is images over
 * the pass's wall-clock time.  Printed per mode: the median of the passes'
 * rates (and their min and max) in images/s and megapixels/s, and the
 * thread's CPU time over the wall-clock time (below 100%: other work took
 * the core).  With --json one object, a key per mode run:
 *     {"files":f,"passes":p,
 *      "full":{"images_per_s":x,"min":a,"max":b,"mpixels_per_s":m,
 *              "cpu_share":c,"rates":[...]},
 *      "entropy":{...}}
 *
 * Caveats of the floor.  jpeg_read_coefficients keeps every coefficient of
 * the image (2 bytes each, 64 a block, in libjpeg's whole-image arrays,
 * zeroed, allocated and freed per image), where a single-scan full decode
 * keeps one row of blocks: in baseline files the entropy mode pays that
 * memory traffic and is slower than the Huffman decoding alone (the skip
 * mode says by how much).  A progressive file is decoded the same way by
 * every mode (all its scans into the whole-image arrays; the full decode
 * then runs the IDCT and color passes), so there the floor is exactly the
 * full decode's first part, and its refinement scans make it a larger share
 * of the full decode than a baseline file's.  ringfeed's workers can go
 * below this floor on one file: they stop entropy decoding after the last
 * row their crop needs (in single-scan files).
 *
 * Exit 0, 1 when a file does not decode, 2 for bad usage.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jpeglib.h>
#include <turbojpeg.h>

#define MAX_PASSES 100
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

struct img {
    const char *path;
    unsigned char *buf;
    unsigned long len;
    int w, h;
};

/* libjpeg's decompressor for the entropy and skip modes: error_exit and
 * any warning (corrupt data) longjmp back to the mode with the message. */
struct lj_dec {
    struct jpeg_decompress_struct ci;
    struct jpeg_error_mgr em;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
};

struct bench {
    struct img *imgs;
    int nfiles;
    tjhandle tj;
    struct lj_dec lj;
    unsigned char *out;  /* a whole RGB image of the largest file */
};

static double clock_of(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int load(const char *path, struct img *im)
{
    FILE *f = fopen(path, "rb");
    long n;

    if (!f)
        return -1;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return -1;
    }
    im->buf = malloc((size_t)n);
    if (!im->buf || fread(im->buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        return -1;
    }
    fclose(f);
    im->len = (unsigned long)n;
    return 0;
}

static void lj_error(j_common_ptr ci)
{
    struct lj_dec *d = ci->client_data;

    (*ci->err->format_message)(ci, d->msg);
    longjmp(d->jb, 1);
}

static void lj_message(j_common_ptr ci, int level)
{
    if (level < 0) /* a warning: corrupt data that libjpeg would go past */
        lj_error(ci);
}

/* Sets d up with the handlers above.  Returns 0, or -1 with the reason in
 * d->msg (jpeg_create_decompress fails only without memory). */
static int lj_init(struct lj_dec *d)
{
    d->ci.err = jpeg_std_error(&d->em);
    d->em.error_exit = lj_error;
    d->em.emit_message = lj_message;
    d->ci.client_data = d;
    if (setjmp(d->jb))
        return -1;
    jpeg_create_decompress(&d->ci);
    return 0;
}

/* Reads im's header into d->ci.  Returns 0, or -1 with the reason in
 * d->msg; a failure of libjpeg longjmps to the caller's setjmp. */
static int lj_header(struct lj_dec *d, const struct img *im)
{
    jpeg_mem_src(&d->ci, im->buf, im->len);
    if (jpeg_read_header(&d->ci, TRUE) != JPEG_HEADER_OK) {
        snprintf(d->msg, sizeof(d->msg), "no image in the file (tables only)");
        return -1;
    }
    return 0;
}

/* The modes: each decodes file i of b once.  Returns 0, or -1 with the
 * reason from error_of.  libjpeg's object is kept for the next image on
 * every path; nothing set between a setjmp and a longjmp is read after
 * it. */
static int full_decode(struct bench *b, int i)
{
    const struct img *im = &b->imgs[i];

    return tjDecompress2(b->tj, im->buf, im->len, b->out, im->w, 0, im->h, TJPF_RGB, 0) < 0
               ? -1
               : 0;
}

static int entropy_decode(struct bench *b, int i)
{
    struct lj_dec *d = &b->lj;

    if (setjmp(d->jb)) {
        jpeg_abort_decompress(&d->ci);
        return -1;
    }
    if (lj_header(d, &b->imgs[i]) < 0) {
        jpeg_abort_decompress(&d->ci);
        return -1;
    }
    if (!jpeg_read_coefficients(&d->ci)) {
        snprintf(d->msg, sizeof(d->msg), "coefficients not read (suspended)");
        jpeg_abort_decompress(&d->ci);
        return -1;
    }
    jpeg_finish_decompress(&d->ci); /* to EOI; frees the coefficient arrays */
    return 0;
}

static int skip_decode(struct bench *b, int i)
{
    struct lj_dec *d = &b->lj;
    JSAMPROW row = b->out;

    if (setjmp(d->jb)) {
        jpeg_abort_decompress(&d->ci);
        return -1;
    }
    if (lj_header(d, &b->imgs[i]) < 0) {
        jpeg_abort_decompress(&d->ci);
        return -1;
    }
    if (d->ci.jpeg_color_space == JCS_YCbCr)
        d->ci.out_color_space = JCS_YCbCr; /* no color conversion, no merged upsampler */
    d->ci.do_fancy_upsampling = FALSE;     /* no context rows: whole iMCU rows skipped */
    jpeg_start_decompress(&d->ci);
    if (d->ci.output_height > 1)
        jpeg_skip_scanlines(&d->ci, d->ci.output_height - 1);
    jpeg_read_scanlines(&d->ci, &row, 1);
    jpeg_abort_decompress(&d->ci); /* the rest of the file is the EOI marker */
    return 0;
}

static const char *full_error(struct bench *b)
{
    return tjGetErrorStr2(b->tj);
}

static const char *lj_reason(struct bench *b)
{
    return b->lj.msg;
}

static const struct mode {
    const char *name, *what;
    int (*decode)(struct bench *b, int i);
    const char *(*error_of)(struct bench *b);
} modes[] = {
    { "full", "decode (tjDecompress2, RGB)", full_decode, full_error },
    { "entropy", "only (jpeg_read_coefficients)", entropy_decode, lj_reason },
    { "skip", "only (jpeg_skip_scanlines)", skip_decode, lj_reason },
};

/* What one mode measured: a rate and a CPU share per pass. */
struct result {
    double rate[MAX_PASSES], mpix[MAX_PASSES], cpu[MAX_PASSES];
};

/* One pass of mode m, as the file-top comment says, into r's slot k. */
static void pass(struct bench *b, const struct mode *m, double min_s, struct result *r, int k)
{
    unsigned long long images = 0, pixels = 0;
    double t0 = clock_of(CLOCK_MONOTONIC), c0 = clock_of(CLOCK_THREAD_CPUTIME_ID), t;

    do {
        for (int i = 0; i < b->nfiles; i++) {
            m->decode(b, i); /* every file decoded in the warm-up */
            images++;
            pixels += (unsigned long long)b->imgs[i].w * b->imgs[i].h;
        }
        t = clock_of(CLOCK_MONOTONIC) - t0;
    } while (t < min_s);
    r->rate[k] = (double)images / t;
    r->mpix[k] = (double)pixels / t / 1e6;
    r->cpu[k] = (clock_of(CLOCK_THREAD_CPUTIME_ID) - c0) / t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The median of v[0..n), 1 <= n <= MAX_PASSES; v is left as it was. */
static double median(const double *v, int n)
{
    double s[MAX_PASSES];

    memcpy(s, v, (size_t)n * sizeof(*s));
    qsort(s, (size_t)n, sizeof(*s), cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double min_of(const double *v, int n)
{
    double x = v[0];

    for (int i = 1; i < n; i++)
        x = v[i] < x ? v[i] : x;
    return x;
}

static double max_of(const double *v, int n)
{
    double x = v[0];

    for (int i = 1; i < n; i++)
        x = v[i] > x ? v[i] : x;
    return x;
}

static void print_text(const struct mode *m, const struct result *r, int passes, int nfiles)
{
    printf("%-8s %-32s %8.1f images/s (passes %.1f..%.1f), %6.1f Mpixels/s, cpu %3.0f%% of "
           "wall; %d passes, %d files, one core\n",
           m->name, m->what, median(r->rate, passes), min_of(r->rate, passes),
           max_of(r->rate, passes), median(r->mpix, passes), 100 * median(r->cpu, passes),
           passes, nfiles);
}

static void print_json(const struct mode *m, const struct result *r, int passes)
{
    printf("\"%s\":{\"images_per_s\":%.2f,\"min\":%.2f,\"max\":%.2f,\"mpixels_per_s\":%.2f,"
           "\"cpu_share\":%.3f,\"rates\":[",
           m->name, median(r->rate, passes), min_of(r->rate, passes), max_of(r->rate, passes),
           median(r->mpix, passes), median(r->cpu, passes));
    for (int k = 0; k < passes; k++)
        printf("%s%.2f", k ? "," : "", r->rate[k]);
    printf("]}");
}

/* Parses a --mode argument into sel[] (indices into modes, in order).
 * Returns how many, or -1 for an unknown or repeated name. */
static int parse_modes(const char *arg, int *sel)
{
    char buf[64], *save = NULL;
    int n = 0;

    if (strcmp(arg, "both") == 0)
        arg = "full,entropy";
    else if (strcmp(arg, "all") == 0)
        arg = "full,entropy,skip";
    if (strlen(arg) >= sizeof(buf))
        return -1;
    strcpy(buf, arg);
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t m = 0;

        while (m < COUNT(modes) && strcmp(t, modes[m].name) != 0)
            m++;
        for (int j = 0; j < n; j++)
            if (sel[j] == (int)m)
                return -1;
        if (m == COUNT(modes))
            return -1;
        sel[n++] = (int)m;
    }
    return n ? n : -1;
}

static int usage(void)
{
    fprintf(stderr, "usage: tjdecode [--mode full|entropy|skip|both|all[,...]] [--passes P] "
                    "[--min-pass S] [--json] FILE...\n");
    return 2;
}

int main(int argc, char **argv)
{
    static struct result res[COUNT(modes)];
    struct bench b = { 0 };
    double min_s = 0.2;
    int json = 0, passes = 5, sel[COUNT(modes)] = { 0, 1 }, nsel = 2;
    size_t out_cap = 0;
    bool full_run = false;

    b.imgs = calloc((size_t)argc, sizeof(*b.imgs));
    b.tj = tjInitDecompress();
    if (!b.imgs || !b.tj)
        return 2;
    if (lj_init(&b.lj) < 0) {
        fprintf(stderr, "tjdecode: %s\n", b.lj.msg);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
            if ((nsel = parse_modes(argv[++i], sel)) < 0)
                return usage();
        } else if (strcmp(argv[i], "--passes") == 0 && i + 1 < argc) {
            passes = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--min-pass") == 0 && i + 1 < argc) {
            min_s = atof(argv[++i]);
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            return usage();
        } else {
            struct img *im = &b.imgs[b.nfiles];
            int sub, cs;

            im->path = argv[i];
            if (load(argv[i], im) < 0 ||
                tjDecompressHeader3(b.tj, im->buf, im->len, &im->w, &im->h, &sub, &cs) < 0) {
                fprintf(stderr, "tjdecode: %s: cannot read or parse\n", argv[i]);
                return 1;
            }
            if ((size_t)im->w * im->h * 3 > out_cap) {
                out_cap = (size_t)im->w * im->h * 3;
                free(b.out);
                b.out = malloc(out_cap);
                if (!b.out)
                    return 2;
            }
            b.nfiles++;
        }
    }
    if (b.nfiles == 0 || passes < 1 || passes > MAX_PASSES || min_s < 0)
        return usage();
    for (int j = 0; j < nsel; j++) /* warm-up: code, tables, caches */
        for (int i = 0; i < b.nfiles; i++)
            if (modes[sel[j]].decode(&b, i) < 0) {
                fprintf(stderr, "tjdecode: %s: %s mode: %s\n", b.imgs[i].path,
                        modes[sel[j]].name, modes[sel[j]].error_of(&b));
                return 1;
            }
    for (int k = 0; k < passes; k++) /* the modes in turn, the first rotating */
        for (int j = 0; j < nsel; j++) {
            int m = sel[(k + j) % nsel];

            pass(&b, &modes[m], min_s, &res[m], k);
        }
    if (json) {
        printf("{\"files\":%d,\"passes\":%d", b.nfiles, passes);
        for (int j = 0; j < nsel; j++) {
            printf(",");
            print_json(&modes[sel[j]], &res[sel[j]], passes);
        }
        printf("}\n");
    } else {
        for (int j = 0; j < nsel; j++)
            print_text(&modes[sel[j]], &res[sel[j]], passes, b.nfiles);
        for (int j = 0; j < nsel; j++)
            full_run |= sel[j] == 0;
        for (int j = 0; j < nsel; j++)
            if (full_run && sel[j] != 0)
                printf("%s is %.0f%% of the full decode's time (medians)\n", modes[sel[j]].name,
                       100 * median(res[0].rate, passes) / median(res[sel[j]].rate, passes));
    }
    jpeg_destroy_decompress(&b.lj.ci);
    tjDestroy(b.tj);
    for (int i = 0; i < b.nfiles; i++)
        free(b.imgs[i].buf);
    free(b.imgs);
    free(b.out);
    return 0;
}
