"""Old commits get their own Python: local CPythons found and made into base images, the Python
chosen from a commit's own evidence among every one that can be made, and date pins that work on
3.6 (pip's legacy editable install, bytecode compiled without uv). Pure parts here; the images
themselves in tests/test_runtime.py and tests/test_build.py."""

from __future__ import annotations

import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from repo2env.errors import InputError
from repo2env.languages.python.own_code import OwnCode, protect_own_install, reinstall_command
from repo2env.languages.python.spec import DictRepoFiles, infer_env_spec, install_ladder, pinned_install
from repo2env.languages.python.spec.pinning import COMPILE_ALL, _unpinned
from repo2env.runtime.bootstrap import (
    _given_python,
    host_debian_suite,
    local_python_dockerfile,
    makeable_pythons,
    python_of,
)
from repo2env.runtime.local_pythons import LocalPython, discover, probe
from repo2env.runtime.package_access import PackageAccess

PYENV_VERSIONS = Path.home() / ".pyenv" / "versions"


def _pyenv(prefix: str) -> Path | None:
    found = sorted(PYENV_VERSIONS.glob(prefix + ".*")) if PYENV_VERSIONS.is_dir() else []
    return found[0] if found else None


# --- finding local CPythons -----------------------------------------------------------------------


def test_the_running_interpreter_is_found_when_given(tmp_path):
    real = Path(sys.base_prefix)
    executable = real / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if not executable.is_file():
        pytest.skip("the running Python has no bin/pythonX.Y")
    found = discover(given=[real], environ={"HOME": str(tmp_path)})
    best = found.best(f"{sys.version_info[0]}.{sys.version_info[1]}")
    assert best is not None and best.has_venv
    assert str(real) in found.searched
    local, reason = probe(executable)
    assert local is not None, reason
    assert local.version.startswith(best.python) and local.executable == str(executable.resolve())


def test_a_virtual_environment_and_a_non_python_are_skipped_with_the_reason(tmp_path):
    venv_python = Path(sys.executable)
    local, reason = probe(venv_python)
    if sys.prefix != sys.base_prefix:
        assert local is None and reason.startswith("a virtual environment of")
    not_python = tmp_path / "python3.99"
    not_python.write_text("#!/bin/sh\necho nope\n")
    not_python.chmod(0o755)
    assert probe(not_python) == (None, "did not say what it is")
    with pytest.raises(InputError, match="no Python interpreter there"):
        python_of(tmp_path / "empty-prefix")


@pytest.mark.skipif(_pyenv("3.7") is None, reason="no pyenv CPython 3.7 on this machine")
def test_pyenv_versions_are_found_and_a_given_prefix_must_be_the_asked_version():
    found = discover(environ={"PYENV_ROOT": str(PYENV_VERSIONS.parent), "HOME": "/nonexistent"})
    old = found.best("3.7")
    assert old is not None and old.origin == "pyenv" and old.copy_paths == (old.prefix,)
    assert "3.7" in found.versions()
    assert _given_python("3.7", _pyenv("3.7")).prefix == old.prefix
    with pytest.raises(InputError, match="is Python 3.7.*not 3.8"):
        _given_python("3.8", _pyenv("3.7"))
    ways = makeable_pythons()
    assert ways["3.11"] == "debootstrap bookworm" and "3.7" in ways
    assert list(ways) == sorted(ways, key=lambda python: tuple(map(int, python.split("."))))


def test_the_root_filesystem_is_this_machines_debian_release(tmp_path):
    release = tmp_path / "os-release"
    release.write_text('ID=debian\nVERSION_CODENAME=bullseye\n')
    assert host_debian_suite(release) == "bullseye"
    release.write_text("ID=ubuntu\nVERSION_CODENAME=jammy\n")
    assert host_debian_suite(release) == "bookworm", "not a Debian release: the one the images are made of"
    assert host_debian_suite(tmp_path / "missing") == "bookworm"


# --- the image made of one -------------------------------------------------------------------------


def _local(python: str, prefix: str, *, has_venv: bool = True, copy_paths: tuple[str, ...] | None = None) -> LocalPython:
    return LocalPython(python=python, version=python + ".1", executable=f"{prefix}/bin/python{python}", prefix=prefix,
                       origin="pyenv", has_venv=has_venv, copy_paths=copy_paths or (prefix,))


