"""Mining speed and memory from local history, on a generated repository of 5,000 merged PRs.

Targets (issue: mining): >= 1,000 PRs scanned per second, < 500 MB peak memory, on 2 cores.
Prints the figures; the mining itself runs in a child process so its peak RSS is its own.
Optional: REPO2ENV_BENCH_PULLS (default 5000); REPO2ENV_BENCH_MAINTENANCE (default 0): the share of
PRs merged into a maintenance branch that main merges later (0.3 is werkzeug-like).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import Figure, record  # noqa: E402
from synthetic_history import build_history, write_issues  # noqa: E402

CHILD = """
import sys, time, json
from pathlib import Path
from repo2env.mine.git import GitSource
from repo2env.mine.miner import mine
started = time.perf_counter()
source = GitSource(sys.argv[1], issues_path=Path(sys.argv[2]))
result = mine(source, Path(sys.argv[3]))
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "counts": result.funnel.counts}))
"""


def main() -> None:
    pulls = int(os.environ.get("REPO2ENV_BENCH_PULLS", "5000"))
    maintenance = float(os.environ.get("REPO2ENV_BENCH_MAINTENANCE", "0"))
    with tempfile.TemporaryDirectory(prefix="repo2env-bench-") as scratch:
        scratch_path = Path(scratch)
        started = time.perf_counter()
        repo, payload = build_history(scratch_path / "repo", pulls=pulls, maintenance=maintenance)
        issues = write_issues(payload, scratch_path / "issues.json")
        print(f"generated {pulls} PRs ({maintenance:.0%} through a maintenance branch) in "
              f"{time.perf_counter() - started:.1f} s")
        child = subprocess.run([sys.executable, "-c", CHILD, str(repo), str(issues), str(scratch_path / "out")],
                               capture_output=True, text=True, check=True)
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        figures = json.loads(child.stdout.strip().splitlines()[-1])
    counts = figures["counts"]
    rate = counts["scanned"] / figures["seconds"]
    print(f"scanned {counts['scanned']} PRs, kept {counts['kept']}, in {figures['seconds']:.2f} s")
    print(f"mine_local: {rate:.0f} PRs/s (target >= 1000); peak RSS {peak_mb:.0f} MB (target < 500)")
    print("funnel:", json.dumps({k: v for k, v in counts.items() if v}))
    record("mine_local", [Figure("PRs scanned per second", round(rate), "PRs/s", ">= 1000"),
                          Figure("peak memory (RSS)", round(peak_mb), "MB", "< 500"),
                          Figure("PRs scanned", counts["scanned"], "PRs"),
                          Figure("share through a maintenance branch", round(maintenance * 100), "%")])


if __name__ == "__main__":
    main()
