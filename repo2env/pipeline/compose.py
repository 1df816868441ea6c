"""The composition layer: every stage as one function that the CLI, the batch pipeline and the demos call.

``repo2env mine``, a ``pipelines/*.yaml`` batch, ``make demo`` and ``make train-demo`` all mine,
build, validate, publish and export through these functions, so they make the same choices: the
same defaults (:mod:`repo2env.defaults`), the same task selection
(:mod:`repo2env.publish.selection`), the same published tree (parquet rows, Harbor task folders,
card, manifest). The CLI parses its options, calls one function here and prints what it returns;
nothing here prints or exits.

Functions that build images or run sandboxes take the ``backend`` they use (the CLI opens the one
``--backend`` names); without one they open the selected backend (``REPO2ENV_BACKEND``, else
docker) once per process (:func:`repo2env.pipeline.stages.worker_backend`).
Third-party clients that are slow to import (the Hub, GitHub, TRL) are imported where they are used.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo2env import defaults
from repo2env.errors import BackendUnavailableError, InputError
from repo2env.folders import write_folder
from repo2env.jsonl import append_jsonl, find_task, read_task_ids
from repo2env.mine.miner import MineOptions, MineResult, default_out_dir
from repo2env.mine.miner import mine as mine_source
from repo2env.models import EnvSpec, ExecResult, GradeResult, Task, ValidationReport
from repo2env.pipeline.stages import build_tasks_dir, folder_builder, validate_dir, worker_backend
from repo2env.publish.dataset import PublishOptions, PublishSummary
from repo2env.runtime.build import BuildOptions, BuildSummary, tasks_dirs
from repo2env.settings import validate_settings
from repo2env.validate.acceptance import AcceptancePolicy, load_acceptance_policy
from repo2env.validate.run import PolicyRunner, ValidationSummary

if TYPE_CHECKING:
    from repo2env.demo import DemoRepo
    from repo2env.mine.source import Source
    from repo2env.publish.pull import PullSummary
    from repo2env.runtime.backend import Backend


# --- task folders ---------------------------------------------------------------------------------


def task_folders(explicit: Sequence[Path] = (), roots: Sequence[Path] = ()) -> list[Path]:
    """The task folders to work on: ``explicit`` ones (each must hold a tasks.jsonl), then every
    folder with a tasks.jsonl under each of ``roots``; with neither, every one under generated/."""
    if not explicit and not roots:
        return tasks_dirs(defaults.GENERATED, [])
    folders = list(tasks_dirs(defaults.GENERATED, list(explicit))) if explicit else []
    for root in roots:
        folders += tasks_dirs(root, [])
    return list(dict.fromkeys(folders))


def task_count(folder: Path, instance_ids: frozenset[str] = frozenset()) -> int:
    """How many tasks ``folder``'s tasks.jsonl holds (of ``instance_ids`` only, when given)."""
    ids = read_task_ids(folder / "tasks.jsonl")
    return len(ids & instance_ids) if instance_ids else len(ids)


# --- mine -----------------------------------------------------------------------------------------


def open_repository(spec: str, *, issues_path: Path | None = None, name: str | None = None,
                    branch: str | None = None, token: str | None = None, api_url: str | None = None,
                    on_wait: Callable[[str], None] | None = None) -> Source:
    """The source of ``spec``: a local clone or a git URL (local history, offline), or owner/name
    (GitHub's API; ``on_wait`` hears of rate-limit waits)."""
    from repo2env.mine.open import open_source

    return open_source(spec, issues_path=issues_path, token=token, api_url=api_url, name=name, on_wait=on_wait,
                       branch=branch)


def mine(source: Source, out_dir: Path | None = None, options: MineOptions | None = None, *,
         progress: Callable[[int, int], None] | None = None) -> MineResult:
    """Mine ``source``'s merged PRs into ``out_dir`` [default: generated/<owner>__<name>]:
    tasks.jsonl (re-runs skip ids already there) and funnel.json."""
    return mine_source(source, out_dir or default_out_dir(defaults.GENERATED, source.repo), options or MineOptions(),
                       progress=progress)


