/*
 * ctl.h - the control protocol: ringfeedd's Unix-socket line protocol,
 * parsed and formatted by pure functions over buffers (no I/O, no heap).
 *
 * THE PROTOCOL
 *
 * A client writes one request per line; the daemon answers every line that
 * is not blank with one reply, in order, so requests may be pipelined:
 *
 *     request   = verb *( blank arg ) [CR] LF       blank = 1*( SP / TAB )
 *     reply     = ok / multi / err
 *     ok        = "OK" [ SP text ] LF               text never starts with a digit
 *     multi     = "OK" SP count [ SP text ] LF count*( line LF )
 *     err       = "ERR" SP name SP message LF       name from errcodes.h
 *
 *   - A line, its CR and LF included, is at most CTL_LINE_MAX (4096) bytes.
 *     A longer request is answered "ERR too-long", its bytes up to and
 *     including the next LF are discarded, and the connection goes on.
 *   - Requests are UTF-8 text: a NUL byte, any other control character but
 *     TAB (a CR only directly before the LF), DEL, a C1 control or a byte
 *     sequence that is not UTF-8 gets "ERR bad-line".
 *   - Blank lines (nothing but blanks) are consumed and get no reply.
 *   - Verbs are case-insensitive; ATTACH keys and word values too.
 *   - An unknown verb gets "ERR bad-verb", a bad argument "ERR bad-arg"
 *     naming the verb, the argument and what it accepts.
 *   - A multi-line reply's header says how many lines follow (at most
 *     CTL_REPLY_LINES_MAX, CTL_REPLY_MAX bytes in all); "OK 0" has none.
 *     Single-line OK text never starts with a digit, so the two never mix.
 *   - ATTACH's OK reply also carries file descriptors (SCM_RIGHTS); that is
 *     the server's and the client library's business, not this file's.
 *
 * Verbs (the table in ctl.c is the source of truth; ctl_check_tables()
 * checks it at start-up):
 *
 *     PING                          OK pong
 *     STATUS                        one line of key=value
 *     STATS                         multi-line
 *     METRICS                       multi-line, Prometheus text format
 *     WORKERS <n>|auto              1 <= n <= CTL_WORKERS_MAX: that many
 *                                   workers, the controller off; auto
 *                                   (any case): the daemon sizes the pool
 *                                   under its CPU budget (daemon/autoscale.c)
 *     DATASETS                      multi-line, one dataset a line
 *     CLASSES <dataset>             multi-line: its class names, class i
 *                                   on line i ("OK 0": none)
 *     SOURCES <dataset> <start> <count>   multi-line: the source list's
 *                                   lines start.. (proto/sources.h, still
 *                                   escaped), 1 <= count <=
 *                                   CTL_SOURCES_MAX; fewer when the dataset
 *                                   ends or the reply would pass
 *                                   CTL_REPLY_MAX (ask again from there);
 *                                   "ERR no-dataset" for a dataset without
 *                                   a source list, "ERR bad-arg" for a start
 *                                   past its samples
 *     OPEN <folder>                 OK dataset=NAME: the catalogue name under
 *                                   which this daemon serves the packed
 *                                   dataset in that folder (then ATTACH
 *                                   dataset=NAME, CLASSES NAME, ...).  The
 *                                   folder is absolute, escaped as a source
 *                                   line is (sources.h: \\ and \xHH) with
 *                                   every blank escaped too, so it is one
 *                                   argument.  A user daemon (ringfeedd
 *                                   --user) opens it on demand; the system
 *                                   daemon answers only for a folder its
 *                                   config names, else "ERR catalogue-only"
 *                                   saying how to serve it (ctl_format_open
 *                                   writes the line)
 *     SUBSETS <dataset>             multi-line: the named index sets its
 *                                   pack has now (ringfeed-pack split), one
 *                                   "NAME COUNT" a line, and a last line
 *                                   "* SAMPLES", the whole dataset's size
 *                                   (a name never starts with '*')
 *     ATTACH dataset=NAME [key=value ...]   see struct ctl_attach
 *
 * ATTACH keys, their defaults and ranges (ctl_attach.c's table):
 *
 *     dataset=NAME      required; 1..64 of [A-Za-z0-9._-]
 *     batch=N           1..65536, default 256
 *     rank=R            0..65535, default 0; rank < world
 *     world=W           1..65536, default 1
 *     seed=S            u64, default 0
 *     epoch=E           u32 start epoch, default 0
 *     seq=N             u64 start sequence within the epoch, default 0; a
 *                       seq past the epoch's end starts in a later epoch
 *                       (epoch + seq / B, batch seq % B, B the rank's
 *                       batches per epoch), and the ring's header says so;
 *                       a start past epoch 4294967295 is refused
 *     transform=T       raw|train|eval|none|tokens, default raw
 *     depth=D           ring slots, 2..64; default: the daemon picks 4..16 by
 *                       slot size (a ring within 16 MiB)
 *     size=S            output side of JPEG transforms, 8..4096, default 224
 *     layout=L          chw|hwc, default chw
 *     scale=LO,HI       0 < LO <= HI <= 1, default 0.08,1
 *     ratio=LO,HI       0 < LO <= HI <= 100, default 0.75,1.3333333
 *     flip=P            0 <= P <= 1, default 0.5
 *     crop=F            eval's center-crop fraction, 0 < F <= 1, default 0.875
 *     context=L         tokens' window: L+1 tokens a sample, at a stride of
 *                       L, 1..65536; required by tokens, refused by the
 *                       others (docs/design/tokens.md)
 *     doc_ids=0|1       tokens: 1 adds the field doc_ids, each token's
 *                       document relative to the window's first; default 0
 *     shuffle=0|1|block default 1: 0 the dataset's order, 1 a shuffle of the
 *                       whole, block a shuffle of blocks of consecutive
 *                       samples and within each block (proto/sampler.h)
 *     block=N           shuffle=block's samples per block, 1..2^62; refused
 *                       with another shuffle; not given = 0: the daemon's
 *                       default, 4 shards' worth (sampler_block_default)
 *     drop_last=0|1     default 0; 1 drops the tail that does not split
 *                       evenly over the ranks (DistributedSampler's
 *                       drop_last) instead of padding by wrapping
 *     drop_last_batch=0|1  default 0; 1 drops each rank's final partial
 *                       batch (DataLoader's drop_last), so every batch is full
 *     version=N         ring layout version the client speaks, 1..2^32-1;
 *                       not given = 0, which the daemon reads as its own
 *                       current version (the daemon checks, not the parser)
 *     name=TEXT         client label for stats, 1..64 of [A-Za-z0-9._:@/+-]
 *     weight=W          the client's share of the workers while others wait,
 *                       1..1000 (a client of weight 3 gets three times the
 *                       worker time of one of weight 1); not given = 0: the
 *                       config's weight for the client's name or uid, else 1.
 *                       The daemon lowers it to what its config allows the
 *                       client (conf.h max-weight, weight rules' /MAX)
 *     subset=NAME|START:STOP  the samples the stream draws from: a set the
 *                       pack names (ringfeed-pack split; 1..32 of
 *                       [A-Za-z0-9_-], first a letter), or the dataset
 *                       indices START..STOP-1 (half-open, as a Python
 *                       slice; START left out is 0, STOP left out the
 *                       dataset's end; START < STOP <= samples, checked by
 *                       the daemon).  Not given: the whole dataset.  The
 *                       sampler shuffles and shards positions 0..n-1 of
 *                       the subset (daemon/stream.c, proto/subset.h); the
 *                       indices delivered are the dataset's
 *     augment=SPEC|@RECIPE  augmentation ops run on each sample after its
 *                       transform, in order (proto/aug_spec.h: the grammar
 *                       and the table of ops, e.g.
 *                       RandomCrop:size=32:padding=4,RandomHorizontalFlip),
 *                       or a recipe the daemon's config names
 *                       (recipe.NAME, ringfeedd.conf(5)); the parser
 *                       checks a spec whole, the daemon that the stream's
 *                       samples are uint8 images and that every op is in
 *                       its build.  Not given: none
 *     share=0|1         default 1: a client whose stream is the same as
 *                       another's (dataset, subset, seed, transform and its
 *                       parameters, augment, batch, rank, world, shuffle and its
 *                       block, drop_last, drop_last_batch) at the same point shares its
 *                       producer (each batch decoded once, written into
 *                       both rings); 0 always decodes its own
 *
 * The defaults are part of the protocol and never change: a client may
 * leave out any key whose default it wants, and ctl_format_attach() does
 * unless the key was given.  A transform parameter (size layout scale
 * ratio flip crop context doc_ids) that the request names and its transform does not use
 * (flip= with raw, crop= with train) is refused by the daemon, whatever
 * its value (daemon/worker/transform.c's table says which uses which).
 * Unknown keys, keys given twice, malformed numbers (trailing junk,
 * overflow, a sign on an unsigned number, hex, inf, nan) and values out of
 * range are "ERR bad-arg".  Numbers are plain decimal and are read and
 * written the same in every locale (strnum.h).
 *
 * PARSER CONTRACT
 *
 * ctl_parse() and ctl_parse_reply() look only at buf[0..len), keep offsets
 * into it rather than pointers, write nothing outside the struct they are
 * given, and answer:
 *     CTL_DONE       one request (reply) was consumed: *consumed bytes;
 *     CTL_NEED_MORE  it is incomplete and may still complete: read more and
 *                    call again with the longer buffer (*consumed = 0);
 *     CTL_TOO_LONG   (requests) no LF in the first CTL_LINE_MAX bytes:
 *                    reply with the error in req, then drop input through
 *                    the next LF with ctl_skip_line() (*consumed = 0);
 *     CTL_BAD        (replies) the daemon broke the protocol; close.
 * Feeding a buffer whole or byte by byte gives the same results.
 */
