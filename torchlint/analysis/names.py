"""Import tracking: which torch object a local name or dotted expression means."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.torch_api import CANONICAL


def dotted_name(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    parts: list[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


def _module_path(node: cst.BaseExpression | None) -> str:
    if node is None:
        return ""
    return dotted_name(node) or ""


class ImportTable:
    """Maps local names to the qualified names they were imported as."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    def add_import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = _module_path(alias.name)
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                self.aliases[alias.asname.name.value] = full
            else:
                head = full.split(".")[0]
                self.aliases[head] = head

    def add_import_from(self, node: cst.ImportFrom) -> None:
        if node.relative or isinstance(node.names, cst.ImportStar):
            return
        module = _module_path(node.module)
        for alias in node.names:
            name = _module_path(alias.name)
            local = name
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            self.aliases[local] = f"{module}.{name}"

    def qualify(self, node: cst.BaseExpression) -> str | None:
        """The canonical qualified name of an imported object, e.g. ``T.no_grad`` -> ``torch.no_grad``."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return None
        full = f"{base}.{rest}" if rest else base
        return CANONICAL.get(full, full)

    def local_name_for(self, qualified: str) -> str | None:
        """A local name bound to exactly ``qualified`` (e.g. the name ``torch`` is imported under)."""
        if self.aliases.get(qualified.split(".")[-1]) == qualified:
            return qualified.split(".")[-1]
        for local, full in self.aliases.items():
            if full == qualified:
                return local
        return None


def through_grad(expr: cst.BaseExpression) -> bool:
    """True when the chain ``a.b[...].c`` passes through a ``.grad`` attribute."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        if isinstance(expr, cst.Attribute) and expr.attr.value == "grad":
            return True
        expr = expr.value
    return False


def names_in(node: cst.CSTNode) -> set[str]:
    """Every name and dotted name (``self.w``) mentioned in ``node``."""
    names: set[str] = set()

    class Collector(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            names.add(name.value)

        def visit_Attribute(self, attribute: cst.Attribute) -> None:
            key = dotted_name(attribute)
            if key:
                names.add(key)

    node.visit(Collector())
    return names
