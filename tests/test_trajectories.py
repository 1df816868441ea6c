"""``export trajectories`` on hand-written traces (no Docker): rows, filters, the folder written whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repo2env.errors import InputError
from repo2env.models import EpisodeTrace
from repo2env.publish.trajectories import export_trajectories


def _trace(folder: Path, episode: str, reward: float) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})}}
    trace = EpisodeTrace(episode_id=episode, instance_id="acme__widgets-2", source="policy", agent="policy", model="m",
                         messages=[{"role": "system", "content": "You fix bugs."},
                                   {"role": "user", "content": "fix it"},
                                   {"role": "assistant", "content": None, "tool_calls": [call]},
                                   {"role": "tool", "tool_call_id": "call_1", "content": "README.md"},
                                   {"role": "assistant", "content": "done"}],
                         finished="stop", reward=reward)
    (folder / episode).mkdir(parents=True)
    (folder / episode / "trace.json").write_text(trace.model_dump_json())


def test_traces_become_a_dataset_and_a_failed_export_leaves_the_old_one(tmp_path):
    from datasets import load_dataset

    runs = tmp_path / "runs"
    _trace(runs, "e1", 1.0)
    _trace(runs, "e2", 0.0)
    out = tmp_path / "sft"
    written = export_trajectories([runs], out, min_reward=0.5)
    assert written.rows == 1 and written.skipped == {"reward below 0.5": 1}
    rows = load_dataset(str(out), split="train")
    assert rows["episode_id"] == ["e1"] and rows[0]["messages"][2]["tool_calls"][0]["function"]["name"] == "bash"
    before = sorted(path.name for path in out.rglob("*"))
    with pytest.raises(InputError, match="not empty"):
        export_trajectories([runs], out)
    with pytest.raises(InputError, match="no episode to export"):
        export_trajectories([runs], out, min_reward=2.0, overwrite=True)
    assert sorted(path.name for path in out.rglob("*")) == before, "a refused export changes nothing"
    assert export_trajectories([runs], out, overwrite=True).rows == 2
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".")] == [], "no staging folder left"

