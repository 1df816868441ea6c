"""Harness episodes for training, on the CPU (issue 23.3, 23.4): the tiny local model, served by a
small OpenAI-compatible server that returns token ids and log-probabilities (tests/tiny_model_server.py),
drives the real mini-swe-agent through the capturing proxy for two GRPO steps (TRL's rollout_func:
prompt and completion tokens, logprobs, the tool outputs masked, the hidden tests' reward); and the
episodes recorded by harness runs, policy rollouts and RepoEnv become a dataset SFTTrainer trains on."""

from __future__ import annotations

import os

import pytest

trl = pytest.importorskip("trl", reason="the train extra is not installed") if not os.environ.get("CI") else __import__("trl")

from scripted_llm import ScriptedCall, ScriptedLLM, patch_script  # noqa: E402
from tiny_model_server import TinyModelServer  # noqa: E402

from repo2env.harness.proxy import CapturingProxy  # noqa: E402
from repo2env.harness.run import HarnessOptions, run_harness  # noqa: E402
from repo2env.models import EpisodeBudget  # noqa: E402

SUBMIT = ScriptedCall("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})


@pytest.fixture(scope="module")
def partial_pull(demo_repo):
    return next(pull for pull in demo_repo.pulls if len(pull.partial_fixes) >= 2)


@pytest.fixture(scope="module")
def task(graded_demo, partial_pull):
    return graded_demo[partial_pull.number]


@pytest.fixture(scope="module")
def backend(docker_client):
    from repo2env.runtime.backends.docker import DockerBackend

    return DockerBackend(docker_client)


@pytest.fixture(scope="module")
def scripted_traces(task, partial_pull, backend, tmp_path_factory):
    """mini-swe-agent's real conversations on the task: each partial fix applied, then submitted
    (played by the scripted server). They give the prompts the tiny model is taught on, and harness
    traces to export."""
    from repo2env.harness.agents import harness_agent
    from repo2env.verify.grader import Grader

    root = tmp_path_factory.mktemp("scripted-harness")
    grader = Grader(backend, root / "grades", timeout_s=120)
    traces = []
    for fix in partial_pull.partial_fixes[:2]:
        with ScriptedLLM({"fix": [*patch_script(fix.patch), SUBMIT]}) as llm, CapturingProxy(llm.url) as proxy:
            traces.append(run_harness(task, harness_agent("mini-swe-agent"), backend=backend, proxy=proxy,
                                      grader=grader, model="scripted", logs_dir=root / "episodes"))
    assert all(trace.finished == "done" and 0 < trace.reward < 1 for trace in traces)
    assert traces[0].reward != traces[1].reward, "the two partial fixes score apart"
    return root, traces


def _taught_policy(traces):
    """The tiny model and tokenizer, taught both two-turn conversations (a partial fix, then submit):
    each first turn as an answer to the prompt, each second turn after its own tool output."""
    from repo2env.harness.episodes import conversation
    from repo2env.train.tiny import build_model, build_tokenizer, chat_corpus, teach

    conversations = [trace.messages for trace in traces]
    tools = conversation(traces[0].calls)[1]
    tokenizer = build_tokenizer(chat_corpus(conversations, tools))
    model = build_model(tokenizer)
    examples = []
    for messages in conversations:
        first = next(index for index, message in enumerate(messages) if message["role"] == "assistant")
        examples.append((messages[:first], [_as_taught(messages[first])]))
        examples.append((messages[:first + 2], [_as_taught(messages[first + 2])]))
    losses = teach(model, tokenizer, examples, tools, steps=240)
    assert losses[-1] < losses[0] / 10
    return model, tokenizer


def _as_taught(message):
    """An assistant turn as the chat template takes it (tool-call arguments as objects)."""
    import json

    from repo2env.train.tiny import tool_call_turn

    call = message["tool_calls"][0]["function"]
    return tool_call_turn(call["name"], json.loads(call["arguments"]))


@pytest.mark.docker
@pytest.mark.slow
def test_two_grpo_steps_on_mini_swe_agent_episodes_of_the_tiny_model(task, backend, scripted_traces, tmp_path):
    from datasets import Dataset
    from trl import GRPOConfig

    from repo2env.dataset_rows import dataset_row
    from repo2env.harness.agents import harness_agent
    from repo2env.harness.episodes import episode_tokens
    from repo2env.train.harness import HarnessRollouts, harness_grpo_trainer

    _, traces = scripted_traces
    model, tokenizer = _taught_policy(traces)
    dataset = Dataset.from_list([dataset_row(task)])
    args = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=2, per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=512, use_cpu=True, report_to=[], logging_steps=1, save_strategy="no",
                      seed=0, learning_rate=1e-4)
    with TinyModelServer(model, tokenizer, temperature=0.7, max_new_tokens=400) as server, \
            CapturingProxy(server.url) as proxy:
        rollouts = HarnessRollouts(harness_agent("mini-swe-agent"), [task], backend=backend, proxy=proxy, model="tiny",
                                   logs_dir=tmp_path / "rollouts", concurrency=2,
                                   options=HarnessOptions(budget=EpisodeBudget(max_turns=4, max_wall_s=600)))
        trainer = harness_grpo_trainer(model, tokenizer, args, dataset, rollouts)
        try:
            trainer.train()
        finally:
            rollouts.close()
    steps = [entry for entry in trainer.state.log_history if "rewards/harness_reward/mean" in entry]
    assert len(steps) == 2, trainer.state.log_history
    assert len(rollouts.traces) == 4 and all(trace.grade is not None for trace in rollouts.traces)
    assert all(trace.calls and trace.calls[0].prompt_token_ids for trace in rollouts.traces), "token ids captured"
    assert all(call.completion_logprobs for trace in rollouts.traces for call in trace.calls if call.status == 200)
    ran = [trace for trace in rollouts.traces if trace.tool_runs]
    assert ran, "the tiny model's tool calls ran in the sandbox through mini-swe-agent"
    assert all("episode/tool_calls/bash" in entry and "episode/turns" in entry for entry in steps)
    rewards = [trace.reward for trace in rollouts.traces]
    assert [entry["rewards/harness_reward/mean"] for entry in steps] == pytest.approx(
        [sum(rewards[:2]) / 2, sum(rewards[2:]) / 2])
    samples = [episode_tokens(trace.calls) for trace in rollouts.traces]
    assert any(sample.turns >= 2 and 0 in sample.mask and 1 in sample.mask for sample in samples), \
        "a multi-turn sample: the tool output between the model's turns is masked out of the loss"


