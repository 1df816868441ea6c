"""Sandbox start and exec latency, disk per task, and env-image sharing, on the demo tasks.

Targets (issue: snapshot runtime), on this 2-core machine: start p50 <= 0.3 s, exec p50 <= 0.06 s,
per-task disk <= 10 MB plus the size of the source tree. Also compares the chosen design (a
per-task image layer) with the alternative (copying the snapshot into an env-image container at
start). Set REPO2ENV_BENCH_CLONE=/path/to/clone to add a few tasks of a real repository
(mined with --allow-no-issue); it is skipped when unset.
"""

from __future__ import annotations

import io
import os
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from repo2env.jsonl import read_tasks
from repo2env.mine.git import GitSource
from repo2env.mine.miner import MineOptions, mine
from repo2env.pipeline.stages import build_tasks_dir
from repo2env.runtime.backend import Backend
from repo2env.runtime.backends import open_backend
from repo2env.runtime.build import BuildOptions
from repo2env.runtime.snapshot import make_snapshot

sys.path.insert(0, str(Path(__file__).resolve().parent))
from demo_tasks import built_demo_tasks  # noqa: E402
from results import Figure, record  # noqa: E402

STARTS = 30
EXECS = 100


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def layer_sizes(runtime: Backend, tag: str) -> int:
    """Bytes the task image adds on top of its env image (its own layers)."""
    image = runtime.images.get(tag)
    env = runtime.images.get(image.labels["repo2env.env_image"])
    return image.size_bytes - env.size_bytes


def source_size(clone: Path, commit: str) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        snapshot = Path(scratch) / "s"
        make_snapshot(clone, commit, snapshot)
        files = [path for path in snapshot.rglob("*") if path.is_file() and ".git" not in path.relative_to(snapshot).parts]
        git_bytes = sum(path.stat().st_size for path in (snapshot / ".git").rglob("*") if path.is_file())
        return sum(path.stat().st_size for path in files), git_bytes


def engine_floor(runtime: Backend, image: str) -> tuple[float, float] | None:
    """The bare engine, for comparison: create+start of a plain container, and a bare exec, through
    the Docker engine's own client (None on another backend: the protocol has no bare engine)."""
    if runtime.name != "docker":
        return None
    api = runtime.client.api
    starts, execs = [], []
    for _ in range(10):
        began = time.perf_counter()
        container = api.create_container(image, ["sleep", "infinity"], host_config=api.create_host_config(network_mode="none"))
        api.start(container["Id"])
        starts.append(time.perf_counter() - began)
        for _ in range(5):
            began = time.perf_counter()
            exec_id = api.exec_create(container["Id"], ["true"])["Id"]
            api.exec_start(exec_id)
            api.exec_inspect(exec_id)
            execs.append(time.perf_counter() - began)
        api.remove_container(container["Id"], force=True)
    return statistics.median(starts), statistics.median(execs)


