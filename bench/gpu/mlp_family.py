#!/usr/bin/env python3
"""The MLP family benchmark: the three multi-layer forms orch fuses into one kernel (a gated, a
residual and a LayerNorm MLP) at widths 32, 64, 128 and depths 2 and 4 (6 on request), against
PyTorch eager and torch.compile with CUDA graphs, in one run on one GPU.

Needs: torch (CUDA), onnx, numpy, orch built (scripts/bundle_device.sh); bench/gpu/run.py, whose
bench_model does each model's work (export with the suite's settings, float64 reference, floor,
`orch compile -t cuda`, `orch run` error, `orch bench`, the baselines timed with CUDA events, the
compile's MLP chain report lines): nothing of it is copied here. Guarantees: one row per form x
width x depth x precision in OUT/results.json (written after every model) and OUT/log.txt, a
table per precision with a geomean speed-up per form; without a GPU, --list and --dry-run (build,
export and check that orch proposes every layer run as an MLP chain) still work.

Forms (each layer is Linear(w, w) followed by the form's epilogue, the same at every layer):
  gated      x' = GELU(W x + b) * sigmoid(x)      (exact erf GELU: PyTorch's default nn.GELU)
  residual   x' = x + relu(W x + b)
  layernorm  x' = LayerNorm(relu(W x + b))        (nn.LayerNorm(w), affine, eps 1e-5)

usage: bench/gpu/mlp_family.py [--orch PATH] [--out DIR] [--forms gated,residual,layernorm]
                               [--widths 32,64,128] [--depths 2,4] [--rows 65536]
                               [--precision fp32[,fp16]] [--half-storage] [--iters N] [--warmup N]
                               [--baselines eager,graphs] [--fresh-db] [--resume]
                               [--stop-after S] [--list] [--dry-run]
       bench/gpu/mlp_family.py --table OUT/results.json [MORE.json ...] [--markdown]
           (the tables of earlier runs, merged; --markdown: as the README's)
"""
import argparse
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FORMS = ("gated", "residual", "layernorm")
# 65536 rows, as the suite's mlp_sin_sigmoid: even at width 32 that is 512 row tiles of 128 for
# the H200's 132 SMs, and every layer's activations (8-32 MiB in float32) are a real memory
# stream, not a launch-bound toy.
ROWS = 65536


def load_run():
    """bench/gpu/run.py as a module (bench/zoo/models.py loads it under the same name)."""
    name = "orch_gpu_bench"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, "run.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# Weight gain per form: weights of standard deviation gain / sqrt(width) keep the activations'
# standard deviation within 0.2-1.5 from depth 2 to 6 (the gate halves a layer's values, the
# residual adds relu's positive mean at every layer; a LayerNorm resets the scale).
GAIN = {"gated": 2.0, "residual": 0.5, "layernorm": 1.0}


def make_model(form, width, depth):
    """The PyTorch module: `depth` layers of `form`, weights N(0, GAIN^2 / width) from the caller's
    seed (activations O(1) at every depth); run.py's randomize then draws the biases and the
    LayerNorms' scale and shift."""
    import torch
    import torch.nn as nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(width, width)
            nn.init.normal_(self.fc.weight, std=GAIN[form] * width ** -0.5)
            if form == "gated":
                self.act = nn.GELU()
            elif form == "layernorm":
                self.ln = nn.LayerNorm(width)

        def forward(self, x):
            h = self.fc(x)
            if form == "gated":
                return self.act(h) * torch.sigmoid(x)
            if form == "residual":
                return x + torch.relu(h)
            return self.ln(torch.relu(h))

    return nn.Sequential(*(Layer() for _ in range(depth)))


def cases(forms, widths, depths):
    """(name, form, width, depth) in run order: per form and width the depths ascending, so a
    deeper model's compile finds its shorter chains and single layers in the shared database."""
    return [(f"{f}_w{w}_d{d}", f, w, d) for f in forms for w in widths for d in sorted(depths)]


def expected_chains(depth):
    """orch proposes every contiguous run of 2..depth layers (mlp_chains.c, depth <= 8)."""
    return depth * (depth - 1) // 2


