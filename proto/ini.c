/*
 * ini.c - ini_get (ini.h): one pass over the buffer, a line at a time,
 * classifying each line by a table of line kinds and remembering only
 * whether the current section is the one asked for.
 */
#include "ini.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

static bool key_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
}

/* [s, e) trimmed of blanks at both ends. */
static void trim(const char *b, size_t *s, size_t *e)
{
    while (*s < *e && blank(b[*s]))
        (*s)++;
    while (*e > *s && blank(b[*e - 1]))
        (*e)--;
}

/* Parses "KEY = VALUE" in b[s, e) (s at the key's first byte): the key's
 * and the value's bounds, or -1 when the line is not that. */
static int key_line(const char *b, size_t s, size_t e, size_t *ke, size_t *vs, size_t *ve)
{
    size_t i = s;
    while (i < e && key_byte(b[i]))
        i++;
    if (i == s || i - s > INI_NAME_MAX)
        return -1;
    *ke = i;
    while (i < e && blank(b[i]))
        i++;
    if (i == e || b[i] != '=')
        return -1;
    *vs = i + 1;
    *ve = e;
    trim(b, vs, ve);
    return 0;
}

int ini_get(const char *buf, size_t len, const char *section, const char *key,
            struct ini_value *v, struct rf_err *err)
{
    size_t klen = strlen(key), slen = strlen(section);
    bool in_section = false, any_section = false, after_key = false;
    int found = 0;
    unsigned line = 0;

    if (len > INI_FILE_MAX)
        return rf_err_set(err, -EBADMSG, "longer than %u bytes", INI_FILE_MAX);
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(buf + at, '\n', len - at);
        size_t e = nl ? (size_t)(nl - buf) : len, next = nl ? e + 1 : len;
        size_t s = at, ke, vs, ve;
        line++;
        if (e > s && buf[e - 1] == '\r')
            e--;
        for (size_t i = s; i < e; i++)
            if (((unsigned char)buf[i] < 0x20 && buf[i] != '\t') || buf[i] == 0x7f)
                return rf_err_set(err, -EBADMSG, "line %u: control byte 0x%02x", line,
                                  (unsigned char)buf[i]);
        at = next;
        bool indented = s < e && blank(buf[s]);
        trim(buf, &s, &e);
        if (s == e || buf[s] == '#' || buf[s] == ';')
            continue;
        if (buf[s] == '[') {
            if (indented)
                return rf_err_set(err, -EBADMSG, "line %u: a section starts its line", line);
            if (buf[e - 1] != ']')
                return rf_err_set(err, -EBADMSG, "line %u: a section line is [NAME]", line);
            size_t ns = s + 1, ne = e - 1;
            trim(buf, &ns, &ne);
            if (ns == ne || ne - ns > INI_NAME_MAX)
                return rf_err_set(err, -EBADMSG, "line %u: a section's name is 1..%u bytes",
                                  line, INI_NAME_MAX);
            if (memchr(buf + ns, '[', ne - ns) || memchr(buf + ns, ']', ne - ns))
                return rf_err_set(err, -EBADMSG, "line %u: '[' or ']' inside a section's name",
                                  line);
            in_section = ne - ns == slen && memcmp(buf + ns, section, slen) == 0;
            any_section = true;
            after_key = false;
            continue;
        }
        if (key_line(buf, s, e, &ke, &vs, &ve) < 0)
            return rf_err_set(err, -EBADMSG, "line %u: expected [SECTION], KEY = VALUE, "
                              "a comment or a blank line", line);
        if (!any_section)
            return rf_err_set(err, -EBADMSG, "line %u: a key before any [SECTION]", line);
        if (indented) {
            if (!after_key)
                return rf_err_set(err, -EBADMSG, "line %u: an indented key belongs under a "
                                  "KEY = line", line);
            continue;  /* a sub-key */
        }
        after_key = true;
        if (!in_section || ke - s != klen || memcmp(buf + s, key, klen) != 0)
            continue;
        if (found)
            return rf_err_set(err, -EBADMSG, "line %u: [%s] %s given twice (line %u first)",
                              line, section, key, v->line);
        found = 1;
        v->off = vs;
        v->len = ve - vs;
        v->line = line;
    }
    return found;
}
