/*
 * conf.c - ringfeedd's config file: the key table, conf_set (one key from
 * text, shared by the file parser and the daemon's flags), conf_parse (the
 * file, line by line), conf_merge (flags over file) and conf_format.  The
 * format is documented in conf.h.
 *
 * keys[] is the source of truth for names, fields and ranges: the parser,
 * the messages ("workers: expected an integer in 1..256 or auto"), the formatter
 * and the merge all walk it.  conf_check_table() checks it at start-up.
 */
#include "conf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpus.h"
#include "mix.h"
#include "strnum.h"
#include "url.h"

enum kind {
    K_PATH,    /* char[] absolute path, at most max bytes */
    K_UINT,    /* uint32_t or uint64_t (by width) in min..max */
    K_SIZE,    /* uint64_t via conf_parse_size, in min..max */
    K_LEVEL,   /* enum conf_log_level */
    K_IDS,     /* uint32_t[CONF_ALLOW_MAX] and its unsigned count */
    K_DATASET, /* dataset.NAME = DIR, into datasets[] */
    K_MODE,    /* uint32_t file mode in octal, in min..max */
    K_GROUP,   /* char[] group name or number, 1..max bytes */
    K_NAME,    /* char[] a name of the same bytes as K_GROUP's */
    K_CPUS,    /* uint64_t[CONF_CPUS_MAX / 64]: CPU numbers and ranges */
    K_WEIGHTS, /* struct conf_weight[CONF_WEIGHTS_MAX] and its unsigned count */
    K_WORKERS, /* uint32_t count in min..max, or "auto" (workers_auto, count 0) */
    K_CAP,     /* struct conf_cap: a size in min..max, or "P%" with P in 1..100 */
    K_RECIPE,  /* recipe.NAME = SPEC, into recipes[] */
    K_MIXTURE, /* mixture.NAME = MIX, into mixtures[] */
    K_PLUGIN,  /* plugin.NAME = PATH, into plugins[] */
    K_ENDPOINT, /* char[] http(s)://HOST[:PORT] (url.h), no path, at most max bytes */
    K_REGION,  /* char[] 1..max of [a-z0-9-] */
    K_EVICT,   /* enum conf_cache_evict by its name (evicts[]) */
};

/* cache-evict's values, by enum conf_cache_evict */
static const char *const evicts[CONF_EVICT_COUNT] = {"belady", "lru"};

struct keydef {
    const char *name;
    enum conf_key key;
    enum kind kind;
    size_t off, width;   /* the field in struct conf */
    size_t count_off;    /* K_IDS: the count field */
    uint64_t min, max;
};

_Static_assert(CONF_KEY_COUNT <= 32, "conf->set holds one bit a key");

#define FIELD(f) offsetof(struct conf, f), sizeof(((struct conf *)0)->f)

static const struct keydef keys[CONF_KEY_COUNT] = {
    {"socket", CONF_SOCKET, K_PATH, FIELD(socket), 0, 1, CONF_SOCKET_MAX},
    {"dataset.NAME", CONF_DATASET, K_DATASET, FIELD(datasets), 0, 1, CONF_PATH_MAX - 1},
    {"workers", CONF_WORKERS, K_WORKERS, FIELD(workers), 0, CTL_WORKERS_MIN, CTL_WORKERS_MAX},
    {"cpu-budget", CONF_CPU_BUDGET, K_UINT, FIELD(cpu_budget), 0, 1, CONF_CPU_BUDGET_MAX},
    {"memory-budget", CONF_MEMORY_BUDGET, K_SIZE, FIELD(memory_budget), 0,
     CONF_MEMORY_BUDGET_MIN, UINT64_MAX},
    {"log-level", CONF_LOG_LEVEL, K_LEVEL, FIELD(log_level), 0, 0, CONF_LOG_COUNT - 1},
    {"allow-uid", CONF_ALLOW_UID, K_IDS, FIELD(allow_uid), offsetof(struct conf, n_allow_uid),
     0, UINT32_MAX - 1},
    {"allow-gid", CONF_ALLOW_GID, K_IDS, FIELD(allow_gid), offsetof(struct conf, n_allow_gid),
     0, UINT32_MAX - 1},
    {"watchdog-sec", CONF_WATCHDOG_SEC, K_UINT, FIELD(watchdog_sec), 0, 0,
     CONF_WATCHDOG_SEC_MAX},
    {"max-bad-samples", CONF_MAX_BAD_SAMPLES, K_UINT, FIELD(max_bad_samples), 0, 0,
     UINT64_MAX},
    {"pixel-cap", CONF_PIXEL_CAP, K_UINT, FIELD(pixel_cap), 0, 1, CONF_PIXEL_CAP_MAX},
    {"socket-mode", CONF_SOCKET_MODE, K_MODE, FIELD(socket_mode), 0, 0, CONF_SOCKET_MODE_MAX},
    {"socket-group", CONF_SOCKET_GROUP, K_GROUP, FIELD(socket_group), 0, 1, CONF_GROUP_MAX},
    {"max-clients", CONF_MAX_CLIENTS, K_UINT, FIELD(max_clients), 0, 1, CONF_MAX_CLIENTS_MAX},
    {"max-connections", CONF_MAX_CONNECTIONS, K_UINT, FIELD(max_connections), 0, 1,
     CONF_MAX_CONNECTIONS_MAX},
    {"idle-sec", CONF_IDLE_SEC, K_UINT, FIELD(idle_sec), 0, 0, CONF_IDLE_SEC_MAX},
    {"weight", CONF_WEIGHT, K_WEIGHTS, FIELD(weights), offsetof(struct conf, n_weights), 1,
     CTL_ATTACH_WEIGHT_MAX},
    {"max-weight", CONF_MAX_WEIGHT, K_UINT, FIELD(max_weight), 0, 1, CTL_ATTACH_WEIGHT_MAX},
    {"memory-per-client", CONF_MEMORY_PER_CLIENT, K_CAP, FIELD(memory_per_client), 0,
     CONF_MEMORY_BUDGET_MIN, UINT64_MAX},
    {"memory-per-uid", CONF_MEMORY_PER_UID, K_CAP, FIELD(memory_per_uid), 0,
     CONF_MEMORY_BUDGET_MIN, UINT64_MAX},
    {"recipe.NAME", CONF_RECIPE, K_RECIPE, FIELD(recipes), 0, 1, AUG_SPEC_MAX},
    {"plugin.NAME", CONF_PLUGIN, K_PLUGIN, FIELD(plugins), 0, 1, CONF_PATH_MAX - 1},
    {"name", CONF_NAME, K_NAME, FIELD(name), 0, 1, CONF_NAME_MAX},
    {"cpu-list", CONF_CPU_LIST, K_CPUS, FIELD(cpu_list), 0, 0, CONF_CPUS_MAX - 1},
    {"numa-node", CONF_NUMA_NODE, K_UINT, FIELD(numa_node), 0, 0, CONF_NUMA_NODE_MAX},
    {"cache-dir", CONF_CACHE_DIR, K_PATH, FIELD(cache_dir), 0, 1, CONF_PATH_MAX - 1},
    {"cache-size", CONF_CACHE_SIZE, K_SIZE, FIELD(cache_size), 0, CONF_MEMORY_BUDGET_MIN,
     UINT64_MAX},
    {"s3-endpoint", CONF_S3_ENDPOINT, K_ENDPOINT, FIELD(s3_endpoint), 0, 1, CONF_ENDPOINT_MAX},
    {"s3-region", CONF_S3_REGION, K_REGION, FIELD(s3_region), 0, 1, CONF_S3_REGION_MAX},
    {"fetch-retries", CONF_FETCH_RETRIES, K_UINT, FIELD(fetch_retries), 0, 0,
     CONF_FETCH_RETRIES_MAX},
    {"cache-evict", CONF_CACHE_EVICT, K_EVICT, FIELD(cache_evict), 0, 0, CONF_EVICT_COUNT - 1},
    {"mixture.NAME", CONF_MIXTURE, K_MIXTURE, FIELD(mixtures), 0, 1, CONF_MIX_MAX},
};

