"""Environment inference on realistic repository shapes: Python, install commands, date pins,
overrides and the install ladder. Pure functions, so no Docker and no network."""

from __future__ import annotations

import re
import shlex
import subprocess
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from repo2env.demo.library import PYPROJECT as TEXTKIT_PYPROJECT
from repo2env.errors import InputError
from repo2env.languages.python.spec import (
    AVAILABLE_PYTHONS,
    DEFAULT_TEST_CMD,
    LADDER_RUNGS,
    PYTEST_RELEASES,
    DictRepoFiles,
    date_pin,
    exempt_from_pin,
    infer_env_spec,
    infer_install,
    infer_python,
    infer_system_packages,
    infer_test_cmd,
    install_failure_reason,
    install_ladder,
    load_yaml_text,
    pinned_install,
    pytest_for,
    pytest_pin_commands,
)
from repo2env.languages.python.spec.overrides import EnvOverride, load_overrides, overrides_from_document
from repo2env.models import EnvSpec


def repo(paths: dict[str, str] | None = None, **files: str) -> DictRepoFiles:
    """A repository from ``paths`` and keyword file names (``setup_py`` is ``setup.py``, ``a__b_txt``
    is ``a/b.txt``), each text dedented."""
    named = {**(paths or {}), **{_path(name): text for name, text in files.items()}}
    return DictRepoFiles({path: textwrap.dedent(text).lstrip("\n") for path, text in named.items()})


def _path(name: str) -> str:
    special = {"tox_ini": "tox.ini", "setup_py": "setup.py", "setup_cfg": "setup.cfg",
               "pyproject": "pyproject.toml", "travis": ".travis.yml", "pytest_ini": "pytest.ini"}
    if name in special:
        return special[name]
    stem, _, ext = name.rpartition("_")
    return f"{stem.replace('__', '/')}.{ext}"


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


SETUP_PY_2019 = """
    from setuptools import setup, find_packages

    TESTS_REQUIRE = ["pytest>=3.6", "mock"]

    setup(
        name="oldlib",
        version="1.2.0",
        packages=find_packages(exclude=["tests"]),
        python_requires=">=3.5",
        install_requires=["six"],
        tests_require=TESTS_REQUIRE,
        extras_require={"docs": ["sphinx"], "test": TESTS_REQUIRE},
        classifiers=[
            "Programming Language :: Python :: 3",
        ],
    )
"""

TOX_2019 = """
    [tox]
    envlist = py35, py36, py37, py38, flake8

    [testenv]
    deps =
        -r{toxinidir}/requirements-test.txt
        pytest-mock
        py35: pathlib2
        {env:EXTRA_DEP:}
    commands = pytest {posargs}
"""

WORKFLOW_FLOATS = """
    name: tests
    on: [push, pull_request]
    jobs:
      lint:
        runs-on: ubuntu-latest
        steps:
          - uses: actions/setup-python@v5
            with:
              python-version: "3.12"
      test:
        runs-on: ubuntu-latest
        strategy:
          matrix:
            python-version: [3.10]
        steps:
          - uses: actions/setup-python@v5
            with:
              python-version: ${{ matrix.python-version }}
"""


# --------------------------------------------------------------------------------------------
# Python


PYTHON_CASES = [
    pytest.param(
        repo(setup_py=SETUP_PY_2019, tox_ini=TOX_2019), "2019-06-01", "3.9",
        ["requires-python >=3.5", "tox envlist 3.5-3.8"], id="2019-setup.py-tox-py35-py38",
    ),
    pytest.param(
        repo(pyproject='[project]\nname = "p"\nrequires-python = ">=3.8"\n'), "2023-05-01", "3.11",
        ["requires-python >=3.8", "commit date 2023-05-01"], id="2023-requires-python->=3.8",
    ),
    pytest.param(
        repo(pyproject='[project]\nname = "p"\nrequires-python = ">=3.10"\n'), "2025-02-01", "3.13",
        ["requires-python >=3.10"], id="2025-requires-python->=3.10",
    ),
    pytest.param(
        repo(pyproject='[project]\nname = "p"\nrequires-python = ">=3.6, <3.10"\n'), "2024-06-01", "3.9",
        ["requires-python"], id="upper-bound-<3.10",
    ),
    pytest.param(
        repo(pyproject='[project]\nname = "p"\nrequires-python = ">=3.12"\n'), "2024-01-15", "3.13",
        ["requires-python >=3.12"], id="constraint-beats-date",
    ),
    pytest.param(
        repo(pyproject='[project]\nname = "p"\nrequires-python = ">=3.14"\n'), "2025-12-01", "3.13",
        ["requires-python >=3.14"], id="clamped-to-newest",
    ),
    pytest.param(
        repo(setup_cfg="[options]\npython_requires = >=3.6, <3.8\n"), "2024-06-01", "3.9",
        ["requires-python <3.8,>=3.6"], id="clamped-to-nearest-older",
    ),
    pytest.param(
        repo(pyproject='[project]\nname = "p"\nrequires-python = "==3.10.*"\n'), "2021-11-01", "3.9",
        ["requires-python ==3.10.*", "commit date 2021-11-01"], id="between-images-2021",
    ),
    pytest.param(
        repo(pyproject='[project]\nname = "p"\nrequires-python = "==3.10.*"\n'), "2024-01-01", "3.11",
        ["requires-python ==3.10.*"], id="between-images-2024",
    ),
    pytest.param(
        repo(setup_py="from setuptools import setup\nsetup(name='py2', python_requires='==2.7.*')\n"),
        "2016-01-01", "3.9", ["requires-python ==2.7.*"], id="python2-clamped-to-oldest",
    ),
    pytest.param(
        repo(setup_cfg="""
            [metadata]
            name = cfgonly
            classifiers =
                Programming Language :: Python :: 3.8
                Programming Language :: Python :: 3.9
                Programming Language :: Python :: 3.10
                Programming Language :: Python :: 3.11
        """), "2023-06-01", "3.11", ["classifiers 3.8-3.11"], id="classifiers-only",
    ),
    pytest.param(
        repo(setup_cfg="""
            [metadata]
            classifiers =
                Programming Language :: Python :: 3.6
                Programming Language :: Python :: 3.8
        """), "2024-03-01", "3.9", ["classifiers 3.6-3.8"], id="stale-classifiers-clamped",
    ),
    pytest.param(
        repo(**{".github__workflows__tests_yml": WORKFLOW_FLOATS}), "2025-01-10", "3.11",
        ["CI matrix 3.10"], id="workflow-matrix-only-3.10-not-3.1",
    ),
    pytest.param(
        repo(travis="language: python\npython:\n  - 2.7\n  - 3.6\n  - 3.7\n"), "2018-09-01", "3.9",
        ["CI matrix 2.7-3.7"], id="travis",
    ),
    pytest.param(
        repo(tox_ini="[tox]\nenvlist = py{37,38,39,310,311}-django{32,42}, docs\n"), "2023-05-01", "3.11",
        ["tox envlist 3.7-3.11"], id="tox-generative-envlist",
    ),
    pytest.param(
        repo(pyproject='[tool.poetry]\nname = "p"\n[tool.poetry.dependencies]\npython = "^3.8"\n'),
        "2023-03-01", "3.11", ["requires-python <4,>=3.8"], id="poetry-caret",
    ),
    pytest.param(repo(), "2020-01-01", "3.9", ["commit date 2020-01-01"], id="nothing-2020"),
    pytest.param(repo(), "2023-01-01", "3.11", ["commit date 2023-01-01"], id="nothing-2023"),
    pytest.param(repo(), "2025-06-01", "3.13", ["commit date 2025-06-01"], id="nothing-2025"),
    pytest.param(repo(), "2024-04-06", "3.11", ["commit date"], id="grace-ends-the-day-before-3.13"),
    pytest.param(repo(), "2024-04-08", "3.13", ["commit date"], id="grace-includes-3.13"),
]


