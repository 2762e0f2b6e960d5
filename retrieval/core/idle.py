"""Whether this machine was idle while figures were taken, so a latency a visitor reads names the
conditions it was measured under.

Two signals, because each alone misleads:
- other processes' CPU time, read from /proc while the work runs: our own process tree (the
  embedded model's server included) is left out, so a recording that keeps both cores busy is
  still idle, and a test suite beside it is not. The load average cannot tell those apart.
- a calibration: a fixed single-threaded workload timed before and after. A machine that got
  slower in between (another tenant, thermal limits) shows it even where /proc is not readable.

Where /proc is missing (not Linux), only the load average before and the calibration count.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Optional

from . import cpu

# Others' share of all cores above which a recording is "under load": a browser test or a
# second benchmark takes 30-100 %; a shell, an editor and the kernel's threads stay under 5 %.
OTHERS_MAX = 0.10
# The load average per core a recording may start under: the minute before must have been quiet.
LOAD_MAX_PER_CORE = 0.35
# The calibration's slow-down, after against before, that counts as contention.
CALIBRATION_MAX_RATIO = 1.25
SETTLE_S = 1.0
# A calibration over the ratio is taken again this many times, a few seconds apart, and the fastest
# counts: on a 2-core VM, right after a unit of model work, single readings of 1.4-1.8x came with
# others' CPU at 1.3 % and a second reading seconds later was back under 1.1x. Contention that
# lasts (a test suite, a second benchmark) still reads slow in every retake.
CALIBRATION_RETAKES = 3
RETAKE_PAUSE_S = 3.0
# A calibration before a unit that reads over this ratio of the machine's reference (the median of
# the experiment's earlier calibrations on a machine of the same name) counts as a slower host: two
# hosts both called "AMD EPYC · 2 cores · avx2" calibrated at 34 and 67 ms, and their latencies
# would have sat in one column.
SPEED_MAX_RATIO = 1.25
# Our own process tree (the model server restarting or finishing a reply) quiet below this share of
# one core before a calibration is timed, waited for at most OWN_SETTLE_MAX_S: a calibration timed
# while the embedded model's server loaded its weights read 66 ms against 34 ms a minute later.
# Not lower: the watch's own reads of /proc keep our process at 6-10 % of a core while it samples.
OWN_QUIET = 0.2
OWN_SETTLE_MAX_S = 30.0
# The shortest window sampled: with 100 clock ticks a second, one stray tick in it is 2 % of two cores.
MIN_WINDOW_S = 0.25
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


_CALIBRATION = """
import time
best = float("inf")
for _ in range({repeat}):
    t0 = time.perf_counter()
    acc, xs = 0.0, []
    for i in range(200_000):
        acc += (i * 7 % 13) * 0.5
        if i % 50 == 0:
            xs.append(acc)
    xs.sort()
    best = min(best, (time.perf_counter() - t0) * 1000)
print(round(best, 2))
"""


def calibrate(repeat: int = 3) -> float:
    """Milliseconds for a fixed single-threaded workload (arithmetic, list work), the fastest of
    `repeat` runs: ~20 ms on a 2-core EPYC. Timed in a fresh interpreter: in this process, after a
    long recording, our own threads and heap made it 1.6x slower on an idle machine (others' CPU
    under 3 %), which would have called an idle recording loaded."""
    out = subprocess.run([sys.executable, "-c", _CALIBRATION.format(repeat=repeat)], capture_output=True,
                         text=True, timeout=60)
    return float(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else 0.0


def _proc_table() -> Optional[dict[int, tuple[int, int]]]:
    """pid → (parent pid, CPU ticks used so far), or None where /proc cannot be read."""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                raw = f.read().decode(errors="replace")
        except OSError:
            continue   # ended between the listing and the read
        rest = raw[raw.rfind(")") + 2:].split()   # the name may hold spaces and parentheses
        out[pid] = (int(rest[1]), int(rest[11]) + int(rest[12]))
    return out


def settle_own(max_s: float = OWN_SETTLE_MAX_S, window_s: float = MIN_WINDOW_S) -> float:
    """Wait until our own process tree uses under OWN_QUIET of a core (at most `max_s`); the seconds
    waited. Where /proc cannot be read, no wait."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < max_s:
        before = _proc_table()
        time.sleep(window_s)
        after = _proc_table()
        if before is None or after is None:
            break
        mine = _own_tree(after) | _own_tree(before)
        used = sum(t - before.get(pid, (0, 0))[1] for pid, (_, t) in after.items() if pid in mine)
        if used / _TICK / window_s < OWN_QUIET:
            break
    return time.monotonic() - t0


