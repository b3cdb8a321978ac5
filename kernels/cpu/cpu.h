/*
 * cpu.h - the CPU twin's internal entry points, gathered into kn_cpu_ops by
 * cpu_backend.c: normalize (cpu_normalize.c) and the MLP (cpu_mlp.c).
 * Arguments arrive checked by kernels.c and model.c (see backend.h).
 */
#ifndef RINGFEED_KERNELS_CPU_H
#define RINGFEED_KERNELS_CPU_H

#include "../backend.h"

/* Alignment of every CPU buffer: a cache line, and the 256 bytes that
 * kn_buf_alloc promises. */
#define KN_CPU_ALIGN 256

void *kn_cpu_alloc_aligned(size_t bytes);

int kn_cpu_normalize(struct kn_ctx *ctx, struct kn_stream *s,
                     const struct kn_norm *p, const uint8_t *src, void *dst);

int kn_cpu_model_init(struct kn_model *m);
void kn_cpu_model_fini(struct kn_model *m);
int kn_cpu_param_read(struct kn_model *m, enum kn_tensor which, size_t off,
                      size_t count, float *host);
int kn_cpu_param_write(struct kn_model *m, size_t off, size_t count,
                       const float *host);
int kn_cpu_forward(struct kn_model *m, struct kn_stream *s, const void *x,
                   uint32_t n, float *out);
int kn_cpu_step(struct kn_model *m, struct kn_stream *s, const void *x,
                const int32_t *labels, uint32_t n, int train, float *loss,
                int32_t *correct);
int kn_cpu_apply(struct kn_model *m, struct kn_stream *s,
                 const struct kn_sgd *opt);
int kn_cpu_metrics(struct kn_model *m, struct kn_stream *s,
                   enum kn_phase phase, int reset, struct kn_metrics *out);
float *kn_cpu_grad_buf(struct kn_model *m);

#endif
