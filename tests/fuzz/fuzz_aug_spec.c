/*
 * fuzz_aug_spec.c - an augmentation spec (proto/aug_spec.h) from arbitrary
 * bytes.
 *
 * Whatever the input: aug_spec_parse returns 0, or -EINVAL / -E2BIG with a
 * message and a zeroed spec, reading nothing past the input; when it
 * accepts, the canonical text formats, parses back to exactly the same
 * spec (memcmp), and formats again to the same text; or the target
 * aborts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aug_spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct aug_spec zero;
    struct aug_spec a, b;
    struct rf_err err;
    char t1[2 * AUG_SPEC_MAX], t2[2 * AUG_SPEC_MAX];
    int r, n1, n2;

    err.msg[0] = '\0';
    r = aug_spec_parse((const char *)data, size, &a, &err);
    if (r != 0) {
        if ((r != -EINVAL && r != -E2BIG) || !err.msg[0] || memcmp(&a, &zero, sizeof(a)))
            abort();
        return 0;
    }
    if (a.n == 0 || a.n > AUG_OPS_MAX)
        abort();
    n1 = aug_spec_format(&a, t1, sizeof(t1));
    if (n1 < 0 || (size_t)n1 != strlen(t1))
        abort();
    if (aug_spec_parse(t1, (size_t)n1, &b, &err) != 0 || memcmp(&a, &b, sizeof(a)) != 0)
        abort();
    n2 = aug_spec_format(&b, t2, sizeof(t2));
    if (n2 != n1 || memcmp(t1, t2, (size_t)n1) != 0)
        abort();
    return 0;
}
