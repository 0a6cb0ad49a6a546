#!/usr/bin/env bash
# Packs a Release build of orch with the shared libraries the GPU machine may lack into
# .bundle/ (git-ignored), to be named in the device tool's `carry`. On the device:
#   export LD_LIBRARY_PATH=$PWD/.bundle/lib:$LD_LIBRARY_PATH; .bundle/bin/orch ...
set -euo pipefail
cd "$(dirname "$0")/.."
make all >/dev/null
rm -rf .bundle
mkdir -p .bundle/bin .bundle/lib
cp build/orch .bundle/bin/
# The tests that need a GPU (they skip elsewhere), and the generated test models with their
# ONNX Runtime outputs (build/models, from tests/models/gen_models.py), to check -t cuda there.
cp build/tests/unit_cuda_* build/tests/unit_cugen_* .bundle/bin/ 2>/dev/null || true
if [ -d build/models ]; then
    mkdir -p .bundle/models
    cp -r build/models/. .bundle/models/
fi
# Every shared library orch links except the C runtime's own, which the device has (glibc 2.39):
# protobuf-c, libgomp, CBC and its COIN-OR, BLAS/LAPACK and Fortran runtime dependencies.
ldd build/orch | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    case "$name" in
    libc.so.*|libm.so.*|libpthread.so.*|librt.so.*|libdl.so.*|ld-linux*) continue ;;
    # newer on the device and loaded by PyTorch in the same process: never shadow them
    libstdc++.so.*|libgcc_s.so.*|libz.so.*|libbz2.so.*) continue ;;
    esac
    cp -L "$path" .bundle/lib/
done
echo "bundle: $(du -sh .bundle | cut -f1) in .bundle/ (orch + $(ls .bundle/lib | tr '\n' ' '))"
