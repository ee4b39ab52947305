#!/usr/bin/env python3
"""Write a benchmark's results file: a header (the command, machine, date, commit), then its output.

Each benchmark keeps one results file under a stable name (benchmarks/*/results/MACHINE-NAME.txt),
overwritten by each run; earlier runs are in git's history, not in copies.

    python3 benchmarks/results_file.py FILE -- COMMAND [ARG]...

runs COMMAND, passes its output through to stdout, and writes FILE (the header and the output, stderr
included); it exits with COMMAND's status. The Python benchmarks (run_*.py, attention_bench.py,
data_parallel_scaling.py) write theirs with record() from this module.
"""
import contextlib
import datetime
import io
import os
import platform
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(command):
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=REPO)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def gpus():
    """The names of the visible NVIDIA GPUs (nvidia-smi), or [] where there is none."""
    names = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    rows = [n.strip() for n in names.splitlines() if n.strip()]
    if visible is not None and visible.strip() and all(v.strip().isdigit() for v in visible.split(",")):
        rows = [rows[int(v)] for v in visible.split(",") if int(v) < len(rows)]
    return rows


def machine():
    """The machine in words: its GPUs (count and name) and host, or the CPU where there is no GPU."""
    names = gpus()
    if names:
        return f"{len(names)} x {names[0]}" if len(set(names)) == 1 else ", ".join(names)
    return f"CPU {platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def machine_slug(count=1):
    """The machine as a file name's prefix: 'h200' for one NVIDIA H200, 'h200x2' for two, 'cpu' without a GPU."""
    names = gpus()
    if not names:
        return "cpu"
    slug = re.sub(r"[^a-z0-9]+", "-", re.sub(r"^nvidia\s+", "", names[0].lower())).strip("-")
    return slug + (f"x{count}" if count > 1 else "")


def commit():
    """The checkout's commit, short, with '+changes' when the tracked files differ from it;
    $LLMC_COMMIT where set (a copy of the checkout whose git metadata is not its own)."""
    if os.environ.get("LLMC_COMMIT"):
        return os.environ["LLMC_COMMIT"]
    head = _run(["git", "rev-parse", "--short", "HEAD"]) or "unknown"
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"])
    return head + ("+changes" if dirty else "")


def header(command):
    """The results file's first lines: what ran, on which machine, when, at which commit."""
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"# {' '.join(command)}\n"
            f"# machine: {machine()}; date: {date}; llmc at commit {commit()}\n")


def write(path, command, text):
    """Writes the results file at PATH (overwriting it): the header, then TEXT."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(header(command) + text)


class _Tee(io.TextIOBase):
    def __init__(self, stream, copy):
        self.stream, self.copy = stream, copy

    def write(self, s):
        self.copy.write(s)
        return self.stream.write(s)

    def flush(self):
        self.stream.flush()


@contextlib.contextmanager
def record(path, command=None):
    """Within it, what is printed to stdout also goes to the results file at PATH, written at the end
    unless an exception (sys.exit included) leaves it. PATH empty or '-': no file."""
    if not path or path == "-":
        yield
        return
    copy = io.StringIO()
    stdout = sys.stdout
    sys.stdout = _Tee(stdout, copy)
    try:
        yield
    except BaseException:  # a run that stopped part-way leaves the last results file as it was
        sys.stdout = stdout
        raise
    sys.stdout = stdout
    write(path, command or [os.path.relpath(sys.argv[0], REPO)] + sys.argv[1:], copy.getvalue())
    print(f"results written to {path}", file=sys.stderr)


def main(argv):
    if len(argv) < 3 or argv[1] != "--" or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    path, command = argv[0], argv[2:]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    status = proc.wait()
    write(path, command, "".join(lines))
    print(f"results written to {path}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
