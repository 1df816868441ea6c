"""Node.js base images (``repo2env/base:node<MAJOR>``): a Node layer on the Python base image.

A JavaScript environment needs what a Python one needs from its base (the unprivileged ``agent``
user, ``/testbed``, git, the host's CA bundle, and the system ``python3`` that the sandbox's
keepalive and command channel run under), plus Node and npm. So a Node base image is the Python
base image of the same Debian release with one layer on top, rather than a second debootstrap:
the guarantees stay defined once (:mod:`repo2env.runtime.bootstrap`), and the layer costs only
what Node adds. Two sources of Node:

- Debian's ``nodejs`` and ``npm`` packages: bullseye gives Node 12 (on the Python 3.9 base),
  bookworm Node 18 (3.11), trixie Node 20 (3.13);
- a local Node prefix (``<prefix>/bin/node`` and ``<prefix>/lib/node_modules/npm``: the host's
  own Node, nvm's or volta's installs, a path the user gives), copied onto the bookworm base. Node's
  official Linux builds link only against glibc and libstdc++, which bookworm has.

Containers reach the npm registry only with the host's CA bundle: the image sets
``NODE_EXTRA_CA_CERTS`` to the bundle the Python base already carries (pip's ``PIP_CERT`` for Node).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from repo2env import __version__
from repo2env.errors import BuildError, InputError
from repo2env.runtime.backend import Backend, ImageInfo
from repo2env.runtime.bootstrap import BASE_REPOSITORY, DEFAULT_MIRROR, ensure_base_image
from repo2env.runtime.package_access import CONTAINER_CA_PATH, PackageAccess

#: Node major -> (Debian release, the Python of that release's base image) for Debian's nodejs.
DEBIAN_NODE = {"12": ("bullseye", "3.9"), "18": ("bookworm", "3.11"), "20": ("trixie", "3.13")}
#: The Python base a local Node prefix is copied onto (bookworm's glibc runs Node's official builds).
LOCAL_NODE_PYTHON = "3.11"
#: Where a local Node prefix is copied inside the image.
LOCAL_NODE_ROOT = "/opt/node"
_LOCK_PATH = Path(tempfile.gettempdir()) / "repo2env-node-bootstrap.lock"
#: Places a local Node may be found when the user names none (nvm's and volta's layouts included).
_NODE_SEARCH = ("/usr/local", "/usr", "~/.nvm/versions/node/*", "~/.volta/tools/image/node/*", "/opt/node*")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class LocalNode:
    """A Node installation on this machine that can be copied into an image."""

    prefix: Path
    version: str  # "20.20.2"

    @property
    def major(self) -> str:
        """``"20.20.2"`` -> ``"20"``."""
        return self.version.split(".")[0]


@dataclass(frozen=True)
class NodeBaseImage:
    """A finished Node base image and how it came to be."""

    tag: str
    image_id: str
    node: str  # the major, "18"
    python_base: str  # the Python base image it is layered on
    origin: str  # "existing", "debian" or "local:<prefix>"


def node_base_image_tag(node: str) -> str:
    """``18`` -> ``repo2env/base:node18``."""
    return f"{BASE_REPOSITORY}:node{node}"


def local_base_nodes(backend: Backend) -> tuple[str, ...]:
    """The Node majors that have a finished base image on this backend, oldest first."""
    found = {tag.removeprefix(f"{BASE_REPOSITORY}:node") for image in backend.images.list(repository=BASE_REPOSITORY)
             for tag in image.tags if tag.startswith(f"{BASE_REPOSITORY}:node")}
    return tuple(sorted((node for node in found if node.isdigit()), key=int))


def local_node_prefix(prefix: str | Path) -> LocalNode | None:
    """The Node at ``prefix`` (with ``bin/node`` and ``lib/node_modules/npm``), or None."""
    prefix = Path(prefix).expanduser()
    node, npm = prefix / "bin" / "node", prefix / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if not (node.is_file() and os.access(node, os.X_OK) and npm.is_file()):
        return None
    try:
        printed = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.fullmatch(r"v(\d+\.\d+\.\d+)\s*", printed)
    return LocalNode(prefix=prefix, version=match.group(1)) if match else None


def local_node_prefixes(places: Iterable[str] = _NODE_SEARCH) -> list[LocalNode]:
    """Every usable local Node in ``places`` (globs; ``~`` expanded), newest version of a major first."""
    found: dict[str, LocalNode] = {}
    for place in places:
        expanded = Path(place).expanduser()
        candidates = sorted(expanded.parent.glob(expanded.name)) if "*" in expanded.name else [expanded]
        for candidate in candidates:
            node = local_node_prefix(candidate)
            if node is None:
                continue
            known = found.get(node.major)
            if known is None or _version_key(node.version) > _version_key(known.version):
                found[node.major] = node
    return sorted(found.values(), key=lambda node: _version_key(node.version))


def node_source(node: str, prefixes: Iterable[str | Path] = ()) -> LocalNode | None:
    """Where Node ``node`` comes from: a given prefix of that major first; else None (Debian's
    package) when a Debian release ships it; else a local Node of that major found on this machine.
    An InputError when a given prefix is not a Node installation."""
    given = []
    for prefix in prefixes:
        found = local_node_prefix(prefix)
        if found is None:
            raise InputError(f"{prefix} is not a Node installation (no bin/node and lib/node_modules/npm)")
        given.append(found)
    for found in given:
        if found.major == node:
            return found
    if node in DEBIAN_NODE:
        return None
    return next((found for found in local_node_prefixes() if found.major == node), None)


def available_node_majors(local: Iterable[LocalNode] = ()) -> tuple[str, ...]:
    """Node majors a base image can be made for here: Debian's and the local prefixes', oldest first."""
    return tuple(sorted(set(DEBIAN_NODE) | {node.major for node in local}, key=int))


def ensure_node_base_image(
    backend: Backend,
    node: str = "18",
    *,
    local: LocalNode | None = None,
    access: PackageAccess | None = None,
    mirror: str = DEFAULT_MIRROR,
    force: bool = False,
    tag: str | None = None,
    progress: Progress = lambda message: None,
) -> NodeBaseImage:
    """Return ``repo2env/base:node<node>``, building it first if it is missing (or ``force``).

    ``local`` (a :class:`LocalNode` of that major) is copied in; otherwise Debian's ``nodejs``
    of the release that ships that major is installed. The Python base image it needs is made
    first if it is missing (:func:`~repo2env.runtime.bootstrap.ensure_base_image`). ``tag``
    replaces :func:`node_base_image_tag`'s (for tests)."""
    if local is not None and local.major != node:
        raise InputError(f"the local Node at {local.prefix} is {local.version}, not Node {node}")
    if local is None and node not in DEBIAN_NODE:
        known = ", ".join(sorted(DEBIAN_NODE, key=int))
        raise InputError(f"no Debian release ships Node {node}",
                         hint=f"give a local Node {node} prefix (--node-prefix), or choose one of {known}")
    access = access or PackageAccess.from_environment()
    tag = tag or node_base_image_tag(node)
    _LOCK_PATH.touch(exist_ok=True)
    with _LOCK_PATH.open() as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        existing = None if force else backend.images.get(tag)
        if existing is not None:
            return NodeBaseImage(tag=tag, image_id=existing.id, node=node,
                                 python_base=existing.labels.get("repo2env.python_base", ""), origin="existing")
        python = LOCAL_NODE_PYTHON if local is not None else DEBIAN_NODE[node][1]
        python_base = ensure_base_image(backend, python, access=access, mirror=mirror, progress=progress)
        origin = f"local:{local.prefix}" if local is not None else "debian"
        progress(f"layering Node {node} ({origin}) on {python_base.tag}")
        image = _build_node_layer(backend, tag, python_base.tag, node, local=local, access=access, origin=origin)
        return NodeBaseImage(tag=tag, image_id=image.id, node=node, python_base=python_base.tag, origin=origin)


