/*
 * normalize.cu - the normalize kernel: uint8 HWC or CHW images to fp32 or
 * bf16 CHW, out = (x * (1/255) - mean[c]) * (1/std[c]), one thread per
 * output element (grid-stride), writes coalesced.  Each operation is
 * rounded on its own (__fmul_rn, __fsub_rn), as in the CPU twin's table, so
 * the two backends produce the same bits.  Also the probe that tells
 * whether the device can run this build's kernels at all.
 *
 * And the loader's converting copy (kn_cu_u8_affine, run by libringfeed
 * after it copies a batch to the device): uint8 to float32, float16 or
 * bfloat16 in the images' own layout, x * a + b per channel with the
 * multiply and the add rounded apart (or x / 255 exactly), the rule of
 * proto/u8norm.h, so the bits equal the host converter's.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_kernels.h"

namespace {

__global__ void normalize_kernel(const uint8_t *__restrict__ src,
                                 float *__restrict__ out32,
                                 __nv_bfloat16 *__restrict__ out16,
                                 kn_cu_norm p, size_t total, size_t hw)
{
    size_t img_sz = hw * p.c;
    size_t stride = (size_t)gridDim.x * blockDim.x;

    for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
         o < total; o += stride) {
        size_t img = o / img_sz, rem = o - img * img_sz;
        uint32_t ch = (uint32_t)(rem / hw);
        size_t px = rem - (size_t)ch * hw;
        uint8_t v = p.chw ? src[o] : src[img * img_sz + px * p.c + ch];
        float x = __fmul_rn((float)v, 1.0f / 255.0f);

        x = __fsub_rn(x, p.mean[ch]);
        x = __fmul_rn(x, p.inv_std[ch]);
        if (out16)
            out16[o] = __float2bfloat16_rn(x);
        else
            out32[o] = x;
    }
}

}  // namespace

/* C linkage: libringfeed finds it by this name in the fat binary it loads
 * with the driver (client/pin_cuda.c), without the CUDA runtime. */
extern "C" __global__ void kn_u8_affine_kernel(const uint8_t *__restrict__ src,
                                               void *__restrict__ dst, kn_cu_affine p)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;

    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < p.count;
         i += stride) {
        uint32_t ch = (uint32_t)((i / p.plane) % p.c);
        float x = (float)src[i];

        x = p.a[ch] < 0.0f ? __fdiv_rn(x, 255.0f)
                           : __fadd_rn(__fmul_rn(x, p.a[ch]), p.b[ch]);
        if (p.out == KN_CU_OUT_F16)
            static_cast<__half *>(dst)[i] = __float2half_rn(x);
        else if (p.out == KN_CU_OUT_BF16)
            static_cast<__nv_bfloat16 *>(dst)[i] = __float2bfloat16_rn(x);
        else
            static_cast<float *>(dst)[i] = x;
    }
}

extern "C" int kn_cu_u8_affine(cudaStream_t s, const struct kn_cu_affine *p,
                               const uint8_t *src, void *dst)
{
    size_t blocks = (p->count + 255) / 256;

    if (p->count == 0)
        return 0;
    if (p->c < 1 || p->c > 4 || p->plane < 1 || p->out < KN_CU_OUT_F32 ||
        p->out > KN_CU_OUT_BF16)
        return (int)cudaErrorInvalidValue;
    if (blocks > (1u << 20))
        blocks = 1u << 20;
    kn_u8_affine_kernel<<<(unsigned)blocks, 256, 0, s>>>(src, dst, *p);
    return (int)cudaGetLastError();
}

extern "C" int kn_cu_probe(void)
{
    cudaFuncAttributes attr;

    return (int)cudaFuncGetAttributes(&attr, normalize_kernel);
}

extern "C" int kn_cu_normalize(cudaStream_t s, const struct kn_cu_norm *p,
                               const uint8_t *src, void *dst)
{
    size_t hw = (size_t)p->h * p->w;
    size_t total = (size_t)p->n * p->c * hw;
    size_t blocks = (total + 255) / 256;

    if (total == 0)
        return 0;
    if (blocks > (1u << 20))
        blocks = 1u << 20;
    normalize_kernel<<<(unsigned)blocks, 256, 0, s>>>(
        src, p->bf16 ? nullptr : static_cast<float *>(dst),
        p->bf16 ? static_cast<__nv_bfloat16 *>(dst) : nullptr, *p, total,
        hw);
    return (int)cudaGetLastError();
}
