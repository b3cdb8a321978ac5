/*
 * stream.h - one attached client's stream and its ring (stream.c): the
 * scheduler's modules (stream.c, fairq.c, share.c, plan.c, sched.c) share
 * this struct; nothing outside them sees into it (scheduler.h keeps it
 * opaque).
 *
 * Who changes what:
 *   stream.c  the lifecycle (attach, ring, release, fail, kick, detach),
 *             released and the figures of WAITS;
 *   plan.c    next_g, published and the slot bookkeeping (slot_*), as it
 *             plans batches and counts them published;
 *   fairq.c   fq (its queue and its turn);
 *   share.c   sh (its group);
 *   pool.c    knows, through sched_worker_learns.
 *
 * A stream's state (ring.h, daemon.h invariants I1-I3):
 *
 *      released <= published <= next_g <= released + depth
 *
 *   released   what the client has handed back (validated from the ring)
 *   published  batches whose every chunk is written and `ready` is set,
 *              counted in order
 *   next_g     the next batch to plan
 */
#ifndef RINGFEED_DAEMON_STREAM_H
#define RINGFEED_DAEMON_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "ctl.h"
#include "fairq.h"
#include "mix.h"
#include "pool.h"
#include "ring.h"
#include "sampler.h"
#include "share.h"
#include "subset.h"
#include "fields.h"
#include "transform.h"
#include "wire.h"

#define SCHED_EPOCH_MAX UINT32_MAX /* the sampler and RNG key an epoch by 32 bits */

/*
 * A mixture stream (docs/design/mixtures.md): ATTACH mix=, or dataset=NAME
 * of a config mixture.NAME.  Its samples are mixture indices (mix.h) of
 * the view of its sources (dataset.h VIEW), which the stream's sampler
 * draws through the plan; dataset_id is its first source.
 */
struct stream_mix {
    struct mix_plan plan;
    struct dataset *view;               /* the sources read as one, owned */
    uint32_t ids[MIX_SOURCES_MAX];      /* their catalogue slots */
    uint64_t start[MIX_SOURCES_MAX];    /* each source's count where the stream
                                           started (mix_plan_counts) */
};

struct stream {
    struct stream *next;
    struct daemon *d;
    uint32_t id;
    void *conn;                     /* the server's connection */
    bool dead;                      /* detached, waiting for its jobs */
    bool failed;                    /* stream failed; no more scheduling */
    bool kicked;                    /* to be disconnected (stream_kick); no more scheduling */
    bool kick_sent;                 /* the server was told (sched_run_kicks) */
    char kick_why[200];
    uint32_t jobs_live;

    struct fq_member fq;            /* fairq.c's */
    struct share_member sh;         /* share.c's */

    uint32_t dataset_id;
    struct stream_mix *mix;         /* a mixture stream's, else NULL */
    struct ctl_attach a;
    uint32_t xform_id;
    uint64_t cost_ns;               /* the transform's cost per sample */
    struct xform_out out;
    struct wire_xform xp;
    struct xform_fields fx;         /* the ring's field table (version 3) and
                                       geometry (fields.h); geom is fx.g */
    struct ring_geom geom;
    uint64_t n;                     /* samples the stream draws from: the
                                       subset's, else the dataset's */
    struct subset sub;              /* ATTACH subset=: the sampler's position
                                       p < n is dataset index subset_at(sub, p)
                                       (stream_index); nruns 0: the whole
                                       dataset, p itself */
    struct wire_subset wsub;        /* what the workers are told of it */
    uint64_t block;                 /* shuffle=block: samples per block (the
                                       ATTACH's block=, else the default from
                                       the dataset's shards: stream_block);
                                       0 with the other shuffles */
    uint64_t bpe;                   /* batches per epoch for this rank */
    uint64_t start_epoch, start_seq;

    int memfd, efd;
    void *mem;
    bool locked;
    struct ring_job *making;        /* MAKING: its ring is being made; NULL after */
    uint32_t uid;                   /* the client's (memory-per-uid) */
    uint32_t pid;                   /* its process when it connected (SO_PEERCRED) */
    char unit[64];                  /* its systemd unit or cgroup's last part, "-"
                                       where /proc does not say (sched_set_peer) */
    uint32_t version;               /* the ring layout the client speaks */
    bool want_release;              /* what the ring's want_release says (M4) */

