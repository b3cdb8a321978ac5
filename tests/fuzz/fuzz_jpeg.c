/*
 * fuzz_jpeg.c - the workers' JPEG path on arbitrary bytes: the marker-level
 * scan counter (daemon/worker/jpeg_scan.c), then the train and eval transforms
 * (header, caps, region decode at a DCT scale, resampling, layout) as a
 * worker runs them.  Any input must come back as a sample or a bad sample
 * with a reason: no crash, no leak, no sanitizer report.
 *
 * The pixel cap is small (4 Mpixels) so a mutated header costs little.
 */
#include <stdint.h>
#include <string.h>

#include "jpeg.h"
#include "ring.h"
#include "transform.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct xform_ctx ctx; /* kept across inputs, as in a worker */
    static uint8_t out[3 * 40 * 40];
    struct wire_xform p = { .size = 40, .layout = RING_CHW, .scale_lo = 0.08, .scale_hi = 1,
                            .ratio_lo = 0.75, .ratio_hi = 4.0 / 3, .flip = 0.5, .crop = 0.875,
                            .pixel_cap = 1 << 22 };
    struct xform_out o = { .sample_bytes = sizeof(out), .layout = RING_CHW };
    const char *names[] = { "train", "eval" };

    (void)jpg_count_scans(data, size, 50);
    for (int k = 0; k < 2; k++) {
        const struct xform_def *xf = xform_get((uint32_t)xform_find(names[k]));
        struct rng_stream g;
        enum wire_bad why = BAD_READ;
        struct rf_err err;
        int rc;

        p.id = (uint32_t)xform_find(names[k]);
        p.layout = k ? RING_HWC : RING_CHW;
        rng_stream_init(&g, 1, 0, size);
        rc = xf->apply(NULL, &p, data, size, &g, &ctx, out, &o, &why, &err);
        if (rc < 0 && why != BAD_DECODE && why != BAD_TOO_LARGE)
            __builtin_trap(); /* a bad sample always names decode or too_large */
        if (rc < 0 && err.msg[0] == 0)
            __builtin_trap(); /* and says why */
    }
    return 0;
}
