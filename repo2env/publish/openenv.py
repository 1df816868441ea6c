"""``repo2env export openenv``: a published dataset as a deployable OpenEnv environment package.

::

    openenv.yaml        OpenEnv's manifest (a FastAPI space: server.app:app on port 8000)
    pyproject.toml      the project: depends on repo2env-rl[openenv] and openenv-core; ``server`` script
    uv.lock             every dependency pinned (``uv lock`` at export time)
    server/app.py       the entry module: the dataset below served by repo2env's OpenEnv server
    Dockerfile          ``uv sync --frozen`` from the lock, then serves (it drives a Docker engine)
    dataset/            the published dataset, copied as is (its manifest checked first)
    wheels/             repo2env-rl's own wheel, when it is not taken from the package index
    README.md           how to build, run and use it

Where repo2env-rl comes from (the lock pins it either way): a wheel given with ``--wheel``; else,
when this repo2env runs from a source checkout (an editable install, as ``make install`` makes),
a wheel built from that checkout; else (installed from a package index) that exact version from
the index. A vendored wheel is a path source of the project (``[tool.uv.sources]``), so the lock
records its hash and the image installs it from the build context: nobody needs repo2env-rl on an
index to build the package.

The package is written next to itself and renamed into place: complete or absent.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

from repo2env import DISTRIBUTION, __version__
from repo2env.errors import InputError, Repo2EnvError
from repo2env.folders import write_folder
from repo2env.publish.dataset import check_published_tree

PORT = 8000
LOCK_TIMEOUT_S = 600
#: What a source checkout's copy leaves out when its wheel is built (build output, caches, data).
_NOT_SOURCE = ("__pycache__", "*.egg-info", "build", "dist", ".git", ".venv", "generated", ".pytest_cache",
               ".ruff_cache", "tests", "benchmarks")


@dataclass(frozen=True)
class OpenEnvPackage:
    """What an export wrote."""

    root: Path
    tasks: int
    #: Where repo2env-rl comes from: the vendored wheel's name under wheels/, or the index requirement.
    repo2env_source: str


def openenv_yaml(name: str) -> str:
    """OpenEnv's manifest of the package."""
    return f"spec_version: 1\nname: {name}\ntype: space\nruntime: fastapi\napp: server.app:app\nport: {PORT}\n"


def project_name(name: str) -> str:
    """The package's project name (``openenv-<name>``, as OpenEnv's own template names them)."""
    return "openenv-" + (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "repo2env")


def pyproject_toml(name: str, *, wheel: str | None) -> str:
    """The package's project: the server script, its dependencies, the vendored wheel as a source."""
    requirement = f"{DISTRIBUTION}[openenv]=={__version__}"
    sources = (f'\n[tool.uv.sources]\n{DISTRIBUTION} = {{ path = "wheels/{wheel}" }}\n') if wheel else ""
    return f"""[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{project_name(name)}"
version = "{__version__}"
description = "repo2env coding environments ({name}) served over OpenEnv"
requires-python = ">=3.11"
dependencies = [
    "{requirement}",
    "openenv-core>=0.3,<0.4",
]

[project.scripts]
# uv run server (or the image's command): serves dataset/ on 0.0.0.0:8000 (HOST, PORT override).
server = "server.app:main"

[tool.setuptools]
packages = ["server"]
{sources}"""


def server_module() -> str:
    """``server/app.py``: what ``server`` (the project's script) and ``uvicorn server.app:app`` serve."""
    return '''"""The package's dataset served over OpenEnv's protocol by repo2env (see README.md)."""

import os
from pathlib import Path

from repo2env.envs.catalog import TaskCatalog
from repo2env.envs.openenv_server import create_openenv_app

DATASET = Path(os.environ.get("REPO2ENV_DATASET", Path(__file__).resolve().parent.parent / "dataset"))

app = create_openenv_app(TaskCatalog.from_published(DATASET),
                         max_sessions=int(os.environ.get("REPO2ENV_MAX_SESSIONS", "8")))


def main() -> None:
    """Serve on HOST:PORT (default 0.0.0.0:8000)."""
    import uvicorn

    uvicorn.run(app, host=os.environ.get("HOST", "0.0.0.0"), port=int(os.environ.get("PORT", "8000")))


if __name__ == "__main__":
    main()
'''


