"""GRPO on harness rollouts: a TRL ``rollout_func`` whose episodes are a real harness's.

TRL 1.16's contract (``GRPOTrainer(rollout_func=...)``, read in its source): the function gets the
prompts of the process's batch (each prompt repeated ``num_generations`` times, so consecutive
entries form a group) and the trainer, and returns a dict of per-sample lists: ``prompt_ids``,
``completion_ids``, ``logprobs`` (or None), optionally ``env_mask`` (1 for the model's tokens, 0
for tokens that came from outside: TRL masks them out of the loss), and any other field, which
TRL passes on to the reward functions by name. With ``use_vllm=True`` TRL pushes the new weights
into its vLLM server before each call, so the harness samples the current policy.

:class:`HarnessRollouts` runs one harness episode per prompt (``concurrency`` sandboxes at once)
through the capturing proxy in front of the policy's server, grades each with the hidden tests,
and turns each trace into a sample: the first model call's prompt tokens as ``prompt_ids``, then
every later call's new prompt tokens (tool outputs, masked) and each call's completion (the
model's, with its log-probabilities) as ``completion_ids``. The reward is the grade
(``env_reward``, read by :func:`harness_reward`), and :func:`harness_metrics`, a reward function
of weight 0, logs the episode signals ``repo2env train`` logs (tool calls, repeated calls,
tampering, timeouts, diff size) plus the harness's own (turns, cut-offs, injected faults).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo2env.envs.tools import TOOL_NAMES
from repo2env.errors import InputError
from repo2env.harness.agents import HarnessAgent
from repo2env.harness.episodes import EpisodeTokens, episode_tokens
from repo2env.harness.proxy import CapturingProxy
from repo2env.harness.run import HarnessOptions, run_harness
from repo2env.instruction import instruction_text
from repo2env.models import EpisodeTrace, Task
from repo2env.runtime.backend import Backend
from repo2env.train.run import diff_size


@dataclass
class HarnessRollouts:
    """A ``rollout_func`` (call it as ``rollouts(prompts, trainer)``) over ``tasks``: each prompt of
    the batch is matched to its task by its last user turn (the task's instruction, as published
    rows carry it), and the episode runs ``agent`` on it through ``proxy``."""

    agent: HarnessAgent
    tasks: Sequence[Task]
    backend: Backend
    proxy: CapturingProxy
    model: str
    logs_dir: Path
    options: HarnessOptions = field(default_factory=HarnessOptions)
    concurrency: int = 2
    grade_timeout_s: float = 600.0
    traces: list[EpisodeTrace] = field(default_factory=list)
    """Every episode of the run, in order (the last batch's are the last ``len(prompts)``)."""

    def __post_init__(self) -> None:
        from repo2env.verify.grader import Grader

        self._by_instruction = {instruction_text(task).strip(): task for task in self.tasks}
        self._grader = Grader(self.backend, Path(self.logs_dir) / "grades", timeout_s=self.grade_timeout_s, keep_warm=True)
        self._lock = threading.Lock()

    def task_of(self, prompt: Any) -> Task:
        """The task a prompt (a conversation, or text) poses."""
        if isinstance(prompt, list):
            users = [message.get("content") for message in prompt if isinstance(message, dict) and message.get("role") == "user"]
            text = users[-1] if users else ""
        else:
            text = str(prompt)
        if isinstance(text, list):
            text = "".join(part.get("text", "") for part in text if isinstance(part, dict))
        task = self._by_instruction.get(str(text).strip())
        if task is None:
            raise InputError("a prompt of the batch is no task's instruction",
                             hint="train on the published rows of the tasks given to HarnessRollouts")
        return task

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any] | None]:
        tasks = [self.task_of(prompt) for prompt in prompts]
        with ThreadPoolExecutor(max_workers=max(1, self.concurrency), thread_name_prefix="repo2env-rollout") as pool:
            traces = list(pool.map(self._episode, tasks))
        with self._lock:
            self.traces.extend(traces)
        tokenizer = getattr(trainer, "processing_class", None)
        samples = [episode_tokens(trace.calls) or _fallback_tokens(trace, task, tokenizer)
                   for trace, task in zip(traces, tasks, strict=True)]
        logprobs = [sample.logprobs for sample in samples]
        output: dict[str, list[Any] | None] = {
            "prompt_ids": [sample.prompt_ids for sample in samples],
            "completion_ids": [sample.completion_ids for sample in samples],
            # TRL corrects for the sampler's log-probabilities when every sample has them.
            "logprobs": logprobs if all(entry is not None for entry in logprobs) else None,
            "env_mask": [sample.mask for sample in samples],
            "env_reward": [float(trace.reward or 0.0) for trace in traces],
        }
        signals = [harness_signals(trace, sample) for trace, sample in zip(traces, samples, strict=True)]
        for name in signals[0] if signals else ():
            output[f"episode_{name.replace('/', '_')}"] = [row[name] for row in signals]
        return output

    def _episode(self, task: Task) -> EpisodeTrace:
        return run_harness(task, self.agent, backend=self.backend, proxy=self.proxy, grader=self._grader,
                           model=self.model, logs_dir=Path(self.logs_dir) / "episodes", options=self.options)

    def close(self) -> None:
        """Remove the grader's warm sandboxes."""
        self._grader.close()


