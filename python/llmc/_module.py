"""A compiled module as libllmc holds it: its inputs and outputs, its PTX, and a run on device pointers.

Nothing here needs PyTorch or a GPU, except Module.run (a GPU).
"""

import ctypes
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, Tuple

from . import _library
from ._errors import ShapeError
from ._library import check, lib

# The dtypes libllmc reports, and how array libraries spell them.
_DTYPE_NAMES = {"f32": "f32", "float32": "f32", "bf16": "bf16", "bfloat16": "bf16", "f64": "f64",
                "float64": "f64", "i32": "i32", "int32": "i32", "u16": "u16", "uint16": "u16", "bool": "bool"}


def dtype_name(dtype) -> str:
    """libllmc's name of an array's dtype: torch.bfloat16 -> "bf16", numpy's float32 -> "f32"."""
    text = str(dtype)
    text = text[len("torch."):] if text.startswith("torch.") else text
    return _DTYPE_NAMES.get(text, text)


@dataclass(frozen=True)
class Value:
    """An input or output: contiguous and row-major, dtype one of f32 bf16 f64 i32 u16 bool."""
    name: str
    dtype: str
    shape: Tuple[int, ...]
    axes: Tuple[str, ...]
    bytes: int

    def __str__(self):
        return "{}: {}[{}]".format(self.name, self.dtype, " ".join(
            "{}:{}".format(a, n) for a, n in zip(self.axes, self.shape)))


def _value(info: _library.ValueInfo) -> Value:
    rank = info.rank
    return Value(name=info.name.decode(), dtype=info.dtype.decode(),
                 shape=tuple(info.shape[i] for i in range(rank)),
                 axes=tuple(info.axes[i].decode() for i in range(rank)), bytes=info.bytes)


def _bytes(text) -> Optional[bytes]:
    return None if text is None else str(text).encode()


def entry_inputs(path: str, entry: Optional[str] = None) -> Tuple[str, Tuple[str, ...]]:
    """The entry's name and its inputs' names as declared (nothing is compiled)."""
    names = ctypes.c_char_p()
    check(lib.llmc_entry_inputs(_bytes(path), _bytes(entry), ctypes.byref(names)))
    name, _, inputs = names.value.decode().partition(":")
    return name, tuple(inputs.split(",")) if inputs else ()


def sizes_text(sizes: Optional[Mapping[str, int]]) -> str:
    return ",".join("{}={}".format(k, int(v)) for k, v in (sizes or {}).items())


class Module:
    """A diagram's entry compiled by libllmc (llmc_compile): planned, emitted and compiled by NVRTC."""

    def __init__(self, path: str, entry: Optional[str] = None, sizes: Optional[Mapping[str, int]] = None,
                 grad: bool = False, storage: str = "bf16", arch: str = "auto",
                 shapes: Optional[Mapping[str, Sequence[int]]] = None):
        shape_list = list((shapes or {}).items())
        dims = [(ctypes.c_int64 * len(d))(*[int(n) for n in d]) for _, d in shape_list]
        c_shapes = (_library.Shape * max(1, len(shape_list)))()
        for i, (name, d) in enumerate(shape_list):
            c_shapes[i] = _library.Shape(name.encode(), len(d), dims[i])
        options = _library.CompileOptions(
            path=_bytes(path), entry=_bytes(entry), sizes=sizes_text(sizes).encode(), grad=int(bool(grad)),
            storage=_bytes(storage), arch=_bytes(arch), num_shapes=len(shape_list), shapes=c_shapes)
        handle = ctypes.c_void_p()
        check(lib.llmc_compile(ctypes.byref(options), ctypes.byref(handle)))
        self._init(handle.value, owner=None)
        backward = lib.llmc_module_backward(self._handle)
        self.backward = Module._borrowed(backward, self) if backward else None

    @classmethod
    def _borrowed(cls, handle, owner):
        m = cls.__new__(cls)
        m._init(handle, owner)
        m.backward = None
        return m

    def _init(self, handle, owner):
        self._handle = handle
        self._owner = owner  # a backward module lives as long as its forward
        self.entry = lib.llmc_module_entry(handle).decode()
        self.arch = lib.llmc_module_arch(handle).decode()
        self.inputs = tuple(self._values(lib.llmc_module_num_inputs, lib.llmc_module_input))
        self.outputs = tuple(self._values(lib.llmc_module_num_outputs, lib.llmc_module_output))
        self.workspace_bytes = int(lib.llmc_module_workspace_bytes(handle))
        self.launches = int(lib.llmc_module_num_launches(handle))

    def _values(self, count, get):
        for i in range(count(self._handle)):
            info = _library.ValueInfo()
            check(get(self._handle, i, ctypes.byref(info)))
            yield _value(info)

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle and getattr(self, "_owner", None) is None:
            lib.llmc_module_free(handle)
            self._handle = None

    def __repr__(self):
        return "<llmc.Module {} ({}) inputs ({}) outputs ({}), {} launches>".format(
            self.entry, self.arch, ", ".join(map(str, self.inputs)), ", ".join(map(str, self.outputs)),
            self.launches)

    def ptx(self) -> str:
        """The PTX NVRTC made for every launch, in order."""
        text = ctypes.c_char_p()
        check(lib.llmc_module_ptx(self._handle, ctypes.byref(text)))
        return text.value.decode()

    def check_arrays(self, arrays: Sequence) -> None:
        """Raises ShapeError, naming the input, unless each array's .shape and .dtype fit the module's inputs."""
        if len(arrays) != len(self.inputs):
            raise ShapeError("{} takes {} inputs ({}), got {}".format(
                self.entry, len(self.inputs), ", ".join(v.name for v in self.inputs), len(arrays)))
        for value, array in zip(self.inputs, arrays):
            shape = tuple(int(n) for n in array.shape)
            if shape != value.shape:
                raise ShapeError("input '{}' of {} has shape {}, but the module takes {} ({})".format(
                    value.name, self.entry, shape, value.shape, value))
            if dtype_name(array.dtype) != value.dtype:
                raise ShapeError("input '{}' of {} has dtype {}, but the module takes {} ({})".format(
                    value.name, self.entry, array.dtype, value.dtype, value))

    def run(self, device: int, inputs: Sequence[int], outputs: Sequence[int], workspace: int = 0,
            workspace_bytes: int = 0, stream: int = 0) -> None:
        """Enqueues the module on `stream` (a CUstream as an integer) of GPU `device`; no host synchronisation.

        inputs and outputs: device addresses (16-byte aligned) of contiguous arrays in the order of
        self.inputs and self.outputs; workspace: at least self.workspace_bytes, 256-byte aligned.
        """
        if len(inputs) != len(self.inputs) or len(outputs) != len(self.outputs):
            raise ShapeError("{} takes {} inputs and {} outputs, got {} and {}".format(
                self.entry, len(self.inputs), len(self.outputs), len(inputs), len(outputs)))
        c_inputs = (ctypes.c_void_p * max(1, len(inputs)))(*inputs)
        c_outputs = (ctypes.c_void_p * max(1, len(outputs)))(*outputs)
        check(lib.llmc_module_run(self._handle, int(device), c_inputs, c_outputs, workspace or None,
                                  int(workspace_bytes), stream or None))
