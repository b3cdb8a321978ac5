/*
 * train_comm_mpi.c - ringfeed-train's ranks over MPI (train_comm.h): rank
 * and world from MPI_COMM_WORLD, the gradient all-reduce by NCCL on the
 * device or by MPI over host memory, every collective under a deadline.
 *
 * Design.
 *  - One all-reduce per SGD update, of one fused buffer: the model's
 *    gradient sums are one contiguous fp32 array (kn_model_grads), so the
 *    whole model goes in a single MPI_Iallreduce / ncclAllReduce.
 *  - Host path (the CPU twin, or CUDA without NCCL): MPI_Iallreduce in
 *    place (CUDA: after a copy to a host staging buffer on the step's
 *    stream, and back after).  The trainer starts it, takes and normalizes
 *    the next batch, then waits (train_step.c), so the all-reduce can
 *    progress while rf_next waits for the daemon.  The wait polls MPI_Test,
 *    spinning briefly and then sleeping 20 us between polls, so a waiting
 *    rank does not take the core a late rank needs.
 *  - NCCL path: ncclAllReduce on the compute stream between two events;
 *    the wait polls the second event (kn_event_query) under the deadline.
 *  - MPI_Allreduce's result is the same on every rank (the MPI standard's
 *    advice to implementors, which Open MPI follows; NCCL's ring does the
 *    same), so the ranks' parameters stay bit-identical: the trainer's
 *    --print-checksum shows it and the tests check it.
 *  - Failure: MPI_ERRORS_RETURN on MPI_COMM_WORLD, every call checked; a
 *    failed call or a deadline passed ends the job with MPI_Abort and a
 *    message naming this rank (the launcher then stops the others).
 */
#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "train_comm.h"
#include "train_nccl.h"

#define SPIN_POLLS 2000         /* MPI_Test calls before sleeping between them */

struct tr_comm_impl {
    struct kn_ctx *ctx;
    int cuda;                   /* the backend is CUDA: buffers are device memory */
    /* host path */
    MPI_Request req;
    int active;                 /* a gradient all-reduce is in flight */
    float *buf;                 /* the backend buffer being summed */
    float *host;                /* CUDA without NCCL: host staging */
    size_t count, host_count;
    struct kn_stream *s;
    /* NCCL path */
    struct tr_nccl nccl;
    tr_nccl_comm_t ncomm;
    struct kn_event *a0, *a1;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void vabort(struct tr_comm *c, const char *fmt, va_list ap)
{
    char msg[768];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    fprintf(stderr, "ringfeed-train: rank %d: %s\n", c->rank, msg);
    fflush(stderr);
    if (c->mpi)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void tr_comm_abort(struct tr_comm *c, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vabort(c, fmt, ap);
    va_end(ap);
    exit(1); /* not reached */
}

/* An MPI call that did not return MPI_SUCCESS ends the job. */
static void check(struct tr_comm *c, int rc, const char *what)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;

    if (rc == MPI_SUCCESS)
        return;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS)
        snprintf(s, sizeof(s), "MPI error %d", rc);
    tr_comm_abort(c, "%s failed: %s (a rank died or the job is broken)", what, s);
}

/* Waits for req with the deadline; past it the job ends. */
static void wait_req(struct tr_comm *c, MPI_Request *req, const char *what)
{
    double deadline = now_s() + c->timeout_s;
    long polls = 0;
    int done = 0;

    for (;;) {
        check(c, MPI_Test(req, &done, MPI_STATUS_IGNORE), what);
        if (done)
            return;
        if (++polls > SPIN_POLLS) {
            struct timespec ts = {0, 20000};

            nanosleep(&ts, NULL);
        }
        if ((polls & 63) == 0 && now_s() > deadline)
            tr_comm_abort(c, "%s did not complete in %.0f s: a rank died or hangs", what,
                          c->timeout_s);
    }
}

static int launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

/* The environment's RANK/WORLD_SIZE (torchrun's, which libringfeed would
 * read first) against MPI's: noted when they disagree. */
