/* errcodes.c - lookups over CTL_ERRCODE_MAP and its start-up check. */
#include "errcodes.h"

#include <string.h>

struct errcode_def {
    enum ctl_errcode code;
    const char *name;
    int err;
    const char *msg;
};

static const struct errcode_def defs[] = {
#define CTL_ERRCODE_DEF_(sym, num, name, err, msg) {CTL_E_##sym, name, err, msg},
    CTL_ERRCODE_MAP(CTL_ERRCODE_DEF_)
#undef CTL_ERRCODE_DEF_
};

#define NDEFS (sizeof(defs) / sizeof(defs[0]))

static const struct errcode_def *find(enum ctl_errcode code)
{
    for (size_t i = 0; i < NDEFS; i++)
        if (defs[i].code == code)
            return &defs[i];
    return NULL;
}

enum ctl_errcode ctl_errcode_from_name(const char *name, size_t len)
{
    for (size_t i = 0; i < NDEFS; i++)
        if (strlen(defs[i].name) == len && memcmp(defs[i].name, name, len) == 0)
            return defs[i].code;
    return CTL_E_NONE;
}

const char *ctl_errcode_name(enum ctl_errcode code)
{
    const struct errcode_def *d = find(code);

    return d ? d->name : NULL;
}

int ctl_errcode_errno(enum ctl_errcode code)
{
    const struct errcode_def *d = find(code);

    return d ? d->err : -EPROTO;
}

const char *ctl_errcode_message(enum ctl_errcode code)
{
    const struct errcode_def *d = find(code);

    return d ? d->msg : NULL;
}

static int name_ok(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n > CTL_ERRCODE_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];

        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return 0;
    }
    return 1;
}

int ctl_errcode_check(struct rf_err *err)
{
    for (size_t i = 0; i < NDEFS; i++) {
        const struct errcode_def *d = &defs[i];

        if ((int)d->code <= 0)
            return rf_err_set(err, -EINVAL, "error code row %zu: number %d is not positive",
                              i, (int)d->code);
        if (!name_ok(d->name))
            return rf_err_set(err, -EINVAL,
                              "error code %d: name \"%s\" is not 1..%d bytes of [a-z0-9-]",
                              (int)d->code, d->name, CTL_ERRCODE_NAME_MAX);
        if (d->err >= 0)
            return rf_err_set(err, -EINVAL, "error code %s: errno %d is not negative",
                              d->name, d->err);
        if (!d->msg || !d->msg[0])
            return rf_err_set(err, -EINVAL, "error code %s: no message", d->name);
        for (size_t j = 0; j < i; j++) {
            if (defs[j].code == d->code)
                return rf_err_set(err, -EINVAL, "error codes %s and %s share number %d",
                                  defs[j].name, d->name, (int)d->code);
            if (strcmp(defs[j].name, d->name) == 0)
                return rf_err_set(err, -EINVAL, "error code name %s appears twice",
                                  d->name);
        }
    }
    return 0;
}
