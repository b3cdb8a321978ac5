/*
 * resize.h - separable resampling of RGB images with Pillow's antialiased
 * bilinear filter: what torchvision's Resize and RandomResizedCrop do to a
 * PIL image (Image.resize with BILINEAR, no reducing_gap).
 *
 * One axis at a time (Pillow's Resample.c, precompute_coeffs): output
 * sample i of n, taken from the input span [box0, box1), has its center at
 * c = box0 + (i + 0.5) * scale with scale = (box1 - box0) / n, in input
 * coordinates where input sample k covers [k, k + 1).  The triangle filter
 * is widened by f = max(scale, 1), so a reduction averages every input
 * sample under the output sample and an enlargement interpolates:
 *     weight of input k = max(0, 1 - |k + 0.5 - c| / f),
 * over k in [floor(c - f + 0.5), floor(c + f + 0.5)) cut to the allowed
 * input [lim0, lim1), then normalized to sum 1.  The allowed input is the
 * whole image for a resize of the whole image (its edge samples' neighbours
 * count) and the crop for a crop-then-resize.
 *
 * Coefficient tables (struct rs_axis), one per axis: each output's first
 * input and count, and its weights in fixed point, 2^prec for 1, rounded
 * cumulatively so an output's weights sum to exactly 2^prec (a constant
 * image stays constant).  A worker keeps its recent tables in a small LRU
 * cache (struct rs_cache) keyed by the plan's arguments taken relative to
 * lim0, so a table is a pure function of its key: the same crop gives the
 * same bytes whether its table was cached or not, in any worker.
 *
 * rs_resize, per output row, in integer arithmetic only (p a byte, h the
 * int16 between the passes, >> an arithmetic shift):
 *   1. horizontal, each input row the output needs, once (a ring of the
 *      last rows: a vertical table's spans only move forward), one int16
 *      plane per channel, with RS_FRAC (7) fraction bits:
 *          h = (sum of w * p >> (prec - 7)) - 128 * 2^7
 *      a floor, and biased so h is signed: the AVX2 gather kernel
 *      multiplies (p - 128) * 256 (the byte xor 0x80 in the high half of an
 *      int16) by weights of prec 15 and keeps the high 16 bits of the int32
 *      sums, no shift or saturating pack.  Tables of few taps per output
 *      (the gather layout, below) have prec 15 (a weight of 2^15, too big
 *      for int16, is 2^15 - 1 and 1 on the same sample in that layout);
 *      others as many bits as int16 allows for their largest weight, 14 to
 *      22;
 *   2. vertical, weights q of prec 15 (a weight of 2^15 is taken as
 *      2^15 - 1 and 1 on the same row), over the rows' h:
 *        up to RS_V16_TAPS taps, in 16 bits (vpmulhrsw):
 *          a = sum of (h * q + 2^14) >> 15,  byte = (a + 2^14 + 2^6) >> 7
 *        more taps, in 32 bits (vpmaddwd):
 *          byte = (sum of h * q + 2^29 + 2^21) >> 22
 *      clamped to 0..255, written straight in the output's layout (CHW:
 *      each plane's row in place; HWC: the three planes' row interleaved
 *      into the pixel row).  A flip is the horizontal table's mirror, free.
 * The kernels come in three sets that compute these same integers, so every
 * machine writes the same bytes: AVX-512 (resize_avx512.c: the horizontal
 * pass straight from the RGB row, h in RGB order, the write into the
 * output's layout fused with the vertical pass), AVX2 (resize_avx2.c) and
 * a baseline in plain C (resize.c, what GCC vectorizes for SSE2), chosen
 * at run time by __builtin_cpu_supports.  A table is laid out for the set
 * in effect when it is planned, and rs_resize runs the set its horizontal
 * table was laid out for.  Precision: within a level of an exact
 * double-precision evaluation (tests/test_resize.c): the weights are
 * within 2^-15 of exact, h within 2^-7 levels below exact, each 16-bit
 * vertical tap within half a unit of h.
 */
#ifndef RINGFEED_DAEMON_RESIZE_H
#define RINGFEED_DAEMON_RESIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fraction bits of h, the int16 values between the two passes. */
#define RS_FRAC 7

/* Vertical outputs of up to this many taps (after a weight of 2^15 is
 * split in two) are summed in 16 bits: half a unit of h lost a tap, at
 * most 16 / 256 of a level. */
#define RS_V16_TAPS 16

/* Which pass a table is for: a horizontal one carries the SIMD kernels'
 * layouts and may be mirrored; a vertical one may not be mirrored. */
enum rs_dir { RS_HORIZONTAL, RS_VERTICAL };

