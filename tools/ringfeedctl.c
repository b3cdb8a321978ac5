/*
 * ringfeedctl.c - the operator's command line for a running ringfeedd:
 *
 *     ringfeedctl [--socket PATH] [--json] ping|status|stats|workers N|auto|datasets|metrics|reload
 *     ringfeedctl [--socket PATH] top [--once] [--interval SECONDS]   (ctl_top.c)
 *
 * It connects to the control socket (--socket, else $RINGFEED_SOCKET, else
 * $XDG_RUNTIME_DIR/ringfeed.sock, else /run/ringfeed/ringfeed.sock), sends
 * the verb's line, reads the reply with proto/ctl.h's parser and prints it
 * for a person or, with --json, as one JSON object on one line.
 *
 * Output, per verb (human / --json):
 *   ping      "pong"                       {"reply":"pong"}
 *   status    bare words on a line, then    {"status":"<bare words>",
 *             key=value pairs aligned as     "<key>":<value>,..., and
 *             "key  value" lines             "workers_alive", "workers_target",
 *                                            "uptime_s" as numbers}
 *   stats     "key  value" lines, keys       {"<key>":<value>,...}
 *             padded to the longest
 *   workers   "workers: N" or "workers: auto" {"workers":N} or {"workers":"auto"}
 *   reload    "reloaded: WHAT CHANGED"       {"reply":"reloaded: ..."}; a refused
 *             reload is the daemon's ERR (exit 1), as for every verb
 *   datasets  a table: NAME then one         {"datasets":[{"name":"...",
 *             column per key (SAMPLES KIND    "<key>":<value>,...},...]}
 *             SHAPE CLASSES ...), aligned
 *   metrics   the Prometheus text as sent    {"metrics":{"<series>":<value>,...}}
 *                                            (# comment lines left out)
 * `metrics --output FILE` writes that to FILE instead, atomically for a
 * reader such as node_exporter's textfile collector: into a new file
 * FILE.tmp.XXXXXX in the same folder (mkstemp: created, never opened
 * through a name someone else put there, so a symlink planted in a folder
 * others may write cannot redirect it), fsync'd, then renamed over FILE;
 * on any failure FILE is left as it was and the temporary file removed.
 * Values that are JSON numbers are written as numbers, everything else as
 * escaped strings.  Exit status: 0 done; 1 the daemon answered ERR (its
 * message on stderr) or could not be reached; 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_top.h"
#include "ctlconn.h"
#include "jsonw.h"
#include "strnum.h"

#define MAX_COLS 16

static const char *prog = "ringfeedctl";

static void usage(FILE *f)
{
    fprintf(f, "usage: %s [--socket PATH] [--json] COMMAND\n"
               "       %s [--socket PATH] " CTL_TOP_USAGE "\n\ncommands:\n", prog, prog);
    for (int v = CTL_VERB_NONE + 1; v < CTL_VERB_COUNT; v++) {
        const struct ctl_verb_def *d = ctl_verb_def((enum ctl_verb)v);
        char name[64];

        if (v == CTL_VERB_ATTACH || v == CTL_VERB_OPEN)
            continue; /* libringfeed's verbs */
        snprintf(name, sizeof(name), "%s", d->usage);
        for (char *p = name; *p && *p != ' '; p++)
            *p = (char)(*p - 'A' + 'a');
        fprintf(f, "  %-16s %s\n", name, d->help);
    }
    fprintf(f, "  %-16s %s\n", "top", "a refreshing view of the workers and clients:");
    fprintf(f, "  %-16s %s\n", "", CTL_TOP_USAGE);
    ctl_top_help(f, 19);
    fprintf(f, "\noptions:\n"
               "  --socket PATH  the daemon's control socket (default: $RINGFEED_SOCKET,\n"
               "                 else $XDG_RUNTIME_DIR/ringfeed.sock, else\n"
               "                 /run/ringfeed/ringfeed.sock)\n"
               "  --json         print one JSON object\n"
               "  --timeout SECONDS\n"
               "                 how long to wait for the daemon's reply (default 30;\n"
               "                 0.1..3600)\n"
               "  metrics --output FILE\n"
               "                 write FILE atomically (a new FILE.tmp.XXXXXX, fsync,\n"
               "                 rename)\n"
               "  --help         this text\n");
}

