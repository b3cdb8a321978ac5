/*
 * test_sources.c - a dataset's source list (proto/sources.h): escaping,
 * decoding, and the checks of a whole list.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "sources.h"
#include "tap.h"

static void check_escape(const char *path, size_t n, const char *want, const char *name)
{
    char out[SOURCES_LINE_MAX + 1], back[SOURCES_LINE_MAX + 1];
    long k = sources_escape(path, n, out, sizeof(out));
    long b;

    TAP_IS_STR(k >= 0 ? out : "(error)", want, name);
    b = k >= 0 ? sources_unescape(out, (size_t)k, back) : -1;
    tap_ok(b == (long)n && memcmp(back, path, n) == 0, "%s: decodes back", name);
}

static void test_escape(void)
{
    char longp[5000];

    check_escape("cat/1.jpg", 9, "cat/1.jpg", "a plain path is its own line");
    check_escape("caf\xc3\xa9/\xe6\x97\xa5.png", 13, "caf\xc3\xa9/\xe6\x97\xa5.png",
                 "UTF-8 stays as it is");
    check_escape("a\nb.jpg", 7, "a\\x0ab.jpg", "a newline is \\x0a");
    check_escape("a\\b\tc", 5, "a\\\\b\\x09c", "a backslash doubled, TAB escaped");
    check_escape("x\xff\xc3.jpg", 7, "x\\xff\\xc3.jpg", "bytes that are not UTF-8");
    check_escape("\x7f\xc2\x80", 3, "\\x7f\\xc2\\x80", "DEL and a C1 control");
    TAP_IS_INT(sources_escape("", 0, longp, sizeof(longp)), -EINVAL, "an empty path");
    memset(longp, 'a', sizeof(longp));
    TAP_IS_INT(sources_escape(longp, SOURCES_LINE_MAX, longp, 2), -ENOSPC, "cap too small");
    {
        char out[SOURCES_LINE_MAX + 1];

        TAP_IS_INT(sources_escape(longp, SOURCES_LINE_MAX, out, sizeof(out)),
                   SOURCES_LINE_MAX, "SOURCES_LINE_MAX bytes fit");
        TAP_IS_INT(sources_escape(longp, SOURCES_LINE_MAX + 1, out, sizeof(out)),
                   -ENAMETOOLONG, "one more does not");
        longp[0] = '\n';
        TAP_IS_INT(sources_escape(longp, SOURCES_LINE_MAX - 2, out, sizeof(out)),
                   -ENAMETOOLONG, "nor one whose escape makes it longer");
    }
    TAP_IS_INT(sources_unescape("a\\x0", 4, longp), -EBADMSG, "a cut escape");
    TAP_IS_INT(sources_unescape("a\\n", 3, longp), -EBADMSG, "\\n is not an escape here");
}

struct index_case {
    const char *text;
    uint64_t samples;
    const char *msg; /* NULL: accepted */
};

static void test_index(void)
{
    static const struct index_case cases[] = {
        {"a/1.jpg\nb/2.jpg\n", 2, NULL},
        {"", 0, NULL},
        {"a\\x0ab\n", 1, NULL},
        {"a/1.jpg\nb/2.jpg", 2, "line 1 (byte 8): no newline"},
        {"a/1.jpg\n", 2, "line 1 (byte 8): the file ends"},
        {"a/1.jpg\nb\n", 1, "more lines than the 1 samples"},
        {"a\n\nb\n", 3, "line 1 (byte 2): 0 bytes"},
        {"a\tb\n", 1, "byte 0x09 at column 1"},
        {"a\\q\n", 1, "byte 0x5c at column 1"},
        {"a\\x0A\n", 1, "bad escape"},
        {"a\xff\n", 1, "byte 0xff"},
        {"a\r\n", 1, "byte 0x0d"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct index_case *c = &cases[i];
        uint64_t off[4] = {0};
        struct rf_err e = {{0}};
        int r = sources_index(c->text, strlen(c->text), c->samples, off, &e);

        if (c->msg == NULL) {
            if (!tap_ok(r == 0, "list %zu accepted", i))
                tap_diag("  got %d \"%s\"", r, e.msg);
        } else if (!tap_ok(r == -EBADMSG && strstr(e.msg, c->msg), "list %zu refused: %s", i,
                           c->msg)) {
            tap_diag("  got %d \"%s\"", r, e.msg);
        }
    }
    {
        const char *t = "a/1.jpg\nbb/22.jpg\n";
        uint64_t off[3];
        struct rf_err e;

        TAP_IS_INT(sources_index(t, strlen(t), 2, off, &e), 0, "two lines");
        TAP_OK(off[0] == 0 && off[1] == 8 && off[2] == 18, "their offsets: 0, 8, end 18");
    }
}

int main(void)
{
    test_escape();
    test_index();
    return tap_done();
}
