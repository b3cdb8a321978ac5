/*
 * writer.c - the C side of ringfeed.Writer and ringfeed.pack (the Python
 * side is python/ringfeed/writer.py): two small private types over the
 * code ringfeed-pack itself runs, so a dataset written from Python is
 * written exactly as the CLI writes one.
 *
 *   DatasetWriter  proto/dataset_writer.h: a temporary folder beside the
 *                  destination, records appended, the MANIFEST and the
 *                  atomic rename on finish(), the folder removed on abort()
 *                  (or when the object dies unfinished); kind fields'
 *                  field lines parsed by schema.c, and DatasetWriter.record
 *                  making a record of its parts (schema.h's layout).
 *   ImageEncoder   tools/imagefile.h with its coders: what `ringfeed-pack
 *                  imagefolder` makes of one image, from RGB pixels
 *                  (imagefile_run_rgb) or from an encoded file's bytes
 *                  (imagefile_run_bytes): an RFPX record or a JPEG, by
 *                  --image-mode (and --max-side); and plane(): a
 *                  one-channel RFPX record (a mask) of given values.
 *
 * Both drop the GIL around the work (compression, decoding, encoding),
 * holding the caller's buffer meanwhile; each object is used by one thread
 * at a time (a second caller gets RuntimeError, not a race).
 *
 * PROCESSES.  A DatasetWriter belongs to the process that created it.  A
 * forked child (ringfeed.pack's encoding workers) inherits a copy whose
 * temporary folder is its parent's: in the child every method raises
 * RuntimeError and its dealloc neither removes the folder nor frees the
 * writer (its descriptors go when the child exits).
 */
#include "ext.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "dataset_split.h"
#include "dataset_writer.h"
#include "imagefile.h"
#include "pixels.h"

/*
 * *out = v, an int in [0, max]: TypeError for a non-integer, OverflowError
 * outside the range, each naming the argument (PyArg's I and K would wrap).
 * Returns 0 or -1 with the exception set.
 */
static int u64_arg(PyObject *v, const char *name, unsigned long long max,
                   unsigned long long *out)
{
    int over;
    long long s;

    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "ringfeed: %s=%R: an integer is required", name, v);
        return -1;
    }
    s = PyLong_AsLongLongAndOverflow(v, &over);
    if (s == -1 && !over && PyErr_Occurred())
        return -1;
    if (over > 0) {
        *out = PyLong_AsUnsignedLongLong(v);
        if (*out == (unsigned long long)-1 && PyErr_Occurred())
            PyErr_Clear();
        else if (*out <= max)
            return 0;
    } else if (!over && s >= 0 && (unsigned long long)s <= max) {
        *out = (unsigned long long)s;
        return 0;
    }
    PyErr_Format(PyExc_OverflowError, "ringfeed: %s=%R is out of range: use 0 to %llu", name,
                 v, max);
    return -1;
}

/* ---- DatasetWriter ------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    struct dataset_writer *w;        /* NULL once finished or aborted */
    pid_t pid;                       /* the process that created it */
    int busy;                        /* a thread is inside add() */
    PyObject *tmpdir;                /* str: the temporary folder */
} ext_writer;

/* Raises unless w may be used now by this thread and process. */
static int writer_usable(ext_writer *o)
{
    if (o->pid != getpid()) {
        PyErr_SetString(PyExc_RuntimeError, "ringfeed: this DatasetWriter belongs to "
                        "the process that created it, not a forked child");
        return -1;
    }
    if (!o->w) {
        PyErr_SetString(PyExc_ValueError, "ringfeed: the writer is closed (finished or "
                        "aborted)");
        return -1;
    }
    if (o->busy) {
        PyErr_SetString(PyExc_RuntimeError, "ringfeed: the writer is in use by another "
                        "thread");
        return -1;
    }
    return 0;
}

static PyObject *writer_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    ext_writer *o = (ext_writer *)type->tp_alloc(type, 0);

    (void)args;
    (void)kw;
    if (o)
        o->pid = getpid();
    return (PyObject *)o;
}

