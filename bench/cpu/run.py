#!/usr/bin/env python3
"""CPU benchmark: orch against ONNX Runtime (CPU execution provider, graph optimizations
ORT_ENABLE_ALL, sequential execution, the same intra-op thread count), both measured in one run on
the models of gen_bench_models.py (written into --outdir, random weights from fixed seeds).

Per model: orch compiles it cold (a fresh profile database) and warm (again, same database), then
R rounds alternate ONNX Runtime and `orch bench` (each: warm-up, N timed runs, the median), so
machine noise hits both sides alike; each side's latency is the median of its round medians.
ONNX Runtime runs in its own process (time.perf_counter around sess.run, inputs preallocated),
kept alive across the rounds; its memory is the peak resident set over its run minus the resident
set before the session was created. orch's memory is `peak_rss_bytes` from `orch bench --json`,
or the bench process's max RSS where the JSON lacks it. Finally `orch run MODEL.orch` gets ONNX
Runtime's inputs and is checked against its outputs (--atol/--rtol).

Prints one row per model (ratio = ONNX Runtime time / orch time: > 1 means orch is faster), the
geomean ratio last, and writes everything to --json. A model orch cannot compile or bench is a
failure row carrying orch's error message; it is left out of the geomean, never dropped.
Not part of `make test` (its times depend on the machine).

usage: bench/cpu/run.py [--orch build/orch] [--threads N] [--models a,b] [--iters N]
                        [--warmup N] [--rounds R] [--outdir build/bench-cpu] [--json FILE]
"""
import argparse
import json
import math
import os
import re
import shlex
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import gen_bench_models  # noqa: E402
from runtimes import Worker, ort_session, rss_kib, run_cmd, serve  # noqa: E402

INPUT_SEED = 20241122
TIME_LINE = re.compile(r"^time: ([0-9.]+) s\b(.*)$", re.M)


# ---- the ONNX Runtime side: a worker process driven over stdin/stdout ----

def input_shapes(sess, spec):
    """Concrete shapes of the session's inputs: the model's dims, symbolic ones bound by spec
    ('name:AxBxC,...', the --input-shapes syntax orch takes)."""
    bound = {}
    for item in filter(None, spec.split(",")):
        name, dims = item.rsplit(":", 1)
        bound[name] = [int(d) for d in dims.split("x")]
    shapes = {}
    for i in sess.get_inputs():
        if i.name in bound:
            shapes[i.name] = bound[i.name]
        elif all(isinstance(d, int) for d in i.shape):
            shapes[i.name] = list(i.shape)
        else:
            raise SystemExit(f"ort worker: input '{i.name}' has symbolic shape {i.shape}; "
                             f"args.txt must bind it with --input-shapes")
    return shapes


def ort_worker(a):
    """Loads the model once, saves its inputs and reference outputs under a.iodir, then answers
    'run N' with N latencies (ms, one JSON list per line) and 'quit' with its memory figures."""
    import numpy as np
    base = rss_kib("VmRSS")
    sess = ort_session(a.ort_worker, a.threads)
    rng = np.random.default_rng(INPUT_SEED)
    feeds = {}
    for name, shape in input_shapes(sess, a.shapes).items():
        t = next(i.type for i in sess.get_inputs() if i.name == name)
        if t != "tensor(float)":
            raise SystemExit(f"ort worker: input '{name}' is {t}; only float inputs are generated")
        # uniform in [-1, 1), as orch draws its random inputs
        feeds[name] = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
    names = [o.name for o in sess.get_outputs()]
    outs = sess.run(names, feeds)
    os.makedirs(a.iodir, exist_ok=True)
    io = {"inputs": {}, "outputs": {}}
    for kind, items in (("inputs", feeds.items()), ("outputs", zip(names, outs))):
        for k, v in items:
            f = os.path.join(a.iodir, f"{kind[:-1]}_{k.replace('/', '_').replace(':', '_')}.npy")
            np.save(f, v)
            io[kind][k] = f
    serve(lambda: sess.run(names, feeds), a.warmup, io, base)


