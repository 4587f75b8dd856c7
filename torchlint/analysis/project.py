"""The linted file's own project: what a class or function imported from a sibling file is.

Research code keeps the model in ``network.py`` and the training loop in ``train.py``
(``import network as net; model = net.Network()``), or its own optimizer in
``optimizers.py``.  For an import whose target is a Python file next to the linted file or
under its package root, this module answers the questions rules ask about the imported
name, from that file: whether a class is an ``nn.Module`` (from its ``class`` line), what
its ``forward`` returns (a softmax output: from a rule-less analysis of the file), whether
an optimizer class's ``step`` zeroes the gradients.

Everything is lazy and bounded: a file is read only when a call names something imported
from it, parsed only when a rule asks a question the ``class`` line cannot answer; re-exports
and imports of imported files are followed ``MAX_DEPTH`` deep, a linted file reads at most
``MAX_FILES`` others, and what a file says is kept per process, keyed by path, size and
modification time (an editor's long-lived process sees a sibling change).  The files read
are recorded in the ``Session`` so that the results cache can tell when a finding that
depends on another file is stale.  Unsure means silent: an import that does not resolve
stays unknown.  Only a file that exists on disk has a project (stdin, an editor's unsaved
buffer or a notebook without a path get none).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.names import dotted_name, through_grad
from torchlint.analysis.scopes import ClassInfo
from torchlint.analysis.torch_api import (
    GRAD_ZEROING_METHODS, NN_MODULE_BASE, PARAMETER_OVERWRITING_METHODS, STEP_METHODS, ZERO_GRAD_METHODS,
)
from torchlint.analysis.values import Value, join
from torchlint.project_files import Stamp, current_session, stamp, unchanged

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer

# How far imports are followed: a re-export in a package's ``__init__.py``, and the imports of
# an imported file (its model's forward may use a layer from a third file).
MAX_DEPTH = 2
# Files whose contents are kept per process (the most recently used).
MAX_KEPT = 128
# How many method calls deep ``step`` is followed (``self.clear_gradients()``, ``super().step()``).
MAX_CALL_DEPTH = 3
# Methods whose text says this may copy into a module's parameters (``PARAMETER_OVERWRITING_METHODS``).
_OVERWRITE_WORD = ".load_state_dict("

# ---------------------------------------------------------------- one project file
_CLASS = re.compile(r"^class[ \t]+(\w+)[ \t]*(?:\(([^)]*)\))?[ \t]*:", re.MULTILINE)
_DEF = re.compile(r"^(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", re.MULTILINE)
_FROM_IMPORT = re.compile(r"^from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)", re.MULTILINE)
_ALL = re.compile(r"^__all__[ \t]*=[ \t]*[\[(]([^\])]*)[\])]", re.MULTILINE)
_STAR_IMPORT = re.compile(r"^from[ \t]+[\w.]+[ \t]+import[ \t]*\*", re.MULTILINE)
_QUOTED = re.compile(r"""['"](\w+)['"]""")
# Base classes that make a class an nn.Module, as written in a ``class`` line; a bare ``Module``
# only when the file imports it from torch (by name or with ``from torch.nn import *``).
_MODULE_BASES = frozenset({"nn.Module", NN_MODULE_BASE})
_MODULE_IMPORT = re.compile(r"^from[ \t]+torch\.nn[ \t]+import[^\n]*(?:\bModule\b|\*)", re.MULTILINE)


