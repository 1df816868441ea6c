"""The project's own code, read from its files; installs that keep its editable install winning."""

from __future__ import annotations

import json
import subprocess
import sys

from repo2env.languages.python.own_code import (
    PROBE_PATH,
    protect_own_install,
    read_own_code,
    reinstall_command,
    scm_environment,
)
from repo2env.languages.python.spec import DictRepoFiles, pinned_install

PLUGGY_LIKE = DictRepoFiles({
    "pyproject.toml": """
[build-system]
requires = ["setuptools>=65", "setuptools-scm[toml]>=8"]
build-backend = "setuptools.build_meta"
[project]
name = "Pluggy"
dynamic = ["version"]
[tool.setuptools]
packages = ["pluggy"]
package-dir = {"" = "src"}
[tool.setuptools_scm]
""",
    "src/pluggy/__init__.py": "", "src/pluggy/_hooks.py": "", "testing/test_hooks.py": "", "docs/conf.py": "",
})


def test_distribution_and_import_names_come_from_the_packaging_config():
    own = read_own_code(PLUGGY_LIKE)
    assert (own.distribution, own.import_names, own.declared, own.vcs_version) == ("pluggy", ("pluggy",), True, True)


def test_a_src_layout_with_two_packages_and_a_setup_py_name():
    files = DictRepoFiles({
        "setup.py": "from setuptools import setup, find_packages\nsetup(name='my_tool', packages=find_packages('src'),"
                    " package_dir={'': 'src'}, version='1.0')\n",
        "src/pytest/__init__.py": "", "src/_pytest/__init__.py": "", "src/_pytest/main.py": "",
        "testing/test_main.py": "",
    })
    own = read_own_code(files)
    assert own.distribution == "my-tool"
    assert set(own.import_names) == {"pytest", "_pytest"} and not own.declared
    assert not own.vcs_version


def test_a_flat_layout_leaves_out_tests_and_docs_and_finds_a_single_module():
    files = DictRepoFiles({
        "setup.cfg": "[metadata]\nname = six\n[options]\npy_modules = six\n",
        "six.py": "", "tests/__init__.py": "", "docs/__init__.py": "",
    })
    assert read_own_code(files).import_names == ("six",)
    flat = DictRepoFiles({"pyproject.toml": '[project]\nname = "attrs"\n[tool.hatch.version]\nsource = "vcs"\n',
                          "attr/__init__.py": "", "attrs/__init__.py": "", "tests/__init__.py": "",
                          "bench/__init__.py": ""})
    own = read_own_code(flat)
    assert own.import_names == ("attr", "attrs") and own.vcs_version


def _pluggy_install(*extra: str) -> list[str]:
    logical = ["python -m pip install --upgrade pip", "python -m pip install -e '.[testing]'",
               "python -m pip install -r requirements-dev.txt", "python -m pip install 'pluggy>=1.5' pytest-xdist",
               "python -m pip install pytest", *extra]
    return pinned_install(logical, "2025-06-01")


def test_the_projects_own_distribution_is_never_installed_and_the_editable_install_comes_last():
    own = read_own_code(PLUGGY_LIKE)
    install = protect_own_install(_pluggy_install("python -m pip install pluggy==1.0.0"), own)
    assert not any("pluggy" in command for command in install if "-e" not in command.split())
    assert any(command.endswith(" pytest-xdist") for command in install), "other targets of a command stay"
    assert install[-1] == ("uv pip install --python python --compile-bytecode --exclude-newer 2025-06-01T00:00:00Z --no-deps "
                           "--reinstall-package=pluggy -e .")
    assert protect_own_install(install, own) == install, "applying it twice changes nothing more"


def test_the_reinstall_keeps_pip_when_the_install_used_pip():
    assert reinstall_command(["pip install -e .[dev] --pre", "pip install pytest"], "x") == (
        "pip install --pre --no-deps --force-reinstall -e .")
    assert reinstall_command(["pip install -r requirements.txt"], "x") is None


def test_nothing_to_add_when_the_editable_install_is_the_last_install_or_absent():
    own = read_own_code(PLUGGY_LIKE)
    assert protect_own_install(["python -m pip install pytest", "python -m pip install -e ."], own)[-1] == (
        "python -m pip install -e .")
    plain = ["python -m pip install -r requirements.txt", "python -m pip install pytest"]
    assert protect_own_install(plain, own) == plain


def test_scm_environment_names_the_version_for_each_back_end():
    assert scm_environment("") == {}
    assert set(scm_environment("1.6.1.dev3+gabc1234").values()) == {"1.6.1.dev3+gabc1234"}
    assert "SETUPTOOLS_SCM_PRETEND_VERSION" in scm_environment("1.0")


def test_probe_reports_a_name_that_imports_from_elsewhere(tmp_path):
    """The in-container script, run here: json imports from the standard library, not /testbed."""
    arguments = {"distribution": None, "import_names": ["json"], "declared": True, "editable": False}
    result = subprocess.run([sys.executable, str(PROBE_PATH), "check", json.dumps(arguments)], capture_output=True,
                            text=True, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith("own-code check failed: json imports from /") and "not /testbed" in result.stdout
    missing = {"distribution": "no-such-dist-x", "import_names": ["no_such_module_x"], "declared": True, "editable": True}
    result = subprocess.run([sys.executable, str(PROBE_PATH), "check", json.dumps(missing)], capture_output=True,
                            text=True, cwd=tmp_path)
    assert "no_such_module_x is not importable" in result.stdout
    assert "the distribution no-such-dist-x is not installed" in result.stdout


def test_the_reinstall_keeps_the_build_back_end_exemption_of_an_old_date_pin():
    """Under a 2021 pin setuptools may reach 2023 (build_editable); the re-install builds again."""
    command = ("uv pip install --python python --compile-bytecode --exclude-newer 2021-06-01T00:00:00Z "
               "--exclude-newer-package setuptools=2023-01-01T00:00:00Z -e .")
    again = reinstall_command([command, "uv pip install --python python pytest"], "datalib")
    assert "--exclude-newer-package setuptools=2023-01-01T00:00:00Z" in again
    assert again.endswith("--no-deps --reinstall-package=datalib -e .")
