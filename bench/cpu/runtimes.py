#!/usr/bin/env python3
"""The CPU benchmarks' shared sides (bench/cpu/run.py and bench/zoo/run.py): the baseline runtimes
(ONNX Runtime's CPU execution provider, OpenVINO's CPU plugin) in worker processes that report
their latencies and their memory, orch's CLI with its process's peak memory, and the machine's
measured FMA peak (fma_peak.c, built with the C compiler and OpenMP).

Needs numpy and onnxruntime; openvino where its side is asked for (openvino_available() says).
A worker's memory is the peak resident set over its life minus the resident set just before its
session was created (what the runtime itself adds, the interpreter and imports left out).

Worker protocol (stdin/stdout, one JSON line per reply): after loading, a first line with its
outputs on the given inputs (.npy files under --iodir); then 'run N' -> N latencies in ms,
'quit' -> {"peak_rss_bytes", "delta_rss_bytes"}.
usage (a worker): runtimes.py --runtime ort|openvino MODEL.onnx --threads N --warmup W
                  --iodir DIR -i NAME=FILE.npy...
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def rss_kib(field):
    """VmRSS / VmHWM of this process in KiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def run_cmd(cmd, timeout):
    """Runs cmd; returns (exit code, stdout, stderr, wall s, max RSS bytes of that process)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        killer = threading.Timer(timeout, p.kill)
        killer.start()
        _, status, ru = os.wait4(p.pid, 0)  # wait4: this child's own ru_maxrss
        killer.cancel()
        wall = time.monotonic() - t0
        p.returncode = rc = os.waitstatus_to_exitcode(status)
        if rc == -9 and wall >= timeout:
            rc = f"killed after the {timeout:.0f} s time limit"
        out.seek(0)
        err.seek(0)
        return rc, out.read(), err.read(), wall, ru.ru_maxrss * 1024


# ---- the runtimes ----

def ort_session(model, threads):
    """ONNX Runtime as both benchmarks run it: CPU execution provider, every graph optimisation,
    sequential execution, `threads` intra-op threads."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def openvino_available():
    """openvino's version, or None where it does not import (then its column is left out). Asked of
    a child process: the bench process itself stays free of OpenVINO's libraries and threads."""
    p = subprocess.run([sys.executable, "-c", "import openvino as ov; print(ov.get_version())"],
                       capture_output=True, text=True, timeout=300)
    return p.stdout.strip() or None if p.returncode == 0 else None


def openvino_runner(model, threads):
    """OpenVINO's CPU plugin on the ONNX file: `threads` inference threads, the latency hint (one
    stream), float32 inference precision (the plugin would pick bf16 on CPUs with AMX).
    Returns (output names, run(feeds) -> list of arrays)."""
    import openvino as ov
    core = ov.Core()
    compiled = core.compile_model(core.read_model(model), "CPU", {
        "INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1,
        "INFERENCE_PRECISION_HINT": "f32"})
    req = compiled.create_infer_request()
    outs = compiled.outputs
    names = [o.get_any_name() for o in outs]

    def run(feeds):
        res = req.infer(feeds)
        return [res[o] for o in outs]
    return names, run


def make_runner(runtime, model, threads):
    """(output names, run(feeds) -> list of arrays) of one runtime."""
    if runtime == "ort":
        sess = ort_session(model, threads)
        names = [o.name for o in sess.get_outputs()]
        return names, lambda feeds: sess.run(names, feeds)
    if runtime == "openvino":
        return openvino_runner(model, threads)
    raise ValueError(f"unknown runtime '{runtime}' (ort, openvino)")


