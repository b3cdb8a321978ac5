/*
 * ring.h - the shared-memory ring that carries finished batches from the
 * daemon's workers to one client.
 *
 * One memfd per attached client.  The daemon creates it, sizes it, seals it
 * against shrinking, growing and further seals, and hands it (with an
 * eventfd) to the client in the reply to ATTACH.  Workers map it too and
 * write batches straight into its slots.
 *
 *   offset 0
 *   +--------------------------------------------------------------+
 *   | struct ring_hdr           (RING_HDR_SIZE = 4096 bytes)       |
 *   |   immutable part: magic, version, geometry, sample shape     |
 *   |   daemon words:   state, error                 (cache line)  |
 *   |   client words:   released                     (cache line)  |
 *   +--------------------------------------------------------------+
 *   | slot 0: struct ring_slot + struct ring_sample[batch]         |
 *   |         (padded to a page: meta_size)                        |
 *   |         pixels: batch * sample_bytes (padded to a page)      |
 *   +--------------------------------------------------------------+
 *   | slot 1 ...                       (each slot is slot_stride)  |
 *   +--------------------------------------------------------------+
 *   | slot depth-1                                                 |
 *   +--------------------------------------------------------------+
 *
 * Every slot's pixel block starts on a page boundary, so one slot's data can
 * be registered with cudaHostRegister and copied to the device as one block.
 *
 * Batches are numbered from 0 by a stream counter g that runs across epochs
 * since the attach: slot g % depth carries batch g.
 *
 * MEMORY ORDERING (the contract both sides keep; C11 atomics on the words
 * named, plain loads and stores on everything else):
 *
 *  Daemon main process (the scheduler):
 *   M1. It may start batch g only when g < released + depth, i.e. the
 *       client has released batch g - depth, the slot's previous tenant.
 *   M2. Before dispatching any job of batch g it writes the slot header
 *       (seq, epoch, count, chunks) with plain stores, then stores
 *       chunks_done = 0 and ready = 0 with release semantics.  The jobs it
 *       then sends to workers over a socket carry the happens-before edge.
 *   M3. It reads `released` with an acquire load after the eventfd fires
 *       and after each DONE of the stream's jobs, and trusts nothing it
 *       reads: released must not go backwards and must not pass the number
 *       of batches published; otherwise the client is disconnected.
 *   M4. While a job of the stream is queued or in flight, its DONE brings
 *       the main process back to read `released`, so it stores
 *       want_release = 0 and the client's releases cost no system call.
 *       With none (every admitted batch is published, so the ring is full),
 *       and while at most one batch is ready (the client's next release
 *       leaves it waiting, and the daemon's wait figures start from it),
 *       it stores want_release = 1, issues a seq_cst fence and reads
 *       `released` once more, so a release that raced the store is seen
 *       either here or through the eventfd (C3's fence pairs with this).
 *       A version-1 client ignores want_release and writes the eventfd on
 *       every release, which is as before.
 *
 *  Worker (filling chunk k of batch g):
 *   W1. It writes the chunk's pixels and per-sample records (plain stores),
 *       then does atomic_fetch_or(&chunks_done, 1 << k, acq_rel).
 *   W2. The worker whose fetch_or completes the mask (old | bit == all, and
 *       old != all) stores ready = ring_ready_word(g) with release semantics.
 *       Exactly one worker does this, so a batch is published once.  It then
 *       issues a seq_cst fence and calls FUTEX_WAKE (shared futex: no
 *       FUTEX_PRIVATE_FLAG) on `ready` only if `sleeping` is set: a client
 *       that is busy or spinning costs the worker no system call.  For a
 *       version-1 client (which never sets `sleeping`) it always wakes.
 *   W3. A job re-run after its worker died sets the same bit again: the
 *       mask is idempotent, and the main process only re-runs jobs whose bit
 *       is not yet set, so a published slot is never written again.  When
 *       a dead worker's job completed the mask, the main process stores
 *       ready if the worker had not and always calls FUTEX_WAKE: the worker
 *       may have died between its store and its wake.
 *
 *  Client (waiting for batch g):
 *   C1. It loads ready with acquire semantics; when it equals
 *       ring_ready_word(g) every store of every chunk of batch g is visible.
 *       It then checks the slot's seq fields against g before trusting them.
 *   C2. While ready differs, it spins briefly, then stores sleeping = 1,
 *       issues a seq_cst fence, loads ready again and, if it still differs,
 *       FUTEX_WAITs on it with the value it saw and a timeout (never an
 *       unbounded wait); it stores sleeping = 0 when it wakes.  The fences
 *       pair (W2): either the worker sees `sleeping` and wakes the client,
 *       or the client sees `ready` and does not sleep.
 *   C3. When done with batch g it stores released = g + 1 with release
 *       semantics, issues a seq_cst fence, and writes 1 to the eventfd if
 *       want_release is set (M4).
 *   C4. The first time one wait goes to sleep (C2's sleeping = 1 and its
 *       fence), it writes 1 to the eventfd if want_release is set, so the
 *       daemon sees the wait begin even while the client holds a batch (a
 *       Python loop keeps its last batch alive while it asks for the
 *       next; WAITS in daemon/stream.c).  A client that does not is only
 *       counted waiting once it has released every batch.
 *
 * WHICH MEMORY IS WHOSE.  The client maps the whole memfd read-write, so
 * every byte of it is client-writable, at any time, whatever the rules above
 * say a client writes.  The daemon promises the contents of the rest (the
 * immutable header, state/error/reason, a published slot) only to a client
 * that leaves them alone: one that writes there garbles its own stream and
 * nothing else.  So to the daemon the whole mapping is client input:
 *
 *  T1. Nothing read from a ring is ever a source of bytes another client
 *      receives.  A batch shared by several rings (SHARING in
 *      daemon/share.c) is made in the worker's own memory, one sample at a
 *      time, and copied from there into each member's slot, its per-sample
 *      records likewise; never from one member's slot into another's.
 *  T2. No record is checked or decoded in a ring.  The worker reads a
 *      record into its own staging buffer, checks its CRC-32C and decodes
 *      it (zstd reads back what it has decoded, and checks it) in its own
 *      memory, and only then stores the sample into the slot; a transform
 *      writes its output there and never reads it back.  So a bad sample
 *      the daemon reports (and blames on the dataset) is never the
 *      client's doing.
 *  T3. The words the daemon does read there are bounded before use and
 *      are never an index, offset or size: `released` is validated (M3);
 *      `chunks`, `chunks_done` and `ready` can only make that same ring's
 *      batch published sooner: the main process keeps its own record of
 *      each slot's batch (number, samples, chunks) and counts the chunks
 *      its workers report written, and publishes a batch whose chunks are
 *      all written whatever those words say (plan.c chunk_counted), so a
 *      client cannot keep its batches unpublished to hide that it holds
 *      back a share group; `sleeping` only decides whether to wake.  Slot
 *      headers are written from that record, never copied from another
 *      ring (a member joining a share group, share.c).  Slot numbers,
 *      offsets and geometry come from the job messages and the main
 *      process's own figures (WIRE_RING_ADD), never from the header: a
 *      worker may first map the ring after the client rewrote it.
 *
 * Memory only the daemon writes: its processes' private memory (the
 * workers' staging, decode and sample buffers, the geometry each checked at
 * WIRE_RING_ADD, the main process's streams).  Shards are read-only to all.
 */