static void env_agrees(struct tr_comm *c)
{
    const char *r = getenv("RANK"), *w = getenv("WORLD_SIZE");

    c->env_rank = c->env_world = -1;
    if ((r && atoi(r) != c->rank) || (w && atoi(w) != c->world)) {
        c->env_rank = r ? atoi(r) : -1;
        c->env_world = w ? atoi(w) : -1;
    }
}

int tr_comm_open(struct tr_comm *c, double timeout_s)
{
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, provided = 0;

    memset(c, 0, sizeof(*c));
    c->world = 1;
    c->env_rank = c->env_world = -1;
    c->timeout_s = timeout_s;
    c->impl = calloc(1, sizeof(*c->impl));
    if (!c->impl) {
        snprintf(c->err, sizeof(c->err), "out of memory");
        return -ENOMEM;
    }
    if (!launched_by_mpi()) {
        snprintf(c->note, sizeof(c->note), "none (one rank: not started by mpirun)");
        return 0;
    }
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        snprintf(c->err, sizeof(c->err), "MPI_Init_thread failed");
        return -EIO;
    }
    c->mpi = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(c, MPI_Comm_rank(MPI_COMM_WORLD, &c->rank), "MPI_Comm_rank");
    check(c, MPI_Comm_size(MPI_COMM_WORLD, &c->world), "MPI_Comm_size");
    if (MPI_Get_library_version(ver, &len) == MPI_SUCCESS) {
        ver[strcspn(ver, ",\n")] = '\0';
        snprintf(c->launcher, sizeof(c->launcher), "%.95s", ver);
    }
    env_agrees(c);
    {
        MPI_Comm node;

        check(c, MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                     &node), "MPI_Comm_split_type");
        check(c, MPI_Comm_rank(node, &c->local_rank), "MPI_Comm_rank (node)");
        MPI_Comm_free(&node);
    }
    if (c->world == 1)
        snprintf(c->note, sizeof(c->note), "none (one rank)");
    return 0;
}

void tr_comm_close(struct tr_comm *c)
{
    struct tr_comm_impl *p = c->impl;

    if (!p)
        return;
    tr_comm_unbind(c);
    free(p->host);
    free(p);
    c->impl = NULL;
    if (c->mpi)
        MPI_Finalize();
    c->mpi = 0;
}

void tr_comm_unbind(struct tr_comm *c)
{
    struct tr_comm_impl *p = c->impl;

    if (!p)
        return;
    if (p->ncomm)
        p->nccl.comm_destroy(p->ncomm);
    p->ncomm = NULL;
    tr_nccl_unload(&p->nccl);
    kn_event_destroy(p->a0);
    kn_event_destroy(p->a1);
    p->a0 = p->a1 = NULL;
    p->ctx = NULL;
}

/* Whether two ranks use the same GPU: the same host, CUDA_VISIBLE_DEVICES
 * and ordinal.  Fills which with the first pair found. */
static int ranks_share_a_gpu(struct tr_comm *c, int device, char *which, size_t len)
{
    char key[256], host[128] = "?", *all;
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    int shared = 0;

    gethostname(host, sizeof(host) - 1);
    memset(key, 0, sizeof(key));
    snprintf(key, sizeof(key), "%s|%s|%d", host, vis ? vis : "", device);
    all = calloc((size_t)c->world, sizeof(key));
    if (!all)
        tr_comm_abort(c, "out of memory");
    check(c, MPI_Allgather(key, (int)sizeof(key), MPI_CHAR, all, (int)sizeof(key), MPI_CHAR,
                           MPI_COMM_WORLD), "MPI_Allgather of the ranks' devices");
    for (int i = 0; i < c->world && !shared; i++)
        for (int j = i + 1; j < c->world && !shared; j++)
            if (strcmp(all + (size_t)i * sizeof(key), all + (size_t)j * sizeof(key)) == 0) {
                shared = 1;
                snprintf(which, len, "ranks %d and %d share CUDA device %d on %s: NCCL "
                         "refuses two ranks on one device", i, j, device, host);
            }
    free(all);
    return shared;
}