_Static_assert(CONF_KEY_COUNT <= 32, "conf.set keeps one bit per key");
_Static_assert(CONF_MIX_MAX == CTL_MIX_MAX, "a config's mixture fits ATTACH's");

_Static_assert(CONF_ENDPOINT_MAX == URL_MAX, "an endpoint is a URL");

static const char *const levels[CONF_LOG_COUNT] = {"error", "warn", "info", "debug"};

#define DATASET_PREFIX "dataset."
#define DATASET_PREFIX_LEN (sizeof(DATASET_PREFIX) - 1)
#define PLUGIN_PREFIX "plugin."
#define PLUGIN_PREFIX_LEN (sizeof(PLUGIN_PREFIX) - 1)
#define RECIPE_PREFIX "recipe."
#define RECIPE_PREFIX_LEN (sizeof(RECIPE_PREFIX) - 1)
#define MIXTURE_PREFIX "mixture."
#define MIXTURE_PREFIX_LEN (sizeof(MIXTURE_PREFIX) - 1)

void conf_defaults(struct conf *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->socket, sizeof(c->socket), "%s", CONF_DEFAULT_SOCKET);
    c->log_level = CONF_LOG_INFO;
    c->watchdog_sec = 60;
    c->max_bad_samples = 1000;
    c->pixel_cap = 8192ull * 8192ull;
    c->socket_mode = CONF_DEFAULT_SOCKET_MODE;
    c->max_clients = 256;
    c->max_connections = 1024;
    c->idle_sec = 60;
    c->max_weight = 1;
    c->memory_per_client.percent = CONF_MEMORY_PER_CLIENT_PCT;
    c->memory_per_uid.percent = CONF_MEMORY_PER_UID_PCT;
    snprintf(c->cache_dir, sizeof(c->cache_dir), "%s", CONF_DEFAULT_CACHE_DIR);
    c->cache_size = CONF_DEFAULT_CACHE_SIZE;
    c->fetch_retries = CONF_DEFAULT_FETCH_RETRIES;
}

uint64_t conf_cap_bytes(const struct conf_cap *cap, uint64_t budget)
{
    if (!cap->percent)
        return cap->bytes;
    /* budget / 100 * percent would lose up to 99 bytes a percent */
    return budget > UINT64_MAX / 100 ? budget / 100 * cap->percent
                                     : budget * cap->percent / 100;
}

const char *conf_cache_evict_name(enum conf_cache_evict e)
{
    return (unsigned)e < CONF_EVICT_COUNT ? evicts[e] : NULL;
}

const char *conf_log_level_name(enum conf_log_level l)
{
    return (unsigned)l < CONF_LOG_COUNT ? levels[l] : NULL;
}

const struct conf_dataset *conf_find_dataset(const struct conf *c, const char *name)
{
    for (unsigned i = 0; i < c->n_datasets; i++)
        if (strcmp(c->datasets[i].name, name) == 0)
            return &c->datasets[i];
    return NULL;
}

bool conf_dataset_remote(const char *dir)
{
    return strstr(dir, "://") != NULL;
}

const struct conf_mixture *conf_find_mixture(const struct conf *c, const char *name)
{
    for (unsigned i = 0; i < c->n_mixtures; i++)
        if (strcmp(c->mixtures[i].name, name) == 0)
            return &c->mixtures[i];
    return NULL;
}

int conf_check_mixtures(const struct conf *c, struct rf_err *err)
{
    for (unsigned i = 0; i < c->n_mixtures; i++) {
        const struct conf_mixture *x = &c->mixtures[i];
        struct mix m;

        if (conf_find_dataset(c, x->name))
            return rf_err_set(err, -EINVAL, "mixture.%s: dataset.%s has that name too: "
                              "ATTACH dataset=%s would name both", x->name, x->name, x->name);
        if (mix_parse(x->mix, strlen(x->mix), &m, err) < 0)
            return -EINVAL;
        for (uint32_t k = 0; k < m.n; k++)
            if (!conf_find_dataset(c, m.s[k].name))
                return rf_err_set(err, -EINVAL, "mixture.%s: %s is not a dataset of this "
                                  "config (dataset.%s)", x->name, m.s[k].name, m.s[k].name);
    }
    return 0;
}

const struct conf_recipe *conf_find_recipe(const struct conf *c, const char *name, size_t len)
{
    for (unsigned i = 0; i < c->n_recipes; i++)
        if (strlen(c->recipes[i].name) == len && memcmp(c->recipes[i].name, name, len) == 0)
            return &c->recipes[i];
    return NULL;
}

void conf_recipe_names(const struct conf *c, char *buf, size_t cap)
{
    size_t used = 0;

    if (cap == 0)
        return;
    snprintf(buf, cap, "%s", c->n_recipes ? "" : "(none)");
    for (unsigned i = 0; i < c->n_recipes && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? " " : "",
                                 c->recipes[i].name);
}

const struct conf_plugin *conf_find_plugin(const struct conf *c, const char *name, size_t len)
{
    for (unsigned i = 0; i < c->n_plugins; i++)
        if (strlen(c->plugins[i].name) == len && memcmp(c->plugins[i].name, name, len) == 0)
            return &c->plugins[i];
    return NULL;
}

/* A recipe's name: 1..CONF_RECIPE_NAME_MAX of [A-Za-z0-9_-], first a letter. */
static bool recipe_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > CONF_RECIPE_NAME_MAX ||
        !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

int conf_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        unsigned shift;
    } units[] = {
        {"", 0}, {"k", 10}, {"m", 20}, {"g", 30}, {"t", 40},
        {"kib", 10}, {"mib", 20}, {"gib", 30}, {"tib", 40},
    };
    size_t digits = 0;
    uint64_t v;
    int r;

    while (s[digits] >= '0' && s[digits] <= '9')
        digits++;
    r = strnum_u64(s, digits, &v);
    if (r < 0)
        return r;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        const char *u = units[i].suffix, *t = s + digits;
        size_t j = 0;

        while (u[j] && (t[j] == u[j] || t[j] == u[j] - 'a' + 'A'))
            j++;
        if (u[j] || t[j])
            continue;
        if (units[i].shift && v > (UINT64_MAX >> units[i].shift))
            return -ERANGE;
        *out = v << units[i].shift;
        return 0;
    }
    return -EINVAL;
}

