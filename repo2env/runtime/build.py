"""``repo2env build``: each task candidate -> a runnable environment (env image + task image).

Per task: infer the EnvSpec from the files at ``base_commit``, make the snapshot, then climb the
install ladder until a rung installs the project's own code (its import names resolve to
``/testbed``, in the env layer and in the task image) and lets pytest collect the test suite in a
locked-down sandbox. Every rung's install keeps the project's editable install the one that runs
(:func:`~repo2env.runtime.own_code.protect_own_install`); the images a failed rung built are
removed. The task's ``env_spec`` records the rung, the images and ``env_ok``, or ``env_failed``
with the reason and the log. The loop over a tasks folder is the stage runner's
(:func:`repo2env.pipeline.stages.build_tasks_dir`): one task's failure never stops the batch, and a
re-run reuses every image that is still there.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import tempfile
import threading
import tomllib
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from repo2env import defaults
from repo2env.errors import BackendUnavailableError, BuildError, InputError, Repo2EnvError
from repo2env.jsonl import read_repository_record
from repo2env.mine.split import classify_path
from repo2env.models import EnvSpec, Task
from repo2env.patches import parse
from repo2env.runtime.bootstrap import base_image_tag
from repo2env.runtime.images import (
    PROBE,
    STALL_IDLE_S,
    WARMUP_FETCHED_PATH,
    ImageStore,
    env_image_tag,
    task_image_tag,
    watched,
)
from repo2env.runtime.own_code import OwnCode, protect_own_install, read_own_code, reinstall_command
from repo2env.runtime.own_code_probe import MARKER as OWN_CODE_MARKER
from repo2env.runtime.sandbox import Runtime, SandboxLimits
from repo2env.runtime.snapshot import GitRepoFiles, make_snapshot
from repo2env.runtime.spec import (
    AVAILABLE_PYTHONS,
    WARMUP_COLLECT,
    build_packages_needed,
    exempt_from_pin,
    infer_env_spec,
    install_failure_reason,
    install_ladder,
    old_setuptools_needed,
    releases_gone_before_pin,
    split_editable_build,
)
from repo2env.runtime.spec.overrides import EnvOverride, override_hash
from repo2env.runtime.watchdog import MARKER as WATCHDOG_MARKER

COLLECT_TIMEOUT_S = 300.0
#: How a collection timeout's failure reason starts. It ends the ladder (another install would hang
#: the same way), after one try of the same rung with a warm-up (data downloaded on first use).
COLLECTION_TIMEOUT = "test collection timed out"
#: The same for a collection the watchdog stopped: no output or CPU progress for STALL_IDLE_S.
COLLECTION_STALLED = "test collection stalled"
#: How a warm-up's stall starts its reason (it names the hosts waited on); it ends the ladder.
WARMUP_STALLED = "the warm-up stalled"
_DEPENDENCY_FILE = re.compile(
    r"^(?:pyproject\.toml|setup\.py|setup\.cfg|tox\.ini|Pipfile|poetry\.lock|uv\.lock"
    r"|[^/]*requirements[^/]*\.(?:txt|in)|requirements/[^/]+\.(?:txt|in))$"
)


@dataclass(frozen=True)
class BuildOptions:
    """How ``repo2env build`` runs."""

    jobs: int = defaults.BUILD_JOBS
    overrides: dict[str, EnvOverride] = field(default_factory=dict)
    instance_ids: frozenset[str] = frozenset()
    collect_check: bool = True
    collect_timeout_s: float = COLLECT_TIMEOUT_S  #: how long the collection check may take
    stall_idle_s: float = STALL_IDLE_S  #: how long a warm-up or collection check may make no progress


# Env images a rung of this process is using right now: a failed rung never removes one of them.
_env_users: Counter[str] = Counter()
_env_users_guard = threading.Lock()


@dataclass
class BuildSummary:
    """What one ``build`` run did."""

    tasks_path: Path
    ok: int = 0
    failed: int = 0
    reused: int = 0
    env_images: dict[str, int] = field(default_factory=dict)  # env image -> tasks using it
    failures: dict[str, str] = field(default_factory=dict)  # instance id -> reason

    def add(self, task: Task, spec: EnvSpec, reused: bool) -> None:
        """Count one built (or failed) task."""
        if spec.status == "env_ok":
            self.ok += 1
            self.reused += int(reused)
            if spec.env_image:
                self.env_images[spec.env_image] = self.env_images.get(spec.env_image, 0) + 1
        else:
            self.failed += 1
            self.failures[task.instance_id] = spec.error or "unknown"


def read_source_clone(tasks_dir: Path) -> Path:
    """Where the repository of a tasks folder lives (its repository record, written by ``mine``)."""
    return Path(read_repository_record(tasks_dir).clone_path)


def still_built(task: Task, store: ImageStore, override: EnvOverride | None = None) -> bool:
    """Whether ``task``'s recorded image is still on the engine, built under the same override."""
    spec = task.env_spec
    return bool(spec and spec.status == "env_ok" and spec.image and spec.image_digest
                and spec.override_hash == override_hash(override)
                and (image := store.find(spec.image)) is not None and image.id == spec.image_digest)


