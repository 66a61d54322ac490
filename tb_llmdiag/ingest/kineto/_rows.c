/* Optional accelerator for columns._Columns._append_rows: one piece's scanned columns -> the model's
 * rows, in one fused pass instead of ~40 numpy passes (part of the _scan extension; see _scan.c).
 *
 * rows(ins, outs, name_flags, kind_bits, step_kind, origin_us, limit_us)
 *     -> (kept, lowest_us, no_ts, no_dur, negative_dur, out_of_range, device_rejected)
 *
 * ins        11 buffers of one piece's rows (layout._Scan): kind uint8, ts float64 us, dur float64 us
 *            (NaN: missing), name_id int32, tid, pid, correlation, stream, device, bytes int64, shape_id int32
 * outs       10 writable buffers of at least that many rows (the slab's next rows, _ROW_DTYPES): ts_ns,
 *            dur_ns int64, kind uint8, name_id int32, device int16, stream int32, tid, correlation, bytes
 *            int64, shape_id int32
 * name_flags bytes by name id (_Interner.flags): bit 2 = a ProfilerStep name
 * kind_bits  256 bytes by kind code: bit 1 = a device-side kind, bit 2 = a kind a step marker can have
 * origin_us  the whole-us origin of ts_ns; NaN: floor of this piece's lowest kept ts (the first piece)
 *
 * The same rows, values and counts as _append_rows' numpy path (tests/test_scan.py holds them equal): a row
 * with no finite ts is dropped (no_ts), else a device-side row with no duration (NaN: no_dur), else one with a
 * negative duration (negative_dur), else one whose |ts| or dur is beyond limit_us (out_of_range); how many of
 * the dropped rows were device-side (device_rejected); the tests are ingest/validate.py's; kept rows are written in order, ts_ns = rint((ts - origin) *
 * 1000), dur_ns = max(rint(dur * 1000), 0) (NaN -> 0), kind STEP where a step-capable kind has a step
 * name, and device, stream on device-side rows only (device: args' device, else pid; stream: args' stream,
 * else tid), tid on host rows only (-1 elsewhere); casts to the narrower out types wrap as numpy's do.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

#define N_IN 11
#define N_OUT 10
#define DEVICE_SIDE 1
#define STEP_CAPABLE 2
#define STEP_NAME 2

static const Py_ssize_t IN_SIZE[N_IN] = {1, 8, 8, 4, 8, 8, 8, 8, 8, 8, 4};
static const Py_ssize_t OUT_SIZE[N_OUT] = {8, 8, 1, 4, 2, 4, 8, 8, 8, 4};

/* why a row is rejected (ingest/validate.py): 0 kept, 1 no finite ts, 2 a device row without a duration,
 * 3 a negative duration, 4 |ts| or dur beyond limit */
static int rejected(double t, double d, int device, double limit) {
    if (!isfinite(t)) return 1;
    if (device && isnan(d)) return 2;
    if (d < 0) return 3;
    if (fabs(t) > limit || d > limit) return 4;
    return 0;
}

