"""Splitting a PR's diff: path classification, parts that ``git apply`` accepts alone, hunks."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from repo2env.errors import PatchError
from repo2env.mine.split import added_lines, classify_path, hunks, split_diff

CORE_BEFORE = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(30))
CORE_AFTER = (
    CORE_BEFORE.replace("def f2(x):\n    return x + 2\n", "def f2(x):\n    x = abs(x)\n    y = 1\n    return x + 2 + y\n")
    .replace("    return x + 25\n", "    return x - 25\n")
)


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    """Run git with no user or system configuration, failing loudly."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    result = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd, input=stdin, capture_output=True, text=True, env=env, check=False,
    )
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


BASE_FILES: dict[str, str | bytes] = {
    "src/pkg/__init__.py": "",
    "src/pkg/core.py": CORE_BEFORE,
    "src/pkg/old_name.py": "".join(f"VALUE_{i} = {i}\n" for i in range(12)),
    "src/pkg/gone.py": "print('bye')\n",
    "src/pkg/noeol.py": "A = 1\nB = 2",
    "src/pkg/moved.py": "MOVED = True\n",
    "scripts/run.sh": "echo run\n",
    "tests/test_core.py": "from pkg.core import f2\n\n\ndef test_f2():\n    assert f2(1) == 3\n",
    "tests/data/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00binary\x00\xff",
    "docs/index.rst": "Title\n=====\n",
    "CHANGELOG.md": "# Changelog\n",
}


