/* jsonw.c - escaping and number detection for the tools' JSON (jsonw.h). */
#include "jsonw.h"

#include <math.h>
#include <stdint.h>

#include "strnum.h"

/* Length of the valid UTF-8 character at s[0..n), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    uint32_t cp;
    size_t len;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

void json_escape(FILE *f, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;

    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        size_t n;

        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
            i++;
        } else if (c == '\n') {
            fputs("\\n", f), i++;
        } else if (c == '\t') {
            fputs("\\t", f), i++;
        } else if (c == '\r') {
            fputs("\\r", f), i++;
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c), i++;
        } else if ((n = utf8_len(u + i, len - i)) == 0) {
            fputs("\\ufffd", f), i++;
        } else {
            fwrite(u + i, 1, n, f);
            i += n;
        }
    }
}

void json_string(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    json_escape(f, s, len);
    fputc('"', f);
}

void json_str(FILE *f, const char *s)
{
    size_t n = 0;

    while (s[n])
        n++;
    json_string(f, s, n);
}

static size_t digits(const char *s, size_t i, size_t len)
{
    size_t j = i;

    while (j < len && s[j] >= '0' && s[j] <= '9')
        j++;
    return j - i;
}

bool json_is_number(const char *s, size_t len)
{
    size_t i = 0, n;

    if (i < len && s[i] == '-')
        i++;
    n = digits(s, i, len);
    if (n == 0 || (n > 1 && s[i] == '0'))
        return false;
    i += n;
    if (i < len && s[i] == '.') {
        n = digits(s, ++i, len);
        if (n == 0)
            return false;
        i += n;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        n = digits(s, i, len);
        if (n == 0)
            return false;
        i += n;
    }
    return i == len;
}

void json_value(FILE *f, const char *s, size_t len)
{
    if (json_is_number(s, len))
        fwrite(s, 1, len, f);
    else
        json_string(f, s, len);
}

void json_double(FILE *f, double v)
{
    char buf[40];

    if (!isfinite(v) || strnum_format_double(v, buf, sizeof(buf)) < 0)
        fputs(isfinite(v) ? "0" : "null", f);
    else
        fputs(buf, f);
}
