"""The project's own code: what it provides, and keeping its editable install the one that runs.

When the repository is the test runner itself or one of its dependencies (pluggy, iniconfig,
packaging, attrs ...), installing pytest after the project pulls the released package over the
editable install; collection still works and every task then tests PyPI's code. And projects that
generate files at install time (a setuptools-scm version file, build-time modules, in-place
extensions) lose them when the env layer empties ``/testbed``. This module holds the pure parts
of the answer:

- :func:`read_own_code`: the project's distribution name, import names and whether its version
  comes from version control, read from its packaging config and layout at a commit;
- :func:`protect_own_install`: the install commands without any install or pin of the project's own
  distribution, ending with the editable install again (``--no-deps``) so it wins;
- :func:`reinstall_command`: that editable ``--no-deps`` install, which the task layer re-runs
  when the install generated files or the version comes from version control;
- :func:`scm_environment`: the variables that hand the real version to the build back-ends.

The in-container half (the import check, the list of generated files) is ``own_code_probe.py``,
a standard-library-only script shipped into the env image.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from repo2env.languages.python.spec.files import RepoFiles, _ini_get, _ini_lines, _read_project
from repo2env.languages.python.spec.pinning import (
    _join_args,
    _pip_install_args,
    _requirement_name,
    _split_args,
    uv_install_args,
)

#: The in-container script (standard library only, Python 3.9+).
PROBE_PATH = Path(__file__).with_name("own_code_probe.py")

#: Top-level directories that are never the project's importable code.
_NOT_CODE = frozenset({"test", "tests", "testing", "doc", "docs", "example", "examples", "bench", "benchmark",
                       "benchmarks", "script", "scripts", "tools", "tool", "ci", "build", "dist", "changelog",
                       "changes", "extra", "extras", "contrib", "demo", "demos", "site-packages", "src"})
_VCS_VERSION = re.compile(r"setuptools[_-]scm|hatch-vcs|use_scm_version|versioningit|poetry-dynamic-versioning"
                          r"|setuptools[_-]git[_-]versioning|dunamai", re.IGNORECASE)
#: Options of the editable install that the ``--no-deps`` re-install keeps (how to reach and pin
#: the build back-end); every other option and target is dropped.
# --exclude-newer-package: the date pin's exemption for build back-ends (an older pin would get a
# setuptools without build_editable); the re-install builds the project again, so it needs it too.
_KEPT_OPTIONS = frozenset({"--exclude-newer", "--exclude-newer-package", "--compile-bytecode", "-i", "--index-url",
                           "--extra-index-url", "-f", "--find-links", "--no-index", "--no-build-isolation",
                           "--prerelease", "--pre"})


@dataclass(frozen=True)
class OwnCode:
    """What the project at one commit provides itself."""

    #: Its distribution name, canonical (``pluggy``), or None when its packaging config does not say.
    distribution: str | None
    #: Top-level import names of its code (``pluggy``; ``pytest`` and ``_pytest``).
    import_names: tuple[str, ...]
    #: Whether ``import_names`` come from the packaging config (else from the layout: then a name
    #: that does not import is not an error, since the scan may have found a stray folder).
    declared: bool
    #: Whether its version is computed from version control (setuptools-scm, hatch-vcs ...).
    vcs_version: bool

    def probe_arguments(self, *, editable: bool) -> dict[str, Any]:
        """What ``own_code_probe.py check`` takes (as JSON)."""
        return {"distribution": self.distribution, "import_names": list(self.import_names),
                "declared": self.declared, "editable": editable}


def read_own_code(files: RepoFiles) -> OwnCode:
    """The distribution, import names and versioning of the project in ``files``."""
    project = _read_project(files)
    listing = project.listing
    distribution = _distribution_name(project)
    roots = _package_roots(project)
    existing = _top_level_names(listing, roots)
    declared = [name for name in _declared_names(project) if name in existing]
    if declared:
        names, from_config = declared, True
    else:
        names, from_config = _scanned_names(listing, roots, distribution), False
    config_text = "\n".join([project.pyproject_text, project.setup_cfg_text, project.setup_py])
    hatch_source = project.tool("hatch", "version", "source")
    pdm_source = project.tool("pdm", "version", "source")
    vcs = bool(_VCS_VERSION.search(config_text)) or hatch_source == "vcs" or pdm_source == "scm"
    return OwnCode(distribution=distribution, import_names=tuple(dict.fromkeys(names)), declared=from_config,
                   vcs_version=vcs)


def _distribution_name(project) -> str | None:
    candidates = [
        project.pyproject.get("project", {}).get("name"),
        project.tool("poetry", "name"),
        _ini_get(project.setup_cfg, "metadata", "name"),
        project.setup_keywords.get("name"),
    ]
    for candidate in candidates:
        if isinstance(candidate, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", candidate.strip()):
            return str(canonicalize_name(candidate.strip()))
    return None


def _package_roots(project) -> list[str]:
    """Folders the importable code may sit in: the declared ``package-dir`` root, ``src``, the top."""
    roots: list[str] = []
    for mapping in (project.tool("setuptools", "package-dir"), project.setup_keywords.get("package_dir")):
        if isinstance(mapping, dict) and isinstance(mapping.get(""), str):
            roots.append(mapping[""].strip("/"))
    for line in _ini_lines(_ini_get(project.setup_cfg, "options", "package_dir")):
        key, _, value = line.partition("=")
        if key.strip() == "" and value.strip():
            roots.append(value.strip().strip("/"))
    return list(dict.fromkeys([*roots, "src", ""]))


def _top_level_names(listing: list[str], roots: list[str]) -> set[str]:
    names: set[str] = set()
    for path in listing:
        for root in roots:
            prefix = f"{root}/" if root else ""
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix):].split("/")
            if len(rest) > 1:
                names.add(rest[0])
            elif rest[0].endswith(".py"):
                names.add(rest[0][:-3])
    return names


def _declared_names(project) -> list[str]:
    """Top-level names the packaging config lists (setuptools, hatch, flit, poetry), if literal."""
    names: list[str] = []

    def add(values: Any, *, paths: bool = False) -> None:
        if isinstance(values, str):
            values = [values]
        if not isinstance(values, list):
            return
        for value in values:
            if isinstance(value, dict):  # poetry: {include = "pkg", from = "src"}
                value = value.get("include")
            if isinstance(value, str) and value.strip() and "*" not in value:
                text = value.strip().strip("/")
                names.append(text.rsplit("/", 1)[-1] if paths else text.split(".")[0])

    packages = project.tool("setuptools", "packages")
    add(packages if isinstance(packages, list) else None)
    add(project.tool("setuptools", "py-modules"))
    for key in ("packages", "py_modules"):
        lines = _ini_lines(_ini_get(project.setup_cfg, "options", key))
        if lines and not any(line.startswith("find") for line in lines):
            add([part.strip() for line in lines for part in line.split(",") if part.strip()])
        add(project.setup_keywords.get(key))
    add(project.tool("hatch", "build", "targets", "wheel", "packages"), paths=True)
    add(project.tool("flit", "module", "name"))
    add(project.tool("poetry", "packages"), paths=True)
    return [name for name in names if name.isidentifier()]


def _scanned_names(listing: list[str], roots: list[str], distribution: str | None) -> list[str]:
    """Top-level packages (folders with an ``__init__.py``) of the first root that has any, and a
    top-level module named after the distribution."""
    for root in roots:
        prefix = f"{root}/" if root else ""
        names = sorted({path[len(prefix):].split("/")[0] for path in listing
                        if path.startswith(prefix) and path.count("/") == prefix.count("/") + 1
                        and path.endswith("/__init__.py")})
        names = [name for name in names if name.isidentifier() and name.lower() not in _NOT_CODE]
        if root and not names:  # a src layout may hold single modules or namespace packages
            names = sorted({path[len(prefix):].split("/")[0].removesuffix(".py") for path in listing
                            if path.startswith(prefix) and path.endswith(".py")})
            names = [name for name in names if name.isidentifier() and name != "conftest"]
        module = (distribution or "").replace("-", "_")
        if module and f"{prefix}{module}.py" in listing:
            names.append(module)
        if names:
            return list(dict.fromkeys(names))
    return []


def editable_install(install: list[str]) -> tuple[int, list[str], list[tuple[str, str | None]], str] | None:
    """The last command that installs the project in editable mode: (index, command prefix tokens,
    options, the editable path without extras), or None."""
    found = None
    for index, command in enumerate(install):
        parsed = install_parts(command)
        if parsed is None:
            continue
        prefix, options, _ = parsed
        for flag, value in options:
            if flag in ("-e", "--editable") and value and (value.startswith(".") or value.startswith("/testbed")):
                found = (index, prefix, options, re.sub(r"\[.*\]$", "", value))
    return found


def reinstall_command(install: list[str], distribution: str | None) -> str | None:
    """The project's editable install again, alone: ``--no-deps``, forced, with the options that
    reach and pin its build back-end; None when ``install`` has no editable install of it."""
    found = editable_install(install)
    if found is None:
        return None
    _, prefix, options, path = found
    kept = [(flag, value) for flag, value in options if flag in _KEPT_OPTIONS]
    if uv_install_args(prefix) is not None:
        # One token, so that reading the command back does not take the name for a requirement.
        force = f"--reinstall-package={distribution}" if distribution else "--reinstall"
    else:
        force = "--force-reinstall"
    return shlex.join([*prefix, *_join_args([*kept, ("--no-deps", None)], []), force, "-e", path])


def protect_own_install(install: list[str], own: OwnCode) -> list[str]:
    """``install`` with the project's own distribution never installed or pinned from an index, and
    the editable install re-done last (``--no-deps``) when a later command could have replaced it.

    A command left with nothing to install is dropped. Applying it twice changes nothing more."""
    protected: list[str] = []
    for command in install:
        parsed = install_parts(command)
        if parsed is None or own.distribution is None:
            protected.append(command)
            continue
        prefix, options, targets = parsed
        kept = [target for target in targets if _requirement_name(target) != own.distribution]
        if kept == targets:
            protected.append(command)
        elif kept or any(flag in ("-e", "--editable", "-r", "--requirement", "--group") for flag, _ in options):
            protected.append(shlex.join([*prefix, *_join_args(options, kept)]))
    found = editable_install(protected)
    again = reinstall_command(protected, own.distribution)
    if found is None or again is None:
        return protected
    later_installs = [command for command in protected[found[0] + 1:] if install_parts(command) is not None]
    if later_installs and later_installs[-1] != again:
        protected.append(again)
    return protected


def scm_environment(version: str) -> dict[str, str]:
    """The variables that make setuptools-scm (and hatch-vcs, which uses it), PDM's SCM back-end and
    poetry-dynamic-versioning report ``version``; empty when there is none."""
    if not version:
        return {}
    return {"SETUPTOOLS_SCM_PRETEND_VERSION": version, "PDM_BUILD_SCM_VERSION": version,
            "POETRY_DYNAMIC_VERSIONING_BYPASS": version}


def install_parts(command: str) -> tuple[list[str], list[tuple[str, str | None]], list[str]] | None:
    """(prefix tokens, options, targets) of a pip or ``uv pip`` install command, else None."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None
    uv_args = uv_install_args(tokens)
    if uv_args is not None:
        options, targets = _split_args(uv_args)
        return tokens[: len(tokens) - len(uv_args)], options, targets
    args = _pip_install_args(command)
    if args is None:
        return None
    options, targets = _split_args(args)
    return tokens[: len(tokens) - len(args)], options, targets
