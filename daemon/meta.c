/*
 * meta.c - CLASSES, SOURCES and SUBSETS: a dataset's class names and source list
 * over the control socket (meta.h), so that a client that knows only the
 * catalogue name (ringfeed.Loader's classes, class_to_idx, source(i)) gets
 * them from the daemon that serves the dataset.
 */
#include "meta.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "dataset.h"
#include "manifest.h"

/* Writes the ERR message into msg; *code is the caller's to set. */
__attribute__((format(printf, 4, 5)))
static int fail(enum ctl_errcode *code, char *msg, size_t cap, const char *fmt, ...)
{
    va_list ap;

    (void)code;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return -1;
}

/* The dataset the request names, or NULL with the error set. */
static struct dataset *find(struct daemon *d, const struct ctl_req *req,
                            enum ctl_errcode *code, char *msg, size_t cap)
{
    const char *why = catalog_failed_reason(d, req->dataset);
    int i = catalog_find(d, req->dataset);

    if (i >= 0)
        return d->cat[i].ds;
    *code = why ? CTL_E_BAD_DATASET : CTL_E_NO_DATASET;
    if (why)
        fail(code, msg, cap, "dataset %s is no longer served: %s", req->dataset, why);
    else
        fail(code, msg, cap, "no dataset %s here (DATASETS lists them)", req->dataset);
    return NULL;
}

/* Appends the header "OK <lines>\n" and body[0..blen) into *out. */
static int finish(char *body, size_t blen, unsigned lines, char **out, size_t *len,
                  enum ctl_errcode *code, char *msg, size_t cap)
{
    char hdr[64];
    int h = ctl_reply_multi(hdr, sizeof(hdr), lines, NULL);
    char *o;

    if (h < 0 || (size_t)h + blen > CTL_REPLY_MAX) {
        *code = CTL_E_INTERNAL;
        return fail(code, msg, cap, "the reply would be over %u lines or %u bytes",
                    CTL_REPLY_LINES_MAX, CTL_REPLY_MAX);
    }
    o = malloc((size_t)h + blen + 1);
    if (!o) {
        *code = CTL_E_INTERNAL;
        return fail(code, msg, cap, "out of memory");
    }
    memcpy(o, hdr, (size_t)h);
    memcpy(o + h, body, blen);
    *out = o;
    *len = (size_t)h + blen;
    return 0;
}

static int classes(struct dataset *ds, const struct ctl_req *req, char **out, size_t *len,
                   enum ctl_errcode *code, char *msg, size_t cap)
{
    uint32_t n = dataset_info(ds)->classes;
    char *body;
    size_t blen = 0;
    int r;

    if (n > CTL_REPLY_LINES_MAX) {
        *code = CTL_E_INTERNAL;
        return fail(code, msg, cap, "dataset %s has %" PRIu32 " classes, over the %u lines "
                    "of a reply", req->dataset, n, CTL_REPLY_LINES_MAX);
    }
    body = malloc(CTL_REPLY_MAX);
    if (!body) {
        *code = CTL_E_INTERNAL;
        return fail(code, msg, cap, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        const char *name = dataset_class_name(ds, i);
        size_t k = strlen(name);

        /* the MANIFEST's class names have no control characters
         * (manifest.c), so a line is the name as it is */
        if (blen + k + 1 > CTL_REPLY_MAX - 64) {
            free(body);
            *code = CTL_E_INTERNAL;
            return fail(code, msg, cap, "dataset %s's class names are over the %u bytes "
                        "of a reply", req->dataset, CTL_REPLY_MAX);
        }
        memcpy(body + blen, name, k);
        body[blen + k] = '\n';
        blen += k + 1;
    }
    r = finish(body, blen, n, out, len, code, msg, cap);
    free(body);
    return r;
}

static int sources(struct dataset *ds, const struct ctl_req *req, char **out, size_t *len,
                   enum ctl_errcode *code, char *msg, size_t cap)
{
    uint64_t samples = dataset_info(ds)->samples;
    char *body;
    size_t blen = 0;
    unsigned lines = 0;
    struct rf_err err;
    int r;

    if (!dataset_has_sources(ds)) {
        *code = CTL_E_NO_DATASET;
        return fail(code, msg, cap, "dataset %s has no source list: it was packed before "
                    "source lists, with --no-sources, or by a writer that records none "
                    "(repack it with ringfeed-pack imagefolder)", req->dataset);
    }
    if (req->start >= samples) {
        *code = CTL_E_BAD_ARG;
        return fail(code, msg, cap, "SOURCES: start %" PRIu64 " is past dataset %s's %"
                    PRIu64 " samples (0..%" PRIu64 ")", req->start, req->dataset, samples,
                    samples ? samples - 1 : 0);
    }
    body = malloc(CTL_REPLY_MAX);
    if (!body) {
        *code = CTL_E_INTERNAL;
        return fail(code, msg, cap, "out of memory");
    }
    for (uint64_t i = req->start; i < samples && lines < req->count; i++) {
        const char *line;
        size_t k;

        r = dataset_source(ds, i, &line, &k, &err);
        if (r < 0) {
            free(body);
            *code = r == -ENOMEM ? CTL_E_INTERNAL : CTL_E_BAD_DATASET;
            return fail(code, msg, cap, "dataset %s's source list: %s", req->dataset,
                        err.msg);
        }
        if (blen + k + 1 > CTL_REPLY_MAX - 64)
            break; /* the rest in the next request; a line always fits one */
        memcpy(body + blen, line, k);
        body[blen + k] = '\n';
        blen += k + 1;
        lines++;
    }
    r = finish(body, blen, lines, out, len, code, msg, cap);
    free(body);
    return r;
}

/* SUBSETS: "NAME COUNT" per set of the pack's MANIFEST as it is now
 * (dataset.h), then "* SAMPLES". */
static int subsets(struct dataset *ds, const struct ctl_req *req, char **out, size_t *len,
                   enum ctl_errcode *code, char *msg, size_t cap)
{
    char body[SUBSET_MAX * (SUBSET_NAME_MAX + 24) + 32];
    struct manifest m;
    struct rf_err err;
    size_t blen = 0;
    int r;

    if (dataset_manifest_now(ds, &m, &err) < 0) {
        *code = CTL_E_BAD_DATASET;
        return fail(code, msg, cap, "dataset %s: %s", req->dataset, err.msg);
    }
    for (uint32_t i = 0; i < m.nsubsets; i++)
        blen += (size_t)snprintf(body + blen, sizeof(body) - blen, "%s %" PRIu64 "\n",
                                 manifest_subset_name(&m, i), m.subsets[i].count);
    blen += (size_t)snprintf(body + blen, sizeof(body) - blen, "* %" PRIu64 "\n",
                             dataset_info(ds)->samples);
    r = finish(body, blen, m.nsubsets + 1, out, len, code, msg, cap);
    manifest_free(&m);
    return r;
}

int meta_reply(struct daemon *d, const struct ctl_req *req, char **out, size_t *len,
               enum ctl_errcode *code, char *msg, size_t cap)
{
    struct dataset *ds = find(d, req, code, msg, cap);

    if (!ds)
        return -1;
    if (req->verb == CTL_VERB_CLASSES)
        return classes(ds, req, out, len, code, msg, cap);
    if (req->verb == CTL_VERB_SUBSETS)
        return subsets(ds, req, out, len, code, msg, cap);
    return sources(ds, req, out, len, code, msg, cap);
}
