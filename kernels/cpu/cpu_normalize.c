/*
 * cpu_normalize.c - the CPU twin of the normalize kernel: uint8 HWC or CHW
 * images to fp32 or bf16 CHW, (x/255 - mean[c]) / std[c].
 *
 * A uint8 has 256 values, so each call first tabulates the 256 outputs of
 * every channel, with exactly the arithmetic the CUDA kernel uses
 * ((x * (1/255) - mean) * (1/std), each operation rounded in fp32, no fused
 * multiply-add), and then only looks them up: the two backends produce the
 * same bits.
 */
#include "cpu.h"
#include "../bf16.h"

static void norm_table(const struct kn_norm *p, float t[][256])
{
    for (uint32_t c = 0; c < p->c; c++) {
        float inv_std = 1.0f / p->std[c];

        for (int v = 0; v < 256; v++) {
            float x = (float)v * (1.0f / 255.0f);

            x = x - p->mean[c];
            t[c][v] = x * inv_std;
        }
    }
}

/* Copies one image through the tables; T is float or uint16_t. */
#define NORM_IMAGE(T, tab, in, out, c, hw, layout)                          \
    do {                                                                    \
        if ((layout) == KN_CHW) {                                           \
            for (uint32_t ch = 0; ch < (c); ch++) {                         \
                const T *t_ = (tab)[ch];                                    \
                const uint8_t *i_ = (in) + (size_t)ch * (hw);               \
                T *o_ = (out) + (size_t)ch * (hw);                          \
                for (size_t px = 0; px < (hw); px++)                        \
                    o_[px] = t_[i_[px]];                                    \
            }                                                               \
        } else {                                                            \
            for (uint32_t ch = 0; ch < (c); ch++) {                         \
                const T *t_ = (tab)[ch];                                    \
                const uint8_t *i_ = (in) + ch;                              \
                T *o_ = (out) + (size_t)ch * (hw);                          \
                for (size_t px = 0; px < (hw); px++)                        \
                    o_[px] = t_[i_[px * (c)]];                              \
            }                                                               \
        }                                                                   \
    } while (0)

int kn_cpu_normalize(struct kn_ctx *ctx, struct kn_stream *s,
                     const struct kn_norm *p, const uint8_t *src, void *dst)
{
    float t[KN_MAX_CHANNELS][256];
    size_t hw = (size_t)p->h * p->w, img = hw * p->c;

    (void)ctx;
    (void)s;
    norm_table(p, t);
    if (p->out == KN_F32) {
        float *out = dst;

        for (uint32_t i = 0; i < p->n; i++)
            NORM_IMAGE(float, t, src + i * img, out + i * img, p->c, hw,
                       p->layout);
    } else {
        uint16_t tb[KN_MAX_CHANNELS][256];
        uint16_t *out = dst;

        for (uint32_t c = 0; c < p->c; c++)
            for (int v = 0; v < 256; v++)
                tb[c][v] = kn_bf16_rne(t[c][v]);
        for (uint32_t i = 0; i < p->n; i++)
            NORM_IMAGE(uint16_t, tb, src + i * img, out + i * img, p->c, hw,
                       p->layout);
    }
    return 0;
}