/* Output layouts of rs_resize. */
enum rs_layout { RS_CHW, RS_HWC };

/* The kernel sets (AUTO: the best the CPU has, for rs_use_isa). */
enum rs_isa { RS_ISA_AUTO, RS_ISA_BASELINE, RS_ISA_AVX2, RS_ISA_AVX512 };

/* Outputs a block of the weight array w (the AVX-512 layout reads a tap
 * of 16 outputs as one vector). */
#define RS_WB 16

/* How one output axis reads its input axis.  Arrays grow as needed and are
 * reused across plans; zero-initialize, free with rs_axis_free. */
struct rs_axis {
    enum rs_dir dir;
    uint32_t n;          /* output samples */
    uint32_t taps;       /* the most input samples an output uses: the
                            stride of w */
    uint32_t prec;       /* weights are w / 2^prec */
    int32_t lo, hi;      /* input samples used: [lo, hi) */
    bool monotone;       /* starts and ends never decrease with the output */
    uint8_t kset;        /* enum rs_isa, never AUTO: the kernels the table
                            is laid out for (horizontal: baseline none,
                            AVX2 and AVX-512 their own below; vertical:
                            none, the set in effect when planned) */
    int32_t *start;      /* n: first input sample of output i */
    uint32_t *count;     /* n: input samples it uses, 1..taps */
    int32_t *w;          /* n (rounded up to RS_WB) * taps, RS_WB
                            outputs a block, tap-major: output i's
                            weight k at RS_W(a, i, k), zeros past
                            count[i] (the padding past n undefined);
                            they sum to 2^prec */

    /* Horizontal tables of the AVX-512 kernels (kset RS_ISA_AVX512,
     * resize_avx512.c).  The output row is taken in RGB order, 3n values
     * (value v: channel v % 3 of output v / 3), 16 values a group, the
     * groups padded to a multiple of 4 (64 values) with values of weight
     * 0.  A group reads its input row's RGB bytes through 64-byte windows
     * at vbase, one for all its taps or, vwide, one per pair: */
    bool vwide;          /* a window per pair */
    uint32_t vgroups;
    int32_t *vbase;      /* vgroups (vwide: vgroups * pairs): each window's
                            byte offset in the row from input sample lo,
                            the window inside the row's 3 (hi - lo) bytes */
    uint32_t *vidx;      /* vgroups * pairs * 16: per group and pair, one
                            dword a value: its samples 2t and 2t + 1 as
                            byte offsets in the window, in bytes 0 and 2 */
    uint32_t *vw;        /* vgroups * pairs * 16: their weights, int16
                            pairs (a weight of 2^15 as 2^15 - 1 and 1 on
                            its sample) */
    uint32_t *vpw;       /* pairs * (n rounded up to 16, and 16): each
                            output's weight pairs, the layout's scratch */

    /* Horizontal tables of the AVX2 kernels (kset RS_ISA_AVX2,
     * resize_avx2.c), whose geometry also picks prec for every kset.
     * Outputs go 16 at a time (groups, the last padded with outputs of
     * weight 0) as two blocks of 8, one int32 lane an output: block 0 the
     * even outputs, block 1 the odd ones, so the high halves of the two
     * blocks' sums interleave into the 16 outputs in order.  Each half of
     * a block (4 outputs, lane j of half k output 16g + 8k + 2j + block)
     * reads one channel plane through 16-byte windows at base, one for all
     * its taps or, wide, one per pair (pair t's at base + 2t); shared, the
     * two blocks' halves read the same windows: */
    bool gather;         /* every half's outputs fit a window (and prec is
                            15): the gather kernel applies, else the dot
                            kernel; set for every kset (prec follows it) */
    bool wide;           /* a window per pair */
    bool shared;         /* a group's half's windows serve both blocks */
    uint32_t pairs;      /* ceil(taps / 2): weight pairs per output */
    uint32_t groups;
    int32_t *base;       /* groups * 4 (block, half): each window, a plane
                            offset (input sample - lo) */
    uint8_t *idx;        /* groups * 2 * pairs * 32: per block and pair, the
                            byte shuffle putting each output's two samples
                            in the high bytes of its lane's int16s */
    int16_t *bw;         /* groups * 2 * pairs * 16: the weight pairs */
    uint32_t taps16;     /* dot kernel: taps rounded up to 16 */
    int32_t *off;        /* groups * 16: dot kernel, each output's plane
                            offset (0 for the padding) */
    int16_t *w16;        /* groups * 16 * taps16: dot kernel's weights */

