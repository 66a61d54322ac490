/* Reading an uncompressed trace ahead, and cutting it, on a thread that never takes the GIL (part of the _scan
 * extension; the Python side is read_ahead.py).
 *
 * ReadAhead(fd, buffers)
 *     A native thread reads the file (pread from offset 0) into the writable buffers in turn, one block each
 *     (a block is a buffer's length, but the last). Once start_cut was called it also runs the depth scan
 *     (split_scan, _scan.c) over every block not yet handed out, in order, the machine's state carried from block
 *     to block, until the machine stops (the array's end, too deep a nesting).
 * next() -> (buffer index, length, note) | None
 *     The next block, waiting (without the GIL) until it is read and, when cutting, scanned; None after the last.
 *     The block stays untouched until the next call: the thread fills a buffer only once the block in it is two
 *     calls old. note is None for a block that was not scanned, else (depth_in, in_string_in, escape_in,
 *     last_comma, close, depth, in_string, escape, deep): the state the scan began in, the positions found in the
 *     block (-1: none) and the state after it, as split returns them. Raises OSError where a read failed.
 * start_cut(depth, in_string, escape, max_depth)
 *     Scan the blocks after the last one handed out, beginning in this state. Once only.
 * close()
 *     Stops the thread and waits for it (also on deallocation). next() then returns None.
 *
 * Why a native thread: a Python thread needs the GIL back after each read and each scan, and the reader's
 * msgspec decode holds it for milliseconds at a time, so a Python read-ahead thread that also scans falls behind
 * (measured: the reader waited 0.37 s for blocks on the 1 GB bench trace). Here the GIL is taken only by next().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef _WIN32
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np */
#endif
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "_scan.h"

typedef struct {
    int has;
    SplitMachine in, out;
    SplitFound found;
} Note;

typedef struct {
    PyObject_HEAD
    int fd;
    int ring;             /* buffers */
    Py_buffer *bufs;      /* held for the object's life: the buffers cannot be resized meanwhile */
    Py_ssize_t *len;      /* bytes read into each buffer */
    Note *notes;          /* by buffer */
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* any change of the counters below: both sides wait on it */
    long long filled;     /* blocks read */
    long long handed;     /* blocks handed out by next() */
    long long scanned;    /* blocks scanned (counted from cut_from) */
    long long cut_from;   /* first block to scan (start_cut: the next one to hand out) */
    int cut_on, cut_done; /* start_cut was called; the machine stopped */
    SplitMachine machine; /* the scan's state after the blocks scanned */
    int eof, err, stop;   /* all read; errno of a failed read; close() was called */
    long long offset;     /* file offset of the next block */
    int started;
    pthread_t thread;
} ReadAhead;

/* Fill up to n bytes at off; the count read (less only at the end of the file), or -1 with errno set. */
static Py_ssize_t read_full(int fd, char *p, Py_ssize_t n, long long off) {
    Py_ssize_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, p + got, (size_t)(n - got), (off_t)(off + got));
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) break;
        got += k;
    }
    return got;
}

