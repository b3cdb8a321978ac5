/*
 * url.c - the strict URL parser of url.h: scheme from a table, then the
 * authority (host, port) and the path, each checked byte by byte, every
 * refusal naming the URL and the byte offset.
 */
#include "url.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct scheme_def {
    const char *name;      /* as written before "://" */
    enum url_scheme scheme;
    uint16_t port;         /* implied port; 0: no network form */
    bool bucket;           /* the authority is an S3 bucket */
};

static const struct scheme_def schemes[URL_SCHEME_COUNT] = {
    {"http", URL_HTTP, 80, false},
    {"https", URL_HTTPS, 443, false},
    {"s3", URL_S3, 0, true},
};

const char *url_scheme_name(enum url_scheme s)
{
    return (unsigned)s < URL_SCHEME_COUNT ? schemes[s].name : NULL;
}

uint16_t url_default_port(enum url_scheme s)
{
    return (unsigned)s < URL_SCHEME_COUNT ? schemes[s].port : 0;
}

/* The URL as a message shows it: at most 120 bytes, anything outside
 * printable ASCII as \xHH. */
static void shown(const char *t, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)t[i];
        if (i == 120) {
            o += (size_t)snprintf(out + o, cap - o, "...");
            break;
        }
        if (c < 0x20 || c >= 0x7f || c == '\'')
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
}

__attribute__((format(printf, 5, 6)))
static int bad(struct rf_err *err, const char *t, size_t n, size_t at, const char *fmt, ...)
{
    char u[160 * 4 + 8], what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    shown(t, n, u, sizeof(u));
    return rf_err_set(err, -EINVAL, "URL '%s': byte %zu: %s", u, at, what);
}

static bool is_alnum(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_unreserved(unsigned char c)
{
    return is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

static bool is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* 1 when s[0..n) is a dotted quad of 0..255 without leading zeros. */
static int is_ipv4(const char *s, size_t n)
{
    unsigned parts = 0, v = 0, digits = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            if (digits == 0 || parts == 4)
                return 0;
            parts++;
            v = digits = 0;
            continue;
        }
        if (s[i] < '0' || s[i] > '9' || (digits == 1 && v == 0))
            return 0;
        v = v * 10 + (unsigned)(s[i] - '0');
        if (++digits > 3 || v > 255)
            return 0;
    }
    return parts == 4;
}

int url_valid_bucket(const char *s, size_t n)
{
    if (n < URL_BUCKET_MIN || n > URL_BUCKET_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool lower = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!lower && c != '.' && c != '-')
            return 0;
        if ((i == 0 || i == n - 1) && !lower)
            return 0;
        if (c == '.' && s[i - 1] == '.')
            return 0;
    }
    return !is_ipv4(s, n);
}

/* Checks a DNS name at t[at..at+n); returns 0 or the offset of the bad
 * byte plus one. */
static size_t check_dns(const char *t, size_t at, size_t n)
{
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[at + i];
        if (c == '.') {
            if (label == 0 || t[at + i - 1] == '-')
                return at + i + 1;
            label = 0;
            continue;
        }
        if (!is_alnum(c) && c != '-')
            return at + i + 1;
        if (c == '-' && label == 0)
            return at + i + 1;
        if (++label > 63)
            return at + i + 1;
    }
    if (label == 0 || t[at + n - 1] == '-')
        return at + n;
    return 0;
}

/* The path or prefix t[at..end): segments of unreserved bytes (and %HH
 * when escapes), single '/' between.  first_slash: the text starts with
 * '/' (http paths).  Returns 0 or an error. */
static int check_path(const char *t, size_t len, size_t at, size_t end, bool escapes,
                      struct rf_err *err)
{
    size_t seg = at;  /* where the current segment starts */
    for (size_t i = at; i <= end; i++) {
        unsigned char c = i < end ? (unsigned char)t[i] : '/';
        if (c == '/') {
            size_t sl = i - seg;
            if (i == end && sl == 0)
                break;           /* a trailing '/' (or nothing) */
            if (sl == 0)
                return bad(err, t, len, i, "empty path segment ('//')");
            if ((sl == 1 && t[seg] == '.') || (sl == 2 && t[seg] == '.' && t[seg + 1] == '.'))
                return bad(err, t, len, seg, "'.' and '..' segments are not allowed");
            seg = i + 1;
            continue;
        }
        if (c == '%' && escapes) {
            if (i + 2 >= end || !is_hex((unsigned char)t[i + 1]) ||
                !is_hex((unsigned char)t[i + 2]))
                return bad(err, t, len, i, "'%%' must start an escape of two hex digits");
            i += 2;
            continue;
        }
        if (c == '?' || c == '#')
            return bad(err, t, len, i, "a dataset URL has no query or fragment");
        if (!is_unreserved(c))
            return bad(err, t, len, i, "byte 0x%02x is not allowed in a path "
                       "(letters, digits, '-', '.', '_', '~'%s and '/')", c,
                       escapes ? ", %HH escapes" : "");
    }
    return 0;
}

