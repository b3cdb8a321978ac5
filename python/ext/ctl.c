/*
 * ctl.c - ringfeed._ringfeed.ctl(): one control-protocol request to the
 * daemon (proto/ctl.h) and its reply, over tools/ctlconn.c, the same code
 * ringfeedctl uses (libringfeed's socket defaults included).  The Loader
 * asks CLASSES and SOURCES with it: what a dataset is, from the daemon that
 * serves it, when the program knows only its catalogue name.
 */
#include "ext.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ctlconn.h"

PyObject *ext_ctl(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"request", "socket", NULL};
    const char *request, *sock = NULL;
    char line[CTL_LINE_MAX + 1];
    struct ctlconn cc;
    struct ctl_reply rep;
    struct rf_err err;
    PyObject *lines = NULL, *text = NULL, *out = NULL;
    size_t cursor = 0, off, len;
    int r, n;

    (void)self;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|z", kwlist, &request, &sock))
        return NULL;
    n = snprintf(line, sizeof(line), "%s\n", request);
    if (n < 0 || (size_t)n >= sizeof(line) || strchr(request, '\n'))
        return ext_raise(-EINVAL, "ctl: one request line of at most %d bytes",
                         CTL_LINE_MAX - 1);
    Py_BEGIN_ALLOW_THREADS
    r = ctlconn_open(&cc, sock, &err);
    if (r == 0)
        r = ctlconn_request(&cc, line, &rep, &err);
    Py_END_ALLOW_THREADS
    if (r < 0) {
        ctlconn_close(&cc);
        return ext_raise(r, "%s", err.msg);
    }
    if (!rep.ok) {
        PyObject *e = ext_raise(rep.err ? rep.err : -EIO, "the daemon refused %.*s: %.*s: %.*s",
                                (int)strcspn(request, " \t"), request, (int)rep.name_len,
                                cc.buf + rep.name_off, (int)rep.text_len,
                                cc.buf + rep.text_off);

        ctlconn_close(&cc);
        return e;
    }
    lines = PyList_New(0);
    text = PyUnicode_DecodeUTF8(cc.buf + rep.text_off, (Py_ssize_t)rep.text_len, "replace");
    if (!lines || !text)
        goto out;
    while (rep.multi && ctl_reply_next_line(cc.buf, &rep, &cursor, &off, &len)) {
        PyObject *s = PyUnicode_DecodeUTF8(cc.buf + off, (Py_ssize_t)len, "replace");

        if (!s || PyList_Append(lines, s) < 0) {
            Py_XDECREF(s);
            goto out;
        }
        Py_DECREF(s);
    }
    out = PyTuple_Pack(2, text, lines);
out:
    Py_XDECREF(text);
    Py_XDECREF(lines);
    ctlconn_close(&cc);
    return out;
}
