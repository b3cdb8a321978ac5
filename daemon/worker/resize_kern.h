/*
 * resize_kern.h - the resampler's kernel sets, internal to resize*.c: the
 * baseline in plain C (resize.c) and AVX2 (resize_avx2.c).  rs_resize
 * (resize.c) drives them a row at a time; both sets compute exactly the
 * same integers (resize.h gives the formulas), so which one ran never
 * shows in the output.
 */
#ifndef RINGFEED_DAEMON_RESIZE_KERN_H
#define RINGFEED_DAEMON_RESIZE_KERN_H

#include "resize.h"

/* AVX2 needs x86-64 and GCC's (or clang's) target attribute; RS_NO_AVX2
 * builds the baseline alone (tests/meson.build's resize_baseline). */
#if !defined(RS_NO_AVX2) && !(defined(__x86_64__) && defined(__GNUC__))
#define RS_NO_AVX2
#endif

struct rs_kern {
    const char *name;
    /*
     * One input row, pixels [ax->lo, ax->hi) as RGB bytes from row, to
     * three int16 planes of h (resize.h) at out, out + ns and out + 2 * ns
     * (ax->n values each, padding past them up to 16 values).  planes is
     * scratch of 3 * pstride bytes, pstride >= ax->hi - ax->lo + 32, whose
     * bytes past the row's are zero.
     */
    void (*hrow)(const uint8_t *row, const struct rs_axis *ax, uint8_t *planes, size_t pstride,
                 int16_t *out, size_t ns);
    /*
     * One output row of the three planes: byte e (e < n) of out[c] from
     * rows[k][c * ns + e] and weights wt[k], k < T, by the 16-bit formula
     * of resize.h for T <= RS_V16_TAPS, else by the 32-bit one (T even).
     * Rows hold at least max(n, 32) values from each plane's start.
     * stream: out is the slot (read back by another process, not by this
     * core; streaming stores may do), else scratch read back at once.
     */
    void (*vrow)(const int16_t *const *rows, size_t ns, const int16_t *wt, uint32_t T,
                 uint32_t n, uint8_t *const out[3], bool stream);
    /* n pixels from planes at p, p + pstride, p + 2 * pstride (each
     * readable to n rounded up to 16) to n RGB pixels at rgb. */
    void (*interleave)(const uint8_t *p, size_t pstride, uint32_t n, uint8_t *rgb);
    /* After the last row: makes the output's stores visible in order
     * (NULL: nothing to do). */
    void (*finish)(void);
};

extern const struct rs_kern rs_kern_baseline;
#ifndef RS_NO_AVX2
extern const struct rs_kern rs_kern_avx2;
#endif

#endif
