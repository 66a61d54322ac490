/* Optional accelerator for columns._Columns.scan: one pass over a decoded piece of events.
 *
 * scan(events, x_types, instant_types, flow_types, args_type, mem_args_type, kind_of, names, name_flags, shapes,
 *      row_args)
 *     -> (xs, columns, mem, mem_columns, flows, flow_columns)
 *
 * events         list of decoded msgspec Structs (structs._AnyEvent)
 * x_types        tuple of complete-event Struct types (structs._COMPLETE): their events become
 *                rows; they must keep their fields at the same offsets (a subclass retyping a field)
 * instant_types  tuple of instant Struct types: those named "[memory]" with args are returned in mem
 * flow_types     tuple of flow Struct types, (start, end) pairs (structs.FLOW_TYPES): those whose cat is
 *                "fwdbwd" are kept, in order (flows lists them only when a column is left to Python, else
 *                it is empty); a type at an odd index is a flow's end
 * args_type      the Struct type of a complete event's args (structs._Args)
 * mem_args_type  the Struct type of a memory sample's args (structs._MemoryArgs)
 * kind_of        category -> kind code (a defaultdict: unseen categories go through __missing__)
 * names          name -> id (values._Interner: unseen names go through __missing__)
 * name_flags     bytearray, by name id (names.flags): bit 1 = keep the operator's Input Dims
 * shapes         Input Dims text (bytes) -> id; new shapes are added with the next id
 * row_args       256 bytes, by kind code: bit 1 = a device row (its args' correlation, stream, device
 *                and bytes, and its pid, are read), bit 2 = a launch row (its args' correlation)
 *
 * Rows whose kind is 255 (a skipped category) are dropped. xs is the list of the rows' events and
 * columns a dict of bytearrays, one value per row: kind (uint8), ts and dur (float64, None -> NaN),
 * name_id (int32), tid, pid, correlation, stream, device, bytes (int64, None -> -1; -1 where a row
 * does not carry the field), shape_id (int32: the id of args' Input Dims for CPU_OP rows (kind 0)
 * whose name has flag bit 1 and whose Input Dims are not empty, else -1). A column whose values are not all plain numbers is left out of the dict
 * and the caller computes it in Python (strings in ts, "stream 7" streams...): the contract of the
 * pure Python _Columns.scan_py, which the tests hold this to. mem_columns does the same for the
 * memory samples in mem: ts (float64), device_type, device_id, bytes, total_allocated and
 * total_reserved (int64, from their args). flow_columns does the same for the fwdbwd flows: ts (float64),
 * tid and id (int64, None -> -1) and end (uint8: 1 for a flow's end).
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

#include "_scan.h"

#define SKIP_KIND 255
#define DEVICE_ROW 1
#define LAUNCH_ROW 2
#define MAX_TYPES 4
#define CPU_OP_KIND 0
#define SHAPE_NAME 1

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

/* The offsets of `fields` in every type of `types` (a tuple), which must agree; 0 or -1 on error. */
static int offsets_of(PyObject *types, const char *const *fields, int n_fields, PyTypeObject **type_out,
                      Py_ssize_t *off_out) {
    Py_ssize_t n = PyTuple_GET_SIZE(types);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *t = PyTuple_GET_ITEM(types, k);
        if (!PyType_Check(t)) {
            PyErr_SetString(PyExc_TypeError, "expected a tuple of types");
            return -1;
        }
        type_out[k] = (PyTypeObject *)t;
        for (int f = 0; f < n_fields; f++) {
            Py_ssize_t o = slot_offset(t, fields[f]);
            if (o < 0) return -1;
            if (k > 0 && o != off_out[f]) {
                PyErr_Format(PyExc_TypeError, "field %s is at different offsets in the types", fields[f]);
                return -1;
            }
            off_out[f] = o;
        }
    }
    return 0;
}

static inline PyObject *field(PyObject *obj, Py_ssize_t offset) {
    PyObject *value = *(PyObject **)((char *)obj + offset);
    return value == NULL ? Py_None : value;
}

