/*
 * array.c - Array, a typed n-d block of memory that numpy reads through
 * the buffer protocol (np.asarray) and torch through DLPack
 * (torch.utils.dlpack.from_dlpack of ext_array_dlpack's capsule), and
 * Lease, one delivered batch's claim on its ring slot (ext.h, LIFETIME).
 *
 * An Array either views memory kept alive by its base (a Lease for ring
 * pixels) or owns a malloc() block (labels, copies).  Arrays are writable:
 * a held ring slot belongs to the program until its last view dies, so an
 * in-place op on a batch touches nothing the daemon reads.
 *
 * DLPack: the capsule is named "dltensor" and holds a DLManagedTensor
 * whose manager_ctx is a strong reference to the Array.  A consumer
 * renames the capsule "used_dltensor" and later calls the deleter; a
 * capsule never consumed calls it from its own destructor.  The deleter
 * may run on any thread, so it takes the GIL, and does nothing once the
 * interpreter is finalizing (the process is ending; nothing to give back).
 */
#include "ext.h"

#include <dlpack/dlpack.h>
#include <stdlib.h>
#include <string.h>

/* An element type as each consumer names it.  Batches carry their
 * libringfeed RF_DTYPE_*; elements are little-endian, as on the hosts this
 * builds for, so the native codes.  numpy has no bfloat16: the buffer
 * protocol shows those elements as their uint16 bit patterns ("H") and
 * ringfeed.Loader widens them to float32 for output="numpy"; DLPack names
 * them (kDLBfloat) and torch takes them as they are.  uint16 goes to
 * DLPack as kDLUInt 16, which older torch refuses (the Loader copies to
 * int32 there). */
static const struct {
    const char *format;   /* PEP 3118, for numpy */
    Py_ssize_t itemsize;
    uint8_t dl_code;      /* DLDataTypeCode, for torch; bits = itemsize * 8 */
    uint32_t rf;          /* RF_DTYPE_* */
    const char *name;     /* numpy's and torch's */
} dtypes[EXT_DTYPE_COUNT] = {
    [EXT_U8] = {"B", 1, kDLUInt, RF_DTYPE_U8, "uint8"},
    [EXT_I8] = {"b", 1, kDLInt, RF_DTYPE_I8, "int8"},
    [EXT_I16] = {"h", 2, kDLInt, RF_DTYPE_I16, "int16"},
    [EXT_I32] = {"i", 4, kDLInt, RF_DTYPE_I32, "int32"},
    [EXT_I64] = {"q", 8, kDLInt, RF_DTYPE_I64, "int64"},
    [EXT_F32] = {"f", 4, kDLFloat, RF_DTYPE_F32, "float32"},
    [EXT_F64] = {"d", 8, kDLFloat, RF_DTYPE_F64, "float64"},
    [EXT_F16] = {"e", 2, kDLFloat, RF_DTYPE_F16, "float16"},
    [EXT_BF16] = {"H", 2, kDLBfloat, RF_DTYPE_BF16, "bfloat16"},
    [EXT_U16] = {"H", 2, kDLUInt, RF_DTYPE_U16, "uint16"},
};

int ext_dtype_of(uint32_t rf_dtype)
{
    for (int i = 0; i < EXT_DTYPE_COUNT; i++)
        if (rf_dtype != 0 && dtypes[i].rf == rf_dtype)
            return rf_dtype_size(rf_dtype) == (size_t)dtypes[i].itemsize ? i : -1;
    return -1;
}

const char *ext_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < EXT_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

ext_array *ext_array_new(void *data, enum ext_dtype dtype, int ndim,
                         const Py_ssize_t *shape, PyObject *base)
{
    ext_array *a;
    Py_ssize_t stride = dtypes[dtype].itemsize;

    if (ndim < 1 || ndim > EXT_NDIM_MAX || dtype >= EXT_DTYPE_COUNT) {
        PyErr_SetString(PyExc_SystemError, "ringfeed: bad array geometry");
        return NULL;
    }
    a = PyObject_New(ext_array, &ext_array_type);
    if (!a)
        return NULL;
    a->dtype = dtype;
    a->ndim = ndim;
    a->readonly = 0;
    a->base = NULL;
    a->data = NULL;
    for (int i = ndim - 1; i >= 0; i--) {
        a->shape[i] = shape[i];
        a->strides[i] = stride;
        stride *= shape[i];
    }
    if (data) {
        a->data = data;
        Py_XINCREF(base);
        a->base = base;
    } else {
        a->data = calloc(1, stride ? (size_t)stride : 1);
        if (!a->data) {
            Py_DECREF(a);
            return (ext_array *)PyErr_NoMemory();
        }
    }
    return a;
}

Py_ssize_t ext_array_nbytes(const ext_array *a)
{
    Py_ssize_t n = dtypes[a->dtype].itemsize;

    for (int i = 0; i < a->ndim; i++)
        n *= a->shape[i];
    return n;
}

static void array_dealloc(ext_array *a)
{
    if (a->base)
        Py_DECREF(a->base);
    else
        free(a->data);
    PyObject_Free(a);
}

static int array_getbuffer(ext_array *a, Py_buffer *v, int flags)
{
    if ((flags & PyBUF_WRITABLE) && a->readonly) {
        PyErr_SetString(PyExc_BufferError, "ringfeed: this array is read-only");
        return -1;
    }
    v->buf = a->data;
    v->obj = (PyObject *)a;
    Py_INCREF(a);
    v->len = ext_array_nbytes(a);
    v->itemsize = dtypes[a->dtype].itemsize;
    v->readonly = a->readonly;
    v->ndim = a->ndim;
    v->format = (flags & PyBUF_FORMAT) ? (char *)dtypes[a->dtype].format : NULL;
    v->shape = (flags & PyBUF_ND) == PyBUF_ND ? a->shape : NULL;
    v->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? a->strides : NULL;
    v->suboffsets = NULL;
    v->internal = NULL;
    return 0;
}