def test_episode_tokens_mask_what_came_from_outside():
    from repo2env.harness.episodes import episode_tokens
    from repo2env.models import ModelCall

    def call(index, prompt, completion, messages):
        return ModelCall(index=index, request={"messages": messages}, response={"choices": [{"message": {}}]},
                         prompt_token_ids=prompt, completion_token_ids=completion,
                         completion_logprobs=[-0.5] * len(completion))

    opening = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    first = call(0, [1, 2, 3], [4, 5], opening)
    second = call(1, [1, 2, 3, 4, 5, 9, 9], [6], [*opening, {"role": "assistant"}, {"role": "tool"}])
    side = call(2, [7], [8], [{"role": "system", "content": "title"}, {"role": "user", "content": "u"}])
    tokens = episode_tokens([first, side, second])
    assert tokens.prompt_ids == [1, 2, 3] and tokens.completion_ids == [4, 5, 9, 9, 6]
    assert tokens.mask == [1, 1, 0, 0, 1] and tokens.logprobs == [-0.5, -0.5, 0.0, 0.0, -0.5]
    assert tokens.turns == 2 and tokens.prefix_breaks == 0
    rerendered = call(1, [1, 2, 3, 4, 7, 9], [6], second.request["messages"])
    broken = episode_tokens([first, rerendered])
    assert broken.completion_ids == [4, 5] and broken.prefix_breaks == 1


@pytest.mark.docker
@pytest.mark.slow
def test_episodes_of_harnesses_policy_rollouts_and_repo_env_export_for_sft(task, backend, scripted_traces, tmp_path):
    """Traces of the three kinds, exported with ``repo2env export trajectories`` (rejection
    sampling: a minimum reward), load as a dataset SFTTrainer trains the tiny model on, unchanged."""
    from click.testing import CliRunner
    from datasets import load_dataset
    from scripted_llm import gold_script, nothing_script
    from trl import SFTConfig, SFTTrainer

    from repo2env.cli import cli
    from repo2env.dataset_rows import dataset_row
    from repo2env.envs import RepoEnv, RepoEnvConfig
    from repo2env.envs.policy import PolicyClient
    from repo2env.train.tiny import build_model, build_tokenizer, chat_corpus
    from repo2env.verify.grader import Grader

    harness_root, _ = scripted_traces
    grader = Grader(backend, tmp_path / "policy-grades", timeout_s=120)
    with ScriptedLLM({"gold": gold_script(task), "nothing": nothing_script()}, schedule=["gold", "nothing"]) as llm:
        policy = PolicyClient(llm.url, "scripted").rollouts(task, backend, grader, k=2)
    assert [result.reward for result in policy] == [1.0, 0.0]
    env = RepoEnv(RepoEnvConfig(logs_dir=tmp_path / "repo-env", warm_sandboxes=0))
    env.reset(**dataset_row(task))
    env.bash(gold_script(task)[0].arguments["command"])
    assert env.get_reward() == 1.0
    env._close()

    out = tmp_path / "trajectories"
    result = CliRunner().invoke(cli, ["export", "trajectories", str(out), "--from", str(harness_root), "--from",
                                      str(tmp_path), "--min-reward", "0.1"])
    assert result.exit_code == 0, result.output
    assert "4 episodes" in result.output and "1 reward below 0.1" in result.output
    rows = load_dataset(str(out))["train"]
    assert sorted(rows["source"]) == ["harness", "harness", "policy", "repo_env"]
    assert min(rows["reward"]) >= 0.1 and set(rows["instance_id"]) == {task.instance_id}
    repo_env_row = next(row for row in rows if row["source"] == "repo_env")
    call = next(message for message in repo_env_row["messages"] if message["tool_calls"])["tool_calls"][0]
    assert call["function"]["name"] == "bash" and isinstance(call["function"]["arguments"], dict)
    assert {tool["function"]["name"] for tool in repo_env_row["tools"]} >= {"bash", "str_replace", "run_tests"}

    tokenizer = build_tokenizer(chat_corpus([row["messages"] for row in rows], rows[0]["tools"]))
    model = build_model(tokenizer)
    trainer = SFTTrainer(model=model, processing_class=tokenizer, train_dataset=rows,
                         args=SFTConfig(output_dir=str(tmp_path / "sft"), max_steps=3, per_device_train_batch_size=2,
                                        use_cpu=True, report_to=[], logging_steps=1, save_strategy="no",
                                        max_length=4096))
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 3 and all(loss > 0 for loss in losses)
