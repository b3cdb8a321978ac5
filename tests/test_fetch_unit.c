/*
 * test_fetch_unit.c - the remote-fetch layer offline: URL parsing
 * (proto/url.c), the AWS shared files' INI reader (proto/ini.c), S3
 * resolution of region, endpoint and keys from config, environment and
 * files made in a temporary folder, the object URLs and signing headers
 * (daemon/fetch/s3.c), and the retry tables and backoff (fetch.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fetch.h"
#include "ini.h"
#include "s3.h"
#include "tap.h"
#include "url.h"

static void url_ok(const char *t, enum url_scheme s, const char *host, unsigned port,
                   const char *path, int dir)
{
    struct url u;
    struct rf_err err = {{0}};
    int r = url_parse(t, strlen(t), &u, &err);
    if (!tap_ok(r == 0, "url %s parses", t)) {
        tap_diag("%s", err.msg);
        return;
    }
    tap_ok(u.scheme == s && u.host_len == strlen(host) && memcmp(t + u.host, host, u.host_len) == 0
           && u.port == port && u.path_len == strlen(path)
           && memcmp(t + u.path, path, u.path_len) == 0 && u.dir == dir,
           "url %s: host %s port %u path '%s' dir %d", t, host, port, path, dir);
}

static void url_bad(const char *t, const char *want)
{
    struct url u;
    struct rf_err err = {{0}};
    int r = url_parse(t, strlen(t), &u, &err);
    tap_ok(r == -EINVAL && strstr(err.msg, want) && strstr(err.msg, "URL '"),
           "url '%s' refused: %s", t, err.msg);
}

static void test_url(void)
{
    url_ok("https://data.example.com/packs/fmnist/", URL_HTTPS, "data.example.com", 0,
           "/packs/fmnist/", 1);
    url_ok("http://127.0.0.1:8080/a/b", URL_HTTP, "127.0.0.1", 8080, "/a/b", 0);
    url_ok("http://[::1]:9000/x/", URL_HTTP, "::1", 9000, "/x/", 1);
    url_ok("http://host", URL_HTTP, "host", 0, "", 1);
    url_ok("https://h/%41b~c_d-e.f/", URL_HTTPS, "h", 0, "/%41b~c_d-e.f/", 1);
    url_ok("s3://my-bucket/imagenet/train/", URL_S3, "my-bucket", 0, "imagenet/train/", 1);
    url_ok("s3://my.bucket", URL_S3, "my.bucket", 0, "", 1);
    url_ok("s3://abc/", URL_S3, "abc", 0, "", 1);
    url_ok("s3://abc/x", URL_S3, "abc", 0, "x", 0);
    url_bad("", "empty");
    url_bad("ftp://h/x", "expected http://");
    url_bad("HTTP://h/x", "expected http://");
    url_bad("https://user:pw@h/x", "credentials");
    url_bad("https://h/a b", "control character, space");
    url_bad("https://h/a?b=1", "no query");
    url_bad("https://h/a#frag", "no query");
    url_bad("https://h/a//b", "empty path segment");
    url_bad("https://h/a/../b", "'..'");
    url_bad("https://h/./b", "'.'");
    url_bad("https://h:0/", "1..65535");
    url_bad("https://h:65536/", "1..65535");
    url_bad("https://h:080/", "leading zeros");
    url_bad("https://h:80x/", "decimal");
    url_bad("https://h:/", "':PORT'");
    url_bad("https:///x", "no host");
    url_bad("https://-h/", "DNS name");
    url_bad("https://h-.com/", "DNS name");
    url_bad("https://a..b/", "DNS name");
    url_bad("https://h_x/", "DNS name");
    url_bad("http://[::1/", "without ']'");
    url_bad("http://[]/", "empty IPv6");
    url_bad("http://[zz]/", "hex digits");
    url_bad("https://h/%4", "escape");
    url_bad("https://h/%zz", "escape");
    url_bad("https://h/a\x01", "control");
    url_bad("https://h/\xc3\xa9", "non-ASCII");
    url_bad("s3://ab/", "bucket names");
    url_bad("s3://Upper/", "bucket names");
    url_bad("s3://a..b/", "bucket names");
    url_bad("s3://192.168.1.1/", "bucket names");
    url_bad("s3://-abc/", "bucket names");
    url_bad("s3://abc/a%41", "not allowed");
    url_bad("s3://abc//x", "empty path segment");
    char long_url[URL_MAX + 20];
    memcpy(long_url, "https://h/", 10);
    memset(long_url + 10, 'a', sizeof(long_url) - 11);
    long_url[sizeof(long_url) - 1] = '\0';
    url_bad(long_url, "longer than");
    char bucket[70];
    memset(bucket, 'b', sizeof(bucket));
    tap_ok(url_valid_bucket(bucket, 63) && !url_valid_bucket(bucket, 64), "bucket 63 bytes, not 64");
}

static int ini_lookup(const char *text, const char *sec, const char *key, char *out, size_t cap,
                      struct rf_err *err)
{
    struct ini_value v;
    int r = ini_get(text, strlen(text), sec, key, &v, err);
    if (r == 1)
        snprintf(out, cap, "%.*s", (int)v.len, text + v.off);
    return r;
}

static void test_ini(void)
{
    const char *text =
        "# comment\n"
        "; also a comment\n"
        "[default]\n"
        "aws_access_key_id = AKIDEFAULT\r\n"
        "aws_secret_access_key=secret/with+chars==\n"
        "\n"
        "[profile dev]\n"
        "  region =  eu-west-1  \n"   /* indented first: a sub-key? no: error below */;
    char out[128];
    struct rf_err err = {{0}};
    tap_ok(ini_lookup(text, "default", "aws_access_key_id", out, sizeof(out), &err) < 0 &&
           strstr(err.msg, "line 8") && strstr(err.msg, "indented"),
           "an indented key with no key above it in its section is refused: %s", err.msg);

    text = "[default]\n"
           "aws_access_key_id = AKIDEFAULT\r\n"
           "aws_secret_access_key=secret/with+chars==\n"
           "s3 =\n"
           "    addressing_style = path\n"
           "[ profile dev ]\n"
           "region =  eu-west-1  \n"
           "empty =\n"
           "[default]\n"
           "region = us-west-2";
    TAP_IS_INT(ini_lookup(text, "default", "aws_access_key_id", out, sizeof(out), &err), 1,
               "ini: key found");
    TAP_IS_STR(out, "AKIDEFAULT", "ini: value without CR and blanks");
    ini_lookup(text, "default", "aws_secret_access_key", out, sizeof(out), &err);
    TAP_IS_STR(out, "secret/with+chars==", "ini: value with '=' and '/'");
    ini_lookup(text, "profile dev", "region", out, sizeof(out), &err);
    TAP_IS_STR(out, "eu-west-1", "ini: section name trimmed, value trimmed");
    TAP_IS_INT(ini_lookup(text, "profile dev", "empty", out, sizeof(out), &err), 1, "ini: empty value");
    TAP_IS_STR(out, "", "ini: empty value is empty");
    ini_lookup(text, "default", "region", out, sizeof(out), &err);
    TAP_IS_STR(out, "us-west-2", "ini: a section given twice counts as one; last line lacks LF");
    TAP_IS_INT(ini_lookup(text, "default", "addressing_style", out, sizeof(out), &err), 0,
               "ini: a sub-key is never answered");
    TAP_IS_INT(ini_lookup(text, "nope", "region", out, sizeof(out), &err), 0, "ini: no section");

    static const struct {
        const char *text, *want;
    } bad[] = {
        {"key = v\n", "line 1: a key before any [SECTION]"},
        {"[a]\nnot a key line\n", "line 2: expected [SECTION]"},
        {"[a\n", "line 1: a section line is [NAME]"},
        {"[]\n", "line 1: a section's name"},
        {"[a]\nk = 1\nk = 2\n", "line 3: [a] k given twice (line 2 first)"},
        {"[a]\nk = \x01\n", "line 2: control byte 0x01"},
        {"[a]\n = v\n", "line 2: expected"},
        {"[a]x\n", "line 1: a section line is [NAME]"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int r = ini_lookup(bad[i].text, "a", "k", out, sizeof(out), &err);
        tap_ok(r == -EBADMSG && strstr(err.msg, bad[i].want), "ini bad %zu: %s", i, err.msg);
    }
}

