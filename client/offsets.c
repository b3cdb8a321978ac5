/*
 * offsets.c - the check of a RAGGED column's offsets (ring.h VERSION 3)
 * before rf_batch_column hands them out; on its own so the fuzz target
 * (tests/fuzz/fuzz_client_offsets.c) links just this.
 */
#include <errno.h>
#include <inttypes.h>

#include "client.h"

int client_check_offsets(const struct ring_field *f, const int64_t *off, uint32_t count,
                         uint64_t stream_seq, struct rf_err *err)
{
    if (off[0] != 0)
        return rf_err_set(err, -EBADMSG,
                          "rf_batch_column: field %.*s of batch %" PRIu64 ": its first offset "
                          "is %" PRId64 ", not 0 (the ring's slot was written by this "
                          "process?)",
                          (int)RING_FIELD_NAME, f->name, stream_seq, off[0]);
    for (uint32_t i = 0; i < count; i++)
        if (off[i + 1] < off[i] || (uint64_t)off[i + 1] > f->capacity)
            return rf_err_set(err, -EBADMSG,
                              "rf_batch_column: field %.*s of batch %" PRIu64 ": sample %u's "
                              "rows run from offset %" PRId64 " to %" PRId64 ", outside 0..%"
                              PRIu64 " or backwards (the ring's slot was written by this "
                              "process?)",
                              (int)RING_FIELD_NAME, f->name, stream_seq, i, off[i], off[i + 1],
                              f->capacity);
    return 0;
}
