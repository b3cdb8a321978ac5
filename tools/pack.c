/*
 * pack.c - ringfeed-pack: makes, checks and describes packed datasets.
 *
 *   ringfeed-pack idx --images FILE --labels FILE OUT_DIR [options]
 *   ringfeed-pack imagefolder SRC_DIR OUT_DIR [options]
 *   ringfeed-pack webdataset [options] TAR... OUT_DIR
 *   ringfeed-pack tokens --format bin|npy|megatron [options] INPUT... OUT_DIR
 *   ringfeed-pack verify DIR
 *   ringfeed-pack info DIR
 *   ringfeed-pack show DIR INDEX [--json]
 *   ringfeed-pack split DIR --val F|N [--stratify] [--seed S] [--names A,B] [--force]
 *
 * This file holds main, the subcommand table and the helpers the
 * subcommands share (pack.h); each subcommand lives in its own file.
 */
#include "clock.h"
#include "pack.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

volatile sig_atomic_t pack_stop;

static const struct subcmd {
    const char *name;
    int (*main)(int argc, char **argv);
    const char *summary;
} subcmds[] = {
    {"idx", pack_idx_main, "pack IDX (MNIST-format) image and label files"},
    {"imagefolder", pack_imagefolder_main,
     "pack class folders of JPEGs (torchvision's ImageFolder layout)"},
    {"webdataset", pack_webdataset_main, "pack WebDataset tar shards, each extension a field"},
    {"tokens", pack_tokens_main,
     "pack token files (nanoGPT .bin, .npy, Megatron .bin/.idx) for language models"},
    {"verify", pack_verify_main, "check every record of a dataset"},
    {"info", pack_info_main, "describe a dataset"},
    {"show", pack_show_main, "print one sample's fields"},
    {"split", pack_split_main, "record a train/validation split as named index sets"},
};

#define NSUBCMDS (sizeof(subcmds) / sizeof(subcmds[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: ringfeed-pack COMMAND [ARGS...]\n\n"
               "Packs datasets into ringfeed's shard format, checks and "
               "describes them.\n\ncommands:\n");
    for (size_t i = 0; i < NSUBCMDS; i++)
        fprintf(f, "  %-12s %s\n", subcmds[i].name, subcmds[i].summary);
    fprintf(f, "\n'ringfeed-pack COMMAND --help' describes a command.\n");
}

static void on_signal(int sig)
{
    pack_stop = sig;
}

void pack_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocked read returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int pack_one_dir_arg(const char *cmd, const char *usage, int argc, char **argv,
                     const char **dir)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage, stdout);
        return PACK_EXIT_OK;
    }
    if (argc < 2)
        return pack_usage_error(cmd, "DIR is required");
    if (argv[1][0] == '-')
        return pack_usage_error(cmd, "unknown option '%s'", argv[1]);
    if (argc > 2)
        return pack_usage_error(cmd, "one DIR expected, also got '%s'", argv[2]);
    *dir = argv[1];
    return -1;
}

int pack_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "ringfeed-pack %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see 'ringfeed-pack %s --help')\n", cmd);
    return PACK_EXIT_USAGE;
}

void pack_warn(const char *fmt, ...)
{
    va_list ap;

    progress_clear();
    fprintf(stderr, "ringfeed-pack: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int pack_parse_size(const char *s, uint64_t *out)
{
    static const struct {
        char suffix;
        unsigned shift;
    } units[] = {{'K', 10}, {'M', 20}, {'G', 30}, {'T', 40}};
    uint64_t v = 0;
    size_t i = 0;
    unsigned shift = 0;

    if (!s[0])
        return -EINVAL;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        unsigned d = (unsigned)(s[i] - '0');

        if (v > (UINT64_MAX - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    if (i == 0)
        return -EINVAL;
    if (s[i]) {
        size_t k;

        for (k = 0; k < sizeof(units) / sizeof(units[0]); k++)
            if ((s[i] & ~0x20) == units[k].suffix)
                break;
        if (k == sizeof(units) / sizeof(units[0]))
            return -EINVAL;
        shift = units[k].shift;
        i++;
        if (s[i] == 'i' && s[i + 1] == 'B')
            i += 2;
        else if (s[i] == 'B')
            i++;
        if (s[i])
            return -EINVAL;
    }
    if (shift && v > UINT64_MAX >> shift)
        return -EINVAL;
    *out = v << shift;
    return 0;
}

int pack_parse_int(const char *s, long min, long max, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (!s[0] || *end || errno || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

double pack_now(void)
{
    return (double)clock_mono_ns() * 1e-9;
}

int pack_interrupted(struct dataset_writer *w)
{
    int sig = pack_stop ? (int)pack_stop : SIGINT;

    if (w)
        pack_warn("interrupted by signal %d (%s): removing %s", sig,
                  strsignal(sig), dataset_writer_tmpdir(w));
    else
        pack_warn("interrupted by signal %d (%s)", sig, strsignal(sig));
    dataset_writer_abort(w);
    return 128 + sig;
}

void pack_summary(const char *dest, const struct dataset_writer_stats *st,
                  const char *codec, double seconds)
{
    printf("packed %llu records into %s (%u shard%s, codec %s)\n",
           (unsigned long long)st->records, dest, st->shards,
           st->shards == 1 ? "" : "s", codec);
    printf("  decoded  %llu bytes\n", (unsigned long long)st->decoded_bytes);
    printf("  stored   %llu bytes (ratio %.2f)\n",
           (unsigned long long)st->stored_bytes,
           st->stored_bytes ? (double)st->decoded_bytes /
                              (double)st->stored_bytes : 0.0);
    printf("  on disk  %llu bytes (with headers, indexes, manifest%s)\n",
           (unsigned long long)st->file_bytes,
           st->dict_size ? ", dictionary" : "");
    if (st->dict_size)
        printf("  dict     %u bytes\n", st->dict_size);
    printf("  time     %.2f s (%.0f records/s)\n", seconds,
           seconds > 0 ? (double)st->records / seconds : 0.0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return PACK_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return PACK_EXIT_OK;
    }
    for (size_t i = 0; i < NSUBCMDS; i++)
        if (strcmp(argv[1], subcmds[i].name) == 0)
            return subcmds[i].main(argc - 1, argv + 1);
    fprintf(stderr, "ringfeed-pack: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return PACK_EXIT_USAGE;
}
