/*
 * aug.h - the augmentation ops' common ground: the image an op works on
 * (the transform's output, in the ring slot, uint8, CHW or HWC), a scratch
 * buffer an op may borrow, and the per-sample random stream they draw
 * from (proto/rng.h's rng_stream: a pure function of seed, epoch and the
 * sample's index, so a stream is the same for any worker count).
 *
 * Every op comes as two pure functions, in the file of its family
 * (aug_color.c photometric, aug_geom.c geometric, aug_policy.c the
 * policies and erasing):
 *   - aug_draw_NAME(rng, args..., out): the op's random parameters, drawn
 *     as torchvision's get_params / forward draws them (same
 *     distributions, same order of decisions);
 *   - aug_NAME(img, params..., scratch): the op on the image, in place,
 *     matching torchvision's functional op on a uint8 tensor within the
 *     bound its test states (exact where torchvision is exact).
 * The pipeline (augment.c) parses nothing: it gets parsed arguments from
 * proto/aug_spec.h's table and calls draw then apply per op.
 */
#ifndef RINGFEED_DAEMON_WORKER_AUG_H
#define RINGFEED_DAEMON_WORKER_AUG_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"

enum aug_layout {
    AUG_CHW = 1, /* = RING_LAYOUT_CHW: planes of h*w, channel by channel */
    AUG_HWC = 2, /* = RING_LAYOUT_HWC: pixels of c bytes */
};

/* An image in place: h*w*c bytes at px, c 1 or 3. */
struct aug_img {
    uint8_t *px;
    uint32_t w, h, c;
    uint32_t layout; /* enum aug_layout */
};

/* Byte i of channel ch at (y, x). */
static inline size_t aug_at(const struct aug_img *im, uint32_t ch, uint32_t y, uint32_t x)
{
    return im->layout == AUG_CHW ? ((size_t)ch * im->h + y) * im->w + x
                                 : ((size_t)y * im->w + x) * im->c + ch;
}

/* A buffer an op may use between calls; zero-initialize, aug_scratch_free
 * when done.  aug_scratch_get returns at least bytes bytes, or NULL when
 * out of memory (the op then fails with -ENOMEM: a bad sample). */
struct aug_scratch {
    void *buf;
    size_t cap;
};

void *aug_scratch_get(struct aug_scratch *s, size_t bytes);
void aug_scratch_free(struct aug_scratch *s);

#endif
