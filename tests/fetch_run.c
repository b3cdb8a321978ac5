/*
 * fetch_run.c - drives the remote-fetch layer for tests/integration/
 * test_fetch.py: one command a run, one result line on stdout ("ok ..."
 * or "error ...: MESSAGE"), exit 0 or 1.
 *
 *   fetch_run [--retries N] [--backoff-ms N] get URL OFF LEN OUT
 *       a GET (LEN 0: to the end) into the file OUT
 *   fetch_run [...] s3get DATASET-URL KEY OUT
 *       the object KEY under s3://BUCKET/PREFIX/, resolved and signed from
 *       this process's environment (daemon/fetch/s3.h)
 *   fetch_run [...] cache DIR BASE-URL [BUDGET]
 *       BASE-URL/MANIFEST, then every shard it lists into the cache folder
 *       DIR (verified, renamed into place); one line per shard, then
 *       "used N"
 *   fetch_run lookup DIR BASE-URL
 *       cache_lookup of every shard after an open: "present NAME" or
 *       "absent NAME: why"
 *   fetch_run hold DIR
 *       opens DIR, prints "held", and keeps it until stdin closes
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "dataset.h"
#include "fetch.h"
#include "manifest.h"
#include "s3.h"

extern char **environ;

static struct fetch_client *fc;

/* Prints the error line and frees the client: the exit path of a failure. */
static int fail(const struct fetch_result *res, const struct rf_err *err)
{
    fetch_client_free(fc);
    fc = NULL;
    printf("error tries=%u status=%ld: %s\n", res ? res->tries : 0, res ? res->status : 0,
           err->msg);
    return 1;
}

static int manifest_get(const char *base, char **text, size_t *len,
                        struct manifest *m, struct rf_err *err)
{
    static char buf[1 << 20];
    char url[2048];
    struct fetch_sink sink = {.fd = -1, .buf = buf, .cap = sizeof(buf)};
    struct fetch_result res;
    snprintf(url, sizeof(url), "%sMANIFEST", base);
    struct fetch_req req = {.url = url};
    int r = fetch_get(fc, &req, &sink, &res, err);
    if (r < 0)
        return r;
    *text = buf;
    *len = res.bytes;
    return manifest_parse(buf, res.bytes, m, err);
}

int main(int argc, char **argv)
{
    struct fetch_opts o;
    struct fetch_result res = {0};
    struct rf_err err = {{0}};
    int i = 1, r;

    fetch_opts_default(&o);
    o.connect_timeout_ms = 2000;
    o.low_speed_sec = 5;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--retries") == 0)
            o.retries = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--backoff-ms") == 0)
            o.backoff_base_ms = (unsigned)atoi(argv[i + 1]);
        else
            return fprintf(stderr, "unknown option %s\n", argv[i]), 2;
    }
    if (i >= argc)
        return fprintf(stderr, "usage: see fetch_run.c\n"), 2;
    const char *cmd = argv[i++];
    int n = argc - i;
    if (fetch_client_new(&o, &fc, &err) < 0)
        return fail(NULL, &err);

    if (strcmp(cmd, "get") == 0 && n == 4) {
        int fd = open(argv[i + 3], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        struct fetch_req req = {.url = argv[i], .off = strtoull(argv[i + 1], NULL, 10),
                                .len = strtoull(argv[i + 2], NULL, 10)};
        struct fetch_sink sink = {.fd = fd};
        r = fd < 0 ? -errno : fetch_get(fc, &req, &sink, &res, &err);
        if (r < 0)
            return fail(&res, &err);
        printf("ok status=%ld tries=%u bytes=%llu\n", res.status, res.tries,
               (unsigned long long)res.bytes);
    } else if (strcmp(cmd, "s3get") == 0 && n == 3) {
        struct s3_target t;
        struct url u;
        char url[URL_MAX + 1];
        if (url_parse(argv[i], strlen(argv[i]), &u, &err) < 0 ||
            s3_resolve(NULL, environ, &t, &err) < 0 ||
            s3_object_url(&t, argv[i], &u, argv[i + 1], url, sizeof(url), &err) < 0)
            return fail(NULL, &err);
        int fd = open(argv[i + 2], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        struct fetch_req req = {.url = url, .s3 = &t};
        struct fetch_sink sink = {.fd = fd};
        if (fetch_get(fc, &req, &sink, &res, &err) < 0)
            return fail(&res, &err);
        printf("ok status=%ld tries=%u bytes=%llu signed=%d\n", res.status, res.tries,
               (unsigned long long)res.bytes, s3_signed(&t));
    } else if ((strcmp(cmd, "cache") == 0 && (n == 2 || n == 3)) ||
               (strcmp(cmd, "lookup") == 0 && n == 2)) {
        struct cache *c;
        struct manifest m = {0};
        char *text;
        size_t len;
        uint64_t budget = n == 3 ? strtoull(argv[i + 2], NULL, 10) : UINT64_MAX;
        if (cache_open(argv[i], budget, &c, &err) < 0)
            return fail(NULL, &err);
        if (manifest_get(argv[i + 1], &text, &len, &m, &err) < 0) {
            manifest_free(&m);
            cache_close(c);
            return fail(NULL, &err);
        }
        uint64_t id = dataset_identity_of(text, len);
        int bad = 0;
        for (uint32_t s = 0; s < m.nshards; s++) {
            char url[2048];
            struct cache_key key = {id, manifest_shard_name(&m, s), m.shards[s].bytes,
                                    m.shards[s].index_crc, CACHE_CHECK_SHARD};
            if (cmd[0] == 'l') {
                r = cache_lookup(c, &key, &err);
                printf(r == 1 ? "present %s\n" : "absent %s: %s\n", key.name, err.msg);
                continue;
            }
            snprintf(url, sizeof(url), "%s%s", argv[i + 1], key.name);
            struct fetch_req req = {.url = url};
            err.msg[0] = '\0';
            r = cache_fetch(c, fc, &req, &key, NULL, &err);
            if (r < 0) {
                bad = 1;
                printf("error %s: %s\n", key.name, err.msg);
            } else {
                printf("ok %s\n", key.name);
            }
        }
        printf("used %llu\n", (unsigned long long)cache_used(c));
        manifest_free(&m);
        cache_close(c);
        fetch_client_free(fc);
        return bad;
    } else if (strcmp(cmd, "hold") == 0 && n == 1) {
        struct cache *c;
        char b[64];
        if (cache_open(argv[i], UINT64_MAX, &c, &err) < 0)
            return fail(NULL, &err);
        printf("held\n");
        fflush(stdout);
        while (read(0, b, sizeof(b)) > 0)
            ;
        cache_close(c);
    } else {
        fprintf(stderr, "usage: see fetch_run.c\n");
        fetch_client_free(fc);
        return 2;
    }
    fetch_client_free(fc);
    return 0;
}
