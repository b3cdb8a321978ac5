/*
 * ringfeed.h - libringfeed, the client library a training program links to
 * receive batches from a ringfeedd daemon.  This is its whole public API.
 *
 *     struct rf_options o;
 *     struct rf_client *c;
 *     struct rf_batch b;
 *
 *     rf_options_init(&o);
 *     o.dataset = "fmnist-train";
 *     o.batch = 256;
 *     if (rf_open(&o, &c) < 0) { fprintf(stderr, "%s\n", rf_last_error(c)); ... }
 *     while (rf_next(c, &b, -1) == 0) {
 *         train_on(b.data, b.samples, b.count);
 *         rf_release(c, &b);
 *     }
 *     rf_close(c);
 *
 * Conventions:
 *  - Every function that can fail returns 0 (or a count) on success and a
 *    negative errno on failure; rf_strerror() names the number and
 *    rf_last_error() gives the full human message (what, where, what to do).
 *  - The library owns the struct rf_client and everything a struct rf_batch
 *    points to.  A batch's memory stays valid and unchanged until it is
 *    released; after rf_release() it belongs to the daemon again.
 *  - Batches come strictly in order and must be released in the same order.
 *    A program may hold several at once (to overlap a copy with compute),
 *    up to the ring's depth minus one.
 *  - One rf_client must not be used from two threads at the same time.
 *  - An rf_client belongs to the process that opened it.  In a child made
 *    by fork() (a data-loader worker, a multiprocessing child) rf_next,
 *    rf_release, rf_cuda_copy_release and rf_poll return -EPERM and touch
 *    nothing the parent shares (the ring, its eventfd, the socket), and
 *    rf_close frees only the child's own copies: a child can neither take
 *    nor hand back the parent's batches.  A child opens its own client.
 *  - If the daemon goes away (the control connection closes, or the ring
 *    is closed because the daemon is stopping), rf_next() reconnects with
 *    backoff (50 ms doubling to 1 s) and resumes after the last batch it
 *    delivered, invisibly to the caller, until reconnect_ms have passed
 *    since the loss; then it returns -ECONNREFUSED (or the daemon's error
 *    for the last attempt) and rf_last_error() says why.  Batches the
 *    caller held when the daemon went away stay valid (their old mapping is
 *    kept until they are released) and are released as usual, oldest
 *    first; none is delivered twice and none is skipped.
 *  - rf_open() tries once: it does not wait for a daemon that is not up.
 */
#ifndef RINGFEED_H
#define RINGFEED_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RF_VERSION_MAJOR 0
#define RF_VERSION_MINOR 8

struct rf_client;

/* Options for rf_open().  rf_options_init() fills the defaults noted. */
struct rf_options {
    /* Control socket.  NULL: $RINGFEED_SOCKET, else
     * $XDG_RUNTIME_DIR/ringfeed.sock, else /run/ringfeed/ringfeed.sock. */
    const char *socket;
    /* required: a name from the daemon's catalogue, or (since 0.6) a
     * packed dataset's folder: a path with a '/' in it, or an existing
     * folder holding a MANIFEST.  A folder is served by the daemon at the
     * socket when its config names it, else by the user's own daemon,
     * ringfeedd --user, which the library starts when none is running
     * (libringfeed(3), "Dataset folders"). */
    const char *dataset;
    uint32_t batch;          /* samples per batch; 256 */
    /* Rank and world size; -1: from RANK/WORLD_SIZE (torchrun), else
     * OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE (Open MPI), else 0 and 1. */
    int32_t rank;
    int32_t world;
    uint64_t seed;           /* 0 */
    uint64_t start_epoch;    /* resume point: the first batch delivered is */
    uint64_t start_seq;      /* batch start_seq of epoch start_epoch; 0, 0 */
    const char *transform;   /* "raw" (default), "train", "eval" or "none" */
    uint32_t size;           /* output side for train/eval; 0: daemon's 224 */
    uint32_t depth;          /* ring slots; 0: the daemon's default (4, or up
                                to 16 while the ring stays within 16 MiB) */
    int shuffle;             /* RF_SHUFFLE_*: 1 (default) shuffle every epoch;
                                0 in order; 2 (since 0.7) shuffle blocks of
                                consecutive samples and within each, for a
                                cache smaller than the dataset; "block=N" in
                                params sets the block size (libringfeed(3)) */
    int drop_last;           /* 1: drop the tail instead of padding ranks; 0 */
    const char *params;      /* more ATTACH key=value pairs, space separated
                                (e.g. "scale=0.08,1 flip=0.5"); NULL.  Checked
                                by the protocol's parser in rf_open(); keys
                                set by the fields above are refused (depth
                                and size only when their field is not 0).
                                "subset=NAME" or "subset=START:STOP" draws
                                from a set of the pack or a range of
                                indices (libringfeed(3)) */
    const char *name;        /* a label for the daemon's stats; NULL */
    int reconnect_ms;        /* how long to keep reconnecting; 30000 */
};

