/*
 * cuda_kernels.h - the C-callable launchers of the device code in
 * normalize.cu and mlp.cu, shared by those files and by the C side of the
 * CUDA backend (cuda_backend.c, cuda_mlp.c); libringfeed's pin_cuda.c
 * runs kn_cu_u8_affine for the loader's converting copy.
 *
 * Every launcher enqueues on the given stream and returns the cudaError_t
 * of the launch (0 on success) as an int; none waits.  Pointers are device
 * memory; bf16 tensors are passed as uint16_t * and read as __nv_bfloat16.
 * Element-wise arithmetic uses the __f*_rn intrinsics, which are never
 * fused into FMAs, so it rounds exactly as the CPU twin (built with
 * -ffp-contract=off) does, operation by operation.
 */
#ifndef RINGFEED_KERNELS_CUDA_KERNELS_H
#define RINGFEED_KERNELS_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Normalize, by value (at most 4 channels, as KN_MAX_CHANNELS). */
struct kn_cu_norm {
    uint32_t n, c, h, w;
    int chw;                /* source layout: 1 CHW, 0 HWC */
    int bf16;               /* output: 1 bf16, 0 fp32 */
    float mean[4];
    float inv_std[4];       /* 1.0f / std, rounded in fp32 on the host */
};

/* The loader's converting copy (libringfeed's rf_cuda_convert_release):
 * uint8 images to float32, float16 or bfloat16 in their own layout, by
 * proto/u8norm.h's rule.  Value i is in channel (i / plane) % c: plane is
 * H*W for CHW images, 1 for HWC. */
struct kn_cu_affine {
    size_t count;           /* values */
    uint32_t c, plane;      /* channels (1..4), values per channel run */
    int out;                /* KN_CU_OUT_* */
    float a[4], b[4];       /* x * a + b; a < 0: x / 255 exactly */
};

#define KN_CU_OUT_F32 0
#define KN_CU_OUT_F16 1
#define KN_CU_OUT_BF16 2

/* Running metrics of one phase, in device memory. */
struct kn_cu_acc {
    double loss_sum;
    long long correct, samples, bad;
};

/* The last batch's figures, in device memory. */
struct kn_cu_step {
    float loss;             /* mean over the batch */
    int32_t correct;
};

/* Whether the device can run this build's kernels (0, or the error of
 * asking for one kernel's attributes, e.g. no kernel image for the SM). */
int kn_cu_probe(void);

int kn_cu_normalize(cudaStream_t s, const struct kn_cu_norm *p,
                    const uint8_t *src, void *dst);

/* dst[i] = the converted src[i] (struct kn_cu_affine); dst holds count
 * values of the output type. */
int kn_cu_u8_affine(cudaStream_t s, const struct kn_cu_affine *p,
                    const uint8_t *src, void *dst);

/* z[i][j] = z[i][j] + b[j], then ReLU when relu, and zb = bf16(z) when
 * zb is not NULL. */
int kn_cu_bias_act(cudaStream_t s, float *z, const float *b, uint32_t n,
                   uint32_t out, int relu, uint16_t *zb);

/* Softmax cross-entropy per row: loss_i[i] (0 for a bad label), flag_i[i]
 * = 1 correct, 0 wrong, 2 bad label; dz = softmax - onehot when not NULL
 * (a zero row for a bad label). */
int kn_cu_xent(cudaStream_t s, const float *z, const int32_t *y, uint32_t n,
               uint32_t classes, float *dz, float *loss_i, int32_t *flag_i);

/* One block reduces loss_i/flag_i in a fixed order, adds to *acc and
 * writes *step. */
int kn_cu_metrics_add(cudaStream_t s, const float *loss_i,
                      const int32_t *flag_i, uint32_t n,
                      struct kn_cu_acc *acc, struct kn_cu_step *step);

/* d[i] = act[i] > 0 ? d[i] : 0. */
int kn_cu_relu_mask(cudaStream_t s, float *d, const float *act, size_t count);

/* dst[i] = bf16(src[i]), round to nearest even. */
int kn_cu_to_bf16(cudaStream_t s, const float *src, uint16_t *dst,
                  size_t count);

/* gb[j] = (first ? 0 : gb[j]) + sum over rows i in order of dz[i][j]. */
int kn_cu_bias_grad(cudaStream_t s, const float *dz, uint32_t n,
                    uint32_t out, float *gb, int first);

/* SGD: g' = g*scale + wd*w; v = mu*v + g'; w -= lr*v; wb = bf16(w) when
 * wb is not NULL. */
int kn_cu_sgd(cudaStream_t s, float *w, float *v, const float *g,
              size_t count, float scale, float lr, float mu, float wd,
              uint16_t *wb);

#ifdef __cplusplus
}
#endif

#endif
