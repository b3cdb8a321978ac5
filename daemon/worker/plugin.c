/*
 * plugin.c - loading the operator's plugins and running them (plugin.h):
 * dlopen and the descriptor's checks, the ATTACH check, and a worker's
 * per-params states.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "plugin.h"
#include "ringfeed_transform.h"

#define MSG_MAX 200 /* bytes of a plugin's own message */

int plugin_load(struct plugin *p, const char *name, const char *path, struct rf_err *err)
{
    const struct ringfeed_transform_v1 *t;
    void *h;
    const char *why;

    memset(p, 0, sizeof(*p));
    if (strlen(name) > AUG_NAME_MAX || strlen(path) >= PLUGIN_PATH_MAX)
        return rf_err_set(err, -ENAMETOOLONG, "plugin.%.40s = %.200s: name or path too long",
                          name, path);
    if (path[0] != '/')
        return rf_err_set(err, -EINVAL, "plugin.%s = %s: the path must be absolute", name,
                          path);
    dlerror();
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        why = dlerror();
        return rf_err_set(err, -ENOENT, "plugin.%s = %s: cannot load it: %s", name, path,
                          why ? why : "dlopen failed");
    }
    t = dlsym(h, RINGFEED_TRANSFORM_SYMBOL);
    if (!t)
        why = "it does not export " RINGFEED_TRANSFORM_SYMBOL " (see ringfeed_transform.h)";
    else if (t->abi != RINGFEED_TRANSFORM_ABI)
        why = "its ABI version is not this ringfeedd's";
    else if (!t->name || strcmp(t->name, name) != 0)
        why = "its descriptor's name is not the NAME of its plugin.NAME line";
    else if (!t->init || !t->apply)
        why = "its descriptor lacks init or apply";
    else
        why = NULL;
    if (why) {
        int rc;

        if (t && t->abi != RINGFEED_TRANSFORM_ABI)
            rc = rf_err_set(err, -EINVAL, "plugin.%s = %s: %s (it says %u, ringfeedd takes %d)",
                            name, path, why, t->abi, RINGFEED_TRANSFORM_ABI);
        else if (t && t->name && strcmp(t->name, name) != 0)
            rc = rf_err_set(err, -EINVAL, "plugin.%s = %s: %s (it calls itself \"%.40s\")",
                            name, path, why, t->name);
        else
            rc = rf_err_set(err, -EINVAL, "plugin.%s = %s: %s", name, path, why);
        dlclose(h);
        return rc;
    }
    snprintf(p->name, sizeof(p->name), "%s", name);
    snprintf(p->path, sizeof(p->path), "%s", path);
    p->handle = h;
    p->t = t;
    return 0;
}

int plugin_set_add(struct plugin_set *s, const char *name, const char *path,
                   struct rf_err *err)
{
    int rc;

    if (s->n == PLUGIN_MAX)
        return rf_err_set(err, -E2BIG, "plugin.%s: more than %d plugins", name, PLUGIN_MAX);
    if (plugin_find(s, name, strlen(name)) >= 0)
        return rf_err_set(err, -EEXIST, "plugin.%s: given twice", name);
    rc = plugin_load(&s->p[s->n], name, path, err);
    if (rc < 0)
        return rc;
    s->n++;
    return 0;
}

void plugin_set_free(struct plugin_set *s)
{
    for (unsigned i = 0; i < PLUGIN_STATES_MAX; i++) {
        struct plugin_state *st = &s->st[i];

        if (st->used && st->plugin < s->n && s->p[st->plugin].t->fini)
            s->p[st->plugin].t->fini(st->state);
    }
    for (unsigned i = 0; i < s->n; i++)
        dlclose(s->p[i].handle);
    memset(s, 0, sizeof(*s));
}

bool plugin_set_same(const struct plugin_set *a, const struct plugin_set *b)
{
    if (a->n != b->n)
        return false;
    for (unsigned i = 0; i < a->n; i++)
        if (strcmp(a->p[i].name, b->p[i].name) != 0 || strcmp(a->p[i].path, b->p[i].path) != 0)
            return false;
    return true;
}

int plugin_find(const struct plugin_set *s, const char *name, size_t len)
{
    for (unsigned i = 0; i < s->n; i++)
        if (strlen(s->p[i].name) == len && memcmp(s->p[i].name, name, len) == 0)
            return (int)i;
    return -1;
}

void plugin_names(const struct plugin_set *s, char *buf, size_t cap)
{
    size_t used = 0;

    if (cap == 0)
        return;
    snprintf(buf, cap, "%s", s->n ? "" : "(none)");
    for (unsigned i = 0; i < s->n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? " " : "", s->p[i].name);
}

