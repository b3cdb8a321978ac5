/*
 * mlp.cu - the MLP's element-wise and reduction kernels; the GEMMs are
 * cuBLAS's, called from cuda_mlp.c.  Each kernel mirrors a loop of the CPU
 * twin (cpu/cpu_mlp.c) with the same order of operations and the same
 * rounding (__f*_rn: no FMA contraction), so given the same inputs the
 * element-wise results are identical; only the GEMMs' summation order
 * differs between the backends.
 *
 *   bias_act    z += b (+ ReLU, + bf16 copy)      grid-stride over n*out
 *   xent        softmax cross-entropy per row      one thread per row
 *   metrics     fixed-order reduction of a batch   one block
 *   relu_mask   d = act > 0 ? d : 0                grid-stride
 *   to_bf16     round to nearest even              grid-stride
 *   bias_grad   column sums of dz, rows in order   one thread per column
 *   sgd         momentum SGD with weight decay     grid-stride
 */
#include <cuda_bf16.h>

#include "cuda_kernels.h"

namespace {

constexpr unsigned kThreads = 256;

unsigned blocks_for(size_t count)
{
    size_t b = (count + kThreads - 1) / kThreads;

    return (unsigned)(b > (1u << 20) ? (1u << 20) : b);
}

__device__ size_t first_index()
{
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ size_t grid_stride()
{
    return (size_t)gridDim.x * blockDim.x;
}

__global__ void bias_act_kernel(float *__restrict__ z,
                                const float *__restrict__ b, size_t total,
                                uint32_t out, int relu,
                                __nv_bfloat16 *__restrict__ zb)
{
    for (size_t i = first_index(); i < total; i += grid_stride()) {
        float t = __fadd_rn(z[i], b[i % out]);

        if (relu)
            t = t > 0.0f ? t : 0.0f;
        z[i] = t;
        if (zb)
            zb[i] = __float2bfloat16_rn(t);
    }
}

__global__ void xent_kernel(const float *__restrict__ z,
                            const int32_t *__restrict__ y, uint32_t n,
                            uint32_t classes, float *__restrict__ dz,
                            float *__restrict__ loss_i,
                            int32_t *__restrict__ flag_i)
{
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i >= n)
        return;
    const float *row = z + (size_t)i * classes;
    float *drow = dz ? dz + (size_t)i * classes : nullptr;
    float mx = row[0], sum = 0.0f;
    uint32_t arg = 0;
    int32_t lab = y[i];

    for (uint32_t j = 1; j < classes; j++)
        if (row[j] > mx) {
            mx = row[j];
            arg = j;
        }
    if (lab < 0 || (uint32_t)lab >= classes) {
        loss_i[i] = 0.0f;
        flag_i[i] = 2;
        for (uint32_t j = 0; drow && j < classes; j++)
            drow[j] = 0.0f;
        return;
    }
    for (uint32_t j = 0; j < classes; j++) {
        float e = expf(__fsub_rn(row[j], mx));

        if (drow)
            drow[j] = e;
        sum = __fadd_rn(sum, e);
    }
    loss_i[i] = __fsub_rn(logf(sum), __fsub_rn(row[lab], mx));
    flag_i[i] = arg == (uint32_t)lab;
    if (!drow)
        return;
    float inv = __fdiv_rn(1.0f, sum);

    for (uint32_t j = 0; j < classes; j++)
        drow[j] = __fmul_rn(drow[j], inv);
    drow[lab] = __fsub_rn(drow[lab], 1.0f);
}

__global__ void metrics_kernel(const float *__restrict__ loss_i,
                               const int32_t *__restrict__ flag_i,
                               uint32_t n, kn_cu_acc *acc, kn_cu_step *step)
{
    __shared__ double sl[kThreads];
    __shared__ long long sc[kThreads], sb[kThreads];
    unsigned t = threadIdx.x;
    double l = 0.0;
    long long c = 0, b = 0;

    for (uint32_t i = t; i < n; i += kThreads) {
        l += (double)loss_i[i];
        c += flag_i[i] == 1;
        b += flag_i[i] == 2;
    }
    sl[t] = l;
    sc[t] = c;
    sb[t] = b;
    __syncthreads();
    for (unsigned half = kThreads / 2; half > 0; half /= 2) {
        if (t < half) {
            sl[t] += sl[t + half];
            sc[t] += sc[t + half];
            sb[t] += sb[t + half];
        }
        __syncthreads();
    }
    if (t == 0) {
        acc->loss_sum += sl[0];
        acc->correct += sc[0];
        acc->samples += n;
        acc->bad += sb[0];
        step->loss = (float)(sl[0] / n);
        step->correct = (int32_t)sc[0];
    }
}

__global__ void relu_mask_kernel(float *__restrict__ d,
                                 const float *__restrict__ act, size_t count)
{
    for (size_t i = first_index(); i < count; i += grid_stride())
        d[i] = act[i] > 0.0f ? d[i] : 0.0f;
}

__global__ void to_bf16_kernel(const float *__restrict__ src,
                               __nv_bfloat16 *__restrict__ dst, size_t count)
{
    for (size_t i = first_index(); i < count; i += grid_stride())
        dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void bias_grad_kernel(const float *__restrict__ dz, uint32_t n,
                                 uint32_t out, float *__restrict__ gb,
                                 int first)
{
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;

    if (j >= out)
        return;
    float acc = first ? 0.0f : gb[j];

    for (uint32_t i = 0; i < n; i++)
        acc = __fadd_rn(acc, dz[(size_t)i * out + j]);
    gb[j] = acc;
}

__global__ void sgd_kernel(float *__restrict__ w, float *__restrict__ v,
                           const float *__restrict__ g, size_t count,
                           float scale, float lr, float mu, float wd,
                           __nv_bfloat16 *__restrict__ wb)
{
    for (size_t i = first_index(); i < count; i += grid_stride()) {
        float gi = __fadd_rn(__fmul_rn(g[i], scale), __fmul_rn(wd, w[i]));
        float vi = __fadd_rn(__fmul_rn(mu, v[i]), gi);
        float wi = __fsub_rn(w[i], __fmul_rn(lr, vi));

        v[i] = vi;
        w[i] = wi;
        if (wb)
            wb[i] = __float2bfloat16_rn(wi);
    }
}

__nv_bfloat16 *as_bf16(uint16_t *p)
{
    return reinterpret_cast<__nv_bfloat16 *>(p);
}

}  // namespace

extern "C" int kn_cu_bias_act(cudaStream_t s, float *z, const float *b,
                              uint32_t n, uint32_t out, int relu,
                              uint16_t *zb)
{
    size_t total = (size_t)n * out;

    if (total == 0)
        return 0;
    bias_act_kernel<<<blocks_for(total), kThreads, 0, s>>>(z, b, total, out,
                                                           relu, as_bf16(zb));
    return (int)cudaGetLastError();
}

extern "C" int kn_cu_xent(cudaStream_t s, const float *z, const int32_t *y,
                          uint32_t n, uint32_t classes, float *dz,
                          float *loss_i, int32_t *flag_i)
{
    if (n == 0)
        return 0;
    xent_kernel<<<blocks_for(n), kThreads, 0, s>>>(z, y, n, classes, dz,
                                                   loss_i, flag_i);
    return (int)cudaGetLastError();
}

extern "C" int kn_cu_metrics_add(cudaStream_t s, const float *loss_i,
                                 const int32_t *flag_i, uint32_t n,
                                 struct kn_cu_acc *acc,
                                 struct kn_cu_step *step)
{
    metrics_kernel<<<1, kThreads, 0, s>>>(loss_i, flag_i, n, acc, step);
    return (int)cudaGetLastError();
}

extern "C" int kn_cu_relu_mask(cudaStream_t s, float *d, const float *act,
                               size_t count)
{
    if (count == 0)
        return 0;
    relu_mask_kernel<<<blocks_for(count), kThreads, 0, s>>>(d, act, count);
    return (int)cudaGetLastError();
}

extern "C" int kn_cu_to_bf16(cudaStream_t s, const float *src, uint16_t *dst,
                             size_t count)
{
    if (count == 0)
        return 0;
    to_bf16_kernel<<<blocks_for(count), kThreads, 0, s>>>(src, as_bf16(dst),
                                                          count);
    return (int)cudaGetLastError();
}

extern "C" int kn_cu_bias_grad(cudaStream_t s, const float *dz, uint32_t n,
                               uint32_t out, float *gb, int first)
{
    if (out == 0)
        return 0;
    bias_grad_kernel<<<blocks_for(out), kThreads, 0, s>>>(dz, n, out, gb,
                                                          first);
    return (int)cudaGetLastError();
}

extern "C" int kn_cu_sgd(cudaStream_t s, float *w, float *v, const float *g,
                         size_t count, float scale, float lr, float mu,
                         float wd, uint16_t *wb)
{
    if (count == 0)
        return 0;
    sgd_kernel<<<blocks_for(count), kThreads, 0, s>>>(w, v, g, count, scale,
                                                      lr, mu, wd, as_bf16(wb));
    return (int)cudaGetLastError();
}