/* A span of the reply buffer. */
struct span {
    const char *p;
    size_t n;
};

/* Splits s[0..len) at runs of blanks into at most max tokens. */
static size_t split(const char *s, size_t len, struct span *out, size_t max)
{
    size_t n = 0, i = 0;

    while (i < len && n < max) {
        size_t j;

        while (i < len && (s[i] == ' ' || s[i] == '\t'))
            i++;
        if (i == len)
            break;
        for (j = i; j < len && s[j] != ' ' && s[j] != '\t'; j++)
            ;
        out[n++] = (struct span){s + i, j - i};
        i = j;
    }
    return n;
}

static size_t eq_at(struct span t)
{
    const char *e = memchr(t.p, '=', t.n);

    return e ? (size_t)(e - t.p) : t.n;
}

/* ---- one printer per verb ---- */

static void print_ping(const char *text, size_t len, bool json)
{
    if (json) {
        fputs("{\"reply\":", stdout);
        json_string(stdout, text, len);
        fputs("}\n", stdout);
    } else {
        printf("%.*s\n", (int)len, text);
    }
}

/* --json status: beside the words as sent, the numbers they hold, for a
 * script: workers=A/B gives "workers_alive":A,"workers_target":B and
 * uptime=Ns "uptime_s":N. */
static void status_numbers(const char *key, size_t kn, const char *v, size_t vn)
{
    const char *slash = memchr(v, '/', vn);
    uint64_t a, b;

    if (kn == 7 && memcmp(key, "workers", 7) == 0 && slash &&
        strnum_u64(v, (size_t)(slash - v), &a) == 0 &&
        strnum_u64(slash + 1, vn - (size_t)(slash - v) - 1, &b) == 0)
        printf(",\"workers_alive\":%llu,\"workers_target\":%llu", (unsigned long long)a,
               (unsigned long long)b);
    else if (kn == 6 && memcmp(key, "uptime", 6) == 0 && vn > 1 && v[vn - 1] == 's' &&
             strnum_u64(v, vn - 1, &a) == 0)
        printf(",\"uptime_s\":%llu", (unsigned long long)a);
}

static void print_status(const char *text, size_t len, bool json)
{
    struct span t[128], bare[128];
    size_t n = split(text, len, t, 128), nbare = 0, width = 0;
    bool first = true;

    for (size_t i = 0; i < n; i++) {
        size_t k = eq_at(t[i]);

        if (k == t[i].n || k == 0)
            bare[nbare++] = t[i];
        else if (k > width)
            width = k;
    }
    if (json) {
        fputs("{\"status\":\"", stdout);
        for (size_t i = 0; i < nbare; i++) {
            if (i)
                fputc(' ', stdout);
            json_escape(stdout, bare[i].p, bare[i].n);
        }
        fputc('"', stdout);
        for (size_t i = 0; i < n; i++) {
            size_t k = eq_at(t[i]);

            if (k == t[i].n || k == 0)
                continue;
            fputc(',', stdout);
            json_string(stdout, t[i].p, k);
            fputc(':', stdout);
            json_value(stdout, t[i].p + k + 1, t[i].n - k - 1);
            status_numbers(t[i].p, k, t[i].p + k + 1, t[i].n - k - 1);
        }
        fputs("}\n", stdout);
        return;
    }
    for (size_t i = 0; i < nbare; i++)
        printf("%s%.*s", first ? "" : " ", (int)bare[i].n, bare[i].p), first = false;
    if (nbare)
        putchar('\n');
    for (size_t i = 0; i < n; i++) {
        size_t k = eq_at(t[i]);

        if (k == t[i].n || k == 0)
            continue;
        printf("%-*.*s  %.*s\n", (int)width, (int)k, t[i].p, (int)(t[i].n - k - 1),
               t[i].p + k + 1);
    }
}