def build_task(task: Task, clone: Path, *, store: ImageStore, runtime: Runtime, logs_dir: Path,
               override: EnvOverride | None = None, collect_check: bool = True,
               available: Sequence[str] = AVAILABLE_PYTHONS, collect_timeout_s: float = COLLECT_TIMEOUT_S,
               stall_idle_s: float = STALL_IDLE_S) -> EnvSpec:
    """Build one task's images, climbing the install ladder; never raises for the task's own failure
    (it is recorded in the returned spec), only for a missing engine."""
    files = GitRepoFiles(clone, task.base_commit)
    try:
        inferred = infer_env_spec(files, files.commit_date(), override, available)
        own = read_own_code(files)
    except Repo2EnvError as exc:
        return EnvSpec(status="env_failed", error=f"cannot infer the environment: {exc.message}",
                       override_hash=override_hash(override))
    inferred = inferred.model_copy(update={"override_hash": override_hash(override)})
    fingerprint = dependency_fingerprint(files)
    safe_id = re.sub(r"[^A-Za-z0-9_.-]", "_", task.instance_id)
    last_error, last_log = "no install rung to try", None
    with tempfile.TemporaryDirectory(prefix="repo2env-snapshot-") as scratch:
        snapshot_dir = Path(scratch) / "snapshot"
        try:
            snapshot_sha = make_snapshot(clone, task.base_commit, snapshot_dir)
        except BuildError as exc:
            return inferred.model_copy(update={"status": "env_failed", "error": exc.message})
        pending = deque(install_ladder(inferred, files, override, available))
        learned: list[str] = []  # Debian packages a source build asked for: later rungs get them too
        exempt: dict[str, str] = {}  # packages whose releases of the pin's time are gone: likewise
        split_build = False  # a dependency's sdist needs the setuptools of its day: likewise
        while pending:
            rung, candidate = pending.popleft()
            packages = list(dict.fromkeys([*candidate.system_packages, *learned]))
            install = exempt_from_pin(protect_own_install(candidate.install, own), exempt)
            if split_build:
                install = protect_own_install(split_editable_build(install, candidate.python), own)
            candidate = candidate.model_copy(update={"deps_fingerprint": fingerprint, "rung": rung,
                                                     "system_packages": packages, "install": install})
            log_path = logs_dir / f"{safe_id}-{rung}.log"
            env_tag = env_image_tag(candidate)
            with _env_users_guard:
                _env_users[env_tag] += 1
            try:
                problem, problem_log, image, dockerfiles, pytest_version = _try_rung(
                    task, candidate, own, snapshot_dir, snapshot_sha, store=store, runtime=runtime, log_path=log_path,
                    collect_check=collect_check, collect_timeout_s=collect_timeout_s, stall_idle_s=stall_idle_s)
            finally:
                with _env_users_guard:
                    _env_users[env_tag] -= 1
            if problem is None and image is not None:
                if candidate.warmup:
                    candidate = candidate.model_copy(update={"needs_network": _warmup_fetched(runtime, image.tag)})
                return candidate.model_copy(update={
                    "status": "env_ok", "env_image": env_tag, "image": image.tag,
                    "image_digest": image.image_id, "error": None, "log_path": str(log_path),
                    "dockerfiles": dockerfiles, "pytest_version": pytest_version,
                })
            last_error, last_log = f"{rung}: {problem}", problem_log
            _discard_rung(store, task, env_tag)
            if "disk is full" in (problem or ""):
                break  # no rung can succeed on a full disk
            if image is None:
                log = _read_log(problem_log)
                gone = {name: day for name, day in releases_gone_before_pin(log).items() if exempt.get(name) != day}
                if gone and candidate.date_pin:
                    # The index lost every release of the pin's time of a package (atomicwrites
                    # before 2022): the same rung again, with that one package unpinned that far.
                    exempt.update(gone)
                    pending.appendleft((f"{rung}+exempt", candidate))
                    continue
                if (not split_build and candidate.date_pin and old_setuptools_needed(log)
                        and split_editable_build(candidate.install, candidate.python) != candidate.install):
                    # markupsafe 1.0's sdist imports setuptools.Feature, gone long before the
                    # setuptools an editable install needs: the same rung again, the project's
                    # editable install apart from its dependencies' builds.
                    split_build = True
                    pending.appendleft((f"{rung}+split-build", candidate))
                    continue
                missing = [name for name in build_packages_needed(log) if name not in candidate.system_packages]
                if missing:
                    # A dependency of the day without a wheel for this Python: the same rung again,
                    # with the compiler and headers its source build asked for.
                    learned.extend(missing)
                    pending.appendleft((f"{rung}+{'compiler' if 'build-essential' in missing else 'headers'}", candidate))
                continue
            if (problem or "").startswith((COLLECTION_TIMEOUT, COLLECTION_STALLED, WARMUP_STALLED)):
                # A hang is no install problem: no other rung. Tests that download data on first use
                # hang in the network-less sandbox; a warm-up with network may cure it.
                if not candidate.warmup:
                    pending = deque([(f"{rung}+warmup", candidate.model_copy(update={"warmup": WARMUP_COLLECT}))])
                    continue
                break
    return inferred.model_copy(update={"status": "env_failed", "error": last_error, "log_path": last_log,
                                       "deps_fingerprint": fingerprint})


