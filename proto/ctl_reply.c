/*
 * ctl_reply.c - the control protocol's reply side: the server's formatters
 * (OK, ERR, multi-line header and body lines) and the client's parser.
 * The grammar and the bounds are in ctl.h.
 *
 * Formatters sanitize so that whatever the daemon puts in a reply (a path
 * with odd bytes, a message with a newline) still parses as one line under
 * the request rules: control characters become spaces, bytes that are not
 * UTF-8 become '?'; the byte count never changes.  The parser is as strict
 * as the formatters: a reply that they could not have written is CTL_BAD.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "ctl_int.h"
#include "strnum.h"

/* Rewrites s[0..n) in place as described at the top. */
static void sanitize(char *s, size_t n)
{
    unsigned char *u = (unsigned char *)s;
    size_t i = 0;

    while (i < n) {
        size_t c = ctl_char_len(u + i, n - i);

        if (c == 1 && u[i] == '\t') {
            u[i++] = ' ';
        } else if (c > 0) {
            i += c;
        } else {
            u[i] = u[i] < 0x20 || u[i] == 0x7f ? ' ' : '?';
            i++;
        }
    }
}

/*
 * Formats fmt into text (cap bytes), sanitized.  Returns the text's length
 * (which may exceed cap - 1: the text was cut) or -EINVAL.
 */
static int vformat(char *text, size_t cap, const char *fmt, va_list ap)
{
    int n;

    text[0] = '\0';
    if (!fmt)
        return 0;
    n = vsnprintf(text, cap, fmt, ap);
    if (n < 0)
        return -EINVAL;
    sanitize(text, (size_t)n < cap ? (size_t)n : cap - 1);
    return n;
}

