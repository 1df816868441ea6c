"""Folders written whole (repo2env/folders.py): every export, publish, a mined clone and the demo
repository land complete or not at all, through the one write_folder."""

from __future__ import annotations

import json
import subprocess

import pytest

from repo2env.errors import InputError, SourceError
from repo2env.folders import write_folder


def test_a_folder_is_complete_or_absent(tmp_path):
    target = tmp_path / "out"

    def broken(folder):
        (folder / "half.txt").write_text("half")
        raise RuntimeError("cut short")

    with pytest.raises(RuntimeError):
        write_folder(target, broken)
    assert list(tmp_path.iterdir()) == [], "neither the target nor the staging folder is left"
    assert write_folder(target, lambda folder: (folder / "a.txt").write_text("a")) == 1
    assert [path.name for path in target.iterdir()] == ["a.txt"]
    with pytest.raises(InputError, match="exists and is not empty"):
        write_folder(target, lambda folder: None)
    with pytest.raises(RuntimeError):
        write_folder(target, broken, overwrite=True)
    assert (target / "a.txt").read_text() == "a", "a failed overwrite keeps the old content"
    write_folder(target, lambda folder: (folder / "b.txt").write_text("b"), overwrite=True)
    assert [path.name for path in target.iterdir()] == ["b.txt"] and list(tmp_path.iterdir()) == [target]


def test_what_something_else_wrote_meanwhile_is_never_replaced_without_overwrite(tmp_path):
    target = tmp_path / "out"

    def racing(folder):
        (folder / "mine.txt").write_text("mine")
        target.mkdir()
        (target / "theirs.txt").write_text("theirs")

    with pytest.raises(InputError, match="written by something else"):
        write_folder(target, racing)
    assert [path.name for path in target.iterdir()] == ["theirs.txt"] and list(tmp_path.iterdir()) == [target]
    empty = tmp_path / "empty"
    empty.mkdir()
    write_folder(empty, lambda folder: (folder / "x.txt").write_text("x"))
    assert [path.name for path in empty.iterdir()] == ["x.txt"], "an empty folder is written into"


def test_publish_staging_keeps_its_name():
    from repo2env.publish.staging import write_folder as publish_write_folder

    assert publish_write_folder is write_folder


def test_a_clone_is_made_whole_and_one_made_meanwhile_is_kept(tmp_path, monkeypatch):
    from repo2env.mine import clone

    origin = tmp_path / "origin"
    subprocess.run(["git", "init", "-q", str(origin)], check=True)
    subprocess.run(["git", "-C", str(origin), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "first"], check=True)
    target = tmp_path / "work" / "clone"
    made = clone.clone_or_fetch(str(origin), target, name="origin", mirror=True, refspecs=clone.MIRROR_REFSPECS)
    assert made == target and (target / "HEAD").is_file()
    assert [path.name for path in target.parent.iterdir()] == ["clone"], "no staging folder is left"

    other = tmp_path / "work" / "other"
    real_clone_from = clone.git.Repo.clone_from

    def clone_while_another_process_does(url, path, **options):
        real_clone_from(url, other, **options)
        return real_clone_from(url, path, **options)

    monkeypatch.setattr(clone.git.Repo, "clone_from", clone_while_another_process_does)
    with pytest.raises(SourceError, match="appeared while origin was being cloned"):
        clone.clone_or_fetch(str(origin), other, name="origin", mirror=True, refspecs=clone.MIRROR_REFSPECS)
    assert (other / "HEAD").is_file(), "the other process's clone stays"


def test_the_demo_repository_is_built_whole(tmp_path, monkeypatch):
    import repo2env.demo
    from repo2env.demo import DemoRepo, demo_history
    from repo2env.pipeline import compose

    calls = []

    def build_demo(dest, language="python"):
        calls.append(dest)
        (dest / "repo" / ".git").mkdir(parents=True)
        if len(calls) == 1:
            raise RuntimeError("killed")
        (dest / "issues.json").write_text(json.dumps({"repository": demo_history(language).repo}))
        return DemoRepo(path=dest / "repo", issues_path=dest / "issues.json", repo=demo_history(language).repo, pulls=())

    monkeypatch.setattr(repo2env.demo, "build_demo", build_demo)
    folder = tmp_path / "sources" / "demo"
    folder.mkdir(parents=True)
    (folder / "repo").mkdir()  # what an older, cut-short build left
    with pytest.raises(RuntimeError):
        compose.demo_repository(folder)
    assert [path.name for path in folder.iterdir()] == ["repo"] and [path.name for path in folder.parent.iterdir()] == ["demo"]
    source = compose.demo_repository(folder)
    assert source.built.path == folder / "repo" and (folder / "issues.json").is_file()
    assert sorted(path.name for path in folder.parent.iterdir()) == ["demo"]
    assert compose.demo_repository(folder).built is None and len(calls) == 2, "a whole demo is reused"
