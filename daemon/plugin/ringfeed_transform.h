/*
 * ringfeed_transform.h - the C ABI of an operator's own augmentation op: a
 * shared object ringfeedd loads from its config (plugin.NAME = PATH,
 * ringfeedd.conf(5)) and runs in its workers on each sample's uint8 image,
 * named in a spec as Plugin:name=NAME:params=TEXT (docs/hacking.md,
 * "Writing a plugin").  This header is the whole contract: it needs only
 * <stddef.h> and <stdint.h>, and nothing of ringfeed's own code.
 *
 * A plugin exports one object, const and named exactly
 *
 *     const struct ringfeed_transform_v1 ringfeed_transform_v1 = {
 *         .abi = RINGFEED_TRANSFORM_ABI, .name = "sepia",
 *         .init = sepia_init, .apply = sepia_apply, .fini = sepia_fini,
 *     };
 *
 * ringfeedd refuses a file without it, with another abi, or whose name is
 * not the NAME of its plugin.NAME line.
 *
 * The calls, all from one thread of one worker process at a time:
 *   init(params, &state, err, errcap)  once per distinct params text a
 *       stream names, in the main process at ATTACH (then fini: a check
 *       whose error refuses the ATTACH) and in each worker before its
 *       first sample of that stream.  params is the spec's params= text
 *       ("" when left out), NUL-terminated; parse it, return 0 and your
 *       state (any pointer, NULL allowed), or nonzero with a one-line
 *       message in err (errcap bytes, NUL-terminated).  Keep init pure: it
 *       runs in the daemon's main process.
 *   apply(state, image, rng, err, errcap)  once per sample: change the
 *       image in place (its size and layout are fixed), drawing every
 *       random number from rng.  Return 0, or nonzero with a message in
 *       err: the sample is then bad (counted in STATS errors.bad.shape,
 *       replaced by the next good sample as any bad sample is).
 *   fini(state)  when the worker exits or drops the state; may be NULL.
 *
 * Randomness.  rng->u64(rng->ctx) is the sample's own counter-based
 * stream (Philox4x32-10 keyed by the stream's seed, the epoch and the
 * sample's index), continuing after the draws of the transform and the
 * ops before yours.  A plugin that draws only from it, and keeps no state
 * between samples beyond what init made, gives the same bytes for any
 * worker count, on any rerun, and after a crash.  Never use rand(),
 * time or a global counter.
 *
 * A crash (a signal, an abort, exit) kills the worker: the daemon starts
 * another, runs the job again, and a sample that kills workers twice at
 * the same point is quarantined (errors.quarantined).  A plugin runs with
 * the daemon's privileges: it is the operator's code, never a client's.
 */
#ifndef RINGFEED_TRANSFORM_H
#define RINGFEED_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this ABI; a change to any struct below is a new one. */
#define RINGFEED_TRANSFORM_ABI 1

/* The image's layouts */
#define RINGFEED_CHW 1 /* c planes of h rows of w bytes */
#define RINGFEED_HWC 2 /* h rows of w pixels of c bytes */

/* One sample's image, changed in place: h * w * c bytes at px. */
struct ringfeed_image {
    uint8_t *px;
    uint32_t w, h;
    uint32_t c;      /* 1 or 3 */
    uint32_t layout; /* RINGFEED_CHW or RINGFEED_HWC */
};

/* The sample's random stream: u64(ctx) gives its next 64 random bits. */
struct ringfeed_rng {
    uint64_t (*u64)(void *ctx);
    void *ctx;
};

/* A double uniform on [0, 1) from rng (its top 53 bits). */
static inline double ringfeed_uniform(const struct ringfeed_rng *rng)
{
    return (double)(rng->u64(rng->ctx) >> 11) * (1.0 / 9007199254740992.0);
}

/* Byte of channel ch at (y, x) in im. */
static inline size_t ringfeed_at(const struct ringfeed_image *im, uint32_t ch, uint32_t y,
                                 uint32_t x)
{
    return im->layout == RINGFEED_CHW ? ((size_t)ch * im->h + y) * im->w + x
                                      : ((size_t)y * im->w + x) * im->c + ch;
}

struct ringfeed_transform_v1 {
    uint32_t abi;     /* RINGFEED_TRANSFORM_ABI */
    const char *name; /* the NAME of plugin.NAME: 1..32 of [A-Za-z0-9_-], first a letter */
    int (*init)(const char *params, void **state, char *err, size_t errcap);
    int (*apply)(void *state, const struct ringfeed_image *image,
                 const struct ringfeed_rng *rng, char *err, size_t errcap);
    void (*fini)(void *state);
};

/* The symbol ringfeedd looks up (dlsym) in a plugin. */
#define RINGFEED_TRANSFORM_SYMBOL "ringfeed_transform_v1"

#ifdef __cplusplus
}
#endif

#endif