#ifndef RINGFEED_PROTO_CTL_H
#define RINGFEED_PROTO_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "errcodes.h"

#define CTL_LINE_MAX 4096         /* a line, CR and LF included */
#define CTL_ARGS_MAX 32           /* arguments after the verb */
#define CTL_MSG_MAX 512           /* a parsed request's error message, NUL included */
#define CTL_ERR_MSG_MAX 1024      /* an ERR reply's message is cut to this many bytes */
#define CTL_REPLY_LINES_MAX 32768 /* lines after a multi-line reply's header */
#define CTL_REPLY_MAX (1u << 20)  /* bytes in one reply, header included */

#define CTL_WORKERS_MIN 1
#define CTL_WORKERS_MAX 256
#define CTL_DATASET_NAME_MAX 64   /* bytes of [A-Za-z0-9._-] */
#define CTL_LABEL_MAX 64          /* bytes of [A-Za-z0-9._:@/+-] */
#define CTL_ATTACH_KEYS 32        /* rows in the ATTACH key table */
#define CTL_MIX_MAX 1200          /* ATTACH mix=: bytes of its value (16 sources) */
#define CTL_AUGMENT_MAX 1024      /* ATTACH augment=: bytes of its value (AUG_SPEC_MAX) */
#define CTL_SUBSET_NAME_MAX 32    /* ATTACH subset=: a set's name (proto/subset.h) */
#define CTL_FIELD_MAX 31          /* ATTACH field=: a schema field name (schema.h) */
#define CTL_ATTACH_BATCH_MAX 65536
#define CTL_ATTACH_WORLD_MAX 65536
#define CTL_ATTACH_DEPTH_MIN 2
#define CTL_ATTACH_DEPTH_MAX 64
#define CTL_ATTACH_WEIGHT_MAX 1000
#define CTL_SOURCES_MAX 4096      /* SOURCES' count: lines in one reply */
#define CTL_PATH_MAX 4095         /* OPEN's folder, decoded (PATH_MAX less its NUL) */

