#!/usr/bin/env python3
"""How a compiled CPU plan and ONNX Runtime slow down when busy neighbours share the cores.

For each neighbour count (busy-loop processes started here) it times ONNX Runtime in this
process and `orch bench --json` on one artefact under each OpenMP wait setting, alternating the
sides, and prints each side's median and its slowdown against the same side with no neighbour.
Run it with the project's venv (onnxruntime):

    .venv/bin/python bench/cpu/contention.py build/orch MODEL.onnx [--artefact M.orch]
        [--input-shapes x:1x3x32x32] [--neighbours 0,1] [--waits default,passive,spin10k]
        [--rounds 3] [--json OUT]

The artefact is compiled first (into a fresh database) unless given. A wait setting is an
environment for orch only: default (libgomp's spin-then-sleep), passive (OMP_WAIT_POLICY), spin
(active), or spin10k / spin1k (GOMP_SPINCOUNT: spin that many turns, then sleep).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

WAITS = {
    "default": {},  # libgomp's: spin 300,000 turns, then sleep
    "passive": {"OMP_WAIT_POLICY": "passive"},
    "spin": {"OMP_WAIT_POLICY": "active"},
    "spin10k": {"GOMP_SPINCOUNT": "10000"},  # spin briefly, then sleep
    "spin1k": {"GOMP_SPINCOUNT": "1000"},
}


def busy_loops(n):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def stop(procs):
    for p in procs:
        p.kill()
        p.wait()


def parse_shapes(spec):
    out = {}
    for item in filter(None, spec.split(",")):
        name, dims = item.rsplit(":", 1)
        out[name] = [int(d) for d in dims.split("x")]
    return out


def ort_times(model, threads, iters, shapes):
    import numpy as np
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.uniform(-1, 1, shapes.get(i.name) or
                                 [d if isinstance(d, int) else 1 for d in i.shape])
             .astype(np.float32) for i in sess.get_inputs()}
    for _ in range(5):
        sess.run(None, feeds)
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def orch_median(orch, artefact, iters, wait):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(WAITS[wait])
    with tempfile.NamedTemporaryFile(suffix=".json") as jf:
        subprocess.run([orch, "bench", artefact, "--iters", str(iters), "--json", jf.name],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        r = json.load(open(jf.name))
    return r["median_ms"], r.get("busy")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("orch")
    ap.add_argument("model")
    ap.add_argument("--artefact")
    ap.add_argument("--neighbours", default="0,1")
    ap.add_argument("--waits", default="default,passive,spin10k")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--input-shapes", default="", help="as orch's --input-shapes, for both sides")
    ap.add_argument("--json")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="orch-contention-")
    art = a.artefact
    if not art:
        art = os.path.join(tmp, "m.orch")
        cmd = [a.orch, "compile", a.model, "-o", art, "--db", os.path.join(tmp, "p.db")]
        if a.input_shapes:
            cmd += ["--input-shapes", a.input_shapes]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    waits = a.waits.split(",")
    shapes = parse_shapes(a.input_shapes)
    res = {}
    for n in sorted({int(x) for x in a.neighbours.split(",")}):
        procs = busy_loops(n)
        time.sleep(0.5)
        try:
            meds = {w: [] for w in ["ort"] + waits}
            for _ in range(a.rounds):
                meds["ort"].append(statistics.median(ort_times(a.model, a.threads, a.iters, shapes)))
                for w in waits:
                    meds[w].append(orch_median(a.orch, art, a.iters, w)[0])
        finally:
            stop(procs)
        res[n] = {k: statistics.median(v) for k, v in meds.items()}
        res[n]["load"] = os.getloadavg()[0]
    base = res.get(0)
    print(f"{os.path.basename(a.model)}, {a.threads} threads, median of {a.rounds} rounds of "
          f"{a.iters} runs; slowdown against no neighbour")
    print(f"{'neighbours':>10} {'load1':>6} " + " ".join(f"{k:>18}" for k in ["ort"] + waits))
    for n, r in res.items():
        cells = []
        for k in ["ort"] + waits:
            sl = f" ({r[k] / base[k]:.2f}x)" if base and n else ""
            cells.append(f"{r[k]:.3f} ms{sl}".rjust(18))
        print(f"{n:>10} {r['load']:>6.2f} " + " ".join(cells))
    if a.json:
        json.dump({"model": a.model, "threads": a.threads, "results": res}, open(a.json, "w"),
                  indent=1)


if __name__ == "__main__":
    main()
