/*
 * fetch.c - fetch.h's GET: one libcurl easy handle per call over the
 * client's share of connections, a write callback that sends the body to
 * the sink only once the status says it is the object, and the bounded
 * retry loop with its tables of what is tried again.
 */
#include "fetch.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fileio.h"

struct fetch_client {
    struct fetch_opts o;
    CURLSH *share;
    pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
    atomic_bool cancelled;
};

/* Transport errors a new try may cure: the network, not the request. */
static const CURLcode retried_codes[] = {
    CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT, CURLE_OPERATION_TIMEDOUT,
    CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR,
    CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_SSL_CONNECT_ERROR,
};

/* Statuses besides 5xx that are tried again: request timeout, throttled. */
static const long retried_statuses[] = {408, 429};

/* Statuses that are not retried and their errno and hint. */
static const struct {
    long status;
    int code;
    const char *hint;
} status_errors[] = {
    {301, -EPROTO, " (the bucket is in another region: set s3-region or AWS_REGION)"},
    {307, -EPROTO, " (a redirect: the bucket may be in another region)"},
    {401, -EACCES, " (check the credentials)"},
    {403, -EACCES, " (check the credentials and that they may read this object)"},
    {404, -ENOENT, " (no such object)"},
};

bool fetch_retryable(long status, int curl_code)
{
    if (curl_code) {
        for (size_t i = 0; i < sizeof(retried_codes) / sizeof(retried_codes[0]); i++)
            if ((int)retried_codes[i] == curl_code)
                return true;
        return false;
    }
    if (status >= 500 && status <= 599)
        return true;
    for (size_t i = 0; i < sizeof(retried_statuses) / sizeof(retried_statuses[0]); i++)
        if (retried_statuses[i] == status)
            return true;
    return false;
}

unsigned fetch_backoff_ms(const struct fetch_opts *o, unsigned k, uint64_t rnd)
{
    uint64_t d = o->backoff_base_ms;
    for (unsigned i = 1; i < k && d < o->backoff_max_ms; i++)
        d <<= 1;
    if (d > o->backoff_max_ms)
        d = o->backoff_max_ms;
    return (unsigned)(d - (d / 2 ? rnd % (d / 2 + 1) : 0));
}

void fetch_opts_default(struct fetch_opts *o)
{
    o->retries = FETCH_RETRIES_DEFAULT;
    o->connect_timeout_ms = FETCH_CONNECT_TIMEOUT_MS_DEFAULT;
    o->low_speed_sec = FETCH_LOW_SPEED_SEC_DEFAULT;
    o->backoff_base_ms = FETCH_BACKOFF_BASE_MS_DEFAULT;
    o->backoff_max_ms = FETCH_BACKOFF_MAX_MS_DEFAULT;
}

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *ctx)
{
    struct fetch_client *c = ctx;
    (void)h;
    (void)a;
    pthread_mutex_lock(&c->locks[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *ctx)
{
    struct fetch_client *c = ctx;
    (void)h;
    pthread_mutex_unlock(&c->locks[d]);
}

int fetch_client_new(const struct fetch_opts *o, struct fetch_client **out, struct rf_err *err)
{
    struct fetch_client *c;
    unsigned nlocks = 0;
    int r;

    *out = NULL;
    if (o->retries > FETCH_RETRIES_MAX)
        return rf_err_set(err, -EINVAL, "fetch retries: %u is over %u", o->retries,
                          FETCH_RETRIES_MAX);
    if (o->connect_timeout_ms == 0 || o->low_speed_sec == 0 || o->backoff_max_ms == 0 ||
        o->backoff_base_ms > o->backoff_max_ms)
        return rf_err_set(err, -EINVAL, "fetch options: timeouts must be nonzero and the "
                          "first backoff at most the largest");
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return rf_err_set(err, -EIO, "libcurl would not initialise");
    c = calloc(1, sizeof(*c));
    if (!c) {
        r = rf_err_set(err, -ENOMEM, "out of memory for the fetch client");
        goto fail_global;
    }
    c->o = *o;
    for (; nlocks < CURL_LOCK_DATA_LAST; nlocks++)
        if (pthread_mutex_init(&c->locks[nlocks], NULL) != 0) {
            r = rf_err_set(err, -ENOMEM, "out of memory for the fetch client's locks");
            goto fail_locks;
        }
    c->share = curl_share_init();
    if (!c->share) {
        r = rf_err_set(err, -ENOMEM, "out of memory for libcurl's share");
        goto fail_locks;
    }
    if (curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock) != CURLSHE_OK ||
        curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock) != CURLSHE_OK ||
        curl_share_setopt(c->share, CURLSHOPT_USERDATA, c) != CURLSHE_OK ||
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS) != CURLSHE_OK ||
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK ||
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK) {
        r = rf_err_set(err, -EIO, "libcurl refused to share connections, DNS and TLS sessions");
        goto fail_share;
    }
    *out = c;
    return 0;

