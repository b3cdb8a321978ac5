/*
 * ringfeed-read.c - consumes a ringfeed stream without computing anything:
 * the loader's speed on its own, and a digest that two runs compare by.
 *
 *   ringfeed-read [--socket PATH] --dataset NAME|FOLDER --batch B --epochs E
 *                 [--transform raw|train|eval|none|tokens] [--size S] [--depth D]
 *                 [--rank R --world W] [--seed S] [--shuffle 0|1|block] [--no-shuffle] [--drop-last]
 *                 [--params "k=v ..."] [--subset NAME|START:STOP]
 *                 [--start-epoch E --start-seq N]
 *                 [--reconnect-ms MS] [--step-ms MS] [--workers-note]
 *                 [--dump-indices FILE] [--json]
 *
 * It attaches with libringfeed and reads E epochs counted from the start
 * point: from batch N of epoch E0 through the last batch of epoch E0+E-1
 * (batches_per_epoch comes from the ring), releasing each batch at once, or
 * after holding it --step-ms milliseconds (a stand-in for a training step:
 * a compute-bound client, for testing `workers auto`).
 *
 * The digest is XXH64 (proto/digest.h, seed 0) over every delivered batch in
 * order: for each sample its dataset index (8 bytes little endian) and
 * label (4 bytes little endian), then the batch's pixels (count *
 * sample_bytes bytes).  Same dataset, seed, transform, ranks and start
 * point give the same digest whatever the worker count or crashes.
 *
 * A dataset of named fields (a ring with a field table other than an older
 * dataset's image-or-tensor and label, whose digest stays as above) has
 * every field in the digest: per batch the samples' indices and labels,
 * then each field's column in the schema's order (a fixed-size field its
 * count * item bytes; a ragged one its count + 1 offsets, 8 bytes little
 * endian each, then its rows' bytes).  Each field also gets a digest of its
 * own (XXH64 of just its columns, the same way), printed before the
 * combined one: `field <name>: <16 hex digits>` lines, or a "fields" array
 * of {"name", "digest"} in the JSON.
 *
 * Human output (stdout):
 *     epoch <e>: <n> samples in <s> s, <x> samples/s, waited <w> s
 *     ...one line per epoch...
 *     samples: <n>
 *     seconds: <s>
 *     waited: <w> s
 *     first batch: <ms> ms after rf_open
 *     rf_next ready: median <us> us, p99 <us> us over <k> calls
 *     reconnects: <r>
 *     workers: <n>                     (with --workers-note)
 *     samples/s: <x>
 *     digest: <16 hex digits>
 * With --json, only one JSON object on one line:
 *     {"samples":n,"batches":n,"seconds":s,"samples_per_s":x,"wait_s":w,
 *      "first_batch_ms":ms,"next_ready_median_us":us,"next_ready_p99_us":us,
 *      "next_ready_calls":k,"reconnects":r,["workers":n,]"digest":"hex",
 *      "epochs":[{"epoch":e,"samples":n,"batches":n,"seconds":s,
 *                 "samples_per_s":x,"wait_s":w},...]}
 * (median and p99 are null when no call found a batch ready).
 *
 * Timing: seconds run from rf_open's start to the last release; an epoch's
 * from the end of the previous one (or rf_open's start).  "waited" is time
 * inside rf_next.  rf_next latency when a batch is ready: each batch is
 * first asked for with rf_next(c, b, 0); when that finds it published, its
 * duration is one sample; otherwise rf_next(c, b, -1) waits (not sampled).
 *
 * --dump-indices FILE writes one line per delivered sample:
 *     <epoch> <sequence> <index> <label> <flags>
 * sequence being the batch's number within its epoch and flags the
 * RF_SAMPLE_* bits (1 padding, 2 substituted).
 *
 * Exit status: 0 done; 1 the stream failed (rf_last_error on stderr); 2 bad
 * usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "ctlconn.h"
#include "digest.h"
#include "jsonw.h"
#include "ringfeed.h"
#include "strnum.h"

static const char *prog = "ringfeed-read";

struct epoch_rec {
    uint64_t epoch, samples, batches;
    double seconds, wait_s;
};

struct run {
    struct epoch_rec *epochs;
    size_t nepochs, cap_epochs;
    int64_t *ready_ns;     /* rf_next durations that found a batch ready */
    size_t nready, cap_ready;
    uint64_t samples, batches;
    double seconds, wait_s, first_ms;
    struct digest dg;
    /* a dataset of named fields: its fields, each one's digest */
    uint32_t nfields;
    struct rf_field fields[16];
    struct digest fdg[16];
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [--socket PATH] --dataset NAME --batch B --epochs E\n"
            "       [--transform raw|train|eval|none|tokens] [--size S] [--depth D]\n"
            "       [--rank R --world W] [--seed S] [--shuffle 0|1|block] [--no-shuffle] [--drop-last]\n"
            "       [--params \"k=v ...\"] [--subset NAME|START:STOP]\n"
            "       [--start-epoch E --start-seq N]\n"
            "       [--reconnect-ms MS] [--step-ms MS] [--workers-note]\n"
            "       [--dump-indices FILE] [--json]\n"
            "\n"
            "Reads E epochs from the daemon without computing, then prints samples/s\n"
            "and a digest of every delivered index, label and pixel (and of every\n"
            "field, each alone and all together, for a dataset of named fields).\n"
            "\n"
            "  --socket PATH        the daemon's control socket (default: as libringfeed)\n"
            "  --dataset NAME       the dataset, a name from 'ringfeedctl datasets', or a\n"
            "                       packed folder (a path with a '/'): served by your\n"
            "                       own daemon, started if need be (see ringfeedd(8))\n"
            "  --batch B            samples per batch, 1..65536\n"
            "  --epochs E           epochs to read, counted from the start point\n"
            "  --transform T        raw (default), train, eval, none, or tokens (with\n"
            "                       --params \"context=L\": windows of a token dataset)\n"
            "  --size S             output side of train/eval (default 224)\n"
            "  --depth D            ring slots, 2..64 (default: the daemon picks)\n"
            "  --rank R, --world W  this reader's rank of W (default: RANK/WORLD_SIZE,\n"
            "                       else 0 of 1)\n"
            "  --seed S             shuffle and augmentation seed (default 0)\n"
            "  --shuffle S          the epoch's order: 1 (default, the whole dataset),\n"
            "                       block (blocks of shards), 0 (the dataset's order)\n"
            "  --no-shuffle         read each epoch in order (--shuffle 0)\n"
            "  --drop-last          drop the tail that does not split over the ranks\n"
            "  --params \"k=v ...\"   more ATTACH keys, e.g. \"flip=0 drop_last_batch=1\"\n"
            "  --subset S           read only a set of the pack (ringfeed-pack split), or\n"
            "                       the indices START..STOP-1 (ATTACH subset=)\n"
            "  --start-epoch E      start at batch N of epoch E (default 0, 0)\n"
            "  --start-seq N\n"
            "  --reconnect-ms MS    how long to keep reconnecting (default 30000)\n"
            "  --step-ms MS         hold each batch MS ms before releasing it, as a\n"
            "                       training step would (default 0: release at once)\n"
            "  --workers-note       also print the daemon's live worker count\n"
            "  --dump-indices FILE  write \"epoch seq index label flags\" per sample\n"
            "  --json               one JSON object instead of the lines\n"
            "  --help               this text\n",
            prog);
}

