"""What calling a function of this file does to the graph, seen from the call site.

A call of a helper or a method defined here (``self._optimize(self.netD, self.d_optim, d_loss,
retain_graph=True)``, ``self.backward_G_alone()``, ``td = critic.learn(s, r, s_)``) may
backpropagate, step optimizers, store graph-carrying values on the instance and return one.  Its
*effects* are found by analysing the callee's body on behalf of the caller (a rule-less
analyzer, like ``summaries.py``) with a module graph (``module_graph.py``) that reads what the
caller knows: a parameter's value is the argument's (its forwards, the optimizer it is), an
attribute of ``self`` not bound in the callee is the receiver's at the call (``self.fake`` of
``self.method()``, ``critic.net`` of ``critic.learn()``).  Forwards the callee makes are new
forwards of the caller's graph (their serials order them with the caller's steps), named in the
caller's terms (``self.net`` of ``critic.learn()`` is ``critic.net``).

The effects, in the order the body runs them (nested calls flattened):

- a backward (or ``autograd.grad``): the forwards it reached, whether it kept the graph
  (``retain_graph=retain_graph`` resolved through the argument, or the parameter's default);
- a step: the modules the optimizer updates, in the caller's terms (None: not known);

and what the call leaves: the forwards of its return value, and of the ``self.*`` attributes it
(re)binds.  Each event carries its *path*: the call site in the caller, the nested calls, the
event itself, with the function each sits in (a rule reports where the mistake can be fixed).

Computed once per call node, only for files whose rules track the module graph.  Only callees
whose text backpropagates or steps are analysed, and only where the caller has another event
site for their effects to meet (not ``main()``) and the call connects to the caller's graph (a
method, a result used, an argument with a graph), and the methods ``__init__`` calls that hand
parameters over (what they build: optimizers, modules); a call of another method makes the ``self.*``
attributes it assigns, and what it returns, fresh: new forwards, at the call, of the modules those
attributes went through where the file's analysis saw them bound, and of those its ``return``
statements returned (``forward()`` run again after a step; ``policy_loss = self.get_p_loss(s)``).
Depth is bounded; recursion answers nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import re

import libcst as cst

from torchlint.analysis.events import EventKind
from torchlint.analysis.names import dotted_name
from torchlint.analysis.walk import children

if TYPE_CHECKING:
    from torchlint.analysis.module_graph import Forward, ModuleGraph
    from torchlint.analysis.scopes import FunctionInfo

# Helpers calling helpers: how deep effects are followed.
MAX_EFFECT_DEPTH = 3
# Callee bodies analysed for effects per file at the most.
MAX_EFFECT_ANALYSES = 64


@dataclass(frozen=True)
class Place:
    """A node on an effect's path and where it sits."""

    node: cst.CSTNode
    function: object  # the FunctionInfo (None: module level)
    statement: cst.CSTNode | None


@dataclass(frozen=True)
class Effect:
    kind: EventKind  # BACKWARD, GRAD or STEP
    path: tuple[Place, ...]  # the call site in the caller first, the event last
    serial: int  # the graph's serial at the event: forwards up to it ran before it
    reached: frozenset[Forward] = frozenset()  # BACKWARD/GRAD: the forwards it goes through
    keeps_graph: bool = False  # BACKWARD/GRAD: the saved tensors stay alive
    modules: frozenset[str] | None = None  # STEP: the modules it updates; None: not known


@dataclass
class CallEffects:
    effects: list[Effect] = field(default_factory=list)
    returned: frozenset[Forward] = frozenset()  # the forwards of the return value
    stored: dict[str, frozenset[Forward]] = field(default_factory=dict)  # caller key -> forwards
    assigned: dict[str, cst.BaseExpression] = field(default_factory=dict)  # caller key -> expression


_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)
_EVENT_WORDS = re.compile(r"backward|\.step\(")
# ``load_state_dict`` overwrites parameters in place, as a step does (``module_graph.overwritten_modules``);
# found with ``str.find``: one more branch of the regex would be tried at every position.
_OVERWRITE_WORD = ".load_state_dict("


