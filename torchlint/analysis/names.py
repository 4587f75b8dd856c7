"""Import tracking: which torch object a local name or dotted expression means."""

from __future__ import annotations

import re
from collections.abc import Callable

import libcst as cst

from torchlint.analysis.torch_api import CANONICAL, STAR_EXPORTS, STAR_IMPORTED_TORCH_NAMES
from torchlint.analysis.walk import scan

# Exact type tests (no node class derives from these): ``isinstance`` on libcst's ABCs
# is several times slower, and this runs for most expressions the rules look at.
_NAME, _ATTRIBUTE = cst.Name, cst.Attribute
_WORD = re.compile(r"\w")


def count_after_non_word(pattern: str, source: str, after_dot: bool = True) -> int:
    r"""``len(re.findall(r"(?<!\w)" + pattern, source))`` for a pattern starting with a word
    character, forty times as fast: a pattern that starts with a literal is searched for
    quickly, one that starts with a lookbehind is tried at every position.  ``after_dot``
    False: not after a ``.`` either (``model.train()`` is no call of a function ``train``)."""
    return sum(
        1 for match in re.finditer(pattern, source)
        if match.start() == 0 or (
            _WORD.match(source, match.start() - 1) is None and (after_dot or source[match.start() - 1] != ".")
        )
    )


_CALL_OPENING = re.compile(r"\s*\(")
_SPACES = re.compile(r"\s+")


def count_calls(name: str, source: str, after_dot: bool = True) -> int:
    r"""``count_after_non_word(rf"{re.escape(name)}\s*\(", source, after_dot)`` for an identifier
    ``name``, without compiling a pattern for it: most names are counted in one file only, and
    compiling their pattern cost more than the search."""

    def opening_end(index: int) -> int | None:
        opening = _CALL_OPENING.match(source, index)
        return opening.end() if opening is not None else None

    return _count_literal_matches(name, opening_end, source, after_dot)


def count_headers(keyword: str, name: str, source: str) -> int:
    r"""``count_after_non_word(rf"{keyword}\s+{re.escape(name)}\s*\(", source)`` for an
    identifier ``name`` (``def train(``, ``class Net(``), without compiling a pattern for it."""

    def header_end(index: int) -> int | None:
        spaces = _SPACES.match(source, index)
        if spaces is None or not source.startswith(name, spaces.end()):
            return None
        opening = _CALL_OPENING.match(source, spaces.end() + len(name))
        return opening.end() if opening is not None else None

    return _count_literal_matches(keyword, header_end, source, True)


# What follows a header's keyword and spaces up to the first space or ``(``: the only name it can be the header of.
_HEADER_NAME = re.compile(r"[^\s(]+")


def header_counts(keyword: str, source: str) -> dict[str, int]:
    """``count_headers(keyword, name, source)`` for every identifier ``name`` at once (absent:
    0), in one pass over the source: ``def`` headers of a file's functions counted once for
    all of them.  An identifier is followed by a space or ``(`` where its header matches, so
    a header names the one run of other characters after its keyword; and no header can start
    inside another's match (counting each position, as here, skips none ``count_headers`` counts)."""
    counts: dict[str, int] = {}
    start = source.find(keyword)
    while start >= 0:
        spaces = _SPACES.match(source, start + len(keyword))
        name = _HEADER_NAME.match(source, spaces.end()) if spaces is not None else None
        if (
            name is not None
            and _CALL_OPENING.match(source, name.end()) is not None
            and (start == 0 or _WORD.match(source, start - 1) is None)
        ):
            counts[name.group()] = counts.get(name.group(), 0) + 1
        start = source.find(keyword, start + 1)
    return counts


_CLASS_HEADER_BASES = re.compile(r"^[ \t]*class\s+\w+\s*\(([^)]*)", re.MULTILINE)


def names_in_class_bases(name: str, source: str) -> bool:
    r"""``re.search(rf"^[ \t]*class\s+\w+\s*\([^)]*\b{re.escape(name)}\b", source, re.MULTILINE)``
    for an identifier ``name`` (some ``class`` line lists it before its first ``)``), without
    compiling a pattern for it."""
    for header in _CLASS_HEADER_BASES.finditer(source):
        bases = header.group(1)
        start = bases.find(name)
        while start >= 0:
            end = start + len(name)
            if (start == 0 or _WORD.match(bases, start - 1) is None) and (
                end == len(bases) or _WORD.match(bases, end) is None
            ):
                return True
            start = bases.find(name, start + 1)
    return False


