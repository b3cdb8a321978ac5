/*
 * fuzz_subset.c - a subset file (proto/subset.h) from arbitrary bytes.
 *
 * Input: the file itself; the dataset's sample count is the first run's
 * end bound tried twice: 2^64 - 1 and the count the header names plus
 * 1000 (so most well-formed inputs pass one and meet the range check in
 * the other).  Whatever the input: subset_parse returns 0 or -EBADMSG
 * with a message and reads nothing past the input; when it accepts, the
 * set's indices rise strictly, lie below the sample count, number count,
 * and encode back to exactly the input (one encoding per set); or the
 * target aborts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "subset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *data, size_t size, uint64_t samples)
{
    struct subset s;
    struct rf_err err;
    uint8_t *enc;
    size_t len;
    int r;

    err.msg[0] = '\0';
    r = subset_parse(data, size, samples, &s, &err);
    if (r != 0 && (r != -EBADMSG || !err.msg[0]) && r != -ENOMEM)
        abort();
    if (r != 0)
        return;
    for (uint64_t p = 0, prev = 0; p < s.n; p++) {
        uint64_t i = subset_at(&s, p);

        if (i >= samples || (p > 0 && i <= prev))
            abort();
        prev = i;
    }
    if (subset_at(&s, s.n) != SUBSET_NONE)
        abort();
    if (subset_encode(&s, &enc, &len) < 0)
        abort();
    if (len != size || memcmp(enc, data, size) != 0)
        abort(); /* the one encoding of the set */
    free(enc);
    subset_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t count = 0;

    check(data, size, UINT64_MAX);
    if (size >= 16)
        for (int i = 7; i >= 0; i--)
            count = count << 8 | data[8 + i];
    if (count < UINT64_MAX - 1000)
        check(data, size, count + 1000);
    return 0;
}