@dataclass(eq=False)
class _File:
    path: str
    stamp: Stamp
    text: str
    _definitions: dict[str, tuple[str, str]] | None = None  # name -> ("class", bases) | ("def", "")
    _reexports: dict[str, tuple[int, tuple[str, ...]]] | None = None
    _analysis: Analyzer | None = None
    _analysis_reads: tuple[tuple[str, int, int], ...] = ()
    _tree: cst.Module | None = None
    _objects: dict[str, ProjectObject] = field(default_factory=dict)
    # (class, method) -> the attributes of ``self`` the method overwrites (``overwritten_attributes``)
    overwrites: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    failed: bool = False

    def definition(self, name: str) -> tuple[str, str] | None:
        if self._definitions is None:
            found: dict[str, tuple[str, str]] = {}
            for match in _DEF.finditer(self.text):
                found[match.group(1)] = ("def", "")
            for match in _CLASS.finditer(self.text):
                found[match.group(1)] = ("class", match.group(2) or "")
            self._definitions = found
        return self._definitions.get(name)

    def reexport(self, name: str) -> tuple[int, tuple[str, ...]] | None:
        """``from .net import Net`` (or ``... as Net``) in this file: where ``Net`` comes from."""
        if self._reexports is None:
            found: dict[str, tuple[int, tuple[str, ...]]] = {}
            for match in _FROM_IMPORT.finditer(self.text):
                dots, module, names = match.groups()
                parts = tuple(p for p in module.split(".") if p)
                for item in names.strip("()").replace("\n", " ").split(","):
                    words = item.split()
                    if len(words) == 1 and words[0].isidentifier():
                        found[words[0]] = (len(dots), (*parts, words[0]))
                    elif len(words) == 3 and words[1] == "as" and words[2].isidentifier():
                        found[words[2]] = (len(dots), (*parts, words[0]))
            self._reexports = found
        return self._reexports.get(name)

    def star_exports(self) -> frozenset[str] | None:
        """The names ``from this import *`` binds that the index knows: its ``__all__`` (None
        when it is not one literal list), else its public top-level classes, functions and
        names it imports by name."""
        if "__all__" in self.text:
            match = _ALL.search(self.text)
            if match is None or len(_ALL.findall(self.text)) != 1 or re.search(r"^__all__[ \t]*\+=", self.text, re.MULTILINE):
                return None
            return frozenset(_QUOTED.findall(match.group(1)))
        self.definition("")
        self.reexport("")
        known = {*(self._definitions or ()), *(self._reexports or ())}
        return frozenset(name for name in known if not name.startswith("_"))

    def tree(self) -> cst.Module | None:
        if self._tree is None and not self.failed:
            try:
                self._tree = cst.parse_module(self.text)
            except Exception:  # noqa: BLE001 - a file that does not parse tells nothing ...
                self._tree = _parse_salvaging(self.text)  # ... but its statements may, one by one
                self.failed = self._tree is None
        return self._tree

    def analysis(self, depth: int) -> Analyzer | None:
        """A rule-less analysis of the whole file (what its functions return).  The files it
        read in turn are dependencies of whoever uses it; a change to one of them redoes it."""
        session = current_session()
        if session is None or self.failed:
            return None
        if self._analysis is not None and unchanged(self._analysis_reads):
            session.read.update((path, (size, mtime)) for path, size, mtime in self._analysis_reads)
            return self._analysis
        tree = self.tree()
        if tree is None:
            return None
        from torchlint.analysis.analyzer import Analyzer

        analyzer = Analyzer(tree, tree.code, project=ProjectImports.of_file(self.path, depth + 1))
        outer, session.read = session.read, {}
        try:
            analyzer.run()
        except Exception:  # noqa: BLE001 - (RecursionError ...): no answer
            self.failed = True
            return None
        finally:
            inner, session.read = session.read, outer
            outer.update(inner)
        self._analysis, self._analysis_reads = analyzer, tuple((path, *known) for path, known in inner.items())
        return analyzer

    def class_node(self, name: str) -> cst.ClassDef | None:
        tree = self.tree()
        if tree is None:
            return None
        for statement in tree.body:
            if type(statement) is cst.ClassDef and statement.name.value == name:
                return statement
        return None


# A line that starts a top-level statement (not a comment, a continuation or a closing bracket).
_TOP_LEVEL_START = re.compile(r"^[A-Za-z_@]", re.MULTILINE)


def _parse_salvaging(text: str) -> cst.Module | None:
    """The top-level statements of ``text`` that parse on their own, as one module: old research
    code keeps a Python 2 ``print "..."`` in a test class next to the model class it exports.
    None when none parses."""
    starts = [match.start() for match in _TOP_LEVEL_START.finditer(text)]
    kept: list[str] = []
    decorators = ""
    for start, end in zip(starts, [*starts[1:], len(text)]):
        chunk = decorators + text[start:end].rstrip() + "\n"
        if chunk.startswith("@") and text.startswith("@", start):
            decorators = chunk  # (a decorator goes with the definition below it)
            continue
        decorators = ""
        try:
            cst.parse_module(chunk)
        except Exception:  # noqa: BLE001 - a statement that does not parse is left out
            continue
        kept.append(chunk)
    if not kept:
        return None
    try:
        return cst.parse_module("".join(kept))
    except Exception:  # noqa: BLE001
        return None


_files: dict[str, _File] = {}


