#!/usr/bin/env python3
"""One artefact for several input shapes, end to end on the CPU target: the example CNN compiled
with `--input-shapes` for batch 1 and 4, and a sequence model (MatMul, Relu, MatMul, Softmax
over 64 features, 64 KiB of weights) for lengths 7 and 16, each into one artefact; `orch run`
on inputs of every compiled shape picks the plan whose shapes match and agrees with ONNX
Runtime; a shape no plan serves (batch 3, length 8) exits with status 2 naming the shapes the
artefact serves; the artefact holds the model once (its sections: one ONNX model of the model
file's size, a plan, a kernel module and its source per set); `orch info` lists every shape set
with its kernels, arena and predicted time; `orch run`, `orch bench` and `orch inspect --shapes N`
pick a set (its shapes in bench's JSON), `orch bench -i` the set its file's shape matches, an N
past the sets is a usage error; two sets binding the same shapes
are refused, as are more than 16.

Prints one line per case and ends with "N passed, N failed"; exits 1 on any failure.

usage: test_shapes_cli.py ORCH
"""
import json
import os
import re
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import (EXAMPLE_MODEL as EX, case, close_to, finish, onnxruntime, orch,  # noqa: E402
                     write_sequence_model)


def sections(path):
    """[(kind, size)] of a format 7 artefact's section table (src/plan/artifact.h)."""
    b = open(path, "rb").read()
    assert int.from_bytes(b[8:12], "little") == 7, "not format 7"
    u32 = lambda at: int.from_bytes(b[at:at + 4], "little")
    at = 16
    for _ in range(4):  # orch version, target, precision, fingerprint
        at += 4 + u32(at)
    at += 8 + 4 + 4  # model hash, compile flags, threads
    plans, at = u32(at), at + 4
    for _ in range(plans):
        at += 4 + u32(at)  # input shapes
        at += 4 + u32(at)  # float32 tensors
        at += 4 + 4 + 8  # load flags, kernels, predicted seconds
    n, at = u32(at), at + 4
    return [(u32(at + 28 * i), int.from_bytes(b[at + 28 * i + 12:at + 28 * i + 20], "little"))
            for i in range(n)]