/* What row k accepts, for messages. */
static void describe(const struct keydef *k, char *buf, size_t cap)
{
    switch (k->kind) {
    case K_PATH:
        snprintf(buf, cap, "an absolute path of at most %llu bytes", (unsigned long long)k->max);
        return;
    case K_DATASET:
        snprintf(buf, cap, "an absolute folder path or an http://, https:// or s3:// URL of "
                 "at most %llu bytes", (unsigned long long)k->max);
        return;
    case K_ENDPOINT:
        snprintf(buf, cap, "http://HOST[:PORT] or https://HOST[:PORT] with no path");
        return;
    case K_REGION:
        snprintf(buf, cap, "a region: 1 to %llu of a-z 0-9 -, e.g. us-east-1",
                 (unsigned long long)k->max);
        return;
    case K_PLUGIN:
        snprintf(buf, cap, "an absolute path of a plugin's shared object of at most %llu bytes",
                 (unsigned long long)k->max);
        return;
    case K_RECIPE:
        snprintf(buf, cap, "an augmentation spec of at most %llu bytes (ATTACH augment=)",
                 (unsigned long long)k->max);
        return;
    case K_MIXTURE:
        snprintf(buf, cap, "datasets by weight, NAME:WEIGHT NAME:WEIGHT ..., of at most %llu "
                 "bytes", (unsigned long long)k->max);
        return;
    case K_UINT:
        snprintf(buf, cap, "an integer in %llu..%llu", (unsigned long long)k->min,
                 (unsigned long long)k->max);
        return;
    case K_WORKERS:
        snprintf(buf, cap, "an integer in %llu..%llu or auto", (unsigned long long)k->min,
                 (unsigned long long)k->max);
        return;
    case K_SIZE:
        snprintf(buf, cap, "a size of at least %lluM: digits with an optional K, M, G or T",
                 (unsigned long long)(k->min >> 20));
        return;
    case K_CAP:
        snprintf(buf, cap, "a size of at least %lluM (digits with an optional K, M, G or T) "
                 "or a share of memory-budget P%% with P in 1..100",
                 (unsigned long long)(k->min >> 20));
        return;
    case K_LEVEL:
        snprintf(buf, cap, "one of error, warn, info, debug");
        return;
    case K_EVICT:
        snprintf(buf, cap, "one of belady, lru");
        return;
    case K_IDS:
        snprintf(buf, cap, "1 to %d comma-separated ids in 0..%llu", CONF_ALLOW_MAX,
                 (unsigned long long)k->max);
        return;
    case K_MODE:
        snprintf(buf, cap, "octal permission bits in 0..%llo, e.g. 0660",
                 (unsigned long long)k->max);
        return;
    case K_GROUP:
        snprintf(buf, cap, "a group name or number: 1 to %llu of A-Z a-z 0-9 . _ -, "
                 "not starting with -", (unsigned long long)k->max);
        return;
    case K_NAME:
        snprintf(buf, cap, "a name: 1 to %llu of A-Z a-z 0-9 . _ -, not starting with -",
                 (unsigned long long)k->max);
        return;
    case K_CPUS:
        snprintf(buf, cap, "comma-separated CPU numbers and ranges A-B in 0..%llu, e.g. 0-15,32",
                 (unsigned long long)k->max);
        return;
    case K_WEIGHTS:
        snprintf(buf, cap, "1 to %d comma-separated rules name:LABEL=W or uid:UID=W, "
                 "W in %llu..%llu, or W/MAX with MAX in W..%llu", CONF_WEIGHTS_MAX,
                 (unsigned long long)k->min, (unsigned long long)k->max,
                 (unsigned long long)k->max);
        return;
    }
    snprintf(buf, cap, "?");
}

static int bad_value(const struct keydef *k, const char *key, const char *v, struct rf_err *err)
{
    char what[128];

    describe(k, what, sizeof(what));
    return rf_err_set(err, -EINVAL, "%s: expected %s, got \"%.64s%s\"", key, what, v,
                      strlen(v) > 64 ? "..." : "");
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* "0-3,8,10-11" into the bitmap at the key's field (cpus.h reads it);
 * nothing written on a refusal. */
static int set_cpus(const struct keydef *k, struct conf *c, const char *key, const char *v,
                    struct rf_err *err)
{
    if (cpus_parse_list(v, strlen(v), (uint64_t *)((char *)c + k->off),
                        (unsigned)(k->max + 1)) < 0)
        return bad_value(k, key, v, err);
    return 0;
}

static int set_ids(const struct keydef *k, struct conf *c, const char *key, const char *v,
                   struct rf_err *err)
{
    uint32_t ids[CONF_ALLOW_MAX];
    unsigned n = 0;
    const char *p = v;

    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        uint64_t id;

        while (len && is_blank(*p))
            p++, len--;
        while (len && is_blank(p[len - 1]))
            len--;
        if (strnum_u64(p, len, &id) < 0 || id > k->max)
            return bad_value(k, key, v, err);
        if (n == CONF_ALLOW_MAX)
            return rf_err_set(err, -E2BIG, "%s: more than %d ids", key, CONF_ALLOW_MAX);
        ids[n++] = (uint32_t)id;
        if (!end)
            break;
        p = end + 1;
    }
    memcpy((char *)c + k->off, ids, n * sizeof(ids[0]));
    *(unsigned *)((char *)c + k->count_off) = n;
    return 0;
}

/* One rule "name:LABEL=W" or "uid:UID=W", W optionally "W/MAX", from
 * p[0..len), no blanks around. */
static int parse_weight(const struct keydef *k, const char *p, size_t len, struct conf_weight *w)
{
    const char *eq = memchr(p, '=', len), *slash;
    uint64_t v, max = 0;
    size_t vlen, lab;

    memset(w, 0, sizeof(*w));
    if (!eq)
        return -EINVAL;
    vlen = len - (size_t)(eq + 1 - p);
    slash = memchr(eq + 1, '/', vlen);
    if (slash) {
        if (strnum_u64(slash + 1, vlen - (size_t)(slash + 1 - (eq + 1)), &max) < 0)
            return -EINVAL;
        vlen = (size_t)(slash - (eq + 1));
    }
    if (strnum_u64(eq + 1, vlen, &v) < 0 || v < k->min || v > k->max ||
        (slash && (max < v || max > k->max)))
        return -EINVAL;
    w->weight = (uint32_t)v;
    w->max = (uint32_t)max;
    if (len > 4 && memcmp(p, "uid:", 4) == 0) {
        w->by_uid = true;
        if (strnum_u64(p + 4, (size_t)(eq - p) - 4, &v) < 0 || v > UINT32_MAX - 1)
            return -EINVAL;
        w->uid = (uint32_t)v;
        return 0;
    }
    if (len <= 5 || memcmp(p, "name:", 5) != 0)
        return -EINVAL;
    lab = (size_t)(eq - p) - 5;
    if (lab == 0 || lab > CTL_LABEL_MAX || !ctl_label_ok(p + 5, lab))
        return -EINVAL;
    memcpy(w->name, p + 5, lab);
    return 0;
}

static int set_weights(const struct keydef *k, struct conf *c, const char *key, const char *v,
                       struct rf_err *err)
{
    struct conf_weight ws[CONF_WEIGHTS_MAX];
    unsigned n = 0;
    const char *p = v;

    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        while (len && is_blank(*p))
            p++, len--;
        while (len && is_blank(p[len - 1]))
            len--;
        if (n == CONF_WEIGHTS_MAX)
            return rf_err_set(err, -E2BIG, "%s: more than %d rules", key, CONF_WEIGHTS_MAX);
        if (parse_weight(k, p, len, &ws[n]) < 0) {
            char what[128];

            describe(k, what, sizeof(what));
            return rf_err_set(err, -EINVAL, "%s: rule \"%.*s\" is not one of %s", key,
                              (int)(len > 64 ? 64 : len), p, what);
        }
        n++;
        if (!end)
            break;
        p = end + 1;
    }
    memcpy(c->weights, ws, n * sizeof(ws[0]));
    c->n_weights = n;
    (void)k;
    return 0;
}

