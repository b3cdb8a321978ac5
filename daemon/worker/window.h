/*
 * window.h - transform `tokens`: a sample is a window of context + 1
 * consecutive tokens of a token dataset's concatenated documents, window i
 * starting at token i * context (docs/design/tokens.md).  Its geometry
 * for the transform table, and the worker's read of one window: the
 * pieces of documents it spans, each read by the io layer straight into
 * the window's place in the slot (no staging buffer), and the doc_ids
 * column written from the same walk.
 */
#ifndef RINGFEED_DAEMON_WINDOW_H
#define RINGFEED_DAEMON_WINDOW_H

#include <stdint.h>

#include "dataset.h"
#include "err.h"
#include "io.h"
#include "token_index.h"
#include "transform.h"
#include "wire.h"

/* The transform table's geometry() for tokens: the dataset is a token
 * dataset (tokidx_check) and context= was given; out is FLAT, context + 1
 * values of the field's dtype.  -EINVAL with a reason otherwise. */
int window_geometry(const struct dataset *ds, const struct wire_xform *p,
                    struct xform_out *out, struct rf_err *err);

/*
 * Plans window w (< tokidx_windows) of ds: one io_req per piece of a
 * document it spans, appended at reqs[*n] (cap entries in all), each
 * reading into dst at the piece's place (dst: context + 1 values of
 * ti->value_bytes); doc_ids, when not NULL, gets each token's document
 * relative to the window's first (int32, little-endian, stored only).
 * Returns 0; -ENOSPC when reqs is full (nothing of w appended); a
 * locate's error with err naming the document.
 */
int window_plan(const struct dataset *ds, const struct tok_index *ti, uint32_t context,
                uint64_t w, uint8_t *dst, uint8_t *doc_ids, struct io_req *reqs, uint32_t *n,
                uint32_t cap, struct rf_err *err);

#endif
