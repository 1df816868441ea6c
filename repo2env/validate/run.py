"""``repo2env validate``: per task, derive the tests, grade reference rollouts, judge, and report.

For each task of a tasks folder: derive FAIL_TO_PASS / PASS_TO_PASS (catching flaky tests), then
grade with the hidden verifier the gold patch (must be 1.0 every time), the empty patch (must be
0), partial fixes (subsets of the gold hunks, the gold patch minus each hunk among them), near
misses (libcst mutations of the gold patch) and stubs (the functions the gold patch changed reduced to ``return []`` and the like), plus K policy rollouts when a policy endpoint is given; the acceptance policy judges.
FAIL_TO_PASS tests that every stub passes (they need only the new names) move to PASS_TO_PASS and
every rollout is scored again (:func:`name_only_tests`). The task's quality block
(:mod:`repo2env.validate.quality`) is measured from the same evidence; when the tests use names the
fix introduces and the issue never names, the policy adds an Interface section to the instruction
(before any policy rollout) or rejects the task. Every rollout but gold is graded on its
FAIL_TO_PASS tests first and stops there when they decide a reward of 0 (``policy.stop_early``);
gradings, and the derivation's two states, run at once when cores are free (``policy.grading_jobs``).
See docs/validation.md.
The loop over a tasks folder is the stage runner's (:func:`repo2env.pipeline.stages.validate_dir`):
``validation.jsonl`` (one record per task, appended as each finishes, so a re-run resumes),
``tasks.jsonl`` updated with the tests and the verdict, ``summary.md``, ``validation.png`` and
``quality.png``.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from repo2env.languages import get_profile
from repo2env.models import GradeResult, QualityReport, RolloutResult, Task, ValidationReport
from repo2env.outcomes import TestStatus
from repo2env.runtime.sandbox import Runtime
from repo2env.validate.acceptance import AcceptancePolicy, judge
from repo2env.validate.derive import derive_tests
from repo2env.validate.quality import Interface, TaskSources, assess, find_interface
from repo2env.verify.grader import Grader, scored
from repo2env.verify.junit import split_node_id

#: The null and variant gradings, and every grading of the task after validation
#: (``ValidationReport.grading_timeout_s``), get this many times the gold gradings' time, at least the floor.
GRADING_TIMEOUT_FACTOR = 10.0
GRADING_TIMEOUT_FLOOR_S = 60.0
#: Validation's own null and variant gradings: a smaller factor, a lower floor. A mutated fix that
#: hangs, or makes every test crawl, is common (a loop that no longer ends) and earns 0 however long
#: it is given; the task's recorded timeout keeps the wide margin, since a policy's honest run on a
#: loaded machine must finish. Six times derivation's slowest run after the fix (known before any
#: grading, so the variants are graded beside gold): of 575 variant gradings on the development
#: repositories that ended on their own, the slowest took 4 times gold's run, which is about as long.
VARIANT_TIMEOUT_FACTOR = 6.0
VARIANT_TIMEOUT_FLOOR_S = 30.0
#: A mutated fix that hangs usually hangs in one test, after the others gave their outcomes: once
#: the first outcome came, validation's null and variant gradings stop when no outcome comes for
#: this many times derivation's slowest whole run after the fix (no test of gold took longer), at least the floor.
#: Such a run earns 0, as it would at the timeout, but costs seconds instead of the whole timeout.
VARIANT_STALL_FACTOR = 3.0
VARIANT_STALL_FLOOR_S = 10.0

#: A policy-rollout runner: (task, runtime, grader, k, seed) -> graded policy rollouts.
PolicyRunner = Callable[[Task, Runtime, Grader, int, int], list[RolloutResult]]


@dataclass
class ValidationSummary:
    """What a validate run produced."""

    tasks_dir: Path
    records: list[ValidationReport] = field(default_factory=list)
    skipped: int = 0

    @property
    def accepted(self) -> int:
        return sum(record.verdict == "accepted" for record in self.records)


def validate_task(task: Task, runtime: Runtime, policy: AcceptancePolicy, *, logs_dir: Path,
                  policy_runner: PolicyRunner | None = None, policy_k: int = 0) -> tuple[Task, ValidationReport]:
    """Validate one task; returns it with tests and verdict filled in, and its validation.jsonl line."""
    started = time.monotonic()
    env_ok = bool(task.env_spec and task.env_spec.status == "env_ok")
    profile = get_profile(task.language)
    ungradable = profile.ungradable_reason(task.env_spec.test_runner) if env_ok and task.env_spec else None
    if ungradable:
        # Built, but the grader cannot grade its tests safely yet: say so rather than publish a
        # reward that can be forged (or grade it as another language).
        report = ValidationReport(instance_id=task.instance_id, repo=task.repo, policy=policy.name, verdict="rejected",
                                  reasons=["ungradable_language"], leak_score=task.leak_score, error=ungradable)
        return task.model_copy(update={"validation": report}), report.record()
    derivation = None
    rollouts: list[RolloutResult] = []
    tests_s = 0.0
    phases: dict[str, float] = {}
    width = grading_width(policy)
    references = None
    interface: Interface | None = None
    quality: QualityReport | None = None
    if env_ok:
        with OWN_GRADINGS.using(width):  # load of ours, for the load-average fallback of auto widths
            began = time.monotonic()
            derivation = derive_tests(task, runtime, runs=policy.reruns, hash_seeds=tuple(policy.hash_seeds),
                                      whole_suite=policy.whole_suite_p2p, timeout_s=policy.timeout_s,
                                      log_dir=logs_dir / "derive", parallel=width > 1)
            phases["derive"] = round(time.monotonic() - began, 3)
            tests_s += derivation.test_seconds
            task = task.model_copy(update={"FAIL_TO_PASS": derivation.fail_to_pass, "PASS_TO_PASS": derivation.pass_to_pass,
                                           "interface": ""})
            if derivation.error is None and derivation.fail_to_pass:
                sources = TaskSources(derivation.files_before, derivation.files_after, derivation.test_sources)
                # Before any rollout: a policy rollout must see the instruction the dataset will carry.
                interface = find_interface(task, sources, task.FAIL_TO_PASS)
                if policy.interface == "instruction" and interface.section:
                    task = task.model_copy(update={"interface": interface.section})
                references = _reference_rollouts(task, runtime, policy, derivation, logs_dir, policy_runner=policy_runner,
                                                 policy_k=policy_k, width=width, phases=phases)
                rollouts = references.rollouts
                tests_s += references.grading_s
                gates = name_only_tests(task.FAIL_TO_PASS, rollouts)
                if gates and len(gates) < len(task.FAIL_TO_PASS):
                    task = task.model_copy(update={
                        "FAIL_TO_PASS": [test for test in task.FAIL_TO_PASS if test not in gates],
                        "PASS_TO_PASS": [*task.PASS_TO_PASS, *(test for test in task.FAIL_TO_PASS if test in gates)]})
                    rollouts = [_rescored(rollout, task) for rollout in rollouts]
                quality = assess(task, sources=sources, tests=task.FAIL_TO_PASS, rollouts=rollouts, interface=interface,
                                 interface_action=interface_action(policy, interface))
    report = judge(policy, fail_to_pass=task.FAIL_TO_PASS, flaky=derivation.flaky if derivation else {},
                   rollouts=rollouts, leak_score=task.leak_score,
                   derive_error=derivation.error if derivation else None, env_ok=env_ok, quality=quality)
    differences = gold_differences(task, rollouts)
    error = derivation.error if derivation else (task.env_spec.error if task.env_spec else "not built")
    if error is None and differences:
        error = ("gold's grading differs from derivation's after-run on "
                 + "; ".join(f"{test} ({line})" for test, line in differences.items()))
    report = report.model_copy(update={
        "instance_id": task.instance_id, "repo": task.repo, "policy": policy.name,
        "FAIL_TO_PASS": task.FAIL_TO_PASS, "PASS_TO_PASS": task.PASS_TO_PASS, "leak_score": task.leak_score,
        "declared_differences": declared_differences(task, report.flaky_tests) if derivation else {},
        "gold_differences": differences,
        "canary_free_modules": references.canary_free_modules if references else [],
        "grading_timeout_s": references.timeout_s if references else None,
        "wall_s": round(time.monotonic() - started, 3), "tests_s": round(tests_s, 3), "phases": phases,
        "one_run_s": derivation.one_run_s if derivation else None, "error": error,
    })
    # The task keeps the whole report (each rollout's grade included); its validation.jsonl line
    # leaves the grades out (see ValidationReport.record).
    return task.model_copy(update={"validation": report}), report.record()


def interface_action(policy: AcceptancePolicy, interface: Interface) -> str:
    """What validation did with a task's interface under ``policy`` (QualityReport.interface_action)."""
    if not interface.needed:
        return "none"
    if policy.interface == "ignore":
        return "ignored"
    return "instruction" if policy.interface == "instruction" and interface.section else "rejected"


