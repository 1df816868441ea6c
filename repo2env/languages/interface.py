"""What a profile answers when validation asks which names the hidden tests need
(:meth:`repo2env.languages.base.LanguageProfile.introduced_interface`): one record per name, the
same for every language (docs/quality.md, section 1)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from repo2env.models import InterfaceName

Reading = TypeVar("Reading")


@dataclass(frozen=True)
class InterfaceNeed:
    """One name the tests need and the issue does not give, with what the leak check reads.

    ``name`` is the record validation keeps; ``bare_signature`` the same signature without any
    annotation (shown instead when the leak check finds the annotations give the fix away);
    ``header_lines`` the definition's own header lines, stripped, which the leak check allows
    (they are the signature) while it looks for every other line of the fix.
    """

    name: InterfaceName
    bare_signature: str
    header_lines: tuple[str, ...]


def interface_needs(definitions: Iterable[Any], readings: Mapping[str, Reading], used: Reading,
                    needed: Callable[[Any, Reading], bool]) -> list[InterfaceNeed]:
    """The definitions (each with ``kind``, ``qualified``, ``signature``, ``path``,
    ``bare_signature`` and ``header_lines``) that the tests need, ``needed(definition, reading)``
    asked of what all the tests use (``used``), each with the tests (``readings``: test id ->
    what that test uses) that need it; in the definitions' order."""
    return [InterfaceNeed(name=InterfaceName(kind=definition.kind, name=definition.qualified,
                                             signature=definition.signature, path=definition.path,
                                             tests=sorted(test for test, reading in readings.items()
                                                          if needed(definition, reading))),
                          bare_signature=definition.bare_signature, header_lines=definition.header_lines)
            for definition in definitions if needed(definition, used)]