/* A number as a double; None is NaN; anything else clears *ok. */
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
    if (v != Py_None) *ok = 0;
    return NAN;
}

/* An int as int64; None is -1; anything else (or an int beyond int64) clears *ok. */
static inline int64_t as_int(PyObject *v, int *ok) {
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            *ok = 0;
        }
        return x;
    }
    if (v != Py_None) *ok = 0;
    return -1;
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

/* A direct-mapped cache in front of `lookup` for str keys, for one scan call: a piece repeats a few
 * hundred names and categories thousands of times, each a new str object whose hash Python would
 * compute (SipHash over the whole text) before the dict probe. Here a hit costs a cheap hash of the
 * length and the first and last 8 bytes plus one memcmp. Keys are borrowed from the events, which the
 * events list keeps alive for the whole call; misses go to the dict (and its __missing__). */
#define CACHE_SLOTS 1024
typedef struct {
    PyObject *key[CACHE_SLOTS];
    long value[CACHE_SLOTS];
} str_cache;

static inline int cached_lookup(str_cache *cache, PyObject *dict, PyObject *key, long *out) {
    if (!PyUnicode_CheckExact(key) || !PyUnicode_IS_READY(key)) return lookup(dict, key, out);
    Py_ssize_t len = PyUnicode_GET_LENGTH(key);
    int kind = PyUnicode_KIND(key);
    const unsigned char *data = PyUnicode_DATA(key);
    Py_ssize_t nbytes = len * kind;
    uint64_t head = 0, tail = 0;
    memcpy(&head, data, nbytes < 8 ? nbytes : 8);
    if (nbytes > 8) memcpy(&tail, data + nbytes - 8, 8);
    uint64_t h = (head * 0x9E3779B97F4A7C15ULL) ^ (tail * 0xC2B2AE3D27D4EB4FULL) ^ ((uint64_t)nbytes << 7) ^ (uint64_t)kind;
    h ^= h >> 29;
    size_t slot = (size_t)(h * 0x94D049BB133111EBULL >> 54) & (CACHE_SLOTS - 1);
    PyObject *k = cache->key[slot];
    if (k != NULL && (k == key || (PyUnicode_GET_LENGTH(k) == len && PyUnicode_KIND(k) == kind &&
                                   memcmp(PyUnicode_DATA(k), data, nbytes) == 0))) {
        *out = cache->value[slot];
        return 0;
    }
    if (lookup(dict, key, out) < 0) return -1;
    cache->key[slot] = key;
    cache->value[slot] = *out;
    return 0;
}

enum { C_KIND, C_TS, C_DUR, C_NAME, C_TID, C_PID, C_CORR, C_STREAM, C_DEVICE, C_BYTES, C_SHAPE, N_COLS };
static const char *const COL_NAMES[N_COLS] = {"kind", "ts",     "dur",    "name_id", "tid",     "pid",
                                              "correlation", "stream", "device", "bytes", "shape_id"};
static const Py_ssize_t COL_SIZE[N_COLS] = {1, 8, 8, 4, 8, 8, 8, 8, 8, 8, 4};

/* The id of a shape (Input Dims JSON text, a msgspec.Raw or any buffer) in `shapes`, added if new;
 * -1 for an empty one, -3 if dims is not a buffer, -2 on error. */
static int32_t shape_id(PyObject *shapes, PyObject *dims) {
    Py_buffer view;
    if (!PyObject_CheckBuffer(dims)) return -3;
    if (PyObject_GetBuffer(dims, &view, PyBUF_SIMPLE) < 0) return -2;
    if (view.len == 0) {
        PyBuffer_Release(&view);
        return -1;
    }
    PyObject *key = PyBytes_FromStringAndSize(view.buf, view.len);
    PyBuffer_Release(&view);
    if (key == NULL) return -2;
    long ident;
    PyObject *found = PyDict_GetItemWithError(shapes, key); /* borrowed */
    if (found != NULL) {
        ident = PyLong_AsLong(found);
    } else if (PyErr_Occurred()) {
        ident = -2;
    } else {
        ident = (long)PyDict_GET_SIZE(shapes);
        PyObject *value = PyLong_FromLong(ident);
        if (value == NULL || PyDict_SetItem(shapes, key, value) < 0) ident = -2;
        Py_XDECREF(value);
    }
    Py_DECREF(key);
    return ident < 0 || ident > INT32_MAX ? -2 : (int32_t)ident;
}