def may_have_effects(graph: ModuleGraph, info: FunctionInfo) -> bool:
    """The callee's text may backpropagate or step: a ``def`` of its name whose text (up to the
    next ``def``) says ``backward``, ``.step(`` or ``.load_state_dict(`` -- found once per file from the source."""
    return info.name in _text_index(graph).event_functions


def defined_names(source: str) -> set[str]:
    """The names of the ``def`` statements of ``source`` (a quick test before resolving a call)."""
    return {match.group(1) for match in _DEF.finditer(source)}


@dataclass
class _TextIndex:
    event_functions: set[str]  # names of functions whose text may backpropagate or step
    event_sites: dict[str, int]  # function name -> event sites in its text (the most of its defs)
    builders: set[str]  # names of functions whose text hands parameters over (``.parameters()``)


def _text_index(graph: ModuleGraph) -> _TextIndex:
    root = graph.root
    if root.text_index is None:
        source = root.ctx.source
        headers = list(_DEF.finditer(source))
        spans = list(zip(headers, [match.start() for match in headers[1:]] + [len(source)]))
        events = {match.group(1) for match, end in spans if _EVENT_WORDS.search(source, match.end(), end)
                  or source.find(_OVERWRITE_WORD, match.end(), end) >= 0}
        sites: dict[str, int] = {}
        builders = {match.group(1) for match, end in spans if source.find(".parameters(", match.end(), end) >= 0}
        calls = re.compile(r"\b(?:%s)\s*\(" % "|".join(map(re.escape, sorted(events)))) if events else None
        for match, end in spans:
            count = len(_EVENT_WORDS.findall(source, match.end(), end))
            count += len(calls.findall(source, match.end(), end)) if calls is not None else 0
            sites[match.group(1)] = max(count, sites.get(match.group(1), 0))
        root.text_index = _TextIndex(events, sites, builders)
    return root.text_index


def assigned_self_attributes(graph: ModuleGraph, info: FunctionInfo) -> frozenset[str]:
    """The ``self.*`` keys the body of a method assigns (nested functions aside), found once."""
    root = graph.root
    known = root.self_assignments.get(id(info))
    if known is None:
        keys: set[str] = set()
        blocks: list[cst.CSTNode] = [info.node.body]
        while blocks:  # statements only (assignments are statements): cheaper than every node
            block = blocks.pop()
            for statement in getattr(block, "body", ()):
                kind = type(statement)
                if kind is cst.SimpleStatementLine:
                    for small in statement.body:  # type: ignore[attr-defined]
                        if type(small) is cst.Assign:
                            for target in small.targets:  # type: ignore[attr-defined]
                                keys.update(_self_keys(target.target))
                        elif type(small) is cst.AnnAssign or type(small) is cst.AugAssign:
                            keys.update(_self_keys(small.target))  # type: ignore[attr-defined]
                elif kind is not cst.FunctionDef and kind is not cst.ClassDef:
                    blocks.extend(blocks_of(statement))
        known = root.self_assignments[id(info)] = frozenset(keys)
    return known


def meets_other_events(graph: ModuleGraph, function: FunctionInfo | None) -> bool:
    """The caller (``function``, or the module's own statements) has two event sites or more --
    ``backward``/``step`` calls, calls of functions that may run one -- so the effects of one
    of them can meet another (functions: counted in the text; the module: once, in its tree)."""
    index = _text_index(graph)
    if function is not None:
        return index.event_sites.get(function.name, 0) >= 2
    root = graph.root
    if root.module_event_sites is None:
        count = 0
        for node in _own_nodes(root.ctx.module):
            if type(node) is cst.Call:
                func = node.func  # type: ignore[attr-defined]
                name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
                count += name in ("backward", "step") or name in index.event_functions
        root.module_event_sites = count
    return root.module_event_sites >= 2


