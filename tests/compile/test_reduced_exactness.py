#!/usr/bin/env python3
"""The end-to-end check's fallback for configs of reduced exactness (Winograd F(4x4) on the CPU
target, KCFG_REDUCED_EXACTNESS): a stack of sixteen 3x3 convolutions with ReLU is compiled cold
(F(4x4) configs must be offered and measured); the profile database is then edited so F(4x4) is
the fastest config of every layer (or the slowest), which makes the plan hold sixteen F(4x4)
kernels (or none); with the end-to-end check's bound set between the two plans' measured errors
(--check-tol), the compile must not refuse the model: it says the F(4x4) plan missed the
check, solves again without those configs, and its outputs match ONNX Runtime; a warm compile on
that database leaves them out from the start (it says so, measures nothing, runs no failing check,
same selection); the same database with F(4x4) made slowest gives that selection too; at the real
bound the F(4x4) plan passes and nothing is left out.

Prints one line per case and ends with "N passed, N failed"; exits 1 on any failure.

usage: test_reduced_exactness.py ORCH
"""
import os
import re
import shutil
import sqlite3
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import case, close_to, digest, finish, largest_error, onnxruntime, run  # noqa: E402

LAYERS, C, H = 16, 32, 32
FALLBACK = re.compile(r"check: the plan with (\d+) kernels of reduced exactness \(v=winograd m=4\) "
                      r"missed the end-to-end check")
CACHED = "configs of reduced exactness (v=winograd m=4) left out: a plan with"
M4 = "v=winograd m=4 "


