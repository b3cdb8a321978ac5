/*
 * test_kn_cublas.c - the CUDA backend's cuBLAS loader (kernels/cuda/
 * cu_blas.c), which needs no device: a good library fills every entry of
 * the table and calls reach it; one of another major version, one lacking
 * an entry point and a path that does not exist are refused with a reason
 * that names the library and what is wrong, leaving the table zeroed; the
 * real search finds this machine's cuBLAS, of this build's major, when the
 * toolkit is installed; and kn_cu_blas loads once per process.
 *
 *   test_kn_cublas FAKE_OK.so FAKE_OLD.so FAKE_PARTIAL.so
 * (tests/cublas_fake.c, built by tests/meson.build)
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "config.h"
#include "cuda/cu_blas.h"
#include "tap.h"

static int zeroed(const struct cu_blas *b)
{
    const unsigned char *p = (const unsigned char *)b;

    for (size_t i = 0; i < sizeof *b; i++)
        if (p[i])
            return 0;
    return 1;
}

static int has(const char *s, const char *part)
{
    return strstr(s, part) != NULL;
}

static void check_good(const char *path)
{
    struct cu_blas b;
    cublasHandle_t h = NULL;
    char why[1024] = "";

    setenv("RINGFEED_CUBLAS", path, 1);
    TAP_IS_INT(kn_cu_blas_load(&b, why, sizeof why), 0,
               "a good library loads");
    TAP_IS_STR(b.path, path, "the table says which file it came from");
    TAP_IS_INT(b.major, CUBLAS_VER_MAJOR, "its major is the build's");
    TAP_OK(b.minor == 7 && b.patch == 3, "minor and patch are the library's");
    TAP_OK(b.create && b.destroy && b.set_stream && b.set_math_mode &&
           b.sgemm && b.gemm_ex && b.status_name && b.status_string &&
           b.get_property, "every entry point is resolved");
    if (!b.create)
        return;
    TAP_IS_INT(b.create(&h), CUBLAS_STATUS_SUCCESS,
               "cublasCreate_v2 reaches the library");
    TAP_IS_INT(b.destroy(h), CUBLAS_STATUS_SUCCESS,
               "and cublasDestroy_v2 gets its handle back");
    TAP_IS_INT(b.sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, NULL, NULL, 1,
                       NULL, 1, NULL, NULL, 1), CUBLAS_STATUS_NOT_SUPPORTED,
               "cublasSgemm_v2 is the library's");
    TAP_IS_STR(b.status_string(CUBLAS_STATUS_NOT_SUPPORTED),
               "the fake computes nothing", "status strings are the library's");
}

static void check_refused(const char *path, const char *expect, const char *name)
{
    struct cu_blas b;
    char why[1024] = "";

    setenv("RINGFEED_CUBLAS", path, 1);
    memset(&b, 0xa5, sizeof b);
    TAP_IS_INT(kn_cu_blas_load(&b, why, sizeof why), -ENOENT, name);
    TAP_OK(zeroed(&b), "the table is left zeroed");
    TAP_OK(has(why, "from $RINGFEED_CUBLAS") && has(why, path),
           "the reason names the variable and the file");
    TAP_OK(has(why, expect), "the reason says what is wrong");
    TAP_OK(!strchr(why, '\n'), "the reason is one line");
    tap_diag("%s", why);
}

static void check_search(void)
{
    struct cu_blas b;
    char why[1024] = "";
    int rc;

    unsetenv("RINGFEED_CUBLAS");
    unsetenv("CUDA_HOME");
    rc = kn_cu_blas_load(&b, why, sizeof why);
    if (rc == 0) {
        TAP_IS_INT(b.major, CUBLAS_VER_MAJOR,
                   "the search found cuBLAS of the build's major");
        TAP_OK(b.create && b.gemm_ex && b.get_property,
               "with every entry point the backend uses");
        tap_diag("found %s, cuBLAS %d.%d.%d", b.path, b.major, b.minor,
                 b.patch);
    } else {
        TAP_IS_INT(rc, -ENOENT, "no cuBLAS on this machine: -ENOENT");
        TAP_OK(has(why, "libcublas.so.") && has(why, RINGFEED_CUDA_LIBDIR),
               "the reason lists the places tried");
        tap_diag("%s", why);
    }
}

static void check_once(const char *good, const char *old)
{
    const struct cu_blas *a, *b;
    char why[1024] = "";

    setenv("RINGFEED_CUBLAS", good, 1);
    a = kn_cu_blas(why, sizeof why);
    TAP_OK(a != NULL && strcmp(a->path, good) == 0,
           "kn_cu_blas loads the process's cuBLAS");
    setenv("RINGFEED_CUBLAS", old, 1);
    b = kn_cu_blas(why, sizeof why);
    TAP_OK(a == b, "and keeps it: a later call loads nothing");
}

int main(int argc, char **argv)
{
    if (argc != 4)
        tap_bail("usage: test_kn_cublas FAKE_OK.so FAKE_OLD.so FAKE_PARTIAL.so");
    check_good(argv[1]);
    check_refused(argv[2], "this build needs", "another major is refused");
    check_refused(argv[3], "has no cublasGemmEx",
                  "a library lacking an entry point is refused");
    check_refused("/nonexistent/libcublas.so.99", "No such file",
                  "a missing file is refused");
    check_search();
    check_once(argv[1], argv[2]);
    return tap_done();
}
