#!/usr/bin/env bash
# `make demo`: describes the shipped example model and runs it on the CPU with orch's reference
# interpreter, checking the result against ONNX Runtime's stored output; then compiles it for
# the CPU target (generated C kernels, tuned and orchestrated) and runs the compiled artefact.
set -euo pipefail
cd "$(dirname "$0")/.."
ORCH=${1:-build/orch}
EX=examples/tiny_cnn
echo "\$ $ORCH info $EX/model.onnx --input-shapes image:1x3x32x32"
"$ORCH" info "$EX/model.onnx" --input-shapes image:1x3x32x32
echo
echo "\$ $ORCH run $EX/model.onnx -i image=$EX/image.npy --expected logits=$EX/logits.npy --repeat 20 -o build/demo-out"
"$ORCH" run "$EX/model.onnx" -i image="$EX/image.npy" --expected logits="$EX/logits.npy" \
    --repeat 20 -o build/demo-out
echo
echo "\$ $ORCH compile $EX/model.onnx --input-shapes image:1x3x32x32 -t cpu -o build/demo-out/tiny_cnn.orch"
"$ORCH" compile "$EX/model.onnx" --input-shapes image:1x3x32x32 -t cpu -o build/demo-out/tiny_cnn.orch
echo
echo "\$ $ORCH run build/demo-out/tiny_cnn.orch -i image=$EX/image.npy --expected logits=$EX/logits.npy --repeat 20"
"$ORCH" run build/demo-out/tiny_cnn.orch -i image="$EX/image.npy" --expected logits="$EX/logits.npy" \
    --repeat 20
