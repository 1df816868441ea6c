"""The demo repository mined and built in a scratch folder: the common start of the container benchmarks."""

from __future__ import annotations

from pathlib import Path

from repo2env.demo import DemoRepo, build_demo
from repo2env.mine.git import GitSource
from repo2env.mine.miner import mine
from repo2env.pipeline.stages import build_tasks_dir
from repo2env.runtime.backend import Backend
from repo2env.runtime.build import BuildOptions, BuildSummary


def built_demo_tasks(root: Path, runtime: Backend) -> tuple[DemoRepo, Path, BuildSummary]:
    """Build the demo under ``root``, mine it into ``root/tasks`` and build every task."""
    demo = build_demo(root / "demo")
    mine(GitSource(demo.path, issues_path=demo.issues_path), root / "tasks")
    summary = build_tasks_dir(root / "tasks", runtime=runtime, options=BuildOptions(jobs=2))
    return demo, root / "tasks", summary