@pytest.mark.parametrize(("files", "when", "python", "reason_parts"), PYTHON_CASES)
def test_infer_python(files: DictRepoFiles, when: str, python: str, reason_parts: list[str]) -> None:
    chosen, reason = infer_python(files, day(when))
    assert chosen == python
    for part in reason_parts:
        assert part in reason


ONLY_310 = repo(pyproject='[project]\nname = "p"\nrequires-python = "==3.10.*"\n')
WITH_PULLED = (*AVAILABLE_PYTHONS, "3.8", "3.10")


@pytest.mark.parametrize(("files", "when", "available", "python", "reason_part"), [
    pytest.param(ONLY_310, "2021-11-01", WITH_PULLED, "3.10", "requires-python ==3.10.*", id="pulled-3.10-fits"),
    pytest.param(ONLY_310, "2021-11-01", AVAILABLE_PYTHONS, "3.9", "3.10 fits better: no base image",
                 id="nearest-says-what-fits"),
    pytest.param(repo(setup_py=SETUP_PY_2019, tox_ini=TOX_2019), "2019-06-01", WITH_PULLED, "3.8", "tox envlist 3.5-3.8",
                 id="2019-tox-gets-3.8"),
    pytest.param(repo(setup_py=SETUP_PY_2019, tox_ini=TOX_2019), "2019-06-01", AVAILABLE_PYTHONS, "3.9",
                 "3.8 fits better", id="2019-tox-without-3.8"),
])
def test_infer_python_uses_every_base_image_there_is(files: DictRepoFiles, when: str, available: tuple[str, ...],
                                                     python: str, reason_part: str) -> None:
    chosen, reason = infer_python(files, day(when), available)
    assert chosen == python
    assert reason_part in reason
    assert ("fits better" in reason) is (chosen not in ("3.10", "3.8") and available == AVAILABLE_PYTHONS)


def test_older_python_rung_uses_the_available_pythons() -> None:
    files = repo(pyproject='[project]\nname = "p"\nrequires-python = ">=3.8"\n')
    spec = infer_env_spec(files, day("2023-02-01"), available=WITH_PULLED)
    assert spec.python == "3.11"
    assert dict(install_ladder(spec, files, available=WITH_PULLED))["older-python"].python == "3.10"
    assert dict(install_ladder(spec, files))["older-python"].python == "3.9"


def test_a_2020_project_allowing_any_python3_gets_the_python_of_its_time() -> None:
    files = repo(setup_py="from setuptools import setup\nsetup(name='x', python_requires='>=3.6')\n")
    assert infer_python(files, day("2020-05-01"))[0] == "3.9"
    assert infer_python(files, day("2025-05-01"))[0] == "3.13"


def test_available_pythons_match_the_base_image_recipes() -> None:
    from repo2env.runtime.bootstrap import DEBIAN_SUITE_FOR_PYTHON

    assert AVAILABLE_PYTHONS == tuple(DEBIAN_SUITE_FOR_PYTHON)


# --------------------------------------------------------------------------------------------
# Install commands


UPGRADE_PIP = "python -m pip install --upgrade pip"


def _pyproject(extras: str = "", groups: str = "") -> str:
    text = '[build-system]\nrequires = ["setuptools"]\n[project]\nname = "p"\nversion = "1"\n'
    if extras:
        text += f"[project.optional-dependencies]\n{extras}\n"
    if groups:
        text += f"[dependency-groups]\n{groups}\n"
    return text


INSTALL_CASES = [
    pytest.param(
        repo(pyproject=_pyproject('dev = ["black"]\ntest = ["pytest", "hypothesis"]\ndocs = ["sphinx"]')),
        [UPGRADE_PIP, "python -m pip install -e '.[test]'", "python -m pip install pytest"],
        id="extras-test-preferred-to-dev",
    ),
    pytest.param(
        repo(pyproject=_pyproject('dev = ["pytest"]\ndocs = ["sphinx"]')),
        [UPGRADE_PIP, "python -m pip install -e '.[dev]'", "python -m pip install pytest"],
        id="extras-dev-when-no-test",
    ),
    pytest.param(
        repo(pyproject=_pyproject('tests = ["pytest"]\ntesting = ["coverage"]\nall = ["numpy"]')),
        [UPGRADE_PIP, "python -m pip install -e '.[tests,testing]'", "python -m pip install pytest"],
        id="several-test-extras",
    ),
    pytest.param(
        repo(pyproject=_pyproject(groups='test = ["pytest>=8"]\nlint = ["ruff"]')),
        [UPGRADE_PIP, "python -m pip install -e .", "python -m pip install --group test",
         "python -m pip install pytest"],
        id="pep735-groups",
    ),
    pytest.param(
        repo(setup_py="from setuptools import setup\nsetup(name='x')\n",
             requirements_txt="six\n", requirements__test_txt="-r base.txt\npytest\n",
             requirements__docs_txt="sphinx\n", requirements__lint_txt="flake8\n"),
        [UPGRADE_PIP, "python -m pip install -e .", "python -m pip install -r requirements.txt",
         "python -m pip install -r requirements/test.txt", "python -m pip install pytest"],
        id="requirements-test-not-docs",
    ),
    pytest.param(
        repo({"requirements/tests.txt": "pytest\n", "requirements/tests-pre-commit.txt": "pre-commit\n",
              "requirements/tests-min.txt": "six==1.0\n", "requirements/tests-extra.txt": "numpy\n",
              "requirements/typing.txt": "mypy\n"},
             setup_py="from setuptools import setup\nsetup(name='x')\n"),
        [UPGRADE_PIP, "python -m pip install -e .", "python -m pip install -r requirements/tests.txt",
         "python -m pip install pytest"],
        id="one-test-file-the-best-named-not-pre-commit-or-minimum",
    ),
    pytest.param(
        repo({"requirements/tests.txt": "pytest\n", "requirements/ci-tests.txt": "pytest\nmock\n",
              ".github/workflows/ci.yml": """
                  jobs:
                    lint:
                      steps:
                        - run: pip install -r requirements/tests.txt && flake8
                    tests:
                      steps:
                        - run: |
                            pip install -e .
                            pip install -r requirements/ci-tests.txt
                        - run: pytest
              """},
             setup_py="from setuptools import setup\nsetup(name='x')\n"),
        [UPGRADE_PIP, "python -m pip install -e .", "python -m pip install -r requirements/ci-tests.txt",
         "python -m pip install pytest"],
        id="the-file-the-ci-test-job-installs",
    ),
    pytest.param(
        repo({"test-requirements.txt": "pytest\n", "requirements-testing.txt": "pytest\nmock\n",
              "noxfile.py": """
                  import nox

                  @nox.session
                  def lint(session):
                      session.install("-r", "test-requirements.txt")

                  @nox.session(python=["3.8", "3.9"])
                  def tests(session):
                      session.install("-r", "requirements-testing.txt")
                      session.run("pytest")
              """},
             setup_py="from setuptools import setup\nsetup(name='x')\n"),
        [UPGRADE_PIP, "python -m pip install -e .", "python -m pip install -r requirements-testing.txt",
         "python -m pip install pytest"],
        id="the-file-the-nox-test-session-installs",
    ),
    pytest.param(
        repo({"noxfile.py": """
                  import nox

                  @nox.session
                  def lint(session):
                      session.install("pre-commit")

                  @nox.session(python=["3.7", "3.8"])
                  def tests(session):
                      session.install("coverage<5.0.0", "pretend", "pytest>=6.2.0", "pip>=9.0.2")
                      session.install(".")
                      session.run("pytest")
              """},
             setup_py="from setuptools import setup\nsetup(name='x')\n"),
        [UPGRADE_PIP, "python -m pip install -e .", "python -m pip install 'coverage<5.0.0' pretend 'pytest>=6.2.0'",
         "python -m pip install pytest"],
        id="the-packages-the-nox-test-session-installs",
    ),
    pytest.param(
        repo(setup_cfg="""
            [metadata]
            name = cfgproj
            [options]
            packages = find:
            tests_require =
                mock
            [options.extras_require]
            testing =
                pytest
                pytest-mock
            docs = sphinx
        """),
        [UPGRADE_PIP, "python -m pip install -e '.[testing]'", "python -m pip install mock",
         "python -m pip install pytest"],
        id="setup.cfg-extras",
    ),
    pytest.param(
        repo({"requirements-test.txt": "pytest\n"}, setup_py=SETUP_PY_2019, tox_ini=TOX_2019),
        [UPGRADE_PIP, "python -m pip install -e '.[test]'", "python -m pip install -r requirements-test.txt",
         "python -m pip install 'pytest>=3.6' mock pytest-mock", "python -m pip install pytest"],
        id="setup.py-extras-tests_require-and-tox-deps",
    ),
    pytest.param(
        repo({"dev-requirements.txt": "pytest==6.2.4\n"}, requirements_txt="flask==1.1.2\n", app_py=""),
        [UPGRADE_PIP, "python -m pip install -r requirements.txt", "python -m pip install -r dev-requirements.txt",
         "python -m pip install pytest"],
        id="not-installable-app",
    ),
    pytest.param(
        repo(pyproject="""
            [tool.poetry]
            name = "poet"
            [tool.poetry.dependencies]
            python = "^3.8"
            [tool.poetry.group.test.dependencies]
            pytest = "^7.1"
            pytest-asyncio = {version = "~0.20", extras = []}
            localthing = {path = "../localthing"}
            [build-system]
            requires = ["poetry-core"]
            build-backend = "poetry.core.masonry.api"
        """),
        [UPGRADE_PIP, "python -m pip install -e .", "python -m pip install 'pytest>=7.1,<8' 'pytest-asyncio>=0.20,<0.21'",
         "python -m pip install pytest"],
        id="poetry-test-group",
    ),
    pytest.param(
        repo(setup_py="from setuptools import setup\nsetup(name='n')\n", setup_cfg="[nosetests]\nverbosity = 2\n"),
        [UPGRADE_PIP, "python -m pip install -e .", "python -m pip install 'pytest<8'"],
        id="nose-suite-keeps-pytest-7",
    ),
    pytest.param(
        repo(pyproject=_pyproject() + '[tool.pytest.ini_options]\naddopts = "--cov=p -n auto"\n'
             'asyncio_mode = "auto"\n'),
        [UPGRADE_PIP, "python -m pip install -e .",
         "python -m pip install pytest pytest-cov pytest-xdist pytest-asyncio"],
        id="plugins-the-pytest-config-needs",
    ),
]


