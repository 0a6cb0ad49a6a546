#!/usr/bin/env bash
# Runs every test of `make test`: builds orch (Release, warnings as errors), prepares the test
# data (ONNX node tests, generated models with ONNX Runtime outputs, the bad-input corpus, the
# protobuf codec's fixtures), runs
# all suites (node tests and models on both engines: per operator, and per primitive after
# fission; the models also orchestrated and run kernel by kernel); then builds again with
# ASan+UBSan and runs the suites again; then fuzzes the loader for a bounded time. Prints one
# summary line per suite and ends with "N passed, N failed".
# Environment: FUZZ_SECONDS (default 60), SKIP_ASAN=1 to skip the sanitizer pass.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
JOBS=$(nproc 2>/dev/null || echo 2)
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
LOGDIR=$ROOT/build/test-logs
total_pass=0
total_fail=0
failed_suites=()

build() { # build DIR extra-cmake-args...
    local dir=$1
    shift
    cmake -S "$ROOT" -B "$dir" -DORCH_WERROR=ON "$@" >"$LOGDIR/cmake-$(basename "$dir").log" 2>&1 &&
        cmake --build "$dir" -j "$JOBS" >"$LOGDIR/build-$(basename "$dir").log" 2>&1
}

# suite NAME COMMAND...: runs a suite, shows its failures and its closing count line.
suite() {
    local name=$1
    shift
    local log="$LOGDIR/$name.log" start=$SECONDS
    "$@" >"$log" 2>&1
    report "$name" $? $((SECONDS - start))
}

# report NAME RC SECONDS: counts a finished suite (its log in LOGDIR) and prints its line.
report() {
    local name=$1 rc=$2 secs=$3
    local log="$LOGDIR/$name.log"
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    local p f
    p=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")
    if [ -z "$line" ]; then # a tool without a count line (the fuzzer): its exit status decides
        p=$((rc == 0 ? 1 : 0)); f=$((rc == 0 ? 0 : 1)); line="(exit $rc)"
    fi
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    printf '%-28s %s  [%ds]\n' "$name" "$line" "$secs"
    if [ "$f" -ne 0 ]; then
        failed_suites+=("$name")
        grep -E '^(FAIL|XPASS|not ok|ERROR)|ERROR: AddressSanitizer|runtime error:' "$log" | head -n 40 | sed 's/^/    /'
        echo "    (full log: $log)"
    fi
}

mkdir -p build
mkdir -p "$LOGDIR"
echo "== build (Release) =="
if ! build "$ROOT/build" -DCMAKE_BUILD_TYPE=Release; then
    tail -n 40 "$LOGDIR"/build-build.log "$LOGDIR"/cmake-build.log
    echo "0 passed, 1 failed"
    exit 1
fi

# The source tree's layering: every include points down the pipeline (tests/layout).
suite layers "$PY" tests/layout/check_layers.py

echo "== test data =="
"$PY" tests/ops/prepare_node_tests.py build/node_data >"$LOGDIR/prepare-node.log" 2>&1 || { cat "$LOGDIR/prepare-node.log"; exit 1; }
tail -n 1 "$LOGDIR/prepare-node.log"
"$PY" tests/ops/gen_op_cases.py build/op_cases >"$LOGDIR/gen-op-cases.log" 2>&1 || { cat "$LOGDIR/gen-op-cases.log"; exit 1; }
"$PY" tests/models/gen_models.py build/models >"$LOGDIR/gen-models.log" 2>&1 || { cat "$LOGDIR/gen-models.log"; exit 1; }
"$PY" tests/bad/make_corpus.py build/bad >"$LOGDIR/make-bad.log" 2>&1 || { cat "$LOGDIR/make-bad.log"; exit 1; }
"$PY" tests/unit/core/gen_pb_fixtures.py build/pb_fixtures >"$LOGDIR/gen-pb-fixtures.log" 2>&1 ||
    { cat "$LOGDIR/gen-pb-fixtures.log"; exit 1; }

# The suites run JOBS at a time (each is single-threaded for most of its run: NVRTC, the C
# compiler, the interpreters; on 2 cores a serial run left one idle) and are reported in the
# order they were started once pool_wait has seen them all end. They share nothing on disk
# (temporary files come from mkdtemp or carry the process id).
POOL=()
pool_start() { # pool_start NAME COMMAND...
    local name=$1
    shift
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    (
        start=$SECONDS
        "$@" >"$LOGDIR/$name.log" 2>&1
        echo "$? $((SECONDS - start))" >"$LOGDIR/$name.rc"
    ) &
    POOL+=("$name")
}
pool_wait() {
    wait
    local name rc secs
    for name in "${POOL[@]}"; do
        rc=1 secs=0
        [ -f "$LOGDIR/$name.rc" ] && read -r rc secs <"$LOGDIR/$name.rc"
        rm -f "$LOGDIR/$name.rc"
        report "$name" "$rc" "$secs"
    done
    POOL=()
}

