/*
 * aug_spec.c - the augmentation spec's table and its pure parser and
 * formatter (aug_spec.h has the grammar and the table in prose; aug_ops[]
 * below is that table, the one place an op's keys, kinds, defaults and
 * ranges are written).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "aug_spec.h"
#include "ctl_int.h"
#include "strnum.h"

enum kind {
    AK_PROB,   /* one number in lo..hi (0..1) */
    AK_NUM,    /* one number in lo..hi */
    AK_INT,    /* one integer in lo..hi */
    AK_BOOL,   /* 0 or 1 */
    AK_WORD,   /* one word of words[] */
    AK_JITTER, /* x in lo..hi -> [max(0,1-x), 1+x], or lo/hi; [1,1] is none */
    AK_HUE,    /* x in 0..hi -> [-x, x], or lo/hi in lo..hi; [0,0] is none */
    AK_SYM,    /* x in 0..hi -> [-x, x], or lo/hi in lo..hi */
    AK_RANGE,  /* lo/hi, each in lo..hi (lo open when lo_open), lo <= hi */
    AK_PAIR,   /* a/b, each in lo..hi */
    AK_SIGMA,  /* s -> [s, s], or lo/hi; each in lo..hi, lo open */
    AK_SIZE,   /* n -> [n, n], or h/w; integers in lo..hi */
    AK_KSIZE,  /* as AK_SIZE, odd */
    AK_PAD,    /* n | lr/tb | l/t/r/b -> [l, t, r, b]; integers in lo..hi */
    AK_FILL,   /* v -> [v, v, v], or r/g/b; each in lo..hi */
    AK_SHEAR,  /* x -> [-x, x, 0, 0], a/b -> [a, b, 0, 0], or a/b/c/d */
    AK_EVALUE, /* random (word 0), or as AK_FILL */
    AK_NAME,   /* 1..hi of [A-Za-z0-9_-], first a letter: into aug_spec.text */
    AK_TEXT,   /* 0..hi printable bytes, no blank: into aug_spec.text */
};

struct key_def {
    const char *name;
    enum kind kind;
    double lo, hi;
    bool lo_open;
    bool required;
    uint32_t ndef;          /* the default's numbers (0: none or a word) */
    double def[4];
    int32_t defword;        /* the default word, -1 none */
    const char *const *words;
    unsigned nwords;
};

struct op_def {
    const char *name;       /* torchvision's class name */
    const char *stat;       /* STATS: augment.<stat>_ns */
    bool geometric;         /* may move pixels (its boxes and masks follow: aug_run.h) */
    unsigned nkeys;
    struct key_def keys[AUG_PARAMS_MAX];
};

static const char *const interps[] = {"nearest", "bilinear"};
static const char *const pad_modes[] = {"constant", "edge", "reflect", "symmetric"};
static const char *const policies[] = {"imagenet"};
static const char *const random_word[] = {"random"};

#define NW(w) w, (unsigned)(sizeof(w) / sizeof(w[0]))
#define PROB(dflt) {"p", AK_PROB, 0, 1, false, false, 1, {dflt}, -1, NULL, 0}
#define INTERP {"interpolation", AK_WORD, 0, 0, false, false, 0, {0}, AUG_W_NEAREST, NW(interps)}
#define FILL(n) {"fill", AK_FILL, 0, 255, false, false, n, {0, 0, 0}, -1, NULL, 0}
#define CENTER {"center", AK_PAIR, -1e6, 1e6, false, false, 0, {0}, -1, NULL, 0}
#define JIT(nm) {nm, AK_JITTER, 0, 100, false, false, 0, {0}, -1, NULL, 0}
#define DEGREES {"degrees", AK_SYM, -360, 360, false, true, 0, {0}, -1, NULL, 0}
#define BINS {"num_magnitude_bins", AK_INT, 2, 1000, false, false, 1, {31}, -1, NULL, 0}

