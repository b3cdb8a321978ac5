/*
 * url.h - the URLs a remote dataset is named by (http://, https://,
 * s3://bucket/prefix/) and the s3-endpoint key: a strict parser, a pure
 * function of a buffer that keeps offsets into it.
 *
 * What is accepted (everything else is refused, naming the URL, the byte
 * offset and what is wrong):
 *
 *     http://HOST[:PORT][/PATH]      https://HOST[:PORT][/PATH]
 *     s3://BUCKET[/PREFIX]
 *
 *   - The scheme in lower case, one of url_schemes[] (url.c).
 *   - HOST: a DNS name (labels of [A-Za-z0-9-], 1..63 bytes, not starting
 *     or ending with '-', joined by single dots, at most 253 bytes), an IPv4
 *     address, or an IPv6 address in brackets ([::1]).  No "user:password@":
 *     credentials never travel in a URL (s3 takes them from the environment
 *     or the shared files, daemon/fetch/s3.h).
 *   - PORT: decimal 1..65535, no sign or leading zero.
 *   - PATH: '/' then segments of the unreserved characters [A-Za-z0-9._~-]
 *     and percent escapes %HH, separated by single '/'; no "." or ".."
 *     segment, no empty segment (so "//" is refused), no query ('?') or
 *     fragment ('#').  A path either ends in '/' or not; url->dir says.
 *   - BUCKET: S3's rule: 3..63 of [a-z0-9.-], first and last a letter or
 *     digit, no "..", not an IPv4 address.
 *   - PREFIX: segments as PATH's without percent escapes (object keys are
 *     used as they are in the request and in the signature), joined by '/'.
 *   - At most URL_MAX bytes, no control character, space or byte >= 0x80.
 *
 * The strict character set is what lets the fetcher put a path into a
 * request and a SigV4 canonical request unchanged.
 */
#ifndef RINGFEED_PROTO_URL_H
#define RINGFEED_PROTO_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define URL_MAX 1023u          /* fits a dataset.NAME value (CONF_PATH_MAX) */
#define URL_HOST_MAX 253u
#define URL_BUCKET_MIN 3u
#define URL_BUCKET_MAX 63u

enum url_scheme {
    URL_HTTP,
    URL_HTTPS,
    URL_S3,
    URL_SCHEME_COUNT
};

/* Offsets and lengths into the text that was parsed (which the caller
 * keeps); for s3 the host is the bucket and the path the prefix (no
 * leading '/'). */
struct url {
    enum url_scheme scheme;
    uint16_t port;             /* 0: not given (url_default_port) */
    uint32_t host, host_len;   /* for [v6], without the brackets */
    uint32_t path, path_len;   /* http(s): from the first '/' (0 bytes: none);
                                  s3: the prefix after "BUCKET/" */
    bool ipv6;                 /* the host was in brackets */
    bool dir;                  /* the path (or prefix) ends in '/', or is empty */
};

/*
 * Parses len bytes at text (no NUL needed) into *u.  Returns 0, or -EINVAL
 * with err saying "URL 'TEXT': byte N: what is wrong" (the URL shown up to
 * a bound, control bytes escaped).
 */
int url_parse(const char *text, size_t len, struct url *u, struct rf_err *err);

/* The scheme's name ("https"), or NULL out of range. */
const char *url_scheme_name(enum url_scheme s);

/* The port the scheme implies: 80, 443, and 0 for s3 (no network form). */
uint16_t url_default_port(enum url_scheme s);

/* 1 when the bytes are a valid S3 bucket name (the rule above). */
int url_valid_bucket(const char *s, size_t n);

#endif
