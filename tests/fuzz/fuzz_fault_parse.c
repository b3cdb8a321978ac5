/*
 * fuzz_fault_parse.c - fuzz target for the RINGFEED_FAULT parser
 * (proto/fault.h).  Every input either fails with -EINVAL and a message
 * about RINGFEED_FAULT, leaving no rule armed, or parses; parsed rules,
 * written back as POINT:N / POINT:every-N, parse to the same rules.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fault_rule rules[FAULT_POINTS], back[FAULT_POINTS];
    char spec[4096], text[1024];
    size_t len = 0;
    struct rf_err err;
    int r;

    if (size >= sizeof(spec))
        return 0;
    memcpy(spec, data, size);
    spec[size] = '\0';
    r = fault_parse(spec, rules, &err);
    if (r < 0) {
        if (r != -EINVAL || strncmp(err.msg, "RINGFEED_FAULT", 14) != 0)
            abort();
        for (unsigned p = 0; p < FAULT_POINTS; p++)
            if (rules[p].n)
                abort();
        return 0;
    }
    for (unsigned p = 0; p < FAULT_POINTS; p++) {
        if (!rules[p].n)
            continue;
        len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%s:%s%llu", len ? "," : "",
                                fault_point_name(p), rules[p].every ? "every-" : "",
                                (unsigned long long)rules[p].n);
    }
    if (len == 0 || fault_parse(text, back, &err) < 0 || memcmp(rules, back, sizeof(rules)) != 0)
        abort();
    return 0;
}
