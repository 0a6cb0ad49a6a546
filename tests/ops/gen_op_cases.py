#!/usr/bin/env python3
"""Writes random op cases for orch's reference interpreter in the ONNX node-test layout
(OUTDIR/test_NAME/model.onnx, test_data_set_0/input_N.pb and output_N.pb), which node_tests runs:

    build/node_tests OUTDIR --xfail tests/ops/op_cases_expected_failures.txt

Each case is one node (a few are small graphs) on random data drawn from the seed: every family
reseeds from (seed, family), so a case changes only when its own family's code does. Expected
outputs come from ONNX Runtime (CPU, graph optimisations off); the onnx reference evaluator is the
oracle only where ORT is known to differ from the ONNX spec or has no kernel, and each such case
says why (ref="..."). Inputs that decide output shapes (shapes, axes, pads, sizes, k...) are
initializers, as orch compiles for static shapes. Valid inputs only: tests/bad holds the bad ones.

usage: gen_op_cases.py OUTDIR [--seed S] [--filter SUBSTRING] [--compare]
  --compare  also run the other oracle on each case and list the cases where the two disagree
"""
import argparse
import os
import shutil
import sys
import time
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

DEFAULT_SEED = 20240601
OPSET = 17
DT = {'f32': np.float32, 'f64': np.float64, 'f16': np.float16, 'i8': np.int8, 'i16': np.int16,
      'i32': np.int32, 'i64': np.int64, 'u8': np.uint8, 'u16': np.uint16, 'u32': np.uint32,
      'u64': np.uint64, 'bool': np.bool_}


# ---- case-building API ------------------------------------------------------------------------

class C:
    """Wraps an input that the case stores as an initializer, i.e. a constant to orch."""

    def __init__(self, value):
        self.value = np.asarray(value)


class State:
    """Run-wide settings and tallies (one instance: S)."""
    out, filter, compare = '', '', False
    seed = DEFAULT_SEED
    rng = np.random.default_rng(0)
    family = ''
    counts = {}
    names = set()
    disagree = []
    errors = []


S = State()


def family(name):
    """Starts a family of cases: reseeds the generator from (seed, family)."""
    S.family = name
    S.counts[name] = 0
    S.rng = np.random.default_rng([S.seed, zlib.crc32(name.encode())])


def rnd(shape=(), dt='f32', scale=1.0):
    """Random data, never all zero: floats normal*scale, signed ints in [-50, 50), unsigned
    in [0, 100), bools fair coins."""
    t = np.dtype(DT.get(dt, dt))
    if t.kind == 'f':
        a = S.rng.standard_normal(shape) * scale
    elif t.kind == 'b':
        a = S.rng.random(shape) < 0.5
    else:
        info = np.iinfo(t)
        a = S.rng.integers(max(info.min, -50), min(info.max, 99) + 1, shape)
    a = np.asarray(a).astype(t)
    if a.size and not a.any():
        a.flat[0] = 1
    return a


def uniform(lo, hi, shape, dt='f32'):
    return S.rng.uniform(lo, hi, shape).astype(DT.get(dt, dt))


def ints(lo, hi, shape, dt='i64'):
    """Random integers in [lo, hi) (indices, lengths)."""
    return S.rng.integers(lo, hi, shape).astype(DT.get(dt, dt))


def I64(*v):
    return np.array(v, np.int64)


def F32(*v):
    return np.array(v, np.float32)


def case(name, op, inputs, attrs=None, opset=OPSET, outs=1, ref=None, zero_ok=False,
         expect=None):
    """One single-node case. inputs: arrays (graph inputs, fed at run time), C(array)
    (initializers) or None (an absent optional input). ref: why the onnx reference evaluator is
    the oracle instead of ORT. zero_ok: all-zero outputs are the point of the case. expect:
    (why, function of the input arrays in order giving the outputs) where neither ORT nor the
    reference evaluator follows orch's documented semantics (docs/numerics.md)."""
    names = [f'x{i}' if v is not None else '' for i, v in enumerate(inputs)]
    ys = [f'y{i}' for i in range(outs)]
    node = helper.make_node(op, names, ys, **(attrs or {}))
    graph(name, [node], {nm: v for nm, v in zip(names, inputs) if nm}, ys, opset, ref, zero_ok,
          expect)


def arrays(inputs):
    return {k: v if isinstance(v, C) else np.asarray(v) for k, v in inputs.items()}


