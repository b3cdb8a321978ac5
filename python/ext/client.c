/*
 * client.c - Client, one libringfeed stream seen from Python: open, next()
 * (the GIL dropped while waiting, Ctrl-C noticed within WAIT_SLICE_MS),
 * the ledger that hands batches back in order as their last views die,
 * and a close() that never pulls memory from under a live view.
 *
 * Ledger: batch n (its stream number) is held[n % EXT_HELD_MAX] from
 * delivery until it is handed back; done[] says its last view is gone.
 * drain() hands back done batches oldest first, so batch n goes to the
 * daemon once it and every older batch are done.
 *
 * Processes (ext.h, PROCESSES): in a forked child, forked() is true and
 * nothing is handed back; next() refuses.
 *
 * Integer arguments are read with arg_u64()/arg_int(), which refuse a
 * value outside the C field's range (OverflowError naming the argument)
 * instead of wrapping as PyArg's "K" and "I" do.
 *
 * States (ext.h): OPEN -> CLOSING (close() while leases live) -> CLOSED,
 * or OPEN -> CLOSED directly.  CLOSING is detached from the daemon
 * (rf_detach); only the mapping of the viewed batches is kept.  client_check() holds after every
 * transition in debug builds:
 *   CLOSED <=> c == NULL, and then no lease lives;
 *   released <= delivered <= released + EXT_HELD_MAX;
 *   the batches in [released, delivered) not done are exactly the live
 *   leases (each lease is one undone batch).
 */
#include "ext.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_SLICE_MS 50 /* a wait checks for signals this often */
#define COPY_NOGIL_BYTES (1 << 20) /* copies this large drop the GIL */

static void client_check(const ext_client *o)
{
#ifndef NDEBUG
    Py_ssize_t undone = 0;

    assert((o->state == EXT_CLOSED) == (o->c == NULL));
    assert(o->state != EXT_CLOSED || o->leases == 0);
    assert(o->released <= o->delivered);
    assert(o->delivered - o->released <= EXT_HELD_MAX);
    for (uint64_t n = o->released; n < o->delivered; n++)
        undone += !o->done[n % EXT_HELD_MAX];
    assert(undone == o->leases);
#else
    (void)o;
#endif
}

/* 1 when o is open and this process is not the one that opened it: a
 * forked child, whose ring is its parent's. */
static int forked(const ext_client *o)
{
    return o->state != EXT_CLOSED && getpid() != o->pid;
}

/* Hands back done batches, oldest first.  A failure is kept for next().
 * A forked child hands back nothing: the batches are its parent's. */
static void drain(ext_client *o)
{
    if (forked(o)) {
        client_check(o);
        return;
    }
    while (o->state == EXT_OPEN && o->released < o->delivered &&
           o->done[o->released % EXT_HELD_MAX]) {
        int rc = rf_release(o->c, &o->held[o->released % EXT_HELD_MAX]);

        if (rc < 0 && !o->release_err) {
            o->release_err = rc;
            snprintf(o->release_msg, sizeof(o->release_msg), "%s", rf_last_error(o->c));
        }
        o->done[o->released % EXT_HELD_MAX] = 0;
        o->released++;
    }
    client_check(o);
}

/* Lets go of libringfeed's client: rf_close() in the process that opened
 * it.  A forked child leaves its copy alone (its descriptors and mapping
 * go when it exits): rf_close() there could reach into a GPU runtime the
 * child does not have. */
static void close_client(ext_client *o)
{
    if (!forked(o))
        rf_close(o->c);
}

/* OPEN or CLOSING -> CLOSED. */
static void finish_close(ext_client *o)
{
    close_client(o);
    o->c = NULL;
    o->released = o->delivered;
    o->state = EXT_CLOSED;
    client_check(o);
}

void ext_client_view_gone(ext_client *o, uint64_t n)
{
    o->leases--;
    o->done[n % EXT_HELD_MAX] = 1;
    if (o->state == EXT_CLOSING && o->leases == 0)
        finish_close(o);
    else if (!o->in_next)
        drain(o);
    else
        client_check(o);
}

/* Sets the error of an integer argument outside [lo, hi]: OverflowError
 * naming it, its value and the range.  Returns -1. */
static int out_of_range(const char *name, PyObject *v, const char *lo, unsigned long long hi)
{
    PyObject *r = PyObject_Repr(v);
    const char *text = r ? PyUnicode_AsUTF8(r) : NULL;

    if (!text) { /* too many digits to print */
        PyErr_Clear();
        text = "(a number too large to print)";
    }
    PyErr_Format(PyExc_OverflowError, "ringfeed: %s=%s is out of range: use %s to %llu", name,
                 text, lo, hi);
    Py_XDECREF(r);
    return -1;
}

