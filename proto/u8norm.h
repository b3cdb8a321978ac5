/*
 * u8norm.h - the one rule that turns a uint8 image value into a float:
 * scaled to [0, 1] and normalized per channel, ((x / 255) - mean[c]) /
 * std[c], as torchvision's ToTensor (or ConvertImageDtype) then Normalize
 * give.  Both converters use it: the host's (python/ext/convert.c, for
 * Loader(dtype=, normalize=)) and the device's (libringfeed's
 * rf_cuda_convert_release, running kernels/cuda/normalize.cu's
 * kn_cu_u8_affine), so the two produce the same bits.
 *
 * Per channel, a pair (a, b): the value is x * a + b in float32, one
 * multiply then one add, each rounded (never fused), then rounded to the
 * output type (to nearest, ties to even, for float16 and bfloat16).  A
 * channel with mean 0 and std 1 gets a = -1, meaning x / 255 exactly, what
 * ToTensor gives.  torchvision computes the two steps apart in float32
 * ((x / 255 - m) / s), so a value may differ from it by an ulp or two of
 * float32.
 *
 * Header only: the Python extension is also built on its own against
 * libringfeed (scripts/gpu-check), with nothing of proto/ linked in.
 */
#ifndef RINGFEED_PROTO_U8NORM_H
#define RINGFEED_PROTO_U8NORM_H

#include <stdint.h>
#include <stdio.h>

#define U8NORM_MAX_CHANNELS 4

/*
 * Fills a[c] and b[c] from mean[c] and std[c] for c channels (1 to
 * U8NORM_MAX_CHANNELS).  Returns 0, or -1 with the reason in why (a mean
 * that is not finite, a std that is not finite and > 0); a and b are then
 * unspecified.
 */
static inline int u8norm_coeffs(const float *mean, const float *std, uint32_t c, float *a,
                                float *b, char *why, size_t len)
{
    if (c < 1 || c > U8NORM_MAX_CHANNELS) {
        snprintf(why, len, "%u channels: 1 to %d", c, U8NORM_MAX_CHANNELS);
        return -1;
    }
    for (uint32_t i = 0; i < c; i++) {
        float m = mean[i], s = std[i];

        if (!(s > 0) || s != s || s > 1e30f || !(m == m) || m > 1e30f || m < -1e30f) {
            snprintf(why, len, "mean[%u] %g, std[%u] %g: std is finite and > 0, mean finite",
                     i, (double)m, i, (double)s);
            return -1;
        }
        a[i] = 1.0f / (255.0f * s);
        b[i] = -m / s;
        if (m == 0.0f && s == 1.0f)
            a[i] = -1.0f; /* x / 255, exactly as ToTensor */
    }
    return 0;
}

#endif
