#!/usr/bin/env bash
# Groups fuzzer findings by bug: replays each file with the fuzz target and prints, once per
# distinct signature (the sanitizer's first line and the top frames in orch's sources), the count,
# one example file and its stack summary.
# usage: tests/fuzz/triage.sh [FUZZER] [FILE...]   (defaults: build-fuzz/fuzz_load build-fuzz/crashes/*)
set -uo pipefail
cd "$(dirname "$0")/../.."
FUZZER=${1:-build-fuzz/fuzz_load}
shift || true
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(build-fuzz/crashes/*)
export UBSAN_OPTIONS=print_stacktrace=1 ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

declare -A count example
for f in "${files[@]}"; do
    [ -f "$f" ] || continue
    sig=$("$FUZZER" -rss_limit_mb=2048 -timeout=10 "$f" 2>&1 |
        grep -E 'runtime error|ERROR: [A-Za-z]+Sanitizer|ERROR: libFuzzer|internal error|^ +#[0-9]+ .* (/[^ ]*/)?(src|tests)/' |
        grep -vE 'fuzzer::|LLVMFuzzerTestOneInput|run_once' |
        sed -E 's/0x[0-9a-f]+ in //; s/==[0-9]+==//; s/ on address.*//; s/ \(pc .*//; s#/[^ ]*/(src|tests)/#\1/#; s/^ +//' |
        head -n 4 | paste -sd '|' -)
    [ -n "$sig" ] || sig="(no report: passes now)"
    count[$sig]=$((${count[$sig]:-0} + 1))
    example[$sig]=${example[$sig]:-$f}
done
for sig in "${!count[@]}"; do
    echo "${count[$sig]}x  e.g. ${example[$sig]}"
    tr '|' '\n' <<<"$sig" | sed 's/^/      /'
done
