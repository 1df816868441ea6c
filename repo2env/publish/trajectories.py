"""``repo2env export trajectories``: recorded episodes as a dataset for SFT and distillation.

Every episode repo2env records leaves a ``trace.json`` (:class:`~repo2env.models.EpisodeTrace`)
next to its grading's logs: harness runs (``repo2env harness run``, GRPO's harness rollouts),
validation's policy rollouts and RepoEnv's training episodes. This exporter finds them under the
given folders and writes one row per episode in TRL's conversational tool-calling format, which
``SFTTrainer`` takes unchanged:

- ``messages``: system, user, assistant and tool turns; an assistant's ``tool_calls`` are
  ``{"type": "function", "function": {"name", "arguments": {...}}}`` with the arguments as an
  object, a tool turn carries the ``name`` of the tool it answers;
- ``tools``: the tools the episode offered (JSON schemas, OpenAI's function format);
- ``reward``, ``instance_id``, ``resolved``, ``tampered``, ``source``, ``agent``, ``model``,
  ``finished``, ``episode_id``.

Tool-call arguments differ in shape from call to call, so the columns holding them are
``datasets``' ``Json`` type (stored as JSON text, read back as objects). ``min_reward`` keeps the
episodes that scored at least that much (rejection-sampling SFT); a tampered episode is never
exported. The folder is written whole or not at all: ``data/train-<hash>.parquet`` and a card
(``README.md``) that declares it.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from repo2env.errors import InputError
from repo2env.folders import write_folder
from repo2env.models import EpisodeTrace

TRACE_FILE = "trace.json"
#: Roles kept in an exported conversation (a harness's own bookkeeping turns are not the model's).
ROLES = ("system", "user", "assistant", "tool")


@dataclass
class TrajectoryExport:
    """What an export wrote, and what it left out (by reason)."""

    root: Path
    rows: int = 0
    by_source: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)


def find_traces(roots: Sequence[Path]) -> list[Path]:
    """Every ``trace.json`` under ``roots`` (each file once, in path order)."""
    found: dict[Path, None] = {}
    for root in roots:
        root = Path(root)
        if not root.exists():
            raise InputError(f"{root} does not exist", hint="pass folders holding episode traces (trace.json)")
        candidates = [root] if root.is_file() else sorted(root.rglob(TRACE_FILE))
        for path in candidates:
            found.setdefault(path.resolve(), None)
    return list(found)


def trajectory_row(trace: EpisodeTrace) -> dict[str, Any]:
    """One episode as a row of TRL's conversational tool-calling format (module docstring); a
    ValueError says why an episode cannot be one (no conversation, arguments that are not JSON)."""
    if not trace.messages:
        raise ValueError("no conversation")
    names: dict[str, str] = {}
    messages = []
    for message in trace.messages:
        role = message.get("role")
        if role not in ROLES:
            continue
        row: dict[str, Any] = {"role": role, "content": _text(message.get("content"))}
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments or "{}")
                except ValueError:
                    raise ValueError("a tool call's arguments are not JSON") from None
            if not isinstance(arguments, dict):
                raise ValueError("a tool call's arguments are not a JSON object")
            calls.append({"type": "function", "function": {"name": str(function.get("name", "")), "arguments": arguments}})
            if call.get("id"):
                names[str(call["id"])] = str(function.get("name", ""))
        if calls:
            row["tool_calls"] = calls
        if role == "tool":
            row["name"] = names.get(str(message.get("tool_call_id")), message.get("name") or "")
        messages.append(row)
    if not any(message["role"] == "assistant" for message in messages):
        raise ValueError("no assistant turn")
    grade = trace.grade
    return {"messages": messages, "tools": trace.tools, "reward": trace.reward, "instance_id": trace.instance_id,
            "resolved": bool(grade and grade.resolved), "tampered": bool(grade and grade.tampered),
            "source": trace.source, "agent": trace.agent, "model": trace.model, "finished": trace.finished,
            "episode_id": trace.episode_id}


def export_trajectories(roots: Sequence[Path], out_dir: Path, *, min_reward: float | None = None,
                        overwrite: bool = False) -> TrajectoryExport:
    """Write the episodes traced under ``roots`` to ``out_dir`` (module docstring)."""
    from datasets import Dataset, Features, Json, List, Value

    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise InputError(f"{out_dir} is not empty", hint="choose another folder or pass --overwrite")
    summary = TrajectoryExport(root=out_dir)
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for path in find_traces(roots):
        try:
            trace = EpisodeTrace.model_validate_json(path.read_text())
        except (OSError, ValidationError, ValueError):
            summary.skipped["not a trace"] += 1
            continue
        if trace.episode_id in seen:
            summary.skipped["seen already"] += 1
            continue
        seen.add(trace.episode_id)
        if trace.grade is not None and trace.grade.tampered:
            summary.skipped["tampered"] += 1
            continue
        if min_reward is not None and (trace.reward is None or trace.reward < min_reward):
            summary.skipped[f"reward below {min_reward:g}"] += 1
            continue
        try:
            rows.append(trajectory_row(trace))
        except ValueError as exc:
            summary.skipped[str(exc)] += 1
            continue
        summary.by_source[trace.source] += 1
    if not rows:
        reasons = ", ".join(f"{count} {why}" for why, count in summary.skipped.items()) or "no trace.json found"
        raise InputError(f"no episode to export under {', '.join(map(str, roots))} ({reasons})",
                         hint="traces are written by 'repo2env harness run', policy rollouts and RepoEnv episodes")
    message = {"role": Value("string"), "content": Value("string"), "tool_calls": List(Json()), "name": Value("string")}
    features = Features({"messages": List(message), "tools": List(Json()), "reward": Value("float64"),
                         "instance_id": Value("string"), "resolved": Value("bool"), "tampered": Value("bool"),
                         "source": Value("string"), "agent": Value("string"), "model": Value("string"),
                         "finished": Value("string"), "episode_id": Value("string")})
    for row in rows:
        for message_row in row["messages"]:
            message_row.setdefault("tool_calls", None)
            message_row.setdefault("name", None)
    dataset = Dataset.from_list(rows, features=features)
    # The file's name is the export's own: ``datasets`` caches a local folder's dataset under its
    # folder name and its card's data_files patterns only, so a generic name would load an earlier
    # export of a folder of the same name from the cache.
    digest = hashlib.sha256("\n".join(sorted(row["episode_id"] for row in rows)).encode()).hexdigest()[:12]
    data_file = f"data/train-{digest}.parquet"

    def write(folder: Path) -> None:
        (folder / "data").mkdir()
        dataset.to_parquet(str(folder / data_file))
        (folder / "README.md").write_text(_card(summary, len(rows), min_reward, data_file))

    write_folder(out_dir, write, overwrite=overwrite)
    summary.rows = len(rows)
    return summary


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def _card(summary: TrajectoryExport, rows: int, min_reward: float | None, data_file: str) -> str:
    sources = ", ".join(f"{count} from {source}" for source, count in sorted(summary.by_source.items()))
    kept = f"episodes with reward >= {min_reward:g}" if min_reward is not None else "every episode"
    return f"""---
configs:
- config_name: default
  data_files:
  - split: train
    path: {data_file}
tags: [repo2env, trajectories, tool-calling, sft]
---

# repo2env trajectories

{rows} agent episodes ({sources}): {kept}, tampered ones left out. Each row is one episode in TRL's
conversational tool-calling format (`messages` with `tool_calls`, `tools`) with its `reward` from the
hidden tests and its task's `instance_id`; `SFTTrainer(train_dataset=load_dataset(this folder)["train"])`
takes it as it is.
"""
