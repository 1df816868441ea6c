"""The one patch model: real ``git diff`` output read as ``git apply`` reads it, and written back exactly."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from repo2env.errors import PatchError
from repo2env.patches import SYMLINK_MODE, apply_to_text, parse, relative_symlink_target, render

GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
LONG = "".join(f"line {number}\n" for number in range(40))


def git(cwd: Path, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """git without user configuration; text in and out as bytes decoded verbatim (CRLF stays)."""
    result = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "core.autocrlf=false",
                             *args], cwd=cwd, input=None if stdin is None else stdin.encode("utf-8", "surrogateescape"),
                            capture_output=True, env=GIT_ENV, check=False)
    result.stdout = result.stdout.decode("utf-8", "surrogateescape")
    result.stderr = result.stderr.decode("utf-8", "surrogateescape")
    assert not check or result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, newline="")


def applied_paths(root: Path, diff: str, scratch: Path) -> set[str]:
    """The paths that differ from the base once ``git apply`` applied ``diff`` to a clone of ``root``."""
    clone = scratch / f"clone-{len(list(scratch.iterdir()))}"
    git(root, "clone", "-q", str(root), str(clone))
    git(clone, "apply", "--binary", "-", stdin=diff)
    status = git(clone, "status", "--porcelain", "-z", "-uall", "--no-renames").stdout
    return {entry[3:] for entry in status.split("\0") if entry}


BASE: dict[str, str | bytes] = {
    "src/pkg/core.py": LONG,
    "src/pkg/renamed.py": LONG.replace("line", "renamed"),
    "src/pkg/edited_rename.py": LONG.replace("line", "edited"),
    "src/pkg/copied.py": LONG.replace("line", "copied"),
    "scripts/run.sh": "echo run\n",
    "src/pkg/gone.py": "print('bye')\n",
    "src/pkg/noeol.py": "A = 1\nB = 2",
    "src/pkg/crlf.py": "A = 1\r\nB = 2\r\nC = 3\r\n",
    "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256)) * 4,
    "src/caf\u00e9 \"q\"\tt.py": "X = 1\n",
}
CHANGES = {
    "multi-hunk": {"src/pkg/core.py": LONG.replace("line 2\n", "line two\n").replace("line 35\n", "")},
    "no-newline-at-end": {"src/pkg/noeol.py": "A = 1\nB = 3"},
    "newline-added-at-end": {"src/pkg/noeol.py": "A = 1\nB = 2\n"},
    "crlf": {"src/pkg/crlf.py": "A = 1\r\nB = 20\r\nC = 3\r\n"},
    "quoted-path": {"src/caf\u00e9 \"q\"\tt.py": "X = 2\n"},
    "binary-add": {"assets/new.bin": b"\x00\x01\x02" * 200},
    "binary-modify": {"assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256)) * 3 + b"\x00" * 9},
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A repository at its base commit and, by name, diffs that ``git diff`` made from it."""
    root = tmp_path_factory.mktemp("patches") / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write(root, BASE)
    os.symlink("core.py", root / "src/pkg/link.py")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    diffs: dict[str, str] = {}

    def record(name: str, *diff_args: str) -> None:
        git(root, "add", "-A")
        diffs[name] = git(root, "diff", "--cached", *diff_args, "HEAD").stdout
        git(root, "reset", "-q", "--hard", "HEAD")
        git(root, "clean", "-qfdx")

    for name, files in CHANGES.items():
        write(root, files)
        record(name, "--binary")
    write(root, CHANGES["binary-modify"])
    record("binary-without-data")
    git(root, "mv", "src/pkg/renamed.py", "src/pkg/renamed_to.py")
    record("rename", "-M")
    (root / "src/pkg/edited_rename.py").unlink()
    write(root, {"lib/edited_renamed.py": LONG.replace("line", "edited").replace("edited 7\n", "edited seven\n")})
    record("rename-with-edit", "-M")
    write(root, {"src/pkg/copy_of.py": LONG.replace("line", "copied").replace("copied 1\n", "copied one\n"),
                 "src/pkg/copied.py": LONG.replace("line", "copied").replace("copied 3\n", "")})
    record("copy", "-C", "-C")
    (root / "scripts/run.sh").chmod(0o755)
    record("mode-only")
    (root / "src/pkg/gone.py").unlink()
    record("delete")
    os.symlink("../pkg/core.py", root / "src/pkg/new_link.py")
    record("symlink-add")
    (root / "src/pkg/link.py").unlink()
    os.symlink("renamed.py", root / "src/pkg/link.py")
    record("symlink-retarget")
    (root / "src/pkg/link.py").unlink()
    write(root, {"src/pkg/link.py": "REAL = 1\n"})
    record("symlink-to-file")
    write(root, {"src/pkg/empty.py": ""})
    record("new-empty-file")
    diffs["everything"] = "".join(diffs[name] for name in ("multi-hunk", "rename-with-edit", "mode-only", "delete",
                                                            "binary-add", "symlink-add", "crlf"))
    return root, diffs


