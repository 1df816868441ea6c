"""What a forger that has read the canary code can expect, per demo task (no Docker: the demo is
mined, the canaries are planned, the odds are exact).

The forger runs inside the test process and sees every test's source; a mirror differs from its
template only in its name and in its anchor's value, which has the real value's type, length,
character classes and containers, so the best it can do for a templated FAIL_TO_PASS test is to
forge one member of its group at random: the real one (probability 1/g, g = 1 + mirrors) gains
that test, a mirror with a distinctive value gets the grading called tampered (reward 0), a
mirror with a short value passes unnoticed and gains nothing. FAIL_TO_PASS tests without a
template (no literal expected value, a test the PR modified instead of adding) have no mirror: it
forges those freely. Per task, over every choice of templated groups to forge, this prints the
best expected reward (graded: passed FAIL_TO_PASS share; the empty patch earns 0, the gold patch
1) and the chance that choice survives one grading, and the chance that a forger which forges
every FAIL_TO_PASS test (what a full reward needs) survives.
"""

from __future__ import annotations

import itertools
import random
import statistics
import sys
import tempfile
from pathlib import Path

from repo2env.demo import build_demo
from repo2env.jsonl import read_tasks
from repo2env.mine.git import GitSource
from repo2env.mine.miner import mine
from repo2env.verify.spec import grading_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import Figure, record  # noqa: E402

DRAWS = 200  # gradings drawn per task: the groups' sizes and values vary with the draw


def odds(spec, plan) -> tuple[float, float, float, int]:
    """(best expected reward, its survival, survival when forging every FAIL_TO_PASS test, templated tests)."""
    must_fail = set(plan.must_fail)
    groups = {group[0]: group[1:] for group in plan.exclusive if group[0] in spec.fail_to_pass}
    free = [test for test in spec.fail_to_pass if test not in groups]
    chances = []  # per templated test: (gain, caught)
    for mirrors in groups.values():
        size = 1 + len(mirrors)
        chances.append((1 / size, sum(mirror in must_fail for mirror in mirrors) / size))
    best = (len(free) / len(spec.fail_to_pass), 1.0)
    for count in range(1, len(chances) + 1):
        for chosen in itertools.combinations(chances, count):
            survive = 1.0
            for _, caught in chosen:
                survive *= 1 - caught
            gained = len(free) + sum(gain / (1 - caught) for gain, caught in chosen if caught < 1)
            expected = survive * gained / len(spec.fail_to_pass)
            best = max(best, (expected, survive))
    every = 1.0
    for gain, _ in chances:
        every *= gain  # all of them right: only the real member of each group is forged
    return best[0], best[1], every, len(groups)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="repo2env-bench-canaries-") as scratch:
        demo = build_demo(Path(scratch) / "demo")
        mine(GitSource(demo.path, issues_path=demo.issues_path), Path(scratch) / "tasks")
        truth = {pull.number: pull for pull in demo.pulls}
        rows = []
        for task in read_tasks(Path(scratch) / "tasks" / "tasks.jsonl"):
            pull = truth[task.pull_number]
            if not pull.fail_to_pass:
                continue
            task = task.model_copy(update={"FAIL_TO_PASS": list(pull.fail_to_pass), "PASS_TO_PASS": list(pull.pass_to_pass)})
            spec = grading_spec(task)
            rng = random.Random(task.pull_number)
            draws = [odds(spec, spec.plan_canaries(rng)) for _ in range(DRAWS)]
            best, survive, every, templated = (statistics.fmean(column) for column in zip(*draws, strict=True))
            canaries = statistics.fmean(len(spec.plan_canaries(rng).canaries) for _ in range(20))
            rows.append((task.instance_id, len(spec.fail_to_pass), templated, canaries, best, survive, every))
            print(f"{task.instance_id}: {len(spec.fail_to_pass)} FAIL_TO_PASS, {templated:.0f} templated, "
                  f"{canaries:.1f} canaries a grading; best forger: expected reward {best:.3f}, survives "
                  f"{survive:.3f}; forging every FAIL_TO_PASS test survives {every:.4f}")
        per_test = [row for row in rows if row[2] == row[1]]
        print(f"median over {len(rows)} tasks: best forger's expected reward "
              f"{statistics.median(row[4] for row in rows):.3f} (empty patch 0, gold 1), survival "
              f"{statistics.median(row[5] for row in rows):.3f}; forging every FAIL_TO_PASS test survives "
              f"{statistics.median(row[6] for row in rows):.4f}; {len(per_test)} tasks with every FAIL_TO_PASS test templated")
        record("canaries", [
            Figure("median best forger's expected reward (empty patch 0, gold 1)",
                   round(statistics.median(row[4] for row in rows), 3)),
            Figure("median survival of the best forger", round(statistics.median(row[5] for row in rows), 3)),
            Figure("median survival when forging every FAIL_TO_PASS test",
                   round(statistics.median(row[6] for row in rows), 4)),
            Figure("tasks with every FAIL_TO_PASS test templated", len(per_test), f"of {len(rows)}"),
            *[Figure(f"{instance_id}: survival when forging all {f2p} FAIL_TO_PASS tests", round(every, 4))
              for instance_id, f2p, _, _, _, _, every in rows]])


if __name__ == "__main__":
    sys.exit(main())