#ifndef RINGFEED_PROTO_RING_H
#define RINGFEED_PROTO_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define RING_MAGIC 0x31474e4952465200ull /* "\0RFRING1" read little endian */
#define RING_VERSION 3u       /* the layout this build writes and speaks */
#define RING_VERSION_MIN 1u   /* the oldest a client may ask for (see M4, W2) */
#define RING_VERSION_FIELDS 3u /* the first with fields (see VERSION 3) */
#define RING_HDR_SIZE 4096u
#define RING_PAGE 4096u
#define RING_MAX_DEPTH 64u
#define RING_MAX_BATCH 65536u
#define RING_MAX_CHUNKS 64u /* chunks_done is a 64-bit mask */

/* ring_hdr.state */
enum ring_state {
    RING_LIVE = 1,    /* the daemon is producing */
    RING_CLOSED = 2,  /* the daemon detached this client (see error) */
    RING_FAILED = 3,  /* the stream cannot go on (see error), e.g. bad samples */
};

/* ring_sample.flags */
enum ring_sample_flag {
    RING_SAMPLE_PADDING = 1u << 0,     /* wrap-around padding for equal ranks */
    RING_SAMPLE_SUBSTITUTED = 1u << 1, /* the planned sample was bad; this is
                                          the next good one in epoch order */
};