def _count_literal_matches(
    literal: str, rest_end: Callable[[int], int | None], source: str, after_dot: bool
) -> int:
    """The matches ``re.finditer`` finds of ``literal`` followed by what ``rest_end`` matches (it
    gives the match's end, or None), counted as ``count_after_non_word`` counts them: leftmost
    first, not overlapping (a failed try moves on by one character, a match past its end)."""
    count = 0
    start = source.find(literal)
    while start >= 0:
        end = rest_end(start + len(literal))
        if end is None:
            start = source.find(literal, start + 1)
            continue
        if start == 0 or (_WORD.match(source, start - 1) is None and (after_dot or source[start - 1] != ".")):
            count += 1
        start = source.find(literal, end)
    return count


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    if type(node) is _NAME:
        return node.value  # type: ignore[attr-defined]
    parts: list[str] = []
    while type(node) is _ATTRIBUTE:
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is not _NAME:
        return None
    parts.append(node.value)  # type: ignore[attr-defined]
    parts.reverse()
    return ".".join(parts)


def self_attribute(key: str | None) -> str | None:
    """``weight`` for the dotted name ``self.weight``; None for anything else (``self.a.b``, ``x.w``)."""
    if key is None or not key.startswith("self.") or key.count(".") != 1:
        return None
    return key[5:]


def root_name(expr: cst.BaseExpression) -> str | None:
    """``self`` for ``self.opt``, ``opts`` for ``opts[i]``, ``m`` for ``m.a.b[i].c``: the name a
    chain of attributes and indexes starts from (evaluating it twice gives the same object);
    None when the chain starts from anything else (a call's result)."""
    while True:
        kind = type(expr)  # (exact type tests: ``isinstance`` is slow on libcst's ABCs)
        if kind is cst.Name:
            return expr.value  # type: ignore[attr-defined]
        if kind is cst.Attribute or kind is cst.Subscript:
            expr = expr.value  # type: ignore[attr-defined]
        else:
            return None


def dotted_expression(key: str) -> cst.Name | cst.Attribute:
    """The expression ``a.b.c`` for the dotted name ``key`` (the inverse of ``dotted_name``;
    what ``cst.parse_expression(key)`` gives, without running the parser)."""
    head, *attributes = key.split(".")
    expression: cst.Name | cst.Attribute = cst.Name(head)
    for attribute in attributes:
        expression = cst.Attribute(value=expression, attr=cst.Name(attribute))
    return expression


def literal_int(node: cst.BaseExpression | None) -> int | None:
    """An integer written literally (``3``, ``-1``), else None."""
    negative = type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus
    if negative:
        node = node.expression  # type: ignore[union-attr]
    if type(node) is not cst.Integer:
        return None
    return -node.evaluated_value if negative else node.evaluated_value  # type: ignore[union-attr]


def literal_index(node: cst.Subscript) -> int | None:
    """``n`` for ``x[n]`` with a literal integer ``n`` (``x[-1]``: -1), else None."""
    if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return None
    return literal_int(node.slice[0].slice.value)  # type: ignore[attr-defined]


