"""CPython installations on this machine that a base image can be made from, with no registry.

No registry answers on an air-gapped machine, and a Debian release ships one Python each (3.9,
3.11, 3.13). Any other Python comes from a local CPython *copied at the same path* into a Debian
root filesystem: builds such as pyenv's and uv's find their ``libpython`` and standard library by
their own prefix (RPATH, ``sys.prefix``), so they run unchanged there when the root filesystem has
the system libraries they link against (this machine's Debian release: the same libssl, libffi).

Found automatically, in this order of preference for one X.Y:

- interpreters given by the user (``--python-from PATH``, or ``REPO2ENV_PYTHONS``, colon-separated):
  an executable or a prefix holding ``bin/python*``;
- pyenv's versions (``$PYENV_ROOT``, else what ``pyenv root`` says, else ``~/.pyenv``);
- uv's managed Pythons (``$UV_PYTHON_INSTALL_DIR``, else ``~/.local/share/uv/python``);
- system interpreters: ``/usr/local/bin`` and ``/usr/bin`` ``python3.X`` and ``python2.7``.

Each candidate runs once (:data:`PROBE_SCRIPT`, valid Python 2 and 3) to say what it is; one that
is not CPython, does not run, lacks ``ssl`` (pip needs it) or is a virtual environment's copy of
another is skipped, with the reason kept for ``doctor``. Nothing here starts a container.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Asks an interpreter what it is; runs under Python 2.7 and every Python 3.
PROBE_SCRIPT = r"""
import json, os, platform, sys
try:
    import sysconfig
    paths, var = sysconfig.get_paths(), sysconfig.get_config_var
except ImportError:
    from distutils import sysconfig as _sc
    paths = {"stdlib": _sc.get_python_lib(standard_lib=True), "platstdlib": _sc.get_python_lib(1, 1)}
    var = _sc.get_config_var
def has(name):
    try:
        __import__(name)
        return True
    except Exception:
        return False
