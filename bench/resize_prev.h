/*
 * resize_prev.h - the resampler as it was before issue 15's rewrite:
 * daemon/worker/resize.h of commit e933b6f58a45, its names prefixed rsprev_
 * and nothing else changed, kept so bench/resize.c can time the old path
 * against the new one on the same machine.  Not part of the daemon.
 *
 * What it said of itself then:
 *
 * resize.h - separable resampling of RGB images with Pillow's antialiased
 * bilinear filter: what torchvision's Resize and RandomResizedCrop do to a
 * PIL image (Image.resize with BILINEAR, no reducing_gap).
 *
 * One axis at a time (Pillow's Resample.c, precompute_coeffs): output
 * sample i of n, taken from the input span [box0, box1), has its center at
 * c = box0 + (i + 0.5) * scale with scale = (box1 - box0) / n, in input
 * coordinates where input sample k covers [k, k + 1).  The triangle filter
 * is widened by f = max(scale, 1), so a reduction averages every input
 * sample under the output sample and an enlargement interpolates:
 *     weight of input k = max(0, 1 - |k + 0.5 - c| / f),
 * over k in [floor(c - f + 0.5), floor(c + f + 0.5)) cut to the allowed
 * input [lim0, lim1), then normalized to sum 1.  The allowed input is the
 * whole image for a resize of the whole image (its edge samples' neighbours
 * count) and the crop for a crop-then-resize.
 *
 * Plans (struct rsprev_axis) are computed once per image and axis.  The
 * resampling then runs in blocks of 8 output rows, each step written so
 * the compiler vectorizes it (GCC vector extensions, no intrinsics):
 *   1. vertical: each row's taps over whole input rows of bytes, in 16-bit
 *      fixed point (weights in 1/256 summing to exactly 256, so a sum of
 *      bytes times weights fits 16 bits), sixteen lanes a step with AVX2;
 *      reductions of more than 2 (more than RSPREV_FIXED_TAPS taps) in float;
 *   2. transpose: the 8 rows into vectors of 8 lanes, one lane per row;
 *   3. horizontal: per output pixel and channel, one multiply-add a tap for
 *      all 8 rows, the tap count a constant for the common counts;
 *   4. transpose back, round and clamp to bytes, into planes (CHW).
 * Precision: within a level of an exact double-precision evaluation
 * (tests/test_resize.c); Pillow's own 8-bit intermediate image is within
 * half a level of it.
 */
#ifndef RINGFEED_BENCH_RESIZE_PREV_H
#define RINGFEED_BENCH_RESIZE_PREV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Vertical plans of up to this many taps (a reduction by at most 2) run in
 * 16-bit fixed point: weights within 1/256 of exact keep the result within
 * a level of exact there, not over the dozens of taps of a larger
 * reduction, which runs in float. */
#define RSPREV_FIXED_TAPS 5

/* How one output axis reads its input axis.  Arrays grow as needed and are
 * reused across plans; zero-initialize, free with rsprev_axis_free. */
struct rsprev_axis {
    uint32_t n;          /* output samples */
    uint32_t taps;       /* weights stored per output sample (the most any
                            output uses; zeros pad the others) */
    int32_t lo, hi;      /* input samples used: [lo, hi) */
    struct rsprev_span {
        int32_t start;   /* first input sample of output i */
        uint32_t count;  /* input samples it uses, <= taps */
    } *span;             /* n */
    float *w;            /* n * taps: output i's weights at w + i * taps */
    uint16_t *q;         /* n * taps: the same in 1/256, summing to 256
                            (only when taps <= RSPREV_FIXED_TAPS) */
    uint32_t cap_n, cap_w, cap_q;
};

/*
 * Plans n outputs (n >= 1) from the input span [box0, box1) (box0 < box1,
 * fractional allowed, |box| < 1e12), reading only input samples in
 * [lim0, lim1) (lim0 < lim1, and the span must overlap it).  mirror: output i is
 * computed as output n - 1 - i would be (a horizontal flip for free).
 * Returns 0, -EINVAL for arguments out of range, -ENOMEM.
 */
int rsprev_axis_plan(struct rsprev_axis *a, uint32_t n, double box0, double box1, int32_t lim0,
                 int32_t lim1, bool mirror);

void rsprev_axis_free(struct rsprev_axis *a);

/* Bytes of scratch rsprev_resize needs for these plans. */
size_t rsprev_scratch_bytes(const struct rsprev_axis *ax, const struct rsprev_axis *ay);

/*
 * Resamples an RGB image (3 bytes a pixel) into three planes (R, G, B) of
 * ay->n rows of ax->n bytes at dst (CHW).  Input pixel (x, y), for x in
 * [ax->lo, ax->hi) and y in [ay->lo, ay->hi), is at src + (y - y0) * stride
 * + (x - x0) * 3: the caller holds at least that region.  scratch is
 * rsprev_scratch_bytes() bytes, aligned to 32.
 */
void rsprev_resize(const uint8_t *src, size_t stride, int32_t x0, int32_t y0,
               const struct rsprev_axis *ax, const struct rsprev_axis *ay, void *scratch, uint8_t *dst);

/* Interleaves three planes of n bytes (R, G, B) into n RGB pixels (HWC). */
void rsprev_interleave(const uint8_t *restrict planes, size_t n, uint8_t *restrict rgb);

#endif
