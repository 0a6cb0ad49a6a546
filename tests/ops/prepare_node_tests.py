#!/usr/bin/env python3
"""Writes the ONNX backend node tests for orch into OUTDIR, one folder per case.

The onnx package (pinned in scripts/requirements-test.txt) ships the cases; each is a model.onnx
and test_data_set_*/{input,output}_*.pb. orch supports opsets 11-21, while the stored models
declare the opset current when they were written (7 to 27). A model is relabelled to the nearest
opset in 11-21 only when every node means the same there (see same_meaning), so its meaning for
the types orch runs is unchanged; otherwise the case is written with a SKIP file giving the
reason. Graph inputs that decide output shapes (Reshape's shape, Reduce axes...) are frozen into
initializers with the test's value (see STATIC_INPUTS). A manifest.txt lists every case.

usage: prepare_node_tests.py OUTDIR [--filter SUBSTRING]
"""
import argparse
import os
import shutil
import sys

import numpy as np
import onnx
import onnx.backend.test
from onnx import defs, numpy_helper

MIN_OPSET, MAX_OPSET = 11, 21

# Node inputs that orch needs as constants, because they decide output shapes (orch compiles for
# static shapes). The node tests often feed them as graph inputs; such an input is frozen into an
# initializer holding the test's value, as a user binding static shapes would have it.
STATIC_INPUTS = {
    "Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4}, "Squeeze": {1},
    "Unsqueeze": {1}, "Pad": {1, 2, 3}, "Resize": {1, 2, 3}, "Split": {1}, "TopK": {1},
    "OneHot": {1}, "Range": {0, 1, 2}, "ConstantOfShape": {0}, "CenterCropPad": {1},
    "Dropout": {1, 2}, "Trilu": {1}, "CumSum": {1}, "Compress": {1},
    # Control flow is resolved while compiling: If's condition and Loop's trip count and
    # condition decide which nodes the graph has.
    "If": {0}, "Loop": {0, 1},
    # Not a shape, but an index into a batch of one image: the compiled engine checks kernels on
    # random inputs whose integers are 0 or 1, and 1 is out of range there.
    "RoiAlign": {2},
    **{op: {1} for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd",
                          "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                          "ReduceSumSquare")},
}


def schema(op, opset):
    try:
        return defs.get_schema(op, opset, "")
    except Exception:
        return None


def signature(sch):
    """What a model can observe of an operator's definition apart from its type constraints:
    attributes with their types and defaults, and the formal inputs and outputs."""
    attrs = sorted((name, int(a.type), a.required, a.default_value.SerializeToString())
                   for name, a in sch.attributes.items())
    ins = [(i.name, int(i.option)) for i in sch.inputs]
    outs = [(o.name, int(o.option)) for o in sch.outputs]
    return attrs, ins, outs, sch.min_input, sch.max_input, sch.min_output, sch.max_output


def same_meaning(node, newer, target):
    """True when the node means the same under the target opset's definition: the same
    definition, one that differs only in type constraints (opsets 22-25 mostly added bfloat16,
    float8 and int4), or one that only added attributes and optional inputs the node does not
    use while keeping every older attribute and default."""
    if newer.since_version == target.since_version or signature(newer) == signature(target):
        return True
    for name, attr in target.attributes.items():
        later = newer.attributes.get(name)
        if later is None or later.type != attr.type or (
                later.default_value.SerializeToString() != attr.default_value.SerializeToString()):
            return False
    for attr in node.attribute:
        if attr.name not in target.attributes or target.attributes[attr.name].type != attr.type:
            return False
    return len(node.input) <= target.max_input and len(node.output) <= target.max_output


def freeze_static_inputs(model, case_src):
    """Turns graph inputs used only as STATIC_INPUTS into initializers when every data set gives
    them the same value. Returns the kept input positions (to renumber the data files)."""
    uses = {}
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            static = i in STATIC_INPUTS.get(node.op_type, ()) and node.domain in ("", "ai.onnx")
            uses.setdefault(name, []).append(static)
    sets = sorted(d for d in os.listdir(case_src) if d.startswith("test_data_set_"))
    keep, frozen = [], []
    for pos, vi in enumerate(model.graph.input):
        if not uses.get(vi.name) or not all(uses[vi.name]) or not sets:
            keep.append(pos)
            continue
        values = []
        for d in sets:
            t = onnx.TensorProto()
            with open(os.path.join(case_src, d, f"input_{pos}.pb"), "rb") as f:
                t.ParseFromString(f.read())
            values.append(numpy_helper.to_array(t))
        if any(v.shape != values[0].shape or not np.array_equal(v, values[0]) for v in values):
            keep.append(pos)
            continue
        frozen.append((vi.name, values[0]))
    for name, value in frozen:
        model.graph.initializer.append(numpy_helper.from_array(value, name))
    kept_inputs = [model.graph.input[p] for p in keep]
    del model.graph.input[:]
    model.graph.input.extend(kept_inputs)
    return keep


def relabel(model):
    """Returns (model, None) ready for orch, or (None, reason)."""
    default = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not default:
        return None, "no default-domain opset"
    opset = default[0].version
    target = min(max(opset, MIN_OPSET), MAX_OPSET)
    if target == opset:
        return model, None
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        a, b = schema(node.op_type, opset), schema(node.op_type, target)
        if a is None or b is None or not same_meaning(node, a, b):
            return None, (f"opset {opset}: {node.op_type} differs from its opset-{target} "
                          f"definition (since {a and a.since_version} vs "
                          f"{b and b.since_version})")
        for attr in node.attribute:
            if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                return None, f"opset {opset}: {node.op_type} has a subgraph"
    default[0].version = target
    return model, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    src = os.path.join(os.path.dirname(onnx.backend.test.__file__), "data", "node")
    if not os.path.isdir(src):
        sys.exit(f"no node test data under {src}; install onnx==1.22.0 (scripts/setup.sh)")
    os.makedirs(args.outdir, exist_ok=True)
    names = sorted(n for n in os.listdir(src) if n.startswith("test_") and args.filter in n)
    counts = {"ready": 0, "skip": 0}
    with open(os.path.join(args.outdir, "manifest.txt"), "w") as manifest:
        for name in names:
            case_src, case_dst = os.path.join(src, name), os.path.join(args.outdir, name)
            if os.path.isdir(case_dst):
                shutil.rmtree(case_dst)
            os.makedirs(case_dst)
            try:
                model = onnx.load(os.path.join(case_src, "model.onnx"), load_external_data=False)
                model, reason = relabel(model)
            except Exception as exc:  # a case the onnx package itself cannot read
                model, reason = None, f"unreadable by onnx: {exc}"
            if model is None:
                with open(os.path.join(case_dst, "SKIP"), "w") as f:
                    f.write(reason + "\n")
                counts["skip"] += 1
            else:
                keep = freeze_static_inputs(model, case_src)
                onnx.save(model, os.path.join(case_dst, "model.onnx"))
                for entry in os.listdir(case_src):
                    p = os.path.join(case_src, entry)
                    if not os.path.isdir(p):
                        continue
                    os.makedirs(os.path.join(case_dst, entry))
                    for f in os.listdir(p):
                        new = f
                        if f.startswith("input_"):
                            pos = int(f[len("input_"):-len(".pb")])
                            if pos not in keep:
                                continue
                            new = f"input_{keep.index(pos)}.pb"
                        shutil.copy(os.path.join(p, f), os.path.join(case_dst, entry, new))
                counts["ready"] += 1
            manifest.write(name + "\n")
    print(f"prepared {counts['ready']} node tests, {counts['skip']} skipped for opset reasons, "
          f"in {args.outdir}")


if __name__ == "__main__":
    main()