static const struct op_def aug_ops[AUG_OP_COUNT] = {
    [AUG_COLOR_JITTER] = {"ColorJitter", "colorjitter", false, 4, {
        JIT("brightness"), JIT("contrast"), JIT("saturation"),
        {"hue", AK_HUE, -0.5, 0.5, false, false, 0, {0}, -1, NULL, 0}}},
    [AUG_GRAYSCALE] = {"RandomGrayscale", "grayscale", false, 1, {PROB(0.1)}},
    [AUG_GAUSSIAN_BLUR] = {"GaussianBlur", "gaussianblur", false, 2, {
        {"kernel_size", AK_KSIZE, 1, 255, false, true, 0, {0}, -1, NULL, 0},
        {"sigma", AK_SIGMA, 0, 100, true, false, 2, {0.1, 2.0}, -1, NULL, 0}}},
    [AUG_POSTERIZE] = {"RandomPosterize", "posterize", false, 2, {
        {"bits", AK_INT, 0, 8, false, true, 0, {0}, -1, NULL, 0}, PROB(0.5)}},
    [AUG_SOLARIZE] = {"RandomSolarize", "solarize", false, 2, {
        {"threshold", AK_NUM, 0, 255, false, true, 0, {0}, -1, NULL, 0}, PROB(0.5)}},
    [AUG_SHARPNESS] = {"RandomAdjustSharpness", "sharpness", false, 2, {
        {"sharpness_factor", AK_NUM, 0, 100, false, true, 0, {0}, -1, NULL, 0}, PROB(0.5)}},
    [AUG_AUTOCONTRAST] = {"RandomAutocontrast", "autocontrast", false, 1, {PROB(0.5)}},
    [AUG_EQUALIZE] = {"RandomEqualize", "equalize", false, 1, {PROB(0.5)}},
    [AUG_INVERT] = {"RandomInvert", "invert", false, 1, {PROB(0.5)}},
    [AUG_AFFINE] = {"RandomAffine", "affine", true, 7, {
        DEGREES,
        {"translate", AK_PAIR, 0, 1, false, false, 0, {0}, -1, NULL, 0},
        {"scale", AK_RANGE, 0, 10, true, false, 0, {0}, -1, NULL, 0},
        {"shear", AK_SHEAR, -180, 180, false, false, 0, {0}, -1, NULL, 0},
        INTERP, FILL(3), CENTER}},
    [AUG_ROTATION] = {"RandomRotation", "rotation", true, 4, {DEGREES, INTERP, CENTER, FILL(3)}},
    [AUG_HFLIP] = {"RandomHorizontalFlip", "hflip", true, 1, {PROB(0.5)}},
    [AUG_VFLIP] = {"RandomVerticalFlip", "vflip", true, 1, {PROB(0.5)}},
    [AUG_CROP] = {"RandomCrop", "crop", true, 5, {
        {"size", AK_SIZE, 1, 4096, false, true, 0, {0}, -1, NULL, 0},
        {"padding", AK_PAD, 0, 1024, false, false, 0, {0}, -1, NULL, 0},
        {"pad_if_needed", AK_BOOL, 0, 1, false, false, 1, {0}, -1, NULL, 0},
        FILL(3),
        {"padding_mode", AK_WORD, 0, 0, false, false, 0, {0}, AUG_W_PAD_CONSTANT, NW(pad_modes)}}},
    [AUG_TRIVIAL] = {"TrivialAugmentWide", "trivialaugmentwide", true, 3, {BINS, INTERP, FILL(0)}},
    [AUG_RANDAUGMENT] = {"RandAugment", "randaugment", true, 5, {
        {"num_ops", AK_INT, 0, 16, false, false, 1, {2}, -1, NULL, 0},
        {"magnitude", AK_INT, 0, 999, false, false, 1, {9}, -1, NULL, 0},
        BINS, INTERP, FILL(0)}},
    [AUG_AUTOAUGMENT] = {"AutoAugment", "autoaugment", true, 3, {
        {"policy", AK_WORD, 0, 0, false, false, 0, {0}, AUG_W_IMAGENET, NW(policies)},
        INTERP, FILL(0)}},
    [AUG_ERASING] = {"RandomErasing", "erasing", false, 4, {
        PROB(0.5),
        {"scale", AK_RANGE, 0, 1, true, false, 2, {0.02, 0.33}, -1, NULL, 0},
        {"ratio", AK_RANGE, 0, 100, true, false, 2, {0.3, 3.3}, -1, NULL, 0},
        {"value", AK_EVALUE, 0, 255, false, false, 3, {0, 0, 0}, -1, NW(random_word)}}},
    /* a plugin may move pixels: geometric, so boxes and masks refuse it */
    [AUG_PLUGIN] = {"Plugin", "plugin", true, 2, {
        {"name", AK_NAME, 1, AUG_NAME_MAX, false, true, 0, {0}, -1, NULL, 0},
        {"params", AK_TEXT, 0, AUG_PARAM_TEXT_MAX, false, false, 0, {0}, -1, NULL, 0}}},
};