def graph(name, nodes, inputs, outputs=('y',), opset=OPSET, ref=None, zero_ok=False,
          expect=None):
    """A case from nodes (helper.make_node); inputs maps names to arrays or C(array); expect as
    in case()."""
    name = f'{S.family}_{name}'
    assert name not in S.names, f'duplicate case {name}'
    S.names.add(name)
    S.counts[S.family] += 1
    if S.filter not in name:
        return
    inputs = arrays(inputs)
    feeds = {k: v for k, v in inputs.items() if not isinstance(v, C)}
    for k, v in feeds.items():
        assert v.size <= 1 or v.any(), f'{name}: input {k} is all zero'
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in feeds.items()],
        [onnx.ValueInfoProto(name=o) for o in outputs],
        [numpy_helper.from_array(v.value, k) for k, v in inputs.items() if isinstance(v, C)])
    ops = [helper.make_opsetid('', opset)]
    model = helper.make_model(g, opset_imports=ops, ir_version=helper.find_min_ir_version_for(ops))
    try:
        if expect:
            expected = [np.asarray(a) for a in expect[1](
                *[v.value if isinstance(v, C) else v for v in inputs.values()])]
        else:
            expected = run_oracle(model, feeds, ref is not None)
    except Exception as ex:
        S.errors.append(f'{name}: {"reference" if ref else "ORT"} failed: '
                        f'{str(ex).splitlines()[0][:300]}')
        return
    if S.compare:
        check_other(name, model, feeds, ref is not None and not expect, expected)
    if not zero_ok and all(a.size > 1 and not a.any() for a in expected):
        print(f'note: {name}: every output is all zero (a weak case: try another shape)')
    g.ClearField('output')
    for o, a in zip(outputs, expected):
        g.output.append(helper.make_tensor_value_info(
            o, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
    d = os.path.join(S.out, 'test_' + name)
    os.makedirs(os.path.join(d, 'test_data_set_0'))
    onnx.save(model, os.path.join(d, 'model.onnx'))
    for prefix, items in (('input', feeds.items()), ('output', zip(outputs, expected))):
        for i, (k, a) in enumerate(items):
            with open(os.path.join(d, 'test_data_set_0', f'{prefix}_{i}.pb'), 'wb') as f:
                f.write(numpy_helper.from_array(a, k).SerializeToString())


def run_oracle(model, feeds, use_ref):
    if use_ref:
        return [np.asarray(a) for a in ReferenceEvaluator(model).run(None, feeds)]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 4
    so.intra_op_num_threads = 1  # results independent of the core count
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=['CPUExecutionProvider'])
    return sess.run(None, feeds)


def check_other(name, model, feeds, use_ref, expected):
    """--compare: runs the other oracle and notes a disagreement beyond node_tests' tolerance."""
    try:
        other = run_oracle(model, feeds, not use_ref)
    except Exception as ex:
        S.disagree.append(f'{name}: the other oracle fails: {str(ex).splitlines()[0][:200]}')
        return
    for a, b in zip(expected, other):
        b = np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            S.disagree.append(f'{name}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}')
            return
        x, y = a.astype(np.float64), b.astype(np.float64)
        ok = (np.isnan(x) & np.isnan(y)) | (x == y) | (np.abs(x - y) <= 1e-5 + 1e-3 * np.abs(x))
        if not ok.all():
            i = int(np.argmin(ok.ravel()))
            S.disagree.append(f'{name}: element {i}: {x.ravel()[i]!r} vs {y.ravel()[i]!r}')
            return


# ---- elementwise --------------------------------------------------------------------------------

FL, FH = ('f32', 'f64', 'f16'), ('f32', 'f16')
SINT, UINT = ('i8', 'i16', 'i32', 'i64'), ('u8', 'u16', 'u32', 'u64')
SHAPES = [(2, 3, 4), (5,), (3, 1, 4, 2), (), (2, 0, 3), (7, 6)]


def ew_data(domain, shape, dt):
    """Inputs inside an op's domain: any (normal*3), pos (>0), unit (-1, 1), ge1 (>=1), nan
    (some NaN and infinities)."""
    if np.dtype(DT[dt]).kind != 'f':
        return rnd(shape, dt)
    x = S.rng.standard_normal(shape) * 3
    x = {'any': x, 'pos': np.abs(x) + 0.1, 'ge1': np.abs(x) + 1,
         'unit': S.rng.uniform(-0.95, 0.95, shape),
         'nan': np.where(np.arange(x.size).reshape(shape) % 3 == 1,
                         F32(np.nan, np.inf, -np.inf)[np.arange(x.size).reshape(shape) // 3 % 3],
                         x)}[domain]
    return np.asarray(x).astype(DT[dt])


# op, input domain, dtypes (those both ORT and orch run), attributes, opset
UNARY = [
    ('Neg', 'any', FL + SINT, {}, OPSET), ('Abs', 'any', FL + SINT + UINT, {}, OPSET),
    ('Sign', 'any', FL + ('i8', 'i32', 'i64', 'u8', 'u64'), {}, OPSET),
    ('Relu', 'any', FL + ('i8', 'i32'), {}, 14),
    ('Sqrt', 'pos', FL, {}, OPSET), ('Reciprocal', 'any', FL, {}, OPSET),
    ('Exp', 'any', FL, {}, OPSET), ('Log', 'pos', FL, {}, OPSET), ('Erf', 'any', FH, {}, OPSET),
    ('Tanh', 'any', FL, {}, OPSET), ('Sigmoid', 'any', FL, {}, OPSET),
    ('Sin', 'any', FL, {}, OPSET), ('Cos', 'any', FH, {}, OPSET), ('Tan', 'unit', FH, {}, OPSET),
    ('Asin', 'unit', FH, {}, OPSET), ('Acos', 'unit', FH, {}, OPSET),
    ('Atan', 'any', FH, {}, OPSET), ('Sinh', 'any', FH, {}, OPSET),
    ('Cosh', 'any', FH, {}, OPSET), ('Asinh', 'any', FH, {}, OPSET),
    ('Acosh', 'ge1', FH, {}, OPSET), ('Atanh', 'unit', FH, {}, OPSET),
    ('Floor', 'any', FL, {}, OPSET), ('Ceil', 'any', FL, {}, OPSET),
    ('Round', 'any', FL, {}, OPSET), ('Softplus', 'any', FH, {}, OPSET),
    ('Softsign', 'any', FH, {}, OPSET), ('HardSwish', 'any', FH, {}, OPSET),
    ('Mish', 'any', FL, {}, 18), ('LeakyRelu', 'any', FH, {'alpha': 0.3}, OPSET),
    ('Elu', 'any', FH, {'alpha': 0.7}, OPSET),
    ('ThresholdedRelu', 'any', FH, {'alpha': 0.4}, OPSET),
    ('HardSigmoid', 'any', FH, {'alpha': 0.3, 'beta': 0.4}, OPSET),
    ('Selu', 'any', FH, {'alpha': 1.5, 'gamma': 1.1}, OPSET), ('Celu', 'any', ('f32',), {}, OPSET),
    ('Shrink', 'any', FL + ('i8', 'i32', 'i64', 'u8'), {'lambd': 1.5, 'bias': 0.5}, OPSET),
    ('Gelu', 'any', FH, {}, 20), ('IsNaN', 'nan', FL, {}, 20), ('IsInf', 'nan', FL, {}, 20),
    ('Not', 'any', ('bool',), {}, OPSET),
]
SPECIALS = [0.0, -0.0, 1.5, -1.5, 2.5, -2.5, 0.5, np.inf, -np.inf, np.nan, 1e30, -1e-30]
SPECIAL_OPS = ['Round', 'Floor', 'Ceil', 'Sign', 'Abs', 'Neg', 'Relu', 'Sigmoid', 'Softplus',
               'Softsign', 'Tanh', 'Exp', 'Erf', 'IsNaN', 'IsInf', 'Reciprocal', 'HardSwish',
               'Mish', 'Sqrt', 'Log', 'Gelu']
# op, dtypes, number of inputs (variadic ops get 3)
BINARY = [
    ('Add', FL + ('i8', 'i32', 'i64', 'u8', 'u64'), 2), ('Sub', FL + ('i16', 'i64', 'u32'), 2),
    ('Mul', FL + ('i32', 'i64', 'u8'), 2), ('Div', FL + ('i8', 'i32', 'i64', 'u16', 'u64'), 2),
    ('Mod', FL + SINT + ('u8', 'u64'), 2), ('Pow', ('f32', 'f64'), 2),
    ('Max', FL + ('i32', 'i64', 'u32', 'u64'), 3), ('Min', FL + ('i32', 'i64', 'u64'), 3),
    ('Sum', FL, 3), ('Mean', FH, 3),
    ('Equal', ('f32', 'i32', 'i64', 'u8', 'bool'), 2), ('Less', ('f32', 'f64', 'i8', 'u64'), 2),
    ('LessOrEqual', ('f32', 'i64', 'f16'), 2), ('Greater', ('f32', 'i32', 'u16'), 2),
    ('GreaterOrEqual', ('f64', 'i64', 'f16'), 2),
    ('And', ('bool',), 2), ('Or', ('bool',), 2), ('Xor', ('bool',), 2),
    ('BitShift', ('u8', 'u32', 'u64'), 2), ('PRelu', FH, 2),
]


def bcast_shapes(n):
    """n shapes that broadcast together, ranks 0-4, some dims 1, some leading dims dropped; the
    result has at least 6 elements unless it is a scalar."""
    while True:
        r = int(S.rng.integers(0, 5))
        full = list(S.rng.integers(2, 5, r))
        out = []
        for _ in range(n):
            s = [d if S.rng.random() < 0.6 else 1 for d in full]
            if S.rng.random() < 0.3:
                s = s[int(S.rng.integers(0, r + 1)):]
            out.append(tuple(int(d) for d in s))
        if r == 0 or np.broadcast_shapes(*out) and np.prod(np.broadcast_shapes(*out)) >= 6:
            return out


NP_BOOL = {'Equal': np.equal, 'Less': np.less, 'LessOrEqual': np.less_equal,
           'Greater': np.greater, 'GreaterOrEqual': np.greater_equal, 'And': np.logical_and,
           'Or': np.logical_or, 'Xor': np.logical_xor}


def binary_inputs(op, dt, shapes):
    for _ in range(20):  # boolean results: redraw until both outcomes occur
        xs = binary_draw(op, dt, shapes)
        if op not in NP_BOOL or 0 < NP_BOOL[op](*xs).mean() < 1:
            break
    return xs


def binary_draw(op, dt, shapes):
    xs = [rnd(s, dt, scale=3) for s in shapes]
    if dt == 'f16':  # quarters: sums stay exact, as ORT rounds float16 after every step
        xs = [(np.round(x * 4) / 4).astype(x.dtype) for x in xs]
    if op in ('Equal', 'Less', 'LessOrEqual', 'Greater', 'GreaterOrEqual') and dt != 'bool':
        # few distinct values: equal pairs and both outcomes occur
        xs = [S.rng.choice([1, 2, 3] if dt[0] == 'u' else [-1, 1, 2], s).astype(DT[dt])
              for s in shapes]
    if op in ('Div', 'Mod') and dt[0] in 'iu':  # small divisors, never 0 (undefined)
        xs[1] = ((np.abs(xs[1]) % 9 + 1) * np.where(xs[1] < 0, -1, 1)).astype(xs[1].dtype)
    if op == 'Pow':
        xs[1] = np.clip(np.round(xs[1]), -3, 3).astype(xs[1].dtype)
    if op == 'BitShift':  # the corner cases below shift further
        xs[1] = ints(1, 4, shapes[1], dt)
    return xs


def elementwise():
    family('ew')
    for op, domain, dts, attrs, opset in UNARY:
        for i, dt in enumerate(dts):
            shape = SHAPES[(i + len(op)) % len(SHAPES)]
            case(f'{op.lower()}_{dt}', op, [ew_data(domain, shape, dt)], attrs, opset)
    for op in SPECIAL_OPS:
        opset = next(o for name, _, _, _, o in UNARY if name == op)
        for dt in FL if op not in ('Erf', 'Softplus', 'Softsign', 'HardSwish', 'Gelu') else FH:
            ref = {'Erf': 'ORT gives Erf(NaN) = 1',
                   'Sign': 'ORT gives float16 Sign(NaN) = 0' if dt == 'f16' else None}.get(op)
            case(f'special_{op.lower()}_{dt}', op, [np.array(SPECIALS, DT[dt])], opset=opset,
                 ref=ref)
    case('isinf_positive_only', 'IsInf', [np.array(SPECIALS, np.float32)], {'detect_negative': 0})
    case('isinf_negative_only', 'IsInf', [np.array(SPECIALS, np.float32)], {'detect_positive': 0})
    case('gelu_tanh', 'Gelu', [rnd((3, 5), scale=3)], {'approximate': 'tanh'}, opset=20)
    case('gelu_f64', 'Gelu', [rnd((3, 5), 'f64', scale=3)], opset=20,
         ref='ORT has no double Gelu kernel')

    for op, dts, n in BINARY:
        for k in range(6):
            dt = dts[k % len(dts)]
            shapes = bcast_shapes(n)
            attrs = {'fmod': 1} if op == 'Mod' and (dt[0] == 'f' or k % 2) else {}
            if op == 'BitShift':
                attrs = {'direction': 'LEFT' if k % 2 else 'RIGHT'}
            if op == 'PRelu':  # the slope broadcasts to x one-directionally
                shapes = [(2, 3, 4, 5), [(3, 1, 1), (5,), (1, 4, 1), (), (4, 5), (1,)][k]]
            case(f'{op.lower()}_{dt}_{k}', op, binary_inputs(op, dt, shapes), attrs)
    for k in range(3):
        sc, sa, sb = bcast_shapes(3)
        for dt in ('f32', 'i64', 'u8', 'i32')[k:k + 2]:
            case(f'where_{dt}_{k}', 'Where', [rnd(sc, 'bool'), rnd(sa, dt), rnd(sb, dt)])
    case('prelu_i64', 'PRelu', [rnd((2, 3, 4), 'i64'), rnd((4,), 'i64')])
    case('sum_one', 'Sum', [rnd((2, 3))])
    case('max_one_i32', 'Max', [rnd((2, 1), 'i32')])
    case('max_nan', 'Max', [np.array(SPECIALS, np.float32), np.array(SPECIALS[::-1], np.float32)])
    case('min_nan', 'Min', [np.array(SPECIALS, np.float32), np.array(SPECIALS[::-1], np.float32)])
    case('add_scalars', 'Add', [np.array(2.5, np.float32), np.array(1.25, np.float32)])
    case('mul_empty', 'Mul', [rnd((0, 3)), rnd((3,))])
    case('where_empty', 'Where', [np.zeros((0,), bool), rnd((0,)), rnd((1,))])

    # Integer corners: C-style truncating Div, Mod's sign rules, two's-complement wrap-around.
    for dt in SINT:
        mn = np.iinfo(DT[dt]).min
        a = np.array([7, -7, 7, -7, mn, mn, 5, 0, -1, mn + 1], DT[dt])
        b = np.array([2, 2, -2, -2, 1, 3, -9, 4, -1, -1], DT[dt])
        case(f'div_corner_{dt}', 'Div', [a, b])
        case(f'mod_corner_{dt}', 'Mod', [a, b])
        case(f'fmod_corner_{dt}', 'Mod', [a, b], {'fmod': 1})
        case(f'abs_min_{dt}', 'Abs', [a])
        case(f'neg_min_{dt}', 'Neg', [a])
        if dt in ('i32', 'i64'):
            case(f'add_wrap_{dt}', 'Add', [a, a])
            case(f'mul_wrap_{dt}', 'Mul', [a, np.full_like(a, 3)])
    for dt in UINT:
        mx = np.iinfo(DT[dt]).max
        a, b = np.array([7, 0, mx, mx, 5, 3], DT[dt]), np.array([2, 9, 1, mx, 4, 7], DT[dt])
        case(f'div_corner_{dt}', 'Div', [a, b])
        case(f'mod_corner_{dt}', 'Mod', [a, b])
        case(f'sub_wrap_{dt}', 'Sub', [b, a])
        if dt != 'u16':  # shifts of width or more are undefined
            bits = np.iinfo(DT[dt]).bits
            for way in ('LEFT', 'RIGHT'):
                case(f'bitshift_{way.lower()}_corner_{dt}', 'BitShift',
                     [a, np.array([0, 1, bits - 1, bits - 2, 4, 7], DT[dt])], {'direction': way})
    case('pow_i64', 'Pow', [I64(2, -3, 5, 1, -1, 0, 3), I64(10, 3, 0, 5, 3, 4, 2)])
    case('pow_i32_f32', 'Pow', [np.array([2, -3, 5], np.int32), F32(0.5, 2.0, 1.5)])
    case('pow_f32_i64', 'Pow', [rnd((2, 3)), I64(3, 2, 1)])
    case('pow_neg_base', 'Pow', [F32(-2, -2, -8, 0, 0, 4), F32(3, 0.5, 1 / 3, 0, -1, -0.5)])

    # Clip: min/max as inputs (opset 11+), absent, reversed, integer.
    sp = np.array(SPECIALS, np.float32)
    case('clip_nan', 'Clip', [sp, np.float32(-1), np.float32(2)])
    case('clip_min_gt_max', 'Clip', [sp, np.float32(3), np.float32(2)])
    case('clip_max_only_i64', 'Clip', [np.arange(-5, 5, dtype=np.int64), None, np.int64(2)])
    case('clip_min_only_u8', 'Clip', [np.arange(0, 10, dtype=np.uint8), np.uint8(3)])
    case('clip_none_i32', 'Clip', [np.arange(-5, 5, dtype=np.int32)])
    case('clip_const_bounds', 'Clip', [rnd((3, 4), scale=2), C(np.float32(-0.5)), C(np.float32(1))],
         opset=11)
    case('clip_f16', 'Clip', [rnd((3, 4), 'f16', scale=2), np.float16(-1), np.float16(0.5)])

    # Cast: every pair of the 12 numeric types; float sources include specials, kept in range
    # for integer targets (out-of-range float to int is undefined).
    vals = np.array([0, 1, -1, 2.5, -2.5, 100.7, -100.7, 65519, 65520, 1e10, np.nan, np.inf])
    for src in DT:
        for dst in DT:
            if src[0] == 'f':
                x = vals.astype(DT[src])
                if dst[0] in 'iu':
                    info = np.iinfo(DT[dst])
                    x = x[np.isfinite(x) & (x > info.min - 1) & (x < info.max + 1)]
            else:
                x = rnd((12,), src)
            case(f'cast_{src}_{dst}', 'Cast', [x], {'to': helper.np_dtype_to_tensor_dtype(
                np.dtype(DT[dst]))}, opset=19)
    for src, dst in (('f32', 'i64'), ('i32', 'f16'), ('f64', 'bool'), ('u8', 'f32')):
        case(f'castlike_{src}_{dst}', 'CastLike', [rnd((3, 4), src, scale=50),
                                                   np.zeros((0,), DT[dst])], opset=19)
    bf = helper.make_node
    graph('cast_bf16_roundtrip',
          [bf('Cast', ['x'], ['b'], to=TP.BFLOAT16), bf('Cast', ['b'], ['y'], to=TP.FLOAT)],
          {'x': rnd((4, 5), scale=100)})


# ---- linear: MatMul, Gemm, Conv, ConvTranspose, Einsum, quantized -----------------------------

# name: (A shape, B shape, dtype)
MATMUL = {
    'big': ((130, 270), (270, 300), 'f32'), 'bcast_b': ((2, 3, 17, 33), (33, 19), 'f32'),
    'bcast_both': ((2, 1, 5, 7), (3, 7, 4), 'f32'), '1d_2d': ((7,), (7, 5), 'f32'),
    '2d_1d': ((4, 7), (7,), 'f32'), '1d_1d': ((7,), (7,), 'f32'),
    'f64': ((2, 3, 4), (4, 5), 'f64'), 'i32': ((2, 3, 4), (2, 4, 5), 'i32'),
    'i64': ((3, 4), (4,), 'i64'), 'm1': ((1, 64), (64, 33), 'f32'),
    'n1': ((2, 9, 40), (40, 1), 'f32'), 'batch_1d': ((3, 4, 6), (6,), 'f32'),
}
# name: (A, B, C or None, attributes)
GEMM = {
    'tt_bias_row': ((37, 20), (45, 37), (1, 45), dict(transA=1, transB=1, alpha=0.7, beta=-1.3)),
    'bias_col': ((20, 37), (37, 45), (20, 1), {}),
    'bias_scalar': ((5, 6), (6, 7), (), dict(beta=2.0)),
    'nobias': ((20, 37), (45, 37), None, dict(transB=1)),
    'ta': ((8, 5), (8, 3), (5, 3), dict(transA=1, alpha=-0.5)),
    'f64': ((5, 6), (6, 7), (7,), dict(alpha=2.0, beta=0.5)),
}
# name: (x shape, w shape, bias?, attributes). w is an initializer on every other case.
CONV = {
    'resnet_3x3': ((1, 16, 20, 20), (24, 16, 3, 3), True, dict(pads=[1, 1, 1, 1])),
    '7x7_s2': ((2, 3, 33, 31), (8, 3, 7, 7), True, dict(pads=[3, 3, 3, 3], strides=[2, 2])),
    '1x1': ((2, 16, 9, 9), (8, 16, 1, 1), False, {}),
    '1x1_s2': ((1, 16, 9, 9), (8, 16, 1, 1), False, dict(strides=[2, 2])),
    'group': ((2, 8, 10, 11), (12, 2, 3, 3), True, dict(group=4, pads=[1, 0, 2, 1],
                                                         dilations=[2, 1])),
    'depthwise': ((2, 8, 15, 14), (8, 1, 3, 3), True, dict(group=8, pads=[1, 1, 1, 1],
                                                            strides=[2, 2])),
    'depthwise_mult': ((1, 4, 15, 14), (8, 1, 5, 3), True, dict(group=4, dilations=[2, 3],
                                                                 pads=[4, 3, 4, 3])),
    '1d': ((2, 5, 30), (7, 5, 4), True, dict(strides=[3], pads=[2, 1], dilations=[2])),
    '3d': ((1, 3, 7, 8, 9), (4, 3, 3, 2, 3), True, dict(pads=[1, 0, 1, 1, 1, 0],
                                                         strides=[1, 2, 2])),
    '3d_depthwise': ((1, 3, 7, 8, 9), (3, 1, 3, 3, 3), False, dict(group=3, auto_pad='SAME_UPPER',
                                                                    strides=[2, 1, 2])),
    'same_upper_s2': ((1, 3, 10, 11), (4, 3, 4, 3), False, dict(auto_pad='SAME_UPPER',
                                                                 strides=[2, 2])),
    'same_lower_s2': ((1, 3, 10, 11), (4, 3, 4, 3), False, dict(auto_pad='SAME_LOWER',
                                                                 strides=[2, 2])),
    'valid': ((1, 3, 10, 11), (4, 3, 4, 3), False, dict(auto_pad='VALID', strides=[3, 2],
                                                         kernel_shape=[4, 3])),
    'c1': ((1, 1, 10, 11), (6, 1, 3, 3), False, dict(pads=[1, 1, 1, 1])),
    'big_pad': ((1, 2, 3, 3), (2, 2, 2, 2), False, dict(pads=[4, 3, 2, 5])),
}
CONVT = {
    'basic': ((2, 4, 5, 6), (4, 3, 3, 3), True, {}),
    'stride_pad': ((1, 4, 5, 6), (4, 3, 3, 4), False, dict(strides=[2, 3], pads=[1, 0, 2, 1],
                                                           output_padding=[1, 2])),
    'group_dil': ((1, 6, 5, 6), (6, 2, 3, 2), True, dict(group=3, strides=[2, 2],
                                                         dilations=[2, 3])),
    'depthwise': ((1, 4, 5, 6), (4, 1, 3, 3), False, dict(group=4, strides=[2, 2],
                                                          pads=[1, 1, 1, 1])),
    '1d': ((2, 3, 7), (3, 2, 4), False, dict(strides=[2])),
    '3d': ((1, 2, 3, 4, 5), (2, 3, 2, 3, 2), True, dict(strides=[2, 1, 2],
                                                        pads=[0, 1, 1, 1, 0, 0])),
    'output_shape': ((1, 2, 5, 6), (2, 3, 3, 3), False, dict(strides=[2, 2],
                                                             output_shape=[11, 14])),
    'kernel_1': ((1, 3, 4, 4), (3, 5, 1, 1), True, dict(strides=[2, 2])),
}
# name: (equation, operand shapes, dtype)
EINSUM = {
    'mm': ('ij,jk->ik', [(5, 6), (6, 7)], 'f32'),
    'attn': ('bhqd,bhkd->bhqk', [(2, 3, 5, 8), (2, 3, 6, 8)], 'f32'),
    'implicit': ('ba,ac', [(2, 3), (3, 5)], 'f32'),
    'ellipsis': ('...ij,...jk->...ik', [(2, 3, 5, 6), (2, 3, 6, 4)], 'f32'),
    'trace': ('ii', [(5, 5)], 'f32'), 'diag': ('ii->i', [(5, 5)], 'f32'),
    'three': ('ij,jk,kl->il', [(3, 4), (4, 5), (5, 2)], 'f32'),
    'outer': ('i,j->ij', [(3,), (4,)], 'f32'), 'int64': ('ij,jk->ki', [(3, 4), (4, 5)], 'i64'),
    'sum_all_f64': ('ij->', [(3, 4)], 'f64'), 'spaces': ('ij, ij -> i', [(3, 4), (3, 4)], 'f32'),
    'transpose': ('abc->cab', [(2, 3, 4)], 'f32'),
    'batch_dot': ('bi,bi->b', [(4, 6), (4, 6)], 'f32'),
}


def qrand(shape, dt):
    info = np.iinfo(DT[dt])
    return rnd(shape, dt) if not shape else ints(info.min, info.max + 1, shape, dt)


def linear():
    family('lin')
    for name, (a, b, dt) in MATMUL.items():
        case(f'matmul_{name}', 'MatMul', [rnd(a, dt), rnd(b, dt)])
    case('matmul_k0', 'MatMul', [rnd((3, 0)), rnd((0, 4))], zero_ok=True)
    for name, (a, b, c, attrs) in GEMM.items():
        dt = 'f64' if name == 'f64' else 'f32'
        case(f'gemm_{name}', 'Gemm', [rnd(a, dt), rnd(b, dt)] + ([rnd(c, dt)] if c else []),
             attrs, opset=11 if name == 'nobias' else OPSET)
    case('gemm_i64', 'Gemm', [rnd((5, 6), 'i64'), rnd((7, 6), 'i64'), rnd((5, 7), 'i64')],
         dict(transB=1), ref='ORT has no int64 Gemm kernel')
    case('gemm_const_b', 'Gemm', [rnd((4, 9)), C(rnd((9, 6))), C(rnd((6,)))])
    for k, (name, (x, w, bias, attrs)) in enumerate(CONV.items()):
        ins = [rnd(x), rnd(w)] + ([rnd(w[:1])] if bias else [])
        case(f'conv_{name}', 'Conv', [ins[0]] + [C(v) if k % 2 else v for v in ins[1:]], attrs)
    case('conv_depthwise_dil_same', 'Conv', [rnd((1, 4, 15, 14)), rnd((8, 1, 5, 3)), rnd((8,))],
         dict(group=4, dilations=[2, 3], auto_pad='SAME_LOWER'),
         ref='ORT rejects dilations with auto_pad SAME_*')

    for name, (x, w, bias, attrs) in CONVT.items():
        ch = w[1] * attrs.get('group', 1)
        case(f'convt_{name}', 'ConvTranspose',
             [rnd(x), rnd(w)] + ([rnd((ch,))] if bias else []), attrs)
    for pad in ('SAME_UPPER', 'SAME_LOWER'):
        case(f'convt_{pad.lower()}', 'ConvTranspose', [rnd((1, 2, 5, 6)), rnd((2, 3, 4, 3))],
             dict(strides=[2, 2], auto_pad=pad))
    for name, (eq, shapes, dt) in EINSUM.items():
        case(f'einsum_{name}', 'Einsum', [rnd(s, dt) for s in shapes], dict(equation=eq), opset=12)
    case('einsum_implicit_upper', 'Einsum', [rnd((2, 3)), rnd((4, 5))], dict(equation='bA,Ba'),
         opset=12, ref='ORT rejects upper-case labels in implicit mode')
    case('einsum_ellipsis_bcast', 'Einsum', [rnd((2, 1, 5, 6)), rnd((3, 6, 4))],
         dict(equation='...ij,...jk->...ik'), opset=12,
         ref='ORT does not broadcast size-1 ellipsis dimensions')
    # MatMulInteger / ConvInteger over the full 8-bit ranges, with per-tensor/per-row zero points.
    case('mmi_u8_zp', 'MatMulInteger', [qrand((2, 5, 300), 'u8'), qrand((300, 7), 'u8'),
                                        qrand((), 'u8'), qrand((7,), 'u8')])
    case('mmi_s8', 'MatMulInteger', [qrand((5, 30), 'i8'), qrand((30, 7), 'i8')])
    case('mmi_u8s8', 'MatMulInteger', [qrand((3, 5, 30), 'u8'), qrand((30, 7), 'i8'),
                                       qrand((1,), 'u8'), qrand((), 'i8')],
         ref='ORT\'s u8 x s8 kernel on x86 CPUs without VNNI saturates pairs of products to '
             'int16 (VPMADDUBSW), so its result depends on the machine')
    case('convi_u8', 'ConvInteger', [qrand((2, 4, 9, 8), 'u8'), qrand((6, 4, 3, 3), 'u8'),
                                     qrand((), 'u8'), qrand((), 'u8')],
         dict(pads=[1, 2, 0, 1], strides=[2, 1]))
    case('convi_u8_group_zp_per_channel', 'ConvInteger',
         [qrand((2, 4, 9, 8), 'u8'), qrand((6, 2, 3, 3), 'u8'), qrand((), 'u8'), qrand((6,), 'u8')],
         dict(group=2, pads=[1, 2, 0, 1], strides=[2, 1]),
         ref='ORT supports only per-tensor weight zero points in ConvInteger')
    case('convi_s8_1d', 'ConvInteger', [qrand((1, 3, 20), 'i8'), qrand((4, 3, 5), 'i8')],
         dict(dilations=[2], auto_pad='SAME_UPPER'), ref='ORT has no int8 ConvInteger kernel')


# ---- reductions, softmax, normalisations, pools -------------------------------------------------

REDUCE = ['ReduceSum', 'ReduceMean', 'ReduceMax', 'ReduceMin', 'ReduceProd', 'ReduceL1',
          'ReduceL2', 'ReduceLogSumExp', 'ReduceSumSquare', 'ReduceLogSum']
# axes as an input from opset 13 for ReduceSum, from 18 for the others
AXES_INPUT = {op: 13 if op == 'ReduceSum' else 18 for op in REDUCE}
# name: (axes or None, keepdims, noop_with_empty_axes)
REDUCE_CFG = {'ax1m1': ([1, -1], 0, 0), 'ax20': ([2, 0], 1, 0), 'all': (None, 1, 0),
              'all_nokeep': (None, 0, 0), 'noop': (None, 1, 1), 'ax3': ([3], 0, 0)}
# name: (op, opset, attributes, outputs), on one (1, 2, 7, 8) input
POOL = {
    'mp_idx': ('MaxPool', 12, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), 2),
    'mp_idx_colmajor': ('MaxPool', 12, dict(kernel_shape=[3, 2], strides=[2, 1],
                                            storage_order=1), 2),
    'mp_ceil_dil': ('MaxPool', 12, dict(kernel_shape=[2, 3], strides=[2, 2], dilations=[2, 1],
                                        ceil_mode=1), 2),
    'mp_same_lower_s2': ('MaxPool', 12, dict(kernel_shape=[3, 2], strides=[2, 3],
                                             auto_pad='SAME_LOWER'), 1),
    'mp_same_upper_s2': ('MaxPool', 12, dict(kernel_shape=[3, 2], strides=[2, 3],
                                             auto_pad='SAME_UPPER'), 1),
    'mp_valid': ('MaxPool', 12, dict(kernel_shape=[3, 2], strides=[2, 3], auto_pad='VALID'), 1),
    'mp_default_strides': ('MaxPool', 12, dict(kernel_shape=[2, 2]), 1),
    'ap_ceil_pad': ('AveragePool', 11, dict(kernel_shape=[3, 3], strides=[2, 2],
                                            pads=[1, 1, 1, 1], ceil_mode=1), 1),
    'ap_pad_inc': ('AveragePool', 11, dict(kernel_shape=[3, 3], strides=[2, 2],
                                           pads=[1, 1, 1, 1], count_include_pad=1), 1),
    'ap_same_lower': ('AveragePool', 11, dict(kernel_shape=[3, 2], strides=[2, 3],
                                              auto_pad='SAME_LOWER'), 1),
    'ap_same_lower_inc': ('AveragePool', 11, dict(kernel_shape=[3, 2], strides=[2, 3],
                                                  auto_pad='SAME_LOWER', count_include_pad=1), 1),
    'ap_same_upper': ('AveragePool', 11, dict(kernel_shape=[2, 3], strides=[1, 2],
                                              auto_pad='SAME_UPPER'), 1),
    'ap_dil19': ('AveragePool', 19, dict(kernel_shape=[2, 2], dilations=[2, 3],
                                         pads=[1, 1, 1, 1], count_include_pad=1), 1),
    'lp_11': ('LpPool', 11, dict(kernel_shape=[2, 3], strides=[1, 2], pads=[1, 1, 0, 1], p=3), 1),
    'lp_18_dil': ('LpPool', 18, dict(kernel_shape=[2, 2], dilations=[2, 2], p=1), 1),
    'lp_18_ceil': ('LpPool', 18, dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), 1),
    'glp_p3': ('GlobalLpPool', 11, dict(p=3), 1),
    'gap': ('GlobalAveragePool', 11, {}, 1), 'gmp': ('GlobalMaxPool', 11, {}, 1),
}