/* shape: a sequence of 1..DATASET_MAX_DIMS positive ints into opts. */
static int parse_shape(PyObject *shape, struct dataset_writer_opts *opts)
{
    PyObject *seq = PySequence_Fast(shape, "ringfeed: shape must be a sequence of ints");
    Py_ssize_t n;

    if (!seq)
        return -1;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > DATASET_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "ringfeed: a tensor has 1 to %d dimensions, not %zd",
                     DATASET_MAX_DIMS, n);
        return -1;
    }
    opts->ndim = (unsigned)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long d;

        if (u64_arg(PySequence_Fast_GET_ITEM(seq, i), "shape", UINT64_MAX, &d) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        opts->shape[i] = d;
    }
    Py_DECREF(seq);
    return 0;
}

/*
 * fields: a sequence of field lines (str, the MANIFEST's words after
 * "field": proto/schema.h) parsed, added and checked by schema.c itself
 * (ValueError naming the field), so a line Python makes means what it
 * means in a MANIFEST.
 */
static int parse_fields(PyObject *fields, struct schema *s)
{
    PyObject *seq = PySequence_Fast(fields, "ringfeed: fields must be a sequence of str");
    Py_ssize_t n;
    int rc = -1;

    if (!seq)
        return -1;
    memset(s, 0, sizeof(*s));
    n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        struct schema_field f;
        char of[SCHEMA_NAME_MAX + 1];
        struct rf_err err;
        Py_ssize_t len;
        const char *line = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(seq, i), &len);

        if (!line)
            goto out;
        if (schema_field_parse(line, (size_t)len, &f, of, &err) < 0 ||
            schema_add(s, &f, of, &err) < 0) {
            PyErr_Format(PyExc_ValueError, "ringfeed: %s", err.msg);
            goto out;
        }
    }
    {
        struct rf_err err;

        if (schema_check(s, &err) < 0) {
            PyErr_Format(PyExc_ValueError, "ringfeed: %s", err.msg);
            goto out;
        }
    }
    rc = 0;
out:
    Py_DECREF(seq);
    return rc;
}

/*
 * DatasetWriter(path, kind, classes, class_names=None, dtype=None,
 *               shape=None, shard_bytes=0, jpeg_restart=False, fields=None,
 *               codec=None, max_side=0, max_side_quality=0)
 * kind "jpeg", "tensor" or "fields"; dtype ("u8", ...) and shape for a
 * tensor; fields (field lines) for kind fields; codec "none" or "zstd"
 * (default: none for jpeg, zstd otherwise); max_side and its quality
 * (jpeg only) recorded in the MANIFEST as ringfeed-pack imagefolder
 * --max-side records them.
 */