def _load(path: str) -> _File | None:
    """The file at ``path`` as it is now (recorded in the session), or None."""
    current = current_session()
    if current is None or not current.may_read(path):
        return None
    now = stamp(path)
    if now is None:
        return None
    known = _files.get(path)
    if known is None or known.stamp != now:
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        if len(_files) >= MAX_KEPT:
            _files.pop(next(iter(_files)))
        known = _files[path] = _File(path, now, text)
    else:
        _files[path] = _files.pop(path)  # most recently used last
    current.read[path] = now
    return known


load_file = _load  # (for ``importers.py``)


# ---------------------------------------------------------------- what an import names
@dataclass(eq=False)
class ProjectObject:
    """A top-level class or function of a project file."""

    file: _File
    name: str
    depth: int


@dataclass(eq=False)
class ProjectFunction(ProjectObject):
    def may_return_zeroing_optimizer(self) -> bool:
        """The function may hand out an instance of its file's optimizer class whose ``step``
        zeroes the gradients (a factory ``get("sgd")``; what it returns is not followed)."""
        tree = self.file.tree()
        if tree is None:
            return False
        return any(
            type(statement) is cst.ClassDef and ProjectClass(self.file, statement.name.value, self.depth).step_zeroes()
            for statement in tree.body
        )


@dataclass(eq=False)
class ProjectMethod(ProjectObject):
    """A method ``name`` of the project class ``class_name`` (called on one of its instances)."""

    class_name: str = ""


@dataclass(eq=False)
class ProjectClass(ProjectObject):
    bases: str = ""
    _info: ProjectClassInfo | None = None

    @functools.cached_property
    def is_module(self) -> bool:
        return self._is_module(set())

    def _is_module(self, seen: set[str]) -> bool:
        seen.add(self.name)
        for base in (b.strip() for b in self.bases.split(",")):
            if base in _MODULE_BASES or (base == "Module" and _MODULE_IMPORT.search(self.file.text)):
                return True
            if base.isidentifier() and base not in seen:
                found = self.file.definition(base)  # a base class of the same file
                if found is not None and found[0] == "class":
                    if ProjectClass(self.file, base, self.depth, found[1])._is_module(seen):
                        return True
        return False

    def info(self) -> ProjectClassInfo:
        """The stand-in ``ClassInfo`` of MODULE values built from this class (one per class,
        so that joins keep it): no methods or attributes the caller's analysis could look into."""
        if self._info is None:
            self._info = ProjectClassInfo(self.name, None, [NN_MODULE_BASE] if self.is_module else [])  # type: ignore[arg-type]
            self._info.project = self
        return self._info

    def forward_returns(self) -> Value | None:
        """The join of what ``forward`` returns, from the analysis of the class's file."""
        analysis = self.file.analysis(self.depth)
        if analysis is None:
            return None
        cls = analysis.scope.classes.get(self.name)
        forward = cls.forward_method() if cls is not None else None
        if forward is None or not forward.returns:
            return None
        return functools.reduce(join, forward.returns)

    def method_node(self, name: str) -> cst.FunctionDef | None:
        """The ``def`` of the class's method ``name`` (or of a base class of the same file's)."""
        return _method_node(self.file, self.name, name, 0)

    def overwritten_attributes(self, method: str) -> frozenset[str]:
        """The attributes of ``self`` (dotted, ``""`` for the instance itself) whose parameters the
        method ``method`` copies into in place, as a step does: ``self.target_actor.load_state_dict(sd)``,
        in its body or in the methods of ``self`` it calls (``MAX_CALL_DEPTH`` deep)."""
        key = (self.name, method)
        found = self.file.overwrites.get(key)
        if found is None:
            found = self.file.overwrites[key] = _method_overwrites(self.file, self.name, method, 0, set())
        return found

    def step_zeroes(self) -> bool:
        """The class's ``step`` (through ``self.<method>()`` and ``super().step()``) resets the
        gradients: ``p.grad.zero_()``, ``p.grad = None``, ``zero_grad()``."""
        return _method_zeroes(self.file, self.name, next(iter(STEP_METHODS)), 0)


class ProjectClassInfo(ClassInfo):
    """``ClassInfo`` of a class of another project file (``node`` None)."""

    project: ProjectClass


def _method_zeroes(file: _File, class_name: str, method: str, depth: int) -> bool:
    if depth > MAX_CALL_DEPTH:
        return False
    node = file.class_node(class_name)
    if node is None:
        return False
    body = next((s for s in node.body.body if type(s) is cst.FunctionDef and s.name.value == method), None)
    if body is None:  # inherited: a base class of the same file
        return any(_method_zeroes(file, base, method, depth + 1) for base in _base_names(node))
    finder = _ZeroingFinder()
    body.visit(finder)
    if finder.zeroes:
        return True
    if any(_method_zeroes(file, class_name, called, depth + 1) for called in finder.self_calls if called != method):
        return True
    return finder.calls_super and any(_method_zeroes(file, base, method, depth + 1) for base in _base_names(node))


