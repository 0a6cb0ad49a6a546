#!/usr/bin/env bash
# Device checks of this session's merged work (not committed).
export LD_LIBRARY_PATH=$PWD/.bundle/lib:$LD_LIBRARY_PATH
export ORCH_REQUIRE_GPU=1
B=.bundle/bin
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
el "unit_cuda_session_device"; timeout 120 $B/unit_cuda_session_device 2>&1 | tail -4
el "python device"; PYTHONPATH=python ORCH_LIBRARY=$PWD/.bundle/lib/liborch.so timeout 150 python3 tests/gpu/test_python_device.py $B/orch 2>&1 | tail -5
el "mlp gated"; for c in gated_cases half_cases onnx_gated chain_boundaries; do ORCH_TEST_ONLY=$c timeout 90 $B/unit_mlp_fused 2>&1 | grep -E "^(ok|FAIL)|check failed|passed" | tail -3; done
el "shapes on cuda"; d=$(mktemp -d); python3 - <<PY
import numpy as np
for b in (1,4,3): np.save("$d/b%d.npy"%b, np.random.rand(b,3,32,32).astype(np.float32))
PY
timeout 120 $B/orch compile examples/tiny_cnn/model.onnx -t cuda -o $d/t.orch --db $d/p.db --top-k 2 --input-shapes image:1x3x32x32 --input-shapes image:4x3x32x32 2>&1 | grep -E "^(kernels|shape set|wrote|error)" | head -5
for b in 1 4 3; do $B/orch run $d/t.orch -i image=$d/b$b.npy -o $d/o$b >/dev/null 2>$d/e$b; echo "batch $b: exit $?"; tail -1 $d/e$b; done
el "gated bench"; timeout 60 $B/unit_mlp_fused --write-model $d/gated.onnx 65536 gated | tail -1
timeout 150 $B/orch compile $d/gated.onnx -t cuda -o $d/gated.orch --db $d/p.db 2>&1 | grep -E "MLP chain|^kernels|^time" | head -6
timeout 60 $B/orch bench $d/gated.orch --iters 200 2>&1 | grep -E "GPU time|predicted|latency" | head -3
el "zoo lstm gru"; timeout $(( 560 - ($(date +%s) - t0) )) python3 bench/zoo/run.py --target cuda --orch $B/orch --out $OUT/zoo --only lstm,gru --iters 100 --warmup 10 --baselines eager,graphs 2>&1 | grep -v "^  measured" | tail -12
el done