def ort_side(model, shapes, threads, warmup, iodir):
    """This script's ONNX Runtime worker (it draws the inputs itself): a runtimes.Worker."""
    return Worker([sys.executable, os.path.abspath(__file__), "--ort-worker", model, "--shapes",
                   shapes, "--threads", str(threads), "--warmup", str(warmup), "--iodir", iodir])


# ---- the orch side: its CLI ----

def failure(what, cmd, rc, out, err):
    """A message whose first line names the failure and its likeliest cause (for the table);
    the command and the last lines of its output follow."""
    lines = (err.strip() or out.strip()).splitlines()[-15:]
    cause = next((x for x in lines if re.search(r"error|orch:|failed|unsupported", x, re.I)),
                 lines[-1] if lines else "no output")
    tail = "\n".join(lines)
    return f"{what} failed (exit {rc}): {cause.strip()}\n$ {shlex.join(cmd)}\n{tail}"


def orch_compile(a, model, args, out, db, logname):
    cmd = [a.orch, "compile", model, "-t", "cpu", "-o", out, "--db", db,
           "--threads", str(a.threads)] + args
    rc, so, se, wall, _ = run_cmd(cmd, a.compile_timeout)
    with open(logname, "w") as f:
        f.write(f"$ {shlex.join(cmd)}\n# exit {rc}, {wall:.2f} s\n--- stdout\n{so}--- stderr\n{se}")
    if rc != 0:
        raise RuntimeError(failure("orch compile", cmd, rc, so, se))
    m = TIME_LINE.search(so)
    # the summary lines (kernels, tuning, memory, time) go into the JSON as they are
    summary = [x for x in so.splitlines() if re.match(r"^[a-z ]+: ", x)]
    return {"wall_s": wall, "reported_s": float(m[1]) if m else None,
            "split": m[2].strip() if m else None, "summary": summary}


def orch_bench(a, artefact, jsonfile):
    cmd = [a.orch, "bench", artefact, "--iters", str(a.iters), "--warmup", str(a.warmup),
           "--threads", str(a.threads), "--json", jsonfile]
    rc, so, se, wall, maxrss = run_cmd(cmd, a.bench_timeout)
    if rc != 0:
        raise RuntimeError(failure("orch bench", cmd, rc, so, se))
    try:
        with open(jsonfile) as f:
            j = json.load(f)
        missing = {"min_ms", "median_ms", "p90_ms", "p99_ms", "kernels"} - j.keys()
    except (OSError, ValueError) as e:
        raise RuntimeError(f"orch bench: could not read {jsonfile}: {e}\n{so[-2000:]}")
    if missing:
        raise RuntimeError(f"orch bench: {jsonfile} lacks {', '.join(sorted(missing))}")
    j["process_max_rss_bytes"] = maxrss
    return j


def orch_check(a, artefact, io, logname):
    cmd = [a.orch, "run", artefact]
    for k, f in io["inputs"].items():
        cmd += ["-i", f"{k}={f}"]
    for k, f in io["outputs"].items():
        cmd += ["--expected", f"{k}={f}"]
    cmd += ["--atol", str(a.atol), "--rtol", str(a.rtol), "-o", os.path.dirname(logname)]
    rc, so, se, wall, _ = run_cmd(cmd, a.bench_timeout)
    with open(logname, "w") as f:
        f.write(f"$ {shlex.join(cmd)}\n# exit {rc}, {wall:.2f} s\n--- stdout\n{so}--- stderr\n{se}")
    if rc == 0:
        return "ok", None
    return ("MISMATCH" if rc == 4 else "error"), failure("orch run (check)", cmd, rc, so, se)


# ---- one model ----

