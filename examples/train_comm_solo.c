/*
 * train_comm_solo.c - the one-rank communicator (train_comm.h) of a
 * ringfeed-train built without MPI: every collective is the identity.
 * Ranks from the environment (RANK/WORLD_SIZE) still split the epoch in
 * libringfeed, but each process then trains its own model on its share.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_comm.h"

int tr_comm_open(struct tr_comm *c, double timeout_s)
{
    memset(c, 0, sizeof(*c));
    c->world = 1;
    c->env_rank = c->env_world = -1;
    c->timeout_s = timeout_s;
    snprintf(c->note, sizeof(c->note), "none (one rank; built without MPI)");
    return 0;
}

void tr_comm_close(struct tr_comm *c)
{
    (void)c;
}

int tr_comm_bind(struct tr_comm *c, struct kn_ctx *ctx, int device)
{
    (void)c, (void)ctx, (void)device;
    return 0;
}

void tr_comm_unbind(struct tr_comm *c)
{
    (void)c;
}

int tr_comm_bcast(struct tr_comm *c, void *host, size_t bytes)
{
    (void)c, (void)host, (void)bytes;
    return 0;
}

int tr_comm_grads_start(struct tr_comm *c, float *buf, size_t count, struct kn_stream *s,
                        double *ms)
{
    (void)c, (void)buf, (void)count, (void)s;
    if (ms)
        *ms = 0.0;
    return 0;
}

int tr_comm_grads_wait(struct tr_comm *c, double *ms)
{
    (void)c;
    if (ms)
        *ms = 0.0;
    return 0;
}

int tr_comm_sum(struct tr_comm *c, double *v, int n)
{
    (void)c, (void)v, (void)n;
    return 0;
}

int tr_comm_gather_u64(struct tr_comm *c, uint64_t v, uint64_t *all)
{
    (void)c;
    all[0] = v;
    return 0;
}

void tr_comm_abort(struct tr_comm *c, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "ringfeed-train: rank %d: ", c->rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}