static char tmpdir[] = "/tmp/rf-fetch-unit-XXXXXX";

static void write_file(const char *name, const char *text)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        tap_bail("cannot write %s", p);
}

static void test_s3(void)
{
    struct s3_target t;
    struct s3_settings set = {0};
    struct rf_err err = {{0}};
    char home[300], cred[300], conf[300], url[URL_MAX + 1], hdr[2][S3_HEADER_MAX], sig[S3_SIGV4_MAX];
    struct url u;

    if (!mkdtemp(tmpdir))
        tap_bail("mkdtemp");
    snprintf(home, sizeof(home), "HOME=%s", tmpdir);
    snprintf(cred, sizeof(cred), "AWS_SHARED_CREDENTIALS_FILE=%s/cred", tmpdir);
    snprintf(conf, sizeof(conf), "AWS_CONFIG_FILE=%s/conf", tmpdir);

    /* nothing anywhere: defaults, unsigned */
    char *env0[] = {home, NULL};
    TAP_IS_INT(s3_resolve(NULL, env0, &t, &err), 0, "s3: nothing set resolves");
    TAP_IS_STR(t.region, "us-east-1", "s3: default region");
    TAP_IS_STR(t.endpoint, "https://s3.us-east-1.amazonaws.com", "s3: AWS endpoint of the region");
    tap_ok(!s3_signed(&t) && !t.custom_endpoint, "s3: unsigned, virtual-host style");
    TAP_IS_INT(s3_headers(&t, hdr), 0, "s3: no headers unsigned");
    const char *dsurl = "s3://my-bucket/packs/fmnist/";
    url_parse(dsurl, strlen(dsurl), &u, &err);
    s3_object_url(&t, dsurl, &u, "MANIFEST", url, sizeof(url), &err);
    TAP_IS_STR(url, "https://my-bucket.s3.us-east-1.amazonaws.com/packs/fmnist/MANIFEST",
               "s3: virtual-host URL");
    const char *dotted = "s3://my.bucket/p";
    url_parse(dotted, strlen(dotted), &u, &err);
    s3_object_url(&t, dotted, &u, "shard-00000.rfs", url, sizeof(url), &err);
    TAP_IS_STR(url, "https://s3.us-east-1.amazonaws.com/my.bucket/p/shard-00000.rfs",
               "s3: a dotted bucket goes path-style");

    /* files under HOME: credentials of the profile, region of the config */
    {
        char d[300];
        snprintf(d, sizeof(d), "%s/.aws", tmpdir);
        mkdir(d, 0700);
    }
    write_file(".aws/credentials", "[default]\naws_access_key_id = AKFILE\n"
                                   "aws_secret_access_key = SKFILE\n"
                                   "[dev]\naws_access_key_id = AKDEV\naws_secret_access_key = SKDEV\n"
                                   "aws_session_token = TOKDEV\n");
    write_file(".aws/config", "[default]\nregion = eu-central-1\n[profile dev]\nregion = ap-south-1\n");
    TAP_IS_INT(s3_resolve(NULL, env0, &t, &err), 0, "s3: home files resolve");
    tap_ok(strcmp(t.access_key, "AKFILE") == 0 && strcmp(t.secret_key, "SKFILE") == 0 &&
           t.keys_from == S3_FROM_CREDENTIALS_FILE, "s3: keys from ~/.aws/credentials [default]");
    tap_ok(strcmp(t.region, "eu-central-1") == 0 && t.region_from == S3_FROM_CONFIG_FILE,
           "s3: region from ~/.aws/config");
    TAP_IS_STR(t.endpoint, "https://s3.eu-central-1.amazonaws.com", "s3: endpoint follows region");

    char prof[] = "AWS_PROFILE=dev";
    char *env1[] = {home, prof, NULL};
    TAP_IS_INT(s3_resolve(NULL, env1, &t, &err), 0, "s3: AWS_PROFILE=dev resolves");
    tap_ok(strcmp(t.access_key, "AKDEV") == 0 && strcmp(t.session_token, "TOKDEV") == 0 &&
           strcmp(t.region, "ap-south-1") == 0, "s3: profile dev: keys, token, [profile dev] region");
    int n = s3_headers(&t, hdr);
    tap_ok(n == 2 && strcmp(hdr[0], "x-amz-content-sha256: UNSIGNED-PAYLOAD") == 0 &&
           strcmp(hdr[1], "x-amz-security-token: TOKDEV") == 0, "s3: signed headers with token");
    s3_sigv4_param(&t, sig);
    TAP_IS_STR(sig, "aws:amz:ap-south-1:s3", "s3: CURLOPT_AWS_SIGV4 value");

    /* env over files; config over env; custom endpoint path-style */
    char ak[] = "AWS_ACCESS_KEY_ID=AKENV", sk[] = "AWS_SECRET_ACCESS_KEY=SKENV",
         reg[] = "AWS_REGION=us-west-1", dreg[] = "AWS_DEFAULT_REGION=sa-east-1",
         ep[] = "AWS_ENDPOINT_URL=http://127.0.0.1:9000/", eps3[] = "AWS_ENDPOINT_URL_S3=http://s3only:9001";
    char *env2[] = {home, ak, sk, dreg, reg, ep, NULL};
    TAP_IS_INT(s3_resolve(NULL, env2, &t, &err), 0, "s3: env resolves");
    tap_ok(strcmp(t.access_key, "AKENV") == 0 && t.session_token[0] == '\0' &&
           t.keys_from == S3_FROM_ENV, "s3: env keys over the files");
    TAP_IS_STR(t.region, "us-west-1", "s3: AWS_REGION over AWS_DEFAULT_REGION");
    tap_ok(strcmp(t.endpoint, "http://127.0.0.1:9000") == 0 && t.custom_endpoint,
           "s3: AWS_ENDPOINT_URL, '/' dropped, custom");
    url_parse(dsurl, strlen(dsurl), &u, &err);
    s3_object_url(&t, dsurl, &u, "MANIFEST", url, sizeof(url), &err);
    TAP_IS_STR(url, "http://127.0.0.1:9000/my-bucket/packs/fmnist/MANIFEST", "s3: path-style URL");
    char *env3[] = {home, dreg, ep, eps3, NULL};
    s3_resolve(NULL, env3, &t, &err);
    tap_ok(strcmp(t.endpoint, "http://s3only:9001") == 0 && strcmp(t.region, "sa-east-1") == 0,
           "s3: AWS_ENDPOINT_URL_S3 over AWS_ENDPOINT_URL; AWS_DEFAULT_REGION over the file");
    set.endpoint = "https://minio.internal:9443";
    set.region = "eu-north-1";
    s3_resolve(&set, env2, &t, &err);
    tap_ok(strcmp(t.endpoint, "https://minio.internal:9443") == 0 &&
           strcmp(t.region, "eu-north-1") == 0 && t.endpoint_from == S3_FROM_CONFIG &&
           t.region_from == S3_FROM_CONFIG, "s3: config over env");

    /* explicit files by variable; the config file's keys when the
     * credentials file has none */
    write_file("cred", "[other]\naws_access_key_id = X\naws_secret_access_key = Y\n");
    write_file("conf", "[default]\naws_access_key_id = AKCONF\naws_secret_access_key = SKCONF\n");
    char *env4[] = {home, cred, conf, NULL};
    TAP_IS_INT(s3_resolve(NULL, env4, &t, &err), 0, "s3: files by variable resolve");
    tap_ok(strcmp(t.access_key, "AKCONF") == 0 && t.keys_from == S3_FROM_CONFIG_FILE &&
           t.region_from == S3_FROM_DEFAULT, "s3: keys from the config file");

    /* refusals */
    struct {
        char *env[6];
        struct s3_settings set;
        const char *want;
    } bad[] = {
        {{home, ak, NULL}, {0}, "AWS_ACCESS_KEY_ID without AWS_SECRET_ACCESS_KEY"},
        {{home, sk, NULL}, {0}, "AWS_SECRET_ACCESS_KEY without AWS_ACCESS_KEY_ID"},
        {{home, NULL}, {"s3://bucket/", NULL}, "s3-endpoint: 's3://bucket/': an endpoint is http"},
        {{home, NULL}, {"https://h/path", NULL}, "an endpoint has no path"},
        {{home, NULL}, {"https://h x", NULL}, "s3-endpoint: URL"},
        {{home, NULL}, {NULL, "US-EAST-1"}, "region 'US-EAST-1'"},
        {{home, cred, conf, NULL}, {0}, NULL},
    };
    write_file("halfcred", "[default]\naws_access_key_id = AKHALF\n");
    char half[300];
    snprintf(half, sizeof(half), "AWS_SHARED_CREDENTIALS_FILE=%s/halfcred", tmpdir);
    bad[6].env[1] = half;
    bad[6].want = "[default] has aws_access_key_id without aws_secret_access_key";
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int r = s3_resolve(&bad[i].set, bad[i].env, &t, &err);
        tap_ok(r == -EINVAL && strstr(err.msg, bad[i].want) && t.access_key[0] == '\0',
               "s3 refused %zu: %s", i, err.msg);
    }
    write_file("badcred", "[default]\nwhat is this\n");
    snprintf(half, sizeof(half), "AWS_SHARED_CREDENTIALS_FILE=%s/badcred", tmpdir);
    char *env5[] = {home, half, NULL};
    int r = s3_resolve(NULL, env5, &t, &err);
    tap_ok(r == -EBADMSG && strstr(err.msg, "badcred: line 2"), "s3: a malformed file named: %s",
           err.msg);
}

