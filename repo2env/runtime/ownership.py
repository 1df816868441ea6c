"""Sandbox ownership: every container names the process that started it; those of dead owners go.

A ``kill -9`` of ``repo2env run``, ``grade`` or ``validate`` skips every cleanup hook, so its
containers (the grading one holding the hidden tests) would run forever. Each container carries
its owner's pid, that process's start time (``/proc/<pid>/stat`` field 22: a recycled pid has
another) and the host's identity (hostname and boot id: pids mean nothing on another machine or
after a reboot). :func:`reap_orphans` removes the containers whose owner on this host is gone; it
runs when a backend first starts a sandbox (then at most once a minute), in ``repo2env doctor``
and in ``repo2env images gc``.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
import time
from pathlib import Path

from repo2env.runtime.backend import Backend

SANDBOX_LABEL = "repo2env.sandbox"
OWNER_PID_LABEL = "repo2env.owner.pid"
OWNER_STARTED_LABEL = "repo2env.owner.started"
OWNER_HOST_LABEL = "repo2env.owner.host"

#: Seconds between two automatic reaps by one process (a reap is one filtered list call).
REAP_INTERVAL_S = 60.0

_last_reap: dict[str, float] = {}  # backend name -> when this process last reaped it
_reap_lock = threading.Lock()


@functools.cache
def host_id() -> str:
    """This machine and boot: hostname plus the kernel's boot id."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "unknown-boot"
    return f"{socket.gethostname()}/{boot}"


def process_start_time(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot, or ``None`` when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # The command name (field 2) may hold spaces and parentheses: count fields after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def owner_labels() -> dict[str, str]:
    """The labels that name this process as a container's owner."""
    pid = os.getpid()
    return {OWNER_PID_LABEL: str(pid), OWNER_STARTED_LABEL: process_start_time(pid) or "",
            OWNER_HOST_LABEL: host_id()}


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the owner these labels name still runs; ``True`` when that cannot be known here
    (no owner labels, another host): only provably orphaned containers are removed."""
    pid, started, host = labels.get(OWNER_PID_LABEL), labels.get(OWNER_STARTED_LABEL), labels.get(OWNER_HOST_LABEL)
    if not pid or not pid.isdigit() or host != host_id():
        return True
    return process_start_time(int(pid)) == started


def reap_orphans(backend: Backend, *, dry_run: bool = False) -> list[str]:
    """Remove the sandboxes of ``backend`` (running or not) whose owner on this host is dead; their names."""
    removed = []
    for sandbox in backend.sandboxes(labels=[f"{OWNER_HOST_LABEL}={host_id()}"]):
        if owner_alive(dict(sandbox.labels)):
            continue
        if not dry_run:
            backend.remove_sandbox(sandbox.id)
        removed.append(sandbox.name)
    return removed


def reap_orphans_now_and_then(backend: Backend) -> None:
    """:func:`reap_orphans`, at most once per :data:`REAP_INTERVAL_S` per backend in this process."""
    with _reap_lock:
        now = time.monotonic()
        last = _last_reap.get(backend.name, 0.0)
        if last and now - last < REAP_INTERVAL_S:
            return
        _last_reap[backend.name] = now
    reap_orphans(backend)