static PyBufferProcs array_as_buffer = {
    .bf_getbuffer = (getbufferproc)array_getbuffer,
};

/* The managed tensor and the arrays its DLTensor points to. */
struct ext_dl {
    DLManagedTensor m;
    int64_t shape[EXT_NDIM_MAX];
    int64_t strides[EXT_NDIM_MAX]; /* elements, as DLPack counts them */
};

static int interpreter_gone(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return !Py_IsInitialized() || Py_IsFinalizing();
#else
    return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

static void dl_deleter(DLManagedTensor *m)
{
    PyGILState_STATE g;

    if (!m)
        return;
    if (interpreter_gone())
        return; /* the process is ending: leave the memory to it */
    g = PyGILState_Ensure();
    Py_XDECREF((PyObject *)m->manager_ctx);
    PyGILState_Release(g);
    free(m);
}

static void capsule_destructor(PyObject *cap)
{
    DLManagedTensor *m;

    if (!PyCapsule_IsValid(cap, "dltensor"))
        return; /* consumed: the consumer owns the deleter call */
    m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter)
        m->deleter(m);
}

PyObject *ext_array_dlpack(ext_array *a)
{
    struct ext_dl *d = calloc(1, sizeof(*d));
    PyObject *cap;

    if (!d)
        return PyErr_NoMemory();
    for (int i = 0; i < a->ndim; i++) {
        d->shape[i] = a->shape[i];
        d->strides[i] = a->strides[i] / dtypes[a->dtype].itemsize;
    }
    d->m.dl_tensor = (DLTensor){
        .data = a->data,
        .device = {.device_type = kDLCPU, .device_id = 0},
        .ndim = a->ndim,
        .dtype = {.code = dtypes[a->dtype].dl_code,
                  .bits = (uint8_t)(dtypes[a->dtype].itemsize * 8),
                  .lanes = 1},
        .shape = d->shape,
        .strides = d->strides,
        .byte_offset = 0,
    };
    d->m.manager_ctx = a;
    d->m.deleter = dl_deleter;
    Py_INCREF(a);
    cap = PyCapsule_New(&d->m, "dltensor", capsule_destructor);
    if (!cap) {
        Py_DECREF(a);
        free(d);
    }
    return cap;
}

static PyObject *array_dlpack_method(ext_array *a, PyObject *args, PyObject *kw)
{
    static char *names[] = {"stream", NULL};
    PyObject *stream = Py_None;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:__dlpack__", names, &stream))
        return NULL;
    if (stream != Py_None) {
        PyErr_SetString(PyExc_BufferError, "ringfeed: a host array takes no stream");
        return NULL;
    }
    return ext_array_dlpack(a);
}

static PyObject *array_dlpack_device(ext_array *a, PyObject *unused)
{
    (void)a;
    (void)unused;
    return Py_BuildValue("(ii)", (int)kDLCPU, 0);
}

static PyObject *array_get_shape(ext_array *a, void *unused)
{
    PyObject *t = PyTuple_New(a->ndim);

    (void)unused;
    for (int i = 0; t && i < a->ndim; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromSsize_t(a->shape[i]));
    return t;
}

static PyObject *array_get_address(ext_array *a, void *unused)
{
    (void)unused;
    return PyLong_FromVoidPtr(a->data);
}

static PyMethodDef array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack_method,
     METH_VARARGS | METH_KEYWORDS, "A DLPack capsule over this array (zero copy)."},
    {"__dlpack_device__", (PyCFunction)array_dlpack_device, METH_NOARGS,
     "(kDLCPU, 0): the array is in host memory."},
    {NULL, NULL, 0, NULL},
};

static PyObject *array_get_dtype(ext_array *a, void *unused)
{
    (void)unused;
    return PyUnicode_FromString(dtypes[a->dtype].name);
}

static PyGetSetDef array_getset[] = {
    {"shape", (getter)array_get_shape, NULL, "the array's shape", NULL},
    {"dtype", (getter)array_get_dtype, NULL,
     "its element type as numpy and torch name it (\"bfloat16\": the buffer "
     "protocol shows uint16 bit patterns)", NULL},
    {"address", (getter)array_get_address, NULL, "where its first byte is", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ext_array_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringfeed._ringfeed.Array",
    .tp_basicsize = sizeof(ext_array),
    .tp_dealloc = (destructor)array_dealloc,
    .tp_as_buffer = &array_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A block of host memory with a shape: numpy reads it through the buffer "
              "protocol, torch through DLPack.",
    .tp_methods = array_methods,
    .tp_getset = array_getset,
};

/* ---- Lease ------------------------------------------------------------ */

ext_lease *ext_lease_new(ext_client *owner, uint64_t n)
{
    ext_lease *l = PyObject_New(ext_lease, &ext_lease_type);

    if (!l)
        return NULL;
    Py_INCREF(owner);
    l->owner = owner;
    l->n = n;
    owner->leases++;
    return l;
}

static void lease_dealloc(ext_lease *l)
{
    ext_client *o = l->owner;

    ext_client_view_gone(o, l->n);
    PyObject_Free(l);
    Py_DECREF(o);
}

PyTypeObject ext_lease_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringfeed._ringfeed.Lease",
    .tp_basicsize = sizeof(ext_lease),
    .tp_dealloc = (destructor)lease_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One delivered batch's claim on its ring slot; the slot goes back when "
              "the last view of the batch is freed.",
};