/* The rule for a client: the first naming it, else the first of its uid;
 * NULL when none. */
static const struct conf_weight *weight_rule(const struct conf *c, const char *name,
                                             uint32_t uid)
{
    for (unsigned i = 0; name && name[0] && i < c->n_weights; i++)
        if (!c->weights[i].by_uid && strcmp(c->weights[i].name, name) == 0)
            return &c->weights[i];
    for (unsigned i = 0; i < c->n_weights; i++)
        if (c->weights[i].by_uid && c->weights[i].uid == uid)
            return &c->weights[i];
    return NULL;
}

uint32_t conf_weight_for(const struct conf *c, const char *name, uint32_t uid)
{
    const struct conf_weight *w = weight_rule(c, name, uid);

    return w ? w->weight : 1;
}

uint32_t conf_weight_max(const struct conf *c, const char *name, uint32_t uid)
{
    const struct conf_weight *w = weight_rule(c, name, uid);

    if (!w)
        return c->max_weight;
    if (w->max)
        return w->max;
    return w->weight > c->max_weight ? w->weight : c->max_weight;
}

static int set_dataset(const struct keydef *k, struct conf *c, const char *key, const char *v,
                       struct rf_err *err)
{
    const char *name = key + DATASET_PREFIX_LEN;
    size_t nlen = strlen(name), vlen = strlen(v);
    struct conf_dataset *d;

    if (!ctl_dataset_name_ok(name, nlen))
        return rf_err_set(err, -EINVAL,
                          "%s: the name after \"dataset.\" must be 1 to %d characters of "
                          "A-Z a-z 0-9 . _ -",
                          key, CTL_DATASET_NAME_MAX);
    if (conf_find_dataset(c, name))
        return rf_err_set(err, -EEXIST, "%s: given twice", key);
    if (vlen > k->max || (v[0] != '/' && !conf_dataset_remote(v)))
        return bad_value(k, key, v, err);
    if (conf_dataset_remote(v)) {
        struct url u;

        if (url_parse(v, vlen, &u, err) < 0) {
            rf_err_prefix(err, "%s", key);
            return -EINVAL;
        }
    }
    if (c->n_datasets == CONF_DATASETS_MAX)
        return rf_err_set(err, -E2BIG, "%s: more than %d datasets", key, CONF_DATASETS_MAX);
    d = &c->datasets[c->n_datasets++];
    memset(d, 0, sizeof(*d));
    memcpy(d->name, name, nlen);
    memcpy(d->dir, v, vlen);
    return 0;
}

static int set_recipe(struct conf *c, const char *key, const char *v, struct rf_err *err)
{
    const char *name = key + RECIPE_PREFIX_LEN;
    size_t nlen = strlen(name), vlen = strlen(v);
    struct conf_recipe *r;
    struct aug_spec *spec;
    int rc;

    if (!recipe_name_ok(name, nlen))
        return rf_err_set(err, -EINVAL, "%s: the name after \"recipe.\" must be 1 to %d "
                          "characters of A-Z a-z 0-9 _ -, first a letter", key,
                          CONF_RECIPE_NAME_MAX);
    if (conf_find_recipe(c, name, nlen))
        return rf_err_set(err, -EEXIST, "%s: given twice", key);
    if (c->n_recipes == CONF_RECIPES_MAX)
        return rf_err_set(err, -E2BIG, "%s: more than %d recipes", key, CONF_RECIPES_MAX);
    spec = malloc(sizeof(*spec));
    if (!spec)
        return rf_err_set(err, -ENOMEM, "%s: no memory to check the spec", key);
    rc = aug_spec_parse(v, vlen, spec, err);
    free(spec);
    if (rc < 0) {
        rf_err_prefix(err, "%s", key);
        return -EINVAL;
    }
    r = &c->recipes[c->n_recipes++];
    memset(r, 0, sizeof(*r));
    memcpy(r->name, name, nlen);
    memcpy(r->spec, v, vlen);
    return 0;
}

static int set_mixture(struct conf *c, const char *key, const char *v, struct rf_err *err)
{
    const char *name = key + MIXTURE_PREFIX_LEN;
    size_t nlen = strlen(name), vlen = strlen(v);
    struct conf_mixture *x;
    struct mix m;

    if (!ctl_dataset_name_ok(name, nlen))
        return rf_err_set(err, -EINVAL, "%s: the name after \"mixture.\" must be 1 to %d "
                          "characters of A-Z a-z 0-9 . _ -", key, CTL_DATASET_NAME_MAX);
    if (conf_find_mixture(c, name))
        return rf_err_set(err, -EEXIST, "%s: given twice", key);
    if (c->n_mixtures == CONF_MIXTURES_MAX)
        return rf_err_set(err, -E2BIG, "%s: more than %d mixtures", key, CONF_MIXTURES_MAX);
    if (vlen > CONF_MIX_MAX)
        return rf_err_set(err, -EINVAL, "%s: %zu bytes, at most %d", key, vlen, CONF_MIX_MAX);
    if (mix_parse(v, vlen, &m, err) < 0) {
        rf_err_prefix(err, "%s", key);
        return -EINVAL;
    }
    x = &c->mixtures[c->n_mixtures++];
    memset(x, 0, sizeof(*x));
    memcpy(x->name, name, nlen);
    memcpy(x->mix, v, vlen);
    return 0;
}

static int set_plugin(const struct keydef *k, struct conf *c, const char *key, const char *v,
                      struct rf_err *err)
{
    const char *name = key + PLUGIN_PREFIX_LEN;
    size_t nlen = strlen(name), vlen = strlen(v);
    struct conf_plugin *p;

    if (!recipe_name_ok(name, nlen) || nlen > CONF_PLUGIN_NAME_MAX)
        return rf_err_set(err, -EINVAL, "%s: the name after \"plugin.\" must be 1 to %d "
                          "characters of A-Z a-z 0-9 _ -, first a letter", key,
                          CONF_PLUGIN_NAME_MAX);
    if (conf_find_plugin(c, name, nlen))
        return rf_err_set(err, -EEXIST, "%s: given twice", key);
    if (c->n_plugins == CONF_PLUGINS_MAX)
        return rf_err_set(err, -E2BIG, "%s: more than %d plugins", key, CONF_PLUGINS_MAX);
    if (v[0] != '/' || vlen > k->max)
        return bad_value(k, key, v, err);
    p = &c->plugins[c->n_plugins++];
    memset(p, 0, sizeof(*p));
    memcpy(p->name, name, nlen);
    memcpy(p->path, v, vlen);
    return 0;
}

/* Octal digits only ("660", "0660"), in min..max; -EINVAL otherwise. */
static int parse_mode(const struct keydef *k, const char *v, uint32_t *out)
{
    uint64_t m = 0;
    size_t i;

    for (i = 0; v[i]; i++) {
        if (v[i] < '0' || v[i] > '7' || i >= 6)
            return -EINVAL;
        m = m * 8 + (uint64_t)(v[i] - '0');
    }
    if (i == 0 || m < k->min || m > k->max)
        return -EINVAL;
    *out = (uint32_t)m;
    return 0;
}

/* A group name or number as useradd and getgrnam take them. */
static bool group_ok(const char *v, size_t len, size_t max)
{
    if (len < 1 || len > max || v[0] == '-')
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = v[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            return false;
    }
    return true;
}

