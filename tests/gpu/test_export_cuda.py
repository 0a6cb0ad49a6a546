#!/usr/bin/env python3
"""`orch export` of CUDA artefacts end to end, on a machine with an NVIDIA GPU and the CUDA
toolkit (nvcc, NVRTC): each model compiled with `orch compile -t cuda --strict`, exported, the
tree built with make (nvcc, the toolkit's NVRTC, cuBLASLt / cuDNN where the plan calls them), its
runner fed the same inputs as `orch run`, and every output compared bit for bit with `orch run`'s
(tests/compile/test_export.py's compare). Models: examples/tiny_cnn (batch 2) and, when
MODELS_DIR (tests/models/gen_models.py's folder) is given, the generated models --models names
(default a_convnet,b_transformer,d_mlp: a CNN, a transformer block, an MLP; "all": every one); a
model whose plan leaves kernels to an interpreter must be refused naming the launch. --artefact
FILE.orch (repeatable) takes compiled artefacts as they are, e.g. bench/gpu/run.py's
OUT/NAME/model_fp32.orch (fed the input.npy beside it where its shape fits, else random inputs).
Where the toolkit lacks cuDNN or cuBLASLt (library or header), a pip wheel's folder that has it
(site-packages/nvidia/*) goes to the Makefile's LIBDIRS / INCDIRS (or EXPORT_LIBDIRS /
EXPORT_INCDIRS); the runner's libraries are printed. Without nvidia-smi listing a GPU it prints a skip line and passes
(ORCH_REQUIRE_GPU=1: fails).

Prints one line per model and ends with "N passed, N failed"; exits 1 on any failure.

usage: tests/gpu/test_export_cuda.py ORCH [MODELS_DIR] [--models A,B,...|all] [--top-k K]
           [--artefact FILE.orch]... [--no-cnn]
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compile"))
import test_export as te  # noqa: E402  (compare, tree_io, random_input, run)

from harness import ROOT  # noqa: E402  (test_export put tests/ on the path)


def loader_libs():
    """The shared libraries the dynamic loader finds by soname: LD_LIBRARY_PATH's folders and
    ldconfig's cache, as dlopen searches them."""
    names = set()
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if d and os.path.isdir(d):
            names.update(os.listdir(d))
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        names.update(line.split()[0] for line in out.splitlines()[1:] if line.strip())
    except OSError:
        pass
    return names


def lib_dirs(nvcc):
    """LIBDIRS and INCDIRS for the trees: for each library and header the toolkit lacks
    (libcudnn.so.9, cudnn.h, libcublasLt.so.13, cublasLt.h), the folder of a pip wheel
    (site-packages/nvidia/*) that has it. Where the toolkit has one, the tree uses the loader's
    path and the toolkit, as orch does; model_init refuses a library version the compile did not
    choose with, so a mismatch shows as that message."""
    home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
    loader = loader_libs()
    libs, incs = [], []
    for lib, hdr in (("libcudnn.so.9", "cudnn.h"), ("libcublasLt.so.13", "cublasLt.h")):
        for want, where, found in ((lib, "lib", libs), (hdr, "include", incs)):
            if glob.glob(os.path.join(home, "lib64", want)) or \
                    glob.glob(os.path.join(home, "include", want)):
                continue
            # orch opens the library the loader finds before the toolkit's: a wheel's copy
            # would be another version than the one the compile chose its algorithms with.
            if want in loader or (where == "include" and
                                  glob.glob(os.path.join("/usr/include", "**", want),
                                            recursive=True)):
                continue
            for site in sys.path:
                hit = glob.glob(os.path.join(site, "nvidia", "*", where, want))
                if hit:
                    d = os.path.dirname(hit[0])
                    if d not in found:
                        found.append(d)
                    break
    return libs, incs


