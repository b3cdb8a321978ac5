/*
 * resize.c - the resampler's speed: the resampler before issue 15
 * (bench/resize_prev.c, the old path) against the current one
 * (daemon/worker/resize*.c), on fixed crop sizes and on the mix of crops
 * bench/jpeg-loader's workers resize, with the coefficient cache's hit
 * rate on that mix.
 *
 *   bench/resize [--reps N] [--size S] [--photos DIR] [--mix N]
 *
 * Fixed sizes: W x H RGB noise to S x S (default 224), the whole image as
 * the crop and the limits (train's crop-then-resize), flipped, CHW and
 * HWC.  Per image:
 *   prev          rsprev_axis_plan twice (the old per-image tables) and
 *                 rsprev_resize (and rsprev_interleave for HWC)
 *   new           rs_axis_plan twice (what a cache miss costs) and
 *                 rs_resize, the kernels this CPU gets (AVX-512 where it
 *                 has AVX512F/BW/VL/VBMI/VNNI, else AVX2 where it has it)
 *   cached        rs_resize alone (a cache hit)
 *   avx512, avx2, baseline
 *                 as new, with each kernel set forced (rs_use_isa before
 *                 the tables are built), "-" where the CPU lacks it
 *   tables        rs_axis_plan twice alone
 * --photos DIR: the JPEGs of DIR's class folders (bench/make-photos'
 * tree): each file's size from its header, then per image the worker's
 * train plan (RandomResizedCrop(S) + flip 0.5, seed 0, the sample's own
 * stream: xform_image.h) at the DCT scale the worker picks, for two epochs
 * of the set in a shuffled order: the hits of one worker's cache
 * (RS_CACHE_WAYS ways) over those lookups, then the first N (--mix,
 * default 512) crops resized from noise of their decoded size, old path
 * against new (through a cache, as the worker runs it), per image, and
 * against each other kernel set the CPU has, forced.
 *
 * The output here stays in cache (one 150 KB buffer); a worker's slot
 * does not, which this bench cannot show: the stores into the slot are
 * measured through the daemon (bench/jpeg-loader's resize stage).
 *
 * Timing: each measurement runs its calls for 0.2 s first (warm-up:
 * caches, page faults, clock), then --reps (default 15) batches of calls
 * of about 20 ms each, timed by the thread's CPU clock
 * (CLOCK_THREAD_CPUTIME_ID, so other processes' time slices on a shared
 * machine are not counted, their cache pollution still is); the figure is
 * the median batch per call, with the spread (lowest and highest batch)
 * for the ratios.  Exit 0, 1 on a failure, 2 for bad usage.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jpeg.h"
#include "resize.h"
#include "resize_prev.h"
#include "rng.h"
#include "wire.h"
#include "xform_image.h"

#define MAX_REPS 101
#define NOISE_SIDE 2048 /* the noise image crops are cut from */

static int reps = 15;
static uint32_t size = 224;
static uint8_t *noise;

static double cpu_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* A timed thing: one call of fn(arg). */
struct timing {
    double median, lo, hi; /* seconds per call */
};

static struct timing measure(void (*fn)(void *), void *arg)
{
    double t[MAX_REPS], t0 = cpu_s(), per;
    long calls = 0, batch;
    struct timing r;

    while (cpu_s() - t0 < 0.2) { /* warm-up */
        fn(arg);
        calls++;
    }
    per = (cpu_s() - t0) / (double)calls;
    batch = (long)(0.02 / per) + 1;
    for (int i = 0; i < reps; i++) {
        double s = cpu_s();

        for (long k = 0; k < batch; k++)
            fn(arg);
        t[i] = (cpu_s() - s) / (double)batch;
    }
    qsort(t, (size_t)reps, sizeof(double), cmp_double);
    r.median = t[reps / 2];
    r.lo = t[0];
    r.hi = t[reps - 1];
    return r;
}

/* One crop: its box and limits in the decoded image, and the layout. */
struct crop {
    double x0, x1, y0, y1;
    int32_t lx0, lx1, ly0, ly1;
    bool flip;
    enum rs_layout layout;
};

