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
3. picks a fixed sample of kept tasks spread over ``--years`` (default 2018-2025; ``--per-repo``,
   default 8: round-robin over the years, in each year the PR nearest mid-year first, a year without
   candidates handing its pick on to the next year; or ``--per-year N``: up to N PRs of each year,
   spread over it), builds and validates it with the default policy;
4. prints per repository, per year and overall: PRs found vs merged PRs in history, env built, the
   rung and Python each task got, accepted, and the reasons for the rest; where validation's time
   went (derivation, gold, the variants) against one run of the task's tests, the least that ratio
   can be under the policy (derivation's runs and the gold gradings over the cores), and where
   validation's CPU went (the tests in the sandboxes, repo2env on the host, the container engine:
   ``cpu_use.py``); writes ``results.json`` (one row per repository, each with a row per sampled task) in the output folder;
5. with ``--compare N``, validates N tasks per repository again as validation ran before the
   throughput work (every rollout graded in full, one at a time) and prints both verdicts and times;
6. with ``--policy light`` (or any policy name or file), validates under that policy instead of the
   default one; records another policy gave are validated again.

Re-runs reuse what the output folder holds (mining skips mined ids, build reuses images, validation
skips validated tasks), so a long run can be stopped and resumed. Nothing here is a test: with no
repository found it says so and exits 0.

    python benchmarks/real_repos.py [--per-repo 8 | --per-year 4] [--years 2016-2020] [--only click,attrs]
                                    [--out generated/bench-real] [--no-validate] [--jobs 2] [--compare 2]
                                    [--policy light]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
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
from cpu_use import CpuUse  # noqa: E402
from results import Figure, record  # noqa: E402

YEARS = range(2018, 2026)  #: the default --years
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


def pick_sample(tasks: list[Task], per_repo: int, years: range = YEARS, per_year: int = 0) -> list[Task]:
    """A fixed spread over ``years``: round-robin over the years, nearest mid-year first in each; with
    ``per_year``, up to that many of every year instead, each nearest one of as many points spread
    evenly over the year."""
    by_year: dict[int, list[Task]] = {year: [] for year in years}
    for task in tasks:
        year = int(task.created_at[:4])
        if year in by_year:
            by_year[year].append(task)
    if per_year:
        return sorted((task for year, bucket in by_year.items() for task in _spread(bucket, year, per_year)),
                      key=lambda task: task.created_at)
    for year, bucket in by_year.items():
        middle = datetime(year, 7, 1).timestamp()
        bucket.sort(key=lambda task: (abs(_timestamp(task.created_at) - middle), task.pull_number))
    sample: list[Task] = []
    # A year without a candidate hands its pick on to the next year (not back to the first), so the
    # sample stays spread over the span even where a project was quiet.
    carried = 0
    while len(sample) < per_repo and any(by_year.values()):
        for year in years:
            wanted = min(1 + carried, per_repo - len(sample))
            taken = by_year[year][:wanted]
            del by_year[year][:wanted]
            sample.extend(taken)
            carried = wanted - len(taken)
    return sorted(sample, key=lambda task: task.created_at)


def _spread(bucket: list[Task], year: int, count: int) -> list[Task]:
    """Up to ``count`` tasks of one year: for each of ``count`` points spread over it (the middles of
    equal parts), the task nearest it not taken yet."""
    start, end = datetime(year, 1, 1).timestamp(), datetime(year + 1, 1, 1).timestamp()
    left = sorted(bucket, key=lambda task: task.pull_number)
    taken: list[Task] = []
    for part in range(min(count, len(left))):
        point = start + (end - start) * (part + 0.5) / count
        nearest = min(left, key=lambda task: (abs(_timestamp(task.created_at) - point), task.pull_number))
        left.remove(nearest)
        taken.append(nearest)
    return taken


def _timestamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).replace(tzinfo=None).timestamp()