CHAIN_RE = re.compile(r"MLP chain \((\d+) primitives, (\d+) linear\): (\S+ \S+) \[(.*?)\], "
                      r"(not chosen|chosen)")


def chain_summary(lines, depth):
    """From a compile's MLP chain report lines: the chains proposed, the layer counts of the
    chosen ones and their configs. `chain` reads '4/4' when one chosen chain holds all 4 layers,
    '2+2/4' for two chains, 'no' when the plan chose none."""
    proposed, chosen, configs = 0, [], []
    for ln in lines:
        more = re.search(r"and (\d+) more multi-layer", ln)
        if more:
            proposed += int(more[1])
            continue
        m = CHAIN_RE.search(ln)
        if not m:
            continue
        proposed += 1
        if m[5] == "chosen":
            chosen.append(int(m[2]))
            configs.append(m[4])
    text = "+".join(map(str, chosen)) + f"/{depth}" if chosen else "no"
    return {"proposed": proposed, "chosen_layers": chosen, "configs": configs, "chain": text}


def sort_rows(rows):
    """Rows in the suite's order (form, width, depth), whatever runs they came from."""
    return sorted(rows, key=lambda r: (FORMS.index(r["form"]) if r.get("form") in FORMS else 9,
                                       r.get("width", 0), r.get("depth", 0)))


def fmt(v, w=9, p=4):
    return load_run().fmt(v, w, p)


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


TARGET = 1.5  # the family's goal: one kernel at >= 1.5x the best PyTorch baseline in fp32


def print_tables(rows, baselines, log):
    precs = []
    for r in rows:
        key = (r["precision"], bool(r.get("half_storage")))
        if key not in precs:
            precs.append(key)
    summary = {}
    for prec, hs in precs:
        rs = [r for r in rows if r["precision"] == prec and bool(r.get("half_storage")) == hs]
        tag = prec + (" half storage" if hs else "")
        log(f"\n{tag}: median ms per run (CUDA events, back-to-back, {rs[0].get('rows', ROWS)} "
            f"rows); speed-up = best baseline / orch; chain = layers of the chosen MLP chain "
            f"kernel(s) / depth")
        log(f"{'form':10}{'width':>6}{'depth':>6}" + "".join(f"{b:>10}" for b in baselines)
            + f"{'orch':>10}{'speed-up':>9}{'launches':>9}{'chain':>8}{'x floor':>8}"
            f"{'orch err':>10}{'torch err':>10}{'compile s':>10}  config")
        for r in rs:
            line = f"{r['form']:10}{r['width']:6d}{r['depth']:6d}"
            line += "".join(fmt(r.get("baselines", {}).get(b), 10) for b in baselines)
            line += fmt(r.get("orch_ms"), 10)
            line += f"{r['speedup']:8.2f}x" if r.get("speedup") else f"{'-':>9}"
            line += f"{r.get('orch_kernels', '-'):>9}{r.get('chain', '-'):>8}"
            fl = (r.get("floor") or {}).get("floor_ms")
            line += f"{r['orch_ms'] / fl:7.1f}x" if fl and r.get("orch_ms") else f"{'-':>8}"
            line += f"{r['orch_err']:10.1e}" if "orch_err" in r else f"{'-':>10}"
            line += f"{r['torch_err']:10.1e}" if r.get("torch_err") is not None else f"{'-':>10}"
            line += fmt(r.get("orch_compile_cold_s"), 10, 1)
            line += "  " + "; ".join(dict.fromkeys(r.get("chain_configs", [])))[:60]
            if r.get("orch_error"):
                line += "  orch: " + r["orch_error"].replace("\n", " ")[:120]
            log(line)
        for form in FORMS + ("all",):
            sp = [r["speedup"] for r in rs if r.get("speedup") and form in ("all", r["form"])]
            n = sum(1 for r in rs if form in ("all", r["form"]))
            if not n:
                continue
            one = sum(1 for r in rs if form in ("all", r["form"]) and r.get("orch_kernels") == 1)
            g = geomean(sp)
            summary.setdefault(form, {})[tag] = g
            log(f"geomean {form:10} {fmt(g, 5, 2)}x over {len(sp)} of {n} rows; >= {TARGET}x on "
                f"{sum(s >= TARGET for s in sp)}, one launch on {one}")
    if len(precs) > 1:
        tags = [p + (" half storage" if hs else "") for p, hs in precs]
        log("\ngeomean speed-up per form: " + " | ".join(tags))
        for form, by in summary.items():
            log(f"  {form:10}" + "".join(f"{fmt(by.get(t), 10, 2)}x" for t in tags))


