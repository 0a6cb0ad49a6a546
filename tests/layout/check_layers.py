#!/usr/bin/env python3
"""The source tree's layering: every #include in src/ points down the pipeline.

Folders have ranks (base lowest, cli highest); a file may include its own folder and folders of
a lower rank only. The targets under src/backend/ are siblings: each may include src/backend/
itself but not another target's folder. Prints one line per violation and ends with
"N passed, N failed" (one case per folder); exits 1 on any violation.

usage: check_layers.py [SRC_DIR]   (default: the src/ beside this script's tests/)
"""
import os
import re
import sys

RANKS = {
    "base": 0,
    "ir": 1, "db": 1,
    "ops": 2, "onnx": 2,
    "prim": 3,
    "interp": 4,
    "fission": 5, "passes": 5,
    "candidates": 6,
    "orchestrate": 7,
    "inspect": 8, "plan": 8,
    "codegen": 9,
    "backend": 10,
    "runtime": 11,
    "compile": 12,
    "api": 13,
    "cli": 14,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(src, path):
    """('backend', 'cuda') for src/backend/cuda/x.c; ('ops', None) for src/ops/x.c."""
    rel = os.path.relpath(path, src).split(os.sep)
    if len(rel) < 2:
        return None, None
    sub = rel[1] if rel[0] == "backend" and len(rel) > 2 else None
    return rel[0], sub


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "src")
    src = os.path.abspath(src)
    bad = {}
    folders = set()
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            top, sub = folder_of(src, path)
            if top is None or top not in RANKS:
                if top is not None and top != "onnx":
                    bad.setdefault(top, []).append(f"{path}: folder '{top}' has no rank")
                continue
            folders.add(top)
            text = open(path, encoding="utf-8", errors="replace").read()
            for inc in INCLUDE.findall(text):
                target = os.path.normpath(os.path.join(root, inc))
                if not os.path.exists(target):
                    target = os.path.normpath(os.path.join(src, inc))
                if not os.path.exists(target) or not target.startswith(src + os.sep):
                    continue  # system, generated or include/ headers
                ttop, tsub = folder_of(src, target)
                if ttop is None:
                    continue
                if ttop not in RANKS:
                    bad.setdefault(top, []).append(f"{path}: includes {inc} (folder '{ttop}' has no rank)")
                elif ttop == top:
                    if top == "backend" and sub and tsub and sub != tsub:
                        bad.setdefault(top, []).append(
                            f"{path}: includes {inc}: the target '{sub}' reaches into '{tsub}'")
                elif RANKS[ttop] >= RANKS[top]:
                    bad.setdefault(top, []).append(
                        f"{path}: includes {inc}: '{top}' (rank {RANKS[top]}) may not include "
                        f"'{ttop}' (rank {RANKS[ttop]})")
    passed = failed = 0
    for f in sorted(folders | set(bad)):
        if bad.get(f):
            failed += 1
            print(f"FAIL {f}")
            for line in bad[f]:
                print("  " + line)
        else:
            passed += 1
            print(f"ok   {f}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
