/*
 * ctl.c - the control protocol's request side: line framing, the line
 * rules (UTF-8, no control characters), tokenizing, and the verb table
 * that drives argument checks.  The protocol is described in ctl.h.
 *
 * ctl_parse's steps, each a pure function of the bytes seen so far:
 *   1. find the LF within the first CTL_LINE_MAX bytes (else need more, or
 *      too long once CTL_LINE_MAX bytes have arrived without one);
 *   2. drop one CR before the LF; check the line rules (bad-line);
 *   3. split on blanks (none: a blank line);
 *   4. look the verb up in verbs[] (bad-verb), check the argument count
 *      against its row, then run the row's parse function (bad-arg).
 */
#include "ctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctl_int.h"
#include "sources.h"
#include "strnum.h"

static int parse_workers(const char *line, struct ctl_req *req);
static int parse_attach(const char *line, struct ctl_req *req);
static int parse_classes(const char *line, struct ctl_req *req);
static int parse_sources(const char *line, struct ctl_req *req);
static int parse_open(const char *line, struct ctl_req *req);
static int parse_subsets(const char *line, struct ctl_req *req);

static const struct ctl_verb_def verbs[CTL_VERB_COUNT] = {
    [CTL_VERB_PING] = {"PING", 0, 0, "PING", "check that the daemon answers", NULL},
    [CTL_VERB_STATUS] = {"STATUS", 0, 0, "STATUS",
                         "one line: version, workers, clients, memory", NULL},
    [CTL_VERB_STATS] = {"STATS", 0, 0, "STATS",
                        "counters per worker and per client (multi-line)", NULL},
    [CTL_VERB_METRICS] = {"METRICS", 0, 0, "METRICS",
                          "the counters in Prometheus text format (multi-line)", NULL},
    [CTL_VERB_WORKERS] = {"WORKERS", 1, 1, "WORKERS <n>|auto",
                          "resize the pool to n workers, or auto: the daemon sizes it",
                          parse_workers},
    [CTL_VERB_DATASETS] = {"DATASETS", 0, 0, "DATASETS",
                           "the datasets the daemon serves (multi-line)", NULL},
    [CTL_VERB_ATTACH] = {"ATTACH", 1, CTL_ATTACH_KEYS, "ATTACH dataset=NAME [key=value ...]",
                         "attach a ring; the reply carries its memfd and eventfd",
                         parse_attach},
    [CTL_VERB_CLASSES] = {"CLASSES", 1, 1, "CLASSES <dataset>",
                          "a dataset's class names, class i on line i (multi-line)",
                          parse_classes},
    [CTL_VERB_SOURCES] = {"SOURCES", 3, 3, "SOURCES <dataset> <start> <count>",
                          "the files samples start.. were packed from, escaped (multi-line)",
                          parse_sources},
    [CTL_VERB_OPEN] = {"OPEN", 1, 1, "OPEN <folder>",
                       "the name a packed dataset's folder is served under (escaped path)",
                       parse_open},
    [CTL_VERB_SUBSETS] = {"SUBSETS", 1, 1, "SUBSETS <dataset>",
                          "a dataset's named index sets: NAME COUNT, then * SAMPLES (multi-line)",
                          parse_subsets},
    [CTL_VERB_RELOAD] = {"RELOAD", 0, 0, "RELOAD",
                         "read the config again and apply it, as SIGHUP; answers once it "
                         "is applied or refused (ERR reload-refused: why)", NULL},
};

const struct ctl_verb_def *ctl_verb_def(enum ctl_verb verb)
{
    if ((int)verb <= CTL_VERB_NONE || verb >= CTL_VERB_COUNT)
        return NULL;
    return &verbs[verb];
}

bool ctl_ieq(const char *s, size_t len, const char *word)
{
    size_t i;

    for (i = 0; i < len; i++) {
        char a = s[i], b = word[i];

        if (b == '\0')
            return false;
        if (a >= 'A' && a <= 'Z')
            a = (char)(a - 'A' + 'a');
        if (b >= 'A' && b <= 'Z')
            b = (char)(b - 'A' + 'a');
        if (a != b)
            return false;
    }
    return word[i] == '\0';
}

enum ctl_verb ctl_verb_from_name(const char *s, size_t len)
{
    for (int v = CTL_VERB_NONE + 1; v < CTL_VERB_COUNT; v++)
        if (ctl_ieq(s, len, verbs[v].name))
            return (enum ctl_verb)v;
    return CTL_VERB_NONE;
}

static bool is_cont(unsigned char c)
{
    return (c & 0xc0) == 0x80;
}