@dataclass(frozen=True)
class DemoSource:
    """The embedded demo repository on disk: its clone and its issues.json."""

    repo_path: Path
    issues_path: Path
    built: DemoRepo | None = None  #: what was built now (None: found built and reused)

    @property
    def reused(self) -> bool:
        return self.built is None


def demo_repository(folder: Path, language: str = "python", *,
                    progress: Callable[[str], None] | None = None) -> DemoSource:
    """The embedded demo repository of ``language`` (textkit for python, fmtkit for javascript)
    under ``folder`` (``repo/`` and ``issues.json``), built once: a build cut short (killed) is
    redone, never half reused; a folder holding another language's demo is refused."""
    from repo2env.demo import build_demo, demo_history

    repo_path, issues_path = folder / "repo", folder / "issues.json"
    if (repo_path / ".git").exists() and issues_path.is_file():
        expected, found = demo_history(language).repo, _issues_repository(issues_path)
        if found != expected:
            raise InputError(f"{folder.parent} holds the demo of {found}, not the {language} demo ({expected})",
                             hint="give each demo its own --out folder")
        return DemoSource(repo_path, issues_path)
    if progress:
        progress(f"building the demo repository in {folder}")
    # Whole or absent: a kill during the build leaves only a hidden staging folder; what an earlier
    # cut-short build left at ``folder`` is replaced.
    built = write_folder(folder, lambda staging: build_demo(staging, language), overwrite=True)
    return DemoSource(repo_path, issues_path, dataclasses.replace(built, path=repo_path, issues_path=issues_path))


def _issues_repository(issues_path: Path) -> str | None:
    """The ``repository`` an issues.json document names (None when it cannot be read)."""
    try:
        return json.loads(issues_path.read_text(encoding="utf-8")).get("repository")
    except (OSError, ValueError, AttributeError):
        return None


# --- build ----------------------------------------------------------------------------------------


def build(folder: Path, *, backend: Backend | None = None, options: BuildOptions | None = None,
          progress: Callable[[Task, EnvSpec], None] | None = None) -> BuildSummary:
    """Build every task of ``folder`` (or ``options.instance_ids``): an env image shared by the tasks
    whose dependencies match and a task image each; each row gets its env_spec as it is built."""
    return build_tasks_dir(folder, runtime=backend or worker_backend(), options=options or BuildOptions(),
                           progress=progress)


def load_overrides(path: Path) -> dict:
    """Per-repository environment overrides from a YAML file ({repos: {owner/name: {python: ...}}})."""
    from repo2env.languages.python.spec.overrides import load_overrides as read_overrides

    return read_overrides(path)


# --- validate -------------------------------------------------------------------------------------


def acceptance_policy(name_or_path: str = defaults.ACCEPTANCE_POLICY, *, whole_suite: bool = False,
                      grading_jobs: str | None = None) -> AcceptancePolicy:
    """An acceptance policy by name (validators/NAME.yaml) or path; ``whole_suite`` derives
    PASS_TO_PASS from the whole test suite; ``grading_jobs`` (a number or ``auto``) overrides the
    policy's, checked as the policy's own field."""
    policy = load_acceptance_policy(name_or_path)
    if whole_suite:
        policy = policy.model_copy(update={"whole_suite_p2p": True})
    if grading_jobs is not None:  # model_copy would skip the field's checks
        policy = validate_settings(AcceptancePolicy, {**policy.model_dump(), "grading_jobs": grading_jobs},
                                   where="--grading-jobs")
    return policy


def policy_rollouts(url: str, model: str) -> PolicyRunner:
    """Policy rollouts by a model behind an OpenAI-compatible endpoint (…/v1: vLLM, TGI, a hosted API),
    with the agent's one tool set (repo2env.envs), handed to validation as its runner."""
    from repo2env.envs.policy import PolicyClient

    return PolicyClient(url, model).rollouts