/* struct rf_options.shuffle: the epoch's order (ATTACH shuffle=0|1|block). */
#define RF_SHUFFLE_OFF 0    /* the dataset's order (evaluation) */
#define RF_SHUFFLE_GLOBAL 1 /* a shuffle of the whole dataset */
#define RF_SHUFFLE_BLOCK 2  /* blocks of consecutive samples (about 4 shards
                               each), the blocks and each block's samples
                               shuffled (since 0.7) */

/* Per-sample record of a batch. */
struct rf_sample {
    uint64_t index;  /* dataset index delivered */
    int32_t label;
    uint32_t flags;  /* RF_SAMPLE_* */
};

#define RF_SAMPLE_PADDING 1u     /* wrap-around padding so ranks are equal */
#define RF_SAMPLE_SUBSTITUTED 2u /* the planned sample was bad; replaced */

#define RF_LAYOUT_CHW 1
#define RF_LAYOUT_HWC 2
#define RF_LAYOUT_FLAT 3

/* Element type of a batch's data (since 0.4): struct rf_batch.dtype and
 * struct rf_info.dtype.  Multi-byte elements are little-endian.  The
 * `train` and `eval` transforms write RF_DTYPE_U8; `raw` the tensor
 * dataset's own type, as stored.  rf_dtype_name and rf_dtype_size
 * describe each; the numbers never change meaning. */
#define RF_DTYPE_U8 1
#define RF_DTYPE_I8 2
#define RF_DTYPE_I16 3
#define RF_DTYPE_I32 4
#define RF_DTYPE_F32 5
#define RF_DTYPE_F64 6
#define RF_DTYPE_I64 7   /* 7..10: since 0.5, from a version-3 ring */
#define RF_DTYPE_F16 8   /* IEEE half */
#define RF_DTYPE_BF16 9  /* bfloat16: the top half of an f32 */
#define RF_DTYPE_U16 10

/* A view of one delivered batch, valid until rf_release(). */
struct rf_batch {
    const uint8_t *data;            /* count * sample_bytes bytes, page aligned */
    const struct rf_sample *samples; /* count records */
    uint32_t count;                 /* samples in this batch (<= batch) */
    uint32_t substituted;           /* of them, replacements for bad samples */
    size_t sample_bytes;            /* shape's elements * rf_dtype_size(dtype) */
    uint32_t layout;                /* RF_LAYOUT_* */
    uint32_t shape[3];              /* in elements: C,H,W for CHW; H,W,C for
                                       HWC; {elements,1,1} for FLAT */
    uint64_t epoch;
    uint64_t seq;                   /* batch number within the epoch */
    uint64_t stream_seq;            /* batch number since rf_open() */
    uint32_t slot;                  /* ring slot (for rf_slot_* helpers) */
    /* 0.4: in what was the struct's tail padding, so its size is as in
     * 0.3 and a program built against 0.3 is unaffected */
    uint32_t dtype;                 /* RF_DTYPE_* of data's elements */
};