enum { F_TS, F_TID, F_ID, F_END, N_FLOW };
static const char *const FLOW_NAMES[N_FLOW] = {"ts", "tid", "id", "end"};
static const Py_ssize_t FLOW_SIZE[N_FLOW] = {8, 8, 8, 1};
#define FWDBWD "fwdbwd"

/* Whether a flow's category is exactly "fwdbwd" (Kineto's forward-backward link; its launch flows are "ac2g"). */
static inline int is_fwdbwd(PyObject *cat) {
    return PyUnicode_CheckExact(cat) && PyUnicode_IS_READY(cat) && PyUnicode_GET_LENGTH(cat) == 6 &&
           PyUnicode_KIND(cat) == PyUnicode_1BYTE_KIND && memcmp(PyUnicode_DATA(cat), FWDBWD, 6) == 0;
}

enum { M_TS, M_DEVICE_TYPE, M_DEVICE_ID, M_BYTES, M_ALLOCATED, M_RESERVED, N_MEM };
static const char *const MEM_NAMES[N_MEM] = {"ts", "device_type", "device_id", "bytes", "total_allocated",
                                             "total_reserved"};
/* the fields of the memory args Struct, in MEM_NAMES' order after ts */
static const char *const MEM_ARGS_FIELDS[N_MEM - 1] = {"device_type", "device_id", "mem_bytes", "total_allocated",
                                                       "total_reserved"};

/* Append one value to a growing bytearray column. */
static inline int append(PyObject *col, const void *value, Py_ssize_t size) {
    Py_ssize_t len = PyByteArray_GET_SIZE(col);
    if (PyByteArray_Resize(col, len + size) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(col) + len, value, size);
    return 0;
}

