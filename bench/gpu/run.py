#!/usr/bin/env python3
"""The GPU benchmark: orch against PyTorch eager, torch.compile and torch.compile with CUDA graphs
("reduce-overhead"), side by side in one run on one GPU, on a 10-model suite.

For each model: build it in PyTorch with random weights (fixed seed, calibrated so activations stay
O(1)), export ONNX (static shapes), compile it with `orch compile -t cuda` twice (cold: an empty
profile database; warm: the same database again), check orch's output against PyTorch run in float64,
and time, in this process: torch eager, torch.compile, torch.compile(mode="reduce-overhead") and orch
(`orch bench`: its GPU time of back-to-back CUDA-graph replays with the input on the device, between
CUDA events, the same method as the baselines' events). Every time is the median of --iters runs after
--warmup. TF32 is off everywhere for fp32; the tf32 table turns it on for PyTorch and compiles orch
with --precision tf32; the fp16 table runs PyTorch in half and orch with --precision fp16 (orch keeps float32
tensors and rounds the linear kernels' operands; --half-storage stores its tensors in half too).

Prints one table per precision (times in ms, orch's speed-up over the best baseline, compile times,
errors relative to max|reference|) and the geomean, and writes results.json under --out.
Needs: torch (CUDA), torchvision, timm, transformers, onnx, numpy; orch built (scripts/bundle_device.sh).

usage: bench/gpu/run.py [--orch PATH] [--out DIR] [--only NAME,...] [--precision fp32,tf32,fp16]
                        [--half-storage]
                        [--iters N] [--warmup N] [--baselines eager,compile,graphs] [--list]
"""
import argparse
import copy
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "real_models"))
import check_real_models as zoo_mod  # noqa: E402  (the model zoo shared with the import check)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floor as floor_mod  # noqa: E402  (the roofline floor: FLOPs at peak, bytes at bandwidth)


class SinSigmoidMLP(nn.Module):
    """The fused-MLP case: 6 layers 64 wide, sin(x) * sigmoid(x) between them."""

    def __init__(self, width=64, layers=6):
        super().__init__()
        self.fc = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

    def forward(self, x):
        for i, f in enumerate(self.fc):
            x = f(x)
            if i + 1 < len(self.fc):
                x = torch.sin(x) * torch.sigmoid(x)
        return x


def suite():
    """name -> (constructor, input shape), in the issue's order."""
    z = zoo_mod.model_zoo()
    return {
        "style_transfer": z["style_transfer"],
        "segformer_b0": z["segformer_b0"],
        "efficientvit_b0": z["efficientvit_b0"],
        "cspdarknet53": z["cspdarknet53"],
        "mobilenet_v2": z["mobilenet_v2"],
        "resnet18": z["resnet18"],
        "vit_b_16": z["vit_b_16"],
        "bert_base": z["bert_base"],
        "transformer_block": z["transformer_block"],
        "mlp_sin_sigmoid": (SinSigmoidMLP, (65536, 64)),
    }


# The attention shapes (heads, sequence, head dim) of the models with self-attention: orch's fused
# attention kernel is compared with PyTorch's scaled_dot_product_attention on the same shape (issue
# 8's target: at least its speed).
ATTENTION_SHAPES = {"vit_b_16": (12, 197, 64), "bert_base": (12, 128, 64),
                    "transformer_block": (12, 512, 64)}


def sdpa_times(shape, dtype, iters, warmup):
    """{backend: ms} of F.scaled_dot_product_attention(q, k, v) at batch 1 on `shape` (CUDA graph
    replays), for every SDPA backend that takes it (flash needs half precision; math always
    runs)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    h, s, d = shape
    g = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = (torch.randn(1, h, s, d, device="cuda", dtype=dtype, generator=g) for _ in range(3))
    out = {}
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each refused backend warns why
        for name, be in (("flash", SDPBackend.FLASH_ATTENTION),
                         ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                         ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)):
            try:
                # One call captured in a CUDA graph and replayed, as orch's plan is: the time is
                # the kernels', not the host's dispatch (~30 us a call, more than the kernel).
                with sdpa_kernel([be]):
                    F.scaled_dot_product_attention(q, k, v)
                    torch.cuda.synchronize()
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        F.scaled_dot_product_attention(q, k, v)
                out[name] = cuda_time_ms(graph.replay, iters, warmup)
            except Exception:  # a backend that does not take this dtype/shape: not reported
                pass
    return out


def fused_report(log_path):
    """The last compile's lines on fused attention / MLP chain candidates (chosen or why not)."""
    try:
        with open(log_path) as f:
            text = f.read()
    except OSError:
        return []
    last = text.rsplit("$ ", 1)[-1]
    return [ln.strip() for ln in last.splitlines()
            if re.search(r"fused attention|MLP chain", ln)]


