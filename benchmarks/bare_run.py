"""One task's tests run bare: the baseline both grading benchmarks compare a grading with (no
repo2env import here: benchmarks/grading_growth.py runs it under an earlier revision's package)."""

from __future__ import annotations

import shlex
import statistics
import time


def bare_seconds(runtime, task, repeats: int) -> float:
    """The median wall time of ``task``'s FAIL_TO_PASS and PASS_TO_PASS tests, run ``repeats`` times
    with the task's own command in one started sandbox that has the gold patch and the tests applied."""
    ids = " ".join(shlex.quote(test_id) for test_id in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS])
    with runtime.start(task) as sandbox:
        sandbox.write_file("/tmp/gold.diff", task.patch)
        sandbox.write_file("/tmp/tests.diff", task.test_patch)
        sandbox.exec("git apply /tmp/gold.diff && git apply /tmp/tests.diff", workdir="/testbed")
        runs = []
        for _ in range(repeats):
            began = time.perf_counter()
            sandbox.exec(f"{task.env_spec.test_cmd} -p no:cacheprovider --junitxml=/tmp/j.xml {ids}", workdir="/testbed")
            runs.append(time.perf_counter() - began)
    return statistics.median(runs)
