/*
 * jpeg_shrink.c - decode, box-downscale and re-encode one JPEG with libjpeg
 * (see jpeg_shrink.h for the filter and the choices).
 *
 * shrinker_run drives both libjpeg objects in one pass: each decoded row
 * goes through the box resampler, and each output row it completes goes
 * to the compressor at once, into the pair's buffer (so ownership never
 * passes to libjpeg).
 *
 * The libjpeg objects, their error handling (a warning is a failure, the
 * scan cap) and the output buffer are the shared ones of jpeg_pair.h: a
 * failure longjmps back to shrinker_run, which aborts both objects.
 * Everything that lives across the setjmp is in the struct shrinker, so
 * no local needs to be volatile.
 */
#include "jpeg_shrink.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmyk.h"
#include "jpeg_pair.h"
#include "jpeg_restart.h"
#include "manifest.h"

struct shrinker {
    struct jpair p;                /* libjpeg's objects, errors, output */
    struct shrink_box box;
    uint8_t *row;                  /* one decoded row, 4 bytes a pixel */
    size_t row_cap;
};

/* ---- the box resampler ---------------------------------------------- */

int shrink_box_init(struct shrink_box *b, uint32_t sw, uint32_t sh,
                    uint32_t dw, uint32_t dh, uint32_t ch)
{
    size_t n;

    memset(b, 0, sizeof(*b));
    if (dw == 0 || dh == 0 || dw > sw || dh > sh || ch == 0 || ch > 4)
        return -EINVAL;
    *b = (struct shrink_box){.sw = sw, .sh = sh, .dw = dw, .dh = dh,
                             .ch = ch};
    n = (size_t)dw * ch;
    b->taps = malloc(dw * sizeof(*b->taps));
    b->hrow = malloc(n * sizeof(*b->hrow));
    b->acc[0] = calloc(n, sizeof(uint64_t));
    b->acc[1] = calloc(n, sizeof(uint64_t));
    b->out = malloc(n);
    if (!b->taps || !b->hrow || !b->acc[0] || !b->acc[1] || !b->out)
        return -ENOMEM;
    /* output column x spans [x * sw, (x + 1) * sw), source column i spans
     * [i * dw, (i + 1) * dw): the weight of i is their overlap */
    for (uint32_t x = 0; x < dw; x++) {
        uint64_t lo = (uint64_t)x * sw, hi = lo + sw;
        uint64_t first = lo / dw, last = (hi - 1) / dw;
        uint64_t end_first = (first + 1) * dw;
        struct shrink_tap *t = &b->taps[x];

        t->first = (uint32_t)first;
        t->count = (uint32_t)(last - first + 1);
        t->wfirst = (uint32_t)((end_first < hi ? end_first : hi) - lo);
        t->wlast = t->count > 1 ? (uint32_t)(hi - last * dw) : 0;
    }
    return 0;
}

/* Row `row` across: hrow[x * ch + c] = sum of weight * pixel (the weights
 * of one output column sum to sw, so a value is at most 255 * sw). */
static void box_across(struct shrink_box *b, const uint8_t *row)
{
    uint32_t ch = b->ch, dw = b->dw;

    for (uint32_t x = 0; x < dw; x++) {
        const struct shrink_tap *t = &b->taps[x];
        const uint8_t *p = row + (size_t)t->first * ch;
        uint32_t *o = b->hrow + (size_t)x * ch;

        for (uint32_t c = 0; c < ch; c++)
            o[c] = p[c] * t->wfirst;
        if (t->count == 1)
            continue;
        for (uint32_t i = 1; i + 1 < t->count; i++) {
            p += ch;
            for (uint32_t c = 0; c < ch; c++)
                o[c] += p[c] * dw;
        }
        p += ch;
        for (uint32_t c = 0; c < ch; c++)
            o[c] += p[c] * t->wlast;
    }
}