_NODE_DOCKERFILE = """\
FROM {python_base}
{install}
{ca_env}ENV npm_config_update_notifier=false \\
    npm_config_fund=false \\
    npm_config_audit=false
RUN node --version && npm --version
"""

_DEBIAN_INSTALL = """\
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm \\
 && rm -rf /var/lib/apt/lists/* /usr/share/doc /usr/share/man"""

_LOCAL_INSTALL = """\
COPY node {root}
RUN ln -s {root}/bin/node /usr/local/bin/node \\
 && ln -s {root}/lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
 && ln -s {root}/lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx"""


def _build_node_layer(backend: Backend, tag: str, python_base: str, node: str, *,
                      local: LocalNode | None, access: PackageAccess, origin: str) -> ImageInfo:
    with tempfile.TemporaryDirectory(prefix="repo2env-node-base-") as context:
        context_path = Path(context)
        if local is not None:
            # Only Node and its bundled package managers: a prefix like /usr holds much else.
            (context_path / "node" / "bin").mkdir(parents=True)
            shutil.copy2(local.prefix / "bin" / "node", context_path / "node" / "bin" / "node")
            for tool in ("npm", "corepack"):
                if (local.prefix / "lib" / "node_modules" / tool).is_dir():
                    shutil.copytree(local.prefix / "lib" / "node_modules" / tool,
                                    context_path / "node" / "lib" / "node_modules" / tool, symlinks=True)
            install = _LOCAL_INSTALL.format(root=LOCAL_NODE_ROOT)
        else:
            install = _DEBIAN_INSTALL
        # The Python base carries the host's bundle at CONTAINER_CA_PATH when there is one.
        ca_env = f"ENV NODE_EXTRA_CA_CERTS={CONTAINER_CA_PATH}\n" if access.ca_bundle is not None else ""
        (context_path / "Dockerfile").write_text(
            _NODE_DOCKERFILE.format(python_base=python_base, install=install, ca_env=ca_env))
        labels = {"repo2env.kind": "base", "repo2env.node": node, "repo2env.node_origin": origin,
                  "repo2env.python_base": python_base, "repo2env.version": __version__}
        outcome = backend.images.build(context_path, tag, labels=labels)
        if outcome.error:
            log_path = Path(tempfile.gettempdir()) / f"repo2env-base-node{node}.log"
            log_path.write_text("\n".join(outcome.log) + "\n")
            raise BuildError(f"building the Node {node} base image failed: {outcome.error.strip()[:200]}",
                             hint=f"see {log_path}; is the Debian mirror reachable?", log_path=str(log_path))
    image = backend.images.get(tag)
    if image is None:
        raise BuildError(f"building the Node {node} base image ended without {tag}")
    return image


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
