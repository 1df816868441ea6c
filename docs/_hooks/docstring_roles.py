"""A griffe extension for the API reference: the Sphinx roles the package's docstrings use
(``:func:`x```, ``:class:`~a.b.C```, ``:meth:``, ``:attr:``, ``:data:``, ``:mod:``) shown as code."""

from __future__ import annotations

import re

import griffe

_ROLE = re.compile(r":(?:func|class|meth|attr|data|mod|exc|obj):`~?([^`]+)`")


class SphinxRolesAsCode(griffe.Extension):
    """``:role:`target``` -> ```target```, in every docstring of the loaded objects."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(r"`\1`", obj.docstring.value)
