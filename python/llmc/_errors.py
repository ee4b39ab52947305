"""The exceptions libllmc's statuses become."""


class LlmcError(Exception):
    """A failure reported by libllmc: a bad argument, or a bug in llmc."""


class CompileError(LlmcError):
    """An error in the diagrams; the message starts FILE:LINE:COL: error: ..."""


class ShapeError(LlmcError, ValueError):
    """Arrays whose shapes or dtypes do not fit the module; the message names the input."""


class NoGpuError(LlmcError):
    """No CUDA driver, or no such GPU: running needs one (compiling does not)."""


class CudaError(LlmcError):
    """A CUDA driver call failed while running a module."""
