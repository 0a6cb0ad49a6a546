# The C API of include/orch.h for ctypes: its structs field for field (the order and the C
# types matter: ctypes lays them out as the C compiler does), the signatures of the functions the
# package calls, and the loading of liborch. tests/python/test_package.py compares every struct's
# size and field offsets with the C compiler's reading of orch.h.
from __future__ import annotations

import ctypes
import os

MAX_DIMS = 8  # ORCH_MAX_DIMS

# C enums (orch_status, orch_dtype, orch_engine) are ints on every ABI orch builds for.
_enum = ctypes.c_int


class Tensor(ctypes.Structure):
    """orch_tensor."""

    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", _enum),
        ("rank", ctypes.c_int),
        ("dims", ctypes.c_int64 * MAX_DIMS),
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_size_t),
    ]


class LoadOptions(ctypes.Structure):
    """orch_load_options."""

    _fields_ = [
        ("input_shapes", ctypes.c_char_p),
        ("engine", _enum),
        ("no_cleanup", ctypes.c_int),
        ("attention_rewrite", ctypes.c_int),
    ]


class CompileOptions(ctypes.Structure):
    """orch_compile_options (fields only ever added at the end)."""

    _fields_ = [
        ("target", ctypes.c_char_p),
        ("db_path", ctypes.c_char_p),
        ("input_shapes", ctypes.c_char_p),
        ("attention_rewrite", ctypes.c_int),
        ("threads", ctypes.c_int),
        ("top_k", ctypes.c_int),
        ("jobs", ctypes.c_int),
        ("time_limit", ctypes.c_double),
        ("verbose", ctypes.c_int),
        ("precision", ctypes.c_char_p),
        ("half_storage", ctypes.c_int),
        ("no_mlp_chains", ctypes.c_int),
        ("no_attention", ctypes.c_int),
        ("layout", ctypes.c_char_p),
        ("explain", ctypes.c_int),
        ("strict", ctypes.c_int),
        ("shape_sets", ctypes.POINTER(ctypes.c_char_p)),
        ("n_shape_sets", ctypes.c_int),
        ("gpus", ctypes.c_char_p),
    ]


class SessionOptions(ctypes.Structure):
    """orch_session_options."""

    _fields_ = [
        ("threads", ctypes.c_int),
        ("allow_foreign_device", ctypes.c_int),
        ("fixed_threads", ctypes.c_int),
    ]


STRUCTS = {
    "orch_tensor": Tensor,
    "orch_load_options": LoadOptions,
    "orch_compile_options": CompileOptions,
    "orch_session_options": SessionOptions,
}


def library_path() -> str:
    """The liborch this package loads: $ORCH_LIBRARY when set (a build tree's liborch.so, to run
    the package from the source tree), else the one `pip install .` put beside this file."""
    return os.environ.get("ORCH_LIBRARY") or os.path.join(os.path.dirname(__file__), "liborch.so")


def _load() -> ctypes.CDLL:
    path = library_path()
    try:
        # CDLL (not PyDLL): every call releases the GIL, so compiles and runs in other threads
        # go on in parallel with Python code.
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            f"orch: cannot load the C library {path}: {e} (install the package with "
            "`pip install .` at the repository root, or set ORCH_LIBRARY to a built liborch.so; "
            "the system libraries it links come from scripts/setup.sh)"
        ) from e

    P = ctypes.c_void_p  # every opaque handle (orch_ctx *, orch_model *, orch_session *)
    Ptr = ctypes.POINTER
    sig = {
        "orch_version": (ctypes.c_char_p, []),
        "orch_ctx_create": (P, []),
        "orch_ctx_free": (None, [P]),
        "orch_last_error": (ctypes.c_char_p, [P]),
        "orch_last_status": (_enum, [P]),
        "orch_clear_error": (None, [P]),
        "orch_model_load": (_enum, [P, ctypes.c_char_p, Ptr(LoadOptions), Ptr(P)]),
        "orch_model_free": (None, [P]),
        "orch_model_num_inputs": (ctypes.c_int, [P]),
        "orch_model_num_outputs": (ctypes.c_int, [P]),
        "orch_model_input_info": (_enum, [P, ctypes.c_int, Ptr(Tensor)]),
        "orch_model_output_info": (_enum, [P, ctypes.c_int, Ptr(Tensor)]),
        "orch_model_run_reference": (
            _enum, [P, P, Ptr(Tensor), ctypes.c_int, Ptr(Tensor), ctypes.c_int]),
        "orch_compile": (_enum, [P, ctypes.c_char_p, Ptr(CompileOptions), ctypes.c_char_p]),
        "orch_session_create": (_enum, [P, ctypes.c_char_p, Ptr(SessionOptions), Ptr(P)]),
        "orch_session_create_from_memory": (
            _enum, [P, ctypes.c_char_p, ctypes.c_size_t, Ptr(SessionOptions), Ptr(P)]),
        "orch_session_free": (None, [P]),
        "orch_session_num_inputs": (ctypes.c_int, [P]),
        "orch_session_num_outputs": (ctypes.c_int, [P]),
        "orch_session_input_info": (_enum, [P, ctypes.c_int, Ptr(Tensor)]),
        "orch_session_output_info": (_enum, [P, ctypes.c_int, Ptr(Tensor)]),
        "orch_session_run": (_enum, [P, P, Ptr(Tensor), ctypes.c_int, Ptr(Tensor), ctypes.c_int]),
        "orch_session_run_device": (
            _enum, [P, P, Ptr(Tensor), ctypes.c_int, Ptr(Tensor), ctypes.c_int, P]),
        "orch_session_num_shape_sets": (ctypes.c_int, [P]),
        "orch_session_shape_set_input_info": (_enum, [P, ctypes.c_int, ctypes.c_int, Ptr(Tensor)]),
        "orch_session_shape_set_output_info": (
            _enum, [P, ctypes.c_int, ctypes.c_int, Ptr(Tensor)]),
    }
    for name, (restype, argtypes) in sig.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


lib = _load()