/* Counters kept by the library. */
struct rf_stats {
    uint64_t batches;
    uint64_t samples;
    double wait_seconds;     /* time spent inside rf_next() waiting */
    double between_seconds;  /* time between rf_next() calls (the caller's) */
    uint64_t reconnects;
    uint64_t batches_per_epoch;
    uint32_t depth;
    /* 0.2: the CUDA hand-off (rf_cuda_register, rf_cuda_copy_release) */
    int32_t pinned;          /* 1: the live ring is registered with
                                cudaHostRegister, so copies from it are DMA */
    uint32_t copies_pending; /* batches handed to rf_cuda_copy_release whose
                                copy has not been seen complete yet */
    uint64_t cuda_copies;    /* batches handed to rf_cuda_copy_release */
    char pin_note[160];      /* one line: why the ring is or is not pinned */
};

/* What a stream is and where it stands (since 0.3), known from rf_open()
 * on, before any batch arrives: enough to size buffers, to compute an
 * epoch's length and to save a resume point. */
struct rf_info {
    int32_t rank;               /* as attached (the defaults resolved) */
    int32_t world;
    uint32_t batch;             /* samples per batch; an epoch's last batch
                                   may hold fewer (unless drop_last_batch) */
    uint32_t depth;             /* ring slots */
    uint64_t dataset_samples;   /* samples the stream draws from: the whole
                                   dataset's, or with ATTACH subset= (in
                                   params) the subset's */
    uint64_t batches_per_epoch; /* for this rank */
    uint64_t sample_bytes;      /* bytes of one sample's pixels */
    uint32_t layout;            /* RF_LAYOUT_* */
    uint32_t shape[3];          /* as struct rf_batch.shape */
    uint32_t classes;           /* label classes the dataset names; 0: unknown */
    uint32_t dtype;             /* RF_DTYPE_*, as struct rf_batch.dtype
                                   (0.4; was padding, 0) */
    uint64_t next_epoch;        /* where the batch the next rf_next() delivers */
    uint64_t next_seq;          /* stands: rf_options.start_epoch/start_seq
                                   to resume a stream exactly after the
                                   batches delivered so far */
};

/* Fills o with the defaults noted in struct rf_options. */
void rf_options_init(struct rf_options *o);

/*
 * Connects, attaches and maps the ring.  On success *out is a new client and
 * 0 is returned.  On failure a negative errno is returned and *out is still
 * set (unless out is NULL or memory ran out) so rf_last_error(*out) can
 * explain; the caller must rf_close(*out) either way.
 */
int rf_open(const struct rf_options *o, struct rf_client **out);

/*
 * Waits for the next batch, at most timeout_ms milliseconds (-1: as long as
 * it takes, but still reconnecting within the deadline; 0: only looks).
 * Returns 0 and fills *b; -ETIMEDOUT when none came in time, also while
 * reconnecting (call again: the reconnect deadline runs from the loss, not
 * per call); -ENOBUFS when the caller already holds depth-1 batches;
 * -ECONNREFUSED (or the daemon's refusal) when the daemon is gone past the
 * reconnect deadline; -EPIPE when the daemon detached this client for good;
 * -EIO when the daemon failed the stream (rf_last_error says why, e.g. too
 * many bad samples); -EBADMSG when a published slot broke the ring's rules.
 * The last four are final: every later call returns the same.  A batch
 * already published costs no system call.
 */
int rf_next(struct rf_client *c, struct rf_batch *b, int timeout_ms);

/*
 * Hands the oldest held batch back to the daemon.  b must be that batch
 * (the oldest not yet handed back by this or rf_cuda_copy_release);
 * otherwise -EINVAL and nothing changes.  While copies of earlier batches
 * are pending, it takes effect right after theirs.
 */
int rf_release(struct rf_client *c, const struct rf_batch *b);

/* Copies the library's counters into *s. */
void rf_get_stats(const struct rf_client *c, struct rf_stats *s);

/* 1 when rf_next() would return a batch at once: the client is attached,
 * holds fewer than depth-1 batches and the next batch is published (since
 * 0.3).  0 otherwise, also for NULL.  One acquire load: no system call, no
 * reconnect attempt, nothing changes; a caller that must not block (one
 * holding a lock) tests it before calling rf_next(c, b, 0). */
int rf_ready(const struct rf_client *c);

