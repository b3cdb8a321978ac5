/*
 * fuzz_client_offsets.c - fuzz target for the check libringfeed makes of a
 * RAGGED column's offsets before handing them out (client/offsets.c).  The
 * input is a field's capacity (8 bytes little endian) then offsets (8
 * bytes each, little endian); count is one less than the offsets given.
 * The check must read no offset past count (the array is exactly count +
 * 1 long, so ASan catches one), and accept exactly the offsets that start
 * at 0, never decrease and end within the capacity (abort otherwise).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ring_field f = {.name = "fuzz", .kind = RING_FIELD_RAGGED, .item_bytes = 1};
    struct rf_err err = {{0}};
    size_t n = size >= 8 ? (size - 8) / 8 : 0;
    int64_t *off;
    int ok = 1, rc;

    if (n < 1 || n > RING_MAX_BATCH + 1)
        return 0;
    memcpy(&f.capacity, data, 8);
    off = malloc(n * sizeof(*off));
    if (!off)
        return 0;
    memcpy(off, data + 8, n * sizeof(*off));
    ok = off[0] == 0;
    for (size_t i = 1; ok && i < n; i++)
        ok = off[i] >= off[i - 1] && (uint64_t)off[i] <= f.capacity;
    rc = client_check_offsets(&f, off, (uint32_t)(n - 1), 0, &err);
    if ((rc == 0) != ok || (rc < 0 && !err.msg[0]))
        abort();
    free(off);
    return 0;
}
