"""llmc from Python: diagrams (.dg files) compiled to CUDA kernels and called on PyTorch tensors.

    import llmc
    op = llmc.compile("diagrams/gpt2/mlp.dg", entry="mlp", shapes={...}, grad=True)
    y = op(x, wfc, bfc, wproj, bproj)          # torch tensors on a GPU

The package imports without PyTorch: compiling a diagram and inspecting the
module (its inputs, outputs, PTX) need neither torch nor a GPU. Calling an op
imports torch then. docs/python.md is the reference.
"""

from ._errors import CompileError, CudaError, LlmcError, NoGpuError, ShapeError
from ._module import Module, Value, entry_inputs
from ._op import Op, compile

__all__ = ["compile", "Op", "Module", "Value", "entry_inputs",
           "LlmcError", "CompileError", "ShapeError", "NoGpuError", "CudaError"]
