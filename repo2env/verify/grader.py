"""Grading: an agent's patch, a fresh sandbox of the task's image, the PR's hidden tests, a reward.

The hidden tests (``task.test_patch``) exist only on the host and in the grading sandbox, which
is started fresh from the task image for each grading. Inside it, one script (one ``exec``), a file
shipped with the package (``verify/scripts/grade.sh`` with ``restore.py``, run with the settings
:meth:`GradingSpec.script_settings <repo2env.verify.spec.GradingSpec.script_settings>` writes as ``grade.json``; a
Harbor task's ``tests/test.sh`` runs the same files):

1. applies the filtered agent patch (test files, test configuration, start-up hooks, metadata and
   binary importable files dropped, see :mod:`repo2env.verify.filtering`); a patch that does not
   apply scores 0;
2. reverts anything else that changed outside the accepted paths, keeps the snapshot's pytest
   tables in every pyproject.toml the patch touched (at any level), removes new top-level modules on
   the tests' sys.path the gold patch does not add, and re-checks the kept Python files for runner
   references as Python decodes them;
3. applies ``test_patch``, places the canaries (:mod:`repo2env.verify.canary_maker`) and runs exactly
   FAIL_TO_PASS + PASS_TO_PASS + canaries as derivation runs tests (``run_tests.sh``: the task's
   command, the snapshot's pytest configuration named explicitly), network off, under a timeout,
   writing JUnit XML to a random path, while a root collector beside it receives every outcome live
   (:mod:`repo2env.verify.tamper`); the outcome plugin takes itself out of the environment once
   loaded, so nothing the tests start sees the grader.

What a grading runs and checks is the task's grading specification (:mod:`repo2env.verify.spec`,
derived once per task); what the run means is :func:`repo2env.verify.reading.read_run`'s to say
(a Harbor verifier reads its runs with the same function). Outcomes come from the live stream the
root collector read, never from a file the tests' user can write: the XML, the summary line and
pytest's exit status must agree with it and every canary must come out as it must, or the grading
scores 0 as ``tampered``; a run that did not end on its own (a timeout, a kill, any signal) earns
nothing, whatever it left behind. Every grading keeps its output, XML, stream, applied diff and
result under its log folder, and :func:`rescore` re-reads them without running anything.
"""

from __future__ import annotations

import dataclasses
import io
import json
import secrets
import tarfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

from repo2env.errors import InputError
from repo2env.jsonl import write_json
from repo2env.languages import get_profile
from repo2env.models import GradeResult, Task, TestStatus
from repo2env.runtime.bootstrap import AGENT_UID
from repo2env.runtime.sandbox import Runtime, Sandbox, SandboxLimits
from repo2env.verify.filtering import filter_patch
from repo2env.verify.junit import failure_lines
from repo2env.verify.logs import JUNIT_CAP_BYTES, write_capped_log
from repo2env.verify.reading import read_run, read_script_run
from repo2env.verify.reward import RewardMode, decided_by_fail_to_pass, score
from repo2env.verify.spec import (
    DEFAULT_TIMEOUT_S,
    GRADING_SCRIPT_FILES,
    GradingLayout,
    grading_scripts,
    grading_spec,
    shell_assignments,
)
from repo2env.verify.tamper import COLLECTOR_SCRIPT, PLUGIN_SOURCE, parse_stream
from repo2env.verify.trailer import TRAILER as _TRAILER  # noqa: F401 - the grader's name for it, as before
from repo2env.verify.trailer import parse_trailer

# Collectors of live outcomes, one per grading in flight (shared: gradings run in many threads).
_COLLECTORS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="repo2env-outcomes")
# The inputs' placements have their own threads: a collector waits (up to 60 s) for the folder its
# grading's placement makes, so with more gradings in flight than half the collectors' threads (a
# GRPO group graded at once), placements queued behind waiting collectors would hold them all.
_PLACEMENTS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="repo2env-inputs")
_COLLECTOR_GRACE_S = 15.0
#: The inputs archive's last entry: once it exists, every input before it is whole.
_READY = "ready"
#: Starts the grading script once its inputs are placed (up to 60 s: the engine is placing them).
_LAUNCHER = ('n=0; until [ -e "$0" ]; do [ $n -lt 6000 ] || exit 94; n=$((n+1)); sleep 0.01; done; '
             'exec /bin/bash "$1" "$2"')
