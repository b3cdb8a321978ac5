/*
 * s3.c - s3.h's resolution of endpoint, region and keys from the config,
 * the environment and the AWS shared files, and the URL and headers of a
 * signed GET.  Each fact is looked up through one table of sources in
 * order (sources[] per fact), so the order lives in one place.
 */
#include "s3.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "ini.h"

static const char *const origin_names[S3_ORIGIN_COUNT] = {
    "the default", "ringfeedd.conf", "the environment", "the credentials file",
    "the AWS config file",
};

const char *s3_origin_name(enum s3_origin o)
{
    return (unsigned)o < S3_ORIGIN_COUNT ? origin_names[o] : "?";
}

static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
            return envp[i] + n + 1;
    return NULL;
}

/* An environment value that is set and not empty (the AWS tools treat an
 * empty variable as unset). */
static const char *env_val(char *const *envp, const char *name)
{
    const char *v = env_get(envp, name);
    return v && *v ? v : NULL;
}

/* One AWS shared file, read once: its path, text (NULL when absent). */
struct shared_file {
    char path[URL_MAX + 1];
    char *text;
    size_t len;
    const char *section;      /* the profile's section in this file */
    char section_buf[INI_NAME_MAX + 16];
};

static int file_open(struct shared_file *f, char *const *envp, const char *var,
                     const char *home_rel, struct rf_err *err)
{
    const char *p = env_val(envp, var), *home = env_val(envp, "HOME");
    char *text = NULL;
    size_t len;
    int r;

    f->text = NULL;
    if (p)
        r = snprintf(f->path, sizeof(f->path), "%s", p);
    else if (home)
        r = snprintf(f->path, sizeof(f->path), "%s/%s", home, home_rel);
    else
        return 0;     /* no HOME and no variable: no file */
    if (r < 0 || (size_t)r >= sizeof(f->path))
        return rf_err_set(err, -EINVAL, "%s: path longer than %zu bytes", p ? var : "HOME",
                          sizeof(f->path) - 1);
    r = fio_read_file(AT_FDCWD, f->path, INI_FILE_MAX, &text, &len);
    if (r == -ENOENT || r == -ENOTDIR)
        return 0;
    if (r < 0)
        return rf_err_set(err, r, "%s: %s", f->path,
                          r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
    f->text = text;
    f->len = len;
    return 0;
}

/* Looks key up in f's profile section: 1 with the value copied into out
 * (cap bytes, -EINVAL when longer), 0 when absent, or an error naming f. */
static int file_get(const struct shared_file *f, const char *key, char *out, size_t cap,
                    struct rf_err *err)
{
    struct ini_value v;
    int r;

    if (!f->text)
        return 0;
    r = ini_get(f->text, f->len, f->section, key, &v, err);
    if (r < 0) {
        rf_err_prefix(err, "%s", f->path);
        return r;
    }
    if (r == 0)
        return 0;
    if (v.len >= cap)
        return rf_err_set(err, -EINVAL, "%s: line %u: %s longer than %zu bytes", f->path,
                          v.line, key, cap - 1);
    memcpy(out, f->text + v.off, v.len);
    out[v.len] = '\0';
    return 1;
}

/* Checks a value that goes into a header or the signature: at most
 * cap - 1 bytes of printable ASCII without spaces. */
static int check_val(const char *what, const char *v, size_t cap, struct rf_err *err)
{
    size_t n = strlen(v);
    if (n >= cap)
        return rf_err_set(err, -EINVAL, "%s: longer than %zu bytes", what, cap - 1);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
            return rf_err_set(err, -EINVAL, "%s: byte %zu is a space, control or non-ASCII "
                              "byte", what, i);
    return 0;
}

static int copy_val(const char *what, const char *v, char *out, size_t cap, struct rf_err *err)
{
    int r = check_val(what, v, cap, err);
    if (r == 0)
        memcpy(out, v, strlen(v) + 1);
    return r;
}

static int check_region(const char *r, const char *from, struct rf_err *err)
{
    size_t n = strlen(r);
    if (n == 0 || n > S3_REGION_MAX)
        return rf_err_set(err, -EINVAL, "%s: a region is 1..%u bytes", from, S3_REGION_MAX);
    for (size_t i = 0; i < n; i++)
        if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9') || r[i] == '-'))
            return rf_err_set(err, -EINVAL, "%s: region '%s': a region is lower-case letters, "
                              "digits and '-' (us-east-1)", from, r);
    return 0;
}

static int set_endpoint(struct s3_target *t, const char *e, const char *from,
                        struct rf_err *err)
{
    struct url u;
    size_t n = strlen(e);
    int r = url_parse(e, n, &u, err);

    if (r < 0) {
        rf_err_prefix(err, "%s", from);
        return r;
    }
    if (u.scheme == URL_S3)
        return rf_err_set(err, -EINVAL, "%s: '%s': an endpoint is http:// or https://", from, e);
    if (u.path_len > 1)
        return rf_err_set(err, -EINVAL, "%s: '%s': an endpoint has no path", from, e);
    memcpy(t->endpoint, e, n - u.path_len);
    t->endpoint[n - u.path_len] = '\0';
    return 0;
}

/* The keys from one shared file: 1 found (both halves), 0 none, or an
 * error for half a pair. */
static int keys_from_file(struct s3_target *t, const struct shared_file *f,
                          struct rf_err *err)
{
    int a, s, k;
    a = file_get(f, "aws_access_key_id", t->access_key, sizeof(t->access_key), err);
    if (a < 0)
        return a;
    s = file_get(f, "aws_secret_access_key", t->secret_key, sizeof(t->secret_key), err);
    if (s < 0)
        return s;
    if (a != s)
        return rf_err_set(err, -EINVAL, "%s: [%s] has %s without %s", f->path, f->section,
                          a ? "aws_access_key_id" : "aws_secret_access_key",
                          a ? "aws_secret_access_key" : "aws_access_key_id");
    if (!a)
        return 0;
    k = file_get(f, "aws_session_token", t->session_token, sizeof(t->session_token), err);
    return k < 0 ? k : 1;
}

int s3_resolve(const struct s3_settings *set, char *const *envp, struct s3_target *t,
               struct rf_err *err)
{
    struct shared_file cred = {0}, conf = {0};
    const char *profile = env_val(envp, "AWS_PROFILE"), *v;
    int r;

    memset(t, 0, sizeof(*t));
    if (!profile)
        profile = "default";
    if (strlen(profile) > INI_NAME_MAX)
        return rf_err_set(err, -EINVAL, "AWS_PROFILE: longer than %u bytes", INI_NAME_MAX);
    cred.section = profile;
    snprintf(conf.section_buf, sizeof(conf.section_buf), strcmp(profile, "default") == 0
             ? "%s" : "profile %s", profile);
    conf.section = conf.section_buf;
    if ((r = file_open(&cred, envp, "AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials", err)) < 0 ||
        (r = file_open(&conf, envp, "AWS_CONFIG_FILE", ".aws/config", err)) < 0)
        goto out;

    /* region */
    if (set && set->region) {
        r = copy_val("s3-region", set->region, t->region, sizeof(t->region), err);
        t->region_from = S3_FROM_CONFIG;
    } else if ((v = env_val(envp, "AWS_REGION")) || (v = env_val(envp, "AWS_DEFAULT_REGION"))) {
        r = copy_val(v == env_get(envp, "AWS_REGION") ? "AWS_REGION" : "AWS_DEFAULT_REGION",
                     v, t->region, sizeof(t->region), err);
        t->region_from = S3_FROM_ENV;
    } else if ((r = file_get(&conf, "region", t->region, sizeof(t->region), err)) == 1) {
        t->region_from = S3_FROM_CONFIG_FILE;
        r = 0;
    } else if (r == 0) {
        snprintf(t->region, sizeof(t->region), "%s", S3_DEFAULT_REGION);
        t->region_from = S3_FROM_DEFAULT;
    }
    if (r < 0 || (r = check_region(t->region, s3_origin_name(t->region_from), err)) < 0)
        goto out;

    /* endpoint */
    if (set && set->endpoint) {
        r = set_endpoint(t, set->endpoint, "s3-endpoint", err);
        t->endpoint_from = S3_FROM_CONFIG;
    } else if ((v = env_val(envp, "AWS_ENDPOINT_URL_S3"))) {
        r = set_endpoint(t, v, "AWS_ENDPOINT_URL_S3", err);
        t->endpoint_from = S3_FROM_ENV;
    } else if ((v = env_val(envp, "AWS_ENDPOINT_URL"))) {
        r = set_endpoint(t, v, "AWS_ENDPOINT_URL", err);
        t->endpoint_from = S3_FROM_ENV;
    } else {
        snprintf(t->endpoint, sizeof(t->endpoint), "https://s3.%s.amazonaws.com", t->region);
        t->endpoint_from = S3_FROM_DEFAULT;
    }
    if (r < 0)
        goto out;
    t->custom_endpoint = t->endpoint_from != S3_FROM_DEFAULT;

    /* keys */
    const char *ak = env_val(envp, "AWS_ACCESS_KEY_ID");
    const char *sk = env_val(envp, "AWS_SECRET_ACCESS_KEY");
    if (ak || sk) {
        if (!ak || !sk) {
            r = rf_err_set(err, -EINVAL, "the environment has %s without %s",
                           ak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
                           ak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
            goto out;
        }
        if ((r = copy_val("AWS_ACCESS_KEY_ID", ak, t->access_key, sizeof(t->access_key), err)) < 0 ||
            (r = copy_val("AWS_SECRET_ACCESS_KEY", sk, t->secret_key, sizeof(t->secret_key), err)) < 0)
            goto out;
        if ((v = env_val(envp, "AWS_SESSION_TOKEN")) &&
            (r = copy_val("AWS_SESSION_TOKEN", v, t->session_token, sizeof(t->session_token), err)) < 0)
            goto out;
        t->keys_from = S3_FROM_ENV;
    } else if ((r = keys_from_file(t, &cred, err)) != 0) {
        if (r < 0)
            goto out;
        t->keys_from = S3_FROM_CREDENTIALS_FILE;
    } else if ((r = keys_from_file(t, &conf, err)) != 0) {
        if (r < 0)
            goto out;
        t->keys_from = S3_FROM_CONFIG_FILE;
    }
    r = 0;
    if (s3_signed(t)) {
        const char *from = s3_origin_name(t->keys_from);
        char what[64];
        snprintf(what, sizeof(what), "the access key from %s", from);
        if ((r = check_val(what, t->access_key, sizeof(t->access_key), err)) < 0)
            goto out;
        snprintf(what, sizeof(what), "the secret key from %s", from);
        if ((r = check_val(what, t->secret_key, sizeof(t->secret_key), err)) < 0)
            goto out;
        snprintf(what, sizeof(what), "the session token from %s", from);
        r = check_val(what, t->session_token, sizeof(t->session_token), err);
    }
out:
    free(cred.text);
    free(conf.text);
    if (r < 0)
        memset(t, 0, sizeof(*t));   /* no half-resolved keys left behind */
    return r;
}

int s3_object_url(const struct s3_target *t, const char *text, const struct url *u,
                  const char *key, char *out, size_t cap, struct rf_err *err)
{
    const char *bucket = text + u->host, *prefix = text + u->path;
    int bl = (int)u->host_len, pl = (int)u->path_len, n;
    const char *sep = pl && !u->dir ? "/" : "";

    if (t->custom_endpoint || memchr(bucket, '.', (size_t)bl)) {
        n = snprintf(out, cap, "%s/%.*s/%.*s%s%s", t->endpoint, bl, bucket, pl, prefix, sep, key);
    } else {
        /* https://s3.REGION.amazonaws.com -> https://BUCKET.s3.REGION... */
        const char *host = strstr(t->endpoint, "://") + 3;
        n = snprintf(out, cap, "%.*s%.*s.%s/%.*s%s%s", (int)(host - t->endpoint), t->endpoint,
                     bl, bucket, host, pl, prefix, sep, key);
    }
    if (n < 0 || (size_t)n >= cap)
        return rf_err_set(err, -ENAMETOOLONG, "s3://%.*s/%.*s%s%s: the object's URL is longer "
                          "than %zu bytes", bl, bucket, pl, prefix, sep, key, cap - 1);
    return 0;
}

void s3_sigv4_param(const struct s3_target *t, char out[S3_SIGV4_MAX])
{
    snprintf(out, S3_SIGV4_MAX, "aws:amz:%s:s3", t->region);
}

int s3_headers(const struct s3_target *t, char hdr[2][S3_HEADER_MAX])
{
    int n = 0;
    if (!s3_signed(t))
        return 0;
    snprintf(hdr[n++], S3_HEADER_MAX, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (t->session_token[0])
        snprintf(hdr[n++], S3_HEADER_MAX, "x-amz-security-token: %s", t->session_token);
    return n;
}
