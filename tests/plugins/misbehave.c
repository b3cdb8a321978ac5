/*
 * misbehave.c - plugins that go wrong on purpose, for test_plugin.py: one
 * source built once per KIND (tests/meson.build), each exporting
 * ringfeed_transform_v1 under its own name:
 *   failinit  init refuses every params with a message naming them
 *   failapply apply leaves the image and fails when its first byte is 0xEE
 *   crash     apply aborts the worker when its first two bytes are AB CD
 *   wrongabi  a descriptor of ABI version 2 (refused at load)
 * Elsewhere apply draws one number, so the stream's draws go on as usual.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ringfeed_transform.h"

#define FAILINIT 1
#define FAILAPPLY 2
#define CRASH 3
#define WRONGABI 4

static int init(const char *params, void **state, char *err, size_t errcap)
{
    *state = NULL;
#if KIND == FAILINIT
    snprintf(err, errcap, "failinit refuses params \"%s\"", params);
    return 1;
#else
    (void)params, (void)err, (void)errcap;
    return 0;
#endif
}

static int apply(void *state, const struct ringfeed_image *im, const struct ringfeed_rng *rng,
                 char *err, size_t errcap)
{
    (void)state;
    (void)rng->u64(rng->ctx);
#if KIND == FAILAPPLY
    if (im->px[0] == 0xEE) {
        snprintf(err, errcap, "failapply fails on a first byte of 0xEE");
        return 1;
    }
#elif KIND == CRASH
    if (im->px[0] == 0xAB && im->px[1] == 0xCD)
        abort();
#endif
    (void)im, (void)err, (void)errcap;
    return 0;
}

const struct ringfeed_transform_v1 ringfeed_transform_v1 = {
    .abi = KIND == WRONGABI ? 2 : RINGFEED_TRANSFORM_ABI,
    .name = NAME,
    .init = init,
    .apply = apply,
    .fini = NULL,
};
