/*
 * h2d-sweep.c - host-to-device copy bandwidth from three kinds of host
 * memory, 64 KiB to 256 MiB: a ringfeed ring attached to a running daemon
 * and registered by libringfeed (rf_cuda_register: cudaHostRegister), a
 * cudaMallocHost buffer (the pinned baseline), and plain malloc memory
 * (pageable: the driver stages it through its own pinned buffers); and a
 * verdict: copies from the registered ring must be as fast as copies from
 * cudaMallocHost memory.
 *
 *   h2d-sweep --probe
 *       prints the device and exits 0, or "no CUDA device: ..." and 77
 *   h2d-sweep [--socket PATH] [--dataset NAME] [--batch B] [--depth D]
 *             [--max BYTES] [--json FILE]
 *       attaches to NAME (default fmnist-train) with batch B (65536) and
 *       depth D (6) so the ring is big enough (about 300 MiB for
 *       Fashion-MNIST's 784-byte samples), fills it, prints one table, a
 *       "peaks:" line and a "verdict:" line.  Sizes past the ring's mapping
 *       are left out of its column.  --max is the largest size (256 MiB; at
 *       least 1 MiB, the smallest size judged).  --json writes the figures
 *       to FILE as one JSON object (below), whatever the outcome.
 *
 * Method.  The ring is timed full, so no worker writes it while it is
 * copied: after rf_cuda_register the program takes depth-1 batches with
 * rf_next and holds them, then waits (at most FILL_TIMEOUT_S) until the
 * last slot's batch is published too, loading that slot's `ready` word
 * with acquire semantics and comparing it with ring_ready_word(depth-1)
 * (proto/ring.h, W2 and C1).  With nothing released the daemon cannot
 * start batch `depth` (M1), and it never writes a published slot again,
 * so the mapping stays as it is until rf_close.  Copies read the mapping
 * from its start (header and slots alike).  Each size and source gets 2
 * untimed copies, then reps copies (1 GiB worth, 5..200) on one stream
 * between two CUDA events, read after cudaEventSynchronize; GB/s is
 * bytes / time, 1 GB = 1e9 bytes.
 *
 * What is judged.  The judged sizes are those of at least JUDGE_MIN
 * (1 MiB) that the ring's mapping holds.  A source's peak is its best GB/s
 * over the judged sizes, and the run passes when the ring's peak over
 * cudaMallocHost's is at least GOAL (0.90).  It fails when the ring is not
 * pinned (rf_cuda_register failed, or rf_stats.pinned is 0: its copies
 * would be pageable; the table still runs, to show what that costs), when
 * the ring does not fill in time, when the mapping holds no judged size,
 * when a CUDA call fails, or when the ratio is below GOAL.  The last line
 * says which: "verdict: PASS: ..." or "verdict: FAIL: <why>".
 *
 * --json FILE writes one object, also on failure, with what was measured
 * by then: {"device": str, "ring_bytes": int, "ring_full": bool,
 * "pinned": bool, "pin_note": str, "rows": [{"bytes": int, "ring_gbps",
 * "pinned_gbps", "pageable_gbps"}], "ring_peak_gbps", "pinned_peak_gbps",
 * "pageable_peak_gbps", "ratio", "goal": 0.9, "pass": bool, "why": str}.
 * Figures are numbers, null when not measured (a size past the ring, a run
 * that stopped before); rows holds the sizes timed; the peaks are over the
 * judged sizes; "why" is the verdict line's reason ("" on a pass).
 *
 * Exit status: 0 pass, 1 fail (the verdict line says why), 2 bad usage,
 * 77 no CUDA device.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "clock.h"
#include "jsonw.h"
#include "ring.h"
#include "ringfeed.h"

#define MIN_BYTES ((size_t)64 << 10)
#define MAX_BYTES ((size_t)256 << 20)
#define JUDGE_MIN ((size_t)1 << 20) /* the smallest size the verdict reads */
#define GOAL 0.90                   /* ring peak / cudaMallocHost peak, at least */
#define FILL_TIMEOUT_S 120          /* for the ring to fill */
#define MAX_ROWS 32                 /* 64 KiB * 4^k, k < 32, covers any size_t */

static const char *prog = "h2d-sweep";

/* One size of the table; GB/s, -1 where not measured. */
struct row {
    size_t bytes;
    double ring, pinned, pageable;
};

