/*
 * fuzz_cpus.c - fuzz target for proto/cpus.h's parsers: the input is read
 * as /proc/self/cgroup's text and as a cpu.max file's.  The cgroup parser
 * agrees with a plain model (the first line starting with "0::": no such
 * line -ENOENT, a rest that does not fit with its NUL -ENAMETOOLONG, else
 * the rest copied and terminated); the cpu.max parser either refuses (-EINVAL,
 * nothing written) or returns a period > 0 and a quota that, printed back
 * ("max" for 0), parses to the same figures.  Read as a CPU list, the input
 * is refused with the set untouched, or gives a set that cpus_format_list
 * writes as a list that reads back to the same set.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpus.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    const char *rest = NULL;
    size_t rest_len = 0;
    char path[64], text[64];
    uint64_t q = 1, per = 1, q2, per2;
    int r, n;

    /* the model: the first line that starts with "0::", its rest */
    for (size_t off = 0; off < size;) {
        const char *lf = memchr(buf + off, '\n', size - off);
        size_t ll = lf ? (size_t)(lf - (buf + off)) : size - off;

        if (ll >= 3 && memcmp(buf + off, "0::", 3) == 0) {
            rest = buf + off + 3;
            rest_len = ll - 3;
            break;
        }
        off += ll + 1;
    }
    memset(path, 'x', sizeof(path));
    r = cpus_parse_cgroup(buf, size, path, sizeof(path));
    if (!rest ? r != -ENOENT
              : rest_len + 1 > sizeof(path)
                    ? r != -ENAMETOOLONG
                    : r != 0 || memcmp(path, rest, rest_len) != 0 || path[rest_len] != '\0')
        abort();

    {
        static const uint64_t poison = 0x5a5a5a5a5a5a5a5aull;
        uint64_t set[16], back[16];
        char list[4096];

        for (unsigned i = 0; i < 16; i++)
            set[i] = poison;
        r = cpus_parse_list(buf, size, set, 1024);
        if (r < 0) {
            for (unsigned i = 0; i < 16; i++)
                if (r != -EINVAL || set[i] != poison)
                    abort();
        } else {
            n = cpus_format_list(set, 1024, list, sizeof(list));
            if (r != 0 || n < 0 || (n == 0) != (cpus_count(set, 1024) == 0))
                abort();
            if (n > 0 && (cpus_parse_list(list, (size_t)n, back, 1024) != 0 ||
                          memcmp(set, back, sizeof(set)) != 0))
                abort();
        }
    }

    r = cpus_parse_cpu_max(buf, size, &q, &per);
    if (r < 0) {
        if (r != -EINVAL || q != 1 || per != 1)
            abort();
        return 0;
    }
    if (r != 0 || per == 0)
        abort();
    if (q)
        n = snprintf(text, sizeof(text), "%" PRIu64 " %" PRIu64 "\n", q, per);
    else
        n = snprintf(text, sizeof(text), "max %" PRIu64 "\n", per);
    if (n < 0 || cpus_parse_cpu_max(text, (size_t)n, &q2, &per2) != 0 || q2 != q || per2 != per)
        abort();
    return 0;
}
