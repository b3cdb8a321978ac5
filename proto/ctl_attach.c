/*
 * ctl_attach.c - ATTACH's key=value arguments: one table of keys (kind,
 * field, range) drives the parser, the range check, the error messages
 * ("batch takes an integer in 1..65536") and the formatter, so a key's
 * range is written down once.  The defaults live in ctl_attach_defaults;
 * ctl_check_tables() checks that they pass the table's ranges.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "ctl_int.h"
#include "strnum.h"
#include "subset.h"
#include "aug_spec.h"
#include "mix.h"
#include "sampler.h"

enum kind {
    K_U32,    /* uint32_t in umin..umax */
    K_U64,    /* uint64_t in umin..umax */
    K_F64,    /* double in fmin..fmax, fmin excluded when lo_open */
    K_PAIR,   /* double[2] "LO,HI", each as K_F64, LO <= HI */
    K_CHOICE, /* uint32_t index into words[] */
    K_BOOL,   /* bool from "0" or "1" */
    K_NAME,   /* char[] dataset name (ctl_dataset_name_ok) */
    K_LABEL,  /* char[] 1..CTL_LABEL_MAX of [A-Za-z0-9._:@/+-] */
    K_FIELD,  /* char[] a field name (ctl_field_name_ok) */
    K_SUBSET, /* struct ctl_subset: NAME or START:STOP */
    K_AUGMENT, /* char[] an augmentation spec (aug_spec_parse) or @RECIPE */
    K_MIX,    /* char[] a mixture, NAME:WEIGHT,... (mix_parse) */
};

struct key {
    const char *name;
    enum kind kind;
    size_t off;            /* of the field in struct ctl_attach */
    uint64_t umin, umax;
    double fmin, fmax;
    bool lo_open;
    bool zero_unset;       /* 0 (or "") means "not given": allowed, not written */
    const char *const *words;
    unsigned nwords;
};

static const char *const transforms[] = {"raw", "train", "eval", "none", "tokens"};
_Static_assert(sizeof(transforms) / sizeof(transforms[0]) == CTL_TRANSFORM_COUNT,
               "a word for every enum ctl_transform");
static const char *const layouts[] = {"chw", "hwc"};
/* shuffle=: indexed by enum sampler_shuffle */
static const char *const shuffles[] = {"0", "1", "block"};
_Static_assert(SAMPLER_SHUFFLE_OFF == 0 && SAMPLER_SHUFFLE_GLOBAL == 1 &&
               SAMPLER_SHUFFLE_BLOCK == 2 && SAMPLER_SHUFFLE_COUNT == 3,
               "shuffles[] is indexed by enum sampler_shuffle");

#define F(field) offsetof(struct ctl_attach, field)
#define U(n, k, field, lo, hi) {n, k, F(field), lo, hi, 0, 0, false, false, NULL, 0}
#define D(n, k, field, lo, hi, open) {n, k, F(field), 0, 0, lo, hi, open, false, NULL, 0}
#define W(n, field, w) {n, K_CHOICE, F(field), 0, 0, 0, 0, false, false, w, sizeof(w) / sizeof(w[0])}

