"""Validation wall time per task and the share of it spent outside running tests.

Target (issue: validation): at most 25% of the wall time outside test runs. Runs the default policy
on the demo (mined and built in a temp folder). With REPO2ENV_BENCH_CLONES=path1:path2 it also mines
(--allow-no-issue, REPO2ENV_BENCH_LIMIT tasks each, default 8), builds and validates real clones and
prints their yield (accepted / mined) with the rejection reasons; skipped when unset.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from repo2env.mine.git import GitSource
from repo2env.mine.miner import MineOptions, mine
from repo2env.pipeline.stages import build_tasks_dir, validate_dir
from repo2env.runtime.backend import Backend
from repo2env.runtime.backends import open_backend
from repo2env.runtime.build import BuildOptions
from repo2env.validate.acceptance import load_acceptance_policy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from demo_tasks import built_demo_tasks  # noqa: E402
from results import Figure, record  # noqa: E402


def report(label: str, folder: Path, runtime: Backend, mined: int) -> list[Figure]:
    """Validate ``folder``; print and return its figures."""
    began = time.perf_counter()
    summary = validate_dir(folder, runtime, load_acceptance_policy("default"), jobs=1)
    elapsed = time.perf_counter() - began
    records = summary.records
    if not records:
        print(f"[{label}] nothing to validate")
        return []
    walls = [record.wall_s for record in records]
    outside = [1 - record.tests_s / record.wall_s for record in records if record.wall_s]
    print(f"[{label}] {len(records)} tasks in {elapsed:.0f} s: wall per task median {statistics.median(walls):.1f} s "
          f"(max {max(walls):.1f}); outside test runs median {statistics.median(outside):.0%}, "
          f"overall {1 - sum(r.tests_s for r in records) / sum(walls):.0%} (target <= 25%)")
    reasons = Counter(reason for record in records for reason in record.reasons)
    print(f"[{label}] yield: {summary.accepted} accepted / {mined} mined; rejections: {dict(reasons) or 'none'}")
    overall = 1 - sum(r.tests_s for r in records) / sum(walls)
    return [Figure(f"{label}: wall per task, median", round(statistics.median(walls), 1), "s"),
            Figure(f"{label}: time outside test runs, overall", round(overall * 100), "%", "<= 25"),
            Figure(f"{label}: accepted", summary.accepted, f"of {mined} mined")]


def main() -> None:
    runtime = open_backend()  # REPO2ENV_BACKEND, else docker
    with tempfile.TemporaryDirectory(prefix="repo2env-bench-validate-") as scratch:
        root = Path(scratch)
        _, tasks_dir, built = built_demo_tasks(root, runtime)
        figures = report("demo", tasks_dir, runtime, built.ok + built.failed)
        limit = int(os.environ.get("REPO2ENV_BENCH_LIMIT", "8"))
        for clone in filter(None, os.environ.get("REPO2ENV_BENCH_CLONES", "").split(":")):
            name = Path(clone).parent.name if Path(clone).name == "repo" else Path(clone).name
            folder = root / name
            mined = mine(GitSource(clone, repo=name.replace("+", "/")), folder,
                         MineOptions(allow_no_issue=True, limit=limit))
            built = build_tasks_dir(folder, runtime=runtime, options=BuildOptions(jobs=2))
            print(f"[{name}] mined {len(mined.new_tasks)}, built {built.ok} ({built.failed} failed: "
                  f"{sorted(set(built.failures.values()))[:3]})")
            figures += report(name, folder, runtime, len(mined.new_tasks))
        if not os.environ.get("REPO2ENV_BENCH_CLONES"):
            print("(set REPO2ENV_BENCH_CLONES=/path/click:/path/marshmallow to add real repositories)")
    record("validation", figures)


if __name__ == "__main__":
    main()