def markdown(rows, meta, baselines):
    """The README's tables: one per precision, then the geomean per form (the numbers as
    measured, nothing else)."""
    print(f"{meta.get('device', '?')}; torch {meta.get('torch', '?')}; "
          f"{meta.get('rows', ROWS)} rows; iters {meta.get('iters')}, warm-up "
          f"{meta.get('warmup')}; {meta.get('started', '')}")
    tags = []
    for r in rows:
        t = r["precision"] + (" half storage" if r.get("half_storage") else "")
        if t not in tags:
            tags.append(t)
    for tag in tags:
        rs = [r for r in rows if r["precision"] + (" half storage" if r.get("half_storage") else "")
              == tag]
        print(f"\n{tag}\n")
        print("| form | width | depth | " + " | ".join(f"{b} ms" for b in baselines)
              + " | orch ms | speed-up | launches | chain | orch err | torch err | config |")
        print("|" + "---|" * (10 + len(baselines)))
        for r in rs:
            cells = [r["form"], str(r["width"]), str(r["depth"])]
            cells += [fmt(r.get("baselines", {}).get(b), 0).strip() for b in baselines]
            cells += [fmt(r.get("orch_ms"), 0).strip(),
                      f"{r['speedup']:.2f}x" if r.get("speedup") else "-",
                      str(r.get("orch_kernels", "-")), r.get("chain", "-"),
                      f"{r['orch_err']:.1e}" if "orch_err" in r else "-",
                      f"{r['torch_err']:.1e}" if r.get("torch_err") is not None else "-",
                      "`" + "; ".join(dict.fromkeys(r.get("chain_configs", []))) + "`"
                      if r.get("chain_configs") else (r.get("orch_error") or "-")[:80]]
            print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        print()
        for form in FORMS + ("all",):
            sp = [r["speedup"] for r in rs if r.get("speedup") and form in ("all", r["form"])]
            if sp:
                print(f"- {form}: geomean {geomean(sp):.2f}x over {len(sp)} rows, >= {TARGET}x on "
                      f"{sum(x >= TARGET for x in sp)}")


