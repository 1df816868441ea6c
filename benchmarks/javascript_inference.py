"""JavaScript environment inference and runner detection on real repositories' histories.

For each JavaScript repository found locally (``owner+name/repo`` bare clones under
``REPO2ENV_REAL_REPOS_DIR``, default ``../.mirror`` beside the project), it reads the repository at
commits spread over 2018-2025 (the first-parent commit nearest each half-year) and prints what
:mod:`repo2env.languages.javascript` infers there: the runner and why, the Node major and why, the
package manager, the date pin, the TypeScript transform, workspace packages; then per repository
how many commits got a runner this adapter set covers. Nothing is installed or run (the
Docker tests do that); reading files through ``git show`` is the only work, so it takes seconds.

    python benchmarks/javascript_inference.py [--only dayjs,express] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import Figure, record  # noqa: E402

from repo2env.languages.javascript.environment import (
    infer_environment,
    typescript_support,
    workspace_packages,
)
from repo2env.languages.javascript.project import ProjectFiles
from repo2env.languages.javascript.runners import detect_runner, script_invocation

PROJECT = Path(__file__).resolve().parents[1]
REPOSITORIES = ("iamkun/dayjs", "expressjs/express", "axios/axios", "markedjs/marked", "chalk/chalk", "pmndrs/zustand")


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True,
                          check=False).stdout


def _samples(git_dir: Path) -> list[tuple[str, datetime]]:
    """First-parent commits nearest to each Jan 1 and Jul 1 of 2018-2025 (one each, oldest first)."""
    log = _git(git_dir, "log", "--first-parent", "--format=%H %cI", "HEAD")
    commits = [(sha, datetime.fromisoformat(moment)) for sha, moment in (line.split() for line in log.splitlines())]
    chosen: dict[str, tuple[str, datetime]] = {}
    for year in range(2018, 2026):
        for month in (1, 7):
            target = datetime(year, month, 1).astimezone()
            before = [commit for commit in commits if commit[1] <= target]
            if before and before[0][1] >= commits[-1][1]:
                chosen.setdefault(before[0][0], before[0])
    return sorted(chosen.values(), key=lambda commit: commit[1])


def _files(git_dir: Path, commit: str) -> ProjectFiles:
    paths = _git(git_dir, "ls-tree", "-r", "--name-only", commit).splitlines()

    def read(path: str) -> str | None:
        result = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], capture_output=True,
                                check=False)
        return result.stdout.decode("utf-8", errors="replace") if result.returncode == 0 else None

    return ProjectFiles.of(read, paths)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated repository names (dayjs,express)")
    parser.add_argument("--json", type=Path, help="write the rows as JSON here")
    options = parser.parse_args()
    root = Path(os.environ.get("REPO2ENV_REAL_REPOS_DIR", PROJECT.parent / ".mirror"))
    wanted = {name.strip() for name in options.only.split(",") if name.strip()}
    rows, started = [], time.monotonic()
    figures: list[Figure] = []
    for repository in REPOSITORIES:
        if wanted and repository.split("/")[1] not in wanted:
            continue
        git_dir = root / repository.replace("/", "+") / "repo"
        if not git_dir.is_dir():
            print(f"{repository}: not found under {root} (skipped)")
            continue
        covered = 0
        samples = _samples(git_dir)
        print(f"\n== {repository} ({len(samples)} commits)")
        for commit, moment in samples:
            files = _files(git_dir, commit)
            environment = infer_environment(files, moment)
            runner = detect_runner(files)
            invocation = script_invocation(files.package_json(), runner.runner) if runner else None
            transform = typescript_support(files, runner.runner).transform if runner else None
            row = {
                "repository": repository, "commit": commit[:10], "date": moment.date().isoformat(),
                "runner": runner.runner if runner else None, "runner_reason": runner.reason if runner else None,
                "options": list(invocation.options + invocation.node_options) if invocation else [],
                "node": environment.node, "node_reason": environment.node_reason,
                "package_manager": environment.package_manager.name, "pin": environment.pin.kind,
                "pin_detail": environment.pin.detail, "typescript": transform,
                "workspaces": len(workspace_packages(files)),
            }
            rows.append(row)
            covered += runner is not None
            print(f"{row['date']} {row['commit']}  runner={row['runner'] or '-':6} node={row['node']:2} "
                  f"pm={row['package_manager']:10} pin={row['pin']:8} ts={row['typescript'] or '-':7} "
                  f"ws={row['workspaces']}  ({row['runner_reason'] or 'no runner of ours'}; {row['node_reason']})")
        print(f"-- {repository}: a covered runner at {covered}/{len(samples)} commits")
        figures.append(Figure(f"{repository}: sampled commits with a covered runner", covered, f"of {len(samples)}"))
    if rows:
        total = sum(row["runner"] is not None for row in rows)
        print(f"\noverall: a covered runner at {total}/{len(rows)} sampled commits; "
              f"pins: {sum(row['pin'] == 'lockfile' for row in rows)} lock file, "
              f"{sum(row['pin'] == 'before' for row in rows)} --before ({time.monotonic() - started:.1f} s)")
    else:
        print("no JavaScript repository found: set REPO2ENV_REAL_REPOS_DIR")
    if options.json:
        options.json.write_text(json.dumps(rows, indent=2))
    if rows:
        figures += [Figure("sampled commits with a covered runner", round(total / len(rows) * 100), "%"),
                    Figure("pinned from a lock file", sum(row["pin"] == "lockfile" for row in rows), f"of {len(rows)}")]
        record("javascript_inference", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
