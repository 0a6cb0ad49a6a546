#!/usr/bin/env python3
"""Builds small end-to-end test models that look like PyTorch exports, with random inputs and the
outputs of ONNX Runtime (CPU, graph optimizations off, so it is a plain oracle) as expected files.

usage: gen_models.py OUTDIR [--seed S | --seed random] [--only NAME[,NAME...]]

Layout written, one folder per model:
  OUTDIR/NAME/model.onnx              (g_external also has weights.bin next to it)
  OUTDIR/NAME/inputs/INPUT.npy        names with '/' or ':' sanitized to '_'
  OUTDIR/NAME/expected/OUTPUT.npy
  OUTDIR/NAME/io.txt                  "input|output <TAB> onnx name <TAB> file", for run_models.py
  OUTDIR/NAME/args.txt                extra orch flags (may be empty; '#' starts a comment)
  OUTDIR/NAME/seed.txt                the weight and input seeds, the onnx/onnxruntime versions

Weights come from a fixed seed per model (He-style scaling keeps activations O(1)); inputs come from
a fresh numpy Generator whose seed is printed and recorded (default fixed, --seed to change it).
"""
import argparse
import os
import secrets
import shutil
import sys
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

IR_FOR_OPSET = {11: 6, 13: 7, 17: 8, 20: 9, 21: 10}
INT64_MIN_PLUS_1 = -9223372036854775807  # torch.flip exports Slice ends with this value


def sanitize(name):
    return name.replace("/", "_").replace(":", "_")


class Builder:
    """Accumulates a graph the way torch.onnx.export names it: nodes '/scope/Op', outputs
    '/scope/Op_output_0', parameters as initializers named like the module's state dict (or
    'onnx::Op_N' for weights the exporter transposed), small constants as Constant nodes."""

    def __init__(self, name, opset, seed):
        self.name, self.opset = name, opset
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.used = set()
        self.anon = 0

    def _unique(self, base):
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name

    def op(self, op_type, inputs, scope="", n_out=1, out=None, **attrs):
        """Adds a node; returns its output name (a list if n_out > 1); out names a graph output."""
        name = self._unique(f"{scope}/{op_type}")
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        if out is not None:
            outs = [out] if isinstance(out, str) else list(out)
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype=np.int64, scope=""):
        arr = np.array(value, dtype=dtype)
        return self.op("Constant", [], scope, value=numpy_helper.from_array(arr))

    def param(self, name, arr, dtype=np.float32):
        if name is None:  # what the exporter names a weight it produced itself
            self.anon += 1
            name = f"onnx::MatMul_{100 + self.anon}"
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, dtype), name))
        return name

    def input(self, name, elem, shape):
        self.inputs.append(helper.make_tensor_value_info(name, elem, shape))
        return name

    def output(self, name, elem, shape):
        self.outputs.append(helper.make_tensor_value_info(name, elem, shape))

    # ---- layers, as nn modules export ----

    def he(self, shape, fan_in):
        return self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)

    def conv(self, x, scope, pname, cin, cout, k, stride=1, pad=0, group=1, bias=True, gain=1.0,
             out=None):
        fan_in = cin // group * k * k
        w = self.param(f"{pname}.weight", gain * self.he((cout, cin // group, k, k), fan_in))
        ins = [x, w]
        if bias:
            ins.append(self.param(f"{pname}.bias", self.rng.uniform(-0.1, 0.1, cout)))
        return self.op("Conv", ins, scope, out=out, dilations=[1, 1], group=group,
                       kernel_shape=[k, k], pads=[pad] * 4, strides=[stride, stride])

    def bn(self, x, scope, pname, c, gamma=(0.5, 1.5)):
        ps = [self.param(f"{pname}.weight", self.rng.uniform(*gamma, c)),
              self.param(f"{pname}.bias", self.rng.normal(0, 0.1, c)),
              self.param(f"{pname}.running_mean", self.rng.normal(0, 0.1, c)),
              self.param(f"{pname}.running_var", self.rng.uniform(0.5, 1.5, c))]
        attrs = {"epsilon": 1e-5, "momentum": 0.9}
        if self.opset >= 14:
            attrs["training_mode"] = 0
        return self.op("BatchNormalization", [x] + ps, scope, **attrs)

    def instnorm(self, x, scope, pname, c):
        ps = [self.param(f"{pname}.weight", self.rng.uniform(0.5, 1.5, c)),
              self.param(f"{pname}.bias", self.rng.normal(0, 0.1, c))]
        return self.op("InstanceNormalization", [x] + ps, scope, epsilon=1e-5)

    def layernorm(self, x, scope, pname, d):
        ps = [self.param(f"{pname}.weight", self.rng.uniform(0.5, 1.5, d)),
              self.param(f"{pname}.bias", self.rng.normal(0, 0.1, d))]
        return self.op("LayerNormalization", [x] + ps, scope, axis=-1, epsilon=1e-5)

    def linear(self, x, scope, pname, din, dout, out=None):
        """nn.Linear on a rank>2 input: MatMul by the transposed weight, then Add(bias, .)."""
        w = self.param(None, self.he((din, dout), din))
        mm = self.op("MatMul", [x, w], scope)
        b = self.param(f"{pname}.bias", self.rng.uniform(-0.1, 0.1, dout))
        return self.op("Add", [b, mm], scope, out=out)

    def gemm(self, x, scope, pname, din, dout, out=None):
        """nn.Linear on a rank-2 input: Gemm with transB=1."""
        w = self.param(f"{pname}.weight", self.he((dout, din), din))
        b = self.param(f"{pname}.bias", self.rng.uniform(-0.1, 0.1, dout))
        return self.op("Gemm", [x, w, b], scope, out=out, alpha=1.0, beta=1.0, transB=1)

    def unsqueeze(self, x, axes, scope=""):
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.const(axes, scope=scope)], scope)
        return self.op("Unsqueeze", [x], scope, axes=axes)

    def dim(self, shape, i, scope=""):
        """x.size(i) as the exporter emits it: Gather(Shape, scalar i) then Unsqueeze to [1]."""
        g = self.op("Gather", [shape, self.const(i, scope=scope)], scope, axis=0)
        return self.unsqueeze(g, [0], scope)

    def gelu_erf(self, x, scope):
        """F.gelu as exported before opset 20: x * 0.5 * (1 + erf(x / sqrt(2)))."""
        d = self.op("Div", [x, self.const(1.4142135381698608, np.float32, scope)], scope)
        e = self.op("Erf", [d], scope)
        a = self.op("Add", [e, self.const(1.0, np.float32, scope)], scope)
        m = self.op("Mul", [x, a], scope)
        return self.op("Mul", [m, self.const(0.5, np.float32, scope)], scope)

    def model(self, value_info=True, initializers_as_inputs=False):
        inputs = list(self.inputs)
        if initializers_as_inputs:  # torch.onnx.export(keep_initializers_as_inputs=True)
            inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                       for t in self.inits]
        graph = helper.make_graph(self.nodes, "main_graph", inputs, self.outputs, self.inits)
        m = helper.make_model(graph, producer_name="pytorch", producer_version="2.3.1",
                              opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = IR_FOR_OPSET[self.opset]
        onnx.checker.check_model(m, full_check=True)
        if value_info:  # the exporter records the shapes it inferred for intermediate values
            m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
        return m


F = TensorProto.FLOAT
I64 = TensorProto.INT64
I32 = TensorProto.INT32


# ---- a) convnet: ResNet-like, dynamic batch, x.view(x.size(0), -1) before the classifier ----

def convnet(seed):
    b = Builder("convnet", 13, seed)
    x = b.input("input", F, ["batch", 3, 32, 32])
    h = b.conv(x, "/conv1", "conv1", 3, 16, 3, pad=1, bias=False)
    h = b.bn(h, "/bn1", "bn1", 16)
    h = b.op("Relu", [h], "/relu")
    for i in range(2):
        s, p = f"/layer1/layer1.{i}", f"layer1.{i}"
        y = b.conv(h, f"{s}/conv1", f"{p}.conv1", 16, 16, 3, pad=1, bias=False)
        y = b.op("Relu", [b.bn(y, f"{s}/bn1", f"{p}.bn1", 16)], f"{s}/relu")
        y = b.conv(y, f"{s}/conv2", f"{p}.conv2", 16, 16, 3, pad=1, bias=False)
        y = b.bn(y, f"{s}/bn2", f"{p}.bn2", 16, gamma=(0.2, 0.5))  # residual branch kept small
        h = b.op("Relu", [b.op("Add", [y, h], s)], f"{s}/relu_1")
    s, p = "/layer2/layer2.0", "layer2.0"
    y = b.conv(h, f"{s}/conv1", f"{p}.conv1", 16, 32, 3, stride=2, pad=1, bias=False)
    y = b.op("Relu", [b.bn(y, f"{s}/bn1", f"{p}.bn1", 32)], f"{s}/relu")
    y = b.conv(y, f"{s}/conv2", f"{p}.conv2", 32, 32, 3, pad=1, bias=False)
    y = b.bn(y, f"{s}/bn2", f"{p}.bn2", 32, gamma=(0.2, 0.5))
    sc = b.conv(h, f"{s}/downsample/downsample.0", f"{p}.downsample.0", 16, 32, 1, stride=2,
                bias=False)
    sc = b.bn(sc, f"{s}/downsample/downsample.1", f"{p}.downsample.1", 32, gamma=(0.2, 0.5))
    h = b.op("Relu", [b.op("Add", [y, sc], s)], f"{s}/relu_1")
    h = b.op("MaxPool", [h], "/maxpool", ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], strides=[2, 2])
    pooled = b.op("GlobalAveragePool", [h], "/avgpool")
    b.op("Flatten", [pooled], "", out="features", axis=1)
    shp = b.op("Shape", [pooled])
    n = b.dim(shp, 0)
    cat = b.op("Concat", [n, b.const([-1])], axis=0)
    flat = b.op("Reshape", [pooled, cat])
    b.gemm(flat, "/fc", "fc", 32, 10, out="logits")
    b.output("logits", F, ["batch", 10])
    b.output("features", F, ["batch", 32])
    inputs = lambda r: {"input": r.standard_normal((3, 3, 32, 32))}
    return b.model(), inputs, ["--input-shapes", "input:3x3x32x32"]


# ---- b) transformer encoder block, heads split with shape chains computed from the input ----