def _own_tree(table: dict[int, tuple[int, int]]) -> set[int]:
    mine, grew = {os.getpid()}, True
    while grew:
        new = {pid for pid, (ppid, _) in table.items() if ppid in mine} - mine
        grew = bool(new)
        mine |= new
    return mine


class Watch:
    """Samples other processes' CPU time while a block runs: `with Watch() as w: ...` then
    `w.conditions` (read after the block)."""

    def __init__(self, interval_s: float = 2.0, check_load: bool = True, reference_ms: Optional[float] = None):
        self.interval_s = interval_s
        # The machine's usual calibration (machine_reference_ms()), or None on a machine not seen before.
        self.reference_ms = reference_ms
        # False inside a long recording: the load average then counts the recording's own work.
        self.check_load = check_load
        self.samples: list[float] = []        # others' share of all cores, per interval
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.conditions: Optional[Conditions] = None

    def __enter__(self) -> "Watch":
        self._load = _load1() if self.check_load else None
        # Sampling starts first, so the window covers the calibration too (its interpreter is our
        # own child, not counted): a block shorter than one interval is still watched.
        self._thread = threading.Thread(target=self._loop, name="idle-watch", daemon=True)
        self._thread.start()
        self._calib = self._calibrate_before()
        return self

    def _calibrate_before(self) -> float:
        """The calibration before the block, retaken while it reads slower than the machine's reference."""
        return _calibration(lambda ms: _slower_host(self.reference_ms, ms),
                            CALIBRATION_RETAKES if self.reference_ms else 0)

    def _loop(self) -> None:
        prev, t_prev = _proc_table(), time.monotonic()
        stopped = False
        while not stopped:
            stopped = self._stop.wait(self.interval_s)
            cur, now = _proc_table(), time.monotonic()
            if stopped and now - t_prev < MIN_WINDOW_S:
                if self.samples:
                    return   # too short a last interval: one stray clock tick would read as load
                # A block shorter than the window is still watched: the window is waited out. A unit
                # that took 0.2 s went unwatched, and a process spinning a core beside it read idle.
                time.sleep(MIN_WINDOW_S - (now - t_prev))
                cur, now = _proc_table(), time.monotonic()
            if prev is None or cur is None:
                return
            mine = _own_tree(cur) | _own_tree(prev)
            used = sum(t - prev[pid][1] for pid, (_, t) in cur.items() if pid not in mine and pid in prev)
            # A process born in the interval counts whole: a test suite starting is load too.
            used += sum(t for pid, (_, t) in cur.items() if pid not in mine and pid not in prev)
            self.samples.append(max(0.0, used / _TICK / ((now - t_prev) * (os.cpu_count() or 1))))
            prev, t_prev = cur, now

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        # A moment's pause first: right after a recording's last request the model server's own
        # threads still spin down, and a calibration timed then read 1.6x on a quiet machine.
        time.sleep(SETTLE_S)
        self.conditions = judge(self._load, self._calib, self._calibrate_after(), self.samples,
                                reference_ms=self.reference_ms)

    def _calibrate_after(self) -> float:
        """The calibration after the block, retaken while it reads over the ratio; none when the block
        was under load already (a retake would change no verdict)."""
        loaded = bool(self.samples) and max(self.samples) > OTHERS_MAX
        return _calibration(lambda ms: _slowed(self._calib, ms), 0 if loaded else CALIBRATION_RETAKES)


