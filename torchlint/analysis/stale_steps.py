"""Optimizer steps between a forward and a backward() through it (the GAN mistake, TL007).

``opt.step()`` changes the parameters of the modules the optimizer was built from in place: a
later backward() through a forward of one of them made before the step raises autograd's
in-place error.  When what a step updates is not known, it updates what the retained backward()
just before it reached.  Which modules a value's graph went through, which an optimizer updates
and what a call of the file's own function runs (its backwards and steps, ``effects.py``) are the
module graph's (``module_graph.py``); this keeps, per function in program order, the steps
waiting for such a backward(), the forwards a backward() freed or retained, and per loop the
steps and retained graphs a second iteration meets again.  A rule reports what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.analysis.effects import CallEffects, Place
from torchlint.analysis.events import EventKind
from torchlint.analysis.module_graph import Forward, ModuleGraph, related

if TYPE_CHECKING:
    from torchlint.analysis.analyzer import Analyzer

_NO_FORWARDS: frozenset[Forward] = frozenset()


@dataclass(frozen=True)
class Step:
    """An optimizer step, stale once a backward() through a forward it changed follows."""

    node: cst.Call  # the step, or the call of this function's that runs it
    serial: int  # the module graph's serial at the step: forwards up to it ran before it
    modules: frozenset[str] | None  # the modules it updates; None: not known
    retained: frozenset[Forward]  # (not known) the graph the retained backward() before it reached
    statement: cst.CSTNode | None
    # A step in a function this one calls: the call, the nested calls, the step (effects.py).
    path: tuple[Place, ...] = ()
    overwrites: bool = False  # a copy into the parameters (``load_state_dict``), not an optimizer's step


@dataclass(frozen=True)
class StaleStep:
    """A step whose changed parameters ``forward`` saved for a backward() after it."""

    step: Step
    forward: Forward
    next_iteration: bool = False  # the backward() runs again on the loop's next iteration
    backward: tuple[Place, ...] = ()  # the backward(), or the calls down to it


@dataclass
class _Loop:
    """A loop being analysed: its steps and the graphs its retained backward() calls reached."""

    scope: object
    serial: int  # the module graph's serial before the loop: forwards up to it were made before it
    bindings: int  # the module graph's binding count before the loop
    steps: list[Step] = field(default_factory=list)
    retained: list[frozenset[Forward]] = field(default_factory=list)


class StaleSteps:
    """Steps and backwards of one file's walk, told as the walk meets them (see the module docstring)."""

    def __init__(self, ctx: Analyzer, graph: ModuleGraph) -> None:
        self._ctx = ctx
        self._graph = graph
        self._steps: dict[object, list[Step]] = {}  # scope -> steps waiting for a backward()
        self._freed: dict[object, set[int]] = {}  # scope -> forwards (call ids) a backward() freed
        self._retained: dict[object, frozenset[Forward]] = {}  # scope -> the graph the last backward() kept
        self._loops: list[_Loop] = []  # the loops being analysed, innermost last

    def enter_loop(self) -> None:
        self._loops.append(_Loop(self._ctx.function, self._graph.serial, self._graph.bindings))

    def leave_loop(self) -> list[StaleStep]:
        """A retained backward() in a loop through a forward made before the loop runs again on
        the next iteration, after the loop's step changed that forward's module (SinGAN's G steps
        over one ``fake``)."""
        loop = self._loops.pop()
        found: list[StaleStep] = []
        for step in loop.steps:
            if step.modules is None:
                continue
            for reached in loop.retained:
                hits = [f for f in reached if f.serial <= loop.serial and f.saves_parameters
                        and any(related(f.module, m) for m in step.modules)
                        and self._graph.held_since(f, loop.bindings)]  # (not rebound in the loop)
                if hits:
                    found.append(StaleStep(step, min(hits, key=lambda forward: forward.serial), next_iteration=True))
                    break
        return found

    def optimizer_step(self, node: cst.Call, optimizer: cst.BaseExpression | None) -> None:
        """``opt.step()``: it updates the modules the optimizer was built from."""
        if optimizer is not None:
            self._add_step(node, self._graph.serial, self._graph.optimized_modules(optimizer), ())

    def overwrite(self, node: cst.Call, modules: frozenset[str]) -> None:
        """``m.load_state_dict(sd)`` (or a method of another file's class that runs one): it copies
        into the parameters of ``modules`` in place, as a step."""
        self._add_step(node, self._graph.serial, modules, (), overwrites=True)

    def backward(self, node: cst.Call, loss: cst.BaseExpression, keeps_graph: bool) -> list[StaleStep]:
        """A backward() from ``loss``: the steps before it that changed parameters its graph saved."""
        return self._backward_reaching(node, self._graph.forwards_of(loss), keeps_graph)

    def call_effects(self, node: cst.Call, effects: CallEffects) -> list[StaleStep]:
        """A call of a function of this file: its backward() calls and steps, in order."""
        here = Place(node, self._ctx.function, self._ctx.statement)
        found: list[StaleStep] = []
        for effect in effects.effects:
            if effect.kind is EventKind.STEP:
                self._add_step(node, effect.serial, effect.modules, (here, *effect.path))
            else:
                found += self._backward_reaching(node, effect.reached, effect.keeps_graph, (here, *effect.path))
        return found

    def _add_step(self, node: cst.Call, serial: int, modules: frozenset[str] | None, path: tuple[Place, ...],
                  overwrites: bool = False) -> None:
        scope = self._ctx.function
        retained = self._retained.get(scope, _NO_FORWARDS) if modules is None else _NO_FORWARDS
        if modules is not None and not modules or modules is None and not retained:
            return
        step = Step(node, serial, modules, retained, self._ctx.statement, path, overwrites)
        self._steps.setdefault(scope, []).append(step)
        for loop in self._loops:
            if loop.scope is scope:
                loop.steps.append(step)

    def _backward_reaching(
        self, node: cst.Call, reached: frozenset[Forward], keeps_graph: bool, path: tuple[Place, ...] = ()
    ) -> list[StaleStep]:
        """A backward() (``node``, or a call running it: ``path`` down to it) through the forwards ``reached``."""
        ctx, scope = self._ctx, self._ctx.function
        freed = self._freed.setdefault(scope, set())
        pending = self._steps.get(scope, [])
        found: list[StaleStep] = []
        for step in list(pending):
            stale = [f for f in reached if f.serial <= step.serial and id(f.call) not in freed and f.saves_parameters]
            hit = self._stale_forward(step, stale, reached)
            if hit is None or ctx.flow(ctx.region).exclusive(step.node, node):
                continue
            pending.remove(step)
            found.append(StaleStep(step, hit, backward=path or (Place(node, ctx.function, None),)))
        for loop in self._loops:
            if keeps_graph and loop.scope is scope:
                loop.retained.append(reached)
        if keeps_graph:
            self._retained[scope] = reached
        else:
            freed.update(id(forward.call) for forward in reached)
            self._retained.pop(scope, None)
        return found

    def _stale_forward(self, step: Step, stale: list[Forward], reached: frozenset[Forward]) -> Forward | None:
        """The forward made before ``step`` whose saved parameters ``step`` changed, if any."""
        if step.modules is not None:
            hits = [f for f in stale if any(related(f.module, module) for module in step.modules)]
        else:
            # Not known what it updates: what the retained backward() before it reached, but not a
            # module with an optimizer of its own.  One of those run again after the step is
            # probably the one stepped: silent.
            stepped = {f.module for f in step.retained
                       if not any(related(f.module, key) for key in self._graph.optimized_keys)}
            if any(f.serial > step.serial and any(related(f.module, m) for m in stepped) for f in reached):
                return None
            hits = [f for f in stale if f in step.retained and f.module in stepped]
        # The first forward of the stepped module itself (or of a part of it), else of a whole it is part of.
        inside = step.modules or frozenset(f.module for f in step.retained)
        return min(hits, key=lambda f: (not any(_within(f.module, m) for m in inside), f.serial)) if hits else None


def _within(key: str, module: str) -> bool:
    """``key`` names ``module`` or one of its parts."""
    return key == module or key.startswith(module + ".")


__all__ = ["StaleStep", "StaleSteps", "Step"]
