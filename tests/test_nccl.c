/*
 * test_nccl.c - NCCL as ringfeed-train loads it (examples/train_nccl.c):
 * libnccl found at run time, a one-rank communicator, and an all-reduce of
 * a known device buffer that must come back exact.  Exits 77 without a
 * CUDA device or without libnccl (the trainer then falls back to MPI over
 * host memory and says so); scripts/gpu-check runs it on a GPU.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "train_nccl.h"

#define N (1u << 20)

int main(void)
{
    struct tr_nccl nc;
    struct tr_nccl_id id;
    tr_nccl_comm_t comm = NULL;
    cudaStream_t st;
    float *h, *d_in, *d_out;
    char why[512], ver[64];
    int count = 0, r, bad = 0;

    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("# SKIP no CUDA device\n");
        return 77;
    }
    if (tr_nccl_load(&nc, why, sizeof(why)) < 0) {
        printf("# SKIP %s\n", why);
        return 77;
    }
    tr_nccl_version(&nc, ver, sizeof(ver));
    printf("# %s from %s\n", ver, nc.path);
    h = malloc(N * sizeof(float));
    if (!h || cudaMalloc((void **)&d_in, N * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&d_out, N * sizeof(float)) != cudaSuccess ||
        cudaStreamCreate(&st) != cudaSuccess) {
        printf("not ok 1 - buffers\n");
        return 1;
    }
    for (unsigned i = 0; i < N; i++)
        h[i] = (float)(i % 1000) * 0.25f;
    if ((r = nc.get_unique_id(&id)) != 0 || (r = nc.comm_init_rank(&comm, 1, id, 0)) != 0) {
        printf("not ok 1 - one-rank communicator: %s\n", nc.error_string(r));
        return 1;
    }
    printf("ok 1 - one-rank communicator\n");
    cudaMemcpy(d_in, h, N * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(d_out, 0, N * sizeof(float));
    r = nc.all_reduce(d_in, d_out, N, TR_NCCL_FLOAT32, TR_NCCL_SUM, comm, st);
    if (r != 0 || cudaStreamSynchronize(st) != cudaSuccess) {
        printf("not ok 2 - ncclAllReduce: %s\n", nc.error_string(r));
        return 1;
    }
    for (unsigned i = 0; i < N; i++)
        h[i] = 0;
    cudaMemcpy(h, d_out, N * sizeof(float), cudaMemcpyDeviceToHost);
    for (unsigned i = 0; i < N; i++)
        bad += h[i] != (float)(i % 1000) * 0.25f;
    printf("%s 2 - all-reduce of %u floats exact (%d wrong)\n", bad ? "not ok" : "ok", N, bad);
    nc.comm_destroy(comm);
    tr_nccl_unload(&nc);
    return bad ? 1 : 0;
}
