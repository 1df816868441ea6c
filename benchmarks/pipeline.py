"""The batch pipeline's throughput and its own overhead.

Runs the demo pipeline (pipelines/demo.yaml: mine, build, validate, publish) into a fresh output
folder once per worker count (1 and 2 local workers; images cached by a warm-up run, so the
figures are the stages' steady work, not first-time image builds), and prints tasks per hour,
the scaling efficiency from 1 to 2 workers, and the pipeline's own time per task (state store
transactions, scheduling, writing rows: the runner's bookkeeping) against the stage work per task.
Target: overhead under 5% of the stage work.

REPO2ENV_BENCH_POLICY=default runs the shipped policy (slow); the default here is a lighter one
(one gold run, few variants) so the benchmark takes minutes, not an hour. The last run goes through
Ray (a head started here with 2 CPUs; its start-up is timed apart, benchmarks/executors.py has
the per-task figures of both executors).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from repo2env.pipeline.batch import run_pipeline
from repo2env.pipeline.executors import Executor, LocalExecutor, RayExecutor
from repo2env.pipeline.spec import load_pipeline_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import Figure, record  # noqa: E402

LIGHT_POLICY = {"gold_runs": 1, "partial_limit": 1, "near_miss_limit": 1, "stub_limit": 1, "reruns": 2}


def run(spec, out: Path, executor: Executor) -> tuple[float, int, float, float]:
    """(wall seconds, tasks, stage work seconds, bookkeeping seconds) of one run into ``out``."""
    spec = spec.model_copy(update={"output": str(out)})
    began = time.perf_counter()
    result = run_pipeline(spec, executor=executor)
    wall = time.perf_counter() - began
    executor.shutdown()
    tasks = sum(entry.get("tasks", 0) for entry in result.funnel["repos"].values())
    return wall, tasks, result.work_s, result.bookkeeping_s


def main() -> None:
    spec = load_pipeline_spec("demo")
    if os.environ.get("REPO2ENV_BENCH_POLICY", "light") != "default":
        spec = spec.model_copy(update={"policy": LIGHT_POLICY})
    with tempfile.TemporaryDirectory(prefix="repo2env-bench-pipeline-") as scratch:
        root = Path(scratch)
        print("warm-up run (builds the demo's images once) ...")
        run(spec, root / "warm-up", LocalExecutor(jobs=2))
        rates, figures = {}, []
        for name, jobs in (("local", 1), ("local", 2), ("ray", 2)):
            if name == "ray":
                began = time.perf_counter()
                executor = RayExecutor(address=None, num_cpus=jobs)
                figures.append(Figure("Ray head start-up", round(time.perf_counter() - began, 1), "s"))
                print(f"[ray] head started in {figures[-1].value} s")
            else:
                executor = LocalExecutor(jobs=jobs)
            wall, tasks, work, bookkeeping = run(spec, root / f"{name}-{jobs}", executor)
            rates[name, jobs] = tasks / wall * 3600
            print(f"[{name}, {jobs} worker{'s' if jobs > 1 else ''}] {tasks} tasks in {wall:.0f} s: {rates[name, jobs]:.0f} tasks/hour; "
                  f"per task: stage work {work / tasks:.1f} s, pipeline overhead {bookkeeping / tasks * 1000:.0f} ms "
                  f"({bookkeeping / work:.2%} of the stage work; target < 5%)")
            where = f"{name}, {jobs} worker{'s' if jobs > 1 else ''}"
            figures += [Figure(f"tasks per hour, {where}", round(rates[name, jobs]), "tasks/h"),
                        Figure(f"pipeline overhead per task, {where}", round(bookkeeping / tasks * 1000), "ms"),
                        Figure(f"pipeline overhead share of the stage work, {where}",
                               round(bookkeeping / work * 100, 2), "%", "< 5")]
        scaling = rates["local", 2] / rates["local", 1]
        print(f"scaling 1 -> 2 local workers: x{scaling:.2f} (efficiency {scaling / 2:.0%}; "
              f"{os.cpu_count()} cores on this machine, shared); Ray with 2 CPUs: "
              f"{rates['ray', 2] / rates['local', 2]:.0%} of the local pool's rate")
        figures.append(Figure("scaling 1 -> 2 local workers", round(scaling, 2), "x"))
        record("pipeline", figures, note=f"policy {os.environ.get('REPO2ENV_BENCH_POLICY', 'light')}")


if __name__ == "__main__":
    main()
