/*
 * test_ctl.c - the control protocol: framing (LF, CRLF, blank lines, the
 * 4095/4096/4097-byte edges, too-long and skip), the line rules (NUL,
 * controls, bad UTF-8), every verb, every ATTACH key at its bounds and one
 * past, messages that name the argument and its range, pipelining, input
 * split byte by byte, ATTACH formatting round trips, and the replies
 * (formatters, parser, multi-line, truncation, bounds).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "sampler.h"
#include "tap.h"

static struct ctl_req req;

/* Parses the NUL-terminated s whole. */
static enum ctl_status parse_str(const char *s, size_t *consumed)
{
    return ctl_parse(s, strlen(s), &req, consumed);
}

/* Parses one complete line s and expects CTL_DONE consuming all of it. */
static void parse_line(const char *s)
{
    size_t used = 0;
    enum ctl_status st = parse_str(s, &used);

    if (st != CTL_DONE || used != strlen(s))
        tap_diag("  parse of \"%s\": status %d, consumed %zu", s, (int)st, used);
}

static void expect_ok(const char *line, enum ctl_verb verb, const char *name)
{
    parse_line(line);
    if (!tap_ok(req.err == CTL_E_NONE && req.verb == verb, "%s", name))
        tap_diag("  \"%s\": err %d verb %d msg \"%s\"", line, (int)req.err, (int)req.verb,
                 req.msg);
}

/* Expects err, and each of the NULL-terminated substrings in the message. */
static void expect_err(const char *line, enum ctl_errcode err, const char *name, ...)
{
    va_list ap;
    const char *sub;
    int good;

    parse_line(line);
    good = req.err == err;
    va_start(ap, name);
    while ((sub = va_arg(ap, const char *)) != NULL)
        if (!strstr(req.msg, sub))
            good = 0;
    va_end(ap);
    if (!tap_ok(good, "%s", name))
        tap_diag("  \"%.80s\": err %d (want %d) msg \"%s\"", line, (int)req.err, (int)err,
                 req.msg);
}

static void test_tables(void)
{
    struct rf_err e = {{0}};

    TAP_IS_INT(ctl_check_tables(&e), 0, "verb, ATTACH key and error tables pass the check");
    if (e.msg[0])
        tap_diag("  %s", e.msg);
    for (int v = CTL_VERB_NONE + 1; v < CTL_VERB_COUNT; v++) {
        const struct ctl_verb_def *d = ctl_verb_def((enum ctl_verb)v);

        TAP_OK(d && (int)ctl_verb_from_name(d->name, strlen(d->name)) == v, "verb row findable");
    }
    TAP_OK(ctl_verb_def(CTL_VERB_NONE) == NULL && ctl_verb_def(CTL_VERB_COUNT) == NULL,
           "no row outside the enum");
    TAP_IS_STR(ctl_transform_name(CTL_TRANSFORM_EVAL), "eval", "transform names");
    TAP_IS_STR(ctl_layout_name(CTL_LAYOUT_HWC), "hwc", "layout names");
    TAP_IS_STR(ctl_transform_name(CTL_TRANSFORM_NONE), "none", "transform none");
    TAP_OK(ctl_transform_name(CTL_TRANSFORM_COUNT) == NULL && ctl_layout_name(2) == NULL,
           "names out of range");
}

static void test_verbs(void)
{
    expect_ok("PING\n", CTL_VERB_PING, "PING");
    expect_ok("ping\n", CTL_VERB_PING, "ping: verbs are case-insensitive");
    expect_ok("PiNg\r\n", CTL_VERB_PING, "PiNg with CRLF");
    expect_ok(" \t PING \t \n", CTL_VERB_PING, "blanks around the verb");
    expect_ok("STATUS\n", CTL_VERB_STATUS, "STATUS");
    expect_ok("STATS\n", CTL_VERB_STATS, "STATS");
    expect_ok("METRICS\n", CTL_VERB_METRICS, "METRICS");
    expect_ok("DATASETS\n", CTL_VERB_DATASETS, "DATASETS");
    expect_ok("ATTACH dataset=fmnist\n", CTL_VERB_ATTACH, "ATTACH");
    expect_ok("WORKERS 8\n", CTL_VERB_WORKERS, "WORKERS 8");
    TAP_IS_INT(req.workers, 8, "WORKERS 8 -> 8");
    expect_ok("workers\t\t1\n", CTL_VERB_WORKERS, "WORKERS 1 (min), tab-separated");
    TAP_IS_INT(req.workers, 1, "WORKERS 1 -> 1");
    expect_ok("WORKERS 256\n", CTL_VERB_WORKERS, "WORKERS 256 (max)");
    TAP_IS_INT(req.workers, 256, "WORKERS 256 -> 256");
    expect_ok("WORKERS 0008\n", CTL_VERB_WORKERS, "WORKERS 0008");
    TAP_OK(req.workers == 8 && !req.workers_auto, "WORKERS 0008 -> 8, not auto");
    expect_ok("WORKERS auto\n", CTL_VERB_WORKERS, "WORKERS auto");
    TAP_OK(req.workers_auto && req.workers == 0, "WORKERS auto -> auto, no count");
    expect_ok("workers AuTo\n", CTL_VERB_WORKERS, "WORKERS AuTo: word values are case-insensitive");
    TAP_OK(req.workers_auto, "AuTo -> auto");
    expect_err("WORKERS automatic\n", CTL_E_BAD_ARG, "WORKERS automatic", "or auto",
               "\"automatic\"", NULL);
    expect_err("WORKERS banana\n", CTL_E_BAD_ARG, "WORKERS banana names what it takes",
               "WORKERS", "1..256 or auto", "\"banana\"", NULL);
    expect_err("WORKERS auto 2\n", CTL_E_BAD_ARG, "WORKERS auto 2: one argument", "WORKERS",
               NULL);

    expect_err("WORKERS 0\n", CTL_E_BAD_ARG, "WORKERS 0 (min - 1)", "WORKERS", "1..256",
               "\"0\"", NULL);
    TAP_IS_INT(req.verb, CTL_VERB_WORKERS, "a bad-arg line still names its verb");
    expect_err("WORKERS 257\n", CTL_E_BAD_ARG, "WORKERS 257 (max + 1)", "1..256", "\"257\"",
               NULL);
    expect_err("WORKERS abc\n", CTL_E_BAD_ARG, "WORKERS abc", "\"abc\"", NULL);
    expect_err("WORKERS -1\n", CTL_E_BAD_ARG, "WORKERS -1", NULL);
    expect_err("WORKERS +4\n", CTL_E_BAD_ARG, "WORKERS +4", NULL);
    expect_err("WORKERS 0x10\n", CTL_E_BAD_ARG, "WORKERS 0x10", NULL);
    expect_err("WORKERS 8x\n", CTL_E_BAD_ARG, "WORKERS 8x (trailing junk)", NULL);
    expect_err("WORKERS 4.0\n", CTL_E_BAD_ARG, "WORKERS 4.0", NULL);
    expect_err("WORKERS 18446744073709551617\n", CTL_E_BAD_ARG, "WORKERS overflow", NULL);
    expect_err("WORKERS\n", CTL_E_BAD_ARG, "WORKERS without n", "takes 1 argument", "got 0",
               "WORKERS <n>", NULL);
    expect_err("WORKERS 1 2\n", CTL_E_BAD_ARG, "WORKERS 1 2", "got 2", NULL);
    expect_err("PING x\n", CTL_E_BAD_ARG, "PING with an argument", "PING takes no arguments",
               NULL);
    expect_err("STATUS x\n", CTL_E_BAD_ARG, "STATUS with an argument", "STATUS", NULL);
    expect_err("STATS x\n", CTL_E_BAD_ARG, "STATS with an argument", "STATS", NULL);
    expect_err("METRICS x\n", CTL_E_BAD_ARG, "METRICS with an argument", "METRICS", NULL);
    expect_err("DATASETS x\n", CTL_E_BAD_ARG, "DATASETS with an argument", "DATASETS", NULL);
    expect_err("ATTACH\n", CTL_E_BAD_ARG, "ATTACH without arguments", "ATTACH dataset=NAME",
               NULL);

    expect_err("FROB\n", CTL_E_BAD_VERB, "unknown verb", "\"FROB\"", "PING", "ATTACH", NULL);
    TAP_IS_INT(req.verb, CTL_VERB_NONE, "unknown verb -> CTL_VERB_NONE");
    expect_err("PINGS\n", CTL_E_BAD_VERB, "a longer word is not the verb", NULL);
    expect_err("PIN\n", CTL_E_BAD_VERB, "a prefix is not the verb", NULL);
    expect_err("\xc3\xa9t\xc3\xa9\n", CTL_E_BAD_VERB, "UTF-8 verb: bad-verb, not bad-line",
               NULL);
    {
        char line[200];

        snprintf(line, sizeof(line), "%0120d\n", 7);
        expect_err(line, CTL_E_BAD_VERB, "a long unknown verb is echoed cut", "...\"", NULL);
        TAP_OK(strlen(req.msg) < 200, "the echo is bounded");
    }
}

