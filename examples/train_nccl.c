/*
 * train_nccl.c - finds libnccl at run time and resolves the entry points
 * ringfeed-train uses (train_nccl.h).  Nothing here needs CUDA headers or
 * NCCL's: the declarations are the trainer's own, matching nccl.h 2.x.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_nccl.h"

static void *sym(struct tr_nccl *n, const char *name, char *why, size_t whylen)
{
    void *p = dlsym(n->lib, name);

    if (!p && why[0] == '\0')
        snprintf(why, whylen, "%s has no %s", n->path, name);
    return p;
}

int tr_nccl_load(struct tr_nccl *n, char *why, size_t whylen)
{
    const char *env = getenv("RINGFEED_NCCL"), *home = getenv("CUDA_HOME");
    char home_lib[256] = "";
    const char *tries[6];
    int (*get_version)(int *);
    size_t k = 0;

    memset(n, 0, sizeof(*n));
    why[0] = '\0';
    if (env && *env)
        tries[k++] = env;
    tries[k++] = "/usr/local/cuda/lib64/libnccl.so.2";
    tries[k++] = "/usr/local/cuda/lib/libnccl.so.2";
    if (home && *home) {
        snprintf(home_lib, sizeof(home_lib), "%s/lib64/libnccl.so.2", home);
        tries[k++] = home_lib;
    }
    tries[k++] = "libnccl.so.2";
    for (size_t i = 0; i < k && !n->lib; i++) {
        n->lib = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
        if (n->lib)
            snprintf(n->path, sizeof(n->path), "%s", tries[i]);
    }
    if (!n->lib) {
        snprintf(why, whylen, "libnccl.so.2 not found (tried $RINGFEED_NCCL, "
                 "/usr/local/cuda/lib64, /usr/local/cuda/lib, $CUDA_HOME/lib64 and the "
                 "linker's path: %s)", dlerror());
        return -1;
    }
    get_version = (int (*)(int *))sym(n, "ncclGetVersion", why, whylen);
    *(void **)&n->get_unique_id = sym(n, "ncclGetUniqueId", why, whylen);
    *(void **)&n->comm_init_rank = sym(n, "ncclCommInitRank", why, whylen);
    *(void **)&n->all_reduce = sym(n, "ncclAllReduce", why, whylen);
    *(void **)&n->comm_destroy = sym(n, "ncclCommDestroy", why, whylen);
    *(void **)&n->error_string = sym(n, "ncclGetErrorString", why, whylen);
    *(void **)&n->comm_abort = dlsym(n->lib, "ncclCommAbort");
    if (why[0] != '\0')
        return -1;
    if (get_version(&n->version) != 0 || n->version < 20000) {
        snprintf(why, whylen, "%s: ncclGetVersion gave %d: NCCL 2.x is needed", n->path,
                 n->version);
        return -1;
    }
    return 0;
}

void tr_nccl_unload(struct tr_nccl *n)
{
    if (n->lib)
        dlclose(n->lib);
    n->lib = NULL;
}

void tr_nccl_version(const struct tr_nccl *n, char *out, size_t len)
{
    int v = n->version;

    /* NCCL_VERSION(X, Y, Z): X*10000 + Y*100 + Z from 2.9 on, X*1000 + ... before */
    if (v >= 20900)
        snprintf(out, len, "nccl %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else
        snprintf(out, len, "nccl %d.%d.%d", v / 1000, v / 100 % 10, v % 100);
}
