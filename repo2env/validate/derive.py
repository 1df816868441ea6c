"""Deriving FAIL_TO_PASS and PASS_TO_PASS by running the tests, and catching flaky ones.

Two states of the task's snapshot, each in its own sandbox: *before* (base + test_patch) and
*after* (base + gold patch + test_patch). Every test id that the after state collects from the
files the test patch touches (or the whole suite, on request) runs ``runs`` times per state, each
run in a new shuffled order under its own ``PYTHONHASHSEED``. F2P: never passes before, always
passes after. P2P: always passes in both. A test whose outcome changes between identical runs is
flaky: it gets a flip rate and is in neither list.

A task of another language runs through its profile's runner (:meth:`~repo2env.languages.
LanguageProfile.test_runner`, the same plan and report reading the grader uses). Run 0 of each state
runs the test patch's test files whole, the two states at once; after the fix it also lists the
ids (no run of its own only lists them). The later runs name those ids, ``runs`` in all per state,
each run in a new shuffled order under its own random seed (V8's ``--random-seed`` where the
runner passes it on: mocha, ``node --test``), so that a rerun catches a ``Math.random`` flake the
same way every time; with such a runner the fixed state runs under the seeds 1..
:data:`SEEDED_AFTER_RUNS` at least.
"""

from __future__ import annotations

import json
import random
import re
import shlex
import statistics
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo2env.languages import get_profile
from repo2env.languages.build import ShellFiles
from repo2env.languages.runner import TestRunnerFacts
from repo2env.models import Task, TestStatus
from repo2env.patches import Patch, parse
from repo2env.runtime.sandbox import Runtime, Sandbox, SandboxLimits
from repo2env.verify.filtering import is_protected_path
from repo2env.verify.junit import ID_OPTIONS, outcomes_for, pytest_options, split_node_id
from repo2env.verify.spec import TestRunner, grading_scripts, pytest_runner

_JUNIT = "/tmp/repo2env-derive.xml"
_MARKER = "===REPO2ENV-DERIVE-JUNIT==="
_COLLECT_PATH, _IDS_PATH = "/tmp/repo2env-collect.py", "/tmp/repo2env-collected.json"
_RUN_SCRIPT, _RUN_TESTS, _RUN_SETTINGS = "/tmp/repo2env-derive-run.sh", "/tmp/repo2env-run-tests.sh", "/tmp/repo2env-derive.json"
_OUTPUT = "/tmp/repo2env-derive.out"

#: Collects like ``python -m pytest ARGS`` and writes the node ids pytest holds, as JSON, to the first
#: argument. Read from pytest's items, not from its terminal: ``--collect-only -q`` prints the tree
#: instead when a repository's addopts raise the verbosity, and splits an id holding a line break
#: (ids are raw when ``disable_test_id_escaping_and_forfeit_all_rights_to_community_support`` is set).
COLLECT_SCRIPT = r'''
import json, os, sys

sys.path[0] = os.getcwd()  # what `python -m pytest` puts first, in place of this script's folder
import pytest


class NodeIds:
    ids = []

    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]


plugin = NodeIds()
status = pytest.main(sys.argv[2:], plugins=[plugin])
with open(sys.argv[1], "w", encoding="utf-8") as handle:
    json.dump({"status": int(status), "ids": plugin.ids}, handle)
'''


@dataclass
class Derivation:
    """What running the tests before and after the fix showed."""

    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    flaky: dict[str, float] = field(default_factory=dict)
    before: dict[str, list[str]] = field(default_factory=dict)
    after: dict[str, list[str]] = field(default_factory=dict)
    files_before: dict[str, str] = field(default_factory=dict)
    files_after: dict[str, str] = field(default_factory=dict)
    test_sources: dict[str, str] = field(default_factory=dict)  #: the test patch's .py files after it
    test_seconds: float = 0.0
    one_run_s: float | None = None  #: the median run after the fix: one run of the task's tests
    slowest_run_s: float | None = None  #: the slowest run after the fix
    error: str | None = None