def _calibration(slow, retakes: int) -> float:
    """A calibration timed once our own tree is quiet, retaken up to `retakes` times while `slow`
    says it reads slow: the fastest counts."""
    settle_own()
    best = calibrate()
    for _ in range(retakes):
        if not slow(best):
            break
        time.sleep(RETAKE_PAUSE_S)
        settle_own()
        best = min(best, calibrate())
    return best


@dataclass
class Conditions:
    """What a recording was measured under, and the verdict a page shows beside its latencies."""
    machine: str                       # cpu.describe(): "AMD EPYC · 2 cores · avx2"
    load1_before: Optional[float]      # the 1-minute load average when it started
    calibration_ms: tuple[float, float]   # before, after
    others_cpu_max: Optional[float]    # other processes' largest share of all cores in an interval
    others_cpu_mean: Optional[float]
    verdict: str                       # "idle" or "under load"
    reasons: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        """"recorded on AMD EPYC · 2 cores · avx2, idle"."""
        return f"recorded on {self.machine}, {self.verdict}"

    def as_dict(self) -> dict:
        return asdict(self)


def _load1() -> Optional[float]:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _slowed(before: float, after: float) -> bool:
    """The calibration after took more than CALIBRATION_MAX_RATIO times as long as before (a
    reading of 0 is a calibration that could not run, and counts for nothing)."""
    return before > 0 and after > 0 and after / before > CALIBRATION_MAX_RATIO


def _slower_host(reference: Optional[float], before: float) -> bool:
    """The calibration before read more than SPEED_MAX_RATIO times the machine's reference."""
    return bool(reference) and before > 0 and before / reference > SPEED_MAX_RATIO


def machine_reference_ms(sittings: list[dict], machine: str) -> Optional[float]:
    """A machine's usual calibration: the median of the calibrations that a recording's earlier
    sittings on a machine of this name kept (before and after, first and last unit), or None."""
    import statistics

    vals = [c for s in sittings if s.get("machine") == machine for pair in s.get("calibration_ms", [])
            for c in pair if c and c > 0]
    return round(statistics.median(vals), 2) if vals else None


def judge(load1: Optional[float], calib_before: float, calib_after: float, samples: list[float],
          cores: Optional[int] = None, reference_ms: Optional[float] = None) -> Conditions:
    """The verdict from the readings: each threshold crossed is a reason."""
    cores = cores or os.cpu_count() or 1
    reasons = []
    if load1 is not None and load1 > LOAD_MAX_PER_CORE * cores:
        reasons.append(f"load average {load1:.2f} on {cores} cores when it started")
    if samples and max(samples) > OTHERS_MAX:
        reasons.append(f"other processes took up to {max(samples):.0%} of the CPU")
    if _slowed(calib_before, calib_after):
        reasons.append(f"the calibration took {calib_after / calib_before:.2f}x as long after as before")
    if _slower_host(reference_ms, calib_before):
        reasons.append(f"the calibration read {calib_before:.1f} ms, {calib_before / reference_ms:.2f}x this "
                       f"machine's reference of {reference_ms:.1f} ms: a slower host under the same name")
    return Conditions(cpu.describe(), load1, (calib_before, calib_after),
                      round(max(samples), 3) if samples else None,
                      round(sum(samples) / len(samples), 3) if samples else None,
                      "under load" if reasons else "idle", reasons)


def check_before(check_load: bool = True, reference_ms: Optional[float] = None) -> list[str]:
    """Why this machine is not idle now (empty when it is): the load average, a short look at
    other processes' CPU and, given the machine's reference, its speed, so a recording can refuse
    before it spends an hour."""
    w = Watch(interval_s=1.0, check_load=check_load, reference_ms=reference_ms)
    with w:
        time.sleep(2.2)
    return w.conditions.reasons if w.conditions else []
