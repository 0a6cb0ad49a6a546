#!/usr/bin/env python3
"""A long chain of elementwise operators through `orch compile -t cpu`: compile time and memory
must grow linearly with the model (the clean-up merges the whole chain into one program, and
merging one producer at a time was quadratic in time and memory: 2,000 nodes took 257 MB, 4,000
1.1 GB, 10,000 did not finish).

For each N: writes an N-node chain (Add, Relu, Mul, Sigmoid, Sub, Tanh, Neg, Abs in turn, the
binary ones with scalar constants) over a [4, 64] float32 input, compiles it with a fresh profile
database, prints the compile's wall time, its peak resident memory (orch's own, sampled from
/proc) and the time bound (printed, not asserted: the machine may be loaded), then runs the
artefact on a random input against ONNX Runtime's output (rtol 1e-4, atol 1e-5).

Prints one line per case and ends with "N passed, N failed" followed by each chain's compile time
and memory (make test shows that line); exits 1 on any failure.

usage: long_chain.py ORCH [N ...]     (default N: 5000)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

OPS = ["Add", "Relu", "Mul", "Sigmoid", "Sub", "Tanh", "Neg", "Abs"]
BOUND_S = 60  # the target for 10,000 nodes on 2 cores
COMPILE_TIMEOUT_S = 900


def chain_model(n):
    consts = [numpy_helper.from_array(np.array(0.5, np.float32), "half"),
              numpy_helper.from_array(np.array(1.25, np.float32), "scale")]
    nodes, prev = [], "x"
    for i in range(n):
        op = OPS[i % len(OPS)]
        out = "y" if i == n - 1 else f"t{i}"
        ins = [prev, "scale" if op == "Mul" else "half"] if op in ("Add", "Mul", "Sub") else [prev]
        nodes.append(h.make_node(op, ins, [out], name=f"{op.lower()}_{i}"))
        prev = out
    g = h.make_graph(nodes, "chain", [h.make_tensor_value_info("x", TP.FLOAT, [4, 64])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [4, 64])], consts)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)], producer_name="orch-long-chain")
    m.ir_version = 8
    return m


def run_sampled(argv, tmp):
    """Runs argv; returns (exit code, stdout, stderr, seconds, peak resident MB of the process
    itself, peak resident MB of it or any process it ran). The first is /proc's high-water mark
    (VmHWM), read until the process exits: it only grows, so the last reading is the peak unless
    the process grew in its last 20 ms. The second is wait4's: the C compiler's, where larger."""
    t0 = time.monotonic()
    out_path, err_path = os.path.join(tmp, "stdout.txt"), os.path.join(tmp, "stderr.txt")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        p = subprocess.Popen(argv, stdout=out, stderr=err)
    own_kb = 0
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        own_kb = max(own_kb, int(line.split()[1]))
        except (OSError, ValueError):
            pass
        if time.monotonic() - t0 > COMPILE_TIMEOUT_S:
            p.kill()
        time.sleep(0.02)
    p.returncode = os.waitstatus_to_exitcode(status)
    with open(out_path) as out, open(err_path) as err:
        return (p.returncode, out.read(), err.read(), time.monotonic() - t0, own_kb / 1024,
                usage.ru_maxrss / 1024)


def check_chain(orch, n, tmp, notes):
    model = os.path.join(tmp, f"chain{n}.onnx")
    onnx.save(chain_model(n), model)
    art = os.path.join(tmp, f"chain{n}.orch")
    rc, out, err, secs, own_mb, tree_mb = run_sampled(
        [orch, "compile", model, "-t", "cpu", "-o", art, "--db",
         os.path.join(tmp, f"profile{n}.db")], tmp)
    if rc != 0:
        return f"compile exited {rc}:\n{err[-3000:]}"
    over = " OVER THE BOUND" if secs > BOUND_S else ""
    print(f"time {n}-node chain: compile {secs:.1f} s (bound {BOUND_S} s, not asserted{over}), "
          f"peak memory {own_mb:.0f} MB (with the C compiler {tree_mb:.0f} MB), "
          f"model {os.path.getsize(model) // 1024} KB")
    notes.append(f"{n} nodes compiled in {secs:.1f} s, bound {BOUND_S} s; {own_mb:.0f} MB")
    for line in out.splitlines():
        if line.startswith(("time:", "kernels:")):
            print(f"    {line}")
    rng = np.random.default_rng(n)
    x = rng.uniform(-1, 1, (4, 64)).astype(np.float32)
    y = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.save(os.path.join(tmp, "x.npy"), x)
    np.save(os.path.join(tmp, "y.npy"), y)
    r = subprocess.run([orch, "run", art, "-i", f"x={tmp}/x.npy", "--expected", f"y={tmp}/y.npy",
                        "--rtol", "1e-4", "--atol", "1e-5"],
                       capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    if r.returncode != 0 or ": ok" not in r.stdout:
        return f"the artefact disagrees with ONNX Runtime ({r.returncode}):\n{r.stdout}{r.stderr}"
    return None


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    orch = sys.argv[1]
    sizes = [int(a) for a in sys.argv[2:]] or [5000]
    tmp = tempfile.mkdtemp(prefix="orch-long-chain-")
    passed = failed = 0
    notes = []  # on the count line, which make test shows
    try:
        for n in sizes:
            why = check_chain(orch, n, tmp, notes)
            print(f"{'ok  ' if why is None else 'FAIL'} elementwise_chain_{n}" +
                  ("" if why is None else f": {why}"))
            passed += why is None
            failed += why is not None
            sys.stdout.flush()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{passed} passed, {failed} failed" + (f" ({'; '.join(notes)})" if notes else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