static const struct key keys[] = {
    {"dataset", K_NAME, F(dataset), 0, 0, 0, 0, false, true, NULL, 0}, /* or mix= */
    U("batch", K_U32, batch, 1, CTL_ATTACH_BATCH_MAX),
    U("rank", K_U32, rank, 0, CTL_ATTACH_WORLD_MAX - 1),
    U("world", K_U32, world, 1, CTL_ATTACH_WORLD_MAX),
    U("seed", K_U64, seed, 0, UINT64_MAX),
    U("epoch", K_U32, epoch, 0, UINT32_MAX),
    U("seq", K_U64, seq, 0, UINT64_MAX),
    W("transform", transform, transforms),
    {"depth", K_U32, F(depth), CTL_ATTACH_DEPTH_MIN, CTL_ATTACH_DEPTH_MAX, 0, 0, false, true,
     NULL, 0},
    U("size", K_U32, size, 8, 4096),
    W("layout", layout, layouts),
    D("scale", K_PAIR, scale, 0, 1, true),
    D("ratio", K_PAIR, ratio, 0, 100, true),
    D("flip", K_F64, flip, 0, 1, false),
    D("crop", K_F64, crop, 0, 1, true),
    {"context", K_U32, F(context), 1, 65536, 0, 0, false, true, NULL, 0},
    U("doc_ids", K_BOOL, doc_ids, 0, 1),
    W("shuffle", shuffle, shuffles),
    {"block", K_U64, F(block), 1, SAMPLER_MAX_N, 0, 0, false, true, NULL, 0},
    U("drop_last", K_BOOL, drop_last, 0, 1),
    U("drop_last_batch", K_BOOL, drop_last_batch, 0, 1),
    {"version", K_U32, F(version), 1, UINT32_MAX, 0, 0, false, true, NULL, 0},
    {"name", K_LABEL, F(name), 0, 0, 0, 0, false, true, NULL, 0},
    {"weight", K_U32, F(weight), 1, CTL_ATTACH_WEIGHT_MAX, 0, 0, false, true, NULL, 0},
    U("share", K_BOOL, share, 0, 1),
    {"field", K_FIELD, F(field), 0, 0, 0, 0, false, true, NULL, 0},
    {"subset", K_SUBSET, F(subset), 0, 0, 0, 0, false, true, NULL, 0},
    {"augment", K_AUGMENT, F(augment), 0, 0, 0, 0, false, true, NULL, 0},
    {"mix", K_MIX, F(mix), 0, 0, 0, 0, false, true, NULL, 0},
    U("repeat", K_BOOL, repeat, 0, 1),
    {"epoch_of", K_NAME, F(epoch_of), 0, 0, 0, 0, false, true, NULL, 0},
    U("per_stream", K_BOOL, per_stream, 0, 1),
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

_Static_assert(NKEYS == CTL_ATTACH_KEYS, "CTL_ATTACH_KEYS counts the rows of keys[]");
_Static_assert(NKEYS <= 32, "the duplicate check keeps one bit per key");
_Static_assert(CTL_ATTACH_KEYS <= CTL_ARGS_MAX, "every key fits in one request");

void ctl_attach_defaults(struct ctl_attach *a)
{
    memset(a, 0, sizeof(*a));
    a->batch = 256;
    a->rank = 0;
    a->world = 1;
    a->seed = 0;
    a->epoch = 0;
    a->seq = 0;
    a->transform = CTL_TRANSFORM_RAW;
    a->depth = 0; /* the daemon picks (stream.c, auto_depth) */
    a->size = 224;
    a->layout = CTL_LAYOUT_CHW;
    a->scale[0] = 0.08;
    a->scale[1] = 1.0;
    a->ratio[0] = 0.75;
    a->ratio[1] = 1.3333333;
    a->flip = 0.5;
    a->crop = 0.875;
    a->shuffle = SAMPLER_SHUFFLE_GLOBAL;
    a->block = 0; /* the daemon's default (stream.c, sampler_block_default) */
    a->drop_last = false;
    a->drop_last_batch = false;
    a->version = 0;
    a->weight = 0; /* the daemon's default for the client (fairq.c, WEIGHTS) */
    a->share = true;
    a->repeat = true;
}

const char *ctl_transform_name(uint32_t t)
{
    return t < CTL_TRANSFORM_COUNT ? transforms[t] : NULL;
}

const char *ctl_layout_name(uint32_t l)
{
    return l < CTL_LAYOUT_COUNT ? layouts[l] : NULL;
}

const char *ctl_shuffle_name(uint32_t s)
{
    return s < SAMPLER_SHUFFLE_COUNT ? shuffles[s] : NULL;
}

bool ctl_label_ok(const char *s, size_t len)
{
    if (len == 0 || len > CTL_LABEL_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("._:@/+-", c)))
            return false;
    }
    return true;
}

