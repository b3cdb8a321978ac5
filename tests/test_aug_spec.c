/*
 * test_aug_spec.c - the augmentation spec (proto/aug_spec.c): the table's
 * check, canonical values for every kind of key, defaults, the canonical
 * text and its round trip, and every refusal naming what it refuses.
 */
#include <errno.h>
#include <string.h>

#include "aug_spec.h"
#include "tap.h"

static int parse(const char *s, struct aug_spec *out, struct rf_err *err)
{
    err->msg[0] = '\0';
    return aug_spec_parse(s, strlen(s), out, err);
}

/* Parses s and checks the canonical text is want, and that it parses back
 * to the same struct. */
static void canon(const char *s, const char *want)
{
    struct aug_spec a, b;
    struct rf_err err;
    char buf[2 * AUG_SPEC_MAX];
    int n;

    if (!tap_ok(parse(s, &a, &err) == 0, "parses: %s", s)) {
        tap_diag("%s", err.msg);
        return;
    }
    n = aug_spec_format(&a, buf, sizeof(buf));
    tap_ok(n >= 0 && strcmp(buf, want) == 0, "canonical of %s is %s (got %s)", s, want,
           n >= 0 ? buf : "error");
    tap_ok(parse(buf, &b, &err) == 0 && memcmp(&a, &b, sizeof(a)) == 0,
           "%s parses back to the same spec", buf);
}

/* s is refused with a message holding each of the NULL-ended words. */
static void refused(const char *s, ...)
{
    struct aug_spec a;
    struct rf_err err;
    va_list ap;
    const char *w;
    int r = parse(s, &a, &err), all = r < 0;

    va_start(ap, s);
    while ((w = va_arg(ap, const char *)))
        if (!strstr(err.msg, w))
            all = 0;
    va_end(ap);
    tap_ok(all && a.n == 0, "refused: %s (%s)", s, err.msg);
}

