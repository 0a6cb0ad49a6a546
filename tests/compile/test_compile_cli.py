#!/usr/bin/env python3
"""End-to-end tests of `orch compile`, `orch run MODEL.orch`, `orch bench` and `orch db` on the CPU
target: a compile and its check against ONNX Runtime's stored output, a warm recompile that only
looks up the profile database, never runs the interpreter (its end-to-end check uses the reference
cached in the database), reuses the kernels' module built before (byte for byte what a fresh
build gives; a damaged one rebuilt) and picks the same selection, damaged, short or wrong cached
references recomputed and never trusted, a compile killed with SIGKILL in the
middle of tuning and rerun (it resumes: every measurement made before the kill is kept, none is
measured again but the configs in flight, once, the killed compile's build folder is removed,
and the selection is stable from then on), damaged artefacts refused with clear
messages, bench's JSON, the database commands, the --precision option (fp32 recorded in the
artefact and shown by compile/run/bench; reduced precisions refused on the CPU target), the report
of why each fused attention / MLP chain candidate was chosen or not, the Llama layer's grouped-query
attention (its fused candidates with their K/V group found, as orch inspect names them), the
--explain report of the
linear primitives' kernels, --no-mlp-chains / --no-attention (no such candidates; recorded in the
artefact and shown by orch info and run; the environment variables they replace do nothing),
--layout's usage errors, the summary's line per op of kernels not generated (the same as orch
info's table per operator, orch info on the artefact and bench's JSON), --strict (exit 3 where a
kernel is not generated, recorded in the artefact where none is), warm compiles byte for byte
identical, profile database rows with impossible values measured again, run -o giving every
output its own file, usage errors (--seed -1, --gpus on the CPU or malformed among them); a compile beside two busy loops storing
its unstable timings suspect and the next compile measuring them again, three compiles at once on
one database (every row clean, every plan's kernels with their rows), and the database's export,
import and merge.

Prints one line per case and ends with "N passed, N failed"; exits 1 on any failure.

usage: test_compile_cli.py ORCH MODELS_DIR
  MODELS_DIR: tests/models/gen_models.py's output (a_convnet is the model killed mid-compile).
"""
import json
import os
import re
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from harness import EXAMPLE as EX, ROOT, case, digest, finish, largest_error, run  # noqa: E402


# Most cases check how compiles reuse the database: their compiles take every timing as stable
# whatever the machine's load (--trust-timings; otherwise a suspect timing is measured again, so
# a warm compile on a busy machine would measure). The cases about busy machines pass
# trust=False.
def trusted(args):
    return ("compile", "--trust-timings", *args[1:]) if args[:1] == ("compile",) and "-o" in args \
        else args


def orch(binary, *args, timeout=900, env=None, trust=True):
    return run([binary, *(trusted(args) if trust else args)], timeout=timeout, env=env)


def counts(out):
    m = re.search(r"(\d+) configs measured, (\d+) from the database", out)
    assert m, f"no tuning counts in:\n{out}"
    return int(m.group(1)), int(m.group(2))


INTERP = "value by the interpreter in"   # need_values' progress line: the interpreter ran
CACHED = "reference cached in the database"
MODULE_REUSED = "module from the database"


def fnv1a64(b):
    h = 0xcbf29ce484222325
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def references(path):
    con = sqlite3.connect(path, timeout=30)
    rows = con.execute("SELECT key, bytes FROM reference").fetchall()
    con.close()
    return dict(rows)


def set_reference(path, key, blob):
    con = sqlite3.connect(path, timeout=30)
    with con:
        con.execute("UPDATE reference SET bytes = ? WHERE key = ?", (blob, key))
    con.close()


def db_rows(path, ok_only=False):
    con = sqlite3.connect(path, timeout=30)
    try:
        q = "SELECT signature, config, status, median_s, created FROM measurement"
        rows = con.execute(q + (" WHERE status = 0" if ok_only else "")).fetchall()
    except sqlite3.OperationalError:
        rows = []
    con.close()
    return {(r[0], r[1]): r[2:] for r in rows}


def header_flags(path):
    """The artefact's format version, load flags and compile flags (artifact.h's layout)."""
    data = open(path, "rb").read()
    version = int.from_bytes(data[8:12], "little")
    at = 16
    if version >= 5:  # shared fields, then per plan: the first plan's load flags
        for _field in ("orch version", "target", "precision", "fingerprint"):
            at += 4 + int.from_bytes(data[at:at + 4], "little")
        comp = int.from_bytes(data[at + 8:at + 12], "little")
        at += 8 + 4 + 4 + 4  # model hash, compile flags, threads, plans
        for _field in ("input shapes", "float32 tensors"):
            at += 4 + int.from_bytes(data[at:at + 4], "little")
        return version, int.from_bytes(data[at:at + 4], "little"), comp
    for _field in ("orch version", "target", "precision", "fingerprint", "input shapes",
                   "float32 tensors"):
        at += 4 + int.from_bytes(data[at:at + 4], "little")
    at += 8  # model hash
    load = int.from_bytes(data[at:at + 4], "little")
    comp = int.from_bytes(data[at + 4:at + 8], "little") if version >= 4 else 0
    return version, load, comp


NO_MLP_CHAINS, NO_ATTENTION, STRICT = 1, 2, 16  # artifact.h's ARTIFACT_COMPILE_* bits

# The summary's, orch info's and orch bench's line per op of kernels an interpreter runs.
FALLBACK = re.compile(r"^  (\S+?)(?: \u00d7(\d+))? \(nodes? (.*?)\): (op interpreter|primitive "
                      r"interpreter), ([0-9.]+)% of the predicted time; (no generated kernel for "
                      r"(\S+) .*on (\w+).*)$")
OP_ROW = re.compile(r"^  (\S+) +(\d+)  (generated|interpreter|op interpreter)(?: \((\d+) of "
                    r"(\d+)\))? +(generated|interpreter|op interpreter)(?: \((\d+) of (\d+)\))?$")


def fallback_groups(text):
    """{ops: (kernels, nodes, where, share)} of the lines listing kernels not generated."""
    groups = {}
    for m in filter(None, map(FALLBACK.match, text.splitlines())):
        kernels = int(m.group(2) or 1)
        nodes = m.group(3).split(", ")
        assert m.group(7) == m.group(1) and float(m.group(5)) <= 100, m.group(0)
        assert kernels >= 1 and len(nodes) >= 1, m.group(0)
        groups[m.group(1)] = (kernels, sorted(nodes), m.group(4), float(m.group(5)))
    return groups


def op_table(text):
    """orch info's table: {op: (nodes, cpu status, cuda status)}, each status (word, k, n)."""
    at = text.find("kernels per operator")
    assert at >= 0, f"no table per operator in:\n{text}"
    rows = {}
    for line in text[at:].splitlines()[2:]:
        m = OP_ROW.match(line)
        assert m, f"not a row of the table: {line!r}"
        n = int(m.group(2))
        cells = []
        for w, k, of in ((m.group(3), m.group(4), m.group(5)), (m.group(6), m.group(7),
                                                                  m.group(8))):
            # "(k of n)": some of the op's nodes fall back, never none or all of them.
            if k:
                assert int(of) == n and 0 < int(k) < n and w != "generated", line
            cells.append((w, int(k) if k else (0 if w == "generated" else n), n))
        rows[m.group(1)] = (n, cells[0], cells[1])
    return rows