#: Stub styles that must all pass a FAIL_TO_PASS test before it counts as needing only names.
NAME_ONLY_MIN_STUBS = 2


def name_only_tests(fail_to_pass: list[str], rollouts: list[RolloutResult]) -> set[str]:
    """FAIL_TO_PASS tests that every stub passes: whatever the changed functions do (return None, a
    list, 0, a string, or raise), the test passes, so it only needs the names the fix adds to exist
    (a test module importing a new name fails whole before the fix: cachetools' ``keys.methodkey``,
    marshmallow's ``fields.Enum``). Counted in FAIL_TO_PASS they pay a stub most of the reward;
    they gate it instead (PASS_TO_PASS: they must pass, and earn nothing). Empty unless at least
    :data:`NAME_ONLY_MIN_STUBS` stubs were graded cleanly."""
    stubs = [rollout.grade for rollout in rollouts if rollout.kind == "stub"]
    if len(stubs) < NAME_ONLY_MIN_STUBS or any(grade is None or not _clean(grade) for grade in stubs):
        return set()
    return {test for test in fail_to_pass if all(grade.tests.get(test) == TestStatus.PASSED for grade in stubs)}


def _clean(grade: GradeResult) -> bool:
    return grade.error is None and not grade.tampered and grade.patch_applied