const uint8_t *shrink_box_push(struct shrink_box *b, const uint8_t *row)
{
    /* source row y spans [y * dh, (y + 1) * dh), output row j spans
     * [j * sh, (j + 1) * sh); dh <= sh, so a source row overlaps at most
     * two output rows and completes at most the first of them */
    uint64_t lo, hi, j0, j1, total;
    size_t n = (size_t)b->dw * b->ch;
    uint64_t *acc;

    if (b->y >= b->sh)
        return NULL;
    lo = (uint64_t)b->y * b->dh;
    hi = lo + b->dh;
    j0 = lo / b->sh;
    j1 = (hi - 1) / b->sh;
    b->y++;
    box_across(b, row);
    for (uint64_t j = j0; j <= j1; j++) {
        uint64_t top = j * b->sh, bottom = top + b->sh;
        uint64_t w = (hi < bottom ? hi : bottom) - (lo > top ? lo : top);

        acc = b->acc[j & 1];
        for (size_t k = 0; k < n; k++)
            acc[k] += (uint64_t)b->hrow[k] * w;
    }
    if (hi < (j0 + 1) * b->sh)
        return NULL;
    /* output row j0 is complete: its weights sum to sw * sh */
    total = (uint64_t)b->sw * b->sh;
    acc = b->acc[j0 & 1];
    for (size_t k = 0; k < n; k++) {
        b->out[k] = (uint8_t)((acc[k] + total / 2) / total);
        acc[k] = 0;
    }
    return b->out;
}

void shrink_box_free(struct shrink_box *b)
{
    if (!b)
        return;
    free(b->taps);
    free(b->hrow);
    free(b->acc[0]);
    free(b->acc[1]);
    free(b->out);
    memset(b, 0, sizeof(*b));
}

int shrink_dims(uint32_t w, uint32_t h, uint32_t max_side, uint32_t *dw,
                uint32_t *dh)
{
    uint32_t longer = w > h ? w : h, shorter = w > h ? h : w;
    uint64_t other;

    *dw = w;
    *dh = h;
    if (longer <= max_side)
        return 0;
    other = ((uint64_t)shorter * max_side * 2 + longer) /
            (2 * (uint64_t)longer);
    if (other == 0)
        other = 1;
    if (w >= h) {
        *dw = max_side;
        *dh = (uint32_t)other;
    } else {
        *dw = (uint32_t)other;
        *dh = max_side;
    }
    return 1;
}

/* ---- the shrinker -------------------------------------------------- */

struct shrinker *shrinker_new(void)
{
    struct shrinker *s = calloc(1, sizeof(*s));

    if (!s)
        return NULL;
    if (jpair_init(&s->p) < 0) {
        jpair_fini(&s->p);
        free(s);
        return NULL;
    }
    return s;
}

void shrinker_free(struct shrinker *s)
{
    if (!s)
        return;
    jpair_fini(&s->p);
    shrink_box_free(&s->box);
    free(s->row);
    free(s);
}

/* What the decoder is asked for: out space, decoded bytes a pixel, and
 * the channels that go to the encoder. */
static const struct {
    J_COLOR_SPACE in, out;
    unsigned bpp, ch;
} spaces[] = {
    {JCS_GRAYSCALE, JCS_GRAYSCALE, 1, 1},
    {JCS_YCbCr, JCS_RGB, 3, 3},
    {JCS_RGB, JCS_RGB, 3, 3},
    {JCS_CMYK, JCS_CMYK, 4, 3},
    {JCS_YCCK, JCS_CMYK, 4, 3},
};