def transformer(seed, gelu_op):
    D, H = 64, 4
    b = Builder("transformer", 20 if gelu_op else 17, seed)
    x = b.input("hidden_states", F, ["batch", "sequence"] + [D])
    mask = b.input("attention_mask", F, ["batch", 1, "sequence", "sequence"])
    s = "/encoder/layer.0/attention"
    h = b.layernorm(x, f"{s}/LayerNorm", "encoder.layer.0.attention.LayerNorm", D)
    shp = b.op("Shape", [h], f"{s}/self")
    bs, sq = b.dim(shp, 0, f"{s}/self"), b.dim(shp, 1, f"{s}/self")
    heads = b.op("Concat", [bs, sq, b.const([H], scope=f"{s}/self"),
                            b.const([D // H], scope=f"{s}/self")], f"{s}/self", axis=0)

    def split_heads(t, perm):
        r = b.op("Reshape", [t, heads], f"{s}/self")
        return b.op("Transpose", [r], f"{s}/self", perm=perm)

    pre = "encoder.layer.0.attention.self"
    q = split_heads(b.linear(h, f"{s}/self/query", f"{pre}.query", D, D), [0, 2, 1, 3])
    k = split_heads(b.linear(h, f"{s}/self/key", f"{pre}.key", D, D), [0, 2, 3, 1])
    v = split_heads(b.linear(h, f"{s}/self/value", f"{pre}.value", D, D), [0, 2, 1, 3])
    sc = b.op("MatMul", [q, k], f"{s}/self")
    sc = b.op("Div", [sc, b.const(4.0, np.float32, f"{s}/self")], f"{s}/self")
    sc = b.op("Add", [sc, mask], f"{s}/self")
    p = b.op("Softmax", [sc], f"{s}/self", axis=-1)
    ctx = b.op("MatMul", [p, v], f"{s}/self")
    ctx = b.op("Transpose", [ctx], f"{s}/self", perm=[0, 2, 1, 3])
    merged = b.op("Concat", [bs, sq, b.const([D], scope=f"{s}/self")], f"{s}/self", axis=0)
    ctx = b.op("Reshape", [ctx, merged], f"{s}/self")
    o = b.linear(ctx, f"{s}/output/dense", "encoder.layer.0.attention.output.dense", D, D)
    x1 = b.op("Add", [o, x], f"{s}/output")
    s = "/encoder/layer.0"
    h = b.layernorm(x1, f"{s}/LayerNorm", "encoder.layer.0.LayerNorm", D)
    h = b.linear(h, f"{s}/intermediate/dense", "encoder.layer.0.intermediate.dense", D, 4 * D)
    if gelu_op:
        h = b.op("Gelu", [h], f"{s}/intermediate/intermediate_act_fn", approximate="none")
    else:
        h = b.gelu_erf(h, f"{s}/intermediate/intermediate_act_fn")
    h = b.linear(h, f"{s}/output/dense", "encoder.layer.0.output.dense", 4 * D, D)
    b.op("Add", [h, x1], f"{s}/output", out="last_hidden_state")
    b.output("last_hidden_state", F, ["batch", "sequence", D])

    def inputs(r):
        m = np.where(r.uniform(size=(2, 1, 16, 16)) < 0.3, -10000.0, 0.0)
        m[:, :, np.arange(16), np.arange(16)] = 0.0  # every query sees at least itself
        return {"hidden_states": r.standard_normal((2, 16, D)), "attention_mask": m}

    args = ["--input-shapes", "hidden_states:2x16x64,attention_mask:2x1x16x16"]
    return b.model(), inputs, args


# ---- c) fast style transfer block: reflect pads, InstanceNorm, nearest upsampling ----

def style(seed):
    b = Builder("style", 17, seed)
    x = b.input("input", F, [1, 3, 64, 64])
    # F.pad(x, (4, 4, 3, 5), mode="reflect") exports the pads through this chain, which only
    # constant folding turns into [0, 0, 3, 4, 0, 0, 5, 4].
    pad = b.const([4, 4, 3, 5], scope="/pad")
    zeros = b.op("ConstantOfShape", [b.const([4], scope="/pad")], "/pad",
                 value=numpy_helper.from_array(np.array([0], np.int64)))
    p = b.op("Concat", [pad, zeros], "/pad", axis=0)
    p = b.op("Reshape", [p, b.const([-1, 2], scope="/pad")], "/pad")
    p = b.op("Slice", [p, b.const([-1], scope="/pad"), b.const([INT64_MIN_PLUS_1], scope="/pad"),
                       b.const([0], scope="/pad"), b.const([-1], scope="/pad")], "/pad")
    p = b.op("Transpose", [p], "/pad", perm=[1, 0])
    p = b.op("Reshape", [p, b.const([-1], scope="/pad")], "/pad")
    p = b.op("Cast", [p], "/pad", to=TensorProto.INT64)
    h = b.op("Pad", [x, p], "/pad", mode="reflect")
    h = b.conv(h, "/conv1/conv2d", "conv1.conv2d", 3, 16, 9)
    h = b.op("Relu", [b.instnorm(h, "/in1", "in1", 16)], "/relu")

    def refl_conv(t, scope, cin, cout, k, stride=1, gain=1.0):
        r = k // 2
        t = b.op("Pad", [t, b.const([0, 0, r, r, 0, 0, r, r], scope=scope)], scope,
                 mode="reflect")
        return b.conv(t, f"{scope}/conv2d", f"{scope[1:]}.conv2d", cin, cout, k, stride=stride,
                      gain=gain)

    h = refl_conv(h, "/conv2", 16, 32, 3, stride=2)
    h = b.op("Relu", [b.instnorm(h, "/in2", "in2", 32)], "/relu_1")
    y = refl_conv(h, "/res1/conv1", 32, 32, 3)
    y = b.op("Relu", [b.instnorm(y, "/res1/in1", "res1.in1", 32)], "/res1/relu")
    y = refl_conv(y, "/res1/conv2", 32, 32, 3)
    y = b.instnorm(y, "/res1/in2", "res1.in2", 32)
    h = b.op("Add", [y, h], "/res1")
    # nn.Upsample(scale_factor=2, mode="nearest"): empty roi constant, constant scales.
    roi = b.const(np.zeros(0), np.float32, "/deconv1/upsample")
    scales = b.const([1.0, 1.0, 2.0, 2.0], np.float32, "/deconv1/upsample")
    h = b.op("Resize", [h, roi, scales], "/deconv1/upsample",
             coordinate_transformation_mode="asymmetric", cubic_coeff_a=-0.75, mode="nearest",
             nearest_mode="floor")
    h = refl_conv(h, "/deconv1", 32, 16, 3)
    h = b.op("Relu", [b.instnorm(h, "/in4", "in4", 16)], "/relu_2")
    h = refl_conv(h, "/deconv3", 16, 3, 9, gain=0.5)  # keeps Tanh mostly unsaturated
    h = b.op("Tanh", [h], "")
    h = b.op("Mul", [h, b.const(127.5, np.float32)], "")
    b.op("Add", [h, b.const(127.5, np.float32)], "", out="output")
    b.output("output", F, [1, 3, 64, 64])
    return b.model(), lambda r: {"input": r.standard_normal((1, 3, 64, 64))}, []


# ---- d) MLP with unusual activations, batch 64 ----

def mlp(seed):
    b = Builder("mlp", 17, seed)
    x = b.input("x", F, [64, 32])
    h = b.gemm(x, "/fc1", "fc1", 32, 128)
    h = b.op("Mul", [b.op("Sin", [h], "/act1"), b.op("Sigmoid", [h], "/act1")], "/act1")
    w = b.param(None, b.he((128, 128), 128))
    h = b.op("Add", [b.param("fc2.bias", b.rng.uniform(-0.1, 0.1, 128)),
                     b.op("MatMul", [h, w], "/fc2")], "/fc2")
    h = b.op("Clip", [h, b.const(-1.0, np.float32, "/act2"), b.const(1.0, np.float32, "/act2")],
             "/act2")
    h = b.gemm(h, "/fc3", "fc3", 128, 128)
    h = b.op("HardSwish", [h], "/act3")
    h = b.gemm(h, "/fc4", "fc4", 128, 10)
    b.op("LeakyRelu", [h], "/act4", out="y", alpha=0.01)
    b.output("y", F, [64, 10])
    return b.model(), lambda r: {"x": r.standard_normal((64, 32))}, []


# ---- d2) MLPs whose layers read their input: gated and residual (fused chains by structure) ----

def mlp_gated(seed):
    """x' = sin(fc(x)) * sigmoid(x), 6 layers 64 wide, 512 rows: each layer's epilogue reads the
    layer's input as well as its product (PyTorch's export: Gemm, Sin, Sigmoid, Mul)."""
    b = Builder("mlp_gated", 17, seed)
    h = b.input("x", F, [512, 64])
    for i in range(6):
        g = b.gemm(h, f"/fc.{i}", f"fc.{i}", 64, 64)
        out = "y" if i == 5 else None
        h = b.op("Mul", [b.op("Sin", [g], ""), b.op("Sigmoid", [h], "")], "", out=out)
    b.output("y", F, [512, 64])
    return b.model(), lambda r: {"x": r.standard_normal((512, 64))}, []


def mlp_residual(seed):
    """x' = x + relu(fc(x)) for 4 layers 32 wide, then a plain 32 -> 10 layer; 300 rows."""
    b = Builder("mlp_residual", 17, seed)
    h = b.input("x", F, [300, 32])
    for i in range(4):
        g = b.op("Relu", [b.gemm(h, f"/blocks.{i}/fc", f"blocks.{i}.fc", 32, 32)],
                 f"/blocks.{i}/act")
        h = b.op("Add", [h, g], f"/blocks.{i}")
    b.gemm(h, "/head", "head", 32, 10, out="y")
    b.output("y", F, [300, 10])
    return b.model(), lambda r: {"x": r.standard_normal((300, 32))}, []


# ---- e) mixed ops ----

def mixed(seed):
    b = Builder("mixed", 17, seed)
    x = b.input("input.1", F, [2, 8, 16])
    idx = b.input("indices", I64, [5])
    c = lambda v, t=np.int64: b.const(v, t)
    flip = b.op("Slice", [x, c([-1]), c([INT64_MIN_PLUS_1]), c([2]), c([-1])])  # torch.flip
    odd = b.op("Slice", [x, c([7]), c([0]), c([1]), c([-2])])  # x[:, 7:0:-2] via flip + stride
    lo, hi = b.op("Split", [x, c([4, 12])], n_out=2, axis=2)
    roll = b.op("Concat", [hi, lo], axis=2)
    m = b.op("Add", [flip, roll])
    neg = b.op("Less", [m, c(0.0, np.float32)])
    leaky = b.op("Where", [neg, b.op("Mul", [m, c(0.1, np.float32)]), m])
    mean = b.op("ReduceMean", [x], axes=[2], keepdims=1)
    ex = b.op("Expand", [mean, b.op("Shape", [x])])
    mx = b.op("ReduceMax", [x], axes=[1], keepdims=1)
    tile = b.op("Tile", [mx, c([1, 8, 1])])
    sq = b.op("Pow", [x, c(2.0, np.float32)])
    ms = b.op("ReduceMean", [sq], axes=[-1], keepdims=1)
    inv = b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [ms, c(1e-5, np.float32)])])])
    rms = b.op("Mul", [x, inv])
    rowmax = b.op("ReduceMax", [x], axes=[2], keepdims=1)
    onehot = b.op("Cast", [b.op("Equal", [x, rowmax])], to=TensorProto.FLOAT)
    b.op("Concat", [leaky, ex, tile, rms, onehot], out="y", axis=1)
    b.op("ArgMax", [x], out="argmax:0", axis=2, keepdims=0, select_last_index=0)
    g = b.op("Gather", [x, idx], axis=2)
    fidx = b.op("Mul", [b.op("Cast", [idx], to=TensorProto.FLOAT), c(0.01, np.float32)])
    b.op("Add", [g, fidx], out="gathered")
    xt = b.op("Transpose", [x], perm=[0, 2, 1])
    b.op("Einsum", [x, xt], out="gram", equation="bij,bjk->bik")
    img = b.op("Reshape", [x, c([2, 8, 4, 4])])
    w = b.param("deconv.weight", b.he((8, 4, 3, 3), 8 * 9 / 4))
    bias = b.param("deconv.bias", b.rng.uniform(-0.1, 0.1, 4))
    up = b.op("ConvTranspose", [img, w, bias], "/deconv", dilations=[1, 1], group=1,
              kernel_shape=[3, 3], output_padding=[1, 1], pads=[1, 1, 1, 1], strides=[2, 2])
    b.op("AveragePool", [up], "/pool", out="deconv/pool", ceil_mode=0, kernel_shape=[2, 2],
         pads=[0, 0, 0, 0], strides=[2, 2])
    b.op("AveragePool", [up], "/pool3", out="pool3", ceil_mode=0, count_include_pad=1,
         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    b.op("Neg", [odd], out="odd")
    b.output("y", F, [2, 40, 16])
    b.output("argmax:0", I64, [2, 8])
    b.output("gathered", F, [2, 8, 5])
    b.output("gram", F, [2, 8, 8])
    b.output("deconv/pool", F, [2, 4, 4, 4])
    b.output("pool3", F, [2, 4, 8, 8])
    b.output("odd", F, [2, 4, 16])

    def inputs(r):
        return {"input.1": r.standard_normal((2, 8, 16)),
                "indices": r.integers(-16, 16, size=5).astype(np.int64)}

    return b.model(), inputs, []


# ---- f) Segformer-like block ----

def segformer(seed):
    C, HEADS, E = 32, 2, 128
    b = Builder("segformer", 17, seed)
    x = b.input("pixel_values", F, [1, 3, 64, 64])
    pre, s = "encoder.block.0.0", "/encoder/block.0/block.0.0"
    h = b.conv(x, "/encoder/patch_embeddings.0/proj", "encoder.patch_embeddings.0.proj", 3, C, 7,
               stride=4, pad=3)

    def flatten2(t, scope):  # t.flatten(2): Reshape to Concat(shape[0:2], [-1])
        sh = b.op("Shape", [t], scope)
        head = b.op("Slice", [sh, b.const([0], scope=scope), b.const([2], scope=scope),
                              b.const([0], scope=scope)], scope)
        return b.op("Reshape", [t, b.op("Concat", [head, b.const([-1], scope=scope)], scope,
                                        axis=0)], scope)

    def to_image(t, scope, ch, hw):  # t.transpose(1, 2).reshape(B, ch, hw, hw)
        n = b.dim(b.op("Shape", [t], scope), 0, scope)
        t = b.op("Transpose", [t], scope, perm=[0, 2, 1])
        shape = b.op("Concat", [n, b.const([ch, hw, hw], scope=scope)], scope, axis=0)
        return b.op("Reshape", [t, shape], scope)

    scope = "/encoder/patch_embeddings.0"
    h = b.op("Transpose", [flatten2(h, scope)], scope, perm=[0, 2, 1])  # [1, 256, C]
    h = b.layernorm(h, f"{scope}/layer_norm", "encoder.patch_embeddings.0.layer_norm", C)
    x0 = h
    a = f"{s}/attention/self"
    t = b.layernorm(h, f"{s}/layer_norm_1", f"{pre}.layer_norm_1", C)
    heads = b.op("Concat", [b.dim(b.op("Shape", [t], a), 0, a), b.const([-1, HEADS, C // HEADS],
                                                                       scope=a)], a, axis=0)
    q = b.linear(t, f"{a}/query", f"{pre}.attention.self.query", C, C)
    q = b.op("Transpose", [b.op("Reshape", [q, heads], a)], a, perm=[0, 2, 1, 3])
    r = to_image(t, a, C, 16)
    r = b.conv(r, f"{a}/sr", f"{pre}.attention.self.sr", C, C, 4, stride=4)  # [1, C, 4, 4]
    r = b.op("Transpose", [flatten2(r, a)], a, perm=[0, 2, 1])
    r = b.layernorm(r, f"{a}/layer_norm", f"{pre}.attention.self.layer_norm", C)
    k = b.linear(r, f"{a}/key", f"{pre}.attention.self.key", C, C)
    k = b.op("Transpose", [b.op("Reshape", [k, heads], a)], a, perm=[0, 2, 3, 1])
    v = b.linear(r, f"{a}/value", f"{pre}.attention.self.value", C, C)
    v = b.op("Transpose", [b.op("Reshape", [v, heads], a)], a, perm=[0, 2, 1, 3])
    sc = b.op("MatMul", [q, k], a)
    sc = b.op("Mul", [sc, b.const(0.25, np.float32, a)], a)
    ctx = b.op("MatMul", [b.op("Softmax", [sc], a, axis=-1), v], a)
    ctx = b.op("Transpose", [ctx], a, perm=[0, 2, 1, 3])
    merged = b.op("Concat", [b.dim(b.op("Shape", [ctx], a), 0, a), b.const([-1, C], scope=a)], a,
                  axis=0)
    ctx = b.op("Reshape", [ctx, merged], a)
    o = b.linear(ctx, f"{s}/attention/output/dense", f"{pre}.attention.output.dense", C, C)
    h = b.op("Add", [o, x0], s)
    m = f"{s}/mlp"
    t = b.layernorm(h, f"{s}/layer_norm_2", f"{pre}.layer_norm_2", C)
    t = b.linear(t, f"{m}/dense1", f"{pre}.mlp.dense1", C, E)
    t = to_image(t, f"{m}/dwconv", E, 16)
    t = b.conv(t, f"{m}/dwconv/dwconv", f"{pre}.mlp.dwconv.dwconv", E, E, 3, pad=1, group=E)
    t = b.op("Transpose", [flatten2(t, f"{m}/dwconv")], f"{m}/dwconv", perm=[0, 2, 1])
    t = b.gelu_erf(t, f"{m}/intermediate_act_fn")
    t = b.linear(t, f"{m}/dense2", f"{pre}.mlp.dense2", E, C)
    h = b.op("Add", [t, h], s)
    h = b.layernorm(h, "/encoder/layer_norm.0", "encoder.layer_norm.0", C)
    img = to_image(h, "/encoder", C, 16)
    d = "/decode_head"
    y = b.conv(img, f"{d}/classifier", "decode_head.classifier", C, 8, 1)
    # F.interpolate(y, size=(64, 64), mode="bilinear", align_corners=False)
    sizes = b.op("Concat", [b.op("Slice", [b.op("Shape", [y], d), b.const([0], scope=d),
                                           b.const([2], scope=d), b.const([0], scope=d)], d),
                            b.const([64, 64], scope=d)], d, axis=0)
    b.op("Resize", [y, "", "", sizes], d, out="logits", coordinate_transformation_mode="half_pixel",
         cubic_coeff_a=-0.75, mode="linear", nearest_mode="floor")
    b.output("logits", F, [1, 8, 64, 64])
    return b.model(), lambda r: {"pixel_values": r.standard_normal((1, 3, 64, 64))}, []


# ---- g) weights as external data, opset 21 ----

def external(seed):
    b = Builder("external", 21, seed)
    x = b.input("x", F, [2, 16, 8, 8])
    h = b.op("Relu", [b.conv(x, "/conv", "conv", 16, 32, 3, pad=1)], "/relu")
    h = b.op("ReduceMean", [h, b.const([2, 3])], keepdims=0)  # axes as an input since opset 18
    h = b.linear(h, "/proj", "proj", 32, 64)
    h = b.layernorm(h, "/norm", "norm", 64)
    a, g = b.op("Split", [h], "/glu", n_out=2, axis=1, num_outputs=2)
    b.op("Mul", [a, b.op("Sigmoid", [g], "/glu")], "/glu", out="y")
    b.output("y", F, [2, 32])
    return b.model(), lambda r: {"x": r.standard_normal((2, 16, 8, 8))}, []


# ---- h) GPT-2 block as exported at opset 11 with keep_initializers_as_inputs=True ----

def gpt2(seed):
    V, D, H, NPOS = 50, 32, 2, 16
    b = Builder("gpt2", 11, seed)
    ids = b.input("input_ids", I64, ["batch", "sequence"])
    wte_w = b.rng.standard_normal((V, D)) * 0.5
    wte = b.param("transformer.wte.weight", wte_w)
    wpe = b.param("transformer.wpe.weight", b.rng.standard_normal((NPOS, D)) * 0.1)
    causal = b.param("transformer.h.0.attn.bias", np.tril(np.ones((NPOS, NPOS), bool))[None, None],
                     dtype=np.bool_)
    c = lambda v, t=np.int64, scope="": b.const(v, t, scope)
    tok = b.op("Gather", [wte, ids], "/transformer/wte", axis=0)
    seq = b.op("Gather", [b.op("Shape", [ids], "/transformer"), c(1)], "/transformer", axis=0)
    pos = b.op("Range", [c(0), seq, c(1)], "/transformer")  # torch.arange(seq_len)
    pos = b.op("Unsqueeze", [pos], "/transformer", axes=[0])
    h = b.op("Add", [tok, b.op("Gather", [wpe, pos], "/transformer/wpe", axis=0)], "/transformer")

    def layer_norm(t, scope, pname):  # nn.LayerNorm before opset 17: mean, var, normalize
        m = b.op("ReduceMean", [t], scope, axes=[-1])
        d = b.op("Sub", [t, m], scope)
        v = b.op("ReduceMean", [b.op("Pow", [d, c(2.0, np.float32, scope)], scope)], scope,
                 axes=[-1])
        sd = b.op("Sqrt", [b.op("Add", [v, c(1e-5, np.float32, scope)], scope)], scope)
        n = b.op("Div", [d, sd], scope)
        n = b.op("Mul", [n, b.param(f"{pname}.weight", b.rng.uniform(0.5, 1.5, D))], scope)
        return b.op("Add", [n, b.param(f"{pname}.bias", b.rng.normal(0, 0.1, D))], scope)

    def conv1d(t, scope, pname, nx, nf):  # HF Conv1D: addmm on a 2-D view, then view back
        lead = b.op("Slice", [b.op("Shape", [t], scope), c([0], scope=scope),
                              c([-1], scope=scope), c([0], scope=scope)], scope)
        t2 = b.op("Reshape", [t, c([-1, nx], scope=scope)], scope)
        w = b.param(f"{pname}.weight", b.he((nx, nf), nx))
        bias = b.param(f"{pname}.bias", b.rng.uniform(-0.1, 0.1, nf))
        g = b.op("Gemm", [t2, w, bias], scope, alpha=1.0, beta=1.0)
        return b.op("Reshape", [g, b.op("Concat", [lead, c([nf], scope=scope)], scope, axis=0)],
                    scope)

    s, p = "/transformer/h.0", "transformer.h.0"
    a = f"{s}/attn"
    n = layer_norm(h, f"{s}/ln_1", f"{p}.ln_1")
    q, k, v = b.op("Split", [conv1d(n, f"{a}/c_attn", f"{p}.attn.c_attn", D, 3 * D)], a,
                   n_out=3, axis=2, split=[D, D, D])

    def split_heads(t):
        lead = b.op("Slice", [b.op("Shape", [t], a), c([0], scope=a), c([-1], scope=a),
                              c([0], scope=a)], a)
        shape = b.op("Concat", [lead, c([H, D // H], scope=a)], a, axis=0)
        return b.op("Transpose", [b.op("Reshape", [t, shape], a)], a, perm=[0, 2, 1, 3])

    q, k, v = split_heads(q), split_heads(k), split_heads(v)
    w = b.op("MatMul", [q, b.op("Transpose", [k], a, perm=[0, 1, 3, 2])], a)
    w = b.op("Div", [w, c(4.0, np.float32, a)], a)
    ql = b.op("Gather", [b.op("Shape", [q], a), c(2, scope=a)], a, axis=0)
    kl = b.op("Gather", [b.op("Shape", [k], a), c(2, scope=a)], a, axis=0)
    start = b.op("Unsqueeze", [b.op("Sub", [kl, ql], a)], a, axes=[0])
    end = b.op("Unsqueeze", [kl], a, axes=[0])
    mask = b.op("Slice", [causal, start, end, c([2], scope=a), c([1], scope=a)], a)
    mask = b.op("Slice", [mask, c([0], scope=a), end, c([3], scope=a), c([1], scope=a)], a)
    w = b.op("Where", [mask, w, c(np.finfo(np.float32).min, np.float32, a)], a)
    w = b.op("Softmax", [w], a, axis=3)
    o = b.op("Transpose", [b.op("MatMul", [w, v], a)], a, perm=[0, 2, 1, 3])
    lead = b.op("Slice", [b.op("Shape", [o], a), c([0], scope=a), c([-2], scope=a),
                          c([0], scope=a)], a)
    o = b.op("Reshape", [o, b.op("Concat", [lead, c([D], scope=a)], a, axis=0)], a)
    h = b.op("Add", [conv1d(o, f"{a}/c_proj", f"{p}.attn.c_proj", D, D), h], s)
    m = f"{s}/mlp"
    t = conv1d(layer_norm(h, f"{s}/ln_2", f"{p}.ln_2"), f"{m}/c_fc", f"{p}.mlp.c_fc", D, 4 * D)
    # gelu_new: 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
    cube = b.op("Mul", [c(0.044715, np.float32, m), b.op("Pow", [t, c(3.0, np.float32, m)], m)],
                m)
    inner = b.op("Mul", [c(0.7978845834732056, np.float32, m), b.op("Add", [t, cube], m)], m)
    act = b.op("Add", [c(1.0, np.float32, m), b.op("Tanh", [inner], m)], m)
    act = b.op("Mul", [b.op("Mul", [c(0.5, np.float32, m), t], m), act], m)
    h = b.op("Add", [conv1d(act, f"{m}/c_proj", f"{p}.mlp.c_proj", 4 * D, D), h], s)
    h = layer_norm(h, "/transformer/ln_f", "transformer.ln_f")
    lm = b.param(None, wte_w.T)  # tied lm_head weight, transposed by the exporter
    logits = b.op("MatMul", [h, lm], "/lm_head", out="logits")
    b.op("Gather", [logits, c(-1)], "", out="next_token_logits", axis=1)
    b.output("logits", F, ["batch", "sequence", V])
    b.output("next_token_logits", F, ["batch", V])
    inputs = lambda r: {"input_ids": r.integers(0, V, size=(2, 12)).astype(np.int64)}
    return b.model(initializers_as_inputs=True), inputs, ["--input-shapes", "input_ids:2x12"]


# ---- i) wav2vec2-like feature encoder: Conv1d, GroupNorm as torch exports it, ceil-mode pool ----

def wav2vec(seed):
    b = Builder("wav2vec", 17, seed)
    x = b.input("input_values", F, ["batch", "samples"])
    s = "/feature_extractor"
    h = b.unsqueeze(x, [1], s)

    def conv1d(t, scope, pname, cin, cout, k, stride=1, pad=0, dilation=1, group=1, bias=True):
        w = b.param(f"{pname}.weight", b.he((cout, cin // group, k), cin // group * k))
        ins = [t, w] + ([b.param(f"{pname}.bias", b.rng.uniform(-0.1, 0.1, cout))] if bias
                        else [])
        return b.op("Conv", ins, scope, dilations=[dilation], group=group, kernel_shape=[k],
                    pads=[pad, pad], strides=[stride])

    c0 = f"{s}/conv_layers.0"
    h = conv1d(h, f"{c0}/conv", "feature_extractor.conv_layers.0.conv", 1, 16, 10, stride=5,
               bias=False)
    # nn.GroupNorm(16, 16) at opset 17: Reshape [0, G, -1] -> InstanceNormalization with unit
    # scale -> Reshape back to the input's shape -> per-channel affine.
    g = f"{c0}/layer_norm"
    r = b.op("Reshape", [h, b.const([0, 16, -1], scope=g)], g)
    r = b.op("InstanceNormalization", [r, b.const(np.ones(16), np.float32, g),
                                       b.const(np.zeros(16), np.float32, g)], g, epsilon=1e-5)
    r = b.op("Reshape", [r, b.op("Shape", [h], g)], g)
    r = b.op("Mul", [r, b.param("onnx::Mul_201", b.rng.uniform(0.5, 1.5, (16, 1)))], g)
    h = b.op("Add", [r, b.param("onnx::Add_202", b.rng.normal(0, 0.1, (16, 1)))], g)
    h = b.gelu_erf(h, f"{c0}/activation")
    c1 = f"{s}/conv_layers.1"
    h = conv1d(h, f"{c1}/conv", "feature_extractor.conv_layers.1.conv", 16, 32, 3, stride=2)
    h = b.gelu_erf(h, f"{c1}/activation")
    c2 = f"{s}/conv_layers.2"
    h = conv1d(h, f"{c2}/conv", "feature_extractor.conv_layers.2.conv", 32, 32, 3, pad=2,
               dilation=2, group=4)
    h = b.op("Relu", [h], f"{c2}/activation")
    h = b.op("MaxPool", [h], f"{s}/pool", ceil_mode=1, dilations=[1], kernel_shape=[3],
             pads=[0, 0], strides=[2])
    h = b.op("Transpose", [h], "/feature_projection", perm=[0, 2, 1])
    h = b.layernorm(h, "/feature_projection/layer_norm", "feature_projection.layer_norm", 32)
    b.linear(h, "/feature_projection/projection", "feature_projection.projection", 32, 16,
             out="extract_features")
    b.output("extract_features", F, ["batch", "frames", 16])
    inputs = lambda r: {"input_values": r.standard_normal((2, 810))}
    return b.model(), inputs, ["--input-shapes", "input_values:2x810"]


# ---- j) opset-11 semantics that changed later: coerced-2D Softmax, attribute axes/splits ----

def opset11(seed):
    b = Builder("opset11", 11, seed)
    x = b.input("x", F, [2, 3, 4])
    # Before opset 13, Softmax/LogSoftmax flatten to 2-D at axis: axis=1 normalises over 3*4.
    b.op("Softmax", [x], out="softmax_axis1", axis=1)
    b.op("LogSoftmax", [x], out="logsoftmax_axis1", axis=1)
    b.op("Hardmax", [x], out="hardmax_axis2", axis=2)
    s = b.op("ReduceSum", [x], axes=[2], keepdims=1)
    s = b.op("Squeeze", [s])  # no axes: drops every 1
    lo, hi = b.op("Split", [x], n_out=2, axis=2, split=[1, 3])
    m = b.op("Mul", [b.op("Squeeze", [lo], axes=[2]), b.op("ReduceMax", [hi], axes=[2],
                                                              keepdims=0)])
    m = b.op("Clip", [m, b.const(-0.5, np.float32)])  # min only
    b.op("Add", [m, s], out="reduced")
    b.output("softmax_axis1", F, [2, 3, 4])
    b.output("logsoftmax_axis1", F, [2, 3, 4])
    b.output("hardmax_axis2", F, [2, 3, 4])
    b.output("reduced", F, [2, 3])
    return b.model(), lambda r: {"x": r.standard_normal((2, 3, 4))}, []


# ---- k) F.interpolate variants: bicubic, bilinear align_corners=True, nearest to odd sizes ----

def resize(seed):
    b = Builder("resize", 13, seed)
    x = b.input("x", F, [1, 2, 6, 5])
    empty = b.const(np.zeros(0), np.float32)
    up = b.const([1.0, 1.0, 2.0, 2.0], np.float32)
    attrs = {"cubic_coeff_a": -0.75, "nearest_mode": "floor"}
    b.op("Resize", [x, empty, up], out="bicubic", mode="cubic",
         coordinate_transformation_mode="half_pixel", **attrs)
    b.op("Resize", [x, empty, "", b.const([1, 2, 4, 9])], out="bilinear_align_corners",
         mode="linear", coordinate_transformation_mode="align_corners", **attrs)
    b.op("Resize", [x, empty, "", b.const([1, 2, 9, 7])], out="nearest_sizes", mode="nearest",
         coordinate_transformation_mode="asymmetric", **attrs)
    b.op("Resize", [x, empty, b.const([1.0, 1.0, 0.5, 0.5], np.float32)],
         out="bilinear_down", mode="linear", coordinate_transformation_mode="pytorch_half_pixel",
         **attrs)
    b.output("bicubic", F, [1, 2, 12, 10])
    b.output("bilinear_align_corners", F, [1, 2, 4, 9])
    b.output("nearest_sizes", F, [1, 2, 9, 7])
    b.output("bilinear_down", F, [1, 2, 3, 2])
    return b.model(), lambda r: {"x": r.standard_normal((1, 2, 6, 5))}, []


# ---- m) a Segformer / FPN-style decode head: maps of four resolutions projected, upsampled to
# the largest, concatenated and fused by a 1x1 convolution (orch moves the convolution before
# the resizes: src/fission/rules_linear.c) ----

def fpn_head(seed):
    b = Builder("fpn_head", 13, seed)
    E, S, d = 16, 32, "/decode_head"
    # (downsampling, channels, resize mode, coordinate mode) per stage
    stages = [(1, 6, None, None), (2, 10, "nearest", "asymmetric"), (4, 12, "cubic", "half_pixel"),
              (8, 24, "linear", "half_pixel")]
    parts, shapes = [], {}
    for i, (down, ch, mode, coord) in enumerate(stages):
        shapes[f"c{i + 1}"] = (1, ch, S // down, S // down)
        x = b.input(f"c{i + 1}", F, list(shapes[f"c{i + 1}"]))
        p = b.conv(x, f"{d}/linear_c.{i}", f"decode_head.linear_c.{i}", ch, E, 1)
        if mode:
            p = b.op("Resize", [p, "", "", b.const([1, E, S, S], scope=d)], f"{d}/Resize_{i}",
                     mode=mode, coordinate_transformation_mode=coord, cubic_coeff_a=-0.75,
                     nearest_mode="floor")
        parts.append(p)
    cat = b.op("Concat", parts[::-1], d, axis=1)
    h = b.op("Relu", [b.conv(cat, f"{d}/linear_fuse", "decode_head.linear_fuse", 4 * E, E, 1)], d)
    b.conv(h, f"{d}/classifier", "decode_head.classifier", E, 5, 1, out="logits")
    b.output("logits", F, [1, 5, S, S])
    return b.model(), lambda r: {k: r.standard_normal(v) for k, v in shapes.items()}, []


# ---- l) ViT encoder self-attention as torchvision's nn.MultiheadAttention(batch_first) exports ----

def vit_mha(seed):
    """x.transpose(1, 0); packed in-projection unflattened to (3, E) and split by Gather;
    per head view/transpose; scaled_dot_product_attention's export (the scale split as
    sqrt(scale) on Q and on K^T); permute(2, 0, 1, 3) and view for the out-projection Gemm;
    view and transpose back; the residual."""
    T, E, H = 9, 16, 2
    b = Builder("vit_mha", 17, seed)
    x = b.input("x", F, [1, T, E])
    s = "/encoder/layers/encoder_layer_0/self_attention"
    h = b.layernorm(x, "/encoder/layers/encoder_layer_0/ln_1", "ln_1", E)
    h = b.op("Transpose", [h], s, perm=[1, 0, 2])
    proj = b.op("MatMul", [h, b.param(None, b.he((E, 3 * E), E))], s)
    proj = b.op("Add", [proj, b.param("in_proj_bias", b.rng.uniform(-0.1, 0.1, 3 * E))], s)
    proj = b.op("Reshape", [proj, b.const([T, 1, 3, E], scope=s)], s)
    proj = b.unsqueeze(proj, [0], s)
    proj = b.op("Transpose", [proj], s, perm=[3, 1, 2, 0, 4])
    proj = b.op("Squeeze", [proj, b.const([3], scope=s)], s)

    def head(i):
        t = b.op("Gather", [proj, b.const(i, scope=s)], s, axis=0)
        t = b.op("Reshape", [t, b.const([T, H, E // H], scope=s)], s)
        t = b.op("Transpose", [t], s, perm=[1, 0, 2])
        return b.op("Reshape", [t, b.const([1, H, T, E // H], scope=s)], s)

    q, k, v = head(0), head(1), head(2)
    root = np.float32(1.0 / np.sqrt(np.sqrt(E // H)))
    kt = b.op("Transpose", [k], s, perm=[0, 1, 3, 2])
    qs = b.op("Mul", [q, b.const(root, np.float32, s)], s)
    ks = b.op("Mul", [kt, b.const(root, np.float32, s)], s)
    att = b.op("Softmax", [b.op("MatMul", [qs, ks], s)], s, axis=-1)
    o = b.op("MatMul", [att, v], s)
    o = b.op("Transpose", [o], s, perm=[2, 0, 1, 3])
    o = b.op("Reshape", [o, b.const([T, E], scope=s)], s)
    o = b.gemm(o, s, "out_proj", E, E)
    o = b.op("Reshape", [o, b.const([T, 1, E], scope=s)], s)
    o = b.op("Transpose", [o], s, perm=[1, 0, 2])
    b.op("Add", [o, x], "/encoder/layers/encoder_layer_0", out="y")
    b.output("y", F, [1, T, E])
    return b.model(), lambda r: {"x": r.standard_normal((1, T, E))}, []


# ---- n) EfficientViT's linear attention as timm's LiteMLA exports it (one scale): a 1x1 conv
# makes Q, K, V per head, ReLU kernels, V padded with a column of ones, (Q (K^T V)) divided by its
# last column, then a 1x1 projection and the residual. Its products of three activations pass
# float16's range (the qkv weights are 10x a He init's; timm computes them in float32 under
# autocast): half storage must keep them float32 (src/passes/passes_storage.c) ----

def linear_attention(seed):
    C, H, W, D = 16, 16, 16, 8  # C // D = 2 heads, 256 tokens
    b = Builder("linear_attention", 13, seed)
    s = "/stages.3/blocks.0/context_module/main"
    x = b.input("x", F, [1, C, H, W])
    qkv = b.conv(x, f"{s}/qkv/conv", "qkv.conv", C, 3 * C, 1, bias=False, gain=10.0)
    qkv = b.op("Reshape", [qkv, b.const([1, -1, 3 * D, H * W], scope=s)], s)
    qkv = b.op("Transpose", [qkv], s, perm=[0, 1, 3, 2])
    q, k, v = b.op("Split", [qkv, b.const([D, D, D], scope=s)], s, n_out=3, axis=-1)
    q = b.op("Relu", [q], s)
    k = b.op("Relu", [k], s)
    v = b.op("Pad", [v, b.const([0, 0, 0, 0, 0, 0, 0, 1], scope=s),
                     b.const(np.float32(1.0), np.float32, s)], s, mode="constant")
    kt = b.op("Transpose", [k], s, perm=[0, 1, 3, 2])
    out = b.op("MatMul", [q, b.op("MatMul", [kt, v], s)], s)
    num = b.op("Slice", [out, b.const([0], scope=s), b.const([-1], scope=s),
                         b.const([-1], scope=s)], s)
    den = b.op("Slice", [out, b.const([-1], scope=s), b.const([2**62], scope=s),
                         b.const([-1], scope=s)], s)
    den = b.op("Add", [den, b.const(np.float32(1e-15), np.float32, s)], s)
    out = b.op("Div", [num, den], s)
    out = b.op("Transpose", [out], s, perm=[0, 1, 3, 2])
    out = b.op("Reshape", [out, b.const([1, -1, H, W], scope=s)], s)
    out = b.conv(out, f"{s}/proj/conv", "proj.conv", C, C, 1)
    b.op("Add", [out, x], "/stages.3/blocks.0/context_module", out="y")
    b.output("y", F, [1, C, H, W])
    return b.model(), lambda r: {"x": r.standard_normal((1, C, H, W))}, []


# ---- r) activations that fall under float16's normal range, as torchvision's MobileNetV2 and
# EfficientNet-B0 with their default initialisation (kaiming fan-out convs, identity BatchNorm,
# N(0, 0.01) classifier) have them: its logits came to about 3e-9. Here an inverted residual block
# whose depthwise and projection weights are scaled down shrinks the activations to about 1e-5
# and the logits to about 2e-9. float16 storage must keep the tiny tensors float32 (the range
# analysis' underflow rule, src/passes/passes_storage.c): stored in float16 they become subnormals
# or zeros. The default atol (1e-5) would pass an output of zeros: args.txt sets one in proportion
# to the logits ----

def tiny_activations(seed):
    b = Builder("tiny_activations", 13, seed)

    def relu6(t, scope):
        return b.op("Clip", [t, b.const(0.0, np.float32, scope), b.const(6.0, np.float32, scope)],
                    scope)

    x = b.input("input", F, [1, 3, 16, 16])
    s = "/features/features.0"
    h = b.conv(x, f"{s}/features.0.0", "features.0.0", 3, 16, 3, stride=2, pad=1, bias=False)
    h = relu6(b.bn(h, f"{s}/features.0.1", "features.0.1", 16), f"{s}/features.0.2")
    s, p = "/features/features.1/conv", "features.1.conv"
    d = b.conv(h, f"{s}/conv.0/conv.0.0", f"{p}.0.0", 16, 16, 3, pad=1, group=16, bias=False,
               gain=1e-2)
    d = relu6(d, f"{s}/conv.0/conv.0.2")
    d = b.conv(d, f"{s}/conv.1", f"{p}.1", 16, 24, 1, bias=False, gain=1e-3)
    s, p = "/features/features.2/conv", "features.2.conv"
    e = relu6(b.conv(d, f"{s}/conv.0/conv.0.0", f"{p}.0.0", 24, 48, 1, bias=False),
              f"{s}/conv.0/conv.0.2")
    e = b.conv(e, f"{s}/conv.1", f"{p}.1", 48, 24, 1, bias=False)
    h = b.op("Add", [d, e], "/features/features.2")
    pooled = b.op("GlobalAveragePool", [h], "/avgpool")
    flat = b.op("Flatten", [pooled], "", axis=1)
    w = b.param("classifier.1.weight", b.rng.normal(0, 0.01, (10, 24)) * 1e-3)
    bias = b.param("classifier.1.bias", np.zeros(10))
    b.op("Gemm", [flat, w, bias], "/classifier/classifier.1", out="logits", alpha=1.0, beta=1.0,
         transB=1)
    b.output("logits", F, [1, 10])
    return b.model(), lambda r: {"input": r.standard_normal((1, 3, 16, 16))}, [
        "--atol", "4e-11", "# the logits are about 2e-9: an atol in proportion, as 2e-2 is to "
        "outputs of about 1, so that logits flushed to zero fail"]

# ---- o) top-k sampling head: torch.topk over a vocabulary, softmax over the kept logits, and
# the k nearest of a distance table (largest=False along a middle axis) ----

def topk_sampling(seed):
    B, D, V, K = 6, 32, 509, 50  # a prime vocabulary: lines the kernels do not tile evenly
    b = Builder("topk_sampling", 17, seed)
    x = b.input("hidden", F, [B, D])
    logits = b.gemm(x, "/lm_head/Gemm", "lm_head", D, V)
    vals, idx = b.op("TopK", [logits, b.const([K], scope="/TopK")], "", n_out=2, axis=-1,
                     largest=1, sorted=1, out=["topk_logits", "token_ids"])
    t = b.op("Div", [vals, b.const(0.7, np.float32)], "")
    b.op("Softmax", [t], "", out="probs", axis=-1)
    # Distances of 7 queries to 13 keys in 3 groups: the 4 nearest keys along axis 1.
    q = b.input("queries", F, [3, 13, 7])
    _, near = b.op("TopK", [q, b.const([4], scope="/knn")], "/knn", n_out=2, axis=1, largest=0,
                   sorted=1, out=["knn_dist", "knn_ids"])
    b.output("topk_logits", F, [B, K])
    b.output("token_ids", I64, [B, K])
    b.output("probs", F, [B, K])
    b.output("knn_dist", F, [3, 4, 7])
    b.output("knn_ids", I64, [3, 4, 7])
    return b.model(), lambda r: {"hidden": r.standard_normal((B, D)),
                                 "queries": r.uniform(0, 4, (3, 13, 7))}, []


# ---- p) cumulative sums: position ids from an attention mask (HF's
# mask.long().cumsum(-1) - 1, masked_fill), top-p's running probability mass, and a reversed
# exclusive sum along a middle axis ----

def cumsum_positions(seed):
    B, S, E, V = 2, 37, 16, 64
    b = Builder("cumsum_positions", 17, seed)
    mask = b.input("attention_mask", I64, [B, S])
    pos = b.op("CumSum", [mask, b.const(1)], "")
    pos = b.op("Sub", [pos, b.const(1)], "")
    keep = b.op("Equal", [mask, b.const(0)], "")
    pos = b.op("Where", [keep, b.const(1), pos], "", out="position_ids")
    table = b.param("embed_positions.weight", b.rng.standard_normal((V, E)))
    b.op("Gather", [table, pos], "/embed_positions", out="pos_embeds", axis=0)
    logits = b.input("logits", F, [B, V])
    probs = b.op("Softmax", [logits], "", axis=-1)
    b.op("CumSum", [probs, b.const(-1)], "", out="cum_probs")
    x = b.input("x", F, [B, 5, E])
    b.op("CumSum", [x, b.const(1, np.int32)], "", out="rev_excl", exclusive=1, reverse=1)
    b.output("position_ids", I64, [B, S])
    b.output("pos_embeds", F, [B, S, E])
    b.output("cum_probs", F, [B, V])
    b.output("rev_excl", F, [B, 5, E])

    def inputs(r):
        m = np.zeros((B, S), np.int64)
        m[0, :] = 1
        m[1, 5:] = 1  # left padding
        return {"attention_mask": m, "logits": r.standard_normal((B, V)),
                "x": r.standard_normal((B, 5, E))}
    return b.model(), inputs, []


# ---- q) gather and scatter by computed indices: torch.gather(x, 1, argmax), scatter_add_ of
# scores into bins, a one-hot of the winners and the upper triangle of a score matrix ----

def gather_scatter(seed):
    N, C, BINS = 11, 7, 5
    b = Builder("gather_scatter", 17, seed)
    x = b.input("x", F, [N, C])
    arg = b.op("ArgMax", [x], "", axis=1, keepdims=1)
    b.op("GatherElements", [x, arg], "", out="picked", axis=1)
    bins = b.input("bins", I64, [N, C])
    zeros = b.op("ConstantOfShape", [b.const([N, BINS])], "",
                 value=numpy_helper.from_array(np.zeros(1, np.float32)))
    b.op("ScatterElements", [zeros, bins, x], "", out="binned", axis=1, reduction="add")
    win = b.op("Squeeze", [arg, b.const([1])], "")
    b.op("OneHot", [win, b.const([C]), b.const([0.0, 1.0], np.float32)], "", out="winners",
         axis=-1)
    s = b.op("MatMul", [x, b.op("Transpose", [x], "", perm=[1, 0])], "")
    b.op("Trilu", [s, b.const(1)], "", out="upper", upper=1)
    b.output("picked", F, [N, 1])
    b.output("binned", F, [N, BINS])
    b.output("winners", F, [N, C])
    b.output("upper", F, [N, N])
    return b.model(), lambda r: {"x": r.standard_normal((N, C)),
                                 "bins": r.integers(-BINS, BINS, (N, C))}, []


# ---- s) recurrent layers as torch.onnx exports them: a batch-first bidirectional LSTM (X
# transposed to time-major, Y's directions folded into features), then a GRU with
# linear_before_reset=1 (PyTorch's form) over padded sequences with their lengths, and a Linear
# on every step ----

def recurrent(seed):
    B, T, F_, H1, H2, C = 2, 9, 12, 24, 10, 7
    b = Builder("recurrent", 17, seed)
    x = b.input("x", F, [B, T, F_])
    xt = b.op("Transpose", [x], "/rnn", perm=[1, 0, 2])
    w = b.param("lstm.W", b.he((2, 4 * H1, F_), F_))
    r = b.param("lstm.R", b.he((2, 4 * H1, H1), H1))
    bias = b.param("lstm.B", b.rng.standard_normal((2, 8 * H1)) * 0.1)
    h0 = b.input("h0", F, [2, B, H1])
    c0 = b.input("c0", F, [2, B, H1])
    y, _, _ = b.op("LSTM", [xt, w, r, bias, "", h0, c0], "/rnn/LSTM", n_out=3,
                   hidden_size=H1, direction="bidirectional")
    y = b.op("Transpose", [y], "/rnn", perm=[0, 2, 1, 3])
    y = b.op("Reshape", [y, b.const([T, B, 2 * H1])], "/rnn")
    lens = b.input("lengths", I32, [B])
    w2 = b.param("gru.W", b.he((1, 3 * H2, 2 * H1), 2 * H1))
    r2 = b.param("gru.R", b.he((1, 3 * H2, H2), H2))
    bias2 = b.param("gru.B", b.rng.standard_normal((1, 6 * H2)) * 0.1)
    y2, _ = b.op("GRU", [y, w2, r2, bias2, lens], "/gru/GRU", n_out=2, out=["gru_y", "gru_h"],
                 hidden_size=H2, linear_before_reset=1)
    y2 = b.op("Squeeze", [y2, b.const([1])], "/gru")
    y2 = b.op("Transpose", [y2], "/gru", perm=[1, 0, 2])
    b.linear(y2, "/out", "out", H2, C, out="logits")
    b.output("logits", F, [B, T, C])
    b.output("gru_h", F, [1, B, H2])

    def inputs(r):
        return {"x": r.standard_normal((B, T, F_)), "h0": r.standard_normal((2, B, H1)) * 0.5,
                "c0": r.standard_normal((2, B, H1)) * 0.5,
                "lengths": np.array([T, 5], np.int32)}
    return b.model(), inputs, []


# ---- t) control flow as exporters leave it: an If on a condition computed from a shape (a
# scripted `if x.size(0) > 2`), whose branches read the outer scope and hold a Constant, and a
# Loop of constant trip count (a scripted `for i in range(4)`) carrying a state, reading
# iter_num, with a nested If on the iteration number and a scan output ----

def control_flow(seed):
    N, D = 3, 8
    b = Builder("control_flow", 17, seed)
    x = b.input("x", F, [N, D])
    w = b.param("proj.weight", b.he((D, D), D))
    n = b.op("Gather", [b.op("Shape", [x], "/if"), b.const(0, scope="/if")], "/if", axis=0)
    cond = b.op("Greater", [n, b.const(2, scope="/if")], "/if")
    two = helper.make_tensor("two", F, [], [2.0])
    then_g = helper.make_graph(
        [helper.make_node("MatMul", [x, w], ["t_mm"], name="then/MatMul"),
         helper.make_node("Constant", [], ["t_c"], name="then/Constant", value=two),
         helper.make_node("Mul", ["t_mm", "t_c"], ["t_out"], name="then/Mul")],
        "then", [], [helper.make_tensor_value_info("t_out", F, [N, D])])
    else_g = helper.make_graph(
        [helper.make_node("Neg", [x], ["e_out"], name="else/Neg")],
        "else", [], [helper.make_tensor_value_info("e_out", F, [N, D])])
    y = b.op("If", [cond], "/if", then_branch=then_g, else_branch=else_g)
    # Loop body: (i, cond, h) -> (cond, tanh(h @ w + x) [+ i/10 on even steps], h * 0.5)
    half = helper.make_tensor("half", F, [], [0.5])
    tenth = helper.make_tensor("tenth", F, [], [0.1])
    even_g = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], name="even/Cast", to=F),
         helper.make_node("Mul", ["i_f", "tenth"], ["i_s"], name="even/Mul"),
         helper.make_node("Add", ["h_t", "i_s"], ["ev_out"], name="even/Add")],
        "even", [], [helper.make_tensor_value_info("ev_out", F, [N, D])], [tenth])
    odd_g = helper.make_graph(
        [helper.make_node("Identity", ["h_t"], ["od_out"], name="odd/Identity")],
        "odd", [], [helper.make_tensor_value_info("od_out", F, [N, D])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"], name="body/Identity"),
         helper.make_node("MatMul", ["h", w], ["h_mm"], name="body/MatMul"),
         helper.make_node("Add", ["h_mm", x], ["h_add"], name="body/Add"),
         helper.make_node("Tanh", ["h_add"], ["h_t"], name="body/Tanh"),
         helper.make_node("Mod", ["i", "two_i"], ["i_mod"], name="body/Mod"),
         helper.make_node("Equal", ["i_mod", "zero_i"], ["is_even"], name="body/Equal"),
         helper.make_node("If", ["is_even"], ["h_next"], name="body/If",
                          then_branch=even_g, else_branch=odd_g),
         helper.make_node("Mul", ["h_next", "half"], ["scan"], name="body/Mul")],
        "body",
        [helper.make_tensor_value_info("i", I64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h", F, [N, D])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_next", F, [N, D]),
         helper.make_tensor_value_info("scan", F, [N, D])],
        [half, helper.make_tensor("two_i", I64, [], [2]),
         helper.make_tensor("zero_i", I64, [], [0])])
    trips = b.const(4, scope="/loop")
    true = b.const(True, np.bool_, scope="/loop")
    b.op("Loop", [trips, true, y], "/loop", n_out=2, out=["h_final", "h_steps"], body=body)
    b.output("h_final", F, [N, D])
    b.output("h_steps", F, [4, N, D])
    return b.model(value_info=False), lambda r: {"x": r.standard_normal((N, D))}, []


# ---- w) Python lists in a scripted module, as torch.onnx.export (TorchScript) leaves them:
# `outs = []; for i in range(x.size(0)): h = tanh(cell(x[i]) + h); outs.append(h)` is a Loop
# carrying a sequence (SequenceEmpty before it, SequenceInsert in the body), then
# torch.stack(outs) and torch.cat(outs, 1) are ConcatFromSequence (new_axis 1 and 0) and
# len(outs) SequenceLength; torch.split(x, 2, 2)[1] and x.unbind(0)[-1] are SplitToSequence +
# SequenceAt (unbind as a scalar split of 1 with keepdims 0). The body's condition is an
# Identity of an outer constant, as the exporter emits ----

def sequences(seed):
    T, N, D = 5, 3, 8
    b = Builder("sequences", 17, seed)
    x = b.input("x", F, [T, N, D])
    w = b.param("cell.weight", b.he((D, D), D))
    bias = b.param("cell.bias", b.rng.uniform(-0.1, 0.1, D))
    true = b.const(True, np.bool_)
    h0 = b.param("h0", b.rng.uniform(-0.5, 0.5, (N, D)))
    outs = b.op("SequenceEmpty", [], dtype=F)
    body = helper.make_graph(
        [helper.make_node("Gather", [x, "i.1"], ["/Gather_output_0"], name="/Gather", axis=0),
         helper.make_node("Gemm", ["/Gather_output_0", w, bias], ["/cell/Gemm_output_0"],
                          name="/cell/Gemm", alpha=1.0, beta=1.0, transB=1),
         helper.make_node("Add", ["/cell/Gemm_output_0", "h.11"], ["/Add_output_0"],
                          name="/Add"),
         helper.make_node("Tanh", ["/Add_output_0"], ["/Tanh_output_0"], name="/Tanh"),
         helper.make_node("SequenceInsert", ["14", "/Tanh_output_0"],
                          ["/SequenceInsert_output_0"], name="/SequenceInsert"),
         helper.make_node("Identity", [true], ["/Identity_output_0"], name="/Identity")],
        "sub_graph",
        [helper.make_tensor_value_info("i.1", I64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h.11", F, [N, D]),
         helper.make_tensor_sequence_value_info("14", F, None)],
        [helper.make_tensor_value_info("/Identity_output_0", TensorProto.BOOL, []),
         helper.make_tensor_value_info("/Tanh_output_0", F, [N, D]),
         helper.make_tensor_sequence_value_info("/SequenceInsert_output_0", F, None)])
    h, seq = b.op("Loop", [b.const(T), true, h0, outs], n_out=2, body=body)
    b.op("ConcatFromSequence", [seq], out="stacked", axis=0, new_axis=1)
    cat = b.op("ConcatFromSequence", [seq], axis=1)
    count = b.op("Cast", [b.op("SequenceLength", [seq])], to=F)
    b.op("Mul", [cat, count], out="cat_scaled")
    parts = b.op("SplitToSequence", [x, b.const(2)], axis=2)
    b.op("Mul", [b.op("SequenceAt", [parts, b.const(1)]), b.const(2.0, np.float32)],
         out="split_1")
    rows = b.op("SplitToSequence", [x, b.const(1)], axis=0, keepdims=0)
    b.op("Add", [b.op("SequenceAt", [rows, b.const(-1)]), h], out="last_row")
    b.output("stacked", F, [T, N, D])
    b.output("cat_scaled", F, [N, T * D])
    b.output("split_1", F, [T, N, 2])
    b.output("last_row", F, [N, D])
    return b.model(value_info=False), lambda r: {"x": r.standard_normal((T, N, D))}, []


# ---- u) sampling as detection and spatial-transformer exports leave it: a conv feature map
# warped by GridSample on an affine grid computed from the input (a base grid times theta, as
# F.affine_grid unrolls), bicubic with border padding on a second path, and RoiAlign (torchvision's
# roi_align: avg, half_pixel, adaptive sampling) of run-time boxes over both images ----

def sampling(seed):
    N, C, H, W, HO, WO, R = 2, 4, 9, 11, 7, 8, 5
    b = Builder("sampling", 17, seed)
    x = b.input("x", F, [N, 3, H, W])
    f = b.op("Relu", [b.conv(x, "/backbone/conv", "backbone.conv", 3, C, 3, pad=1)], "/backbone")
    theta = b.input("theta", F, [N, 2, 3])
    ys, xs = np.meshgrid(np.linspace(-1, 1, HO), np.linspace(-1, 1, WO), indexing="ij")
    base = np.stack([xs, ys, np.ones_like(xs)], -1).reshape(1, HO * WO, 3)
    grid = b.op("MatMul", [b.param("base_grid", base),
                           b.op("Transpose", [theta], "/stn", perm=[0, 2, 1])], "/stn")
    grid = b.op("Reshape", [grid, b.const([N, HO, WO, 2])], "/stn")
    b.op("GridSample", [f, grid], "/stn", out="warped", mode="bilinear", padding_mode="zeros",
         align_corners=0)
    b.op("GridSample", [f, grid], "/stn2", out="warped_cubic", mode="bicubic",
         padding_mode="border", align_corners=1)
    boxes = b.input("boxes", F, [R, 4])
    idx = b.input("box_batch", I64, [R])
    b.op("RoiAlign", [f, boxes, idx], "/roi_heads", out="pooled", mode="avg", output_height=3,
         output_width=3, sampling_ratio=0, spatial_scale=0.5,
         coordinate_transformation_mode="half_pixel")
    b.output("warped", F, [N, C, HO, WO])
    b.output("warped_cubic", F, [N, C, HO, WO])
    b.output("pooled", F, [R, C, 3, 3])

    def inputs(r):
        ident = np.tile(np.array([[1, 0, 0], [0, 1, 0]], np.float32), (N, 1, 1))
        x1 = r.uniform(0, 2 * W - 6, R)
        y1 = r.uniform(0, 2 * H - 6, R)
        bx = np.stack([x1, y1, x1 + r.uniform(2, 8, R), y1 + r.uniform(2, 8, R)], 1)
        return {"x": r.standard_normal((N, 3, H, W)),
                "theta": ident + r.uniform(-0.3, 0.3, (N, 2, 3)),
                "boxes": bx, "box_batch": r.integers(0, N, R)}
    return b.model(value_info=False), inputs, []


# ---- v) volumetric registration as VoxelMorph-style exports leave it: a Conv3d predicts a flow
# field, which moved to channels-last and added to an identity grid (stretched a little past
# [-1, 1]) warps the moving volume by 5-D GridSample: trilinear with zeros and with border
# padding, and nearest with reflection (opset 20) ----

def volumetric(seed):
    N, C, D, H, W = 2, 2, 5, 7, 9
    b = Builder("volumetric", 20, seed)
    x = b.input("x", F, [N, C, D, H, W])
    w = b.param("flow.weight", 0.3 * b.he((3, C, 3, 3, 3), C * 27))
    bias = b.param("flow.bias", b.rng.uniform(-0.05, 0.05, 3))
    flow = b.op("Conv", [x, w, bias], "/flow", kernel_shape=[3, 3, 3], pads=[1] * 6,
                strides=[1, 1, 1], dilations=[1, 1, 1])
    flow = b.op("Transpose", [flow], "/warp", perm=[0, 2, 3, 4, 1])
    zs, ys, xs = np.meshgrid(np.linspace(-1, 1, D), np.linspace(-1, 1, H), np.linspace(-1, 1, W),
                             indexing="ij")
    base = 1.15 * np.stack([xs, ys, zs], -1)[None]
    grid = b.op("Add", [b.param("warp.grid", base), flow], "/warp")
    b.op("GridSample", [x, grid], "/warp", out="warped", mode="linear", padding_mode="zeros",
         align_corners=0)
    b.op("GridSample", [x, grid], "/warp_border", out="warped_border", mode="linear",
         padding_mode="border", align_corners=1)
    b.op("GridSample", [x, grid], "/warp_nearest", out="warped_nearest", mode="nearest",
         padding_mode="reflection", align_corners=0)
    for name in ("warped", "warped_border", "warped_nearest"):
        b.output(name, F, [N, C, D, H, W])
    return b.model(value_info=False), lambda r: {"x": r.standard_normal((N, C, D, H, W))}, []



# ---- x) Llama decoder layer as transformers' LlamaDecoderLayer exports it (eager attention):
# RMSNorm, q/k/v projections, rotary embeddings (rotate_half), grouped-query attention (8 query
# heads read 2 K/V heads through repeat_kv: Unsqueeze, Expand to a shape built by
# ConstantOfShape/Where, Reshape), an additive causal mask, softmax, o_proj, the SiLU-gated MLP ----

def llama_gqa(seed):
    S, H, KV, HD, FF, NPOS = 64, 8, 2, 32, 384, 128
    E = H * HD
    b = Builder("llama_gqa", 17, seed)
    x = b.input("hidden_states", F, ["batch", "sequence", E])
    c = lambda v, t=np.int64, scope="": b.const(v, t, scope)
    L = "/model/layers.0"
    a = f"{L}/self_attn"

    def rms_norm(t, scope, pname):  # LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * weight
        v = b.op("ReduceMean", [b.op("Pow", [t, c(2.0, np.float32, scope)], scope)], scope,
                 axes=[-1], keepdims=1)
        r = b.op("Div", [c(1.0, np.float32, scope),
                         b.op("Sqrt", [b.op("Add", [v, c(1e-6, np.float32, scope)], scope)],
                              scope)], scope)
        n = b.op("Mul", [t, r], scope)
        return b.op("Mul", [b.param(f"{pname}.weight", b.rng.uniform(0.5, 1.5, E)), n], scope)

    def proj(t, scope, din, dout):  # bias-free nn.Linear
        return b.op("MatMul", [t, b.param(None, b.he((din, dout), din))], scope)

    shape = b.op("Shape", [x], a)
    bsz = b.dim(shape, 0, a)
    seq = b.dim(shape, 1, a)

    def heads(t, n):  # view(bsz, seq, n, HD).transpose(1, 2)
        sh = b.op("Concat", [bsz, seq, c([n], scope=a), c([HD], scope=a)], a, axis=0)
        return b.op("Transpose", [b.op("Reshape", [t, sh], a)], a, perm=[0, 2, 1, 3])

    h = rms_norm(x, f"{L}/input_layernorm", "model.layers.0.input_layernorm")
    q = heads(proj(h, f"{a}/q_proj", E, E), H)
    k = heads(proj(h, f"{a}/k_proj", E, KV * HD), KV)
    v = heads(proj(h, f"{a}/v_proj", E, KV * HD), KV)

    # LlamaRotaryEmbedding: cos/sin of positions x inverse frequencies, gathered by position ids
    inv = 1.0 / (10000.0 ** (np.arange(0, HD, 2, dtype=np.float64) / HD))
    ang = np.arange(NPOS)[:, None] * inv[None, :]
    emb = np.concatenate([ang, ang], axis=-1)
    r = "/model/rotary_emb"
    pos = b.op("Range", [c(0), b.op("Squeeze", [seq, c([0], scope=r)], r), c(1)], r)
    cos = b.op("Gather", [b.param("model.rotary_emb.cos_cached", np.cos(emb)), pos], r, axis=0)
    sin = b.op("Gather", [b.param("model.rotary_emb.sin_cached", np.sin(emb)), pos], r, axis=0)
    cos = b.unsqueeze(b.unsqueeze(cos, [0], a), [1], a)  # [1, 1, S, HD]
    sin = b.unsqueeze(b.unsqueeze(sin, [0], a), [1], a)

    def rotate_half(t):  # cat(-x2, x1)
        x1 = b.op("Slice", [t, c([0], scope=a), c([HD // 2], scope=a), c([3], scope=a),
                            c([1], scope=a)], a)
        x2 = b.op("Slice", [t, c([HD // 2], scope=a), c([INT64_MIN_PLUS_1 * -1], scope=a),
                            c([3], scope=a), c([1], scope=a)], a)
        return b.op("Concat", [b.op("Neg", [x2], a), x1], a, axis=-1)

    def rope(t):
        return b.op("Add", [b.op("Mul", [t, cos], a), b.op("Mul", [rotate_half(t), sin], a)], a)

    q, k = rope(q), rope(k)

    def repeat_kv(t):  # t[:, :, None].expand(bsz, KV, n_rep, seq, HD).reshape(bsz, H, seq, HD)
        t = b.unsqueeze(t, [2], a)
        want = b.op("Concat", [bsz, c([KV], scope=a), c([H // KV], scope=a), seq,
                               c([HD], scope=a)], a, axis=0)
        ones = b.op("ConstantOfShape", [c([5], scope=a)], a,
                    value=numpy_helper.from_array(np.array([1], np.int64)))
        neg = b.op("Mul", [ones, c(-1, scope=a)], a)
        sh = b.op("Where", [b.op("Equal", [want, neg], a), ones, want], a)
        t = b.op("Expand", [t, sh], a)
        out = b.op("Concat", [bsz, c([H], scope=a), seq, c([HD], scope=a)], a, axis=0)
        return b.op("Reshape", [t, out], a)

    k, v = repeat_kv(k), repeat_kv(v)
    w = b.op("MatMul", [q, b.op("Transpose", [k], a, perm=[0, 1, 3, 2])], a)
    w = b.op("Mul", [w, c(1.0 / np.sqrt(HD), np.float32, a)], a)
    # the additive causal mask: 0 on and below the diagonal, float32's min above
    causal = b.param("model.causal_mask",
                     np.where(np.tril(np.ones((NPOS, NPOS), bool)), 0.0,
                              np.finfo(np.float32).min)[None, None])
    end = seq
    mask = b.op("Slice", [causal, c([0], scope=a), end, c([2], scope=a), c([1], scope=a)], a)
    mask = b.op("Slice", [mask, c([0], scope=a), end, c([3], scope=a), c([1], scope=a)], a)
    w = b.op("Add", [w, mask], a)
    w = b.op("Softmax", [w], a, axis=-1)
    o = b.op("Transpose", [b.op("MatMul", [w, v], a)], a, perm=[0, 2, 1, 3])
    o = b.op("Reshape", [o, b.op("Concat", [bsz, seq, c([E], scope=a)], a, axis=0)], a)
    h = b.op("Add", [x, proj(o, f"{a}/o_proj", E, E)], L)
    m = f"{L}/mlp"
    n = rms_norm(h, f"{L}/post_attention_layernorm", "model.layers.0.post_attention_layernorm")
    g = proj(n, f"{m}/gate_proj", E, FF)
    g = b.op("Mul", [g, b.op("Sigmoid", [g], m)], m)  # SiLU as exported before opset 20
    u = proj(n, f"{m}/up_proj", E, FF)
    b.op("Add", [h, proj(b.op("Mul", [g, u], m), f"{m}/down_proj", FF, E)], L, out="y")
    b.output("y", F, ["batch", "sequence", E])
    inputs = lambda r: {"hidden_states": r.standard_normal((1, S, E))}
    return b.model(), inputs, ["--input-shapes", f"hidden_states:1x{S}x{E}"]


# ---- y) DeepLabV3's ASPP head on a small map, as torchvision exports it (BatchNorm folded into
# the convolutions): 3x3 convolutions of dilation 6, 12 and 24 with padding equal to the dilation
# on a 12x12 map, where dilations 12 and 24 leave only the centre tap reading the map (the other
# eight read padding at every position), beside a 1x1 branch and the pooled branch; then the
# cases around it: a strided depthwise one, one dilated (6, 24) per axis, one with asymmetric pads
# whose last rows no output reads; Conv1d with dilation 10 on 10 steps (a 1x1), kernel 5 of which
# the outer two taps are dead, a weight given at run time, and a stride that jumps over the
# input so that no tap reads it (the output is the bias) ----

def aspp(seed):
    N, C, H, W, M = 1, 8, 12, 12, 6
    b = Builder("aspp", 17, seed)
    x = b.input("features", F, [N, C, H, W])

    def dconv(x, scope, pname, cin, cout, k, dil, pads, stride=(1, 1), group=1):
        fan_in = cin // group * k[0] * k[1]
        w = b.param(f"{pname}.weight", b.he((cout, cin // group, k[0], k[1]), fan_in))
        bias = b.param(f"{pname}.bias", b.rng.uniform(-0.1, 0.1, cout))
        return b.op("Conv", [x, w, bias], scope, dilations=list(dil), group=group,
                    kernel_shape=list(k), pads=list(pads), strides=list(stride))

    branches = [b.op("Relu", [dconv(x, "/aspp/convs.0/0", "aspp.convs.0.0", C, M, (1, 1), (1, 1),
                                    [0] * 4)], "/aspp/convs.0/2")]
    for i, d in enumerate((6, 12, 24)):
        sc = f"/aspp/convs.{i + 1}"
        y = dconv(x, f"{sc}/0", f"aspp.convs.{i + 1}.0", C, M, (3, 3), (d, d), [d] * 4)
        branches.append(b.op("Relu", [y], f"{sc}/2"))
    sc = "/aspp/convs.4"
    p = b.op("GlobalAveragePool", [x], f"{sc}/0")
    p = b.op("Relu", [dconv(p, f"{sc}/1", "aspp.convs.4.1", C, M, (1, 1), (1, 1), [0] * 4)],
             f"{sc}/3")
    sizes = b.const([N, M, H, W], scope=sc)
    branches.append(b.op("Resize", [p, "", "", sizes], sc, mode="linear",
                         coordinate_transformation_mode="half_pixel"))
    cat = b.op("Concat", branches, "/aspp", axis=1)
    proj = dconv(cat, "/aspp/project/0", "aspp.project.0", 5 * M, M, (1, 1), (1, 1), [0] * 4)
    b.op("Relu", [proj], "/aspp/project/2", out="aspp")
    b.output("aspp", F, [N, M, H, W])

    dw = dconv(x, "/extra/dw", "extra.dw", C, C, (3, 3), (12, 12), [12] * 4, (2, 2), group=C)
    b.op("Clip", [dw, b.const(0.0, np.float32), b.const(6.0, np.float32)], "/extra/dw",
         out="depthwise_s2")
    b.output("depthwise_s2", F, [N, C, 6, 6])
    b.op("Identity", [dconv(x, "/extra/mixed", "extra.mixed", C, M, (3, 3), (6, 24),
                            [6, 24, 6, 24])], "/extra/mixed", out="mixed_dilation")
    b.output("mixed_dilation", F, [N, M, H, W])
    b.op("Identity", [dconv(x, "/extra/asym", "extra.asym", C, M, (3, 3), (12, 12),
                            [12, 0, 6, 24])], "/extra/asym", out="asymmetric")
    b.output("asymmetric", F, [N, M, 6, 12])

    L = 10
    s = b.input("sequence", F, [N, C, L])

    def conv1d(x, scope, pname, k, dil, pads, stride=1, w=None):
        if w is None:
            w = b.param(f"{pname}.weight", b.he((M, C, k), C * k))
        bias = b.param(f"{pname}.bias", b.rng.uniform(-0.1, 0.1, M))
        return b.op("Conv", [x, w, bias], scope, dilations=[dil], group=1, kernel_shape=[k],
                    pads=list(pads), strides=[stride])

    b.op("Identity", [conv1d(s, "/seq/d10", "seq.d10", 3, 10, [10, 10])], "/seq", out="seq_d10")
    b.output("seq_d10", F, [N, M, L])
    b.op("Identity", [conv1d(s, "/seq/k5", "seq.k5", 5, 6, [12, 12])], "/seq", out="seq_k5")
    b.output("seq_k5", F, [N, M, L])
    wr = b.input("runtime_weight", F, [M, C, 3])
    b.op("Identity", [conv1d(s, "/seq/wr", "seq.wr", 3, 10, [10, 10], w=wr)], "/seq",
         out="seq_runtime_weight")
    b.output("seq_runtime_weight", F, [N, M, L])
    short = b.op("Slice", [s, b.const([0]), b.const([2]), b.const([2])], "/seq/short")
    b.op("Identity", [conv1d(short, "/seq/dead", "seq.dead", 2, 1, [3, 3], stride=6)], "/seq",
         out="seq_all_padding")
    b.output("seq_all_padding", F, [N, M, 2])

    def inputs(r):
        return {"features": r.standard_normal((N, C, H, W)),
                "sequence": r.standard_normal((N, C, L)),
                "runtime_weight": r.standard_normal((M, C, 3)) * np.sqrt(2.0 / (3 * C))}
    return b.model(value_info=False), inputs, []


MODELS = {
    "a_convnet": convnet,
    "b_transformer": lambda s: transformer(s, gelu_op=False),
    "b_transformer_gelu20": lambda s: transformer(s, gelu_op=True),
    "c_style": style,
    "d_mlp": mlp,
    "d_mlp_gated": mlp_gated,
    "d_mlp_residual": mlp_residual,
    "e_mixed": mixed,
    "f_segformer": segformer,
    "g_external": external,
    "h_gpt2_opset11": gpt2,
    "i_wav2vec": wav2vec,
    "j_opset11_semantics": opset11,
    "k_resize": resize,
    "l_vit_mha": vit_mha,
    "m_fpn_head": fpn_head,
    "n_linear_attention": linear_attention,
    "o_topk_sampling": topk_sampling,
    "p_cumsum_positions": cumsum_positions,
    "q_gather_scatter": gather_scatter,
    "r_tiny_activations": tiny_activations,
    "s_recurrent": recurrent,
    "t_control_flow": control_flow,
    "u_sampling": sampling,
    "v_volumetric": volumetric,
    "w_sequences": sequences,
    "x_llama_gqa": llama_gqa,
    "y_aspp": aspp,
}
EXTERNAL = {"g_external"}


def write_model(name, outdir, input_seed):
    weight_seed = zlib.crc32(name.encode())
    model, make_inputs, args = MODELS[name](weight_seed)
    d = os.path.join(outdir, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "inputs"))
    os.makedirs(os.path.join(d, "expected"))
    path = os.path.join(d, "model.onnx")
    if name in EXTERNAL:
        onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location="weights.bin", size_threshold=1024)
    else:
        onnx.save(model, path)

    rng = np.random.default_rng(input_seed)
    feeds = {}
    for k, v in make_inputs(rng).items():
        v = np.asarray(v)
        feeds[k] = v.astype(np.float32) if v.dtype == np.float64 else v
    assert any(np.any(v != 0) for v in feeds.values())

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3  # no warnings about initializers listed as inputs (h_gpt2_opset11)
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    results = sess.run(names, feeds)

    io = []
    for k, v in feeds.items():
        f = f"inputs/{sanitize(k)}.npy"
        np.save(os.path.join(d, f), v)
        io.append(f"input\t{k}\t{f}")
    for k, v in zip(names, results):
        if not np.all(np.isfinite(v)):
            sys.exit(f"gen_models: {name}: ONNX Runtime output '{k}' is not finite")
        f = f"expected/{sanitize(k)}.npy"
        np.save(os.path.join(d, f), v)
        io.append(f"output\t{k}\t{f}")
    with open(os.path.join(d, "io.txt"), "w") as fh:
        fh.write("\n".join(io) + "\n")
    with open(os.path.join(d, "args.txt"), "w") as fh:
        fh.write(" ".join(args) + "\n" if args else "")
    with open(os.path.join(d, "seed.txt"), "w") as fh:
        fh.write(f"weight seed {weight_seed}\ninput seed {input_seed}\n"
                 f"onnx {onnx.__version__}, onnxruntime {ort.__version__}\n")
    stats = ", ".join(f"{k} {tuple(v.shape)} |max| {np.abs(v).max():.3g}"
                      for k, v in zip(names, results))
    print(f"{name}: opset {model.opset_import[0].version}, {len(model.graph.node)} nodes, "
          f"input seed {input_seed}: {stats}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--seed", default="20240917",
                    help="seed of the input generator, or 'random' for a fresh one")
    ap.add_argument("--only", help="comma-separated model names")
    a = ap.parse_args()
    seed = secrets.randbits(32) if a.seed == "random" else int(a.seed)
    names = a.only.split(",") if a.only else list(MODELS)
    for n in names:
        if n not in MODELS:
            sys.exit(f"gen_models: unknown model '{n}' (have: {', '.join(MODELS)})")
    os.makedirs(a.outdir, exist_ok=True)
    for n in names:
        write_model(n, a.outdir, seed + list(MODELS).index(n))


if __name__ == "__main__":
    main()
