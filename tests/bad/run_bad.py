#!/usr/bin/env python3
"""Runs orch on every case of the bad-input corpus (written by make_corpus.py) and checks that it
fails cleanly: the expected exit code, an error message with the expected words that names the
file at fault, and never a signal, a timeout, an internal assertion or a sanitizer report; and
that whatever it prints, in every case, is valid UTF-8 without a terminal control (names from the
model escaped).
Prints one line per case and ends with "N passed, N failed"; exits 1 on any failure.

usage: run_bad.py ORCH_BINARY OUTDIR [--filter SUBSTRING] [-v]
"""
import argparse
import os
import re
import resource
import shlex
import subprocess
import sys

TIMEOUT_S = 60
# Anything a sanitizer or an assertion prints: always a failure, whatever the exit code.
CRASH_MARKERS = ["ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                 "UndefinedBehaviorSanitizer", "internal error: assertion", "SUMMARY: "]


def read_cases(path):
    cases = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            name, args, code, subs, names = line.split("\t")
            cases.append((name, args, {int(c) for c in code.split(",")},
                          [] if subs == "-" else subs.split(" && "),
                          None if names == "-" else names))
    return cases


def limits(sanitized):
    """Environment and pre-exec hook so that a case that tries to allocate an absurd amount
    fails the allocation instead of exhausting the machine."""
    env = dict(os.environ)
    if sanitized:
        opts = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + \
            "allocator_may_return_null=1:max_allocation_size_mb=4096"
        return env, None

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    return env, cap


# What a terminal acts on or shows garbled: C0 controls but newline and tab, DEL, C1 controls,
# the bidirectional embeddings, overrides and isolates. Names from a model must come out escaped.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def unsafe_text(data):
    """Why data (bytes orch printed) is not safe to show on a terminal, or None."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as ex:
        return f"invalid UTF-8 at byte {ex.start}"
    m = UNSAFE.search(text)
    return f"control character U+{ord(m.group()):04X} at {m.start()}" if m else None


def check(orch, outdir, case, env, preexec):
    """Runs one case; returns (ok, detail)."""
    name, args, codes, subs, names = case
    argv = [orch] + shlex.split(args)
    try:
        p = subprocess.run(argv, cwd=outdir, env=env, preexec_fn=preexec, capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {TIMEOUT_S}s", ""
    out = p.stdout.decode(errors="replace")
    err = p.stderr.decode(errors="replace")
    both = out + err
    if p.returncode < 0:
        return False, f"killed by signal {-p.returncode}", err
    for stream, data in (("stdout", p.stdout), ("stderr", p.stderr)):
        why = unsafe_text(data)
        if why:
            return False, f"{why} of {stream}", err
    for m in CRASH_MARKERS:
        if m in both:
            return False, f"'{m}' in the output (exit {p.returncode})", err
    want = "/".join(str(c) for c in sorted(codes))
    if p.returncode not in codes:
        return False, f"exit {p.returncode}, expected {want}", err
    if p.returncode == 0:  # a success allowed among the outcomes has no message to check
        return True, "exit 0", err
    missing = [s for s in subs if s not in err]
    if names and names not in err:
        missing.append(names)
    if missing:
        return False, "message lacks " + ", ".join(repr(s) for s in missing), err
    return True, f"exit {p.returncode}", err


def first_error_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower():
            return ln
    return lines[0] if lines else "(no message)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("orch")
    ap.add_argument("outdir")
    ap.add_argument("--filter", default="")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the message of every case")
    a = ap.parse_args()
    orch = os.path.abspath(a.orch)
    with open(orch, "rb") as f:
        sanitized = b"__asan_init" in f.read()
    env, preexec = limits(sanitized)
    passed = failed = 0
    for case in read_cases(os.path.join(a.outdir, "cases.tsv")):
        if a.filter not in case[0]:
            continue
        ok, detail, err = check(orch, a.outdir, case, env, preexec)
        msg = first_error_line(err)
        if ok:
            passed += 1
            print(f"ok   {case[0]} ({detail})" + (f": {msg}" if a.verbose and err else ""))
        else:
            failed += 1
            print(f"FAIL {case[0]}: {detail}\n     orch {case[1]}\n     {msg[:400]}")
            crash = [ln for ln in err.splitlines() if any(m in ln for m in CRASH_MARKERS)]
            for ln in crash[:3]:
                print(f"     {ln[:300]}")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
