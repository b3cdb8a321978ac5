/*
 * fuzz_memlimit.c - fuzz target for proto/memlimit.h's parsers: the input
 * is read as a limit file and as /proc/self/cgroup's text.  The limit
 * parser either refuses (-EINVAL, nothing written) or gives a figure that,
 * printed back ("max" for none), parses to the same; the v1 path parser
 * returns 0 with a NUL-terminated path that is a suffix of some line of
 * the input, or -ENOENT / -ENAMETOOLONG.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memlimit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    char text[64], path[64];
    uint64_t v = 7, v2;
    int n, r;

    r = memlimit_parse(buf, size, &v);
    if (r < 0) {
        if (r != -EINVAL || v != 7)
            abort();
    } else {
        n = v ? snprintf(text, sizeof(text), "%" PRIu64 "\n", v)
              : snprintf(text, sizeof(text), "max\n");
        if (r != 0 || n < 0 || memlimit_parse(text, (size_t)n, &v2) != 0 || v2 != v)
            abort();
    }
    memset(path, 'x', sizeof(path));
    r = memlimit_parse_v1_path(buf, size, path, sizeof(path));
    if (r == 0) {
        size_t plen = strnlen(path, sizeof(path));

        if (plen == sizeof(path) || (plen && !memmem(buf, size, path, plen)))
            abort();
    } else if (r != -ENOENT && r != -ENAMETOOLONG) {
        abort();
    }
    return 0;
}
