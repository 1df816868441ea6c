"""Settings files (acceptance policies, overrides, pipeline specs): found one way, read one way.

The YAML files under the project's top-level ``validators/`` folder are the editable source; the
package ships them as data (``repo2env/validators`` links to that folder and setuptools copies it
into the wheel), so an installed package and a worker that has only the package find them too.
Every settings file is parsed by :func:`load_yaml_text` (version numbers and dates stay text) and
validated into a pydantic model by :func:`validate_settings`, whose errors name the file and field.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from repo2env.errors import InputError

Model = TypeVar("Model", bound=BaseModel)


def cache_dir() -> Path:
    """Where clones, HTTP caches and the logs of servers and trainers live, whatever folder a command
    starts in: ``$REPO2ENV_CACHE`` or ``~/.cache/repo2env``."""
    return Path(os.environ.get("REPO2ENV_CACHE") or Path.home() / ".cache" / "repo2env")


class _VersionTextLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A safe YAML loader that keeps floats and dates as the text they were written as."""


# YAML 1.1 reads `python-version: 3.10` as the float 3.1, and `date_pin: 2021-03-01` as a date.
_VersionTextLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers
            if tag not in ("tag:yaml.org,2002:float", "tag:yaml.org,2002:timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml_text(text: str) -> Any:
    """Parse YAML safely, keeping version numbers and dates as strings (``3.10`` stays ``"3.10"``).

    Raises ``yaml.YAMLError`` on malformed input.
    """
    return yaml.load(text, Loader=_VersionTextLoader)


def read_yaml_file(path: Path | Traversable, *, what: str = "settings file") -> Any:
    """A YAML file's document; InputError naming the file (and the line) when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise InputError(f"{path}: cannot read the {what} ({reason})") from None
    try:
        return load_yaml_text(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}: not valid YAML{where}") from None


def validate_settings(model: type[Model], document: Any, *, where: str, field_prefix: str = "",
                      lines: Callable[[tuple[Any, ...]], int | None] | None = None) -> Model:
    """``document`` as ``model``; InputError naming ``where`` and each bad field (and, given
    ``lines``, which maps a field's location to its line, the line) otherwise."""
    try:
        return model.model_validate(document if document is not None else {})
    except ValidationError as exc:
        allowed = ", ".join(model.model_fields)
        problems = []
        for error in exc.errors():
            name = ".".join(str(part) for part in (field_prefix, *error["loc"]) if part != "")
            if error["type"] == "extra_forbidden":
                message = f"unknown field (allowed: {allowed})" if len(error["loc"]) == 1 else "unknown field"
            else:
                message = error["msg"].removeprefix("Value error, ")
            line = lines(tuple(error["loc"])) if lines else None
            problems.append(f"{f'line {line}: ' if line else ''}field '{name or '(document)'}': {message}")
        raise InputError(f"{where}: {'; '.join(problems)}") from None


def read_yaml_file_with_lines(path: Path | Traversable, *, what: str = "settings file"
                              ) -> tuple[Any, Callable[[tuple[Any, ...]], int | None]]:
    """:func:`read_yaml_file`, plus a function from a field's location (``("repos", 0, "env")``) to
    the line it is written on (the nearest written parent's line for a missing field)."""
    document = read_yaml_file(path, what=what)
    root = yaml.compose(path.read_text(encoding="utf-8"), Loader=_VersionTextLoader)

    def line_of(location: tuple[Any, ...]) -> int | None:
        node, line = root, (root.start_mark.line + 1 if root is not None else None)
        for part in location:
            if isinstance(node, yaml.MappingNode):
                found = next(((key, value) for key, value in node.value if key.value == str(part)), None)
                if found is None:
                    break
                line, node = found[0].start_mark.line + 1, found[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                break
        return line

    return document, line_of


def packaged_settings(kind: str) -> Traversable:
    """The folder of packaged settings of one kind (``validators``), as shipped with the package."""
    return resources.files("repo2env") / kind


def find_settings_file(kind: str, name_or_path: str | Path, *, what: str) -> Path | Traversable:
    """A settings file by name (``default`` -> ``<kind>/default.yaml`` in the package) or by path."""
    path = Path(name_or_path)
    if path.suffix or path.exists():
        if not path.is_file():
            raise InputError(f"no such file: {path}")
        return path
    packaged = packaged_settings(kind) / f"{name_or_path}.yaml"
    if not packaged.is_file():
        known = ", ".join(sorted(entry.name.removesuffix(".yaml") for entry in packaged_settings(kind).iterdir()
                                 if entry.name.endswith(".yaml"))) or "none"
        raise InputError(f"no {what} {name_or_path}", hint=f"known: {known}; or pass a YAML file path")
    return packaged
