"""Real repositories, as shipped: mining recall, env build rate and acceptance on a fixed sample.

Target (issue: real repositories): every merged PR found; env built for >= 90% of the sample;
accepted >= 60% of the candidates with tests.

For each development repository found locally (bare or full clones named ``owner+name/repo``,
``owner+name`` or ``owner/name`` under ``REPO2ENV_REAL_REPOS_DIR``, default ``../.mirror`` beside the
project; or an explicit ``REPO2ENV_REAL_REPOS=path1:path2``), it

1. counts the merged PRs in the history independently of the miner: PR numbers named by a commit
   reachable from the default branch (``Merge pull request #N``, ``... (#N)``; with ``refs/pull/*``
   present, only numbers that have one) and ``refs/pull/N/head`` refs that the default branch contains;
2. mines the whole history offline (``--allow-no-issue``) and compares what it found (kept, rejected
   for a reason other than ``not_merged``, or landed as part of another PR);
3. picks a fixed sample of kept tasks spread over the years 2018-2025 (``--per-repo``, default 8:
   round-robin over the years, in each year the PR nearest mid-year first, a year without candidates
   handing its pick on to the next year), builds and validates it
   with the default policy;
4. prints per repository and overall: PRs found vs merged PRs in history, env built, accepted, and the
   reasons for the rest; writes ``results.json`` in the output folder.

Re-runs reuse what the output folder holds (mining skips mined ids, build reuses images, validation
skips validated tasks), so a long run can be stopped and resumed. Nothing here is a test: with no
repository found it says so and exits 0.

    python benchmarks/real_repos.py [--per-repo 8] [--only click,attrs] [--out generated/bench-real]
                                    [--no-validate] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

from repo2env.jsonl import REPOSITORY_FILE as SOURCE_FILE
from repo2env.jsonl import read_tasks, write_jsonl
from repo2env.mine.git import GitSource
from repo2env.mine.miner import MineOptions, mine
from repo2env.models import Task

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT / "benchmarks"))
from results import Figure, record  # noqa: E402

YEARS = range(2018, 2026)
_MERGE_SUBJECT = re.compile(r"^Merge pull request #(\d+)\b")
_SQUASH_SUBJECT = re.compile(r"\(#(\d+)\)\s*$")


def find_repositories() -> list[tuple[str, Path]]:
    """(owner/name, git dir or work tree) for every development repository present here."""
    explicit = [Path(path) for path in os.environ.get("REPO2ENV_REAL_REPOS", "").split(":") if path]
    root = Path(os.environ.get("REPO2ENV_REAL_REPOS_DIR", PROJECT.parent / ".mirror"))
    if explicit:
        candidates = explicit
    else:
        candidates = sorted(path for path in root.glob("*") if path.is_dir()) if root.is_dir() else []
    found = []
    for path in candidates:
        clone = path / "repo" if (path / "repo").is_dir() else path
        if not _is_git(clone):
            continue
        label = path.name if path.name != "repo" else path.parent.name
        found.append((label.replace("+", "/", 1) if "/" not in label else label, clone))
    return found


def _is_git(path: Path) -> bool:
    return subprocess.run(["git", "-C", str(path), "rev-parse", "--git-dir"], capture_output=True).returncode == 0


def _git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True, check=True,
                          encoding="utf-8", errors="replace").stdout


def default_branch(clone: Path) -> str:
    heads = _git(clone, "for-each-ref", "--format=%(refname:short)", "refs/heads/").split()
    current = subprocess.run(["git", "-C", str(clone), "symbolic-ref", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
    for candidate in (current, "main", "master"):
        if candidate and candidate in heads:
            return candidate
    return heads[0]


def merged_prs_in_history(clone: Path, branch: str) -> set[int]:
    """PR numbers the default branch's history says were merged (the miner's yardstick, counted apart).

    GitHub keeps ``refs/pull/N/head`` for every PR, so where a clone has those refs, a subject's
    ``#N`` without one names an issue (``Fix deepcopy of MultiDict (#435)``), not a PR."""
    pull_refs = {int(parts[2]) for ref in _git(clone, "for-each-ref", "--format=%(refname)", "refs/pull/").split()
                 if len(parts := ref.split("/")) == 4 and parts[3] == "head" and parts[2].isdigit()}
    numbers = set()
    for subject in _git(clone, "log", branch, "--format=%s").splitlines():
        match = _MERGE_SUBJECT.match(subject) or _SQUASH_SUBJECT.search(subject)
        if match and (not pull_refs or int(match.group(1)) in pull_refs):
            numbers.add(int(match.group(1)))
    for ref in _git(clone, "for-each-ref", "--merged", branch, "--format=%(refname)", "refs/pull/").split():
        parts = ref.split("/")
        if len(parts) == 4 and parts[3] == "head" and parts[2].isdigit():
            numbers.add(int(parts[2]))
    return numbers


