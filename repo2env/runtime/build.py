"""``repo2env build``: each task candidate -> a runnable environment (env image + task image).

Per task, with the recipe of the task's language (:class:`~repo2env.languages.build.BuildRecipe`):
infer the EnvSpec from the files at ``base_commit``, make the snapshot, then climb the install
ladder until a rung installs the project's own code (for Python: its import names resolve to
``/testbed``, in the env layer and in the task image; every rung keeps the editable install the one
that runs) and its tests load in a locked-down sandbox (pytest's collection; a JavaScript runner's
run of the touched test files). Steps that may wait on the network without end (the warm-up, the
collection check) run under a watchdog that stops them after ``stall_idle_s`` without progress and
names what they waited on. The images a failed rung built are removed. The task's ``env_spec``
records the rung, the images and ``env_ok``, or ``env_failed`` with the reason and the log. The loop over a tasks folder is the stage runner's
(:func:`repo2env.pipeline.stages.build_tasks_dir`): one task's failure never stops the batch, and a
re-run reuses every image that is still there.
"""

from __future__ import annotations

import re
import tempfile
import threading
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from repo2env import defaults
from repo2env.errors import BackendUnavailableError, BuildError, InputError, Repo2EnvError
from repo2env.jsonl import read_repository_record
from repo2env.languages import get_profile
from repo2env.languages.build import (
    COLLECTION_STALLED,
    COLLECTION_TIMEOUT,
    STALL_IDLE_S,
    WARMUP_STALLED,
    BuildRecipe,
    watchdog_verdict,
)
from repo2env.languages.python.spec.overrides import EnvOverride, override_hash
from repo2env.models import EnvSpec, Task
from repo2env.patches import parse
from repo2env.runtime.bootstrap import AGENT_UID
from repo2env.runtime.images import (
    ENV_TOOLS_LABEL,
    WARMUP_FETCHED_PATH,
    ImageStore,
    base_image,
    env_image_tag,
    env_tools_hash,
    task_image_tag,
)
from repo2env.runtime.sandbox import Runtime, SandboxLimits
from repo2env.runtime.snapshot import GitRepoFiles, make_snapshot

COLLECT_TIMEOUT_S = 300.0
# COLLECTION_TIMEOUT and COLLECTION_STALLED (how a hang's failure reason starts) end the ladder:
# another install would hang the same way, after one try of the same rung with the recipe's warm-up
# (data downloaded on first use). WARMUP_STALLED (the warm-up itself waited on a host that never
# answered) ends it too.


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
    """Whether ``task``'s recorded image is still on the engine, built under the same override, with
    the tools this repo2env ships in it (a recipe's reporters and probes, when they depend on no task:
    an image an older repo2env built lacks what its gradings would run)."""
    spec = task.env_spec
    if not (spec and spec.status == "env_ok" and spec.image and spec.image_digest
            and spec.override_hash == override_hash(override)
            and (image := store.find(spec.image)) is not None and image.id == spec.image_digest):
        return False
    shipped = get_profile(task.language).build_recipe().shipped_tools()
    return shipped is None or image.labels.get(ENV_TOOLS_LABEL) == env_tools_hash(shipped)


def build_task(task: Task, clone: Path, *, store: ImageStore, runtime: Runtime, logs_dir: Path,
               override: EnvOverride | None = None, collect_check: bool = True,
               bases: Sequence[str] | None = None, collect_timeout_s: float = COLLECT_TIMEOUT_S,
               stall_idle_s: float = STALL_IDLE_S) -> EnvSpec:
    """Build one task's images, climbing its language recipe's install ladder; never raises for the
    task's own failure (it is recorded in the returned spec), only for a missing engine. ``bases``
    are the base-image flavours the engine has (None: the ones every machine can make)."""
    files = GitRepoFiles(clone, task.base_commit)
    try:
        recipe = get_profile(task.language).build_recipe()
        touched = [path for patch in (task.patch, task.test_patch) for path in parse(patch).paths]
        inferred = recipe.infer_env_spec(files, files.commit_date(), override, bases, touched=touched,
                                         patches=(task.patch, task.test_patch))
        own = recipe.own_code(files)
    except Repo2EnvError as exc:
        return EnvSpec(status="env_failed", error=f"cannot infer the environment: {exc.message}",
                       override_hash=override_hash(override))
    inferred = inferred.model_copy(update={"override_hash": override_hash(override)})
    fingerprint = recipe.dependency_fingerprint(files)
    safe_id = re.sub(r"[^A-Za-z0-9_.-]", "_", task.instance_id)
    last_error, last_log = "no install rung to try", None
    with tempfile.TemporaryDirectory(prefix="repo2env-snapshot-") as scratch:
        snapshot_dir = Path(scratch) / "snapshot"
        try:
            snapshot_sha = make_snapshot(clone, task.base_commit, snapshot_dir)
        except BuildError as exc:
            return inferred.model_copy(update={"status": "env_failed", "error": exc.message})
        pending = deque(recipe.install_ladder(inferred, files, override, bases))
        learned: list[str] = []  # Debian packages a source build asked for: later rungs get them too
        while pending:
            rung, candidate = pending.popleft()
            packages = list(dict.fromkeys([*candidate.system_packages, *learned]))
            candidate = recipe.prepare_rung(candidate.model_copy(update={"deps_fingerprint": fingerprint, "rung": rung,
                                                                         "system_packages": packages}), own)
            log_path = logs_dir / f"{safe_id}-{rung}.log"
            env_tag = env_image_tag(candidate)
            with _env_users_guard:
                _env_users[env_tag] += 1
            try:
                problem, problem_log, image, dockerfiles, facts = _try_rung(
                    task, candidate, recipe, own, snapshot_dir, snapshot_sha, store=store, runtime=runtime,
                    log_path=log_path, collect_check=collect_check, collect_timeout_s=collect_timeout_s,
                    stall_idle_s=stall_idle_s)
            finally:
                with _env_users_guard:
                    _env_users[env_tag] -= 1
            if problem is None and image is not None:
                if candidate.warmup:
                    candidate = candidate.model_copy(update={"needs_network": _warmup_fetched(runtime, image.tag)})
                return candidate.model_copy(update={
                    "status": "env_ok", "env_image": env_tag, "image": image.tag,
                    "image_digest": image.image_id, "snapshot_commit": snapshot_sha, "error": None,
                    "log_path": str(log_path), "dockerfiles": dockerfiles, **facts,
                })
            last_error, last_log = f"{rung}: {problem}", problem_log
            _discard_rung(store, task, env_tag)
            if "disk is full" in (problem or ""):
                break  # no rung can succeed on a full disk
            if image is None:
                failed_log = _read_log(problem_log)
                pending = deque(recipe.rungs_after_failure(failed_log, (rung, candidate), list(pending)))
                missing = [name for name in recipe.packages_needed(failed_log)
                           if name not in candidate.system_packages]
                if missing:
                    # A dependency of the day without a wheel for this Python: the same rung again,
                    # with the compiler and headers its source build asked for.
                    learned.extend(missing)
                    pending.appendleft((f"{rung}+{'compiler' if 'build-essential' in missing else 'headers'}", candidate))
                continue
            if (problem or "").startswith((COLLECTION_TIMEOUT, COLLECTION_STALLED, WARMUP_STALLED)):
                # A hang is no install problem: no other rung. Tests that download data on first use
                # hang in the network-less sandbox; a warm-up with network may cure it.
                if not candidate.warmup and recipe.warmup_command:
                    pending = deque([(f"{rung}+warmup", candidate.model_copy(update={"warmup": recipe.warmup_command}))])
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