static void test_blank_and_bad_lines(void)
{
    size_t used;

    TAP_IS_INT(parse_str("\n", &used), CTL_DONE, "empty line is done");
    TAP_OK(ctl_req_is_blank(&req) && used == 1, "empty line is blank, 1 byte consumed");
    TAP_IS_INT(parse_str(" \t \r\n", &used), CTL_DONE, "blanks-only CRLF line is done");
    TAP_OK(ctl_req_is_blank(&req) && used == 5, "blanks-only line is blank, all consumed");
    TAP_IS_INT(parse_str("\r\n", &used), CTL_DONE, "bare CRLF is done");
    TAP_OK(ctl_req_is_blank(&req), "bare CRLF is blank");

    {
        static const char nul[] = "PI\0NG\nPING\n";
        TAP_IS_INT(ctl_parse(nul, sizeof(nul) - 1, &req, &used), CTL_DONE, "NUL line done");
        TAP_IS_INT(req.err, CTL_E_BAD_LINE, "NUL byte -> bad-line");
        TAP_IS_INT(used, 6, "the NUL line is consumed, the next kept");
        TAP_OK(strstr(req.msg, "0x00") && strstr(req.msg, "offset 2"), "message says where");
        TAP_IS_INT(ctl_parse(nul + used, sizeof(nul) - 1 - used, &req, &used), CTL_DONE,
                   "the connection goes on");
        TAP_IS_INT(req.verb, CTL_VERB_PING, "the next line parses");
    }
    expect_err("PING\x01\n", CTL_E_BAD_LINE, "C0 control -> bad-line", "0x01", NULL);
    expect_err("PING\x7f\n", CTL_E_BAD_LINE, "DEL -> bad-line", NULL);
    expect_err("PI\rNG\n", CTL_E_BAD_LINE, "CR inside a line -> bad-line", NULL);
    expect_err("PING\r\r\n", CTL_E_BAD_LINE, "two CRs before LF -> bad-line", NULL);
    expect_err("\x1b[31mPING\n", CTL_E_BAD_LINE, "escape sequence -> bad-line", NULL);
    expect_err("PING \xff\n", CTL_E_BAD_LINE, "0xff -> bad-line", "0xff", NULL);
    expect_err("PING \xc3\n", CTL_E_BAD_LINE, "truncated UTF-8 -> bad-line", NULL);
    expect_err("PING \xc0\xaf\n", CTL_E_BAD_LINE, "overlong 2-byte -> bad-line", NULL);
    expect_err("PING \xe0\x80\xaf\n", CTL_E_BAD_LINE, "overlong 3-byte -> bad-line", NULL);
    expect_err("PING \xf0\x80\x80\xaf\n", CTL_E_BAD_LINE, "overlong 4-byte -> bad-line", NULL);
    expect_err("PING \xed\xa0\x80\n", CTL_E_BAD_LINE, "surrogate -> bad-line", NULL);
    expect_err("PING \xf4\x90\x80\x80\n", CTL_E_BAD_LINE, "past U+10FFFF -> bad-line", NULL);
    expect_err("PING \xc2\x85\n", CTL_E_BAD_LINE, "C1 control (NEL) -> bad-line", NULL);
    expect_err("PING \x80\n", CTL_E_BAD_LINE, "lone continuation -> bad-line", NULL);
    expect_err("FOO \xc2\xa0 \xe2\x82\xac \xf0\x9f\x98\x80\n", CTL_E_BAD_VERB,
               "valid 2-, 3-, 4-byte UTF-8 pass the line rules", NULL);
    expect_err("FOO \xf4\x8f\xbf\xbf\n", CTL_E_BAD_VERB, "U+10FFFF passes", NULL);
    TAP_IS_INT(ctl_text_check("a\tb", 3), 3, "TAB is allowed");
    TAP_IS_INT(ctl_text_check("ab\n", 3), 2, "LF inside text is reported");
}

/* A line of exactly total bytes (LF included): "PING" + blanks + [CR] LF. */
static char *ping_line(size_t total, int crlf)
{
    char *s = malloc(total + 1);

    memset(s, ' ', total);
    memcpy(s, "PING", 4);
    if (crlf)
        s[total - 2] = '\r';
    s[total - 1] = '\n';
    s[total] = '\0';
    return s;
}

static void test_length_limits(void)
{
    size_t used;
    char *s;

    s = ping_line(4095, 0);
    TAP_IS_INT(parse_str(s, &used), CTL_DONE, "4095-byte line (LF included) is done");
    TAP_OK(req.verb == CTL_VERB_PING && req.err == 0 && used == 4095, "4095: PING, consumed");
    free(s);

    s = ping_line(CTL_LINE_MAX, 0);
    TAP_IS_INT(parse_str(s, &used), CTL_DONE, "4096-byte line (LF included) is done");
    TAP_OK(req.verb == CTL_VERB_PING && req.err == 0 && used == 4096, "4096: PING, consumed");
    free(s);

    s = ping_line(CTL_LINE_MAX, 1);
    TAP_IS_INT(parse_str(s, &used), CTL_DONE, "4096-byte line with CRLF is done");
    TAP_OK(req.verb == CTL_VERB_PING && req.err == 0, "4096 CRLF: PING");
    free(s);

    s = ping_line(CTL_LINE_MAX + 1, 0);
    TAP_IS_INT(parse_str(s, &used), CTL_TOO_LONG, "4097-byte line is too long");
    TAP_OK(used == 0 && req.err == CTL_E_TOO_LONG && strstr(req.msg, "4095"),
           "too long: nothing consumed, error says the limit");
    TAP_OK(ctl_skip_line(s, strlen(s), &used) && used == CTL_LINE_MAX + 1,
           "skip finds the LF of the long line");
    free(s);

    s = ping_line(CTL_LINE_MAX + 1, 1);
    TAP_IS_INT(parse_str(s, &used), CTL_TOO_LONG, "4097-byte line with CRLF is too long");
    free(s);

    /* without any LF yet */
    s = ping_line(CTL_LINE_MAX + 1, 0);
    TAP_IS_INT(ctl_parse(s, CTL_LINE_MAX - 1, &req, &used), CTL_NEED_MORE,
               "4095 bytes, no LF: need more");
    TAP_IS_INT(ctl_parse(s, CTL_LINE_MAX, &req, &used), CTL_TOO_LONG,
               "4096 bytes, no LF: too long");
    TAP_OK(!ctl_skip_line(s, CTL_LINE_MAX, &used) && used == CTL_LINE_MAX,
           "skip without LF consumes everything and says keep skipping");
    free(s);

    TAP_IS_INT(ctl_parse("", 0, &req, &used), CTL_NEED_MORE, "empty buffer: need more");
    TAP_IS_INT(ctl_parse("PING", 4, &req, &used), CTL_NEED_MORE, "no LF: need more");
    TAP_IS_INT(used, 0, "need more consumes nothing");
    TAP_OK(!ctl_skip_line("", 0, &used) && used == 0, "skip on empty buffer");
    TAP_OK(ctl_skip_line("\nX", 2, &used) && used == 1, "skip at an LF");
}

/*
 * A server's read loop over a stream that arrives in chunks of `chunk`
 * bytes into a CTL_LINE_MAX buffer; writes one letter per outcome:
 * verb digit for a request, 'E'+code for an error, 'B' blank.
 */
static void run_stream(const char *data, size_t len, size_t chunk, char *out, size_t cap)
{
    char buf[CTL_LINE_MAX];
    size_t have = 0, fed = 0, o = 0;
    int skipping = 0;

    while (fed < len || have > 0) {
        size_t n = len - fed < chunk ? len - fed : chunk, used;
        enum ctl_status st;

        if (n > sizeof(buf) - have)
            n = sizeof(buf) - have;
        memcpy(buf + have, data + fed, n);
        have += n;
        fed += n;
        for (;;) {
            if (skipping) {
                skipping = !ctl_skip_line(buf, have, &used);
            } else {
                st = ctl_parse(buf, have, &req, &used);
                if (st == CTL_NEED_MORE)
                    break;
                if (o + 3 < cap) {
                    if (st == CTL_TOO_LONG || req.err)
                        out[o++] = 'E', out[o++] = (char)('a' + req.err);
                    else if (ctl_req_is_blank(&req))
                        out[o++] = 'B';
                    else
                        out[o++] = (char)('0' + req.verb);
                }
                if (st == CTL_TOO_LONG)
                    skipping = 1;
            }
            memmove(buf, buf + used, have - used);
            have -= used;
            if (have == 0)
                break;
        }
        if (fed == len && n == 0)
            break;
    }
    out[o] = '\0';
}

