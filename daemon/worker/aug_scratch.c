/*
 * aug_scratch.c - the scratch buffer the augmentation ops borrow (aug.h):
 * grown on demand, kept between samples, freed by its owner.
 */
#include <stdlib.h>

#include "aug.h"

void *aug_scratch_get(struct aug_scratch *s, size_t bytes)
{
    void *p;

    if (bytes <= s->cap)
        return s->buf;
    p = realloc(s->buf, bytes);
    if (!p)
        return NULL;
    s->buf = p;
    s->cap = bytes;
    return p;
}

void aug_scratch_free(struct aug_scratch *s)
{
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
}
