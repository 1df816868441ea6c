"""Tool results as the capturing proxy sees them, for a harness that runs its own tools.

A harness inside the sandbox (OpenCode, a command) runs its tools itself; the only place its tool
calls pass is the proxy, as ``tool`` messages (OpenAI's chat format) in its next requests to the
model, each answering an assistant ``tool_calls`` entry by ``tool_call_id``. :class:`ToolResults`
records each result the first time a request carries it (a :class:`~repo2env.models.ToolRun`) and
applies the episode's tool faults to what the model is sent: a drawn ``output_cut`` cuts the
content, a drawn ``tool_timeout`` replaces it with the note a killed command leaves. The harness's
own process keeps the real output; only the model sees the fault.

A result is known by its ``tool_call_id`` and how many results with that id came before it in the
request (a server that reuses ids across turns still gets one decision per result). Its number in
the episode is the order in which the proxy first saw it, and its fault is decided once, under the
seed, by that number and remembered: the same result in every later request gets the same
treatment, so the model's history does not change under it.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

from repo2env import defaults
from repo2env.harness.perturb import TIMEOUT_NOTE, Perturber
from repo2env.models import TOOL_RUN_OUTPUT_CHARS, PerturbationKind, ToolRun

#: A tool result's key: its tool_call_id ("" without one) and its occurrence among the request's
#: results with that id.
ResultKey = tuple[str, int]


class ToolResults:
    """The tool results of one episode seen at the proxy (thread-safe)."""

    def __init__(self, perturber: Perturber | None) -> None:
        self.perturber = perturber
        self._seen: dict[ResultKey, tuple[int, PerturbationKind | None]] = {}
        self._runs: list[ToolRun] = []
        self._lock = threading.Lock()

    def as_sent(self, messages: Any, at_s: float) -> Any:
        """``messages`` as the model gets them: each tool result with its fault applied (a new list;
        ``messages`` is left as it is). Results not seen before are recorded."""
        if not isinstance(messages, list):
            return messages
        calls = _tool_calls(messages)
        occurrences: Counter[str] = Counter()
        sent = []
        with self._lock:
            for message in messages:
                if not isinstance(message, dict) or message.get("role") != "tool":
                    sent.append(message)
                    continue
                call_id = str(message.get("tool_call_id") or "")
                key = (call_id, occurrences[call_id])
                occurrences[call_id] += 1
                first_time = key not in self._seen
                if first_time:
                    number = len(self._seen)
                    fault = self.perturber.tool_fault(number) if self.perturber else None
                    self._seen[key] = (number, fault)
                number, fault = self._seen[key]
                if fault is not None:
                    message = {**message, "content": self._faulty(message.get("content"), fault, number)}
                sent.append(message)
                if first_time:
                    name, arguments = calls.get(key, ("", {}))
                    self._runs.append(ToolRun(
                        index=number, at_s=round(at_s, 3), tool=name, arguments=arguments,
                        output=_text(message.get("content"))[:TOOL_RUN_OUTPUT_CHARS],
                        exit_code=124 if fault == "tool_timeout" else None, perturbation=fault,
                        recorded_at="proxy", tool_call_id=call_id or None))
        return sent

    def runs(self) -> list[ToolRun]:
        """The results recorded so far, in the order first seen."""
        with self._lock:
            return list(self._runs)

    def _faulty(self, content: Any, fault: PerturbationKind, number: int) -> Any:
        if fault == "tool_timeout":
            # The harness's own timeout is unknown here: the note names the tool set's.
            text = TIMEOUT_NOTE.format(seconds=defaults.TOOL_COMMAND_TIMEOUT_S)
        else:
            text = self.perturber.cut(_text(content), number) if self.perturber else _text(content)
        # Content given as parts stays parts: one text part.
        return [{"type": "text", "text": text}] if isinstance(content, list) else text


def _tool_calls(messages: list[Any]) -> dict[ResultKey, tuple[str, dict[str, Any]]]:
    """(tool name, arguments) of each assistant tool call, keyed as the results answering them are."""
    calls: dict[ResultKey, tuple[str, dict[str, Any]]] = {}
    occurrences: Counter[str] = Counter()
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or []:
            if not isinstance(call, dict):
                continue
            call_id = str(call.get("id") or "")
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    arguments = {"arguments": arguments}  # not JSON: kept as the model wrote it
            calls[(call_id, occurrences[call_id])] = (str(function.get("name") or ""),
                                                     arguments if isinstance(arguments, dict) else {})
            occurrences[call_id] += 1
    return calls


def _text(content: Any) -> str:
    """A message's content as text (content parts joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content if isinstance(part, dict))
    return ""