static void test_retry_tables(void)
{
    struct fetch_opts o;
    fetch_opts_default(&o);
    tap_ok(fetch_retryable(500, 0) && fetch_retryable(503, 0) && fetch_retryable(429, 0) &&
           fetch_retryable(408, 0), "5xx, 408, 429 retried");
    tap_ok(!fetch_retryable(404, 0) && !fetch_retryable(403, 0) && !fetch_retryable(400, 0) &&
           !fetch_retryable(301, 0), "403, 404, 400, 301 not retried");
    tap_ok(fetch_retryable(0, 7) && fetch_retryable(0, 28) && fetch_retryable(0, 56) &&
           fetch_retryable(0, 18), "refused, timed out, recv error, partial body retried");
    tap_ok(!fetch_retryable(0, 3) && !fetch_retryable(0, 60), "bad URL and bad certificate not retried");
    o.backoff_base_ms = 100;
    o.backoff_max_ms = 1000;
    int in_range = 1;
    for (unsigned k = 1; k <= 8; k++) {
        unsigned d = 100u << (k - 1);
        if (d > 1000)
            d = 1000;
        for (uint64_t rnd = 0; rnd < 2000; rnd += 37) {
            unsigned b = fetch_backoff_ms(&o, k, rnd);
            if (b < d / 2 || b > d)
                in_range = 0;
        }
    }
    tap_ok(in_range, "backoff in [d/2, d], d doubling from 100 ms up to 1000 ms");
    TAP_IS_INT(fetch_backoff_ms(&o, 40, 0), 1000, "backoff never overflows past the cap");
    struct fetch_client *c;
    struct rf_err err = {{0}};
    o.retries = FETCH_RETRIES_MAX + 1;
    tap_ok(fetch_client_new(&o, &c, &err) == -EINVAL && strstr(err.msg, "retries"),
           "retries over the bound refused: %s", err.msg);
}

int main(void)
{
    test_url();
    test_ini();
    test_s3();
    test_retry_tables();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", tmpdir);
    return tap_done();
}