@pytest.mark.parametrize(("files", "expected"), INSTALL_CASES)
def test_infer_install(files: DictRepoFiles, expected: list[str]) -> None:
    assert infer_install(files) == expected


@pytest.mark.parametrize(("files", "expected"), INSTALL_CASES)
def test_install_always_has_the_project_first_and_pytest_last(files: DictRepoFiles, expected: list[str]) -> None:
    commands = infer_install(files)
    assert len(commands) == len(set(commands))
    assert shlex.split(commands[-1])[4].startswith("pytest")
    installable = any(name in files for name in ("setup.py", "setup.cfg", "pyproject.toml"))
    assert any(" -e " in command for command in commands[:2]) == installable


SETUP_PY_EXTRAS_BY_KEY = """
import platform, sys
from setuptools import setup

EXTRAS_REQUIRE = {
    "docs": ["sphinx"],
    "tests_no_zope": ["hypothesis", "pytest>=4.3.0"],
}
if sys.version_info[:2] >= (3, 6) and platform.python_implementation() != "PyPy":
    EXTRAS_REQUIRE["tests_no_zope"].extend(["mypy"])
EXTRAS_REQUIRE["tests"] = EXTRAS_REQUIRE["tests_no_zope"] + ["zope.interface"]
EXTRAS_REQUIRE["dev"] = EXTRAS_REQUIRE["tests"] + EXTRAS_REQUIRE["docs"] + ["pre-commit"]

setup(name="attrs", extras_require=EXTRAS_REQUIRE)
"""


def test_extras_added_by_key_after_the_dict_are_found() -> None:
    # attrs 2021: the "tests" extra is assigned by key, from another extra; without it the suite's
    # hypothesis is never installed and every rung fails at collection.
    files = repo(setup_py=SETUP_PY_EXTRAS_BY_KEY)
    assert "python -m pip install -e '.[tests]'" in infer_install(files)


def test_textkit_demo_shape() -> None:
    files = DictRepoFiles({"pyproject.toml": TEXTKIT_PYPROJECT, "src/textkit/__init__.py": "",
                           "tests/test_slug.py": "from textkit import slugify\n"})
    spec = infer_env_spec(files, day("2024-01-08"))
    assert spec.python == "3.11"
    assert "python -m pip install -e '.[test]'" in infer_install(files)
    assert any(command.endswith("-e '.[test]'") for command in spec.install)
    assert spec.date_pin == "2024-02-01"
    assert spec.test_cmd == DEFAULT_TEST_CMD
    assert spec.system_packages == []


@pytest.mark.parametrize(("files", "expected"), [
    pytest.param(repo(setup_py="from setuptools import setup, Extension\n"
                               "setup(name='c', ext_modules=[Extension('c._speed', ['c/_speed.c'])])\n"),
                 ["build-essential", "python3-dev"], id="c-extension"),
    pytest.param(repo(pyproject='[build-system]\nrequires = ["maturin>=1"]\nbuild-backend = "maturin"\n'),
                 ["build-essential", "python3-dev", "cargo"], id="rust"),
    pytest.param(repo(pyproject=_pyproject()), [], id="pure-python"),
])
def test_infer_system_packages(files: DictRepoFiles, expected: list[str]) -> None:
    assert infer_system_packages(files) == expected


@pytest.mark.parametrize(("files", "expected"), [
    pytest.param(repo(), DEFAULT_TEST_CMD, id="no-config"),
    pytest.param(repo(pytest_ini="[pytest]\naddopts = -ra --strict-markers\n"), DEFAULT_TEST_CMD, id="pytest.ini"),
    pytest.param(repo(setup_cfg="[tool:pytest]\naddopts = --ff\n"), "python -m pytest -rA", id="needs-the-cache"),
    pytest.param(repo(tests__test_a_py="import unittest\nclass T(unittest.TestCase):\n    pass\n"),
                 DEFAULT_TEST_CMD, id="unittest-runs-under-pytest"),
])
def test_infer_test_cmd(files: DictRepoFiles, expected: str) -> None:
    assert infer_test_cmd(files) == expected


