#!/usr/bin/env python3
"""Runs op cases in the ONNX node-test layout (gen_op_cases.py's output) through `orch run` on the
engine node_tests cannot reach through the C API: `--engine plan` (the cost model's selection run
kernel by kernel, each kernel seeing only what earlier kernels materialised). Each case's stored
outputs are passed as --expected, so orch compares them (NaN equal to NaN, floats within
1e-5 + 1e-3 * |expected|, node_tests' tolerance for the stored outputs). Prints `ok NAME` or
`FAIL NAME: reason` per case (a sanitizer report fails it too) and ends with "N passed,
N failed"; exits 1 on any failure.

usage: run_cases_cli.py ORCH_BINARY CASES_DIR [--engine plan|prims|ops] [--filter SUBSTRING]
"""
import argparse
import os
import re
import subprocess
import sys

import onnx

RTOL, ATOL = 1e-3, 1e-5
COMPARE_LINE = re.compile(r"^\s+(\S+)\s+max abs err (\S+), max rel err (\S+): (ok|MISMATCH)$")
SANITIZER = re.compile(r"runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer")


def names_of(files):
    """The tensor names stored in TensorProto files, in order."""
    out = []
    for f in files:
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        out.append(t.name)
    return out


def run_case(orch, d, engine, timeout):
    """Returns (ok, message)."""
    sets = sorted(s for s in os.listdir(d) if s.startswith("test_data_set_"))
    if not sets:
        return False, "no test_data_set_*"
    for s in sets:
        sd = os.path.join(d, s)
        ins = sorted((f for f in os.listdir(sd) if f.startswith("input_")),
                     key=lambda f: int(f[6:-3]))
        outs = sorted((f for f in os.listdir(sd) if f.startswith("output_")),
                      key=lambda f: int(f[7:-3]))
        ins, outs = [os.path.join(sd, f) for f in ins], [os.path.join(sd, f) for f in outs]
        cmd = [orch, "run", os.path.join(d, "model.onnx"), "--engine", engine,
               "--rtol", str(RTOL), "--atol", str(ATOL)]
        for n, f in zip(names_of(ins), ins):
            cmd += ["-i", f"{n}={f}"]
        out_names = names_of(outs)
        for n, f in zip(out_names, outs):
            cmd += ["--expected", f"{n}={f}"]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, f"timed out after {timeout} s"
        if p.returncode != 0:
            lines = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip()]
            bad = [ln.strip() for ln in lines if "MISMATCH" in ln or "error" in ln]
            return False, f"exit {p.returncode}: {'; '.join((bad or lines)[-3:])}"
        if SANITIZER.search(p.stderr):
            return False, "sanitizer report: " + SANITIZER.search(p.stderr).group(0)
        seen = {m.group(1) for m in map(COMPARE_LINE.match, p.stdout.splitlines()) if m}
        missing = [n for n in out_names if n not in seen]
        if missing:
            return False, f"orch compared no output named {', '.join(missing)}"
    return True, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("orch")
    ap.add_argument("cases")
    ap.add_argument("--engine", choices=("plan", "prims", "ops"), default="plan")
    ap.add_argument("--filter", default="")
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    dirs = sorted(n for n in os.listdir(a.cases)
                  if n.startswith("test_") and a.filter in n
                  and os.path.exists(os.path.join(a.cases, n, "model.onnx")))
    passed = failed = 0
    for n in dirs:
        ok, msg = run_case(a.orch, os.path.join(a.cases, n), a.engine, a.timeout)
        print(f"ok   {n}" if ok else f"FAIL {n}: {msg}")
        passed += ok
        failed += not ok
    if not dirs:
        print(f"FAIL no case in {a.cases} matches '{a.filter}'")
        failed += 1
    print(f"op cases (orch run --engine {a.engine}): {passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