bool ctl_field_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > CTL_FIELD_MAX || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

/* Writes what key k accepts, e.g. "an integer in 1..65536". */
static void describe(const struct key *k, char *buf, size_t cap)
{
    char lo[32], hi[32];

    switch (k->kind) {
    case K_U32:
    case K_U64:
        snprintf(buf, cap, "an integer in %llu..%llu", (unsigned long long)k->umin,
                 (unsigned long long)k->umax);
        return;
    case K_F64:
    case K_PAIR:
        if (strnum_format_double(k->fmin, lo, sizeof(lo)) < 0 ||
            strnum_format_double(k->fmax, hi, sizeof(hi)) < 0)
            snprintf(lo, sizeof(lo), "?"), snprintf(hi, sizeof(hi), "?");
        if (k->kind == K_F64)
            snprintf(buf, cap, "a number in %c%s, %s]", k->lo_open ? '(' : '[', lo, hi);
        else
            snprintf(buf, cap, "LO,HI with %s %s LO <= HI <= %s", lo, k->lo_open ? "<" : "<=",
                     hi);
        return;
    case K_CHOICE: {
        size_t used = (size_t)snprintf(buf, cap, "one of ");

        for (unsigned i = 0; i < k->nwords && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? "|" : "", k->words[i]);
        return;
    }
    case K_BOOL:
        snprintf(buf, cap, "0 or 1");
        return;
    case K_NAME:
        snprintf(buf, cap, "1 to %d characters of A-Z a-z 0-9 . _ -", CTL_DATASET_NAME_MAX);
        return;
    case K_LABEL:
        snprintf(buf, cap, "1 to %d characters of A-Z a-z 0-9 . _ : @ / + -", CTL_LABEL_MAX);
        return;
    case K_FIELD:
        snprintf(buf, cap, "a field name: 1 to %d characters of A-Z a-z 0-9 _, not starting "
                 "with a digit", CTL_FIELD_MAX);
        return;
    case K_SUBSET:
        snprintf(buf, cap, "a set's name (ringfeed-pack split) or START:STOP with START < "
                 "STOP");
        return;
    case K_AUGMENT:
        snprintf(buf, cap, "an augmentation spec of at most %d bytes or @RECIPE",
                 CTL_AUGMENT_MAX);
        return;
    case K_MIX:
        snprintf(buf, cap, "NAME:WEIGHT,NAME:WEIGHT,... (2 to %d datasets, positive weights, "
                 "at most %d bytes)", MIX_SOURCES_MAX, CTL_MIX_MAX);
        return;
    }
    snprintf(buf, cap, "?");
}