def main():
    args = sys.argv[1:]
    top_k, which = "1", "a_convnet,b_transformer,d_mlp"
    if "--top-k" in args:
        i = args.index("--top-k")
        top_k = args[i + 1]
        del args[i:i + 2]
    if "--models" in args:
        i = args.index("--models")
        which = args[i + 1]
        del args[i:i + 2]
    artefacts = []
    while "--artefact" in args:
        i = args.index("--artefact")
        artefacts.append(os.path.abspath(args[i + 1]))
        del args[i:i + 2]
    cnn = "--no-cnn" not in args
    args = [a for a in args if a != "--no-cnn"]
    if not args:
        print(__doc__)
        sys.exit(2)
    orch = os.path.abspath(args[0])
    models_dir = args[1] if len(args) > 1 else None
    gpu = shutil.which("nvidia-smi") and "GPU" in subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    if not gpu:
        if os.environ.get("ORCH_REQUIRE_GPU", "0") not in ("", "0"):
            print("FAIL: ORCH_REQUIRE_GPU=1 but nvidia-smi lists no GPU\n0 passed, 1 failed")
            sys.exit(1)
        print("skip: no GPU (nvidia-smi lists none)\n0 passed, 0 failed")
        return
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    libs, incs = lib_dirs(nvcc)
    libdirs = os.environ.get("EXPORT_LIBDIRS", " ".join(libs))
    incdirs = os.environ.get("EXPORT_INCDIRS", " ".join(incs))
    print(f"nvcc: {nvcc}\nLIBDIRS: {libdirs or '-'}\nINCDIRS: {incdirs or '-'}")
    tmp = tempfile.mkdtemp(prefix="orch-export-cuda-")
    db = os.path.join(tmp, "profile.db")
    rng = np.random.default_rng(int(os.environ.get("ORCH_TEST_SEED", "1")))
    models = [("tiny_cnn", te.EX, ["--input-shapes", "image:2x3x32x32"], {})] if cnn else []
    if models_dir:
        names = sorted(n for n in os.listdir(models_dir)
                       if os.path.isfile(os.path.join(models_dir, n, "model.onnx")))
        if which != "all":
            missing = [n for n in which.split(",") if n not in names]
            assert not missing, f"no model {missing} in {models_dir}"
            names = which.split(",")
        for name in names:
            d = os.path.join(models_dir, name)
            margs, comp, io = [], [], {}
            if os.path.exists(os.path.join(d, "args.txt")):
                margs = shlex.split(open(os.path.join(d, "args.txt")).read(), comments=True)
            for i, a in enumerate(margs):
                if a == "--input-shapes":
                    comp += [a, margs[i + 1]]
                elif a == "--attention-rewrite":
                    comp.append(a)
            if os.path.exists(os.path.join(d, "io.txt")):
                for line in open(os.path.join(d, "io.txt")):
                    kind, n, f = line.rstrip("\n").split("\t")
                    if kind == "input":
                        io[n] = np.load(os.path.join(d, f))
            models.append((name, os.path.join(d, "model.onnx"), comp, io))
    for art in artefacts:
        io = {}
        npy = os.path.join(os.path.dirname(art), "input.npy")
        if os.path.exists(npy):
            io[None] = np.load(npy)
        name = os.path.basename(os.path.dirname(art)) + "_" + os.path.basename(art)[:-5]
        models.append((name, art, None, io))
    for name, onnx_path, comp, io in models:
        @te.case(f"cuda_export_{name}")
        def _(name=name, onnx_path=onnx_path, comp=comp, io=io):
            t0 = time.time()
            art = os.path.join(tmp, f"{name}.orch")
            if comp is None:  # a compiled artefact
                art = onnx_path
            else:
                p = te.run([orch, "compile", onnx_path, "-t", "cuda", "-o", art, "--top-k",
                            top_k, "--db", db, "--quiet", *comp], timeout=3600)
                assert p.returncode == 0, f"compile exited {p.returncode}: {p.stderr[-2000:]}"
            tree = os.path.join(tmp, f"{name}_tree")
            p = te.run([orch, "export", art, tree])
            if p.returncode == 3 and "interpreter, which an exported tree does not have" in p.stderr:
                info = te.run([orch, "info", art]).stdout
                assert "export: no (an interpreter runs" in info, info
                print(f"  {name}: refused as expected: {p.stderr.strip()[:200]}")
                return
            assert p.returncode == 0, f"export exited {p.returncode}: {p.stderr[-2000:]}"
            print("  " + p.stdout.strip()[:300])
            p = te.run(["make", "-C", tree, f"NVCC={nvcc}", f"LIBDIRS={libdirs}",
                        f"INCDIRS={incdirs}"], timeout=1800)
            assert p.returncode == 0, f"make exited {p.returncode}: {(p.stdout + p.stderr)[-3000:]}"
            assert "warning: NVRTC" not in p.stderr, p.stderr[-1000:]
            print("  " + " ".join(l.split(" (")[0].strip() for l in te.run(
                ["ldd", os.path.join(tree, "model")]).stdout.splitlines()
                if "cublas" in l or "cudnn" in l or "libcuda" in l))
            ins, _ = te.tree_io(tree)
            if None in io and len(ins) == 1 and io[None].shape == ins[0][2] and \
                    str(io[None].dtype) == ins[0][1]:
                io = {ins[0][0]: io[None]}
            inputs = {n: io[n] if n in io else te.random_input(dt, sh, rng) for n, dt, sh in ins}
            k = te.compare(orch, art, tree, inputs, tmp)
            print(f"  {name}: {k} outputs bit-identical to orch run's ({time.time() - t0:.0f} s)")
            shutil.rmtree(tree)

    shutil.rmtree(tmp, ignore_errors=True)
    failed = sum(1 for _, e in te.results if e)
    print(f"{len(te.results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
