"""tree-sitter's JavaScript and TypeScript grammars, as the profile's syntax-tree readers use them
(variants, the interface): one parser per grammar, chosen by a file's suffix."""

from __future__ import annotations

from functools import cache

TYPESCRIPT_SUFFIXES = (".ts", ".mts", ".cts")
#: Suffixes of the code files the grammars read (JavaScript, JSX, TypeScript, TSX).
CODE_SUFFIXES = (".js", ".cjs", ".mjs", ".jsx", *TYPESCRIPT_SUFFIXES, ".tsx")
#: TypeScript declaration files: types only, never run.
DECLARATION_SUFFIXES = (".d.ts", ".d.mts", ".d.cts")


@cache
def parser(suffix: str):
    """The tree-sitter parser of the grammar for files ending in ``suffix`` (``.js``, ``.tsx`` ...)."""
    import tree_sitter

    if suffix in TYPESCRIPT_SUFFIXES or suffix == ".tsx":
        import tree_sitter_typescript

        language = (tree_sitter_typescript.language_tsx() if suffix == ".tsx"
                    else tree_sitter_typescript.language_typescript())
    else:
        import tree_sitter_javascript

        language = tree_sitter_javascript.language()
    return tree_sitter.Parser(tree_sitter.Language(language))


def code_suffix(path: str) -> str | None:
    """The suffix that picks ``path``'s grammar; None for a file that is not code that runs (another
    language, a declaration file)."""
    if not path.endswith(CODE_SUFFIXES) or path.endswith(DECLARATION_SUFFIXES):
        return None
    return "." + path.rsplit(".", 1)[-1]


def parsed(text: str, suffix: str):
    """The root node of ``text``'s syntax tree; None when it does not parse without an error."""
    root = parser(suffix).parse(text.encode("utf-8")).root_node
    return None if root.has_error else root
