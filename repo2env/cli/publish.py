"""Datasets in and out: ``repo2env publish``, ``pull``, ``import`` and ``export``."""

from __future__ import annotations

import json
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path

import click

from repo2env import defaults
from repo2env.cli.root import (
    Group,
    cli,
    clone_mapping,
    console,
    from_option,
    open_selected_backend,
    selected_backend_if_any,
    stdout,
)


@cli.command()
@from_option
@click.option("--to", "target", required=True, metavar="hf://ORG/NAME|DIR",
              help="A Hugging Face Hub dataset repository (hf://org/name) or a local folder.")
@click.option("--name", help="The dataset's pretty name in its card [default: the Hub repo id or the folder name].")
@click.option("--split-by-date", type=click.DateTime(formats=["%Y-%m-%d"]), metavar="YYYY-MM-DD",
              help="Tasks created before this day go to 'train', the others to 'test'.")
@click.option("--include-rejected", is_flag=True, help="Publish rejected and never-validated tasks too.")
@click.option("--json-lists", is_flag=True, help="FAIL_TO_PASS / PASS_TO_PASS as JSON strings (SWE-bench's style).")
@click.option("--license", "license_id", default="other", show_default=True, help="License id for the card.")
@click.option("--overwrite", is_flag=True, help="Replace a target that already has content.")
@click.option("--save-images", is_flag=True,
              help="Put every task's image in the dataset (images/images.tar, layers shared) for 'repo2env pull'.")
@click.option("--push-images", "push_registry", metavar="REGISTRY",
              help="Push every task's image to REGISTRY (host[:port][/path]) first; the rows and Harbor tasks "
                   "record REGISTRY/NAME@sha256:DIGEST, which 'repo2env pull' pulls.")
@click.option("--private", is_flag=True, help="Hub: create the repository private.")
@click.option("--revision", help="Hub: the branch to commit to (created when missing).")
@click.option("--create-pr", is_flag=True, help="Hub: open a pull request instead of committing to the branch.")
@click.option("--token", help="Hub token [default: HF_TOKEN, else the stored 'hf auth login'].")
@click.option("--hub-url", help="Hub endpoint [default: HF_ENDPOINT, else the public Hub].")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def publish(from_dirs: tuple[Path, ...], target: str, name: str | None, split_by_date: datetime | None,
            include_rejected: bool, json_lists: bool, license_id: str, overwrite: bool, save_images: bool,
            push_registry: str | None, private: bool,
            revision: str | None, create_pr: bool, token: str | None, hub_url: str | None, as_json: bool) -> None:
    """Publish validated environments as a dataset: parquet rows (a TRL-ready `prompt` column, the
    SWE-bench fields, the environment, the validation figures), Harbor task folders (tasks/), a
    dataset card and a manifest.

    Only accepted tasks are published; tasks never validated are refused unless --include-rejected.
    A folder target is complete or absent after an interruption.
    """
    from repo2env.pipeline import compose

    default_name = compose.dataset_name(target)  # a malformed hf:// target is refused first
    folders = compose.task_folders(from_dirs)
    # The images' backend is needed to save or push them; otherwise only read (snapshot labels) if it runs.
    backend = open_selected_backend() if save_images or push_registry else selected_backend_if_any()
    options = compose.PublishOptions(
        name=name or default_name, split_by_date=split_by_date.date() if split_by_date else None,
        include_rejected=include_rejected, json_lists=json_lists, license_id=license_id, push_registry=push_registry)
    hub = compose.HubOptions(token=token, endpoint=hub_url, private=private, revision=revision, create_pr=create_pr)
    with console.status("pushing the images and writing the dataset" if push_registry else "writing the dataset"):
        summary = compose.publish(folders, target, options, backend=backend, save_images=save_images,
                                  overwrite=overwrite, hub=hub)
    if as_json:
        stdout.print_json(json.dumps({"target": summary.target, "splits": summary.splits, "rows": summary.rows,
                                      "left_out": dict(summary.left_out), "files": summary.files,
                                      "harbor_tasks": summary.harbor_tasks,
                                      "harbor_left_out": dict(summary.harbor_left_out)}))
        return
    splits = ", ".join(f"{split} {count}" for split, count in summary.splits.items())
    left = ", ".join(f"{reason} {count}" for reason, count in sorted(summary.left_out.items()))
    without = summary.without_harbor_folders
    console.print(f"published {summary.rows} environments ({splits}) to {summary.target}; "
                  f"{summary.harbor_tasks} Harbor task folders{', ' + without if without else ''}; "
                  f"{summary.files} files with checksums in manifest.json"
                  f"{'; left out: ' + left if left else ''}", highlight=False)


@cli.command()
@click.argument("source", metavar="hf://ORG/NAME|DIR")
@click.option("--out", "out_root", type=click.Path(file_okay=False, path_type=Path), default=defaults.GENERATED,
              show_default=True, help="Root of the task folders (one per repository: OUT/owner__name/).")
