/*
 * aug_policy.c - the augmentation policies' tables and draws
 * (TrivialAugmentWide, RandAugment, AutoAugment's ImageNet policy) and
 * RandomErasing's draw and fill, as torchvision 0.14 decides them
 * (aug_policy.h).  Pure functions of their arguments and the sample's
 * stream; the policies' ops run in aug_policy_apply.c.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "aug_policy.h"

static const char *const pop_names[AUG_POP_COUNT] = {
    [AUG_POP_IDENTITY] = "Identity",
    [AUG_POP_SHEAR_X] = "ShearX",
    [AUG_POP_SHEAR_Y] = "ShearY",
    [AUG_POP_TRANSLATE_X] = "TranslateX",
    [AUG_POP_TRANSLATE_Y] = "TranslateY",
    [AUG_POP_ROTATE] = "Rotate",
    [AUG_POP_BRIGHTNESS] = "Brightness",
    [AUG_POP_COLOR] = "Color",
    [AUG_POP_CONTRAST] = "Contrast",
    [AUG_POP_SHARPNESS] = "Sharpness",
    [AUG_POP_POSTERIZE] = "Posterize",
    [AUG_POP_SOLARIZE] = "Solarize",
    [AUG_POP_AUTOCONTRAST] = "AutoContrast",
    [AUG_POP_EQUALIZE] = "Equalize",
    [AUG_POP_INVERT] = "Invert",
};

const char *aug_pop_name(unsigned op)
{
    return op < AUG_POP_COUNT ? pop_names[op] : NULL;
}

/* How an op's magnitudes are made from its bin count. */
enum space_kind {
    SPACE_ABSENT = 0, /* not in this policy's space */
    SPACE_NONE,       /* torch.tensor(0.0): no magnitude, no bin drawn */
    SPACE_LIN,        /* torch.linspace(lo, hi, bins) */
    SPACE_LIN_W,      /* torch.linspace(0, 150 / 331 * width, bins) */
    SPACE_LIN_H,      /* torch.linspace(0, 150 / 331 * height, bins) */
    SPACE_POSTERIZE,  /* 8 - (arange(bins) / ((bins - 1) / k)).round() */
};

struct space {
    uint8_t kind;   /* enum space_kind */
    uint8_t sign;   /* the op takes the sign coin */
    float lo, hi;   /* SPACE_LIN; SPACE_POSTERIZE: k in hi */
};

#define LIN(lo, hi) {SPACE_LIN, 1, lo, hi}
#define NONE {SPACE_NONE, 0, 0, 0}
/* torchvision's _augmentation_space for RandAugment and AutoAugment alike
 * (the "wide" one is TrivialAugmentWide's) */
#define STANDARD_SPACE                                          \
    [AUG_POP_SHEAR_X] = LIN(0.0f, 0.3f),                        \
    [AUG_POP_SHEAR_Y] = LIN(0.0f, 0.3f),                        \
    [AUG_POP_TRANSLATE_X] = {SPACE_LIN_W, 1, 0, 0},             \
    [AUG_POP_TRANSLATE_Y] = {SPACE_LIN_H, 1, 0, 0},             \
    [AUG_POP_ROTATE] = LIN(0.0f, 30.0f),                        \
    [AUG_POP_BRIGHTNESS] = LIN(0.0f, 0.9f),                     \
    [AUG_POP_COLOR] = LIN(0.0f, 0.9f),                          \
    [AUG_POP_CONTRAST] = LIN(0.0f, 0.9f),                       \
    [AUG_POP_SHARPNESS] = LIN(0.0f, 0.9f),                      \
    [AUG_POP_POSTERIZE] = {SPACE_POSTERIZE, 0, 0, 4},           \
    [AUG_POP_SOLARIZE] = {SPACE_LIN, 0, 255.0f, 0.0f},          \
    [AUG_POP_AUTOCONTRAST] = NONE,                              \
    [AUG_POP_EQUALIZE] = NONE