PyObject *rows(PyObject *self, PyObject *args) {
    PyObject *ins, *outs;
    Py_buffer flags, bits, in[N_IN], out[N_OUT];
    int step_kind, n_in = 0, n_out = 0, have_flags = 0, have_bits = 0;
    double origin, limit;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "O!O!y*y*idd:rows", &PyTuple_Type, &ins, &PyTuple_Type, &outs, &flags, &bits,
                          &step_kind, &origin, &limit))
        return NULL;
    have_flags = have_bits = 1;
    if (PyTuple_GET_SIZE(ins) != N_IN || PyTuple_GET_SIZE(outs) != N_OUT || bits.len != 256) {
        PyErr_SetString(PyExc_ValueError, "rows: 11 input columns, 10 output columns and 256 kind bits");
        goto done;
    }
    Py_ssize_t n = -1;
    for (; n_in < N_IN; n_in++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(ins, n_in), &in[n_in], PyBUF_C_CONTIGUOUS) < 0) goto done;
        Py_ssize_t len = in[n_in].len / IN_SIZE[n_in];
        if (in[n_in].len % IN_SIZE[n_in] || (n >= 0 && len != n)) {
            n_in++;
            PyErr_SetString(PyExc_ValueError, "rows: input columns of different lengths");
            goto done;
        }
        n = len;
    }
    for (; n_out < N_OUT; n_out++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(outs, n_out), &out[n_out], PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
            goto done;
        if (out[n_out].len < n * OUT_SIZE[n_out]) {
            n_out++;
            PyErr_SetString(PyExc_ValueError, "rows: an output column is shorter than the input");
            goto done;
        }
    }
    const uint8_t *kind = in[0].buf, *name_flags = flags.buf, *kind_bits = bits.buf;
    const double *ts = in[1].buf, *dur = in[2].buf;
    const int32_t *name_id = in[3].buf, *shape_id = in[10].buf;
    const int64_t *tid = in[4].buf, *pid = in[5].buf, *corr = in[6].buf, *stream = in[7].buf, *device = in[8].buf,
                  *nbytes = in[9].buf;
    int64_t *o_ts = out[0].buf, *o_dur = out[1].buf, *o_tid = out[6].buf, *o_corr = out[7].buf, *o_bytes = out[8].buf;
    uint8_t *o_kind = out[2].buf;
    int32_t *o_name = out[3].buf, *o_stream = out[5].buf, *o_shape = out[9].buf;
    int16_t *o_device = out[4].buf;
    Py_ssize_t no_ts = 0, no_dur = 0, negative = 0, outside = 0, device_rejected = 0, kept = 0;
    double lowest = INFINITY;
    for (Py_ssize_t i = 0; i < n; i++) { /* pass 1: which rows are kept, the lowest kept ts */
        double t = ts[i], d = dur[i];
        int dev = kind_bits[kind[i]] & DEVICE_SIDE;
        int why = rejected(t, d, dev, limit);
        if (why) {
            no_ts += why == 1;
            no_dur += why == 2;
            negative += why == 3;
            outside += why == 4;
            device_rejected += dev != 0;
        } else {
            kept++;
            if (t < lowest) lowest = t;
            if (name_id[i] < 0 || name_id[i] >= flags.len) {
                PyErr_SetString(PyExc_ValueError, "rows: a name id beyond name_flags");
                goto done;
            }
        }
    }
    if (kept) {
        if (isnan(origin)) origin = floor(lowest);
        Py_ssize_t r = 0;
        for (Py_ssize_t i = 0; i < n; i++) { /* pass 2: the kept rows, converted */
            double t = ts[i], d = dur[i];
            if (rejected(t, d, kind_bits[kind[i]] & DEVICE_SIDE, limit)) continue;
            double t_ns = (t - origin) * 1000.0, d_ns = d * 1000.0;
            o_ts[r] = (int64_t)rint(t_ns);
            o_dur[r] = (int64_t)fmax(rint(d_ns), 0.0);
            uint8_t k = kind[i];
            if ((kind_bits[k] & STEP_CAPABLE) && (name_flags[name_id[i]] & STEP_NAME)) k = (uint8_t)step_kind;
            o_kind[r] = k;
            int host = !(kind_bits[k] & DEVICE_SIDE);
            o_device[r] = (int16_t)(host ? -1 : device[i] >= 0 ? device[i] : pid[i]);
            o_stream[r] = (int32_t)(host ? -1 : stream[i] != -1 ? stream[i] : tid[i]);
            o_tid[r] = host ? tid[i] : -1;
            o_name[r] = name_id[i];
            o_corr[r] = corr[i];
            o_bytes[r] = nbytes[i];
            o_shape[r] = shape_id[i];
            r++;
        }
    }
    result = Py_BuildValue("ndnnnnn", kept, lowest, no_ts, no_dur, negative, outside, device_rejected);
done:
    for (int c = 0; c < n_in; c++) PyBuffer_Release(&in[c]);
    for (int c = 0; c < n_out; c++) PyBuffer_Release(&out[c]);
    if (have_flags) PyBuffer_Release(&flags);
    if (have_bits) PyBuffer_Release(&bits);
    return result;
}