@click.option("--clone", "clones", multiple=True, metavar="OWNER/NAME=PATH",
              help="A local clone of a repository, to rebuild images the dataset does not carry; repeatable.")
@click.option("--no-build", is_flag=True, help="Only write the task folders; build nothing.")
@click.option("--revision", help="Hub: the branch or commit to download.")
@click.option("--token", help="Hub token [default: HF_TOKEN, else the stored login] (private datasets).")
@click.option("--hub-url", help="Hub endpoint [default: HF_ENDPOINT, else the public Hub].")
def pull(source: str, out_root: Path, clones: tuple[str, ...], no_build: bool, revision: str | None,
         token: str | None, hub_url: str | None) -> None:
    """Bring a published dataset here and make its environments runnable.

    The files are checked against the dataset's manifest, rows become task folders, and each task's
    image is found here, loaded from the dataset's images/images.tar, pulled from the registry
    'publish --push-images' pushed it to, or rebuilt from --clone.
    """
    from repo2env.pipeline import compose

    hub = compose.HubOptions(token=token, endpoint=hub_url, revision=revision)
    with console.status(f"downloading {source.removeprefix('hf://')}") if source.startswith("hf://") else nullcontext():
        tree = compose.fetch_dataset(source, out_root, hub=hub)
    summary = compose.pull(tree, out_root, clones=clone_mapping(clones), build=not no_build,
                           backend=None if no_build else open_selected_backend())
    for repo, folder in summary.folders.items():
        console.print(f"{repo}: {folder / 'tasks.jsonl'}", highlight=False)
    console.print(f"{summary.tasks} tasks; runnable here: {summary.runnable} ({summary.loaded_images} images loaded, "
                  f"{summary.pulled} pulled, {summary.rebuilt} rebuilt)", highlight=False)
    for instance_id, why in summary.not_runnable.items():
        console.print(f"[yellow]not runnable[/] {instance_id}: {why}", highlight=False)


@cli.group("import", cls=Group)
def import_group() -> None:
    """Bring tasks made elsewhere into repo2env (to build, validate and train on them here)."""


@import_group.command("swebench")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_root", type=click.Path(file_okay=False, path_type=Path), default=defaults.GENERATED,
              show_default=True, help="Root of the task folders (one per repository: OUT/owner__name/).")
@click.option("--clone", "clones", multiple=True, metavar="OWNER/NAME=PATH",
              help="A local clone (full history) of a repository the rows name; repeatable. Needed by build.")
def import_swebench_command(path: Path, out_root: Path, clones: tuple[str, ...]) -> None:
    """Import SWE-bench-format rows (SWE-bench, SWE-Gym, SWE-rebench; JSON, JSONL or parquet).

    Their FAIL_TO_PASS / PASS_TO_PASS are kept as declared; 'repo2env validate' re-derives them with
    our runtime and reports the difference in validation.jsonl (declared_differences).
    """
    from repo2env.pipeline import compose

    summary = compose.import_swebench(path, out_root, clone_mapping(clones))
    for repo, folder in summary.folders.items():
        console.print(f"{repo}: {summary.tasks[repo]} tasks -> {folder / 'tasks.jsonl'}", highlight=False)
    if summary.missing_clones:
        console.print(f"[yellow]no clone recorded for[/] {', '.join(summary.missing_clones)}: pass --clone "
                      "OWNER/NAME=PATH (or mine the repository) before 'repo2env build'", highlight=False)


@cli.group("export", cls=Group)
def export_group() -> None:
    """Write validated tasks in one format of the field."""


@export_group.command("swebench")
@from_option
@click.argument("out_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--lists", is_flag=True, help="FAIL_TO_PASS / PASS_TO_PASS as lists, not JSON strings.")
@click.option("--include-rejected", is_flag=True, help="Export tasks that were not accepted too.")
def export_swebench_command(from_dirs: tuple[Path, ...], out_path: Path, lists: bool, include_rejected: bool) -> None:
    """Write accepted tasks as SWE-bench instances (JSONL) to OUT_PATH."""
    from repo2env.pipeline import compose

    count = compose.export_swebench(compose.task_folders(from_dirs), out_path, json_lists=not lists,
                                    include_rejected=include_rejected)
    console.print(f"{count} SWE-bench instances -> {out_path}", highlight=False)


@export_group.command("harbor")
@from_option
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", default=defaults.EXPORT_NAME, show_default=True,
              help="The dataset's name; task.toml names each task OWNER/INSTANCE_ID with its first part.")
