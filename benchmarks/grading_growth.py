"""The grading overhead of this tree against an earlier revision's, on the same machine, at once.

The grader round (issue 18) may make a grading's overhead over the bare tests grow by at most 20 %.
An overhead measured on another day or machine is no baseline (a container's start alone moves by
a tenth of a second with the load), so this script measures both: it builds the demo's tasks with
this tree, checks out the baseline revision (``--baseline``, default: main before the grader round)
in a scratch worktree, and grades the same tasks' gold patches with each tree's own Grader in
alternating child processes (same images, same load), ``--rounds`` times. A child measures, per
task, the median of three bare runs of the task's tests in a started sandbox and of three cold
gradings (a fresh sandbox each), as ``benchmarks/grading.py`` does; the figure is the median over
the tasks, then over the rounds.

    python benchmarks/grading_growth.py [--baseline REV] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: main just before the grader round (issue 18) was merged.
BASELINE = "403b047"
GROWTH_TARGET = 0.20
REPEATS = 3


def child(tasks_path: Path, truth_path: Path, logs: Path) -> None:
    """One tree's measurement (run with that tree first on sys.path): prints the median overhead."""
    from bare_run import bare_seconds

    from repo2env.jsonl import read_tasks
    from repo2env.runtime.backends import open_backend
    from repo2env.verify.grader import Grader

    runtime = open_backend()
    truth = json.loads(truth_path.read_text())
    grader = Grader(runtime, logs, timeout_s=300)
    overheads = []
    for task in read_tasks(tasks_path):
        f2p, p2p = truth[str(task.pull_number)]
        task = task.model_copy(update={"FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p})
        bare = bare_seconds(runtime, task, REPEATS)
        cold = []
        for _ in range(REPEATS):
            began = time.perf_counter()
            result = grader.grade(task, task.patch)
            cold.append(time.perf_counter() - began)
            assert result.reward == 1.0, result
            time.sleep(0.3)
        overheads.append(statistics.median(cold) - bare)
    print(json.dumps({"overhead": statistics.median(overheads)}))


def _rows_for(tree: Path, tasks_path: Path, out: Path) -> None:
    """The tasks file as ``tree``'s Task model reads it (fields it does not know left out)."""
    program = ("import json; from repo2env.models import Task, EnvSpec; "
               "print(json.dumps([list(Task.model_fields), list(EnvSpec.model_fields)]))")
    known = subprocess.run([sys.executable, "-c", program], env={**os.environ, "PYTHONPATH": str(tree)},
                           capture_output=True, text=True, check=True, cwd=tree)
    task_fields, env_fields = json.loads(known.stdout)
    rows = []
    for line in tasks_path.read_text().splitlines():
        row = {key: value for key, value in json.loads(line).items() if key in task_fields}
        if row.get("env_spec"):
            row["env_spec"] = {key: value for key, value in row["env_spec"].items() if key in env_fields}
        rows.append(json.dumps(row))
    out.write_text("".join(row + "\n" for row in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=BASELINE, help="the revision to compare with (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=3, metavar=("TASKS", "TRUTH", "LOGS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*(Path(value) for value in args.child))
        return

    sys.path.insert(0, str(HERE))
    from demo_tasks import built_demo_tasks
    from results import Figure, record

    from repo2env.runtime.backends import open_backend

    with tempfile.TemporaryDirectory(prefix="repo2env-bench-growth-") as scratch:
        root = Path(scratch)
        demo, tasks_dir, _ = built_demo_tasks(root, open_backend())
        truth = root / "truth.json"
        truth.write_text(json.dumps({pull.number: [list(pull.fail_to_pass), list(pull.pass_to_pass)]
                                     for pull in demo.pulls}))
        baseline_tree = root / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(baseline_tree), args.baseline],
                       check=True, capture_output=True)
        try:
            trees = {"baseline": baseline_tree, "this tree": ROOT}
            for name, tree in trees.items():
                _rows_for(tree, tasks_dir / "tasks.jsonl", root / f"{name}.jsonl")
            figures: dict[str, list[float]] = {name: [] for name in trees}
            for round_number in range(args.rounds):
                for name, tree in trees.items():
                    done = subprocess.run(
                        [sys.executable, str(Path(__file__).resolve()), "--child", str(root / f"{name}.jsonl"),
                         str(truth), str(root / "logs" / name)],
                        env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True, cwd=tree)
                    if done.returncode:
                        sys.exit(f"{name}: the measurement failed:\n{done.stderr[-3000:]}")
                    figures[name].append(json.loads(done.stdout.strip().splitlines()[-1])["overhead"])
                    print(f"round {round_number + 1}: {name} median overhead {figures[name][-1]:.3f} s", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline_tree)],
                           capture_output=True)
        before, after = (statistics.median(figures[name]) for name in trees)
        growth = after / before - 1
        print(f"median cold overhead: {before:.3f} s at {args.baseline}, {after:.3f} s in this tree "
              f"({growth:+.0%}, target <= +{GROWTH_TARGET:.0%})")
        record("grading_growth", [
            Figure(f"median grading overhead at {args.baseline} (cold)", round(before, 3), "s"),
            Figure("median grading overhead in this tree (cold)", round(after, 3), "s"),
            Figure("growth of the overhead", round(100 * growth, 1), "%", f"<= {100 * GROWTH_TARGET:.0f}"),
        ])


if __name__ == "__main__":
    main()