def test_render_gives_back_every_diff_exactly(corpus) -> None:
    _, diffs = corpus
    for name, diff in diffs.items():
        assert diff, name
        patch = parse(diff)
        assert render(patch) == diff, name
        assert render(patch.files) == diff, name  # no preamble in git diff output
        assert "".join(file.render() for file in patch.files) == diff, name


def test_paths_are_exactly_what_git_apply_touches(corpus, tmp_path) -> None:
    root, diffs = corpus
    for name, diff in diffs.items():
        if name == "binary-without-data":  # git cannot apply it: it names the file, without the data
            assert git(root, "apply", "--check", "-", stdin=diff, check=False).returncode != 0
            assert parse(diff).paths == ["assets/logo.png"]
            continue
        assert set(parse(diff).paths) == applied_paths(root, diff, tmp_path), name


def test_the_model_knows_each_kind_of_change(corpus) -> None:
    _, diffs = corpus
    one = {name: parse(diff).files for name, diff in diffs.items()}
    assert [len(file.hunks) for file in one["multi-hunk"]] == [2]
    assert one["multi-hunk"][0].added_lines == ["line two"] and one["multi-hunk"][0].removed == 2
    (rename,) = one["rename"]
    assert (rename.is_rename, rename.old_path, rename.new_path, rename.hunks) == (
        True, "src/pkg/renamed.py", "src/pkg/renamed_to.py", ())
    (edited,) = one["rename-with-edit"]
    assert edited.is_rename and edited.new_path == "lib/edited_renamed.py" and edited.added_lines == ["edited seven"]
    copy = next(file for file in one["copy"] if file.is_copy)
    assert (copy.old_path, copy.new_path) == ("src/pkg/copied.py", "src/pkg/copy_of.py")
    (mode,) = one["mode-only"]
    assert (mode.old_mode, mode.new_mode, mode.hunks) == ("100644", "100755", ())
    (deleted,) = one["delete"]
    assert deleted.is_deleted and deleted.path == "src/pkg/gone.py" and deleted.removed == 1
    (added,) = one["binary-add"]
    assert added.is_new and added.is_git_binary and added.binary[-1] == "\n"
    (modified,) = one["binary-modify"]
    assert modified.is_git_binary and not modified.is_new
    (bare,) = one["binary-without-data"]
    assert bare.is_binary and not bare.is_git_binary and bare.binary[0].startswith("Binary files ")
    (link,) = one["symlink-add"]
    assert link.is_symlink and link.symlink_target == "../pkg/core.py"
    assert relative_symlink_target(link.path, link.symlink_target) == "src/pkg/core.py"
    (retarget,) = one["symlink-retarget"]
    assert retarget.is_symlink and retarget.symlink_target == "renamed.py"
    assert not any(file.is_symlink for file in one["symlink-to-file"] if file.new_path)
    (quoted,) = one["quoted-path"]
    assert quoted.path == "src/caf\u00e9 \"q\"\tt.py"
    (crlf,) = one["crlf"]
    assert crlf.hunks[0].added == ["B = 20\r"]
    (noeol,) = one["no-newline-at-end"]
    assert noeol.hunks[0].lines[-1] == "\\ No newline at end of file\n"
    (empty,) = one["new-empty-file"]
    assert empty.is_new and empty.hunks == () and empty.path == "src/pkg/empty.py"


def test_a_hunk_moved_to_another_start_still_applies(corpus) -> None:
    root, diffs = corpus
    (file,) = parse(diffs["multi-hunk"]).files
    first, second = file.hunks
    # Alone, the second hunk's new side starts where its old side does.
    alone = file.with_hunks([second.moved(second.source_start)])
    git(root, "apply", "--check", "-", stdin=alone.render())
    assert alone.render().count("@@ -") == 1 and first.section == ""


def test_a_file_patched_as_text_is_what_git_apply_writes(corpus, tmp_path) -> None:
    root, diffs = corpus
    compared = set()
    for name, diff in diffs.items():
        clone = tmp_path / name
        git(root, "clone", "-q", str(root), str(clone))
        if git(clone, "apply", "--binary", "-", stdin=diff, check=False).returncode:
            continue  # a binary change without its data
        for file in parse(diff).files:
            if file.is_binary or SYMLINK_MODE in (file.old_mode, file.new_mode):
                continue
            before = (root / file.old_path).read_bytes().decode() if file.old_path else None
            after = apply_to_text(file, before)
            written = clone / file.path
            assert after == (written.read_bytes().decode() if written.exists() else None), (name, file.path)
            compared.add(name)
    assert {"multi-hunk", "no-newline-at-end", "newline-added-at-end", "crlf", "rename-with-edit", "copy", "delete",
            "new-empty-file", "symlink-to-file"} <= compared


def test_a_hunk_applies_where_its_lines_moved_to_and_nowhere_else(corpus) -> None:
    _, diffs = corpus
    (file,) = parse(diffs["multi-hunk"]).files
    moved = "header\nheader\n" + LONG
    assert apply_to_text(file, moved) == "header\nheader\n" + LONG.replace("line 2\n", "line two\n").replace(
        "line 35\n", "")
    with pytest.raises(PatchError, match="does not apply"):
        apply_to_text(file, LONG.replace("line 3\n", "line three\n"))
    (binary,) = parse(diffs["binary-add"]).files
    with pytest.raises(PatchError, match="binary"):
        apply_to_text(binary, None)


