/*
 * jpeg_restart.h - what `ringfeed-pack imagefolder` stores by default: each
 * JPEG re-encoded losslessly, as one baseline scan with restart markers
 * every jpeg_restart_interval() MCUs, so a worker can decode a crop from
 * the restart intervals it covers instead of the whole image above it.
 *
 * Why: a worker decodes a random crop of each image, and entropy (Huffman)
 * decoding is most of its time.  A baseline JPEG without restart markers
 * has no random access: every row down to the crop's bottom must be
 * entropy-decoded, full width.  With a restart marker every R MCUs, where
 * R divides the MCUs of a row, every MCU row is a whole number of restart
 * intervals, each decodable alone (the DC predictors start again at 0), so
 * the worker decodes only the intervals that cover the crop.
 *
 * Lossless: the DCT coefficients are read (jpeg_read_coefficients) and
 * written again (jpeg_write_coefficients) with the source's quantization
 * tables and sampling (jpeg_copy_critical_parameters), as jpegtran does,
 * so the decoded pixels are bit for bit those of the source, at every DCT
 * scale.  What changes:
 *   - one interleaved baseline scan (SOF0; SOF1 only where the source's
 *     quantization tables need 16 bits), Huffman tables optimized for the
 *     image: a progressive source becomes baseline, which decodes faster
 *     and without a whole-image coefficient buffer; arithmetic coding
 *     becomes Huffman;
 *   - no APPn or COM marker is copied (jpegtran -copy none): EXIF (so its
 *     orientation tag) and ICC profiles are not kept.  The pixels do not
 *     depend on them for YCbCr and grayscale, libjpeg writes the JFIF
 *     marker that says YCbCr, and torchvision's ImageFolder loader ignores
 *     both (it neither rotates by EXIF nor converts by ICC), as ringfeedd
 *     does.
 *
 * Only 3-component YCbCr and 1-component grayscale files are re-encoded.
 * Everything else is stored as it is, byte for byte, and restart_run says
 * why (enum restart_outcome): CMYK, YCCK, RGB and other colour spaces
 * (their pixels depend on the Adobe marker, which would not be copied);
 * data that does not decode cleanly, by ringfeedd's rules (any libjpeg
 * warning or error, more than JPAIR_SCAN_CAP scans), so a file the daemon
 * finds corrupt is never turned into one it serves; a progressive file
 * whose scans leave some coefficient bits unsent (libjpeg's decoder then
 * smooths the blocks, which it would not do for the baseline copy, so the
 * pixels would differ); one too large for JPAIR_MEM_MAX; one libjpeg cannot
 * write as a single interleaved scan (more than 10 blocks in an MCU).
 *
 * One restarter is used by one thread, for one image at a time, and keeps
 * its libjpeg objects and output buffer for the next image.
 */
#ifndef RINGFEED_TOOLS_JPEG_RESTART_H
#define RINGFEED_TOOLS_JPEG_RESTART_H

#include <stddef.h>
#include <stdint.h>

#include "jpeg_pair.h"   /* JPAIR_SCAN_CAP, JPAIR_MEM_MAX */

/*
 * The restart interval rule, for every JPEG ringfeed-pack writes (this
 * file's lossless re-encoding and --max-side's, jpeg_shrink.c): the largest
 * divisor of mcus_per_row that is at most RESTART_SEGMENT_MAX, so 1..4.
 * A divisor, so that every MCU row starts an interval; at most 4 MCUs (64
 * pixels wide at 4:2:0, 32 at 4:4:4 and in grayscale), so that a crop
 * skips the columns outside it and not only the rows; the largest such,
 * because every marker costs.  Measured on 300 photographs of 7.83 MB,
 * re-encoded with optimized Huffman tables: 7.54 MB without restarts,
 * 7.57 MB with one every MCU row, 7.78 MB every 4 MCUs (as fast to
 * entropy-decode as without), 8.38 MB every MCU (about 10% slower).
 * The divisor has its price: a row of MCUs divisible by none of 2, 3 and
 * 4 (a third of images) gets a marker every MCU.  On bench/make-photos'
 * 2000 photographs (intervals of 4, 3, 2 and 1 for 26%, 23%, 18% and 33%
 * of them) the packed records were 2.7% larger than the files: 0.8%
 * smaller at interval 4, 0.3%, 2.2% and 7.3% larger at 3, 2 and 1.
 * Returns 0 for 0 MCUs (no image, no interval).
 */
#define RESTART_SEGMENT_MAX 4u
unsigned jpeg_restart_interval(unsigned mcus_per_row);

/*
 * The MCUs in a row of the single scan ringfeed-pack writes, for an image
 * width pixels wide of components components whose largest horizontal
 * sampling factor is max_h_samp (1..4): one component is a non-interleaved
 * scan, an MCU one 8x8 block, so ceil(width / 8); more are one interleaved
 * scan, an MCU 8 * max_h_samp pixels wide, so ceil(width / (8 * max_h)).
 */
unsigned jpeg_mcus_per_row(uint32_t width, unsigned components,
                           unsigned max_h_samp);

/* What restart_run did with a file: 0 re-encoded, or why it is to be
 * stored as it is.  Kept in this order: summaries list them so. */
enum restart_outcome {
    RESTART_REENCODED,
    RESTART_CMYK,         /* colour spaces not re-encoded ... */
    RESTART_YCCK,
    RESTART_RGB,
    RESTART_OTHER_SPACE,  /* ... 2 components, unknown transforms */
    RESTART_UNDECODABLE,  /* corrupt or truncated data, a libjpeg warning,
                             over JPAIR_SCAN_CAP scans */
    RESTART_PARTIAL,      /* progressive, some coefficient bits unsent */
    RESTART_TOO_BIG,      /* over JPAIR_MEM_MAX to hold its coefficients */
    RESTART_UNENCODABLE,  /* libjpeg cannot write it as one scan */
    RESTART_OUTCOME_COUNT
};

/* A few words for outcome o in a summary ("CMYK", "do not decode"), or
 * NULL for a value out of range. */
const char *restart_outcome_name(int o);

struct restarter;

/* A restarter, or NULL when out of memory.  restarter_free accepts NULL. */
struct restarter *restarter_new(void);
void restarter_free(struct restarter *r);

/*
 * Re-encodes the JPEG of len bytes at buf (see above).  Returns
 *   0 (RESTART_REENCODED) with *out (*out_len bytes, owned by r, valid
 *     until its next run) and the restart interval written, in MCUs, in
 *     *interval;
 *   another enum restart_outcome when the file is to be stored as it is,
 *     with the reason in why (why_len bytes, always terminated);
 *   -ENOMEM out of memory (why says where); the file can still be stored
 *     as it is.
 * buf is only read.
 */
int restart_run(struct restarter *r, const uint8_t *buf, size_t len,
                const uint8_t **out, size_t *out_len, unsigned *interval,
                char *why, size_t why_len);

#endif
