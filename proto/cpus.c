/*
 * cpus.c - the CPUs a process may use (cpus.h): its affinity mask and the
 * cgroup v2 cpu.max quotas above it; CPU lists read and written.
 */
#include "cpus.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fileio.h"
#include "strnum.h"

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The number in p[0..len), blanks around it allowed: 0, or -EINVAL. */
static int trimmed_u64(const char *p, size_t len, uint64_t *out)
{
    while (len && is_blank(*p))
        p++, len--;
    while (len && is_blank(p[len - 1]))
        len--;
    return strnum_u64(p, len, out) < 0 ? -EINVAL : 0;
}

int cpus_parse_list(const char *buf, size_t len, uint64_t *set, unsigned nbits)
{
    uint64_t tmp[CPUS_LIST_BITS_MAX / 64] = {0};
    size_t off = 0;

    if (nbits == 0 || nbits % 64 || nbits > CPUS_LIST_BITS_MAX)
        return -EINVAL;
    for (;;) {
        const char *p = buf + off, *end = memchr(p, ',', len - off);
        size_t n = end ? (size_t)(end - p) : len - off;
        const char *dash = memchr(p, '-', n);
        uint64_t a, b;

        if (dash ? trimmed_u64(p, (size_t)(dash - p), &a) < 0 ||
                       trimmed_u64(dash + 1, n - (size_t)(dash + 1 - p), &b) < 0
                 : trimmed_u64(p, n, &a) < 0)
            return -EINVAL;
        if (!dash)
            b = a;
        if (a > b || b >= nbits)
            return -EINVAL;
        for (uint64_t i = a; i <= b; i++)
            tmp[i / 64] |= 1ull << (i % 64);
        if (!end)
            break;
        off += n + 1;
    }
    memcpy(set, tmp, nbits / 8);
    return 0;
}

static bool has(const uint64_t *set, unsigned i)
{
    return (set[i / 64] >> (i % 64)) & 1;
}

int cpus_format_list(const uint64_t *set, unsigned nbits, char *buf, size_t cap)
{
    size_t used = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < nbits;) {
        unsigned j = i;
        int n;

        if (!has(set, i)) {
            i++;
            continue;
        }
        while (j + 1 < nbits && has(set, j + 1))
            j++;
        n = j > i ? snprintf(buf + used, cap - used, "%s%u-%u", used ? "," : "", i, j)
                  : snprintf(buf + used, cap - used, "%s%u", used ? "," : "", i);
        if (n < 0 || (size_t)n >= cap - used)
            return -ENOSPC;
        used += (size_t)n;
        i = j + 1;
    }
    return (int)used;
}

unsigned cpus_count(const uint64_t *set, unsigned nbits)
{
    unsigned n = 0;

    for (unsigned i = 0; i < nbits / 64; i++)
        n += (unsigned)__builtin_popcountll(set[i]);
    return n;
}

int cpus_parse_cgroup(const char *buf, size_t len, char *path, size_t cap)
{
    size_t off = 0;

    while (off < len) {
        const char *lf = memchr(buf + off, '\n', len - off);
        size_t n = lf ? (size_t)(lf - (buf + off)) : len - off;

        if (n >= 3 && memcmp(buf + off, "0::", 3) == 0) {
            if (n - 3 + 1 > cap)
                return -ENAMETOOLONG;
            memcpy(path, buf + off + 3, n - 3);
            path[n - 3] = '\0';
            return 0;
        }
        off += n + (lf != NULL);
    }
    return -ENOENT;
}

int cpus_parse_cpu_max(const char *buf, size_t len, uint64_t *quota, uint64_t *period)
{
    size_t sp, end = len;
    uint64_t q = 0, per;

    while (end > 0 && (buf[end - 1] == '\n' || buf[end - 1] == ' '))
        end--;
    for (sp = 0; sp < end && buf[sp] != ' '; sp++)
        ;
    if (sp == 0 || sp == end)
        return -EINVAL;
    if (strnum_u64(buf + sp + 1, end - sp - 1, &per) < 0 || per == 0)
        return -EINVAL;
    if (!(sp == 3 && memcmp(buf, "max", 3) == 0) &&
        (strnum_u64(buf, sp, &q) < 0 || q == 0))
        return -EINVAL;
    *quota = q;
    *period = per;
    return 0;
}

uint32_t cpus_affinity(void)
{
    cpu_set_t *set = CPU_ALLOC(4096);
    size_t size = CPU_ALLOC_SIZE(4096);
    long n = -1;

    if (set && sched_getaffinity(0, size, set) == 0)
        n = CPU_COUNT_S(size, set);
    CPU_FREE(set);
    if (n < 1)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

bool cpus_cgroup_parent(char *dir)
{
    char *slash = strrchr(dir, '/');

    if (!slash || (slash == dir && dir[1] == '\0'))
        return false;
    if (slash == dir)
        dir[1] = '\0'; /* "/a" -> "/" */
    else
        *slash = '\0';
    return true;
}

uint32_t cpus_quota_at(const char *root, const char *path, char *where, size_t cap)
{
    char text[256], dir[2048], file[2400];
    uint32_t best = 0;

    if (cap)
        where[0] = '\0';
    if ((size_t)snprintf(dir, sizeof(dir), "%s", path) >= sizeof(dir))
        return 0;
    for (;;) {
        uint64_t quota, period;
        size_t dl = strlen(dir);
        ssize_t n;

        snprintf(file, sizeof(file), "%s%s%scpu.max", root, dir,
                 dl && dir[dl - 1] == '/' ? "" : "/");
        n = fio_read_small(file, text, sizeof(text));
        if (n >= 0 && cpus_parse_cpu_max(text, (size_t)n, &quota, &period) == 0 && quota > 0) {
            uint64_t cpus = quota / period + (quota % period != 0);

            if (cpus > UINT32_MAX)
                cpus = UINT32_MAX;
            if (!best || cpus < best) {
                best = (uint32_t)cpus;
                if (cap)
                    snprintf(where, cap, "cpu.max %llu %llu in %s", (unsigned long long)quota,
                             (unsigned long long)period, file);
            }
        }
        if (!cpus_cgroup_parent(dir))
            break;
    }
    return best;
}

uint32_t cpus_quota(char *where, size_t cap)
{
    char text[4096], path[2048];
    ssize_t n = fio_read_small("/proc/self/cgroup", text, sizeof(text));

    if (cap)
        where[0] = '\0';
    if (n < 0 || cpus_parse_cgroup(text, (size_t)n, path, sizeof(path)) < 0)
        return 0;
    return cpus_quota_at(CPUS_CGROUP_ROOT, path, where, cap);
}

uint32_t cpus_usable(void)
{
    uint32_t cpus = cpus_affinity(), quota = cpus_quota(NULL, 0);

    return quota && quota < cpus ? quota : cpus;
}