def dockerfile(uv_version: str) -> str:
    """The image: uv installs the locked dependencies (the vendored wheel from the context), then serves."""
    return f"""# Serves the package's dataset over OpenEnv's protocol. The server starts one sandbox container per
# episode, so run it with the host's Docker socket (see README.md).
ARG BASE_IMAGE=python:3.11-slim
FROM ${{BASE_IMAGE}}
# Behind a proxy or a private index, pass what pip and uv need, e.g. --build-arg UV_INDEX_URL=...
# --build-arg SSL_CERT_FILE=/path/in/the/base/image.crt: build arguments, never the image's environment.
ARG PIP_INDEX_URL
ARG PIP_CERT
ARG SSL_CERT_FILE
ARG UV_INDEX_URL
ARG UV_NATIVE_TLS
ARG UV_VERSION={uv_version}
WORKDIR /app
RUN python3 -m pip install --no-cache-dir "uv==${{UV_VERSION}}"
COPY pyproject.toml uv.lock README.md openenv.yaml /app/
COPY wheels/ /app/wheels/
COPY server/ /app/server/
# The base image's own Python, never a downloaded one.
RUN UV_PYTHON_DOWNLOADS=never uv sync --frozen --no-dev --no-editable --no-cache --compile-bytecode \\
    --python "$(command -v python3)"
COPY dataset/ /app/dataset/
ENV PATH=/app/.venv/bin:$PATH \\
    REPO2ENV_DATASET=/app/dataset
EXPOSE {PORT}
HEALTHCHECK --interval=30s --timeout=3s --start-period=20s --retries=3 \\
    CMD python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:{PORT}/health')"
CMD ["server"]
"""


def readme(name: str, tasks: int, repo2env_source: str) -> str:
    """How to build, run and use the package."""
    return f"""# {name}: repo2env environments for OpenEnv

{tasks} coding tasks mined from merged pull requests by repo2env {__version__}, served over OpenEnv's
protocol (HTTP `/reset` `/step` `/state` `/health` `/schema` `/metadata`, WebSocket `/ws`, MCP at `/mcp`).
repo2env comes from: {repo2env_source} (pinned in `uv.lock` with every other dependency).

## Requirements: a Docker engine

The server runs every episode in its own sandbox container and grades in another, so it needs a
Docker engine and the tasks' images on that engine (`repo2env pull` loads them from a dataset
published with `--save-images`, or rebuilds them).

```
openenv validate .                             # the package is complete
uv sync --frozen && uv run server              # serve from here (http://0.0.0.0:{PORT})
docker build -t {name} .                       # --build-arg BASE_IMAGE=... without Docker Hub
docker run -p {PORT}:{PORT} -v /var/run/docker.sock:/var/run/docker.sock {name}
```

Settings: `HOST`, `PORT`, `REPO2ENV_MAX_SESSIONS` (concurrent WebSocket sessions), `REPO2ENV_ENV_*`
(tool and grading time limits, reward mode, where grading logs go; see repo2env's documentation).

## Protocol: the tools are MCP tools

- reset: `{{"task_id": "<instance_id>"}}` (or `seed`, or nothing: the next task in turn) -> the
  instruction as the observation's `output` (`error` true and `done` when the reset failed).
- step: an MCP tool call, `{{"type": "call_tool", "tool_name": "bash", "arguments": {{"command": "ls"}}}}`;
  tools `bash`, `read_file`, `write_file`, `str_replace`, `run_tests` and `submit`, which grades with
  the hidden tests -> `reward`, `done`. `{{"type": "list_tools"}}` lists them with their schemas.
- A refused call (a path outside /testbed, say) is an MCP tool error, as MCP reports a tool's own
  failures: `result.is_error` true and `result.data` the reason (`error: ...`), the observation's
  `error` null, the episode goes on (`MCPToolClient.call_tool` returns the reason). A call that
  cannot be made (unknown tool, wrong arguments, no episode) sets the observation's `error`
  (`{{"error_type": ..., "message": ...}}`; `MCPToolClient.call_tool` raises it).

`MCPToolClient` keeps none of the reset observation's fields (OpenEnv sends an observation's
`metadata` nowhere, and that client reads nothing else): it is the client for the tools.

```python
from openenv.core.mcp_client import MCPToolClient

# submit grades with the hidden tests in a fresh sandbox: allow it more than the client's default 60 s
with MCPToolClient(base_url="http://localhost:{PORT}", message_timeout_s=600).sync() as env:
    env.reset(task_id="<instance_id>")
    print([tool.name for tool in env.list_tools()])
    print(env.call_tool("bash", command="git status"))
    print(env.call_tool("read_file", path="/etc/passwd"))  # refused: "error: ..."
    print(env.call_tool("submit")["reward"])
```

The instruction is the reset's `output` for `GenericEnvClient` (plain dicts, one episode per
connection as well), or the `prompt` of the task's row in `dataset/`:

```python
from openenv.core import GenericEnvClient

with GenericEnvClient(base_url="http://localhost:{PORT}", message_timeout_s=600).sync() as env:
    print(env.reset(task_id="<instance_id>").observation["output"])
    step = env.step({{"type": "call_tool", "tool_name": "bash", "arguments": {{"command": "git status"}}}})
    print(step.observation["result"]["data"])
    step = env.step({{"type": "call_tool", "tool_name": "submit", "arguments": {{}}}})
    print(step.reward, step.done)
```
"""


