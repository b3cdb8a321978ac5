/*
 * fuzz_conf_parse.c - fuzz target for the daemon's config parser.  Every
 * input either fails with a message naming a line, or parses; a parsed
 * config must format (conf_format) to text that parses back to an equal
 * config, and merging it over a default config must give it back.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct conf c, back, merged;
    static char text[1 << 17];
    struct rf_err err;
    int r, n;

    err.msg[0] = '\0';
    r = conf_parse((const char *)data, size, &c, &err);
    if (r < 0) {
        if (r != -EINVAL || strncmp(err.msg, "line ", 5) != 0)
            abort();
        return 0;
    }
    n = conf_format(&c, text, sizeof(text));
    if (n < 0 || conf_parse(text, (size_t)n, &back, &err) != 0 || !conf_equal(&c, &back))
        abort();
    conf_defaults(&merged);
    if (conf_merge(&merged, &c, &err) != 0 || !conf_equal(&merged, &c))
        abort();
    return 0;
}