# Each is refused by `git apply` and by the model, for the same reason.
REFUSED = {
    "hunk-outside-a-file": "@@ -1,2 +1,2 @@\n-line 0\n+line zero\n line 1\n",
    "short-hunk": "diff --git a/src/pkg/core.py b/src/pkg/core.py\n--- a/src/pkg/core.py\n+++ b/src/pkg/core.py\n"
                  "@@ -1,3 +1,3 @@\n-line 0\n+line zero\n",
    "inconsistent-rename": "diff --git a/src/pkg/core.py b/src/pkg/x.py\nrename from src/pkg/core.py\n"
                           "rename to src/pkg/x.py\n--- a/src/pkg/core.py\n+++ b/tests/test_x.py\n"
                           "@@ -1,2 +1,2 @@\n-line 0\n+line zero\n line 1\n",
    "corrupt-binary": "diff --git a/assets/logo.png b/assets/logo.png\nindex 1111111..2222222 100644\n"
                      "GIT binary patch\nliteral 12\nthis is not base85 at all\n\n",
    "header-only": "diff --git a/src/pkg/core.py b/src/pkg/core.py\nindex 1111111..2222222 100644\n",
    "new-and-deleted": "diff --git a/x.py b/x.py\nnew file mode 100644\ndeleted file mode 100644\n",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_git_apply_refuses_does_not_parse(corpus, name) -> None:
    root, _ = corpus
    assert git(root, "apply", "--check", "-", stdin=REFUSED[name], check=False).returncode != 0
    with pytest.raises(PatchError, match="cannot parse the diff"):
        parse(REFUSED[name])


# Diffs whose every reading but git's misses a file, each with what git writes.
AMBIGUOUS = {
    # The ---/+++ names, not the diff --git line, say what git writes (and removes).
    "header-names-disagree": ("diff --git a/src/pkg/core.py b/src/pkg/core.py\n--- a/src/pkg/core.py\n"
                              "+++ b/tests/test_core.py\n@@ -1,2 +1,2 @@\n-line 0\n+line zero\n line 1\n",
                              {"src/pkg/core.py", "tests/test_core.py"}),
    # Any folder is the prefix git takes off, not only a/ and b/.
    "other-prefix": ("diff --git a/src/pkg/core.py b/src/pkg/core.py\n--- x/src/pkg/core.py\n"
                     "+++ y/conftest.py\n@@ -1,2 +1,2 @@\n-line 0\n+line zero\n line 1\n", {"src/pkg/core.py", "conftest.py"}),
    "quoted-escape": ('diff --git "a/conftes\\164.py" "b/conftes\\164.py"\nnew file mode 100644\n--- /dev/null\n'
                      '+++ "b/conftes\\164.py"\n@@ -0,0 +1 @@\n+import os\n', {"conftest.py"}),
    # A plain diff after a git file's hunk is a file of its own.
    "plain-after-git": ("diff --git a/src/pkg/core.py b/src/pkg/core.py\n--- a/src/pkg/core.py\n"
                        "+++ b/src/pkg/core.py\n@@ -1,2 +1,2 @@\n-line 0\n+line zero\n line 1\n"
                        "--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1 @@\n+import os\n",
                        {"src/pkg/core.py", "conftest.py"}),
    # Garbage between files, and a diff --git line with no header after it, are skipped by git.
    "garbage-between": ("diff --git a/src/pkg/core.py b/src/pkg/core.py\n--- a/src/pkg/core.py\n"
                        "+++ b/src/pkg/core.py\n@@ -1,2 +1,2 @@\n-line 0\n+line zero\n line 1\nsome words\n"
                        "diff --git a/tests/conftest.py b/tests/conftest.py\n-- \n2.40\n", {"src/pkg/core.py"}),
    # A traditional diff of names without folders makes git read every later name with -p0.
    "p0-guess": ("--- core.txt\n+++ core.txt\n@@ -0,0 +1 @@\n+x\n"
                 "diff --git a/src/pkg/core.py b/src/pkg/core.py\nnew file mode 100644\n--- /dev/null\n"
                 "+++ b/conftest.py\n@@ -0,0 +1 @@\n+import os\n", {"core.txt", "b/conftest.py"}),
}


@pytest.mark.parametrize("name", sorted(AMBIGUOUS))
def test_names_are_read_as_git_reads_them(corpus, tmp_path, name) -> None:
    root, _ = corpus
    diff, expected = AMBIGUOUS[name]
    patch = parse(diff)
    assert render(patch) == diff
    assert set(patch.paths) == expected
    if name != "p0-guess":  # core.txt does not exist at the base: only the reading is compared
        assert applied_paths(root, diff, tmp_path) == expected
    else:
        records = git(root, "apply", "--numstat", "-", stdin=diff).stdout
        assert {line.split("\t")[2] for line in records.splitlines()} == expected
