#!/usr/bin/env python3
"""Writes the orchestration benchmark's models, with random weights, in the style of
tests/models/gen_models.py (same Builder, so they look like PyTorch exports):

  OUTDIR/bert12/model.onnx     BERT-base encoder: 12 layers, hidden 768, 12 heads, FFN 3072,
                               post-LayerNorm, erf GELU; input hidden_states [1, 128, 768] and an
                               additive attention mask [1, 1, 128, 128]
  OUTDIR/resnet50/model.onnx   ResNet-50: bottlenecks 3-4-6-3, BatchNorm, max pool, classifier;
                               input [1, 3, 224, 224]
  OUTDIR/NAME/args.txt         the --input-shapes orch needs

usage: gen_bench_models.py OUTDIR   (skips a model whose model.onnx exists)
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "models"))
from gen_models import F, Builder  # noqa: E402
import onnx  # noqa: E402


def bert(layers=12, D=768, H=12, FFN=3072, S=128):
    b = Builder("bert", 17, 1234)
    x = b.input("hidden_states", F, [1, S, D])
    mask = b.input("attention_mask", F, [1, 1, S, S])
    heads = b.const([1, S, H, D // H])
    merged = b.const([1, S, D])
    scale = b.const(float(np.sqrt(D // H)), np.float32)
    for i in range(layers):
        s, p = f"/encoder/layer.{i}", f"encoder.layer.{i}"
        q = b.linear(x, f"{s}/attention/self/query", f"{p}.attention.self.query", D, D)
        k = b.linear(x, f"{s}/attention/self/key", f"{p}.attention.self.key", D, D)
        v = b.linear(x, f"{s}/attention/self/value", f"{p}.attention.self.value", D, D)
        sa = f"{s}/attention/self"
        q = b.op("Transpose", [b.op("Reshape", [q, heads], sa)], sa, perm=[0, 2, 1, 3])
        k = b.op("Transpose", [b.op("Reshape", [k, heads], sa)], sa, perm=[0, 2, 3, 1])
        v = b.op("Transpose", [b.op("Reshape", [v, heads], sa)], sa, perm=[0, 2, 1, 3])
        sc = b.op("Div", [b.op("MatMul", [q, k], sa), scale], sa)
        prob = b.op("Softmax", [b.op("Add", [sc, mask], sa)], sa, axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [prob, v], sa)], sa, perm=[0, 2, 1, 3])
        ctx = b.op("Reshape", [ctx, merged], sa)
        o = b.linear(ctx, f"{s}/attention/output/dense", f"{p}.attention.output.dense", D, D)
        x = b.layernorm(b.op("Add", [o, x], f"{s}/attention/output"),
                        f"{s}/attention/output/LayerNorm", f"{p}.attention.output.LayerNorm", D)
        h = b.linear(x, f"{s}/intermediate/dense", f"{p}.intermediate.dense", D, FFN)
        h = b.gelu_erf(h, f"{s}/intermediate/intermediate_act_fn")
        h = b.linear(h, f"{s}/output/dense", f"{p}.output.dense", FFN, D)
        add = b.op("Add", [h, x], f"{s}/output")
        x = b.layernorm(add, f"{s}/output/LayerNorm", f"{p}.output.LayerNorm", D)
    b.op("Identity", [x], "", out="last_hidden_state")
    b.output("last_hidden_state", F, [1, S, D])
    return b.model(value_info=False), f"hidden_states:1x{S}x{D},attention_mask:1x1x{S}x{S}"


def resnet50():
    b = Builder("resnet50", 17, 4321)
    x = b.input("input", F, [1, 3, 224, 224])
    h = b.conv(x, "/conv1", "conv1", 3, 64, 7, stride=2, pad=3, bias=False)
    h = b.op("Relu", [b.bn(h, "/bn1", "bn1", 64)], "/relu")
    h = b.op("MaxPool", [h], "/maxpool", ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], strides=[2, 2])
    cin = 64
    for li, (blocks, width) in enumerate([(3, 64), (4, 128), (6, 256), (3, 512)]):
        for bi in range(blocks):
            s, p = f"/layer{li + 1}/layer{li + 1}.{bi}", f"layer{li + 1}.{bi}"
            stride = 2 if bi == 0 and li > 0 else 1
            y = b.conv(h, f"{s}/conv1", f"{p}.conv1", cin, width, 1, bias=False)
            y = b.op("Relu", [b.bn(y, f"{s}/bn1", f"{p}.bn1", width)], f"{s}/relu")
            y = b.conv(y, f"{s}/conv2", f"{p}.conv2", width, width, 3, stride=stride, pad=1,
                       bias=False)
            y = b.op("Relu", [b.bn(y, f"{s}/bn2", f"{p}.bn2", width)], f"{s}/relu_1")
            y = b.conv(y, f"{s}/conv3", f"{p}.conv3", width, 4 * width, 1, bias=False)
            y = b.bn(y, f"{s}/bn3", f"{p}.bn3", 4 * width, gamma=(0.2, 0.5))
            if bi == 0:
                sc = b.conv(h, f"{s}/downsample/downsample.0", f"{p}.downsample.0", cin,
                            4 * width, 1, stride=stride, bias=False)
                sc = b.bn(sc, f"{s}/downsample/downsample.1", f"{p}.downsample.1", 4 * width)
            else:
                sc = h
            h = b.op("Relu", [b.op("Add", [y, sc], s)], f"{s}/relu_2")
            cin = 4 * width
    pooled = b.op("GlobalAveragePool", [h], "/avgpool")
    flat = b.op("Flatten", [pooled], "/Flatten", axis=1)
    b.gemm(flat, "/fc", "fc", 2048, 1000, out="logits")
    b.output("logits", F, [1, 1000])
    return b.model(value_info=False), "input:1x3x224x224"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for name, make in [("bert12", bert), ("resnet50", resnet50)]:
        d = os.path.join(sys.argv[1], name)
        path = os.path.join(d, "model.onnx")
        if os.path.exists(path):
            continue
        os.makedirs(d, exist_ok=True)
        model, shapes = make()
        onnx.save(model, path)
        with open(os.path.join(d, "args.txt"), "w") as f:
            f.write(f"--input-shapes {shapes}\n")
        print(f"wrote {path} ({os.path.getsize(path) / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
