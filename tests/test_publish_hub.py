"""Publishing to the Hugging Face Hub, tested at the HTTP boundary: the real huggingface_hub client
over real HTTP against :class:`tests.fake_hub.FakeHub` (the Hub itself is unreachable here)."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
from fake_hub import FakeHub

from repo2env.errors import InputError, SourceError
from repo2env.jsonl import write_jsonl
from repo2env.models import EnvSpec, RolloutResult, Task, ValidationReport
from repo2env.publish.dataset import PublishOptions, verify_manifest
from repo2env.publish.harbor import verifier_library
from repo2env.publish.hub import HubTarget, download_from_hub, parse_target, publish_to_hub

TOKEN = "hf_fake_write"
SHA = "89abcdef0123456789abcdef0123456789abcdef"
# A Harbor task folder per task (tasks/), its outcome plugin's name random per folder (PLUGIN here).
HARBOR_FILES = ("instruction.md", "task.toml", "environment/Dockerfile", "solution/solve.sh", "solution/gold.diff",
                "tests/spec.json", "tests/grade.json", "tests/task.json", "tests/test.diff", "tests/canaries.json",
                "tests/plugin/PLUGIN.py",
                "tests/grade.sh", "tests/restore.py", "tests/run_tests.sh", "tests/test.sh", "tests/verify.py",
                *(f"tests/lib/repo2env/{name}" for name in verifier_library()))
TREE = {".gitattributes", "README.md", "data/train-00000-of-00001.parquet", "figures/validation.png",
        "manifest.json", *(f"tasks/acme__gears-{number}/{name}" for number in (2, 3) for name in HARBOR_FILES)}


def normalized(files) -> set[str]:
    """File names of a published tree with each outcome plugin's random name as PLUGIN."""
    return {re.sub(r"/tests/plugin/[^/]+\.py$", "/tests/plugin/PLUGIN.py", name) for name in files}


def accepted_task(number: int) -> Task:
    rewards = [("gold", 1.0), ("null", 0.0), ("partial", 0.5)]
    return Task(
        instance_id=f"acme__gears-{number}", repo="acme/gears", pull_number=number, issue_numbers=[number - 1],
        base_commit=SHA, patch="diff --git a/g.py b/g.py\n", test_patch="diff --git a/tests/t.py b/tests/t.py\n",
        problem_statement=f"Gear {number} slips under load", created_at=f"2024-0{number}-01T10:00:00Z",
        version="0.3", FAIL_TO_PASS=["tests/t.py::test_slip"], PASS_TO_PASS=["tests/t.py::test_turn"],
        env_spec=EnvSpec(status="env_ok", image=f"repo2env/task:acme__gears-{number}", env_image="repo2env/env:x",
                         image_digest="sha256:" + "1" * 64),
        validation=ValidationReport(verdict="accepted", policy="default", reward_mean=0.5, distinct_rewards=3,
                                    partial_credit=True,
                                    rollouts=[RolloutResult(kind=kind, reward=reward) for kind, reward in rewards]))


@pytest.fixture
def tasks_folder(tmp_path):
    folder = tmp_path / "tasks"
    tasks = [accepted_task(2), accepted_task(3)]
    write_jsonl(folder / "tasks.jsonl", tasks)
    write_jsonl(folder / "validation.jsonl", [
        ValidationReport(instance_id=task.instance_id, repo=task.repo, verdict="accepted", policy="default",
                         rollouts=[RolloutResult(kind=kind, reward=reward) for kind, reward in
                                   [("gold", 1.0), ("null", 0.0), ("partial", 0.5)]]) for task in tasks])
    return folder


@pytest.fixture
def hub():
    with FakeHub() as server:
        yield server


@pytest.fixture(autouse=True)
def no_ambient_token(monkeypatch, tmp_path):
    """No token from the machine running the tests: neither the environment nor a stored login."""
    import huggingface_hub.constants

    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))


def publish(folder, hub, repo_id="alice/gears", **kwargs):
    kwargs.setdefault("token", TOKEN)
    return publish_to_hub([folder], repo_id, PublishOptions(name=repo_id), endpoint=hub.url, **kwargs)


