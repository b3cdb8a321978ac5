/*
 * worker.c - a worker process: reads a job's records in one batched
 * submission, checks, decodes and transforms them, writes them into the
 * ring slots of the job, and reports done.
 *
 * A worker is ringfeedd started as
 *     ringfeedd --worker PARENT_PID [--log-level L] [--data-bytes N] [--dataset NAME=DIR]...
 *               [--plugin NAME=PATH]...
 * with its socket to the main process on fd 3 (wire.h).  It is a plain
 * blocking loop: receive a message, act, answer.  It holds no state that a
 * crash could lose: rings are mapped again by whoever runs the job next, and
 * it plans a job's samples itself with the stream's sampler (a pure
 * function of the parameters WIRE_RING_ADD brought and the job's epoch,
 * batch and range), so whoever runs a job plans the same samples.
 *
 * It dies with its parent: PR_SET_PDEATHSIG, and a check right after it
 * that the parent is still the one that started it (the parent may have
 * died between fork and prctl).
 *
 * Bad samples.  A record that cannot be read, fails its checksum, does not
 * decode, or has the wrong shape is bad.  The sample is replaced by the next
 * good sample in the epoch's order (positions pos+1, pos+2, ... of the
 * permutation, wrapping), so every rank still gets full, equal batches; the
 * replacement depends only on the plan and the data, never on the worker.
 * After max_bad bad samples in a row the stream fails (WIRE_STREAM_FAILED).
 * Every bad sample is counted by reason (STATS errors.bad.*); the log names
 * them under the rule at BADLOG_FULL below: the first ones of a dataset in
 * full (dataset, shard, record, byte offset, reason), then summaries.
 *
 * Whose memory.  A ring is mapped by its client too, which may write any
 * byte of it at any time (proto/ring.h).  So the worker only ever stores
 * into a slot: a record is checked and decoded in the worker's own memory
 * (stage, decoded), a transform's apply() writes its output and never
 * reads it back (transform.h), and a chunk shared by several rings is made
 * sample by sample in the worker's own `sample` buffer and copied from
 * there into each ring, its per-sample records from the worker's own
 * `meta`.  Nothing read from one client's ring reaches another's, and a
 * client that scribbles on its ring garbles only its own batches, never a
 * checksum or a decode the dataset is blamed for.
 *
 * Exit.  RETIRE, the main process gone, or SIGTERM (the daemon stopping)
 * end the worker between jobs, after it has written its pending bad-sample
 * summaries; SIGKILL (the watchdog, a crash) ends it at once.
 */
#include <fcntl.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "buildid.h"
#include "clock.h"
#include "ctl.h"
#include "dataset.h"
#include "fault.h"
#include "fields.h"
#include "io.h"
#include "log.h"
#include "mapguard.h"
#include "ring.h"
#include "sampler.h"
#include "schema.h"
#include "subset.h"
#include "targets.h"
#include "augment.h"
#include "transform.h"
#include "window.h"
#include "wire.h"
#include "worker.h"

#define MAX_DATASETS 64
#define MAX_RINGS WIRE_MAX_RINGS
#define QUARANTINE_MAX 4096

/*
 * The bad-sample log rule, per worker and per dataset (a quarter-damaged
 * shard once wrote 110k lines, 21 MB, in 0.86 s):
 *   - the first BADLOG_FULL (20) bad samples get a line each, naming the
 *     dataset, the sample, the reason (the STATS name) and, from the
 *     reader's message, the shard file, record and byte offset (of the
 *     record, or of its index entry when that is what is damaged);
 *   - after that they are only counted, by reason, and a summary line
 *     gives the counts since the previous line at most once per
 *     BADLOG_INTERVAL_NS (10 s): written by the first bad sample or job end
 *     after the interval, and whatever the interval when a ring of the
 *     dataset is removed or the worker exits, so no count is lost from the
 *     log (SIGKILL aside; STATS has them all in any case);
 *   - a dataset with no bad sample for a whole interval starts over: its
 *     next BADLOG_FULL are logged in full again, so a new incident is named.
 * So a worker writes at most BADLOG_FULL lines per dataset and interval of
 * quiet, plus one summary per interval and one per ring removed.
 */
#define BADLOG_FULL 20
#define BADLOG_INTERVAL_NS (10ull * 1000000000ull)

struct badlog {
    uint32_t full;           /* full lines since the last quiet interval */
    uint64_t last_line_ns;   /* when the last line (full or summary) went */
    uint64_t last_bad_ns;    /* when the last bad sample came */
    uint64_t pending;        /* counted since the last line, not yet logged */
    uint64_t n[BAD_KIND_COUNT]; /* pending by reason */
};

/* The reasons as STATS names them (errors.bad.<name>, daemon/stats.c). */
static const char *const bad_names[] = {
    [BAD_READ] = "read",
    [BAD_CHECKSUM] = "checksum",
    [BAD_DECODE] = "decode",
    [BAD_SHAPE] = "shape",
    [BAD_TOO_LARGE] = "too_large",
    [BAD_QUARANTINED] = "quarantined",
};
_Static_assert(sizeof(bad_names) / sizeof(bad_names[0]) == BAD_KIND_COUNT,
               "a name for every enum wire_bad reason");

/* Set by SIGTERM; the job loop exits when it sees it (between jobs). */
static volatile sig_atomic_t term_asked;

struct wring {
    uint32_t id;
    bool used;
    void *mem;              /* NULL: its dataset failed (ds_err says why) */
    uint64_t size;
    struct ring_geom g;     /* the geometry checked at RING_ADD; the header in
                               the mapping is client-writable (ring.h) and
                               never read */
    struct wire_ring_add p;
    struct xform_out out;
    struct xform_fields fx; /* the field table and geometry (fields.h), built
                               from the worker's own schema and compared with
                               the main process's figures at RING_ADD (its
                               geometry and xform_fields_digest); g is fx.g */
    uint64_t fixed_at[RING_MAX_FIELDS]; /* kind fields: each FIXED field's
                                           place in ws->sample */
    int label_field;        /* kind fields: the scalar i64 "label", or -1 */
    struct subset sub;      /* the stream's subset (wire_subset): positions ->
                               dataset indices; nruns 0: the whole dataset */
    char sub_err[192];      /* "" or why the subset could not be had: the
                               ring's jobs fail its stream with it */
    struct tok_index tok;   /* transform tokens: the dataset's documents'
                               token prefix sums (window.h), this ring's own */
    /* a mixture ring (wire_ring_add.nsources): the view of its sources
     * (dataset.h VIEW), the plan (mix.h), and each source's token index
     * (transform tokens); NULL for a ring of one dataset */
    struct dataset *view;
    struct mix_plan *mix;
    struct mix_cursor mix_cur; /* where this worker's last job of it ended */
    struct tok_index *toks;
};

/*
 * Datasets.  The worker is told the catalogue (--dataset NAME=DIR, in
 * catalogue order) but opens a dataset only when a ring of it arrives, and
 * checks that the folder still holds the pack the main process opened
 * (dataset_identity, sent in WIRE_RING_ADD).  A dataset that cannot be
 * opened, holds another pack, or whose files change while it is read
 * (dataset_check, after a failed read or a fault the mapping guard
 * survived) is failed for this worker's lifetime: ds_err says why, its
 * jobs answer WIRE_DATASET_FAILED with that reason, and the main process
 * fails the dataset's streams.  So a damaged dataset costs only its own
 * clients, and a worker never dies or refuses to start for one.
 */
struct wstate {
    int fd;
    struct dataset *ds[MAX_DATASETS];          /* NULL until a ring needs it */
    char ds_name[MAX_DATASETS][CTL_DATASET_NAME_MAX + 1]; /* from --dataset */
    char ds_dir[MAX_DATASETS][4096];           /* "" for an empty slot */
    char ds_err[MAX_DATASETS][192];            /* "" or why it failed */
    bool ds_on_demand[MAX_DATASETS];           /* --dataset-on-demand: a remote
                                                  dataset's cache folder, whose
                                                  shards come and go */
    uint64_t sweep_ns;                         /* last dataset_sweep pass */
    uint64_t data_bytes;                       /* --data-bytes: for io_open */
    struct badlog badlog[MAX_DATASETS];
    uint32_t nds;
    struct dataset_dctx *dctx;
    struct io io;
    struct wring rings[MAX_RINGS];
    struct wire_counters c;
    struct xform_ctx xc;    /* the transforms' decoders and buffers */
    /* per job: one staging buffer per sample for the stored bytes */
    uint8_t *stage;
    size_t stage_cap;
    uint8_t *decoded;       /* one record, decoded: the input of apply() */
    size_t decoded_cap;
    /* one finished sample of a shared chunk, copied from here into each
     * ring (sized at RING_ADD), and the chunk's per-sample records */
    uint8_t *sample;
    size_t sample_cap;
    /* ATTACH augment=: the transform's output is made here, the ops run
     * on it in place (never in a slot, which its client can write), then
     * it is copied to its destination; scratch is lent to the ops */
    uint8_t *aug;
    size_t aug_cap;
    struct aug_scratch aug_scratch;
    /* the geometric steps the ops applied to a fields sample's bound
     * image, which its boxes and masks follow (aug_run.h), and a box
     * step's keep bytes */
    struct aug_trace aug_trace;
    uint8_t *step_keep;
    size_t step_keep_cap;
    /* the operator's plugins (--plugin NAME=PATH, plugin.h), loaded at
     * start; the main process checked each file before it started us */
    struct plugin_set plugins;
    struct ring_sample meta[WIRE_JOB_MAX];
    /* kind fields (FIELDS below): the last sample's record parts (in
     * decoded), its boxes after the crop, and per job each RAGGED field's
     * rows (values and int64 offsets), all in the worker's own memory */
    struct schema_part parts[SCHEMA_MAX_FIELDS];
    const uint8_t *part_at[SCHEMA_MAX_FIELDS]; /* a RAGGED field's rows */
    uint64_t part_rows[SCHEMA_MAX_FIELDS];
    uint32_t part_dropped;
    float *boxes[SCHEMA_MAX_FIELDS];    /* boxes after the crop; a rows=
                                           field's kept rows (as bytes) */
    size_t boxes_cap[SCHEMA_MAX_FIELDS];
    uint8_t *keep[SCHEMA_MAX_FIELDS];   /* a boxes field's: 1 per box kept */
    size_t keep_cap[SCHEMA_MAX_FIELDS];
    uint8_t *vals[SCHEMA_MAX_FIELDS];
    size_t vals_cap[SCHEMA_MAX_FIELDS];
    int64_t offs[SCHEMA_MAX_FIELDS][WIRE_JOB_MAX + 1];
    struct { uint32_t ds; uint64_t index; } quarantine[QUARANTINE_MAX];
    uint32_t nquarantine;
    /* transform tokens: a job's document pieces (window_job) and the
     * document each reads, for messages */
    struct io_req *pieces;
    uint64_t *piece_doc;
    uint32_t pieces_cap;
};

