/*
 * catalog.c - the datasets this daemon serves, by name.
 *
 * Clients name datasets, never paths: the daemon opens only what its config
 * (or --dataset flags) lists.  The main process opens each dataset once at
 * start-up to validate it and learn its size and shape; it never decodes a
 * record.  Workers open the same folders themselves.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"

int catalog_open(struct daemon *d)
{
    d->cat = calloc(d->cf.n_datasets ? d->cf.n_datasets : 1, sizeof(*d->cat));
    if (!d->cat)
        return -ENOMEM;
    for (uint32_t i = 0; i < d->cf.n_datasets; i++) {
        struct catalog_entry *e = &d->cat[i];
        const struct dataset_info *info;
        struct rf_err err;
        int rc;

        snprintf(e->name, sizeof(e->name), "%s", d->cf.datasets[i].name);
        snprintf(e->dir, sizeof(e->dir), "%s", d->cf.datasets[i].dir);
        rc = dataset_open(e->dir, &e->ds, &err);
        if (rc < 0) {
            log_error("dataset %s: %s", e->name, err.msg);
            return rc;
        }
        d->ncat = i + 1;
        info = dataset_info(e->ds);
        log_info("dataset %s: %s, %llu samples of %s, %u classes", e->name, e->dir,
                 (unsigned long long)info->samples, dataset_kind_name(info->kind),
                 info->classes);
    }
    return 0;
}

void catalog_close(struct daemon *d)
{
    for (uint32_t i = 0; i < d->ncat; i++)
        dataset_close(d->cat[i].ds);
    free(d->cat);
    d->cat = NULL;
    d->ncat = 0;
}

int catalog_find(const struct daemon *d, const char *name)
{
    for (uint32_t i = 0; i < d->ncat; i++)
        if (strcmp(d->cat[i].name, name) == 0)
            return (int)i;
    return -ENOENT;
}

void catalog_names(const struct daemon *d, char *buf, size_t cap)
{
    size_t len = 0;

    buf[0] = '\0';
    for (uint32_t i = 0; i < d->ncat && len < cap; i++) {
        int n = snprintf(buf + len, cap - len, "%s%s", i ? " " : "", d->cat[i].name);

        if (n < 0)
            break;
        len += (size_t)n;
    }
}
