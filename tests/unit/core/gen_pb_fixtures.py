#!/usr/bin/env python3
"""Writes the fixtures of unit_pb_codec: ONNX protobuf messages, what Google's protobuf (the
`onnx` package's Python classes) decodes from each, and what it serialises them to.

usage: gen_pb_fixtures.py OUTDIR

Each case is NAME.bin (the input bytes), NAME.dump (every field Python's parser sees, one line
each, in the format of dump() below, which test_pb_codec.c writes too) and NAME.out (Python's
SerializeToString() of the parsed message: what orch's pack must reproduce). OUTDIR/cases.txt
lists "NAME MESSAGE" per line, MESSAGE being the type's name in onnx.proto (ModelProto, ...).

The messages are built with onnx.helper (every attribute kind, every tensor data field, every
TypeProto member, values at the ends of their ranges), and some are written by hand in forms
the helper never produces but other writers may: packed fields unpacked, a scalar repeated (the
last wins), a sub-message repeated (merged), oneof members replacing each other, unknown fields
of every wire type, varints longer than they need be. Only fields the ONNX 1.12 schema (Debian's
onnx.proto, which orch is built from) defines are used, so both sides know every field.
"""
import os
import struct
import sys

import numpy as np
import onnx
from google.protobuf.descriptor import FieldDescriptor as FD
from onnx import TensorProto, helper, numpy_helper


def dump(msg, path="", out=None):
    """One line per set field in field-number order: PATH.NAME[I] = VALUE for scalars (floats as
    their bits, strings and bytes in hex), PATH.NAME[I] {} before a sub-message's own lines."""
    out = [] if out is None else out
    for fd, value in msg.ListFields():
        if fd.is_extension:
            continue
        values = list(value) if fd.is_repeated else [value]
        for i, v in enumerate(values):
            p = f"{path}.{fd.name}" + (f"[{i}]" if fd.is_repeated else "")
            if fd.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
                out.append(f"{p} {{}}")
                dump(v, p, out)
            else:
                out.append(f"{p} = {scalar(fd, v)}")
    return out


def scalar(fd, v):
    if fd.type == FD.TYPE_FLOAT:
        return "f:%08x" % struct.unpack("<I", struct.pack("<f", v))[0]
    if fd.type == FD.TYPE_DOUBLE:
        return "d:%016x" % struct.unpack("<Q", struct.pack("<d", v))[0]
    if fd.type == FD.TYPE_STRING:
        return "s:" + v.encode("utf-8").hex()
    if fd.type == FD.TYPE_BYTES:
        return "b:" + bytes(v).hex()
    if fd.type == FD.TYPE_BOOL:
        return str(int(v))
    return str(int(v))  # integers and enums


# ---- hand-written wire bytes ----

def varint(v, extra=0):
    """v as a varint (negative: ten bytes, two's complement), padded with `extra` bytes of 0x80
    continuation: a longer than needed encoding of the same value."""
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v or extra:
            out.append(b | 0x80)
        else:
            out.append(b)
            break
        if not v:
            for k in range(extra):
                out.append(0x80 if k < extra - 1 else 0x00)
            break
    return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def ld(field, payload):
    return key(field, 2) + varint(len(payload)) + payload


def vi(field, v, extra=0):
    return key(field, 0) + varint(v, extra)


def f32(field, x):
    return key(field, 5) + struct.pack("<f", x)


def f64(field, x):
    return key(field, 1) + struct.pack("<d", x)


# ---- messages built with the helper ----

def dims_type(elem, dims):
    return helper.make_tensor_type_proto(elem, dims)


def model_all_attrs():
    t = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5, "t")
    sub = helper.make_graph(
        [helper.make_node("Identity", ["a"], ["b"], name="inner")], "body",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1])])
    sp = helper.make_sparse_tensor(
        helper.make_tensor("v", TensorProto.FLOAT, [2], [1.5, -2.0]),
        helper.make_tensor("i", TensorProto.INT64, [2], [0, 5]), [2, 3])
    node = helper.make_node(
        "Custom", ["x", ""], ["y"], name="n\u00e9", domain="org.test", doc_string="d\ts",
        f=-0.0, i=-1, s=b"\x00\xff", t=t, g=sub, floats=[1.0, float("inf"), -3.25e-38],
        ints=[0, -(2**63), 2**63 - 1, 2**31, -(2**31)], strings=[b"", b"ab"], tensors=[t, t],
        graphs=[sub], sparse_tensor=sp, sparse_tensors=[sp],
        tp=dims_type(TensorProto.INT8, [None, "N", 3]),
        type_protos=[helper.make_sequence_type_proto(dims_type(TensorProto.BOOL, []))])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [t])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("org.test", 1)],
                          producer_name="pb", producer_version="1", doc_string="\u2603")
    m.ir_version = 8
    m.model_version = 2**40
    m.domain = "d"
    helper.set_model_props(m, {"k": "v", "": ""})
    return m


