/*
 * test_cpus.c - proto/cpus.c: the cgroup and cpu.max parsers, and the
 * walk from a cgroup up to the root over a hierarchy made here in a
 * temporary folder (the tightest quota wins, rounded up; "max", a
 * malformed file and a missing one count as no quota); the affinity
 * count against sched_getaffinity; cpus_usable within both; CPU lists
 * read, refused and written back.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpus.h"
#include "tap.h"

static void test_parsers(void)
{
    static const char cg[] = "12:pids:/user.slice\n0::/system.slice/ringfeedd.service\n";
    uint64_t q = 7, per = 7;
    char path[64];

    TAP_IS_INT(cpus_parse_cgroup(cg, strlen(cg), path, sizeof(path)), 0, "cgroup v2 line");
    TAP_IS_STR(path, "/system.slice/ringfeedd.service", "its path");
    TAP_IS_INT(cpus_parse_cgroup("0::/\n", 5, path, sizeof(path)), 0, "the root");
    TAP_IS_STR(path, "/", "is /");
    TAP_IS_INT(cpus_parse_cgroup("0::/a", 5, path, sizeof(path)), 0, "a last line without LF");
    TAP_IS_STR(path, "/a", "is /a");
    TAP_IS_INT(cpus_parse_cgroup("1:cpu:/\n", 8, path, sizeof(path)), -ENOENT,
               "cgroup v1 only: no v2 path");
    TAP_IS_INT(cpus_parse_cgroup("", 0, path, sizeof(path)), -ENOENT, "empty: no path");
    TAP_IS_INT(cpus_parse_cgroup(cg, strlen(cg), path, 8), -ENAMETOOLONG,
               "a path that does not fit");

    TAP_IS_INT(cpus_parse_cpu_max("max 100000\n", 11, &q, &per), 0, "max: no quota");
    TAP_OK(q == 0 && per == 100000, "quota 0, period 100000");
    TAP_IS_INT(cpus_parse_cpu_max("150000 100000\n", 14, &q, &per), 0, "a quota");
    TAP_OK(q == 150000 && per == 100000, "1.5 CPUs");
    q = per = 7;
    TAP_IS_INT(cpus_parse_cpu_max("150000 0\n", 9, &q, &per), -EINVAL, "a zero period");
    TAP_IS_INT(cpus_parse_cpu_max("0 100000\n", 9, &q, &per), -EINVAL, "a zero quota");
    TAP_IS_INT(cpus_parse_cpu_max("lots\n", 5, &q, &per), -EINVAL, "one word");
    TAP_IS_INT(cpus_parse_cpu_max("-5 100000", 9, &q, &per), -EINVAL, "a sign");
    TAP_IS_INT(cpus_parse_cpu_max("5 100000 3", 10, &q, &per), -EINVAL, "three words");
    TAP_IS_INT(cpus_parse_cpu_max("", 0, &q, &per), -EINVAL, "empty");
    TAP_OK(q == 7 && per == 7, "nothing written on a refusal");
}

/* root/rel/cpu.max holding text (NULL: the folder only). */
static void put(const char *root, const char *rel, const char *text)
{
    char p[512];
    FILE *f;

    snprintf(p, sizeof(p), "%s%s", root, rel);
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        tap_bail("mkdir %s", p);
    if (!text)
        return;
    snprintf(p, sizeof(p), "%s%s/cpu.max", root, rel);
    f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        tap_bail("write %s", p);
}