/* Parses v for row k into c; the caller checked duplicates. */
static int set_value(const struct keydef *k, struct conf *c, const char *key, const char *v,
                     struct rf_err *err)
{
    char *field = (char *)c + k->off;
    size_t vlen = strlen(v);
    uint64_t u;

    switch (k->kind) {
    case K_PATH:
        if (v[0] != '/' || vlen > k->max)
            return bad_value(k, key, v, err);
        memset(field, 0, k->width);
        memcpy(field, v, vlen);
        return 0;
    case K_UINT:
        if (strnum_u64(v, vlen, &u) < 0 || u < k->min || u > k->max)
            return bad_value(k, key, v, err);
        if (k->width == sizeof(uint32_t))
            *(uint32_t *)field = (uint32_t)u;
        else
            *(uint64_t *)field = u;
        return 0;
    case K_SIZE:
        if (conf_parse_size(v, &u) < 0 || u < k->min || u > k->max)
            return bad_value(k, key, v, err);
        *(uint64_t *)field = u;
        return 0;
    case K_CAP: {
        struct conf_cap *cp = (struct conf_cap *)field;

        if (vlen > 1 && v[vlen - 1] == '%') {
            if (strnum_u64(v, vlen - 1, &u) < 0 || u < 1 || u > 100)
                return bad_value(k, key, v, err);
            cp->bytes = 0;
            cp->percent = (uint32_t)u;
            return 0;
        }
        if (conf_parse_size(v, &u) < 0 || u < k->min || u > k->max)
            return bad_value(k, key, v, err);
        cp->bytes = u;
        cp->percent = 0;
        return 0;
    }
    case K_WORKERS:
        if (strcmp(v, "auto") == 0) {
            c->workers = 0;
            c->workers_auto = true;
            return 0;
        }
        if (strnum_u64(v, vlen, &u) < 0 || u < k->min || u > k->max)
            return bad_value(k, key, v, err);
        c->workers = (uint32_t)u;
        c->workers_auto = false;
        return 0;
    case K_EVICT:
        for (unsigned i = 0; i < CONF_EVICT_COUNT; i++) {
            if (strcmp(v, evicts[i]) == 0) {
                *(enum conf_cache_evict *)field = (enum conf_cache_evict)i;
                return 0;
            }
        }
        return bad_value(k, key, v, err);
    case K_LEVEL:
        for (unsigned i = 0; i < CONF_LOG_COUNT; i++) {
            if (strcmp(v, levels[i]) == 0) {
                *(enum conf_log_level *)field = (enum conf_log_level)i;
                return 0;
            }
        }
        return bad_value(k, key, v, err);
    case K_IDS:
        return set_ids(k, c, key, v, err);
    case K_CPUS:
        return set_cpus(k, c, key, v, err);
    case K_WEIGHTS:
        return set_weights(k, c, key, v, err);
    case K_DATASET:
        return set_dataset(k, c, key, v, err);
    case K_RECIPE:
        return set_recipe(c, key, v, err);
    case K_MIXTURE:
        return set_mixture(c, key, v, err);
    case K_PLUGIN:
        return set_plugin(k, c, key, v, err);
    case K_MODE:
        if (parse_mode(k, v, (uint32_t *)field) < 0)
            return bad_value(k, key, v, err);
        return 0;
    case K_GROUP:
    case K_NAME:
        if (!group_ok(v, vlen, k->max))
            return bad_value(k, key, v, err);
        memset(field, 0, k->width);
        memcpy(field, v, vlen);
        return 0;
    case K_ENDPOINT: {
        struct url url;

        if (vlen > k->max || url_parse(v, vlen, &url, err) < 0) {
            if (vlen <= k->max) {
                rf_err_prefix(err, "%s", key);
                return -EINVAL;
            }
            return bad_value(k, key, v, err);
        }
        if (url.scheme == URL_S3 || url.path_len > 1)
            return bad_value(k, key, v, err);
        memset(field, 0, k->width);
        memcpy(field, v, vlen);
        return 0;
    }
    case K_REGION:
        if (vlen < k->min || vlen > k->max || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-")
            != vlen)
            return bad_value(k, key, v, err);
        memset(field, 0, k->width);
        memcpy(field, v, vlen);
        return 0;
    }
    return -EINVAL;
}

static const struct keydef *find_key(const char *key)
{
    if (strncmp(key, DATASET_PREFIX, DATASET_PREFIX_LEN) == 0)
        return &keys[CONF_DATASET];
    if (strncmp(key, RECIPE_PREFIX, RECIPE_PREFIX_LEN) == 0)
        return &keys[CONF_RECIPE];
    if (strncmp(key, MIXTURE_PREFIX, MIXTURE_PREFIX_LEN) == 0)
        return &keys[CONF_MIXTURE];
    if (strncmp(key, PLUGIN_PREFIX, PLUGIN_PREFIX_LEN) == 0)
        return &keys[CONF_PLUGIN];
    for (int i = 0; i < CONF_KEY_COUNT; i++)
        if (keys[i].kind != K_DATASET && strcmp(keys[i].name, key) == 0)
            return &keys[i];
    return NULL;
}

static int unknown_key(const char *key, struct rf_err *err)
{
    char list[1024];
    size_t used = 0;

    list[0] = '\0';
    for (int i = 0; i < CONF_KEY_COUNT; i++) {
        int n = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", keys[i].name);

        if (n < 0 || (size_t)n >= sizeof(list) - used)
            break;
        used += (size_t)n;
    }
    return rf_err_set(err, -ENOENT, "unknown key \"%.64s%s\"; keys: %s", key,
                      strlen(key) > 64 ? "..." : "", list);
}

int conf_set(struct conf *c, const char *key, const char *value, struct rf_err *err)
{
    const struct keydef *k = find_key(key);
    char v[CONF_LINE_MAX];
    size_t start = 0, end = strlen(value);
    int r;

    if (!k)
        return unknown_key(key, err);
    if (k->kind != K_DATASET && k->kind != K_RECIPE && k->kind != K_PLUGIN &&
        k->kind != K_MIXTURE && conf_is_set(c, k->key))
        return rf_err_set(err, -EEXIST, "%s: given twice", key);
    /* the file's rules for a value: trimmed, no control characters */
    while (start < end && is_blank(value[start]))
        start++;
    while (end > start && is_blank(value[end - 1]))
        end--;
    if (end - start >= sizeof(v))
        return rf_err_set(err, -EINVAL, "%s: value longer than %d bytes", key,
                          CONF_LINE_MAX - 1);
    for (size_t i = start; i < end; i++) {
        unsigned char b = (unsigned char)value[i];

        if ((b < 0x20 && b != '\t') || b == 0x7f)
            return rf_err_set(err, -EINVAL, "%s: control character 0x%02x in the value", key,
                              b);
    }
    memcpy(v, value + start, end - start);
    v[end - start] = '\0';
    r = set_value(k, c, key, v, err);
    if (r == 0)
        c->set |= 1u << k->key;
    return r;
}

/* The line's first bad byte (NUL, a control character but TAB), or n. */
static size_t first_bad_byte(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];

        if ((b < 0x20 && b != '\t') || b == 0x7f)
            return i;
    }
    return n;
}

/* Where each key (each dataset) was first set, for "given twice" messages. */
struct seen_lines {
    unsigned key[CONF_KEY_COUNT];
    unsigned dataset[CONF_DATASETS_MAX];
    unsigned recipe[CONF_RECIPES_MAX];
    unsigned plugin[CONF_PLUGINS_MAX];
    unsigned mixture[CONF_MIXTURES_MAX];
};