def measure(label: str, folder: Path, runtime: Backend) -> list[Figure]:
    """Print and return the figures of the built tasks of ``folder``."""
    tasks = [task for task in read_tasks(folder / "tasks.jsonl") if task.env_spec and task.env_spec.status == "env_ok"]
    clone = Path(__import__("json").loads((folder / "source.json").read_text())["clone_path"])
    starts, execs = [], []
    for index in range(STARTS):
        task = tasks[index % len(tasks)]
        began = time.perf_counter()
        sandbox = runtime.start(task)
        sandbox.exec("true")
        starts.append(time.perf_counter() - began)
        if index == 0:
            for _ in range(EXECS):
                began = time.perf_counter()
                sandbox.exec("true")
                execs.append(time.perf_counter() - began)
        sandbox.close()
    floor = engine_floor(runtime, tasks[0].env_spec.image)
    if floor:
        print(f"[{label}] bare engine on this machine now: create+start p50 {floor[0]:.3f} s, exec p50 "
              f"{floor[1] * 1000:.1f} ms (the floor under any sandbox; CPU steal inflates both)")
    else:
        print(f"[{label}] no bare-engine floor on {runtime.name} (measured on docker only)")
    print(f"[{label}] start to first command: p50 {statistics.median(starts):.3f} s, p95 {percentile(starts, 0.95):.3f} s "
          f"(target p50 <= 0.3); exec round trip p50 {statistics.median(execs) * 1000:.1f} ms (target <= 60)")
    per_task = []
    for task in tasks:
        added = layer_sizes(runtime, task.env_spec.image)
        source, git_bytes = source_size(clone, task.base_commit)
        per_task.append((added, source, git_bytes))
    worst = max(per_task, key=lambda row: row[0] - row[1])
    print(f"[{label}] disk per task beyond its env image: max {worst[0] / 1e6:.2f} MB for a source tree of "
          f"{worst[1] / 1e6:.2f} MB (+{worst[2] / 1e6:.2f} MB one-commit .git); overhead "
          f"{(worst[0] - worst[1]) / 1e6:.2f} MB (target <= 10 MB)")
    sharing: dict[str, int] = {}
    for task in tasks:
        sharing[task.env_spec.env_image] = sharing.get(task.env_spec.env_image, 0) + 1
    print(f"[{label}] {len(tasks)} tasks share {len(sharing)} env images: {sorted(sharing.values(), reverse=True)}")

    # The alternative: one env-image container, the snapshot copied in at start.
    task = tasks[0]
    with tempfile.TemporaryDirectory() as scratch:
        snapshot = Path(scratch) / "s"
        make_snapshot(clone, task.base_commit, snapshot)
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            tar.add(snapshot, arcname=".", filter=lambda info: _owned_by_agent(info))
        payload = archive.getvalue()
    copies = []
    for _ in range(10):
        began = time.perf_counter()
        sandbox = runtime.start_image(task.env_spec.env_image)
        sandbox.put_archive("/testbed", payload)
        sandbox.exec("true")
        copies.append(time.perf_counter() - began)
        sandbox.close()
    print(f"[{label}] alternative, copy the snapshot at start: p50 {statistics.median(copies):.3f} s "
          f"vs per-task image {statistics.median(starts):.3f} s")
    floors = [Figure(f"{label}: engine floor, container create+start p50", round(floor[0] * 1000), "ms"),
              Figure(f"{label}: engine floor, exec p50", round(floor[1] * 1000, 1), "ms")] if floor else []
    return floors + [
            Figure(f"{label}: sandbox start to first command p50", round(statistics.median(starts) * 1000), "ms",
                   "<= 300"),
            Figure(f"{label}: exec round trip p50", round(statistics.median(execs) * 1000, 1), "ms", "<= 60"),
            Figure(f"{label}: disk per task beyond source tree (worst)", round((worst[0] - worst[1]) / 1e6, 2), "MB",
                   "<= 10"),
            Figure(f"{label}: env images for {len(tasks)} tasks", len(sharing), "images"),
            Figure(f"{label}: alternative, snapshot copied at start, p50", round(statistics.median(copies) * 1000),
                   "ms")]


def _owned_by_agent(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 1000
    info.uname = info.gname = "agent"
    return info


def main() -> None:
    runtime = open_backend()  # REPO2ENV_BACKEND, else docker
    with tempfile.TemporaryDirectory(prefix="repo2env-bench-rt-") as scratch:
        root = Path(scratch)
        began = time.perf_counter()
        _, tasks_dir, summary = built_demo_tasks(root, runtime)
        print(f"[demo] built {summary.ok} tasks ({summary.reused} reused) in {time.perf_counter() - began:.1f} s")
        figures = measure("demo", tasks_dir, runtime)
        clone = os.environ.get("REPO2ENV_BENCH_CLONE")
        if clone:
            name = Path(clone).name
            mine(GitSource(clone), root / name, MineOptions(allow_no_issue=True, limit=3))
            began = time.perf_counter()
            summary = build_tasks_dir(root / name, runtime=runtime, options=BuildOptions(jobs=2))
            print(f"[{name}] built {summary.ok} tasks, {summary.failed} failed in {time.perf_counter() - began:.1f} s "
                  f"{summary.failures or ''}")
            if summary.ok:
                figures += measure(name, root / name, runtime)
        else:
            print("(set REPO2ENV_BENCH_CLONE=/path/to/clone to add a real repository)")
    record("runtime", figures)


if __name__ == "__main__":
    main()
