#!/usr/bin/env python3
"""The zoo benchmark: every model of bench/zoo/models.py (30+ real models exported by their own
libraries with random weights) through orch on one target, one command, one table.

Per model: build it in PyTorch (fixed seeds; the CPU-sized variant on --target cpu), export ONNX
(torch.onnx.export, opset 17, static shapes, the TorchScript exporter), compile it with
`orch compile` twice (cold: a fresh profile database; warm: the same database again), count the
kernels orch does not generate (an interpreter runs them: read from the compile's report and from
`orch bench --json`), run it with `orch run` and compare every output with PyTorch in float64
(max |orch - ref| / max |ref|), and time orch against the baselines in this process:
  cpu:  at each --threads count (default 1 and every core; orch compiles the model once per
        count, an artefact keeping its threads): ONNX Runtime's CPU execution provider (all graph
        optimisations, sequential, the same intra-op threads), OpenVINO's CPU plugin where it
        imports (the same threads, the latency hint, float32) and PyTorch eager (the same
        threads); --rounds alternations of the runtimes, eager and `orch bench`, each side's time
        the median of its round medians; ratio = ONNX Runtime / orch (> 1: orch faster). ONNX
        Runtime and OpenVINO run in worker processes (bench/cpu/runtimes.py) whose outputs are
        checked against float64 like orch's and whose memory is their growth over the session;
        orch's is `orch bench`'s peak RSS. GFLOP/s: `orch info`'s FLOPs over each side's time,
        against the machine's FMA peak at that thread count (bench/cpu/fma_peak.c, measured once
        per run). --busy N: N spinning processes beside every side while it is timed.
  cuda: bench/gpu/run.py's baselines (eager, torch.compile, torch.compile with CUDA graphs,
        CUDA events, TF32 off on both sides) against `orch bench`'s GPU time; speed-up = the best
        baseline / orch; launches = the plan's kernels.
A model that fails to export, that orch refuses, or whose output is wrong is a row with the
message, never a crash of the script. Prints a closing table and the geomean; writes
OUT/results.json (after every model) and OUT/log.txt; each model's files are in OUT/NAME/.

usage: bench/zoo/run.py --target cpu|cuda [--only a,b] [--skip a,b] [--list] [--out DIR]
                        [--orch PATH] [--threads N[,N...]] [--top-k K] [--full] [--export-only]
                        [--iters N] [--warmup N] [--rounds R] [--baselines LIST]
                        [--busy N] [--compile-timeout S]
       bench/zoo/run.py --markdown OUT/results.json   (the table for the README)
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import traceback
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models as zoo_models  # noqa: E402

sys.path.insert(0, os.path.join(zoo_models.ROOT, "bench", "cpu"))
import runtimes  # noqa: E402  (the CPU runtimes' workers, orch's peak memory, the FMA peak)

ROOT = zoo_models.ROOT
gpu = zoo_models.gpu_bench()  # bench/gpu/run.py: orch_compile, run_baselines, cuda_time_ms, ...

# A model is "wrong" when orch's error against float64 exceeds this and ten times PyTorch's own
# float32 error (some models are ill-conditioned in float32 whoever computes them).
TOL = 1e-3


def compile_report(log_path):
    """The last compile's stdout: the kernels not generated (count and the lines naming them) and,
    on failure, orch's message. Reads both report formats: "N launches (K run by the reference
    interpreter)" and "N launches, K not generated" + a "not generated:" block of indented lines."""
    try:
        with open(log_path) as f:
            text = f.read().rsplit("$ ", 1)[-1]
    except OSError:
        return {"not_generated": None, "lines": [], "error": None}
    n = None
    for pat in (r"not generated: (\d+) kernel", r"launches, (\d+) not generated",
                r"\((\d+) run by the (?:reference |primitive |op )?interpreter",
                r"(\d+) kernels? (?:run )?(?:by|on) the (?:\w+ )?interpreter"):
        m = re.search(pat, text)
        if m:
            n = int(m[1])
            break
    if n is None and re.search(r"not generated: none|launches, all generated", text):
        n = 0
    lines, block = [], False
    for ln in text.splitlines():
        if re.match(r"^not generated:", ln):
            block = True
            continue
        if block and ln.startswith((" ", "\t")):
            lines.append(ln.strip())
            continue
        block = False
    # orch's error: its line, shorn of the "orch compile FILE: FILE:" prefix, and the indented
    # lines under it (one per refused node)
    err, tl = None, text.splitlines()
    for i, ln in enumerate(tl):
        if re.search(r"\berror\b|refus|unsupported", ln, re.I):
            more = []
            for nxt in tl[i + 1:]:
                if not nxt.startswith((" ", "\t")):
                    break
                more.append(nxt.strip())
            msg = re.sub(r"^orch: error: (orch \w+ )?(\S+: )*", "", ln.strip())
            err = msg + (" " + "; ".join(more) if more else "")
    return {"not_generated": n, "lines": lines, "error": err}


def nthreads(t):
    return f"{t} thread{'s' if t != 1 else ''}"


def worst(errs):
    """The largest error, NaN if any is (max() would pass over a NaN)."""
    return float("nan") if any(math.isnan(e) for e in errs) else max(errs)


def flat_outputs(y):
    """A model's outputs as a list of tensors (a tensor, a tuple or a list)."""
    if torch.is_tensor(y):
        return [y]
    out = []
    for t in y:
        out += flat_outputs(t)
    return out


def export(model, xs, v, outputs, path):
    names = [i.name for i in v.inputs]
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's tracer warnings
        kw = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
        torch.onnx.export(model, xs, path, input_names=names, output_names=outputs,
                          opset_version=17, do_constant_folding=True, **kw)
    return names