/* Fills *info (since 0.3).  Returns 0, or -ENOTCONN when c never attached
 * (rf_open failed) and -EINVAL when c or info is NULL; *info is then
 * zeroed.  While reconnecting it describes the last ring attached. */
int rf_get_info(const struct rf_client *c, struct rf_info *info);

/* The name of an RF_DTYPE_* ("u8", "i8", "i16", "i32", "f32", "f64"; since
 * 0.4; "i64", "f16", "bf16", "u16" since 0.5), or NULL for a number that
 * names none. */
const char *rf_dtype_name(uint32_t dtype);

/* Bytes of one element of an RF_DTYPE_* (since 0.4), or 0 for a number
 * that names none. */
size_t rf_dtype_size(uint32_t dtype);

/*
 * Fields (since 0.5).  A sample of a dataset is a list of named fields (an
 * image, a mask, boxes, tokens, a caption, a label...), and a ring of
 * layout version 3 describes each and carries one column per field in
 * every batch:
 *
 *  RF_FIELD_FIXED   every sample has item_bytes bytes (an image after its
 *                   transform, a tensor, a scalar): the column is count *
 *                   item_bytes bytes, sample i's at data + i * item_bytes.
 *  RF_FIELD_RAGGED  every sample has its own number of rows of item_bytes
 *                   bytes each (boxes, tokens; bytes fields are u8 rows of
 *                   one value): count + 1 offsets in rows, sample i's rows
 *                   from offsets[i] to offsets[i + 1], at most capacity
 *                   rows in a batch.
 *
 * Field order is the dataset's schema order.  A dataset of images (or
 * tensors) with labels has two fields: the image (or tensor) whose column
 * is rf_batch.data, and "label" (FIXED i64).  rf_batch.data, sample_bytes,
 * dtype, layout and shape describe the primary field: the one the
 * transform is bound to (rf_options.params field=NAME).
 *
 * A daemon that predates fields gives a version-2 ring: rf_next works as
 * before and the field calls below return -ENOTSUP, saying so in
 * rf_last_error.  rf_open asks for version 3 and, when the daemon refuses
 * that as a version it does not speak, asks again for version 2.
 *
 * The fields are those of the first ring attached.  A reconnect to a ring
 * with other fields fails the stream (-EPROTO, final); one from a
 * version-2 ring to a daemon upgraded meanwhile goes on as version 2.
 */
#define RF_FIELD_FIXED 1
#define RF_FIELD_RAGGED 2

#define RF_ROLE_NONE 0
#define RF_ROLE_BOXES 1  /* RAGGED f32 rows x0,y0,x1,y1 in the output
                            pixels of image field `of` (after its crop) */
#define RF_ROLE_MASK 2   /* FIXED one-channel image: the mask of field `of` */
#define RF_ROLE_ROWS 3   /* RAGGED: one row per box of boxes field `of` (a
                            box's class, say), dropped with its box */

#define RF_FIELD_NAME_MAX 31

/* One field of a sample, as the ring describes it. */
struct rf_field {
    char name[RF_FIELD_NAME_MAX + 1]; /* [A-Za-z0-9_], NUL-terminated */
    uint32_t kind;       /* RF_FIELD_* */
    uint32_t dtype;      /* RF_DTYPE_* of its elements */
    uint32_t layout;     /* RF_LAYOUT_*: CHW or HWC for an image, else FLAT */
    uint32_t ndim;       /* dims of one sample (FIXED; 0: one value) or of
                            one row (RAGGED; 0: one value per row) */
    uint32_t shape[4];   /* the first ndim are set, in elements */
    uint32_t role;       /* RF_ROLE_* */
    uint32_t of;         /* the field index the role refers to */
    uint64_t item_bytes; /* FIXED: one sample's bytes; RAGGED: one row's */
    uint64_t capacity;   /* FIXED: the batch size; RAGGED: rows per batch,
                            at most */
};

/* One field's column in one batch, valid until the batch is released. */
struct rf_column {
    const void *data;       /* the values: bytes bytes, page aligned */
    const int64_t *offsets; /* RAGGED: count + 1 row offsets, checked (0
                               first, never decreasing, the last at most the
                               capacity); FIXED: NULL */
    uint64_t rows;          /* RAGGED: offsets[count]; FIXED: count */
    size_t bytes;           /* rows * item_bytes */
};

