/*
 * aug_spec.h - an augmentation pipeline's spec: the text that names it
 * (ATTACH augment=, the daemon config's recipe.NAME, ringfeed.transforms),
 * the one table of its ops and their parameters, and the parsed form that
 * travels to the workers (wire.h's wire_xform.aug).
 *
 * GRAMMAR (no blanks anywhere: a spec is one ATTACH argument)
 *
 *     spec   := op ( ',' op )*                 at most AUG_OPS_MAX ops
 *     op     := NAME ( ':' param )*            torchvision's class name
 *     param  := KEY '=' value                  torchvision's argument name
 *     value  := item ( '/' item )*             1 to 4 items
 *     item   := NUMBER | WORD                  decimal (strnum.h) or a word
 *
 * e.g. RandomGrayscale:p=0.2,ColorJitter:brightness=0.4:contrast=0.4,
 * RandomErasing:p=0.25.  Op names, keys and words match
 * case-insensitively.  A parameter left out takes torchvision's default;
 * a parameter whose default is None in torchvision is "none" until given.
 * Where torchvision takes one number or a pair, so does the spec ("4" or
 * "3/5").  Refused, naming what and the valid form: an unknown op (the
 * ops listed), an unknown key (the op's keys listed), a key given twice, a
 * value of the wrong form or out of range, a missing required key,
 * RandomErasing anywhere but last, an empty spec or op, more than
 * AUG_OPS_MAX ops, a spec over AUG_SPEC_MAX bytes.
 *
 * THE TABLE (torchvision 0.14's classes and defaults; aug_ops[] in
 * aug_spec.c is this table, and parsed values are in the canonical form
 * of the "as" column, which is what the ops read):
 *
 *  op / key             kind     default        valid            as
 *  ColorJitter (photometric; the factors drawn in a random order)
 *    brightness         jitter   0 (none)       x>=0 | lo/hi>=0  [lo,hi] = [max(0,1-x),1+x]
 *    contrast           jitter   0 (none)       as brightness    [lo,hi]
 *    saturation         jitter   0 (none)       as brightness    [lo,hi]
 *    hue                hue      0 (none)       0<=x<=0.5 |      [lo,hi] = [-x,x]
 *                                               -0.5<=lo<=hi<=0.5
 *                       (a factor of exactly [1,1], hue [0,0], is none:
 *                        not drawn, as torchvision)
 *  RandomGrayscale      p        prob     0.1   [0,1]
 *  GaussianBlur         kernel_size ksize required odd 1..255 | kx/ky   [kx,ky]
 *                       sigma    sigma    0.1/2 s>0 | 0<lo<=hi<=100    [lo,hi]
 *  RandomPosterize      bits     int      required 0..8
 *                       p        prob     0.5
 *  RandomSolarize       threshold num     required 0..255
 *                       p        prob     0.5
 *  RandomAdjustSharpness sharpness_factor num required 0..100
 *                       p        prob     0.5
 *  RandomAutocontrast   p        prob     0.5
 *  RandomEqualize       p        prob     0.5
 *  RandomInvert         p        prob     0.5
 *  RandomAffine (geometric)
 *    degrees            sym      required       x>=0 | lo/hi in [-360,360]  [lo,hi] = [-x,x]
 *    translate          pair     none           a/b, each 0..1   [a,b]
 *    scale              range    none           0<lo<=hi<=10     [lo,hi]
 *    shear              shear    none           x | a/b | a/b/c/d in [-180,180]
 *                                               [xlo,xhi,ylo,yhi]: x -> [-x,x,0,0],
 *                                               a/b -> [a,b,0,0]
 *    interpolation      word     nearest        nearest|bilinear  index
 *    fill               fill     0              v | r/g/b, 0..255 [r,g,b]
 *    center             pair     none           x/y, -1e6..1e6    [x,y]
 *  RandomRotation
 *    degrees            sym      required       as RandomAffine  [lo,hi]
 *    interpolation      word     nearest        nearest|bilinear
 *    center             pair     none           x/y
 *    fill               fill     0              v | r/g/b
 *  RandomHorizontalFlip p        prob     0.5
 *  RandomVerticalFlip   p        prob     0.5
 *  RandomCrop           size     size     required n | h/w, 1..4096  [h,w]
 *                       (the output is the slot's image: size must equal
 *                        its height and width, checked at ATTACH)
 *                       padding  pad      none      n | lr/tb | l/t/r/b, 0..1024
 *                                                   [left,top,right,bottom]
 *                       pad_if_needed bool 0        0|1
 *                       fill     fill     0         v | r/g/b
 *                       padding_mode word constant  constant|edge|reflect|symmetric
 *  TrivialAugmentWide (policy)
 *    num_magnitude_bins int      31             2..1000
 *    interpolation      word     nearest        nearest|bilinear
 *    fill               fill     none (0)       v | r/g/b
 *  RandAugment
 *    num_ops            int      2              0..16
 *    magnitude          int      9              0..num_magnitude_bins-1
 *    num_magnitude_bins int      31             2..1000
 *    interpolation      word     nearest
 *    fill               fill     none (0)
 *  AutoAugment
 *    policy             word     imagenet       imagenet
 *    interpolation      word     nearest
 *    fill               fill     none (0)
 *  Plugin (an operator's own op: a plugin.NAME line of the daemon's
 *  config, daemon/plugin/ringfeed_transform.h)
 *    name               name     required       1..32 of [A-Za-z0-9_-], first a letter
 *    params             text     "" (none)      0..AUG_PARAM_TEXT_MAX bytes of printable
 *                                               ASCII but ',' and ':' (the spec's own
 *                                               separators) and blanks; the plugin's
 *                                               init parses it ('=', ';' and '/' are
 *                                               free to use: params=strength=40;p=1)
 *                       (text values live in aug_spec.text: v[0] their offset,
 *                        v[1] their length; names match exactly, case kept)
 *  RandomErasing (last in a spec, or alone)
 *    p                  prob     0.5
 *    scale              range    0.02/0.33      0<lo<=hi<=1
 *    ratio              range    0.3/3.3        0<lo<=hi<=100
 *    value              evalue   0              v | r/g/b, 0..255 | random
 *                                               [r,g,b]; random: word 0
 *
 * torchvision arguments that cannot apply in a ring slot are not keys and
 * are refused like any unknown key: RandomRotation's expand (the slot's
 * size is fixed), RandomErasing's inplace (always in place here).
 *
 * A parsed spec is plain data (no pointers): it is copied into the
 * WIRE_RING_ADD message as it is.  Unused ops and parameters are zero, so
 * two parses of specs that mean the same compare equal with memcmp and
 * format to the same canonical text (aug_spec_format), which is the
 * stream's identity (share groups, resume).
 */