size_t ctl_char_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];

    if (c < 0x80)
        return (c >= 0x20 && c != 0x7f) || c == '\t' ? 1 : 0;
    if (c < 0xc2) /* a continuation byte, or an overlong 2-byte lead */
        return 0;
    if (c < 0xe0) {
        if (n < 2 || !is_cont(s[1]))
            return 0;
        /* U+0080..U+009F are the C1 controls */
        return c == 0xc2 && s[1] < 0xa0 ? 0 : 2;
    }
    if (c < 0xf0) {
        if (n < 3 || !is_cont(s[1]) || !is_cont(s[2]))
            return 0;
        if (c == 0xe0 && s[1] < 0xa0) /* overlong */
            return 0;
        if (c == 0xed && s[1] >= 0xa0) /* UTF-16 surrogates */
            return 0;
        return 3;
    }
    if (c < 0xf5) {
        if (n < 4 || !is_cont(s[1]) || !is_cont(s[2]) || !is_cont(s[3]))
            return 0;
        if (c == 0xf0 && s[1] < 0x90) /* overlong */
            return 0;
        if (c == 0xf4 && s[1] >= 0x90) /* past U+10FFFF */
            return 0;
        return 4;
    }
    return 0;
}

size_t ctl_text_check(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;

    while (i < len) {
        size_t n = ctl_char_len(u + i, len - i);

        if (n == 0)
            return i;
        i += n;
    }
    return len;
}

bool ctl_dataset_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > CTL_DATASET_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

void ctl_quote(char *dst, size_t cap, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = 0;
    bool cut = false;

    while (n < len) {
        size_t c = ctl_char_len(u + n, len - n);

        if (c == 0)
            c = 1; /* not expected after ctl_text_check; stay bounded */
        if (n + c > CTL_ECHO_MAX) {
            cut = true;
            break;
        }
        n += c;
    }
    snprintf(dst, cap, "\"%.*s%s\"", (int)n, s, cut ? "..." : "");
}

