"""Where a stretch of work spent the machine's CPU: the tests in the sandboxes, this process on the
host, and the rest (the container engine starting, running commands in and removing sandboxes; anything
else that ran meanwhile).

The machine's busy time comes from the kernel (``/proc/stat``); the sandboxes' from the Docker
engine's parent cgroup, which every container's CPU is charged to (cgroup v1 ``cpuacct/docker``, or
v2 with the cgroupfs driver, ``/sys/fs/cgroup/docker``); this process's from ``getrusage`` (its
threads, and children it waited for). Where a figure cannot be read it is None, and nothing is
guessed in its place.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

#: The engine's parent cgroup, by cgroup version: (file, unit in seconds of the value it holds).
_SANDBOX_CGROUPS = ((Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage"), 1e-9),
                    (Path("/sys/fs/cgroup/cpu,cpuacct/docker/cpuacct.usage"), 1e-9),
                    (Path("/sys/fs/cgroup/docker/cpu.stat"), 1e-6))
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuUse:
    """CPU seconds (core-seconds) spent so far, or over a stretch (the difference of two)."""

    busy_s: float | None  #: the whole machine, not idle (user, nice, system, irq, softirq, steal)
    sandboxes_s: float | None  #: in containers of the Docker engine
    own_s: float  #: this process and its waited-for children

    @classmethod
    def now(cls) -> CpuUse:
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return cls(busy_s=_busy_s(), sandboxes_s=_sandboxes_s(),
                   own_s=own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime)

    def since(self, start: CpuUse) -> CpuUse:
        return CpuUse(busy_s=_minus(self.busy_s, start.busy_s), sandboxes_s=_minus(self.sandboxes_s, start.sandboxes_s),
                      own_s=self.own_s - start.own_s)

    def plus(self, other: CpuUse) -> CpuUse:
        return CpuUse(busy_s=_plus(self.busy_s, other.busy_s), sandboxes_s=_plus(self.sandboxes_s, other.sandboxes_s),
                      own_s=self.own_s + other.own_s)

    def as_dict(self) -> dict[str, float | None]:
        return {"busy_s": _round(self.busy_s), "sandboxes_s": _round(self.sandboxes_s), "own_s": round(self.own_s, 1)}

    @classmethod
    def from_dict(cls, values: dict) -> CpuUse:
        return cls(busy_s=values.get("busy_s"), sandboxes_s=values.get("sandboxes_s"), own_s=values.get("own_s") or 0.0)

    def shares(self) -> dict[str, float] | None:
        """Each part's share of the busy time: the sandboxes, this process, the rest; None when the
        busy time or the sandboxes' time is unknown (or nothing was busy)."""
        if not self.busy_s or self.sandboxes_s is None:
            return None
        rest = max(0.0, self.busy_s - self.sandboxes_s - self.own_s)
        return {"sandboxes": self.sandboxes_s / self.busy_s, "own": self.own_s / self.busy_s, "rest": rest / self.busy_s}


def _busy_s() -> float | None:
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
        ticks = [int(value) for value in first[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, IndexError, ValueError):
        return None
    return (sum(ticks) - ticks[3] - ticks[4]) * _TICK_S


def _sandboxes_s() -> float | None:
    for path, unit in _SANDBOX_CGROUPS:
        try:
            text = path.read_text()
        except OSError:
            continue
        if path.name == "cpu.stat":
            values = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
            if "usage_usec" not in values:
                continue
            return int(values["usage_usec"]) * unit
        return int(text.strip()) * unit
    return None


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