def cuda_time_ms(fn, iters, warmup):
    """Median GPU-timeline ms per call of back-to-back calls between CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    ev[0].record()
    for i in range(iters):
        fn()
        ev[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(ev[i].elapsed_time(ev[i + 1]) for i in range(iters))


def set_precision(p):
    tf32 = p == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")


def first_output(y):
    if torch.is_tensor(y):
        return y
    if isinstance(y, (list, tuple)):
        return y[0]
    return y[0]


def run_baselines(model, x, names, iters, warmup, log):
    """{baseline: ms or None}, {baseline: error string}, compile seconds. x: the input, or a
    tuple of inputs (a model with several, as bench/zoo has)."""
    xs = x if isinstance(x, tuple) else (x,)
    times, errors, compile_s = {}, {}, {}
    with torch.inference_mode():
        for b in names:
            try:
                torch._dynamo.reset()
                if b == "eager":
                    fn = lambda: model(*xs)  # noqa: E731
                elif b == "compile":
                    cm = torch.compile(model)
                    fn = lambda: cm(*xs)  # noqa: E731
                elif b == "graphs":
                    cg = torch.compile(model, mode="reduce-overhead")

                    def fn():
                        torch.compiler.cudagraph_mark_step_begin()
                        return cg(*xs)
                else:
                    raise ValueError(f"unknown baseline {b}")
                t0 = time.time()
                fn()
                torch.cuda.synchronize()
                compile_s[b] = time.time() - t0
                times[b] = cuda_time_ms(fn, iters, warmup)
                log(f"    {b:8} {times[b]:9.4f} ms (first call {compile_s[b]:.1f} s)")
            except Exception as exc:  # a baseline that fails is reported, not fatal
                times[b] = None
                errors[b] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                log(f"    {b:8} FAILED {errors[b]}")
    torch._dynamo.reset()
    return times, errors, compile_s


HALF_STORAGE = False  # --half-storage


def orch_compile(orch, onnx_path, art, db, precision, log_path, target="cuda", extra=(),
                 timeout=1800):
    """Runs `orch compile`, its output appended to log_path; (exit status, wall seconds).
    bench/zoo calls it for both targets, with extra options (--threads, --top-k)."""
    cmd = [orch, "compile", onnx_path, "-t", target, "-o", art, "--db", db, *extra]
    if precision != "fp32":
        cmd += ["--precision", precision]
    if precision in ("fp16", "bf16") and HALF_STORAGE:
        cmd += ["--half-storage"]
    t0 = time.time()
    with open(log_path, "a") as lf:
        lf.write("$ " + " ".join(cmd) + "\n")
        lf.flush()
        p = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, time.time() - t0


def tail(path, n=6):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def build_model(ctor, shape):
    """The model with the suite's random weights and its input (fixed seeds)."""
    torch.manual_seed(0)
    model = zoo_mod.randomize(ctor().eval(), shape)
    return model, torch.randn(*shape, generator=torch.Generator().manual_seed(2))


def export_onnx(model, x, onnx_path):
    """The suite's export: static shapes, opset 17, the TorchScript exporter."""
    with torch.no_grad():
        torch.onnx.export(model, (x,), onnx_path, input_names=["input"], output_names=["output"],
                          opset_version=17, dynamo=False)


