"""Which profile a change belongs to: the one whose code its source part changes.

A repository may hold several languages (a Python package with a JavaScript front end), so the
choice is made per change, from the paths it touches and the repository at its base commit
(:func:`choose_profile`): the profile whose code files the fix changes, and that can build the
repository there, takes it. A fix in two profiles' code at once, or in code no profile covers
(Go, Rust ...), is rejected with a reason that names the languages found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from repo2env.languages import DEFAULT_LANGUAGE, LanguageProfile, PathRules, RepoFiles, get_profile, profiles

#: Code suffixes (lower case) of languages, so that a change in a language no profile covers is
#: named by it rather than counted as no source change. Markup, data and shell scripts are not here:
#: a change to them alone is no code change.
CODE_LANGUAGES: dict[str, str] = {
    ".go": "go", ".rs": "rust", ".java": "java", ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala",
    ".groovy": "groovy", ".clj": "clojure", ".rb": "ruby", ".php": "php", ".c": "c", ".h": "c", ".cc": "c++",
    ".cpp": "c++", ".cxx": "c++", ".hpp": "c++", ".hh": "c++", ".cs": "c#", ".fs": "f#", ".swift": "swift",
    ".m": "objective-c", ".mm": "objective-c", ".dart": "dart", ".ex": "elixir", ".exs": "elixir",
    ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml", ".lua": "lua", ".pl": "perl", ".pm": "perl", ".r": "r",
    ".jl": "julia", ".zig": "zig", ".nim": "nim", ".pyx": "cython", ".pxd": "cython",
}
#: How many paths a rejection's detail names per language.
_NAMED = 3


@dataclass(frozen=True)
class ProfileChoice:
    """The profile a change belongs to, or why none can take it.

    ``rules`` are the path rules to split the change with: the chosen profile's for this repository
    at this commit, else the default profile's (the change is then rejected, or has no code at all).
    ``rejection`` is (reason, detail) when the change must be dropped: ``mixed_languages`` (the fix
    changes the code of two profiles), ``unsupported_language`` (it changes code only in languages
    no profile covers here). ``languages`` are the languages of the code the fix changes.
    """

    profile: LanguageProfile | None
    rules: PathRules
    rejection: tuple[str, str] | None = None
    languages: tuple[str, ...] = field(default_factory=tuple)


def code_language(path: str) -> str | None:
    """The language of a code file no profile need cover (``a/b.go`` -> ``go``), by its suffix."""
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    return CODE_LANGUAGES.get(name[dot:].lower()) if dot > 0 else None


def choose_profile(paths: Sequence[str], files: RepoFiles) -> ProfileChoice:
    """The profile of a change that touches ``paths`` (every name of every file, binary ones
    excluded) in the repository whose base commit ``files`` holds (module docstring).

    Only a profile with a code file among ``paths`` reads ``files``, and only what its rules need.
    """
    owners: list[tuple[LanguageProfile, PathRules, list[str]]] = []
    unusable: list[tuple[LanguageProfile, list[str]]] = []
    for profile in profiles():
        if not any(profile.path_rules().is_code(path) for path in paths):
            continue
        rules = profile.path_rules(files)
        changed = [path for path in paths if rules.classify(path) == "source" and rules.is_code(path)]
        if not changed:
            continue
        if profile.uses_repository(files, paths):
            owners.append((profile, rules, changed))
        else:
            unusable.append((profile, changed))
    default = get_profile(DEFAULT_LANGUAGE).path_rules()
    if len(owners) == 1:
        profile, rules, _ = owners[0]
        return ProfileChoice(profile, rules, languages=(profile.name,))
    if owners:
        named = " and ".join(f"{profile.title} ({_named(changed)})" for profile, _, changed in owners)
        return ProfileChoice(None, default, ("mixed_languages", f"the fix changes {named} code; a task runs one "
                                                                "language's tests"),
                             tuple(profile.name for profile, _, _ in owners))
    found: dict[str, list[str]] = {}
    for path in paths:
        language = code_language(path)
        if language and default.classify(path) == "source":
            found.setdefault(language, []).append(path)
    details = [f"{language} ({_named(changed)})" for language, changed in found.items()]
    details += [f"{profile.name} ({_named(changed)}; but no {profile.project_files})" for profile, changed in unusable]
    languages = (*found, *(profile.name for profile, _ in unusable))
    if details:
        return ProfileChoice(None, default, ("unsupported_language", "no profile covers the code this fix changes: "
                                             + ", ".join(details)), tuple(languages))
    return ProfileChoice(None, default)


def _named(paths: list[str]) -> str:
    unique = list(dict.fromkeys(paths))
    shown = ", ".join(unique[:_NAMED])
    return shown if len(unique) <= _NAMED else f"{shown} and {len(unique) - _NAMED} more"