/* _augmentation_space of each policy, by op. */
static const struct space spaces[AUG_POLICY_COUNT][AUG_POP_COUNT] = {
    [AUG_POLICY_TRIVIALAUGMENT] = {
        [AUG_POP_IDENTITY] = NONE,
        [AUG_POP_SHEAR_X] = LIN(0.0f, 0.99f),
        [AUG_POP_SHEAR_Y] = LIN(0.0f, 0.99f),
        [AUG_POP_TRANSLATE_X] = LIN(0.0f, 32.0f),
        [AUG_POP_TRANSLATE_Y] = LIN(0.0f, 32.0f),
        [AUG_POP_ROTATE] = LIN(0.0f, 135.0f),
        [AUG_POP_BRIGHTNESS] = LIN(0.0f, 0.99f),
        [AUG_POP_COLOR] = LIN(0.0f, 0.99f),
        [AUG_POP_CONTRAST] = LIN(0.0f, 0.99f),
        [AUG_POP_SHARPNESS] = LIN(0.0f, 0.99f),
        [AUG_POP_POSTERIZE] = {SPACE_POSTERIZE, 0, 0, 6},
        [AUG_POP_SOLARIZE] = {SPACE_LIN, 0, 255.0f, 0.0f},
        [AUG_POP_AUTOCONTRAST] = NONE,
        [AUG_POP_EQUALIZE] = NONE,
    },
    [AUG_POLICY_RANDAUGMENT] = {
        [AUG_POP_IDENTITY] = NONE,
        STANDARD_SPACE,
    },
    [AUG_POLICY_AUTOAUGMENT] = {
        STANDARD_SPACE,
        [AUG_POP_INVERT] = NONE,
    },
};

#undef LIN
#undef STANDARD_SPACE
#undef NONE

/* Each space's ops in torchvision's dict order (which randint indexes):
 * the enum's order, less the absent ones. */
unsigned aug_policy_space_size(enum aug_policy pol)
{
    unsigned n = 0;

    if ((unsigned)pol >= AUG_POLICY_COUNT)
        return 0;
    for (unsigned op = 0; op < AUG_POP_COUNT; op++)
        n += spaces[pol][op].kind != SPACE_ABSENT;
    return n;
}

int aug_policy_space_op(enum aug_policy pol, unsigned k)
{
    if ((unsigned)pol >= AUG_POLICY_COUNT)
        return -1;
    for (unsigned op = 0; op < AUG_POP_COUNT; op++)
        if (spaces[pol][op].kind != SPACE_ABSENT && k-- == 0)
            return (int)op;
    return -1;
}

/*
 * Element k of torch.linspace(start, end, n) in float32 as torch 1.13's
 * AVX2 CPU kernel (the one Debian's build dispatches to) computes it:
 * step = (end - start) / (n - 1); below n / 2, start + step * k, from there
 * end - step * (n - k - 1), each a fused multiply-add; but elements in the
 * whole 16-element blocks from the front come from 8-lane vectors whose
 * lane j is (that formula at the lane-0 index) + j * step, rounded twice.
 * tests/integration/test_aug_policy.py checks every table bit for bit.
 */
static float linspace_scalar(float start, float end, float step, uint32_t n, uint32_t k)
{
    return k < n / 2 ? fmaf(step, (float)k, start) : fmaf(-step, (float)(n - k - 1), end);
}

static float linspace_at(float start, float end, uint32_t n, uint32_t k)
{
    float step = (end - start) / (float)(n - 1);
    uint32_t lane = k % 8;
    volatile float off; /* rounded on its own: the vector lanes do not fuse */

    if (k >= n / 16 * 16 || lane == 0)
        return linspace_scalar(start, end, step, n, k);
    off = (float)lane * step;
    return linspace_scalar(start, end, step, n, k - lane) + off;
}

