#!/bin/bash
# Pipelined NVRTC + measuring: the GPU lab tests, then cold compiles.
export LD_LIBRARY_PATH=$PWD/.bundle/lib:$LD_LIBRARY_PATH; mkdir -p build
for u in unit_cuda_runtime unit_cuda_multi_gpu unit_cuda_configs; do ORCH_REQUIRE_GPU=1 timeout 100 .bundle/bin/$u > $OUT/$u.log 2>&1; echo "$u rc=$? $(tail -1 $OUT/$u.log)"; grep -h "FAIL" $OUT/$u.log | head -5; done
M=${1:-segformer_b0,bert_base,resnet18}
timeout 330 python3 bench/gpu/run.py --orch .bundle/bin/orch --out /tmp/bg --only $M --baselines eager --iters 20 --warmup 5 > $OUT/bg.log 2>&1
echo "bench rc=$?"; grep -E "cold|^[a-z_0-9]+ +[0-9.]+ +[0-9.]+ " $OUT/bg.log | head
for f in /tmp/bg/*/compile_fp32.log; do grep -E "^time:|^tuning:|^measured on" $f | sed "s|^|$(basename $(dirname $f)): |"; done | cut -c1-260