/* Loops over the body lines of a multi-line reply: off/len set to each. */
#define FOR_LINES(buf, rep, off, len)                                         \
    for (size_t cur_ = 0; ctl_reply_next_line(buf, rep, &cur_, &off, &len);)

static void print_stats(const char *buf, const struct ctl_reply *rep, bool json)
{
    size_t off, len, width = 0;
    bool first = true;

    FOR_LINES(buf, rep, off, len) {
        size_t k = strcspn(buf + off, " \t\n");

        if (k < len && k > width)
            width = k;
    }
    if (json)
        fputc('{', stdout);
    FOR_LINES(buf, rep, off, len) {
        const char *l = buf + off;
        size_t k = strcspn(l, " \t\n"), v;

        if (k > len)
            k = len;
        for (v = k; v < len && (l[v] == ' ' || l[v] == '\t'); v++)
            ;
        if (json) {
            if (!first)
                fputc(',', stdout);
            json_string(stdout, l, k);
            fputc(':', stdout);
            json_value(stdout, l + v, len - v);
        } else {
            printf("%-*.*s  %.*s\n", (int)width, (int)k, l, (int)(len - v), l + v);
        }
        first = false;
    }
    if (json)
        fputs("}\n", stdout);
}

static void print_workers(const char *text, size_t len, bool json)
{
    struct span t[4];
    size_t n = split(text, len, t, 4);
    struct span v = n == 2 && t[0].n == 7 && memcmp(t[0].p, "workers", 7) == 0
                        ? t[1]
                        : (struct span){text, len};

    if (json) {
        fputs("{\"workers\":", stdout);
        json_value(stdout, v.p, v.n);
        fputs("}\n", stdout);
    } else {
        printf("workers: %.*s\n", (int)v.n, v.p);
    }
}

/* CLASSES and SOURCES: their lines as the daemon sent them (SOURCES'
 * still escaped, proto/sources.h), or {"classes"|"sources":[...]}. */
static void print_lines(const char *buf, const struct ctl_reply *rep, const char *key, bool json)
{
    size_t off, len;
    bool first = true;

    if (json)
        printf("{\"%s\":[", key);
    FOR_LINES(buf, rep, off, len) {
        if (json) {
            fputs(first ? "" : ",", stdout);
            json_string(stdout, buf + off, len);
        } else {
            printf("%.*s\n", (int)len, buf + off);
        }
        first = false;
    }
    if (json)
        puts("]}");
}

static void print_datasets(const char *buf, const struct ctl_reply *rep, bool json)
{
    char cols[MAX_COLS][32];
    size_t ncols = 1, width[MAX_COLS], off, len;
    bool first = true;

    snprintf(cols[0], sizeof(cols[0]), "name");
    width[0] = 4;
    /* the columns: name, then every key in order of first appearance */
    FOR_LINES(buf, rep, off, len) {
        struct span t[MAX_COLS + 1];
        size_t n = split(buf + off, len, t, MAX_COLS + 1);

        if (n && t[0].n > width[0])
            width[0] = t[0].n;
        for (size_t i = 1; i < n; i++) {
            size_t k = eq_at(t[i]), c;

            if (k == t[i].n || k >= sizeof(cols[0]))
                continue;
            for (c = 1; c < ncols; c++)
                if (strlen(cols[c]) == k && memcmp(cols[c], t[i].p, k) == 0)
                    break;
            if (c == ncols) {
                if (ncols == MAX_COLS)
                    continue;
                memcpy(cols[c], t[i].p, k);
                cols[c][k] = '\0';
                width[c] = k;
                ncols++;
            }
            if (t[i].n - k - 1 > width[c])
                width[c] = t[i].n - k - 1;
        }
    }
    if (json) {
        fputs("{\"datasets\":[", stdout);
    } else {
        for (size_t c = 0; c < ncols; c++) {
            for (size_t i = 0; cols[c][i]; i++)
                putchar(cols[c][i] >= 'a' && cols[c][i] <= 'z' ? cols[c][i] - 'a' + 'A'
                                                               : cols[c][i]);
            if (c + 1 < ncols)
                printf("%*s", (int)(width[c] - strlen(cols[c]) + 2), "");
        }
        putchar('\n');
    }
    FOR_LINES(buf, rep, off, len) {
        struct span t[MAX_COLS + 1];
        size_t n = split(buf + off, len, t, MAX_COLS + 1);

        if (n == 0)
            continue;
        if (json) {
            fputs(first ? "{\"name\":" : ",{\"name\":", stdout);
            json_string(stdout, t[0].p, t[0].n);
            for (size_t i = 1; i < n; i++) {
                size_t k = eq_at(t[i]);

                if (k == t[i].n)
                    continue;
                fputc(',', stdout);
                json_string(stdout, t[i].p, k);
                fputc(':', stdout);
                json_value(stdout, t[i].p + k + 1, t[i].n - k - 1);
            }
            fputc('}', stdout);
        } else {
            for (size_t c = 0; c < ncols; c++) {
                struct span v = {"-", 1};

                if (c == 0)
                    v = t[0];
                for (size_t i = 1; c > 0 && i < n; i++) {
                    size_t k = eq_at(t[i]);

                    if (k == strlen(cols[c]) && memcmp(t[i].p, cols[c], k) == 0)
                        v = (struct span){t[i].p + k + 1, t[i].n - k - 1};
                }
                if (c + 1 < ncols)
                    printf("%-*.*s  ", (int)width[c], (int)v.n, v.p);
                else
                    printf("%.*s", (int)v.n, v.p);
            }
            putchar('\n');
        }
        first = false;
    }
    if (json)
        fputs("]}\n", stdout);
}