def reduce_norm_pool():
    family('red')
    x = rnd((2, 3, 4, 5))
    for op in REDUCE:
        xin = np.abs(x) + 0.1 if op == 'ReduceLogSum' else x
        for name, (axes, keep, noop) in REDUCE_CFG.items():
            nm = op[6:].lower()
            if not noop:  # opset 11: axes is an attribute, noop_with_empty_axes does not exist
                case(f'{nm}_11_{name}', op, [xin], dict(keepdims=keep, **{'axes': axes} if axes
                                                       else {}), opset=11)
            ref = 'ORT fails on noop_with_empty_axes without axes' if noop else None
            case(f'{nm}_{AXES_INPUT[op]}_{name}', op, [xin] + ([C(I64(*axes))] if axes else []),
                 dict(keepdims=keep, noop_with_empty_axes=noop), opset=AXES_INPUT[op], ref=ref)
    xi = rnd((3, 4, 5), 'i64')
    for op in ['ReduceSum', 'ReduceMax', 'ReduceMin', 'ReduceProd', 'ReduceMean']:
        for dt, axes in (('i64', [1]), ('i32', [0, 2])):
            case(f'{op[6:].lower()}_{dt}', op, [xi.astype(DT[dt])], {'axes': axes}, opset=11)
    case('max_u8', 'ReduceMax', [rnd((3, 4), 'u8')], {'axes': [1]}, opset=12)
    case('sum_f64', 'ReduceSum', [x.astype(np.float64), C(I64(1))], opset=13)
    case('logsumexp_big', 'ReduceLogSumExp', [F32(1000, 1000.5, -1000, 3).reshape(2, 2)],
         {'axes': [1]}, opset=11)
    case('sum_empty_axis', 'ReduceSum', [rnd((2, 0, 3)), C(I64(1))], opset=13, zero_ok=True)
    case('mean_f16', 'ReduceMean', [x.astype(np.float16)], {'axes': [1]}, opset=13)
    case('max_18_f16', 'ReduceMax', [x.astype(np.float16), C(I64(1))], opset=18)

    for op in ['ArgMax', 'ArgMin']:
        nm = op.lower()
        case(f'{nm}_11', op, [x], {'axis': 2, 'keepdims': 0}, opset=11)
        case(f'{nm}_i32_last', op, [ints(0, 3, (4, 6), 'i32')], {'axis': 1, 'select_last_index': 1},
             opset=13)
        case(f'{nm}_i64_first', op, [ints(0, 3, (4, 6))], {'axis': 0}, opset=13)
        case(f'{nm}_f64', op, [x.astype(np.float64)], {'axis': -1}, opset=13)
        case(f'{nm}_f16', op, [x.astype(np.float16)], {'axis': 1}, opset=13)

    for op in ['Softmax', 'LogSoftmax', 'Hardmax']:
        nm = op.lower()
        case(f'{nm}_11_default', op, [x], opset=11)  # opset 11: coerced to 2-D at axis
        case(f'{nm}_11_axis2', op, [x], {'axis': 2}, opset=11)
        case(f'{nm}_11_axis0', op, [x], {'axis': 0}, opset=11)
        case(f'{nm}_13_axis1', op, [x], {'axis': 1}, opset=13)
        case(f'{nm}_13_f64', op, [x.astype(np.float64)], opset=13,
             ref='ORT has no double Hardmax kernel' if op == 'Hardmax' else None)
    case('hardmax_ties', 'Hardmax', [F32(1, 3, 3, 0, 2, 2, 2, 2).reshape(2, 4)], opset=13)
    case('softmax_f16', 'Softmax', [x.astype(np.float16)], opset=13)
    case('softmax_large', 'Softmax', [rnd((3, 7), scale=40)], opset=13)

    def stats(c, dt='f32'):  # scale, bias, mean, var
        return [rnd((c,), dt), rnd((c,), dt), rnd((c,), dt),
                (np.abs(rnd((c,))) + .1).astype(DT[dt])]
    case('bn_11', 'BatchNormalization', [x] + stats(3), {'epsilon': 1e-3}, opset=11)
    case('bn_consts', 'BatchNormalization', [x] + [C(v) for v in stats(3)], opset=15)
    case('bn_3d', 'BatchNormalization', [rnd((2, 3, 4, 2, 2))] + stats(3), opset=14)
    case('bn_2d', 'BatchNormalization', [rnd((4, 3))] + stats(3), opset=14)
    case('bn_f64', 'BatchNormalization', [x.astype(np.float64)] + stats(3, 'f64'), opset=15)
    case('bn_f16', 'BatchNormalization', [x.astype(np.float16)] + stats(3, 'f16'), opset=15)
    case('in_1d', 'InstanceNormalization', [rnd((2, 3, 7)), rnd((3,)), rnd((3,))])
    case('in_2d', 'InstanceNormalization', [x, rnd((3,)), rnd((3,))], {'epsilon': 1e-2})
    case('in_f64', 'InstanceNormalization', [rnd((2, 3, 7), 'f64'), rnd((3,), 'f64'),
                                             rnd((3,), 'f64')],
         ref='ORT has no double InstanceNormalization kernel')
    case('ln_bias_none', 'LayerNormalization', [x, rnd((4, 5))], {'axis': 2}, outs=3)
    case('ln_bcast', 'LayerNormalization', [x, rnd((1, 5)), rnd((5,))], {'axis': 2},
         ref='ORT rejects a scale that broadcasts to X.shape[axis:]')
    case('ln_f64', 'LayerNormalization', [x.astype(np.float64), rnd((5,), 'f64'),
                                          rnd((5,), 'f64')], outs=3)
    case('ln_mean_only', 'LayerNormalization', [x, rnd((5,))], outs=2)
    case('ln_axis0', 'LayerNormalization', [x, rnd((2, 3, 4, 5))], {'axis': 0, 'epsilon': 1e-3})
    case('ln_f16', 'LayerNormalization', [x.astype(np.float16), rnd((5,), 'f16')], outs=3)
    case('gn_18', 'GroupNormalization', [rnd((2, 6, 3, 3)), rnd((3,)), rnd((3,))],
         {'num_groups': 3}, opset=18)
    case('gn_21', 'GroupNormalization', [rnd((2, 6, 3, 3)), rnd((6,)), rnd((6,))],
         {'num_groups': 3, 'epsilon': 1e-3}, opset=21)
    case('lpn_p1', 'LpNormalization', [x], {'axis': 1, 'p': 1})
    case('lpn_p2_zero_row', 'LpNormalization', [F32(0, 0, 3, 4).reshape(2, 2)], {'axis': 1})
    case('mvn_axes', 'MeanVarianceNormalization', [x], {'axes': [1, 3]})
    case('mvn_default', 'MeanVarianceNormalization', [x])

    x4 = rnd((1, 2, 7, 8))
    for name, (op, opset, attrs, outs) in POOL.items():
        case(name, op, [x4], attrs, opset=opset, outs=outs)
    case('ap_ceil_pad_inc', 'AveragePool', [x4], dict(kernel_shape=[3, 3], strides=[2, 2],
                                                      pads=[1, 1, 1, 1], ceil_mode=1,
                                                      count_include_pad=1), opset=11,
         ref='ORT counts the window part past the padding under ceil_mode')
    case('mp_idx_3d', 'MaxPool', [rnd((2, 2, 5, 4, 6))], dict(
        kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[0, 1, 1, 1, 1, 0]), opset=12, outs=2)
    case('mp_1d_idx', 'MaxPool', [rnd((2, 3, 9))], dict(kernel_shape=[3], strides=[2],
                                                         pads=[1, 1]), opset=12, outs=2)
    case('mp_i8', 'MaxPool', [rnd((1, 2, 6, 6), 'i8')], dict(kernel_shape=[2, 2], strides=[2, 2]),
         opset=12)
    case('mp_f64', 'MaxPool', [x4.astype(np.float64)], dict(kernel_shape=[2, 2]), opset=12)
    case('mp_f16', 'MaxPool', [x4.astype(np.float16)], dict(kernel_shape=[2, 2]), opset=12)
    case('ap_1d', 'AveragePool', [rnd((2, 3, 9))], dict(kernel_shape=[4], strides=[3],
                                                         pads=[2, 1]), opset=11)
    case('ap_f16', 'AveragePool', [x4.astype(np.float16)], dict(kernel_shape=[2, 2]), opset=11)
    case('ap_3d', 'AveragePool', [rnd((1, 2, 5, 4, 6))], dict(kernel_shape=[2, 2, 3],
                                                               strides=[1, 2, 2]), opset=11)
    case('glp_5d', 'GlobalLpPool', [rnd((2, 3, 4, 2, 2))], opset=11)
    case('gap_5d', 'GlobalAveragePool', [rnd((2, 3, 4, 2, 2))], opset=11)
    case('gmp_3d', 'GlobalMaxPool', [rnd((2, 3, 4))], opset=11)


