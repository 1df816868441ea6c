"""Reading a recorded episode: its main conversation, and its tokens as GRPO trains on them.

A harness may make side calls (OpenCode names the session with a call of its own); the episode's
conversation is the *main thread*: the answered calls that share the longest call's opening (its
system and first user message), in order. Its tokens are the first call's prompt, then every
later call's new prompt tokens (the tool outputs and the chat template's glue, masked out of the
loss) and its completion (the model's own tokens, trained, with their log-probabilities).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from repo2env.models import ModelCall


def main_thread(calls: list[ModelCall]) -> list[ModelCall]:
    """The answered calls of the episode's main conversation, in the order they were made."""
    answered = [call for call in calls if call.status == 200 and call.response and call.refused is None]
    if not answered:
        return []
    longest = max(answered, key=lambda call: (len(call.request.get("messages") or []), call.index))
    opening = _opening(longest)
    return sorted((call for call in answered if _opening(call) == opening), key=lambda call: call.index)


def conversation(calls: list[ModelCall]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(messages, tools) of the main thread: the last call's messages and its answer, and the tools
    it offered; empty when no call was answered."""
    thread = main_thread(calls)
    if not thread:
        return [], []
    last = thread[-1]
    messages = [dict(message) for message in last.request.get("messages") or []]
    answer = ((last.response or {}).get("choices") or [{}])[0].get("message")
    if isinstance(answer, dict):
        messages.append({key: value for key, value in answer.items() if value is not None or key == "content"})
    return messages, list(last.request.get("tools") or [])


@dataclass(frozen=True)
class EpisodeTokens:
    """One episode as a GRPO sample."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    """Per completion token (0.0 where masked); None when a call came without them."""
    mask: list[int]
    """1 for the model's own tokens, 0 for what came from outside (tool outputs, template glue)."""
    turns: int
    """Model calls in the sample."""
    prefix_breaks: int
    """1 when a later call's prompt did not extend the earlier one's tokens (the chat template
    re-rendered the history differently): the sample stops before it."""


def episode_tokens(calls: list[ModelCall]) -> EpisodeTokens | None:
    """The main thread's tokens (module docstring), or None when the upstream gave no token ids."""
    thread = [call for call in main_thread(calls)
              if call.prompt_token_ids is not None and call.completion_token_ids is not None]
    if not thread:
        return None
    prompt = list(thread[0].prompt_token_ids or [])
    sequence = list(prompt)
    completion: list[int] = []
    logprobs: list[float] = []
    mask: list[int] = []
    have_logprobs = True
    turns = breaks = 0
    for call in thread:
        call_prompt = call.prompt_token_ids or []
        if call_prompt[:len(sequence)] != sequence:
            breaks = 1
            break
        added = call_prompt[len(sequence):]
        completion += added
        logprobs += [0.0] * len(added)
        mask += [0] * len(added)
        own = list(call.completion_token_ids or [])
        own_logprobs = call.completion_logprobs
        if own_logprobs is None or len(own_logprobs) != len(own):
            have_logprobs = False
            own_logprobs = [0.0] * len(own)
        completion += own
        logprobs += list(own_logprobs)
        mask += [1] * len(own)
        sequence = list(call_prompt) + own
        turns += 1
    return EpisodeTokens(prompt_ids=prompt, completion_ids=completion, logprobs=logprobs if have_logprobs else None,
                         mask=mask, turns=turns, prefix_breaks=breaks)


def _opening(call: ModelCall) -> str:
    messages = call.request.get("messages") or []
    system = next((message for message in messages if message.get("role") == "system"), None)
    user = next((message for message in messages if message.get("role") == "user"), None)
    return json.dumps([system and system.get("content"), user and user.get("content")], sort_keys=True, default=str)
