/*
 * ext.h - the internals of ringfeed._ringfeed, the CPython extension under
 * `import ringfeed`.  It speaks to the daemon through libringfeed's public
 * API only (ringfeed.h); it writes datasets with ringfeed-pack's own code
 * (proto/dataset_writer.h, tools/imagefile.h).  Names carry the prefix
 * ext_.
 *
 * The files and their jobs:
 *   module.c  the module: its types, ringfeed.Error, raising errors
 *   client.c  Client: one libringfeed stream, next(), next_fields() (a
 *             column per field of a version-3 ring, all views on one
 *             lease), fields(), the release ledger
 *   array.c   Array (a typed n-d block of memory that numpy reads through
 *             the buffer protocol and torch through DLPack) and Lease (one
 *             delivered batch's claim on its ring slot)
 *   writer.c  DatasetWriter and ImageEncoder, under ringfeed.Writer and
 *             ringfeed.pack (python/ringfeed/writer.py)
 *   convert.c normalize(): uint8 images into float32/float16/bfloat16,
 *             scaled and normalized per channel (Loader's dtype=, normalize=)
 *
 * LIFETIME (why this is C and not ctypes).  A batch's pixels are a view of
 * its ring slot.  The slot must go back to the daemon exactly when the last
 * view of it dies, and batches must go back in the order they came:
 *
 *     torch.Tensor --DLPack manager_ctx--> Array --base--> Lease --owner--> Client
 *     numpy.ndarray --buffer/base--------> Array --base--> Lease --owner--> Client
 *
 * Each reference is a strong Python reference, so the Lease dies only when
 * every tensor, array, memoryview and capsule over the batch is gone.  Its
 * dealloc marks batch n done in the Client's ledger; the ledger hands done
 * batches back with rf_release() oldest first, so a batch freed early waits
 * for the older ones.  The Client (and so the mapping) lives as long as any
 * Lease: a view that outlives close() still reads valid memory, and
 * rf_close() runs when the last one goes.
 *
 * PROCESSES.  A Client belongs to the process that opened it (pid).  A
 * forked child (a DataLoader worker, a multiprocessing child) inherits a
 * copy of it, of its leases and of the ring mapping, but the ring and its
 * `released` word are the parent's: in the child, next() and next_cuda()
 * raise RuntimeError, and a lease that dies, close() and dealloc hand
 * nothing back (no rf_release, no eventfd write), and rf_close() is not
 * called: the child's copies of the descriptors and of the mapping go
 * when it exits, and the daemon hears nothing from it.
 *
 * THREADS.  Every field here is read and written with the GIL held.  next()
 * drops the GIL around rf_next(); while it is out (in_next), a Lease dying
 * in another thread only marks its batch done and next() hands it back
 * when it returns, since libringfeed's client must not be used from two
 * threads at once.  DLPack deleters may run on any thread and take the GIL.
 */
#ifndef RINGFEED_PYTHON_EXT_H
#define RINGFEED_PYTHON_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <sys/types.h>

#include "ringfeed.h"

/* Held batches a client may have: the protocol's largest depth. */
#define EXT_HELD_MAX 64
#define EXT_NDIM_MAX 5 /* a batch of a field of 4 dims */

/* Element types of an Array: a batch's RF_DTYPE_* (array.c's table maps
 * them; int64 is also the labels' and a RAGGED column's offsets'). */
enum ext_dtype {
    EXT_U8, EXT_I8, EXT_I16, EXT_I32, EXT_I64, EXT_F32, EXT_F64,
    EXT_F16, EXT_BF16, EXT_U16, /* since ring version 3 */
    EXT_DTYPE_COUNT
};

/* Client states, driven by ext_client_* transitions; client_check() after
 * each one. */
enum ext_client_state {
    EXT_OPEN,    /* streaming */
    EXT_CLOSING, /* close() was called while leases live: rf_close() waits */
    EXT_CLOSED,  /* rf_close() done; c is NULL */
};

typedef struct {
    PyObject_HEAD
    struct rf_client *c;
    enum ext_client_state state;
    pid_t pid;                       /* the process that opened it */
    int in_next;                     /* a thread is inside rf_next() */
    int as_dlpack;                   /* next() returns DLPack capsules */
    struct rf_info info;             /* from rf_open */
    uint64_t delivered, released;    /* batches: handed out, handed back */
    struct rf_batch held[EXT_HELD_MAX]; /* batch n at n % EXT_HELD_MAX */
    unsigned char done[EXT_HELD_MAX];   /* its last view is gone */
    Py_ssize_t leases;               /* Lease objects alive */
    int release_err;                 /* a failed rf_release, raised by next() */
    char release_msg[256];
} ext_client;

typedef struct {
    PyObject_HEAD
    ext_client *owner;               /* strong reference */
    uint64_t n;                      /* the batch's stream number */
} ext_lease;

typedef struct {
    PyObject_HEAD
    void *data;
    enum ext_dtype dtype;
    int ndim;
    int readonly;
    Py_ssize_t shape[EXT_NDIM_MAX];
    Py_ssize_t strides[EXT_NDIM_MAX]; /* bytes */
    PyObject *base;                  /* keeps data alive; NULL: data is
                                        this object's own malloc() */
} ext_array;

extern PyTypeObject ext_client_type;
extern PyTypeObject ext_lease_type;
extern PyTypeObject ext_array_type;
extern PyTypeObject ext_writer_type;     /* writer.c */
extern PyTypeObject ext_encoder_type;    /* writer.c */
extern PyObject *ext_error;          /* ringfeed.Error, an OSError */

/* module.c: raises ringfeed.Error(-err, msg); returns NULL. */
PyObject *ext_raise(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* convert.c: ringfeed._ringfeed.normalize (Loader's dtype= and normalize=) */
PyObject *ext_normalize(PyObject *self, PyObject *args, PyObject *kw);

/* ctl.c: _ringfeed.ctl(request, socket=None) -> (text, [lines]), one
 * control-protocol request; an ERR reply raises ringfeed.Error. */
PyObject *ext_ctl(PyObject *self, PyObject *args, PyObject *kw);

/* writer.c: _ringfeed.split(path, val_frac, val_count, stratify, seed, train, val,
 * force) -> dict, proto/dataset_split.h's dataset_split (ringfeed.split). */
PyObject *ext_split(PyObject *self, PyObject *args, PyObject *kw);

/* array.c */

/* A new C-contiguous Array viewing data, kept alive by base (a new
 * reference is taken), or owning a fresh zeroed block when data is NULL
 * (then base must be NULL).  NULL with an exception on failure. */
ext_array *ext_array_new(void *data, enum ext_dtype dtype, int ndim,
                         const Py_ssize_t *shape, PyObject *base);
/* The Array element type of a batch's RF_DTYPE_*, or -1 when this binding
 * has none (or its size disagrees with libringfeed's rf_dtype_size). */
int ext_dtype_of(uint32_t rf_dtype);
/* numpy's and torch's name of an element type ("uint8", "float32"); NULL
 * out of range. */
const char *ext_dtype_name(int dtype);
/* Bytes the array spans. */
Py_ssize_t ext_array_nbytes(const ext_array *a);
/* A "dltensor" capsule over a (the capsule keeps a alive until the
 * consumer's deleter runs).  NULL with an exception on failure. */
PyObject *ext_array_dlpack(ext_array *a);

/* A new lease on batch n of owner.  NULL with an exception. */
ext_lease *ext_lease_new(ext_client *owner, uint64_t n);

/* client.c, for array.c: batch n's last view is gone. */
void ext_client_view_gone(ext_client *o, uint64_t n);

#endif