def bench_model(a, name):
    d = os.path.join(a.outdir, name)
    model = os.path.join(d, "model.onnx")
    with open(os.path.join(d, "args.txt")) as f:
        args = shlex.split(f.read(), comments=True)
    shapes = args[args.index("--input-shapes") + 1] if "--input-shapes" in args else ""
    artefact = os.path.join(d, "model.orch")
    db = os.path.join(d, "profile.db")
    row = {"model": name, "error": None}
    t0 = time.monotonic()
    log = lambda msg: print(f"[{name}] {msg}", file=sys.stderr, flush=True)

    orch_ok = True
    try:
        for f in (db, db + "-wal", db + "-shm", db + "-journal"):
            if os.path.exists(f):
                os.remove(f)
        log("orch compile (cold, fresh profile database)")
        row["compile_cold"] = orch_compile(a, model, args, artefact, db,
                                           os.path.join(d, "compile-cold.log"))
        log(f"  {row['compile_cold']['wall_s']:.1f} s; orch compile (warm, same database)")
        row["compile_warm"] = orch_compile(a, model, args, artefact, db,
                                           os.path.join(d, "compile-warm.log"))
        log(f"  {row['compile_warm']['wall_s']:.1f} s")
    except RuntimeError as e:
        row["error"], orch_ok = str(e), False
        log("orch compile failed")

    log("ONNX Runtime session")
    ort = ort_side(model, shapes, a.threads, a.warmup, os.path.join(d, "io"))
    ort_rounds, orch_rounds = [], []
    try:
        for r in range(a.rounds):
            t = ort.run(a.iters)
            ort_rounds.append({"median_ms": statistics.median(t), "min_ms": min(t), "times_ms": t})
            if orch_ok:
                try:
                    orch_rounds.append(orch_bench(a, artefact, os.path.join(d, f"bench{r}.json")))
                except RuntimeError as e:
                    row["error"], orch_ok = str(e), False
                    log("orch bench failed")
            log(f"  round {r + 1}/{a.rounds}: ORT {ort_rounds[-1]['median_ms']:.2f} ms"
                + (f", orch {orch_rounds[-1]['median_ms']:.2f} ms" if orch_ok else ""))
    finally:
        row["ort_mem"] = ort.close()
    row["ort_ms"] = statistics.median(x["median_ms"] for x in ort_rounds)
    row["ort_min_ms"] = min(x["min_ms"] for x in ort_rounds)
    row["ort_rounds"] = ort_rounds
    if orch_ok:
        last = orch_rounds[-1]
        row["orch_ms"] = statistics.median(x["median_ms"] for x in orch_rounds)
        row["orch_min_ms"] = min(x["min_ms"] for x in orch_rounds)
        row["orch_p90_ms"] = statistics.median(x["p90_ms"] for x in orch_rounds)
        row["ratio"] = row["ort_ms"] / row["orch_ms"]
        row["ratio_min"] = row["ort_min_ms"] / row["orch_min_ms"]
        row["orch_kernels"] = len(last["kernels"])
        row["orch_peak_rss_bytes"] = last.get("peak_rss_bytes")
        row["orch_arena_bytes"] = last.get("arena_bytes")
        row["orch_process_max_rss_bytes"] = max(x["process_max_rss_bytes"] for x in orch_rounds)
        row["orch_rounds"] = [{k: x[k] for k in ("min_ms", "median_ms", "p90_ms", "p99_ms")}
                              for x in orch_rounds]
        if a.check:
            row["check"], row["check_error"] = orch_check(a, artefact, ort.io,
                                                          os.path.join(d, "check", "check.log"))
            if row["check_error"]:
                log(row["check_error"])
    row["elapsed_s"] = time.monotonic() - t0
    log(f"done in {row['elapsed_s']:.0f} s")
    return row


# ---- the table ----

def mb(n):
    return f"{n / 2**20:.0f}" if n is not None else "-"