/* The integer (an int or anything with __index__) v as a new reference,
 * or NULL with TypeError naming the argument. */
static PyObject *as_integer(const char *name, PyObject *v)
{
    PyObject *i = PyNumber_Index(v);

    if (!i && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "ringfeed: %s=%R: an integer is required", name, v);
    }
    return i;
}

/* Reads the integer argument `name` into *out when v is given (not NULL)
 * and 0 <= v <= max.  Returns 0, or -1 with TypeError or OverflowError
 * naming it; *out is unchanged on failure. */
static int arg_u64(const char *name, PyObject *v, uint64_t max, uint64_t *out)
{
    PyObject *i;
    unsigned long long u;

    if (!v)
        return 0;
    i = as_integer(name, v);
    if (!i)
        return -1;
    u = PyLong_AsUnsignedLongLong(i);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            Py_DECREF(i);
            return -1;
        }
        PyErr_Clear(); /* negative, or past 64 bits */
    } else if (u <= max) {
        Py_DECREF(i);
        *out = u;
        return 0;
    }
    out_of_range(name, i, "0", max);
    Py_DECREF(i);
    return -1;
}

/* As arg_u64, for an int argument in [lo, hi]. */
static int arg_int(const char *name, PyObject *v, int lo, int hi, int *out)
{
    PyObject *i;
    long long n;
    int over;
    char low[24];

    if (!v)
        return 0;
    i = as_integer(name, v);
    if (!i)
        return -1;
    n = PyLong_AsLongLongAndOverflow(i, &over);
    if (n == -1 && !over && PyErr_Occurred()) {
        Py_DECREF(i);
        return -1;
    }
    if (!over && n >= lo && n <= hi) {
        Py_DECREF(i);
        *out = (int)n;
        return 0;
    }
    snprintf(low, sizeof(low), "%d", lo);
    out_of_range(name, i, low, (unsigned long long)hi);
    Py_DECREF(i);
    return -1;
}

/* arg_u64 into a uint32_t. */
static int arg_u32(const char *name, PyObject *v, uint32_t *out)
{
    uint64_t u = *out;

    if (arg_u64(name, v, UINT32_MAX, &u) < 0)
        return -1;
    *out = (uint32_t)u;
    return 0;
}

static int client_init(ext_client *o, PyObject *args, PyObject *kw)
{
    static char *names[] = {"dataset", "batch", "rank", "world", "seed", "start_epoch",
                            "start_seq", "transform", "size", "depth", "shuffle",
                            "drop_last", "params", "name", "socket", "reconnect_ms",
                            "dlpack", NULL};
    struct rf_options opt;
    PyObject *batch_o = NULL, *rank_o = NULL, *world_o = NULL, *seed_o = NULL;
    PyObject *epoch_o = NULL, *seq_o = NULL, *size_o = NULL, *depth_o = NULL, *rms_o = NULL;
    int shuffle = 1, drop_last = 0, dlpack = 1;
    const char *dataset, *transform = "raw", *params = NULL, *name = NULL, *sock = NULL;
    int rc;

    if (o->state != EXT_CLOSED || o->c) {
        PyErr_SetString(PyExc_RuntimeError, "ringfeed: Client is already open");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|OOOOOOsOOipzzzOp:Client", names, &dataset,
                                     &batch_o, &rank_o, &world_o, &seed_o, &epoch_o, &seq_o,
                                     &transform, &size_o, &depth_o, &shuffle, &drop_last,
                                     &params, &name, &sock, &rms_o, &dlpack))
        return -1;
    rf_options_init(&opt);
    /* the fields' own ranges; libringfeed refuses what the protocol does
     * not take within them (batch 0, depth 1, epoch past 2^32 - 1, ...) */
    if (arg_u32("batch", batch_o, &opt.batch) < 0 ||
        arg_int("rank", rank_o, INT32_MIN, INT32_MAX, &opt.rank) < 0 ||
        arg_int("world", world_o, INT32_MIN, INT32_MAX, &opt.world) < 0 ||
        arg_u64("seed", seed_o, UINT64_MAX, &opt.seed) < 0 ||
        arg_u64("start_epoch", epoch_o, UINT64_MAX, &opt.start_epoch) < 0 ||
        arg_u64("start_seq", seq_o, UINT64_MAX, &opt.start_seq) < 0 ||
        arg_u32("size", size_o, &opt.size) < 0 || arg_u32("depth", depth_o, &opt.depth) < 0 ||
        arg_int("reconnect_ms", rms_o, 0, INT_MAX, &opt.reconnect_ms) < 0)
        return -1;
    opt.dataset = dataset;
    opt.transform = transform;
    opt.shuffle = shuffle;
    opt.drop_last = drop_last;
    opt.params = params;
    opt.name = name;
    opt.socket = sock;
    o->as_dlpack = dlpack;
    Py_BEGIN_ALLOW_THREADS
    rc = rf_open(&opt, &o->c);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        ext_raise(rc, "%s", rf_last_error(o->c));
        rf_close(o->c);
        o->c = NULL;
        return -1;
    }
    rf_get_info(o->c, &o->info);
    o->pid = getpid();
    o->state = EXT_OPEN;
    client_check(o);
    return 0;
}