static int writer_init(ext_writer *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "kind", "classes", "class_names", "dtype", "shape",
                             "shard_bytes", "jpeg_restart", "fields", "codec", "max_side",
                             "max_side_quality", NULL};
    PyObject *path_obj = NULL, *names = Py_None, *shape = Py_None, *names_seq = NULL;
    PyObject *classes_obj, *shard_obj = NULL, *fields = Py_None;
    const char *kind, *dtype = NULL, *codec = NULL;
    unsigned long long classes, shard_bytes = 0;
    int restart = 0, max_side = 0, max_side_quality = 0, r, rc = -1;
    struct dataset_writer_opts opts = {0};
    struct schema schema;
    const char **cnames = NULL;
    struct rf_err err;

    if (o->w) {
        PyErr_SetString(PyExc_RuntimeError, "ringfeed: DatasetWriter already created");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&sO|OzOOpOzii", kwlist, PyUnicode_FSConverter,
                                     &path_obj, &kind, &classes_obj, &names, &dtype, &shape,
                                     &shard_obj, &restart, &fields, &codec, &max_side,
                                     &max_side_quality))
        return -1;
    if (u64_arg(classes_obj, "classes", DATASET_MAX_CLASSES, &classes) < 0 ||
        (shard_obj && u64_arg(shard_obj, "shard_bytes", UINT64_MAX, &shard_bytes) < 0))
        goto out;
    r = dataset_kind_parse(kind, strlen(kind));
    if (r != DATASET_JPEG && r != DATASET_TENSOR && r != DATASET_FIELDS) {
        PyErr_Format(PyExc_ValueError, "ringfeed: kind %s: use jpeg, tensor or fields", kind);
        goto out;
    }
    opts.kind = (enum dataset_kind)r;
    opts.codec = opts.kind == DATASET_JPEG ? DATASET_CODEC_NONE : DATASET_CODEC_ZSTD;
    if (codec && (r = codec_parse(codec, strlen(codec))) < 0) {
        PyErr_Format(PyExc_ValueError, "ringfeed: codec %s: use none or zstd", codec);
        goto out;
    }
    if (codec)
        opts.codec = (unsigned)r;
    if ((fields != Py_None) != (opts.kind == DATASET_FIELDS)) {
        PyErr_SetString(PyExc_ValueError, "ringfeed: fields= is for kind fields, which needs "
                        "it");
        goto out;
    }
    if (fields != Py_None) {
        if (parse_fields(fields, &schema) < 0)
            goto out;
        opts.schema = &schema;
    }
    if (max_side < 0 || max_side_quality < 0) {
        PyErr_SetString(PyExc_ValueError, "ringfeed: max_side and its quality are positive");
        goto out;
    }
    opts.max_side = (uint32_t)max_side;
    opts.max_side_quality = (uint32_t)max_side_quality;
    opts.classes = (uint32_t)classes;
    opts.shard_bytes = shard_bytes;
    opts.jpeg_restart = restart ? DATASET_JPEG_RESTART_LOSSLESS : DATASET_JPEG_AS_IS;
    if (opts.kind == DATASET_TENSOR) {
        if (!dtype || shape == Py_None) {
            PyErr_SetString(PyExc_ValueError, "ringfeed: a tensor dataset needs dtype and "
                            "shape");
            goto out;
        }
        if ((r = dataset_dtype_parse(dtype, strlen(dtype))) < 0) {
            PyErr_Format(PyExc_ValueError, "ringfeed: dtype %s: use u8 i8 i16 i32 f32 f64",
                         dtype);
            goto out;
        }
        opts.dtype = (enum dataset_dtype)r;
        if (parse_shape(shape, &opts) < 0)
            goto out;
    }
    if (names != Py_None) {
        Py_ssize_t n;

        names_seq = PySequence_Fast(names, "ringfeed: class_names must be a sequence");
        if (!names_seq)
            goto out;
        n = PySequence_Fast_GET_SIZE(names_seq);
        if (n != (Py_ssize_t)classes) {
            PyErr_Format(PyExc_ValueError, "ringfeed: %zd class names for %llu classes", n,
                         classes);
            goto out;
        }
        cnames = PyMem_Calloc((size_t)n + 1, sizeof(*cnames));
        if (!cnames) {
            PyErr_NoMemory();
            goto out;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            cnames[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(names_seq, i));
            if (!cnames[i])
                goto out;
        }
        opts.class_names = cnames;
    }
    Py_BEGIN_ALLOW_THREADS
    r = dataset_writer_create(PyBytes_AS_STRING(path_obj), &opts, &o->w, &err);
    Py_END_ALLOW_THREADS
    if (r < 0) {
        ext_raise(r, "%s", err.msg);
        goto out;
    }
    o->tmpdir = PyUnicode_DecodeFSDefault(dataset_writer_tmpdir(o->w));
    if (!o->tmpdir) {
        dataset_writer_abort(o->w);
        o->w = NULL;
        goto out;
    }
    rc = 0;
out:
    PyMem_Free(cnames);
    Py_XDECREF(names_seq);
    Py_XDECREF(path_obj);
    return rc;
}

/* add(data, label, codec=-1): one record; label None for none (kind
 * fields: a label is a field); codec -1 the dataset's, 0 none, 1 zstd. */
