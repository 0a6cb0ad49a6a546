"""What the end-to-end test scripts (tests/compile/*.py, tests/python/test_package.py) share: the
repository's paths, cases that print one line each and the closing "N passed, N failed", commands
run with sanitizer reports and crashes failing the case, ONNX Runtime as the oracle with the float32
tolerance of tests/models/run_models.py, and the models more than one script compiles.
A script puts this folder first on its path (`sys.path.insert`) and imports what it uses;
numpy, onnx and onnxruntime are imported by the functions that use them.
"""
import os
import re
import shlex
import subprocess
import sys
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
EXAMPLE = os.path.join(ROOT, "examples", "tiny_cnn")  # model.onnx, image.npy, logits.npy
EXAMPLE_MODEL = os.path.join(EXAMPLE, "model.onnx")
SANITIZER = re.compile(r"runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer")
RTOL, ATOL = 1e-4, 1e-5  # float32 outputs against ONNX Runtime, as tests/models/run_models.py

results = []  # (case name, None or what failed), in the order the cases ran


def case(name):
    """Runs the decorated function at once as the case `name`: "ok NAME", or "FAIL NAME: why"
    (an assertion's message, else the traceback: never empty; any other exception fails that
    case, not the suite)."""
    def wrap(fn):
        try:
            fn()
            results.append((name, None))
            print(f"ok {name}")
        except Exception as e:
            # An assertion without a message shows where it stands: the traceback.
            msg = str(e) if isinstance(e, AssertionError) and str(e) else traceback.format_exc()
            results.append((name, msg))
            print(f"FAIL {name}: {msg}")
        sys.stdout.flush()
        return fn
    return wrap


def finish():
    """Prints "N passed, N failed" over the cases run and exits, 1 if any failed."""
    failed = sum(1 for _, e in results if e is not None)
    print(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


def run(cmd, timeout=1800, cwd=None, env=None):
    """cmd's CompletedProcess (text output captured); a sanitizer report on its stderr or its end
    by a signal fails the case, whatever its exit status."""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    assert not SANITIZER.search(p.stderr), f"sanitizer report:\n{p.stderr[-3000:]}"
    assert p.returncode >= 0, f"{shlex.join(cmd)} crashed (signal {-p.returncode})"
    return p


def orch(binary, *args, **kw):
    """run() of the orch command `binary` with args (run's keywords pass through)."""
    return run([binary, *args], **kw)


def digest(out):
    """The selection digest a compile's summary prints."""
    m = re.search(r"selection ([0-9a-f]{16})", out)
    assert m, f"no selection digest in:\n{out}"
    return m.group(1)


def largest_error(err):
    """The end-to-end check's largest error a compile's log prints."""
    m = re.search(r"largest error ([0-9.e+-]+)", err)
    assert m, f"no largest error in:\n{err[-3000:]}"
    return float(m.group(1))


def onnxruntime(path, feeds):
    """{output name: array} of ONNX Runtime's CPU provider on the model at path, its graph
    optimisations off (the reference computes the model as written)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, feeds)))


def close_to(name, got, ref):
    """got matches ONNX Runtime's ref: the same shape and dtype; floats within the tolerance,
    everything else exactly. Returns the largest error."""
    import numpy as np
    assert got.shape == ref.shape, f"{name}: shape {got.shape}, ONNX Runtime {ref.shape}"
    assert got.dtype == ref.dtype, f"{name}: dtype {got.dtype}, ONNX Runtime {ref.dtype}"
    if np.issubdtype(ref.dtype, np.floating):
        err = np.abs(got.astype(np.float64) - ref)
        bad = ~(err <= ATOL + RTOL * np.abs(ref.astype(np.float64)))
        assert not bad.any(), (f"{name}: {bad.sum()} of {ref.size} elements off, largest error "
                               f"{err.max():.3g}")
        return float(err.max()) if err.size else 0.0
    assert np.array_equal(got, ref), f"{name}: integer outputs differ"
    return 0.0


def write_sequence_model(path):
    """x [1, L, 64] -> softmax(relu(x W1 + b1) W2) [1, L, 64]; L symbolic; 64 KiB of weights."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((64, 128)) * 0.1).astype(np.float32)
    b1 = (rng.standard_normal(128) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((128, 64)) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["z"], name="mm2"),
             helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1)]
    g = helper.make_graph(
        nodes, "seq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "L", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "L", 64])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
         numpy_helper.from_array(w2, "w2")])
    # IR version 8 (opset 17's): the newest onnx package writes a version ONNX Runtime may not read.
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