def bench_repository(name: str, clone: Path, out: Path, *, per_repo: int, validate: bool, jobs: int,
                     runtime, years: range = YEARS, per_year: int = 0, validate_jobs: int = 1, compare: int = 0,
                     grading_jobs: str | None = None, policy_name: str = "default") -> dict:
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
    sample = pick_sample(kept, per_repo, years, per_year)
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
    row["env_images"] = len(built.env_images)  # distinct env images the built tasks share
    row["env_failed"] = dict(Counter(_reason_kind(reason) for reason in built.failures.values()))
    row["env_failures"] = built.failures
    if not validate:
        row["tasks"] = task_rows(sample_dir)
        return row
    from repo2env.pipeline.compose import acceptance_policy
    from repo2env.pipeline.stages import validate_dir
    from repo2env.validate.run import read_records

    began = time.perf_counter()
    policy = acceptance_policy(policy_name, grading_jobs=grading_jobs)
    # Records another policy gave are validated again under this one.
    _forget_validations(sample_dir / "validation.jsonl", {
        record.instance_id for record in read_records(sample_dir / "validation.jsonl") if record.policy != policy.name})
    row["policy"] = policy.name
    row["grading_jobs"] = policy.grading_jobs
    row["policy_runs"] = {"reruns": policy.reruns, "gold_runs": policy.gold_runs}
    cpu = CpuUse.now()
    validate_dir(sample_dir, runtime, policy, jobs=validate_jobs)
    row["validate_cpu"] = CpuUse.now().since(cpu).as_dict()
    row["validate_s"] = round(time.perf_counter() - began, 1)
    records = read_records(sample_dir / "validation.jsonl")
    row["accepted"] = sum(record.verdict == "accepted" for record in records)
    row["validated"] = len(records)
    row["rejections"] = dict(Counter(reason for record in records for reason in record.reasons))
    row["tasks"] = task_rows(sample_dir)
    if compare:
        row["compared"] = compare_with_full_gradings(sample_dir, runtime, compare)
    return row


#: The validation settings before the throughput work: every rollout graded in full, one at a time.
BEFORE = {"stop_early": False, "grading_jobs": 1}


def compare_with_full_gradings(sample_dir: Path, runtime, count: int) -> list[dict]:
    """Validate up to ``count`` validated tasks again as validation ran before (:data:`BEFORE`), on the
    same images, after today's run; their verdicts and wall times side by side
    (resumable: ``validation-before.jsonl``)."""
    from repo2env.jsonl import append_jsonl
    from repo2env.validate.acceptance import load_acceptance_policy
    from repo2env.validate.run import read_records, validate_task

    path = sample_dir / "validation-before.jsonl"
    done = {record.instance_id: record for record in read_records(path)}
    after = {record.instance_id: record for record in read_records(sample_dir / "validation.jsonl")}
    policy = load_acceptance_policy("default").model_copy(update=BEFORE)
    tasks = [task for task in read_tasks(sample_dir / "tasks.jsonl")
             if task.instance_id in after and after[task.instance_id].FAIL_TO_PASS][:count]
    for task in tasks:
        if task.instance_id not in done:
            _, record = validate_task(task, runtime, policy, logs_dir=sample_dir / "logs" / "validate-before" / task.instance_id)
            append_jsonl(path, [record])
            done[task.instance_id] = record
    return [{"instance_id": task.instance_id, "verdict_before": done[task.instance_id].verdict,
             "reasons_before": done[task.instance_id].reasons, "wall_before_s": done[task.instance_id].wall_s,
             "verdict_after": after[task.instance_id].verdict, "reasons_after": after[task.instance_id].reasons,
             "wall_after_s": after[task.instance_id].wall_s,
             "rewards_before": [rollout.reward for rollout in done[task.instance_id].rollouts],
             "rewards_after": [rollout.reward for rollout in after[task.instance_id].rollouts]} for task in tasks]


def task_rows(sample_dir: Path) -> list[dict]:
    """One row per sampled task: its year, the env it got (rung, Python and why, date pin), its
    verdict and reasons, and where its validation's time went."""
    from repo2env.validate.run import read_records

    records = {record.instance_id: record for record in read_records(sample_dir / "validation.jsonl")}
    rows = []
    for task in read_tasks(sample_dir / "tasks.jsonl"):
        spec = task.env_spec
        record = records.get(task.instance_id)
        row = {"instance_id": task.instance_id, "year": task.created_at[:4],
               "env": spec.status if spec else "not built", "rung": spec.rung if spec else None,
               "python": spec.python if spec else None, "python_reason": spec.python_reason if spec else None,
               # What the tests run on: a JavaScript task's Python is only the Node base's system one.
               "runtime": (f"Node {spec.node}" if spec.node else f"Python {spec.python}") if spec else None,
               "date_pin": spec.date_pin if spec else None, "env_error": spec.error if spec else None}
        if record is not None:
            row.update({"verdict": record.verdict, "reasons": record.reasons, "wall_s": record.wall_s,
                        "tests_s": record.tests_s, "phases": record.phases,
                        "one_run_s": record.one_run_s})
        rows.append(row)
    return rows


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
              f"{row['env_built']}/{len(row['sample'])} on {row.get('env_images', '?')} env images in {row['build_s']} s; "
              f"failures {row['env_failed'] or 'none'}")
    if "accepted" in row:
        print(f"[{row['repo']}]   accepted {row['accepted']}/{len(row['sample'])} in {row['validate_s']} s; "
              f"rejections {row['rejections'] or 'none'}")