const char *aug_param_text(const struct aug_spec *s, const struct aug_param *p)
{
    double off = p->v[0], len = p->v[1];

    if (p->n == 0)
        return "";
    if (p->n != 2 || !(off >= 0) || !(len >= 0) || off + len >= AUG_TEXT_MAX ||
        off + len >= s->ntext || off != (double)(size_t)off || len != (double)(size_t)len ||
        s->text[(size_t)(off + len)] != '\0')
        return NULL;
    return s->text + (size_t)off;
}

/* Whether s[0..len) is a text value of kind k (AK_NAME or AK_TEXT). */
static bool text_ok(const struct key_def *k, const char *s, size_t len)
{
    if (len < (size_t)k->lo || len > (size_t)k->hi)
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9');

        if (k->kind == AK_NAME ? !(alnum || ch == '_' || ch == '-') || (i == 0 && !(alnum && ch > '9'))
                               : ch <= ' ' || ch > '~' || ch == ',' || ch == ':')
            return false;
    }
    return true;
}

const char *aug_op_name(uint32_t id)
{
    return id < AUG_OP_COUNT ? aug_ops[id].name : NULL;
}

const char *aug_op_stat_name(uint32_t id)
{
    return id < AUG_OP_COUNT ? aug_ops[id].stat : NULL;
}

bool aug_op_geometric(uint32_t id)
{
    return id < AUG_OP_COUNT && aug_ops[id].geometric;
}

/* "12.5" for v; "?" when it cannot be written. */
static const char *num(double v, char *buf, size_t cap)
{
    if (strnum_format_double(v, buf, cap) < 0)
        snprintf(buf, cap, "?");
    return buf;
}

/* What key k accepts, in words, into buf. */
static void describe(const struct key_def *k, char *buf, size_t cap)
{
    char lo[32], hi[32];
    const char *l = num(k->lo, lo, sizeof(lo)), *h = num(k->hi, hi, sizeof(hi));
    const char *lt = k->lo_open ? "<" : "<=";

    switch (k->kind) {
    case AK_PROB:
    case AK_NUM:
        snprintf(buf, cap, "a number in %s%s..%s", l, k->lo_open ? " (excluded)" : "", h);
        return;
    case AK_INT:
        snprintf(buf, cap, "an integer in %s..%s", l, h);
        return;
    case AK_BOOL:
        snprintf(buf, cap, "0 or 1");
        return;
    case AK_WORD: {
        size_t used = (size_t)snprintf(buf, cap, "one of ");

        for (unsigned i = 0; i < k->nwords && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? "|" : "", k->words[i]);
        return;
    }
    case AK_JITTER:
        snprintf(buf, cap, "a number x in 0..%s (the factor drawn in max(0,1-x)..1+x) or lo/hi "
                 "with 0 <= lo <= hi <= %s", h, h);
        return;
    case AK_HUE:
    case AK_SYM:
        snprintf(buf, cap, "a number x in 0..%s (drawn in -x..x) or lo/hi with %s <= lo <= hi "
                 "<= %s", h, l, h);
        return;
    case AK_RANGE:
        snprintf(buf, cap, "lo/hi with %s %s lo <= hi <= %s", l, lt, h);
        return;
    case AK_PAIR:
        snprintf(buf, cap, "two numbers a/b, each in %s..%s", l, h);
        return;
    case AK_SIGMA:
        snprintf(buf, cap, "a number s or lo/hi with %s %s lo <= hi <= %s", l, lt, h);
        return;
    case AK_SIZE:
        snprintf(buf, cap, "an integer n or h/w, each in %s..%s", l, h);
        return;
    case AK_KSIZE:
        snprintf(buf, cap, "an odd integer n or kx/ky, each odd in %s..%s", l, h);
        return;
    case AK_PAD:
        snprintf(buf, cap, "integers n, lr/tb or l/t/r/b, each in %s..%s", l, h);
        return;
    case AK_FILL:
        snprintf(buf, cap, "v or r/g/b, each in %s..%s", l, h);
        return;
    case AK_SHEAR:
        snprintf(buf, cap, "x in 0..%s (x shear drawn in -x..x), xlo/xhi or xlo/xhi/ylo/yhi, "
                 "lo <= hi, each in %s..%s", h, l, h);
        return;
    case AK_EVALUE:
        snprintf(buf, cap, "random, v or r/g/b, each in %s..%s", l, h);
        return;
    case AK_NAME:
        snprintf(buf, cap, "a name of %s to %s characters of A-Z a-z 0-9 _ -, first a letter",
                 l, h);
        return;
    case AK_TEXT:
        snprintf(buf, cap, "at most %s bytes of printable ASCII without blanks, ',' or ':'", h);
        return;
    }
    snprintf(buf, cap, "?");
}