/* What the timed functions share. */
struct state {
    const struct crop *crops;
    size_t n_crops;
    struct rsprev_axis px, py;
    void *pscratch;
    size_t pscratch_cap;
    uint8_t *planes; /* prev's CHW planes before its HWC interleave */
    struct rs_axis ax, ay;
    struct rs_cache cache;
    void *scratch;
    size_t scratch_cap;
    uint8_t *dst;
};

static void *grow(void **p, size_t *cap, size_t need)
{
    if (need > *cap) {
        free(*p);
        *p = aligned_alloc(32, (need + 31) & ~(size_t)31);
        if (!*p) {
            fprintf(stderr, "resize: out of memory\n");
            exit(1);
        }
        *cap = need;
    }
    return *p;
}

static const uint8_t *at(int32_t x, int32_t y)
{
    return noise + ((size_t)y * NOISE_SIDE + (size_t)x) * 3;
}

static void prev_one(struct state *st, const struct crop *c)
{
    uint8_t *out = c->layout == RS_CHW ? st->dst : st->planes;

    if (rsprev_axis_plan(&st->px, size, c->x0, c->x1, c->lx0, c->lx1, c->flip) < 0 ||
        rsprev_axis_plan(&st->py, size, c->y0, c->y1, c->ly0, c->ly1, false) < 0) {
        fprintf(stderr, "resize: the old path refused a plan\n");
        exit(1);
    }
    grow(&st->pscratch, &st->pscratch_cap, rsprev_scratch_bytes(&st->px, &st->py));
    rsprev_resize(noise, NOISE_SIDE * 3, 0, 0, &st->px, &st->py, st->pscratch, out);
    if (c->layout == RS_HWC)
        rsprev_interleave(st->planes, (size_t)size * size, st->dst);
}

static void tables_one(struct state *st, const struct crop *c)
{
    if (rs_axis_plan(&st->ax, RS_HORIZONTAL, size, c->x0, c->x1, c->lx0, c->lx1, c->flip) < 0 ||
        rs_axis_plan(&st->ay, RS_VERTICAL, size, c->y0, c->y1, c->ly0, c->ly1, false) < 0) {
        fprintf(stderr, "resize: a plan refused\n");
        exit(1);
    }
}

static void resize_one(struct state *st, const struct crop *c)
{
    grow(&st->scratch, &st->scratch_cap, rs_scratch_bytes(&st->ax, &st->ay));
    rs_resize(at(st->ax.lo, st->ay.lo), NOISE_SIDE * 3, &st->ax, &st->ay, c->layout,
              st->scratch, st->dst);
}

/* The worker's way: tables from the cache (relative to the limits). */
static void cached_one(struct state *st, const struct crop *c)
{
    const struct rs_axis *ax, *ay;

    if (rs_cache_plan(&st->cache, RS_HORIZONTAL, size, c->x0, c->x1, c->lx0, c->lx1, c->flip,
                      &ax) < 0 ||
        rs_cache_plan(&st->cache, RS_VERTICAL, size, c->y0, c->y1, c->ly0, c->ly1, false,
                      &ay) < 0) {
        fprintf(stderr, "resize: a plan refused\n");
        exit(1);
    }
    grow(&st->scratch, &st->scratch_cap, rs_scratch_bytes(ax, ay));
    rs_resize(at(c->lx0 + ax->lo, c->ly0 + ay->lo), NOISE_SIDE * 3, ax, ay, c->layout,
              st->scratch, st->dst);
}

static void run_prev(void *arg)
{
    struct state *st = arg;

    for (size_t i = 0; i < st->n_crops; i++)
        prev_one(st, &st->crops[i]);
}

static void run_built(void *arg)
{
    struct state *st = arg;

    for (size_t i = 0; i < st->n_crops; i++) {
        tables_one(st, &st->crops[i]);
        resize_one(st, &st->crops[i]);
    }
}

static void run_cached(void *arg)
{
    struct state *st = arg;

    resize_one(st, &st->crops[0]); /* tables built once, by the caller */
}

static void run_tables(void *arg)
{
    struct state *st = arg;

    for (size_t i = 0; i < st->n_crops; i++)
        tables_one(st, &st->crops[i]);
}