def _method_overwrites(file: _File, class_name: str, method: str, depth: int, seen: set[str]) -> frozenset[str]:
    if depth > MAX_CALL_DEPTH or method in seen or file.text.find(_OVERWRITE_WORD) < 0:
        return frozenset()
    seen.add(method)
    body = _method_node(file, class_name, method, 0)
    if body is None:
        return frozenset()
    finder = _OverwriteFinder()
    body.body.visit(finder)
    found = set(finder.overwritten)
    for called in finder.self_calls:
        found |= _method_overwrites(file, class_name, called, depth + 1, seen)
    return frozenset(found)


def _method_node(file: _File, class_name: str, method: str, depth: int) -> cst.FunctionDef | None:
    node = file.class_node(class_name) if depth <= MAX_CALL_DEPTH else None
    if node is None:
        return None
    found = next((s for s in node.body.body if type(s) is cst.FunctionDef and s.name.value == method), None)
    if found is not None:
        return found
    return next((d for base in _base_names(node) if (d := _method_node(file, base, method, depth + 1))), None)


def _base_names(node: cst.ClassDef) -> list[str]:
    return [arg.value.value for arg in node.bases if arg.keyword is None and type(arg.value) is cst.Name]


class _ZeroingFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.zeroes = False
        self.self_calls: set[str] = set()
        self.calls_super = False

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute:
            return
        method = func.attr.value
        if method in ZERO_GRAD_METHODS or (method in GRAD_ZEROING_METHODS and through_grad(func.value)):
            self.zeroes = True
        elif type(func.value) is cst.Name and func.value.value == "self":
            self.self_calls.add(method)
        elif type(func.value) is cst.Call and dotted_name(func.value.func) == "super":
            self.calls_super = True

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        target = node.target
        if type(target) is cst.Attribute and target.attr.value == "grad":
            self.zeroes = True  # `p.grad = None`


