#!/usr/bin/env python3
"""`orch export` end to end on the CPU target: a compiled artefact exported into a source tree,
the tree built with make and the system C compiler alone (no orch header or library), its runner
fed the same inputs as `orch run`, and every output compared bit for bit with `orch run`'s.
Models: the example CNN (batch 2), a sequence model (MatMul, Softmax) compiled for two shape sets
and exported with `--shapes 2`, and every generated model of tests/models when its folder is
given (each compiled with one config per kernel; one whose plan leaves kernels to an
interpreter must be refused naming the launch, and orch info must say so). model.h's API from a
C program of its own: buffers 64-byte aligned and misaligned by 4 bytes (model_run's staging)
give the same bits, two Models run at once, a NULL buffer refused; model.c and main.c compile
without a warning under -std=c11 -Wall -Wextra -pedantic, model.h as C++.
Refusals: a MatMul, Relu, Compress model (Compress on the operator interpreter) naming the
launch, op and node; a CPU plan marked cuda (the header's target rewritten, its checksum
recomputed) refused as damaged, a format 5 artefact (no kernel source), usage errors (no folder,
--shapes past the sets, the folder a file). The tree's weights check: a truncated, a longer and a flipped
weights.bin refused by model_init.

Prints one line per case and ends with "N passed, N failed"; exits 1 on any failure.

usage: test_export.py ORCH [MODELS_DIR] [--shard K/N]
"""
import os
import re
import shlex
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import EXAMPLE_MODEL as EX, case, results, run, write_sequence_model  # noqa: E402

NP_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
             "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8,
             "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
             "bool": np.bool_}

# ---- the artefact's bytes (src/plan/artifact.h), for the forged files ----

M64 = (1 << 64) - 1


def mix64(h):
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & M64
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & M64
    return h ^ (h >> 33)


def plan_hash64(data, seed=0x6f7263682d617274):
    """artifact_hash: plan_hash64 with the artefact's seed (src/plan/plan.c)."""
    K = 0x9e3779b97f4a7c15
    h = [seed ^ K, (seed + K) & M64, ~seed & M64, (seed * 31 + 7) & M64]
    n = len(data)
    i = 0
    while i + 32 <= n:
        for l in range(4):
            v = int.from_bytes(data[i + 8 * l:i + 8 * l + 8], "little")
            h[l] ^= (v * 0x87c37b91114253d5) & M64
            h[l] = (((h[l] << 31) | (h[l] >> 33)) & M64) * K & M64
        i += 32
    r = mix64(h[0]) ^ mix64((h[1] + 1) & M64) ^ mix64((h[2] + 2) & M64) ^ mix64((h[3] + 3) & M64)
    for b in data[i:]:
        r = ((r ^ b) * 0x100000001b3) & M64
    return mix64(r ^ n)


def u32(b, at):
    return int.from_bytes(b[at:at + 4], "little")


def u64(b, at):
    return int.from_bytes(b[at:at + 8], "little")


def rebuild(header_fields, sections, version):
    """A file from the header's fields after the 16-byte prefix (up to the section count) and the
    sections [(kind, bytes)]: offsets 64-aligned after the header (a non-empty weights section,
    kind 5, 4096-aligned), checksums computed."""
    n_sec = len(sections)
    hb = 16 + len(header_fields) + 4 + 28 * n_sec + 8
    at = (hb + 63) // 64 * 64
    table, body, offs = b"", b"", []
    for kind, data in sections:
        if kind == 5 and data:
            at = (at + 4095) // 4096 * 4096
        offs.append(at)
        table += kind.to_bytes(4, "little") + at.to_bytes(8, "little") + \
            len(data).to_bytes(8, "little") + plan_hash64(data).to_bytes(8, "little")
        at = (at + len(data) + 63) // 64 * 64
    head = b"\x89ORCHART" + version.to_bytes(4, "little") + hb.to_bytes(4, "little") + \
        header_fields + n_sec.to_bytes(4, "little") + table
    head += plan_hash64(head).to_bytes(8, "little")
    out = bytearray(head)
    for (kind, data), off in zip(sections, offs):
        out += b"\0" * (off - len(out)) + data
    return bytes(out)


