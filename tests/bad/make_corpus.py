#!/usr/bin/env python3
"""Writes the bad-input corpus for orch into OUTDIR: broken models (onnx.helper and raw bytes),
broken input files, bad command lines, and a few valid edge cases that must run (0-sized
tensors, NaN/Inf). OUTDIR/cases.tsv lists one case a line, tab-separated:

    name  args  exit  substrings  names

args: the orch command line (shell quoting, paths relative to OUTDIR, where run_bad.py runs it);
exit: the expected exit code (1 usage, 2 invalid model or input, 3 unsupported, 4 mismatch,
5 runtime), or several separated by ','; substrings: what the error message must contain,
separated by ' && ' ('-' for none); names: a path the message must name ('-' for none).

Op-specific cases use the node name and op as their substrings: the op's own wording may change.

usage: make_corpus.py OUTDIR
"""
import os
import random
import shutil
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

F = TP.FLOAT
I64 = TP.INT64
CASES = []


def case(name, args, code, subs="-", names="-"):
    CASES.append((name, args, str(code), subs, names))


def vi(name, dtype, shape):
    return h.make_tensor_value_info(name, dtype, shape)


def graph(nodes, inputs, outputs, inits=(), name="g"):
    return h.make_graph(nodes, name, inputs, outputs, initializer=list(inits))


def model(g, opset=13, extra_opsets=()):
    ops = [h.make_opsetid("", opset)] + [h.make_opsetid(d, v) for d, v in extra_opsets]
    m = h.make_model(g, opset_imports=ops, producer_name="orch-bad-corpus")
    m.ir_version = 8
    return m


def x23():
    return vi("x", F, [2, 3])


def y(shape=None, dtype=F):
    return vi("y", dtype, shape)


def relu_model(**kw):
    return model(graph([h.make_node("Relu", ["x"], ["y"], name="relu_node")], [x23()], [y()]),
                 **kw)


