/*
 * cmyk.c - CMYK to RGB as cmyk.h says.
 */
#include "cmyk.h"

void cmyk_to_rgb(uint8_t *p, size_t n, bool adobe)
{
    uint8_t inv = adobe ? 0xFF : 0x00;
    uint8_t *o = p;

    for (size_t i = 0; i < n; i++, p += 4, o += 3) {
        unsigned k = (uint8_t)(p[3] ^ inv), nk = 255 - k;

        for (int c = 0; c < 3; c++) {
            unsigned t = (uint8_t)(p[c] ^ inv) * nk + 128;

            o[c] = (uint8_t)(nk - ((t + (t >> 8)) >> 8));
        }
    }
}