def parse(b):
    """(version, header fields after the prefix up to the section count, [(kind, bytes)])."""
    version, hb = u32(b, 8), u32(b, 12)
    table_end = hb - 8
    # The section count sits before the table; entries are 28 bytes. Find it from the end.
    for n in range(1, 64):
        at = table_end - 28 * n - 4
        if at > 16 and u32(b, at) == n:
            secs = []
            for s in range(n):
                e = at + 4 + 28 * s
                off, size = u64(b, e + 4), u64(b, e + 12)
                secs.append((u32(b, e), b[off:off + size]))
            if all(k in (1, 2, 3, 4, 5) for k, _ in secs):
                return version, b[16:at], secs
    raise AssertionError("no section table found")


def with_target(b, target):
    """The artefact with the header's target string replaced (checksums recomputed)."""
    version, fields, secs = parse(b)
    n = u32(fields, 0)
    at = 4 + n  # after the orch version
    t = u32(fields, at)
    fields = fields[:at] + len(target).to_bytes(4, "little") + target.encode() + \
        fields[at + 4 + t:]
    return rebuild(fields, secs, version)


def inline_weights(model, weights):
    """The ONNX section with the initializers that refer to the weights section (format 7's
    location orch:weights, offset and length in its payload) holding their bytes again."""
    m = onnx.ModelProto()
    m.ParseFromString(model)
    payload = u64(weights, 8) if weights else 0
    for t in m.graph.initializer:
        ext = {e.key: e.value for e in t.external_data}
        if t.data_location == onnx.TensorProto.EXTERNAL and ext.get("location") == "orch:weights":
            off, n = payload + int(ext["offset"]), int(ext["length"])
            t.raw_data = weights[off:off + n]
            del t.external_data[:]
            t.data_location = onnx.TensorProto.DEFAULT
    return m.SerializeToString()


def as_format5(b):
    """A format 7 artefact as format 5 wrote it: the weights back in the ONNX section (the
    header's model hash that section's), no weights or source sections."""
    version, fields, secs = parse(b)
    assert version == 7, f"format {version}"
    weights = b"".join(d for k, d in secs if k == 5)
    model = inline_weights(secs[0][1], weights)
    at = 0
    for _ in range(4):  # orch version, target, precision, fingerprint; then the model hash
        at += 4 + u32(fields, at)
    fields = fields[:at] + plan_hash64(model).to_bytes(8, "little") + fields[at + 8:]
    return rebuild(fields, [(1, model)] + [s for s in secs if s[0] not in (1, 4, 5)], 5)


# ---- the models ----

USAGE_LINE = re.compile(r"^  (input|output) (\d+): (.*), (\w+) \[([\d, ]*)\], (\d+) bytes$")


def tree_io(tree):
    """The runner's inputs and outputs, from its usage text: [(name, dtype, shape)] twice."""
    p = run([os.path.join(tree, "model")])
    assert p.returncode == 2, f"the runner without arguments exited {p.returncode}: {p.stderr}"
    ins, outs = [], []
    for line in p.stderr.splitlines():
        m = USAGE_LINE.match(line)
        if m:
            shape = tuple(int(d) for d in m.group(5).split(",") if d.strip())
            (ins if m.group(1) == "input" else outs).append((m.group(3), m.group(4), shape))
            assert int(m.group(6)) == int(np.prod(shape, dtype=np.int64)) * \
                np.dtype(NP_DTYPES[m.group(4)]).itemsize, line
    return ins, outs


def export_build(orch, art, tree, *extra):
    shutil.rmtree(tree, ignore_errors=True)
    p = run([orch, "export", art, tree, *extra])
    assert p.returncode == 0, f"export exited {p.returncode}: {p.stderr[-2000:]}"
    for f in ("kernels.c", "model.c", "model.h", "main.c", "Makefile", "weights.bin"):
        assert os.path.isfile(os.path.join(tree, f)), f"no {f} in the tree"
    # The tree names nothing of orch: no include or library outside it.
    for f in ("kernels.c", "model.c", "main.c"):
        src = open(os.path.join(tree, f)).read()
        inc = [l for l in src.splitlines() if l.startswith("#include") and
               not re.match(r'#include (<[a-z0-9_/]+\.h>|"model\.h")$', l)]
        assert not inc, f"{f} includes {inc}"
    p = run(["make", "-C", tree], timeout=1800)
    assert p.returncode == 0, f"make exited {p.returncode}: {(p.stdout + p.stderr)[-3000:]}"
    return p