def derive_tests(task: Task, runtime: Runtime, *, runs: int = 3, hash_seeds: tuple[int, ...] = (0, 1, 2),
                 whole_suite: bool = False, timeout_s: float = 600.0, log_dir: Path | None = None,
                 parallel: bool = False) -> Derivation:
    """Run the PR's tests ``runs`` times before and after its fix; classify every test id. The runs
    of one state share its sandbox (the reruns only confirm determinism); ``parallel`` runs the two
    states at once."""
    test_patch = parse(task.test_patch)
    if not get_profile(task.language).runs_tests_as_pytest():
        return _derive_with_runner(task, test_patch, runtime, runs=runs, seeds=hash_seeds, timeout_s=timeout_s,
                                   log_dir=log_dir, parallel=parallel)
    derivation = Derivation()
    # A test file the test patch deletes (or renames away) is no target: pytest stops at a path that
    # does not exist, and nothing would be collected at all.
    test_files = [file.path for file in test_patch.files if not file.is_deleted
                  and file.path.endswith(".py") and is_protected_path(file.path) and not file.path.endswith("conftest.py")]
    source_files = [path for path in _patch_paths(task.patch) if path.endswith(".py")]
    sandboxes = _start_states(task, runtime, timeout_s)
    with sandboxes[0] as before, sandboxes[1] as after:
        derivation.error = _prepare_states(task, before, after, source_files, derivation)
        if derivation.error:
            return derivation
        derivation.test_sources = _read_files(after, [file.path for file in test_patch.files
                                                      if file.path.endswith(".py") and not file.is_deleted])
        targets = "" if whole_suite else " ".join(shlex.quote(path) for path in test_files)
        began = time.monotonic()
        after.write_file(_COLLECT_PATH, COLLECT_SCRIPT)
        pytest_version = task.env_spec.pytest_version if task.env_spec else None
        id_options = shlex.join(pytest_options(ID_OPTIONS, pytest_version))
        collected = after.exec(f"rm -f {_IDS_PATH}; python {_COLLECT_PATH} {_IDS_PATH} --collect-only -q "
                               f"-p no:cacheprovider {id_options} {targets}; printf '\\n{_MARKER}\\n'; cat {_IDS_PATH} 2>/dev/null",
                               workdir="/testbed", timeout=timeout_s)
        collected_output, _, ids_json = collected.output.rpartition(f"\n{_MARKER}\n")
        test_ids = read_collected_ids(ids_json)
        derivation.test_seconds += time.monotonic() - began
        if log_dir:
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / "collect.txt").write_text(collected_output)
        if not test_ids:
            derivation.error = collection_error(ids_json, collected_output, _patch_paths(task.patch))
            return derivation
        # The tests run as a grading runs them (verify/scripts/run_tests.sh, the runner's options, the
        # snapshot's configuration named explicitly): what derivation finds is what grading reads.
        runner = pytest_runner(task.test_command(), test_files, pytest_version)
        run_tests_script = grading_scripts()["run_tests.sh"]
        for sandbox in (before, after):
            sandbox.write_file(_RUN_TESTS, run_tests_script)

        def run_state(name: str, sandbox: Sandbox, record: dict[str, list[str]], count: int, first: int = 0) -> list[float]:
            durations = []
            for run in range(first, count):
                seed = hash_seeds[run % len(hash_seeds)]
                order = list(test_ids)
                random.Random(seed * 7919 + run).shuffle(order)
                began = time.monotonic()
                output, xml = _run_tests(sandbox, runner, seed, runner.selection(order), timeout_s)
                outcomes, _ = outcomes_for(test_ids, xml)
                if "ERROR: not found:" in output and all(status == TestStatus.MISSING for status in outcomes.values()):
                    # Some ids change between collection and run (parameters made from the clock,
                    # say), and before the fix a module may not collect at all, which old pytest (3.x)
                    # answers with a usage error that runs none of the ids: run the files instead;
                    # ids that do not come back are simply absent.
                    files = sorted({split_node_id(test_id)[0] for test_id in test_ids})
                    random.Random(seed * 7919 + run).shuffle(files)
                    output, xml = _run_tests(sandbox, runner, seed, files, timeout_s)
                    outcomes, _ = outcomes_for(test_ids, xml)
                durations.append(time.monotonic() - began)
                for test_id, status in outcomes.items():
                    record.setdefault(test_id, []).append(status.value)
                if log_dir:
                    (log_dir / f"{name}-{run}.txt").write_text(output)
            return durations

        _run_states(derivation, run_state, [("before", before, derivation.before, runs),
                                            ("after", after, derivation.after, runs)], parallel=parallel)
    _classify(derivation, test_ids)
    return derivation


