/*
 * pack_split.c - `ringfeed-pack split DIR --val F|N [--stratify] [--seed S]
 * [--names TRAIN,VAL] [--force]`: records a train/validation split in a
 * packed dataset as two named index sets (proto/dataset_split.h does the
 * work; ringfeed.split in Python calls the same function).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_split.h"
#include "pack.h"
#include "strnum.h"

static const char usage_text[] =
    "usage: ringfeed-pack split DIR --val F|N [--stratify] [--seed S]\n"
    "                          [--names TRAIN,VAL] [--force]\n"
    "\n"
    "Records a validation split in the dataset at DIR as two named index\n"
    "sets, every sample in exactly one: the validation set of --val samples\n"
    "and its complement.  A daemon serving DIR offers them at once (ATTACH\n"
    "subset=NAME); the records are not touched.\n"
    "\n"
    "  --val F|N      a fraction in (0, 1) (with a '.': ceil(F x samples), as\n"
    "                 scikit-learn's test_size) or a count N of samples\n"
    "  --stratify     keep each class's share in both sets (labels from the\n"
    "                 index, or kind fields' scalar \"label\")\n"
    "  --seed S       the split's seed, 0 by default; a seed gives the same\n"
    "                 sets on every machine\n"
    "  --names A,B    the complement's and the validation set's names\n"
    "                 (default train,val): 1..32 of A-Z a-z 0-9 _ -, first a letter\n"
    "  --force        replace sets of those names (refused without it)\n"
    "  --help         this text\n";

struct split_opts {
    struct split_request rq;
    char names[2][64];
    bool val_given;
};

/* --val: a count ("6000") or, with a '.', a fraction ("0.1"). */
static int parse_val(const char *s, struct split_request *rq)
{
    if (strchr(s, '.') || strchr(s, 'e') || strchr(s, 'E')) {
        if (strnum_double(s, strlen(s), &rq->val_frac) < 0 || !(rq->val_frac > 0.0) ||
            !(rq->val_frac < 1.0))
            return -EINVAL;
        rq->val_count = 0;
        return 0;
    }
    if (strnum_u64(s, strlen(s), &rq->val_count) < 0 || rq->val_count == 0)
        return -EINVAL;
    return 0;
}

static int parse_names(const char *s, struct split_opts *o)
{
    const char *comma = strchr(s, ',');
    size_t a, b;

    if (!comma || strchr(comma + 1, ','))
        return -EINVAL;
    a = (size_t)(comma - s);
    b = strlen(comma + 1);
    if (a >= sizeof(o->names[0]) || b >= sizeof(o->names[1]))
        return -EINVAL;
    memcpy(o->names[0], s, a);
    o->names[0][a] = '\0';
    memcpy(o->names[1], comma + 1, b + 1);
    return 0;
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct split_opts *o, const char **dir)
{
    static const struct option longopts[] = {
        {"val", required_argument, NULL, 'v'},
        {"stratify", no_argument, NULL, 't'},
        {"seed", required_argument, NULL, 's'},
        {"names", required_argument, NULL, 'n'},
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    memset(o, 0, sizeof(*o));
    snprintf(o->names[0], sizeof(o->names[0]), "train");
    snprintf(o->names[1], sizeof(o->names[1]), "val");
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'v':
            if (parse_val(optarg, &o->rq) < 0)
                return pack_usage_error("split", "--val: '%s' is neither a fraction in (0, 1) "
                                        "(0.1) nor a count of samples from 1 (5000)", optarg);
            o->val_given = true;
            break;
        case 't': o->rq.stratify = true; break;
        case 'f': o->rq.force = true; break;
        case 's':
            if (strnum_u64(optarg, strlen(optarg), &o->rq.seed) < 0)
                return pack_usage_error("split", "--seed: '%s' is not an integer in "
                                        "0..18446744073709551615", optarg);
            break;
        case 'n':
            if (parse_names(optarg, o) < 0)
                return pack_usage_error("split", "--names: '%s' is not two names "
                                        "A,B", optarg);
            break;
        case 'h':
            fputs(usage_text, stdout);
            return PACK_EXIT_OK;
        case ':':
            return pack_usage_error("split", "%s needs a value", argv[optind - 1]);
        default:
            return pack_usage_error("split", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return pack_usage_error("split", "DIR is required");
    if (optind + 1 < argc)
        return pack_usage_error("split", "one DIR expected, also got '%s'", argv[optind + 1]);
    if (!o->val_given)
        return pack_usage_error("split", "--val is required (a fraction such as 0.1, or a "
                                "count)");
    *dir = argv[optind];
    o->rq.names[0] = o->names[0];
    o->rq.names[1] = o->names[1];
    return -1;
}

int pack_split_main(int argc, char **argv)
{
    struct split_opts o;
    struct split_result res;
    struct rf_err err;
    const char *dir = NULL;
    int rc = parse_args(argc, argv, &o, &dir);

    if (rc >= 0)
        return rc;
    if (dataset_split(dir, &o.rq, &res, &err) < 0) {
        pack_warn("split: %s", err.msg);
        return PACK_EXIT_FAIL;
    }
    for (int i = 0; i < 2; i++)
        printf("split: %s: subset %s: %" PRIu64 " samples in %s (%" PRIu64 " bytes)\n", dir,
               o.rq.names[i], res.count[i], res.file[i], res.bytes[i]);
    if (res.replaced)
        printf("split: %s: replaced %" PRIu64 " earlier set%s of those names\n", dir,
               res.replaced, res.replaced == 1 ? "" : "s");
    return PACK_EXIT_OK;
}
