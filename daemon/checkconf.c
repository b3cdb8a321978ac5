/*
 * checkconf.c - ringfeedd --check-config (checkconf.h).
 *
 * The parser (proto/conf.c) stops at a file's first bad line.  To name
 * every one, the check parses again with each refused line emptied (its
 * newline kept, so every later line keeps its number) until the file
 * parses or CHECK_MAX_PROBLEMS are named; what is left is the config the
 * daemon would run with those lines fixed, and its datasets, plugins and
 * numa-node (a node of this machine, sharing a CPU with cpu-list) are
 * checked from it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "affinity.h"
#include "catalog.h"
#include "checkconf.h"
#include "confload.h"
#include "dataset.h"
#include "fileio.h"
#include "numa.h"
#include "plugin.h"
#include "remote.h"
#include "strnum.h"

#define CHECK_MAX_PROBLEMS 100

/* The number N of a message "line N: ...", with *rest after it; 0 if none. */
static unsigned line_of_msg(const char *msg, const char **rest)
{
    const char *p = msg + 5;
    uint64_t v;
    size_t n = 0;

    if (strncmp(msg, "line ", 5) != 0)
        return 0;
    while (p[n] >= '0' && p[n] <= '9')
        n++;
    if (n == 0 || p[n] != ':' || strnum_u64(p, n, &v) < 0 || v == 0 || v > UINT32_MAX)
        return 0;
    *rest = p + n + 1 + (p[n + 1] == ' ');
    return (unsigned)v;
}

/* Empties line `line` (1-based) of buf[0..*len), keeping its newline. */
static void empty_line(char *buf, size_t *len, unsigned line)
{
    size_t pos = 0, end;

    for (unsigned k = 1; k < line && pos < *len; k++) {
        const char *lf = memchr(buf + pos, '\n', *len - pos);

        pos = lf ? (size_t)(lf - buf) + 1 : *len;
    }
    end = pos;
    while (end < *len && buf[end] != '\n')
        end++;
    memmove(buf + pos, buf + end, *len - end);
    *len -= end - pos;
}

/* The line (1-based) whose key is key, or 0. */
static unsigned line_of_key(const char *buf, size_t len, const char *key)
{
    size_t klen = strlen(key), pos = 0;
    unsigned line = 0;

    while (pos < len) {
        const char *lf = memchr(buf + pos, '\n', len - pos);
        size_t end = lf ? (size_t)(lf - buf) : len, p = pos;

        line++;
        while (p < end && (buf[p] == ' ' || buf[p] == '\t'))
            p++;
        if (end - p > klen && memcmp(buf + p, key, klen) == 0 &&
            (buf[p + klen] == ' ' || buf[p + klen] == '\t' || buf[p + klen] == '='))
            return line;
        pos = end + 1;
    }
    return 0;
}

/* "FILE:LINE: " or "FILE: " or "--flags: " before a message. */
static void where(FILE *f, const char *path, unsigned line)
{
    if (!path)
        fprintf(f, "ringfeedd: command line: ");
    else if (line)
        fprintf(f, "%s:%u: ", path, line);
    else
        fprintf(f, "%s: ", path);
}

/*
 * Parses the file at path into *c (reset to the defaults first), naming
 * every line the parser refuses on err and going on past it (each counted
 * in *problems).  Returns 0, or -1 when the file cannot be read (named and
 * counted).
 */
static int check_file(const char *path, struct conf *c, FILE *err, unsigned *problems)
{
    char *text = NULL;
    size_t len = 0;
    struct rf_err e;
    int rc = fio_read_file(AT_FDCWD, path, 1u << 20, &text, &len);

    conf_defaults(c);
    if (rc < 0) {
        fprintf(err, "%s: %s\n", path, rc == -EFBIG    ? "larger than 1 MiB"
                                       : rc == -EINVAL ? "not a regular file"
                                                       : strerror(-rc));
        ++*problems;
        return -1;
    }
    while (conf_parse(text, len, c, &e) < 0) {
        const char *rest = e.msg;
        unsigned line = line_of_msg(e.msg, &rest);

        where(err, path, line);
        fprintf(err, "%s\n", rest);
        if (!line || ++*problems >= CHECK_MAX_PROBLEMS)
            break; /* not a line's fault, or enough said */
        empty_line(text, &len, line);
    }
    free(text);
    return 0;
}

/* The last of files[0..n) that sets key, and its line; NULL if none. */
static const char *locate(char (*files)[4096], int n, const char *key, unsigned *line)
{
    for (int i = n - 1; i >= 0; i--) {
        char *text = NULL;
        size_t len = 0;

        if (fio_read_file(AT_FDCWD, files[i], 1u << 20, &text, &len) < 0)
            continue;
        *line = line_of_key(text, len, key);
        free(text);
        if (*line)
            return files[i];
    }
    return NULL;
}

