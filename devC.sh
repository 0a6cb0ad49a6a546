#!/bin/bash
# 5-D GridSample on the GPU, compile time with right-sized NVRTC units, the last bench/gpu exports.
export LD_LIBRARY_PATH=$PWD/.bundle/lib:$LD_LIBRARY_PATH; mkdir -p build $OUT/c
tar -C build -xJf .bundle/node_data.tar.xz
(ORCH_REQUIRE_GPU=1 timeout 120 .bundle/bin/unit_cuda_opaque 2>&1 | tail -3
 timeout 200 .bundle/bin/node_tests build/node_data --engine compiled --target cuda --filter gridsample --xfail tests/ops/node_expected_failures.txt 2>&1 | tail -3
 ORCH_REQUIRE_GPU=1 timeout 200 .bundle/bin/unit_cugen_models .bundle/models/v_volumetric 2>&1 | tail -3) > $OUT/gs.log 2>&1 &
M=${1:-bert_base,segformer_b0,mlp_sin_sigmoid,transformer_block}
timeout 430 python3 bench/gpu/run.py --orch .bundle/bin/orch --out /tmp/bg --only $M --baselines eager --iters 20 --warmup 5 > $OUT/bg.log 2>&1
echo "bench rc=$?"; grep -E "cold" $OUT/bg.log | head
for f in /tmp/bg/*/compile_fp32.log; do grep -E "^time:|^tuning:|^measured on" $f | sed "s|^|$(basename $(dirname $f)): |"; done | cut -c1-260
wait; cat $OUT/gs.log
timeout 100 python3 tests/gpu/test_export_cuda.py .bundle/bin/orch --no-cnn --artefact /tmp/bg/mlp_sin_sigmoid/model_fp32.orch --artefact /tmp/bg/transformer_block/model_fp32.orch > $OUT/exp.log 2>&1; echo "export rc=$?"; grep -E "^ok|FAIL|passed" $OUT/exp.log | cut -c1-250