/* Move the complete columns (ok[c]) into a new dict under their names. */
static PyObject *column_dict(PyObject **cols, const int *ok, const char *const *names, int n) {
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    for (int c = 0; c < n; c++) {
        if (ok[c] && PyDict_SetItemString(d, names[c], cols[c]) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *events, *x_types, *instant_types, *flow_types, *args_type, *mem_args_type, *kind_of, *names, *name_flags,
        *shapes;
    Py_buffer row_args;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!O!O!O!y*:scan", &PyList_Type, &events, &PyTuple_Type, &x_types,
                          &PyTuple_Type, &instant_types, &PyTuple_Type, &flow_types, &PyType_Type, &args_type,
                          &PyType_Type, &mem_args_type, &PyDict_Type, &kind_of, &PyDict_Type, &names,
                          &PyByteArray_Type, &name_flags, &PyDict_Type, &shapes, &row_args))
        return NULL;
    PyObject *xs = NULL, *mem = NULL, *flows = NULL, *columns = NULL, *mem_columns = NULL, *flow_columns = NULL,
             *result = NULL;
    PyObject *col[N_COLS] = {NULL}, *mcol[N_MEM] = {NULL}, *fcol[N_FLOW] = {NULL};
    str_cache *cat_cache = NULL, *name_cache = NULL;
    int mok[N_MEM], fok[N_FLOW];
    if (row_args.len != 256) {
        PyErr_SetString(PyExc_ValueError, "row_args must hold 256 bytes");
        goto done;
    }
    const uint8_t *row_flags = (const uint8_t *)row_args.buf;
    Py_ssize_t n_x = PyTuple_GET_SIZE(x_types), n_inst = PyTuple_GET_SIZE(instant_types),
               n_flow = PyTuple_GET_SIZE(flow_types);
    if (n_x < 1 || n_x > MAX_TYPES || n_inst > MAX_TYPES || n_flow > MAX_TYPES || n_flow % 2) {
        PyErr_SetString(PyExc_ValueError, "1 to 4 complete-event types, at most 4 instant types and 4 flow types");
        goto done;
    }
    static const char *const x_fields[7] = {"cat", "ts", "dur", "name", "tid", "pid", "args"};
    static const char *const inst_fields[3] = {"name", "args", "ts"};
    static const char *const args_fields[5] = {"correlation", "stream", "device", "bytes", "input_dims"};
    static const char *const flow_fields[4] = {"cat", "ts", "tid", "id"};
    PyTypeObject *x_type[MAX_TYPES], *inst_type[MAX_TYPES], *f_type[MAX_TYPES], *a_type[1], *ma_type[1];
    Py_ssize_t xo[7], io[3] = {0, 0, 0}, fo[4], ao[5], mo[N_MEM - 1];
    PyObject *a_types = PyTuple_Pack(1, args_type), *ma_types = PyTuple_Pack(1, mem_args_type);
    int bad = a_types == NULL || ma_types == NULL || offsets_of(x_types, x_fields, 7, x_type, xo) < 0 ||
              offsets_of(instant_types, inst_fields, 3, inst_type, io) < 0 ||
              offsets_of(flow_types, flow_fields, 4, f_type, fo) < 0 ||
              offsets_of(a_types, args_fields, 5, a_type, ao) < 0 ||
              offsets_of(ma_types, MEM_ARGS_FIELDS, N_MEM - 1, ma_type, mo) < 0;
    Py_XDECREF(a_types);
    Py_XDECREF(ma_types);
    if (bad) goto done;

    Py_ssize_t n = PyList_GET_SIZE(events);
    void *p[N_COLS];
    int ok[N_COLS];
    xs = PyList_New(0);
    mem = PyList_New(0);
    flows = PyList_New(0);
    if (!xs || !mem || !flows) goto done;
    for (int c = 0; c < N_COLS; c++) {
        col[c] = PyByteArray_FromStringAndSize(NULL, n * COL_SIZE[c]);
        if (col[c] == NULL) goto done;
        p[c] = PyByteArray_AS_STRING(col[c]);
        ok[c] = 1;
    }
    for (int c = 0; c < N_MEM; c++) {
        mcol[c] = PyByteArray_FromStringAndSize(NULL, 0);
        if (mcol[c] == NULL) goto done;
        mok[c] = 1;
    }
    for (int c = 0; c < N_FLOW; c++) {
        fcol[c] = PyByteArray_FromStringAndSize(NULL, n * FLOW_SIZE[c]);
        if (fcol[c] == NULL) goto done;
        fok[c] = 1;
    }
    double *fts_p = (double *)PyByteArray_AS_STRING(fcol[F_TS]);
    int64_t *ftid_p = (int64_t *)PyByteArray_AS_STRING(fcol[F_TID]), *fid_p = (int64_t *)PyByteArray_AS_STRING(fcol[F_ID]);
    uint8_t *fend_p = (uint8_t *)PyByteArray_AS_STRING(fcol[F_END]);
    Py_ssize_t n_flows = 0;
    uint8_t *kind_p = p[C_KIND];
    double *ts_p = p[C_TS], *dur_p = p[C_DUR];
    int32_t *name_p = p[C_NAME];
    int64_t *tid_p = p[C_TID], *pid_p = p[C_PID], *corr_p = p[C_CORR], *stream_p = p[C_STREAM],
            *device_p = p[C_DEVICE], *bytes_p = p[C_BYTES];
    int32_t *shape_p = p[C_SHAPE];
    Py_ssize_t rows = 0;
    cat_cache = PyMem_Calloc(1, sizeof(str_cache));
    name_cache = PyMem_Calloc(1, sizeof(str_cache));
    if (cat_cache == NULL || name_cache == NULL) {
        PyErr_NoMemory();
        goto done;
    }

    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *e = PyList_GET_ITEM(events, i);
        PyTypeObject *t = Py_TYPE(e);
        int is_x = 0;
        for (Py_ssize_t k = 0; k < n_x; k++) is_x |= t == x_type[k];
        int flow = -1;
        for (Py_ssize_t k = 0; k < n_flow && !is_x; k++)
            if (t == f_type[k]) flow = (int)k;
        if (flow >= 0) {
            if (!is_fwdbwd(field(e, fo[0]))) continue; /* a launch flow (ac2g) */
            fts_p[n_flows] = as_double(field(e, fo[1]), &fok[F_TS]);
            ftid_p[n_flows] = as_int(field(e, fo[2]), &fok[F_TID]);
            fid_p[n_flows] = as_int(field(e, fo[3]), &fok[F_ID]);
            fend_p[n_flows++] = flow & 1;
            continue;
        }
        if (!is_x) {
            for (Py_ssize_t k = 0; k < n_inst; k++) {
                if (t != inst_type[k]) continue;
                PyObject *name = field(e, io[0]), *a = field(e, io[1]);
                if (a == Py_None || !PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, "[memory]") != 0)
                    break;
                if (PyList_Append(mem, e) < 0) goto done;
                double ts = as_double(field(e, io[2]), &mok[M_TS]);
                if (append(mcol[M_TS], &ts, 8) < 0) goto done;
                int typed = Py_TYPE(a) == ma_type[0];
                for (int c = 1; c < N_MEM; c++) {
                    int64_t v = -1;
                    if (typed)
                        v = as_int(field(a, mo[c - 1]), &mok[c]);
                    else
                        mok[c] = 0;
                    if (append(mcol[c], &v, 8) < 0) goto done;
                }
                break;
            }
            continue;
        }
        long code, ident;
        if (cached_lookup(cat_cache, kind_of, field(e, xo[0]), &code) < 0) goto done;
        if (code == SKIP_KIND) continue;
        if (code < 0 || code > 255) {
            PyErr_SetString(PyExc_ValueError, "kind codes must be 0..255");
            goto done;
        }
        if (cached_lookup(name_cache, names, field(e, xo[3]), &ident) < 0) goto done;
        if (PyList_Append(xs, e) < 0) goto done;
        kind_p[rows] = (uint8_t)code;
        name_p[rows] = (int32_t)ident;
        ts_p[rows] = as_double(field(e, xo[1]), &ok[C_TS]);
        dur_p[rows] = as_double(field(e, xo[2]), &ok[C_DUR]);
        tid_p[rows] = as_int(field(e, xo[4]), &ok[C_TID]);
        uint8_t flags = row_flags[code];
        pid_p[rows] = corr_p[rows] = stream_p[rows] = device_p[rows] = bytes_p[rows] = -1;
        shape_p[rows] = -1;
        if (code == CPU_OP_KIND) {
            if (ident >= PyByteArray_GET_SIZE(name_flags)) {
                PyErr_SetString(PyExc_ValueError, "name_flags is shorter than the names");
                goto done;
            }
            if (((uint8_t *)PyByteArray_AS_STRING(name_flags))[ident] & SHAPE_NAME) {
                PyObject *a = field(e, xo[6]);
                if (a != Py_None && Py_TYPE(a) != a_type[0]) {
                    ok[C_SHAPE] = 0;
                } else if (a != Py_None) {
                    int32_t sid = shape_id(shapes, field(a, ao[4]));
                    if (sid == -2) goto done;
                    if (sid == -3) ok[C_SHAPE] = 0; /* not the Raw text it should be: Python reads it */
                    shape_p[rows] = sid < 0 ? -1 : sid;
                }
            }
        }
        if (flags) {
            PyObject *a = field(e, xo[6]);
            int args_ok = a == Py_None || Py_TYPE(a) == a_type[0];
            if (!args_ok) { /* not the expected args Struct: Python reads these columns */
                ok[C_CORR] = 0;
                if (flags & DEVICE_ROW) ok[C_STREAM] = ok[C_DEVICE] = ok[C_BYTES] = 0;
            } else if (a != Py_None) {
                corr_p[rows] = as_int(field(a, ao[0]), &ok[C_CORR]);
                if (flags & DEVICE_ROW) {
                    stream_p[rows] = as_int(field(a, ao[1]), &ok[C_STREAM]);
                    device_p[rows] = as_int(field(a, ao[2]), &ok[C_DEVICE]);
                    bytes_p[rows] = as_int(field(a, ao[3]), &ok[C_BYTES]);
                }
            }
            if (flags & DEVICE_ROW) pid_p[rows] = as_int(field(e, xo[5]), &ok[C_PID]);
        }
        rows++;
    }
    for (int c = 0; c < N_COLS; c++)
        if (PyByteArray_Resize(col[c], rows * COL_SIZE[c]) < 0) goto done;
    for (int c = 0; c < N_FLOW; c++)
        if (PyByteArray_Resize(fcol[c], n_flows * FLOW_SIZE[c]) < 0) goto done;
    if (n_flows && !(fok[F_TS] && fok[F_TID] && fok[F_ID])) { /* Python reads those columns: list the flows */
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *e = PyList_GET_ITEM(events, i);
            for (Py_ssize_t k = 0; k < n_flow; k++)
                if (Py_TYPE(e) == f_type[k] && is_fwdbwd(field(e, fo[0])) && PyList_Append(flows, e) < 0) goto done;
        }
    }
    columns = column_dict(col, ok, COL_NAMES, N_COLS);
    mem_columns = column_dict(mcol, mok, MEM_NAMES, N_MEM);
    flow_columns = column_dict(fcol, fok, FLOW_NAMES, N_FLOW);
    if (columns == NULL || mem_columns == NULL || flow_columns == NULL) goto done;
    result = PyTuple_Pack(6, xs, columns, mem, mem_columns, flows, flow_columns);