enum ctl_status {
    CTL_DONE,
    CTL_NEED_MORE,
    CTL_TOO_LONG,
    CTL_BAD,
};

/* Adding a verb: a value here (before CTL_VERB_COUNT), a row in ctl.c's
 * table, and the daemon's handler.  Values are not sent on the wire. */
enum ctl_verb {
    CTL_VERB_NONE = 0, /* a blank line, or a line whose verb is unknown */
    CTL_VERB_PING,
    CTL_VERB_STATUS,
    CTL_VERB_STATS,
    CTL_VERB_METRICS,
    CTL_VERB_WORKERS,
    CTL_VERB_DATASETS,
    CTL_VERB_ATTACH,
    CTL_VERB_CLASSES,
    CTL_VERB_SOURCES,
    CTL_VERB_OPEN,
    CTL_VERB_SUBSETS,
    CTL_VERB_RELOAD,
    CTL_VERB_COUNT
};

struct ctl_req;

struct ctl_verb_def {
    const char *name;       /* upper case; matched case-insensitively */
    uint8_t min_args, max_args;
    const char *usage;      /* "WORKERS <n>" */
    const char *help;       /* one line, for ringfeedctl --help */
    /* checks the arguments and fills req; NULL when there are none to check.
     * Returns 0, or sets req->err and req->msg and returns -EINVAL. */
    int (*parse)(const char *line, struct ctl_req *req);
};