fail_share:
    curl_share_cleanup(c->share);
fail_locks:
    while (nlocks--)
        pthread_mutex_destroy(&c->locks[nlocks]);
    free(c);
fail_global:
    curl_global_cleanup();
    return r;
}

void fetch_client_free(struct fetch_client *c)
{
    if (!c)
        return;
    curl_share_cleanup(c->share);
    for (unsigned i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&c->locks[i]);
    free(c);
    curl_global_cleanup();
}

void fetch_client_cancel(struct fetch_client *c)
{
    atomic_store(&c->cancelled, true);
}

/* One try's state, shared with the callbacks. */
struct try_ctx {
    CURL *h;
    const struct fetch_sink *sink;
    uint64_t limit;        /* the most body bytes the sink takes */
    uint64_t got;          /* written to the sink */
    long status;           /* read at the first body byte */
    bool body_is_object;   /* the status said 200/206 */
    int sink_errno;        /* a write failed: its -errno */
    bool too_long;
    char detail[256];      /* the start of an error body (S3's XML) */
    size_t detail_len;
    struct fetch_client *c;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx_)
{
    struct try_ctx *t = ctx_;
    size_t len = size * n;

    if (t->status == 0) {
        curl_easy_getinfo(t->h, CURLINFO_RESPONSE_CODE, &t->status);
        t->body_is_object = t->status == 200 || t->status == 206;
    }
    if (!t->body_is_object) {
        size_t k = sizeof(t->detail) - 1 - t->detail_len;
        if (k > len)
            k = len;
        memcpy(t->detail + t->detail_len, p, k);
        t->detail_len += k;
        return len;
    }
    if (len > t->limit - t->got) {
        t->too_long = true;
        return 0;          /* CURLE_WRITE_ERROR ends the try */
    }
    if (t->sink->fd >= 0) {
        int r = fio_pwrite_full(t->sink->fd, p, len, t->sink->fd_off + t->got);
        if (r < 0) {
            t->sink_errno = r;
            return 0;
        }
    } else {
        memcpy((char *)t->sink->buf + t->got, p, len);
    }
    t->got += len;
    return len;
}

static int on_progress(void *ctx_, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    struct try_ctx *t = ctx_;
    (void)dt, (void)dn, (void)ut, (void)un;
    return atomic_load(&t->c->cancelled) ? 1 : 0;
}

