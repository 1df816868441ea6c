"""Node base images: where Node comes from (Debian's package or a local prefix) and what the image holds."""

from __future__ import annotations

import os
import stat

import pytest

from repo2env.errors import InputError
from repo2env.runtime.node_bootstrap import (
    DEBIAN_NODE,
    LocalNode,
    available_node_majors,
    ensure_node_base_image,
    local_node_prefix,
    local_node_prefixes,
    node_base_image_tag,
    node_source,
)


def _prefix(root, version: str):
    """A Node installation's layout whose bin/node prints ``version`` (as `node --version` does)."""
    (root / "bin").mkdir(parents=True)
    node = root / "bin" / "node"
    node.write_text(f"#!/bin/sh\necho v{version}\n")
    node.chmod(node.stat().st_mode | stat.S_IXUSR)
    (root / "lib" / "node_modules" / "npm" / "bin").mkdir(parents=True)
    (root / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js").write_text("")
    return root


def test_a_local_prefix_is_recognised_by_what_its_node_prints(tmp_path):
    found = local_node_prefix(_prefix(tmp_path / "node-21", "21.7.3"))
    assert found == LocalNode(prefix=tmp_path / "node-21", version="21.7.3") and found.major == "21"
    assert local_node_prefix(tmp_path / "missing") is None
    assert local_node_prefix(_prefix(tmp_path / "liar", "not a version")) is None
    nodes = local_node_prefixes([str(tmp_path / "node-*"), str(tmp_path / "nothing")])
    assert [node.version for node in nodes] == ["21.7.3"]
    assert available_node_majors(nodes) == ("12", "18", "20", "21")


def test_the_source_of_a_node_major(tmp_path):
    given = _prefix(tmp_path / "n18", "18.20.1")
    assert node_source("18", [given]) == LocalNode(given, "18.20.1")  # a given prefix of that major wins
    assert node_source("18") is None  # else Debian's package
    with pytest.raises(InputError):
        node_source("18", [tmp_path / "not-node"])
    assert node_base_image_tag("18") == "repo2env/base:node18" and set(DEBIAN_NODE) == {"12", "18", "20"}


@pytest.mark.docker
@pytest.mark.slow
def test_a_local_node_is_copied_onto_the_bookworm_base(docker_runtime):
    nodes = local_node_prefixes()
    if not nodes:
        pytest.skip("no local Node installation on this machine")
    node = nodes[-1]
    namespace = os.environ.get("REPO2ENV_IMAGE_NAMESPACE", "repo2env").replace("/", "-")
    tag = f"{namespace}-node-local-test:{node.major}"
    try:
        image = ensure_node_base_image(docker_runtime, node.major, local=node, tag=tag, force=True)
        assert image.origin == f"local:{node.prefix}" and image.python_base == "repo2env/base:py3.11"
        with docker_runtime.start_image(tag) as sandbox:
            output = sandbox.exec("node --version; npm --version; id -u; echo $NODE_EXTRA_CA_CERTS").output.split()
        assert output[0] == f"v{node.version}" and output[1][0].isdigit() and output[2] == "1000"
    finally:
        docker_runtime.images.remove(tag, force=True)
