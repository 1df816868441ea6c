"""Publishing to a folder: the dataset tree, its rows as datasets loads them, the card, the
manifest, refusals, atomicity; and the round trip from the published row back to a reward."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from repo2env.dataset_rows import task_from_row
from repo2env.errors import InputError
from repo2env.jsonl import write_jsonl
from repo2env.models import EnvSpec, RolloutResult, Task, ValidationReport
from repo2env.publish.dataset import PublishOptions, publish_to_folder, verify_manifest

SHA = "0123456789abcdef0123456789abcdef01234567"


def validated_task(number: int, created: str, verdict: str = "accepted", built: bool = True) -> Task:
    rewards = [("gold", 1.0), ("gold", 1.0), ("null", 0.0), ("partial", 0.5)]
    return Task(
        instance_id=f"acme__widgets-{number}", repo="acme/widgets", pull_number=number, issue_numbers=[number - 1],
        base_commit=SHA, patch="diff --git a/w.py b/w.py\n", test_patch="diff --git a/tests/t.py b/tests/t.py\n",
        problem_statement=f"Widget {number} breaks when empty", created_at=created, version="1.2",
        FAIL_TO_PASS=["tests/t.py::test_empty[a::b]"], PASS_TO_PASS=["tests/t.py::test_full"],
        env_spec=EnvSpec(status="env_ok" if built else "env_failed", image=f"repo2env/task:acme__widgets-{number}",
                         image_digest="sha256:" + "0" * 64, env_image="repo2env/env:py3.11-abc", python="3.11",
                         install=["pip install -e ."], error=None if built else "install failed"),
        validation=None if verdict == "pending" else ValidationReport(
            verdict=verdict, reasons=[] if verdict == "accepted" else ["null_passes"], policy="default",
            rollouts=[RolloutResult(kind=kind, reward=reward) for kind, reward in rewards], reward_mean=0.625,
            distinct_rewards=3, partial_credit=True),
    )


@pytest.fixture
def tasks_folder(tmp_path):
    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [
        validated_task(2, "2023-03-01T10:00:00Z"), validated_task(4, "2024-06-01T10:00:00Z"),
        validated_task(6, "2024-07-01T10:00:00Z", verdict="rejected"),
        validated_task(8, "2024-08-01T10:00:00Z", verdict="rejected", built=False),
    ])
    return folder


def test_folder_dataset_loads_with_datasets_and_round_trips(tasks_folder, tmp_path):
    from datasets import load_dataset

    target = tmp_path / "published"
    summary = publish_to_folder([tasks_folder], target, PublishOptions(name="acme/envs", split_by_date=__import__(
        "datetime").date(2024, 1, 1)))
    assert summary.splits == {"train": 1, "test": 1} and summary.left_out == {"rejected": 1, "env_failed": 1}
    loaded = load_dataset(str(target))
    assert set(loaded) == {"train", "test"}, "the card's configs decide the splits"
    row = loaded["test"][0]
    assert row["instance_id"] == "acme__widgets-4"
    assert row["prompt"][0]["role"] == "system" and "Widget 4 breaks" in row["prompt"][1]["content"]
    assert row["FAIL_TO_PASS"] == ["tests/t.py::test_empty[a::b]"] and row["reward_gold"] == 1.0
    assert row["verdict"] == "accepted" and json.loads(row["validation"])["rewards"]["partial"] == [0.5]
    back = task_from_row(row)
    original = validated_task(4, "2024-06-01T10:00:00Z")
    assert back.model_dump(exclude={"validation"}) == original.model_dump(exclude={"validation"}) | {
        "env_spec": back.env_spec.model_dump()}
    assert back.env_spec.image == original.env_spec.image and back.validation.verdict == "accepted"
    assert back.validation.rewards == original.validation.rewards, "rewards by kind read back as rollouts"
    card = (target / "README.md").read_text()
    assert card.startswith("---\n") and "configs:" in card and "data/test-*.parquet" in card
    assert "| acme/widgets | 4 | 3 | 4 | 2 | 2 |" in card
    assert "## Languages" in card and "| Python | 2 |" in card and "\n- python\n" in card
    assert verify_manifest(target) == []
    (target / "data" / "train-00000-of-00001.parquet").write_bytes(b"tampered")
    assert verify_manifest(target) == ["data/train-00000-of-00001.parquet: sha256 differs"]


def test_the_card_lists_the_languages_with_their_counts():
    from repo2env.publish.card import dataset_card

    card = dataset_card(name="acme/envs", splits={"train": 6}, repos={}, license_id="mit", figures=[], harbor_tasks=0,
                        json_lists=False, languages={"python": 2, "javascript": 3, "go": 1})
    languages = card.split("## Languages", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in languages.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows == ["| language | environments |", "| JavaScript | 3 |", "| Python | 2 |", "| go | 1 |"]
    assert {"javascript", "python", "go"} <= set(card.split("---", 2)[1].split("tags:", 1)[1].split()), "tags name them"
    assert "## Languages" not in dataset_card(name="acme/envs", splits={"train": 0}, repos={}, license_id="mit",
                                              figures=[], harbor_tasks=0, json_lists=False)


def test_json_lists_match_swebench_style(tasks_folder, tmp_path):
    from datasets import load_dataset

    publish_to_folder([tasks_folder], tmp_path / "out", PublishOptions(json_lists=True))
    row = load_dataset(str(tmp_path / "out"), split="train")[0]
    assert row["FAIL_TO_PASS"] == '["tests/t.py::test_empty[a::b]"]'
    assert task_from_row(row).FAIL_TO_PASS == ["tests/t.py::test_empty[a::b]"]


def test_refusals_and_overwrite(tasks_folder, tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("someone else's")
    with pytest.raises(InputError, match="exists and is not empty"):
        publish_to_folder([tasks_folder], target, PublishOptions())
    assert (target / "keep.txt").read_text() == "someone else's", "nothing touched"
    publish_to_folder([tasks_folder], target, PublishOptions(), overwrite=True)
    assert not (target / "keep.txt").exists() and (target / "manifest.json").is_file()

    unvalidated = tmp_path / "unvalidated"
    write_jsonl(unvalidated / "tasks.jsonl", [validated_task(10, "2024-01-01T00:00:00Z", verdict="pending")])
    with pytest.raises(InputError, match="never validated"):
        publish_to_folder([unvalidated], tmp_path / "never", PublishOptions())
    summary = publish_to_folder([unvalidated], tmp_path / "anyway", PublishOptions(include_rejected=True))
    assert summary.rows == 1


def test_an_interrupted_publish_leaves_no_target_and_no_staging(tasks_folder, tmp_path):
    def dies(tasks, root):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        publish_to_folder([tasks_folder], tmp_path / "out", PublishOptions(), extra_writers=[dies])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["tasks"]


def test_cli_publish_folder_and_one_line_errors(tasks_folder, tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "repo2env", "publish", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=120)

    done = run("--from", str(tasks_folder), "--to", str(tmp_path / "ds"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["splits"] == {"train": 2}
    again = run("--from", str(tasks_folder), "--to", str(tmp_path / "ds"))
    assert again.returncode == 1 and again.stderr.startswith("error: ") and "Traceback" not in again.stderr
    missing = run("--from", str(tmp_path / "nowhere"), "--to", str(tmp_path / "ds2"))
    assert missing.returncode != 0 and "Traceback" not in missing.stderr


@pytest.mark.docker
def test_published_demo_row_runs_and_scores_the_gold_patch(validated, docker_client, tmp_path):
    """Publish the validated demo, load it with datasets, and from one row alone: start its
    environment, apply the gold patch in the sandbox, and get 1.0 from the verifier."""
    from repo2env.dataset_rows import load_published
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.verify.grader import Grader

    folder, _ = validated
    publish_to_folder([folder], tmp_path / "ds", PublishOptions(name="repo2env/demo"))
    # Read as the product reads a published folder: datasets caches a local folder under its name
    # alone, and another test's "ds" folder (tests/test_harbor.py) came back from that cache.
    row = load_published(tmp_path / "ds")["train"][0]
    task = task_from_row(row)
    runtime = DockerBackend(docker_client)
    with runtime.start(task) as sandbox:
        sandbox.write_file("/tmp/gold.diff", task.patch)
        applied = sandbox.exec("git apply /tmp/gold.diff")
        assert applied.exit_code == 0, applied.output
        diff = sandbox.diff()
    result = Grader(runtime, tmp_path / "grades", timeout_s=120).grade(task, diff)
    assert result.reward == 1.0, result


@pytest.mark.docker
def test_pull_loads_saved_images_and_rebuilds_from_a_clone(validated, demo_repo, docker_client, tmp_path):
    """A dataset published with --save-images brings an image this engine lost; a dataset without
    images is rebuilt from a clone; without either, the task is said to be not runnable."""
    from repo2env.pipeline.stages import folder_builder
    from repo2env.publish.images import image_saver
    from repo2env.publish.pull import pull_dataset
    from repo2env.runtime.backends.docker import DockerBackend
    from repo2env.runtime.images import image_namespace

    folder, _ = validated
    runtime = DockerBackend(docker_client)
    task = next(task for task in read_tasks_of(folder) if task.validation.verdict == "accepted")
    lost_tag = f"{image_namespace()}-pulltest/task:{task.pull_number}"
    image = docker_client.images.get(task.env_spec.image)
    image.tag(lost_tag)
    # The image the tag names now, recorded as the dataset's: another test of the session may have
    # built the demo's tags again since the validated fixture recorded their ids (a pull rightly
    # refuses an image whose id is not the recorded one).
    shipped = task.model_copy(update={"env_spec": task.env_spec.model_copy(update={"image": lost_tag,
                                                                                  "image_digest": image.id})})
    write_jsonl(tmp_path / "tasks" / "tasks.jsonl", [shipped])
    publish_to_folder([tmp_path / "tasks"], tmp_path / "with-images", PublishOptions(),
                      extra_writers=[image_saver(runtime)])
    assert (tmp_path / "with-images" / "images" / "images.tar").stat().st_size > 1_000_000
    docker_client.images.remove(lost_tag)

    pulled = pull_dataset(tmp_path / "with-images", tmp_path / "here", runtime=runtime)
    assert pulled.loaded_images >= 1 and pulled.runnable == 1 and not pulled.not_runnable
    assert docker_client.images.get(lost_tag).id == image.id
    docker_client.images.remove(lost_tag)

    publish_to_folder([tmp_path / "tasks"], tmp_path / "no-images", PublishOptions())
    stranded = pull_dataset(tmp_path / "no-images", tmp_path / "stranded", runtime=runtime)
    assert stranded.runnable == 0 and "no image here" in stranded.not_runnable[task.instance_id]
    rebuilt = pull_dataset(tmp_path / "no-images", tmp_path / "rebuilt", runtime=runtime,
                           clones={task.repo: str(demo_repo.path)}, builder=folder_builder(runtime))
    assert rebuilt.rebuilt == 1 and rebuilt.runnable == 1
    with runtime.start(read_tasks_of(rebuilt.folders[task.repo])[0]) as sandbox:
        assert sandbox.exec("test -f pyproject.toml -o -f setup.py").exit_code == 0


def read_tasks_of(folder):
    from repo2env.jsonl import read_tasks

    return read_tasks(folder / "tasks.jsonl")


def test_a_published_folder_reads_back_its_own_rows_whatever_was_read_before_under_its_name(tasks_folder, tmp_path):
    """datasets caches a local folder under its name alone; load_published reads each folder fresh."""
    from repo2env.dataset_rows import load_published

    first, second = tmp_path / "one" / "envs", tmp_path / "two" / "envs"
    publish_to_folder([tasks_folder], first, PublishOptions())
    write_jsonl(tmp_path / "other" / "tasks.jsonl", [validated_task(10, "2024-01-01T00:00:00Z")])
    publish_to_folder([tmp_path / "other"], second, PublishOptions())
    assert load_published(first)["train"]["instance_id"] == ["acme__widgets-2", "acme__widgets-4"]
    assert load_published(second)["train"]["instance_id"] == ["acme__widgets-10"]


def test_quality_columns_the_card_summary_and_its_figure(tasks_folder, tmp_path):
    from datasets import load_dataset

    from repo2env.instruction import interface_block
    from repo2env.models import QualityReport

    quality = QualityReport(interface=[{"kind": "function", "name": "widgets.core.fold", "signature":
                                        "widgets.core.fold(width: int = ...)", "path": "src/widgets/core.py"}],
                            interface_action="instruction", mutants=4, surviving_mutants=["flip-compare-1"],
                            hunks=3, hunk_drops=3, untested_hunks=[2], adequacy=0.7083, specification=0.75,
                            pass_at_k={1: 0.25, 4: 0.6})
    section = "- function `widgets.core.fold(width: int = ...)` (src/widgets/core.py)"
    with_quality = validated_task(2, "2023-03-01T10:00:00Z")
    with_quality = with_quality.model_copy(update={
        "interface": section, "validation": with_quality.validation.model_copy(update={
            "instance_id": with_quality.instance_id, "quality": quality})})
    folder = tmp_path / "quality-tasks"
    write_jsonl(folder / "tasks.jsonl", [with_quality, validated_task(4, "2024-06-01T10:00:00Z")])
    write_jsonl(folder / "validation.jsonl", [with_quality.validation.record()])

    target = tmp_path / "published"
    publish_to_folder([folder], target, PublishOptions(name="acme/envs"))

    rows = {row["instance_id"]: row for row in load_dataset(str(target), split="train")}
    row, plain = rows["acme__widgets-2"], rows["acme__widgets-4"]
    assert row["interface"] == section and interface_block(section) in row["prompt"][-1]["content"]
    assert row["adequacy"] == 0.7083 and row["specification"] == 0.75
    assert task_from_row(row).validation.quality == quality
    assert plain["interface"] == "" and plain["adequacy"] is None and plain["quality"] == ""
    assert task_from_row(plain).validation.quality is None
    card = (target / "README.md").read_text()
    assert "## Task quality" in card and "1 with an Interface section in the instruction" in card
    assert "| adequacy | 1 | 0.71 |" in card and "![task quality distributions](figures/quality.png)" in card
    assert (target / "figures" / "quality.png").read_bytes().startswith(b"\x89PNG")
    assert verify_manifest(target) == []


def test_publish_and_every_export_select_the_same_tasks(tmp_path):
    """One rule for what leaves repo2env (publish, export swebench, export harbor): built and
    accepted; --include-rejected lets rejected and unvalidated tasks out, never an unbuilt one."""
    from repo2env.publish.harbor import export_harbor
    from repo2env.publish.selection import select_from_folders
    from repo2env.publish.swebench import export_swebench

    folder = tmp_path / "tasks"
    write_jsonl(folder / "tasks.jsonl", [
        validated_task(2, "2023-03-01T10:00:00Z"),
        validated_task(4, "2024-06-01T10:00:00Z", verdict="rejected"),
        validated_task(6, "2024-07-01T10:00:00Z", built=False),  # accepted once, its image since failed
        validated_task(8, "2024-08-01T10:00:00Z", verdict="pending"),
    ])
    chosen = select_from_folders([folder])
    assert [task.instance_id for task in chosen.tasks] == ["acme__widgets-2"]
    assert chosen.left_out == {"rejected": 1, "env_failed": 1, "pending": 1}
    anyway = select_from_folders([folder], include_rejected=True)
    assert [task.instance_id for task in anyway.tasks] == ["acme__widgets-2", "acme__widgets-4", "acme__widgets-8"]

    def exported(path):
        return [json.loads(line)["instance_id"] for line in path.read_text().splitlines()]

    assert export_swebench([folder], tmp_path / "accepted.jsonl") == 1
    assert exported(tmp_path / "accepted.jsonl") == ["acme__widgets-2"]
    export_swebench([folder], tmp_path / "all.jsonl", accepted_only=False)
    assert exported(tmp_path / "all.jsonl") == [task.instance_id for task in anyway.tasks]
    harbor = export_harbor([folder], tmp_path / "harbor", accepted_only=False)
    assert sorted(path.name for path in harbor.root.iterdir()) == [
        task.instance_id for task in anyway.tasks if task.FAIL_TO_PASS]
    summary = publish_to_folder([folder], tmp_path / "ds", PublishOptions(include_rejected=True))
    assert summary.rows == len(anyway.tasks) and summary.left_out == {"env_failed": 1}