def _warmup_fetched(runtime: Runtime, image: str) -> bool:
    """Whether the task image's warm-up wrote files (data the tests fetch from the network)."""
    with runtime.start_image(image, limits=SandboxLimits(exec_timeout_s=30)) as sandbox:
        result = sandbox.exec(["cat", WARMUP_FETCHED_PATH], timeout=30)
    return result.exit_code == 0 and bool(result.output.strip())


def _read_log(path: str | None) -> str:
    try:
        return Path(path).read_text(errors="replace") if path else ""
    except OSError:
        return ""


def _try_rung(task: Task, candidate: EnvSpec, own: OwnCode, snapshot_dir: Path, snapshot_sha: str, *,
              store: ImageStore, runtime: Runtime, log_path: Path, collect_check: bool,
              collect_timeout_s: float = COLLECT_TIMEOUT_S, stall_idle_s: float = STALL_IDLE_S):
    """(problem or None, its log, the task image or None when an image build failed, the Dockerfile
    of each layer, the pytest version the image runs) for one rung."""
    try:
        env = store.ensure_env(candidate, snapshot_dir, repo=task.repo, log_path=log_path, own=own,
                               scm_version=task.scm_version)
        image = store.ensure_task(task, env.tag, snapshot_dir, snapshot_sha, log_path=log_path.with_suffix(".task.log"),
                                  vcs_version=own.vcs_version, warmup=candidate.warmup, stall_idle_s=stall_idle_s)
    except BackendUnavailableError:
        raise
    except BuildError as exc:
        explained = install_failure_reason(_read_log(exc.log_path), candidate.python, candidate.date_pin)
        return (f"image build failed: {explained}" if explained else exc.message), exc.log_path, None, {}, None
    dockerfiles = {"base": base_image_tag(candidate.python), "env": env.dockerfile, "task": image.dockerfile}
    if candidate.warmup and (stall := watchdog_verdict(_read_log(str(log_path.with_suffix(".task.log"))))):
        # It waited on a host that never answered: the collection check would wait on it again.
        return f"{WARMUP_STALLED}: {stall}", str(log_path.with_suffix(".task.log")), image, dockerfiles, None
    check_log = log_path.with_suffix(".collect.log")
    editable = reinstall_command(candidate.install, own.distribution) is not None
    problem, pytest_version = _image_problem(runtime, image.tag, task, own, editable=editable, log_path=check_log,
                                             collect_check=collect_check, timeout_s=collect_timeout_s,
                                             stall_idle_s=stall_idle_s)
    return problem, str(check_log), image, dockerfiles, pytest_version


