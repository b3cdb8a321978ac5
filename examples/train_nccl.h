/*
 * train_nccl.h - NCCL for ringfeed-train, loaded at run time: libnccl is a
 * large library of the CUDA install that a build need not have, so the
 * trainer declares the few entry points it calls (ABI-stable across NCCL
 * 2.x) and resolves them with dlopen/dlsym.  Names carry tr_nccl_.
 */
#ifndef RINGFEED_EXAMPLES_TRAIN_NCCL_H
#define RINGFEED_EXAMPLES_TRAIN_NCCL_H

#include <stddef.h>

#define TR_NCCL_ID_BYTES 128       /* NCCL_UNIQUE_ID_BYTES */

struct tr_nccl_id {
    char internal[TR_NCCL_ID_BYTES];
};

typedef struct tr_nccl_comm *tr_nccl_comm_t;

/* The resolved entry points (ncclResult_t is an int enum; 0 is success). */
struct tr_nccl {
    void *lib;
    int version;                   /* ncclGetVersion, e.g. 22803 */
    char path[256];                /* what was loaded */
    int (*get_unique_id)(struct tr_nccl_id *id);
    int (*comm_init_rank)(tr_nccl_comm_t *comm, int nranks, struct tr_nccl_id id, int rank);
    int (*all_reduce)(const void *send, void *recv, size_t count, int dtype, int op,
                      tr_nccl_comm_t comm, void *cuda_stream);
    int (*comm_destroy)(tr_nccl_comm_t comm);
    int (*comm_abort)(tr_nccl_comm_t comm);   /* may be NULL */
    const char *(*error_string)(int result);
};

#define TR_NCCL_FLOAT32 7          /* ncclFloat32 */
#define TR_NCCL_SUM 0              /* ncclSum */

/*
 * Loads libnccl.so.2 from $RINGFEED_NCCL (a path), the CUDA install
 * (/usr/local/cuda/lib64, /usr/local/cuda/lib, $CUDA_HOME/lib64) or the
 * dynamic linker's path, and resolves the entry points.  Returns 0, or -1
 * with why (one line: what was tried) filled; tr_nccl_unload() either way.
 */
int tr_nccl_load(struct tr_nccl *n, char *why, size_t whylen);
void tr_nccl_unload(struct tr_nccl *n);

/* "nccl 2.28.3" from n->version. */
void tr_nccl_version(const struct tr_nccl *n, char *out, size_t len);

#endif
