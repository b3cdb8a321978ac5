/*
 * fetch.h - GETs of whole objects and byte ranges over HTTP(S), signed
 * for S3 when asked, with bounded retries; blocking calls made from the
 * main process's thread pool (never the event loop, never a worker).
 *
 * DESIGN
 *   A fetch_client holds the options and a libcurl share of connections,
 *   DNS answers and TLS sessions, so every fetch, on whichever thread,
 *   reuses a kept-alive connection to the same host.  fetch_get makes one
 *   easy handle per call (cheap: the connection is the share's), asks for
 *   HTTP/2 over TLS where the server offers it (HTTP/1.1 otherwise), and
 *   writes the body to a file descriptor at an offset or into a buffer.
 *
 *   Tries: at most 1 + opts.retries.  A try that fails with a 5xx, 408 or
 *   429 status, or a transport error in fetch.c's retry table (connect
 *   refused or timed out, reset, a body cut short, no bytes for
 *   opts.low_speed_sec), waits a backoff and starts over from the first
 *   byte (the sink is rewound; a half-written file never survives); any
 *   other status (403, 404, every other 3xx/4xx) fails at once after one
 *   request.  The backoff before try k+1 is a random time in [d/2, d]
 *   with d = min(backoff_max_ms, backoff_base_ms << k) ("equal jitter":
 *   clients retrying together spread out).  Every loop is bounded by the
 *   try count; every try by the connect and low-speed timeouts.
 *
 *   The error after the last try names the URL, the HTTP status or the
 *   curl error, and how many tries were made.  fetch_client_cancel makes
 *   every running and later fetch of the client end with -ECANCELED at its
 *   next progress tick or backoff (a daemon that stops).
 *
 * Thread safety: fetch_get may run on any number of threads at once with
 * one client; fetch_client_new and _free are not concurrent with them.
 */
#ifndef RINGFEED_FETCH_FETCH_H
#define RINGFEED_FETCH_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "s3.h"

#define FETCH_RETRIES_DEFAULT 4u       /* 5 tries in all */
#define FETCH_RETRIES_MAX 20u
#define FETCH_CONNECT_TIMEOUT_MS_DEFAULT 10000u
#define FETCH_LOW_SPEED_SEC_DEFAULT 30u  /* under 1 KiB/s for this long: a stall */
#define FETCH_LOW_SPEED_BYTES 1024u
#define FETCH_BACKOFF_BASE_MS_DEFAULT 200u
#define FETCH_BACKOFF_MAX_MS_DEFAULT 10000u

struct fetch_opts {
    unsigned retries;              /* tries after the first, 0..FETCH_RETRIES_MAX */
    unsigned connect_timeout_ms;   /* per try */
    unsigned low_speed_sec;        /* a try moving < FETCH_LOW_SPEED_BYTES/s this long fails */
    unsigned backoff_base_ms;      /* the first backoff's upper bound */
    unsigned backoff_max_ms;       /* no backoff longer */
};

/* The defaults above. */
void fetch_opts_default(struct fetch_opts *o);

struct fetch_client;

/* Makes a client; returns 0 or -ENOMEM / -EINVAL (options out of range,
 * named in err) / -EIO (libcurl refused its set-up). */
int fetch_client_new(const struct fetch_opts *o, struct fetch_client **out, struct rf_err *err);
/* Frees c (NULL accepted); no fetch may be running. */
void fetch_client_free(struct fetch_client *c);
/* Ends running fetches with -ECANCELED and refuses later ones. */
void fetch_client_cancel(struct fetch_client *c);

/* One GET.  len 0: from off to the object's end (off 0: the whole object,
 * answered 200); len > 0: bytes [off, off + len), answered 206. */
struct fetch_req {
    const char *url;               /* http(s)://, as url.h accepts it */
    uint64_t off, len;
    const struct s3_target *s3;    /* non-NULL: sign as s3.h says */
};

/* Where the body goes: fd >= 0, written from fd_off on (pwrite; the file is
 * truncated back to fd_off before a retry), or buf with cap bytes. */
struct fetch_sink {
    int fd;
    uint64_t fd_off;
    void *buf;
    size_t cap;
};

struct fetch_result {
    long status;                   /* the last try's HTTP status; 0: none */
    unsigned tries;                /* requests made */
    uint64_t bytes;                /* body bytes written to the sink */
    int curl_code;                 /* the last try's CURLcode (0: none) */
};

/*
 * GETs req into sink.  Returns 0 with res->bytes the body's length (for a
 * range, exactly len), or:
 *   -ENOENT     404 (one request);
 *   -EACCES     401 or 403 (one request);
 *   -EPROTO     another status that is not retried, a 200 to a range, or a
 *               body longer than a range or than the buffer;
 *   -EIO        the last try failed with a retried status or transport
 *               error;
 *   -ECANCELED  fetch_client_cancel;
 *   -ENOSPC, -EIO, ... the sink's write errno (not retried);
 * each with err naming the URL and the status or curl's message, and the
 * tries made.  res (may be NULL) says what happened either way.
 */
int fetch_get(struct fetch_client *c, const struct fetch_req *req, const struct fetch_sink *sink,
              struct fetch_result *res, struct rf_err *err);

/* 1 when a try that ended with HTTP status (0: none) and curl code (0:
 * none) is tried again (the tables in fetch.c). */
bool fetch_retryable(long status, int curl_code);

/* The backoff before try k + 1 (k >= 1 tries made) for the random word
 * rnd: in [d/2, d], d = min(max_ms, base_ms << (k - 1)). */
unsigned fetch_backoff_ms(const struct fetch_opts *o, unsigned k, uint64_t rnd);

#endif