/* Sleeps ms milliseconds, through signals (--step-ms). */
static void hold_for(uint64_t ms)
{
    struct timespec left = {
        .tv_sec = (time_t)(ms / 1000),
        .tv_nsec = (long)(ms % 1000) * 1000000L,
    };

    while (nanosleep(&left, &left) == -1 && errno == EINTR)
        ;
}

/* Parses a decimal number in lo..hi for option name; exits 2 if bad. */
static uint64_t num(const char *name, const char *v, uint64_t lo, uint64_t hi)
{
    uint64_t x;

    if (strnum_u64(v, strlen(v), &x) < 0 || x < lo || x > hi) {
        fprintf(stderr, "%s: --%s \"%s\": give a whole number in %" PRIu64 "..%" PRIu64 "\n",
                prog, name, v, lo, hi);
        exit(2);
    }
    return x;
}

/* The --shuffle names and the struct rf_options.shuffle each one sets. */
static const struct {
    const char *name;
    int value;
} shuffles[] = {
    {"0", RF_SHUFFLE_OFF},
    {"1", RF_SHUFFLE_GLOBAL},
    {"block", RF_SHUFFLE_BLOCK},
};

/* Accepts a --shuffle value; returns its RF_SHUFFLE_*, or exits 2 naming it. */
static int shuffle_arg(const char *v)
{
    for (size_t i = 0; i < sizeof(shuffles) / sizeof(shuffles[0]); i++)
        if (strcmp(v, shuffles[i].name) == 0)
            return shuffles[i].value;
    fprintf(stderr, "%s: --shuffle \"%s\": give 0, 1 or block\n", prog, v);
    exit(2);
}

