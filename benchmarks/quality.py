"""Task quality on the development repositories (issue 24): how many tasks need an Interface
section, how many the policies reject for their quality, the adequacy and specification
distributions, and for a sample the instruction before and after.

Two passes, over the development repositories found locally (``owner+name/repo`` under
``REPO2ENV_REAL_REPOS_DIR``, default ``../.mirror`` beside the project):

1. **Validated tasks** (``--from DIR``, repeatable: folders holding a ``tasks.jsonl`` that
   ``repo2env validate`` or ``benchmarks/real_repos.py`` wrote, searched below): the whole quality
   block from each task's own reference rollouts, and the verdict again under the default and
   strict policies. Validation before this issue ran no "gold minus one hunk" rollouts beyond the
   partial fixes that happen to be one; ``--grade-drops`` grades the missing ones on the task images
   (Docker; the images those runs built must still exist), as validation now does.
2. **Mined candidates** (mined here offline, ``--per-repo`` of them spread over each history): the
   static signals only (interface, string-only tests, specification), with FAIL_TO_PASS taken as
   the test functions the test patch adds or changes, since nothing ran.

The files are read from the clones (``git archive`` at the base commit into a temporary folder,
then ``git apply`` of the patches there); nothing is checked out or written in a clone. Prints
tables and writes ``results.json`` (and the sample instructions) to ``--out``. Nothing here is a
test: with no repository found it says so and exits 0.

    python benchmarks/quality.py [--from DIR ...] [--grade-drops] [--per-repo 40] [--out generated/bench-quality]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from repo2env import pysyntax
from repo2env.instruction import instruction_text
from repo2env.jsonl import iter_tasks
from repo2env.languages.python.variants.base import ChangedLines
from repo2env.mine.git import GitSource
from repo2env.mine.miner import MineOptions, mine
from repo2env.models import EnvSpec, GradeResult, RolloutResult, Task, ValidationReport
from repo2env.patches import parse
from repo2env.validate.acceptance import load_acceptance_policy, quality_reasons
from repo2env.validate.quality import TaskSources, assess, find_interface
from repo2env.validate.run import interface_action

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT / "benchmarks"))
from results import Figure, record  # noqa: E402


def find_clones() -> dict[str, Path]:
    """owner/name -> git dir of every development repository present here."""
    root = Path(os.environ.get("REPO2ENV_REAL_REPOS_DIR", PROJECT.parent / ".mirror"))
    clones = {}
    for path in sorted(root.glob("*")) if root.is_dir() else []:
        clone = path / "repo" if (path / "repo").is_dir() else path
        if (clone / "HEAD").is_file() or (clone / ".git").exists():
            clones[path.name.replace("+", "/", 1)] = clone
    return clones


# --- reading a task's files from its clone ----------------------------------------------------


def task_sources(clone: Path, task: Task) -> TaskSources:
    """The fix's .py files before and after it and the test patch's .py files after it, from the
    clone at the base commit with the patches applied in a temporary folder."""
    fix_files, test_files = parse(task.patch).files, parse(task.test_patch).files
    fix_paths = [file.path for file in fix_files if file.path.endswith(".py")]
    test_paths = [file.path for file in test_files if file.path.endswith(".py") and not file.is_deleted]
    with tempfile.TemporaryDirectory(prefix="repo2env-quality-") as folder:
        root = Path(folder)
        # Every file either patch touches (by either name), so that both apply.
        touched = {path for file in (*fix_files, *test_files) for path in file.paths}
        _extract(clone, task.base_commit, sorted(touched), root)
        before = _read(root, fix_paths)
        for patch in (task.patch, task.test_patch):
            subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], input=patch.encode(), cwd=root,
                           capture_output=True, check=True)
        return TaskSources(before, _read(root, fix_paths), _read(root, test_paths))


def test_files_before(clone: Path, task: Task) -> dict[str, str]:
    paths = [file.path for file in parse(task.test_patch).files if file.path.endswith(".py")]
    with tempfile.TemporaryDirectory(prefix="repo2env-quality-") as folder:
        _extract(clone, task.base_commit, paths, Path(folder))
        return _read(Path(folder), paths)


def _extract(clone: Path, commit: str, paths: list[str], root: Path) -> None:
    listed = subprocess.run(["git", "-C", str(clone), "ls-tree", "-r", "--name-only", commit, "--", *paths],
                            capture_output=True, text=True, check=True).stdout.split("\n")
    listed = [path for path in listed if path]
    if listed:
        archive = subprocess.run(["git", "-C", str(clone), "archive", commit, "--", *listed], capture_output=True,
                                 check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)


def _read(root: Path, paths: list[str]) -> dict[str, str]:
    return {path: (root / path).read_text(encoding="utf-8", errors="replace") for path in paths
            if (root / path).is_file()}


def changed_tests(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Test ids of the test functions (``test_*``, in ``Test*`` classes too) that the test patch adds
    or changes: the stand-in for FAIL_TO_PASS when nothing ran."""
    ids = []
    for path, text in sorted(after.items()):
        try:
            tree = pysyntax.parse(text)
        except SyntaxError:
            continue
        changed = ChangedLines.between(before.get(path, ""), text).lines
        for node in tree.body:
            members = [(node, "")] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                members = [(member, f"{node.name}::") for member in node.body
                           if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for function, prefix in members:
                if function.name.startswith("test") and changed & set(range(function.lineno, function.end_lineno + 1)):
                    ids.append(f"{path}::{prefix}{function.name}")
    return ids


# --- reading tasks written by other versions ------------------------------------------------


def lenient_tasks(path: Path) -> list[Task]:
    """The tasks of a tasks.jsonl, fields this version does not know dropped (a run of another
    branch may have written more)."""
    try:
        return list(iter_tasks(path))
    except Exception:  # noqa: BLE001 - a newer schema: read what this one knows
        pass
    tasks = []
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            tasks.append(Task.model_validate(_known(Task, row)))
    return tasks


_NESTED = {("Task", "env_spec"): EnvSpec, ("Task", "validation"): ValidationReport,
           ("RolloutResult", "grade"): GradeResult}


def _known(model: Any, row: dict) -> dict:
    kept = {key: value for key, value in row.items() if key in model.model_fields}
    for (owner, key), nested in _NESTED.items():
        if owner == model.__name__ and isinstance(kept.get(key), dict):
            kept[key] = _known(nested, kept[key])
    if model is ValidationReport and isinstance(kept.get("rollouts"), list):
        kept["rollouts"] = [_known(RolloutResult, rollout) for rollout in kept["rollouts"]]
    return kept


# --- the passes -------------------------------------------------------------------------------


def validated_pass(folders: list[Path], clones: dict[str, Path], *, grade_drops: bool, logs: Path,
                   backend: str | None = None) -> list[dict]:
    results = []
    default, strict = load_acceptance_policy("default"), load_acceptance_policy("strict")
    grader = _grader(logs, backend) if grade_drops else None
    for path in sorted({path for folder in folders for path in folder.rglob("tasks.jsonl")}):
        for task in lenient_tasks(path):
            report = task.validation
            if report is None or report.verdict == "pending" or not task.FAIL_TO_PASS or task.repo not in clones:
                continue
            began = time.monotonic()
            sources = task_sources(clones[task.repo], task)
            interface = find_interface(task, sources, task.FAIL_TO_PASS)
            rollouts = list(report.rollouts)
            graded, drop_error = 0, None
            if grader is not None and report.verdict == "accepted":
                extra, drop_error = _drop_rollouts(grader, task, rollouts, default.hunk_drop_limit, logs.parent)
                graded, rollouts = len(extra), rollouts + extra
            quality = assess(task, sources=sources, tests=task.FAIL_TO_PASS, rollouts=rollouts, interface=interface,
                             interface_action=interface_action(default, interface))
            results.append({
                "instance_id": task.instance_id, "repo": task.repo, "verdict_before": report.verdict,
                "reasons_before": report.reasons, "quality": quality.model_dump(mode="json"),
                "default_reasons": quality_reasons(default, quality), "strict_reasons": quality_reasons(strict, quality),
                "drops_graded": graded, "drops_error": drop_error, "seconds": round(time.monotonic() - began, 2),
                "instruction_before": instruction_text(task),
                "instruction_after": instruction_text(task.model_copy(update={"interface": interface.section})),
            })
            print(f"  {task.instance_id}: {report.verdict}, interface {len(quality.interface)}, adequacy "
                  f"{quality.adequacy}, spec {quality.specification}, untested hunks {quality.untested_hunks}"
                  f"/{quality.hunk_drops} ({graded} graded now)", flush=True)
    return results


def _grader(logs: Path, backend: str | None = None):
    import dataclasses

    from repo2env.runtime.backend import BackendSettings
    from repo2env.runtime.backends import open_backend
    from repo2env.verify.grader import Grader

    # An engine shared by several runs answers slowly (docker: the client's timeout of every request).
    settings = dataclasses.replace(BackendSettings.from_environment(), connect_timeout_s=120)
    return Grader(open_backend(backend, settings), logs, timeout_s=600, keep_warm=False)


def _drop_rollouts(grader, task: Task, rollouts: list[RolloutResult], limit: int,
                   out: Path) -> tuple[list[RolloutResult], str | None]:
    """The gold-minus-one-hunk rollouts validation did not run, graded as validation grades them
    (kept in ``out/drops.jsonl``, so a re-run grades only what is missing); and why grading
    stopped, if it did (the task image is gone, say)."""
    from repo2env.errors import Repo2EnvError
    from repo2env.languages.variants import hunk_drops

    store = out / "drops.jsonl"
    known = {}
    if store.is_file():
        for line in store.read_text().splitlines():
            entry = json.loads(line)
            known[(entry["instance_id"], entry["rollout"]["name"])] = RolloutResult.model_validate(entry["rollout"])
    done = {rollout.name for rollout in rollouts if rollout.kind == "partial"}
    extra = []
    for variant in hunk_drops(task.patch, limit=limit, skip=done):
        rollout = known.get((task.instance_id, variant.name))
        if rollout is None:
            try:
                result = grader.grade(task, variant.patch, run_name=variant.name)
            except Repo2EnvError as exc:
                return extra, exc.message
            rollout = RolloutResult(kind="partial", name=variant.name, reward=result.reward, resolved=result.resolved,
                                    grade=result.model_copy(update={"tests": {}}))
            with store.open("a") as handle:
                handle.write(json.dumps({"instance_id": task.instance_id, "rollout": rollout.model_dump(mode="json")})
                             + "\n")
        extra.append(rollout)
    return extra, None


def static_pass(clones: dict[str, Path], out: Path, per_repo: int) -> list[dict]:
    results = []
    for repo, clone in clones.items():
        mined = out / "mined" / repo.replace("/", "__")
        if not (mined / "tasks.jsonl").is_file():
            mine(GitSource(clone, repo=repo), mined, MineOptions(allow_no_issue=True))
        tasks = [task for task in lenient_tasks(mined / "tasks.jsonl")
                 if any(file.path.endswith(".py") for file in parse(task.patch).files)] \
            if (mined / "tasks.jsonl").is_file() else []
        step = max(1, len(tasks) // per_repo) if per_repo else 1
        sample = tasks[::step][:per_repo] if per_repo else tasks
        print(f"{repo}: {len(sample)} of {len(tasks)} mined Python candidates", flush=True)
        for task in sample:
            try:
                sources = task_sources(clone, task)
            except subprocess.CalledProcessError:
                continue  # a patch that does not apply at its base commit here
            tests = changed_tests(test_files_before(clone, task), dict(sources.test_files))
            if not tests:
                continue
            task = task.model_copy(update={"FAIL_TO_PASS": tests})
            interface = find_interface(task, sources, tests)
            quality = assess(task, sources=sources, tests=tests, rollouts=[], interface=interface,
                             interface_action=interface_action(load_acceptance_policy("default"), interface))
            results.append({"instance_id": task.instance_id, "repo": repo, "tests": len(tests),
                            "quality": quality.model_dump(mode="json"),
                            "instruction_after": instruction_text(task.model_copy(update={"interface": interface.section}))
                            if interface.section else ""})
    return results


# --- the report ---------------------------------------------------------------------------------


def _distribution(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    quartiles = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
    return (f"n={len(values)} min {ordered[0]:.2f} q1 {quartiles[0]:.2f} median {quartiles[1]:.2f} "
            f"q3 {quartiles[2]:.2f} max {ordered[-1]:.2f} mean {statistics.fmean(values):.2f}")


def _histogram(values: list[float]) -> str:
    counts = Counter(min(int(value * 10), 9) for value in values)
    return " ".join(f"[{bucket / 10:.1f},{(bucket + 1) / 10:.1f}{']' if bucket == 9 else ')'}:{counts.get(bucket, 0)}"
                    for bucket in range(10))


def report(validated: list[dict], static: list[dict]) -> dict:
    summary: dict[str, Any] = {}
    if validated:
        accepted = [entry for entry in validated if entry["verdict_before"] == "accepted"]
        with_interface = [entry for entry in accepted if entry["quality"]["interface"]]
        summary["validated"] = {
            "tasks": len(validated), "accepted_before": len(accepted),
            "accepted_with_interface_section": sum(entry["quality"]["interface_action"] == "instruction"
                                                   for entry in with_interface),
            "accepted_needing_interface": len(with_interface),
            "rejected_now_default": Counter(reason for entry in accepted for reason in entry["default_reasons"]),
            "rejected_tasks_default": sum(bool(entry["default_reasons"]) for entry in accepted),
            "rejected_now_strict": Counter(reason for entry in accepted for reason in entry["strict_reasons"]),
            "rejected_tasks_strict": sum(bool(entry["strict_reasons"]) for entry in accepted),
            "adequacy": _distribution([e["quality"]["adequacy"] for e in accepted if e["quality"]["adequacy"] is not None]),
            "adequacy_histogram": _histogram([e["quality"]["adequacy"] for e in accepted
                                              if e["quality"]["adequacy"] is not None]),
            "mutant_survival": _distribution([len(e["quality"]["surviving_mutants"]) / e["quality"]["mutants"]
                                              for e in accepted if e["quality"]["mutants"]]),
            "untested_hunk_share": _distribution([len(e["quality"]["untested_hunks"]) / e["quality"]["hunk_drops"]
                                                  for e in accepted if e["quality"]["hunk_drops"]]),
            "string_only_tests": sum(len(e["quality"]["string_only_tests"]) for e in accepted),
            "f2p_tests_read": sum(e["quality"]["asserting_tests"] for e in accepted),
            "specification": _distribution([e["quality"]["specification"] for e in accepted]),
            "drops_graded": sum(entry["drops_graded"] for entry in validated),
        }
    if static:
        summary["mined"] = {
            "tasks": len(static),
            "needing_interface": sum(bool(entry["quality"]["interface"]) for entry in static),
            "interface_kinds": Counter(name["kind"] for entry in static for name in entry["quality"]["interface"]),
            "with_string_only_tests": sum(bool(entry["quality"]["string_only_tests"]) for entry in static),
            "specification": _distribution([entry["quality"]["specification"] for entry in static]),
            "specification_histogram": _histogram([entry["quality"]["specification"] for entry in static]),
            "underspecified_default": sum(entry["quality"]["specification"] < load_acceptance_policy(
                "default").min_specification for entry in static),
            "per_repo": {repo: {"tasks": sum(e["repo"] == repo for e in static),
                                "needing_interface": sum(e["repo"] == repo and bool(e["quality"]["interface"])
                                                         for e in static)}
                         for repo in sorted({entry["repo"] for entry in static})},
        }
    return summary


def figures(summary: dict) -> list[Figure]:
    """The run's figures for ``benchmarks/results/quality.json``."""
    found = []
    validated, mined = summary.get("validated"), summary.get("mined")
    if validated:
        found += [Figure("validated tasks read", validated["tasks"]),
                  Figure("accepted before", validated["accepted_before"]),
                  Figure("accepted needing an Interface section", validated["accepted_needing_interface"]),
                  Figure("accepted now rejected (default policy)", validated["rejected_tasks_default"]),
                  Figure("accepted now rejected (strict policy)", validated["rejected_tasks_strict"]),
                  Figure("adequacy of the accepted", validated["adequacy"])]
    if mined:
        share = mined["needing_interface"] / mined["tasks"] if mined["tasks"] else 0.0
        found += [Figure("mined Python candidates read", mined["tasks"]),
                  Figure("mined candidates needing an Interface section", round(100 * share, 1), "%"),
                  Figure("mined candidates with string-only tests", mined["with_string_only_tests"]),
                  Figure("mined candidates below min_specification (default)", mined["underspecified_default"]),
                  Figure("specification of the mined", mined["specification"])]
    return found + [Figure("wall time", summary["seconds"], "s")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="folders", action="append", type=Path, default=[],
                        help="folders with validated tasks, searched below for tasks.jsonl (default: "
                             "generated/bench-real, benchmarks/real_repos.py's output, when it exists)")
    parser.add_argument("--grade-drops", action="store_true", help="grade the missing gold-minus-one-hunk rollouts")
    parser.add_argument("--per-repo", type=int, default=40, help="mined candidates per repository (0: all)")
    parser.add_argument("--no-static", action="store_true", help="skip the pass over mined candidates")
    parser.add_argument("--samples", type=int, default=4, help="instructions before/after to print")
    parser.add_argument("--backend", help="the container backend grading runs on (docker, podman) "
                                          "[default: $REPO2ENV_BACKEND, else docker]")
    parser.add_argument("--out", type=Path, default=PROJECT / "generated" / "bench-quality")
    args = parser.parse_args()
    clones = {repo: clone for repo, clone in find_clones().items()}
    if not clones:
        print("no development repository found (set REPO2ENV_REAL_REPOS_DIR)")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.folders and (PROJECT / "generated" / "bench-real").is_dir():
        args.folders = [PROJECT / "generated" / "bench-real"]
    began = time.monotonic()
    print(f"validated tasks under {', '.join(map(str, args.folders)) or '(no --from)'}", flush=True)
    validated = validated_pass(args.folders, clones, grade_drops=args.grade_drops, logs=args.out / "grades",
                               backend=args.backend)
    static = [] if args.no_static else static_pass(clones, args.out, args.per_repo)
    summary = report(validated, static)
    summary["seconds"] = round(time.monotonic() - began, 1)
    (args.out / "results.json").write_text(json.dumps({"summary": summary, "validated": validated, "mined": static},
                                                      indent=1, default=str) + "\n")
    print(json.dumps(summary, indent=1, default=str))
    samples = [entry for entry in validated if entry["quality"]["interface_action"] == "instruction"][:args.samples]
    samples += [entry for entry in static if entry["instruction_after"]][:max(0, args.samples - len(samples))]
    for entry in samples:
        print(f"\n=== {entry['instance_id']}: instruction after (the part that changed) ===")
        after = entry["instruction_after"]
        print(after[after.index("<interface>"):after.index("</interface>") + len("</interface>")])
    print(f"\nresults: {args.out / 'results.json'}")
    passes = [f"{len(validated)} validated tasks from {', '.join(folder.name for folder in args.folders)}"] if validated else []
    if not args.no_static:
        passes.append(f"mined candidates of {len(clones)} repositories, --per-repo {args.per_repo}")
    record("quality", figures(summary), note="; ".join(passes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