class _OverwriteFinder(cst.CSTVisitor):
    """``self.<attr>.load_state_dict(...)`` calls, and the methods of ``self`` called."""

    def __init__(self) -> None:
        self.overwritten: set[str] = set()
        self.self_calls: set[str] = set()

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute:
            return
        key = dotted_name(func.value)
        if key is None or key.split(".", 1)[0] != "self":
            return
        if func.attr.value in PARAMETER_OVERWRITING_METHODS:
            self.overwritten.add(key[5:])
        elif key == "self":
            self.self_calls.add(func.attr.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False  # (a function nested in the method runs only when it is called)

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False


# ---------------------------------------------------------------- the imports of one file
def _package_root(directory: str) -> str:
    """The directory above the top package around ``directory`` (itself when it is none)."""
    root = directory
    while os.path.isfile(os.path.join(root, "__init__.py")):
        parent = os.path.dirname(root)
        if parent == root:
            break
        root = parent
    return root


package_root = _package_root  # (for ``importers.py``)


def _module_file(base: str, parts: Sequence[str]) -> str | None:
    if not parts:
        candidate = os.path.join(base, "__init__.py")
        return candidate if os.path.isfile(candidate) else None
    stem = os.path.join(base, *parts)
    for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


class ProjectImports:
    """The names one file imports from its project, recorded as the analysis meets the imports
    (``import network as net``, ``from .optimizers import SGD``, ``from . import optimizers``)."""

    def __init__(self, path: str, depth: int) -> None:
        self.path = path
        self.depth = depth
        self.names: dict[str, tuple[int, tuple[str, ...]]] = {}
        # ``from models import *``: (level, module parts), in import order.
        self.stars: list[tuple[int, tuple[str, ...]]] = []
        self._starred: dict[str, tuple[int, tuple[str, ...]] | None] = {}
        self._resolved: dict[tuple[int, tuple[str, ...]], ProjectObject | None] = {}

    @classmethod
    def current(cls) -> ProjectImports | None:
        """For the file being linted (None: it has no project)."""
        found = current_session()
        return cls(found.path, 0) if found is not None else None

    @classmethod
    def of_file(cls, path: str, depth: int) -> ProjectImports | None:
        return cls(path, depth) if depth <= MAX_DEPTH and current_session() is not None else None

    # ------------------------------------------------------------ recording
    def add_import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            parts = tuple(full.split("."))
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                self.names[alias.asname.name.value] = (0, parts)
            else:
                self.names[parts[0]] = (0, parts[:1])

    def add_import_from(self, node: cst.ImportFrom) -> None:
        module = dotted_name(node.module) if node.module is not None else ""
        if module is None:
            return
        parts = tuple(p for p in module.split(".") if p)
        if type(node.names) is cst.ImportStar:
            self.stars.append((len(node.relative), parts))
            self._starred.clear()
            return
        for alias in node.names:
            if type(alias.name) is not cst.Name:
                continue
            local = alias.name.value
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                local = alias.asname.name.value
            self.names[local] = (len(node.relative), (*parts, alias.name.value))

    # ------------------------------------------------------------ questions
    def may_name(self, name: str) -> bool:
        """``name`` may be imported from the project (by name, or by a star import)."""
        return name in self.names or bool(self.stars)

    def object_of(self, expr: cst.BaseExpression) -> ProjectObject | None:
        """The class or function of a project file that ``expr`` (``Net``, ``net.Network``) names."""
        dotted = dotted_name(expr)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        target = self.names.get(head)
        if target is None and self.stars:
            if head not in self._starred:
                self._starred[head] = self._star_source(head)
            target = self._starred[head]
        if target is None:
            return None
        key = (target[0], target[1] + tuple(rest.split(".")) if rest else target[1])
        if key not in self._resolved:
            self._resolved[key] = self._resolve(*key)
        return self._resolved[key]

    def imported_classes(self) -> list[ProjectClass]:
        """The project classes the file imports by name (``from client import Client``)."""
        found = (self.object_of(cst.Name(local)) for local in list(self.names))
        return [obj for obj in found if isinstance(obj, ProjectClass)]

    def _star_source(self, name: str) -> tuple[int, tuple[str, ...]] | None:
        """Where a star import binds ``name``: the last star import whose project file exports
        it.  A project file whose ``__all__`` cannot be read, or that itself star-imports, may
        bind anything: unknown from there on."""
        for level, parts in reversed(self.stars):
            file = self._module(level, parts)
            if file is None:
                continue  # not a project file (a library's names are not project classes)
            exports = file.star_exports()
            if exports is None:
                return None
            if name in exports:
                return level, (*parts, name)
            if _STAR_IMPORT.search(file.text):  # (it may pass on what a star import binds)
                return None
        return None

    def _module(self, level: int, parts: tuple[str, ...]) -> _File | None:
        for base in self._bases(level, parts[0] if parts else ""):
            path = _module_file(base, parts)
            if path is not None:
                return _load(path)
        return None

    def _resolve(self, level: int, parts: tuple[str, ...]) -> ProjectObject | None:
        # The longest prefix that is a module file; the next part is a name defined there.
        for split in range(len(parts) - 1, 0 if level == 0 else -1, -1):
            for base in self._bases(level, parts[0] if split else ""):
                path = _module_file(base, parts[:split])
                if path is None:
                    continue
                if split < len(parts) - 1:
                    return None  # `pkg.mod.Cls.attr`, or a submodule's name: not followed
                return _object_in(path, parts[split], self.depth)
        return None

    def _bases(self, level: int, first: str) -> list[str]:
        """Directories an import of this level (and first name) is looked up from: for a
        relative import the package it names; else the linted file's directory (a script's
        imports) and the directory above its top package."""
        here = os.path.dirname(self.path)
        if level:
            for _ in range(level - 1):
                here = os.path.dirname(here)
            return [here]
        root = _package_root(here)
        bases = [here] if root == here else [here, root]
        if root == here and os.path.basename(here) == first:
            # A directory without `__init__.py` imported from above (`from runners.misc
            # import X` in runners/x.py, run from the repository's root).
            bases.append(os.path.dirname(here))
        return bases


def _object_in(path: str, name: str, depth: int) -> ProjectObject | None:
    file = _load(path)
    if file is None:
        return None
    known = file._objects.get(name)
    if known is not None:
        return known
    definition = file.definition(name)
    if definition is not None:
        kind, bases = definition
        found = ProjectClass(file, name, depth, bases) if kind == "class" else ProjectFunction(file, name, depth)
        file._objects[name] = found
        return found
    source = file.reexport(name) if depth < MAX_DEPTH else None
    # (Not kept: the file it comes from is read, and recorded, on every lookup.)
    return ProjectImports(path, depth + 1)._resolve(*source) if source is not None else None
