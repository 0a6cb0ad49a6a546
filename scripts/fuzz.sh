#!/usr/bin/env bash
# Fuzzes the model loader (tests/fuzz/fuzz_load.c) with libFuzzer under ASan+UBSan.
# Builds build-fuzz/fuzz_load from the sources with clang (only what changed), replays every
# reproducer in tests/fuzz/regressions/ (a failure there stops the script), then fuzzes for
# SECONDS from a seed corpus: SEED_DIR/*/model.onnx (the ONNX node tests, e.g. build/node_data)
# plus the .onnx files of the bad-input corpus (tests/bad/make_corpus.py, when the project's
# .venv has onnx). The growing corpus is kept in build-fuzz/corpus/ between runs.
# Crashes, leaks, timeouts and OOMs of this run go to build-fuzz/crashes/; exits 1 if any.
#
# usage: scripts/fuzz.sh SECONDS [SEED_DIR]     (SECONDS 0: build and replay the reproducers only)
#   extra libFuzzer flags can be given in FUZZ_FLAGS (e.g. FUZZ_FLAGS=-jobs=2).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
    echo "usage: scripts/fuzz.sh SECONDS [SEED_DIR]" >&2
    exit 2
fi
SECONDS_TO_RUN=$1
SEED_DIR=${2:-}
OUT=build-fuzz
CC=${FUZZ_CC:-clang}
JOBS=$(nproc 2>/dev/null || echo 2)

if ! command -v "$CC" >/dev/null; then
    echo "fuzz: $CC not found; run scripts/setup.sh (installs clang and libclang-rt-14-dev)" >&2
    exit 2
fi
mkdir -p "$OUT/obj" "$OUT/gen" "$OUT/corpus" "$OUT/seeds" "$OUT/crashes"

# ---- build ----
# The ONNX parser, generated as CMakeLists.txt does, from the system's onnx.proto.
PROTO=/usr/include/onnx/onnx.proto
[ -f "$PROTO" ] || PROTO=/usr/local/include/onnx/onnx.proto
if [ ! -f "$OUT/gen/onnx/onnx.pb-c.c" ] || [ "$PROTO" -nt "$OUT/gen/onnx/onnx.pb-c.c" ]; then
    protoc-c --c_out="$OUT/gen" -I"$(dirname "$(dirname "$PROTO")")" "$PROTO"
fi

# No OpenMP in this build: its pragmas, and variables only they read, are expected to go unused.
CFLAGS=(-std=gnu11 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
        -fno-sanitize-recover=undefined -Wall -Wextra -Wno-unknown-pragmas -Wno-unused-variable
        -Iinclude -Isrc -I"$OUT/gen" $(pkg-config --cflags cbc))
sources=("$OUT/gen/onnx/onnx.pb-c.c" tests/fuzz/fuzz_load.c)
for f in src/base/*.c src/onnx/*.c src/ir/*.c src/ops/*.c src/prim/*.c src/interp/*.c src/fission/*.c src/passes/*.c src/candidates/*.c \
    src/orchestrate/*.c src/inspect/*.c src/runtime/*.c src/api/*.c src/codegen/*.c src/backend/*.c \
    src/backend/cpu/*.c src/backend/cuda/*.c src/compile/*.c src/db/*.c src/plan/*.c; do
    sources+=("$f")
done
# Any header newer than an object recompiles it: simple and safe for a tree this size.
newest_header=$(ls -t src/*/*.h src/*/*/*.h include/*.h "$OUT/gen/onnx/onnx.pb-c.h" | head -n 1)
objects=()
stale=()
for src in "${sources[@]}"; do
    obj="$OUT/obj/$(echo "$src" | tr '/' '_' | sed 's/\.c$/.o/')"
    objects+=("$obj")
    if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ "$newest_header" -nt "$obj" ]; then
        stale+=("$src")
    fi
done
if [ ${#stale[@]} -gt 0 ]; then
    echo "fuzz: compiling ${#stale[@]} file(s)"
    export FUZZ_OUT=$OUT
    printf '%s\n' "${stale[@]}" | xargs -P "$JOBS" -I{} sh -c \
        'obj="$FUZZ_OUT/obj/$(echo "$0" | tr / _ | sed "s/\.c\$/.o/")"; exec "$@" -c "$0" -o "$obj"' \
        {} "$CC" "${CFLAGS[@]}"
fi
relink=0
[ -x "$OUT/fuzz_load" ] || relink=1
for obj in "${objects[@]}"; do
    [ "$obj" -nt "$OUT/fuzz_load" ] && relink=1
done
if [ $relink = 1 ]; then
    # CBC (the orchestration solver) is C++: its libraries need the C++ runtime.
    "$CC" -fsanitize=fuzzer,address,undefined "${objects[@]}" $(pkg-config --libs cbc) \
        $(pkg-config --libs sqlite3) -lstdc++ -ldl -lpthread -lm -o "$OUT/fuzz_load"
fi

# ---- regressions: every saved reproducer must now run clean ----
shopt -s nullglob
regs=()
for f in tests/fuzz/regressions/*; do
    [[ $f == *.md ]] || regs+=("$f")
done
if [ ${#regs[@]} -gt 0 ]; then
    if ! "$OUT/fuzz_load" -rss_limit_mb=2048 -timeout=10 "${regs[@]}" >"$OUT/regressions.log" 2>&1; then
        # On FAIL lines, which the test runner shows (CI keeps no files).
        grep -E 'Running:|ERROR:|runtime error:|SUMMARY:|#[0-9]+ 0x' "$OUT/regressions.log" | head -n 40 |
            sed 's/^/FAIL   /'
        echo "FAIL fuzz: a reproducer in tests/fuzz/regressions/ still fails (log: $OUT/regressions.log)"
        exit 1
    fi
    echo "fuzz: ${#regs[@]} regression reproducer(s) pass"
fi

if [ "$SECONDS_TO_RUN" -eq 0 ]; then # replay only (libFuzzer would take 0 as "no limit")
    exit 0
fi

# ---- seeds ----
if [ -n "$SEED_DIR" ]; then
    [ -d "$SEED_DIR" ] || { echo "fuzz: seed folder '$SEED_DIR' not found" >&2; exit 2; }
    for m in "$SEED_DIR"/*/model.onnx; do
        dst="$OUT/seeds/$(basename "$(dirname "$m")").onnx"
        [ -f "$dst" ] && [ ! "$m" -nt "$dst" ] || cp "$m" "$dst"
    done
