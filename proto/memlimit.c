/*
 * memlimit.c - the memory a process may use (memlimit.h).
 */
#include "memlimit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cpus.h"
#include "fileio.h"
#include "strnum.h"

/* v1 writes "unlimited" as a page-rounded 2^63 - 1; anything this large is none */
#define V1_UNLIMITED (1ull << 62)

int memlimit_parse(const char *buf, size_t len, uint64_t *bytes)
{
    uint64_t v;

    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
        len--;
    if (len == 3 && memcmp(buf, "max", 3) == 0) {
        *bytes = 0;
        return 0;
    }
    if (len == 0 || strnum_u64(buf, len, &v) < 0)
        return -EINVAL;
    *bytes = v >= V1_UNLIMITED ? 0 : v;
    return 0;
}

/* Is "memory" one of the comma-separated names in s[0..n)? */
static int has_memory(const char *s, size_t n)
{
    size_t i = 0;

    while (i <= n) {
        size_t j = i;

        while (j < n && s[j] != ',')
            j++;
        if (j - i == 6 && memcmp(s + i, "memory", 6) == 0)
            return 1;
        i = j + 1;
    }
    return 0;
}

int memlimit_parse_v1_path(const char *buf, size_t len, char *path, size_t cap)
{
    size_t off = 0;

    while (off < len) {
        const char *lf = memchr(buf + off, '\n', len - off);
        size_t n = lf ? (size_t)(lf - (buf + off)) : len - off;
        const char *line = buf + off, *c1 = memchr(line, ':', n), *c2;

        c2 = c1 ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - line)) : NULL;
        if (c1 && c2 && has_memory(c1 + 1, (size_t)(c2 - c1 - 1))) {
            size_t plen = n - (size_t)(c2 + 1 - line);

            if (plen + 1 > cap)
                return -ENAMETOOLONG;
            memcpy(path, c2 + 1, plen);
            path[plen] = '\0';
            return 0;
        }
        off += n + (lf != NULL);
    }
    return -ENOENT;
}

uint64_t memlimit_at(const char *root, const char *path, const char *const *files,
                     char *where, size_t cap)
{
    char text[128], dir[2048], file[2400];
    uint64_t best = 0;

    if (cap)
        where[0] = '\0';
    if ((size_t)snprintf(dir, sizeof(dir), "%s", path) >= sizeof(dir))
        return 0;
    for (;;) {
        size_t dl = strlen(dir);

        for (const char *const *f = files; *f; f++) {
            uint64_t v;
            ssize_t n;

            snprintf(file, sizeof(file), "%s%s%s%s", root, dir,
                     dl && dir[dl - 1] == '/' ? "" : "/", *f);
            n = fio_read_small(file, text, sizeof(text));
            if (n < 0 || memlimit_parse(text, (size_t)n, &v) < 0 || v == 0)
                continue;
            if (!best || v < best) {
                best = v;
                if (cap)
                    snprintf(where, cap, "%s %llu in %s", *f, (unsigned long long)v, file);
            }
        }
        if (!cpus_cgroup_parent(dir))
            break;
    }
    return best;
}

uint64_t memlimit_ram(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

    return pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
}

uint64_t memlimit_usable(char *where, size_t cap)
{
    static const char *const v2[] = {"memory.max", "memory.high", NULL};
    static const char *const v1[] = {"memory.limit_in_bytes", NULL};
    char text[4096], path[2048], w[512];
    uint64_t best = memlimit_ram(), lim;
    ssize_t n = fio_read_small("/proc/self/cgroup", text, sizeof(text));

    if (cap)
        snprintf(where, cap, "RAM");
    if (n < 0)
        return best;
    if (cpus_parse_cgroup(text, (size_t)n, path, sizeof(path)) == 0) {
        lim = memlimit_at(MEMLIMIT_CGROUP_ROOT, path, v2, w, sizeof(w));
        if (lim && (!best || lim < best)) {
            best = lim;
            if (cap)
                snprintf(where, cap, "%s", w);
        }
    }
    if (memlimit_parse_v1_path(text, (size_t)n, path, sizeof(path)) == 0) {
        lim = memlimit_at(MEMLIMIT_CGROUP_ROOT "/memory", path, v1, w, sizeof(w));
        if (lim && (!best || lim < best)) {
            best = lim;
            if (cap)
                snprintf(where, cap, "%s", w);
        }
    }
    return best;
}
