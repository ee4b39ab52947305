"""The torch side of an Op: each compiled module registered as a torch.library custom op.

Needs torch >= 2.4 (torch.library.custom_op). An op's forward runs the module on the inputs'
GPU and the current torch CUDA stream, its outputs allocated with torch.empty there, with
no host synchronisation; its fake implementation gives the outputs' shapes, so the op works
inside torch.compile graphs. With grad=True the backward module is an op of its own and
the forward's backward (register_autograd): it takes the inputs and the outputs' gradients
and recomputes from the inputs what it needs of the forward.
"""

import threading
import typing

import torch

from ._errors import LlmcError, ShapeError
from ._module import Module

_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f64": torch.float64, "i32": torch.int32,
           "bool": torch.bool}
if hasattr(torch, "uint16"):
    _DTYPES["u16"] = torch.uint16

_registered = {}  # op name -> the custom op
_lock = threading.Lock()


def torch_dtype(dtype: str):
    if dtype not in _DTYPES:
        raise LlmcError("torch has no dtype for llmc's {}".format(dtype))
    return _DTYPES[dtype]


def _device_of(tensors):
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        raise ShapeError("the inputs are on several devices: {}".format(sorted(map(str, devices))))
    device = devices.pop()
    if device.type not in ("cuda", "meta"):
        raise ShapeError("llmc's kernels run on a CUDA GPU; the inputs are on {}".format(device))
    return device


def _aligned(t):
    """Contiguous and 16-byte aligned, as the kernels read it (a copy only where needed)."""
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()


def run_module(module: Module, tensors):
    """The module run on real CUDA tensors: outputs from torch.empty, on the current stream."""
    device = _device_of(tensors)
    inputs = [_aligned(t) for t in tensors]
    outputs = [torch.empty(v.shape, dtype=torch_dtype(v.dtype), device=device) for v in module.outputs]
    # The caching allocator gives the workspace back to this stream's later work only.
    workspace = (torch.empty(module.workspace_bytes, dtype=torch.uint8, device=device)
                 if module.workspace_bytes else None)
    stream = torch.cuda.current_stream(device).cuda_stream
    module.run(device.index if device.index is not None else torch.cuda.current_device(),
               [t.data_ptr() for t in inputs], [t.data_ptr() for t in outputs],
               workspace.data_ptr() if workspace is not None else 0, module.workspace_bytes, stream)
    return outputs


def _fake_outputs(module: Module, tensors):
    return [tensors[0].new_empty(v.shape, dtype=torch_dtype(v.dtype)) for v in module.outputs]


def _function_with_arity(name, count, body):
    """A function of `count` tensors (x0, x1, ...) that calls body(list): custom_op infers the schema from it."""
    arguments = ", ".join("x{}: torch.Tensor".format(i) for i in range(count))
    result = ("torch.Tensor" if body.outputs == 1
              else "typing.Tuple[{}]".format(", ".join(["torch.Tensor"] * body.outputs)))
    source = "def {}({}) -> {}:\n    return body([{}])\n".format(
        name, arguments, result, ", ".join("x{}".format(i) for i in range(count)))
    namespace = {"torch": torch, "typing": typing, "body": body}
    exec(source, namespace)  # a fixed template: the names are x0, x1, ...
    return namespace[name]


class _Body:
    """What a custom op runs, real or fake: the module on a list of tensors."""

    def __init__(self, module: Module, fake: bool):
        self.module, self.fake, self.outputs = module, fake, len(module.outputs)

    def __call__(self, tensors):
        made = (_fake_outputs if self.fake else run_module)(self.module, tensors)
        return made[0] if self.outputs == 1 else tuple(made)


def _custom_op(name: str, module: Module):
    """The module as the custom op `name` (registered once per process), with its fake implementation."""
    with _lock:
        if name in _registered:
            return _registered[name]
        if not hasattr(torch.library, "custom_op"):
            raise LlmcError("llmc's ops need torch >= 2.4 (torch.library.custom_op); this is torch {}".format(
                torch.__version__))
        if not module.outputs:
            raise LlmcError("{} has no outputs to return".format(module.entry))
        short = name.split("::")[1]
        real = _function_with_arity(short, len(module.inputs), _Body(module, False))
        fake = _function_with_arity(short + "_fake", len(module.inputs), _Body(module, True))
        op = torch.library.custom_op(name, real, mutates_args=())
        op.register_fake(fake)
        _registered[name] = op
        return op


def _with_backward(name: str, module: Module):
    """The forward op, its backward the backward module's op."""
    forward = _custom_op(name, module)
    backward_module = module.backward
    with _lock:
        if getattr(forward, "_llmc_autograd", False):
            return forward
    backward = _custom_op(name + "_backward", backward_module)
    float_outputs = [i for i, v in enumerate(module.outputs) if v.dtype in ("f32", "bf16", "f64")]
    gradient_of = {v.name: i for i, v in enumerate(backward_module.outputs)}  # grad_NAME -> output index

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward_fn(ctx, *grads):
        inputs = ctx.saved_tensors
        seeds = []
        for i in float_outputs:
            v = module.outputs[i]
            g = grads[i]
            seeds.append(torch.zeros(v.shape, dtype=torch_dtype(v.dtype), device=inputs[0].device)
                         if g is None else g.to(torch_dtype(v.dtype)).contiguous())
        made = backward(*inputs, *seeds)
        made = (made,) if isinstance(made, torch.Tensor) else made
        result = []
        for v in module.inputs:
            i = gradient_of.get("grad_" + v.name)
            result.append(None if i is None else made[i])
        return tuple(result)

    forward.register_autograd(backward_fn, setup_context=setup_context)
    forward._llmc_autograd = True
    return forward


def _resolve(op, tensors):
    """The custom op for a call on `tensors`: their module compiled (if it must be), checked, registered."""
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise ShapeError("input {} of {} is a {}, not a torch.Tensor".format(i, op.entry, type(t).__name__))
    module = op.module_for_arrays(tensors)
    module.check_arrays(tensors)
    _device_of(tensors)
    name = op.op_name(module)
    return _with_backward(name, module) if module.backward is not None else _custom_op(name, module)


def call(op, tensors):
    """Op.__call__. The custom op for each set of shapes and dtypes is kept on the Op, so that a call
    under torch.compile after an eager one (or with the shapes given to llmc.compile) traces only a
    lookup and the op; a first call under torch.compile compiles the module where Dynamo sees it."""
    key = tuple((tuple(t.shape), t.dtype) for t in tensors)
    resolved = op._resolved.get(key)
    if resolved is None:
        resolved = _resolve(op, tensors)
        op._resolved[key] = resolved
    return resolved(*tensors)
