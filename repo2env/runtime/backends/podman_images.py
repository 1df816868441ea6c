"""Podman's images behind :class:`~repo2env.runtime.backend.Images`, through its command line.

Podman stores a name without a registry under ``localhost/``; every name this class reports has
that prefix dropped, so a tag reads the same on both backends (and podman resolves the short name
back to its local image). Builds run their steps with the same OCI runtime and explicit ulimits as
the sandboxes (see :class:`~repo2env.runtime.backend.BackendSettings`).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from repo2env.errors import BackendUnavailableError, Repo2EnvError
from repo2env.runtime.backend import DANGLING_AGE, BuildOutcome, ImageInfo
from repo2env.runtime.backends.podman_cli import PodmanCLI, PodmanFailed, last_error, local_name, not_found

#: Registries reached over plain HTTP without asking (as Docker does for these): the loopback.
_LOOPBACK_REGISTRY = re.compile(r"^(localhost|127\.\d+\.\d+\.\d+)(:\d+)?/")


class PodmanImages:
    """The images of the local podman store."""

    def __init__(self, cli: PodmanCLI, *, oci_runtime: str, ulimits: Sequence[str]) -> None:
        self.cli = cli
        self.oci_runtime = oci_runtime
        self.ulimits = tuple(ulimits)

    def get(self, ref: str) -> ImageInfo | None:
        try:
            found = self.cli.json(["image", "inspect", "--format", "json", _engine_ref(ref)])
        except PodmanFailed as exc:
            if not_found(exc.stderr):
                return None
            raise _unavailable(exc) from None
        if not found:
            return None
        image = found[0]
        return ImageInfo(id=_sha(image["Id"]), tags=tuple(local_name(tag) for tag in image.get("RepoTags") or ()),
                         labels=image.get("Labels") or (image.get("Config") or {}).get("Labels") or {},
                         size_bytes=image.get("Size") or 0, created=str(image.get("Created", "")))

    def list(self, *, labels: Sequence[str] = (), repository: str | None = None) -> list[ImageInfo]:
        args = ["images", "--format", "json"]
        if repository:
            args += ["--filter", f"reference={repository}"]
        try:
            rows = self.cli.json(args) or []
        except PodmanFailed as exc:
            raise _unavailable(exc) from None
        listed = []
        for row in rows:
            row_labels = row.get("Labels") or {}
            if not all(_has_label(row_labels, wanted) for wanted in labels):
                continue
            listed.append(ImageInfo(id=_sha(row["Id"]), tags=tuple(local_name(name) for name in row.get("Names") or ()),
                                    labels=row_labels, size_bytes=row.get("Size") or 0,
                                    created=str(row.get("CreatedAt") or row.get("Created") or "")))
        return listed

    def build(self, context: Path, tag: str, *, labels: Mapping[str, str] | None = None,
              build_args: Mapping[str, str] | None = None, network: bool = True) -> BuildOutcome:
        args = ["build", "--runtime", self.oci_runtime, *[f"--ulimit={limit}" for limit in self.ulimits],
                "--layers", "--force-rm", *([] if network else ["--network", "none"]), "-t", tag,
                "-f", str(context / "Dockerfile")]
        for name, value in (labels or {}).items():
            args += ["--label", f"{name}={value}"]
        for name, value in (build_args or {}).items():
            args += ["--build-arg", f"{name}={value}"]
        process = self.cli.popen([*args, str(context)], stdout=-1, stderr=-2)  # stderr joins stdout
        assert process.stdout is not None
        log = [line.decode("utf-8", errors="replace").rstrip("\n") for line in process.stdout]
        if process.wait() == 0:
            return BuildOutcome(log=log)
        errors = [line for line in log if line.startswith("Error:")]
        return BuildOutcome(log=log, error=(errors[-1] if errors else (log or ["podman build failed"])[-1]).strip())

    def remove(self, ref: str, *, force: bool = False) -> bool:
        # Never `podman rmi --force`: it removes the containers using the image too, running
        # sandboxes included. A forced removal takes the image's every name, then the image.
        names = [ref]
        if force:
            image = self.get(ref)
            if image is None:
                return True
            names = [*image.tags, image.id.removeprefix("sha256:")]
        for name in names:
            try:
                self.cli.run(["rmi", _engine_ref(name)])
            except PodmanFailed as exc:
                if not not_found(exc.stderr):
                    return False
        return True

    def prune_dangling(self) -> None:
        try:
            self.cli.run(["image", "prune", "--force", "--filter", f"until={DANGLING_AGE}"])
        except PodmanFailed:
            pass  # another prune holds the store: the next one takes these

    def tag(self, ref: str, new_ref: str) -> None:
        try:
            self.cli.run(["tag", _engine_ref(ref), new_ref])
        except PodmanFailed as exc:
            raise Repo2EnvError(f"cannot tag {ref} as {new_ref}: {last_error(exc.stderr)}") from None

    def push(self, ref: str) -> str:
        with tempfile.TemporaryDirectory(prefix="repo2env-push-") as scratch:
            digest_file = Path(scratch) / "digest"
            try:
                self.cli.run(["push", *_tls(ref), "--digestfile", str(digest_file), ref], timeout=3600)
            except PodmanFailed as exc:
                raise Repo2EnvError(f"pushing {ref} failed: {last_error(exc.stderr)}",
                                    hint="check that the registry is reachable and that 'podman login' was done "
                                         "for it") from None
            digest = digest_file.read_text().strip() if digest_file.is_file() else ""
        if not digest.startswith("sha256:"):
            raise Repo2EnvError(f"pushing {ref} gave no digest", hint="push again; check the registry's logs")
        return digest

    def pull(self, ref: str) -> ImageInfo:
        try:
            self.cli.run(["pull", "--quiet", *_tls(ref), ref], timeout=3600)
        except PodmanFailed as exc:
            raise Repo2EnvError(f"no registry serves {ref} ({last_error(exc.stderr)})") from None
        image = self.get(ref)
        if image is None:
            raise Repo2EnvError(f"pulled {ref}, but podman does not find it")
        return image

    def save(self, refs: Sequence[str], path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.cli.run(["save", "--multi-image-archive", "--format", "docker-archive", "-o", str(path),
                          *[_engine_ref(ref) for ref in refs]], timeout=3600)
        except PodmanFailed as exc:
            raise Repo2EnvError(f"podman save failed: {last_error(exc.stderr)}",
                                hint="run 'repo2env build' so every image exists") from None

    def load(self, path: Path) -> list[str]:
        try:
            said = self.cli.run(["load", "--input", str(path)], timeout=3600).decode("utf-8", errors="replace")
        except PodmanFailed as exc:
            raise Repo2EnvError(f"podman load of {path} failed: {last_error(exc.stderr)}") from None
        tags = []
        for line in said.splitlines():
            if line.startswith("Loaded image"):
                tags += [local_name(name.strip()) for name in line.split(":", 1)[1].split(",") if name.strip()]
        return sorted(tag for tag in tags if not re.fullmatch(r"(sha256:)?[0-9a-f]{64}", tag))

    def import_rootfs(self, tarball: Path, ref: str) -> None:
        try:
            self.cli.run(["import", str(tarball), ref], timeout=3600)
        except PodmanFailed as exc:
            raise Repo2EnvError(f"podman import of {tarball} as {ref} failed: {last_error(exc.stderr)}") from None


def _engine_ref(ref: str) -> str:
    """A ref as podman takes it: an id without its ``sha256:`` prefix."""
    return ref.removeprefix("sha256:") if re.fullmatch(r"sha256:[0-9a-f]{12,64}", ref) else ref


def _sha(image_id: str) -> str:
    return image_id if image_id.startswith("sha256:") else f"sha256:{image_id}"


def _has_label(labels: Mapping[str, str], wanted: str) -> bool:
    key, equals, value = wanted.partition("=")
    return key in labels and (not equals or labels[key] == value)


def _tls(ref: str) -> list[str]:
    """Plain HTTP for a registry on the loopback (Docker's default), TLS everywhere else."""
    return ["--tls-verify=false"] if _LOOPBACK_REGISTRY.match(ref) else []


def _unavailable(exc: PodmanFailed) -> BackendUnavailableError:
    return BackendUnavailableError(f"podman failed: {last_error(exc.stderr)}", hint="check 'podman info'")
