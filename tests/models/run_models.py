#!/usr/bin/env python3
"""Runs every model made by gen_models.py through `orch run` and checks its outputs against the
ONNX Runtime outputs saved next to it. Prints `ok NAME (max abs err E)` or `FAIL NAME: reason`
(with orch's stderr) per model and ends with "N passed, N failed"; exits 1 on any failure.

usage: run_models.py ORCH_BINARY OUTDIR [--engine ops|prims|plan|compiled] [--attention-rewrite]
                    [--filter SUBSTRING] [--db FILE] [--top-k K] [--target cpu|cuda]
                    [--keep DIR] [--shard K/N] [--timeout SECONDS] [-v]

--engine is passed to `orch run` (prims: operator fission, clean-up, the primitive interpreter),
and so is --attention-rewrite (prims only). --engine compiled runs `orch compile -t cpu` first
(into a temporary folder, or --keep DIR which keeps the artefacts as DIR/NAME.orch, with the
profile database --db, default a temporary one, and --top-k configs per kernel) and then
`orch run` on the compiled artefact; --target cuda compiles with `-t cuda` instead (NVRTC
kernels checked and timed on the GPU; tests/gpu/run_gpu_tests.sh). --shard K/N runs every N-th
model from the K-th (in name order), so shards can run in parallel.

Tolerances: |got - expected| <= ATOL + RTOL * |expected| for every element. A model may loosen them
in its args.txt (--rtol/--atol) only next to a '#' comment saying why.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

RTOL = 1e-4
ATOL = 1e-5
# --precision fp16 / bf16 (CUDA; half storage): the outputs carry the half types' rounding, a
# few units of 2^-11 (fp16) or 2^-8 (bf16) of each layer's values against ONNX Runtime's float32
# (f_segformer, 16 layers deep, fp16 on an H100: one logit of 32768 off by 0.011, 0.0685 vs 0.0574).
PRECISION_TOL = {"fp32": (RTOL, ATOL), "tf32": (1e-2, 2e-2), "fp16": (1e-2, 2e-2),
                 "bf16": (6e-2, 1e-1)}
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


def split_compile_args(args):
    """args.txt's flags for `orch compile` (shapes, rewrite) and for `orch run` (tolerances)."""
    comp, run = [], []
    i = 0
    while i < len(args):
        a = args[i]
        takes = a in ("--input-shapes", "--rtol", "--atol")
        target = comp if a in ("--input-shapes", "--attention-rewrite") else run
        target.append(a)
        if takes and i + 1 < len(args):
            target.append(args[i + 1])
            i += 1
        i += 1
    return comp, run


