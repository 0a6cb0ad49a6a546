#!/usr/bin/env bash
# Builds orch in build-gpu (Release) and runs the unit tests that touch CUDA (tests/unit/test_cuda*.c)
# on a machine with an NVIDIA GPU, then prints the sums "N passed, N failed" (non-zero exit on any
# failure, a crash, or a test binary that does not build). Where the full build cannot be configured
# (a bare GPU machine without protobuf-c/CBC/SQLite), each CUDA test is built on its own with cc from
# the sources it needs (src/base/common.c, src/target/cuda/*.c). NVRTC is found through CUDA_HOME, the
# loader path, or a pip wheel's nvidia/*/lib directory (PyTorch installs one).
# Usage: tests/gpu/run_gpu_tests.sh [seed]     (ORCH_GPU_STANDALONE=1: skip the full build)
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BUILD=$ROOT/build-gpu
SEED=${1:-$(date +%s)}
JOBS=$(nproc 2>/dev/null || echo 2)

# Where nvidia-smi lists a GPU, the tests must find it: their GPU cases fail instead of skipping.
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    export ORCH_REQUIRE_GPU=1
fi

# NVRTC from a pip wheel when neither CUDA_HOME nor the loader knows one.
if [ -z "${CUDA_HOME:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so' && [ ! -e /usr/local/cuda/lib64/libnvrtc.so ]; then
    for py in python3 python; do
        command -v "$py" >/dev/null || continue
        for d in $("$py" -c 'import site, sys; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
            for lib in "$d"/nvidia/cuda_nvrtc/lib "$d"/nvidia/cu13/lib "$d"/nvidia/cu12/lib; do
                if ls "$lib"/libnvrtc.so* >/dev/null 2>&1; then
                    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
                    echo "NVRTC from $lib"
                    break 3
                fi
            done
        done
    done
fi

TESTS=()
for src in tests/unit/test_cuda*.c; do
    [ -e "$src" ] || continue
    base=$(basename "$src" .c)
    TESTS+=("unit_${base#test_}")
done
if [ ${#TESTS[@]} -eq 0 ]; then
    echo "no CUDA tests found (tests/unit/test_cuda*.c)"
    echo "0 passed, 1 failed"
    exit 1
fi

BIN=$BUILD/tests
build_failed=0
mkdir -p "$BUILD"
if [ -z "${ORCH_GPU_STANDALONE:-}" ] &&
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$BUILD/configure.log" 2>&1; then
    if ! cmake --build "$BUILD" -j"$JOBS" --target "${TESTS[@]}" >"$BUILD/build.log" 2>&1; then
        tail -30 "$BUILD/build.log"
        build_failed=1
    fi
else
    echo "building the CUDA tests on their own (full build skipped or unavailable: $BUILD/configure.log)"
    BIN=$BUILD/standalone
    mkdir -p "$BIN"
    for t in "${TESTS[@]}"; do
        if ! ${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Iinclude -Isrc -Itests/unit \
            "tests/unit/test_${t#unit_}.c" src/target/cuda/cuda_api.c src/target/cuda/nvrtc.c src/base/*.c \
            -ldl -lm -lpthread -o "$BIN/$t" 2>"$BIN/$t.log"; then
            echo "cannot build $t standalone:"
            head -20 "$BIN/$t.log"
        fi
    done
fi

passed=0
failed=$build_failed
for t in "${TESTS[@]}"; do
    if [ ! -x "$BIN/$t" ]; then
        echo "FAIL $t: not built"
        failed=$((failed + 1))
        continue
    fi
    echo "== $t (seed $SEED)"
    out=$("$BIN/$t" "$SEED" 2>&1)
    rc=$?
    echo "$out"
    line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -1)
    if [ -z "$line" ]; then
        echo "FAIL $t: exited with $rc before its summary"
        failed=$((failed + 1))
        continue
    fi
    p=${line%% passed*}
    f=${line#*passed, }
    f=${f%% failed*}
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $t: exit status $rc"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