def validate(folder: Path, *, policy: AcceptancePolicy, backend: Backend | None = None,
             jobs: int = defaults.VALIDATE_JOBS, policy_runner: PolicyRunner | None = None, policy_k: int = 0,
             force: bool = False, instance_ids: frozenset[str] = frozenset(),
             progress: Callable[[ValidationReport], None] | None = None) -> ValidationSummary:
    """Validate every task of ``folder`` (resuming: tasks with a record are skipped unless ``force``):
    derive its tests, grade the reference rollouts, judge with ``policy``; writes validation.jsonl,
    summary.md and validation.png."""
    return validate_dir(folder, backend or worker_backend(), policy, jobs=jobs, policy_runner=policy_runner,
                        policy_k=policy_k, force=force, instance_ids=instance_ids, progress=progress)


# --- grade and run --------------------------------------------------------------------------------


def predictions(path: Path) -> list[tuple[str, str]]:
    """SWE-bench predictions (JSONL, a JSON list, or preds.json keyed by instance id) as (instance id,
    patch) pairs."""
    from repo2env.publish.swebench import read_predictions

    return [(row["instance_id"], row.get("model_patch") or "") for row in read_predictions(path)]


def grade(patches: Sequence[tuple[str, str]], folders: Sequence[Path], *, mode: str = "graded",
          timeout_s: float | None = None, out_path: Path | None = None,
          backend: Backend | None = None) -> Iterator[GradeResult]:
    """Grade each (instance id, patch) with the hidden verifier, yielding each result as it is done;
    every result is appended to ``out_path`` [default: grades.jsonl in the task's folder]. ``timeout_s``:
    the hidden tests' seconds [default: each task's own, set by validation from its gold gradings]."""
    from repo2env.verify.grader import Grader

    tasks_files = [folder / "tasks.jsonl" for folder in folders]
    if out_path:
        # A folder that cannot take the results fails now, not after the gradings it would lose.
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.open("a").close()
    runtime = backend or worker_backend()
    for instance_id, patch in patches:
        task, tasks_path = find_task(tasks_files, instance_id)
        grader = Grader(runtime, tasks_path.parent / "logs" / "grades", timeout_s=timeout_s)
        result = grader.grade(task, patch, mode=mode)
        append_jsonl(out_path or tasks_path.parent / "grades.jsonl", [result])
        yield result


def run_in_sandbox(instance_id: str, folders: Sequence[Path], command: str, *,
                   timeout_s: float = defaults.RUN_TIMEOUT_S,
                   backend: Backend | None = None) -> tuple[ExecResult, str]:
    """Run ``command`` in a fresh sandbox of the task as the agent would: its result and the diff it
    left against the snapshot."""
    task, _ = find_task([folder / "tasks.jsonl" for folder in folders], instance_id)
    with (backend or worker_backend()).start(task) as sandbox:
        result = sandbox.exec(command, timeout=timeout_s)
        return result, sandbox.diff()


# --- publish --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HubOptions:
    """How to reach the Hugging Face Hub (a ``hf://org/name`` target or source)."""

    token: str | None = None  #: [default: HF_TOKEN, else the stored login]
    endpoint: str | None = None  #: [default: HF_ENDPOINT, else the public Hub]
    private: bool = False  #: publish: create the repository private
    revision: str | None = None  #: publish: the branch to commit to; pull: the branch or commit to download
    create_pr: bool = False  #: publish: open a pull request instead of committing


def dataset_name(target: str) -> str:
    """A target's own name, the dataset's default name: the Hub repository id, or the folder's name."""
    from repo2env.publish.hub import HubTarget, parse_target

    destination = parse_target(target)
    return destination.repo_id if isinstance(destination, HubTarget) else Path(destination).name