def pick_sample(tasks: list[Task], per_repo: int) -> list[Task]:
    """A fixed spread over YEARS: round-robin over the years, nearest mid-year first in each."""
    by_year: dict[int, list[Task]] = {year: [] for year in YEARS}
    for task in tasks:
        year = int(task.created_at[:4])
        if year in by_year:
            by_year[year].append(task)
    for year, bucket in by_year.items():
        middle = datetime(year, 7, 1).timestamp()
        bucket.sort(key=lambda task: (abs(_timestamp(task.created_at) - middle), task.pull_number))
    sample: list[Task] = []
    # A year without a candidate hands its pick on to the next year (not back to 2018), so the
    # sample stays spread over the span even where a project was quiet.
    carried = 0
    while len(sample) < per_repo and any(by_year.values()):
        for year in YEARS:
            wanted = min(1 + carried, per_repo - len(sample))
            taken = by_year[year][:wanted]
            del by_year[year][:wanted]
            sample.extend(taken)
            carried = wanted - len(taken)
    return sorted(sample, key=lambda task: task.created_at)


def _timestamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).replace(tzinfo=None).timestamp()


def bench_repository(name: str, clone: Path, out: Path, *, per_repo: int, validate: bool, jobs: int,
                     runtime) -> dict:
    folder = out / name.replace("/", "__")
    row: dict = {"repo": name, "clone": str(clone)}
    branch = default_branch(clone)
    truth = merged_prs_in_history(clone, branch)
    began = time.perf_counter()
    mined_dir = folder / "mined"
    result = mine(GitSource(clone, repo=name), mined_dir, MineOptions(allow_no_issue=True))
    row["mine_s"] = round(time.perf_counter() - began, 1)
    funnel = result.funnel
    kept = read_tasks(mined_dir / "tasks.jsonl")
    # A PR whose head landed as part of another PR (same commits) is found: the miner names where
    # its changes are, and mines them once, under the other PR.
    landed_with_other = {rejection.pull_number for rejection in funnel.rejections
                         if rejection.reason == "not_merged" and "landed as part of PR" in (rejection.detail or "")}
    found = {task.pull_number for task in kept} | {
        rejection.pull_number for rejection in funnel.rejections if rejection.reason != "not_merged"} | landed_with_other
    not_merged = [rejection for rejection in funnel.rejections if rejection.reason == "not_merged"]
    row.update({
        "merged_in_history": len(truth), "found": len(found & truth), "found_beyond_history_count": len(found - truth),
        "found_as_part_of_another": len(landed_with_other & truth),
        "missed": sorted(truth - found)[:50], "missed_count": len(truth - found),
        "not_merged": len(not_merged),
        "not_merged_details": dict(Counter(_detail_kind(rejection.detail) for rejection in not_merged).most_common(8)),
        "candidates_with_tests": len(kept),
        "mine_rejections": dict(Counter(rejection.reason for rejection in funnel.rejections).most_common()),
    })
    sample = pick_sample(kept, per_repo)
    row["sample"] = [task.pull_number for task in sample]
    row["sample_years"] = dict(sorted(Counter(task.created_at[:4] for task in sample).items()))
    if runtime is None or not sample:
        return row
    sample_dir = folder / "sample"
    sample_dir.mkdir(parents=True, exist_ok=True)
    done = {task.instance_id: task for task in read_tasks(sample_dir / "tasks.jsonl")} \
        if (sample_dir / "tasks.jsonl").is_file() else {}
    # A task built before is reused only while mining still gives the same task (a changed split
    # makes it another task) and its env was built: the rest are built and validated again.
    reused = {task.instance_id: done[task.instance_id] for task in sample
              if task.instance_id in done and _same_task(done[task.instance_id], task)
              and done[task.instance_id].env_spec is not None and done[task.instance_id].env_spec.status == "env_ok"}
    write_jsonl(sample_dir / "tasks.jsonl", [reused.get(task.instance_id, task) for task in sample])
    _forget_validations(sample_dir / "validation.jsonl", {task.instance_id for task in sample} - set(reused))
    (sample_dir / SOURCE_FILE).write_text((mined_dir / SOURCE_FILE).read_text())

    from repo2env.pipeline.stages import build_tasks_dir
    from repo2env.runtime.build import BuildOptions

    began = time.perf_counter()
    built = build_tasks_dir(sample_dir, runtime=runtime, options=BuildOptions(jobs=jobs))
    row["build_s"] = round(time.perf_counter() - began, 1)
    row["env_built"] = built.ok
    row["env_failed"] = dict(Counter(_reason_kind(reason) for reason in built.failures.values()))
    row["env_failures"] = built.failures
    if not validate:
        return row
    from repo2env.pipeline.stages import validate_dir
    from repo2env.validate.acceptance import load_acceptance_policy
    from repo2env.validate.run import read_records

    began = time.perf_counter()
    validate_dir(sample_dir, runtime, load_acceptance_policy("default"), jobs=1)
    row["validate_s"] = round(time.perf_counter() - began, 1)
    records = read_records(sample_dir / "validation.jsonl")
    row["accepted"] = sum(record.verdict == "accepted" for record in records)
    row["validated"] = len(records)
    row["rejections"] = dict(Counter(reason for record in records for reason in record.reasons))
    return row


