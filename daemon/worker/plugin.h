/*
 * plugin.h - the operator's own ops (daemon/plugin/ringfeed_transform.h):
 * a set of loaded plugins, as the config's plugin.NAME = PATH lines name
 * them, for both processes.  The main process loads the set at start and
 * at reload (a file that does not load, lacks the descriptor, has another
 * ABI or another name is refused naming it) and checks an ATTACH's
 * Plugin ops (the name configured, init accepting the params).  A worker
 * loads the same files at start (--plugin NAME=PATH) and runs the ops,
 * keeping one init'ed state per (plugin, params) it has seen.
 */
#ifndef RINGFEED_DAEMON_WORKER_PLUGIN_H
#define RINGFEED_DAEMON_WORKER_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aug.h"
#include "aug_spec.h"
#include "err.h"
#include "rng.h"

#define PLUGIN_MAX 16          /* plugin.NAME lines */
#define PLUGIN_PATH_MAX 1024   /* a plugin's path, NUL included */
#define PLUGIN_STATES_MAX 32   /* init'ed (plugin, params) a worker keeps */

struct ringfeed_transform_v1;

struct plugin {
    char name[AUG_NAME_MAX + 1];
    char path[PLUGIN_PATH_MAX];
    void *handle;                             /* dlopen's */
    const struct ringfeed_transform_v1 *t;    /* the descriptor in it */
};

/* An init'ed state: plugin index and params text, the state init gave. */
struct plugin_state {
    bool used;
    uint32_t plugin;
    char params[AUG_PARAM_TEXT_MAX + 1];
    void *state;
};

/* The loaded plugins (zero-initialize; plugin_set_free when done). */
struct plugin_set {
    unsigned n;
    struct plugin p[PLUGIN_MAX];
    struct plugin_state st[PLUGIN_STATES_MAX];
    unsigned next_evict;     /* round robin over st[] when it is full */
};

/*
 * Loads the plugin at path as name into *p: dlopen (RTLD_NOW | RTLD_LOCAL),
 * the descriptor ringfeed_transform_v1, its abi RINGFEED_TRANSFORM_ABI, its
 * name equal to name, init and apply set.  Returns 0, or a negative errno
 * with err naming the plugin, the file and what is wrong (nothing held).
 */
int plugin_load(struct plugin *p, const char *name, const char *path, struct rf_err *err);

/* Adds plugin name at path to s (plugin_load).  0 or a negative errno. */
int plugin_set_add(struct plugin_set *s, const char *name, const char *path,
                   struct rf_err *err);

/* Finis every state and closes every plugin of s; s is empty after. */
void plugin_set_free(struct plugin_set *s);

/* Whether a and b name the same plugins at the same paths, in order. */
bool plugin_set_same(const struct plugin_set *a, const struct plugin_set *b);

/* The index of plugin name[0..len) in s, or -1. */
int plugin_find(const struct plugin_set *s, const char *name, size_t len);

/* The configured names, space separated, into buf ("(none)" without any). */
void plugin_names(const struct plugin_set *s, char *buf, size_t cap);

/*
 * The main process's check of a spec's Plugin ops (ATTACH): each name one
 * of s, its params accepted by the plugin's init (then fini'ed at once).
 * Returns 0, or -EINVAL with err naming the plugin and saying why (an
 * unknown name lists the configured ones; a refused init gives the
 * plugin's own message).
 */
int plugin_check_spec(const struct plugin_set *s, const struct aug_spec *spec,
                      struct rf_err *err);

/*
 * Runs Plugin op o of spec on im with the sample's stream rng (a worker):
 * the plugin's state for the op's params (init'ed at first use, kept),
 * then its apply.  Returns 0, or -EINVAL with err (an unknown name, a
 * refused init, an apply that returned an error: a bad sample), or
 * -ENOMEM.
 */
int plugin_run(struct plugin_set *s, const struct aug_spec *spec, const struct aug_op *o,
               struct aug_img *im, struct rng_stream *rng, struct rf_err *err);

#endif