#ifndef RINGFEED_PROTO_AUG_SPEC_H
#define RINGFEED_PROTO_AUG_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define AUG_OPS_MAX 16      /* ops in one spec */
#define AUG_PARAMS_MAX 8    /* keys of one op */
#define AUG_SPEC_MAX 1024   /* bytes of spec text, NUL excluded */
#define AUG_NAME_MAX 32     /* bytes of a Plugin's name= */
#define AUG_PARAM_TEXT_MAX 256 /* bytes of a Plugin's params= */
#define AUG_TEXT_MAX 1024   /* bytes of every text value of a spec together */

/* The ops, in the table's order; never reordered (the worker's table and
 * the STATS names index by it). */
enum aug_op_id {
    AUG_COLOR_JITTER,
    AUG_GRAYSCALE,
    AUG_GAUSSIAN_BLUR,
    AUG_POSTERIZE,
    AUG_SOLARIZE,
    AUG_SHARPNESS,
    AUG_AUTOCONTRAST,
    AUG_EQUALIZE,
    AUG_INVERT,
    AUG_AFFINE,
    AUG_ROTATION,
    AUG_HFLIP,
    AUG_VFLIP,
    AUG_CROP,
    AUG_TRIVIAL,
    AUG_RANDAUGMENT,
    AUG_AUTOAUGMENT,
    AUG_ERASING,
    AUG_PLUGIN,
    AUG_OP_COUNT
};

/* Each op's keys, as indices into aug_op.a[] (the table's row order). */
enum { AUG_CJK_BRIGHTNESS, AUG_CJK_CONTRAST, AUG_CJK_SATURATION, AUG_CJK_HUE };
enum { AUG_P = 0 }; /* p of the one-probability ops (grayscale, autocontrast,
                       equalize, invert, the flips) */
enum { AUG_BLUR_KERNEL, AUG_BLUR_SIGMA };
enum { AUG_POST_BITS, AUG_POST_P };
enum { AUG_SOL_THRESHOLD, AUG_SOL_P };
enum { AUG_SHARP_FACTOR, AUG_SHARP_P };
enum { AUG_AFF_DEGREES, AUG_AFF_TRANSLATE, AUG_AFF_SCALE, AUG_AFF_SHEAR, AUG_AFF_INTERP,
       AUG_AFF_FILL, AUG_AFF_CENTER };