static void test_walk(void)
{
    char root[] = "/tmp/ringfeed-cpus-XXXXXX", where[512], want[600];

    if (!mkdtemp(root))
        tap_bail("mkdtemp");
    put(root, "", "max 100000\n");          /* the root: no quota */
    put(root, "/a", "350000 100000\n");     /* 3.5 CPUs: 4 */
    put(root, "/a/b", "max 100000\n");      /* none here */
    put(root, "/a/b/c", "20 100000\n");     /* a sliver: 1 */
    put(root, "/a/d", "150000 50000\n");    /* 3 exactly */
    put(root, "/a/d/e", "900000 100000\n"); /* 9, looser than its parent */
    put(root, "/f", "garbage\n");           /* malformed: no quota */
    put(root, "/f/g", NULL);                /* no cpu.max at all */

    TAP_IS_INT(cpus_quota_at(root, "/a/b", where, sizeof(where)), 4,
               "a parent's quota limits a child without one (3.5 CPUs: 4)");
    snprintf(want, sizeof(want), "cpu.max 350000 100000 in %s/a/cpu.max", root);
    TAP_IS_STR(where, want, "where names the file and its figures");
    TAP_IS_INT(cpus_quota_at(root, "/a/b/c", where, sizeof(where)), 1,
               "a quota under one CPU counts as 1");
    TAP_IS_INT(cpus_quota_at(root, "/a/d/e", where, sizeof(where)), 3,
               "the tightest on the way up wins, not the nearest");
    snprintf(want, sizeof(want), "cpu.max 150000 50000 in %s/a/d/cpu.max", root);
    TAP_IS_STR(where, want, "... and is the one named");
    TAP_IS_INT(cpus_quota_at(root, "/a/d/e/", where, sizeof(where)), 3, "a trailing slash");
    TAP_IS_INT(cpus_quota_at(root, "/f/g", where, sizeof(where)), 0,
               "malformed, missing and max: no quota");
    TAP_IS_STR(where, "", "... and nothing named");
    TAP_IS_INT(cpus_quota_at(root, "/", NULL, 0), 0, "the root alone, no where");
    TAP_IS_INT(cpus_quota_at(root, "/no/such/cgroup", where, sizeof(where)), 0,
               "a cgroup that is not there");
    TAP_IS_INT(cpus_quota_at(root, "/a/missing", NULL, 0), 4,
               "a missing child still sees its parent's quota");

    snprintf(want, sizeof(want), "rm -rf '%s'", root);
    if (system(want) != 0)
        tap_bail("%s", want);
}

static void test_machine(void)
{
    cpu_set_t set;
    uint32_t aff = cpus_affinity(), use = cpus_usable(), quota = cpus_quota(NULL, 0);

    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        TAP_IS_INT(aff, CPU_COUNT(&set), "cpus_affinity: the CPUs of the affinity mask");
    TAP_OK(use >= 1 && use <= aff, "cpus_usable: 1 .. the affinity count");
    TAP_IS_INT(use, quota && quota < aff ? quota : aff, "cpus_usable: lowered to the quota");
}

static void test_lists(void)
{
    uint64_t set[16], back[16];
    char buf[64];

    memset(set, 0xee, sizeof(set));
    TAP_IS_INT(cpus_parse_list("0-15,32-47", 10, set, 1024), 0, "list: two ranges");
    TAP_OK(set[0] == 0x0000ffff0000ffffull && set[1] == 0 && set[15] == 0,
           "  those bits, the rest cleared");
    TAP_IS_INT(cpus_count(set, 1024), 32, "  32 CPUs");
    TAP_IS_INT(cpus_parse_list(" 3 , 5 - 6 ,1023", 16, set, 1024), 0,
               "list: blanks around numbers");
    TAP_OK(set[0] == 0x68 && set[15] == 1ull << 63, "  3, 5, 6 and 1023");
    TAP_IS_INT(cpus_format_list(set, 1024, buf, sizeof(buf)), 10, "list: written");
    TAP_IS_STR(buf, "3,5-6,1023", "  as the shortest list");
    TAP_IS_INT(cpus_parse_list(buf, strlen(buf), back, 1024), 0, "  read back");
    TAP_OK(memcmp(set, back, sizeof(set)) == 0, "  the same set");
    TAP_IS_INT(cpus_format_list(set, 1024, buf, 6), -ENOSPC, "list: a buffer too small");
    TAP_OK(strlen(buf) < 6, "  cut, terminated");
    memset(back, 0, sizeof(back));
    TAP_IS_INT(cpus_format_list(back, 1024, buf, sizeof(buf)), 0, "list: the empty set");
    TAP_IS_STR(buf, "", "  is empty text");
    memcpy(back, set, sizeof(set));
    for (unsigned i = 0; i < 9; i++) {
        static const char *const bad[] = {"", ",", "1,", ",1", "1,,2", "5-3", "1024", "a-b",
                                          "1-2-3"};

        tap_ok(cpus_parse_list(bad[i], strlen(bad[i]), set, 1024) == -EINVAL,
               "list: \"%s\" refused", bad[i]);
    }
    TAP_OK(memcmp(set, back, sizeof(set)) == 0, "list: a refusal leaves the set alone");
    TAP_IS_INT(cpus_parse_list("64", 2, set, 64), -EINVAL, "list: past nbits");
    TAP_IS_INT(cpus_parse_list("0", 1, set, 100), -EINVAL, "list: nbits not a multiple of 64");
}

int main(void)
{
    test_parsers();
    test_lists();
    test_walk();
    test_machine();
    return tap_done();
}