#: How the error of a grading the collector stopped as hung (``Grader(stall_s=...)``) begins.
STALLED = "the tests stalled"
_parse_trailer = parse_trailer  # the grader's name for it, as before
__all__ = ["DEFAULT_TIMEOUT_S", "GRADING_SCRIPT_FILES", "Grader", "grading_scripts", "rescore",
           "scored"]


@dataclasses.dataclass(frozen=True)
class _Limits:
    """One grading's limits: the hidden tests' timeout (None: the task's own) and the stall (None: none)."""

    timeout_s: float | None
    stall_s: float | None


class Grader:
    """Grades patches for tasks on one runtime; logs go under ``logs_root``."""

    def __init__(self, runtime: Runtime, logs_root: Path, *, timeout_s: float | None = None,
                 limits: SandboxLimits | None = None, keep_warm: bool = False, stall_s: float | None = None) -> None:
        """``timeout_s``: the hidden tests' timeout for every task; by default each task's own (the
        one validation set from its gold patch's gradings, else :data:`DEFAULT_TIMEOUT_S`).
        ``stall_s``: once the tests' first outcome came, a run that then gives none for this long
        hangs: it is stopped there and earns nothing (error ``the tests stalled``), instead of at
        the timeout. Validation gives it to its own variants' gradings only.
        ``keep_warm``: after each grading, start the next sandbox of the same image in the
        background, so that repeated gradings of a task (validation) skip the container start. A
        spare is never used before it is handed to one grading, so it is as fresh as a new one
        (:meth:`expect` says how many gradings are still to come, so that none is started for
        nothing)."""
        self.runtime = runtime
        self.logs_root = Path(logs_root)
        self.timeout_s = timeout_s
        self._limits = limits
        self.keep_warm = keep_warm
        self.stall_s = stall_s
        self._spares: dict[str, Future] = {}
        self._spares_lock = threading.Lock()  # gradings may run at once (RepoEnv grades a group in parallel)
        self._spare_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="repo2env-spare") if keep_warm else None
        self._to_come: int | None = None  # gradings still to take a sandbox; None: unknown

    def expect(self, gradings: int | None) -> None:
        """The gradings this grader will still run (validation knows its plan; None, as at first:
        unknown). A spare is started only while some of them are still to take a sandbox, so the
        last one starts none that would be removed unused. A grading beyond the count (the full
        run after a stop-early grading's first phase, say) starts its own sandbox."""
        with self._spares_lock:
            self._to_come = gradings

    @property
    def limits(self) -> SandboxLimits:
        """The grading sandboxes' limits (with the longest timeout any task may need when none was set)."""
        return self._limits_for(self.timeout_s or DEFAULT_TIMEOUT_S)

    def _limits_for(self, timeout_s: float) -> SandboxLimits:
        limits = self._limits or SandboxLimits(exec_timeout_s=timeout_s + 60, output_cap_bytes=50_000_000)
        # Never a command channel here: its server would run as the agent, beside the tests' code.
        return dataclasses.replace(limits, persistent_channel=False)

    def _fresh_sandbox(self, task: Task, limits: SandboxLimits) -> Sandbox:
        image = task.env_spec.image if task.env_spec else None
        with self._spares_lock:
            spare = self._spares.pop(image, None) if image else None
            if self._to_come is not None:
                self._to_come = max(0, self._to_come - 1)
            wanted = self._to_come is None or self._to_come > 0
        sandbox = None
        if spare is not None:
            try:
                sandbox = spare.result()
            except Exception:  # noqa: BLE001 - a failed spare just means a cold start
                sandbox = None
            if sandbox is not None and not sandbox.alive:  # a spare that waited past its idle lifetime
                sandbox.close()
                sandbox = None
        if sandbox is None:
            sandbox = self.runtime.start(task, limits=limits)
        if self._spare_pool is not None and image and wanted:
            with self._spares_lock:  # one spare an image: a second would be left behind
                if image not in self._spares:
                    self._spares[image] = self._spare_pool.submit(self.runtime.start, task, limits=limits)
        return sandbox

    def close(self) -> None:
        """Remove any spare sandboxes."""
        with self._spares_lock:
            spares, self._spares = list(self._spares.values()), {}
        for spare in spares:
            try:
                spare.result().close()
            except Exception:  # noqa: BLE001 - a spare that never started needs no removal
                pass

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def grade(self, task: Task, patch: str, *, mode: RewardMode = "graded", run_name: str | None = None,
              stop_early: bool = False, timeout_s: float | None = None, stall_s: float | None = None) -> GradeResult:
        """Grade ``patch`` (a git diff against the task's snapshot) for ``task``.

        ``timeout_s``, ``stall_s``: this grading's own, where the grader's would hold (validation
        grades gold and its variants at once, each with its limits); None: the grader's.

        ``stop_early``: first grade the FAIL_TO_PASS tests alone (a whole grading of its own: fresh
        sandbox, canaries, cross-checks); when their outcomes already decide the reward (no F2P test
        passes: 0 whatever PASS_TO_PASS does; see :func:`~repo2env.verify.reward.decided_by_fail_to_pass`)
        or that grading failed, its result is the answer (``stopped_early``, PASS_TO_PASS not run);
        otherwise the patch is graded again in full, exactly as without it. A reward above 0 therefore
        only ever comes from a full grading, and the shortcut can only give 0 where the full grading
        gives 0 too (for a patch that passes its F2P tests alone but not beside the P2P ones, less)."""
        if not task.FAIL_TO_PASS:
            raise InputError(f"task {task.instance_id} has no FAIL_TO_PASS tests yet",
                             hint="run 'repo2env validate' first: it derives them")
        name = run_name or time.strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)
        own = _Limits(self.timeout_s if timeout_s is None else timeout_s, self.stall_s if stall_s is None else stall_s)
        if not stop_early or not task.PASS_TO_PASS:
            return self._grade(task, patch, mode=mode, run_name=name, own=own)
        first = self._grade(task, patch, mode=mode, run_name=f"{name}-f2p", own=own, fail_to_pass_only=True)
        if first.error is not None or first.tampered or decided_by_fail_to_pass(first.f2p_rate, mode):
            stopped = first.model_copy(update={"stopped_early": True})
            if stopped.log_dir:
                write_json(Path(stopped.log_dir) / "result.json", stopped)
            return stopped
        full = self._grade(task, patch, mode=mode, run_name=name, own=own)
        return full.model_copy(update={"duration_s": round(full.duration_s + first.duration_s, 3),
                                       "tests_duration_s": round(full.tests_duration_s + first.tests_duration_s, 3)})

    def _grade(self, task: Task, patch: str, *, mode: RewardMode, run_name: str, own: _Limits,
               fail_to_pass_only: bool = False) -> GradeResult:
        """One grading under its ``own`` limits; ``fail_to_pass_only``: run just the FAIL_TO_PASS tests (the
        canaries still keep clear of every test id of the task, and the configuration is the full grading's)."""
        spec = grading_spec(task, timeout_s=own.timeout_s)
        run_spec = spec.model_copy(update={"pass_to_pass": []}) if fail_to_pass_only else spec
        test_ids = run_spec.test_ids
        run_dir = self.logs_root / task.instance_id / run_name
        run_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        filtered = filter_patch(patch, spec.runner.protected_paths)
        write_capped_log(run_dir / "submitted.diff", patch)
        write_capped_log(run_dir / "applied.diff", filtered.patch)
        base = GradeResult(instance_id=task.instance_id, mode=mode, filtered_paths=list(filtered.dropped_paths),
                           log_dir=str(run_dir))
        if filtered.error is not None:  # git apply would refuse it whole: nothing of it is applied
            return self._finish(task, base.model_copy(update={
                "patch_applied": False, "error": f"the patch does not apply: git apply cannot read it ({filtered.error})",
                "tests": {test_id: TestStatus.MISSING for test_id in test_ids}}), run_dir, started)
        tampering = set(filtered.suspicious) - set(spec.gold_runner_references)
        if tampering:
            return self._finish(task, base.model_copy(update={
                "error": f"the patch reaches into the test runner ({', '.join(sorted(tampering))})",
                "tests": {test_id: TestStatus.MISSING for test_id in test_ids}}), run_dir, started)

        layout = GradingLayout.fresh()
        plan = spec.plan_canaries()
        run_ids = run_spec.run_ids(plan)
        settings = run_spec.script_settings(run_ids, layout)
        limits = self._limits_for(spec.timeout_s)
        archive = _inputs_archive(layout, private={
            "test.diff": spec.hidden_tests, "canaries.json": json.dumps(plan.definitions)}, files={
            "agent.diff": filtered.patch, **grading_scripts(), "grade.json": json.dumps(settings),
            "grade.json.sh": shell_assignments(settings), "allowed": "\0".join(filtered.kept_paths),
            f"plugin/{layout.plugin}.py": PLUGIN_SOURCE.format(fifo=layout.fifo),
        })
        sandbox = self._fresh_sandbox(task, limits)
        collector: Future | None = None
        try:
            # Three engine calls at once (each a round trip the next need not wait for): the inputs
            # are placed while the collector and the grading script start; each of those waits for
            # what it needs (the FIFO's folder; the archive's last entry, so every input is whole).
            # Nothing of the agent runs in the sandbox before the grading script applies the patch.
            placed = _PLACEMENTS.submit(sandbox.put_archive, "/tmp", archive)
            # The collector runs as root, beside the grading script: what it has read is out of the
            # tests' reach, and its output comes straight here.
            # With stall_s it also watches the outcomes come: none for that long stops the tests.
            collector = _COLLECTORS.submit(sandbox.exec, ["/bin/sh", "-c", COLLECTOR_SCRIPT, layout.fifo],
                                           timeout=spec.timeout_s + 60, user="root", idle_timeout=own.stall_s)
            result = sandbox.exec(["/bin/sh", "-c", _LAUNCHER, f"{layout.inputs}/{_READY}",
                                   f"{layout.inputs}/grade.sh", f"{layout.inputs}/grade.json"],
                                  timeout=spec.timeout_s + 30, workdir="/testbed")
            placed.result()  # an engine that could not place the inputs fails the grading loudly
            stream_result = _collected(collector)
            base = base.model_copy(update={"tests_duration_s": round(result.duration_s, 3)})
        except BaseException:
            sandbox.close()
            raise
        sandbox.close(wait=False)  # the result does not wait for the container's removal
        stream_text = stream_result.output if stream_result is not None and not stream_result.truncated else None
        if not spec.runner.is_pytest:
            # A language runner's run: its reporters write files the grading script returns once
            # every test process is dead, and (all but ava) stream the same
            # outcomes to the collector; read_script_run applies the same rules to them (a run cut
            # short earns nothing, the reports must agree with the stream, canaries must come out
            # as they must).
            run_plan = spec.runner.plan(run_ids, layout.report_dir, layout.fifo)
            reading = read_script_run(
                exit_code=result.exit_code, truncated=result.truncated, timed_out=result.timed_out,
                output=result.output, test_ids=test_ids, run_ids=run_ids, plan=plan, timeout_s=spec.timeout_s,
                session_statuses=spec.runner.session_statuses, read_reports=partial(spec.runner.read, run_plan),
                read_stream=partial(spec.runner.read_stream, run_plan) if run_plan.outcome_stream else None,
                stream_text=stream_text)
        else:
            reading = read_run(exit_code=result.exit_code, truncated=result.truncated, timed_out=result.timed_out,
                               output=result.output, stream_text=stream_text, test_ids=test_ids, run_ids=run_ids,
                               plan=plan, timeout_s=spec.timeout_s, session_statuses=spec.runner.session_statuses)
        write_capped_log(run_dir / "test_output.txt", reading.test_output)
        if reading.xml_text is not None:
            write_capped_log(run_dir / "junit.xml", reading.xml_text, cap=JUNIT_CAP_BYTES)
        write_capped_log(run_dir / "stream.jsonl", stream_result.output if stream_result is not None else "")
        if reading.script_finished:
            write_json(run_dir / "canaries.json", {
                "must_fail": list(plan.must_fail), "must_pass": list(plan.must_pass),
                "junit": {canary.test_id: reading.all_outcomes.get(canary.test_id) for canary in plan.canaries},
                "stream": {canary.test_id: reading.stream.status(canary.test_id) if reading.stream else None
                           for canary in plan.canaries}})
        if stream_result is not None and stream_result.stalled:
            # The collector stopped the tests: the run did not end on its own and earns nothing.
            reading = dataclasses.replace(reading, error=(
                f"{STALLED}: no outcome for {own.stall_s:.0f} s after the last one, so they were stopped "
                "(a run cut short earns nothing)"),
                tests={test_id: TestStatus.MISSING for test_id in reading.tests})
        failing = [test_id for test_id, status in reading.tests.items() if status != TestStatus.PASSED]
        failures = {}
        if reading.script_finished and not reading.tampered:
            # A language runner's reports are no JUnit XML: its failures are in the test output.
            failures = failure_lines(failing, reading.xml_text) if spec.runner.is_pytest else {
                test_id: f"{reading.tests[test_id].value}: see the runner's output" for test_id in failing[:20]}
        return self._finish(task, base.model_copy(update={
            "tests": reading.tests, "error": reading.error, "tampered": reading.tampered, "failures": failures,
            "patch_applied": reading.patch_applied, "pytest_exit": reading.test_status}), run_dir, started)

    def _finish(self, task: Task, result: GradeResult, run_dir: Path, started: float) -> GradeResult:
        final = scored(result, task).model_copy(update={"duration_s": round(time.monotonic() - started, 3)})
        write_json(run_dir / "result.json", final)
        return final