fi
if [ -x .venv/bin/python ] && [ ! -f "$OUT/bad/cases.tsv" -o tests/bad/make_corpus.py -nt "$OUT/bad/cases.tsv" ]; then
    .venv/bin/python tests/bad/make_corpus.py "$OUT/bad" >/dev/null || echo "fuzz: bad corpus not made"
fi
if [ -d "$OUT/bad" ]; then
    find "$OUT/bad" -name '*.onnx' -type f -size -65537c | while read -r m; do
        cp "$m" "$OUT/seeds/bad_$(echo "${m#"$OUT"/bad/}" | tr / _)"
    done
fi

# ---- fuzz ----
# Fork mode with ignore_* keeps going after a finding, so one run reports every bug it meets.
rm -f "$OUT"/crashes/*
echo "fuzz: running ${SECONDS_TO_RUN}s ($(ls "$OUT/seeds" | wc -l) seeds, $(ls "$OUT/corpus" | wc -l) in corpus)"
set +e
"$OUT/fuzz_load" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -print_final_stats=1 \
    -dict=tests/fuzz/onnx.dict -artifact_prefix="$OUT/crashes/" ${FUZZ_FLAGS:-} "$OUT/corpus" "$OUT/seeds" >"$OUT/fuzz.log" 2>&1
rc=$?
set -e
grep -E '^#[0-9]+: cov|^INFO: fuzzed for|^INFO: exiting|stat::' "$OUT/fuzz.log" | tail -n 3
found=()
for f in "$OUT"/crashes/*; do
    [[ $f == *.log ]] || found+=("$f")
done
if [ ${#found[@]} -gt 0 ]; then
    echo "fuzz: ${#found[@]} finding(s) in $OUT/crashes/ (replay one: $OUT/fuzz_load FILE):"
    # Each finding replayed once, its first report lines and (when small) its bytes printed on
    # lines starting with FAIL: the test runner shows those lines, so a finding on a machine whose
    # files are gone afterwards (CI) can still be reproduced: echo B64 | base64 -d > repro.onnx
    for f in "${found[@]}"; do
        "$OUT/fuzz_load" -rss_limit_mb=2048 -timeout=10 "$f" >"$f.log" 2>&1 || true
        echo "FAIL $(basename "$f") ($(stat -c %s "$f") bytes):"
        { grep -E 'ERROR:|runtime error:|SUMMARY:|#[0-9]+ 0x' "$f.log" || true; } | head -n 12 |
            sed 's/^/FAIL   /'
        if [ "$(stat -c %s "$f")" -le 6000 ]; then
            echo "FAIL   base64: $(base64 -w0 "$f")"
        fi
    done
    exit 1
fi
if [ $rc -ne 0 ]; then
    tail -n 20 "$OUT/fuzz.log" | sed "s/^/FAIL   /"
    echo "FAIL fuzz: libFuzzer exited with $rc (log: $OUT/fuzz.log)"
    exit 1
fi
echo "fuzz: no findings"