@pytest.fixture
def pr_repo(tmp_path: Path) -> Path:
    """A repository whose HEAD~1 is the base and HEAD the merged PR, with every kind of file change."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write(root, BASE_FILES)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    write(root, {
        "src/pkg/core.py": CORE_AFTER,
        "src/pkg/new_module.py": "def helper():\n    return 42\n",
        "src/pkg/noeol.py": "A = 1\nB = 3",
        "tests/test_core.py": "from pkg.core import f2\n\n\ndef test_f2():\n    assert f2(-1) == 4\n",
        "tests/data/expected.json": '{"ok": true}\n',
        "tests/data/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00changed\x00\xfe",
        "docs/index.rst": "Title\n=====\n\nMore.\n",
        "CHANGELOG.md": "# Changelog\n\n- fixed f2\n",
        "changelog.d/12.bugfix": "Fixed f2 for negative numbers.\n",
        "src/pkg/empty.py": "",
    })
    (root / "src/pkg/gone.py").unlink()
    old = (root / "src/pkg/old_name.py").read_text()
    (root / "src/pkg/old_name.py").unlink()
    write(root, {"src/pkg/new_name.py": old.replace("VALUE_11 = 11", "VALUE_11 = 111")})
    (root / "src/pkg/sub").mkdir()
    (root / "src/pkg/moved.py").rename(root / "src/pkg/sub/moved.py")
    (root / "scripts/run.sh").chmod(0o755)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "the PR")
    return root


def pr_diff(root: Path, *extra: str) -> str:
    return git(root, "diff", "-M", *extra, "HEAD~1", "HEAD")


def fresh_base(root: Path, tmp_path: Path, name: str) -> Path:
    """A clean work tree of the base commit, to apply patches to."""
    work = tmp_path / name
    git(root, "worktree", "add", "-q", "--detach", str(work), "HEAD~1")
    return work


def apply(work: Path, patch: str, *, check: bool = False) -> None:
    git(work, "apply", *(["--check"] if check else []), "-", stdin=patch)


CLASSIFY_CASES = [
    # test trees, at any depth, data and config files included
    ("tests/test_core.py", "test"),
    ("tests/helpers.py", "test"),
    ("test/foo.py", "test"),
    ("testing/test_main.py", "test"),
    ("testing/helpers.py", "test"),
    ("src/pkg/tests/data/input.json", "test"),
    ("tests/pytest.ini", "test"),
    ("tests/README.md", "test"),
    ("pkg/unit_tests/case.py", "test"),
    ("integration-tests/run.py", "test"),
    ("test_data/sample.csv", "test"),
    ("Tests/Foo.py", "test"),
    ("src/pkg/__tests__/x.js", "test"),
    # test files by name
    ("src/pkg/test_utils.py", "test"),
    ("pkg/core_test.py", "test"),
    ("pkg/core_tests.py", "test"),
    ("myapp/tests.py", "test"),
    ("test.py", "test"),
    ("conftest.py", "test"),
    ("src/conftest.py", "test"),
    ("docs/conftest.py", "test"),
    ("pytest.ini", "test"),
    ("tox.ini", "test"),
    # the substring "test" alone proves nothing
    ("src/_pytest/main.py", "source"),
    ("src/_pytest/python.py", "source"),
    ("latest/foo.py", "source"),
    ("src/attestation.py", "source"),
    ("contest.py", "source"),
    ("testing_utils.py", "source"),
    ("src/pkg/testing.py", "source"),
    ("src/werkzeug/test.py", "source"),  # the test client the package ships (werkzeug.test)
    ("pkg/test.py", "source"),
    ("pytest_plugin.py", "source"),
    ("src/pkg/protest/x.py", "source"),
    ("src/pkg/Test_helpers.py", "source"),
    (".github/workflows/tests.yml", "source"),
    ("src/pkg/test_data.json", "source"),
    # aux: prose, docs, changelogs, news fragments
    ("CHANGELOG.md", "aux"),
    ("CHANGES.rst", "aux"),
    ("CHANGES", "aux"),
    ("HISTORY.txt", "aux"),
    ("NEWS", "aux"),
    ("RELEASE_NOTES.md", "aux"),
    ("release-notes.txt", "aux"),
    ("AUTHORS", "aux"),
    ("CONTRIBUTORS.txt", "aux"),
    ("README", "aux"),
    ("src/pkg/README.md", "aux"),
    ("Changelog", "aux"),
    ("changelog.d/123.bugfix", "aux"),
    ("changes/4567.feature.rst", "aux"),
    ("newsfragments/89.misc", "aux"),
    ("news/1234.bugfix", "aux"),
    ("releasenotes/notes/fix-foo-1a2b.yaml", "aux"),
    ("docs/index.rst", "aux"),
    ("doc/source/_static/logo.svg", "aux"),
    ("docs/Makefile", "aux"),
    ("CONTRIBUTING.md", "aux"),
    ("src/pkg/guide.rst", "aux"),
    # never aux: Python code, data whose name only resembles a changelog
    ("docs/conf.py", "source"),
    ("docs/_ext/custom_role.py", "source"),
    ("src/pkg/news.py", "source"),
    ("src/pkg/changes.py", "source"),
    ("src/pkg/history.pyi", "source"),
    ("src/pkg/data/news.json", "source"),
    ("historical_data.csv", "source"),
    ("setup.cfg", "source"),
    ("pyproject.toml", "source"),
    ("requirements.txt", "source"),
    ("./src/pkg/core.py", "source"),
]


@pytest.mark.parametrize(("path", "kind"), CLASSIFY_CASES)
def test_classify_path(path: str, kind: str) -> None:
    assert classify_path(path) == kind


def test_split_lists_each_kind_in_diff_order(pr_repo: Path) -> None:
    parts = split_diff(pr_diff(pr_repo))

    assert parts.source_files == (
        "scripts/run.sh",
        "src/pkg/core.py",
        "src/pkg/empty.py",
        "src/pkg/gone.py",
        "src/pkg/new_module.py",
        "src/pkg/new_name.py",
        "src/pkg/noeol.py",
        "src/pkg/sub/moved.py",
    )
    assert parts.test_files == ("tests/data/expected.json", "tests/test_core.py")
    assert parts.aux_files == ("CHANGELOG.md", "changelog.d/12.bugfix", "docs/index.rst")
    assert parts.binary_files == ("tests/data/logo.png",)
    assert parts.touches_code
    # Counted over the fix alone: core.py +4 -2, gone.py -1, new_module.py +2, new_name.py +1 -1,
    # noeol.py +1 -1.
    assert (parts.added_lines, parts.removed_lines) == (8, 5)
    for patch in (parts.patch, parts.test_patch, parts.aux_patch):
        assert patch.startswith("diff --git ") and patch.endswith("\n")
    assert "logo.png" not in parts.patch + parts.test_patch + parts.aux_patch
    assert "old mode 100644\nnew mode 100755\n" in parts.patch
    assert "rename from src/pkg/old_name.py\nrename to src/pkg/new_name.py\n" in parts.patch
    assert "similarity index 100%\nrename from src/pkg/moved.py\nrename to src/pkg/sub/moved.py\n" in parts.patch
    assert "deleted file mode 100644\n" in parts.patch
    assert "new file mode 100644\nindex 0000000..e69de29\n" in parts.patch
    assert "\\ No newline at end of file\n" in parts.patch


@pytest.mark.parametrize("binary_flag", [(), ("--binary",)], ids=["binary-differ", "git-binary-patch"])
def test_each_part_applies_alone_and_together(pr_repo: Path, tmp_path: Path, binary_flag: tuple[str, ...]) -> None:
    parts = split_diff(pr_diff(pr_repo, *binary_flag))
    assert parts.binary_files == ("tests/data/logo.png",)

    for index, patch in enumerate((parts.patch, parts.test_patch, parts.aux_patch)):
        apply(fresh_base(pr_repo, tmp_path, f"alone{index}"), patch, check=True)

    together = fresh_base(pr_repo, tmp_path, "together")
    for patch in (parts.patch, parts.test_patch, parts.aux_patch):
        apply(together, patch)
    git(together, "add", "-A")
    # Everything but the binary file now matches the PR, file modes included.
    changed = git(together, "diff", "--name-only", "--cached", git(pr_repo, "rev-parse", "HEAD").strip())
    assert changed.split() == ["tests/data/logo.png"]


def test_empty_parts_are_empty_strings() -> None:
    diff = (
        "diff --git a/docs/a.md b/docs/a.md\n"
        "index 1111111..2222222 100644\n"
        "--- a/docs/a.md\n"
        "+++ b/docs/a.md\n"
        "@@ -1 +1 @@\n"
        "-old\n"
        "+new"
    )
    parts = split_diff(diff)
    assert parts.patch == parts.test_patch == ""
    assert parts.aux_patch == diff + "\n"
    assert parts.source_files == parts.test_files == ()
    assert not parts.touches_code and parts.added_lines == parts.removed_lines == 0
    assert split_diff("") == split_diff("\n")
    assert split_diff("").patch == ""


def test_non_python_fix_does_not_touch_python() -> None:
    diff = (
        "diff --git a/setup.cfg b/setup.cfg\n"
        "index 1111111..2222222 100644\n"
        "--- a/setup.cfg\n"
        "+++ b/setup.cfg\n"
        "@@ -1,2 +1,3 @@\n"
        " [metadata]\n"
        "+name = pkg\n"
        " version = 1\n"
    )
    parts = split_diff(diff)
    assert parts.source_files == ("setup.cfg",)
    assert not parts.touches_code
    assert (parts.added_lines, parts.removed_lines) == (1, 0)


def test_mail_header_is_dropped_and_quoted_paths_are_read(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write(root, {"src/caf\u00e9.py": "A = 1\n"})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    write(root, {"src/caf\u00e9.py": "A = 2\n"})
    git(root, "commit", "-qam", "fix")
    mail = git(root, "format-patch", "-1", "--stdout")
    assert '"a/src/caf\\303\\251.py"' in mail  # git quotes non-ASCII paths by default

    parts = split_diff(mail)
    assert parts.source_files == ("src/caf\u00e9.py",)
    assert parts.patch.startswith("diff --git ")
    git(root, "checkout", "-q", "HEAD~1")
    apply(root, parts.patch, check=True)


def test_plain_unified_diff_without_git_headers(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write(root, {"pkg/a.py": "A = 1\n", "tests/test_a.py": "def test_a():\n    pass\n"})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    plain = (
        "--- a/pkg/a.py\t2024-01-01 00:00:00\n"
        "+++ b/pkg/a.py\t2024-01-02 00:00:00\n"
        "@@ -1 +1 @@\n"
        "-A = 1\n"
        "+A = 2\n"
        "--- a/tests/test_a.py\n"
        "+++ b/tests/test_a.py\n"
        "@@ -1,2 +1,2 @@\n"
        " def test_a():\n"
        "-    pass\n"
        "+    assert True\n"
    )
    parts = split_diff(plain)
    assert parts.source_files == ("pkg/a.py",) and parts.test_files == ("tests/test_a.py",)
    assert parts.patch.startswith("--- a/pkg/a.py") and parts.test_patch.startswith("--- a/tests/test_a.py")
    apply(root, parts.patch, check=True)
    apply(root, parts.test_patch, check=True)


def test_malformed_diff_raises_patch_error() -> None:
    broken = "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,3 +1,3 @@\n-a\n+b\n"
    with pytest.raises(PatchError, match="cannot parse the diff"):
        split_diff(broken)


def test_hunks_apply_alone_and_in_sequence(pr_repo: Path, tmp_path: Path) -> None:
    patch = split_diff(pr_diff(pr_repo)).patch
    pieces = hunks(patch)
    core_pieces = [piece for piece in pieces if "b/src/pkg/core.py" in piece]
    assert len(core_pieces) == 2
    assert all(piece.count("\n@@ ") == 1 for piece in pieces)
    # core.py 2, gone.py, new_module.py, new_name.py, noeol.py 1 each; the empty new file, the
    # mode change of run.sh and the pure rename of moved.py have no hunk.
    assert len(pieces) == 6
    assert not any(name in piece for piece in pieces for name in ("empty.py", "run.sh", "moved.py"))

    for index, piece in enumerate(pieces):
        apply(fresh_base(pr_repo, tmp_path, f"hunk{index}"), piece, check=True)

    # The first hunk of core.py adds two lines, so alone the second lands two lines higher.
    second_alone = fresh_base(pr_repo, tmp_path, "second")
    apply(second_alone, core_pieces[1])
    assert "    return x - 25\n" in (second_alone / "src/pkg/core.py").read_text()
    assert "x = abs(x)" not in (second_alone / "src/pkg/core.py").read_text()

    sequence = fresh_base(pr_repo, tmp_path, "sequence")
    for piece in pieces:
        apply(sequence, piece)
    whole = fresh_base(pr_repo, tmp_path, "whole")
    apply(whole, patch)
    for name in ("src/pkg/core.py", "src/pkg/new_name.py", "src/pkg/noeol.py", "src/pkg/new_module.py"):
        assert (sequence / name).read_bytes() == (whole / name).read_bytes()
    assert not (sequence / "src/pkg/gone.py").exists()


def test_hunk_header_is_renumbered_as_the_only_hunk() -> None:
    patch = (
        "diff --git a/m.py b/m.py\n"
        "index 1111111..2222222 100644\n"
        "--- a/m.py\n"
        "+++ b/m.py\n"
        "@@ -1,3 +1,4 @@ def top():\n"
        " a\n"
        "+b\n"
        " c\n"
        " d\n"
        "@@ -20,3 +21,2 @@ def low():\n"
        " x\n"
        "-y\n"
        " z\n"
    )
    first, second = hunks(patch)
    assert "@@ -1,3 +1,4 @@ def top():\n" in first
    assert second.endswith("@@ -20,3 +20,2 @@ def low():\n x\n-y\n z\n")
    assert second.startswith("diff --git a/m.py b/m.py\nindex 1111111..2222222 100644\n--- a/m.py\n+++ b/m.py\n")


def test_added_lines_reads_hunk_bodies_only() -> None:
    patch = (
        "diff --git a/m.py b/m.py\n"
        "index 1111111..2222222 100644\n"
        "--- a/m.py\n"
        "+++ b/m.py\n"
        "@@ -1,2 +1,5 @@\n"
        " a\n"
        "+++ counter\n"
        "+\n"
        "+    return total\n"
        " b\n"
        "diff --git a/n.png b/n.png\n"
        "index 3333333..4444444 100644\n"
        "Binary files a/n.png and b/n.png differ\n"
    )
    assert added_lines(patch) == ["++ counter", "", "    return total"]
    assert added_lines("") == []


def test_split_diff_is_fast(pr_repo: Path) -> None:
    diff = pr_diff(pr_repo)
    assert len(diff.splitlines()) > 100
    started = time.perf_counter()
    for _ in range(1000):
        split_diff(diff)
    # About 0.5 ms a call here; the bound is loose for slow CI machines.
    assert time.perf_counter() - started < 3.0
