"""Rule discovery: every module in this package named after its rule's code
(``tl001_rebind_update.py`` defines ``TL001``) defines one ``Rule`` subclass.

There is no hand-kept registry: adding a rule means adding a module here and a
page to the rule book.  The codes are known from the module names alone
(``rule_codes``), so selecting rules and reporting cached results import no
rule module (nor libcst); ``all_rules`` imports them and checks the names.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache

from torchlint.rule import Rule

_RULE_MODULE = re.compile(r"(tl\d+)_\w+")


@cache
def _rule_modules() -> dict[str, str]:
    """Rule code -> module name, from the file names (nothing is imported)."""
    found: dict[str, str] = {}
    for module_info in pkgutil.iter_modules(__path__):
        match = _RULE_MODULE.fullmatch(module_info.name)
        if match is not None:
            found[match.group(1).upper()] = module_info.name
    return found


def rule_codes() -> tuple[str, ...]:
    """Every rule's code, sorted, without importing the rules."""
    return tuple(sorted(_rule_modules()))


@cache
def all_rules() -> tuple[type[Rule], ...]:
    found: dict[str, type[Rule]] = {}
    named = {name: code for code, name in _rule_modules().items()}
    for module_info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__:
                if obj.code in found:
                    raise RuntimeError(f"rule code {obj.code} defined twice")
                if named.get(module_info.name) != obj.code:
                    raise RuntimeError(
                        f"{module.__name__} defines {obj.code}: a rule's module is named after its code"
                        f" ({obj.code.lower()}_<name>.py)"
                    )
                found[obj.code] = obj
    missing = sorted(set(named.values()) - set(found))
    if missing:
        raise RuntimeError(f"no rule defined in the module of {', '.join(missing)}")
    return tuple(found[code] for code in sorted(found))


def rule_by_code(code: str) -> type[Rule] | None:
    for rule in all_rules():
        if rule.code == code.upper():
            return rule
    return None