float aug_policy_magnitude(enum aug_policy pol, unsigned op, uint32_t bins, uint32_t bin,
                           uint32_t w, uint32_t h, bool *is_signed)
{
    const struct space *sp;
    float div;

    if (is_signed)
        *is_signed = false;
    if ((unsigned)pol >= AUG_POLICY_COUNT || op >= AUG_POP_COUNT || bins < 2 || bin >= bins)
        return 0.0f;
    sp = &spaces[pol][op];
    if (is_signed)
        *is_signed = sp->sign;
    switch (sp->kind) {
    case SPACE_LIN:
        return linspace_at(sp->lo, sp->hi, bins, bin);
    case SPACE_LIN_W:
        return linspace_at(0.0f, (float)(150.0 / 331.0 * w), bins, bin);
    case SPACE_LIN_H:
        return linspace_at(0.0f, (float)(150.0 / 331.0 * h), bins, bin);
    case SPACE_POSTERIZE:
        /* int64 / python float: float32 division by the float32 divisor,
         * rounded half to even */
        div = (float)((double)(bins - 1) / (double)sp->hi);
        return (float)(8 - (int)nearbyintf((float)bin / div));
    default:
        return 0.0f;
    }
}

const char *aug_trivialaugment_check(uint32_t bins)
{
    if (bins < AUG_POLICY_MIN_BINS || bins > AUG_POLICY_MAX_BINS)
        return "num_magnitude_bins must be 2 to 1024";
    return NULL;
}

const char *aug_randaugment_check(uint32_t num_ops, uint32_t magnitude, uint32_t bins)
{
    if (bins < AUG_POLICY_MIN_BINS || bins > AUG_POLICY_MAX_BINS)
        return "num_magnitude_bins must be 2 to 1024";
    if (num_ops > AUG_POLICY_MAX_OPS)
        return "num_ops must be 0 to 16";
    if (magnitude >= bins)
        return "magnitude must be below num_magnitude_bins";
    return NULL;
}

/* One op into out: its magnitude at bin (ignored for an op without
 * magnitudes), negated when neg. */
static void push(struct aug_policy_draw *out, enum aug_policy pol, unsigned op, uint32_t bins,
                 int bin, bool neg, uint32_t w, uint32_t h)
{
    struct aug_policy_step *st = &out->step[out->n++];
    bool has = spaces[pol][op].kind != SPACE_NONE;
    float m = has ? aug_policy_magnitude(pol, op, bins, (uint32_t)bin, w, h, NULL) : 0.0f;

    st->op = (uint8_t)op;
    st->bin = has ? (int16_t)bin : -1;
    st->magnitude = neg ? -m : m;
}

void aug_draw_trivialaugment_bins(struct rng_stream *rng, uint32_t bins, uint32_t w, uint32_t h,
                                  struct aug_policy_draw *out)
{
    const enum aug_policy pol = AUG_POLICY_TRIVIALAUGMENT;
    unsigned op = (unsigned)aug_policy_space_op(pol, rng_below(rng, aug_policy_space_size(pol)));
    const struct space *sp = &spaces[pol][op];
    int bin = sp->kind != SPACE_NONE ? (int)rng_below(rng, bins) : -1;
    bool neg = sp->sign && rng_below(rng, 2) == 1;

    out->n = 0;
    push(out, pol, op, bins, bin, neg, w, h);
}

void aug_draw_trivialaugment(struct rng_stream *rng, uint32_t w, uint32_t h,
                             struct aug_policy_draw *out)
{
    aug_draw_trivialaugment_bins(rng, AUG_TRIVIAL_BINS, w, h, out);
}

void aug_draw_randaugment(struct rng_stream *rng, uint32_t num_ops, uint32_t magnitude,
                          uint32_t bins, uint32_t w, uint32_t h, struct aug_policy_draw *out)
{
    const enum aug_policy pol = AUG_POLICY_RANDAUGMENT;

    out->n = 0;
    for (uint32_t k = 0; k < num_ops && k < AUG_POLICY_MAX_OPS; k++) {
        unsigned op = (unsigned)aug_policy_space_op(pol, rng_below(rng, aug_policy_space_size(pol)));
        bool neg = spaces[pol][op].sign && rng_below(rng, 2) == 1;

        push(out, pol, op, bins, (int)magnitude, neg, w, h);
    }
}