print(json.dumps({
    "implementation": platform.python_implementation(),
    "version": "%d.%d.%d" % tuple(sys.version_info[:3]),
    "executable": os.path.realpath(sys.executable),
    "prefix": sys.prefix, "base_prefix": getattr(sys, "real_prefix", getattr(sys, "base_prefix", sys.prefix)),
    "stdlib": paths.get("stdlib"), "platstdlib": paths.get("platstdlib"),
    "libdir": var("LIBDIR"), "ldlibrary": var("LDLIBRARY"), "shared": bool(var("Py_ENABLE_SHARED")),
    "venv": has("venv") and has("ensurepip"), "ssl": has("ssl"), "zlib": has("zlib"),
    "machine": platform.machine(),
}))
"""

#: Prefixes shared with the rest of the system: only the interpreter's own files are copied from them.
SHARED_PREFIXES = ("/", "/usr", "/usr/local")
_ORIGIN_RANK = {"given": 0, "pyenv": 1, "uv": 2, "system": 3}
_SYSTEM_DIRS = ("/usr/local/bin", "/usr/bin")


@dataclass(frozen=True)
class LocalPython:
    """One CPython installation a base image can be made from."""

    python: str  #: X.Y
    version: str  #: X.Y.Z
    executable: str  #: the interpreter, symlinks resolved
    prefix: str  #: ``sys.prefix``
    origin: str  #: given, pyenv, uv or system
    has_venv: bool  #: ``venv`` and ``ensurepip`` import: ``python -m venv`` works; else virtualenv is used
    copy_paths: tuple[str, ...]  #: what is copied into the root filesystem, each at its own path
    stdlib: str = ""  #: the standard library's folder (with ``lib-dynload``)
    shared_library: str = ""  #: the libpython it loads, when it is built shared

    def describe(self) -> str:
        """``CPython 3.7.16 from /root/.pyenv/versions/3.7.16 (pyenv)``."""
        return f"CPython {self.version} from {self.prefix if self.prefix not in SHARED_PREFIXES else self.executable} ({self.origin})"


@dataclass
class Discovery:
    """Every usable local Python (best first for each X.Y) and why the other candidates were skipped."""

    pythons: list[LocalPython] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  #: candidate path -> why it cannot be used
    searched: list[str] = field(default_factory=list)  #: the places looked in

    def best(self, python: str) -> LocalPython | None:
        """The preferred installation of X.Y ``python``, or None."""
        return next((found for found in self.pythons if found.python == python), None)

    def versions(self) -> list[str]:
        """Every X.Y found, oldest first."""
        return sorted({found.python for found in self.pythons}, key=version_key)


def version_key(python: str) -> tuple[int, int]:
    """``"3.10"`` -> ``(3, 10)``, for sorting."""
    major, minor = python.split(".")[:2]
    return int(major), int(minor)


def discover(given: Sequence[str | Path] = (), environ: Mapping[str, str] | None = None) -> Discovery:
    """Find every local CPython (see the module's docstring for where), probing each once."""
    environ = os.environ if environ is None else environ
    discovery = Discovery()
    candidates: list[tuple[str, Path]] = []
    extra = [path for path in environ.get("REPO2ENV_PYTHONS", "").split(":") if path]
    for path in [*given, *extra]:
        candidates.extend(("given", executable) for executable in _executables_of(Path(path)))
        discovery.searched.append(str(path))
    for origin, root in (("pyenv", _pyenv_versions(environ)), ("uv", _uv_pythons(environ))):
        if root is None:
            continue
        discovery.searched.append(str(root))
        if root.is_dir():
            for prefix in sorted(root.iterdir()):
                candidates.extend((origin, executable) for executable in _executables_of(prefix)[:1])
    for directory in _SYSTEM_DIRS:
        discovery.searched.append(f"{directory}/python3.X")
        folder = Path(directory)
        if folder.is_dir():
            candidates.extend(("system", path) for path in sorted(folder.iterdir())
                              if re.fullmatch(r"python(?:3\.\d{1,2}|2\.7)", path.name))
    seen: set[str] = set()
    found: list[LocalPython] = []
    for origin, executable in candidates:
        try:
            real = str(executable.resolve())
        except OSError:
            continue
        if real in seen:
            continue
        seen.add(real)
        python, reason = probe(executable, origin)
        if python is None:
            discovery.skipped[str(executable)] = reason
        else:
            found.append(python)
    found.sort(key=lambda python: (version_key(python.python), _ORIGIN_RANK.get(python.origin, 9),
                                   [-int(part) for part in python.version.split(".")]))
    discovery.pythons = found
    return discovery


def probe(executable: Path, origin: str = "given") -> tuple[LocalPython | None, str]:
    """(the installation ``executable`` belongs to, "") or (None, why it cannot be used)."""
    try:
        result = subprocess.run([str(executable), "-c", PROBE_SCRIPT], capture_output=True, text=True, timeout=30,
                                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"does not run ({exc.__class__.__name__})"
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        return None, f"does not run: {lines[-1] if lines else 'exit ' + str(result.returncode)}"
    try:
        facts = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None, "did not say what it is"
    if facts["implementation"] != "CPython":
        return None, f"{facts['implementation']}, not CPython"
    if facts["prefix"] != facts["base_prefix"]:
        return None, f"a virtual environment of {facts['base_prefix']}"
    if not facts["ssl"] or not facts["zlib"]:
        return None, "built without ssl or zlib (pip needs both)"
    version = facts["version"]
    python = ".".join(version.split(".")[:2])
    prefix = facts["prefix"]
    shared = str(Path(str(facts["libdir"])) / str(facts["ldlibrary"])) if facts["shared"] and facts["libdir"] else ""
    return LocalPython(python=python, version=version, executable=facts["executable"], prefix=prefix, origin=origin,
                       has_venv=bool(facts["venv"]), copy_paths=_copy_paths(facts), stdlib=str(facts["stdlib"] or ""),
                       shared_library=shared), ""


def _copy_paths(facts: Mapping[str, object]) -> tuple[str, ...]:
    """A prefix of its own is copied whole; from a shared one (``/usr``), the interpreter, its
    standard library (with ``lib-dynload``) and its shared libpython."""
    prefix = str(facts["prefix"])
    if prefix not in SHARED_PREFIXES:
        return (prefix,)
    paths = [str(facts["executable"]), str(facts["stdlib"])]
    if facts["platstdlib"] and not str(facts["platstdlib"]).startswith(str(facts["stdlib"])):
        paths.append(str(facts["platstdlib"]))
    if facts["shared"] and facts["libdir"] and facts["ldlibrary"]:
        library = Path(str(facts["libdir"])) / str(facts["ldlibrary"])
        paths.extend(str(path) for path in sorted(library.parent.glob(library.name + "*")))
    return tuple(dict.fromkeys(paths))


#: Extension modules whose libraries a sandbox never needs (a display for tkinter): their system
#: libraries are not installed, and they do not import there.
_UNNEEDED_MODULES = re.compile(r"^_tkinter[.]")


def linked_packages(local: LocalPython) -> list[str]:
    """The host's Debian packages of the system libraries ``local`` and its extension modules load
    (outside what is copied), which the root filesystem must have too; empty without ldd or dpkg."""
    return host_packages(linked_libraries(local))


def linked_libraries(local: LocalPython) -> list[str]:
    """The system libraries (outside ``copy_paths``) the interpreter and its extension modules load."""
    if shutil.which("ldd") is None:
        return []
    objects = [local.executable, *([local.shared_library] if local.shared_library else [])]
    dynload = Path(local.stdlib) / "lib-dynload"
    if local.stdlib and dynload.is_dir():
        objects.extend(str(path) for path in sorted(dynload.glob("*.so")) if not _UNNEEDED_MODULES.match(path.name))
    try:
        output = subprocess.run(["ldd", *objects], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    own = tuple(str(path).rstrip("/") + "/" for path in local.copy_paths)
    libraries = set()
    for line in output.splitlines():
        if match := re.search(r"=>\s+(/\S+)", line):
            path = os.path.realpath(match.group(1))
            if not path.startswith(own) and path not in local.copy_paths:
                libraries.add(path)
    return sorted(libraries)


def host_packages(libraries: Sequence[str]) -> list[str]:
    """The Debian packages (name only) that own ``libraries`` on this host, when dpkg can tell."""
    if not libraries or shutil.which("dpkg") is None:
        return []
    # dpkg knows a library by the path its package installed, which merged /usr may have moved.
    paths = sorted({variant for path in libraries
                    for variant in (path, path.removeprefix("/usr")) if variant.startswith("/")})
    result = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True)
    packages = set()
    for line in result.stdout.splitlines():
        owner, _, _ = line.partition(": ")
        for name in owner.split(", "):
            packages.add(name.split(":")[0].strip())
    return sorted(package for package in packages if package)


def _executables_of(path: Path) -> list[Path]:
    """The interpreter ``path`` names: itself, or a prefix's ``bin/pythonX.Y`` (newest first)."""
    if path.is_file():
        return [path]
    found = sorted((candidate for candidate in (path / "bin").glob("python*")
                    if re.fullmatch(r"python\d\.\d{1,2}", candidate.name) and candidate.is_file()),
                   key=lambda candidate: version_key(candidate.name.removeprefix("python")), reverse=True)
    return found


def _pyenv_versions(environ: Mapping[str, str]) -> Path | None:
    root = environ.get("PYENV_ROOT")
    if not root and shutil.which("pyenv"):
        try:
            root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            root = ""
    if not root and environ.get("HOME"):
        root = str(Path(environ["HOME"]) / ".pyenv")
    return Path(root) / "versions" if root else None


def _uv_pythons(environ: Mapping[str, str]) -> Path | None:
    if environ.get("UV_PYTHON_INSTALL_DIR"):
        return Path(environ["UV_PYTHON_INSTALL_DIR"])
    data = environ.get("XDG_DATA_HOME") or (str(Path(environ["HOME"]) / ".local" / "share") if environ.get("HOME") else "")
    return Path(data) / "uv" / "python" if data else None