def run_vs_ort(binary, art, model, name, shape, tmp, out_name):
    """orch run on a random input of `shape` against ONNX Runtime; returns orch run's stdout."""
    x = np.random.default_rng().uniform(-1, 1, shape).astype(np.float32)
    xp = os.path.join(tmp, f"in_{'x'.join(map(str, shape))}.npy")
    np.save(xp, x)
    outdir = os.path.join(tmp, f"out_{'x'.join(map(str, shape))}")
    p = orch(binary, "run", art, "-i", f"{name}={xp}", "-o", outdir)
    assert p.returncode == 0, f"run on {shape} failed ({p.returncode}): {p.stderr[-2000:]}"
    got = np.load(os.path.join(outdir, f"{out_name}.npy"))
    close_to(f"{shape}", got, onnxruntime(model, {name: x})[out_name])
    return p.stdout


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="orch-shapes-test-")
    db = os.path.join(tmp, "profile.db")
    common = ["-t", "cpu", "--top-k", "2", "--db", db, "--quiet"]
    # The cases check shapes and plans, not the machine's load: timings are taken as stable.
    os.environ["ORCH_TRUST_TIMINGS"] = "1"
    cnn = os.path.join(tmp, "cnn.orch")
    seq_model = os.path.join(tmp, "seq.onnx")
    seq = os.path.join(tmp, "seq.orch")
    write_sequence_model(seq_model)
    served_cnn = "image:1x3x32x32 | image:4x3x32x32"

    @case("cnn_batch_1_and_4_match_onnxruntime")
    def _():
        p = orch(binary, "compile", EX, "-o", cnn, "--input-shapes", "image:1x3x32x32",
                 "--input-shapes", "image:4x3x32x32", *common)
        assert p.returncode == 0, f"compile failed ({p.returncode}): {p.stderr[-3000:]}"
        assert "shape sets: 2" in p.stdout, p.stdout
        assert re.search(r"^  2: image:4x3x32x32: \d+ launches", p.stdout, re.M), p.stdout
        for b, k in ((1, 1), (4, 2)):
            out = run_vs_ort(binary, cnn, EX, "image", (b, 3, 32, 32), tmp, "logits")
            assert f"shape set {k} of 2: image:{b}x3x32x32" in out, out

    @case("cnn_batch_3_refused_with_status_2")
    def _():
        x = os.path.join(tmp, "b3.npy")
        np.save(x, np.ones((3, 3, 32, 32), np.float32))
        p = orch(binary, "run", cnn, "-i", f"image={x}")
        assert p.returncode == 2, f"exit {p.returncode}: {p.stderr}"
        assert "image:3x3x32x32" in p.stderr and f"serves only {served_cnn}" in p.stderr, p.stderr

    @case("sequence_lengths_7_and_16_match_onnxruntime")
    def _():
        p = orch(binary, "compile", seq_model, "-o", seq, "--input-shapes", "x:1x7x64",
                 "--input-shapes", "x:1x16x64", *common)
        assert p.returncode == 0, f"compile failed ({p.returncode}): {p.stderr[-3000:]}"
        for length in (7, 16):
            run_vs_ort(binary, seq, seq_model, "x", (1, length, 64), tmp, "y")
        x = os.path.join(tmp, "l8.npy")
        np.save(x, np.ones((1, 8, 64), np.float32))
        p = orch(binary, "run", seq, "-i", f"x={x}")
        assert p.returncode == 2 and "serves only x:1x7x64 | x:1x16x64" in p.stderr, \
            f"exit {p.returncode}: {p.stderr}"

    @case("weights_stored_once")
    def _():
        # The sections (artifact.h's format 7): one ONNX model and its weights, a plan, a kernel
        # module and its source per set, nothing else; the model file's bytes once, the weights
        # in their section (an index and 64-byte alignment beside them).
        secs = sections(seq)
        model = os.path.getsize(seq_model)
        assert model > 60000, f"the model is {model} bytes: too small to tell"
        assert [k for k, _ in secs] == [1, 5, 2, 3, 4, 2, 3, 4], secs
        assert secs[1][1] > model * 0.9 and secs[0][1] < model * 0.1, (secs, model)
        assert abs(secs[0][1] + secs[1][1] - model) < 8192, (secs, model)
        assert os.path.getsize(seq) <= sum(n for _, n in secs) + 8192, (os.path.getsize(seq), secs)
        # A one-set artefact holds the same model sections: two of them hold them twice.
        one = os.path.join(tmp, "seq7.orch")
        p = orch(binary, "compile", seq_model, "-o", one, "--input-shapes", "x:1x7x64", *common)
        assert p.returncode == 0, p.stderr[-3000:]
        assert sections(one)[:2] == secs[:2] and len(sections(one)) == 5, sections(one)

    @case("info_lists_every_shape_set")
    def _():
        p = orch(binary, "info", cnn)
        assert p.returncode == 0, p.stderr
        assert "shape sets: 2" in p.stdout, p.stdout
        for k, b in ((1, 1), (2, 4)):
            m = re.search(rf"^shape set {k}: image:{b}x3x32x32: (\d+) kernels, arena ([0-9.]+) "
                          r"MiB, predicted ([0-9.]+) ms$", p.stdout, re.M)
            assert m and int(m.group(1)) > 0 and float(m.group(3)) > 0, p.stdout
        assert p.stdout.count("not generated:") == 2, p.stdout

    @case("run_and_bench_pick_a_set")
    def _():
        p = orch(binary, "run", cnn, "--shapes", "2", "--seed", "1")
        assert p.returncode == 0 and "shape set 2 of 2: image:4x3x32x32" in p.stdout, p.stderr
        assert re.search(r"logits +float32 +4x10", p.stdout), p.stdout
        p = orch(binary, "run", cnn, "--shapes", "3")
        assert p.returncode == 1 and "serves 2 shape sets" in p.stderr, p.stderr
        js = os.path.join(tmp, "bench.json")
        p = orch(binary, "bench", cnn, "--shapes", "2", "--iters", "3", "--warmup", "1",
                 "--json", js)
        assert p.returncode == 0 and "shape set 2 of 2" in p.stdout, p.stderr
        assert json.load(open(js))["input_shapes"] == "image:4x3x32x32"
        p = orch(binary, "bench", cnn, "--iters", "3", "--warmup", "1")
        assert p.returncode == 0 and "shape set 1 of 2: image:1x3x32x32 (--shapes N" in p.stdout
        p = orch(binary, "bench", cnn, "--shapes", "5", "--iters", "1")
        assert p.returncode == 1 and "serves 2 shape sets" in p.stderr, p.stderr
        # bench -i: the set the file's shape matches, without --shapes; a shape no set serves
        # is refused naming the first set's.
        x4 = os.path.join(tmp, "bench_x4.npy")
        np.save(x4, np.ones((4, 3, 32, 32), np.float32))
        p = orch(binary, "bench", cnn, "--iters", "3", "--warmup", "1", "--json", js, "-i",
                 f"image={x4}")
        assert p.returncode == 0 and "shape set 2 of 2: image:4x3x32x32\n" in p.stdout, p.stderr
        assert json.load(open(js))["input_shapes"] == "image:4x3x32x32"
        np.save(x4, np.ones((3, 3, 32, 32), np.float32))
        p = orch(binary, "bench", cnn, "--iters", "3", "-i", f"image={x4}")
        assert p.returncode == 2 and "has shape 3x3x32x32" in p.stderr, p.stderr
        p = orch(binary, "inspect", cnn, "--shapes", "2")
        assert p.returncode == 0 and "shape set 2 of 2: image:4x3x32x32" in p.stdout, p.stderr

    @case("same_shapes_twice_and_too_many_refused")
    def _():
        out = os.path.join(tmp, "dup.orch")
        p = orch(binary, "compile", EX, "-o", out, "--input-shapes", "image:1x3x32x32",
                 "--input-shapes", "image:1x3x32x32", *common)
        assert p.returncode == 1 and "bind the same shapes" in p.stderr, p.stderr
        assert not os.path.exists(out) and not [f for f in os.listdir(tmp) if ".set" in f]
        many = [a for b in range(1, 18) for a in ("--input-shapes", f"image:{b}x3x32x32")]
        p = orch(binary, "compile", EX, "-o", out, *many, *common)
        assert p.returncode == 1 and "at most 16" in p.stderr, p.stderr

    finish()


if __name__ == "__main__":
    main()