def dry_run(args, log):
    """Without a GPU: build and export every model as the benchmark will (same seeds and export
    settings), and ask `orch inspect --stage candidates -t cuda` for its MLP chains; every run of
    2..depth layers must be one. Returns the exit status (1: a model is not a full chain)."""
    import numpy as np
    import torch
    gpu = load_run()
    bad = 0
    for name, form, width, depth in cases(args.forms, args.widths, args.depths):
        d = os.path.join(args.out, name)
        os.makedirs(d, exist_ok=True)
        model, x = gpu.build_model(lambda: make_model(form, width, depth), (args.rows, width))
        onnx_path = os.path.join(d, "model.onnx")
        gpu.export_onnx(model, x, onnx_path)
        with torch.no_grad():
            y = model.double()(x.double())
        scale = float(y.abs().max())
        msg = (f"{name:20} exported ({os.path.getsize(onnx_path) / 1e3:.0f} kB), "
               f"max|out| {scale:.2f}")
        if not np.isfinite(scale) or scale < 1e-2 or scale > 1e3:
            msg += " (activations not O(1))"
            bad += 1
        if os.path.exists(args.orch):
            p = subprocess.run([args.orch, "inspect", onnx_path, "--stage", "candidates",
                                "--target", "cuda", "--device", "h200"],
                               capture_output=True, text=True, timeout=600)
            m = re.search(r"multi-layer: (\d+) MLP chain", p.stdout)
            got = int(m[1]) if m else None
            want = expected_chains(depth)
            ok = p.returncode == 0 and got == want
            msg += f"; MLP chain candidates {got} of {want}" + (
                "" if ok else "  (not every run of 2..depth layers is a chain)")
            bad += not ok
        log(msg)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--orch", default=os.environ.get("ORCH", "build/orch"))
    ap.add_argument("--out", default="bench-mlp-out")
    ap.add_argument("--forms", default=",".join(FORMS))
    ap.add_argument("--widths", default="32,64,128")
    ap.add_argument("--depths", default="2,4")
    ap.add_argument("--rows", type=int, default=ROWS)
    ap.add_argument("--precision", default="fp32", help="fp32, tf32, fp16; a list runs each")
    ap.add_argument("--half-storage", action="store_true",
                    help="fp16: orch compile --half-storage (tensors stored in half)")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--baselines", default="eager,graphs")
    ap.add_argument("--fresh-db", action="store_true",
                    help="an empty profile database per model (default: one per form, width and "
                         "precision, shared by the depths)")
    ap.add_argument("--resume", action="store_true",
                    help="keep OUT/results.json's rows and run only the models it lacks")
    ap.add_argument("--stop-after", type=float, default=0, metavar="S",
                    help="start no model after S seconds (exit status 4 when some are left)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU needed: export every model and check orch's MLP chain candidates")
    ap.add_argument("--table", nargs="+", metavar="RESULTS_JSON",
                    help="print the tables of earlier runs' results.json (several: merged)")
    ap.add_argument("--markdown", action="store_true", help="with --table: as Markdown")
    args = ap.parse_args()
    started = time.time()

    if args.table:
        rows, baselines, meta = [], [], {}
        for path in args.table:
            with open(path) as f:
                res = json.load(f)
            rows += res["rows"]
            meta = meta or res["meta"]
            baselines += [b for b in res["meta"]["baselines"] if b not in baselines]
        if args.markdown:
            markdown(sort_rows(rows), meta, baselines)
        else:
            print_tables(sort_rows(rows), baselines, print)
        return 0

    args.forms = [f for f in args.forms.split(",") if f]
    unknown = [f for f in args.forms if f not in FORMS]
    if unknown:
        print(f"unknown form(s) {', '.join(unknown)} (have: {', '.join(FORMS)})", file=sys.stderr)
        return 1
    try:
        args.widths = [int(w) for w in args.widths.split(",") if w]
        args.depths = [int(d) for d in args.depths.split(",") if d]
    except ValueError:
        print("--widths and --depths take comma-separated integers", file=sys.stderr)
        return 1
    if any(w < 1 or w > 256 for w in args.widths) or any(d < 1 or d > 8 for d in args.depths):
        print("widths 1..256 and depths 1..8 (orch's MLP chains: K, N <= 256, <= 8 layers)",
              file=sys.stderr)
        return 1
    if args.list:
        for name, form, width, depth in cases(args.forms, args.widths, args.depths):
            print(f"{name:20} {form:10} {args.rows}x{width}, {depth} layers, "
                  f"{expected_chains(depth)} MLP chain candidates expected")
        return 0
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "log.txt"), "a")

    def log(s):
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    if args.orch and os.path.exists(args.orch):
        args.orch = os.path.abspath(args.orch)
    if args.dry_run:
        if not os.path.exists(args.orch):
            log(f"no orch at {args.orch}: exporting only, no candidate check")
        return dry_run(args, log)

    import torch
    gpu = load_run()
    precisions = gpu.precision_list(args.precision)
    if precisions is None:
        return 1
    gpu.HALF_STORAGE = args.half_storage
    args.baselines = [b for b in args.baselines.split(",") if b]
    if not os.path.exists(args.orch):
        print(f"no orch at {args.orch} (--orch PATH; build it with make, or "
              f"scripts/bundle_device.sh)", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("no CUDA device: the benchmark needs one (--dry-run checks the models without)",
              file=sys.stderr)
        return 3
    torch.backends.mha.set_fastpath_enabled(False)
    args.device = torch.cuda.get_device_name()
    args.sms = torch.cuda.get_device_properties(0).multi_processor_count
    args.bw = gpu.measure_bandwidth()
    log(f"MLP family benchmark: {args.device} | torch {torch.__version__} | orch {args.orch} | "
        f"{args.rows} rows | iters {args.iters} warm-up {args.warmup} | "
        f"{'fresh database per model' if args.fresh_db else 'database shared by the depths'} | "
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
    meta = {"device": args.device, "sms": args.sms, "bw": args.bw, "torch": torch.__version__,
            "orch": args.orch, "rows": args.rows, "iters": args.iters, "warmup": args.warmup,
            "baselines": args.baselines, "precisions": precisions,
            "half_storage": args.half_storage, "fresh_db": args.fresh_db,
            "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    res_path = os.path.join(args.out, "results.json")
    rows = []
    if args.resume and os.path.exists(res_path):
        # the rows of an earlier run into the same folder with the same settings, failures
        # dropped (measured again)
        with open(res_path) as f:
            old = json.load(f)
        same = all(old["meta"].get(k) == meta[k] for k in ("device", "rows", "half_storage"))
        rows = [r for r in old["rows"] if same and not r.get("orch_error")]
        meta["started"] = old["meta"].get("started", meta["started"])
        log(f"resuming: {len(rows)} rows of {res_path} kept" if same else
            f"not resuming: {res_path} has another device, row count or storage")
    left = []
    for name, form, width, depth in cases(args.forms, args.widths, args.depths):
        if all(any(r["model"] == name and r["precision"] == p for r in rows) for p in precisions):
            continue
        if args.stop_after and time.time() - started > args.stop_after:
            left.append(name)
            continue
        log(f"{name} {args.rows}x{width}, {depth} layers")
        t0 = time.time()
        rows = [r for r in rows if r["model"] != name]
        def db_path(prec, form=form, width=width):
            hs = "_half" if args.half_storage and prec == "fp16" else ""
            return os.path.join(args.out, f"profile_{form}_w{width}_{prec}{hs}.db")

        try:
            got = gpu.bench_model(name, lambda f=form, w=width, d=depth: make_model(f, w, d),
                                  (args.rows, width), args, precisions, log,
                                  db_path=None if args.fresh_db else db_path, warm=False)
        except Exception as exc:  # a model that fails is a row with the message
            import traceback
            traceback.print_exc()
            got = [{"model": name, "precision": p, "baselines": {}, "torch_err": None,
                    "orch_error": f"{type(exc).__name__}: {str(exc)[:200]}"} for p in precisions]
        for r in got:
            r.update(form=form, width=width, depth=depth, rows=args.rows,
                     half_storage=args.half_storage and r["precision"] == "fp16")
            cs = chain_summary(r.get("fused_report", []), depth)
            r.update(chain=cs["chain"], chains_proposed=cs["proposed"],
                     chain_layers=cs["chosen_layers"], chain_configs=cs["configs"])
            log(f"    [{r['precision']}] chain {cs['chain']} ({cs['proposed']} proposed), "
                f"{r.get('orch_kernels', '-')} launches, speed-up "
                + (f"{r['speedup']:.2f}x" if r.get("speedup") else "-"))
            # at least every run of 2..depth layers (half storage adds the runs that start with
            # the input's CAST); fewer: a layer's epilogue no longer matched (see --dry-run)
            if r.get("orch_ms") and cs["proposed"] < expected_chains(depth):
                log(f"    note: {cs['proposed']} MLP chain candidates reported, at least "
                    f"{expected_chains(depth)} expected")
        rows += got
        log(f"  ({time.time() - t0:.0f} s)")
        with open(res_path, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    print_tables(sort_rows(rows), args.baselines, log)
    log(f"\n(the run took {time.time() - started:.0f} s)")
    if left:
        log(f"not run (--stop-after {args.stop_after:.0f} s passed): {', '.join(left)}; the same "
            f"command with --resume runs them")
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