int aug_op_key_doc(uint32_t id, unsigned k, const char **name, char *def, size_t def_cap,
                   char *valid, size_t valid_cap)
{
    const struct key_def *d;
    bool same = true;
    size_t used = 0;

    if (id >= AUG_OP_COUNT || k >= aug_ops[id].nkeys)
        return -ENOENT;
    d = &aug_ops[id].keys[k];
    *name = d->name;
    describe(d, valid, valid_cap);
    for (uint32_t i = 1; i < d->ndef; i++)
        same = same && d->def[i] == d->def[0];
    if (d->required) {
        snprintf(def, def_cap, "required");
    } else if (d->defword >= 0 && (unsigned)d->defword < d->nwords) {
        snprintf(def, def_cap, "%s", d->words[d->defword]);
    } else if (d->ndef == 0) {
        snprintf(def, def_cap, "none");
    } else {
        uint32_t n = (d->kind == AK_FILL || d->kind == AK_EVALUE) && same ? 1 : d->ndef;

        def[0] = '\0';
        for (uint32_t i = 0; i < n && used < def_cap; i++) {
            char b[32];
            int w = snprintf(def + used, def_cap - used, "%s%s", i ? "/" : "",
                             num(d->def[i], b, sizeof(b)));

            if (w < 0)
                break;
            used += (size_t)w;
        }
    }
    return 0;
}

static bool in_range(const struct key_def *k, double v)
{
    if (!isfinite(v) || v > k->hi)
        return false;
    return k->lo_open ? v > k->lo : v >= k->lo;
}

/* v finite and within +-2^53 (every range in the table is) */
static bool integral(double v)
{
    return v == (double)(long long)v;
}

/* Parses value[0..len) for key k into *out; false when it is not k's form. */
static bool parse_value(const struct key_def *k, const char *value, size_t len,
                        struct aug_param *out)
{
    double x[4];
    unsigned n = 0;
    size_t at = 0;

