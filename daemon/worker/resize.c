/*
 * resize.c - rs_resize (resize.h): the row loop over the kernels, the
 * kernels' selection, and the baseline kernels in plain C.
 *
 * Per output row y (ay's spans only move forward, so the horizontal rows
 * live in a ring of ay->taps rows, rounded up to a power of two; a table
 * whose spans go back, which rs_axis_plan never builds for a vertical
 * axis, would get a ring of all its rows):
 *     horizontal rows up to the last that y reads, each once, into the ring
 *     vertical: the rows' pointers and weights (a weight of 2^15 split in
 *               2^15 - 1 and 1 on its row, an odd count of more than
 *               RS_V16_TAPS padded with a weight 0), then
 *               planar sets, per plane:
 *                 CHW  straight into the plane's row in dst
 *                 HWC  into a line of three planes, interleaved into dst
 *               the RGB set: the whole row, straight into dst in either
 *                 layout (the kernel writes it); its horizontal rows are
 *                 made two at a time where there are two left
 * The kernels are those of ax->kset (the table's layout is theirs).
 *
 * Scratch layout (rs_scratch_bytes), W = ax->hi - ax->lo, ns = ax->n
 * rounded up to 32 (RGB set: a row is ax->vgroups * 16 values), each piece
 * 32-byte aligned:
 *     uint8_t  planes[3][W + 32 rounded up]  the AVX2 horizontal pass's
 *                                            deinterleaved input row (the
 *                                            AVX-512 one's copy of a short
 *                                            row)
 *     int16_t  ring[R][3][ns]                horizontal rows, 3 planes each
 *                                            (RGB set: ring[R][row])
 *     uint8_t  line[3][ns]                   HWC: a row's planes
 *     pointers rows[taps + 2]                a vertical output's input rows
 *     int16_t  wt[taps + 2]                  and their weights
 * The planar sets' padding (planes past W, ring and line columns past n)
 * is zeroed per call, so the kernels' reads past the used values see
 * zeros (and past what a horizontal kernel writes: the AVX2 ones write 16
 * values a step); the RGB horizontal kernel writes its whole row, padding
 * included.
 */
#include "resize.h"

#include <errno.h>
#include <string.h>

#include "resize_kern.h"

#define ALIGN32(n) (((n) + 31) & ~(size_t)31)

static unsigned current; /* enum rs_isa, 0 (AUTO) until chosen */

/* Rows of the ring, a power of two (a mask takes the place of a
 * division): the vertical taps (and one more for the RGB set, which makes
 * rows two at a time: the second may be one the row at hand does not
 * use yet), or every row for spans that go back. */
static uint32_t ring_rows(const struct rs_axis *ax, const struct rs_axis *ay)
{
    uint32_t need = ay->monotone ? ay->taps + rs_kern_of(ax->kset)->rgb
                                 : (uint32_t)(ay->hi - ay->lo),
             r = 1;

    while (r < need)
        r *= 2;
    return r;
}

/* The pieces of scratch, in order. */
struct layout {
    size_t pstride, ns, planes, ring, line, rows, wt;
};

static struct layout layout_of(const struct rs_axis *ax, const struct rs_axis *ay)
{
    struct layout l;
    size_t most = (size_t)ay->taps + 2;
    bool rgb = rs_kern_of(ax->kset)->rgb;

    l.pstride = ALIGN32((size_t)(ax->hi - ax->lo) + 32);
    l.ns = ((size_t)ax->n + 31) / 32 * 32;
    l.planes = 3 * l.pstride;
    if (rgb) /* one row of h in RGB order */
        l.ring = ALIGN32((size_t)ring_rows(ax, ay) * ax->vgroups * 16 * sizeof(int16_t));
    else
        l.ring = ALIGN32((size_t)ring_rows(ax, ay) * 3 * l.ns * sizeof(int16_t));
    l.line = rgb ? 0 : ALIGN32(3 * l.ns);
    l.rows = ALIGN32(most * sizeof(const int16_t *));
    l.wt = ALIGN32(most * sizeof(int16_t));
    return l;
}

size_t rs_scratch_bytes(const struct rs_axis *ax, const struct rs_axis *ay)
{
    struct layout l = layout_of(ax, ay);

    return l.planes + l.ring + l.line + l.rows + l.wt;
}

/* Whether this CPU (and build) runs a kernel set. */
static bool has(enum rs_isa isa)
{
    switch (isa) {
    case RS_ISA_BASELINE: return true;
#ifndef RS_NO_AVX2
    case RS_ISA_AVX2: return __builtin_cpu_supports("avx2");
#endif
#ifndef RS_NO_AVX512
    case RS_ISA_AVX512:
        /* every feature resize_avx512.c's TARGET and resize_plan.c's 8-lane
         * tables (avx512dq) are built for */
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vbmi") &&
               __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("prfchw");
#endif
    default: return false;
    }
}