/* The value of a Prometheus sample line: after the series (name and an
 * optional {labels} that may hold quoted blanks), before any timestamp. */
static bool metric_split(const char *l, size_t len, struct span *series, struct span *value)
{
    size_t i = 0, j;
    bool quoted = false;

    while (i < len && l[i] != ' ' && l[i] != '{')
        i++;
    if (i < len && l[i] == '{') {
        for (; i < len; i++) {
            if (quoted && l[i] == '\\')
                i++;
            else if (l[i] == '"')
                quoted = !quoted;
            else if (!quoted && l[i] == '}')
                break;
        }
        if (i == len)
            return false;
        i++;
    }
    *series = (struct span){l, i};
    while (i < len && l[i] == ' ')
        i++;
    for (j = i; j < len && l[j] != ' '; j++)
        ;
    *value = (struct span){l + i, j - i};
    return series->n > 0 && value->n > 0;
}

static void print_metrics(const char *buf, const struct ctl_reply *rep, bool json)
{
    size_t off, len;
    bool first = true;

    if (json)
        fputs("{\"metrics\":{", stdout);
    FOR_LINES(buf, rep, off, len) {
        struct span s, v;

        if (!json) {
            printf("%.*s\n", (int)len, buf + off);
            continue;
        }
        if (len == 0 || buf[off] == '#' || !metric_split(buf + off, len, &s, &v))
            continue;
        if (!first)
            fputc(',', stdout);
        json_string(stdout, s.p, s.n);
        fputc(':', stdout);
        json_value(stdout, v.p, v.n);
        first = false;
    }
    if (json)
        fputs("}}\n", stdout);
}

/* metrics' own option, after the command: --output FILE or --output=FILE.
 * Takes it out of argv (so the argument count is the verb's own); returns
 * 0, or -1 when it has no FILE. */
static int take_output(int *argc, char **argv, int at, const char **out)
{
    for (int i = at; i < *argc; i++) {
        int used;

        if (strcmp(argv[i], "--output") == 0) {
            if (i + 1 >= *argc)
                return -1;
            *out = argv[i + 1];
            used = 2;
        } else if (strncmp(argv[i], "--output=", 9) == 0 && argv[i][9]) {
            *out = argv[i] + 9;
            used = 1;
        } else {
            continue;
        }
        memmove(&argv[i], &argv[i + used], (size_t)(*argc - i - used) * sizeof(*argv));
        *argc -= used;
        return 0;
    }
    return 0;
}