    out->n = 0;
    out->word = -1;
    memset(out->v, 0, sizeof(out->v));
    if (k->words) { /* a word alone */
        for (unsigned i = 0; i < k->nwords; i++) {
            if (ctl_ieq(value, len, k->words[i])) {
                out->word = (int32_t)i;
                return true;
            }
        }
        if (k->kind == AK_WORD)
            return false;
    }
    for (;;) {
        const char *slash = memchr(value + at, '/', len - at);
        size_t end = slash ? (size_t)(slash - value) : len;

        if (n == 4 || strnum_double(value + at, end - at, &x[n]) < 0)
            return false;
        if (x[n] == 0)
            x[n] = 0; /* -0 is 0: one canonical form */
        n++;
        if (!slash)
            break;
        at = end + 1;
    }
    switch (k->kind) {
    case AK_PROB:
    case AK_NUM:
    case AK_INT:
    case AK_BOOL:
        if (n != 1 || !in_range(k, x[0]) || (k->kind != AK_PROB && k->kind != AK_NUM &&
                                             !integral(x[0])))
            return false;
        out->v[0] = x[0];
        out->n = 1;
        return true;
    case AK_WORD:
    case AK_NAME:
    case AK_TEXT:
        return false;
    case AK_JITTER:
        if (n == 1) {
            if (!(x[0] >= 0 && x[0] <= k->hi))
                return false;
            x[1] = 1 + x[0];
            x[0] = x[0] < 1 ? 1 - x[0] : 0;
        } else if (n != 2 || !in_range(k, x[0]) || !in_range(k, x[1]) || x[0] > x[1]) {
            return false;
        }
        if (x[0] != 1 || x[1] != 1) {
            out->v[0] = x[0], out->v[1] = x[1];
            out->n = 2;
        }
        return true;
    case AK_HUE:
    case AK_SYM:
        if (n == 1) {
            if (!(x[0] >= 0 && x[0] <= k->hi))
                return false;
            x[1] = x[0];
            x[0] = -x[0];
        } else if (n != 2 || !in_range(k, x[0]) || !in_range(k, x[1]) || x[0] > x[1]) {
            return false;
        }
        out->v[0] = x[0] == 0 ? 0 : x[0], out->v[1] = x[1]; /* -x of 0 is 0 */
        out->n = 2;
        if (k->kind == AK_HUE && x[0] == 0 && x[1] == 0)
            out->n = 0, out->v[0] = out->v[1] = 0;
        return true;
    case AK_RANGE:
    case AK_PAIR:
    case AK_SIGMA:
        if (k->kind == AK_SIGMA && n == 1)
            x[n++] = x[0];
        if (n != 2 || !in_range(k, x[0]) || !in_range(k, x[1]) ||
            (k->kind != AK_PAIR && x[0] > x[1]))
            return false;
        out->v[0] = x[0], out->v[1] = x[1];
        out->n = 2;
        return true;
    case AK_SIZE:
    case AK_KSIZE:
        if (n == 1)
            x[n++] = x[0];
        if (n != 2)
            return false;
        for (unsigned i = 0; i < 2; i++)
            if (!in_range(k, x[i]) || !integral(x[i]) ||
                (k->kind == AK_KSIZE && (long long)x[i] % 2 != 1))
                return false;
        out->v[0] = x[0], out->v[1] = x[1];
        out->n = 2;
        return true;
    case AK_PAD:
        if (n == 3)
            return false;
        for (unsigned i = 0; i < n; i++)
            if (!in_range(k, x[i]) || !integral(x[i]))
                return false;
        for (unsigned i = 0; i < 4; i++)
            out->v[i] = n == 1 ? x[0] : n == 2 ? x[i % 2] : x[i];
        out->n = 4;
        return true;
    case AK_FILL:
    case AK_EVALUE:
        if (n != 1 && n != 3)
            return false;
        for (unsigned i = 0; i < n; i++)
            if (!in_range(k, x[i]))
                return false;
        for (unsigned i = 0; i < 3; i++)
            out->v[i] = x[n == 1 ? 0 : i];
        out->n = 3;
        return true;
    case AK_SHEAR:
        if (n == 3)
            return false;
        if (n == 1) {
            if (!(x[0] >= 0 && x[0] <= k->hi))
                return false;
            x[1] = x[0], x[0] = -x[0], x[2] = x[3] = 0;
        } else if (n == 2) {
            x[2] = x[3] = 0;
        }
        for (unsigned i = 0; i < 4; i++)
            if (!in_range(k, x[i]))
                return false;
        if (x[0] > x[1] || x[2] > x[3])
            return false;
        for (unsigned i = 0; i < 4; i++)
            out->v[i] = x[i] == 0 ? 0 : x[i];
        out->n = 4;
        return true;
    }
    return false;
}

static void set_default(const struct key_def *k, struct aug_param *p)
{
    memset(p, 0, sizeof(*p));
    p->n = k->ndef;
    memcpy(p->v, k->def, sizeof(p->v));
    p->word = k->defword;
}

