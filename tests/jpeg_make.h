/*
 * jpeg_make.h - synthetic JPEGs for the decoder's unit tests, encoded in
 * memory with libjpeg: a pixel function, a size, a sampling, a quality.
 */
#ifndef RINGFEED_TESTS_JPEG_MAKE_H
#define RINGFEED_TESTS_JPEG_MAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

/* The pixels given and how they are stored: JM_RGB as YCbCr, JM_GRAY
 * as one component, JM_CMYK as CMYK; JM_RGB_PLAIN RGB pixels stored as
 * RGB components (Adobe transform 0), JM_YCCK CMYK pixels stored as YCCK
 * (Adobe transform 2). */
enum jm_space { JM_RGB, JM_GRAY, JM_CMYK, JM_RGB_PLAIN, JM_YCCK };

struct jm_opts {
    enum jm_space space;
    int h_samp, v_samp;   /* luma sampling factors: 1,1 = 4:4:4; 2,2 = 4:2:0 */
    int quality;
    bool progressive;
    unsigned restart;     /* restart interval in MCU rows, 0 none */
    unsigned restart_mcus; /* restart interval in MCUs (when restart is 0), 0 none */
    bool arith;           /* arithmetic coding instead of Huffman */
};

/* Fills px (3 bytes RGB, 1 gray, 4 CMYK; 4 bytes are there) for (x, y). */
typedef void (*jm_pixel_fn)(uint32_t x, uint32_t y, uint8_t *px, void *arg);

/* Encodes a w x h image; returns a malloc'd buffer (*len bytes), or NULL. */
uint8_t *jm_encode(uint32_t w, uint32_t h, const struct jm_opts *o, jm_pixel_fn fn, void *arg,
                   size_t *len);

/* A pattern with detail at every scale: ramps plus a checkerboard. */
void jm_pattern(uint32_t x, uint32_t y, uint8_t *px, void *arg);

/*
 * Reads every row of a decompressor that jpeg_start_decompress has
 * started into a malloc'd buffer of output_width * output_height *
 * output_components bytes, as libjpeg gives them.  Returns it (the caller
 * frees it), or NULL when out of memory or a row does not come.  libjpeg's
 * errors go to d's error manager, as for any call on d.
 */
uint8_t *jm_read_pixels(struct jpeg_decompress_struct *d);

#endif
