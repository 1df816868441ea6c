"""Grading cost against the bare cost of the same tests, per demo task.

Target (issue: hidden verifier): grading <= 1.3 x the bare test time + 0.5 s, where "bare" is
running the same test ids in an already running sandbox that already has the gold patch and the
tests applied. Grading = fresh sandbox + filter/apply/restore + hidden tests + reading JUnit.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from repo2env.jsonl import read_tasks
from repo2env.runtime.backends import open_backend
from repo2env.verify.grader import Grader

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bare_run import bare_seconds  # noqa: E402
from demo_tasks import built_demo_tasks  # noqa: E402
from results import Figure, record  # noqa: E402

REPEATS = 3
#: The grader round's limit (issue 18): the median cold overhead on the demo was +0.42 s before it,
#: and may grow by at most 20 %. An overhead from another day is a loose baseline (a container's
#: start alone moves with the load): benchmarks/grading_growth.py measures the growth against the
#: revision before the round, both at once.
OVERHEAD_TARGET_S = 0.5


def main() -> None:
    runtime = open_backend()  # REPO2ENV_BACKEND, else docker
    with tempfile.TemporaryDirectory(prefix="repo2env-bench-grade-") as scratch:
        root = Path(scratch)
        demo, tasks_dir, _ = built_demo_tasks(root, runtime)
        truth = {pull.number: pull for pull in demo.pulls}
        grader = Grader(runtime, root / "logs", timeout_s=300)
        warm_grader = Grader(runtime, root / "logs", timeout_s=300, keep_warm=True)
        rows = []
        for task in read_tasks(tasks_dir / "tasks.jsonl"):
            task = task.model_copy(update={"FAIL_TO_PASS": list(truth[task.pull_number].fail_to_pass),
                                           "PASS_TO_PASS": list(truth[task.pull_number].pass_to_pass)})
            bare_s = bare_seconds(runtime, task, REPEATS)
            cold, warm = [], []
            for _ in range(REPEATS):
                for timings, which in ((cold, grader), (warm, warm_grader)):
                    began = time.perf_counter()
                    result = which.grade(task, task.patch)
                    timings.append(time.perf_counter() - began)
                    assert result.reward == 1.0, result
                    time.sleep(0.5)  # let the spare come up, as between an agent's rollouts
            warm = warm[1:]  # the first warm grading had no spare yet
            grade_s, warm_s = statistics.median(cold), statistics.median(warm)
            budget = 1.3 * bare_s + 0.5
            rows.append((task.instance_id, bare_s, grade_s, budget))
            print(f"{task.instance_id}: bare {bare_s:.2f} s, grading {grade_s:.2f} s cold / {warm_s:.2f} s with a "
                  f"warm spare, budget {budget:.2f} s ({'ok' if grade_s <= budget else 'OVER'} cold)")
        warm_grader.close()
        over = sum(grade > budget for _, _, grade, budget in rows)
        overhead = statistics.median(grade - bare for _, bare, grade, _ in rows)
        print(f"grading (cold): median overhead over bare tests {overhead:.2f} s; {len(rows) - over}/{len(rows)} "
              f"tasks within 1.3 x bare + 0.5 s")
        record("grading", [Figure("median grading overhead over the bare tests (cold)", round(overhead, 2), "s",
                                  f"<= {OVERHEAD_TARGET_S}"),
                           Figure("tasks graded within 1.3 x bare + 0.5 s (cold)", len(rows) - over, f"of {len(rows)}",
                                  f">= {len(rows)}"),
                           *[Figure(f"{instance_id}: grading (cold)", round(grade, 2), "s", f"<= {budget:.2f}")
                             for instance_id, _, grade, budget in rows]])


if __name__ == "__main__":
    main()