/*
 * Element type and layout of one sample.  The dtype numbers are part of the
 * layout (a client reads them, as RF_DTYPE_* in ringfeed.h): never reuse or
 * renumber one.  Elements are little-endian.  Which dataset dtype each
 * stands for, its name and size: dataset_types.c's table.
 */
enum ring_dtype {
    RING_U8 = 1,
    RING_I8 = 2,
    RING_I16 = 3,
    RING_I32 = 4,
    RING_F32 = 5,
    RING_F64 = 6,
    RING_I64 = 7,  /* 7..10: since ring version 3 (a version-2 client */
    RING_F16 = 8,  /* is never given them: its ATTACH is refused) */
    RING_BF16 = 9,
    RING_U16 = 10,
};
enum ring_layout { RING_CHW = 1, RING_HWC = 2, RING_FLAT = 3 };

/*
 * VERSION 3: FIELDS.  A version-3 ring describes every field of a sample
 * (proto/schema.h) in the header's field table, and a slot holds one
 * column per field after the per-sample records, each starting on a page:
 *
 *   slot: | ring_slot + ring_sample[batch] | column 0 | column 1 | ...
 *                                 meta_size^
 *
 *  RING_FIELD_FIXED  (image after its transform, tensor, scalar): batch *
 *      item_bytes bytes at `offset`, sample i's at offset + i * item_bytes.
 *  RING_FIELD_RAGGED (ragged, bytes): at `offsets_at`, batch + 1 int64
 *      offsets in rows (offsets[0] = 0, monotone, offsets[count] = the
 *      batch's rows, at most `capacity`); at `offset`, capacity *
 *      item_bytes bytes of values, sample i's rows from offsets[i] to
 *      offsets[i + 1], with no gap.  A batch that needs more rows than
 *      the capacity fails the stream, naming the field and the figures.
 *
 * Column 0 is at meta_size, where versions 1 and 2 put their one data
 * block; a dataset of one image or tensor and a label has two fields,
 * that one and "label" (FIXED, i64), whose values ring_sample.label
 * repeats as an int32.  A version-2 client is given the version-2 layout
 * (no field table, no label column) and refused a dataset it cannot read
 * (kind fields, or a dtype from 7 up).  Every offset and size in the table
 * is computed by ring_geometry_fields from the kinds, item sizes and
 * capacities: a reader recomputes them from those and compares.
 */
#define RING_MAX_FIELDS 16u
#define RING_FIELDS_AT 1024u
#define RING_FIELD_NAME 32u

enum ring_field_kind { RING_FIELD_FIXED = 1, RING_FIELD_RAGGED = 2 };
/* ring_field.role: what the field is to field `of` */
enum ring_field_role {
    RING_ROLE_NONE = 0,
    RING_ROLE_BOXES = 1, /* RAGGED f32 x 4: boxes of image field `of` */
    RING_ROLE_MASK = 2,  /* FIXED one channel: the mask of image field `of` */
    RING_ROLE_ROWS = 3,  /* RAGGED: a row per box of boxes field `of` */
};