def compare(orch, art, tree, inputs, tmp, extra=()):
    """Runs orch run and the tree's runner on inputs {name: array}; asserts every output is
    bit-identical; returns the number of outputs compared."""
    ins, outs = tree_io(tree)
    assert [n for n, _, _ in ins] == list(inputs), f"inputs {ins} vs {list(inputs)}"
    args, files = [], []
    for k, (name, dtype, shape) in enumerate(ins):
        x = inputs[name]
        assert x.shape == shape and x.dtype == NP_DTYPES[dtype], f"{name}: {x.shape} {x.dtype}"
        npy, raw = os.path.join(tmp, f"in{k}.npy"), os.path.join(tmp, f"in{k}.bin")
        np.save(npy, x)
        x.tofile(raw)
        args += ["-i", f"{name}={npy}"]
        files.append(raw)
    outdir = os.path.join(tmp, "orch_out")
    shutil.rmtree(outdir, ignore_errors=True)
    p = run([orch, "run", art, *args, "-o", outdir, *extra])
    assert p.returncode == 0, f"orch run exited {p.returncode}: {p.stderr[-2000:]}"
    names = dict(re.findall(r"^  (.*?) +-> (.*)$", p.stdout, re.M))
    raws = [os.path.join(tmp, f"out{k}.bin") for k in range(len(outs))]
    for r in raws:
        if os.path.exists(r):
            os.remove(r)
    p = run([os.path.join(tree, "model"), os.path.join(tree, "weights.bin"), *files, *raws])
    assert p.returncode == 0, f"the runner exited {p.returncode}: {p.stderr[-2000:]}"
    for (name, dtype, shape), raw in zip(outs, raws):
        assert name in names, f"orch run wrote no output '{name}': {p.stdout}"
        ref = np.load(names[name])
        got = np.fromfile(raw, NP_DTYPES[dtype]).reshape(shape)
        assert ref.shape == got.shape and ref.dtype == got.dtype, f"{name}: {got.shape} {ref.shape}"
        same = ref.tobytes() == got.tobytes()
        if not same:
            diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
            raise AssertionError(f"output '{name}': {int((got != ref).sum())} of {ref.size} "
                                 f"elements differ from orch run's (largest {np.nanmax(diff):.3g})")
    return len(outs)


# A program of its own on model.h: every input filled with a pattern, run from 64-byte aligned
# buffers, from buffers 4 bytes past that, and on a second Model between the first's runs; all
# outputs must be the same bits. Then a NULL input buffer, refused with status 1.
API_PROGRAM = r"""
#include "model.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void **buffers(const ModelTensor *t, int n, size_t skew, int fill) {
    void **b = calloc((size_t)n + 1, sizeof(void *));
    for (int i = 0; i < n; i++) {
        unsigned char *p = aligned_alloc(64, (t[i].bytes + skew + 64) / 64 * 64);
        for (size_t k = 0; k < t[i].bytes + skew; k++)
            p[k] = fill ? (unsigned char)(k * 131 + i * 7) : 0xff;
        if (fill && strcmp(t[i].dtype, "float32") == 0)
            for (size_t k = 0; k + 4 <= t[i].bytes; k += 4) {
                float v = (float)((k / 4) % 97) / 48.5f - 1.0f;
                memcpy(p + skew + k, &v, 4);
            }
        b[i] = p + skew;
    }
    return b;
}

static int same(void **a, void **b) {
    for (int i = 0; i < model_num_outputs; i++)
        if (memcmp(a[i], b[i], model_outputs[i].bytes) != 0)
            return 0;
    return 1;
}

int main(int argc, char **argv) {
    Model *m = model_init(argv[1]), *m2 = model_init(argv[1]);
    if (argc != 2 || !m || !m2)
        return 1;
    void **in = buffers(model_inputs, model_num_inputs, 0, 1);
    void **in4 = buffers(model_inputs, model_num_inputs, 4, 1);
    void **o1 = buffers(model_outputs, model_num_outputs, 0, 0);
    void **o2 = buffers(model_outputs, model_num_outputs, 4, 0);
    void **o3 = buffers(model_outputs, model_num_outputs, 0, 0);
    if (model_run(m, (const void *const *)in, o1) || model_run(m2, (const void *const *)in4, o3) ||
        model_run(m, (const void *const *)in4, o2))
        return 2;
    if (!same(o1, o2) || !same(o1, o3)) {
        printf("outputs differ\n");
        return 3;
    }
    printf("same bits: aligned, misaligned, two models\n");
    in[0] = NULL;
    if (model_num_inputs && model_run(m, (const void *const *)in, o1) != 1)
        return 4;
    model_free(m);
    model_free(m2);
    model_free(NULL);
    return 0;
}
"""