def _connected(caller: ModuleGraph, call: cst.Call, info: FunctionInfo) -> bool:
    """What the callee does can reach the caller's graph: a method of an instance (what it
    leaves on it), a result the caller uses, or an argument that carries a graph."""
    if info.is_method or caller.ctx.expression_statement(call) is None:
        return True
    return any(caller.forwards_of(arg.value) for arg in call.args)


def _returns_unseen(caller: ModuleGraph, call: cst.Call, info: FunctionInfo) -> bool:
    """A method without backward or step whose result the caller keeps (``policy_loss =
    self.calc_policy_loss(batch)``) and whose body the file's analysis has not been through
    (defined further down): what it returns is found by analysing it now."""
    return info.is_method and caller.parent is None and not info.returns \
        and caller.ctx.expression_statement(call) is None


def blocks_of(statement: cst.CSTNode) -> list[cst.CSTNode]:
    """The suites of a compound statement: its body, ``elif``/``else``, handlers, ``finally``, cases."""
    found: list[cst.CSTNode] = []
    for name in ("body", "orelse", "finalbody"):
        part = getattr(statement, name, None)
        if type(part) is cst.If:
            found.extend(blocks_of(part))  # elif
        elif type(part) in (cst.Else, cst.Finally):
            found.append(part.body)
        elif isinstance(part, cst.BaseSuite):
            found.append(part)
    for handler in (*getattr(statement, "handlers", ()), *getattr(statement, "cases", ())):
        found.append(handler.body)
    return found


def _own_nodes(body: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes of ``body``, not those of the functions and classes defined in it."""
    found: list[cst.CSTNode] = []
    stack = list(children(body))
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.FunctionDef or kind is cst.ClassDef or kind is cst.Lambda:
            continue
        found.append(node)
        stack.extend(children(node))
    return found


def _self_keys(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [key for element in target.elements for key in _self_keys(element.value)]
    if isinstance(target, cst.StarredElement):
        return _self_keys(target.value)
    key = dotted_name(target)
    return [key] if key is not None and key.startswith("self.") else []


def call_effects(caller: ModuleGraph, call: cst.Call, info: FunctionInfo) -> CallEffects | None:
    """What ``call`` (a call of ``info``) does, analysed now (the caller is at the call)."""
    ctx = caller.ctx
    if ctx.summary_depth >= MAX_EFFECT_DEPTH or info.node.asynchronous is not None:
        return None
    if caller.in_progress(info):
        return None
    function = ctx.function
    # `self._build_net()` from `__init__`: the optimizers (and modules) it puts on the instance
    building = function is not None and function.name == "__init__" and info.name in _text_index(caller).builders \
        and bool(assigned_self_attributes(caller, info))
    if not building and not may_have_effects(caller, info):
        fresh = caller.fresh_stores(call, info)  # (no backward or step: only what it leaves on self)
        if fresh is not None or not _returns_unseen(caller, call, info) or not meets_other_events(caller, function):
            return fresh
    elif not building and not meets_other_events(caller, function):
        return None  # `main()`: nothing in the caller for its steps and backwards to meet
    if not building and not _connected(caller, call, info):
        return None  # `train(loader, model, opt)`: its effects stay inside it
    root = caller.root
    if root.effect_analyses >= MAX_EFFECT_ANALYSES:
        return None
    root.effect_analyses += 1
    from torchlint.analysis.analyzer import Analyzer
    from torchlint.analysis.functions import argument_expressions
    from torchlint.analysis.module_graph import ModuleGraph

    helper = Analyzer.for_summary(ctx)
    receiver = call.func.value if isinstance(call.func, cst.Attribute) and info.is_method else None
    graph = ModuleGraph(helper, parent=caller, callee=info, call=call, receiver=receiver,
                        arguments=argument_expressions(call, info) or {})
    helper.module_graph = graph
    helper.summarise(info, ctx.arguments_passed(call, info) or {})
    caller.serial = graph.serial
    return CallEffects(graph.recorded, graph.returned, graph.stored_attributes(), graph.assigned_attributes())


__all__ = ["CallEffects", "Effect", "Place", "assigned_self_attributes", "blocks_of", "call_effects", "defined_names", "may_have_effects", "meets_other_events"]
