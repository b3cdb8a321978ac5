/*
 * sepia.c - an example ringfeed plugin (daemon/plugin/ringfeed_transform.h):
 * blends each RGB pixel toward its sepia tone, with probability p.
 *
 *     plugin.sepia = /usr/lib/ringfeed/plugins/sepia.so     (ringfeedd.conf)
 *     augment=Plugin:name=sepia:params=strength=60;p=0.5   (ATTACH)
 *
 * params: "key=value" pairs separated by ';', each optional:
 *   strength  integer percent 0..100 (default 100): 0 leaves the image,
 *             100 is the full sepia tone
 *   p         the probability of applying it, 0..1 (default 1), drawn
 *             from the sample's stream (so the same for any worker count)
 * On a 3-channel image, per pixel, in integers (exact, easy to check):
 *   t_r = min(255, (393 r + 769 g + 189 b) / 1000)
 *   t_g = min(255, (349 r + 686 g + 168 b) / 1000)
 *   t_b = min(255, (272 r + 534 g + 131 b) / 1000)
 *   out = (v * (100 - strength) + t * strength + 50) / 100
 * A 1-channel image has no colour to tone: apply refuses it (a bad
 * sample), which a serious plugin would rather check in init when it can.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed_transform.h"

struct sepia {
    unsigned strength; /* percent */
    double p;
};

/* Parses "strength=N;p=X" (either, both, or "") into s; nonzero with err. */
static int parse(const char *params, struct sepia *s, char *err, size_t errcap)
{
    const char *at = params;

    s->strength = 100;
    s->p = 1.0;
    while (*at) {
        const char *end = strchr(at, ';');
        size_t len = end ? (size_t)(end - at) : strlen(at);
        char item[64], *eq, *stop;

        if (len == 0 || len >= sizeof(item)) {
            snprintf(err, errcap, "bad params item at \"%.20s\"; want strength=N;p=X", at);
            return 1;
        }
        memcpy(item, at, len);
        item[len] = '\0';
        eq = strchr(item, '=');
        if (!eq) {
            snprintf(err, errcap, "\"%s\": want key=value (strength=N, p=X)", item);
            return 1;
        }
        *eq = '\0';
        if (strcmp(item, "strength") == 0) {
            long v = strtol(eq + 1, &stop, 10);

            if (stop == eq + 1 || *stop || v < 0 || v > 100) {
                snprintf(err, errcap, "strength takes an integer percent in 0..100, not "
                         "\"%s\"", eq + 1);
                return 1;
            }
            s->strength = (unsigned)v;
        } else if (strcmp(item, "p") == 0) {
            double v = strtod(eq + 1, &stop);

            if (stop == eq + 1 || *stop || !(v >= 0 && v <= 1)) {
                snprintf(err, errcap, "p takes a probability in 0..1, not \"%s\"", eq + 1);
                return 1;
            }
            s->p = v;
        } else {
            snprintf(err, errcap, "unknown key \"%s\"; keys: strength p", item);
            return 1;
        }
        at += len + (end ? 1 : 0);
    }
    return 0;
}

static int sepia_init(const char *params, void **state, char *err, size_t errcap)
{
    struct sepia *s = malloc(sizeof(*s));

    if (!s) {
        snprintf(err, errcap, "out of memory");
        return 1;
    }
    if (parse(params, s, err, errcap) != 0) {
        free(s);
        return 1;
    }
    *state = s;
    return 0;
}

static unsigned char tone(unsigned r, unsigned g, unsigned b, const unsigned k[3])
{
    unsigned t = (k[0] * r + k[1] * g + k[2] * b) / 1000;

    return (unsigned char)(t > 255 ? 255 : t);
}

static int sepia_apply(void *state, const struct ringfeed_image *im,
                       const struct ringfeed_rng *rng, char *err, size_t errcap)
{
    static const unsigned k[3][3] = {{393, 769, 189}, {349, 686, 168}, {272, 534, 131}};
    const struct sepia *s = state;
    unsigned a = s->strength;

    if (im->c != 3) {
        snprintf(err, errcap, "sepia needs 3 channels, the image has %u", im->c);
        return 1;
    }
    /* always one draw, applied or not: the draws after it do not depend on p */
    if (!(ringfeed_uniform(rng) < s->p))
        return 0;
    for (uint32_t y = 0; y < im->h; y++) {
        for (uint32_t x = 0; x < im->w; x++) {
            size_t at[3] = {ringfeed_at(im, 0, y, x), ringfeed_at(im, 1, y, x),
                            ringfeed_at(im, 2, y, x)};
            unsigned v[3] = {im->px[at[0]], im->px[at[1]], im->px[at[2]]};

            for (int ch = 0; ch < 3; ch++)
                im->px[at[ch]] = (unsigned char)((v[ch] * (100 - a) +
                                                  tone(v[0], v[1], v[2], k[ch]) * a + 50) / 100);
        }
    }
    return 0;
}

static void sepia_fini(void *state)
{
    free(state);
}

const struct ringfeed_transform_v1 ringfeed_transform_v1 = {
    .abi = RINGFEED_TRANSFORM_ABI,
    .name = "sepia",
    .init = sepia_init,
    .apply = sepia_apply,
    .fini = sepia_fini,
};