static void *grow(void *p, size_t *cap, size_t n, size_t size)
{
    void *q;

    if (n < *cap)
        return p;
    *cap = *cap ? *cap * 2 : 64;
    q = realloc(p, *cap * size);
    if (!q) {
        fprintf(stderr, "%s: out of memory\n", prog);
        exit(1);
    }
    return q;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* Nearest-rank percentile p (0..100] of the sorted v[0..n), in us. */
static double pct_us(const int64_t *v, size_t n, double p)
{
    size_t rank = (size_t)((p / 100.0) * (double)n + 0.999999);

    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return (double)v[rank - 1] / 1e3;
}

/* The worker count from the daemon's STATS (workers.alive), or -1. */
static long workers_alive(const char *socket_path)
{
    struct ctl_reply rep;
    struct ctlconn cc;
    struct rf_err err;
    size_t off, len, cur = 0;
    long n = -1;

    if (ctlconn_open(&cc, socket_path, &err) < 0 ||
        ctlconn_request(&cc, "STATS\n", &rep, &err) < 0) {
        /* err says why; rep was never filled */
        fprintf(stderr, "%s: --workers-note: %s\n", prog, err.msg);
        ctlconn_close(&cc);
        return -1;
    }
    if (!rep.ok) {
        fprintf(stderr, "%s: --workers-note: the daemon refused STATS\n", prog);
        ctlconn_close(&cc);
        return -1;
    }
    while (ctl_reply_next_line(cc.buf, &rep, &cur, &off, &len)) {
        uint64_t v;

        if (len > 14 && memcmp(cc.buf + off, "workers.alive ", 14) == 0 &&
            strnum_u64(cc.buf + off + 14, len - 14, &v) == 0)
            n = (long)v;
    }
    ctlconn_close(&cc);
    return n;
}

/* 1 when c's ring has a field table that is not an older dataset's pair
 * of an image (or tensor) and its label: then r->fields are filled. */
static int named_fields(struct rf_client *c, struct run *r)
{
    int n = rf_field_count(c);

    if (n < 1) /* -ENOTSUP: a daemon older than fields */
        return 0;
    if (n > (int)(sizeof(r->fields) / sizeof(r->fields[0])))
        n = (int)(sizeof(r->fields) / sizeof(r->fields[0]));
    for (int i = 0; i < n; i++)
        if (rf_field_info(c, (uint32_t)i, &r->fields[i]) < 0)
            return 0;
    if (n == 2 && r->fields[0].kind == RF_FIELD_FIXED &&
        (strcmp(r->fields[0].name, "image") == 0 || strcmp(r->fields[0].name, "tensor") == 0) &&
        strcmp(r->fields[1].name, "label") == 0 && r->fields[1].kind == RF_FIELD_FIXED &&
        r->fields[1].dtype == RF_DTYPE_I64 && r->fields[1].ndim == 0)
        return 0;
    r->nfields = (uint32_t)n;
    for (int i = 0; i < n; i++)
        digest_init(&r->fdg[i], 0);
    return 1;
}

/* Adds batch b to the digests (see the file's comment).  0, or the
 * negative errno of a column libringfeed refused (message in
 * rf_last_error). */
static int digest_batch(struct rf_client *c, struct run *r, const struct rf_batch *b)
{
    struct digest *d = &r->dg;

    for (uint32_t i = 0; i < b->count; i++) {
        digest_update_u64(d, b->samples[i].index);
        digest_update_u32(d, (uint32_t)b->samples[i].label);
    }
    if (!r->nfields) {
        digest_update(d, b->data, (size_t)b->count * b->sample_bytes);
        return 0;
    }
    for (uint32_t k = 0; k < r->nfields; k++) {
        struct rf_column col;
        int rc = rf_batch_column(c, b, k, &col);

        if (rc < 0)
            return rc;
        for (int pass = 0; pass < 2; pass++) {
            struct digest *t = pass ? &r->fdg[k] : d;

            for (uint32_t i = 0; col.offsets && i <= b->count; i++)
                digest_update_u64(t, (uint64_t)col.offsets[i]);
            digest_update(t, col.data, col.bytes);
        }
    }
    return 0;
}

static void print_human(const struct run *r, uint64_t reconnects, long workers, bool note)
{
    char hex[DIGEST_HEX_SIZE];

    for (size_t i = 0; i < r->nepochs; i++) {
        const struct epoch_rec *e = &r->epochs[i];

        printf("epoch %" PRIu64 ": %" PRIu64 " samples in %.3f s, %.1f samples/s, waited %.3f s\n",
               e->epoch, e->samples, e->seconds,
               e->seconds > 0 ? (double)e->samples / e->seconds : 0.0, e->wait_s);
    }
    printf("samples: %" PRIu64 "\n", r->samples);
    printf("seconds: %.3f\n", r->seconds);
    printf("waited: %.3f s\n", r->wait_s);
    printf("first batch: %.3f ms after rf_open\n", r->first_ms);
    if (r->nready)
        printf("rf_next ready: median %.3f us, p99 %.3f us over %zu calls\n",
               pct_us(r->ready_ns, r->nready, 50), pct_us(r->ready_ns, r->nready, 99),
               r->nready);
    else
        printf("rf_next ready: no call found a batch ready\n");
    printf("reconnects: %" PRIu64 "\n", reconnects);
    if (note) {
        if (workers >= 0)
            printf("workers: %ld\n", workers);
        else
            printf("workers: unknown\n");
    }
    printf("samples/s: %.1f\n", r->seconds > 0 ? (double)r->samples / r->seconds : 0.0);
    for (uint32_t k = 0; k < r->nfields; k++) {
        printf("field %s: %s\n", r->fields[k].name, digest_hex(digest_final(&r->fdg[k]), hex));
    }
    printf("digest: %s\n", digest_hex(digest_final(&r->dg), hex));
}

static void print_json(const struct run *r, uint64_t reconnects, long workers, bool note)
{
    char hex[DIGEST_HEX_SIZE];

    printf("{\"samples\":%" PRIu64 ",\"batches\":%" PRIu64 ",\"seconds\":", r->samples,
           r->batches);
    json_double(stdout, r->seconds);
    fputs(",\"samples_per_s\":", stdout);
    json_double(stdout, r->seconds > 0 ? (double)r->samples / r->seconds : 0.0);
    fputs(",\"wait_s\":", stdout);
    json_double(stdout, r->wait_s);
    fputs(",\"first_batch_ms\":", stdout);
    json_double(stdout, r->first_ms);
    fputs(",\"next_ready_median_us\":", stdout);
    if (r->nready)
        json_double(stdout, pct_us(r->ready_ns, r->nready, 50));
    else
        fputs("null", stdout);
    fputs(",\"next_ready_p99_us\":", stdout);
    if (r->nready)
        json_double(stdout, pct_us(r->ready_ns, r->nready, 99));
    else
        fputs("null", stdout);
    printf(",\"next_ready_calls\":%zu,\"reconnects\":%" PRIu64, r->nready, reconnects);
    if (note) {
        if (workers >= 0)
            printf(",\"workers\":%ld", workers);
        else
            fputs(",\"workers\":null", stdout);
    }
    if (r->nfields) {
        fputs(",\"fields\":[", stdout);
        for (uint32_t k = 0; k < r->nfields; k++) {
            /* field names are [A-Za-z0-9_]: nothing to escape */
            printf("%s{\"name\":\"%s\",\"digest\":\"%s\"}", k ? "," : "",
                   r->fields[k].name, digest_hex(digest_final(&r->fdg[k]), hex));
        }
        fputc(']', stdout);
    }
    printf(",\"digest\":\"%s\",\"epochs\":[", digest_hex(digest_final(&r->dg), hex));
    for (size_t i = 0; i < r->nepochs; i++) {
        const struct epoch_rec *e = &r->epochs[i];

        printf("%s{\"epoch\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"batches\":%" PRIu64
               ",\"seconds\":",
               i ? "," : "", e->epoch, e->samples, e->batches);
        json_double(stdout, e->seconds);
        fputs(",\"samples_per_s\":", stdout);
        json_double(stdout, e->seconds > 0 ? (double)e->samples / e->seconds : 0.0);
        fputs(",\"wait_s\":", stdout);
        json_double(stdout, e->wait_s);
        fputc('}', stdout);
    }
    fputs("]}\n", stdout);
}

int main(int argc, char **argv)
{
    enum { O_SOCKET = 1, O_DATASET, O_BATCH, O_EPOCHS, O_TRANSFORM, O_SIZE, O_DEPTH, O_RANK,
           O_WORLD, O_SEED, O_SHUFFLE, O_NO_SHUFFLE, O_DROP_LAST, O_PARAMS, O_START_EPOCH, O_START_SEQ,
           O_RECONNECT, O_STEP, O_WORKERS_NOTE, O_DUMP, O_JSON, O_HELP, O_SUBSET };
    static const struct option opts[] = {
        {"socket", required_argument, NULL, O_SOCKET},
        {"dataset", required_argument, NULL, O_DATASET},
        {"batch", required_argument, NULL, O_BATCH},
        {"epochs", required_argument, NULL, O_EPOCHS},
        {"transform", required_argument, NULL, O_TRANSFORM},
        {"size", required_argument, NULL, O_SIZE},
        {"depth", required_argument, NULL, O_DEPTH},
        {"rank", required_argument, NULL, O_RANK},
        {"world", required_argument, NULL, O_WORLD},
        {"seed", required_argument, NULL, O_SEED},
        {"shuffle", required_argument, NULL, O_SHUFFLE},
        {"no-shuffle", no_argument, NULL, O_NO_SHUFFLE},
        {"drop-last", no_argument, NULL, O_DROP_LAST},
        {"params", required_argument, NULL, O_PARAMS},
        {"subset", required_argument, NULL, O_SUBSET},
        {"start-epoch", required_argument, NULL, O_START_EPOCH},
        {"start-seq", required_argument, NULL, O_START_SEQ},
        {"reconnect-ms", required_argument, NULL, O_RECONNECT},
        {"step-ms", required_argument, NULL, O_STEP},
        {"workers-note", no_argument, NULL, O_WORKERS_NOTE},
        {"dump-indices", required_argument, NULL, O_DUMP},
        {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    struct rf_options o;
    struct rf_client *c = NULL;
    struct rf_stats st;
    struct rf_batch b;
    struct run r = {0};
    const char *dump_path = NULL, *subset = NULL;
    char params[4096];
    FILE *dump = NULL;
    bool json = false, note = false, have_epochs = false, have_batch = false;
    uint64_t epochs = 0, total, bpe, step_ms = 0;
    int64_t t_open, t_mark, t0, t1;
    long workers = -1;
    int opt, rc, status = 1;

    rf_options_init(&o);
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case O_SOCKET: o.socket = optarg; break;
        case O_DATASET: o.dataset = optarg; break;
        case O_BATCH: o.batch = (uint32_t)num("batch", optarg, 1, 65536); have_batch = true; break;
        case O_EPOCHS: epochs = num("epochs", optarg, 1, UINT32_MAX); have_epochs = true; break;
        case O_TRANSFORM: o.transform = optarg; break;
        case O_SIZE: o.size = (uint32_t)num("size", optarg, 1, 4096); break;
        case O_DEPTH: o.depth = (uint32_t)num("depth", optarg, 2, 64); break;
        case O_RANK: o.rank = (int32_t)num("rank", optarg, 0, 65535); break;
        case O_WORLD: o.world = (int32_t)num("world", optarg, 1, 65536); break;
        case O_SEED: o.seed = num("seed", optarg, 0, UINT64_MAX); break;
        case O_SHUFFLE: o.shuffle = shuffle_arg(optarg); break;
        case O_NO_SHUFFLE: o.shuffle = RF_SHUFFLE_OFF; break;
        case O_DROP_LAST: o.drop_last = 1; break;
        case O_PARAMS: o.params = optarg; break;
        case O_SUBSET: subset = optarg; break;
        case O_START_EPOCH: o.start_epoch = num("start-epoch", optarg, 0, UINT32_MAX); break;
        case O_START_SEQ: o.start_seq = num("start-seq", optarg, 0, UINT64_MAX); break;
        case O_RECONNECT: o.reconnect_ms = (int)num("reconnect-ms", optarg, 0, INT32_MAX); break;
        case O_STEP: step_ms = num("step-ms", optarg, 0, 3600000); break;
        case O_WORKERS_NOTE: note = true; break;
        case O_DUMP: dump_path = optarg; break;
        case O_JSON: json = true; break;
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || !o.dataset || !have_batch || !have_epochs) {
        fprintf(stderr, "%s: %s\n", prog,
                optind < argc ? "unexpected argument" : "--dataset, --batch and --epochs are required");
        usage(stderr);
        return 2;
    }
    if (subset) {
        /* one more ATTACH key: a value with a blank would be two */
        if (!subset[0] || strpbrk(subset, " \t") ||
            snprintf(params, sizeof(params), "%s%ssubset=%s", o.params ? o.params : "",
                     o.params ? " " : "", subset) >= (int)sizeof(params)) {
            fprintf(stderr, "%s: --subset '%s': a set's name or START:STOP, no blanks\n", prog,
                    subset);
            return 2;
        }
        o.params = params;
    }
    if ((o.rank < 0) != (o.world < 0)) {
        fprintf(stderr, "%s: give --rank and --world together (or neither, for RANK and "
                        "WORLD_SIZE)\n", prog);
        return 2;
    }
    if (dump_path && !(dump = fopen(dump_path, "w"))) {
        fprintf(stderr, "%s: --dump-indices %s: %s\n", prog, dump_path, strerror(errno));
        return 1;
    }
    digest_init(&r.dg, 0);

    t_open = ((int64_t)clock_mono_ns());
    rc = rf_open(&o, &c);
    if (rc < 0) {
        fprintf(stderr, "%s: %s\n", prog, rf_last_error(c));
        goto out;
    }
    rf_get_stats(c, &st);
    bpe = st.batches_per_epoch;
    if (bpe == 0) {
        fprintf(stderr, "%s: the daemon plans no batches for this rank\n", prog);
        goto out;
    }
    /* a --start-seq past the epoch's end starts in a later epoch: the
     * client's position is the daemon's normalized one (next_seq < bpe),
     * and --epochs counts from that epoch */
    if (epochs > UINT64_MAX / bpe) {
        fprintf(stderr, "%s: --epochs %" PRIu64 " is too many\n", prog, epochs);
        goto out;
    }
    {
        struct rf_info info;

        if (rf_get_info(c, &info) < 0) {
            fprintf(stderr, "%s: %s\n", prog, rf_last_error(c));
            goto out;
        }
        total = epochs * bpe - info.next_seq;
    }
    named_fields(c, &r);
    t_mark = t_open;
    for (uint64_t n = 0; n < total; n++) {
        struct epoch_rec *e;
        double waited;

        t0 = ((int64_t)clock_mono_ns());
        rc = rf_next(c, &b, 0);
        t1 = ((int64_t)clock_mono_ns());
        if (rc == 0) {
            r.ready_ns = grow(r.ready_ns, &r.cap_ready, r.nready, sizeof(*r.ready_ns));
            r.ready_ns[r.nready++] = t1 - t0;
        } else if (rc == -ETIMEDOUT) {
            rc = rf_next(c, &b, -1);
            t1 = ((int64_t)clock_mono_ns());
        }
        if (rc < 0) {
            fprintf(stderr, "%s: batch %" PRIu64 " of %" PRIu64 ": %s\n", prog, n, total,
                    rf_last_error(c));
            goto out;
        }
        if (n == 0)
            r.first_ms = (double)(t1 - t_open) / 1e6;
        waited = (double)(t1 - t0) / 1e9;
        if (r.nepochs == 0 || r.epochs[r.nepochs - 1].epoch != b.epoch) {
            if (r.nepochs) {
                /* the previous epoch ended with its last release */
                r.epochs[r.nepochs - 1].seconds = (double)(t0 - t_mark) / 1e9;
                t_mark = t0;
            }
            r.epochs = grow(r.epochs, &r.cap_epochs, r.nepochs, sizeof(*r.epochs));
            r.epochs[r.nepochs++] = (struct epoch_rec){.epoch = b.epoch};
        }
        e = &r.epochs[r.nepochs - 1];
        e->samples += b.count;
        e->batches++;
        e->wait_s += waited;
        r.samples += b.count;
        r.batches++;
        r.wait_s += waited;
        rc = digest_batch(c, &r, &b);
        if (rc < 0) {
            fprintf(stderr, "%s: batch %" PRIu64 ": %s\n", prog, n, rf_last_error(c));
            goto out;
        }
        for (uint32_t i = 0; dump && i < b.count; i++)
            fprintf(dump, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId32 " %" PRIu32 "\n",
                    b.epoch, b.seq, b.samples[i].index, b.samples[i].label,
                    b.samples[i].flags);
        if (step_ms)
            hold_for(step_ms);
        rc = rf_release(c, &b);
        if (rc < 0) {
            fprintf(stderr, "%s: %s\n", prog, rf_last_error(c));
            goto out;
        }
    }
    t1 = ((int64_t)clock_mono_ns());
    if (r.nepochs)
        r.epochs[r.nepochs - 1].seconds = (double)(t1 - t_mark) / 1e9;
    r.seconds = (double)(t1 - t_open) / 1e9;
    if (r.nready) /* qsort's array must not be NULL, even for 0 elements */
        qsort(r.ready_ns, r.nready, sizeof(*r.ready_ns), cmp_i64);
    if (note)
        workers = workers_alive(o.socket);
    rf_get_stats(c, &st);
    if (json)
        print_json(&r, st.reconnects, workers, note);
    else
        print_human(&r, st.reconnects, workers, note);
    status = 0;
    if (dump && (fflush(dump) == EOF || ferror(dump))) {
        fprintf(stderr, "%s: --dump-indices %s: %s\n", prog, dump_path, strerror(errno));
        status = 1;
    }
    if (fflush(stdout) == EOF || ferror(stdout)) {
        fprintf(stderr, "%s: writing the output: %s\n", prog, strerror(errno));
        status = 1;
    }
out:
    rf_close(c);
    if (dump && fclose(dump) == EOF && status == 0) {
        fprintf(stderr, "%s: --dump-indices %s: %s\n", prog, dump_path, strerror(errno));
        status = 1;
    }
    free(r.epochs);
    free(r.ready_ns);
    return status;
}