    void *mem;           /* everything but start and count, carved in
                            32-byte aligned pieces */
    size_t cap_n, cap_mem;
};

/* Output i's weight k of table a (struct rs_axis). */
#define RS_W(a, i, k)                                                                          \
    ((a)->w[((size_t)(i) / RS_WB * (a)->taps + (k)) * RS_WB + (i) % RS_WB])

/*
 * Builds the table of n outputs (n >= 1) from the input span [box0, box1)
 * (box0 < box1, fractional allowed, |box| < 1e12), reading only input
 * samples in [lim0, lim1) (lim0 < lim1, and the span must overlap it).
 * mirror (horizontal only): output i is computed as output n - 1 - i would
 * be (a horizontal flip for free).  A horizontal table is laid out for the
 * kernels in effect (rs_use_isa), or for AVX2 where the AVX-512 windows do
 * not fit it (reductions past about 3.5x); start, count, w and prec do not
 * depend on the kernels.  Returns 0, -EINVAL for arguments out of range or
 * a mirrored vertical table, -ENOMEM.
 */
int rs_axis_plan(struct rs_axis *a, enum rs_dir dir, uint32_t n, double box0, double box1,
                 int32_t lim0, int32_t lim1, bool mirror);

void rs_axis_free(struct rs_axis *a);

/*
 * The worker's recent tables, least recently used evicted first.
 * Zero-initialize; free with rs_cache_free.  hits and misses count the
 * lookups that found a table and those that built one.
 */
#define RS_CACHE_WAYS 8

struct rs_cache {
    struct rs_cache_way {
        bool valid;
        uint8_t dir, mirror, isa; /* isa: the kernels in effect at the lookup */
        uint32_t n;
        int32_t len;             /* lim1 - lim0 */
        double box0, box1;       /* relative to lim0 */
        uint64_t used;           /* the lookup that last returned it */
        struct rs_axis axis;
    } way[RS_CACHE_WAYS];
    uint64_t clock, hits, misses;
};

/*
 * The table rs_axis_plan(dir, n, box0 - lim0, box1 - lim0, 0, lim1 - lim0,
 * mirror) would build: coordinates relative to lim0 (input sample lim0 is
 * the table's 0), for the kernels in effect.  Sets *out to a table the
 * cache owns, valid until the cache evicts it, never within the next
 * RS_CACHE_WAYS - 1 lookups (so the two tables of one image stay valid
 * together).  Returns 0, or rs_axis_plan's error (*out untouched).
 */
int rs_cache_plan(struct rs_cache *c, enum rs_dir dir, uint32_t n, double box0, double box1,
                  int32_t lim0, int32_t lim1, bool mirror, const struct rs_axis **out);

void rs_cache_free(struct rs_cache *c);

/* Bytes of scratch rs_resize needs for these tables (32-byte aligned). */
size_t rs_scratch_bytes(const struct rs_axis *ax, const struct rs_axis *ay);

/*
 * Resamples an RGB image (3 bytes a pixel) to ay->n rows of ax->n pixels
 * at dst, in `layout`: CHW, three planes (R, G, B) of ay->n rows of ax->n
 * bytes, or HWC, ay->n rows of ax->n RGB pixels.  ax is a horizontal
 * table, ay a vertical one; the kernels are those ax was laid out for
 * (ax->kset).  src is input pixel (ax->lo, ay->lo); rows are stride bytes
 * apart, and only pixels in [lo, hi) of both tables are read.  scratch is
 * rs_scratch_bytes() bytes, aligned to 32.  Writes exactly the
 * 3 * ax->n * ay->n bytes of dst.
 */
void rs_resize(const uint8_t *src, size_t stride, const struct rs_axis *ax,
               const struct rs_axis *ay, enum rs_layout layout, void *scratch, uint8_t *dst);

/*
 * Chooses the kernels the tables planned from now on are laid out for:
 * AUTO (the default) takes AVX-512 where the CPU has AVX512F, BW, VL, DQ,
 * VBMI, VNNI and PREFETCHW (Ice Lake and later, Zen 4), else AVX2 where it
 * has it, else the baseline; the tests and bench/resize force each.  Returns 0, or
 * -ENOTSUP for a set the CPU or the build (RS_NO_AVX2, RS_NO_AVX512)
 * lacks, the choice unchanged.  Per process, not thread safe (a worker is
 * one thread).
 */
int rs_use_isa(enum rs_isa isa);

/* The kernels in effect: "avx512", "avx2" or "baseline". */
const char *rs_isa_name(void);

/* The kernel set of a table (ax->kset), by the same names. */
const char *rs_kset_name(const struct rs_axis *a);

#endif
