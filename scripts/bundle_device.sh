#!/usr/bin/env bash
# Packs a Release build of orch with the shared libraries the GPU machine may lack (protobuf-c, libgomp) into
# .bundle/ (git-ignored), to be named in the device tool's `carry`. On the device:
#   export LD_LIBRARY_PATH=$PWD/.bundle/lib:$LD_LIBRARY_PATH; .bundle/bin/orch ...
set -euo pipefail
cd "$(dirname "$0")/.."
make all >/dev/null
rm -rf .bundle
mkdir -p .bundle/bin .bundle/lib
cp build/orch .bundle/bin/
for lib in libprotobuf-c.so.1 libgomp.so.1; do
    path=$(ldd build/orch | awk -v l="$lib" '$1 == l {print $3}')
    [ -n "$path" ] || { echo "bundle: $lib not linked?" >&2; exit 1; }
    cp -L "$path" .bundle/lib/
done
echo "bundle: $(du -sh .bundle | cut -f1) in .bundle/ (orch + $(ls .bundle/lib | tr '\n' ' '))"
