# Device tensors for Session.run through DLPack (the `__dlpack__` protocol PyTorch, CuPy, JAX and
# numpy share): a tensor's device, dtype, shape and data pointer read from its DLManagedTensor
# without copying, and new device tensors for the outputs made by the inputs' own library.
"""DLPack views of device tensors, for orch.Session.run on a CUDA artefact."""
from __future__ import annotations

import ctypes
import sys

import numpy as np

# dlpack.h: DLDeviceType values orch's device entry takes (CUDA memory and managed memory).
KDL_CPU, KDL_CUDA, KDL_CUDA_MANAGED = 1, 2, 13
# DLDataTypeCode
_INT, _UINT, _FLOAT, _BFLOAT, _BOOL = 0, 1, 2, 4, 6


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def device_of(x) -> tuple[int, int] | None:
    """(DLDeviceType, device id) of a DLPack-capable tensor on a GPU, else None (numpy arrays,
    lists, CPU tensors: the host path takes them)."""
    if isinstance(x, np.ndarray) or not hasattr(x, "__dlpack_device__"):
        return None
    try:
        kind, ordinal = x.__dlpack_device__()
    except Exception:
        return None
    return (int(kind), int(ordinal)) if int(kind) in (KDL_CUDA, KDL_CUDA_MANAGED) else None


def _dtype_code(dt: np.dtype) -> tuple[int, int]:
    if dt == np.bool_:
        return _BOOL, 8
    kind = {"f": _FLOAT, "i": _INT, "u": _UINT}[dt.kind]
    return kind, dt.itemsize * 8


class View:
    """A device tensor's memory as orch reads or writes it: the data pointer of a C-contiguous
    tensor of the expected dtype and shape, kept valid while the view lives (it holds the
    capsule, whose destructor releases the producer's reference)."""

    def __init__(self, x, what: str, name: str, shape: tuple, dtype: np.dtype, bfloat16: bool):
        from . import Error, Status
        if device_of(x) is None:
            capsule = x.__dlpack__()
        else:
            try:
                # stream=1: the producer orders its pending work before the legacy default
                # stream, which orch's run waits for (orch_session_run_device, NULL stream).
                capsule = x.__dlpack__(stream=1)
            except TypeError:  # a producer without the stream argument
                capsule = x.__dlpack__()
        self._capsule = capsule
        ptr = _get_pointer(capsule, b"dltensor")
        t = _DLManagedTensor.from_address(ptr).dl_tensor
        got_shape = tuple(t.shape[i] for i in range(t.ndim))
        if got_shape != tuple(shape):
            raise Error(f"{what} '{name}' has shape {got_shape}, the model expects "
                        f"{tuple(shape)}", Status.INVALID)
        code, bits = (_BFLOAT, 16) if bfloat16 else _dtype_code(dtype)
        if (t.dtype.code, t.dtype.bits, t.dtype.lanes) != (code, bits, 1):
            raise Error(f"{what} '{name}' is a device tensor of DLPack type (code {t.dtype.code}, "
                        f"{t.dtype.bits} bits), the model expects "
                        f"{'bfloat16' if bfloat16 else dtype}; convert it on the device first",
                        Status.INVALID)
        if t.strides:
            expect, contiguous = 1, True
            for i in reversed(range(t.ndim)):
                if got_shape[i] != 1 and t.strides[i] != expect:
                    contiguous = False
                expect *= got_shape[i]
            if not contiguous:
                raise Error(f"{what} '{name}' is not C-contiguous on the device; pass "
                            f".contiguous() (torch) or cupy.ascontiguousarray", Status.INVALID)
        self.device = (t.device.device_type, t.device.device_id)
        self.address = (t.data or 0) + t.byte_offset


def new_like(example, shape: tuple, dtype: np.dtype, bfloat16: bool, device: tuple[int, int]):
    """An uninitialised device tensor of the library `example` comes from (PyTorch or CuPy), on
    the same GPU; None for other libraries (then run() needs `outputs`)."""
    mod = type(example).__module__.split(".")[0]
    if mod == "torch" and "torch" in sys.modules:
        torch = sys.modules["torch"]
        tdt = torch.bfloat16 if bfloat16 else getattr(torch, str(dtype) if dtype != np.bool_
                                                      else "bool")
        return torch.empty(shape, dtype=tdt, device=f"cuda:{device[1]}")
    if mod == "cupy" and "cupy" in sys.modules and not bfloat16:
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(device[1]):
            return cupy.empty(shape, dtype=dtype)
    return None
