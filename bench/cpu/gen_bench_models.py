#!/usr/bin/env python3
"""Writes the CPU benchmark's models with random weights from a fixed seed per model, built with
the Builder of tests/models/gen_models.py so they look like PyTorch exports:

  transformer  GPT-2-style pre-LayerNorm block, hidden 768, 12 heads, FFN 3072, causal mask
               (Where on a bool buffer), Gelu(approximate="tanh") at opset 20; input [1, 128, 768]
  bert4        BERT-base encoder, 4 layers (bench/orchestrate/gen_bench_models.py's generator),
               inputs hidden_states [1, 128, 768] and an additive mask [1, 1, 128, 128]
  resnet18     ResNet-18: basic blocks 2-2-2-2, BatchNorm, max pool, classifier; [1, 3, 224, 224]
  convnet      tests/models a_convnet widened (32/64 channels), CIFAR-sized, dynamic batch bound to
               32 (the x.view(x.size(0), -1) shape chain is kept); input [32, 3, 32, 32]
  style        fast style transfer (Johnson et al.): reflect pads, 9x9 and strided 3x3 convs,
               InstanceNorm, 3 residual blocks at 128 channels, nearest upsampling; [1, 3, 128, 128]
  mlp          MLP on a batch of 256: 512 -> 1024 -> 1024 -> 512 -> 10, ReLU / GELU (erf) / ReLU
  topk         one operator: TopK, k = 50 of each row of [256, 8192] (values and indices)
  cumsum       one operator: CumSum along the rows of [256, 8192] (axis 1)
  cumsum_cols  one operator: CumSum down the columns of [256, 8192] (axis 0)

Layout: OUTDIR/NAME/model.onnx and OUTDIR/NAME/args.txt (extra orch flags: --input-shapes for the
models with symbolic dimensions, empty otherwise).

usage: gen_bench_models.py OUTDIR [--only NAME,...]   (skips a model whose model.onnx exists)
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "models"))
from gen_models import F, Builder  # noqa: E402
import importlib.util  # noqa: E402

# bench/orchestrate's BERT generator. Its file has this file's name, so it is loaded under
# another one: a plain import would return this module when run.py has imported it.
_spec = importlib.util.spec_from_file_location(
    "orchestrate_gen_bench_models", os.path.join(HERE, "..", "orchestrate", "gen_bench_models.py"))
orchestrate_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(orchestrate_models)
import onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402


def transformer(D=768, H=12, FFN=3072, S=128):
    b = Builder("transformer", 20, 7001)
    x = b.input("hidden_states", F, [1, S, D])
    causal = b.param("h.0.attn.bias", np.tril(np.ones((S, S), bool))[None, None], dtype=np.bool_)
    heads = b.const([1, S, H, D // H])
    merged = b.const([1, S, D])
    s, p = "/h.0", "h.0"
    a = f"{s}/attn"
    n = b.layernorm(x, f"{s}/ln_1", f"{p}.ln_1", D)
    q = b.linear(n, f"{a}/q_proj", f"{p}.attn.q_proj", D, D)
    k = b.linear(n, f"{a}/k_proj", f"{p}.attn.k_proj", D, D)
    v = b.linear(n, f"{a}/v_proj", f"{p}.attn.v_proj", D, D)
    q = b.op("Transpose", [b.op("Reshape", [q, heads], a)], a, perm=[0, 2, 1, 3])
    k = b.op("Transpose", [b.op("Reshape", [k, heads], a)], a, perm=[0, 2, 3, 1])
    v = b.op("Transpose", [b.op("Reshape", [v, heads], a)], a, perm=[0, 2, 1, 3])
    sc = b.op("Mul", [b.op("MatMul", [q, k], a), b.const(1.0 / np.sqrt(D // H), np.float32, a)], a)
    sc = b.op("Where", [causal, sc, b.const(np.finfo(np.float32).min, np.float32, a)], a)
    prob = b.op("Softmax", [sc], a, axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [prob, v], a)], a, perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", [ctx, merged], a)
    h = b.op("Add", [b.linear(ctx, f"{a}/out_proj", f"{p}.attn.out_proj", D, D), x], s)
    m = f"{s}/mlp"
    t = b.linear(b.layernorm(h, f"{s}/ln_2", f"{p}.ln_2", D), f"{m}/fc1", f"{p}.mlp.fc1", D, FFN)
    t = b.op("Gelu", [t], f"{m}/act", approximate="tanh")
    t = b.linear(t, f"{m}/fc2", f"{p}.mlp.fc2", FFN, D)
    b.op("Add", [t, h], s, out="last_hidden_state")
    b.output("last_hidden_state", F, [1, S, D])
    return b.model(value_info=False), ""


def bert4():
    model, shapes = orchestrate_models.bert(layers=4)
    return model, ""  # every input dimension is static; orch needs no --input-shapes


def resnet18():
    b = Builder("resnet18", 17, 1818)
    x = b.input("input", F, [1, 3, 224, 224])
    h = b.conv(x, "/conv1", "conv1", 3, 64, 7, stride=2, pad=3, bias=False)
    h = b.op("Relu", [b.bn(h, "/bn1", "bn1", 64)], "/relu")
    h = b.op("MaxPool", [h], "/maxpool", ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], strides=[2, 2])
    cin = 64
    for li, width in enumerate([64, 128, 256, 512]):
        for bi in range(2):
            s, p = f"/layer{li + 1}/layer{li + 1}.{bi}", f"layer{li + 1}.{bi}"
            stride = 2 if bi == 0 and li > 0 else 1
            y = b.conv(h, f"{s}/conv1", f"{p}.conv1", cin, width, 3, stride=stride, pad=1,
                       bias=False)
            y = b.op("Relu", [b.bn(y, f"{s}/bn1", f"{p}.bn1", width)], f"{s}/relu")
            y = b.conv(y, f"{s}/conv2", f"{p}.conv2", width, width, 3, pad=1, bias=False)
            y = b.bn(y, f"{s}/bn2", f"{p}.bn2", width, gamma=(0.2, 0.5))
            if stride != 1 or cin != width:
                sc = b.conv(h, f"{s}/downsample/downsample.0", f"{p}.downsample.0", cin, width, 1,
                            stride=stride, bias=False)
                sc = b.bn(sc, f"{s}/downsample/downsample.1", f"{p}.downsample.1", width)
            else:
                sc = h
            h = b.op("Relu", [b.op("Add", [y, sc], s)], f"{s}/relu_1")
            cin = width
    pooled = b.op("GlobalAveragePool", [h], "/avgpool")
    flat = b.op("Flatten", [pooled], "/Flatten", axis=1)
    b.gemm(flat, "/fc", "fc", 512, 1000, out="logits")
    b.output("logits", F, [1, 1000])
    return b.model(value_info=False), ""


def convnet(C1=32, C2=64, batch=32):
    b = Builder("convnet", 13, 3232)
    x = b.input("input", F, ["batch", 3, 32, 32])
    h = b.conv(x, "/conv1", "conv1", 3, C1, 3, pad=1, bias=False)
    h = b.op("Relu", [b.bn(h, "/bn1", "bn1", C1)], "/relu")
    for i in range(2):
        s, p = f"/layer1/layer1.{i}", f"layer1.{i}"
        y = b.conv(h, f"{s}/conv1", f"{p}.conv1", C1, C1, 3, pad=1, bias=False)
        y = b.op("Relu", [b.bn(y, f"{s}/bn1", f"{p}.bn1", C1)], f"{s}/relu")
        y = b.conv(y, f"{s}/conv2", f"{p}.conv2", C1, C1, 3, pad=1, bias=False)
        y = b.bn(y, f"{s}/bn2", f"{p}.bn2", C1, gamma=(0.2, 0.5))
        h = b.op("Relu", [b.op("Add", [y, h], s)], f"{s}/relu_1")
    s, p = "/layer2/layer2.0", "layer2.0"
    y = b.conv(h, f"{s}/conv1", f"{p}.conv1", C1, C2, 3, stride=2, pad=1, bias=False)
    y = b.op("Relu", [b.bn(y, f"{s}/bn1", f"{p}.bn1", C2)], f"{s}/relu")
    y = b.conv(y, f"{s}/conv2", f"{p}.conv2", C2, C2, 3, pad=1, bias=False)
    y = b.bn(y, f"{s}/bn2", f"{p}.bn2", C2, gamma=(0.2, 0.5))
    sc = b.conv(h, f"{s}/downsample/downsample.0", f"{p}.downsample.0", C1, C2, 1, stride=2,
                bias=False)
    sc = b.bn(sc, f"{s}/downsample/downsample.1", f"{p}.downsample.1", C2, gamma=(0.2, 0.5))
    h = b.op("Relu", [b.op("Add", [y, sc], s)], f"{s}/relu_1")
    h = b.op("MaxPool", [h], "/maxpool", ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], strides=[2, 2])
    pooled = b.op("GlobalAveragePool", [h], "/avgpool")
    n = b.dim(b.op("Shape", [pooled]), 0)
    flat = b.op("Reshape", [pooled, b.op("Concat", [n, b.const([-1])], axis=0)])
    b.gemm(flat, "/fc", "fc", C2, 10, out="logits")
    b.output("logits", F, ["batch", 10])
    return b.model(value_info=False), f"input:{batch}x3x32x32"


def style(S=128, C=(32, 64, 128), blocks=3):
    b = Builder("style", 17, 4747)
    x = b.input("input", F, [1, 3, S, S])

    def refl_conv(t, scope, cin, cout, k, stride=1, gain=1.0):
        r = k // 2
        t = b.op("Pad", [t, b.const([0, 0, r, r, 0, 0, r, r], scope=scope)], scope,
                 mode="reflect")
        return b.conv(t, f"{scope}/conv2d", f"{scope[1:]}.conv2d", cin, cout, k, stride=stride,
                      gain=gain)

    def conv_in_relu(t, name, cin, cout, k, stride=1):
        t = refl_conv(t, f"/{name}", cin, cout, k, stride)
        return b.op("Relu", [b.instnorm(t, f"/{name}/in", f"{name}.in", cout)], f"/{name}/relu")

    h = conv_in_relu(x, "conv1", 3, C[0], 9)
    h = conv_in_relu(h, "conv2", C[0], C[1], 3, stride=2)
    h = conv_in_relu(h, "conv3", C[1], C[2], 3, stride=2)
    for i in range(blocks):
        s = f"/res{i + 1}"
        y = conv_in_relu(h, f"res{i + 1}/c1", C[2], C[2], 3)
        y = refl_conv(y, f"{s}/c2", C[2], C[2], 3, gain=0.5)
        y = b.instnorm(y, f"{s}/in2", f"res{i + 1}.in2", C[2])
        h = b.op("Add", [y, h], s)
    for i, (cin, cout) in enumerate([(C[2], C[1]), (C[1], C[0])]):
        s = f"/deconv{i + 1}/upsample"
        roi = b.const(np.zeros(0), np.float32, s)
        scales = b.const([1.0, 1.0, 2.0, 2.0], np.float32, s)
        h = b.op("Resize", [h, roi, scales], s, coordinate_transformation_mode="asymmetric",
                 cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor")
        h = conv_in_relu(h, f"deconv{i + 1}", cin, cout, 3)
    h = refl_conv(h, "/deconv3", C[0], 3, 9, gain=0.5)
    h = b.op("Mul", [b.op("Tanh", [h], ""), b.const(127.5, np.float32)], "")
    b.op("Add", [h, b.const(127.5, np.float32)], "", out="output")
    b.output("output", F, [1, 3, S, S])
    return b.model(value_info=False), ""


def mlp(batch=256, widths=(512, 1024, 1024, 512, 10)):
    b = Builder("mlp", 17, 2560)
    h = b.input("x", F, [batch, widths[0]])
    acts = ["Relu", "gelu", "Relu", None]
    for i, act in enumerate(acts):
        last = act is None
        h = b.gemm(h, f"/fc{i + 1}", f"fc{i + 1}", widths[i], widths[i + 1],
                   out="y" if last else None)
        if act == "gelu":
            h = b.gelu_erf(h, f"/act{i + 1}")
        elif act:
            h = b.op(act, [h], f"/act{i + 1}")
    b.output("y", F, [batch, widths[-1]])
    return b.model(value_info=False), ""


def mlp_sinsig(batch=65536, width=64, layers=6):
    """The GPU suite's fused-MLP case (bench/gpu/run.py SinSigmoidMLP): 6 layers 64 wide,
    sin(x) * sigmoid(x) between them, as torch exports nn.Linear on a rank-2 input."""
    b = Builder("mlp_sinsig", 17, 6464)
    h = b.input("x", F, [batch, width])
    for i in range(layers):
        last = i + 1 == layers
        h = b.gemm(h, f"/fc{i}", f"fc{i}", width, width, out="y" if last else None)
        if not last:
            h = b.op("Mul", [b.op("Sin", [h], f"/act{i}"), b.op("Sigmoid", [h], f"/act{i}")],
                     f"/act{i}")
    b.output("y", F, [batch, width])
    return b.model(value_info=False), ""


def topk(rows=256, n=8192, k=50):
    """torch.topk(x, 50) on a batch of score rows: values and indices."""
    b = Builder("topk", 17, 50)
    x = b.input("x", F, [rows, n])
    b.op("TopK", [x, b.const([k])], "", n_out=2, out=["values", "indices"], axis=-1, largest=1,
         sorted=1)
    b.output("values", F, [rows, k])
    b.output("indices", TensorProto.INT64, [rows, k])
    return b.model(value_info=False), ""


def cumsum(rows=256, n=8192, axis=1):
    """torch.cumsum(x, dim=axis)."""
    b = Builder("cumsum", 17, 51)
    x = b.input("x", F, [rows, n])
    b.op("CumSum", [x, b.const(axis)], "", out="y")
    b.output("y", F, [rows, n])
    return b.model(value_info=False), ""


MODELS = {"transformer": transformer, "bert4": bert4, "resnet18": resnet18, "convnet": convnet,
          "style": style, "mlp": mlp, "mlp_sinsig": mlp_sinsig, "topk": topk, "cumsum": cumsum,
          "cumsum_cols": lambda: cumsum(axis=0)}


def write(outdir, names):
    """Writes the named models that are missing under outdir; returns their folders."""
    dirs = []
    for name in names:
        if name not in MODELS:
            sys.exit(f"gen_bench_models: unknown model '{name}' (have: {', '.join(MODELS)})")
        d = os.path.join(outdir, name)
        dirs.append(d)
        path = os.path.join(d, "model.onnx")
        if os.path.exists(path):
            continue
        os.makedirs(d, exist_ok=True)
        model, shapes = MODELS[name]()
        onnx.save(model, path + ".tmp")
        os.replace(path + ".tmp", path)  # a killed run leaves no half-written model behind
        with open(os.path.join(d, "args.txt"), "w") as f:
            f.write(f"--input-shapes {shapes}\n" if shapes else "")
        n = sum(int(np.prod(t.dims)) for t in model.graph.initializer
                if t.data_type == TensorProto.FLOAT)
        print(f"wrote {path}: {len(model.graph.node)} nodes, {n / 1e6:.1f} M parameters",
              file=sys.stderr)
    return dirs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--only", help="comma-separated model names (default: all)")
    a = ap.parse_args()
    write(a.outdir, a.only.split(",") if a.only else list(MODELS))


if __name__ == "__main__":
    main()