done:
    PyMem_Free(cat_cache);
    PyMem_Free(name_cache);
    PyBuffer_Release(&row_args);
    Py_XDECREF(xs);
    Py_XDECREF(mem);
    Py_XDECREF(columns);
    Py_XDECREF(mem_columns);
    Py_XDECREF(flows);
    Py_XDECREF(flow_columns);
    for (int c = 0; c < N_COLS; c++) Py_XDECREF(col[c]);
    for (int c = 0; c < N_MEM; c++) Py_XDECREF(mcol[c]);
    for (int c = 0; c < N_FLOW; c++) Py_XDECREF(fcol[c]);
    return result;
}


/* split(buf, start, end, depth, in_string, escape, max_depth)
 *     -> (last_comma, close, depth, in_string, escape, deep)
 *
 * One pass of a JSON string/escape/depth state machine over buf[start:end], resumable: the state after
 * the bytes seen so far goes in and comes out. `depth` counts the open brackets ([ and {) outside
 * strings; the caller starts it at 1 just inside the traceEvents array, so a comma at depth 1 is a
 * boundary between two events. A backslash flips `escape` wherever it is and any other byte clears it;
 * a double quote that is not escaped flips `in_string`. Returns the position of the last boundary comma
 * (-1 if none), of the bracket that takes depth from 1 to 0, i.e. closes the array (-1 if none; the scan
 * stops there), the state after the last byte scanned, and the first position where depth goes above
 * max_depth (-1 if none; the scan stops there too). split.split_py does the same in numpy. */