def print_comparison(rows: list[dict]) -> list[Figure]:
    """Today's validation against validation as before, on the same tasks: verdicts and wall time."""
    compared = [entry for row in rows for entry in row.get("compared", [])]
    if not compared:
        return []
    changed = [entry for entry in compared if (entry["verdict_before"], sorted(entry["reasons_before"]))
               != (entry["verdict_after"], sorted(entry["reasons_after"]))]
    before, after = sum(entry["wall_before_s"] for entry in compared), sum(entry["wall_after_s"] for entry in compared)
    print(f"[compare] {len(compared)} tasks validated both ways: same verdicts {len(compared) - len(changed)}/"
          f"{len(compared)}; wall time {before:.0f} s before, {after:.0f} s now ({after / before:.0%})")
    for entry in changed:
        print(f"[compare]   {entry['instance_id']}: {entry['verdict_before']} {entry['reasons_before']} -> "
              f"{entry['verdict_after']} {entry['reasons_after']}")
    return [Figure(f"same verdicts as validation before ({len(compared) - len(changed)} of {len(compared)})",
                   round((len(compared) - len(changed)) / len(compared) * 100), "%", "== 100"),
            Figure("validation wall time against before", round(after / before * 100) if before else 0, "%")]


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


def print_years(rows: list[dict]) -> None:
    """Per year over every repository: env built, rungs, runtimes (Python or Node), accepted, and the
    reasons for the rest."""
    tasks = [task for row in rows for task in row.get("tasks", [])]
    for year in sorted({task["year"] for task in tasks}):
        of_year = [task for task in tasks if task["year"] == year]
        built = [task for task in of_year if task["env"] == "env_ok"]
        validated = [task for task in of_year if "verdict" in task]
        accepted = sum(task["verdict"] == "accepted" for task in validated)
        reasons = Counter(reason for task in validated for reason in task["reasons"])
        print(f"[{year}] env built {len(built)}/{len(of_year)}; rungs {dict(Counter(t['rung'] for t in built))}; "
              f"runtimes {dict(sorted(Counter(t.get('runtime') or 'Python ' + str(t['python']) for t in built).items()))}"
              + (f"; accepted {accepted}/{len(validated)}; rejections {dict(reasons) or 'none'}" if validated else ""))
        for task in of_year:
            if task["env"] != "env_ok":
                print(f"[{year}]   {task['instance_id']}: {task['env']} ({(task['env_error'] or '')[:160]})")


def print_throughput(rows: list[dict]) -> list[Figure]:
    """Where validation's time went, and its wall time against one run of the task's own tests."""
    timed = [task for row in rows for task in row.get("tasks", []) if task.get("one_run_s") and task.get("wall_s")]
    if not timed:
        return []
    ratios = sorted(task["wall_s"] / task["one_run_s"] for task in timed)
    cores = os.cpu_count() or 1
    core_s = sum(task["wall_s"] * cores for task in timed)
    print(f"[throughput] {len(timed)} tasks validated: wall / one run of the task's tests, median "
          f"{statistics.median(ratios):.1f}x (target <= 4x); {3600 * len(timed) / core_s:.1f} tasks per core-hour")
    figures = [Figure(f"validation wall time / one run of the task's tests, median of {len(timed)}",
                      round(statistics.median(ratios), 1), "x", "<= 4"),
               Figure("validated tasks per core-hour", round(3600 * len(timed) / core_s, 1), "tasks")]
    fast = [task for task in timed if task["one_run_s"] <= 10]
    if fast:
        fast_core_s = sum(task["wall_s"] * cores for task in fast)
        print(f"[throughput] {len(fast)} tasks whose tests run in <= 10 s: {3600 * len(fast) / fast_core_s:.1f} "
              f"tasks per core-hour (target >= 60)")
        figures.append(Figure(f"validated tasks per core-hour, tests <= 10 s ({len(fast)} tasks)",
                              round(3600 * len(fast) / fast_core_s, 1), "tasks", ">= 60"))
    phases: Counter[str] = Counter()
    for task in timed:
        phases.update(task.get("phases") or {})
    total = sum(phases.values()) or 1.0
    print("[throughput] time by phase (sum over tasks): "
          + ", ".join(f"{name} {seconds:.0f} s ({seconds / total:.0%})" for name, seconds in phases.most_common()))
    figures += print_floor(rows, cores)
    return figures + print_cpu(rows)


def print_floor(rows: list[dict], cores: int) -> list[Figure]:
    """The least the ratio can be under the policy on this machine before any variant is graded:
    derivation's runs before and after the fix plus the gold gradings, each at least one run of the
    task's tests, spread perfectly over the cores (mocha and ``node --test`` tasks run the fixed
    state 12 times: more)."""
    runs = {(row["policy_runs"]["reruns"], row["policy_runs"]["gold_runs"]) for row in rows if row.get("policy_runs")}
    if len(runs) != 1:
        return []
    ((reruns, gold_runs),) = runs
    floor = (2 * reruns + gold_runs) / cores
    print(f"[throughput] the ratio's floor under this policy: {2 * reruns} derivation runs and {gold_runs} gold "
          f"gradings on {cores} cores = {floor:.1f}x, before the null, partial, near-miss and stub gradings")
    return [Figure(f"the ratio's floor: {2 * reruns} derivation runs + {gold_runs} gold gradings on {cores} cores",
                   round(floor, 1), "x")]