#: Runners whose plan gives V8 a random seed (``plan_run``'s ``random_seed``), and how many seeded
#: runs the fixed state gets at least with them (fmtkit's ``Math.random`` flake flips within seeds
#: 1..12; three runs under 1..3 all pass it).
SEEDED_RUNNERS = frozenset({"mocha", "node"})
SEEDED_AFTER_RUNS = 12
#: Where a runner's reports go in a derivation sandbox.
_REPORTS = "/tmp/repo2env-derive-reports"


def _derive_with_runner(task: Task, test_patch: Patch, runtime: Runtime, *, runs: int, seeds: tuple[int, ...],
                        timeout_s: float, log_dir: Path | None, parallel: bool = False) -> Derivation:
    """:func:`derive_tests` for a task whose profile runs its tests (module docstring); ``test_patch``
    is the task's, parsed; ``parallel`` runs the two states at once."""
    profile = get_profile(task.language)
    facts = profile.test_runner(task.env_spec)
    rules = profile.path_rules()
    derivation = Derivation()
    test_files = [file.path for file in test_patch.files if not file.is_deleted
                  and rules.classify(file.path) == "test" and rules.is_code(file.path)
                  and not rules.is_test_config(file.path) and not rules.is_type_test(file.path)]
    source_files = [path for path in _patch_paths(task.patch) if rules.is_code(path)]
    sandboxes = _start_states(task, runtime, timeout_s)
    with sandboxes[0] as before, sandboxes[1] as after:
        derivation.error = _prepare_states(task, before, after, source_files, derivation)
        if derivation.error:
            return derivation
        # Test data the change adds (marked's Markdown specs) is run by the test files that read it.
        test_files += [path for path in profile.tests_reading_data([file.path for file in test_patch.files
                                                                     if not file.is_deleted], ShellFiles(after),
                                                                    task.env_spec)
                       if path not in test_files]
        # The test files after the patch: what the interface probe reads (the names tests call).
        derivation.test_sources = _read_files(after, test_files)
        if log_dir:
            log_dir.mkdir(parents=True, exist_ok=True)
        # Run 0 of each state, both at once: the test files whole (an id naming a file runs it
        # unfiltered), under run 0's seed. After the fix it also lists the ids the later runs name; so
        # listing costs no run of its own, and the before state does not wait for it.
        seed = seeds[0]
        files = list(test_files)
        random.Random(seed * 7919).shuffle(files)

        def whole(sandbox: Sandbox) -> tuple[dict[str, TestStatus], str, float]:
            began = time.monotonic()
            outcomes, output = run_with_runner(sandbox, facts, files, seed=seed + 1, timeout_s=timeout_s)
            return outcomes, output, time.monotonic() - began

        before_run, after_run = _both(whole, [(before,), (after,)], parallel)
        listed = after_run[0]
        test_ids = [test_id for test_id in listed if facts.split_id(test_id)[1]]
        if not test_ids:
            derivation.test_seconds += after_run[2] + before_run[2]
            if log_dir:
                (log_dir / "after-0.txt").write_text(after_run[1])
            broken = sorted(test_id for test_id, status in listed.items() if status == TestStatus.ERROR)
            derivation.error = (f"no test collected after the fix ({', '.join(broken)} did not load)" if broken
                                else None if test_files else "the test patch holds no test file")
            return derivation
        done = []
        for name, (outcomes, output, seconds), record in (("before", before_run, derivation.before),
                                                          ("after", after_run, derivation.after)):
            for test_id in test_ids:
                record.setdefault(test_id, []).append(outcomes.get(test_id, TestStatus.MISSING).value)
            if log_dir:
                (log_dir / f"{name}-0.txt").write_text(output)
            done.append([seconds])
        # Where the runner passes V8 a seed, the fixed state runs under seeds 1..SEEDED_AFTER_RUNS at
        # least: a Math.random flake shows under the same seeds on every derivation.
        after_runs = max(runs, SEEDED_AFTER_RUNS) if facts.name in SEEDED_RUNNERS else runs

        def run_state(name: str, sandbox: Sandbox, record: dict[str, list[str]], count: int, first: int = 0) -> list[float]:
            durations = []
            for run in range(first, count):
                seed = seeds[run] if run < len(seeds) else run
                order = list(test_ids)
                random.Random(seed * 7919 + run).shuffle(order)
                began = time.monotonic()
                # V8 reads 0 as "no seed": the runs are seeded from 1 up.
                outcomes, output = run_with_runner(sandbox, facts, order, seed=seed + 1, timeout_s=timeout_s)
                durations.append(time.monotonic() - began)
                for test_id in test_ids:
                    record.setdefault(test_id, []).append(outcomes.get(test_id, TestStatus.MISSING).value)
                if log_dir:
                    (log_dir / f"{name}-{run}.txt").write_text(output)
            return durations

        _run_states(derivation, run_state, [("before", before, derivation.before, runs),
                                            ("after", after, derivation.after, after_runs)], parallel=parallel,
                    done=done)
    _classify(derivation, test_ids)
    return derivation


