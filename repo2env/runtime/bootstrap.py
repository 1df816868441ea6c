"""The base image (OS + Python + an unprivileged ``agent`` user), built where no registry answers.

Four ways to a base image, tried in this order:

1. take the finished one from another backend of this machine (``docker save | podman load``: a
   base image is built once);
2. pull ``python:X.Y-slim`` when a registry answers;
3. build a root filesystem from Debian packages with ``debootstrap`` and an import of it, for the
   Pythons a Debian release ships (3.9, 3.11, 3.13; air-gapped machines, this one);
4. copy a local CPython (:mod:`repo2env.runtime.local_pythons`: pyenv, uv, ``/usr/bin/python3.X``,
   or one given with ``--python-from``) at its own path into the root filesystem of this machine's
   Debian release (:func:`local_python_dockerfile`), for every other Python (2.7, 3.6-3.8, 3.10,
   3.12 here).

Either way the image gets the same finish: the host's CA bundle, a virtual environment at
``/opt/venv`` that owns ``python``/``pip``, git, the system ``python3`` that the sandbox's keepalive
and command channel run, and the ``agent`` user (uid 1000) sandboxes run as. Every engine call goes
through the backend's :class:`~repo2env.runtime.backend.Images`.
"""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repo2env import __version__
from repo2env.errors import BackendUnavailableError, BuildError, InputError, Repo2EnvError
from repo2env.runtime.local_pythons import (
    Discovery,
    LocalPython,
    discover,
    linked_packages,
    probe,
    version_key,
)
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
    origin: str  # "existing", "pulled", "debootstrap", "local" (a copy of a local CPython) or "imported from <backend>"


def base_image_tag(python: str) -> str:
    """``3.11`` -> ``repo2env/base:py3.11``."""
    return f"{BASE_REPOSITORY}:py{python}"


def local_base_pythons(backend: Backend) -> tuple[str, ...]:
    """The Pythons (X.Y) that have a finished base image on this backend, oldest first."""
    found = {tag.removeprefix(f"{BASE_REPOSITORY}:py") for image in backend.images.list(repository=BASE_REPOSITORY)
             for tag in image.tags if tag.startswith(f"{BASE_REPOSITORY}:py")}
    return tuple(sorted((python for python in found if re.fullmatch(r"[23]\.\d{1,2}", python)), key=version_key))


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
    python_from: str | Path | None = None,
    progress: Progress = lambda message: None,
    others: tuple[Backend, ...] = (),
) -> BaseImage:
    """Return the base image for ``python``, building it first if it is missing (or ``force``).

    Without ``force``, a finished base image on one of the ``others`` backends is imported instead
    of built again. ``python_from`` (an interpreter or its prefix) makes it from that local CPython,
    which must be ``python``; otherwise a registry, then Debian, then the local CPythons found are
    tried in turn."""
    local = _given_python(python, python_from) if python_from is not None else None
    if local is None and python not in DEBIAN_SUITE_FOR_PYTHON and not try_pull:
        local = local_python(python)
        if local is None:
            raise _cannot_make(python, "no registry was tried")
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
        if local is None and try_pull and _pulled(backend, python, progress):
            raw_tag, origin = f"python:{python}-slim", "pulled"
        elif local is None and python in DEBIAN_SUITE_FOR_PYTHON:
            raw_tag, origin = _raw_image(backend, python, mirror=mirror, progress=progress, reuse=not force), "debootstrap"
        else:
            local = local or local_python(python)
            if local is None:
                raise _cannot_make(python, "no registry serves python:" + python + "-slim")
            image = _from_local_python(backend, local, access=access, mirror=mirror, progress=progress)
            return BaseImage(tag=base_image_tag(python), image_id=image.id, python=python, origin="local")
        progress(f"finishing {base_image_tag(python)} from {raw_tag}")
        image = _finish(backend, raw_tag, python, access=access, install_git=origin == "pulled")
        return BaseImage(tag=base_image_tag(python), image_id=image.id, python=python, origin=origin)


def _pulled(backend: Backend, python: str, progress: Progress) -> bool:
    progress(f"trying to pull python:{python}-slim")
    try:
        backend.images.pull(f"python:{python}-slim")
        return True
    except BackendUnavailableError:
        raise
    except Repo2EnvError as exc:
        progress(f"no registry answers ({_first_line(str(exc))}); "
                 + ("building from Debian packages instead" if python in DEBIAN_SUITE_FOR_PYTHON
                    else "making it from a local CPython instead"))
        return False


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