/* Fields of a sample: 1..16 (version-3 ring), or -ENOTSUP (version 2),
 * -ENOTCONN (never attached), -EINVAL (c NULL). */
int rf_field_count(struct rf_client *c);

/* Fills *f with field i.  Returns 0, -EINVAL (c or f NULL), -ERANGE (i not
 * below rf_field_count), -ENOTSUP or -ENOTCONN as rf_field_count; *f is
 * zeroed on failure. */
int rf_field_info(struct rf_client *c, uint32_t i, struct rf_field *f);

/* The index of the field called name, or -ENOENT (none), -EINVAL,
 * -ENOTSUP or -ENOTCONN. */
int rf_field_find(struct rf_client *c, const char *name);

/*
 * Fills *col with field i's column in batch b (a batch rf_next returned and
 * not yet handed back).  Returns 0; -EINVAL when b is not such a batch or an
 * argument is NULL; -ERANGE for i out of range; -ENOTSUP for a version-2
 * ring; -EBADMSG when a RAGGED column's offsets break the rules above (the
 * ring is client-writable: only this process can have garbled it) with
 * rf_last_error naming the field, the sample and the offsets.  Nothing is
 * read outside the slot.  *col is zeroed on failure.
 */
int rf_batch_column(struct rf_client *c, const struct rf_batch *b, uint32_t i,
                    struct rf_column *col);

/* Boxes the crop dropped in batch b (their centre left the crop), 0 for a
 * version-2 ring; -EINVAL when b is not a held batch. */
int64_t rf_batch_dropped(struct rf_client *c, const struct rf_batch *b);

/*
 * Detaches now and keeps the held batches (since 0.8): the daemon is told
 * at once that this client reads no more (it frees the attachment and
 * stops pacing a share group by it), while batches delivered and not yet
 * released stay valid, and are released as usual, until rf_close.  Later
 * rf_next calls return -ENOTCONN.  For a program that gives a stream up
 * while something still reads its last batches (a Python view outliving
 * its loader).  Returns 0; -EINVAL for NULL; -EPERM in a forked child.
 */
int rf_detach(struct rf_client *c);

/* Detaches, unmaps and frees.  Accepts NULL.  Held batches become invalid. */
void rf_close(struct rf_client *c);

/* The symbolic name ("ETIMEDOUT") of a negative errno returned by this
 * library; "OK" for 0, "EUNKNOWN" for a number without a name. */
const char *rf_strerror(int err);

/* The last failure's full message for this client ("" if none).  Accepts
 * NULL (then it describes a failure to allocate the client). */
const char *rf_last_error(const struct rf_client *c);

/* Where the client is attached (since 0.6): the control socket's path, and
 * the dataset's name in that daemon's catalogue (for a folder, the name
 * the daemon serves it under, which CLASSES and SOURCES take).  Valid until
 * rf_close() (a reconnect may change both); "" for NULL. */
const char *rf_socket_path(const struct rf_client *c);
const char *rf_dataset_name(const struct rf_client *c);

/* A mixture stream's sources (since 0.8; ATTACH mix=, or a dataset name the
 * daemon's config makes a mixture.NAME): "NAME:FIRST,NAME:FIRST,...", each
 * source's name and the first sample index that is its (a sample's index
 * in rf_sample.index is FIRST + its index in that source).  "" for a
 * stream of one dataset, and for NULL.  Valid until rf_close(). */
const char *rf_sources(const struct rf_client *c);

/* The ring mapping's base and size, for registering it with a GPU runtime;
 * NULL and 0 while not attached.  A reconnect maps a new ring: the base
 * changes (rf_stats.reconnects counts them). */
void *rf_ring_base(const struct rf_client *c, size_t *size);