static void *reader_main(void *arg) {
    ReadAhead *r = (ReadAhead *)arg;
#if defined(__linux__)
    pthread_setname_np(pthread_self(), "llmdiag-cut"); /* how it shows in /proc/<pid>/task/<tid>/comm, top -H */
#elif defined(__APPLE__)
    pthread_setname_np("llmdiag-cut");
#endif
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        long long j = r->cut_from + r->scanned;
        if (r->cut_on && !r->cut_done && j < r->filled) { /* scan the next block read (not handed out yet) */
            int slot = (int)(j % r->ring);
            Note note;
            note.has = 1;
            note.in = r->machine;
            note.out = r->machine;
            pthread_mutex_unlock(&r->mu);
            split_scan((const unsigned char *)r->bufs[slot].buf, 0, r->len[slot], &note.out, &note.found);
            pthread_mutex_lock(&r->mu);
            r->notes[slot] = note;
            r->machine = note.out;
            r->scanned++;
            if (note.found.close >= 0 || note.found.deep >= 0) r->cut_done = 1;
            pthread_cond_broadcast(&r->cv);
            continue;
        }
        /* the caller holds block handed - 1: a buffer is free while fewer than ring blocks are in use */
        if (!r->eof && !r->err && r->filled - r->handed + 1 < r->ring) {
            int slot = (int)(r->filled % r->ring);
            long long off = r->offset;
            pthread_mutex_unlock(&r->mu);
            Py_ssize_t n = read_full(r->fd, (char *)r->bufs[slot].buf, r->bufs[slot].len, off);
            int e = n < 0 ? errno : 0;
            pthread_mutex_lock(&r->mu);
            if (n < 0) {
                r->err = e ? e : EIO;
            } else if (n == 0) {
                r->eof = 1;
            } else {
                r->len[slot] = n;
                r->notes[slot].has = 0;
                r->offset += n;
                r->filled++;
            }
            pthread_cond_broadcast(&r->cv);
            continue;
        }
        pthread_cond_wait(&r->cv, &r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

static void stop_thread(ReadAhead *r) {
    if (!r->started) return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    Py_END_ALLOW_THREADS
    r->started = 0;
}

static void ra_dealloc(ReadAhead *r) {
    stop_thread(r);
    if (r->bufs != NULL) {
        for (int k = 0; k < r->ring; k++)
            if (r->bufs[k].obj != NULL) PyBuffer_Release(&r->bufs[k]);
        PyMem_Free(r->bufs);
    }
    PyMem_Free(r->len);
    PyMem_Free(r->notes);
    if (r->ring) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
    }
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static int ra_init(ReadAhead *r, PyObject *args, PyObject *kw) {
    int fd;
    PyObject *buffers;
    if (r->ring) {
        PyErr_SetString(PyExc_RuntimeError, "ReadAhead: already initialised");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "iO!:ReadAhead", &fd, &PyList_Type, &buffers)) return -1;
    Py_ssize_t ring = PyList_GET_SIZE(buffers);
    if (ring < 2 || ring > 64) {
        PyErr_SetString(PyExc_ValueError, "ReadAhead: 2 to 64 buffers");
        return -1;
    }
    r->bufs = PyMem_Calloc((size_t)ring, sizeof(Py_buffer));
    r->len = PyMem_Calloc((size_t)ring, sizeof(Py_ssize_t));
    r->notes = PyMem_Calloc((size_t)ring, sizeof(Note));
    if (r->bufs == NULL || r->len == NULL || r->notes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    r->ring = (int)ring; /* from here on dealloc destroys the lock: made before anything can fail */
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    for (Py_ssize_t k = 0; k < ring; k++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(buffers, k), &r->bufs[k], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        if (r->bufs[k].len < 1) {
            PyErr_SetString(PyExc_ValueError, "ReadAhead: an empty buffer");
            return -1;
        }
    }
    r->fd = fd;
    if (pthread_create(&r->thread, NULL, reader_main, r) != 0) {
        PyErr_SetString(PyExc_OSError, "ReadAhead: could not start the thread");
        return -1;
    }
    r->started = 1;
    return 0;
}

static PyObject *ra_next(ReadAhead *r, PyObject *unused) {
    if (!r->started) Py_RETURN_NONE;
    int slot = -1, err = 0;
    Py_ssize_t n = 0;
    Note note;
    note.has = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&r->mu);
    for (;;) {
        long long h = r->handed;
        if (h < r->filled && (!r->cut_on || r->cut_done || h < r->cut_from + r->scanned)) {
            slot = (int)(h % r->ring);
            n = r->len[slot];
            note = r->notes[slot];
            r->handed++;
            pthread_cond_broadcast(&r->cv); /* the block before this one is free now */
            break;
        }
        if (h == r->filled && (r->eof || r->err)) {
            err = r->err;
            break;
        }
        pthread_cond_wait(&r->cv, &r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    Py_END_ALLOW_THREADS
    if (slot < 0) {
        if (err) {
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        Py_RETURN_NONE;
    }
    if (!note.has) return Py_BuildValue("inO", slot, n, Py_None);
    return Py_BuildValue("in(nOOnnnOOn)", slot, n, note.in.depth, note.in.in_string ? Py_True : Py_False,
                         note.in.escape ? Py_True : Py_False, note.found.last_comma, note.found.close,
                         note.out.depth, note.out.in_string ? Py_True : Py_False,
                         note.out.escape ? Py_True : Py_False, note.found.deep);
}

static PyObject *ra_start_cut(ReadAhead *r, PyObject *args) {
    SplitMachine m;
    if (!PyArg_ParseTuple(args, "nppn:start_cut", &m.depth, &m.in_string, &m.escape, &m.max_depth)) return NULL;
    if (!r->started) Py_RETURN_NONE;
    int again;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&r->mu);
    again = r->cut_on;
    if (!again) {
        r->cut_on = 1;
        r->cut_from = r->handed;
        r->scanned = 0;
        r->machine = m;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    Py_END_ALLOW_THREADS
    if (again) {
        PyErr_SetString(PyExc_RuntimeError, "ReadAhead: start_cut was called already");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *ra_close(ReadAhead *r, PyObject *unused) {
    stop_thread(r);
    Py_RETURN_NONE;
}

static PyMethodDef ra_methods[] = {
    {"next", (PyCFunction)ra_next, METH_NOARGS, "The next block: (buffer index, length, note) or None at the end."},
    {"start_cut", (PyCFunction)ra_start_cut, METH_VARARGS, "Scan the blocks not handed out yet from this state."},
    {"close", (PyCFunction)ra_close, METH_NOARGS, "Stop the thread and wait for it."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReadAheadType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tb_llmdiag.ingest.kineto._scan.ReadAhead",
    .tp_basicsize = sizeof(ReadAhead),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An uncompressed file read ahead, and cut, on a native thread (see _readahead.c).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ra_init,
    .tp_dealloc = (destructor)ra_dealloc,
    .tp_methods = ra_methods,
};

int add_read_ahead(PyObject *module) {
    if (PyType_Ready(&ReadAheadType) < 0) return -1;
    Py_INCREF(&ReadAheadType);
    if (PyModule_AddObject(module, "ReadAhead", (PyObject *)&ReadAheadType) < 0) {
        Py_DECREF(&ReadAheadType);
        return -1;
    }
    return 0;
}

#else /* no pthreads: the module has no ReadAhead and read_ahead.py reads ahead on a Python thread */
int add_read_ahead(PyObject *module) { return 0; }
#endif
