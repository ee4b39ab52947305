"""The llmc Python package without a GPU or PyTorch: it imports, compiles diagrams through NVRTC
(arch sm_90a given, so no GPU is asked), describes their modules, and turns bad diagrams and bad
shapes into CompileError and ShapeError with the diagram's FILE:LINE:COL.

Run by ctest (label python) with PYTHONPATH=<build>/python; LLMC_SOURCE_DIR names the checkout.
"""

import os
import sys
import tempfile
import unittest
from pathlib import Path
from types import SimpleNamespace

SOURCE = Path(os.environ.get("LLMC_SOURCE_DIR", Path(__file__).resolve().parents[2]))
ATTENTION = str(SOURCE / "diagrams/gpt2/attention.dg")
MLP = str(SOURCE / "diagrams/gpt2/mlp.dg")

# A cache folder of the test's own: what the package compiles must land in the kernel cache the
# C++ tools use, $LLMC_CACHE_DIR, and the generated diagrams beside it.
CACHE = tempfile.mkdtemp(prefix="llmc-python-test-")
os.environ["LLMC_CACHE_DIR"] = CACHE

import llmc  # noqa: E402


def array(shape, dtype="torch.bfloat16"):
    """What check_arrays reads of a tensor: its shape and dtype."""
    return SimpleNamespace(shape=tuple(shape), dtype=dtype)


