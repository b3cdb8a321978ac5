/*
 * cu_blas.h - cuBLAS as the CUDA backend calls it: a table of the entry
 * points it uses, filled from a library opened with dlopen at run time,
 * so that nothing of cuBLAS is linked (cu_blas.c says where it looks).
 *
 * The header cublas_v2.h is used for types only: each pointer has the type
 * of the function the header declares (its macros map cublasCreate to
 * cublasCreate_v2 and so on, and the symbol looked up is the name the
 * macro gives), so a call through the table is checked as a direct call
 * would be.
 */
#ifndef RINGFEED_KERNELS_CU_BLAS_H
#define RINGFEED_KERNELS_CU_BLAS_H

#include <stddef.h>

#include <cublas_v2.h>

struct cu_blas {
    char path[256];                 /* what dlopen opened */
    int major, minor, patch;        /* cublasGetProperty's version */
    __typeof__(cublasCreate) *create;
    __typeof__(cublasDestroy) *destroy;
    __typeof__(cublasSetStream) *set_stream;
    __typeof__(cublasSetMathMode) *set_math_mode;
    __typeof__(cublasSgemm) *sgemm;
    __typeof__(cublasGemmEx) *gemm_ex;
    __typeof__(cublasGetStatusName) *status_name;
    __typeof__(cublasGetStatusString) *status_string;
    __typeof__(cublasGetProperty) *get_property;
};

/*
 * Opens cuBLAS and fills *b: $RINGFEED_CUBLAS alone when it is set, else
 * the candidates of cu_blas.c in order, the first whose major version is
 * the one this build was compiled against (CUBLAS_VER_MAJOR).  Returns 0,
 * or -ENOENT with a one-line reason in why (every candidate tried, each
 * one's failure) and *b zeroed.  The library stays loaded: there is no
 * unload, as cuBLAS handles may outlive any one caller.
 */
int kn_cu_blas_load(struct cu_blas *b, char *why, size_t whylen);

/*
 * The process's cuBLAS: kn_cu_blas_load run once (the first call, on any
 * thread), its table or NULL from then on; on NULL why gets the reason
 * the load gave.  The table is never freed.
 */
const struct cu_blas *kn_cu_blas(char *why, size_t whylen);

#endif