/* The table row of verb; NULL for CTL_VERB_NONE or a value out of range. */
const struct ctl_verb_def *ctl_verb_def(enum ctl_verb verb);

/* The verb named by s[0..len), any case; CTL_VERB_NONE when none is. */
enum ctl_verb ctl_verb_from_name(const char *s, size_t len);

enum ctl_transform {
    CTL_TRANSFORM_RAW,   /* samples as stored (decoded, not augmented) */
    CTL_TRANSFORM_TRAIN, /* random resized crop, flip */
    CTL_TRANSFORM_EVAL,  /* resize, center crop */
    CTL_TRANSFORM_NONE,  /* images of one size as they are (image_shape) */
    CTL_TRANSFORM_TOKENS, /* windows of context + 1 tokens of a token dataset */
    CTL_TRANSFORM_COUNT
};

enum ctl_layout {
    CTL_LAYOUT_CHW,
    CTL_LAYOUT_HWC,
    CTL_LAYOUT_COUNT
};

/* "raw"/"train"/"eval"/"none"/"tokens", "chw"/"hwc"; NULL out of range.  These
 * are ATTACH's words; the daemon's workers hold the transforms by the same
 * names (daemon/worker/transform.c), checked against these at start-up. */
const char *ctl_transform_name(uint32_t t);
const char *ctl_layout_name(uint32_t l);
/* ATTACH's shuffle= word of enum sampler_shuffle value s: "0", "1",
 * "block"; NULL out of range. */
const char *ctl_shuffle_name(uint32_t s);

/* ATTACH subset=: a named set, a range, or neither (the whole dataset). */
struct ctl_subset {
    char name[CTL_SUBSET_NAME_MAX + 1];     /* "" unless a named set */
    bool range;                             /* START:STOP given */
    uint64_t start;                         /* range: first index */
    uint64_t stop;                          /* range: one past the last;
                                               UINT64_MAX: the dataset's end */
};

/* What a client asks for when it attaches; see the file-top table. */
struct ctl_attach {
    char dataset[CTL_DATASET_NAME_MAX + 1]; /* NUL-terminated */
    char name[CTL_LABEL_MAX + 1];           /* "" when not given */
    uint32_t batch;
    uint32_t rank;
    uint32_t world;
    uint64_t seed;
    uint32_t epoch;
    uint64_t seq;
    uint32_t transform;                     /* enum ctl_transform */
    uint32_t depth;
    uint32_t size;
    uint32_t layout;                        /* enum ctl_layout */
    double scale[2];                        /* LO, HI */
    double ratio[2];                        /* LO, HI */
    double flip;
    double crop;
    uint32_t context;                       /* tokens' window stride; 0 when not
                                               given */
    bool doc_ids;                           /* tokens: the doc_ids field */
    uint32_t shuffle;                       /* enum sampler_shuffle: 0, 1, block */
    uint64_t block;                         /* shuffle=block's block size; 0 when
                                               not given (the daemon's default) */
    bool drop_last;
    bool drop_last_batch;
    uint32_t version;                       /* 0 when not given */
    uint32_t weight;                        /* 0 when not given */
    bool share;
    char field[CTL_FIELD_MAX + 1];          /* the image field the transform is
                                               bound to; "" when not given (the
                                               daemon picks: stream.c) */
    struct ctl_subset subset;               /* the samples drawn from */
    char augment[CTL_AUGMENT_MAX + 1];      /* an augmentation spec (aug_spec.h)
                                               or "@RECIPE"; "" when not given */
    char mix[CTL_MIX_MAX + 1];              /* a mixture, NAME:WEIGHT,... (mix.h),
                                               instead of dataset=; "" when not given */
    bool repeat;                            /* a mixture's sources repeat (mix.h);
                                               default 1 */
    char epoch_of[CTL_DATASET_NAME_MAX + 1]; /* the source whose epoch is the
                                               mixture's; "" when not given */
    bool per_stream;                        /* each batch of a mixture from one source */
    uint32_t given;                         /* the keys the request named, one bit
                                               per key (ctl_attach_given): the
                                               daemon refuses a transform
                                               parameter the transform does not
                                               use, whatever its value */
};

/* A token of the request line: buf[off .. off + len). */
struct ctl_span {
    uint16_t off;
    uint16_t len;
};

