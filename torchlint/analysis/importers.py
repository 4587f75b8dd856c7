"""Call sites in other project files: what a function of the linted file is handed by the
scripts that import it.

Research code builds the model and the optimizer in ``main.py`` and hands them to
``train.source_only(encoder, classifier, ...)`` defined in ``train.py``.  Linting ``train.py``
alone, ``classifier`` is an unknown parameter.  For a top-level function the linted file
never calls itself, this module reads the ``.py`` files of the same directory, keeps those
whose import lines name the linted file's module (``import train``, ``from train import
source_only``), and for a file in a package those of the directory above the top package
(``from engine.train import fit`` in the repository's ``main.py``), runs their rule-less analysis (``project.py``) and collects what each call of
the function passes.  A parameter is bound when every call in those files is seen (as many
analysed as the text spells) and they agree on a module or an optimizer.

Lazy and bounded: asked only when a rule needs a parameter's value given the call sites
(``call_sites.py``), only for the linted file itself (not for files read on its behalf), and
only in a directory of at most ``MAX_SCANNED`` Python files.  Every file scanned (and the
directory, for a file added later) is a dependency of the result in the results cache.
Unsure means silent: nothing is bound.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.names import count_calls, count_headers
from torchlint.analysis.project import ProjectFunction, ProjectMethod
from torchlint.analysis.project import package_root as _package_root
from torchlint.analysis.values import Kind, Value, join_call_sites
from torchlint.project_files import current_session, stamp

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.scopes import FunctionInfo

# Python files a directory may hold for its files to be scanned for importers.
MAX_SCANNED = 32
# What a parameter may be bound to from another file: objects, not tensors (whose facts are
# tied to the other file's statements).
_KINDS = frozenset({Kind.MODULE, Kind.OPTIMIZER})


@dataclass(frozen=True)
class ProjectCall:
    """One call of a sibling file's function: the values of its arguments at the call."""

    function: ProjectFunction | ProjectMethod
    positional: tuple[Value, ...] | None  # None: a ``*args`` / ``**kwargs`` hides the order
    keywords: tuple[tuple[str, Value], ...]

    @classmethod
    def of(cls, ctx: Analyzer, node: cst.Call, function: ProjectFunction | ProjectMethod) -> ProjectCall:
        if any(arg.star for arg in node.args):
            return cls(function, None, ())
        positional = tuple(_passed(ctx, arg.value) for arg in node.args if arg.keyword is None)
        keywords = tuple((arg.keyword.value, _passed(ctx, arg.value)) for arg in node.args if arg.keyword is not None)
        return cls(function, positional, keywords)

    def passed(self, info: FunctionInfo) -> dict[str, Value] | None:
        """Parameter name -> the value passed for it (None: not known which goes where)."""
        if self.positional is None:
            return None
        params = info.node.params
        names = [p.name.value for p in (*params.posonly_params, *params.params)]
        if type(self.function) is ProjectMethod:
            names = names[1:]  # `model.add_loss_op(loss)`: `self` is the instance
        if len(self.positional) > len(names):
            return None  # more than the parameters: a different function of that name
        found = dict(zip(names, self.positional))
        found.update(self.keywords)
        return found


def _passed(ctx: Analyzer, node: cst.BaseExpression) -> Value:
    """What an argument holds; a torch module keeps its class, read with this file's imports."""
    value = ctx.value_of(node)
    if value.kind is Kind.MODULE and value.cls is None and not value.alternatives:
        torch_class = ctx.torch_class(value)
        if torch_class is not None and torch_class.startswith("torch."):
            return value.with_torch_class(torch_class)
    return value


def values_from_importers(ctx: Analyzer, info: FunctionInfo) -> dict[str, Value]:
    """Parameter -> the module or optimizer every call in the files importing this one passes,
    for a top-level function of the linted file that the file itself never calls, or a method
    of a top-level class of it (``model.add_loss_op(nn.NLLLoss())`` on an instance of the class
    in ``train.py``)."""
    project = ctx.project
    if project is None or project.depth != 0:
        return {}
    scope = info.parent_scope
    if info.cls is not None:
        if scope.kind != "class" or scope.parent is None or scope.parent.parent is not None or info.name == "__init__":
            return {}
    elif scope.parent is not None:
        return {}
    if ctx._call_site_count(info.name, info.cls is not None) != 0:  # noqa: SLF001 - (the file calls it itself)
        return {}
    sites = _calls_elsewhere(project.path, info)
    if not sites:
        return {}
    agreed: dict[str, Value] = {}
    for name in set.intersection(*(set(site) for site in sites)):
        value = join_call_sites([site[name] for site in sites])
        if value.kind in _KINDS:
            agreed[name] = value
    return {name: _as_parameter(value, info, name) for name, value in agreed.items()}