def time_cpu(fn, iters, warmup):
    """Median ms of iters calls after warmup (wall clock)."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def orch_bench(art, jsonfile, threads=None):
    """`orch bench --json` (threads: the CPU's count) with the bench process's max RSS added."""
    cmd = [ARGS.orch, "bench", art, "--iters", str(ARGS.iters), "--warmup", str(ARGS.warmup),
           "--json", jsonfile]
    if threads:
        cmd += ["--threads", str(threads)]
    rc, out, err, _, maxrss = runtimes.run_cmd(cmd, 1800)
    if rc != 0:
        raise RuntimeError(f"orch bench exit {rc}: {(out + err).strip()[-300:]}")
    with open(jsonfile) as f:
        j = json.load(f)
    j["process_max_rss_bytes"] = maxrss
    return j


def bench_model(name, entry, log):
    a = ARGS
    cpu = a.target == "cpu"
    v = entry.variant("full" if a.full else a.target)
    row = {"model": name, "family": entry.family, "source": entry.source, "inputs": v.describe(),
           "variant": "full" if v is entry.full else "cpu-sized", "status": "?"}
    d = os.path.join(a.out, name)
    os.makedirs(d, exist_ok=True)

    # build and export
    t0 = time.time()
    try:
        model, xs = zoo_models.build(entry, "full" if a.full else a.target)
        onnx_path = os.path.join(d, "model.onnx")
        names = export(model, xs, v, entry.outputs, onnx_path)
    except Exception as exc:
        traceback.print_exc()
        row["status"] = "export failed"
        row["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"
        log(f"  export FAILED: {row['error']}")
        return row
    row["export_s"] = time.time() - t0
    row["onnx_mb"] = os.path.getsize(onnx_path) / 1e6
    feeds = {}
    for n, x in zip(names, xs):
        f = os.path.join(d, f"input_{n}.npy")
        np.save(f, x.numpy())
        feeds[n] = f
    log(f"  exported ({row['onnx_mb']:.1f} MB, {row['export_s']:.1f} s): {v.describe()}")
    if cpu and not a.export_only:
        try:  # orch info's FLOP count of the folded graph: each side's GFLOP/s
            row["flops"] = gpu.floor_mod.info(a.orch, onnx_path)["flops"] or None
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            log(f"  orch info: {exc}")
    if a.export_only:
        row["status"] = "exported"
        return row

    # the judge: PyTorch in float64 (on the GPU for cuda: fast enough for every model)
    dev = torch.device("cpu" if cpu else "cuda")
    with torch.no_grad():
        m64 = model.double().to(dev)
        x64 = tuple((x.double() if x.is_floating_point() else x).to(dev) for x in xs)
        ref64 = [t.cpu().numpy().astype(np.float64) for t in flat_outputs(m64(*x64))]
        del m64, x64
    scales = [float(np.abs(r).max()) or 1.0 for r in ref64]
    if not cpu:
        gpu.set_precision("fp32")  # PyTorch's own error with TF32 off, as it is timed
    with torch.no_grad():  # PyTorch's float32 error, on the target's device
        m32 = model.float().to(dev)
        y32 = [t.cpu().numpy() for t in flat_outputs(m32(*(x.to(dev) for x in xs)))]
    model = m32.cpu()
    row["torch_err"] = max(float(np.abs(y - r).max()) / s for y, r, s in zip(y32, ref64, scales))

    # orch: cold then warm compile (on the CPU at the largest thread count), then once at each
    # other count with the same profile database: an artefact runs with the threads it was
    # compiled for
    counts = sorted(a.thread_counts, reverse=True) if cpu else [None]
    arts = {t: os.path.join(d, f"model.t{t}.orch" if cpu else "model.orch") for t in counts}
    db = os.path.join(d, "profile.db")
    clog = os.path.join(d, "compile.log")
    for f in [db, db + "-wal", db + "-shm", db + "-journal", clog, os.path.join(d, "model.orch")] + list(arts.values()):
        if os.path.exists(f):
            os.remove(f)

    def compile_at(t):
        extra = (["--threads", str(t)] if cpu else []) + (["--top-k", str(a.top_k)] if a.top_k else [])
        return gpu.orch_compile(a.orch, onnx_path, arts[t], db, "fp32", clog, target=a.target,
                                extra=extra, timeout=a.compile_timeout)
    try:
        rc, cold = compile_at(counts[0])
    except subprocess.TimeoutExpired:
        row["status"] = "compile timeout"
        row["error"] = f"orch compile ran past {a.compile_timeout:.0f} s"
        log(f"  {row['error']}")
        return row
    rep = compile_report(clog)
    row["orch_compile_cold_s"] = cold
    if rc != 0:
        row["status"] = "refused"
        row["compile_exit"] = rc
        row["error"] = rep["error"] or gpu.tail(clog, 2).strip()
        log(f"  orch compile FAILED (exit {rc}): {row['error']}")
        return row
    rc2, warm = compile_at(counts[0])
    row["orch_compile_warm_s"] = warm if rc2 == 0 else None
    row["not_generated"] = rep["not_generated"]
    row["not_generated_lines"] = rep["lines"]
    log(f"  orch compile{f' ({nthreads(counts[0])})' if cpu else ''}: cold {cold:.1f} s, warm {warm:.1f} s; "
        f"not generated: {rep['not_generated'] if rep['not_generated'] is not None else '?'}"
        + "".join(f"\n    {ln}" for ln in rep["lines"][:8]))
    if cpu:
        row["orch_compile_s_by_threads"] = {str(counts[0]): cold}
    for t in counts[1:]:
        try:
            rc, secs = compile_at(t)
        except subprocess.TimeoutExpired:
            rc, secs = "timeout", a.compile_timeout
        if rc != 0:
            row["status"] = "refused"
            row["compile_exit"] = rc
            row["error"] = (f"at {t} threads: " + (compile_report(clog)["error"]
                                                   or gpu.tail(clog, 2).strip()))
            log(f"  orch compile FAILED (exit {rc}): {row['error']}")
            return row
        row["orch_compile_s_by_threads"][str(t)] = secs
        log(f"  orch compile ({nthreads(t)}): {secs:.1f} s")

    # orch run against float64, each artefact at its threads
    def errors(files, what):
        """max |y - ref| / max |ref| per output, or (None, message) on a missing or misshapen one."""
        errs = []
        for i, (oname, r, s) in enumerate(zip(entry.outputs, ref64, scales)):
            got = files(i, oname)
            if not got or not os.path.exists(got):
                return None, f"{what}: no output {oname}"
            y = np.load(got).astype(np.float64)
            if y.shape != r.shape:
                return None, f"{what}: output {oname}: shape {list(y.shape)}, PyTorch's {list(r.shape)}"
            errs.append(float(np.abs(y - r).max()) / s)
        return worst(errs), None

    errs = []
    for t in counts:
        outdir = os.path.join(d, "out" if t is None else f"out.t{t}")
        shutil.rmtree(outdir, ignore_errors=True)
        cmd = [a.orch, "run", arts[t], "-o", outdir] + sum((["-i", f"{n}={f}"] for n, f in feeds.items()), [])
        if cpu:
            cmd += ["--threads", str(t)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if p.returncode != 0 or not all(os.path.exists(os.path.join(outdir, o.replace("/", "_") + ".npy"))
                                        for o in entry.outputs):
            row["status"] = "run failed"
            row["error"] = f"orch run exit {p.returncode}: {(p.stdout + p.stderr).strip()[-300:]}"
            log(f"  {row['error']}")
            return row
        err, msg = errors(lambda i, o: os.path.join(outdir, o.replace("/", "_") + ".npy"), "orch run")
        if msg:
            row["status"] = "wrong"
            row["error"] = msg + (f" ({nthreads(t)})" if cpu else "")
            log(f"  {row['error']}")
            return row
        errs.append(err)
    row["orch_err"] = worst(errs)
    ok = math.isfinite(row["orch_err"]) and row["orch_err"] <= max(TOL, 10 * row["torch_err"])
    row["status"] = "ok" if ok else "wrong"
    log(f"  error vs float64: orch {row['orch_err']:.1e}, PyTorch fp32 {row['torch_err']:.1e}")

    # latency
    try:
        if cpu:
            time_cpu_side(row, model, xs, onnx_path, feeds, arts, d, log, errors)
        else:
            time_cuda_side(row, model, xs, arts[None], d, log)
    except Exception as exc:
        traceback.print_exc()
        row["timing_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        log(f"  timing FAILED: {row['timing_error']}")
    return row


def bench_json_fields(row, bj):
    row["orch_kernels"] = len(bj.get("kernels", []))
    # the compile's prediction (its kernels' lab timings summed): run / predicted says how far the
    # lab's conditions (each kernel alone, warm caches) are from the whole plan's
    if bj.get("predicted_ms"):
        row["predicted_ms"] = bj["predicted_ms"]
    # the plan's kernels an interpreter runs, by the names the sessions give them
    # ("interp:KIND#ID" for the primitive interpreter, "opaque:OP" for the op interpreter)
    interp = [k for k in bj.get("kernels", []) if k["name"].startswith(("interp:", "opaque:"))]
    row["interpreted_kernels"] = [f"{k['name']} ({k['nodes'][:120]}; {k['median_ms']:.3f} ms)"
                                  for k in interp]
    if row.get("not_generated") and not row.get("not_generated_lines"):
        row["not_generated_lines"] = row["interpreted_kernels"]
    ng = bj.get("not_generated")
    if isinstance(ng, list):  # orch bench --json lists the groups of kernels not generated
        row["not_generated_bench"] = sum(g.get("kernels", 0) for g in ng)
        row["not_generated_ops"] = sorted({g.get("ops", "?") for g in ng})


class BusyNeighbours:
    """--busy N: N processes spinning on the CPU while the sides are timed (a shared machine: each
    side meets the same competition, so the ratio says who degrades less)."""

    def __init__(self, n):
        self.n, self.procs = n, []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                      for _ in range(self.n)]
        if self.n:
            time.sleep(0.5)  # past the sessions' contention probe interval
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def gflops(row, ms, t):
    """(GFLOP/s, % of the FMA peak at t threads) of a side that took ms, or (None, None)."""
    if not row.get("flops") or not ms:
        return None, None
    g = row["flops"] / (ms * 1e-3) / 1e9
    pk = (ARGS.fma_peak or {}).get(t)
    return g, (100.0 * g / pk if pk else None)


def time_cpu_side(row, model, xs, onnx_path, feeds, arts, d, log, errors):
    """Every side at every thread count in --rounds alternations; per count in row["by_threads"],
    the largest count's figures also at the row's top level (orch_ms, baselines, ratio)."""
    a = ARGS
    counts = sorted(arts)
    tol = max(TOL, 10 * row["torch_err"])
    # the runtimes' workers, one per runtime and count, alive across the rounds (their outputs on
    # the model's inputs are judged against float64 as orch's are)
    workers = {}
    for rt in [b for b in a.baselines if b in RUNTIMES]:
        for t in counts:
            try:
                w = runtimes.Worker.runtime(rt, onnx_path, t, a.warmup,
                                            os.path.join(d, f"{rt}.t{t}"), feeds)
            except Exception as exc:  # the runtime refuses the model: a message, not a crash
                row[f"{rt}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                log(f"  {RUNTIMES[rt]} ({nthreads(t)}) FAILED: {row[f'{rt}_error']}")
                break
            workers[rt, t] = w
            err, msg = errors(lambda i, o: worker_output(w, i, o), RUNTIMES[rt])
            if err is not None:
                row[f"{rt}_err"] = worst([row.get(f"{rt}_err", 0.0), err])
            if msg:
                row[f"{rt}_error"] = msg
            elif not err <= tol:  # NaN too
                row[f"{rt}_error"] = f"output off float64 by {err:.1e} (tolerance {tol:.1e})"
    rounds = {t: {k: [] for k in ["orch"] + a.baselines} for t in counts}
    mem = {t: {} for t in counts}
    try:
        with torch.inference_mode(), BusyNeighbours(a.busy):
            for r in range(a.rounds):
                for t in counts:
                    for rt in RUNTIMES:
                        w = workers.get((rt, t))
                        if w is None:
                            continue
                        try:
                            w.run(a.warmup)
                            rounds[t][rt].append(statistics.median(w.run(a.iters)))
                        except RuntimeError as exc:  # the worker died: that runtime's row ends
                            row[f"{rt}_error"] = f"{RUNTIMES[rt]} worker ({nthreads(t)}): {exc}"
                            log(f"  {row[f'{rt}_error']}")
                            workers.pop((rt, t)).kill()
                    if "eager" in a.baselines:
                        torch.set_num_threads(t)
                        rounds[t]["eager"].append(time_cpu(lambda: model(*xs), a.iters, a.warmup))
                    bj = orch_bench(arts[t], os.path.join(d, f"bench.t{t}.r{r}.json"), t)
                    rounds[t]["orch"].append(bj["median_ms"])
                    mem[t]["orch"] = max(mem[t].get("orch", 0), bj.get("peak_rss_bytes")
                                         or bj["process_max_rss_bytes"])
                    if t == counts[-1]:
                        last = bj
    finally:
        for (rt, t), w in workers.items():
            try:
                m = w.close()
            except (RuntimeError, OSError, ValueError):
                m = None
            if m:
                mem[t][rt] = m["delta_rss_bytes"]
            w.kill()
    bench_json_fields(row, last)
    # the 1-minute load average as the sides were timed: above the thread count, other
    # processes took cores from the sides (the row's ratio is then only indicative)
    row["load1"] = os.getloadavg()[0]
    row["by_threads"] = {}
    for t in counts:
        g = {"orch_ms": statistics.median(rounds[t]["orch"]),
             "baselines": {k: statistics.median(v) for k, v in rounds[t].items() if v and k != "orch"},
             "rounds_ms": rounds[t], "peak_mem_bytes": mem[t]}
        if "ort" in g["baselines"]:
            g["ratio"] = g["baselines"]["ort"] / g["orch_ms"]
        if "openvino" in g["baselines"]:
            g["openvino_ratio"] = g["baselines"]["openvino"] / g["orch_ms"]
        for side, ms in [("orch", g["orch_ms"])] + list(g["baselines"].items()):
            gf, pct = gflops(row, ms, t)
            if gf is not None:
                g[f"{side}_gflops"] = gf
                g[f"{side}_pct_peak"] = pct
        row["by_threads"][str(t)] = g
        log(f"  {nthreads(t)}, ms: orch {g['orch_ms']:.3f}, "
            + ", ".join(f"{k} {v:.3f}" for k, v in g["baselines"].items())
            + (f"; ONNX Runtime / orch {g['ratio']:.2f}x" if "ratio" in g else "")
            + (f"; orch {g['orch_gflops']:.1f} GFLOP/s" if "orch_gflops" in g else "")
            + (f" ({g['orch_pct_peak']:.0f}% of peak)" if g.get("orch_pct_peak") else "")
            + "; peak MB " + ", ".join(f"{k} {v / 2**20:.0f}" for k, v in mem[t].items()))
    top = row["by_threads"][str(counts[-1])]
    row["orch_ms"], row["baselines"], row["rounds_ms"] = top["orch_ms"], top["baselines"], top["rounds_ms"]
    if "ratio" in top:
        row["ratio"] = top["ratio"]
    log(f"  (load {row['load1']:.1f})")


RUNTIMES = {"ort": "ONNX Runtime", "openvino": "OpenVINO"}


def worker_output(w, i, oname):
    """A worker's .npy of the model's output oname (the i-th): by name, else by position (a runtime
    may rename the outputs it keeps in the exported order)."""
    files, order = w.io["outputs"], w.io.get("output_order", [])
    return files.get(oname) or (files.get(order[i]) if i < len(order) else None)


def time_cuda_side(row, model, xs, art, d, log):
    a = ARGS
    gpu.set_precision("fp32")
    bj = orch_bench(art, os.path.join(d, "bench.json"))
    bench_json_fields(row, bj)
    row["orch_ms"] = bj.get("device_median_ms") or bj["median_ms"]
    row["orch_host_ms"] = bj["median_ms"]
    log(f"    orch     {row['orch_ms']:9.4f} ms ({row['orch_kernels']} launches)")
    dev = torch.device("cuda")
    m = model.to(dev)
    xd = tuple(x.to(dev) for x in xs)
    times, errs, first = gpu.run_baselines(m, xd, a.baselines, a.iters, a.warmup, log)
    row["baselines"] = {k: t for k, t in times.items() if t}
    row["baseline_errors"] = errs
    row["baseline_first_call_s"] = first
    if row["baselines"]:
        row["best_baseline_ms"] = min(row["baselines"].values())
        row["ratio"] = row["best_baseline_ms"] / row["orch_ms"]
    model.cpu()
    del m, xd
    torch.cuda.empty_cache()  # the next model's baselines start from an empty caching allocator


def fmt(v, w, p=3):
    return f"{v:{w}.{p}f}" if isinstance(v, (int, float)) else f"{'-':>{w}}"


def lead_cells(r, model_w, status_w, ng_w, cut=True):
    """The columns both tables start with: model, status, kernels not generated, error against
    float64, cold and warm compile seconds (model and status cut to their widths where cut)."""
    ng = r.get("not_generated")
    model, status = (r["model"][:model_w], r["status"][:status_w]) if cut else (r["model"], r["status"])
    return (f"{model:{model_w}}{status:>{status_w}}"
            f"{ng if ng is not None else '-':>{ng_w}}"
            + (f"{r['orch_err']:9.1e}" if "orch_err" in r else f"{'-':>9}")
            + fmt(r.get("orch_compile_cold_s"), 7, 1) + fmt(r.get("orch_compile_warm_s"), 7, 1))


def run_over_predicted(r, w):
    """orch's measured time over the plan's predicted time, w wide."""
    if r.get("orch_ms") and r.get("predicted_ms"):
        return f"{r['orch_ms'] / r['predicted_ms']:{w - 1}.2f}x"
    return f"{'-':>{w}}"


def log_counts(rows, log):
    """How many models compile, are correct and have every kernel generated."""
    ok = sum(r["status"] == "ok" for r in rows)
    zero = sum(r["status"] == "ok" and r.get("not_generated") == 0 for r in rows)
    log(f"{ok} of {len(rows)} models compile and are correct; {zero} of them with every kernel "
        f"generated")


def cpu_groups(rows):
    """The thread counts and the baselines the rows have, in the run's order."""
    counts = sorted({int(t) for r in rows for t in r.get("by_threads", {})})
    bl = [b for b in ["ort", "openvino", "eager"]
          if any(b in g.get("baselines", {}) for r in rows for g in r.get("by_threads", {}).values())]
    return counts, bl


def print_cpu_table(rows, log):
    """The CPU table: one column group per thread count (each side's ms, ONNX Runtime / orch,
    each runtime's % of the FMA peak at that count), then each side's peak memory at the largest
    count."""
    counts, bl = cpu_groups(rows)
    pk = ARGS.fma_peak or {}
    log(f"\ncpu: threads {', '.join(map(str, counts))}; ratio = ONNX Runtime / orch (> 1: orch "
        f"faster); %pk = GFLOP/s (orch info's FLOPs / time) over the measured FMA peak ("
        + ", ".join(f"{nthreads(t)} {pk[t]:.0f} GFLOP/s" for t in counts if t in pk)
        + f"); MB = peak memory at {nthreads(counts[-1]) if counts else '-'} (orch: its bench "
        f"process's peak RSS; runtimes: growth over the session)")
    short = {"orch": "orch", "ort": "ort", "openvino": "ov", "eager": "eager"}
    rt = [b for b in bl if b != "eager"]
    group = (f"{'orch':>8}" + "".join(f"{short[b]:>8}" for b in bl) + f"{'ratio':>7}"
             + "".join(f"{short[s] + '%':>6}" for s in ["orch"] + rt))
    head = (f"{'model':22}{'status':>8}{'ng':>3}{'orch err':>9}{'cold s':>7}{'warm s':>7}{'GFLOP':>7}"
            + f"{'run/pd':>7}" + "".join(f" |{f'{t}t ms':^{len(group)}}" for t in counts)
            + " |" + "".join(f"{short[s] + ' MB':>8}" for s in ["orch"] + rt))
    sub = " " * 70 + "".join(" |" + group for _ in counts) + " |"
    log(head)
    log(sub)
    log("-" * len(head))
    for r in rows:
        line = (lead_cells(r, 22, 8, 3)
                + fmt(r["flops"] / 1e9 if r.get("flops") else None, 7, 3)
                + run_over_predicted(r, 7))
        for t in counts:
            g = r.get("by_threads", {}).get(str(t), {})
            line += (" |" + fmt(g.get("orch_ms"), 8)
                     + "".join(fmt(g.get("baselines", {}).get(b), 8) for b in bl)
                     + (f"{g['ratio']:6.2f}x" if "ratio" in g else f"{'-':>7}")
                     + "".join(fmt(g.get(f"{s}_pct_peak"), 6, 0) for s in ["orch"] + rt))
        m = r.get("by_threads", {}).get(str(counts[-1]), {}).get("peak_mem_bytes", {}) if counts else {}
        line += " |" + "".join(fmt(m[s] / 2**20 if m.get(s) else None, 8, 0) for s in ["orch"] + rt)
        log(line)
    log("-" * len(head))
    log_counts(rows, log)
    for t in counts:
        for key, name in (("ratio", "ONNX Runtime / orch"), ("openvino_ratio", "OpenVINO / orch")):
            rs = [r["by_threads"][str(t)][key] for r in rows
                  if r.get("by_threads", {}).get(str(t), {}).get(key)]
            if rs:
                g = math.exp(sum(map(math.log, rs)) / len(rs))
                log(f"{nthreads(t)}: geomean {name} over {len(rs)} models: "
                    f"{g:.2f}x; >= 0.8x on {sum(x >= 0.8 for x in rs)} of {len(rs)}")
    for r in rows:
        for k in ("ort_error", "openvino_error"):
            if r.get(k):
                log(f"  {r['model']}: {RUNTIMES[k[:-6]]}: {r[k]}")
    problems(rows, log)


def problems(rows, log):
    """The rows' errors and kernels not generated, under the table."""
    for r in rows:
        if r.get("error"):
            log(f"  {r['model']}: {r['status']}: {r['error']}")
        elif r.get("not_generated"):
            log(f"  {r['model']}: {r['not_generated']} kernel(s) not generated"
                + "".join(f"\n      {ln}" for ln in r.get("not_generated_lines", [])[:12]))


def print_table(rows, log):
    if ARGS.target == "cpu":
        return print_cpu_table(rows, log)
    bl = ARGS.baselines
    log(f"\n{ARGS.target}: fp32, TF32 off; speed-up = best baseline / orch")
    head = (f"{'model':24}{'status':>15}{'not gen':>8}{'orch err':>9}{'cold s':>7}{'warm s':>7}"
            f"{'orch ms':>10}{'run/pred':>9}" + "".join(f"{b + ' ms':>11}" for b in bl)
            + f"{'speed-up':>9}{'launches':>9}")
    log(head)
    log("-" * len(head))
    for r in rows:
        line = (lead_cells(r, 24, 15, 8, cut=False)
                + fmt(r.get("orch_ms"), 10)
                + run_over_predicted(r, 9)
                + "".join(fmt(r.get("baselines", {}).get(b), 11) for b in bl)
                + (f"{r['ratio']:8.2f}x" if "ratio" in r else f"{'-':>9}")
                + f"{r.get('orch_kernels', '-'):>9}")
        log(line)
    log("-" * len(head))
    rs = [r["ratio"] for r in rows if r.get("ratio")]
    log_counts(rows, log)
    if rs:
        g = math.exp(sum(map(math.log, rs)) / len(rs))
        log(f"geomean speed-up over {len(rs)} models: {g:.2f}x; >= 1.0x on {sum(x >= 1.0 for x in rs)} "
            f"of {len(rs)}")
    problems(rows, log)


def write_results(path, meta, rows, names, order):
    """results.json: this run's rows, then the rows of an earlier run into the same folder for
    the models this run did not measure (a run with --only adds to a table, each row keeping its
    run's start time in run_started)."""
    kept = []
    try:
        with open(path) as f:
            old = json.load(f)
        if old.get("target") == meta["target"]:
            kept = [r for r in old.get("models", []) if r["model"] not in names]
    except (OSError, ValueError):
        pass
    with open(path + ".tmp", "w") as f:
        all_rows = sorted(rows + kept, key=lambda r: order.index(r["model"])
                          if r["model"] in order else len(order))
        json.dump({**meta, "models": all_rows}, f, indent=1)
    os.replace(path + ".tmp", path)


def markdown_cpu_threads(res):
    """A CPU results.json of several thread counts as Markdown: per count each side's ms, ONNX
    Runtime / orch and each side's % of the FMA peak; peak memory at the largest count."""
    rows = res["models"]
    counts, bl = cpu_groups(rows)
    rt = [b for b in bl if b != "eager"]
    name = {"ort": "ORT", "openvino": "OpenVINO", "eager": "eager", "orch": "orch"}
    pk = res.get("fma_peak_gflops") or {}
    print(f"{res['machine']}; torch {res['torch']}, onnxruntime {res['onnxruntime']}"
          + (f", openvino {res['openvino']}" if res.get("openvino") else "")
          + f"; threads {', '.join(map(str, counts))}; FMA peak "
          + (", ".join(f"{pk[str(t)]:.0f} GFLOP/s at {t}" for t in counts if str(t) in pk) or "-")
          + f"; orch compile --top-k {res['top_k'] or 'default'}; {res['started']}; "
          + "".join(f"{k}={v}; " for k, v in res.get("omp_env", {}).items()) + "load average "
          + " -> ".join(f"{x:.1f}" for x in res.get("loadavg_start_end", [])) + "\n")
    cols = ["model", "input", "status", "not generated", "err vs f64", "GFLOP", "cold s", "warm s"]
    for t in counts:
        cols += [f"{t}t {name[s]} ms" for s in ["orch"] + bl] + [f"{t}t ORT / orch"]
        cols += [f"{t}t {name[s]} % peak" for s in ["orch"] + rt]
    cols += [f"{name[s]} MB" for s in ["orch"] + rt] + ["load"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))

    def num(v, p):
        return f"{v:.{p}f}" if isinstance(v, (int, float)) else "-"
    for r in rows:
        st = (r["status"] + (f": {r['error']}" if r.get("error") else "")).replace("|", "\\|")
        ng = r.get("not_generated")
        cells = [r["model"], r.get("inputs", ""), st, "-" if ng is None else str(ng),
                 f"{r['orch_err']:.1e}" if "orch_err" in r else "-",
                 num(r["flops"] / 1e9 if r.get("flops") else None, 2),
                 num(r.get("orch_compile_cold_s"), 1), num(r.get("orch_compile_warm_s"), 1)]
        for t in counts:
            g = r.get("by_threads", {}).get(str(t), {})
            cells += [num(g.get("orch_ms"), 2)] + [num(g.get("baselines", {}).get(b), 2) for b in bl]
            cells += [f"{g['ratio']:.2f}x" if g.get("ratio") else "-"]
            cells += [num(g.get(f"{s}_pct_peak"), 0) for s in ["orch"] + rt]
        m = r.get("by_threads", {}).get(str(counts[-1]), {}).get("peak_mem_bytes", {}) if counts else {}
        cells += [num(m[s] / 2**20 if m.get(s) else None, 0) for s in ["orch"] + rt]
        cells += [num(r.get("load1"), 1)]
        print("| " + " | ".join(cells) + " |")
    geo = []
    for t in counts:
        for key, what in (("ratio", "ORT / orch"), ("openvino_ratio", "OpenVINO / orch")):
            rs = [r["by_threads"][str(t)][key] for r in rows
                  if r.get("by_threads", {}).get(str(t), {}).get(key)]
            if rs:
                geo.append(f"{nthreads(t)}: geomean {what} over {len(rs)} models "
                           f"{math.exp(sum(map(math.log, rs)) / len(rs)):.2f}x")
    if geo:
        print("\n" + "; ".join(geo) + ".")


