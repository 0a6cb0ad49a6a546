#!/usr/bin/env bash
# Installs the Python package from this tree as a user does (`pip install .` into a fresh
# virtual environment: scikit-build-core builds liborch and the CLI with the project's CMake)
# and runs tests/python/test_package.py with that environment, ONNX Runtime as its oracle.
# Prints the install's time and the test's lines, ending with "N passed, N failed"; exits
# non-zero on any failure. Leaves nothing behind (the environment is in a temporary folder).
# usage: scripts/test_python.sh [MODELS_DIR]
#   MODELS_DIR: tests/models/gen_models.py's output (default build/models, which make test
#   writes); when it lacks the test's models they are generated into the temporary folder.
# Needs PyPI (scikit-build-core for the build; the pinned oracles of
# scripts/requirements-test.txt) and the system packages of scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MODELS=$(realpath -m "${1:-build/models}")
PY=${PYTHON:-python3}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/orch-python-XXXXXX")
trap 'rm -rf "$TMP"' EXIT

start=$SECONDS
"$PY" -m venv "$TMP/venv"
PIP=("$TMP/venv/bin/pip" install -q --disable-pip-version-check)
# The oracles first, pinned as for the other suites: the package's own requirement (numpy) is
# then met by the pinned numpy.
"${PIP[@]}" -r scripts/requirements-test.txt
# The package, built from the tree every time (no wheel cache: the sources are what is tested);
# nice, as the C library's build shares the machine with the other suites.
nice -n 19 "${PIP[@]}" --no-cache-dir "$ROOT"
echo "pip install . into a fresh environment: $((SECONDS - start))s"

if [ ! -f "$MODELS/e_mixed/io.txt" ] || [ ! -f "$MODELS/a_convnet/io.txt" ] ||
    [ ! -f "$MODELS/d_mlp/io.txt" ]; then
    MODELS=$TMP/models
    "$TMP/venv/bin/python" tests/models/gen_models.py "$MODELS" --only a_convnet,d_mlp,e_mixed \
        >"$TMP/gen-models.log" 2>&1 || { cat "$TMP/gen-models.log"; exit 1; }
fi

# From the temporary folder, so that `import orch` is the installed package (never the tree's
# python/orch), and with the library the install put beside it.
cd "$TMP"
env -u ORCH_LIBRARY "$TMP/venv/bin/python" "$ROOT/tests/python/test_package.py" "$MODELS"
