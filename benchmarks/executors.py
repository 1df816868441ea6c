"""What an executor costs per task: the local pool and Ray on this machine (two workers each).

Prints, per executor: the start-up (Ray: the head started here; local: nothing to start), the
first task (a worker process started and the task's module imported), a no-op task's round trip
(submit -> result, one at a time, p50/p95) and a batch's throughput, and a task that makes one call
to the engine through its backend (the sandboxes carrying the benchmark's label): each round trip
less the call's own time measured inside the task is what the executor adds to a task that talks
to the engine. Needs the Ray extra and a container engine (``REPO2ENV_BACKEND``, else docker) with
the base image (``make base-image``).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from repo2env.pipeline.executors import LocalExecutor, RayExecutor
from repo2env.runtime.backends import open_backend

sys.path.insert(0, str(Path(__file__).resolve().parent))
from executor_tasks import engine_round_trip, noop  # noqa: E402
from results import Figure, record  # noqa: E402

BASE = "repo2env/base:py3.11"
SEQUENTIAL = 50
BATCH = 200
ENGINE_CALLS = 30
LABEL = "repo2env.bench=executors"

def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def round_trips(executor, fn, *args, count: int) -> list[tuple[float, float]]:
    """(submit -> result seconds, what the task returned) for ``count`` tasks, one at a time."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        returned = executor.submit(fn, *args).result()
        times.append((time.perf_counter() - started, returned))
    return times


def measure(make) -> dict[str, float]:
    started = time.perf_counter()
    executor = make()
    startup = time.perf_counter() - started
    started = time.perf_counter()
    executor.submit(noop).result()
    first = time.perf_counter() - started
    executor.submit(noop).result()  # the second worker too, where there is one
    sequential = [seconds for seconds, _ in round_trips(executor, noop, count=SEQUENTIAL)]
    started = time.perf_counter()
    for future in [executor.submit(noop) for _ in range(BATCH)]:
        future.result()
    batch = time.perf_counter() - started
    executor.submit(engine_round_trip, LABEL).result()  # the worker's backend, opened once
    via_executor = round_trips(executor, engine_round_trip, LABEL, count=ENGINE_CALLS)
    executor.shutdown()
    return {"startup_s": startup, "first_task_s": first, "noop_p50_ms": percentile(sequential, 0.5) * 1e3,
            "noop_p95_ms": percentile(sequential, 0.95) * 1e3, "batch_tasks_per_s": BATCH / batch,
            "engine_call_p50_ms": percentile([seconds for seconds, _ in via_executor], 0.5) * 1e3,
            # The call's own time, measured inside the task, taken off each round trip: what is left
            # is the executor's share, free of the engine's noise on a loaded machine.
            "added_p50_ms": percentile([seconds - inside for seconds, inside in via_executor], 0.5) * 1e3}


def main() -> None:
    runtime = open_backend()  # REPO2ENV_BACKEND, else docker
    key, _, value = LABEL.partition("=")
    with runtime.start_image(BASE, labels={key: value}):
        engine_round_trip(LABEL)
        inline = [engine_round_trip(LABEL) for _ in range(ENGINE_CALLS)]
        inline_p50 = statistics.median(inline) * 1e3
        results = {
            "local (2 jobs)": measure(lambda: LocalExecutor(jobs=2)),
            "ray (local head, 2 CPUs)": measure(lambda: RayExecutor(address=None, num_cpus=2)),
        }
    print(f"executors on this machine ({os.cpu_count()} cores, {runtime.name}); an engine call inline here: "
          f"p50 {inline_p50:.1f} ms")
    print(f"{'executor':<26} {'start-up':>9} {'1st task':>9} {'no-op p50':>10} {'no-op p95':>10} "
          f"{'batch':>11} {'call p50':>9} {'added':>8}")
    for name, row in results.items():
        print(f"{name:<26} {row['startup_s']:>8.2f}s {row['first_task_s']:>8.2f}s {row['noop_p50_ms']:>8.1f}ms "
              f"{row['noop_p95_ms']:>8.1f}ms {row['batch_tasks_per_s']:>7.0f}/s {row['engine_call_p50_ms']:>7.1f}ms "
              f"{row['added_p50_ms']:>6.1f}ms")
    print("no-op: submit -> result one at a time; batch: 200 no-ops submitted at once; call: a task making one "
          "engine call (the sandboxes by label); added: p50 of its round trip minus the call's own time inside the task")
    figures = [Figure(f"{runtime.name} engine call inline, p50", round(inline_p50, 1), "ms")]
    for name, row in results.items():
        figures += [Figure(f"{name}: start-up", round(row["startup_s"], 2), "s"),
                    Figure(f"{name}: first task", round(row["first_task_s"], 2), "s"),
                    Figure(f"{name}: no-op round trip p50", round(row["noop_p50_ms"], 1), "ms"),
                    Figure(f"{name}: no-op round trip p95", round(row["noop_p95_ms"], 1), "ms"),
                    Figure(f"{name}: batch throughput", round(row["batch_tasks_per_s"]), "tasks/s"),
                    Figure(f"{name}: added to an engine-call task, p50", round(row["added_p50_ms"], 1), "ms")]
    record("executors", figures)


if __name__ == "__main__":
    main()
