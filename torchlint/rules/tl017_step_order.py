"""TL017 step-order: in one iteration the optimizer step only ever sees zeroed gradients.

The order of the three events within one pass through a repeated body (a loop iteration,
or a function called once per step) decides what ``step()`` sees.  Wrong, as measured:
``backward(); zero_grad(); step()`` and ``zero_grad(); step(); backward()`` — and, across
the loop's back edge, ``step(); backward(); zero_grad()`` — the step reads gradients that
were just reset, and the weights never move.

Events come from the shared recognition (``ctx.autograd_event``); order, dominance and
early exits from the body's ``ctx.flow``.  Reported only when certain: the zeroing runs on
every pass before the step (it dominates it), no ``backward()`` and no call that might hide
one (``events.may_hide_autograd``, a helper of this file) can run between them, and the
zeroing is of the stepping optimizer (or of a module whose parameters it was built on).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from torchlint import fixes
from torchlint.analysis import Kind, dotted_name
from torchlint.analysis.events import EventKind, EventLog, gradient_reads, is_optimizer
from torchlint.analysis.flow import Flow
from torchlint.analysis.names import names_in
from torchlint.rule import Rule


@dataclass(eq=False)
class _Step:
    call: cst.Call
    body: cst.CSTNode
    key: str  # the optimizer, as written
    covers: frozenset[str]  # modules whose parameters the optimizer was built on
    statement: cst.CSTNode | None


@dataclass(eq=False)
class _Zeroing:
    call: cst.CSTNode
    key: str | None  # what is zeroed: an optimizer or a module, as written
    # ids of the loops and the function around it: which bodies it can be in.
    within: frozenset[int] = frozenset()
    body: cst.CSTNode | None = None  # the innermost repeated body around it
    statement: cst.CSTNode | None = None
    of_optimizer: bool = False


class StepOrder(Rule):
    code = "TL017"
    name = "step-order"
    summary = "The optimizer step runs after zero_grad() and before the next backward(): it only sees zeros"
    default = True
    tokens = ("zero_grad",)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._steps: list[_Step] = []
        self._zeroings: list[_Zeroing] = []
        self._log = EventLog(self.ctx)

    def visit_Assign(self, node: cst.Assign) -> None:
        if self.ctx.repeated_body() is not None:
            for target in node.targets:
                self._log.record_assignment(target.target, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        body = self.ctx.repeated_body()
        if body is None:
            return
        event = self._log.record(node)
        if event is None:
            return
        if event.kind is EventKind.ZERO_GRAD and event.subject is not None:
            function = self.ctx.function
            around = [*self.ctx.loops, *([function.node] if function is not None else [])]
            self._zeroings.append(_Zeroing(node, fixes.source_of(event.subject), frozenset(map(id, around)), body,
                                           self.ctx.statement, is_optimizer(self.ctx, event.subject)))
        elif event.kind is EventKind.STEP and event.subject is not None and not self._has_closure(node, event.subject):
            subject = event.subject
            self._steps.append(_Step(node, body, fixes.source_of(subject), self._covered_modules(subject),
                                     self.ctx.statement))

    @staticmethod
    def _has_closure(call: cst.Call, optimizer: cst.BaseExpression) -> bool:
        """``opt.step(closure)`` (LBFGS): the closure zeroes and backpropagates inside the step."""
        return any(arg.value is not optimizer for arg in call.args)

    def _covered_modules(self, optimizer: cst.BaseExpression) -> frozenset[str]:
        """``model`` for an optimizer built as ``SGD(model.parameters(), ...)``."""
        value = self.ctx.value_of(optimizer)
        origin = value.origin
        if value.kind is not Kind.OPTIMIZER or type(origin) is not cst.Call:
            return frozenset()
        return frozenset(name for arg in origin.args for name in names_in(arg.value))

    # ------------------------------------------------------------ judgement
    def finish(self) -> None:
        for step in self._steps:
            self._judge(step)
        for zeroing in self._zeroings:
            self._judge_discarded(zeroing)

    def _judge_discarded(self, second: _Zeroing) -> None:
        """``opt.zero_grad(); loss.backward(); opt.zero_grad()`` with no step of ``opt`` in the pass:
        the zeroing stands where the step belongs, and the gradients of the backward are reset
        before anything uses them (nothing between reads or writes a gradient, steps, or may
        hide one of those in a call)."""
        body = second.body
        if body is None or second.key is None or not second.of_optimizer or any(
            step.key == second.key and step.body is body for step in self._steps
        ):
            return
        firsts = [z for z in self._zeroings if z is not second and z.key == second.key and z.body is body]
        if not firsts:
            return
        flow = self.ctx.flow(body)
        backwards = [b for b in self._log.backwards if flow.dominates(b, second.call)]
        if not backwards:
            return
        last = max(backwards, key=lambda b: flow.place(b).order)  # type: ignore[union-attr]
        if not any(flow.dominates(first.call, last) for first in firsts):
            return
        between = [*self._log.hidden_calls_in(flow), *self._log.gradient_writes_in(flow), *gradient_reads(body),
                   *(step.call for step in self._steps)]  # (another optimizer's step may own those parameters)
        if any(flow.between(node, last, second.call) for node in between):
            return
        self.report(
            second.call,
            f"`{fixes.source_of(second.call)}` right after `{fixes.source_of(last)}`, and `{second.key}` never "
            "steps in between: the gradients are reset before any step uses them, so the weights never move; "
            f"call `{second.key}.step()` here instead",
            statement=second.statement,
        )

    def _judge(self, step: _Step) -> None:
        if not any(id(step.body) in z.within for z in self._zeroings):
            return  # every finding needs a zeroing in the same body (and the flow costs a walk)
        flow = self.ctx.flow(step.body)
        backwards = [b for b in self._log.backwards if flow.contains(b)]
        if not backwards:
            return  # backward() happens elsewhere: the order cannot be told here
        # Calls that may backpropagate, and other ways of writing a gradient (p.grad = g).
        hidden = [*self._log.backward_calls_in(flow), *self._log.gradient_writes_in(flow)]
        zeroings = [z.call for z in self._zeroings if flow.contains(z.call) and self._zeroes(z, step)]
        for zeroing in zeroings:
            if not flow.dominates(zeroing, step.call) or any(
                flow.between(other, zeroing, step.call) for other in (*backwards, *hidden)
            ):
                continue
            earlier = [b for b in backwards if flow.before(b, zeroing)]
            if earlier:  # backward(); zero_grad(); step()
                last = max(earlier, key=lambda b: flow.place(b).order)  # type: ignore[union-attr]
                if self._stepped_between(step, flow, last, zeroing):
                    continue  # the gradients were used before the zeroing: this step is only redundant
                self._report(step, zeroing, "between")
                return
            # zero_grad(); step(); backward(): wrong only when the backward runs once per pass too
            # (not the loop of a train() function that steps once to set things up).
            depth = len(flow.place(step.call).frames)  # type: ignore[union-attr]
            if any(flow.before(step.call, b) and not _deeper_loop(flow, b, depth) for b in backwards):
                self._report(step, zeroing, "before")
                return
        if isinstance(step.body, (cst.For, cst.While)):
            self._judge_across_iterations(step, flow, backwards, hidden, zeroings)

    def _judge_across_iterations(
        self, step: _Step, flow: Flow, backwards: list[cst.CSTNode], hidden: list[cst.CSTNode], zeroings: list[cst.CSTNode]
    ) -> None:
        """``step(); backward(); zero_grad()``: the step sees what the previous iteration zeroed."""
        events = (*backwards, *hidden, *zeroings)
        if any(flow.before(event, step.call) for event in events):
            return
        first = min(backwards, key=lambda b: flow.place(b).order)  # type: ignore[union-attr]
        for zeroing in zeroings:
            place = flow.place(zeroing)
            assert place is not None
            if (
                place.unconditional
                and not any(flow.before(zeroing, other) for other in (*backwards, *hidden))
                and not flow.exits_between(first, zeroing)
            ):
                self._report(step, zeroing, "previous")
                return

    def _stepped_between(self, step: _Step, flow: Flow, start: cst.CSTNode, end: cst.CSTNode) -> bool:
        """Another step of the same optimizer runs between ``start`` and ``end``."""
        return any(
            other is not step and other.key == step.key and flow.between(other.call, start, end)
            for other in self._steps
        )

    def _zeroes(self, zeroing: _Zeroing, step: _Step) -> bool:
        """The zeroing resets the gradients the step uses."""
        return zeroing.key == step.key or (zeroing.key is not None and zeroing.key in step.covers)

    def _report(self, step: _Step, zeroing: cst.CSTNode, where: str) -> None:
        zero = f"`{fixes.source_of(zeroing)}`"
        call = f"`{step.key}.step()`" if dotted_name(step.call.func) == f"{step.key}.step" else "the step"
        if where == "between":
            order = f"{zero} runs after `backward()` and before {call}"
            remedy = "zero the gradients before `backward()` (or after the step)"
        elif where == "before":
            order = f"{call} runs after {zero} and before `backward()`"
            remedy = "call `backward()` before the step"
        else:
            order = f"{call} runs before `backward()`, and {zero} at the end of the iteration resets its gradients"
            remedy = "step after `backward()`, before zeroing"
        message = f"{order}: the step only ever sees zeroed gradients, so the weights never move; {remedy}"
        self.report(step.call, message, statement=step.statement)


def _deeper_loop(flow: Flow, node: cst.CSTNode, depth: int) -> bool:
    """``node`` sits in a loop nested below the first ``depth`` frames of the body."""
    place = flow.place(node)
    return place is not None and any(frame.loop for frame in place.frames[depth:])

