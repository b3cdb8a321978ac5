/*
 * fault.c - the RINGFEED_FAULT parser and the per-process counters behind
 * fault_hit() (fault.h).
 */
#include "fault.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "strnum.h"

static const char *const names[FAULT_POINTS] = {
    [FAULT_READ] = "read",
    [FAULT_ALLOC] = "alloc",
    [FAULT_MEMFD] = "memfd",
    [FAULT_MMAP] = "mmap",
    [FAULT_SEND] = "send",
    [FAULT_ACCEPT] = "accept",
    [FAULT_RINGWAIT] = "ringwait",
};

const char *fault_point_name(enum fault_point p)
{
    return (unsigned)p < FAULT_POINTS ? names[p] : NULL;
}

#define RULE_MAX 64

/* One RULE (rule[0..len)), into rules. */
static int parse_rule(const char *rule, size_t len, struct fault_rule rules[FAULT_POINTS],
                      struct rf_err *err)
{
    const char *colon = memchr(rule, ':', len);
    const char *n;
    size_t nlen;
    bool every = false;
    uint64_t v;
    unsigned p;

    if (len > RULE_MAX)
        return rf_err_set(err, -EINVAL, "RINGFEED_FAULT: a rule of %zu bytes; at most %d",
                          len, RULE_MAX);
    if (!colon)
        return rf_err_set(err, -EINVAL, "RINGFEED_FAULT: \"%.*s\" is not POINT:N or "
                          "POINT:every-N", (int)len, rule);
    for (p = 0; p < FAULT_POINTS; p++)
        if ((size_t)(colon - rule) == strlen(names[p]) &&
            memcmp(rule, names[p], (size_t)(colon - rule)) == 0)
            break;
    if (p == FAULT_POINTS)
        return rf_err_set(err, -EINVAL, "RINGFEED_FAULT: no point \"%.*s\"; the points are "
                          "read alloc memfd mmap send accept", (int)(colon - rule), rule);
    n = colon + 1;
    nlen = len - (size_t)(n - rule);
    if (nlen > 6 && memcmp(n, "every-", 6) == 0) {
        every = true;
        n += 6;
        nlen -= 6;
    }
    if (strnum_u64(n, nlen, &v) < 0 || v == 0)
        return rf_err_set(err, -EINVAL, "RINGFEED_FAULT: \"%.*s\": N must be a whole number "
                          "from 1", (int)len, rule);
    if (rules[p].n)
        return rf_err_set(err, -EINVAL, "RINGFEED_FAULT: point %s named twice", names[p]);
    rules[p] = (struct fault_rule){ .n = v, .every = every };
    return 0;
}

int fault_parse(const char *spec, struct fault_rule rules[FAULT_POINTS], struct rf_err *err)
{
    const char *s = spec;

    memset(rules, 0, sizeof(*rules) * FAULT_POINTS);
    if (!*s)
        return rf_err_set(err, -EINVAL, "RINGFEED_FAULT is empty; unset it for no faults");
    for (;;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        int r = parse_rule(s, len, rules, err);

        if (r < 0) {
            memset(rules, 0, sizeof(*rules) * FAULT_POINTS);
            return r;
        }
        if (!end)
            return 0;
        s = end + 1;
    }
}

#if RINGFEED_FAULTS
static struct fault_rule armed[FAULT_POINTS];
static uint64_t calls[FAULT_POINTS];

int fault_init(struct rf_err *err)
{
    const char *spec = getenv("RINGFEED_FAULT");
    size_t len = 0;
    int r;

    if (!spec)
        return 0;
    r = fault_parse(spec, armed, err);
    if (r < 0)
        return r;
    err->msg[0] = '\0';
    for (unsigned p = 0; p < FAULT_POINTS; p++) {
        int n;

        if (!armed[p].n)
            continue;
        n = snprintf(err->msg + len, sizeof(err->msg) - len, "%s%s call %s%llu", len ? ", " : "",
                     names[p], armed[p].every ? "every " : "", (unsigned long long)armed[p].n);
        if (n > 0 && (size_t)n < sizeof(err->msg) - len)
            len += (size_t)n;
    }
    return 1;
}

bool fault_hit(enum fault_point p)
{
    const struct fault_rule *r = &armed[p];
    uint64_t c;

    if (!r->n)
        return false;
    c = ++calls[p];
    return r->every ? c % r->n == 0 : c == r->n;
}
#endif