/* S3's error code (<Code>NoSuchKey</Code>) from an error body, or "". */
static void s3_code(const char *body, size_t len, char *out, size_t cap)
{
    const char *a, *b;
    out[0] = '\0';
    a = memmem(body, len, "<Code>", 6);
    if (!a)
        return;
    a += 6;
    b = memmem(a, len - (size_t)(a - body), "</Code>", 7);
    if (!b || (size_t)(b - a) >= cap || b == a)
        return;
    for (const char *q = a; q < b; q++)
        if (!((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9')))
            return;
    snprintf(out, cap, "%.*s", (int)(b - a), a);
}

/* Sleeps ms in slices, returning early (-ECANCELED) on a cancel. */
static int backoff_sleep(struct fetch_client *c, unsigned ms)
{
    uint64_t end = clock_mono_ns() + (uint64_t)ms * 1000000u;
    for (;;) {
        uint64_t now = clock_mono_ns();
        if (atomic_load(&c->cancelled))
            return -ECANCELED;
        if (now >= end)
            return 0;
        uint64_t left = end - now, step = left < 50000000u ? left : 50000000u;
        struct timespec ts = {(time_t)(step / 1000000000u), (long)(step % 1000000000u)};
        nanosleep(&ts, NULL);
    }
}

static uint64_t jitter_word(unsigned k)
{
    /* splitmix64 of the clock and the stack address: spread, not secret */
    uint64_t z = clock_mono_ns() ^ ((uint64_t)(uintptr_t)&k << 16) ^ k;
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Sets the options of one GET on h; 0 or -EIO naming the option. */
static int setup(CURL *h, struct fetch_client *c, const struct fetch_req *req, struct try_ctx *t,
                 struct curl_slist **hdrs, char *errbuf, char range[64], struct rf_err *err)
{
    char sig[S3_SIGV4_MAX], hdr[2][S3_HEADER_MAX];
    CURLcode e = CURLE_OK;

#define SET(opt, val) do { if (e == CURLE_OK) e = curl_easy_setopt(h, opt, val); } while (0)
    SET(CURLOPT_URL, req->url);
    SET(CURLOPT_SHARE, c->share);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_CONNECTTIMEOUT_MS, (long)c->o.connect_timeout_ms);
    SET(CURLOPT_LOW_SPEED_LIMIT, (long)FETCH_LOW_SPEED_BYTES);
    SET(CURLOPT_LOW_SPEED_TIME, (long)c->o.low_speed_sec);
    SET(CURLOPT_ERRORBUFFER, errbuf);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, t);
    SET(CURLOPT_XFERINFOFUNCTION, on_progress);
    SET(CURLOPT_XFERINFODATA, t);
    SET(CURLOPT_NOPROGRESS, 0L);
    if (req->off || req->len) {
        if (req->len)
            snprintf(range, 64, "%llu-%llu", (unsigned long long)req->off,
                     (unsigned long long)(req->off + req->len - 1));
        else
            snprintf(range, 64, "%llu-", (unsigned long long)req->off);
        SET(CURLOPT_RANGE, range);
    }
    if (req->s3 && s3_signed(req->s3)) {
        int n = s3_headers(req->s3, hdr);
        for (int i = 0; i < n; i++) {
            struct curl_slist *l = curl_slist_append(*hdrs, hdr[i]);
            if (!l)
                return rf_err_set(err, -ENOMEM, "GET %s: out of memory for headers", req->url);
            *hdrs = l;
        }
        s3_sigv4_param(req->s3, sig);
        SET(CURLOPT_AWS_SIGV4, sig);          /* libcurl copies strings */
        SET(CURLOPT_USERNAME, req->s3->access_key);
        SET(CURLOPT_PASSWORD, req->s3->secret_key);
        SET(CURLOPT_HTTPHEADER, *hdrs);
    }
#undef SET
    if (e != CURLE_OK)
        return rf_err_set(err, -EIO, "GET %s: libcurl refused an option: %s", req->url,
                          curl_easy_strerror(e));
    return 0;
}

int fetch_get(struct fetch_client *c, const struct fetch_req *req, const struct fetch_sink *sink,
              struct fetch_result *res, struct rf_err *err)
{
    struct fetch_result dummy;
    uint64_t limit = sink->fd >= 0 ? UINT64_MAX : sink->cap;
    unsigned tries_max = 1 + c->o.retries;
    char errbuf[CURL_ERROR_SIZE], range[64];
    int r = 0;

    if (!res)
        res = &dummy;
    memset(res, 0, sizeof(*res));
    if (req->len && req->len < limit)
        limit = req->len;
    for (unsigned k = 1; k <= tries_max; k++) {
        struct curl_slist *hdrs = NULL;
        struct try_ctx t = {.sink = sink, .limit = limit, .c = c};
        CURLcode cc;

        if (atomic_load(&c->cancelled))
            return rf_err_set(err, -ECANCELED, "GET %s: cancelled", req->url);
        if (sink->fd >= 0 && k > 1 && ftruncate(sink->fd, (off_t)sink->fd_off) == -1)
            return rf_err_set(err, -errno, "GET %s: rewinding the file for a retry: %s",
                              req->url, strerror(errno));
        t.h = curl_easy_init();
        if (!t.h)
            return rf_err_set(err, -ENOMEM, "GET %s: out of memory for a request", req->url);
        errbuf[0] = '\0';
        r = setup(t.h, c, req, &t, &hdrs, errbuf, range, err);
        if (r < 0) {
            curl_slist_free_all(hdrs);
            curl_easy_cleanup(t.h);
            return r;
        }
        cc = curl_easy_perform(t.h);
        if (t.status == 0)
            curl_easy_getinfo(t.h, CURLINFO_RESPONSE_CODE, &t.status);
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(t.h);
        res->tries = k;
        res->status = t.status;
        res->curl_code = (int)cc;
        res->bytes = t.got;

        if (t.sink_errno)
            return rf_err_set(err, t.sink_errno, "GET %s: writing the body: %s", req->url,
                              strerror(-t.sink_errno));
        if (cc == CURLE_ABORTED_BY_CALLBACK)
            return rf_err_set(err, -ECANCELED, "GET %s: cancelled", req->url);
        if (t.too_long)
            return rf_err_set(err, -EPROTO, "GET %s: the body is longer than the %llu bytes "
                              "asked for", req->url, (unsigned long long)limit);
        bool ok_status = cc == CURLE_OK && (req->off || req->len ? t.status == 206
                                                                  : t.status == 200);
        if (ok_status) {
            if (req->len && t.got != req->len)
                return rf_err_set(err, -EPROTO, "GET %s: %llu bytes for a range of %llu",
                                  req->url, (unsigned long long)t.got,
                                  (unsigned long long)req->len);
            return 0;
        }
        if (cc == CURLE_OK && t.status == 200 && (req->off || req->len))
            return rf_err_set(err, -EPROTO, "GET %s: HTTP 200 to a range request (the server "
                              "does not serve ranges)", req->url);
        bool again = cc != CURLE_OK ? fetch_retryable(0, (int)cc) : fetch_retryable(t.status, 0);
        if (!again || k == tries_max) {
            char code[64], what[CURL_ERROR_SIZE + 128];
            const char *hint = "";
            int e = again ? -EIO : -EPROTO;
            if (cc != CURLE_OK) {
                snprintf(what, sizeof(what), "curl error %d: %s", (int)cc,
                         errbuf[0] ? errbuf : curl_easy_strerror(cc));
            } else {
                s3_code(t.detail, t.detail_len, code, sizeof(code));
                for (size_t i = 0; i < sizeof(status_errors) / sizeof(status_errors[0]); i++)
                    if (status_errors[i].status == t.status) {
                        e = status_errors[i].code;
                        hint = status_errors[i].hint;
                    }
                snprintf(what, sizeof(what), "HTTP %ld%s%s%s%s", t.status, code[0] ? " " : "",
                         code, hint, "");
            }
            return rf_err_set(err, e, "GET %s: %s, after %u %s", req->url, what, k,
                              k == 1 ? "try" : "tries");
        }
        r = backoff_sleep(c, fetch_backoff_ms(&c->o, k, jitter_word(k)));
        if (r < 0)
            return rf_err_set(err, r, "GET %s: cancelled", req->url);
    }
    return rf_err_set(err, -EIO, "GET %s: no try made", req->url);   /* tries_max >= 1 */
}