static void client_dealloc(ext_client *o)
{
    if (o->c)
        close_client(o);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static int check_open(ext_client *o)
{
    if (o->state != EXT_OPEN) {
        ext_raise(-EBADF, "the loader is closed");
        return -1;
    }
    if (forked(o)) {
        PyErr_Format(PyExc_RuntimeError,
                     "ringfeed: this loader was opened by process %ld and this is process "
                     "%ld, a fork of it (a DataLoader worker or a multiprocessing child): "
                     "its ring and batches belong to the process that opened it; open a "
                     "new ringfeed.Loader in this process instead",
                     (long)o->pid, (long)getpid());
        return -1;
    }
    if (o->in_next) {
        PyErr_SetString(PyExc_RuntimeError,
                        "ringfeed: another thread is waiting in this loader's next(); "
                        "use one loader per thread");
        return -1;
    }
    if (o->release_err) {
        int e = o->release_err;

        o->release_err = 0;
        ext_raise(e, "handing a batch back failed: %s", o->release_msg);
        return -1;
    }
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Waits for the next batch into *b.  A published one is taken with the
 * GIL held (rf_ready says rf_next will not block: dropping the GIL there
 * could hand it to a busy thread for a whole switch interval, 5 ms).
 * Otherwise WAIT_SLICE_MS rounds with the GIL dropped, running signal
 * handlers between rounds.  Returns 0, or -1 with an exception set
 * (KeyboardInterrupt, ringfeed.Error).  timeout_ms < 0: no limit.
 */
static int wait_next(ext_client *o, struct rf_batch *b, int timeout_ms)
{
    int64_t t0 = now_ms();
    int rc;

    if (rf_ready(o->c) && rf_next(o->c, b, 0) == 0)
        return 0;
    for (;;) {
        int slice = WAIT_SLICE_MS;

        if (timeout_ms >= 0) {
            int64_t left = t0 + timeout_ms - now_ms();

            if (left < slice)
                slice = left > 0 ? (int)left : 0;
        }
        o->in_next = 1;
        Py_BEGIN_ALLOW_THREADS
        rc = rf_next(o->c, b, slice);
        Py_END_ALLOW_THREADS
        o->in_next = 0;
        drain(o); /* views freed by other threads meanwhile */
        if (o->state != EXT_OPEN) {
            ext_raise(-EBADF, "the loader was closed while waiting");
            return -1;
        }
        if (rc != -ETIMEDOUT || slice < WAIT_SLICE_MS)
            break;
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
    if (rc == -ENOBUFS) {
        ext_raise(rc, "%llu batches are still held (alive as tensors or arrays, or waiting "
                  "behind an older one that is) and the ring has %u slots: at most %u may "
                  "be held; free old batches (del), pass copy=True to own them, or ask "
                  "for a deeper ring (depth=)",
                  (unsigned long long)(o->delivered - o->released), o->info.depth,
                  o->info.depth - 1);
        return -1;
    }
    if (rc == -ETIMEDOUT) {
        ext_raise(rc, "no batch within the loader's timeout of %d ms (the daemon is slow, "
                  "stopped or reconnecting; the loader can be asked again): %s",
                  timeout_ms, rf_last_error(o->c));
        return -1;
    }
    if (rc < 0) {
        ext_raise(rc, "%s", rf_last_error(o->c));
        return -1;
    }
    return 0;
}

/* Returns the exported form of a: a capsule (torch) or a itself (numpy).
 * Steals the reference to a. */
static PyObject *export(ext_client *o, ext_array *a)
{
    PyObject *cap;

    if (!a || !o->as_dlpack)
        return (PyObject *)a;
    cap = ext_array_dlpack(a);
    Py_DECREF(a);
    return cap;
}

/* The labels (int64) and the per-sample records of b as Python objects,
 * and the tuple next() returns around images. */
static PyObject *batch_tuple(ext_client *o, const struct rf_batch *b, PyObject *images)
{
    Py_ssize_t n = b->count;
    ext_array *labels;
    PyObject *recs, *out;

    if (!images)
        return NULL;
    labels = ext_array_new(NULL, EXT_I64, 1, &n, NULL);
    if (!labels) {
        Py_DECREF(images);
        return NULL;
    }
    for (uint32_t i = 0; i < b->count; i++)
        ((int64_t *)labels->data)[i] = b->samples[i].label;
    recs = PyBytes_FromStringAndSize((const char *)b->samples,
                                     (Py_ssize_t)(b->count * sizeof(struct rf_sample)));
    out = Py_BuildValue("(NNNKKKI)", images, export(o, labels), recs,
                        (unsigned long long)b->epoch, (unsigned long long)b->seq,
                        (unsigned long long)b->stream_seq, b->substituted);
    return out;
}

/* The images' shape in elements (libringfeed checked it against
 * sample_bytes and the dtype at attach). */
static void batch_shape(const struct rf_batch *b, Py_ssize_t shape[4], int *ndim)
{
    shape[0] = b->count;
    if (b->layout == RF_LAYOUT_FLAT) {
        shape[1] = b->shape[0];
        *ndim = 2;
        return;
    }
    for (int i = 0; i < 3; i++)
        shape[i + 1] = b->shape[i];
    *ndim = 4;
}

static PyObject *client_next(ext_client *o, PyObject *args, PyObject *kw)
{
    static char *names[] = {"timeout_ms", "copy", NULL};
    int timeout_ms = -1, copy = 0, ndim, dtype;
    Py_ssize_t shape[4];
    struct rf_batch b;
    ext_array *img;
    ext_lease *lease;
    uint64_t n;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|ip:next", names, &timeout_ms, &copy))
        return NULL;
    if (check_open(o) < 0)
        return NULL;
    drain(o);
    if (wait_next(o, &b, timeout_ms) < 0)
        return NULL;
    n = o->delivered++;
    o->held[n % EXT_HELD_MAX] = b;
    o->done[n % EXT_HELD_MAX] = copy; /* a copy takes no lease: nothing waits */
    dtype = ext_dtype_of(b.dtype);
    if (dtype < 0) {
        o->done[n % EXT_HELD_MAX] = 1;
        drain(o);
        return ext_raise(-EPROTO, "batches of element type %u (%s) are unknown "
                         "to this binding: use a ringfeed module as new as libringfeed",
                         b.dtype, rf_dtype_name(b.dtype) ? rf_dtype_name(b.dtype) : "?");
    }
    batch_shape(&b, shape, &ndim);
    if (copy) {
        size_t bytes = (size_t)b.count * b.sample_bytes;
        PyObject *t;

        img = ext_array_new(NULL, (enum ext_dtype)dtype, ndim, shape, NULL);
        if (img && bytes >= COPY_NOGIL_BYTES) {
            o->in_next = 1;
            Py_BEGIN_ALLOW_THREADS
            memcpy(img->data, b.data, bytes);
            Py_END_ALLOW_THREADS
            o->in_next = 0;
        } else if (img) {
            memcpy(img->data, b.data, bytes);
        }
        t = batch_tuple(o, &b, export(o, img));
        drain(o); /* copied: the slot goes back now */
        return t;
    }
    lease = ext_lease_new(o, n);
    if (!lease) {
        o->done[n % EXT_HELD_MAX] = 1;
        drain(o);
        return NULL;
    }
    client_check(o);
    img = ext_array_new((void *)b.data, (enum ext_dtype)dtype, ndim, shape, (PyObject *)lease);
    Py_DECREF(lease); /* the array holds it now, or it is gone */
    return batch_tuple(o, &b, export(o, img));
}

/* convert=(dtype, mean, std) of next_cuda into cv: dtype "float32",
 * "float16" or "bfloat16"; mean and std sequences of one length (the
 * images' channels, checked by libringfeed) or both None (x / 255). */
static int parse_convert(PyObject *conv, struct rf_convert *cv)
{
    const char *name;
    PyObject *mean, *std;

    if (!PyArg_ParseTuple(conv, "sOO:convert", &name, &mean, &std))
        return -1;
    *cv = (struct rf_convert){0};
    cv->dtype = strcmp(name, "float32") == 0    ? RF_DTYPE_F32
                : strcmp(name, "float16") == 0  ? RF_DTYPE_F16
                : strcmp(name, "bfloat16") == 0 ? RF_DTYPE_BF16
                                                : 0;
    if (!cv->dtype) {
        PyErr_Format(PyExc_ValueError, "ringfeed: convert to %s: float32, float16 or "
                     "bfloat16", name);
        return -1;
    }
    if (mean == Py_None && std == Py_None)
        return 0;
    for (int k = 0; k < 2; k++) {
        PyObject *fast = PySequence_Fast(k ? std : mean, "ringfeed: convert: mean and std "
                                                         "are sequences of numbers");
        Py_ssize_t n;

        if (!fast)
            return -1;
        n = PySequence_Fast_GET_SIZE(fast);
        if (n < 1 || n > 4 || (k && (uint32_t)n != cv->channels)) {
            Py_DECREF(fast);
            PyErr_Format(PyExc_ValueError, "ringfeed: convert: mean and std of one length, "
                         "1 to 4 values");
            return -1;
        }
        cv->channels = (uint32_t)n;
        for (Py_ssize_t i = 0; i < n; i++) {
            double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));

            if (v == -1.0 && PyErr_Occurred()) {
                Py_DECREF(fast);
                return -1;
            }
            (k ? cv->std : cv->mean)[i] = (float)v;
        }
        Py_DECREF(fast);
    }
    return 0;
}

/*
 * next_cuda(dst, stream, timeout_ms=-1, convert=None): the next batch
 * copied to device memory at dst (allocated by the caller) on the
 * cudaStream_t `stream`, its slot handed back once the copy is done:
 * count * sample_bytes bytes as they are (rf_cuda_copy_release), or with
 * convert=(dtype, mean, std) the uint8 images as normalized floats, one
 * value of dtype per byte (rf_cuda_convert_release).  Returns (count,
 * labels, records, epoch, seq, stream_seq, substituted).
 */
static PyObject *client_next_cuda(ext_client *o, PyObject *args, PyObject *kw)
{
    static char *names[] = {"dst", "stream", "timeout_ms", "convert", NULL};
    PyObject *dst_o, *stream_o, *conv_o = Py_None;
    uint64_t dst = 0, stream = 0;
    int timeout_ms = -1, rc;
    struct rf_convert cv;
    struct rf_batch b;
    PyObject *t, *count;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|iO:next_cuda", names, &dst_o, &stream_o,
                                     &timeout_ms, &conv_o) ||
        arg_u64("dst", dst_o, UINTPTR_MAX, &dst) < 0 ||
        arg_u64("stream", stream_o, UINTPTR_MAX, &stream) < 0)
        return NULL;
    if (conv_o != Py_None && parse_convert(conv_o, &cv) < 0)
        return NULL;
    if (check_open(o) < 0)
        return NULL;
    drain(o);
    if (o->released != o->delivered)
        return ext_raise(-EINVAL, "next_cuda: %llu batches read on the host are still held; "
                         "a device loader hands each batch back as it copies it",
                         (unsigned long long)(o->delivered - o->released));
    if (wait_next(o, &b, timeout_ms) < 0)
        return NULL;
    count = PyLong_FromUnsignedLong(b.count);
    t = batch_tuple(o, &b, count); /* before the hand-off: b is not ours after it */
    if (!t) {
        rf_release(o->c, &b); /* out of memory: the batch must not stay held */
        return NULL;
    }
    if (conv_o != Py_None)
        rc = rf_cuda_convert_release(o->c, &b, (void *)(uintptr_t)dst,
                                     (void *)(uintptr_t)stream, &cv);
    else
        rc = rf_cuda_copy_release(o->c, &b, (void *)(uintptr_t)dst, (void *)(uintptr_t)stream);
    if (rc < 0) {
        PyObject *e = ext_raise(rc, "%s", rf_last_error(o->c));

        rf_release(o->c, &b);
        Py_DECREF(t);
        return e;
    }
    o->delivered++;
    o->released++;
    client_check(o);
    return t;
}

