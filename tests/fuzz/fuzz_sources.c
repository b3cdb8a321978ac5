/*
 * fuzz_sources.c - a dataset's source list (proto/sources.h) from
 * arbitrary bytes.
 *
 * Input: the list itself, its sample count the number of '\n' in it (so
 * most inputs are a list of the right length, and the count is also tried
 * one off).  Whatever the input: sources_index returns 0 or -EBADMSG with
 * a message, reads nothing past the input, and when it accepts, every line
 * decodes, and the decoded path escapes to a line no longer than it (an
 * escape a writer would not use, "\x41", reads as the byte all the same)
 * that decodes to the same path; or the target aborts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sources.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    uint64_t n = 0, *off;
    struct rf_err err;
    int r;

    for (size_t i = 0; i < size; i++)
        n += data[i] == '\n';
    off = malloc((size_t)(n + 2) * sizeof(*off));
    if (!off)
        abort();
    err.msg[0] = '\0';
    if (n > 0 && sources_index(buf, size, n - 1, off, &err) != -EBADMSG)
        abort(); /* one line too many is refused */
    r = sources_index(buf, size, n, off, &err);
    if (r != 0 && (r != -EBADMSG || !err.msg[0]))
        abort();
    for (uint64_t i = 0; r == 0 && i < n; i++) {
        size_t len = (size_t)(off[i + 1] - off[i] - 1);
        char path[SOURCES_LINE_MAX], again[SOURCES_LINE_MAX + 1], back[SOURCES_LINE_MAX];
        long k = sources_unescape(buf + off[i], len, path), e, b;

        if (k <= 0 || (size_t)k > len)
            abort();
        e = sources_escape(path, (size_t)k, again, sizeof(again));
        if (e <= 0 || (size_t)e > len)
            abort();
        b = sources_unescape(again, (size_t)e, back);
        if (b != k || memcmp(back, path, (size_t)k) != 0)
            abort(); /* the writer's line for the path reads back as it */
    }
    free(off);
    return 0;
}