int rs_use_isa(enum rs_isa isa)
{
    if (isa == RS_ISA_AUTO) {
        current = has(RS_ISA_AVX512) ? RS_ISA_AVX512
                  : has(RS_ISA_AVX2) ? RS_ISA_AVX2
                                     : RS_ISA_BASELINE;
        return 0;
    }
    if (isa != RS_ISA_BASELINE && isa != RS_ISA_AVX2 && isa != RS_ISA_AVX512)
        return -EINVAL;
    if (!has(isa))
        return -ENOTSUP;
    current = isa;
    return 0;
}

unsigned rs_isa_current(void)
{
    if (!current)
        rs_use_isa(RS_ISA_AUTO);
    return current;
}

const struct rs_kern *rs_kern_of(unsigned kset)
{
    switch (kset) {
#ifndef RS_NO_AVX2
    case RS_ISA_AVX2: return &rs_kern_avx2;
#endif
#ifndef RS_NO_AVX512
    case RS_ISA_AVX512: return &rs_kern_avx512;
#endif
    default: return &rs_kern_baseline;
    }
}

const char *rs_isa_name(void)
{
    return rs_kern_of(rs_isa_current())->name;
}

const char *rs_kset_name(const struct rs_axis *a)
{
    return rs_kern_of(a->kset)->name;
}

/* The weights of output row y's taps and their rows in the ring (a
 * weight of 2^15 split in two, an odd count past RS_V16_TAPS padded):
 * returns their count T. */
static uint32_t vtaps(const struct rs_axis *ay, uint32_t y, const int16_t *ring, size_t rowlen,
                      uint32_t mask, const int16_t **rows, int16_t *wt)
{
    uint32_t s = (uint32_t)(ay->start[y] - ay->lo), cnt = ay->count[y], T = 0;

    for (uint32_t j = 0; j < cnt; j++) {
        const int16_t *r = ring + (size_t)((s + j) & mask) * rowlen;
        int32_t w = RS_W(ay, y, j);

        rows[T] = r;
        wt[T++] = (int16_t)(w == 32768 ? 32767 : w);
        if (w == 32768) {
            rows[T] = r;
            wt[T++] = 1;
        }
    }
    if (T > RS_V16_TAPS && T % 2) {
        rows[T] = rows[T - 1];
        wt[T++] = 0;
    }
    return T;
}

/* The RGB set's row loop: the kernel writes each row into dst itself. */
static void resize_rgb(const struct rs_kern *k, const uint8_t *src, size_t stride,
                       const struct rs_axis *ax, const struct rs_axis *ay, enum rs_layout layout,
                       void *scratch, uint8_t *dst)
{
    struct layout l = layout_of(ax, ay);
    uint8_t *planes = scratch;
    int16_t *ring = (int16_t *)(planes + l.planes);
    const int16_t **rows = (const int16_t **)((uint8_t *)ring + l.ring);
    int16_t *wt = (int16_t *)((char *)rows + l.rows);
    uint32_t mask = ring_rows(ax, ay) - 1, next = 0, n = ax->n;
    uint32_t rows_in = (uint32_t)(ay->hi - ay->lo);
    size_t rowlen = (size_t)ax->vgroups * 16, plane_size = (size_t)n * ay->n;
    bool pairs = 3 * (size_t)(ax->hi - ax->lo) >= 64;

    for (uint32_t y = 0; y < ay->n; y++) {
        uint32_t last = (uint32_t)(ay->start[y] - ay->lo) + ay->count[y], T;

        while (next < last) {
            if (pairs && next + 1 < rows_in) { /* (the ring has a row to spare) */
                k->hrow2(src + (size_t)next * stride, src + (size_t)(next + 1) * stride, ax,
                         ring + (size_t)(next & mask) * rowlen,
                         ring + (size_t)((next + 1) & mask) * rowlen);
                next += 2;
            } else {
                k->hrow(src + (size_t)next * stride, ax, planes, l.pstride,
                        ring + (size_t)(next & mask) * rowlen, 0);
                next++;
            }
        }
        T = vtaps(ay, y, ring, rowlen, mask, rows, wt);
        if (layout == RS_CHW) {
            uint8_t *out[3] = { dst + (size_t)y * n, dst + plane_size + (size_t)y * n,
                                dst + 2 * plane_size + (size_t)y * n };
            uint8_t *ahead[3] = { out[0] + RS_PREFETCH_ROWS * (size_t)n,
                                  out[1] + RS_PREFETCH_ROWS * (size_t)n,
                                  out[2] + RS_PREFETCH_ROWS * (size_t)n };

            k->vrow_rgb(rows, wt, T, n, layout, out, y + RS_PREFETCH_ROWS < ay->n ? ahead : NULL);
        } else {
            uint8_t *out[3] = { dst + (size_t)y * n * 3, NULL, NULL };
            uint8_t *ahead[3] = { out[0] + RS_PREFETCH_ROWS * (size_t)n * 3, NULL, NULL };

            k->vrow_rgb(rows, wt, T, n, layout, out, y + RS_PREFETCH_ROWS < ay->n ? ahead : NULL);
        }
    }
    if (k->finish)
        k->finish();
}