static void run_worker(void *arg)
{
    struct state *st = arg;

    for (size_t i = 0; i < st->n_crops; i++)
        cached_one(st, &st->crops[i]);
}

static double us(double s)
{
    return s * 1e6;
}

/* The kernel sets, best first, and whether this CPU runs each. */
static const struct {
    enum rs_isa isa;
    const char *name;
} isas[] = { { RS_ISA_AVX512, "avx512" },
             { RS_ISA_AVX2, "avx2" },
             { RS_ISA_BASELINE, "baseline" } };
#define N_ISAS (sizeof(isas) / sizeof(isas[0]))

static bool has_isa(size_t k)
{
    bool ok = rs_use_isa(isas[k].isa) == 0;

    rs_use_isa(RS_ISA_AUTO);
    return ok;
}

static void fixed_sizes(struct state *st)
{
    static const uint32_t sizes[][2] = { { 300, 400 }, { 1200, 900 }, { 150, 150 },
                                         { 250, 250 }, { 448, 336 }, { 300, 300 } };

    printf("%ux%u RGB from W x H noise (the whole image the crop, flipped), CPU time per "
           "image in us,\nmedian of %d batches after a 0.2 s warm-up; new: the kernels this CPU "
           "gets (%s), tables built per image;\ncached: its resize alone; then each kernel set "
           "forced, tables built per image (- where the CPU lacks it);\ntables: its two tables "
           "alone\n", size, size, reps, rs_isa_name());
    printf("%-10s %-4s %8s %8s %8s", "W x H", "", "prev", "new", "cached");
    for (size_t k = 0; k < N_ISAS; k++)
        printf(" %8s", isas[k].name);
    printf(" %7s  %s\n", "tables", "prev / new (range)");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        for (int l = 0; l < 2; l++) {
            uint32_t w = sizes[i][0], h = sizes[i][1];
            struct crop c = { .x0 = 0, .x1 = w, .y0 = 0, .y1 = h, .lx0 = 0, .lx1 = (int)w,
                              .ly0 = 0, .ly1 = (int)h, .flip = true,
                              .layout = l ? RS_HWC : RS_CHW };
            struct timing prev, built, cached, tables;

            st->crops = &c;
            st->n_crops = 1;
            prev = measure(run_prev, st);
            built = measure(run_built, st);
            tables_one(st, &c);
            cached = measure(run_cached, st);
            tables = measure(run_tables, st);
            printf("%4ux%-5u %-4s %8.1f %8.1f %8.1f", w, h, l ? "hwc" : "chw", us(prev.median),
                   us(built.median), us(cached.median));
            for (size_t k = 0; k < N_ISAS; k++) {
                if (!has_isa(k)) {
                    printf(" %8s", "-");
                    continue;
                }
                rs_use_isa(isas[k].isa);
                printf(" %8.1f", us(measure(run_built, st).median));
                rs_use_isa(RS_ISA_AUTO);
            }
            printf(" %7.1f  %5.2fx (%.2f-%.2f)\n", us(tables.median),
                   prev.median / built.median, prev.lo / built.hi, prev.hi / built.lo);
        }
}