static void test_pipelining_and_splits(void)
{
    static const char pipe[] = "PING\nWORKERS 4\r\n\nSTATUS\nBOGUS\nATTACH dataset=a batch=0\n"
                               "  \nATTACH dataset=b\nPI\0NG\nDATASETS\n";
    char whole[64], split[64], *big;
    size_t off = 0, used, blen;
    int n = 0, order_ok = 1;
    static const enum ctl_verb want[] = {CTL_VERB_PING, CTL_VERB_WORKERS, CTL_VERB_NONE,
                                         CTL_VERB_STATUS, CTL_VERB_NONE, CTL_VERB_ATTACH,
                                         CTL_VERB_NONE, CTL_VERB_ATTACH, CTL_VERB_NONE,
                                         CTL_VERB_DATASETS};

    while (ctl_parse(pipe + off, sizeof(pipe) - 1 - off, &req, &used) == CTL_DONE) {
        if (n < 10 && req.verb != want[n])
            order_ok = 0;
        off += used;
        n++;
    }
    TAP_OK(n == 10 && off == sizeof(pipe) - 1 && order_ok, "ten pipelined lines, in order");

    run_stream(pipe, sizeof(pipe) - 1, sizeof(pipe), whole, sizeof(whole));
    TAP_IS_STR(whole, "15B2EbEcB7Ee6", "pipelined outcomes, whole buffer");
    run_stream(pipe, sizeof(pipe) - 1, 1, split, sizeof(split));
    TAP_IS_STR(split, whole, "same outcomes fed byte by byte");
    run_stream(pipe, sizeof(pipe) - 1, 7, split, sizeof(split));
    TAP_IS_STR(split, whole, "same outcomes fed 7 bytes at a time");

    /* a too-long line between two good ones, in every chunk size pattern */
    blen = 5 + 9000 + 1 + 5;
    big = malloc(blen + 1);
    memcpy(big, "PING\n", 5);
    memset(big + 5, 'x', 9000);
    big[5 + 9000] = '\n';
    memcpy(big + 5 + 9001, "STATS", 5);
    big[blen] = '\0';
    {
        char *b2 = malloc(blen + 2);

        memcpy(b2, big, blen);
        b2[blen] = '\n';
        b2[blen + 1] = '\0';
        run_stream(b2, blen + 1, blen + 1, whole, sizeof(whole));
        TAP_IS_STR(whole, "1Ed3", "too long: ERR once, then the next line parses");
        run_stream(b2, blen + 1, 1, split, sizeof(split));
        TAP_IS_STR(split, whole, "too long, byte by byte: same");
        run_stream(b2, blen + 1, 4096, split, sizeof(split));
        TAP_IS_STR(split, whole, "too long, 4096 at a time: same");
        run_stream(b2, blen + 1, 4097, split, sizeof(split));
        TAP_IS_STR(split, whole, "too long, 4097 at a time: same");
        free(b2);
    }
    free(big);

    /* every prefix of an ATTACH line needs more; the whole line parses */
    {
        static const char line[] = "ATTACH dataset=imagenet batch=128 rank=3 world=8 "
                                   "transform=train scale=0.25,1 name=job/r3\r\n";
        int all_need = 1;

        for (size_t i = 0; i < sizeof(line) - 2; i++)
            if (ctl_parse(line, i, &req, &used) != CTL_NEED_MORE || used != 0)
                all_need = 0;
        TAP_OK(all_need, "every strict prefix of a line needs more");
        TAP_IS_INT(ctl_parse(line, sizeof(line) - 1, &req, &used), CTL_DONE, "the line is done");
        TAP_OK(req.err == 0 && req.attach.batch == 128 && req.attach.rank == 3 &&
                   req.attach.world == 8 && req.attach.transform == CTL_TRANSFORM_TRAIN &&
                   req.attach.scale[0] == 0.25 && strcmp(req.attach.name, "job/r3") == 0,
               "and holds every value");
    }
}

/* ATTACH with one extra key=value after dataset=d. */
static void attach_kv(const char *kv, int want_ok, const char *what)
{
    char line[512];

    snprintf(line, sizeof(line), "ATTACH dataset=d %s\n", kv);
    parse_line(line);
    if (want_ok) {
        if (!tap_ok(req.err == CTL_E_NONE, "%s: %s accepted", what, kv))
            tap_diag("  msg \"%s\"", req.msg);
    } else {
        const char *eq = strchr(kv, '=');
        char key[64];
        int named;

        snprintf(key, sizeof(key), "%.*s", eq ? (int)(eq - kv) : 0, kv);
        named = req.err == CTL_E_BAD_ARG && strstr(req.msg, key) && strstr(req.msg, "ATTACH");
        if (!tap_ok(named, "%s: %s refused naming the key", what, kv))
            tap_diag("  err %d msg \"%s\"", (int)req.err, req.msg);
    }
}

static void test_attach_defaults(void)
{
    const struct ctl_attach *a = &req.attach;

    expect_ok("ATTACH dataset=fmnist\n", CTL_VERB_ATTACH, "ATTACH with dataset only");
    TAP_IS_STR(a->dataset, "fmnist", "dataset");
    TAP_IS_INT(a->batch, 256, "batch default 256");
    TAP_IS_INT(a->rank, 0, "rank default 0");
    TAP_IS_INT(a->world, 1, "world default 1");
    TAP_IS_INT(a->seed, 0, "seed default 0");
    TAP_IS_INT(a->epoch, 0, "epoch default 0");
    TAP_IS_INT(a->seq, 0, "seq default 0");
    TAP_IS_INT(a->transform, CTL_TRANSFORM_RAW, "transform default raw");
    TAP_IS_INT(a->depth, 0, "depth default 0: the daemon picks by ring size");
    TAP_IS_INT(a->size, 224, "size default 224");
    TAP_IS_INT(a->layout, CTL_LAYOUT_CHW, "layout default chw");
    TAP_OK(a->scale[0] == 0.08 && a->scale[1] == 1.0, "scale default 0.08,1");
    TAP_OK(a->ratio[0] == 0.75 && a->ratio[1] == 1.3333333, "ratio default 0.75,1.3333333");
    TAP_OK(a->flip == 0.5, "flip default 0.5");
    TAP_OK(a->crop == 0.875, "crop default 0.875");
    TAP_OK(a->shuffle && !a->drop_last, "shuffle 1, drop_last 0 by default");
    TAP_OK(!a->drop_last_batch, "drop_last_batch 0 by default");
    TAP_IS_INT(a->version, 0, "version not given -> 0");
    TAP_IS_STR(a->name, "", "name not given -> empty");
}

