/*
 * wds.c - WebDataset's naming, grouping and field-mapping rules (wds.h):
 * pure functions of their inputs, shared by ringfeed-pack webdataset and
 * its fuzz target (tests/fuzz/fuzz_wds.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wds.h"

int wds_name_split(const char *path, size_t n, struct wds_name *out)
{
    size_t base = 0, dot;

    for (size_t i = 0; i < n; i++)
        if (path[i] == '/')
            base = i + 1;
    for (dot = base; dot < n && path[dot] != '.'; dot++)
        ;
    /* WebDataset's rule: a key is a folder and a basename part with no dot */
    if (dot == n || dot == base)
        return -ENOENT;
    if (n - dot - 1 > WDS_EXT_MAX)
        return -ENAMETOOLONG;
    out->key_len = dot;
    out->ext_off = dot + 1;
    out->ext_len = n - dot - 1;
    return 0;
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c + ('a' - 'A')) : c;
}

/* The last part's kind: one row a suffix. */
static const struct {
    const char *suffix;
    enum wds_kind kind;
} ext_kinds[] = {
    {"jpg", WDS_IMAGE}, {"jpeg", WDS_IMAGE}, {"png", WDS_IMAGE}, {"webp", WDS_IMAGE},
    {"ppm", WDS_IMAGE}, {"pgm", WDS_IMAGE}, {"bmp", WDS_IMAGE}, {"tif", WDS_IMAGE},
    {"tiff", WDS_IMAGE},
    {"cls", WDS_INT}, {"cls2", WDS_INT}, {"index", WDS_INT}, {"label", WDS_INT},
    {"txt", WDS_TEXT}, {"json", WDS_JSON}, {"npy", WDS_NPY},
};

static const char *const kind_names[WDS_KIND_COUNT] = {
    [WDS_IMAGE] = "image", [WDS_INT] = "integer", [WDS_TEXT] = "text",
    [WDS_JSON] = "json", [WDS_NPY] = "npy", [WDS_BYTES] = "bytes",
};

enum wds_kind wds_ext_kind(const char *ext, size_t ext_len)
{
    size_t from = 0;

    for (size_t i = 0; i < ext_len; i++)
        if (ext[i] == '.')
            from = i + 1;
    for (size_t k = 0; k < sizeof(ext_kinds) / sizeof(ext_kinds[0]); k++) {
        const char *s = ext_kinds[k].suffix;
        size_t len = strlen(s), i;

        if (len != ext_len - from)
            continue;
        for (i = 0; i < len && lower(ext[from + i]) == s[i]; i++)
            ;
        if (i == len)
            return ext_kinds[k].kind;
    }
    return WDS_BYTES;
}

const char *wds_kind_name(enum wds_kind k)
{
    return (unsigned)k < WDS_KIND_COUNT ? kind_names[k] : NULL;
}

int wds_field_name(const char *ext, size_t ext_len, char *out)
{
    size_t at = 0;

    if (ext_len == 0)
        return -EINVAL;
    if (ext[0] >= '0' && ext[0] <= '9')
        out[at++] = '_';
    if (ext_len + at > SCHEMA_NAME_MAX)
        return -ENAMETOOLONG;
    for (size_t i = 0; i < ext_len; i++) {
        char c = lower(ext[i]);

        out[at++] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '_';
    }
    out[at] = '\0';
    return 0;
}

static const char *const fault_texts[] = {
    [WDS_OK] = "no fault",
    [WDS_DUP_EXT] = "its extension comes twice in the sample",
    [WDS_KEY_AGAIN] = "its key came earlier in this tar, with other keys between "
                      "(a sample's members must be consecutive)",
    [WDS_TOO_MANY] = "the sample has more members than ringfeed takes (64)",
};

const char *wds_fault_text(enum wds_fault f)
{
    return (unsigned)f < sizeof(fault_texts) / sizeof(fault_texts[0]) ? fault_texts[f] : NULL;
}

void wds_group_init(struct wds_group *g)
{
    memset(g, 0, sizeof(*g));
}

void wds_group_reset(struct wds_group *g)
{
    for (size_t i = 0; i < g->slots; i++)
        free(g->keys[i]);
    if (g->slots) {
        memset(g->hash, 0, g->slots * sizeof(*g->hash));
        memset(g->keys, 0, g->slots * sizeof(*g->keys));
    }
    g->nkeys = 0;
    g->open = 0;
    g->members = 0;
    g->fault = WDS_OK;
    g->key_len = 0;
}