def _both(call: Callable[..., Any], arguments: list[tuple], parallel: bool) -> list[Any]:
    """``call`` on each of the two states' ``arguments``, at once when ``parallel``; in their order."""
    if parallel:
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="repo2env-derive") as pool:
            return list(pool.map(lambda args: call(*args), arguments))
    return [call(*args) for args in arguments]


def _run_states(derivation: Derivation, run_state: Callable[..., list[float]], states: list[tuple],
                parallel: bool, done: list[list[float]] | None = None) -> None:
    """Run the before and the after state's runs (``run_state(name, sandbox, record, count, first)``
    gives the durations of runs ``first`` to ``count - 1``), the two states at once when
    ``parallel``: first one run of each (unless ``done`` holds their durations: they already ran);
    the rest only if a test failed before the fix and passed after it in those (no later run can
    make a FAIL_TO_PASS test of one that did not: the task has none, whatever the reruns show). The
    tests' time goes into ``derivation``, and one run of the task's tests is the median run after the fix."""
    timings = done if done is not None else _both(run_state, [(*state[:3], min(1, state[3]), 0) for state in states],
                                                  parallel)
    if fail_to_pass_possible(states[0][2], states[1][2]):
        more = _both(run_state, [(*state, 1) for state in states], parallel)
        timings = [ran + rest for ran, rest in zip(timings, more, strict=True)]
    derivation.test_seconds += sum(sum(durations) for durations in timings)
    derivation.one_run_s = round(statistics.median(timings[1]), 3) if timings[1] else None
    derivation.slowest_run_s = round(max(timings[1]), 3) if timings[1] else None


def fail_to_pass_possible(before: dict[str, list[str]], after: dict[str, list[str]]) -> bool:
    """Whether some test failed (or did not run) in every run before the fix so far and passed in
    every run after it: only such a test can still come out FAIL_TO_PASS."""
    passed = TestStatus.PASSED.value
    return any(outcomes and after.get(test_id) and passed not in outcomes
               and all(status == passed for status in after[test_id])
               for test_id, outcomes in before.items())