static void test_attach_bounds(void)
{
    /* every key: min, max, and one past each */
    attach_kv("batch=1", 1, "batch min");
    attach_kv("batch=65536", 1, "batch max");
    attach_kv("batch=0", 0, "batch min-1");
    attach_kv("batch=65537", 0, "batch max+1");
    attach_kv("rank=0 world=65536", 1, "rank min");
    attach_kv("rank=65535 world=65536", 1, "rank max");
    attach_kv("rank=-1", 0, "rank negative");
    attach_kv("rank=65536 world=65536", 0, "rank max+1");
    attach_kv("rank=3 world=4", 1, "rank = world - 1");
    attach_kv("rank=4 world=4", 0, "rank = world");
    attach_kv("world=1", 1, "world min");
    attach_kv("world=65536", 1, "world max");
    attach_kv("world=0", 0, "world min-1");
    attach_kv("world=65537", 0, "world max+1");
    attach_kv("seed=0", 1, "seed min");
    attach_kv("seed=18446744073709551615", 1, "seed max");
    attach_kv("seed=18446744073709551616", 0, "seed max+1");
    attach_kv("seed=-1", 0, "seed negative");
    attach_kv("epoch=0", 1, "epoch min");
    attach_kv("epoch=4294967295", 1, "epoch max");
    attach_kv("epoch=4294967296", 0, "epoch max+1");
    attach_kv("seq=0", 1, "seq min");
    attach_kv("seq=18446744073709551615", 1, "seq max");
    attach_kv("seq=18446744073709551616", 0, "seq max+1");
    attach_kv("transform=raw", 1, "transform raw");
    attach_kv("transform=train", 1, "transform train");
    attach_kv("transform=eval", 1, "transform eval");
    attach_kv("transform=EVAL", 1, "transform any case");
    attach_kv("transform=test", 0, "transform unknown word");
    attach_kv("transform=", 0, "transform empty");
    attach_kv("depth=2", 1, "depth min");
    attach_kv("depth=64", 1, "depth max");
    attach_kv("depth=1", 0, "depth min-1");
    attach_kv("depth=65", 0, "depth max+1");
    attach_kv("size=8", 1, "size min");
    attach_kv("size=4096", 1, "size max");
    attach_kv("size=7", 0, "size min-1");
    attach_kv("size=4097", 0, "size max+1");
    attach_kv("layout=chw", 1, "layout chw");
    attach_kv("layout=hwc", 1, "layout hwc");
    attach_kv("layout=nhwc", 0, "layout unknown word");
    attach_kv("scale=0.08,1", 1, "scale default");
    attach_kv("scale=1,1", 1, "scale max, LO = HI");
    attach_kv("scale=1e-300,1e-300", 1, "scale just above 0");
    attach_kv("scale=0,1", 0, "scale LO = 0");
    attach_kv("scale=0.5,1.0000001", 0, "scale HI past 1");
    attach_kv("scale=0.6,0.5", 0, "scale LO > HI");
    attach_kv("scale=0.5", 0, "scale without HI");
    attach_kv("scale=0.5,", 0, "scale empty HI");
    attach_kv("scale=,0.5", 0, "scale empty LO");
    attach_kv("scale=0.1,0.5,1", 0, "scale three numbers");
    attach_kv("ratio=0.75,1.3333333", 1, "ratio default");
    attach_kv("ratio=100,100", 1, "ratio max");
    attach_kv("ratio=0,1", 0, "ratio LO = 0");
    attach_kv("ratio=1,100.00001", 0, "ratio HI past 100");
    attach_kv("ratio=2,1", 0, "ratio LO > HI");
    attach_kv("weight=1", 1, "weight min");
    attach_kv("weight=1000", 1, "weight max");
    attach_kv("weight=0", 0, "weight 0 (not given is the daemon's default)");
    attach_kv("weight=1001", 0, "weight past 1000");
    attach_kv("share=0", 1, "share=0");
    attach_kv("share=2", 0, "share=2");
    attach_kv("flip=0", 1, "flip min");
    attach_kv("flip=1", 1, "flip max");
    attach_kv("flip=-0.001", 0, "flip below 0");
    attach_kv("flip=1.001", 0, "flip past 1");
    attach_kv("flip=.5", 1, "flip .5");
    attach_kv("flip=5e-1", 1, "flip 5e-1");
    attach_kv("flip=nan", 0, "flip nan");
    attach_kv("flip=inf", 0, "flip inf");
    attach_kv("flip=0x1p-1", 0, "flip hex float");
    attach_kv("flip=0,5", 0, "flip with a decimal comma");
    attach_kv("flip=0.5x", 0, "flip trailing junk");
    attach_kv("crop=1", 1, "crop max");
    attach_kv("crop=0.000001", 1, "crop near 0");
    attach_kv("crop=0", 0, "crop 0");
    attach_kv("crop=1.5", 0, "crop past 1");
    attach_kv("shuffle=0", 1, "shuffle 0");
    attach_kv("shuffle=1", 1, "shuffle 1");
    attach_kv("shuffle=2", 0, "shuffle 2");
    attach_kv("shuffle=true", 0, "shuffle true");
    attach_kv("shuffle=block", 1, "shuffle block");
    TAP_OK(req.attach.shuffle == SAMPLER_SHUFFLE_BLOCK && req.attach.block == 0,
           "shuffle=block parsed, block left to the daemon");
    attach_kv("shuffle=BLOCK", 1, "shuffle block in capitals");
    attach_kv("shuffle=blocks", 0, "shuffle blocks");
    attach_kv("shuffle=block block=40000", 1, "block size");
    TAP_IS_INT(req.attach.block, 40000, "block=40000 parsed");
    attach_kv("shuffle=block block=1", 1, "block 1");
    attach_kv("shuffle=block block=4611686018427387904", 1, "block 2^62");
    attach_kv("block=4611686018427387905 shuffle=block", 0, "block past 2^62");
    attach_kv("block=0 shuffle=block", 0, "block 0");
    attach_kv("block=-4 shuffle=block", 0, "block negative");
    attach_kv("block=64", 0, "block without shuffle=block");
    TAP_OK(strstr(req.msg, "shuffle=block") != NULL, "  the refusal says shuffle=block");
    attach_kv("block=64 shuffle=0", 0, "block with shuffle=0");
    attach_kv("drop_last=0", 1, "drop_last 0");
    attach_kv("drop_last=1", 1, "drop_last 1");
    attach_kv("drop_last=01", 0, "drop_last 01");
    attach_kv("version=1", 1, "version min");
    attach_kv("version=4294967295", 1, "version max");
    attach_kv("version=0", 0, "version 0");
    attach_kv("version=4294967296", 0, "version max+1");
    attach_kv("name=rank3@node1", 1, "name");
    attach_kv("name=job/r3:a+b_c-d.e", 1, "name with every punctuation allowed");
    attach_kv("name=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 1,
              "name of 64");
    attach_kv("name=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0,
              "name of 65");
    attach_kv("name=", 0, "name empty");
    attach_kv("name=a\"b", 0, "name with a quote");
    attach_kv("name=\xc3\xa9", 0, "name outside its charset");

    expect_ok("ATTACH dataset=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
              CTL_VERB_ATTACH, "dataset of 64");
    expect_ok("ATTACH dataset=A.b_c-9\n", CTL_VERB_ATTACH, "dataset with . _ -");
    expect_err("ATTACH dataset=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
               CTL_E_BAD_ARG, "dataset of 65", "dataset", "1 to 64", NULL);
    expect_err("ATTACH dataset=\n", CTL_E_BAD_ARG, "dataset empty", "dataset", NULL);
    expect_err("ATTACH dataset=../etc\n", CTL_E_BAD_ARG, "dataset with a slash", "dataset",
               NULL);
    expect_err("ATTACH batch=8\n", CTL_E_BAD_ARG, "dataset missing",
               "dataset=NAME (or mix=) is required", NULL);
    expect_ok("ATTACH mix=web:0.7,books:0.3 repeat=0 per_stream=1\n", CTL_VERB_ATTACH,
              "mix= instead of dataset=");
    TAP_OK(strcmp(req.attach.mix, "web:0.7,books:0.3") == 0 && !req.attach.repeat &&
           req.attach.per_stream && req.attach.dataset[0] == '\0', "  mix, repeat, per_stream");
    expect_err("ATTACH dataset=a mix=a:1,b:1\n", CTL_E_BAD_ARG, "dataset and mix",
               "name the data twice", NULL);
    expect_err("ATTACH mix=a:1\n", CTL_E_BAD_ARG, "a mixture of one", "mixture needs 2",
               NULL);
    expect_err("ATTACH mix=a:1,b:x\n", CTL_E_BAD_ARG, "a bad weight", "b: weight 'x'", NULL);
    expect_err("ATTACH mix=a:1,b:1 epoch_of=../x\n", CTL_E_BAD_ARG, "epoch_of not a name",
               "epoch_of", NULL);

    /* messages name the key and the accepted range */
    expect_err("ATTACH dataset=d batch=0\n", CTL_E_BAD_ARG, "batch message", "batch",
               "1..65536", "\"0\"", NULL);
    expect_err("ATTACH dataset=d depth=99\n", CTL_E_BAD_ARG, "depth message", "2..64", NULL);
    expect_err("ATTACH dataset=d flip=2\n", CTL_E_BAD_ARG, "flip message", "[0, 1]", NULL);
    expect_err("ATTACH dataset=d crop=2\n", CTL_E_BAD_ARG, "crop message", "(0, 1]", NULL);
    expect_err("ATTACH dataset=d scale=2,3\n", CTL_E_BAD_ARG, "scale message",
               "0 < LO <= HI <= 1", NULL);
    expect_err("ATTACH dataset=d transform=x\n", CTL_E_BAD_ARG, "transform message",
               "raw|train|eval", NULL);
    expect_err("ATTACH dataset=d rank=4 world=4\n", CTL_E_BAD_ARG, "rank/world message",
               "rank=4", "world=4", NULL);
    expect_err("ATTACH dataset=d seed=1e3\n", CTL_E_BAD_ARG, "seed takes no exponent",
               "seed", "0..18446744073709551615", NULL);

    /* syntax of the pairs */
    expect_err("ATTACH dataset=d frob=1\n", CTL_E_BAD_ARG, "unknown key", "\"frob\"", "keys:",
               "drop_last", NULL);
    expect_err("ATTACH dataset=d =1\n", CTL_E_BAD_ARG, "empty key", "unknown key", NULL);
    expect_err("ATTACH dataset=d batch=1 batch=2\n", CTL_E_BAD_ARG, "duplicate key",
               "batch given twice", NULL);
    expect_err("ATTACH dataset=d dataset=e\n", CTL_E_BAD_ARG, "duplicate dataset",
               "dataset given twice", NULL);
    expect_err("ATTACH dataset=d batch=1 BATCH=2\n", CTL_E_BAD_ARG,
               "duplicate key in another case", "given twice", NULL);
    expect_err("ATTACH dataset=d batch\n", CTL_E_BAD_ARG, "key without =", "key=value",
               "\"batch\"", NULL);
    expect_err("ATTACH dataset=d batch= 8\n", CTL_E_BAD_ARG, "blank after =", "batch", NULL);
    expect_ok("ATTACH DATASET=d Batch=08\n", CTL_VERB_ATTACH, "keys any case, leading zero");
    TAP_IS_INT(req.attach.batch, 8, "batch=08 -> 8");
    expect_ok("ATTACH dataset=d batch=9 rank=1 world=2 seed=5 epoch=6 seq=7 transform=eval "
              "depth=8 size=32 layout=hwc scale=0.5,0.75 ratio=1,2 flip=0 crop=0.5 "
              "shuffle=block block=7 drop_last=1 drop_last_batch=1 version=3 name=x weight=7 "
              "share=0 field=img_2 subset=val augment=RandomInvert:p=1,RandomVerticalFlip "
              "context=8 doc_ids=1 repeat=0 epoch_of=a per_stream=1\n",
              CTL_VERB_ATTACH, "all 31 keys but mix at once");
    TAP_OK(req.attach.context == 8 && req.attach.doc_ids, "context=8 doc_ids=1 parsed");
    TAP_OK(req.attach.shuffle == SAMPLER_SHUFFLE_BLOCK && req.attach.block == 7,
           "shuffle=block block=7 parsed");
    TAP_IS_STR(req.attach.augment, "RandomInvert:p=1,RandomVerticalFlip", "augment= kept as given");
    TAP_IS_STR(req.attach.field, "img_2", "field=img_2 parsed");
    TAP_OK(req.attach.weight == 7 && !req.attach.share, "weight=7 share=0 parsed");
    TAP_OK(req.attach.drop_last && req.attach.drop_last_batch, "drop_last_batch=1 parsed");
    expect_err("ATTACH dataset=d batch=9 rank=1 world=2 seed=5 epoch=6 seq=7 transform=eval "
               "depth=8 size=32 layout=hwc scale=0.5,0.75 ratio=1,2 flip=0 crop=0.5 "
               "shuffle=block block=7 drop_last=1 drop_last_batch=1 version=3 name=x weight=7 "
               "share=0 field=a subset=v augment=RandomInvert context=8 doc_ids=1 repeat=1 "
               "epoch_of=a per_stream=0 mix=a:1,b:1 name=y\n",
               CTL_E_BAD_ARG, "33 arguments", "takes 1 to 32", NULL);
    expect_err("ATTACH dataset=d context=0\n", CTL_E_BAD_ARG, "context=0", "1..65536", NULL);
    expect_err("ATTACH dataset=d context=65537\n", CTL_E_BAD_ARG, "context too large",
               "1..65536", NULL);
    /* augment=: a spec, checked whole, or @RECIPE (the daemon looks it up) */
    expect_ok("ATTACH dataset=d augment=@cifar-1\n", CTL_VERB_ATTACH, "augment=@cifar-1");
    TAP_IS_STR(req.attach.augment, "@cifar-1", "augment=@cifar-1 kept");
    expect_err("ATTACH dataset=d augment=Blur\n", CTL_E_BAD_ARG, "augment: unknown op",
               "ATTACH: augment: unknown op \"Blur\"", NULL);
    expect_err("ATTACH dataset=d augment=RandomInvert:p=3\n", CTL_E_BAD_ARG,
               "augment: out of range", "RandomInvert: bad value \"3\" for p", NULL);
    expect_err("ATTACH dataset=d augment=RandomErasing,RandomInvert\n", CTL_E_BAD_ARG,
               "augment: erasing not last", "RandomErasing must be the last op", NULL);
    expect_err("ATTACH dataset=d augment=@9x\n", CTL_E_BAD_ARG, "augment: a bad recipe name",
               "names a recipe", NULL);
    expect_err("ATTACH dataset=d augment=\n", CTL_E_BAD_ARG, "augment: empty", "empty spec",
               NULL);
    /* subset=: a set's name, or START:STOP with either bound left out */
    expect_ok("ATTACH dataset=d subset=val\n", CTL_VERB_ATTACH, "subset=val");
    TAP_OK(!req.attach.subset.range && strcmp(req.attach.subset.name, "val") == 0,
           "subset=val: a name");
    expect_ok("ATTACH dataset=d subset=100:200\n", CTL_VERB_ATTACH, "subset=100:200");
    TAP_OK(req.attach.subset.range && req.attach.subset.start == 100 &&
           req.attach.subset.stop == 200 && !req.attach.subset.name[0], "100:200: a range");
    expect_ok("ATTACH dataset=d subset=:5\n", CTL_VERB_ATTACH, "subset=:5");
    TAP_OK(req.attach.subset.range && req.attach.subset.start == 0 &&
           req.attach.subset.stop == 5, ":5 starts at 0");
    expect_ok("ATTACH dataset=d subset=7:\n", CTL_VERB_ATTACH, "subset=7:");
    TAP_OK(req.attach.subset.range && req.attach.subset.start == 7 &&
           req.attach.subset.stop == UINT64_MAX, "7: runs to the end");
    expect_ok("ATTACH dataset=d\n", CTL_VERB_ATTACH, "no subset=");
    TAP_OK(!req.attach.subset.range && !req.attach.subset.name[0], "no subset: whole dataset");
    expect_err("ATTACH dataset=d subset=5:5\n", CTL_E_BAD_ARG, "subset=5:5 empty",
               "subset takes", NULL);
    expect_err("ATTACH dataset=d subset=9:3\n", CTL_E_BAD_ARG, "subset=9:3 backwards",
               "START < STOP", NULL);
    expect_err("ATTACH dataset=d subset=:\n", CTL_E_BAD_ARG, "subset=: alone", "subset", NULL);
    expect_err("ATTACH dataset=d subset=-1:3\n", CTL_E_BAD_ARG, "subset=-1:3 negative",
               "subset", NULL);
    expect_err("ATTACH dataset=d subset=1:2:3\n", CTL_E_BAD_ARG, "subset=1:2:3", "subset", NULL);
    expect_err("ATTACH dataset=d subset=9val\n", CTL_E_BAD_ARG, "subset=9val: not a name",
               "subset", NULL);
    expect_err("ATTACH dataset=d subset=a.b\n", CTL_E_BAD_ARG, "subset=a.b: not a name",
               "subset", NULL);
    /* field=: a schema field name (proto/schema.h's rule) */
    expect_ok("ATTACH dataset=d field=image\n", CTL_VERB_ATTACH, "field=image");
    TAP_IS_STR(req.attach.field, "image", "field=image parsed");
    expect_ok("ATTACH dataset=d\n", CTL_VERB_ATTACH, "no field=");
    TAP_IS_STR(req.attach.field, "", "field= not given: empty");
    expect_ok("ATTACH dataset=d field=_x9\n", CTL_VERB_ATTACH, "field=_x9");
    expect_ok("ATTACH dataset=d field=abcdefghijklmnopqrstuvwxyz01234\n", CTL_VERB_ATTACH,
              "field= of 31 characters");
    expect_err("ATTACH dataset=d field=abcdefghijklmnopqrstuvwxyz012345\n", CTL_E_BAD_ARG,
               "field= of 32 characters", "field", "1 to 31", NULL);
    expect_err("ATTACH dataset=d field=9lives\n", CTL_E_BAD_ARG, "field= starting with a digit",
               "field", "not starting with a digit", NULL);
    expect_err("ATTACH dataset=d field=a-b\n", CTL_E_BAD_ARG, "field= with a dash", "field",
               "A-Z a-z 0-9 _", NULL);
    expect_err("ATTACH dataset=d field=a.b\n", CTL_E_BAD_ARG, "field= with a dot", "field",
               NULL);
    {
        char line[1024];
        size_t o = (size_t)snprintf(line, sizeof(line), "ATTACH");

        for (int i = 0; i < 40; i++)
            o += (size_t)snprintf(line + o, sizeof(line) - o, " k%d=1", i);
        snprintf(line + o, sizeof(line) - o, "\n");
        expect_err(line, CTL_E_BAD_ARG, "40 arguments: bounded", "over 32", NULL);
    }
}