def literal_bool(node: cst.BaseExpression | None) -> bool | None:
    """``True`` / ``False`` written literally, else None."""
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def keyword_arg(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional_args(call: cst.Call) -> list[cst.BaseExpression]:
    return [arg.value for arg in call.args if arg.keyword is None and not arg.star]


def _module_path(node: cst.BaseExpression | None) -> str:
    if node is None:
        return ""
    return dotted_name(node) or ""


class ImportTable:
    """Maps local names to the qualified names they were imported as."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        # ``qualify`` answers until the next import, by node: id -> (node, answer).  Rules ask
        # about the same expression many times; keeping the node keeps its id unique.
        self._qualified: dict[int, tuple[cst.BaseExpression, str | None]] = {}
        # ``from torch.nn import *``: the torch modules star-imported, in import order, and the
        # source (whose own bindings of a name win over the star import).
        self._torch_stars: list[str] = []
        self._star_source = ""
        # ``ACT = {"relu": nn.ReLU, "tanh": nn.Tanh}`` at module level, never changed: name ->
        # key -> the torch class (``ACT["relu"](inplace=True)`` builds an ``nn.ReLU``).
        self._class_tables: dict[str, dict[str, str]] = {}

    def add_import(self, node: cst.Import) -> None:
        self._qualified.clear()
        for alias in node.names:
            full = _module_path(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.aliases[alias.asname.name.value] = full
            else:
                head = full.split(".")[0]
                self.aliases[head] = head

    def add_import_from(self, node: cst.ImportFrom) -> None:
        self._qualified.clear()
        if node.relative or isinstance(node.names, cst.ImportStar):
            return
        module = _module_path(node.module)
        for alias in node.names:
            name = _module_path(alias.name)
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{module}.{name}"

    def add_star_import(self, node: cst.ImportFrom, source: str) -> None:
        """``from models.common import *`` in a file that uses ``torch.`` without importing torch
        anywhere: the star import is where its ``torch`` comes from, and with it the conventional
        ``nn`` / ``F`` it uses unbound (a YOLO ``models/yolo.py``)."""
        module = dotted_name(node.module) if node.module is not None else ""
        if module in STAR_EXPORTS and not node.relative:
            self._qualified.clear()
            self._torch_stars.append(module)  # type: ignore[arg-type]
            self._star_source = source
            return
        if module == "torch" or (module or "").startswith("torch.") or "torch" in self.aliases:
            return
        # (A `from torch.utils.data import DataLoader` binds no `torch`: the name used unbound
        # still comes from the star import.)
        if not _uses_unbound("torch", source):
            return
        self._qualified.clear()
        for local, full in STAR_IMPORTED_TORCH_NAMES.items():
            if local not in self.aliases and _uses_unbound(local, source):
                self.aliases[local] = full

    def add_class_table(self, name: str, table: cst.Dict, source: str) -> None:
        """A module-level dict literal whose values are all torch classes (or functions), keyed
        by strings, that no other line assigns or changes: its lookups name those classes."""
        entries: dict[str, str] = {}
        for element in table.elements:
            if type(element) is not cst.DictElement or type(element.key) is not cst.SimpleString:
                return
            qualified = self.qualify(element.value)
            key = element.key.evaluated_value
            if qualified is None or not qualified.startswith("torch.") or not isinstance(key, str):
                return
            entries[key] = qualified
        if entries and not _changed_after(name, source):
            self._qualified.clear()
            self._class_tables[name] = entries

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The canonical qualified name of an imported object, e.g. ``T.no_grad`` -> ``torch.no_grad``."""
        known = self._qualified.get(id(node))
        if known is not None and known[0] is node:
            return known[1]
        qualified = self._qualify(node)
        self._qualified[id(node)] = (node, qualified)
        return qualified

    def _qualify(self, node: cst.BaseExpression) -> str | None:
        dotted = dotted_name(node)
        if dotted is None:
            return self._looked_up(node) if self._class_tables and type(node) is cst.Subscript else None
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head)
        if base is None:
            base = self._star_imported(head) if self._torch_stars else None
            if base is None:
                return None
        full = f"{base}.{rest}" if rest else base
        return CANONICAL.get(full, full)

    def _looked_up(self, node: cst.Subscript) -> str | None:
        """``ACT["relu"]``: the class the table holds under that key; ``ACT[name]``: the class
        every entry holds (entries that differ: unknown)."""
        entries = self._class_tables.get(node.value.value) if type(node.value) is cst.Name else None  # type: ignore[attr-defined]
        if entries is None or len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
            return None
        key = node.slice[0].slice.value  # type: ignore[attr-defined]
        if type(key) is cst.SimpleString:
            return entries.get(key.evaluated_value)  # type: ignore[arg-type]
        classes = set(entries.values())
        return classes.pop() if len(classes) == 1 else None

    def _star_imported(self, name: str) -> str | None:
        """``torch.nn.Softmax`` for ``Softmax`` after ``from torch.nn import *`` (the last star
        import exporting it), unless the file binds the name itself (a class, a def, an
        assignment, an import: other imports are in ``aliases`` already)."""
        for module in reversed(self._torch_stars):
            if name in STAR_EXPORTS[module]:
                return None if binds(name, self._star_source) else f"{module}.{name}"
        return None

    def local_name_for(self, qualified: str) -> str | None:
        """A local name bound to exactly ``qualified`` (e.g. the name ``torch`` is imported under)."""
        if self.aliases.get(qualified.split(".")[-1]) == qualified:
            return qualified.split(".")[-1]
        for local, full in self.aliases.items():
            if full == qualified:
                return local
        return None


TORCH_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+torch\b", re.MULTILINE)


def _uses_unbound(name: str, source: str) -> bool:
    """``name.`` is used and no line binds ``name`` (an import, an assignment, a ``def``)."""
    escaped = re.escape(name)
    if re.search(rf"(?<![\w.]){escaped}\.\w", source) is None:
        return False
    return not binds(name, source)