def compile_model(orch, d, timeout, flags, comp):
    """Compiles model.onnx into comp['dir'] with the model's flags (args.txt's and the caller's);
    returns (artefact path or None, message, log)."""
    cargs, _ = split_compile_args(list(flags))
    out = os.path.join(comp["dir"], os.path.basename(d) + ".orch")
    cmd = [orch, "compile", os.path.join(d, "model.onnx"), "-t", comp["target"], "-o", out,
           "--db", comp["db"], "--top-k", str(comp["top_k"]), "--quiet", *cargs]
    if comp.get("precision", "fp32") != "fp32":
        cmd += ["--precision", comp["precision"]]
    if comp.get("half_storage"):
        cmd += ["--half-storage"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"compile timed out after {timeout} s", shlex.join(cmd)
    log = p.stdout + p.stderr
    if p.returncode != 0:
        reason = EXIT_REASONS.get(p.returncode, f"exit status {p.returncode}")
        return None, f"compile: {reason} (exit {p.returncode}): {error_summary(p.stderr)}", log
    if SANITIZER.search(p.stderr):
        return None, "sanitizer report during compile", log
    return out, "", log


def run_model(orch, d, timeout, engine, extra=(), comp=None):
    """Returns (ok, message, orch_output)."""
    io_path = os.path.join(d, "io.txt")
    if not os.path.exists(io_path):
        return False, "no io.txt (regenerate with gen_models.py)", ""
    inputs, outputs = read_io(io_path)
    margs, problem = read_args(os.path.join(d, "args.txt"))
    if problem:
        return False, problem, ""
    # Each flag once: --input-shapes given twice would ask for two shape sets.
    extra = margs + list(extra)
    compile_log = ""
    if engine == "compiled":
        artefact, msg, compile_log = compile_model(orch, d, timeout, extra, comp)
        if not artefact:
            return False, msg, compile_log
        _, extra = split_compile_args(extra)
        cmd = [orch, "run", artefact, *extra]
    else:
        cmd = [orch, "run", os.path.join(d, "model.onnx"), "--engine", engine, *extra]
    for name, file in inputs:
        cmd += ["-i", f"{name}={os.path.join(d, file)}"]
    for name, file in outputs:
        cmd += ["--expected", f"{name}={os.path.join(d, file)}"]
    rtol, atol = PRECISION_TOL[(comp or {}).get("precision", "fp32")]
    cmd += ["--rtol", str(rtol), "--atol", str(atol)] + extra  # later flags win in orch
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout} s", shlex.join(cmd)
    log = compile_log + p.stdout + p.stderr
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
    ap.add_argument("--engine", choices=("ops", "prims", "plan", "compiled"), default="ops",
                    help="orch run's engine (default ops); compiled: orch compile -t cpu, then run")
    ap.add_argument("--db", help="profile database for --engine compiled (default: temporary)")
    ap.add_argument("--top-k", type=int, default=2, help="configs per kernel (--engine compiled)")
    ap.add_argument("--target", choices=("cpu", "cuda"), default="cpu",
                    help="orch compile's target (--engine compiled; default cpu)")
    ap.add_argument("--keep", help="--engine compiled: write the artefacts into this folder "
                    "(NAME.orch) and keep them")
    ap.add_argument("--attention-rewrite", action="store_true",
                    help="pass --attention-rewrite to orch run (with --engine prims)")
    ap.add_argument("--precision", choices=tuple(PRECISION_TOL), default="fp32",
                    help="--engine compiled --target cuda: orch compile --precision (checked "
                         "at that precision's tolerance)")
    ap.add_argument("--half-storage", action="store_true",
                    help="with --precision fp16/bf16: orch compile --half-storage")
    ap.add_argument("--filter", default="", help="run only models whose name contains this")
    ap.add_argument("--shard", default="0/1", help="K/N: every N-th model from the K-th")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("-v", action="store_true", help="show orch's output for passing models too")
    a = ap.parse_args()
    if not (os.path.isfile(a.orch) and os.access(a.orch, os.X_OK)):
        sys.exit(f"run_models: {a.orch} is not an executable (build orch first)")
    if not os.path.isdir(a.outdir):
        sys.exit(f"run_models: no folder {a.outdir} (run gen_models.py first)")
    names = sorted(n for n in os.listdir(a.outdir)
                   if a.filter in n and os.path.exists(os.path.join(a.outdir, n, "model.onnx")))
    try:
        k, n = (int(x) for x in a.shard.split("/"))
        assert 0 <= k < n
    except (ValueError, AssertionError):
        sys.exit(f"run_models: --shard {a.shard}: want K/N with 0 <= K < N")
    names = names[k::n]
    passed = failed = 0
    tmp = tempfile.TemporaryDirectory(prefix="orch-models-")
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    comp = {"dir": a.keep or tmp.name, "db": a.db or os.path.join(tmp.name, "profile.db"),
            "top_k": a.top_k, "target": a.target, "precision": a.precision,
            "half_storage": a.half_storage}
    for n in names:
        extra = ["--attention-rewrite"] if a.attention_rewrite else []
        ok, msg, log = run_model(a.orch, os.path.join(a.outdir, n), a.timeout, a.engine, extra,
                                 comp)
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
