/*
 * aug_simd.c - which set of the augmentation kernels runs (aug_simd.h).
 */
#include <errno.h>

#include "aug_simd.h"

static enum aug_isa current; /* AUTO until chosen */

static bool has(enum aug_isa isa)
{
    switch (isa) {
    case AUG_ISA_BASELINE:
        return true;
#ifndef AUG_NO_AVX512
    case AUG_ISA_AVX512:
        /* every feature aug_avx512.c's target names */
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vbmi");
#endif
    default:
        return false;
    }
}

int aug_use_isa(enum aug_isa isa)
{
    if (isa == AUG_ISA_AUTO) {
        current = has(AUG_ISA_AVX512) ? AUG_ISA_AVX512 : AUG_ISA_BASELINE;
        return 0;
    }
    if (isa != AUG_ISA_BASELINE && isa != AUG_ISA_AVX512)
        return -EINVAL;
    if (!has(isa))
        return -ENOTSUP;
    current = isa;
    return 0;
}

enum aug_isa aug_isa_current(void)
{
    if (current == AUG_ISA_AUTO)
        aug_use_isa(AUG_ISA_AUTO);
    return current;
}

const char *aug_isa_name(void)
{
    return aug_isa_current() == AUG_ISA_AVX512 ? "avx512" : "baseline";
}
