"""The packages a PR adds to the dependencies it installs, read from its patches.

A merged PR often adds a dependency together with the fix (a babel plugin to devDependencies and to
the babel configuration). The environment is installed at the base commit, and the sandbox has no
network, so neither the reference solution nor an agent's fix could load it: the build installs
these packages too (:func:`dependencies_added`), as SWE-bench-style harnesses build the environment
with what the reference solution needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from repo2env.errors import PatchError
from repo2env.languages.javascript.environment import workspace_packages
from repo2env.languages.javascript.project import ProjectFiles, dependencies, join
from repo2env.patches import parse_readable, patched_text

#: A package name as the npm registry takes it (old packages may have capitals); nothing a command
#: line could read as an option.
_PACKAGE_NAME = re.compile(r"(?:@[A-Za-z0-9~][\w.~-]*/)?[A-Za-z0-9~][\w.~-]*")
#: Ranges that do not come from the registry: local folders, workspace links, git hosts, tarball URLs
#: (``owner/repo`` is GitHub's shorthand).
_NOT_FROM_THE_REGISTRY = re.compile(
    r"^(?:file:|link:|portal:|workspace:|patch:|exec:|git[+:]|github:|gitlab:|bitbucket:|gist:|https?:|ssh:|\.{0,2}/|~/)"
    r"|^[\w.-]+/[\w.-]+(?:#.*)?$")


def dependencies_added(files: ProjectFiles | Mapping[str, str], patches: Sequence[str],
                       package_dir: str = "") -> dict[str, str]:
    """The registry packages the PR's ``patches`` (the gold patch, then the test patch) add to a
    package.json of the install, or whose range they change, name -> the PR's range, by name.

    The package.json files of the install are the root's and, for a monorepo, the workspace
    package's at ``package_dir``; each is patched as text (the hunks applied to the base commit's
    file) and both versions are read as JSON, so a moved or reformatted line is no change. Every
    dependency section counts (dependencies, devDependencies, optionalDependencies,
    peerDependencies); a package the PR removes, the project's own packages, and ranges that do not
    name a registry version (``file:``, ``workspace:``, git URLs) are left out. A patch that does not
    parse or apply, or a package.json that is not a JSON object after it, adds nothing."""
    files = ProjectFiles.of(files)
    parsed = parse_readable(patches)
    own = {name for folder in ["", *workspace_packages(files)]
           if isinstance(name := files.package_json(folder).get("name"), str)}
    added: dict[str, str] = {}
    for path in dict.fromkeys(["package.json", join(package_dir, "package.json")]):
        before = files.read(path)
        try:
            after = patched_text(files.read, path, parsed)
        except PatchError:
            continue
        if after == before:
            continue
        old, new = _declared(before), _declared(after)
        added |= {name: version for name, version in new.items()
                  if old.get(name) != version and name not in own and _from_the_registry(name, version)}
    return dict(sorted(added.items()))


def _declared(text: str | None) -> dict[str, str]:
    """Every dependency of a package.json's text (its dev, optional and peer ones too); none when
    the text is absent or not a JSON object."""
    try:
        package: Any = json.loads(text) if text is not None else {}
    except ValueError:
        return {}
    return dependencies(package) if isinstance(package, dict) else {}


def _from_the_registry(name: str, version: str) -> bool:
    return (_PACKAGE_NAME.fullmatch(name) is not None and not version.strip().startswith("-")
            and _NOT_FROM_THE_REGISTRY.search(version.strip()) is None)