/* The photos' decoded crops, as the worker would plan them. */
static size_t photo_crops(const char *dir, struct crop **out)
{
    struct wire_xform p = { .size = size, .scale_lo = 0.08, .scale_hi = 1.0,
                            .ratio_lo = 3.0 / 4.0, .ratio_hi = 4.0 / 3.0, .flip = 0.5 };
    struct jpg_limits lim = { 0 };
    struct jpg_dec *d = jpg_new();
    struct { uint32_t w, h; } *dims = NULL;
    size_t n = 0, cap = 0, m = 0;
    struct dirent **classes;
    int nc = scandir(dir, &classes, NULL, alphasort);
    struct crop *crops;
    uint64_t lcg = 1;
    size_t *order;

    if (nc < 0 || !d) {
        fprintf(stderr, "resize: %s: %s\n", dir, strerror(errno));
        exit(1);
    }
    for (int i = 0; i < nc; i++) {
        char path[4096];
        struct dirent **files;
        int nf;

        if (classes[i]->d_name[0] == '.')
            goto next_class;
        snprintf(path, sizeof(path), "%s/%s", dir, classes[i]->d_name);
        nf = scandir(path, &files, NULL, alphasort);
        for (int j = 0; j < nf; j++) {
            char file[8192];
            struct jpg_header hdr;
            struct rf_err err;
            uint8_t *buf;
            FILE *f;
            long len;

            snprintf(file, sizeof(file), "%s/%s", path, files[j]->d_name);
            if (!strstr(files[j]->d_name, ".jpg") || !(f = fopen(file, "rb")))
                goto next_file;
            fseek(f, 0, SEEK_END);
            len = ftell(f);
            fseek(f, 0, SEEK_SET);
            buf = malloc((size_t)len);
            if (buf && fread(buf, 1, (size_t)len, f) == (size_t)len &&
                jpg_open(d, buf, (size_t)len, &lim, &hdr, &err) == 0) {
                jpg_abort(d);
                if (n == cap) {
                    cap = cap ? 2 * cap : 1024;
                    dims = realloc(dims, cap * sizeof(*dims));
                }
                dims[n].w = hdr.width;
                dims[n].h = hdr.height;
                n++;
            }
            free(buf);
            fclose(f);
next_file:
            free(files[j]);
        }
        if (nf >= 0)
            free(files);
next_class:
        free(classes[i]);
    }
    free(classes);
    jpg_free(d);
    if (n == 0) {
        fprintf(stderr, "resize: no JPEGs under %s/*/\n", dir);
        exit(1);
    }
    order = malloc(2 * n * sizeof(size_t));
    crops = malloc(2 * n * sizeof(struct crop));
    for (uint32_t epoch = 0; epoch < 2; epoch++) {
        size_t *o = order + epoch * n;

        for (size_t i = 0; i < n; i++)
            o[i] = i;
        for (size_t i = n - 1; i > 0; i--) { /* a shuffle, as the sampler's */
            size_t k, t;

            lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
            k = (size_t)((lcg >> 33) % (i + 1));
            t = o[i];
            o[i] = o[k];
            o[k] = t;
        }
        for (size_t i = 0; i < n; i++) {
            size_t idx = o[i];
            struct rng_stream rng;
            struct xfi_plan pl;
            unsigned s;
            double k;
            uint32_t sw, sh;
            struct crop *c = &crops[m];

            rng_stream_init(&rng, 0, epoch, idx);
            xfi_train_plan(dims[idx].w, dims[idx].h, &p, &rng, &pl, NULL);
            s = jpg_pick_scale(pl.x1 - pl.x0, pl.y1 - pl.y0, size, JPG_COVER_TRAIN);
            k = s / 8.0;
            sw = (dims[idx].w * s + 7) / 8;
            sh = (dims[idx].h * s + 7) / 8;
            if (sw > NOISE_SIDE || sh > NOISE_SIDE)
                continue;
            *c = (struct crop){ .x0 = pl.x0 * k, .x1 = pl.x1 * k, .y0 = pl.y0 * k,
                                .y1 = pl.y1 * k, .flip = pl.flip, .layout = RS_CHW };
            /* the limits as xform_image.c's render() scales them */
            c->lx0 = (int32_t)floor(pl.lx0 * k);
            c->ly0 = (int32_t)floor(pl.ly0 * k);
            c->lx1 = (int32_t)fmin(ceil(pl.lx1 * k), sw);
            c->ly1 = (int32_t)fmin(ceil(pl.ly1 * k), sh);
            m++;
        }
    }
    printf("%s: %zu JPEGs, %zu train crops (2 epochs)\n", dir, n, m);
    free(order);
    free(dims);
    *out = crops;
    return m;
}

