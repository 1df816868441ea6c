"""What the agent is told: one text for every place a task meets a model (policy rollouts in
validation, the published dataset's ``prompt`` column, Harbor's ``instruction.md``, RepoEnv)."""

from __future__ import annotations

from repo2env.models import Task

SYSTEM_PROMPT = """You are a software engineer working in a Linux sandbox without network access.
A Python repository is checked out at /testbed. Use the tools to explore it, edit its files and run its tests.
When the issue is fixed, answer with a short summary and no tool call: that ends your work.
Your change is judged by tests you cannot see, so fix the cause described in the issue rather than a symptom."""

USER_TEMPLATE = """Resolve the following issue in the repository at /testbed.

<issue>
{problem_statement}
</issue>

Edit the repository's files to fix it, then stop."""


def instruction_text(task: Task) -> str:
    """The user turn: the issue, framed."""
    return USER_TEMPLATE.format(problem_statement=task.problem_statement.strip())


def agent_messages(task: Task) -> list[dict[str, str]]:
    """The conversation an episode starts from (system + user), in the chat format TRL and
    OpenAI-compatible APIs take."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": instruction_text(task)}]
