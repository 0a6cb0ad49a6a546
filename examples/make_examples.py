#!/usr/bin/env python3
"""Writes the example model shipped with orch (examples/tiny_cnn/) and its reference data.

tiny_cnn: a small image classifier shaped like a PyTorch export (opset 17, dynamic batch
dimension, Conv+BatchNorm+Relu stem, a residual block, a strided block, MaxPool,
GlobalAveragePool, the Shape/Gather/Concat/Reshape chain of torch.flatten, Gemm). The input
image and ONNX Runtime's output are stored as .npy so `make demo` can check orch's result.
The files are committed; rerun this script only to change the example.
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(20261122)
inits, nodes = [], []


def const(name, array):
    inits.append(numpy_helper.from_array(np.asarray(array), name))
    return name


def conv_bn_relu(x, cin, cout, k, stride, name, relu=True):
    w = rng.standard_normal((cout, cin, k, k)).astype(np.float32) * np.sqrt(2.0 / (cin * k * k))
    nodes.append(helper.make_node("Conv", [x, const(f"{name}.weight", w)], [f"{name}.conv"],
                                  name=f"/{name}/Conv", kernel_shape=[k, k], strides=[stride] * 2,
                                  pads=[k // 2] * 4))
    scale = (1 + 0.1 * rng.standard_normal(cout)).astype(np.float32)
    bias = (0.1 * rng.standard_normal(cout)).astype(np.float32)
    mean = (0.1 * rng.standard_normal(cout)).astype(np.float32)
    var = (1 + 0.1 * rng.random(cout)).astype(np.float32)
    nodes.append(helper.make_node(
        "BatchNormalization",
        [f"{name}.conv", const(f"{name}.bn.weight", scale), const(f"{name}.bn.bias", bias),
         const(f"{name}.bn.running_mean", mean), const(f"{name}.bn.running_var", var)],
        [f"{name}.bn"], name=f"/{name}/BatchNormalization", epsilon=1e-5))
    if not relu:
        return f"{name}.bn"
    nodes.append(helper.make_node("Relu", [f"{name}.bn"], [f"{name}.out"], name=f"/{name}/Relu"))
    return f"{name}.out"


def build():
    x = conv_bn_relu("image", 3, 16, 3, 1, "stem")
    h = conv_bn_relu(x, 16, 16, 3, 1, "block1.a")
    h = conv_bn_relu(h, 16, 16, 3, 1, "block1.b", relu=False)
    nodes.append(helper.make_node("Add", [h, x], ["block1.sum"], name="/block1/Add"))
    nodes.append(helper.make_node("Relu", ["block1.sum"], ["block1.out"], name="/block1/Relu"))
    h = conv_bn_relu("block1.out", 16, 32, 3, 2, "block2")
    nodes.append(helper.make_node("MaxPool", [h], ["pool"], name="/pool/MaxPool",
                                  kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(helper.make_node("GlobalAveragePool", ["pool"], ["gap"], name="/gap/GlobalAveragePool"))
    # torch.flatten(x, 1) as exported: Shape -> Gather(0) -> Unsqueeze -> Concat([n, -1]) -> Reshape
    nodes.append(helper.make_node("Shape", ["gap"], ["gap.shape"], name="/flatten/Shape"))
    nodes.append(helper.make_node("Gather", ["gap.shape", const("zero", np.array(0, np.int64))],
                                  ["batch"], name="/flatten/Gather", axis=0))
    nodes.append(helper.make_node("Unsqueeze", ["batch", const("axes0", np.array([0], np.int64))],
                                  ["batch1"], name="/flatten/Unsqueeze"))
    nodes.append(helper.make_node("Concat", ["batch1", const("minus1", np.array([-1], np.int64))],
                                  ["flat.shape"], name="/flatten/Concat", axis=0))
    nodes.append(helper.make_node("Reshape", ["gap", "flat.shape"], ["flat"], name="/flatten/Reshape"))
    w = (rng.standard_normal((10, 32)) / np.sqrt(32)).astype(np.float32)
    b = (0.1 * rng.standard_normal(10)).astype(np.float32)
    nodes.append(helper.make_node("Gemm", ["flat", const("fc.weight", w), const("fc.bias", b)],
                                  ["logits"], name="/fc/Gemm", transB=1))
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="orch examples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_cnn")
    os.makedirs(out, exist_ok=True)
    model = build()
    onnx.save(model, os.path.join(out, "model.onnx"))
    image = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(os.path.join(out, "image.npy"), image)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(os.path.join(out, "model.onnx"), so,
                                providers=["CPUExecutionProvider"])
    (logits,) = sess.run(None, {"image": image})
    np.save(os.path.join(out, "logits.npy"), logits)
    print(f"wrote {out}: logits {logits.shape}, argmax {int(logits.argmax())}")


if __name__ == "__main__":
    main()