def _try_rung(task: Task, candidate: EnvSpec, recipe: BuildRecipe, own, snapshot_dir: Path, snapshot_sha: str, *,
              store: ImageStore, runtime: Runtime, log_path: Path, collect_check: bool,
              collect_timeout_s: float = COLLECT_TIMEOUT_S, stall_idle_s: float = STALL_IDLE_S):
    """(problem or None, its log, the task image or None when an image build failed, the Dockerfile
    of each layer, the spec fields the recipe read from a task image that passed) for one rung."""
    try:
        env = store.ensure_env(candidate, snapshot_dir, repo=task.repo, log_path=log_path,
                               layer=recipe.env_layer(candidate, own, task.scm_version, agent_uid=AGENT_UID))
        image = store.ensure_task(task, env.tag, snapshot_dir, snapshot_sha, log_path=log_path.with_suffix(".task.log"),
                                  layer=recipe.task_layer(candidate, own, task), warmup=candidate.warmup,
                                  stall_idle_s=stall_idle_s)
    except BackendUnavailableError:
        raise
    except BuildError as exc:
        explained = recipe.explain_failure(_read_log(exc.log_path), candidate)
        return (f"image build failed: {explained}" if explained else exc.message), exc.log_path, None, {}, {}
    dockerfiles = {"base": base_image(candidate), "env": env.dockerfile, "task": image.dockerfile}
    task_log = str(log_path.with_suffix(".task.log"))
    if candidate.warmup and (stall := watchdog_verdict(_read_log(task_log))):
        # It waited on a host that never answered: the collection check would wait on it again.
        return f"{WARMUP_STALLED}: {stall}", task_log, image, dockerfiles, {}
    check_log = log_path.with_suffix(".collect.log")
    with runtime.start_image(image.tag, limits=SandboxLimits(exec_timeout_s=collect_timeout_s)) as sandbox:
        problem = recipe.check_image(sandbox, task, candidate, own, log_path=check_log, collect_check=collect_check,
                                     timeout_s=collect_timeout_s, stall_idle_s=stall_idle_s)
        facts = recipe.image_facts(sandbox, candidate, task) if problem is None else {}
    return problem, str(check_log), image, dockerfiles, facts


def _discard_rung(store: ImageStore, task: Task, env_tag: str) -> None:
    """Remove the task image a failed rung left, and its env image unless another task's image is
    built on it or another rung of this process is using it."""
    store.discard(task_image_tag(task))
    with _env_users_guard:
        if _env_users[env_tag] > 0:
            return
        if not store.used_by_task_images(env_tag):
            store.discard(env_tag)


def tasks_dirs(root: Path, explicit: Sequence[Path]) -> list[Path]:
    """The task folders to work on: each ``explicit`` folder, or the folders below it with a
    tasks.jsonl when it has none itself (as ``validate ROOT`` searches); without ``explicit``, every
    folder under ``root`` with a tasks.jsonl. Each folder once, in the order given then found."""
    if explicit:
        found: list[Path] = []
        for folder in explicit:
            below = [folder] if (folder / "tasks.jsonl").is_file() else sorted(
                path.parent for path in folder.glob("**/tasks.jsonl"))
            if not below:
                raise InputError(f"no tasks.jsonl in or below {folder}", hint="run 'repo2env mine' first, or check --from")
            found.extend(below)
        return list(dict.fromkeys(found))
    found = sorted(path.parent for path in root.glob("**/tasks.jsonl"))
    if not found:
        raise InputError(f"no tasks.jsonl under {root}", hint="run 'repo2env mine' (or 'make demo') first")
    return found
