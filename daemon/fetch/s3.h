/*
 * s3.h - where an s3:// dataset's objects are and how a request for one is
 * signed: the endpoint, region, addressing style and credentials, resolved
 * once from the config and the environment the way the AWS tools resolve
 * them, and the object URL and SigV4 parameters for libcurl built from them.
 *
 * Resolution (first that is set wins; "env" is the envp passed in, the
 * daemon passes its environ):
 *   endpoint  s3-endpoint (config), AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
 *             else https://s3.REGION.amazonaws.com.  An endpoint given by
 *             name (a custom one: MinIO, Ceph, moto) is addressed
 *             path-style (ENDPOINT/BUCKET/KEY); AWS's own is addressed
 *             virtual-host style (BUCKET.s3.REGION.amazonaws.com/KEY)
 *             unless the bucket has a '.', which breaks the certificate's
 *             wildcard, then path-style too.
 *   region    s3-region (config), AWS_REGION, AWS_DEFAULT_REGION, the
 *             profile's "region" in the config file, else us-east-1 (what
 *             the SDKs assume for S3; a bucket elsewhere answers 301, and
 *             the fetch error says to set the region).
 *   profile   AWS_PROFILE, else "default".  The credentials file names a
 *             profile [NAME]; the config file [profile NAME] ([default]
 *             for the default).
 *   files     AWS_SHARED_CREDENTIALS_FILE, else $HOME/.aws/credentials;
 *             AWS_CONFIG_FILE, else $HOME/.aws/config.  A missing file is
 *             no error; an unreadable or malformed one is, naming it.
 *   keys      AWS_ACCESS_KEY_ID with AWS_SECRET_ACCESS_KEY (and
 *             AWS_SESSION_TOKEN) from env when the first is set; else
 *             aws_access_key_id, aws_secret_access_key, aws_session_token
 *             of the profile in the credentials file, else in the config
 *             file.  A key id without its secret (or the reverse) is an
 *             error naming where the half came from.  No keys anywhere:
 *             requests go unsigned (a public bucket).
 *
 * Signing is libcurl's CURLOPT_AWS_SIGV4 with "aws:amz:REGION:s3" and the
 * keys as user and password.  libcurl 7.88 hashes the payload itself
 * unless the request carries x-amz-content-sha256, whose value it then
 * signs as the payload hash: a GET sends "UNSIGNED-PAYLOAD" (what S3
 * expects for a body it cannot hash ahead), and x-amz-security-token
 * with a session token, which libcurl signs like any header.
 */
#ifndef RINGFEED_FETCH_S3_H
#define RINGFEED_FETCH_S3_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"
#include "url.h"

#define S3_REGION_MAX 63u
#define S3_KEY_MAX 255u        /* an access key id or a secret */
#define S3_TOKEN_MAX 4095u     /* a session token (STS tokens run to ~2 KB) */
#define S3_DEFAULT_REGION "us-east-1"
#define S3_SIGV4_MAX (sizeof("aws:amz::s3") + S3_REGION_MAX)
#define S3_HEADER_MAX (S3_TOKEN_MAX + 32)

/* What the config says (NULL: not set). */
struct s3_settings {
    const char *endpoint;       /* s3-endpoint: http(s)://HOST[:PORT][/] */
    const char *region;         /* s3-region */
};

/* Where each resolved fact came from, for messages and the log. */
enum s3_origin {
    S3_FROM_DEFAULT,
    S3_FROM_CONFIG,             /* ringfeedd.conf */
    S3_FROM_ENV,
    S3_FROM_CREDENTIALS_FILE,
    S3_FROM_CONFIG_FILE,        /* ~/.aws/config */
    S3_ORIGIN_COUNT
};

struct s3_target {
    char endpoint[URL_MAX + 1];          /* scheme://host[:port], no '/' at the end */
    bool custom_endpoint;                /* named by config or env: path-style */
    char region[S3_REGION_MAX + 1];
    char access_key[S3_KEY_MAX + 1];     /* "" : unsigned requests */
    char secret_key[S3_KEY_MAX + 1];
    char session_token[S3_TOKEN_MAX + 1]; /* "" : none */
    enum s3_origin endpoint_from, region_from, keys_from;
};

/*
 * Resolves *t from the settings and envp (a NULL-terminated array of
 * "NAME=VALUE", as environ).  Returns 0, or -EINVAL (a bad endpoint,
 * region, half a key pair, a value too long; err names the source:
 * "AWS_REGION: ..." or "FILE: line N: ..."), or the errno of reading a
 * file that exists but cannot be read.
 */
int s3_resolve(const struct s3_settings *set, char *const *envp, struct s3_target *t,
               struct rf_err *err);

/* The origin's name for messages ("AWS_... environment", ...). */
const char *s3_origin_name(enum s3_origin o);

/*
 * Writes the URL of object key (a MANIFEST file name: [A-Za-z0-9._-]) under
 * the dataset URL s3://BUCKET/PREFIX (text and its parse u) into out (cap
 * bytes).  Returns 0, or -ENAMETOOLONG.
 */
int s3_object_url(const struct s3_target *t, const char *text, const struct url *u,
                  const char *key, char *out, size_t cap, struct rf_err *err);

/* CURLOPT_AWS_SIGV4's value, "aws:amz:REGION:s3", into out. */
void s3_sigv4_param(const struct s3_target *t, char out[S3_SIGV4_MAX]);

/* 1 when requests are signed (keys were found). */
static inline bool s3_signed(const struct s3_target *t)
{
    return t->access_key[0] != '\0';
}

/*
 * The extra request headers, one "Name: value" each into hdr[i]
 * (S3_HEADER_MAX bytes each), at most 2: x-amz-content-sha256 and, with a
 * session token, x-amz-security-token.  Returns how many (0 unsigned).
 */
int s3_headers(const struct s3_target *t, char hdr[2][S3_HEADER_MAX]);

#endif