def _discard_rung(store: ImageStore, task: Task, env_tag: str) -> None:
    """Remove the task image a failed rung left, and its env image unless another task's image is
    built on it or another rung of this process is using it."""
    store.discard(task_image_tag(task))
    with _env_users_guard:
        if _env_users[env_tag] > 0:
            return
        if not store.used_by_task_images(env_tag):
            store.discard(env_tag)


def _image_problem(runtime: Runtime, image: str, task: Task, own: OwnCode, *, editable: bool, log_path: Path,
                   collect_check: bool, timeout_s: float = COLLECT_TIMEOUT_S,
                   stall_idle_s: float = STALL_IDLE_S) -> tuple[str | None, str | None]:
    """(None when the task image runs the project's own code from /testbed and (``collect_check``)
    pytest can collect the tests the PR touches that exist at the base (or the suite); the version
    of the pytest it runs, when it has one)."""
    touched = [path for path in _patch_paths(task.test_patch) if classify_path(path) == "test" and path.endswith(".py")
               and not path.endswith("conftest.py")]
    probe = shlex.join(["python", PROBE, "check", json.dumps(own.probe_arguments(editable=editable))])
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with runtime.start_image(image, limits=SandboxLimits(exec_timeout_s=timeout_s)) as sandbox:
        checked = sandbox.exec(probe, timeout=60)
        log_path.write_text(f"$ {probe}\n{checked.output}\n(exit {checked.exit_code})\n")
        version = sandbox.exec(["python", "-c", "import pytest; print(pytest.__version__)"], timeout=60)
        pytest_version = version.output.strip().splitlines()[-1] if version.exit_code == 0 and version.output.strip() else None
        if checked.exit_code != 0:
            reasons = [line.split(OWN_CODE_MARKER, 1)[1] for line in checked.output.splitlines() if OWN_CODE_MARKER in line]
            detail = "; ".join(reasons) if reasons else checked.output.strip()[-200:]
            return f"the project's own code is not what runs in the task image: {detail}"[:400], pytest_version
        if not collect_check:
            return None, pytest_version
        existing = [path for path in touched if sandbox.exec(["test", "-f", path], timeout=10).exit_code == 0]
        command = f"python -m pytest --collect-only -q -p no:cacheprovider {' '.join(map(shlex.quote, existing))}"
        result = sandbox.exec(watched(command, idle_s=stall_idle_s), timeout=timeout_s)
        ran = _run_one_test(sandbox, result.output, timeout_s, stall_idle_s) if result.exit_code == 0 else None
    with log_path.open("a") as log:
        log.write(f"$ {command}\n{result.output}\n(exit {result.exit_code})\n")
        if ran is not None:
            log.write(f"$ {ran[0]}\n{ran[1].output}\n(exit {ran[1].exit_code})\n")
    if result.timed_out:
        return f"{COLLECTION_TIMEOUT} after {timeout_s:.0f} s", pytest_version
    if stall := watchdog_verdict(result.output):
        return f"{COLLECTION_STALLED}: {stall}", pytest_version
    if result.exit_code not in (0, 5):  # 5: nothing collected, which is not a broken environment
        lines = [line for line in result.output.splitlines() if "Error" in line or "error" in line]
        return (f"test collection failed (exit {result.exit_code}): "
                f"{(lines[-1] if lines else result.output[-200:]).strip()[:200]}"), pytest_version
    if ran is not None and not ran[1].timed_out and (ran[1].exit_code == 3 or "INTERNALERROR>" in ran[1].output):
        lines = [line for line in ran[1].output.splitlines() if line.startswith("INTERNALERROR>")]
        return (f"tests collect but cannot run (INTERNALERROR): "
                f"{(lines[-1] if lines else ran[1].output[-200:]).strip()[:200]}"), pytest_version
    return None, pytest_version