def commits(hub):
    return hub.calls("POST", r"/commit/")


def test_publish_is_one_commit_and_downloads_back_intact(tasks_folder, hub, tmp_path):
    from datasets import load_dataset

    summary = publish(tasks_folder, hub)
    repo = hub.repo("alice/gears")
    assert len(commits(hub)) == 1 and len(repo.history("main")) == 2, "the Hub's initial commit + ours"
    assert normalized(repo.files("main")) == TREE
    assert summary.target == f"{hub.url}/datasets/alice/gears/commit/{repo.refs['main']}"
    assert summary.splits == {"train": 2}
    assert not repo.private and "visibility" not in hub.calls("POST", "/api/repos/create")[0].payload
    sent = {item["value"]["path"]: item["key"] for item in commits(hub)[0].payload if item["key"] != "header"}
    assert normalized(sent) == TREE - {".gitattributes"} and set(sent.values()) == {"file"}

    local = download_from_hub("alice/gears", tmp_path / "downloaded", endpoint=hub.url)
    assert verify_manifest(local) == []
    assert (local / "figures" / "validation.png").read_bytes() == repo.files("main")["figures/validation.png"]
    rows = load_dataset(str(local), split="train")
    assert rows["instance_id"] == ["acme__gears-2", "acme__gears-3"]
    assert rows[0]["prompt"][1]["role"] == "user" and "Gear 2 slips" in rows[0]["prompt"][1]["content"]
    parquet = load_dataset("parquet", data_files=str(local / "data" / "*.parquet"), split="train")
    assert parquet["verdict"] == ["accepted", "accepted"]
    assert all(request.status < 400 for request in hub.requests)


def test_private_repository_is_created_private_and_hidden_from_anonymous_readers(tasks_folder, hub, tmp_path):
    publish(tasks_folder, hub, private=True)
    assert hub.calls("POST", "/api/repos/create")[0].payload["visibility"] == "private"
    assert hub.repo("alice/gears").private
    with pytest.raises(SourceError, match="no such dataset repository, or the token cannot read it"):
        download_from_hub("alice/gears", tmp_path / "anonymous", endpoint=hub.url)
    local = download_from_hub("alice/gears", tmp_path / "owner", endpoint=hub.url, token=TOKEN)
    assert verify_manifest(local) == []


def test_private_refuses_an_existing_public_repository(tasks_folder, hub):
    hub.seed("alice/gears", {})
    with pytest.raises(InputError, match="exists and is public, so --private cannot apply"):
        publish(tasks_folder, hub, private=True)
    assert commits(hub) == []
    hub.repo("alice/gears").private = True
    publish(tasks_folder, hub, private=True)
    assert len(commits(hub)) == 1


def test_revision_is_a_branch_created_from_main_and_main_stays_untouched(tasks_folder, hub, tmp_path):
    publish(tasks_folder, hub, revision="v1")
    repo = hub.repo("alice/gears")
    assert hub.calls("POST", "/branch/v1$")[0].status == 200
    assert set(repo.files("main")) == {".gitattributes"} and normalized(repo.files("v1")) == TREE
    assert commits(hub)[0].path.endswith("/commit/v1")
    # The branch exists now: used as it is. (Another card, so the tree differs: the client skips a
    # commit that would change nothing, and the manifest's timestamp has a one-second resolution.)
    publish_to_hub([tasks_folder], "alice/gears", PublishOptions(name="gears, second edition"), token=TOKEN,
                   endpoint=hub.url, revision="v1", overwrite=True)
    assert hub.calls("POST", "/branch/v1$")[1].status == 409 and len(repo.history("v1")) == 3
    local = download_from_hub("alice/gears", tmp_path / "v1", endpoint=hub.url, revision="v1")
    assert verify_manifest(local) == []
    with pytest.raises(InputError, match="no such revision"):
        download_from_hub("alice/gears", tmp_path / "v2", endpoint=hub.url, revision="v2")