# ---- layout, shape, indexing ---------------------------------------------------------------------

LAYOUT_DTS = ['f32', 'i64', 'u8', 'bool', 'f16', 'i32', 'f64']
BIG, SMALL = np.iinfo(np.int64).max, np.iinfo(np.int64).min
# (shape, starts, ends, axes, steps, why the reference is the oracle)
SLICE = [((20, 10, 5), (0, 0), (3, 10), (0, 1), (1, 1), None),
         ((20, 10, 5), (-1,), (SMALL,), (0,), (-1,), None),
         ((20, 10, 5), (5, -2), (BIG, 0), (1, 2), (3, -2), None),
         ((20, 10, 5), (100,), (-100,), (0,), (-3,), None),
         ((20, 10, 5), (-100,), (100,), (-1,), (2,), None),
         ((20, 10, 5), (3,), (3,), (0,), (1,), None),
         ((20, 10, 5), (0, 1, 2), (BIG, BIG, BIG), (2, 0, 1), (BIG, SMALL, 4),
          'ORT keeps one element of a negative-step slice whose end lies past its start'),
         ((7,), (6,), (SMALL,), (0,), (SMALL,), None)]
# (input shape, shape, allowzero)
RESHAPE = [((2, 3, 4), (4, -1), 0), ((2, 3, 4), (0, 0, -1, 1), 0), ((2, 3, 4), (-1,), 0),
           ((1, 0, 3), (0, -1), 0), ((2, 0, 4), (2, 0, 5), 1), ((6,), (1, 2, 1, 3), 0)]


def layout():
    family('lay')
    for r in range(1, 6):
        shape = tuple(int(d) for d in ints(1, 5, r))
        for k in range(2):
            case(f'transpose_r{r}_{k}', 'Transpose', [rnd(shape, LAYOUT_DTS[(r + k) % 7])],
                 {'perm': [int(p) for p in S.rng.permutation(r)]})
    case('transpose_default', 'Transpose', [rnd((2, 3, 4, 5))])
    for i, (shape, new, az) in enumerate(RESHAPE):
        case(f'reshape_{i}', 'Reshape', [rnd(shape, LAYOUT_DTS[i]), C(I64(*new))],
             {'allowzero': az} if az else {}, opset=14)
    for ax in range(-3, 4):
        case(f'flatten_{ax + 3}', 'Flatten', [rnd((2, 3, 4), 'i64')], {'axis': ax}, opset=13)
    case('squeeze_attr', 'Squeeze', [rnd((1, 3, 1, 2))], {'axes': [0, -2]}, opset=11)
    case('squeeze_all_11', 'Squeeze', [rnd((1, 3, 1, 2))], opset=11)
    case('squeeze_all_13', 'Squeeze', [rnd((1, 3, 1, 2), 'i32')], opset=13)
    case('squeeze_input', 'Squeeze', [rnd((1, 3, 1, 2)), C(I64(2))], opset=13)
    case('unsqueeze_attr', 'Unsqueeze', [rnd((3, 2))], {'axes': [0, 3]}, opset=11)
    case('unsqueeze_input', 'Unsqueeze', [rnd((3, 2), 'bool'), C(I64(-1, 1))], opset=13)
    case('unsqueeze_scalar', 'Unsqueeze', [rnd(()), C(I64(0))], opset=13)
    for ax in range(-3, 3):
        shapes = [tuple(j + 1 if d == ax % 3 else s for d, s in enumerate((2, 3, 4)))
                  for j in range(3)]
        xs = [rnd(s, 'f16' if ax % 2 else 'i64') for s in shapes]
        case(f'concat_{ax + 3}', 'Concat', [xs[0], C(xs[1]), xs[2]], {'axis': ax}, opset=13)
    case('split_11_attr', 'Split', [rnd((2, 7))], {'axis': 1, 'split': [3, 4]}, opset=11, outs=2)
    case('split_11_equal', 'Split', [rnd((6, 2), 'i32')], opset=11, outs=3)
    case('split_13_input', 'Split', [rnd((2, 7)), C(I64(1, 0, 6))], {'axis': -1}, opset=13, outs=3)
    case('split_18_num', 'Split', [rnd((2, 7))], {'axis': 1, 'num_outputs': 3}, opset=18, outs=3)
    case('split_18_uneven', 'Split', [rnd((10, 2), 'u8')], {'num_outputs': 4}, opset=18, outs=4)
    for i, (shape, s, e, a, st, ref) in enumerate(SLICE):
        case(f'slice_{i}', 'Slice', [rnd(shape, LAYOUT_DTS[i % 7])] +
             [C(I64(*v)) for v in (s, e, a, st)], opset=13, ref=ref)
    case('slice_noaxes_i32', 'Slice', [rnd((4, 5)), C(np.array([1, -3], np.int32)),
                                       C(np.array([4, -1], np.int32))], opset=11)
    for ax in range(-3, 3):
        for it in ('i64', 'i32'):
            case(f'gather_{ax + 3}_{it}', 'Gather',
                 [rnd((3, 4, 5), 'f16'), ints(-3, 3, (2, 2), it)], {'axis': ax}, opset=13)
    case('gather_scalar_index', 'Gather', [rnd((3, 4)), np.array(-1, np.int64)], {'axis': 1})
    case('gather_const_data', 'Gather', [C(rnd((5, 3), 'i64')), I64(4, 0, -5)])
    for ax in range(-2, 3):
        ishape = [3, 4, 2]
        ishape[ax] = 5
        case(f'gather_elements_{ax + 2}', 'GatherElements',
             [rnd((3, 4, 2), 'i32'), ints(-(3, 4, 2)[ax], (3, 4, 2)[ax], ishape)], {'axis': ax})
    for red in ['none', 'add', 'mul', 'max', 'min']:
        for dt in ('f32', 'i64'):
            # with reduction 'none' duplicate indices make the result order-dependent
            idx = (np.stack([S.rng.permutation(4)[:3] for _ in range(6)], 1).reshape(3, 3, 2)
                   if red == 'none' else ints(-4, 4, (3, 3, 2)))
            case(f'scatter_elements_{red}_{dt}', 'ScatterElements',
                 [rnd((3, 4, 2), dt), idx, rnd((3, 3, 2), dt)], {'axis': 1, 'reduction': red},
                 opset=18)
    case('gathernd_b0', 'GatherND', [rnd((3, 4, 5)), ints(-3, 3, (2, 3, 2))], opset=13)
    case('gathernd_b1', 'GatherND', [rnd((3, 4, 5), 'u8'), ints(0, 4, (3, 2, 1))],
         {'batch_dims': 1}, opset=13)
    case('gathernd_b2', 'GatherND', [rnd((2, 3, 4, 5)), ints(0, 4, (2, 3, 1, 2))],
         {'batch_dims': 2}, opset=13)
    case('gathernd_full', 'GatherND', [rnd((3, 4)), ints(0, 3, (5, 2))], opset=13)
    for red in ['none', 'add', 'mul', 'max', 'min']:
        idx = I64(0, 1, 2, 3) if red == 'none' else I64(0, 1, 2, 3, 0, 1)
        idx = idx.reshape(-1, 2)
        case(f'scatternd_{red}', 'ScatterND', [rnd((3, 4, 2)), idx, rnd((len(idx), 2))],
             {'reduction': red}, opset=18)
    case('scatternd_i32', 'ScatterND',
         [rnd((5,), 'i32'), I64(4, 0).reshape(2, 1), rnd((2,), 'i32')], opset=13)
    for mode in ['constant', 'reflect', 'edge', 'wrap']:
        for i, pads in enumerate([(1, 2, 2, 1), (0, 3, 1, 0), (2, 0, 0, 3)]):
            ins = [rnd((3, 4), 'i64' if i == 1 else 'f32'), C(I64(*pads))]
            if mode == 'constant' and i == 0:
                ins.append(F32(2.5).reshape(()))
            case(f'pad_{mode}_{i}', 'Pad', ins, {'mode': mode}, opset=19)
    case('pad_axes', 'Pad', [rnd((2, 3, 4)), C(I64(1, 1, 0, 1)), None, C(I64(-1, 0))],
         {'mode': 'reflect'}, opset=18)
    case('pad_negative', 'Pad', [rnd((4, 5)), C(I64(-1, 2, 1, -2))], opset=11)
    case('pad_reflect_big', 'Pad', [rnd((3,)), C(I64(2, 2))], {'mode': 'reflect'}, opset=11)
    case('pad_wrap_big', 'Pad', [rnd((3, 2)), C(I64(4, 1, 5, 3))], {'mode': 'wrap'}, opset=19,
         ref='ORT writes garbage where wrap pads exceed the input size')
    case('expand_0', 'Expand', [rnd((3, 1), 'i64'), C(I64(2, 1, 4))], opset=13)
    case('expand_1', 'Expand', [rnd((1, 4)), C(I64(3, 1))], opset=13)
    case('expand_2', 'Expand', [rnd((2, 1, 3)), C(I64(1))], opset=13)
    case('tile_0', 'Tile', [rnd((2, 3), 'bool'), C(I64(2, 3))], opset=13)
    case('tile_1', 'Tile', [rnd((2, 1, 3)), C(I64(1, 4, 0))], opset=13)
    case('cos_i64', 'ConstantOfShape', [C(I64(2, 3))],
         {'value': numpy_helper.from_array(I64(7))})
    case('cos_default', 'ConstantOfShape', [C(I64(4))], zero_ok=True)
    case('cos_scalar_bool', 'ConstantOfShape', [C(np.zeros((0,), np.int64))],
         {'value': numpy_helper.from_array(np.array([True]))})
    for i, (a, b, d, dt) in enumerate([(0, 10, 3, 'i64'), (10, -3, -4, 'i32'),
                                       (1.5, 4.2, 0.3, 'f32'), (5, 1, 1, 'i64'),
                                       (0.0, 1.0, 0.1, 'f64'), (-3, 3, 2, 'i16')]):
        case(f'range_{i}_{dt}', 'Range', [C(np.array(v, DT[dt])) for v in (a, b, d)], opset=11)
    case('dropout_11_mask', 'Dropout', [rnd((3, 4))], {'ratio': 0.3}, opset=11, outs=2,
         ref='ORT returns an all-false Dropout-10 mask in inference; nothing is dropped')
    case('dropout_13_mask', 'Dropout', [rnd((3, 4)), C(np.float32(0.2)), C(np.array(False))],
         opset=13, outs=2)
    for mode, dt in (('DCR', 'f32'), ('CRD', 'f64'), ('DCR', 'u8')):
        case(f'd2s_{mode}_{dt}', 'DepthToSpace', [rnd((2, 12, 3, 2), dt)],
             {'blocksize': 2, 'mode': mode}, opset=13)
    case('s2d_f16', 'SpaceToDepth', [rnd((2, 3, 6, 4), 'f16')], {'blocksize': 2}, opset=13)
    case('s2d_3', 'SpaceToDepth', [rnd((1, 2, 3, 6))], {'blocksize': 3}, opset=13)
    for up in (0, 1):
        for k in (-2, 0, 1, 7):
            case(f'trilu_{up}_{k + 2}', 'Trilu', [rnd((2, 3, 5)), C(I64(k).reshape(()))],
                 {'upper': up}, opset=14, zero_ok=True)
    case('trilu_no_k', 'Trilu', [rnd((4, 4), 'i64')], opset=14)
    case('nonzero_const', 'NonZero', [C(rnd((3, 4), 'i32') * (S.rng.random((3, 4)) > 0.5))])
    case('onehot_0', 'OneHot', [I64(0, 3, -1, 2, -4), C(np.int64(4)), I64(-1, 5)], opset=11)
    case('onehot_1', 'OneHot', [np.array([[1, 2], [0, -2]], np.int32), C(np.float32(3)),
                                F32(0.5, 2.0)], {'axis': 1}, opset=11)
    case('onehot_2', 'OneHot', [F32(1, 2, 0, 3).reshape(2, 2), C(np.float32(5)), F32(0, 1)],
         {'axis': 0}, opset=11)
    case('onehot_3', 'OneHot', [ints(-4, 4, (2, 3)), C(np.float32(4)),
                                np.array([3, -7], np.int32)], {'axis': -2}, opset=11)
    case('onehot_out_of_range', 'OneHot', [I64(0, 5, -6, 2), C(np.int64(4)), F32(0, 1)],
         opset=11)
    for ex in (0, 1):
        for rv in (0, 1):
            for ax, dt in ((0, 'f32'), (-1, 'i64'), (1, 'i32')):
                case(f'cumsum_{ex}{rv}_{ax + 1}_{dt}', 'CumSum',
                     [rnd((3, 4, 2), dt), C(np.array(ax, np.int64))],
                     {'exclusive': ex, 'reverse': rv}, opset=14)
    case('cumsum_f64_axis_i32', 'CumSum', [rnd((3, 4), 'f64'), C(np.array(1, np.int32))],
         opset=11)
    for k in (-2, 0, 3, 9):
        case(f'eyelike_{k + 2}', 'EyeLike', [rnd((3, 5))], {'k': k, 'dtype': TP.INT64},
             zero_ok=True)
    case('eyelike_same', 'EyeLike', [rnd((4, 4), 'f64')])
    xs = F32(3, 1, 3, 2, 1, 5, 0, 0, 0, 0, 0, 0, 9, -1, 2, 2, 8, 7).reshape(3, 6)
    for largest in (0, 1):
        for ax, k in ((1, 3), (0, 2), (-1, 6), (1, 0)):
            case(f'topk_{largest}_{ax + 1}_{k}', 'TopK', [xs, C(I64(k))],
                 {'axis': ax, 'largest': largest}, opset=11, outs=2)
    case('topk_i32', 'TopK', [rnd((4, 7), 'i32'), C(I64(4))], opset=11, outs=2)
    case('topk_f32', 'TopK', [rnd((4, 7)), C(I64(3))], outs=2)
    case('topk_nan', 'TopK', [F32(1, np.nan, 3, -np.inf, np.nan), C(I64(3))], opset=11, outs=2,
         ref='NaN order is left open; orch ranks NaN highest like the reference (numpy)')
    case('compress_ax0', 'Compress', [rnd((4, 3)), C(np.array([1, 0, 1], bool))], {'axis': 0})
    case('compress_ax1', 'Compress', [rnd((2, 3, 2), 'i64'), C(np.array([0, 1, 1], bool))],
         {'axis': -2})
    case('compress_flat', 'Compress', [rnd((2, 3)), C(np.array([0, 1, 1, 0, 1], bool))])
    case('revseq_0', 'ReverseSequence', [rnd((4, 3, 2)), I64(4, 1, 2)],
         {'batch_axis': 1, 'time_axis': 0})
    case('revseq_1', 'ReverseSequence', [rnd((3, 5), 'i32'), I64(1, 5, 3)],
         {'batch_axis': 0, 'time_axis': 1})
    case('size_empty', 'Size', [rnd((3, 0, 2))], opset=13)
    case('shape_15', 'Shape', [rnd((3, 4, 2, 1))], {'start': -3, 'end': -1}, opset=15)
    case('identity_u8', 'Identity', [rnd((3, 4), 'u8')])


