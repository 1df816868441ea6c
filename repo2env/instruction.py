"""What the agent is told: one text for every place a task meets a model (policy rollouts in
validation, the published dataset's ``prompt`` column, Harbor's ``instruction.md``, RepoEnv and
the OpenEnv server's reset).

The issue, and when validation found that the hidden tests use names the fix introduces and the
issue never names, an Interface section listing them (``Task.interface``: names and signatures
only, see repo2env.validate.quality)."""

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
{interface}
Edit the repository's files to fix it, then stop."""

INTERFACE_TEMPLATE = """<interface>
The hidden tests use these names, which your change must provide (signatures only; `...` marks a default value):
{interface}
</interface>"""


def interface_block(interface: str) -> str:
    """The Interface section as the instruction shows it (``""`` for no interface)."""
    return INTERFACE_TEMPLATE.format(interface=interface.strip()) if interface.strip() else ""


def instruction_text(task: Task) -> str:
    """The user turn: the issue, framed, and the Interface section when the task has one."""
    block = interface_block(task.interface)
    return USER_TEMPLATE.format(problem_statement=task.problem_statement.strip(),
                                interface=f"\n{block}\n" if block else "")


def agent_messages(task: Task) -> list[dict[str, str]]:
    """The conversation an episode starts from (system + user), in the chat format TRL and
    OpenAI-compatible APIs take."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": instruction_text(task)}]