def write_model(path):
    """x [1, C, H, H] -> LAYERS x (3x3 conv, pad 1, He-scaled weights; ReLU)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    nodes, inits, x = [], [], "x"
    for i in range(LAYERS):
        w = (rng.standard_normal((C, C, 3, 3)) * np.sqrt(2.0 / (9 * C))).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1],
                                      name=f"conv{i}"))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        x = f"r{i}"
    g = helper.make_graph(
        nodes, "conv_stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, H, H])], inits)
    g.node[-1].output[0] = "y"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def compile_(binary, model, out, db, tol=None, explain=False):
    args = [binary, "compile", model, "-t", "cpu", "-o", out, "--db", db, "--threads", "2",
            "--trust-timings"] + (["--explain"] if explain else []) + \
        (["--check-tol", f"{tol:.6g}"] if tol else [])
    return run(args, timeout=1800)


def edit_db(src, dst, seconds):
    """A copy of the database src at dst with every F(4x4) timing set to `seconds`; the stored
    outcomes of earlier compiles (the reference table) dropped."""
    shutil.copy(src, dst)
    con = sqlite3.connect(dst)
    n = con.execute("UPDATE measurement SET median_s = ?, min_s = ? WHERE status = 0 AND "
                    "config LIKE ?", (seconds, seconds, f"%{M4}%")).rowcount
    con.execute("DELETE FROM reference")
    con.commit()
    con.close()
    return n


def main():
    binary = os.path.abspath(sys.argv[1])
    import numpy as np
    tmp = tempfile.mkdtemp(prefix="orch-reduced-")
    model = os.path.join(tmp, "stack.onnx")
    write_model(model)
    x = np.random.default_rng(3).uniform(-1, 1, (1, C, H, H)).astype(np.float32)
    xin = os.path.join(tmp, "x.npy")
    np.save(xin, x)
    ref = onnxruntime(model, {"x": x})["y"]
    db = os.path.join(tmp, "cold.db")
    state = {}

    @case("cold_compile_measures_winograd_f4x4")
    def _():
        p = compile_(binary, model, os.path.join(tmp, "cold.orch"), db)
        assert p.returncode == 0, p.stderr[-3000:]
        con = sqlite3.connect(db)
        n = con.execute("SELECT count(*) FROM measurement WHERE status = 0 AND config LIKE ?",
                        (f"%{M4}%",)).fetchone()[0]
        con.close()
        assert n > 0, "no F(4x4) config was measured: m = 4 is not offered"

    @case("plans_with_and_without_f4x4_and_their_errors")
    def _():
        slow, fast = os.path.join(tmp, "slow.db"), os.path.join(tmp, "fast.db")
        assert edit_db(db, slow, 1.0) > 0 and edit_db(db, fast, 1e-6) > 0
        p = compile_(binary, model, os.path.join(tmp, "exact.orch"), slow, explain=True)
        assert p.returncode == 0, p.stderr[-3000:]
        assert M4 not in "".join(l for l in p.stderr.splitlines(True) if " chosen " in l), \
            "the plan holds F(4x4) although its timings are 1 s"
        state["exact_err"] = largest_error(p.stderr)
        p = compile_(binary, model, os.path.join(tmp, "m4.orch"), fast, explain=True)
        assert p.returncode == 0, f"the F(4x4) plan failed the real bound:\n{p.stderr[-3000:]}"
        n = sum(1 for l in p.stderr.splitlines() if " chosen " in l and M4 in l)
        assert n == LAYERS, f"{n} of {LAYERS} convolutions chose F(4x4) with it fastest"
        # At the real bound nothing is left out: the plan passed with its F(4x4) kernels.
        assert not FALLBACK.search(p.stderr) and "reduced exactness" not in p.stdout, p.stdout
        state["m4_err"] = largest_error(p.stderr)
        assert state["m4_err"] > 1.5 * state["exact_err"], \
            f"F(4x4)'s plan error {state['m4_err']:.3g} is not above the exact plan's " \
            f"{state['exact_err']:.3g} (relative to the bound 1e-4): no bound separates them"

    # The bound between the two plans' errors (both measured relative to 1e-4).
    def tol():
        return 1e-4 * (state["exact_err"] * state["m4_err"]) ** 0.5

    forced = os.path.join(tmp, "forced.db")

    @case("plan_missing_the_check_is_solved_again_without_f4x4")
    def _():
        # The F(4x4) compile's database: every config of its chosen kernels measured.
        edit_db(os.path.join(tmp, "fast.db"), forced, 1e-6)
        out = os.path.join(tmp, "fallback.orch")
        p = compile_(binary, model, out, forced, tol=tol())
        assert p.returncode == 0, f"the compile refused the model:\n{p.stderr[-3000:]}"
        m = FALLBACK.search(p.stderr)
        assert m and int(m.group(1)) == LAYERS, p.stderr[-3000:]
        assert "solving again without them" in p.stderr, p.stderr[-3000:]
        assert FALLBACK.search(p.stdout) and "solved again without them" in p.stdout, p.stdout
        state["digest"] = digest(p.stdout)
        assert os.path.exists(out), "no artefact written"
        r = run([binary, "run", out, "-i", f"x={xin}", "-o", os.path.join(tmp, "out")])
        assert r.returncode == 0, r.stdout + r.stderr
        paths = [ln.rsplit(" -> ", 1)[1] for ln in r.stdout.splitlines() if " -> " in ln]
        assert len(paths) == 1, r.stdout
        close_to("y", np.load(paths[0]), ref)

    @case("warm_compile_leaves_f4x4_out_from_the_start")
    def _():
        p = compile_(binary, model, os.path.join(tmp, "warm.orch"), forced, tol=tol())
        assert p.returncode == 0, p.stderr[-3000:]
        assert CACHED in p.stderr and CACHED in p.stdout, p.stdout + p.stderr[-3000:]
        assert not FALLBACK.search(p.stderr), "the warm compile failed the check again"
        assert "0 configs measured" in p.stdout, p.stdout
        assert digest(p.stdout) == state["digest"], "the warm compile chose another plan"

    @case("fallback_plan_is_the_plan_without_f4x4")
    def _():
        # The same timings with F(4x4) slowest: the plan the fallback must have reached.
        slow = os.path.join(tmp, "slow2.db")
        edit_db(forced, slow, 1.0)
        p = compile_(binary, model, os.path.join(tmp, "exact2.orch"), slow, tol=tol())
        assert p.returncode == 0, p.stderr[-3000:]
        assert "0 configs measured" in p.stdout, p.stdout
        assert "reduced exactness" not in p.stdout, p.stdout
        assert digest(p.stdout) == state["digest"], \
            "the plan without F(4x4) is not the plan the same timings give with F(4x4) slowest"

    shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