def model_tensors():
    """Every TensorProto data field, external data and segments."""
    ts = [
        helper.make_tensor("f", TensorProto.FLOAT, [3], [1.0, float("nan"), -0.0]),
        helper.make_tensor("i32", TensorProto.INT32, [4], [0, -1, 2**31 - 1, -(2**31)]),
        helper.make_tensor("i64", TensorProto.INT64, [2], [-(2**63), 12345678901]),
        helper.make_tensor("d", TensorProto.DOUBLE, [2], [1e300, -5e-324]),
        helper.make_tensor("u64", TensorProto.UINT64, [2], [0, 2**64 - 1]),
        helper.make_tensor("u32", TensorProto.UINT32, [1], [2**32 - 1]),
        helper.make_tensor("s", TensorProto.STRING, [2], [b"a", b"\x00\x01"]),
        helper.make_tensor("raw", TensorProto.FLOAT, [2], np.array([1, 2], np.float32).tobytes(),
                           raw=True),
        helper.make_tensor("empty", TensorProto.FLOAT, [0], []),
        helper.make_tensor("scalar", TensorProto.INT8, [], [-7]),
    ]
    ext = TensorProto(name="ext", data_type=TensorProto.FLOAT, dims=[4])
    ext.data_location = TensorProto.EXTERNAL
    for k, v in [("location", "w.bin"), ("offset", "16"), ("length", "16")]:
        entry = ext.external_data.add()
        entry.key, entry.value = k, v
    seg = helper.make_tensor("seg", TensorProto.FLOAT, [2], [3.0, 4.0])
    seg.segment.begin = 0
    seg.segment.end = 2
    seg.doc_string = "segment"
    ts += [ext, seg]
    vis = [
        helper.make_value_info("seq", helper.make_sequence_type_proto(
            dims_type(TensorProto.FLOAT, [2]))),
        helper.make_value_info("map", helper.make_map_type_proto(
            TensorProto.STRING, dims_type(TensorProto.INT64, [None]))),
        helper.make_value_info("opt", helper.make_optional_type_proto(
            dims_type(TensorProto.FLOAT16, [1, "n"]))),
        helper.make_value_info("sp", helper.make_sparse_tensor_type_proto(
            TensorProto.FLOAT, [5, 5])),
    ]
    vis[0].type.denotation = "TENSOR"
    vis[3].doc_string = "sparse"
    graph = helper.make_graph([], "tensors", [], [], ts, value_info=vis)
    graph.doc_string = "all the tensor data fields"
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def model_functions():
    f = helper.make_function(
        "local", "Fn", ["x"], ["y"], [helper.make_node("Neg", ["x"], ["y"])],
        [helper.make_opsetid("", 17)], attributes=["alpha"])
    f.doc_string = "fn"
    node = helper.make_node("Fn", ["a"], ["b"], domain="local")
    graph = helper.make_graph([node], "fg", [helper.make_tensor_value_info(
        "a", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("b", TensorProto.FLOAT,
                                                                      [2])])
    m = helper.make_model(graph, functions=[f], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    m.ir_version = 8
    ti = m.training_info.add()
    ti.algorithm.name = "step"
    b = ti.update_binding.add()
    b.key, b.value = "w", "w_new"
    qa = m.graph.quantization_annotation.add()
    qa.tensor_name = "a"
    e = qa.quant_parameter_tensor_names.add()
    e.key, e.value = "SCALE_TENSOR", "s"
    return m


def model_empty():
    return onnx.ModelProto()


# ---- hand-written forms ----

def hand_cases():
    """(name, message type, bytes) written by hand."""
    cases = []
    # packed fields written unpacked, mixed with packed runs of the same field
    t = (vi(1, 2) + vi(2, TensorProto.FLOAT) + f32(4, 1.5) + ld(4, struct.pack("<ff", 2.0, -3.0))
         + f32(4, 4.0) + vi(5, 2**32 - 5) + ld(5, varint(-1) + varint(7)) + vi(7, 2**63)
         + ld(7, varint(5) + varint(-(2**40))) + f64(10, 0.1) + ld(10, struct.pack("<d", -2.5))
         + vi(11, 2**64 - 1) + ld(11, varint(3) + varint(2**40)) + ld(8, b"name"))
    cases.append(("tensor_unpacked_mixed", "TensorProto", t))
    # a scalar and a string repeated: the last wins; varints longer than needed
    t = (vi(2, 1, extra=3) + vi(2, 7) + ld(8, b"first") + ld(8, b"second")
         + vi(1, 3, extra=8) + vi(14, 1) + vi(14, 0) + ld(12, b"x") + ld(12, b""))
    cases.append(("tensor_last_wins", "TensorProto", t))
    # a sub-message repeated: merged (its scalars overwritten, its repeated fields appended)
    seg1 = vi(1, 3) + vi(2, 9)
    seg2 = vi(2, 11)
    g1 = ld(1, ld(1, b"x") + ld(2, b"y")) + ld(2, b"first")
    g2 = ld(1, ld(1, b"z")) + ld(2, b"second") + ld(5, ld(1, b"init") + ld(3, seg1))
    g3 = ld(5, ld(1, b"init2")) + ld(10, b"doc")
    m = vi(1, 8) + ld(7, g1) + ld(7, g2) + ld(7, g3) + ld(7, ld(5, ld(3, seg2)))
    cases.append(("model_graph_merged", "ModelProto", m))
    # oneof members replacing each other, and one merged with itself
    dim_v = vi(1, 5)
    dim_p = ld(2, b"N")
    shape = ld(1, dim_v + dim_p) + ld(1, dim_p + dim_v) + ld(1, dim_p + ld(3, b"den") + dim_p)
    tensor_type = vi(1, TensorProto.FLOAT) + ld(2, shape)
    seq = ld(1, ld(1, vi(1, TensorProto.INT32)))
    tp = ld(1, tensor_type) + ld(4, seq) + ld(1, vi(1, TensorProto.DOUBLE)) + ld(1, ld(2, shape))
    cases.append(("type_oneof_switch", "TypeProto", tp + ld(6, b"den")))
    # unknown fields of every wire type (kept, and packed again after the known fields)
    u = (vi(1000, 5) + ld(2, b"producer") + key(999, 1) + b"\x01" * 8 + key(77, 5) + b"abcd"
         + ld(536870911, b"\x00top") + vi(1, 9) + ld(100, b""))
    cases.append(("model_unknown_fields", "ModelProto", u))
    # a merged sub-message keeps the unknown fields of every occurrence (protobuf-c drops those
    # of the earlier ones)
    u = ld(7, ld(2, b"ga") + vi(900, 1)) + ld(7, vi(901, 2) + ld(10, b"doc")) + vi(902, 3)
    cases.append(("model_merged_unknown", "ModelProto", u))
    # empty bytes, empty strings, zero-length sub-messages
    n = (ld(1, b"") + ld(2, b"") + ld(3, b"") + ld(5, b"") + ld(5, ld(1, b"a")) + ld(7, b"")
         + ld(6, b""))
    cases.append(("node_empty_parts", "NodeProto", n))
    # a deep but legal nesting: Sequence types 40 levels down (81 messages)
    tp = vi(1, TensorProto.FLOAT)
    tp = ld(1, tp)
    for _ in range(40):
        tp = ld(4, ld(1, tp))
    cases.append(("type_nested_40", "TypeProto", tp))
    return cases


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cases = [(name, "ModelProto", fn().SerializeToString()) for name, fn in [
        ("model_all_attrs", model_all_attrs), ("model_tensors", model_tensors),
        ("model_functions", model_functions), ("model_empty", model_empty)]]
    cases += hand_cases()
    with open(os.path.join(out, "cases.txt"), "w") as lst:
        for name, typ, data in cases:
            msg = getattr(onnx, typ)()
            msg.ParseFromString(data)
            with open(os.path.join(out, name + ".bin"), "wb") as f:
                f.write(data)
            with open(os.path.join(out, name + ".dump"), "w") as f:
                f.write("".join(line + "\n" for line in dump(msg)))
            with open(os.path.join(out, name + ".out"), "wb") as f:
                f.write(msg.SerializeToString())
            lst.write(f"{name} {typ}\n")
    print(f"{len(cases)} protobuf fixtures in {out}")


if __name__ == "__main__":
    main()