static void send_or_die(struct wstate *ws, const void *m, size_t len)
{
    ssize_t n;

    do {
        n = send(ws->fd, m, len, MSG_NOSIGNAL);
    } while (n == -1 && errno == EINTR);
    if (n == -1)
        _exit(errno == EPIPE || errno == ECONNRESET ? 0 : 3);
}

static struct wring *ring_find(struct wstate *ws, uint32_t id)
{
    for (unsigned i = 0; i < MAX_RINGS; i++)
        if (ws->rings[i].used && ws->rings[i].id == id)
            return &ws->rings[i];
    return NULL;
}

static bool quarantined(const struct wstate *ws, uint32_t ds, uint64_t index)
{
    for (uint32_t i = 0; i < ws->nquarantine; i++)
        if (ws->quarantine[i].ds == ds && ws->quarantine[i].index == index)
            return true;
    return false;
}

/*
 * Writes dataset ds's summary line when it has counts pending: how many bad
 * samples since its last line, over how long, and by reason.
 */
static void badlog_flush(struct wstate *ws, uint32_t ds, uint64_t now)
{
    struct badlog *b = &ws->badlog[ds];
    char by[BAD_KIND_COUNT * 40]; /* "quarantined 18446744073709551615, " fits 40 */
    size_t len = 0;

    if (!b->pending)
        return;
    by[0] = '\0';
    for (unsigned k = 0; k < BAD_KIND_COUNT; k++) {
        int n = 0;

        if (b->n[k] && len < sizeof(by))
            n = snprintf(by + len, sizeof(by) - len, "%s%s %llu", len ? ", " : "", bad_names[k],
                         (unsigned long long)b->n[k]);
        if (n > 0)
            len += (size_t)n;
        b->n[k] = 0;
    }
    log_warn("worker: dataset %s: %llu more bad sample%s in the last %.3g s (%s); see "
             "ringfeedctl stats (errors.bad.*), and ringfeed-pack verify %s for every damaged "
             "record", ws->ds_name[ds], (unsigned long long)b->pending, b->pending == 1 ? "" : "s",
             (double)(now - b->last_line_ns) / 1e9, by, ws->ds_dir[ds]);
    b->pending = 0;
    b->last_line_ns = now;
}

/* Writes every summary that is due (all = false) or pending (all = true). */
static void badlog_flush_all(struct wstate *ws, bool all)
{
    uint64_t now = 0;

    for (uint32_t i = 0; i < ws->nds; i++) {
        if (!ws->badlog[i].pending)
            continue;
        if (!now)
            now = clock_mono_ns(); /* read only when something is pending */
        if (all || now - ws->badlog[i].last_line_ns >= BADLOG_INTERVAL_NS)
            badlog_flush(ws, i, now);
    }
}

/*
 * Counts a bad sample of dataset ds (sample idx, reason why) in STATS and
 * logs it under the rule at BADLOG_FULL: in full with msg (the reader's
 * message: shard, record, byte offset, what is wrong), or in a summary.
 */
static void bad_sample(struct wstate *ws, uint32_t ds, uint64_t idx, enum wire_bad why,
                       const char *msg)
{
    struct badlog *b = &ws->badlog[ds];
    uint64_t now = clock_mono_ns();

    ws->c.bad[why]++;
    if (b->full && now - b->last_bad_ns >= BADLOG_INTERVAL_NS) {
        badlog_flush(ws, ds, now); /* a quiet interval: start over */
        b->full = 0;
    }
    b->last_bad_ns = now;
    if (b->full < BADLOG_FULL) {
        b->full++;
        b->last_line_ns = now;
        log_warn("worker: dataset %s: bad sample %llu (%s), skipped: %s%s", ws->ds_name[ds],
                 (unsigned long long)idx, bad_names[why], msg,
                 b->full < BADLOG_FULL ? ""
                 : "; this worker counts the next ones and sums them up at most every 10 s");
        return;
    }
    b->pending++;
    b->n[why]++;
    if (now - b->last_line_ns >= BADLOG_INTERVAL_NS)
        badlog_flush(ws, ds, now);
}

/* Leaves the worker, its pending summaries written first. */
__attribute__((noreturn)) static void worker_exit(struct wstate *ws, int status)
{
    badlog_flush_all(ws, true);
    plugin_set_free(&ws->plugins); /* their fini */
    _exit(status);
}

static void on_sigterm(int sig)
{
    (void)sig;
    term_asked = 1;
}

/* Fails dataset id for this worker with why (printf-style), once: closes
 * it (its mappings go with it) and logs the reason. */
__attribute__((format(printf, 3, 4)))
static void dataset_fail(struct wstate *ws, uint32_t id, const char *fmt, ...)
{
    va_list ap;

    if (ws->ds_err[id][0])
        return;
    va_start(ap, fmt);
    vsnprintf(ws->ds_err[id], sizeof(ws->ds_err[id]), fmt, ap);
    va_end(ap);
    log_error("worker: dataset %s: %s; its clients' streams fail", ws->ds_name[id],
              ws->ds_err[id]);
    badlog_flush(ws, id, clock_mono_ns());
    io_forget(&ws->io);
    dataset_close(ws->ds[id]);
    ws->ds[id] = NULL;
}

/* Dataset id, opened now if no ring needed it before, and checked to be the
 * pack the main process opened (identity).  NULL when it failed: ds_err[id]
 * says why. */
static struct dataset *dataset_opened(struct wstate *ws, uint32_t id)
{
    struct rf_err err;

    if (ws->ds_err[id][0])
        return NULL;
    if (!ws->ds[id] && dataset_open_flags(ws->ds_dir[id], ws->ds_on_demand[id]
                                          ? DATASET_OPEN_ON_DEMAND : DATASET_OPEN_STRICT,
                                          &ws->ds[id], &err) < 0) {
        ws->ds[id] = NULL;
        dataset_fail(ws, id, "%s", err.msg);
        return NULL;
    }
    return ws->ds[id];
}

static struct dataset *dataset_get(struct wstate *ws, uint32_t id, uint64_t identity)
{
    if (!dataset_opened(ws, id))
        return NULL;
    if (dataset_identity(ws->ds[id]) != identity) {
        dataset_fail(ws, id, "%s holds another pack than the one the daemon opened (its "
                     "MANIFEST changed): pack into a new folder and reload", ws->ds_dir[id]);
        return NULL;
    }
    return ws->ds[id];
}

/* After a failed read or a survived fault: did dataset id's files change
 * since it was opened?  If so it is failed (reason in ds_err[id]). */
static bool dataset_changed(struct wstate *ws, uint32_t id)
{
    struct rf_err err;

    if (!ws->ds[id])
        return true;
    if (dataset_check(ws->ds[id], &err) == 0)
        return false;
    dataset_fail(ws, id, "%s", err.msg);
    return true;
}

/* dataset_changed for each dataset ring r reads (a mixture's sources). */
static bool ring_changed(struct wstate *ws, const struct wring *r)
{
    bool changed = false;

    for (uint32_t k = 0; k < (r->mix ? r->p.nsources : 1); k++)
        changed |= dataset_changed(ws, r->mix ? r->p.sources[k] : r->p.dataset_id);
    return changed;
}

/* After ring_changed: the status and reason of a job of r (one dataset:
 * it fails, catalogue and all; a mixture: its stream fails, naming the
 * source, which fails for good when a stream of its own reads it). */
static uint32_t ring_changed_reason(const struct wstate *ws, const struct wring *r, char *buf,
                                    size_t cap)
{
    for (uint32_t k = 0; r->mix && k < r->p.nsources; k++) {
        uint32_t id = r->p.sources[k];

        if (ws->ds_err[id][0]) {
            snprintf(buf, cap, "mixture source %s: %s", ws->ds_name[id], ws->ds_err[id]);
            return WIRE_STREAM_FAILED;
        }
    }
    snprintf(buf, cap, "dataset %s: %s", ws->ds_name[r->p.dataset_id],
             ws->ds_err[r->p.dataset_id]);
    return WIRE_DATASET_FAILED;
}

/* The dataset ring r reads: its mixture's view, else its one dataset. */
static struct dataset *ring_ds(struct wstate *ws, const struct wring *r)
{
    return r->mix ? r->view : ws->ds[r->p.dataset_id];
}

static void ring_mix_free(struct wring *r)
{
    for (uint32_t k = 0; r->toks && k < r->p.nsources; k++)
        tokidx_free(&r->toks[k]);
    free(r->toks);
    if (r->mix)
        mix_plan_free(r->mix);
    free(r->mix);
    dataset_close(r->view);
    r->toks = NULL;
    r->mix = NULL;
    r->view = NULL;
}

/*
 * A mixture ring's view and plan, from this worker's own opens of its
 * sources, checked against the main process's: the view's identity (every
 * source's MANIFEST) and the sources' samples or windows in all.  Returns
 * 0, or -1 with why (cap bytes).
 */
