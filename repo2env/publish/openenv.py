"""``repo2env export openenv``: a published dataset as a deployable OpenEnv package.

::

    openenv.yaml        OpenEnv's manifest (a FastAPI space: server.app:app on port 8000)
    server/app.py       the entry module: the dataset below served by repo2env's OpenEnv server
    Dockerfile          installs repo2env[openenv] (from wheels/ first, then the index) and serves
    dataset/            the published dataset, copied as is (its manifest checked first)
    wheels/             wheels the image installs from (e.g. repo2env's own build)
    README.md           how to build and run it; the server drives a Docker engine

The package is written next to itself and renamed into place: complete or absent.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from repo2env import __version__
from repo2env.errors import InputError
from repo2env.publish.dataset import check_published_tree

PORT = 8000


@dataclass(frozen=True)
class OpenEnvPackage:
    """What an export wrote."""

    root: Path
    tasks: int


def openenv_yaml(name: str) -> str:
    """OpenEnv's manifest of the package."""
    return (f"spec_version: 1\nname: {name}\ntype: space\nruntime: fastapi\napp: server.app:app\nport: {PORT}\n")


def server_module() -> str:
    """``server/app.py``: what ``uvicorn server.app:app`` (the Dockerfile's command) serves."""
    return '''"""The package's dataset served over OpenEnv's protocol by repo2env (see README.md)."""

import os
from pathlib import Path

from repo2env.envs.catalog import TaskCatalog
from repo2env.envs.openenv_server import create_openenv_app

DATASET = Path(os.environ.get("REPO2ENV_DATASET", Path(__file__).resolve().parent.parent / "dataset"))

app = create_openenv_app(TaskCatalog.from_published(DATASET),
                         max_sessions=int(os.environ.get("REPO2ENV_MAX_SESSIONS", "8")))


def main(host: str = "0.0.0.0", port: int = 8000) -> None:
    import uvicorn

    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    main()
'''


def dockerfile() -> str:
    """The image: Python, repo2env[openenv] (wheels/ preferred over the index), the package, uvicorn."""
    return f"""# Serves the package's dataset over OpenEnv's protocol. The server starts one sandbox container per
# episode, so run it with the host's Docker socket (see README.md).
ARG BASE_IMAGE=python:3.11-slim
FROM ${{BASE_IMAGE}}
ARG REPO2ENV_REQUIREMENT="repo2env[openenv]=={__version__}"
WORKDIR /app
COPY wheels/ /app/wheels/
RUN python3 -m pip install --no-cache-dir --find-links /app/wheels "$REPO2ENV_REQUIREMENT"
COPY openenv.yaml README.md /app/
COPY server/ /app/server/
COPY dataset/ /app/dataset/
ENV REPO2ENV_DATASET=/app/dataset
EXPOSE {PORT}
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \\
    CMD python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:{PORT}/health')"
CMD ["python3", "-m", "uvicorn", "server.app:app", "--host", "0.0.0.0", "--port", "{PORT}"]
"""


def readme(name: str, tasks: int) -> str:
    """How to build, run and use the package."""
    return f"""# {name}: repo2env environments for OpenEnv

{tasks} coding tasks mined from merged pull requests by repo2env {__version__}, served over OpenEnv's
protocol (HTTP `/reset` `/step` `/state` `/health` `/schema`, WebSocket `/ws`).

## Requirements: a Docker engine

The server runs every episode in its own sandbox container and grades in another, so it needs a
Docker engine and the tasks' images on that engine (`repo2env pull` loads them from a dataset
published with `--save-images`, or rebuilds them). In a container, give it the host's socket:

```
docker build -t {name} .                       # --build-arg BASE_IMAGE=... without Docker Hub
docker run -p {PORT}:{PORT} -v /var/run/docker.sock:/var/run/docker.sock {name}
```

Without a registry that has repo2env, put its wheel in `wheels/` (`repo2env export openenv --wheel`).
Settings: `REPO2ENV_MAX_SESSIONS` (concurrent WebSocket sessions), `REPO2ENV_ENV_*` (tool and grading
time limits, reward mode; see repo2env's README).

## Protocol

- reset: `{{"task_id": "<instance_id>"}}` (or `seed`, or nothing: the next task in turn) -> the instruction.
- step: `{{"tool": "bash", "arguments": {{"command": "ls"}}}}`; tools `bash`, `read_file`, `write_file`,
  `str_replace`, `run_tests`; `{{"tool": "submit"}}` grades with the hidden tests -> `reward`, `done`.
- Episodes live on a WebSocket session (OpenEnv's `EnvClient`); each HTTP request gets a fresh environment.

```python
from openenv.core import GenericEnvClient

with GenericEnvClient(base_url="http://localhost:{PORT}").sync() as env:
    print(env.reset(task_id="<instance_id>").observation["output"])
    env.step({{"tool": "bash", "arguments": {{"command": "git status"}}}})
    print(env.step({{"tool": "submit"}}).reward)
```
"""


def export_openenv(dataset: Path, out_dir: Path, *, name: str = "repo2env", wheels: Sequence[Path] = (),
                   overwrite: bool = False) -> OpenEnvPackage:
    """Write the OpenEnv package serving the published ``dataset`` to ``out_dir``."""
    dataset, out_dir = Path(dataset).absolute(), Path(out_dir).absolute()
    tasks = int(check_published_tree(dataset).get("tasks", 0))
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())) and not overwrite:
        raise InputError(f"{out_dir} exists and is not empty", hint="choose another folder, or pass --overwrite")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    try:
        root = staging / "package"
        (root / "server").mkdir(parents=True)
        (root / "wheels").mkdir()
        (root / "openenv.yaml").write_text(openenv_yaml(name))
        (root / "server" / "__init__.py").write_text("")
        (root / "server" / "app.py").write_text(server_module())
        (root / "Dockerfile").write_text(dockerfile())
        (root / "README.md").write_text(readme(name, tasks))
        (root / ".dockerignore").write_text("**/__pycache__\n")
        shutil.copytree(dataset, root / "dataset")
        for wheel in wheels:
            shutil.copy2(wheel, root / "wheels" / Path(wheel).name)
        (root / "wheels" / ".keep").write_text("")  # COPY needs the folder even with no wheel
        if out_dir.exists():
            os.replace(out_dir, staging / "previous")  # removed with the staging folder
        os.replace(root, out_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return OpenEnvPackage(root=out_dir, tasks=tasks)