struct ring_field {
    char name[RING_FIELD_NAME]; /* NUL-terminated, [A-Za-z0-9_] */
    uint32_t kind;              /* enum ring_field_kind */
    uint32_t dtype;             /* enum ring_dtype */
    uint32_t layout;            /* enum ring_layout: an image's CHW or HWC,
                                   else FLAT */
    uint32_t ndim;              /* 0..4 dims of one sample (FIXED; 0: one
                                   value) or of one row (RAGGED; 0: one
                                   value per row) */
    uint32_t shape[4];
    uint32_t role;              /* enum ring_field_role */
    uint32_t of;                /* the field the role refers to */
    uint64_t item_bytes;        /* FIXED: one sample's bytes; RAGGED: one row's */
    uint64_t capacity;          /* FIXED: batch; RAGGED: rows per batch */
    uint64_t offset;            /* within the slot: the column (values) */
    uint64_t offsets_at;        /* RAGGED: the int64 offsets; FIXED: 0 */
    uint8_t pad[128 - 104];
};

struct ring_hdr {
    /* immutable after the daemon's ring_init() */
    uint64_t magic;
    uint32_t version;
    uint32_t hdr_size;      /* RING_HDR_SIZE */
    uint64_t total_size;    /* bytes of the whole memfd */
    uint32_t depth;         /* slots */
    uint32_t batch;         /* samples per slot, at most */
    uint64_t slot_stride;   /* bytes from one slot to the next */
    uint64_t meta_size;     /* bytes of slot header + samples, page padded */
    uint64_t sample_bytes;  /* bytes of one sample's pixels */
    uint32_t dtype;         /* enum ring_dtype: sample_bytes is the shape's
                               elements times its size */
    uint32_t layout;        /* enum ring_layout */
    uint32_t shape[3];      /* CHW, or HWC, or {elements, 1, 1} for FLAT */
    uint32_t classes;
    uint64_t dataset_samples;
    uint64_t batches_per_epoch; /* for this rank */
    uint64_t start_epoch;       /* the stream's batch 0 is ... */
    uint64_t start_seq;         /* ... this (epoch, sequence) */
    uint64_t attach_id;         /* the daemon's number for this client */
    uint32_t nfields;           /* version 3: entries of fields[] (1..) */
    uint32_t primary;           /* version 3: the field whose column the
                                   data block, sample_bytes, dtype, layout
                                   and shape above describe (the one the
                                   transform is bound to) */
    uint8_t pad0[256 - 128];

    /* written by the daemon */
    _Alignas(64) _Atomic uint32_t state; /* enum ring_state */
    int32_t error;                     /* negative errno when not LIVE */
    char reason[248];                  /* one line, NUL-terminated */

    /* written by the client: untrusted */
    _Alignas(64) _Atomic uint64_t released; /* batches released so far */
    _Atomic uint32_t sleeping;              /* version 2: nonzero while the
                                               client sleeps in FUTEX_WAIT (C2) */

    /* written by the daemon, version 2: nonzero when the daemon wants the
     * eventfd after each release (M4); otherwise it reads `released` when
     * a worker reports, and a release costs the client no system call */
    _Alignas(64) _Atomic uint32_t want_release;

    /* version 3, immutable after the daemon fills it: one entry per field
     * of the sample (RING_FIELDS_AT), the schema's order */
    _Alignas(1024) struct ring_field fields[RING_MAX_FIELDS];
};

/* One slot's header.  Lives at the start of each slot. */
struct ring_slot {
    _Atomic uint32_t ready;       /* ring_ready_word(g) once published */
    uint32_t count;               /* samples in this batch */
    uint64_t stream_seq;          /* g */
    uint64_t epoch;
    uint64_t seq;                 /* batch number within the epoch */
    uint32_t chunks;              /* number of chunks the batch was cut in */
    uint32_t substituted;         /* samples replaced because they were bad */
    _Atomic uint64_t chunks_done; /* bit k set when chunk k is written */
    uint32_t dropped;             /* version 3: boxes dropped by the crop
                                     (their centre left it) in this batch */
    uint8_t pad[64 - 52];
};