def _raw_image(backend: Backend, python: str, *, mirror: str, progress: Progress, reuse: bool = True) -> str:
    """The debootstrapped root filesystem of the Debian release that ships ``python`` (built once,
    unless not ``reuse``)."""
    raw_tag = f"{BASE_REPOSITORY}-raw:py{python}"
    if reuse and backend.images.get(raw_tag) is not None:
        return raw_tag
    _debootstrap_import(backend, DEBIAN_SUITE_FOR_PYTHON[python], raw_tag, mirror=mirror, progress=progress)
    return raw_tag


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


# --- base images from a local CPython ---------------------------------------------------------------

_discovered: Discovery | None = None


def local_pythons(refresh: bool = False) -> Discovery:
    """The local CPythons base images can be made from (found once per process)."""
    global _discovered
    if _discovered is None or refresh:
        _discovered = discover()
    return _discovered


def local_python(python: str) -> LocalPython | None:
    """The preferred local CPython X.Y, or None."""
    return local_pythons().best(python)


def makeable_pythons() -> dict[str, str]:
    """Every Python X.Y a base image can be made for without a registry, oldest first, with how:
    ``"debootstrap bookworm"`` or the local CPython (:meth:`LocalPython.describe`)."""
    ways = {python: f"debootstrap {suite}" for python, suite in DEBIAN_SUITE_FOR_PYTHON.items()}
    for found in local_pythons().pythons:
        ways.setdefault(found.python, found.describe())
    return dict(sorted(ways.items(), key=lambda item: version_key(item[0])))


def _given_python(python: str, path: str | Path) -> LocalPython:
    candidate = Path(path)
    executables = [candidate] if candidate.is_file() else sorted(
        (found for found in (candidate / "bin").glob("python*") if re.fullmatch(r"python\d\.\d{1,2}", found.name)),
        key=lambda found: version_key(found.name.removeprefix("python")), reverse=True)
    if not executables:
        raise InputError(f"--python-from {path}: no Python interpreter there",
                         hint="give an interpreter (…/bin/python3.7) or the prefix that holds bin/python3.7")
    local, reason = probe(executables[0], origin="given")
    if local is None:
        raise InputError(f"--python-from {path}: {reason}")
    if local.python != python:
        raise InputError(f"--python-from {path} is Python {local.version}, not {python}",
                         hint=f"ask for --python {local.python}, or give a {python} interpreter")
    return local


def python_of(path: str | Path) -> str:
    """The X.Y of the interpreter (or prefix) ``path`` (for ``--python-from`` without ``--python``)."""
    candidate = Path(path)
    executable = candidate if candidate.is_file() else next(
        (found for found in sorted((candidate / "bin").glob("python*"), reverse=True)
         if re.fullmatch(r"python\d\.\d{1,2}", found.name)), None)
    if executable is None:
        raise InputError(f"--python-from {path}: no Python interpreter there")
    local, reason = probe(executable, origin="given")
    if local is None:
        raise InputError(f"--python-from {path}: {reason}")
    return local.python


def _cannot_make(python: str, why: str) -> BuildError:
    found = local_pythons()
    known = ", ".join(makeable_pythons())
    return BuildError(
        f"cannot make a base image for Python {python}: {why}, no Debian release ships it, and no local "
        f"CPython {python} was found (looked in {', '.join(found.searched)})",
        hint=f"install one (pyenv install {python}, uv python install {python}) or give it with --python-from PATH; "
             f"or 'docker load' a python:{python}-slim image; Pythons that can be made here: {known}")


#: The Debian release whose root filesystem local CPythons are copied into: this machine's, whose
#: system libraries they were built against (see :func:`host_debian_suite`).
def host_debian_suite(os_release: Path = Path("/etc/os-release")) -> str:
    """This machine's Debian release when it is one of :data:`DEBIAN_SUITE_FOR_PYTHON`'s, else bookworm."""
    try:
        fields = dict(line.split("=", 1) for line in os_release.read_text().splitlines() if "=" in line)
    except OSError:
        fields = {}
    codename = fields.get("VERSION_CODENAME", "").strip().strip('"')
    return codename if codename in DEBIAN_SUITE_FOR_PYTHON.values() else "bookworm"


def _virtualenv_requirement(python: str) -> str:
    """The virtualenv that still creates environments for ``python`` (20.22 dropped 2.7 and 3.6;
    20.27 dropped 3.7)."""
    if version_key(python) < (3, 7):
        return "virtualenv<20.22"
    if version_key(python) < (3, 8):
        return "virtualenv<20.27"
    return "virtualenv"