# --------------------------------------------------------------------------------------------
# Date pins


@pytest.mark.parametrize(("moment", "expected"), [
    (datetime(2021, 3, 1, 12, 0, tzinfo=UTC), "2021-04-01"),
    (datetime(2021, 3, 31, 23, 30, tzinfo=timezone(timedelta(hours=-5))), "2021-05-01"),
    (datetime(2021, 12, 31, 8, 0), "2022-01-01"),
    (datetime(2021, 2, 28, 8, 0, tzinfo=UTC), "2021-03-01"),
])
def test_date_pin_is_the_end_of_the_commits_month_in_utc(moment: datetime, expected: str) -> None:
    assert date_pin(moment) == expected


PIN = "--exclude-newer 2021-03-02T00:00:00Z"
UV = "uv pip install --python python --compile-bytecode"
# What an editable install with a pin older than the build back-end floor adds.
BACKENDS = " ".join(f"--exclude-newer-package {name}=2023-01-01T00:00:00Z" for name in
                    ("setuptools", "wheel", "setuptools-scm", "flit-core", "poetry-core", "tomli"))


@pytest.mark.parametrize(("command", "expected"), [
    ("python -m pip install -e '.[test]'", f"{UV} {PIN} {BACKENDS} -e '.[test]'"),
    ("python -m pip install -r requirements/test.txt", f"{UV} {PIN} -r requirements/test.txt"),
    ("pip install --group test", f"{UV} {PIN} --group test"),
    ("python -m pip install 'pytest<8' mock", f"{UV} {PIN} 'pytest<8' mock"),
    ("python -m pip install --pre 'numpy>=1.20'", f"{UV} {PIN} --prerelease allow 'numpy>=1.20'"),
    ("python -m pip install pytest==6.2.5", f"{UV} pytest==6.2.5"),
    ("python -m pip install --upgrade pip", "python -m pip install --upgrade pip"),
    ("python -m pip install --user --install-option=--x foo", "python -m pip install --user --install-option=--x foo"),
    ("apt-get install -y libxml2-dev", "apt-get install -y libxml2-dev"),
    ("python -m pip install foo && echo done", "python -m pip install foo && echo done"),
])
def test_pinned_install_rewrites_each_command(command: str, expected: str) -> None:
    assert pinned_install([command], "2021-03-02") == ["python -m pip install uv", expected]


@pytest.mark.parametrize(("pin", "backends_newer"), [
    ("2018-06-01", True),
    ("2019-07-01", True),   # setuptools of the day has no build_editable (PEP 660)
    ("2022-09-01", True),
    ("2023-01-01", False),  # the floor itself: the pin alone already allows it
    ("2024-05-01", False),
])
def test_editable_installs_let_build_backends_be_recent(pin: str, backends_newer: bool) -> None:
    editable, requirements = pinned_install(["python -m pip install -e .", "python -m pip install -r r.txt"], pin)[1:]
    assert editable.startswith(f"{UV} --exclude-newer {pin}T00:00:00Z")
    assert ("--exclude-newer-package setuptools=2023-01-01T00:00:00Z" in editable) is backends_newer
    # Only editable installs: sdists of old dependencies may need the setuptools of their day,
    # but at least the setuptools>=40.8.0 that a build without [build-system] asks for (2019-02).
    assert "=2023-01-01" not in requirements
    assert ("--exclude-newer-package setuptools=2019-03-01T00:00:00Z" in requirements) is (pin < "2019-03-01")
    # Bytecode written at install, as pip does: the agent cannot write it into site-packages.
    assert "--compile-bytecode" in shlex.split(editable) and "--compile-bytecode" in shlex.split(requirements)


def test_pinned_install_is_idempotent_and_validates_the_date() -> None:
    commands = infer_install(repo(setup_py=SETUP_PY_2019, tox_ini=TOX_2019))
    once = pinned_install(commands, "2019-06-02")
    assert pinned_install(once, "2019-06-02") == once
    assert once[0] == "python -m pip install uv"
    with pytest.raises(ValueError):
        pinned_install(commands, "June 2019")


# --------------------------------------------------------------------------------------------
# The spec and overrides


def test_override_is_applied_last() -> None:
    files = repo(setup_py=SETUP_PY_2019, tox_ini=TOX_2019)
    override = EnvOverride(python="3.11", pre_install=["python -m pip install 'setuptools<58'"],
                           extra_install=["python -m pip install freezegun"], system_packages=["libxml2-dev"],
                           test_cmd="python -m pytest -x", date_pin="2020-01-01")
    spec = infer_env_spec(files, day("2019-06-01"), override)
    assert (spec.python, spec.python_reason, spec.date_pin) == ("3.11", "override", "2020-01-01")
    assert spec.install[1] == f"{UV} --exclude-newer 2020-01-01T00:00:00Z 'setuptools<58'"
    assert spec.install[-1] == f"{UV} --exclude-newer 2020-01-01T00:00:00Z freezegun"
    assert spec.test_cmd == "python -m pytest -x"
    assert spec.system_packages == ["libxml2-dev"]


@pytest.mark.parametrize(("warmup", "expected"), [
    (None, None),
    (False, None),
    (True, "python -m pytest --collect-only -q -p no:cacheprovider"),
    ("python -c 'import nltk; nltk.download(\"punkt\")'", "python -c 'import nltk; nltk.download(\"punkt\")'"),
])
def test_override_asks_for_a_warmup(warmup: bool | str | None, expected: str | None) -> None:
    spec = infer_env_spec(OLD_REPO, day("2019-06-01"), EnvOverride(warmup=warmup))
    assert spec.warmup == expected
    assert infer_env_spec(OLD_REPO, day("2019-06-01")).warmup is None


def test_override_replaces_install_and_disables_the_pin() -> None:
    override = EnvOverride(install=["python -m pip install -e ."], date_pin=False)
    spec = infer_env_spec(repo(pyproject=_pyproject('test = ["pytest"]')), day("2023-01-01"), override)
    assert spec.install == ["python -m pip install -e ."]
    assert spec.date_pin is None


PIPELINE_SHAPE = """
    name: batch-1
    executor: local
    repos:
      - repo: pallets/click
        env:
          python: "3.9"
          date_pin: 2021-03-01
      - repo: psf/requests
      - encode/httpx
"""


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("repos:\n  pallets/click: {python: '3.9', extra_install: ['python -m pip install x']}\n"
                 "  psf/requests:\n",
                 {"pallets/click": EnvOverride(python="3.9", extra_install=["python -m pip install x"])},
                 id="mapping"),
    pytest.param(PIPELINE_SHAPE, {"pallets/click": EnvOverride(python="3.9", date_pin="2021-03-01")},
                 id="pipeline-list"),
    pytest.param("repos:\n  a/b: {date_pin: false, python: 3.11}\n",
                 {"a/b": EnvOverride(date_pin=False, python="3.11")}, id="unquoted-values"),
])
def test_load_overrides_shapes(tmp_path: Path, text: str, expected: dict[str, EnvOverride]) -> None:
    path = tmp_path / "overrides.yaml"
    path.write_text(textwrap.dedent(text))
    assert load_overrides(path) == expected


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("repos:\n  a/b: {pyhton: '3.9'}\n", "repos.a/b.pyhton: unknown field", id="unknown-field"),
    pytest.param("repos:\n  - repo: a/b\n    env: {python: '3.3'}\n", "repos[0].env.python: '3.3' is not",
                 id="bad-python"),
    pytest.param("repos:\n  a/b: {python: 3.100}\n", "'3.100' is not an available Python", id="3.100-as-written"),
    pytest.param("repos:\n  a/b: {date_pin: 'March'}\n", "repos.a/b.date_pin: expected an ISO date", id="bad-date"),
    pytest.param("repos:\n  a/b: {warmup: ' '}\n", "repos.a/b.warmup: must be true, false or a command",
                 id="blank-warmup"),
    pytest.param("repos:\n  not-a-repo: {}\n", "expected a repository as 'owner/name'", id="bad-repo"),
    pytest.param("repos: [a/b, a/b]\n", "a/b is listed twice", id="duplicate"),
    pytest.param("python: '3.9'\n", "expected a mapping with a 'repos' key", id="no-repos"),
    pytest.param("repos: {a/b: [\n", "not valid YAML at line", id="bad-yaml"),
])
def test_load_overrides_errors_name_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "overrides.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_overrides(path)
    assert str(path) in str(caught.value)
    assert message in str(caught.value)