/* The plugin op o names, its index in s; -EINVAL with err when unknown. */
static int op_plugin(const struct plugin_set *s, const struct aug_spec *spec,
                     const struct aug_op *o, const char **params, struct rf_err *err)
{
    const char *name = aug_param_text(spec, &o->a[AUG_PLUGIN_NAME]);
    char names[PLUGIN_MAX * (AUG_NAME_MAX + 1) + 8];
    int i;

    *params = aug_param_text(spec, &o->a[AUG_PLUGIN_PARAMS]);
    if (!name || !*params)
        return rf_err_set(err, -EINVAL, "augment: Plugin: its text values are damaged");
    i = plugin_find(s, name, strlen(name));
    if (i < 0) {
        plugin_names(s, names, sizeof(names));
        return rf_err_set(err, -EINVAL, "augment: Plugin: no plugin named %s in this daemon's "
                          "config; its plugins: %s", name, names);
    }
    return i;
}

/* init of plugin p on params: 0 and *state, or -EINVAL with its message. */
static int init(const struct plugin *p, const char *params, void **state, struct rf_err *err)
{
    char msg[MSG_MAX] = "";

    *state = NULL;
    if (p->t->init(params, state, msg, sizeof(msg)) != 0) {
        msg[sizeof(msg) - 1] = '\0';
        return rf_err_set(err, -EINVAL, "augment: Plugin %s refused params=%s: %s", p->name,
                          params, msg[0] ? msg : "(no message)");
    }
    return 0;
}

int plugin_check_spec(const struct plugin_set *s, const struct aug_spec *spec,
                      struct rf_err *err)
{
    for (uint32_t i = 0; i < spec->n && i < AUG_OPS_MAX; i++) {
        const struct aug_op *o = &spec->op[i];
        const struct plugin *p;
        const char *params;
        void *state;
        int k;

        if (o->id != AUG_PLUGIN)
            continue;
        k = op_plugin(s, spec, o, &params, err);
        if (k < 0)
            return k;
        p = &s->p[k];
        if (init(p, params, &state, err) < 0)
            return -EINVAL;
        if (p->t->fini)
            p->t->fini(state);
    }
    return 0;
}

/* The daemon's side of struct ringfeed_rng: ctx is the sample's stream. */
static uint64_t draw_u64(void *ctx)
{
    return rng_u64(ctx);
}

/* The state of plugin k for params: kept, or init'ed into a free (or the
 * round robin's) entry.  NULL with err when init refuses. */
static struct plugin_state *state_for(struct plugin_set *s, uint32_t k, const char *params,
                                      struct rf_err *err)
{
    struct plugin_state *st = NULL;
    void *state;

    for (unsigned i = 0; i < PLUGIN_STATES_MAX; i++) {
        if (s->st[i].used && s->st[i].plugin == k && strcmp(s->st[i].params, params) == 0)
            return &s->st[i];
        if (!st && !s->st[i].used)
            st = &s->st[i];
    }
    if (init(&s->p[k], params, &state, err) < 0)
        return NULL;
    if (!st) {
        st = &s->st[s->next_evict];
        s->next_evict = (s->next_evict + 1) % PLUGIN_STATES_MAX;
        if (s->p[st->plugin].t->fini)
            s->p[st->plugin].t->fini(st->state);
    }
    st->used = true;
    st->plugin = k;
    snprintf(st->params, sizeof(st->params), "%s", params);
    st->state = state;
    return st;
}

int plugin_run(struct plugin_set *s, const struct aug_spec *spec, const struct aug_op *o,
               struct aug_img *im, struct rng_stream *rng, struct rf_err *err)
{
    struct ringfeed_image view = {im->px, im->w, im->h, im->c,
                                  im->layout == AUG_CHW ? RINGFEED_CHW : RINGFEED_HWC};
    struct ringfeed_rng r = {draw_u64, rng};
    struct plugin_state *st;
    const struct plugin *p;
    const char *params;
    char msg[MSG_MAX] = "";
    int k = op_plugin(s, spec, o, &params, err);

    if (k < 0)
        return k;
    st = state_for(s, (uint32_t)k, params, err);
    if (!st)
        return -EINVAL;
    p = &s->p[k];
    if (p->t->apply(st->state, &view, &r, msg, sizeof(msg)) != 0) {
        msg[sizeof(msg) - 1] = '\0';
        return rf_err_set(err, -EINVAL, "augment: Plugin %s failed: %s", p->name,
                          msg[0] ? msg : "(no message)");
    }
    return 0;
}