def bench_model(name, ctor, shape, args, precisions, log, db_path=None, warm=True):
    """Rows (one per precision) of one model: export, float64 reference, floor, orch compile (cold,
    then warm unless warm=False), orch's error and bench, the baselines. db_path(precision): the
    profile database to compile with, kept as it is (models that share kernels reuse their
    measurements: bench/gpu/mlp_family.py); by default a fresh one per model and precision."""
    d = os.path.join(args.out, name)
    os.makedirs(d, exist_ok=True)
    model, x = build_model(ctor, shape)
    onnx_path = os.path.join(d, "model.onnx")
    t0 = time.time()
    export_onnx(model, x, onnx_path)
    log(f"  exported {onnx_path} ({os.path.getsize(onnx_path) / 1e6:.1f} MB, {time.time() - t0:.1f} s)")
    np.save(os.path.join(d, "input.npy"), x.numpy())
    dev = torch.device("cuda")
    with torch.no_grad():  # the judge: PyTorch in float64 (on the GPU: fast enough for every model)
        ref64 = first_output(model.double().to(dev)(x.double().to(dev))).cpu().numpy()
    model = model.float()
    scale = float(np.abs(ref64).max()) or 1.0
    rows = []
    for prec in precisions:
        set_precision(prec)
        row = {"model": name, "precision": prec, "shape": list(shape)}
        try:
            row["floor"] = floor_mod.model_floor(args.orch, onnx_path, prec, args.bw, args.device,
                                                 args.sms)
            f = row["floor"]
            log(f"  floor ({prec}): {f['floor_ms'] * 1e3:.1f} us ({f['bound']}-bound: "
                f"{f['flops'] / 1e9:.2f} GFLOP at {f['peak'] / 1e12:.0f} TFLOP/s, "
                f"{(f['param_bytes'] + f['io_bytes']) / 1e6:.1f} MB at {f['bw'] / 1e9:.0f} GB/s)")
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            log(f"  floor ({prec}): not computed: {exc}")
        log(f"  [{prec}]")
        # orch: cold (an empty database, unless db_path names one) then warm compile, check, bench
        if db_path:
            db = db_path(prec)
        else:
            db = os.path.join(d, f"profile_{prec}.db")
            for f in (db, db + "-wal", db + "-shm"):
                if os.path.exists(f):
                    os.remove(f)
        art = os.path.join(d, f"model_{prec}.orch")
        clog = os.path.join(d, f"compile_{prec}.log")
        if os.path.exists(clog):
            os.remove(clog)
        rc, cold = orch_compile(args.orch, onnx_path, art, db, prec, clog)
        row["orch_compile_cold_s"] = cold
        if rc == 0 and warm:
            rc2, warm_s = orch_compile(args.orch, onnx_path, art, db, prec, clog)
            row["orch_compile_warm_s"] = warm_s if rc2 == 0 else None
            log(f"    orch compile: cold {cold:.1f} s, warm {warm_s:.1f} s")
        elif rc == 0:
            log(f"    orch compile: {cold:.1f} s")
        else:
            row["orch_error"] = f"compile exit {rc}: {tail(clog, 4).strip()}"
            log(f"    orch compile FAILED (exit {rc}):\n{tail(clog, 12)}")
        if rc == 0:
            outdir = os.path.join(d, f"out_{prec}")
            shutil.rmtree(outdir, ignore_errors=True)
            p = subprocess.run([args.orch, "run", art, "-i", f"input={d}/input.npy", "-o", outdir],
                               capture_output=True, text=True, timeout=600)
            got = os.path.join(outdir, "output.npy")
            if p.returncode == 0 and os.path.exists(got):
                row["orch_err"] = float(np.abs(np.load(got).astype(np.float64) - ref64).max()) / scale
            else:
                row["orch_error"] = f"run exit {p.returncode}: {(p.stdout + p.stderr)[-300:]}"
            js = os.path.join(d, f"bench_{prec}.json")
            p = subprocess.run([args.orch, "bench", art, "--iters", str(args.iters), "--warmup",
                                str(args.warmup), "--json", js],
                               capture_output=True, text=True, timeout=900)
            if p.returncode == 0:
                with open(js) as f:
                    bj = json.load(f)
                row["orch_ms"] = bj.get("device_median_ms")
                row["orch_host_ms"] = bj["median_ms"]
                row["orch_kernels"] = len(bj["kernels"])
                top = sorted(bj["kernels"], key=lambda k: -k["median_ms"])[:5]
                row["orch_top_kernels"] = [(k["name"], k["median_ms"], k["nodes"][:80]) for k in top]
                log(f"    orch     {row['orch_ms']:9.4f} ms ({row['orch_kernels']} launches; "
                    f"host round trip {row['orch_host_ms']:.4f} ms); err {row.get('orch_err', float('nan')):.2e}")
                # the kernels computing a Softmax: the fused attention where it was chosen
                att = [k["median_ms"] for k in bj["kernels"] if "Softmax" in k["nodes"]]
                if att and name in ATTENTION_SHAPES:
                    row["orch_softmax_kernel_ms"] = statistics.median(att)
            else:
                row["orch_error"] = f"bench exit {p.returncode}: {(p.stdout + p.stderr)[-300:]}"
                log(f"    orch bench FAILED: {row['orch_error']}")
        row["fused_report"] = fused_report(clog)
        for ln in row["fused_report"][:6]:
            log(f"    {ln}")
        if len(row["fused_report"]) > 6:
            log(f"    ... {len(row['fused_report']) - 6} more fused candidate lines in {clog}")
        if name in ATTENTION_SHAPES:
            row["sdpa_ms"] = sdpa_times(ATTENTION_SHAPES[name],
                                        torch.float16 if prec == "fp16" else torch.float32,
                                        args.iters, args.warmup)
            row["attention_shape"] = list(ATTENTION_SHAPES[name])
            log(f"    attention {'x'.join(map(str, ATTENTION_SHAPES[name]))}: orch's softmax kernel "
                f"{fmt(row.get('orch_softmax_kernel_ms'), 0)} ms (median over layers); PyTorch SDPA "
                + ", ".join(f"{b} {t:.4f} ms" for b, t in row["sdpa_ms"].items()))
        # baselines, in the same process and precision
        # a copy in half: converting the model itself would leave its weights rounded to half
        # for the precisions after this one (their torch err against the float64 reference)
        m = copy.deepcopy(model).half() if prec == "fp16" else model.float()
        m = m.to(dev)
        xin = x.to(dev).half() if prec == "fp16" else x.to(dev)
        with torch.inference_mode():
            y = first_output(m(xin)).float().cpu().numpy()
        row["torch_err"] = float(np.abs(y.astype(np.float64) - ref64).max()) / scale
        times, errs, comp = run_baselines(m, xin, args.baselines, args.iters, args.warmup, log)
        row["baselines"] = times
        row["baseline_errors"] = errs
        row["baseline_first_call_s"] = comp
        ok = [t for t in times.values() if t]
        if ok and row.get("orch_ms"):
            row["best_baseline_ms"] = min(ok)
            row["speedup"] = min(ok) / row["orch_ms"]
        rows.append(row)
        del m
        model = model.cpu().float()
    return rows