def local_python_dockerfile(rootfs: str, local: LocalPython, packages: list[str], access: PackageAccess) -> str:
    """The Dockerfile that turns ``rootfs`` (a Debian root filesystem with python3, git and the CA
    certificates) into the base image of ``local``: the system libraries it links against
    (``packages``, installed only where missing), its files at their own paths (the build
    context's ``python/``, made readable by all as they are packed), reachable by the agent, a virtual environment at
    ``/opt/venv`` (``venv`` where it works, else virtualenv run by the system python3), pip as new
    as the Python allows, and uv (which installs into 3.6 and 3.7 too, though pip will not install
    it there on its own)."""
    executable = local.executable
    ancestors = sorted({str(parent) for path in local.copy_paths for parent in Path(path).parents if str(parent) != "/"})
    steps = []
    if packages:
        listed = " ".join(shlex.quote(name) for name in packages)
        steps.append(f"missing=$(for p in {listed}; do dpkg -s \"$p\" >/dev/null 2>&1 || echo \"$p\"; done); "
                     'if [ -n "$missing" ]; then apt-get update && apt-get install -y --no-install-recommends $missing '
                     "&& rm -rf /var/lib/apt/lists/*; fi")
    if ancestors:
        steps.append("chmod a+x " + " ".join(shlex.quote(path) for path in ancestors))
    # A library the root filesystem lacks fails here, by name, not in the first task's build.
    steps.append(f"if ldd {shlex.quote(executable)} | grep 'not found'; then echo 'repo2env: system libraries missing' >&2; exit 1; fi")
    steps.append(f"{shlex.quote(executable)} -c 'import ssl, zlib, json'")
    if local.has_venv:
        steps.append(f"{shlex.quote(executable)} -m venv /opt/venv")
    else:
        steps.append("python3 -m venv /tmp/repo2env-virtualenv && /tmp/repo2env-virtualenv/bin/python -m pip install -q "
                     f"{shlex.quote(_virtualenv_requirement(local.python))} && /tmp/repo2env-virtualenv/bin/python -m "
                     f"virtualenv --no-periodic-update -p {shlex.quote(executable)} /opt/venv && rm -rf /tmp/repo2env-virtualenv")
    steps.append("/opt/venv/bin/python -m pip install -q --upgrade pip")
    if version_key(local.python) >= (3, 0):
        # uv's wheel says Python >= 3.8 for its locator module only; the binary installs into 3.6+.
        steps.append("(/opt/venv/bin/python -m pip install -q uv || /opt/venv/bin/python -m pip install -q "
                     "--ignore-requires-python uv) && /opt/venv/bin/uv --version")
    steps.append("/opt/venv/bin/python -m pip --version")
    steps.append(f"useradd --create-home --uid {AGENT_UID} --shell /bin/bash agent && mkdir -p /testbed && chown agent:agent /testbed")
    steps.append("rm -rf /root/.cache")
    # Build arguments, not ENV: the CA's variables serve this build's installs and never become the
    # sandboxes' environment (BASE_FORMAT 2).
    ca_env = "".join(f"ARG {name}={value}\n" for name, value in access.container_env().items()
                     if value in (CONTAINER_CA_PATH, "1")) if access.ca_bundle is not None else ""
    index_args = "".join(f"ARG {name}\n" for name, value in access.container_env().items()
                         if value not in (CONTAINER_CA_PATH, "1"))
    return (f"FROM {rootfs}\nCOPY ca-bundle.crt {CONTAINER_CA_PATH}\n{ca_env}{index_args}COPY python/ /\n"
            "RUN set -e; " + "; ".join(steps) + "\n" + _BASE_ENV + "WORKDIR /testbed\n")


#: Left out of a copied prefix: the standard library's own test suite, and the packages installed
#: into the interpreter itself (the image's virtual environment does not see them).
_NOT_COPIED = re.compile(r"/lib/python\d\.\d+/(?:test|site-packages/.+)$")


