#!/bin/bash
# Session throughput (CPU, 2 pinned cores, quiet) + bench/gpu artefacts exported and rebuilt.
export LD_LIBRARY_PATH=$PWD/.bundle/lib:$LD_LIBRARY_PATH; mkdir -p build $OUT/u
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | cut -c1-200 > $OUT/cpu.txt
for i in 1 2 3; do taskset -c 0,1 timeout 60 .bundle/bin/unit_session_threads 2>&1 | grep -E "throughput|passed|FAIL"; done > $OUT/threads.log
cat $OUT/threads.log
M=${1:-style_transfer,efficientvit_b0,mobilenet_v2,resnet18,bert_base,vit_b_16,cspdarknet53}
taskset -c 2-15 timeout 400 python3 bench/gpu/run.py --orch .bundle/bin/orch --out /tmp/bg --only $M --baselines eager --iters 20 --warmup 5 > $OUT/bg.log 2>&1
echo "bench rc=$?"; grep -E "^\| |cold|time:" $OUT/bg.log | head -40
ls /tmp/bg/*/model_fp32.orch
taskset -c 2-15 timeout 150 python3 tests/gpu/test_export_cuda.py .bundle/bin/orch --no-cnn $(printf -- '--artefact %s ' /tmp/bg/*/model_fp32.orch) > $OUT/exp.log 2>&1; echo "export rc=$?"; grep -E "^ok|FAIL|passed|launches|identical|cudnn|cuDNN" $OUT/exp.log | cut -c1-250
