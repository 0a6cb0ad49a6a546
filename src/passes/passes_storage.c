// Reduced-precision storage (see passes.h, pass_store_reduced): under `--precision fp16` / `bf16`
// on the CUDA target every float32 tensor of the primitive graph - activations and constant
// weights alike - is retyped to float16 / bfloat16, so every kernel moves half the bytes and the
// library calls (cuBLASLt, cuDNN) run their native half-input paths, as TensorRT does with --fp16.
// The model keeps its interface: graph inputs and outputs stay float32, as do the tensors an
// OPAQUE primitive (an ONNX op run as it is) reads or writes. Sums stay float32 too (see
// sum_like): a SUM / MEAN / PROD reduction reads its half input directly and writes
// float32, and an elementwise value read only by such reductions (a variance's squares) is
// computed and kept in float32 - but for a softmax's denominator, which cannot overflow.
//
// Where the types meet:
//   ELEMWISE  reads inputs of any dtype (each value converts on load), so it needs no cast.
//             Where its result becomes half it computes in half (each instruction rounded: the
//             ONNX semantics of the op on half tensors, and the form the kernel classes' pattern
//             matchers know: a bias add, an activation) - unless it reads a float32 tensor (a
//             variance, a sum): then its arithmetic stays float32 and a CAST instruction appended
//             to its program rounds the result (in half a large variance would overflow).
//   LAYOUT, LINEAR, MIN/MAX/ARG REDUCE  read and write one dtype: a float32 input gets a half
//             twin made by a CAST primitive (one per tensor, shared by its readers), and a
//             float32 output is written as a half tensor and cast back.
//   SUM/MEAN/PROD REDUCE  reads its input as stored (half or float32) and writes float32 (the
//             interpreter and the kernels accumulate wide and convert once on store).
// Semantics after the pass are those of the half model (prim_interp rounds every float16 value),
// which the compile driver's checks compare with.
//
// Range (float16 only): a tensor whose float32 values float16 cannot hold - a |value| past
// 65504 / 64, or a largest |value| under 2^-11, whose values would become subnormals or zeros -
// stays float32 with the layouts and products touching it (storage_range_wide: the wide set). What
// storage still moves the outputs by is storage_deviation, from the float32 model's outputs; the
// driver refuses half storage past STORAGE_DEVIATION_LIMIT rather than emit an artefact whose
// outputs lost their values while agreeing with a half reference that lost them too.
#include "passes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A new primitive CAST(src) -> dst (one instruction); appended to pg->prims (the caller orders).
static Prim *add_cast(PrimGraph *pg, int src, int dst, const char *origin) {
    Prim *p = pg_add_prim(pg, PRIM_ELEMWISE, 1, 1, origin);
    p->in[0] = src;
    p->out[0] = dst;
    EwInstr ins = {.op = EW_CAST, .dtype = pg->tensors[dst]->dtype};
    ins.arg[0].src = EWS_INPUT;
    ins.arg[0].index = 0;
    p->ew.n = 1;
    p->ew.code = arena_memdup(pg->arena, &ins, sizeof ins);
    return p;
}

// A value tensor of t's shape in dtype `to`, named after it.
static int twin_tensor(PrimGraph *pg, int t, DType to) {
    const Tensor *src = pg->tensors[t];
    char name[256];
    snprintf(name, sizeof name, "%s.%s", src->name, to == DT_FLOAT16 ? "f16" : "bf16");
    int64_t dims[ORCH_MAX_RANK];
    memcpy(dims, src->dims, sizeof(int64_t) * (size_t)src->rank);
    return pg_add_tensor(pg, name, to, src->rank, dims)->id;
}