static PyObject *client_close(ext_client *o, PyObject *unused)
{
    (void)unused;
    if (o->in_next && !forked(o)) { /* a fork's copy of a waiting thread is gone */
        PyErr_SetString(PyExc_RuntimeError,
                        "ringfeed: close() while another thread waits in next()");
        return NULL;
    }
    if (o->state == EXT_OPEN) {
        if (o->leases > 0) {
            /* the views keep their batches, not the attachment: the
             * daemon stops pacing a share group by a stream nobody reads
             * (a new loader on the same stream would wait on it) */
            if (!forked(o))
                rf_detach(o->c);
            o->state = EXT_CLOSING;
            client_check(o);
        } else {
            finish_close(o);
        }
    }
    Py_RETURN_NONE;
}

static const char *layout_name(uint32_t l)
{
    return l == RF_LAYOUT_CHW ? "chw" : l == RF_LAYOUT_HWC ? "hwc" : "flat";
}

/* ---- fields (ring version 3) --------------------------------------------- */

static const char *role_name(uint32_t r)
{
    return r == RF_ROLE_BOXES ? "boxes" : r == RF_ROLE_MASK ? "mask"
                                      : r == RF_ROLE_ROWS ? "rows" : NULL;
}

/*
 * Field i's info into *f and one sample's (FIXED) or one row's (RAGGED)
 * shape into tail[0..*nd).  Checks that the shape's elements times the
 * dtype's size is item_bytes and that this binding knows the dtype; 0, or
 * -1 with ringfeed.Error naming the field.
 */
