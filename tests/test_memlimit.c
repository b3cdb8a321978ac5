/*
 * test_memlimit.c - proto/memlimit.c: the limit-file and cgroup v1 path
 * parsers, and the walk from a cgroup up to the root over a hierarchy
 * made here in a temporary folder (the tightest limit wins among the files
 * named, memory.high too; "max", v1's "unlimited", a malformed file and a
 * missing one count as none); memlimit_usable within the RAM.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "memlimit.h"
#include "tap.h"

static void test_parsers(void)
{
    static const char cg[] = "12:pids:/user.slice\n4:memory:/docker/abc\n0::/x\n";
    static const char joined[] = "3:cpu,memory,blkio:/a/b\n";
    uint64_t v = 7;
    char path[64];

    TAP_IS_INT(memlimit_parse("max\n", 4, &v), 0, "max");
    TAP_OK(v == 0, "is none");
    TAP_IS_INT(memlimit_parse("268435456\n", 10, &v), 0, "a count");
    TAP_OK(v == 268435456, "its bytes");
    TAP_IS_INT(memlimit_parse("9223372036854771712\n", 20, &v), 0, "v1's unlimited");
    TAP_OK(v == 0, "is none");
    v = 7;
    TAP_IS_INT(memlimit_parse("lots\n", 5, &v), -EINVAL, "a word");
    TAP_IS_INT(memlimit_parse("", 0, &v), -EINVAL, "empty");
    TAP_IS_INT(memlimit_parse("-1", 2, &v), -EINVAL, "a sign");
    TAP_IS_INT(memlimit_parse("1 2", 3, &v), -EINVAL, "two words");
    TAP_OK(v == 7, "nothing written on a refusal");

    TAP_IS_INT(memlimit_parse_v1_path(cg, strlen(cg), path, sizeof(path)), 0, "v1 memory line");
    TAP_IS_STR(path, "/docker/abc", "its path");
    TAP_IS_INT(memlimit_parse_v1_path(joined, strlen(joined), path, sizeof(path)), 0,
               "memory among joined controllers");
    TAP_IS_STR(path, "/a/b", "its path");
    TAP_IS_INT(memlimit_parse_v1_path("0::/\n", 5, path, sizeof(path)), -ENOENT,
               "v2 only: no v1 memory path");
    TAP_IS_INT(memlimit_parse_v1_path("5:memoryx:/a\n", 13, path, sizeof(path)), -ENOENT,
               "a controller merely starting with memory");
    TAP_IS_INT(memlimit_parse_v1_path(cg, strlen(cg), path, 5), -ENAMETOOLONG,
               "a path that does not fit");
}

static void put(const char *root, const char *rel, const char *file, const char *text)
{
    char p[512];
    FILE *f;

    snprintf(p, sizeof(p), "%s%s", root, rel);
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        tap_bail("mkdir %s", p);
    if (!file)
        return;
    snprintf(p, sizeof(p), "%s%s/%s", root, rel, file);
    f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        tap_bail("write %s", p);
}

static void test_walk(void)
{
    static const char *const v2[] = {"memory.max", "memory.high", NULL};
    char root[] = "/tmp/ringfeed-memlimit-XXXXXX", where[512], want[600];

    if (!mkdtemp(root))
        tap_bail("mkdtemp");
    put(root, "/a", "memory.max", "1073741824\n");     /* 1 GiB */
    put(root, "/a/b", "memory.max", "max\n");
    put(root, "/a/b", "memory.high", "536870912\n");   /* 512 MiB: tighter */
    put(root, "/a/b/c", "memory.max", "2147483648\n"); /* looser than above */
    put(root, "/d", "memory.max", "garbage\n");
    put(root, "/d/e", NULL, NULL);

    TAP_OK(memlimit_at(root, "/a/b/c", v2, where, sizeof(where)) == 536870912,
           "the tightest on the way up wins, memory.high included");
    snprintf(want, sizeof(want), "memory.high 536870912 in %s/a/b/memory.high", root);
    TAP_IS_STR(where, want, "where names the file and the figure");
    TAP_OK(memlimit_at(root, "/a/missing", v2, NULL, 0) == 1073741824,
           "a missing child still sees its parent's limit");
    TAP_OK(memlimit_at(root, "/d/e", v2, where, sizeof(where)) == 0,
           "malformed and missing: none");
    TAP_IS_STR(where, "", "... and nothing named");
    TAP_OK(memlimit_at(root, "/", v2, NULL, 0) == 0, "the root alone");
    snprintf(want, sizeof(want), "rm -rf '%s'", root);
    if (system(want) != 0)
        tap_bail("%s", want);
}

static void test_machine(void)
{
    char where[512];
    uint64_t ram = memlimit_ram(), use = memlimit_usable(where, sizeof(where));

    TAP_OK(ram > 0, "memlimit_ram: the RAM is known");
    TAP_OK(use > 0 && use <= ram, "memlimit_usable: at most the RAM");
    tap_ok(strcmp(where, "RAM") == 0 ? use == ram : use < ram,
           "and says what set it (%s)", where);
}

int main(void)
{
    test_parsers();
    test_walk();
    test_machine();
    return tap_done();
}
