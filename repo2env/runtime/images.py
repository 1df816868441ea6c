"""Layered images: base (OS + Python, + Node ...) -> env (dependencies, shared) -> task (the snapshot).

An env image is keyed by the hash of its spec (base, install commands, date pin, dependency
files), so every task whose dependencies did not change shares it. What its layer runs is the task
language's recipe's (:class:`~repo2env.languages.build.EnvLayer`): for Python, the install, the
proof that the project's own code is what got installed (``own_code_probe.py check``), the list of
files the install generated, and ``/testbed`` emptied (site-packages and an editable hook pointing
at it stay); for JavaScript, the install of ``node_modules`` with the tracked files removed after.

A task image adds the snapshot (files + one-commit git repo) owned by the agent, then what the
recipe's :class:`~repo2env.languages.build.TaskLayer` sets and runs (for Python, the real version in
its environment, ``SETUPTOOLS_SCM_PRETEND_VERSION`` ..., and the editable install again when it
generated files). Every image carries labels (kind, repo, commit, spec hash, repo2env version) for
``images ls`` / ``images gc``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from repo2env import __version__
from repo2env.errors import BuildError, InputError, StoppingError
from repo2env.languages.build import OWN_CODE_MARKER, STALL_IDLE_S, TOOLS_DIR, EnvLayer, TaskLayer, watched
from repo2env.models import EnvSpec, Task
from repo2env.runtime.backend import Backend, ImageInfo
from repo2env.runtime.backends.keepalive import BASELINE_PATH, BASELINE_SCRIPT
from repo2env.runtime.backends.lifecycle import stopping
from repo2env.runtime.bootstrap import AGENT_UID, BASE_REPOSITORY, ensure_base_image
from repo2env.runtime.package_access import PackageAccess

KIND_LABEL = "repo2env.kind"
NAMESPACE_LABEL = "repo2env.namespace"
#: A hash of the env image's /opt/repo2env tools (own-code probe, reinstall script, watchdog).
ENV_TOOLS_LABEL = "repo2env.env_tools"
#: The watchdog every env image carries (:func:`repo2env.languages.build.watched` runs it).
WATCHDOG_SOURCE = Path(__file__).with_name("watchdog.py")


#: A task layer that only adds the snapshot.
NO_TASK_STEPS = TaskLayer()


def image_namespace() -> str:
    """The Docker repository prefix for env and task images: ``REPO2ENV_IMAGE_NAMESPACE``, default
    ``repo2env``. Separate namespaces on one engine (two checkouts, two CI jobs, two users) never
    overwrite or garbage-collect each other's env and task images; base images are shared."""
    namespace = os.environ.get("REPO2ENV_IMAGE_NAMESPACE", "").strip().lower() or "repo2env"
    if not re.fullmatch(r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*", namespace):
        raise InputError(f"REPO2ENV_IMAGE_NAMESPACE={namespace!r} is not a Docker repository name",
                         hint="use lower-case letters, digits, '.', '_', '-' and '/'")
    return namespace

_env_locks: dict[str, threading.Lock] = {}
_env_locks_guard = threading.Lock()


@dataclass(frozen=True)
class BuiltImage:
    """An image that exists, and whether this call built it."""

    tag: str
    image_id: str
    built: bool
    size_bytes: int = 0
    dockerfile: str = ""


def env_tools_hash(tools: Mapping[str, str]) -> str:
    """The ``repo2env.env_tools`` label of an env image (and the task images on it) that ships
    ``tools`` (a recipe's, with the watchdog every env image has)."""
    shipped = {**tools, "watchdog.py": WATCHDOG_SOURCE.read_text()}
    return hashlib.sha256(json.dumps(shipped, sort_keys=True).encode()).hexdigest()[:16]


def env_image_tag(spec: EnvSpec) -> str:
    """``repo2env/env:py3.11-<spec hash>`` (``env:node18-...`` on a Node base)."""
    return f"{image_namespace()}/env:{spec.base_flavour()}-{spec.spec_hash()}"


def local_base_flavours(backend: Backend) -> tuple[str, ...]:
    """The flavours (``py3.11``, ``node18``) of every finished base image on ``backend``, sorted."""
    prefix = f"{BASE_REPOSITORY}:"
    return tuple(sorted({tag.removeprefix(prefix) for image in backend.images.list(repository=BASE_REPOSITORY)
                         for tag in image.tags if tag.startswith(prefix)}))


def base_image(spec: EnvSpec) -> str:
    """The base image ``spec``'s env layer starts from: ``repo2env/base:<flavour>`` (``py3.11``)."""
    return f"{BASE_REPOSITORY}:{spec.base_flavour()}"


def task_image_tag(task: Task) -> str:
    """``repo2env/task:<instance id>`` (lower-cased, as Docker tags must be)."""
    return f"{image_namespace()}/task:{re.sub(r'[^a-z0-9_.-]', '-', task.instance_id.lower())[:128]}"


class ImageStore:
    """Builds and finds env and task images on one backend (Dockerfiles, labels, reuse and
    garbage collection are decided here; the backend's :class:`~repo2env.runtime.backend.Images`
    only carries them out)."""

    def __init__(self, backend: Backend, *, access: PackageAccess | None = None) -> None:
        self.backend = backend
        self.images = backend.images
        self.access = access or PackageAccess.from_environment()

    def find(self, tag: str) -> ImageInfo | None:
        """The image with ``tag``, or None."""
        return self.images.get(tag)

    def ensure_env(self, spec: EnvSpec, snapshot_dir: Path, *, repo: str, log_path: Path,
                   layer: EnvLayer) -> BuiltImage:
        """The env image for ``spec``, built from the repository files in ``snapshot_dir`` if missing.

        ``layer`` (the task's language recipe's) says what the layer runs: its install, and the check
        that the project's own code is what got installed, which fails the build otherwise; its
        ``build_args`` reach the build (the version the snapshot cannot tell).
        Concurrent callers with the same spec wait for one build. Raises BuildError (with the log)
        when an install command or the check fails."""
        tag = env_image_tag(spec)
        with _env_locks_guard:
            lock = _env_locks.setdefault(tag, threading.Lock())
        with lock:
            tools_hash = env_tools_hash(layer.tools)
            tools = {**layer.tools, "watchdog.py": WATCHDOG_SOURCE.read_text()}
            dockerfile = env_dockerfile(spec, self.access, layer)
            existing = self.find(tag)
            # An env image whose /opt/repo2env tools differ (an older repo2env) is built again.
            if existing is not None and existing.labels.get(ENV_TOOLS_LABEL) == tools_hash:
                return BuiltImage(tag, existing.id, built=False, size_bytes=existing.size_bytes, dockerfile=dockerfile)
            if self.find(base_image(spec)) is None:
                self._make_base_image(spec, layer, log_path)
            labels = {KIND_LABEL: "env", NAMESPACE_LABEL: image_namespace(), "repo2env.repo": repo,
                      "repo2env.spec_hash": spec.spec_hash(), **layer.labels, "repo2env.version": __version__,
                      ENV_TOOLS_LABEL: tools_hash}
            image = self._build(dockerfile, snapshot_dir, tag, labels, log_path,
                                buildargs={**self._index_args(), **layer.build_args}, tools=tools)
            return BuiltImage(tag, image.id, built=True, size_bytes=image.size_bytes, dockerfile=dockerfile)

    def ensure_task(self, task: Task, env_tag: str, snapshot_dir: Path, snapshot_sha: str, *,
                    log_path: Path, layer: TaskLayer = NO_TASK_STEPS, warmup: str | None = None,
                    stall_idle_s: float = STALL_IDLE_S) -> BuiltImage:
        """The task image: ``env_tag`` plus the snapshot, then what ``layer`` (the task's language
        recipe's) runs, then the ``warmup`` command (see :func:`warmup_dockerfile_lines`; stopped
        after ``stall_idle_s`` without progress). Reused when it exists for the same env, snapshot
        and Dockerfile."""
        tag = task_image_tag(task)
        dockerfile = task_dockerfile(env_tag, self.access, layer, warmup=warmup, stall_idle_s=stall_idle_s)
        recipe = hashlib.sha256(dockerfile.encode()).hexdigest()[:16]
        existing = self.find(tag)
        env = self.find(env_tag)
        if existing is not None and env is not None:
            labels = existing.labels
            if (labels.get("repo2env.snapshot") == snapshot_sha and labels.get("repo2env.env_id") == env.id
                    and labels.get("repo2env.recipe") == recipe):
                return BuiltImage(tag, existing.id, built=False, size_bytes=existing.size_bytes, dockerfile=dockerfile)
        labels = {KIND_LABEL: "task", NAMESPACE_LABEL: image_namespace(), "repo2env.repo": task.repo, "repo2env.instance_id": task.instance_id,
                  "repo2env.commit": task.base_commit, "repo2env.snapshot": snapshot_sha,
                  "repo2env.env_image": env_tag, "repo2env.env_id": env.id if env else "",
                  "repo2env.scm_version": task.scm_version, "repo2env.version": __version__,
                  "repo2env.recipe": recipe}
        image = self._build(dockerfile, snapshot_dir, tag, labels, log_path, buildargs=self._index_args())
        return BuiltImage(tag, image.id, built=True, size_bytes=image.size_bytes, dockerfile=dockerfile)

    def _make_base_image(self, spec: EnvSpec, layer: EnvLayer, log_path: Path) -> None:
        """Make the missing Python base image of ``spec`` now (the first task that needs it waits;
        the others wait on the bootstrap lock), or raise BuildError saying why it cannot be made.
        Another flavour (``node20``) is the recipe's ``base_hint`` to make."""
        if spec.base is not None:
            raise BuildError(f"base image {base_image(spec)} is missing",
                             hint=layer.base_hint or "run 'repo2env runtime bootstrap'")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("a") as log:
            log.write(f"base image {base_image(spec)} is missing: making it\n")
            try:
                made = ensure_base_image(self.backend, spec.python, access=self.access,
                                         progress=lambda message: (log.write(message + "\n"), log.flush()))
            except BuildError as exc:
                log.write(f"{exc.message}\n")
                raise BuildError(f"base image {base_image(spec)} is missing and cannot be made: {exc.message}",
                                 hint=exc.hint or layer.base_hint or f"run 'repo2env runtime bootstrap --python {spec.python}'",
                                 log_path=exc.log_path or str(log_path)) from None
            log.write(f"{made.tag} made ({made.origin})\n")

    def used_by_task_images(self, env_tag: str) -> bool:
        """Whether a tagged task image of this namespace is built on ``env_tag``."""
        images = self.images.list(labels=[f"{KIND_LABEL}=task", f"repo2env.env_image={env_tag}"])
        return any(image.tags for image in images)

    def discard(self, tag: str) -> bool:
        """Remove the image ``tag`` unless an image built on it or a container still uses it (the
        engine refuses then); True when it is gone."""
        return self.images.remove(tag)

    def _index_args(self) -> dict[str, str]:
        # Build arguments, never ENV: what a build needs to reach the index (the CA bundle's variables,
        # index URLs) must not stay in the image, where the agent and every harness would inherit it.
        return self.access.container_env()

    def _build(self, dockerfile: str, snapshot_dir: Path, tag: str, labels: dict[str, str], log_path: Path,
               buildargs: dict[str, str] | None = None, tools: dict[str, str] | None = None) -> ImageInfo:
        if stopping():
            raise StoppingError("stopping: no new image build starts")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="repo2env-build-") as context:
            context_path = Path(context)
            # A hard-linked copy would be cheaper, but the build context must not follow symlinks
            # out of the snapshot; copytree keeps them as links.
            shutil.copytree(snapshot_dir, context_path / "snapshot", symlinks=True)
            (context_path / "tools").mkdir()
            for name, text in (tools or {}).items():
                (context_path / "tools" / name).write_text(text)
            (context_path / "Dockerfile").write_text(dockerfile)
            outcome = self.images.build(context_path, tag, labels=labels, build_args=buildargs or {}, network=True)
            log_lines = [dockerfile, "----", *outcome.log]
            error = outcome.error
            log_path.write_text("\n".join(log_lines) + "\n")
            if error:
                if "no space left on device" in error.lower():
                    raise BuildError("the disk is full", hint="free space: 'repo2env images gc' or 'docker system prune'",
                                     log_path=str(log_path))
                own_code = [line.split(OWN_CODE_MARKER, 1)[1] for line in log_lines if OWN_CODE_MARKER in line]
                if own_code:
                    raise BuildError(f"the project's own code is not what got installed: {'; '.join(own_code)[:400]}",
                                     log_path=str(log_path))
                raise BuildError(f"image build failed: {_last_meaningful_line(error)}", log_path=str(log_path))
        image = self.images.get(tag)
        if image is None:
            raise BuildError(f"the build of {tag} ended without an image", log_path=str(log_path))
        return image

    def list(self) -> list[dict]:
        """Every repo2env image (base, env, task) with its labels and size."""
        rows = []
        for image in self.images.list(labels=[KIND_LABEL]):
            labels = image.labels
            rows.append({"tags": list(image.tags), "id": image.short_id, "kind": labels.get(KIND_LABEL),
                         "repo": labels.get("repo2env.repo", ""), "instance_id": labels.get("repo2env.instance_id", ""),
                         "size_mb": round(image.size_bytes / 2**20, 1), "created": image.created})
        return sorted(rows, key=lambda row: (row["kind"] or "", row["tags"]))

    def gc(self, *, keep_tags: set[str], dry_run: bool = False) -> list[str]:
        """Remove task and env images whose tags are not in ``keep_tags`` (and env images no kept task
        uses, and harness agent layers on task images not kept), plus dangling leftovers of earlier
        builds; base images stay. Returns what was removed."""
        # Only this namespace's env and task images: another checkout's are not ours to remove.
        images = [(image.id, list(image.tags), dict(image.labels)) for image in self.images.list(labels=[KIND_LABEL])]
        images = [image for image in images
                  if image[2].get(NAMESPACE_LABEL, "repo2env") == image_namespace()]
        kept_envs = {labels.get("repo2env.env_image") for _, tags, labels in images
                     if labels.get(KIND_LABEL) == "task" and set(tags) & keep_tags}
        doomed = [image for image in images
                  if image[2].get(KIND_LABEL) == "task" and not set(image[1]) & keep_tags]
        doomed += [image for image in images
                   if image[2].get(KIND_LABEL) == "env" and not set(image[1]) & (keep_tags | kept_envs)]
        # A harness's agent layer (OpenCode's binary on a task image) goes with its task image.
        doomed = [image for image in images if image[2].get(KIND_LABEL) == "agent"
                  and image[2].get("repo2env.task_image") not in keep_tags] + doomed
        removed = []
        for image_id, tags, _ in doomed:
            name = tags[0] if tags and tags[0] != "<none>:<none>" else image_id.removeprefix("sha256:")[:12]
            # Not removed: gone already, or in use by a running sandbox.
            if not dry_run and not self.images.remove(image_id, force=True):
                continue
            removed.append(name)
        if not dry_run:
            self.images.prune_dangling()
        return removed


