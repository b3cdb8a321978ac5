/*
 * attach_line.c - the two lines of the ATTACH handshake: the request,
 * formatted from struct rf_options with the protocol's own formatter
 * (ctl_format_attach, which leaves out every key at its default), and the
 * reply, read with the protocol's reply parser.
 *
 * params are parsed with ctl_parse, so a bad pair is refused before
 * anything is sent, with the protocol's message naming the key and its
 * range; a key that an rf_options field sets may not be repeated there.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <stdbool.h>
#include <strings.h>

#include "client.h"
#include "ctl.h"
#include "strnum.h"

/* ATTACH keys that struct rf_options sets, which params may not repeat;
 * the last three only when their option is left at "daemon's default". */
static const char *const owned_keys[] = {
    "dataset", "batch", "rank", "world", "seed", "epoch", "seq", "transform",
    "shuffle", "drop_last", "version", "depth", "size", "name",
};

/* Does params hold a mix= pair (a mixture instead of a dataset)? */
static bool has_mix(const char *params)
{
    for (const char *k = params + strspn(params, " \t"); *k;
         k += strcspn(k, " \t"), k += strspn(k, " \t"))
        if (strncasecmp(k, "mix=", 4) == 0)
            return true;
    return false;
}

/* Parses o->params (space-separated key=value pairs) with the protocol's
 * own parser into *at, so a bad pair is refused here, naming the key. */
static int parse_params(const struct rf_options *o, struct ctl_attach *at,
                        struct rf_err *err)
{
    char line[CTL_LINE_MAX + 1];
    struct ctl_req req;
    size_t used;
    int n;

    /* one line of the protocol: a CR or LF inside would end the request
     * early and drop what follows without a word */
    if (strpbrk(o->params, "\r\n"))
        return rf_err_set(err, -EINVAL, "option params=\"%.80s\": a line break in params; "
                          "separate key=value pairs with spaces", o->params);
    /* the owned keys first, on the text as given: shuffle=block is added
     * below for the parser's check of block= */
    for (const char *k = o->params + strspn(o->params, " \t"); *k;
         k += strcspn(k, " \t"), k += strspn(k, " \t")) {
        size_t klen = strcspn(k, "= \t");

        for (size_t j = 0; j < sizeof(owned_keys) / sizeof(owned_keys[0]); j++) {
            const char *ok = owned_keys[j];

            if (klen != strlen(ok) || strncasecmp(k, ok, klen) != 0)
                continue;
            if ((j == 11 && !o->depth) || (j == 12 && !o->size) || (j == 13 && !o->name))
                continue;
            return rf_err_set(err, -EINVAL,
                              "option params: %s= is set through struct rf_options "
                              "(its field of that name), not params",
                              ok);
        }
    }
    /* block= (shuffle=block's block size) is checked against the shuffle
     * the options ask for; a mixture (mix=) names its datasets itself */
    n = snprintf(line, sizeof(line), "ATTACH %s%s%s\n", has_mix(o->params) ? "" : "dataset=x ",
                 o->params, o->shuffle == RF_SHUFFLE_BLOCK ? " shuffle=block" : "");
    if (n < 0 || (size_t)n >= sizeof(line))
        return rf_err_set(err, -EMSGSIZE, "option params is longer than the protocol's "
                          "%d-byte line", CTL_LINE_MAX);
    if (ctl_parse(line, (size_t)n, &req, &used) != CTL_DONE || req.err != CTL_E_NONE)
        return rf_err_set(err, -EINVAL, "option params=\"%.80s\": %s", o->params,
                          req.err != CTL_E_NONE ? req.msg : "not one line");
    *at = req.attach;
    return 0;
}

/*
 * Formats the ATTACH line, newline included, into buf (CTL_LINE_MAX + 1
 * bytes or more) with ctl_format_attach(), which leaves out every key at
 * the protocol's default.  Returns its length, or -EINVAL / -EMSGSIZE with
 * the option named; nothing is sent before the options pass.
 */
int client_format_attach(const struct client_attach_args *a, char *buf, size_t cap,
                         struct rf_err *err)
{
    const struct rf_options *o = a->opt;
    const char *t = o->transform ? o->transform : "raw";
    const char *ds = a->dataset ? a->dataset : o->dataset;
    struct ctl_attach at;
    struct rf_err e;
    int rc;

