/*
 * pack.h - what the files of ringfeed-pack share: the subcommands' entry
 * points, argument helpers, progress display, and the stop flag set by
 * SIGINT/SIGTERM.
 *
 *   pack.c              main, the subcommand table, argument helpers
 *   pack_progress.c     progress bar (terminal) or progress lines (pipe)
 *   pack_idx.c          idx: IDX (MNIST-format) files -> tensor dataset
 *   idx.c               the IDX header parser (pure, fuzzed)
 *   pack_tokens.c       tokens: token files -> a token dataset
 *   megatron_idx.c      the Megatron-LM .idx reader (pure, fuzzed)
 *   pack_imagefolder.c  imagefolder: class folders of JPEGs -> jpeg dataset
 *   imagefile.c         imagefolder's work on one file: read, check,
 *                       re-encode, a verdict (on any thread)
 *   pack_jobs.c         imagefolder --jobs: per-file work on N threads,
 *                       the results taken in order
 *   jpeg_probe.c        is this buffer a JPEG whose header parses?
 *   jpeg_restart.c      imagefolder's default: re-encode one JPEG
 *                       losslessly with restart markers; the interval rule
 *   jpeg_shrink.c       imagefolder --max-side: decode, box-downscale and
 *                       re-encode one JPEG
 *   jpeg_pair.c         the libjpeg glue both re-encoders share
 *   pack_webdataset.c   webdataset: WebDataset tar shards (libarchive)
 *                       -> fields dataset
 *   wds.c               WebDataset's naming, grouping and field rules
 *                       (pure, fuzzed)
 *   pack_verify.c       verify: check every record of a dataset
 *   pack_info.c         info: what a dataset holds
 *   pack_split.c        split: a train/validation split as named index sets
 *   pack_show.c         show: one sample's fields
 *   pack_fields.c       a record's fields and an image part's check
 *                       (verify, show)
 *
 * Exit codes: 0 done; 1 failed (bad input, I/O, damaged records found);
 * 2 bad arguments; 128+N killed by signal N (the temporary folder is
 * removed first).
 */
#ifndef RINGFEED_TOOLS_PACK_H
#define RINGFEED_TOOLS_PACK_H

#include <signal.h>
#include <stdint.h>

#include "dataset.h"
#include "dataset_writer.h"
#include "schema.h"

#define PACK_EXIT_OK    0
#define PACK_EXIT_FAIL  1
#define PACK_EXIT_USAGE 2

/* Set to the signal number by SIGINT/SIGTERM/SIGHUP (see pack_signals). */
extern volatile sig_atomic_t pack_stop;

/* Installs the stop handlers, without SA_RESTART so blocked reads end. */
void pack_signals(void);

/*
 * Prints "ringfeed-pack CMD: <message>" and a hint to --help on stderr, and
 * returns PACK_EXIT_USAGE, for `return pack_usage_error(...)`.
 */
__attribute__((format(printf, 2, 3)))
int pack_usage_error(const char *cmd, const char *fmt, ...);

/*
 * Arguments of a command that takes exactly one DIR (verify, info): prints
 * usage for --help (PACK_EXIT_OK) or a usage error (PACK_EXIT_USAGE) and
 * returns that exit status; returns -1 with *dir set when the caller goes on.
 */
int pack_one_dir_arg(const char *cmd, const char *usage, int argc, char **argv,
                     const char **dir);

/* "ringfeed-pack: <message>" on stderr. */
__attribute__((format(printf, 1, 2)))
void pack_warn(const char *fmt, ...);

/*
 * Parses a byte count with an optional K, M, G suffix (powers of 1024):
 * "4096", "64K", "256M", "1G".  Returns 0, or -EINVAL.
 */
int pack_parse_size(const char *s, uint64_t *out);
/* Parses a decimal integer, optionally negative, within [min, max]. */
int pack_parse_int(const char *s, long min, long max, long *out);

/* Seconds on the monotonic clock. */
double pack_now(void);

/* Progress: a bar on a terminal, a line every 10% otherwise (stderr). */
struct progress {
    const char *what;
    uint64_t total;
    double start;
    double last_draw;
    int tty;
    int last_decile;
};

void progress_start(struct progress *p, const char *what, uint64_t total);
void progress_update(struct progress *p, uint64_t done, uint64_t bytes);
/* Clears the bar (a terminal) so the summary starts on a clean line. */
void progress_end(struct progress *p);
/* Clears whichever bar is on the terminal (pack_warn calls it first, so a
 * warning or a signal's message never lands on the bar's line). */
void progress_clear(void);

/*
 * For a packer that saw pack_stop: aborts w (removing its temporary
 * folder), says so, and returns the exit code 128 + signal.
 */
int pack_interrupted(struct dataset_writer *w);

/* Prints the end-of-pack summary on stdout. */
void pack_summary(const char *dest, const struct dataset_writer_stats *st,
                  const char *codec, double seconds);

/* The subcommands: argc/argv start at the subcommand's name. */
int pack_idx_main(int argc, char **argv);
int pack_imagefolder_main(int argc, char **argv);
int pack_webdataset_main(int argc, char **argv);
int pack_tokens_main(int argc, char **argv);
int pack_verify_main(int argc, char **argv);
int pack_info_main(int argc, char **argv);
int pack_show_main(int argc, char **argv);
int pack_split_main(int argc, char **argv);

/*
 * The parts of a record of len bytes (info->schema.n of them): kind
 * fields' by schema_record_split; a jpeg or tensor record is its first
 * field whole (the label, the second, is the entry's: an empty part).
 * Returns 0 or a negative errno with err naming the field.
 */
int pack_record_parts(const struct dataset_info *info, const uint8_t *rec, size_t len,
                      struct schema_part *parts, struct rf_err *err);

/* An image part, checked against its field. */
struct pack_image {
    int rfpx;                    /* 1: RFPX; 0: JPEG */
    uint32_t width, height, channels, value_bytes;
    const uint8_t *pixels;       /* RFPX: into the part */
    size_t pixel_bytes;          /* RFPX: width * height * channels * values */
};

/*
 * Checks the n bytes at p as field f's image: an RFPX record (pixels.h) of
 * f's channels and value size, or for an RGB field a JPEG whose header
 * parses.  Returns 0 with *out filled, or -EBADMSG with err saying why.
 */
int pack_image_part(const struct schema_field *f, const uint8_t *p, size_t n,
                    struct pack_image *out, struct rf_err *err);

#endif