static PyObject *writer_add(ext_writer *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"data", "label", "codec", NULL};
    Py_buffer buf;
    PyObject *label_obj;
    unsigned long long label;
    int codec = -1, r;
    struct rf_err err;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*O|i", kwlist, &buf, &label_obj, &codec))
        return NULL;
    label = DATASET_NO_LABEL;
    if ((label_obj != Py_None && u64_arg(label_obj, "label", UINT32_MAX, &label) < 0) ||
        writer_usable(o) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (codec < -1 || codec >= DATASET_CODEC_COUNT) {
        PyBuffer_Release(&buf);
        return PyErr_Format(PyExc_ValueError, "ringfeed: codec %d: use -1 (the dataset's), "
                            "0 (none) or 1 (zstd)", codec);
    }
    o->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    if (codec < 0)
        r = dataset_writer_add(o->w, buf.buf, (size_t)buf.len, (uint32_t)label, &err);
    else
        r = dataset_writer_add_codec(o->w, buf.buf, (size_t)buf.len, (uint32_t)label,
                                     (unsigned)codec, &err);
    Py_END_ALLOW_THREADS
    o->busy = 0;
    PyBuffer_Release(&buf);
    if (r < 0)
        return ext_raise(r, "%s", err.msg);
    Py_RETURN_NONE;
}

static PyObject *writer_set_raw_images(ext_writer *o, PyObject *arg)
{
    unsigned long long n;
    struct rf_err err;
    int r;

    if (u64_arg(arg, "n", UINT64_MAX, &n) < 0)
        return NULL;
    if (writer_usable(o) < 0)
        return NULL;
    r = dataset_writer_set_raw_images(o->w, n, &err);
    if (r < 0)
        return ext_raise(r, "%s", err.msg);
    Py_RETURN_NONE;
}

static PyObject *writer_set_image_shape(ext_writer *o, PyObject *args)
{
    PyObject *ho, *wo;
    unsigned long long h, w;
    struct rf_err err;
    int r;

    if (!PyArg_ParseTuple(args, "OO", &ho, &wo))
        return NULL;
    if (u64_arg(ho, "height", UINT32_MAX, &h) < 0 || u64_arg(wo, "width", UINT32_MAX, &w) < 0 ||
        writer_usable(o) < 0)
        return NULL;
    r = dataset_writer_set_image_shape(o->w, (uint32_t)h, (uint32_t)w, &err);
    if (r < 0)
        return ext_raise(r, "%s", err.msg);
    Py_RETURN_NONE;
}

/* set_field_shape(field, height, width): kind fields' image field index
 * field (schema order) has images of one size (its shape=HxW). */
static PyObject *writer_set_field_shape(ext_writer *o, PyObject *args)
{
    PyObject *fo, *ho, *wo;
    unsigned long long f, h, w;
    struct rf_err err;
    int r;

    if (!PyArg_ParseTuple(args, "OOO", &fo, &ho, &wo))
        return NULL;
    if (u64_arg(fo, "field", UINT32_MAX, &f) < 0 || u64_arg(ho, "height", UINT32_MAX, &h) < 0 ||
        u64_arg(wo, "width", UINT32_MAX, &w) < 0 || writer_usable(o) < 0)
        return NULL;
    r = dataset_writer_set_field_shape(o->w, (uint32_t)f, (uint32_t)h, (uint32_t)w, &err);
    if (r < 0)
        return ext_raise(r, "%s", err.msg);
    Py_RETURN_NONE;
}

/*
 * record(parts) -> bytes (a static method): a kind-fields record of these
 * parts (bytes-like, one per field in schema order): each a 4-byte
 * little-endian length then its bytes (schema.h; schema_record_put_len),
 * at most DATASET_RECORD_MAX bytes in all (ValueError saying so).  The
 * parts are checked against the schema when the record is added.
 */
