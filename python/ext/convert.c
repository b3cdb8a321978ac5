/*
 * convert.c - ringfeed._ringfeed.normalize: a batch of uint8 images into
 * float32, float16 or bfloat16, scaled to [0, 1] and normalized per
 * channel, ((x / 255) - mean[c]) / std[c], as torchvision's ToTensor (or
 * ConvertImageDtype) then Normalize give; for Loader(dtype=, normalize=).
 *
 * The rule is proto/u8norm.h's (the device's converter uses it too): one
 * multiply and one add per value in float32, then rounded to the output
 * type; without a normalization (mean 0, std 1) x / 255, exactly what
 * ToTensor gives.  The loops run over one channel's plane at a time
 * (CHW) or over pixels (HWC), straight-line code the compiler vectorizes;
 * the GIL is released while they run.  torchvision computes the two steps
 * apart in float32 ((x / 255 - m) / s), so a value may differ from it by
 * an ulp or two of float32 (the tests bound it).
 */
#include "ext.h"
#include "u8norm.h"

#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

enum out_kind { OUT_F32, OUT_F16, OUT_BF16 };

#define MAX_CHANNELS U8NORM_MAX_CHANNELS

static uint16_t bf16_of(float v)
{
    uint32_t u;

    memcpy(&u, &v, sizeof(u));
    u += 0x7fffu + ((u >> 16) & 1u); /* finite inputs only: ties to even */
    return (uint16_t)(u >> 16);
}

#if defined(__x86_64__)
/* float16 through F16C, 8 values a step (the plain _Float16 cast is a
 * call per value: 6x slower): the same rounding, to nearest, ties to even */
__attribute__((target("avx2,f16c"), optimize("O3"))) static void f16_plane_f16c(
    const uint8_t *restrict s, uint16_t *restrict o, size_t n, float a, float b)
{
    __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        __m128i u8 = _mm_loadl_epi64((const __m128i *)(s + i));
        __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(u8));

        f = _mm256_add_ps(_mm256_mul_ps(f, va), vb);
        _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) {
        _Float16 h = (_Float16)((float)s[i] * a + b);

        memcpy(o + i, &h, sizeof(h));
    }
}
#endif

__attribute__((optimize("O3"))) static void run_plane(const uint8_t *restrict s,
                                                      void *restrict d, size_t n, float a,
                                                      float b, enum out_kind k)
{
    switch (k) {
    case OUT_F32: {
        float *restrict o = d;

        if (a < 0) /* scaling alone: x / 255, exactly */
            for (size_t i = 0; i < n; i++)
                o[i] = (float)s[i] / 255.0f;
        else
            for (size_t i = 0; i < n; i++)
                o[i] = (float)s[i] * a + b;
        break;
    }
    case OUT_F16: {
        _Float16 *restrict o = d;

#if defined(__x86_64__)
        if (a >= 0 && n >= 8 && __builtin_cpu_supports("f16c") &&
            __builtin_cpu_supports("avx2")) {
            f16_plane_f16c(s, d, n, a, b);
            break;
        }
#endif
        for (size_t i = 0; i < n; i++)
            o[i] = (_Float16)(a < 0 ? (float)s[i] / 255.0f : (float)s[i] * a + b);
        break;
    }
    case OUT_BF16: {
        uint16_t *restrict o = d;

        for (size_t i = 0; i < n; i++)
            o[i] = bf16_of(a < 0 ? (float)s[i] / 255.0f : (float)s[i] * a + b);
        break;
    }
    }
}

static void run_hwc(const uint8_t *s, void *d, size_t pixels, uint32_t c, const float *a,
                    const float *b, enum out_kind k)
{
    size_t esize = k == OUT_F32 ? 4 : 2;

    /* per pixel, its c values: c <= MAX_CHANNELS */
    for (size_t p = 0; p < pixels; p++)
        for (uint32_t ch = 0; ch < c; ch++)
            run_plane(s + p * c + ch, (char *)d + (p * c + ch) * esize, 1, a[ch], b[ch], k);
}

static int floats(PyObject *seq, uint32_t c, float *out, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, "");
    int ok = 0;

    if (!fast) {
        PyErr_Format(PyExc_TypeError, "ringfeed: normalize %s: a sequence of %u numbers", what,
                     c);
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(fast) != (Py_ssize_t)c) {
        PyErr_Format(PyExc_ValueError, "ringfeed: normalize %s has %zd values, the images %u "
                     "channels", what, PySequence_Fast_GET_SIZE(fast), c);
        goto out;
    }
    for (uint32_t i = 0; i < c; i++) {
        double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));

        if (v == -1.0 && PyErr_Occurred())
            goto out;
        out[i] = (float)v;
    }
    ok = 1;
out:
    Py_DECREF(fast);
    return ok ? 0 : -1;
}

PyObject *ext_normalize(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"src", "dst", "out", "channels", "plane", "hwc", "mean", "std",
                            NULL};
    PyObject *src, *dst, *mean, *std;
    const char *out;
    unsigned int c;
    Py_ssize_t plane;
    int hwc;
    Py_buffer sb = {0}, db = {0};
    float a[MAX_CHANNELS], b[MAX_CHANNELS], m[MAX_CHANNELS], sd[MAX_CHANNELS];
    char why[128];
    enum out_kind k;
    size_t n, esize;
    PyObject *ret = NULL;

    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOsInpOO", names, &src, &dst, &out, &c, &plane,
                                     &hwc, &mean, &std))
        return NULL;
    if (strcmp(out, "float32") == 0)
        k = OUT_F32;
    else if (strcmp(out, "float16") == 0)
        k = OUT_F16;
    else if (strcmp(out, "bfloat16") == 0)
        k = OUT_BF16;
    else
        return PyErr_Format(PyExc_ValueError, "ringfeed: normalize to %s: float32, float16 or "
                            "bfloat16", out);
    if (c < 1 || c > MAX_CHANNELS)
        return PyErr_Format(PyExc_ValueError, "ringfeed: normalize %u channels: 1 to %d", c,
                            MAX_CHANNELS);
    if (floats(mean, c, m, "mean") < 0 || floats(std, c, sd, "std") < 0)
        return NULL;
    if (u8norm_coeffs(m, sd, c, a, b, why, sizeof(why)) < 0)
        return PyErr_Format(PyExc_ValueError, "ringfeed: normalize %s", why);
    if (PyObject_GetBuffer(src, &sb, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(dst, &db, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto out;
    esize = k == OUT_F32 ? 4 : 2;
    n = (size_t)sb.len;
    if (plane < 1 || (size_t)db.len != n * esize || n % ((size_t)plane * c)) {
        PyErr_Format(PyExc_ValueError, "ringfeed: normalize %zd bytes of images into %zd: "
                     "the output holds one %zu-byte value per input byte, whole images of "
                     "%u channels of %zd values", sb.len, db.len, esize, c, plane);
        goto out;
    }
    Py_BEGIN_ALLOW_THREADS
    if (hwc) {
        run_hwc(sb.buf, db.buf, n / c, c, a, b, k);
    } else {
        /* CHW: whole images, so plane i is channel i % c */
        uint32_t ch = 0;

        for (size_t off = 0; off < n; off += (size_t)plane, ch = (ch + 1) % c)
            run_plane((const uint8_t *)sb.buf + off, (char *)db.buf + off * esize,
                      (size_t)plane, a[ch], b[ch], k);
    }
    Py_END_ALLOW_THREADS
    ret = Py_None;
    Py_INCREF(ret);
out:
    if (db.buf)
        PyBuffer_Release(&db);
    PyBuffer_Release(&sb);
    return ret;
}