# The suites that take longest start first (on 2 cores a long one started last leaves the other
# core idle), in shards where one would dominate.
LONG_UNITS="unit_attention_cuda unit_cugen_linear_compile unit_cgen_linear unit_mlp_fused
unit_cugen_compile unit_attention unit_cgen_pointwise unit_orchestrate"

run_suites() { # run_suites BUILD_DIR LABEL
    local dir=$1 label=$2 t k
    local models=(build/models) xfail=(--xfail tests/ops/node_expected_failures.txt)
    if [ "$label" = release ]; then
        # The CPU target end to end: every generated model compiled (C kernels, tuning, plan)
        # and run against ONNX Runtime's outputs.
        for k in 0 1; do
            pool_start "$label:models_compiled.${k}of2" "$PY" tests/models/run_models.py \
                "$dir/orch" "${models[@]}" --engine compiled --shard "$k/2"
        done
        # Every other node test compiled for the CPU target (one compile per case: the C
        # compiler's minutes; make test-node-compiled compiles them all).
        for k in 0 2; do
            pool_start "$label:node_tests_compiled.${k}of4" "$dir/node_tests" build/node_data \
                --engine compiled --shard "$k/4" "${xfail[@]}"
        done
    else
        # Under the sanitizers every third model: the C compiler's minutes are the Release pass's.
        pool_start "$label:models_compiled.0of3" "$PY" tests/models/run_models.py "$dir/orch" \
            "${models[@]}" --engine compiled --shard 0/3
    fi
    for t in $LONG_UNITS; do
        [ -x "$dir/tests/$t" ] && pool_start "$label:$t" "$dir/tests/$t"
    done
    if [ "$label" = release ]; then
        # The CUDA target: every kernel of the generated models emitted, and a sample compiled
        # by NVRTC for sm_90a (no GPU needed; skips without NVRTC). Release only: NVRTC's time.
        pool_start "$label:cugen_models" "$dir/tests/unit_cugen_models" "${models[@]}"
        # The Python package as a user gets it: pip install . into a fresh venv, results against
        # ONNX Runtime. And the installed libraries as an embedding program gets them: make
        # install into a temporary prefix, the C examples built with pkg-config alone.
        pool_start "$label:python" scripts/test_python.sh build/models
        pool_start "$label:install" tests/install/test_install.sh "$dir"
    fi
    # The compile/run/bench/db commands incl. a SIGKILLed compile resumed, damaged artefacts.
    pool_start "$label:compile_cli" "$PY" tests/compile/test_compile_cli.py "$dir/orch" \
        "${models[@]}"
    # One artefact for several input shapes: every plan against ONNX Runtime, others refused.
    pool_start "$label:shapes_cli" "$PY" tests/compile/test_shapes_cli.py "$dir/orch"
    # orch export: trees built with make and run, bit for bit against orch run; the Release
    # pass also over the generated models, in two shards (one compile and one C build each).
    if [ "$label" = release ]; then
        for k in 0 1; do
            pool_start "$label:export_cli.${k}of2" "$PY" tests/compile/test_export.py \
                "$dir/orch" "${models[@]}" --shard "$k/2"
        done
    else
        pool_start "$label:export_cli" "$PY" tests/compile/test_export.py "$dir/orch"
    fi
    # A plan whose Winograd F(4x4) kernels miss the end-to-end check solved again without them.
    pool_start "$label:reduced_exactness" "$PY" tests/compile/test_reduced_exactness.py \
        "$dir/orch"
    # A 5,000-node elementwise chain compiled and run: its compile time and memory (linear in
    # the model's size) are printed on the suite's line.
    pool_start "$label:long_chain" "$PY" tests/compile/long_chain.py "$dir/orch" 5000
    for t in "$dir"/tests/unit_*; do
        [[ " $(echo $LONG_UNITS) " == *" $(basename "$t") "* ]] && continue
        [ -x "$t" ] && pool_start "$label:$(basename "$t")" "$t"
    done
    pool_start "$label:node_tests" "$dir/node_tests" build/node_data "${xfail[@]}"
    pool_start "$label:node_tests_prims" "$dir/node_tests" build/node_data --engine prims \
        "${xfail[@]}"
    pool_start "$label:op_cases" "$dir/node_tests" build/op_cases \
        --xfail tests/ops/op_cases_expected_failures.txt
    pool_start "$label:op_cases_prims" "$dir/node_tests" build/op_cases --engine prims \
        --xfail tests/ops/op_cases_expected_failures.txt
    # The NaN / infinity / signed-zero cases (docs/numerics.md) compiled for the CPU target and
    # on the plan engine: with the two above, every engine on one semantics.
    pool_start "$label:op_cases_nan_compiled" "$dir/node_tests" build/op_cases --engine compiled \
        --filter test_nan_ --xfail tests/ops/op_cases_expected_failures.txt
    pool_start "$label:op_cases_nan_plan" "$PY" tests/ops/run_cases_cli.py "$dir/orch" \
        build/op_cases --engine plan --filter test_nan_
    pool_start "$label:models" "$PY" tests/models/run_models.py "$dir/orch" "${models[@]}"
    pool_start "$label:models_prims" "$PY" tests/models/run_models.py "$dir/orch" \
        "${models[@]}" --engine prims
    pool_start "$label:models_prims_attention" "$PY" tests/models/run_models.py "$dir/orch" \
        "${models[@]}" --engine prims --attention-rewrite
    # Orchestration on every generated model: the selection run kernel by kernel must give the
    # primitive interpreter's outputs bit for bit (tests/unit/core/test_plan_exec.c, models mode).
    pool_start "$label:models_plan" "$dir/tests/unit_plan_exec" "${models[@]}"
    # The plan and runtime session on every generated model (interpreted kernels, real artefacts).
    pool_start "$label:models_session" "$dir/tests/unit_plan" "${models[@]}"
    pool_start "$label:models_plan_ort" "$PY" tests/models/run_models.py "$dir/orch" \
        "${models[@]}" --engine plan
    pool_start "$label:bad_inputs" "$PY" tests/bad/run_bad.py "$dir/orch" build/bad
    # The protobuf codec against Google's protobuf (the fixtures of tests/unit/core).
    pool_start "$label:pb_codec_fixtures" "$dir/tests/unit_pb_codec" build/pb_fixtures
    pool_wait
}