__attribute__((format(printf, 3, 4)))
static int req_fail(struct ctl_req *req, enum ctl_errcode code, const char *fmt, ...)
{
    va_list ap;

    req->err = code;
    va_start(ap, fmt);
    vsnprintf(req->msg, sizeof(req->msg), fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static int parse_workers(const char *line, struct ctl_req *req)
{
    const struct ctl_span *a = &req->args[0];
    char q[CTL_QUOTE_SIZE];
    uint64_t n;

    if (ctl_ieq(line + a->off, a->len, "auto")) {
        req->workers = 0;
        req->workers_auto = true;
        return 0;
    }
    if (strnum_u64(line + a->off, a->len, &n) < 0 || n < CTL_WORKERS_MIN ||
        n > CTL_WORKERS_MAX) {
        ctl_quote(q, sizeof(q), line + a->off, a->len);
        return req_fail(req, CTL_E_BAD_ARG,
                        "WORKERS: n must be an integer in %d..%d or auto, got %s",
                        CTL_WORKERS_MIN, CTL_WORKERS_MAX, q);
    }
    req->workers = (uint32_t)n;
    return 0;
}

static int parse_attach(const char *line, struct ctl_req *req)
{
    if (ctl_attach_parse(line, req->args, req->nargs, &req->attach, req->msg,
                         sizeof(req->msg)) < 0) {
        req->err = CTL_E_BAD_ARG;
        return -EINVAL;
    }
    return 0;
}

/* args[0]: a dataset name, into req->dataset. */
static int parse_dataset_arg(const char *line, struct ctl_req *req, const char *verb)
{
    const struct ctl_span *a = &req->args[0];
    char q[CTL_QUOTE_SIZE];

    if (!ctl_dataset_name_ok(line + a->off, a->len)) {
        ctl_quote(q, sizeof(q), line + a->off, a->len);
        return req_fail(req, CTL_E_BAD_ARG,
                        "%s: dataset must be 1..%d of [A-Za-z0-9._-], got %s", verb,
                        CTL_DATASET_NAME_MAX, q);
    }
    memcpy(req->dataset, line + a->off, a->len);
    req->dataset[a->len] = '\0';
    return 0;
}

static int parse_classes(const char *line, struct ctl_req *req)
{
    return parse_dataset_arg(line, req, "CLASSES");
}

static int parse_subsets(const char *line, struct ctl_req *req)
{
    return parse_dataset_arg(line, req, "SUBSETS");
}

static int parse_sources(const char *line, struct ctl_req *req)
{
    const struct ctl_span *a = &req->args[1], *b = &req->args[2];
    char q[CTL_QUOTE_SIZE];
    uint64_t n;

    if (parse_dataset_arg(line, req, "SOURCES") < 0)
        return -EINVAL;
    if (strnum_u64(line + a->off, a->len, &req->start) < 0) {
        ctl_quote(q, sizeof(q), line + a->off, a->len);
        return req_fail(req, CTL_E_BAD_ARG,
                        "SOURCES: start must be a sample number (0 or more), got %s", q);
    }
    if (strnum_u64(line + b->off, b->len, &n) < 0 || n < 1 || n > CTL_SOURCES_MAX) {
        ctl_quote(q, sizeof(q), line + b->off, b->len);
        return req_fail(req, CTL_E_BAD_ARG, "SOURCES: count must be an integer in 1..%d, got %s",
                        CTL_SOURCES_MAX, q);
    }
    req->count = (uint32_t)n;
    return 0;
}

/* args[0]: an absolute folder, escaped (ctl.h OPEN), decoded into req->path. */
static int parse_open(const char *line, struct ctl_req *req)
{
    const struct ctl_span *a = &req->args[0];
    char q[CTL_QUOTE_SIZE];
    long n;

    ctl_quote(q, sizeof(q), line + a->off, a->len);
    if (a->len > CTL_PATH_MAX) /* an escape is never shorter than its byte */
        return req_fail(req, CTL_E_BAD_ARG, "OPEN: folder %s is longer than %d bytes", q,
                        CTL_PATH_MAX);
    n = sources_unescape(line + a->off, a->len, req->path);
    if (n < 0)
        return req_fail(req, CTL_E_BAD_ARG,
                        "OPEN: folder %s has a bad escape (\\\\ or \\xHH only)", q);
    req->path[n] = '\0';
    if (req->path[0] != '/' || memchr(req->path, '\0', (size_t)n))
        return req_fail(req, CTL_E_BAD_ARG,
                        "OPEN: folder %s must be an absolute path without NUL bytes", q);
    return 0;
}

int ctl_format_open(const char *path, size_t n, char *buf, size_t cap)
{
    char esc[SOURCES_LINE_MAX + 1];
    size_t o = 0;
    long e;

    if (n == 0 || path[0] != '/' || memchr(path, '\0', n))
        return -EINVAL;
    if (n > CTL_PATH_MAX)
        return -ENAMETOOLONG;
    e = sources_escape(path, n, esc, sizeof(esc));
    if (e < 0)
        return e == -ENOSPC ? -ENAMETOOLONG : (int)e;
    if (cap < 6)
        return -ENAMETOOLONG;
    memcpy(buf, "OPEN ", 5);
    o = 5;
    for (long i = 0; i < e; i++) {
        /* a blank would split the argument: \x20 (TAB is already escaped) */
        const char *piece = esc[i] == ' ' ? "\\x20" : NULL;
        size_t k = piece ? 4 : 1;

        if (o + k + 2 > cap || o + k + 2 > CTL_LINE_MAX)
            return -ENAMETOOLONG;
        memcpy(buf + o, piece ? piece : &esc[i], k);
        o += k;
    }
    buf[o++] = '\n';
    buf[o] = '\0';
    return (int)o;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* The unknown-verb message lists the verbs, from the table. */
static void fail_bad_verb(struct ctl_req *req, const char *tok, size_t len)
{
    char q[CTL_QUOTE_SIZE], list[256];
    size_t used = 0;

    list[0] = '\0';
    for (int v = CTL_VERB_NONE + 1; v < CTL_VERB_COUNT; v++) {
        int n = snprintf(list + used, sizeof(list) - used, "%s%s", used ? " " : "",
                         verbs[v].name);

        if (n < 0 || (size_t)n >= sizeof(list) - used)
            break;
        used += (size_t)n;
    }
    ctl_quote(q, sizeof(q), tok, len);
    req_fail(req, CTL_E_BAD_VERB, "unknown verb %s; verbs: %s", q, list);
}

static void fail_arg_count(struct ctl_req *req, const struct ctl_verb_def *d,
                           unsigned got, bool overflow)
{
    if (d->max_args == 0)
        req_fail(req, CTL_E_BAD_ARG, "%s takes no arguments; usage: %s", d->name, d->usage);
    else if (d->min_args == d->max_args)
        req_fail(req, CTL_E_BAD_ARG, "%s takes %u argument%s, got %s%u; usage: %s", d->name,
                 d->min_args, d->min_args == 1 ? "" : "s", overflow ? "over " : "", got,
                 d->usage);
    else
        req_fail(req, CTL_E_BAD_ARG, "%s takes %u to %u arguments, got %s%u; usage: %s",
                 d->name, d->min_args, d->max_args, overflow ? "over " : "", got, d->usage);
}

/* Steps 2-4 of the file-top list on the line buf[0..n), LF and CR gone. */
static void parse_line(const char *buf, size_t n, struct ctl_req *req)
{
    size_t bad = ctl_text_check(buf, n), i = 0, verb_off = 0, verb_len = 0;
    const struct ctl_verb_def *d;
    bool overflow = false, have_verb = false;

    if (bad < n) {
        req_fail(req, CTL_E_BAD_LINE,
                 "byte 0x%02x at offset %zu: a request must be UTF-8 text without "
                 "control characters",
                 (unsigned char)buf[bad], bad);
        return;
    }
    while (i < n) {
        size_t start;

        while (i < n && is_blank(buf[i]))
            i++;
        if (i == n)
            break;
        start = i;
        while (i < n && !is_blank(buf[i]))
            i++;
        if (!have_verb) {
            verb_off = start;
            verb_len = i - start;
            have_verb = true;
        } else if (req->nargs < CTL_ARGS_MAX) {
            req->args[req->nargs].off = (uint16_t)start;
            req->args[req->nargs].len = (uint16_t)(i - start);
            req->nargs++;
        } else {
            overflow = true;
        }
    }
    if (!have_verb)
        return; /* blank */
    req->verb = ctl_verb_from_name(buf + verb_off, verb_len);
    if (req->verb == CTL_VERB_NONE) {
        fail_bad_verb(req, buf + verb_off, verb_len);
        return;
    }
    d = &verbs[req->verb];
    if (overflow || req->nargs < d->min_args || req->nargs > d->max_args) {
        fail_arg_count(req, d, req->nargs, overflow);
        return;
    }
    if (d->parse)
        d->parse(buf, req);
}

enum ctl_status ctl_parse(const char *buf, size_t len, struct ctl_req *req, size_t *consumed)
{
    size_t scan = len < CTL_LINE_MAX ? len : CTL_LINE_MAX, n;
    const char *lf = memchr(buf, '\n', scan);

    memset(req, 0, sizeof(*req));
    *consumed = 0;
    if (!lf) {
        if (len < CTL_LINE_MAX)
            return CTL_NEED_MORE;
        req_fail(req, CTL_E_TOO_LONG,
                 "a request line may hold at most %d bytes before its newline; "
                 "the rest of this one is discarded",
                 CTL_LINE_MAX - 1);
        return CTL_TOO_LONG;
    }
    n = (size_t)(lf - buf);
    *consumed = n + 1;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    parse_line(buf, n, req);
    return CTL_DONE;
}

bool ctl_skip_line(const char *buf, size_t len, size_t *consumed)
{
    const char *lf = memchr(buf, '\n', len);

    if (!lf) {
        *consumed = len;
        return false;
    }
    *consumed = (size_t)(lf - buf) + 1;
    return true;
}

static int check_verbs(struct rf_err *err)
{
    for (int v = CTL_VERB_NONE + 1; v < CTL_VERB_COUNT; v++) {
        const struct ctl_verb_def *d = &verbs[v];
        size_t len;

        if (!d->name || !d->usage || !d->help || !d->help[0])
            return rf_err_set(err, -EINVAL, "verb %d has no table row (name, usage, help)", v);
        len = strlen(d->name);
        if (len == 0)
            return rf_err_set(err, -EINVAL, "verb %d has an empty name", v);
        for (size_t i = 0; i < len; i++)
            if (d->name[i] < 'A' || d->name[i] > 'Z')
                return rf_err_set(err, -EINVAL, "verb %s: names are upper-case A-Z", d->name);
        if (strncmp(d->usage, d->name, len) != 0)
            return rf_err_set(err, -EINVAL, "verb %s: usage does not start with the verb",
                              d->name);
        if (d->min_args > d->max_args || d->max_args > CTL_ARGS_MAX)
            return rf_err_set(err, -EINVAL, "verb %s: arguments %u..%u outside 0..%d", d->name,
                              d->min_args, d->max_args, CTL_ARGS_MAX);
        if (d->max_args > 0 && !d->parse)
            return rf_err_set(err, -EINVAL, "verb %s takes arguments but has no parser",
                              d->name);
        for (int w = CTL_VERB_NONE + 1; w < v; w++)
            if (strcmp(verbs[w].name, d->name) == 0)
                return rf_err_set(err, -EINVAL, "verb %s appears twice", d->name);
    }
    return 0;
}

int ctl_check_tables(struct rf_err *err)
{
    int r = check_verbs(err);

    if (r == 0)
        r = ctl_attach_check_table(err);
    if (r == 0)
        r = ctl_errcode_check(err);
    return r;
}
