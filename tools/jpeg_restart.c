/*
 * jpeg_restart.c - the lossless re-encoding with restart markers (see
 * jpeg_restart.h for why and what is kept), and the restart interval rule
 * that every JPEG ringfeed-pack writes follows.
 *
 * restart_run reads the source's DCT coefficients into libjpeg's
 * whole-image arrays (jpeg_read_coefficients reads every scan, to EOI),
 * then writes them with the compressor of the same pair: critical
 * parameters copied, one interleaved scan, Huffman tables optimized (a
 * second pass over the coefficients in memory), a DRI marker and restart
 * markers every jpeg_restart_interval() MCUs.  Errors are jpeg_pair.h's:
 * a warning or error longjmps back to restart_run, which aborts both
 * objects and turns the failure into an outcome (the file is stored as it
 * is) or -ENOMEM.  Everything that lives across the setjmp is in the struct
 * restarter, so no local needs to be volatile.
 */
#include "jpeg_restart.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct restarter {
    struct jpair p;               /* libjpeg's objects, errors, output */
};

/* ---- the rule ------------------------------------------------------- */

unsigned jpeg_restart_interval(unsigned mcus_per_row)
{
    unsigned r = RESTART_SEGMENT_MAX;

    if (mcus_per_row == 0)
        return 0;
    while (mcus_per_row % r != 0)
        r--;
    return r;
}

unsigned jpeg_mcus_per_row(uint32_t width, unsigned components,
                           unsigned max_h_samp)
{
    uint64_t mcu_w = components == 1 ? 8 : 8 * (uint64_t)max_h_samp;

    return mcu_w ? (unsigned)(((uint64_t)width + mcu_w - 1) / mcu_w) : 0;
}

/* ---- outcomes ------------------------------------------------------- */

static const char *const outcome_names[RESTART_OUTCOME_COUNT] = {
    [RESTART_REENCODED] = "re-encoded",
    [RESTART_CMYK] = "CMYK",
    [RESTART_YCCK] = "YCCK",
    [RESTART_RGB] = "RGB",
    [RESTART_OTHER_SPACE] = "other colour spaces",
    [RESTART_UNDECODABLE] = "do not decode",
    [RESTART_PARTIAL] = "progressive with bits unsent",
    [RESTART_TOO_BIG] = "too large",
    [RESTART_UNENCODABLE] = "not writable as one scan",
};

const char *restart_outcome_name(int o)
{
    return o >= 0 && o < RESTART_OUTCOME_COUNT ? outcome_names[o] : NULL;
}

/*
 * The colour spaces stored as they are.  Their pixels depend on what says
 * the colour space (an Adobe marker's transform, or the component ids),
 * which is what this re-encoding rewrites; they are rare among
 * photographs, so nothing is risked for them.
 */
static const struct {
    J_COLOR_SPACE space;
    int outcome;
    const char *what;
} kept_spaces[] = {
    {JCS_CMYK, RESTART_CMYK, "CMYK"},
    {JCS_YCCK, RESTART_YCCK, "YCCK (Adobe transform 2)"},
    {JCS_RGB, RESTART_RGB, "RGB components (no YCbCr transform)"},
};

/* ---- the restarter -------------------------------------------------- */

struct restarter *restarter_new(void)
{
    struct restarter *r = calloc(1, sizeof(*r));

    if (!r)
        return NULL;
    if (jpair_init(&r->p) < 0) {
        jpair_fini(&r->p);
        free(r);
        return NULL;
    }
    return r;
}

void restarter_free(struct restarter *r)
{
    if (!r)
        return;
    jpair_fini(&r->p);
    free(r);
}

/* Why a file of colour space d is stored as it is, in r's message. */
static int kept_space(struct restarter *r, j_decompress_ptr d)
{
    for (size_t i = 0; i < sizeof(kept_spaces) / sizeof(kept_spaces[0]); i++)
        if (kept_spaces[i].space == d->jpeg_color_space) {
            snprintf(r->p.msg, sizeof(r->p.msg), "%s, %d components (only "
                     "YCbCr and grayscale are re-encoded)",
                     kept_spaces[i].what, d->num_components);
            return kept_spaces[i].outcome;
        }
    snprintf(r->p.msg, sizeof(r->p.msg), "colour space %d with %d components "
             "(only YCbCr and grayscale are re-encoded)",
             (int)d->jpeg_color_space, d->num_components);
    return RESTART_OTHER_SPACE;
}

