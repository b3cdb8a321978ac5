/*
 * fuzz_top_stats.c - fuzz target for ringfeedctl top's parsers
 * (tools/top_calc.h).  Any bytes as a STATS body and as a STATUS line
 * parse without reading past them; the input split in two is parsed as
 * two snapshots, and computing a frame from them keeps every row count
 * within the caps (the augmentation ops' too, each name terminated and
 * its time per image a number not below 0).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "top_calc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct top_snap a, b;
    static struct top_frame f;
    size_t half = size / 2;
    char *copy = malloc(size ? size : 1); /* exactly size bytes: ASan sees overreads */

    if (!copy)
        return 0;
    memcpy(copy, data, size);
    top_snap_init(&a);
    top_snap_init(&b);
    top_snap_parse_stats(&a, copy, half);
    top_snap_parse_stats(&b, copy + half, size - half);
    (void)top_snap_parse_status(&b, copy, size);
    top_compute(&a, &b, 0.5, &f);
    if (f.nworkers > TOP_WORKERS_MAX || f.nclients > TOP_CLIENTS_MAX || f.naug > TOP_AUG_MAX ||
        f.naug > b.naug)
        abort();
    for (uint32_t i = 0; i < f.naug; i++)
        if (!memchr(f.aug[i].name, '\0', sizeof(f.aug[i].name)) || !(f.aug[i].us_per_image >= 0))
            abort();
    top_compute(NULL, &a, 0.0, &f);
    free(copy);
    return 0;
}