/* Everything between setjmp and the end of the image; 0 or longjmps. */
static int run(struct shrinker *s, const uint8_t *buf, size_t len,
               uint32_t max_side, int quality, uint32_t *w, uint32_t *h)
{
    struct jpeg_decompress_struct *d = &s->p.d;
    struct jpeg_compress_struct *c = &s->p.c;
    uint32_t dw, dh;
    unsigned i, mcus;
    int r;

    s->p.stage = "decode";
    jpeg_mem_src(d, buf, (unsigned long)len);
    if (jpeg_read_header(d, TRUE) != JPEG_HEADER_OK) {
        snprintf(s->p.msg, sizeof(s->p.msg), "no image in it (tables only)");
        return -EBADMSG;
    }
    for (i = 0; i < sizeof(spaces) / sizeof(spaces[0]); i++)
        if (spaces[i].in == d->jpeg_color_space)
            break;
    if (i == sizeof(spaces) / sizeof(spaces[0])) {
        snprintf(s->p.msg, sizeof(s->p.msg), "colour space %d with %d "
                 "components (ringfeedd decodes gray, YCbCr, RGB, CMYK and "
                 "YCCK)",
                 (int)d->jpeg_color_space, d->num_components);
        return -EBADMSG;
    }
    d->mem->max_memory_to_use = JPAIR_MEM_MAX;
    d->out_color_space = spaces[i].out;
    d->dct_method = JDCT_ISLOW;
    d->do_fancy_upsampling = TRUE;
    jpeg_start_decompress(d);
    shrink_dims(d->output_width, d->output_height, max_side, &dw, &dh);
    shrink_box_free(&s->box);
    r = shrink_box_init(&s->box, d->output_width, d->output_height, dw, dh,
                        spaces[i].ch);
    if (r < 0) {
        snprintf(s->p.msg, sizeof(s->p.msg), "no memory for a %u-column row",
                 d->output_width);
        return -ENOMEM;
    }
    if ((size_t)d->output_width * spaces[i].bpp > s->row_cap) {
        size_t cap = (size_t)d->output_width * spaces[i].bpp;
        uint8_t *p = realloc(s->row, cap);

        if (!p) {
            snprintf(s->p.msg, sizeof(s->p.msg), "out of memory for a row");
            return -ENOMEM;
        }
        s->row = p;
        s->row_cap = cap;
    }

    s->p.stage = "encode";
    c->image_width = dw;
    c->image_height = dh;
    c->input_components = (int)spaces[i].ch;
    c->in_color_space = spaces[i].ch == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(c);
    jpeg_set_quality(c, quality, TRUE);
    if (spaces[i].ch == 3) {          /* 4:2:0, said rather than assumed */
        c->comp_info[0].h_samp_factor = 2;
        c->comp_info[0].v_samp_factor = 2;
        for (int k = 1; k < 3; k++)
            c->comp_info[k].h_samp_factor = c->comp_info[k].v_samp_factor = 1;
    }
    /* restart markers as the lossless re-encoding writes them (the rule
     * and why: jpeg_restart.h); a new encode, so they cost no accuracy */
    mcus = jpeg_mcus_per_row(dw, spaces[i].ch, spaces[i].ch == 3 ? 2 : 1);
    c->restart_in_rows = 0;
    c->restart_interval = jpeg_restart_interval(mcus);
    c->optimize_coding = TRUE;
    c->dct_method = JDCT_ISLOW;
    jpeg_start_compress(c, TRUE);

    while (d->output_scanline < d->output_height) {
        JSAMPROW rows[1] = {s->row};
        const uint8_t *o;

        s->p.stage = "decode";
        if (jpeg_read_scanlines(d, rows, 1) != 1) {
            snprintf(s->p.msg, sizeof(s->p.msg), "no data at row %u",
                     d->output_scanline);
            return -EBADMSG;
        }
        if (spaces[i].bpp == 4)
            cmyk_to_rgb(s->row, d->output_width, d->saw_Adobe_marker);
        o = shrink_box_push(&s->box, s->row);
        if (o) {
            JSAMPROW out[1] = {(JSAMPROW)o};

            s->p.stage = "encode";
            jpeg_write_scanlines(c, out, 1);
        }
    }
    s->p.stage = "encode";
    jpeg_finish_compress(c);
    jpeg_abort_decompress(d);  /* nothing after the last row is read */
    *w = dw;
    *h = dh;
    return 0;
}

/* The compress half of run(), for pixels already in memory; 0 or
 * longjmps. */