/* NCCL: loaded on every rank, the id from rank 0.  Returns 1 when NCCL
 * runs, 0 for the host fallback (why filled; every rank agrees). */
static int nccl_setup(struct tr_comm *c, int device, char *why, size_t len)
{
    struct tr_comm_impl *p = c->impl;
    struct tr_nccl_id id;
    int ok, all_ok = 0, r;
    char ver[64];

    if (ranks_share_a_gpu(c, device, why, len))
        return 0;
    ok = tr_nccl_load(&p->nccl, why, len) == 0;
    check(c, MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
          "MPI_Allreduce (NCCL found?)");
    if (!all_ok) {
        if (ok)
            snprintf(why, len, "libnccl is missing on another rank");
        tr_nccl_unload(&p->nccl);
        return 0;
    }
    memset(&id, 0, sizeof(id));
    if (c->rank == 0 && (r = p->nccl.get_unique_id(&id)) != 0)
        tr_comm_abort(c, "ncclGetUniqueId: %s", p->nccl.error_string(r));
    check(c, MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD),
          "MPI_Bcast of the NCCL id");
    r = p->nccl.comm_init_rank(&p->ncomm, c->world, id, c->rank);
    if (r != 0)
        tr_comm_abort(c, "ncclCommInitRank (%d ranks, device %d): %s", c->world, device,
                      p->nccl.error_string(r));
    if (kn_event_create(p->ctx, &p->a0) < 0 || kn_event_create(p->ctx, &p->a1) < 0)
        tr_comm_abort(c, "creating the all-reduce's events: %s", kn_errmsg(p->ctx));
    tr_nccl_version(&p->nccl, ver, sizeof(ver));
    snprintf(c->note, sizeof(c->note), "%.60s (%.150s), on the device buffers", ver,
             p->nccl.path);
    return 1;
}

