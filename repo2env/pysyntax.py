"""Python source parsed on the host, safely from many threads.

Some CPython releases (3.11.7 on these machines; gh-106905) keep the AST converter's
recursion depth in state that every thread shares, so two threads inside ``ast.parse`` at
once can fail with ``SystemError: AST constructor recursion depth mismatch``. The pipeline
parses in worker threads (validation's variants, the environment spec), so every parse on
the host goes through :func:`parse` (or :func:`literal_eval` for a literal's text, :func:`string_value`
for a libcst string node), one at a time. Scripts that run inside a sandbox are
single-threaded and keep calling :mod:`ast` themselves.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(text: str) -> ast.Module:
    """``ast.parse(text)`` under the process's one parse lock."""
    with _LOCK:
        return ast.parse(text)


def literal_eval(text: str):
    """``ast.literal_eval(text)`` with its parse under the process's one parse lock (evaluating the
    parsed tree needs no lock: it converts nothing)."""
    with _LOCK:
        tree = ast.parse(text.lstrip(" \t"), mode="eval")
    return ast.literal_eval(tree)


def string_value(node):
    """A libcst string node's ``evaluated_value`` under the process's one parse lock: libcst
    computes it with :func:`ast.literal_eval`, which parses."""
    with _LOCK:
        return node.evaluated_value