static int ring_mix(struct wstate *ws, struct wring *r, const struct wire_ring_add *m,
                    bool windows, char *why, size_t cap)
{
    struct dataset *parts[MIX_SOURCES_MAX];
    const char *names[MIX_SOURCES_MAX];
    struct mix mx = {.n = m->nsources};
    struct mix_plan_params pp = {
        .m = &mx, .seed = m->seed, .rank = m->rank, .world = m->world, .batch = m->batch,
        .shuffle = m->shuffle, .epoch_of = m->epoch_of, .drop_last = m->drop_last,
        .drop_last_batch = m->drop_last_batch, .no_repeat = m->no_repeat,
        .per_stream = m->per_stream,
    };
    struct rf_err err = {0};

    if (m->nsources < 2 || m->nsources > MIX_SOURCES_MAX) {
        snprintf(why, cap, "a mixture of %u sources", m->nsources);
        return -1;
    }
    for (uint32_t k = 0; k < m->nsources; k++) {
        uint32_t id = m->sources[k];

        if (id >= ws->nds || !ws->ds_dir[id][0] || !(parts[k] = dataset_opened(ws, id))) {
            snprintf(why, cap, "mixture source %s: %s", id < ws->nds ? ws->ds_name[id] : "?",
                     id < ws->nds ? ws->ds_err[id] : "not in the catalogue");
            return -1;
        }
        names[k] = ws->ds_name[id];
        snprintf(mx.s[k].name, sizeof(mx.s[k].name), "%s", names[k]);
        mx.s[k].share = m->shares[k];
        pp.n[k] = dataset_info(parts[k])->samples;
    }
    if (dataset_view_new(parts, names, m->nsources, &r->view, &err) < 0) {
        snprintf(why, cap, "%.180s", err.msg);
        return -1;
    }
    if (dataset_identity(r->view) != m->dataset_identity) {
        snprintf(why, cap, "a mixture source holds another pack than the one the daemon "
                 "opened (its MANIFEST changed): pack into a new folder and reload");
        return -1;
    }
    if (windows) {
        if (!(r->toks = calloc(m->nsources, sizeof(*r->toks)))) {
            snprintf(why, cap, "out of memory");
            return -1;
        }
        for (uint32_t k = 0; k < m->nsources; k++) {
            if (tokidx_build(parts[k], &r->toks[k], &err) < 0) {
                snprintf(why, cap, "mixture source %s: %.150s", names[k], err.msg);
                return -1;
            }
            pp.n[k] = tokidx_windows(&r->toks[k], m->xform.context);
        }
    }
    /* the epoch as the main process walked it: checkpoints as jobs go */
    if (!(r->mix = calloc(1, sizeof(*r->mix))) || mix_plan_init(r->mix, &pp, &err) < 0 ||
        mix_plan_adopt(r->mix, m->mix_units, m->mix_ends, &err) < 0) {
        snprintf(why, cap, "%.180s", r->mix ? err.msg : "out of memory");
        return -1;
    }
    if (r->mix->base[m->nsources] != m->dataset_samples) {
        snprintf(why, cap, "the mixture's sources hold %llu samples here, %llu in the main "
                 "process", (unsigned long long)r->mix->base[m->nsources],
                 (unsigned long long)m->dataset_samples);
        return -1;
    }
    return 0;
}

/* The stream's subset as the main process read it (wire.h): a range
 * made here, a named set read from the pack and checked to be the same
 * file (name, size, CRC-32C).  Returns 0, or -1 with why (cap bytes). */
static int ring_subset(const struct dataset *ds, const struct wire_subset *w,
                       struct subset *out, char *why, size_t cap)
{
    struct dataset_subset_ref ref = {.count = w->count, .bytes = w->bytes, .crc = w->crc};
    struct rf_err err;

    memset(out, 0, sizeof(*out));
    switch (w->kind) {
    case WIRE_SUBSET_NONE:
        return 0;
    case WIRE_SUBSET_RANGE:
        if (w->stop > dataset_info(ds)->samples || subset_range(out, w->start, w->stop) < 0) {
            snprintf(why, cap, "subset %llu:%llu: out of range or out of memory",
                     (unsigned long long)w->start, (unsigned long long)w->stop);
            return -1;
        }
        return 0;
    case WIRE_SUBSET_NAMED:
        memcpy(ref.name, w->name, sizeof(ref.name));
        memcpy(ref.file, w->file, sizeof(ref.file));
        ref.name[sizeof(ref.name) - 1] = ref.file[sizeof(ref.file) - 1] = '\0';
        if (dataset_subset_read(ds, &ref, out, &err) < 0) {
            /* err names the file first; a long one is cut at the end */
            if (snprintf(why, cap, "subset %s, read again by a worker: %s", ref.name,
                         err.msg) >= (int)cap)
                why[cap - 1] = '\0';
            return -1;
        }
        return 0;
    }
    snprintf(why, cap, "subset of unknown kind %u", w->kind);
    return -1;
}