def export_openenv(dataset: Path, out_dir: Path, *, name: str = "repo2env", wheels: Sequence[Path] = (),
                   overwrite: bool = False) -> OpenEnvPackage:
    """Write the OpenEnv package serving the published ``dataset`` to ``out_dir`` (see the module's
    docstring for where repo2env-rl comes from); ``uv lock`` needs the package index."""
    dataset, out_dir = Path(dataset).absolute(), Path(out_dir).absolute()
    tasks = int(check_published_tree(dataset).get("tasks", 0))
    uv = _uv_binary()

    def build(root: Path) -> OpenEnvPackage:
        (root / "server").mkdir()
        (root / "wheels").mkdir()
        for wheel in wheels:
            shutil.copy2(wheel, root / "wheels" / Path(wheel).name)
        vendored = _own_wheel(root / "wheels", given=[Path(wheel) for wheel in wheels])
        source = f"wheels/{vendored}" if vendored else f"{DISTRIBUTION}=={__version__} from the package index"
        (root / "wheels" / ".keep").write_text("")  # COPY needs the folder even with no wheel
        (root / "openenv.yaml").write_text(openenv_yaml(name))
        (root / "pyproject.toml").write_text(pyproject_toml(name, wheel=vendored))
        (root / "server" / "__init__.py").write_text("")
        (root / "server" / "app.py").write_text(server_module())
        (root / "Dockerfile").write_text(dockerfile(_uv_version(uv)))
        (root / "README.md").write_text(readme(name, tasks, source))
        (root / ".dockerignore").write_text("**/__pycache__\n.venv\n")
        shutil.copytree(dataset, root / "dataset")
        _lock(uv, root)
        return OpenEnvPackage(root=out_dir, tasks=tasks, repo2env_source=source)

    return write_folder(out_dir, build, overwrite=overwrite)


def _own_wheel(wheels: Path, *, given: Sequence[Path]) -> str | None:
    """The file name of repo2env-rl's wheel in ``wheels`` (given, or built from this installation's
    source checkout), or None when this installation came from a package index."""
    prefix = DISTRIBUTION.replace("-", "_") + "-"
    for wheel in given:
        if wheel.name.startswith(prefix) and wheel.suffix == ".whl":
            return wheel.name
    source = _source_checkout()
    if source is None:
        return None
    return _build_wheel(source, wheels).name


def _source_checkout() -> Path | None:
    """The source checkout this repo2env runs from (an editable or local-folder install, or none at
    all), or None when it was installed from a package index or a wheel."""
    try:
        direct_url = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:  # running from a checkout that was never installed
        candidate = Path(__file__).resolve().parents[2]
        return candidate if (candidate / "pyproject.toml").is_file() else None
    if not direct_url:
        return None
    record = json.loads(direct_url)
    if "dir_info" not in record:
        return None
    folder = Path(unquote(urlparse(record["url"]).path))
    return folder if (folder / "pyproject.toml").is_file() else None


def _build_wheel(source: Path, into: Path) -> Path:
    """A wheel of the checkout at ``source``, built in a copy of it (the checkout gets no build/ or
    egg-info), into the folder ``into``."""
    import importlib.util

    with tempfile.TemporaryDirectory(prefix="repo2env-wheel-") as scratch:
        copy = Path(scratch) / "source"
        shutil.copytree(source, copy, symlinks=True, ignore=shutil.ignore_patterns(*_NOT_SOURCE))
        command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", scratch, str(copy)]
        if importlib.util.find_spec("setuptools") and importlib.util.find_spec("wheel"):
            # This environment has the build backend: no isolated build environment to download.
            command.insert(4, "--no-build-isolation")
        built = subprocess.run(command, capture_output=True, text=True, timeout=LOCK_TIMEOUT_S)
        wheels = sorted(Path(scratch).glob(DISTRIBUTION.replace("-", "_") + "-*.whl"))
        if built.returncode != 0 or not wheels:
            raise Repo2EnvError(f"building repo2env's wheel from {source} failed: {_tail(built.stderr)}",
                                hint="build it yourself (pip wheel --no-deps .) and pass it with --wheel")
        return Path(shutil.copy2(wheels[-1], into / wheels[-1].name))


def _uv_binary() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        found = shutil.which("uv")
        if found is None:
            raise InputError("exporting an OpenEnv package needs uv (it writes uv.lock)",
                             hint="pip install 'repo2env-rl[openenv]' (it brings uv), or pip install uv") from None
        return found
    return find_uv_bin()


def _uv_version(uv: str) -> str:
    answer = subprocess.run([uv, "--version"], capture_output=True, text=True, timeout=60)
    match = re.search(r"\d+\.\d+\.\d+", answer.stdout)
    if answer.returncode != 0 or match is None:
        raise Repo2EnvError(f"{uv} --version failed: {_tail(answer.stderr)}")
    return match.group(0)


def _lock(uv: str, root: Path) -> None:
    """``uv lock`` in the package: every dependency resolved and pinned, with hashes."""
    locked = subprocess.run([uv, "lock", "--no-progress", "--directory", str(root)], capture_output=True, text=True,
                            timeout=LOCK_TIMEOUT_S)
    if locked.returncode != 0:
        raise Repo2EnvError(f"uv lock failed: {_tail(locked.stderr)}",
                            hint="uv needs the package index (UV_INDEX_URL, SSL_CERT_FILE behind a proxy); a "
                                 f"{DISTRIBUTION} not on the index needs --wheel")


def _tail(text: str) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return " / ".join(lines[-3:])[-500:] or "no output"