def backend_if_any(name: str = "") -> Backend | None:
    """The backend ``name`` (default: the selected one) when it runs here, else None: for what only
    reads images when it can (the snapshot labels of Harbor folders)."""
    try:
        return worker_backend(name)
    except BackendUnavailableError:
        return None


def publish(folders: Sequence[Path], target: str, options: PublishOptions, *, backend: Backend | None = None,
            save_images: bool = False, overwrite: bool = False, hub: HubOptions = HubOptions()) -> PublishSummary:
    """Publish the built and accepted tasks of ``folders`` to ``target`` (a folder, or hf://org/name
    in one commit): parquet rows, Harbor task folders (tasks/), the validation figure, a dataset card
    and a manifest; with ``save_images`` every task's image too (images/images.tar). ``backend``
    holds the images: needed to save or push them (default: the selected one), otherwise only read
    for the Harbor folders' snapshot labels when it runs here."""
    from repo2env.publish.dataset import publish_to_folder
    from repo2env.publish.hub import HubTarget, parse_target, publish_to_hub
    from repo2env.publish.images import image_saver

    destination = parse_target(target)
    if backend is None:
        backend = worker_backend() if save_images or options.push_registry else backend_if_any()
    writers = [image_saver(backend)] if save_images else []  # the Harbor folders are part of every tree
    if isinstance(destination, HubTarget):
        return publish_to_hub(list(folders), destination.repo_id, options, token=hub.token, endpoint=hub.endpoint,
                              private=hub.private, revision=hub.revision, create_pr=hub.create_pr,
                              overwrite=overwrite, extra_writers=writers, images=backend)
    return publish_to_folder(list(folders), Path(destination), options, overwrite=overwrite, extra_writers=writers,
                             images=backend)


def publishable(folders: Sequence[Path], *, include_rejected: bool = False) -> list[Task]:
    """The tasks of ``folders`` that publishing and every export take: built, and accepted unless
    ``include_rejected`` (:mod:`repo2env.publish.selection`)."""
    from repo2env.publish.selection import select_from_folders

    return select_from_folders(folders, include_rejected=include_rejected).tasks


def fetch_dataset(source: str, root: Path, *, hub: HubOptions = HubOptions()) -> Path:
    """A published dataset's folder here: ``source`` itself, or hf://org/name downloaded to
    ``root/datasets/<org>__<name>``."""
    from repo2env.publish.hub import HubTarget, download_from_hub, parse_target

    origin = parse_target(source)
    if not isinstance(origin, HubTarget):
        return Path(origin)
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()  # a caller shows its own progress
    return download_from_hub(origin.repo_id, root / "datasets" / origin.repo_id.replace("/", "__"),
                             token=hub.token, endpoint=hub.endpoint, revision=hub.revision)


def pull(tree: Path, out_root: Path = defaults.GENERATED, *, clones: dict[str, str] | None = None,
         build: bool = True, backend: Backend | None = None) -> PullSummary:
    """A published dataset's rows as task folders under ``out_root`` (one per repository); with
    ``build``, every task's image made to exist here (found, loaded from the dataset, pulled from
    the registry it was pushed to, or rebuilt from ``clones``)."""
    from repo2env.publish.pull import pull_dataset

    runtime = (backend or worker_backend()) if build else None
    return pull_dataset(tree, out_root, runtime=runtime, clones=clones, build=build,
                        builder=folder_builder(runtime) if runtime else None)


# --- exports and imports --------------------------------------------------------------------------


def export_swebench(folders: Sequence[Path], out_path: Path, *, json_lists: bool = True,
                    include_rejected: bool = False) -> int:
    """The selected tasks of ``folders`` as SWE-bench instances (JSONL) in ``out_path``; how many."""
    from repo2env.publish.swebench import export_swebench as write_swebench

    return write_swebench(folders, out_path, json_lists=json_lists, accepted_only=not include_rejected)