static int field_geometry(ext_client *o, uint32_t i, struct rf_field *f, Py_ssize_t *tail,
                          int *nd, int *dtype)
{
    uint64_t elems = 1;
    int rc = rf_field_info(o->c, i, f);

    if (rc < 0) {
        ext_raise(rc, "%s", rf_last_error(o->c));
        return -1;
    }
    *dtype = ext_dtype_of(f->dtype);
    if (*dtype < 0) {
        ext_raise(-EPROTO, "field %s: element type %u (%s) is unknown to this binding: use a "
                  "ringfeed module as new as libringfeed", f->name, f->dtype,
                  rf_dtype_name(f->dtype) ? rf_dtype_name(f->dtype) : "?");
        return -1;
    }
    if (f->ndim > EXT_NDIM_MAX - 1) {
        ext_raise(-EPROTO, "field %s: %u dims, at most %d", f->name, f->ndim, EXT_NDIM_MAX - 1);
        return -1;
    }
    for (uint32_t k = 0; k < f->ndim; k++) {
        tail[k] = f->shape[k];
        elems *= f->shape[k];
    }
    *nd = (int)f->ndim;
    if (elems * rf_dtype_size(f->dtype) != f->item_bytes) {
        ext_raise(-EPROTO, "field %s: %llu elements of %s are not its %llu bytes per %s",
                  f->name, (unsigned long long)elems, rf_dtype_name(f->dtype),
                  (unsigned long long)f->item_bytes,
                  f->kind == RF_FIELD_RAGGED ? "row" : "sample");
        return -1;
    }
    return 0;
}