def scored(result: GradeResult, task: Task) -> GradeResult:
    """``result`` with its reward and the reward's parts computed from its outcomes against
    ``task``'s FAIL_TO_PASS / PASS_TO_PASS, under ``result.mode``."""
    parts = score(result.tests, task.FAIL_TO_PASS, task.PASS_TO_PASS, result.mode)
    return result.model_copy(update={"reward": parts.reward, "f2p_rate": parts.f2p_rate, "p2p_rate": parts.p2p_rate,
                                     "resolved": parts.resolved})


def rescore(run_dir: Path, task: Task, mode: RewardMode) -> GradeResult:
    """Re-read a grading's logs and score them under ``mode``, running nothing."""
    result_path = Path(run_dir) / "result.json"
    if not result_path.is_file():
        raise InputError(f"no result.json in {run_dir}")
    stored = GradeResult.model_validate_json(result_path.read_text())
    stream = Path(run_dir) / "stream.jsonl"
    tests = stored.tests
    # Only pytest's run has the live stream; a language runner's outcomes stay as its reports said.
    if stream.is_file() and stored.error is None and get_profile(task.language).runs_tests_as_pytest():
        # The live stream is where the outcomes came from (the report only agreed with it).
        live = parse_stream(stream.read_text())
        tests = {test_id: live.status(test_id) for test_id in stored.tests}
    return scored(stored.model_copy(update={"mode": mode, "tests": tests}), task)


