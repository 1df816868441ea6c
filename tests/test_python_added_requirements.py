"""What a Python PR adds to the requirements the build installs (``python/spec/added.py``), read from
its patches as text, and the env layer that installs it: no Docker, no network."""

from __future__ import annotations

import difflib
from datetime import UTC, datetime

from repo2env.languages import get_profile
from repo2env.languages.files import DictRepoFiles
from repo2env.languages.python.spec.added import requirements_added

SETUP = ("from setuptools import setup\n"
         "setup(name='attrs', version='17.1.0', packages=['attr'], package_dir={'': 'src'},\n"
         "      install_requires=[], extras_require={'tests': ['pytest', 'zope.interface']})\n")
BASE = DictRepoFiles({"setup.py": SETUP, "dev-requirements.txt": "coverage\npytest\nzope.interface\n",
                      "src/attr/__init__.py": "x = 1\n", "tests/test_dark_magic.py": "def test_x():\n    pass\n"})


def _diff(path: str, before: str | None, after: str | None) -> str:
    """A git-format diff of one file, as ``git diff`` writes it (a new file included)."""
    old, new = (f"a/{path}" if before is not None else "/dev/null"), f"b/{path}"
    header = f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n" if before is None else "")
    lines = difflib.unified_diff((before or "").splitlines(keepends=True), (after or "").splitlines(keepends=True),
                                 old, new)
    return header + "".join(lines)


def test_a_requirement_the_pr_adds_is_installed_and_the_rest_is_not():
    """attrs 155: the gold patch adds six to dev-requirements.txt beside its fix; its test imports six."""
    gold = (_diff("dev-requirements.txt", BASE["dev-requirements.txt"], BASE["dev-requirements.txt"] + "six\n")
            + _diff("src/attr/__init__.py", "x = 1\n", "x = 2\n"))
    tests = _diff("tests/test_dark_magic.py", BASE["tests/test_dark_magic.py"], "import six\n\ndef test_x():\n    pass\n")
    assert requirements_added(BASE, [gold, tests]) == {"six": "six"}


def test_extras_pyproject_and_a_changed_specifier_count_the_project_and_removals_do_not():
    extras = SETUP.replace("'zope.interface']", "'zope.interface', 'hypothesis>=3.6']")
    changed = BASE["dev-requirements.txt"].replace("coverage", "coverage>=4.4")
    gold = _diff("setup.py", SETUP, extras) + _diff("dev-requirements.txt", BASE["dev-requirements.txt"], changed)
    assert requirements_added(BASE, [gold]) == {"coverage": "coverage>=4.4", "hypothesis": "hypothesis>=3.6"}
    # A requirement removed, the project's own name, a path, a URL and an option line add nothing.
    odd = BASE["dev-requirements.txt"].replace("coverage\n", "") + "attrs\n-e .\n./vendor/x\nhttps://example.org/x.tgz\n"
    assert requirements_added(BASE, [_diff("dev-requirements.txt", BASE["dev-requirements.txt"], odd)]) == {}
    pyproject = '[project]\nname = "pkg"\ndependencies = []\n[project.optional-dependencies]\ntests = ["pytest"]\n'
    files = DictRepoFiles({"pyproject.toml": pyproject})
    grown = pyproject.replace('["pytest"]', '["pytest", "freezegun==1.2.2"]')
    assert requirements_added(files, [_diff("pyproject.toml", pyproject, grown)]) == {"freezegun": "freezegun==1.2.2"}


def test_a_patch_that_does_not_apply_or_parse_adds_nothing():
    stale = _diff("dev-requirements.txt", "nose\n", "nose\nsix\n")
    assert requirements_added(BASE, [stale, "not a patch"]) == {}


def test_the_env_layer_installs_them_after_the_base_install_with_the_date_pin():
    build = get_profile("python").build_recipe()
    gold = _diff("dev-requirements.txt", BASE["dev-requirements.txt"], BASE["dev-requirements.txt"] + "six\n")
    spec = build.infer_env_spec(BASE, datetime(2017, 3, 9, tzinfo=UTC), patches=[gold, ""])
    assert spec.added_dependencies == {"six": "six"} and spec.date_pin
    plain = build.infer_env_spec(BASE, datetime(2017, 3, 9, tzinfo=UTC), patches=["", ""])
    assert plain.added_dependencies == {} and plain.spec_hash() != spec.spec_hash()
    own = build.own_code(BASE)
    run = build.env_layer(spec, own, "17.1.0", agent_uid=1000).run
    install = run.index(f"uv pip install --python python --exclude-newer {spec.date_pin}T00:00:00Z six")
    assert run.index(spec.install[-1]) < install < run.index("own_code_probe.py check")
    assert "|| echo 'repo2env: the requirements the PR adds did not install: six'" in run, "not fatal"
    assert "six" not in build.env_layer(plain, own, "17.1.0", agent_uid=1000).run