def test_a_new_branch_replaces_what_it_inherits_from_main(tasks_folder, hub):
    repo = hub.seed("alice/gears", {"old.txt": b"from before"})
    with pytest.raises(InputError, match="already holds 1 file"):
        publish(tasks_folder, hub)
    publish(tasks_folder, hub, revision="v2")
    assert normalized(repo.files("v2")) == TREE and "old.txt" in repo.files("main")
    with pytest.raises(InputError, match=rf"hf://alice/gears \(branch v2\) already holds {len(TREE) - 1} file"):
        publish(tasks_folder, hub, revision="v2")


def test_create_pr_opens_a_pull_request_and_leaves_main_untouched(tasks_folder, hub):
    summary = publish(tasks_folder, hub, create_pr=True)
    repo = hub.repo("alice/gears")
    assert summary.target == f"{hub.url}/datasets/alice/gears/discussions/1"
    assert [pull.target_branch for pull in repo.pulls] == ["main"]
    assert set(repo.files("main")) == {".gitattributes"} and normalized(repo.files("refs/pr/1")) == TREE
    assert commits(hub)[0].query == {"create_pr": "1"}


def test_create_pr_against_a_branch(tasks_folder, hub):
    summary = publish(tasks_folder, hub, revision="v1", create_pr=True)
    repo = hub.repo("alice/gears")
    assert summary.target.endswith("/discussions/1") and repo.pulls[0].target_branch == "v1"
    assert set(repo.files("v1")) == {".gitattributes"} and normalized(repo.files("refs/pr/1")) == TREE


def test_a_large_tree_still_lands_in_one_commit(tasks_folder, hub):
    """upload_folder would split 300+ files into several commits (hf_xet's pipeline); ours does not."""
    def task_folders(tasks, root):
        for index in range(150):
            for name in ("instruction.md", "task.toml"):
                path = root / "more" / f"task-{index:03d}" / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"{name} of task {index}\n")
        return 150

    summary = publish_to_hub([tasks_folder], "alice/gears", PublishOptions(), token=TOKEN, endpoint=hub.url,
                             extra_writers=[task_folders])
    repo = hub.repo("alice/gears")
    assert summary.harbor_tasks == 2 and len(repo.files("main")) == len(TREE) + 300
    assert len(commits(hub)) == 1 and len(hub.calls("POST", "/preupload/")) == 2, "256 files per preupload call"


def test_existing_content_is_refused_unless_overwrite_then_replaced(tasks_folder, hub):
    repo = hub.seed("alice/gears", {"old.txt": b"from before", "data/train-old.parquet": b"PAR1"})
    with pytest.raises(InputError, match=r"already holds 2 file\(s\): data/train-old.parquet, old.txt") as refused:
        publish(tasks_folder, hub)
    assert "--overwrite" in str(refused.value) and "\n" not in str(refused.value)
    assert commits(hub) == [] and len(repo.history("main")) == 2

    publish(tasks_folder, hub, overwrite=True)
    assert normalized(repo.files("main")) == TREE, "old files deleted, .gitattributes kept"
    assert len(commits(hub)) == 1 and len(repo.history("main")) == 3
    deleted = [item["value"]["path"] for item in commits(hub)[0].payload if item["key"] == "deletedFile"]
    assert sorted(deleted) == ["data/train-old.parquet", "old.txt"]


def test_a_repository_holding_only_gitattributes_counts_as_empty(tasks_folder, hub):
    hub.seed("alice/gears", {})
    publish(tasks_folder, hub)
    assert normalized(hub.repo("alice/gears").files("main")) == TREE


def test_missing_token_is_a_clear_error_before_any_request(tasks_folder, hub):
    with pytest.raises(InputError, match="no Hugging Face token") as missing:
        publish(tasks_folder, hub, token=None)
    assert "HF_TOKEN" in str(missing.value) and "\n" not in str(missing.value)
    assert hub.requests == []


def test_token_from_hf_token_then_from_the_stored_login(tasks_folder, hub, monkeypatch, tmp_path):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    publish(tasks_folder, hub, repo_id="alice/from-env", token=None)
    monkeypatch.delenv("HF_TOKEN")
    stored = Path(huggingface_hub.constants.HF_TOKEN_PATH)
    stored.parent.mkdir(parents=True)
    stored.write_text(TOKEN)
    publish(tasks_folder, hub, repo_id="alice/from-login", token=None)
    assert {"alice/from-env", "alice/from-login"} <= {repo_id for _, repo_id in hub.repos}