def binds(name: str, source: str) -> bool:
    """Some line of ``source`` binds ``name``: ``import name`` (``import name.sub``, not
    ``import name.sub as other``), ``... as name``, ``name = ``,
    ``def name`` / ``class name``, a ``for name in``, or a ``name`` imported by name."""
    escaped = re.escape(name)
    binding = (
        rf"(?:\bas[ \t]+{escaped}\b|^[ \t]*{escaped}[ \t]*=[^=]|\b(?:def|class)[ \t]+{escaped}\b"
        rf"|^[ \t]*import[ \t]+{escaped}(?:\.[\w.]*)?(?![\w.])(?![ \t]+as\b)|\bfor[ \t]+{escaped}[ \t]+in\b"
        rf"|^[ \t]*from[ \t]+[\w.]+[ \t]+import[ \t(]+[^\n#]*\b{escaped}\b)"
    )
    return re.search(binding, source, re.MULTILINE) is not None


def _changed_after(name: str, source: str) -> bool:
    """``name`` is assigned more than once, written by key (``name["x"] = ...``), or changed by a
    dict method, somewhere in ``source``."""
    escaped = re.escape(name)
    if len(re.findall(rf"^[ \t]*{escaped}[ \t]*(?::[^=\n]*)?=[^=]", source, re.MULTILINE)) != 1:
        return True
    return re.search(rf"(?<![\w.]){escaped}(?:\[[^\]\n]*\][ \t]*=[^=]|\.(?:update|setdefault|pop|clear|__setitem__)\b)",
                     source) is not None


def through_grad(expr: cst.BaseExpression) -> bool:
    """True when the chain ``a.b[...].c`` passes through a ``.grad`` attribute."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        if isinstance(expr, cst.Attribute) and expr.attr.value == "grad":
            return True
        expr = expr.value
    return False


def names_in(node: cst.CSTNode) -> set[str]:
    """Every name and dotted name (``self.w``) mentioned in ``node``."""
    collector = _NameCollector()
    scan(node, collector)
    return collector.names


class _NameCollector(cst.CSTVisitor):
    """For ``names_in`` (a class made once: making one on every call cost more than the scan)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, name: cst.Name) -> None:
        self.names.add(name.value)

    def visit_Attribute(self, attribute: cst.Attribute) -> None:
        key = dotted_name(attribute)
        if key:
            self.names.add(key)


def assigned_pairs(
    targets: list[cst.BaseExpression], value: cst.BaseExpression
) -> list[tuple[cst.BaseExpression, cst.BaseExpression | None]]:
    """Each simple target of an assignment with the expression it receives, or None when
    that cannot be told from the source: ``w, b = w - g, b - h`` gives (w, w - g), (b, b - h);
    ``a = b = e`` gives (a, e), (b, e); nested tuples are matched element by element and a
    starred target receives None."""
    pairs: list[tuple[cst.BaseExpression, cst.BaseExpression | None]] = []
    for target in targets:
        _pair_up(target, value, pairs)
    return pairs


def _pair_up(
    target: cst.BaseExpression,
    value: cst.BaseExpression | None,
    pairs: list[tuple[cst.BaseExpression, cst.BaseExpression | None]],
) -> None:
    if type(target) in (cst.Tuple, cst.List):
        elements = [  # a starred element stays one, to receive None
            element if type(element) is cst.StarredElement else element.value
            for element in target.elements  # type: ignore[attr-defined]
        ]
        values: list[cst.BaseExpression | None] = [None] * len(elements)
        if type(value) in (cst.Tuple, cst.List):
            given = value.elements  # type: ignore[union-attr]
            if len(given) == len(elements) and not any(type(e) is cst.StarredElement for e in given):
                values = [element.value for element in given]
        for element, element_value in zip(elements, values):
            _pair_up(element, element_value, pairs)
    elif type(target) is cst.StarredElement:
        _pair_up(target.value, None, pairs)  # type: ignore[attr-defined]
    else:
        pairs.append((target, value))


def is_basic_indexing(node: cst.Subscript, is_number: Callable[[cst.BaseExpression], bool] | None = None) -> bool:
    """``y[0]``, ``y[-1]``, ``y[1:3]``, ``y[:, 0]``, ``y[None]``, ``y[...]``: a view that shares
    ``y``'s version counter and saves no index tensor (a tensor or list index copies).  Measured
    with torch 2.13: a negative integer makes a view too.  Indices other than integer literals
    count when ``is_number`` says they hold a number (``y[i]``)."""
    for element in node.slice:
        index = element.slice
        if type(index) is cst.Slice:
            continue
        value = index.value  # type: ignore[attr-defined]
        if type(value) is cst.UnaryOperation and type(value.operator) is cst.Minus:
            value = value.expression
        kind = type(value)
        if kind is cst.Integer or kind is cst.Ellipsis or (kind is cst.Name and value.value == "None"):
            continue
        if is_number is None or not is_number(value):
            return False
    return True
