"""Environment inference: how to build and test a repository at one commit, read from its files.

Everything here is a pure function of the repository's files (a :class:`RepoFiles`) and the commit
date: no Docker, no network, no subprocess; reading an override file
(:func:`~repo2env.languages.python.spec.overrides.load_overrides`) is the one file read. The result is an
:class:`~repo2env.models.EnvSpec` that the layered build turns into images:

- :func:`infer_python` picks the base image's Python from ``requires-python``, trove classifiers,
  tox's envlist, CI matrices and the commit date;
- :func:`infer_install` lists the ``pip install`` commands (the project in editable mode with its
  test extras, test requirement files, dependency groups, tox deps, and always pytest);
- :func:`pinned_install` rewrites them for ``uv pip install --exclude-newer`` so dependencies
  resolve as they did on the commit's date (:func:`date_pin`);
- :func:`infer_test_cmd` gives the pytest command line the caller appends test ids to;
- :func:`infer_env_spec` puts it all together, with a per-repository override applied last;
- :func:`install_ladder` lists the fallbacks to try when the install or test collection fails.

The package has one module per concern, each depending only on the ones listed before it:
``files`` (the repository's files and the configuration read from them), ``python``,
``overrides`` (the per-repository corrections read from YAML), ``pytest_config``, ``install``,
``system_packages``, ``pinning``, ``env_spec`` (the spec with its override applied, and the install
ladder) and ``failures`` (why an install failed, read from its log).
"""

from __future__ import annotations

from repo2env.languages.python.spec.env_spec import (
    LADDER_RUNGS,
    infer_env_spec,
    install_ladder,
    pytest_for,
    pytest_pin_commands,
)
from repo2env.languages.python.spec.failures import (
    MISSING_COMPILER,
    build_packages_needed,
    install_failure_reason,
    old_setuptools_needed,
    releases_gone_before_pin,
)
from repo2env.languages.python.spec.files import DictRepoFiles, RepoFiles
from repo2env.languages.python.spec.install import (
    MAX_REQUIREMENT_ALTERNATIVES,
    PIP_INSTALL,
    PIP_UPGRADE,
    infer_install,
)
from repo2env.languages.python.spec.pinning import (
    BUILD_BACKEND_FLOOR,
    BUILD_BACKENDS,
    DEFAULT_BUILD_FLOOR,
    SETUPTOOLS_RUNS_ON,
    UV_BOOTSTRAP,
    build_floor,
    date_pin,
    exempt_from_pin,
    pinned_install,
    split_editable_build,
)
from repo2env.languages.python.spec.pytest_config import (
    DEFAULT_TEST_CMD,
    PYTEST_RELEASES,
    WARMUP_COLLECT,
    PytestRelease,
    infer_test_cmd,
)
from repo2env.languages.python.spec.python import (
    ADOPTION_GRACE,
    AVAILABLE_PYTHONS,
    KNOWN_PYTHONS,
    PYTHON_RELEASE_DATES,
    infer_python,
)
from repo2env.languages.python.spec.system_packages import COMPILER_PACKAGES, infer_system_packages
from repo2env.settings import load_yaml_text

__all__ = [
    "ADOPTION_GRACE", "AVAILABLE_PYTHONS", "BUILD_BACKENDS", "BUILD_BACKEND_FLOOR", "COMPILER_PACKAGES",
    "DEFAULT_BUILD_FLOOR", "DEFAULT_TEST_CMD", "KNOWN_PYTHONS", "LADDER_RUNGS", "MAX_REQUIREMENT_ALTERNATIVES",
    "MISSING_COMPILER", "PIP_INSTALL", "PIP_UPGRADE", "PYTEST_RELEASES", "PYTHON_RELEASE_DATES", "SETUPTOOLS_RUNS_ON", "UV_BOOTSTRAP",
    "WARMUP_COLLECT", "DictRepoFiles", "PytestRelease", "RepoFiles", "build_floor", "build_packages_needed", "date_pin",
    "exempt_from_pin", "infer_env_spec", "infer_install", "infer_python", "infer_system_packages", "infer_test_cmd",
    "install_failure_reason", "install_ladder", "load_yaml_text", "old_setuptools_needed", "pinned_install", "pytest_for", "releases_gone_before_pin", "split_editable_build",
    "pytest_pin_commands",
]