/* Copies the finished line into buf; -ENOSPC when it does not fit. */
static int emit(char *buf, size_t cap, const char *line, size_t n)
{
    if (n + 1 > cap)
        return -ENOSPC;
    memcpy(buf, line, n);
    buf[n] = '\0';
    return (int)n;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int ctl_reply_ok(char *buf, size_t cap, const char *fmt, ...)
{
    char text[CTL_LINE_MAX], line[CTL_LINE_MAX + 1];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vformat(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n < 0)
        return n;
    if (n > 0 && is_digit(text[0]))
        return -EINVAL;
    /* "OK " + text + "\n" */
    if (n > 0 && (size_t)n + 4 > CTL_LINE_MAX)
        return -EMSGSIZE;
    n = n > 0 ? snprintf(line, sizeof(line), "OK %s\n", text) : snprintf(line, sizeof(line), "OK\n");
    return emit(buf, cap, line, (size_t)n);
}

int ctl_reply_err(char *buf, size_t cap, enum ctl_errcode code, const char *fmt, ...)
{
    char text[CTL_LINE_MAX], line[CTL_LINE_MAX + 1];
    const char *name = ctl_errcode_name(code);
    size_t len;
    va_list ap;
    int n;

    if (!name)
        return -EINVAL;
    va_start(ap, fmt);
    n = vformat(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n < 0)
        return n;
    if (n == 0) {
        n = snprintf(text, sizeof(text), "%s", ctl_errcode_message(code));
        if (n < 0)
            return -EINVAL;
    }
    len = (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1;
    if (len > CTL_ERR_MSG_MAX) {
        /* cut on a character boundary, leaving room for "..." */
        const unsigned char *u = (const unsigned char *)text;
        size_t keep = 0;

        while (keep < len) {
            size_t c = ctl_char_len(u + keep, len - keep);

            if (c == 0)
                c = 1;
            if (keep + c > CTL_ERR_MSG_MAX - 3)
                break;
            keep += c;
        }
        memcpy(text + keep, "...", 4);
        len = keep + 3;
    }
    n = snprintf(line, sizeof(line), "ERR %s %.*s\n", name, (int)len, text);
    if (n < 0)
        return -EINVAL;
    return emit(buf, cap, line, (size_t)n);
}

int ctl_reply_multi(char *buf, size_t cap, unsigned nlines, const char *fmt, ...)
{
    char text[CTL_LINE_MAX], line[CTL_LINE_MAX + 32];
    va_list ap;
    int n;

    if (nlines > CTL_REPLY_LINES_MAX)
        return -EINVAL;
    va_start(ap, fmt);
    n = vformat(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n < 0)
        return n;
    if ((size_t)n >= sizeof(text))
        return -EMSGSIZE;
    n = n > 0 ? snprintf(line, sizeof(line), "OK %u %s\n", nlines, text)
              : snprintf(line, sizeof(line), "OK %u\n", nlines);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n > CTL_LINE_MAX)
        return -EMSGSIZE;
    return emit(buf, cap, line, (size_t)n);
}

int ctl_reply_line(char *buf, size_t cap, const char *fmt, ...)
{
    char text[CTL_LINE_MAX];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vformat(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n < 0)
        return n;
    /* text + "\n" within CTL_LINE_MAX */
    if ((size_t)n + 1 > CTL_LINE_MAX)
        return -EMSGSIZE;
    text[n] = '\n';
    return emit(buf, cap, text, (size_t)n + 1);
}

static enum ctl_status bad(struct ctl_reply *rep, const char *why)
{
    rep->why = why;
    return CTL_BAD;
}

/*
 * Finds the line starting at buf[pos] (LF within CTL_LINE_MAX bytes) and
 * checks its text: CTL_DONE with *text_len (CR and LF excluded) and *next
 * (past the LF), CTL_NEED_MORE, or CTL_BAD.
 */
static enum ctl_status take_line(const char *buf, size_t len, size_t pos, struct ctl_reply *rep,
                                 size_t *text_len, size_t *next)
{
    size_t avail = len - pos, scan = avail < CTL_LINE_MAX ? avail : CTL_LINE_MAX, n;
    const char *lf = memchr(buf + pos, '\n', scan);

    if (!lf) {
        if (avail >= CTL_LINE_MAX)
            return bad(rep, "reply line longer than CTL_LINE_MAX");
        if (len >= CTL_REPLY_MAX)
            return bad(rep, "reply longer than CTL_REPLY_MAX");
        return CTL_NEED_MORE;
    }
    n = (size_t)(lf - (buf + pos));
    *next = pos + n + 1;
    if (n > 0 && buf[pos + n - 1] == '\r')
        n--;
    if (ctl_text_check(buf + pos, n) != n)
        return bad(rep, "reply is not UTF-8 text free of control characters");
    *text_len = n;
    return CTL_DONE;
}

/* Parses the first line buf[0..n) into rep; false when it is malformed. */
static bool parse_head(const char *buf, size_t n, struct ctl_reply *rep)
{
    size_t i;
    uint64_t count;

    if (n >= 2 && memcmp(buf, "OK", 2) == 0 && (n == 2 || buf[2] == ' ')) {
        rep->ok = true;
        if (n == 2) {
            rep->text_off = 2;
            return true;
        }
        i = 3;
        if (i < n && is_digit(buf[i])) {
            size_t start = i;

            while (i < n && is_digit(buf[i]))
                i++;
            if (i < n && buf[i] != ' ')
                return false;
            if (strnum_u64(buf + start, i - start, &count) < 0 || count > CTL_REPLY_LINES_MAX)
                return false;
            rep->multi = true;
            rep->nlines = (uint32_t)count;
            if (i < n)
                i++;
        }
        rep->text_off = i;
        rep->text_len = n - i;
        return true;
    }
    if (n >= 4 && memcmp(buf, "ERR ", 4) == 0) {
        i = 4;
        while (i < n && buf[i] != ' ')
            i++;
        if (i == 4 || i - 4 > CTL_ERRCODE_NAME_MAX)
            return false;
        rep->name_off = 4;
        rep->name_len = i - 4;
        rep->code = ctl_errcode_from_name(buf + 4, i - 4);
        rep->err = ctl_errcode_errno(rep->code);
        if (i < n)
            i++;
        rep->text_off = i;
        rep->text_len = n - i;
        return true;
    }
    return false;
}

enum ctl_status ctl_parse_reply(const char *buf, size_t len, struct ctl_reply *rep,
                                size_t *consumed)
{
    size_t n, pos;
    enum ctl_status st;

    memset(rep, 0, sizeof(*rep));
    *consumed = 0;
    st = take_line(buf, len, 0, rep, &n, &pos);
    if (st != CTL_DONE)
        return st;
    if (!parse_head(buf, n, rep))
        return bad(rep, "reply is neither \"OK[ text]\", \"OK <count>[ text]\" nor "
                        "\"ERR <name> <message>\"");
    rep->body_off = pos;
    for (uint32_t i = 0; rep->multi && i < rep->nlines; i++) {
        size_t next;

        st = take_line(buf, len, pos, rep, &n, &next);
        if (st != CTL_DONE)
            return st;
        if (next > CTL_REPLY_MAX)
            return bad(rep, "reply longer than CTL_REPLY_MAX");
        pos = next;
    }
    rep->body_len = pos - rep->body_off;
    *consumed = pos;
    return CTL_DONE;
}

bool ctl_reply_next_line(const char *buf, const struct ctl_reply *rep, size_t *cursor,
                         size_t *off, size_t *len)
{
    const char *start, *lf;
    size_t n;

    if (!rep->multi || *cursor >= rep->body_len)
        return false;
    start = buf + rep->body_off + *cursor;
    lf = memchr(start, '\n', rep->body_len - *cursor);
    if (!lf)
        return false; /* not a body ctl_parse_reply accepted */
    n = (size_t)(lf - start);
    *off = rep->body_off + *cursor;
    *cursor += n + 1;
    if (n > 0 && start[n - 1] == '\r')
        n--;
    *len = n;
    return true;
}
