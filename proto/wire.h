/*
 * wire.h - messages between ringfeedd's main process and its workers.
 *
 * Each worker talks to the main process over its own AF_UNIX SOCK_SEQPACKET
 * socketpair (fd 3 in the worker), so every message arrives whole.  Both
 * sides are ringfeedd of the same build: the structs go as they are, and a
 * message is checked for its type and exact length before use.
 *
 *   main -> worker                      worker -> main
 *   WIRE_RING_ADD  (+ the ring memfd)   WIRE_HELLO     once, at start
 *   WIRE_RING_DEL                       WIRE_DONE      per job
 *   WIRE_JOB                            WIRE_PROGRESS  per sample, careful jobs
 *   WIRE_QUARANTINE
 *   WIRE_RETIRE
 *
 * A job is a chunk of one batch: samples [first, first + count) of batch
 * `seq` of epoch `epoch`, in ring slot `slot`.  It names no sample: the
 * worker runs the stream's sampler itself (its parameters come in
 * WIRE_RING_ADD; proto/sampler.h is a pure function), so the main process
 * stays off the per-sample path and a job is one small message whatever its
 * size.  Workers still hold no state a crash could lose: a dead worker's
 * jobs are sent again elsewhere and plan the same samples.
 */
#ifndef RINGFEED_PROTO_WIRE_H
#define RINGFEED_PROTO_WIRE_H

#include <stdint.h>

#include "aug_spec.h"
#include "mix.h"
#include "ring.h"

#define WIRE_FD 3              /* the worker's end of its socketpair */
#define WIRE_JOB_MAX 1024      /* samples in one job, at most */
#define WIRE_BAD_KINDS 8
#define WIRE_MAX_RINGS 1024     /* rings one worker maps: every attached client's */
#define WIRE_NO_FIELD 0xffffffffu /* wire_xform.field: no field bound (raw) */
#define WIRE_FIELDS_MAX 16      /* fields of a sample (SCHEMA_MAX_FIELDS) */

enum wire_type {
    WIRE_HELLO = 1,
    WIRE_RING_ADD,
    WIRE_RING_DEL,
    WIRE_JOB,
    WIRE_DONE,
    WIRE_PROGRESS,
    WIRE_QUARANTINE,
    WIRE_RETIRE,
};

/* Why a sample was bad; indexes the per-reason counters. */
enum wire_bad {
    BAD_READ = 0,      /* I/O error or short file */
    BAD_CHECKSUM,      /* record checksum mismatch */
    BAD_DECODE,        /* zstd or JPEG could not decode it */
    BAD_SHAPE,         /* decoded size or dimensions not as the dataset says */
    BAD_TOO_LARGE,     /* over the pixel or scan cap */
    BAD_QUARANTINED,   /* it killed workers before */
    BAD_KIND_COUNT,
};

/* Parameters of a transform, as ATTACH gave them. */
struct wire_xform {
    uint32_t id;          /* index into the transform table */
    uint32_t size;        /* output side for image transforms */
    uint32_t layout;      /* enum ring_layout */
    uint32_t field;       /* the schema field the image transform is bound
                             to (ATTACH field=, resolved by the daemon);
                             WIRE_NO_FIELD for raw */
    double scale_lo, scale_hi, ratio_lo, ratio_hi, flip, crop;
    uint32_t context;     /* tokens: a window's stride (its L + 1 tokens) */
    uint32_t doc_ids;     /* tokens: 1 adds the doc_ids field */
    uint64_t pixel_cap;   /* not from ATTACH: the config's pixel-cap, 0 none */
    struct aug_spec aug;  /* ATTACH augment=, parsed (a recipe resolved): the
                             ops run after the transform; n 0: none */
};

/* The samples a stream draws from (ATTACH subset=): the worker maps the
 * sampler's positions 0..n-1 through it (proto/subset.h).  A named set is
 * read by the worker from the pack and must be the file the main process
 * read: its name, size and CRC-32C as the MANIFEST named them then. */
enum wire_subset_kind {
    WIRE_SUBSET_NONE = 0,  /* the whole dataset: position = index */
    WIRE_SUBSET_RANGE,     /* [start, stop) */
    WIRE_SUBSET_NAMED,     /* the set in file, count indices */
};

struct wire_subset {
    uint32_t kind;        /* enum wire_subset_kind */
    uint32_t crc;         /* named: the file's CRC-32C */
    uint64_t start, stop; /* range */
    uint64_t count;       /* named: indices */
    uint64_t bytes;       /* named: the file's size */
    char name[33];        /* named: the set's name (SUBSET_NAME_MAX + 1) */
    char file[256];       /* named: its file in the dataset folder */
};