static PyObject *writer_record(PyObject *unused, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "ringfeed: parts must be a sequence of bytes");
    Py_buffer bufs[SCHEMA_MAX_FIELDS];
    Py_ssize_t n, got = 0;
    uint64_t total = 0;
    PyObject *rec = NULL;

    (void)unused;
    if (!seq)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > SCHEMA_MAX_FIELDS) {
        PyErr_Format(PyExc_ValueError, "ringfeed: a record has 1 to %d parts, not %zd",
                     SCHEMA_MAX_FIELDS, n);
        goto out;
    }
    for (; got < n; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &bufs[got],
                               PyBUF_C_CONTIGUOUS) < 0)
            goto out;
        total += 4 + (uint64_t)bufs[got].len;
    }
    if (total > DATASET_RECORD_MAX) {
        PyErr_Format(PyExc_ValueError, "a record of %llu bytes: the limit is %u",
                     (unsigned long long)total, DATASET_RECORD_MAX);
        goto out;
    }
    rec = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (rec) {
        uint8_t *p = (uint8_t *)PyBytes_AS_STRING(rec);

        for (Py_ssize_t i = 0; i < n; i++) {
            schema_record_put_len(p, (uint32_t)bufs[i].len);
            memcpy(p + 4, bufs[i].buf, (size_t)bufs[i].len);
            p += 4 + bufs[i].len;
        }
    }
out:
    while (got > 0)
        PyBuffer_Release(&bufs[--got]);
    Py_DECREF(seq);
    return rec;
}

static PyObject *stats_dict(const struct dataset_writer_stats *st)
{
    return Py_BuildValue("{sKsKsKsKsIsI}", "records", (unsigned long long)st->records,
                         "decoded_bytes", (unsigned long long)st->decoded_bytes,
                         "stored_bytes", (unsigned long long)st->stored_bytes,
                         "file_bytes", (unsigned long long)st->file_bytes,
                         "shards", (unsigned int)st->shards,
                         "dict_size", (unsigned int)st->dict_size);
}

static PyObject *writer_stats(ext_writer *o, PyObject *unused)
{
    struct dataset_writer_stats st;

    (void)unused;
    if (writer_usable(o) < 0)
        return NULL;
    dataset_writer_get_stats(o->w, &st);
    return stats_dict(&st);
}

/* finish(): the MANIFEST, fsyncs and the rename; the writer is closed
 * whatever happens (on failure the temporary folder is gone). */
static PyObject *writer_finish(ext_writer *o, PyObject *unused)
{
    struct dataset_writer_stats st;
    struct dataset_writer *w;
    struct rf_err err;
    int r;

    (void)unused;
    if (writer_usable(o) < 0)
        return NULL;
    w = o->w;
    o->w = NULL;
    Py_BEGIN_ALLOW_THREADS
    r = dataset_writer_finish(w, &st, &err);
    Py_END_ALLOW_THREADS
    if (r < 0)
        return ext_raise(r, "%s", err.msg);
    return stats_dict(&st);
}

/* abort(): removes the temporary folder; a closed writer is left alone. */
static PyObject *writer_abort(ext_writer *o, PyObject *unused)
{
    (void)unused;
    if (!o->w)
        Py_RETURN_NONE;
    if (writer_usable(o) < 0)
        return NULL;
    dataset_writer_abort(o->w);
    o->w = NULL;
    Py_RETURN_NONE;
}