__attribute__((format(printf, 3, 4)))
static int fail(char *msg, size_t cap, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* "ATTACH: bad value "x" for batch: batch takes an integer in 1..65536" */
static int fail_value(const struct key *k, const char *v, size_t vlen, char *msg, size_t cap)
{
    char q[CTL_QUOTE_SIZE], what[96];

    ctl_quote(q, sizeof(q), v, vlen);
    describe(k, what, sizeof(what));
    if (k->kind == K_NAME && memchr(v, '/', vlen)) /* a folder: ctl.h OPEN */
        return fail(msg, cap, "ATTACH: bad value %s for %s: a dataset folder is not a name; "
                    "OPEN <folder> gives the name a daemon serves it under (libringfeed "
                    "does this, and starts ringfeedd --user for a folder the system "
                    "daemon does not name)", q, k->name);
    return fail(msg, cap, "ATTACH: bad value %s for %s: %s takes %s", q, k->name, k->name, what);
}

static bool f64_in_range(const struct key *k, double v)
{
    if (!isfinite(v) || v > k->fmax)
        return false;
    return k->lo_open ? v > k->fmin : v >= k->fmin;
}

/* subset=NAME or START:STOP, either bound left out or not (":" alone,
 * the whole dataset, is refused: leave the key out).  False when it is
 * neither. */
static bool parse_subset(const char *v, size_t vlen, struct ctl_subset *out)
{
    const char *colon = memchr(v, ':', vlen);
    struct ctl_subset s = {.stop = UINT64_MAX};
    size_t a;

    if (!colon) {
        if (!subset_name_ok(v, vlen))
            return false;
        memcpy(s.name, v, vlen);
        s.name[vlen] = '\0';
        *out = s;
        return true;
    }
    a = (size_t)(colon - v);
    s.range = true;
    if (a == 0 && vlen == 1)
        return false;
    if (a > 0 && strnum_u64(v, a, &s.start) < 0)
        return false;
    if (vlen - a - 1 > 0 && strnum_u64(colon + 1, vlen - a - 1, &s.stop) < 0)
        return false;
    if (s.start >= s.stop)
        return false;
    *out = s;
    return true;
}

/* augment='s value: "@NAME" (a recipe's name: 1..32 of [A-Za-z0-9_-],
 * first a letter; the daemon looks it up) or a spec aug_spec_parse
 * accepts.  Returns 0, or -EINVAL with the parser's message in err. */
/* mix=: a mixture's text, NAME:WEIGHT entries between commas (mix.h). */
static int check_mix(const char *v, size_t vlen, struct rf_err *err)
{
    struct mix m;

    if (vlen > CTL_MIX_MAX)
        return rf_err_set(err, -EINVAL, "mix: %zu bytes, at most %d", vlen, CTL_MIX_MAX);
    return mix_parse(v, vlen, &m, err);
}

static int check_augment(const char *v, size_t vlen, struct rf_err *err)
{
    struct aug_spec spec;

    if (vlen > CTL_AUGMENT_MAX)
        return rf_err_set(err, -EINVAL, "augment: %zu bytes, at most %d", vlen,
                          CTL_AUGMENT_MAX);
    if (vlen > 0 && v[0] == '@') {
        bool ok = vlen >= 2 && vlen - 1 <= 32 &&
                  ((v[1] >= 'a' && v[1] <= 'z') || (v[1] >= 'A' && v[1] <= 'Z'));

        for (size_t i = 1; ok && i < vlen; i++)
            ok = (v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
                 (v[i] >= '0' && v[i] <= '9') || v[i] == '_' || v[i] == '-';
        return ok ? 0 : rf_err_set(err, -EINVAL, "augment: @NAME names a recipe of the "
                                   "daemon's config: 1 to 32 of A-Z a-z 0-9 _ -, first a "
                                   "letter");
    }
    return aug_spec_parse(v, vlen, &spec, err) < 0 ? -EINVAL : 0;
}

/* Parses v[0..vlen) for key k into the field of a; false when it is bad. */
static bool parse_value(const struct key *k, const char *v, size_t vlen, struct ctl_attach *a)
{
    char *field = (char *)a + k->off;
    uint64_t u;
    double d, pair[2];
    const char *comma;

    switch (k->kind) {
    case K_U32:
    case K_U64:
        if (strnum_u64(v, vlen, &u) < 0 || u < k->umin || u > k->umax)
            return false;
        if (k->kind == K_U32)
            *(uint32_t *)field = (uint32_t)u;
        else
            *(uint64_t *)field = u;
        return true;
    case K_F64:
        if (strnum_double(v, vlen, &d) < 0 || !f64_in_range(k, d))
            return false;
        *(double *)field = d;
        return true;
    case K_PAIR:
        comma = memchr(v, ',', vlen);
        if (!comma || strnum_double(v, (size_t)(comma - v), &pair[0]) < 0 ||
            strnum_double(comma + 1, vlen - (size_t)(comma - v) - 1, &pair[1]) < 0 ||
            !f64_in_range(k, pair[0]) || !f64_in_range(k, pair[1]) || pair[0] > pair[1])
            return false;
        memcpy(field, pair, sizeof(pair));
        return true;
    case K_CHOICE:
        for (unsigned i = 0; i < k->nwords; i++) {
            if (ctl_ieq(v, vlen, k->words[i])) {
                *(uint32_t *)field = i;
                return true;
            }
        }
        return false;
    case K_BOOL:
        if (vlen != 1 || (v[0] != '0' && v[0] != '1'))
            return false;
        *(bool *)field = v[0] == '1';
        return true;
    case K_NAME:
    case K_LABEL:
    case K_FIELD:
        if (k->kind == K_NAME    ? !ctl_dataset_name_ok(v, vlen)
            : k->kind == K_LABEL ? !ctl_label_ok(v, vlen)
                                 : !ctl_field_name_ok(v, vlen))
            return false;
        memcpy(field, v, vlen);
        field[vlen] = '\0';
        return true;
    case K_SUBSET:
        return parse_subset(v, vlen, (struct ctl_subset *)field);
    case K_AUGMENT:
        if (check_augment(v, vlen, NULL) < 0)
            return false;
        memcpy(field, v, vlen);
        field[vlen] = '\0';
        return true;
    case K_MIX:
        if (check_mix(v, vlen, NULL) < 0)
            return false;
        memcpy(field, v, vlen);
        field[vlen] = '\0';
        return true;
    }
    return false;
}

static const struct key *find_key(const char *s, size_t len)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (ctl_ieq(s, len, keys[i].name))
            return &keys[i];
    return NULL;
}

bool ctl_attach_given(const struct ctl_attach *a, const char *key)
{
    const struct key *k = find_key(key, strlen(key));

    return k && (a->given & (1u << (k - keys)));
}

int ctl_attach_give(struct ctl_attach *a, const char *key)
{
    const struct key *k = find_key(key, strlen(key));

    if (!k)
        return -ENOENT;
    a->given |= 1u << (k - keys);
    return 0;
}

static int fail_unknown_key(const char *s, size_t len, char *msg, size_t cap)
{
    char q[CTL_QUOTE_SIZE], list[256];
    size_t used = 0;

    list[0] = '\0';
    for (size_t i = 0; i < NKEYS; i++) {
        int n = snprintf(list + used, sizeof(list) - used, "%s%s", i ? " " : "", keys[i].name);

        if (n < 0 || (size_t)n >= sizeof(list) - used)
            break;
        used += (size_t)n;
    }
    ctl_quote(q, sizeof(q), s, len);
    return fail(msg, cap, "ATTACH: unknown key %s; keys: %s", q, list);
}

int ctl_attach_parse(const char *line, const struct ctl_span *args, unsigned nargs,
                     struct ctl_attach *a, char *msg, size_t cap)
{
    uint32_t seen = 0, mix_bit;
    struct rf_err e;

    ctl_attach_defaults(a);
    for (unsigned i = 0; i < nargs; i++) {
        const char *tok = line + args[i].off;
        size_t len = args[i].len;
        const char *eq = memchr(tok, '=', len);
        const struct key *k;
        char q[CTL_QUOTE_SIZE];
        size_t klen;

        if (!eq) {
            ctl_quote(q, sizeof(q), tok, len);
            return fail(msg, cap, "ATTACH: expected key=value, got %s", q);
        }
        klen = (size_t)(eq - tok);
        k = find_key(tok, klen);
        if (!k)
            return fail_unknown_key(tok, klen, msg, cap);
        if (seen & (1u << (k - keys)))
            return fail(msg, cap, "ATTACH: %s given twice", k->name);
        seen |= 1u << (k - keys);
        if (k->kind == K_AUGMENT && check_augment(eq + 1, len - klen - 1, &e) < 0)
            return fail(msg, cap, "ATTACH: %s", e.msg);
        if (k->kind == K_MIX && check_mix(eq + 1, len - klen - 1, &e) < 0)
            return fail(msg, cap, "ATTACH: %s", e.msg);
        if (!parse_value(k, eq + 1, len - klen - 1, a))
            return fail_value(k, eq + 1, len - klen - 1, msg, cap);
    }
    mix_bit = 1u << (find_key("mix", 3) - keys);
    if (!(seen & 1u) && !(seen & mix_bit)) /* keys[0] is dataset */
        return fail(msg, cap, "ATTACH: dataset=NAME (or mix=) is required");
    if ((seen & 1u) && (seen & mix_bit))
        return fail(msg, cap, "ATTACH: dataset= and mix= name the data twice: give one "
                    "(a mixture of the config is dataset=NAME)");
    a->given = seen;
    if (ctl_attach_check(a, &e) < 0)
        return fail(msg, cap, "ATTACH: %s", e.msg);
    return 0;
}

/* Checks one field of a against its row; false when out of range. */
static bool field_ok(const struct key *k, const struct ctl_attach *a)
{
    const char *field = (const char *)a + k->off;
    uint64_t u;
    double pair[2];
    size_t n;

    switch (k->kind) {
    case K_U32:
    case K_U64:
        if (k->kind == K_U32)
            u = *(const uint32_t *)field;
        else
            u = *(const uint64_t *)field;
        return (k->zero_unset && u == 0) || (u >= k->umin && u <= k->umax);
    case K_F64:
        return f64_in_range(k, *(const double *)field);
    case K_PAIR:
        memcpy(pair, field, sizeof(pair));
        return f64_in_range(k, pair[0]) && f64_in_range(k, pair[1]) && pair[0] <= pair[1];
    case K_CHOICE:
        return *(const uint32_t *)field < k->nwords;
    case K_BOOL:
        return true;
    case K_NAME:
    case K_LABEL:
    case K_FIELD:
        n = strnlen(field, k->kind == K_NAME    ? CTL_DATASET_NAME_MAX + 1
                           : k->kind == K_LABEL ? CTL_LABEL_MAX + 1
                                                : CTL_FIELD_MAX + 1);
        if (k->zero_unset && n == 0)
            return true;
        return k->kind == K_NAME    ? ctl_dataset_name_ok(field, n)
               : k->kind == K_LABEL ? ctl_label_ok(field, n)
                                    : ctl_field_name_ok(field, n);
    case K_SUBSET: {
        const struct ctl_subset *sb = (const struct ctl_subset *)field;

        n = strnlen(sb->name, sizeof(sb->name));
        if (sb->range)
            return n == 0 && sb->start < sb->stop;
        return n == 0 || subset_name_ok(sb->name, n);
    }
    case K_AUGMENT:
        n = strnlen(field, CTL_AUGMENT_MAX + 1);
        return n == 0 || (n <= CTL_AUGMENT_MAX && check_augment(field, n, NULL) == 0);
    case K_MIX:
        n = strnlen(field, CTL_MIX_MAX + 1);
        return n == 0 || (n <= CTL_MIX_MAX && check_mix(field, n, NULL) == 0);
    }
    return false;
}

int ctl_attach_check(const struct ctl_attach *a, struct rf_err *err)
{
    char what[96];

    if (!a->dataset[0] == !a->mix[0])
        return rf_err_set(err, -EINVAL, a->dataset[0] ? "dataset= and mix= name the data "
                          "twice: give one" : "dataset=NAME or mix= is required");
    for (size_t i = 0; i < NKEYS; i++) {
        if (!field_ok(&keys[i], a)) {
            describe(&keys[i], what, sizeof(what));
            return rf_err_set(err, -EINVAL, "%s takes %s", keys[i].name, what);
        }
    }
    if (a->rank >= a->world)
        return rf_err_set(err, -EINVAL, "rank=%u must be less than world=%u", a->rank,
                          a->world);
    if (a->block != 0 && a->shuffle != SAMPLER_SHUFFLE_BLOCK)
        return rf_err_set(err, -EINVAL, "block=%llu is shuffle=block's block size; with "
                          "shuffle=%s leave it out", (unsigned long long)a->block,
                          shuffles[a->shuffle]);
    return 0;
}

void ctl_subset_format(const struct ctl_subset *s, char *buf, size_t cap)
{
    if (!s->range)
        snprintf(buf, cap, "%s", s->name);
    else if (s->start == 0 && s->stop == UINT64_MAX)
        snprintf(buf, cap, ":"); /* not made by the parser */
    else if (s->stop == UINT64_MAX)
        snprintf(buf, cap, "%llu:", (unsigned long long)s->start);
    else if (s->start == 0)
        snprintf(buf, cap, ":%llu", (unsigned long long)s->stop);
    else
        snprintf(buf, cap, "%llu:%llu", (unsigned long long)s->start,
                 (unsigned long long)s->stop);
}

bool ctl_subset_same(const struct ctl_subset *a, const struct ctl_subset *b)
{
    return a->range == b->range && strcmp(a->name, b->name) == 0 &&
           (!a->range || (a->start == b->start && a->stop == b->stop));
}

/* Appends " key=value" for row k to buf at *used; -ENOSPC, -ERANGE. */
static int format_key(const struct key *k, const struct ctl_attach *a, char *buf, size_t cap,
                      size_t *used)
{
    const char *field = (const char *)a + k->off;
    char v[80];
    double pair[2];
    int n, r;

    switch (k->kind) {
    case K_U32:
        snprintf(v, sizeof(v), "%u", (unsigned)*(const uint32_t *)field);
        break;
    case K_U64:
        snprintf(v, sizeof(v), "%llu", (unsigned long long)*(const uint64_t *)field);
        break;
    case K_F64:
        r = strnum_format_double(*(const double *)field, v, sizeof(v));
        if (r < 0)
            return r;
        break;
    case K_PAIR:
        memcpy(pair, field, sizeof(pair));
        r = strnum_format_double(pair[0], v, sizeof(v));
        if (r < 0)
            return r;
        v[r] = ',';
        r = strnum_format_double(pair[1], v + r + 1, sizeof(v) - (size_t)r - 1);
        if (r < 0)
            return r;
        break;
    case K_CHOICE:
        snprintf(v, sizeof(v), "%s", k->words[*(const uint32_t *)field]);
        break;
    case K_BOOL:
        snprintf(v, sizeof(v), "%d", *(const bool *)field ? 1 : 0);
        break;
    case K_NAME:
    case K_LABEL:
    case K_FIELD:
        snprintf(v, sizeof(v), "%s", field);
        break;
    case K_SUBSET:
        ctl_subset_format((const struct ctl_subset *)field, v, sizeof(v));
        break;
    case K_AUGMENT: /* longer than v: written whole here */
    case K_MIX:
        n = snprintf(buf + *used, cap - *used, " %s=%s", k->name, field);
        if (n < 0 || (size_t)n >= cap - *used)
            return -ENOSPC;
        *used += (size_t)n;
        return 0;
    }
    n = snprintf(buf + *used, cap - *used, " %s=%s", k->name, v);
    if (n < 0 || (size_t)n >= cap - *used)
        return -ENOSPC;
    *used += (size_t)n;
    return 0;
}

/* True when field k of a and of b hold the same value. */
static bool same_field(const struct key *k, const struct ctl_attach *a,
                       const struct ctl_attach *b)
{
    const char *fa = (const char *)a + k->off, *fb = (const char *)b + k->off;

    switch (k->kind) {
    case K_U32:
    case K_CHOICE:
        return *(const uint32_t *)fa == *(const uint32_t *)fb;
    case K_U64:
        return *(const uint64_t *)fa == *(const uint64_t *)fb;
    case K_F64:
        return *(const double *)fa == *(const double *)fb;
    case K_PAIR:
        return ((const double *)fa)[0] == ((const double *)fb)[0] &&
               ((const double *)fa)[1] == ((const double *)fb)[1];
    case K_BOOL:
        return *(const bool *)fa == *(const bool *)fb;
    case K_NAME:
    case K_LABEL:
    case K_FIELD:
    case K_AUGMENT:
    case K_MIX:
        return strcmp(fa, fb) == 0;
    case K_SUBSET:
        return ctl_subset_same((const struct ctl_subset *)fa, (const struct ctl_subset *)fb);
    }
    return false;
}

int ctl_format_attach(const struct ctl_attach *a, char *buf, size_t cap, struct rf_err *err)
{
    struct ctl_attach def;
    size_t used;
    int r;

    if (ctl_attach_check(a, err) < 0)
        return -EINVAL;
    if (cap == 0)
        return -ENOSPC;
    ctl_attach_defaults(&def);
    r = snprintf(buf, cap, "ATTACH");
    if (r < 0 || (size_t)r >= cap)
        return -ENOSPC;
    used = (size_t)r;
    for (size_t i = 0; i < NKEYS; i++) {
        /* dataset always (but for a mixture's mix=); the rest when given
         * or not the default */
        if ((i > 0 || !a->dataset[0]) && !(a->given & (1u << i)) &&
            same_field(&keys[i], a, &def))
            continue;
        r = format_key(&keys[i], a, buf, cap, &used);
        if (r < 0)
            return r == -ERANGE ? rf_err_set(err, r, "%s: a denormal number cannot be sent",
                                              keys[i].name)
                                : r;
    }
    if (used + 2 > cap)
        return -ENOSPC;
    buf[used++] = '\n';
    buf[used] = '\0';
    return (int)used;
}

int ctl_attach_check_table(struct rf_err *err)
{
    struct ctl_attach def;

    if (strcmp(keys[0].name, "dataset") != 0 || keys[0].kind != K_NAME)
        return rf_err_set(err, -EINVAL, "ATTACH key table: row 0 must be dataset");
    for (size_t i = 0; i < NKEYS; i++) {
        const struct key *k = &keys[i];

        for (const char *c = k->name; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || *c == '_'))
                return rf_err_set(err, -EINVAL, "ATTACH key %s: names are [a-z_]", k->name);
        if ((k->kind == K_U32 || k->kind == K_U64) &&
            (k->umin > k->umax || (k->kind == K_U32 && k->umax > UINT32_MAX)))
            return rf_err_set(err, -EINVAL, "ATTACH key %s: bad integer range", k->name);
        if ((k->kind == K_F64 || k->kind == K_PAIR) &&
            !(isfinite(k->fmin) && isfinite(k->fmax) && k->fmin <= k->fmax))
            return rf_err_set(err, -EINVAL, "ATTACH key %s: bad number range", k->name);
        if (k->kind == K_CHOICE && (!k->words || k->nwords == 0))
            return rf_err_set(err, -EINVAL, "ATTACH key %s: no words", k->name);
        for (size_t j = 0; j < i; j++)
            if (strcmp(keys[j].name, k->name) == 0)
                return rf_err_set(err, -EINVAL, "ATTACH key %s appears twice", k->name);
    }
    if (sizeof(transforms) / sizeof(transforms[0]) != CTL_TRANSFORM_COUNT ||
        sizeof(layouts) / sizeof(layouts[0]) != CTL_LAYOUT_COUNT ||
        sizeof(shuffles) / sizeof(shuffles[0]) != SAMPLER_SHUFFLE_COUNT)
        return rf_err_set(err, -EINVAL, "ATTACH word lists do not match their enums");
    /* the defaults, with a dataset named, must be a valid request */
    ctl_attach_defaults(&def);
    memcpy(def.dataset, "x", 2);
    if (ctl_attach_check(&def, err) < 0) {
        rf_err_prefix(err, "ATTACH defaults");
        return -EINVAL;
    }
    return 0;
}