/*
 * One parsed request line.  When err is CTL_E_NONE and verb is not
 * CTL_VERB_NONE the request is valid and the fields of its verb are set
 * (workers or workers_auto for WORKERS, attach for ATTACH, dataset for
 * CLASSES, dataset, start and count for SOURCES).  When err is set, the reply is
 * "ERR <ctl_errcode_name(err)> <msg>"; verb is still the verb the line
 * named, if any, for logs and counters.  Both NONE: a blank line, no reply.
 * args[] are offsets into the caller's buffer, valid while it holds the
 * line; everything else is a copy.
 */
struct ctl_req {
    enum ctl_verb verb;
    enum ctl_errcode err;
    char msg[CTL_MSG_MAX];
    unsigned nargs;
    struct ctl_span args[CTL_ARGS_MAX];
    uint32_t workers;          /* WORKERS n; 0 with workers_auto */
    bool workers_auto;         /* WORKERS auto */
    struct ctl_attach attach;
    char dataset[CTL_DATASET_NAME_MAX + 1]; /* CLASSES, SOURCES, SUBSETS */
    char path[CTL_PATH_MAX + 1];            /* OPEN: absolute, decoded, no NUL inside */
    uint64_t start;            /* SOURCES' first line */
    uint32_t count;            /* SOURCES' lines, 1..CTL_SOURCES_MAX */
};

/*
 * Parses the first line of buf[0..len).  See PARSER CONTRACT above; req is
 * reset on every call.  CTL_DONE: *consumed is the line's length with its
 * LF, and req holds a request, an error or a blank line.  CTL_NEED_MORE
 * (no LF and len < CTL_LINE_MAX) and CTL_TOO_LONG (no LF in the first
 * CTL_LINE_MAX bytes; req holds the too-long error): *consumed = 0.
 */
enum ctl_status ctl_parse(const char *buf, size_t len, struct ctl_req *req,
                          size_t *consumed);

/* True for a blank line: consumed, no reply. */
static inline bool ctl_req_is_blank(const struct ctl_req *req)
{
    return req->verb == CTL_VERB_NONE && req->err == CTL_E_NONE;
}

/*
 * After CTL_TOO_LONG: sets *consumed to the bytes of buf[0..len) up to and
 * including the first LF and returns true, or, with no LF, to len (drop it
 * all and keep skipping in the next read) and returns false.
 */
bool ctl_skip_line(const char *buf, size_t len, size_t *consumed);

/*
 * Checks the line rules on s[0..len) (no LF, no trailing CR): returns len
 * when every byte is allowed, else the offset of the first bad one.
 */
size_t ctl_text_check(const char *s, size_t len);

/*
 * Writes "OPEN <folder escaped>\n" for the n bytes of path into buf (cap
 * bytes, NUL-terminated).  Returns its length, -EINVAL for a path that is
 * not absolute or holds a NUL, -ENAMETOOLONG over CTL_PATH_MAX bytes or a
 * line over CTL_LINE_MAX escaped.
 */
int ctl_format_open(const char *path, size_t n, char *buf, size_t cap);

/* True when s[0..len) is a dataset name: 1..64 bytes of [A-Za-z0-9._-]. */
bool ctl_dataset_name_ok(const char *s, size_t len);
/* A client label (ATTACH name=): 1..CTL_LABEL_MAX of [A-Za-z0-9._:@/+-]. */
bool ctl_label_ok(const char *s, size_t len);
/* A field name (ATTACH field=): 1..CTL_FIELD_MAX of [A-Za-z0-9_], not
 * starting with a digit (the rule of proto/schema.h). */
bool ctl_field_name_ok(const char *s, size_t len);

/* subset='s value as ATTACH writes it ("val", "100:200", ":200",
 * "100:"; "" for the whole dataset), NUL-terminated in buf (cap >= 48
 * always fits).  ctl_subset_same: do a and b ask for the same samples of a
 * dataset (the same name, or the same bounds as written)? */
void ctl_subset_format(const struct ctl_subset *s, char *buf, size_t cap);
bool ctl_subset_same(const struct ctl_subset *a, const struct ctl_subset *b);

/* Fills a with every default; dataset is "" (the caller must set it). */
void ctl_attach_defaults(struct ctl_attach *a);

/*
 * Checks every field of a against its range and rank < world.  Returns 0,
 * or -EINVAL with the key and the accepted range in err.
 */
int ctl_attach_check(const struct ctl_attach *a, struct rf_err *err);

/* Whether the request named key (ctl_attach_parse sets a->given; a client
 * marks what its user gave with ctl_attach_give).  ctl_attach_give returns
 * 0, or -ENOENT for a name that is not an ATTACH key. */