/* Per sample, after the slot header. */
struct ring_sample {
    uint64_t index;  /* dataset index actually delivered */
    int32_t label;
    uint32_t flags;  /* enum ring_sample_flag */
};

/* The value `ready` takes when batch g is published: never 0. */
static inline uint32_t ring_ready_word(uint64_t g)
{
    uint32_t w = (uint32_t)(g + 1);

    return w ? w : 1;
}

/* Geometry of a ring, computed from what the client asked for. */
struct ring_geom {
    uint32_t depth;
    uint32_t batch;
    uint64_t sample_bytes;
    uint64_t meta_size;
    uint64_t slot_stride;
    uint64_t total_size;
};

/*
 * Computes the ring's geometry.  Returns 0, or -EINVAL for a depth or batch
 * out of range, or -EOVERFLOW when the sizes do not fit (the message in err
 * names the figure).
 */
int ring_geometry(uint32_t depth, uint32_t batch, uint64_t sample_bytes,
                  struct ring_geom *g, struct rf_err *err);

/*
 * Version 3: lays out the n fields of f[] (kind, item_bytes and, for
 * RAGGED, capacity set by the caller; everything else left as it is) in a
 * slot of `batch` samples: fills each one's offset and offsets_at (and a
 * FIXED one's capacity = batch), and *g with sample_bytes = field
 * primary's item_bytes.  Returns 0, -EINVAL (depth, batch, n, primary, a
 * kind or a size out of range, named in err) or -EOVERFLOW.
 */
int ring_geometry_fields(uint32_t depth, uint32_t batch, struct ring_field *f, uint32_t n,
                         uint32_t primary, struct ring_geom *g, struct rf_err *err);

/* Writes a fresh header of the given layout version (2 or 3) into mem
 * (total_size bytes, zeroed by the caller or fresh from ftruncate).  The
 * caller fills the descriptive fields (and version 3's table) after. */
void ring_init(void *mem, const struct ring_geom *g, uint32_t version);

/* Checks one field entry i of n: a terminated name of [A-Za-z0-9_], known
 * kind, dtype, layout and role, ndim <= 4.  0 or -EBADMSG. */
int ring_field_check(const struct ring_field *f, uint32_t i, uint32_t n, struct rf_err *err);

/*
 * Checks a mapped ring's header as a client receives it: magic, version
 * (2 or 3), sizes consistent with each other and with map_size, and for
 * version 3 the field table: names, kinds, dtypes, roles, and every offset
 * recomputed by ring_geometry_fields.  The caller passes a private copy of
 * the header (RING_HDR_SIZE bytes): the ring itself is client-writable and
 * may change while it is read.  Returns 0, or
 * -EPROTO (wrong magic or version: the message says which versions) or
 * -EBADMSG (inconsistent geometry).
 */
int ring_check(const void *mem, uint64_t map_size, struct rf_err *err);

static inline struct ring_slot *ring_slot(void *mem, uint32_t i)
{
    struct ring_hdr *h = mem;

    return (struct ring_slot *)((char *)mem + h->hdr_size + (uint64_t)i * h->slot_stride);
}

static inline struct ring_sample *ring_samples(struct ring_slot *s)
{
    return (struct ring_sample *)(s + 1);
}

static inline uint8_t *ring_slot_data(void *mem, uint32_t i)
{
    struct ring_hdr *h = mem;

    return (uint8_t *)ring_slot(mem, i) + h->meta_size;
}

/* Futex helpers on a shared mapping (no FUTEX_PRIVATE_FLAG). */
int ring_futex_wait(_Atomic uint32_t *word, uint32_t seen, int64_t timeout_ns);
void ring_futex_wake(_Atomic uint32_t *word);

#endif
