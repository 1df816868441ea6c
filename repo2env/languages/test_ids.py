"""Test ids: ``<file>::<rest>``, split the way pytest splits its node ids
(``<file>::<class>::<function>[<parameters>]``).

Every profile writes an id's file first, up to the first ``::`` (a JavaScript id is
``<file>::<describe> > <title>``), so the file part is the same for all; the rest is pytest's
shape. The parameters are opaque: they may hold ``::``, ``.``, ``/``, ``[`` and ``]``, so an id is
never split on every ``::``. Every layer reads ids through these functions (the grader's JUnit
reading, validation's report, the agent's ``run_tests`` tool, the interface probe), so they live
here, below all of them and beside no one language's profile.
"""

from __future__ import annotations


def split_node_id(node_id: str) -> tuple[str, list[str], str]:
    """(file path, names, parameters with their brackets) of a node id, split as pytest splits it:
    the path ends at the first ``::``, the parameters start at the first ``[`` after it
    (``a.py::T::f[x::y]`` -> ``("a.py", ["T", "f"], "[x::y]")``)."""
    path, separator, rest = node_id.partition("::")
    if not separator:
        return path, [], ""
    names, bracket, params = rest.partition("[")
    return path, names.split("::"), bracket + params


def short_name(node_id: str) -> str:
    """The test's own name with its parameters (``a.py::T::f[x::y]`` -> ``f[x::y]``); the file for
    an id that names a file."""
    path, names, params = split_node_id(node_id)
    return names[-1] + params if names else path


__all__ = ["short_name", "split_node_id"]
