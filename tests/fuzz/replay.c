/*
 * replay.c - runs a fuzz target without libFuzzer, as a unit test.
 *
 * Every fuzz target in tests/fuzz defines LLVMFuzzerTestOneInput.  Built
 * with -Dfuzzing=true and clang, it links libFuzzer for real fuzzing; in
 * every other build it links this driver, which feeds the target:
 *   - each file named on the command line (a corpus of seeds and every input
 *     that once crashed: the regression corpus), then
 *   - a fixed number of inputs mutated from those seeds by a seeded
 *     generator (bit flips, byte sets, truncations, splices, 64-bit edge
 *     values), so the ASan+UBSan build exercises the parser's error paths
 *     on every run, reproducibly.
 * RINGFEED_FUZZ_ITERS overrides the mutation count (default 20000).
 * Output is TAP; a crash is caught by the sanitizers or the test harness.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT (1u << 20)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t read_file(const char *path, uint8_t *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n;

    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        exit(2);
    }
    n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
    static const uint64_t edges[] = {
        0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff, 0xffffffff,
        0x7fffffffffffffffull, 0xffffffffffffffffull,
    };
    int rounds = 1 + (int)(next_rand() % 4);

    for (int r = 0; r < rounds; r++) {
        uint64_t op = next_rand() % 6;
        size_t at = len ? (size_t)(next_rand() % len) : 0;

        switch (op) {
        case 0: /* flip a bit */
            if (len)
                buf[at] ^= (uint8_t)(1u << (next_rand() % 8));
            break;
        case 1: /* set a byte */
            if (len)
                buf[at] = (uint8_t)next_rand();
            break;
        case 2: /* truncate */
            len = len ? (size_t)(next_rand() % (len + 1)) : 0;
            break;
        case 3: { /* write an edge value, little endian */
            uint64_t v = edges[next_rand() % (sizeof(edges) / sizeof(edges[0]))];
            size_t w = (size_t)1 << (next_rand() % 4);
            for (size_t i = 0; i < w && at + i < len; i++)
                buf[at + i] = (uint8_t)(v >> (8 * i));
            break;
        }
        case 4: /* append random bytes */
            for (size_t i = 0, n = next_rand() % 64; i < n && len < cap; i++)
                buf[len++] = (uint8_t)next_rand();
            break;
        default: /* duplicate a run inside the input */
            if (len > 1) {
                size_t from = (size_t)(next_rand() % len);
                size_t n = (size_t)(next_rand() % (len - from));
                if (at + n <= cap && at + n <= len)
                    memmove(buf + at, buf + from, n);
            }
            break;
        }
    }
    return len;
}

int main(int argc, char **argv)
{
    uint8_t *seed = malloc(MAX_INPUT), *work = malloc(MAX_INPUT);
    size_t *lens = calloc((size_t)argc, sizeof(*lens));
    uint8_t **seeds = calloc((size_t)argc, sizeof(*seeds));
    const char *env = getenv("RINGFEED_FUZZ_ITERS");
    long iters = env ? atol(env) : 20000;
    int nseeds = 0, t = 0;

    if (!seed || !work || !lens || !seeds)
        return 2;
    for (int i = 1; i < argc; i++) {
        size_t n = read_file(argv[i], seed, MAX_INPUT);
        uint8_t *copy = malloc(n ? n : 1);

        memcpy(copy, seed, n);
        LLVMFuzzerTestOneInput(copy, n);
        printf("ok %d - seed %s (%zu bytes)\n", ++t, argv[i], n);
        seeds[nseeds] = copy;
        lens[nseeds++] = n;
    }
    for (long i = 0; i < iters; i++) {
        size_t len = 0;
        uint8_t *in;

        if (nseeds) {
            int k = (int)(next_rand() % (uint64_t)nseeds);
            len = lens[k];
            memcpy(work, seeds[k], len);
        }
        len = mutate(work, len, MAX_INPUT);
        /* an exact-size heap copy, so ASan sees any read past the end */
        in = malloc(len ? len : 1);
        memcpy(in, work, len);
        LLVMFuzzerTestOneInput(in, len);
        free(in);
    }
    printf("ok %d - %ld mutated inputs\n", ++t, iters);
    printf("1..%d\n", t);
    for (int i = 0; i < nseeds; i++)
        free(seeds[i]);
    free(seeds);
    free(lens);
    free(seed);
    free(work);
    return 0;
}