/*
 * Sends stdout to a new file beside path, path.tmp.XXXXXX, its name left
 * in tmp (cap bytes).  mkstemp() creates it with O_CREAT|O_EXCL, so a name
 * that exists already, a symlink included, is never opened but passed over
 * for another.  It gets the mode a plain create would (0666 less the
 * umask: the textfile collector reads it as another user).  Returns 0, or
 * -1 with a message and nothing left behind.
 */
static int output_begin(const char *path, char *tmp, size_t cap)
{
    mode_t mask;
    int fd;

    if ((size_t)snprintf(tmp, cap, "%s.tmp.XXXXXX", path) >= cap) {
        fprintf(stderr, "%s: --output %s: the name is too long\n", prog, path);
        return -1;
    }
    fd = mkstemp(tmp);
    if (fd == -1) {
        fprintf(stderr, "%s: --output: cannot create %s: %s\n", prog, tmp, strerror(errno));
        return -1;
    }
    mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) == -1 || fflush(stdout) == EOF ||
        dup2(fd, STDOUT_FILENO) == -1) {
        fprintf(stderr, "%s: --output: cannot write %s: %s\n", prog, tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    close(fd);
    return 0;
}

/* Flushes and fsyncs stdout (tmp, from output_begin), then renames tmp
 * over path.  Returns 0, or 1 with a message and tmp removed. */
static int output_commit(const char *path, const char *tmp)
{
    const char *what = "writing";

    if (fflush(stdout) == EOF || ferror(stdout))
        goto fail;
    what = "fsync of";
    if (fsync(fileno(stdout)) == -1)
        goto fail;
    what = "renaming";
    if (rename(tmp, path) == -1)
        goto fail;
    return 0;

fail:
    fprintf(stderr, "%s: --output: %s %s: %s\n", prog, what, tmp, strerror(errno));
    unlink(tmp);
    return 1;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const struct ctl_verb_def *def;
    const char *socket_path = NULL, *text, *output = NULL;
    char line[CTL_LINE_MAX], tmp[4096];
    struct ctl_reply rep;
    struct ctlconn cc;
    struct rf_err err;
    enum ctl_verb verb;
    bool json = false;
    int c, nargs, rc, timeout_ms = CTLCONN_TIMEOUT_MS;

    while ((c = getopt_long(argc, argv, "+s:jh", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            socket_path = optarg;
            break;
        case 't': {
            char *end;
            double s = strtod(optarg, &end);

            if (end == optarg || *end || !(s >= 0.1 && s <= 3600)) {
                fprintf(stderr, "%s: --timeout %s: seconds to wait for the daemon's reply, "
                        "0.1 to 3600\n", prog, optarg);
                return 2;
            }
            timeout_ms = (int)(s * 1000);
            break;
        }
        case 'j':
            json = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "%s: no command given\n", prog);
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[optind], "top") == 0) {
        if (json) {
            fprintf(stderr, "%s: top has no --json; use stats --json\n", prog);
            return 2;
        }
        return ctl_top_main(prog, socket_path, argc - optind, argv + optind);
    }
    verb = ctl_verb_from_name(argv[optind], strlen(argv[optind]));
    def = ctl_verb_def(verb);
    if (!def || verb == CTL_VERB_ATTACH || verb == CTL_VERB_OPEN) {
        fprintf(stderr, "%s: unknown command \"%s\"\n", prog, argv[optind]);
        usage(stderr);
        return 2;
    }
    if (verb == CTL_VERB_METRICS && take_output(&argc, argv, optind + 1, &output) < 0) {
        fprintf(stderr, "%s: metrics --output takes a FILE\n", prog);
        return 2;
    }
    nargs = argc - optind - 1;
    if (nargs < def->min_args || nargs > def->max_args) {
        fprintf(stderr, "%s: %s takes %s; usage: %s\n", prog, argv[optind],
                def->max_args == 0 ? "no arguments"
                : def->max_args == 1 ? "one argument" : "three arguments", def->usage);
        return 2;
    }
    if (verb == CTL_VERB_WORKERS) {
        uint64_t n;
        const char *a = argv[optind + 1];

        if (strcmp(a, "auto") == 0) {
            snprintf(line, sizeof(line), "%s auto\n", def->name);
        } else if (strnum_u64(a, strlen(a), &n) < 0 || n < CTL_WORKERS_MIN ||
                   n > CTL_WORKERS_MAX) {
            fprintf(stderr, "%s: workers \"%s\": give a number of workers in %d..%d, or auto "
                    "(the daemon sizes the pool under its CPU budget)\n", prog, a,
                    CTL_WORKERS_MIN, CTL_WORKERS_MAX);
            return 2;
        } else {
            snprintf(line, sizeof(line), "%s %llu\n", def->name, (unsigned long long)n);
        }
    } else {
        /* the arguments as given, one word each (the daemon checks them) */
        size_t used = (size_t)snprintf(line, sizeof(line), "%s", def->name);

        for (int i = optind + 1; i < argc; i++) {
            const char *a = argv[i];

            if (!a[0] || strpbrk(a, " \t\r\n") || used + strlen(a) + 3 > sizeof(line)) {
                fprintf(stderr, "%s: %s: argument \"%s\" is not one word; usage: %s\n", prog,
                        argv[optind], a, def->usage);
                return 2;
            }
            used += (size_t)snprintf(line + used, sizeof(line) - used, " %s", a);
        }
        snprintf(line + used, sizeof(line) - used, "\n");
    }

    rc = ctlconn_open(&cc, socket_path, &err);
    cc.timeout_ms = timeout_ms;
    if (rc == 0)
        rc = ctlconn_request(&cc, line, &rep, &err);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", prog, err.msg);
        ctlconn_close(&cc);
        return 1;
    }
    text = cc.buf + rep.text_off;
    if (!rep.ok) {
        fprintf(stderr, "%s: %s: %.*s (%.*s)\n", prog, def->name, (int)rep.text_len, text,
                (int)rep.name_len, cc.buf + rep.name_off);
        ctlconn_close(&cc);
        return 1;
    }
    if (rep.multi != (verb == CTL_VERB_STATS || verb == CTL_VERB_DATASETS ||
                      verb == CTL_VERB_METRICS || verb == CTL_VERB_CLASSES ||
                      verb == CTL_VERB_SOURCES || verb == CTL_VERB_SUBSETS)) {
        fprintf(stderr, "%s: %s: the daemon sent a %s reply where a %s one was due\n", prog,
                def->name, rep.multi ? "multi-line" : "one-line",
                rep.multi ? "one-line" : "multi-line");
        ctlconn_close(&cc);
        return 1;
    }
    if (output && output_begin(output, tmp, sizeof(tmp)) < 0) {
        ctlconn_close(&cc);
        return 1;
    }
    switch (verb) {
    case CTL_VERB_PING:
    case CTL_VERB_RELOAD:
        print_ping(text, rep.text_len, json);
        break;
    case CTL_VERB_STATUS:
        print_status(text, rep.text_len, json);
        break;
    case CTL_VERB_STATS:
        print_stats(cc.buf, &rep, json);
        break;
    case CTL_VERB_WORKERS:
        print_workers(text, rep.text_len, json);
        break;
    case CTL_VERB_DATASETS:
        print_datasets(cc.buf, &rep, json);
        break;
    case CTL_VERB_METRICS:
        print_metrics(cc.buf, &rep, json);
        break;
    case CTL_VERB_CLASSES:
        print_lines(cc.buf, &rep, "classes", json);
        break;
    case CTL_VERB_SOURCES:
        print_lines(cc.buf, &rep, "sources", json);
        break;
    case CTL_VERB_SUBSETS:
        print_lines(cc.buf, &rep, "subsets", json);
        break;
    default:
        break;
    }
    ctlconn_close(&cc);
    if (output)
        return output_commit(output, tmp);
    if (fflush(stdout) == EOF || ferror(stdout)) {
        fprintf(stderr, "%s: writing the output: %s\n", prog, strerror(errno));
        return 1;
    }
    return 0;
}