def _run_one_test(sandbox, collected: str, timeout_s: float, stall_idle_s: float = STALL_IDLE_S):
    """(command, result) of running the first test the collection listed, or None when it listed none.

    Collection does not run pytest's run-time hooks: a ``filterwarnings`` naming a module a rung left
    out (werkzeug's ``requests.packages.urllib3``) or a plugin broken at run time stops every test
    with an INTERNALERROR, which only a run shows. Whether the test passes does not matter here."""
    first = next((line.strip() for line in collected.splitlines() if "::" in line and not line.startswith(" ")), None)
    if first is None:
        return None
    command = f"python -m pytest -q -p no:cacheprovider -x {shlex.quote(first)}"
    return command, sandbox.exec(watched(command, idle_s=stall_idle_s), timeout=min(timeout_s, 120))


def watchdog_verdict(output: str) -> str | None:
    """What the watchdog said when it stopped a command (its last marker line of ``output``, e.g.
    ``stalled after 60 s without output, CPU or network progress; waiting on host:443 (...)``), or None."""
    lines = [line for line in output.splitlines() if line.lstrip("\x1b[0-9;m").startswith(WATCHDOG_MARKER)]
    return lines[-1].split(WATCHDOG_MARKER, 1)[1].strip()[:300] if lines else None


def _patch_paths(patch: str) -> list[str]:
    """The path of each file of ``patch`` after it (before it, for a deletion)."""
    return [file.path for file in parse(patch).files]


def dependency_fingerprint(files: GitRepoFiles) -> str:
    """A hash of what decides the installed dependencies at a commit: the dependency files (pyproject
    without its version), and the package layout the editable install points at."""
    digest = hashlib.sha256()
    for path in sorted(name for name in files.listing() if _DEPENDENCY_FILE.match(name)):
        text = files.read(path) or ""
        if path == "pyproject.toml":
            text = _pyproject_without_version(text)
        digest.update(f"{path}\0{text}\0".encode())
    layout = sorted({"/".join(name.split("/")[:2]) for name in files.listing()
                     if name.endswith("/__init__.py") and name.count("/") <= 2})
    digest.update("\n".join(layout).encode())
    return digest.hexdigest()[:16]


def _pyproject_without_version(text: str) -> str:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return text
    project = dict(document.get("project", {}))
    project.pop("version", None)
    return repr({key: document[key] for key in sorted(document) if key != "project"} | {"project": project})


def tasks_dirs(root: Path, explicit: Sequence[Path]) -> list[Path]:
    """The task folders to work on: ``explicit`` ones, else every folder under ``root`` with a tasks.jsonl."""
    if explicit:
        for folder in explicit:
            if not (folder / "tasks.jsonl").is_file():
                raise InputError(f"no tasks.jsonl in {folder}", hint="run 'repo2env mine' first, or check --from")
        return list(explicit)
    found = sorted(path.parent for path in root.glob("**/tasks.jsonl"))
    if not found:
        raise InputError(f"no tasks.jsonl under {root}", hint="run 'repo2env mine' (or 'make demo') first")
    return found
