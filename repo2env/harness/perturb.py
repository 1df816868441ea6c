"""Faults injected into an episode, as real deployments meet them: a tool call that times out, a
command whose output is cut, a model endpoint that fails for a moment and must be retried.

Each decision is a pure function of the plan's seed, the episode and the event's number in it
(the n-th request to the model, the n-th tool call), so a run with the same seed meets the same
faults, and a retried model call gets a fresh draw (a transient failure does not repeat forever).
Faults reach the agent only: the model's answers and the commands' outputs it sees. Grading takes
the sandbox's diff into a fresh sandbox, so no fault can change what the hidden tests see.
"""

from __future__ import annotations

import hashlib
import random

from repo2env.models import PerturbationKind, PerturbationPlan

#: What a tool call that "timed out" answers: what the tool set answers for a command it killed.
TIMEOUT_NOTE = "[timed out after {seconds:.0f} s: the command was killed]\n[exit 124]"


class Perturber:
    """The faults of one episode under ``plan``."""

    def __init__(self, plan: PerturbationPlan, episode_id: str) -> None:
        self.plan = plan
        self.episode_id = episode_id

    def _draw(self, kind: PerturbationKind, number: int) -> random.Random:
        key = f"{self.plan.seed}:{self.episode_id}:{kind}:{number}".encode()
        return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))

    def endpoint_failure(self, request_number: int) -> bool:
        """Whether the ``request_number``-th model request of the episode fails (HTTP 503)."""
        return self.plan.endpoint_failure > 0 and self._draw("endpoint_failure", request_number).random() < \
            self.plan.endpoint_failure

    def tool_fault(self, call_number: int) -> PerturbationKind | None:
        """The fault of the ``call_number``-th tool call (a timeout wins over a cut), or None."""
        if self.plan.tool_timeout > 0 and self._draw("tool_timeout", call_number).random() < self.plan.tool_timeout:
            return "tool_timeout"
        if self.plan.output_cut > 0 and self._draw("output_cut", call_number).random() < self.plan.output_cut:
            return "output_cut"
        return None

    def cut(self, answer: str, call_number: int) -> str:
        """``answer`` with its output cut at a drawn point (its last line, the exit status, kept):
        what a pipe that broke, or a terminal that dropped output, leaves."""
        body, separator, status = answer.rpartition("\n[exit ")
        if not separator:
            body, status = answer, ""
        keep = int(len(body) * self._draw("output_cut", call_number).uniform(0.1, 0.6))
        return body[:keep] + (separator + status if separator else "")
