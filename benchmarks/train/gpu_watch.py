"""What nvidia-smi sees of one GPU while a program runs: the memory in use, and
the SM clock and power draw with the reasons the clock is held down.

The training benchmark runs llmc and PyTorch one after the other under the same
watcher, so both are measured alike: device memory as the most in use less what
was in use before (their own reports count different things), and the clock and
power over their timed steps. On the H200 a GPT-2 step runs at the board's
power limit (700 W): the clock then falls below its 1980 MHz peak to what that
power allows, so two implementations of equal energy a step take equal time
whatever their cycle counts (benchmarks/train/README.md, Results).

One `nvidia-smi --query-gpu=... -lms N` process samples for the whole run; each
sample carries nvidia-smi's own timestamp, so no pipe buffering skews when it
was taken. Without nvidia-smi (a CPU run) every figure is None.
"""

import datetime
import shutil
import statistics
import subprocess
import threading

QUERY = "timestamp,memory.used,clocks.sm,power.draw,power.limit,clocks_throttle_reasons.active"
# clocks_throttle_reasons.active: the bit for the software power cap (the
# board's power limit, which the driver enforces by lowering the clocks).
SW_POWER_CAP = 0x4


def parse_sample(line):
    """One line of `nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits` ->
    {t (seconds since the epoch, local time as nvidia-smi prints it), memory_mib, sm_mhz, power_w,
    power_limit_w, reasons}, a field None where nvidia-smi has none ([N/A], [Not Supported]);
    None for a line that is no sample (a header, an error message)."""
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != 6:
        return None
    try:
        t = datetime.datetime.strptime(fields[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
    except ValueError:
        return None

    def number(text, parse=float):
        try:
            return parse(text)
        except ValueError:
            return None

    return {"t": t, "memory_mib": number(fields[1]), "sm_mhz": number(fields[2]), "power_w": number(fields[3]),
            "power_limit_w": number(fields[4]), "reasons": number(fields[5], lambda s: int(s, 16))}


def steady_figures(samples, start, end):
    """The clock and power of the samples taken between `start` and `end` (seconds since the epoch:
    the timed steps): {sm_mhz, power_w (medians), power_limit_w, power_capped (the fraction of samples
    with the software power cap active), samples}; None without a sample in the span."""
    span = [s for s in samples if start <= s["t"] <= end]
    if not span:
        return None

    def median(key):
        values = [s[key] for s in span if s[key] is not None]
        return statistics.median(values) if values else None

    reasons = [s["reasons"] for s in span if s["reasons"] is not None]
    return {"sm_mhz": median("sm_mhz"), "power_w": median("power_w"), "power_limit_w": median("power_limit_w"),
            "power_capped": sum(1 for r in reasons if r & SW_POWER_CAP) / len(reasons) if reasons else None,
            "samples": len(span)}


class GpuWatcher:
    """Samples GPU `gpu_index` every `interval_ms` while in its `with` block."""

    def __init__(self, gpu_index, interval_ms=100, smi=None):
        self.smi = smi or shutil.which("nvidia-smi")
        self.gpu, self.interval_ms = gpu_index, interval_ms
        self.samples = []
        self._process = self._thread = None
        self._first = threading.Event()

    def __enter__(self):
        if self.smi:
            try:
                self._process = subprocess.Popen(
                    [self.smi, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits", f"--id={self.gpu}",
                     "-lms", str(self.interval_ms)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            except OSError:
                self._process = None
            if self._process:
                self._thread = threading.Thread(target=self._read, daemon=True)
                self._thread.start()
                # The first sample is the baseline: taken before the program watched starts.
                self._first.wait(timeout=10)
        return self

    def _read(self):
        for line in self._process.stdout:
            sample = parse_sample(line)
            if sample:
                self.samples.append(sample)
                self._first.set()
        self._first.set()  # nvidia-smi ended (no such GPU): nobody waits

    def __exit__(self, *exc):
        if self._process:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._thread:
            self._thread.join(timeout=10)

    def used_bytes(self):
        """The most memory in use while watching less the first sample's (what was in use before), or None."""
        used = [s["memory_mib"] for s in self.samples if s["memory_mib"] is not None]
        if len(used) < 2:
            return None
        return (max(used) - used[0]) * 1024 ** 2
