#!/usr/bin/env python3
"""The roofline floor of a model on a GPU: the least time any implementation could take, the larger
of its arithmetic at the device's peak and its compulsory memory traffic at the measured bandwidth.

FLOPs and parameter bytes come from `orch info` (its FLOP count of the folded graph); the compulsory
bytes are the parameters (orch keeps them in float32 in every precision) plus the graph inputs and
outputs, each moved once. Peaks are dense, without sparsity: the published figures of the GPUs the
benchmark runs on, else estimated from the SM count and a 1.755 GHz clock with Hopper's per-SM rates.
run.py prints the floor beside each model's times and orch's multiple of it (the benchmark asks for the
floor of every model that falls short of its target).

usage: floor.py [--orch PATH] [--precision fp32|tf32|fp16] [--bw BYTES_PER_S] [--device NAME]
                [--sms N] [--input-shapes SPEC] MODEL.onnx...
"""
import argparse
import re
import subprocess
import sys

# Dense peaks in FLOP/s: fp32 on the CUDA cores, tf32 and fp16 on the tensor cores.
PEAKS = {
    "H100 80GB HBM3": {"fp32": 66.9e12, "tf32": 494.7e12, "fp16": 989.4e12},  # SXM5
    "H100 PCIe": {"fp32": 51.2e12, "tf32": 378.0e12, "fp16": 756.0e12},
    "H200": {"fp32": 66.9e12, "tf32": 494.7e12, "fp16": 989.4e12},
    "A100": {"fp32": 19.5e12, "tf32": 156.0e12, "fp16": 312.0e12},
}
# FLOP per SM per clock on Hopper: 128 FP32 lanes x 2; tensor cores dense tf32 / fp16.
PER_SM_CLOCK = {"fp32": 256, "tf32": 1024 * 2, "fp16": 2048 * 2}

SUFFIX = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4,
               "int8": 1, "uint8": 1, "bool": 1}


def peak(device, sms, precision):
    for key, p in PEAKS.items():
        if key in (device or ""):
            return p[precision]
    return (sms or 132) * PER_SM_CLOCK[precision] * 1.755e9


def _num(text, unit):
    return float(text) * SUFFIX[unit]


def info(orch, onnx_path, input_shapes=None):
    """FLOPs, parameter bytes and input/output bytes of the model, from `orch info`."""
    cmd = [orch, "info", onnx_path] + (["--input-shapes", input_shapes] if input_shapes else [])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"orch info {onnx_path}: exit {p.returncode}: {p.stderr.strip()[:300]}")
    out = p.stdout
    m = re.search(r"^FLOPs: ([0-9.]+) ?([KMGT]?)", out, re.M)
    flops = _num(*m.groups()) if m else 0.0
    m = re.search(r"^parameters: .*\(([0-9.]+) ?([KMGT]?) bytes\)", out, re.M)
    params = _num(*m.groups()) if m else 0.0
    io = 0.0
    section = None
    for line in out.splitlines():
        if line in ("inputs:", "outputs:"):
            section = line
            continue
        if not line.startswith("  "):
            section = None
            continue
        f = line.split()
        if section and len(f) >= 3 and f[1] in DTYPE_BYTES:
            n = 1
            for d in f[2].split("x"):
                n *= int(d) if d.isdigit() else 1
            io += n * DTYPE_BYTES[f[1]]
    return {"flops": flops, "param_bytes": params, "io_bytes": io}


def model_floor(orch, onnx_path, precision, bw, device=None, sms=None, input_shapes=None):
    """The floor in milliseconds with what it is made of."""
    r = info(orch, onnx_path, input_shapes)
    pk = peak(device, sms, precision)
    t_flop = r["flops"] / pk
    t_mem = (r["param_bytes"] + r["io_bytes"]) / bw
    r.update({"peak": pk, "bw": bw, "flop_ms": t_flop * 1e3, "mem_ms": t_mem * 1e3,
              "floor_ms": max(t_flop, t_mem) * 1e3,
              "bound": "compute" if t_flop >= t_mem else "memory"})
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--orch", default="build/orch")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "fp16"])
    ap.add_argument("--bw", type=float, default=2.953e12, help="bytes/s (H100 SXM measured)")
    ap.add_argument("--device", default="H100 80GB HBM3")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--input-shapes")
    a = ap.parse_args()
    print(f"{'model':40} {'GFLOP':>9} {'MB':>9} {'flop us':>9} {'mem us':>9} {'floor us':>9}  bound")
    rc = 0
    for m in a.models:
        try:
            f = model_floor(a.orch, m, a.precision, a.bw, a.device, a.sms, a.input_shapes)
        except RuntimeError as e:
            print(f"{m}: {e}", file=sys.stderr)
            rc = 1
            continue
        print(f"{m[-40:]:40} {f['flops'] / 1e9:9.3f} {(f['param_bytes'] + f['io_bytes']) / 1e6:9.2f}"
              f" {f['flop_ms'] * 1e3:9.2f} {f['mem_ms'] * 1e3:9.2f} {f['floor_ms'] * 1e3:9.2f}  "
              f"{f['bound']}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