echo "== suites (Release) =="
# NVRTC's sweeps of the linear and MLP-chain kernels and of the models' kernels emit every
# kernel but compile for the described H100 (sm_90a) alone, and one kernel in eight of each
# graph; `make test-nvrtc` compiles them all, for the A100 (sm_80) too (half an hour of NVRTC
# on 2 cores).
export ORCH_CUGEN_SM90_ONLY=1 ORCH_CUGEN_SAMPLE=8
run_suites "$ROOT/build" release

if [ "${SKIP_ASAN:-0}" != 1 ]; then
    echo "== build (ASan+UBSan) =="
    if build "$ROOT/build-asan" -DCMAKE_BUILD_TYPE=Debug -DORCH_SANITIZE=ON; then
        echo "== suites (ASan+UBSan) =="
        export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
        # CBC 2.10 (Debian) leaks cut objects inside its own libraries although every model is
        # deleted (OsiRowCut::clone, CoinPackedVector::reserve); leaks of ours are still reported.
        printf 'leak:%s\n' libCbc.so libCbcSolver.so libOsi libClp libCgl.so libCoinUtils.so \
            >"$LOGDIR/lsan-cbc.supp"
        export LSAN_OPTIONS=suppressions=$LOGDIR/lsan-cbc.supp
        # The CUDA emitters run under the sanitizers; NVRTC, which takes the same minutes in
        # either build, compiled their kernels in the Release pass.
        export ORCH_CUGEN_EMIT_ONLY=1
        run_suites "$ROOT/build-asan" asan
    else
        tail -n 40 "$LOGDIR/build-build-asan.log"
        total_fail=$((total_fail + 1))
        failed_suites+=("asan-build")
    fi
fi

if [ "$FUZZ_SECONDS" -gt 0 ]; then
    echo "== fuzz (${FUZZ_SECONDS}s) =="
    suite "fuzz_load" scripts/fuzz.sh "$FUZZ_SECONDS" build/node_data
fi

echo
if [ ${#failed_suites[@]} -gt 0 ]; then
    echo "failed suites: ${failed_suites[*]}"
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
