"""``make demo`` keeps its rows and verdicts: the tasks it mines and publishes, and per task the
verdict, the reasons, FAIL_TO_PASS / PASS_TO_PASS, the flaky tests and every reference rollout's
reward (by kind and name) are the ones recorded in tests/data/demo_expected.json.

A change to any of them is either a regression or a deliberate change of behaviour: then the
expectation file is updated, with a line under ``changes`` saying what changed and why.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import DEMO_EXPECTED as EXPECTED  # noqa: I001 (tests/ is on sys.path)


def observed(demo_dir: Path) -> dict:
    """The demo's output in the expectation file's shape."""
    import pyarrow.parquet as pq

    def number(instance_id: str) -> int:
        return int(instance_id.rsplit("-", 1)[1])

    tasks_dir = demo_dir / "tasks"
    mined = [json.loads(line)["instance_id"] for line in (tasks_dir / "tasks.jsonl").read_text().splitlines()]
    published = [row["instance_id"] for path in sorted((demo_dir / "dataset" / "data").glob("*.parquet"))
                 for row in pq.read_table(path).to_pylist()]
    tasks = {}
    for line in (tasks_dir / "validation.jsonl").read_text().splitlines():
        record = json.loads(line)
        rewards: dict[str, dict[str, float]] = {}
        for rollout in record["rollouts"]:
            rewards.setdefault(rollout["kind"], {})[rollout["name"]] = rollout["reward"]
        tasks[record["instance_id"]] = {
            "verdict": record["verdict"], "reasons": record["reasons"],
            "FAIL_TO_PASS": sorted(record["FAIL_TO_PASS"]), "PASS_TO_PASS": sorted(record["PASS_TO_PASS"]),
            "flaky_tests": sorted(record["flaky_tests"]),
            "rewards": {kind: dict(sorted(values.items())) for kind, values in sorted(rewards.items())},
        }
    return {"mined": sorted(mined, key=number), "published": sorted(published, key=number),
            "tasks": dict(sorted(tasks.items(), key=lambda item: number(item[0])))}


def differences(expected: dict, found: dict) -> list[str]:
    """Every field that differs, one line each, named by task and field (rewards within 1e-6)."""
    lines = []
    for key in ("mined", "published"):
        if expected[key] != found[key]:
            lines.append(f"{key}: lost {sorted(set(expected[key]) - set(found[key]))}, "
                         f"new {sorted(set(found[key]) - set(expected[key]))}")
    for instance_id in sorted(set(expected["tasks"]) | set(found["tasks"])):
        want, got = expected["tasks"].get(instance_id), found["tasks"].get(instance_id)
        if want is None or got is None:
            lines.append(f"{instance_id}: {'not validated any more' if got is None else 'validated, not expected'}")
            continue
        for field in ("verdict", "reasons"):
            if want[field] != got[field]:
                lines.append(f"{instance_id}: {field} {want[field]!r} -> {got[field]!r}")
        for field in ("FAIL_TO_PASS", "PASS_TO_PASS", "flaky_tests"):
            lost, new = sorted(set(want[field]) - set(got[field])), sorted(set(got[field]) - set(want[field]))
            if lost or new:
                lines.append(f"{instance_id}: {field} lost {lost}, new {new}")
        for kind in sorted(set(want["rewards"]) | set(got["rewards"])):
            before, after = want["rewards"].get(kind, {}), got["rewards"].get(kind, {})
            for name in sorted(set(before) | set(after)):
                if name not in after or name not in before or not math.isclose(before[name], after[name], abs_tol=1e-6):
                    lines.append(f"{instance_id}: rewards.{kind}.{name} {before.get(name, 'absent')} -> "
                                 f"{after.get(name, 'absent')}")
    return lines


def test_the_comparison_names_each_changed_field():
    expected = json.loads(EXPECTED.read_text())
    changed = json.loads(json.dumps(expected))
    task = changed["tasks"]["repo2env-demo__textkit-8"]
    task["verdict"], task["reasons"] = "accepted", []
    task["rewards"]["stub"]["stub-list"] = 0.0
    task["FAIL_TO_PASS"] = task["FAIL_TO_PASS"][1:]
    changed["published"].append("repo2env-demo__textkit-8")
    assert differences(expected, expected) == []
    found = differences(expected, changed)
    dropped = expected["tasks"]["repo2env-demo__textkit-8"]["FAIL_TO_PASS"][0]
    assert found == [
        "published: lost [], new ['repo2env-demo__textkit-8']",
        "repo2env-demo__textkit-8: verdict 'rejected' -> 'accepted'",
        "repo2env-demo__textkit-8: reasons ['stub_passes'] -> []",
        f"repo2env-demo__textkit-8: FAIL_TO_PASS lost [{dropped!r}], new []",
        "repo2env-demo__textkit-8: rewards.stub.stub-list 0.2 -> 0.0",
    ]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(3600)  # the demo run (the session fixture) is part of the first test that asks for it
def test_the_demo_keeps_its_rows_and_verdicts(demo_run):
    folder, done = demo_run
    assert done.returncode == 0, done.stderr
    expected = json.loads(EXPECTED.read_text())
    changed = differences(expected, observed(folder / "generated" / "demo"))
    assert not changed, (
        "the demo's rows or verdicts changed:\n  " + "\n  ".join(changed)
        + f"\nIf this is deliberate, update {EXPECTED.relative_to(EXPECTED.parents[2])} and add a line under "
          "'changes' saying what changed and why.")
