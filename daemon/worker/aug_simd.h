/*
 * aug_simd.h - the augmentation ops' vector kernels and which set runs.
 *
 * The ops (aug_color.c, aug_geom.c) are written once in portable C, the
 * baseline; where a 256-entry table lookup per byte or a byte gather is
 * the work, GCC's vectorizer cannot help, so those steps also come as
 * AVX-512 kernels (aug_avx512.c: AVX512F, BW, VL, DQ and VBMI, whose
 * two-table byte permute is a whole 256-entry lookup of 64 bytes in three
 * instructions).  A kernel computes exactly the bytes of the baseline step
 * it replaces: the same table, the same float32 operations in the same
 * order (no fused multiply-add: the library is built with
 * -ffp-contract=off), so the ops' torchvision bounds hold for either set;
 * tests/test_aug_simd.c compares the two sets byte for byte.
 *
 * The set is chosen once per process by the CPU (aug_use_isa(AUTO), on
 * first use), or forced by a test or a benchmark.  Builds without GCC's
 * target attributes (clang, the fuzzing build) define AUG_NO_AVX512 and
 * run the baseline.
 */
#ifndef RINGFEED_DAEMON_WORKER_AUG_SIMD_H
#define RINGFEED_DAEMON_WORKER_AUG_SIMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* torchvision's rgb_to_grayscale weights (float32, as torch casts the
 * Python scalars): the baseline's and the kernels' one copy. */
#define AUG_GRAY_R 0.2989f
#define AUG_GRAY_G 0.587f
#define AUG_GRAY_B 0.114f

enum aug_isa {
    AUG_ISA_AUTO = 0,     /* the best this CPU and build run */
    AUG_ISA_BASELINE = 1, /* portable C (GCC's vectorizer where it applies) */
    AUG_ISA_AVX512 = 2,   /* aug_avx512.c */
};

/* Chooses the set: 0, -EINVAL for an unknown one, -ENOTSUP when this CPU
 * or build cannot run it (the current set is left as it was). */
int aug_use_isa(enum aug_isa isa);

/* The set in use (AUTO resolved on first call). */
enum aug_isa aug_isa_current(void);

/* "avx512" or "baseline". */
const char *aug_isa_name(void);

/* True when the AVX-512 kernels run.  A build without them (AUG_NO_AVX512)
 * has a constant false, a macro so that even an unoptimized build drops
 * the ops' calls to kernels it lacks (they would not link). */
#ifdef AUG_NO_AVX512
#define aug_avx512() false
#else
static inline bool aug_avx512(void)
{
    return aug_isa_current() == AUG_ISA_AVX512;
}
#endif

/* ---- the AVX-512 kernels (aug_avx512.c); call only when aug_avx512() ---- */

/* p[i] = lut[p[i]] for n bytes. */
void aug512_lut(uint8_t *p, size_t n, const uint8_t lut[256]);

/* An HWC 3-channel image's npix pixels: byte of channel ch through lut[ch]. */
void aug512_lut3(uint8_t *p, size_t npix, const uint8_t lut[3][256]);

/* Planes r, g, b of n pixels: each byte v becomes
 * clamp_trunc(a * v + q * gray), gray = torchvision's grayscale byte of
 * the pixel (aug_color.c saturation_run). */
void aug512_saturation(uint8_t *r, uint8_t *g, uint8_t *b, size_t n, float a, float q);

/* The sum over n pixels of planes r, g, b of their grayscale bytes. */
uint64_t aug512_gray_sum(const uint8_t *r, const uint8_t *g, const uint8_t *b, size_t n);

/* ---- sharpness (aug_avx512_sharp.c); call only when aug_avx512() -------- */

/* (2s + 13) / 26 for every 3x3 sum s of sharpness (0..3315) is
 * (x * AUG512_DIV26_MUL) >> AUG512_DIV26_SHIFT with x = 2s + 13: a 16-bit
 * multiply-high and a shift of 4 (test_aug_simd_sharp checks every x). */
#define AUG512_DIV26_MUL 40330u
#define AUG512_DIV26_SHIFT 20

/* aug_color.c's sharp_row: out[j] = clamp_trunc(a * cur[j] + q * sm[j])
 * for the n bytes of a row whose horizontal neighbours are step bytes
 * apart, sm the smoothed byte of the 3x3 sum over up, cur and dn; cur
 * itself where up or dn is NULL, n <= 2 * step, or j is within step of
 * either end.  out must not overlap up, cur or dn. */
void aug512_sharp_row(uint8_t *out, const uint8_t *up, const uint8_t *cur, const uint8_t *dn,
                      size_t n, size_t step, float a, float q);

/* ---- the affine (aug_avx512_affine.c); call only when aug_avx512() ----- */

/* The affine's float32 sampling grid for one image (aug_geom.c grid_of):
 * output pixel (x, y) samples source (fma(gx + 1, sfx, -0.5),
 * fma(gy + 1, sfy, -0.5)), gx = fma(by, r[1], bx * r[0]) + r[2],
 * gy = fma(by, r[4], bx * r[3]) + r[5], bx = x - w/2 + 0.5, by likewise. */
struct aug_grid {
    float r[6];     /* theta / (w/2, h/2) */
    float sfx, sfy; /* grid_sample's w/2, h/2 */
    float w, h;
};

/* Whether aug512_affine takes an image of w x h: each side exact as a
 * float32 (the baseline's bounds tests are on floats, the kernel's on
 * integers) and w * h an int32 (the gathers' indices). */
static inline bool aug512_affine_fits(uint32_t w, uint32_t h)
{
    return w <= (1u << 24) && h <= (1u << 24) && (uint64_t)w * h <= INT32_MAX;
}

/* The scratch bytes aug512_affine needs for an image of w x h x c. */
size_t aug512_affine_scratch(uint32_t w, uint32_t h, uint32_t c);

/* aug_geom.c's affine of the image px (w x h x c, CHW when chw, else HWC;
 * c 1..4; aug512_affine_fits) in place, every row: nearest_row's bytes, or
 * bilinear_row's when bilinear; the pixels outside get fill[ch].  scratch:
 * aug512_affine_scratch bytes, its contents the kernel's (the copy it
 * reads).  test_aug_simd_affine compares it with the baseline. */
void aug512_affine(const struct aug_grid *g, bool bilinear, uint8_t *px, uint32_t w, uint32_t h,
                   uint32_t c, bool chw, const uint8_t *fill, uint8_t *scratch);

#endif