void wds_group_fini(struct wds_group *g)
{
    if (!g)
        return;
    wds_group_reset(g);
    free(g->hash);
    free(g->keys);
    free(g->key);
    memset(g, 0, sizeof(*g));
}

/* FNV-1a, never 0 (0 marks an empty slot). */
static uint64_t key_hash(const char *k, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)k[i]) * 0x100000001b3ull;
    return h ? h : 1;
}

/* The slot of key k (its own, or the empty one it would take). */
static size_t key_slot(const struct wds_group *g, uint64_t h, const char *k, size_t n)
{
    size_t i = (size_t)h & (g->slots - 1);

    while (g->hash[i] && !(g->hash[i] == h && strlen(g->keys[i]) == n &&
                           memcmp(g->keys[i], k, n) == 0))
        i = (i + 1) & (g->slots - 1);
    return i;
}

static int key_grow(struct wds_group *g)
{
    size_t slots = g->slots ? g->slots * 2 : 64;
    uint64_t *hash = calloc(slots, sizeof(*hash));
    char **keys = calloc(slots, sizeof(*keys));
    struct wds_group old = *g;

    if (!hash || !keys) {
        free(hash);
        free(keys);
        return -ENOMEM;
    }
    g->hash = hash;
    g->keys = keys;
    g->slots = slots;
    for (size_t i = 0; i < old.slots; i++)
        if (old.hash[i]) {
            size_t j = key_slot(g, old.hash[i], old.keys[i], strlen(old.keys[i]));

            g->hash[j] = old.hash[i];
            g->keys[j] = old.keys[i];
        }
    free(old.hash);
    free(old.keys);
    return 0;
}

/* Records the open sample's key as seen.  Keys holding a NUL byte are
 * kept up to it (a tar path has none). */
static int key_remember(struct wds_group *g)
{
    size_t n = strnlen(g->key, g->key_len), i;
    uint64_t h = key_hash(g->key, n);

    if ((g->nkeys + 1) * 2 > g->slots && key_grow(g) < 0)
        return -ENOMEM;
    i = key_slot(g, h, g->key, n);
    if (g->hash[i])
        return 0;
    if (!(g->keys[i] = strndup(g->key, n)))
        return -ENOMEM;
    g->hash[i] = h;
    g->nkeys++;
    return 0;
}

static int key_seen(const struct wds_group *g, const char *k, size_t n)
{
    if (!g->slots || memchr(k, '\0', n))
        return 0;
    return g->hash[key_slot(g, key_hash(k, n), k, n)] != 0;
}

static void fault(struct wds_group *g, enum wds_fault f)
{
    if (g->fault == WDS_OK) {
        g->fault = f;
        g->fault_member = g->members - 1;
    }
}

int wds_group_is_new(const struct wds_group *g, const char *key, size_t klen)
{
    return !g->open || klen != g->key_len || memcmp(key, g->key, klen) != 0;
}

int wds_group_next(struct wds_group *g, const char *key, size_t klen, const char *ext,
                   size_t elen)
{
    int fresh = wds_group_is_new(g, key, klen);
    char low[WDS_EXT_MAX + 1];

    if (elen > WDS_EXT_MAX)
        elen = WDS_EXT_MAX;
    for (size_t i = 0; i < elen; i++)
        low[i] = lower(ext[i]);
    low[elen] = '\0';
    if (fresh) {
        if (g->open && key_remember(g) < 0)
            return -ENOMEM;
        if (klen + 1 > g->key_cap) {
            char *k = realloc(g->key, klen + 1);

            if (!k)
                return -ENOMEM;
            g->key = k;
            g->key_cap = klen + 1;
        }
        memcpy(g->key, key, klen);
        g->key[klen] = '\0';
        g->key_len = klen;
        g->open = 1;
        g->members = 0;
        g->fault = WDS_OK;
        g->fault_member = 0;
    }
    if (g->members == WDS_MEMBERS_MAX) {
        fault(g, WDS_TOO_MANY);
        return fresh;
    }
    g->members++;
    if (fresh && key_seen(g, key, klen))
        fault(g, WDS_KEY_AGAIN);
    for (uint32_t m = 0; m + 1 < g->members; m++)
        if (strcmp(g->ext[m], low) == 0) {
            fault(g, WDS_DUP_EXT);
            break;
        }
    memcpy(g->ext[g->members - 1], low, elen + 1);
    return fresh;
}

