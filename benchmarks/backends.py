"""Sandbox latency per backend: start (ready for its first command), a command through the engine's
exec and through the persistent channel, a file in, the diff, and close, on the base image.

Prints one table row per backend that runs here (a missing one is said in a line). Docker's targets
(issue: snapshot runtime): start p50 <= 0.3 s, exec p50 <= 0.06 s on this 2-core machine; podman has
no target of its own: the figures say what choosing it costs.
Usage: python benchmarks/backends.py [--starts N] [--execs N]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

from repo2env.errors import BackendUnavailableError
from repo2env.runtime.backends import BACKENDS, open_backend
from repo2env.runtime.bootstrap import base_image_tag
from repo2env.runtime.sandbox import SandboxLimits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import Figure, record  # noqa: E402

IMAGE = base_image_tag("3.11")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def timed(call) -> float:
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


def measure(name: str, starts: int, execs: int) -> dict[str, float] | None:
    try:
        backend = open_backend(name)
    except BackendUnavailableError as exc:
        print(f"{name}: not measured ({exc.message})")
        return None
    if backend.images.get(IMAGE) is None:
        print(f"{name}: not measured (no {IMAGE}: 'repo2env --backend {name} runtime bootstrap')")
        return None
    figures: dict[str, list[float]] = {key: [] for key in ("start", "start_channel", "exec", "exec_channel",
                                                           "write_file", "diff", "close")}
    for _ in range(starts):
        began = time.perf_counter()
        sandbox = backend.start_image(IMAGE, labels={"repo2env.bench": "backends"})
        figures["start"].append(time.perf_counter() - began)
        figures["close"].append(timed(sandbox.close))
    channel_limits = dataclasses.replace(SandboxLimits(), persistent_channel=True)
    for _ in range(max(1, starts // 3)):
        began = time.perf_counter()
        sandbox = backend.start_image(IMAGE, limits=channel_limits, labels={"repo2env.bench": "backends"})
        figures["start_channel"].append(time.perf_counter() - began)
        sandbox.close()
    with backend.start_image(IMAGE, labels={"repo2env.bench": "backends"}) as sandbox:
        sandbox.exec("git init -q . && git -c user.name=b -c user.email=b@b commit -q --allow-empty -m s")
        for _ in range(execs):
            figures["exec"].append(timed(lambda: sandbox.exec("true")))
        for index in range(max(1, execs // 5)):
            figures["write_file"].append(timed(lambda index=index: sandbox.write_file(f"/testbed/f{index}.txt", "x\n")))
            figures["diff"].append(timed(sandbox.diff))
    with backend.start_image(IMAGE, limits=channel_limits, labels={"repo2env.bench": "backends"}) as sandbox:
        for _ in range(execs):
            figures["exec_channel"].append(timed(lambda: sandbox.exec("true")))
    print(f"{name}: {backend.describe()}")
    return {key: statistics.median(values) for key, values in figures.items()} | {
        "start_p90": percentile(figures["start"], 0.9), "exec_p90": percentile(figures["exec"], 0.9)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--execs", type=int, default=50)
    args = parser.parse_args()
    rows = {name: measure(name, args.starts, args.execs) for name in BACKENDS}
    columns = ("start", "start_p90", "start_channel", "exec", "exec_p90", "exec_channel", "write_file", "diff", "close")
    print("\n| backend | " + " | ".join(f"{column} (s, p50)" if "p90" not in column else f"{column} (s)"
                                      for column in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name, figures in rows.items():
        if figures:
            print(f"| {name} | " + " | ".join(f"{figures[column]:.3f}" for column in columns) + " |")
    targets = {("docker", "start"): "<= 300", ("docker", "exec"): "<= 60"}
    record("backends", [Figure(f"{name}: {column}{'' if 'p90' in column else ' p50'}", round(figures[column] * 1000, 1),
                               "ms", targets.get((name, column)))
                        for name, figures in rows.items() if figures for column in columns],
           note=", ".join(f"{name} not measured" for name, figures in rows.items() if not figures))


if __name__ == "__main__":
    main()
