"""What a profile answers when validation asks which names the hidden tests need
(:meth:`repo2env.languages.base.LanguageProfile.introduced_interface`): one record per name, the
same for every language (docs/quality.md, section 1)."""

from __future__ import annotations

from dataclasses import dataclass

from repo2env.models import InterfaceName


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