def test_load_overrides_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        load_overrides(tmp_path / "absent.yaml")


def test_overrides_from_a_document_loaded_by_plain_yaml() -> None:
    # yaml.safe_load reads python: 3.10 as 3.1; the error says to quote it.
    with pytest.raises(InputError, match="quoted"):
        overrides_from_document({"repos": {"a/b": {"python": 3.1}}}, where="pipelines/x.yaml")


def test_yaml_keeps_versions_as_written() -> None:
    assert load_yaml_text("v: [3.9, 3.10]\nd: 2021-03-01\n") == {"v": ["3.9", "3.10"], "d": "2021-03-01"}


# --------------------------------------------------------------------------------------------
# The install ladder


OLD_REPO = repo({"requirements-test.txt": "pytest==3.6.0\n"}, setup_py=SETUP_PY_2019, tox_ini=TOX_2019)


def test_ladder_rungs_in_order_distinct_and_named() -> None:
    spec = infer_env_spec(OLD_REPO, day("2019-06-01"), EnvOverride(python="3.11"))
    ladder = install_ladder(spec, OLD_REPO)
    names = [name for name, _ in ladder]
    assert names == list(LADDER_RUNGS)
    assert [rung.rung for _, rung in ladder] == names
    builds = [(rung.python, tuple(rung.install), rung.date_pin) for _, rung in ladder]
    assert len(set(builds)) == len(builds)
    assert all(a != b for a, b in zip(builds, builds[1:], strict=False))

    by_name = dict(ladder)
    assert by_name["inferred"].install == spec.install
    assert f"{UV} --exclude-newer 2019-07-01T00:00:00Z {BACKENDS} -e ." in by_name["fewer-extras"].install
    assert not any("-r " in command or "mock" in command for command in by_name["fewer-extras"].install)
    assert by_name["older-python"].python == "3.9"
    assert by_name["older-python"].install == spec.install
    assert by_name["pinned-pytest"].python == "3.9"
    # The plugin the tox deps name is resolved again with pytest, as of the day after its upload.
    plugins = (f"{UV} --exclude-newer-package=pytest-mock=2020-06-06T00:00:00Z --reinstall-package=pytest-mock "
               "pytest==4.6.11 pytest-mock")
    assert by_name["pinned-pytest"].install[-1] == plugins
    no_pin = by_name["no-date-pin"]
    assert no_pin.date_pin is None and no_pin.python == "3.9"
    assert no_pin.install == [*infer_install(OLD_REPO), "python -m pip install uv", plugins]


FILTERWARNINGS_REPO = repo({"web/__init__.py": ""}, setup_py="from setuptools import setup\nsetup(name='web', extras_require={'dev': ['pyopenssl']})\n",
                          setup_cfg="""
    [tool:pytest]
    filterwarnings =
        error
        ignore::requests.packages.urllib3.exceptions.InsecureRequestWarning
        ignore:a message, with: colons:DeprecationWarning
        ignore::web.exceptions.OwnWarning
        ignore::warnings.WarningMessage
""")


def test_what_the_pytest_configuration_imports_is_installed_in_every_rung() -> None:
    """pytest imports a filterwarnings category's module before each test (INTERNALERROR when it is
    missing, so no test runs): its package is a test dependency, not an extra to drop."""
    assert infer_install(FILTERWARNINGS_REPO)[-2:] == ["python -m pip install requests", "python -m pip install pytest"]
    spec = infer_env_spec(FILTERWARNINGS_REPO, day("2018-06-01"), EnvOverride(python="3.11"))
    ladder = dict(install_ladder(spec, FILTERWARNINGS_REPO))
    assert not any("pyopenssl" in command for command in ladder["fewer-extras"].install)
    for name, rung in ladder.items():
        assert any(command.endswith(" requests") for command in rung.install), name


CONFTEST_REPO = repo({
    "web/__init__.py": "", "tests/__init__.py": "", "tests/helpers.py": "", "tests/test_app.py": "",
    "tests/conftest.py": """
        from __future__ import print_function
        import os, sys
        import requests.adapters
        from yaml import safe_load
        import pytest
        import _pytest.fixtures
        import py
        import google.protobuf
        from web import app
        from tests import helpers
        from . import fixtures
        import helpers
        try:
            import simplejson
        except ImportError:
            simplejson = None
        if sys.version_info < (3,):
            import mock


        def setup():
            import lxml
    """,
    # Not loaded for the tests: no test file beside or below it.
    "docs/conftest.py": "import sphinx\n",
}, setup_py="from setuptools import setup\nsetup(name='web', install_requires=['six'], extras_require={'test': ['pyopenssl']})\n")


def guessed(module: str, install: str) -> str:
    return f"python -c 'import {module}' 2>/dev/null || {install} || true"


def test_what_a_conftest_imports_is_installed_in_every_rung() -> None:
    """A conftest's unconditional third-party import fails collection ("could not load conftest.py")
    without its distribution: werkzeug 2016's tests/conftest.py imports requests, which nothing names.
    Optional imports (try, if), relative ones, the standard library, pytest's own modules and the
    project's own packages are no dependency; ``yaml`` is PyYAML's."""
    assert infer_install(CONFTEST_REPO)[-3:] == [
        "python -m pip install pytest",
        guessed("requests", "python -m pip install requests"),
        guessed("yaml", "python -m pip install PyYAML"),
    ]
    spec = infer_env_spec(CONFTEST_REPO, day("2017-06-10"), EnvOverride(python="3.11"))
    pinned = (f"{UV} --exclude-newer 2017-07-01T00:00:00Z --exclude-newer-package setuptools=2019-09-01T00:00:00Z "
              "--exclude-newer-package wheel=2019-09-01T00:00:00Z")
    assert spec.install[-2:] == [guessed("requests", f"{pinned} requests"), guessed("yaml", f"{pinned} PyYAML")]
    ladder = dict(install_ladder(spec, CONFTEST_REPO))
    assert {"inferred", "fewer-extras", "pinned-pytest", "no-date-pin"} <= ladder.keys()
    for name, rung in ladder.items():
        imports = [command.split("'")[1] for command in rung.install if command.startswith("python -c 'import ")]
        assert imports == ["import requests", "import yaml"], name
    assert guessed("requests", "python -m pip install requests") in ladder["no-date-pin"].install
    # The cure for releases the index lost reaches inside a guessed install too.
    assert exempt_from_pin(spec.install, {"requests": "2018-01-01"})[-2] == guessed(
        "requests", f"{pinned} --exclude-newer-package requests=2018-01-01T00:00:00Z requests")


