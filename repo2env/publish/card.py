"""The dataset card (README.md with YAML metadata) of a published environment dataset: pure text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml

from repo2env import install_hint
from repo2env.languages import get_profile, language_names

TAGS = ["repo2env", "reinforcement-learning", "code", "swe-bench", "software-engineering", "agents", "grpo"]


def _language_title(language: str) -> str:
    """How a language is written (its profile's title: ``javascript`` -> ``JavaScript``), else as given."""
    return get_profile(language).title if language in language_names() else language


def _size_category(rows: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if rows < limit:
            return label
    return "100K<n<1M"


def without_folders(reasons: Mapping[str, int]) -> str:
    """How many tasks got no Harbor folder and why, as one phrase ('' when every task got one):
    ``2 tasks without one (no FAIL_TO_PASS tests: 2)``."""
    if not reasons:
        return ""
    total = sum(reasons.values())
    why = "; ".join(f"{reason}: {count}" for reason, count in sorted(reasons.items()))
    return f"{total} task{'s' if total != 1 else ''} without one ({why})"


def dataset_card(*, name: str, splits: Mapping[str, int], repos: Mapping[str, Mapping[str, int]], license_id: str,
                 figures: Sequence[str], harbor_tasks: int, json_lists: bool, quality_lines: Sequence[str] = (),
                 quality_figure: str | None = None, harbor_left_out: Mapping[str, int] | None = None,
                 languages: Mapping[str, int] | None = None) -> str:
    """README.md of the dataset: metadata (``configs:`` points at ``data/`` so the ``tasks/`` tree is
    not read as data; the languages among the tags), what a row holds, the environments per language
    (``languages``: each task's ``language``, the rows' column, with its count), the funnel per
    repository, figures, the task-quality summary (``quality_lines``: markdown, headed;
    ``quality_figure``: its distributions), snippets, and how many rows have no Harbor folder and
    why (``harbor_left_out``: reason -> rows)."""
    by_count = sorted((languages or {}).items(), key=lambda item: (-item[1], item[0]))
    metadata = {
        "license": license_id,
        "pretty_name": name,
        "tags": [*TAGS, *(language for language, _ in by_count if language not in TAGS)],
        "task_categories": ["text-generation"],
        "size_categories": [_size_category(sum(splits.values()))],
        "configs": [{"config_name": "default",
                     "data_files": [{"split": split, "path": f"data/{split}-*.parquet"} for split in splits]}],
    }
    repo_id = name if "/" in name else f"ORG/{name}"
    total = sum(splits.values())
    lines = ["---", yaml.safe_dump(metadata, sort_keys=False).strip(), "---", "", f"# {name}", "",
             f"{total} RL environments for coding agents made by repo2env from merged pull "
             "requests: each row is one task, with the linked issue as the instruction, the repository at the "
             "PR's base commit (a Docker image with no git history) as the world, and the fraction of the PR's "
             "own hidden tests that pass as the reward. Every environment was validated with reference "
             "rollouts (the gold patch scores 1.0 every time, the empty patch 0, partial fixes in between).",
             "", "## Splits", "", "| split | rows |", "|---|---|"]
    lines += [f"| {split} | {count} |" for split, count in splits.items()]
    if by_count:
        lines += ["", "## Languages", "", "The `language` column; each language's tasks run its own test runner.", "",
                  "| language | environments |", "|---|---|"]
        lines += [f"| {_language_title(language)} | {count} |" for language, count in by_count]
    lines += ["", "## Funnel per repository", "",
              "| repository | mined | built | validated | accepted | published |", "|---|---|---|---|---|---|"]
    for repo, counts in sorted(repos.items()):
        lines.append(f"| {repo} | {counts.get('mined', 0)} | {counts.get('built', 0)} | {counts.get('validated', 0)} "
                     f"| {counts.get('accepted', 0)} | {counts.get('published', 0)} |")
    if figures:
        lines += ["", "## Rewards of the reference rollouts", ""]
        lines += [f"![rewards by rollout kind]({figure})" for figure in figures]
    if quality_lines:
        lines += ["", *quality_lines]
        if quality_figure:
            lines += [f"![task quality distributions]({quality_figure})"]
    lists = "JSON strings (as SWE-bench stores them)" if json_lists else "lists of strings"
    lines += ["", "## Columns", "",
              "- `prompt`: the conversation an episode starts from (system + user), as TRL's GRPO trainer takes it.",
              "- SWE-bench fields: `instance_id`, `repo`, `base_commit`, `patch` (the gold fix), `test_patch` "
              "(the hidden tests), `problem_statement`, `hints_text`, `created_at`, `version`, "
              f"`environment_setup_commit`, `FAIL_TO_PASS` and `PASS_TO_PASS` ({lists}).",
              "- The environment: `image`, `image_digest`, `pushed_image` (REGISTRY/NAME@sha256:DIGEST when pushed), `env_image`, `python`, `test_cmd`, `env_spec` (JSON), "
              "`dockerfiles` (JSON: the Dockerfile of each layer).",
              "- Validation: `verdict`, `reasons`, `reward_gold`, `reward_null`, `reward_mean`, `distinct_rewards`, "
              "`partial_credit`, `policy_pass_rate`, `validation` (JSON: rewards per rollout kind, flaky tests).",
              "- Task quality: `interface` (the Interface section the prompt carries: names and signatures the hidden "
              "tests use that the fix introduces and the issue never names), `adequacy` and `specification` (0 to 1), "
              "`quality` (JSON: the whole quality block, pass@k of the policy rollouts included).",
              "", "## Use it", "", "TRL (GRPO with the environment's tools and hidden-test reward):", "", "```python",
              f"# {install_hint('train')}; `repo2env pull` makes the images runnable here",
              "from datasets import load_dataset",
              f'dataset = load_dataset("{repo_id}", split="train")',
              "# RepoEnv starts a task's sandbox on reset(**row)",
              "from repo2env.envs import RepoEnv",
              "from trl import GRPOConfig, GRPOTrainer",
              "trainer = GRPOTrainer(model=MODEL, train_dataset=dataset, environment_factory=RepoEnv,",
              "                      args=GRPOConfig(num_generations=4, max_tool_calling_iterations=20))",
              "```", "", "SWE-bench tooling (the rows carry its instance fields):", "", "```python",
              "from datasets import load_dataset",
              f'instances = load_dataset("{repo_id}", split="train").select_columns(',
              '    ["instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement",',
              '     "version", "FAIL_TO_PASS", "PASS_TO_PASS", "environment_setup_commit", "created_at", "hints_text"])',
              "```", "",
              "SWE-bench-style harnesses read each task's image from `image_name` / `docker_image`, and swebench's "
              "harness grades with the rows' `eval_script` / `log_parser` / `eval_type`:", "", "```bash",
              f"mini-extra swebench --subset {repo_id} --split train -o out -m MODEL",
              "```", ""]
    if harbor_tasks:
        lines += [f"Harbor: `tasks/<instance_id>/` holds {harbor_tasks} Harbor task folders (`instruction.md`, "
                  "`task.toml`, `environment/Dockerfile`, `tests/test.sh` = the hidden verifier, "
                  "`solution/solve.sh` = the gold patch):", "", "```bash",
                  f"huggingface-cli download {repo_id} --repo-type dataset --include 'tasks/*' --local-dir ds",
                  "harbor lint ds/tasks/*", "harbor run -p ds/tasks -a AGENT -m MODEL", "```", ""]
    if harbor_left_out:
        lines += [f"Harbor task folders: {harbor_tasks}, {without_folders(harbor_left_out)}.", ""]
    lines += ["`manifest.json` lists every file with its sha256.", ""]
    return "\n".join(lines)
