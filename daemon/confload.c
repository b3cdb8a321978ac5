/*
 * confload.c - a config file's drop-in folder, and one file laid over
 * another (confload.h).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "confload.h"

static int by_name(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

int confload_dropins(const char *path, char (*names)[4096], unsigned cap, struct rf_err *err)
{
    char dir[4096];
    struct dirent *e;
    unsigned n = 0;
    DIR *d;

    if ((size_t)snprintf(dir, sizeof(dir), "%s.d", path) >= sizeof(dir))
        return rf_err_set(err, -ENAMETOOLONG, "%s.d: path too long", path);
    d = opendir(dir);
    if (!d)
        return errno == ENOENT || errno == ENOTDIR
                   ? 0
                   : rf_err_set(err, -errno, "%s: %s", dir, strerror(errno));
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);

        /* "*.conf", not hidden (an editor's or a package manager's leftovers) */
        if (e->d_name[0] == '.' || len <= 5 || strcmp(e->d_name + len - 5, ".conf") != 0)
            continue;
        if (n == cap) {
            closedir(d);
            return rf_err_set(err, -E2BIG, "%s: more than %u *.conf files", dir, cap);
        }
        if ((size_t)snprintf(names[n], sizeof(names[n]), "%s/%s", dir, e->d_name) >=
            sizeof(names[n])) {
            closedir(d);
            return rf_err_set(err, -ENAMETOOLONG, "%s/%s: path too long", dir, e->d_name);
        }
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), by_name);
    return (int)n;
}

int confload_layer(struct conf *dst, const struct conf *src, const char *file,
                   confload_note_fn *note, void *arg, struct rf_err *err)
{
    if (note) {
        for (int k = 0; k < CONF_KEY_COUNT; k++) {

            if (k == CONF_DATASET || k == CONF_RECIPE || k == CONF_PLUGIN || k == CONF_MIXTURE ||
                !conf_is_set(src, (enum conf_key)k) || !conf_is_set(dst, (enum conf_key)k))
                continue;
            note(arg, conf_key_name((enum conf_key)k), file);
        }
        for (unsigned i = 0; i < src->n_datasets; i++) {
            char what[sizeof("dataset.") + sizeof(src->datasets[i].name)];

            if (!conf_find_dataset(dst, src->datasets[i].name))
                continue;
            snprintf(what, sizeof(what), "dataset.%s", src->datasets[i].name);
            note(arg, what, file);
        }
        for (unsigned i = 0; i < src->n_recipes; i++) {
            char what[sizeof("recipe.") + sizeof(src->recipes[i].name)];
            const char *name = src->recipes[i].name;

            if (!conf_find_recipe(dst, name, strlen(name)))
                continue;
            snprintf(what, sizeof(what), "recipe.%s", name);
            note(arg, what, file);
        }
        for (unsigned i = 0; i < src->n_mixtures; i++) {
            char what[sizeof("mixture.") + sizeof(src->mixtures[i].name)];

            if (!conf_find_mixture(dst, src->mixtures[i].name))
                continue;
            snprintf(what, sizeof(what), "mixture.%s", src->mixtures[i].name);
            note(arg, what, file);
        }
        for (unsigned i = 0; i < src->n_plugins; i++) {
            char what[sizeof("plugin.") + sizeof(src->plugins[i].name)];
            const char *name = src->plugins[i].name;

            if (!conf_find_plugin(dst, name, strlen(name)))
                continue;
            snprintf(what, sizeof(what), "plugin.%s", name);
            note(arg, what, file);
        }
    }
    return conf_merge(dst, src, err);
}
