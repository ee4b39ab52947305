"""libllmc loaded with ctypes, its functions declared, its statuses turned into exceptions.

libllmc.so is looked for in this order: $LLMC_LIBRARY; beside this file (the
package as CMake lays it out, `cmake --build build --target llmc_python`, or
installs it); the build folder of the source tree this file is in
($LLMC_BUILD_DIR, else build/). An installed package carries llmc's target
files and device headers in llmc/data/; $LLMC_TARGETS and $LLMC_DEVICE_INCLUDE
are pointed at them unless already set.
"""

import ctypes
import os
from pathlib import Path

from . import _errors

_HERE = Path(__file__).resolve().parent

# llmc_status, llmc.h
OK, USAGE, COMPILE, SHAPE, NEEDS_SHAPES, NO_GPU, CUDA, INTERNAL = range(8)


class NeedsShapes(_errors.LlmcError):
    """The entry has `..` in an input: its shapes come from the arrays (internal)."""


_EXCEPTIONS = {USAGE: _errors.LlmcError, COMPILE: _errors.CompileError, SHAPE: _errors.ShapeError,
               NEEDS_SHAPES: NeedsShapes, NO_GPU: _errors.NoGpuError, CUDA: _errors.CudaError,
               INTERNAL: _errors.LlmcError}


class Shape(ctypes.Structure):
    _fields_ = [("input", ctypes.c_char_p), ("rank", ctypes.c_int), ("dims", ctypes.POINTER(ctypes.c_int64))]


class CompileOptions(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("entry", ctypes.c_char_p), ("sizes", ctypes.c_char_p),
                ("grad", ctypes.c_int), ("storage", ctypes.c_char_p), ("arch", ctypes.c_char_p),
                ("num_shapes", ctypes.c_int), ("shapes", ctypes.POINTER(Shape))]


class ValueInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p), ("rank", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("axes", ctypes.POINTER(ctypes.c_char_p)),
                ("bytes", ctypes.c_int64)]


def _candidates():
    if os.environ.get("LLMC_LIBRARY"):
        yield Path(os.environ["LLMC_LIBRARY"])
    yield _HERE / "libllmc.so"
    repo = _HERE.parent.parent
    build = Path(os.environ.get("LLMC_BUILD_DIR", repo / "build"))
    if not build.is_absolute():
        build = repo / build
    yield build / "lib" / "libllmc.so"


def _point_at_data():
    data = _HERE / "data"
    if (data / "targets").is_dir():
        os.environ.setdefault("LLMC_TARGETS", str(data / "targets"))
    if (data / "device").is_dir():
        os.environ.setdefault("LLMC_DEVICE_INCLUDE", str(data / "device"))


def _declare(lib):
    P = ctypes.c_void_p
    signatures = {
        "llmc_last_error": (ctypes.c_char_p, []),
        "llmc_api_version": (ctypes.c_int, []),
        "llmc_compile": (ctypes.c_int, [ctypes.POINTER(CompileOptions), ctypes.POINTER(P)]),
        "llmc_entry_inputs": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]),
        "llmc_module_free": (None, [P]),
        "llmc_module_backward": (P, [P]),
        "llmc_module_entry": (ctypes.c_char_p, [P]),
        "llmc_module_arch": (ctypes.c_char_p, [P]),
        "llmc_module_num_inputs": (ctypes.c_int, [P]),
        "llmc_module_num_outputs": (ctypes.c_int, [P]),
        "llmc_module_input": (ctypes.c_int, [P, ctypes.c_int, ctypes.POINTER(ValueInfo)]),
        "llmc_module_output": (ctypes.c_int, [P, ctypes.c_int, ctypes.POINTER(ValueInfo)]),
        "llmc_module_workspace_bytes": (ctypes.c_int64, [P]),
        "llmc_module_num_launches": (ctypes.c_int, [P]),
        "llmc_module_ptx": (ctypes.c_int, [P, ctypes.POINTER(ctypes.c_char_p)]),
        "llmc_module_run": (ctypes.c_int, [P, ctypes.c_int, ctypes.POINTER(P), ctypes.POINTER(P), P,
                                           ctypes.c_size_t, P]),
    }
    for name, (result, arguments) in signatures.items():
        function = getattr(lib, name)
        function.restype = result
        function.argtypes = arguments


def _load():
    _point_at_data()
    tried = []
    for path in _candidates():
        if path.is_file():
            lib = ctypes.CDLL(str(path))
            _declare(lib)
            return lib
        tried.append(str(path))
    raise ImportError("libllmc.so was not found; build it (cmake --build build --target llmc_python) or set "
                      "LLMC_LIBRARY. Tried: " + ", ".join(tried))


lib = _load()


def check(status):
    """Raises the exception for a status that is not OK, with libllmc's message."""
    if status != OK:
        message = lib.llmc_last_error().decode("utf-8", "replace")
        raise _EXCEPTIONS.get(status, _errors.LlmcError)(message)