enum { AUG_ROT_DEGREES, AUG_ROT_INTERP, AUG_ROT_CENTER, AUG_ROT_FILL };
enum { AUG_CROP_SIZE, AUG_CROP_PADDING, AUG_CROP_PAD_IF_NEEDED, AUG_CROP_FILL,
       AUG_CROP_MODE };
enum { AUG_TA_BINS, AUG_TA_INTERP, AUG_TA_FILL };
enum { AUG_RA_NUM_OPS, AUG_RA_MAGNITUDE, AUG_RA_BINS, AUG_RA_INTERP, AUG_RA_FILL };
enum { AUG_AA_POLICY, AUG_AA_INTERP, AUG_AA_FILL };
enum { AUG_ER_P, AUG_ER_SCALE, AUG_ER_RATIO, AUG_ER_VALUE };
enum { AUG_PLUGIN_NAME, AUG_PLUGIN_PARAMS };

/* Words' indices (aug_param.word) */
enum { AUG_W_NEAREST, AUG_W_BILINEAR };
enum { AUG_W_PAD_CONSTANT, AUG_W_PAD_EDGE, AUG_W_PAD_REFLECT, AUG_W_PAD_SYMMETRIC };
enum { AUG_W_IMAGENET };
enum { AUG_W_RANDOM };

/* One key's value in canonical form (the table's "as" column): n numbers
 * in v (0: none, torchvision's None), or a word's index (-1: no word). */
struct aug_param {
    double v[4];
    uint32_t n;
    int32_t word;
};

struct aug_op {
    uint32_t id;      /* enum aug_op_id */
    uint32_t pad;     /* 0 (whether a key was written is not kept: a key
                         given its default means the same as none given) */
    struct aug_param a[AUG_PARAMS_MAX];
};

struct aug_spec {
    uint32_t n;       /* ops, in order; 0: no augmentation */
    uint32_t ntext;   /* bytes of text used */
    struct aug_op op[AUG_OPS_MAX];
    char text[AUG_TEXT_MAX]; /* the text values, each NUL-terminated, in
                                the order parsed; the rest zero */
};

/*
 * Parses text[0..len) into *out (zeroed first; every key its default).
 * Pure: reads only the span.  Returns 0, or -EINVAL with err naming the op,
 * the key and the valid form ("RandomSolarize: threshold takes a number in
 * 0..255"), or -E2BIG for too many ops or too long a text.
 */
int aug_spec_parse(const char *text, size_t len, struct aug_spec *out, struct rf_err *err);

/*
 * Writes the canonical text of s into buf: ops by their table names, only
 * the keys whose value is not the default, in table order, numbers in
 * strnum's shortest form.  Parsing it gives s again.  An empty spec is "".
 * Returns the length, or -ENOSPC (AUG_SPEC_MAX * 2 always fits a spec
 * parsed from AUG_SPEC_MAX bytes), -EINVAL for a spec the parser could not
 * have made.
 */
int aug_spec_format(const struct aug_spec *s, char *buf, size_t cap);

/* The op's table name ("ColorJitter"), or NULL out of range. */
const char *aug_op_name(uint32_t id);
/* The op's name for STATS: lower case, e.g. "colorjitter". */
const char *aug_op_stat_name(uint32_t id);
/* Whether the op moves pixels (geometric or a policy that may). */
bool aug_op_geometric(uint32_t id);

/*
 * Key k of op id, for documentation (ringfeed(7)'s list is checked against
 * it): its name, its default as text into def (the canonical numbers
 * joined by '/', a fill of one value repeated written once; the word;
 * "none" for torchvision's None or a jitter of none; "required"), and the
 * values it takes, in words, into valid.  Returns 0, or -ENOENT past the
 * op's keys or the ops.
 */
int aug_op_key_doc(uint32_t id, unsigned k, const char **name, char *def, size_t def_cap,
                   char *valid, size_t valid_cap);

/* The text of a text key (a Plugin's name or params): NUL-terminated, ""
 * for none; NULL when p's offset and length do not lie in s->text. */
const char *aug_param_text(const struct aug_spec *s, const struct aug_param *p);

/* Checks the table (names unique, defaults valid); 0 or -EINVAL with err. */
int aug_table_check(struct rf_err *err);

#endif
