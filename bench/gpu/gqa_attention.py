#!/usr/bin/env python3
"""Grouped-query attention side by side on one GPU: orch's fused attention against PyTorch's
scaled_dot_product_attention(enable_gqa=True, is_causal=True), on Llama's attention core.

The block exported is what transformers' eager Llama attention computes after the projections:
Q [1, H, S, D] and K, V [1, KV, S, D] as inputs, K rotated (rotate_half: k*cos + cat(-k2, k1)*sin)
and Q too, K and V repeated by repeat_kv (Unsqueeze, Expand, Reshape), scores scaled, an additive
causal mask, softmax, P·V. orch compiles it with `orch compile -t cuda` (the fused attention reads
K and V from their KV heads and rotates Q and K as it stages them), is checked against PyTorch in
float64, and timed by `orch bench` (its GPU time of CUDA-graph replays); PyTorch's side is the
rotation and SDPA, one call captured in a CUDA graph per SDPA backend that takes the shape, timed
by CUDA events (bench/gpu/run.py's method). Prints per shape and precision each side's ms and the
best PyTorch backend / orch (> 1: orch is faster). TF32 off on both sides in fp32.

usage: bench/gpu/gqa_attention.py [--orch PATH] [--out DIR] [--precision fp32,fp16]
                                  [--iters N] [--warmup N]
Needs: torch (CUDA, 2.5 or newer for enable_gqa), onnx; orch built (scripts/bundle_device.sh).
"""
import argparse
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import cuda_time_ms, set_precision  # noqa: E402

# (query heads, KV heads, tokens, head dim): the zoo's Llama (full and CPU-sized), a Llama-3-8B
# layer's heads at 1024 tokens, multi-query.
SHAPES = [(16, 4, 256, 64), (8, 2, 64, 32), (32, 8, 1024, 128), (16, 1, 512, 64)]


def rope_tables(s, d):
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.arange(s, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos()[None, None], emb.sin()[None, None]


class LlamaAttentionCore(torch.nn.Module):
    """RoPE on Q and K, repeat_kv, eager causal attention (transformers' LlamaAttention after its
    projections, with its names' structure)."""

    def __init__(self, h, kv, s, d):
        super().__init__()
        self.h, self.kv, self.s, self.d = h, kv, s, d
        cos, sin = rope_tables(s, d)
        self.register_buffer("cos", cos.float())
        self.register_buffer("sin", sin.float())
        mask = torch.full((s, s), torch.finfo(torch.float32).min).triu(1)[None, None]
        self.register_buffer("mask", mask)

    def rope(self, x):
        x1, x2 = x[..., : self.d // 2], x[..., self.d // 2:]
        return x * self.cos.to(x.dtype) + torch.cat((-x2, x1), dim=-1) * self.sin.to(x.dtype)

    def repeat_kv(self, x):
        b, kv, s, d = x.shape
        return x[:, :, None].expand(b, kv, self.h // kv, s, d).reshape(b, self.h, s, d)

    def forward(self, q, k, v):
        q, k = self.rope(q), self.rope(k)
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        w = torch.matmul(q, k.transpose(2, 3)) * self.d ** -0.5 + self.mask.to(q.dtype)
        w = torch.softmax(w.float(), dim=-1).to(q.dtype)
        return torch.matmul(w, v)


def sdpa_times(m, q, k, v, iters, warmup):
    """{backend: ms} of the rotation and SDPA(enable_gqa, is_causal), one call per CUDA graph."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    out = {}
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, be in (("flash", SDPBackend.FLASH_ATTENTION),
                         ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                         ("cudnn", SDPBackend.CUDNN_ATTENTION), ("math", SDPBackend.MATH)):
            def call():
                return F.scaled_dot_product_attention(m.rope(q), m.rope(k), v, is_causal=True,
                                                      enable_gqa=True)
            try:
                with sdpa_kernel([be]):
                    call()
                    torch.cuda.synchronize()
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        call()
                out[name] = cuda_time_ms(graph.replay, iters, warmup)
            except Exception:  # a backend that does not take this dtype/shape: not reported
                pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--orch", default="build/orch")
    ap.add_argument("--out", default="build/bench-gqa")
    ap.add_argument("--precision", default="fp32,fp16")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for (h, kv, s, d) in SHAPES:
        m = LlamaAttentionCore(h, kv, s, d).eval()
        g = torch.Generator().manual_seed(1)
        x = [torch.randn(1, n, s, d, generator=g) for n in (h, kv, kv)]
        tag = f"h{h}_kv{kv}_s{s}_d{d}"
        onnx_path = os.path.join(a.out, f"{tag}.onnx")
        with torch.no_grad():
            torch.onnx.export(m, tuple(x), onnx_path, input_names=["q", "k", "v"],
                              output_names=["o"], opset_version=17, dynamo=False)
            ref = m.double()(*(t.double() for t in x)).numpy()
        m.float()
        for i, n in enumerate("qkv"):
            np.save(os.path.join(a.out, f"{tag}_{n}.npy"), x[i].numpy())
        for prec in a.precision.split(","):
            set_precision(prec)
            art = os.path.join(a.out, f"{tag}_{prec}.orch")
            c = subprocess.run([a.orch, "compile", onnx_path, "-t", "cuda", "-o", art,
                                "--precision", prec, "--db", os.path.join(a.out, "profile.db")],
                               capture_output=True, text=True)
            row = {"shape": [h, kv, s, d], "precision": prec,
                   "fused": [ln.strip() for ln in c.stderr.splitlines()
                             if "fused attention (" in ln and ", chosen" in ln]}
            if c.returncode != 0:
                row["orch_error"] = c.stderr[-500:]
            else:
                outd = os.path.join(a.out, f"{tag}_{prec}_out")
                ins = [f"{n}={os.path.join(a.out, f'{tag}_{n}.npy')}" for n in "qkv"]
                subprocess.run([a.orch, "run", art, "-o", outd] +
                               [z for i in ins for z in ("-i", i)], capture_output=True, text=True)
                got = np.load(os.path.join(outd, "o.npy"))
                row["orch_err"] = float(np.abs(got - ref).max() / np.abs(ref).max())
                js = os.path.join(a.out, f"{tag}_{prec}.json")
                subprocess.run([a.orch, "bench", art, "--iters", str(a.iters), "--warmup",
                                str(a.warmup), "--json", js] + [z for i in ins for z in ("-i", i)],
                               capture_output=True, text=True)
                row["orch_ms"] = json.load(open(js)).get("device_median_ms")
            dt = torch.float16 if prec == "fp16" else torch.float32
            md = LlamaAttentionCore(h, kv, s, d).cuda()
            row["sdpa_ms"] = sdpa_times(md, *(t.cuda().to(dt) for t in x), a.iters, a.warmup)
            best = min(row["sdpa_ms"].values()) if row["sdpa_ms"] else None
            ratio = best / row["orch_ms"] if best and row.get("orch_ms") else None
            print(f"{h:3d}/{kv:<2d} heads x {s:5d} x {d:3d} {prec}: orch {row.get('orch_ms')} ms "
                  f"(err {row.get('orch_err', float('nan')):.1e}); SDPA "
                  + ", ".join(f"{b} {t:.4f}" for b, t in row["sdpa_ms"].items())
                  + (f"; best SDPA / orch {ratio:.2f}x" if ratio else "")
                  + (f"\n    {row['fused'][0]}" if row["fused"] else "\n    no fused attention chosen")
                  + (f"\n    orch FAILED: {row['orch_error']}" if "orch_error" in row else ""))
            rows.append(row)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