def test_a_conftest_import_a_requirement_names_is_installed_by_that_requirement() -> None:
    """Nothing is guessed for a module a requirement of the install names (canonicalised: ``PyYAML``
    for ``yaml``); the rung that drops the test extra installs it by itself."""
    files = repo({"web/__init__.py": "", "tests/test_app.py": "",
                  "tests/conftest.py": "import requests\nimport yaml\nimport attr\n"},
                 setup_py="""
                     from setuptools import setup
                     setup(name='web', install_requires=['attrs>=17'], extras_require={'test': ['Requests', 'pyyaml']})
                 """)
    assert not any("import " in command for command in infer_install(files))
    spec = infer_env_spec(files, day("2021-06-10"), EnvOverride(python="3.11"))
    fewer = dict(install_ladder(spec, files))["fewer-extras"].install
    assert [command.split("'")[1] for command in fewer if command.startswith("python -c")] == [
        "import requests", "import yaml"]


def test_a_conftest_that_does_not_parse_or_is_not_loaded_gives_nothing() -> None:
    python2 = repo({"tests/test_app.py": "", "tests/conftest.py": "import requests\nprint 'loaded'\n"},
                   setup_py="from setuptools import setup\nsetup(name='web')\n")
    assert infer_install(python2)[-1] == "python -m pip install pytest"
    # With testpaths, only the conftest files on the way to those tests count.
    elsewhere = repo({"tests/test_app.py": "", "tests/conftest.py": "import requests\n",
                      "integration/test_live.py": "", "integration/conftest.py": "import boto3\n"},
                     setup_cfg="[tool:pytest]\ntestpaths = integration\n")
    assert [command.split("'")[1] for command in infer_install(elsewhere) if command.startswith("python -c")] == [
        "import boto3"]


SETUP_REQUIRES_REPOS = {
    # pluggy 2018: the keyword in a setup() call inside main().
    "literal": repo({"pluggy/__init__.py": ""}, setup_py="""
        from setuptools import setup
        def main():
            setup(name='pluggy', use_scm_version=True, packages=['pluggy'],
                  setup_requires=['setuptools-scm', 'setuptools>=18', 'wheel', 'pluggy'])
        main()
    """),
    "named": repo({"web/__init__.py": ""}, setup_py="""
        from setuptools import setup
        SETUP_REQUIRES = ('setuptools_scm>=1.15', 'pytest-runner')
        setup(name='web', setup_requires=SETUP_REQUIRES, extras_require={'test': ['requests']})
    """),
    "setup.cfg": repo({"web/__init__.py": ""}, setup_py="from setuptools import setup\nsetup()\n", setup_cfg="""
        [metadata]
        name = web
        [options]
        setup_requires =
            setuptools_scm>=1.15
            setuptools>=30.3
    """),
}


@pytest.mark.parametrize(("name", "requirements"), [
    ("literal", ["setuptools-scm"]),
    ("named", ["setuptools_scm>=1.15", "pytest-runner"]),
    ("setup.cfg", ["setuptools_scm>=1.15"]),
])
def test_the_setup_requires_are_installed_before_the_editable_install_on_every_rung(
        name: str, requirements: list[str]) -> None:
    """pip's legacy editable install on 3.6 runs setup.py, and setuptools 40 fetches a missing
    setup_requires with easy_install, ignoring the date pin and Requires-Python (pluggy 2018 got
    setuptools-scm 10, a SyntaxError on 3.6): installed first, date-pinned, it is found instead.
    setuptools and wheel are the build's to choose, the project is not its own requirement."""
    files = SETUP_REQUIRES_REPOS[name]
    command = shlex.join(["python", "-m", "pip", "install", *requirements])
    install = infer_install(files)
    assert install.index(command) == install.index(next(c for c in install if " -e " in c)) - 1 == 1
    pinned = shlex.join(["uv", "pip", "install", "--python", "python", "--exclude-newer", "2018-06-01T00:00:00Z",
                         "--exclude-newer-package", "setuptools=2019-03-01T00:00:00Z",
                         "--exclude-newer-package", "wheel=2019-03-01T00:00:00Z", *requirements])
    spec = infer_env_spec(files, day("2018-05-23"), available=("3.6", "3.9"))
    assert spec.python == "3.6"
    ladder = dict(install_ladder(spec, files, available=("3.6", "3.9")))
    # fewer-extras drops the test extra, so it is a rung of its own where there is one.
    assert {"inferred", "pinned-pytest", "no-date-pin", *(["fewer-extras"] if name == "named" else [])} <= ladder.keys()
    for rung_name, rung in ladder.items():
        expected = command if rung.date_pin is None else pinned
        # Before uv installs the project and pip makes it editable (setup.py develop).
        editable = next(i for i, c in enumerate(rung.install) if c.startswith("python -m pip install") and " -e " in c)
        assert rung.install.index(expected) < editable, rung_name
        assert rung.install.count(expected) == 1, rung_name
    # pytest-runner is no pytest plugin to re-pin with pytest.
    assert "pytest-runner" not in ladder["pinned-pytest"].install[-2]


def test_no_setup_requires_no_command() -> None:
    files = repo({"web/__init__.py": ""}, setup_py="""
        from setuptools import setup
        setup(name='web', setup_requires=['setuptools', 'wheel'], install_requires=['six'])
    """)
    assert infer_install(files) == ["python -m pip install --upgrade pip", "python -m pip install -e .",
                                    "python -m pip install pytest"]
    assert infer_install(repo(setup_cfg="[options]\nsetup_requires = setuptools_scm; six\n", setup_py="")
                         )[1] == "python -m pip install setuptools_scm six"


