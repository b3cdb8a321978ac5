/*
 * sources.c - escaping, checking and decoding a dataset's source list (the
 * format is described in sources.h).
 */
#include "sources.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "ctl_int.h"

static const char hex[] = "0123456789abcdef";

/* The length of the character at s[0..n) when it stands for itself in a
 * line, else 0 (it is escaped). */
static size_t plain_len(const unsigned char *s, size_t n)
{
    if (s[0] == '\\' || s[0] == '\t')
        return 0;
    return ctl_char_len(s, n);
}

long sources_escape(const char *path, size_t n, char *out, size_t cap)
{
    const unsigned char *u = (const unsigned char *)path;
    size_t o = 0, i = 0;

    if (n == 0)
        return -EINVAL;
    while (i < n) {
        size_t c = plain_len(u + i, n - i);
        char esc[4];
        const char *from;
        size_t k;

        if (c) {
            from = path + i;
            k = c;
        } else if (u[i] == '\\') {
            esc[0] = esc[1] = '\\';
            from = esc;
            k = 2;
            c = 1;
        } else {
            esc[0] = '\\';
            esc[1] = 'x';
            esc[2] = hex[u[i] >> 4];
            esc[3] = hex[u[i] & 15];
            from = esc;
            k = 4;
            c = 1;
        }
        if (o + k > SOURCES_LINE_MAX)
            return -ENAMETOOLONG;
        if (o + k + 1 > cap)
            return -ENOSPC;
        for (size_t j = 0; j < k; j++)
            out[o++] = from[j];
        i += c;
    }
    out[o] = '\0';
    return (long)o;
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The length of the escape at s[0..n) (s[0] == '\\'), its byte in *b;
 * 0 when it is not one sources_escape writes. */
static size_t escape_len(const char *s, size_t n, unsigned char *b)
{
    int h, l;

    if (n >= 2 && s[1] == '\\') {
        *b = '\\';
        return 2;
    }
    if (n < 4 || s[1] != 'x' || (h = hex_val(s[2])) < 0 || (l = hex_val(s[3])) < 0)
        return 0;
    *b = (unsigned char)(h << 4 | l);
    return 4;
}

/* Checks one line s[0..n): the offset of the first bad byte, or n. */
static size_t check_line(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        unsigned char b;
        size_t c = s[i] == '\\' ? escape_len(s + i, n - i, &b) : plain_len(u + i, n - i);

        if (c == 0)
            return i;
        i += c;
    }
    return n;
}

int sources_index(const char *buf, size_t len, uint64_t samples, uint64_t *off,
                  struct rf_err *err)
{
    size_t at = 0;
    uint64_t i;

    for (i = 0; i < samples; i++) {
        size_t end = at, bad;

        while (end < len && buf[end] != '\n')
            end++;
        if (end == len)
            return rf_err_set(err, -EBADMSG, "line %" PRIu64 " (byte %zu): %s", i, at,
                              at == len ? "the file ends: fewer lines than samples"
                                        : "no newline at the end of the file");
        if (end == at || end - at > SOURCES_LINE_MAX)
            return rf_err_set(err, -EBADMSG, "line %" PRIu64 " (byte %zu): %zu bytes, not "
                              "1..%u", i, at, end - at, SOURCES_LINE_MAX);
        bad = check_line(buf + at, end - at);
        if (bad < end - at)
            return rf_err_set(err, -EBADMSG, "line %" PRIu64 " (byte %zu): byte 0x%02x at "
                              "column %zu is not allowed unescaped, or a bad escape", i,
                              at + bad, (unsigned char)buf[at + bad], bad);
        off[i] = at;
        at = end + 1;
    }
    if (at != len)
        return rf_err_set(err, -EBADMSG, "line %" PRIu64 " (byte %zu): more lines than the "
                          "%" PRIu64 " samples", i, at, samples);
    off[samples] = at;
    return 0;
}

long sources_unescape(const char *s, size_t n, char *out)
{
    size_t i = 0, o = 0;

    while (i < n) {
        unsigned char b = (unsigned char)s[i];
        size_t c = 1;

        if (s[i] == '\\' && (c = escape_len(s + i, n - i, &b)) == 0)
            return -EBADMSG;
        out[o++] = (char)b;
        i += c;
    }
    return (long)o;
}