/* "ColorJitter: keys brightness contrast saturation hue" into buf. */
static void list_keys(const struct op_def *d, char *buf, size_t cap)
{
    size_t used = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < d->nkeys && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? " " : "", d->keys[i].name);
}

static void list_ops(char *buf, size_t cap)
{
    size_t used = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < AUG_OP_COUNT && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? " " : "", aug_ops[i].name);
}

/* Quotes s[0..len) for a message, cut at 40 bytes, non-printables as '?'. */
static const char *quote(const char *s, size_t len, char *buf, size_t cap)
{
    size_t n = len > 40 ? 40 : len, o = 0;

    buf[o++] = '"';
    for (size_t i = 0; i < n && o + 5 < cap; i++)
        buf[o++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (n < len && o + 5 < cap)
        buf[o++] = '.', buf[o++] = '.', buf[o++] = '.';
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

/* Parses one op's text op[0..len) (NAME:key=value...) into *o. */
static int parse_op(const char *text, size_t len, unsigned index, struct aug_op *o,
                    struct aug_spec *spec, struct rf_err *err)
{
    const char *colon = memchr(text, ':', len);
    size_t nlen = colon ? (size_t)(colon - text) : len, at;
    const struct op_def *d = NULL;
    char q[64], list[512], what[200];
    uint32_t given = 0;

    for (unsigned i = 0; i < AUG_OP_COUNT; i++)
        if (ctl_ieq(text, nlen, aug_ops[i].name))
            d = &aug_ops[i], o->id = i;
    if (!d) {
        list_ops(list, sizeof(list));
        if (nlen == 0)
            return rf_err_set(err, -EINVAL, "augment: op %u has no name; ops: %s", index + 1,
                              list);
        return rf_err_set(err, -EINVAL, "augment: unknown op %s; ops: %s",
                          quote(text, nlen, q, sizeof(q)), list);
    }
    for (unsigned k = 0; k < d->nkeys; k++)
        set_default(&d->keys[k], &o->a[k]);
    at = nlen;
    while (at < len) {
        const char *p = text + at + 1, *end, *eq;
        size_t plen, klen;
        unsigned k;

        end = memchr(p, ':', len - at - 1);
        plen = end ? (size_t)(end - p) : len - at - 1;
        at += 1 + plen;
        eq = memchr(p, '=', plen);
        if (!eq)
            return rf_err_set(err, -EINVAL, "augment: %s: expected key=value, got %s", d->name,
                              quote(p, plen, q, sizeof(q)));
        klen = (size_t)(eq - p);
        for (k = 0; k < d->nkeys; k++)
            if (ctl_ieq(p, klen, d->keys[k].name))
                break;
        if (k == d->nkeys) {
            list_keys(d, list, sizeof(list));
            return rf_err_set(err, -EINVAL, "augment: %s has no parameter %s; its parameters: "
                              "%s", d->name, quote(p, klen, q, sizeof(q)), list);
        }
        if (given & (1u << k))
            return rf_err_set(err, -EINVAL, "augment: %s: %s given twice", d->name,
                              d->keys[k].name);
        given |= 1u << k;
        if (d->keys[k].kind == AK_NAME || d->keys[k].kind == AK_TEXT) {
            size_t vlen = plen - klen - 1;

            if (!text_ok(&d->keys[k], eq + 1, vlen)) {
                describe(&d->keys[k], what, sizeof(what));
                return rf_err_set(err, -EINVAL, "augment: %s: bad value %s for %s: %s takes "
                                  "%s", d->name, quote(eq + 1, vlen, q, sizeof(q)),
                                  d->keys[k].name, d->keys[k].name, what);
            }
            if (vlen == 0) /* "" is none: one canonical form */
                continue;
            if (spec->ntext + vlen + 1 > AUG_TEXT_MAX) /* cannot happen from AUG_SPEC_MAX */
                return rf_err_set(err, -E2BIG, "augment: more than %d bytes of text values",
                                  AUG_TEXT_MAX);
            memcpy(spec->text + spec->ntext, eq + 1, vlen);
            o->a[k] = (struct aug_param){{spec->ntext, (double)vlen, 0, 0}, 2, -1};
            spec->ntext += (uint32_t)vlen + 1;
            continue;
        }
        if (!parse_value(&d->keys[k], eq + 1, plen - klen - 1, &o->a[k])) {
            describe(&d->keys[k], what, sizeof(what));
            return rf_err_set(err, -EINVAL, "augment: %s: bad value %s for %s: %s takes %s",
                              d->name, quote(eq + 1, plen - klen - 1, q, sizeof(q)),
                              d->keys[k].name, d->keys[k].name, what);
        }
    }
    for (unsigned k = 0; k < d->nkeys; k++)
        if (d->keys[k].required && !(given & (1u << k))) {
            describe(&d->keys[k], what, sizeof(what));
            return rf_err_set(err, -EINVAL, "augment: %s needs %s=, %s", d->name,
                              d->keys[k].name, what);
        }
    if (o->id == AUG_RANDAUGMENT &&
        o->a[AUG_RA_MAGNITUDE].v[0] >= o->a[AUG_RA_BINS].v[0])
        return rf_err_set(err, -EINVAL, "augment: RandAugment: magnitude=%g must be below "
                          "num_magnitude_bins=%g", o->a[AUG_RA_MAGNITUDE].v[0],
                          o->a[AUG_RA_BINS].v[0]);
    return 0;
}

/* Lays s's text values out again in op and key order, so a spec's text
 * does not depend on the order its keys were written in (memcmp equal). */
static void text_canonical(struct aug_spec *s)
{
    char old[AUG_TEXT_MAX];
    uint32_t used = 0;

    memcpy(old, s->text, sizeof(old));
    memset(s->text, 0, sizeof(s->text));
    for (uint32_t i = 0; i < s->n; i++) {
        const struct op_def *d = &aug_ops[s->op[i].id];

        for (unsigned k = 0; k < d->nkeys; k++) {
            struct aug_param *p = &s->op[i].a[k];
            size_t off, len;

            if ((d->keys[k].kind != AK_NAME && d->keys[k].kind != AK_TEXT) || p->n == 0)
                continue;
            off = (size_t)p->v[0], len = (size_t)p->v[1];
            memcpy(s->text + used, old + off, len);
            p->v[0] = used;
            used += (uint32_t)len + 1;
        }
    }
    s->ntext = used;
}

int aug_spec_parse(const char *text, size_t len, struct aug_spec *out, struct rf_err *err)
{
    size_t at = 0;

    memset(out, 0, sizeof(*out));
    if (len > AUG_SPEC_MAX)
        return rf_err_set(err, -E2BIG, "augment: the spec is %zu bytes, at most %d", len,
                          AUG_SPEC_MAX);
    if (len == 0)
        return rf_err_set(err, -EINVAL, "augment: empty spec: name at least one op, or leave "
                          "augment out");
    for (;;) {
        const char *comma = memchr(text + at, ',', len - at);
        size_t end = comma ? (size_t)(comma - text) : len;
        int r;

        if (out->n == AUG_OPS_MAX) {
            memset(out, 0, sizeof(*out));
            return rf_err_set(err, -E2BIG, "augment: more than %d ops", AUG_OPS_MAX);
        }
        r = parse_op(text + at, end - at, out->n, &out->op[out->n], out, err);
        if (r < 0) {
            memset(out, 0, sizeof(*out));
            return r;
        }
        out->n++;
        if (!comma)
            break;
        at = end + 1;
    }
    for (uint32_t i = 0; i + 1 < out->n; i++) {
        if (out->op[i].id == AUG_ERASING) {
            memset(out, 0, sizeof(*out));
            return rf_err_set(err, -EINVAL, "augment: RandomErasing must be the last op (it is "
                              "op %u of %u): it erases the finished image", i + 1, out->n);
        }
    }
    text_canonical(out);
    return 0;
}

static bool is_default(const struct key_def *k, const struct aug_param *p)
{
    struct aug_param d;

    set_default(k, &d);
    return memcmp(&d, p, sizeof(d)) == 0;
}

int aug_spec_format(const struct aug_spec *s, char *buf, size_t cap)
{
    size_t used = 0;

    if (cap == 0)
        return -ENOSPC;
    buf[0] = '\0';
    if (s->n > AUG_OPS_MAX)
        return -EINVAL;
    for (uint32_t i = 0; i < s->n; i++) {
        const struct aug_op *o = &s->op[i];
        const struct op_def *d;
        int n;

        if (o->id >= AUG_OP_COUNT)
            return -EINVAL;
        d = &aug_ops[o->id];
        n = snprintf(buf + used, cap - used, "%s%s", i ? "," : "", d->name);
        if (n < 0 || (size_t)n >= cap - used)
            return -ENOSPC;
        used += (size_t)n;
        for (unsigned k = 0; k < d->nkeys; k++) {
            const struct aug_param *p = &o->a[k];

            if (is_default(&d->keys[k], p))
                continue;
            n = snprintf(buf + used, cap - used, ":%s=", d->keys[k].name);
            if (n < 0 || (size_t)n >= cap - used)
                return -ENOSPC;
            used += (size_t)n;
            if (d->keys[k].kind == AK_NAME || d->keys[k].kind == AK_TEXT) {
                const char *t = aug_param_text(s, p);

                if (!t)
                    return -EINVAL;
                n = snprintf(buf + used, cap - used, "%s", t);
                if (n < 0 || (size_t)n >= cap - used)
                    return -ENOSPC;
                used += (size_t)n;
                continue;
            }
            if (p->word >= 0) {
                if (!d->keys[k].words || (unsigned)p->word >= d->keys[k].nwords)
                    return -EINVAL;
                n = snprintf(buf + used, cap - used, "%s", d->keys[k].words[p->word]);
                if (n < 0 || (size_t)n >= cap - used)
                    return -ENOSPC;
                used += (size_t)n;
                continue;
            }
            if (p->n == 0 || p->n > 4) /* a none that is not the default: never parsed */
                return -EINVAL;
            for (uint32_t j = 0; j < p->n; j++) {
                if (j) {
                    if (used + 1 >= cap)
                        return -ENOSPC;
                    buf[used++] = '/';
                    buf[used] = '\0';
                }
                n = strnum_format_double(p->v[j], buf + used, cap - used);
                if (n < 0)
                    return n == -ENOSPC ? -ENOSPC : -EINVAL;
                used += (size_t)n;
            }
        }
    }
    return (int)used;
}

int aug_table_check(struct rf_err *err)
{
    for (unsigned i = 0; i < AUG_OP_COUNT; i++) {
        const struct op_def *d = &aug_ops[i];

        if (!d->name || !d->stat || d->nkeys > AUG_PARAMS_MAX)
            return rf_err_set(err, -EINVAL, "augment table: op %u incomplete", i);
        for (unsigned j = 0; j < i; j++)
            if (ctl_ieq(d->name, strlen(d->name), aug_ops[j].name) ||
                strcmp(d->stat, aug_ops[j].stat) == 0)
                return rf_err_set(err, -EINVAL, "augment table: %s twice", d->name);
        for (unsigned k = 0; k < d->nkeys; k++) {
            const struct key_def *kd = &d->keys[k];

            if (!kd->name || kd->lo > kd->hi || (kd->kind == AK_WORD && !kd->words))
                return rf_err_set(err, -EINVAL, "augment table: %s key %u incomplete", d->name,
                                  k);
            if (kd->defword >= 0 && (unsigned)kd->defword >= kd->nwords)
                return rf_err_set(err, -EINVAL, "augment table: %s %s: default word", d->name,
                                  kd->name);
            for (uint32_t j = 0; j < kd->ndef; j++)
                if (kd->kind != AK_SHEAR && !in_range(kd, kd->def[j]))
                    return rf_err_set(err, -EINVAL, "augment table: %s %s: default out of "
                                      "range", d->name, kd->name);
            for (unsigned j = 0; j < k; j++)
                if (strcmp(d->keys[j].name, kd->name) == 0)
                    return rf_err_set(err, -EINVAL, "augment table: %s %s twice", d->name,
                                      kd->name);
        }
    }
    return 0;
}