/* The planar sets' row loop. */
static void resize_planar(const struct rs_kern *k, const uint8_t *src, size_t stride,
                          const struct rs_axis *ax, const struct rs_axis *ay,
                          enum rs_layout layout, void *scratch, uint8_t *dst)
{
    struct layout l = layout_of(ax, ay);
    uint8_t *planes = scratch, *line = planes + l.planes + l.ring;
    int16_t *ring = (int16_t *)(planes + l.planes);
    const int16_t **rows = (const int16_t **)(line + l.line);
    int16_t *wt = (int16_t *)((char *)rows + l.rows);
    uint32_t mask = ring_rows(ax, ay) - 1, next = 0, n = ax->n;
    size_t rowlen = 3 * l.ns, plane_size = (size_t)n * ay->n;

    for (int c = 0; c < 3; c++) { /* the padding, read by the kernels' last steps */
        size_t used = (size_t)(ax->hi - ax->lo);

        memset(planes + c * l.pstride + used, 0, l.pstride - used);
        memset(line + c * l.ns + n, 0, l.ns - n);
        for (uint32_t r = 0; r <= mask; r++)
            memset(ring + r * rowlen + c * l.ns + n, 0, (l.ns - n) * sizeof(int16_t));
    }
    for (uint32_t y = 0; y < ay->n; y++) {
        uint32_t last = (uint32_t)(ay->start[y] - ay->lo) + ay->count[y], T;

        for (; next < last; next++)
            k->hrow(src + (size_t)next * stride, ax, planes, l.pstride,
                    ring + (size_t)(next & mask) * rowlen, l.ns);
        T = vtaps(ay, y, ring, rowlen, mask, rows, wt);
        if (layout == RS_CHW) {
            uint8_t *out[3] = { dst + (size_t)y * n, dst + plane_size + (size_t)y * n,
                                dst + 2 * plane_size + (size_t)y * n };

            k->vrow(rows, l.ns, wt, T, n, out, true);
        } else {
            uint8_t *out[3] = { line, line + l.ns, line + 2 * l.ns };

            k->vrow(rows, l.ns, wt, T, n, out, false);
            k->interleave(line, l.ns, n, dst + (size_t)y * n * 3);
        }
    }
    if (k->finish)
        k->finish();
}

void rs_resize(const uint8_t *src, size_t stride, const struct rs_axis *ax,
               const struct rs_axis *ay, enum rs_layout layout, void *scratch, uint8_t *dst)
{
    const struct rs_kern *k = rs_kern_of(ax->kset);

    if (k->rgb)
        resize_rgb(k, src, stride, ax, ay, layout, scratch, dst);
    else
        resize_planar(k, src, stride, ax, ay, layout, scratch, dst);
}

/* The baseline kernels: the formulas of resize.h as loops. */

static void base_hrow(const uint8_t *row, const struct rs_axis *ax, uint8_t *planes,
                      size_t pstride, int16_t *out, size_t ns)
{
    uint32_t shift = ax->prec - RS_FRAC;

    (void)planes;
    (void)pstride;
    for (uint32_t x = 0; x < ax->n; x++) {
        const uint8_t *p = row + (size_t)(ax->start[x] - ax->lo) * 3;
        int32_t r = 0, g = 0, b = 0;

        for (uint32_t k = 0; k < ax->count[x]; k++, p += 3) {
            int32_t w = RS_W(ax, x, k);

            r += w * p[0];
            g += w * p[1];
            b += w * p[2];
        }
        out[x] = (int16_t)((r >> shift) - (128 << RS_FRAC));
        out[ns + x] = (int16_t)((g >> shift) - (128 << RS_FRAC));
        out[2 * ns + x] = (int16_t)((b >> shift) - (128 << RS_FRAC));
    }
}

static inline uint8_t clamp_u8(int32_t v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static void base_vrow(const int16_t *const *rows, size_t ns, const int16_t *wt, uint32_t T,
                      uint32_t n, uint8_t *const out[3], bool stream)
{
    (void)stream;
    for (int c = 0; c < 3; c++)
        for (uint32_t e = 0; e < n; e++) {
            size_t at = c * ns + e;
            int32_t a = 0;

            if (T <= RS_V16_TAPS) {
                for (uint32_t k = 0; k < T; k++)
                    a += (rows[k][at] * wt[k] + (1 << 14)) >> 15;
                out[c][e] = clamp_u8((a + (128 << RS_FRAC) + (1 << (RS_FRAC - 1))) >> RS_FRAC);
            } else {
                for (uint32_t k = 0; k < T; k++)
                    a += rows[k][at] * wt[k];
                out[c][e] = clamp_u8((a + (128 << (RS_FRAC + 15)) + (1 << (RS_FRAC + 14))) >>
                                     (RS_FRAC + 15));
            }
        }
}

static void base_interleave(const uint8_t *p, size_t pstride, uint32_t n, uint8_t *rgb)
{
    for (uint32_t i = 0; i < n; i++) {
        rgb[3 * i] = p[i];
        rgb[3 * i + 1] = p[pstride + i];
        rgb[3 * i + 2] = p[2 * pstride + i];
    }
}

const struct rs_kern rs_kern_baseline = {
    .name = "baseline",
    .hrow = base_hrow,
    .vrow = base_vrow,
    .interleave = base_interleave,
};
