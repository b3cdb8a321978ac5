/*
 * tjdecode.c - the single-core libjpeg-turbo full-decode rate of a set of
 * JPEGs: the ceiling bench/jpeg-loader holds ringfeed's workers against
 * (workers x this rate).
 *
 *   tjdecode [--seconds S] [--json] FILE...
 *
 * Reads every file into memory first, decodes each once as a warm-up, then
 * decodes them in turn, whole, to packed RGB with tjDecompress2 (flags 0:
 * accurate integer IDCT and fancy upsampling, as the workers and Pillow
 * decode) until S seconds (default 5) have passed, in one thread.  Prints
 * images/s and megapixels/s; with --json one object:
 *     {"images":n,"seconds":s,"images_per_s":x,"mpixels_per_s":m,"files":f}
 * Exit 0, 1 when a file does not decode, 2 for bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <turbojpeg.h>

struct img {
    unsigned char *buf;
    unsigned long len;
    int w, h;
};

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
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

int main(int argc, char **argv)
{
    double seconds = 5, t0, t;
    int json = 0, nfiles = 0;
    struct img *imgs = calloc((size_t)argc, sizeof(*imgs));
    unsigned char *out = NULL;
    size_t out_cap = 0;
    unsigned long long images = 0, pixels = 0;
    tjhandle tj = tjInitDecompress();

    if (!imgs || !tj)
        return 2;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else {
            struct img *im = &imgs[nfiles];
            int sub, cs;

            if (load(argv[i], im) < 0 ||
                tjDecompressHeader3(tj, im->buf, im->len, &im->w, &im->h, &sub, &cs) < 0) {
                fprintf(stderr, "tjdecode: %s: cannot read or parse\n", argv[i]);
                return 1;
            }
            if ((size_t)im->w * im->h * 3 > out_cap) {
                out_cap = (size_t)im->w * im->h * 3;
                free(out);
                out = malloc(out_cap);
                if (!out)
                    return 2;
            }
            nfiles++;
        }
    }
    if (nfiles == 0 || seconds <= 0) {
        fprintf(stderr, "usage: tjdecode [--seconds S] [--json] FILE...\n");
        return 2;
    }
    for (int i = 0; i < nfiles; i++) /* warm-up: code, tables, caches */
        if (tjDecompress2(tj, imgs[i].buf, imgs[i].len, out, imgs[i].w, 0, imgs[i].h, TJPF_RGB,
                          0) < 0) {
            fprintf(stderr, "tjdecode: file %d: %s\n", i, tjGetErrorStr2(tj));
            return 1;
        }
    t0 = now();
    do {
        for (int i = 0; i < nfiles; i++) {
            tjDecompress2(tj, imgs[i].buf, imgs[i].len, out, imgs[i].w, 0, imgs[i].h, TJPF_RGB, 0);
            images++;
            pixels += (unsigned long long)imgs[i].w * imgs[i].h;
        }
        t = now() - t0;
    } while (t < seconds);
    if (json)
        printf("{\"images\":%llu,\"seconds\":%.3f,\"images_per_s\":%.1f,\"mpixels_per_s\":%.1f,"
               "\"files\":%d}\n",
               images, t, images / t, pixels / t / 1e6, nfiles);
    else
        printf("%llu images in %.3f s: %.1f images/s, %.1f Mpixels/s (%d files, one core)\n",
               images, t, images / t, pixels / t / 1e6, nfiles);
    tjDestroy(tj);
    for (int i = 0; i < nfiles; i++)
        free(imgs[i].buf);
    free(imgs);
    free(out);
    return 0;
}