def markdown(path):
    """results.json as the README's Markdown table (the numbers as measured, nothing else)."""
    with open(path) as f:
        res = json.load(f)
    cpu = res["target"] == "cpu"
    if cpu and res.get("thread_counts"):
        return markdown_cpu_threads(res)
    bl = sorted({b for r in res["models"] for b in r.get("baselines", {})},
                key=lambda b: ["ort", "eager", "compile", "graphs"].index(b)
                if b in ("ort", "eager", "compile", "graphs") else 9)
    print(f"{res['machine']}; torch {res['torch']}, onnxruntime {res['onnxruntime']}; "
          + (f"{res['threads']} threads; " if cpu else "")
          + f"orch compile --top-k {res['top_k'] or 'default'}; {res['started']}; "
          + "".join(f"{k}={v}; " for k, v in res.get("omp_env", {}).items()) + "load average "
          + " -> ".join(f"{x:.1f}" for x in res.get("loadavg_start_end", [])) + "\n")
    print("| model | family | input | status | not generated | err vs f64 | cold s | warm s | orch ms | "
          + "run / predicted | "
          + " | ".join(f"{b} ms" for b in bl)
          + (" | ORT / orch | load |" if cpu else " | speed-up | launches |"))
    print("|" + "---|" * (10 + len(bl) + 2))
    for r in res["models"]:
        def f(k, p=1, d=None):
            v = (d or r).get(k)
            return f"{v:.{p}f}" if isinstance(v, (int, float)) else "-"
        st = r["status"] + (f": {r['error']}" if r.get("error") else "")
        st = st.replace("|", "\\|")
        ng = r.get("not_generated")
        cells = [r["model"], r.get("family", ""), r.get("inputs", ""), st,
                 "-" if ng is None else str(ng),
                 f"{r['orch_err']:.1e}" if "orch_err" in r else "-", f("orch_compile_cold_s"),
                 f("orch_compile_warm_s"), f("orch_ms", 2 if cpu else 4),
                 f"{r['orch_ms'] / r['predicted_ms']:.2f}x" if r.get("orch_ms") and r.get("predicted_ms")
                 else "-"]
        cells += [f(b, 2 if cpu else 4, r.get("baselines", {})) for b in bl]
        cells += [f"{r['ratio']:.2f}x" if r.get("ratio") else "-"]
        cells += [f("load1") if cpu else str(r.get("orch_kernels", "-"))]
        print("| " + " | ".join(cells) + " |")
    rs = [r["ratio"] for r in res["models"] if r.get("ratio")]
    if rs:
        print(f"\ngeomean {'ORT / orch' if cpu else 'speed-up'} over {len(rs)} models: "
              f"{math.exp(sum(map(math.log, rs)) / len(rs)):.2f}x")


