/*
 * crc32c.c - bench/crc32c: the CRC-32C rate ringfeed's records are checked
 * at, ISA-L's crc32_iscsi (what proto/crc32c.c runs) against the baseline
 * it replaced, one serial SSE4.2 crc32 instruction stream, and the
 * portable slicing-by-8 tables, on the sizes the daemon checksums: a
 * 32-byte index entry, a 784-byte Fashion-MNIST record, a 100 KiB JPEG and
 * a 4 MiB block.  (crc32c() itself takes the serial loop below 512 bytes,
 * where that is faster, so its column there is the serial one's.)  Each figure is the best of 5 timed runs after a warm-up;
 * the ratio column is crc32c() over the serial loop.
 *
 *     build/bench/crc32c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "crc32c.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

/* GB/s of f over `total` bytes in pieces of `size`, best of 5. */
static double rate(crc_fn f, const uint8_t *buf, size_t size, size_t total, uint32_t *sink)
{
    double best = 0;

    for (int run = 0; run < 6; run++) {
        double t0 = now_s(), t;

        for (size_t off = 0; off + size <= total; off += size)
            *sink += f(0, buf + off, size);
        t = now_s() - t0;
        if (run > 0 && (double)total / t / 1e9 > best) /* run 0 warms up */
            best = (double)total / t / 1e9;
    }
    return best;
}

int main(void)
{
    static const size_t sizes[] = {32, 64, 128, 256, 784, 100 << 10, 4 << 20};
    const size_t total = 64u << 20;
    uint8_t *buf = malloc(total);
    uint32_t sink = 0;

    if (!buf)
        return 1;
    for (size_t i = 0; i < total; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 13);
    if (crc32c(0, buf, 4099) != crc32c_serial_stream(0, buf, 4099) ||
        crc32c(0, buf, 4099) != crc32c_sw(0, buf, 4099)) {
        fprintf(stderr, "crc32c: the implementations disagree\n");
        return 1;
    }
    printf("CRC-32C, GB/s (64 MiB in pieces, best of 5, one core); crc32c() runs %s\n",
           crc32c_impl_name());
    printf("%10s %12s %14s %14s %8s\n", "piece", "crc32c()", "serial crc32q", "slicing-by-8",
           "ratio");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        double a = rate(crc32c, buf, sizes[i], total, &sink);
        double b = rate(crc32c_serial_stream, buf, sizes[i], total, &sink);
        double c = rate(crc32c_sw, buf, sizes[i], total, &sink);

        printf("%10zu %12.2f %14.2f %14.2f %7.2fx\n", sizes[i], a, b, c, a / b);
    }
    printf("(checksum %08x)\n", sink);
    free(buf);
    return 0;
}