def _rescored(rollout: RolloutResult, task: Task) -> RolloutResult:
    """``rollout`` scored again against ``task``'s test lists from the outcomes its grading read; a
    grading that errored, was tampered with or did not apply keeps its reward (0)."""
    grade = rollout.grade
    if grade is None or not _clean(grade):
        return rollout
    again = scored(grade, task)
    return rollout.model_copy(update={"reward": again.reward, "resolved": again.resolved, "grade": again})


def declared_differences(task: Task, flaky: dict[str, float]) -> dict[str, list[str]]:
    """How the derived FAIL_TO_PASS / PASS_TO_PASS differ from the lists an imported dataset declared
    (empty for mined tasks): declared F2P tests that pass before the fix, flip, or never pass here;
    declared P2P tests that flip or fail; derived F2P tests the dataset did not list."""
    if task.declared_FAIL_TO_PASS is None:
        return {}
    f2p, p2p = set(task.FAIL_TO_PASS), set(task.PASS_TO_PASS)
    declared_f2p, declared_p2p = set(task.declared_FAIL_TO_PASS), set(task.declared_PASS_TO_PASS or [])
    differences = {
        "f2p_passes_before": sorted(declared_f2p & p2p),
        "f2p_flaky": sorted(declared_f2p & set(flaky)),
        "f2p_missing": sorted(declared_f2p - f2p - p2p - set(flaky)),
        "p2p_flaky": sorted(declared_p2p & set(flaky)),
        "p2p_failing": sorted(declared_p2p - p2p - set(flaky)),
        "f2p_not_declared": sorted(f2p - declared_f2p),
    }
    return {key: tests for key, tests in differences.items() if tests}


def grading_width(policy: AcceptancePolicy, *, own: float | None = None, idle: float | None = None) -> int:
    """How many gradings may run at once: ``policy.grading_jobs``, or (auto) the cores free for them,
    from 1 to :data:`MAX_AUTO_GRADING_JOBS` and the machine's cores.

    Free are the cores nobody used in the last moments (``idle``, by default :data:`IDLE_CORES`'
    figure from /proc/stat, over at most the last few seconds): what ran before this task (its
    image build, the previous task's gradings) is over and does not count, and what runs now (other
    tasks' gradings, this process's included, other work on the machine) does. Not the load average:
    it reaches a minute back, and a runner with several workers in a one-CPU sandbox (jest) counts
    several times there. Without /proc/stat: the cores the one-minute load leaves free, this
    process's own gradings of that minute (``own``, :data:`OWN_GRADINGS`) not counted as load."""
    if policy.grading_jobs != "auto":
        return int(policy.grading_jobs)
    cores = os.cpu_count() or 1
    # A look that reaches back over this process's own gradings that are over (the task before, when
    # it took less than the look's reach) would count them: the look starts after their end.
    idle = IDLE_CORES.measure(after=OWN_GRADINGS.last_change()) if idle is None else idle
    if idle is not None:
        free = idle
    else:
        own = OWN_GRADINGS.recent() if own is None else own
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = float(cores)
        free = cores - max(0.0, load - own)
    return max(1, min(MAX_AUTO_GRADING_JOBS, cores, int(free + 0.5)))