/* What the verdict and --json report, filled in as the run gets on. */
struct report {
    char device[256];
    size_t ring_bytes;
    int ring_full, pinned;
    char pin_note[160];
    struct row rows[MAX_ROWS];
    unsigned n_rows;
    double ring_peak, pinned_peak, pageable_peak, ratio; /* -1: not measured */
    int pass;
    char why[512]; /* the first failure; "" while none */
};

/* Records the run's failure (the first reason stays); returns -1. */
static int fail(struct report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct report *r, const char *fmt, ...)
{
    va_list ap;

    r->pass = 0;
    if (r->why[0])
        return -1;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof(r->why), fmt, ap);
    va_end(ap);
    return -1;
}

/* 0 when e is cudaSuccess; else says what failed on stderr, records it as
 * the run's failure and returns -1. */
static int check(struct report *r, cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    fprintf(stderr, "%s: %s: %s (%s)\n", prog, what, cudaGetErrorString(e), cudaGetErrorName(e));
    (void)cudaGetLastError();
    return fail(r, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Finds device 0 and names it in r->device.  Returns 0, 77 with no device
 * ("no CUDA device: ..." on stdout and in r->why) or 1. */
static int probe(struct report *r, int print)
{
    struct cudaDeviceProp p;
    cudaError_t e;
    int n = 0;

    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        fail(r, "no CUDA device: cudaGetDeviceCount: %s",
             e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        printf("%s\n", r->why);
        return 77;
    }
    if (check(r, cudaGetDeviceProperties(&p, 0), "cudaGetDeviceProperties") < 0)
        return 1;
    snprintf(r->device, sizeof(r->device), "%s", p.name);
    if (print)
        printf("cuda device 0: %s, sm_%d%d, %.1f GiB, %d devices\n", p.name, p.major, p.minor,
               (double)p.totalGlobalMem / (1 << 30), n);
    return 0;
}

/* Milliseconds from now to deadline_ns, 0 when past, for rf_next. */
static int ms_left(uint64_t deadline_ns)
{
    uint64_t now = clock_mono_ns();

    return now >= deadline_ns ? 0 : (int)((deadline_ns - now + 999999) / 1000000);
}

/*
 * Fills the ring and keeps it full: takes depth-1 batches with rf_next and
 * holds them in held[] (*n_held counts them; rf_close hands them back),
 * then waits for the last slot's batch to be published.  base is the
 * mapping rf_cuda_register registered.  Returns 0 with the ring full, so
 * quiescent until a release (M1); or -1 with r->why set, at the latest
 * FILL_TIMEOUT_S after the call.
 */
static int fill(struct rf_client *c, void *base, struct report *r, struct rf_batch *held,
                uint32_t *n_held)
{
    struct ring_hdr *h = base;
    uint32_t depth = h->depth, last, state;
    uint64_t t0 = clock_mono_ns(), deadline = t0 + (uint64_t)FILL_TIMEOUT_S * 1000000000u;
    struct timespec nap = {.tv_sec = 0, .tv_nsec = 1000000};
    struct ring_slot *s;
    struct rf_stats st;
    int rc;

    if (depth < 1 || depth > RING_MAX_DEPTH)
        return fail(r, "the ring's header gives depth %u", depth);
    for (uint32_t i = 0; i + 1 < depth; i++) {
        do
            rc = rf_next(c, &held[i], ms_left(deadline));
        while (rc == -ETIMEDOUT && ms_left(deadline) > 0);
        if (rc == -ETIMEDOUT)
            return fail(r, "the ring did not fill within %d s: batch %u of %u never came",
                        FILL_TIMEOUT_S, i, depth);
        if (rc < 0)
            return fail(r, "filling the ring: %s", rf_last_error(c));
        *n_held = i + 1;
    }
    rf_get_stats(c, &st);
    if (st.reconnects || rf_ring_base(c, NULL) != base)
        return fail(r, "the daemon went away while the ring filled (%" PRIu64 " reconnects): "
                    "the ring mapped now is not the one registered and waited for",
                    st.reconnects);
    /* C1: an acquire load of `ready` equal to ring_ready_word(g) publishes
     * every store of batch g; a fresh attach's ring batch g is in slot g */
    last = depth - 1;
    s = ring_slot(base, last);
    while (atomic_load_explicit(&s->ready, memory_order_acquire) != ring_ready_word(last)) {
        state = atomic_load_explicit(&h->state, memory_order_acquire);
        if (state != RING_LIVE)
            return fail(r, "the daemon ended the ring while it filled (state %u): %.*s", state,
                        (int)sizeof(h->reason), h->reason);
        if (clock_mono_ns() >= deadline)
            return fail(r, "the ring did not fill within %d s: its last slot (batch %u) "
                        "was never published", FILL_TIMEOUT_S, last);
        nanosleep(&nap, NULL);
    }
    r->ring_full = 1;
    printf("ring: full when timed: %u of %u batches held unreleased and the last published "
           "after %.1f s, so the daemon writes no slot until rf_close\n",
           *n_held, depth, (double)(clock_mono_ns() - t0) * 1e-9);
    return 0;
}

/* GB/s of copies of bytes from src to dst on s; -1 on failure (r->why). */
static double rate(struct report *r, void *dst, const void *src, size_t bytes, cudaStream_t s,
                   cudaEvent_t a, cudaEvent_t b)
{
    size_t reps = ((size_t)1 << 30) / bytes;
    float ms = 0.0f;

    reps = reps < 5 ? 5 : reps > 200 ? 200 : reps;
    for (int i = 0; i < 2; i++)
        if (check(r, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s), "warm-up") < 0)
            return -1;
    if (check(r, cudaEventRecord(a, s), "cudaEventRecord") < 0)
        return -1;
    for (size_t i = 0; i < reps; i++)
        if (check(r, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s),
                  "cudaMemcpyAsync") < 0)
            return -1;
    if (check(r, cudaEventRecord(b, s), "cudaEventRecord") < 0 ||
        check(r, cudaEventSynchronize(b), "cudaEventSynchronize") < 0 ||
        check(r, cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime") < 0)
        return -1;
    if (ms <= 0) {
        fail(r, "cudaEventElapsedTime gave %g ms for %zu copies of %zu bytes", (double)ms, reps,
             bytes);
        return -1;
    }
    return (double)bytes * (double)reps / ((double)ms * 1e-3) / 1e9;
}

static void size_name(size_t bytes, char *out, size_t cap)
{
    if (bytes >= (1u << 20))
        snprintf(out, cap, "%zu MiB", bytes >> 20);
    else
        snprintf(out, cap, "%zu KiB", bytes >> 10);
}

static double best(double peak, double v)
{
    return v > peak ? v : peak;
}

/*
 * Computes the peaks over the judged sizes and the ratio, prints them on
 * the "peaks:" line, and passes the run when nothing failed before and the
 * ratio reaches GOAL.
 */
static void judge(struct report *r)
{
    char lo[32] = "", hi[32] = "";

    for (unsigned i = 0; i < r->n_rows; i++) {
        const struct row *w = &r->rows[i];

        if (w->bytes < JUDGE_MIN || w->ring < 0)
            continue;
        if (!lo[0])
            size_name(w->bytes, lo, sizeof(lo));
        size_name(w->bytes, hi, sizeof(hi));
        r->ring_peak = best(r->ring_peak, w->ring);
        r->pinned_peak = best(r->pinned_peak, w->pinned);
        r->pageable_peak = best(r->pageable_peak, w->pageable);
    }
    if (r->ring_peak < 0) {
        fail(r, "the ring's %zu-byte mapping holds no size of at least %zu MiB to judge: "
             "attach with a larger --batch or --depth", r->ring_bytes, JUDGE_MIN >> 20);
        return;
    }
    r->ratio = r->ring_peak / r->pinned_peak;
    printf("peaks: %s to %s: ring %.2f GB/s, cudaMallocHost %.2f GB/s, pageable %.2f GB/s; "
           "ring/pinned %.3f, goal %.2f\n", lo, hi, r->ring_peak, r->pinned_peak,
           r->pageable_peak, r->ratio, GOAL);
    if (r->ratio < GOAL) {
        fail(r, "ring peak %.2f GB/s / cudaMallocHost peak %.2f GB/s = %.3f, below the goal "
             "%.2f", r->ring_peak, r->pinned_peak, r->ratio, GOAL);
        return;
    }
    if (!r->why[0])
        r->pass = 1;
}

static void json_gbps(FILE *f, double v)
{
    if (v < 0)
        fputs("null", f);
    else
        json_double(f, v);
}

/* Writes r to path as one JSON object.  Returns 0, or -1 having said why
 * on stderr. */
static int write_json(const char *path, const struct report *r)
{
    FILE *f = fopen(path, "w");

    if (!f) {
        fprintf(stderr, "%s: --json %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    fputs("{\"device\": ", f);
    json_str(f, r->device);
    fprintf(f, ", \"ring_bytes\": %zu, \"ring_full\": %s, \"pinned\": %s, \"pin_note\": ",
            r->ring_bytes, r->ring_full ? "true" : "false", r->pinned ? "true" : "false");
    json_str(f, r->pin_note);
    fputs(", \"rows\": [", f);
    for (unsigned i = 0; i < r->n_rows; i++) {
        fprintf(f, "%s{\"bytes\": %zu, \"ring_gbps\": ", i ? ", " : "", r->rows[i].bytes);
        json_gbps(f, r->rows[i].ring);
        fputs(", \"pinned_gbps\": ", f);
        json_gbps(f, r->rows[i].pinned);
        fputs(", \"pageable_gbps\": ", f);
        json_gbps(f, r->rows[i].pageable);
        fputc('}', f);
    }
    fputs("], \"ring_peak_gbps\": ", f);
    json_gbps(f, r->ring_peak);
    fputs(", \"pinned_peak_gbps\": ", f);
    json_gbps(f, r->pinned_peak);
    fputs(", \"pageable_peak_gbps\": ", f);
    json_gbps(f, r->pageable_peak);
    fputs(", \"ratio\": ", f);
    json_gbps(f, r->ratio);
    fputs(", \"goal\": ", f);
    json_double(f, GOAL);
    fprintf(f, ", \"pass\": %s, \"why\": ", r->pass ? "true" : "false");
    json_str(f, r->why);
    fputs("}\n", f);
    if (ferror(f)) {
        fclose(f);
        fprintf(stderr, "%s: --json %s: write failed\n", prog, path);
        return -1;
    }
    if (fclose(f) == EOF) {
        fprintf(stderr, "%s: --json %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: %s --probe | [--socket PATH] [--dataset NAME] [--batch B] "
            "[--depth D] [--max BYTES] [--json FILE]\n", prog);
}

int main(int argc, char **argv)
{
    enum { O_SOCKET = 1, O_DATASET, O_BATCH, O_DEPTH, O_MAX, O_JSON, O_PROBE, O_HELP };
    static const struct option lo[] = {
        {"socket", required_argument, NULL, O_SOCKET},
        {"dataset", required_argument, NULL, O_DATASET},
        {"batch", required_argument, NULL, O_BATCH},
        {"depth", required_argument, NULL, O_DEPTH},
        {"max", required_argument, NULL, O_MAX},
        {"json", required_argument, NULL, O_JSON},
        {"probe", no_argument, NULL, O_PROBE},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    static struct report rep = {
        .ring_peak = -1, .pinned_peak = -1, .pageable_peak = -1, .ratio = -1,
    };
    struct rf_batch held[RING_MAX_DEPTH];
    struct rf_options ro;
    struct rf_client *c = NULL;
    struct rf_stats st;
    cudaStream_t s = NULL;
    cudaEvent_t a = NULL, b = NULL;
    size_t max = MAX_BYTES, ring_size = 0;
    void *dst = NULL, *pinned = NULL, *pageable = NULL, *ring = NULL;
    const char *json = NULL;
    uint32_t n_held = 0;
    int opt, rc, status = 1;

    rf_options_init(&ro);
    ro.dataset = "fmnist-train";
    ro.batch = 65536;
    ro.depth = 6;
    ro.shuffle = 0;
    ro.name = "h2d-sweep";
    while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (opt) {
        case O_SOCKET: ro.socket = optarg; break;
        case O_DATASET: ro.dataset = optarg; break;
        case O_BATCH: ro.batch = (uint32_t)strtoul(optarg, NULL, 10); break;
        case O_DEPTH: ro.depth = (uint32_t)strtoul(optarg, NULL, 10); break;
        case O_MAX: max = (size_t)strtoull(optarg, NULL, 10); break;
        case O_JSON: json = optarg; break;
        case O_PROBE: return probe(&rep, 1);
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument %s\n", prog, argv[optind]);
        usage(stderr);
        return 2;
    }
    if (max < JUDGE_MIN) {
        fprintf(stderr, "%s: --max %zu: at least %zu (the smallest size judged)\n", prog, max,
                JUDGE_MIN);
        return 2;
    }
    status = probe(&rep, 1);
    if (status)
        goto out;
    status = 1;

    rc = rf_open(&ro, &c);
    if (rc < 0) {
        fail(&rep, "attaching to %s: %s", ro.dataset, rf_last_error(c));
        goto out;
    }
    rc = rf_cuda_register(c);
    ring = rf_ring_base(c, &ring_size);
    rep.ring_bytes = ring_size;
    rf_get_stats(c, &st);
    rep.pinned = rc == 0 && st.pinned == 1;
    snprintf(rep.pin_note, sizeof(rep.pin_note), "%s", st.pin_note);
    printf("ring: %.1f MiB mapped from ringfeedd (%s, batch %u, depth %u); %s\n",
           (double)ring_size / (1 << 20), ro.dataset, ro.batch, st.depth, st.pin_note);
    if (!ring) {
        fail(&rep, "attached, but libringfeed gives no ring mapping");
        goto out;
    }
    if (!rep.pinned) {
        printf("ring: not pinned (%s): its column measures pageable copies; the run fails\n",
               rc < 0 ? rf_strerror(rc) : "rf_stats.pinned is 0");
        if (rc < 0)
            fail(&rep, "the ring is not pinned, so copies from it are pageable: %s",
                 rf_last_error(c));
        else
            fail(&rep, "the ring is not pinned (rf_cuda_register returned 0, rf_stats.pinned "
                 "is %d): %s", st.pinned, st.pin_note);
    }
    if (fill(c, ring, &rep, held, &n_held) < 0)
        goto out;

    if (check(&rep, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags") < 0 ||
        check(&rep, cudaEventCreate(&a), "cudaEventCreate") < 0 ||
        check(&rep, cudaEventCreate(&b), "cudaEventCreate") < 0 ||
        check(&rep, cudaMalloc(&dst, max), "cudaMalloc") < 0 ||
        check(&rep, cudaMallocHost(&pinned, max), "cudaMallocHost") < 0)
        goto out;
    pageable = malloc(max);
    if (!pageable) {
        fail(&rep, "out of memory for a %zu-byte pageable buffer", max);
        goto out;
    }
    memset(pinned, 1, max);
    memset(pageable, 1, max); /* fault every page in before timing */

    printf("\n%-9s %12s %16s %14s %12s\n", "size", "ring GB/s", "cudaMallocHost", "pageable",
           "ring/pinned");
    for (size_t bytes = MIN_BYTES; rep.n_rows < MAX_ROWS; bytes *= 4) {
        struct row *w = &rep.rows[rep.n_rows];
        char name[32], rs[32] = "-", ratio[32] = "-";

        *w = (struct row){.bytes = bytes, .ring = -1, .pinned = -1, .pageable = -1};
        size_name(bytes, name, sizeof(name));
        if (bytes <= ring_size) {
            w->ring = rate(&rep, dst, ring, bytes, s, a, b);
            if (w->ring < 0)
                goto out;
            snprintf(rs, sizeof(rs), "%.2f", w->ring);
        }
        w->pinned = rate(&rep, dst, pinned, bytes, s, a, b);
        if (w->pinned < 0)
            goto out;
        w->pageable = rate(&rep, dst, pageable, bytes, s, a, b);
        if (w->pageable < 0)
            goto out;
        rep.n_rows++;
        if (w->ring >= 0)
            snprintf(ratio, sizeof(ratio), "%.2f", w->ring / w->pinned);
        printf("%-9s %12s %16.2f %14.2f %12s\n", name, rs, w->pinned, w->pageable, ratio);
        fflush(stdout);
        if (bytes > max / 4)
            break;
    }
    printf("\n");
    judge(&rep);
    status = rep.pass ? 0 : 1;
out:
    if (status != 77) {
        if (rep.pass)
            printf("verdict: PASS: ring peak %.2f GB/s / cudaMallocHost peak %.2f GB/s = %.3f "
                   ">= goal %.2f (the ring full and pinned)\n", rep.ring_peak, rep.pinned_peak,
                   rep.ratio, GOAL);
        else
            printf("verdict: FAIL: %s\n", rep.why[0] ? rep.why : "the run stopped early");
    }
    fflush(stdout);
    if (json && write_json(json, &rep) < 0)
        status = status == 77 ? status : 1;
    if (s && cudaStreamSynchronize(s) != cudaSuccess) /* no copy reads the ring past here */
        (void)cudaGetLastError();
    rf_close(c);
    free(pageable);
    if (pinned)
        cudaFreeHost(pinned);
    if (dst)
        cudaFree(dst);
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    if (s)
        cudaStreamDestroy(s);
    return status;
}