    if (o->shuffle < RF_SHUFFLE_OFF || o->shuffle > RF_SHUFFLE_BLOCK)
        return rf_err_set(err, -EINVAL, "option shuffle=%d: use RF_SHUFFLE_OFF (0), "
                          "RF_SHUFFLE_GLOBAL (1) or RF_SHUFFLE_BLOCK (2)", o->shuffle);
    ctl_attach_defaults(&at);
    if (o->params && o->params[0]) {
        rc = parse_params(o, &at, err);
        if (rc < 0)
            return rc;
    }
    if (at.mix[0]) {
        /* a mixture: its datasets are in mix=, and the dataset option is "" */
        if (ds && ds[0])
            return rf_err_set(err, -EINVAL, "option dataset=\"%.80s\" and params mix=: a "
                              "mixture names its own datasets; give dataset \"\"", ds);
        ds = "";
    } else if (!ds || strlen(ds) > CTL_DATASET_NAME_MAX ||
               !ctl_dataset_name_ok(ds, strlen(ds)))
        return rf_err_set(err, -EINVAL,
                          "option dataset=\"%.80s\": give a name from the daemon's "
                          "catalogue, 1 to %d characters of A-Z a-z 0-9 . _ - "
                          "(ringfeedctl datasets lists them), or a dataset folder (a path "
                          "with a '/')",
                          ds ? ds : "", CTL_DATASET_NAME_MAX);
    memcpy(at.dataset, ds, strlen(ds) + 1);
    if (o->name) {
        if (strlen(o->name) > CTL_LABEL_MAX)
            return rf_err_set(err, -EINVAL, "option name: at most %d characters",
                              CTL_LABEL_MAX);
        memcpy(at.name, o->name, strlen(o->name) + 1);
    }
    if (a->epoch > UINT32_MAX)
        return rf_err_set(err, -EINVAL, "epoch %" PRIu64 " is past the protocol's %u",
                          a->epoch, UINT32_MAX);
    for (at.transform = 0; at.transform < CTL_TRANSFORM_COUNT; at.transform++)
        if (strcasecmp(t, ctl_transform_name(at.transform)) == 0)
            break;
    if (at.transform == CTL_TRANSFORM_COUNT)
        return rf_err_set(err, -EINVAL, "option transform=\"%.40s\": use raw, train, "
                          "eval, none or tokens", t);
    at.batch = o->batch;
    at.rank = (uint32_t)a->rank;
    at.world = (uint32_t)a->world;
    at.seed = o->seed;
    at.epoch = (uint32_t)a->epoch;
    at.seq = a->seq;
    if (o->depth)
        at.depth = o->depth;
    if (o->size) {
        /* given, so sent even at 224: the daemon refuses a size= that the
         * transform does not use (raw, none) */
        at.size = o->size;
        ctl_attach_give(&at, "size");
    }
    at.shuffle = (uint32_t)o->shuffle;
    at.drop_last = o->drop_last != 0;
    at.version = a->version ? a->version : RING_VERSION;
    rc = ctl_format_attach(&at, buf, cap, &e);
    if (rc == -ENOSPC)
        return rf_err_set(err, -EMSGSIZE, "the ATTACH line is longer than %zu bytes",
                          cap - 1);
    if (rc < 0)
        return rf_err_set(err, rc, "option %s", e.msg);
    return rc;
}

/*
 * Parses the reply line (len bytes, its LF included) with the protocol's
 * reply parser.  Returns 0 for an OK reply with every field, the negative
 * errno of the daemon's ERR code (*refused = 1, message in err), or -EPROTO.
 */
int client_parse_reply(const char *line, size_t len, const char *path,
                       struct client_reply *r, int *refused, struct rf_err *err)
{
    static const char *const keys[] = {"id", "size", "depth", "batches"};
    uint64_t *vals[] = {&r->id, &r->size, &r->depth, &r->batches};
    struct ctl_reply rep;
    unsigned seen = 0;
    size_t used, pos, end;
    const char *text;

    r->sources[0] = '\0';
    if (ctl_parse_reply(line, len, &rep, &used) != CTL_DONE || rep.multi)
        return rf_err_set(err, -EPROTO,
                          "the daemon at %s answered ATTACH with \"%.*s\", not "
                          "\"OK attach ...\" or \"ERR ...\"",
                          path, (int)(len > 80 ? 80 : len - 1), line);
    text = line + rep.text_off;
    if (!rep.ok) {
        *refused = 1;
        return rf_err_set(err, rep.err, "the daemon at %s refused ATTACH: %.*s (%.*s)",
                          path, (int)rep.text_len, text, (int)rep.name_len,
                          line + rep.name_off);
    }
    if (rep.text_len < 6 || memcmp(text, "attach", 6) != 0 ||
        (rep.text_len > 6 && text[6] != ' '))
        return rf_err_set(err, -EPROTO,
                          "the daemon at %s answered ATTACH with \"OK %.*s\", not "
                          "\"OK attach ...\"",
                          path, (int)(rep.text_len > 80 ? 80 : rep.text_len), text);
    for (pos = 6; pos < rep.text_len; pos = end) {
        const char *k, *eq;

        while (pos < rep.text_len && text[pos] == ' ')
            pos++;
        k = text + pos;
        for (end = pos; end < rep.text_len && text[end] != ' '; end++)
            ;
        eq = memchr(k, '=', end - pos);
        if (!eq)
            continue; /* a word a later daemon added: ignored */
        if ((size_t)(eq - k) == 7 && memcmp(k, "sources", 7) == 0) {
            size_t vlen = (size_t)(text + end - eq - 1);

            /* a mixture's NAME:FIRST,... (names of [A-Za-z0-9._-]) */
            if (vlen >= sizeof(r->sources) ||
                strspn(eq + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               "0123456789._-:,") < vlen)
                return rf_err_set(err, -EPROTO, "the daemon's ATTACH reply has a bad sources: "
                                  "\"%.80s\"", eq + 1);
            memcpy(r->sources, eq + 1, vlen);
            r->sources[vlen] = '\0';
            continue;
        }
        for (unsigned i = 0; i < 4; i++) {
            if ((size_t)(eq - k) != strlen(keys[i]) || memcmp(k, keys[i], (size_t)(eq - k)))
                continue;
            if (strnum_u64(eq + 1, (size_t)(text + end - eq - 1), vals[i]) < 0)
                return rf_err_set(err, -EPROTO,
                                  "the daemon's ATTACH reply has a bad %s: \"%.*s\"",
                                  keys[i], (int)rep.text_len, text);
            seen |= 1u << i;
        }
    }
    if (seen != 15)
        return rf_err_set(err, -EPROTO,
                          "the daemon's ATTACH reply lacks one of id, size, depth, "
                          "batches: \"OK %.*s\"",
                          (int)rep.text_len, text);
    return 0;
}