def _same_task(built: Task, mined: Task) -> bool:
    return (built.base_commit, built.patch, built.test_patch) == (mined.base_commit, mined.patch, mined.test_patch)


def _forget_validations(path: Path, instance_ids: set[str]) -> None:
    """Drop the validation records of ``instance_ids`` (tasks about to be built again)."""
    if not path.is_file():
        return
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not line.strip() or json.loads(line).get("instance_id") not in instance_ids]
    if len(kept) != len(lines):
        path.write_text("".join(kept))


def _detail_kind(detail: str) -> str:
    return re.sub(r"[0-9a-f]{7,40}|#\d+|\d+", "N", detail or "(no detail)")[:90]


def _reason_kind(reason: str) -> str:
    return re.sub(r"[0-9a-f]{12,40}|\d+(\.\d+)*", "N", reason)[:120]


def print_row(row: dict) -> None:
    print(f"[{row['repo']}] merged PRs in history {row['merged_in_history']}, found {row['found']} "
          f"({row.get('found_as_part_of_another', 0)} of them landed as part of another PR; "
          f"+{row['found_beyond_history_count']} beyond the simple count), missed {row['missed_count']}"
          f"{' e.g. ' + ', '.join(f'#{n}' for n in row['missed'][:8]) if row['missed'] else ''}; "
          f"mined in {row['mine_s']} s")
    print(f"[{row['repo']}]   not merged: {row['not_merged']} {row['not_merged_details'] or ''}")
    print(f"[{row['repo']}]   candidates with tests {row['candidates_with_tests']}; mining rejections "
          f"{row['mine_rejections']}")
    if "env_built" in row:
        print(f"[{row['repo']}]   sample {len(row['sample'])} PRs {row['sample_years']}: env built "
              f"{row['env_built']}/{len(row['sample'])} in {row['build_s']} s; failures {row['env_failed'] or 'none'}")
    if "accepted" in row:
        print(f"[{row['repo']}]   accepted {row['accepted']}/{len(row['sample'])} in {row['validate_s']} s; "
              f"rejections {row['rejections'] or 'none'}")


def print_overall(rows: list[dict]) -> list[Figure]:
    """Print the figures over every repository; return them, with each repository's yield."""
    def total(key: str) -> int:
        return sum(row.get(key, 0) for row in rows)

    truth, found = total("merged_in_history"), total("found")
    print(f"[overall] {len(rows)} repositories: found {found}/{truth} merged PRs "
          f"({found / truth:.1%})" if truth else "[overall] no merged PRs counted")
    sampled = sum(len(row["sample"]) for row in rows if "env_built" in row)
    if sampled:
        print(f"[overall] env built {total('env_built')}/{sampled} ({total('env_built') / sampled:.0%}, target >= 90%)")
    validated = sum(len(row["sample"]) for row in rows if "accepted" in row)
    if validated:
        print(f"[overall] accepted {total('accepted')}/{validated} ({total('accepted') / validated:.0%}, "
              f"target >= 60%); rejections "
              f"{dict(sum((Counter(row.get('rejections', {})) for row in rows), Counter()))}")
    figures = [Figure(f"merged PRs found in history ({found:,} of {truth:,})", round(found / truth * 100, 2), "%")] \
        if truth else []
    if sampled:
        figures.append(Figure(f"env built ({total('env_built')} of {sampled})",
                              round(total("env_built") / sampled * 100), "%", ">= 90"))
    if validated:
        figures.append(Figure(f"accepted ({total('accepted')} of {validated})",
                              round(total("accepted") / validated * 100), "%", ">= 60"))
        figures += [Figure(f"accepted, {row['repo']}", row["accepted"], f"of {len(row['sample'])}")
                    for row in rows if "accepted" in row]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-repo", type=int, default=8)
    parser.add_argument("--only", default="", help="comma-separated name fragments (e.g. click,attrs)")
    parser.add_argument("--out", type=Path, default=PROJECT / "generated" / "bench-real")
    parser.add_argument("--no-build", action="store_true", help="mining figures only")
    parser.add_argument("--no-validate", action="store_true")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    repositories = [(name, clone) for name, clone in find_repositories()
                    if not args.only or any(part and part in name for part in args.only.split(","))]
    if not repositories:
        print("no development repository found (set REPO2ENV_REAL_REPOS_DIR or REPO2ENV_REAL_REPOS); skipped")
        return
    runtime = None
    if not args.no_build:
        from repo2env.runtime.backends.docker import DockerBackend

        runtime = DockerBackend()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, clone in repositories:
        row = bench_repository(name, clone, args.out, per_repo=args.per_repo, validate=not args.no_validate,
                               jobs=args.jobs, runtime=runtime)
        print_row(row)
        sys.stdout.flush()
        rows.append(row)
        (args.out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    record("real_repos", print_overall(rows), note=f"{len(rows)} repositories, {args.per_repo} PRs each")


if __name__ == "__main__":
    main()
