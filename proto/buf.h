/*
 * buf.h - the one growable-buffer helper: buf_grow(&p, &cap, need) makes
 * the malloc'd block *p (capacity *cap bytes, NULL/0 to start) hold at
 * least need bytes, keeping its contents.  Returns true, or false when
 * memory ran out (then *p and *cap are unchanged and still valid).
 */
#ifndef RINGFEED_PROTO_BUF_H
#define RINGFEED_PROTO_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

static inline bool buf_grow(void *pp, size_t *cap, size_t need)
{
    void **p = pp;
    void *q;

    if (need <= *cap)
        return true;
    q = realloc(*p, need);
    if (!q)
        return false;
    *p = q;
    *cap = need;
    return true;
}

#endif