def _as_parameter(value: Value, info: FunctionInfo, name: str) -> Value:
    """The value with the parameter as its origin: the other file's constructor call is read
    with that file's imports, never this one's (``torch_class`` then tells nothing)."""
    params = info.node.params
    param = next(p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == name)
    moved = dataclasses.replace(value, origin=param, tags=value.tags | {"from-other-file"})
    return moved.with_torch_class(value.torch_class) if value.torch_class is not None else moved


def _calls_elsewhere(path: str, info: FunctionInfo) -> list[dict[str, Value]] | None:
    """What each call of ``info`` in the importing files passes; None when one is not seen."""
    session = current_session()
    directory, base = os.path.split(path)
    stem = base[:-3] if base.endswith(".py") else ""
    if session is None or not stem.isidentifier() or stem == "__init__":
        return None
    scanned: dict[str, tuple[int, int]] = {}
    importers = _importers(directory, stem, scanned)
    root = _package_root(directory)
    if importers is not None and root != directory:  # `from engine.train import fit` in the root's main.py
        above = _importers(root, stem, scanned)
        importers = None if above is None else importers + above
    if importers is None:
        return None
    try:
        return _sites_in(importers, path, info)
    finally:
        session.read.update(scanned)  # (after the importers are read: they count towards MAX_FILES)


def _sites_in(importers: list[str], path: str, info: FunctionInfo) -> list[dict[str, Value]] | None:
    from torchlint.analysis.project import load_file

    sites: list[dict[str, Value]] = []
    for importer in importers:
        file = load_file(importer)
        analysis = file.analysis(0) if file is not None else None
        if analysis is None:
            return None
        class_name = info.cls.name if info.cls is not None else ""
        calls = [c for c in analysis.project_calls.values()
                 if c.function.name == info.name and c.function.file.path == path
                 and getattr(c.function, "class_name", "") == class_name]
        spelled = count_calls(info.name, file.text) - count_headers("def", info.name, file.text)
        if len(calls) != spelled:
            return None  # a call not analysed (or of another function of that name)
        for call in calls:
            passed = call.passed(info)
            if passed is None:
                return None
            sites.append(passed)
    return sites


def _importers(directory: str, stem: str, read: dict[str, tuple[int, int]]) -> list[str] | None:
    """The ``.py`` files of ``directory`` whose import lines name module ``stem`` (None: too
    many files to scan).  The directory and each file scanned are recorded as read."""
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".py"))
    except OSError:
        return None
    if len(names) > MAX_SCANNED:
        return None
    where = stamp(directory)
    if where is not None:
        read[directory] = where
    # `import train`, `import engine.train as t`, `from train import fit`, `from .train import fit`,
    # `from engine.train import fit`, `from engine import train`
    imports = re.compile(
        rf"^[ \t]*(?:import[ \t]+[^\n#]*\b{stem}\b|from[ \t]+[\w.]*\b{stem}[ \t]+import\b"
        rf"|from[ \t]+[\w.]+[ \t]+import[ \t(]+[^\n#]*\b{stem}\b)", re.MULTILINE)
    found: list[str] = []
    for name in names:
        if name == stem + ".py":
            continue
        path = os.path.join(directory, name)
        text = _text(path, read)
        if text is not None and stem in text and imports.search(text):
            found.append(path)
    return found


_texts: dict[str, tuple[tuple[int, int], str]] = {}


def _text(path: str, read: dict[str, tuple[int, int]]) -> str | None:
    """The file's text (kept per process while its stamp holds); recorded as read."""
    now = stamp(path)
    if now is None:
        return None
    read[path] = now
    known = _texts.get(path)
    if known is not None and known[0] == now:
        return known[1]
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if len(_texts) >= 4 * MAX_SCANNED:
        _texts.pop(next(iter(_texts)))
    _texts[path] = (now, text)
    return text