def export_harbor(folders: Sequence[Path], out_dir: Path, *, name: str = defaults.EXPORT_NAME,
                  include_rejected: bool = False, network: str = "no-network", push_registry: str | None = None,
                  overwrite: bool = False, backend: Backend | None = None):
    """The selected tasks of ``folders`` as Harbor task folders in ``out_dir`` (complete or absent),
    with the ``network`` policy; each image pushed to ``push_registry`` first and pinned by digest
    when given (``backend`` then required), else read from ``backend``'s images when given."""
    from repo2env.publish.harbor import export_harbor as write_harbor

    return write_harbor(folders, out_dir, dataset=name, accepted_only=not include_rejected, network=network,
                        push_registry=push_registry, overwrite=overwrite, backend=backend)


def export_openenv(dataset_dir: Path, out_dir: Path, *, name: str = defaults.EXPORT_NAME,
                   wheels: Sequence[Path] = (), overwrite: bool = False):
    """A published dataset as a deployable OpenEnv package in ``out_dir`` (complete or absent)."""
    from repo2env.publish.openenv import export_openenv as write_openenv

    return write_openenv(dataset_dir, out_dir, name=name, wheels=wheels, overwrite=overwrite)


def import_swebench(path: Path, out_root: Path = defaults.GENERATED, clones: dict[str, str] | None = None):
    """SWE-bench-format rows (JSON, JSONL, parquet) as task folders under ``out_root``."""
    from repo2env.publish.swebench import import_swebench as read_swebench

    return read_swebench(path, out_root, clones or {})


def export_trajectories(roots: Sequence[Path], out_dir: Path, *, min_reward: float | None = None,
                        overwrite: bool = False):
    """The episodes recorded under ``roots`` (trace.json of harness runs, policy rollouts, RepoEnv)
    as a dataset in TRL's conversational tool-calling format in ``out_dir`` (complete or absent),
    tampered episodes and those below ``min_reward`` left out."""
    from repo2env.publish.trajectories import export_trajectories as write_trajectories

    return write_trajectories(roots, out_dir, min_reward=min_reward, overwrite=overwrite)


# --- harnesses ------------------------------------------------------------------------------------


def harness_options(*, max_turns: int = defaults.EPISODE_MAX_TURNS, max_tokens: int = 0,
                    max_wall_s: float = defaults.EPISODE_MAX_WALL_S,
                    perturbations: dict[str, float] | None = None, seed: int = 0, reward_mode: str = "graded") -> Any:
    """How every episode of a harness run goes (a :class:`~repo2env.harness.run.HarnessOptions`): its
    budget (model calls, tokens, seconds), the faults injected at ``perturbations``' rates by name
    (tool_timeout, output_cut, endpoint_failure) decided by ``seed``, and the reward's mode."""
    from pydantic import ValidationError

    from repo2env.harness.run import HarnessOptions
    from repo2env.models import EpisodeBudget, PerturbationPlan

    try:
        budget = EpisodeBudget(max_turns=max_turns, max_tokens=max_tokens, max_wall_s=max_wall_s)
        plan = PerturbationPlan(**perturbations, seed=seed) if perturbations else None
    except ValidationError as exc:
        error = exc.errors()[0]
        raise InputError(f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}",
                         hint="perturbations: tool_timeout, output_cut, endpoint_failure; rates between 0 and 1") from None
    return HarnessOptions(budget=budget, perturbations=plan, reward_mode=reward_mode)


def harness_episodes(instance_id: str, folders: Sequence[Path], agent: str, model_url: str, *,
                     model: str | None = None, api_key: str | None = None, episodes: int = 1, jobs: int = 1,
                     options: Any = None, backend: Backend | None = None,
                     progress: Callable[[str], None] | None = None) -> list[tuple[Any, Path]]:
    """Run the harness ``agent`` (mini-swe-agent, opencode, ``module:Class`` or a command) ``episodes``
    times on the task ``instance_id`` through the capturing proxy in front of ``model_url`` (a
    :class:`~repo2env.harness.run.HarnessOptions` sets budgets and perturbations); each graded
    :class:`~repo2env.models.EpisodeTrace` and where its trace.json is."""
    from repo2env.pipeline.harness_runs import harness_episodes as run_episodes

    return run_episodes(instance_id, list(folders), agent, model_url, model=model, api_key=api_key,
                        episodes=episodes, jobs=jobs, options=options, backend=backend or worker_backend(),
                        progress=progress)


