/*
 * resize_kern.h - the resampler's kernel sets, internal to resize*.c: the
 * baseline in plain C (resize.c), AVX2 (resize_avx2.c) and AVX-512
 * (resize_avx512.c).  rs_resize (resize.c) drives them a row at a time;
 * every set computes exactly the same integers (resize.h gives the
 * formulas), so which one ran never shows in the output.
 *
 * Two shapes of set: planar (baseline, AVX2), whose horizontal pass
 * writes h as three planes and whose vertical pass writes three rows of
 * bytes (interleaved after for HWC); RGB (AVX-512, rgb true), whose
 * horizontal pass writes h in the input's RGB order and whose vertical
 * pass writes the output's layout itself.
 */
#ifndef RINGFEED_DAEMON_RESIZE_KERN_H
#define RINGFEED_DAEMON_RESIZE_KERN_H

#include "resize.h"

/* AVX2 needs x86-64 and GCC's (or clang's) target attribute; RS_NO_AVX2
 * builds the baseline alone (tests/meson.build's resize_baseline). */
#if !defined(RS_NO_AVX2) && !(defined(__x86_64__) && defined(__GNUC__))
#define RS_NO_AVX2
#endif
/* AVX-512 the same, and never without AVX2 (its fallback for wide
 * reductions). */
#if !defined(RS_NO_AVX512) && defined(RS_NO_AVX2)
#define RS_NO_AVX512
#endif

struct rs_kern {
    const char *name;
    bool rgb;            /* the RGB shape: vrow_rgb, no vrow or interleave */
    /*
     * One input row, pixels [ax->lo, ax->hi) as RGB bytes from row, to
     * three int16 planes of h (resize.h) at out, out + ns and out + 2 * ns
     * (ax->n values each, padding past them up to 16 values); rgb sets:
     * to ax->vgroups * 16 values of h in RGB order at out (ns unused).
     * planes is scratch of 3 * pstride bytes, pstride >= ax->hi - ax->lo +
     * 32, whose bytes past the row's are zero.
     */
    void (*hrow)(const uint8_t *row, const struct rs_axis *ax, uint8_t *planes, size_t pstride,
                 int16_t *out, size_t ns);
    /* rgb sets: hrow of rows r0 and r1 into o0 and o1 at once, for rows of
     * 64 bytes or more (3 (ax->hi - ax->lo) >= 64). */
    void (*hrow2)(const uint8_t *r0, const uint8_t *r1, const struct rs_axis *ax, int16_t *o0,
                  int16_t *o1);
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
    /*
     * rgb sets: one output row of n pixels from rows[k] (RGB order, 3n
     * values, readable to 3n rounded up to 64) and weights wt[k], k < T,
     * by the formulas of vrow, written as HWC (n RGB pixels at out[0]) or
     * CHW (n bytes of each plane at out[c]).  Writes no byte past them.
     * next, unless NULL: the same pointers for the output row
     * RS_PREFETCH_ROWS on, whose lines the kernel may prefetch for writing.
     */
    void (*vrow_rgb)(const int16_t *const *rows, const int16_t *wt, uint32_t T, uint32_t n,
                     enum rs_layout layout, uint8_t *const out[3], uint8_t *const *next);
    /* After the last row: makes the output's stores visible in order
     * (NULL: nothing to do). */
    void (*finish)(void);
};

/* How far ahead the RGB vertical kernel prefetches its output rows: 2
 * rows (about 100 ns of work) measured better than none and than 4, by a
 * few percent, with the output in memory the size of a ring (bench-like
 * runs writing 150 MB round robin) and the caches emptied between images
 * as a decoder does. */
#define RS_PREFETCH_ROWS 2

extern const struct rs_kern rs_kern_baseline;
#ifndef RS_NO_AVX2
extern const struct rs_kern rs_kern_avx2;
#endif
#ifndef RS_NO_AVX512
extern const struct rs_kern rs_kern_avx512;

/*
 * The AVX-512 layout of a horizontal table (resize.h), in two steps for
 * rs_axis_plan: rs_avx512_fit, from start, count and taps alone, says
 * whether its windows fit (1: a window a group, 2: a window a pair, 0:
 * neither, the table is laid out for AVX2); rs_avx512_layout, once w is
 * computed and vbase, vidx and vw are carved, writes them for that answer
 * (vwide set by the caller).  Both need AVX-512 (rs_use_isa checked it).
 */
int rs_avx512_fit(const struct rs_axis *a);
void rs_avx512_layout(struct rs_axis *a);
#endif

/* The kernel set of a kset (enum rs_isa, never AUTO). */
const struct rs_kern *rs_kern_of(unsigned kset);

/* The kernel set in effect (enum rs_isa, never AUTO). */
unsigned rs_isa_current(void);

#endif