static int attach_same(const struct ctl_attach *a, const struct ctl_attach *b)
{
    return strcmp(a->dataset, b->dataset) == 0 && strcmp(a->name, b->name) == 0 &&
           a->batch == b->batch && a->rank == b->rank && a->world == b->world &&
           a->seed == b->seed && a->epoch == b->epoch && a->seq == b->seq &&
           a->transform == b->transform && a->depth == b->depth && a->size == b->size &&
           a->layout == b->layout && a->scale[0] == b->scale[0] && a->scale[1] == b->scale[1] &&
           a->ratio[0] == b->ratio[0] && a->ratio[1] == b->ratio[1] && a->flip == b->flip &&
           a->crop == b->crop && a->shuffle == b->shuffle && a->block == b->block && a->drop_last == b->drop_last &&
           a->version == b->version && strcmp(a->field, b->field) == 0;
}

static uint64_t rs = 0x853c49e6748fea9bull;

static uint64_t rnd(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return rs;
}

/* A double in (0, hi] (or [0, hi] with zero_ok), sometimes a round number. */
static double rnd_unit(double hi, int zero_ok)
{
    switch (rnd() % 4) {
    case 0:
        return hi;
    case 1:
        return zero_ok ? 0.0 : hi / 3.0;
    default: {
        double d = (double)(rnd() >> 11) / 9007199254740992.0 * hi;
        return d > 0 || zero_ok ? d : hi;
    }
    }
}

