/* Optional accelerator for chrome_trace._Columns: one pass over a decoded piece of events.
 *
 * scan(events, x_types, instant_types, kind_of, names)
 *     -> (xs, kind, ts, dur, name_id, tid, mem)
 *
 * events         list of decoded msgspec Structs (chrome_trace._AnyEvent)
 * x_types        tuple of complete-event Struct types (chrome_trace._COMPLETE): their events become
 *                rows; they must keep their fields at the same offsets (a subclass retyping a field)
 * instant_types  tuple of instant Struct types: those named "[memory]" with args are returned in mem
 * kind_of        category -> kind code (a defaultdict: unseen categories go through __missing__)
 * names          name -> id (chrome_trace._Interner: unseen names go through __missing__)
 *
 * Rows whose kind is 255 (a skipped category) are dropped. kind/ts/dur/name_id/tid are bytearrays
 * holding uint8/float64/float64/int32/int64 values, one per row; xs is the list of the rows' events.
 * A column whose values are not all plain numbers is returned as None instead, and the caller
 * computes it in Python (strings in ts/dur, string thread ids): the same contract as the pure
 * Python _scan_py, which the tests hold this to.
 *
 * Struct fields are read at their slot offsets, found once per call from the types' member
 * descriptors, so the per-event work is pointer reads, two dict lookups and number conversions.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define SKIP_KIND 255

/* Byte offset of a member (slot) field of a type, or -1 (with an exception set). */
static Py_ssize_t slot_offset(PyObject *type, const char *field) {
    PyObject *descr = PyObject_GetAttrString(type, field);
    if (descr == NULL) return -1;
    if (!Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        Py_DECREF(descr);
        PyErr_Format(PyExc_TypeError, "field %s is not a slot", field);
        return -1;
    }
    PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
    Py_ssize_t offset = member->offset;
    int is_object = member->type == T_OBJECT_EX || member->type == T_OBJECT;
    Py_DECREF(descr);
    if (!is_object || offset <= 0) {
        PyErr_Format(PyExc_TypeError, "field %s is not an object slot", field);
        return -1;
    }
    return offset;
}

static inline PyObject *field(PyObject *obj, Py_ssize_t offset) {
    PyObject *value = *(PyObject **)((char *)obj + offset);
    return value == NULL ? Py_None : value;
}

/* A number as a double; 0 if it is not one (then *ok is cleared). None is NaN. */
static inline double as_double(PyObject *v, int *ok) {
    if (PyFloat_CheckExact(v)) return PyFloat_AS_DOUBLE(v);
    if (PyLong_CheckExact(v)) {
        double d = PyLong_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            *ok = 0;
        }
        return d;
    }
    if (v == Py_None) return NAN;
    *ok = 0;
    return 0.0;
}