static void ring_add(struct wstate *ws, const struct wire_ring_add *m, int fd)
{
    struct wring *r = ring_find(ws, m->ring_id);
    const struct xform_def *xf = xform_get(m->xform.id);
    struct rf_err err = { 0 };
    struct stat sb;
    void *mem;
    struct wring mixed = {0}; /* a mixture's view, plan and token indexes */
    struct dataset *ds;

    if (r || fd < 0 || m->dataset_id >= ws->nds || !ws->ds_dir[m->dataset_id][0] || !xf) {
        log_warn("worker: bad RING_ADD for ring %u", m->ring_id);
        goto fail;
    }
    if (m->nsources) {
        struct wring tmp = {0};
        char why[192];

        if (ring_mix(ws, &tmp, m, xf->windows, why, sizeof(why)) < 0) {
            log_warn("worker: ring %u: %s", m->ring_id, why);
            ring_mix_free(&tmp);
            for (unsigned i = 0; i < MAX_RINGS && !r; i++)
                if (!ws->rings[i].used)
                    r = &ws->rings[i];
            if (r) { /* kept, unmapped: its jobs fail its stream with why */
                *r = (struct wring){ .id = m->ring_id, .used = true, .p = *m };
                snprintf(r->sub_err, sizeof(r->sub_err), "%s", why);
            }
            goto fail;
        }
        mixed = tmp;
        ds = mixed.view;
    } else {
        ds = dataset_get(ws, m->dataset_id, m->dataset_identity);
    }
    if (!ds) {
        /* kept, unmapped, so its jobs say why (run_job) */
        for (unsigned i = 0; i < MAX_RINGS && !r; i++)
            if (!ws->rings[i].used)
                r = &ws->rings[i];
        if (r)
            *r = (struct wring){ .id = m->ring_id, .used = true, .p = *m };
        goto fail;
    }
    if (fstat(fd, &sb) == -1 || (uint64_t)sb.st_size != m->total_size) {
        log_warn("worker: ring %u has the wrong size", m->ring_id);
        goto fail;
    }
    for (unsigned i = 0; i < MAX_RINGS && !r; i++)
        if (!ws->rings[i].used)
            r = &ws->rings[i];
    if (!r)
        goto fail;
    /* MAP_POPULATE: the page tables are built here, when the ring is
     * added, not by page faults inside the first batch's jobs */
    mem = mmap(NULL, m->total_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (mem == MAP_FAILED) {
        log_warn("worker: mmap ring %u: %s", m->ring_id, strerror(errno));
        goto fail;
    }
    /* the whole layout again from this worker's own schema and the stream's
     * parameters, checked against the main process's figures (the message),
     * never against the ring's header: the client can have rewritten that
     * before this worker first maps the ring (ring.h T3) */
    if (xf->geometry(ds, &m->xform, &r->out, &err) < 0 ||
        xform_fields_build(dataset_info(ds), &m->xform, &r->out,
                           m->ring_version ? m->ring_version : RING_VERSION, m->geom.depth,
                           m->batch, &r->fx, &err) < 0 ||
        xform_fields_match(&r->fx, &m->geom, m->fields_digest, &err) < 0) {
        log_warn("worker: ring %u does not match its transform: %s", m->ring_id, err.msg);
        munmap(mem, m->total_size);
        goto fail;
    }
    r->g = r->fx.g;
    if (xf->windows && !mixed.mix) {
        /* the token index, from this worker's own open, must give the
         * main process's count of windows */
        if (tokidx_build(ds, &r->tok, &err) < 0 ||
            tokidx_windows(&r->tok, m->xform.context) != m->dataset_samples) {
            if (err.msg[0] == '\0' || r->tok.start)
                rf_err_set(&err, -EBADMSG, "%llu windows here, %llu in the main process",
                           (unsigned long long)tokidx_windows(&r->tok, m->xform.context),
                           (unsigned long long)m->dataset_samples);
            log_warn("worker: ring %u: transform tokens: %s", m->ring_id, err.msg);
            tokidx_free(&r->tok);
            munmap(mem, m->total_size);
            goto fail;
        }
    }
    {
        /* room for one of its samples in the worker's own memory (run_job):
         * every FIXED column's item, for kind fields */
        uint64_t need = r->g.sample_bytes;

        r->label_field = -1;
        if (r->fx.kind_fields) {
            const struct schema *sc = &dataset_info(ds)->schema;

            need = 0;
            for (uint32_t k = 0; k < r->fx.n; k++) {
                r->fixed_at[k] = need;
                if (r->fx.f[k].kind == RING_FIELD_FIXED)
                    need += r->fx.f[k].item_bytes;
                if (sc->f[k].kind == SCHEMA_SCALAR && sc->f[k].dtype == DATASET_DTYPE_I64 &&
                    strcmp(sc->f[k].name, "label") == 0)
                    r->label_field = (int)k;
            }
        }
        if (!buf_grow(&ws->sample, &ws->sample_cap, need ? need : 1)) {
            log_warn("worker: ring %u: no memory for a %llu-byte sample", m->ring_id,
                     (unsigned long long)need);
            tokidx_free(&r->tok);
            munmap(mem, m->total_size);
            goto fail;
        }
    }
    r->used = true;
    r->id = m->ring_id;
    r->mem = mem;
    r->size = m->total_size;
    r->p = *m;
    r->view = mixed.view;
    r->mix = mixed.mix;
    r->toks = mixed.toks;
    mixed = (struct wring){0};
    if (ring_subset(ds, &m->subset, &r->sub, r->sub_err, sizeof(r->sub_err)) < 0)
        log_warn("worker: ring %u: %s", m->ring_id, r->sub_err);
fail:
    ring_mix_free(&mixed);
    if (fd >= 0)
        close(fd);
}

static void ring_del(struct wstate *ws, uint32_t id)
{
    struct wring *r = ring_find(ws, id);

    if (!r)
        return;
    if (r->p.dataset_id < ws->nds)
        badlog_flush(ws, r->p.dataset_id, clock_mono_ns());
    if (r->mem)
        munmap(r->mem, r->size);
    subset_free(&r->sub);
    tokidx_free(&r->tok);
    ring_mix_free(r);
    memset(r, 0, sizeof(*r));
}

/* Moves the stages a transform timed (xform_ctx) into the worker's
 * counters, for STATS. */
static void take_stage_times(struct wstate *ws)
{
    ws->c.image_ns += ws->xc.decode_ns;
    ws->c.resize_ns += ws->xc.resize_ns;
    ws->c.write_ns += ws->xc.write_ns;
    ws->c.tiled += ws->xc.tiled;
    ws->xc.decode_ns = ws->xc.resize_ns = ws->xc.write_ns = ws->xc.tiled = 0;
}

/*
 * ATTACH augment=: runs the stream's ops on the sample at px (the worker's
 * own memory, r->out's image) with rng, the sample's stream after the
 * transform's draws; tr (or NULL) gets the geometric steps applied.
 * Returns 0, or a negative errno with *why and err
 * (an op out of scratch memory: a bad sample).
 */
static int augment_sample(struct wstate *ws, struct wring *r, uint8_t *px,
                          struct rng_stream *rng, struct aug_trace *tr, enum wire_bad *why,
                          struct rf_err *err)
{
    struct aug_img im;
    int rc = augment_image(&r->out, &im, err);

    if (rc == 0) {
        im.px = px;
        rc = augment_run(&r->p.xform.aug, &im, rng, &ws->plugins, &ws->aug_scratch,
                         ws->c.aug_ns, ws->c.aug_images, tr, err);
    }
    if (rc < 0) /* a plugin's refusal too: errors.bad.shape */
        *why = rc == -ENOMEM ? BAD_TOO_LARGE : BAD_SHAPE;
    return rc;
}

/*
 * A mask of the bound image (dst, the image's size, value_bytes 1 or 2,
 * in the image's layout) through the augmentation's geometric steps
 * (ws->aug_trace).  Returns 0, or a negative errno with *why and err.
 */
static int augment_mask(struct wstate *ws, const struct wring *r, uint8_t *dst,
                        uint32_t value_bytes, enum wire_bad *why, struct rf_err *err)
{
    struct aug_img m;
    int rc = augment_image(&r->out, &m, err);

    if (rc < 0 || ws->aug_trace.n == 0)
        return rc;
    /* one channel: CHW and HWC are the same bytes; a u16 value moves as
     * two byte channels through the index-only ops */
    m = (struct aug_img){ .px = dst, .w = m.w, .h = m.h, .c = value_bytes,
                          .layout = value_bytes == 1 ? m.layout : AUG_HWC };
    rc = aug_trace_mask(&ws->aug_trace, &m, &ws->aug_scratch);
    if (rc < 0) {
        *why = rc == -ENOMEM ? BAD_TOO_LARGE : BAD_SHAPE;
        return rf_err_set(err, rc, "augment: the mask could not follow the image's "
                          "geometric ops: %s", rc == -ENOMEM ? "no memory" : "bad size");
    }
    return 0;
}

/*
 * FIELDS: a sample of a kind-fields dataset (proto/schema.h), made in the
 * worker's own memory.  The record is checked and decoded into
 * ws->decoded, split into its fields' parts (schema_record_split), the
 * bound image transformed into its place in ws->sample, a mask of it
 * resampled through the image's view (targets.h), tensors and scalars
 * copied there too; a RAGGED field's rows are left where they are (in
 * decoded, or boxes mapped through the view in ws->boxes) for
 * commit_fields, which the caller runs at once, before the next record is
 * decoded.  A part that does not split, a mask or a box that does not map
 * is a bad sample, so a substitute replaces every field of the sample.
 */
static int make_fields(struct wstate *ws, struct wring *r, uint64_t epoch, uint64_t idx,
                       const struct dataset_loc *loc, const uint8_t *stored, int32_t *label,
                       enum wire_bad *why, struct rf_err *err)
{
    struct dataset *ds = ring_ds(ws, r);
    const struct schema *sc = &dataset_info(ds)->schema;
    const struct xform_def *xf = xform_get(r->p.xform.id);
    uint32_t bound = r->p.xform.field;
    struct rng_stream rng;
    uint64_t t0 = clock_mono_ns(), t1;
    int n, rc = -EBADMSG;

    n = dataset_decode(ds, loc, stored, ws->decoded, ws->decoded_cap, ws->dctx, err);
    t1 = clock_mono_ns();
    ws->c.decode_ns += t1 - t0;
    if (n < 0) {
        *why = n == -EBADMSG && strstr(err->msg, "checksum") ? BAD_CHECKSUM : BAD_DECODE;
        return n;
    }
    if (schema_record_split(sc, ws->decoded, (size_t)n, ws->parts, err) < 0) {
        *why = BAD_SHAPE;
        goto where;
    }
    ws->part_dropped = 0;
    ws->aug_trace.n = 0;
    /* the bound image first: its view places its mask and boxes */
    if (bound != WIRE_NO_FIELD) {
        uint8_t *dst = ws->sample + r->fixed_at[bound];

        rng_stream_init(&rng, r->p.seed, (uint32_t)epoch, idx);
        rc = xf->apply(ds, &r->p.xform, ws->decoded + ws->parts[bound].off,
                       ws->parts[bound].len, &rng, &ws->xc, dst, &r->out, why, err);
        take_stage_times(ws);
        if (rc == 0 && r->p.xform.aug.n > 0) /* dst is the worker's own (sample) */
            rc = augment_sample(ws, r, dst, &rng, &ws->aug_trace, why, err);
        if (rc < 0) {
            rf_err_prefix(err, "field %s", sc->f[bound].name);
            goto where;
        }
    }
    for (uint32_t k = 0; k < sc->n; k++) {
        const struct schema_field *f = &sc->f[k];
        const uint8_t *part = ws->decoded + ws->parts[k].off;
        uint32_t len = ws->parts[k].len;
        uint8_t *dst = ws->sample + r->fixed_at[k];

        switch (f->kind) {
        case SCHEMA_IMAGE:
            if (k == bound)
                break;
            /* a mask of the bound image (xform_bind_field allows no other) */
            rc = tgt_mask(&ws->xc.view, part, len, (uint32_t)dataset_dtype_size(f->dtype), dst,
                          why, err);
            if (rc == 0) /* then the augmentation's geometric ops, as the image */
                rc = augment_mask(ws, r, dst, (uint32_t)dataset_dtype_size(f->dtype), why, err);
            if (rc < 0) {
                rf_err_prefix(err, "field %s", f->name);
                goto where;
            }
            break;
        case SCHEMA_TENSOR:
        case SCHEMA_SCALAR:
            memcpy(dst, part, len); /* schema_record_split checked the length */
            break;
        case SCHEMA_RAGGED:
        case SCHEMA_BYTES:
            ws->part_at[k] = part;
            ws->part_rows[k] = schema_rows(f, len);
            if (f->role == SCHEMA_ROLE_BOXES && bound != WIRE_NO_FIELD && f->of == bound) {
                uint64_t nb = ws->part_rows[k];
                float *in = NULL;

                if (!buf_grow((uint8_t **)&ws->boxes[k], &ws->boxes_cap[k],
                              nb ? nb * 16 : 16) ||
                    !buf_grow(&ws->keep[k], &ws->keep_cap[k], nb ? nb : 1)) {
                    *why = BAD_TOO_LARGE;
                    rc = rf_err_set(err, -ENOMEM, "field %s: no memory for %llu boxes", f->name,
                                    (unsigned long long)nb);
                    goto where;
                }
                /* the part is not aligned for floats: copied, then mapped in place */
                in = ws->boxes[k];
                if (nb)
                    memcpy(in, part, nb * 16);
                rc = tgt_boxes(&ws->xc.view, in, (uint32_t)nb, in, ws->keep[k], err);
                if (rc > 0 && ws->aug_trace.n > 0) {
                    /* then the augmentation's geometric ops, as the image */
                    if (!buf_grow(&ws->step_keep, &ws->step_keep_cap, (size_t)rc)) {
                        *why = BAD_TOO_LARGE;
                        rc = rf_err_set(err, -ENOMEM, "field %s: no memory for %llu boxes",
                                        f->name, (unsigned long long)nb);
                        goto where;
                    }
                    rc = aug_trace_boxes(&ws->aug_trace, in, (uint32_t)rc, ws->keep[k], nb,
                                         ws->step_keep, err);
                }
                if (rc < 0) {
                    *why = BAD_SHAPE;
                    rf_err_prefix(err, "field %s", f->name);
                    goto where;
                }
                ws->part_dropped += (uint32_t)(nb - (uint64_t)rc);
                ws->part_at[k] = (const uint8_t *)in;
                ws->part_rows[k] = (uint64_t)rc;
            } else if (f->role == SCHEMA_ROLE_ROWS && sc->f[f->of].of == bound &&
                       bound != WIRE_NO_FIELD) {
                /* one row per box of field f->of (schema_record_split
                 * checked the counts agree): the rows of the boxes kept */
                uint64_t nb = ws->part_rows[k], kept = 0;
                const uint8_t *keep = ws->keep[f->of];
                uint8_t *out;

                if (!buf_grow((uint8_t **)&ws->boxes[k], &ws->boxes_cap[k],
                              nb ? nb * f->row_bytes : 1)) {
                    *why = BAD_TOO_LARGE;
                    rc = rf_err_set(err, -ENOMEM, "field %s: no memory for %llu rows", f->name,
                                    (unsigned long long)nb);
                    goto where;
                }
                out = (uint8_t *)ws->boxes[k];
                for (uint64_t row = 0; row < nb; row++)
                    if (keep[row])
                        memcpy(out + kept++ * f->row_bytes, part + row * f->row_bytes,
                               f->row_bytes);
                ws->part_at[k] = out;
                ws->part_rows[k] = kept;
            }
            break;
        default:
            break;
        }
    }
    ws->c.transform_ns += clock_mono_ns() - t1;
    *label = -1;
    if (r->label_field >= 0) {
        int64_t v;

        memcpy(&v, ws->decoded + ws->parts[r->label_field].off, sizeof(v)); /* little-endian */
        if (v >= INT32_MIN && v <= INT32_MAX)
            *label = (int32_t)v;
    }
    return 0;
where:
    ws->c.transform_ns += clock_mono_ns() - t1;
    rf_err_prefix(err, "%s: record %llu at byte %llu", loc->shard_path,
                  (unsigned long long)loc->record, (unsigned long long)loc->offset);
    return rc < 0 ? rc : -EBADMSG;
}

/*
 * Makes one sample from dataset index idx, whose stored bytes are at stored,
 * into dst: check, decode, transform.  The record is checked and decoded in
 * the worker's own memory (ws->decoded), and dst is only ever written, never
 * read: it may be a ring slot, which its client can write at any time (a
 * zstd frame decoded there reads back what the client changed, and its
 * checksum would blame the dataset).  Returns 0, or a negative errno with
 * *why and err naming the shard, record and byte offset, and what is wrong.
 */
static int make_sample(struct wstate *ws, struct wring *r, uint64_t epoch, uint64_t idx,
                       const struct dataset_loc *loc, const uint8_t *stored,
                       uint8_t *dst, int32_t *label, enum wire_bad *why, struct rf_err *err)
{
    struct dataset *ds = ring_ds(ws, r);
    const struct xform_def *xf = xform_get(r->p.xform.id);
    bool augment = r->p.xform.aug.n > 0;
    uint8_t *out = dst;
    struct rng_stream rng;
    uint64_t t0, t1, t2;
    int n;

    if (r->mix ? quarantined(ws, r->p.sources[mix_plan_source(r->mix, idx)],
                             idx - r->mix->base[mix_plan_source(r->mix, idx)])
               : quarantined(ws, r->p.dataset_id, idx)) {
        *why = BAD_QUARANTINED;
        return rf_err_set(err, -EBADMSG, "%s: record %llu at byte %llu: quarantined: it killed "
                          "workers before", loc->shard_path, (unsigned long long)loc->record,
                          (unsigned long long)loc->offset);
    }
    if (r->fx.kind_fields) {
        if (!buf_grow(&ws->decoded, &ws->decoded_cap, loc->decoded_len ? loc->decoded_len : 1)) {
            *why = BAD_TOO_LARGE;
            return rf_err_set(err, -ENOMEM, "%s: record %llu at byte %llu: no memory to decode "
                              "its %u bytes", loc->shard_path, (unsigned long long)loc->record,
                              (unsigned long long)loc->offset, loc->decoded_len);
        }
        (void)dst; /* ws->sample: commit_fields places it in each ring */
        return make_fields(ws, r, epoch, idx, loc, stored, label, why, err);
    }
    if (xf->direct && loc->decoded_len != r->out.sample_bytes) {
        *why = BAD_SHAPE;
        return rf_err_set(err, -EBADMSG, "%s: record %llu at byte %llu: %u bytes, the shape "
                          "needs %llu", loc->shard_path, (unsigned long long)loc->record,
                          (unsigned long long)loc->offset, loc->decoded_len,
                          (unsigned long long)r->out.sample_bytes);
    }
    if (!buf_grow(&ws->decoded, &ws->decoded_cap, loc->decoded_len ? loc->decoded_len : 1)) {
        *why = BAD_TOO_LARGE;
        return rf_err_set(err, -ENOMEM, "%s: record %llu at byte %llu: no memory to decode its "
                          "%u bytes", loc->shard_path, (unsigned long long)loc->record,
                          (unsigned long long)loc->offset, loc->decoded_len);
    }
    if (xf->direct) {
        /* the record is the sample: decoded here, then copied into dst
         * (timed by run_job over the whole job: two clock reads per
         * 784-byte sample were 4% of the daemon's cycles) */
        n = dataset_decode(ds, loc, stored, ws->decoded, ws->decoded_cap, ws->dctx, err);
        if (n < 0) {
            *why = strstr(err->msg, "checksum") ? BAD_CHECKSUM : BAD_DECODE;
            return n;
        }
        if (augment) {
            rng_stream_init(&rng, r->p.seed, (uint32_t)epoch, idx);
            n = augment_sample(ws, r, ws->decoded, &rng, NULL, why, err);
            if (n < 0) {
                rf_err_prefix(err, "%s: record %llu at byte %llu", loc->shard_path,
                              (unsigned long long)loc->record, (unsigned long long)loc->offset);
                return n;
            }
        }
        memcpy(dst, ws->decoded, r->out.sample_bytes);
        *label = (int32_t)loc->label;
        return 0;
    }
    if (augment) {
        if (!buf_grow(&ws->aug, &ws->aug_cap, r->out.sample_bytes)) {
            *why = BAD_TOO_LARGE;
            return rf_err_set(err, -ENOMEM, "%s: record %llu at byte %llu: no memory for a "
                              "%llu-byte sample to augment", loc->shard_path,
                              (unsigned long long)loc->record, (unsigned long long)loc->offset,
                              (unsigned long long)r->out.sample_bytes);
        }
        out = ws->aug;
    }
    t0 = clock_mono_ns();
    n = dataset_decode(ds, loc, stored, ws->decoded, ws->decoded_cap, ws->dctx, err);
    t1 = clock_mono_ns();
    ws->c.decode_ns += t1 - t0;
    if (n < 0) {
        *why = n == -EBADMSG && strstr(err->msg, "checksum") ? BAD_CHECKSUM : BAD_DECODE;
        return n;
    }
    rng_stream_init(&rng, r->p.seed, (uint32_t)epoch, idx);
    n = xf->apply(ds, &r->p.xform, ws->decoded, (size_t)n, &rng, &ws->xc, out, &r->out, why,
                  err);
    t2 = clock_mono_ns();
    ws->c.transform_ns += t2 - t1;
    take_stage_times(ws);
    if (n >= 0 && augment) {
        /* after the transform's draws, on the worker's copy (augment.h) */
        n = augment_sample(ws, r, out, &rng, NULL, why, err);
        if (n == 0) {
            t1 = clock_mono_ns();
            memcpy(dst, out, r->out.sample_bytes);
            ws->c.write_ns += clock_mono_ns() - t1;
        }
    }
    if (n < 0) {
        /* the transform's message says what, not where */
        rf_err_prefix(err, "%s: record %llu at byte %llu", loc->shard_path,
                      (unsigned long long)loc->record, (unsigned long long)loc->offset);
        return n;
    }
    *label = (int32_t)loc->label;
    return 0;
}

/* The message for a record whose read failed with result (a negative
 * errno) or, with result 0, was never read (no memory to stage it). */
static void read_failed(const struct dataset_loc *loc, int result, struct rf_err *err)
{
    rf_err_set(err, result ? result : -ENOMEM, "%s: record %llu at byte %llu: %s%s",
               loc->shard_path, (unsigned long long)loc->record,
               (unsigned long long)loc->offset, result ? "read failed: " : "not read: ",
               result ? strerror(-result) : "no memory to stage the job's records");
}

/* Reads one record synchronously (substitutes are rare). */
static int read_one(struct wstate *ws, const struct dataset_loc *loc, const uint8_t **out,
                    struct rf_err *err)
{
    struct io_req req;

    if (!buf_grow(&ws->stage, &ws->stage_cap, loc->stored_len ? loc->stored_len : 1)) {
        read_failed(loc, 0, err);
        return -ENOMEM;
    }
    req = (struct io_req){ .fd = loc->fd, .off = loc->offset, .len = loc->stored_len,
                           .buf = ws->stage };
    io_read_all(&ws->io, &req, 1);
    if (req.result == 0 && fault_hit(FAULT_READ))
        req.result = -EIO; /* an injected read error (fault.h) */
    ws->c.bytes_read += req.done;
    *out = req.data;
    if (req.result < 0)
        read_failed(loc, req.result, err);
    return req.result;
}

/* The dataset index at position pos of the stream's samples. */
static uint64_t ring_index(const struct wring *r, uint64_t pos)
{
    return r->sub.nruns ? subset_at(&r->sub, pos) : pos;
}

/* Finds the next good sample after position pos (a mixture ring's: the bad
 * sample's mixture index) and writes it to dst. */
static int substitute(struct wstate *ws, struct wring *r, uint64_t epoch, uint64_t pos,
                      uint8_t *dst, uint64_t *index, int32_t *label, char *reason,
                      size_t reason_cap)
{
    struct dataset *ds = ring_ds(ws, r);
    struct sampler_order order;
    uint64_t n = r->p.dataset_samples, base = 0;

    /* the parameters passed sampler_init when the job was planned; a
     * mixture's substitutes come from the bad sample's own source, in
     * order (pos: its mixture index) */
    if (r->mix) {
        uint32_t s = mix_plan_source(r->mix, pos);

        base = r->mix->base[s];
        n = r->mix->base[s + 1] - base;
        pos -= base;
    }
    sampler_order_init(&order, n, r->p.seed, (uint32_t)epoch, r->mix ? 0 : r->p.shuffle,
                       r->mix ? 0 : r->p.shuffle_block);
    for (uint32_t k = 1; k <= r->p.max_bad && k < n; k++) {
        uint64_t idx = base + ring_index(r, sampler_order_at(&order, (pos + k) % n));
        struct dataset_loc loc;
        enum wire_bad why = BAD_READ;
        const uint8_t *stored;
        struct rf_err err;

        int rc = dataset_locate_load(ds, idx, &loc, &err);

        /* a remote dataset's shard not in the node cache now is no fault of
         * its records: the next position is tried */
        if (rc == -ENOENT && dataset_on_demand(ds))
            continue;
        if (rc < 0 || read_one(ws, &loc, &stored, &err) < 0) {
            bad_sample(ws, r->p.dataset_id, idx, BAD_READ, err.msg);
            continue;
        }
        if (make_sample(ws, r, epoch, idx, &loc, stored, dst, label, &why, &err) == 0) {
            *index = idx;
            return 0;
        }
        bad_sample(ws, r->p.dataset_id, idx, why, err.msg);
    }
    snprintf(reason, reason_cap,
             "%u bad samples in a row after epoch %llu position %llu: the dataset is too damaged "
             "to go on (run ringfeed-pack verify on it)",
             r->p.max_bad, (unsigned long long)epoch, (unsigned long long)pos);
    return -EIO;
}

/*
 * Records of a shuffled epoch lie anywhere in the shard, so each one's first
 * touch (its CRC) waits on memory: with the mmap backend that wait was the
 * largest cost per small record (perf: crc32_iscsi 27% of the daemon's
 * cycles at 784 bytes, where bench/crc32c runs 10 GB/s from cache).  The
 * loop asks for record j + PREFETCH_AHEAD's lines while it works on record
 * j; only the first PREFETCH_MAX bytes, since a large record (a JPEG) costs
 * far more to decode than to fetch.
 */
#define PREFETCH_AHEAD 4
#define PREFETCH_MAX 4096

static void prefetch_record(const struct io_req *r)
{
    size_t n = r->done < PREFETCH_MAX ? r->done : PREFETCH_MAX;

    if (!r->data || r->result != 0)
        return;
    for (size_t off = 0; off < n; off += 64)
        __builtin_prefetch((const char *)r->data + off, 0, 3);
}

/* Plans the job: the dataset index of each of its samples, by the stream's
 * sampler for the job's epoch.  -EINVAL when the job lies outside that
 * epoch's batches (a main process that broke the protocol). */
/* Wakes the client if it sleeps on the slot (ring.h W2): the fence pairs
 * with the client's between storing `sleeping` and loading `ready`. */
static void wake_client(const struct wring *r, struct ring_slot *slot)
{
    struct ring_hdr *h = r->mem;

    atomic_thread_fence(memory_order_seq_cst);
    if (r->p.wake_always || atomic_load_explicit(&h->sleeping, memory_order_relaxed))
        ring_futex_wake(&slot->ready);
}

/* Sets chunk's bit in the slot of batch g; the worker completing the mask
 * publishes (ring.h W1, W2).  True when it published. */
static bool mark_chunk(const struct wring *r, struct ring_slot *slot, uint32_t chunk, uint64_t g)
{
    uint64_t bit = 1ull << chunk, old;

    old = atomic_fetch_or_explicit(&slot->chunks_done, bit, memory_order_acq_rel);
    if (slot->chunks >= 1 && slot->chunks <= RING_MAX_CHUNKS) {
        uint64_t all = slot->chunks == 64 ? ~0ull : (1ull << slot->chunks) - 1;

        if ((old | bit) == all && old != all) {
            atomic_store_explicit(&slot->ready, ring_ready_word(g), memory_order_release);
            wake_client(r, slot);
            return true;
        }
    }
    return false;
}

/* The job's samples into plan[] and whether each is rank padding into
 * pad[] (sampler.h; a mixture's, its source's: one walk of the plan). */
static int plan_job(struct wring *r, const struct wire_job *job, struct sampler *s,
                    uint64_t *plan, bool *pad)
{
    struct sampler_params sp = {
        .n = r->p.dataset_samples,
        .seed = r->p.seed,
        .epoch = (uint32_t)job->epoch,
        .rank = r->p.rank,
        .world = r->p.world,
        .batch = r->p.batch,
        .shuffle = r->p.shuffle,
        .block = r->p.shuffle_block,
        .drop_last = r->p.drop_last != 0,
        .drop_last_batch = r->p.drop_last_batch != 0,
        .mix = r->mix,
    };

    if (sampler_init(s, &sp, NULL) < 0 ||
        (uint64_t)job->first + job->count > sampler_batch_count(s, job->seq))
        return -EINVAL;
    if (r->mix) {
        /* the checkpoints up to here, once (a resume mid-epoch walks there
         * in its first job, on its own stream's time) */
        mix_plan_reach(r->mix, r->mix->p.per_stream ? job->seq
                                                    : job->seq * r->p.batch + job->first);
        mix_plan_range(r->mix, job->epoch, job->seq, job->first, job->count, plan, NULL, pad,
                       &r->mix_cur);
        return 0;
    }
    sampler_batch_range(s, job->seq, job->first, job->count, plan);
    for (uint32_t j = 0; j < job->count; j++) {
        plan[j] = ring_index(r, plan[j]);
        pad[j] = sampler_is_padding(s, job->seq, job->first + j);
    }
    return 0;
}

/* How often a worker looks for evicted shards it still holds open. */
#define SWEEP_NS 100000000ull

/*
 * An on-demand dataset (a remote one, in the node cache): the main process
 * planned the job only once every shard its samples lie in was in the
 * cache, and keeps them there until the job is done (daemon/ahead.h).  So
 * each is loaded here; one that cannot be (the cache folder was removed
 * under the daemon) is reported with the file named (WIRE_SHARD_LOST,
 * nothing written): the main process fetches it again and reruns the job.
 * The dataset's records are not at fault.  Every SWEEP_NS the shards
 * the cache evicted since are closed, so their disk space comes back.
 */
static int load_shards(struct wstate *ws, struct dataset *ds, const uint64_t *plan, uint32_t n,
                       char *reason, size_t cap)
{
    uint64_t now = clock_mono_ns();
    uint32_t last = UINT32_MAX;
    struct rf_err err;

    if (now - ws->sweep_ns >= SWEEP_NS) {
        ws->sweep_ns = now;
        for (uint32_t i = 0; i < ws->nds; i++) {
            if (!ws->ds_on_demand[i] || !ws->ds[i] || dataset_removed(ws->ds[i]) == 0)
                continue;
            io_forget(&ws->io); /* its maps of the files it closes */
            dataset_sweep(ws->ds[i]);
        }
    }
    for (uint32_t j = 0; j < n; j++) {
        uint32_t sh = dataset_shard_of(ds, plan[j]);

        if (sh == last)
            continue;
        last = sh;
        if (dataset_shard_load(ds, sh, &err) < 0) {
            /* the message's head names the file; a long one is cut */
            snprintf(reason, cap, "the node cache lost a shard a batch needs: %.140s",
                     err.msg);
            return -EIO;
        }
    }
    return 0;
}

/* A slot a job writes: in ring r, batch g's slot, and its pixel block. */
struct dest {
    struct wring *r;
    struct ring_slot *slot;
    uint8_t *data;
    uint64_t g;
};

static struct dest dest_of(struct wring *r, uint32_t slot, uint64_t g)
{
    /* placed by the geometry checked at RING_ADD, never by the shared header */
    struct ring_slot *s = (struct ring_slot *)((char *)r->mem + RING_HDR_SIZE +
                                               (uint64_t)slot * r->g.slot_stride);

    return (struct dest){ .r = r, .slot = s, .data = (uint8_t *)s + r->g.meta_size, .g = g };
}

/*
 * The slots job writes into d[]: its own ring's (r, checked by the caller)
 * first, then those of the other rings of a shared batch (SHARING in the
 * daemon's share.c) that are still mapped.  The rings of one stream
 * function have the same geometry: checked here, never assumed; a ring gone
 * since (its client left) or one that differs is left out.  Returns how
 * many, at least 1.
 */
static uint32_t job_dests(struct wstate *ws, struct wring *r, const struct wire_job *job,
                          struct dest *d)
{
    uint32_t n = 0;

    d[n++] = dest_of(r, job->slot, job->stream_seq);
    for (uint32_t t = 0; t + 1 < job->ntargets && t + 1 < WIRE_TARGETS_MAX; t++) {
        const struct wire_target *to = &job->more[t];
        struct wring *r2 = ring_find(ws, to->ring_id);

        if (!r2 || !r2->mem || r2->g.batch != r->g.batch ||
            r2->g.sample_bytes != r->g.sample_bytes || r2->g.meta_size != r->g.meta_size ||
            !xform_fields_equal(&r2->fx, &r->fx) || to->slot >= r2->g.depth)
            continue;
        d[n++] = dest_of(r2, to->slot, to->stream_seq);
    }
    return n;
}

/*
 * FIELDS: sample j of the job (at place `at` of the batch), just made by
 * make_fields, into the job's rings: each FIXED column's item copied from
 * ws->sample into each ring (never from one ring into another), each
 * RAGGED field's rows appended to the job's own values and offsets.  A
 * batch whose rows pass a field's capacity fails the stream: -EOVERFLOW
 * with reason naming the field, the rows and the capacity.
 */
static int commit_fields(struct wstate *ws, struct wring *r, const struct dest *d, uint32_t nd,
                         uint32_t j, uint32_t at, uint64_t batch_seq, char *reason,
                         size_t reason_cap)
{
    for (uint32_t k = 0; k < r->fx.n; k++) {
        const struct ring_field *c = &r->fx.f[k];

        if (c->kind == RING_FIELD_FIXED) {
            for (uint32_t t = 0; t < nd; t++)
                memcpy((uint8_t *)d[t].slot + c->offset + (uint64_t)at * c->item_bytes,
                       ws->sample + r->fixed_at[k], c->item_bytes);
            continue;
        }
        {
            uint64_t have = (uint64_t)ws->offs[k][j], rows = ws->part_rows[k];

            if (rows > c->capacity - have) {
                struct rf_err e;

                /* cut to the reason's size (a DONE carries 192 bytes) */
                rf_err_set(&e, -EOVERFLOW, "field %.*s: batch %llu needs %llu+ rows, over its "
                           "capacity of %llu rows (MANIFEST cap=, or batch x max=)",
                           (int)RING_FIELD_NAME, c->name, (unsigned long long)batch_seq,
                           (unsigned long long)(have + rows), (unsigned long long)c->capacity);
                memcpy(reason, e.msg, strnlen(e.msg, reason_cap - 1));
                reason[strnlen(e.msg, reason_cap - 1)] = '\0';
                return -EOVERFLOW;
            }
            if (!buf_grow(&ws->vals[k], &ws->vals_cap[k],
                          have + rows ? (have + rows) * c->item_bytes : 1)) {
                snprintf(reason, reason_cap, "field %.*s: no memory for %llu rows",
                         (int)RING_FIELD_NAME, c->name, (unsigned long long)(have + rows));
                return -ENOMEM;
            }
            if (rows)
                memcpy(ws->vals[k] + have * c->item_bytes, ws->part_at[k],
                       rows * c->item_bytes);
            ws->offs[k][j + 1] = (int64_t)(have + rows);
        }
    }
    return 0;
}

/* FIELDS: the job's RAGGED columns into each ring once every sample is in:
 * batch + 1 offsets (those past count repeat the last) and the values. */
static void put_ragged(struct wstate *ws, struct wring *r, const struct dest *d, uint32_t nd,
                       uint32_t count, uint64_t *rows_out)
{
    for (uint32_t k = 0; k < r->fx.n; k++) {
        const struct ring_field *c = &r->fx.f[k];
        int64_t last = ws->offs[k][count];

        if (c->kind != RING_FIELD_RAGGED)
            continue;
        for (uint32_t i = count + 1; i <= r->g.batch && i <= WIRE_JOB_MAX; i++)
            ws->offs[k][i] = last;
        for (uint32_t t = 0; t < nd; t++) {
            uint8_t *base = (uint8_t *)d[t].slot;

            memcpy(base + c->offsets_at, ws->offs[k], ((size_t)r->g.batch + 1) * sizeof(int64_t));
            if (last)
                memcpy(base + c->offset, ws->vals[k], (size_t)last * c->item_bytes);
        }
        if (k < WIRE_FIELDS_MAX)
            rows_out[k] = (uint64_t)last;
    }
}

/*
 * Transform tokens (window.h): the job's windows, each read as the pieces
 * of documents it spans, all in one io_read_all, straight into the slot's
 * columns for a ring of its own (nd 1), or into ws->stage and copied from
 * there into each ring of a shared batch.  The per-sample records go to
 * meta[] (index: the window; label -1).  A window is never substituted:
 * a read that fails fails the stream (or the dataset, when its files
 * changed), the reason naming the window, shard and record; nothing is
 * reported per sample in a careful run, so a crash is never pinned on a
 * dataset index (windows are not records).  Returns 0, or -1 with
 * done->status and reason set.
 */
static int window_job(struct wstate *ws, struct wring *r, const struct wire_job *job,
                      const uint64_t *plan, const bool *pad, const struct dest *d,
                      uint32_t nd, struct wire_done *done)
{
    struct dataset *ds = ws->ds[r->p.dataset_id];
    const struct tok_index *ti = &r->tok;
    const struct ring_field *tok = &r->fx.f[0], *ids = r->fx.n > 1 ? &r->fx.f[1] : NULL;
    uint64_t per = tok->item_bytes + (ids ? ids->item_bytes : 0);
    uint64_t t0 = clock_mono_ns();
    uint32_t n = 0;
    struct rf_err err = { 0 };

    if (nd > 1 && !buf_grow(&ws->stage, &ws->stage_cap, (size_t)(job->count * per))) {
        snprintf(done->reason, sizeof(done->reason), "no memory for %u windows", job->count);
        done->status = WIRE_STREAM_FAILED;
        return -1;
    }
    for (uint32_t j = 0; j < job->count; j++) {
        uint32_t at = job->first + j, before = n;
        uint8_t *tdst, *idst = NULL;
        uint64_t w;
        int rc;

        if (nd == 1) {
            tdst = (uint8_t *)d[0].slot + tok->offset + (uint64_t)at * tok->item_bytes;
            if (ids)
                idst = (uint8_t *)d[0].slot + ids->offset + (uint64_t)at * ids->item_bytes;
        } else {
            tdst = ws->stage + j * per;
            if (ids)
                idst = tdst + tok->item_bytes;
        }
        if (r->mix) {
            /* a mixture's window: its source's, at its place there */
            uint32_t s = mix_plan_source(r->mix, plan[j]);

            ds = ws->ds[r->p.sources[s]];
            ti = &r->toks[s];
            w = plan[j] - r->mix->base[s];
        } else {
            w = plan[j];
        }
        for (;;) {
            rc = window_plan(ds, ti, r->p.xform.context, w, tdst, idst, ws->pieces,
                             &n, ws->pieces_cap, &err);
            if (rc != -ENOSPC)
                break;
            {
                uint32_t cap = ws->pieces_cap ? ws->pieces_cap * 2 : 4096;
                struct io_req *p = realloc(ws->pieces, cap * sizeof(*p));
                uint64_t *pd = p ? realloc(ws->piece_doc, cap * sizeof(*pd)) : NULL;

                if (p)
                    ws->pieces = p;
                if (!p || !pd) {
                    snprintf(done->reason, sizeof(done->reason), "no memory for the pieces "
                             "of %u windows", job->count);
                    done->status = WIRE_STREAM_FAILED;
                    return -1;
                }
                ws->piece_doc = pd;
                ws->pieces_cap = cap;
            }
        }
        if (rc < 0) {
            size_t len;

            rf_err_prefix(&err, "window %llu", (unsigned long long)plan[j]);
            len = strnlen(err.msg, sizeof(done->reason) - 1); /* cut to the reason's size */
            memcpy(done->reason, err.msg, len);
            done->reason[len] = '\0';
            done->status = WIRE_STREAM_FAILED;
            return -1;
        }
        for (uint32_t k = before; k < n; k++)
            ws->piece_doc[k] = plan[j];
        ws->meta[j] = (struct ring_sample){
            .index = plan[j], .label = -1,
            .flags = pad[j] ? RING_SAMPLE_PADDING : 0,
        };
    }
    io_read_all(&ws->io, ws->pieces, n);
    for (uint32_t k = 0; k < n; k++) {
        struct io_req *q = &ws->pieces[k];

        if (q->result == 0 && fault_hit(FAULT_READ))
            q->result = -EIO; /* an injected read error (fault.h) */
        ws->c.bytes_read += q->done;
        if (q->result < 0) {
            if (ring_changed(ws, r)) {
                done->status = ring_changed_reason(ws, r, done->reason, sizeof(done->reason));
                return -1;
            }
            snprintf(done->reason, sizeof(done->reason), "window %llu: reading %u bytes at "
                     "byte %llu of a shard: %s", (unsigned long long)ws->piece_doc[k], q->len,
                     (unsigned long long)q->off, strerror(-q->result));
            done->status = WIRE_STREAM_FAILED;
            return -1;
        }
        if (q->data != q->buf) /* the mmap backend: the bytes are in its mapping */
            memcpy(q->buf, q->data, q->len);
    }
    for (uint32_t t = 0; t < nd && nd > 1; t++)
        for (uint32_t j = 0; j < job->count; j++) {
            uint32_t at = job->first + j;
            uint8_t *s = (uint8_t *)d[t].slot;

            memcpy(s + tok->offset + (uint64_t)at * tok->item_bytes, ws->stage + j * per,
                   tok->item_bytes);
            if (ids)
                memcpy(s + ids->offset + (uint64_t)at * ids->item_bytes,
                       ws->stage + j * per + tok->item_bytes, ids->item_bytes);
        }
    ws->c.io_ns += clock_mono_ns() - t0;
    return 0;
}

static void run_job(struct wstate *ws, const struct wire_job *job)
{
    struct wire_done done = { .type = WIRE_DONE, .job_id = job->job_id, .ring_id = job->ring_id };
    struct wring *r = ring_find(ws, job->ring_id);
    struct io_req reqs[WIRE_JOB_MAX];
    struct dataset_loc locs[WIRE_JOB_MAX];
    uint64_t plan[WIRE_JOB_MAX];
    bool pad[WIRE_JOB_MAX];
    int loc_ok[WIRE_JOB_MAX];
    struct sampler smp;
    struct dest dests[WIRE_TARGETS_MAX];
    struct ring_sample *meta = ws->meta;
    uint32_t nd, subst = 0, dropped = 0;
    uint64_t sb;
    size_t total = 0, off = 0;
    uint64_t t0 = clock_mono_ns(), t1, cpu0 = clock_thread_cpu_ns();
    uint64_t faults = mapguard_faults();
    struct dataset *ds;
    bool direct, checked = false;

    if (!r) {
        done.status = WIRE_NO_RING;
        snprintf(done.reason, sizeof(done.reason), "ring %u is not mapped", job->ring_id);
        goto out;
    }
    ds = ring_ds(ws, r);
    if (r->p.nsources && !r->mix) { /* a mixture whose view could not be made */
        done.status = WIRE_STREAM_FAILED;
        snprintf(done.reason, sizeof(done.reason), "%s", r->sub_err);
        goto out;
    }
    if (!r->mem || !ds) {
        done.status = WIRE_DATASET_FAILED;
        snprintf(done.reason, sizeof(done.reason), "dataset %s: %s",
                 ws->ds_name[r->p.dataset_id], ws->ds_err[r->p.dataset_id]);
        goto out;
    }
    if (r->sub_err[0]) {
        done.status = WIRE_STREAM_FAILED;
        snprintf(done.reason, sizeof(done.reason), "%s", r->sub_err);
        goto out;
    }
    if (job->slot >= r->g.depth || job->count > WIRE_JOB_MAX ||
        job->first + job->count > r->g.batch || job->chunk >= RING_MAX_CHUNKS ||
        (r->fx.ragged && (job->first != 0 || job->chunk != 0 || r->g.batch > WIRE_JOB_MAX))) {
        done.status = WIRE_NO_RING;
        snprintf(done.reason, sizeof(done.reason), "job out of the ring's bounds");
        goto out;
    }
    /* the job's samples: the stream's sampler for the job's epoch (wire.h) */
    if (plan_job(r, job, &smp, plan, pad) < 0) {
        done.status = WIRE_NO_RING;
        snprintf(done.reason, sizeof(done.reason),
                 "job of epoch %llu batch %llu samples %u..%u is outside the stream's plan",
                 (unsigned long long)job->epoch, (unsigned long long)job->seq, job->first,
                 job->first + job->count);
        goto out;
    }
    if (ws->ds_on_demand[r->p.dataset_id] && load_shards(ws, ds, plan, job->count, done.reason,
                                                         sizeof(done.reason)) < 0) {
        done.status = WIRE_SHARD_LOST;
        goto out;
    }
    nd = job_dests(ws, r, job, dests);
    sb = r->g.sample_bytes;
    if (xform_get(r->p.xform.id)->windows) {
        if (window_job(ws, r, job, plan, pad, dests, nd, &done) < 0)
            goto out;
        goto publish;
    }

    /* 1. locate every record and read them all in one submission (each
     * index entry is fetched PREFETCH_AHEAD * 2 samples ahead: in a
     * shuffled epoch every one is a cache miss) */
    for (uint32_t j = 0; j < PREFETCH_AHEAD * 2 && j < job->count; j++)
        dataset_prefetch(ds, plan[j]);
    for (uint32_t j = 0; j < job->count; j++) {
        if (j + PREFETCH_AHEAD * 2 < job->count)
            dataset_prefetch(ds, plan[j + PREFETCH_AHEAD * 2]);
        loc_ok[j] = dataset_locate(ds, plan[j], &locs[j], NULL) == 0;
        if (loc_ok[j])
            total += locs[j].stored_len;
    }
    if (!buf_grow(&ws->stage, &ws->stage_cap, total ? total : 1)) {
        for (uint32_t j = 0; j < job->count; j++)
            loc_ok[j] = 0;
        total = 0;
    }
    for (uint32_t j = 0; j < job->count; j++) {
        reqs[j] = (struct io_req){ .fd = -1 };
        if (!loc_ok[j])
            continue;
        reqs[j] = (struct io_req){ .fd = locs[j].fd, .off = locs[j].offset,
                                   .len = locs[j].stored_len, .buf = ws->stage + off };
        off += locs[j].stored_len;
    }
    {
        /* requests for unlocatable records are left out of the batch */
        struct io_req batch[WIRE_JOB_MAX];
        uint32_t map[WIRE_JOB_MAX], nb = 0;

        for (uint32_t j = 0; j < job->count; j++)
            if (loc_ok[j]) {
                map[nb] = j;
                batch[nb++] = reqs[j];
            }
        io_read_all(&ws->io, batch, nb);
        for (uint32_t b = 0; b < nb; b++) {
            if (batch[b].result == 0 && fault_hit(FAULT_READ))
                batch[b].result = -EIO; /* an injected read error (fault.h) */
            reqs[map[b]] = batch[b];
            ws->c.bytes_read += batch[b].done;
        }
    }
    t1 = clock_mono_ns();
    ws->c.io_ns += t1 - t0;

    /* 2. check, decode and transform each sample (make_sample): for a ring
     * of its own straight into its place in the slot, which it only writes;
     * for a shared chunk into the worker's own buffer, then copied from there
     * into each ring (never from one ring into another: each client can
     * write its own).  The per-sample records go to the worker's meta[]. */
    direct = xform_get(r->p.xform.id)->direct;
    for (uint32_t j = 0; j < PREFETCH_AHEAD && j < job->count; j++)
        prefetch_record(&reqs[j]);
    for (uint32_t k = 0; k < r->fx.n; k++)
        ws->offs[k][0] = 0;
    for (uint32_t j = 0; j < job->count; j++) {
        uint32_t at = job->first + j;
        uint8_t *dst = nd == 1 && !r->fx.kind_fields ? dests[0].data + (uint64_t)at * sb
                                                      : ws->sample;
        enum wire_bad why = BAD_READ;
        struct rf_err err;
        int32_t label = 0;
        int rc = -EIO;

        if (job->careful) {
            struct wire_progress p = { .type = WIRE_PROGRESS, .j = j, .job_id = job->job_id };

            send_or_die(ws, &p, sizeof(p));
        }
        meta[j].index = plan[j];
        meta[j].flags = pad[j] ? RING_SAMPLE_PADDING : 0;
        if (j + PREFETCH_AHEAD < job->count)
            prefetch_record(&reqs[j + PREFETCH_AHEAD]);
        if (loc_ok[j] && reqs[j].result == 0)
            rc = make_sample(ws, r, job->epoch, plan[j], &locs[j], reqs[j].data, dst,
                             &label, &why, &err);
        else if (loc_ok[j])
            read_failed(&locs[j], reqs[j].result, &err);
        else if (dataset_locate(ds, plan[j], &locs[j], &err) == 0)
            read_failed(&locs[j], 0, &err); /* it locates: it was never staged */
        if (rc < 0) {
            uint64_t idx = plan[j];

            /* a read that failed, or zeros where a shrunk mapping was: the
             * files may have changed under the dataset (once per job) */
            if (!checked && (why == BAD_READ || mapguard_faults() != faults)) {
                checked = true;
                if (ring_changed(ws, r))
                    goto failed;
            }
            /* err names the shard, the record and the byte offset: the
             * index entry's when the locate failed, else the record's */
            bad_sample(ws, r->p.dataset_id, plan[j], why, err.msg);
            /* from the bad sample's place in the epoch's order (a
             * mixture's: its own index, searched in its source) */
            rc = substitute(ws, r, job->epoch,
                            r->mix ? plan[j]
                                   : sampler_position(&smp, job->seq, at) % r->p.dataset_samples,
                            dst, &idx, &label, done.reason, sizeof(done.reason));
            if (rc < 0) {
                done.status = WIRE_STREAM_FAILED;
                goto out;
            }
            ws->c.substituted++;
            subst++;
            meta[j].index = idx;
            meta[j].flags |= RING_SAMPLE_SUBSTITUTED;
        }
        meta[j].label = label;
        if (r->fx.kind_fields) {
            /* the sample made last (the planned one or its substitute),
             * every field of it */
            dropped += ws->part_dropped;
            if (commit_fields(ws, r, dests, nd, j, at, job->seq, done.reason,
                              sizeof(done.reason)) < 0) {
                done.status = WIRE_STREAM_FAILED;
                goto out;
            }
        } else if (nd > 1) {
            for (uint32_t k = 0; k < nd; k++)
                memcpy(dests[k].data + (uint64_t)at * sb, ws->sample, sb);
        }
        if (r->fx.label_column) {
            /* version 3 of a jpeg or tensor dataset: the label column */
            int64_t v = label;

            for (uint32_t k = 0; k < nd; k++)
                memcpy((uint8_t *)dests[k].slot + r->fx.f[1].offset + (uint64_t)at * 8, &v, 8);
        }
    }
    if (r->fx.ragged)
        put_ragged(ws, r, dests, nd, job->count, done.rows);
    done.dropped = dropped;
    ws->c.boxes_dropped += dropped;
    if (direct && !r->fx.kind_fields) /* make_fields times its own */
        ws->c.decode_ns += clock_mono_ns() - t1;
publish:
    ws->c.samples += job->count;
    /* zeros read anywhere in the job (a substitute's read included) never
     * publish: the batch is only good if the files did not change */
    if (mapguard_faults() != faults && ring_changed(ws, r))
        goto failed;

    /* 3. the chunk's per-sample records into each ring, then its bit; the
     * worker completing a ring's mask publishes it (ring.h W1, W2) */
    for (uint32_t k = 0; k < nd; k++) {
        struct dest *to = &dests[k];

        memcpy(ring_samples(to->slot) + job->first, meta, (size_t)job->count * sizeof(*meta));
        if (subst)
            __atomic_fetch_add(&to->slot->substituted, subst, __ATOMIC_RELAXED);
        if (dropped)
            __atomic_fetch_add(&to->slot->dropped, dropped, __ATOMIC_RELAXED);
        if (mark_chunk(to->r, to->slot, job->chunk, to->g))
            done.published = 1;
    }
    goto out;
failed:
    done.status = ring_changed_reason(ws, r, done.reason, sizeof(done.reason));
out:
    ws->c.jobs++;
    ws->c.busy_ns += clock_mono_ns() - t0;
    ws->c.cpu_ns += clock_thread_cpu_ns() - cpu0;
    done.c = ws->c;
    send_or_die(ws, &done, sizeof(done));
    badlog_flush_all(ws, false); /* the summaries due: bad samples may have stopped */
}

static int parse_args(struct wstate *ws, int argc, char **argv, pid_t *parent)
{
    for (int i = 2; i < argc; i++) {
        if (i == 2) {
            *parent = (pid_t)atoi(argv[i]);
        } else if (strcmp(argv[i], "--log-level") == 0 && i + 1 < argc) {
            enum log_level lv;

            if (log_parse_level(argv[++i], &lv) == 0)
                log_threshold = lv;
        } else if ((strcmp(argv[i], "--dataset") == 0 ||
                    strcmp(argv[i], "--dataset-on-demand") == 0) && i + 1 < argc) {
            bool on_demand = strcmp(argv[i], "--dataset-on-demand") == 0;
            char *eq = strchr(argv[++i], '=');

            if (!eq || ws->nds >= MAX_DATASETS)
                return -EINVAL;
            ws->ds_on_demand[ws->nds] = on_demand;
            snprintf(ws->ds_name[ws->nds], sizeof(ws->ds_name[ws->nds]), "%.*s",
                     (int)(eq - argv[i] < CTL_DATASET_NAME_MAX ? eq - argv[i]
                                                               : CTL_DATASET_NAME_MAX),
                     argv[i]);
            /* "-=" is an empty catalogue slot (catalog.c): ds_dir stays "" */
            snprintf(ws->ds_dir[ws->nds], sizeof(ws->ds_dir[ws->nds]), "%s", eq + 1);
            ws->nds++;
        } else if (strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) {
            char *eq = strchr(argv[++i], '=');
            struct rf_err e;

            if (!eq)
                return -EINVAL;
            *eq = '\0';
            if (plugin_set_add(&ws->plugins, argv[i], eq + 1, &e) < 0) {
                log_error("worker: %s", e.msg);
                return -EINVAL;
            }
        } else if (strcmp(argv[i], "--data-bytes") == 0 && i + 1 < argc) {
            ws->data_bytes = strtoull(argv[++i], NULL, 10);
        } else {
            log_error("worker: unknown argument %s", argv[i]);
            return -EINVAL;
        }
    }
    return 0;
}

void worker_main(int argc, char **argv)
{
    static struct wstate ws; /* large: keep it off the stack */
    struct wire_hello hello = { .type = WIRE_HELLO };
    pid_t parent = 0;
    union {
        struct wire_job job;
        struct wire_ring_add ra;
        char bytes[sizeof(struct wire_job)];
    } buf;

    ws.fd = WIRE_FD;
    log_set_worker();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1)
        _exit(4);
    if (parse_args(&ws, argc, argv, &parent) < 0)
        _exit(2);
    if (parent <= 0 || getppid() != parent)
        _exit(0); /* the parent died before we could ask to die with it */
    signal(SIGPIPE, SIG_IGN);
    ws.dctx = dataset_dctx_new();
    if (!ws.dctx)
        _exit(5);
    if (mapguard_install() < 0)
        _exit(4);
    {
        struct rf_err ferr;

        (void)fault_init(&ferr); /* the main process has checked and logged it */
    }
    io_open(&ws.io, 256, ws.data_bytes);
    hello.pid = (uint32_t)getpid();
    {
        /* the file this process runs (the main process compares) */
        int exe = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        int rc = exe == -1 ? -errno : buildid_of_fd(exe, hello.build);

        if (rc < 0)
            snprintf(hello.build, sizeof(hello.build), "unreadable: %s", strerror(-rc));
        if (exe != -1)
            close(exe);
    }
    snprintf(hello.io_backend, sizeof(hello.io_backend), "%s", ws.io.ops->name);
    snprintf(hello.reason, sizeof(hello.reason), "%s", ws.io.reason);
    send_or_die(&ws, &hello, sizeof(hello));
    {
        /* no SA_RESTART: a SIGTERM wakes the recvmsg below */
        struct sigaction sa = { .sa_handler = on_sigterm };

        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGTERM, &sa, NULL) == -1)
            _exit(4);
    }

    for (;;) {
        union {
            char b[CMSG_SPACE(sizeof(int) * 4)];
            struct cmsghdr align;
        } cbuf;
        struct iovec iov = { .iov_base = &buf, .iov_len = sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
                             .msg_control = cbuf.b, .msg_controllen = sizeof(cbuf.b) };
        int fd = -1;
        uint32_t type;
        ssize_t n;

        if (term_asked)
            worker_exit(&ws, 0); /* the daemon is stopping */
        n = recvmsg(ws.fd, &mh, MSG_CMSG_CLOEXEC);
        if (n == -1) {
            if (errno == EINTR)
                continue;
            worker_exit(&ws, 6);
        }
        if (n == 0)
            worker_exit(&ws, 0); /* the main process is gone */
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int fds[4];

                memcpy(fds, CMSG_DATA(c), nfd * sizeof(int));
                for (size_t i = 0; i < nfd; i++) {
                    if (fd < 0)
                        fd = fds[i];
                    else
                        close(fds[i]);
                }
            }
        }
        if ((size_t)n < sizeof(type))
            _exit(7);
        memcpy(&type, &buf, sizeof(type));
        switch (type) {
        case WIRE_RING_ADD:
            if ((size_t)n != sizeof(struct wire_ring_add))
                _exit(7);
            ring_add(&ws, &buf.ra, fd);
            fd = -1;
            break;
        case WIRE_RING_DEL: {
            struct wire_ring_del m;

            if ((size_t)n != sizeof(m))
                _exit(7);
            memcpy(&m, &buf, sizeof(m));
            ring_del(&ws, m.ring_id);
            break;
        }
        case WIRE_JOB:
            if ((size_t)n != sizeof(struct wire_job) || buf.job.count > WIRE_JOB_MAX)
                _exit(7);
            run_job(&ws, &buf.job);
            break;
        case WIRE_QUARANTINE: {
            struct wire_quarantine m;

            if ((size_t)n != sizeof(m))
                _exit(7);
            memcpy(&m, &buf, sizeof(m));
            if (ws.nquarantine < QUARANTINE_MAX) {
                ws.quarantine[ws.nquarantine].ds = m.dataset_id;
                ws.quarantine[ws.nquarantine].index = m.index;
                ws.nquarantine++;
            }
            break;
        }
        case WIRE_RETIRE:
            worker_exit(&ws, 0);
        default:
            _exit(7);
        }
        if (fd >= 0)
            close(fd);
    }
}
