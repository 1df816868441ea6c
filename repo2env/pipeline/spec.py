"""Batch specs (``pipelines/*.yaml``): which repositories, which filters, which stages, where.

A spec is validated whole before anything runs; its errors name the file, the line and the field.
The specs shipped with the package (``pipelines/`` at the top level, ``repo2env/pipelines`` in the
package) are found by name (``demo``, ``example-real``), any other by path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from repo2env import defaults
from repo2env.errors import InputError
from repo2env.languages.python.spec.overrides import EnvOverride
from repo2env.settings import find_settings_file, read_yaml_file_with_lines, validate_settings
from repo2env.validate.acceptance import AcceptancePolicy, load_acceptance_policy

StageName = Literal["mine", "build", "validate", "publish"]
#: The stages in the order they run.
STAGES: tuple[StageName, ...] = ("mine", "build", "validate", "publish")
#: A repository entry naming the embedded demo repository (built under OUTPUT/sources/demo).
DEMO_SOURCE = "demo"
_NAME = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Filters(_Strict):
    """Which merged PRs become tasks (every repository; an entry may set its own)."""

    allow_no_issue: bool = Field(False, description="Keep PRs without a linked issue (the PR's text is the task).")
    since: str | None = Field(None, description="Only PRs merged on or after this day (YYYY-MM-DD).")
    until: str | None = Field(None, description="Only PRs merged on or before this day (YYYY-MM-DD).")
    max_files: int = Field(defaults.MINE_MAX_FILES, ge=1, description="Reject PRs changing more source + test files.")
    max_lines: int = Field(defaults.MINE_MAX_CHANGED_LINES, ge=1, description="Reject PRs whose fix changes more lines.")
    limit: int | None = Field(None, ge=1, description="At most this many new tasks per repository and run.")

    @field_validator("since", "until")
    @classmethod
    def _day(cls, value: str | None) -> str | None:
        if value is not None and not _DATE.fullmatch(value):
            raise ValueError(f"expected a day as YYYY-MM-DD, got {value!r}")
        return value


class RepoEntry(_Strict):
    """One repository of the batch."""

    repo: str = Field(description="owner/name (GitHub API), a local clone's path, a git URL, or 'demo'.")
    name: str | None = Field(None, description="owner/name for a local clone or URL [default: inferred].")
    issues: str | None = Field(None, description="issues.json in GitHub's REST shape, for local history.")
    branch: str | None = Field(None, description="Local history: the branch to mine [default: HEAD, main or master].")
    pulls: list[int] = Field(default_factory=list, description="Only these PR numbers.")
    filters: Filters | None = Field(None, description="Replaces the spec's filters for this repository.")
    env: EnvOverride | None = Field(None, description="Corrections to the inferred environment (python, install ...).")

    @field_validator("name")
    @classmethod
    def _owner_name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.fullmatch(value):
            raise ValueError(f"expected owner/name, got {value!r}")
        return value

    @property
    def label(self) -> str:
        """How the spec names this repository (state store, --only, status)."""
        return self.name or self.repo


class Resources(_Strict):
    """What one stage call needs on a worker."""

    cpus: float = Field(1.0, gt=0)
    memory_mb: int | None = Field(None, ge=64)


class ExecutorSpec(_Strict):
    """Where stage calls run."""

    name: Literal["local", "ray"] = Field("local", description="local: a pool in this process; ray: a Ray cluster.")
    jobs: int = Field(2, ge=1, description="Stage calls at once (local).")
    address: str | None = Field(None, description="Ray: auto or HOST:PORT.")
    resources: Resources = Field(default_factory=Resources)


class PublishSpec(_Strict):
    """Where the accepted environments go."""

    to: str = Field(description="A folder (relative: inside the output folder), or hf://org/name (a Hub dataset).")
    name: str | None = Field(None, description="The dataset's pretty name [default: the folder or repo id].")
    include_rejected: bool = False


class PipelineSpec(_Strict):
    """A batch: repositories through stages, resumable, into one output folder."""

    name: str = Field(description="The batch's name (default output folder: generated/pipelines/NAME).")
    description: str = ""
    repos: list[RepoEntry] = Field(min_length=1)
    filters: Filters = Field(default_factory=Filters)
    stages: list[StageName] = Field(default_factory=lambda: list(STAGES), min_length=1)
    validators: str = Field(defaults.ACCEPTANCE_POLICY, description="Acceptance policy: a name in validators/ or a YAML path.")
    policy: dict[str, Any] = Field(default_factory=dict, description="Fields of the acceptance policy to change.")
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)
    output: str | None = Field(None, description="The output folder [default: generated/pipelines/NAME].")
    publish: PublishSpec | None = None
    backend: str | None = Field(None, description="The container backend of every stage and worker, docker or "
                                "podman ('--backend' overrides it) [default: REPO2ENV_BACKEND, else docker].")

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, backend: str | None) -> str | None:
        from repo2env.runtime.backends import BACKENDS

        if backend is not None and backend not in BACKENDS:
            raise ValueError(f"no such backend {backend!r} (known: {', '.join(BACKENDS)})")
        return backend

    @field_validator("stages")
    @classmethod
    def _ordered(cls, stages: list[str]) -> list[str]:
        if len(set(stages)) != len(stages):
            raise ValueError("a stage is listed twice")
        if stages != sorted(stages, key=STAGES.index):
            raise ValueError(f"stages run in the order {', '.join(STAGES)}; list them in that order")
        return stages

    @field_validator("policy")
    @classmethod
    def _policy_fields(cls, policy: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(policy) - set(AcceptancePolicy.model_fields))
        if unknown:
            raise ValueError(f"unknown policy field(s) {', '.join(unknown)} (see validators/default.yaml)")
        return policy

    @model_validator(mode="after")
    def _consistent(self) -> PipelineSpec:
        labels = [entry.label for entry in self.repos]
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:
            raise ValueError(f"repository listed twice: {', '.join(twice)}")
        if "publish" in self.stages and self.publish is None:
            raise ValueError("the publish stage needs a 'publish: {to: DIR|hf://org/name}' section")
        return self

    def output_dir(self) -> Path:
        """The output folder (state.sqlite, one folder per repository, funnel, dataset)."""
        return Path(self.output) if self.output else defaults.PIPELINES_OUTPUT / self.name

    def acceptance_policy(self) -> AcceptancePolicy:
        """The acceptance policy with the spec's changes."""
        policy = load_acceptance_policy(self.validators)
        if not self.policy:
            return policy
        return validate_settings(AcceptancePolicy, policy.model_dump() | self.policy, where="policy")


def load_pipeline_spec(name_or_path: str | Path) -> PipelineSpec:
    """A spec by name (``demo``: pipelines/ shipped with the package) or by path, validated."""
    path = find_settings_file("pipelines", name_or_path, what="pipeline spec")
    document, lines = read_yaml_file_with_lines(path, what="pipeline spec")
    if not isinstance(document, dict):
        raise InputError(f"{path}: a pipeline spec is a mapping (name, repos, stages ...)")
    spec = validate_settings(PipelineSpec, document, where=str(path), lines=lines)
    try:
        spec.acceptance_policy()
    except InputError as exc:
        field = "policy" if exc.message.startswith("policy:") else "validators"
        raise InputError(f"{path}: line {lines((field,))}: {exc.message}", hint=exc.hint) from None
    return spec