def write_fallback_model(path):
    """A model of generated ops (MatMul, Relu, Add) and ops that a target may leave to an
    interpreter (TopK twice, CumSum, Hardmax): which of them fall back is read from orch info.
    Two Identity nodes first, which folding removes: the table counts the nodes left."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Identity", ["x"], ["x1"], name="id_a"),
             helper.make_node("Identity", ["x1"], ["x2"], name="id_b"),
             helper.make_node("MatMul", ["x2", "w"], ["m"], name="mm"),
             helper.make_node("Relu", ["m"], ["r"], name="relu"),
             helper.make_node("TopK", ["r", "k"], ["tv", "ti"], name="topk_a", axis=1),
             helper.make_node("TopK", ["m", "k"], ["tv2", "ti2"], name="topk_b", axis=1),
             helper.make_node("CumSum", ["r", "ax"], ["cs"], name="cumsum"),
             helper.make_node("Hardmax", ["tv"], ["hm"], name="hardmax", axis=1),
             helper.make_node("Add", ["hm", "tv2"], ["y"], name="add")]
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.standard_normal((37, 29)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([5], np.int64), "k"),
             numpy_helper.from_array(np.array(1, np.int64), "ax")]
    g = helper.make_graph(nodes, "fallbacks",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 37])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5]),
                           helper.make_tensor_value_info("cs", TensorProto.FLOAT, [3, 29])],
                          inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return {"MatMul": ["mm"], "Relu": ["relu"], "TopK": ["topk_a", "topk_b"],
            "CumSum": ["cumsum"], "Hardmax": ["hardmax"], "Add": ["add"]}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, models = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="orch-compile-test-")
    db = os.path.join(tmp, "profile.db")
    art = os.path.join(tmp, "tiny.orch")
    model = os.path.join(EX, "model.onnx")
    common = ["--input-shapes", "image:1x3x32x32", "--top-k", "3", "--db", db]
    state = {}

    @case("compile_and_run_matches_onnxruntime")
    def _():
        p = orch(binary, "compile", model, "-t", "cpu", "-o", art, *common)
        assert p.returncode == 0, f"compile failed ({p.returncode}):\n{p.stderr[-3000:]}"
        assert "measured" in p.stderr and "ETA" in p.stderr, "no progress lines on stderr"
        assert os.path.exists(art), "no artefact written"
        state["digest"] = digest(p.stdout)
        state["err"] = largest_error(p.stderr)
        assert "stored as the reference" in p.stderr, p.stderr[-3000:]
        measured, _ = counts(p.stdout)
        assert measured > 0, "a cold compile measured nothing"
        r = orch(binary, "run", art, "-i", f"image={EX}/image.npy", "--expected",
                 f"logits={EX}/logits.npy", "--repeat", "3")
        assert r.returncode == 0, f"run failed ({r.returncode}):\n{r.stdout}{r.stderr}"
        assert "logits" in r.stdout and ": ok" in r.stdout, r.stdout

    @case("warm_recompile_is_lookups_only_and_same_selection")
    def _():
        p = orch(binary, "compile", model, "-t", "cpu", "-o", art + "2", *common)
        assert p.returncode == 0, p.stderr[-3000:]
        measured, looked_up = counts(p.stdout)
        assert measured == 0, f"warm compile measured {measured} configs"
        assert looked_up > 0, "warm compile found nothing in the database"
        assert digest(p.stdout) == state["digest"], "warm compile chose another selection"
        # No interpreter at all: the check compares with the cached reference, to the same result.
        assert INTERP not in p.stderr, f"warm compile ran the interpreter:\n{p.stderr[-3000:]}"
        assert CACHED in p.stderr, p.stderr[-3000:]
        assert MODULE_REUSED in p.stderr, f"warm compile built its module:\n{p.stderr[-3000:]}"
        assert largest_error(p.stderr) == state["err"], (largest_error(p.stderr), state["err"])
        r = orch(binary, "run", art + "2", "-i", f"image={EX}/image.npy", "--expected",
                 f"logits={EX}/logits.npy")
        assert r.returncode == 0 and ": ok" in r.stdout, r.stdout + r.stderr
        refs = references(db)
        assert len(refs) == 1, f"{len(refs)} references after two compiles of one model"
        state["ref"] = next(iter(refs.items()))

    @case("warm_compiles_are_byte_identical")
    def _():
        # One model, one warm database: the same artefact, byte for byte, whatever the process
        # (a process id in the kernels' shared object made every compile differ), its build
        # folder or the working directory.
        outs = []
        for i, cwd in enumerate([tmp, ROOT]):
            out = os.path.join(tmp, f"same{i}.orch")
            p = run([os.path.abspath(binary), "compile", model, "-t", "cpu", "-o", out, *common,
                     "--trust-timings"], timeout=900, cwd=cwd,
                    env=dict(os.environ, TMPDIR=tmp if i else "/tmp"))
            assert p.returncode == 0, p.stderr[-3000:]
            assert counts(p.stdout)[0] == 0, "a warm compile measured"
            outs.append(open(out, "rb").read())
        outs.append(open(art + "2", "rb").read())
        for i, data in enumerate(outs[1:], 1):
            diff = [k for k in range(min(len(data), len(outs[0]))) if data[k] != outs[0][k]]
            assert len(data) == len(outs[0]) and not diff, \
                f"compile {i} differs from compile 0: {len(diff)} bytes, the first at {diff[:1]}"

    @case("stored_module_equals_a_fresh_build_and_damage_rebuilds_it")
    def _():
        # The kernels' module kept in the database is what building them again gives, byte for
        # byte: with the module table emptied, and with the stored blob damaged (read as absent,
        # said so, rebuilt and stored again), the artefact is the warm compile's.
        want = open(art + "2", "rb").read()
        for what in ["no stored module", "a damaged module"]:
            con = sqlite3.connect(db)
            if what == "no stored module":
                con.execute("DELETE FROM module")
            else:  # one byte of the shared object flipped
                key, blob = con.execute("SELECT key, bytes FROM module").fetchone()
                blob = bytearray(blob)
                blob[100] ^= 0x10
                con.execute("UPDATE module SET bytes = ? WHERE key = ?", (bytes(blob), key))
            con.commit()
            con.close()
            out = os.path.join(tmp, "rebuilt.orch")
            p = orch(binary, "compile", model, "-t", "cpu", "-o", out, *common)
            assert p.returncode == 0, p.stderr[-3000:]
            assert MODULE_REUSED not in p.stderr, f"{what}: reused"
            assert ("damaged" in p.stderr) == (what == "a damaged module"), p.stderr[-3000:]
            assert open(out, "rb").read() == want, f"{what}: the rebuilt artefact differs"
            con = sqlite3.connect(db)
            n = con.execute("SELECT count(*) FROM module").fetchone()[0]
            con.close()
            assert n == 1, f"{what}: {n} modules stored after the rebuild"
        p = orch(binary, "compile", model, "-t", "cpu", "-o", out, *common)
        assert p.returncode == 0 and MODULE_REUSED in p.stderr, p.stderr[-3000:]
        assert open(out, "rb").read() == want

    @case("invalid_database_rows_are_measured_again")
    def _():
        # The database is a cache: rows no measurement writes (edited, or a broken writer's) are
        # ignored with one warning and their configs measured again, never a failed compile.
        bad = os.path.join(tmp, "invalid-rows.db")
        shutil.copyfile(db, bad)
        con = sqlite3.connect(bad)
        keys = con.execute("SELECT signature, config FROM measurement WHERE status = 0 "
                           "ORDER BY signature, config").fetchall()
        edits = ["median_s = -1", "median_s = NULL", "median_s = 'fast'", "median_s = 1e999",
                 "min_s = median_s * 4", "status = 9"]
        assert len(keys) >= len(edits), f"only {len(keys)} ok rows"
        for (sig, cfg), edit in zip(keys, edits):
            con.execute(f"UPDATE measurement SET {edit} WHERE signature = ? AND config = ?",
                        (sig, cfg))
        con.commit()
        con.close()
        p = orch(binary, "compile", model, "-t", "cpu", "-o", art + "inv", *common[:4], "--db", bad)
        assert p.returncode == 0, f"exit {p.returncode}:\n{p.stderr[-3000:]}"
        warnings = [ln for ln in p.stderr.splitlines() if "values no measurement gives" in ln]
        assert len(warnings) == 1 and f"{len(edits)} rows" in warnings[0], p.stderr[-3000:]
        measured, _ = counts(p.stdout)
        con = sqlite3.connect(bad)
        fixed = 0
        for sig, cfg in keys[:len(edits)]:
            row = con.execute("SELECT status, median_s, min_s, typeof(median_s) FROM measurement "
                              "WHERE signature = ? AND config = ?", (sig, cfg)).fetchone()
            fixed += row is not None and row[0] == 0 and row[3] == "real" and \
                0 <= row[2] <= row[1] < 1e300
        con.close()
        # (Times measured again may make the tuning try a config more: measured can exceed it.)
        assert fixed >= 1 and measured >= fixed, f"{fixed} rows measured again, {measured} configs"

    @case("measurements_keyed_by_the_code_they_timed")
    def _():
        # Every measurement's config ends with a hash of the source the config emitted; rows
        # whose hash differs (code from another generator) or that carry none (an older orch's
        # revision numbers) are not reused: the compile measures again.
        rows = db_rows(db)
        assert rows and all(re.search(r" src=[0-9a-f]{16}$", cfg) for _, cfg in rows), \
            list(rows)[:3]
        for what, sql in [
                ("another generator's code",
                 "UPDATE measurement SET config = substr(config, 1, length(config) - 16) "
                 "|| '0123456789abcdef'"),
                ("an older orch's revision",
                 "UPDATE measurement SET config = substr(config, 1, instr(config, ' src=') - 1) "
                 "|| ' gen=40'")]:
            old = os.path.join(tmp, "other-code.db")
            shutil.copyfile(db, old)
            con = sqlite3.connect(old)
            con.execute(sql)
            con.commit()
            con.close()
            p = orch(binary, "compile", model, "-t", "cpu", "-o", art + "rev", *common[:4],
                     "--db", old)
            assert p.returncode == 0, p.stderr[-3000:]
            measured, looked_up = counts(p.stdout)
            assert looked_up == 0, f"{what}: {looked_up} configs reused"
            assert measured > 0, f"{what}: nothing measured"
            os.remove(old)

    @case("damaged_or_wrong_reference_is_recomputed_not_trusted")
    def _():
        key, good = state["ref"]
        payload = good[:-8]
        assert int.from_bytes(good[-8:], "little") == fnv1a64(payload), "checksum layout"
        # The float outputs, scaled by 3 under a valid checksum: a stale reference the check
        # must not fail a good artefact on (the interpreter decides, the row is rewritten).
        n_out = int.from_bytes(payload[12:16], "little")
        data = bytearray(payload)
        head = 16 + 16 * n_out

        vals = struct.unpack_from(f"<{(len(data) - head) // 4}f", data, head)
        struct.pack_into(f"<{len(vals)}f", data, head, *[3 * v + 1 for v in vals])
        wrong = bytes(data) + fnv1a64(bytes(data)).to_bytes(8, "little")
        flipped = bytearray(good)
        flipped[len(flipped) // 2] ^= 0x40
        for what, blob, says in [("flipped byte", bytes(flipped), "damaged"),
                                 ("short", good[:5], "damaged"),
                                 ("empty", b"", "damaged"),
                                 ("other format", b"xx" + good[2:-8], "damaged"),
                                 ("wrong values", wrong, "disagrees with the cached reference")]:
            if what == "other format":  # a valid checksum over a blob of another layout
                blob = blob + fnv1a64(blob).to_bytes(8, "little")
            set_reference(db, key, blob)
            p = orch(binary, "compile", model, "-t", "cpu", "-o", art + "3", *common)
            assert p.returncode == 0, f"{what}: {p.stderr[-3000:]}"
            assert says in p.stderr, f"{what}: {p.stderr[-3000:]}"
            assert INTERP in p.stderr, f"{what}: the interpreter did not run"
            assert CACHED not in p.stderr, f"{what}: trusted"
            assert digest(p.stdout) == state["digest"], what
            assert largest_error(p.stderr) == state["err"], what
            assert references(db) == {key: good}, f"{what}: the reference was not rewritten"

    @case("kill_mid_compile_then_resume")
    def _():
        kdb = os.path.join(tmp, "kill.db")
        big = os.path.join(models, "a_convnet", "model.onnx")
        args = ["compile", big, "-t", "cpu", "-o", os.path.join(tmp, "k.orch"), "--db", kdb,
                "--top-k", "4", "--jobs", "1", "--input-shapes", "input:3x3x32x32", "--trust-timings"]
        ktmp = os.path.join(tmp, "kill-tmp")  # its build folders
        os.makedirs(ktmp)
        kenv = dict(os.environ, TMPDIR=ktmp)
        proc = subprocess.Popen([binary, *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=kenv)
        deadline = time.time() + 300
        before = {}
        while time.time() < deadline and proc.poll() is None:
            before = db_rows(kdb, ok_only=True) if os.path.exists(kdb) else {}
            if len(before) >= 4:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the compile finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = db_rows(kdb, ok_only=True)
        assert len(before) >= 4, f"only {len(before)} measurements before the kill"
        stale = [d for d in os.listdir(ktmp) if d.startswith("orch-build-")]
        assert any(f"-{proc.pid}-" in d for d in stale), f"no build folder left: {stale}"
        # The configs in flight when a compile dies stay pending in the database: two measured
        # rows become pending rows of the killed process, a first attempt (measured again once)
        # and a second one (a config that killed its process twice is not measured again).
        con = sqlite3.connect(kdb, timeout=30)
        (sig1, cfg1), (sig2, cfg2) = sorted(before)[:2]
        with con:
            for sig, cfg, attempt in [(sig1, cfg1, 1), (sig2, cfg2, 2)]:
                con.execute("UPDATE measurement SET status = 4, median_s = NULL, min_s = NULL, "
                            "reps = ?, pid = ?, host = ?, proc_start = '' WHERE signature = ? "
                            "AND config = ?", (attempt, proc.pid, os.uname().nodename, sig, cfg))
        con.close()
        del before[(sig1, cfg1)], before[(sig2, cfg2)]
        p = orch(binary, *args, env=kenv)
        assert p.returncode == 0, f"rerun failed:\n{p.stderr[-3000:]}"
        retried = re.search(r"(\d+) configs? whose measuring process died", p.stderr)
        assert retried and int(retried.group(1)) >= 1, p.stderr[-3000:]
        left = [d for d in os.listdir(ktmp) if d.startswith("orch-build-")]
        assert not left, f"build folders left after the rerun: {left} (before it: {stale})"
        measured, looked_up = counts(p.stdout)
        assert measured >= 1, "the config in flight at the kill was not measured again"
        assert looked_up >= len(before), \
            f"rerun found {looked_up} configs in the database, {len(before)} were there"
        after = db_rows(kdb)
        for k, v in before.items():
            assert k in after, f"measurement {k} lost"
            assert after[k] == v, f"measurement {k} was redone: {v} -> {after[k]}"
        assert after[(sig1, cfg1)][0] == 0, f"first attempt not measured again: {after[(sig1, cfg1)]}"
        assert after[(sig2, cfg2)][0] == 4, f"second attempt measured again: {after[(sig2, cfg2)]}"
        again = orch(binary, *args)
        assert again.returncode == 0, again.stderr[-3000:]
        measured, _ = counts(again.stdout)
        assert measured == 0, f"third compile measured {measured} configs"
        assert digest(again.stdout) == digest(p.stdout), "selection changed after resuming"

    def db_check(path):
        r = orch(binary, "db", "check", "--db", path, "--json", "--limit", "100000")
        assert r.returncode in (0, 2), r.stderr
        return json.loads(r.stdout)

    def busy_loops(n):
        return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]

    def stop(procs):
        for q in procs:
            q.kill()
            q.wait()

    @case("busy_compile_stores_suspect_then_quiet_compile_measures_them")
    def _():
        # Two busy loops share the cores during a compile: its unstable timings are stored
        # suspect (or none are), the summary counts them, and the next compile measures every
        # suspect row again instead of reusing it. One config per kernel, so both compiles
        # measure the same configs.
        bdb = os.path.join(tmp, "busy.db")
        mlp = os.path.join(models, "d_mlp", "model.onnx")
        args = ["compile", mlp, "-t", "cpu", "-o", os.path.join(tmp, "busy.orch"), "--db", bdb,
                "--top-k", "1"]
        loops = busy_loops(2)
        try:
            time.sleep(0.3)
            p = orch(binary, *args, trust=False)
        finally:
            stop(loops)
        assert p.returncode == 0, p.stderr[-3000:]
        c1 = db_check(bdb)
        s1 = c1["counts"]["suspect"]
        m = re.search(r"warning: (\d+) timings? unstable: measured on a busy machine", p.stdout)
        assert (int(m.group(1)) if m else 0) == s1, f"{s1} suspect rows:\n{p.stdout}"
        assert not c1["damaged"] and c1["counts"]["pending"] == 0, c1
        listed = [r for r in c1["listed"] if r["kind"] == "suspect"]
        assert len(listed) == s1 and all("unstable after" in r["note"] or
                                         "unstable, timed once" in r["note"] for r in listed), c1
        measured1, _ = counts(p.stdout)
        q = orch(binary, *args, trust=False)
        assert q.returncode == 0, q.stderr[-3000:]
        measured2, looked_up2 = counts(q.stdout)
        m = re.search(r"tune: (\d+) configs? whose stored timing was unstable", q.stderr)
        again = int(m.group(1)) if m else 0
        assert again == s1 and measured2 == s1, \
            f"{s1} suspect rows, {again} re-measured, {measured2} measured:\n{q.stderr[-2000:]}"
        assert looked_up2 == measured1 - s1, (looked_up2, measured1, s1)
        c2 = db_check(bdb)
        m = re.search(r"warning: (\d+) timings? unstable", q.stdout)
        assert c2["counts"]["suspect"] == (int(m.group(1)) if m else 0), (c2, q.stdout)
        st = orch(binary, "db", "stats", "--db", bdb)
        assert ("suspect:" in st.stdout) == (c2["counts"]["suspect"] > 0), st.stdout

    @case("three_concurrent_compiles_on_one_database")
    def _():
        # Three compiles of different models at once on one database (on a busy machine, by
        # each other): all succeed, the file is clean (no pending, crashed or invalid row), and
        # every kernel of each plan has its config's row (a kernel's name holds its signature
        # and a hash of its config).
        cdb = os.path.join(tmp, "concurrent.db")
        jobs = [("d_mlp", []), ("a_convnet", ["--input-shapes", "input:3x3x32x32"]),
                ("e_mixed", [])]
        procs = []
        for name, extra in jobs:
            out = os.path.join(tmp, f"cc_{name}.orch")
            procs.append((name, out, subprocess.Popen(
                [binary, "compile", os.path.join(models, name, "model.onnx"), "-t", "cpu", "-o",
                 out, "--db", cdb, "--top-k", "2", *extra], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)))
        for name, out, proc in procs:
            o, e = proc.communicate(timeout=900)
            assert proc.returncode == 0, f"{name}: exit {proc.returncode}:\n{e[-3000:]}"
        c = db_check(cdb)
        assert not c["damaged"] and c["integrity"] == "ok", c
        for kind in ("pending", "crashed", "invalid"):
            assert c["counts"][kind] == 0, c
        con = sqlite3.connect(cdb, timeout=30)
        rows = con.execute("SELECT signature, config, status FROM measurement").fetchall()
        con.close()
        have = set()
        for sig, cfg, status in rows:
            desc = cfg.rsplit(" src=", 1)[0]
            h = 2166136261
            for ch in desc.encode():
                h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
            if status == 0:
                have.add(f"orch_k{sig}_{h:08x}")
        for name, out, _ in procs:
            js = os.path.join(tmp, f"cc_{name}.json")
            b = orch(binary, "bench", out, "--iters", "2", "--warmup", "1", "--json", js)
            assert b.returncode == 0, b.stderr
            kernels = [k["name"] for k in json.load(open(js))["kernels"]
                       if k["name"].startswith("orch_k")]
            assert kernels, f"{name}: no generated kernel in its plan"
            missing = [k for k in kernels if k not in have]
            assert not missing, f"{name}: kernels without their row: {missing}"

    @case("db_export_import_merge")
    def _():
        # The concurrent compiles' database exported, imported into a new file and merged into
        # another: the same rows; a newer format version and a malformed line are refused with
        # the line's number, importing nothing.
        cdb = os.path.join(tmp, "concurrent.db")
        exp = os.path.join(tmp, "export.jsonl")
        r = orch(binary, "db", "export", exp, "--db", cdb)
        assert r.returncode == 0, r.stderr
        lines = open(exp).read().splitlines()
        assert json.loads(lines[0])["format"] == "orch-profile"
        n = sum(1 for x in lines[1:] if json.loads(x)["kind"] == "measurement")
        assert n == len(db_rows(cdb)) and n > 0, (n, len(db_rows(cdb)))
        idb, mdb = os.path.join(tmp, "imported.db"), os.path.join(tmp, "merged.db")
        r = orch(binary, "db", "import", exp, "--db", idb)
        assert r.returncode == 0 and f"{n} added" in r.stdout, r.stdout + r.stderr
        r = orch(binary, "db", "merge", cdb, "--db", mdb)
        assert r.returncode == 0 and f"{n} added" in r.stdout, r.stdout + r.stderr
        assert db_rows(idb) == db_rows(cdb) == db_rows(mdb)
        r = orch(binary, "db", "import", exp, "--db", idb)
        assert r.returncode == 0 and f"{n} kept" in r.stdout, r.stdout
        bad = os.path.join(tmp, "bad.jsonl")
        open(bad, "w").write("\n".join(lines[:3] + ["{\"kind\": \"measurement\"}"]) + "\n")
        fresh = os.path.join(tmp, "fresh.db")
        r = orch(binary, "db", "import", bad, "--db", fresh)
        assert r.returncode == 2 and "line 4:" in r.stderr, r.stderr
        assert len(db_rows(fresh)) == 0, "a refused import stored rows"
        head = json.loads(lines[0])
        head["version"] = 99
        open(bad, "w").write("\n".join([json.dumps(head)] + lines[1:]) + "\n")
        r = orch(binary, "db", "import", bad, "--db", fresh)
        assert r.returncode == 3 and "line 1: export format version 99" in r.stderr, r.stderr

    @case("damaged_artefacts_refused")
    def _():
        data = open(art, "rb").read()
        bad = os.path.join(tmp, "bad.orch")
        trials = [
            ("flipped byte", data[:len(data) // 2] + bytes([data[len(data) // 2] ^ 0xFF]) +
             data[len(data) // 2 + 1:], "checksum"),
            ("truncated", data[:len(data) // 2], "truncated"),
            ("newer format", data[:8] + bytes([99]) + data[9:], "version"),
            ("header only", data[:40], "truncated"),
        ]
        for what, blob, word in trials:
            with open(bad, "wb") as f:
                f.write(blob)
            r = orch(binary, "run", bad)
            assert r.returncode == 2, f"{what}: exit {r.returncode}, stderr: {r.stderr}"
            assert bad in r.stderr and word in r.stderr.lower(), f"{what}: message: {r.stderr}"
            assert r.stderr.count("\n") <= 3, f"{what}: more than one message: {r.stderr}"

    @case("bench_json")
    def _():
        js = os.path.join(tmp, "bench.json")
        # Run from a process holding 256 MiB: the peak RSS bench reports is its own (getrusage's
        # ru_maxrss outlives execve and reported the parent's).
        ballast = b"\x01" * (256 << 20)
        p = orch(binary, "bench", art, "--iters", "20", "--warmup", "2", "--json", js)
        del ballast
        assert p.returncode == 0, p.stderr
        for w in ("median", "p99", "kernels"):
            assert w in p.stdout, f"no {w} in bench output"
        j = json.load(open(js))
        for k in ("min_ms", "median_ms", "p90_ms", "p99_ms", "kernels", "arena_bytes"):
            assert k in j, f"JSON lacks {k}"
        assert j["min_ms"] <= j["median_ms"] <= j["p90_ms"] <= j["p99_ms"], j
        assert len(j["kernels"]) >= 1 and all("nodes" in k for k in j["kernels"])
        assert 0 < j["peak_rss_bytes"] < (200 << 20), f"peak RSS {j['peak_rss_bytes']}"
        assert j["input_files"] == {}, j["input_files"]
        # -i NAME=FILE as orch run's: the file's values benched; a name the model lacks, a
        # wrong shape or dtype refused before any run, the first naming the inputs.
        p = orch(binary, "bench", art, "--iters", "3", "--warmup", "1", "--json", js, "-i",
                 f"image={EX}/image.npy")
        assert p.returncode == 0, p.stderr
        assert "inputs: 1 from -i files, 0 random" in p.stdout, p.stdout
        assert json.load(open(js))["input_files"] == {"image": f"{EX}/image.npy"}
        import numpy as np
        bad = os.path.join(tmp, "bench_bad.npy")
        np.save(bad, np.zeros((1, 1), np.float32))
        for args, code, want in (([f"no_such_input={EX}/image.npy"], 1, "its inputs: 'image'"),
                                 ([f"image={bad}"], 2, "has shape 1x1"),
                                 ([f"image={os.path.join(tmp, 'missing.npy')}"], 2, "missing"),
                                 (["image"], 1, "-i expects NAME=FILE")):
            p = orch(binary, "bench", art, "--iters", "3", "-i", *args)
            assert p.returncode == code and want in p.stderr, (args, p.returncode, p.stderr)
            assert "latency" not in p.stdout, p.stdout

    @case("db_stats_and_clear")
    def _():
        s = orch(binary, "db", "stats", "--db", db, "--json")
        assert s.returncode == 0, s.stderr
        j = json.loads(s.stdout)
        assert j["rows"] > 0, j
        assert j["references"] == 1 and j["reference_bytes"] > 8, j
        assert j["modules"] >= 1 and j["module_bytes"] > 1000, j
        # A filtered clear keeps the references (they belong to no target or device); the
        # modules, built for a target, go with its measurements.
        c = orch(binary, "db", "clear", "--db", db, "--yes", "--target", "cpu")
        assert c.returncode == 0 and "deleted" in c.stdout, c.stdout + c.stderr
        j = json.loads(orch(binary, "db", "stats", "--db", db, "--json").stdout)
        assert j["rows"] == 0 and j["references"] == 1 and j["modules"] == 0, j
        c = orch(binary, "db", "clear", "--db", db, "--yes")
        assert c.returncode == 0 and "deleted 1 rows" in c.stdout, c.stdout + c.stderr
        s = orch(binary, "db", "stats", "--db", db, "--json")
        j = json.loads(s.stdout)
        assert j["rows"] == 0 and j["references"] == 0, j

    @case("cuda_target_without_a_driver")
    def _():
        # Where libcuda.so.1 cannot be opened (CI), -t cuda must say so plainly and exit 3
        # (unsupported); where it can (a GPU machine), it must not claim there is no driver.
        import ctypes
        try:
            ctypes.CDLL("libcuda.so.1")
            has_driver = True
        except OSError:
            has_driver = False
        r = orch(binary, "compile", model, "-t", "cuda", "-o", os.path.join(tmp, "cu.orch"),
                 "--input-shapes", "image:1x3x32x32", "--top-k", "1", "--db", db)
        if has_driver:
            assert "no CUDA driver found" not in r.stderr, r.stderr
        else:
            assert r.returncode == 3, f"exit {r.returncode}, want 3; stderr: {r.stderr}"
            assert "no CUDA driver found" in r.stderr and "-t cpu" in r.stderr, r.stderr
            assert r.stderr.count("\n") <= 3, f"more than one message: {r.stderr}"
            assert not os.path.exists(os.path.join(tmp, "cu.orch")), "an artefact was written"

    @case("precision_option")
    def _():
        # fp32 is the default and the only precision of the CPU target: recorded in the
        # artefact's header and shown by compile, run and bench.
        p32 = os.path.join(tmp, "p32.orch")
        p = orch(binary, "compile", model, "-t", "cpu", "-o", p32, "--precision", "fp32", *common)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "precision: fp32 (exact float32 arithmetic)" in p.stdout, p.stdout
        assert "target cpu (fp32)" in p.stderr, p.stderr[-2000:]
        data = open(p32, "rb").read()
        assert int.from_bytes(data[8:12], "little") == 7, "artefact format is not 7"
        assert header_flags(p32)[2] == 0, "compile flags beside the default options"
        at = 16
        for _field in ("orch version", "target"):
            at += 4 + int.from_bytes(data[at:at + 4], "little")
        n = int.from_bytes(data[at:at + 4], "little")
        assert data[at + 4:at + 4 + n] == b"fp32", f"header precision {data[at + 4:at + 4 + n]}"
        r = orch(binary, "run", p32, "-i", f"image={EX}/image.npy", "--expected",
                 f"logits={EX}/logits.npy")
        assert r.returncode == 0 and "precision fp32" in r.stdout, r.stdout + r.stderr
        js = os.path.join(tmp, "p32.json")
        b = orch(binary, "bench", p32, "--iters", "3", "--warmup", "1", "--json", js)
        assert b.returncode == 0 and "precision fp32" in b.stdout, b.stdout + b.stderr
        assert json.load(open(js))["precision"] == "fp32"
        # Reduced precisions need the CUDA target: one message, the usage exit code, no file.
        for prec in ("tf32", "fp16", "bf16"):
            for args in (["compile", model, "-t", "cpu", "-o", p32 + prec],
                         ["compile", model, "-o", p32 + prec],
                         ["bench", model]):
                r = orch(binary, *args, "--precision", prec, *common)
                assert r.returncode == 1, f"{args} {prec}: exit {r.returncode}: {r.stderr}"
                want = f"--precision {prec} needs -t cuda; the CPU target computes in float32"
                assert want in r.stderr, r.stderr
                assert not os.path.exists(p32 + prec), "an artefact was written"
        for bad in ("fp64", "FP16", "half", ""):
            r = orch(binary, "compile", model, "-t", "cpu", "-o", p32 + "x", "--precision", bad)
            assert r.returncode == 1 and "--precision expects fp32, tf32, fp16 or bf16" in \
                r.stderr, f"'{bad}': exit {r.returncode}: {r.stderr}"
        r = orch(binary, "compile", model, "-t", "cpu", "-o", p32 + "x", "--precision")
        assert r.returncode == 1 and "--precision needs a value" in r.stderr, r.stderr
        # Half storage needs fp16 or bf16 (and so the CUDA target).
        for extra in ([], ["--precision", "fp32"], ["--precision", "tf32", "-t", "cuda"]):
            r = orch(binary, "compile", model, "-o", p32 + "h", "--half-storage", *extra)
            assert r.returncode == 1 and \
                "--half-storage needs --precision fp16 or bf16 (and -t cuda)" in r.stderr, \
                f"{extra}: exit {r.returncode}: {r.stderr}"
            assert not os.path.exists(p32 + "h"), "an artefact was written"
        r = orch(binary, "compile", model, "-t", "cpu", "-o", p32 + "h", "--half-storage",
                 "--precision", "fp16")
        assert r.returncode == 1 and "needs -t cuda" in r.stderr, r.stderr
        # Where no GPU driver exists, -t cuda with a precision still says so plainly.
        r = orch(binary, "compile", model, "-t", "cuda", "-o", p32 + "cu", "--precision", "bf16",
                 *common)
        try:
            import ctypes
            ctypes.CDLL("libcuda.so.1")
        except OSError:
            assert r.returncode == 3 and "no CUDA driver found" in r.stderr, r.stderr

    @case("explain_lists_each_linear_primitive")
    def _():
        # --explain: one line per matmul/conv primitive (the tiny CNN has four convs and a
        # Gemm) with the chosen kernel and the fastest candidate of each family computing it;
        # --explain-all adds every candidate computing it; without either, no such report, and
        # the ORCH_EXPLAIN variable the option replaced does nothing.
        p = orch(binary, "compile", model, "-t", "cpu", "-o", os.path.join(tmp, "x.orch"),
                 "--explain", *common)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "explain: the linear primitives' kernels" in p.stderr, p.stderr[-3000:]
        t = r"([0-9.]+) (s|ms|us)"
        line = re.compile(rf"^  linear (\S+): chosen {t} \[cls=[^]]*\] \((\d+) prims\)"
                          rf"((?:; (?:generated|cudnn|cublaslt) {t} \(\d+ prims\))+)$")
        found = [m for m in map(line.match, p.stderr.splitlines()) if m]
        names = sorted(m.group(1) for m in found)
        assert names == ["/block1.a/Conv", "/block1.b/Conv", "/block2/Conv", "/fc/Gemm",
                         "/stem/Conv"], f"{names}:\n{p.stderr[-3000:]}"
        scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
        for m in found:
            # The CPU target has generated kernels only; the chosen one is among those counted.
            alts = re.findall(r"; (\w+) ([0-9.]+) (s|ms|us)", m.group(5))
            assert [a[0] for a in alts] == ["generated"], m.group(0)
            chosen = float(m.group(2)) * scale[m.group(3)]
            best = float(alts[0][1]) * scale[alts[0][2]]
            assert best <= chosen * 1.001 + 1e-7, m.group(0)
        assert not re.search(r"^    candidate \d+: ", p.stderr, re.M), "--explain listed candidates"
        a = orch(binary, "compile", model, "-t", "cpu", "-o", os.path.join(tmp, "x.orch"),
                 "--explain-all", *common)
        assert a.returncode == 0, a.stderr[-3000:]
        cands = re.findall(r"^    candidate \d+: .*; in \[", a.stderr, re.M)
        assert len(found) == 5 and len(cands) >= 5, f"{len(cands)} candidates:\n{a.stderr[-3000:]}"
        os.environ["ORCH_EXPLAIN"] = "2"
        try:
            q = orch(binary, "compile", model, "-t", "cpu", "-o", os.path.join(tmp, "x.orch"),
                     *common)
        finally:
            del os.environ["ORCH_EXPLAIN"]
        assert q.returncode == 0 and "explain:" not in q.stderr, q.stderr[-3000:]
        # The report goes with the progress lines: --quiet with it is a usage error.
        r = orch(binary, "compile", model, "-t", "cpu", "-o", os.path.join(tmp, "x.orch"),
                 "--explain", "--quiet", *common)
        assert r.returncode == 1 and "--explain prints with the progress lines" in r.stderr, \
            f"exit {r.returncode}: {r.stderr}"

    @case("multi_layer_report_says_why")
    def _():
        # The transformer block has one attention (four fused candidates: with and without the
        # head-split layouts, each also ending with the layout merging the heads back) and MLP
        # chains; compile reports each with its time and, where the plan does not run it, what
        # the plan spends on those primitives instead.
        tm = os.path.join(models, "b_transformer", "model.onnx")
        p = orch(binary, "compile", tm, "-t", "cpu", "-o", os.path.join(tmp, "t.orch"),
                 "--db", os.path.join(tmp, "t.db"), "--top-k", "1", "--input-shapes",
                 "hidden_states:1x16x64,attention_mask:1x1x16x16")
        assert p.returncode == 0, p.stderr[-3000:]
        line = re.compile(r"^  (fused attention|MLP chain) \((\d+) primitives, (\d+) linear\): "
                          r"([0-9.]+) (s|ms|us) \[cls=[^]]*\], (chosen|not chosen: the plan "
                          r"computes them with (\d+) kernels? of ([0-9.]+) (s|ms|us) in all)$")
        found = [m for m in map(line.match, p.stderr.splitlines()) if m]
        att = [m for m in found if m.group(1) == "fused attention"]
        assert len(att) == 4, f"{len(att)} fused attention lines:\n{p.stderr[-3000:]}"
        for m in found:
            assert int(m.group(3)) >= 2 and int(m.group(2)) > int(m.group(3)), m.group(0)
            if m.group(6) != "chosen":
                assert int(m.group(7)) >= 1 and float(m.group(8)) > 0, m.group(0)
        # The attention candidates overlap (the same core): at most one is run.
        assert sum(m.group(6) == "chosen" for m in att) <= 1, p.stderr[-3000:]

    @case("grouped_query_attention_fused")
    def _():
        # The Llama layer (8 query heads reading 2 K/V heads through repeat_kv's Expand, causal,
        # rotary embeddings): the variants reading K and V through repeat_kv in place, and those
        # also computing the rotations, are proposed with their K/V group found (inspect names
        # them), the compile reports all six fused attentions, and the artefact agrees with ONNX
        # Runtime.
        d = os.path.join(models, "x_llama_gqa")
        lm = os.path.join(d, "model.onnx")
        shapes = ["--input-shapes", "hidden_states:1x64x256"]
        i = orch(binary, "inspect", lm, "--stage", "candidates", "--target", "cpu", *shapes)
        assert i.returncode == 0, i.stderr[-3000:]
        grp = re.findall(r"^  fused attention #\d+ \((\d+) primitives\): K and V shared by 4 "
                         r"consecutive heads of lead axis 1 \(grouped-query\)$", i.stdout, re.M)
        # the variants reading K and V through repeat_kv (9, 10 with the heads' merge) and those
        # computing the rotary embeddings of Q and K in their prologue (21, 22)
        assert sorted(grp) == ["10", "21", "22", "9"], i.stdout[-3000:]
        out = os.path.join(tmp, "llama.orch")
        p = orch(binary, "compile", lm, "-t", "cpu", "-o", out, "--db",
                 os.path.join(tmp, "llama.db"), "--top-k", "1", *shapes)
        assert p.returncode == 0, p.stderr[-3000:]
        att = re.findall(r"^  fused attention \((\d+) primitives, 2 linear\): ", p.stderr, re.M)
        assert sorted(att) == ["10", "21", "22", "7", "8", "9"], p.stderr[-3000:]
        r = orch(binary, "run", out, "-i", f"hidden_states={d}/inputs/hidden_states.npy",
                 "--expected", f"y={d}/expected/y.npy")
        assert r.returncode == 0 and ": ok" in r.stdout, r.stdout + r.stderr

    @case("budget_bounds_tuning_and_says_what_it_skipped")
    def _():
        # A budget spent at once: every single-primitive kernel still measured once (a plan
        # exists and is checked), the rest skipped and counted; a compile without the budget on
        # the same database reuses those timings, measures the rest and can only do better.
        bdb = os.path.join(tmp, "budget.db")
        out = os.path.join(tmp, "budget.orch")
        args = [model, "-t", "cpu", "--input-shapes", "image:1x3x32x32", "--top-k", "3",
                "--db", bdb]
        p = orch(binary, "compile", *args, "-o", out, "--budget", "0.001")
        assert p.returncode == 0, p.stderr[-3000:]
        m = re.search(r"budget: tuning stopped at --budget 0.001 s: (\d+) kernel configs not "
                      r"measured, (\d+) fused kernels left out", p.stdout)
        assert m and int(m.group(1)) > 0, p.stdout
        measured, _ = counts(p.stdout)
        assert measured > 0, "nothing measured: no plan could exist"
        def predicted(out):  # the summary's "predicted 84.8 us" (or ms, or s), in seconds
            m = re.search(r"predicted ([0-9.]+) (us|ms|s),", out)
            assert m, out
            return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]
        r = orch(binary, "run", out, "-i", f"image={EX}/image.npy", "--expected",
                 f"logits={EX}/logits.npy")
        assert r.returncode == 0 and ": ok" in r.stdout, r.stdout + r.stderr
        q = orch(binary, "compile", *args, "-o", out + "2")
        assert q.returncode == 0, q.stderr[-3000:]
        assert "budget:" not in q.stdout, q.stdout
        m2, looked_up = counts(q.stdout)
        assert m2 > 0 and looked_up >= measured, (m2, looked_up, measured)
        assert predicted(q.stdout) <= predicted(p.stdout) * (1 + 1e-9), (q.stdout, p.stdout)
        for bad in ("0", "-1", "abc", "1e9"):
            u = orch(binary, "compile", *args, "-o", out + "3", "--budget", bad)
            assert u.returncode == 1 and "--budget expects seconds" in u.stderr, (bad, u.stderr)

    @case("no_mlp_chains_and_no_attention")
    def _():
        # --no-mlp-chains / --no-attention: the transformer block's MLP chain / fused attention
        # candidates are not offered (fewer candidates, none in the report; where the default
        # plan ran one, another selection), and the artefact records the options (header, orch
        # info, orch run). The environment variables they replace change nothing.
        tm = os.path.join(models, "b_transformer", "model.onnx")
        args = ["-t", "cpu", "--db", os.path.join(tmp, "t.db"), "--top-k", "1", "--input-shapes",
                "hidden_states:1x16x64,attention_mask:1x1x16x16"]
        kinds = re.compile(r"^  (fused attention|MLP chain) \(.*?, (chosen|not chosen)", re.M)
        ncand = re.compile(r"^candidates: (\d+) candidate kernels", re.M)
        os.environ.update(ORCH_MLP_CHAINS="0", ORCH_ATTENTION="0")
        try:
            base = orch(binary, "compile", tm, "-o", os.path.join(tmp, "t0.orch"), *args)
        finally:
            del os.environ["ORCH_MLP_CHAINS"], os.environ["ORCH_ATTENTION"]
        assert base.returncode == 0, base.stderr[-3000:]
        got = kinds.findall(base.stderr)
        assert {k for k, _ in got} == {"fused attention", "MLP chain"}, base.stderr[-3000:]
        assert header_flags(os.path.join(tmp, "t0.orch")) == (7, 0, 0)
        i = orch(binary, "info", os.path.join(tmp, "t0.orch"))
        assert i.returncode == 0 and "compile options: defaults" in i.stdout, i.stdout + i.stderr
        for flag, kind, bit in (("--no-mlp-chains", "MLP chain", NO_MLP_CHAINS),
                                ("--no-attention", "fused attention", NO_ATTENTION)):
            out = os.path.join(tmp, f"t{bit}.orch")
            p = orch(binary, "compile", tm, "-o", out, flag, *args)
            assert p.returncode == 0, f"{flag}: {p.stderr[-3000:]}"
            left = {k for k, _ in kinds.findall(p.stderr)}
            assert kind not in left and left, f"{flag}: {left}\n{p.stderr[-3000:]}"
            n0, n1 = (int(ncand.search(x.stderr).group(1)) for x in (base, p))
            assert n1 < n0, f"{flag}: {n1} candidates, {n0} without it"
            if (kind, "chosen") in got:  # the default plan ran one: this one cannot
                assert digest(p.stdout) != digest(base.stdout), f"{flag}: the same selection"
            assert header_flags(out) == (7, 0, bit), f"{flag}: header {header_flags(out)}"
            i = orch(binary, "info", out)
            assert i.returncode == 0 and f"compile options: {flag}\n" in i.stdout, \
                f"{flag}: {i.stdout}{i.stderr}"
            r = orch(binary, "run", out)
            assert r.returncode == 0 and f"compiled with: {flag}\n" in r.stdout, \
                f"{flag}: {r.stdout}{r.stderr}"
        both = os.path.join(tmp, "t3.orch")
        p = orch(binary, "compile", tm, "-o", both, "--no-mlp-chains", "--no-attention", *args)
        assert p.returncode == 0 and not kinds.search(p.stderr), p.stderr[-3000:]
        assert header_flags(both) == (7, 0, NO_MLP_CHAINS | NO_ATTENTION), header_flags(both)
        i = orch(binary, "info", both)
        assert "compile options: --no-mlp-chains --no-attention\n" in i.stdout, i.stdout
        # An artefact takes no compile flags.
        r = orch(binary, "info", both, "--input-shapes", "hidden_states:1x16x64")
        assert r.returncode == 1 and "compiled artefact" in r.stderr, r.stderr

    @case("layout_option")
    def _():
        # --layout auto|nchw|nhwc: anything else is refused by name, as is a layout other than
        # auto without --half-storage (channels-last layouts are made under it only); auto is
        # the default and is accepted anywhere. Refused: the usage exit code, no artefact.
        out = os.path.join(tmp, "lay.orch")
        for extra, want in [(["--layout", "bogus"], "--layout expects auto, nchw or nhwc, got 'bogus'"),
                            (["--layout", "NHWC"], "--layout expects auto, nchw or nhwc, got 'NHWC'"),
                            (["--layout"], "--layout needs a value"),
                            (["--layout", "nhwc"], "--layout nhwc needs --half-storage"),
                            (["--layout", "nchw"], "--layout nchw needs --half-storage"),
                            (["--layout", "nhwc", "--precision", "fp16", "-t", "cuda"],
                             "--layout nhwc needs --half-storage")]:
            r = orch(binary, "compile", model, "-o", out, *common, *extra)
            assert r.returncode == 1 and want in r.stderr, f"{extra}: exit {r.returncode}: {r.stderr}"
            assert not os.path.exists(out), f"{extra}: an artefact was written"
        p = orch(binary, "compile", model, "-t", "cpu", "-o", out, "--layout", "auto", *common)
        assert p.returncode == 0 and header_flags(out) == (7, 0, 0), p.stderr[-3000:]

    @case("not_generated_reported_and_strict")
    def _():
        # orch info's table says per op whether each target generates it; the CPU compile's
        # summary then lists exactly the ops the table leaves to an interpreter, one line per
        # op with every node, which interpreter and its share of the predicted time; orch info
        # on the artefact and orch bench's JSON list the same. --strict fails such a compile
        # with exit status 3 after that summary and writes nothing; where every kernel is
        # generated it succeeds and the artefact records it.
        fm = os.path.join(tmp, "fallbacks.onnx")
        ops = write_fallback_model(fm)
        i = orch(binary, "info", fm)
        assert i.returncode == 0, i.stdout + i.stderr
        table = op_table(i.stdout)
        assert {op: n for op, (n, _, _) in table.items()} == \
            {op: len(v) for op, v in ops.items()}, i.stdout
        for op in ("MatMul", "Relu", "Add"):
            assert table[op][1][0] == table[op][2][0] == "generated", (op, table[op])
        falls = {op for op, (_, cpu, _) in table.items() if cpu[0] != "generated"}
        out = os.path.join(tmp, "fallbacks.orch")
        args = ["-t", "cpu", "--db", os.path.join(tmp, "fb.db"), "--top-k", "1"]
        p = orch(binary, "compile", fm, "-o", out, *args)
        assert p.returncode == 0, p.stderr[-3000:]
        groups = fallback_groups(p.stdout)
        assert set(groups) == falls, f"summary {sorted(groups)}, orch info {sorted(falls)}:\n" \
            f"{p.stdout}{i.stdout}"
        for op, (kernels, nodes, where, share) in groups.items():
            assert nodes == sorted(ops[op]), (op, nodes)
            assert kernels == len(nodes), (op, kernels, nodes)
            want = "op interpreter" if table[op][1][0] == "op interpreter" else \
                "primitive interpreter"
            assert where == want, (op, where, table[op])
            assert share > 0, (op, share)
        m = re.search(r"^kernels: (\d+) launches, (?:all generated|(\d+) not generated "
                      r"\(([0-9.]+)% of the predicted time\))", p.stdout, re.M)
        assert m, p.stdout
        n_fall = sum(k for k, _, _, _ in groups.values())
        assert int(m.group(2) or 0) == n_fall, (m.group(0), groups)
        if groups:
            assert abs(float(m.group(3)) - sum(s for _, _, _, s in groups.values())) < 0.2 + \
                0.1 * len(groups), p.stdout
        a = orch(binary, "info", out)
        assert a.returncode == 0, a.stdout + a.stderr
        assert {k: v[:3] for k, v in fallback_groups(a.stdout).items()} == \
            {k: v[:3] for k, v in groups.items()}, a.stdout + p.stdout
        assert groups or "not generated: none" in a.stdout, a.stdout
        js = os.path.join(tmp, "fallbacks.json")
        b = orch(binary, "bench", out, "--iters", "2", "--warmup", "0", "--json", js)
        assert b.returncode == 0, b.stdout + b.stderr
        listed = json.load(open(js))["not_generated"]
        assert {g["ops"]: (g["kernels"], sorted(g["nodes"]), g["where"]) for g in listed} == \
            {k: v[:3] for k, v in groups.items()}, listed

        strict = os.path.join(tmp, "strict.orch")
        p = orch(binary, "compile", fm, "-o", strict, "--strict", *args)
        if groups:
            assert p.returncode == 3, f"--strict with kernels not generated: exit {p.returncode}"
            assert fallback_groups(p.stdout).keys() == groups.keys(), p.stdout
            assert re.search(rf"strict mode: {n_fall} kernels? (is|are) not generated for cpu",
                             p.stderr), p.stderr[-2000:]
            assert not os.path.exists(strict), "--strict refused but wrote the artefact"
        else:
            assert p.returncode == 0 and header_flags(strict)[2] == STRICT, p.stderr[-3000:]
        # The small CNN is all convolutions, pooling and elementwise work, generated on the CPU.
        p = orch(binary, "compile", model, "-o", strict, "--strict", *common)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "launches, all generated" in p.stdout and not fallback_groups(p.stdout), p.stdout
        assert header_flags(strict)[2] == STRICT, header_flags(strict)
        a = orch(binary, "info", strict)
        assert "compile options: --strict\n" in a.stdout and "not generated: none" in a.stdout, \
            a.stdout
        h = orch(binary, "compile", "--help")
        assert h.returncode == 0 and "--strict" in h.stdout and "exit status 3" in h.stdout, \
            h.stdout + h.stderr

    @case("run_outputs_one_file_each")
    def _():
        # -o DIR: names that map to one file name ('/' and '_', case), names past the file
        # system's 255 bytes, terminal controls and a leading dot each get their own file, and
        # the mapping is printed; nothing is written over another output.
        import numpy as np
        import onnx
        from onnx import TensorProto, helper
        ops = [("y/1", "Neg", lambda v: -v), ("y_1", "Relu", lambda v: np.maximum(v, 0)),
               ("Y_1", "Abs", np.abs), ("y:1", "Sigmoid", lambda v: 1 / (1 + np.exp(-v))),
               ("n" * 300, "Neg", lambda v: -v), ("n" * 300 + "b", "Abs", np.abs),
               ("\x1b[2J", "Relu", lambda v: np.maximum(v, 0)), (".hidden", "Neg", lambda v: -v),
               ("..", "Abs", np.abs), ("\u4f60\u597d", "Relu", lambda v: np.maximum(v, 0))]
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
        g = helper.make_graph(
            [helper.make_node(op, ["x"], [name], name=f"n{i}") for i, (name, op, _) in
             enumerate(ops)], "g", [x],
            [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3]) for name, _, _ in ops])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        onnx_path = os.path.join(tmp, "many_outputs.onnx")
        onnx.save(m, onnx_path)
        xv = np.array([[-1.5, 0.25, 2.0], [3.0, -0.5, 0.0]], np.float32)
        xp = os.path.join(tmp, "many_x.npy")
        np.save(xp, xv)
        outdir = os.path.join(tmp, "many_out")
        for run in range(2):  # a second run writes the same files again
            r = orch(binary, "run", onnx_path, "-i", f"x={xp}", "-o", outdir)
            assert r.returncode == 0, f"exit {r.returncode}: {r.stderr}"
            mapping = [ln.rsplit(" -> ", 1)[1] for ln in r.stdout.splitlines() if " -> " in ln]
            assert len(mapping) == len(ops), r.stdout
            files = sorted(os.listdir(outdir))
            assert len(files) == len(ops) == len(set(f.lower() for f in files)), files
            assert sorted(os.path.basename(f) for f in mapping) == files, (mapping, files)
            for path, (name, _, fn) in zip(mapping, ops):
                base = os.path.basename(path)
                assert len(base.encode()) <= 255 and not base.startswith("."), base
                assert "\x1b" not in base, repr(base)
                got = np.load(path)
                assert np.allclose(got, fn(xv), atol=1e-6), f"{name[:20]!r} in {base}: {got}"

    @case("inspect_artifact")
    def _():
        # orch inspect MODEL.orch: the plan it holds, one line per launch with predicted and
        # measured times; --dot draws each launch as a cluster; --stage is for ONNX models.
        assert os.path.exists(art), "the first case's artefact is gone"
        dot = os.path.join(tmp, "plan.dot")
        r = orch(binary, "inspect", art, "--dot", dot)
        assert r.returncode == 0, r.stderr
        m = re.search(r"plan, (\d+) launches", r.stdout)
        assert m, r.stdout
        rows = [ln for ln in r.stdout.splitlines() if re.match(r"^\s+\d+\s+\S+\s+[0-9.]+ us", ln)]
        assert len(rows) == int(m.group(1)), r.stdout
        text = open(dot).read()
        assert text.startswith("digraph") and text.count("subgraph cluster_") >= 2, text[:300]
        assert "launch 0:" in text and "measured" in text, text[:500]
        r = orch(binary, "inspect", art, "--stage", "plan")
        assert r.returncode == 1 and "artefact" in r.stderr, (r.returncode, r.stderr)

    @case("usage_errors")
    def _():
        for args, code in [(["compile", model, "-t", "tpu", "-o", art], 1),
                           (["compile", model, "-t", "cpu"], 1),
                           (["compile", "-t", "cpu", "-o", art], 1),
                           (["compile", model, "--threads", "0", "-o", art], 1),
                           (["run", art, "--engine", "prims"], 1),
                           (["compile", model, "-t", "cpu", "-o", art, "--seed", "-1"], 1),
                           (["compile", model, "-t", "cpu", "-o", art, "--seed", "+1"], 1),
                           (["run", art, "--seed", "-1"], 1),
                           (["bench", art, "--seed", "-1"], 1),
                           # --gpus: the CPU target measures on the host; malformed values.
                           (["compile", model, "-t", "cpu", "-o", art, "--gpus", "2"], 1),
                           (["compile", model, "-t", "cuda", "-o", art, "--gpus", "0"], 1),
                           (["compile", model, "-t", "cuda", "-o", art, "--gpus", "0,0"], 1),
                           (["compile", model, "-t", "cuda", "-o", art, "--gpus", "0,x"], 1),
                           (["compile", model, "-t", "cuda", "-o", art, "--gpus", ""], 1),
                           (["compile", os.path.join(tmp, "missing.onnx"), "-o", art], 2)]:
            r = orch(binary, *args)
            assert r.returncode == code, f"orch {' '.join(args)}: exit {r.returncode}, want {code}"
            assert r.stderr.strip(), f"orch {' '.join(args)}: no message"
        # run on an artefact: an -i name the model lacks fails naming its inputs, before any
        # run on random values; -o's folder is checked before any work.
        assert os.path.exists(art), "the first case's artefact is gone"
        import numpy as np
        npy = os.path.join(tmp, "typo_input.npy")
        np.save(npy, np.zeros((1,), np.float32))
        r = orch(binary, "run", art, "-i", f"no_such_input={npy}")
        assert r.returncode == 1 and "no_such_input" in r.stderr and "its inputs:" in r.stderr, \
            (r.returncode, r.stderr, r.stdout)
        assert "outputs:" not in r.stdout, r.stdout
        r = orch(binary, "run", art, "-o", os.path.join(tmp, "no", "such", "dir"))
        assert r.returncode == 1 and "does not exist" in r.stderr, (r.returncode, r.stderr)
        assert "outputs:" not in r.stdout, r.stdout

    shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
