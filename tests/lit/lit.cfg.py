# lit configuration for llmc's FileCheck tests: every .dg file under tests/lit
# (except in folders named Inputs) with `# RUN:` lines is a test.
import os

import lit.formats

if not hasattr(config, "llmc_tools_dir"):
    lit_config.fatal("run lit on the build tree (<build>/tests/lit), "
                     "whose lit.site.cfg.py CMake writes")

config.name = "llmc"
config.test_format = lit.formats.ShTest(True)  # RUN lines run under bash, with pipefail
config.suffixes = [".dg"]
config.excludes = ["Inputs"]
config.test_source_root = os.path.dirname(__file__)


def tool(name):
    """Matches `name` as a command word, not inside a path or a longer name."""
    return r"(?<![\w./-])" + name.replace("-", r"\-") + r"(?![\w.-])"


# `nvrtc`: llmc-compile was built with the CUDA toolkit, so --emit ptx works;
# tests of it say `REQUIRES: nvrtc` and are unsupported (not failed) without.
if config.llmc_nvrtc:
    config.available_features.add("nvrtc")

llmc_compile = os.path.join(config.llmc_tools_dir, "llmc-compile")
config.substitutions += [
    (tool("llmc-compile"), llmc_compile),
    (tool("FileCheck"), config.filecheck),
    (tool("not"), config.not_tool),
    ("%diagrams", os.path.join(config.llmc_source_dir, "diagrams")),
    ("%benchmarks", os.path.join(config.llmc_source_dir, "benchmarks", "diagrams")),
]