#define P(name, p, bin) {AUG_POP_##name, p, bin}
const struct aug_autoaug_op aug_autoaug_imagenet[AUG_AUTOAUG_IMAGENET_LEN][2] = {
    {P(POSTERIZE, 0.4f, 8), P(ROTATE, 0.6f, 9)},
    {P(SOLARIZE, 0.6f, 5), P(AUTOCONTRAST, 0.6f, -1)},
    {P(EQUALIZE, 0.8f, -1), P(EQUALIZE, 0.6f, -1)},
    {P(POSTERIZE, 0.6f, 7), P(POSTERIZE, 0.6f, 6)},
    {P(EQUALIZE, 0.4f, -1), P(SOLARIZE, 0.2f, 4)},
    {P(EQUALIZE, 0.4f, -1), P(ROTATE, 0.8f, 8)},
    {P(SOLARIZE, 0.6f, 3), P(EQUALIZE, 0.6f, -1)},
    {P(POSTERIZE, 0.8f, 5), P(EQUALIZE, 1.0f, -1)},
    {P(ROTATE, 0.2f, 3), P(SOLARIZE, 0.6f, 8)},
    {P(EQUALIZE, 0.6f, -1), P(POSTERIZE, 0.4f, 6)},
    {P(ROTATE, 0.8f, 8), P(COLOR, 0.4f, 0)},
    {P(ROTATE, 0.4f, 9), P(EQUALIZE, 0.6f, -1)},
    {P(EQUALIZE, 0.0f, -1), P(EQUALIZE, 0.8f, -1)},
    {P(INVERT, 0.6f, -1), P(EQUALIZE, 1.0f, -1)},
    {P(COLOR, 0.6f, 4), P(CONTRAST, 1.0f, 8)},
    {P(ROTATE, 0.8f, 8), P(COLOR, 1.0f, 2)},
    {P(COLOR, 0.8f, 8), P(SOLARIZE, 0.8f, 7)},
    {P(SHARPNESS, 0.4f, 7), P(INVERT, 0.6f, -1)},
    {P(SHEAR_X, 0.6f, 5), P(EQUALIZE, 1.0f, -1)},
    {P(COLOR, 0.4f, 0), P(EQUALIZE, 0.6f, -1)},
    {P(EQUALIZE, 0.4f, -1), P(SOLARIZE, 0.2f, 4)},
    {P(SOLARIZE, 0.6f, 5), P(AUTOCONTRAST, 0.6f, -1)},
    {P(INVERT, 0.6f, -1), P(EQUALIZE, 1.0f, -1)},
    {P(COLOR, 0.6f, 4), P(CONTRAST, 1.0f, 8)},
    {P(EQUALIZE, 0.8f, -1), P(EQUALIZE, 0.6f, -1)},
};
#undef P

/* torch.rand's float32 on the CPU: 24 random bits times 2^-24. */
static float rand_f32(struct rng_stream *rng)
{
    return (float)(rng_u32(rng) >> 8) * 0x1p-24f;
}

void aug_draw_autoaugment_imagenet(struct rng_stream *rng, uint32_t w, uint32_t h,
                                   struct aug_policy_draw *out)
{
    const enum aug_policy pol = AUG_POLICY_AUTOAUGMENT;
    uint32_t id = rng_below(rng, AUG_AUTOAUG_IMAGENET_LEN);
    float probs[2];
    uint32_t signs[2];

    probs[0] = rand_f32(rng);
    probs[1] = rand_f32(rng);
    signs[0] = rng_below(rng, 2);
    signs[1] = rng_below(rng, 2);
    out->n = 0;
    for (int i = 0; i < 2; i++) {
        const struct aug_autoaug_op *o = &aug_autoaug_imagenet[id][i];

        if (probs[i] <= o->p)
            push(out, pol, o->op, AUG_AUTOAUG_BINS, o->bin,
                 spaces[pol][o->op].sign && signs[i] == 0, w, h);
    }
}

/* ---- RandomErasing ---- */

const char *aug_erasing_check(const struct aug_erasing_args *a)
{
    if (!(a->p >= 0.0 && a->p <= 1.0))
        return "p must be 0 to 1";
    if (!(a->scale[0] >= 0.0 && a->scale[1] <= 1.0))
        return "scale must lie within 0 to 1";
    if (!(a->scale[0] <= a->scale[1]))
        return "scale must be (min, max)";
    if (!(a->ratio[0] > 0.0 && isfinite(a->ratio[1])))
        return "ratio must be positive and finite";
    if (!(a->ratio[0] <= a->ratio[1]))
        return "ratio must be (min, max)";
    if (a->value_mode != AUG_ERASE_CONST && a->value_mode != AUG_ERASE_RANDOM)
        return "value must be numbers or \"random\"";
    return NULL;
}