enum { C_NONE, C_QUOTE, C_BACKSLASH, C_OPEN, C_CLOSE, C_COMMA };
static unsigned char SPLIT_CLASS[256]; /* byte -> C_* (filled in PyInit__scan) */

/* The machine over b[start:end] from *m (updated to the state after the last byte scanned); the found
 * positions (-1: none) in *f. No Python object is touched: it runs without the GIL (split, _readahead.c). */
void split_scan(const unsigned char *b, Py_ssize_t start, Py_ssize_t end, SplitMachine *m, SplitFound *f) {
    Py_ssize_t depth = m->depth, max_depth = m->max_depth, i = start;
    int in_string = m->in_string, escape = m->escape;
    f->last_comma = f->close = f->deep = -1;
    if (escape && i < end) { /* the carried escape applies to the first byte */
        escape = 0;
        if (b[i] == '"' || b[i] == '\\') i++; /* an escaped quote, or the second of a backslash pair */
    }
    while (i < end) {
        if (in_string) {
            /* to the next quote or backslash; a backslash escapes the byte after it */
            while (i < end && b[i] != '"' && b[i] != '\\') i++;
            if (i >= end) break;
            if (b[i] == '"') {
                in_string = 0;
                i++;
            } else if (i + 1 < end) {
                i += 2;
            } else {
                escape = 1;
                i++;
                break;
            }
            continue;
        }
        while (i < end && !SPLIT_CLASS[b[i]]) i++; /* bytes that change nothing outside strings */
        if (i >= end) break;
        unsigned char c = SPLIT_CLASS[b[i]];
        if (c == C_QUOTE) {
            in_string = 1;
            i++;
        } else if (c == C_BACKSLASH) { /* outside a string (invalid JSON): the same escape rule */
            Py_ssize_t k = i;
            while (k < end && b[k] == '\\') k++;
            int odd = (k - i) & 1;
            i = k;
            if (odd) {
                if (i >= end) {
                    escape = 1;
                    break;
                }
                if (b[i] == '"') i++; /* escaped: not a string's start */
            }
        } else if (c == C_OPEN) {
            if (++depth > max_depth) {
                f->deep = i;
                break;
            }
            i++;
        } else if (c == C_CLOSE) {
            if (--depth == 0) {
                f->close = i;
                break;
            }
            i++;
        } else { /* a comma */
            if (depth == 1) f->last_comma = i;
            i++;
        }
    }
    m->depth = depth;
    m->in_string = in_string;
    m->escape = escape;
}