class IdleCores:
    """The cores nobody used (idle or waiting on I/O, from the kernel's ``/proc/stat``) in the last
    moments: since the previous measurement when that was between ``min_interval_s`` and
    ``max_age_s`` ago (and not before ``after``), else over a fresh ``min_interval_s`` (the call
    waits that long)."""

    def __init__(self, stat_path: str | Path = "/proc/stat", min_interval_s: float = 0.5,
                 max_age_s: float = 5.0) -> None:
        self.stat_path = Path(stat_path)
        self.min_interval_s = min_interval_s
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._last: tuple[float, int, int] | None = None  # (monotonic time, idle ticks, all ticks)

    def _read(self) -> tuple[float, int, int] | None:
        try:
            first = self.stat_path.read_text().splitlines()[0].split()
            ticks = [int(value) for value in first[1:9]]  # user nice system idle iowait irq softirq steal
        except (OSError, IndexError, ValueError):
            return None
        if first[0] != "cpu" or len(ticks) < 5:
            return None
        return time.monotonic(), ticks[3] + ticks[4], sum(ticks)

    def measure(self, after: float | None = None) -> float | None:
        """Idle cores over the last moments, none of them before ``after`` (a ``time.monotonic()``
        value); None where the kernel does not say."""
        with self._lock:
            last = self._last
            if (last is None or not self.min_interval_s <= time.monotonic() - last[0] <= self.max_age_s
                    or (after is not None and last[0] < after)):
                last = self._read()
                if last is None:
                    return None
                time.sleep(self.min_interval_s)
            now = self._read()
            if now is None:
                return None
            self._last = now
        spent = now[2] - last[2]
        return (os.cpu_count() or 1) * (now[1] - last[1]) / spent if spent > 0 else None


#: The machine's idle cores, for ``grading_jobs: auto``.
IDLE_CORES = IdleCores()


