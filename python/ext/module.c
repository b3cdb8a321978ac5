/*
 * module.c - ringfeed._ringfeed: registers the types (the client's, and
 * writer.c's DatasetWriter and ImageEncoder) and ringfeed.Error,
 * and turns libringfeed's negative errno plus message into that error.
 *
 * ringfeed.Error is an OSError: e.errno is the errno (ENOENT for an
 * unknown dataset, ECONNREFUSED for a daemon that is not running, ...)
 * and str(e) carries libringfeed's whole message, which names the socket,
 * the dataset or the option at fault.
 */
#include "ext.h"

#include "config.h" /* RINGFEED_VERSION: meson's project version, ringfeed.__version__ */

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>

PyObject *ext_error;

PyObject *ext_raise(int err, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    PyObject *args;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    args = Py_BuildValue("(is)", err < 0 ? -err : err, msg);
    if (args) {
        PyErr_SetObject(ext_error, args);
        Py_DECREF(args);
    }
    return NULL;
}

static PyObject *mod_strerror(PyObject *self, PyObject *arg)
{
    int over;
    long long e = PyLong_AsLongLongAndOverflow(arg, &over);

    (void)self;
    if (e == -1 && !over && PyErr_Occurred())
        return NULL;
    if (over || e < -INT_MAX || e > INT_MAX)
        return PyErr_Format(PyExc_OverflowError,
                            "ringfeed: strerror(%R): an errno is %d to %d", arg, -INT_MAX,
                            INT_MAX);
    return PyUnicode_FromString(rf_strerror(e > 0 ? (int)-e : (int)e));
}

static PyMethodDef mod_methods[] = {
    {"strerror", mod_strerror, METH_O, "The symbolic name of an errno (\"ENOENT\")."},
    {"normalize", (PyCFunction)(void (*)(void))ext_normalize, METH_VARARGS | METH_KEYWORDS,
     "normalize(src, dst, out, channels, plane, hwc, mean, std): uint8 images (src) into "
     "dst as out (\"float32\", \"float16\", \"bfloat16\"): (x / 255 - mean[c]) / std[c]."},
#ifndef RINGFEED_EXT_NO_WRITER
    /* ctl.c links ringfeedctl's connection code, which gpu-check's build
     * of the reading half leaves out as it leaves writer.c */
    {"ctl", (PyCFunction)(void (*)(void))ext_ctl, METH_VARARGS | METH_KEYWORDS,
     "ctl(request, socket=None) -> (text, lines): one control-protocol request "
     "(ringfeedctl's); an ERR reply raises ringfeed.Error."},
    {"split", (PyCFunction)(void (*)(void))ext_split, METH_VARARGS | METH_KEYWORDS,
     "split(path, val_frac, val_count, stratify, seed, train, val, force) -> dict: "
     "ringfeed-pack split's dataset_split (ringfeed.split wraps it)."},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ringfeed._ringfeed",
    .m_doc = "The C core of the ringfeed package: streams from a ringfeedd daemon "
             "through libringfeed, and datasets written by ringfeed-pack's own code.",
    .m_size = -1,
    .m_methods = mod_methods,
};

PyMODINIT_FUNC PyInit__ringfeed(void);
PyMODINIT_FUNC PyInit__ringfeed(void)
{
    /* RINGFEED_EXT_NO_WRITER: built without writer.c and ringfeed-pack's
     * code it links (scripts/gpu-check builds the extension so on a GPU
     * machine that has none of their libraries); ringfeed.Writer says so */
    PyTypeObject *types[] = {&ext_client_type, &ext_lease_type, &ext_array_type,
#ifndef RINGFEED_EXT_NO_WRITER
                             &ext_writer_type, &ext_encoder_type,
#endif
    };
    const char *names[] = {"Client", "Lease", "Array",
#ifndef RINGFEED_EXT_NO_WRITER
                           "DatasetWriter", "ImageEncoder",
#endif
    };
    PyObject *m;

    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    m = PyModule_Create(&mod_def);
    if (!m)
        return NULL;
    ext_error = PyErr_NewExceptionWithDoc(
        "ringfeed.Error",
        "A failure reported by libringfeed or the daemon: an OSError whose errno says "
        "what kind and whose message says what, where and what to do.",
        PyExc_OSError, NULL);
    if (!ext_error || PyModule_AddObjectRef(m, "Error", ext_error) < 0)
        goto fail;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            goto fail;
    if (PyModule_AddIntConstant(m, "SAMPLE_PADDING", RF_SAMPLE_PADDING) < 0 ||
        PyModule_AddIntConstant(m, "SAMPLE_SUBSTITUTED", RF_SAMPLE_SUBSTITUTED) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_MAJOR", RF_VERSION_MAJOR) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_MINOR", RF_VERSION_MINOR) < 0 ||
        PyModule_AddStringConstant(m, "__version__", RINGFEED_VERSION) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