# ---- resize -------------------------------------------------------------------------------------

NEAREST_MODES = ['round_prefer_floor', 'round_prefer_ceil', 'floor', 'ceil']
TRANSFORMS = ['half_pixel', 'pytorch_half_pixel', 'align_corners', 'asymmetric']
GRID_SCALES = [(1, 1, 2.0, 3.0), (1, 1, 0.5, 0.6), (1, 1, 1.7, 0.8), (1, 1, 1.0, 2.5)]


def resize_ref(shape, axes, scales, sizes, roi, attrs):
    """Why ORT cannot be the oracle for this Resize (None when it can)."""
    full = [1.0] * len(shape)
    for a, v in zip(axes, scales if scales is not None else
                    [z / shape[a] for a, z in zip(axes, sizes)]):
        full[a] = float(v)
    r, mode, outer = len(shape), attrs.get('mode', 'nearest'), full[:2] == [1.0, 1.0]
    ct = attrs.get('coordinate_transformation_mode', 'half_pixel')
    if mode == 'linear' and not (r in (2, 3) or (r in (4, 5) and outer)) or \
            mode == 'cubic' and not (r == 2 or (r == 4 and outer)):
        return 'ORT resizes linear/cubic only over the two innermost axes'
    # input*scale with the float32 scale's exact value: 5 * 0.6f is not 3, which tips ties
    lengths = [shape[a] * float(s) for a, s in zip(axes, np.float32(scales))] \
        if scales is not None else []
    if attrs.get('keep_aspect_ratio_policy', 'stretch') != 'stretch' or any(v % 1 for v in lengths):
        return "ORT uses the integer output length where the spec's formulas use input*scale"
    if mode == 'nearest' and sizes is not None:
        return 'ORT derives scales from sizes in float32, which tips exact ties of nearest'
    roi = roi.value if isinstance(roi, C) else roi
    if ct == 'tf_crop_and_resize' and any(full[a] == 1 and (roi[k], roi[k + len(axes)]) != (0, 1)
                                          for k, a in enumerate(axes)):
        return "ORT ignores tf_crop_and_resize's roi on axes of scale 1"
    return None


def rs(name, x, scales=None, sizes=None, roi=None, opset=13, ref=None, **attrs):
    """A Resize case; scales or sizes cover attrs['axes'] (all axes by default)."""
    axes = attrs.get('axes', range(x.ndim))
    ins = [x, roi, None if scales is None else C(F32(*scales))]
    if opset == 11:  # Resize-11 requires roi and scales, empty where unused
        ins[1] = C(F32()) if roi is None else roi
        ins[2] = C(F32()) if scales is None else ins[2]
    case(name, 'Resize', ins + ([C(I64(*sizes))] if sizes is not None else []), attrs,
         opset=opset, ref=ref or resize_ref(x.shape, axes, scales, sizes, roi, attrs))


def resize():
    family('rsz')
    i = 0
    for mode in ['nearest', 'linear', 'cubic']:
        for ct in TRANSFORMS:
            for sc in GRID_SCALES:
                attrs = {'mode': mode, 'coordinate_transformation_mode': ct}
                if mode == 'nearest':
                    attrs['nearest_mode'] = NEAREST_MODES[i % 4]
                rs(f'{i}_{mode}_{ct}', rnd((1, 2, 5, 7)), sc, roi=C(F32()), **attrs)
                i += 1
    rs('1d_linear', rnd((6,)), (1.5,), mode='linear')
    rs('3d_cubic', rnd((2, 5, 4)), (1, 2, 0.75), mode='cubic')
    rs('5d_linear', rnd((1, 2, 3, 4, 3)), (1, 1, 2, 1.5, 0.7), mode='linear')
    rs('sizes_11', rnd((1, 1, 4, 6)), sizes=(1, 1, 7, 3), opset=11, mode='linear',
       coordinate_transformation_mode='align_corners')
    rs('nn_tf_half_11', rnd((1, 1, 4, 6)), (1, 1, 2, 0.5), opset=11, mode='nearest',
       coordinate_transformation_mode='tf_half_pixel_for_nn')
    rs('nn_u8', rnd((1, 3, 4, 4), 'u8'), (1, 1, 2, 2), mode='nearest')
    rs('nn_i64_sizes', rnd((2, 3, 5), 'i64'), sizes=(2, 7, 2), mode='nearest',
       nearest_mode='ceil', ref='ORT has no int64 Resize kernel')
    rs('cubic_exclude', rnd((1, 1, 6, 6)), (1, 1, 0.5, 1.5), mode='cubic', exclude_outside=1,
       cubic_coeff_a=-0.5)
    # roi values keep the sampled coordinates off exact .5 ties
    for name, mode, roi, extra in (('tfcrop', 'linear', (0, 0, 0.2, 0.4, 1, 1, 0.9, 1.3), 3.),
                                   ('tfcrop_nn', 'nearest', (0, 0, -.17, .4, 1, 1, .9, 1.3), -1.)):
        rs(name, rnd((1, 1, 6, 6)), sizes=(1, 1, 4, 5), roi=F32(*roi), mode=mode,
           coordinate_transformation_mode='tf_crop_and_resize', extrapolation_value=extra)
    rs('aa_linear', rnd((1, 1, 10, 8)), (1, 1, 0.4, 0.75), opset=18, mode='linear', antialias=1)
    rs('aa_cubic', rnd((1, 1, 10, 8)), (1, 1, 0.4, 1.5), opset=18, mode='cubic', antialias=1)
    rs('axes_sizes', rnd((1, 2, 5, 4)), sizes=(3, 9), opset=18, mode='linear', axes=[3, 2],
       keep_aspect_ratio_policy='not_larger')
    rs('axes_scales', rnd((1, 2, 5, 4)), (2.5, 1.5), opset=18, mode='cubic', axes=[3, 1])
    rs('not_smaller', rnd((1, 2, 5, 4)), sizes=(1, 1, 3, 9), opset=18, mode='nearest',
       keep_aspect_ratio_policy='not_smaller')
    rs('half_pixel_symmetric', rnd((1, 2, 5, 4)), (1, 1, 1.3, 0.55), opset=19, mode='linear',
       coordinate_transformation_mode='half_pixel_symmetric')
    rs('pytorch_half_pixel_len1', rnd((1, 1, 4, 5)), sizes=(1, 1, 1, 3), mode='cubic',
       coordinate_transformation_mode='pytorch_half_pixel')
    rs('f64', rnd((1, 2, 3, 3), 'f64'), (1, 1, 2, 2), mode='linear',
       ref='ORT has no double Resize kernel')
    for i in range(60):
        resize_random(i)


def resize_random(i):
    """A random Resize: rank 1-4, any mode and transform, scales or sizes, sometimes axes."""
    r = int(S.rng.integers(1, 5))
    shape = tuple(int(v) for v in ints(1, 6, r))
    mode = ['nearest', 'linear', 'cubic'][i % 3]
    ct = str(S.rng.choice(TRANSFORMS + ['half_pixel_symmetric', 'tf_crop_and_resize']))
    attrs = {'mode': mode, 'coordinate_transformation_mode': ct}
    if mode == 'nearest':
        attrs['nearest_mode'] = str(S.rng.choice(NEAREST_MODES))
    if mode == 'cubic':
        attrs['cubic_coeff_a'] = float(S.rng.choice([-0.75, -0.5, -0.6]))
        attrs['exclude_outside'] = int(S.rng.integers(0, 2))
    if mode != 'nearest' and S.rng.random() < 0.3:
        attrs['antialias'] = 1
    axes = list(range(r))
    if r > 1 and S.rng.random() < 0.3:
        axes = sorted(int(a) for a in S.rng.choice(r, int(S.rng.integers(1, r + 1)), False))
        attrs['axes'] = axes
    roi = None
    if ct == 'tf_crop_and_resize':
        lo = uniform(-0.3, 0.5, len(axes))
        roi = np.concatenate([lo, lo + uniform(0.2, 1.0, len(axes))])
        roi = C(roi) if S.rng.random() < 0.5 else roi
        attrs['extrapolation_value'] = 2.0
    scales = sizes = None
    if S.rng.random() < 0.5:
        scales = S.rng.choice([0.5, 0.6, 0.75, 1.0, 1.3, 1.5, 2.0, 2.5, 3.0], len(axes))
    else:
        sizes = [max(1, int(shape[a] * S.rng.uniform(0.4, 3.0))) for a in axes]
        if S.rng.random() < 0.3:
            attrs['keep_aspect_ratio_policy'] = str(S.rng.choice(['not_larger', 'not_smaller']))
    rs(f'random_{i}', rnd(shape), scales, sizes, roi, opset=19, **attrs)


# ---- small graphs -------------------------------------------------------------------------------