class OwnGradings:
    """The gradings this process's validations run at once (the sum of the widths of the tasks under
    validation), and the most over the last minute, the window of the load average they raise."""

    def __init__(self, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._in_use = 0
        self._changes: deque[tuple[float, int]] = deque()  # (clock time, in use from then on)

    @contextmanager
    def using(self, width: int) -> Iterator[None]:
        """Count ``width`` gradings in use until the block ends."""
        self._change(width)
        try:
            yield
        finally:
            self._change(-width)

    def _change(self, delta: int) -> None:
        with self._lock:
            self._in_use += delta
            self._changes.append((self._clock(), self._in_use))

    def last_change(self) -> float | None:
        """When (this class's clock) the gradings in use last changed: a task's began or ended."""
        with self._lock:
            return self._changes[-1][0] if self._changes else None

    def recent(self) -> int:
        """The most gradings in use at any time in the last ``window_s`` seconds (now included)."""
        with self._lock:
            since = self._clock() - self.window_s
            while len(self._changes) > 1 and self._changes[1][0] <= since:
                self._changes.popleft()  # the first kept entry is what was in use at the window's start
            return max([self._in_use, *(in_use for _, in_use in self._changes)])


#: This process's gradings, for ``grading_jobs: auto``.
OWN_GRADINGS = OwnGradings()


#: The most gradings ``grading_jobs: auto`` runs at once (each holds a container and its tests).
MAX_AUTO_GRADING_JOBS = 4


def grading_timeout(policy: AcceptancePolicy, gold_seconds: float, *, floor_s: float = GRADING_TIMEOUT_FLOOR_S,
                    factor: float = GRADING_TIMEOUT_FACTOR) -> float:
    """The hidden tests' timeout for every later grading of a task whose gold gradings took
    ``gold_seconds`` at most: ``factor`` (:data:`GRADING_TIMEOUT_FACTOR`) times that, at least
    ``floor_s``, at most the policy's. A run cut short earns nothing, so the margin is wide: an
    honest run on a loaded machine still finishes; a run that hangs is stopped long before the
    policy's full timeout."""
    return round(min(policy.timeout_s, max(floor_s, factor * gold_seconds)), 1)


def variant_stall(run_seconds: float, timeout_s: float) -> float | None:
    """How long validation's null and variant gradings may go without a test outcome once the first
    came (:data:`VARIANT_STALL_FACTOR` times a run of the task's tests, derivation's slowest after
    the fix, at least the floor); None when that is no shorter than their timeout."""
    stall = round(max(VARIANT_STALL_FLOOR_S, VARIANT_STALL_FACTOR * run_seconds), 1)
    return stall if stall < timeout_s else None


#: The rollouts graded FAIL_TO_PASS first under ``policy.stop_early``: those expected to fail them
#: (the unfixed code, proper subsets of the gold hunks, stubs). The gold patch minus one hunk and
#: the near misses usually pass some, and a first phase that decides nothing costs a whole run of
#: the tests more: they are graded in full at once. Either way the reward is the same.
STOP_EARLY_KINDS = ("null", "subset", "stub")


def gold_differences(task: Task, rollouts: list[RolloutResult]) -> dict[str, str]:
    """The FAIL_TO_PASS / PASS_TO_PASS tests (each passed in every after-run of derivation) that a
    gold grading did not pass, with the first line of each failure: the grading does not run the
    tests the way derivation does (a grader's trace the tests can see, say). From the first gold
    grading that ran the tests and failed some; empty when every gold grading passed them all."""
    tests = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    for rollout in rollouts:
        grade = rollout.grade
        if rollout.kind != "gold" or grade is None or grade.tampered or not grade.patch_applied:
            continue
        failing = [test for test in tests if grade.tests.get(test) != TestStatus.PASSED]
        if failing:
            return {test: grade.failures.get(test, grade.error or str(grade.tests.get(test, TestStatus.MISSING)))
                    for test in failing[:20]}
    return {}


@dataclass
class _References:
    """What the reference rollouts of one task found and cost."""

    rollouts: list[RolloutResult]
    grading_s: float
    timeout_s: float
    canary_free_modules: list[str]


def _reference_rollouts(task: Task, runtime: Runtime, policy: AcceptancePolicy, derivation, logs_dir: Path, *,
                        policy_runner: PolicyRunner | None, policy_k: int, width: int = 1,
                        phases: dict[str, float] | None = None) -> _References:
    """Grade gold (in full, ``policy.gold_runs`` times), null and the variants (FAIL_TO_PASS first
    when ``policy.stop_early``), ``width`` at a time, in that order; ``phases`` gets the time until
    the last gold grading ended (``gold``) and the rest (``variants``)."""
    variants_of = get_profile(task.language).variants()
    phases = {} if phases is None else phases
    early = set(STOP_EARLY_KINDS) if policy.stop_early else set()
    references = [("gold", f"gold-{i}", task.patch, False) for i in range(policy.gold_runs)]
    # The unfixed code can hang on the new tests just as a mutated fix can: null runs with the variants.
    variants = [("null", f"null-{i}", "", "null" in early) for i in range(policy.null_runs)]
    partials = variants_of.partial_fixes(task.patch, limit=policy.partial_limit)
    variants += [("partial", variant.name, variant.patch, "subset" in early) for variant in partials]
    # The gold patch minus one hunk: a drop that still earns the full reward is a hunk no test needs.
    variants += [("partial", variant.name, variant.patch, "drop" in early) for variant in variants_of.hunk_drops(
        task.patch, limit=policy.hunk_drop_limit, skip={variant.name for variant in partials})]
    variants += [("near_miss", variant.name, variant.patch, "near_miss" in early)
                 for variant in variants_of.near_misses(derivation.files_before, derivation.files_after,
                                                       limit=policy.near_miss_limit)]
    variants += [("stub", variant.name, variant.patch, "stub" in early)
                 for variant in variants_of.stubs(derivation.files_before, derivation.files_after, limit=policy.stub_limit)]
    # A mutated fix can hang where the gold one finishes (a loop that no longer ends): null and the
    # variants get a timeout and a stall limit scaled from derivation's slowest run after the fix
    # (the same tests and more, run the same way), not the policy's full timeout. Known before any
    # grading, they let the variants be graded beside gold instead of after it.
    basis = derivation.slowest_run_s
    variant_timeout = policy.timeout_s if basis is None else grading_timeout(
        policy, basis, floor_s=VARIANT_TIMEOUT_FLOOR_S, factor=VARIANT_TIMEOUT_FACTOR)
    variant_stall_s = None if basis is None else variant_stall(basis, variant_timeout)
    grading_s = 0.0

    def grade_all(grader: Grader, plan: list[tuple[str, str, str, bool]], graded: Task, *,
                  run_suffix: str = "") -> list[RolloutResult]:
        """``plan`` graded for ``graded``, ``width`` at a time; gold as a policy's rollout is (the
        grader's limits), the rest under the variants' limits; each grading's logs under its name
        and ``run_suffix``."""
        nonlocal grading_s
        began = time.monotonic()
        gold_ended = began

        def one(entry: tuple[str, str, str, bool]) -> RolloutResult:
            nonlocal gold_ended
            kind, name, patch, stop_early = entry
            limits = {} if kind == "gold" else {"timeout_s": variant_timeout, "stall_s": variant_stall_s}
            result = grader.grade(graded, patch, run_name=name + run_suffix, stop_early=stop_early, **limits)
            if kind == "gold":
                gold_ended = max(gold_ended, time.monotonic())
            return RolloutResult(kind=kind, name=name, reward=result.reward, resolved=result.resolved, grade=result)

        if width > 1 and len(plan) > 1:
            with ThreadPoolExecutor(max_workers=width, thread_name_prefix="repo2env-grading") as pool:
                done = list(pool.map(one, plan))  # in the plan's order, whatever order they finished in
        else:
            done = [one(entry) for entry in plan]
        grading_s += sum(rollout.grade.tests_duration_s if rollout.grade else 0.0 for rollout in done)
        ended = time.monotonic()
        phases["gold"] = round(phases.get("gold", 0.0) + gold_ended - began, 3)
        phases["variants"] = round(phases.get("variants", 0.0) + ended - gold_ended, 3)
        return done

    canary_free: list[str] = []
    # One grader for gold and the variants, under the policy's timeout, never stopped on a stall
    # (the variants bring their own limits): the sandbox it keeps warm after a grading serves the
    # next, and none is started after the last grading of the plan.
    with Grader(runtime, logs_dir / "grades", timeout_s=policy.timeout_s, keep_warm=True) as grader:
        grader.expect(len(references) + len(variants))
        graded = grade_all(grader, references + variants, task)
        rollouts, variant_rollouts = graded[:len(references)], graded[len(references):]
        # Tests that count their own module's tests see the canaries placed among them: gold then
        # fails only in grading. Graded again with no canaries in those modules, a gold that passes
        # makes them canary-free for every grading of the task (the report says so), and the
        # variants are graded again the same way.
        sensitive = _modules_gold_failed_in(task, rollouts)
        if sensitive:
            grader.expect(len(references))
            exempt = task.model_copy(update={"validation": ValidationReport(canary_free_modules=sensitive)})
            again = grade_all(grader, [(kind, f"{name}-canary-free", patch, False) for kind, name, patch, _ in references],
                              exempt)
            if all(rollout.reward == 1.0 for rollout in again):
                rollouts, canary_free, task = again, sensitive, exempt
                grader.expect(len(variants))
                variant_rollouts = grade_all(grader, variants, exempt, run_suffix="-canary-free")
        rollouts = [*rollouts, *variant_rollouts]
        # Every later grading of the task gets a timeout scaled from the gold gradings (the report keeps it).
        gold_seconds = max((r.grade.tests_duration_s for r in rollouts if r.kind == "gold" and r.grade), default=0.0)
        task_timeout = grading_timeout(policy, gold_seconds)
        k = policy_k or policy.policy_k
        if policy_runner is not None and k:
            # A policy's rollouts are graded as gold is: the policy's timeout, never stopped on a stall.
            grader.expect(None)
            began = time.monotonic()
            for rollout in policy_runner(task, runtime, grader, k, 0):
                grading_s += rollout.grade.tests_duration_s if rollout.grade else 0.0
                rollouts.append(rollout)
            phases["policy"] = round(time.monotonic() - began, 3)
    return _References(rollouts=rollouts, grading_s=grading_s, timeout_s=task_timeout, canary_free_modules=canary_free)


def _modules_gold_failed_in(task: Task, rollouts: list[RolloutResult]) -> list[str]:
    """The FAIL_TO_PASS test modules (those that hold canaries) in which a gold grading that ran the
    tests cleanly otherwise failed a test."""
    canary_modules = {split_node_id(test)[0] for test in task.FAIL_TO_PASS}
    failed = {split_node_id(test)[0] for test in gold_differences(task, rollouts)}
    clean = all(rollout.grade is not None and not rollout.grade.tampered and rollout.grade.patch_applied
                for rollout in rollouts if rollout.kind == "gold")
    return sorted(failed & canary_modules) if clean else []


def read_records(path: Path) -> list[ValidationReport]:
    """The records of a validation.jsonl (none when it does not exist)."""
    if not path.is_file():
        return []
    return [ValidationReport.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]