static void photo_mix(struct state *st, const char *dir, size_t mix)
{
    struct crop *crops;
    size_t n = photo_crops(dir, &crops);
    struct rs_cache probe = { 0 };
    double in_px = 0;
    size_t gather = 0, taps[4] = { 0 };
    struct timing prev, now;

    for (size_t i = 0; i < n; i++) {
        const struct rs_axis *ax, *ay;

        rs_cache_plan(&probe, RS_HORIZONTAL, size, crops[i].x0, crops[i].x1, crops[i].lx0,
                      crops[i].lx1, crops[i].flip, &ax);
        rs_cache_plan(&probe, RS_VERTICAL, size, crops[i].y0, crops[i].y1, crops[i].ly0,
                      crops[i].ly1, false, &ay);
        in_px += (double)(ax->hi - ax->lo) * (ay->hi - ay->lo);
        gather += ax->gather;
        taps[ax->taps < 3 ? 0 : ax->taps < 5 ? 1 : ax->taps < 7 ? 2 : 3]++;
    }
    printf("coefficient cache (%d ways, one worker seeing every crop): %llu hits of %llu "
           "lookups (%.1f%%); mean input %.0f pixels a crop\n", RS_CACHE_WAYS,
           (unsigned long long)probe.hits, (unsigned long long)(probe.hits + probe.misses),
           100.0 * (double)probe.hits / (double)(probe.hits + probe.misses), in_px / (double)n);
    printf("horizontal tables: %.1f%% on the gather kernel; taps 1-2 %.1f%%, 3-4 %.1f%%, "
           "5-6 %.1f%%, more %.1f%%\n", 100.0 * (double)gather / (double)n,
           100.0 * (double)taps[0] / (double)n, 100.0 * (double)taps[1] / (double)n,
           100.0 * (double)taps[2] / (double)n, 100.0 * (double)taps[3] / (double)n);
    rs_cache_free(&probe);
    st->crops = crops;
    st->n_crops = mix < n ? mix : n;
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; i < st->n_crops; i++)
            crops[i].layout = l ? RS_HWC : RS_CHW;
        prev = measure(run_prev, st);
        now = measure(run_worker, st);
        printf("the first %zu crops, %s: prev %.1f us, new %.1f us (%s, tables through the "
               "cache) per image: %.2fx (%.2f-%.2f)\n", st->n_crops, l ? "HWC" : "CHW",
               us(prev.median) / (double)st->n_crops, us(now.median) / (double)st->n_crops,
               rs_isa_name(), prev.median / now.median, prev.lo / now.hi, prev.hi / now.lo);
        for (size_t k = 0; k < N_ISAS; k++) {
            if (strcmp(isas[k].name, rs_isa_name()) == 0 || !has_isa(k))
                continue;
            rs_use_isa(isas[k].isa);
            now = measure(run_worker, st);
            rs_use_isa(RS_ISA_AUTO);
            printf("    %s forced: %.1f us per image: %.2fx (%.2f-%.2f)\n", isas[k].name,
                   us(now.median) / (double)st->n_crops, prev.median / now.median,
                   prev.lo / now.hi, prev.hi / now.lo);
        }
    }
    free(crops);
}

static void usage(void)
{
    fprintf(stderr, "usage: resize [--reps N] [--size S] [--photos DIR] [--mix N]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct state st = { 0 };
    const char *photos = NULL;
    size_t mix = 512;
    uint64_t x = 88172645463325252ull;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = (uint32_t)atoi(argv[++i]);
        else if (!strcmp(argv[i], "--photos") && i + 1 < argc)
            photos = argv[++i];
        else if (!strcmp(argv[i], "--mix") && i + 1 < argc)
            mix = (size_t)atol(argv[++i]);
        else
            usage();
    }
    if (reps < 1 || reps > MAX_REPS || size < 1 || size > 4096 || mix < 1)
        usage();
    noise = malloc((size_t)NOISE_SIDE * NOISE_SIDE * 3);
    st.dst = malloc((size_t)size * size * 3);
    st.planes = malloc((size_t)size * size * 3);
    if (!noise || !st.dst || !st.planes)
        return 1;
    for (size_t i = 0; i < (size_t)NOISE_SIDE * NOISE_SIDE * 3; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise[i] = (uint8_t)x;
    }
    fixed_sizes(&st);
    if (photos)
        photo_mix(&st, photos, mix);
    rsprev_axis_free(&st.px);
    rsprev_axis_free(&st.py);
    rs_axis_free(&st.ax);
    rs_axis_free(&st.ay);
    rs_cache_free(&st.cache);
    free(st.pscratch);
    free(st.scratch);
    free(st.planes);
    free(st.dst);
    free(noise);
    return 0;
}
