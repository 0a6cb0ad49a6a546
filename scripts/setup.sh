#!/usr/bin/env bash
# Installs everything orch needs to build and test, idempotently:
#   Debian packages (protobuf-c, the ONNX schema, SQLite, CBC, clang for the fuzzer, Graphviz for
#   `orch inspect --svg`) with apt-get,
#   and the Python test oracles (onnx, onnxruntime, numpy) into the project venv .venv/.
# Usage: scripts/setup.sh [--no-python]     Safe to run again; does nothing when all is in place.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(build-essential cmake pkg-config protobuf-c-compiler libprotobuf-c-dev libonnx-dev
      libsqlite3-dev coinor-libcbc-dev clang libclang-rt-14-dev python3-venv graphviz)
missing=()
for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "${1:-}" = "--no-python" ] && exit 0

# Python test oracles. onnx is pinned to 1.17 (ships the backend node test data and supports
# opset 21); onnxruntime to a release that runs opset 21.
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv"
    "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import onnx, onnxruntime, numpy" 2>/dev/null; then
    echo "setup: installing Python test tools into .venv"
    .venv/bin/pip install -q --disable-pip-version-check -r scripts/requirements-test.txt
fi
