#!/usr/bin/env python3
"""Runs every command of README.md's code blocks that needs no GPU, so the
README cannot rot (issue 24): each must exit 0.

The commands run in order (a later one reads what an earlier one wrote, as
llmc-train reads llmc-data's shards) in a scratch folder laid out as the
repository is: diagrams/, tests/, benchmarks/ and scripts/ are links to the
source tree's, build/ a link to the build under test, and ../shared/data a
link to the data, so that the README's relative paths work and what the
commands write stays out of the source tree.

The commands not run are listed in SKIPPED below, each with why: only those,
matched exactly, so the list cannot grow unnoticed. An entry that matches no
README command fails the test, so it cannot outlive its command either. A
command added to the README that needs a GPU fails here until it is listed.

usage: readme_test.py SOURCE_DIR BUILD_DIR SHARED_DATA_DIR [--list]
  --list   print the commands and whether each runs, run nothing
"""
import os
import re
import subprocess
import sys
import tempfile
import time

# Each command (its lines joined, its trailing comment and repeated spaces
# dropped) -> why it is not run.
SKIPPED = {
    "./scripts/run.sh": "the main job: builds, then trains for minutes",
    "./scripts/test.sh": "installs, builds and runs every test: ctest is already that",
    "cmake --preset release && cmake --build --preset release -j2 && ctest --preset release -j2":
        "a second whole build and test run",
    "cmake --install build-release --prefix ~/.local":
        "needs the release preset's build; tests/install/install_test.sh installs and runs the tools",
    "build/bin/llmc-run benchmarks/diagrams/gated_mlp.dg --entry gated_mlp_loss --set N=100,C=77,F=205 --grad --check":
        "needs a GPU",
    "build/bin/llmc-run benchmarks/diagrams/gated_mlp.dg --entry gated_mlp_loss --set N=100,C=77,F=205 --grad "
    "--bench --out times.json": "needs a GPU",
    "build/bin/llmc-train --device cuda -i 'data/shards/corpus_train_*.bin' -e d12 -b 32 -t 1024 -x 2000 -o out/gpu":
        "needs a GPU, and hours",
    "build/bin/llmc-train --gpus 2 -i 'data/shards/corpus_train_*.bin' -e d12 -b 32 -t 1024 -x 2000 -o out/two":
        "needs two GPUs, and hours",
    "cmake --build build --target llmc_python": "a build step; the python ctests (label python) cover the package",
    "PYTHONPATH=build/python python3 -c 'import llmc; print(llmc.compile(\"diagrams/gpt2/mlp.dg\", entry=\"mlp\", "
    "arch=\"sm_90a\", shapes={\"x\": (4, 64, 768), \"wfc\": (3072, 768), \"bfc\": (3072,), \"wproj\": (768, 3072), "
    "\"bproj\": (768,)}).module)'": "needs the llmc_python target built; tests/python runs the package",
    "ctest --test-dir build -L python": "runs ctests from within ctest",
    "PYTHONPATH=build/python python3 tests/python/compare_ops_gpu.py": "needs a GPU and PyTorch",
    "ctest --test-dir build -L lit": "runs the lit ctest, which ctest runs itself",
    "sh tests/pytorch/run_gpt2_forward_comparison.sh build/bin/gpt2-forward-dump tests/pytorch/compare_gpt2_forward.py "
    "diagrams/gpt2/model.dg": "needs PyTorch (the pytorch ctests run it where it is)",
    "sh tests/pytorch/run_gpt2_train_comparison.sh build/bin/gpt2-train-dump tests/pytorch/compare_gpt2_train.py "
    "diagrams": "needs PyTorch (the pytorch ctests run it where it is)",
    "sh tests/pytorch/run_gpt2_train_gpu_comparison.sh build/bin/gpt2-train-dump tests/pytorch/compare_gpt2_train.py "
    "diagrams": "needs a GPU and PyTorch",
    "PYTHONPATH=build/python python3 python/examples/gpt2_block_attention.py": "needs a GPU and PyTorch",
}

# What the scratch folder links to in the source tree.
LINKED = ["diagrams", "tests", "benchmarks", "scripts", "python", "compiler", "runtime", "README.md"]


def code_lines(text):
    """The lines of the README's code blocks: indented by four spaces after a
    blank line (Markdown's indented blocks), or inside ``` fences."""
    lines = text.split("\n")
    out = []
    in_fence = False
    in_block = False
    previous_blank = True
    for line in lines:
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            out.append(line)
            continue
        if line.startswith("    ") and (in_block or previous_blank):
            in_block = True
            out.append(line[4:])
        elif line.strip():
            in_block = False
        previous_blank = not line.strip()
    return out


def strip_comment(command):
    """The command without a trailing '# ...' outside quotes."""
    quote = None
    for i, c in enumerate(command):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command.rstrip()


def open_quote(command):
    """Whether the command ends inside a quoted string."""
    quote = None
    for c in command:
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
    return quote is not None


def commands(text):
    """Each command of the code blocks: lines ending in a backslash, or inside
    a quoted string, joined with the next (by a space, as for the match)."""
    result = []
    pending = ""
    for line in code_lines(text):
        stripped = line.rstrip() if open_quote(pending) else strip_comment(line)
        if pending:
            stripped = stripped.lstrip()
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        if open_quote(pending + stripped):
            pending += stripped + " "
            continue
        command = (pending + stripped).strip()
        pending = ""
        if command:
            result.append(re.sub(r"[ \t]+", " ", command))
    return result


def make_scratch(source, build, data):
    root = tempfile.mkdtemp(prefix="llmc_readme_")
    repo = os.path.join(root, "llmc")
    os.makedirs(repo)
    for name in LINKED:
        os.symlink(os.path.join(source, name), os.path.join(repo, name))
    os.symlink(build, os.path.join(repo, "build"))
    os.makedirs(os.path.join(root, "shared"))
    os.symlink(data, os.path.join(root, "shared", "data"))
    return root, repo


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source, build, data = (os.path.abspath(a) for a in args)
    with open(os.path.join(source, "README.md"), encoding="utf-8") as f:
        found = commands(f.read())

    unmatched = [c for c in SKIPPED if c not in found]
    for c in unmatched:
        print(f"FAIL: SKIPPED lists a command README.md does not have:\n  {c}")
    if "--list" in sys.argv:
        for c in found:
            print(("skip  " if c in SKIPPED else "run   ") + c)
        return 1 if unmatched else 0

    root, repo = make_scratch(source, build, data)
    env = dict(os.environ, HOME=os.path.join(root, "home"))  # ~ expands inside the scratch folder
    failures = []
    for c in found:
        if c in SKIPPED:
            print(f"skip: {c}\n      ({SKIPPED[c]})")
            continue
        start = time.monotonic()
        run = subprocess.run(["bash", "-c", "set -o pipefail; " + c], cwd=repo, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        seconds = time.monotonic() - start
        if run.returncode == 0:
            print(f"ok ({seconds:.1f} s): {c}")
        else:
            print(f"FAIL (exit {run.returncode}, {seconds:.1f} s): {c}\n" + run.stdout[-3000:])
            failures.append(c)
    print(f"scratch folder: {root}" if failures else "")
    if not failures:
        subprocess.run(["rm", "-rf", root])
    if failures or unmatched:
        print(f"FAIL: {len(failures)} README command(s) failed, {len(unmatched)} stale SKIPPED entr(y/ies)")
        return 1
    print(f"PASS: {len(found) - len(SKIPPED)} README commands ran, {len(SKIPPED)} skipped as listed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