def print_table(rows, threads):
    head = (f"{'model':<12} {'ORT ms':>9} {'orch ms':>9} {'ratio':>6} {'cold s':>7} {'warm s':>7} "
            f"{'min ratio':>9} {'ORT MB':>7} {'orch MB':>8} {'kernels':>7}  check")
    print(f"threads {threads}; ratio = ONNX Runtime median / orch median (> 1: orch faster); "
          "min ratio: the same with each side's fastest run;\n"
          "MB = peak RSS (ORT: growth over the session, orch: its bench process); "
          "cold/warm: orch compile wall time with a fresh / the same profile database")
    print(head)
    print("-" * len(head))
    for r in rows:
        ort = f"{r['ort_ms']:>9.2f}" if "ort_ms" in r else f"{'-':>9}"
        ort_mb = mb(r["ort_mem"]["delta_rss_bytes"]) if "ort_mem" in r else "-"
        if "orch_ms" in r:
            orch_mb = mb(r["orch_peak_rss_bytes"] or r["orch_process_max_rss_bytes"])
            print(f"{r['model']:<12} {ort} {r['orch_ms']:>9.2f} {r['ratio']:>6.2f} "
                  f"{r['compile_cold']['wall_s']:>7.1f} {r['compile_warm']['wall_s']:>7.1f} "
                  f"{r['ratio_min']:>9.2f} {ort_mb:>7} {orch_mb:>8} {r['orch_kernels']:>7}  {r.get('check', '-')}")
        else:
            first = r["error"].splitlines()[0] if r.get("error") else "?"
            print(f"{r['model']:<12} {ort} {'FAILED':>9} {'':>6} {'':>7} {'':>7} {'':>9} {ort_mb:>7} "
                  f"{'':>8} {'':>7}  {first}")
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    failed = [r["model"] for r in rows if "ratio" not in r]
    print("-" * len(head))
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    note = f" ({len(failed)} failed: {', '.join(failed)})" if failed else ""
    if geo is not None:
        print(f"geomean ratio over {len(ratios)} models: {geo:.3f}{note}")
    else:
        print(f"geomean ratio: none (orch ran no model){note}")
    return geo


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--orch", default=os.path.join(ROOT, "build", "orch"))
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--models", default=",".join(gen_bench_models.MODELS))
    ap.add_argument("--iters", type=int, default=12, help="timed runs per round and side")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=6, help="ORT/orch alternations per model")
    ap.add_argument("--outdir", default=os.path.join(ROOT, "build", "bench-cpu"))
    ap.add_argument("--json", help="write the results here (default OUTDIR/results.json)")
    ap.add_argument("--no-check", dest="check", action="store_false",
                    help="skip checking orch's outputs against ONNX Runtime's")
    ap.add_argument("--atol", type=float, default=1e-3)
    ap.add_argument("--rtol", type=float, default=1e-3)
    ap.add_argument("--compile-timeout", type=float, default=1200.0)
    ap.add_argument("--bench-timeout", type=float, default=300.0)
    ap.add_argument("--ort-worker", help=argparse.SUPPRESS)
    ap.add_argument("--shapes", default="", help=argparse.SUPPRESS)
    ap.add_argument("--iodir", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.ort_worker:
        return ort_worker(a)
    if a.iters < 1 or a.rounds < 1 or a.threads < 1:
        sys.exit("run.py: --iters, --rounds and --threads must be at least 1")
    a.orch = os.path.abspath(a.orch)
    names = a.models.split(",")
    gen_bench_models.write(a.outdir, names)

    t0 = time.monotonic()
    load0 = os.getloadavg()[0]
    rows = []
    for name in names:
        try:
            rows.append(bench_model(a, name))
        except Exception as e:  # a harness failure on one model still reports the others
            rows.append({"model": name, "error": f"benchmark harness: {type(e).__name__}: {e}"})
    load = (load0, os.getloadavg()[0])
    print(f"\nload average (1 min) {load[0]:.2f} at the start, {load[1]:.2f} at the end: on a shared "
          f"machine above ~{a.threads / 2:g}, other processes take cores from both sides")
    geo = print_table(rows, a.threads)
    for r in rows:
        if r.get("error"):
            print(f"\n{r['model']}: {r['error']}")
        if r.get("check_error"):
            print(f"\n{r['model']}: {r['check_error']}")
    import onnxruntime
    out = a.json or os.path.join(a.outdir, "results.json")
    with open(out, "w") as f:
        json.dump({"threads": a.threads, "iters": a.iters, "warmup": a.warmup, "rounds": a.rounds,
                   "orch": a.orch, "onnxruntime": onnxruntime.__version__,
                   "cpu": cpu_name(), "wall_s": time.monotonic() - t0, "geomean_ratio": geo,
                   "loadavg_start_end": load, "omp_env": {k: v for k, v in os.environ.items()
                                                          if k.startswith(("OMP_", "GOMP_"))},
                   "models": rows}, f, indent=1)
    print(f"\nresults: {out} ({time.monotonic() - t0:.0f} s)")


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return None


if __name__ == "__main__":
    main()
