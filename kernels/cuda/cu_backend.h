/*
 * cu_backend.h - what the C side of the CUDA backend shares between its
 * files: the context's CUDA state, the error helpers, and the model ops
 * (cuda_mlp.c) that cuda_backend.c puts into kn_cuda_ops.  The CUDA
 * runtime is linked statically; cuBLAS is called through the table of
 * cu_blas.h, never directly (nothing of it is linked).
 */
#ifndef RINGFEED_KERNELS_CU_BACKEND_H
#define RINGFEED_KERNELS_CU_BACKEND_H

#include <cuda_runtime_api.h>

#include "../backend.h"
#include "cu_blas.h"

struct cu_ctx {
    int device;
    const struct cu_blas *api;      /* the process's cuBLAS (kn_cu_blas) */
    cublasHandle_t blas;
};

static inline cudaStream_t cu_stream(const struct kn_stream *s)
{
    return (cudaStream_t)s->handle;
}

static inline struct cu_ctx *cu_of(const struct kn_ctx *ctx)
{
    return (struct cu_ctx *)ctx->impl;
}

/* Records "what: <CUDA error name>: <string>" and returns -EIO (0 when e
 * is cudaSuccess). */
int kn_cu_check(struct kn_ctx *ctx, const char *what, int e);

/* The same for a cuBLAS status. */
int kn_cu_blas_check(struct kn_ctx *ctx, const char *what,
                     cublasStatus_t st);

int kn_cu_model_init(struct kn_model *m);
void kn_cu_model_fini(struct kn_model *m);
int kn_cu_param_read(struct kn_model *m, enum kn_tensor which, size_t off,
                     size_t count, float *host);
int kn_cu_param_write(struct kn_model *m, size_t off, size_t count,
                      const float *host);
int kn_cu_forward(struct kn_model *m, struct kn_stream *s, const void *x,
                  uint32_t n, float *out);
int kn_cu_step(struct kn_model *m, struct kn_stream *s, const void *x,
               const int32_t *labels, uint32_t n, int train, float *loss,
               int32_t *correct);
int kn_cu_apply(struct kn_model *m, struct kn_stream *s,
                const struct kn_sgd *opt);
int kn_cu_metrics(struct kn_model *m, struct kn_stream *s,
                  enum kn_phase phase, int reset, struct kn_metrics *out);
float *kn_cu_grad_buf(struct kn_model *m);

#endif
