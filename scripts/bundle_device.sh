#!/usr/bin/env bash
# Packs a Release build of orch with the shared libraries the GPU machine may lack into
# .bundle/ (git-ignored), to be named in the device tool's `carry`. On the device:
#   export LD_LIBRARY_PATH=$PWD/.bundle/lib:$LD_LIBRARY_PATH; .bundle/bin/orch ...
set -euo pipefail
cd "$(dirname "$0")/.."
# BUILD=build-foo packs another Release build directory (configured by the caller) instead.
BUILD=${BUILD:-build}
# BUNDLE=.bundle-foo packs into another git-ignored folder, so two packers do not collide.
BUNDLE=${BUNDLE:-.bundle}
if [ "$BUILD" = build ]; then make all >/dev/null; else cmake --build "$BUILD" -j2 >/dev/null; fi
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE"/bin "$BUNDLE"/lib
cp "$BUILD"/orch "$BUNDLE"/bin/
# The tests that need a GPU (they skip elsewhere) and node_tests; the generated test models with
# their ONNX Runtime outputs (build/models, from tests/models/gen_models.py) and the ONNX node
# tests (build/node_data, from tests/ops/prepare_node_tests.py; 47 MiB, 2 MiB as .tar.xz), to
# check -t cuda there: tests/gpu/run_gpu_tests.sh runs them all from the bundle.
cp "$BUILD"/tests/unit_cuda_* "$BUILD"/tests/unit_cugen_* "$BUILD"/tests/unit_mlp_fused \
    "$BUILD"/tests/unit_attention* "$BUILD"/tests/unit_cudnn* "$BUILD"/tests/unit_backend_ops \
    "$BUILD"/tests/unit_compile_options "$BUILD"/tests/unit_export_cuda \
    "$BUILD"/tests/unit_session_threads "$BUNDLE"/bin/ 2>/dev/null || true
cp "$BUILD"/node_tests "$BUNDLE"/bin/ 2>/dev/null || true
# liborch for the Python package's device test (tests/gpu/test_python_device.py, ORCH_LIBRARY).
cp -L "$BUILD"/liborch.so "$BUNDLE"/lib/ 2>/dev/null || true
data_dir() { # the build's test data folder, else build/'s (a helper's build has none)
    if [ -d "$BUILD/$1" ]; then echo "$BUILD/$1"; elif [ -d "build/$1" ]; then echo "build/$1"; fi
}
# The test models are written afresh into the build folder where the project's venv can (half a
# second): a build/models left from an older checkout lacks the newest models.
if [ -x .venv/bin/python ]; then
    .venv/bin/python tests/models/gen_models.py "$BUILD/models" >/dev/null 2>&1 || true
fi
models=$(data_dir models)
if [ -n "$models" ]; then
    mkdir -p "$BUNDLE"/models
    cp -r "$models"/. "$BUNDLE"/models/
fi
nodes=$(data_dir node_data)
if [ -n "$nodes" ]; then
    tar -C "$(dirname "$nodes")" -cf - "$(basename "$nodes")" --transform 's,^[^/]*,node_data,' |
        xz -6 -T2 -c >"$BUNDLE"/node_data.tar.xz
fi
# Every shared library orch links except the C runtime's own, which the device has (glibc 2.39):
# libgomp, CBC and its COIN-OR, BLAS/LAPACK and Fortran runtime dependencies.
ldd "$BUILD"/orch | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    case "$name" in
    libc.so.*|libm.so.*|libpthread.so.*|librt.so.*|libdl.so.*|ld-linux*) continue ;;
    # newer on the device and loaded by PyTorch in the same process: never shadow them
    libstdc++.so.*|libgcc_s.so.*|libz.so.*|libbz2.so.*) continue ;;
    esac
    cp -L "$path" "$BUNDLE"/lib/
done
echo "bundle: $(du -sh "$BUNDLE" | cut -f1) in $BUNDLE/ (orch + $(ls "$BUNDLE"/lib | tr '\n' ' '))"