struct wire_ring_add {
    uint32_t type;
    uint32_t ring_id;
    uint64_t total_size;
    uint64_t seed;
    uint64_t dataset_samples; /* the sampler's n: the subset's size with one */
    uint64_t dataset_identity; /* dataset_identity() of the main process's open */
    uint32_t dataset_id;  /* index in the catalogue the worker was started with */
    uint32_t max_bad;     /* consecutive bad samples before the stream fails */
    /* the sampler's parameters besides seed, n and the epoch (the job's) */
    uint32_t rank, world, batch;
    uint8_t shuffle, drop_last, drop_last_batch;
    uint8_t wake_always;  /* a version-1 client: FUTEX_WAKE every publish (ring.h W2) */
    uint64_t shuffle_block; /* shuffle (enum sampler_shuffle) block: samples
                               per block; 0 with the other kinds */
    uint32_t ring_version; /* the layout the ring was made in (1..3): the
                              worker recomputes the field table of a
                              version-3 ring from its own schema */
    struct wire_xform xform;
    struct wire_subset subset;
    /* the ring's layout as the main process made it (its own copy, not the
     * shared header, which the client can rewrite at any time, also before
     * a worker started later first maps the ring): the worker builds its
     * own table from the schema and these parameters and checks it gives
     * this geometry and this digest (xform_fields_digest) */
    struct ring_geom geom;
    uint32_t fields_digest;
    /* a mixture ring (mix.h): its sources' catalogue ids in order (the
     * first is dataset_id), the shares the blend runs on, and the plan's
     * parameters; the worker builds the same view and plan from its own
     * opens, checked by the view's identity (dataset_identity) and the
     * sum of the sources' samples (dataset_samples); 0 sources: a ring of
     * one dataset */
    uint32_t nsources;
    uint32_t sources[MIX_SOURCES_MAX];
    uint64_t shares[MIX_SOURCES_MAX];
    uint64_t mix_units;                 /* the main process's walk: an epoch's
                                           positions, and each source's count
                                           at its end (mix_plan_adopt) */
    uint64_t mix_ends[MIX_SOURCES_MAX];
    int32_t epoch_of;
    uint8_t no_repeat, per_stream;
    uint8_t pad8[2];
};

struct wire_ring_del {
    uint32_t type;
    uint32_t ring_id;
};

/* Rings one job writes at most: the members of one share group
 * (SHARING in share.c).  The worker makes each sample once in its own
 * memory and copies it from there into every one of them (never from one
 * ring into another: each client can write its own). */
#define WIRE_TARGETS_MAX 8

struct wire_target {
    uint32_t ring_id;
    uint32_t slot;
    uint64_t stream_seq;  /* batch g in that ring's stream */
};

struct wire_job {
    uint32_t type;
    uint32_t ring_id;
    uint64_t job_id;
    uint64_t stream_seq;  /* batch g */
    uint64_t epoch;
    uint64_t seq;         /* the batch within its epoch */
    uint32_t slot;
    uint32_t chunk;       /* bit in chunks_done */
    uint32_t first;       /* first sample of the chunk within the batch */
    uint32_t count;
    uint32_t careful;     /* report WIRE_PROGRESS before each sample */
    uint32_t ntargets;    /* 1 + the rings in more[] */
    struct wire_target more[WIRE_TARGETS_MAX - 1]; /* the same chunk, copied there */
};

/* Worker counters, cumulative since the worker started. */
struct wire_counters {
    uint64_t jobs, samples, bytes_read;
    uint64_t busy_ns, io_ns, decode_ns, transform_ns, write_ns;
    uint64_t image_ns, resize_ns; /* parts of transform_ns, as write_ns */
    uint64_t cpu_ns;      /* the worker's CPU time in jobs (busy_ns is wall time) */
    uint64_t tiled;       /* JPEG samples decoded from restart-interval tiles */
    uint64_t bad[WIRE_BAD_KINDS];
    uint64_t substituted;
    uint64_t boxes_dropped; /* boxes fields: boxes whose centre left the crop */
    uint64_t aug_ns[AUG_OP_COUNT];     /* per augmentation op (aug_spec.h): time */
    uint64_t aug_images[AUG_OP_COUNT]; /* and images it ran on (drawn to apply or not) */
};

enum wire_status {
    WIRE_OK = 0,
    WIRE_NO_RING,       /* the job named a ring this worker cannot map */
    WIRE_STREAM_FAILED, /* too many bad samples in a row: fail the client */
    WIRE_DATASET_FAILED, /* the dataset's files changed since they were opened
                          * (truncated, replaced, removed): fail every stream
                          * of the dataset, reason names the shard and what */
    WIRE_SHARD_LOST,    /* an on-demand dataset's shard could not be opened
                         * (gone from the node cache): nothing was written;
                         * the job runs again once it is fetched anew */
};

struct wire_done {
    uint32_t type;
    uint32_t status;      /* enum wire_status */
    uint64_t job_id;
    uint32_t ring_id;
    uint32_t published;   /* 1 if this job completed and published the batch */
    char reason[192];     /* for WIRE_STREAM_FAILED and WIRE_NO_RING */
    uint32_t dropped;     /* boxes the crop dropped in this job (ring_slot.dropped) */
    uint32_t pad;
    uint64_t rows[WIRE_FIELDS_MAX]; /* per field of a version-3 ring: rows this
                                       job delivered (ragged and bytes fields) */
    struct wire_counters c;
};

struct wire_progress {
    uint32_t type;
    uint32_t j;           /* sample within the job about to be processed */
    uint64_t job_id;
};

struct wire_quarantine {
    uint32_t type;
    uint32_t dataset_id;
    uint64_t index;
};

struct wire_hello {
    uint32_t type;
    uint32_t pid;
    /* the worker's build (daemon/common/buildid.h), first so that a
     * worker of another build is named whatever its HELLO's size */
    char build[64];
    char io_backend[32];  /* "io_uring" or "pread (reason)" */
    char reason[96];
};

struct wire_retire {
    uint32_t type;
    uint32_t pad;
};

#endif
