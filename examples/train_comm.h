/*
 * train_comm.h - ringfeed-train's ranks: who this process is in a
 * data-parallel job and the collective operations the trainer needs (the
 * gradient all-reduce, the initial weights' broadcast, the figures' sums).
 * Names carry the prefix tr_comm_.
 *
 * Two implementations, one chosen at build time:
 *   train_comm_mpi.c   (meson -Dmpi, Open MPI found) under mpirun: rank and
 *                      world from MPI_COMM_WORLD; gradients all-reduced by
 *                      NCCL on the device buffers when the backend is CUDA,
 *                      libnccl is found at run time (dlopen, train_nccl.c)
 *                      and every rank has a GPU of its own, else by MPI over
 *                      host memory (device buffers staged through the host).
 *                      Started without mpirun it is the one-rank case.
 *   train_comm_solo.c  without MPI: one rank; the calls are no-ops.
 * The header line's "allreduce: ..." is c->note, which says which one runs
 * and, for the host-memory fallback, why not NCCL.
 *
 * Failure: every collective waits with a deadline (timeout_s): MPI's
 * non-blocking calls polled with MPI_Test, NCCL's by an event polled on the
 * stream.  Past it, or on an MPI error (MPI_ERRORS_RETURN is set),
 * tr_comm_abort() ends the whole job with MPI_Abort and a message naming the
 * rank: a rank that died or hangs never leaves the others waiting.
 */
#ifndef RINGFEED_EXAMPLES_TRAIN_COMM_H
#define RINGFEED_EXAMPLES_TRAIN_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

struct tr_comm_impl;

struct tr_comm {
    int rank, world;           /* 0 and 1 outside mpirun */
    int local_rank;            /* among the ranks on this node */
    int mpi;                   /* started by an MPI launcher, MPI_Init done */
    int nccl;                  /* gradients go through NCCL */
    int env_rank, env_world;   /* the environment's RANK/WORLD_SIZE when
                                  they disagreed with MPI's (-1: agreed) */
    double timeout_s;          /* deadline of every collective */
    char launcher[96];         /* "Open MPI v4.1.4", or "" */
    char note[256];            /* how gradients are all-reduced */
    char err[512];
    struct tr_comm_impl *impl;
};

/*
 * Sets the ranks up: under an MPI launcher (Open MPI's OMPI_COMM_WORLD_SIZE
 * or PMIx's PMIX_RANK in the environment) MPI_Init and MPI_ERRORS_RETURN;
 * otherwise one rank, as the solo build.  Returns 0 or a negative errno with
 * c->err; tr_comm_close() either way.
 */
int tr_comm_open(struct tr_comm *c, double timeout_s);
void tr_comm_close(struct tr_comm *c);

/*
 * Chooses how gradients are all-reduced for the backend of ctx (one rank:
 * none) and fills c->note.  On CUDA with more than one rank: NCCL when
 * libnccl loads and no two ranks share a device (checked by comparing the
 * ranks' hostnames and device ordinals over MPI), the communicator
 * bootstrapped with ncclGetUniqueId on rank 0 and MPI_Bcast; else MPI over
 * host memory.  device is the CUDA ordinal the context uses.  0 or a
 * negative errno (c->err).
 */
int tr_comm_bind(struct tr_comm *c, struct kn_ctx *ctx, int device);

/* Lets go of what tr_comm_bind made from the context (events, the NCCL
 * communicator); before kn_close(ctx).  Safe to call twice. */
void tr_comm_unbind(struct tr_comm *c);

/* Copies rank 0's bytes of host memory to every rank. */
int tr_comm_bcast(struct tr_comm *c, void *host, size_t bytes);

/*
 * Starts the sum over ranks of the fused gradient buffer buf (count floats
 * of the context's backend memory), in place.  On CUDA with NCCL it is
 * enqueued on stream s; on the host it is an MPI_Iallreduce (CUDA without
 * NCCL first copies the buffer to the host, on s).  The caller touches
 * neither buf nor what the sums will update until tr_comm_grads_wait
 * returns.  *ms (may be NULL) gets the host time the call took.
 */
int tr_comm_grads_start(struct tr_comm *c, float *buf, size_t count, struct kn_stream *s,
                        double *ms);

/*
 * Waits (with the deadline) for the sum started last; on the host path
 * the result is then in buf (copied back on s for CUDA).  *ms gets the
 * time it cost this process: the host time blocked here, or with NCCL the
 * all-reduce's time on the stream.  No-op when none was started.
 */
int tr_comm_grads_wait(struct tr_comm *c, double *ms);

/* Sums n doubles over ranks, in place (the epoch's figures). */
int tr_comm_sum(struct tr_comm *c, double *v, int n);

/* Gathers one value from every rank into all[world] on rank 0. */
int tr_comm_gather_u64(struct tr_comm *c, uint64_t v, uint64_t *all);

/* Ends the whole job: "<prog>: rank R: msg" on stderr and, under MPI,
 * MPI_Abort (the launcher stops every rank); exit(1) otherwise. */
__attribute__((noreturn, format(printf, 2, 3)))
void tr_comm_abort(struct tr_comm *c, const char *fmt, ...);

#endif