// Converts constant t's float32 data to `to` (round to nearest even), as owned data.
static void convert_const(PrimGraph *pg, int t, DType to) {
    Tensor *T = pg->tensors[t];
    int64_t n = tensor_numel(T);
    const float *old = T->data;
    uint16_t *h = xmalloc(sizeof(uint16_t) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        elem_set_f64(to, h, i, old ? old[i] : 0.0);
    if (pg->owns_data[t])
        free(T->data);
    T->data = h;
    T->dtype = to;
    pg->owns_data[t] = true;
}

// A softmax's denominator: a SUM of exp(x - max(x)) over fewer than 65504 terms, each in (0, 1],
// so its half result cannot overflow (and it accumulates wide in every kernel): it keeps the
// half form the fused-attention matcher knows. p is a SUM reduction.
static bool softmax_sum(const PrimGraph *pg, const Prim *p) {
    const Tensor *in = pg->tensors[p->in[0]];
    int64_t n = 1;
    for (int d = 0; d < in->rank; d++)
        if (p->red.axes >> d & 1)
            n *= in->dims[d];
    if (p->red.op != RED_SUM || n >= 65504 || in->producer < 0)
        return false;
    const Prim *q = pg->prims[in->producer];
    if (q->kind != PRIM_ELEMWISE || q->ew.n < 1 || q->ew.code[q->ew.n - 1].op != EW_EXP)
        return false;
    for (int j = 0; j < q->n_in; j++) {
        const Tensor *m = pg->tensors[q->in[j]];
        if (m->producer >= 0 && pg->prims[m->producer]->kind == PRIM_REDUCE &&
            pg->prims[m->producer]->red.op == RED_MAX)
            return true;
    }
    return false;
}

// Sums of many values (SUM, MEAN, PROD reductions) are computed in float32, as PyTorch and
// TensorRT compute normalisations: in half a variance's x*x overflows past |x| = 256 and a sum
// of many terms past 65504. A softmax's denominator is the exception (softmax_sum).
static bool sum_like(const PrimGraph *pg, const Prim *p) {
    return p->kind == PRIM_REDUCE &&
           (p->red.op == RED_SUM || p->red.op == RED_MEAN || p->red.op == RED_PROD) &&
           !softmax_sum(pg, p);
}

double storage_f16_peak(const PrimGraph *pg, void *const *values, int *tensor) {
    double peak = 0;
    *tensor = -1;
    for (int t = 0; t < pg->n_tensors; t++) {
        const Tensor *T = pg->tensors[t];
        const void *v = T->kind == TK_CONST ? T->data : values[t];
        if (T->dtype != DT_FLOAT16 || !v)
            continue;
        int64_t n = tensor_numel(T);
        for (int64_t i = 0; i < n; i++) {
            double a = fabs((double)f16_to_f32(((const uint16_t *)v)[i]));
            if (a > peak) { // NaN never is
                peak = a;
                *tensor = t;
            }
        }
    }
    return peak;
}

// float16's range from below. A normal float16 value rounds with a relative error of at most
// 2^-11; one under 2^-14 (the smallest normal) becomes a subnormal, spaced 2^-24 apart, and rounds
// with an absolute error of up to 2^-25, so relative to a tensor's largest |value| M its subnormals
// lose up to 2^-25 / M. That is within ordinary rounding (2^-11 M) exactly when M >= 2^-14: a
// tensor whose largest value is normal loses nothing beyond rounding. Below, the loss grows (2^-5
// of M at M = 2^-20; under 2^-25 everything flushes to zero, as torchvision's MobileNetV2 with its
// default initialisation did, outputs near 3e-9). STORAGE_F16_LOW = 2^-11 leaves a factor 8 over
// 2^-14 for real inputs smaller than the check's [-1, 1): a linear path 8 times smaller, a product
// of two activations from inputs 2.8 times smaller. Past that the loss comes gradually, not at
// once as an overflow's infinity does (hence the overflow side's factor 64): a tensor at the limit
// on the check's inputs and 64 times smaller on real ones still loses only 2^-8 of its max, what
// bfloat16's rounding loses. A tensor whose values are all 0 loses nothing. bfloat16 has float32's
// exponent range: the driver runs this analysis under fp16 only.
int storage_range_wide(const PrimGraph *pg, void *const *values, double high, double low,
                       bool *wide, RangeStats *rs) {
    *rs = (RangeStats){.peak_tensor = -1, .smallest_tensor = -1};
    for (int t = 0; t < pg->n_tensors; t++) {
        const Tensor *T = pg->tensors[t];
        const void *v = T->kind == TK_CONST ? T->data : values[t];
        wide[t] = false;
        if (!dtype_is_float(T->dtype) || !v)
            continue;
        int64_t m = tensor_numel(T);
        double top = 0;
        bool bad = false;
        for (int64_t i = 0; i < m && !bad; i++) {
            double a = fabs(elem_get_f64(T->dtype, v, i));
            bad = !isfinite(a) || a > high;
            if (a > top)
                top = a;
        }
        // Only float32 tensors become half: a model's own half tensors are what it asks for.
        bool tiny = !bad && T->dtype == DT_FLOAT && top > 0 && top < low;
        if (bad) {
            wide[t] = true;
            rs->overflow++;
        } else if (tiny) {
            wide[t] = true;
            rs->underflow++;
            if (rs->smallest_tensor < 0 || top < rs->smallest) {
                rs->smallest = top;
                rs->smallest_tensor = t;
            }
        } else if (top > rs->peak) {
            rs->peak = top;
            rs->peak_tensor = t;
        }
    }
    return rs->overflow + rs->underflow;
}

double storage_deviation(const PrimGraph *pg, void *const *f32, void *const *half, int *output,
                         double *scale) {
    double dev = 0;
    *output = -1;
    *scale = 0;
    for (int i = 0; i < pg->n_outputs; i++) {
        const Tensor *t = pg->tensors[pg->outputs[i]];
        if (!dtype_is_float(t->dtype))
            continue;
        int64_t n = tensor_numel(t);
        double top = 0, worst = 0;
        for (int64_t k = 0; k < n; k++) {
            double r = elem_get_f64(t->dtype, f32[i], k), h = elem_get_f64(t->dtype, half[i], k);
            if (!isfinite(r))
                continue;
            top = fmax(top, fabs(r));
            worst = fmax(worst, isfinite(h) ? fabs(h - r) : INFINITY);
        }
        if (!(top > 0))
            continue;
        if (*output < 0 || worst / top > dev) {
            dev = worst / top;
            *output = i;
            *scale = top;
        }
    }
    return dev;
}

// The limit 0.5: real models under fp16 move by up to about 0.2 of max|output| (CSPDarknet53's 50
// convolutions: 0.2; PyTorch's own half-precision error there is 0.17), while an output whose
// values flushed to zero moves by exactly 1. 0.5 is 2.5 times the deepest model's rounding and
// half of a lost output.
int storage_deviation_verdict(const PrimGraph *pg, DType to, double dev, int output, double scale,
                              Err *e) {
    if (dev <= STORAGE_DEVIATION_LIMIT)
        return ST_OK;
    const char *name =
        output >= 0 && output < pg->n_outputs ? pg->tensors[pg->outputs[output]]->name : "?";
    return err_set(e, ST_UNSUPPORTED,
                   "%s storage moves output '%s' by %.3g of its largest |value| (%.3g in "
                   "float32) on the check's random inputs, past the %.2g half storage allows: %s",
                   dtype_name(to), name, dev, scale, STORAGE_DEVIATION_LIMIT,
                   to == DT_FLOAT16 ? "compile without --half-storage, or, where the values are "
                                      "tiny or huge, with --precision bf16 (float32's range)"
                                    : "compile without --half-storage");
}

bool storage_wide_format(const bool *wide, int n_tensors, char *buf, size_t cap) {
    size_t at = 0;
    if (cap < 1)
        return false;
    buf[0] = '\0';
    for (int t = 0; t < n_tensors; t++) {
        if (!wide[t])
            continue;
        int end = t;
        while (end + 1 < n_tensors && wide[end + 1])
            end++;
        char item[32];
        int len = end > t ? snprintf(item, sizeof item, "%s%d-%d", at ? "," : "", t, end)
                          : snprintf(item, sizeof item, "%s%d", at ? "," : "", t);
        if (at + (size_t)len + 1 > cap)
            return false;
        memcpy(buf + at, item, (size_t)len + 1);
        at += (size_t)len;
        t = end;
    }
    return true;
}

int storage_wide_parse(const char *text, int n_tensors, bool *wide, Err *e) {
    memset(wide, 0, (size_t)n_tensors);
    const char *s = text;
    long next = 0; // ids must ascend
    while (*s) {
        char *end;
        if (*s < '0' || *s > '9')
            return err_set(e, ST_INVALID, "the float32 tensor list: '%.16s' is not an id", s);
        long a = strtol(s, &end, 10), b = a;
        if (*end == '-') {
            s = end + 1;
            if (*s < '0' || *s > '9')
                return err_set(e, ST_INVALID, "the float32 tensor list: a range lacks its end");
            b = strtol(s, &end, 10);
        }
        if (a < next || b < a || b >= n_tensors)
            return err_set(e, ST_INVALID,
                           "the float32 tensor list: ids %ld-%ld are out of order or past the "
                           "graph's %d tensors",
                           a, b, n_tensors);
        for (long t = a; t <= b; t++)
            wide[t] = true;
        next = b + 1;
        s = end;
        if (*s == ',' && s[1])
            s++;
        else if (*s)
            return err_set(e, ST_INVALID, "the float32 tensor list: unexpected '%.16s'", s);
    }
    return ST_OK;
}

int pass_store_reduced(PrimGraph *pg, DType to, const bool *wide, StorageStats *st, Err *e) {
    ORCH_ASSERT(to == DT_FLOAT16 || to == DT_BFLOAT16);
    StorageStats local = {0};
    if (!st)
        st = &local;
    const int n_t = pg->n_tensors, n_p = pg->n_prims;
    // keep[t]: stays float32 - the model's interface, what OPAQUE primitives touch, the results
    // of sum-like reductions and elementwise values only sum-like reductions read (fused into
    // the reduction's kernel as a rule, so storing them costs nothing).
    bool *keep = xcalloc((size_t)n_t + 1, 1), *is_input = xcalloc((size_t)n_t + 1, 1);
    for (int i = 0; i < pg->n_inputs; i++)
        keep[pg->inputs[i]] = is_input[pg->inputs[i]] = true;
    for (int i = 0; i < pg->n_outputs; i++)
        keep[pg->outputs[i]] = true;
    int *readers = xcalloc((size_t)n_t + 1, sizeof(int)),
        *sum_readers = xcalloc((size_t)n_t + 1, sizeof(int));
    for (int k = 0; k < n_p; k++) {
        const Prim *p = pg->prims[k];
        for (int j = 0; j < p->n_in; j++)
            if (p->in[j] >= 0) {
                readers[p->in[j]]++;
                sum_readers[p->in[j]] += sum_like(pg, p);
                keep[p->in[j]] |= p->kind == PRIM_OPAQUE;
            }
        for (int j = 0; j < p->n_out; j++)
            if (p->out[j] >= 0)
                keep[p->out[j]] |= p->kind == PRIM_OPAQUE || sum_like(pg, p);
    }
    for (int k = 0; k < n_p; k++) {
        const Prim *p = pg->prims[k];
        int t = p->n_out == 1 ? p->out[0] : -1;
        if (p->kind == PRIM_ELEMWISE && t >= 0 && readers[t] > 0 && readers[t] == sum_readers[t])
            keep[t] = true;
    }
    free(readers);
    free(sum_readers);
    // Range: a wide tensor stays float32, and a layout, product or min/max reduction touching
    // one works in float32 - every float tensor it reads or writes stays float32 - since
    // rounding its operands or result to half would overflow. Elementwise programs need no rule:
    // one writing a wide tensor computes in float32 (its output is kept), one reading it does too
    // and rounds only its result (f32_in below).
    bool *wide_prim = xcalloc((size_t)n_p + 1, 1);
    for (int t = 0; wide && t < n_t; t++)
        if (wide[t] && pg->tensors[t]->dtype == DT_FLOAT) {
            keep[t] = true;
            st->wide_tensors++;
        }
    for (int k = 0; wide && k < n_p; k++) {
        const Prim *p = pg->prims[k];
        if (p->kind == PRIM_ELEMWISE || p->kind == PRIM_OPAQUE || sum_like(pg, p))
            continue;
        for (int j = 0; j < p->n_in + p->n_out; j++) {
            int t = j < p->n_in ? p->in[j] : p->out[j - p->n_in];
            wide_prim[k] |= t >= 0 && t < n_t && wide[t];
        }
        if (!wide_prim[k])
            continue;
        st->wide_prims++;
        for (int j = 0; j < p->n_in + p->n_out; j++) {
            int t = j < p->n_in ? p->in[j] : p->out[j - p->n_in];
            if (t >= 0 && t < n_t && pg->tensors[t]->dtype == DT_FLOAT)
                keep[t] = true;
        }
    }
    // The new order: each cast right before its first reader or right after its producer.
    Prim **orig = xmalloc(sizeof(Prim *) * (size_t)(n_p + 1));
    memcpy(orig, pg->prims, sizeof(Prim *) * (size_t)n_p);
    Prim **order = xmalloc(sizeof(Prim *) * (size_t)(3 * n_p + 1));
    int n_order = 0;
    // The `to` copy of each kept float32 tensor a half primitive reads, made by a cast; -1: none
    // yet.
    int *twin_h = xmalloc(sizeof(int) * (size_t)(n_t + 1));
    for (int t = 0; t < n_t; t++)
        twin_h[t] = -1;
    for (int k = 0; k < n_p; k++) {
        Prim *p = orig[k];
        if (p->kind == PRIM_OPAQUE) {
            order[n_order++] = p;
            continue;
        }
        if (p->kind == PRIM_ELEMWISE) {
            // A model input is read through its half twin, as the layouts and products read it:
            // Equal(x, ReduceMax(x)) must compare the same rounding of x on both sides.
            for (int j = 0; j < p->n_in; j++) {
                int t = p->in[j];
                if (t < 0 || t >= n_t || !is_input[t] || pg->tensors[t]->dtype != DT_FLOAT)
                    continue;
                if (twin_h[t] < 0) {
                    twin_h[t] = twin_tensor(pg, t, to);
                    order[n_order++] = add_cast(pg, t, twin_h[t], p->origin);
                    st->casts++;
                }
                p->in[j] = twin_h[t];
            }
            // Mixed input dtypes are fine. A program whose result becomes half computes in half
            // when all its float inputs are half too (a bias add, an activation, a softmax's
            // exp: the form the kernel classes' pattern matchers know); one reading a float32
            // tensor (a variance) computes in float32 and ends with a CAST to half.
            int t = p->out[0];
            bool f32_in = false;
            for (int j = 0; j < p->n_in; j++)
                f32_in |= p->in[j] >= 0 && p->in[j] < n_t &&
                          pg->tensors[p->in[j]]->dtype == DT_FLOAT && keep[p->in[j]];
            if (pg->tensors[t]->dtype == DT_FLOAT && !keep[t] && !f32_in) {
                for (int i = 0; i < p->ew.n; i++)
                    if (p->ew.code[i].dtype == DT_FLOAT)
                        p->ew.code[i].dtype = to;
            } else if (pg->tensors[t]->dtype == DT_FLOAT && !keep[t] && p->ew.n > 0 &&
                       p->ew.code[p->ew.n - 1].dtype == DT_FLOAT) {
                EwInstr *code = arena_alloc(pg->arena, sizeof(EwInstr) * (size_t)(p->ew.n + 1));
                memcpy(code, p->ew.code, sizeof(EwInstr) * (size_t)p->ew.n);
                EwInstr *c = &code[p->ew.n];
                memset(c, 0, sizeof *c);
                c->op = EW_CAST;
                c->dtype = to;
                c->arg[0].src = EWS_INSTR;
                c->arg[0].index = p->ew.n - 1;
                p->ew.code = code;
                p->ew.n++;
            }
            order[n_order++] = p;
            continue;
        }
        // A sum-like reduction reads its input as it is stored (half values convert exactly on
        // load and accumulate wide) and writes float32: no cast, so nothing more to store. A
        // primitive kept in float32 for range has float32 tensors only.
        if (sum_like(pg, p) || wide_prim[k]) {
            order[n_order++] = p;
            continue;
        }
        // Layouts, products and min/max/arg reductions work in `to`.
        for (int j = 0; j < p->n_in; j++) {
            int t = p->in[j];
            if (t < 0 || t >= n_t || pg->tensors[t]->dtype != DT_FLOAT || !keep[t])
                continue;
            if (twin_h[t] < 0) {
                twin_h[t] = twin_tensor(pg, t, to);
                order[n_order++] = add_cast(pg, t, twin_h[t], p->origin);
                st->casts++;
            }
            p->in[j] = twin_h[t];
        }
        order[n_order++] = p;
        for (int j = 0; j < p->n_out; j++) {
            int t = p->out[j];
            if (t < 0 || t >= n_t || pg->tensors[t]->dtype != DT_FLOAT || !keep[t])
                continue;
            int h = twin_tensor(pg, t, to);
            p->out[j] = h;
            order[n_order++] = add_cast(pg, h, t, p->origin);
            st->casts++;
        }
    }
    ORCH_ASSERT(n_order == pg->n_prims && n_order <= pg->cap_prims);
    memcpy(pg->prims, order, sizeof(Prim *) * (size_t)n_order);
    for (int t = 0; t < n_t; t++) {
        Tensor *T = pg->tensors[t];
        if (T->dtype != DT_FLOAT || keep[t])
            continue;
        if (T->kind == TK_CONST) {
            st->const_bytes += tensor_nbytes(T);
            convert_const(pg, t, to);
        } else {
            T->dtype = to;
        }
        st->retyped++;
    }
    free(keep);
    free(wide_prim);
    free(is_input);
    free(orig);
    free(order);
    free(twin_h);
    prim_graph_compact(pg); // producers follow the new order
    return prim_graph_verify(pg, e);
}

int pass_store_reduced_listed(PrimGraph *pg, DType to, const char *wide_text, const char *path,
                              Err *e) {
    bool *wide = NULL;
    int rc = ST_OK;
    if (wide_text && *wide_text) {
        wide = xcalloc((size_t)pg->n_tensors + 1, 1);
        if ((rc = storage_wide_parse(wide_text, pg->n_tensors, wide, e)))
            err_prefix(e, "%s: corrupted: ", path);
    }
    if (rc == ST_OK)
        rc = pass_store_reduced(pg, to, wide, NULL, e);
    free(wide);
    return rc;
}
