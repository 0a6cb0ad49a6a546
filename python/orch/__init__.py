# orch for Python: compiles ONNX models into artefacts (orch.compile) and runs them on numpy
# arrays (orch.Session), through liborch's C API (include/orch.h) loaded with ctypes, so the
# package has no compiled extension. Errors are orch.Error, carrying orch's status and message.
"""orch: a tensor program optimizer. Compiles an ONNX model into an artefact tuned for this
machine and runs it on numpy arrays.

    import numpy as np, orch
    s = orch.compile("model.onnx", "model.orch", input_shapes={"image": (1, 3, 32, 32)})
    x = np.random.rand(*s.inputs[0].shape).astype(s.inputs[0].dtype)
    y = s.run({"image": x})               # {output name: numpy.ndarray}
    s = orch.Session("model.orch")        # later, or in another process

Inputs and outputs are host (numpy) arrays, copied to and from the GPU for an artefact compiled
for CUDA, or there device tensors (PyTorch, CuPy: anything with `__dlpack__`), read and written
in place with no host copies: `s.run({"image": torch_cuda_tensor})` returns torch CUDA tensors.

The C library is the liborch.so installed beside this file by `pip install .` (or the one
$ORCH_LIBRARY names).
"""
from __future__ import annotations

import enum
import os
import threading
from dataclasses import dataclass
from typing import Mapping, Sequence, Union

import numpy as np

from . import _capi
from ._capi import lib

__all__ = ["Error", "Status", "TensorInfo", "Session", "Model", "compile", "version",
           "__version__"]


class Status(enum.IntEnum):
    """orch_status: what kind of failure an Error is."""

    OK = 0
    USAGE = 1  # API misuse or bad option
    INVALID = 2  # malformed model or input
    UNSUPPORTED = 3  # valid ONNX that orch does not handle (yet)
    MISMATCH = 4  # outputs differ from expected ones
    RUNTIME = 5  # I/O, memory or internal failure


class Error(Exception):
    """A failure reported by orch: `status` is the orch_status (a Status), `message` orch's
    message (it names the file, the node or the input, and what to do)."""

    def __init__(self, message: str, status: int):
        super().__init__(message, status)
        self.message = message
        try:
            self.status: Union[Status, int] = Status(status)
        except ValueError:
            self.status = status

    def __str__(self) -> str:
        return self.message


def version() -> str:
    """The version of the loaded liborch (orch_version()), e.g. "0.1.0"."""
    return lib.orch_version().decode()


__version__ = version()


# orch_dtype (numbered as ONNX's TensorProto.DataType) -> numpy.
_DTYPES = {
    1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8),
    4: np.dtype(np.uint16), 5: np.dtype(np.int16), 6: np.dtype(np.int32),
    7: np.dtype(np.int64), 9: np.dtype(np.bool_), 10: np.dtype(np.float16),
    11: np.dtype(np.float64), 12: np.dtype(np.uint32), 13: np.dtype(np.uint64),
}
_BFLOAT16 = 16


def _numpy_dtype(code: int, name: str) -> np.dtype:
    if code in _DTYPES:
        return _DTYPES[code]
    if code == _BFLOAT16:
        try:  # numpy has no bfloat16; ml_dtypes (a dependency of JAX and TensorFlow) has
            import ml_dtypes
        except ImportError:
            raise Error(f"tensor '{name}' is bfloat16, which needs the ml_dtypes package "
                        "(pip install ml_dtypes)", Status.UNSUPPORTED) from None
        return np.dtype(ml_dtypes.bfloat16)
    raise Error(f"tensor '{name}' has orch_dtype {code}, which this package does not know",
                Status.UNSUPPORTED)


class _Context:
    """One orch_ctx: it holds the first error of the calls made with it, so each thread has its
    own (the C API's rule for running one session from several threads)."""

    __slots__ = ("ptr", "_free")

    def __init__(self) -> None:
        self.ptr = lib.orch_ctx_create()
        if not self.ptr:
            raise MemoryError("orch_ctx_create")
        self._free = lib.orch_ctx_free  # kept: at interpreter exit the module may be gone

    def __del__(self) -> None:
        self._free(self.ptr)


_local = threading.local()


def _ctx() -> int:
    c = getattr(_local, "ctx", None)
    if c is None:
        c = _local.ctx = _Context()
    return c.ptr


def _check(ctx: int, rc: int, what: str) -> None:
    if rc != Status.OK:
        msg = lib.orch_last_error(ctx).decode(errors="replace")
        # The context keeps the first error; this thread's next call must start clean.
        lib.orch_clear_error(ctx)
        raise Error(msg or f"{what} failed", rc)


