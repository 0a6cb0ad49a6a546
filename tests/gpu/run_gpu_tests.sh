#!/usr/bin/env bash
# The CUDA target's tests on a machine with an NVIDIA GPU, in four parts, each ending with its own
# "PART: N passed, N failed" line and all summed in the closing "N passed, N failed" (non-zero exit
# on any failure, a crash, or a binary that is missing or does not build):
#   --units      the unit tests that touch CUDA (tests/unit/cuda/, and test_backend_ops.c and
#                test_compile_options.c of tests/unit/core/: every kernel class against the
#                primitive interpreter on random shapes incl. odd sizes, the lab, sessions);
#   --models     every generated test model (tests/models/gen_models.py's folder) compiled with
#                `orch compile -t cuda` and run with `orch run --expected` against its stored ONNX
#                Runtime outputs (tests/models/run_models.py --engine compiled --target cuda);
#   --nodes      the ONNX backend node tests compiled with -t cuda and run through a session
#                (node_tests --engine compiled --target cuda), sharded over the cores, with the
#                expected failures of tests/ops/node_expected_failures.txt (and
#                tests/gpu/node_expected_failures_cuda.txt where it exists);
#   --sanitizer  compute-sanitizer memcheck of `orch run` on three compiled models: 0 errors
#                (skipped with a line saying so where compute-sanitizer is not installed).
# No part named: all four. Where no GPU is listed by nvidia-smi the GPU parts print a skip line
# and count nothing (the unit tests skip by themselves); ORCH_REQUIRE_GPU=1 makes that a failure.
#
# Binaries: from a bundle (scripts/bundle_device.sh: DIR/bin with orch, node_tests and the unit
# tests, DIR/lib for the libraries the GPU machine lacks, DIR/models, DIR/node_data.tar.xz) when
# --bundle DIR is given or ./.bundle/bin/orch exists (--no-bundle: never); else built here in
# build-gpu (Release; a build that cannot be configured or fails is a failure). Test data: the
# bundle's, else build/models and build/node_data; without node data,
# tests/ops/prepare_node_tests.py writes it (needs onnx).
# NVRTC is found through CUDA_HOME, the loader path, or a pip wheel's nvidia/*/lib directory.
#
# Usage: tests/gpu/run_gpu_tests.sh [--units] [--models] [--nodes] [--sanitizer]
#            [--bundle DIR | --no-bundle] [--seed N] [--logs DIR] [N]   (a bare N is the seed)
# Environment: MODELS_TOPK (configs per kernel, default 2), MODELS_PRECISION (fp32, the default;
# fp16 / bf16: checked at run_models.py's tolerance for it; MODELS_HALF_STORAGE=1 adds
# --half-storage), MODELS_SHARDS (parallel compiles,
# default 3), NODE_FILTER (only node tests whose name contains it), NODE_TIMEOUT /
# MODELS_TIMEOUT / UNIT_TIMEOUT (seconds per node-test shard / per model / per unit binary).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
BUILD=$ROOT/build-gpu
SEED=$(date +%s)
JOBS=$(nproc 2>/dev/null || echo 2)
BUNDLE=""
LOGS=""
PARTS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --units | --models | --nodes | --sanitizer) PARTS+=("${1#--}") ;;
    --bundle) BUNDLE=$2; shift ;;
    --no-bundle) BUNDLE=none ;;
    --seed) SEED=$2; shift ;;
    --logs) LOGS=$2; shift ;;
    [0-9]*) SEED=$1 ;;
    *) echo "usage: $0 [--units] [--models] [--nodes] [--sanitizer] [--bundle DIR | --no-bundle] [--seed N] [--logs DIR]"; exit 2 ;;
    esac
    shift