def measure_bandwidth(mib=512, reps=20):
    """Bytes/s of a device-to-device copy (read + write), median of reps, after a warm-up."""
    n = mib * (1 << 20) // 4
    a = torch.empty(n, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        b.copy_(a)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) / 1e3)
    del a, b
    return 2 * n * 4 / statistics.median(ts)


def fmt(v, w=9, p=4):
    return f"{v:{w}.{p}f}" if isinstance(v, (int, float)) and v is not None else f"{'-':>{w}}"


def print_tables(rows, baselines, log):
    for prec in sorted({r["precision"] for r in rows}, key=["fp32", "tf32", "fp16"].index):
        rs = [r for r in rows if r["precision"] == prec]
        log(f"\n{prec}: median ms per run (CUDA events, back-to-back); speed-up = best baseline / orch")
        head = f"{'model':18}" + "".join(f"{b:>10}" for b in baselines)
        log(head + f"{'orch':>10}{'speed-up':>9}{'floor':>9}{'x floor':>8}{'cold s':>8}{'warm s':>8}"
            f"{'orch err':>10}{'torch err':>10}  launches")
        sp = []
        for r in rs:
            line = f"{r['model']:18}" + "".join(fmt(r["baselines"].get(b), 10) for b in baselines)
            line += fmt(r.get("orch_ms"), 10)
            line += f"{r['speedup']:8.2f}x" if r.get("speedup") else f"{'-':>9}"
            fl = r.get("floor", {}).get("floor_ms")
            line += fmt(fl, 9)
            line += f"{r['orch_ms'] / fl:7.1f}x" if fl and r.get("orch_ms") else f"{'-':>8}"
            line += fmt(r.get("orch_compile_cold_s"), 8, 1) + fmt(r.get("orch_compile_warm_s"), 8, 1)
            line += (f"{r['orch_err']:10.1e}" if "orch_err" in r else f"{'-':>10}")
            line += f"{r['torch_err']:10.1e}"
            line += f"  {r.get('orch_kernels', '-')}"
            if r.get("orch_error"):
                line += "  orch: " + r["orch_error"].replace("\n", " ")[:120]
            log(line)
            if r.get("speedup"):
                sp.append(r["speedup"])
        if sp:
            g = math.exp(sum(math.log(s) for s in sp) / len(sp))
            log(f"geomean speed-up ({prec}, {len(sp)} of {len(rs)} models): {g:.2f}x; "
                f"orch >= best baseline on {sum(s >= 1 for s in sp)} of {len(rs)}")
        att = [r for r in rs if r.get("sdpa_ms") and r.get("orch_softmax_kernel_ms")]
        if att:
            log(f"attention ({prec}): orch's kernel computing a layer's softmax (the fused attention "
                f"where chosen) against the fastest PyTorch SDPA backend on the same shape")
            for r in att:
                be, t = min(r["sdpa_ms"].items(), key=lambda kv: kv[1])
                o = r["orch_softmax_kernel_ms"]
                fused = any("chosen" in ln and "not chosen" not in ln and "attention" in ln
                            for ln in r.get("fused_report", []))
                log(f"  {r['model']:18} {'x'.join(map(str, r['attention_shape'])):>10}  orch "
                    f"{o * 1e3:7.1f} us ({'fused' if fused else 'not fused'})  SDPA {be} "
                    f"{t * 1e3:7.1f} us  SDPA/orch {t / o:5.2f}x")