bool ctl_attach_given(const struct ctl_attach *a, const char *key);
int ctl_attach_give(struct ctl_attach *a, const char *key);

/*
 * Writes "ATTACH dataset=NAME[ key=value ...]\n" with every field that
 * differs from its default (version when not 0, name when not "") or that
 * a->given names (a user's flip=0.5 is sent, not dropped), in a
 * form ctl_parse() reads back as exactly a, NUL-terminated.  Returns the
 * length, -EINVAL when ctl_attach_check() refuses a (message in err),
 * -ERANGE for a denormal float, or -ENOSPC when cap is too small
 * (CTL_LINE_MAX always fits).
 */
int ctl_format_attach(const struct ctl_attach *a, char *buf, size_t cap,
                      struct rf_err *err);

/*
 * The start-up check of the verb table, the ATTACH key table (and that the
 * defaults pass ctl_attach_check) and the error-code table.  Returns 0, or
 * -EINVAL with the first problem in err.
 */
int ctl_check_tables(struct rf_err *err);

/*
 * REPLIES (server side).  Each writes one complete line with its LF into
 * buf, NUL-terminated, and returns its length without the NUL, or -ENOSPC
 * when it does not fit in cap.  Text is formatted printf-style and
 * sanitized to one line: control characters become spaces, bytes that are
 * not UTF-8 become '?'.
 *
 * ctl_reply_ok:    "OK\n" (fmt NULL or empty text) or "OK <text>\n".
 *                  -EINVAL when the text starts with a digit (it would read
 *                  as a multi-line header), -EMSGSIZE over CTL_LINE_MAX.
 * ctl_reply_err:   "ERR <name> <message>\n"; fmt NULL or empty text uses
 *                  the code's default message; the message is cut to
 *                  CTL_ERR_MSG_MAX bytes (ending "...").  -EINVAL for a
 *                  code not in the table.
 * ctl_reply_multi: "OK <nlines>\n" or "OK <nlines> <text>\n", the header
 *                  of a reply whose nlines lines follow, each written with
 *                  ctl_reply_line.  -EINVAL over CTL_REPLY_LINES_MAX,
 *                  -EMSGSIZE over CTL_LINE_MAX.  The server keeps the whole
 *                  reply within CTL_REPLY_MAX bytes.
 * ctl_reply_line:  "<text>\n"; -EMSGSIZE over CTL_LINE_MAX.
 */
__attribute__((format(printf, 3, 4)))
int ctl_reply_ok(char *buf, size_t cap, const char *fmt, ...);
__attribute__((format(printf, 4, 5)))
int ctl_reply_err(char *buf, size_t cap, enum ctl_errcode code, const char *fmt, ...);
__attribute__((format(printf, 4, 5)))
int ctl_reply_multi(char *buf, size_t cap, unsigned nlines, const char *fmt, ...);
__attribute__((format(printf, 3, 4)))
int ctl_reply_line(char *buf, size_t cap, const char *fmt, ...);

/*
 * One parsed reply (client side); offsets are into the buffer given to
 * ctl_parse_reply.
 */
struct ctl_reply {
    bool ok;
    enum ctl_errcode code;  /* ERR: CTL_E_NONE for a name this build lacks */
    int err;                /* ERR: ctl_errcode_errno(code); OK: 0 */
    size_t name_off, name_len; /* ERR: the code's name as sent */
    size_t text_off, text_len; /* OK: the text (after the count in a
                                * multi-line header); ERR: the message */
    bool multi;
    uint32_t nlines;           /* multi: lines that follow the header */
    size_t body_off, body_len; /* multi: those lines, each ending in LF */
    const char *why;           /* CTL_BAD: what was wrong (static text) */
};

/*
 * Parses the first reply in buf[0..len): CTL_DONE with *consumed its bytes
 * (all nlines lines of a multi-line reply included), CTL_NEED_MORE while
 * it may still complete, CTL_BAD when it breaks the grammar above or a
 * bound (rep->why says which).  *consumed is 0 unless CTL_DONE.
 */
enum ctl_status ctl_parse_reply(const char *buf, size_t len, struct ctl_reply *rep,
                                size_t *consumed);

/*
 * Walks the body of a multi-line reply parsed from buf: start with
 * *cursor = 0; each call sets *off and *len to the next line (LF and any CR
 * excluded) and returns true, or returns false after the last.
 */
bool ctl_reply_next_line(const char *buf, const struct ctl_reply *rep, size_t *cursor,
                         size_t *off, size_t *len);

#endif