done
[ ${#PARTS[@]} -eq 0 ] && PARTS=(units models nodes sanitizer)
want() { [[ " ${PARTS[*]} " == *" $1 "* ]]; }
if [ -z "$BUNDLE" ] && [ -x "$ROOT/.bundle/bin/orch" ]; then BUNDLE=$ROOT/.bundle; fi
if [ "$BUNDLE" = none ]; then BUNDLE=""; elif [ -n "$BUNDLE" ]; then BUNDLE=$(cd "$BUNDLE" && pwd) || exit 2; fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/orch-gpu-tests-XXXXXX")
LOGDIR=${LOGS:-$WORK/logs}
mkdir -p "$LOGDIR"
PY=python3
[ -x "$ROOT/.venv/bin/python" ] && PY=$ROOT/.venv/bin/python

total_pass=0
total_fail=0
SUMMARY=()
# part_done NAME PASSED FAILED [NOTE]: the part's summary line, added to the totals.
part_done() {
    total_pass=$((total_pass + $2))
    total_fail=$((total_fail + $3))
    local line="$1: $2 passed, $3 failed${4:+ ($4)}"
    SUMMARY+=("$line")
    echo "== $line"
}
# counts FILE: "P F" from the last "N passed, N failed" line of FILE ("" when there is none).
counts() {
    grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" 2>/dev/null | tail -n 1 |
        sed -E 's/^([0-9]+) passed, ([0-9]+) failed.*/\1 \2/'
}

# Where nvidia-smi lists a GPU, the tests must find it: their GPU cases fail instead of skipping.
HAVE_GPU=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    export ORCH_REQUIRE_GPU=1
    HAVE_GPU=1
fi
# gpu_part NAME: true where the GPU part may run; else its skip line (a failure under
# ORCH_REQUIRE_GPU=1 set by the caller).
gpu_part() {
    [ "$HAVE_GPU" = 1 ] && return 0
    if [ "${ORCH_REQUIRE_GPU:-0}" = 1 ]; then
        part_done "$1" 0 1 "ORCH_REQUIRE_GPU=1 but nvidia-smi lists no GPU"
    else
        echo "skip $1: no GPU (nvidia-smi lists none)"
        SUMMARY+=("$1: skipped (no GPU)")
    fi
    return 1
}

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

# ---- the binaries ----

UNITS=()
for src in tests/unit/cuda/test_*.c tests/unit/core/test_backend_ops.c \
    tests/unit/core/test_compile_options.c; do
    [ -e "$src" ] || continue
    base=$(basename "$src" .c)
    UNITS+=("unit_${base#test_}")
done
build_failed=0
if [ -n "$BUNDLE" ]; then
    echo "binaries from the bundle $BUNDLE"
    export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    BIN=$BUNDLE/bin
    ORCH=$BIN/orch
    NODE_TESTS=$BIN/node_tests
    MODELS=$BUNDLE/models
    NODE_ARCHIVE=$BUNDLE/node_data.tar.xz
else
    BIN=$BUILD/tests
    ORCH=$BUILD/orch
    NODE_TESTS=$BUILD/node_tests
    MODELS=$ROOT/build/models
    NODE_ARCHIVE=""
    mkdir -p "$BUILD"
    if cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$BUILD/configure.log" 2>&1; then
        if ! cmake --build "$BUILD" -j"$JOBS" --target orch node_tests "${UNITS[@]}" >"$BUILD/build.log" 2>&1; then
            tail -30 "$BUILD/build.log"
            build_failed=1
        fi
    else
        # The CUDA sources now need the whole library (the plan, candidates, protobuf-c), so
        # there is no partial build: a machine without the dependencies runs a bundle.
        tail -5 "$BUILD/configure.log"
        echo "FAIL build: cannot configure $BUILD (its configure.log); where protobuf-c/CBC/SQLite" \
            "are missing, pack a bundle elsewhere (scripts/bundle_device.sh) and pass --bundle DIR"
        build_failed=1
    fi
fi

# ---- units ----

run_units() {
    local passed=0 failed=$build_failed t rc c
    for t in "${UNITS[@]}"; do
        if [ ! -x "$BIN/$t" ]; then
            echo "FAIL $t: not built"
            failed=$((failed + 1))
            continue
        fi
        echo "-- $t (seed $SEED)"
        ORCH_TEST_SEED=$SEED timeout "${UNIT_TIMEOUT:-1800}" "$BIN/$t" "$SEED" >"$LOGDIR/$t.log" 2>&1
        rc=$?
        grep -E '^(FAIL|skip|GPU|  check failed)' "$LOGDIR/$t.log" | head -n 20
        c=$(counts "$LOGDIR/$t.log")
        if [ -z "$c" ]; then
            if [ "$rc" -eq 124 ]; then
                echo "FAIL $t: timed out after ${UNIT_TIMEOUT:-1800} s (UNIT_TIMEOUT) before its summary"
            else
                echo "FAIL $t: exited with $rc before its summary"
            fi
            tail -n 5 "$LOGDIR/$t.log"
            echo
            failed=$((failed + 1))
            continue
        fi
        echo "   $t: ${c% *} passed, ${c#* } failed"
        passed=$((passed + ${c% *}))
        failed=$((failed + ${c#* }))
        if [ "$rc" -ne 0 ] && [ "${c#* }" -eq 0 ]; then
            echo "FAIL $t: exit status $rc"
            failed=$((failed + 1))
        fi
    done
    # The Python package on device tensors (DLPack), where liborch and PyTorch are at hand.
    local lib=$BUILD/liborch.so
    [ -n "$BUNDLE" ] && lib=$BUNDLE/lib/liborch.so
    if [ -f "$lib" ]; then
        echo "-- python_device"
        PYTHONPATH=$ROOT/python ORCH_LIBRARY=$lib timeout "${UNIT_TIMEOUT:-1800}" \
            python3 "$ROOT"/tests/gpu/test_python_device.py >"$LOGDIR/python_device.log" 2>&1
        rc=$?
        grep -E '^(FAIL|skip)' "$LOGDIR/python_device.log" | head -n 20
        c=$(counts "$LOGDIR/python_device.log")
        if [ -z "$c" ] || { [ "$rc" -ne 0 ] && [ "${c#* }" -eq 0 ]; }; then
            echo "FAIL python_device: exit status $rc"
            tail -n 5 "$LOGDIR/python_device.log"
            failed=$((failed + 1))
        else
            echo "   python_device: ${c% *} passed, ${c#* } failed"
            passed=$((passed + ${c% *}))
            failed=$((failed + ${c#* }))
        fi
    fi
    part_done units "$passed" "$failed"
}

# ---- models ----

ARTEFACTS=$WORK/artefacts
run_models() {
    gpu_part "models (-t cuda)" || return
    if [ ! -x "$ORCH" ] || [ ! -d "$MODELS" ]; then
        part_done "models (-t cuda)" 0 1 "no orch ($ORCH) or no models ($MODELS: tests/models/gen_models.py)"
        return
    fi
    local n=${MODELS_SHARDS:-3} k pids=() p=0 f=0 c
    local start=$SECONDS
    for ((k = 0; k < n; k++)); do
        PYTHONUNBUFFERED=1 "$PY" tests/models/run_models.py "$ORCH" "$MODELS" --engine compiled \
            --target cuda --top-k "${MODELS_TOPK:-2}" --keep "$ARTEFACTS" --db "$WORK/models-$k.db" \
            --timeout "${MODELS_TIMEOUT:-900}" --shard "$k/$n" --precision "${MODELS_PRECISION:-fp32}" \
            ${MODELS_HALF_STORAGE:+--half-storage} \
            >"$LOGDIR/models-$k.log" 2>&1 &
        pids+=($!)
    done
    for k in "${!pids[@]}"; do
        wait "${pids[$k]}"
        # ok/FAIL lines, each failure with the first lines of orch's output under it
        awk '/^(ok|FAIL) / {bad = /^FAIL/; n = 0; print; next} bad && n++ < 10' "$LOGDIR/models-$k.log"
        c=$(counts "$LOGDIR/models-$k.log")
        [ -z "$c" ] && { echo "FAIL models shard $k: no summary"; tail -n 5 "$LOGDIR/models-$k.log"; c="0 1"; }
        p=$((p + ${c% *}))
        f=$((f + ${c#* }))
    done
    part_done "models (-t cuda)" "$p" "$f" "$((SECONDS - start)) s"
}

# ---- node tests ----

node_data() { # echoes the node data folder, preparing it when needed
    if [ -n "$NODE_ARCHIVE" ] && [ -f "$NODE_ARCHIVE" ]; then
        tar -xJf "$NODE_ARCHIVE" -C "$WORK" 2>/dev/null ||
            "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$NODE_ARCHIVE" "$WORK"
        echo "$WORK/node_data"
    elif [ -z "$BUNDLE" ] && [ -d "$ROOT/build/node_data" ]; then
        echo "$ROOT/build/node_data"
    else
        "$PY" tests/ops/prepare_node_tests.py "$WORK/node_data" >"$LOGDIR/prepare-node.log" 2>&1 &&
            echo "$WORK/node_data"
    fi
}

run_nodes() {
    gpu_part "node tests (-t cuda)" || return
    local data start=$SECONDS
    data=$(node_data)
    if [ ! -x "$NODE_TESTS" ] || [ -z "$data" ] || [ ! -d "$data" ]; then
        part_done "node tests (-t cuda)" 0 1 "no node_tests ($NODE_TESTS) or no node data (see $LOGDIR/prepare-node.log)"
        return
    fi
    local xf=(--xfail tests/ops/node_expected_failures.txt) k pids=() p=0 f=0 c
    [ -f tests/gpu/node_expected_failures_cuda.txt ] && xf+=(--xfail tests/gpu/node_expected_failures_cuda.txt)
    for ((k = 0; k < JOBS; k++)); do
        timeout "${NODE_TIMEOUT:-3000}" "$NODE_TESTS" "$data" --engine compiled --target cuda \
            --shard "$k/$JOBS" --filter "${NODE_FILTER:-}" "${xf[@]}" -v >"$LOGDIR/nodes-$k.log" 2>&1 &
        pids+=($!)
    done
    for k in "${!pids[@]}"; do
        wait "${pids[$k]}"
        grep -E '^(FAIL|XPASS)' "$LOGDIR/nodes-$k.log" | cut -c1-400
        c=$(counts "$LOGDIR/nodes-$k.log")
        if [ -z "$c" ]; then # timed out or crashed: its cases so far, and one failure for the shard
            echo "FAIL node tests shard $k: no summary (timed out or crashed) after:"
            tail -n 2 "$LOGDIR/nodes-$k.log"
            c="$(grep -c '^ok ' "$LOGDIR/nodes-$k.log") $(($(grep -cE '^(FAIL|XPASS)' "$LOGDIR/nodes-$k.log") + 1))"
        fi
        p=$((p + ${c% *}))
        f=$((f + ${c#* }))
    done
    local xfailed
    xfailed=$(cat "$LOGDIR"/nodes-*.log | sed -nE 's/.*: [0-9]+ passed, ([0-9]+) expected failures.*/\1/p' | awk '{s += $1} END {print s + 0}')
    part_done "node tests (-t cuda)" "$p" "$f" "$xfailed expected failures, $((SECONDS - start)) s"
}

# ---- compute-sanitizer ----

SAN_MODELS=(d_mlp a_convnet b_transformer)
run_sanitizer() {
    gpu_part "sanitizer" || return
    local san=""
    for s in compute-sanitizer "${CUDA_HOME:-/nonexistent}/bin/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer; do
        if command -v "$s" >/dev/null 2>&1; then san=$(command -v "$s"); break; fi
    done
    if [ -z "$san" ]; then
        echo "skip sanitizer: compute-sanitizer is not installed (not on PATH, nor in \$CUDA_HOME/bin or /usr/local/cuda/bin)"
        SUMMARY+=("sanitizer: skipped (no compute-sanitizer)")
        return
    fi
    local p=0 f=0 m dir art args errs rc
    mkdir -p "$ARTEFACTS"
    for m in "${SAN_MODELS[@]}"; do
        dir=$MODELS/$m
        art=$ARTEFACTS/$m.orch
        if [ ! -f "$art" ]; then # --models did not run (or failed): compile it here
            # shellcheck disable=SC2046
            "$ORCH" compile "$dir/model.onnx" -t cuda -o "$art" --db "$WORK/san.db" --top-k 1 --quiet \
                $(grep -oE -- '--input-shapes[ =][^ #]+' "$dir/args.txt" 2>/dev/null) >"$LOGDIR/san-$m.compile.log" 2>&1
        fi
        if [ ! -f "$art" ]; then
            echo "FAIL sanitizer $m: no artefact ($LOGDIR/san-$m.compile.log)"
            tail -n 3 "$LOGDIR/san-$m.compile.log"
            f=$((f + 1))
            continue
        fi
        args=()
        while IFS=$'\t' read -r kind name file; do
            [ "$kind" = input ] && args+=(-i "$name=$dir/$file")
        done <"$dir/io.txt"
        "$san" --tool memcheck --leak-check no --print-limit 20 "$ORCH" run "$art" "${args[@]}" >"$LOGDIR/san-$m.log" 2>&1
        rc=$?
        errs=$(sed -nE 's/.*ERROR SUMMARY: ([0-9]+) error.*/\1/p' "$LOGDIR/san-$m.log" | tail -n 1)
        if [ "$rc" -eq 0 ] && [ "${errs:-x}" = 0 ]; then
            echo "ok sanitizer $m: memcheck 0 errors"
            p=$((p + 1))
        else
            echo "FAIL sanitizer $m: exit $rc, memcheck ${errs:-no} error summary"
            grep -E 'Invalid|ERROR|error' "$LOGDIR/san-$m.log" | head -n 12
            f=$((f + 1))
        fi
    done
    part_done "sanitizer (memcheck)" "$p" "$f"
}

want units && run_units
want models && run_models
want nodes && run_nodes
want sanitizer && run_sanitizer

echo
for s in "${SUMMARY[@]}"; do echo "  $s"; done
rm -rf "$WORK"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