/* Adds ext (lower-cased) to f, checking the rules fields_parse names. */
static int fields_add(struct wds_fields *f, const char *ext, size_t n, struct rf_err *err)
{
    char name[SCHEMA_NAME_MAX + 1], other[SCHEMA_NAME_MAX + 1];
    int r;

    if (n == 0)
        return rf_err_set(err, -EINVAL, "an empty extension");
    if (n > WDS_EXT_MAX)
        return rf_err_set(err, -EINVAL, "extension '%.*s...': over %d bytes", 16, ext,
                          WDS_EXT_MAX);
    if ((r = wds_field_name(ext, n, name)) < 0)
        return rf_err_set(err, -EINVAL, "extension '%.*s': its field name would be over %d "
                          "bytes", (int)n, ext, SCHEMA_NAME_MAX);
    if (f->n == SCHEMA_MAX_FIELDS)
        return rf_err_set(err, -EINVAL, "extension '%.*s': over %d fields", (int)n, ext,
                          SCHEMA_MAX_FIELDS);
    for (uint32_t i = 0; i < f->n; i++) {
        wds_field_name(f->ext[i], strlen(f->ext[i]), other);
        if (strcmp(name, other) == 0)
            return rf_err_set(err, -EINVAL, "extensions '%s' and '%.*s' both make field "
                              "name '%s'", f->ext[i], (int)n, ext, name);
    }
    for (size_t i = 0; i < n; i++)
        f->ext[f->n][i] = lower(ext[i]);
    f->ext[f->n][n] = '\0';
    f->n++;
    return 0;
}

int wds_fields_parse(const char *list, struct wds_fields *f, struct rf_err *err)
{
    const char *p = list;

    memset(f, 0, sizeof(*f));
    f->selected = 1;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *e = p;

        if (n && *e == '.') {
            e++;
            n--;
        }
        if (memchr(e, '/', n))
            return rf_err_set(err, -EINVAL, "'%.*s': an extension has no '/'", (int)n, e);
        if (fields_add(f, e, n, err) < 0)
            return -EINVAL;
        if (!end)
            return 0;
        p = end + 1;
    }
}

int wds_fields_from(struct wds_fields *f, char exts[][WDS_EXT_MAX + 1], uint32_t n,
                    struct rf_err *err)
{
    memset(f, 0, sizeof(*f));
    for (uint32_t m = 0; m < n; m++)
        if (fields_add(f, exts[m], strlen(exts[m]), err) < 0)
            return -EINVAL;
    return 0;
}

int wds_fields_map(const struct wds_fields *f, char exts[][WDS_EXT_MAX + 1], uint32_t n,
                   int32_t *field_of, uint32_t *which)
{
    uint32_t given = 0;     /* fields met: a bit each */

    for (uint32_t m = 0; m < n; m++) {
        field_of[m] = -1;
        for (uint32_t i = 0; i < f->n; i++)
            if (strcmp(exts[m], f->ext[i]) == 0) {
                field_of[m] = (int32_t)i;
                given |= 1u << i;
                break;
            }
        if (field_of[m] < 0 && !f->selected) {
            *which = m;
            return -EINVAL;
        }
    }
    for (uint32_t i = 0; i < f->n; i++)
        if (!(given & (1u << i))) {
            *which = i;
            return -ENOENT;
        }
    return 0;
}

int wds_parse_int(const uint8_t *p, size_t n, int64_t *out, struct rf_err *err)
{
    size_t i = 0, end = n, digits;
    int neg = 0;
    uint64_t v = 0, lim;

#define BLANK(c) ((c) == ' ' || (c) == '\t' || (c) == '\r' || (c) == '\n')
    while (i < end && BLANK(p[i]))
        i++;
    while (end > i && BLANK(p[end - 1]))
        end--;
#undef BLANK
    if (i == end)
        return rf_err_set(err, -EINVAL, "no integer (%zu blank byte%s)", n, n == 1 ? "" : "s");
    if (p[i] == '-' || p[i] == '+')
        neg = p[i++] == '-';
    lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (digits = 0; i < end; i++, digits++) {
        unsigned d = (unsigned)p[i] - '0';

        if (d > 9)
            return rf_err_set(err, -EINVAL, "byte %zu (0x%02x) is not a decimal digit", i,
                              p[i]);
        if (v > (lim - d) / 10)
            return rf_err_set(err, -EINVAL, "the integer is outside int64 (at byte %zu)", i);
        v = v * 10 + d;
    }
    if (!digits)
        return rf_err_set(err, -EINVAL, "a sign without digits");
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}