static void writer_dealloc(ext_writer *o)
{
    if (o->pid == getpid())          /* a forked child's copy is its parent's */
        dataset_writer_abort(o->w);
    Py_XDECREF(o->tmpdir);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyObject *writer_get_tmpdir(ext_writer *o, void *closure)
{
    (void)closure;
    if (!o->tmpdir)
        Py_RETURN_NONE;
    return Py_NewRef(o->tmpdir);
}

static PyObject *writer_get_closed(ext_writer *o, void *closure)
{
    (void)closure;
    return PyBool_FromLong(o->w == NULL);
}

static PyMethodDef writer_methods[] = {
    {"add", (PyCFunction)(void (*)(void))writer_add, METH_VARARGS | METH_KEYWORDS,
     "add(data, label, codec=-1): appends one record (codec -1: the dataset's; 0: "
     "stored as is; 1: zstd)."},
    {"set_raw_images", (PyCFunction)writer_set_raw_images, METH_O,
     "set_raw_images(n): how many records are RFPX pixels (the MANIFEST's raw_images)."},
    {"set_image_shape", (PyCFunction)writer_set_image_shape, METH_VARARGS,
     "set_image_shape(height, width): every image's size (the MANIFEST's image_shape)."},
    {"set_field_shape", (PyCFunction)writer_set_field_shape, METH_VARARGS,
     "set_field_shape(field, height, width): every image of image field number field "
     "has that size (its shape=HxW in the MANIFEST)."},
    {"record", (PyCFunction)writer_record, METH_O | METH_STATIC,
     "record(parts) -> bytes: a kind-fields record of these parts (each a u32 LE "
     "length then its bytes, schema.h)."},
    {"stats", (PyCFunction)writer_stats, METH_NOARGS, "Figures so far, as a dict."},
    {"finish", (PyCFunction)writer_finish, METH_NOARGS,
     "Completes the dataset (MANIFEST, fsync, rename); returns the final figures."},
    {"abort", (PyCFunction)writer_abort, METH_NOARGS,
     "Removes the temporary folder; nothing is left at the path."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
    {"tmpdir", (getter)writer_get_tmpdir, NULL, "The temporary folder being written.", NULL},
    {"closed", (getter)writer_get_closed, NULL, "Finished or aborted.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject ext_writer_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringfeed._ringfeed.DatasetWriter",
    .tp_basicsize = sizeof(ext_writer),
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A dataset being packed (proto/dataset_writer.h); private to ringfeed.Writer.",
    .tp_methods = writer_methods,
    .tp_getset = writer_getset,
    .tp_init = (initproc)writer_init,
    .tp_new = writer_new,
};

/* ---- ImageEncoder -------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    struct imagefile_opts opts;
    struct imagefile_coders coders;
    struct imagefile f;
    int ready;                       /* coders made */
    int busy;                        /* a thread is encoding */
} ext_encoder;

static const char *const encoder_modes[] = {
    [IMAGEFILE_RAW] = "raw", [IMAGEFILE_JPEG] = "jpeg", [IMAGEFILE_SMART] = "smart",
};

static PyObject *encoder_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    (void)args;
    (void)kw;
    return type->tp_alloc(type, 0);
}

/* ImageEncoder(mode="raw", quality=90, smart_pixels=65536, max_side=0):
 * max_side as ringfeed-pack imagefolder --max-side (0: none). */
static int encoder_init(ext_encoder *o, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"mode", "quality", "smart_pixels", "max_side", NULL};
    const char *mode = "raw";
    int quality = 90, max_side = 0;
    PyObject *smart_obj = NULL;
    unsigned long long smart = 65536;
    size_t m;

    if (o->ready) {
        PyErr_SetString(PyExc_RuntimeError, "ringfeed: ImageEncoder already created");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|siOi", kwlist, &mode, &quality, &smart_obj,
                                     &max_side))
        return -1;
    if (max_side < 0 || max_side > (int)PX_SIDE_MAX) {
        PyErr_Format(PyExc_ValueError, "ringfeed: max_side=%d: use 1 to %u (0: none)",
                     max_side, PX_SIDE_MAX);
        return -1;
    }
    if (smart_obj && u64_arg(smart_obj, "smart_pixels", UINT64_MAX, &smart) < 0)
        return -1;
    for (m = 0; m < sizeof(encoder_modes) / sizeof(encoder_modes[0]); m++)
        if (!strcmp(mode, encoder_modes[m]))
            break;
    if (m == sizeof(encoder_modes) / sizeof(encoder_modes[0])) {
        PyErr_Format(PyExc_ValueError, "ringfeed: image_mode=%s: use raw, jpeg or smart",
                     mode);
        return -1;
    }
    if (quality < 1 || quality > 100) {
        PyErr_Format(PyExc_ValueError, "ringfeed: quality=%d: use 1 to 100", quality);
        return -1;
    }
    o->opts = (struct imagefile_opts){.quality = quality, .mode = (enum imagefile_mode)m,
                                      .smart_pixels = smart,
                                      .max_side = (uint32_t)max_side};
    if (imagefile_coders_init(&o->coders, &o->opts) < 0) {
        imagefile_coders_fini(&o->coders);
        PyErr_NoMemory();
        return -1;
    }
    o->ready = 1;
    return 0;
}