def layer_dockerfiles(task: Task) -> dict[str, str]:
    """The Dockerfile text of a built task's layers as its build recorded them (published with the
    dataset); the base layer is named by its tag (``repo2env runtime bootstrap`` builds it)."""
    spec = task.env_spec
    if spec is None or spec.status != "env_ok":
        return {}
    return dict(spec.dockerfiles)



#: Where a task image lists the files its warm-up wrote (empty: it fetched nothing).
WARMUP_FETCHED_PATH = "/etc/repo2env/warmup-fetched"
WARMUP_TIMEOUT_S = 900


def warmup_dockerfile_lines(command: str, stall_idle_s: float = STALL_IDLE_S) -> list[str]:
    """Dockerfile lines that run ``command`` once in /testbed as the agent, with the build's network.

    Whatever it downloads (into the agent's home, /tmp or the work tree) stays in the image, so the
    network-less sandbox finds it. It runs under the watchdog: stopped after :data:`WARMUP_TIMEOUT_S`,
    or ``stall_idle_s`` without progress (a host that does not answer), the build log then saying
    what it waited on. Its failure does not fail the build (the build reads that log, and the
    collection check judges the result); the files it wrote are listed in :data:`WARMUP_FETCHED_PATH`,
    and the new files in /testbed are added to ``.git/info/exclude`` so that they never show up in
    the agent's diff.
    """
    marker = "/tmp/.repo2env-warmup-start"
    found = (f"find \"$HOME\" /tmp /testbed -newer {marker} -type f ! -path '*/__pycache__/*' ! -name '*.pyc' "
             f"! -path '/testbed/.git/*' ! -name '.repo2env-warmup-*' > /tmp/.repo2env-warmup-fetched")
    return [
        f"USER {AGENT_UID}",
        f"RUN touch {marker}; {watched(command, idle_s=stall_idle_s, timeout_s=WARMUP_TIMEOUT_S)}; "
        f"echo \"warm-up exit $?\"; {found}; head -50 /tmp/.repo2env-warmup-fetched; "
        "mkdir -p .git/info && git ls-files --others --exclude-standard --directory >> .git/info/exclude",
        "USER root",
        f"RUN mkdir -p {Path(WARMUP_FETCHED_PATH).parent} && mv /tmp/.repo2env-warmup-fetched {WARMUP_FETCHED_PATH} "
        f"&& rm -f {marker}",
    ]


