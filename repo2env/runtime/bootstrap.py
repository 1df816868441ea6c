"""The base image (OS + Python + an unprivileged ``agent`` user), built where no registry answers.

Three ways to a raw OS image: take the finished one from another backend of this machine
(``docker save | podman load``: a base image is built once), pull ``python:X.Y-slim`` when a
registry answers, else build one from Debian packages with ``debootstrap`` and an import of the
root filesystem (air-gapped machines, this one). A raw image is then finished by the same small
Dockerfile: the host's CA bundle, a virtualenv at ``/opt/venv`` that owns ``python``/``pip``, and
the ``agent`` user (uid 1000) sandboxes run as. Every engine call goes through the backend's
:class:`~repo2env.runtime.backend.Images`.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repo2env import __version__
from repo2env.errors import BackendUnavailableError, BuildError, InputError, Repo2EnvError
from repo2env.runtime.package_access import CONTAINER_CA_PATH, PackageAccess

if TYPE_CHECKING:
    from repo2env.runtime.backend import Backend

#: Python X.Y -> the Debian release whose python3 is that version.
DEBIAN_SUITE_FOR_PYTHON = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
DEFAULT_MIRROR = "http://deb.debian.org/debian"
AGENT_UID = 1000
BASE_REPOSITORY = "repo2env/base"
_DEBOOTSTRAP_PACKAGES = "python3,python3-venv,python3-pip,git,ca-certificates,procps"
_LOCK_PATH = Path(tempfile.gettempdir()) / "repo2env-bootstrap.lock"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BaseImage:
    """A finished base image and how it came to be."""

    tag: str
    image_id: str
    python: str
    origin: str  # "existing", "pulled", "debootstrap" or "imported from <backend>"


def base_image_tag(python: str) -> str:
    """``3.11`` -> ``repo2env/base:py3.11``."""
    return f"{BASE_REPOSITORY}:py{python}"


def local_base_pythons(backend: Backend) -> tuple[str, ...]:
    """The Pythons (X.Y) that have a finished base image on this backend, oldest first."""
    found = {tag.removeprefix(f"{BASE_REPOSITORY}:py") for image in backend.images.list(repository=BASE_REPOSITORY)
             for tag in image.tags if tag.startswith(f"{BASE_REPOSITORY}:py")}
    return tuple(sorted((python for python in found if re.fullmatch(r"3\.\d{1,2}", python)),
                        key=lambda python: int(python.split(".")[1])))


def find_base_image(backend: Backend, python: str) -> BaseImage | None:
    """The finished base image for ``python`` if it exists on ``backend``."""
    image = backend.images.get(base_image_tag(python))
    if image is None:
        return None
    return BaseImage(tag=base_image_tag(python), image_id=image.id, python=python, origin="existing")


def ensure_base_image(
    backend: Backend,
    python: str = "3.11",
    *,
    access: PackageAccess | None = None,
    mirror: str = DEFAULT_MIRROR,
    try_pull: bool = True,
    force: bool = False,
    progress: Progress = lambda message: None,
    others: tuple[Backend, ...] = (),
) -> BaseImage:
    """Return the base image for ``python``, building it first if it is missing (or ``force``).

    Without ``force``, a finished base image on one of the ``others`` backends is imported instead
    of built again."""
    if python not in DEBIAN_SUITE_FOR_PYTHON and not (try_pull and re.fullmatch(r"3\.\d{1,2}", python)):
        known = ", ".join(sorted(DEBIAN_SUITE_FOR_PYTHON))
        raise InputError(f"no Debian release ships Python {python}",
                         hint=f"let a registry serve python:{python}-slim (or 'docker load' it), or choose one of {known}")
    access = access or PackageAccess.from_environment()
    _LOCK_PATH.touch(exist_ok=True)
    with _LOCK_PATH.open() as lock:
        # Two test workers or two CLI runs must not debootstrap the same image at once.
        fcntl.flock(lock, fcntl.LOCK_EX)
        existing = find_base_image(backend, python)
        if existing and not force:
            return existing
        if not force:
            imported = _import_from_others(backend, python, others, progress)
            if imported is not None:
                return imported
        raw_tag, origin = _raw_image(backend, python, mirror=mirror, try_pull=try_pull, progress=progress)
        progress(f"finishing {base_image_tag(python)} from {raw_tag}")
        image = _finish(backend, raw_tag, python, access=access, install_git=origin == "pulled")
        return BaseImage(tag=base_image_tag(python), image_id=image.id, python=python, origin=origin)


def _import_from_others(backend: Backend, python: str, others: tuple[Backend, ...],
                        progress: Progress) -> BaseImage | None:
    """The base image for ``python`` moved here from the first of ``others`` that has it, or None."""
    from repo2env.runtime.transfer import transfer_images

    tag = base_image_tag(python)
    for other in others:
        if other.name == backend.name or other.images.get(tag) is None:
            continue
        progress(f"importing {tag} from {other.name} (built once, shared by the backends)")
        transfer_images(other, backend, [tag])
        image = backend.images.get(tag)
        if image is not None:
            return BaseImage(tag=tag, image_id=image.id, python=python, origin=f"imported from {other.name}")
    return None


def _raw_image(
    backend: Backend, python: str, *, mirror: str, try_pull: bool, progress: Progress
) -> tuple[str, str]:
    if try_pull:
        progress(f"trying to pull python:{python}-slim")
        try:
            backend.images.pull(f"python:{python}-slim")
            return f"python:{python}-slim", "pulled"
        except BackendUnavailableError:
            raise
        except Repo2EnvError as exc:
            if python not in DEBIAN_SUITE_FOR_PYTHON:
                raise BuildError(f"no registry serves python:{python}-slim ({_first_line(str(exc))}), and no Debian "
                                 f"release ships Python {python}",
                                 hint=f"'docker load' a python:{python}-slim image, or use 3.9, 3.11 or 3.13") from None
            progress(f"no registry answers ({_first_line(str(exc))}); building from Debian packages instead")
    raw_tag = f"{BASE_REPOSITORY}-raw:py{python}"
    _debootstrap_import(backend, DEBIAN_SUITE_FOR_PYTHON[python], raw_tag, mirror=mirror, progress=progress)
    return raw_tag, "debootstrap"


def _debootstrap_import(backend: Backend, suite: str, tag: str, *, mirror: str, progress: Progress) -> None:
    if shutil.which("debootstrap") is None:
        raise BuildError(
            "debootstrap is not installed, and no registry answered for a python image",
            hint="apt-get install debootstrap (make install-system does it), or make python:X.Y-slim pullable",
        )
    with tempfile.TemporaryDirectory(prefix="repo2env-rootfs-") as workdir:
        rootfs = Path(workdir) / "rootfs"
        log_path = Path(tempfile.gettempdir()) / f"repo2env-debootstrap-{suite}.log"
        progress(f"debootstrap {suite} from {mirror} (about a minute; log: {log_path})")
        with log_path.open("w") as log:
            result = subprocess.run(
                ["debootstrap", "--variant=minbase", f"--include={_DEBOOTSTRAP_PACKAGES}", suite, str(rootfs), mirror],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if result.returncode != 0:
            raise BuildError(
                f"debootstrap {suite} failed (exit {result.returncode})",
                hint=f"see {log_path}; is {mirror} reachable?",
                log_path=str(log_path),
            )
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale"):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        tarball = Path(workdir) / "rootfs.tar"
        progress(f"importing the root filesystem as {tag}")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True)
        backend.images.import_rootfs(tarball, tag)


_FINISH_DOCKERFILE = """\
FROM {raw}
COPY ca-bundle.crt {ca_path}
RUN {git_install}python3 -m venv /opt/venv \\
 && /opt/venv/bin/python -m pip --version \\
 && useradd --create-home --uid {uid} --shell /bin/bash agent \\
 && mkdir -p /testbed && chown agent:agent /testbed
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    LANG=C.UTF-8 \\
    PYTHONDONTWRITEBYTECODE=1 \\
    PIP_DISABLE_PIP_VERSION_CHECK=1 \\
    PIP_NO_INPUT=1
{ca_env}WORKDIR /testbed
"""


def _finish(backend: Backend, raw_tag: str, python: str, *, access: PackageAccess, install_git: bool):
    git_install = "apt-get update && apt-get install -y --no-install-recommends git procps && rm -rf /var/lib/apt/lists/* && " if install_git else ""
    with tempfile.TemporaryDirectory(prefix="repo2env-base-") as context:
        context_path = Path(context)
        bundle = context_path / "ca-bundle.crt"
        if access.ca_bundle is not None:
            shutil.copyfile(access.ca_bundle, bundle)
        else:
            bundle.write_text("")
        # The bundle is baked in, so the variables that point tools at it are too; index URLs are
        # passed per build instead (they change more often than a CA).
        ca_env = "".join(
            f"ENV {name}={value}\n" for name, value in access.container_env().items() if value in (CONTAINER_CA_PATH, "1")
        ) if access.ca_bundle is not None else ""
        (context_path / "Dockerfile").write_text(_FINISH_DOCKERFILE.format(
            raw=raw_tag, ca_path=CONTAINER_CA_PATH, git_install=git_install, uid=AGENT_UID, ca_env=ca_env))
        labels = {"repo2env.kind": "base", "repo2env.python": python, "repo2env.version": __version__}
        outcome = backend.images.build(context_path, base_image_tag(python), labels=labels)
        if outcome.error:
            log_path = Path(tempfile.gettempdir()) / f"repo2env-base-{python}.log"
            log_path.write_text("\n".join(outcome.log) + "\n")
            raise BuildError(f"finishing the base image failed: {_first_line(outcome.error)}", log_path=str(log_path))
    image = backend.images.get(base_image_tag(python))
    if image is None:
        raise BuildError(f"finishing the base image ended without {base_image_tag(python)}")
    return image


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
