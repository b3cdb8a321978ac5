/*
 * cu_blas.c - finds cuBLAS at run time and resolves the entry points the
 * CUDA backend uses (cu_blas.h), so ringfeed-train links no CUDA library
 * and starts on any node: a CPU node, or one with another CUDA major.
 *
 * Where it looks, in order (the first that loads, has every entry point
 * and is of this build's major version wins):
 *   $RINGFEED_CUBLAS         when set, the only candidate: a user's choice
 *                            that fails says so rather than being replaced
 *   libcublas.so.<major>     the linker's path (LD_LIBRARY_PATH, ld.so's
 *                            cache): a distribution's package, or a wheel's
 *                            folder a wrapper puts on the path
 *   $CUDA_HOME/lib64/libcublas.so.<major>
 *   <the build's toolkit>/lib64/libcublas.so.<major>  (RINGFEED_CUDA_LIBDIR)
 *   libcublas.so             a development link, which may name another
 *                            major: its version is checked like the others'
 * <major> is CUBLAS_VER_MAJOR of the headers the build compiled against;
 * cuBLAS of another major has another ABI and is refused with its version.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "cu_blas.h"

#define CU_STR_(x) #x
#define CU_STR(x) CU_STR_(x)    /* x macro-expanded, then quoted */

#define CU_BLAS_SONAME "libcublas.so." CU_STR(CUBLAS_VER_MAJOR)

_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
               "dlsym's result is stored as a function pointer");

/* The entry points: the field and the header's name for the function,
 * which its macros may map to the exported symbol (cublasCreate is
 * cublasCreate_v2); CU_STR gives the exported name. */
static const struct {
    const char *symbol;
    size_t off;
} cu_blas_syms[] = {
#define S(field, fn) { CU_STR(fn), offsetof(struct cu_blas, field) }
    S(create, cublasCreate),
    S(destroy, cublasDestroy),
    S(set_stream, cublasSetStream),
    S(set_math_mode, cublasSetMathMode),
    S(sgemm, cublasSgemm),
    S(gemm_ex, cublasGemmEx),
    S(status_name, cublasGetStatusName),
    S(status_string, cublasGetStatusString),
    S(get_property, cublasGetProperty),
#undef S
};

/* Appends "; text" (or text, when why is empty) to why, truncating. */
__attribute__((format(printf, 3, 4)))
static void cu_add(char *why, size_t whylen, const char *fmt, ...)
{
    size_t used = strnlen(why, whylen);
    va_list ap;

    if (used + 3 >= whylen)
        return;
    if (used > 0) {
        memcpy(why + used, "; ", 3);
        used += 2;
    }
    va_start(ap, fmt);
    vsnprintf(why + used, whylen - used, fmt, ap);
    va_end(ap);
}

/* Tries one candidate; 0 with *b filled and the library kept, or -1 with
 * the reason appended to why and the library closed. */
static int cu_try(struct cu_blas *b, const char *path, char *why,
                  size_t whylen)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const char *err;

    if (!lib) {
        err = dlerror();
        cu_add(why, whylen, "%s", err ? err : path);
        return -1;
    }
    memset(b, 0, sizeof *b);
    for (size_t i = 0; i < sizeof cu_blas_syms / sizeof cu_blas_syms[0];
         i++) {
        void *p = dlsym(lib, cu_blas_syms[i].symbol);

        if (!p) {
            cu_add(why, whylen, "%s has no %s", path, cu_blas_syms[i].symbol);
            goto fail;
        }
        memcpy((char *)b + cu_blas_syms[i].off, &p, sizeof p);
    }
    if (b->get_property(MAJOR_VERSION, &b->major) != CUBLAS_STATUS_SUCCESS ||
        b->get_property(MINOR_VERSION, &b->minor) != CUBLAS_STATUS_SUCCESS ||
        b->get_property(PATCH_LEVEL, &b->patch) != CUBLAS_STATUS_SUCCESS) {
        cu_add(why, whylen, "%s: cublasGetProperty failed", path);
        goto fail;
    }
    if (b->major != CUBLAS_VER_MAJOR) {
        cu_add(why, whylen, "%s is cuBLAS %d.%d.%d, this build needs %d.x",
               path, b->major, b->minor, b->patch, CUBLAS_VER_MAJOR);
        goto fail;
    }
    snprintf(b->path, sizeof b->path, "%s", path);
    return 0;

fail:
    memset(b, 0, sizeof *b);
    dlclose(lib);
    return -1;
}

int kn_cu_blas_load(struct cu_blas *b, char *why, size_t whylen)
{
    const char *env = getenv("RINGFEED_CUBLAS"), *home = getenv("CUDA_HOME");
    char home_lib[512] = "", tried[768] = "";
    const char *tries[4];
    size_t k = 0;

    memset(b, 0, sizeof *b);
    if (env && *env) {
        tries[k++] = env;
    } else {
        tries[k++] = CU_BLAS_SONAME;
        if (home && *home) {
            snprintf(home_lib, sizeof home_lib, "%s/lib64/" CU_BLAS_SONAME,
                     home);
            tries[k++] = home_lib;
        }
        tries[k++] = RINGFEED_CUDA_LIBDIR "/" CU_BLAS_SONAME;
        tries[k++] = "libcublas.so";
    }
    for (size_t i = 0; i < k; i++) {
        int seen = 0;

        for (size_t j = 0; j < i; j++)
            seen |= strcmp(tries[i], tries[j]) == 0;
        if (!seen && cu_try(b, tries[i], tried, sizeof tried) == 0)
            return 0;
    }
    snprintf(why, whylen, "cuBLAS %d not loaded%s: %s", CUBLAS_VER_MAJOR,
             env && *env ? " from $RINGFEED_CUBLAS" : "", tried);
    return -ENOENT;
}

static struct {
    pthread_once_t once;
    int ok;
    struct cu_blas table;
    char why[512];
} cu_blas_proc = { .once = PTHREAD_ONCE_INIT };

static void cu_blas_once(void)
{
    cu_blas_proc.ok = kn_cu_blas_load(&cu_blas_proc.table, cu_blas_proc.why,
                                      sizeof cu_blas_proc.why) == 0;
}

const struct cu_blas *kn_cu_blas(char *why, size_t whylen)
{
    pthread_once(&cu_blas_proc.once, cu_blas_once);
    if (cu_blas_proc.ok)
        return &cu_blas_proc.table;
    snprintf(why, whylen, "%s", cu_blas_proc.why);
    return NULL;
}