/* fields() -> None for a ring without a field table (an older daemon), or
 * a list of dicts, one per field in the schema's order. */
static PyObject *client_fields(ext_client *o, PyObject *unused)
{
    PyObject *list;
    int n;

    (void)unused;
    if (!o->c)
        return ext_raise(-EBADF, "the loader is closed");
    n = rf_field_count(o->c);
    if (n == -ENOTSUP)
        Py_RETURN_NONE;
    if (n < 0)
        return ext_raise(n, "%s", rf_last_error(o->c));
    list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        struct rf_field f;
        Py_ssize_t tail[EXT_NDIM_MAX];
        PyObject *shape, *d;
        int nd, dtype;

        if (field_geometry(o, (uint32_t)i, &f, tail, &nd, &dtype) < 0) {
            Py_CLEAR(list);
            break;
        }
        shape = PyTuple_New(nd);
        for (int k = 0; shape && k < nd; k++)
            PyTuple_SET_ITEM(shape, k, PyLong_FromSsize_t(tail[k]));
        d = shape ? Py_BuildValue("{s:s,s:s,s:s,s:s,s:N,s:z,s:I,s:K,s:K}", "name", f.name,
                                  "kind", f.kind == RF_FIELD_RAGGED ? "ragged" : "fixed",
                                  "dtype", ext_dtype_name(dtype), "layout",
                                  layout_name(f.layout), "shape", shape, "role",
                                  role_name(f.role), "of", f.of, "item_bytes",
                                  (unsigned long long)f.item_bytes, "capacity",
                                  (unsigned long long)f.capacity)
                  : NULL;
        if (!d) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, d);
    }
    return list;
}

/* An Array of the bytes at src with this shape: a view kept alive by base,
 * or (base NULL) a copy.  NULL with an exception. */
static ext_array *column_array(ext_client *o, const void *src, int dtype, int ndim,
                               const Py_ssize_t *shape, PyObject *base)
{
    ext_array *a;
    Py_ssize_t bytes;

    if (base)
        return ext_array_new((void *)src, (enum ext_dtype)dtype, ndim, shape, base);
    a = ext_array_new(NULL, (enum ext_dtype)dtype, ndim, shape, NULL);
    if (!a)
        return NULL;
    bytes = ext_array_nbytes(a);
    if (bytes >= COPY_NOGIL_BYTES) {
        o->in_next = 1;
        Py_BEGIN_ALLOW_THREADS
        memcpy(a->data, src, (size_t)bytes);
        Py_END_ALLOW_THREADS
        o->in_next = 0;
    } else if (bytes) {
        memcpy(a->data, src, (size_t)bytes);
    }
    return a;
}

/* Field i of batch b: an Array [count, *shape] (FIXED) or a tuple (values
 * [rows, *tail], offsets int64 [count + 1]) (RAGGED); views kept alive by
 * base, or copies when base is NULL.  NULL with an exception. */