@dataclass(frozen=True)
class TensorInfo:
    """A model input or output: its graph name, shape and element type."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    def __repr__(self) -> str:
        return f"TensorInfo({self.name!r}, shape={self.shape}, dtype={self.dtype})"


ArrayLike = Union[np.ndarray, Sequence, float, int]
Inputs = Union[Mapping[str, ArrayLike], Sequence[ArrayLike]]


class _Runner:
    """What Session and Model share: the handle, the input/output descriptions, run() and
    close(). A subclass names its C functions (the `_c_*` attributes)."""

    _c_free = _c_num_inputs = _c_num_outputs = _c_input_info = _c_output_info = _c_run = ""
    _what = ""
    _serial = False  # runs of one object take a lock (for C functions not made thread-safe)

    def _open(self, ptr: int) -> None:
        self._ptr = ptr
        self._lock = threading.Lock()  # guards _ptr and _active
        self._active = 0  # runs in progress: close() waits for them to end
        self._idle = threading.Event()  # set when the last run ends after close() began
        self._run_lock = threading.Lock() if self._serial else None
        # One entry per shape set (an artefact compiled for several; else one): its inputs and
        # outputs, and orch_tensor arrays filled once, as the info functions describe each
        # tensor (a run copies them and sets only the data pointers).
        self._sets = [self._shape_set(k) for k in range(self._num_sets())]
        (self.inputs, self.outputs, self._in_type, self._out_type, self._in_template,
         self._out_template) = self._sets[0]
        self._input_index = {t.name: i for i, t in enumerate(self.inputs)}

    def _num_sets(self) -> int:
        return 1

    def _info_fn(self, info: str, k: int):
        """info(i, tensor) -> status for shape set k."""
        fn = getattr(lib, info)
        return lambda i, t: fn(self._ptr, i, t)

    def _shape_set(self, k: int) -> tuple:
        inputs, c_inputs = self._infos(self._c_num_inputs, self._info_fn(self._c_input_info, k))
        outputs, c_outputs = self._infos(self._c_num_outputs,
                                         self._info_fn(self._c_output_info, k))
        in_type = _capi.Tensor * len(inputs)
        out_type = _capi.Tensor * len(outputs)
        return inputs, outputs, in_type, out_type, in_type(*c_inputs), out_type(*c_outputs)

    def _infos(self, num: str, info) -> tuple:
        """[TensorInfo] and [orch_tensor] of the inputs or the outputs."""
        n = getattr(lib, num)(self._ptr)
        infos, tensors = [], []
        for i in range(n):
            t = _capi.Tensor()
            rc = info(i, t)
            if rc != Status.OK:
                raise Error(f"{num}: tensor {i}'s description failed", rc)
            name = t.name.decode()
            shape = tuple(int(t.dims[d]) for d in range(t.rank))
            infos.append(TensorInfo(name, shape, _numpy_dtype(t.dtype, name)))
            # By position (name NULL): run() puts the arrays in the model's order, and the
            # name's memory belongs to the C object.
            t.name = None
            tensors.append(t)
        return infos, tensors

    def _names(self) -> str:
        return ", ".join(f"'{t.name}'" for t in self.inputs)

    def _ordered(self, inputs: Inputs) -> list:
        """The inputs in the model's order, their names checked."""
        if isinstance(inputs, (dict, Mapping)):  # dict first: the ABC's check is slower
            for k in inputs:
                if k not in self._input_index:
                    raise Error(f"unknown input {k!r}: the model's inputs are {self._names()}",
                                Status.USAGE)
            missing = [t.name for t in self.inputs if t.name not in inputs]
            if missing:
                raise Error(f"input '{missing[0]}' is not given (the model's inputs are "
                            f"{self._names()})", Status.USAGE)
            values = [inputs[t.name] for t in self.inputs]
        elif isinstance(inputs, (list, tuple)):
            if len(inputs) != len(self.inputs):
                raise Error(f"{len(inputs)} inputs given, the model has {len(self.inputs)}: "
                            f"{self._names()}", Status.USAGE)
            values = inputs
        else:
            raise TypeError("run() takes a dict {input name: array} or a list of arrays in the "
                            f"order of .inputs, not {type(inputs).__name__}")
        return list(values)

    def _pick_set(self, values: list) -> tuple:
        """The shape set whose input shapes the values have."""
        sets = self._sets
        if len(sets) > 1:
            shapes = [np.shape(v) for v in values]
            for s in sets:
                if all(t.shape == sh for t, sh in zip(s[0], shapes)):
                    break
            else:
                got = ",".join(f"{t.name}:{'x'.join(map(str, sh)) or 'scalar'}"
                               for t, sh in zip(self.inputs, shapes))
                raise Error(f"inputs of shapes {got}: the artefact serves only "
                            f"{' | '.join(_set_text(s[0]) for s in sets)} (compile it with "
                            "input_shapes for these shapes too)", Status.INVALID)
        else:
            s = sets[0]
        return s

    def _arrange(self, inputs: Inputs) -> tuple:
        """The shape set the inputs have and the inputs in the model's order, each checked and
        converted."""
        values = self._ordered(inputs)
        s = self._pick_set(values)
        return s, [_convert(t, v) for t, v in zip(s[0], values)]

    def _call(self, c_name: str, ins, n_in: int, outs, n_out: int, *extra) -> None:
        """One call of the C run function c_name on this object, with the close/run bookkeeping
        (a close waits for the runs in progress)."""
        ctx = _ctx()
        fn = getattr(lib, c_name)
        with self._lock:
            ptr = self._ptr
            if ptr is None:
                raise Error(f"the {self._what} is closed", Status.USAGE)
            self._active += 1
        try:
            if self._run_lock:
                with self._run_lock:
                    rc = fn(ctx, ptr, ins, n_in, outs, n_out, *extra)
            else:
                rc = fn(ctx, ptr, ins, n_in, outs, n_out, *extra)
        finally:
            with self._lock:
                self._active -= 1
                if not self._active and self._ptr is None:
                    self._idle.set()
        _check(ctx, rc, c_name)

    def _run_device(self, values: list, outputs) -> dict:
        """run() on device tensors (DLPack): orch_session_run_device, no host copies."""
        from . import _dlpack
        views, device = [], None
        for t, v in zip(self.inputs, values):
            d = _dlpack.device_of(v)
            if d is None:
                raise Error(f"input '{t.name}' is not on the GPU while other inputs are: give "
                            "every input as a device tensor, or every one as a host array",
                            Status.USAGE)
            if device and d[1] != device[1]:
                raise Error(f"input '{t.name}' is on GPU {d[1]}, another input on GPU "
                            f"{device[1]}", Status.USAGE)
            device = d
        (inputs, outs_info, in_type, out_type, in_template, out_template) = \
            self._pick_set(values)
        for t, v in zip(inputs, values):
            views.append(_dlpack.View(v, "input", t.name, t.shape, t.dtype, False))
        given = dict(outputs or {})
        for k in given:
            if k not in {t.name for t in outs_info}:
                raise Error(f"unknown output {k!r}: the model's outputs are "
                            + ", ".join(f"'{t.name}'" for t in outs_info), Status.USAGE)
        results = []
        for t in outs_info:
            o = given.get(t.name)
            if o is None:
                o = _dlpack.new_like(values[0], t.shape, t.dtype, False, device)
                if o is None:
                    raise Error(f"no device tensor for output '{t.name}': run() makes them "
                                "with PyTorch or CuPy; for another library pass outputs="
                                "{name: device tensor}", Status.USAGE)
            elif _dlpack.device_of(o) != device:
                raise Error(f"output '{t.name}' is not on the inputs' GPU", Status.USAGE)
            results.append(o)
            views.append(_dlpack.View(o, "output", t.name, t.shape, t.dtype, False))
        ins = in_type.from_buffer_copy(in_template)
        for i in range(len(inputs)):
            ins[i].data = views[i].address
        outs = out_type.from_buffer_copy(out_template)
        for i in range(len(outs_info)):
            outs[i].data = views[len(inputs) + i].address
        self._call(self._c_run_device, ins, len(inputs), outs, len(outs_info), None)
        del views  # the capsules: released once the run has ended
        return {t.name: o for t, o in zip(outs_info, results)}

    _c_run_device = None  # Session: orch_session_run_device

    def run(self, inputs: Inputs, outputs=None) -> dict:
        """Runs the model on `inputs`, a dict {input name: array} or a list of arrays in the
        order of `.inputs`, and returns {output name: numpy.ndarray} (new arrays).

        Each input must have the shape in `.inputs` (or, on an artefact compiled for several
        shape sets, those of one of `.shape_sets`: the run uses that set's plan; any other
        shape raises Error(INVALID) naming the sets); an array of another dtype is converted
        only where numpy's safe casting allows (int32 into int64, float32 into float64), else
        Error(INVALID) is raised; a copy is made only where the array is not C-contiguous or
        has to be converted. Several threads may run one Session at once (their runs take
        turns on the session's buffers; the GIL is released during a run).

        On a Session, inputs may instead all be device tensors of one GPU (anything with
        `__dlpack__` on CUDA: PyTorch, CuPy, JAX): the run reads them in place and writes device
        tensors of the same library (or into `outputs`, {name: device tensor}), with no host
        copies (orch_session_run_device); the producers' queued work is waited for."""
        if self._c_run_device:
            values = self._ordered(inputs)
            if any(_dlpack_device(v) for v in values):
                return self._run_device(values, outputs)
        if outputs is not None:
            raise Error("outputs= is for device tensors; host runs return new arrays",
                        Status.USAGE)
        (_, outs_info, in_type, out_type, in_template, out_template), arrays = \
            self._arrange(inputs)
        ins = in_type.from_buffer_copy(in_template)
        for i, a in enumerate(arrays):
            ins[i].data = _address(a)
        results = [np.empty(t.shape, t.dtype) for t in outs_info]
        outs = out_type.from_buffer_copy(out_template)
        for i, a in enumerate(results):
            outs[i].data = _address(a)
        self._call(self._c_run, ins, len(arrays), outs, len(results))
        return {t.name: a for t, a in zip(outs_info, results)}

    def close(self) -> None:
        """Frees the C object once the runs in progress have ended; later runs raise Error.
        Called by `with` and when the object is garbage-collected; closing twice is fine."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # the constructor failed
            return
        with lock:
            ptr, self._ptr = self._ptr, None
            busy = self._active > 0
        if busy:
            self._idle.wait()
        if ptr:
            getattr(lib, self._c_free)(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass  # at interpreter exit the library may already be gone

    def __repr__(self) -> str:
        state = "closed" if getattr(self, "_ptr", None) is None else "open"
        return (f"<orch.{type(self).__name__} {self._source!r} ({state}) inputs={self.inputs} "
                f"outputs={self.outputs}>")


def _set_text(infos) -> str:
    """A shape set as orch spells it: "x:1x3x32x32,mask:1x128"."""
    return ",".join(f"{t.name}:{'x'.join(map(str, t.shape)) or 'scalar'}" for t in infos)


def _dlpack_device(v) -> bool:
    from . import _dlpack
    return _dlpack.device_of(v) is not None


def _address(a: np.ndarray) -> int:
    """The address of a's data: through the buffer protocol (a third of a.ctypes.data's time),
    or, for a read-only or empty array, which that refuses, through numpy."""
    try:
        return _capi.ctypes.addressof(_c_byte.from_buffer(a))
    except (TypeError, ValueError):
        return a.ctypes.data


_c_byte = _capi.ctypes.c_byte


def _convert(info: TensorInfo, value: ArrayLike) -> np.ndarray:
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    if (a.dtype == info.dtype and a.shape == info.shape and a.flags.c_contiguous
            and a.flags.aligned):
        return a  # as given: the common case, without np.require's checks
    if a.dtype != info.dtype and not np.can_cast(a.dtype, info.dtype, casting="safe"):
        raise Error(f"input '{info.name}' is {a.dtype}, the model expects {info.dtype}; "
                    f"converting would lose information, so convert it explicitly "
                    f"(.astype(numpy.{info.dtype}))", Status.INVALID)
    if a.shape != info.shape:
        raise Error(f"input '{info.name}' has shape {a.shape}, the model expects {info.shape}",
                    Status.INVALID)
    # np.require, not np.ascontiguousarray: that one turns a 0-d array into a 1-d one.
    return np.require(a, info.dtype, ["C_CONTIGUOUS", "ALIGNED"])


PathLike = Union[str, "os.PathLike[str]"]


def _shapes_arg(shapes) -> bytes | None:
    """input_shapes as orch takes them: "x:1x3x224x224,mask:1x128"."""
    if shapes is None:
        return None
    if isinstance(shapes, str):
        return shapes.encode()
    return ",".join(f"{name}:{'x'.join(str(int(d)) for d in dims)}"
                    for name, dims in shapes.items()).encode()


def _shape_sets_arg(shapes) -> tuple:
    """(input_shapes, shape set array or None, count) for orch_compile_options: a list of
    shape sets (each a dict or a string) goes in shape_sets, one set in input_shapes."""
    if isinstance(shapes, (list, tuple)):
        if not shapes:
            raise Error("input_shapes: an empty list of shape sets", Status.USAGE)
        encoded = [_shapes_arg(s) for s in shapes]
        arr = (_capi.ctypes.c_char_p * len(encoded))(*encoded)
        return None, arr, len(encoded)
    return _shapes_arg(shapes), None, 0


def _str_arg(s) -> bytes | None:
    return None if s is None else str(s).encode()


class Session(_Runner):
    """A compiled artefact loaded to run (orch_session_create): checked against this orch and
    this machine, its kernels loaded, its memory planned.

    `inputs` and `outputs` list TensorInfo(name, shape, dtype); run() takes and returns numpy
    arrays. An artefact compiled for several shape sets (compile's input_shapes a list) lists
    them in `shape_sets`, and run() uses the plan of the set its inputs' shapes match. On an
    artefact compiled for CUDA run() takes host arrays, copied to and from the GPU, or device
    tensors (DLPack: PyTorch, CuPy) read and written in place on the GPU.

    threads: OpenMP threads of the run (None: the artefact's own setting).
    allow_foreign_device: run an artefact compiled for another CPU (at your own risk).
    fixed_threads: always `threads` threads; by default a CPU run uses one fewer for each core
        other processes keep busy (OpenMP threads waiting for a descheduled teammate are slow).

    Never load an artefact you did not compile or do not trust: it contains native code, which
    is loaded and run."""

    _c_free = "orch_session_free"
    _c_num_inputs, _c_num_outputs = "orch_session_num_inputs", "orch_session_num_outputs"
    _c_input_info, _c_output_info = "orch_session_input_info", "orch_session_output_info"
    _c_run = "orch_session_run"
    _c_run_device = "orch_session_run_device"
    _what = "session"

    def _num_sets(self) -> int:
        return lib.orch_session_num_shape_sets(self._ptr)

    def _info_fn(self, info: str, k: int):
        fn = getattr(lib, info.replace("orch_session_", "orch_session_shape_set_"))
        return lambda i, t: fn(self._ptr, k, i, t)

    @property
    def shape_sets(self) -> list:
        """The shape sets the artefact serves, in the order they were compiled: for each, the
        list of input TensorInfos (`.inputs` is the first's)."""
        return [s[0] for s in self._sets]

    def __init__(self, artifact_path: PathLike, *, threads: int | None = None,
                 allow_foreign_device: bool = False, fixed_threads: bool = False):
        self._source = os.fspath(artifact_path)
        out = _capi.ctypes.c_void_p()
        ctx = _ctx()
        rc = lib.orch_session_create(ctx, os.fsencode(self._source),
                                     self._options(threads, allow_foreign_device, fixed_threads),
                                     out)
        _check(ctx, rc, "orch_session_create")
        self._open(out.value)

    @classmethod
    def from_bytes(cls, data: bytes, *, threads: int | None = None,
                   allow_foreign_device: bool = False, fixed_threads: bool = False) -> "Session":
        """A session on an artefact held in memory (orch_session_create_from_memory)."""
        self = cls.__new__(cls)
        self._source = "<memory>"
        data = bytes(data)
        out = _capi.ctypes.c_void_p()
        ctx = _ctx()
        rc = lib.orch_session_create_from_memory(
            ctx, data, len(data), cls._options(threads, allow_foreign_device, fixed_threads), out)
        _check(ctx, rc, "orch_session_create_from_memory")
        self._open(out.value)
        return self

    @staticmethod
    def _options(threads, allow_foreign_device, fixed_threads) -> _capi.SessionOptions:
        return _capi.SessionOptions(threads=0 if threads is None else int(threads),
                                    allow_foreign_device=int(bool(allow_foreign_device)),
                                    fixed_threads=int(bool(fixed_threads)))


class Model(_Runner):
    """An ONNX model on orch's reference interpreters (orch_model_load,
    orch_model_run_reference): slow, for checking and debugging, not for speed.

    input_shapes binds symbolic input dimensions: {"x": (1, 3, 224, 224)} or
    "x:1x3x224x224". engine "ops" runs one ONNX operator at a time; "prims" splits operators
    into primitives, runs the clean-up passes (unless no_cleanup) and the primitive
    interpreter. The runs of one Model take turns."""

    _c_free = "orch_model_free"
    _c_num_inputs, _c_num_outputs = "orch_model_num_inputs", "orch_model_num_outputs"
    _c_input_info, _c_output_info = "orch_model_input_info", "orch_model_output_info"
    _c_run = "orch_model_run_reference"
    _what = "model"
    _serial = True  # orch.h promises thread safety for sessions only

    _ENGINES = {"ops": 0, "prims": 1}

    def __init__(self, onnx_path: PathLike, *, input_shapes=None, engine: str = "ops",
                 no_cleanup: bool = False, attention_rewrite: bool = False):
        self._source = os.fspath(onnx_path)
        if engine not in self._ENGINES:
            raise Error(f"engine '{engine}' (known: ops, prims)", Status.USAGE)
        opt = _capi.LoadOptions(input_shapes=_shapes_arg(input_shapes),
                                engine=self._ENGINES[engine], no_cleanup=int(bool(no_cleanup)),
                                attention_rewrite=int(bool(attention_rewrite)))
        out = _capi.ctypes.c_void_p()
        ctx = _ctx()
        rc = lib.orch_model_load(ctx, os.fsencode(self._source), opt, out)
        _check(ctx, rc, "orch_model_load")
        self._open(out.value)


def compile(onnx_path: PathLike, artifact_path: PathLike, *, target: str = "cpu",
            precision: str = "fp32", input_shapes=None, db: PathLike | None = None,
            threads: int | None = None, verbose: bool = False, top_k: int | None = None,
            jobs: int | None = None, time_limit: float | None = None,
            attention_rewrite: bool = False, half_storage: bool = False,
            no_mlp_chains: bool = False, no_attention: bool = False, layout: str | None = None,
            explain: int = 0, strict: bool = False, gpus: str | int | None = None) -> Session:
    """Compiles the ONNX model at onnx_path for `target` into the artefact artifact_path
    (orch_compile: tunes kernels on this machine, solves which to run, builds and checks the
    result against the reference interpreter; written atomically, untouched on failure) and
    returns a Session on it. Takes seconds to minutes; measurements are kept in the profile
    database, so a second compile of the same model is look-ups.

    target: "cpu" or "cuda". precision: "fp32" (exact float32), or on "cuda" "tf32", "fp16",
    "bf16" (tensor cores, float32 accumulation). input_shapes: binds symbolic input dimensions,
    {"image": (1, 3, 224, 224)} or "image:1x3x224x224"; a list of such shape sets compiles one
    plan per set into the one artefact (the weights once; at most 16), and the session runs the
    plan whose shapes its inputs have: [{"image": (1, 3, 224, 224)}, {"image": (8, 3, 224,
    224)}]. db: the profile database (None:
    ~/.cache/orch/profile.db). threads: threads of the generated kernels (None: every core).
    verbose: progress lines and the summary on the process's stderr (file descriptor 2, which
    a notebook does not show).

    The others are orch_compile_options' fields (orch compile's options of the same names):
    top_k configs measured per kernel (None: 8), jobs parallel compiler processes (None: the
    cores), time_limit seconds for the solver, attention_rewrite, half_storage (with fp16/bf16
    on cuda), no_mlp_chains, no_attention, layout ("auto", "nchw", "nhwc"), explain (1 or 2:
    why each matmul/conv runs where it does, with verbose), strict (fail with
    Status.UNSUPPORTED where a kernel is not generated instead of interpreting it), gpus (on
    cuda, the GPUs that measure: "all" or None, a count, or ordinals with 0 as "0,2").

    Raises Error with orch's status and message (an unsupported operator: Status.UNSUPPORTED,
    naming the ops and nodes; a bad option: Status.USAGE)."""
    one_set, sets, n_sets = _shape_sets_arg(input_shapes)
    opt = _capi.CompileOptions(
        target=_str_arg(target), db_path=None if db is None else os.fsencode(db),
        shape_sets=sets, n_shape_sets=n_sets,
        input_shapes=one_set, attention_rewrite=int(bool(attention_rewrite)),
        threads=int(threads or 0), top_k=int(top_k or 0), jobs=int(jobs or 0),
        time_limit=float(time_limit or 0), verbose=int(bool(verbose)),
        precision=_str_arg(precision), half_storage=int(bool(half_storage)),
        no_mlp_chains=int(bool(no_mlp_chains)), no_attention=int(bool(no_attention)),
        layout=_str_arg(layout), explain=int(explain), strict=int(bool(strict)),
        gpus=_str_arg(gpus))
    ctx = _ctx()
    rc = lib.orch_compile(ctx, os.fsencode(onnx_path), opt, os.fsencode(artifact_path))
    _check(ctx, rc, "orch_compile")
    return Session(artifact_path)