struct notes {
    FILE *err;
};

static void print_override(void *arg, const char *what, const char *winner)
{
    struct notes *n = arg;

    fprintf(n->err, "%s: note: %s is set again here and wins over the files before\n", winner,
            what);
}

int checkconf_run(const char *path, const struct conf *flags, FILE *out, FILE *err)
{
    static struct conf c, layer; /* large: off the stack */
    static char files[1 + CONFLOAD_DROPINS_MAX][4096];
    struct plugin_set plugins = {0};
    struct notes notes = {err};
    unsigned problems = 0, warnings = 0, datasets = 0, remote = 0;
    int nfiles = 0;
    struct rf_err e;

    conf_defaults(&c);
    if (path) {
        int n;

        snprintf(files[0], sizeof(files[0]), "%s", path);
        nfiles = 1;
        if (check_file(path, &c, err, &problems) < 0)
            return 1;
        n = confload_dropins(path, files + 1, CONFLOAD_DROPINS_MAX, &e);
        if (n < 0) {
            fprintf(err, "%s\n", e.msg);
            problems++;
            n = 0;
        }
        for (int i = 1; i <= n; i++) {
            nfiles++;
            if (check_file(files[i], &layer, err, &problems) < 0)
                continue;
            if (confload_layer(&c, &layer, files[i], print_override, &notes, &e) < 0) {
                where(err, files[i], 0);
                fprintf(err, "%s\n", e.msg);
                problems++;
            }
        }
    }
    if (conf_merge(&c, flags, &e) < 0) {
        where(err, NULL, 0);
        fprintf(err, "%s\n", e.msg);
        problems++;
    }
    if (conf_check_mixtures(&c, &e) < 0) {
        where(err, path, 0);
        fprintf(err, "%s\n", e.msg);
        problems++;
    }
    if (catalog_load_plugins(&c, &plugins, &e) < 0) {
        where(err, path, 0);
        fprintf(err, "%s\n", e.msg);
        problems++;
    }
    plugin_set_free(&plugins);
    {
        /* numa-node names a node of this machine with CPUs and memory, and
         * shares a CPU with cpu-list: what the daemon's start checks */
        struct affinity_plan plan;

        if (affinity_plan(&c, NUMA_SYSFS_ROOT, &plan, &e) < 0) {
            unsigned line = 0;
            const char *file = locate(files, nfiles, "numa-node", &line);

            where(err, file, line);
            fprintf(err, "%s\n", e.msg);
            problems++;
        }
    }
    for (unsigned i = 0; i < c.n_datasets; i++) {
        const struct conf_dataset *cd = &c.datasets[i];
        char key[sizeof("dataset.") + sizeof(cd->name)];
        struct dataset *ds;

        snprintf(key, sizeof(key), "dataset.%s", cd->name);
        if (conf_dataset_remote(cd->dir)) {
            /* the URL was checked by the parser; its files are fetched at
             * start, off the loop (remote.h), not here */
            if (!remote_built()) {
                unsigned line = 0;

                where(err, locate(files, nfiles, key, &line), line);
                fprintf(err, "warning: %s = %s: this ringfeedd was built without remote "
                             "datasets (libcurl); the daemon starts without it\n", key, cd->dir);
                warnings++;
                continue;
            }
            remote++;
            continue;
        }
        if (dataset_open(cd->dir, &ds, &e) < 0) {
            unsigned line = 0;
            const char *file = conf_is_set(flags, CONF_DATASET) &&
                                       conf_find_dataset(flags, cd->name)
                                   ? NULL
                                   : locate(files, nfiles, key, &line);

            where(err, file, line);
            fprintf(err, "warning: %s = %s does not open: %s (the daemon starts without it; "
                         "attaches to it are refused until a reload opens it)\n",
                    key, cd->dir, e.msg);
            warnings++;
            continue;
        }
        dataset_close(ds);
        datasets++;
    }
    if (problems)
        fprintf(err, "%s: %u problem(s)%s\n", path ? path : "ringfeedd", problems,
                problems >= CHECK_MAX_PROBLEMS ? " (the first ones)" : "");
    else
        fprintf(out, "%s: the configuration is good: %u dataset(s) open, %u warning(s)%s%s\n",
                path ? path : "the command line", datasets, warnings,
                nfiles > 1 ? ", drop-ins read" : "",
                remote ? ", remote dataset(s) fetched into cache-dir at start" : "");
    return problems ? 1 : 0;
}