def _collected(collector: Future):
    """The collector's result once the grading script has ended (every writer is dead by then),
    or None when it does not end."""
    try:
        return collector.result(timeout=_COLLECTOR_GRACE_S)
    except Exception:  # noqa: BLE001 - an unread stream fails the grading closed
        return None


def _inputs_archive(layout: GradingLayout, *, files: dict[str, str], private: dict[str, str]) -> bytes:
    """A tar for /tmp: the inputs folder (root's, read-only to the agent) and the private folder
    (the agent's, because pytest runs as the agent and writes its report there), which also holds
    the ``private`` files the grading script deletes before the tests run."""
    archive = io.BytesIO()
    now = int(time.time())
    inputs, private_dir = layout.inputs.removeprefix("/tmp/"), layout.private.removeprefix("/tmp/")
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, uid, mode in ((inputs, 0, 0o755), (inputs + "/plugin", 0, 0o755), (private_dir, AGENT_UID, 0o700)):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, mode, uid, uid, now
            tar.addfile(info)
        for folder, uid, mode, entries in ((inputs, 0, 0o644, files), (private_dir, AGENT_UID, 0o600, private)):
            for name, text in entries.items():
                payload = text.encode("utf-8", errors="surrogateescape")  # a patch's bytes, as they came
                info = tarfile.TarInfo(f"{folder}/{name}")
                info.size, info.mode, info.mtime, info.uid, info.gid = len(payload), mode, now, uid, uid
                tar.addfile(info, io.BytesIO(payload))
        ready = tarfile.TarInfo(f"{inputs}/{_READY}")  # last: the engine extracts in order
        ready.mode, ready.mtime = 0o644, now
        tar.addfile(ready, io.BytesIO(b""))
    return archive.getvalue()
