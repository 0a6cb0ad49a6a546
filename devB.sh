#!/bin/bash
# Segformer cold compile (stage split kept) + export round trips with the loader's cuDNN.
export LD_LIBRARY_PATH=$PWD/.bundle/lib:$LD_LIBRARY_PATH; mkdir -p build $OUT/c
(ldconfig -p | grep -i "cudnn\|cublasLt"; ls /usr/local/cuda/lib64 | grep -i cudnn; find / -xdev -name "libcudnn.so.9*" 2>/dev/null; find / -xdev -name "cudnn_version*.h" 2>/dev/null) > $OUT/cudnn.txt 2>&1
M=${1:-segformer_b0,mobilenet_v2,resnet18}
timeout 420 python3 bench/gpu/run.py --orch .bundle/bin/orch --out /tmp/bg --only $M --baselines eager --iters 20 --warmup 5 > $OUT/bg.log 2>&1
echo "bench rc=$?"; grep -E "cold" $OUT/bg.log | head
for f in /tmp/bg/*/compile_fp32.log; do cp $f $OUT/c/$(basename $(dirname $f)).log; done
grep -h "time:\|kernels generated\|measured\|wrong\|rejected" $OUT/c/*.log | cut -c1-300 | head -30
timeout 150 python3 tests/gpu/test_export_cuda.py .bundle/bin/orch --no-cnn $(printf -- '--artefact %s ' /tmp/bg/*/model_fp32.orch) > $OUT/exp.log 2>&1; echo "export rc=$?"; grep -E "^ok|FAIL|passed|identical|LIBDIRS|INCDIRS" $OUT/exp.log | cut -c1-250