/*
 * 1 when a progressive file's scans sent every bit of every coefficient.
 * libjpeg's coef_bits holds, per component and coefficient, -1 when no
 * scan sent it, else the bits still to come (the last scan's Al): all 0
 * once the file is complete.  When some are not, libjpeg's decoder smooths
 * the blocks (block smoothing, for files that end early), which it does
 * not do for a baseline file, so the baseline copy would decode to other
 * pixels.
 */
static int all_bits_sent(j_decompress_ptr d)
{
    for (int ci = 0; ci < d->num_components; ci++)
        for (int k = 0; k < DCTSIZE2; k++)
            if (d->coef_bits[ci][k] != 0)
                return 0;
    return 1;
}

/* Everything between setjmp and the end of the image: an outcome, or
 * longjmps. */
static int run(struct restarter *r, const uint8_t *buf, size_t len,
               unsigned *interval)
{
    j_decompress_ptr d = &r->p.d;
    j_compress_ptr c = &r->p.c;
    jvirt_barray_ptr *coefs;
    unsigned max_h = 1, ri;

    jpeg_mem_src(d, buf, (unsigned long)len);
    if (jpeg_read_header(d, TRUE) != JPEG_HEADER_OK) {
        snprintf(r->p.msg, sizeof(r->p.msg), "no image in it (tables only)");
        return RESTART_UNDECODABLE;
    }
    if (!(d->jpeg_color_space == JCS_YCbCr && d->num_components == 3) &&
        !(d->jpeg_color_space == JCS_GRAYSCALE && d->num_components == 1))
        return kept_space(r, d);
    d->mem->max_memory_to_use = JPAIR_MEM_MAX;
    coefs = jpeg_read_coefficients(d);
    if (!coefs) {  /* only a suspending source returns NULL; not ours */
        snprintf(r->p.msg, sizeof(r->p.msg), "no coefficients read");
        return RESTART_UNDECODABLE;
    }
    if (d->progressive_mode && !all_bits_sent(d)) {
        snprintf(r->p.msg, sizeof(r->p.msg), "progressive, and its scans "
                 "leave coefficient bits unsent (libjpeg smooths such "
                 "files: a baseline copy would decode differently)");
        return RESTART_PARTIAL;
    }

    r->p.stage = "encode";
    jpeg_copy_critical_parameters(d, c);  /* also one sequential scan */
    for (int ci = 0; ci < c->num_components; ci++)
        if ((unsigned)c->comp_info[ci].h_samp_factor > max_h)
            max_h = (unsigned)c->comp_info[ci].h_samp_factor;
    ri = jpeg_restart_interval(jpeg_mcus_per_row(c->image_width,
                                                 (unsigned)c->num_components,
                                                 max_h));
    c->arith_code = FALSE;
    c->optimize_coding = TRUE;
    c->restart_in_rows = 0;
    c->restart_interval = ri;
    jpeg_write_coefficients(c, coefs);    /* markers: SOI, JFIF, ..., no
                                             APPn or COM of the source */
    jpeg_finish_compress(c);
    r->p.stage = "decode";
    jpeg_finish_decompress(d);            /* EOI was read already */
    *interval = ri;
    return RESTART_REENCODED;
}

int restart_run(struct restarter *r, const uint8_t *buf, size_t len,
                const uint8_t **out, size_t *out_len, unsigned *interval,
                char *why, size_t why_len)
{
    int o;

    jpair_begin(&r->p);
    *interval = 0;
    if (setjmp(r->p.jb))
        o = r->p.code ? r->p.code : -EBADMSG;
    else
        o = run(r, buf, len, interval);
    if (o < 0) {
        jpair_abort(&r->p);
        if (o == -ENOMEM) {
            snprintf(why, why_len, "out of memory to %s it (%s)", r->p.stage,
                     r->p.msg);
            return -ENOMEM;
        }
        if (o == -E2BIG) {
            snprintf(why, why_len, "needs more than %ld MiB to hold its "
                     "coefficients (libjpeg: %s)", JPAIR_MEM_MAX >> 20,
                     r->p.msg);
            return RESTART_TOO_BIG;
        }
        if (strcmp(r->p.stage, "encode") == 0) {
            snprintf(why, why_len, "libjpeg cannot write it as one baseline "
                     "scan: %s", r->p.msg);
            return RESTART_UNENCODABLE;
        }
        snprintf(why, why_len, "JPEG data does not decode: %s", r->p.msg);
        return RESTART_UNDECODABLE;
    }
    if (o != RESTART_REENCODED) {
        jpair_abort(&r->p);
        snprintf(why, why_len, "%s%s", o == RESTART_UNDECODABLE ?
                 "JPEG data does not decode: " : "", r->p.msg);
        return o;
    }
    *out = r->p.out;
    *out_len = r->p.out_len;
    return RESTART_REENCODED;
}