def test_the_dockerfile_keeps_every_guarantee_of_a_base_image():
    access = PackageAccess(ca_bundle=Path("/etc/ssl/certs/ca-certificates.crt"), ca_source="system",
                           index_url="https://mirror.example/simple")
    text = local_python_dockerfile("repo2env/base-raw:py3.11", _local("3.7", "/root/.pyenv/versions/3.7.1"),
                                   ["libssl3", "libffi8"], access)
    assert text.startswith("FROM repo2env/base-raw:py3.11\n")
    # The CA's variables serve the build's installs as build arguments; the image's environment (every
    # sandbox's) never holds the build host's settings.
    assert "COPY python/ /" in text and "ARG PIP_CERT=/etc/ssl/certs/repo2env-host-ca.crt" in text
    assert "ENV PIP_CERT" not in text
    assert "ARG PIP_INDEX_URL" in text and "mirror.example" not in text, "index URLs are build arguments"
    # The prefix sits under /root: the agent must reach it (traverse, not list).
    assert "chmod a+x /root /root/.pyenv /root/.pyenv/versions" in text
    assert "dpkg -s \"$p\"" in text and "libssl3 libffi8" in text
    assert "/root/.pyenv/versions/3.7.1/bin/python3.7 -m venv /opt/venv" in text
    assert "--ignore-requires-python uv" in text and "useradd --create-home --uid 1000" in text
    assert "ENV PATH=/opt/venv/bin:" in text and text.rstrip().endswith("WORKDIR /testbed")
    python2 = local_python_dockerfile("raw", _local("2.7", "/opt/python/2.7", has_venv=False), [], PackageAccess())
    assert "'virtualenv<20.22'" in python2 and "-p /opt/python/2.7/bin/python2.7 /opt/venv" in python2
    assert " uv" not in python2, "uv installs into Python 3 only"
    system = local_python_dockerfile("raw", _local("3.8", "/usr", copy_paths=("/usr/bin/python3.8", "/usr/lib/python3.8")),
                                     [], PackageAccess())
    assert "chmod a+x /usr /usr/bin /usr/lib" in system


# --- choosing the Python ---------------------------------------------------------------------------