def graphs():
    family('graph')
    n = helper.make_node
    x = rnd((2, 3, 4))

    def const(name, v):
        return n('Constant', [], [name], value=numpy_helper.from_array(np.array(v), name))
    graph('torch_reshape', [
        n('Shape', ['x'], ['s']), const('i0', np.int64(0)), n('Gather', ['s', 'i0'], ['d0']),
        const('ax', I64(0)), n('Unsqueeze', ['d0', 'ax'], ['d0u']), const('m1', I64(-1)),
        n('Concat', ['d0u', 'm1'], ['ns'], axis=0), n('Reshape', ['x', 'ns'], ['r']),
        n('Transpose', ['r'], ['y'], perm=[1, 0])], {'x': x})
    graph('shape_slice_range', [
        n('Shape', ['x'], ['s']), const('st', I64(1)), const('en', I64(3)),
        n('Slice', ['s', 'st', 'en'], ['hw']),
        n('ConstantOfShape', ['hw'], ['z'], value=numpy_helper.from_array(F32(2.0))),
        n('Range', ['zero', 'four', 'one'], ['rg']), n('CumSum', ['z', 'ax1'], ['cs']),
        n('Add', ['cs', 'rg'], ['y'])],
        {'x': x, 'zero': C(np.float32(0)), 'four': C(np.float32(4)), 'one': C(np.float32(1)),
         'ax1': C(np.int64(1))})
    graph('resize_split_concat', [
        n('Unsqueeze', ['x', 'a0'], ['x4']), n('Resize', ['x4', '', 'sc'], ['r'], mode='linear'),
        n('Split', ['r'], ['p', 'q'], axis=2), n('Concat', ['q', 'p'], ['y'], axis=3)],
        {'x': x, 'a0': C(I64(0)), 'sc': C(F32(1, 1, 2, 1.5))})
    graph('conv_bn_relu_pool', [
        n('Conv', ['x', 'w', 'b'], ['c'], pads=[1, 1, 1, 1]),
        n('BatchNormalization', ['c', 's', 'bb', 'm', 'v'], ['bn']), n('Relu', ['bn'], ['r']),
        n('MaxPool', ['r'], ['p'], kernel_shape=[2, 2], strides=[2, 2]),
        n('GlobalAveragePool', ['p'], ['g']), n('Flatten', ['g'], ['y'])],
        {'x': rnd((2, 3, 8, 8)), 'w': C(rnd((4, 3, 3, 3))), 'b': C(rnd((4,))),
         's': C(rnd((4,))), 'bb': C(rnd((4,))), 'm': C(rnd((4,))), 'v': C(np.abs(rnd((4,))) + 1)})
    graph('attention', [
        n('MatMul', ['q', 'kt'], ['s']), n('Mul', ['s', 'scale'], ['ss']),
        n('Softmax', ['ss'], ['p'], axis=-1), n('MatMul', ['p', 'v'], ['y'])],
        {'q': rnd((2, 4, 6, 8)), 'kt': rnd((2, 4, 8, 5)), 'v': rnd((2, 4, 5, 8)),
         'scale': C(np.float32(8 ** -0.5))})
    graph('layernorm_gelu_mlp', [
        n('LayerNormalization', ['x', 'g', 'b'], ['ln'], axis=-1),
        n('MatMul', ['ln', 'w1'], ['h']), n('Gelu', ['h'], ['a']),
        n('MatMul', ['a', 'w2'], ['o']), n('Add', ['o', 'x'], ['y'])],
        {'x': rnd((2, 5, 8)), 'g': C(rnd((8,))), 'b': C(rnd((8,))), 'w1': C(rnd((8, 16))),
         'w2': C(rnd((16, 8)))}, opset=20)


# ---- NaN, infinities and signed zeros through every max/min-like op (docs/numerics.md) --------

def plant(x, frac=0.12, signed_zeros=True):
    """x with NaN, +-inf and (signed_zeros) -0.0 / +0.0 planted at random positions: about frac of
    the elements NaN, as many infinite, a few zeros; float dtype kept."""
    x = np.array(x)
    u = S.rng.random(x.shape)
    x[u < frac] = np.nan
    x[(u >= frac) & (u < 1.5 * frac)] = np.inf
    x[(u >= 1.5 * frac) & (u < 2 * frac)] = -np.inf
    if signed_zeros:
        x[(u >= 2 * frac) & (u < 2.2 * frac)] = -0.0
        x[(u >= 2.2 * frac) & (u < 2.4 * frac)] = 0.0
    return x