#: How long a task image's cache warm-up may take (the rest of the cache fills in the first runs).
CACHE_WARMUP_TIMEOUT_S = 300


def cache_warmup_lines(command: str, stall_idle_s: float = STALL_IDLE_S) -> list[str]:
    """Dockerfile lines that run ``command`` (a :class:`TaskLayer`'s ``cache_warmup``) once in
    /testbed as the agent: stopped after :data:`CACHE_WARMUP_TIMEOUT_S` or ``stall_idle_s`` without
    progress, its failure ignored (a cache it half filled is still hit, the runs fill the rest).
    What it leaves in /testbed is added to ``.git/info/exclude``: never in the agent's diff. Unlike
    the warm-up of :func:`warmup_dockerfile_lines` it says nothing of the network: the runs it
    prepares need none."""
    return [
        f"USER {AGENT_UID}",
        f"RUN {watched(command, idle_s=stall_idle_s, timeout_s=CACHE_WARMUP_TIMEOUT_S)}; "
        "echo \"cache warm-up exit $?\"; "
        "mkdir -p .git/info && git ls-files --others --exclude-standard --directory >> .git/info/exclude",
        "USER root",
    ]


def _arg_lines(access: PackageAccess, scm: dict[str, str]) -> list[str]:
    return [f"ARG {name}" for name in sorted([*access.container_env(), *scm])]


