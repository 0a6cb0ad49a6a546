#!/usr/bin/env bash
# The installed orch as an embedding application sees it: `cmake --install` of a build into a
# temporary prefix, then, with nothing but that prefix and pkg-config:
#   1. examples/c_api/compile_and_run.c built with `pkg-config --cflags --libs orch` compiles
#      examples/tiny_cnn/model.onnx for batch 1 and 4 into one artefact (the C API's list of
#      shape sets) and runs both;
#   2. examples/c_api/run_artifact.c built with `pkg-config --cflags --libs orch-runtime` alone
#      runs that artefact and prints the same outputs, bit for bit (the same text);
#   3. the runtime-only program's shared libraries (ldd) include none of CBC, LAPACK, SQLite or
#      protobuf-c, and liborch-runtime exports only orch.h's functions;
#   4. the installed `orch` binary, header and both SONAMEs are where pkg-config says.
# Prints one line per case and "N passed, N failed".
# usage: tests/install/test_install.sh BUILD_DIR
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
BUILD=${1:-build}
PREFIX=$(mktemp -d "${TMPDIR:-/tmp}/orch-install-XXXXXX")
trap 'rm -rf "$PREFIX"' EXIT
pass=0 fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }

if ! cmake --install "$BUILD" --prefix "$PREFIX" >"$PREFIX/install.log" 2>&1; then
    bad install "$(tail -n 5 "$PREFIX/install.log")"
    echo "$pass passed, $((fail)) failed"
    exit 1
fi
LIBDIR=$(ls -d "$PREFIX"/lib*/pkgconfig | head -n 1 | xargs dirname)
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
CC=${CC:-cc}

# 4. what was installed
missing=""
for f in bin/orch include/orch.h; do [ -e "$PREFIX/$f" ] || missing="$missing $f"; done
for l in liborch.so liborch-runtime.so liborch.a liborch-runtime.a; do
    [ -e "$LIBDIR/$l" ] || missing="$missing $l"
done
soname=$(objdump -p "$LIBDIR/liborch-runtime.so" 2>/dev/null | awk '/SONAME/ {print $2}')
if [ -n "$missing" ]; then
    bad layout "missing:$missing"
elif [ "$(pkg-config --modversion orch-runtime)" != "$(pkg-config --modversion orch)" ] ||
    [[ "$soname" != liborch-runtime.so.* ]] || [ ! -e "$LIBDIR/$soname" ]; then
    bad layout "versions $(pkg-config --modversion orch) / $(pkg-config --modversion orch-runtime), SONAME '$soname'"
else
    ok "layout (bin, header, shared and static libraries, SONAME $soname)"
fi

# 1. compile and run through liborch
work=$PREFIX/work
mkdir -p "$work"
# shellcheck disable=SC2046
if ! $CC -O2 -o "$work/compile_and_run" examples/c_api/compile_and_run.c \
    $(pkg-config --cflags --libs orch) >"$work/cc1.log" 2>&1; then
    bad compile_and_run "build: $(head -n 5 "$work/cc1.log")"
elif ! LD_LIBRARY_PATH=$LIBDIR HOME=$work XDG_CACHE_HOME=$work/cache "$work/compile_and_run" \
    examples/tiny_cnn/model.onnx "$work/tiny.orch" image:1x3x32x32 image:4x3x32x32 >"$work/full.txt" \
    2>"$work/full.err"; then
    bad compile_and_run "run: $(tail -n 3 "$work/full.err")"
else
    ok "compile_and_run with pkg-config orch: $(head -n 1 "$work/full.txt")"
fi

# 2. run only, through liborch-runtime
# shellcheck disable=SC2046
if ! $CC -O2 -o "$work/run_artifact" examples/c_api/run_artifact.c \
    $(pkg-config --cflags --libs orch-runtime) >"$work/cc2.log" 2>&1; then
    bad run_artifact "build: $(head -n 5 "$work/cc2.log")"
elif [ ! -s "$work/tiny.orch" ]; then
    bad run_artifact "no artefact from compile_and_run"
elif ! LD_LIBRARY_PATH=$LIBDIR "$work/run_artifact" "$work/tiny.orch" >"$work/rt.txt" 2>"$work/rt.err"; then
    bad run_artifact "run: $(tail -n 3 "$work/rt.err")"
elif ! cmp -s "$work/full.txt" "$work/rt.txt"; then
    bad run_artifact "outputs differ: $(head -n 1 "$work/rt.txt") vs $(head -n 1 "$work/full.txt")"
else
    ok "run_artifact with pkg-config orch-runtime: the same outputs ($(head -n 1 "$work/rt.err"))"
fi

# 3. what the runtime-only program links and what the library exports
if [ -x "$work/run_artifact" ]; then
    # The libraries' names only: a path (the random temporary prefix) may hold "clp" or "blas".
    heavy=$(LD_LIBRARY_PATH=$LIBDIR ldd "$work/run_artifact" | awk '{print $1}' | grep -iE 'cbc|clp|coin|lapack|blas|sqlite|protobuf' | tr '\n' ' ')
    exported=$(nm -D --defined-only "$LIBDIR/liborch-runtime.so" | awk '{print $3}' | grep -v '^orch_' | tr '\n' ' ')
    if [ -n "$heavy" ]; then
        bad runtime_links "the runtime-only program links: $heavy"
    elif [ -n "$exported" ]; then
        bad runtime_exports "liborch-runtime exports non-API symbols: $exported"
    else
        ok "runtime-only program links $(LD_LIBRARY_PATH=$LIBDIR ldd "$work/run_artifact" | wc -l) libraries, none of CBC/LAPACK/SQLite/protobuf-c; only orch_* exported"
    fi
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