def _from_local_python(backend: Backend, local: LocalPython, *, access: PackageAccess, mirror: str,
                       progress: Progress):
    suite = host_debian_suite()
    rootfs_python = next(python for python, name in DEBIAN_SUITE_FOR_PYTHON.items() if name == suite)
    rootfs = _raw_image(backend, rootfs_python, mirror=mirror, progress=progress)
    progress(f"making {base_image_tag(local.python)} from {local.describe()} on {rootfs} ({suite})")
    packages = linked_packages(local)
    dockerfile = local_python_dockerfile(rootfs, local, packages, access)
    labels = {"repo2env.kind": "base", "repo2env.python": local.python, "repo2env.version": __version__,
              "repo2env.python_source": local.describe()}
    with tempfile.TemporaryDirectory(prefix="repo2env-base-context-") as context:
        context_path = Path(context)
        (context_path / "Dockerfile").write_text(dockerfile)
        (context_path / "ca-bundle.crt").write_text(access.ca_bundle.read_text() if access.ca_bundle is not None else "")
        for path in local.copy_paths:
            _copy_into(Path(path), context_path / "python" / path.lstrip("/"))
        outcome = backend.images.build(context_path, base_image_tag(local.python), labels=labels,
                                       build_args={name: value for name, value in access.container_env().items()
                                                   if value not in (CONTAINER_CA_PATH, "1")})
    log_path = Path(tempfile.gettempdir()) / f"repo2env-base-{local.python}.log"
    log_path.write_text("\n".join([dockerfile, "----", *outcome.log]) + "\n")
    if outcome.error:
        missing = [line for line in outcome.log if "=> not found" in line]
        reason = f"system libraries missing in the {suite} root filesystem: {', '.join(m.split()[0] for m in missing)}" \
            if missing else _first_line(outcome.error)
        raise BuildError(f"making the Python {local.python} base image from {local.describe()} failed: {reason}",
                         hint=f"see {log_path}", log_path=str(log_path))
    image = backend.images.get(base_image_tag(local.python))
    if image is None:
        raise BuildError(f"making the base image ended without {base_image_tag(local.python)}")
    return image


def _copy_into(source: Path, target: Path) -> None:
    """``source`` (a file or a folder) at ``target``, symlinks kept, without :data:`_NOT_COPIED`,
    made readable by all as it is copied (a chmod in the image would copy every file into a new layer)."""
    if source.is_file() and not source.is_symlink():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        _readable(target)
        return

    def ignored(folder: str, names: list[str]) -> set[str]:
        return {name for name in names if _NOT_COPIED.search(f"{folder}/{name}")}

    shutil.copytree(source, target, symlinks=True, ignore=ignored)
    for folder, directories, files in os.walk(target):
        for name in [*directories, *files]:
            _readable(Path(folder) / name)
    _readable(target)


def _readable(path: Path) -> None:
    if path.is_symlink():
        return
    mode = path.stat().st_mode
    path.chmod(mode | (0o555 if path.is_dir() or mode & 0o100 else 0o444))


# --- finishing a pulled or debootstrapped image -----------------------------------------------------

_BASE_ENV = """\
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    LANG=C.UTF-8 \\
    PYTHONDONTWRITEBYTECODE=1 \\
    PIP_DISABLE_PIP_VERSION_CHECK=1 \\
    PIP_NO_INPUT=1
"""

_FINISH_DOCKERFILE = """\
FROM {raw}
COPY ca-bundle.crt {ca_path}
RUN {git_install}python3 -m venv /opt/venv \\
 && /opt/venv/bin/python -m pip --version \\
 && useradd --create-home --uid {uid} --shell /bin/bash agent \\
 && mkdir -p /testbed && chown agent:agent /testbed
{base_env}WORKDIR /testbed
"""
#: 2: the host's CA bundle is in the image, but the variables pointing tools at it are build arguments
#: of the env and task layers, not the image's environment (format 1 baked them in with ENV, so every
#: sandbox and harness inherited the build host's settings).
BASE_FORMAT = "2"


def _finish(backend: Backend, raw_tag: str, python: str, *, access: PackageAccess, install_git: bool):
    git_install = "apt-get update && apt-get install -y --no-install-recommends git procps && rm -rf /var/lib/apt/lists/* && " if install_git else ""
    with tempfile.TemporaryDirectory(prefix="repo2env-base-") as context:
        context_path = Path(context)
        bundle = context_path / "ca-bundle.crt"
        if access.ca_bundle is not None:
            shutil.copyfile(access.ca_bundle, bundle)
        else:
            bundle.write_text("")
        # The bundle is baked in; the variables that point tools at it are passed to each build that
        # needs the index (images.py), so they never become the sandboxes' environment.
        (context_path / "Dockerfile").write_text(_FINISH_DOCKERFILE.format(
            raw=raw_tag, ca_path=CONTAINER_CA_PATH, git_install=git_install, uid=AGENT_UID, base_env=_BASE_ENV))
        labels = {"repo2env.kind": "base", "repo2env.python": python, "repo2env.version": __version__,
                  "repo2env.base_format": BASE_FORMAT}
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