def env_dockerfile(spec: EnvSpec, access: PackageAccess, layer: EnvLayer) -> str:
    """The env layer: the base image, the spec's Debian packages, the recipe's tools in
    :data:`TOOLS_DIR`, the repository's files (the build context's ``snapshot/``) in ``/testbed``,
    then what ``layer`` runs there."""
    lines = [f"FROM {base_image(spec)}", "USER root"]
    if spec.system_packages:
        packages = " ".join(shlex.quote(name) for name in spec.system_packages)
        lines.append("RUN apt-get update && apt-get install -y --no-install-recommends "
                     f"{packages} && rm -rf /var/lib/apt/lists/*")
    lines.extend(_arg_lines(access, dict(layer.build_args)))
    lines.append(f"COPY tools/ {TOOLS_DIR}/")
    lines.append("COPY snapshot/ /testbed/")
    # The install may fetch with tools that read only the system bundle (old easy_install).
    lines.append(f"RUN {access.trusting_system_bundles(layer.run)}")
    lines.append("WORKDIR /testbed")
    return "\n".join(lines) + "\n"


def task_dockerfile(env_tag: str, access: PackageAccess, layer: TaskLayer = NO_TASK_STEPS, *,
                    warmup: str | None = None, stall_idle_s: float = STALL_IDLE_S) -> str:
    """The task layer: the env image plus the snapshot (the build context's ``snapshot/``) owned by
    the agent, then what ``layer`` sets and runs (its cache warm-up last), then the ``warmup`` command if any (under the
    watchdog, ``stall_idle_s``), and last the count of what the writable places hold (root's
    :data:`~repo2env.runtime.backends.keepalive.BASELINE_PATH`, which the sandbox's keepalive reads)."""
    lines = [f"FROM {env_tag}", f"COPY --chown={AGENT_UID}:{AGENT_UID} snapshot/ /testbed/", "USER root"]
    if layer.environment:
        lines.append("ENV " + " ".join(f"{name}={shlex.quote(value)}" for name, value in sorted(layer.environment.items())))
    lines.extend(_arg_lines(access, {}))
    # /testbed belongs to the agent; git run there by anyone else (root in a harness's container, a
    # SWE-bench-style harness's submission step) refuses it ("dubious ownership") unless trusted.
    lines.append("RUN git config --system --add safe.directory /testbed")
    if layer.run:
        # The editable install again: a setup_requires is fetched again, by easy_install on old setuptools.
        lines.append(f"RUN {access.trusting_system_bundles(layer.run)}")
    lines.append("WORKDIR /testbed")
    if layer.cache_warmup:
        lines.extend(cache_warmup_lines(layer.cache_warmup, stall_idle_s))
    if warmup:
        lines.extend(warmup_dockerfile_lines(warmup, stall_idle_s))
    # Last, as root: what the writable places hold now is what every sandbox of the image starts
    # with; its keepalive reads the count instead of walking them again.
    # A count that fails leaves no file: the keepalive then counts as each sandbox starts.
    lines.append(f"RUN {{ {baseline_command()}; }} > {BASELINE_PATH} || rm -f {BASELINE_PATH}")
    return "\n".join(lines) + "\n"


def baseline_command() -> str:
    """The shell command that prints what the writable places hold (:data:`BASELINE_SCRIPT`, by the
    image's system Python), one line as a Dockerfile's RUN takes it: as root without capabilities
    where ``setpriv`` can drop them, so that it counts what the keepalive (root without
    capabilities) can read, no more."""
    encoded = base64.b64encode(BASELINE_SCRIPT.encode()).decode()
    count = f"/usr/bin/python3 -I -S -c \"import base64; exec(base64.b64decode('{encoded}'))\""
    return f"if command -v setpriv >/dev/null; then setpriv --bounding-set=-all {count}; else {count}; fi"


def _last_meaningful_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "unknown error"