# --- train ----------------------------------------------------------------------------------------


@dataclass
class TrainingDataset:
    """A published dataset here, its images runnable: its folder and its splits (``datasets.Dataset``)."""

    tree: Path
    splits: dict[str, Any] = field(default_factory=dict)
    loaded_images: int = 0
    rebuilt: int = 0


def training_dataset(source: str, work_dir: Path, *, build: bool = True, clones: dict[str, str] | None = None,
                     hub: HubOptions = HubOptions(), backend: Backend | None = None) -> TrainingDataset:
    """Load a published dataset (a folder or hf://org/name) with its splits, every task's image made
    to exist here first (the task folders go to ``work_dir/tasks``); an InputError when one cannot."""
    from repo2env.dataset_rows import load_published

    tree = fetch_dataset(source, work_dir, hub=hub)
    prepared = TrainingDataset(tree=tree)
    if build:
        pulled = pull(tree, work_dir / "tasks", clones=clones, backend=backend)
        if pulled.not_runnable:
            shown = "; ".join(f"{task}: {why}" for task, why in list(pulled.not_runnable.items())[:3])
            raise InputError(f"{len(pulled.not_runnable)} task(s) of {source} cannot run here: {shown}",
                             hint="publish with --save-images, or pass the repository's clone to rebuild")
        prepared.loaded_images, prepared.rebuilt = pulled.loaded_images, pulled.rebuilt
    loaded = load_published(tree)  # a cache of its own: datasets caches a local folder by its name alone
    prepared.splits = {name: loaded[name] for name in loaded}
    if "train" not in prepared.splits:
        raise InputError(f"{source} has no 'train' split", hint="publish it with repo2env publish")
    return prepared


def train(training: TrainingDataset, model_path: str, args: Any, output_dir: Path) -> tuple[Any, Path]:
    """GRPO with TRL on ``training``'s 'train' split (evaluated on 'test'), RepoEnv as the
    environment; ``args`` is a GRPOConfig. The run's result (metrics.jsonl, reward.png in
    ``output_dir``) and the folder the final model is saved to."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from repo2env.train.run import grpo_trainer, run_training

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    trainer = grpo_trainer(model, tokenizer, args, training.splits["train"], training.splits.get("test"))
    result = run_training(trainer, output_dir)
    trainer.save_model(str(output_dir / "final"))
    return result, output_dir / "final"


def train_on_harness(training: TrainingDataset, model_path: str, args: Any, output_dir: Path, *, agent: str,
                     model_url: str, jobs: int = defaults.HARNESS_TRAIN_JOBS,
                     backend: Backend | None = None) -> tuple[Any, Path]:
    """GRPO with TRL on ``training``'s 'train' split whose episodes are the harness ``agent``'s
    (TRL's ``rollout_func`` through the capturing proxy in front of ``model_url``, ``jobs``
    sandboxes at once; traces under ``output_dir/harness``). No evaluation: it would run harness
    episodes too ('repo2env harness run' does that). As :func:`train` returns."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from repo2env.pipeline.harness_runs import harness_rollouts
    from repo2env.train.harness import harness_grpo_trainer
    from repo2env.train.run import run_training

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path)
    args.eval_strategy = "no"
    with harness_rollouts(training.splits["train"], agent, model_url, backend=backend or worker_backend(),
                          logs_dir=output_dir / "harness", jobs=jobs) as rollouts:
        trainer = harness_grpo_trainer(model, tokenizer, args, training.splits["train"], rollouts)
        result = run_training(trainer, output_dir)
    trainer.save_model(str(output_dir / "final"))
    return result, output_dir / "final"