int tr_comm_bind(struct tr_comm *c, struct kn_ctx *ctx, int device)
{
    struct tr_comm_impl *p = c->impl;
    int mine, all_cuda = 0;
    char why[400] = "";

    p->ctx = ctx;
    p->cuda = kn_backend_kind(ctx) == KN_BACKEND_CUDA;
    if (c->world == 1)
        return 0;
    /* every rank takes part in every step of the choice, so they agree */
    mine = p->cuda;
    check(c, MPI_Allreduce(&mine, &all_cuda, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
          "MPI_Allreduce (the ranks' backends)");
    if (all_cuda)
        c->nccl = nccl_setup(c, device, why, sizeof(why));
    else if (p->cuda)
        snprintf(why, sizeof(why), "another rank runs on the CPU twin");
    else
        snprintf(why, sizeof(why), "the CPU twin's gradients are host memory");
    if (!c->nccl)
        snprintf(c->note, sizeof(c->note), "mpi (host memory): %s", why);
    return 0;
}

int tr_comm_bcast(struct tr_comm *c, void *host, size_t bytes)
{
    MPI_Request req;
    size_t off = 0;

    if (c->world == 1)
        return 0;
    while (off < bytes) { /* MPI counts are int */
        int n = bytes - off > (1u << 30) ? 1 << 30 : (int)(bytes - off);

        check(c, MPI_Ibcast((char *)host + off, n, MPI_BYTE, 0, MPI_COMM_WORLD, &req),
              "MPI_Ibcast");
        wait_req(c, &req, "the broadcast of the initial weights");
        off += (size_t)n;
    }
    return 0;
}

int tr_comm_grads_start(struct tr_comm *c, float *buf, size_t count, struct kn_stream *s,
                        double *ms)
{
    struct tr_comm_impl *p = c->impl;
    double t0 = now_s();
    void *where = buf;
    int rc;

    if (ms)
        *ms = 0.0;
    if (c->world == 1)
        return 0;
    if (count > (size_t)1 << 30)
        tr_comm_abort(c, "a gradient of %zu floats: more than one all-reduce can carry", count);
    p->buf = buf, p->count = count, p->s = s;
    if (c->nccl) {
        if ((rc = kn_event_record(p->a0, s)) < 0)
            tr_comm_abort(c, "event: %s", kn_errmsg(p->ctx));
        rc = p->nccl.all_reduce(buf, buf, count, TR_NCCL_FLOAT32, TR_NCCL_SUM, p->ncomm,
                                kn_stream_native(p->ctx, s));
        if (rc != 0)
            tr_comm_abort(c, "ncclAllReduce of %zu floats: %s", count, p->nccl.error_string(rc));
        if ((rc = kn_event_record(p->a1, s)) < 0)
            tr_comm_abort(c, "event: %s", kn_errmsg(p->ctx));
        p->active = 1;
        if (ms)
            *ms = (now_s() - t0) * 1e3;
        return 0;
    }
    if (p->cuda) {
        if (p->host_count < count) {
            free(p->host);
            p->host = malloc(count * sizeof(float));
            if (!p->host)
                tr_comm_abort(c, "out of memory (%zu floats of gradient staging)", count);
            p->host_count = count;
        }
        if ((rc = kn_copy(p->ctx, s, p->host, buf, count * sizeof(float), KN_D2H)) < 0 ||
            (rc = kn_stream_sync(s)) < 0)
            tr_comm_abort(c, "copying the gradients to the host: %s", kn_errmsg(p->ctx));
        where = p->host;
    }
    check(c, MPI_Iallreduce(MPI_IN_PLACE, where, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                            &p->req), "MPI_Iallreduce of the gradients");
    p->active = 1;
    if (ms)
        *ms = (now_s() - t0) * 1e3;
    return 0;
}

int tr_comm_grads_wait(struct tr_comm *c, double *ms)
{
    struct tr_comm_impl *p = c->impl;
    double t0 = now_s();
    int rc;

    if (ms)
        *ms = 0.0;
    if (!p || !p->active)
        return 0;
    p->active = 0;
    if (c->nccl) {
        double deadline = t0 + c->timeout_s;
        float gpu_ms = 0.0f;
        long polls = 0;

        while ((rc = kn_event_query(p->a1)) == 0) {
            if (++polls > SPIN_POLLS) {
                struct timespec ts = {0, 20000};

                nanosleep(&ts, NULL);
            }
            if (now_s() > deadline) {
                if (p->nccl.comm_abort)
                    p->nccl.comm_abort(p->ncomm);
                p->ncomm = NULL;
                tr_comm_abort(c, "all-reduce did not complete in %.0f s: a rank died or hangs",
                              c->timeout_s);
            }
        }
        if (rc < 0 || kn_event_elapsed_ms(p->a0, p->a1, &gpu_ms) < 0)
            tr_comm_abort(c, "the NCCL all-reduce failed: %s", kn_errmsg(p->ctx));
        if (ms)
            *ms = gpu_ms;
        return 0;
    }
    wait_req(c, &p->req, "all-reduce");
    if (p->cuda && (rc = kn_copy(p->ctx, p->s, p->buf, p->host, p->count * sizeof(float),
                                 KN_H2D)) < 0)
        tr_comm_abort(c, "copying the summed gradients back: %s", kn_errmsg(p->ctx));
    if (ms)
        *ms = (now_s() - t0) * 1e3;
    return 0;
}

int tr_comm_sum(struct tr_comm *c, double *v, int n)
{
    MPI_Request req;

    if (c->world == 1)
        return 0;
    check(c, MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req),
          "MPI_Iallreduce of the figures");
    wait_req(c, &req, "all-reduce of the epoch's figures");
    return 0;
}

int tr_comm_gather_u64(struct tr_comm *c, uint64_t v, uint64_t *all)
{
    MPI_Request req;

    if (c->world == 1) {
        all[0] = v;
        return 0;
    }
    check(c, MPI_Igather(&v, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req),
          "MPI_Igather");
    wait_req(c, &req, "gathering the checksums");
    return 0;
}