static PyObject *split(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end;
    SplitMachine m;
    SplitFound f;
    if (!PyArg_ParseTuple(args, "y*nnnppn:split", &view, &start, &end, &m.depth, &m.in_string, &m.escape,
                          &m.max_depth))
        return NULL;
    if (start < 0 || end > view.len || start > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "start/end outside the buffer");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    split_scan((const unsigned char *)view.buf, start, end, &m, &f);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return Py_BuildValue("nnnOOn", f.last_comma, f.close, m.depth, m.in_string ? Py_True : Py_False,
                         m.escape ? Py_True : Py_False, f.deep);
}

PyObject *rows(PyObject *self, PyObject *args); /* _rows.c */
int add_read_ahead(PyObject *module);             /* _readahead.c */

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "One pass over a decoded piece of events: the rows' columns and memory samples."},
    {"rows", rows, METH_VARARGS, "One piece's scanned columns -> the model's rows (see _rows.c)."},
    {"split", split, METH_VARARGS, "Resumable JSON depth scan: the last event boundary and the array's end."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "Optional accelerator for the Kineto reader.", -1,
                                    methods};

/* Bumped whenever scan's or rows' arguments or results change; the reader ignores a build of another version
 * (a stale in-place build) and reads in Python instead. */
#define SCAN_ABI 7

PyMODINIT_FUNC PyInit__scan(void) {
    SPLIT_CLASS['"'] = C_QUOTE;
    SPLIT_CLASS['\\'] = C_BACKSLASH;
    SPLIT_CLASS['['] = SPLIT_CLASS['{'] = C_OPEN;
    SPLIT_CLASS[']'] = SPLIT_CLASS['}'] = C_CLOSE;
    SPLIT_CLASS[','] = C_COMMA;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddIntConstant(m, "ABI", SCAN_ABI) < 0 || add_read_ahead(m) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
