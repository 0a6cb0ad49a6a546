#!/usr/bin/env python3
"""Tests of the Python package `orch` (python/orch) as installed: its ctypes structs against the
C compiler's layout of include/orch.h, the version, the library and CLI the install put in place,
orch.compile + Session.run on the shipped example and on generated models against ONNX Runtime
(rtol 1e-4, atol 1e-5 as tests/models/run_models.py; integers exactly), the reference
interpreters through orch.Model, inputs converted only where no information is lost, the errors
(unknown, missing input, wrong shape and dtype, missing and damaged artefacts, bad options,
closed sessions) raised as orch.Error with orch's status, one Session run from 4 threads bit for
bit as from one and closed while 3 threads run it, an artefact of two shape sets (each run
against ONNX Runtime, a third shape refused naming both), and the package's time per run over a bare
call of orch_session_run.

Prints one line per case and ends with "N passed, N failed"; exits 1 on any failure.

usage: test_package.py MODELS_DIR [--seed S]
  MODELS_DIR: tests/models/gen_models.py's output (a_convnet, d_mlp, e_mixed are compiled).
Run with the Python environment the package is installed in (scripts/test_python.sh makes one);
it needs numpy, onnx, onnxruntime and a C compiler (`cc`).
"""
import argparse
import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import onnxruntime as ort

import orch
from orch import _capi

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import (EXAMPLE_MODEL as TINY, ROOT, case, close_to, finish,  # noqa: E402
                     onnxruntime)

# A bound batch; a plain MLP; int64 inputs and 7 outputs.
GENERATED = ["a_convnet", "d_mlp", "e_mixed"]


def raises(status, fn, *contains):
    """fn() raises orch.Error with this status and a message containing each string."""
    try:
        fn()
    except orch.Error as e:
        assert e.status == status, f"status {e.status!r}, want {status!r}: {e}"
        assert isinstance(e.status, orch.Status), repr(e.status)
        for s in contains:
            assert s in str(e), f"message {str(e)!r} lacks {s!r}"
        return e
    raise AssertionError(f"no orch.Error (want {status!r})")


def header_structs():
    """{struct name: [field names in order]} of orch.h's public structs."""
    text = re.sub(r"//[^\n]*", "", open(os.path.join(ROOT, "include", "orch.h")).read())
    out = {}
    for m in re.finditer(r"typedef struct (orch_\w+) \{(.*?)\} \1;", text, re.S):
        decls = [d.strip() for d in m.group(2).split(";") if d.strip()]
        out[m.group(1)] = [re.match(r".*?(\w+)\s*(\[[^]]*\])?$", d, re.S).group(1)
                           for d in decls]
    return out


