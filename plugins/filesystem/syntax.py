"""Source code's syntax units, from tree-sitter (the ``tree-sitter`` binding and one ``tree-sitter-<language>``
grammar wheel per language, all from PyPI: no compiler, no download at run time).

:func:`outline` gives the :class:`~indexer.plugin_api.OutlineNode` values the chunker keeps whole: every
definition (class, function, method, impl, module, namespace...) with its enclosing names as heading
(``("Parser", "parse_header")``), its decorators, export keyword and the comment lines right above it included;
and, inside a definition, each statement of its body (where a large definition is cut). Spans are whole
lines. A language without a grammar here, a grammar that is not installed, or a file that does not parse
gives no outline: the chunker then cuts the file at blank lines and lines as before.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from functools import cache
from typing import Any

from indexer.plugin_api import OutlineNode

logger = logging.getLogger(__name__)

# extension -> (grammar module, its language function)
GRAMMARS: dict[str, tuple[str, str]] = {
    **dict.fromkeys((".py", ".pyi"), ("tree_sitter_python", "language")),
    **dict.fromkeys((".js", ".mjs", ".cjs", ".jsx"), ("tree_sitter_javascript", "language")),
    ".ts": ("tree_sitter_typescript", "language_typescript"),
    ".tsx": ("tree_sitter_typescript", "language_tsx"),
    ".go": ("tree_sitter_go", "language"),
    ".rs": ("tree_sitter_rust", "language"),
    ".java": ("tree_sitter_java", "language"),
    **dict.fromkeys((".c", ".h"), ("tree_sitter_c", "language")),
    **dict.fromkeys((".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx"), ("tree_sitter_cpp", "language")),
    ".cs": ("tree_sitter_c_sharp", "language"),
    ".rb": ("tree_sitter_ruby", "language"),
    ".php": ("tree_sitter_php", "language_php"),
    **dict.fromkeys((".sh", ".bash", ".zsh"), ("tree_sitter_bash", "language")),
}

# Node types that are definitions (a unit with a name), across the grammars above.
DEFINITIONS = frozenset({
    # Python
    "function_definition", "class_definition",
    # JavaScript / TypeScript
    "function_declaration", "generator_function_declaration", "class_declaration", "method_definition",
    "abstract_class_declaration", "interface_declaration", "enum_declaration", "internal_module", "module",
    # Go
    "method_declaration", "type_declaration",
    # Rust
    "function_item", "impl_item", "struct_item", "enum_item", "trait_item", "mod_item", "macro_definition",
    # Java, C#
    "constructor_declaration", "record_declaration", "namespace_declaration", "struct_declaration",
    "annotation_type_declaration",
    # C, C++
    "class_specifier", "struct_specifier", "namespace_definition", "template_declaration",
    # Ruby
    "method", "singleton_method", "class",
    # PHP
    "trait_declaration",
})  # fmt: skip
# Wrappers whose span (decorators, export, attributes) belongs to the definition inside them.
WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration"})
BODIES = frozenset({
    "block", "statement_block", "compound_statement", "declaration_list", "class_body", "field_declaration_list",
    "body_statement", "enum_body", "interface_body", "enum_variant_list", "do_group", "suite",
})  # fmt: skip
_NAMES = (
    "identifier", "type_identifier", "field_identifier", "property_identifier", "name", "constant",
    "namespace_identifier", "qualified_identifier", "scoped_identifier", "operator_name", "destructor_name",
)  # fmt: skip
_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})


@cache
def _parser(extension: str) -> Any | None:
    found = GRAMMARS.get(extension)
    if found is None:
        return None
    try:
        from tree_sitter import Language, Parser

        module = importlib.import_module(found[0])
        language_fn: Callable[[], Any] = getattr(module, found[1])
        return Parser(Language(language_fn()))
    except Exception as exc:  # not installed, or a grammar built for another binding version
        logger.info("no syntax tree for %s files (%s); cutting them at lines", extension, exc)
        return None


def supported(extension: str) -> bool:
    return _parser(extension.lower()) is not None


def outline(text: str, extension: str) -> tuple[OutlineNode, ...]:
    """The syntax units of ``text`` (source code with ``extension``); empty when unsupported or unparsable."""
    parser = _parser(extension.lower())
    if parser is None or not text.strip():
        return ()
    try:
        tree = parser.parse(text.encode("utf-8", "surrogatepass"))
    except Exception as exc:
        logger.info("tree-sitter failed on a %s file (%s); cutting it at lines", extension, exc)
        return ()
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    builder = _Builder(text, starts)
    builder.walk(tree.root_node, (), in_body=False)
    return tuple(builder.nodes)


class _Builder:
    def __init__(self, text: str, line_starts: list[int]) -> None:
        self.text = text
        self.line_starts = line_starts
        self.nodes: list[OutlineNode] = []

    def span(self, first_row: int, last_row: int) -> tuple[int, int]:
        start = self.line_starts[min(first_row, len(self.line_starts) - 1)]
        end = self.line_starts[last_row + 1] - 1 if last_row + 1 < len(self.line_starts) else len(self.text)
        return start, max(start, end)

    def walk(self, node: Any, heading: tuple[str, ...], in_body: bool) -> None:
        """Emit the definitions below ``node`` (and, when ``node`` is a definition's body, its statements)."""
        previous_end_row = -1
        children = [c for c in node.children if c.is_named]
        for index, child in enumerate(children):
            first_row, last_row = child.start_point[0], child.end_point[0]
            if child.type in _COMMENTS:
                continue
            definition = _definition(child)
            if first_row <= previous_end_row:  # shares a line with the unit before it: stays in that one's text
                continue
            above = index - 1
            while above >= 0 and children[above].type in _COMMENTS and children[above].end_point[0] == first_row - 1:
                first_row = children[above].start_point[0]  # the comment lines right above a unit belong to it
                above -= 1
            if first_row <= previous_end_row:
                first_row = previous_end_row + 1
            if definition is not None:
                name = _name(definition, self.text) or definition.type
                own = (*heading, name)
                start, end = self.span(first_row, last_row)
                self.nodes.append(OutlineNode(start, end, own))
                body = _body(definition)
                inner = definition.inner if isinstance(definition, _Wrapped) else definition
                self.walk(body if body is not None else inner, own, in_body=body is not None)
                previous_end_row = last_row
            elif in_body:
                start, end = self.span(first_row, last_row)
                self.nodes.append(OutlineNode(start, end, heading))
                self.walk(child, heading, in_body=False)  # definitions nested in the statement
                previous_end_row = last_row
            else:
                self.walk(child, heading, in_body=child.type in BODIES and bool(heading))


def _definition(node: Any) -> Any | None:
    """The definition ``node`` is (or wraps: decorators, export), or None."""
    if node.type in WRAPPERS:
        inner = node.child_by_field_name("definition") or node.child_by_field_name("declaration")
        if inner is None:
            inner = next((c for c in node.named_children if c.type in DEFINITIONS), None)
        if inner is not None and inner.type in DEFINITIONS:
            return _Wrapped(node, inner)
        return None
    if node.type in DEFINITIONS:
        if node.type in ("struct_specifier", "class_specifier") and node.child_by_field_name("body") is None:
            return None  # a use of a type, not its definition
        if node.type == "module" and node.child_by_field_name("name") is None:
            return None  # Ruby's and TypeScript's module node at the root is the file itself
        return node
    if node.type in ("lexical_declaration", "variable_declaration"):  # const f = () => { ... }
        for declarator in node.named_children:
            value = declarator.child_by_field_name("value") if declarator.type == "variable_declarator" else None
            if value is not None and value.type in ("arrow_function", "function_expression", "function", "class"):
                return _Wrapped(node, declarator, body_of=value)
    return None


class _Wrapped:
    """A definition seen through its wrapper: the wrapper's span, the inner definition's name and body."""

    def __init__(self, outer: Any, inner: Any, body_of: Any | None = None) -> None:
        self.outer, self.inner, self.body_of = outer, inner, body_of if body_of is not None else inner
        self.type = inner.type

    def child_by_field_name(self, name: str) -> Any:
        return self.inner.child_by_field_name(name)

    @property
    def named_children(self) -> list[Any]:
        return list(self.inner.named_children)


def _body(definition: Any) -> Any | None:
    node = definition.body_of if isinstance(definition, _Wrapped) else definition
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    return next((c for c in node.named_children if c.type in BODIES), None)


def _name(definition: Any, text: str) -> str:
    node = definition.inner if isinstance(definition, _Wrapped) else definition
    if node.type == "impl_item":  # Rust: impl Trait for Type
        trait, kind = node.child_by_field_name("trait"), node.child_by_field_name("type")
        parts = [_node_text(n) for n in (trait, kind) if n is not None]
        return " for ".join(parts) if parts else "impl"
    found = node.child_by_field_name("name")
    if found is not None and found.named_child_count == 0:  # a plain name (an identifier, Bash's word)
        return _node_text(found)
    for field in ("name", "declarator", "type"):
        found = node.child_by_field_name(field)
        if found is not None:
            named = _first_name(found)
            if named:
                return named
    named = _first_name(node)
    return named or ""


def _first_name(node: Any, depth: int = 0) -> str:
    if node.type in _NAMES:
        return _node_text(node)
    if depth > 4:
        return ""
    for child in node.named_children:
        if child.type in ("parameter_list", "parameters", "formal_parameters", "argument_list", "body", "block"):
            continue
        found = _first_name(child, depth + 1)
        if found:
            return found
    return ""


def _node_text(node: Any) -> str:
    raw = node.text
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")
