/*
 * bf16.h - bfloat16 <-> fp32 conversion for host code, inline for the CPU
 * twin's loops.  Rounding is to nearest, ties to even, which is what CUDA's
 * __float2bfloat16_rn does, so both backends produce the same bits from the
 * same float.  A NaN stays a NaN (quieted); infinities stay infinite; finite
 * values above the largest bf16 round to infinity, as IEEE rounding says.
 */
#ifndef RINGFEED_KERNELS_BF16_H
#define RINGFEED_KERNELS_BF16_H

#include <stdint.h>
#include <string.h>

static inline uint16_t kn_bf16_rne(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)        /* NaN: keep sign, quiet */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float kn_bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;

    memcpy(&f, &u, sizeof f);
    return f;
}

/* f rounded to the nearest bf16, as a float. */
static inline float kn_bf16_round(float f)
{
    return kn_bf16_to_f32(kn_bf16_rne(f));
}

#endif
