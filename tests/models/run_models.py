#!/usr/bin/env python3
"""Runs every model made by gen_models.py through `orch run` and checks its outputs against the
ONNX Runtime outputs saved next to it. Prints `ok NAME (max abs err E)` or `FAIL NAME: reason`
(with orch's stderr) per model and ends with "N passed, N failed"; exits 1 on any failure.

usage: run_models.py ORCH_BINARY OUTDIR [--engine ops|prims] [--attention-rewrite]
                    [--filter SUBSTRING]
                     [--timeout SECONDS] [-v]

--engine is passed to `orch run` (prims: operator fission, clean-up, the primitive interpreter),
and so is --attention-rewrite (prims only).

Tolerances: |got - expected| <= ATOL + RTOL * |expected| for every element. A model may loosen them
in its args.txt (--rtol/--atol) only next to a '#' comment saying why.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys

RTOL = 1e-4
ATOL = 1e-5
MAX_LOG_LINES = 30  # of orch's output shown under a failure (all of it with -v)

# orch's exit codes (src/cli/main.c)
EXIT_REASONS = {1: "usage error", 2: "invalid model or input", 3: "unsupported",
                4: "mismatch", 5: "runtime error"}
COMPARE_LINE = re.compile(r"^\s+(\S+)\s+max abs err (\S+), max rel err (\S+): (ok|MISMATCH)$")
UNSUPPORTED_LINE = re.compile(r"^\s+(\S+) \(domain '[^']*', opset \d+\) at node ")
SANITIZER = re.compile(r"runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer")


def read_args(path):
    """Extra flags of args.txt; loosened tolerances must carry a comment."""
    if not os.path.exists(path):
        return [], None
    with open(path) as f:
        text = f.read()
    args = shlex.split(text, comments=True)
    if any(a in ("--rtol", "--atol") for a in args) and "#" not in text:
        return args, "args.txt loosens --rtol/--atol without a '#' comment saying why"
    return args, None


def read_io(path):
    inputs, outputs = [], []
    with open(path) as f:
        for line in f:
            if line.strip():
                kind, name, file = line.rstrip("\n").split("\t")
                (inputs if kind == "input" else outputs).append((name, file))
    return inputs, outputs


def error_summary(stderr):
    """orch's error line; for unsupported operators, the distinct op names it lists."""
    lines = stderr.splitlines()
    first = next((i for i, l in enumerate(lines) if l.startswith("orch: error: ")), None)
    if first is None:
        return lines[-1] if lines else "(no message)"
    msg = lines[first][len("orch: error: "):]
    ops = []
    for l in lines[first + 1:]:
        m = UNSUPPORTED_LINE.match(l)
        if m and m.group(1) not in ops:
            ops.append(m.group(1))
    return f"{msg} {', '.join(ops)}" if ops else msg


def run_model(orch, d, timeout, engine, extra=()):
    """Returns (ok, message, orch_output)."""
    io_path = os.path.join(d, "io.txt")
    if not os.path.exists(io_path):
        return False, "no io.txt (regenerate with gen_models.py)", ""
    inputs, outputs = read_io(io_path)
    extra, problem = read_args(os.path.join(d, "args.txt"))
    if problem:
        return False, problem, ""
    cmd = [orch, "run", os.path.join(d, "model.onnx"), "--engine", engine, *extra]
    for name, file in inputs:
        cmd += ["-i", f"{name}={os.path.join(d, file)}"]
    for name, file in outputs:
        cmd += ["--expected", f"{name}={os.path.join(d, file)}"]
    cmd += ["--rtol", str(RTOL), "--atol", str(ATOL)] + extra  # later flags win in orch
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout} s", shlex.join(cmd)
    log = p.stdout + p.stderr
    if p.returncode < 0:
        return False, f"crashed with signal {-p.returncode}", log
    if p.returncode != 0:
        reason = EXIT_REASONS.get(p.returncode, f"exit status {p.returncode}")
        return False, f"{reason} (exit {p.returncode}): {error_summary(p.stderr)}", log
    if SANITIZER.search(p.stderr):
        return False, "sanitizer report", log
    errs = {}
    for line in p.stdout.splitlines():
        m = COMPARE_LINE.match(line)
        if m:
            errs[m.group(1)] = float(m.group(2))
    missing = [name for name, _ in outputs if name not in errs]
    if missing:
        return False, f"orch compared no output named {', '.join(missing)}", log
    return True, f"max abs err {max(errs.values()):.3g}", log


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("orch")
    ap.add_argument("outdir")
    ap.add_argument("--engine", choices=("ops", "prims", "plan"), default="ops",
                    help="orch run's engine (default ops)")
    ap.add_argument("--attention-rewrite", action="store_true",
                    help="pass --attention-rewrite to orch run (with --engine prims)")
    ap.add_argument("--filter", default="", help="run only models whose name contains this")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("-v", action="store_true", help="show orch's output for passing models too")
    a = ap.parse_args()
    if not (os.path.isfile(a.orch) and os.access(a.orch, os.X_OK)):
        sys.exit(f"run_models: {a.orch} is not an executable (build orch first)")
    if not os.path.isdir(a.outdir):
        sys.exit(f"run_models: no folder {a.outdir} (run gen_models.py first)")
    names = sorted(n for n in os.listdir(a.outdir)
                   if a.filter in n and os.path.exists(os.path.join(a.outdir, n, "model.onnx")))
    passed = failed = 0
    for n in names:
        extra = ["--attention-rewrite"] if a.attention_rewrite else []
        ok, msg, log = run_model(a.orch, os.path.join(a.outdir, n), a.timeout, a.engine, extra)
        if ok:
            passed += 1
            print(f"ok {n} ({msg})")
        else:
            failed += 1
            print(f"FAIL {n}: {msg}")
        if log and (not ok or a.v):
            lines = log.rstrip().splitlines()
            if len(lines) > MAX_LOG_LINES and not a.v:
                lines = lines[:MAX_LOG_LINES] + [f"... ({len(lines) - MAX_LOG_LINES} more lines)"]
            print("\n".join("    " + l for l in lines))
        sys.stdout.flush()
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