def precision_list(text):
    """--precision's comma-separated list, or None after saying which entry is unknown."""
    precisions = [p for p in text.split(",") if p]
    for p in precisions:
        if p not in ("fp32", "tf32", "fp16"):
            print(f"unknown precision {p} (fp32, tf32, fp16)", file=sys.stderr)
            return None
    return precisions


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orch", default=os.environ.get("ORCH", "build/orch"))
    ap.add_argument("--out", default="bench-gpu-out")
    ap.add_argument("--only", default="")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--half-storage", action="store_true",
                    help="fp16: orch compile --half-storage (tensors stored in half)")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--baselines", default="eager,compile,graphs")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    global HALF_STORAGE
    HALF_STORAGE = args.half_storage
    models = suite()
    if args.list:
        for n, (_, s) in models.items():
            print(n, "x".join(map(str, s)))
        return 0
    names = [n for n in models if not args.only or n in args.only.split(",")]
    unknown = [n for n in args.only.split(",") if n and n not in models]
    if unknown:
        print(f"unknown model(s): {', '.join(unknown)} (--list shows the suite)", file=sys.stderr)
        return 1
    precisions = precision_list(args.precision)
    if precisions is None:
        return 1
    args.baselines = [b for b in args.baselines.split(",") if b]
    if not os.path.exists(args.orch):
        print(f"no orch at {args.orch} (--orch PATH; build it with make, or scripts/bundle_device.sh)",
              file=sys.stderr)
        return 1
    args.orch = os.path.abspath(args.orch)
    if not torch.cuda.is_available():
        print("no CUDA device: the GPU benchmark needs one", file=sys.stderr)
        return 3
    os.makedirs(args.out, exist_ok=True)
    torch.backends.mha.set_fastpath_enabled(False)
    args.device = torch.cuda.get_device_name()
    args.sms = torch.cuda.get_device_properties(0).multi_processor_count
    args.bw = measure_bandwidth()
    logf = open(os.path.join(args.out, "log.txt"), "a")

    def log(s):
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    log(f"GPU benchmark: {torch.cuda.get_device_name()} | torch {torch.__version__} | orch {args.orch}"
        f" | iters {args.iters} warm-up {args.warmup} | {time.strftime('%Y-%m-%d %H:%M:%S')}")
    log(f"device: {args.sms} SMs, {args.bw / 1e9:.0f} GB/s measured (device-to-device copy); floors "
        f"use the dense peaks of bench/gpu/floor.py")
    rows = []
    for n in names:
        log(f"{n} {'x'.join(map(str, models[n][1]))}")
        t0 = time.time()
        try:
            rows += bench_model(n, *models[n], args, precisions, log)
        except Exception as exc:
            import traceback
            traceback.print_exc()
            for p in precisions:
                rows.append({"model": n, "precision": p, "baselines": {}, "torch_err": float("nan"),
                             "orch_error": f"{type(exc).__name__}: {str(exc)[:200]}"})
        log(f"  ({time.time() - t0:.0f} s)")
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(rows, f, indent=1)
    print_tables(rows, args.baselines, log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