def serve(run, warmup, first_reply, base_kib):
    """The worker's loop: warm-up, the first reply, then 'run N' and 'quit' (see the protocol)."""
    for _ in range(warmup):
        run()
    print(json.dumps(first_reply), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd and cmd[0] == "run":
            times = []
            for _ in range(int(cmd[1])):
                t0 = time.perf_counter()
                run()
                times.append((time.perf_counter() - t0) * 1e3)
            print(json.dumps(times), flush=True)
        elif cmd == ["quit"]:
            break
    peak = rss_kib("VmHWM")
    print(json.dumps({"peak_rss_bytes": peak * 1024, "delta_rss_bytes": (peak - base_kib) * 1024}),
          flush=True)


def save_outputs(iodir, names, outs):
    """The outputs as .npy files under iodir: {name: file}, in the runtime's output order."""
    import numpy as np
    os.makedirs(iodir, exist_ok=True)
    files = {}
    for k, v in zip(names, outs):
        f = os.path.join(iodir, f"output_{re.sub(r'[^A-Za-z0-9_.-]', '_', k)}.npy")
        np.save(f, np.asarray(v))
        files[k] = f
    return files


def worker_main(a):
    import numpy as np
    feeds = {}
    for item in a.input:
        name, f = item.split("=", 1)
        feeds[name] = np.load(f)
    base = rss_kib("VmRSS")
    names, run = make_runner(a.runtime, a.model, a.threads)
    outs = run(feeds)
    files = save_outputs(a.iodir, names, outs)
    serve(lambda: run(feeds), a.warmup, {"outputs": files, "output_order": names}, base)
    return 0


class Worker:
    """A worker process driven over its stdin/stdout (this module's, or a script's own that speaks
    the same protocol); io is its first reply."""

    def __init__(self, cmd):
        self.err = tempfile.TemporaryFile("w+")  # its messages, for the error should it die
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True)
        try:
            self.io = self._reply()
        except BaseException:
            self.kill()
            raise

    @classmethod
    def runtime(cls, runtime, model, threads, warmup, iodir, inputs):
        """This module's worker for one runtime; inputs: {name: .npy file}."""
        cmd = [sys.executable, os.path.abspath(__file__), "--runtime", runtime, model,
               "--threads", str(threads), "--warmup", str(warmup), "--iodir", iodir]
        for k, f in inputs.items():
            cmd += ["-i", f"{k}={f}"]
        return cls(cmd)

    def _reply(self):
        """The next JSON line (a library's stray prints on stdout are passed over)."""
        while True:
            line = self.p.stdout.readline()
            if not line:
                self.p.wait()
                self.err.seek(0)
                lines = [x.strip() for x in self.err.read().splitlines() if x.strip()]
                raise RuntimeError(f"worker exited with status {self.p.returncode}"
                                   + (f": {lines[-1][:300]}" if lines else ""))
            try:
                return json.loads(line)
            except ValueError:
                continue

    def run(self, n):
        self.p.stdin.write(f"run {n}\n")
        self.p.stdin.flush()
        return self._reply()

    def close(self):
        """Its memory figures (None where it died)."""
        if self.p.poll() is not None:
            return None
        self.p.stdin.write("quit\n")
        self.p.stdin.flush()
        mem = self._reply()
        self.p.wait()
        self.err.close()
        return mem

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.err.close()


# ---- the machine's FMA peak ----

def fma_peak(threads, build_dir, cc="cc"):
    """{threads: GFLOP/s} of fma_peak.c at each count (the best of its reps, each thread's FLOPs over
    its own CPU time: the cores' peak though other processes share them), built into build_dir
    with cc -O3 -march=native -fopenmp. Raises RuntimeError with the compiler's or the program's
    message."""
    os.makedirs(build_dir, exist_ok=True)
    exe = os.path.join(build_dir, "fma_peak")
    src = os.path.join(HERE, "fma_peak.c")
    p = subprocess.run([cc, "-O3", "-march=native", "-fopenmp", "-o", exe, src],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{cc} fma_peak.c: {p.stderr.strip()[-300:]}")
    p = subprocess.run([exe] + [str(t) for t in threads], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"fma_peak: exit {p.returncode}: {p.stderr.strip()[-300:]}")
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^threads (\d+) gflops ([0-9.]+)",
                                                        p.stdout, re.M)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--runtime", required=True, choices=["ort", "openvino"])
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iodir", required=True)
    ap.add_argument("-i", "--input", action="append", default=[], help="NAME=FILE.npy")
    return worker_main(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