def np_maxpool(x, kernel, strides=None, pads=None, dilations=None):
    """MaxPool with NaN propagating: a window's first NaN in row-major order wins, else its first
    maximum (ArgMax's rule); indices flat over the whole input, as ONNX defines them. Windows are
    clipped at the padding (pads count as absent, never as -inf)."""
    S_ = len(kernel)
    strides, dilations = strides or [1] * S_, dilations or [1] * S_
    pads = pads or [0] * (2 * S_)
    sp = x.shape[2:]
    out = [(sp[i] + pads[i] + pads[S_ + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
           for i in range(S_)]
    y = np.empty(x.shape[:2] + tuple(out), x.dtype)
    idx = np.empty(y.shape, np.int64)
    flat = x.reshape(-1)
    for pos in np.ndindex(*y.shape):
        n, c, o = pos[0], pos[1], pos[2:]
        best, bi = None, -1
        for k in np.ndindex(*kernel):
            q = [o[i] * strides[i] - pads[i] + k[i] * dilations[i] for i in range(S_)]
            if any(q[i] < 0 or q[i] >= sp[i] for i in range(S_)):
                continue
            fi = int(np.ravel_multi_index((n, c) + tuple(q), x.shape))
            v = flat[fi]
            if best is None or (np.isnan(v) and not np.isnan(best)) or v > best:
                best, bi = v, fi
        y[pos], idx[pos] = best, bi
    return y, idx


def nan_semantics():
    family('nan')
    why_mp = 'ORT and the reference evaluator drop NaN from a MaxPool window; orch propagates it'
    why_red = "ORT's max/min reductions keep a NaN only where it comes first"
    # MaxPool: NaN first, inside and last in windows, padding beside infinities, wide rows (the
    # compiled kernel's vectorised interior), dilation, 1-D and 3-D, half precision.
    pools = [('2d_k3_pad', (1, 3, 9, 11), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
             ('2d_k2_s2', (2, 2, 8, 9), dict(kernel_shape=[2, 2], strides=[2, 2])),
             ('2d_wide', (1, 3, 12, 45), dict(kernel_shape=[3, 3], strides=[1, 1],
                                             pads=[1, 1, 1, 1])),
             ('2d_dil', (1, 2, 10, 23), dict(kernel_shape=[2, 3], dilations=[2, 1],
                                            strides=[1, 2], pads=[0, 1, 1, 0])),
             ('1d', (2, 3, 17), dict(kernel_shape=[4], strides=[1], pads=[2, 1])),
             ('3d', (1, 2, 5, 6, 7), dict(kernel_shape=[2, 2, 3], strides=[1, 2, 1]))]
    for name, shape, attrs in pools:
        x = plant(rnd(shape))
        ks = attrs['kernel_shape']
        def mp(a, ks=ks, attrs=attrs):
            return np_maxpool(a, ks, attrs.get('strides'), attrs.get('pads'),
                              attrs.get('dilations'))
        case(f'maxpool_{name}', 'MaxPool', [x], attrs, opset=12,
             expect=(why_mp, lambda a: mp(a)[:1]))
        case(f'maxpool_{name}_idx', 'MaxPool', [x], attrs, opset=12, outs=2,
             expect=(why_mp, lambda a: mp(a)))
    x16 = plant(rnd((1, 2, 7, 9))).astype(np.float16)
    case('maxpool_f16', 'MaxPool', [x16], dict(kernel_shape=[3, 2], strides=[2, 1]), opset=12,
         expect=(why_mp, lambda a: np_maxpool(a, [3, 2], [2, 1])[:1]))
    # Every 3x3 window holds exactly one NaN, in its first, last or middle column in turn.
    one = rnd((1, 1, 3, 27))
    one[0, 0, 1, np.arange(0, 27, 3)] = np.nan
    case('maxpool_one_nan_per_window', 'MaxPool', [one], dict(kernel_shape=[3, 3]), opset=12,
         expect=(why_mp, lambda a: np_maxpool(a, [3, 3])[:1]))
    for dt in ('f32', 'f16', 'f64'):
        case(f'globalmaxpool_{dt}', 'GlobalMaxPool',
             [plant(rnd((2, 3, 4, 5)), 0.02).astype(DT[dt])], opset=11,
             ref="ORT's GlobalMaxPool drops NaN")

    # ReduceMax / ReduceMin over inner, outer, middle and all axes; rows without NaN keep their
    # infinities; half and double.
    xr = plant(rnd((4, 5, 19)), 0.03)
    for op in ('ReduceMax', 'ReduceMin'):
        nm = op[6:].lower()
        for tag, axes, keep in (('inner', [2], 1), ('outer', [0], 0), ('mid', [1], 1),
                                ('all', None, 0), ('two', [0, 2], 1)):
            ins = [xr] + ([C(I64(*axes))] if axes else [])
            case(f'reduce{nm}_{tag}', op, ins, dict(keepdims=keep), opset=18, ref=why_red)
        case(f'reduce{nm}_f16', op, [xr.astype(np.float16), C(I64(2))], opset=18, ref=why_red)
        case(f'reduce{nm}_f64', op, [xr.astype(np.float64), C(I64(1))], opset=18, ref=why_red)
        case(f'reduce{nm}_13', op, [xr], dict(axes=[2]), opset=13, ref=why_red)

    # ArgMax / ArgMin: NaN counts as the extreme (numpy's rule), first or last of several NaNs;
    # ties between infinities.
    xa = plant(rnd((6, 7, 9)), 0.06)
    xa[0, 0, :] = np.inf
    xa[1, 1, :] = np.nan
    for op in ('ArgMax', 'ArgMin'):
        for axis in (0, 1, -1):
            for last in (0, 1):
                case(f'{op.lower()}_ax{axis % 3}_last{last}', op, [xa],
                     dict(axis=axis, keepdims=axis % 2, select_last_index=last), opset=13,
                     ref="ORT's ArgMax/ArgMin keep a NaN only where it comes first")
        case(f'{op.lower()}_f16', op, [xa.astype(np.float16)], dict(axis=2), opset=13,
             ref="ORT's ArgMax/ArgMin keep a NaN only where it comes first")
    case('hardmax', 'Hardmax', [xa], dict(axis=2), opset=13,
         ref="ORT's Hardmax keeps a NaN only where it comes first")

    # Max / Min, two and three inputs with broadcasting; ORT propagates NaN as orch does.
    a, b, c = plant(rnd((3, 1, 7))), plant(rnd((4, 7))), plant(rnd((7,)))
    for op in ('Max', 'Min'):
        case(f'{op.lower()}_2', op, [a, b])
        case(f'{op.lower()}_3', op, [a, b, c])
        case(f'{op.lower()}_3_f64', op, [a.astype(np.float64), b.astype(np.float64),
                                         c.astype(np.float64)])
        case(f'{op.lower()}_const', op, [a, C(plant(rnd((4, 7))))])

    # Clip: NaN input with constant and run-time bounds; a NaN bound is no bound (ORT's rule).
    xc = plant(rnd((5, 8), scale=2))
    for tag, lo, hi in (('const', C(np.float32(-0.5)), C(np.float32(1))),
                        ('input', np.float32(-0.5), np.float32(1)),
                        ('nan_lo_const', C(np.float32(np.nan)), C(np.float32(1))),
                        ('nan_hi_const', C(np.float32(-0.5)), C(np.float32(np.nan))),
                        ('nan_lo_input', np.float32(np.nan), np.float32(1)),
                        ('nan_hi_input', np.float32(-0.5), np.float32(np.nan)),
                        ('zero_bounds', C(np.float32(0)), C(np.float32(-0.0)))):
        case(f'clip_{tag}', 'Clip', [xc, lo, hi], zero_ok=tag == 'zero_bounds')
    case('clip_f16_input', 'Clip', [xc.astype(np.float16), np.float16(-0.5), np.float16(1)])

    # Max with 0 and its relatives: Relu, HardSigmoid, HardSwish, Celu, LeakyRelu.
    xe = plant(rnd((4, 9), scale=3), 0.15)
    for op, attrs in (('Relu', {}), ('HardSigmoid', {'alpha': 0.3, 'beta': 0.4}),
                      ('HardSwish', {}), ('Celu', {'alpha': 0.7}), ('LeakyRelu', {'alpha': 0.2})):
        case(f'{op.lower()}', op, [xe], attrs)

    # A small graph whose kernels fuse: MaxPool -> Relu -> ReduceMax and Clip -> ArgMax.
    xg = plant(rnd((1, 4, 8, 21)), 0.04)
    graph('pool_relu_reducemax', [
        helper.make_node('MaxPool', ['x'], ['p'], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node('Relu', ['p'], ['r']),
        helper.make_node('ReduceMax', ['r', 'ax'], ['y'], keepdims=0)],
        {'x': xg, 'ax': C(I64(3))}, opset=18,
        expect=(why_mp, lambda x, ax: [np.max(np.maximum(np_maxpool(x, [3, 3], None,
                                                                    [1, 1, 1, 1])[0], 0),
                                              axis=3)]))
    graph('clip_argmax', [
        helper.make_node('Clip', ['x', 'lo', 'hi'], ['c']),
        helper.make_node('ArgMax', ['c'], ['y'], axis=1)],
        {'x': plant(rnd((5, 13)), 0.05), 'lo': C(np.float32(-0.5)), 'hi': C(np.float32(0.5))},
        opset=13, ref="ORT's ArgMax keeps a NaN only where it comes first")


# ---- recurrent operators ----------------------------------------------------------------------

def rnn_case(name, op, T=5, B=3, I=4, H=5, dirs=1, layout=0, bias=True, h0=False, c0=False,
             peep=False, seq=None, outs=('y0', 'y1', 'y2'), dt='f32', ref=None, **attrs):
    """One LSTM/GRU/RNN node with random weights (initializers) and a random X fed at run time.
    seq: None, ('const', lens) or ('input', lens); outs: the output names, '' for an absent one."""
    G = {'LSTM': 4, 'GRU': 3, 'RNN': 1}[op]
    xs = (B, T, I) if layout else (T, B, I)
    hs = (B, dirs, H) if layout else (dirs, B, H)
    ins = [rnd(xs, dt), C(rnd((dirs, G * H, I), dt, 0.5)), C(rnd((dirs, G * H, H), dt, 0.5)),
           C(rnd((dirs, 2 * G * H), dt, 0.5)) if bias else None, None,
           rnd(hs, dt) if h0 else None]
    if seq:
        lens = np.asarray(seq[1], np.int32)
        ins[4] = C(lens) if seq[0] == 'const' else lens
    if op == 'LSTM':
        ins += [rnd(hs, dt) if c0 else None, C(rnd((dirs, 3 * H), dt, 0.5)) if peep else None]
    while ins[-1] is None:
        ins.pop()
    if op != 'LSTM':
        outs = outs[:2]
    attrs.setdefault('hidden_size', H)
    if dirs == 2:
        attrs.setdefault('direction', 'bidirectional')
    if layout:
        attrs['layout'] = 1
    names = [f'x{i}' if v is not None else '' for i, v in enumerate(ins)]
    node = helper.make_node(op, names, list(outs), **attrs)
    expect = None
    if layout:
        expect = ('ORT has no batch-first (layout 1) kernels: ORT on the layout 0 node, with X, '
                  'the initial states and the outputs transposed', layout0_oracle(node, names))
    graph(name, [node], {nm: v for nm, v in zip(names, ins) if nm}, [o for o in outs if o],
          opset=14, ref=ref, expect=expect)


def layout0_oracle(node, names):
    """The outputs of a layout=1 recurrent node from ORT running its layout=0 twin."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name != 'layout'}
    outs = [o for o in node.output]

    def run(*arrays):
        vals = iter(arrays)
        feeds, inits = {}, []
        for i, nm in enumerate(names):
            if not nm:
                continue
            v = np.asarray(next(vals))
            if i == 0:
                v = v.transpose(1, 0, 2)
            elif i in (5, 6):
                v = v.transpose(1, 0, 2)
            if i in (1, 2, 3, 7):
                inits.append(numpy_helper.from_array(v, nm))
            else:
                feeds[nm] = np.ascontiguousarray(v)
        twin = helper.make_node(node.op_type, names, outs, **attrs)
        g = helper.make_graph(
            [twin], 'twin',
            [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
             for k, v in feeds.items()],
            [onnx.ValueInfoProto(name=o) for o in outs if o], inits)
        ops = [helper.make_opsetid('', 14)]
        m = helper.make_model(g, opset_imports=ops,
                              ir_version=helper.find_min_ir_version_for(ops))
        res = run_oracle(m, feeds, False)
        live = [o for o in outs if o]
        return [r.transpose(2, 0, 1, 3) if o == outs[0] else r.transpose(1, 0, 2)
                for o, r in zip(live, res)]
    return run


def recurrent():
    family('rnn')
    for op in ('LSTM', 'GRU', 'RNN'):
        o = op.lower()
        rnn_case(f'{o}_forward', op, h0=True, c0=True)
        rnn_case(f'{o}_nobias_b1', op, B=1, bias=False)
        rnn_case(f'{o}_reverse', op, h0=True, c0=True, direction='reverse')
        rnn_case(f'{o}_bidirectional', op, dirs=2, h0=True, c0=True)
        rnn_case(f'{o}_layout1', op, dirs=2, layout=1, h0=True, c0=True, T=4, B=2)
        rnn_case(f'{o}_clip', op, h0=True, clip=0.3)
        rnn_case(f'{o}_seq_const', op, dirs=2, h0=True, c0=True, seq=('const', [5, 2, 3]))
        rnn_case(f'{o}_seq_input', op, dirs=2, h0=True, seq=('input', [3, 5, 1]))
        rnn_case(f'{o}_seq_input_layout1', op, layout=1, direction='reverse',
                 seq=('input', [2, 4, 5]))
        rnn_case(f'{o}_only_yh', op, dirs=2, h0=True, outs=('', 'y1', ''))
        rnn_case(f'{o}_f64', op, dt='f64', h0=True, c0=True, outs=('y0', 'y1'),
                 ref='ORT has no double kernel for the recurrent ops')
    rnn_case('lstm_peepholes', 'LSTM', h0=True, c0=True, peep=True)
    rnn_case('lstm_peepholes_bidir_seq', 'LSTM', dirs=2, h0=True, c0=True, peep=True,
             seq=('input', [4, 5, 2]))
    rnn_case('lstm_peepholes_no_c0', 'LSTM', peep=True, T=3)
    rnn_case('lstm_only_yc', 'LSTM', h0=True, outs=('', '', 'y2'))
    rnn_case('lstm_activations', 'LSTM', h0=True, c0=True,
             activations=['HardSigmoid', 'LeakyRelu', 'Softsign'], activation_alpha=[0.3, 0.2],
             activation_beta=[0.45])
    rnn_case('lstm_activations_bidir', 'LSTM', dirs=2, h0=True,
             activations=['Sigmoid', 'ScaledTanh', 'Elu', 'HardSigmoid', 'Softplus', 'Affine'],
             activation_alpha=[0.9, 0.8, 0.25, 0.6], activation_beta=[1.1, 0.4, 0.2])
    rnn_case('gru_linear_before_reset', 'GRU', h0=True, linear_before_reset=1)
    rnn_case('gru_linear_before_reset_bidir_seq', 'GRU', dirs=2, h0=True, linear_before_reset=1,
             seq=('input', [5, 1, 3]), clip=0.8)
    rnn_case('gru_linear_before_reset_no_h0', 'GRU', linear_before_reset=1)
    rnn_case('gru_activations', 'GRU', h0=True, activations=['HardSigmoid', 'Softsign'],
             activation_alpha=[0.25], activation_beta=[0.55])
    rnn_case('rnn_relu', 'RNN', h0=True, activations=['Relu'])
    rnn_case('rnn_thresholdedrelu', 'RNN', h0=True, activations=['ThresholdedRelu'],
             activation_alpha=[0.1])
    # Both functions take alpha and beta: ORT's RNN reads the lists per direction.
    rnn_case('rnn_activations_bidir', 'RNN', dirs=2, h0=True,
             activations=['Affine', 'ScaledTanh'], activation_alpha=[0.7, 0.9],
             activation_beta=[0.3, 0.8])
    rnn_case('rnn_elu_leaky', 'RNN', dirs=2, activations=['Elu', 'LeakyRelu'],
             activation_alpha=[0.5, 0.05])
    # T * B <= H: steps picked by a constant mask instead of a slice (rules_rnn.c).
    rnn_case('lstm_select', 'LSTM', T=6, B=2, I=5, H=13, dirs=2, h0=True, c0=True, peep=True)
    rnn_case('lstm_select_seq_layout1', 'LSTM', T=4, B=2, I=3, H=11, layout=1, h0=True,
             seq=('input', [3, 4]))
    rnn_case('gru_select', 'GRU', T=5, B=1, I=6, H=7, dirs=2, h0=True)
    rnn_case('gru_select_lbr_seq', 'GRU', T=5, B=2, I=6, H=11, direction='reverse',
             linear_before_reset=1, seq=('const', [2, 5]))
    rnn_case('rnn_select', 'RNN', T=7, B=1, I=3, H=9, h0=True)
    # Longer than a block of 16 steps: blocks sliced once, steps selected within them.
    rnn_case('lstm_select_blocks', 'LSTM', T=37, B=1, I=3, H=17, dirs=2, h0=True, c0=True)
    rnn_case('gru_select_blocks_layout1_seq', 'GRU', T=21, B=1, I=4, H=16, layout=1,
             direction='reverse', seq=('input', [19]))
    rnn_case('lstm_primes', 'LSTM', T=7, B=5, I=11, H=13, h0=True, c0=True, peep=True)
    rnn_case('gru_primes', 'GRU', T=7, B=5, I=11, H=13, h0=True)


# ---- sampling: GridSample, RoiAlign -------------------------------------------------------------

def sampling():
    family('sample')
    modes16 = ('bilinear', 'nearest', 'bicubic')
    for mode in modes16:
        for pad in ('zeros', 'border', 'reflection'):
            for align in (0, 1):
                # The grid reaches past [-1, 1] so every padding mode is exercised.
                case(f'gs_{mode}_{pad}_a{align}', 'GridSample',
                     [rnd((2, 3, 5, 7)), uniform(-1.3, 1.3, (2, 4, 6, 2))],
                     dict(mode=mode, padding_mode=pad, align_corners=align), opset=16)
    for mode in ('linear', 'nearest', 'cubic'):
        case(f'gs20_{mode}', 'GridSample', [rnd((1, 2, 6, 4)), uniform(-1.1, 1.1, (1, 3, 5, 2))],
             dict(mode=mode, padding_mode='reflection'), opset=20)
    case('gs_f64', 'GridSample', [rnd((1, 2, 3, 4), 'f64'), uniform(-1.2, 1.2, (1, 5, 2, 2), 'f64')],
         dict(mode='cubic', padding_mode='border', align_corners=1), opset=20)
    case('gs_one_pixel', 'GridSample', [rnd((1, 1, 1, 1)), uniform(-2, 2, (1, 3, 3, 2))],
         dict(mode='bilinear', padding_mode='reflection', align_corners=1), opset=16)
    case('gs_large_grid', 'GridSample', [rnd((1, 4, 9, 11)), uniform(-1, 1, (1, 17, 13, 2))],
         opset=16)
    # Volumetric (5-D X, opset 20): trilinear and nearest, odd sizes that differ on every axis,
    # grid points past [-1, 1] for every padding mode.
    for mode in ('linear', 'nearest'):
        for pad in ('zeros', 'border', 'reflection'):
            for align in (0, 1):
                case(f'gs5d_{mode}_{pad}_a{align}', 'GridSample',
                     [rnd((2, 3, 3, 5, 7)), uniform(-1.4, 1.4, (2, 2, 3, 5, 3))],
                     dict(mode=mode, padding_mode=pad, align_corners=align), opset=20)
    case('gs5d_f64', 'GridSample',
         [rnd((1, 2, 5, 3, 2), 'f64'), uniform(-1.2, 1.2, (1, 3, 1, 4, 3), 'f64')],
         dict(mode='linear', padding_mode='reflection', align_corners=1), opset=20)
    case('gs5d_one_slice', 'GridSample', [rnd((1, 2, 1, 4, 5)), uniform(-2, 2, (1, 3, 2, 3, 3))],
         dict(mode='linear', padding_mode='border'), opset=20)

    def rois(n, w, h):
        x1, y1 = uniform(-2, w - 2, (n,)), uniform(-2, h - 2, (n,))
        bw, bh = uniform(0.5, w / 1.5, (n,)), uniform(0.5, h / 1.5, (n,))
        return np.stack([x1, y1, x1 + bw, y1 + bh], 1).astype(np.float32)
    x = rnd((2, 3, 11, 13))
    for mode in ('avg', 'max'):
        for ctm in ('half_pixel', 'output_half_pixel'):
            for sr in (0, 2):
                case(f'roi_{mode}_{ctm}_s{sr}', 'RoiAlign',
                     [x, rois(5, 13, 11), ints(0, 2, (5,))],
                     dict(mode=mode, coordinate_transformation_mode=ctm, sampling_ratio=sr,
                          output_height=3, output_width=4), opset=16)
        case(f'roi_{mode}_scale', 'RoiAlign', [x, rois(4, 26, 22), ints(0, 2, (4,))],
             dict(mode=mode, spatial_scale=0.5, output_height=2, output_width=5), opset=16)
    case('roi_opset11', 'RoiAlign', [x, rois(3, 13, 11), I64(1, 0, 1)],
         dict(output_height=4, output_width=3, sampling_ratio=0), opset=11)
    case('roi_f64', 'RoiAlign', [rnd((1, 2, 7, 5), 'f64'), rois(3, 5, 7).astype(np.float64),
                                 C(I64(0, 0, 0))], dict(output_height=2, output_width=2), opset=16)
    # ROIs past the map's edges and inverted ones (empty bins under half_pixel).
    case('roi_outside', 'RoiAlign',
         [x, F32([-9, -9, -3, -4], [10, 8, 20, 19], [6, 5, 2, 1], [0, 0, 12, 10]),
          I64(0, 1, 1, 0)], dict(output_height=3, output_width=3), opset=16)


# ---- control flow resolved at compile time: If on a constant, Loop of constant trip count ------

def control_flow():
    family('ctrl')
    vi = helper.make_tensor_value_info
    F, B, L = TP.FLOAT, TP.BOOL, TP.INT64

    def branch(name, nodes, out, inits=()):
        return helper.make_graph(nodes, name, [], [vi(out, F, None)], list(inits))
    then_g = branch('then', [helper.make_node('Mul', ['x', 'x'], ['t'])], 't')
    else_g = branch('else', [helper.make_node('Sub', ['x', 'k'], ['e'])], 'e',
                    [numpy_helper.from_array(F32(0.5), 'k')])
    for cond in (True, False):
        graph(f'if_{str(cond).lower()}',
              [helper.make_node('If', ['c'], ['y'], then_branch=then_g, else_branch=else_g)],
              {'c': C(np.array(cond)), 'x': rnd((3, 4))})
    # The condition from a shape: Size(x) > 10, folded before the If is reached.
    graph('if_from_shape',
          [helper.make_node('Size', ['x'], ['n']), helper.make_node('Greater', ['n', 'ten'], ['c']),
           helper.make_node('If', ['c'], ['y'], then_branch=then_g, else_branch=else_g)],
          {'x': rnd((2, 7)), 'ten': C(I64(10))})

    def body(nodes, scans=(), inits=()):
        return helper.make_graph(
            nodes, 'body', [vi('i', L, []), vi('c_in', B, []), vi('h', F, None)],
            [vi('c_out', B, []), vi('h_out', F, None)] + [vi(n, F, None) for n in scans],
            list(inits))
    step = [helper.make_node('Identity', ['c_in'], ['c_out']),
            helper.make_node('Cast', ['i'], ['i_f'], to=F),
            helper.make_node('Mul', ['h', 'w'], ['hw']),
            helper.make_node('Add', ['hw', 'i_f'], ['h_out']),
            helper.make_node('Tanh', ['h_out'], ['s'])]
    for m in (1, 5):
        graph(f'loop_scan_{m}',
              [helper.make_node('Loop', ['m', 'c', 'x'], ['y', 'ys'], body=body(step, ['s']))],
              {'m': C(I64(m)), 'c': C(np.array(True)), 'x': rnd((2, 3)), 'w': rnd((2, 3))},
              outputs=('y', 'ys'))
    # No M, the condition a constant false after the first step: one iteration.
    once = [helper.make_node('Constant', [], ['c_out'],
                             value=numpy_helper.from_array(np.array(False), 'f'))] + step[1:4]
    graph('loop_cond_false',
          [helper.make_node('Loop', ['', 'c', 'x'], ['y'], body=body(once))],
          {'c': C(np.array(True)), 'x': rnd((4,)), 'w': rnd((4,))})
    # A branch that only passes an outer tensor on (ONNX Runtime wants the Identity).
    graph('if_passes_outer',
          [helper.make_node('If', ['c'], ['y'], else_branch=else_g, then_branch=branch(
              'pass', [helper.make_node('Identity', ['x'], ['p'])], 'p'))],
          {'c': C(np.array(True)), 'x': rnd((5,))})
    # No trip: the carried value comes out as it went in.
    graph('loop_zero_trips',
          [helper.make_node('Loop', ['m', '', 'x'], ['y'], body=body(step[:4]))],
          {'m': C(I64(0)), 'x': rnd((2, 2)), 'w': rnd((2, 2))})
    # A nested If on the iteration number inside the body.
    odd = branch('odd', [helper.make_node('Neg', ['h_out'], ['o'])], 'o')
    even = branch('even', [helper.make_node('Identity', ['h_out'], ['v'])], 'v')
    nested = step[:4] + [helper.make_node('Mod', ['i', 'two'], ['r']),
                         helper.make_node('Cast', ['r'], ['rb'], to=B),
                         helper.make_node('If', ['rb'], ['s'], then_branch=odd, else_branch=even)]
    graph('loop_nested_if',
          [helper.make_node('Loop', ['m', '', 'x'], ['y', 'ys'],
                            body=body(nested, ['s'], [numpy_helper.from_array(I64(2)[0], 'two')]))],
          {'m': C(I64(4)), 'x': rnd((3,)), 'w': rnd((3,))}, outputs=('y', 'ys'))


def sequences():
    """Sequence values resolved at compile time: a Loop carrying a list (a scripted model's
    `outs.append(h)` in a for loop, then torch.stack / torch.cat), split and read back."""
    family('seq')
    vi = helper.make_tensor_value_info
    svi = helper.make_tensor_sequence_value_info
    F, B, L = TP.FLOAT, TP.BOOL, TP.INT64
    mk = helper.make_node

    def loop_body(extra=(), insert_pos=None):
        nodes = [mk('Identity', ['c_in'], ['c_out']),
                 mk('Cast', ['i'], ['i_f'], to=F),
                 mk('Mul', ['h', 'w'], ['hw']),
                 mk('Add', ['hw', 'i_f'], ['a']),
                 mk('Tanh', ['a'], ['h_out']),
                 mk('SequenceInsert', ['s_in', 'h_out'] + ([insert_pos] if insert_pos else []),
                    ['s_out'])] + list(extra)
        return helper.make_graph(
            nodes, 'body', [vi('i', L, []), vi('c_in', B, []), vi('h', F, None),
                            svi('s_in', F, None)],
            [vi('c_out', B, []), vi('h_out', F, None), svi('s_out', F, None)])

    def loop_then(name, after, body=None, m=4, shape=(2, 3), outputs=('y',)):
        graph(name,
              [mk('SequenceEmpty', [], ['s0'], dtype=F),
               mk('Loop', ['m', 'c', 'x', 's0'], ['h_last', 'seq'], body=body or loop_body())]
              + after,
              {'m': C(I64(m)), 'c': C(np.array(True)), 'x': rnd(shape), 'w': rnd(shape)},
              outputs=outputs)
    # torch.stack(outs): new_axis 1 on axis 0, and on the last axis.
    loop_then('loop_stack', [mk('ConcatFromSequence', ['seq'], ['y'], axis=0, new_axis=1)])
    loop_then('loop_stack_last', [mk('ConcatFromSequence', ['seq'], ['y'], axis=-1, new_axis=1)],
              m=3, shape=(5,))
    # torch.cat(outs, 1), and the last state next to it.
    loop_then('loop_cat', [mk('ConcatFromSequence', ['seq'], ['y'], axis=1)],
              outputs=('y', 'h_last'))
    # One trip: a one-element sequence.
    loop_then('loop_stack_one', [mk('ConcatFromSequence', ['seq'], ['y'], axis=0, new_axis=1)],
              m=1)
    # Inserted at the front (position 0 from a constant): the order reversed.
    front = loop_body(insert_pos='zero')
    front.initializer.append(numpy_helper.from_array(I64(0)[0], 'zero'))
    loop_then('loop_insert_front', [mk('ConcatFromSequence', ['seq'], ['y'], axis=0)],
              body=front, m=3)
    # The length read inside the body and after the loop.
    counted = loop_body(extra=[mk('SequenceLength', ['s_out'], ['len'])])
    counted.output.append(vi('len', L, []))
    graph('loop_length',
          [mk('SequenceEmpty', [], ['s0'], dtype=F),
           mk('Loop', ['m', 'c', 'x', 's0'], ['h_last', 'seq', 'lens'], body=counted),
           mk('SequenceLength', ['seq'], ['n']),
           mk('Cast', ['n'], ['nf'], to=F),
           mk('Mul', ['h_last', 'nf'], ['y'])],
          {'m': C(I64(3)), 'c': C(np.array(True)), 'x': rnd((4,)), 'w': rnd((4,))},
          outputs=('y', 'lens'))
    # No trip: the sequence made before the loop comes out as it went in.
    graph('loop_zero_trips',
          [mk('SequenceConstruct', ['x', 'w'], ['s0']),
           mk('Loop', ['m', '', 'x', 's0'], ['h_last', 'seq'], body=loop_body()),
           mk('ConcatFromSequence', ['seq'], ['y'], axis=0)],
          {'m': C(I64(0)), 'x': rnd((2, 3)), 'w': rnd((2, 3))})
    # `for i in range(T): acc = acc * 0.5 + parts[i]`: the body reads an outer sequence at the
    # iteration number, a position that folds only once the loop is unrolled.
    reads = helper.make_graph(
        [mk('Identity', ['c_in'], ['c_out']), mk('SequenceAt', ['parts', 'i'], ['p']),
         mk('Mul', ['h', 'half'], ['hh']), mk('Add', ['hh', 'p'], ['h_out'])],
        'body', [vi('i', L, []), vi('c_in', B, []), vi('h', F, None)],
        [vi('c_out', B, []), vi('h_out', F, None)],
        [numpy_helper.from_array(np.array(0.5, np.float32), 'half')])
    graph('loop_reads_outer',
          [mk('SplitToSequence', ['x'], ['parts'], axis=0, keepdims=0),
           mk('Loop', ['m', '', 'h0'], ['y'], body=reads)],
          {'m': C(I64(4)), 'x': rnd((4, 3)), 'h0': rnd((3,))})
    # torch.split / unbind: SplitToSequence, then SequenceAt (negative positions too).
    x = rnd((3, 5, 2))
    graph('split_unbind',
          [mk('SplitToSequence', ['x'], ['s'], axis=1, keepdims=0),
           mk('SequenceAt', ['s', 'p0'], ['a']), mk('SequenceAt', ['s', 'pl'], ['b']),
           mk('Sub', ['a', 'b'], ['y'])],
          {'x': x, 'p0': C(I64(0)[0]), 'pl': C(np.array(-1, np.int32))})
    # Nested lists as a scripted double loop exports them: the inner Loop builds a row list and
    # stacks it, the outer one inserts each row at the front (`outs.insert(0, row)`); then
    # `del outs[1]`, `outs[-1]` and `len(outs)`.
    inner = helper.make_graph(
        [mk('Identity', ['c2'], ['c2_out']), mk('Gather', ['xi', 'j'], ['xij'], axis=0),
         mk('Cast', ['j'], ['jf'], to=F), mk('Add', ['jf', 'one_f'], ['j1']),
         mk('Mul', ['xij', 'j1'], ['v']), mk('SequenceInsert', ['r_in', 'v'], ['r_out'])],
        'inner', [vi('j', L, []), vi('c2', B, []), svi('r_in', F, None)],
        [vi('c2_out', B, []), svi('r_out', F, None)])
    outer = helper.make_graph(
        [mk('Identity', ['c1'], ['c1_out']), mk('Gather', ['x', 'i'], ['xi'], axis=0),
         mk('SequenceEmpty', [], ['r0'], dtype=F),
         mk('Loop', ['n_j', '', 'r0'], ['row_seq'], body=inner),
         mk('ConcatFromSequence', ['row_seq'], ['row'], axis=0, new_axis=1),
         mk('SequenceInsert', ['o_in', 'row', 'zero'], ['o_out'])],
        'outer', [vi('i', L, []), vi('c1', B, []), svi('o_in', F, None)],
        [vi('c1_out', B, []), svi('o_out', F, None)])
    graph('nested_loops',
          [mk('SequenceEmpty', [], ['o0'], dtype=F),
           mk('Loop', ['n_i', '', 'o0'], ['outs'], body=outer),
           mk('SequenceErase', ['outs', 'one'], ['kept']),
           mk('ConcatFromSequence', ['kept'], ['y0'], axis=0),
           mk('SequenceAt', ['kept', 'last'], ['y1']),
           mk('SequenceLength', ['kept'], ['y2'])],
          {'x': rnd((4, 3, 5)), 'n_i': C(I64(4)), 'n_j': C(I64(3)), 'one_f': C(F32(1)[0]),
           'zero': C(I64(0)[0]), 'one': C(I64(1)[0]), 'last': C(I64(-1)[0])},
          outputs=('y0', 'y1', 'y2'))
    # torch.unbind as the TorchScript exporter writes it: a scalar split of 1 with keepdims 0
    # (ONNX Runtime squeezes the pieces, as torch does; the spec would keep the axis).
    graph('split_unbind_scalar',
          [mk('SplitToSequence', ['x', 'one'], ['s'], axis=0, keepdims=0),
           mk('SequenceAt', ['s', 'pl'], ['y'])],
          {'x': x, 'one': C(I64(1)[0]), 'pl': C(I64(-1)[0])})
    graph('split_keepdims',
          [mk('SplitToSequence', ['x'], ['s'], axis=-1),
           mk('SequenceAt', ['s', 'p'], ['y'])],
          {'x': x, 'p': C(I64(1)[0])})
    graph('split_sizes',
          [mk('SplitToSequence', ['x', 'sp'], ['s'], axis=1),
           mk('SequenceAt', ['s', 'p'], ['y0']),
           mk('ConcatFromSequence', ['s'], ['y1'], axis=1)],
          {'x': x, 'sp': C(I64(1, 4)), 'p': C(I64(-1)[0])}, outputs=('y0', 'y1'))
    graph('split_chunks',
          [mk('SplitToSequence', ['x', 'sp'], ['s'], axis=1),
           mk('SequenceAt', ['s', 'p'], ['y0']), mk('SequenceLength', ['s'], ['y1'])],
          {'x': x, 'sp': C(I64(2)[0]), 'p': C(I64(2)[0])}, outputs=('y0', 'y1'))
    # Construct, insert (middle, negative), erase (default last, positive), then concatenate.
    a, b, c = rnd((2, 2)), rnd((3, 2)), rnd((1, 2))
    graph('construct_edit',
          [mk('SequenceConstruct', ['a', 'b'], ['s1']),
           mk('SequenceInsert', ['s1', 'c', 'm1'], ['s2']),
           mk('SequenceInsert', ['s2', 'a'], ['s3']),
           mk('SequenceErase', ['s3'], ['s4']),
           mk('SequenceErase', ['s4', 'z'], ['s5']),
           mk('SequenceInsert', ['s5', 'b', 'z'], ['s6']),
           mk('ConcatFromSequence', ['s6'], ['y'], axis=0),
           mk('SequenceLength', ['s6'], ['n'])],
          {'a': a, 'b': b, 'c': c, 'm1': C(I64(-1)[0]), 'z': C(np.array(0, np.int32))},
          outputs=('y', 'n'))
    # SequenceMap: a body applied to each element, with a tensor input beside the sequence and
    # two outputs (one a shape); over two sequences; reading an outer tensor.
    mapped = helper.make_graph(
        [mk('Mul', ['e', 'k'], ['r']), mk('Shape', ['e'], ['sh'])], 'f',
        [vi('e', F, None), vi('k', F, None)], [vi('r', F, None), vi('sh', L, None)])
    graph('map_tensor_input',
          [mk('SplitToSequence', ['x'], ['s'], axis=1, keepdims=0),
           mk('SequenceMap', ['s', 'k'], ['o', 'shapes'], body=mapped),
           mk('ConcatFromSequence', ['o'], ['y0'], axis=-1, new_axis=1),
           mk('ConcatFromSequence', ['shapes'], ['y1'], axis=0)],
          {'x': rnd((3, 4, 2)), 'k': rnd((3, 2))}, outputs=('y0', 'y1'), opset=17)
    pairwise = helper.make_graph(
        [mk('Add', ['a', 'b'], ['ab']), mk('Mul', ['ab', 'w'], ['r'])], 'f',
        [vi('a', F, None), vi('b', F, None)], [vi('r', F, None)])
    graph('map_two_sequences',
          [mk('SplitToSequence', ['x', 'sp'], ['s1'], axis=0),
           mk('SequenceConstruct', ['a', 'b', 'c'], ['s2']),
           mk('SequenceMap', ['s1', 's2'], ['o'], body=pairwise),
           mk('ConcatFromSequence', ['o'], ['y'], axis=0)],
          {'x': rnd((6, 2)), 'sp': C(I64(1, 2, 3)), 'a': rnd((1, 2)), 'b': rnd((2, 2)),
           'c': rnd((3, 2)), 'w': rnd((2,))}, opset=17)
    # A sequence made in an If's taken branch, consumed after it.
    then_g = helper.make_graph(
        [mk('Mul', ['x', 'x'], ['xx']), mk('SequenceConstruct', ['x', 'xx'], ['ts'])], 'then',
        [], [svi('ts', F, None)])
    else_g = helper.make_graph([mk('SequenceConstruct', ['x'], ['es'])], 'else', [],
                               [svi('es', F, None)])
    for cond in (True, False):
        graph(f'if_branch_{str(cond).lower()}',
              [mk('If', ['c'], ['s'], then_branch=then_g, else_branch=else_g),
               mk('ConcatFromSequence', ['s'], ['y'], axis=0, new_axis=1)],
              {'c': C(np.array(cond)), 'x': rnd((2, 3))})


FAMILIES = [elementwise, linear, reduce_norm_pool, layout, resize, graphs, nan_semantics,
            recurrent, sampling, control_flow, sequences]


def main():
    ort.set_default_logger_severity(4)  # failures are reported per case
    np.seterr(all='ignore')  # the special values overflow float16 and compare NaN on purpose
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('outdir')
    ap.add_argument('--seed', type=int, default=DEFAULT_SEED)
    ap.add_argument('--filter', default='')
    ap.add_argument('--compare', action='store_true')
    args = ap.parse_args()
    S.out, S.seed, S.filter, S.compare = args.outdir, args.seed, args.filter, args.compare
    shutil.rmtree(S.out, ignore_errors=True)
    os.makedirs(S.out)
    print(f'gen_op_cases: seed {S.seed}')
    start = time.time()
    for fam in FAMILIES:
        fam()
    total = sum(S.counts.values())
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(S.out) for f in fs)
    print(', '.join(f'{k} {v}' for k, v in S.counts.items()) +
          f'; {total} cases, {size / 1e6:.1f} MB in {time.time() - start:.1f} s')
    for line in S.disagree:
        print('disagree:', line)
    for line in S.errors:
        print('error:', line)
    sys.exit(1 if S.errors else 0)


if __name__ == '__main__':
    main()