def harness_signals(trace: EpisodeTrace, sample: EpisodeTokens | None = None) -> dict[str, float]:
    """What one graded harness episode shows: ``repo2env train``'s signals (tool calls by tool,
    repeated identical calls, tampering, timeouts, diff lines, reward) and the harness's own."""
    calls = _tool_calls(trace)
    by_tool = Counter(name for name, _ in calls)
    grade = trace.grade
    timeouts = sum(run.exit_code == 124 for run in trace.tool_runs) + bool(grade and grade.error and "timed out" in grade.error)
    signals = {f"tool_calls/{name}": float(by_tool.get(name, 0)) for name in TOOL_NAMES}
    signals.update({
        "tool_calls/total": float(len(calls)),
        "repeated_calls": float(len(calls) - len(set(calls))),
        "tampered": float(bool(grade and grade.tampered)),
        "timeouts": float(timeouts),
        "diff_lines": float(diff_size(trace.patch)),
        "reward": float(trace.reward or 0.0),
        "turns": float(sum(call.status == 200 and call.refused is None for call in trace.calls)),
        "cut_off": float(trace.cut_off is not None),
        "perturbations": float(trace.perturbation_count),
        "done": float(trace.finished == "done"),
        "prefix_breaks": float(sample.prefix_breaks if sample else 0),
    })
    return signals


def harness_reward(completions: list[Any], env_reward: list[float] | None = None, **_: Any) -> list[float]:
    """The hidden tests' reward of each harness episode (the ``env_reward`` the rollouts returned)."""
    if env_reward is None:
        raise InputError("no env_reward column: harness_reward goes with HarnessRollouts as the rollout_func")
    return [float(value) for value in env_reward]


def harness_metrics(completions: list[Any], log_metric=None, log_extra=None, **columns: Any) -> list[float]:
    """A reward function of weight 0 that only logs each episode's signals (``episode/<name>``)."""
    count = len(completions)
    for key, values in columns.items():
        if not key.startswith("episode_") or not isinstance(values, list) or len(values) != count:
            continue
        name = "episode/" + key.removeprefix("episode_").replace("tool_calls_", "tool_calls/")
        if log_metric is not None and values:
            log_metric(name, sum(values) / len(values))
        if log_extra is not None:
            log_extra(name.removeprefix("episode/"), list(values))
    return [0.0] * count


def harness_grpo_trainer(model, tokenizer, args, train_dataset, rollouts: HarnessRollouts, *, callbacks=()):
    """``GRPOTrainer`` whose generations are ``rollouts``' harness episodes: the reward is
    :func:`harness_reward` (weight 1) and :func:`harness_metrics` logs (weight 0). ``args``: a
    GRPOConfig; its ``reward_weights`` are set here."""
    from trl import GRPOTrainer

    from repo2env.train.run import trl_ready

    args.reward_weights = [1.0, 0.0]
    return GRPOTrainer(model=model, processing_class=tokenizer, args=args, reward_funcs=[harness_reward, harness_metrics],
                       train_dataset=trl_ready(train_dataset), rollout_func=rollouts, callbacks=list(callbacks))


def _tool_calls(trace: EpisodeTrace) -> list[tuple[str, str]]:
    """(tool, arguments) of every tool call of the episode: what ran through the bridge, else what
    the model asked for in its messages (a harness inside the sandbox runs its own tools)."""
    if trace.tool_runs:
        return [(run.tool, json.dumps(run.arguments, sort_keys=True)) for run in trace.tool_runs]
    calls = []
    for message in trace.messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments")
            calls.append((str(function.get("name", "")), arguments if isinstance(arguments, str) else json.dumps(arguments)))
    return calls


def _fallback_tokens(trace: EpisodeTrace, task: Task, tokenizer) -> EpisodeTokens:
    """A sample for an episode the upstream gave no token ids for: its conversation tokenised with
    the trainer's chat template (no log-probabilities), or, with no conversation at all, the task's
    instruction and a single masked end-of-turn token (it trains on nothing; its reward still counts
    in its group's mean)."""
    if tokenizer is None:
        raise InputError("the model server returned no token ids and the trainer has no tokenizer",
                         hint="serve the policy with vLLM (it returns token ids) or give GRPOTrainer a processing_class")
    messages = trace.messages or [{"role": "user", "content": instruction_text(task)}]
    first = next((index for index, message in enumerate(messages) if message.get("role") == "assistant"), len(messages))
    render = {"tools": trace.tools or None, "tokenize": True, "return_dict": True}
    prompt = tokenizer.apply_chat_template(messages[:first], add_generation_prompt=True, **render)["input_ids"]
    if first == len(messages):
        return EpisodeTokens(prompt_ids=list(prompt), completion_ids=[tokenizer.eos_token_id], logprobs=None, mask=[0],
                             turns=0, prefix_breaks=0)
    completion: list[int] = []
    mask: list[int] = []
    done = list(prompt)
    for end in range(first + 1, len(messages) + 1):
        ids = tokenizer.apply_chat_template(messages[:end], **render)["input_ids"]
        if ids[:len(done)] != done:
            break
        own = messages[end - 1].get("role") == "assistant"
        completion += ids[len(done):]
        mask += [int(own)] * (len(ids) - len(done))
        done = list(ids)
    return EpisodeTokens(prompt_ids=list(prompt), completion_ids=completion or [tokenizer.eos_token_id], logprobs=None,
                         mask=mask or [0], turns=sum(message.get("role") == "assistant" for message in messages),
                         prefix_breaks=0)