static PyObject *column(ext_client *o, const struct rf_batch *b, uint32_t i, PyObject *base)
{
    Py_ssize_t shape[EXT_NDIM_MAX], n1 = (Py_ssize_t)b->count + 1;
    struct rf_column col;
    struct rf_field f;
    ext_array *v, *off;
    int nd, dtype, rc;

    if (field_geometry(o, i, &f, shape + 1, &nd, &dtype) < 0)
        return NULL;
    rc = rf_batch_column(o->c, b, i, &col);
    if (rc < 0)
        return ext_raise(rc, "%s", rf_last_error(o->c));
    shape[0] = (Py_ssize_t)col.rows;
    v = column_array(o, col.data, dtype, nd + 1, shape, base);
    if (!v || f.kind == RF_FIELD_FIXED)
        return (PyObject *)v;
    off = column_array(o, col.offsets, EXT_I64, 1, &n1, base);
    if (!off) {
        Py_DECREF(v);
        return NULL;
    }
    return Py_BuildValue("(NN)", v, off);
}

/*
 * next_fields(timeout_ms=-1, copy=False) -> (columns, labels, records,
 * epoch, seq, stream_seq, substituted, dropped): the next batch of a ring
 * with a field table, one entry of `columns` per field (see column());
 * every view shares one lease, so the slot goes back when the last view of
 * any column dies.  Arrays are returned as they are (never capsules): the
 * Loader turns each into what its output asks for.
 */
static PyObject *client_next_fields(ext_client *o, PyObject *args, PyObject *kw)
{
    static char *names[] = {"timeout_ms", "copy", NULL};
    int timeout_ms = -1, copy = 0, nf;
    struct rf_batch b;
    ext_lease *lease = NULL;
    PyObject *cols = NULL, *t;
    int64_t dropped;
    uint64_t n;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|ip:next_fields", names, &timeout_ms, &copy))
        return NULL;
    if (check_open(o) < 0)
        return NULL;
    nf = rf_field_count(o->c);
    if (nf < 0)
        return ext_raise(nf, "%s", rf_last_error(o->c));
    drain(o);
    if (wait_next(o, &b, timeout_ms) < 0)
        return NULL;
    n = o->delivered++;
    o->held[n % EXT_HELD_MAX] = b;
    o->done[n % EXT_HELD_MAX] = 1; /* until a lease takes it */
    if (!copy) {
        lease = ext_lease_new(o, n);
        if (!lease)
            goto fail;
        o->done[n % EXT_HELD_MAX] = 0;
        client_check(o);
    }
    dropped = rf_batch_dropped(o->c, &b);
    cols = PyTuple_New(nf);
    for (int i = 0; cols && i < nf; i++) {
        PyObject *c = column(o, &b, (uint32_t)i, (PyObject *)lease);

        if (!c) {
            Py_CLEAR(cols);
            break;
        }
        PyTuple_SET_ITEM(cols, i, c);
    }
    t = cols ? batch_tuple(o, &b, cols) : NULL;
    if (t) {
        PyObject *u = Py_BuildValue("(OOOOOOOL)", PyTuple_GET_ITEM(t, 0),
                                    PyTuple_GET_ITEM(t, 1), PyTuple_GET_ITEM(t, 2),
                                    PyTuple_GET_ITEM(t, 3), PyTuple_GET_ITEM(t, 4),
                                    PyTuple_GET_ITEM(t, 5), PyTuple_GET_ITEM(t, 6),
                                    (long long)(dropped < 0 ? 0 : dropped));

        Py_DECREF(t);
        t = u;
    }
    Py_XDECREF(lease); /* the views hold it now, or it is gone */
    if (copy)
        drain(o); /* copied: the slot goes back now */
    return t;
fail:
    drain(o);
    return NULL;
}

/* (socket, name): where the stream is attached (rf_socket_path,
 * rf_dataset_name): a dataset folder's serving daemon and the name it
 * gave the folder, which CLASSES and SOURCES take. */
static PyObject *client_where(ext_client *o, PyObject *unused)
{
    (void)unused;
    if (!o->c)
        return ext_raise(-EBADF, "the loader is closed");
    return Py_BuildValue("(ss)", rf_socket_path(o->c), rf_dataset_name(o->c));
}

/* A mixture stream's sources (rf_sources): "NAME:FIRST,...", or "". */
static PyObject *client_sources(ext_client *o, PyObject *unused)
{
    (void)unused;
    if (!o->c)
        return ext_raise(-EBADF, "the loader is closed");
    return PyUnicode_FromString(rf_sources(o->c));
}