def run_with_runner(sandbox: Sandbox, facts: TestRunnerFacts, test_ids: list[str], *, seed: int | None,
                    timeout_s: float) -> tuple[dict[str, TestStatus], str]:
    """One run of ``test_ids`` by the profile's plan in one exec: every outcome its reports name (the
    requested ids, and the ids of files requested whole), and the run's output. The reports come back
    after markers: no agent code runs in derivation."""
    plan = facts.plan(test_ids, _REPORTS, random_seed=seed)
    script = [f"rm -rf {_REPORTS}", f"timeout -k 5 {timeout_s:.0f} sh -c {shlex.quote(plan.command)}"]
    script += [f"printf '\\n{_MARKER} %s\\n' {shlex.quote(report.path)}; cat {shlex.quote(report.path)} 2>/dev/null"
               for report in plan.reports]
    sandbox.write_file(_RUN_SCRIPT, "\n".join(script) + "\n")
    result = sandbox.exec(["/bin/sh", _RUN_SCRIPT], workdir="/testbed", timeout=timeout_s + 30)
    output, *sections = result.output.split(f"\n{_MARKER} ")
    texts = {}
    for section in sections:
        path, _, text = section.partition("\n")
        texts[path] = text if text.strip() else None
    outcomes = facts.reported(plan, texts.get)
    requested = set(test_ids)
    whole = {test_id for test_id in test_ids if not facts.split_id(test_id)[1]}
    kept = {test_id: status for test_id, status in outcomes.items()
            if test_id in requested or facts.split_id(test_id)[0] in whole}
    return kept, f"$ {plan.command}\n{output}"