int url_parse(const char *t, size_t len, struct url *u, struct rf_err *err)
{
    const struct scheme_def *sd = NULL;
    size_t at, host_end, auth_end;

    memset(u, 0, sizeof(*u));
    if (len == 0)
        return rf_err_set(err, -EINVAL, "URL '': empty");
    if (len > URL_MAX)
        return bad(err, t, len, URL_MAX, "longer than %u bytes", URL_MAX);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
            return bad(err, t, len, i, "control character, space or non-ASCII byte");
    for (unsigned s = 0; s < URL_SCHEME_COUNT; s++) {
        size_t n = strlen(schemes[s].name);
        if (len >= n + 3 && memcmp(t, schemes[s].name, n) == 0 && memcmp(t + n, "://", 3) == 0) {
            sd = &schemes[s];
            break;
        }
    }
    if (!sd)
        return bad(err, t, len, 0, "expected http://, https:// or s3://");
    u->scheme = sd->scheme;
    at = strlen(sd->name) + 3;
    auth_end = at;
    while (auth_end < len && t[auth_end] != '/')
        auth_end++;
    if (memchr(t + at, '@', auth_end - at))
        return bad(err, t, len, at, "credentials in a URL are refused "
                   "(s3 takes them from the environment or ~/.aws/credentials)");
    if (sd->bucket) {
        if (!url_valid_bucket(t + at, auth_end - at))
            return bad(err, t, len, at, "bucket names are 3..63 of a-z, 0-9, '.' and '-', "
                       "first and last a letter or digit, no '..', not an IPv4 address");
        u->host = (uint32_t)at;
        u->host_len = (uint32_t)(auth_end - at);
        u->dir = true;
        if (auth_end + 1 >= len)
            return 0;    /* s3://bucket or s3://bucket/: the whole bucket */
        int r = check_path(t, len, auth_end + 1, len, false, err);
        if (r < 0)
            return r;
        u->path = (uint32_t)(auth_end + 1);
        u->path_len = (uint32_t)(len - auth_end - 1);
        u->dir = t[len - 1] == '/';
        return 0;
    }
    if (at < len && t[at] == '[') {
        const char *close = memchr(t + at, ']', auth_end - at);
        if (!close)
            return bad(err, t, len, at, "'[' without ']'");
        host_end = (size_t)(close - t) + 1;
        u->ipv6 = true;
        u->host = (uint32_t)at + 1;
        u->host_len = (uint32_t)(host_end - at - 2);
        if (u->host_len < 2)
            return bad(err, t, len, at, "empty IPv6 address");
        for (size_t i = at + 1; i + 1 < host_end; i++)
            if (!is_hex((unsigned char)t[i]) && t[i] != ':' && t[i] != '.')
                return bad(err, t, len, i, "an IPv6 address holds hex digits, ':' and '.'");
    } else {
        host_end = at;
        while (host_end < auth_end && t[host_end] != ':')
            host_end++;
        if (host_end == at)
            return bad(err, t, len, at, "no host");
        if (host_end - at > URL_HOST_MAX)
            return bad(err, t, len, at, "host longer than %u bytes", URL_HOST_MAX);
        size_t b = check_dns(t, at, host_end - at);
        if (b)
            return bad(err, t, len, b - 1, "a host is a DNS name (labels of letters, "
                       "digits and '-', 1..63 bytes, joined by '.'), an IPv4 address or [IPv6]");
        u->host = (uint32_t)at;
        u->host_len = (uint32_t)(host_end - at);
    }
    if (host_end < auth_end) {
        uint32_t port = 0;
        if (t[host_end] != ':' || host_end + 1 == auth_end)
            return bad(err, t, len, host_end, "expected ':PORT' or '/' after the host");
        if (t[host_end + 1] == '0')
            return bad(err, t, len, host_end + 1, "a port is 1..65535 without leading zeros");
        for (size_t i = host_end + 1; i < auth_end; i++) {
            if (t[i] < '0' || t[i] > '9')
                return bad(err, t, len, i, "a port is decimal digits");
            port = port * 10 + (uint32_t)(t[i] - '0');
            if (port > 65535)
                return bad(err, t, len, host_end + 1, "a port is 1..65535");
        }
        u->port = (uint16_t)port;
    }
    u->dir = true;
    if (auth_end == len)
        return 0;
    int r = check_path(t, len, auth_end + 1, len, true, err);
    if (r < 0)
        return r;
    u->path = (uint32_t)auth_end;
    u->path_len = (uint32_t)(len - auth_end);
    u->dir = t[len - 1] == '/';
    return 0;
}