/* Parses one line s[0..n) (no LF, no CR) numbered lineno into c. */
static int parse_line(struct conf *c, const char *s, size_t n, unsigned lineno,
                      struct seen_lines *seen, struct rf_err *err)
{
    char key[CONF_LINE_MAX], value[CONF_LINE_MAX];
    size_t bad = first_bad_byte(s, n), i = 0, kend, vstart;
    const char *eq;
    struct rf_err e;
    int r;

    if (bad < n)
        return rf_err_set(err, -EINVAL, "line %u: %s byte 0x%02x at column %zu", lineno,
                          s[bad] ? "control" : "NUL", (unsigned char)s[bad], bad + 1);
    while (i < n && is_blank(s[i]))
        i++;
    if (i == n || s[i] == '#')
        return 0;
    eq = memchr(s + i, '=', n - i);
    if (!eq)
        return rf_err_set(err, -EINVAL, "line %u: expected key = value", lineno);
    kend = (size_t)(eq - s);
    while (kend > i && is_blank(s[kend - 1]))
        kend--;
    if (kend == i)
        return rf_err_set(err, -EINVAL, "line %u: no key before '='", lineno);
    memcpy(key, s + i, kend - i);
    key[kend - i] = '\0';
    vstart = (size_t)(eq - s) + 1;
    memcpy(value, s + vstart, n - vstart);
    value[n - vstart] = '\0';
    r = conf_set(c, key, value, &e);
    if (r == -EEXIST) {
        const struct conf_dataset *d = NULL;
        unsigned first = 0;

        if (strncmp(key, DATASET_PREFIX, DATASET_PREFIX_LEN) == 0) {
            d = conf_find_dataset(c, key + DATASET_PREFIX_LEN);
            first = d ? seen->dataset[d - c->datasets] : 0;
        } else if (strncmp(key, RECIPE_PREFIX, RECIPE_PREFIX_LEN) == 0) {
            const char *nm = key + RECIPE_PREFIX_LEN;
            const struct conf_recipe *rc = conf_find_recipe(c, nm, strlen(nm));

            first = rc ? seen->recipe[rc - c->recipes] : 0;
        } else if (strncmp(key, MIXTURE_PREFIX, MIXTURE_PREFIX_LEN) == 0) {
            const struct conf_mixture *mx = conf_find_mixture(c, key + MIXTURE_PREFIX_LEN);

            first = mx ? seen->mixture[mx - c->mixtures] : 0;
        } else if (strncmp(key, PLUGIN_PREFIX, PLUGIN_PREFIX_LEN) == 0) {
            const char *nm = key + PLUGIN_PREFIX_LEN;
            const struct conf_plugin *pl = conf_find_plugin(c, nm, strlen(nm));

            first = pl ? seen->plugin[pl - c->plugins] : 0;
        } else {
            first = seen->key[find_key(key)->key];
        }
        return rf_err_set(err, -EINVAL, "line %u: %s (first on line %u)", lineno, e.msg, first);
    }
    if (r < 0)
        return rf_err_set(err, -EINVAL, "line %u: %s", lineno, e.msg);
    if (strncmp(key, DATASET_PREFIX, DATASET_PREFIX_LEN) == 0)
        seen->dataset[c->n_datasets - 1] = lineno;
    else if (strncmp(key, RECIPE_PREFIX, RECIPE_PREFIX_LEN) == 0)
        seen->recipe[c->n_recipes - 1] = lineno;
    else if (strncmp(key, PLUGIN_PREFIX, PLUGIN_PREFIX_LEN) == 0)
        seen->plugin[c->n_plugins - 1] = lineno;
    else if (strncmp(key, MIXTURE_PREFIX, MIXTURE_PREFIX_LEN) == 0)
        seen->mixture[c->n_mixtures - 1] = lineno;
    else
        seen->key[find_key(key)->key] = lineno;
    return 0;
}

int conf_parse(const char *buf, size_t len, struct conf *out, struct rf_err *err)
{
    struct seen_lines seen;
    size_t pos = 0;
    unsigned lineno = 0;

    conf_defaults(out);
    memset(&seen, 0, sizeof(seen));
    while (pos < len) {
        const char *lf = memchr(buf + pos, '\n', len - pos);
        size_t n = lf ? (size_t)(lf - (buf + pos)) : len - pos;
        int r;

        lineno++;
        if (n + (lf ? 1 : 0) > CONF_LINE_MAX)
            return rf_err_set(err, -EINVAL, "line %u: longer than %d bytes", lineno,
                              CONF_LINE_MAX - 1);
        if (n > 0 && buf[pos + n - 1] == '\r')
            r = parse_line(out, buf + pos, n - 1, lineno, &seen, err);
        else
            r = parse_line(out, buf + pos, n, lineno, &seen, err);
        if (r < 0)
            return r;
        pos += n + (lf ? 1 : 0);
    }
    return 0;
}

const char *conf_key_name(enum conf_key k)
{
    return (int)k >= 0 && k < CONF_KEY_COUNT ? keys[k].name : NULL;
}

int conf_merge(struct conf *dst, const struct conf *src, struct rf_err *err)
{
    unsigned added = 0;

    for (unsigned i = 0; i < src->n_datasets; i++)
        if (!conf_find_dataset(dst, src->datasets[i].name))
            added++;
    if (dst->n_datasets + added > CONF_DATASETS_MAX)
        return rf_err_set(err, -E2BIG, "more than %d datasets in the file and flags together",
                          CONF_DATASETS_MAX);
    added = 0;
    for (unsigned i = 0; i < src->n_recipes; i++)
        if (!conf_find_recipe(dst, src->recipes[i].name, strlen(src->recipes[i].name)))
            added++;
    if (dst->n_recipes + added > CONF_RECIPES_MAX)
        return rf_err_set(err, -E2BIG, "more than %d recipes in the file and flags together",
                          CONF_RECIPES_MAX);
    added = 0;
    for (unsigned i = 0; i < src->n_plugins; i++)
        if (!conf_find_plugin(dst, src->plugins[i].name, strlen(src->plugins[i].name)))
            added++;
    if (dst->n_plugins + added > CONF_PLUGINS_MAX)
        return rf_err_set(err, -E2BIG, "more than %d plugins in the file and flags together",
                          CONF_PLUGINS_MAX);
    added = 0;
    for (unsigned i = 0; i < src->n_mixtures; i++)
        if (!conf_find_mixture(dst, src->mixtures[i].name))
            added++;
    if (dst->n_mixtures + added > CONF_MIXTURES_MAX)
        return rf_err_set(err, -E2BIG, "more than %d mixtures in the file and flags together",
                          CONF_MIXTURES_MAX);
    for (int i = 0; i < CONF_KEY_COUNT; i++) {
        const struct keydef *k = &keys[i];

        if (!conf_is_set(src, k->key))
            continue;
        if (k->kind == K_DATASET) {
            for (unsigned j = 0; j < src->n_datasets; j++) {
                const struct conf_dataset *s = &src->datasets[j];
                struct conf_dataset *d = (struct conf_dataset *)conf_find_dataset(dst, s->name);

                if (!d)
                    d = &dst->datasets[dst->n_datasets++];
                *d = *s;
            }
        } else if (k->kind == K_PLUGIN) {
            for (unsigned j = 0; j < src->n_plugins; j++) {
                const struct conf_plugin *s = &src->plugins[j];
                struct conf_plugin *d =
                    (struct conf_plugin *)conf_find_plugin(dst, s->name, strlen(s->name));

                if (!d)
                    d = &dst->plugins[dst->n_plugins++];
                *d = *s;
            }
        } else if (k->kind == K_MIXTURE) {
            for (unsigned j = 0; j < src->n_mixtures; j++) {
                const struct conf_mixture *s = &src->mixtures[j];
                struct conf_mixture *d = (struct conf_mixture *)conf_find_mixture(dst, s->name);

                if (!d)
                    d = &dst->mixtures[dst->n_mixtures++];
                *d = *s;
            }
        } else if (k->kind == K_RECIPE) {
            for (unsigned j = 0; j < src->n_recipes; j++) {
                const struct conf_recipe *s = &src->recipes[j];
                struct conf_recipe *d =
                    (struct conf_recipe *)conf_find_recipe(dst, s->name, strlen(s->name));

                if (!d)
                    d = &dst->recipes[dst->n_recipes++];
                *d = *s;
            }
        } else {
            memcpy((char *)dst + k->off, (const char *)src + k->off, k->width);
            if (k->kind == K_IDS || k->kind == K_WEIGHTS)
                memcpy((char *)dst + k->count_off, (const char *)src + k->count_off,
                       sizeof(unsigned));
            if (k->kind == K_WORKERS)
                dst->workers_auto = src->workers_auto;
        }
        dst->set |= 1u << k->key;
    }
    return 0;
}