def test_hf_endpoint_environment_variable_picks_the_hub(tasks_folder, hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    summary = publish_to_hub([tasks_folder], "alice/gears", PublishOptions(), token=TOKEN)
    assert summary.target.startswith(hub.url)


def test_wrong_token_is_a_one_line_error(tasks_folder, hub):
    with pytest.raises(SourceError, match=f"the Hub at {hub.url} refused the token") as refused:
        publish(tasks_folder, hub, token="hf_not_a_real_token")
    assert "\n" not in str(refused.value) and "HF_TOKEN" in str(refused.value)
    assert hub.repos == {}


@pytest.mark.parametrize(("repo_id", "message"), [
    ("nobody-org/gears", "the organization or repository does not exist"),
    ("bob/gears", "the token may not write to hf://bob/gears"),
])
def test_unknown_or_foreign_organization_is_a_one_line_error(tasks_folder, repo_id, message):
    with FakeHub(tokens={TOKEN: ("alice", {"alice"}), "hf_bob": ("bob", {"bob"})}) as hub:
        with pytest.raises(SourceError, match=message) as refused:
            publish(tasks_folder, hub, repo_id=repo_id)
    assert "\n" not in str(refused.value)


def test_hub_not_answering_is_a_one_line_error(tasks_folder, tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    with pytest.raises(SourceError, match=f"the Hub at {endpoint} does not answer") as down:
        publish_to_hub([tasks_folder], "alice/gears", PublishOptions(), token=TOKEN, endpoint=endpoint)
    assert "\n" not in str(down.value)
    with pytest.raises(SourceError, match=f"the Hub at {endpoint} does not answer"):
        download_from_hub("alice/gears", tmp_path / "nothing", endpoint=endpoint)


def test_nothing_to_publish_never_touches_the_hub(tmp_path, hub):
    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [accepted_task(2).model_copy(update={"validation": None})])
    with pytest.raises(InputError, match="never validated"):
        publish(folder, hub)
    assert hub.requests == []


@pytest.mark.parametrize(("text", "expected"), [
    ("hf://acme/gears", HubTarget("acme/gears")),
    ("hf://datasets/acme/gears-v1.2/", HubTarget("acme/gears-v1.2")),
    ("out/gears", Path("out/gears")),
])
def test_parse_target(text, expected):
    assert parse_target(text) == expected


@pytest.mark.parametrize("text", ["hf://gears", "hf://acme/gears/extra", "hf://acme/-gears", "hf://acme/ge..ars",
                                  "hf://acme/gears-", "hf://ac me/gears", "hf://"])
def test_parse_target_refuses_malformed_repo_ids(text):
    with pytest.raises(InputError, match="not a Hub dataset repository"):
        parse_target(text)



def test_cli_publishes_to_the_hub_and_pulls_back(tasks_folder, hub, tmp_path):
    """The commands a user types, over real HTTP to the local Hub: publish, then pull the rows back."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_TOKEN": TOKEN, "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf-home")}

    def run(*args):
        return subprocess.run([sys.executable, "-m", "repo2env", *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120)

    done = run("publish", "--from", str(tasks_folder), "--to", "hf://alice/cli-gears", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == 2
    pulled = run("pull", "hf://alice/cli-gears", "--out", str(tmp_path / "here"), "--no-build")
    assert pulled.returncode == 0, pulled.stderr
    assert "2 tasks" in pulled.stderr
    assert len((tmp_path / "here" / "acme__gears" / "tasks.jsonl").read_text().splitlines()) == 2
    refused = run("publish", "--from", str(tasks_folder), "--to", "hf://alice/cli-gears")
    assert refused.returncode == 1 and refused.stderr.startswith("error: ") and "Traceback" not in refused.stderr
    anonymous = subprocess.run([sys.executable, "-m", "repo2env", "publish", "--from", str(tasks_folder), "--to",
                                "hf://alice/other"], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                               env={**env, "HF_TOKEN": ""})
    assert anonymous.returncode == 1 and "token" in anonymous.stderr and "Traceback" not in anonymous.stderr
