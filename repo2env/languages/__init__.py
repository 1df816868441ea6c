"""Language profiles, looked up by name: the seam that lets a stage work on any language without
knowing which one it is.

``PROFILES`` maps a language's name (the value of ``Task.language``) to the class that answers for it,
imported only when first asked for, so mining a Python repository never imports the JavaScript
profile's parsers. A third language is one new folder here and one line in ``PROFILES``; no stage
changes (``docs/languages.md`` walks through it).
"""

from __future__ import annotations

import importlib
import threading

from repo2env.errors import InputError
from repo2env.languages.base import LanguageProfile, PathKind, PathRules, VersionSources
from repo2env.languages.files import DictRepoFiles, RepoFiles

__all__ = ["DEFAULT_LANGUAGE", "PROFILES", "DictRepoFiles", "LanguageProfile", "PathKind", "PathRules", "RepoFiles",
           "VersionSources", "get_profile", "language_names", "profiles"]

#: Language name -> "module:class" of its profile.
PROFILES: dict[str, str] = {
    "python": "repo2env.languages.python.profile:PythonProfile",
    "javascript": "repo2env.languages.javascript.profile:JavaScriptProfile",
}
#: The language of a task that names none (every row written before tasks had a language).
DEFAULT_LANGUAGE = "python"

_loaded: dict[str, LanguageProfile] = {}
_loading = threading.Lock()


def get_profile(name: str = DEFAULT_LANGUAGE) -> LanguageProfile:
    """The profile of language ``name`` (one instance per process)."""
    profile = _loaded.get(name)
    if profile is not None:
        return profile
    try:
        where = PROFILES[name]
    except KeyError:
        raise InputError(f"no language profile {name!r}", hint=f"known languages: {', '.join(PROFILES)}") from None
    with _loading:
        if name not in _loaded:
            module, _, attribute = where.partition(":")
            _loaded[name] = getattr(importlib.import_module(module), attribute)()
    return _loaded[name]


def profiles() -> list[LanguageProfile]:
    """Every registered profile, in registry order."""
    return [get_profile(name) for name in PROFILES]


def language_names() -> tuple[str, ...]:
    """The registered languages' names."""
    return tuple(PROFILES)