static void random_attach(struct ctl_attach *a)
{
    double x, y;

    ctl_attach_defaults(a);
    snprintf(a->dataset, sizeof(a->dataset), "ds%u", (unsigned)(rnd() % 1000));
    if (rnd() % 2)
        snprintf(a->name, sizeof(a->name), "job/r%u@n", (unsigned)(rnd() % 100));
    a->batch = 1 + (uint32_t)(rnd() % 65536);
    a->world = 1 + (uint32_t)(rnd() % 65536);
    a->rank = (uint32_t)(rnd() % a->world);
    a->seed = rnd();
    a->epoch = (uint32_t)rnd();
    a->seq = rnd() % 3 ? rnd() : 0;
    a->transform = (uint32_t)(rnd() % 3);
    a->depth = 2 + (uint32_t)(rnd() % 63);
    a->size = 8 + (uint32_t)(rnd() % 4089);
    a->layout = (uint32_t)(rnd() % 2);
    x = rnd_unit(1, 0), y = rnd_unit(1, 0);
    a->scale[0] = x < y ? x : y, a->scale[1] = x < y ? y : x;
    x = rnd_unit(100, 0), y = rnd_unit(100, 0);
    a->ratio[0] = x < y ? x : y, a->ratio[1] = x < y ? y : x;
    a->flip = rnd_unit(1, 1);
    a->crop = rnd_unit(1, 0);
    a->shuffle = (uint32_t)(rnd() % SAMPLER_SHUFFLE_COUNT);
    a->block = a->shuffle == SAMPLER_SHUFFLE_BLOCK && rnd() % 2 ? 1 + rnd() % 1000000 : 0;
    a->drop_last = rnd() % 2;
    a->version = rnd() % 2 ? (uint32_t)(1 + rnd() % 100) : 0;
}

static void test_attach_format(void)
{
    struct ctl_attach a, b;
    struct rf_err e = {{0}};
    char buf[CTL_LINE_MAX];
    size_t used;
    int n, fails = 0;

    ctl_attach_defaults(&a);
    snprintf(a.dataset, sizeof(a.dataset), "fmnist");
    n = ctl_format_attach(&a, buf, sizeof(buf), &e);
    TAP_IS_STR(n > 0 ? buf : e.msg, "ATTACH dataset=fmnist\n", "defaults format to one key");

    a.batch = 64;
    a.transform = CTL_TRANSFORM_TRAIN;
    a.scale[0] = 0.25;
    a.flip = 0;
    a.shuffle = SAMPLER_SHUFFLE_OFF;
    a.version = 1;
    snprintf(a.name, sizeof(a.name), "r0");
    n = ctl_format_attach(&a, buf, sizeof(buf), &e);
    TAP_IS_STR(n > 0 ? buf : e.msg,
               "ATTACH dataset=fmnist batch=64 transform=train scale=0.25,1 flip=0 "
               "shuffle=0 version=1 name=r0\n",
               "non-defaults are written, shortest numbers");
    TAP_IS_INT(ctl_parse(buf, (size_t)n, &req, &used), CTL_DONE, "the line parses");
    TAP_OK(req.err == 0 && attach_same(&req.attach, &a), "and reads back as the same attach");
    b = a;
    snprintf(b.field, sizeof(b.field), "photo");
    n = ctl_format_attach(&b, buf, sizeof(buf), &e);
    TAP_OK(n > 0 && strstr(buf, " field=photo\n") != NULL, "field= is written when given");
    TAP_IS_INT(ctl_parse(buf, (size_t)n, &req, &used), CTL_DONE, "and parses");
    TAP_OK(req.err == 0 && attach_same(&req.attach, &b), "and reads back as the same field");
    snprintf(b.field, sizeof(b.field), "9x");
    TAP_IS_INT(ctl_format_attach(&b, buf, sizeof(buf), &e), -EINVAL, "a bad field= refused");
    TAP_OK(strstr(e.msg, "field") != NULL, "naming field");

    /* a key the request named is written even at its default (the daemon
     * refuses a transform parameter its transform does not use, so a
     * user's flip=0.5 must reach it), and reads back as named */
    TAP_IS_INT(ctl_parse("ATTACH dataset=d flip=0.5 size=224\n", 35, &req, &used), CTL_DONE,
               "flip=0.5 size=224 (both defaults) parse");
    TAP_OK(req.err == 0 && ctl_attach_given(&req.attach, "flip") &&
           ctl_attach_given(&req.attach, "size") && ctl_attach_given(&req.attach, "dataset") &&
           !ctl_attach_given(&req.attach, "scale") && !ctl_attach_given(&req.attach, "crop"),
           "given names flip, size and dataset, not scale or crop");
    n = ctl_format_attach(&req.attach, buf, sizeof(buf), &e);
    TAP_IS_STR(n > 0 ? buf : e.msg, "ATTACH dataset=d size=224 flip=0.5\n",
               "given keys at their default are written");
    b = a;
    TAP_IS_INT(ctl_attach_give(&b, "crop"), 0, "ctl_attach_give crop");
    TAP_IS_INT(ctl_attach_give(&b, "nope"), -ENOENT, "ctl_attach_give of no key: -ENOENT");
    n = ctl_format_attach(&b, buf, sizeof(buf), &e);
    TAP_OK(n > 0 && strstr(buf, " crop=0.875") != NULL, "a given crop=0.875 is written");
    TAP_IS_INT(ctl_format_attach(&a, buf, 20, &e), -ENOSPC, "small cap -> ENOSPC");
    /* subset= round-trips in each of its forms */
    {
        static const char *const forms[] = {"val", "3:9", ":9", "3:"};

        for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
            char line[128], want[64];
            struct ctl_req r2;

            snprintf(line, sizeof(line), "ATTACH dataset=d subset=%s\n", forms[i]);
            ctl_parse(line, strlen(line), &req, &used);
            n = ctl_format_attach(&req.attach, buf, sizeof(buf), &e);
            snprintf(want, sizeof(want), "ATTACH dataset=d subset=%s\n", forms[i]);
            TAP_IS_STR(n > 0 ? buf : e.msg, want, "subset= formats as it parsed");
            ctl_parse(buf, strlen(buf), &r2, &used);
            TAP_OK(r2.err == 0 && ctl_subset_same(&r2.attach.subset, &req.attach.subset),
                   "and reads back the same");
        }
    }
    b = a;
    b.subset.range = true;
    b.subset.start = b.subset.stop = 4;
    TAP_IS_INT(ctl_format_attach(&b, buf, sizeof(buf), &e), -EINVAL, "an empty range refused");
    b = a;
    b.rank = b.world = 4;
    TAP_IS_INT(ctl_format_attach(&b, buf, sizeof(buf), &e), -EINVAL, "rank = world refused");
    TAP_OK(strstr(e.msg, "rank=4") != NULL, "with a message");
    b = a;
    b.flip = NAN;
    TAP_IS_INT(ctl_format_attach(&b, buf, sizeof(buf), &e), -EINVAL, "NaN refused");
    b = a;
    b.flip = 1e-310;
    TAP_IS_INT(ctl_format_attach(&b, buf, sizeof(buf), &e), -ERANGE, "denormal refused");
    b = a;
    b.dataset[0] = '\0';
    TAP_IS_INT(ctl_format_attach(&b, buf, sizeof(buf), &e), -EINVAL, "no dataset refused");
    b = a;
    b.transform = 7;
    TAP_IS_INT(ctl_attach_check(&b, &e), -EINVAL, "transform out of enum refused");
    b = a;
    memset(b.dataset, 'a', sizeof(b.dataset)); /* no NUL */
    TAP_IS_INT(ctl_attach_check(&b, &e), -EINVAL, "unterminated dataset refused");

    for (int i = 0; i < 5000; i++) {
        random_attach(&a);
        n = ctl_format_attach(&a, buf, sizeof(buf), &e);
        if (n <= 0 || ctl_parse(buf, (size_t)n, &req, &used) != CTL_DONE || req.err ||
            !attach_same(&req.attach, &a)) {
            if (fails++ == 0)
                tap_diag("  round trip failed: %s / %s / %s", n > 0 ? buf : "-", e.msg,
                         req.msg);
        }
    }
    TAP_IS_INT(fails, 0, "5000 random attaches: format, parse, same values");
}