static PyObject *client_info(ext_client *o, PyObject *unused)
{
    struct rf_info in = o->info;

    (void)unused;
    if (o->c)
        rf_get_info(o->c, &in);
    return Py_BuildValue("{s:i,s:i,s:I,s:I,s:K,s:K,s:K,s:s,s:(III),s:z,s:I,s:K,s:K}",
                         "rank", in.rank, "world", in.world, "batch", in.batch, "depth",
                         in.depth, "dataset_samples", (unsigned long long)in.dataset_samples,
                         "batches_per_epoch", (unsigned long long)in.batches_per_epoch,
                         "sample_bytes", (unsigned long long)in.sample_bytes, "layout",
                         layout_name(in.layout), "shape", in.shape[0], in.shape[1],
                         in.shape[2], "dtype", ext_dtype_name(ext_dtype_of(in.dtype)),
                         "classes", in.classes, "next_epoch",
                         (unsigned long long)in.next_epoch, "next_seq",
                         (unsigned long long)in.next_seq);
}

static PyObject *client_stats(ext_client *o, PyObject *unused)
{
    struct rf_stats s;

    (void)unused;
    rf_get_stats(o->c, &s); /* zeroes s when closed */
    return Py_BuildValue("{s:K,s:K,s:d,s:d,s:K,s:K,s:I,s:O,s:I,s:K,s:s,s:K,s:n}",
                         "batches", (unsigned long long)s.batches, "samples",
                         (unsigned long long)s.samples, "wait_seconds", s.wait_seconds,
                         "between_seconds", s.between_seconds, "reconnects",
                         (unsigned long long)s.reconnects, "batches_per_epoch",
                         (unsigned long long)s.batches_per_epoch, "depth", s.depth, "pinned",
                         s.pinned > 0 ? Py_True : Py_False, "copies_pending",
                         s.copies_pending, "cuda_copies", (unsigned long long)s.cuda_copies,
                         "pin_note", s.pin_note, "held",
                         (unsigned long long)(o->delivered - o->released), "views",
                         o->leases);
}

static PyObject *client_ring(ext_client *o, PyObject *unused)
{
    size_t size = 0;
    void *base = rf_ring_base(o->c, &size);

    (void)unused;
    return Py_BuildValue("(NK)", PyLong_FromVoidPtr(base), (unsigned long long)size);
}

static PyObject *client_get_state(ext_client *o, void *unused)
{
    static const char *const names[] = {"open", "closing", "closed"};

    (void)unused;
    return PyUnicode_FromString(names[o->state]);
}

static PyMethodDef client_methods[] = {
    {"next", (PyCFunction)(void (*)(void))client_next, METH_VARARGS | METH_KEYWORDS,
     "next(timeout_ms=-1, copy=False) -> (images, labels, records, epoch, seq, "
     "stream_seq, substituted)"},
    {"next_cuda", (PyCFunction)(void (*)(void))client_next_cuda,
     METH_VARARGS | METH_KEYWORDS,
     "next_cuda(dst, stream, timeout_ms=-1, convert=None) -> (count, labels, records, "
     "epoch, seq, stream_seq, substituted)"},
    {"next_fields", (PyCFunction)(void (*)(void))client_next_fields,
     METH_VARARGS | METH_KEYWORDS,
     "next_fields(timeout_ms=-1, copy=False) -> (columns, labels, records, epoch, seq, "
     "stream_seq, substituted, dropped); columns: per field an Array (fixed) or "
     "(values, offsets) (ragged)"},
    {"fields", (PyCFunction)client_fields, METH_NOARGS,
     "The ring's fields as a list of dicts, or None (a ring without a field table)."},
    {"close", (PyCFunction)client_close, METH_NOARGS,
     "Detaches now; the mapping goes once the last view of a batch is freed."},
    {"info", (PyCFunction)client_info, METH_NOARGS, "The stream's rf_get_info as a dict."},
    {"where", (PyCFunction)client_where, METH_NOARGS,
     "(socket, dataset name): the daemon attached to and the dataset's name there."},
    {"sources", (PyCFunction)client_sources, METH_NOARGS,
     "A mixture's sources, \"NAME:FIRST,...\" (rf_sources), or \"\"."},
    {"stats", (PyCFunction)client_stats, METH_NOARGS, "libringfeed's counters as a dict."},
    {"ring", (PyCFunction)client_ring, METH_NOARGS, "(base address, bytes) of the ring."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef client_getset[] = {
    {"state", (getter)client_get_state, NULL, "open, closing or closed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *client_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    ext_client *o = (ext_client *)type->tp_alloc(type, 0);

    (void)args;
    (void)kw;
    if (o)
        o->state = EXT_CLOSED; /* tp_alloc zeroed the rest */
    return (PyObject *)o;
}

PyTypeObject ext_client_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringfeed._ringfeed.Client",
    .tp_basicsize = sizeof(ext_client),
    .tp_dealloc = (destructor)client_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One stream from a ringfeedd daemon (libringfeed's rf_client).",
    .tp_methods = client_methods,
    .tp_getset = client_getset,
    .tp_init = (initproc)client_init,
    .tp_new = client_new,
};
