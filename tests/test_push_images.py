"""`repo2env publish --push-images REGISTRY` against a real registry (the distribution registry's
binary, Debian's docker-registry, started here on 127.0.0.1), and `repo2env pull` pulling it back."""

from __future__ import annotations

import io
import json
import sys
import tarfile
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

from repo2env.errors import InputError, Repo2EnvError
from repo2env.jsonl import write_jsonl
from repo2env.publish.dataset import PublishOptions, publish_to_folder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_publish import validated_task  # noqa: E402 - the publish tests' task rows

pytestmark = pytest.mark.docker


@pytest.fixture
def small_image(docker_client):
    """A task image of a few bytes (one file), so the push is quick: its tag and id."""
    from repo2env.runtime.images import image_namespace

    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w") as tar:
        content = f"pushed at {time.time()}\n".encode()
        info = tarfile.TarInfo("etc/repo2env-push-test")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    repository, tag = f"{image_namespace()}-pushtest/task", "acme__widgets-4"
    docker_client.api.import_image_from_data(payload.getvalue(), repository=repository, tag=tag)
    image = docker_client.images.get(f"{repository}:{tag}")
    yield f"{repository}:{tag}", image.id
    docker_client.images.remove(image.id, force=True)


def test_push_records_the_reference_and_pull_uses_it(local_registry, small_image, docker_client, tmp_path):
    import pyarrow.parquet as pq

    from repo2env.publish.pull import pull_dataset
    from repo2env.runtime.backends.docker import DockerBackend

    image, image_id = small_image
    task = validated_task(4, "2024-06-01T10:00:00Z")
    task = task.model_copy(update={"env_spec": task.env_spec.model_copy(update={"image": image, "image_digest": image_id})})
    write_jsonl(tmp_path / "tasks" / "tasks.jsonl", [task])
    registry = f"{local_registry}/envs"
    publish_to_folder([tmp_path / "tasks"], tmp_path / "ds", PublishOptions(name="acme/envs", push_registry=registry),
                      images=DockerBackend(docker_client))

    # Read with pyarrow, not datasets.load_dataset: its cache is keyed on the folder, not the content.
    row = pq.read_table(tmp_path / "ds" / "data" / "train-00000-of-00001.parquet").to_pylist()[0]
    pushed = row["pushed_image"]
    assert pushed.startswith(f"{registry}/task@sha256:") and json.loads(row["env_spec"])["pushed_image"] == pushed
    assert row["image"] == image and row["image_digest"] == image_id, "the local tag and id stay recorded"
    harbor = tmp_path / "ds" / "tasks" / task.instance_id
    assert tomllib.loads((harbor / "task.toml").read_text())["environment"]["docker_image"] == pushed
    assert f"FROM {pushed}" in (harbor / "environment" / "Dockerfile").read_text()
    # The registry holds it under the digest the row records.
    request = urllib.request.Request(f"http://{local_registry}/v2/envs/task/manifests/acme__widgets-4", headers={
        "Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.headers["Docker-Content-Digest"] == pushed.split("@", 1)[1]
    assert not any(tag.startswith(local_registry) for tag in docker_client.images.get(image_id).tags)

    docker_client.images.remove(image_id, force=True)  # this engine loses the image
    pulled = pull_dataset(tmp_path / "ds", tmp_path / "here", runtime=DockerBackend(docker_client))
    assert (pulled.pulled, pulled.runnable, pulled.not_runnable) == (1, 1, {})
    assert docker_client.images.get(image).id == image_id, "the very image that was published"


def test_bad_and_unreachable_registries_are_one_line_errors(small_image, docker_client, tmp_path):
    from repo2env.runtime.backends.docker import DockerBackend

    backend = DockerBackend(docker_client)
    image, image_id = small_image
    task = validated_task(4, "2024-06-01T10:00:00Z")
    task = task.model_copy(update={"env_spec": task.env_spec.model_copy(update={"image": image, "image_digest": image_id})})
    write_jsonl(tmp_path / "tasks" / "tasks.jsonl", [task])
    with pytest.raises(InputError, match="not a registry address"):
        publish_to_folder([tmp_path / "tasks"], tmp_path / "ds", PublishOptions(push_registry="http://127.0.0.1:5000"),
                          images=backend)
    with pytest.raises(Repo2EnvError, match="pushing .* failed") as failure:
        publish_to_folder([tmp_path / "tasks"], tmp_path / "ds", PublishOptions(push_registry="127.0.0.1:9"),
                          images=backend)
    assert "\n" not in failure.value.message and not (tmp_path / "ds").exists()