def write_add_model(path):
    """y = x + z on 4x4 float32: a run of a few microseconds."""
    import onnx
    from onnx import TensorProto, helper
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 4]) for n in ("x", "z", "y")]
    g = helper.make_graph([helper.make_node("Add", ["x", "z"], ["y"])], "add", io[:2], io[2:])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def generated_model(models, name):
    """(model path, input_shapes, {input: array}) of a gen_models.py model: its stored inputs
    (the int64 indices of e_mixed must stay in range) and its --input-shapes."""
    d = os.path.join(models, name)
    args = shlex.split(open(os.path.join(d, "args.txt")).read(), comments=True)
    shapes = args[args.index("--input-shapes") + 1] if "--input-shapes" in args else None
    feeds = {}
    for line in open(os.path.join(d, "io.txt")):
        kind, tname, f = line.rstrip("\n").split("\t")
        if kind == "input":
            feeds[tname] = np.load(os.path.join(d, f))
    return os.path.join(d, "model.onnx"), shapes, feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models")
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}; orch {orch.version()} from {_capi.library_path()}; numpy "
          f"{np.__version__}, onnxruntime {ort.__version__}")
    rng = np.random.default_rng(seed)
    tmp = tempfile.mkdtemp(prefix="orch-py-")
    db = os.path.join(tmp, "profile.db")
    quick = dict(db=db, top_k=2)  # the test is of the package, not of tuning
    sessions = {}

    @case("structs_match_orch_h")
    def _():
        # Names and order from the header, sizes and offsets from the C compiler.
        fields = header_structs()
        assert set(fields) == set(_capi.STRUCTS), f"orch.h structs {sorted(fields)}"
        lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "orch.h"',
                 "int main(void) {"]
        for sname, cls in _capi.STRUCTS.items():
            names = [f[0] for f in cls._fields_]
            assert names == fields[sname], f"{sname}: ctypes {names}, orch.h {fields[sname]}"
            lines.append(f'printf("{sname} size %zu\\n", sizeof({sname}));')
            lines += [f'printf("{sname} {f} %zu\\n", offsetof({sname}, {f}));' for f in names]
        src = os.path.join(tmp, "layout.c")
        with open(src, "w") as fh:
            fh.write("\n".join(lines + ["return 0;", "}"]) + "\n")
        exe = os.path.join(tmp, "layout")
        subprocess.run([os.environ.get("ORCH_CC") or "cc", "-I", os.path.join(ROOT, "include"),
                        src, "-o", exe], check=True)
        c = dict(l.rsplit(" ", 1) for l in subprocess.check_output([exe], text=True).splitlines())
        for sname, cls in _capi.STRUCTS.items():
            assert int(c[f"{sname} size"]) == _capi.ctypes.sizeof(cls), f"{sname}: size"
            for f in fields[sname]:
                got = getattr(cls, f).offset
                want = int(c[f"{sname} {f}"])
                assert want == got, f"{sname}.{f}: C offset {want}, ctypes {got}"

    @case("version")
    def _():
        want = re.search(r'#define ORCH_VERSION "([^"]+)"',
                         open(os.path.join(ROOT, "include", "orch.h")).read()).group(1)
        assert orch.version() == want == orch.__version__, (orch.version(), want)
        try:
            dist = importlib.metadata.version("orch")
        except importlib.metadata.PackageNotFoundError:
            dist = None  # run from the tree with ORCH_LIBRARY
        assert dist in (None, want), f"package metadata says {dist}, orch.h {want}"

    @case("installed_layout")
    def _():
        # Installed by pip: the library beside the package's files, the CLI in the environment.
        if os.environ.get("ORCH_LIBRARY"):
            print("  (ORCH_LIBRARY set: the package is run from the tree; layout not checked)")
            return
        lib = _capi.library_path()
        assert os.path.dirname(lib) == os.path.dirname(orch.__file__), lib
        assert os.path.isfile(lib), lib
        cli = shutil.which("orch", path=os.path.dirname(sys.executable))
        assert cli, f"no orch command beside {sys.executable}"
        out = subprocess.run([cli, "version"], capture_output=True, text=True)
        assert out.returncode == 0 and orch.version() in out.stdout, out

    tiny_art = os.path.join(tmp, "tiny.orch")
    tiny_x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)

    @case("tiny_cnn_compile_run")
    def _():
        s = orch.compile(TINY, tiny_art, input_shapes={"image": (1, 3, 32, 32)}, **quick)
        assert isinstance(s, orch.Session)
        assert [(t.name, t.shape, t.dtype) for t in s.inputs] == \
            [("image", (1, 3, 32, 32), np.dtype(np.float32))], s.inputs
        assert [t.name for t in s.outputs] == ["logits"], s.outputs
        ref = onnxruntime(TINY, {"image": tiny_x})
        got = s.run({"image": tiny_x})
        assert list(got) == ["logits"], list(got)
        err = close_to("logits", got["logits"], ref["logits"])
        print(f"  tiny_cnn: largest error {err:.3g} against ONNX Runtime")
        sessions["tiny"] = s

    @case("several_shape_sets")
    def _():
        # A list of shape sets: one artefact, a plan per set; run picks by the inputs' shapes.
        art = os.path.join(tmp, "tiny_sets.orch")
        s = orch.compile(TINY, art, input_shapes=[{"image": (1, 3, 32, 32)},
                                                  "image:4x3x32x32"], **quick)
        assert [[(t.name, t.shape) for t in ts] for ts in s.shape_sets] == \
            [[("image", (1, 3, 32, 32))], [("image", (4, 3, 32, 32))]], s.shape_sets
        assert s.inputs[0].shape == (1, 3, 32, 32), s.inputs
        for b in (1, 4):
            x = rng.standard_normal((b, 3, 32, 32)).astype(np.float32)
            got = s.run({"image": x})
            assert got["logits"].shape == (b, 10), got["logits"].shape
            close_to("logits", got["logits"], onnxruntime(TINY, {"image": x})["logits"])
        raises(orch.Status.INVALID, lambda: s.run({"image": np.zeros((3, 3, 32, 32), np.float32)}),
               "image:3x3x32x32", "serves only image:1x3x32x32 | image:4x3x32x32")
        # The same refusal from the C API (the package checks first): a session from the bytes,
        # orch_session_run called directly on a batch of 3.
        s2 = orch.Session.from_bytes(open(art, "rb").read())
        assert len(s2.shape_sets) == 2
        C = _capi.ctypes
        x3 = np.zeros((3, 3, 32, 32), np.float32)
        y3 = np.zeros((3, 10), np.float32)
        tin = _capi.Tensor(name=b"image", dtype=1, rank=4, data=x3.ctypes.data, nbytes=x3.nbytes)
        tout = _capi.Tensor(name=b"logits", dtype=1, rank=2, data=y3.ctypes.data,
                            nbytes=y3.nbytes)
        for d, v in enumerate(x3.shape):
            tin.dims[d] = v
        tout.dims[0], tout.dims[1] = 3, 10
        ctx = _capi.lib.orch_ctx_create()
        rc = _capi.lib.orch_session_run(ctx, s2._ptr, C.byref(tin), 1, C.byref(tout), 1)
        msg = _capi.lib.orch_last_error(ctx).decode()
        _capi.lib.orch_ctx_free(ctx)
        assert rc == orch.Status.INVALID and "image:3x3x32x32" in msg and \
            "image:1x3x32x32 | image:4x3x32x32" in msg, (rc, msg)
        raises(orch.Status.USAGE, lambda: orch.compile(TINY, os.path.join(tmp, "x.orch"),
                                                       input_shapes=[], **quick), "empty")
        raises(orch.Status.USAGE, lambda: orch.compile(
            TINY, os.path.join(tmp, "x.orch"), input_shapes=["image:1x3x32x32"] * 2, **quick),
            "same shapes")
        s.close()
        s2.close()

    for name in GENERATED:
        @case(f"{name}_compile_run")
        def _():
            path, shapes, feeds = generated_model(a.models, name)
            s = orch.compile(path, os.path.join(tmp, f"{name}.orch"), input_shapes=shapes,
                             **quick)
            assert [t.name for t in s.inputs] == list(feeds), (s.inputs, list(feeds))
            ref = onnxruntime(path, feeds)
            assert [t.name for t in s.outputs] == list(ref), (s.outputs, list(ref))
            got = s.run(feeds)
            errs = [close_to(k, got[k], ref[k]) for k in ref]
            print(f"  {name}: {len(ref)} outputs, largest error {max(errs):.3g} against "
                  "ONNX Runtime")
            # The list form, in the order of .inputs, gives the same bits.
            again = s.run([feeds[t.name] for t in s.inputs])
            assert all(np.array_equal(again[k], got[k]) for k in got), "list form differs"
            sessions[name] = s

    @case("reference_interpreters")
    def _():
        path, shapes, feeds = generated_model(a.models, "d_mlp")
        ref = onnxruntime(path, feeds)
        for engine in ("ops", "prims"):
            with orch.Model(path, input_shapes=shapes, engine=engine) as m:
                got = m.run(feeds)
                for k in ref:
                    close_to(f"{engine} {k}", got[k], ref[k])
            raises(orch.Status.USAGE, lambda: m.run(feeds), "closed")
        raises(orch.Status.USAGE, lambda: orch.Model(path, engine="jit"), "jit")

    @case("from_bytes_same_bits")
    def _():
        s = sessions["tiny"]
        with orch.Session.from_bytes(open(tiny_art, "rb").read()) as m:
            assert m.inputs == s.inputs and m.outputs == s.outputs
            assert np.array_equal(m.run([tiny_x])["logits"], s.run([tiny_x])["logits"])

    @case("inputs_converted_only_losslessly")
    def _():
        s = sessions["tiny"]
        want = s.run({"image": tiny_x})["logits"]
        # Not contiguous, big-endian, float16: copied or converted, the same values.
        strided = np.empty((1, 3, 32, 64), np.float32)[..., ::2]
        strided[...] = tiny_x
        assert not strided.flags.c_contiguous
        assert np.array_equal(s.run({"image": strided})["logits"], want), "strided"
        assert np.array_equal(s.run({"image": tiny_x.astype(">f4")})["logits"], want), "BE"
        half = tiny_x.astype(np.float16)
        assert np.array_equal(s.run({"image": half})["logits"],
                              s.run({"image": half.astype(np.float32)})["logits"]), "float16"
        # float64 into float32 loses bits: refused, as is a nested list (float64 too).
        raises(orch.Status.INVALID, lambda: s.run({"image": tiny_x.astype(np.float64)}),
               "'image'", "float64", "float32")
        raises(orch.Status.INVALID, lambda: s.run([tiny_x.tolist()]), "float64")
        # int32 indices into e_mixed's int64 input: lossless, the same outputs as int64.
        e = sessions["e_mixed"]
        _, _, feeds = generated_model(a.models, "e_mixed")
        assert feeds["indices"].dtype == np.int64
        got = e.run({**feeds, "indices": feeds["indices"].astype(np.int32)})
        base = e.run(feeds)
        assert all(np.array_equal(got[k], base[k]) for k in base), "int32 indices"
        raises(orch.Status.INVALID,
               lambda: e.run({**feeds, "indices": feeds["indices"].astype(np.float32)}),
               "'indices'", "int64")

    @case("input_errors")
    def _():
        s = sessions["tiny"]
        e = raises(orch.Status.USAGE, lambda: s.run({"image": tiny_x, "imgae": tiny_x}),
                   "'imgae'", "'image'")
        assert isinstance(e, Exception) and e.message == str(e)
        raises(orch.Status.USAGE, lambda: s.run({}), "'image' is not given")
        e_mixed = sessions["e_mixed"]
        _, _, feeds = generated_model(a.models, "e_mixed")
        raises(orch.Status.USAGE, lambda: e_mixed.run({"input.1": feeds["input.1"]}),
               "'indices' is not given")
        raises(orch.Status.USAGE, lambda: s.run([tiny_x, tiny_x]), "2 inputs given")
        raises(orch.Status.INVALID, lambda: s.run({"image": tiny_x[:, :, :31]}),
               "(1, 3, 31, 32)", "(1, 3, 32, 32)")
        raises(orch.Status.INVALID, lambda: s.run({"image": tiny_x.reshape(3, 32, 32)}), "shape")
        try:
            s.run(tiny_x)
            raise AssertionError("a bare array taken as the inputs")
        except TypeError:
            pass

    @case("artefact_errors")
    def _():
        missing = os.path.join(tmp, "missing.orch")
        raises(orch.Status.INVALID, lambda: orch.Session(missing), missing)
        damaged = os.path.join(tmp, "damaged.orch")
        data = open(tiny_art, "rb").read()
        with open(damaged, "wb") as fh:
            fh.write(data[: len(data) // 2])
        raises(orch.Status.INVALID, lambda: orch.Session(damaged), damaged)
        raises(orch.Status.INVALID, lambda: orch.Session.from_bytes(data[:100]))
        s = orch.Session(tiny_art)
        s.close()
        s.close()
        raises(orch.Status.USAGE, lambda: s.run([tiny_x]), "closed")

    @case("compile_errors")
    def _():
        # Each option lands in its own field of orch_compile_options: a misplaced field would
        # not be refused, or refused for another reason.
        out = os.path.join(tmp, "never.orch")
        shapes = {"image": (1, 3, 32, 32)}
        raises(orch.Status.USAGE, lambda: orch.compile(TINY, out, target="tpu",
                                                       input_shapes=shapes, **quick), "tpu")
        raises(orch.Status.USAGE, lambda: orch.compile(TINY, out, precision="fp16",
                                                       input_shapes=shapes, **quick))
        raises(orch.Status.USAGE, lambda: orch.compile(TINY, out, layout="nhcw",
                                                       input_shapes=shapes, **quick), "nhcw")
        raises(orch.Status.USAGE, lambda: orch.compile(TINY, out, threads=-2,
                                                       input_shapes=shapes, **quick))
        raises(orch.Status.USAGE, lambda: orch.compile(TINY, out, explain=3,
                                                       input_shapes=shapes, **quick), "explain")
        raises(orch.Status.USAGE, lambda: orch.compile(TINY, out, gpus=2,
                                                       input_shapes=shapes, **quick), "--gpus")
        raises(orch.Status.USAGE, lambda: orch.compile(TINY, out, target="cuda", gpus="0,0",
                                                       input_shapes=shapes, **quick), "twice")
        raises(orch.Status.INVALID, lambda: orch.compile(os.path.join(tmp, "none.onnx"), out,
                                                         **quick), "none.onnx")
        assert not os.path.exists(out), "a refused compile wrote an artefact"

    @case("one_session_four_threads")
    def _():
        s = sessions["a_convnet"]
        shape = s.inputs[0].shape
        xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
        want = [s.run([x]) for x in xs]
        bad = []

        def worker(i):
            for _ in range(50):
                got = s.run([xs[i]])
                if not all(np.array_equal(got[k], want[i][k]) for k in want[i]):
                    bad.append(i)
                    return

        ts = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not bad, f"threads {sorted(set(bad))} got other bits than one thread"

    @case("close_during_runs")
    def _():
        # close() while 3 threads run: each run ends with the right outputs or raises "closed";
        # the session is freed once the runs in progress end (a run on freed memory would crash
        # or give other outputs).
        s = orch.Session(tiny_art)
        want = s.run([tiny_x])["logits"]
        seen = []

        def worker():
            try:
                for _ in range(10000):
                    if not np.array_equal(s.run([tiny_x])["logits"], want):
                        seen.append("other outputs")
                        return
                seen.append("never closed")
            except orch.Error as e:
                seen.append("closed" if e.status == orch.Status.USAGE and "closed" in str(e)
                            else str(e))

        ts = [threading.Thread(target=worker) for _ in range(3)]
        for t in ts:
            t.start()
        time.sleep(0.2)
        s.close()
        for t in ts:
            t.join()
        assert seen == ["closed"] * 3, seen

    @case("device_tensor_checks")
    def _():
        # The DLPack reader behind run() on device tensors, on host tensors (no GPU here): shape,
        # dtype and contiguity are checked before any pointer reaches orch; outputs= is refused
        # on a host run.
        from orch import _dlpack
        a = np.zeros((2, 3), np.float32)
        v = _dlpack.View(a, "input", "t", (2, 3), np.dtype(np.float32), False)
        assert v.address == a.ctypes.data and v.device == (_dlpack.KDL_CPU, 0), v.device
        assert _dlpack.device_of(a) is None
        for bad, words in ((np.zeros((3, 2), np.float32).T, "C-contiguous"),
                           (np.zeros((2, 3), np.float64), "expects float32"),
                           (np.zeros((3, 2), np.float32), "has shape")):
            try:
                _dlpack.View(bad, "input", "t", (2, 3), np.dtype(np.float32), False)
            except orch.Error as e:
                assert words in str(e) and e.status == orch.Status.INVALID, str(e)
            else:
                raise AssertionError(f"accepted a tensor: {words}")
        s = sessions["tiny"]
        x = rng.random(s.inputs[0].shape).astype(s.inputs[0].dtype)
        try:
            s.run({s.inputs[0].name: x}, outputs={})
        except orch.Error as e:
            assert "outputs= is for device tensors" in str(e), str(e)
        else:
            raise AssertionError("outputs= accepted on a host run")

    @case("run_overhead")
    def _():
        # What Session.run adds to a bare ctypes call of orch_session_run with buffers made
        # ahead (the checks, the conversion, the output arrays), on a model whose run takes
        # microseconds (x + z, 4x4), timed in turns, best of each; one thread (no OpenMP
        # barriers on a busy machine). Printed, with a bound far above it that only a per-run
        # copy or allocation of the model's buffers would cross.
        path = os.path.join(tmp, "add.onnx")
        write_add_model(path)
        with orch.compile(path, os.path.join(tmp, "add.orch"), threads=1, **quick) as s:
            x, z = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
            ins = s._in_type.from_buffer_copy(s._in_template)
            ins[0].data, ins[1].data = x.ctypes.data, z.ctypes.data
            y = np.empty((4, 4), np.float32)
            outs = s._out_type.from_buffer_copy(s._out_template)
            outs[0].data = y.ctypes.data
            ctx = orch._ctx()
            feeds = {"x": x, "z": z}
            n = 2000

            def per_run(fn):
                t = time.perf_counter()
                for _ in range(n):
                    fn()
                return (time.perf_counter() - t) / n

            bare, pkg = [], []
            for _ in range(10):
                bare.append(per_run(lambda: _capi.lib.orch_session_run(ctx, s._ptr, ins, 2,
                                                                       outs, 1)))
                pkg.append(per_run(lambda: s.run(feeds)))
            bare, pkg = min(bare), min(pkg)
            assert np.array_equal(y, x + z) and np.array_equal(s.run(feeds)["y"], x + z)
        print(f"  x + z run, 1 thread: {bare * 1e6:.1f} us through a bare C call, "
              f"{pkg * 1e6:.1f} us through Session.run: {(pkg - bare) * 1e6:.1f} us of Python")
        assert pkg - bare < 200e-6, f"{(pkg - bare) * 1e6:.0f} us of Python per run"

    for s in sessions.values():
        s.close()
    shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
