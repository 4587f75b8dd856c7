"""Rule discovery: every module in this package defines one ``Rule`` subclass.

There is no hand-kept registry: adding a rule means adding a module here and a
page to the rule book.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import cache

from torchlint.rule import Rule


@cache
def all_rules() -> tuple[type[Rule], ...]:
    found: dict[str, type[Rule]] = {}
    for module_info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__:
                if obj.code in found:
                    raise RuntimeError(f"rule code {obj.code} defined twice")
                found[obj.code] = obj
    return tuple(found[code] for code in sorted(found))


def rule_by_code(code: str) -> type[Rule] | None:
    for rule in all_rules():
        if rule.code == code.upper():
            return rule
    return None