@click.option("--include-rejected", is_flag=True, help="Export built tasks that were not accepted too.")
@click.option("--network", type=click.Choice(["no-network", "public"]), default="no-network", show_default=True,
              help="The tasks' network policy. Harbor enforces no-network on Docker with an egress sidecar "
                   "built from a Docker Hub image; without Docker Hub see docs/exports.md.")
@click.option("--push-images", "push_registry", metavar="REGISTRY",
              help="Push every task's image to REGISTRY (host[:port][/path]) first, and pin it by digest "
                   "(REGISTRY/NAME@sha256:DIGEST) in task.toml and environment/Dockerfile.")
@click.option("--overwrite", is_flag=True, help="Replace an OUT_DIR that already has content.")
def export_harbor_command(from_dirs: tuple[Path, ...], out_dir: Path, name: str, include_rejected: bool,
                          network: str, push_registry: str | None, overwrite: bool) -> None:
    """Write accepted tasks as Harbor task folders to OUT_DIR/<instance_id>/: instruction.md, task.toml,
    environment/Dockerfile, tests/ (the hidden verifier, run in its own container on the agent's diff,
    writing /logs/verifier/reward.txt and reward.json) and solution/solve.sh (the gold patch). The
    same folders as the tasks/ of a published dataset. A task with no Harbor verifier yet (a
    JavaScript task) is left out and named with the reason; if none has one, nothing is written."""
    from repo2env.pipeline import compose

    backend = open_selected_backend() if push_registry else selected_backend_if_any()
    with console.status("pushing the images" if push_registry else "writing the task folders"):
        written = compose.export_harbor(compose.task_folders(from_dirs), out_dir, name=name,
                                        include_rejected=include_rejected, network=network,
                                        push_registry=push_registry, overwrite=overwrite, backend=backend)
    console.print(f"{written.tasks} Harbor tasks -> {written.root}; check and run them with: harbor lint "
                  f"{written.root}/*; harbor run -p {written.root} -a oracle", highlight=False)
    for instance_id, reason in written.left_out.items():
        console.print(f"[yellow]no Harbor folder[/] {instance_id}: {reason}", highlight=False)


@export_group.command("openenv")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--dataset", "dataset_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A folder 'repo2env publish --to DIR' wrote; it is copied into the package.")
@click.option("--name", default=defaults.EXPORT_NAME, show_default=True, help="The environment's name in openenv.yaml.")
@click.option("--wheel", "wheels", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A wheel to put in wheels/ (repo2env-rl's own is then used as it is) [default: repo2env-rl's "
                   "wheel built from this source checkout, or its version on the index]; repeatable.")
@click.option("--overwrite", is_flag=True, help="Replace an OUT_DIR that already has content.")
def export_openenv_command(out_dir: Path, dataset_dir: Path, name: str, wheels: tuple[Path, ...], overwrite: bool) -> None:
    """Write a deployable OpenEnv package to OUT_DIR: openenv.yaml, pyproject.toml and uv.lock (every
    dependency pinned; 'openenv validate' passes), server/app.py, a Dockerfile that installs from the
    lock and serves the dataset with its tools over MCP, and a README (the server needs a Docker engine).
    Locking needs the package index."""
    from repo2env.pipeline import compose

    with console.status("writing the package and locking its dependencies (uv lock)"):
        written = compose.export_openenv(dataset_dir, out_dir, name=name, wheels=wheels, overwrite=overwrite)
    console.print(f"OpenEnv package ({written.tasks} tasks; repo2env from {written.repo2env_source}) -> "
                  f"{written.root}; check it with: openenv validate {written.root}; build it with: docker build "
                  f"-t {name} {written.root}", highlight=False)


@export_group.command("trajectories")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--from", "roots", required=True, multiple=True, type=click.Path(exists=True, path_type=Path),
              help="A folder searched for episode traces (trace.json): harness runs, policy rollouts, RepoEnv; repeatable.")
@click.option("--min-reward", type=float, help="Keep the episodes whose reward is at least this (rejection sampling).")
@click.option("--overwrite", is_flag=True, help="Replace an OUT_DIR that already has content.")
def export_trajectories_command(out_dir: Path, roots: tuple[Path, ...], min_reward: float | None, overwrite: bool) -> None:
    """Write recorded episodes to OUT_DIR as a dataset in TRL's conversational tool-calling format
    (messages with tool_calls, tools), with each episode's reward and task id: SFTTrainer trains on
    load_dataset(OUT_DIR) unchanged. Tampered episodes are left out."""
    from repo2env.pipeline import compose

    written = compose.export_trajectories(roots, out_dir, min_reward=min_reward, overwrite=overwrite)
    sources = ", ".join(f"{count} {source}" for source, count in sorted(written.by_source.items()))
    skipped = "; left out: " + ", ".join(f"{count} {why}" for why, count in written.skipped.items()) if written.skipped else ""
    console.print(f"{written.rows} episodes ({sources}) -> {written.root}{skipped}", highlight=False)
