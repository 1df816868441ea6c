"""A Python PR that adds a test requirement, built, derived and graded for real.

slugkit's PR adds ``six==1.16.0`` to requirements-dev.txt, and its new test imports six (as attrs'
PR 155 adds six to dev-requirements.txt). The env image is installed at the base commit, whose
requirements do not name it, and the sandbox has no network: without the build's extra step the
new test would not even be collected after the fix (``No module named 'six'``). With it, six is in
the environment while requirements-dev.txt stays the base commit's, the PR's new test fails before
the fix and passes after it, and the gold patch grades 1.0.
"""

from __future__ import annotations

import pytest
from conftest import mine_and_build_one
from javascript_projects import fixture_git, write_files

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SETUP = "from setuptools import setup\n\nsetup(name='slugkit', version='1.0.0', packages=['slugkit'])\n"
TESTS = "from slugkit import slug\n\n\ndef test_lowercases():\n    assert slug('Ab') == 'ab'\n"
NEW_TEST = ("import six\n\nfrom slugkit import slug\n\n\ndef test_text_in_text_out():\n"
            "    assert isinstance(slug(six.text_type('A b')), six.text_type) and slug('A b') == 'a-b'\n")
LOWERS = "tests/test_slug.py::test_lowercases"
DASHES = "tests/test_compat.py::test_text_in_text_out"


def _repository(path):
    path.mkdir()
    fixture_git(path, "init", "-q", "-b", "main", stamp="2023-05-02T10:00:00+00:00")
    write_files(path, {"setup.py": SETUP, "requirements-dev.txt": "pytest\n", ".gitignore": "*.egg-info/\n",
                       "slugkit/__init__.py": "def slug(text):\n    return text.lower()\n", "tests/test_slug.py": TESTS})
    for args in (("add", "-A"), ("commit", "-q", "-m", "Initial commit")):
        fixture_git(path, *args, stamp="2023-05-02T10:00:00+00:00")
    write_files(path, {"requirements-dev.txt": "pytest\nsix==1.16.0\n", "tests/test_compat.py": NEW_TEST,
                       "slugkit/__init__.py": "def slug(text):\n    return '-'.join(text.lower().split())\n"})
    for args in (("add", "-A"), ("commit", "-q", "-m", "Dash the spaces in slugs (#1)\n\nSpaces stayed.")):
        fixture_git(path, *args, stamp="2023-05-03T10:00:00+00:00")
    return path


@pytest.fixture(scope="module")
def built(docker_client, tmp_path_factory):
    root = tmp_path_factory.mktemp("python-gold-deps")
    clone = _repository(root / "slugkit")
    return mine_and_build_one(docker_client, clone, "acme/slugkit", root / "tasks"), clone


def test_the_requirement_the_pr_adds_is_installed_and_its_file_is_the_base_commits(built, docker_client):
    task, _ = built
    spec = task.env_spec
    assert "requirements-dev.txt" in task.patch and spec.added_dependencies == {"six": "six==1.16.0"}
    inside = docker_client.containers.run(
        spec.image, ["sh", "-c", "cd /testbed && cat requirements-dev.txt && echo '<>' && git status --porcelain | wc -l"
                     " && python -c 'import six; print(six.__version__)'"],
        remove=True, user="1000", network_disabled=True).decode()
    assert inside.split("\n") == ["pytest", "<>", "0", "1.16.0", ""], inside


def test_derivation_finds_the_prs_test_and_gold_earns_everything(built, docker_client, tmp_path):
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.validate.derive import derive_tests
    from repo2env.verify.grader import Grader

    task, _ = built
    runtime = DockerBackend(docker_client)
    derivation = derive_tests(task, runtime, runs=1, hash_seeds=(0,), timeout_s=120)
    assert derivation.error is None, derivation.error
    # The test files the PR touches run: its new one (test_slug.py is not among them).
    assert derivation.fail_to_pass == [DASHES] and derivation.pass_to_pass == []
    derived = task.model_copy(update={"FAIL_TO_PASS": [DASHES], "PASS_TO_PASS": [LOWERS]})
    with Grader(runtime, tmp_path / "grades", timeout_s=120) as grader:
        gold = grader.grade(derived, derived.patch)
        empty = grader.grade(derived, "")
    assert gold.reward == 1.0 and gold.error is None and not gold.tampered, gold
    assert empty.reward == 0.0 and empty.error is None, empty
