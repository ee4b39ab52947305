"""llmc.compile: a diagram's entry as an operator on PyTorch tensors.

The Op is made without PyTorch; calling it loads the torch side (_torch.py).
"""

import hashlib
import os
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

from ._errors import ShapeError
from ._library import NeedsShapes
from ._module import Module, entry_inputs

FROM_INPUTS = "from_inputs"


class Op:
    """A compiled diagram entry, callable on torch tensors (see llmc.compile).

    op.module is the forward Module (None until the first call where the shapes come from the
    inputs); op.module.backward the backward, with grad=True.
    """

    def __init__(self, path, entry, sizes, grad, storage, arch, shapes):
        self.path = os.fspath(path)
        self.sizes = dict(sizes or {})
        self.grad = bool(grad)
        self.storage = storage
        self.arch = arch
        self.entry, self.input_names = entry_inputs(self.path, entry)
        self._modules: Dict[Tuple, Module] = {}
        self._resolved = {}  # (shape, dtype) of each tensor -> its torch custom op (_torch.py)
        self.module: Optional[Module] = None
        if shapes == FROM_INPUTS:
            return
        try:
            self.module = self.module_for(shapes)
        except NeedsShapes:  # `..` in an input: the shapes come from the arrays at each call
            pass

    def module_for(self, shapes: Optional[Mapping[str, Sequence[int]]]) -> Module:
        """The module compiled for these input shapes (None: the entry's own types), compiled once."""
        key = None if shapes is None else tuple((k, tuple(int(n) for n in shapes[k])) for k in sorted(shapes))
        if key not in self._modules:
            self._modules[key] = Module(self.path, self.entry, self.sizes, self.grad, self.storage, self.arch,
                                        None if shapes is None else dict(key))
        return self._modules[key]

    def module_for_arrays(self, arrays: Sequence) -> Module:
        """The module for a call on `arrays`: op.module when compiled ahead, else one for their shapes."""
        if self.module is not None:
            return self.module
        if len(arrays) != len(self.input_names):
            raise ShapeError("{} takes {} inputs ({}), got {}".format(
                self.entry, len(self.input_names), ", ".join(self.input_names), len(arrays)))
        return self.module_for({n: tuple(a.shape) for n, a in zip(self.input_names, arrays)})

    def op_name(self, module: Module) -> str:
        """The torch.library name the module is registered under: llmc::ENTRY_HASH."""
        key = repr((os.path.abspath(self.path), self.entry, sorted(self.sizes.items()), self.grad, self.storage,
                    module.arch, [(v.name, v.dtype, v.shape) for v in module.inputs]))
        return "llmc::{}_{}".format(self.entry, hashlib.sha256(key.encode()).hexdigest()[:12])

    def __call__(self, *tensors):
        from . import _torch  # PyTorch is imported on the first call, not with the package
        return _torch.call(self, tensors)

    def __repr__(self):
        return "<llmc.Op {} from {} ({}{})>".format(
            self.entry, self.path, self.storage, ", grad" if self.grad else "")


def compile(path: Union[str, os.PathLike], entry: Optional[str] = None, sizes: Optional[Mapping[str, int]] = None,
            grad: bool = False, storage: str = "bf16", arch: str = "auto",
            shapes: Union[None, str, Mapping[str, Sequence[int]]] = None) -> Op:
    """Compiles the diagram `entry` of `path` (default: its last diagram) into an Op on torch tensors.

    sizes:   the size names the diagrams read (llmc-compile --set): {"B": 4, "T": 64}.
    grad:    also compile the backward (the diagram's derived vector-Jacobian product), the op's
             backward under torch.autograd.
    storage: "bf16" or "f32": the dtype of float inputs and outputs (scalars are always f32).
    arch:    "auto" (GPU 0's; sm_90a without a GPU), "sm_90a" or "sm_80".
    shapes:  None: compile now from the entry's own types, or, where the entry has `..` in an
             input, at each call from the tensors' shapes; a dict {input: shape}: compile now at
             these shapes; "from_inputs": at each call from the tensors' shapes (sizes the
             entry's types name, as t:T, are then bound from the tensors). The dimensions a `..`
             stands for are the leading ones beyond the axes the type names, called batch0,
             batch1, ... from the left in every input. One module is compiled per distinct
             set of shapes.

    Raises CompileError (FILE:LINE:COL), ShapeError, LlmcError.
    """
    return Op(path, entry, sizes, grad, storage, arch, shapes)