/* The verdict in o->f as (record, raw, height, width), or ValueError with
 * its reason (a file the CLI would skip, or store as it is with a warning
 * that --strict stops at: here it is refused). */
static PyObject *encoder_result(ext_encoder *o)
{
    struct imagefile *f = &o->f;
    PyObject *rec;

    if (f->verdict == IMAGEFILE_FAIL)
        return PyErr_Format(PyExc_RuntimeError, "ringfeed: %s", f->why);
    if (f->verdict == IMAGEFILE_SKIP)
        return PyErr_Format(PyExc_ValueError, "%s", f->why);
    if (f->note.why && f->note.strict_stops)
        return PyErr_Format(PyExc_ValueError, "%s", f->note.why);
    rec = PyBytes_FromStringAndSize((const char *)f->rec, (Py_ssize_t)f->rec_len);
    imagefile_trim(f);
    if (!rec)
        return NULL;
    return Py_BuildValue("(NOII)", rec, f->raw ? Py_True : Py_False,
                         (unsigned int)f->height, (unsigned int)f->width);
}

static int encoder_usable(ext_encoder *o)
{
    if (!o->ready) {
        PyErr_SetString(PyExc_ValueError, "ringfeed: ImageEncoder not initialised");
        return -1;
    }
    if (o->busy) {
        PyErr_SetString(PyExc_RuntimeError, "ringfeed: the encoder is in use by another "
                        "thread");
        return -1;
    }
    return 0;
}