def test_a_guessed_install_never_fails_the_build_and_runs_only_when_the_module_is_missing(tmp_path: Path) -> None:
    """The env layer runs each install command in a subshell under ``set -e``: a guessed distribution
    the index lacks must not fail the rung, and one whose module imports already is not installed
    (a wrong guess could replace what provides it)."""
    # `python -c 'import NAME'` succeeds only for `os`; every install fails, as for a missing name.
    for name, succeeds in (("python", '[ "$2" = "import os" ]'), ("uv", "exit 1")):
        (tmp_path / name).write_text(f'#!/bin/sh\necho "{name} $*" >> "$(dirname "$0")/calls"\n{succeeds}\n')
        (tmp_path / name).chmod(0o755)
    commands = pinned_install([guessed("os", "python -m pip install os"),
                               guessed("no_such", "python -m pip install no-such-distribution")], "2017-07-01", "3.9")
    script = "set -e; " + "; ".join(f"({command})" for command in commands if command.startswith("python -c")) + "; echo built"
    result = subprocess.run(["sh", "-c", script], env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "built"
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[:2] == ["python -c import os", "python -c import no_such"] and len(calls) == 3
    assert calls[2].startswith("uv pip install") and calls[2].endswith(" no-such-distribution")


def test_fewer_extras_keeps_the_overrides_own_commands() -> None:
    override = EnvOverride(pre_install=["pip install 'setuptools<58'", "python -m pip install --user legacy"])
    spec = infer_env_spec(OLD_REPO, day("2019-06-01"), override)
    fewer = dict(install_ladder(spec, OLD_REPO, override))["fewer-extras"].install
    assert (f"{UV} --exclude-newer 2019-07-01T00:00:00Z --exclude-newer-package setuptools=2019-09-01T00:00:00Z "
            "--exclude-newer-package wheel=2019-09-01T00:00:00Z 'setuptools<58'") in fewer
    assert "python -m pip install --user legacy" in fewer
    assert not any("mock" in command for command in fewer)


def test_other_test_requirement_files_are_tried_one_at_a_time() -> None:
    files = repo({"requirements/tests.txt": "pytest\n", "requirements/tests-extra.txt": "numpy\n",
                  "requirements/testing-old.txt": "nose\n", "requirements/tests-pre-commit.txt": "pre-commit\n"},
                 setup_py="from setuptools import setup\nsetup(name='x')\n")
    spec = infer_env_spec(files, day("2024-03-01"))
    ladder = dict(install_ladder(spec, files))
    installed = {name: [part for command in rung.install for part in shlex.split(command)
                        if part.startswith("requirements/")] for name, rung in ladder.items()}
    assert installed["inferred"] == ["requirements/tests.txt"]
    assert installed["other-requirements-1"] == ["requirements/testing-old.txt"]
    assert installed["other-requirements-2"] == ["requirements/tests-extra.txt"]
    assert list(ladder)[:3] == ["inferred", "other-requirements-1", "other-requirements-2"]
    assert not any("pre-commit" in part for parts in installed.values() for part in parts)


OWN_LINES = EnvOverride(pre_install=["pip install 'setuptools<58'"],
                        extra_install=["python -m pip install  --no-deps ./vendor/pytest-7.0.0-py3-none-any.whl",
                                       "make -C native && echo built"])


def test_every_rung_keeps_the_users_own_commands_as_written() -> None:
    spec = infer_env_spec(OLD_REPO, day("2019-06-01"), OWN_LINES)
    ladder = dict(install_ladder(spec, OLD_REPO, OWN_LINES))
    assert set(ladder) >= {"inferred", "fewer-extras", "no-date-pin"}
    for name, rung in ladder.items():
        assert "make -C native && echo built" in rung.install, name
        assert rung.install[-1] == "make -C native && echo built", name
    # The user installs pytest themselves: no rung adds one from the index over theirs.
    assert "pinned-pytest" not in ladder
    assert not any("pytest==" in command for rung in ladder.values() for command in rung.install)
    no_pin = ladder["no-date-pin"].install
    assert no_pin[:2] == ["pip install 'setuptools<58'", "python -m pip install --upgrade pip"]
    assert "python -m pip install  --no-deps ./vendor/pytest-7.0.0-py3-none-any.whl" in no_pin


def test_pinned_pytest_goes_before_the_users_extra_commands() -> None:
    override = EnvOverride(extra_install=["python -m pip install 'attrs<20'"])
    spec = infer_env_spec(OLD_REPO, day("2019-06-01"), override)
    install = dict(install_ladder(spec, OLD_REPO, override))["pinned-pytest"].install
    assert install[-2:] == [
        f"{UV} --exclude-newer-package=pytest-mock=2020-06-06T00:00:00Z --reinstall-package=pytest-mock "
        "pytest==4.6.11 pytest-mock",
        f"{UV} --exclude-newer 2019-07-01T00:00:00Z --exclude-newer-package setuptools=2019-09-01T00:00:00Z "
        "--exclude-newer-package wheel=2019-09-01T00:00:00Z 'attrs<20'"]


def test_override_hash_changes_with_the_override() -> None:
    from repo2env.languages.python.spec.overrides import override_hash

    assert override_hash(None) is None
    assert override_hash(EnvOverride()) is None
    first = override_hash(EnvOverride(extra_install=["python -m pip install x"]))
    assert first is not None and first == override_hash(EnvOverride(extra_install=["python -m pip install x"]))
    assert first != override_hash(EnvOverride(extra_install=["python -m pip install y"]))
    assert first != override_hash(EnvOverride(extra_install=["python -m pip install x"], python="3.9"))


def test_ladder_drops_rungs_that_cannot_apply() -> None:
    # 3.9 has no older image, the project has no extras, and the override fixed the date pin.
    files = repo(setup_py="from setuptools import setup\nsetup(name='x')\n")
    spec = infer_env_spec(files, day("2020-02-01"), EnvOverride(date_pin=False))
    assert [name for name, _ in install_ladder(spec, files, EnvOverride(date_pin=False))] == ["inferred"]


def test_ladder_respects_requires_python_and_overrides() -> None:
    files = repo(pyproject='[project]\nname = "p"\nrequires-python = ">=3.10"\n')
    spec = infer_env_spec(files, day("2025-02-01"))
    assert spec.python == "3.13"
    assert dict(install_ladder(spec, files))["older-python"].python == "3.11"
    older_blocked = infer_env_spec(files, day("2025-02-01"), EnvOverride(python="3.11"))
    assert "older-python" not in dict(install_ladder(older_blocked, files))
    assert "older-python" not in dict(install_ladder(spec, files, EnvOverride(python="3.13")))


def test_plugins_are_pinned_with_pytest_also_without_the_date_pin() -> None:
    # A 2018 project whose tox deps and test requirement file name plugins: on the image's Python
    # the pinned pytest is 4.6.11, and today's pytest-xprocess / pytest-cov do not run on it.
    files = repo({"requirements/tests.txt": "pytest-cov==2.5.1\nrequests\n# pytest-skipped\n"},
                 setup_py="from setuptools import setup\nsetup(name='old')\n",
                 tox_ini="[testenv]\ndeps =\n    -r{toxinidir}/requirements/tests.txt\n    pytest\n"
                         "    pytest-xprocess\n    hypothesis\n    coverage\ncommands = pytest\n")
    spec = infer_env_spec(files, day("2018-06-14"))
    assert spec.python == "3.9"
    ladder = dict(install_ladder(spec, files))
    # Only the plugins are cut off: pytest 4.6.11's own dependencies (atomicwrites) have no release
    # of its day left on the index.
    pinned = (f"{UV} " + " ".join(f"--exclude-newer-package={name}=2020-06-06T00:00:00Z"
                                  for name in ("pytest-cov", "pytest-xprocess", "hypothesis"))
              + " --reinstall-package=pytest-cov --reinstall-package=pytest-xprocess --reinstall-package=hypothesis"
              " pytest==4.6.11 pytest-cov==2.5.1 pytest-xprocess hypothesis")
    assert ladder["pinned-pytest"].install[-1] == pinned
    no_pin = ladder["no-date-pin"].install
    assert no_pin[-2:] == ["python -m pip install uv", pinned]
    assert not any("--exclude-newer" in command for command in no_pin[:-1])


def test_a_lone_pytest_pin_stays_one_exact_pin() -> None:
    release = pytest_for("2019-07-01", "3.9")
    assert pytest_pin_commands(release, [], "2019-07-01") == ["python -m pip install pytest==4.6.11"]
    # A pytest older than the date pin: the plugins resolve as of the date pin, not of pytest's day.
    newer = pytest_for("2022-06-01", "3.9")
    assert pytest_pin_commands(newer, ["pytest-cov"], "2022-06-01")[-1] == (
        f"{UV} --exclude-newer-package=pytest-cov=2022-06-01T00:00:00Z --reinstall-package=pytest-cov "
        "pytest==7.1.2 pytest-cov")


@pytest.mark.parametrize(("python", "pin", "editable", "floor"), [
    ("3.9", "2018-07-01", False, "setuptools=2019-09-01"),   # setuptools 40.8 does not import on 3.9
    ("3.9", "2019-07-01", False, "setuptools=2019-09-01"),
    ("3.11", "2019-10-01", False, None),
    ("3.13", "2020-11-01", False, "setuptools=2023-02-01"),  # nor 65.x (distutils, ImpImporter) on 3.12+
    ("3.9", "2018-07-01", True, "setuptools=2023-01-01"),
    ("3.13", "2018-07-01", True, "setuptools=2023-02-01"),
    (None, "2018-07-01", False, "setuptools=2019-03-01"),
    (None, "2019-07-01", False, None),
])
def test_setuptools_floor_follows_the_python(python: str | None, pin: str, editable: bool, floor: str | None) -> None:
    command = "python -m pip install -e ." if editable else "python -m pip install requests"
    pinned = pinned_install([command], pin, python)[-1]
    found = re.search(r"setuptools=(\d{4}-\d\d-\d\d)", pinned)
    assert (f"setuptools={found.group(1)}" if found else None) == floor


def test_ladder_specs_are_valid_env_specs() -> None:
    spec = infer_env_spec(OLD_REPO, day("2019-06-01"))
    for _, rung in install_ladder(spec, OLD_REPO):
        assert EnvSpec.model_validate(rung.model_dump()) == rung


@pytest.mark.parametrize(("pin", "python", "requirement", "version"), [
    ("2019-06-02", "3.9", "pytest", "4.6.11"),     # before any 3.9-capable release: the oldest one
    ("2021-05-01", "3.9", "pytest", "6.2.2"),
    ("2021-09-01", "3.9", "pytest", "6.2.5"),
    ("2021-09-01", "3.11", "pytest", "7.2.2"),    # pytest 6 does not run on 3.11
    ("2024-07-01", "3.11", "pytest<8", "7.4.4"),  # a nose-era suite
    ("2025-01-01", "3.13", "pytest", "8.3.3"),
    ("2030-01-01", "3.9", "pytest", "8.4.2"),     # pytest 9 needs 3.10
])
def test_pytest_for(pin: str, python: str, requirement: str, version: str) -> None:
    release = pytest_for(pin, python, requirement)
    assert release is not None and release.version == version


def test_pytest_table_is_ordered_and_plausible() -> None:
    from packaging.version import Version

    ordered = sorted(PYTEST_RELEASES, key=lambda release: Version(release.version))
    # 4.6 is the Python 2 LTS line, released after 5.4.3; every other entry is newer and later.
    assert all(a.uploaded < b.uploaded for a, b in zip(ordered[1:], ordered[2:], strict=False))


# --------------------------------------------------------------------------------------------
# Why an install failed (uv's errors as it prints them)


UV_NO_WHEEL = """\
Step 4/11 : RUN set -e; cd /testbed; ...
\x1b[91merror: Failed to build `psutil==5.7.0`
  cause: The build backend returned an error
  cause: Call to `setuptools.build_meta:__legacy__.build_wheel` failed (exit status: 1)
         distutils.errors.CompileError: command 'x86_64-linux-gnu-gcc' failed: No such file or directory
hint: Build failures usually indicate a problem with the package or the build environment
"""
# The same as `docker build` streams it: each stderr chunk in colour codes, a line break after each.
UV_NO_WHEEL_CHUNKED = "".join(f"\x1b[91m{chunk}\x1b[0m\n" for chunk in [
    "error", ":", " ", "Failed to build `psutil==5.7.0`", "\n", "  ", "cause", ":", " ",
    "The build backend returned an error", "\n",
    "         psutil/_psutil_common.c:9:10: fatal error: Python.h: No such file or directory\n"])
UV_TOO_NEW_PYTHON = """\
error: No solution found when resolving dependencies
  cause: Because the current Python version (3.9.2) does not satisfy Python>=3.10 and django>=5.0 depends on \
Python>=3.10, we can conclude that django>=5.0 cannot be used.
         And because you require django>=5, we can conclude that your requirements are unsatisfiable.
"""
UV_FILTERED = """\
error: No solution found when resolving dependencies
  cause: Because there are no versions of black and you require black, we can conclude that your requirements \
are unsatisfiable.

hint: `black` was filtered by `exclude-newer` to only include packages uploaded before 2016-12-01T00:00:00Z.
"""
UV_CONFLICT = """\
error: No solution found when resolving dependencies
  cause: Because only typing-extensions>=3.6.2 is available and you require typing-extensions<3, we can conclude \
that your requirements are unsatisfiable.
"""
UV_PROJECT = """\
error: Failed to build `werkzeug @ file:///testbed`
  cause: The build backend returned an error
  cause: Call to `setuptools.build_meta:__legacy__.build_editable` failed (exit status: 1)
"""


@pytest.mark.parametrize(("log", "expected"), [
    (UV_NO_WHEEL, "psutil 5.7.0 as of 2020-12-01 has no wheel for Python 3.9, and building it from source failed "
                  "(no C/Rust compiler in the image: add build-essential, python3-dev to system_packages)"),
    (UV_NO_WHEEL_CHUNKED, "psutil 5.7.0 as of 2020-12-01 has no wheel for Python 3.9, and building it from source "
                          "failed (no C/Rust compiler in the image: add build-essential, python3-dev to "
                          "system_packages)"),
    (UV_TOO_NEW_PYTHON, "dependencies as of 2020-12-01 do not support Python 3.9: the current Python version "
                        "(3.9.2) does not satisfy Python>=3.10 and django>=5.0 depends on Python>=3.10"),
    (UV_FILTERED, "black has no release as of 2020-12-01 that fits: there are no versions of black and you "
                  "require black"),
    (UV_CONFLICT, "no dependency versions as of 2020-12-01 fit together: only typing-extensions>=3.6.2 is "
                  "available and you require typing-extensions<3"),
    (UV_PROJECT, "building the project werkzeug failed: Call to `setuptools.build_meta:__legacy__.build_editable` "
                 "failed (exit status: 1)"),
    ("error: Failed to build `file:///testbed`\n  cause: Failed to parse metadata\n",
     "building the project failed: Failed to parse metadata"),
    ("ERROR: Could not find a version that satisfies the requirement foo\n", None),
])
def test_install_failure_reason(log: str, expected: str | None) -> None:
    assert install_failure_reason(log, "3.9", "2020-12-01") == expected


@pytest.mark.parametrize(("log", "packages"), [
    (UV_NO_WHEEL, ["build-essential", "python3-dev"]),
    (UV_NO_WHEEL_CHUNKED, ["build-essential", "python3-dev"]),
    ("c/_cffi_backend.c:15:10: fatal error: ffi.h: No such file or directory\n", ["libffi-dev"]),
    ("src/lxml/includes/etree_defs.h:14:10: fatal error: libxml/xmlversion.h: No such file or directory\n"
     "error: command '/usr/bin/x86_64-linux-gnu-gcc' failed with exit code 1\n",
     ["build-essential", "python3-dev", "libxml2-dev"]),
    ("Error: pg_config executable not found.\n", ["libpq-dev"]),
    ("error: can't find Rust compiler\n", ["cargo"]),
    ("    No working compiler found, or bogus compiler options passed to\n", ["build-essential", "python3-dev"]),
    (UV_CONFLICT, []),
])
def test_build_packages_a_source_build_asks_for(log: str, packages: list[str]) -> None:
    from repo2env.languages import get_profile
    from repo2env.languages.python.spec import build_packages_needed

    assert build_packages_needed(log) == packages
    # What the build ladder asks (runtime/build.py: the same rung again with these packages): the
    # Python recipe's answer. It said nothing once the build moved behind the profiles, and every
    # old sdist without a wheel for its Python (psutil 5.7 on 3.8) ended the ladder as env_failed.
    assert get_profile("python").build_recipe().packages_needed(log) == packages