/* dict[key] through __missing__ when absent (defaultdict, _Interner); the value as a C long. */
static inline int lookup(PyObject *dict, PyObject *key, long *out) {
    PyObject *value = PyDict_GetItemWithError(dict, key); /* borrowed */
    if (value != NULL) {
        *out = PyLong_AsLong(value);
        return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
    }
    if (PyErr_Occurred()) return -1;
    value = PyObject_GetItem(dict, key); /* new reference */
    if (value == NULL) return -1;
    *out = PyLong_AsLong(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *events, *x_types, *instant_types, *kind_of, *names;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:scan", &PyList_Type, &events, &PyTuple_Type, &x_types, &PyTuple_Type,
                          &instant_types, &PyDict_Type, &kind_of, &PyDict_Type, &names))
        return NULL;
    Py_ssize_t n_x = PyTuple_GET_SIZE(x_types), n_types = PyTuple_GET_SIZE(instant_types);
    if (n_x < 1 || n_x > 4 || n_types > 4) {
        PyErr_SetString(PyExc_ValueError, "1 to 4 complete-event types and at most 4 instant types");
        return NULL;
    }
    static const char *x_fields[5] = {"cat", "ts", "dur", "name", "tid"};
    Py_ssize_t off[5];
    PyTypeObject *x_type[4];
    for (Py_ssize_t k = 0; k < n_x; k++) {
        PyObject *t = PyTuple_GET_ITEM(x_types, k);
        if (!PyType_Check(t)) {
            PyErr_SetString(PyExc_TypeError, "x_types must hold types");
            return NULL;
        }
        x_type[k] = (PyTypeObject *)t;
        for (int f = 0; f < 5; f++) {
            Py_ssize_t o = slot_offset(t, x_fields[f]);
            if (o < 0) return NULL;
            if (k > 0 && o != off[f]) {
                PyErr_Format(PyExc_TypeError, "field %s is at different offsets in x_types", x_fields[f]);
                return NULL;
            }
            off[f] = o;
        }
    }
    Py_ssize_t off_cat = off[0], off_ts = off[1], off_dur = off[2], off_name = off[3], off_tid = off[4];
    PyTypeObject *inst_type[4];
    Py_ssize_t inst_name[4], inst_args[4];
    for (Py_ssize_t k = 0; k < n_types; k++) {
        PyObject *t = PyTuple_GET_ITEM(instant_types, k);
        if (!PyType_Check(t)) {
            PyErr_SetString(PyExc_TypeError, "instant_types must hold types");
            return NULL;
        }
        inst_type[k] = (PyTypeObject *)t;
        inst_name[k] = slot_offset(t, "name");
        inst_args[k] = slot_offset(t, "args");
        if (inst_name[k] < 0 || inst_args[k] < 0) return NULL;
    }

    Py_ssize_t n = PyList_GET_SIZE(events);
    PyObject *xs = PyList_New(0), *mem = PyList_New(0);
    PyObject *kind = PyByteArray_FromStringAndSize(NULL, n), *ts = PyByteArray_FromStringAndSize(NULL, n * 8),
             *dur = PyByteArray_FromStringAndSize(NULL, n * 8), *name_id = PyByteArray_FromStringAndSize(NULL, n * 4),
             *tid = PyByteArray_FromStringAndSize(NULL, n * 8);
    PyObject *result = NULL;
    if (!xs || !mem || !kind || !ts || !dur || !name_id || !tid) goto done;
    uint8_t *kind_p = (uint8_t *)PyByteArray_AS_STRING(kind);
    double *ts_p = (double *)PyByteArray_AS_STRING(ts), *dur_p = (double *)PyByteArray_AS_STRING(dur);
    int32_t *name_p = (int32_t *)PyByteArray_AS_STRING(name_id);
    int64_t *tid_p = (int64_t *)PyByteArray_AS_STRING(tid);
    int ts_ok = 1, dur_ok = 1, tid_ok = 1;
    Py_ssize_t rows = 0;

    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(events, i);
        PyTypeObject *t = Py_TYPE(e);
        int is_x = 0;
        for (Py_ssize_t k = 0; k < n_x; k++) is_x |= t == x_type[k];
        if (!is_x) {
            for (Py_ssize_t k = 0; k < n_types; k++) {
                if (t != inst_type[k]) continue;
                PyObject *name = field(e, inst_name[k]);
                if (field(e, inst_args[k]) != Py_None && PyUnicode_Check(name) &&
                    PyUnicode_CompareWithASCIIString(name, "[memory]") == 0 && PyList_Append(mem, e) < 0)
                    goto done;
                break;
            }
            continue;
        }
        long code, ident;
        if (lookup(kind_of, field(e, off_cat), &code) < 0) goto done;
        if (code == SKIP_KIND) continue;
        if (lookup(names, field(e, off_name), &ident) < 0) goto done;
        if (PyList_Append(xs, e) < 0) goto done;
        kind_p[rows] = (uint8_t)code;
        name_p[rows] = (int32_t)ident;
        ts_p[rows] = as_double(field(e, off_ts), &ts_ok);
        dur_p[rows] = as_double(field(e, off_dur), &dur_ok);
        PyObject *tv = field(e, off_tid);
        if (PyLong_CheckExact(tv)) {
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(tv, &overflow);
            if (overflow || (v == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                tid_ok = 0;
            }
            tid_p[rows] = v;
        } else if (tv == Py_None) {
            tid_p[rows] = -1;
        } else {
            tid_ok = 0;
        }
        rows++;
    }
    if (PyByteArray_Resize(kind, rows) < 0 || PyByteArray_Resize(ts, rows * 8) < 0 ||
        PyByteArray_Resize(dur, rows * 8) < 0 || PyByteArray_Resize(name_id, rows * 4) < 0 ||
        PyByteArray_Resize(tid, rows * 8) < 0)
        goto done;
    result = Py_BuildValue("(OOOOOOO)", xs, kind, ts_ok ? ts : Py_None, dur_ok ? dur : Py_None, name_id,
                           tid_ok ? tid : Py_None, mem);
done:
    Py_XDECREF(xs);
    Py_XDECREF(mem);
    Py_XDECREF(kind);
    Py_XDECREF(ts);
    Py_XDECREF(dur);
    Py_XDECREF(name_id);
    Py_XDECREF(tid);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "One pass over a decoded piece of events: rows' columns and memory samples."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "Optional accelerator for chrome_trace.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
