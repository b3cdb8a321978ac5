/*
 * imagefile.h - what `ringfeed-pack imagefolder` does with one file, on
 * whichever thread runs it (pack_jobs.h): read it, tell its format from
 * its first bytes, and make the record to store for it, with what the
 * summary counts of it.  A PNG, WebP, TIFF, BMP or PPM/PGM file is decoded
 * (image_decode.h) into an RFPX record of its RGB pixels (proto/pixels.h),
 * shrunk under --max-side; anything else takes the JPEG path: checked to
 * be a JPEG whose header parses, then re-encoded losslessly with restart
 * markers, shrunk under --max-side, or stored as it is.  The rules for
 * each case are in pack_imagefolder.c's header comment.
 *
 * Nothing here prints or touches the dataset: imagefile_run leaves a
 * verdict and its reasons in a struct imagefile, which the packer's main
 * thread turns into warnings, a record and counts, in scan order.  So the
 * same file gives the same verdict, bytes and counts whichever thread ran
 * it and whenever.
 */
#ifndef RINGFEED_TOOLS_IMAGEFILE_H
#define RINGFEED_TOOLS_IMAGEFILE_H

#include <stddef.h>
#include <stdint.h>

#include "image_decode.h"
#include "jpeg_restart.h"
#include "jpeg_shrink.h"

#define IMAGEFILE_QUALITY_DEFAULT 90  /* --quality: FFCV's default for its JPEGs */
#define IMAGEFILE_SMART_PIXELS_DEFAULT 65536u  /* --smart-pixels: raw up to 256 x 256 */
#define IMAGEFILE_WHY_MAX 512     /* a reason, with libjpeg's message in it */
/* Buffers larger than this are freed once their file is written, so the
 * slots of a window do not all keep the largest file they ever held. */
#define IMAGEFILE_KEEP_MAX (8u << 20)

/* --image-mode: what a PNG, WebP, TIFF, BMP or PPM/PGM file becomes. */
enum imagefile_mode {
    IMAGEFILE_RAW,                /* its RGB pixels, exact (RFPX) */
    IMAGEFILE_JPEG,               /* a JPEG of them at --quality (lossy) */
    IMAGEFILE_SMART,              /* RFPX up to smart_pixels pixels, else JPEG */
};

struct imagefile_opts {
    uint32_t max_side;            /* --max-side; 0: no image shrunk */
    int quality;                  /* --quality: --max-side's re-encodings
                                     and --image-mode jpeg/smart's */
    int as_is;                    /* --as-is: JPEGs stored byte for byte */
    enum imagefile_mode mode;     /* --image-mode */
    uint64_t smart_pixels;        /* --smart-pixels, for IMAGEFILE_SMART */
};

/* One thread's re-encoders (each is used by one thread at a time): a
 * restarter unless as_is, a shrinker with max_side or an --image-mode
 * that encodes JPEGs; NULL otherwise. */
struct imagefile_coders {
    struct restarter *rs;
    struct shrinker *sh;
};

/* Creates what o needs in c.  Returns 0 or -ENOMEM; imagefile_coders_fini
 * c whatever the result. */
int imagefile_coders_init(struct imagefile_coders *c,
                          const struct imagefile_opts *o);
void imagefile_coders_fini(struct imagefile_coders *c);

/* What the re-encodings did, for the summary: one file's share, or a sum. */
struct imagefile_tally {
    /* --max-side */
    uint64_t shrunk;              /* larger images stored shrunk */
    uint64_t shrink_bad;          /* larger, did not decode: stored as is */
    uint64_t shrunk_src;          /* the shrunk ones' sources ... */
    uint64_t shrunk_out;          /* ... and what was stored for them */
    double shrink_cpu;            /* CPU seconds in shrinker_run */
    /* the lossless re-encoding */
    uint64_t outcomes[RESTART_OUTCOME_COUNT];  /* by restart_run's outcome:
                                                  re-encoded, or why not */
    uint64_t no_memory;           /* out of memory: stored as they are */
    uint64_t interval[RESTART_SEGMENT_MAX + 1];  /* re-encoded, by interval */
    uint64_t lossless_src, lossless_out;
    double restart_cpu;           /* CPU seconds in restart_run */
    /* the other formats, stored as RFPX records */
    uint64_t raw[IMGDEC_FORMAT_COUNT];  /* by source format */
    uint64_t raw_shrunk;          /* of those, shrunk by --max-side */
    uint64_t encoded[IMGDEC_FORMAT_COUNT];  /* the other formats stored as
                                               JPEGs (--image-mode jpeg or
                                               smart), by source format */
    uint64_t encoded_src, encoded_out;  /* their files' bytes, and the JPEGs' */
    double raw_cpu;               /* CPU seconds decoding and shrinking */
    /* everything */
    double cpu;                   /* CPU seconds in imagefile_run: read,
                                     check, re-encode, copy */
};

