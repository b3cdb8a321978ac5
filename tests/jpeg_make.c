/*
 * jpeg_make.c - synthetic JPEGs for the decoder's unit tests (jpeg_make.h).
 */
#include "jpeg_make.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

void jm_pattern(uint32_t x, uint32_t y, uint8_t *px, void *arg)
{
    (void)arg;
    px[0] = (uint8_t)(x * 3 + ((x / 7 + y / 7) & 1) * 40);
    px[1] = (uint8_t)(y * 2 + 30);
    px[2] = (uint8_t)((x + y) * 5);
}

uint8_t *jm_encode(uint32_t w, uint32_t h, const struct jm_opts *o, jm_pixel_fn fn, void *arg,
                   size_t *len)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr em;
    unsigned char *out = NULL;
    unsigned long outlen = 0;
    int comps = o->space == JM_GRAY ? 1 : o->space == JM_CMYK || o->space == JM_YCCK ? 4 : 3;
    uint8_t *row = malloc((size_t)w * comps);

    if (!row)
        return NULL;
    c.err = jpeg_std_error(&em);
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &out, &outlen);
    c.image_width = w;
    c.image_height = h;
    c.input_components = comps;
    c.in_color_space = o->space == JM_GRAY                          ? JCS_GRAYSCALE
                       : o->space == JM_CMYK || o->space == JM_YCCK ? JCS_CMYK
                                                                    : JCS_RGB;
    jpeg_set_defaults(&c);
    if (o->space == JM_RGB_PLAIN)
        jpeg_set_colorspace(&c, JCS_RGB);
    if (o->space == JM_YCCK)
        jpeg_set_colorspace(&c, JCS_YCCK);
    jpeg_set_quality(&c, o->quality ? o->quality : 90, TRUE);
    if (o->space == JM_RGB) {
        c.comp_info[0].h_samp_factor = o->h_samp ? o->h_samp : 1;
        c.comp_info[0].v_samp_factor = o->v_samp ? o->v_samp : 1;
    }
    if (o->progressive)
        jpeg_simple_progression(&c);
    c.restart_in_rows = (int)o->restart;
    c.restart_interval = o->restart ? 0 : o->restart_mcus;
    c.arith_code = o->arith;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < h) {
        JSAMPROW r = row;

        for (uint32_t x = 0; x < w; x++) {
            uint8_t px[4] = { 0, 0, 0, 0 }; /* the function may fill more than comps */

            fn(x, c.next_scanline, px, arg);
            memcpy(row + (size_t)x * comps, px, (size_t)comps);
        }
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    free(row);
    *len = outlen;
    return out;
}

uint8_t *jm_read_pixels(struct jpeg_decompress_struct *d)
{
    size_t stride = (size_t)d->output_width * (size_t)d->output_components;
    size_t size = stride * d->output_height;
    uint8_t *pix = malloc(size ? size : 1);

    if (!pix)
        return NULL;
    while (d->output_scanline < d->output_height) {
        JSAMPROW row = pix + (size_t)d->output_scanline * stride;

        if (jpeg_read_scanlines(d, &row, 1) != 1) {
            free(pix);
            return NULL;
        }
    }
    return pix;
}