static void test_reply_format(void)
{
    char buf[CTL_LINE_MAX + 64], *big;
    int n;

    n = ctl_reply_ok(buf, sizeof(buf), "pong");
    TAP_IS_STR(buf, "OK pong\n", "OK with text");
    TAP_IS_INT(n, 8, "returns the length");
    ctl_reply_ok(buf, sizeof(buf), NULL);
    TAP_IS_STR(buf, "OK\n", "OK without text (NULL)");
    ctl_reply_ok(buf, sizeof(buf), "%s", "");
    TAP_IS_STR(buf, "OK\n", "OK without text (empty)");
    ctl_reply_ok(buf, sizeof(buf), "workers=%d", 8);
    TAP_IS_STR(buf, "OK workers=8\n", "OK formats printf-style");
    TAP_IS_INT(ctl_reply_ok(buf, sizeof(buf), "%d workers", 8), -EINVAL,
               "OK text starting with a digit is refused");
    ctl_reply_ok(buf, sizeof(buf), "a\nb\rc\td\x01" "e\xff" "f");
    TAP_IS_STR(buf, "OK a b c d e?f\n", "OK text sanitized to one line");
    TAP_IS_INT(ctl_reply_ok(buf, 5, "pong"), -ENOSPC, "OK past cap");
    TAP_IS_INT(ctl_reply_ok(buf, 9, "pong"), 8, "OK exactly fits cap");

    big = malloc(8000);
    memset(big, 'x', 7999);
    big[7999] = '\0';
    big[CTL_LINE_MAX - 4] = '\0'; /* "OK " + 4092 + "\n" = 4096 */
    TAP_IS_INT(ctl_reply_ok(buf, sizeof(buf), "%s", big), CTL_LINE_MAX,
               "OK line of exactly CTL_LINE_MAX");
    big[CTL_LINE_MAX - 4] = 'x';
    big[CTL_LINE_MAX - 3] = '\0';
    TAP_IS_INT(ctl_reply_ok(buf, sizeof(buf), "%s", big), -EMSGSIZE, "OK line one over");

    n = ctl_reply_err(buf, sizeof(buf), CTL_E_BAD_ARG, "WORKERS: n must be %s", "1..256");
    TAP_IS_STR(buf, "ERR bad-arg WORKERS: n must be 1..256\n", "ERR line");
    TAP_IS_INT(n, (int)strlen(buf), "ERR length");
    ctl_reply_err(buf, sizeof(buf), CTL_E_BUSY, NULL);
    TAP_IS_STR(buf, "ERR busy busy, try again later\n", "ERR with the default message");
    TAP_IS_INT(ctl_reply_err(buf, sizeof(buf), (enum ctl_errcode)999, "x"), -EINVAL,
               "ERR with a code not in the table");
    TAP_IS_INT(ctl_reply_err(buf, sizeof(buf), CTL_E_NONE, "x"), -EINVAL, "ERR with NONE");
    ctl_reply_err(buf, sizeof(buf), CTL_E_INTERNAL, "path /a\nb");
    TAP_IS_STR(buf, "ERR internal path /a b\n", "ERR message sanitized");
    memset(big, 'y', 7999);
    big[7999] = '\0';
    n = ctl_reply_err(buf, sizeof(buf), CTL_E_INTERNAL, "%s", big);
    TAP_OK(n > 0 && (size_t)n == strlen("ERR internal ") + CTL_ERR_MSG_MAX + 1 &&
               strcmp(buf + n - 4, "...\n") == 0,
           "long ERR message cut to CTL_ERR_MSG_MAX with ...");
    for (int i = 0; i + 2 <= 3000; i += 2)
        memcpy(big + i, "\xc3\xa9", 2);
    big[3000] = '\0';
    n = ctl_reply_err(buf, sizeof(buf), CTL_E_INTERNAL, "%s", big);
    TAP_OK(n > 0 && ctl_text_check(buf, (size_t)n - 1) == (size_t)n - 1,
           "a cut message stays UTF-8");
    free(big);

    ctl_reply_multi(buf, sizeof(buf), 3, "datasets");
    TAP_IS_STR(buf, "OK 3 datasets\n", "multi header with text");
    ctl_reply_multi(buf, sizeof(buf), 0, NULL);
    TAP_IS_STR(buf, "OK 0\n", "multi header, no lines");
    TAP_IS_INT(ctl_reply_multi(buf, sizeof(buf), CTL_REPLY_LINES_MAX + 1, NULL), -EINVAL,
               "multi over CTL_REPLY_LINES_MAX");
    TAP_OK(ctl_reply_multi(buf, sizeof(buf), CTL_REPLY_LINES_MAX, NULL) > 0,
           "multi at CTL_REPLY_LINES_MAX");
    ctl_reply_line(buf, sizeof(buf), "fmnist %d records", 60000);
    TAP_IS_STR(buf, "fmnist 60000 records\n", "body line");
    ctl_reply_line(buf, sizeof(buf), "%s", "");
    TAP_IS_STR(buf, "\n", "empty body line");
    ctl_reply_line(buf, sizeof(buf), "a\r\nb");
    TAP_IS_STR(buf, "a  b\n", "body line sanitized");
}

static struct ctl_reply rep;

static enum ctl_status reply_str(const char *s, size_t *used)
{
    return ctl_parse_reply(s, strlen(s), &rep, used);
}

static int text_is(const char *buf, size_t off, size_t len, const char *want)
{
    return len == strlen(want) && memcmp(buf + off, want, len) == 0;
}