void imagefile_tally_add(struct imagefile_tally *sum,
                         const struct imagefile_tally *t);

enum imagefile_verdict {
    IMAGEFILE_STORE,              /* store rec (warn first if note.why) */
    IMAGEFILE_SKIP,               /* why: not a readable JPEG, another
                                     format that does not decode or is
                                     refused, or too large to decode
                                     (--strict: the pack fails) */
    IMAGEFILE_FAIL,               /* why: the pack must fail (the encoder
                                     failed on a decoded image) */
};

/* A file stored as it is that is warned about: why, and what follows. */
struct imagefile_note {
    const char *why;              /* NULL: nothing to warn about */
    const char *then;
    int strict_stops;             /* --strict fails the pack on it */
};

/*
 * One file's verdict, and the buffers behind it.  Zero it before the
 * first run; it keeps its buffers for the next file (imagefile_trim).
 * Every pointer in it points into itself or at static strings.
 */
struct imagefile {
    uint8_t *src;                 /* the file's bytes */
    size_t src_cap;
    uint8_t *out;                 /* its re-encoding, copied from the coder */
    size_t out_cap;
    enum imagefile_verdict verdict;
    const uint8_t *rec;           /* STORE: src or out ... */
    size_t rec_len;               /* ... and its length */
    size_t src_len;               /* STORE: the file's length */
    enum imgdec_format format;    /* STORE: the format decoded into rec
                                     (IMGDEC_NONE for a JPEG file, and for
                                     imagefile_run_rgb's pixels) */
    int raw;                      /* STORE: rec is an RFPX record (zstd is
                                     its codec), else a JPEG (codec none) */
    uint32_t width, height;       /* STORE: the record's image size (as its
                                     header says, for a JPEG); 0: unknown */
    const char *why;              /* SKIP, FAIL: the reason */
    struct imagefile_note note;   /* STORE */
    struct imagefile_tally tally; /* this file's share of the counts */
    char why_buf[IMAGEFILE_WHY_MAX];
};

/*
 * Reads the file at path and sets f's verdict (above), using c's coders
 * as o says.  Out of memory is a verdict too (SKIP for the file's bytes;
 * for a re-encoding, STORE as it is with a note), never a crash.  Safe to
 * run on several threads at once with different f and c.
 */
void imagefile_run(struct imagefile *f, const char *path,
                   const struct imagefile_opts *o,
                   struct imagefile_coders *c);

/*
 * As imagefile_run for a file's len bytes at buf, already in memory (they
 * are copied into f): the JPEG path or a decoded format told from the
 * bytes, exactly as for a file holding them.  (ringfeed.Writer's encoded
 * images: python/ext/writer.c.)
 */
void imagefile_run_bytes(struct imagefile *f, const void *buf, size_t len,
                         const struct imagefile_opts *o,
                         struct imagefile_coders *c);

/*
 * As imagefile_run for an image already decoded: w x h RGB pixels (rows of
 * w * 3 bytes at rgb, top to bottom), taken as a decoded PNG's would be
 * (shrunk under max_side, then an RFPX record, or a JPEG under --image-mode
 * jpeg or smart).  The tally's per-format counts are left alone (there is
 * no file format); f->src_len is the pixels' bytes.  (ringfeed.Writer's
 * PIL images and arrays.)
 */
void imagefile_run_rgb(struct imagefile *f, const uint8_t *rgb, uint32_t w,
                       uint32_t h, const struct imagefile_opts *o,
                       struct imagefile_coders *c);

/* Once f's verdict is used: frees its buffers over IMAGEFILE_KEEP_MAX. */
void imagefile_trim(struct imagefile *f);

/* Frees f's buffers.  Accepts a zeroed struct. */
void imagefile_fini(struct imagefile *f);

#endif