static int encode_rgb(struct shrinker *s, const uint8_t *rgb, uint32_t w,
                      uint32_t h, int quality)
{
    struct jpeg_compress_struct *c = &s->p.c;

    s->p.stage = "encode";
    c->image_width = w;
    c->image_height = h;
    c->input_components = 3;
    c->in_color_space = JCS_RGB;
    jpeg_set_defaults(c);
    jpeg_set_quality(c, quality, TRUE);
    c->comp_info[0].h_samp_factor = 2;
    c->comp_info[0].v_samp_factor = 2;
    for (int k = 1; k < 3; k++)
        c->comp_info[k].h_samp_factor = c->comp_info[k].v_samp_factor = 1;
    c->restart_in_rows = 0;
    c->restart_interval = jpeg_restart_interval(jpeg_mcus_per_row(w, 3, 2));
    c->optimize_coding = TRUE;
    c->dct_method = JDCT_ISLOW;
    jpeg_start_compress(c, TRUE);
    while (c->next_scanline < c->image_height) {
        JSAMPROW row[1] = {(JSAMPROW)(rgb + (size_t)c->next_scanline * w * 3)};

        jpeg_write_scanlines(c, row, 1);
    }
    jpeg_finish_compress(c);
    return 0;
}

int shrinker_encode_rgb(struct shrinker *s, const uint8_t *rgb, uint32_t w,
                        uint32_t h, int quality, const uint8_t **out,
                        size_t *out_len, char *why, size_t why_cap)
{
    int r;

    if (quality < (int)MANIFEST_QUALITY_MIN || quality > (int)MANIFEST_QUALITY_MAX ||
        w < 1 || h < 1 || w > JPEG_MAX_DIMENSION || h > JPEG_MAX_DIMENSION) {
        snprintf(why, why_cap, "quality %d or size %ux%u out of range for a JPEG",
                 quality, w, h);
        return -EINVAL;
    }
    jpair_begin(&s->p);
    if (setjmp(s->p.jb))
        r = s->p.code ? s->p.code : -EPROTO;
    else
        r = encode_rgb(s, rgb, w, h, quality);
    if (r < 0) {
        jpair_abort(&s->p);
        if (r == -EBADMSG)
            r = -EPROTO;  /* never the pixels' fault */
        snprintf(why, why_cap, "%s to encode it as JPEG (libjpeg: %s)",
                 r == -ENOMEM ? "out of memory" : "libjpeg failed", s->p.msg);
        return r;
    }
    *out = s->p.out;
    *out_len = s->p.out_len;
    return 0;
}

int shrinker_run(struct shrinker *s, const uint8_t *buf, size_t len,
                 uint32_t max_side, int quality, const uint8_t **out,
                 size_t *out_len, uint32_t *w, uint32_t *h, char *why,
                 size_t why_cap)
{
    int r;

    if (max_side < MANIFEST_MAX_SIDE_MIN || max_side > MANIFEST_MAX_SIDE_MAX ||
        quality < (int)MANIFEST_QUALITY_MIN ||
        quality > (int)MANIFEST_QUALITY_MAX) {
        snprintf(why, why_cap, "max side %u or quality %d out of range",
                 max_side, quality);
        return -EINVAL;
    }
    jpair_begin(&s->p);
    if (setjmp(s->p.jb))
        r = s->p.code ? s->p.code : -EBADMSG;
    else
        r = run(s, buf, len, max_side, quality, w, h);
    if (r < 0) {
        jpair_abort(&s->p);
        if (r == -EBADMSG && strcmp(s->p.stage, "encode") == 0)
            r = -EPROTO;  /* not the source's fault */
        if (r == -EPROTO)
            snprintf(why, why_cap, "libjpeg could not encode it: %s", s->p.msg);
        else if (r == -E2BIG)
            snprintf(why, why_cap, "needs more than %ld MiB to decode "
                     "(libjpeg: %s)", JPAIR_MEM_MAX >> 20, s->p.msg);
        else if (r == -ENOMEM)
            snprintf(why, why_cap, "out of memory to %s it (%s)", s->p.stage,
                     s->p.msg);
        else
            snprintf(why, why_cap, "JPEG data does not %s: %s", s->p.stage,
                     s->p.msg);
        return r;
    }
    *out = s->p.out;
    *out_len = s->p.out_len;
    return 0;
}