int main(void)
{
    struct aug_spec s;
    struct rf_err err;
    char big[AUG_SPEC_MAX + 100];

    tap_ok(aug_table_check(&err) == 0, "the table passes its check");
    tap_ok(strcmp(aug_op_name(AUG_ERASING), "RandomErasing") == 0 &&
           aug_op_name(AUG_OP_COUNT) == NULL, "op names by id");
    tap_ok(aug_op_geometric(AUG_HFLIP) && !aug_op_geometric(AUG_INVERT), "geometric flags");

    /* values in canonical form */
    tap_ok(parse("colorjitter:BRIGHTNESS=0.4:hue=0.1", &s, &err) == 0 && s.n == 1 &&
           s.op[0].id == AUG_COLOR_JITTER && s.op[0].a[AUG_CJK_BRIGHTNESS].n == 2 &&
           s.op[0].a[AUG_CJK_BRIGHTNESS].v[0] == 1 - 0.4 &&
           s.op[0].a[AUG_CJK_BRIGHTNESS].v[1] == 1.4 && s.op[0].a[AUG_CJK_CONTRAST].n == 0 &&
           s.op[0].a[AUG_CJK_HUE].v[0] == -0.1 && s.op[0].a[AUG_CJK_HUE].v[1] == 0.1,
           "ColorJitter: jitter and hue ranges, unset factors none");
    tap_ok(parse("ColorJitter:brightness=1.5:contrast=1/1:hue=0", &s, &err) == 0 &&
           s.op[0].a[0].v[0] == 0 && s.op[0].a[0].v[1] == 2.5 && s.op[0].a[1].n == 0 &&
           s.op[0].a[3].n == 0, "jitter clamps at 0; [1,1] and hue 0 are none");
    tap_ok(parse("RandomGrayscale", &s, &err) == 0 && s.op[0].a[AUG_P].v[0] == 0.1,
           "RandomGrayscale's default p 0.1");
    tap_ok(parse("GaussianBlur:kernel_size=3/5:sigma=1", &s, &err) == 0 &&
           s.op[0].a[0].v[0] == 3 && s.op[0].a[0].v[1] == 5 && s.op[0].a[1].v[0] == 1 &&
           s.op[0].a[1].v[1] == 1, "GaussianBlur: kx/ky, one sigma is [s,s]");
    tap_ok(parse("RandomCrop:size=32:padding=4", &s, &err) == 0 &&
           s.op[0].a[AUG_CROP_SIZE].v[1] == 32 && s.op[0].a[AUG_CROP_PADDING].n == 4 &&
           s.op[0].a[AUG_CROP_PADDING].v[3] == 4 && s.op[0].a[AUG_CROP_MODE].word ==
           AUG_W_PAD_CONSTANT, "RandomCrop: size, padding on four sides, constant mode");
    tap_ok(parse("RandomCrop:size=32:padding=1/2:padding_mode=Reflect", &s, &err) == 0 &&
           s.op[0].a[1].v[0] == 1 && s.op[0].a[1].v[1] == 2 && s.op[0].a[1].v[2] == 1 &&
           s.op[0].a[1].v[3] == 2 && s.op[0].a[AUG_CROP_MODE].word == AUG_W_PAD_REFLECT,
           "padding lr/tb as torchvision's (left, top, right, bottom)");
    tap_ok(parse("RandomAffine:degrees=10:shear=5:fill=1/2/3", &s, &err) == 0 &&
           s.op[0].a[AUG_AFF_DEGREES].v[0] == -10 && s.op[0].a[AUG_AFF_SHEAR].v[1] == 5 &&
           s.op[0].a[AUG_AFF_SHEAR].v[3] == 0 && s.op[0].a[AUG_AFF_FILL].v[2] == 3 &&
           s.op[0].a[AUG_AFF_TRANSLATE].n == 0, "RandomAffine: degrees, shear, fill");
    tap_ok(parse("RandomErasing:value=random", &s, &err) == 0 &&
           s.op[0].a[AUG_ER_VALUE].word == AUG_W_RANDOM &&
           s.op[0].a[AUG_ER_SCALE].v[1] == 0.33, "RandomErasing: value=random, defaults");
    tap_ok(parse("RandAugment,TrivialAugmentWide,AutoAugment:policy=imagenet,RandomErasing",
                 &s, &err) == 0 && s.n == 4 && s.op[0].a[AUG_RA_NUM_OPS].v[0] == 2 &&
           s.op[0].a[AUG_RA_MAGNITUDE].v[0] == 9 && s.op[1].a[AUG_TA_BINS].v[0] == 31,
           "policies and their defaults");

    /* canonical text: defaults dropped, table names, ranges expanded */
    canon("randomhorizontalflip", "RandomHorizontalFlip");
    canon("RandomHorizontalFlip:p=0.5,RandomInvert:p=1", "RandomHorizontalFlip,RandomInvert:p=1");
    canon("ColorJitter:brightness=0.4:contrast=0.4", "ColorJitter:brightness=0.6/1.4:contrast=0.6/1.4");
    canon("RandomRotation:degrees=-0/30", "RandomRotation:degrees=0/30");
    canon("RandomCrop:size=32/32:padding=4:fill=7", "RandomCrop:size=32/32:padding=4/4/4/4:fill=7/7/7");
    canon("RandomPosterize:bits=4,RandomSolarize:threshold=128:p=0.2",
          "RandomPosterize:bits=4,RandomSolarize:threshold=128:p=0.2");
    canon("RandomErasing:value=RANDOM:scale=0.1/0.2", "RandomErasing:scale=0.1/0.2:value=random");

    /* refusals name the op, the key and the form */
    refused("Blur:p=1", "unknown op \"Blur\"", "ColorJitter", "RandomErasing", NULL);
    refused("RandomInvert:q=1", "RandomInvert has no parameter \"q\"", "p", NULL);
    refused("RandomInvert:p=2", "RandomInvert", "p", "0..1", NULL);
    refused("RandomInvert:p=0.5:p=0.5", "p given twice", NULL);
    refused("RandomInvert:p", "expected key=value", NULL);
    refused("RandomPosterize:p=1", "RandomPosterize needs bits=", NULL);
    refused("RandomPosterize:bits=9", "bits", "0..8", NULL);
    refused("RandomPosterize:bits=2.5", "bits", "integer", NULL);
    refused("RandomSolarize:threshold=256", "threshold", "0..255", NULL);
    refused("GaussianBlur:kernel_size=4", "kernel_size", "odd", NULL);
    refused("GaussianBlur:kernel_size=3:sigma=0", "sigma", NULL);
    refused("ColorJitter:hue=0.6", "hue", "0.5", NULL);
    refused("ColorJitter:brightness=2/1", "brightness", "lo <= hi", NULL);
    refused("RandomCrop:size=32:padding=1/2/3", "padding", NULL);
    refused("RandomCrop:size=32:padding_mode=wrap", "padding_mode", "constant|edge|reflect|symmetric", NULL);
    refused("RandomRotation:degrees=10:expand=1", "RandomRotation has no parameter \"expand\"", NULL);
    refused("RandAugment:magnitude=31", "magnitude=31 must be below num_magnitude_bins=31", NULL);
    refused("AutoAugment:policy=svhn", "policy", "imagenet", NULL);
    refused("RandomErasing,RandomInvert", "RandomErasing must be the last op", NULL);
    refused("RandomInvert,,RandomInvert", "op 2 has no name", NULL);
    refused("", "empty spec", NULL);
    refused("RandomInvert:p=nan", "p", NULL);
    refused("RandomInvert:p=1/1", "p", NULL);
    refused("RandomAffine:degrees=5:shear=3/2", "shear", NULL);

    /* Plugin: text values in the spec's text, kept as written */
    tap_ok(parse("RandomInvert,plugin:name=sepia:params=strength=60;p=0.5", &s, &err) == 0 &&
           s.n == 2 && s.op[1].id == AUG_PLUGIN &&
           strcmp(aug_param_text(&s, &s.op[1].a[AUG_PLUGIN_NAME]), "sepia") == 0 &&
           strcmp(aug_param_text(&s, &s.op[1].a[AUG_PLUGIN_PARAMS]), "strength=60;p=0.5") == 0,
           "Plugin: name and params as text");
    tap_ok(parse("Plugin:name=Sepia-2", &s, &err) == 0 &&
           strcmp(aug_param_text(&s, &s.op[0].a[AUG_PLUGIN_PARAMS]), "") == 0 &&
           s.op[0].a[AUG_PLUGIN_PARAMS].n == 0, "Plugin: params left out is \"\"");
    tap_ok(aug_op_geometric(AUG_PLUGIN), "a plugin counts as geometric");
    canon("Plugin:name=a:params=x=1/2;y=+3,Plugin:name=b:params=", "Plugin:name=a:params=x=1/2;y=+3,Plugin:name=b");
    canon("PLUGIN:params=k=v:name=ab", "Plugin:name=ab:params=k=v");
    refused("Plugin", "Plugin needs name=", NULL);
    refused("Plugin:name=1x", "bad value \"1x\" for name", "first a letter", NULL);
    refused("Plugin:name=/tmp/x.so", "for name", NULL);
    refused("Plugin:name=x:params=a\tb", "for params", "without blanks", NULL);
    refused("Plugin:name=abcdefghijabcdefghijabcdefghijabc", "for name", NULL);
    memset(big, 0, sizeof(big));
    strcpy(big, "Plugin:name=x:params=");
    memset(big + strlen(big), 'p', AUG_PARAM_TEXT_MAX + 1);
    refused(big, "for params", "at most 256 bytes", NULL);
    refused("Plugin:name=x:name=y", "name given twice", NULL);
    {
        struct aug_spec bad;
        char buf[2 * AUG_SPEC_MAX];

        parse("Plugin:name=sepia", &bad, &err);
        bad.op[0].a[AUG_PLUGIN_NAME].v[0] = AUG_TEXT_MAX; /* out of the text */
        tap_ok(aug_param_text(&bad, &bad.op[0].a[AUG_PLUGIN_NAME]) == NULL &&
               aug_spec_format(&bad, buf, sizeof(buf)) == -EINVAL,
               "a text value out of the spec's text is refused, not read");
    }

    memset(big, 0, sizeof(big));
    for (int i = 0; i < 17; i++)
        strcat(big, i ? ",RandomInvert" : "RandomInvert");
    refused(big, "more than 16 ops", NULL);
    memset(big, 'x', AUG_SPEC_MAX + 1);
    big[AUG_SPEC_MAX + 1] = '\0';
    refused(big, "at most 1024", NULL);
    return tap_done();
}