void aug_draw_erasing(struct rng_stream *rng, double p, const double scale[2],
                      const double ratio[2], uint32_t img_h, uint32_t img_w,
                      struct aug_erasing_draw *out)
{
    double area = (double)img_h * (double)img_w;
    double lr0 = log(ratio[0]), lr1 = log(ratio[1]);

    *out = (struct aug_erasing_draw){.erase = false, .h = img_h, .w = img_w};
    if (!rng_bernoulli(rng, p))
        return;
    for (int attempt = 0; attempt < 10; attempt++) {
        double erase_area = area * rng_uniform_range(rng, scale[0], scale[1]);
        double aspect = exp(rng_uniform_range(rng, lr0, lr1));
        double eh = nearbyint(sqrt(erase_area * aspect)); /* Python's round: half to even */
        double ew = nearbyint(sqrt(erase_area / aspect));

        if (!(eh < img_h && ew < img_w))
            continue;
        out->h = (uint32_t)eh;
        out->w = (uint32_t)ew;
        out->i = rng_below(rng, img_h - out->h + 1);
        out->j = rng_below(rng, img_w - out->w + 1);
        out->erase = true;
        return;
    }
}

static uint8_t noise_byte(double z)
{
    double v = nearbyint(127.5 + 63.75 * z);

    return v <= 0.0 ? 0 : v >= 255.0 ? 255 : (uint8_t)v;
}

void aug_draw_erasing_noise(struct rng_stream *rng, size_t n, uint8_t *v)
{
    for (size_t k = 0; k < n; k += 2) {
        double u1 = 1.0 - rng_uniform(rng); /* (0, 1]: log is finite */
        double u2 = rng_uniform(rng);
        double r = sqrt(-2.0 * log(u1));

        v[k] = noise_byte(r * cos(2.0 * M_PI * u2));
        if (k + 1 < n)
            v[k + 1] = noise_byte(r * sin(2.0 * M_PI * u2));
    }
}

void aug_erase(struct aug_img *im, uint32_t i, uint32_t j, uint32_t h, uint32_t w,
               const uint8_t *v, bool per_pixel)
{
    if (h == 0 || w == 0)
        return;
    for (uint32_t ch = 0; ch < im->c; ch++) {
        const uint8_t *src = per_pixel ? v + (size_t)ch * h * w : v + ch;

        for (uint32_t y = 0; y < h; y++) {
            if (im->layout == AUG_CHW) {
                uint8_t *row = im->px + aug_at(im, ch, i + y, j);

                if (per_pixel)
                    memcpy(row, src + (size_t)y * w, w);
                else
                    memset(row, *src, w);
            } else {
                uint8_t *px = im->px + aug_at(im, ch, i + y, j);

                for (uint32_t x = 0; x < w; x++)
                    px[(size_t)x * im->c] = per_pixel ? src[(size_t)y * w + x] : *src;
            }
        }
    }
}

int aug_random_erasing(struct aug_img *im, struct rng_stream *rng,
                       const struct aug_erasing_args *a, struct aug_scratch *s)
{
    struct aug_erasing_draw d;
    uint8_t *v;
    size_t n;

    aug_draw_erasing(rng, a->p, a->scale, a->ratio, im->h, im->w, &d);
    if (!d.erase)
        return 0;
    if (a->value_mode != AUG_ERASE_RANDOM) {
        aug_erase(im, d.i, d.j, d.h, d.w, a->value, false);
        return 0;
    }
    n = (size_t)im->c * d.h * d.w;
    v = aug_scratch_get(s, n ? n : 1);
    if (!v)
        return -ENOMEM;
    aug_draw_erasing_noise(rng, n, v);
    aug_erase(im, d.i, d.j, d.h, d.w, v, true);
    return 0;
}
