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

Computed once per call node, only for files whose rules track the module graph, and only for
callees whose text can have an effect (a backward, a step, a ``self.*`` binding or a return).
Depth is bounded; recursion answers nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.events import EventKind

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


def may_have_effects(graph: ModuleGraph, info: FunctionInfo) -> bool:
    """The callee's text has a backward, a step, a ``self.*`` binding or a return (cached)."""
    known = graph.effect_text.get(id(info))
    if known is None:
        code = graph.source_of(info.node)
        known = graph.effect_text[id(info)] = any(word in code for word in ("backward", "step(", "self.", "return"))
    return known


def call_effects(caller: ModuleGraph, call: cst.Call, info: FunctionInfo) -> CallEffects | None:
    """What ``call`` (a call of ``info``) does, analysed now (the caller is at the call)."""
    ctx = caller.ctx
    if ctx.summary_depth >= MAX_EFFECT_DEPTH or info.node.asynchronous is not None:
        return None
    if caller.in_progress(info) or not may_have_effects(caller, info):
        return None
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


__all__ = ["CallEffects", "Effect", "Place", "call_effects", "may_have_effects"]