ALL_HERE = ("2.7", "3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
SETUP_2016 = ("from setuptools import setup\nsetup(name='oldlib', version='1.0', packages=['oldlib'],\n"
              "      classifiers=['Programming Language :: Python :: 2.7', 'Programming Language :: Python :: 3.4',\n"
              "                   'Programming Language :: Python :: 3.5'])\n")


@pytest.mark.parametrize(("files", "when", "python", "pinned"), [
    pytest.param({"setup.py": SETUP_2016, "tox.ini": "[tox]\nenvlist = py27,py34,py35\n"}, "2016-05-10", "3.6", True,
                 id="2016-tested-on-2.7-and-3.5-gets-3.6"),
    pytest.param({"setup.py": SETUP_2016.replace("3.5'", "3.6'"), "tox.ini": "[tox]\nenvlist = py27,py36,py37\n"},
                 "2019-03-01", "3.7", True, id="2019-gets-3.7"),
    pytest.param({"setup.py": "from setuptools import setup\nsetup(name='x', python_requires='>=3.5')\n",
                  "tox.ini": "[tox]\nenvlist = py35,py36,py37,py38\n"}, "2020-02-01", "3.8", True, id="2020-gets-3.8"),
    pytest.param({"setup.py": "from setuptools import setup\nsetup(name='x', python_requires='<3')\n"}, "2015-01-01",
                 "2.7", False, id="python-2-only-gets-2.7-without-a-pin"),
])
def test_old_commits_get_the_python_of_their_time(files, when, python, pinned):
    spec = infer_env_spec(DictRepoFiles(files), datetime.fromisoformat(when).replace(tzinfo=UTC), available=ALL_HERE)
    assert spec.python == python, spec.python_reason
    assert (spec.date_pin is not None) is pinned, spec.python_reason
    if not pinned:
        assert "no date pin on Python 2" in spec.python_reason


def test_the_older_python_rung_stays_on_python_3():
    files = DictRepoFiles({"setup.py": SETUP_2016, "tox.ini": "[tox]\nenvlist = py27,py34,py35\n"})
    spec = infer_env_spec(files, datetime(2016, 5, 10, tzinfo=UTC), available=ALL_HERE)
    rungs = dict(install_ladder(spec, files, available=ALL_HERE))
    assert "older-python" not in rungs, "3.6 is the oldest Python 3 here; 2.7 is no step down for a Python 3 project"


# --- date pins on 3.6 ------------------------------------------------------------------------------

COMMANDS = ["python -m pip install --upgrade pip", "python -m pip install -e '.[tests]' six", "python -m pip install pytest"]


def test_on_3_6_the_editable_install_is_pips_and_uv_compiles_nothing():
    pinned = pinned_install(COMMANDS, "2016-06-01", "3.6")
    uv = [command for command in pinned if command.startswith("uv pip install")]
    assert uv and all("--compile-bytecode" not in command for command in uv)
    assert all(" -e " not in command for command in uv), "uv has no legacy editable install"
    assert "'.[tests]' six" in uv[0], "the project and its extras' dependencies still resolve as of the pin"
    assert pinned[pinned.index(uv[0]) + 1] == "python -m pip install --no-deps -e ."
    assert pinned[-1] == COMPILE_ALL
    assert pinned_install(pinned, "2016-06-01", "3.6") == pinned, "applying it twice changes nothing more"
    assert _unpinned(pinned) == COMMANDS
    newer = pinned_install(COMMANDS, "2016-06-01", "3.7")
    assert any(" -e " in command and "--compile-bytecode" in command for command in newer) and COMPILE_ALL not in newer


def test_on_3_6_the_dependencies_build_with_setuptools_of_their_time():
    """pip's legacy editable install needs no PEP 660 back-end, so nothing in the uv install needs
    setuptools 64+; an old sdist among the dependencies (markupsafe 1.0 imports setuptools.Feature,
    removed in 46) builds with the setuptools of its day."""
    uv = next(command for command in pinned_install(COMMANDS, "2016-06-01", "3.6") if "'.[tests]'" in command)
    assert "setuptools=2019-03-01T00:00:00Z" in uv and "2023-01-01" not in uv
    newer = next(command for command in pinned_install(COMMANDS, "2016-06-01", "3.7") if "'.[tests]'" in command)
    assert "setuptools=2023-01-01T00:00:00Z" in newer, "3.7's editable install needs a PEP 660 setuptools"


@pytest.mark.parametrize(("line", "dropped"), [
    ("-e .", True), ("-e .[tests]", True), ("--editable=.", True), ("  -e ./  # the project", True), ("-e '.'", True),
    ('-e ".[dev]"', True), ("-e ./plugins/extra", False), ("-e git+https://example.org/x.git#egg=x", False),
    ("pytest", False),
])
def test_a_requirement_files_own_editable_line_goes_from_the_env_layers_copy(tmp_path, line, dropped):
    """The project's editable install is the spec's own: uv cannot take a requirement file's `-e .`
    on 3.6 (no PEP 660 hook: packaging 2016) nor read it quoted on any Python (marshmallow 2018)."""
    import subprocess

    from repo2env.languages.python.build import PythonBuild, drop_own_editable_lines
    from repo2env.models import EnvSpec
    from repo2env.runtime.images import env_dockerfile

    requirements = tmp_path / "dev-requirements.txt"
    requirements.write_text(f"tox\n{line}\npretend\n")
    for python in ("3.6", "3.9"):
        install = pinned_install([f"python -m pip install -r {requirements}", "python -m pip install pytest"],
                                 "2016-06-01", python)
        subprocess.run(drop_own_editable_lines(install), shell=True, check=True)
        lines = requirements.read_text().splitlines()
        assert (line not in lines) is dropped and lines[0] == "tox" and lines[-1] == "pretend"
    assert drop_own_editable_lines(["python -m pip install pytest"]) == ""
    spec = EnvSpec(python="3.6", install=pinned_install(["python -m pip install -r dev-requirements.txt"], "2016-06-01", "3.6"))
    own = OwnCode(distribution=None, import_names=(), declared=False, vcs_version=False)
    dockerfile = env_dockerfile(spec, PackageAccess(), PythonBuild().env_layer(spec, own, "", agent_uid=1000))
    assert "sed -i -E " in dockerfile and dockerfile.index("sed -i -E ") < dockerfile.index("uv pip install")


def test_on_3_6_the_reinstall_of_the_project_is_pips_too():
    own = OwnCode(distribution="oldlib", import_names=("oldlib",), declared=True, vcs_version=False)
    protected = protect_own_install(pinned_install(COMMANDS, "2016-06-01", "3.6"), own)
    assert reinstall_command(protected, "oldlib") == "python -m pip install --no-deps --force-reinstall -e ."


@pytest.mark.skipif(shutil.which("ldd") is None, reason="no ldd")
def test_a_system_prefix_copies_only_the_interpreters_own_files():
    system = Path("/usr/bin") / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if not system.is_file():
        pytest.skip("no system Python of this version")
    local, reason = probe(system, origin="system")
    assert local is not None, reason
    assert local.prefix == "/usr" and str(system.resolve()) in local.copy_paths
    assert local.stdlib in local.copy_paths and "/usr" not in local.copy_paths


# --- releases of the pin's time gone from the index ----------------------------------------------

# uv's error (with Docker's colour codes and line breaks around each chunk) for marshmallow's 2018
# dev requirements: pytest 3.6 needs atomicwrites, whose releases before 2022 are gone from PyPI.
UV_FILTERED_LOG = (
    "\x1b[91merror: No solution found when resolving dependencies\n"
    "  cause: Because there are no versions of atomicwrites and pytest>=3.6.0 depends on atomicwrites>=1.0, we can\n"
    "conclude that pytest>=3.6.0 cannot be used.\n\x1b[0m\n"
    "\x1b[91mhint: `atomicwrites` was filtered by `exclude-newer` to only include packages uploaded before "
    "2018-06-01T00:00:00Z. The latest version satisfying the requirement is v1.4.1, published at "
    "2022-07-08T18:31:40.459Z. Consider using `exclude-newer-package` to override the cutoff for this package.\n\x1b[0m\n")


def test_a_package_whose_old_releases_are_gone_may_reach_one_that_exists():
    from repo2env.languages.python.spec import exempt_from_pin, releases_gone_before_pin

    gone = releases_gone_before_pin(UV_FILTERED_LOG)
    assert gone == {"atomicwrites": "2022-07-09"}
    assert releases_gone_before_pin("error: No solution found when resolving dependencies") == {}
    pinned = pinned_install(["python -m pip install -r dev-requirements.txt", "python -m pip install pytest==4.6.11"],
                            "2018-06-01", "3.7")
    exempted = exempt_from_pin(pinned, gone)
    assert "--exclude-newer 2018-06-01T00:00:00Z" in exempted[1], "every other package keeps the pin"
    assert "--exclude-newer-package atomicwrites=2022-07-09T00:00:00Z" in exempted[1]
    assert exempted[2] == pinned[2], "an install without a date pin is left as it is"
    assert exempt_from_pin(exempted, gone) == exempted
    assert _unpinned(exempted) == _unpinned(pinned)


# --- old sdists beside a modern editable back-end ---------------------------------------------------


def test_an_sdist_that_needs_old_setuptools_gets_its_own_build_floor():
    """markupsafe 1.0 (an sdist only) imports setuptools.Feature, gone in 46; the editable install of
    a 2018 project on 3.7 lets setuptools reach 2023 (PEP 660). Split, the dependencies build with the
    setuptools of their day and the project alone with the editable back-end."""
    from repo2env.languages.python.own_code import editable_install
    from repo2env.languages.python.spec import old_setuptools_needed, split_editable_build

    log = ("\x1b[91merror: Failed to build `markupsafe==1.0`\n  cause: The build backend returned an error\n"
           "         ImportError: cannot import name 'Feature' from 'setuptools' (/tmp/x/setuptools/__init__.py)\n\x1b[0m")
    assert old_setuptools_needed(log) and not old_setuptools_needed("error: Failed to build `numpy==1.15.0`")
    pinned = pinned_install(["python -m pip install -e '.[tests]' six", "python -m pip install pytest"], "2018-10-01", "3.7")
    split = split_editable_build(pinned, "3.7")
    plain, editable = split[1], split[2]
    assert "'.[tests]' six" in plain and " -e " not in plain
    assert "setuptools=2019-03-01T00:00:00Z" in plain and "2023-01-01" not in plain
    assert editable.endswith("--no-deps -e .") and "setuptools=2023-01-01T00:00:00Z" in editable
    assert "--exclude-newer 2018-10-01T00:00:00Z" in plain and "--exclude-newer 2018-10-01T00:00:00Z" in editable
    assert editable_install(split)[0] == 2, "the project's editable install is the split one"
    assert split_editable_build(split, "3.7") == split
    assert split_editable_build(["python -m pip install -e ."], "3.7") == ["python -m pip install -e ."], "no pin, no split"


# --- old setuptools behind a TLS-intercepting proxy -----------------------------------------------


def test_the_extra_ca_is_in_the_system_bundles_only_while_a_layer_installs(tmp_path, monkeypatch):
    """easy_install (old setuptools fetching a setup_requires) reads no variable, only the first
    system bundle that exists: the env and task layers' installs run with the extra CA appended to
    each (once, a link to one being the same bundle), and the bundles are as they were (content,
    mode, times) when the step ends, failing or not."""
    import os
    import subprocess

    from repo2env.languages.build import EnvLayer, TaskLayer
    from repo2env.models import EnvSpec
    from repo2env.runtime import package_access
    from repo2env.runtime.images import env_dockerfile, task_dockerfile

    system, extra = tmp_path / "ca-certificates.crt", tmp_path / "host-ca.crt"
    system.write_text("SYSTEM\n")
    extra.write_text("PROXY\n")
    os.chmod(system, 0o644)
    os.utime(system, (1_500_000_000, 1_500_000_000))
    (tmp_path / "cert.pem").symlink_to(system)
    monkeypatch.setattr(package_access, "EASY_INSTALL_CA_PATHS",
                        (str(tmp_path / "absent.crt"), str(system), str(tmp_path / "cert.pem")))
    access = PackageAccess(ca_bundle=Path("/host/ca.crt"))
    before = (system.read_bytes(), os.stat(system).st_mode, os.stat(system).st_mtime_ns)
    for install, status in ((f"cat {system} > {tmp_path}/seen", 0), (f"cat {system} > {tmp_path}/seen; exit 3", 3)):
        ran = subprocess.run(["sh", "-c", access.trusting_system_bundles(install)], env={"SSL_CERT_FILE": str(extra),
                             "PATH": os.environ["PATH"]}, capture_output=True, text=True)
        assert ran.returncode == status, ran.stderr
        assert (tmp_path / "seen").read_text() == "SYSTEM\n\nPROXY\n", "the proxy's CA, once, during the install"
        assert (system.read_bytes(), os.stat(system).st_mode, os.stat(system).st_mtime_ns) == before
    # Without the build argument nothing changes; without an extra CA the command is left alone.
    assert subprocess.run(["sh", "-c", access.trusting_system_bundles(f"cat {system}")], env={"PATH": os.environ["PATH"]},
                          capture_output=True, text=True).stdout == "SYSTEM\n"
    assert PackageAccess().trusting_system_bundles("make install") == "make install"

    layer = EnvLayer(run="set -e; pip install -e .")
    task_layer = TaskLayer(run="sh /opt/repo2env/reinstall")
    for with_ca, without_ca in ((env_dockerfile(EnvSpec(python="3.6"), access, layer),
                                 env_dockerfile(EnvSpec(python="3.6"), PackageAccess(), layer)),
                                (task_dockerfile("env", access, task_layer), task_dockerfile("env", PackageAccess(), task_layer))):
        [run] = [line for line in with_ca.splitlines() if "install" in line and line.startswith("RUN ")]
        assert "trap repo2env_ca_restore EXIT" in run and str(system) in run and "ENV " not in with_ca
        assert "repo2env_ca" not in without_ca