/* pixels(rgb, width, height): height rows of width * 3 bytes. */
static PyObject *encoder_pixels(ext_encoder *o, PyObject *args)
{
    Py_buffer buf;
    PyObject *wo, *ho;
    unsigned long long w, h;

    if (!PyArg_ParseTuple(args, "y*OO", &buf, &wo, &ho))
        return NULL;
    if (u64_arg(wo, "width", PX_SIDE_MAX, &w) < 0 || u64_arg(ho, "height", PX_SIDE_MAX, &h) < 0 ||
        encoder_usable(o) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    if ((unsigned long long)buf.len != w * h * 3) {
        PyBuffer_Release(&buf);
        return PyErr_Format(PyExc_ValueError, "ringfeed: %zd bytes for %llux%llu RGB pixels "
                            "(%llu expected)", buf.len, w, h, w * h * 3);
    }
    o->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    imagefile_run_rgb(&o->f, buf.buf, (uint32_t)w, (uint32_t)h, &o->opts, &o->coders);
    Py_END_ALLOW_THREADS
    o->busy = 0;
    PyBuffer_Release(&buf);
    return encoder_result(o);
}

/* encoded(data): an image file's bytes (JPEG, PNG, WebP, TIFF, BMP, PNM). */
static PyObject *encoder_encoded(ext_encoder *o, PyObject *arg)
{
    Py_buffer buf;

    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    if (encoder_usable(o) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    o->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    imagefile_run_bytes(&o->f, buf.buf, (size_t)buf.len, &o->opts, &o->coders);
    Py_END_ALLOW_THREADS
    o->busy = 0;
    PyBuffer_Release(&buf);
    return encoder_result(o);
}

/*
 * plane(data, width, height, value_bytes) -> record: a one-channel RFPX
 * record (pixels.h: a mask's class indices or a grayscale image) of height
 * rows of width values, 1 or 2 bytes each (u16 little-endian), as given:
 * no shrink, no conversion.
 */
static PyObject *encoder_plane(ext_encoder *o, PyObject *args)
{
    Py_buffer buf;
    PyObject *wo, *ho, *rec;
    unsigned long long w, h;
    int vb;
    size_t size;

    (void)o;
    if (!PyArg_ParseTuple(args, "y*OOi", &buf, &wo, &ho, &vb))
        return NULL;
    if (u64_arg(wo, "width", PX_SIDE_MAX, &w) < 0 || u64_arg(ho, "height", PX_SIDE_MAX, &h) < 0) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    size = (vb == 1 || vb == 2) ? px_record_size_of((uint32_t)w, (uint32_t)h, 1, (uint32_t)vb)
                                : 0;
    if (!size || (unsigned long long)buf.len != w * h * (unsigned long long)vb) {
        PyBuffer_Release(&buf);
        return PyErr_Format(PyExc_ValueError, "ringfeed: %zd bytes for %llux%llu values of %d "
                            "bytes (sides 1 to %u, values of 1 or 2 bytes)", buf.len, w, h, vb,
                            PX_SIDE_MAX);
    }
    rec = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (rec) {
        px_write_header_of(PyBytes_AS_STRING(rec), (uint32_t)w, (uint32_t)h, 1, (uint32_t)vb);
        memcpy(PyBytes_AS_STRING(rec) + PX_HEADER_SIZE, buf.buf, (size_t)buf.len);
    }
    PyBuffer_Release(&buf);
    return rec;
}

static void encoder_dealloc(ext_encoder *o)
{
    imagefile_fini(&o->f);
    imagefile_coders_fini(&o->coders);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyMethodDef encoder_methods[] = {
    {"pixels", (PyCFunction)encoder_pixels, METH_VARARGS,
     "pixels(rgb, width, height) -> (record, raw, height, width): what ringfeed-pack "
     "imagefolder stores for these RGB pixels (an RFPX record when raw, else a JPEG)."},
    {"encoded", (PyCFunction)encoder_encoded, METH_O,
     "encoded(data) -> (record, raw, height, width): what ringfeed-pack imagefolder "
     "stores for an image file of these bytes."},
    {"plane", (PyCFunction)encoder_plane, METH_VARARGS,
     "plane(data, width, height, value_bytes) -> record: a one-channel RFPX record of "
     "these values (1 or 2 bytes each, little-endian)."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject ext_encoder_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ringfeed._ringfeed.ImageEncoder",
    .tp_basicsize = sizeof(ext_encoder),
    .tp_dealloc = (destructor)encoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ringfeed-pack imagefolder's per-image work (tools/imagefile.h); private to "
              "ringfeed.Writer.",
    .tp_methods = encoder_methods,
    .tp_init = (initproc)encoder_init,
    .tp_new = encoder_new,
};

/* _ringfeed.split: ringfeed-pack split's own function, so the two write
 * the same bytes (ringfeed.split checks the arguments' types first). */
PyObject *ext_split(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "val_frac", "val_count", "stratify", "seed", "train",
                             "val", "force", NULL};
    struct split_request rq = {0};
    struct split_result res;
    struct rf_err err;
    PyObject *path, *count_obj, *seed_obj;
    const char *a, *b;
    unsigned long long count, seed;
    int stratify, force, r;

    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&dOpOssp", kwlist, PyUnicode_FSConverter,
                                     &path, &rq.val_frac, &count_obj, &stratify, &seed_obj,
                                     &a, &b, &force))
        return NULL;
    if (u64_arg(count_obj, "val", UINT64_MAX, &count) < 0 ||
        u64_arg(seed_obj, "seed", UINT64_MAX, &seed) < 0) {
        Py_DECREF(path);
        return NULL;
    }
    rq.val_count = count;
    rq.seed = seed;
    rq.stratify = stratify != 0;
    rq.force = force != 0;
    rq.names[0] = a;
    rq.names[1] = b;
    Py_BEGIN_ALLOW_THREADS
    r = dataset_split(PyBytes_AS_STRING(path), &rq, &res, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    if (r < 0)
        return ext_raise(r, "%s", err.msg);
    return Py_BuildValue("{s:K,s:K,s:s,s:s,s:K}", a, (unsigned long long)res.count[0], b,
                         (unsigned long long)res.count[1], "train_file", res.file[0],
                         "val_file", res.file[1], "replaced", (unsigned long long)res.replaced);
}
