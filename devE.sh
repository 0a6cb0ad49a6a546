#!/bin/bash
export LD_LIBRARY_PATH=$PWD/.bundle/lib:$LD_LIBRARY_PATH; mkdir -p build
M=${1:-segformer_b0}
timeout 280 python3 bench/gpu/run.py --orch .bundle/bin/orch --out /tmp/bg --only $M --baselines eager --iters 20 --warmup 5 > $OUT/bg.log 2>&1
echo "bench rc=$?"; grep -E "cold|^[a-z_0-9]+ +[0-9.]+ +[0-9.]+ " $OUT/bg.log | head
for f in /tmp/bg/*/compile_fp32.log; do grep -E "^time:|^tuning:|^measured on|^tune:" $f | sed "s|^|$(basename $(dirname $f)): |"; done | cut -c1-300