def random_input(dtype, shape, rng):
    if dtype in ("float32", "float64", "float16"):
        return rng.uniform(-1, 1, shape).astype(NP_DTYPES[dtype])
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    return rng.integers(0, 2, shape).astype(NP_DTYPES[dtype])


def main():
    args = sys.argv[1:]
    shard = (0, 1)
    if "--shard" in args:
        i = args.index("--shard")
        k, n = args[i + 1].split("/")
        shard = (int(k), int(n))
        del args[i:i + 2]
    if len(args) not in (1, 2):
        sys.exit(__doc__)
    orch = os.path.abspath(args[0])
    models_dir = args[1] if len(args) == 2 else None
    tmp = tempfile.mkdtemp(prefix="orch-export-test-")
    db = os.path.join(tmp, "profile.db")
    common = ["-t", "cpu", "--top-k", "1", "--db", db, "--quiet"]
    # The cases check the exported code, not the machine's load: timings are taken as stable.
    os.environ["ORCH_TRUST_TIMINGS"] = "1"
    rng = np.random.default_rng()
    cnn = os.path.join(tmp, "cnn.orch")
    seq_model = os.path.join(tmp, "seq.onnx")
    seq = os.path.join(tmp, "seq.orch")
    write_sequence_model(seq_model)

    @case("cnn_export_build_run_bit_identical")
    def _():
        p = run([orch, "compile", EX, "-o", cnn, "--input-shapes", "image:2x3x32x32", *common])
        assert p.returncode == 0, f"compile exited {p.returncode}: {p.stderr[-3000:]}"
        info = run([orch, "info", cnn]).stdout
        assert re.search(r"^export: yes \(orch export; kernel source \d+\.\d KiB\)$", info,
                         re.M), info
        tree = os.path.join(tmp, "cnn_tree")
        export_build(orch, cnn, tree)
        x = rng.uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32)
        assert compare(orch, cnn, tree, {"image": x}, tmp) == 1
        # Not the same values by accident: another input gives other outputs, still identical.
        assert compare(orch, cnn, tree, {"image": x * 3 + 0.5}, tmp) == 1
        # -r N: N more runs timed, the outputs those of the last, the same bits.
        raw = os.path.join(tmp, "in0.bin")
        y1, y2 = os.path.join(tmp, "r1.bin"), os.path.join(tmp, "r2.bin")
        model, weights = os.path.join(tree, "model"), os.path.join(tree, "weights.bin")
        p1 = run([model, weights, raw, y1])
        p2 = run([model, "-r", "3", weights, raw, y2])
        assert p1.returncode == 0 and p2.returncode == 0, p1.stderr + p2.stderr
        assert re.match(r"3 runs: min [0-9.]+ ms, median [0-9.]+ ms$", p2.stdout), p2.stdout
        assert open(y1, "rb").read() == open(y2, "rb").read(), "-r changed the outputs"

    @case("model_h_api_aligned_misaligned_two_models")
    def _():
        tree = os.path.join(tmp, "cnn_tree")
        prog = os.path.join(tmp, "api.c")
        open(prog, "w").write(API_PROGRAM)
        exe = os.path.join(tmp, "api")
        p = run(["cc", "-O2", "-std=gnu11", "-I", tree, prog, os.path.join(tree, "libmodel.a"),
                 "-fopenmp", "-lm", "-o", exe])
        assert p.returncode == 0, f"cc exited {p.returncode}: {p.stderr[-2000:]}"
        api = run([exe, os.path.join(tree, "weights.bin")])
        assert api.returncode == 0, f"exit {api.returncode}: {api.stdout}{api.stderr}"
        assert "same bits: aligned, misaligned, two models" in api.stdout, api.stdout
        assert "input 'image' has no buffer" in api.stderr, api.stderr
        # The tree's own files compile without a warning under strict C11, model.h as C++ too.
        for f in ("model.c", "main.c"):
            p = run(["cc", "-std=c11", "-Wall", "-Wextra", "-Wshadow", "-pedantic", "-Werror",
                     "-c", os.path.join(tree, f), "-o", os.devnull])
            assert p.returncode == 0, f"{f}: {p.stderr[-2000:]}"
        if shutil.which("c++"):
            p = run(["c++", "-Wall", "-Werror", "-fsyntax-only", "-x", "c++",
                     os.path.join(tree, "model.h")])
            assert p.returncode == 0, f"model.h as C++: {p.stderr[-2000:]}"

    @case("second_shape_set_exported_with_shapes_2")
    def _():
        p = run([orch, "compile", seq_model, "-o", seq, "--input-shapes", "x:1x7x64",
                 "--input-shapes", "x:1x16x64", *common])
        assert p.returncode == 0, f"compile exited {p.returncode}: {p.stderr[-3000:]}"
        tree = os.path.join(tmp, "seq_tree")
        p = export_build(orch, seq, tree, "--shapes", "2")
        ins, outs = tree_io(tree)
        assert ins == [("x", "float32", (1, 16, 64))] and outs == [("y", "float32", (1, 16, 64))], \
            (ins, outs)
        x = rng.uniform(-1, 1, (1, 16, 64)).astype(np.float32)
        compare(orch, seq, tree, {"x": x}, tmp)
        # The first set by default, named on the first line.
        shutil.rmtree(tree)
        p = run([orch, "export", seq, tree])
        assert p.returncode == 0 and "shape set 1 of 2: x:1x7x64" in p.stdout, p.stdout + p.stderr
        assert "{1, 7, 64}" in open(os.path.join(tree, "model.c")).read()

    @case("weights_file_checked_by_model_init")
    def _():
        tree = os.path.join(tmp, "cnn_tree")
        ins, _ = tree_io(tree)
        x = os.path.join(tmp, "x.bin")
        rng.uniform(-1, 1, ins[0][2]).astype(np.float32).tofile(x)
        w = open(os.path.join(tree, "weights.bin"), "rb").read()
        bad = os.path.join(tmp, "bad_weights.bin")
        for data, want in ((w[:-1], "its size differs"), (w + b"\0", "its size differs"),
                           (w[:100] + bytes([w[100] ^ 4]) + w[101:], "its checksum differs")):
            open(bad, "wb").write(data)
            p = run([os.path.join(tree, "model"), bad, x, os.path.join(tmp, "y.bin")])
            assert p.returncode == 1 and want in p.stderr, f"exit {p.returncode}: {p.stderr}"
        p = run([os.path.join(tree, "model"), os.path.join(tree, "weights.bin"),
                 os.path.join(tmp, "missing.bin"), os.path.join(tmp, "y.bin")])
        assert p.returncode == 1 and "cannot read input 'image'" in p.stderr, p.stderr

    @case("plan_with_an_interpreted_kernel_refused")
    def _():
        # Compress (its condition a constant) has no kernel on the CPU target: the operator
        # interpreter runs it, which an exported tree lacks.
        w = (rng.standard_normal((6, 6)) * 0.1).astype(np.float32)
        nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                 helper.make_node("Relu", ["h"], ["r"], name="relu"),
                 helper.make_node("Compress", ["r", "c"], ["y"], name="keep_columns", axis=1)]
        g = helper.make_graph(
            nodes, "compress", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
            [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array([1, 0, 1, 1, 0, 1], bool), "c")])
        model = os.path.join(tmp, "compress.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                                    ir_version=8), model)
        art = os.path.join(tmp, "compress.orch")
        p = run([orch, "compile", model, "-o", art, *common])
        assert p.returncode == 0, f"compile exited {p.returncode}: {p.stderr[-3000:]}"
        info = run([orch, "info", art]).stdout
        assert "Compress" in info and "export: no (an interpreter runs" in info, info
        tree = os.path.join(tmp, "compress_tree")
        p = run([orch, "export", art, tree])
        assert p.returncode == 3, f"exit {p.returncode}: {p.stderr}"
        assert re.search(r"launch \d+ \(Compress, ONNX nodes 'keep_columns'\) runs on orch's "
                         r"operator interpreter", p.stderr), p.stderr
        assert p.stderr.count("\n") == 1, f"more than one message: {p.stderr}"
        assert not os.path.exists(tree), "a folder was made"

    @case("cuda_artefact_refused")
    def _():
        # A CPU plan marked cuda: the CUDA exporter finds no GPU architecture and no CUDA module.
        forged = os.path.join(tmp, "cuda.orch")
        open(forged, "wb").write(with_target(open(cnn, "rb").read(), "cuda"))
        p = run([orch, "info", forged])
        assert p.returncode == 0 and "cuda" in p.stdout, f"the forged file does not read: {p.stderr}"
        tree = os.path.join(tmp, "cuda_tree")
        p = run([orch, "export", forged, tree])
        assert p.returncode == 2, f"exit {p.returncode}: {p.stderr}"
        assert "names no GPU architecture: it is damaged" in p.stderr, p.stderr
        assert p.stderr.count("\n") == 1, f"more than one message: {p.stderr}"
        assert not os.path.exists(tree), "a folder was made"

    @case("format_5_artefact_refused")
    def _():
        old = os.path.join(tmp, "old.orch")
        open(old, "wb").write(as_format5(open(cnn, "rb").read()))
        x = os.path.join(tmp, "x.npy")
        np.save(x, rng.uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32))
        p = run([orch, "run", old, "-i", f"image={x}"])
        assert p.returncode == 0, f"a format 5 file does not run: {p.stderr}"
        p = run([orch, "info", old])
        assert "export: no (format 5 keeps no kernel source" in p.stdout, p.stdout
        tree = os.path.join(tmp, "old_tree")
        p = run([orch, "export", old, tree])
        assert p.returncode == 3 and "carries no kernel source (format 5" in p.stderr, \
            f"exit {p.returncode}: {p.stderr}"
        assert not os.path.exists(tree), "a folder was made"

    @case("usage_errors")
    def _():
        for argv, want in (([cnn], "needs an artefact"),
                           ([cnn, os.path.join(tmp, "t"), "--shapes", "2"], "serves 1 shape set"),
                           ([cnn, os.path.join(tmp, "t"), "--shapes", "0"], "--shapes expects"),
                           ([cnn, os.path.join(tmp, "t"), "--bogus"], "unknown option"),
                           ([cnn, cnn], "not a folder")):
            p = run([orch, "export", *argv])
            assert p.returncode == 1, f"{argv}: exit {p.returncode}: {p.stderr}"
            assert want in p.stderr, f"{argv}: {p.stderr}"
        p = run([orch, "export", EX, os.path.join(tmp, "t")])
        assert p.returncode == 2 and "not an orch artefact" in p.stderr, p.stderr

    if models_dir:
        names = sorted(n for n in os.listdir(models_dir)
                       if os.path.isfile(os.path.join(models_dir, n, "model.onnx")))
        names = names[shard[0]::shard[1]]
        for name in names:
            @case(f"model_{name}")
            def _(name=name):
                d = os.path.join(models_dir, name)
                margs = []
                if os.path.exists(os.path.join(d, "args.txt")):
                    margs = shlex.split(open(os.path.join(d, "args.txt")).read(), comments=True)
                comp = []
                for i, a in enumerate(margs):
                    if a == "--input-shapes":
                        comp += [a, margs[i + 1]]
                    elif a == "--attention-rewrite":
                        comp.append(a)
                art = os.path.join(tmp, f"{name}.orch")
                p = run([orch, "compile", os.path.join(d, "model.onnx"), "-o", art, *comp,
                         *common])
                assert p.returncode == 0, f"compile exited {p.returncode}: {p.stderr[-2000:]}"
                tree = os.path.join(tmp, f"{name}_tree")
                info = run([orch, "info", art]).stdout
                interpreted = "not generated: none" not in info
                assert ("export: no (an interpreter runs" in info) == interpreted, info
                p = run([orch, "export", art, tree])
                if p.returncode == 3 and "interpreter, which an exported tree does not have" \
                        in p.stderr:
                    assert interpreted, f"export refused but orch info lists no interpreter:\n" \
                                        f"{p.stderr}\n{info}"
                    print(f"  {name}: refused as expected: {p.stderr.strip()[:160]}")
                    return
                assert p.returncode == 0, f"export exited {p.returncode}: {p.stderr[-2000:]}"
                export_build(orch, art, tree)
                ins, _ = tree_io(tree)
                io = {}
                if os.path.exists(os.path.join(d, "io.txt")):
                    for line in open(os.path.join(d, "io.txt")):
                        kind, n, f = line.rstrip("\n").split("\t")
                        if kind == "input":
                            io[n] = np.load(os.path.join(d, f))
                inputs = {n: io[n] if n in io else random_input(dt, sh, rng) for n, dt, sh in ins}
                k = compare(orch, art, tree, inputs, tmp)
                print(f"  {name}: {k} outputs bit-identical")
                shutil.rmtree(tree)

    shutil.rmtree(tmp, ignore_errors=True)
    failed = sum(1 for _, e in results if e)
    print(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