static void test_reply_parse(void)
{
    size_t used, cur = 0, off, len;
    const char *s;

    s = "OK pong\n";
    TAP_IS_INT(reply_str(s, &used), CTL_DONE, "OK pong parses");
    TAP_OK(rep.ok && !rep.multi && text_is(s, rep.text_off, rep.text_len, "pong") && used == 8,
           "OK pong: ok, text, consumed");
    s = "OK\r\n";
    TAP_IS_INT(reply_str(s, &used), CTL_DONE, "OK CRLF parses");
    TAP_OK(rep.ok && rep.text_len == 0 && used == 4, "bare OK");
    s = "ERR bad-arg WORKERS: n must be an integer in 1..256, got \"0\"\n";
    TAP_IS_INT(reply_str(s, &used), CTL_DONE, "ERR parses");
    TAP_OK(!rep.ok && rep.code == CTL_E_BAD_ARG && rep.err == -EINVAL &&
               text_is(s, rep.name_off, rep.name_len, "bad-arg") &&
               text_is(s, rep.text_off, rep.text_len,
                       "WORKERS: n must be an integer in 1..256, got \"0\""),
           "ERR: code, errno, name, message");
    s = "ERR shiny-new-code from the future\n";
    TAP_IS_INT(reply_str(s, &used), CTL_DONE, "ERR with an unknown code parses");
    TAP_OK(rep.code == CTL_E_NONE && rep.err == -EPROTO &&
               text_is(s, rep.name_off, rep.name_len, "shiny-new-code"),
           "unknown code: NONE, -EPROTO, name kept");
    TAP_IS_INT(reply_str("ERR busy\n", &used), CTL_DONE, "ERR without message");
    TAP_OK(rep.code == CTL_E_BUSY && rep.text_len == 0, "ERR busy: code, no text");

    s = "OK 2 datasets\nfmnist 60000\r\nimagenet 1281167\nOK\n";
    TAP_IS_INT(reply_str(s, &used), CTL_DONE, "multi-line parses");
    TAP_OK(rep.ok && rep.multi && rep.nlines == 2 &&
               text_is(s, rep.text_off, rep.text_len, "datasets") &&
               used == strlen(s) - 3,
           "multi: count, text, consumed up to the next reply");
    TAP_OK(ctl_reply_next_line(s, &rep, &cur, &off, &len) && text_is(s, off, len, "fmnist 60000"),
           "first body line, CR dropped");
    TAP_OK(ctl_reply_next_line(s, &rep, &cur, &off, &len) &&
               text_is(s, off, len, "imagenet 1281167"),
           "second body line");
    TAP_OK(!ctl_reply_next_line(s, &rep, &cur, &off, &len), "then no more");
    TAP_IS_INT(ctl_parse_reply(s + used, strlen(s) - used, &rep, &used), CTL_DONE,
               "the pipelined next reply parses");

    s = "OK 0\n";
    TAP_IS_INT(reply_str(s, &used), CTL_DONE, "OK 0 is complete");
    cur = 0;
    TAP_OK(rep.multi && rep.nlines == 0 && !ctl_reply_next_line(s, &rep, &cur, &off, &len),
           "OK 0 has no lines");
    s = "OK 3\n\n\n\n";
    TAP_IS_INT(reply_str(s, &used), CTL_DONE, "empty body lines count");
    TAP_IS_INT(used, 8, "all three consumed");

    /* every strict prefix of a multi-line reply needs more */
    {
        s = "OK 3 lines\nalpha\nbeta\ngamma\n";
        int all = 1;

        for (size_t i = 0; i < strlen(s); i++)
            if (ctl_parse_reply(s, i, &rep, &used) != CTL_NEED_MORE || used != 0)
                all = 0;
        TAP_OK(all, "truncated multi-line reply: need more at every length");
        TAP_IS_INT(reply_str(s, &used), CTL_DONE, "complete at full length");
    }

    TAP_IS_INT(reply_str("OKAY\n", &used), CTL_BAD, "OKAY is bad");
    TAP_IS_INT(reply_str("ok\n", &used), CTL_BAD, "lower-case ok is bad");
    TAP_IS_INT(reply_str("HELLO\n", &used), CTL_BAD, "neither OK nor ERR");
    TAP_OK(rep.why != NULL, "bad says why");
    TAP_IS_INT(reply_str("ERR\n", &used), CTL_BAD, "ERR without a name");
    TAP_IS_INT(reply_str("ERR \n", &used), CTL_BAD, "ERR with an empty name");
    TAP_IS_INT(reply_str("ERR aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa x\n", &used), CTL_BAD,
               "ERR with an overlong name");
    TAP_IS_INT(reply_str("OK 3x\n", &used), CTL_BAD, "count with junk");
    TAP_IS_INT(reply_str("OK 32769\n", &used), CTL_BAD, "count over CTL_REPLY_LINES_MAX");
    TAP_IS_INT(reply_str("OK 99999999999999999999999\n", &used), CTL_BAD, "count overflow");
    TAP_IS_INT(ctl_parse_reply("OK a\0b\n", 7, &rep, &used), CTL_BAD, "NUL in a reply");
    TAP_IS_INT(reply_str("OK 1\nx\x01y\n", &used), CTL_BAD, "control in a body line");
    TAP_IS_INT(reply_str("OK pong", &used), CTL_NEED_MORE, "no LF yet");
    {
        char *big = malloc(CTL_REPLY_MAX + 200000);
        size_t o = 0;

        memset(big, 'z', CTL_LINE_MAX + 10);
        TAP_IS_INT(ctl_parse_reply(big, CTL_LINE_MAX, &rep, &used), CTL_BAD,
                   "a first line of CTL_LINE_MAX without LF is bad");
        TAP_IS_INT(ctl_parse_reply(big, CTL_LINE_MAX - 1, &rep, &used), CTL_NEED_MORE,
                   "one byte less may still come");
        o = (size_t)sprintf(big, "OK 2\n");
        memset(big + o, 'z', CTL_LINE_MAX);
        TAP_IS_INT(ctl_parse_reply(big, o + CTL_LINE_MAX, &rep, &used), CTL_BAD,
                   "an overlong body line is bad");
        /* 16384 lines of 100 bytes: over CTL_REPLY_MAX */
        o = (size_t)sprintf(big, "OK %d\n", CTL_REPLY_LINES_MAX);
        for (int i = 0; i < CTL_REPLY_LINES_MAX && o + 100 < CTL_REPLY_MAX + 200000; i++) {
            memset(big + o, 'q', 99);
            big[o + 99] = '\n';
            o += 100;
        }
        TAP_IS_INT(ctl_parse_reply(big, o, &rep, &used), CTL_BAD, "a reply over CTL_REPLY_MAX");
        TAP_IS_INT(ctl_parse_reply(big, CTL_REPLY_MAX + 50, &rep, &used), CTL_BAD,
                   "over CTL_REPLY_MAX while incomplete");
        o = (size_t)sprintf(big, "OK %d\n", 10000);
        for (int i = 0; i < 10000; i++) {
            memset(big + o, 'q', 99);
            big[o + 99] = '\n';
            o += 100;
        }
        TAP_IS_INT(ctl_parse_reply(big, o, &rep, &used), CTL_DONE, "10000 lines, ~1 MB: done");
        TAP_IS_INT(used, o, "all of it consumed");
        free(big);
    }
}

/* Every formatter output parses back as what was written. */
static void test_reply_round_trip(void)
{
    char buf[3 * CTL_LINE_MAX];
    size_t o = 0, used;
    int n;

    n = ctl_reply_multi(buf, sizeof(buf), 2, "clients");
    o += (size_t)n;
    n = ctl_reply_line(buf + o, sizeof(buf) - o, "client r0 ring=%d", 1);
    o += (size_t)n;
    n = ctl_reply_line(buf + o, sizeof(buf) - o, "client r1 \xff");
    o += (size_t)n;
    n = ctl_reply_err(buf + o, sizeof(buf) - o, CTL_E_OVER_BUDGET, "needs %d MiB", 5);
    o += (size_t)n;
    TAP_IS_INT(ctl_parse_reply(buf, o, &rep, &used), CTL_DONE, "formatted multi-line parses");
    TAP_OK(rep.multi && rep.nlines == 2 && text_is(buf, rep.text_off, rep.text_len, "clients"),
           "multi-line round trip");
    TAP_IS_INT(ctl_parse_reply(buf + used, o - used, &rep, &used), CTL_DONE,
               "formatted ERR parses");
    TAP_OK(rep.code == CTL_E_OVER_BUDGET && rep.err == -ENOMEM, "ERR round trip");
}

/* CLASSES and SOURCES: a dataset name, SOURCES' start and count. */
static void test_meta_verbs(void)
{
    expect_ok("CLASSES fmnist\n", CTL_VERB_CLASSES, "CLASSES fmnist");
    TAP_IS_STR(req.dataset, "fmnist", "CLASSES: the dataset");
    expect_ok("classes A.b_c-9\n", CTL_VERB_CLASSES, "classes, any case");
    expect_err("CLASSES\n", CTL_E_BAD_ARG, "CLASSES without a dataset", "usage: CLASSES",
               NULL);
    expect_err("CLASSES a b\n", CTL_E_BAD_ARG, "CLASSES a b: one argument", NULL);
    expect_err("CLASSES ../x\n", CTL_E_BAD_ARG, "CLASSES ../x: not a name",
               "dataset must be", "\"../x\"", NULL);
    expect_ok("SOURCES imgs 0 1\n", CTL_VERB_SOURCES, "SOURCES imgs 0 1");
    TAP_OK(strcmp(req.dataset, "imgs") == 0 && req.start == 0 && req.count == 1,
           "SOURCES: dataset, start 0, count 1");
    expect_ok("SOURCES imgs 18446744073709551615 4096\n", CTL_VERB_SOURCES,
              "SOURCES: the largest start, count CTL_SOURCES_MAX");
    TAP_OK(req.start == UINT64_MAX && req.count == CTL_SOURCES_MAX, "read as given");
    expect_err("SOURCES imgs 0 0\n", CTL_E_BAD_ARG, "SOURCES count 0", "count must be",
               "1..4096", NULL);
    expect_err("SOURCES imgs 0 4097\n", CTL_E_BAD_ARG, "SOURCES count 4097", "1..4096", NULL);
    expect_err("SOURCES imgs -1 5\n", CTL_E_BAD_ARG, "SOURCES start -1", "start must be",
               NULL);
    expect_err("SOURCES imgs 1x 5\n", CTL_E_BAD_ARG, "SOURCES start 1x", "start must be",
               NULL);
    expect_err("SOURCES imgs 5\n", CTL_E_BAD_ARG, "SOURCES with two arguments",
               "takes 3 arguments", NULL);
    expect_err("SOURCES a/b 0 5\n", CTL_E_BAD_ARG, "SOURCES a/b", "dataset must be", NULL);
}

int main(void)
{
    test_tables();
    test_meta_verbs();
    test_verbs();
    test_blank_and_bad_lines();
    test_length_limits();
    test_pipelining_and_splits();
    test_attach_defaults();
    test_attach_bounds();
    test_attach_format();
    test_reply_format();
    test_reply_parse();
    test_reply_round_trip();
    return tap_done();
}