/*
 * The CUDA hand-off (since 0.2).  A batch goes to the GPU with one copy
 * from the ring, and its slot goes back to the daemon when that copy is
 * done, not when the training step that uses it ends:
 *
 *     rf_next(c, &b, -1);
 *     rf_cuda_copy_release(c, &b, dev_buf[k], copy_stream);
 *     ... kernels on another stream wait for the copy (an event) ...
 *
 * Pinning.  rf_cuda_register() registers the whole ring mapping with
 * cudaHostRegister (page aligned, portable), so those copies are DMA from
 * pinned memory; every ring mapped after a reconnect is registered too, and
 * a mapping is unregistered before it is unmapped.  rf_cuda_copy_release()
 * calls it the first time.  A program that never asks pays for no CUDA
 * context.  When registration fails, copies still work, from pageable
 * memory; rf_stats.pinned and pin_note say which.  Without a device, or in
 * a libringfeed built without CUDA, these calls fail (-ENODEV, -ENOTSUP)
 * and change nothing: read the slot on the CPU and rf_release() it.
 */

/* Registers the live ring (and every later one) with cudaHostRegister.
 * Returns 0 when it is pinned (also when the caller had registered it
 * already: then the caller unregisters it), -ENOTSUP (built without CUDA),
 * -ENODEV (no usable device) or -EIO (the runtime refused: copies will be
 * from pageable memory); rf_last_error() and rf_stats.pin_note say why. */
int rf_cuda_register(struct rf_client *c);

/*
 * Copies the oldest batch not yet handed back (b, as rf_next returned it)
 * to dst_device, count * sample_bytes bytes, asynchronously on the caller's
 * cudaStream_t (passed as void *; NULL is the legacy default stream), and
 * hands the batch back: its slot is released to the daemon once the copy
 * has completed, which rf_next() and rf_poll() notice (releases stay in
 * order; rf_next() waits for the oldest copy rather than fail with
 * -ENOBUFS).  After this call b is no longer the caller's: do not read it.
 * The caller orders its kernels after the copy on its own (an event
 * recorded on the stream after this call).  Returns 0; -EINVAL when b is
 * not the oldest batch held; -ENOTSUP or -ENODEV as rf_cuda_register; -EIO
 * when the runtime refused the copy.  On failure nothing changed: b is
 * still held and may be read and rf_release()d.
 */
int rf_cuda_copy_release(struct rf_client *c, const struct rf_batch *b,
                         void *dst_device, void *cuda_stream);

/*
 * The converting copy (since 0.6): as rf_cuda_copy_release, but the
 * batch's uint8 images arrive in dst_device as float32, float16 or
 * bfloat16 (cv->dtype: RF_DTYPE_F32, RF_DTYPE_F16, RF_DTYPE_BF16), in the
 * batch's own layout (CHW or HWC), scaled to [0, 1] and normalized per
 * channel: (x / 255 - mean[c]) / std[c], as torchvision's ToTensor then
 * Normalize, computed as x * (1 / (255 std)) + (-mean / std) in float32
 * (a channel with mean 0 and std 1: x / 255 exactly), bit for bit what
 * the Python loader's host conversion gives.  cv->channels is the images'
 * channel count (then mean and std hold one value per channel, std finite
 * and > 0) or 0 for x / 255 alone.  dst_device holds count * elements
 * values of the output type.
 *
 * The batch is copied on cuda_stream into a device buffer the client keeps
 * (one batch's bytes, made on first use on the device current then), and a
 * kernel converts it into dst_device on the same stream; the slot goes back
 * once the kernel is done, as with rf_cuda_copy_release.  Returns 0;
 * -EINVAL for a batch that is not uint8 images, a bad cv or channel count;
 * otherwise as rf_cuda_copy_release.
 */
struct rf_convert {
    uint32_t dtype;
    uint32_t channels;  /* 0, or the images' channels (1..4) */
    float mean[4];
    float std[4];
};

int rf_cuda_convert_release(struct rf_client *c, const struct rf_batch *b, void *dst_device,
                            void *cuda_stream, const struct rf_convert *cv);

/* Releases, in order, the batches whose rf_cuda_copy_release copy has
 * completed, without waiting.  Returns how many copies are still pending
 * (0 when none), or a negative errno (-EIO: a copy failed on the device;
 * its slot was released anyway). */
int rf_poll(struct rf_client *c);

#ifdef __cplusplus
}
#endif

#endif