    uint64_t next_g, published, released;
    /* the daemon's own record of each slot's batch: its number, samples and
     * chunks, as planned (M2).  The ring's copies are client-writable, so
     * nothing is ever read back from them (ring.h T1, T3) */
    uint64_t slot_g[RING_MAX_DEPTH];
    uint32_t slot_count[RING_MAX_DEPTH];
    uint32_t slot_chunks[RING_MAX_DEPTH];
    uint32_t slot_done[RING_MAX_DEPTH];  /* chunks known written: DONE, or
                                            found set after a worker died */
    uint64_t slot_plan_ns[RING_MAX_DEPTH]; /* when its batch was planned (WAITS) */
    uint8_t knows[POOL_MAX / 8];

    uint32_t weight_asked;          /* the ATTACH's weight=, 0 when none (fq.weight
                                     * is what the config granted: grant_weight) */

    /* stats */
    uint64_t batches, samples;
    uint64_t attach_ns;
    uint64_t starved_since;         /* client caught up and waits; 0 if not (WAITS) */
    uint64_t starved_pub;           /* published when that wait began: it ends
                                       with the next batch published */
    uint64_t starved_ns;            /* time the client waited on the daemon, ended waits */
    uint64_t waits;                 /* waits ended (observed into wait_hist) */
    uint64_t production_ns;         /* plan to publication, its published batches */
    uint64_t boxes_dropped;         /* boxes the crop dropped (wire_done.dropped) */
    uint64_t rows[WIRE_FIELDS_MAX]; /* rows delivered per RAGGED field (wire_done.rows) */
    /* NET_WAITS: an on-demand dataset's next batch waited for a shard to
     * reach the node cache (plan.c, shards_gate): since when (0: not now),
     * the waits ended and their total */
    uint64_t net_wait_since, net_waits, net_wait_ns;
};

/* No batch in this slot (slot_g). */
#define STREAM_NO_BATCH UINT64_MAX

/* Nothing more is planned for st: detached, failed, or to be kicked. */
static inline bool stream_ended(const struct stream *st)
{
    return st->dead || st->failed || st->kicked;
}

/* Does st's ring have room for n more batches (ring.h M1)? */
static inline bool stream_has_room(const struct stream *st, uint64_t n)
{
    return st->next_g + n <= st->released + st->geom.depth;
}

/* Slot i of the stream's ring, placed by the daemon's own geometry: the
 * header's copy of it lives in memory the client can write (ring.h M3), so
 * ring_slot(), which reads hdr_size and slot_stride from there, is not used
 * on this side. */
struct ring_slot *stream_slot(const struct stream *st, uint32_t i);
/* (epoch, seq) of stream batch g. */
void stream_batch_pos(const struct stream *st, uint64_t g, uint64_t *epoch, uint64_t *seq);
/* The stream's sampler for an epoch; 0 or sampler_init's error.  Its
 * samples are positions in the stream's subset: stream_index maps one to
 * the dataset index (the workers do the same with their copy). */
int stream_sampler(const struct stream *st, uint64_t epoch, struct sampler *s);
static inline uint64_t stream_index(const struct stream *st, uint64_t pos)
{
    return st->sub.nruns ? subset_at(&st->sub, pos) : pos;
}

/* The dataset a stream reads: a mixture's view, else its catalogue entry's. */
const struct dataset *stream_dataset(const struct stream *st);
/* Does st read catalogue dataset i (itself, or as one of its sources)? */
bool stream_reads(const struct stream *st, uint32_t i);
/* A mixture stream's samples delivered per source since it attached
 * ("web:700,books:300") into buf, for STATS; "" for another stream. */
void stream_mix_text(const struct stream *st, char *buf, size_t cap);

/* The stream's subset as STATS and the log show it: "val", "0:5000" (the
 * range resolved against the dataset), "-" for the whole dataset. */
void stream_subset_text(const struct stream *st, char *buf, size_t cap);

/* Frees a detached stream (its last job is gone). */
void stream_free(struct stream *st);
/* The stream cannot go on: tells the client through the ring and stops
 * planning for it (its queued jobs and its group let go of it). */
void stream_fail(struct daemon *d, struct stream *st, int code, const char *why);
/* The client broke the protocol: nothing more is planned for it now, and
 * the server is told to disconnect it on the loop's next turn
 * (sched_run_kicks), never from inside a scheduler call. */
void stream_kick(struct daemon *d, struct stream *st, const char *why);
/* Reads and checks the client's release counter (ring.h M3), plans what it
 * makes room for, and sets want_release (M4).  False when the client was
 * kicked for a bad counter. */
bool stream_take_release(struct daemon *d, struct stream *st);

/* sched.c: runs sched_run_kicks on the loop's next turn. */
void sched_defer_kicks(struct daemon *d);

/* I1 and S1 (stream.c); aborts on a broken one in checking builds. */
void stream_check(const struct daemon *d);

#endif