def read_collected_ids(ids_json: str) -> list[str]:
    """The node ids :data:`COLLECT_SCRIPT` wrote (none when it wrote nothing readable)."""
    try:
        ids = json.loads(ids_json)["ids"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return []
    return list(dict.fromkeys(test_id for test_id in ids if isinstance(test_id, str)))


#: pytest's header of a module it could not collect, and the first line of the error under it.
_COLLECT_ERROR = re.compile(r"^_+ ERROR collecting (?P<path>\S+) _+$.*?^E +(?P<error>\S[^\n]*)", re.MULTILINE | re.DOTALL)
#: The files whose change can move or rename what the project installs.
PACKAGING_FILES = ("setup.py", "setup.cfg", "pyproject.toml")


def collection_error(ids_json: str, output: str, changed_files: Sequence[str] = ()) -> str | None:
    """Why a collection that gave no test id is a grading error; None when pytest collected cleanly
    and found nothing (its status 5): the files the PR's tests touch hold no test (a typing example,
    a helper module), which is a task without FAIL_TO_PASS, not a broken grader. The reason names
    the first module that did not load and its error; when that is an import error and the fix
    (``changed_files``) changes the project's packaging, it says that the install made at the base
    commit no longer serves (a fix that moves the package into src/, say: pallets/itsdangerous 104)."""
    try:
        status = json.loads(ids_json)["status"]
    except (json.JSONDecodeError, KeyError, TypeError):
        status = None
    if status == 5:
        return None
    found = _COLLECT_ERROR.search(output)
    if found is None:
        last_line = (output.strip().splitlines() or ["no output"])[-1]
        return f"no test collected after the fix ({last_line[:200]})"
    error = found["error"].strip()
    reason = f"no test collected after the fix ({found['path']}: {error[:200]})"
    packaging = [path for path in changed_files if path.rsplit("/", 1)[-1] in PACKAGING_FILES]
    if packaging and re.match(r"(ModuleNotFound|Import)Error\b", error):
        reason += (f"; the fix changes {', '.join(packaging)}: the project installed at the base commit no "
                   "longer imports, and grading does not install it again (the agent's setup would run before "
                   "the grader)")
    return reason


def _run_tests(sandbox: Sandbox, runner: TestRunner, seed: int, targets: list[str],
               timeout_s: float) -> tuple[str, str | None]:
    """One run of the tests in one exec, through the grading's own run_tests.sh; (its output, the
    JUnit XML or None). The report comes back after a marker: the gold patch and the PR's tests are
    trusted here, no agent code runs in derivation."""
    settings = runner.run_settings(targets, junit=_JUNIT, timeout_s=timeout_s)
    # The targets go through a file: as one `sh -c` argument a command may hold at most 128 KiB
    # (the kernel's limit on one argument), which the ids of a large test file or a whole suite exceed.
    sandbox.write_file(_RUN_SETTINGS, json.dumps(settings))
    sandbox.write_file(_RUN_SCRIPT, f"set -u\n. {_RUN_TESTS}\nread_settings {_RUN_SETTINGS} || exit 93\n"
                                    f"rm -f {_JUNIT}\nexport PYTHONHASHSEED={seed}\nrun_tests {_OUTPUT}\n"
                                    f"cat {_OUTPUT}\nprintf '\\n{_MARKER}\\n'\ncat {_JUNIT} 2>/dev/null\n")
    result = sandbox.exec(["/bin/bash", _RUN_SCRIPT], workdir="/testbed", timeout=timeout_s + 30)
    output, found, xml = result.output.rpartition(f"\n{_MARKER}\n")
    described = shlex.join([*shlex.split(runner.command), *runner.options, *settings["report_options"], *targets])
    return f"$ PYTHONHASHSEED={seed} {described}\n{output}", (xml if found and xml.strip() else None)


def _classify(derivation: Derivation, test_ids: list[str]) -> None:
    passed = TestStatus.PASSED.value
    for test_id in test_ids:
        before, after = derivation.before[test_id], derivation.after[test_id]
        flips = [min(outcomes.count(passed), len(outcomes) - outcomes.count(passed)) / len(outcomes)
                 for outcomes in (before, after)]
        if max(flips) > 0:
            derivation.flaky[test_id] = round(max(flips), 3)
        elif all(status != passed for status in before) and all(status == passed for status in after):
            derivation.fail_to_pass.append(test_id)
        elif all(status == passed for status in before + after):
            derivation.pass_to_pass.append(test_id)


def _start_states(task: Task, runtime: Runtime, timeout_s: float) -> list[Sandbox]:
    """The sandboxes of the two states (before, after), started at once: a container start is mostly
    waiting on the engine."""
    limits = SandboxLimits(exec_timeout_s=timeout_s + 60, output_cap_bytes=20_000_000)
    with ThreadPoolExecutor(max_workers=2) as pool:
        starting = [pool.submit(runtime.start, task, limits=limits) for _ in range(2)]
        return [future.result() for future in starting]


def _prepare_states(task: Task, before: Sandbox, after: Sandbox, source_files: list[str],
                    derivation: Derivation) -> str | None:
    """Apply the test patch before, the gold patch and the test patch after, and record
    ``source_files`` as each state has them; why a patch does not apply, or None."""
    derivation.files_before = _read_files(before, source_files)
    for sandbox, patches in ((before, [task.test_patch]), (after, [task.patch, task.test_patch])):
        for index, patch in enumerate(patches):
            sandbox.write_file(f"/tmp/repo2env-patch-{index}.diff", patch)
        applied = sandbox.exec(" && ".join(f"git apply --whitespace=nowarn /tmp/repo2env-patch-{index}.diff"
                                           for index in range(len(patches))), workdir="/testbed", timeout=60)
        if applied.exit_code != 0:
            return f"a patch does not apply: {applied.output.strip()[-300:]}"
    derivation.files_after = _read_files(after, source_files)
    return None


def _patch_paths(patch: str) -> list[str]:
    """The path of each file of ``patch`` after it (before it, for a deletion)."""
    return [file.path for file in parse(patch).files]


def _read_files(sandbox: Sandbox, paths: list[str]) -> dict[str, str]:
    contents = {}
    for path in paths:
        text = _read_optional(sandbox, f"/testbed/{path}")
        if text is not None:
            contents[path] = text
    return contents


def _read_optional(sandbox: Sandbox, path: str) -> str | None:
    try:
        return sandbox.read_file(path)
    except (FileNotFoundError, IsADirectoryError):
        return None
