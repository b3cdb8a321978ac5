/*
 * cublas_fake.c - a stand-in for libcublas that the CUDA backend's loader
 * (kernels/cuda/cu_blas.c) opens in tests/test_kn_cublas.c, built once per
 * kind (tests/meson.build):
 *   FAKE_OK        every entry point the loader resolves, of this build's
 *                  major version (the headers' CUBLAS_VER_MAJOR)
 *   FAKE_OLD       the same, one major version older
 *   FAKE_PARTIAL   this major, without cublasGemmEx
 * Nothing here computes: a handle is a fixed address and every call but
 * the version query answers CUBLAS_STATUS_NOT_SUPPORTED, so a test sees
 * the fake's answers come back through the loader's table.
 */
#include <cublas_v2.h>

#define FAKE_OK 1
#define FAKE_OLD 2
#define FAKE_PARTIAL 3

#ifndef KIND
#error "build with -DKIND=FAKE_OK, FAKE_OLD or FAKE_PARTIAL"
#endif

static int fake_handle;

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = (cublasHandle_t)(void *)&fake_handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    return h == (cublasHandle_t)(void *)&fake_handle ?
           CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    (void)h;
    (void)s;
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode)
{
    (void)h;
    (void)mode;
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta,
                           cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *a, int lda,
                           const float *b, int ldb, const float *beta,
                           float *c, int ldc)
{
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha;
    (void)a, (void)lda, (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

#if KIND != FAKE_PARTIAL
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
                            cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *a,
                            cudaDataType at, int lda, const void *b,
                            cudaDataType bt, int ldb, const void *beta,
                            void *c, cudaDataType ct, int ldc,
                            cublasComputeType_t compute,
                            cublasGemmAlgo_t algo)
{
    (void)h, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha;
    (void)a, (void)at, (void)lda, (void)b, (void)bt, (void)ldb, (void)beta;
    (void)c, (void)ct, (void)ldc, (void)compute, (void)algo;
    return CUBLAS_STATUS_NOT_SUPPORTED;
}
#endif

const char *cublasGetStatusName(cublasStatus_t st)
{
    return st == CUBLAS_STATUS_NOT_SUPPORTED ? "FAKE_NOT_SUPPORTED" : "FAKE";
}

const char *cublasGetStatusString(cublasStatus_t st)
{
    return st == CUBLAS_STATUS_NOT_SUPPORTED ? "the fake computes nothing"
                                             : "fake status";
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    switch (type) {
    case MAJOR_VERSION:
        *value = KIND == FAKE_OLD ? CUBLAS_VER_MAJOR - 1 : CUBLAS_VER_MAJOR;
        return CUBLAS_STATUS_SUCCESS;
    case MINOR_VERSION:
        *value = 7;
        return CUBLAS_STATUS_SUCCESS;
    case PATCH_LEVEL:
        *value = 3;
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}
