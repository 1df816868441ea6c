"""Per-repository corrections to the inferred environment, read from YAML.

Inference gets most repositories right; the rest get an override. Two shapes are accepted, the
second being the one batch specs in ``pipelines/*.yaml`` use, so a pipeline file can be passed as is
(its other top-level keys are ignored)::

    repos:
      pallets/click: {python: "3.9", extra_install: ["python -m pip install 'setuptools<58'"]}

    repos:
      - repo: pallets/click
        env: {python: "3.9", date_pin: false, warmup: true}

Every rung of the install ladder keeps the user's commands as written; the hash of a repository's
override is recorded in each task it built (:func:`override_hash`), so changing it rebuilds them.
"""

from __future__ import annotations

import hashlib
from datetime import date
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from repo2env.errors import InputError
from repo2env.languages.python.spec.python import KNOWN_PYTHONS
from repo2env.models import REPO_NAME_PATTERN
from repo2env.settings import load_yaml_text


class EnvOverride(BaseModel):
    """What to change in one repository's inferred :class:`~repo2env.models.EnvSpec`."""

    model_config = ConfigDict(extra="forbid")

    python: str | None = Field(None, description="Python X.Y of the base image, one of KNOWN_PYTHONS "
                                 "(beyond 3.9/3.11/3.13 it needs a pulled python:X.Y-slim or a local CPython X.Y).")
    install: list[str] | None = Field(None, description="Replaces the inferred install commands.")
    pre_install: list[str] = Field(default_factory=list, description="Commands run before the install commands.")
    extra_install: list[str] = Field(default_factory=list, description="Commands run after the install commands.")
    system_packages: list[str] = Field(default_factory=list, description="Debian packages added to the inferred ones.")
    test_cmd: str | None = Field(None, description="Replaces the test command (test ids are appended).")
    date_pin: str | Literal[False] | None = Field(
        None, description="ISO date to resolve dependencies as of, or false for no pin.")
    warmup: bool | str | None = Field(
        None, description="Run the test collection (true) or this command once at build time, with network, as "
                          "the agent, so data the tests download on first use is in the task image.")

    @field_validator("python", mode="before")
    @classmethod
    def _python_available(cls, value: Any) -> Any:
        if value is None:
            return None
        text = str(value) if isinstance(value, int | float) else value
        if not isinstance(text, str) or text not in KNOWN_PYTHONS:
            hint = ' (write it quoted: python: "3.10" is read as 3.1 otherwise)' if isinstance(value, float) else ""
            raise ValueError(f"{value!r} is not an available Python; choose one of {', '.join(KNOWN_PYTHONS)}{hint}")
        return text

    @field_validator("date_pin", mode="before")
    @classmethod
    def _date_or_false(cls, value: Any) -> Any:
        if value is None or value is False:
            return value
        if value is True:
            raise ValueError("use an ISO date such as 2021-03-01, or false for no pin")
        if isinstance(value, date):
            return value.isoformat()
        try:
            return date.fromisoformat(str(value)).isoformat()
        except ValueError:
            raise ValueError(f"expected an ISO date such as 2021-03-01 or false, got {value!r}") from None

    @field_validator("warmup")
    @classmethod
    def _warmup_not_blank(cls, value: bool | str | None) -> bool | str | None:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must be true, false or a command")
        return value

    @field_validator("test_cmd")
    @classmethod
    def _command_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value


def override_hash(override: EnvOverride | None) -> str | None:
    """A short hash of what an override sets; None without one (or with one that sets nothing).

    Recorded in each built task's ``env_spec``: a task built under another override is rebuilt."""
    if override is None:
        return None
    content = override.model_dump_json(exclude_defaults=True)
    return None if content == "{}" else hashlib.sha256(content.encode()).hexdigest()[:16]


def load_overrides(path: str | Path) -> dict[str, EnvOverride]:
    """Read an override file (or a pipeline spec): ``owner/name`` -> its :class:`EnvOverride`.

    Repositories listed without an ``env`` have no override and are left out. Raises
    :class:`~repo2env.errors.InputError` naming the file and the field for a missing or
    unreadable file, malformed YAML, an unknown field or a bad value.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the override file ({exc.strerror or exc})") from None
    try:
        document = load_yaml_text(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}: not valid YAML{where}") from None
    return overrides_from_document(document, where=str(path))


def overrides_from_document(document: Any, *, where: str) -> dict[str, EnvOverride]:
    """:func:`load_overrides` for an already parsed YAML document; ``where`` names it in errors."""
    if not isinstance(document, dict) or "repos" not in document:
        raise InputError(f"{where}: expected a mapping with a 'repos' key")
    repos = document["repos"]
    entries: list[tuple[str, Any, str]] = []
    if isinstance(repos, dict):
        entries = [(str(name), env, f"repos.{name}") for name, env in repos.items()]
    elif isinstance(repos, list):
        for index, item in enumerate(repos):
            if isinstance(item, str):
                entries.append((item, None, f"repos[{index}]"))
            elif isinstance(item, dict) and isinstance(item.get("repo"), str):
                entries.append((item["repo"], item.get("env"), f"repos[{index}].env"))
            else:
                raise InputError(f"{where}: repos[{index}]: expected 'owner/name' or a mapping with a 'repo' key")
    elif repos is not None:
        raise InputError(f"{where}: 'repos' must be a mapping of owner/name to settings, or a list")
    overrides: dict[str, EnvOverride] = {}
    seen: set[str] = set()
    for name, env, field_path in entries:
        if not REPO_NAME_PATTERN.fullmatch(name):
            raise InputError(f"{where}: {field_path}: expected a repository as 'owner/name', got {name!r}")
        if name in seen:
            raise InputError(f"{where}: {field_path}: {name} is listed twice")
        seen.add(name)
        if env is None:
            continue
        if not isinstance(env, dict):
            raise InputError(f"{where}: {field_path}: expected a mapping of settings, got {type(env).__name__}")
        try:
            overrides[name] = EnvOverride.model_validate(env)
        except ValidationError as exc:
            raise InputError(f"{where}: {_describe(exc, field_path)}") from None
    return overrides


def _describe(exc: ValidationError, field_path: str) -> str:
    allowed = ", ".join(EnvOverride.model_fields)
    parts = []
    for error in exc.errors():
        name = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            message = f"unknown field (allowed: {allowed})"
        else:
            message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{field_path}.{name}: {message}")
    return "; ".join(parts)