def print_cpu(rows: list[dict]) -> list[Figure]:
    """Where validation's CPU went, over every repository: the tests in the sandboxes, repo2env on
    the host (this process), the engine and the rest (``cpu_use``)."""
    measured = [CpuUse.from_dict(row["validate_cpu"]) for row in rows if row.get("validate_cpu")]
    if not measured:
        return []
    total = measured[0]
    for use in measured[1:]:
        total = total.plus(use)
    shares = total.shares()
    if shares is None:
        print(f"[cpu] validation: repo2env {total.own_s:.0f} core-s; the sandboxes' share is not measured here")
        return []
    print(f"[cpu] validation kept the machine busy {total.busy_s:.0f} core-s: the tests in the sandboxes "
          f"{shares['sandboxes']:.0%}, repo2env on the host {shares['own']:.0%}, the container engine and the rest "
          f"{shares['rest']:.0%}")
    return [Figure(f"validation CPU in the sandboxes (the tests), of {total.busy_s:.0f} core-s busy",
                   round(shares["sandboxes"] * 100), "%"),
            Figure("validation CPU of repo2env on the host", round(shares["own"] * 100), "%"),
            Figure("validation CPU of the container engine and the rest", round(shares["rest"] * 100), "%")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-repo", type=int, default=8)
    parser.add_argument("--per-year", type=int, default=0, help="up to N PRs of every year instead of --per-repo")
    parser.add_argument("--years", default=f"{YEARS.start}-{YEARS.stop - 1}", help="e.g. 2016-2020")
    parser.add_argument("--validate-jobs", type=int, default=1, help="tasks validated at once")
    parser.add_argument("--grading-jobs", default=None, metavar="N|auto",
                        help="the policy's grading_jobs (gradings of one task at once) [default: the default policy's]")
    parser.add_argument("--policy", default="default", metavar="NAME|FILE",
                        help="the acceptance policy validation runs (validators/NAME.yaml or a file) [default: default]")
    parser.add_argument("--compare", type=int, default=0, metavar="N",
                        help="validate N tasks per repository again as before (every rollout in full, one at a time) "
                             "and compare verdicts and wall times")
    parser.add_argument("--only", default="", help="comma-separated name fragments (e.g. click,attrs)")
    parser.add_argument("--out", type=Path, default=PROJECT / "generated" / "bench-real")
    parser.add_argument("--no-build", action="store_true", help="mining figures only")
    parser.add_argument("--no-validate", action="store_true")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--backend", help="the container backend (docker, podman) [default: $REPO2ENV_BACKEND, else docker]")
    args = parser.parse_args()
    first, _, last = args.years.partition("-")
    years = range(int(first), int(last or first) + 1)
    repositories = [(name, clone) for name, clone in find_repositories()
                    if not args.only or any(part and part in name for part in args.only.split(","))]
    if not repositories:
        print("no development repository found (set REPO2ENV_REAL_REPOS_DIR or REPO2ENV_REAL_REPOS); skipped")
        return
    runtime = None
    if not args.no_build:
        from repo2env.runtime.backends import open_backend

        runtime = open_backend(args.backend)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, clone in repositories:
        row = bench_repository(name, clone, args.out, per_repo=args.per_repo, validate=not args.no_validate,
                               jobs=args.jobs, runtime=runtime, years=years, per_year=args.per_year,
                               validate_jobs=args.validate_jobs, compare=args.compare, grading_jobs=args.grading_jobs,
                               policy_name=args.policy)
        print_row(row)
        sys.stdout.flush()
        rows.append(row)
        (args.out / "results.json").write_text(json.dumps(rows, indent=2) + "\n")
    figures = print_overall(rows)
    print_years(rows)
    figures += print_throughput(rows)
    figures += print_comparison(rows)
    sample = f"{args.per_year} PRs a year" if args.per_year else f"{args.per_repo} PRs each"
    jobs = f", grading_jobs {args.grading_jobs}" if args.grading_jobs is not None else ""
    jobs += f", policy {args.policy}" if args.policy != "default" else ""
    record("real_repos", figures, note=f"{len(rows)} repositories, {sample}, {years.start}-{years.stop - 1}{jobs}"
           + ("" if runtime is not None and not args.no_validate else ", not validated"))


if __name__ == "__main__":
    main()