def save(out, rel, m):
    path = os.path.join(out, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = m if isinstance(m, bytes) else m.SerializeToString()
    with open(path, "wb") as f:
        f.write(data)
    return rel


def npy(out, rel, arr):
    path = os.path.join(out, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, arr)
    return rel


def raw_npy(out, rel, header, payload):
    """A .npy with a hand-written header dict (version 1), padded as numpy pads."""
    head = header.encode()
    total = 10 + len(head) + 1
    head += b" " * ((64 - total % 64) % 64) + b"\n"
    data = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head + payload
    path = os.path.join(out, rel)
    with open(path, "wb") as f:
        f.write(data)
    return rel


def single_op(op, inputs, outputs, inits=(), node_name=None, opset=13, **attrs):
    """A one-node model; inputs/outputs are value infos, inits are initializer tensors."""
    init_names = [t.name for t in inits]
    node = h.make_node(op, [i.name for i in inputs] + init_names, [o.name for o in outputs],
                       name=node_name or op.lower() + "_node", **attrs)
    return model(graph([node], inputs, outputs, inits), opset=opset)


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def file_cases(out):
    """The model file itself is missing, empty, garbage, truncated or another protobuf."""
    case("usage_no_args", "", 1, "usage")
    case("usage_no_model", "run", 1, "no model given")
    case("usage_unknown_command", "frobnicate models/valid.onnx", 1, "unknown command")
    case("usage_unknown_option", "run models/valid.onnx --frob", 1, "unknown option '--frob'")
    case("usage_bad_atol", "run models/valid.onnx --atol -1", 1, "--atol")
    case("usage_option_without_value", "run models/valid.onnx -i", 1, "-i needs a value")
    case("usage_input_not_name_eq_file", "run models/valid.onnx -i x", 1, "NAME=FILE")
    case("usage_bad_seed", "run models/valid.onnx --seed abc", 1, "--seed")
    case("usage_bad_repeat", "run models/valid.onnx --repeat 0", 1, "--repeat")
    case("usage_two_models", "run models/valid.onnx models/valid.onnx", 1, "unexpected argument")
    case("output_dir_is_a_file", "run models/valid.onnx --seed 1 -o models/valid.onnx", 1,
         "models/valid.onnx")

    case("usage_seed_negative", "run models/valid.onnx --seed -1", 1, "--seed")
    case("usage_seed_negative_compile", "compile models/valid.onnx -t cpu -o x.orch --seed -1",
         1, "--seed")
    save(out, "models/empty.onnx", b"")
    case("empty_file", "run models/empty.onnx", 2, "ONNX model", "models/empty.onnx")
    # An empty or cut artefact is reported as one, not as a model that does not parse.
    save(out, "models/empty.orch", b"")
    save(out, "models/cut.orch", b"\x89ORC")
    for cmd in ["run", "info", "bench"]:
        case(f"empty_artefact_{cmd}", f"{cmd} models/empty.orch", 2,
             "empty file, not an orch artefact", "models/empty.orch")
    case("cut_artefact", "run models/cut.orch", 2, "4 bytes of at least 16", "models/cut.orch")
    case("empty_artefact_export", "export models/empty.orch models/export_tree", 2,
         "empty file, not an orch artefact", "models/empty.orch")
    case("cut_artefact_export", "export models/cut.orch models/export_tree", 2,
         "4 bytes of at least 16", "models/cut.orch")
    rnd = random.Random(1234)
    save(out, "models/random.onnx", bytes(rnd.randrange(256) for _ in range(4096)))
    case("random_bytes", "run models/random.onnx", 2, "ONNX model", "models/random.onnx")
    save(out, "models/text.onnx", b"this is not a model\n" * 10)
    case("text_file", "info models/text.onnx", 2, "ONNX model", "models/text.onnx")

    # A model with a weight big enough that most cut points land inside the graph.
    w = const("w", np.arange(6 * 64, dtype=np.float32).reshape(6, 64) / 7)
    full = model(graph([h.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                       [vi("x", F, [2, 6])], [vi("y", F, [2, 64])], [w])).SerializeToString()
    for label, cut in [("1byte", 1), ("10pct", len(full) // 10), ("50pct", len(full) // 2),
                       ("90pct", len(full) * 9 // 10), ("last_byte", len(full) - 1)]:
        rel = save(out, f"models/truncated_{label}.onnx", full[:cut])
        case(f"truncated_{label}", f"run {rel}", 2, "ONNX model", rel)

    os.makedirs(os.path.join(out, "models/a_directory.onnx"), exist_ok=True)
    case("directory", "run models/a_directory.onnx", 2, "not a regular file",
         "models/a_directory.onnx")
    case("missing_file", "run models/does_not_exist.onnx", 2, "cannot open",
         "models/does_not_exist.onnx")
    # Special files: read without blocking and refused; outputs never written through or over
    # anything but a regular file, nor over the command's own input.
    for rel in ["models/fifo.onnx", "inputs/fifo.npy"]:
        p = os.path.join(out, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if not os.path.exists(p):
            os.mkfifo(p)
    case("fifo_model", "run models/fifo.onnx", 2, "not a regular file", "models/fifo.onnx")
    case("fifo_model_compile", "compile models/fifo.onnx -t cpu -o models/fifo_out.orch", 2,
         "not a regular file", "models/fifo.onnx")
    case("fifo_input", "run models/valid.onnx -i x=inputs/fifo.npy", 2, "not a regular file",
         "inputs/fifo.npy")
    case("compile_output_is_the_input", "compile models/valid.onnx -t cpu -o models/valid.onnx",
         1, "never writes over an input", "models/valid.onnx")
    for rel, dest in [("models/link_to_null.orch", "/dev/null"),
                      ("models/link_to_file.orch", "valid.onnx")]:
        p = os.path.join(out, rel)
        if os.path.lexists(p):
            os.remove(p)
        os.symlink(dest, p)
        case(f"compile_output_{os.path.basename(rel)[:-5]}",
             f"compile models/valid.onnx -t cpu -o {rel}", 1, "symbolic link", rel)
    case("compile_output_fifo", "compile models/valid.onnx -t cpu -o inputs/fifo.npy", 1,
         "a FIFO", "inputs/fifo.npy")
    case("compile_output_folder_missing",
         "compile models/valid.onnx -t cpu -o no_such_folder/x.orch", 1, "does not exist",
         "no_such_folder")

    t = const("t", np.ones((2, 3), np.float32))
    save(out, "models/tensor_proto.onnx", t.SerializeToString())
    case("other_message_tensor", "run models/tensor_proto.onnx", 2, "ONNX model",
         "models/tensor_proto.onnx")
    g = graph([h.make_node("Relu", ["x"], ["y"])], [x23()], [y()])
    save(out, "models/graph_proto.onnx", g.SerializeToString())
    case("other_message_graph", "run models/graph_proto.onnx", 2, "ONNX model",
         "models/graph_proto.onnx")


def header_cases(out):
    """ModelProto-level problems: graph, opsets."""
    m = onnx.ModelProto(ir_version=8, opset_import=[h.make_opsetid("", 13)])
    save(out, "models/no_graph.onnx", m)
    case("no_graph", "run models/no_graph.onnx", 2, "no graph", "models/no_graph.onnx")

    m = relu_model()
    del m.opset_import[:]
    m.opset_import.append(h.make_opsetid("com.example", 1))
    save(out, "models/no_default_opset.onnx", m)
    case("no_default_opset", "run models/no_default_opset.onnx", 2, "opset",
         "models/no_default_opset.onnx")
    m = relu_model()
    del m.opset_import[:]
    save(out, "models/no_opset_at_all.onnx", m)
    case("no_opset_at_all", "info models/no_opset_at_all.onnx", 2, "opset",
         "models/no_opset_at_all.onnx")
    save(out, "models/opset22.onnx", relu_model(opset=22))
    case("opset_too_new", "run models/opset22.onnx", 3, "opset 22", "models/opset22.onnx")
    save(out, "models/opset_huge.onnx", relu_model(opset=1 << 40))
    case("opset_huge", "run models/opset_huge.onnx", 3, "newer", "models/opset_huge.onnx")
    save(out, "models/opset10.onnx", relu_model(opset=10))
    case("opset_too_old", "run models/opset10.onnx", 3, "opset 10", "models/opset10.onnx")
    save(out, "models/valid.onnx", relu_model())
    case("valid_baseline", "run models/valid.onnx --seed 1", 0)


def op_support_cases(out):
    save(out, "models/unknown_op.onnx",
         model(graph([h.make_node("FooBar", ["x"], ["y"], name="foo_node")], [x23()], [y()])))
    case("unknown_op", "run models/unknown_op.onnx", 3, "FooBar && foo_node",
         "models/unknown_op.onnx")
    nodes = [h.make_node("FooA", ["x"], ["a"], name="na"),
             h.make_node("Relu", ["a"], ["b"], name="nr"),
             h.make_node("FooB", ["b"], ["c"], name="nb"),
             h.make_node("FooC", ["c"], ["y"], name="nc")]
    save(out, "models/unknown_ops_many.onnx", model(graph(nodes, [x23()], [y()])))
    case("unknown_ops_many", "run models/unknown_ops_many.onnx", 3,
         "FooA && FooB && FooC && 'na' && 'nb' && 'nc'", "models/unknown_ops_many.onnx")
    case("unknown_ops_many_info", "info models/unknown_ops_many.onnx", 3,
         "FooA && FooB && FooC", "models/unknown_ops_many.onnx")
    n = h.make_node("Relu", ["x"], ["y"], name="custom_node", domain="com.example")
    save(out, "models/custom_domain.onnx",
         model(graph([n], [x23()], [y()]), extra_opsets=[("com.example", 1)]))
    case("custom_domain_op", "run models/custom_domain.onnx", 3,
         "com.example && custom_node", "models/custom_domain.onnx")

    then_g = graph([h.make_node("Relu", ["x"], ["t"])], [], [vi("t", F, [2, 3])], name="then")
    else_g = graph([h.make_node("Neg", ["x"], ["e"])], [], [vi("e", F, [2, 3])], name="else")
    n = h.make_node("If", ["c"], ["y"], name="if_node", then_branch=then_g, else_branch=else_g)
    save(out, "models/if_subgraph.onnx",
         model(graph([n], [x23(), vi("c", TP.BOOL, [])], [y()])))
    case("if_subgraph", "run models/if_subgraph.onnx", 3, "If && if_node",
         "models/if_subgraph.onnx")
    body = graph([h.make_node("Identity", ["cond_in"], ["cond_out"]),
                  h.make_node("Relu", ["v_in"], ["v_out"])],
                 [vi("i", I64, []), vi("cond_in", TP.BOOL, []), vi("v_in", F, [2, 3])],
                 [vi("cond_out", TP.BOOL, []), vi("v_out", F, [2, 3])], name="body")
    inits = [const("trip", np.array(3, np.int64)), const("cond", np.array(True))]
    n = h.make_node("Loop", ["trip", "cond", "x"], ["y"], name="loop_node", body=body)
    save(out, "models/loop_subgraph.onnx", model(graph([n], [x23()], [y()], inits)))
    # A constant trip count and a carried condition: unrolled, so it runs.
    case("loop_subgraph", "run models/loop_subgraph.onnx --seed 1", 0)


def rnn_cases(out):
    """LSTM, GRU and RNN attributes and inputs orch refuses, each naming the node and what."""
    T, B, I, H = 3, 2, 4, 5
    xv = vi("x", F, [T, B, I])

    def rnn(name, op, G, attrs, w_rows=None, lens=None, opset=14):
        inits = [const("W", np.ones((1, w_rows or G * H, I), np.float32) * 0.1),
                 const("R", np.ones((1, G * H, H), np.float32) * 0.1)]
        ins = ["x", "W", "R"]
        if lens is not None:
            inits.append(const("L", np.asarray(lens, np.int32)))
            ins += ["", "L"]
        n = h.make_node(op, ins, ["y"], name=name, hidden_size=H, **attrs)
        return model(graph([n], [xv], [vi("y", F, None)], inits), opset=opset)

    bad = [
        ("lstm_input_forget", "LSTM", 4, {"input_forget": 1}, None, None, 3,
         "input_forget && lstm_if"),
        ("gru_unknown_activation", "GRU", 3, {"activations": ["Sigmoid", "Swish"]}, None, None,
         3, "Swish && activations && gru_act"),
        ("rnn_activation_count", "RNN", 1, {"activations": ["Tanh", "Tanh"]}, None, None, 2,
         "activations && rnn_cnt"),
        ("lstm_bad_direction", "LSTM", 4, {"direction": "sideways"}, None, None, 2,
         "direction && lstm_dir"),
        ("gru_bad_w_rows", "GRU", 3, {}, 4 * H, None, 2, "W && gru_w"),
        ("rnn_lens_too_long", "RNN", 1, {}, None, [T, T + 1], 2, "sequence_lens && rnn_len"),
        ("lstm_bad_layout", "LSTM", 4, {"layout": 2}, None, None, 2, "layout && lstm_lay"),
    ]
    for case_name, op, G, attrs, w_rows, lens, code, subs in bad:
        node = subs.split(" && ")[-1]
        save(out, f"models/{case_name}.onnx", rnn(node, op, G, attrs, w_rows, lens))
        case(case_name, f"run models/{case_name}.onnx", code, subs, f"models/{case_name}.onnx")


def tensor_cases(out):
    """Initializers and Constant nodes whose payload does not match their header."""
    def init_model(t, op="Add"):
        n = h.make_node(op, ["x", t.name], ["y"], name="add_node")
        return model(graph([n], [x23()], [y()], [t]))

    t = TP(name="w", data_type=F, dims=[2, -3], float_data=[1] * 6)
    save(out, "models/init_negative_dim.onnx", init_model(t))
    case("init_negative_dim", "run models/init_negative_dim.onnx", 2,
         "negative dimension && 'w'", "models/init_negative_dim.onnx")
    t = TP(name="w", data_type=F, dims=[1 << 40, 1 << 40])
    save(out, "models/init_dims_overflow.onnx", init_model(t))
    case("init_dims_overflow", "run models/init_dims_overflow.onnx", 2, "overflow && 'w'",
         "models/init_dims_overflow.onnx")
    t = TP(name="w", data_type=F, dims=[1000000, 1000000, 1000])
    save(out, "models/init_absurd_no_data.onnx", init_model(t))
    case("init_absurd_dims_no_data", "run models/init_absurd_no_data.onnx", 2,
         "too large && 'w'", "models/init_absurd_no_data.onnx")
    t = TP(name="w", data_type=F, dims=[2, 3], raw_data=b"\0" * 20)
    save(out, "models/init_raw_mismatch.onnx", init_model(t))
    case("init_raw_size_mismatch", "run models/init_raw_mismatch.onnx", 2,
         "raw data && 'w'", "models/init_raw_mismatch.onnx")
    t = TP(name="w", data_type=F, dims=[2, 3], float_data=[1, 2, 3])
    save(out, "models/init_typed_mismatch.onnx", init_model(t))
    case("init_typed_count_mismatch", "run models/init_typed_mismatch.onnx", 2,
         "3 values && 'w'", "models/init_typed_mismatch.onnx")
    t = TP(name="w", data_type=TP.INT32, dims=[2, 3], int64_data=[1] * 6)
    save(out, "models/init_wrong_typed_field.onnx", init_model(t))
    case("init_wrong_typed_field", "run models/init_wrong_typed_field.onnx", 2, "'w'",
         "models/init_wrong_typed_field.onnx")
    t = TP(name="w", data_type=TP.STRING, dims=[2], string_data=[b"a", b"b"])
    save(out, "models/init_string.onnx", init_model(t))
    case("init_string", "run models/init_string.onnx", 3, "string && 'w'",
         "models/init_string.onnx")
    t = TP(name="w", dims=[2, 3], float_data=[1] * 6)
    save(out, "models/init_no_dtype.onnx", init_model(t))
    case("init_no_dtype", "run models/init_no_dtype.onnx", 2, "no data type && 'w'",
         "models/init_no_dtype.onnx")
    t = TP(name="w", data_type=99, dims=[2, 3], raw_data=b"\0" * 24)
    save(out, "models/init_unknown_dtype.onnx", init_model(t))
    case("init_unknown_dtype", "run models/init_unknown_dtype.onnx", 3, "'w'",
         "models/init_unknown_dtype.onnx")
    t = TP(name="w", data_type=F, dims=[2, 3], float_data=[1] * 6)
    t.segment.begin, t.segment.end = 0, 6
    save(out, "models/init_segmented.onnx", init_model(t))
    case("init_segmented", "run models/init_segmented.onnx", 3, "segmented && 'w'",
         "models/init_segmented.onnx")
    t = TP(name="w", data_type=F, dims=[1] * 9, float_data=[1])
    save(out, "models/init_rank9.onnx", init_model(t))
    case("init_rank9", "run models/init_rank9.onnx", 3, "rank 9 && 'w'",
         "models/init_rank9.onnx")
    m = init_model(const("w", np.ones((2, 3), np.float32)))
    m.graph.initializer.append(const("w", np.ones((2, 3), np.float32)))
    save(out, "models/init_twice.onnx", m)
    case("init_defined_twice", "run models/init_twice.onnx", 2, "twice && 'w'",
         "models/init_twice.onnx")
    m = init_model(const("w", np.ones((2, 3), np.float32)))
    m.graph.initializer[0].name = ""
    save(out, "models/init_no_name.onnx", m)
    case("init_no_name", "run models/init_no_name.onnx", 2, "no name",
         "models/init_no_name.onnx")
    m = init_model(const("w", np.ones((2, 3), np.float32)))
    sp = m.graph.sparse_initializer.add()
    sp.values.CopyFrom(const("sp", np.ones(2, np.float32)))
    sp.indices.CopyFrom(const("sp_i", np.array([0, 4], np.int64)))
    sp.dims.extend([2, 3])
    save(out, "models/sparse_init.onnx", m)
    case("sparse_initializer", "run models/sparse_init.onnx", 3, "sparse",
         "models/sparse_init.onnx")

    def const_model(cnode):
        n = h.make_node("Add", ["x", "c"], ["y"], name="add_node")
        return model(graph([cnode, n], [x23()], [y()]))
    c = h.make_node("Constant", [], ["c"], name="const_node",
                    value=TP(name="c", data_type=F, dims=[2, 3], raw_data=b"\0" * 7))
    save(out, "models/constant_bad_raw.onnx", const_model(c))
    case("constant_bad_raw", "run models/constant_bad_raw.onnx", 2, "const_node && raw data",
         "models/constant_bad_raw.onnx")
    c = h.make_node("Constant", [], ["c"], name="const_node")
    save(out, "models/constant_no_attr.onnx", const_model(c))
    case("constant_no_attr", "run models/constant_no_attr.onnx", 2, "const_node && attribute",
         "models/constant_no_attr.onnx")
    c = h.make_node("Constant", [], ["c"], name="const_node", value_string="hello")
    save(out, "models/constant_string.onnx", const_model(c))
    case("constant_value_string", "run models/constant_string.onnx", 3, "const_node",
         "models/constant_string.onnx")
    c = h.make_node("Constant", [], ["c", "d"], name="const_node", value_float=1.0)
    save(out, "models/constant_two_outputs.onnx", const_model(c))
    case("constant_two_outputs", "run models/constant_two_outputs.onnx", 2, "const_node",
         "models/constant_two_outputs.onnx")
    c = h.make_node("Constant", [], ["x"], name="const_node", value_float=1.0)
    n = h.make_node("Relu", ["x"], ["y"], name="relu_node")
    save(out, "models/constant_redefines_input.onnx", model(graph([c, n], [x23()], [y()])))
    case("constant_redefines_input", "run models/constant_redefines_input.onnx", 2,
         "const_node && 'x'", "models/constant_redefines_input.onnx")


def external_cases(out):
    """External data: paths that escape the model's folder, missing or short files."""
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    os.makedirs(os.path.join(out, "ext"), exist_ok=True)
    with open(os.path.join(out, "ext/w.bin"), "wb") as f:
        f.write(arr.tobytes())
    with open(os.path.join(out, "ext/short.bin"), "wb") as f:
        f.write(arr.tobytes()[:10])
    link = os.path.join(out, "ext/outside.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink("../inputs/x_23.npy", link)

    def ext_model(rel, **kv):
        t = TP(name="w", data_type=F, dims=[2, 3], data_location=TP.EXTERNAL)
        for k, v in kv.items():
            e = t.external_data.add()
            e.key, e.value = k, v
        n = h.make_node("Add", ["x", "w"], ["y"], name="add_node")
        return save(out, rel, model(graph([n], [x23()], [y()], [t])))

    case("ext_valid", f"run {ext_model('ext/valid.onnx', location='w.bin')} --seed 1", 0)
    rel = ext_model("ext/abs.onnx", location=os.path.abspath(os.path.join(out, "ext/w.bin")))
    case("ext_absolute_path", f"run {rel}", 2, "relative path && 'w'", rel)
    rel = ext_model("ext/dotdot.onnx", location="../ext/w.bin")
    case("ext_dotdot", f"run {rel}", 2, "leaves the model's folder && 'w'", rel)
    rel = ext_model("ext/missing.onnx", location="nope.bin")
    case("ext_missing_file", f"run {rel}", 2, "not found && nope.bin", rel)
    rel = ext_model("ext/short.onnx", location="short.bin")
    case("ext_too_short", f"run {rel}", 2, "too short && 'w'", rel)
    rel = ext_model("ext/offset_past_end.onnx", location="w.bin", offset="1000")
    case("ext_offset_past_end", f"run {rel}", 2, "too short && 'w'", rel)
    rel = ext_model("ext/bad_offset.onnx", location="w.bin", offset="12abc")
    case("ext_bad_offset", f"run {rel}", 2, "offset && 'w'", rel)
    rel = ext_model("ext/bad_length.onnx", location="w.bin", length="8")
    case("ext_length_mismatch", f"run {rel}", 2, "length && 'w'", rel)
    rel = ext_model("ext/no_location.onnx", offset="0")
    case("ext_no_location", f"run {rel}", 2, "location && 'w'", rel)
    rel = ext_model("ext/symlink.onnx", location="outside.bin")
    case("ext_symlink_outside", f"run {rel}", 2, "outside && 'w'", rel)
    rel = ext_model("ext/dir.onnx", location=".")
    case("ext_location_is_dir", f"run {rel}", 2, "'w'", rel)


def structure_cases(out):
    """Graph structure: names, producers, cycles, outputs, arity."""
    def g1(nodes, inputs=None, outputs=None, inits=()):
        return model(graph(nodes, inputs if inputs is not None else [x23()],
                           outputs if outputs is not None else [y()], inits))

    rel = save(out, "models/dangling.onnx",
               g1([h.make_node("Add", ["x", "nothere"], ["y"], name="add_node")]))
    case("dangling_tensor_name", f"run {rel}", 2, "nothere && add_node", rel)
    rel = save(out, "models/produced_twice.onnx",
               g1([h.make_node("Relu", ["x"], ["y"], name="first"),
                   h.make_node("Neg", ["x"], ["y"], name="second")]))
    case("tensor_produced_twice", f"run {rel}", 2, "produced twice && 'y'", rel)
    rel = save(out, "models/cycle.onnx",
               g1([h.make_node("Add", ["x", "b"], ["a"], name="cyc_a"),
                   h.make_node("Relu", ["a"], ["b"], name="cyc_b"),
                   h.make_node("Relu", ["a"], ["y"], name="out_node")]))
    case("graph_cycle", f"run {rel}", 2, "cycle && cyc_", rel)
    rel = save(out, "models/self_loop.onnx",
               g1([h.make_node("Add", ["x", "y"], ["y"], name="self_node")]))
    case("graph_self_loop", f"run {rel}", 2, "cycle && self_node", rel)
    # A required output named "" (absent): LayerNormalization's Y left out, Mean kept.
    rel = save(out, "models/required_output_unnamed.onnx",
               g1([h.make_node("LayerNormalization", ["x", "s"], ["", "y"], name="ln_node", axis=-1)],
                  inits=[h.make_tensor("s", 1, [3], [1.0, 1.0, 1.0])]))
    case("required_output_unnamed", f"run {rel}", 2, "ln_node && required output 0", rel)
    rel = save(out, "models/output_unproduced.onnx",
               g1([h.make_node("Relu", ["x"], ["z"], name="relu_node")]))
    case("output_not_produced", f"run {rel}", 2, "'y' && not produced", rel)
    rel = save(out, "models/no_outputs.onnx",
               g1([h.make_node("Relu", ["x"], ["y"], name="relu_node")], outputs=[]))
    case("graph_no_outputs", f"run {rel}", 2, "no outputs", rel)
    rel = save(out, "models/no_op_type.onnx", g1([h.make_node("", ["x"], ["y"], name="blank")]))
    case("node_no_op_type", f"run {rel}", 2, "blank && op_type", rel)
    rel = save(out, "models/writes_input.onnx",
               g1([h.make_node("Relu", ["y"], ["x"], name="relu_node")],
                  inputs=[x23(), vi("y", F, [2, 3])], outputs=[vi("x", F, [2, 3])]))
    case("node_writes_graph_input", f"run {rel}", 2, "relu_node && 'x'", rel)
    rel = save(out, "models/writes_initializer.onnx",
               g1([h.make_node("Relu", ["x"], ["w"], name="relu_node"),
                   h.make_node("Add", ["x", "w"], ["y"], name="add_node")],
                  inits=[const("w", np.ones((2, 3), np.float32))]))
    case("node_writes_initializer", f"run {rel}", 2, "relu_node && 'w'", rel)
    rel = save(out, "models/input_twice.onnx",
               g1([h.make_node("Relu", ["x"], ["y"], name="relu_node")],
                  inputs=[x23(), vi("x", F, [2, 3])]))
    case("input_declared_twice", f"run {rel}", 2, "'x' && twice", rel)
    rel = save(out, "models/too_many_inputs.onnx",
               g1([h.make_node("Relu", ["x", "x"], ["y"], name="relu_node")]))
    case("node_too_many_inputs", f"run {rel}", 2, "relu_node && 2 inputs", rel)
    rel = save(out, "models/too_few_inputs.onnx",
               g1([h.make_node("Add", ["x"], ["y"], name="add_node")]))
    case("node_too_few_inputs", f"run {rel}", 2, "add_node && 1 inputs", rel)
    rel = save(out, "models/missing_required.onnx",
               g1([h.make_node("Add", ["", "x"], ["y"], name="add_node")]))
    case("node_missing_required_input", f"run {rel}", 2, "add_node && missing", rel)
    rel = save(out, "models/zero_outputs.onnx",
               g1([h.make_node("Relu", ["x"], [], name="relu_node"),
                   h.make_node("Relu", ["x"], ["y"], name="relu2")]))
    case("node_zero_outputs", f"run {rel}", 2, "relu_node && 0 outputs", rel)
    rel = save(out, "models/too_many_outputs.onnx",
               g1([h.make_node("Relu", ["x"], ["y", "y2"], name="relu_node")]))
    case("node_too_many_outputs", f"run {rel}", 2, "relu_node && 2 outputs", rel)
    rel = save(out, "models/no_nodes.onnx", g1([], outputs=[vi("x", F, [2, 3])]))
    case("graph_without_nodes", f"run {rel} --seed 1", 0)
    c = h.make_node("Constant", [], ["y"], name="const_node", value_floats=[1.0, 2.0])
    rel = save(out, "models/constant_only.onnx", g1([c], inputs=[], outputs=[y()]))
    case("graph_only_constant", f"run {rel}", 0)
    rel = save(out, "models/init_as_input.onnx",
               g1([h.make_node("Add", ["x", "w"], ["y"], name="add_node")],
                  inputs=[x23(), vi("w", F, [2, 3])],
                  inits=[const("w", np.ones((2, 3), np.float32))]))
    case("initializer_listed_as_input", f"run {rel} --seed 1", 0)
    long_name = "n" * 5000
    rel = save(out, "models/long_names.onnx",
               g1([h.make_node("FooBar", ["x"], ["y"], name=long_name)]))
    case("very_long_node_name", f"run {rel}", 3, "FooBar", rel)
    rel = save(out, "models/many_inputs.onnx",
               g1([h.make_node("Sum", ["x"] * 5000, ["y"], name="sum_node")]))
    case("node_with_5000_inputs", f"run {rel}", 2, "sum_node", rel)
    # Valid: a graph output that is a graph input, and one that is an initializer.
    rel = save(out, "models/output_is_input.onnx",
               g1([h.make_node("Relu", ["x"], ["y"], name="relu_node")],
                  outputs=[y(), vi("x", F, [2, 3]), vi("w", F, [2])],
                  inits=[const("w", np.ones(2, np.float32))]))
    case("output_is_input_or_initializer", f"run {rel} --seed 1", 0)


def input_decl_cases(out):
    """Graph input declarations and --input-shapes."""
    def relu_in(inp):
        return model(graph([h.make_node("Relu", ["x"], ["y"], name="relu_node")], [inp], [y()]))

    rel = save(out, "models/symbolic.onnx", relu_in(vi("x", F, ["N", 3])))
    case("symbolic_dim_unbound", f"run {rel}", 2, "'N' && --input-shapes", rel)
    case("symbolic_dim_bound", f"run {rel} --input-shapes x:4x3 --seed 1", 0)
    case("symbolic_dim_bound_zero", f"run {rel} --input-shapes x:0x3 --seed 1", 0)
    case("input_shapes_wrong_rank", f"run {rel} --input-shapes x:4x3x2", 2, "'x' && rank", rel)
    case("input_shapes_fixed_conflict", f"run {rel} --input-shapes x:4x5", 2,
         "'x' && axis 1", rel)
    case("input_shapes_unknown_name", f"run {rel} --input-shapes x:4x3,nosuch:2", 1, "nosuch")
    case("input_shapes_garbage_dims", f"run {rel} --input-shapes x:4xfoo", 1, "--input-shapes")
    case("input_shapes_no_colon", f"run {rel} --input-shapes justtext", 1, "NAME:DIMS")
    case("input_shapes_negative", f"run {rel} --input-shapes x:-4x3", 1, "--input-shapes")
    case("input_shapes_too_many_dims", f"run {rel} --input-shapes x:" + "x".join(["1"] * 9), 1,
         "--input-shapes")
    case("input_shapes_huge_number", f"run {rel} --input-shapes x:99999999999999999999x3", 1,
         "--input-shapes")
    case("input_shapes_absurd", f"run {rel} --input-shapes x:1000000000000x3", 2,
         "'x' && too large", rel)
    rel = save(out, "models/no_shape.onnx", relu_in(vi("x", F, None)))
    case("input_without_shape", f"run {rel}", 2, "'x' && no shape", rel)
    rel = save(out, "models/input_neg_dim.onnx", relu_in(vi("x", F, [2, -3])))
    case("input_negative_dim", f"run {rel}", 2, "'x' && negative", rel)
    rel = save(out, "models/input_rank9.onnx", relu_in(vi("x", F, [1] * 9)))
    case("input_rank9", f"run {rel}", 3, "'x' && rank 9", rel)
    rel = save(out, "models/input_undefined_dtype.onnx", relu_in(vi("x", TP.UNDEFINED, [2, 3])))
    case("input_undefined_dtype", f"run {rel}", 3, "'x'", rel)
    rel = save(out, "models/input_string.onnx", relu_in(vi("x", TP.STRING, [2, 3])))
    case("input_string_dtype", f"run {rel}", 3, "'x' && string", rel)
    seq = h.make_tensor_sequence_value_info("x", F, [2, 3])
    rel = save(out, "models/input_sequence.onnx", relu_in(seq))
    case("input_sequence_typed", f"run {rel}", 3, "'x' && is a sequence", rel)
    rel = save(out, "models/input_no_type.onnx", relu_in(onnx.ValueInfoProto(name="x")))
    case("input_without_type", f"run {rel}", 3, "'x'", rel)
    rel = save(out, "models/input_no_name.onnx", relu_in(vi("", F, [2, 3])))
    case("input_without_name", f"run {rel}", 2, "input && name", rel)
    rel = save(out, "models/input_absurd.onnx", relu_in(vi("x", F, [1, 1000000, 1000000, 1000])))
    case("input_absurd_dims", f"run {rel}", 2, "'x' && too large", rel)
    case("input_absurd_dims_info", f"info {rel}", 2, "'x' && too large", rel)


def input_file_cases(out):
    """-i files: wrong dtype or shape, broken .npy and .pb."""
    npy(out, "inputs/x_23.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    npy(out, "inputs/x_f64.npy", np.ones((2, 3), np.float64))
    npy(out, "inputs/x_32.npy", np.ones((3, 2), np.float32))
    npy(out, "inputs/x_6.npy", np.ones(6, np.float32))
    full = open(os.path.join(out, "inputs/x_23.npy"), "rb").read()
    with open(os.path.join(out, "inputs/truncated.npy"), "wb") as f:
        f.write(full[:-5])
    with open(os.path.join(out, "inputs/truncated_header.npy"), "wb") as f:
        f.write(full[:40])
    with open(os.path.join(out, "inputs/bad_magic.npy"), "wb") as f:
        f.write(b"\x93NUMPZ" + full[6:])
    raw_npy(out, "inputs/no_shape_key.npy", "{'descr': '<f4', 'fortran_order': False, }",
            b"\0" * 24)
    raw_npy(out, "inputs/bad_shape.npy",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", b"\0" * 24)
    raw_npy(out, "inputs/huge_header_len.npy", "{}", b"")
    with open(os.path.join(out, "inputs/huge_header_len.npy"), "r+b") as f:
        f.seek(6)
        f.write(b"\x02\x00\xff\xff\xff\x7f")  # version 2, header length 2 GiB
    raw_npy(out, "inputs/overflow_shape.npy",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
            b"\0" * 24)
    # Elements that fit in 64 bits, bytes that do not: the message must not overflow computing them.
    raw_npy(out, "inputs/bytes_overflow.npy",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2305843009213693952,), }",
            b"\0" * 24)
    npy(out, "inputs/fortran.npy", np.asfortranarray(np.ones((2, 3), np.float32)))
    npy(out, "inputs/big_endian.npy", np.ones((2, 3), ">f4"))
    npy(out, "inputs/complex.npy", np.ones((2, 3), np.complex64))
    t = const("x", np.ones((2, 3), np.float32)).SerializeToString()
    with open(os.path.join(out, "inputs/truncated.pb"), "wb") as f:
        f.write(t[:-3])
    with open(os.path.join(out, "inputs/x_23.pb"), "wb") as f:
        f.write(t)
    nan = np.array([[np.nan, np.inf, -np.inf], [1.5, -0.0, 3e38]], np.float32)
    npy(out, "inputs/nan_inf.npy", nan)
    with np.errstate(over="ignore"):
        npy(out, "inputs/nan_inf_expected.npy", nan + nan)
    npy(out, "inputs/wrong_expected.npy", np.full((2, 3), 7, np.float32))
    npy(out, "inputs/wrong_shape_expected.npy", np.ones((3, 3), np.float32))

    save(out, "models/add_xx.onnx",
         model(graph([h.make_node("Add", ["x", "x"], ["y"], name="add_node")], [x23()], [y()])))
    m = "models/valid.onnx"
    case("input_file_valid_npy", f"run {m} -i x=inputs/x_23.npy", 0)
    case("input_file_valid_pb", f"run {m} -i x=inputs/x_23.pb", 0)
    case("input_wrong_dtype", f"run {m} -i x=inputs/x_f64.npy", 2,
         "'x' && float64 && float32", "inputs/x_f64.npy")
    case("input_wrong_shape", f"run {m} -i x=inputs/x_32.npy", 2, "'x'", "inputs/x_32.npy")
    case("input_wrong_rank", f"run {m} -i x=inputs/x_6.npy", 2, "'x'", "inputs/x_6.npy")
    case("input_unknown_name", f"run {m} -i zzz=inputs/x_23.npy", 1, "'zzz', which is not a graph input")
    case("input_missing_file", f"run {m} -i x=inputs/nope.npy", 2, "cannot open",
         "inputs/nope.npy")
    case("input_is_directory", f"run {m} -i x=inputs", 2, "not a regular file", "inputs")
    for name, sub, code in [("truncated", "data is", 2), ("truncated_header", "header", 2),
                            ("bad_magic", "magic", 2), ("no_shape_key", "shape", 2),
                            ("bad_shape", "shape", 2), ("huge_header_len", "header", 2),
                            ("overflow_shape", "shape", 2),
                            ("bytes_overflow", "more than 2^63", 2), ("fortran", "Fortran", 3),
                            ("big_endian", "big-endian", 3), ("complex", "dtype", 3)]:
        case(f"npy_{name}", f"run {m} -i x=inputs/{name}.npy", code, sub,
             f"inputs/{name}.npy")
    case("pb_truncated", f"run {m} -i x=inputs/truncated.pb", 2, "TensorProto",
         "inputs/truncated.pb")
    case("nan_inf_propagate", "run models/add_xx.onnx -i x=inputs/nan_inf.npy "
         "--expected y=inputs/nan_inf_expected.npy --atol 0 --rtol 0", 0)
    case("expected_mismatch",
         f"run {m} -i x=inputs/x_23.npy --expected y=inputs/wrong_expected.npy", 4,
         "'y' && differ")
    case("expected_shape_mismatch",
         f"run {m} -i x=inputs/x_23.npy --expected y=inputs/wrong_shape_expected.npy", 4,
         "'y' && shape")
    case("expected_unknown_output", f"run {m} --expected nosuch=inputs/x_23.npy", 1, "nosuch")
    case("expected_bad_file", f"run {m} --expected y=inputs/truncated.npy", 2, "data is",
         "inputs/truncated.npy")


def zero_size_cases(out):
    """Valid models with 0-sized tensors run and give 0-sized outputs."""
    n = h.make_node("Relu", ["x"], ["y"], name="relu_node")
    rel = save(out, "models/zero_dim.onnx", model(graph([n], [vi("x", F, [0, 3])], [y()])))
    case("zero_sized_input", f"run {rel} --seed 1", 0)
    n = h.make_node("Add", ["x", "b"], ["y"], name="add_node")
    rel = save(out, "models/zero_dim_broadcast.onnx",
               model(graph([n], [vi("x", F, [0, 3]), vi("b", F, [1, 3])], [y()])))
    case("zero_sized_broadcast", f"run {rel} --seed 1", 0)
    n = h.make_node("Add", ["x", "b"], ["y"], name="add_node")
    rel = save(out, "models/zero_dim_const.onnx",
               model(graph([n], [vi("x", F, [2, 0])], [y()],
                           [const("b", np.zeros((1, 0), np.float32))])))
    case("zero_sized_constant", f"run {rel} --seed 1 -o out_zero", 0)


def op_cases(out):
    """Shape errors that the ops' infer must catch (named by node); a few valid edge cases."""
    def run_case(name, nodes, inputs, outputs, inits, code, subs, opset=13):
        rel = save(out, f"models/op_{name}.onnx",
                   model(graph(nodes, inputs, outputs, inits), opset=opset))
        case(name, f"run {rel} --seed 1", code, subs, "-" if code == 0 else rel)

    def node(op, ins, outs, name, **attrs):
        return [h.make_node(op, ins, outs, name=name, **attrs)]

    run_case("add_broadcast_mismatch", node("Add", ["x", "b"], ["y"], "add_node"),
             [x23(), vi("b", F, [4])], [y()], [], 2, "add_node && broadcast")
    run_case("add_dtype_mismatch", node("Add", ["x", "b"], ["y"], "add_node"),
             [x23(), vi("b", I64, [2, 3])], [y()], [], 2, "add_node")
    run_case("reshape_incompatible", node("Reshape", ["x", "s"], ["y"], "reshape_node"),
             [x23()], [y()], [const("s", np.array([4, 2], np.int64))], 2, "reshape_node")
    run_case("reshape_two_minus_one", node("Reshape", ["x", "s"], ["y"], "reshape_node"),
             [x23()], [y()], [const("s", np.array([-1, -1], np.int64))], 2, "reshape_node")
    run_case("reshape_minus_one_zero_size", node("Reshape", ["x", "s"], ["y"], "reshape_node"),
             [vi("x", F, [2, 0])], [y()], [const("s", np.array([-1, 0], np.int64))], 2,
             "reshape_node")
    run_case("reshape_shape_not_constant", node("Reshape", ["x", "s"], ["y"], "reshape_node"),
             [x23(), vi("s", I64, [2])], [y()], [], 3, "reshape_node && constant")
    run_case("matmul_inner_mismatch", node("MatMul", ["x", "w"], ["y"], "matmul_node"),
             [x23()], [y()], [const("w", np.ones((4, 5), np.float32))], 2, "matmul_node")
    run_case("matmul_scalar", node("MatMul", ["x", "w"], ["y"], "matmul_node"),
             [x23()], [y()], [const("w", np.array(2, np.float32))], 2, "matmul_node")
    run_case("conv_wrong_channels", node("Conv", ["x", "w"], ["y"], "conv_node"),
             [vi("x", F, [1, 3, 8, 8])], [y()],
             [const("w", np.ones((4, 2, 3, 3), np.float32))], 2, "conv_node")
    run_case("conv_zero_stride", node("Conv", ["x", "w"], ["y"], "conv_node", strides=[0, 0]),
             [vi("x", F, [1, 3, 8, 8])], [y()],
             [const("w", np.ones((4, 3, 3, 3), np.float32))], 2, "conv_node")
    run_case("conv_kernel_larger_than_input", node("Conv", ["x", "w"], ["y"], "conv_node"),
             [vi("x", F, [1, 3, 2, 2])], [y()],
             [const("w", np.ones((4, 3, 3, 3), np.float32))], 2, "conv_node")
    run_case("conv_group_zero", node("Conv", ["x", "w"], ["y"], "conv_node", group=0),
             [vi("x", F, [1, 4, 8, 8])], [y()],
             [const("w", np.ones((4, 4, 3, 3), np.float32))], 2, "conv_node")
    run_case("concat_rank_mismatch", node("Concat", ["x", "b"], ["y"], "concat_node", axis=0),
             [x23(), vi("b", F, [2, 3, 1])], [y()], [], 2, "concat_node")
    run_case("concat_axis_out_of_range", node("Concat", ["x", "x"], ["y"], "concat_node", axis=5),
             [x23()], [y()], [], 2, "concat_node && axis")
    run_case("concat_axis_float", node("Concat", ["x", "x"], ["y"], "concat_node", axis=1.0),
             [x23()], [y()], [], 2, "concat_node && axis")
    run_case("gather_index_oob_const", node("Gather", ["d", "i"], ["y"], "gather_node"),
             [], [y()], [const("d", np.ones((3, 4), np.float32)),
                         const("i", np.array([0, 5], np.int64))], 2, "gather_node")
    run_case("gather_axis_out_of_range", node("Gather", ["x", "i"], ["y"], "gather_node", axis=3),
             [x23()], [y()], [const("i", np.array([0], np.int64))], 2, "gather_node && axis")
    rel = save(out, "models/op_gather_runtime_index.onnx",
               model(graph(node("Gather", ["d", "i"], ["y"], "gather_node"),
                           [vi("i", I64, [2])], [y()],
                           [const("d", np.ones((3, 4), np.float32))])))
    npy(out, "inputs/idx_oob.npy", np.array([1, 7], np.int64))
    case("gather_index_oob_runtime", f"run {rel} -i i=inputs/idx_oob.npy", "2,5",
         "gather_node", rel)
    run_case("transpose_bad_perm", node("Transpose", ["x"], ["y"], "transpose_node", perm=[0, 0]),
             [x23()], [y()], [], 2, "transpose_node && perm")
    run_case("softmax_axis_out_of_range", node("Softmax", ["x"], ["y"], "softmax_node", axis=4),
             [x23()], [y()], [], 2, "softmax_node && axis")
    run_case("slice_step_zero", node("Slice", ["x", "s", "e", "a", "st"], ["y"], "slice_node"),
             [x23()], [y()], [const("s", np.array([0], np.int64)),
                              const("e", np.array([2], np.int64)),
                              const("a", np.array([1], np.int64)),
                              const("st", np.array([0], np.int64))], 2, "slice_node")
    run_case("maxpool_no_kernel", node("MaxPool", ["x"], ["y"], "pool_node"),
             [vi("x", F, [1, 3, 8, 8])], [y()], [], 2, "pool_node && kernel_shape")
    run_case("maxpool_zero_stride",
             node("MaxPool", ["x"], ["y"], "pool_node", kernel_shape=[2, 2], strides=[0, 0]),
             [vi("x", F, [1, 3, 8, 8])], [y()], [], 2, "pool_node")
    run_case("squeeze_non_one", node("Squeeze", ["x", "a"], ["y"], "squeeze_node"),
             [x23()], [y()], [const("a", np.array([0], np.int64))], 2, "squeeze_node")
    run_case("div_int_by_zero_const", node("Div", ["a", "b"], ["y"], "div_node"),
             [], [y(dtype=TP.INT32)], [const("a", np.array([7, 8], np.int32)),
                                       const("b", np.array([1, 0], np.int32))], "0,2,5",
             "div_node")
    run_case("div_int_min_by_minus_one", node("Div", ["a", "b"], ["y"], "div_node"),
             [], [y(dtype=I64)], [const("a", np.array([-2**63], np.int64)),
                                  const("b", np.array([-1], np.int64))], "0,2,5", "div_node")
    run_case("mod_int_by_zero_const", node("Mod", ["a", "b"], ["y"], "mod_node"),
             [], [y(dtype=TP.INT32)], [const("a", np.array([7, 8], np.int32)),
                                       const("b", np.array([1, 0], np.int32))], "0,2,5",
             "mod_node")
    run_case("range_delta_zero", node("Range", ["s", "l", "d"], ["y"], "range_node"),
             [], [y()], [const("s", np.array(0, np.float32)), const("l", np.array(5, np.float32)),
                         const("d", np.array(0, np.float32))], 2, "range_node")
    run_case("range_huge", node("Range", ["s", "l", "d"], ["y"], "range_node"),
             [], [y(dtype=I64)], [const("s", np.array(0, np.int64)),
                                  const("l", np.array(2**62, np.int64)),
                                  const("d", np.array(1, np.int64))], 2, "range_node")
    run_case("constantofshape_huge", node("ConstantOfShape", ["s"], ["y"], "cos_node"),
             [], [y()], [const("s", np.array([2**40, 2**40], np.int64))], 2, "cos_node")
    run_case("constantofshape_negative", node("ConstantOfShape", ["s"], ["y"], "cos_node"),
             [], [y()], [const("s", np.array([2, -1], np.int64))], 2, "cos_node")
    run_case("expand_incompatible", node("Expand", ["x", "s"], ["y"], "expand_node"),
             [x23()], [y()], [const("s", np.array([4, 4], np.int64))], 2, "expand_node")
    run_case("tile_negative_repeats", node("Tile", ["x", "r"], ["y"], "tile_node"),
             [x23()], [y()], [const("r", np.array([1, -2], np.int64))], 2, "tile_node")
    run_case("depth_to_space_zero_block",
             node("DepthToSpace", ["x"], ["y"], "d2s_node", blocksize=0),
             [vi("x", F, [1, 4, 2, 2])], [y()], [], 2, "d2s_node")
    run_case("split_sizes_mismatch", node("Split", ["x", "s"], ["y", "z"], "split_node", axis=1),
             [x23()], [y(), vi("z", F, None)], [const("s", np.array([1, 1], np.int64))], 2,
             "split_node")
    run_case("flatten_axis_out_of_range", node("Flatten", ["x"], ["y"], "flatten_node", axis=7),
             [x23()], [y()], [], 2, "flatten_node && axis")
    run_case("gemm_shape_mismatch", node("Gemm", ["x", "w"], ["y"], "gemm_node"),
             [x23()], [y()], [const("w", np.ones((4, 5), np.float32))], 2, "gemm_node")
    run_case("reducesum_axis_out_of_range", node("ReduceSum", ["x", "a"], ["y"], "reduce_node"),
             [x23()], [y()], [const("a", np.array([5], np.int64))], 2, "reduce_node && axis")
    run_case("topk_k_too_large", node("TopK", ["x", "k"], ["y", "yi"], "topk_node"),
             [x23()], [y(), vi("yi", I64, None)], [const("k", np.array([9], np.int64))], 2,
             "topk_node")
    run_case("where_broadcast_mismatch", node("Where", ["c", "x", "b"], ["y"], "where_node"),
             [vi("c", TP.BOOL, [5]), x23(), vi("b", F, [2, 3])], [y()], [], 2,
             "where_node && broadcast")
    run_case("batchnorm_wrong_scale", node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                                           "bn_node"),
             [vi("x", F, [1, 3, 2, 2])], [y()],
             [const(n, np.ones(k, np.float32)) for n, k in
              [("s", 5), ("b", 3), ("m", 3), ("v", 3)]], 2, "bn_node")
    run_case("pad_negative_below_zero", node("Pad", ["x", "p"], ["y"], "pad_node"),
             [x23()], [y()], [const("p", np.array([0, -5, 0, 0], np.int64))], 2, "pad_node")
    run_case("unsqueeze_duplicate_axes", node("Unsqueeze", ["x", "a"], ["y"], "unsqueeze_node"),
             [x23()], [y()], [const("a", np.array([0, 0], np.int64))], 2, "unsqueeze_node")
    # Arithmetic on extreme attribute and constant values: overflow or division by zero inside
    # a shape rule must become an error (or, where ONNX defines it, a result), never UB.
    big = 2**62
    i64max, i64min = 2**63 - 1, -2**63
    run_case("pad_overflow", node("Pad", ["x", "p"], ["y"], "pad_node"), [x23()], [y()],
             [const("p", np.array([big, 0, big, 0], np.int64))], 2, "pad_node")
    run_case("conv_pads_overflow",
             node("Conv", ["x", "w"], ["y"], "conv_node", pads=[big, big, big, big]),
             [vi("x", F, [1, 3, 8, 8])], [y()],
             [const("w", np.ones((4, 3, 3, 3), np.float32))], 2, "conv_node")
    run_case("conv_dilation_overflow",
             node("Conv", ["x", "w"], ["y"], "conv_node", dilations=[big, big]),
             [vi("x", F, [1, 3, 8, 8])], [y()],
             [const("w", np.ones((4, 3, 3, 3), np.float32))], 2, "conv_node")
    run_case("conv_dilation_zero", node("Conv", ["x", "w"], ["y"], "conv_node", dilations=[0, 0]),
             [vi("x", F, [1, 3, 8, 8])], [y()],
             [const("w", np.ones((4, 3, 3, 3), np.float32))], 2, "conv_node")
    run_case("maxpool_dilation_overflow",
             node("MaxPool", ["x"], ["y"], "pool_node", kernel_shape=[2, 2],
                  dilations=[big, big]), [vi("x", F, [1, 3, 8, 8])], [y()], [], 2, "pool_node")
    # (the fuzzer's variant: (64 - 1) * 2^62 overflowed int64 before the attribute bound)
    run_case("maxpool_kernel_dilation_overflow",
             node("MaxPool", ["x"], ["y"], "pool_node", kernel_shape=[64, 64],
                  dilations=[big, big]), [vi("x", F, [1, 3, 8, 8])], [y()], [], 2,
             "pool_node && must be in [1, 2147483647]")
    run_case("averagepool_kernel_zero",
             node("AveragePool", ["x"], ["y"], "pool_node", kernel_shape=[0, 0]),
             [vi("x", F, [1, 3, 8, 8])], [y()], [], 2, "pool_node")
    run_case("convtranspose_bad_output_padding",
             node("ConvTranspose", ["x", "w"], ["y"], "convt_node", strides=[1, 1],
                  output_padding=[3, 3]), [vi("x", F, [1, 3, 4, 4])], [y()],
             [const("w", np.ones((3, 2, 3, 3), np.float32))], 2, "convt_node")
    run_case("slice_extreme_bounds", node("Slice", ["x", "s", "e", "a", "st"], ["y"], "slice_node"),
             [x23()], [y()], [const("s", np.array([i64max, i64max], np.int64)),
                              const("e", np.array([i64min, i64min], np.int64)),
                              const("a", np.array([0, 1], np.int64)),
                              const("st", np.array([-1, i64min], np.int64))], 0, "-")
    run_case("range_int_overflow", node("Range", ["s", "l", "d"], ["y"], "range_node"),
             [], [y(dtype=I64)], [const("s", np.array(i64min, np.int64)),
                                  const("l", np.array(i64max, np.int64)),
                                  const("d", np.array(big, np.int64))], "0,2", "range_node")
    run_case("tile_overflow", node("Tile", ["x", "r"], ["y"], "tile_node"), [x23()], [y()],
             [const("r", np.array([big, big], np.int64))], 2, "tile_node")
    run_case("unsqueeze_axis_huge", node("Unsqueeze", ["x", "a"], ["y"], "unsqueeze_node"),
             [x23()], [y()], [const("a", np.array([i64min], np.int64))], 2, "unsqueeze_node")
    run_case("transpose_perm_out_of_range",
             node("Transpose", ["x"], ["y"], "transpose_node", perm=[0, 5]), [x23()], [y()], [],
             2, "transpose_node")
    run_case("topk_negative_k", node("TopK", ["x", "k"], ["y", "yi"], "topk_node"),
             [x23()], [y(), vi("yi", I64, None)], [const("k", np.array([-1], np.int64))], 2,
             "topk_node")
    run_case("onehot_negative_depth", node("OneHot", ["i", "d", "v"], ["y"], "onehot_node"),
             [], [y()], [const("i", np.array([0, 1], np.int64)),
                         const("d", np.array(-3, np.int64)),
                         const("v", np.array([0, 1], np.float32))], 2, "onehot_node")
    run_case("space_to_depth_not_dividing",
             node("SpaceToDepth", ["x"], ["y"], "s2d_node", blocksize=3),
             [vi("x", F, [1, 1, 4, 4])], [y()], [], 2, "s2d_node")
    run_case("groupnorm_zero_groups",
             node("GroupNormalization", ["x", "s", "b"], ["y"], "gn_node", num_groups=0),
             [vi("x", F, [1, 4, 2, 2])], [y()], [const("s", np.ones(4, np.float32)),
                                               const("b", np.zeros(4, np.float32))], 2,
             "gn_node", opset=21)
    run_case("layernorm_axis_out_of_range",
             node("LayerNormalization", ["x", "s"], ["y"], "ln_node", axis=5),
             [x23()], [y()], [const("s", np.ones(3, np.float32))], 2, "ln_node", opset=17)
    run_case("cumsum_axis_out_of_range", node("CumSum", ["x", "a"], ["y"], "cumsum_node"),
             [x23()], [y()], [const("a", np.array(9, np.int64))], 2, "cumsum_node")
    run_case("argmax_axis_out_of_range", node("ArgMax", ["x"], ["y"], "argmax_node", axis=-9),
             [x23()], [y(dtype=I64)], [], 2, "argmax_node")
    run_case("resize_zero_scales", node("Resize", ["x", "", "sc"], ["y"], "resize_node"),
             [vi("x", F, [1, 1, 2, 2])], [y()],
             [const("sc", np.array([1, 1, 0, -2], np.float32))], 2, "resize_node")
    run_case("einsum_garbage_equation",
             node("Einsum", ["x", "x"], ["y"], "einsum_node", equation="ij,ij->%%"),
             [x23()], [y()], [], 2, "einsum_node")
    run_case("scatternd_index_oob",
             node("ScatterND", ["d", "i", "u"], ["y"], "scatter_node"), [], [y()],
             [const("d", np.ones((3, 4), np.float32)), const("i", np.array([[5]], np.int64)),
              const("u", np.ones((1, 4), np.float32))], 2, "scatter_node")
    run_case("cast_nan_inf_to_int", node("Cast", ["a"], ["y"], "cast_node", to=TP.INT32), [],
             [y(dtype=TP.INT32)], [const("a", np.array([np.nan, np.inf, -1e30, 3e9], np.float32))],
             0, "-")
    rel = save(out, "models/op_nonzero_runtime.onnx",
               model(graph(node("NonZero", ["x"], ["y"], "nonzero_node"), [x23()],
                           [y(dtype=I64)])))
    case("nonzero_of_runtime_input", f"run {rel} --seed 1", "0,3", "nonzero_node", rel)
    # Control flow is resolved while folding: data-dependent conditions and trip counts, loops
    # past the unroll bound and bodies with unsupported operators are refused naming the node.
    def branch(op, out_name):
        return h.make_graph([h.make_node(op, ["x"], [out_name], name=f"{out_name}_node")],
                            out_name, [], [vi(out_name, F, [2, 3])])
    run_case("if_condition_from_data",
             node("ReduceSum", ["x"], ["s"], "sum_node", keepdims=0) +
             node("Greater", ["s", "zero"], ["c"], "gt_node") +
             node("If", ["c"], ["y"], "if_node", then_branch=branch("Relu", "t"),
                  else_branch=branch("Neg", "e")),
             [x23()], [y()], [const("zero", np.array(0, np.float32))], 3,
             "if_node && condition && run time")
    run_case("if_branch_unsupported_op",
             node("If", ["c"], ["y"], "if_node", then_branch=branch("Frobnicate", "t"),
                  else_branch=branch("Neg", "e")),
             [x23()], [y()], [const("c", np.array(True))], 3, "if_node && Frobnicate")

    def loop_body(cond_op="Identity"):
        nodes = [h.make_node(cond_op, ["c_in"] if cond_op == "Identity" else ["v_in"], ["c_out"],
                             name="cond_node"),
                 h.make_node("Add", ["v_in", "x"], ["v_out"], name="body_add")]
        if cond_op != "Identity":
            nodes[0] = h.make_node("ReduceMax", ["v_in"], ["m"], name="max_node", keepdims=0)
            nodes.insert(1, h.make_node("Less", ["m", "ten"], ["c_out"], name="less_node"))
        return h.make_graph(nodes, "body",
                            [vi("i", I64, []), vi("c_in", TP.BOOL, []), vi("v_in", F, [2, 3])],
                            [vi("c_out", TP.BOOL, []), vi("v_out", F, [2, 3])],
                            [const("ten", np.array(10, np.float32))])
    run_case("loop_condition_from_data",
             node("Loop", ["m", "", "x"], ["y"], "loop_node", body=loop_body("ReduceMax")),
             [x23()], [y()], [const("m", np.array(5, np.int64))], 3,
             "loop_node && condition && run time")
    run_case("loop_trip_count_from_data",
             node("ReduceMax", ["x"], ["mf"], "max_node", keepdims=0) +
             node("Cast", ["mf"], ["m"], "cast_node", to=I64) +
             node("Loop", ["m", "", "x"], ["y"], "loop_node", body=loop_body()),
             [x23()], [y()], [], 3, "loop_node && trip count && run time")
    run_case("loop_over_unroll_bound",
             node("Loop", ["m", "", "x"], ["y"], "loop_node", body=loop_body()),
             [x23()], [y()], [const("m", np.array(10 ** 9, np.int64))], 3,
             "loop_node && 1000000000 && 65536")
    run_case("loop_without_end",
             node("Loop", ["", "", "x"], ["y"], "loop_node", body=loop_body()),
             [x23()], [y()], [], 2, "loop_node && never ends")
    # Sequences are resolved at compile time: a position or split from the data, a sequence
    # passed in or returned, and an op reading a sequence as a tensor are refused by node.
    svi = h.make_tensor_sequence_value_info
    pair = node("SequenceConstruct", ["x", "x"], ["s"], "construct_node")
    pos_from_data = (node("ReduceMax", ["x"], ["mf"], "max_node", keepdims=0) +
                     node("Cast", ["mf"], ["p"], "cast_node", to=I64))
    run_case("seq_position_from_data",
             pair + pos_from_data + node("SequenceAt", ["s", "p"], ["y"], "at_node"),
             [x23()], [y()], [], 3, "at_node && position && run time")
    run_case("seq_insert_position_from_data",
             pair + pos_from_data + node("SequenceInsert", ["s", "x", "p"], ["s2"], "ins_node") +
             node("ConcatFromSequence", ["s2"], ["y"], "cat_node", axis=0),
             [x23()], [y()], [], 3, "ins_node && position && run time")
    run_case("seq_split_from_data",
             pos_from_data + node("SplitToSequence", ["x", "p"], ["s"], "split_node", axis=1) +
             node("SequenceAt", ["s", "zero"], ["y"], "at_node"),
             [x23()], [y()], [const("zero", np.array(0, np.int64))], 3,
             "split_node && split && run time")
    run_case("seq_graph_output", pair, [x23()], [svi("s", F, [2, 3])], [], 3,
             "construct_node && sequence && graph output")
    run_case("seq_graph_output_untyped", pair, [x23()], [onnx.ValueInfoProto(name="s")], [], 3,
             "construct_node && sequence && graph output")
    run_case("seq_graph_input", node("ConcatFromSequence", ["s"], ["y"], "cat_node", axis=0),
             [svi("s", F, [2, 3])], [y()], [], 3, "'s' && sequence")
    run_case("seq_read_as_tensor", pair + node("Relu", ["s"], ["y"], "relu_node"),
             [x23()], [y()], [], 3, "relu_node && sequence 's'")
    run_case("seq_at_out_of_range",
             pair + node("SequenceAt", ["s", "five"], ["y"], "at_node"),
             [x23()], [y()], [const("five", np.array(5, np.int64))], 2, "at_node && position 5")
    run_case("seq_concat_empty",
             node("SequenceEmpty", [], ["s"], "empty_node", dtype=F) +
             node("ConcatFromSequence", ["s"], ["y"], "cat_node", axis=0),
             [], [y()], [], 2, "cat_node && empty")
    run_case("seq_insert_dtype_mismatch",
             pair + node("SequenceInsert", ["s", "k"], ["s2"], "ins_node") +
             node("ConcatFromSequence", ["s2"], ["y"], "cat_node", axis=0),
             [x23()], [y()], [const("k", np.zeros((2, 3), np.int64))], 2,
             "ins_node && int64 && float32")
    run_case("seq_split_sizes_mismatch",
             node("SplitToSequence", ["x", "sp"], ["s"], "split_node", axis=1) +
             node("SequenceAt", ["s", "zero"], ["y"], "at_node"),
             [x23()], [y()], [const("sp", np.array([1, 1], np.int64)),
                              const("zero", np.array(0, np.int64))], 2,
             "split_node && add up to 2")
    add_body = h.make_graph([h.make_node("Add", ["e", "f"], ["r"])], "f",
                            [vi("e", F, [2, 3]), vi("f", F, [2, 3])], [vi("r", F, [2, 3])])
    run_case("seq_map_lengths_differ",
             pair + node("SequenceConstruct", ["x"], ["one"], "one_node") +
             node("SequenceMap", ["s", "one"], ["s2"], "map_node", body=add_body) +
             node("ConcatFromSequence", ["s2"], ["y"], "cat_node", axis=0),
             [x23()], [y()], [], 2, "map_node && differ in length", opset=17)
    run_case("seq_map_body_arity",
             pair + node("SequenceMap", ["s"], ["s2"], "map_node", body=add_body) +
             node("ConcatFromSequence", ["s2"], ["y"], "cat_node", axis=0),
             [x23()], [y()], [], 2, "map_node && must take 1 inputs", opset=17)
    run_case("seq_map_body_unsupported_op",
             pair + node("SequenceMap", ["s"], ["s2"], "map_node", body=h.make_graph(
                 [h.make_node("Frobnicate", ["e"], ["r"])], "f", [vi("e", F, [2, 3])],
                 [vi("r", F, [2, 3])])) +
             node("ConcatFromSequence", ["s2"], ["y"], "cat_node", axis=0),
             [x23()], [y()], [], 3, "map_node && Frobnicate", opset=17)
    run_case("gridsample_volumetric_cubic",
             node("GridSample", ["x", "g"], ["y"], "gs_node", mode="cubic"),
             [vi("x", F, [1, 1, 2, 3, 4]), vi("g", F, [1, 2, 2, 2, 3])], [y()], [], 2,
             "gs_node && cubic && 4-D X only", opset=20)
    run_case("gridsample_volumetric_grid_last_axis",
             node("GridSample", ["x", "g"], ["y"], "gs_node", mode="linear"),
             [vi("x", F, [1, 1, 2, 3, 4]), vi("g", F, [1, 2, 2, 2, 2])], [y()], [], 2,
             "gs_node && grid 'g' && D_out, H_out, W_out, 3", opset=20)
    run_case("gridsample_volumetric_opset16",
             node("GridSample", ["x", "g"], ["y"], "gs_node"),
             [vi("x", F, [1, 1, 2, 3, 4]), vi("g", F, [1, 2, 2, 2, 3])], [y()], [], 2,
             "gs_node && rank 5 && opset 20", opset=16)
    run_case("gridsample_rank3",
             node("GridSample", ["x", "g"], ["y"], "gs_node", mode="linear"),
             [vi("x", F, [1, 1, 4]), vi("g", F, [1, 2, 1])], [y()], [], 3,
             "gs_node && rank 3 && 5-D", opset=20)
    run_case("gridsample_bad_mode",
             node("GridSample", ["x", "g"], ["y"], "gs_node", mode="linear"),
             [vi("x", F, [1, 1, 3, 4]), vi("g", F, [1, 2, 2, 2])], [y()], [], 2,
             "gs_node && linear", opset=16)
    run_case("roialign_batch_index_out_of_range",
             node("RoiAlign", ["x", "r", "b"], ["y"], "roi_node"),
             [vi("x", F, [2, 1, 4, 4])], [y()],
             [const("r", np.array([[0, 0, 2, 2], [1, 1, 3, 3]], np.float32)),
              const("b", np.array([0, 5], np.int64))], 2, "roi_node && batch index 5", opset=16)
    run_case("roialign_sampling_ratio_too_large",
             node("RoiAlign", ["x", "r", "b"], ["y"], "roi_node", sampling_ratio=100000),
             [vi("x", F, [1, 1, 4, 4])], [y()],
             [const("r", np.array([[0, 0, 2, 2]], np.float32)),
              const("b", np.array([0], np.int64))], 3, "roi_node && sampling_ratio 100000",
             opset=16)
    # Adaptive sampling of a ROI scaled by 8e25: the grid is bounded, the run takes no time.
    run_case("roialign_huge_spatial_scale",
             node("RoiAlign", ["x", "r", "b"], ["y"], "roi_node", spatial_scale=8e25,
                  output_height=5, output_width=5),
             [vi("x", F, [1, 1, 10, 10])], [y()],
             [const("r", np.array([[0, 0, 2, 2], [1, 1, 3, 3], [0.5, 0, 1, 9]], np.float32)),
              const("b", np.array([0, 0, 0], np.int64))], 0, "-", opset=16)
    # Valid NaN through folding: Add of constants holding NaN/Inf folds to NaN/Inf.
    run_case("fold_nan_inf", node("Add", ["a", "b"], ["y"], "add_node"), [], [y()],
             [const("a", np.array([np.nan, np.inf], np.float32)),
              const("b", np.array([1, -np.inf], np.float32))], 0, "-")
    # Output 40 GB: accepted by shape inference (under its 64 GiB bound), too big for the run.
    n = node("Add", ["a", "b"], ["y"], "big_add")
    rel = save(out, "models/op_big_broadcast.onnx",
               model(graph(n, [vi("a", F, [100000, 1]), vi("b", F, [1, 100000])], [y()])))
    case("big_broadcast_output", f"run {rel} --seed 1", "2,5", "big_add", rel)


def attr_cases(out):
    """Attributes of the wrong kind, or malformed."""
    def relu_attr(rel, attr):
        n = h.make_node("Relu", ["x"], ["y"], name="relu_node")
        n.attribute.append(attr)
        return save(out, rel, model(graph([n], [x23()], [y()])))

    rel = relu_attr("models/attr_string_empty.onnx",
                    onnx.AttributeProto(name="foo", type=onnx.AttributeProto.STRING))
    case("attr_string_without_value", f"run {rel} --seed 1", 0)
    rel = relu_attr("models/attr_floats_empty.onnx",
                    onnx.AttributeProto(name="foo", type=onnx.AttributeProto.FLOATS))
    case("attr_floats_empty", f"run {rel} --seed 1", 0)
    rel = relu_attr("models/attr_tensor_empty.onnx",
                    onnx.AttributeProto(name="foo", type=onnx.AttributeProto.TENSOR))
    case("attr_tensor_without_value", f"run {rel}", 2, "relu_node && 'foo'", rel)
    rel = relu_attr("models/attr_no_name.onnx", onnx.AttributeProto(type=onnx.AttributeProto.INT))
    case("attr_without_name", f"run {rel}", 2, "relu_node && name", rel)
    rel = relu_attr("models/attr_ref.onnx",
                    onnx.AttributeProto(name="alpha", ref_attr_name="a",
                                        type=onnx.AttributeProto.FLOAT))
    case("attr_ref_outside_function", f"run {rel}", 2, "relu_node && 'alpha'", rel)
    t = TP(name="t", data_type=F, dims=[2, -1])
    rel = relu_attr("models/attr_tensor_bad.onnx",
                    onnx.AttributeProto(name="foo", type=onnx.AttributeProto.TENSOR, t=t))
    case("attr_tensor_negative_dim", f"run {rel}", 2, "relu_node && negative", rel)


def wire_varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def wire_message(number, payload):
    """A length-delimited field in protobuf's wire format, written by hand: the onnx package's
    own parser stops at 100 nested messages, so it can neither read nor write the deep cases."""
    return wire_varint(number << 3 | 2) + wire_varint(len(payload)) + payload


def with_graph_fields(m, extra):
    """The bytes of model m with `extra` (GraphProto fields in wire format) added to its graph."""
    graph_bytes = m.graph.SerializeToString()
    m.ClearField("graph")
    return m.SerializeToString() + wire_message(7, graph_bytes + extra)


def nesting_cases(out):
    """Messages nested deeper than protobuf parsers read (100 levels below the ModelProto): they
    are refused before unpacking, whose recursion would overflow the stack."""
    def deep_if(n, inner=b""):
        # An If node beside a valid graph's Relu; its then_branch holds a node with a graph
        # attribute holding a node ... n times (NodeProto.attribute 5, AttributeProto.g 6,
        # GraphProto.node 1: three messages a level), the innermost graph holding `inner`. That
        # graph lies 4 + 3n levels below the model: model, graph, If node, attribute, graph.
        g = inner
        for _ in range(n):
            g = wire_message(1, wire_message(5, wire_message(6, g)))
        attr = wire_message(1, b"then_branch") + wire_varint(20 << 3) + wire_varint(5) + \
            wire_message(6, g)
        node = wire_message(1, b"x") + wire_message(2, b"z") + wire_message(3, b"deep_if") + \
            wire_message(4, b"If") + wire_message(5, attr)
        return with_graph_fields(relu_model(), wire_message(1, node))

    rel = save(out, "models/nested_100_levels.onnx", deep_if(32))
    # Read in full (its innermost nodes have no op_type, which the body loader then refuses).
    case("nested_graphs_at_the_limit", f"run {rel}", 2, "deep_if && If && op_type", rel)
    rel = save(out, "models/nested_101_levels.onnx", deep_if(32, inner=wire_message(1, b"")))
    case("nested_graphs_past_the_limit", f"run {rel}", 2, "more than 100 levels", rel)
    # 3000 levels (30 KB): protobuf-c's recursion overflowed an 8 MB stack.
    rel = save(out, "models/nested_3000_graphs.onnx", deep_if(3000))
    case("nested_graphs_3000_deep", f"run {rel}", 2, "more than 100 levels", rel)
    # A value_info (GraphProto field 13) whose type (ValueInfoProto field 2) is a sequence of
    # sequences ... 6000 deep (TypeProto.sequence_type 4, TypeProto.Sequence.elem_type 1; 42 KB),
    # which overflowed the stack as well.
    t = b""
    for _ in range(6000):
        t = wire_message(4, wire_message(1, t))
    info = wire_message(1, b"deep_type") + wire_message(2, t)
    rel = save(out, "models/nested_6000_types.onnx",
               with_graph_fields(relu_model(), wire_message(13, info)))
    case("nested_types_6000_deep", f"compile {rel} -t cpu -o nested.orch", 2,
         "more than 100 levels", rel)


def name_cases(out):
    """Names holding terminal controls, C1 controls, bidirectional overrides or invalid UTF-8:
    every message and listing shows them escaped (run_bad.py checks every case's output)."""
    esc = "\x1b[2J"

    def raw_names(m, swaps):
        """m's bytes with each str name swapped for bytes of the same length (protobuf strings
        from Python must be valid UTF-8; a model file need not be)."""
        data = m.SerializeToString()
        for old, new in swaps:
            old = old.encode()
            assert len(old) == len(new) and old in data, old
            data = data.replace(old, new)
        return data

    rel = save(out, "models/name_esc_node.onnx",
               model(graph([h.make_node("FooBar", ["x"], ["y"], name="evil" + esc)],
                           [x23()], [y()])))
    case("name_escape_node_unsupported", f"run {rel}", 3, "FooBar && evil\\x1b[2J", rel)
    case("name_escape_node_info", f"info {rel}", 3, "evil\\x1b[2J", rel)
    rel = save(out, "models/name_esc_op.onnx",
               model(graph([h.make_node("Foo" + esc, ["x"], ["y"], name="n")], [x23()], [y()])))
    case("name_escape_op_type", f"run {rel}", 3, "Foo\\x1b[2J", rel)
    n = h.make_node("Relu", ["x"], ["y"], name="n", domain="com." + esc)
    rel = save(out, "models/name_esc_domain.onnx",
               model(graph([n], [x23()], [y()]), extra_opsets=[("com." + esc, 1)]))
    case("name_escape_domain", f"run {rel}", 3, "com.\\x1b[2J", rel)
    rel = save(out, "models/name_esc_dangling.onnx",
               model(graph([h.make_node("Add", ["x", esc + "gone"], ["y"], name="add_node")],
                           [x23()], [y()])))
    case("name_escape_dangling_tensor", f"run {rel}", 2, "\\x1b[2Jgone && add_node", rel)
    # Valid models whose every name is hostile: info, run and inspect list them all.
    names = {"x": "x\x1b[1m\u202e", "y": "y\x9b31m", "g": "g\x1b]0;pwned\x07",
             "n": "n\r\x1b[K\u2066"}
    g = h.make_graph([h.make_node("Relu", [names["x"]], [names["y"]], name=names["n"])],
                     names["g"], [vi(names["x"], F, [2, 3])], [vi(names["y"], F, [2, 3])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="p\x1b[31m")
    m.ir_version = 8
    rel = save(out, "models/name_esc_valid.onnx", m)
    case("name_escape_valid_info", f"info {rel}", 0)
    case("name_escape_valid_run", f"run {rel} --seed 1 -o out_names_esc", 0)
    case("name_escape_valid_inspect", f"inspect {rel} --stage plan", 0)
    case("name_escape_input_flag", f"run {rel} -i nosuch\x1b=inputs/x_23.npy", 1, "nosuch")
    # Invalid UTF-8 in a node name and an op type.
    m = model(graph([h.make_node("FooBaz", ["x"], ["y"], name="bad\x7f\x7f\x7f\x7f")],
                    [x23()], [y()]))
    rel = save(out, "models/name_bad_utf8.onnx",
               raw_names(m, [("bad\x7f\x7f\x7f\x7f", b"bad\xff\xc0\xaf\x80"),
                             ("FooBaz", b"Foo\xed\xa0\x80")]))
    case("name_invalid_utf8", f"run {rel}", "2,3", "bad\\xff\\xc0\\xaf\\x80", rel)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    file_cases(out)
    header_cases(out)
    op_support_cases(out)
    rnn_cases(out)
    tensor_cases(out)
    input_file_cases(out)  # writes inputs/ that external_cases links to
    external_cases(out)
    structure_cases(out)
    input_decl_cases(out)
    zero_size_cases(out)
    op_cases(out)
    attr_cases(out)
    nesting_cases(out)
    name_cases(out)
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("# name\targs\texit\tsubstrings\tnames\n")
        for c in CASES:
            assert all("\t" not in field and "\n" not in field for field in c), c
            f.write("\t".join(c) + "\n")
    print(f"{len(CASES)} cases written to {out}/cases.tsv")


if __name__ == "__main__":
    main()