/* A size as conf_parse_size reads it, in the largest unit that is exact. */
static void format_size(uint64_t b, char *v, size_t cap)
{
    static const char units[] = "KMGT";
    int u = -1;

    while (u < 3 && b != 0 && b % 1024 == 0)
        b /= 1024, u++;
    /* two calls rather than "%.*s" over a conditional pointer, which
     * crashes GCC 12's format checker at -O0 (buildtype=plain/debug) */
    if (u >= 0)
        snprintf(v, cap, "%llu%c", (unsigned long long)b, units[u]);
    else
        snprintf(v, cap, "%llu", (unsigned long long)b);
}

/* Writes "name = value" for row k; -ENOSPC. */
static int format_key(const struct keydef *k, const struct conf *c, char *buf, size_t cap,
                      size_t *used)
{
    const char *field = (const char *)c + k->off;
    char v[CONF_LINE_MAX];
    size_t vu = 0;
    int n;

    v[0] = '\0';
    switch (k->kind) {
    case K_PATH:
    case K_GROUP:
    case K_NAME:
    case K_ENDPOINT:
    case K_REGION:
        snprintf(v, sizeof(v), "%s", field);
        break;
    case K_MODE:
        snprintf(v, sizeof(v), "0%03o", *(const uint32_t *)field);
        break;
    case K_WORKERS:
        if (c->workers_auto)
            snprintf(v, sizeof(v), "auto");
        else
            snprintf(v, sizeof(v), "%u", *(const uint32_t *)field);
        break;
    case K_UINT:
        snprintf(v, sizeof(v), "%llu",
                 k->width == sizeof(uint32_t) ? (unsigned long long)*(const uint32_t *)field
                                              : (unsigned long long)*(const uint64_t *)field);
        break;
    case K_SIZE:
        format_size(*(const uint64_t *)field, v, sizeof(v));
        break;
    case K_CAP: {
        const struct conf_cap *cp = (const struct conf_cap *)field;

        if (cp->percent) {
            snprintf(v, sizeof(v), "%u%%", cp->percent);
            break;
        }
        format_size(cp->bytes, v, sizeof(v));
        break;
    }
    case K_LEVEL:
        snprintf(v, sizeof(v), "%s", conf_log_level_name(c->log_level));
        break;
    case K_EVICT:
        snprintf(v, sizeof(v), "%s", conf_cache_evict_name(c->cache_evict));
        break;
    case K_CPUS:
        if (cpus_format_list((const uint64_t *)field, (unsigned)(k->max + 1), v, sizeof(v)) < 0)
            return -ENOSPC;
        break;
    case K_IDS: {
        unsigned cnt = *(const unsigned *)((const char *)c + k->count_off);

        for (unsigned i = 0; i < cnt && vu < sizeof(v); i++)
            vu += (size_t)snprintf(v + vu, sizeof(v) - vu, "%s%u", i ? ", " : "",
                                   ((const uint32_t *)field)[i]);
        break;
    }
    case K_WEIGHTS:
        for (unsigned i = 0; i < c->n_weights && vu < sizeof(v); i++) {
            const struct conf_weight *w = &c->weights[i];

            if (w->by_uid)
                vu += (size_t)snprintf(v + vu, sizeof(v) - vu, "%suid:%u=%u", i ? ", " : "",
                                       w->uid, w->weight);
            else
                vu += (size_t)snprintf(v + vu, sizeof(v) - vu, "%sname:%s=%u", i ? ", " : "",
                                       w->name, w->weight);
            if (w->max && vu < sizeof(v))
                vu += (size_t)snprintf(v + vu, sizeof(v) - vu, "/%u", w->max);
        }
        break;
    case K_DATASET:
        for (unsigned i = 0; i < c->n_datasets; i++) {
            n = snprintf(buf + *used, cap - *used, "dataset.%s = %s\n", c->datasets[i].name,
                         c->datasets[i].dir);
            if (n < 0 || (size_t)n >= cap - *used)
                return -ENOSPC;
            *used += (size_t)n;
        }
        return 0;
    case K_PLUGIN:
        for (unsigned i = 0; i < c->n_plugins; i++) {
            n = snprintf(buf + *used, cap - *used, "plugin.%s = %s\n", c->plugins[i].name,
                         c->plugins[i].path);
            if (n < 0 || (size_t)n >= cap - *used)
                return -ENOSPC;
            *used += (size_t)n;
        }
        return 0;
    case K_RECIPE:
        for (unsigned i = 0; i < c->n_recipes; i++) {
            n = snprintf(buf + *used, cap - *used, "recipe.%s = %s\n", c->recipes[i].name,
                         c->recipes[i].spec);
            if (n < 0 || (size_t)n >= cap - *used)
                return -ENOSPC;
            *used += (size_t)n;
        }
        return 0;
    case K_MIXTURE:
        for (unsigned i = 0; i < c->n_mixtures; i++) {
            n = snprintf(buf + *used, cap - *used, "mixture.%s = %s\n", c->mixtures[i].name,
                         c->mixtures[i].mix);
            if (n < 0 || (size_t)n >= cap - *used)
                return -ENOSPC;
            *used += (size_t)n;
        }
        return 0;
    }
    n = snprintf(buf + *used, cap - *used, "%s = %s\n", k->name, v);
    if (n < 0 || (size_t)n >= cap - *used)
        return -ENOSPC;
    *used += (size_t)n;
    return 0;
}

int conf_format(const struct conf *c, char *buf, size_t cap)
{
    size_t used = 0;

    if (cap == 0)
        return -ENOSPC;
    buf[0] = '\0';
    for (int i = 0; i < CONF_KEY_COUNT; i++) {
        if (!conf_is_set(c, keys[i].key))
            continue;
        if (format_key(&keys[i], c, buf, cap, &used) < 0)
            return -ENOSPC;
    }
    return (int)used;
}