def machine():
    if ARGS.target == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    try:
        with open("/proc/cpuinfo") as f:
            name = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        name = "?"
    return f"{name}, {os.cpu_count()} cores"


ARGS = None


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", choices=["cpu", "cuda"],
                    required=not {"--list", "--markdown"} & set(sys.argv))
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--skip", default="", help="comma-separated model names to leave out")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    ap.add_argument("--out", default=None, help="default build/bench-zoo-TARGET")
    ap.add_argument("--orch", default=os.environ.get("ORCH", os.path.join(ROOT, "build", "orch")))
    ap.add_argument("--threads", default=None,
                    help="cpu: thread counts, comma-separated, of orch, the runtimes and PyTorch "
                         "alike (default: 1 and every core this process may use)")
    ap.add_argument("--top-k", type=int, default=None,
                    help="orch compile --top-k (configs tuned per kernel; default orch's)")
    ap.add_argument("--full", action="store_true", help="cpu: the full models, not the CPU-sized")
    ap.add_argument("--export-only", action="store_true", help="build and export, no orch")
    ap.add_argument("--iters", type=int, default=None, help="timed runs (cpu 10, cuda 200)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up runs (cpu 2, cuda 20)")
    ap.add_argument("--rounds", type=int, default=3, help="cpu: alternations of the sides")
    ap.add_argument("--baselines", default=None,
                    help="cpu: ort,openvino,eager (default; openvino where it imports); "
                         "cuda: eager,compile,graphs (default)")
    ap.add_argument("--busy", type=int, default=0,
                    help="cpu: processes spinning beside the timed sides (a shared machine)")
    ap.add_argument("--compile-timeout", type=float, default=3600.0)
    ap.add_argument("--markdown", metavar="RESULTS_JSON",
                    help="print a results.json as a Markdown table (for the README) and exit")
    a = ap.parse_args()
    ARGS = a
    if a.markdown:
        markdown(a.markdown)
        return 0
    zoo = zoo_models.zoo()
    if a.list:
        print(f"{len(zoo)} models")
        for n, e in zoo.items():
            cpu = e.cpu.describe() if e.cpu else "same"
            print(f"{n:24} {e.family:20} full {e.full.describe():22} cpu {cpu:22} {e.source}"
                  + (f" ({e.note})" if e.note else ""))
        return 0
    only = [n for n in a.only.split(",") if n]
    skip = [n for n in a.skip.split(",") if n]
    unknown = [n for n in only + skip if n not in zoo]
    if unknown:
        print(f"unknown model(s): {', '.join(unknown)} (--list shows the zoo)", file=sys.stderr)
        return 1
    # --only keeps its own order (the models that matter most first when time is short)
    names = [n for n in (only or zoo) if n not in skip]
    cpu = a.target == "cpu"
    a.iters = a.iters or (10 if cpu else 200)
    a.warmup = a.warmup if a.warmup is not None else (2 if cpu else 20)
    ovv = runtimes.openvino_available() if cpu else None
    a.baselines = [b for b in (a.baselines or ("ort,openvino,eager" if ovv else "ort,eager") if cpu
                               else "eager,compile,graphs").split(",") if b]
    a.fma_peak = None
    if cpu:
        cores = len(os.sched_getaffinity(0))
        try:
            a.thread_counts = sorted({int(t) for t in (a.threads or f"1,{cores}").split(",") if t})
        except ValueError:
            a.thread_counts = []
        if not a.thread_counts or min(a.thread_counts) < 1:
            print(f"--threads {a.threads}: thread counts are integers >= 1, comma-separated",
                  file=sys.stderr)
            return 1
        a.threads = a.thread_counts[-1]
        bad = [b for b in a.baselines if b not in ("ort", "openvino", "eager")]
        if bad or ("openvino" in a.baselines and not ovv):
            print(f"--baselines: {', '.join(bad) or 'openvino'} not available on cpu (ort, eager"
                  f"{', openvino' if ovv else '; openvino does not import'})", file=sys.stderr)
            return 1
    a.out = a.out or os.path.join(ROOT, "build", f"bench-zoo-{a.target}")
    if not a.export_only:
        if not os.path.exists(a.orch):
            print(f"no orch at {a.orch} (--orch PATH; make, or scripts/bundle_device.sh)", file=sys.stderr)
            return 1
        a.orch = os.path.abspath(a.orch)
        if not cpu and not torch.cuda.is_available():
            print("--target cuda needs a CUDA device", file=sys.stderr)
            return 3
    os.makedirs(a.out, exist_ok=True)
    torch.backends.mha.set_fastpath_enabled(False)  # the fused MHA path has no ONNX export
    torch.set_num_threads(a.threads) if cpu else None
    logf = open(os.path.join(a.out, "log.txt"), "a")

    def log(s):
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    if cpu and not a.export_only:
        try:  # once per run: each side's GFLOP/s is set against it
            a.fma_peak = runtimes.fma_peak(a.thread_counts, os.path.join(a.out, "fma_peak"))
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"FMA peak not measured ({exc}): no % of peak", file=sys.stderr)
    load0 = os.getloadavg()[0]
    try:
        import onnxruntime
        ortv = onnxruntime.__version__
    except ImportError:
        ortv = None
    meta = {"target": a.target, "machine": machine(), "threads": a.threads if cpu else None,
            "thread_counts": a.thread_counts if cpu else None, "openvino": ovv,
            # GFLOP/s of fma_peak.c per thread count (JSON keys are strings)
            "fma_peak_gflops": {str(t): g for t, g in (a.fma_peak or {}).items()} or None,
            "torch": torch.__version__, "onnxruntime": ortv, "orch": a.orch, "top_k": a.top_k,
            "iters": a.iters, "warmup": a.warmup, "rounds": a.rounds if cpu else None,
            "busy": a.busy if cpu else None,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            # passed on to orch and PyTorch (OMP_WAIT_POLICY=passive: sleeping, not spinning,
            # OpenMP threads, which a machine with more runnable threads than cores needs)
            "omp_env": {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "GOMP_"))}}
    log(f"zoo benchmark, target {a.target}: {meta['machine']} | torch {torch.__version__} | "
        f"onnxruntime {ortv}" + (f" | openvino {ovv}" if ovv else "")
        + (f" | threads {','.join(map(str, a.thread_counts))}" if cpu else "")
        + (" | FMA peak " + ", ".join(f"{g:.0f} GFLOP/s at {t}" for t, g in a.fma_peak.items())
           if a.fma_peak else "")
        + f" | orch {a.orch} | top-k {a.top_k or 'default'} | "
        f"{len(names)} models | {meta['started']}"
        + (f" | {a.busy} busy neighbours" if cpu and a.busy else "")
        + "".join(f" | {k}={v}" for k, v in meta["omp_env"].items()))
    rows = []
    for n in names:
        e = zoo[n]
        log(f"{n} [{e.family}] {e.source}")
        t0 = time.time()
        try:
            row = bench_model(n, e, log)
        except Exception as exc:  # a harness failure on one model still reports the others
            traceback.print_exc()
            row = {"model": n, "family": e.family, "status": "harness error",
                   "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        row["elapsed_s"] = time.time() - t0
        rows.append(row)
        log(f"  {row['status']} ({row['elapsed_s']:.0f} s)")
        meta["loadavg_start_end"] = (load0, os.getloadavg()[0])
        row["run_started"] = meta["started"]
        write_results(os.path.join(a.out, "results.json"), meta, rows, names, list(zoo))
    if not a.export_only:
        print_table(rows, log)
        log(f"load average (1 min): {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    else:
        log(f"{sum(r['status'] == 'exported' for r in rows)} of {len(rows)} exported")
    return 0


if __name__ == "__main__":
    sys.exit(main())