class PackageTest(unittest.TestCase):
    def test_imports_without_torch(self):
        self.assertNotIn("torch", sys.modules, "importing llmc must not import torch")
        self.assertTrue(callable(llmc.compile))

    def test_mlp_compiles_through_nvrtc(self):
        op = llmc.compile(MLP, entry="mlp", arch="sm_90a",
                          shapes={"x": (2, 64, 32), "wfc": (128, 32), "bfc": (128,), "wproj": (32, 128),
                                  "bproj": (32,)})
        m = op.module
        self.assertEqual(m.entry, "mlp")
        self.assertEqual(m.arch, "sm_90a")
        self.assertEqual([v.name for v in m.inputs], ["x", "wfc", "bfc", "wproj", "bproj"])
        self.assertEqual(m.inputs[0].shape, (2, 64, 32))
        self.assertEqual(m.inputs[0].axes, ("batch0", "batch1", "c"))  # x: f32[.. c]
        self.assertEqual([(v.name, v.dtype, v.shape) for v in m.outputs], [("y", "bf16", (2, 64, 32))])
        self.assertGreater(m.launches, 0)
        ptx = m.ptx()
        self.assertIn(".target sm_90a", ptx)
        self.assertEqual(ptx.count(".entry"), m.launches)
        self.assertIsNone(m.backward)
        kernels = list(Path(CACHE).glob("*.kernel"))
        self.assertGreaterEqual(len(kernels), m.launches, "the kernels were not stored in $LLMC_CACHE_DIR")

    def test_attention_backward_module(self):
        shape = (1, 2, 64, 64)
        op = llmc.compile(ATTENTION, entry="causal_attention", arch="sm_90a", storage="f32", grad=True,
                          shapes={"q": shape, "k": shape, "v": shape})
        m = op.module
        self.assertEqual([(v.name, v.dtype, v.shape) for v in m.outputs], [("o", "f32", shape)])
        b = m.backward
        self.assertEqual([v.name for v in b.inputs], ["q", "k", "v", "llmc_seed_o"])
        self.assertEqual([(v.name, v.dtype, v.shape) for v in b.outputs],
                         [("grad_q", "f32", shape), ("grad_k", "f32", shape), ("grad_v", "f32", shape)])
        self.assertIn(".target sm_90a", b.ptx())

    def test_shapes_from_the_inputs(self):
        # causal_attention's inputs have `..`: nothing is compiled until the arrays' shapes are known.
        op = llmc.compile(ATTENTION, entry="causal_attention", arch="sm_90a")
        self.assertIsNone(op.module)
        self.assertEqual(op.input_names, ("q", "k", "v"))
        m = op.module_for_arrays([array((2, 64, 64))] * 3)
        self.assertEqual(m.outputs[0].shape, (2, 64, 64))
        self.assertIs(op.module_for_arrays([array((2, 64, 64))] * 3), m, "one module per set of shapes")

    def test_bad_shape_names_the_input(self):
        shape = (1, 2, 64, 64)
        m = llmc.compile(ATTENTION, entry="causal_attention", arch="sm_90a",
                         shapes={"q": shape, "k": shape, "v": shape}).module
        m.check_arrays([array(shape)] * 3)  # fits
        with self.assertRaisesRegex(llmc.ShapeError, r"input 'k' of causal_attention has shape \(1, 2, 32, 64\)"):
            m.check_arrays([array(shape), array((1, 2, 32, 64)), array(shape)])
        with self.assertRaisesRegex(llmc.ShapeError, r"input 'v' .* dtype torch.float32, but the module takes bf16"):
            m.check_arrays([array(shape), array(shape), array(shape, "torch.float32")])
        with self.assertRaisesRegex(llmc.ShapeError, r"takes 3 inputs \(q, k, v\), got 2"):
            m.check_arrays([array(shape)] * 2)

    def test_shapes_that_do_not_fit_the_diagram(self):
        # k's head size differs from q's: the contraction over d cannot line them up.
        with self.assertRaises(llmc.ShapeError) as caught:
            llmc.compile(ATTENTION, entry="causal_attention", arch="sm_90a",
                         shapes={"q": (2, 16, 64), "k": (2, 16, 32), "v": (2, 16, 32)})
        self.assertRegex(str(caught.exception), r"k=\(2, 16, 32\) q=\(2, 16, 64\) v=\(2, 16, 32\) do not fit: .*\.dg:\d+:\d+: error: axis size mismatch")
        with self.assertRaisesRegex(llmc.ShapeError, r"input 'wfc' has 1 dimensions, but its type f32\[f c\] has 2"):
            llmc.compile(MLP, entry="mlp", arch="sm_90a",
                         shapes={"x": (4, 8), "wfc": (32,), "bfc": (32,), "wproj": (8, 32), "bproj": (8,)})

    def test_bad_diagram_is_a_compile_error_at_its_place(self):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "bad.dg"
            path.write_text("diagram f(x: f32[t:4]) -> y: f32[t]\n  y = exp(x) + nope\nend\n")
            with self.assertRaises(llmc.CompileError) as caught:
                llmc.compile(str(path), arch="sm_90a")
            message = str(caught.exception)
            self.assertIn("{}:2:16: error: unknown name 'nope'".format(path), message)
            self.assertIn("y = exp(x) + nope", message)  # the line, with a caret under it
            path.write_text("diagram f(x: f32[t:4]) -> y: f32[t]\n  y = exp(x\nend\n")
            with self.assertRaisesRegex(llmc.CompileError, r"bad\.dg:2:\d+: error"):
                llmc.compile(str(path), arch="sm_90a")

    def test_bad_arguments(self):
        with self.assertRaisesRegex(llmc.LlmcError, r"no size of .* is named 'Q'"):
            llmc.compile(MLP, entry="mlp", arch="sm_90a", sizes={"Q": 3},
                         shapes={"x": (4, 8), "wfc": (32, 8), "bfc": (32,), "wproj": (8, 32), "bproj": (8,)})
        with self.assertRaisesRegex(llmc.LlmcError, r"arch expects auto, sm_90a or sm_80, got 'sm_70'"):
            llmc.compile(MLP, entry="mlp", arch="sm_70", shapes={"x": (4, 8)})
        with self.assertRaisesRegex(llmc.ShapeError, r"'mlp' has no input named 'y'"):
            llmc.compile(MLP, entry="mlp", arch="sm_90a", shapes={"y": (4, 8)})
        with self.assertRaisesRegex(llmc.CompileError, r"no diagram named 'mpl' in .*mlp\.dg or its imports \(its diagrams: gelu, mlp\)"):
            llmc.compile(MLP, entry="mpl", arch="sm_90a")

    def test_running_without_a_gpu_says_so(self):
        try:
            import ctypes
            ctypes.CDLL("libcuda.so.1")
            self.skipTest("a CUDA driver is present: the GPU tests run the modules")
        except OSError:
            pass
        shape = (4, 8)
        m = llmc.compile(MLP, entry="mlp", arch="sm_90a", storage="f32",
                         shapes={"x": shape, "wfc": (32, 8), "bfc": (32,), "wproj": (8, 32), "bproj": (8,)}).module
        with self.assertRaisesRegex(llmc.NoGpuError, "no usable GPU"):
            m.run(0, [16] * 5, [16], 256 if m.workspace_bytes else 0, m.workspace_bytes, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