bool conf_equal(const struct conf *a, const struct conf *b)
{
    if (a->set != b->set || strcmp(a->socket, b->socket) != 0 || a->workers != b->workers ||
        a->workers_auto != b->workers_auto || a->cpu_budget != b->cpu_budget ||
        a->memory_budget != b->memory_budget || a->log_level != b->log_level ||
        a->watchdog_sec != b->watchdog_sec || a->max_bad_samples != b->max_bad_samples ||
        a->pixel_cap != b->pixel_cap || a->socket_mode != b->socket_mode ||
        strcmp(a->socket_group, b->socket_group) != 0 || a->max_clients != b->max_clients ||
        a->max_connections != b->max_connections || a->idle_sec != b->idle_sec ||
        a->n_allow_uid != b->n_allow_uid ||
        a->n_allow_gid != b->n_allow_gid || a->n_datasets != b->n_datasets ||
        a->n_weights != b->n_weights || a->max_weight != b->max_weight ||
        a->memory_per_client.bytes != b->memory_per_client.bytes ||
        a->memory_per_client.percent != b->memory_per_client.percent ||
        a->memory_per_uid.bytes != b->memory_per_uid.bytes ||
        a->memory_per_uid.percent != b->memory_per_uid.percent ||
        a->n_recipes != b->n_recipes || a->n_plugins != b->n_plugins ||
        a->n_mixtures != b->n_mixtures ||
        strcmp(a->name, b->name) != 0 || conf_numa_node(a) != conf_numa_node(b) ||
        memcmp(a->cpu_list, b->cpu_list, sizeof(a->cpu_list)) != 0 ||
        strcmp(a->cache_dir, b->cache_dir) != 0 || a->cache_size != b->cache_size ||
        strcmp(a->s3_endpoint, b->s3_endpoint) != 0 ||
        strcmp(a->s3_region, b->s3_region) != 0 || a->fetch_retries != b->fetch_retries ||
        a->cache_evict != b->cache_evict)
        return false;
    for (unsigned i = 0; i < a->n_plugins; i++)
        if (strcmp(a->plugins[i].name, b->plugins[i].name) != 0 ||
            strcmp(a->plugins[i].path, b->plugins[i].path) != 0)
            return false;
    for (unsigned i = 0; i < a->n_recipes; i++)
        if (strcmp(a->recipes[i].name, b->recipes[i].name) != 0 ||
            strcmp(a->recipes[i].spec, b->recipes[i].spec) != 0)
            return false;
    for (unsigned i = 0; i < a->n_mixtures; i++)
        if (strcmp(a->mixtures[i].name, b->mixtures[i].name) != 0 ||
            strcmp(a->mixtures[i].mix, b->mixtures[i].mix) != 0)
            return false;
    for (unsigned i = 0; i < a->n_weights; i++)
        if (a->weights[i].by_uid != b->weights[i].by_uid ||
            a->weights[i].uid != b->weights[i].uid ||
            a->weights[i].weight != b->weights[i].weight ||
            a->weights[i].max != b->weights[i].max ||
            strcmp(a->weights[i].name, b->weights[i].name) != 0)
            return false;
    if (memcmp(a->allow_uid, b->allow_uid, a->n_allow_uid * sizeof(a->allow_uid[0])) != 0 ||
        memcmp(a->allow_gid, b->allow_gid, a->n_allow_gid * sizeof(a->allow_gid[0])) != 0)
        return false;
    for (unsigned i = 0; i < a->n_datasets; i++)
        if (strcmp(a->datasets[i].name, b->datasets[i].name) != 0 ||
            strcmp(a->datasets[i].dir, b->datasets[i].dir) != 0)
            return false;
    return true;
}

int conf_check_table(struct rf_err *err)
{
    struct conf def, back; /* about 70 KiB each: call it at start-up, on the main stack */
    char text[1024];

    for (int i = 0; i < CONF_KEY_COUNT; i++) {
        const struct keydef *k = &keys[i];

        if (!k->name || (int)k->key != i)
            return rf_err_set(err, -EINVAL, "config key table: row %d is not key %d", i, i);
        if (k->min > k->max)
            return rf_err_set(err, -EINVAL, "config key %s: min above max", k->name);
        if (k->kind == K_UINT && k->width != sizeof(uint32_t) && k->width != sizeof(uint64_t))
            return rf_err_set(err, -EINVAL, "config key %s: field is not 4 or 8 bytes", k->name);
        if (k->kind == K_UINT && k->width == sizeof(uint32_t) && k->max > UINT32_MAX)
            return rf_err_set(err, -EINVAL, "config key %s: range past its field", k->name);
        if (k->kind == K_WORKERS &&
            (k->width != sizeof(uint32_t) || k->min < 1 || k->max > UINT32_MAX))
            return rf_err_set(err, -EINVAL, "config key %s: count field or range", k->name);
        if ((k->kind == K_PATH || k->kind == K_GROUP || k->kind == K_NAME ||
             k->kind == K_ENDPOINT || k->kind == K_REGION) &&
            k->max >= k->width)
            return rf_err_set(err, -EINVAL, "config key %s: path bound past its field",
                              k->name);
        if (k->kind == K_MODE && (k->width != sizeof(uint32_t) || k->max > 07777))
            return rf_err_set(err, -EINVAL, "config key %s: mode field or range", k->name);
        if (k->kind == K_WEIGHTS && k->width != CONF_WEIGHTS_MAX * sizeof(struct conf_weight))
            return rf_err_set(err, -EINVAL, "config key %s: list field size", k->name);
        if (k->kind == K_IDS && k->width != CONF_ALLOW_MAX * sizeof(uint32_t))
            return rf_err_set(err, -EINVAL, "config key %s: list field size", k->name);
        if (k->kind == K_CPUS && ((k->max + 1) % 64 || k->max + 1 > CPUS_LIST_BITS_MAX ||
                                  k->width != (k->max + 1) / 8))
            return rf_err_set(err, -EINVAL, "config key %s: bitmap field size", k->name);
        if (k->kind == K_CAP && k->width != sizeof(struct conf_cap))
            return rf_err_set(err, -EINVAL, "config key %s: cap field size", k->name);
        for (int j = 0; j < i; j++)
            if (strcmp(keys[j].name, k->name) == 0)
                return rf_err_set(err, -EINVAL, "config key %s appears twice", k->name);
    }
    if (CONF_PATH_MAX - 1 != keys[CONF_DATASET].max)
        return rf_err_set(err, -EINVAL, "config key dataset: bound is not CONF_PATH_MAX - 1");
    /* the defaults that have a value must read back as themselves */
    conf_defaults(&def);
    def.set = 1u << CONF_SOCKET | 1u << CONF_LOG_LEVEL | 1u << CONF_WATCHDOG_SEC |
              1u << CONF_MAX_BAD_SAMPLES | 1u << CONF_PIXEL_CAP | 1u << CONF_SOCKET_MODE |
              1u << CONF_MAX_CLIENTS | 1u << CONF_MAX_CONNECTIONS | 1u << CONF_IDLE_SEC |
              1u << CONF_MAX_WEIGHT | 1u << CONF_MEMORY_PER_CLIENT | 1u << CONF_MEMORY_PER_UID |
              1u << CONF_CACHE_DIR | 1u << CONF_CACHE_SIZE | 1u << CONF_FETCH_RETRIES;
    if (conf_format(&def, text, sizeof(text)) < 0)
        return rf_err_set(err, -EINVAL, "config defaults do not format");
    if (conf_parse(text, strlen(text), &back, err) < 0) {
        rf_err_prefix(err, "config defaults");
        return -EINVAL;
    }
    if (!conf_equal(&def, &back))
        return rf_err_set(err, -EINVAL, "config defaults do not read back as themselves");
    return 0;
}
